/* The cpu backend's lowering of compiled graphs: its passes (GEMM epilogues, row groups), fused
   kernels run compiled as C (jit.c) or interpreted (fused.c), and the executor (lower.c). It sees
   the graph IR (src/compile/ir.h) and the cpu kernels, nothing else of the compiler. */
#ifndef NB_CPU_LOWER_H
#define NB_CPU_LOWER_H

#include "../../../compile/ir.h"
#include "../iter.h"

/* The most operands (inputs and the output) a fused kernel may have. */
#define MAX_OPERANDS 64

/* Each op's name and number of inputs in ops.def (lower.c): generated code calls an op's formula
   by its name, and the interpreter passes a unary op its scalars. */
typedef struct nb_cpu_op_info {
    const char *name;
    int nin;
} nb_cpu_op_info;
extern const nb_cpu_op_info nb__cpu_op_info[NB_OP_COUNT];

/* ---- fused kernels (fused.c, jit.c) ---- */
/* Runs fused kernel k for the values' runtime tensors. 0, or -1 with an error. */
int nb__kernel_run(fkernel *k, nb_tensor *out, nb_tensor *const *in);
/* Runs the n kernels of a row group chunk of rows by chunk of rows: out[i] and in[i] are kernel
   i's tensors. */
void nb__kernel_run_group(fkernel *const *k, int n, nb_tensor *const *out, nb_tensor *const *const *in);
/* Runs fused kernel k on rows [r0, r1) and columns [c0, c1) of product `batch` (tile layout). */
void nb__kernel_run_tile(const fkernel *k, nb_tensor *out, nb_tensor *const *in, int64_t batch, int64_t r0, int64_t r1,
                         int64_t c0, int64_t c1);
/* Compiles the graph's fused kernels as one C file (or finds it in the disk cache) and binds
   them; kernels that cannot be compiled stay interpreted and *note says why. */
int nb__kernels_build(cgraph *g, const nb_graph_opts *opts, char **note);
/* Unloads a kernel library that nb__kernels_build loaded. */
void nb__kernels_unload(void *dl);

/* The cpu's lowering, which the cpu backend's table names. */
extern const nb_lowering nb__cpu_lowering;

#endif
