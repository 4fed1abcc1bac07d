/* Ops along one axis: the cumulative sum and product (primitives, with their inference and
   backward), the stable argsort (a primitive) and what is composed on them: prod, sort, topk;
   and the reductions amax/amin, std and the vector norms. */
#include "ops_impl.h"
#include "nabla/ops.h"
#include "nabla/autograd.h"
#include <math.h>

/* ---- the primitives' inference and backward ---- */
/* i[0]: the axis (made non-negative); i[1]: reverse (cumsum). The output is the input's shape
   and dtype. */
int nb__infer_scan(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    int a = nb__axis((int)args->i[0], in[0]->shape.ndim);
    if (a < 0) {
        char d[200];
        nb__error("nb_%s: axis %lld is out of range for %s", fn, (long long)args->i[0], nb__describe(in[0], d, sizeof d));
        return -1;
    }
    if (nin == 2 && !nb__shape_eq(&in[0]->shape, &in[1]->shape)) {
        char d0[200], d1[200];
        nb__error("nb_%s: the gradient %s does not match the input %s", fn, nb__describe(in[1], d1, sizeof d1),
                  nb__describe(in[0], d0, sizeof d0));
        return -1;
    }
    args->i[0] = a;
    out->shape = in[0]->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

/* i[0]: the axis; i[1]: descending. The output holds i64 indices. */
int nb__infer_argsort(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    if (nb__infer_scan(op, in, nin, args, out) < 0) return -1;
    out->dtype = NB_I64;
    return 0;
}

static nb_tensor *scan_call(nb_op_id op, nb_tensor *t, int axis, bool reverse) {
    return nb__call(op, &t, 1, &(nb_op_args){ .i = { axis, reverse } });
}

/* The gradient of a running sum is the running sum of the gradient the other way. */
int nb__bwd_cumsum(nb_node *node, nb_tensor *g, nb_tensor **gin) {
    gin[0] = scan_call(NB_OP_CUMSUM, g, (int)node->args.i[0], node->args.i[1] == 0);
    return 0;
}

int nb__bwd_cumprod(nb_node *node, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *in[2] = { node->inputs[0], g };
    /* cumprod_backward is a kernel, not ops: its own gradient is not written (create_graph) */
    if (nb_is_grad_enabled() && (g->requires_grad || in[0]->requires_grad)) {
        nb__error("nb_cumprod: its gradient cannot be differentiated again (double backward through cumprod and "
                  "prod is not supported)");
        return -1;
    }
    gin[0] = nb__call(NB_OP_CUMPROD_BACKWARD, in, 2, &(nb_op_args){ .i = { node->args.i[0] } });
    return 0;
}

/* Zero, of t summed over axis (kept), with a zero gradient to t: for results that do not depend on
   t's values but, as in torch, still take part in its graph. */
static nb_tensor *zero_in_graph(nb_tensor *t, int axis) {
    nb_tensor *zero = nb_zeros((nb_shape){ 0, { 0 } }, t->dtype);
    return nb_sum(nb_where(nb_zeros((nb_shape){ 0, { 0 } }, NB_BOOL), t, zero), axis, true);
}

/* ---- cumulative sums and products ---- */
/* Integers and bools accumulate in i64, as torch. */
static nb_tensor *scan_public(nb_op_id op, const char *fn, nb_tensor *t, int axis) {
    if (!nb__check_input(fn, t) || nb__axis_of(fn, t, axis) < 0) return NULL;
    if (nb__is_float(t->dtype)) return scan_call(op, t, axis, false);
    COMPOSITE_BEGIN
    result_ = scan_call(op, nb_cast(t, NB_I64), axis, false);
    COMPOSITE_END
}
nb_tensor *nb_cumsum(nb_tensor *t, int axis) { return scan_public(NB_OP_CUMSUM, "cumsum", t, axis); }
nb_tensor *nb_cumprod(nb_tensor *t, int axis) { return scan_public(NB_OP_CUMPROD, "cumprod", t, axis); }

nb_tensor *nb_prod(nb_tensor *t, int axis, bool keepdim) {
    if (!nb__check_input("prod", t)) return NULL;
    int a = nb__axis_of("prod", t, axis);
    if (a < 0) return NULL;
    COMPOSITE_BEGIN
    nb_tensor *r;
    int64_t n = t->shape.ndim ? t->shape.dim[a] : 1;
    if (n == 0) { /* the empty product */
        r = nb_add_scalar(zero_in_graph(nb__is_float(t->dtype) ? t : nb_cast(t, NB_I64), a), 1);
    } else {
        /* the last running product: its backward is cumprod's, exact where t has zeros */
        r = nb_cumprod(t, a);
        if (t->shape.ndim) r = nb_slice(r, a, n - 1, n, 1);
    }
    result_ = keepdim || t->shape.ndim == 0 ? r : nb_squeeze(r, a);
    COMPOSITE_END
}

/* ---- sorting ---- */
nb_tensor *nb_argsort(nb_tensor *t, int axis, bool descending) {
    if (!nb__check_input("argsort", t) || nb__axis_of("argsort", t, axis) < 0) return NULL;
    return nb__call(NB_OP_ARGSORT, &t, 1, &(nb_op_args){ .i = { axis, descending } });
}

/* Values gathered at the sorted indices (so the gradient goes back to where each came from),
   with the first k of them kept when k >= 0. */
static nb_tensor *sorted(const char *fn, nb_tensor *t, int axis, bool descending, int64_t k, nb_tensor **indices) {
    if (indices) *indices = NULL;
    if (!nb__check_input(fn, t)) return NULL;
    int a = nb__axis_of(fn, t, axis);
    if (a < 0) return NULL;
    int64_t n = t->shape.ndim ? t->shape.dim[a] : 1;
    if (k > n) {
        char d[200];
        nb__error("nb_%s: k %lld is larger than axis %d of %s", fn, (long long)k, axis, nb__describe(t, d, sizeof d));
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor *idx = nb_argsort(t, a, descending);
    if (k >= 0 && t->shape.ndim) idx = nb_slice(idx, a, 0, k, 1);
    result_ = t->shape.ndim ? nb_gather(t, a, idx) : nb_clone(t);
    if (result_ && indices) *indices = nb_keep(idx);
    nb_keep(result_);
    nb_scope_end(composite_scope_);
    if (indices) nb__own(*indices);
    return nb__own(result_);
}
nb_tensor *nb_sort(nb_tensor *t, int axis, bool descending, nb_tensor **indices) {
    return sorted("sort", t, axis, descending, -1, indices);
}
nb_tensor *nb_topk(nb_tensor *t, int64_t k, int axis, bool largest, nb_tensor **indices) {
    if (k < 0) {
        if (indices) *indices = NULL;
        nb__error("nb_topk: k must be non-negative, got %lld", (long long)k);
        return NULL;
    }
    return sorted("topk", t, axis, largest, k, indices);
}

/* ---- reductions ---- */
/* amax/amin: the value of max/min, the gradient shared evenly among the elements equal to it (as
   torch.amax), routed as m + sum(where(x == m, x - m', 0)) / count with m detached and m' its
   finite part: the added term is exactly 0 where m is finite, and keeps +-inf where m is. */
static nb_tensor *amax_amin(const char *fn, nb_tensor *t, int axis, bool keepdim, bool is_max) {
    if (!nb__check_input(fn, t)) return NULL;
    int a = nb__axis_of(fn, t, axis);
    if (a < 0) return NULL;
    if (!nb__is_float(t->dtype) || !t->requires_grad || !nb_is_grad_enabled())
        return is_max ? nb_max(t, a, keepdim) : nb_min(t, a, keepdim);
    COMPOSITE_BEGIN
    nb_tensor *m = nb_detach(is_max ? nb_max(t, a, true) : nb_min(t, a, true));
    nb_tensor *mask = nb_eq(t, m);
    nb_tensor *zero = nb_zeros((nb_shape){ 0, { 0 } }, t->dtype);
    nb_tensor *finite_m = nb_where(nb_isfinite(m), m, zero);
    nb_tensor *count = nb_sum(nb_cast(mask, t->dtype), a, true);
    nb_tensor *r = nb_add(m, nb_div(nb_sum(nb_where(mask, nb_sub(t, finite_m), zero), a, true), count));
    result_ = keepdim || t->shape.ndim == 0 ? r : nb_squeeze(r, a);
    COMPOSITE_END
}
nb_tensor *nb_amax(nb_tensor *t, int axis, bool keepdim) { return amax_amin("amax", t, axis, keepdim, true); }
nb_tensor *nb_amin(nb_tensor *t, int axis, bool keepdim) { return amax_amin("amin", t, axis, keepdim, false); }

nb_tensor *nb_std(nb_tensor *t, int axis, bool keepdim) {
    if (!nb__check_input("std", t)) return NULL;
    COMPOSITE_BEGIN
    result_ = nb_sqrt(nb_var(t, axis, keepdim));
    COMPOSITE_END
}

/* s^(1/p) with the gradient 0 where s == 0 (as torch's norm backward), not 0 * inf: the power
   is taken of s with its zeros replaced by 1, and those results replaced by 0. */
static nb_tensor *root_safe(nb_tensor *s, double p) {
    nb_tensor *zero = nb_zeros((nb_shape){ 0, { 0 } }, s->dtype);
    nb_tensor *is0 = nb_eq(s, zero);
    nb_tensor *safe = nb_where(is0, nb_ones((nb_shape){ 0, { 0 } }, s->dtype), s);
    return nb_where(is0, zero, p == 2 ? nb_sqrt(safe) : nb_pow_scalar(safe, 1.0 / p));
}

/* The p-norm over the axes in mask (all when mask is -1). */
static nb_tensor *norm(const char *fn, nb_tensor *t, double p, int axis, bool all, bool keepdim) {
    if (!nb__check_input(fn, t)) return NULL;
    if (isnan(p)) {
        nb__error("nb_%s: p is NaN", fn);
        return NULL;
    }
    if (!nb__is_float(t->dtype)) {
        char d[200];
        nb__error("nb_%s: expected a float tensor, got %s (torch refuses integers too)", fn, nb__describe(t, d, sizeof d));
        return NULL;
    }
    int a = 0;
    if (!all && (a = nb__axis_of(fn, t, axis)) < 0) return NULL;
    COMPOSITE_BEGIN
    nb_tensor *x = all ? nb_reshape(t, NB_SHAPE(-1)) : t;
    int ax = all ? 0 : a;
    nb_tensor *ab = nb_abs(x), *r;
    if (isinf(p)) r = p > 0 ? nb_amax(ab, ax, true) : nb_amin(ab, ax, true);
    else if (p == 0) /* the count of nonzeros; its gradient is zero */
        r = nb_add(nb_sum(nb_cast(nb_ne(x, nb_zeros((nb_shape){ 0, { 0 } }, x->dtype)), x->dtype), ax, true),
                   zero_in_graph(x, ax));
    else if (p == 1) r = nb_sum(ab, ax, true);
    else if (p == 2) r = root_safe(nb_sum(nb_mul(x, x), ax, true), 2);
    else r = root_safe(nb_sum(nb_pow_scalar(ab, p), ax, true), p);
    if (all) {
        nb_shape s = t->shape;
        for (int d = 0; d < s.ndim; d++) s.dim[d] = 1;
        result_ = keepdim ? nb_reshape(r, s) : nb_reshape(r, (nb_shape){ 0, { 0 } });
    } else result_ = keepdim || t->shape.ndim == 0 ? r : nb_squeeze(r, ax);
    COMPOSITE_END
}
nb_tensor *nb_norm(nb_tensor *t, double p, int axis, bool keepdim) { return norm("norm", t, p, axis, false, keepdim); }
nb_tensor *nb_norm_all(nb_tensor *t, double p) { return norm("norm_all", t, p, 0, true, false); }
