/* The CUDA caching allocator's size classes, as pure functions (the tests check them without a
   GPU): what a request of n bytes is rounded to, and which free list a class's blocks sit in. */
#ifndef NB_CUDA_ALLOC_CLASS_H
#define NB_CUDA_ALLOC_CLASS_H

#include <stddef.h>
#include <stdint.h>

#define NB_CUDA_SMALL_STEP ((size_t)512)               /* up to 1 MiB: multiples of 512 bytes */
#define NB_CUDA_SMALL_MAX ((size_t)1 << 20)
#define NB_CUDA_LARGE_STEP ((size_t)2 << 20)           /* above: multiples of 2 MiB */
#define NB_CUDA_BUCKETS 1024

/* The bytes a request of n takes (its class), or 0 when rounding up would overflow. n = 0 takes
   the smallest class. */
static inline size_t nb__cuda_size_class(size_t n) {
    size_t step = n <= NB_CUDA_SMALL_MAX ? NB_CUDA_SMALL_STEP : NB_CUDA_LARGE_STEP;
    if (n == 0) return NB_CUDA_SMALL_STEP;
    if (n > SIZE_MAX - (step - 1)) return 0;
    return (n + step - 1) / step * step;
}

/* The free-list bucket of a class (classes share buckets; a list holds each size it meets). */
static inline unsigned nb__cuda_bucket(size_t cls) {
    return (unsigned)((cls / NB_CUDA_SMALL_STEP) % NB_CUDA_BUCKETS);
}

#endif
