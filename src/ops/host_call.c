/* The host_call op: a function of the program's own run on tensors, in place, as one op of the
   graph. Eagerly it is a plain call; under nb_compile the tracer records it like any in-place op,
   so every replay calls the function again at the same point, after what makes its tensors and
   before what reads them (DDP's gradient allreduce between backward and the optimizer step). */
#include "ops_impl.h"

int nb__infer_host_call(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    if (nin < 1) {
        nb__error("nb_%s: needs at least one tensor", fn);
        return -1;
    }
    if (!args->i[0]) {
        nb__error("nb_%s: the function is NULL", fn);
        return -1;
    }
    out->shape = in[0]->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

int nb__host_call(nb_host_fn fn, void *ctx, nb_tensor *const *t, int n) {
    nb_op_args a = { .i = { (int64_t)(intptr_t)fn, (int64_t)(intptr_t)ctx } };
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *r = nb__dispatch(NB_OP_HOST_CALL, t, n, &a);
    nb_set_grad_enabled(prev);
    if (!r) return -1;
    nb_release(r);
    return 0;
}
