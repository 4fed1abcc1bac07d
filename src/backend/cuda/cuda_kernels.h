/* The CUDA backend's contract between its C side (the kernel entry points dispatch calls, which
   read nabla's tensors) and its .cu files (the device code, which knows nothing of nabla's core
   structs: core_impl.h uses C11 atomics that nvcc's C++ cannot read). Plain C, readable by both. */
#ifndef NB_CUDA_KERNELS_H
#define NB_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NBC_MAX_DIMS 8 /* nabla/core.h's NB_MAX_DIMS */

/* A tensor as device code sees it: its first element on the device, its dtype (nabla/core.h's
   nb_dtype value), and its sizes and strides in elements (any strides: views, broadcasts with
   stride 0, negative never). */
typedef struct nbc_view {
    void *data;
    int dtype;
    int ndim;
    int64_t numel;
    int64_t shape[NBC_MAX_DIMS];
    int64_t stride[NBC_MAX_DIMS];
} nbc_view;

/* The stream every kernel of the current device is queued on (a cudaStream_t), from the runtime. */
void *nbc_stream(void);
/* Temporary device memory from the backend's caching allocator, in stream order; NULL when the
   device has none left (the allocator has recorded the error). */
void *nbc_scratch_alloc(size_t bytes);
/* Gives back memory from nbc_scratch_alloc (bytes as asked). */
void nbc_scratch_free(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
