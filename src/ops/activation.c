/* Activations composed from ops, with PyTorch's values and its gradients at the kinks: leaky
   ReLU, ELU, PReLU, softplus, mish, hardswish and hardsigmoid. Each picks its pieces with
   nb_where on a comparison written as torch's kernel writes it, so the gradient at a boundary
   is the one of the piece torch's backward uses there; a piece that could overflow where it is
   not picked (exp of a large x) is computed on a safe value instead, so its zero gradient does
   not turn into 0 * inf = NaN. */
#include "ops_impl.h"
#include "nabla/functional.h"
#include <math.h>

/* A 0-d constant of x's dtype on x's device (owned by the current scope). */
static nb_tensor *scalar_like(nb_tensor *x, double v) { return nb__full_on(NB_SHAPE(), v, nb_dtype_of(x), nb_device_of(x)); }

/* The activations take floating-point input, as torch's do. */
static bool float_input(const char *fn, nb_tensor *x) {
    if (!x) {
        if (!nb__has_error()) nb__error("%s: input is NULL", fn);
        return false;
    }
    if (!nb__is_float(nb_dtype_of(x))) {
        char d[200];
        nb__error("%s: expected a floating-point tensor, got %s", fn, nb__describe(x, d, sizeof d));
        return false;
    }
    return true;
}

/* The end of each activation: keeps r out of the scope s opened for the intermediates. */
static nb_tensor *finish(nb_scope *s, nb_tensor *r) {
    nb_keep(r);
    nb_scope_end(s);
    return nb__own(r);
}

nb_tensor *nb_leaky_relu(nb_tensor *x, double slope) {
    if (!float_input("nb_leaky_relu", x)) return NULL;
    if (slope == 0) slope = 0.01;
    nb_scope *s = nb_scope_begin();
    /* torch: x > 0 ? x : x * slope, and the gradient slope at 0 */
    return finish(s, nb_where(nb_gt(x, scalar_like(x, 0)), x, nb_mul_scalar(x, slope)));
}

nb_tensor *nb_elu(nb_tensor *x, double alpha) {
    if (!float_input("nb_elu", x)) return NULL;
    if (alpha == 0) alpha = 1.0;
    nb_scope *s = nb_scope_begin();
    nb_tensor *pos = nb_gt(x, scalar_like(x, 0));
    nb_tensor *neg = nb_where(pos, scalar_like(x, 0), x); /* expm1 of x only where it is used */
    return finish(s, nb_where(pos, x, nb_mul_scalar(nb_expm1(neg), alpha)));
}

nb_tensor *nb_prelu(nb_tensor *x, nb_tensor *weight) {
    if (!float_input("nb_prelu", x)) return NULL;
    if (!weight) {
        if (!nb__has_error()) nb__error("nb_prelu: weight is NULL");
        return NULL;
    }
    int nd = nb_ndim(x);
    int64_t channels = nd >= 2 ? nb_dim(x, 1) : 1, nw = nb_numel(weight);
    if (nb_ndim(weight) > 1 || (nw != 1 && nw != channels)) {
        char dx[200], dw[200];
        nb__error("nb_prelu: weight %s must be [1] or [%lld] (the channels, axis 1) for input %s", nb__describe(weight, dw, sizeof dw),
                  (long long)channels, nb__describe(x, dx, sizeof dx));
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *w;
    if (nw == 1) w = nb_reshape(weight, NB_SHAPE());
    else { /* [C] against [N, C, d...]: [C, 1, ...] */
        nb_shape ws = { nd - 1, { 0 } };
        ws.dim[0] = channels;
        for (int i = 1; i < nd - 1; i++) ws.dim[i] = 1;
        w = nb_reshape(weight, ws);
    }
    return finish(s, nb_where(nb_gt(x, scalar_like(x, 0)), x, nb_mul(w, x)));
}

/* log(1 + e^z) for any z, without overflow: max(z, 0) + log1p(e^-|z|). Its gradient is
   sigmoid(z) everywhere, also at 0 (where nb_maximum splits its tie in halves and |z|'s
   gradient is zero). */
static nb_tensor *softplus_stable(nb_tensor *z) {
    return nb_add(nb_maximum(z, scalar_like(z, 0)), nb_log1p(nb_exp(nb_neg(nb_abs(z)))));
}

nb_tensor *nb_softplus(nb_tensor *x, double beta, double threshold) {
    if (!float_input("nb_softplus", x)) return NULL;
    if (beta == 0) beta = 1.0;
    if (threshold == 0) threshold = 20.0;
    if (!isfinite(beta) || isnan(threshold)) {
        nb__error("nb_softplus: beta must be finite and threshold a number, got beta %g, threshold %g", beta, threshold);
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    /* torch: x * beta > threshold ? x : log1p(exp(x * beta)) / beta */
    nb_tensor *z = nb_mul_scalar(x, beta);
    nb_tensor *linear = nb_gt(z, scalar_like(z, threshold));
    nb_tensor *zs = nb_where(linear, scalar_like(z, 0), z);
    return finish(s, nb_where(linear, x, nb_mul_scalar(nb_log1p(nb_exp(zs)), 1.0 / beta)));
}

nb_tensor *nb_mish(nb_tensor *x) {
    if (!float_input("nb_mish", x)) return NULL;
    nb_scope *s = nb_scope_begin();
    return finish(s, nb_mul(x, nb_tanh(softplus_stable(x))));
}

nb_tensor *nb_hardswish(nb_tensor *x) {
    if (!float_input("nb_hardswish", x)) return NULL;
    nb_scope *s = nb_scope_begin();
    /* torch: 0 below -3, x above 3, x (x + 3) / 6 between, both ends included: its gradient
       x / 3 + 1/2 gives -1/2 at -3 and 3/2 at 3 */
    nb_tensor *mid = nb_mul_scalar(nb_mul(x, nb_add_scalar(x, 3.0)), 1.0 / 6.0);
    nb_tensor *upper = nb_where(nb_gt(x, scalar_like(x, 3)), x, mid);
    return finish(s, nb_where(nb_lt(x, scalar_like(x, -3)), scalar_like(x, 0), upper));
}

nb_tensor *nb_hardsigmoid(nb_tensor *x) {
    if (!float_input("nb_hardsigmoid", x)) return NULL;
    nb_scope *s = nb_scope_begin();
    /* torch: (x + 3) / 6 strictly inside (-3, 3), so the gradient is 0 at both ends; NaN
       stays NaN (both comparisons are false there) */
    nb_tensor *mid = nb_mul_scalar(nb_add_scalar(x, 3.0), 1.0 / 6.0);
    nb_tensor *upper = nb_where(nb_lt(x, scalar_like(x, 3)), mid, scalar_like(x, 1));
    nb_tensor *r = nb_where(nb_gt(x, scalar_like(x, -3)), upper, scalar_like(x, 0));
    return finish(s, nb_where(nb_eq(x, x), r, x));
}
