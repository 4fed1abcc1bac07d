/* nabla's own GEMM, for builds without BLAS: B is packed in panels of KC x NC and four rows of C
   are updated at a time from them, in plain loops the compiler vectorises for the target (AVX2,
   AVX-512, NEON, WebAssembly SIMD). Each element of C sums its k products in index order, in
   blocks of KC, so the result is fixed by the shapes alone. */
#include "gemm.h"
#include "iter.h"
#include <stdlib.h>

#define KC 256
#define NC 512

#define GEMM_OWN(T, NAME)                                                                                    \
    NB_WIDE_CLONES void NAME(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t lda, \
                             const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {                           \
        for (int64_t i = 0; i < m; i++)                                                                      \
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? (T)0 : beta * c[i * ldc + j];       \
        if (k == 0 || alpha == 0) return;                                                                    \
        T *bp = malloc(sizeof(T) * KC * NC), *ap = malloc(sizeof(T) * 4 * KC);                               \
        if (!bp || !ap) { /* no room for the panels: the plain triple loop, the same order */              \
            for (int64_t i = 0; i < m; i++)                                                                  \
                for (int64_t p = 0; p < k; p++) {                                                            \
                    T av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);                                   \
                    for (int64_t j = 0; j < n; j++) c[i * ldc + j] += av * (tb ? b[j * ldb + p] : b[p * ldb + j]); \
                }                                                                                            \
            free(bp);                                                                                        \
            free(ap);                                                                                        \
            return;                                                                                          \
        }                                                                                                    \
        for (int64_t p0 = 0; p0 < k; p0 += KC) {                                                             \
            int64_t kc = k - p0 < KC ? k - p0 : KC;                                                          \
            for (int64_t j0 = 0; j0 < n; j0 += NC) {                                                         \
                int64_t nc = n - j0 < NC ? n - j0 : NC;                                                      \
                for (int64_t p = 0; p < kc; p++) /* B's panel, rows of nc */                                 \
                    for (int64_t j = 0; j < nc; j++)                                                         \
                        bp[p * nc + j] = tb ? b[(j0 + j) * ldb + p0 + p] : b[(p0 + p) * ldb + j0 + j];       \
                int64_t i = 0;                                                                               \
                for (; i + 4 <= m; i += 4) {                                                                 \
                    for (int r = 0; r < 4; r++) /* alpha * A's four rows, contiguous along p */             \
                        for (int64_t p = 0; p < kc; p++)                                                     \
                            ap[r * KC + p] = alpha * (ta ? a[(p0 + p) * lda + i + r] : a[(i + r) * lda + p0 + p]); \
                    T *c0 = c + i * ldc + j0, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;               \
                    for (int64_t p = 0; p < kc; p++) {                                                       \
                        const T *bl = bp + p * nc;                                                           \
                        T a0 = ap[p], a1 = ap[KC + p], a2 = ap[2 * KC + p], a3 = ap[3 * KC + p];             \
                        for (int64_t j = 0; j < nc; j++) {                                                   \
                            T bv = bl[j];                                                                    \
                            c0[j] += a0 * bv;                                                                \
                            c1[j] += a1 * bv;                                                                \
                            c2[j] += a2 * bv;                                                                \
                            c3[j] += a3 * bv;                                                                \
                        }                                                                                    \
                    }                                                                                        \
                }                                                                                            \
                for (; i < m; i++) {                                                                         \
                    T *c0 = c + i * ldc + j0;                                                                \
                    for (int64_t p = 0; p < kc; p++) {                                                       \
                        T a0 = alpha * (ta ? a[(p0 + p) * lda + i] : a[i * lda + p0 + p]);                   \
                        const T *bl = bp + p * nc;                                                           \
                        for (int64_t j = 0; j < nc; j++) c0[j] += a0 * bl[j];                                \
                    }                                                                                        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        free(bp);                                                                                            \
        free(ap);                                                                                            \
    }

GEMM_OWN(float, nb__gemm_own_f32)
GEMM_OWN(double, nb__gemm_own_f64)
