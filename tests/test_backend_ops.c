/* The op table walked, as ggml's test-backend-ops does: cases made of public calls (with
   broadcast, strided and 0-d operands) are run once on the cpu under a recorder that keeps
   every primitive op dispatched, with its inputs and arguments. Then
   - every recorded call is replayed at every dtype of its op's mask on the cpu and on every
     other backend registered with a device (the test backend of ext_backend.h, and the cuda
     backend when nabla is built with CUDA and a GPU is present), and the results compared by
     normalised mean squared error;
   - every recorded call of a differentiable op is checked in f64 against central finite
     differences, its float inputs replaced by values away from kinks and ties (same signs);
   - a coverage test fails naming each op of the table that no case reached, or that has a
     backward no gradient check ran. */
#include "test_util.h"
#include "ext_backend.h"

/* ---- the recorder ---- */
typedef struct call {
    nb_op_id op;
    int nin;
    nb_tensor *in[8];
    nb_op_args args;
    nb_dtype out_dtype;
    const char *case_name;
} call;

#define MAX_CALLS 4096
static call calls[MAX_CALLS];
static int ncalls;
static const char *current_case;
static bool replayed[NB_OP_COUNT], gradchecked[NB_OP_COUNT];

static void record(void *ctx, nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args, nb_tensor *out) {
    (void)ctx;
    if (ncalls == MAX_CALLS || nin > 8) return;
    call *c = &calls[ncalls++];
    c->op = op;
    c->nin = nin;
    for (int i = 0; i < nin; i++) c->in[i] = nb_retain(in[i]);
    c->args = *args;
    c->out_dtype = out->dtype;
    c->case_name = current_case;
}

/* ---- inputs ---- */
/* Deterministic values in [-1, 1], distinct per element and input. */
static double value_at(int64_t i, int input) { return sin(1.7 * (double)(i + 1) + 0.9 * input + 0.3); }

/* A tensor of shape with those values; transposed: a transposed view of one stored the other
   way round (a strided operand). */
static nb_tensor *input(nb_shape shape, nb_dtype dtype, int which, bool transposed) {
    nb_shape stored = shape;
    if (transposed && shape.ndim >= 2) {
        stored.dim[shape.ndim - 1] = shape.dim[shape.ndim - 2];
        stored.dim[shape.ndim - 2] = shape.dim[shape.ndim - 1];
    }
    int64_t n = 1;
    for (int d = 0; d < stored.ndim; d++) n *= stored.dim[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = value_at(i, which);
    nb_tensor *t = nb_cast(nb_from_data(v, stored, NB_F64), dtype);
    free(v);
    return transposed && shape.ndim >= 2 ? nb_transpose(t, -1, -2) : t;
}
static nb_tensor *positive(nb_tensor *t) { return nb_add_scalar(nb_abs(t), 0.25); }
static nb_tensor *indices(const int64_t *v, nb_shape shape) { return nb_from_data(v, shape, NB_I64); }
#define S(...) NB_SHAPE(__VA_ARGS__)

/* ---- the cases: public calls that reach every op ---- */
static void case_binary(void) {
    static nb_tensor *(*const fns[])(nb_tensor *, nb_tensor *) = { nb_add, nb_sub, nb_mul, nb_maximum, nb_minimum,
                                                                   nb_eq, nb_lt, nb_gt, nb_ne, nb_le, nb_ge };
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        fns[f](input(S(3, 4), NB_F32, 0, false), input(S(4), NB_F32, 1, false));       /* broadcast */
        fns[f](input(S(3, 4), NB_F64, 0, true), input(S(3, 1), NB_F64, 1, false));     /* strided */
        fns[f](input(S(2, 3), NB_F32, 2, false), nb_scalar(0.25));                      /* 0-d */
    }
    nb_div(input(S(3, 4), NB_F32, 0, true), positive(input(S(4), NB_F32, 1, false)));
    nb_pow(positive(input(S(3, 4), NB_F64, 0, false)), input(S(3, 1), NB_F64, 1, false));
    nb_where(nb_gt(input(S(3, 4), NB_F32, 0, false), nb_scalar(0)), input(S(3, 4), NB_F32, 1, true),
             input(S(4), NB_F32, 2, false));
}

static void case_unary(void) {
    static nb_tensor *(*const fns[])(nb_tensor *) = { nb_neg, nb_abs, nb_sign, nb_tanh, nb_sigmoid, nb_relu, nb_gelu,
                                                      nb_erf, nb_exp, nb_sin, nb_cos, nb_expm1, nb_reciprocal,
                                                      nb_floor, nb_ceil, nb_round, nb_trunc };
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        fns[f](input(S(3, 5), NB_F32, 0, true));
        fns[f](input(S(7), NB_F64, 1, false));
    }
    nb_log(positive(input(S(4, 3), NB_F32, 0, true)));
    nb_sqrt(positive(input(S(4, 3), NB_F64, 0, false)));
    nb_rsqrt(positive(input(S(4, 3), NB_F32, 0, true)));
    nb_log1p(positive(input(S(4, 3), NB_F64, 0, false)));
    nb_add_scalar(input(S(3, 4), NB_F32, 0, true), 1.5);
    nb_mul_scalar(input(S(3, 4), NB_F64, 0, false), -2.5);
    nb_pow_scalar(positive(input(S(3, 4), NB_F32, 0, false)), 1.5);
    nb_clamp(input(S(4, 5), NB_F64, 0, true), -0.5, 0.5);
}

static void case_views_and_copies(void) {
    nb_tensor *x = input(S(2, 3, 4), NB_F32, 0, false);
    nb_contiguous(nb_permute(x, (int[]){ 2, 0, 1 })); /* copy of a strided view */
    nb_reshape(x, S(6, 4));
    nb_expand(input(S(3, 1), NB_F64, 1, false), S(2, 3, 5));
    nb_slice(x, 2, 1, 4, 2);
    nb_detach(x);
    nb_cast(input(S(3, 4), NB_F32, 0, true), NB_F64);
    nb_cast(input(S(3, 4), NB_F64, 1, false), NB_I64);
    nb_tensor *dst = nb_zeros(S(4, 5), NB_F32);
    nb_assign(nb_slice(dst, 1, 1, 4, 1), input(S(4, 3), NB_F64, 2, false)); /* in place, with a cast */
    nb_to(x, (nb_device){ NB_EXT, 0 });
}

static void case_creation(void) {
    nb_empty(S(3, 2), NB_F32);
    nb_full(S(2, 3), 1.5, NB_F64);
    nb_manual_seed(11);
    nb_rand(S(4, 5), NB_F32);
    nb_randn(S(5, 4), NB_F64);
    nb_arange(0, 10, 3, NB_I64);
    nb_arange(0.5, 3, 0.5, NB_F32);
}

static void case_reductions(void) {
    nb_tensor *x = input(S(4, 5), NB_F32, 0, true), *y = input(S(2, 3, 4), NB_F64, 1, false);
    nb_sum(x, 0, false);
    nb_sum(y, 1, true);
    nb_sum_all(x);
    nb_max(x, 1, true);
    nb_min(y, -1, false);
    nb_argmax(x, 0, false);
    nb_argmin(y, 2, true);
    nb_softmax(x, 1);
    nb_log_softmax(y, 0);
    nb_cumsum(x, 1);
    nb_cumprod(y, 0);
    nb_argsort(x, 1, true);
    nb_argsort(y, -1, false);
}

static void case_matmul(void) {
    nb_matmul(input(S(3, 4), NB_F32, 0, false), input(S(4, 5), NB_F32, 1, false));
    nb_matmul(input(S(3, 4), NB_F64, 0, true), input(S(4, 2), NB_F64, 1, true));
    nb_matmul(input(S(2, 1, 3, 4), NB_F32, 0, false), input(S(3, 4, 2), NB_F32, 1, false)); /* batch broadcast */
    nb_dtype prev = nb_autocast(NB_BF16); /* matmul_bf16 */
    nb_matmul(input(S(3, 4), NB_F32, 0, true), input(S(2, 4, 5), NB_F32, 1, false));
    nb_autocast(prev);
}

static void case_indexing(void) {
    static const int64_t i1[] = { 2, 0, 2, 1 }, i2[] = { 0, 2, 1, 1, 0, 3 };
    nb_index_select(input(S(3, 4), NB_F32, 0, true), 0, indices(i1, S(4)));
    nb_gather(input(S(3, 4), NB_F64, 1, false), 1, indices(i2, S(3, 2)));
    nb_tensor *parts[] = { input(S(2, 3), NB_F32, 0, false), input(S(4, 3), NB_F32, 1, true) };
    nb_cat(parts, 2, 0);
    /* advanced indexing: broadcast index tensors, a negative index, a strided x, a bool mask */
    static const int64_t i3[] = { 2, 0, -1 }, i4[] = { 1, 3 }, i5[] = { 1, 0, 1, 1 };
    nb_index(input(S(3, 4), NB_F32, 0, true), (nb_tensor *[]){ indices(i3, S(3)) }, 1);
    nb_index(input(S(3, 4, 2), NB_F64, 1, false), (nb_tensor *[]){ indices(i3, S(3, 1)), indices(i4, S(2)) }, 2);
    /* a plain put at distinct positions (a finite difference cannot see an overwritten value's
       gradient, which torch, and nabla, give), an accumulating one with repeats */
    nb_index_put(input(S(4, 3), NB_F32, 0, true), (nb_tensor *[]){ indices(i3, S(3)) }, 1, input(S(3), NB_F32, 1, false), false);
    nb_index_put(input(S(4, 3), NB_F64, 0, false), (nb_tensor *[]){ indices(i5, S(4)) }, 1, input(S(4, 3), NB_F64, 1, true), true);
    nb_tensor *x = input(S(3, 4), NB_F32, 2, false), *mask = nb_gt(x, nb_scalar(0));
    nb_index_put(x, &mask, 1, input(S(), NB_F32, 3, false), false);
    nb_masked_scatter(x, mask, input(S(4, 5), NB_F32, 4, true));
}

static void case_nn(void) {
    nb_tensor *x = input(S(2, 3, 6, 6), NB_F32, 0, false);
    nb_tensor *w = input(S(4, 3, 3, 3), NB_F32, 1, false), *b = input(S(4), NB_F32, 2, false);
    nb_conv2d(x, w, b, (nb_conv_opts){ .stride = { 1, 2 }, .padding = { 1, 0 } });
    nb_max_pool2d(x, 2, (nb_pool_opts){ 0 });
    nb_avg_pool2d(nb_cast(x, NB_F64), 3, (nb_pool_opts){ .stride = 2, .padding = 1 });
    nb_adaptive_avg_pool2d(x, 4, 3);
    nb_max_pool2d(x, 0, (nb_pool_opts){ .kernel_hw = { 2, 3 }, .dilation = 2, .padding_hw = { 1, 0 }, .ceil_mode = true });
    nb_avg_pool2d(x, 3, (nb_pool_opts){ .stride = 2, .padding = 1, .ceil_mode = true, .exclude_padding = true });
    /* batch norm over the batch's statistics: 4-d, 2-d and a strided (permuted) input */
    nb_tensor *rm = nb_zeros(S(3), NB_F32), *rv = nb_ones(S(3), NB_F32);
    nb_batch_norm(x, rm, rv, input(S(3), NB_F32, 3, false), input(S(3), NB_F32, 4, false), true, 0.1, 1e-5);
    nb_batch_norm(input(S(5, 3), NB_F64, 5, false), NULL, NULL, NULL, NULL, true, 0, 1e-5);
    nb_batch_norm(nb_permute(input(S(6, 2, 3, 5), NB_F32, 6, false), (int[]){ 0, 2, 1, 3 }), NULL, NULL, NULL, NULL, true, 0, 1e-5);
    /* CTC: padded targets with a repeated label under a strided log_probs (f32); concatenated i32
       targets with blank 2 and an empty target (f64); a sequence too short for its target with
       zero_infinity */
    static const int64_t tg_pad[] = { 1, 2, 2, 3, 0, 0 }, il_pad[] = { 5, 4 }, tl_pad[] = { 3, 1 };
    nb_ctc_loss(nb_transpose(input(S(2, 5, 4), NB_F32, 7, false), 0, 1), indices(tg_pad, S(2, 3)), indices(il_pad, S(2)),
                indices(tl_pad, S(2)), (nb_ctc_opts){ .reduction = NB_REDUCTION_NONE });
    static const int64_t tg_cat[] = { 0, 1, 1, 3, 0 }, il_cat[] = { 4, 3, 6 }, tl_cat[] = { 2, 0, 3 };
    nb_ctc_loss(input(S(6, 3, 4), NB_F64, 8, false), nb_cast(indices(tg_cat, S(5)), NB_I32), indices(il_cat, S(3)),
                indices(tl_cat, S(3)), (nb_ctc_opts){ .blank = 2, .reduction = NB_REDUCTION_NONE });
    static const int64_t tg_short[] = { 1, 1, 2, 1 }, il_short[] = { 2, 3 }, tl_short[] = { 2, 2 };
    nb_ctc_loss(input(S(3, 2, 3), NB_F32, 9, false), indices(tg_short, S(2, 2)), indices(il_short, S(2)), indices(tl_short, S(2)),
                (nb_ctc_opts){ .reduction = NB_REDUCTION_NONE, .zero_infinity = true });
}

/* Backward passes reach the ops that only backward formulas call. */
static void case_backward_ops(void) {
    nb_tensor *x = nb_set_requires_grad(input(S(2, 2, 5, 5), NB_F64, 0, false), true);
    nb_tensor *w = nb_set_requires_grad(input(S(3, 2, 3, 3), NB_F64, 1, false), true);
    nb_tensor *h = nb_conv2d(x, w, NULL, (nb_conv_opts){ .padding = { 1, 1 } });
    nb_tensor *p = nb_add(nb_add(nb_max_pool2d(nb_relu(h), 2, (nb_pool_opts){ 0 }), nb_avg_pool2d(h, 2, (nb_pool_opts){ 0 })),
                          nb_adaptive_avg_pool2d(h, 2, 2));
    static const int64_t i1[] = { 1, 0, 1 }, i2[] = { 0, 2, 1, 1 };
    nb_tensor *e = nb_set_requires_grad(input(S(3, 4), NB_F64, 2, false), true);
    nb_tensor *q = nb_add(nb_sum_all(nb_index_select(e, 0, indices(i1, S(3)))),
                          nb_sum_all(nb_gather(e, 1, indices(i2, S(2, 2)))));
    nb_tensor *r = nb_add(nb_sum_all(nb_slice(e, 1, 1, 4, 2)), nb_sum_all(nb_cumprod(e, 1)));
    /* batch norm's gradient kernels, with a gradient that is not uniform (a sum would give g = 1) */
    nb_tensor *bw = nb_set_requires_grad(input(S(3), NB_F64, 3, false), true);
    nb_tensor *bn = nb_batch_norm(h, NULL, NULL, bw, NULL, true, 0, 1e-5);
    r = nb_add(r, nb_sum_all(nb_mul(bn, input(S(2, 3, 5, 5), NB_F64, 4, false))));
    /* the CTC loss's gradient kernel, through the mean over target lengths */
    static const int64_t tg[] = { 1, 1, 2, 0 }, il[] = { 4, 3 }, tl[] = { 2, 1 };
    nb_tensor *lp = nb_set_requires_grad(input(S(4, 2, 3), NB_F64, 5, false), true);
    r = nb_add(r, nb_ctc_loss(lp, indices(tg, S(2, 2)), indices(il, S(2)), indices(tl, S(2)), (nb_ctc_opts){ 0 }));
    nb_backward(nb_add(nb_add(nb_sum_all(p), q), r));
}

static void case_optimizer_updates(void) {
    for (int kind = 0; kind < 4; kind++) {
        nb_module *m = nb_nn_linear(4, 3);
        nb_optimizer *o = kind == 0 ? nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.1, .momentum = 0.9 })
                          : kind == 1 ? nb_optim_adam(m, (nb_adam_opts){ .lr = 0.01 })
                          : kind == 2 ? nb_optim_rmsprop(m, (nb_rmsprop_opts){ .lr = 0.01, .momentum = 0.5, .centered = true })
                                      : nb_optim_adagrad(m, (nb_adagrad_opts){ .lr = 0.1 });
        bool prev = nb_set_grad_enabled(true);
        nb__trace_set(NULL, NULL); /* only the update itself is recorded */
        nb_backward(nb_sum_all(nb_forward(m, input(S(2, 4), NB_F32, 0, false))));
        nb__trace_set(record, NULL);
        nb_set_grad_enabled(prev);
        nb_optim_step(o);
        nb_optim_free(o);
        nb_module_free(m);
    }
}

/* host_call's function here: reverses the elements of every tensor it is given, whatever their
   dtype, so every backend must hand it its tensors' own memory, in order. */
static int reverse_all(void *ctx, nb_tensor *const *t, int n) {
    (void)ctx;
    for (int k = 0; k < n; k++) {
        size_t es = nb__esize(t[k]->dtype);
        char *p = nb__data(t[k]), tmp[16];
        for (int64_t i = 0, j = t[k]->numel - 1; i < j; i++, j--) {
            memcpy(tmp, p + i * (int64_t)es, es);
            memcpy(p + i * (int64_t)es, p + j * (int64_t)es, es);
            memcpy(p + j * (int64_t)es, tmp, es);
        }
    }
    return 0;
}

static void case_host_call(void) {
    nb_tensor *a = input(S(3, 4), NB_F32, 0, false), *b = input(S(5), NB_F32, 1, false);
    nb__host_call(reverse_all, NULL, (nb_tensor *[]){ a, b }, 2);
}

typedef struct { const char *name; void (*fn)(void); } op_case;
static const op_case cases[] = {
    { "binary", case_binary }, { "unary", case_unary }, { "views_and_copies", case_views_and_copies },
    { "creation", case_creation }, { "reductions", case_reductions }, { "matmul", case_matmul },
    { "indexing", case_indexing }, { "nn", case_nn }, { "backward_ops", case_backward_ops },
    { "optimizer_updates", case_optimizer_updates }, { "host_call", case_host_call },
};

static nb_scope *record_scope;

static int record_all(void **state) {
    (void)state;
    ext_backend_register(false);
    record_scope = nb_scope_begin();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        current_case = cases[k].name;
        nb__trace_set(record, NULL);
        cases[k].fn();
        nb__trace_set(NULL, NULL);
        if (nb_error()) {
            fprintf(stderr, "case %s failed: %s\n", cases[k].name, nb_error());
            return -1;
        }
    }
    /* max_pool2d_indices runs only in the double backward of max pooling: its call is made from
       a recorded max_pool2d_backward's input and arguments, as bwd_max_pool2d_backward makes it */
    current_case = "max_pool2d_double_backward";
    int n = ncalls;
    for (int k = 0; k < n; k++)
        if (calls[k].op == NB_OP_MAX_POOL2D_BACKWARD) {
            nb__trace_set(record, NULL);
            nb_release(nb__dispatch(NB_OP_MAX_POOL2D_INDICES, &calls[k].in[1], 1, &calls[k].args));
            nb__trace_set(NULL, NULL);
        }
    return nb_error() ? -1 : 0;
}

static int release_all(void **state) {
    (void)state;
    for (int k = 0; k < ncalls; k++)
        for (int i = 0; i < calls[k].nin; i++) nb_release(calls[k].in[i]);
    nb_scope_end(record_scope);
    nb__backend_unregister(NB_EXT);
    return 0;
}

/* ---- replay on every backend ---- */
static bool is_data_input(const nb_op_def *def, int i) {
    if (i == 0) return !(def->flags & NB_F_COND0);
    return !((i >= 1 && (def->flags & NB_F_INDEX1)) || (i >= 2 && (def->flags & NB_F_INDEX2)));
}

/* x's values brought to dtype: floats by a cast, integers as small integers, bools as x > 0. */
static nb_tensor *as_dtype(nb_tensor *x, nb_dtype d) {
    if (nb_dtype_of(x) == d) return x;
    if (d == NB_F32 || d == NB_F64 || d == NB_F16 || d == NB_BF16 || !(nb_dtype_of(x) == NB_F32 || nb_dtype_of(x) == NB_F64))
        return nb_cast(x, d);
    int64_t n = nb_numel(x);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    nb_copy_to(nb_cast(x, NB_F64), v, sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = d == NB_BOOL ? (v[i] > 0) : d == NB_U8 ? floor(fabs(v[i]) * 5) : floor(v[i] * 4);
    nb_tensor *t = nb_cast(nb_from_data(v, nb_shape_of(x), NB_F64), d);
    free(v);
    return t;
}

/* The inputs of a call on dev at dtype d: a fresh copy for an in-place op (which writes them)
   and for another device; on the cpu at the call's own dtype, the recorded inputs themselves,
   so strided views stay strided. */
static void inputs_for(const call *c, nb_dtype d, nb_device dev, nb_tensor **out) {
    const nb_op_def *def = &nb__ops[c->op];
    for (int i = 0; i < c->nin; i++) {
        nb_tensor *x = c->in[i];
        /* the data inputs take the dtype (not indices and conditions, nor the optimizer update's
           step count and coefficients, nor the integer labels and lengths of an op that computes
           floats only: the CTC loss's) */
        bool data = is_data_input(def, i) && !(c->op == NB_OP_OPTIM_UPDATE && (i == 2 || i == 3)) &&
                    (nb__is_float(nb_dtype_of(x)) || (def->dtypes & NB_T_INT));
        if (data) x = as_dtype(x, d);
        if (nb_device_of(x).type != dev.type || nb_device_of(x).index != dev.index || (def->flags & NB_F_INPLACE))
            x = nb_to(nb_clone(x), dev); /* a fresh dense copy there (nb_to keeps a tensor already there) */
        out[i] = x;
    }
}

/* Runs one call's op at dtype d on dev; the result on the host (NULL when the op refused). */
static nb_tensor *run_on(const call *c, nb_dtype d, nb_device dev, nb_tensor **after) {
    nb_tensor *in[8];
    inputs_for(c, d, dev, in);
    nb_op_args a = c->args;
    const nb_op_def *def = &nb__ops[c->op];
    if (def->flags & NB_F_CREATE) {
        a.device = dev;
        a.dtype = d;
    }
    if (c->op == NB_OP_RAND || c->op == NB_OP_RANDN) nb_manual_seed(5);
    bool prev = nb_set_grad_enabled(false); /* in-place updates refuse to run under recording */
    nb_tensor *r = nb__own(nb__dispatch(c->op, in, c->nin, &a));
    nb_set_grad_enabled(prev);
    if (!r) return NULL;
    if (after)
        for (int i = 0; i < c->nin; i++) after[i] = nb_to(in[i], (nb_device){ NB_CPU, 0 });
    return nb_to(r, (nb_device){ NB_CPU, 0 });
}

/* Normalised mean squared error of b against a (0 when both are all zero); NaN and infinity
   positions must agree. */
static double nmse(nb_tensor *a, nb_tensor *b) {
    int64_t n = nb_numel(a);
    if (n != nb_numel(b)) return INFINITY;
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1)), *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
    nb_copy_to(nb_cast(a, NB_F64), x, sizeof(double) * (size_t)n);
    nb_copy_to(nb_cast(b, NB_F64), y, sizeof(double) * (size_t)n);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            if (!(isnan(x[i]) && isnan(y[i])) && x[i] != y[i]) num = INFINITY;
            continue;
        }
        num += (x[i] - y[i]) * (x[i] - y[i]);
        den += x[i] * x[i];
    }
    free(x);
    free(y);
    return num == 0 ? 0 : num / (den > 0 ? den : 1e-300);
}

static double nmse_limit(nb_dtype d) {
    switch (d) {
    case NB_F64: return 1e-20;
    case NB_F32: return 1e-10;
    case NB_F16: return 1e-5;
    case NB_BF16: return 1e-4;
    default: return 0;
    }
}

static void test_every_op_on_every_backend(void **state) {
    (void)state;
    int backends = 0, compared = 0, failures = 0;
    for (int t = NB_CPU + 1; t <= NB_EXT; t++) {
        const nb_backend *b = nb__backend_get((nb_device_type)t);
        if (!b) continue;
        if (b->device_count && b->device_count() == 0) { /* built but no device here (cuda without a GPU) */
            printf("%s backend: no device, not replayed\n", b->name);
            continue;
        }
        backends++;
        nb_device dev = { (nb_device_type)t, 0 };
        for (int k = 0; k < ncalls; k++) {
            const call *c = &calls[k];
            const nb_op_def *def = &nb__ops[c->op];
            bool ran = false;
            for (int d = 0; d < NB_DTYPE_COUNT; d++) {
                if (!(def->dtypes & NB_T(d))) continue;
                nb_scope *s = nb_scope_begin();
                nb_error_clear();
                nb_tensor *ref_after[8] = { 0 }, *got_after[8] = { 0 };
                nb_tensor *ref = run_on(c, (nb_dtype)d, (nb_device){ NB_CPU, 0 }, ref_after);
                char ref_err[256];
                snprintf(ref_err, sizeof ref_err, "%s", nb_error() ? nb_error() : "");
                nb_error_clear();
                nb_tensor *got = run_on(c, (nb_dtype)d, dev, got_after);
                if (!ref) {
                    /* a dtype the op refuses on the cpu: the backend refuses it too */
                    if (got) {
                        fprintf(stderr, "%s (%s, %s): the cpu refused (%s) but %s ran it\n", def->name, c->case_name,
                                nb_dtype_name((nb_dtype)d), ref_err, b->name);
                        failures++;
                    }
                } else if (!got) {
                    fprintf(stderr, "%s (%s, %s): %s failed: %s\n", def->name, c->case_name, nb_dtype_name((nb_dtype)d), b->name,
                            nb_error() ? nb_error() : "?");
                    failures++;
                } else {
                    ran = true;
                    compared++;
                    bool same_meta = nb_dtype_of(ref) == nb_dtype_of(got) && nb_ndim(ref) == nb_ndim(got);
                    for (int a = 0; same_meta && a < nb_ndim(ref); a++) same_meta = nb_dim(ref, a) == nb_dim(got, a);
                    double e = !same_meta ? INFINITY : c->op == NB_OP_EMPTY ? 0 : nmse(ref, got);
                    for (int i = 0; i < c->nin && (def->flags & NB_F_INPLACE); i++) {
                        double ei = nmse(ref_after[i], got_after[i]);
                        if (ei > e) e = ei;
                    }
                    if (!(e <= nmse_limit(nb_dtype_of(ref)))) {
                        fprintf(stderr, "%s (%s, %s): %s differs from the cpu: nmse %g\n", def->name, c->case_name,
                                nb_dtype_name((nb_dtype)d), b->name, e);
                        failures++;
                    }
                }
                nb_scope_end(s);
            }
            if (ran) replayed[c->op] = true;
        }
    }
    nb_error_clear();
    printf("%d backend(s) besides the cpu, %d recorded calls, %d comparisons\n", backends, ncalls, compared);
    assert_true(backends >= 1);
    assert_int_equal(failures, 0);
}

/* ---- gradients by finite differences ---- */
/* A value of x's sign (zero counts as positive), at least 0.3 from zero, distinct per element
   and input (a golden-ratio sequence), so no input sits on a kink, a tie or a clamp bound. */
static double nice_value(double x, int64_t i, int input) {
    double u = fmod(0.6180339887 * (double)(i + 1) + 0.1 * input, 1.0);
    return (x < 0 ? -1 : 1) * (0.3 + 0.7 * u);
}

static bool float_data_input(const call *c, int i) {
    nb_dtype dt = nb_dtype_of(c->in[i]);
    return is_data_input(&nb__ops[c->op], i) && (dt == NB_F32 || dt == NB_F64);
}

/* sum(op(in) * w) with recording off, for the finite differences. */
static double weighted(const call *c, nb_tensor **in, nb_tensor *w) {
    nb_scope *s = nb_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    double v = nb_item(nb_sum_all(nb_mul(nb_cast(nb__own(nb__dispatch(c->op, in, c->nin, &c->args)), NB_F64), w)));
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    return v;
}

/* Ops whose gradient is by design not the derivative of their forward, so finite differences
   cannot check it; each names the test that checks it instead. */
static const struct {
    const char *op, *instead;
} not_derivative[] = {
    { "matmul_bf16", "autocast rounds the operands (a step function); its gradient is the bf16 product torch.autocast "
                     "computes: PyTorch in test_ops_torch, a double reference in test_autocast" },
};

static bool gradient_checked_elsewhere(const char *op) {
    for (size_t k = 0; k < sizeof not_derivative / sizeof not_derivative[0]; k++)
        if (strcmp(not_derivative[k].op, op) == 0) return true;
    return false;
}

/* The layouts a gradient check runs in: every operand dense; the inputs of two or more axes as
   transposed views of leaves stored the other way round (4-d ones channels-last, permuted back
   to [N, C, H, W]), with an upstream gradient expanded
   along its first axis (stride 0); the upstream gradient a transposed view. A backward formula or
   kernel that reads its operands as if dense fails the second or the third. */
enum { LAYOUT_DENSE, LAYOUT_STRIDED_EXPANDED, LAYOUT_TRANSPOSED_GRAD, LAYOUTS };
static const char *const layout_names[LAYOUTS] = { "dense", "strided inputs, expanded gradient", "transposed gradient" };

/* The upstream gradient for out in the layout: values 0.5 + 0.25 (e % 7) of its dense order. */
static nb_tensor *upstream_grad(nb_tensor *out, int layout) {
    nb_shape sh = nb_shape_of(out), small = sh;
    bool expand = layout == LAYOUT_STRIDED_EXPANDED && sh.ndim >= 1 && sh.dim[0] > 1;
    bool transpose = layout == LAYOUT_TRANSPOSED_GRAD && sh.ndim >= 2;
    if (expand) small.dim[0] = 1;
    if (transpose) {
        small.dim[sh.ndim - 1] = sh.dim[sh.ndim - 2];
        small.dim[sh.ndim - 2] = sh.dim[sh.ndim - 1];
    }
    int64_t n = 1;
    for (int d = 0; d < small.ndim; d++) n *= small.dim[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) v[e] = 0.5 + 0.25 * (double)(e % 7);
    nb_tensor *g = nb_to(nb_cast(nb_from_data(v, small, NB_F64), nb_dtype_of(out)), nb_device_of(out));
    free(v);
    if (expand) g = nb_expand(g, sh);
    if (transpose) g = nb_transpose(g, -1, -2);
    return g;
}

static int gradcheck_call(const call *c, int layout) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[8], *leaf[8] = { 0 };
    double *vals[8] = { 0 };
    for (int i = 0; i < c->nin; i++) {
        in[i] = c->in[i];
        if (!float_data_input(c, i)) continue;
        int64_t n = nb_numel(c->in[i]);
        vals[i] = malloc(sizeof(double) * (size_t)(n ? n : 1));
        nb_copy_to(nb_cast(c->in[i], NB_F64), vals[i], sizeof(double) * (size_t)n);
        for (int64_t e = 0; e < n; e++) vals[i][e] = nice_value(vals[i][e], e, i);
        nb_tensor *dense = nb_from_data(vals[i], nb_shape_of(c->in[i]), NB_F64);
        /* views need strides they can view: they keep dense inputs */
        if (layout == LAYOUT_STRIDED_EXPANDED && nb_ndim(dense) == 4 && !(nb__ops[c->op].flags & NB_F_VIEW)) {
            /* the same values, seen through a channels-last leaf [N, H, W, C] permuted to [N, C, H, W] */
            leaf[i] = nb_set_requires_grad(nb_contiguous(nb_permute(dense, (int[]){ 0, 2, 3, 1 })), true);
            in[i] = nb_permute(leaf[i], (int[]){ 0, 3, 1, 2 });
        } else if (layout == LAYOUT_STRIDED_EXPANDED && nb_ndim(dense) >= 2 && !(nb__ops[c->op].flags & NB_F_VIEW)) {
            /* the same values, seen through a transposed view of a leaf stored the other way */
            leaf[i] = nb_set_requires_grad(nb_contiguous(nb_transpose(dense, -1, -2)), true);
            in[i] = nb_transpose(leaf[i], -1, -2);
        } else in[i] = leaf[i] = nb_set_requires_grad(dense, true);
    }
    int bad = 0;
    nb_tensor *out = nb__own(nb__dispatch(c->op, in, c->nin, &c->args));
    if (!out) {
        fprintf(stderr, "gradcheck %s (%s, %s): forward failed: %s\n", nb__ops[c->op].name, c->case_name, layout_names[layout],
                nb_error());
        bad = 1;
        goto done;
    }
    bool coarse = nb_dtype_of(out) != NB_F64; /* the result passes through f32 (a cast) */
    nb_tensor *g = upstream_grad(out, layout);
    /* the weights of the finite differences: the gradient's values, dense, in f64 */
    nb_tensor *w = nb_contiguous(nb_cast(g, NB_F64));
    if (nb_backward_with(out, g) < 0) {
        fprintf(stderr, "gradcheck %s (%s, %s): backward failed: %s\n", nb__ops[c->op].name, c->case_name, layout_names[layout],
                nb_error());
        bad = 1;
        goto done;
    }
    const double eps = coarse ? 1e-2 : 1e-6, tol = coarse ? 1e-2 : 1e-5;
    for (int i = 0; i < c->nin && !bad; i++) {
        if (!vals[i]) continue;
        /* the leaf's gradient against differences in the leaf's own elements (its views see them) */
        nb_tensor *gl = nb_grad_of(leaf[i]);
        int64_t n = nb_numel(leaf[i]);
        double *ga = calloc((size_t)(n ? n : 1), sizeof(double));
        if (gl) nb_copy_to(nb_contiguous(nb_cast(gl, NB_F64)), ga, sizeof(double) * (size_t)n);
        double *p = nb_data_ptr(leaf[i]);
        for (int64_t e = 0; e < n && !bad; e++) {
            double orig = p[e];
            p[e] = orig + eps;
            double up = weighted(c, in, w);
            p[e] = orig - eps;
            double down = weighted(c, in, w);
            p[e] = orig;
            double numeric = (up - down) / (2 * eps);
            if (fabs(numeric - ga[e]) > tol * (1e-3 + fabs(numeric)) && fabs(numeric - ga[e]) > 1e-7) {
                fprintf(stderr, "gradcheck %s (%s, %s): input %d element %lld: analytic %.10g, numeric %.10g\n",
                        nb__ops[c->op].name, c->case_name, layout_names[layout], i, (long long)e, ga[e], numeric);
                bad = 1;
            }
        }
        free(ga);
    }
done:
    for (int i = 0; i < c->nin; i++) free(vals[i]);
    nb_scope_end(s);
    nb_error_clear();
    return bad;
}

static void test_every_backward_by_finite_differences(void **state) {
    (void)state;
    int checked = 0, failures = 0;
    for (int k = 0; k < ncalls; k++) {
        const call *c = &calls[k];
        const nb_op_def *def = &nb__ops[c->op];
        /* only a float result carries a gradient */
        if (!def->backward || (def->flags & NB_F_NONDIFF) || !(c->out_dtype == NB_F32 || c->out_dtype == NB_F64) ||
            gradient_checked_elsewhere(def->name))
            continue;
        bool any = false;
        for (int i = 0; i < c->nin; i++) any = any || float_data_input(c, i);
        if (!any) continue;
        for (int layout = 0; layout < LAYOUTS; layout++) failures += gradcheck_call(c, layout);
        checked++;
        gradchecked[c->op] = true;
    }
    printf("%d calls checked by finite differences\n", checked);
    assert_int_equal(failures, 0);
}

/* ---- coverage ---- */
static void test_coverage_of_the_op_table(void **state) {
    (void)state;
    int missing = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        const nb_op_def *def = &nb__ops[op];
        if (!replayed[op]) {
            fprintf(stderr, "op %s: no case of test_backend_ops reaches it (or it ran at no dtype)\n", def->name);
            missing++;
        }
        if (def->backward && !(def->flags & NB_F_NONDIFF) && !gradchecked[op] && !gradient_checked_elsewhere(def->name)) {
            fprintf(stderr, "op %s: has a backward that no finite-difference check ran\n", def->name);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

/* ---- the cuda backend's coverage of the op table (no GPU needed: its table is static) ---- */
/* The ops the cuda backend runs no kernel of, each with the reason. An op of ops.def that the
   cpu runs and cuda does not must be named here; a name here that cuda does run is stale. */
static const struct {
    const char *op, *because;
} cuda_lacks[] = {
    { NULL, NULL },
};

static void test_cuda_covers_the_op_table(void **state) {
    (void)state;
    const nb_backend *cuda = nb__backend_get(NB_CUDA), *cpu = nb__backend_get(NB_CPU);
    if (!cuda) {
        printf("this build has no cuda backend: its coverage is not checked\n");
        skip();
    }
    int wrong = 0, lacked = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        const char *why = NULL;
        for (size_t k = 0; k < sizeof cuda_lacks / sizeof cuda_lacks[0]; k++)
            if (cuda_lacks[k].op && strcmp(cuda_lacks[k].op, nb__ops[op].name) == 0) why = cuda_lacks[k].because;
        bool runs = cuda->kernels[op] != NULL, cpu_runs = cpu->kernels[op] != NULL;
        if (cpu_runs && !runs && !why) {
            fprintf(stderr, "op %s: the cuda backend has no kernel for it, and cuda_lacks does not say why\n",
                    nb__ops[op].name);
            wrong++;
        }
        if (runs && why) {
            fprintf(stderr, "op %s: cuda_lacks names it (\"%s\"), but the cuda backend runs it\n", nb__ops[op].name, why);
            wrong++;
        }
        lacked += why != NULL;
    }
    printf("the cuda backend runs every op of the table but %d, each with its reason\n", lacked);
    assert_int_equal(wrong, 0);
}

/* nb_device_supports answers from the backend's table and the op's dtypes. */
static void test_device_supports(void **state) {
    (void)state;
    nb_device cpu = { NB_CPU, 0 };
    assert_true(nb_device_supports(cpu, "add", NB_F32));
    assert_true(nb_device_supports(cpu, "add", NB_BOOL));
    assert_true(nb_device_supports(cpu, "view", NB_F16));
    assert_false(nb_device_supports(cpu, "conv2d", NB_I64)); /* float ops only */
    assert_false(nb_device_supports(cpu, "log", NB_I32));    /* computed in f32: converted first */
    assert_null(nb_error());
    assert_false(nb_device_supports(cpu, "nosuch", NB_F32));
    assert_non_null(strstr(nb_error(), "\"nosuch\" is no op of the table"));
    nb_error_clear();
    nb_device cuda = { NB_CUDA, 0 };
    assert_int_equal(nb_device_supports(cuda, "add", NB_F32), nb_device_available(cuda));
    assert_false(nb_device_supports((nb_device){ NB_CUDA, 99 }, "add", NB_F32));
    assert_null(nb_error());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_supports),
        cmocka_unit_test(test_cuda_covers_the_op_table),
        cmocka_unit_test(test_every_op_on_every_backend),
        cmocka_unit_test(test_every_backward_by_finite_differences),
        cmocka_unit_test(test_coverage_of_the_op_table),
    };
    return cmocka_run_group_tests(tests, record_all, release_all);
}
