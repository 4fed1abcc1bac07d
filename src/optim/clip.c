/* Gradient clipping: by the global L2 norm (with tensor ops only, so a compiled step can clip)
   and by value, as torch.nn.utils.clip_grad_norm_ and clip_grad_value_. */
#include "../nn/nn_impl.h"
#include "nabla/optim.h"
#include <math.h>

typedef struct {
    nb_tensor *sumsq; /* f64 0-d, in the current scope */
    bool failed;
} norm_acc;

static void add_sq(nb_tensor *p, void *ctx) {
    norm_acc *a = ctx;
    nb_tensor *g = nb_grad_of(p);
    if (!g || a->failed) return;
    nb_tensor *gd = nb_cast(g, NB_F64);
    nb_tensor *sq = nb_sum_all(nb_mul(gd, gd));
    a->sumsq = a->sumsq ? nb_add(a->sumsq, sq) : sq;
    if (!a->sumsq) a->failed = true;
}

/* The global L2 norm of m's gradients as an f64 0-d tensor in the current scope (squares summed
   in double, parameter by parameter in order), with tensor ops only; NULL on error. */
static nb_tensor *grad_norm_tensor(nb_module *m) {
    norm_acc a = { NULL, false };
    nb__module_each_param(m, add_sq, &a);
    if (a.failed) return NULL;
    return a.sumsq ? nb_sqrt(a.sumsq) : nb_zeros(NB_SHAPE(), NB_F64);
}

double nb_grad_norm(nb_module *m) {
    if (!m) {
        nb__error("nb_grad_norm: module is NULL");
        return -1;
    }
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = grad_norm_tensor(m);
    double v = t ? nb_item(t) : -1;
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return v;
}

/* Replaces every gradient with a new tensor made from it (gradients may be shared, so never
   in place): scaled by a 0-d coefficient, or clamped. */
typedef struct {
    nb_tensor *(*make)(nb_tensor *g, const void *arg);
    const void *arg;
    bool failed;
} grad_rewrite;

static void rewrite_grad(nb_tensor *p, void *ctx) {
    grad_rewrite *r = ctx;
    nb_tensor *g = nb_grad_of(p);
    if (!g || r->failed) return;
    nb_tensor *made = r->make(g, r->arg);
    if (made) nb_set_grad(p, made);
    else r->failed = true;
}

static nb_tensor *scaled(nb_tensor *g, const void *coef) { return nb_mul(g, (nb_tensor *)coef); }
static nb_tensor *clamped(nb_tensor *g, const void *clip) {
    double c = *(const double *)clip;
    return nb_clamp(g, -c, c);
}

nb_tensor *nb_clip_grad_norm_tensor(nb_module *m, double max_norm) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_clip_grad_norm: module is NULL");
        return NULL;
    }
    if (!(max_norm > 0)) {
        nb__error("nb_clip_grad_norm: max_norm must be positive, got %g", max_norm);
        return NULL;
    }
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *total = grad_norm_tensor(m);
    if (total) {
        /* as torch: the coefficient clamped at 1 multiplies every gradient, so no value is read
           on the host and a compiled step can clip */
        nb_tensor *coef = nb_clamp(nb_div(nb_full(NB_SHAPE(), max_norm, NB_F64), nb_add_scalar(total, 1e-6)), -INFINITY, 1.0);
        grad_rewrite r = { scaled, coef, false };
        if (coef) nb__module_each_param(m, rewrite_grad, &r);
        if (!coef || r.failed) total = NULL;
    }
    nb_keep(total);
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return nb__own(total);
}

double nb_clip_grad_norm(nb_module *m, double max_norm) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_clip_grad_norm_tensor(m, max_norm);
    double v = t ? nb_item(t) : -1;
    nb_scope_end(s);
    return v;
}

int nb_clip_grad_value(nb_module *m, double clip_value) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_clip_grad_value: module is NULL");
        return -1;
    }
    if (!(clip_value >= 0)) {
        nb__error("nb_clip_grad_value: clip_value must be non-negative, got %g", clip_value);
        return -1;
    }
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    grad_rewrite r = { clamped, &clip_value, false };
    nb__module_each_param(m, rewrite_grad, &r);
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return r.failed ? -1 : 0;
}
