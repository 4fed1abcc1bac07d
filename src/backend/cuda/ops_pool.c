/* The CUDA backend's entry points of 2-D pooling (k_pool.cu's launchers), with the cpu's geometry
   (nb__pool_geometry). */
#include "ops_cuda.h"
#include "ops_util.h"
#include "../prep.h"

static int max_pool(const char *fn, nb_tensor *out, nb_tensor *x, const nb_op_args *args, int indices) {
    nb__k_pool_geom g = nb__pool_geometry(&x->shape, &out->shape, args, false);
    nb__k_view o = nb__cu_view(out), xv = nb__cu_view(x);
    return nb__cu_check(fn, nb__k_max_pool2d(&g, &o, &xv, indices));
}

int nb__cuda_max_pool2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return max_pool("max_pool2d", out, in[0], args, 0);
}

int nb__cuda_max_pool2d_indices(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return max_pool("max_pool2d_indices", out, in[0], args, 1);
}

/* max_pool2d_backward(dy, x) -> dx */
int nb__cuda_max_pool2d_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *dy = in[0], *x = in[1];
    nb__k_pool_geom g = nb__pool_geometry(&x->shape, &dy->shape, args, false);
    nb__k_view o = nb__cu_view(out), dyv = nb__cu_view(dy), xv = nb__cu_view(x);
    return nb__cu_check("max_pool2d_backward", nb__k_max_pool2d_backward(&g, &o, &dyv, &xv));
}

static int avg_pool(const char *fn, nb_tensor *out, nb_tensor *x, const nb_op_args *args, bool adaptive) {
    nb__k_pool_geom g = nb__pool_geometry(&x->shape, &out->shape, args, adaptive);
    nb__k_view o = nb__cu_view(out), xv = nb__cu_view(x);
    return nb__cu_check(fn, nb__k_avg_pool2d(&g, &o, &xv));
}

static int avg_pool_backward(const char *fn, nb_tensor *out, nb_tensor *dy, const nb_op_args *args, bool adaptive) {
    nb__k_pool_geom g = nb__pool_geometry(&out->shape, &dy->shape, args, adaptive);
    nb__k_view o = nb__cu_view(out), dyv = nb__cu_view(dy);
    return nb__cu_check(fn, nb__k_avg_pool2d_backward(&g, &o, &dyv));
}

int nb__cuda_avg_pool2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool("avg_pool2d", out, in[0], args, false);
}
int nb__cuda_avg_pool2d_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool_backward("avg_pool2d_backward", out, in[0], args, false);
}
int nb__cuda_adaptive_avg_pool2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool("adaptive_avg_pool2d", out, in[0], args, true);
}
int nb__cuda_adaptive_avg_pool2d_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool_backward("adaptive_avg_pool2d_backward", out, in[0], args, true);
}
