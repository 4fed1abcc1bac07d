/* ONNX import's operators: the table of what nabla runs (each operator's ONNX version history,
   the versions implemented, the attributes accepted) and their implementations on nabla's ops,
   with ONNX's semantics where they differ from nabla's (integer division truncates, Mod,
   Softmax's 2-D coercion before opset 13, Slice's clamping, ...). */
#include "import_impl.h"
#include "../ops/ops_impl.h"      /* nb__host_call */
#include "../ops/shape_util.h"    /* nb__broadcast_shapes */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RUN(name) static int op_##name(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout)
#define UNUSED (void)r, (void)nin, (void)nout
#define OUT(t) return (out[0] = (t)) ? 0 : -1
#define FAIL(...) return (nb__onnx_node_error(n, __VA_ARGS__), -1)

static bool is_float(nb_dtype d) { return d == NB_F32 || d == NB_F64 || d == NB_F16 || d == NB_BF16; }

/* Normalises an axis in [-rank, rank) (rank: the count it indexes). */
static int axis_of(const onnx_node *n, int64_t a, int rank, int *ax) {
    if (a < -rank || a >= rank) {
        nb__onnx_node_error(n, "axis %lld is out of range for rank %d", (long long)a, rank);
        return -1;
    }
    *ax = (int)(a < 0 ? a + rank : a);
    return 0;
}

/* t in dtype d (nabla's ops promote as PyTorch does; ONNX keeps each operator's type). */
static nb_tensor *as(nb_tensor *t, nb_dtype d) { return t && nb_dtype_of(t) != d ? nb_cast(t, d) : t; }

/* A 0-d tensor of dtype d holding v (made where t lives). */
static nb_tensor *scalar_like(nb_tensor *t, double v) {
    (void)t;
    return nb_full(NB_SHAPE(), v, nb_dtype_of(t));
}

/* ---------- elementwise ---------- */
RUN(add) { UNUSED; OUT(as(nb_add(in[0], in[1]), nb_dtype_of(in[0]))); }
RUN(sub) { UNUSED; OUT(as(nb_sub(in[0], in[1]), nb_dtype_of(in[0]))); }
RUN(mul) { UNUSED; OUT(as(nb_mul(in[0], in[1]), nb_dtype_of(in[0]))); }

/* ---------- integer Div and Mod ----------
   In integer arithmetic, not through f64 (whose 53 bits lost 2^53 + 1): Div truncates toward
   zero (C's /), Mod with fmod 0 takes the divisor's sign (Python's %), with fmod 1 the
   dividend's (C's %), as ONNX's specification and ONNX Runtime do. A zero divisor is an error
   naming the node and the element, and INT_MIN / -1 wraps to INT_MIN (its remainder is 0), where
   C's operators would trap. nabla's ops have no integer division, so the kernel is this
   function, run on the host through host_call: a plain call eagerly, and a step that every replay
   of a compiled model runs again. */
enum { INT_DIV, INT_MOD, INT_FMOD };

#define INT_KERNEL(T, UT)                                                                          \
    for (int64_t i = 0; i < cnt; i++) {                                                            \
        T x = ((const T *)a)[i], y = ((const T *)b)[i], q;                                         \
        if (y == 0) { bad = i; num = (int64_t)x; break; }                                          \
        if (y == (T)-1) /* x / -1: negate with wrap (INT_MIN stays), remainder 0 */                 \
            q = kind == INT_DIV ? (T)(UT)(0u - (UT)x) : (T)0;                                      \
        else if (kind == INT_DIV) q = (T)(x / y);                                                  \
        else {                                                                                     \
            q = (T)(x % y);                                                                        \
            if (kind == INT_MOD && q != 0 && ((q < 0) != (y < 0))) q = (T)(q + y);                 \
        }                                                                                          \
        ((T *)o)[i] = q;                                                                           \
    }

/* Floating-point Mod (never Div: that is nabla's own): C's fmod, exact, with fmod 1; with fmod 0
   moved to the divisor's sign, a zero result taking the divisor's sign, as Mod-28 spells out (a
   zero or NaN operand gives NaN, x mod +-inf is x or the infinity). */
#define FLOAT_MOD(T, FMOD, COPYSIGN)                                                               \
    for (int64_t i = 0; i < cnt; i++) {                                                            \
        T x = ((const T *)a)[i], y = ((const T *)b)[i], r = FMOD(x, y);                            \
        if (kind == INT_MOD) {                                                                     \
            if (r != 0 && ((r < 0) != (y < 0))) r += y;                                            \
            else if (r == 0) r = COPYSIGN((T)0, y);                                                \
        }                                                                                          \
        ((T *)o)[i] = r;                                                                           \
    }

static int int_div_mod_host(void *ctx, nb_tensor *const *t, int nt) {
    const onnx_node *n = ctx;
    (void)nt;
    int kind = !strcmp(n->op->name, "Div") ? INT_DIV : nb__onnx_attr_i(n, "fmod", 0) ? INT_FMOD : INT_MOD;
    void *o = nb_data_ptr(t[0]), *a = nb_data_ptr(t[1]), *b = nb_data_ptr(t[2]);
    int64_t cnt = nb_numel(t[0]), bad = -1, num = 0;
    if (cnt && (!o || !a || !b)) return -1;
    switch (nb_dtype_of(t[0])) {
    case NB_I64: INT_KERNEL(int64_t, uint64_t) break;
    case NB_I32: INT_KERNEL(int32_t, uint32_t) break;
    case NB_I8: INT_KERNEL(int8_t, uint8_t) break;
    case NB_U8: /* unsigned: every rule is C's */
        for (int64_t i = 0; i < cnt; i++) {
            uint8_t x = ((const uint8_t *)a)[i], y = ((const uint8_t *)b)[i];
            if (y == 0) { bad = i; num = x; break; }
            ((uint8_t *)o)[i] = kind == INT_DIV ? (uint8_t)(x / y) : (uint8_t)(x % y);
        }
        break;
    case NB_F32: FLOAT_MOD(float, fmodf, copysignf) break;
    case NB_F64: FLOAT_MOD(double, fmod, copysign) break;
    default: FAIL("integer %s of %s", n->op->name, nb_dtype_name(nb_dtype_of(t[0])));
    }
    if (bad >= 0) FAIL("integer %s by zero (element %lld of the broadcast inputs: %lld %s 0)", kind == INT_DIV ? "division" : "modulo",
                       (long long)bad, (long long)num, kind == INT_DIV ? "/" : "mod");
    return 0;
}
#undef INT_KERNEL
#undef FLOAT_MOD

/* Integer a / b or a mod b by int_div_mod_host: both broadcast and copied (host_call may write
   every tensor it is given, so none is a model's value), and a result to write. */
static int int_div_mod(const onnx_node *n, nb_tensor *a, nb_tensor *b, nb_tensor **out) {
    nb_dtype d = nb_dtype_of(a);
    if (nb_dtype_of(b) != d) FAIL("A is %s and B is %s; they must be one type", nb_dtype_name(d), nb_dtype_name(nb_dtype_of(b)));
    bool fl = d == NB_F32 || d == NB_F64;
    if (d != NB_I64 && d != NB_I32 && d != NB_I8 && d != NB_U8 && !(fl && strcmp(n->op->name, "Div")))
        FAIL("%s of %s is not defined", n->op->name, nb_dtype_name(d));
    nb_shape sa = nb_shape_of(a), sb = nb_shape_of(b), s;
    if (nb__broadcast_shapes("nb_onnx", &sa, &sb, &s) < 0) return -1;
    nb_tensor *t[3] = { nb_empty(s, d), nb_clone(nb_expand(a, s)), nb_clone(nb_expand(b, s)) };
    if (!t[0] || !t[1] || !t[2] || nb__host_call(int_div_mod_host, (void *)n, t, 3) < 0) return -1;
    out[0] = t[0];
    return 0;
}

/* a / b: floats as nabla divides, integers in integer arithmetic */
RUN(div) {
    UNUSED;
    nb_dtype d = nb_dtype_of(in[0]);
    if (is_float(d)) OUT(as(nb_div(in[0], in[1]), d));
    return int_div_mod(n, in[0], in[1], out);
}

/* Mod: fmod = 1 keeps the dividend's sign (C fmod), 0 the divisor's (Python %); floats too, fmod
   0 from version 28 (before, the schema asks for fmod 1); halves in f32 */
RUN(mod) {
    UNUSED;
    nb_dtype d = nb_dtype_of(in[0]);
    bool fm = nb__onnx_attr_i(n, "fmod", 0) != 0;
    if (is_float(d) && !fm && n->version < 28) FAIL("fmod must be 1 for floating-point inputs before Mod version 28");
    if (d != NB_F16 && d != NB_BF16) return int_div_mod(n, in[0], in[1], out);
    if (nb_dtype_of(in[1]) != d) FAIL("A is %s and B is %s; they must be one type", nb_dtype_name(d), nb_dtype_name(nb_dtype_of(in[1])));
    nb_tensor *a = nb_cast(in[0], NB_F32), *b = nb_cast(in[1], NB_F32), *y = NULL;
    if (int_div_mod(n, a, b, &y) < 0) return -1;
    OUT(nb_cast(y, d));
}

RUN(pow) {
    UNUSED;
    nb_dtype d = nb_dtype_of(in[0]);
    nb_tensor *a = is_float(d) ? in[0] : nb_cast(in[0], NB_F64);
    nb_tensor *b = nb_cast(in[1], nb_dtype_of(a));
    nb_tensor *y = nb_pow(a, b);
    if (!is_float(d)) y = nb_round(y); /* exact integer powers computed in f64 */
    OUT(as(y, d));
}

/* Max, Min, Sum, Mean: variadic, broadcasting */
static int variadic(const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int kind) {
    nb_tensor *acc = in[0];
    for (int k = 1; k < nin; k++)
        acc = kind == 0 ? nb_maximum(acc, in[k]) : kind == 1 ? nb_minimum(acc, in[k]) : nb_add(acc, in[k]);
    nb_dtype d = nb_dtype_of(in[0]);
    if (kind == 3) acc = nb_div(acc, nb_full(NB_SHAPE(), (double)nin, is_float(d) ? d : NB_F64));
    if (nin == 1) acc = nb_add(acc, nb_zeros(NB_SHAPE(), d)); /* a fresh tensor */
    (void)n;
    out[0] = as(acc, d);
    return out[0] ? 0 : -1;
}
RUN(max) { UNUSED; return variadic(n, in, nin, out, 0); }
RUN(min) { UNUSED; return variadic(n, in, nin, out, 1); }
RUN(sum) { UNUSED; return variadic(n, in, nin, out, 2); }
RUN(mean) { UNUSED; return variadic(n, in, nin, out, 3); }

static nb_tensor *lnot(nb_tensor *x) { return nb_eq(x, nb_zeros(NB_SHAPE(), NB_BOOL)); }
static nb_tensor *lor(nb_tensor *a, nb_tensor *b) {
    return nb_gt(nb_add(nb_cast(a, NB_I32), nb_cast(b, NB_I32)), nb_zeros(NB_SHAPE(), NB_I32));
}
RUN(equal) { UNUSED; OUT(nb_eq(in[0], in[1])); }
RUN(less) { UNUSED; OUT(nb_lt(in[0], in[1])); }
RUN(greater) { UNUSED; OUT(nb_gt(in[0], in[1])); }
RUN(less_eq) { UNUSED; OUT(lor(nb_lt(in[0], in[1]), nb_eq(in[0], in[1]))); }
RUN(greater_eq) { UNUSED; OUT(lor(nb_gt(in[0], in[1]), nb_eq(in[0], in[1]))); }
RUN(and) { UNUSED; OUT(as(nb_mul(in[0], in[1]), NB_BOOL)); }
RUN(or) { UNUSED; OUT(lor(in[0], in[1])); }
RUN(xor) { UNUSED; OUT(lnot(nb_eq(in[0], in[1]))); }
RUN(not) { UNUSED; OUT(lnot(in[0])); }
RUN(where) { UNUSED; OUT(as(nb_where(in[0], in[1], in[2]), nb_dtype_of(in[1]))); }

/* unary ops whose nabla form keeps the dtype */
#define UNARY(name, expr) RUN(name) { UNUSED; nb_tensor *x = in[0]; OUT(as((expr), nb_dtype_of(x))); }
UNARY(neg, nb_neg(x))
UNARY(abs, nb_abs(x))
UNARY(sign, nb_sign(x))
UNARY(relu, nb_relu(x))
UNARY(floor, nb_floor(x))
UNARY(ceil, nb_ceil(x))
UNARY(round, nb_round(x))
UNARY(exp, nb_exp(x))
UNARY(log, nb_log(x))
UNARY(sqrt, nb_sqrt(x))
UNARY(tanh, nb_tanh(x))
UNARY(sigmoid, nb_sigmoid(x))
UNARY(erf, nb_erf(x))
UNARY(sin, nb_sin(x))
UNARY(cos, nb_cos(x))
UNARY(reciprocal, nb_reciprocal(x))
UNARY(softplus, nb_log1p(nb_exp(x)))

RUN(identity) { UNUSED; OUT(nb_retain(in[0]) ? nb__own(in[0]) : NULL); }

RUN(leaky_relu) {
    UNUSED;
    nb_tensor *x = in[0];
    double a = nb__onnx_attr_f(n, "alpha", 0.01);
    OUT(as(nb_where(nb_lt(x, scalar_like(x, 0)), nb_mul_scalar(x, a), x), nb_dtype_of(x)));
}
RUN(elu) {
    UNUSED;
    nb_tensor *x = in[0];
    double a = nb__onnx_attr_f(n, "alpha", 1.0);
    OUT(as(nb_where(nb_lt(x, scalar_like(x, 0)), nb_mul_scalar(nb_expm1(x), a), x), nb_dtype_of(x)));
}
RUN(hard_sigmoid) {
    UNUSED;
    nb_tensor *x = in[0];
    double a = nb__onnx_attr_f(n, "alpha", 0.2), b = nb__onnx_attr_f(n, "beta", 0.5);
    OUT(as(nb_clamp(nb_add_scalar(nb_mul_scalar(x, a), b), 0, 1), nb_dtype_of(x)));
}
RUN(hard_swish) {
    UNUSED;
    nb_tensor *x = in[0];
    OUT(as(nb_mul(x, nb_clamp(nb_add_scalar(nb_mul_scalar(x, 1.0 / 6), 0.5), 0, 1)), nb_dtype_of(x)));
}
RUN(gelu) {
    UNUSED;
    nb_tensor *x = in[0];
    char buf[16];
    const char *ap = nb__onnx_attr_s(n, "approximate", "none", buf, sizeof buf);
    if (!strcmp(ap, "tanh")) {
        /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        nb_tensor *inner = nb_mul_scalar(nb_add(x, nb_mul_scalar(nb_pow_scalar(x, 3), 0.044715)), sqrt(2.0 / M_PI));
        OUT(as(nb_mul(nb_mul_scalar(x, 0.5), nb_add_scalar(nb_tanh(inner), 1)), nb_dtype_of(x)));
    }
    OUT(as(nb_gelu(x), nb_dtype_of(x)));
}
static int check_gelu(const onnx_node *n, char *msg, size_t size) {
    char buf[16];
    const char *ap = nb__onnx_attr_s(n, "approximate", "none", buf, sizeof buf);
    if (strcmp(ap, "none") && strcmp(ap, "tanh")) return snprintf(msg, size, "approximate '%s' is not none or tanh", ap), -1;
    return 0;
}

/* Clip: bounds as attributes before version 11, optional inputs from 11 */
RUN(clip) {
    UNUSED;
    nb_tensor *x = in[0], *y = x;
    nb_dtype d = nb_dtype_of(x);
    if (n->version < 11) {
        y = nb_clamp(x, nb__onnx_attr_f(n, "min", -INFINITY), nb__onnx_attr_f(n, "max", INFINITY));
    } else {
        if (nin > 1 && in[1]) y = nb_maximum(y, nb_reshape(in[1], NB_SHAPE()));
        if (nin > 2 && in[2]) y = nb_minimum(y, nb_reshape(in[2], NB_SHAPE()));
        if (y == x) y = nb_clone(x);
    }
    OUT(as(y, d));
}

/* ---------- types ---------- */
static int check_cast(const onnx_node *n, char *msg, size_t size) {
    nb_dtype d;
    int64_t to = nb__onnx_attr_i(n, "to", -1);
    if (!nb__onnx_to_dtype((int)to, &d)) return snprintf(msg, size, "cast to ONNX type %lld, which nabla lacks", (long long)to), -1;
    char buf[16];
    if (nb__onnx_attr(n, "round_mode") && strcmp(nb__onnx_attr_s(n, "round_mode", "up", buf, sizeof buf), "up"))
        return snprintf(msg, size, "round_mode '%s' is not supported", buf), -1;
    return 0;
}
RUN(cast) {
    UNUSED;
    nb_dtype d;
    nb__onnx_to_dtype((int)nb__onnx_attr_i(n, "to", 1), &d);
    nb_tensor *x = in[0];
    /* float to bool is x != 0 (NaN is true); nabla's cast does the same */
    OUT(nb_dtype_of(x) == d ? nb_clone(x) : nb_cast(x, d));
}
RUN(cast_like) { UNUSED; OUT(nb_dtype_of(in[0]) == nb_dtype_of(in[1]) ? nb_clone(in[0]) : nb_cast(in[0], nb_dtype_of(in[1]))); }

/* ---------- shapes ---------- */
/* A 1-D i64 tensor of v[0..k) (or 0-d when scalar). */
static nb_tensor *ints_tensor(const int64_t *v, int k, bool scalar) {
    return nb__onnx_const(v, scalar ? NB_SHAPE() : NB_SHAPE(k), NB_I64);
}

RUN(shape) {
    UNUSED;
    nb_shape s = nb_shape_of(in[0]);
    int64_t start = nb__onnx_attr_i(n, "start", 0), end = nb__onnx_attr_i(n, "end", s.ndim);
    if (start < 0) start += s.ndim;
    if (end < 0) end += s.ndim;
    start = start < 0 ? 0 : start > s.ndim ? s.ndim : start;
    end = end < 0 ? 0 : end > s.ndim ? s.ndim : end;
    if (end < start) end = start;
    OUT(ints_tensor(s.dim + start, (int)(end - start), false));
}
RUN(size) {
    UNUSED;
    int64_t v = nb_numel(in[0]);
    OUT(ints_tensor(&v, 1, true));
}

/* Reshape: 0 copies the input's dimension (unless allowzero), -1 is inferred */
RUN(reshape) {
    UNUSED;
    int64_t v[NB_MAX_DIMS];
    int k;
    if (n->version < 5) {
        const int64_t *a;
        k = nb__onnx_attr_ints(n, "shape", &a);
        if (k < 0 || k > NB_MAX_DIMS) FAIL("attribute 'shape' is missing or has more than %d values", NB_MAX_DIMS);
        memcpy(v, a, sizeof(int64_t) * (size_t)k);
    } else if ((k = nb__onnx_read_ints(r, in[1], "the shape", v, NB_MAX_DIMS)) < 0) return -1;
    nb_shape is = nb_shape_of(in[0]), s = { k, { 0 } };
    bool allowzero = nb__onnx_attr_i(n, "allowzero", 0) != 0;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < k; i++) {
        int64_t d = v[i];
        if (d == 0 && !allowzero) {
            if (i >= is.ndim) FAIL("shape value 0 at position %d copies a dimension the input lacks", i);
            d = is.dim[i];
        }
        if (d == -1) {
            if (infer >= 0) FAIL("the shape has more than one -1");
            infer = i;
            d = 1;
        } else if (d < 0) FAIL("shape value %lld is negative", (long long)d);
        s.dim[i] = d;
        if (d && known > INT64_MAX / d) FAIL("the shape's size overflows");
        known *= d;
    }
    if (infer >= 0) {
        if (known == 0 || nb_numel(in[0]) % known) FAIL("the shape cannot hold the input's %lld elements", (long long)nb_numel(in[0]));
        s.dim[infer] = nb_numel(in[0]) / known;
        known *= s.dim[infer];
    }
    if (known != nb_numel(in[0])) FAIL("the shape holds %lld elements, the input has %lld", (long long)known, (long long)nb_numel(in[0]));
    OUT(nb_reshape(in[0], s));
}

RUN(flatten) {
    UNUSED;
    nb_shape s = nb_shape_of(in[0]);
    int64_t ax = nb__onnx_attr_i(n, "axis", 1); /* in [-rank, rank]: rank itself is allowed */
    if (ax < -s.ndim || ax > s.ndim) FAIL("axis %lld is out of range for rank %d", (long long)ax, s.ndim);
    if (ax < 0) ax += s.ndim;
    int64_t a = 1, b = 1;
    for (int i = 0; i < s.ndim; i++) *(i < ax ? &a : &b) *= s.dim[i];
    OUT(nb_reshape(in[0], NB_SHAPE(a, b)));
}

RUN(transpose) {
    UNUSED;
    int rank = nb_ndim(in[0]), perm[NB_MAX_DIMS];
    const int64_t *p;
    int k = nb__onnx_attr_ints(n, "perm", &p);
    if (k < 0) {
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    } else {
        if (k != rank) FAIL("perm has %d values for rank %d", k, rank);
        for (int i = 0; i < k; i++)
            if (axis_of(n, p[i], rank, &perm[i]) < 0) return -1;
    }
    OUT(nb_permute(in[0], perm)); /* a view: products read transposed operands in place */
}

/* Axes given as the attribute (before `input_from`) or as input 1; the count, or -1. */
static int axes_of(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, int input_from, int64_t *v, bool *given) {
    *given = false;
    if (n->version < input_from) {
        const int64_t *a;
        int k = nb__onnx_attr_ints(n, "axes", &a);
        if (k < 0) return 0;
        if (k > 64) { nb__onnx_node_error(n, "too many axes"); return -1; }
        *given = true;
        memcpy(v, a, sizeof(int64_t) * (size_t)k);
        return k;
    }
    if (nin < 2 || !in[1]) return 0;
    *given = true;
    return nb__onnx_read_ints(r, in[1], "the axes", v, 64);
}

RUN(unsqueeze) {
    UNUSED;
    int64_t ax[64];
    bool given;
    int k = axes_of(r, n, in, nin, 13, ax, &given);
    if (k < 0) return -1;
    nb_shape s = nb_shape_of(in[0]);
    int rank = s.ndim + k;
    if (rank > NB_MAX_DIMS) FAIL("the result would have %d dimensions; nabla allows %d", rank, NB_MAX_DIMS);
    bool ins[NB_MAX_DIMS] = { false };
    for (int i = 0; i < k; i++) {
        int a;
        if (axis_of(n, ax[i], rank, &a) < 0) return -1;
        if (ins[a]) FAIL("axis %lld is given twice", (long long)ax[i]);
        ins[a] = true;
    }
    nb_shape o = { rank, { 0 } };
    for (int i = 0, j = 0; i < rank; i++) o.dim[i] = ins[i] ? 1 : s.dim[j++];
    OUT(nb_reshape(in[0], o));
}

RUN(squeeze) {
    UNUSED;
    int64_t ax[64];
    bool given;
    int k = axes_of(r, n, in, nin, 13, ax, &given);
    if (k < 0) return -1;
    nb_shape s = nb_shape_of(in[0]);
    bool drop[NB_MAX_DIMS] = { false };
    if (!given)
        for (int i = 0; i < s.ndim; i++) drop[i] = s.dim[i] == 1;
    for (int i = 0; i < k; i++) {
        int a;
        if (axis_of(n, ax[i], s.ndim, &a) < 0) return -1;
        if (s.dim[a] != 1) FAIL("axis %lld has size %lld, not 1", (long long)ax[i], (long long)s.dim[a]);
        drop[a] = true;
    }
    nb_shape o = { 0, { 0 } };
    for (int i = 0; i < s.ndim; i++)
        if (!drop[i]) o.dim[o.ndim++] = s.dim[i];
    OUT(nb_reshape(in[0], o));
}

/* Expand broadcasts both ways: the result has the broadcast of the input's shape and the given one */
RUN(expand) {
    UNUSED;
    int64_t v[NB_MAX_DIMS];
    int k = nb__onnx_read_ints(r, in[1], "the shape", v, NB_MAX_DIMS);
    if (k < 0) return -1;
    nb_shape s = nb_shape_of(in[0]);
    int rank = k > s.ndim ? k : s.ndim;
    nb_shape o = { rank, { 0 } }, x = { rank, { 0 } };
    for (int i = 0; i < rank; i++) {
        int64_t a = i - (rank - s.ndim) >= 0 ? s.dim[i - (rank - s.ndim)] : 1;
        int64_t b = i - (rank - k) >= 0 ? v[i - (rank - k)] : 1;
        if (a != b && a != 1 && b != 1) FAIL("shape %lld cannot broadcast with %lld at axis %d", (long long)a, (long long)b, i);
        x.dim[i] = a;
        o.dim[i] = a == 1 ? b : a;
    }
    OUT(nb_contiguous(nb_expand(nb_reshape(in[0], x), o)));
}

RUN(concat) {
    UNUSED;
    int rank = nb_ndim(in[0]), ax;
    if (axis_of(n, nb__onnx_attr_i(n, "axis", 0), rank, &ax) < 0) return -1;
    nb_tensor *ts[64];
    int k = 0;
    for (int i = 0; i < nin && k < 64; i++)
        if (in[i]) ts[k++] = in[i];
    OUT(nb_cat(ts, k, ax));
}

/* Split: sizes from the attribute (before 13) or input 1, else equal parts (the last one
   smaller from version 18, with num_outputs) */
RUN(split) {
    UNUSED;
    nb_shape s = nb_shape_of(in[0]);
    int ax;
    if (axis_of(n, nb__onnx_attr_i(n, "axis", 0), s.ndim, &ax) < 0) return -1;
    int64_t sz[64];
    int k = -1;
    if (n->version < 13) {
        const int64_t *a;
        k = nb__onnx_attr_ints(n, "split", &a);
        if (k > 64) FAIL("too many parts");
        if (k > 0) memcpy(sz, a, sizeof(int64_t) * (size_t)k);
    } else if (nin > 1 && in[1]) {
        if ((k = nb__onnx_read_ints(r, in[1], "the split", sz, 64)) < 0) return -1;
    }
    int64_t dim = s.dim[ax];
    if (k <= 0) {
        k = nout;
        int64_t part = (dim + k - 1) / k;
        if (n->version < 18 && dim % k) FAIL("axis size %lld does not split into %d equal parts", (long long)dim, k);
        for (int i = 0; i < k; i++) {
            int64_t b = i * part, e = b + part > dim ? dim : b + part;
            sz[i] = e > b ? e - b : 0;
        }
    }
    if (k != nout) FAIL("%d parts for %d outputs", k, nout);
    int64_t off = 0;
    for (int i = 0; i < k; i++) {
        if (sz[i] < 0 || off + sz[i] > dim) FAIL("the parts' sizes exceed the axis (%lld)", (long long)dim);
        out[i] = nb_contiguous(nb_slice(in[0], ax, off, off + sz[i], 1));
        if (!out[i]) return -1;
        off += sz[i];
    }
    if (off != dim) FAIL("the parts' sizes sum to %lld, the axis has %lld", (long long)off, (long long)dim);
    return 0;
}

/* Slice with ONNX's clamping; a negative step picks the elements with index_select */
static nb_tensor *slice_axis(nb_tensor *x, int ax, int64_t st, int64_t en, int64_t step) {
    int64_t dim = nb_dim(x, ax);
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    if (step > 0) {
        st = st < 0 ? 0 : st > dim ? dim : st;
        en = en < 0 ? 0 : en > dim ? dim : en;
        if (en < st) en = st;
        return nb_slice(x, ax, st, en, step);
    }
    st = st < 0 ? 0 : st > dim - 1 ? dim - 1 : st;
    en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
    int64_t cnt = st > en ? (st - en + (-step) - 1) / (-step) : 0;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
    if (!idx) return NULL;
    for (int64_t i = 0; i < cnt; i++) idx[i] = st + i * step;
    nb_tensor *it = nb__onnx_const(idx, NB_SHAPE(cnt), NB_I64);
    free(idx);
    return nb_index_select(x, ax, it);
}

RUN(slice) {
    UNUSED;
    int64_t st[NB_MAX_DIMS], en[NB_MAX_DIMS], ax[NB_MAX_DIMS], sp[NB_MAX_DIMS];
    int k, ka = -1, ks = -1;
    int rank = nb_ndim(in[0]);
    if (n->version < 10) {
        const int64_t *a;
        k = nb__onnx_attr_ints(n, "starts", &a);
        if (k < 0 || k > NB_MAX_DIMS) FAIL("starts missing or too long");
        memcpy(st, a, sizeof(int64_t) * (size_t)k);
        if (nb__onnx_attr_ints(n, "ends", &a) != k) FAIL("ends and starts differ in length");
        memcpy(en, a, sizeof(int64_t) * (size_t)k);
        ka = nb__onnx_attr_ints(n, "axes", &a);
        if (ka > NB_MAX_DIMS) FAIL("too many axes");
        if (ka > 0) memcpy(ax, a, sizeof(int64_t) * (size_t)ka);
    } else {
        if ((k = nb__onnx_read_ints(r, in[1], "starts", st, NB_MAX_DIMS)) < 0) return -1;
        if (nb__onnx_read_ints(r, in[2], "ends", en, NB_MAX_DIMS) != k) FAIL("ends and starts differ in length");
        if (nin > 3 && in[3] && (ka = nb__onnx_read_ints(r, in[3], "axes", ax, NB_MAX_DIMS)) < 0) return -1;
        if (nin > 4 && in[4] && (ks = nb__onnx_read_ints(r, in[4], "steps", sp, NB_MAX_DIMS)) < 0) return -1;
    }
    if (ka >= 0 && ka != k) FAIL("axes and starts differ in length");
    if (ks >= 0 && ks != k) FAIL("steps and starts differ in length");
    nb_tensor *x = in[0];
    bool seen[NB_MAX_DIMS] = { false };
    for (int i = 0; i < k; i++) {
        int a;
        if (axis_of(n, ka >= 0 ? ax[i] : i, rank, &a) < 0) return -1;
        if (seen[a]) FAIL("axis %d is sliced twice", a);
        seen[a] = true;
        int64_t step = ks >= 0 ? sp[i] : 1;
        if (step == 0) FAIL("a step is 0");
        x = slice_axis(x, a, st[i], en[i], step);
    }
    OUT(nb_contiguous(x) == x ? nb_clone(x) : nb_contiguous(x));
}

/* Negative indices count from the end of an axis of size dim. */
static nb_tensor *wrap_index(nb_tensor *idx, int64_t dim) {
    nb_tensor *i = nb_cast(idx, NB_I64);
    return nb_where(nb_lt(i, nb_zeros(NB_SHAPE(), NB_I64)), nb_add(i, nb_full(NB_SHAPE(), (double)dim, NB_I64)), i);
}

RUN(gather) {
    UNUSED;
    nb_shape s = nb_shape_of(in[0]), is = nb_shape_of(in[1]);
    int ax;
    if (axis_of(n, nb__onnx_attr_i(n, "axis", 0), s.ndim, &ax) < 0) return -1;
    if (s.ndim - 1 + is.ndim > NB_MAX_DIMS) FAIL("the result would have more than %d dimensions", NB_MAX_DIMS);
    nb_tensor *flat = nb_reshape(wrap_index(in[1], s.dim[ax]), NB_SHAPE(nb_numel(in[1])));
    nb_tensor *g = nb_index_select(in[0], ax, flat);
    nb_shape o = { 0, { 0 } };
    for (int i = 0; i < ax; i++) o.dim[o.ndim++] = s.dim[i];
    for (int i = 0; i < is.ndim; i++) o.dim[o.ndim++] = is.dim[i];
    for (int i = ax + 1; i < s.ndim; i++) o.dim[o.ndim++] = s.dim[i];
    OUT(nb_reshape(g, o));
}

RUN(gather_elements) {
    UNUSED;
    int ax;
    if (axis_of(n, nb__onnx_attr_i(n, "axis", 0), nb_ndim(in[0]), &ax) < 0) return -1;
    OUT(nb_gather(in[0], ax, wrap_index(in[1], nb_dim(in[0], ax))));
}

/* GatherND's and ScatterND's index tensor idx [..., m] as m index tensors for nb_index over the
   data's leading axes, after batch_dims aranges over the data's first axes (shaped to broadcast
   against idx's leading axes). -1 (error set) when the shapes do not fit. */
static int nd_index_list(const onnx_node *n, nb_tensor *x, nb_tensor *idx, int64_t batch_dims, nb_tensor **list) {
    int q = nb_ndim(idx), rank = nb_ndim(x);
    if (q < 1) FAIL("the indices must have at least one axis");
    int64_t m = nb_dim(idx, q - 1);
    if (batch_dims < 0 || batch_dims >= q || batch_dims > rank) FAIL("batch_dims %lld does not fit %d-D indices and %d-D data", (long long)batch_dims, q, rank);
    if (m < 1 || batch_dims + m > rank)
        FAIL("the indices' last axis holds %lld, but the data has %lld axes after batch_dims", (long long)m, (long long)(rank - batch_dims));
    int k = 0;
    for (int i = 0; i < batch_dims; i++) {
        if (nb_dim(x, i) != nb_dim(idx, i))
            FAIL("batch axis %d is %lld in the data but %lld in the indices", i, (long long)nb_dim(x, i), (long long)nb_dim(idx, i));
        nb_shape s = { q - 1, { 0 } };
        for (int a = 0; a < q - 1; a++) s.dim[a] = a == i ? nb_dim(x, i) : 1;
        list[k++] = nb_reshape(nb_arange(0, (double)nb_dim(x, i), 1, NB_I64), s);
    }
    for (int64_t j = 0; j < m; j++) list[k++] = nb_squeeze(nb_slice(idx, q - 1, j, j + 1, 1), q - 1);
    return k;
}

RUN(gather_nd) {
    UNUSED;
    nb_tensor *list[NB_MAX_DIMS];
    int k = nd_index_list(n, in[0], in[1], nb__onnx_attr_i(n, "batch_dims", 0), list);
    if (k < 0) return -1;
    OUT(nb_index(in[0], list, k));
}

/* ScatterND: none and add in one nb_index_put; mul, max and min one index tuple at a time, in
   the indices' order, as the specification applies them (a repeated index combines them all).
   Each of those steps copies the data, so they cost tuples x elements: fine for the few updates
   these reductions are used with, slow for many. */
RUN(scatter_nd) {
    UNUSED;
    char buf[16];
    const char *red = nb__onnx_attr_s(n, "reduction", "none", buf, sizeof buf);
    nb_tensor *x = in[0], *idx = in[1], *upd = in[2], *list[NB_MAX_DIMS];
    int m = nd_index_list(n, x, idx, 0, list);
    if (m < 0) return -1;
    if (!strcmp(red, "none") || !strcmp(red, "add")) OUT(nb_index_put(x, list, m, upd, !strcmp(red, "add")));
    int q = nb_ndim(idx), rank = nb_ndim(x);
    int64_t tuples = nb_numel(idx) / m;
    nb_shape us = { 1 + rank - m, { tuples } };
    for (int a = m; a < rank; a++) us.dim[1 + a - m] = nb_dim(x, a);
    nb_tensor *flat_idx = nb_reshape(idx, NB_SHAPE(tuples, m)), *flat_upd = nb_reshape(upd, us), *y = x;
    (void)q;
    for (int64_t t = 0; t < tuples && y; t++) {
        nb_tensor *one[NB_MAX_DIMS];
        for (int j = 0; j < m; j++) one[j] = nb_reshape(nb_slice(nb_slice(flat_idx, 0, t, t + 1, 1), 1, j, j + 1, 1), NB_SHAPE());
        nb_tensor *cur = nb_index(y, one, m), *u = nb_squeeze(nb_slice(flat_upd, 0, t, t + 1, 1), 0);
        nb_tensor *v = !strcmp(red, "mul") ? nb_mul(cur, u) : !strcmp(red, "max") ? nb_maximum(cur, u) : nb_minimum(cur, u);
        y = nb_index_put(y, one, m, v, false);
    }
    OUT(y);
}

static int check_scatter_nd(const onnx_node *n, char *msg, size_t size) {
    char buf[16];
    const char *red = nb__onnx_attr_s(n, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
        return snprintf(msg, size, "reduction '%s' is not one of none, add, mul, max and min", red), -1;
    /* the reductions came in two steps: add and mul with version 16, max and min with 18 */
    int since = !strcmp(red, "none") ? 0 : !strcmp(red, "add") || !strcmp(red, "mul") ? 16 : 18;
    if (n->version < since)
        return snprintf(msg, size, "reduction '%s' exists from ScatterND version %d; this node is version %d", red, since,
                        n->version), -1;
    return 0;
}

RUN(tile) {
    UNUSED;
    int64_t rep[NB_MAX_DIMS];
    nb_shape s = nb_shape_of(in[0]);
    int k = nb__onnx_read_ints(r, in[1], "repeats", rep, NB_MAX_DIMS);
    if (k < 0) return -1;
    if (k != s.ndim) FAIL("%d repeats for rank %d", k, s.ndim);
    nb_tensor *x = in[0];
    for (int i = 0; i < s.ndim; i++) {
        if (rep[i] < 0) FAIL("repeat %lld is negative", (long long)rep[i]);
        if (rep[i] == 1) continue;
        /* [.., d, ..] -> [.., r, d, ..] broadcast -> [.., r*d, ..] */
        nb_shape cur = nb_shape_of(x), e = { cur.ndim + 1, { 0 } };
        for (int j = 0, q = 0; j <= cur.ndim; j++) e.dim[j] = j == i ? 1 : cur.dim[q++];
        nb_tensor *u = nb_reshape(x, e);
        e.dim[i] = rep[i];
        u = nb_contiguous(nb_expand(u, e));
        cur.dim[i] *= rep[i];
        x = nb_reshape(u, cur);
    }
    OUT(nb_clone(x));
}

RUN(constant_of_shape) {
    UNUSED;
    int64_t v[NB_MAX_DIMS];
    int k = nb__onnx_read_ints(r, in[0], "the shape", v, NB_MAX_DIMS);
    if (k < 0) return -1;
    nb_shape s = { k, { 0 } };
    for (int i = 0; i < k; i++) {
        if (v[i] < 0) FAIL("shape value %lld is negative", (long long)v[i]);
        s.dim[i] = v[i];
    }
    const Onnx__AttributeProto *a = nb__onnx_attr(n, "value");
    if (!a) OUT(nb_zeros(s, NB_F32));
    nb_tensor *t = nb__onnx_tensor(a->t, NULL, "attribute 'value'");
    if (!t) return -1;
    if (nb_numel(t) != 1) { nb_release(t); FAIL("'value' must hold one element"); }
    nb_tensor *y = nb_contiguous(nb_expand(nb_reshape(nb__own(t), NB_SHAPE()), s));
    OUT(nb_clone(y));
}
static int check_constant_of_shape(const onnx_node *n, char *msg, size_t size) {
    const Onnx__AttributeProto *a = nb__onnx_attr(n, "value");
    nb_dtype d;
    if (a && (!a->t || !nb__onnx_to_dtype(a->t->data_type, &d)))
        return snprintf(msg, size, "'value' is not a tensor of a dtype nabla has"), -1;
    return 0;
}

/* Range: computed on the host (its inputs are scalars) */
RUN(range) {
    UNUSED;
    bool ok1, ok2, ok3;
    double st = nb__onnx_read_scalar(r, in[0], "start", &ok1), lim = nb__onnx_read_scalar(r, in[1], "limit", &ok2),
           dl = nb__onnx_read_scalar(r, in[2], "delta", &ok3);
    if (!ok1 || !ok2 || !ok3) return -1;
    if (dl == 0) FAIL("delta is 0");
    double cnt = ceil((lim - st) / dl);
    if (!(cnt >= 0)) cnt = 0;
    if (cnt > 1e9) FAIL("%g elements is too many", cnt);
    int64_t c = (int64_t)cnt;
    nb_dtype d = nb_dtype_of(in[0]);
    double *v = malloc(sizeof(double) * (size_t)(c ? c : 1));
    if (!v) FAIL("out of memory");
    for (int64_t i = 0; i < c; i++) v[i] = st + (double)i * dl;
    nb_tensor *t = nb__onnx_const(v, NB_SHAPE(c), NB_F64);
    free(v);
    OUT(as(t, d));
}

/* Constant: one of its value attributes */
RUN(constant) {
    UNUSED;
    const Onnx__AttributeProto *a;
    if ((a = nb__onnx_attr(n, "value"))) {
        nb_tensor *t = nb__onnx_tensor(a->t, NULL, "attribute 'value'");
        OUT(t ? nb__own(t) : NULL);
    }
    if ((a = nb__onnx_attr(n, "value_float"))) OUT(nb_full(NB_SHAPE(), a->f, NB_F32));
    if ((a = nb__onnx_attr(n, "value_int"))) OUT(ints_tensor(&a->i, 1, true));
    if ((a = nb__onnx_attr(n, "value_ints"))) OUT(ints_tensor(a->ints, (int)a->n_ints, false));
    if ((a = nb__onnx_attr(n, "value_floats"))) OUT(nb__onnx_const(a->floats, NB_SHAPE((int64_t)a->n_floats), NB_F32));
    FAIL("no value");
}
static int check_constant(const onnx_node *n, char *msg, size_t size) {
    if (n->pb->n_attribute != 1) return snprintf(msg, size, "exactly one value attribute is needed"), -1;
    const Onnx__AttributeProto *a = n->pb->attribute[0];
    nb_dtype d;
    if (!a->name) return snprintf(msg, size, "an attribute has no name"), -1;
    if (!strcmp(a->name, "value") && (!a->t || !nb__onnx_to_dtype(a->t->data_type, &d)))
        return snprintf(msg, size, "'value' is not a tensor of a dtype nabla has"), -1;
    if (!strcmp(a->name, "value_ints") && a->n_ints > (1u << 30)) return snprintf(msg, size, "too many values"), -1;
    return 0;
}

/* Pad: constant, edge, reflect and wrap modes; negative pads crop */
static int check_pad(const onnx_node *n, char *msg, size_t size) {
    char buf[16];
    const char *m = nb__onnx_attr_s(n, "mode", "constant", buf, sizeof buf);
    if (strcmp(m, "constant") && strcmp(m, "edge") && strcmp(m, "reflect") && strcmp(m, "wrap"))
        return snprintf(msg, size, "mode '%s' is not supported", m), -1;
    return 0;
}
RUN(pad) {
    UNUSED;
    char buf[16];
    const char *mode = nb__onnx_attr_s(n, "mode", "constant", buf, sizeof buf);
    nb_shape s = nb_shape_of(in[0]);
    int rank = s.ndim;
    int64_t p[2 * NB_MAX_DIMS], ax[NB_MAX_DIMS];
    int k, ka = -1;
    double cval = 0;
    if (n->version < 11) {
        const int64_t *a;
        k = nb__onnx_attr_ints(n, "pads", &a);
        if (k < 0 || k > 2 * NB_MAX_DIMS) FAIL("pads missing or too long");
        memcpy(p, a, sizeof(int64_t) * (size_t)k);
        cval = nb__onnx_attr_f(n, "value", 0);
    } else {
        if ((k = nb__onnx_read_ints(r, in[1], "pads", p, 2 * NB_MAX_DIMS)) < 0) return -1;
        if (nin > 2 && in[2] && nb_numel(in[2])) {
            bool ok;
            cval = nb__onnx_read_scalar(r, in[2], "constant_value", &ok);
            if (!ok) return -1;
        }
        if (nin > 3 && in[3] && (ka = nb__onnx_read_ints(r, in[3], "axes", ax, NB_MAX_DIMS)) < 0) return -1;
    }
    int na = ka >= 0 ? ka : rank;
    if (k != 2 * na) FAIL("%d pads for %d axes", k, na);
    int64_t before[NB_MAX_DIMS] = { 0 }, after[NB_MAX_DIMS] = { 0 };
    for (int i = 0; i < na; i++) {
        int a;
        if (axis_of(n, ka >= 0 ? ax[i] : i, rank, &a) < 0) return -1;
        before[a] = p[i];
        after[a] = p[i + na];
    }
    nb_tensor *x = in[0];
    for (int a = 0; a < rank; a++) {
        int64_t b = before[a], e = after[a];
        if (!b && !e) continue;
        int64_t dim = nb_dim(x, a);
        /* crop first */
        int64_t c0 = b < 0 ? -b : 0, c1 = e < 0 ? dim + e : dim;
        if (c1 < c0) FAIL("pads crop more than axis %d holds", a);
        if (b < 0 || e < 0) x = nb_slice(x, a, c0, c1, 1);
        dim = c1 - c0;
        b = b > 0 ? b : 0;
        e = e > 0 ? e : 0;
        if (!b && !e) continue;
        if (!strcmp(mode, "constant")) {
            nb_shape sb = nb_shape_of(x), se = sb;
            sb.dim[a] = b;
            se.dim[a] = e;
            nb_tensor *parts[3] = { nb_full(sb, cval, nb_dtype_of(x)), x, nb_full(se, cval, nb_dtype_of(x)) };
            x = nb_cat(parts, 3, a);
            continue;
        }
        if (dim == 0) FAIL("mode %s pads an empty axis", mode);
        if (!strcmp(mode, "reflect") && dim == 1) FAIL("reflect padding of an axis of size 1");
        int64_t tot = dim + b + e;
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)tot);
        if (!idx) FAIL("out of memory");
        for (int64_t j = 0; j < tot; j++) {
            int64_t q = j - b;
            if (!strcmp(mode, "edge")) q = q < 0 ? 0 : q >= dim ? dim - 1 : q;
            else if (!strcmp(mode, "wrap")) q = ((q % dim) + dim) % dim;
            else { /* reflect, about the edge elements */
                int64_t period = 2 * (dim - 1);
                q = ((q % period) + period) % period;
                if (q >= dim) q = period - q;
            }
            idx[j] = q;
        }
        nb_tensor *it = nb__onnx_const(idx, NB_SHAPE(tot), NB_I64);
        free(idx);
        x = nb_index_select(x, a, it);
    }
    OUT(x == in[0] ? nb_clone(x) : nb_contiguous(x));
}

/* ---------- reductions ---------- */
/* Reduce kinds */
enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP };

/* The product over one axis, by halving (nabla has no product reduction). */
static nb_tensor *prod_axis(nb_tensor *x, int ax) {
    int64_t k = nb_dim(x, ax);
    if (k == 0) {
        nb_shape s = nb_shape_of(x);
        s.dim[ax] = 1;
        return nb_ones(s, nb_dtype_of(x));
    }
    while (k > 1) {
        int64_t h = k / 2;
        nb_tensor *p = nb_mul(nb_slice(x, ax, 0, h, 1), nb_slice(x, ax, h, 2 * h, 1));
        if (k % 2) {
            nb_tensor *parts[2] = { p, nb_slice(x, ax, 2 * h, k, 1) };
            p = nb_cat(parts, 2, ax);
        }
        x = p;
        k = nb_dim(x, ax);
    }
    return x;
}

static int reduce(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int kind, int axes_input_from) {
    nb_tensor *x = in[0];
    nb_dtype d = nb_dtype_of(x);
    nb_shape s = nb_shape_of(x);
    int64_t ax[64];
    bool given;
    int k = axes_of(r, n, in, nin, axes_input_from, ax, &given);
    if (k < 0) return -1;
    bool keep = nb__onnx_attr_i(n, "keepdims", 1) != 0;
    bool noop = nb__onnx_attr_i(n, "noop_with_empty_axes", 0) != 0;
    bool red[NB_MAX_DIMS] = { false };
    if (k == 0) {
        if (noop) {
            out[0] = nb_clone(x);
            return out[0] ? 0 : -1;
        }
        for (int i = 0; i < s.ndim; i++) red[i] = true;
    }
    for (int i = 0; i < k; i++) {
        int a;
        if (axis_of(n, ax[i], s.ndim, &a) < 0) return -1;
        red[a] = true;
    }
    int64_t count = 1;
    bool empty = false;
    for (int i = 0; i < s.ndim; i++)
        if (red[i]) { count *= s.dim[i]; empty |= s.dim[i] == 0; }
    nb_dtype cd = d == NB_BOOL ? NB_U8 : d;
    nb_tensor *y = nb_cast(x, cd);
    if (kind == R_L1) y = nb_abs(y);
    if (kind == R_L2 || kind == R_SUMSQ) y = nb_mul(y, y);
    if (kind == R_LOGSUMEXP) {
        /* stable: max + log(sum(exp(x - max))) over the axes */
        nb_tensor *m = y;
        for (int i = s.ndim - 1; i >= 0; i--)
            if (red[i] && s.dim[i]) m = nb_max(m, i, true);
        if (!empty) m = nb_where(nb_eq(m, m), m, nb_zeros(NB_SHAPE(), cd)); /* NaN max stays out of exp */
        nb_tensor *e = nb_exp(nb_sub(y, empty ? nb_zeros(NB_SHAPE(), cd) : m));
        for (int i = s.ndim - 1; i >= 0; i--)
            if (red[i]) e = nb_sum(e, i, true);
        y = empty ? nb_log(as(e, cd)) : nb_add(nb_log(as(e, cd)), m);
    } else if (empty && (kind == R_MAX || kind == R_MIN)) {
        nb_shape o = s;
        for (int i = 0; i < s.ndim; i++) if (red[i]) o.dim[i] = 1;
        double v = kind == R_MAX ? (is_float(d) ? -INFINITY : d == NB_I64 ? -9223372036854775808.0 : d == NB_I32 ? -2147483648.0
                                    : d == NB_I8 ? -128 : 0)
                                 : (is_float(d) ? INFINITY : d == NB_I64 ? 9223372036854775807.0 : d == NB_I32 ? 2147483647.0
                                    : d == NB_U8 ? 255 : d == NB_I8 ? 127 : 1);
        y = nb_full(o, v, cd);
    } else {
        for (int i = s.ndim - 1; i >= 0; i--) {
            if (!red[i]) continue;
            switch (kind) {
            case R_MAX: y = nb_max(y, i, true); break;
            case R_MIN: y = nb_min(y, i, true); break;
            case R_PROD: y = prod_axis(y, i); break;
            default: y = nb_sum(y, i, true); break;
            }
        }
    }
    if (kind == R_MEAN) y = nb_div(y, nb_full(NB_SHAPE(), (double)count, is_float(d) ? d : NB_F64));
    if (kind == R_L2) y = is_float(d) ? nb_sqrt(as(y, d)) : nb_round(nb_sqrt(nb_cast(y, NB_F64)));
    if (kind == R_LOGSUM) y = nb_log(as(y, d));
    if (!keep) {
        nb_shape o = { 0, { 0 } };
        for (int i = 0; i < s.ndim; i++)
            if (!red[i]) o.dim[o.ndim++] = s.dim[i];
        y = nb_reshape(y, o);
    }
    out[0] = as(y, d);
    return out[0] ? 0 : -1;
}
RUN(reduce_sum) { UNUSED; return reduce(r, n, in, nin, out, R_SUM, 13); }
RUN(reduce_mean) { UNUSED; return reduce(r, n, in, nin, out, R_MEAN, 18); }
RUN(reduce_max) { UNUSED; return reduce(r, n, in, nin, out, R_MAX, 18); }
RUN(reduce_min) { UNUSED; return reduce(r, n, in, nin, out, R_MIN, 18); }
RUN(reduce_prod) { UNUSED; return reduce(r, n, in, nin, out, R_PROD, 18); }
RUN(reduce_l1) { UNUSED; return reduce(r, n, in, nin, out, R_L1, 18); }
RUN(reduce_l2) { UNUSED; return reduce(r, n, in, nin, out, R_L2, 18); }
RUN(reduce_sumsq) { UNUSED; return reduce(r, n, in, nin, out, R_SUMSQ, 18); }
RUN(reduce_logsum) { UNUSED; return reduce(r, n, in, nin, out, R_LOGSUM, 18); }
RUN(reduce_logsumexp) { UNUSED; return reduce(r, n, in, nin, out, R_LOGSUMEXP, 18); }

static int argext(const onnx_node *n, nb_tensor *const *in, nb_tensor **out, bool max) {
    nb_tensor *x = in[0];
    int ax;
    if (axis_of(n, nb__onnx_attr_i(n, "axis", 0), nb_ndim(x), &ax) < 0) return -1;
    bool keep = nb__onnx_attr_i(n, "keepdims", 1) != 0, last = nb__onnx_attr_i(n, "select_last_index", 0) != 0;
    if (nb_dtype_of(x) == NB_BOOL || nb_dtype_of(x) == NB_F16 || nb_dtype_of(x) == NB_BF16) x = nb_cast(x, NB_F32);
    int64_t dim = nb_dim(x, ax);
    if (last) x = slice_axis(x, ax, dim - 1, INT64_MIN / 2, -1);
    nb_tensor *i = max ? nb_argmax(x, ax, keep) : nb_argmin(x, ax, keep);
    if (last) i = nb_sub(nb_full(NB_SHAPE(), (double)(dim - 1), NB_I64), i);
    out[0] = as(i, NB_I64);
    return out[0] ? 0 : -1;
}
RUN(argmax) { UNUSED; return argext(n, in, out, true); }
RUN(argmin) { UNUSED; return argext(n, in, out, false); }

/* Softmax and LogSoftmax: over one axis from 13; before, over the axes from `axis` on (the input
   coerced to 2-D) */
static int softmax(const onnx_node *n, nb_tensor *const *in, nb_tensor **out, bool log) {
    nb_tensor *x = in[0];
    nb_shape s = nb_shape_of(x);
    int ax;
    if (n->version < 13) {
        if (axis_of(n, nb__onnx_attr_i(n, "axis", 1), s.ndim, &ax) < 0) return -1;
        int64_t a = 1, b = 1;
        for (int i = 0; i < s.ndim; i++) *(i < ax ? &a : &b) *= s.dim[i];
        nb_tensor *f = nb_reshape(x, NB_SHAPE(a, b));
        out[0] = nb_reshape(log ? nb_log_softmax(f, 1) : nb_softmax(f, 1), s);
    } else {
        if (axis_of(n, nb__onnx_attr_i(n, "axis", -1), s.ndim, &ax) < 0) return -1;
        out[0] = log ? nb_log_softmax(x, ax) : nb_softmax(x, ax);
    }
    return out[0] ? 0 : -1;
}
RUN(softmax) { UNUSED; return softmax(n, in, out, false); }
RUN(log_softmax) { UNUSED; return softmax(n, in, out, true); }

/* ---------- products and normalisation ---------- */
RUN(matmul) { UNUSED; OUT(as(nb_matmul(in[0], in[1]), nb_dtype_of(in[0]))); }

RUN(gemm) {
    UNUSED;
    nb_tensor *a = in[0], *b = in[1];
    if (nb_ndim(a) != 2 || nb_ndim(b) != 2) FAIL("A and B must be 2-D");
    if (nb__onnx_attr_i(n, "transA", 0)) a = nb_transpose(a, 0, 1);
    if (nb__onnx_attr_i(n, "transB", 0)) b = nb_transpose(b, 0, 1);
    double alpha = nb__onnx_attr_f(n, "alpha", 1), beta = nb__onnx_attr_f(n, "beta", 1);
    nb_dtype d = nb_dtype_of(in[0]);
    nb_tensor *y = nb_matmul(a, b);
    if (alpha != 1) y = nb_mul_scalar(y, alpha);
    if (nin > 2 && in[2] && beta != 0) y = nb_add(y, beta == 1 ? in[2] : nb_mul_scalar(in[2], beta));
    OUT(as(y, d));
}

/* x [N, C, ...] normalised per channel with the given statistics */
static nb_tensor *per_channel(nb_tensor *v, int rank) {
    nb_shape s = { rank, { 0 } };
    for (int i = 0; i < rank; i++) s.dim[i] = 1;
    s.dim[1] = nb_numel(v);
    return nb_reshape(v, s);
}

RUN(batch_norm) {
    UNUSED;
    nb_tensor *x = in[0];
    int rank = nb_ndim(x);
    if (rank < 2) FAIL("the input must have a channel axis");
    double eps = nb__onnx_attr_f(n, "epsilon", 1e-5), mom = nb__onnx_attr_f(n, "momentum", 0.9);
    bool training = nb__onnx_attr_i(n, "training_mode", 0) != 0;
    nb_dtype d = nb_dtype_of(x);
    nb_tensor *mean = per_channel(as(in[3], d), rank), *var = per_channel(as(in[4], d), rank);
    if (training) {
        nb_tensor *bm = x;
        for (int i = rank - 1; i >= 0; i--) if (i != 1) bm = nb_mean(bm, i, true);
        nb_tensor *c = nb_sub(x, bm), *bv = nb_mul(c, c);
        for (int i = rank - 1; i >= 0; i--) if (i != 1) bv = nb_mean(bv, i, true);
        if (nout > 1) out[1] = nb_reshape(nb_add(nb_mul_scalar(mean, mom), nb_mul_scalar(bm, 1 - mom)), nb_shape_of(in[3]));
        if (nout > 2) out[2] = nb_reshape(nb_add(nb_mul_scalar(var, mom), nb_mul_scalar(bv, 1 - mom)), nb_shape_of(in[4]));
        mean = bm;
        var = bv;
    } else if (nout > 1) FAIL("outputs running_mean and running_var are made in training mode only");
    nb_tensor *y = nb_div(nb_sub(x, mean), nb_sqrt(nb_add_scalar(var, eps)));
    y = nb_add(nb_mul(y, per_channel(as(in[1], d), rank)), per_channel(as(in[2], d), rank));
    OUT(as(y, d));
}
static int check_batch_norm(const onnx_node *n, char *msg, size_t size) {
    if (n->version < 7 && nb__onnx_attr_i(n, "is_test", 1) == 0) return snprintf(msg, size, "training mode (is_test 0) before version 7"), -1;
    if (n->version < 9 && nb__onnx_attr(n, "spatial") && nb__onnx_attr_i(n, "spatial", 1) != 1)
        return snprintf(msg, size, "spatial 0 is not supported"), -1;
    return 0;
}

RUN(layer_norm) {
    UNUSED;
    nb_tensor *x = in[0];
    nb_shape s = nb_shape_of(x);
    int ax;
    if (axis_of(n, nb__onnx_attr_i(n, "axis", -1), s.ndim, &ax) < 0) return -1;
    double eps = nb__onnx_attr_f(n, "epsilon", 1e-5);
    nb_dtype d = nb_dtype_of(x);
    /* stash_type 1 (the default): statistics in f32, as ONNX's reference */
    nb_tensor *xf = nb_dtype_of(x) == NB_F64 ? x : nb_cast(x, NB_F32);
    nb_tensor *mean = xf;
    for (int i = s.ndim - 1; i >= ax; i--) mean = nb_mean(mean, i, true);
    nb_tensor *c = nb_sub(xf, mean), *var = nb_mul(c, c);
    for (int i = s.ndim - 1; i >= ax; i--) var = nb_mean(var, i, true);
    nb_tensor *inv = nb_rsqrt(nb_add_scalar(var, eps));
    nb_tensor *y = as(nb_mul(c, inv), d);
    y = nb_mul(y, in[1]);
    if (nin > 2 && in[2]) y = nb_add(y, in[2]);
    if (nout > 1) out[1] = mean;
    if (nout > 2) out[2] = inv;
    OUT(as(y, d));
}

RUN(dropout) {
    UNUSED;
    bool training = false;
    if (n->version >= 12 && nin > 2 && in[2]) {
        bool ok;
        training = nb__onnx_read_scalar(r, in[2], "training_mode", &ok) != 0;
        if (!ok) return -1;
    }
    double ratio = nb__onnx_attr_f(n, "ratio", 0.5);
    if (n->version >= 12 && nin > 1 && in[1]) {
        bool ok;
        ratio = nb__onnx_read_scalar(r, in[1], "ratio", &ok);
        if (!ok) return -1;
    }
    if (training && ratio != 0) FAIL("training-mode dropout draws random numbers; only inference (or ratio 0) runs");
    if (nout > 1) out[1] = nb_ones(nb_shape_of(in[0]), NB_BOOL);
    OUT(nb_clone(in[0]));
}

RUN(global_avg_pool) {
    UNUSED;
    nb_tensor *y = in[0];
    for (int i = nb_ndim(y) - 1; i >= 2; i--) y = nb_mean(y, i, true);
    OUT(as(y, nb_dtype_of(in[0])));
}
RUN(global_max_pool) {
    UNUSED;
    nb_tensor *y = in[0];
    for (int i = nb_ndim(y) - 1; i >= 2; i--) y = nb_max(y, i, true);
    OUT(y);
}

/* ---------- the table ---------- */
#define H OP_HALF_UPCAST
#define N INT32_MAX
const onnx_op nb__onnx_import_ops[] = {
    /* name, history (onnx 1.23), implemented versions, attribute schema, inputs, outputs, run, check, flags */
    { "Abs", "1,6,13", 6, 13, "", 1, 1, 1, op_abs, NULL, H },
    { "Add", "1,6,7,13,14", 7, 14, "", 2, 2, 1, op_add, NULL, H },
    { "And", "1,7", 7, 7, "", 2, 2, 1, op_and, NULL, 0 },
    { "ArgMax", "1,11,12,13", 11, 13, "axis:int,keepdims:int,select_last_index:int@12-", 1, 1, 1, op_argmax, NULL, 0 },
    { "ArgMin", "1,11,12,13", 11, 13, "axis:int,keepdims:int,select_last_index:int@12-", 1, 1, 1, op_argmin, NULL, 0 },
    { "AveragePool", "1,7,10,11,19,22", 7, 22, "auto_pad:string,ceil_mode:int@10-,count_include_pad:int,dilations:ints@19-,kernel_shape:ints!,pads:ints,strides:ints", 1, 1, 1, nb__onnx_avgpool, nb__onnx_check_pool, H },
    { "BatchNormalization", "1,6,7,9,14,15", 6, 15, "epsilon:float,momentum:float,training_mode:int@14-,spatial:int@-8,is_test:int@-6", 5, 5, 3, op_batch_norm, check_batch_norm, H },
    { "Cast", "1,6,9,13,19,21,23,24,25,28", 6, 25, "to:int!,saturate:int@19-,round_mode:string@24-", 1, 1, 1, op_cast, check_cast, 0 },
    { "CastLike", "15,19,21,23,24,25", 15, 25, "saturate:int@19-", 2, 2, 1, op_cast_like, NULL, 0 },
    { "Ceil", "1,6,13", 6, 13, "", 1, 1, 1, op_ceil, NULL, H },
    { "Clip", "1,6,11,12,13", 6, 13, "min:float@-10,max:float@-10", 1, 3, 1, op_clip, NULL, H },
    { "Concat", "1,4,11,13", 4, 13, "axis:int!", 1, N, 1, op_concat, NULL, 0 },
    { "Constant", "1,9,11,12,13,19,21,23,24,25", 9, 25, "value:tensor!@-10,value:tensor@11-,value_float:float@12-,value_floats:floats@12-,value_int:int@12-,value_ints:ints@12-", 0, 0, 1, op_constant, check_constant, 0 },
    { "ConstantOfShape", "9,20,21,23,24,25", 9, 25, "value:tensor", 1, 1, 1, op_constant_of_shape, check_constant_of_shape, 0 },
    { "Conv", "1,11,22", 1, 22, "auto_pad:string,dilations:ints,group:int,kernel_shape:ints,pads:ints,strides:ints", 2, 3, 1, nb__onnx_conv, nb__onnx_check_pool, H },
    { "Cos", "7,22", 7, 22, "", 1, 1, 1, op_cos, NULL, H },
    { "Div", "1,6,7,13,14", 7, 14, "", 2, 2, 1, op_div, NULL, H },
    { "Dropout", "1,6,7,10,12,13,22", 7, 22, "ratio:float@-11,seed:int@12-", 1, 3, 2, op_dropout, NULL, 0 },
    { "Elu", "1,6,22", 6, 22, "alpha:float", 1, 1, 1, op_elu, NULL, H },
    { "Equal", "1,7,11,13,19", 7, 19, "", 2, 2, 1, op_equal, NULL, 0 },
    { "Erf", "9,13", 9, 13, "", 1, 1, 1, op_erf, NULL, H },
    { "Exp", "1,6,13", 6, 13, "", 1, 1, 1, op_exp, NULL, H },
    { "Expand", "8,13", 8, 13, "", 2, 2, 1, op_expand, NULL, 0 },
    { "Flatten", "1,9,11,13,21,23,24,25", 9, 25, "axis:int", 1, 1, 1, op_flatten, NULL, 0 },
    { "Floor", "1,6,13", 6, 13, "", 1, 1, 1, op_floor, NULL, H },
    { "Gather", "1,11,13", 11, 13, "axis:int", 2, 2, 1, op_gather, NULL, 0 },
    { "GatherElements", "11,13", 11, 13, "axis:int", 2, 2, 1, op_gather_elements, NULL, 0 },
    { "GatherND", "11,12,13", 11, 13, "batch_dims:int@12-", 2, 2, 1, op_gather_nd, NULL, 0 },
    { "Gelu", "20", 20, 20, "approximate:string", 1, 1, 1, op_gelu, check_gelu, H },
    { "Gemm", "1,6,7,9,11,13", 7, 13, "alpha:float,beta:float,transA:int,transB:int", 2, 3, 1, op_gemm, NULL, H },
    { "GlobalAveragePool", "1,22", 1, 22, "", 1, 1, 1, op_global_avg_pool, NULL, H },
    { "GlobalMaxPool", "1,22", 1, 22, "", 1, 1, 1, op_global_max_pool, NULL, H },
    { "Greater", "1,7,9,13", 7, 13, "", 2, 2, 1, op_greater, NULL, 0 },
    { "GreaterOrEqual", "12,16", 12, 16, "", 2, 2, 1, op_greater_eq, NULL, 0 },
    { "HardSigmoid", "1,6,22", 6, 22, "alpha:float,beta:float", 1, 1, 1, op_hard_sigmoid, NULL, H },
    { "HardSwish", "14,22", 14, 22, "", 1, 1, 1, op_hard_swish, NULL, H },
    { "Identity", "1,13,14,16,19,21,23,24,25", 1, 25, "", 1, 1, 1, op_identity, NULL, 0 },
    { "LayerNormalization", "17", 17, 17, "axis:int,epsilon:float,stash_type:int", 2, 3, 3, op_layer_norm, NULL, H },
    { "LeakyRelu", "1,6,16", 6, 16, "alpha:float", 1, 1, 1, op_leaky_relu, NULL, H },
    { "Less", "1,7,9,13", 7, 13, "", 2, 2, 1, op_less, NULL, 0 },
    { "LessOrEqual", "12,16", 12, 16, "", 2, 2, 1, op_less_eq, NULL, 0 },
    { "Log", "1,6,13", 6, 13, "", 1, 1, 1, op_log, NULL, H },
    { "LogSoftmax", "1,11,13", 1, 13, "axis:int", 1, 1, 1, op_log_softmax, NULL, H },
    { "MatMul", "1,9,13", 9, 13, "", 2, 2, 1, op_matmul, NULL, H },
    { "Max", "1,6,8,12,13", 8, 13, "", 1, N, 1, op_max, NULL, H },
    { "MaxPool", "1,8,10,11,12,22", 8, 22, "auto_pad:string,ceil_mode:int@10-,dilations:ints@10-,kernel_shape:ints!,pads:ints,storage_order:int,strides:ints", 1, 1, 2, nb__onnx_maxpool, nb__onnx_check_pool, H },
    { "Mean", "1,6,8,13", 8, 13, "", 1, N, 1, op_mean, NULL, H },
    { "Min", "1,6,8,12,13", 8, 13, "", 1, N, 1, op_min, NULL, H },
    { "Mod", "10,13,28", 10, 28, "fmod:int", 2, 2, 1, op_mod, NULL, 0 },
    { "Mul", "1,6,7,13,14", 7, 14, "", 2, 2, 1, op_mul, NULL, H },
    { "Neg", "1,6,13", 6, 13, "", 1, 1, 1, op_neg, NULL, H },
    { "Not", "1", 1, 1, "", 1, 1, 1, op_not, NULL, 0 },
    { "Or", "1,7", 7, 7, "", 2, 2, 1, op_or, NULL, 0 },
    { "Pad", "1,2,11,13,18,19,21,23,24,25", 2, 25, "mode:string,pads:ints!@-10,value:float@-10", 1, 4, 1, op_pad, check_pad, 0 },
    { "Pow", "1,7,12,13,15", 7, 15, "", 2, 2, 1, op_pow, NULL, H },
    { "Range", "11,27", 11, 11, "", 3, 3, 1, op_range, NULL, 0 },
    { "Reciprocal", "1,6,13", 6, 13, "", 1, 1, 1, op_reciprocal, NULL, H },
    { "ReduceL1", "1,11,13,18", 11, 18, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_l1, NULL, H },
    { "ReduceL2", "1,11,13,18", 11, 18, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_l2, NULL, H },
    { "ReduceLogSum", "1,11,13,18", 11, 18, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_logsum, NULL, H },
    { "ReduceLogSumExp", "1,11,13,18", 11, 18, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_logsumexp, NULL, H },
    { "ReduceMax", "1,11,12,13,18,20", 11, 20, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_max, NULL, H },
    { "ReduceMean", "1,11,13,18", 11, 18, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_mean, NULL, H },
    { "ReduceMin", "1,11,12,13,18,20", 11, 20, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_min, NULL, H },
    { "ReduceProd", "1,11,13,18", 11, 18, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_prod, NULL, H },
    { "ReduceSum", "1,11,13", 11, 13, "axes:ints@-12,keepdims:int,noop_with_empty_axes:int@13-", 1, 2, 1, op_reduce_sum, NULL, H },
    { "ReduceSumSquare", "1,11,13,18", 11, 18, "axes:ints@-17,keepdims:int,noop_with_empty_axes:int@18-", 1, 2, 1, op_reduce_sumsq, NULL, H },
    { "Relu", "1,6,13,14", 6, 14, "", 1, 1, 1, op_relu, NULL, H },
    { "Reshape", "1,5,13,14,19,21,23,24,25", 5, 25, "allowzero:int@14-", 2, 2, 1, op_reshape, NULL, 0 },
    { "Round", "11,22", 11, 22, "", 1, 1, 1, op_round, NULL, H },
    { "ScatterND", "11,13,16,18", 11, 18, "reduction:string@16-", 3, 3, 1, op_scatter_nd, check_scatter_nd, 0 },
    { "Shape", "1,13,15,19,21,23,24,25", 1, 25, "start:int@15-,end:int@15-", 1, 1, 1, op_shape, NULL, OP_SHAPE_ONLY },
    { "Sigmoid", "1,6,13", 6, 13, "", 1, 1, 1, op_sigmoid, NULL, H },
    { "Sign", "9,13", 9, 13, "", 1, 1, 1, op_sign, NULL, H },
    { "Sin", "7,22", 7, 22, "", 1, 1, 1, op_sin, NULL, H },
    { "Size", "1,13,19,21,23,24,25", 1, 25, "", 1, 1, 1, op_size, NULL, OP_SHAPE_ONLY },
    { "Slice", "1,10,11,13", 1, 13, "starts:ints!@-9,ends:ints!@-9,axes:ints@-9", 1, 5, 1, op_slice, NULL, 0 },
    { "Softmax", "1,11,13", 1, 13, "axis:int", 1, 1, 1, op_softmax, NULL, H },
    { "Softplus", "1,22", 1, 22, "", 1, 1, 1, op_softplus, NULL, H },
    { "Split", "1,2,11,13,18", 2, 18, "axis:int,split:ints@-12,num_outputs:int@18-", 1, 2, 64, op_split, NULL, 0 },
    { "Sqrt", "1,6,13", 6, 13, "", 1, 1, 1, op_sqrt, NULL, H },
    { "Squeeze", "1,11,13,21,23,24,25", 1, 25, "axes:ints@-12", 1, 2, 1, op_squeeze, NULL, 0 },
    { "Sub", "1,6,7,13,14", 7, 14, "", 2, 2, 1, op_sub, NULL, H },
    { "Sum", "1,6,8,13", 8, 13, "", 1, N, 1, op_sum, NULL, H },
    { "Tanh", "1,6,13", 6, 13, "", 1, 1, 1, op_tanh, NULL, H },
    { "Tile", "1,6,13", 6, 13, "", 2, 2, 1, op_tile, NULL, 0 },
    { "Transpose", "1,13,21,23,24,25", 1, 25, "perm:ints", 1, 1, 1, op_transpose, NULL, 0 },
    { "Unsqueeze", "1,11,13,21,23,24,25", 1, 25, "axes:ints!@-12", 1, 2, 1, op_unsqueeze, NULL, 0 },
    { "Where", "9,16", 9, 16, "", 3, 3, 1, op_where, NULL, 0 },
    { "Xor", "1,7", 7, 7, "", 2, 2, 1, op_xor, NULL, 0 },
    { NULL, NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL, 0 },
};
