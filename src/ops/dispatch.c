/* The one dispatch path. Every tensor operation, from users, composites, backward formulas
   and the tracer, comes through nb__dispatch: NULL and device checks, dtype promotion,
   validation and shape inference, the backend kernel, anomaly checks and the autograd record. */
#include "ops_impl.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* NB_OP_COUNT names a custom function's node (src/autograd/function.c). */
static const char *op_name(int op) { return (unsigned)op < NB_OP_COUNT ? nb__ops[op].name : op == NB_OP_COUNT ? "function" : "?"; }

__attribute__((constructor)) static void ops_init(void) { nb__graph_set_op_name(op_name); }

nb_dtype nb__promote(nb_dtype a, nb_dtype b) {
    if (a == b) return a;
    /* rank: bool < u8/i8 < i32 < i64 < f16/bf16 < f32 < f64; f16 with bf16 gives f32 as torch
       does; u8 with i8 gives i32 (torch's i16, which nabla lacks: the next wider type it has) */
    static const int rank[NB_DTYPE_COUNT] = { [NB_BOOL] = 0, [NB_U8] = 1, [NB_I8] = 1, [NB_I32] = 2, [NB_I64] = 3,
                                              [NB_F16] = 4, [NB_BF16] = 4, [NB_F32] = 5, [NB_F64] = 6 };
    if (rank[a] == rank[b]) return rank[a] == 1 ? NB_I32 : NB_F32;
    return rank[a] > rank[b] ? a : b;
}

static NB_TLS nb_trace_record_fn trace_rec;
static NB_TLS void *trace_ctx;
static NB_TLS bool trace_paused;
static NB_TLS nb_trace_before_fn trace_before;
void nb__trace_set_before(nb_trace_before_fn before) { trace_before = before; }
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

bool nb__tracing(void) { return trace_rec && !trace_paused; }

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
    return !((i >= 1 && (def->flags & NB_F_INDEX1)) || (i >= 2 && (def->flags & NB_F_INDEX2)));
}

/* What non-finite values t holds: NB_NONFINITE_NONE, _INF (infinities, no NaN) or _NAN. */
static int value_class(double v) { return v != v ? NB_NONFINITE_NAN : isinf(v) ? NB_NONFINITE_INF : NB_NONFINITE_NONE; }
static int nonfinite_class(const nb_tensor *t) {
    if (!nb__is_float(t->dtype)) return NB_NONFINITE_NONE;
    if (t->storage->device.type != NB_CPU) { /* a device's tensor: scanned in a host copy */
        nb_tensor *h = nb__tensor_new(t->shape, t->dtype);
        int c = h && nb__read_to_host(t, nb__data(h)) == 0 ? nonfinite_class(h) : NB_NONFINITE_NONE;
        nb_release(h);
        return c;
    }
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

static bool same_device(nb_device a, nb_device b) { return a.type == b.type && a.index == b.index; }

/* The device an op over in runs on: the common device of its inputs, where a 0-d cpu tensor
   goes along with any device (as PyTorch lets a cpu scalar join a cuda op). Inputs on two
   devices are an error naming both. */
static int op_device(const nb_op_def *def, nb_tensor *const *in, int nin, nb_device *dev) {
    int at = -1;
    for (int i = 0; i < nin; i++) {
        nb_device d = in[i]->storage->device;
        if (d.type == NB_CPU && in[i]->shape.ndim == 0 && !(i == 0 && (def->flags & NB_F_INPLACE))) continue;
        if (at < 0) { at = i; *dev = d; continue; }
        if (!same_device(d, *dev)) {
            char a[32], b[32];
            nb__error("nb_%s: inputs are on two devices, %s (input %d) and %s (input %d); move one with nb_to", def->name,
                      nb_device_str(*dev, a, sizeof a), at, nb_device_str(d, b, sizeof b), i);
            return -1;
        }
    }
    if (at < 0) *dev = nin > 0 ? in[0]->storage->device : (nb_device){ NB_CPU, 0 };
    return 0;
}

bool nb_device_supports(nb_device dev, const char *op, nb_dtype dtype) {
    int id = -1;
    for (int k = 0; op && k < NB_OP_COUNT && id < 0; k++)
        if (!strcmp(nb__ops[k].name, op)) id = k;
    if (id < 0) {
        nb__error("nb_device_supports: \"%s\" is no op of the table (docs/ops.md lists them)", op ? op : "(NULL)");
        return false;
    }
    if ((unsigned)dtype >= NB_DTYPE_COUNT || !nb_device_available(dev)) return false;
    const nb_op_def *def = &nb__ops[id];
    if (!(def->flags & NB_F_ANY_DTYPE) && !(def->dtypes & NB_T(dtype))) return false;
    if (def->flags & (NB_F_VIEW | NB_F_DEVICE)) return true; /* headers and copies: no kernel of their own */
    const nb_backend *b = nb__backend_get(dev.type);
    return b && b->kernels[id] && (!b->supports || b->supports((nb_op_id)id, dtype));
}

/* The backend's kernel for op at dtype, or NULL with "nb_X: no kernel for <backend>" recorded. */
static nb_kernel_fn kernel_for(const nb_op_def *def, nb_op_id op, const nb_backend *b, nb_dtype dtype) {
    nb_kernel_fn k = b->kernels[op];
    if (k && (!b->supports || b->supports(op, dtype))) return k;
    if (k) nb__error("nb_%s: no kernel for %s at dtype %s", def->name, b->name, nb_dtype_name(dtype));
    else nb__error("nb_%s: no kernel for %s", def->name, b->name);
    return NULL;
}

nb_tensor *nb__dispatch(nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args_in) {
    const nb_op_def *def = &nb__ops[op];
    if (def->nin >= 0 && nin != def->nin) {
        nb__error("nb_%s: expected %d inputs, got %d", def->name, def->nin, nin);
        return NULL;
    }
    bool on_host = true;
    for (int i = 0; i < nin; i++) {
        if (!in[i]) {
            if (!nb__has_error()) nb__error("nb_%s: input %d is NULL", def->name, i);
            return NULL;
        }
        if (!in[i]->storage->data && in[i]->numel > 0) {
            /* memory handed back while its tensor lives on (an FSDP unit's parameters between uses) */
            char d[200];
            nb__error("nb_%s: input %d %s has no memory now: its storage was released (a sharded module's parameters "
                      "exist only during its forward and backward)", def->name, i, nb__describe(in[i], d, sizeof d));
            return NULL;
        }
        on_host = on_host && in[i]->storage->device.type == NB_CPU;
    }
    /* the device and backend the op runs on (the host's, without a lookup, when all is there) */
    nb_device dev = { NB_CPU, 0 };
    const nb_backend *backend = &nb__cpu_backend;
    if (def->flags & NB_F_CREATE) dev = args_in ? args_in->device : dev;
    else if (!on_host && !(def->flags & NB_F_DEVICE) && op_device(def, in, nin, &dev) < 0) return NULL;
    if (def->flags & NB_F_DEVICE) dev = in[0]->storage->device;
    if (dev.type != NB_CPU && !(backend = nb__backend_for(op == NB_OP_TO ? "nb_to" : "nb_empty", dev))) return NULL;
    nb_op_args args = args_in ? *args_in : (nb_op_args){ 0 };

    /* Decide the compute dtype and convert inputs to it. */
    nb_tensor *stack_conv[8] = { 0 };
    nb_tensor **conv = nin <= 8 ? stack_conv : nb__alloc(sizeof(nb_tensor *) * (size_t)nin);
    if (!conv) { nb__error("nb_%s: out of memory", def->name); return NULL; }
    for (int i = 0; i < nin; i++) conv[i] = in[i];
    nb_tensor *out = NULL;
    if (!on_host && !(def->flags & NB_F_DEVICE))
        for (int i = 0; i < nin; i++) {
            if (same_device(in[i]->storage->device, dev)) continue;
            nb_op_args to_args = { .device = dev }; /* a 0-d cpu input joins the op's device */
            conv[i] = nb__dispatch(NB_OP_TO, &in[i], 1, &to_args);
            if (!conv[i]) goto done;
        }
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
            nb_tensor *c = nb__dispatch(NB_OP_CAST, &conv[i], 1, &cast_args);
            if (conv[i] != in[i]) nb_release(conv[i]);
            conv[i] = c;
            if (!conv[i]) goto done;
        }
        /* the result stays float; a half result only when the op computes floats from halves */
        if (back_to_half && (def->flags & NB_F_NONDIFF)) back_to_half = false;
    }

    nb_meta meta; /* inference fills shape and dtype; views also strides and offset */
    meta.offset = 0;
    if (def->infer(op, conv, nin, &args, &meta) < 0) goto done;
    /* one check of every inferred shape: its element count and byte size fit in 64 bits (the
       op's name is formatted only for the message, off the per-op path) */
    if (!nb__shape_check(NULL, &meta.shape, nb__esize(meta.dtype), NULL)) {
        char fn[48];
        snprintf(fn, sizeof fn, "nb_%s", def->name);
        nb__shape_check(fn, &meta.shape, nb__esize(meta.dtype), NULL);
        goto done;
    }

    /* a tracer may want shapes only: the output is made (never written) and the kernel skipped */
    bool run = true;
    if (trace_rec && !trace_paused && trace_before) run = trace_before(trace_ctx, op, conv, nin);
    if (def->flags & NB_F_VIEW) {
        out = nb__tensor_view(conv[0], meta.shape, meta.stride, meta.offset);
        if (!out) goto done;
    } else if (def->flags & NB_F_DEVICE) {
        if (!(out = nb__to_device(conv[0], args.device))) goto done;
    } else {
        nb_kernel_fn kernel = kernel_for(def, op, backend, nin > 0 ? conv[0]->dtype : meta.dtype);
        if (!kernel) goto done;
        out = def->flags & NB_F_INPLACE ? nb_retain(conv[0]) : nb__tensor_new_on(meta.shape, meta.dtype, dev);
        if (!out) goto done;
        if (run && kernel(out, conv, nin, &args) < 0) {
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
    if (run && nb__anomaly_enabled() && !(def->flags & (NB_F_VIEW | NB_F_CREATE)) &&
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

    /* as in torch, only a float result carries a gradient (a cast to an integer ends the graph) */
    if (!(def->flags & NB_F_NONDIFF) && def->backward && nb__grad_enabled() && nb__is_float(out->dtype)) {
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
