/* The cuda backend: its kernel table (the elementwise ops by ops.def's fuse column, the
   hand-written kernels listed in kernel_list.h, and the runtime's own: products through cuBLAS,
   convolutions through cuDNN, empty and host_call), each entry making its tensors' device
   current first, over the runtime's memory and copies. Its
   registration (a static table the registry points at) calls no CUDA. */
#include "cuda_impl.h"
#include "kernel_list.h"

/* each op's slot by its name: NB_CUDA_SLOT_<name> = NB_OP_<ID> (a listed name that is no op of
   ops.def does not compile) */
enum {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) NB_CUDA_SLOT_##name = NB_OP_##ID,
#include "../../ops/ops.def"
#undef NB_OP
};

/* the ops this side of the backend runs itself (blas.c, conv.c, below) */
#define NB_CUDA_RUNTIME_LIST(X) X(empty) X(matmul) X(matmul_bf16) X(conv2d) X(conv2d_backward_input) \
    X(conv2d_backward_weight) X(host_call)

/* The device that a kernel call runs on, made current: out's when it is on cuda, else the first
   cuda input's. */
static int enter(const char *name, nb_tensor *out, nb_tensor *const *in, int nin) {
    const nb_tensor *t = out && out->storage->device.type == NB_CUDA ? out : NULL;
    for (int i = 0; !t && i < nin; i++)
        if (in[i] && in[i]->storage->device.type == NB_CUDA) t = in[i];
    return nb__curt_use(name, t ? nb__curt_device_of(t) : 0);
}

#define DECLARE(name) int nb__cuda_##name(nb_tensor *, nb_tensor *const *, int, const nb_op_args *);
#define WRAP(name)                                                                                 \
    static int entry_##name(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *a) { \
        if (enter("nb_" #name, out, in, nin) < 0) return -1;                                       \
        return nb__cuda_##name(out, in, nin, a);                                                   \
    }
#define SLOT(name) [NB_CUDA_SLOT_##name] = entry_##name,
/* the elementwise ops: every op of ops.def with a fuse kind (ops_elementwise.c) */
#define NB_CUDA_EW_NONE(name)
#define NB_CUDA_EW_EW(name) X_(name)
#define NB_CUDA_EW_CHEAP NB_CUDA_EW_EW
#define NB_CUDA_EW_CMP NB_CUDA_EW_EW
#define NB_CUDA_EW_MOVE NB_CUDA_EW_EW
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) NB_CUDA_EW_##fuse(name)

#define X_ DECLARE
#include "../../ops/ops.def"
#undef X_
#define X_ WRAP
#include "../../ops/ops.def"
#undef X_
NB_CUDA_KERNEL_LIST(DECLARE)
NB_CUDA_RUNTIME_LIST(DECLARE)
NB_CUDA_KERNEL_LIST(WRAP)
NB_CUDA_RUNTIME_LIST(WRAP)

static const nb_kernel_fn cuda_kernels[NB_OP_COUNT] = {
#define X_ SLOT
#include "../../ops/ops.def"
#undef X_
    NB_CUDA_KERNEL_LIST(SLOT)
    NB_CUDA_RUNTIME_LIST(SLOT)
};
#undef NB_OP

/* empty: the memory dispatch allocated is the result */
int nb__cuda_empty(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)out; (void)in; (void)nin; (void)args;
    return 0;
}

/* host_call: the device's queued work finished first, then the program's function on the host
   thread (it reads the tensors through nabla's calls, which copy what they need) */
int nb__cuda_host_call(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)out;
    if (nb__curt_sync(nb__curt_current()) < 0) return -1;
    nb_host_fn fn = (nb_host_fn)(intptr_t)args->i[0];
    int rc = fn((void *)(intptr_t)args->i[1], in, nin);
    if (rc < 0 && !nb__has_error()) nb__error("nb_host_call: the function failed without saying why");
    return rc < 0 ? -1 : 0;
}

static int cuda_count(void) { return nb__curt_count(); }

const nb_backend nb__cuda_backend = {
    .name = "cuda",
    .type = NB_CUDA,
    .kernels = cuda_kernels,
    .device_count = cuda_count,
    .why_none = nb__curt_why_none,
    .alloc = nb__curt_alloc,
    .free = nb__curt_free,
    .copy = nb__curt_copy,
    .sync = nb__curt_sync,
    .lower = NULL, /* graph mode on cuda: not built yet (docs/cuda.md) */
};
