/* Matrix products on cuda: f32 and f64 through cuBLAS's strided-batched GEMMs (TF32 only when
   nb_cuda_set_allow_tf32 allows it), autocast's bf16 operands through cublasGemmStridedBatchedEx
   with f32 accumulation, integers through k_rt.cu. Batch axes broadcast and transposed
   operands are read in place as the cpu's do (src/backend/gemm_layout.h, shared with it). */
#include "cuda_impl.h"
#include "libs.h"
#include "../gemm_layout.h"
#include "rt_kernels.h"
#include <limits.h>

/* Whether t's batch offsets are b * *step for every batch b (one strided-batched call). */
static bool affine_batches(const nb_tensor *t, const nb_shape *bshape, int64_t batches, int64_t *step) {
    *step = batches > 1 ? nb__batch_offset(t, bshape, 1) : 0;
    for (int64_t b = 2; b < batches; b++)
        if (nb__batch_offset(t, bshape, b) != b * *step) return false;
    return true;
}

static int blas_fail(const char *fn, int st) {
    nb__error("%s: cuBLAS: %s", fn, nb__cublas_fn.cublasGetStatusString((cublasStatus_t)st));
    return -1;
}

/* out = a @ b on the current device (bf16: bf16 operands, an f32 result). */
static int run_matmul(const char *fn, nb_tensor *out, nb_tensor *const *in, bool bf16) {
    nb_tensor *a = in[0], *b = in[1];
    int na = a->shape.ndim, nbd = b->shape.ndim, no = out->shape.ndim;
    int64_t n = out->shape.dim[no - 2], m = out->shape.dim[no - 1], k = a->shape.dim[na - 1];
    nb_shape bshape = out->shape;
    bshape.ndim -= 2;
    int64_t batches = nb__shape_numel(&bshape);
    size_t es = nb_dtype_size(out->dtype), ea = nb_dtype_size(a->dtype);
    cudaStream_t stream = nb__curt_stream_of(nb__curt_current());
    if (!stream) return -1;
    if (out->numel == 0) return 0;
    if (k == 0) {
        cudaError_t e = cudaMemsetAsync(nb__data(out), 0, (size_t)out->numel * es, stream);
        return e == cudaSuccess ? 0 : nb__curt_fail(fn, "cudaMemsetAsync", e);
    }
    if (!bf16 && out->dtype != NB_F32 && out->dtype != NB_F64) { /* integers: k_rt.cu, a launch per batch */
        for (int64_t bi = 0; bi < batches; bi++) {
            char *A = (char *)nb__data(a) + nb__batch_offset(a, &bshape, bi) * (int64_t)es;
            char *B = (char *)nb__data(b) + nb__batch_offset(b, &bshape, bi) * (int64_t)es;
            char *C = (char *)nb__data(out) + bi * n * m * (int64_t)es;
            int e = nb__k_matmul_int(out->dtype, A, B, C, n, k, m, a->stride[na - 2], a->stride[na - 1], b->stride[nbd - 2],
                                   b->stride[nbd - 1], stream);
            if (e) return nb__curt_fail(fn, "integer product kernel", (cudaError_t)e);
        }
        return 0;
    }
    cublasHandle_t h = nb__cublas(fn);
    if (!h) return -1;
    nb_tensor *ac = NULL, *bc = NULL;
    bool ta = false, tb = false;
    int64_t lda = 1, ldb = 1, sa = 0, sb = 0;
    int rc = -1;
    if (!nb__blas_layout(n, k, a->stride[na - 2], a->stride[na - 1], &ta, &lda)) {
        if (!(ac = nb__dense_on_device(fn, a))) goto done;
        a = ac;
        nb__blas_layout(n, k, a->stride[na - 2], a->stride[na - 1], &ta, &lda);
    }
    if (!nb__blas_layout(k, m, b->stride[nbd - 2], b->stride[nbd - 1], &tb, &ldb)) {
        if (!(bc = nb__dense_on_device(fn, b))) goto done;
        b = bc;
        nb__blas_layout(k, m, b->stride[nbd - 2], b->stride[nbd - 1], &tb, &ldb);
    }
    if (n > INT_MAX || m > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX) {
        nb__error("%s: not supported on cuda yet: a product with a side or row stride over %d elements", fn, INT_MAX);
        goto done;
    }
    /* one strided-batched call when both operands step evenly through the batches, else one call
       per batch; row-major C = A B is column-major C^T = B^T A^T */
    bool one_call = affine_batches(a, &bshape, batches, &sa) && affine_batches(b, &bshape, batches, &sb) && batches <= INT_MAX;
    int64_t calls = one_call ? 1 : batches, per_call = one_call ? batches : 1;
    cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    for (int64_t c = 0; c < calls; c++) {
        const char *A = (const char *)nb__data(a) + (one_call ? 0 : nb__batch_offset(a, &bshape, c)) * (int64_t)ea;
        const char *B = (const char *)nb__data(b) + (one_call ? 0 : nb__batch_offset(b, &bshape, c)) * (int64_t)ea;
        char *C = (char *)nb__data(out) + (one_call ? 0 : c * n * m) * (int64_t)es;
        cublasStatus_t st;
        if (bf16) {
            const float one = 1.0f, zero = 0.0f;
            st = nb__cublas_fn.cublasGemmStridedBatchedEx(h, opb, opa, (int)m, (int)n, (int)k, &one, B, CUDA_R_16BF, (int)ldb, sb, A,
                                                         CUDA_R_16BF, (int)lda, sa, &zero, C, CUDA_R_32F, (int)m, n * m,
                                                         (int)per_call, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        } else if (out->dtype == NB_F32) {
            const float one = 1.0f, zero = 0.0f;
            st = nb__cublas_fn.cublasSgemmStridedBatched(h, opb, opa, (int)m, (int)n, (int)k, &one, (const float *)B, (int)ldb, sb,
                                                        (const float *)A, (int)lda, sa, &zero, (float *)C, (int)m, n * m,
                                                        (int)per_call);
        } else {
            const double one = 1.0, zero = 0.0;
            st = nb__cublas_fn.cublasDgemmStridedBatched(h, opb, opa, (int)m, (int)n, (int)k, &one, (const double *)B, (int)ldb,
                                                        sb, (const double *)A, (int)lda, sa, &zero, (double *)C, (int)m, n * m,
                                                        (int)per_call);
        }
        if (st != CUBLAS_STATUS_SUCCESS) {
            blas_fail(fn, st);
            goto done;
        }
    }
    rc = 0;
done:
    nb_release(ac);
    nb_release(bc);
    return rc;
}

int nb__cuda_matmul(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    return run_matmul("nb_matmul", out, in, false);
}

int nb__cuda_matmul_bf16(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    return run_matmul("nb_matmul", out, in, true);
}
