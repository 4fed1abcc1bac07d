/* How a strided matrix product's operands are handed to a BLAS (row-major, or read transposed in
   place) and where each batch of a broadcast batched product starts: shared by the cpu's
   products (src/backend/cpu/linalg.c) and the CUDA backend's (src/backend/cuda/blas.c). */
#ifndef NB_GEMM_LAYOUT_H
#define NB_GEMM_LAYOUT_H

#include "../core/core_impl.h"

/* Whether a rows x cols matrix with element strides (rs, cs) can be handed to BLAS, and how:
   *trans false for row-major ((i, j) at i * ld + j), true for transposed ((i, j) at j * ld + i). */
static inline bool nb__blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans, int64_t *ld) {
    int64_t min_cols = cols > 1 ? cols : 1, min_rows = rows > 1 ? rows : 1;
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= min_cols)) {
        *trans = false;
        *ld = rows == 1 ? min_cols : rs;
        return true;
    }
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= min_rows)) {
        *trans = true;
        *ld = cols == 1 ? min_rows : cs;
        return true;
    }
    return false;
}

/* Element offset of batch b of t (its last two axes the matrix), broadcasting t's batch axes
   against the product's batch shape bshape. */
static inline int64_t nb__batch_offset(const nb_tensor *t, const nb_shape *bshape, int64_t b) {
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

#endif
