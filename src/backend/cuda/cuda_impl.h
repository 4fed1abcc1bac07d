/* The CUDA backend's C side, shared by its files: the runtime (devices, streams, the caching
   allocator, copies), the libraries opened at first use (cuBLAS, cuDNN), and error recording.
   Never included by the .cu files (they see cuda_kernels.h only). */
#ifndef NB_CUDA_IMPL_H
#define NB_CUDA_IMPL_H

#include "../backend.h"
#include "cuda_kernels.h"
#include "alloc_class.h"
#include <cuda_runtime_api.h>

/* How many devices the driver shows (0 without a driver or GPU, quietly); asked once. */
int nb__curt_count(void);
/* Why there is no device (a driver or runtime message), or "" when there are some. */
const char *nb__curt_why_none(void);
/* Makes device index current on this thread (its stream made at first use); 0, or -1 with an
   error naming fn. */
int nb__curt_use(const char *fn, int index);
/* The current device's index on this thread (after nb__curt_use). */
int nb__curt_current(void);
/* The stream of device index (made at first use), or NULL with an error. */
cudaStream_t nb__curt_stream_of(int index);
/* Records "fn: cuda:N: what: <runtime's message>" for a failed runtime call; returns -1. */
int nb__curt_fail(const char *fn, const char *what, cudaError_t e);
/* The device that a cuda tensor lives on. */
static inline int nb__curt_device_of(const nb_tensor *t) { return t->storage->device.index; }

/* The caching allocator (runtime.c). */
void *nb__curt_alloc(size_t bytes, int index);
void nb__curt_free(void *p, size_t bytes, int index);
int nb__curt_copy(nb_tensor *dst, const nb_tensor *src);
int nb__curt_sync(int index);

/* Whether f32 products and convolutions may use TF32 (nb_cuda_set_allow_tf32). */
bool nb__curt_tf32(void);
/* The cuBLAS handle of the current device, on its stream, with the math mode that the TF32
   switch asks for; NULL with an error ("cuda: cannot load libcublas.so.13: ...") otherwise. */
void *nb__cublas(const char *fn);
/* The cuDNN handle of the current device, on its stream; NULL with an error otherwise. */
void *nb__cudnn(const char *fn);

#endif
