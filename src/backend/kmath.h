/* Math functions of the elementwise formulas (formulas.h) on every backend, written so that GCC
   vectorises them (straight-line code, selects, no calls), in one copy: the library compiles the
   definitions below for the CPU, nvcc for the device (NBK_HD), and generated kernels get the
   same text through NBK_MATH_SOURCE. */
#ifndef NB_KMATH_H
#define NB_KMATH_H

#include <stdint.h>

/* Both a host and a device function where nvcc reads the header; a plain function elsewhere. */
#ifdef __CUDACC__
#define NBK_HD __host__ __device__
#else
#define NBK_HD
#endif

/* erf for floats, evaluated in double and rounded once: within 1 ulp of glibc's erff (the eager
   kernel), both being within 1 ulp of the exact value. |x| < 1: x * P(x^2); 1 <= |x| < 4:
   Q(|x|); beyond, +-1 (erf(4) rounds to 1.0f). P (degree 8) and Q (degree 18) are Chebyshev
   fits made with mpmath; their error is below 1e-11, far under half a float ulp. */
#define NBK_ERF_DEF                                                                                \
    static NBK_HD inline float nbk_erff(float xf) {                                                \
        double x = (double)xf, a = __builtin_fabs(x);                                              \
        double t = 2 * (a * a) - 1;                                                                \
        double p = 4.1387818213123025e-09;                                                         \
        p = __builtin_fma(p, t, -7.557492799079184e-08);                                           \
        p = __builtin_fma(p, t, 1.2233626095085347e-06);                                           \
        p = __builtin_fma(p, t, -1.7536824688242635e-05);                                          \
        p = __builtin_fma(p, t, 0.00021751716323498182);                                           \
        p = __builtin_fma(p, t, -0.0022854856569536576);                                           \
        p = __builtin_fma(p, t, 0.01985249668808418);                                              \
        p = __builtin_fma(p, t, -0.14053608901552944);                                             \
        p = __builtin_fma(p, t, 0.9654687386698853);                                               \
        p = p * a;                                                                                 \
        double b = a < 4 ? a : 4;                                                                  \
        double u = (2 * b - 5) * (1.0 / 3);                                                        \
        double q = -1.539968092824581e-05;                                                         \
        q = __builtin_fma(q, u, 3.293628129294291e-05);                                            \
        q = __builtin_fma(q, u, 7.670248391031225e-05);                                            \
        q = __builtin_fma(q, u, -0.00029381094468035714);                                          \
        q = __builtin_fma(q, u, 0.00010030659178803722);                                           \
        q = __builtin_fma(q, u, 0.0009188635523544421);                                            \
        q = __builtin_fma(q, u, -0.001860013817470126);                                            \
        q = __builtin_fma(q, u, 0.0004434473911703163);                                            \
        q = __builtin_fma(q, u, 0.004558520890886534);                                             \
        q = __builtin_fma(q, u, -0.009622182123089683);                                            \
        q = __builtin_fma(q, u, 0.006676857205093406);                                             \
        q = __builtin_fma(q, u, 0.009267782604562144);                                             \
        q = __builtin_fma(q, u, -0.03187596611989162);                                             \
        q = __builtin_fma(q, u, 0.046453578116653245);                                             \
        q = __builtin_fma(q, u, -0.04365081934646568);                                             \
        q = __builtin_fma(q, u, 0.028181554643112793);                                             \
        q = __builtin_fma(q, u, -0.01225284742297202);                                             \
        q = __builtin_fma(q, u, 0.0032674262997316184);                                            \
        q = __builtin_fma(q, u, 0.999593047975718);                                                \
        double r = a < 1 ? p : q;                                                                  \
        r = a < 4 ? r : 1.0;                                                                       \
        r = __builtin_copysign(r, x);                                                              \
        return a == a ? (float)r : xf; /* NaN stays NaN */                                         \
    }

/* exp for floats, evaluated in double and rounded once (agrees with glibc's expf, itself
   correctly rounded in nearly all cases): x = k ln2 + r, |r| <= ln2/2, exp(r) by its Taylor
   series to r^11 (error < 1e-14), 2^k built in the exponent bits. x is clamped to [-104, 89],
   where expf is 0 and inf. */
#define NBK_EXP_DEF                                                                                \
    static NBK_HD inline float nbk_expf(float xf) {                                                \
        double x = (double)xf;                                                                     \
        x = x > -104.0 ? x : -104.0;                                                               \
        x = x < 89.0 ? x : 89.0;                                                                   \
        double t = __builtin_fma(x, 1.4426950408889634, 6755399441055744.0);                       \
        double k = t - 6755399441055744.0;                                                         \
        double r = __builtin_fma(k, -0.6931471805599453, x);                                       \
        double e = 2.505210838544172e-08;                                                          \
        e = __builtin_fma(e, r, 2.755731922398589e-07);                                            \
        e = __builtin_fma(e, r, 2.7557319223985893e-06);                                           \
        e = __builtin_fma(e, r, 2.48015873015873e-05);                                             \
        e = __builtin_fma(e, r, 0.0001984126984126984);                                            \
        e = __builtin_fma(e, r, 0.001388888888888889);                                             \
        e = __builtin_fma(e, r, 0.008333333333333333);                                             \
        e = __builtin_fma(e, r, 0.041666666666666664);                                             \
        e = __builtin_fma(e, r, 0.16666666666666666);                                              \
        e = __builtin_fma(e, r, 0.5);                                                              \
        e = __builtin_fma(e, r, 1.0);                                                              \
        e = __builtin_fma(e, r, 1.0);                                                              \
        uint64_t tb, sb;                                                                           \
        __builtin_memcpy(&tb, &t, 8);                                                              \
        sb = (tb + 1023) << 52;                                                                    \
        double scale;                                                                              \
        __builtin_memcpy(&scale, &sb, 8);                                                          \
        return xf == xf ? (float)(e * scale) : xf;                                                 \
    }

#define NBK_STR_(...) #__VA_ARGS__
#define NBK_STR(...) NBK_STR_(__VA_ARGS__)
/* The functions as C source, for the generated kernels. */
#define NBK_MATH_SOURCE NBK_STR(NBK_ERF_DEF) "\n" NBK_STR(NBK_EXP_DEF) "\n"

NBK_ERF_DEF
NBK_EXP_DEF

#endif
