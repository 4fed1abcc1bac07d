/* nabla/cuda.h in a build without CUDA: no device, and errors that say why. */
#include "../../core/core_impl.h"
#include "nabla/cuda.h"
#include <string.h>

#ifndef NABLA_HAVE_CUDA
int nb_cuda_device_count(void) { return 0; }

bool nb_cuda_is_available(void) { return false; }

const char *nb_cuda_why_unavailable(void) { return "this build of nabla has no cuda backend (built with NABLA_CUDA=OFF or without nvcc)"; }

int nb_cuda_memory_stats(int device, nb_cuda_memory *out) {
    if (out) memset(out, 0, sizeof *out);
    nb__error("nb_cuda_memory_stats: device cuda:%d is not available: this build of nabla has no cuda backend", device);
    return -1;
}

int nb_cuda_reset_peak(int device) {
    nb__error("nb_cuda_reset_peak: device cuda:%d is not available: this build of nabla has no cuda backend", device);
    return -1;
}

int nb_cuda_empty_cache(int device) {
    nb__error("nb_cuda_empty_cache: device cuda:%d is not available: this build of nabla has no cuda backend", device);
    return -1;
}

/* the switch is kept (a program may set it before it knows whether a GPU is there) */
static _Atomic bool allow_tf32;

void nb_cuda_set_allow_tf32(bool allow) { allow_tf32 = allow; }

bool nb_cuda_allow_tf32(void) { return allow_tf32; }
#endif
