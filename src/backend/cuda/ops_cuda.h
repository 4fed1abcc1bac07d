/* The C entry points of the CUDA backend's own kernels: one per op of kernel_list.h, and one per
   elementwise op of ops.def (a fuse kind other than NONE). */
#ifndef NB_CUDA_OPS_CUDA_H
#define NB_CUDA_OPS_CUDA_H

#include "../kernel.h"
#include "kernel_list.h"

/* nb__cuda_<name>: op <name> on the device, with the cpu backend's kernel's signature and
   meaning (out made by dispatch on the device; 0, or -1 with the error recorded). */
#define NB_CUDA_DECLARE(name) int nb__cuda_##name(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args);
NB_CUDA_KERNEL_LIST(NB_CUDA_DECLARE)
#define NB_CUDA_DECLARE_NONE(name)
#define NB_CUDA_DECLARE_EW(name) NB_CUDA_DECLARE(name)
#define NB_CUDA_DECLARE_CHEAP NB_CUDA_DECLARE_EW
#define NB_CUDA_DECLARE_CMP NB_CUDA_DECLARE_EW
#define NB_CUDA_DECLARE_MOVE NB_CUDA_DECLARE_EW
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) NB_CUDA_DECLARE_##fuse(name)
#include "../../ops/ops.def"
#undef NB_OP
#undef NB_CUDA_DECLARE_NONE
#undef NB_CUDA_DECLARE_EW
#undef NB_CUDA_DECLARE_CHEAP
#undef NB_CUDA_DECLARE_CMP
#undef NB_CUDA_DECLARE_MOVE
#undef NB_CUDA_DECLARE

#endif
