/* Batch norm: the functional nb_batch_norm, composed from primitive ops (one reduction for
   the mean, one for the variance, elementwise ops for the rest), and the modules
   nb_nn_batch_norm1d / nb_nn_batch_norm2d with torch's parameters and buffers (weight, bias,
   running_mean, running_var, num_batches_tracked). Running statistics are updated in place
   with recording off; the running variance takes the unbiased batch variance, as torch. */
#include "nn_impl.h"
#include <stdio.h>

/* Writes value into t with recording off. */
static int assign_no_grad(nb_tensor *t, nb_tensor *value) {
    bool prev = nb_set_grad_enabled(false);
    int rc = nb_assign(t, value);
    nb_set_grad_enabled(prev);
    return rc;
}

static bool is_channel_vector(nb_tensor *t, int64_t c) { return !t || (nb_ndim(t) == 1 && nb_dim(t, 0) == c); }

nb_tensor *nb_batch_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *w, nb_tensor *b,
                         bool training, double momentum, double eps) {
    if (!x) return NULL;
    char d[200], sh[160];
    int nd = nb_ndim(x);
    if (nd < 2) {
        nb__error("nb_batch_norm: expected input [N, C, ...], got %s", nb__describe(x, d, sizeof d));
        return NULL;
    }
    nb_shape xs = nb_shape_of(x);
    int64_t n = xs.dim[0], c = xs.dim[1], l = 1;
    for (int i = 2; i < nd; i++) l *= xs.dim[i];
    nb_tensor *vecs[4] = { running_mean, running_var, w, b };
    static const char *names[4] = { "running_mean", "running_var", "weight", "bias" };
    for (int i = 0; i < 4; i++)
        if (!is_channel_vector(vecs[i], c)) {
            nb__error("nb_batch_norm: %s must be [%lld] for input %s, got %s", names[i], (long long)c,
                      nb__describe(x, d, sizeof d), nb_shape_str(nb_shape_of(vecs[i]), sh, sizeof sh));
            return NULL;
        }
    if (!training && (!running_mean || !running_var)) {
        nb__error("nb_batch_norm: evaluation mode needs running_mean and running_var");
        return NULL;
    }
    int64_t count = n * l;
    if (training && count <= 1) {
        nb__error("nb_batch_norm: expected more than 1 value per channel when training, got input %s",
                  nb__describe(x, d, sizeof d));
        return NULL;
    }
    if (momentum == 0) momentum = 0.1;
    if (eps <= 0) eps = 1e-5;

    nb_scope *scope = nb_scope_begin();
    nb_shape col = NB_SHAPE(c, 1);
    nb_tensor *xr = nb_reshape(x, NB_SHAPE(n, c, l)); /* channels against [C, 1] statistics */
    nb_tensor *centered, *invstd;
    if (training) {
        nb_tensor *mean = nb_mul_scalar(nb_sum_to(xr, col), 1.0 / (double)count);
        centered = nb_sub(xr, mean);
        nb_tensor *var = nb_mul_scalar(nb_sum_to(nb_mul(centered, centered), col), 1.0 / (double)count);
        invstd = nb_pow_scalar(nb_add_scalar(var, eps), -0.5);
        if (running_mean && running_var && var) {
            bool prev = nb_set_grad_enabled(false);
            nb_tensor *m = nb_reshape(nb_detach(mean), NB_SHAPE(c));
            nb_tensor *v = nb_reshape(nb_mul_scalar(nb_detach(var), (double)count / (double)(count - 1)), NB_SHAPE(c));
            nb_assign(running_mean, nb_add(nb_mul_scalar(running_mean, 1 - momentum), nb_mul_scalar(m, momentum)));
            nb_assign(running_var, nb_add(nb_mul_scalar(running_var, 1 - momentum), nb_mul_scalar(v, momentum)));
            nb_set_grad_enabled(prev);
        }
    } else {
        centered = nb_sub(xr, nb_reshape(running_mean, col));
        invstd = nb_pow_scalar(nb_add_scalar(nb_reshape(running_var, col), eps), -0.5);
    }
    nb_tensor *scale = w ? nb_mul(invstd, nb_reshape(w, col)) : invstd;
    nb_tensor *y = nb_mul(centered, scale);
    if (b) y = nb_add(y, nb_reshape(b, col));
    nb_tensor *r = nb_reshape(y, xs);
    if (r && nb_dtype_of(r) != nb_dtype_of(x)) r = nb_cast(r, nb_dtype_of(x)); /* f32 statistics with f64 x */
    nb_keep(r);
    nb_scope_end(scope);
    return nb__own(r);
}

/* ---------- modules ---------- */
typedef struct {
    nb_module base;
    int64_t features;
    int dims; /* 1 or 2 */
    nb_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
} batch_norm;

static nb_tensor *batch_norm_forward(nb_module *self, nb_tensor *x) {
    batch_norm *bn = (batch_norm *)self;
    int nd = nb_ndim(x);
    bool ok = bn->dims == 1 ? (nd == 2 || nd == 3) : nd == 4;
    if (!ok || nb_dim(x, 1) != bn->features) {
        char sh[160];
        long long f = (long long)bn->features;
        if (bn->dims == 1)
            nb__error("nb_nn_batch_norm1d %s: expected input [N, %lld] or [N, %lld, L], got %s", nb__layer_name(self), f, f,
                      nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        else
            nb__error("nb_nn_batch_norm2d %s: expected input [N, %lld, H, W], got %s", nb__layer_name(self), f,
                      nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        return NULL;
    }
    nb_tensor *y = nb_batch_norm(x, bn->running_mean, bn->running_var, bn->weight, bn->bias, self->training, 0.1, 1e-5);
    if (y && self->training) {
        nb_scope *s = nb_scope_begin();
        assign_no_grad(bn->num_batches_tracked, nb_add_scalar(bn->num_batches_tracked, 1));
        nb_scope_end(s);
    }
    return y;
}

static const nb_module_class BATCH_NORM1D = { .name = "BatchNorm1d", .forward = batch_norm_forward };
static const nb_module_class BATCH_NORM2D = { .name = "BatchNorm2d", .forward = batch_norm_forward };

static nb_module *make_batch_norm(const nb_module_class *cls, const char *fn, int64_t features, int dims) {
    if (features <= 0) {
        nb__error("%s: features must be positive, got %lld", fn, (long long)features);
        return NULL;
    }
    batch_norm *bn = (batch_norm *)nb_module_new(cls, sizeof(batch_norm));
    if (!bn) return NULL;
    bn->features = features;
    bn->dims = dims;
    nb_module *m = &bn->base;
    bn->weight = nb_module_param(m, "weight", nb_ones(NB_SHAPE(features), NB_F32));
    bn->bias = nb_module_param(m, "bias", nb_zeros(NB_SHAPE(features), NB_F32));
    bn->running_mean = nb_module_buffer(m, "running_mean", nb_zeros(NB_SHAPE(features), NB_F32));
    bn->running_var = nb_module_buffer(m, "running_var", nb_ones(NB_SHAPE(features), NB_F32));
    bn->num_batches_tracked = nb_module_buffer(m, "num_batches_tracked", nb_zeros(NB_SHAPE(), NB_I64));
    if (!bn->weight || !bn->bias || !bn->running_mean || !bn->running_var || !bn->num_batches_tracked) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

nb_module *nb_nn_batch_norm1d(int64_t features) {
    return make_batch_norm(&BATCH_NORM1D, "nb_nn_batch_norm1d", features, 1);
}

nb_module *nb_nn_batch_norm2d(int64_t features) {
    return make_batch_norm(&BATCH_NORM2D, "nb_nn_batch_norm2d", features, 2);
}
