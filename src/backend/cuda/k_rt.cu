/* The runtime side's device code: integer matrix products (cuBLAS has none that wrap around as
   nabla's integers do), one thread per element of the result, summed in order of k so a run is
   bit-identical to any other. Kernels are static (internal linkage): libnabla exports nb_
   symbols only. */
#include "rt_kernels.h"
#include <cuda_runtime.h>

namespace {

template <typename T, typename UT>
__global__ void matmul_int_kernel(const T *a, const T *b, T *c, int64_t n, int64_t k, int64_t m, int64_t ars, int64_t acs,
                                  int64_t brs, int64_t bcs) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * m) return;
    int64_t i = idx / m, j = idx % m;
    UT s = 0;
    for (int64_t q = 0; q < k; q++) s += (UT)a[i * ars + q * acs] * (UT)b[q * brs + j * bcs];
    c[idx] = (T)s;
}

template <typename T, typename UT>
cudaError_t launch(const void *a, const void *b, void *c, int64_t n, int64_t k, int64_t m, int64_t ars, int64_t acs,
                   int64_t brs, int64_t bcs, cudaStream_t s) {
    int64_t total = n * m;
    unsigned blocks = (unsigned)((total + 255) / 256);
    matmul_int_kernel<T, UT><<<blocks, 256, 0, s>>>((const T *)a, (const T *)b, (T *)c, n, k, m, ars, acs, brs, bcs);
    return cudaGetLastError();
}

} // namespace

extern "C" int nb__k_matmul_int(int dtype, const void *a, const void *b, void *c, int64_t n, int64_t k, int64_t m,
                              int64_t ars, int64_t acs, int64_t brs, int64_t bcs, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (n * m == 0) return 0;
    switch (dtype) {
    case 4: return (int)launch<int64_t, uint64_t>(a, b, c, n, k, m, ars, acs, brs, bcs, s); /* NB_I64 */
    case 5: return (int)launch<int32_t, uint32_t>(a, b, c, n, k, m, ars, acs, brs, bcs, s); /* NB_I32 */
    case 6: return (int)launch<uint8_t, unsigned>(a, b, c, n, k, m, ars, acs, brs, bcs, s); /* NB_U8 */
    case 8: return (int)launch<int8_t, unsigned>(a, b, c, n, k, m, ars, acs, brs, bcs, s);  /* NB_I8 */
    default: return (int)cudaErrorInvalidValue;
    }
}
