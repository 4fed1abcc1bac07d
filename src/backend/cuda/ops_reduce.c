/* The CUDA backend's entry points of the reductions, softmax and log-softmax, and batch
   normalisation (k_reduce.cu's launchers). */
#include "ops_cuda.h"
#include "ops_util.h"
#include <math.h>

/* args.i[0]: the mask of reduced axes. The input's kept and reduced axes as two views of it. */
static int reduce(const char *fn, int op, nb_tensor *out, nb_tensor *t, const nb_op_args *args) {
    nb__k_view kept = nb__cu_view(t), red = nb__cu_view(t);
    kept.ndim = red.ndim = 0;
    kept.numel = red.numel = 1;
    for (int d = 0; d < t->shape.ndim; d++) {
        nb__k_view *v = args->i[0] & ((int64_t)1 << d) ? &red : &kept;
        v->shape[v->ndim] = t->shape.dim[d];
        v->stride[v->ndim++] = t->stride[d];
        v->numel *= t->shape.dim[d];
    }
    if (kept.numel == 0) return 0;
    if (red.numel == 0) /* over an empty axis: zeros, as the cpu */
        return nb__cu_check(fn, nb__k_zero(nb__data(out), (size_t)out->numel * nb_dtype_size(out->dtype)));
    nb__k_view o = nb__cu_view(out);
    return nb__cu_check(fn, nb__k_reduce(op, &o, &kept, &red));
}

#define REDUCE_ENTRY(NAME, OP)                                                                     \
    int nb__cuda_##NAME(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { \
        (void)nin;                                                                                 \
        return reduce(#NAME, OP, out, in[0], args);                                                \
    }
REDUCE_ENTRY(sum, NBC_SUM)
REDUCE_ENTRY(max, NBC_MAX)
REDUCE_ENTRY(min, NBC_MIN)
REDUCE_ENTRY(argmax, NBC_ARGMAX)
REDUCE_ENTRY(argmin, NBC_ARGMIN)

/* args.i[0]: the axis (normalised by inference). */
static int softmax(const char *fn, nb_tensor *out, nb_tensor *x, const nb_op_args *args, int log_out) {
    if (x->numel == 0) return 0;
    int axis = (int)args->i[0], nd = x->shape.ndim;
    nb__k_view xrow = nb__cu_view_without(x, axis), yrow = nb__cu_view_without(out, axis);
    int64_t n = nd ? x->shape.dim[axis] : 1, xs = nd ? x->stride[axis] : 0, ys = nd ? out->stride[axis] : 0;
    return nb__cu_check(fn, nb__k_softmax(&xrow, &yrow, n, xs, ys, log_out));
}

int nb__cuda_softmax(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return softmax("softmax", out, in[0], args, 0);
}

int nb__cuda_log_softmax(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return softmax("log_softmax", out, in[0], args, 1);
}

/* in: x (or g, x for the gradient kinds), then w and b where the kind reads them; args.f[0]: eps */
static int batch_norm(const char *fn, int kind, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    bool grad = kind == NBC_BN_REDUCE || kind == NBC_BN_BACKWARD;
    nb_tensor *x = in[grad ? 1 : 0], *g = grad ? in[0] : x;
    nb_tensor *w = kind == NBC_BN_FORWARD ? in[1] : kind == NBC_BN_BACKWARD ? in[2] : x;
    nb_tensor *b = kind == NBC_BN_FORWARD ? in[2] : x;
    int64_t C = x->shape.dim[1];
    if (C == 0) return 0;
    if (x->numel == 0) { /* no samples: the statistics are NaN, as torch's mean of nothing */
        if (kind != NBC_BN_STATS && kind != NBC_BN_REDUCE) return 0;
        nb__k_view o = nb__cu_view(out);
        return nb__cu_check(fn, nb__k_fill(&o, kind == NBC_BN_STATS ? NAN : 0));
    }
    bool dense_out = kind == NBC_BN_FORWARD || kind == NBC_BN_BACKWARD;
    nb__k_view o = dense_out ? nb__cu_view_without(out, 1) : nb__cu_view(out);
    nb__k_view xv = nb__cu_view_without(x, 1), gv = nb__cu_view_without(g, 1), wv = nb__cu_view(w), bv = nb__cu_view(b);
    return nb__cu_check(fn, nb__k_batch_norm(kind, &o, &xv, x->stride[1], &gv, g->stride[1], dense_out ? out->stride[1] : 0,
                                           &wv, &bv, C, args->f[0]));
}

int nb__cuda_batch_norm_stats(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return batch_norm("batch_norm_stats", NBC_BN_STATS, out, in, args);
}
int nb__cuda_batch_norm(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return batch_norm("batch_norm", NBC_BN_FORWARD, out, in, args);
}
int nb__cuda_batch_norm_reduce(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return batch_norm("batch_norm_reduce", NBC_BN_REDUCE, out, in, args);
}
int nb__cuda_batch_norm_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return batch_norm("batch_norm_backward", NBC_BN_BACKWARD, out, in, args);
}
