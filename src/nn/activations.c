/* Activation modules beside layers.c's: LeakyReLU, ELU, PReLU (a learned slope per channel,
   parameter "weight" as torch's), Softplus, Mish, Hardswish and Hardsigmoid, each running its
   functional form of nabla/functional.h with the arguments it was made with. */
#include "nn_impl.h"
#include <stdio.h>
#include <math.h>

typedef struct {
    nb_module base;
    double a, b;       /* the functional form's scalar arguments, torch's defaults filled in */
    nb_tensor *weight; /* PReLU's */
} activation;

static nb_tensor *leaky_relu_forward(nb_module *m, nb_tensor *x) { return nb_leaky_relu(x, ((activation *)m)->a); }
static nb_tensor *elu_forward(nb_module *m, nb_tensor *x) { return nb_elu(x, ((activation *)m)->a); }
static nb_tensor *softplus_forward(nb_module *m, nb_tensor *x) {
    activation *a = (activation *)m;
    return nb_softplus(x, a->a, a->b);
}
static nb_tensor *mish_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_mish(x); }
static nb_tensor *hardswish_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_hardswish(x); }
static nb_tensor *hardsigmoid_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_hardsigmoid(x); }

static nb_tensor *prelu_forward(nb_module *m, nb_tensor *x) {
    activation *a = (activation *)m;
    int64_t n = nb_numel(a->weight);
    if (n > 1 && (nb_ndim(x) < 2 || nb_dim(x, 1) != n)) {
        char sh[160];
        nb__error("nb_nn_prelu %s: %lld parameters need input [N, %lld, ...], got %s", nb__layer_name(m), (long long)n,
                  (long long)n, nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        return NULL;
    }
    return nb_prelu(x, a->weight);
}

static int leaky_relu_repr(nb_module *m, char *buf, size_t size) {
    char v[32];
    return snprintf(buf, size, "negative_slope=%s", nb__py_float(((activation *)m)->a, v, sizeof v));
}
static int elu_repr(nb_module *m, char *buf, size_t size) {
    char v[32];
    return snprintf(buf, size, "alpha=%s", nb__py_float(((activation *)m)->a, v, sizeof v));
}
static int prelu_repr(nb_module *m, char *buf, size_t size) {
    return snprintf(buf, size, "num_parameters=%lld", (long long)nb_numel(((activation *)m)->weight));
}
/* torch's defaults are the ints 1 and 20, which it prints so */
static int softplus_repr(nb_module *m, char *buf, size_t size) {
    activation *a = (activation *)m;
    return snprintf(buf, size, "beta=%.17g, threshold=%.17g", a->a, a->b);
}
static const nb_module_class LEAKY_RELU = { .name = "LeakyReLU", .forward = leaky_relu_forward, .extra_repr = leaky_relu_repr };
static const nb_module_class ELU = { .name = "ELU", .forward = elu_forward, .extra_repr = elu_repr };
static const nb_module_class PRELU = { .name = "PReLU", .forward = prelu_forward, .extra_repr = prelu_repr };
static const nb_module_class SOFTPLUS = { .name = "Softplus", .forward = softplus_forward, .extra_repr = softplus_repr };
static const nb_module_class MISH = { .name = "Mish", .forward = mish_forward };
static const nb_module_class HARDSWISH = { .name = "Hardswish", .forward = hardswish_forward };
static const nb_module_class HARDSIGMOID = { .name = "Hardsigmoid", .forward = hardsigmoid_forward };

static nb_module *make_activation(const nb_module_class *cls, double a, double b) {
    activation *m = (activation *)nb_module_new(cls, sizeof(activation));
    if (!m) return NULL;
    m->a = a;
    m->b = b;
    return &m->base;
}

nb_module *nb_nn_leaky_relu(double negative_slope) { return make_activation(&LEAKY_RELU, negative_slope == 0 ? 0.01 : negative_slope, 0); }
nb_module *nb_nn_elu(double alpha) { return make_activation(&ELU, alpha == 0 ? 1.0 : alpha, 0); }
nb_module *nb_nn_mish(void) { return make_activation(&MISH, 0, 0); }
nb_module *nb_nn_hardswish(void) { return make_activation(&HARDSWISH, 0, 0); }
nb_module *nb_nn_hardsigmoid(void) { return make_activation(&HARDSIGMOID, 0, 0); }

nb_module *nb_nn_softplus(double beta, double threshold) {
    if (!isfinite(beta) || isnan(threshold)) {
        nb__error("nb_nn_softplus: beta must be finite and threshold a number, got beta %g, threshold %g", beta, threshold);
        return NULL;
    }
    return make_activation(&SOFTPLUS, beta == 0 ? 1.0 : beta, threshold == 0 ? 20.0 : threshold);
}

nb_module *nb_nn_prelu(int64_t num_parameters, double init) {
    if (num_parameters == 0) num_parameters = 1;
    if (num_parameters < 0 || !isfinite(init)) {
        nb__error("nb_nn_prelu: num_parameters must be positive and init finite, got %lld and %g", (long long)num_parameters, init);
        return NULL;
    }
    activation *m = (activation *)make_activation(&PRELU, init == 0 ? 0.25 : init, 0);
    if (!m) return NULL;
    m->weight = nb_module_param(&m->base, "weight", nb_full(NB_SHAPE(num_parameters), m->a, NB_F32));
    if (!m->weight) {
        nb_module_free(&m->base);
        return NULL;
    }
    return &m->base;
}
