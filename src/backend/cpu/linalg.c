/* CPU matrix multiply: batched, broadcasting GEMM through oneDNN or CBLAS (OpenBLAS) where
   nabla is built with them, else nabla's own (gemm.c), reading transposed operands in place
   when their strides allow; integers use a plain loop. */
#include "iter.h"
#include "gemm.h"
#include "../gemm_layout.h"
#include "dnnl_conv.h"
#ifdef NABLA_HAVE_DNNL
#include <dnnl.h>
#endif
#include <stdlib.h>
#include <string.h>

/* Which library multiplies f32 matrices, decided once per process. The rule, from measurements
   on both kinds of machine (README, "Matrix products"): oneDNN's sgemm where the CPU has AVX-512
   (it beat OpenBLAS 1.9x there), OpenBLAS elsewhere (on an AVX2 Zen 3, OpenBLAS ran twice as
   fast as oneDNN). NABLA_GEMM=dnnl|blas|own overrides it, for benchmarks; a path this build
   lacks falls back to the next one. One machine always takes the same path, so its bits do not
   depend on the thread count. */
int nb__gemm_path(void) {
    static atomic_int path = -1;
    int p = atomic_load_explicit(&path, memory_order_relaxed);
    if (p >= 0) return p;
    const char *env = getenv("NABLA_GEMM");
#if defined(NABLA_HAVE_DNNL) && (defined(__x86_64__) || defined(__i386__))
    p = __builtin_cpu_supports("avx512f") ? NB_GEMM_DNNL : NB_GEMM_BLAS;
#elif defined(NABLA_HAVE_DNNL)
    p = NB_GEMM_DNNL;
#else
    p = NB_GEMM_BLAS;
#endif
    if (env && !strcmp(env, "dnnl")) p = NB_GEMM_DNNL;
    else if (env && !strcmp(env, "blas")) p = NB_GEMM_BLAS;
    else if (env && !strcmp(env, "own")) p = NB_GEMM_OWN;
#ifndef NABLA_HAVE_DNNL
    if (p == NB_GEMM_DNNL) p = NB_GEMM_BLAS;
#endif
#ifndef NABLA_HAVE_BLAS
    if (p == NB_GEMM_BLAS) p = NB_GEMM_OWN;
#endif
    atomic_store_explicit(&path, p, memory_order_relaxed);
    return p;
}


/* A contiguous copy of t made by the backend itself (kernels may not go back through dispatch). */
static nb_tensor *dense_copy(nb_tensor *t) {
    nb_tensor *c = nb__tensor_new(t->shape, t->dtype);
    if (!c) return NULL;
    nb_iter it;
    nb__iter_init(&it, c, &t, 1);
    nb__iter_run(&it, nb__cpu_copy_fn(nb_dtype_size(t->dtype)), NULL);
    return c;
}

/* Integer products wrap around as torch's do: computed in the unsigned type UT (no undefined
   overflow), the same bits as two's complement. */
#define INT_MATMUL(T, UT)                                                                                \
    static void matmul_##T(const T *a, const T *b, T *c, int64_t n, int64_t k, int64_t m, int64_t ldc,   \
                           int64_t ars, int64_t acs, int64_t brs, int64_t bcs) {                         \
        for (int64_t i = 0; i < n; i++)                                                                  \
            for (int64_t j = 0; j < m; j++) {                                                            \
                UT s = 0;                                                                                \
                for (int64_t q = 0; q < k; q++) s += (UT)a[i * ars + q * acs] * (UT)b[q * brs + j * bcs]; \
                c[i * ldc + j] = (T)s;                                                                   \
            }                                                                                            \
    }
INT_MATMUL(int64_t, uint64_t)
INT_MATMUL(int32_t, uint32_t)
INT_MATMUL(uint8_t, unsigned)
INT_MATMUL(int8_t, unsigned)

typedef struct {
    const nb_tensor *a, *b, *out;
    const nb_shape *bshape;
    int64_t n, m, k;
    bool ta, tb;
    int64_t lda, ldb;
    size_t es, es_in;       /* element sizes of the result and of the operands (bf16 under autocast) */
    char *pa, *pb, *pc;
    bool split_rows;        /* chunks run along n (rows of C) or along m (columns) */
    int64_t chunk, chunks;  /* chunk size and count along that axis */
    nb_gemm_epilogue epi;   /* run on each finished piece, or NULL */
    void *epi_ctx;
    atomic_bool *failed;    /* set by a piece whose bf16 product failed */
} gemm_plan;

/* The chunking of one product: along its longer side (or along rows when asked), in at most 8
   pieces (but one case below). It depends on the shapes only, never on the thread count, so every element is computed
   by the same single-threaded BLAS call whatever the number of threads: results are bit-identical
   with 1 or N threads. One row times a matrix [k, m] read row by row is the exception: there
   each element of the result is summed whole within its piece, in the same order whatever the
   piece's width, so the pieces may follow the threads. One a thread makes each read of a row of
   the matrix one long run instead of eight short ones (GPT-2's decoding step, which streams
   every weight once, went from 39 to 45 tokens/s on 2 threads). */
static void plan_chunks(gemm_plan *p, bool whole_rows) {
    p->split_rows = whole_rows || p->n >= p->m;
    int64_t d = p->split_rows ? p->n : p->m;
    /* pieces of 128 or more where the side allows (each piece packs the other operand again),
       of 64 for short sides, at most 8 */
    int64_t count = d >= 256 ? d / 128 : d / 64;
    if (count > 8) count = 8;
    if (p->n == 1 && !p->ta && !p->tb && !p->split_rows && p->a->dtype != NB_BF16 && !p->epi)
        count = nb__threads() < d / 16 ? nb__threads() : d / 16;
    if (count < 1) count = 1;
    int64_t c = (d + count - 1) / count;
    c = (c + 15) / 16 * 16;
    p->chunk = c < d ? c : d;
    p->chunks = (d + p->chunk - 1) / p->chunk;
}

/* One row times a matrix, y[0..cols) = a[0..k) B, read straight through: the GEMM libraries
   pack B even for one row, which costs a decoding step (a token at a time) as much again as the
   product. B is [k, cols] at b[i * ldb + j], or (tb) its transpose at b[j * ldb + i]. */
#define GEMV(T)                                                                                    \
    NB_KERNEL_CLONES static void gemv_##T(bool tb, int64_t cols, int64_t k, const T *a, const T *b, int64_t ldb, T *y) { \
        int64_t j = 0, i = 0;                                                                      \
        if (tb) { /* four dot products at a time: four chains, one pass over a */                  \
            for (; j + 4 <= cols; j += 4) {                                                        \
                const T *b0 = b + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;         \
                T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                  \
                _Pragma("omp simd reduction(+ : s0, s1, s2, s3)") for (int64_t q = 0; q < k; q++) { \
                    s0 += a[q] * b0[q];                                                            \
                    s1 += a[q] * b1[q];                                                            \
                    s2 += a[q] * b2[q];                                                            \
                    s3 += a[q] * b3[q];                                                            \
                }                                                                                  \
                y[j] = s0, y[j + 1] = s1, y[j + 2] = s2, y[j + 3] = s3;                            \
            }                                                                                      \
            for (; j < cols; j++) {                                                                \
                const T *bj = b + j * ldb;                                                         \
                T s = 0;                                                                           \
                _Pragma("omp simd reduction(+ : s)") for (int64_t q = 0; q < k; q++) s += a[q] * bj[q]; \
                y[j] = s;                                                                          \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (j = 0; j < cols; j++) y[j] = 0;                                                       \
        for (; i + 4 <= k; i += 4) { /* four rows of B a pass: y read and written a quarter as often */ \
            const T a0 = a[i], a1 = a[i + 1], a2 = a[i + 2], a3 = a[i + 3];                        \
            const T *b0 = b + i * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;             \
            _Pragma("omp simd") for (int64_t q = 0; q < cols; q++) y[q] += a0 * b0[q] + a1 * b1[q] + a2 * b2[q] + a3 * b3[q]; \
        }                                                                                          \
        for (; i < k; i++) {                                                                       \
            const T ai = a[i], *bi = b + i * ldb;                                                  \
            _Pragma("omp simd") for (int64_t q = 0; q < cols; q++) y[q] += ai * bi[q];             \
        }                                                                                          \
    }
GEMV(float)
GEMV(double)
#undef GEMV

/* One piece of one product of the batch: unit = batch index * chunks + chunk index. */
static void gemm_unit(const gemm_plan *p, int64_t unit) {
    const nb_tensor *a = p->a, *b = p->b;
    int na = a->shape.ndim, nbd = b->shape.ndim;
    int64_t bi = unit / p->chunks, ci = unit % p->chunks;
    int64_t n = p->n, m = p->m, k = p->k;
    int64_t es = (int64_t)p->es, ei = (int64_t)p->es_in;
    char *A = p->pa + nb__batch_offset(a, p->bshape, bi) * ei;
    char *B = p->pb + nb__batch_offset(b, p->bshape, bi) * ei;
    char *C = p->pc + bi * n * m * es;
    int64_t lo = ci * p->chunk, len = lo + p->chunk <= (p->split_rows ? n : m) ? p->chunk : (p->split_rows ? n : m) - lo;
    int64_t rows = n, cols = m;
    if (p->split_rows) { /* rows lo.. of A and C */
        A += lo * (p->ta ? 1 : p->lda) * ei;
        C += lo * m * es;
        rows = len;
    } else { /* columns lo.. of B and C */
        B += lo * (p->tb ? p->ldb : 1) * ei;
        C += lo * es;
        cols = len;
    }
    if (a->dtype == NB_BF16) { /* autocast: bf16 operands (nb__cpu_matmul_bf16) */
        if (nb__dnnl_gemm_bf16(p->ta, p->tb, rows, cols, k, (const uint16_t *)A, p->lda, (const uint16_t *)B, p->ldb,
                               (float *)C, m) <= 0)
            atomic_store_explicit(p->failed, true, memory_order_relaxed);
        goto done;
    }
    /* one row of A (ta is false then: blas_layout reads a single row as row-major) */
    if (rows == 1 && !p->ta && p->out->dtype == NB_F32) {
        gemv_float(p->tb, cols, k, (const float *)A, (const float *)B, p->ldb, (float *)C);
        goto done;
    }
    if (rows == 1 && !p->ta && p->out->dtype == NB_F64) {
        gemv_double(p->tb, cols, k, (const double *)A, (const double *)B, p->ldb, (double *)C);
        goto done;
    }
    switch (p->out->dtype) {
    case NB_F32:
#ifdef NABLA_HAVE_DNNL
        /* each piece runs on one thread (oneDNN's own splits would depend on the thread count) */
        if (nb__gemm_path() == NB_GEMM_DNNL) {
            int prev = nb__omp_serial_begin();
            dnnl_status_t st = dnnl_sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', rows, cols, k, 1.0f, (const float *)A, p->lda,
                                          (const float *)B, p->ldb, 0.0f, (float *)C, m);
            nb__omp_serial_end(prev);
            if (st == dnnl_success) break;
        }
#endif
#ifdef NABLA_HAVE_BLAS
        if (nb__gemm_path() == NB_GEMM_OWN) {
            nb__gemm_own_f32(p->ta, p->tb, rows, cols, k, 1.0f, (const float *)A, p->lda, (const float *)B, p->ldb, 0.0f,
                             (float *)C, m);
            break;
        }
#endif
        nb__sgemm(p->ta, p->tb, rows, cols, k, 1.0f, (const float *)A, p->lda, (const float *)B, p->ldb, 0.0f, (float *)C, m);
        break;
    case NB_F64:
        nb__dgemm(p->ta, p->tb, rows, cols, k, 1.0, (const double *)A, p->lda, (const double *)B, p->ldb, 0.0, (double *)C, m);
        break;
    default: {
        /* integers: a plain loop over this piece, strides straight from the tensors */
        int64_t ars = a->stride[na - 2], acs = a->stride[na - 1], brs = b->stride[nbd - 2], bcs = b->stride[nbd - 1];
        int64_t r0 = p->split_rows ? lo : 0, c0 = p->split_rows ? 0 : lo;
        char *A0 = p->pa + nb__batch_offset(a, p->bshape, bi) * es, *B0 = p->pb + nb__batch_offset(b, p->bshape, bi) * es;
        char *C0 = p->pc + bi * n * m * es;
        if (p->out->dtype == NB_I64)
            matmul_int64_t((const int64_t *)A0 + r0 * ars, (const int64_t *)B0 + c0 * bcs, (int64_t *)C0 + r0 * m + c0, rows,
                           k, cols, m, ars, acs, brs, bcs);
        else if (p->out->dtype == NB_I32)
            matmul_int32_t((const int32_t *)A0 + r0 * ars, (const int32_t *)B0 + c0 * bcs, (int32_t *)C0 + r0 * m + c0, rows,
                           k, cols, m, ars, acs, brs, bcs);
        else if (p->out->dtype == NB_I8)
            matmul_int8_t((const int8_t *)A0 + r0 * ars, (const int8_t *)B0 + c0 * bcs, (int8_t *)C0 + r0 * m + c0, rows,
                          k, cols, m, ars, acs, brs, bcs);
        else
            matmul_uint8_t((const uint8_t *)A0 + r0 * ars, (const uint8_t *)B0 + c0 * bcs, (uint8_t *)C0 + r0 * m + c0, rows,
                           k, cols, m, ars, acs, brs, bcs);
    }
    }
done:
    if (p->epi) { /* the piece is final: its epilogue runs while it is in cache */
        int64_t r0 = p->split_rows ? lo : 0, c0 = p->split_rows ? 0 : lo;
        p->epi(p->epi_ctx, bi, r0, r0 + rows, c0, c0 + cols);
    }
}

static void gemm_units(void *plan, int64_t lo, int64_t hi, int slot) {
    (void)slot;
    for (int64_t u = lo; u < hi; u++) gemm_unit(plan, u);
}

int nb__cpu_matmul(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    return nb__cpu_matmul_epilogue(out, in, NULL, NULL, false);
}

int nb__cpu_matmul_epilogue(nb_tensor *out, nb_tensor *const *in, nb_gemm_epilogue epi, void *epi_ctx, bool whole_rows) {
    nb_tensor *a = in[0], *b = in[1];
    int na = a->shape.ndim, nbd = b->shape.ndim, no = out->shape.ndim;
    int64_t n = out->shape.dim[no - 2], m = out->shape.dim[no - 1], k = a->shape.dim[na - 1];
    nb_shape bshape = out->shape;
    bshape.ndim -= 2;
    int64_t batches = nb__shape_numel(&bshape);
    if (out->numel == 0) return 0;
    if (k == 0) {
        memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
        for (int64_t bi = 0; epi && bi < batches; bi++) epi(epi_ctx, bi, 0, n, 0, m);
        return 0;
    }
    nb_tensor *ac = NULL, *bc = NULL;
    bool ta = false, tb = false;
    int64_t lda = 1, ldb = 1;
    bool is_float = a->dtype == NB_F32 || a->dtype == NB_F64 || a->dtype == NB_BF16;
    if (is_float && !nb__blas_layout(n, k, a->stride[na - 2], a->stride[na - 1], &ta, &lda)) {
        if (!(ac = dense_copy(a))) return -1;
        a = ac;
        nb__blas_layout(n, k, a->stride[na - 2], a->stride[na - 1], &ta, &lda);
    }
    if (is_float && !nb__blas_layout(k, m, b->stride[nbd - 2], b->stride[nbd - 1], &tb, &ldb)) {
        if (!(bc = dense_copy(b))) { nb_release(ac); return -1; }
        b = bc;
        nb__blas_layout(k, m, b->stride[nbd - 2], b->stride[nbd - 1], &tb, &ldb);
    }
    size_t es = nb_dtype_size(out->dtype);
    char *pa = nb__data(a), *pb = nb__data(b), *pc = nb__data(out);
    atomic_bool failed = false;
    gemm_plan plan = { a, b, out, &bshape, n, m, k, ta, tb, lda, ldb, es, nb_dtype_size(a->dtype), pa, pb, pc, false, 0, 0,
                       epi, epi_ctx, &failed };
    plan_chunks(&plan, whole_rows);
    int64_t units = batches * plan.chunks;
    /* BLAS runs single-threaded (see threads.c); the pieces run in parallel here */
    /* a parallel region costs a few microseconds (far more when the machine is busy): only
       products of some millions of multiply-adds get one (a row times a matrix reads its matrix
       from memory, and two threads read it faster: from some hundred thousand) */
    int threads = units > 1 && n * m * k * batches >= ((int64_t)1 << (n == 1 ? 17 : 21)) ? nb__threads() : 1;
    nb__parallel_for(threads, units, gemm_units, &plan);
    nb_release(ac);
    nb_release(bc);
    if (atomic_load(&failed)) {
        if (!nb__has_error()) nb__error("nb_matmul: oneDNN declined a bf16 product of [%lld, %lld] x [%lld, %lld]", (long long)n,
                                        (long long)k, (long long)k, (long long)m);
        return -1;
    }
    return 0;
}

/* Autocast's product: bf16 operands (nb_matmul cast them), multiplied with f32 accumulation
   into the f32 result. Through oneDNN's bf16 GEMM where the CPU has bf16 instructions;
   elsewhere the operands are widened to f32 (exactly) and the f32 GEMM multiplies them, which
   gives the same products (a product of two bf16 values is exact in f32) and differs only in
   the order of the sums. */
int nb__cpu_matmul_bf16(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    if (nb__dnnl_bf16_fast()) return nb__cpu_matmul_epilogue(out, in, NULL, NULL, false);
    nb_tensor *w[2] = { nb__cpu_widen_bf16(in[0]), NULL };
    if (w[0]) w[1] = nb__cpu_widen_bf16(in[1]);
    int rc = w[1] ? nb__cpu_matmul_epilogue(out, w, NULL, NULL, false) : -1;
    nb_release(w[0]);
    nb_release(w[1]);
    return rc;
}
