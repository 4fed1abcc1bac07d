/* Row-major single-threaded GEMM for the CPU kernels: C = alpha * op(A) op(B) + beta * C,
   through CBLAS (OpenBLAS) where nabla is built with it, else nabla's own blocked GEMM
   (gemm.c), which the compiler vectorises for the target. */
#ifndef NB_CPU_GEMM_H
#define NB_CPU_GEMM_H
#include <stdbool.h>
#include <stdint.h>

/* nabla's own GEMM: m x n result, inner size k, leading dimensions in elements. */
void nb__gemm_own_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* The same in double precision. */
void nb__gemm_own_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t lda,
                      const double *b, int64_t ldb, double beta, double *c, int64_t ldc);

/* The f32 GEMM library in use (linalg.c): decided once, by the CPU, or by NABLA_GEMM. */
enum { NB_GEMM_DNNL, NB_GEMM_BLAS, NB_GEMM_OWN };
int nb__gemm_path(void);

#ifdef NABLA_HAVE_BLAS
#include <cblas.h>
int nb__omp_serial_begin(void);
void nb__omp_serial_end(int prev);
/* BLAS runs on one thread, whichever thread calls it (see nb__omp_serial_begin) */
static inline void nb__sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                             const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    int prev = nb__omp_serial_begin();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    nb__omp_serial_end(prev);
}
static inline void nb__dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                             int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
    int prev = nb__omp_serial_begin();
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    nb__omp_serial_end(prev);
}
#else
#define nb__sgemm nb__gemm_own_f32
#define nb__dgemm nb__gemm_own_f64
#endif

#endif
