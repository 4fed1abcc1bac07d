/* The runtime side's own device code (k_rt.cu): what cuBLAS and cuDNN do not do for products.
   Plain C declarations, readable by nvcc and the C compiler. */
#ifndef NB_CUDA_RT_KERNELS_H
#define NB_CUDA_RT_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One integer product c[n, m] = a[n, k] b[k, m] (dtype: nabla's i64, i32, u8 or i8), any
   element strides for a and b, c dense with row length m; wraps around as two's complement, as
   the cpu does. On stream; returns a cudaError_t as int (0: queued). */
int nb__k_matmul_int(int dtype, const void *a, const void *b, void *c, int64_t n, int64_t k, int64_t m, int64_t ars,
                   int64_t acs, int64_t brs, int64_t bcs, void *stream);

#ifdef __cplusplus
}
#endif

#endif
