/* Kernel types: what a backend's kernel is handed (the op's id, its arguments, its tensors).
   Below autograd and ops: a backend includes this and core, nothing above. */
#ifndef NB_KERNEL_H
#define NB_KERNEL_H

#include "../core/core_impl.h"
#include "op_ids.h"


/* The arguments of one op call beside its input tensors: axes, sizes, scalars, a shape, a
   dtype, and the device a creation op (or `to`) makes its result on. */
typedef struct nb_op_args {
    int64_t i[NB_MAX_DIMS + 2];
    double f[8]; /* f[6..7]: values derived at run time (the optimizer update's bias corrections) */
    nb_shape shape;
    nb_dtype dtype;
    nb_device device;
} nb_op_args;

/* The convolution ops' args (conv2d and its two gradients): i[0..1] stride, i[2..3] padding,
   i[4..5] dilation, i[6] groups, and i[NB_CONV_ARG_BF16] nonzero for products in bf16 with f32
   accumulation (autocast), which the gradients of such a convolution inherit. */
#define NB_CONV_ARG_BF16 7

/* A kernel writes out (allocated by dispatch on the kernel's backend, shaped by inference) from
   in; 0 on success, -1 with the error recorded. */
typedef int (*nb_kernel_fn)(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args);

/* A function of the program's own that the host_call op runs on its tensors, reading and writing
   them: graph mode's way to keep a side effect (DDP's gradient allreduce) that every replay must
   make, in its place among the ops. args.i[0] and i[1] of the op hold fn and ctx. 0, or -1 with
   the error recorded. */
typedef int (*nb_host_fn)(void *ctx, nb_tensor *const *t, int n);

/* The fused optimizer updates: args.i[0] is the kind; see src/ops/optim_ops.c. */
enum {
    NB_UPDATE_SGD, NB_UPDATE_ADAM, NB_UPDATE_RMSPROP, NB_UPDATE_ADAGRAD,
    NB_UPDATE_NADAM, NB_UPDATE_RADAM, NB_UPDATE_ADAMAX, NB_UPDATE_ADADELTA,
    NB_UPDATE_KINDS /* the number of kinds */
};

#endif
