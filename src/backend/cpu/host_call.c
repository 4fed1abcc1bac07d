/* The cpu kernel of host_call: calls the program's function on the op's tensors. */
#include "../kernel.h"

int nb__cpu_host_call(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)out;
    nb_host_fn fn = (nb_host_fn)(intptr_t)args->i[0];
    int rc = fn((void *)(intptr_t)args->i[1], in, nin);
    if (rc < 0 && !nb__has_error()) nb__error("nb_host_call: the function failed without saying why");
    return rc < 0 ? -1 : 0;
}
