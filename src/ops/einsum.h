/* nb_einsum's internals that tests/test_einsum_torch.c checks. */
#ifndef NB_OPS_EINSUM_H
#define NB_OPS_EINSUM_H

#include "nabla/ops.h"

/* nb_einsum that also writes the contraction order it took to path (room for 2 * (n - 1) ints,
   or NULL): pair k contracts the operands at positions path[2k] < path[2k+1] of the list as it
   stands then, and the result goes to the end of the list (opt_einsum's convention). */
nb_tensor *nb__einsum_path(const char *equation, nb_tensor *const *operands, int n, int *path);

#endif
