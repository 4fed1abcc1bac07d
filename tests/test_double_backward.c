/* nb_autograd_grad, double backward and custom functions.
   - The contract: gradients of chosen inputs without touching .grad, non-leaf inputs, several
     outputs, allow_unused, and the errors.
   - Custom functions (nb_function_apply): a straight-through gradient, saved tensors and a user
     pointer, twice differentiated, and the errors (a saved tensor changed in place, a gradient
     of the wrong shape).
   - gradgradcheck: for each op f, in f64, the gradient (by create_graph) of
     L2(x) = sum(w * dL1/dx) with L1 = sum(v * f(x)) equals central differences of L2, itself
     computed by first-order backward: the second derivatives of every formula written with ops.
   - With a path argument, a WGAN-GP style step (f32) of a small MLP and CNN (the critic's gradient
     penalty through autograd_grad with create_graph, then backward of the whole loss) writes each
     parameter's gradient for tests/double_backward_check.py to compare with torch's. */
#include "test_util.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Deterministic values: v_i = scale * sin(a * i + b). */
static nb_tensor *wave(nb_shape s, double a, double b, double scale) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dim[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = scale * sin(a * (double)i + b);
    nb_tensor *t = nb_from_data(v, s, NB_F64);
    free(v);
    return t;
}

static double value(nb_tensor *t) { return nb_item(t); }

static void test_contract(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_set_requires_grad(wave(NB_SHAPE(3), 1.1, 0.2, 1), true);
    nb_tensor *w = nb_set_requires_grad(wave(NB_SHAPE(3), 0.7, 0.5, 1), true);
    nb_tensor *u = nb_set_requires_grad(wave(NB_SHAPE(3), 0.3, 0.1, 1), true); /* never used */
    nb_tensor *h = nb_mul_scalar(x, 3);
    nb_tensor *y = nb_sum_all(nb_mul(nb_mul(h, h), w)); /* 9 x^2 w */
    nb_tensor *in[3] = { x, w, h }, *g[3];
    assert_int_equal(nb_autograd_grad(&y, NULL, 1, in, 3, g, (nb_grad_opts){ .retain_graph = true }), 0);
    double xv[3], wv[3], gv[3];
    nb_copy_to(x, xv, sizeof xv);
    nb_copy_to(w, wv, sizeof wv);
    nb_copy_to(g[0], gv, sizeof gv);
    for (int i = 0; i < 3; i++) assert_true(fabs(gv[i] - 18 * xv[i] * wv[i]) < 1e-12);
    nb_copy_to(g[1], gv, sizeof gv);
    for (int i = 0; i < 3; i++) assert_true(fabs(gv[i] - 9 * xv[i] * xv[i]) < 1e-12);
    nb_copy_to(g[2], gv, sizeof gv); /* a non-leaf input: d/dh = 2 h w */
    for (int i = 0; i < 3; i++) assert_true(fabs(gv[i] - 6 * xv[i] * wv[i]) < 1e-12);
    assert_null(nb_grad_of(x));
    assert_null(nb_grad_of(w));
    /* retained: a second call through the same graph, and then a backward into .grad */
    nb_tensor *in2[2] = { x, u }, *g2[2];
    assert_int_equal(nb_autograd_grad(&y, NULL, 1, in2, 2, g2, (nb_grad_opts){ .allow_unused = true, .retain_graph = true }), 0);
    assert_non_null(g2[0]);
    assert_null(g2[1]);
    assert_int_equal(nb_autograd_grad(&y, NULL, 1, in2, 2, g2, (nb_grad_opts){ .retain_graph = true }), -1);
    assert_non_null(strstr(nb_error(), "input 1"));
    assert_non_null(strstr(nb_error(), "allow_unused"));
    nb_error_clear();
    assert_int_equal(nb_backward(y), 0);
    assert_non_null(nb_grad_of(x));
    /* freed by that backward */
    assert_int_equal(nb_autograd_grad(&y, NULL, 1, in, 1, g, (nb_grad_opts){ 0 }), -1);
    assert_non_null(strstr(nb_error(), "already freed"));
    nb_error_clear();
    /* two outputs, one with a given gradient; a many-element output needs one */
    nb_tensor *a = nb_mul(x, x), *b = nb_sum_all(nb_mul(x, w));
    nb_tensor *outs[2] = { a, b }, *seeds[2] = { nb_ones(NB_SHAPE(3), NB_F64), nb_full((nb_shape){ 0, { 0 } }, 2, NB_F64) };
    assert_int_equal(nb_autograd_grad(outs, seeds, 2, &x, 1, g, (nb_grad_opts){ .retain_graph = true }), 0);
    nb_copy_to(g[0], gv, sizeof gv);
    for (int i = 0; i < 3; i++) assert_true(fabs(gv[i] - (2 * xv[i] + 2 * wv[i])) < 1e-12);
    assert_int_equal(nb_autograd_grad(outs, NULL, 2, &x, 1, g, (nb_grad_opts){ 0 }), -1);
    assert_non_null(strstr(nb_error(), "grad_outputs"));
    nb_error_clear();
    nb_tensor *c = nb_detach(x);
    assert_int_equal(nb_autograd_grad(&b, NULL, 1, &c, 1, g, (nb_grad_opts){ 0 }), -1);
    assert_non_null(strstr(nb_error(), "does not require grad"));
    nb_error_clear();
    /* cumprod's gradient is a kernel: differentiating it again is an error, not a silent zero */
    nb_tensor *p = nb_sum_all(nb_cumprod(x, 0));
    assert_int_equal(nb_autograd_grad(&p, NULL, 1, &x, 1, g, (nb_grad_opts){ .create_graph = true }), -1);
    assert_non_null(strstr(nb_error(), "cumprod"));
    nb_error_clear();
    nb_scope_end(s);
}

/* ---- custom functions ---- */
/* clamp to [-1, 1] forward, the gradient passed straight through (a straight-through estimator:
   not what nb_clamp's own backward gives) */
static nb_tensor *ste_forward(nb_function_ctx *ctx, nb_tensor *const *in, int n, void *user) {
    (void)ctx; (void)n; (void)user;
    return nb_clamp(in[0], -1, 1);
}
static int ste_backward(nb_function_ctx *ctx, nb_tensor *g, nb_tensor **gin, int n, void *user) {
    (void)n; (void)user;
    if (nb_function_needs_grad(ctx, 0)) gin[0] = g;
    return 0;
}
static const nb_function ste = { "straight_through_clamp", ste_forward, ste_backward };

/* x * y * scale (scale through user), saving both inputs: its backward is written with ops, so
   it can be differentiated again */
static nb_tensor *mul_forward(nb_function_ctx *ctx, nb_tensor *const *in, int n, void *user) {
    (void)n;
    if (nb_function_save(ctx, in[0]) < 0 || nb_function_save(ctx, in[1]) < 0) return NULL;
    return nb_mul_scalar(nb_mul(in[0], in[1]), *(const double *)user);
}
static int mul_backward(nb_function_ctx *ctx, nb_tensor *g, nb_tensor **gin, int n, void *user) {
    (void)n;
    double k = *(const double *)user;
    nb_tensor *x = nb_function_saved(ctx, 0), *y = nb_function_saved(ctx, 1);
    if (nb_function_needs_grad(ctx, 0)) gin[0] = nb_mul_scalar(nb_mul(g, y), k);
    if (nb_function_needs_grad(ctx, 1)) gin[1] = nb_mul_scalar(nb_mul(g, x), k);
    return 0;
}
static const nb_function scaled_mul = { "scaled_mul", mul_forward, mul_backward };

static int bad_backward(nb_function_ctx *ctx, nb_tensor *g, nb_tensor **gin, int n, void *user) {
    (void)ctx; (void)n; (void)user;
    gin[0] = nb_sum_all(g); /* the wrong shape */
    return 0;
}
static const nb_function bad_shape = { "bad_shape", ste_forward, bad_backward };

static void test_custom_function(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    double xv[4] = { -2, -0.5, 0.5, 3 };
    nb_tensor *x = nb_set_requires_grad(nb_from_data(xv, NB_SHAPE(4), NB_F64), true);
    nb_tensor *y = nb_function_apply(&ste, &x, 1, NULL);
    double v[4];
    nb_copy_to(y, v, sizeof v);
    assert_true(v[0] == -1 && v[1] == -0.5 && v[3] == 1);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(y, y))), 0);
    nb_copy_to(nb_grad_of(x), v, sizeof v); /* 2 y, also where the clamp is flat */
    assert_true(v[0] == -2 && v[1] == -1 && v[2] == 1 && v[3] == 2);
    /* values and gradients of a function with saved tensors and a user pointer */
    double k = 1.5;
    nb_tensor *a = nb_set_requires_grad(wave(NB_SHAPE(2, 3), 0.7, 0.1, 1), true);
    nb_tensor *b = wave(NB_SHAPE(2, 3), 1.3, 0.4, 1); /* no gradient wanted */
    nb_tensor *ab[2] = { a, b };
    nb_tensor *z = nb_function_apply(&scaled_mul, ab, 2, &k), *ga;
    assert_int_equal(nb_autograd_grad((nb_tensor *[]){ nb_sum_all(z) }, NULL, 1, &a, 1, &ga, (nb_grad_opts){ 0 }), 0);
    double gv[6], bv[6];
    nb_copy_to(ga, gv, sizeof gv);
    nb_copy_to(b, bv, sizeof bv);
    for (int i = 0; i < 6; i++) assert_true(fabs(gv[i] - 1.5 * bv[i]) < 1e-15);
    /* differentiated twice: d/da sum(w * d/da sum(f(a, a))) = 2 k w */
    nb_tensor *aa[2] = { a, a };
    nb_tensor *l1 = nb_sum_all(nb_function_apply(&scaled_mul, aa, 2, &k)), *g1, *g2;
    assert_int_equal(nb_autograd_grad(&l1, NULL, 1, &a, 1, &g1, (nb_grad_opts){ .create_graph = true }), 0);
    nb_tensor *w = wave(NB_SHAPE(2, 3), 0.3, 0.9, 1);
    nb_tensor *l2 = nb_sum_all(nb_mul(w, g1));
    assert_int_equal(nb_autograd_grad(&l2, NULL, 1, &a, 1, &g2, (nb_grad_opts){ 0 }), 0);
    double wv[6];
    nb_copy_to(g2, gv, sizeof gv);
    nb_copy_to(w, wv, sizeof wv);
    for (int i = 0; i < 6; i++) assert_true(fabs(gv[i] - 2 * 1.5 * wv[i]) < 1e-14);
    /* a saved tensor changed in place before the backward is an error */
    nb_tensor *c = nb_set_requires_grad(wave(NB_SHAPE(2, 3), 0.5, 0.2, 1), true);
    nb_tensor *d = nb_clone(b), *cd[2] = { c, d };
    nb_tensor *e = nb_sum_all(nb_function_apply(&scaled_mul, cd, 2, &k));
    assert_int_equal(nb_assign(d, nb_zeros(NB_SHAPE(2, 3), NB_F64)), 0);
    assert_int_equal(nb_backward(e), -1);
    assert_non_null(strstr(nb_error(), "in place"));
    nb_error_clear();
    /* a gradient of the wrong shape names the function */
    nb_tensor *f = nb_sum_all(nb_function_apply(&bad_shape, &x, 1, NULL));
    assert_int_equal(nb_backward(f), -1);
    assert_non_null(strstr(nb_error(), "bad_shape"));
    nb_error_clear();
    /* without grad the forward still runs, and nothing is recorded */
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *q = nb_function_apply(&ste, &x, 1, NULL);
    nb_set_grad_enabled(prev);
    assert_false(nb_requires_grad(q));
    assert_null(nb_function_apply(&(nb_function){ "half", ste_forward, NULL }, &x, 1, NULL));
    nb_error_clear();
    nb_scope_end(s);
}

/* ---- gradgradcheck ---- */
typedef nb_tensor *(*op_fn)(nb_tensor *x, nb_tensor *aux);

/* L2(x) = sum(w * d/dx sum(v * f(x))), with or without the graph of the first gradient. */
static nb_tensor *l2(op_fn f, nb_tensor *x, nb_tensor *aux, nb_tensor *v, nb_tensor *w, bool create) {
    nb_tensor *l1 = nb_sum_all(nb_mul(v, f(x, aux)));
    nb_tensor *g;
    if (nb_autograd_grad(&l1, NULL, 1, &x, 1, &g, (nb_grad_opts){ .create_graph = create }) < 0) return NULL;
    return nb_sum_all(nb_mul(w, g));
}

static void gradgradcheck(const char *name, op_fn f, nb_tensor *x0, nb_tensor *aux) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_set_requires_grad(nb_clone(x0), true);
    nb_tensor *y = f(x, aux);
    assert_non_null(y);
    nb_tensor *v = wave(nb_shape_of(y), 0.91, 0.4, 1), *w = wave(nb_shape_of(x), 0.53, 1.3, 1);
    nb_tensor *l = l2(f, x, aux, v, w, true);
    if (!l) fail_msg("%s: %s", name, nb_error());
    nb_tensor *h;
    if (nb_autograd_grad(&l, NULL, 1, &x, 1, &h, (nb_grad_opts){ 0 }) < 0) fail_msg("%s: %s", name, nb_error());
    int64_t n = nb_numel(x);
    double *xv = malloc(sizeof(double) * (size_t)n), *hv = malloc(sizeof(double) * (size_t)n);
    nb_copy_to(x0, xv, sizeof(double) * (size_t)n);
    nb_copy_to(h, hv, sizeof(double) * (size_t)n);
    const double eps = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double num[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            double keep = xv[i];
            xv[i] = keep + (sgn ? -eps : eps);
            nb_scope *s2 = nb_scope_begin();
            nb_tensor *xp = nb_set_requires_grad(nb_from_data(xv, nb_shape_of(x0), NB_F64), true);
            num[sgn] = value(l2(f, xp, aux, v, w, false));
            nb_scope_end(s2);
            xv[i] = keep;
        }
        double fd = (num[0] - num[1]) / (2 * eps);
        if (fabs(fd - hv[i]) > 1e-5 * (1 + fabs(fd))) fail_msg("%s: second derivative %lld: autograd %.10g, differences %.10g", name, (long long)i, hv[i], fd);
    }
    free(xv);
    free(hv);
    nb_scope_end(s);
}

#define UNARY(NAME, EXPR) static nb_tensor *NAME(nb_tensor *x, nb_tensor *aux) { (void)aux; return EXPR; }
UNARY(f_exp, nb_exp(x))
UNARY(f_log, nb_log(nb_add_scalar(nb_mul(x, x), 0.5)))
UNARY(f_sqrt, nb_sqrt(nb_add_scalar(nb_mul(x, x), 0.5)))
UNARY(f_tanh, nb_tanh(x))
UNARY(f_sigmoid, nb_sigmoid(x))
UNARY(f_sin_cos, nb_mul(nb_sin(x), nb_cos(x)))
UNARY(f_gelu, nb_gelu(x))
UNARY(f_erf, nb_erf(x))
UNARY(f_silu, nb_silu(x))
UNARY(f_relu_sq, nb_mul(nb_relu(x), x))
UNARY(f_abs_cube, nb_mul(nb_abs(x), nb_mul(x, x)))
UNARY(f_pow_scalar, nb_pow_scalar(nb_add_scalar(nb_mul(x, x), 0.5), 1.7))
UNARY(f_reciprocal, nb_reciprocal(nb_add_scalar(nb_mul(x, x), 0.5)))
UNARY(f_rsqrt, nb_rsqrt(nb_add_scalar(nb_mul(x, x), 0.5)))
UNARY(f_expm1_log1p, nb_mul(nb_expm1(x), nb_log1p(nb_mul(x, x))))
UNARY(f_softmax, nb_softmax(x, 1))
UNARY(f_log_softmax, nb_log_softmax(x, 0))
UNARY(f_logsumexp, nb_logsumexp(x, 1, false))
UNARY(f_var, nb_var(x, 0, true))
UNARY(f_std_mean, nb_mul(nb_std(x, 1, true), nb_mean(x, 1, true)))
UNARY(f_norm2, nb_norm(x, 2, 1, false))
UNARY(f_norm3, nb_norm(x, 3, 0, false))
UNARY(f_max_sq, nb_mul(nb_max(x, 1, false), nb_sum(x, 1, false)))
UNARY(f_amax_sq, nb_mul(nb_amax(x, 0, false), nb_sum(x, 0, false)))
UNARY(f_cumsum_sq, nb_mul(nb_cumsum(x, 1), x))
UNARY(f_sort_sq, nb_mul(nb_sort(x, 1, false, NULL), x))
UNARY(f_flip_pad, nb_mul(nb_pad(nb_flip(x, (int[]){ 0 }, 1), (int64_t[]){ 1, 2 }, 2, NB_PAD_REFLECT, 0),
                         nb_pad(x, (int64_t[]){ 1, 2 }, 2, NB_PAD_CONSTANT, 0.5)))
UNARY(f_tril_t, nb_mul(nb_tril(x, 0), nb_transpose(nb_triu(nb_transpose(x, 0, 1), 1), 0, 1)))
UNARY(f_layer_norm, nb_layer_norm(x, NULL, NULL, 1e-5))
UNARY(f_clamp_sq, nb_mul(nb_clamp(x, -0.5, 0.6), x))
UNARY(f_where_sq, nb_where(nb_gt(x, nb_scalar(0)), nb_mul(x, x), nb_exp(x)))
UNARY(f_div_pow, nb_div(nb_pow(nb_add_scalar(nb_mul(x, x), 0.5), nb_add_scalar(x, 2)), nb_add_scalar(nb_mul(x, x), 1)))
UNARY(f_max_min, nb_mul(nb_maximum(x, nb_transpose(x, 0, 1)), nb_minimum(x, nb_scalar(0.1))))
UNARY(f_index, nb_mul(nb_index_select(x, 1, nb_from_data((int64_t[]){ 2, 0, 2 }, NB_SHAPE(3), NB_I64)),
                      nb_gather(x, 1, nb_from_data((int64_t[]){ 1, 1, 0, 2, 0, 0, 1, 2, 2 }, NB_SHAPE(3, 3), NB_I64))))
/* index_put over x^2 (rows 2 and 0 overwritten by tanh of rows 1 and 2), times x, with a pick of
   x at broadcast indices squared and added into row 1 */
static nb_tensor *f_index_put(nb_tensor *x, nb_tensor *aux) {
    (void)aux;
    nb_tensor *rows = nb_from_data((int64_t[]){ 2, 0 }, NB_SHAPE(2), NB_I64);
    nb_tensor *a = nb_index_put(nb_mul(x, x), &rows, 1, nb_tanh(nb_slice(x, 0, 1, 3, 1)), false);
    nb_tensor *pick[2] = { nb_from_data((int64_t[]){ 0, 2 }, NB_SHAPE(2, 1), NB_I64),
                           nb_from_data((int64_t[]){ 1, -1, 1 }, NB_SHAPE(3), NB_I64) };
    nb_tensor *b = nb_index(x, pick, 2), *row1 = nb_from_data((int64_t[]){ 1 }, NB_SHAPE(1), NB_I64);
    return nb_index_put(nb_mul(a, x), &row1, 1, nb_sum(nb_mul(b, b), 0, true), true);
}
UNARY(f_ce, nb_cross_entropy(x, nb_from_data((int64_t[]){ 2, 0, 1 }, NB_SHAPE(3), NB_I64), (nb_ce_opts){ 0 }))
UNARY(f_bce, nb_bce_with_logits(x, nb_sigmoid(nb_transpose(x, 0, 1)), NB_REDUCTION_MEAN, NULL))
static nb_tensor *f_matmul(nb_tensor *x, nb_tensor *aux) { return nb_matmul(nb_tanh(nb_matmul(x, aux)), nb_transpose(x, 0, 1)); }
static nb_tensor *f_conv(nb_tensor *x, nb_tensor *w) {
    nb_tensor *img = nb_reshape(x, NB_SHAPE(1, 1, 3, 3));
    nb_tensor *c = nb_conv2d(nb_tanh(img), w, NULL, (nb_conv_opts){ .padding = { 1, 1 } });
    return nb_add(nb_max_pool2d(nb_mul(c, c), 2, (nb_pool_opts){ .stride = 1 }),
                  nb_avg_pool2d(nb_mul(c, img), 2, (nb_pool_opts){ .stride = 1 }));
}

static void test_gradgradcheck(void **state) {
    (void)state;
    static const struct { const char *name; op_fn f; } ops[] = {
        { "exp", f_exp }, { "log", f_log }, { "sqrt", f_sqrt }, { "tanh", f_tanh }, { "sigmoid", f_sigmoid },
        { "sin_cos", f_sin_cos }, { "gelu", f_gelu }, { "erf", f_erf }, { "silu", f_silu }, { "relu_sq", f_relu_sq },
        { "abs_cube", f_abs_cube }, { "pow_scalar", f_pow_scalar }, { "reciprocal", f_reciprocal }, { "rsqrt", f_rsqrt },
        { "expm1_log1p", f_expm1_log1p }, { "softmax", f_softmax }, { "log_softmax", f_log_softmax },
        { "logsumexp", f_logsumexp }, { "var", f_var }, { "std_mean", f_std_mean }, { "norm2", f_norm2 },
        { "norm3", f_norm3 }, { "max_sq", f_max_sq }, { "amax_sq", f_amax_sq }, { "cumsum_sq", f_cumsum_sq },
        { "sort_sq", f_sort_sq }, { "flip_pad", f_flip_pad }, { "tril_triu", f_tril_t }, { "layer_norm", f_layer_norm },
        { "clamp_sq", f_clamp_sq }, { "where_sq", f_where_sq }, { "div_pow", f_div_pow }, { "max_min", f_max_min },
        { "index_gather", f_index }, { "index_put", f_index_put }, { "cross_entropy", f_ce }, { "bce_with_logits", f_bce },
    };
    nb_scope *s = nb_scope_begin();
    /* values away from kinks and ties */
    double xv[9] = { 0.31, -0.72, 1.13, -0.24, 0.57, -1.36, 0.88, 0.12, -0.45 };
    nb_tensor *x = nb_from_data(xv, NB_SHAPE(3, 3), NB_F64);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) gradgradcheck(ops[i].name, ops[i].f, x, NULL);
    gradgradcheck("matmul", f_matmul, x, wave(NB_SHAPE(3, 3), 0.8, 0.3, 0.7));
    gradgradcheck("conv_pool", f_conv, x, wave(NB_SHAPE(2, 1, 3, 3), 0.6, 0.9, 0.6));
    nb_scope_end(s);
}

/* ---- the WGAN-GP step against torch ---- */
/* Parameter k of a model gets values 0.4 * sin(0.37 i + 1.1 k) / sqrt(fan_in) (the check script
   makes the same). */
static void fill_params(nb_module *m) {
    nb_named_tensor p[32];
    int n = nb_module_named_parameters(m, p, 32);
    for (int k = 0; k < n; k++) {
        nb_shape s = nb_shape_of(p[k].tensor);
        int64_t fan_in = 1;
        for (int d = 1; d < s.ndim; d++) fan_in *= s.dim[d];
        nb_scope *sc = nb_scope_begin();
        bool prev = nb_set_grad_enabled(false);
        assert_int_equal(nb_assign(p[k].tensor, wave(s, 0.37, 1.1 * k, 0.4 / sqrt((double)fan_in))), 0);
        nb_set_grad_enabled(prev);
        nb_scope_end(sc);
    }
}

/* loss = mean(D(x)) + 10 mean((|grad_x D(x)|_2 - 1)^2), backward into every parameter. */
static void wgan_gp(FILE *f, const char *tag, nb_module *d, nb_shape xs) {
    nb_scope *s = nb_scope_begin();
    fill_params(d);
    nb_tensor *x = nb_set_requires_grad(nb_cast(wave(xs, 0.23, 0.5, 1), NB_F32), true);
    nb_tensor *out = nb_forward(d, x);
    nb_tensor *sum = nb_sum_all(out), *gx;
    assert_int_equal(nb_autograd_grad(&sum, NULL, 1, &x, 1, &gx, (nb_grad_opts){ .create_graph = true }), 0);
    nb_tensor *norms = nb_norm(nb_reshape(gx, NB_SHAPE(xs.dim[0], -1)), 2, 1, false);
    nb_tensor *dev = nb_add_scalar(norms, -1);
    nb_tensor *loss = nb_add(nb_mean_all(out), nb_mul_scalar(nb_mean_all(nb_mul(dev, dev)), 10));
    assert_int_equal(nb_backward(loss), 0);
    fprintf(f, "%s loss %.17g\n", tag, nb_item(loss));
    nb_named_tensor p[32];
    int n = nb_module_named_parameters(d, p, 32);
    for (int k = 0; k < n; k++) {
        nb_tensor *g = nb_grad_of(p[k].tensor);
        assert_non_null(g);
        int64_t m = nb_numel(g);
        double *v = malloc(sizeof(double) * (size_t)m);
        nb_copy_to(nb_cast(g, NB_F64), v, sizeof(double) * (size_t)m);
        fprintf(f, "%s %s", tag, p[k].name);
        for (int64_t i = 0; i < m; i++) fprintf(f, " %.17g", v[i]);
        fprintf(f, "\n");
        free(v);
    }
    nb_scope_end(s);
}

static const char *out_path;

static void test_wgan_gp(void **state) {
    (void)state;
    if (!out_path) skip();
    FILE *f = fopen(out_path, "w");
    assert_non_null(f);
    nb_module *mlp = nb_nn_sequential(nb_nn_linear(6, 8), nb_nn_tanh(), nb_nn_linear(8, 5), nb_nn_gelu(), nb_nn_linear(5, 1), NULL);
    wgan_gp(f, "mlp", mlp, NB_SHAPE(4, 6));
    nb_module *cnn = nb_nn_sequential(
        nb_nn_conv2d(2, 3, 3, (nb_conv2d_opts){ .padding = 1 }), nb_nn_tanh(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(3, 4, 3, (nb_conv2d_opts){ .padding = 1 }), nb_nn_silu(), nb_nn_adaptive_avg_pool2d(1, 1), nb_nn_flatten(),
        nb_nn_linear(4, 1), NULL);
    wgan_gp(f, "cnn", cnn, NB_SHAPE(3, 2, 6, 6));
    fclose(f);
    nb_module_free(mlp);
    nb_module_free(cnn);
}

int main(int argc, char **argv) {
    out_path = argc > 1 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_contract, clear_error_setup),
        cmocka_unit_test_setup(test_custom_function, clear_error_setup),
        cmocka_unit_test_setup(test_gradgradcheck, clear_error_setup),
        cmocka_unit_test_setup(test_wgan_gp, clear_error_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
