/* CPU matrix multiply: batched, broadcasting GEMM through CBLAS (OpenBLAS), reading
   transposed operands in place when their strides allow; integers use a plain loop. */
#include "iter.h"
#include <cblas.h>
#include <omp.h>
#include <string.h>

/* Whether a rows x cols matrix with element strides (rs, cs) can be handed to BLAS, and how. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans, int64_t *ld) {
    int64_t min_cols = cols > 1 ? cols : 1, min_rows = rows > 1 ? rows : 1;
    /* row-major: (i, j) at i * ld + j */
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= min_cols)) {
        *trans = false;
        *ld = rows == 1 ? min_cols : rs;
        return true;
    }
    /* transposed: (i, j) at j * ld + i */
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= min_rows)) {
        *trans = true;
        *ld = cols == 1 ? min_rows : cs;
        return true;
    }
    return false;
}

nb_inner_fn nb__cpu_copy_fn(size_t esize);

/* A contiguous copy of t made by the backend itself (kernels may not go back through dispatch). */
static nb_tensor *dense_copy(nb_tensor *t) {
    nb_tensor *c = nb__tensor_new(t->shape, t->dtype);
    if (!c) return NULL;
    nb_iter it;
    nb__iter_init(&it, c, &t, 1);
    nb__iter_run(&it, nb__cpu_copy_fn(nb_dtype_size(t->dtype)), NULL);
    return c;
}

/* Element offset of batch b of t, broadcasting t's batch axes against out's. */
static int64_t batch_offset(const nb_tensor *t, const nb_shape *bshape, int64_t b) {
    int tb = t->shape.ndim - 2, lead = bshape->ndim - tb;
    int64_t off = 0;
    for (int d = bshape->ndim - 1; d >= 0; d--) {
        int64_t i = b % bshape->dim[d];
        b /= bshape->dim[d];
        int td = d - lead;
        if (td >= 0 && t->shape.dim[td] != 1) off += i * t->stride[td];
    }
    return off;
}

#define INT_MATMUL(T)                                                                                    \
    static void matmul_##T(const T *a, const T *b, T *c, int64_t n, int64_t k, int64_t m, int64_t ars,   \
                           int64_t acs, int64_t brs, int64_t bcs) {                                      \
        for (int64_t i = 0; i < n; i++)                                                                  \
            for (int64_t j = 0; j < m; j++) {                                                            \
                T s = 0;                                                                                 \
                for (int64_t q = 0; q < k; q++) s += a[i * ars + q * acs] * b[q * brs + j * bcs];        \
                c[i * m + j] = s;                                                                        \
            }                                                                                            \
    }
INT_MATMUL(int64_t)
INT_MATMUL(int32_t)
INT_MATMUL(uint8_t)

typedef struct {
    const nb_tensor *a, *b, *out;
    const nb_shape *bshape;
    int64_t n, m, k;
    bool ta, tb;
    int64_t lda, ldb;
    size_t es;
    char *pa, *pb, *pc;
} gemm_plan;

/* One product of the batch. */
static void gemm_one(const gemm_plan *p, int64_t bi) {
    const nb_tensor *a = p->a, *b = p->b;
    int na = a->shape.ndim, nbd = b->shape.ndim;
    int64_t n = p->n, m = p->m, k = p->k;
    char *A = p->pa + batch_offset(a, p->bshape, bi) * (int64_t)p->es;
    char *B = p->pb + batch_offset(b, p->bshape, bi) * (int64_t)p->es;
    char *C = p->pc + bi * n * m * (int64_t)p->es;
    switch (p->out->dtype) {
    case NB_F32:
        cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, (int)n, (int)m,
                    (int)k, 1.0f, (const float *)A, (int)p->lda, (const float *)B, (int)p->ldb, 0.0f, (float *)C, (int)m);
        break;
    case NB_F64:
        cblas_dgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, (int)n, (int)m,
                    (int)k, 1.0, (const double *)A, (int)p->lda, (const double *)B, (int)p->ldb, 0.0, (double *)C, (int)m);
        break;
    case NB_I64:
        matmul_int64_t((const int64_t *)A, (const int64_t *)B, (int64_t *)C, n, k, m, a->stride[na - 2],
                       a->stride[na - 1], b->stride[nbd - 2], b->stride[nbd - 1]);
        break;
    case NB_I32:
        matmul_int32_t((const int32_t *)A, (const int32_t *)B, (int32_t *)C, n, k, m, a->stride[na - 2],
                       a->stride[na - 1], b->stride[nbd - 2], b->stride[nbd - 1]);
        break;
    default:
        matmul_uint8_t((const uint8_t *)A, (const uint8_t *)B, (uint8_t *)C, n, k, m, a->stride[na - 2],
                       a->stride[na - 1], b->stride[nbd - 2], b->stride[nbd - 1]);
    }
}

int cpu_matmul(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    nb_tensor *a = in[0], *b = in[1];
    int na = a->shape.ndim, nbd = b->shape.ndim, no = out->shape.ndim;
    int64_t n = out->shape.dim[no - 2], m = out->shape.dim[no - 1], k = a->shape.dim[na - 1];
    nb_shape bshape = out->shape;
    bshape.ndim -= 2;
    int64_t batches = nb__shape_numel(&bshape);
    if (out->numel == 0) return 0;
    if (k == 0) {
        memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
        return 0;
    }
    nb_tensor *ac = NULL, *bc = NULL;
    bool ta = false, tb = false;
    int64_t lda = 1, ldb = 1;
    bool is_float = a->dtype == NB_F32 || a->dtype == NB_F64;
    if (is_float && !blas_layout(n, k, a->stride[na - 2], a->stride[na - 1], &ta, &lda)) {
        if (!(ac = dense_copy(a))) return -1;
        a = ac;
        blas_layout(n, k, a->stride[na - 2], a->stride[na - 1], &ta, &lda);
    }
    if (is_float && !blas_layout(k, m, b->stride[nbd - 2], b->stride[nbd - 1], &tb, &ldb)) {
        if (!(bc = dense_copy(b))) { nb_release(ac); return -1; }
        b = bc;
        blas_layout(k, m, b->stride[nbd - 2], b->stride[nbd - 1], &tb, &ldb);
    }
    size_t es = nb_dtype_size(out->dtype);
    char *pa = nb__data(a), *pb = nb__data(b), *pc = nb__data(out);
    int threads = nb__threads();
    /* Many small products: one thread per product (BLAS runs serially inside OpenMP).
       Otherwise no OpenMP region at all: BLAS threads each product itself, and opening a
       region around it would nest BLAS's own and spawn threads on every call. */
    bool per_batch = batches >= threads && threads > 1 && n * m * k <= 64 * 64 * 64;
    gemm_plan plan = { a, b, out, &bshape, n, m, k, ta, tb, lda, ldb, es, pa, pb, pc };
    if (per_batch) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t bi = 0; bi < batches; bi++) gemm_one(&plan, bi);
    } else {
        for (int64_t bi = 0; bi < batches; bi++) gemm_one(&plan, bi);
    }
    nb_release(ac);
    nb_release(bc);
    return 0;
}
