/* The CPU backend's kernel table, generated from the one op list. Views need no kernel. */
#include "../../ops/ops_impl.h"

#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes) int nb__cpu_##name(nb_tensor *, nb_tensor *const *, int, const nb_op_args *);
#include "../../ops/ops.def"
#undef NB_OP

/* view ops share storage and run no kernel */
int nb__cpu_view(nb_tensor *o, nb_tensor *const *i, int n, const nb_op_args *a) { (void)o; (void)i; (void)n; (void)a; return 0; }
int nb__cpu_permute(nb_tensor *o, nb_tensor *const *i, int n, const nb_op_args *a) { (void)o; (void)i; (void)n; (void)a; return 0; }
int nb__cpu_expand(nb_tensor *o, nb_tensor *const *i, int n, const nb_op_args *a) { (void)o; (void)i; (void)n; (void)a; return 0; }
int nb__cpu_slice(nb_tensor *o, nb_tensor *const *i, int n, const nb_op_args *a) { (void)o; (void)i; (void)n; (void)a; return 0; }
int nb__cpu_detach(nb_tensor *o, nb_tensor *const *i, int n, const nb_op_args *a) { (void)o; (void)i; (void)n; (void)a; return 0; }

const nb_kernel_fn nb__cpu_kernels[NB_OP_COUNT] = {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes) [NB_OP_##ID] = nb__cpu_##name,
#include "../../ops/ops.def"
#undef NB_OP
};
