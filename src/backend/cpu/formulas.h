/* One formula per elementwise op: the scalar expression that the cpu kernels (at every dtype),
   the graph compiler's interpreter and the C it generates all evaluate. The generated kernels
   get this file's own text (embedded at build time: CMakeLists.txt writes it into
   formulas_text.h), so the three cannot drift apart. Each formula is named nbf_<op> after
   the op's name in ops.def:
     unary ops   nbf_NAME(x, s0, s1)  s0 and s1 are the op's float arguments (args.f[0], f[1])
     binary ops  nbf_NAME(x, y)
     where       nbf_where(c, x, y)
   They are type-generic macros (the type is x's): floats call kmath.h's exp and erf and libm's
   float functions, doubles libm's. Integer add, sub, mul and neg wrap around in two's
   complement as PyTorch's do, computed in the unsigned type of the same width, where
   overflow is defined. Arguments are evaluated more than once: pass plain values. */
#ifndef NB_FORMULAS_H
#define NB_FORMULAS_H

#ifndef NBF_EMBEDDED /* the generated kernels carry kmath.h's functions and the headers themselves */
#include "kmath.h"
#include <math.h>
#include <stdint.h>
#endif

/* ---- helpers ---- */
#define NBF_T(x, c) ((__typeof__(x))(c))
#define NBF_WRAP_(T, UT, OP, x, y) ((T)((UT)(x) OP (UT)(y)))
/* int8_t goes through unsigned as well: its operands promote to int, and the result is brought
   back to 8 bits as an unsigned value first, so it wraps (-128 * -1 is -128, as in torch) */
#define NBF_WRAP8_(OP, x, y) ((int8_t)(uint8_t)((unsigned)(x) OP (unsigned)(y)))
#define NBF_WADD(x, y) _Generic((x), int64_t: NBF_WRAP_(int64_t, uint64_t, +, x, y), \
                                int32_t: NBF_WRAP_(int32_t, uint32_t, +, x, y), int8_t: NBF_WRAP8_(+, x, y), default: (x) + (y))
#define NBF_WSUB(x, y) _Generic((x), int64_t: NBF_WRAP_(int64_t, uint64_t, -, x, y), \
                                int32_t: NBF_WRAP_(int32_t, uint32_t, -, x, y), int8_t: NBF_WRAP8_(-, x, y), default: (x) - (y))
#define NBF_WMUL(x, y) _Generic((x), int64_t: NBF_WRAP_(int64_t, uint64_t, *, x, y), \
                                int32_t: NBF_WRAP_(int32_t, uint32_t, *, x, y), int8_t: NBF_WRAP8_(*, x, y), default: (x) * (y))
/* -x: floats by negation, so that -(+0) is -0 as in torch (0 - x would give +0) */
#define NBF_WNEG(x) _Generic((x), int64_t: NBF_WRAP_(int64_t, uint64_t, -, 0, x), \
                             int32_t: NBF_WRAP_(int32_t, uint32_t, -, 0, x), int8_t: NBF_WRAP8_(-, 0, x), default: -(x))
/* A double scalar as an operand of x's type without undefined conversions: integers saturate
   to int64 and then wrap to their width, as torch wraps an integer scalar. */
static inline int64_t nbf_sat_i64(double v) {
    return v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
}
#define NBF_SCALAR(x, v) _Generic((x), int64_t: nbf_sat_i64(v), int32_t: (int32_t)(uint32_t)(uint64_t)nbf_sat_i64(v), \
                                  uint8_t: (uint8_t)(uint64_t)nbf_sat_i64(v), int8_t: (int8_t)(uint8_t)(uint64_t)nbf_sat_i64(v), \
                                  default: NBF_T(x, v))
#define NBF_EXP(x) _Generic((x), float: nbk_expf, default: exp)(x)
#define NBF_ERF(x) _Generic((x), float: nbk_erff, default: erf)(x)
#define NBF_POW(x, y) _Generic((x), float: powf, default: pow)(x, y)

/* ---- binary ---- */
#define nbf_add(x, y) NBF_WADD(x, y)
#define nbf_sub(x, y) NBF_WSUB(x, y)
#define nbf_mul(x, y) NBF_WMUL(x, y)
#define nbf_div(x, y) ((x) / (y))
#define nbf_pow(x, y) NBF_POW(x, y)
/* NaN-propagating, as torch.maximum and torch.minimum */
#define nbf_maximum(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) > (y) ? (x) : (y))
#define nbf_minimum(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) < (y) ? (x) : (y))
#define nbf_eq(x, y) ((x) == (y))
#define nbf_lt(x, y) ((x) < (y))
#define nbf_gt(x, y) ((x) > (y))
#define nbf_ne(x, y) ((x) != (y))
#define nbf_le(x, y) ((x) <= (y))
#define nbf_ge(x, y) ((x) >= (y))
/* as torch's threshold_backward: zero where the output y is <= 0, so a NaN output passes g */
#define nbf_relu_backward(g, y) ((y) <= 0 ? NBF_T(g, 0) : (g))
#define nbf_where(c, x, y) ((c) != 0 ? (x) : (y))

/* ---- unary ---- */
#define nbf_add_scalar(x, s0, s1) NBF_WADD(x, NBF_SCALAR(x, s0))
#define nbf_mul_scalar(x, s0, s1) NBF_WMUL(x, NBF_SCALAR(x, s0))
#define nbf_pow_scalar(x, s0, s1) NBF_POW(x, NBF_T(x, s0))
#define nbf_neg(x, s0, s1) NBF_WNEG(x)
#define nbf_exp(x, s0, s1) NBF_EXP(x)
#define nbf_log(x, s0, s1) _Generic((x), float: logf, default: log)(x)
#define nbf_sqrt(x, s0, s1) _Generic((x), float: sqrtf, default: sqrt)(x)
#define nbf_abs(x, s0, s1) ((x) < 0 ? NBF_WNEG(x) : (x))
#define nbf_sign(x, s0, s1) NBF_T(x, ((x) > 0) - ((x) < 0))
#define nbf_tanh(x, s0, s1) _Generic((x), float: tanhf, default: tanh)(x)
#define nbf_sigmoid(x, s0, s1) (NBF_T(x, 1) / (NBF_T(x, 1) + NBF_EXP(-(x))))
/* as torch: NaN stays NaN (and -0 stays -0) */
#define nbf_relu(x, s0, s1) ((x) < 0 ? NBF_T(x, 0) : (x))
#define nbf_gelu(x, s0, s1) (NBF_T(x, 0.5) * (x) * (NBF_T(x, 1) + NBF_ERF((x) * NBF_T(x, 0.70710678118654752440))))
#define nbf_erf(x, s0, s1) NBF_ERF(x)
#define nbf_sin(x, s0, s1) _Generic((x), float: sinf, default: sin)(x)
#define nbf_cos(x, s0, s1) _Generic((x), float: cosf, default: cos)(x)
#define nbf_log1p(x, s0, s1) _Generic((x), float: log1pf, default: log1p)(x)
#define nbf_expm1(x, s0, s1) _Generic((x), float: expm1f, default: expm1)(x)
#define nbf_reciprocal(x, s0, s1) (NBF_T(x, 1) / (x))
#define nbf_rsqrt(x, s0, s1) (NBF_T(x, 1) / nbf_sqrt(x, s0, s1))
/* integers are whole already: floor, ceil, round and trunc give them back (as torch) */
#define nbf_floor(x, s0, s1) _Generic((x), float: floorf(x), double: floor(x), default: (x))
#define nbf_ceil(x, s0, s1) _Generic((x), float: ceilf(x), double: ceil(x), default: (x))
/* halves to even, as torch.round (nearbyint in the default rounding mode) */
#define nbf_round(x, s0, s1) _Generic((x), float: nearbyintf(x), double: nearbyint(x), default: (x))
#define nbf_trunc(x, s0, s1) _Generic((x), float: truncf(x), double: trunc(x), default: (x))
/* the bounds compare in double, so an integer is held to a fractional bound exactly; a NaN
   bound gives NaN, as torch (nb_clamp makes an integer input float first) */
#define nbf_clamp(x, s0, s1)                                                                        \
    ((s0) != (s0) || (s1) != (s1) ? NBF_SCALAR(x, (s0) + (s1))                                      \
     : (double)(x) < (s0)         ? NBF_SCALAR(x, s0)                                               \
     : (double)(x) > (s1)         ? NBF_SCALAR(x, s1)                                               \
                                  : (x))
/* within a fused kernel every value is a float: copies and float casts pass it on */
#define nbf_copy(x, s0, s1) (x)
#define nbf_cast(x, s0, s1) (x)

#endif
