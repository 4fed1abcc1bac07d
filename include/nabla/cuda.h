/* nabla cuda: the CUDA backend's own switches and counters (devices, the caching allocator's
   memory, TF32). Tensors move with nb_to / nb_module_to and nb_device_parse("cuda"); these
   functions also work in a build without CUDA (no device, or an error saying why).
   docs/cuda.md says what runs on the GPU. */
#ifndef NABLA_CUDA_H
#define NABLA_CUDA_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The caching device allocator's counters for one device, in bytes. */
typedef struct nb_cuda_memory {
    size_t allocated;       /* held by live tensors and scratch (rounded to the allocator's classes) */
    size_t reserved;        /* taken from the driver: allocated plus cached */
    size_t peak;            /* the most allocated since the start or nb_cuda_reset_peak */
    size_t cached;          /* free blocks kept for reuse */
    int64_t device_mallocs; /* cudaMalloc calls made */
    int64_t reuses;         /* requests served from the cache */
} nb_cuda_memory;

/* How many CUDA devices nabla can use (0 without CUDA in this build, a driver or a GPU). */
NB_API int nb_cuda_device_count(void);
/* Whether at least one CUDA device is usable. */
NB_API bool nb_cuda_is_available(void);
/* Why no CUDA device is usable (the driver's words, or that this build has no CUDA), or "". */
NB_API const char *nb_cuda_why_unavailable(void);
/* Fills *out with device's allocator counters; 0, or -1 with an error (no such device). */
NB_API int nb_cuda_memory_stats(int device, nb_cuda_memory *out);
/* Sets device's peak to what is allocated now; 0, or -1 with an error. */
NB_API int nb_cuda_reset_peak(int device);
/* Gives device's cached free blocks back to the driver; 0, or -1 with an error. */
NB_API int nb_cuda_empty_cache(int device);
/* Lets f32 products and convolutions use TF32 tensor cores (PyTorch's allow_tf32); off by default. */
NB_API void nb_cuda_set_allow_tf32(bool allow);
/* Whether TF32 is allowed (nb_cuda_set_allow_tf32). */
NB_API bool nb_cuda_allow_tf32(void);

#ifdef __cplusplus
}
#endif

#endif
