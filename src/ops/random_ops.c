/* Random draws composed on nabla's uniform generator (Philox, src/core/rng.c): randint,
   randperm, bernoulli and multinomial. Seeded by nb_manual_seed like every draw; the streams are
   nabla's own, not torch's, so tests check ranges, moments and determinism. */
#include "ops_impl.h"
#include "nabla/ops.h"
#include <math.h>

nb_tensor *nb_randint(int64_t low, int64_t high, nb_shape shape) {
    if (high <= low) {
        nb__error("nb_randint: the range [%lld, %lld) is empty", (long long)low, (long long)high);
        return NULL;
    }
    if ((double)high - (double)low > 9007199254740992.0) {
        nb__error("nb_randint: the range [%lld, %lld) is wider than 2^53", (long long)low, (long long)high);
        return NULL;
    }
    COMPOSITE_BEGIN
    /* floor(low + u (high - low)) for u in [0, 1), held below high against rounding */
    nb_tensor *u = nb_rand(shape, NB_F64);
    nb_tensor *v = nb_floor(nb_add_scalar(nb_mul_scalar(u, (double)high - (double)low), (double)low));
    result_ = nb_cast(nb_clamp(v, (double)low, (double)high - 1), NB_I64);
    COMPOSITE_END
}

/* The order of n uniform keys: every permutation equally likely (ties have probability ~n^2 2^-54). */
nb_tensor *nb_randperm(int64_t n) {
    if (n < 0) {
        nb__error("nb_randperm: n must be non-negative, got %lld", (long long)n);
        return NULL;
    }
    COMPOSITE_BEGIN
    result_ = nb_argsort(nb_rand(NB_SHAPE(n), NB_F64), 0, false);
    COMPOSITE_END
}

/* The range of a float tensor's values, read on the host; -1 with the error on failure. */
static int value_range(const char *fn, nb_tensor *p, double *lo, double *hi, bool *finite) {
    char d[200];
    if (!p) {
        if (!nb__has_error()) nb__error("nb_%s: input is NULL", fn);
        return -1;
    }
    if (!nb__is_float(p->dtype)) {
        nb__error("nb_%s: expected float probabilities, got %s", fn, nb__describe(p, d, sizeof d));
        return -1;
    }
    *lo = 0;
    *hi = 0;
    *finite = true;
    if (p->numel == 0) return 0;
    nb_tensor *flat = nb_reshape(nb_detach(p), NB_SHAPE(-1));
    nb_tensor *mn = flat ? nb_min(flat, 0, false) : NULL, *mx = flat ? nb_max(flat, 0, false) : NULL;
    nb_tensor *fin = flat ? nb_all(nb_isfinite(flat), 0, false) : NULL;
    if (!mn || !mx || !fin) return -1;
    *lo = nb_item(mn);
    *hi = nb_item(mx);
    *finite = nb_item(fin) != 0;
    return 0;
}

nb_tensor *nb_bernoulli(nb_tensor *p) {
    COMPOSITE_BEGIN
    double lo, hi;
    bool finite;
    if (value_range("bernoulli", p, &lo, &hi, &finite) == 0) {
        if (!finite || lo < 0 || hi > 1)
            nb__error("nb_bernoulli: probabilities must be in [0, 1], got values in [%g, %g]%s", lo, hi,
                      finite ? "" : " and non-finite ones");
        else result_ = nb_cast(nb_lt(nb__rand_on(p->shape, NB_F64, p->storage->device), p), p->dtype);
    }
    COMPOSITE_END
}

/* Draws n category indices per row of probs [C] or [R, C] (weights, not necessarily summing to 1).
   With replacement: each draw is the first category whose running share exceeds a uniform u.
   Without: the n largest of log(u) / w (Efraimidis and Spirakis), which draws categories one by
   one in proportion to the weights left. */
nb_tensor *nb_multinomial(nb_tensor *probs, int64_t n, bool replacement) {
    COMPOSITE_BEGIN
    double lo, hi;
    bool finite;
    char d[200];
    if (value_range("multinomial", probs, &lo, &hi, &finite) < 0) goto done;
    int nd = probs->shape.ndim;
    if (nd != 1 && nd != 2) {
        nb__error("nb_multinomial: expected probabilities [C] or [R, C], got %s", nb__describe(probs, d, sizeof d));
        goto done;
    }
    int64_t c = probs->shape.dim[nd - 1];
    if (!finite || lo < 0 || c == 0) {
        nb__error("nb_multinomial: weights must be finite and non-negative, got %s with values in [%g, %g]",
                  nb__describe(probs, d, sizeof d), lo, hi);
        goto done;
    }
    if (n <= 0 || (!replacement && n > c)) {
        nb__error("nb_multinomial: cannot draw %lld of %lld categories%s", (long long)n, (long long)c,
                  replacement ? "" : " without replacement");
        goto done;
    }
    nb_tensor *w = nb_detach(nd == 1 ? nb_unsqueeze(probs, 0) : probs);
    nb_tensor *rowsum = nb_sum(nb_cast(w, NB_F64), 1, true);
    nb_tensor *nonzero = nb_sum(nb_gt(w, nb_zeros((nb_shape){ 0, { 0 } }, w->dtype)), 1, false);
    nb_tensor *fewest = nonzero ? nb_min(nonzero, 0, false) : NULL;
    if (!rowsum || !fewest) goto done;
    double least = nb_item(fewest);
    if (least == 0 || (!replacement && least < (double)n)) {
        nb__error("nb_multinomial: a row of %s has %s positive weight%s", nb__describe(probs, d, sizeof d),
                  least == 0 ? "no" : "too few", replacement ? "" : " to draw without replacement");
        goto done;
    }
    int64_t rows = w->shape.dim[0];
    nb_device dev = w->storage->device;
    nb_tensor *r;
    if (replacement) {
        nb_tensor *cdf = nb_unsqueeze(nb_div(nb_cumsum(nb_cast(w, NB_F64), 1), rowsum), 1); /* [R, 1, C] */
        nb_tensor *u = nb_unsqueeze(nb__rand_on(NB_SHAPE(rows, n), NB_F64, dev), 2);        /* [R, n, 1] */
        /* the count of running shares <= u; a u at or past the last share (rounding) takes the last
           positive category */
        nb_tensor *k = nb_sum(nb_le(cdf, u), 2, false);
        nb_tensor *last = nb_sub(nb_full((nb_shape){ 0, { 0 } }, (double)c - 1, NB_I64),
                                 nb_argmax(nb_cast(nb_flip(nb_gt(w, nb_zeros((nb_shape){ 0, { 0 } }, w->dtype)), (int[]){ 1 }, 1), NB_U8), 1, true));
        r = nb_minimum(k, last);
    } else {
        nb_tensor *u = nb__rand_on(NB_SHAPE(rows, c), NB_F64, dev);
        nb_tensor *keys = nb_div(nb_log(u), nb_cast(w, NB_F64)); /* -inf for zero weights */
        r = nb_slice(nb_argsort(keys, 1, true), 1, 0, n, 1);
    }
    result_ = nd == 1 ? nb_squeeze(r, 0) : r;
done:
    COMPOSITE_END
}
