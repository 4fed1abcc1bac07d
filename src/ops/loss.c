/* Losses as PyTorch defines them: cross entropy (class weights, ignore_index, label
   smoothing), NLL, MSE, L1, smooth L1 and BCE with logits, composed from ops. */
#include "ops_impl.h"
#include "nabla/functional.h"
#include <math.h>

static nb_tensor *reduce(nb_tensor *loss, nb_reduction r) {
    switch (r) {
    case NB_REDUCTION_SUM: return nb_sum_all(loss);
    case NB_REDUCTION_NONE: return loss;
    default: return nb_mean_all(loss);
    }
}

static bool valid_reduction(const char *fn, nb_reduction r) {
    if (r == NB_REDUCTION_MEAN || r == NB_REDUCTION_SUM || r == NB_REDUCTION_NONE) return true;
    nb__error("%s: invalid reduction %d", fn, (int)r);
    return false;
}

/* Brings [N, C, d1, ...] to [M, C] and [N, d1, ...] to [M]; checks shapes and classes. */
static int flatten_classes(const char *fn, nb_tensor *x, nb_tensor *target, nb_tensor **x2, nb_tensor **t2,
                           nb_shape *per_sample) {
    char dx[200], dt[200];
    int nd = nb_ndim(x);
    nb_dtype tdt = nb_dtype_of(target);
    if (nd < 2) {
        nb__error("%s: expected input [N, C] or [N, C, ...], got %s", fn, nb__describe(x, dx, sizeof dx));
        return -1;
    }
    if (tdt != NB_I64 && tdt != NB_I32) {
        nb__error("%s: expected class indices (i64), got %s", fn, nb__describe(target, dt, sizeof dt));
        return -1;
    }
    nb_shape want = { 0, { 0 } };
    for (int i = 0; i < nd; i++)
        if (i != 1) want.dim[want.ndim++] = nb_dim(x, i);
    nb_shape ts = nb_shape_of(target);
    bool ok = ts.ndim == want.ndim;
    for (int i = 0; ok && i < ts.ndim; i++) ok = ts.dim[i] == want.dim[i];
    if (!ok) {
        char sh[160];
        nb__error("%s: input %s needs target %s, got %s", fn, nb__describe(x, dx, sizeof dx), nb_shape_str(want, sh, sizeof sh),
                  nb__describe(target, dt, sizeof dt));
        return -1;
    }
    int64_t classes = nb_dim(x, 1);
    if (nd > 2) { /* move the class axis last, then merge the rest */
        int perm[NB_MAX_DIMS], k = 0;
        perm[k++] = 0;
        for (int i = 2; i < nd; i++) perm[k++] = i;
        perm[k++] = 1;
        x = nb_reshape(nb_permute(x, perm), NB_SHAPE(-1, classes));
    }
    *x2 = x;
    *t2 = nb_reshape(nb_cast(target, NB_I64), NB_SHAPE(-1));
    *per_sample = want;
    return *x2 && *t2 ? 0 : -1;
}

/* The loss of log-probabilities logp [M, C] at targets t [M], before reduction, and the
   per-sample weights (0 where ignored) that a mean divides by. */
static nb_tensor *nll_terms(const char *fn, nb_tensor *logp, nb_tensor *t, const nb_ce_opts *o, nb_tensor **weights,
                            nb_tensor **keep) {
    int64_t classes = nb_dim(logp, 1);
    nb_tensor *tt = t;
    *keep = NULL;
    if (o->use_ignore_index) {
        *keep = nb_lt(nb_abs(nb_sub(t, nb_full(NB_SHAPE(), (double)o->ignore_index, NB_I64))), nb_full(NB_SHAPE(), 1, NB_I64));
        *keep = nb_eq(*keep, nb_full(NB_SHAPE(), 0, NB_BOOL)); /* not equal to ignore_index */
        tt = nb_where(*keep, t, nb_zeros(NB_SHAPE(), NB_I64));  /* a valid index where ignored */
    }
    if (nb_numel(tt) > 0) {
        /* a check, not part of the computation: a tracer need not record it (gather checks again) */
        bool traced = nb__trace_suspend(true);
        double lo = nb_item(nb_min(tt, 0, false)), hi = nb_item(nb_max(tt, 0, false));
        nb__trace_suspend(traced);
        if (lo < 0 || hi >= (double)classes) {
            nb__error("%s: target %lld is out of range for %lld classes", fn, (long long)(lo < 0 ? lo : hi), (long long)classes);
            return NULL;
        }
    }
    nb_tensor *picked = nb_squeeze(nb_gather(logp, 1, nb_unsqueeze(tt, 1)), 1);
    nb_dtype dt = nb_dtype_of(logp);
    nb_tensor *w = o->weight ? nb_cast(nb_index_select(o->weight, 0, tt), dt) : nb__full_on(nb_shape_of(tt), 1, dt, nb_device_of(tt));
    if (*keep) w = nb_mul(w, nb_cast(*keep, dt));
    *weights = w;
    return nb_neg(nb_mul(picked, w));
}

static nb_tensor *nll_reduce(nb_tensor *terms, nb_tensor *weights, nb_reduction r, nb_shape per_sample) {
    if (r == NB_REDUCTION_NONE) return nb_reshape(terms, per_sample);
    if (r == NB_REDUCTION_SUM) return nb_sum_all(terms);
    return nb_div(nb_sum_all(terms), nb_sum_all(weights));
}

static bool check_opts(const char *fn, const nb_ce_opts *o, int64_t classes) {
    if (!valid_reduction(fn, o->reduction)) return false;
    if (!(o->label_smoothing >= 0 && o->label_smoothing <= 1)) {
        nb__error("%s: label_smoothing must be in [0, 1], got %g", fn, o->label_smoothing);
        return false;
    }
    if (o->weight && (nb_ndim(o->weight) != 1 || nb_dim(o->weight, 0) != classes)) {
        char d[200];
        nb__error("%s: weight must be [%lld], got %s", fn, (long long)classes, nb__describe(o->weight, d, sizeof d));
        return false;
    }
    return true;
}

static nb_tensor *nll_or_ce(const char *fn, nb_tensor *x, nb_tensor *target, nb_ce_opts o, bool from_logits) {
    if (!x || !target) {
        if (!nb__has_error()) nb__error("%s: %s is NULL", fn, x ? "target" : "input");
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *result = NULL, *x2, *t2, *weights, *keep;
    nb_shape per_sample;
    if (flatten_classes(fn, x, target, &x2, &t2, &per_sample) < 0) goto out;
    int64_t classes = nb_dim(x2, 1);
    if (!check_opts(fn, &o, classes)) goto out;
    nb_tensor *logp = from_logits ? nb_log_softmax(x2, 1) : x2;
    nb_tensor *terms = nll_terms(fn, logp, t2, &o, &weights, &keep);
    if (!terms) goto out;
    result = nll_reduce(terms, weights, o.reduction, per_sample);
    if (from_logits && o.label_smoothing > 0) {
        /* torch: (1 - e) * nll + e / C * smooth, smooth = -sum_c w_c logp_c, normalised like nll */
        nb_dtype dt = nb_dtype_of(logp);
        nb_tensor *wl = o.weight ? nb_mul(logp, nb_cast(o.weight, dt)) : logp;
        nb_tensor *smooth = nb_neg(nb_sum(wl, 1, false));
        if (keep) smooth = nb_mul(smooth, nb_cast(keep, dt));
        nb_tensor *sm;
        if (o.reduction == NB_REDUCTION_NONE) sm = nb_reshape(smooth, per_sample);
        else if (o.reduction == NB_REDUCTION_SUM) sm = nb_sum_all(smooth);
        else sm = nb_div(nb_sum_all(smooth), nb_sum_all(weights));
        result = nb_add(nb_mul_scalar(result, 1.0 - o.label_smoothing), nb_mul_scalar(sm, o.label_smoothing / (double)classes));
    }
out:
    nb_keep(result);
    nb_scope_end(s);
    return nb__own(result);
}

nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target, nb_ce_opts opts) {
    return nll_or_ce("nb_cross_entropy", logits, target, opts, true);
}

nb_tensor *nb_nll_loss(nb_tensor *log_probs, nb_tensor *target, nb_ce_opts opts) {
    if (opts.label_smoothing != 0) {
        nb__error("nb_nll_loss: label smoothing applies to nb_cross_entropy only");
        return NULL;
    }
    return nll_or_ce("nb_nll_loss", log_probs, target, opts, false);
}

/* Checks that input and target have one shape, as torch warns it should. */
static bool same_shape(const char *fn, nb_tensor *x, nb_tensor *y, nb_reduction r) {
    if (!x || !y) {
        if (!nb__has_error()) nb__error("%s: %s is NULL", fn, x ? "target" : "input");
        return false;
    }
    if (!valid_reduction(fn, r)) return false;
    nb_shape a = nb_shape_of(x), b = nb_shape_of(y);
    if (!nb__shape_eq(&a, &b)) {
        char dx[200], dy[200];
        nb__error("%s: input %s and target %s differ in shape", fn, nb__describe(x, dx, sizeof dx), nb__describe(y, dy, sizeof dy));
        return false;
    }
    return true;
}

#define LOSS_BODY(expr)                      \
    nb_scope *s = nb_scope_begin();          \
    nb_tensor *r = nb_keep(reduce((expr), reduction)); \
    nb_scope_end(s);                         \
    return nb__own(r);

nb_tensor *nb_mse_loss(nb_tensor *x, nb_tensor *y, nb_reduction reduction) {
    if (!same_shape("nb_mse_loss", x, y, reduction)) return NULL;
    nb_tensor *d;
    LOSS_BODY((d = nb_sub(x, y), nb_mul(d, d)))
}

nb_tensor *nb_l1_loss(nb_tensor *x, nb_tensor *y, nb_reduction reduction) {
    if (!same_shape("nb_l1_loss", x, y, reduction)) return NULL;
    LOSS_BODY(nb_abs(nb_sub(x, y)))
}

nb_tensor *nb_smooth_l1_loss(nb_tensor *x, nb_tensor *y, nb_reduction reduction, double beta) {
    if (!same_shape("nb_smooth_l1_loss", x, y, reduction)) return NULL;
    if (beta == 0) beta = 1.0;
    if (beta < 0) {
        nb__error("nb_smooth_l1_loss: beta must be positive, got %g", beta);
        return NULL;
    }
    nb_tensor *a;
    LOSS_BODY((a = nb_abs(nb_sub(x, y)),
               nb_where(nb_lt(a, nb_full(NB_SHAPE(), beta, nb_dtype_of(a))), nb_mul_scalar(nb_mul(a, a), 0.5 / beta),
                        nb_add_scalar(a, -0.5 * beta))))
}

nb_tensor *nb_bce_with_logits(nb_tensor *x, nb_tensor *y, nb_reduction reduction, nb_tensor *pos_weight) {
    if (!same_shape("nb_bce_with_logits", x, y, reduction)) return NULL;
    /* torch's stable form: (1 - y) x + softplus(-x), softplus(-x) = max(-x, 0) + log(1 + e^-|x|)
       (so NaN where it takes 0 * inf, as torch). The max is nb_maximum, whose tie at x = 0 splits
       the gradient in halves: with |x|'s zero gradient there, d/dx is sigmoid(x) - y exactly,
       where relu's one-sided zero would drop the -1/2. */
    nb_tensor *softplus_neg;
    LOSS_BODY((softplus_neg = nb_add(nb_log(nb_add_scalar(nb_exp(nb_neg(nb_abs(x))), 1.0)),
                                     nb_maximum(nb_neg(x), nb_zeros(NB_SHAPE(), nb_dtype_of(x)))),
               pos_weight ? nb_add(nb_mul(nb_add_scalar(nb_neg(y), 1.0), x),
                                   nb_mul(nb_add_scalar(nb_mul(nb_add_scalar(pos_weight, -1.0), y), 1.0), softplus_neg))
                          : nb_add(nb_mul(nb_add_scalar(nb_neg(y), 1.0), x), softplus_neg)))
}
