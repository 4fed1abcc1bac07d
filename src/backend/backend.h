/* The backend interface: what a device's backend provides (a kernel table generated from the
   op list, memory, copies, synchronisation) and the registry that dispatch picks from. */
#ifndef NB_BACKEND_H
#define NB_BACKEND_H

#include "kernel.h"

struct cgraph;
struct nb_graph_opts;

/* What a backend does with an optimised graph (the IR of src/compile/ir.h), device-neutral passes
   done: its own passes (GEMM epilogues, row groups), then, once memory is planned, its build (code
   generation, loading), and its runs. The compiler calls these through the registry only. */
typedef struct nb_lowering {
    /* Whether it runs the fused kernels of the compiler's fusion pass (NODE_FUSED nodes); when
       not, the compiler leaves every op a node of its own. */
    bool fuses;
    /* Passes of the backend's own before memory planning; 0, or -1 with an error. */
    int (*passes)(struct cgraph *g, const struct nb_graph_opts *opts);
    /* Readies the planned graph to run (code built or found in a cache); 0, or -1 with an error.
       *note gets a line (malloc'ed) when something runs slower than it could (no C compiler). */
    int (*build)(struct cgraph *g, const struct nb_graph_opts *opts, char **note);
    /* Runs the graph on inputs: an owned result, or NULL with an error. */
    nb_tensor *(*run)(struct cgraph *g, nb_tensor *const *inputs, int n);
    /* Lets go of what build made for g (loaded code). */
    void (*release)(struct cgraph *g);
} nb_lowering;

typedef struct nb_backend {
    const char *name;                   /* "cpu", "cuda" */
    nb_device_type type;
    const nb_kernel_fn *kernels;        /* NB_OP_COUNT slots, generated from ops.def; NULL = not supported */
    /* Whether the backend runs op for dtype (NULL: every dtype of the op's mask). */
    bool (*supports)(nb_op_id op, nb_dtype dtype);
    /* How many devices of this type the machine has (0: none usable). */
    int (*device_count)(void);
    /* Why device_count is 0 (the driver's words), for the "not available" error; may be NULL. */
    const char *(*why_none)(void);
    /* Device memory, behind the backend's own caching; NULL for the host's (nabla's allocator). */
    void *(*alloc)(size_t bytes, int index);
    void (*free)(void *p, size_t bytes, int index);
    /* Copies src's elements into dst: both contiguous, of one dtype and element count, one on
       this backend's device and the other on the host or a device of this backend. */
    int (*copy)(nb_tensor *dst, const nb_tensor *src);
    /* Waits for the device's queued work. */
    int (*sync)(int index);
    /* Graph mode on this backend; NULL: compiled graphs are refused on its devices. */
    const nb_lowering *lower;
} nb_backend;

/* The backend registered for a device type, or NULL. */
const nb_backend *nb__backend_get(nb_device_type type);
/* Registers b for its device type (replacing what was there; NULL b is refused); returns the one
   it replaced, so a test can put it back. */
const nb_backend *nb__backend_register(const nb_backend *b);
/* Takes a backend off the registry (tests that registered one); the cpu backend stays. */
void nb__backend_unregister(nb_device_type type);
/* The backend that t's storage lives on. */
const nb_backend *nb__backend_of(const nb_tensor *t);
/* The backend for device dev when it is usable; otherwise records "fn: device X is not available
   (...)" and returns NULL. */
const nb_backend *nb__backend_for(const char *fn, nb_device dev);
/* A fresh contiguous tensor on dev (uninitialised), owned by the caller. */
nb_tensor *nb__tensor_new_on(nb_shape shape, nb_dtype dtype, nb_device dev);
/* Copies src's elements into dst: both contiguous, of one dtype and element count, on any two
   devices. */
int nb__copy_between(nb_tensor *dst, const nb_tensor *src);
/* t itself (retained) when dense, else a dense copy on its own device made by its backend's copy
   kernel (kernels may not go back through dispatch); owned by the caller. NULL with an error
   naming fn when the backend has no copy kernel. */
nb_tensor *nb__dense_on_device(const char *fn, nb_tensor *t);
/* A copy of t on dev (dense), owned by the caller; no autograd record. */
nb_tensor *nb__to_device(nb_tensor *t, nb_device dev);
/* Moves t's elements to dev in place: t keeps its identity (so a module's parameter stays the
   optimizer's), its storage is replaced by a contiguous copy on dev. Its gradient moves too. */
int nb__tensor_move(nb_tensor *t, nb_device dev);

/* The cpu backend (src/backend/cpu/backend.c). */
extern const nb_backend nb__cpu_backend;
/* The cuda backend (src/backend/cuda/backend.c), in a build with CUDA (NABLA_HAVE_CUDA). */
extern const nb_backend nb__cuda_backend;

#endif
