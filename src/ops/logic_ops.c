/* Logical and masking ops composed from the primitives: logical and/or/xor/not, any/all,
   isnan/isinf/isfinite, nan_to_num, masked_fill, masked_select and one_hot. */
#include "ops_impl.h"
#include "nabla/ops.h"
#include "shape_util.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>

static nb_tensor *scalar_of(double v, nb_dtype dtype) { return nb_full((nb_shape){ 0, { 0 } }, v, dtype); }

/* t != 0 (bool t itself). */
static nb_tensor *truth(nb_tensor *t) { return t->dtype == NB_BOOL ? t : nb_ne(t, scalar_of(0, t->dtype)); }

nb_tensor *nb_logical_not(nb_tensor *t) {
    if (!nb__check_input("logical_not", t)) return NULL;
    return nb_eq(t, nb__full_on((nb_shape){ 0, { 0 } }, 0, t->dtype, t->storage->device));
}

/* op 0: and, 1: or, 2: xor, on the truth of a and b. */
static nb_tensor *logical2(const char *fn, nb_tensor *a, nb_tensor *b, int op) {
    if (!nb__check_input(fn, a) || !nb__check_input(fn, b)) return NULL;
    COMPOSITE_BEGIN
    nb_tensor *x = truth(a), *y = truth(b);
    result_ = op == 0 ? nb_mul(x, y) : op == 1 ? nb_add(x, y) : nb_ne(x, y);
    COMPOSITE_END
}
nb_tensor *nb_logical_and(nb_tensor *a, nb_tensor *b) { return logical2("logical_and", a, b, 0); }
nb_tensor *nb_logical_or(nb_tensor *a, nb_tensor *b) { return logical2("logical_or", a, b, 1); }
nb_tensor *nb_logical_xor(nb_tensor *a, nb_tensor *b) { return logical2("logical_xor", a, b, 2); }

/* any: some element is nonzero; all: none is zero (counted as a sum of bools). */
static nb_tensor *any_all(const char *fn, nb_tensor *t, int axis, bool keepdim, bool all) {
    if (!nb__check_input(fn, t)) return NULL;
    if (nb__axis(axis, t->shape.ndim) < 0) {
        char d[200];
        nb__error("nb_%s: axis %d is out of range for %s", fn, axis, nb__describe(t, d, sizeof d));
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor *zero = scalar_of(0, NB_I64);
    result_ = all ? nb_eq(nb_sum(nb_logical_not(t), axis, keepdim), zero) : nb_gt(nb_sum(truth(t), axis, keepdim), zero);
    COMPOSITE_END
}
nb_tensor *nb_any(nb_tensor *t, int axis, bool keepdim) { return any_all("any", t, axis, keepdim, false); }
nb_tensor *nb_all(nb_tensor *t, int axis, bool keepdim) { return any_all("all", t, axis, keepdim, true); }

/* ---- non-finite values (integers are always finite) ---- */
nb_tensor *nb_isnan(nb_tensor *t) {
    if (!nb__check_input("isnan", t)) return NULL;
    if (!nb__is_float(t->dtype)) return nb__full_on(t->shape, 0, NB_BOOL, t->storage->device);
    return nb_ne(t, t);
}
nb_tensor *nb_isinf(nb_tensor *t) {
    if (!nb__check_input("isinf", t)) return NULL;
    if (!nb__is_float(t->dtype)) return nb__full_on(t->shape, 0, NB_BOOL, t->storage->device);
    COMPOSITE_BEGIN
    result_ = nb_eq(nb_abs(t), scalar_of(INFINITY, t->dtype));
    COMPOSITE_END
}
/* x - x is 0 exactly for a finite x, NaN for an infinity or a NaN. */
nb_tensor *nb_isfinite(nb_tensor *t) {
    if (!nb__check_input("isfinite", t)) return NULL;
    if (!nb__is_float(t->dtype)) return nb__full_on(t->shape, 1, NB_BOOL, t->storage->device);
    COMPOSITE_BEGIN
    result_ = nb_eq(nb_sub(t, t), scalar_of(0, t->dtype));
    COMPOSITE_END
}

static double largest_finite(nb_dtype d) {
    switch (d) {
    case NB_F32: return FLT_MAX;
    case NB_F16: return 65504.0;
    case NB_BF16: return 3.38953138925153547590e38;
    default: return DBL_MAX;
    }
}

nb_tensor *nb_nan_to_num(nb_tensor *t, double nan, double posinf, double neginf) {
    if (!nb__check_input("nan_to_num", t)) return NULL;
    if (!nb__is_float(t->dtype)) return nb_clone(t);
    if (isinf(posinf)) posinf = posinf > 0 ? largest_finite(t->dtype) : -largest_finite(t->dtype);
    if (isinf(neginf)) neginf = neginf < 0 ? -largest_finite(t->dtype) : largest_finite(t->dtype);
    COMPOSITE_BEGIN
    nb_tensor *inf = scalar_of(INFINITY, t->dtype), *ninf = scalar_of(-INFINITY, t->dtype);
    nb_tensor *r = nb_where(nb_isnan(t), scalar_of(nan, t->dtype), t);
    r = nb_where(nb_eq(t, inf), scalar_of(posinf, t->dtype), r);
    result_ = nb_where(nb_eq(t, ninf), scalar_of(neginf, t->dtype), r);
    COMPOSITE_END
}

/* ---- masks ---- */
static int check_mask(const char *fn, nb_tensor *t, nb_tensor *mask, nb_shape *both) {
    char dm[200];
    if (mask->dtype != NB_BOOL) {
        nb__error("nb_%s: the mask must be bool, got %s", fn, nb__describe(mask, dm, sizeof dm));
        return -1;
    }
    return nb__broadcast_shapes(fn, &t->shape, &mask->shape, both) < 0 ? -1 : 0;
}

nb_tensor *nb_masked_fill(nb_tensor *t, nb_tensor *mask, double value) {
    if (!nb__check_input("masked_fill", t) || !nb__check_input("masked_fill", mask)) return NULL;
    nb_shape both;
    if (check_mask("masked_fill", t, mask, &both) < 0) return NULL;
    COMPOSITE_BEGIN
    result_ = nb_where(mask, nb__full_on((nb_shape){ 0, { 0 } }, value, t->dtype, t->storage->device), t);
    COMPOSITE_END
}

/* The mask is read on the host (its count sets the result's size), then the elements are picked
   by index_select, so the gradient goes back to where each came from. */
nb_tensor *nb_masked_select(nb_tensor *t, nb_tensor *mask) {
    if (!nb__check_input("masked_select", t) || !nb__check_input("masked_select", mask)) return NULL;
    nb_shape both;
    if (check_mask("masked_select", t, mask, &both) < 0) return NULL;
    COMPOSITE_BEGIN
    nb_tensor *m = nb_contiguous(nb_expand(mask, both));
    int64_t n = nb__shape_numel(&both);
    uint8_t *host = malloc((size_t)(n ? n : 1));
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!host || !idx) nb__error("nb_masked_select: out of memory for a mask of %lld elements", (long long)n);
    else if (m && nb_copy_to(m, host, (size_t)n) == 0) {
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++)
            if (host[i]) idx[k++] = i;
        nb_tensor *ix = nb_to(nb_from_data(idx, NB_SHAPE(k), NB_I64), t->storage->device);
        result_ = nb_index_select(nb_reshape(nb_expand(t, both), NB_SHAPE(-1)), 0, ix);
    }
    free(host);
    free(idx);
    COMPOSITE_END
}

nb_tensor *nb_one_hot(nb_tensor *idx, int64_t num_classes) {
    if (!nb__check_input("one_hot", idx)) return NULL;
    char d[200];
    if (idx->dtype != NB_I64 && idx->dtype != NB_I32 && idx->dtype != NB_U8 && idx->dtype != NB_I8) {
        nb__error("nb_one_hot: expected integer class indices, got %s", nb__describe(idx, d, sizeof d));
        return NULL;
    }
    COMPOSITE_BEGIN
    int64_t lo = 0, hi = -1;
    bool ok = true;
    if (idx->numel > 0) { /* the range is read on the host, as torch does to check it */
        nb_tensor *flat = nb_reshape(idx, NB_SHAPE(-1));
        nb_tensor *mn = flat ? nb_min(flat, 0, false) : NULL, *mx = flat ? nb_max(flat, 0, false) : NULL;
        ok = mn && mx;
        if (ok) {
            lo = (int64_t)nb_item(mn);
            hi = (int64_t)nb_item(mx);
        }
    }
    if (num_classes < 0) num_classes = hi + 1;
    if (ok && (lo < 0 || hi >= num_classes)) {
        nb__error("nb_one_hot: class %lld of %s is outside 0..%lld", (long long)(lo < 0 ? lo : hi),
                  nb__describe(idx, d, sizeof d), (long long)num_classes - 1);
    } else if (ok) {
        nb_tensor *classes = nb__arange_on(0, (double)num_classes, 1, NB_I64, idx->storage->device);
        result_ = nb_cast(nb_eq(nb_unsqueeze(nb_cast(idx, NB_I64), -1), classes), NB_I64);
    }
    COMPOSITE_END
}
