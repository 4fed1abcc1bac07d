/* The batch norm modules nb_nn_batch_norm1d / nb_nn_batch_norm2d with torch's parameters and
   buffers (weight, bias, running_mean, running_var, num_batches_tracked), over the functional
   nb_batch_norm (src/ops/nn_layers.c); and GroupNorm and InstanceNorm1d/2d over nb_group_norm. */
#include "nn_impl.h"
#include <stdio.h>

/* Writes value into t with recording off. */
static int assign_no_grad(nb_tensor *t, nb_tensor *value) {
    bool prev = nb_set_grad_enabled(false);
    int rc = nb_assign(t, value);
    nb_set_grad_enabled(prev);
    return rc;
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

static int batch_norm_repr(nb_module *self, char *buf, size_t size) {
    return snprintf(buf, size, "%lld, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True",
                    (long long)((batch_norm *)self)->features);
}
static const nb_module_class BATCH_NORM1D = { .name = "BatchNorm1d", .forward = batch_norm_forward, .extra_repr = batch_norm_repr };
static const nb_module_class BATCH_NORM2D = { .name = "BatchNorm2d", .forward = batch_norm_forward, .extra_repr = batch_norm_repr };

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

/* ---------- group and instance norm ---------- */
typedef struct {
    nb_module base;
    int64_t groups, channels;
    int dims; /* instance norm: 1 or 2; group norm: 0 */
    nb_tensor *weight, *bias;
} group_norm;

static nb_tensor *group_norm_forward(nb_module *self, nb_tensor *x) {
    group_norm *g = (group_norm *)self;
    int nd = nb_ndim(x);
    bool unbatched = g->dims && nd == g->dims + 1;
    bool ok = nd >= 2 && nb_dim(x, unbatched ? 0 : 1) == g->channels;
    if (g->dims) ok = ok && (nd == g->dims + 2 || unbatched);
    if (!ok) {
        char sh[160];
        long long c = (long long)g->channels;
        if (g->dims)
            nb__error("nb_nn_instance_norm%dd %s: expected input [N, %lld%s] or [%lld%s], got %s", g->dims, nb__layer_name(self), c,
                      g->dims == 1 ? ", L" : ", H, W", c, g->dims == 1 ? ", L" : ", H, W", nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        else
            nb__error("nb_nn_group_norm %s: expected input [N, %lld, ...], got %s", nb__layer_name(self), c,
                      nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        return NULL;
    }
    if (unbatched) { /* [C, L...], as torch */
        nb_scope *s = nb_scope_begin();
        nb_tensor *y = nb_keep(nb_squeeze(nb_group_norm(nb_unsqueeze(x, 0), g->groups, g->weight, g->bias, 1e-5), 0));
        nb_scope_end(s);
        return nb__own(y);
    }
    return nb_group_norm(x, g->groups, g->weight, g->bias, 1e-5);
}

static int group_norm_repr(nb_module *self, char *buf, size_t size) {
    group_norm *g = (group_norm *)self;
    return snprintf(buf, size, "%lld, %lld, eps=1e-05, affine=%s", (long long)g->groups, (long long)g->channels,
                    g->weight ? "True" : "False");
}
static int instance_norm_repr(nb_module *self, char *buf, size_t size) {
    group_norm *g = (group_norm *)self;
    return snprintf(buf, size, "%lld, eps=1e-05, momentum=0.1, affine=%s, track_running_stats=False", (long long)g->channels,
                    g->weight ? "True" : "False");
}
static const nb_module_class GROUP_NORM = { .name = "GroupNorm", .forward = group_norm_forward, .extra_repr = group_norm_repr };
static const nb_module_class INSTANCE_NORM1D = { .name = "InstanceNorm1d", .forward = group_norm_forward, .extra_repr = instance_norm_repr };
static const nb_module_class INSTANCE_NORM2D = { .name = "InstanceNorm2d", .forward = group_norm_forward, .extra_repr = instance_norm_repr };

static nb_module *make_group_norm(const nb_module_class *cls, int64_t groups, int64_t channels, int dims, bool affine) {
    group_norm *g = (group_norm *)nb_module_new(cls, sizeof(group_norm));
    if (!g) return NULL;
    g->groups = groups;
    g->channels = channels;
    g->dims = dims;
    nb_module *m = &g->base;
    if (affine) {
        g->weight = nb_module_param(m, "weight", nb_ones(NB_SHAPE(channels), NB_F32));
        g->bias = nb_module_param(m, "bias", nb_zeros(NB_SHAPE(channels), NB_F32));
        if (!g->weight || !g->bias) {
            nb_module_free(m);
            return NULL;
        }
    }
    return m;
}

nb_module *nb_nn_group_norm(int64_t groups, int64_t channels) {
    if (groups <= 0 || channels <= 0 || channels % groups != 0) {
        nb__error("nb_nn_group_norm: %lld channels cannot be split into %lld groups", (long long)channels, (long long)groups);
        return NULL;
    }
    return make_group_norm(&GROUP_NORM, groups, channels, 0, true);
}

static nb_module *instance_norm(const nb_module_class *cls, const char *fn, int64_t features, bool affine, int dims) {
    if (features <= 0) {
        nb__error("%s: features must be positive, got %lld", fn, (long long)features);
        return NULL;
    }
    return make_group_norm(cls, features, features, dims, affine);
}
nb_module *nb_nn_instance_norm1d(int64_t features, bool affine) {
    return instance_norm(&INSTANCE_NORM1D, "nb_nn_instance_norm1d", features, affine, 1);
}
nb_module *nb_nn_instance_norm2d(int64_t features, bool affine) {
    return instance_norm(&INSTANCE_NORM2D, "nb_nn_instance_norm2d", features, affine, 2);
}
