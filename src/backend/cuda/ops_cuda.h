/* The C entry points of the CUDA backend's own kernels, one per op of kernel_list.h. */
#ifndef NB_CUDA_OPS_CUDA_H
#define NB_CUDA_OPS_CUDA_H

#include "../kernel.h"
#include "kernel_list.h"

/* nb__cuda_<name>: op <name> on the device, with the cpu kernel nb__cpu_<name>'s signature and
   meaning (out made by dispatch on the device; 0, or -1 with the error recorded). */
#define NB_CUDA_DECLARE(name) int nb__cuda_##name(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args);
NB_CUDA_KERNEL_LIST(NB_CUDA_DECLARE)
#undef NB_CUDA_DECLARE

#endif
