/* CPU kernels for elementwise ops, casts and copies, and creation (fill, arange, random). */
#include "iter.h"
#include "../formulas.h"
#include <math.h>
#include <omp.h>
#include <string.h>

/* The generic kernels also expand for unsigned u8, where "x < 0" is always false, and for i8. */
#pragma GCC diagnostic ignored "-Wtype-limits"

/* ---------- binary arithmetic: the formulas are formulas.h's ---------- */
/* One inner function: out type TO, input type TI. Fast paths for dense and scalar operands. */
#define BINARY_FN(NAME, TI, TO, EXPR)                                                              \
    NB_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) {                   \
        (void)ctx;                                                                               \
        TO *o = (TO *)p[0];                                                                      \
        const TI *a = (const TI *)p[1], *b = (const TI *)p[2];                                   \
        if (s[0] == sizeof(TO) && s[1] == sizeof(TI) && s[2] == sizeof(TI)) {                    \
            for (int64_t i = 0; i < n; i++) o[i] = (TO)EXPR(a[i], b[i]);                         \
        } else if (s[0] == sizeof(TO) && s[1] == sizeof(TI) && s[2] == 0) {                      \
            const TI y = *b;                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = (TO)EXPR(a[i], y);                            \
        } else if (s[0] == sizeof(TO) && s[1] == 0 && s[2] == sizeof(TI)) {                      \
            const TI x = *a;                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = (TO)EXPR(x, b[i]);                            \
        } else {                                                                                 \
            char *po = p[0];                                                                     \
            const char *pa = p[1], *pb = p[2];                                                   \
            for (int64_t i = 0; i < n; i++, po += s[0], pa += s[1], pb += s[2])                  \
                *(TO *)po = (TO)EXPR(*(const TI *)pa, *(const TI *)pb);                          \
        }                                                                                        \
    }

#define ARITH_FNS(OPN, EXPR)                                \
    BINARY_FN(OPN##_f32, float, float, EXPR)                \
    BINARY_FN(OPN##_f64, double, double, EXPR)              \
    BINARY_FN(OPN##_i64, int64_t, int64_t, EXPR)            \
    BINARY_FN(OPN##_i32, int32_t, int32_t, EXPR)            \
    BINARY_FN(OPN##_u8, uint8_t, uint8_t, EXPR)             \
    BINARY_FN(OPN##_i8, int8_t, int8_t, EXPR)
#define COMPARE_FNS(OPN, EXPR)                              \
    BINARY_FN(OPN##_f32, float, uint8_t, EXPR)              \
    BINARY_FN(OPN##_f64, double, uint8_t, EXPR)             \
    BINARY_FN(OPN##_i64, int64_t, uint8_t, EXPR)            \
    BINARY_FN(OPN##_i32, int32_t, uint8_t, EXPR)            \
    BINARY_FN(OPN##_u8, uint8_t, uint8_t, EXPR)             \
    BINARY_FN(OPN##_i8, int8_t, uint8_t, EXPR)              \
    BINARY_FN(OPN##_b, uint8_t, uint8_t, EXPR)

ARITH_FNS(add, nbf_add)
ARITH_FNS(sub, nbf_sub)
ARITH_FNS(mul, nbf_mul)
ARITH_FNS(maximum, nbf_maximum)
ARITH_FNS(minimum, nbf_minimum)
BINARY_FN(div_f32, float, float, nbf_div)
BINARY_FN(div_f64, double, double, nbf_div)
BINARY_FN(pow_f32, float, float, nbf_pow)
BINARY_FN(pow_f64, double, double, nbf_pow)
BINARY_FN(relu_backward_f32, float, float, nbf_relu_backward)
BINARY_FN(relu_backward_f64, double, double, nbf_relu_backward)
/* bool with bool, as torch: add is a logical or, mul a logical and (sub is refused by its dtypes) */
#define OP_OR(x, y) ((x) | (y))
#define OP_AND(x, y) ((x) & (y))
BINARY_FN(add_b, uint8_t, uint8_t, OP_OR)
BINARY_FN(mul_b, uint8_t, uint8_t, OP_AND)
COMPARE_FNS(eq, nbf_eq)
COMPARE_FNS(lt, nbf_lt)
COMPARE_FNS(gt, nbf_gt)
COMPARE_FNS(ne, nbf_ne)
COMPARE_FNS(le, nbf_le)
COMPARE_FNS(ge, nbf_ge)

typedef struct { nb_inner_fn f32, f64, i64, i32, u8, b, i8; } typed_fns;

static nb_inner_fn pick(const typed_fns *f, nb_dtype d) {
    switch (d) {
    case NB_F32: return f->f32;
    case NB_F64: return f->f64;
    case NB_I64: return f->i64;
    case NB_I32: return f->i32;
    case NB_U8: return f->u8;
    case NB_BOOL: return f->b;
    case NB_I8: return f->i8;
    default: return NULL;
    }
}

static int run_typed(const char *fn, const typed_fns *f, nb_dtype d, nb_tensor *out, nb_tensor *const *in, int nin,
                     const void *ctx) {
    nb_inner_fn inner = pick(f, d);
    if (!inner) {
        nb__error("nb_%s: no cpu kernel for dtype %s", fn, nb_dtype_name(d));
        return -1;
    }
    /* small dense operands of one shape: one inner call, no iteration set-up */
    bool dense = out->numel < NB_PARALLEL_GRAIN && nb_is_contiguous(out);
    for (int k = 0; dense && k < nin; k++) dense = in[k]->numel == out->numel && nb_is_contiguous(in[k]);
    if (dense) {
        char *p[NB_ITER_MAX_OPS] = { nb__data(out) };
        int64_t st[NB_ITER_MAX_OPS] = { (int64_t)nb__esize(out->dtype) };
        for (int k = 0; k < nin; k++) {
            p[k + 1] = nb__data(in[k]);
            st[k + 1] = (int64_t)nb__esize(in[k]->dtype);
        }
        inner(p, st, out->numel, ctx);
        return 0;
    }
    nb_iter it;
    nb__iter_init(&it, out, in, nin);
    nb__iter_run(&it, inner, ctx);
    return 0;
}

#define ARITH_KERNEL(OPN)                                                                           \
    int nb__cpu_##OPN(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {         \
        (void)args;                                                                                \
        static const typed_fns f = { OPN##_f32, OPN##_f64, OPN##_i64, OPN##_i32, OPN##_u8, NULL, OPN##_i8 }; \
        return run_typed(#OPN, &f, in[0]->dtype, out, in, nin, NULL);                              \
    }
#define FLOAT_BINARY_KERNEL(OPN)                                                              \
    int nb__cpu_##OPN(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {   \
        (void)args;                                                                          \
        static const typed_fns f = { OPN##_f32, OPN##_f64, NULL, NULL, NULL, NULL, NULL };         \
        return run_typed(#OPN, &f, in[0]->dtype, out, in, nin, NULL);                        \
    }
#define COMPARE_KERNEL(OPN)                                                                           \
    int nb__cpu_##OPN(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {           \
        (void)args;                                                                                  \
        static const typed_fns f = { OPN##_f32, OPN##_f64, OPN##_i64, OPN##_i32, OPN##_u8, OPN##_b, OPN##_i8 }; \
        return run_typed(#OPN, &f, in[0]->dtype, out, in, nin, NULL);                                \
    }

#define ARITH_BOOL_KERNEL(OPN)                                                                         \
    int nb__cpu_##OPN(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {            \
        (void)args;                                                                                   \
        static const typed_fns f = { OPN##_f32, OPN##_f64, OPN##_i64, OPN##_i32, OPN##_u8, OPN##_b, OPN##_i8 }; \
        return run_typed(#OPN, &f, in[0]->dtype, out, in, nin, NULL);                                 \
    }

ARITH_BOOL_KERNEL(add)
ARITH_KERNEL(sub)
ARITH_BOOL_KERNEL(mul)
ARITH_KERNEL(maximum)
ARITH_KERNEL(minimum)
FLOAT_BINARY_KERNEL(div)
FLOAT_BINARY_KERNEL(pow)
FLOAT_BINARY_KERNEL(relu_backward)
COMPARE_KERNEL(eq)
COMPARE_KERNEL(lt)
COMPARE_KERNEL(gt)
COMPARE_KERNEL(ne)
COMPARE_KERNEL(le)
COMPARE_KERNEL(ge)

/* ---------- where ---------- */
#define WHERE_FN(NAME, T)                                                                        \
    NB_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) {                 \
        (void)ctx;                                                                             \
        char *po = p[0];                                                                       \
        const char *pc = p[1], *pa = p[2], *pb = p[3];                                         \
        for (int64_t i = 0; i < n; i++, po += s[0], pc += s[1], pa += s[2], pb += s[3])        \
            *(T *)po = nbf_where(*(const uint8_t *)pc, *(const T *)pa, *(const T *)pb);        \
    }
WHERE_FN(where_f32, float)
WHERE_FN(where_f64, double)
WHERE_FN(where_i64, int64_t)
WHERE_FN(where_i32, int32_t)
WHERE_FN(where_u8, uint8_t)

int nb__cpu_where(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)args;
    static const typed_fns f = { where_f32, where_f64, where_i64, where_i32, where_u8, where_u8, where_u8 }; /* bytes */
    return run_typed("where", &f, out->dtype, out, in, nin, NULL);
}

/* ---------- unary: the formulas are formulas.h's ---------- */
/* Unary inner function; F0 and F1 are the op's scalar arguments, elem_t its type (clamp bounds, scalar operand).
   ATTR: NB_WIDE_CLONES for the kmath.h functions, whose double-precision polynomials run twice
   as fast in AVX-512 lanes where the machine has them. */
#define UNARY_FN_ATTR(NAME, T, EXPR, ATTR)                                            \
    ATTR static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) { \
        const nb_op_args *args_ = ctx;                                              \
        const double F0 = args_->f[0], F1 = args_->f[1];                            \
        typedef T elem_t;                                                           \
        (void)sizeof(elem_t);                                                       \
        (void)F0; (void)F1;                                                         \
        if (s[0] == sizeof(T) && s[1] == sizeof(T)) {                               \
            T *o = (T *)p[0];                                                       \
            const T *a = (const T *)p[1];                                           \
            for (int64_t i = 0; i < n; i++) { const T x = a[i]; o[i] = (T)(EXPR); } \
        } else {                                                                    \
            char *po = p[0];                                                        \
            const char *pa = p[1];                                                  \
            for (int64_t i = 0; i < n; i++, po += s[0], pa += s[1]) {               \
                const T x = *(const T *)pa;                                         \
                *(T *)po = (T)(EXPR);                                               \
            }                                                                       \
        }                                                                           \
    }

#define UNARY_FN(NAME, T, EXPR) UNARY_FN_ATTR(NAME, T, EXPR, NB_KERNEL_CLONES)

#define UNARY_NUM(OPN, EXPR)                                                                           \
    UNARY_FN(OPN##_f32, float, EXPR)                                                                   \
    UNARY_FN(OPN##_f64, double, EXPR)                                                                  \
    UNARY_FN(OPN##_i64, int64_t, EXPR)                                                                 \
    UNARY_FN(OPN##_i32, int32_t, EXPR)                                                                 \
    UNARY_FN(OPN##_u8, uint8_t, EXPR)                                                                  \
    UNARY_FN(OPN##_i8, int8_t, EXPR)                                                                   \
    int nb__cpu_##OPN(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {            \
        static const typed_fns f = { OPN##_f32, OPN##_f64, OPN##_i64, OPN##_i32, OPN##_u8, NULL, OPN##_i8 }; \
        return run_typed(#OPN, &f, in[0]->dtype, out, in, nin, args);                                 \
    }
#define UNARY_FLOAT(OPN, EXPR)                                                                  \
    UNARY_FN(OPN##_f32, float, EXPR)                                                             \
    UNARY_FN(OPN##_f64, double, EXPR)                                                            \
    int nb__cpu_##OPN(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {      \
        static const typed_fns f = { OPN##_f32, OPN##_f64, NULL, NULL, NULL, NULL, NULL };            \
        return run_typed(#OPN, &f, in[0]->dtype, out, in, nin, args);                           \
    }

#define UNARY_FLOAT_WIDE(OPN, EXPR)                                                             \
    UNARY_FN_ATTR(OPN##_f32, float, EXPR, NB_WIDE_CLONES)                                        \
    UNARY_FN(OPN##_f64, double, EXPR)                                                            \
    int nb__cpu_##OPN(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {      \
        static const typed_fns f = { OPN##_f32, OPN##_f64, NULL, NULL, NULL, NULL, NULL };            \
        return run_typed(#OPN, &f, in[0]->dtype, out, in, nin, args);                           \
    }

UNARY_NUM(neg, nbf_neg(x, F0, F1))
UNARY_NUM(abs, nbf_abs(x, F0, F1))
UNARY_NUM(sign, nbf_sign(x, F0, F1))
UNARY_NUM(relu, nbf_relu(x, F0, F1))
UNARY_NUM(add_scalar, nbf_add_scalar(x, F0, F1))
UNARY_NUM(mul_scalar, nbf_mul_scalar(x, F0, F1))
UNARY_NUM(clamp, nbf_clamp(x, F0, F1))
UNARY_FLOAT(pow_scalar, nbf_pow_scalar(x, F0, F1))
UNARY_FLOAT_WIDE(exp, nbf_exp(x, F0, F1))
UNARY_FLOAT(log, nbf_log(x, F0, F1))
UNARY_FLOAT(sqrt, nbf_sqrt(x, F0, F1))
UNARY_FLOAT(tanh, nbf_tanh(x, F0, F1))
UNARY_FLOAT_WIDE(sigmoid, nbf_sigmoid(x, F0, F1))
UNARY_FLOAT_WIDE(gelu, nbf_gelu(x, F0, F1))
UNARY_FLOAT_WIDE(erf, nbf_erf(x, F0, F1))
UNARY_FLOAT(sin, nbf_sin(x, F0, F1))
UNARY_FLOAT(cos, nbf_cos(x, F0, F1))
UNARY_FLOAT(log1p, nbf_log1p(x, F0, F1))
UNARY_FLOAT(expm1, nbf_expm1(x, F0, F1))
UNARY_FLOAT(reciprocal, nbf_reciprocal(x, F0, F1))
UNARY_FLOAT(rsqrt, nbf_rsqrt(x, F0, F1))
UNARY_NUM(floor, nbf_floor(x, F0, F1))
UNARY_NUM(ceil, nbf_ceil(x, F0, F1))
UNARY_NUM(round, nbf_round(x, F0, F1))
UNARY_NUM(trunc, nbf_trunc(x, F0, F1))

/* ---------- casts and copies ---------- */
static inline double ld_f32(const char *p) { return *(const float *)p; }
static inline double ld_f64(const char *p) { return *(const double *)p; }
static inline double ld_f16(const char *p) { return nb__f16_to_f32(*(const uint16_t *)p); }
static inline double ld_bf16(const char *p) { return nb__bf16_to_f32(*(const uint16_t *)p); }
static inline double ld_i64(const char *p) { return (double)*(const int64_t *)p; }
static inline double ld_i32(const char *p) { return *(const int32_t *)p; }
static inline double ld_u8(const char *p) { return *(const uint8_t *)p; }
static inline double ld_b(const char *p) { return *(const uint8_t *)p != 0; }
static inline double ld_i8(const char *p) { return *(const int8_t *)p; }
static inline void st_f32(char *p, double v) { *(float *)p = (float)v; }
static inline void st_f64(char *p, double v) { *(double *)p = v; }
static inline void st_f16(char *p, double v) { *(uint16_t *)p = nb__f32_to_f16((float)v); }
static inline void st_bf16(char *p, double v) { *(uint16_t *)p = nb__f32_to_bf16((float)v); }
/* float to integer conversion truncates toward zero, as torch does; out-of-range is clamped */
static inline void st_i64(char *p, double v) { *(int64_t *)p = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v; }
static inline void st_i32(char *p, double v) { *(int32_t *)p = (int32_t)(int64_t)(v != v ? 0 : v > 2147483647.0 ? 2147483647.0 : v < -2147483648.0 ? -2147483648.0 : v); }
static inline void st_u8(char *p, double v) { *(uint8_t *)p = (uint8_t)(int64_t)(v != v ? 0 : v > 1e18 ? 0 : v < -1e18 ? 0 : v); }
static inline void st_b(char *p, double v) { *(uint8_t *)p = v != 0; }
/* as torch's cpu cast: through int32, wrapping (see nb__to_i8) */
static inline void st_i8(char *p, double v) { *(int8_t *)p = nb__to_i8(v); }

/* i64 to i64 and similar go through double only where exact; integer pairs copy directly */
#define CAST_FN(S, D)                                                                     \
    NB_KERNEL_CLONES static void cast_##S##_##D(char **p, const int64_t *s, int64_t n, const void *ctx) { \
        (void)ctx;                                                                       \
        char *po = p[0];                                                                 \
        const char *pi = p[1];                                                           \
        for (int64_t i = 0; i < n; i++, po += s[0], pi += s[1]) st_##D(po, ld_##S(pi));  \
    }
#define CAST_ROW(S) CAST_FN(S, f32) CAST_FN(S, f64) CAST_FN(S, f16) CAST_FN(S, bf16) \
    CAST_FN(S, i64) CAST_FN(S, i32) CAST_FN(S, u8) CAST_FN(S, b) CAST_FN(S, i8)
CAST_ROW(f32)
CAST_ROW(f64)
CAST_ROW(f16)
CAST_ROW(bf16)
CAST_ROW(i64)
CAST_ROW(i32)
CAST_ROW(u8)
CAST_ROW(b)
CAST_ROW(i8)

#define CAST_ENTRY(S) { cast_##S##_f32, cast_##S##_f64, cast_##S##_f16, cast_##S##_bf16, \
                        cast_##S##_i64, cast_##S##_i32, cast_##S##_u8, cast_##S##_b, cast_##S##_i8 }
/* [source][destination], in nb_dtype's order */
static const nb_inner_fn cast_table[NB_DTYPE_COUNT][NB_DTYPE_COUNT] = {
    CAST_ENTRY(f32), CAST_ENTRY(f64), CAST_ENTRY(f16), CAST_ENTRY(bf16),
    CAST_ENTRY(i64), CAST_ENTRY(i32), CAST_ENTRY(u8), CAST_ENTRY(b), CAST_ENTRY(i8),
};

/* Exact integer conversions that must not pass through a double (i64 beyond 2^53). */
static void cast_i64_i32_exact(char **p, const int64_t *s, int64_t n, const void *ctx) {
    (void)ctx;
    char *po = p[0];
    const char *pi = p[1];
    for (int64_t i = 0; i < n; i++, po += s[0], pi += s[1]) *(int32_t *)po = (int32_t)*(const int64_t *)pi;
}
/* i64 to i8 keeps the low byte, as C's conversion does (a double would round beyond 2^53) */
static void cast_i64_i8_exact(char **p, const int64_t *s, int64_t n, const void *ctx) {
    (void)ctx;
    char *po = p[0];
    const char *pi = p[1];
    for (int64_t i = 0; i < n; i++, po += s[0], pi += s[1]) *(int8_t *)po = (int8_t)(uint8_t)*(const int64_t *)pi;
}

#define COPY_FN(NAME, T)                                                                     \
    NB_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) {              \
        (void)ctx;                                                                          \
        if (s[0] == sizeof(T) && s[1] == sizeof(T)) { memcpy(p[0], p[1], (size_t)n * sizeof(T)); return; } \
        char *po = p[0];                                                                    \
        const char *pi = p[1];                                                              \
        for (int64_t i = 0; i < n; i++, po += s[0], pi += s[1]) *(T *)po = *(const T *)pi;  \
    }
COPY_FN(copy1, uint8_t)
COPY_FN(copy2, uint16_t)
COPY_FN(copy4, uint32_t)
COPY_FN(copy8, uint64_t)

nb_inner_fn nb__cpu_copy_fn(size_t esize) {
    switch (esize) {
    case 1: return copy1;
    case 2: return copy2;
    case 4: return copy4;
    default: return copy8;
    }
}

/* ---------- autocast's operands ---------- */
/* f32 to bf16, f32 to the nearest bf16 kept in f32, and bf16 to f32, each one formula
   (nb__f32_to_bf16, nb__bf16_to_f32) without the casts' detour through double: they run on the
   operands of every product under autocast. A dense run is a plain loop, which vectorises. */
#define CONVERT_RUN(NAME, TO, FROM, EXPR)                                                        \
    NB_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx) { \
        (void)ctx;                                                                             \
        if (s[0] == (int64_t)sizeof(TO) && s[1] == (int64_t)sizeof(FROM)) {                      \
            TO *o = (TO *)p[0];                                                                \
            const FROM *in = (const FROM *)p[1];                                               \
            for (int64_t i = 0; i < n; i++) {                                                  \
                FROM x = in[i];                                                                \
                o[i] = EXPR;                                                                   \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        char *po = p[0];                                                                       \
        const char *pi = p[1];                                                                 \
        for (int64_t i = 0; i < n; i++, po += s[0], pi += s[1]) {                              \
            FROM x = *(const FROM *)pi;                                                        \
            *(TO *)po = EXPR;                                                                  \
        }                                                                                      \
    }
CONVERT_RUN(f32_to_bf16_run, uint16_t, float, nb__f32_to_bf16(x))
CONVERT_RUN(round_bf16_run, float, float, nb__bf16_to_f32(nb__f32_to_bf16(x)))
CONVERT_RUN(bf16_to_f32_run, float, uint16_t, nb__bf16_to_f32(x))
#undef CONVERT_RUN

/* The inner function converting s to d: a copy, an exact integer narrowing, autocast's f32/bf16
   casts (without the detour through double), or the table's. */
static nb_inner_fn cast_fn(nb_dtype s, nb_dtype d) {
    if (s == d) return nb__cpu_copy_fn(nb_dtype_size(s));
    if (s == NB_I64 && d == NB_I32) return cast_i64_i32_exact;
    if (s == NB_I64 && d == NB_I8) return cast_i64_i8_exact;
    if (s == NB_F32 && d == NB_BF16) return f32_to_bf16_run;
    if (s == NB_BF16 && d == NB_F32) return bf16_to_f32_run;
    return cast_table[s][d];
}

int nb__cpu_cast(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)args;
    nb_inner_fn fn = cast_fn(in[0]->dtype, out->dtype);
    nb_iter it;
    nb__iter_init(&it, out, in, nin);
    nb__iter_run(&it, fn, NULL);
    return 0;
}

int nb__cpu_copy(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)args;
    nb_iter it;
    nb__iter_init(&it, out, in, nin);
    nb__iter_run(&it, nb__cpu_copy_fn(nb_dtype_size(out->dtype)), NULL);
    return 0;
}

int nb__cpu_assign(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    nb_tensor *src = in[1], *tmp = NULL;
    if (src->storage == out->storage) { /* the source may overlap the destination: copy it first */
        if (!(tmp = nb__tensor_new(src->shape, src->dtype))) return -1;
        nb__cpu_copy(tmp, &src, 1, NULL);
        src = tmp;
    }
    atomic_fetch_add_explicit(&out->storage->version, 1, memory_order_relaxed);
    nb_iter it;
    nb__iter_init(&it, out, &src, 1);
    nb__iter_run(&it, cast_fn(src->dtype, out->dtype), NULL);
    nb_release(tmp);
    return 0;
}

/* ---------- creation ---------- */
int nb__cpu_empty(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)out; (void)in; (void)nin; (void)args;
    return 0;
}

int nb__cpu_full(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin;
    void *p = nb__data(out);
    int64_t n = out->numel;
    double v = args->f[0];
    switch (out->dtype) {
    case NB_F32: { float x = (float)v, *o = p; for (int64_t i = 0; i < n; i++) o[i] = x; break; }
    case NB_F64: { double *o = p; for (int64_t i = 0; i < n; i++) o[i] = v; break; }
    case NB_I64: { int64_t x = nbf_sat_i64(v), *o = p; for (int64_t i = 0; i < n; i++) o[i] = x; break; }
    case NB_I32: { int32_t x = (int32_t)(uint32_t)(uint64_t)nbf_sat_i64(v), *o = p; for (int64_t i = 0; i < n; i++) o[i] = x; break; }
    case NB_I8: memset(p, (int)(uint8_t)(uint64_t)nbf_sat_i64(v), (size_t)n); break; /* wraps, as an integer scalar */
    default:
        if (n > 0) {
            nb__store(p, out->dtype, 0, v);
            size_t es = nb_dtype_size(out->dtype);
            for (int64_t i = 1; i < n; i++) memcpy((char *)p + (size_t)i * es, p, es);
        }
    }
    return 0;
}

int nb__cpu_arange(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin;
    void *p = nb__data(out);
    for (int64_t i = 0; i < out->numel; i++) nb__store(p, out->dtype, i, args->f[0] + (double)i * args->f[1]);
    return 0;
}

/* Uniform in [0, 1) from 24 (f32) or 53 (f64) random bits. */
static inline float u24(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
static inline double u53(uint32_t hi, uint32_t lo) {
    return (double)(((uint64_t)(hi >> 5) << 26) | (lo >> 6)) * (1.0 / 9007199254740992.0);
}

typedef struct {
    uint64_t seed, offset;
    int64_t n;
    char *p;
    bool f64, normal;
} rand_job;

/* Counter blocks [lo, hi): uniform (4 f32 or 2 f64 values a block) or normal (Box-Muller: a
   pair a block). */
static void rand_range(void *c, int64_t lo, int64_t hi, int slot) {
    (void)slot;
    const rand_job *j = c;
    int64_t n = j->n;
    for (int64_t b = lo; b < hi; b++) {
        uint32_t w[4];
        nb__philox(j->seed, j->offset + (uint64_t)b, w);
        if (j->normal) {
            double u1 = u53(w[0], w[1]), u2 = u53(w[2], w[3]);
            double r = sqrt(-2.0 * log(1.0 - u1)), th = 6.283185307179586 * u2;
            double z0 = r * cos(th), z1 = r * sin(th);
            int64_t i = b * 2;
            if (j->f64) {
                ((double *)j->p)[i] = z0;
                if (i + 1 < n) ((double *)j->p)[i + 1] = z1;
            } else {
                ((float *)j->p)[i] = (float)z0;
                if (i + 1 < n) ((float *)j->p)[i + 1] = (float)z1;
            }
        } else if (j->f64) {
            for (int k = 0; k < 2 && b * 2 + k < n; k++) ((double *)j->p)[b * 2 + k] = u53(w[2 * k], w[2 * k + 1]);
        } else {
            for (int k = 0; k < 4 && b * 4 + k < n; k++) ((float *)j->p)[b * 4 + k] = u24(w[k]);
        }
    }
}

/* Element i uses counter offset + i/4 (f32) or offset + i/2 (f64): values depend on the seed
   and the element's position only, never on the thread that computes them. */
int nb__cpu_rand(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin; (void)args;
    int64_t n = out->numel;
    bool f64 = out->dtype == NB_F64;
    uint64_t seed, offset;
    nb__rng_reserve((uint64_t)(f64 ? 2 * n : n), &seed, &offset);
    int64_t blocks = f64 ? (n + 1) / 2 : (n + 3) / 4;
    int threads = n >= NB_PARALLEL_GRAIN ? nb__threads() : 1;
    rand_job j = { seed, offset, n, nb__data(out), f64, false };
    nb__parallel_for(threads, blocks, rand_range, &j);
    return 0;
}

int nb__cpu_randn(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin; (void)args;
    int64_t n = out->numel;
    bool f64 = out->dtype == NB_F64;
    uint64_t seed, offset;
    /* Box-Muller: each counter gives two normals (f32: from 4 words) or one pair (f64) */
    int64_t blocks = (n + 1) / 2;
    nb__rng_reserve((uint64_t)blocks * 4, &seed, &offset);
    int threads = n >= NB_PARALLEL_GRAIN ? nb__threads() : 1;
    rand_job j = { seed, offset, n, nb__data(out), f64, true };
    nb__parallel_for(threads, blocks, rand_range, &j);
    return 0;
}

/* A new tensor of dtype holding fn applied to t: dense, or (a transposed view of a dense stack
   of matrices) transposed the same way, so that the conversion reads t in its storage's order. */
static nb_tensor *convert(nb_tensor *t, nb_dtype dtype, nb_inner_fn fn) {
    int n = t->shape.ndim;
    nb_shape s = t->shape;
    int64_t st[NB_MAX_DIMS];
    memcpy(st, t->stride, sizeof(int64_t) * (size_t)n);
    bool swap = false;
    if (n >= 2 && !nb_is_contiguous(t)) { /* t's last two axes swapped: dense? */
        s.dim[n - 1] = t->shape.dim[n - 2], s.dim[n - 2] = t->shape.dim[n - 1];
        st[n - 1] = t->stride[n - 2], st[n - 2] = t->stride[n - 1];
        nb_tensor *v = nb__tensor_view(t, s, st, t->offset);
        if (!v) return NULL;
        swap = nb_is_contiguous(v);
        nb_release(v);
        if (!swap) s = t->shape;
    }
    nb_tensor *c = nb__tensor_new(s, dtype);
    if (!c) return NULL;
    nb_iter it;
    if (!swap) {
        nb__iter_init(&it, c, &t, 1);
        nb__iter_run(&it, fn, NULL);
        return c;
    }
    nb_tensor *src = nb__tensor_view(t, s, st, t->offset), *r = NULL;
    if (src) {
        nb__iter_init(&it, c, &src, 1);
        nb__iter_run(&it, fn, NULL);
        int64_t cs[NB_MAX_DIMS];
        nb__contiguous_strides(&s, cs);
        int64_t tmp = cs[n - 1];
        cs[n - 1] = cs[n - 2], cs[n - 2] = tmp;
        r = nb__tensor_view(c, t->shape, cs, 0);
    }
    nb_release(src);
    nb_release(c);
    return r;
}

nb_tensor *nb__cpu_round_bf16(nb_tensor *t) { return convert(t, NB_F32, round_bf16_run); }
nb_tensor *nb__cpu_widen_bf16(nb_tensor *t) { return convert(t, NB_F32, bf16_to_f32_run); }
