/* The public op functions: thin calls into the one dispatch path, and composite ops built
   from primitives (mean, var, logsumexp, matmul's 1-D cases, linear, reshape, stack, ...). */
#include "ops_impl.h"
#include "shape_util.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static nb_tensor *call1(nb_op_id op, nb_tensor *t, const nb_op_args *a) { return nb__call(op, &t, 1, a); }
static nb_tensor *call2(nb_op_id op, nb_tensor *x, nb_tensor *y) {
    nb_tensor *in[2] = { x, y };
    return nb__call(op, in, 2, NULL);
}

bool nb__check_input(const char *fn, const nb_tensor *t) {
    if (t) return true;
    if (!nb__has_error()) nb__error("nb_%s: input is NULL", fn);
    return false;
}

int nb__axis_of(const char *fn, const nb_tensor *t, int axis) {
    int a = nb__axis(axis, t->shape.ndim);
    if (a < 0) {
        char d[200];
        nb__error("nb_%s: axis %d is out of range for %s", fn, axis, nb__describe(t, d, sizeof d));
    }
    return a;
}

/* ---- creation ---- */
static const nb_device host = { NB_CPU, 0 };
static nb_tensor *create_on(nb_op_id op, const char *fn, nb_shape shape, nb_dtype dtype, double value, nb_device dev) {
    if (!nb__dtype_ok(fn, dtype)) return NULL; /* before dispatch, which sizes the result by it */
    nb_op_args a = { .shape = shape, .dtype = dtype, .f = { value, 0 }, .device = dev };
    return nb__call(op, NULL, 0, &a);
}
static nb_tensor *create(nb_op_id op, const char *fn, nb_shape shape, nb_dtype dtype, double value) {
    return create_on(op, fn, shape, dtype, value, host);
}
static nb_tensor *create_float(nb_op_id op, const char *fn, nb_shape shape, nb_dtype dtype, nb_device dev) {
    char name[32];
    snprintf(name, sizeof name, "nb_%s", fn);
    if (!nb__dtype_ok(name, dtype)) return NULL;
    if (!nb__is_float(dtype)) {
        nb__error("nb_%s: dtype must be a float type, got %s", fn, nb_dtype_name(dtype));
        return NULL;
    }
    if (dtype == NB_F16 || dtype == NB_BF16) {
        nb_tensor *f = nb__dispatch(op, NULL, 0, &(nb_op_args){ .shape = shape, .dtype = NB_F32, .device = dev });
        nb_tensor *h = nb__dispatch(NB_OP_CAST, &f, 1, &(nb_op_args){ .dtype = dtype });
        nb_release(f);
        return nb__own(h);
    }
    return create_on(op, name, shape, dtype, 0, dev);
}
nb_tensor *nb__full_on(nb_shape shape, double value, nb_dtype dtype, nb_device dev) {
    return create_on(NB_OP_FULL, "nb_full", shape, dtype, value, dev);
}
nb_tensor *nb__rand_on(nb_shape shape, nb_dtype dtype, nb_device dev) { return create_float(NB_OP_RAND, "rand", shape, dtype, dev); }
nb_tensor *nb_empty(nb_shape shape, nb_dtype dtype) { return create(NB_OP_EMPTY, "nb_empty", shape, dtype, 0); }
nb_tensor *nb_zeros(nb_shape shape, nb_dtype dtype) { return create(NB_OP_FULL, "nb_zeros", shape, dtype, 0); }
nb_tensor *nb_ones(nb_shape shape, nb_dtype dtype) { return create(NB_OP_FULL, "nb_ones", shape, dtype, 1); }
nb_tensor *nb_full(nb_shape shape, double value, nb_dtype dtype) { return create(NB_OP_FULL, "nb_full", shape, dtype, value); }
nb_tensor *nb_rand(nb_shape shape, nb_dtype dtype) { return create_float(NB_OP_RAND, "rand", shape, dtype, host); }
nb_tensor *nb_randn(nb_shape shape, nb_dtype dtype) { return create_float(NB_OP_RANDN, "randn", shape, dtype, host); }
nb_tensor *nb_scalar(double value) { return create(NB_OP_FULL, "nb_scalar", (nb_shape){ 0, { 0 } }, NB_F32, value); }
nb_tensor *nb_zeros_like(const nb_tensor *t) { return nb_full_like(t, 0); }
nb_tensor *nb_ones_like(const nb_tensor *t) { return nb_full_like(t, 1); }
nb_tensor *nb_full_like(const nb_tensor *t, double value) {
    if (!t) {
        if (!nb__has_error()) nb__error("nb_full_like: input is NULL");
        return NULL;
    }
    return nb__full_on(t->shape, value, t->dtype, t->storage->device);
}

nb_tensor *nb__arange_on(double start, double end, double step, nb_dtype dtype, nb_device dev) {
    if (!nb__dtype_ok("nb_arange", dtype)) return NULL;
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        nb__error("nb_arange: invalid range start %g, end %g, step %g", start, end, step);
        return NULL;
    }
    double n = ceil((end - start) / step);
    if (n < 0) n = 0;
    if (n > 1e12) {
        nb__error("nb_arange: range start %g, end %g, step %g is too long", start, end, step);
        return NULL;
    }
    nb_op_args a = { .shape = { 1, { (int64_t)n } }, .dtype = dtype, .f = { start, step }, .device = dev };
    return nb__call(NB_OP_ARANGE, NULL, 0, &a);
}
nb_tensor *nb_arange(double start, double end, double step, nb_dtype dtype) { return nb__arange_on(start, end, step, dtype, host); }

nb_tensor *nb_from_data(const void *data, nb_shape shape, nb_dtype dtype) {
    if (!data && nb__shape_numel(&shape) > 0) {
        nb__error("nb_from_data: data is NULL");
        return NULL;
    }
    if (!nb__dtype_ok("nb_from_data", dtype)) return NULL;
    /* made outside dispatch, as data from the host rather than the result of an op: a traced
       function (nb_compile) then captures it as a constant with its values, where an `empty`
       op recorded before the copy would replay as uninitialised memory */
    nb_tensor *t = nb__tensor_new(shape, dtype);
    if (t && t->numel) memcpy(nb__data(t), data, (size_t)t->numel * nb_dtype_size(dtype)); /* data may be NULL when empty */
    return nb__own(t);
}

/* ---- elementwise ---- */
nb_tensor *nb_add(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_ADD, a, b); }
nb_tensor *nb_sub(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_SUB, a, b); }
nb_tensor *nb_mul(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_MUL, a, b); }
nb_tensor *nb_div(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_DIV, a, b); }
nb_tensor *nb_pow(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_POW, a, b); }
nb_tensor *nb_maximum(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_MAXIMUM, a, b); }
nb_tensor *nb_minimum(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_MINIMUM, a, b); }
nb_tensor *nb_eq(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_EQ, a, b); }
nb_tensor *nb_lt(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_LT, a, b); }
nb_tensor *nb_gt(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_GT, a, b); }
nb_tensor *nb_ne(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_NE, a, b); }
nb_tensor *nb_le(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_LE, a, b); }
nb_tensor *nb_ge(nb_tensor *a, nb_tensor *b) { return call2(NB_OP_GE, a, b); }
nb_tensor *nb_where(nb_tensor *cond, nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[3] = { cond, a, b };
    return nb__call(NB_OP_WHERE, in, 3, NULL);
}
nb_tensor *nb_add_scalar(nb_tensor *t, double s) { return call1(NB_OP_ADD_SCALAR, t, &(nb_op_args){ .f = { s, 0 } }); }
nb_tensor *nb_mul_scalar(nb_tensor *t, double s) { return call1(NB_OP_MUL_SCALAR, t, &(nb_op_args){ .f = { s, 0 } }); }
nb_tensor *nb_pow_scalar(nb_tensor *t, double s) { return call1(NB_OP_POW_SCALAR, t, &(nb_op_args){ .f = { s, 0 } }); }

nb_tensor *nb_neg(nb_tensor *t) { return call1(NB_OP_NEG, t, NULL); }
nb_tensor *nb_exp(nb_tensor *t) { return call1(NB_OP_EXP, t, NULL); }
nb_tensor *nb_log(nb_tensor *t) { return call1(NB_OP_LOG, t, NULL); }
nb_tensor *nb_sqrt(nb_tensor *t) { return call1(NB_OP_SQRT, t, NULL); }
nb_tensor *nb_abs(nb_tensor *t) { return call1(NB_OP_ABS, t, NULL); }
nb_tensor *nb_sign(nb_tensor *t) { return call1(NB_OP_SIGN, t, NULL); }
nb_tensor *nb_tanh(nb_tensor *t) { return call1(NB_OP_TANH, t, NULL); }
nb_tensor *nb_sigmoid(nb_tensor *t) { return call1(NB_OP_SIGMOID, t, NULL); }
nb_tensor *nb_relu(nb_tensor *t) { return call1(NB_OP_RELU, t, NULL); }
nb_tensor *nb_gelu(nb_tensor *t) { return call1(NB_OP_GELU, t, NULL); }
nb_tensor *nb_erf(nb_tensor *t) { return call1(NB_OP_ERF, t, NULL); }
nb_tensor *nb_sin(nb_tensor *t) { return call1(NB_OP_SIN, t, NULL); }
nb_tensor *nb_cos(nb_tensor *t) { return call1(NB_OP_COS, t, NULL); }
nb_tensor *nb_log1p(nb_tensor *t) { return call1(NB_OP_LOG1P, t, NULL); }
nb_tensor *nb_expm1(nb_tensor *t) { return call1(NB_OP_EXPM1, t, NULL); }
nb_tensor *nb_reciprocal(nb_tensor *t) { return call1(NB_OP_RECIPROCAL, t, NULL); }
nb_tensor *nb_rsqrt(nb_tensor *t) { return call1(NB_OP_RSQRT, t, NULL); }
nb_tensor *nb_floor(nb_tensor *t) { return call1(NB_OP_FLOOR, t, NULL); }
nb_tensor *nb_ceil(nb_tensor *t) { return call1(NB_OP_CEIL, t, NULL); }
nb_tensor *nb_round(nb_tensor *t) { return call1(NB_OP_ROUND, t, NULL); }
nb_tensor *nb_trunc(nb_tensor *t) { return call1(NB_OP_TRUNC, t, NULL); }
nb_tensor *nb_clamp(nb_tensor *t, double lo, double hi) {
    if (lo > hi) {
        nb__error("nb_clamp: lower bound %g is above upper bound %g", lo, hi);
        return NULL;
    }
    /* a NaN bound makes every element NaN, as torch: an integer input becomes f32 to hold it */
    if ((lo != lo || hi != hi) && t && !nb__is_float(t->dtype)) {
        COMPOSITE_BEGIN
        result_ = call1(NB_OP_CLAMP, nb_cast(t, NB_F32), &(nb_op_args){ .f = { lo, hi } });
        COMPOSITE_END
    }
    return call1(NB_OP_CLAMP, t, &(nb_op_args){ .f = { lo, hi } });
}

/* ---- reductions ---- */
static nb_tensor *reduce(nb_op_id op, const char *fn, nb_tensor *t, int axis, bool keepdim) {
    if (!t) {
        nb__error("nb_%s: input is NULL", fn);
        return NULL;
    }
    int a = nb__axis(axis, t->shape.ndim);
    if (a < 0) {
        char d[200];
        nb__error("nb_%s: axis %d is out of range for %s", fn, axis, nb__describe(t, d, sizeof d));
        return NULL;
    }
    nb_op_args args = { .i = { t->shape.ndim ? (int64_t)1 << a : 0, keepdim } };
    return call1(op, t, &args);
}
nb_tensor *nb_sum(nb_tensor *t, int axis, bool keepdim) { return reduce(NB_OP_SUM, "sum", t, axis, keepdim); }
nb_tensor *nb_max(nb_tensor *t, int axis, bool keepdim) { return reduce(NB_OP_MAX, "max", t, axis, keepdim); }
nb_tensor *nb_min(nb_tensor *t, int axis, bool keepdim) { return reduce(NB_OP_MIN, "min", t, axis, keepdim); }
nb_tensor *nb_argmax(nb_tensor *t, int axis, bool keepdim) { return reduce(NB_OP_ARGMAX, "argmax", t, axis, keepdim); }
nb_tensor *nb_argmin(nb_tensor *t, int axis, bool keepdim) { return reduce(NB_OP_ARGMIN, "argmin", t, axis, keepdim); }

nb_tensor *nb_mean(nb_tensor *t, int axis, bool keepdim) {
    if (!t) {
        nb__error("nb_mean: input is NULL");
        return NULL;
    }
    int a = nb__axis(axis, t->shape.ndim);
    int64_t n = a < 0 ? 1 : (t->shape.ndim ? t->shape.dim[a] : 1);
    COMPOSITE_BEGIN
    nb_tensor *x = nb__is_float(t->dtype) ? t : nb_cast(t, NB_F32);
    result_ = nb_mul_scalar(nb_sum(x, axis, keepdim), n ? 1.0 / (double)n : NAN);
    COMPOSITE_END
}

nb_tensor *nb_sum_all(nb_tensor *t) {
    if (!t) {
        nb__error("nb_sum_all: input is NULL");
        return NULL;
    }
    nb_op_args args = { .i = { t->shape.ndim ? ((int64_t)1 << t->shape.ndim) - 1 : 0, 0 } };
    return call1(NB_OP_SUM, t, &args);
}

nb_tensor *nb_mean_all(nb_tensor *t) {
    if (!t) {
        nb__error("nb_mean_all: input is NULL");
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor *x = nb__is_float(t->dtype) ? t : nb_cast(t, NB_F32);
    result_ = nb_mul_scalar(nb_sum_all(x), t->numel ? 1.0 / (double)t->numel : NAN);
    COMPOSITE_END
}

nb_tensor *nb_sum_to(nb_tensor *t, nb_shape shape) {
    if (!t) {
        nb__error("nb_sum_to: input is NULL");
        return NULL;
    }
    if (nb__shape_eq(&t->shape, &shape)) return nb__own(nb_retain(t));
    int nd = t->shape.ndim, lead = nd - shape.ndim;
    char sh[160], d[200];
    if (lead < 0) {
        nb__error("nb_sum_to: cannot reduce %s to %s", nb__describe(t, d, sizeof d), nb_shape_str(shape, sh, sizeof sh));
        return NULL;
    }
    int64_t mask = 0;
    for (int i = 0; i < nd; i++) {
        if (i < lead) { mask |= (int64_t)1 << i; continue; }
        int64_t want = shape.dim[i - lead];
        if (want == t->shape.dim[i]) continue;
        if (want != 1) {
            nb__error("nb_sum_to: cannot reduce %s to %s", nb__describe(t, d, sizeof d), nb_shape_str(shape, sh, sizeof sh));
            return NULL;
        }
        mask |= (int64_t)1 << i;
    }
    COMPOSITE_BEGIN
    nb_op_args args = { .i = { mask, 1 } };
    result_ = nb_reshape(call1(NB_OP_SUM, t, &args), shape);
    COMPOSITE_END
}

nb_tensor *nb_logsumexp(nb_tensor *t, int axis, bool keepdim) {
    if (!t) {
        nb__error("nb_logsumexp: input is NULL");
        return NULL;
    }
    int a = nb__axis_of("logsumexp", t, axis);
    if (a < 0) return NULL;
    COMPOSITE_BEGIN
    if (t->shape.ndim && t->shape.dim[a] == 0) {
        /* an empty axis sums no exponentials: log 0 = -inf, as torch (max would be an error); the
           sum keeps the result in t's graph, whose gradient is empty */
        nb_tensor *x = nb__is_float(t->dtype) ? t : nb_cast(t, NB_F32);
        result_ = nb_add_scalar(nb_sum(x, a, keepdim), -INFINITY);
        COMPOSITE_END
    }
    /* shift by the detached max (so the gradient is softmax); an all -inf row shifts by 0 */
    nb_tensor *m = nb_detach(nb_max(t, axis, true));
    if (m) m = nb_where(nb_eq(nb_abs(m), nb_full((nb_shape){ 0, { 0 } }, INFINITY, m->dtype)), nb_zeros_like(m), m);
    nb_tensor *r = nb_add(nb_log(nb_sum(nb_exp(nb_sub(t, m)), axis, true)), m);
    result_ = keepdim ? r : nb_squeeze(r, axis);
    COMPOSITE_END
}

nb_tensor *nb_var(nb_tensor *t, int axis, bool keepdim) {
    if (!t) {
        nb__error("nb_var: input is NULL");
        return NULL;
    }
    int a = nb__axis(axis, t->shape.ndim);
    int64_t n = a < 0 ? 1 : (t->shape.ndim ? t->shape.dim[a] : 1);
    COMPOSITE_BEGIN
    nb_tensor *x = nb__is_float(t->dtype) ? t : nb_cast(t, NB_F32);
    nb_tensor *d = nb_sub(x, nb_mean(x, axis, true));
    result_ = nb_mul_scalar(nb_sum(nb_mul(d, d), axis, keepdim), n > 1 ? 1.0 / (double)(n - 1) : NAN);
    COMPOSITE_END
}

nb_tensor *nb_softmax(nb_tensor *t, int axis) { return call1(NB_OP_SOFTMAX, t, &(nb_op_args){ .i = { axis } }); }
nb_tensor *nb_log_softmax(nb_tensor *t, int axis) { return call1(NB_OP_LOG_SOFTMAX, t, &(nb_op_args){ .i = { axis } }); }

/* ---- shape ---- */
nb_tensor *nb_view(nb_tensor *t, nb_shape shape) { return call1(NB_OP_VIEW, t, &(nb_op_args){ .shape = shape }); }

nb_tensor *nb_reshape(nb_tensor *t, nb_shape shape) {
    if (!t) {
        nb__error("nb_reshape: input is NULL");
        return NULL;
    }
    if (nb__resolve_shape("reshape", t, &shape) < 0) return NULL;
    if (nb__shape_eq(&t->shape, &shape)) return nb__own(nb_retain(t));
    int64_t stride[NB_MAX_DIMS];
    if (nb__view_strides(t, &shape, stride)) return nb_view(t, shape);
    nb_tensor *c = call1(NB_OP_COPY, t, NULL);
    nb_tensor *r = nb_view(c, shape);
    return r;
}

nb_tensor *nb_permute(nb_tensor *t, const int *perm) {
    if (!t) {
        nb__error("nb_permute: input is NULL");
        return NULL;
    }
    if (!perm && t->shape.ndim > 0) { nb__error("nb_permute: perm is NULL"); return NULL; }
    nb_op_args a = { 0 };
    for (int i = 0; i < t->shape.ndim; i++) a.i[i] = perm[i];
    return call1(NB_OP_PERMUTE, t, &a);
}

nb_tensor *nb_transpose(nb_tensor *t, int axis0, int axis1) {
    if (!t) {
        nb__error("nb_transpose: input is NULL");
        return NULL;
    }
    int nd = t->shape.ndim, a0 = nb__axis(axis0, nd), a1 = nb__axis(axis1, nd);
    if (a0 < 0 || a1 < 0) {
        char d[200];
        nb__error("nb_transpose: axes %d and %d are out of range for %s", axis0, axis1, nb__describe(t, d, sizeof d));
        return NULL;
    }
    if (nd == 0) return nb__own(nb_retain(t));
    int perm[NB_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[a0] = a1;
    perm[a1] = a0;
    return nb_permute(t, perm);
}

nb_tensor *nb_expand(nb_tensor *t, nb_shape shape) {
    if (t && nb__shape_eq(&t->shape, &shape)) return nb__own(nb_retain(t)); /* nothing to broadcast */
    return call1(NB_OP_EXPAND, t, &(nb_op_args){ .shape = shape });
}

nb_tensor *nb_squeeze(nb_tensor *t, int axis) {
    if (!t) {
        nb__error("nb_squeeze: input is NULL");
        return NULL;
    }
    int a = nb__axis(axis, t->shape.ndim);
    if (a < 0) {
        char d[200];
        nb__error("nb_squeeze: axis %d is out of range for %s", axis, nb__describe(t, d, sizeof d));
        return NULL;
    }
    nb_shape s = t->shape;
    if (s.ndim == 0 || s.dim[a] != 1) return nb_view(t, s); /* torch leaves other sizes alone */
    for (int i = a; i < s.ndim - 1; i++) s.dim[i] = s.dim[i + 1];
    s.ndim--;
    return nb_view(t, s);
}

nb_tensor *nb_unsqueeze(nb_tensor *t, int axis) {
    if (!t) {
        nb__error("nb_unsqueeze: input is NULL");
        return NULL;
    }
    int nd = t->shape.ndim;
    int a = axis < 0 ? axis + nd + 1 : axis;
    if (a < 0 || a > nd || nd >= NB_MAX_DIMS) {
        char d[200];
        nb__error("nb_unsqueeze: axis %d is out of range for %s", axis, nb__describe(t, d, sizeof d));
        return NULL;
    }
    nb_shape s = t->shape;
    for (int i = nd; i > a; i--) s.dim[i] = s.dim[i - 1];
    s.dim[a] = 1;
    s.ndim = nd + 1;
    return nb_view(t, s);
}

nb_tensor *nb_flatten(nb_tensor *t, int start_axis, int end_axis) {
    if (!t) {
        nb__error("nb_flatten: input is NULL");
        return NULL;
    }
    int nd = t->shape.ndim;
    if (nd == 0) return nb_reshape(t, (nb_shape){ 1, { 1 } });
    int s = nb__axis(start_axis, nd), e = nb__axis(end_axis, nd);
    if (s < 0 || e < 0 || s > e) {
        char d[200];
        nb__error("nb_flatten: axes %d..%d are out of range for %s", start_axis, end_axis, nb__describe(t, d, sizeof d));
        return NULL;
    }
    nb_shape out = { 0, { 0 } };
    for (int i = 0; i < s; i++) out.dim[out.ndim++] = t->shape.dim[i];
    int64_t m = 1;
    for (int i = s; i <= e; i++) m *= t->shape.dim[i];
    out.dim[out.ndim++] = m;
    for (int i = e + 1; i < nd; i++) out.dim[out.ndim++] = t->shape.dim[i];
    return nb_reshape(t, out);
}

nb_tensor *nb_slice(nb_tensor *t, int axis, int64_t start, int64_t end, int64_t step) {
    return call1(NB_OP_SLICE, t, &(nb_op_args){ .i = { axis, start, end, step } });
}

nb_tensor *nb_cat(nb_tensor *const *ts, int n, int axis) {
    if (!ts || n < 1) {
        nb__error("nb_cat: needs at least one tensor");
        return NULL;
    }
    return nb__call(NB_OP_CAT, ts, n, &(nb_op_args){ .i = { axis } });
}

nb_tensor *nb_stack(nb_tensor *const *ts, int n, int axis) {
    if (!ts || n < 1) {
        nb__error("nb_stack: needs at least one tensor");
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!ts[k]) {
            nb__error("nb_stack: tensor %d is NULL", k);
            return NULL;
        }
        if (!nb__shape_eq(&ts[k]->shape, &ts[0]->shape)) {
            char d0[200], d[200];
            nb__error("nb_stack: tensor %d is %s but tensor 0 is %s (all must match)", k,
                      nb__describe(ts[k], d, sizeof d), nb__describe(ts[0], d0, sizeof d0));
            return NULL;
        }
    }
    int nd = ts[0]->shape.ndim;
    int a = axis < 0 ? axis + nd + 1 : axis;
    if (a < 0 || a > nd) {
        char d[200];
        nb__error("nb_stack: axis %d is out of range for %s", axis, nb__describe(ts[0], d, sizeof d));
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor **u = nb__alloc(sizeof(nb_tensor *) * (size_t)n);
    if (u) {
        for (int k = 0; k < n; k++) u[k] = nb_unsqueeze(ts[k], a);
        result_ = nb_cat(u, n, a);
        nb__free(u, sizeof(nb_tensor *) * (size_t)n);
    } else nb__error("nb_stack: out of memory");
    COMPOSITE_END
}

/* ---- indexing ---- */
nb_tensor *nb_index_select(nb_tensor *t, int axis, nb_tensor *idx) {
    nb_tensor *in[2] = { t, idx };
    return nb__call(NB_OP_INDEX_SELECT, in, 2, &(nb_op_args){ .i = { axis } });
}
nb_tensor *nb_gather(nb_tensor *t, int axis, nb_tensor *idx) {
    nb_tensor *in[2] = { t, idx };
    return nb__call(NB_OP_GATHER, in, 2, &(nb_op_args){ .i = { axis } });
}
nb_tensor *nb_embedding(nb_tensor *weight, nb_tensor *idx) {
    if (!weight || !idx) {
        if (!nb__has_error()) nb__error("nb_embedding: %s is NULL", weight ? "idx" : "weight");
        return NULL;
    }
    if (weight->shape.ndim != 2) {
        char d[200];
        nb__error("nb_embedding: weight must be [num, dim], got %s", nb__describe(weight, d, sizeof d));
        return NULL;
    }
    if (idx->shape.ndim >= NB_MAX_DIMS) {
        nb__error("nb_embedding: indices have too many dimensions");
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor *rows = nb_index_select(weight, 0, nb_reshape(idx, (nb_shape){ 1, { idx->numel } }));
    nb_shape s = idx->shape;
    s.dim[s.ndim++] = weight->shape.dim[1];
    result_ = nb_view(rows, s);
    COMPOSITE_END
}

/* ---- conversion ---- */
nb_tensor *nb_contiguous(nb_tensor *t) {
    if (!t) {
        nb__error("nb_contiguous: input is NULL");
        return NULL;
    }
    if (nb_is_contiguous(t)) return nb__own(nb_retain(t));
    return call1(NB_OP_COPY, t, NULL);
}
nb_tensor *nb_clone(nb_tensor *t) { return call1(NB_OP_COPY, t, NULL); }
nb_tensor *nb_detach(nb_tensor *t) { return call1(NB_OP_DETACH, t, NULL); }
nb_tensor *nb_cast(nb_tensor *t, nb_dtype dtype) {
    if (!t) {
        nb__error("nb_cast: input is NULL");
        return NULL;
    }
    if (!nb__dtype_ok("nb_cast", dtype)) return NULL;
    if (t->dtype == dtype) return nb__own(nb_retain(t));
    return call1(NB_OP_CAST, t, &(nb_op_args){ .dtype = dtype });
}
nb_tensor *nb_to(nb_tensor *t, nb_device device) {
    if (!t) {
        if (!nb__has_error()) nb__error("nb_to: input is NULL");
        return NULL;
    }
    if (!nb__backend_for("nb_to", device)) return NULL;
    nb_device cur = t->storage->device;
    if (cur.type == device.type && cur.index == device.index) return nb__own(nb_retain(t));
    return call1(NB_OP_TO, t, &(nb_op_args){ .device = device });
}

int nb_assign(nb_tensor *dst, nb_tensor *src) {
    nb_tensor *in[2] = { dst, src };
    nb_tensor *r = nb__dispatch(NB_OP_ASSIGN, in, 2, NULL);
    if (!r) return -1;
    nb_release(r);
    return 0;
}

/* ---- mixed precision ---- */
/* Per thread, as torch's autocast state is: a scope on one thread leaves the others' ops alone. */
static _Thread_local nb_dtype autocast_dtype = NB_F32;

nb_dtype nb_autocast(nb_dtype dtype) {
    nb_dtype prev = autocast_dtype;
    if (!nb__dtype_ok("nb_autocast", dtype)) return prev;
    if (dtype != NB_F32 && dtype != NB_BF16) {
        nb__error("nb_autocast: the CPU autocasts to bf16 (or NB_F32 for off), not %s", nb_dtype_name(dtype));
        return prev;
    }
    autocast_dtype = dtype;
    return prev;
}

nb_dtype nb_autocast_dtype(void) { return autocast_dtype; }

bool nb__autocast_bf16(const nb_tensor *a, const nb_tensor *b) {
    return autocast_dtype == NB_BF16 && a->dtype == NB_F32 && (!b || b->dtype == NB_F32);
}

/* ---- linear algebra ---- */
/* t cast to bf16 for autocast's product, as a node of the graph (so the backward reuses the
   bf16 copy instead of converting again, as torch's autocast does). A transposed view (linear's
   weight) converts as the dense matrix it views and is transposed back: the conversion then
   streams through memory, and the product reads its operand transposed. */
nb_tensor *nb__bf16_operand(nb_tensor *t) {
    COMPOSITE_BEGIN
    int n = t->shape.ndim;
    nb_tensor *tt = n >= 2 && !nb_is_contiguous(t) ? nb_transpose(t, -1, -2) : NULL;
    result_ = tt && nb_is_contiguous(tt) ? nb_transpose(nb_cast(tt, NB_BF16), -1, -2) : nb_cast(t, NB_BF16);
    COMPOSITE_END
}

/* The product op for two inputs of 2 or more dimensions: bf16 operands under autocast. */
static nb_tensor *matmul_op(nb_tensor *a, nb_tensor *b) {
    if (!nb__autocast_bf16(a, b)) return call2(NB_OP_MATMUL, a, b);
    COMPOSITE_BEGIN
    result_ = call2(NB_OP_MATMUL_BF16, nb__bf16_operand(a), nb__bf16_operand(b));
    COMPOSITE_END
}

nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b) {
    if (!a || !b) {
        if (!nb__has_error()) nb__error("nb_matmul: input %d is NULL", a ? 1 : 0);
        return NULL;
    }
    if (a->shape.ndim == 0 || b->shape.ndim == 0) {
        char da[200], db[200];
        nb__error("nb_matmul: both inputs need at least 1 dimension, got %s and %s", nb__describe(a, da, sizeof da),
                  nb__describe(b, db, sizeof db));
        return NULL;
    }
    if (a->shape.ndim >= 2 && b->shape.ndim >= 2) return matmul_op(a, b);
    if (a->shape.ndim == 1 && b->shape.ndim == 1 && a->shape.dim[0] != b->shape.dim[0]) {
        char da[200], db[200];
        nb__error("nb_matmul: inner dimensions differ: a is %s, b is %s", nb__describe(a, da, sizeof da),
                  nb__describe(b, db, sizeof db));
        return NULL;
    }
    COMPOSITE_BEGIN
    /* torch.matmul: a 1-D a gains a leading axis, a 1-D b a trailing one, removed afterwards */
    nb_tensor *a2 = a->shape.ndim == 1 ? nb_unsqueeze(a, 0) : a;
    nb_tensor *b2 = b->shape.ndim == 1 ? nb_unsqueeze(b, 1) : b;
    nb_tensor *r = matmul_op(a2, b2);
    if (b->shape.ndim == 1) r = nb_squeeze(r, -1);
    if (a->shape.ndim == 1) r = nb_squeeze(r, b->shape.ndim == 1 ? -1 : -2);
    result_ = r;
    COMPOSITE_END
}

nb_tensor *nb_linear(nb_tensor *x, nb_tensor *w, nb_tensor *b) {
    if (!x || !w) {
        if (!nb__has_error()) nb__error("nb_linear: %s is NULL", x ? "weight" : "input");
        return NULL;
    }
    if (w->shape.ndim != 2 || x->shape.ndim < 1 || x->shape.dim[x->shape.ndim - 1] != w->shape.dim[1]) {
        char dx[200], dw[200];
        nb__error("nb_linear: input %s does not fit weight %s (expected input [..., %lld])", nb__describe(x, dx, sizeof dx),
                  nb__describe(w, dw, sizeof dw), w->shape.ndim == 2 ? (long long)w->shape.dim[1] : -1LL);
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor *y = nb_matmul(x, nb_transpose(w, 0, 1));
    result_ = b ? nb_add(y, b) : y;
    COMPOSITE_END
}
