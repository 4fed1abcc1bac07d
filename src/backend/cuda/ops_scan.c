/* The CUDA backend's entry points of the ops along one axis: cumsum, cumprod and its backward
   and argsort (k_scan.cu). */
#include "ops_cuda.h"
#include "ops_util.h"

/* args.i[0]: the axis; i[1]: reverse. */
/* sort: argsort (i[1]: descending), else a scan (mul: cumprod) */
static int scan(const char *fn, nb_tensor *out, nb_tensor *x, const nb_op_args *args, int mul, bool sort) {
    if (out->numel == 0) return 0;
    int axis = (int)args->i[0], nd = x->shape.ndim;
    nb__k_view yl = nb__cu_view_without(out, axis), xl = nb__cu_view_without(x, axis);
    int64_t n = nd ? x->shape.dim[axis] : 1, ys = nd ? out->stride[axis] : 0, xs = nd ? x->stride[axis] : 0;
    if (sort) return nb__cu_check(fn, nb__k_argsort(&yl, &xl, n, ys, xs, args->i[1] != 0));
    return nb__cu_check(fn, nb__k_scan(&yl, &xl, n, ys, xs, mul, args->i[1] != 0));
}

int nb__cuda_cumsum(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return scan("cumsum", out, in[0], args, 0, false);
}

int nb__cuda_cumprod(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return scan("cumprod", out, in[0], args, 1, false);
}

/* in: x, then the upstream gradient g; args.i[0]: the axis */
int nb__cuda_cumprod_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    if (out->numel == 0) return 0;
    int axis = (int)args->i[0], nd = out->shape.ndim;
    nb_tensor *x = in[0], *g = in[1];
    nb__k_view yl = nb__cu_view_without(out, axis), xl = nb__cu_view_without(x, axis), gl = nb__cu_view_without(g, axis);
    int64_t n = nd ? out->shape.dim[axis] : 1;
    return nb__cu_check("cumprod_backward",
                        nb__k_cumprod_backward(&yl, &xl, &gl, n, nd ? out->stride[axis] : 0, nd ? x->stride[axis] : 0,
                                             nd ? g->stride[axis] : 0));
}

/* args.i[0]: the axis; i[1]: descending */
int nb__cuda_argsort(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return scan("argsort", out, in[0], args, 0, true);
}
