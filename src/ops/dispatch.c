/* The one dispatch path. Every tensor operation, from users, composites, backward formulas
   and the tracer, comes through nb__dispatch: NULL and device checks, dtype promotion,
   validation and shape inference, the backend kernel, anomaly checks and the autograd record. */
#include "ops_impl.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *op_name(int op) { return (unsigned)op < NB_OP_COUNT ? nb__ops[op].name : "?"; }

__attribute__((constructor)) static void ops_init(void) { nb__graph_set_op_name(op_name); }

nb_dtype nb__promote(nb_dtype a, nb_dtype b) {
    if (a == b) return a;
    /* rank: bool < u8 < i32 < i64 < f16/bf16 < f32 < f64; f16 with bf16 gives f32 as torch does */
    static const int rank[NB_DTYPE_COUNT] = { [NB_BOOL] = 0, [NB_U8] = 1, [NB_I32] = 2, [NB_I64] = 3,
                                              [NB_F16] = 4, [NB_BF16] = 4, [NB_F32] = 5, [NB_F64] = 6 };
    if (rank[a] == rank[b]) return NB_F32;
    return rank[a] > rank[b] ? a : b;
}

static NB_TLS nb_trace_record_fn trace_rec;
static NB_TLS void *trace_ctx;
static NB_TLS bool trace_paused;
static NB_TLS unsigned reads_at_pause;

void nb__trace_set(nb_trace_record_fn rec, void *ctx) {
    trace_rec = rec;
    trace_ctx = ctx;
    trace_paused = false;
}

bool nb__trace_suspend(bool suspend) {
    bool was = trace_paused;
    if (suspend && !was) reads_at_pause = nb__host_reads;
    if (!suspend && was) nb__host_reads = reads_at_pause;
    trace_paused = suspend;
    return was;
}

static bool is_half(nb_dtype d) { return d == NB_F16 || d == NB_BF16; }
static int category(nb_dtype d) { return d == NB_BOOL ? 0 : nb__is_float(d) ? 2 : 1; }

static void dtype_list(unsigned mask, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = 0;
    for (int d = 0; d < NB_DTYPE_COUNT; d++)
        if (mask & NB_T(d)) n += (size_t)snprintf(buf + n, n < size ? size - n : 0, n ? ", %s" : "%s", nb_dtype_name((nb_dtype)d));
}

/* Whether input i takes part in dtype promotion (index and condition inputs do not). */
static bool is_data_input(const nb_op_def *def, int i) {
    if (i == 0) return !(def->flags & NB_F_COND0);
    return !(i == 1 && (def->flags & NB_F_INDEX1));
}

/* What non-finite values t holds: NB_NONFINITE_NONE, _INF (infinities, no NaN) or _NAN. */
static int value_class(double v) { return v != v ? NB_NONFINITE_NAN : isinf(v) ? NB_NONFINITE_INF : NB_NONFINITE_NONE; }
static int nonfinite_class(const nb_tensor *t) {
    if (!nb__is_float(t->dtype)) return NB_NONFINITE_NONE;
    const void *p = nb__data(t);
    int c = NB_NONFINITE_NONE;
    if (nb_is_contiguous(t) && t->dtype == NB_F32) {
        const float *f = p;
        for (int64_t i = 0; i < t->numel; i++)
            if (!isfinite(f[i])) {
                if (f[i] != f[i]) return NB_NONFINITE_NAN;
                c = NB_NONFINITE_INF;
            }
        return c;
    }
    int64_t idx[NB_MAX_DIMS] = { 0 };
    for (int64_t k = 0; k < t->numel; k++) {
        int64_t off = 0;
        for (int d = 0; d < t->shape.ndim; d++) off += idx[d] * t->stride[d];
        int v = value_class(nb__load(p, t->dtype, off));
        if (v == NB_NONFINITE_NAN) return v;
        if (v > c) c = v;
        for (int d = t->shape.ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape.dim[d]) break;
            idx[d] = 0;
        }
    }
    return c;
}

int nb__nonfinite_class(const nb_tensor *t) { return nonfinite_class(t); }

int nb__args_nonfinite_class(const nb_op_args *args) {
    int c = NB_NONFINITE_NONE;
    for (int k = 0; k < 8; k++) {
        int v = value_class(args->f[k]);
        if (v > c) c = v;
    }
    return c;
}

nb_tensor *nb__dispatch(nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args_in) {
    const nb_op_def *def = &nb__ops[op];
    if (def->nin >= 0 && nin != def->nin) {
        nb__error("nb_%s: expected %d inputs, got %d", def->name, def->nin, nin);
        return NULL;
    }
    for (int i = 0; i < nin; i++) {
        if (!in[i]) {
            if (!nb__has_error()) nb__error("nb_%s: input %d is NULL", def->name, i);
            return NULL;
        }
        if (in[i]->storage->device.type != NB_CPU) {
            char d[200];
            nb__error("nb_%s: input %d is %s, but this build of nabla runs on the cpu only", def->name, i,
                      nb__describe(in[i], d, sizeof d));
            return NULL;
        }
    }
    nb_op_args args = args_in ? *args_in : (nb_op_args){ 0 };

    /* Decide the compute dtype and convert inputs to it. */
    nb_tensor *stack_conv[8] = { 0 };
    nb_tensor **conv = nin <= 8 ? stack_conv : nb__alloc(sizeof(nb_tensor *) * (size_t)nin);
    if (!conv) { nb__error("nb_%s: out of memory", def->name); return NULL; }
    for (int i = 0; i < nin; i++) conv[i] = in[i];
    nb_tensor *out = NULL;
    nb_dtype half_out = NB_F32;
    bool back_to_half = false;
    if (nin > 0 && !(def->flags & NB_F_CREATE)) {
        /* As torch: 0-d inputs promote the others only when of a higher category (bool <
           integer < float), so an f32 tensor with an f64 0-d tensor stays f32. */
        nb_dtype dims = NB_BOOL, zero = NB_BOOL;
        bool has_dims = false, has_zero = false;
        for (int i = 0; i < nin; i++) {
            if (!is_data_input(def, i)) continue;
            if (!(def->flags & NB_F_PROMOTE) && i > 0) break;
            if (in[i]->shape.ndim > 0) {
                dims = has_dims ? nb__promote(dims, in[i]->dtype) : in[i]->dtype;
                has_dims = true;
            } else {
                zero = has_zero ? nb__promote(zero, in[i]->dtype) : in[i]->dtype;
                has_zero = true;
            }
        }
        nb_dtype target = !has_dims ? zero : !has_zero || category(zero) <= category(dims) ? dims : nb__promote(dims, zero);
        if (is_half(target) && !(def->flags & NB_F_ANY_DTYPE)) {
            half_out = target;
            back_to_half = true;
            target = NB_F32;
        }
        if ((def->flags & NB_F_FLOAT) && !nb__is_float(target)) target = NB_F32;
        if ((def->flags & NB_F_SCALAR) && !nb__is_float(target) && args.f[0] != floor(args.f[0])) target = NB_F32;
        if (!(def->dtypes & NB_T(target))) {
            char list[128], d[200];
            dtype_list(def->dtypes, list, sizeof list);
            nb__error("nb_%s: dtype %s is not supported (input %s; supported: %s)", def->name, nb_dtype_name(target),
                      nb__describe(in[0], d, sizeof d), list);
            goto done;
        }
        for (int i = 0; i < nin; i++) {
            if (!is_data_input(def, i) || in[i]->dtype == target) continue;
            if (!(def->flags & NB_F_PROMOTE) && i > 0) break;
            nb_op_args cast_args = { .dtype = target };
            conv[i] = nb__dispatch(NB_OP_CAST, &in[i], 1, &cast_args);
            if (!conv[i]) goto done;
        }
        /* the result stays float; a half result only when the op computes floats from halves */
        if (back_to_half && (def->flags & NB_F_NONDIFF)) back_to_half = false;
    }

    nb_meta meta; /* inference fills shape and dtype; views also strides and offset */
    meta.offset = 0;
    if (def->infer(def->name, conv, nin, &args, &meta) < 0) goto done;
    /* one check of every inferred shape: its element count and byte size fit in 64 bits (the
       op's name is formatted only for the message, off the per-op path) */
    if (!nb__shape_check(NULL, &meta.shape, nb__esize(meta.dtype), NULL)) {
        char fn[48];
        snprintf(fn, sizeof fn, "nb_%s", def->name);
        nb__shape_check(fn, &meta.shape, nb__esize(meta.dtype), NULL);
        goto done;
    }

    if (def->flags & NB_F_VIEW) {
        out = nb__tensor_view(conv[0], meta.shape, meta.stride, meta.offset);
        if (!out) goto done;
    } else if (def->flags & NB_F_INPLACE) {
        out = nb_retain(conv[0]);
        if (nb__cpu_kernels[op](out, conv, nin, &args) < 0) {
            nb_release(out);
            out = NULL;
            goto done;
        }
    } else {
        out = nb__tensor_new(meta.shape, meta.dtype);
        if (!out) goto done;
        nb_kernel_fn kernel = nb__cpu_kernels[op];
        if (!kernel) {
            nb__error("nb_%s: no cpu kernel", def->name);
            nb_release(out);
            out = NULL;
            goto done;
        }
        if (kernel(out, conv, nin, &args) < 0) {
            nb_release(out);
            out = NULL;
            goto done;
        }
    }

    if (trace_rec && !trace_paused) trace_rec(trace_ctx, op, conv, nin, &args, out);

    /* Anomaly mode flags an op whose output holds a non-finite value that it made: a NaN when no
       input (nor scalar argument) held a NaN, an infinity when none held a non-finite value. What
       an op was given passes (a -inf mask added to scores, a NaN carried along), and creation ops
       are never checked: nb_empty's buffer is uninitialised, nb_full(-inf) makes what it was
       asked for. Views make no values. */
    int out_class;
    if (nb__anomaly_enabled() && !(def->flags & (NB_F_VIEW | NB_F_CREATE)) &&
        (out_class = nonfinite_class(out)) != NB_NONFINITE_NONE) {
        int in_class = nb__args_nonfinite_class(&args);
        for (int i = 0; i < nin && in_class < out_class; i++) {
            int c = nonfinite_class(conv[i]);
            if (c > in_class) in_class = c;
        }
        if (out_class > in_class) {
            char d[200];
            nb__error("nb_%s: anomaly detected: the forward output %s contains NaN or Inf (%s)", def->name,
                      nb__describe(out, d, sizeof d),
                      out_class == NB_NONFINITE_NAN ? (in_class == NB_NONFINITE_INF ? "NaN, where the inputs held infinities only"
                                                                                    : "NaN, where the inputs were finite")
                                                    : "an infinity, where the inputs were finite");
            nb_release(out);
            out = NULL;
            goto done;
        }
    }

    if (!(def->flags & NB_F_NONDIFF) && def->backward && nb__grad_enabled()) {
        bool any = false;
        for (int i = 0; i < nin; i++) any = any || conv[i]->requires_grad;
        if (any && !nb__node_new(op, conv, nin, &args, out, (def->flags & NB_F_SAVE_OUT) != 0)) {
            nb_release(out);
            out = NULL;
            goto done;
        }
    }

    if (back_to_half && nb__is_float(out->dtype)) {
        nb_op_args cast_args = { .dtype = half_out };
        nb_tensor *h = nb__dispatch(NB_OP_CAST, &out, 1, &cast_args);
        nb_release(out);
        out = h;
    }

done:
    for (int i = 0; i < nin; i++)
        if (conv[i] && conv[i] != in[i]) nb_release(conv[i]);
    if (conv != stack_conv) nb__free(conv, sizeof(nb_tensor *) * (size_t)nin);
    return out;
}
