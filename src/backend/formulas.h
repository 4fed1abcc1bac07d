/* One formula per elementwise op: the scalar expression that every backend's kernels evaluate,
   the CPU's at every dtype, the graph compiler's interpreter and the C it generates, and the
   CUDA kernels (src/backend/cuda/k_elementwise.cu, generated from ops.def over these names).
   The generated C kernels get this file's own text (embedded at build time: CMakeLists.txt
   writes it into formulas_text.h), so none can drift apart. Each formula is named nbf_<op>
   after the op's name in ops.def:
     unary ops   nbf_NAME(x, s0, s1)  s0 and s1 are the op's float arguments (args.f[0], f[1])
     binary ops  nbf_NAME(x, y)       comparisons give 0 or 1
     where       nbf_where(c, x, y)
   They are type-generic (the type is x's): the helpers below are _Generic macros in C and
   templates where a C++ compiler (nvcc) reads the file, the two giving the same values
   (tests/test_formulas_cxx.cc checks it). Floats call kmath.h's exp and erf and libm's float
   functions, doubles libm's. Integer add, sub, mul and neg wrap around in two's complement as
   PyTorch's do, computed in the unsigned type of the same width, where overflow is defined.
   Arguments are evaluated more than once: pass plain values. */
#ifndef NB_FORMULAS_H
#define NB_FORMULAS_H

#ifndef NBF_EMBEDDED /* the generated kernels carry kmath.h's functions and the headers themselves */
#include "kmath.h"
#include <math.h>
#include <stdint.h>
#endif

/* A function the device calls too, where nvcc reads the file. */
#ifndef NBF_HD
#ifdef __CUDACC__
#define NBF_HD __host__ __device__
#else
#define NBF_HD
#endif
#endif

/* A double as an int64 without undefined conversions: NaN 0, saturated at the ends. */
static NBF_HD inline int64_t nbf_sat_i64(double v) {
    return v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
}

#ifndef __cplusplus
/* ---- helpers, C: _Generic on x's type ---- */
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
#define NBF_SCALAR(x, v) _Generic((x), int64_t: nbf_sat_i64(v), int32_t: (int32_t)(uint32_t)(uint64_t)nbf_sat_i64(v), \
                                  uint8_t: (uint8_t)(uint64_t)nbf_sat_i64(v), int8_t: (int8_t)(uint8_t)(uint64_t)nbf_sat_i64(v), \
                                  default: NBF_T(x, v))
/* x < 0 (always false for u8) */
#define NBF_LT0(x) ((x) < 0)
#define NBF_EXP(x) _Generic((x), float: nbk_expf, default: exp)(x)
#define NBF_ERF(x) _Generic((x), float: nbk_erff, default: erf)(x)
#define NBF_POW(x, y) _Generic((x), float: powf, default: pow)(x, y)
/* libm's fn: fnf for floats, fn for doubles */
#define NBF_LIBM(fn, x) _Generic((x), float: fn##f, default: fn)(x)
/* rounding to a whole number: integers are whole already and come back as they are (as torch) */
#define NBF_WHOLE(fn, x) _Generic((x), float: fn##f(x), double: fn(x), default: (x))
#else
/* ---- helpers, C++ (nvcc): templates on x's type, the same values as the C macros above ---- */
#include <type_traits>
#define NBF_TY(x) std::decay_t<decltype(x)>
#define NBF_T(x, c) ((NBF_TY(x))(c))
/* integers wrap: computed in the unsigned type of their width (promoted back for 8 bits) */
#define NBF_WRAP_OP_(NAME, OP)                                                                     \
    template <class T> NBF_HD inline T NAME(T x, T y) {                                            \
        if constexpr (std::is_integral<T>::value) {                                                \
            typedef std::make_unsigned_t<T> U;                                                     \
            return (T)(U)((U)x OP (U)y);                                                           \
        } else return x OP y;                                                                      \
    }
NBF_WRAP_OP_(nbf_wadd_, +)
NBF_WRAP_OP_(nbf_wsub_, -)
NBF_WRAP_OP_(nbf_wmul_, *)
template <class T> NBF_HD inline T nbf_wneg_(T x) {
    if constexpr (std::is_integral<T>::value) return nbf_wsub_((T)0, x);
    else return -x;
}
template <class T> NBF_HD inline T nbf_scalar_(double v) {
    if constexpr (std::is_same<T, int64_t>::value) return nbf_sat_i64(v);
    else if constexpr (std::is_same<T, int32_t>::value) return (int32_t)(uint32_t)(uint64_t)nbf_sat_i64(v);
    else if constexpr (std::is_same<T, uint8_t>::value) return (uint8_t)(uint64_t)nbf_sat_i64(v);
    else if constexpr (std::is_same<T, int8_t>::value) return (int8_t)(uint8_t)(uint64_t)nbf_sat_i64(v);
    else return (T)v;
}
template <class T> NBF_HD inline bool nbf_lt0_(T x) {
    if constexpr (std::is_unsigned<T>::value) return false;
    else return x < 0;
}
template <class T> NBF_HD inline auto nbf_exp_(T x) {
    if constexpr (std::is_same<T, float>::value) return nbk_expf(x);
    else return exp((double)x);
}
template <class T> NBF_HD inline auto nbf_erf_(T x) {
    if constexpr (std::is_same<T, float>::value) return nbk_erff(x);
    else return erf((double)x);
}
template <class T, class U> NBF_HD inline auto nbf_pow_(T x, U y) {
    if constexpr (std::is_same<T, float>::value) return powf(x, (float)y);
    else return pow((double)x, (double)y);
}
#define NBF_LIBM_FN_(fn)                                                                           \
    template <class T> NBF_HD inline auto nbf_##fn##_(T x) {                                       \
        if constexpr (std::is_same<T, float>::value) return fn##f(x);                              \
        else return fn((double)x);                                                                 \
    }
NBF_LIBM_FN_(log) NBF_LIBM_FN_(sqrt) NBF_LIBM_FN_(tanh) NBF_LIBM_FN_(sin) NBF_LIBM_FN_(cos)
NBF_LIBM_FN_(log1p) NBF_LIBM_FN_(expm1)
#define NBF_WHOLE_FN_(fn)                                                                          \
    template <class T> NBF_HD inline T nbf_whole_##fn##_(T x) {                                    \
        if constexpr (std::is_same<T, float>::value) return fn##f(x);                              \
        else if constexpr (std::is_same<T, double>::value) return fn(x);                           \
        else return x;                                                                             \
    }
NBF_WHOLE_FN_(floor) NBF_WHOLE_FN_(ceil) NBF_WHOLE_FN_(nearbyint) NBF_WHOLE_FN_(trunc)
#define NBF_WADD(x, y) nbf_wadd_<NBF_TY(x)>(x, y)
#define NBF_WSUB(x, y) nbf_wsub_<NBF_TY(x)>(x, y)
#define NBF_WMUL(x, y) nbf_wmul_<NBF_TY(x)>(x, y)
#define NBF_WNEG(x) nbf_wneg_(x)
#define NBF_SCALAR(x, v) nbf_scalar_<NBF_TY(x)>(v)
#define NBF_LT0(x) nbf_lt0_(x)
#define NBF_EXP(x) nbf_exp_(x)
#define NBF_ERF(x) nbf_erf_(x)
#define NBF_POW(x, y) nbf_pow_(x, y)
#define NBF_LIBM(fn, x) nbf_##fn##_(x)
#define NBF_WHOLE(fn, x) nbf_whole_##fn##_(x)
#endif

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
#define nbf_log(x, s0, s1) NBF_LIBM(log, x)
#define nbf_sqrt(x, s0, s1) NBF_LIBM(sqrt, x)
#define nbf_abs(x, s0, s1) (NBF_LT0(x) ? NBF_WNEG(x) : (x))
#define nbf_sign(x, s0, s1) NBF_T(x, ((x) > 0) - NBF_LT0(x))
#define nbf_tanh(x, s0, s1) NBF_LIBM(tanh, x)
#define nbf_sigmoid(x, s0, s1) (NBF_T(x, 1) / (NBF_T(x, 1) + NBF_EXP(-(x))))
/* as torch: NaN stays NaN (and -0 stays -0) */
#define nbf_relu(x, s0, s1) (NBF_LT0(x) ? NBF_T(x, 0) : (x))
#define nbf_gelu(x, s0, s1) (NBF_T(x, 0.5) * (x) * (NBF_T(x, 1) + NBF_ERF((x) * NBF_T(x, 0.70710678118654752440))))
#define nbf_erf(x, s0, s1) NBF_ERF(x)
#define nbf_sin(x, s0, s1) NBF_LIBM(sin, x)
#define nbf_cos(x, s0, s1) NBF_LIBM(cos, x)
#define nbf_log1p(x, s0, s1) NBF_LIBM(log1p, x)
#define nbf_expm1(x, s0, s1) NBF_LIBM(expm1, x)
#define nbf_reciprocal(x, s0, s1) (NBF_T(x, 1) / (x))
#define nbf_rsqrt(x, s0, s1) (NBF_T(x, 1) / nbf_sqrt(x, s0, s1))
#define nbf_floor(x, s0, s1) NBF_WHOLE(floor, x)
#define nbf_ceil(x, s0, s1) NBF_WHOLE(ceil, x)
/* halves to even, as torch.round (nearbyint in the default rounding mode) */
#define nbf_round(x, s0, s1) NBF_WHOLE(nearbyint, x)
#define nbf_trunc(x, s0, s1) NBF_WHOLE(trunc, x)
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
