/* Losses as PyTorch defines them: cross entropy (class weights, ignore_index, label
   smoothing), NLL, MSE, L1, smooth L1, Huber, BCE with logits and on probabilities, KL
   divergence, margin ranking, triplet margin and cosine embedding, composed from ops. */
#include "ops_impl.h"
#include "nabla/functional.h"
#include <math.h>

/* A 0-d constant of t's dtype on t's device (owned by the current scope). */
static nb_tensor *scalar_like(nb_tensor *t, double v) { return nb__full_on(NB_SHAPE(), v, nb_dtype_of(t), nb_device_of(t)); }

static nb_tensor *reduce(nb_tensor *loss, nb_reduction r) {
    switch (r) {
    case NB_REDUCTION_SUM: return nb_sum_all(loss);
    case NB_REDUCTION_NONE: return loss;
    case NB_REDUCTION_BATCHMEAN: /* torch's kl_div: the sum over the first axis's size (a 0-d loss: the sum) */
        return nb_ndim(loss) == 0 ? nb_sum_all(loss) : nb_div(nb_sum_all(loss), scalar_like(loss, (double)nb_dim(loss, 0)));
    default: return nb_mean_all(loss);
    }
}

static bool valid_reduction(const char *fn, nb_reduction r) {
    if (!nb__reduction_ok(fn, r)) return false;
    if (r == NB_REDUCTION_BATCHMEAN) {
        nb__error("%s: reduction batchmean applies to nb_kl_div_loss only (use mean, sum or none)", fn);
        return false;
    }
    return true;
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

/* Checks that the n tensors t (called names[i] in messages) are there and have one shape, as
   torch warns they should, and the reduction. */
static bool same_shapes(const char *fn, nb_tensor *const *t, const char *const *names, int n, nb_reduction r) {
    for (int i = 0; i < n; i++)
        if (!t[i]) {
            if (!nb__has_error()) nb__error("%s: %s is NULL", fn, names[i]);
            return false;
        }
    if (!valid_reduction(fn, r)) return false;
    nb_shape a = nb_shape_of(t[0]);
    for (int i = 1; i < n; i++) {
        nb_shape b = nb_shape_of(t[i]);
        if (!nb__shape_eq(&a, &b)) {
            char d0[200], di[200];
            nb__error("%s: %s %s and %s %s differ in shape", fn, names[0], nb__describe(t[0], d0, sizeof d0), names[i],
                      nb__describe(t[i], di, sizeof di));
            return false;
        }
    }
    return true;
}

static bool same_shape(const char *fn, nb_tensor *x, nb_tensor *y, nb_reduction r) {
    return same_shapes(fn, (nb_tensor *[]){ x, y }, (const char *[]){ "input", "target" }, 2, r);
}

/* Checks that the n tensors (not NULL) hold floating-point values. */
static bool float_inputs(const char *fn, nb_tensor *const *t, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!nb__is_float(nb_dtype_of(t[i]))) {
            char d[200];
            nb__error("%s: %s must be floating-point, got %s", fn, names[i], nb__describe(t[i], d, sizeof d));
            return false;
        }
    return true;
}

/* A threshold argument (smooth L1's beta, Huber's delta): 0 means torch's 1.0, a negative or
   NaN one is an error. */
static bool threshold_arg(const char *fn, const char *name, double *v) {
    if (*v == 0) *v = 1.0;
    if (!(*v > 0)) {
        nb__error("%s: %s must be positive, got %g", fn, name, *v);
        return false;
    }
    return true;
}

/* where(|d| < t, q d^2, l (|d| - t / 2)), d = x - y: smooth L1 (q = 1 / 2t, l = 1) and Huber
   (q = 1/2, l = t), in torch's order of operations. */
static nb_tensor *huber_terms(nb_tensor *x, nb_tensor *y, double t, double q, double l) {
    nb_tensor *a = nb_abs(nb_sub(x, y)), *lin = nb_add_scalar(a, -0.5 * t);
    return nb_where(nb_lt(a, scalar_like(a, t)), nb_mul_scalar(nb_mul(a, a), q), l == 1 ? lin : nb_mul_scalar(lin, l));
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
    if (!same_shape("nb_smooth_l1_loss", x, y, reduction) || !threshold_arg("nb_smooth_l1_loss", "beta", &beta)) return NULL;
    LOSS_BODY(huber_terms(x, y, beta, 0.5 / beta, 1.0))
}

nb_tensor *nb_huber_loss(nb_tensor *x, nb_tensor *y, nb_reduction reduction, double delta) {
    if (!same_shape("nb_huber_loss", x, y, reduction) ||
        !float_inputs("nb_huber_loss", (nb_tensor *[]){ x, y }, (const char *[]){ "input", "target" }, 2) ||
        !threshold_arg("nb_huber_loss", "delta", &delta))
        return NULL;
    LOSS_BODY(huber_terms(x, y, delta, 0.5, delta))
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

/* ---------- BCE on probabilities, KL divergence ---------- */

/* Whether every element of p lies in [0, 1] (NaN does not), as torch's binary_cross_entropy
   requires; a check read on the host, which a tracer need not record. */
static bool probabilities(const char *fn, nb_tensor *p) {
    if (nb_numel(p) == 0) return true;
    bool traced = nb__trace_suspend(true), prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    double inside = nb_item(nb_sum_all(nb_eq(nb_clamp(p, 0, 1), p))); /* false outside and at NaN */
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    nb__trace_suspend(traced);
    if (inside == (double)nb_numel(p)) return true;
    char d[200];
    nb__error("%s: input %s holds %lld values outside [0, 1]: it takes probabilities (nb_bce_with_logits takes logits)", fn,
              nb__describe(p, d, sizeof d), (long long)((double)nb_numel(p) - inside));
    return false;
}

/* Whether w broadcasts to x's shape without growing it (torch expands BCE's weight to the target). */
static bool broadcasts_to(const char *fn, const char *what, nb_tensor *w, nb_tensor *x) {
    int nw = nb_ndim(w), nx = nb_ndim(x);
    bool ok = nw <= nx;
    for (int i = 1; ok && i <= nw; i++) ok = nb_dim(w, -i) == 1 || nb_dim(w, -i) == nb_dim(x, -i);
    if (!ok) {
        char dw[200], dx[200];
        nb__error("%s: %s %s does not broadcast to input %s", fn, what, nb__describe(w, dw, sizeof dw), nb__describe(x, dx, sizeof dx));
    }
    return ok;
}

nb_tensor *nb_bce_loss(nb_tensor *p, nb_tensor *y, nb_reduction reduction, nb_tensor *weight) {
    const char *fn = "nb_bce_loss";
    if (!same_shape(fn, p, y, reduction) || !float_inputs(fn, (nb_tensor *[]){ p, y }, (const char *[]){ "input", "target" }, 2) ||
        (weight && !broadcasts_to(fn, "weight", weight, p)) || !probabilities(fn, p))
        return NULL;
    nb_scope *s = nb_scope_begin();
    /* torch: (y - 1) max(log(1 - p), -100) - y max(log p, -100). Where a clamp holds (p = 0 for
       log p, p = 1 for log(1 - p)) the log is taken of a harmless value instead, so its zero
       gradient there is not 0 * inf = NaN. */
    nb_tensor *floor = scalar_like(p, -100);
    nb_tensor *p_ok = nb_gt(p, scalar_like(p, exp(-100.0))), *q_ok = nb_lt(p, scalar_like(p, 1));
    nb_tensor *log_p = nb_where(p_ok, nb_log(nb_where(p_ok, p, scalar_like(p, 1))), floor);
    nb_tensor *log_q = nb_where(q_ok, nb_log1p(nb_neg(nb_where(q_ok, p, scalar_like(p, 0)))), floor);
    nb_tensor *terms = nb_sub(nb_mul(nb_add_scalar(y, -1.0), log_q), nb_mul(y, log_p));
    if (weight) terms = nb_mul(terms, weight);
    nb_tensor *r = nb_keep(reduce(terms, reduction));
    nb_scope_end(s);
    return nb__own(r);
}

nb_tensor *nb_kl_div_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction, bool log_target) {
    const char *fn = "nb_kl_div_loss";
    /* batchmean is this loss's own; the shared check knows the other three */
    nb_reduction common = reduction == NB_REDUCTION_BATCHMEAN ? NB_REDUCTION_SUM : reduction;
    if (!same_shape(fn, input, target, common) ||
        !float_inputs(fn, (nb_tensor *[]){ input, target }, (const char *[]){ "input", "target" }, 2))
        return NULL;
    nb_scope *s = nb_scope_begin();
    nb_tensor *terms;
    if (log_target) terms = nb_mul(nb_exp(target), nb_sub(target, input)); /* torch: exp(t) (t - input) */
    else {
        /* torch: xlogy(t, t) - t input, with 0 log 0 = 0 (log taken of 1 there: no 0 * -inf) */
        nb_tensor *zero = nb_eq(target, scalar_like(target, 0));
        nb_tensor *safe = nb_where(zero, scalar_like(target, 1), target);
        nb_tensor *xlogx = nb_where(zero, scalar_like(target, 0), nb_mul(target, nb_log(safe)));
        terms = nb_sub(xlogx, nb_mul(target, input));
    }
    nb_tensor *r = nb_keep(reduce(terms, reduction));
    nb_scope_end(s);
    return nb__own(r);
}

/* ---------- margin and embedding losses ---------- */

/* max(v, 0) with torch's clamp_min gradient: it passes at v = 0 (relu's stops there). */
static nb_tensor *clamp_min0(nb_tensor *v) { return nb_clamp(v, 0, INFINITY); }

nb_tensor *nb_margin_ranking_loss(nb_tensor *x1, nb_tensor *x2, nb_tensor *y, double margin, nb_reduction reduction) {
    const char *fn = "nb_margin_ranking_loss";
    static const char *const names[] = { "input1", "input2", "target" };
    nb_tensor *t[] = { x1, x2, y };
    if (!same_shapes(fn, t, names, 3, reduction) || !float_inputs(fn, t, names, 2)) return NULL;
    /* torch: max(0, -y (x1 - x2) + margin) */
    LOSS_BODY(clamp_min0(nb_add_scalar(nb_mul(nb_neg(nb_cast(y, nb_dtype_of(x1))), nb_sub(x1, x2)), margin)))
}

/* torch's pairwise_distance: the p-norm of a - b + eps over the last axis. */
static nb_tensor *pairwise_distance(nb_tensor *a, nb_tensor *b, double p, double eps) {
    nb_tensor *d = nb_add_scalar(nb_sub(a, b), eps);
    if (p == 2) return nb_sqrt(nb_sum(nb_mul(d, d), -1, false));
    if (p == 1) return nb_sum(nb_abs(d), -1, false);
    if (isinf(p)) return nb_max(nb_abs(d), -1, false);
    return nb_pow_scalar(nb_sum(nb_pow_scalar(nb_abs(d), p), -1, false), 1.0 / p);
}

nb_tensor *nb_triplet_margin_loss(nb_tensor *anchor, nb_tensor *positive, nb_tensor *negative, nb_triplet_opts o) {
    const char *fn = "nb_triplet_margin_loss";
    static const char *const names[] = { "anchor", "positive", "negative" };
    nb_tensor *t[] = { anchor, positive, negative };
    if (!same_shapes(fn, t, names, 3, o.reduction) || !float_inputs(fn, t, names, 3)) return NULL;
    if (nb_ndim(anchor) < 1) {
        nb__error("%s: expected inputs [N, D] or [D], got 0-d tensors", fn);
        return NULL;
    }
    double margin = o.margin == 0 ? 1.0 : o.margin, p = o.p == 0 ? 2.0 : o.p, eps = o.eps == 0 ? 1e-6 : o.eps;
    if (!(p > 0) || isnan(margin) || isnan(eps)) {
        nb__error("%s: p must be positive (or INFINITY) and margin and eps numbers, got p %g, margin %g, eps %g", fn, p, margin, eps);
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *d_pos = pairwise_distance(anchor, positive, p, eps), *d_neg = pairwise_distance(anchor, negative, p, eps);
    if (o.swap) d_neg = nb_minimum(d_neg, pairwise_distance(positive, negative, p, eps));
    nb_tensor *r = nb_keep(reduce(clamp_min0(nb_sub(nb_add_scalar(d_pos, margin), d_neg)), o.reduction));
    nb_scope_end(s);
    return nb__own(r);
}

nb_tensor *nb_cosine_embedding_loss(nb_tensor *x1, nb_tensor *x2, nb_tensor *y, double margin, nb_reduction reduction) {
    const char *fn = "nb_cosine_embedding_loss";
    static const char *const names[] = { "input1", "input2" };
    if (!same_shapes(fn, (nb_tensor *[]){ x1, x2 }, names, 2, reduction) || !float_inputs(fn, (nb_tensor *[]){ x1, x2 }, names, 2))
        return NULL;
    if (!y) {
        if (!nb__has_error()) nb__error("%s: target is NULL", fn);
        return NULL;
    }
    /* torch: a target [N] with inputs [N, D], or a 0-d target with inputs [D] */
    int axis = nb_ndim(y);
    if (axis > 1 || nb_ndim(x1) != axis + 1 || (axis == 1 && nb_dim(y, 0) != nb_dim(x1, 0))) {
        char dy[200], dx[200];
        nb__error("%s: expected target [N] with inputs [N, D] or a 0-d target with inputs [D], got target %s and inputs %s", fn,
                  nb__describe(y, dy, sizeof dy), nb__describe(x1, dx, sizeof dx));
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    /* torch: cos = sum(x1 x2) / sqrt((sum(x1^2) + 1e-12) (sum(x2^2) + 1e-12)); 1 - cos where
       y = 1, max(0, cos - margin) where y = -1, 0 elsewhere */
    nb_tensor *prod = nb_sum(nb_mul(x1, x2), axis, false);
    nb_tensor *m1 = nb_add_scalar(nb_sum(nb_mul(x1, x1), axis, false), 1e-12);
    nb_tensor *m2 = nb_add_scalar(nb_sum(nb_mul(x2, x2), axis, false), 1e-12);
    nb_tensor *cos = nb_div(prod, nb_sqrt(nb_mul(m1, m2))), *zero = scalar_like(cos, 0);
    nb_tensor *pos = nb_where(nb_eq(y, nb__full_on(NB_SHAPE(), 1, nb_dtype_of(y), nb_device_of(y))), nb_add_scalar(nb_neg(cos), 1), zero);
    nb_tensor *neg = nb_where(nb_eq(y, nb__full_on(NB_SHAPE(), -1, nb_dtype_of(y), nb_device_of(y))),
                              clamp_min0(nb_add_scalar(cos, -margin)), zero);
    nb_tensor *r = nb_keep(reduce(nb_add(pos, neg), reduction));
    nb_scope_end(s);
    return nb__own(r);
}
