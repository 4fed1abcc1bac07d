/* Device helpers shared by the CUDA backend's kernels (k_*.cu): element offsets of strided views,
   the element conversions of nabla's dtypes bit for bit as src/core/dtype.c and the cpu casts do
   them, launch sizes and the one error path. Included by .cu files only. */
#ifndef NB_CUDA_K_COMMON_CUH
#define NB_CUDA_K_COMMON_CUH

#include "cuda_kernels.h"
#include "nabla/core.h" /* nb_dtype's values; the header reads as C++ */
#include "../../core/portable.h" /* the f16 and bf16 conversions, Philox */
#include <cuda_runtime.h>
#include <stdint.h>

/* The formulas every backend evaluates, with kmath.h's float exp and erf, so that the kernels'
   exp, sigmoid, gelu, erf and softmax evaluate the cpu's very polynomials (both headers mark
   their functions host and device where nvcc reads them). */
#include "../formulas.h"

/* Threads per block of the elementwise kernels and of the block-per-row reductions (a power of
   two: the reductions' trees halve it). */
#define NBC_BLOCK 256

/* The queue every kernel goes on. */
static inline cudaStream_t nb__k_queue(void) { return (cudaStream_t)nb__k_stream(); }

/* Blocks for n elements at one per thread; grid-stride loops cover what a capped grid misses. */
static inline unsigned nb__k_blocks(int64_t n) {
    int64_t b = (n + NBC_BLOCK - 1) / NBC_BLOCK;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b);
}

/* What a launcher returns: 0, or the launch's error (a cudaError_t). */
static inline int nb__k_launched(void) { return (int)cudaGetLastError(); }

/* The element offset, by v's strides, of the element with row-major index i over shape_of's shape:
   an operand read as broadcast to the output's shape (its strides, the output's shape). */
__device__ __forceinline__ int64_t nb__k_offset_as(const nb__k_view &shape_of, const nb__k_view &v, int64_t i) {
    if (shape_of.ndim == 1 && i < shape_of.shape[0]) return i * v.stride[0]; /* no division */
    int64_t off = 0;
    for (int d = shape_of.ndim - 1; d >= 0; d--) {
        int64_t n = shape_of.shape[d];
        off += (i % n) * v.stride[d];
        i /= n;
    }
    return off;
}

/* Whether v's strides walk shape_of's shape densely in row-major order (size-1 axes aside). */
static inline bool nb__k_dense_as(const nb__k_view &shape_of, const nb__k_view &v) {
    if (v.ndim != shape_of.ndim) return false;
    int64_t next = 1;
    for (int d = shape_of.ndim - 1; d >= 0; d--) {
        if (v.shape[d] != shape_of.shape[d] || (shape_of.shape[d] != 1 && v.stride[d] != next)) return false;
        next *= shape_of.shape[d];
    }
    return true;
}

/* When the output and every operand (views broadcast to its shape) walk its shape densely, all
   become 1-D views of out.numel elements, so each element's offset is its index, without the
   division per axis of a strided walk. The launchers of elementwise kernels call it on their
   copies of the views. */
static inline void nb__k_flatten_dense(nb__k_view *out, nb__k_view *const *in, int n) {
    if (!nb__k_dense_as(*out, *out)) return;
    for (int k = 0; k < n; k++)
        if (!nb__k_dense_as(*out, *in[k])) return;
    for (int k = -1; k < n; k++) {
        nb__k_view *v = k < 0 ? out : in[k];
        v->ndim = 1;
        v->shape[0] = out->numel;
        v->stride[0] = 1;
    }
}

/* The element offset in v of its element with row-major index i. */
__device__ __forceinline__ int64_t nb__k_offset(const nb__k_view &v, int64_t i) { return nb__k_offset_as(v, v, i); }

/* Element i of a dense or strided array of dtype as a double (src/core/dtype.c's nb__load). */
__device__ __forceinline__ double nb__k_load(const void *p, int dtype, int64_t i) {
    switch (dtype) {
    case NB_F32: return ((const float *)p)[i];
    case NB_F64: return ((const double *)p)[i];
    case NB_F16: return nb__half_to_float(((const uint16_t *)p)[i]);
    case NB_BF16: return nb__bf16_to_f32(((const uint16_t *)p)[i]);
    case NB_I64: return (double)((const int64_t *)p)[i];
    case NB_I32: return ((const int32_t *)p)[i];
    case NB_U8: return ((const uint8_t *)p)[i];
    case NB_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return ((const int8_t *)p)[i];
    }
}

/* Stores v as element i of dtype the way the cpu cast stores it (src/backend/cpu/elementwise.c's
   st_*): floats rounded, integers truncated toward zero and clamped, NaN 0, i8 through int32. */
__device__ __forceinline__ void nb__k_store_cast(void *p, int dtype, int64_t i, double v) {
    switch (dtype) {
    case NB_F32: ((float *)p)[i] = (float)v; break;
    case NB_F64: ((double *)p)[i] = v; break;
    case NB_F16: ((uint16_t *)p)[i] = nb__float_to_half((float)v); break;
    case NB_BF16: ((uint16_t *)p)[i] = nb__f32_to_bf16((float)v); break;
    case NB_I64: ((int64_t *)p)[i] = nbf_sat_i64(v); break;
    case NB_I32:
        ((int32_t *)p)[i] = (int32_t)(int64_t)(v != v ? 0 : v > 2147483647.0 ? 2147483647.0 : v < -2147483648.0 ? -2147483648.0 : v);
        break;
    case NB_U8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)(v != v ? 0 : v > 1e18 ? 0 : v < -1e18 ? 0 : v); break;
    case NB_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: /* i8: core_impl.h's nb__to_i8 */
        ((int8_t *)p)[i] = v != v || v >= 2147483648.0 || v <= -2147483649.0 ? 0 : (int8_t)(uint8_t)(uint32_t)(int32_t)v;
    }
}

/* Runs f(T()) with T the storage type of dtype among those most kernels see after dispatch's
   conversions (f16 and bf16 arrive as f32): f32, f64, i64, i32, u8 (and bool), i8. Returns the
   launch result, or cudaErrorInvalidValue for a dtype outside the set. */
template <typename F> static inline int nb__k_by_num_dtype(int dtype, F f) {
    switch (dtype) {
    case NB_F32: return f(float());
    case NB_F64: return f(double());
    case NB_I64: return f(int64_t());
    case NB_I32: return f(int32_t());
    case NB_U8:
    case NB_BOOL: return f(uint8_t());
    case NB_I8: return f(int8_t());
    default: return (int)cudaErrorInvalidValue;
    }
}

/* The same over f32 and f64 only (the float ops). */
template <typename F> static inline int nb__k_by_float_dtype(int dtype, F f) {
    switch (dtype) {
    case NB_F32: return f(float());
    case NB_F64: return f(double());
    default: return (int)cudaErrorInvalidValue;
    }
}

/* The element's bits as an unsigned type of its size, for kernels that move or add bits: f(T()). */
template <typename F> static inline int nb__k_by_size(int dtype, F f) {
    switch (dtype) {
    case NB_F64: case NB_I64: return f(uint64_t());
    case NB_F32: case NB_I32: return f(uint32_t());
    case NB_F16: case NB_BF16: return f(uint16_t());
    default: return f(uint8_t());
    }
}

/* A grid-stride loop of i over [0, n): one element per thread, the grid capped by nb__k_blocks. */
#define NBC_GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* A block's fixed-order sum of one value per thread (blockDim.x == NBC_BLOCK): a halving tree
   over shared memory, the same pairs on every run. Every thread gets the total. */
template <typename A> __device__ A nb__k_block_sum(A v, A *shared) {
    int t = threadIdx.x;
    shared[t] = v;
    __syncthreads();
    for (int w = NBC_BLOCK / 2; w > 0; w /= 2) {
        if (t < w) shared[t] = shared[t] + shared[t + w];
        __syncthreads();
    }
    A total = shared[0];
    __syncthreads();
    return total;
}

#endif
