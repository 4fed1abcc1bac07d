/* The cpu backend: its kernel table, generated from the one op list, over host memory, and its
   lowering of compiled graphs (lower/). */
#include "../backend.h"
#include "lower/lower.h"
#include <string.h>

#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) int nb__cpu_##name(nb_tensor *, nb_tensor *const *, int, const nb_op_args *);
#define NB_OP_NO_KERNEL(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx)
#include "../../ops/ops.def"
#undef NB_OP
#undef NB_OP_NO_KERNEL

static const nb_kernel_fn cpu_kernels[NB_OP_COUNT] = {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) [NB_OP_##ID] = nb__cpu_##name,
#define NB_OP_NO_KERNEL(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx)
#include "../../ops/ops.def"
#undef NB_OP
#undef NB_OP_NO_KERNEL
};

/* Host to host: both tensors are dense. */
static int cpu_copy(nb_tensor *dst, const nb_tensor *src) {
    memcpy(nb__data(dst), nb__data(src), (size_t)dst->numel * nb__esize(dst->dtype));
    return 0;
}

/* Host memory comes from nabla's caching allocator, beside the storage header, so the cpu
   backend needs no alloc or free of its own (storage on the host has no ops). */
const nb_backend nb__cpu_backend = {
    .name = "cpu",
    .type = NB_CPU,
    .kernels = cpu_kernels,
    .copy = cpu_copy,
    .lower = &nb__cpu_lowering,
};
