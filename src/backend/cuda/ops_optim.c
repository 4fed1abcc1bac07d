/* The CUDA backend's entry point of the fused optimizer updates (k_optim.cu). The step count,
   the coefficients and NAdam's mu_product are a few numbers read and written once per step:
   the host reads them, forms the step's coefficients with the cpu's own nb__optim_begin (so
   the two backends cannot drift apart), and writes the new step back. */
#include "ops_cuda.h"
#include "ops_util.h"
#include "../prep.h"

_Static_assert((int)NBC_UPDATE_SGD == (int)NB_UPDATE_SGD && (int)NBC_UPDATE_ADAM == (int)NB_UPDATE_ADAM &&
                   (int)NBC_UPDATE_RMSPROP == (int)NB_UPDATE_RMSPROP && (int)NBC_UPDATE_ADAGRAD == (int)NB_UPDATE_ADAGRAD &&
                   (int)NBC_UPDATE_NADAM == (int)NB_UPDATE_NADAM && (int)NBC_UPDATE_RADAM == (int)NB_UPDATE_RADAM &&
                   (int)NBC_UPDATE_ADAMAX == (int)NB_UPDATE_ADAMAX && (int)NBC_UPDATE_ADADELTA == (int)NB_UPDATE_ADADELTA,
               "cuda_kernels.h's update kinds are kernel.h's");

/* Writes the host tensor h's elements back into t (on the device, or the host). */
static int write_back(const char *fn, nb_tensor *t, nb_tensor *h) {
    size_t bytes = (size_t)t->numel * nb_dtype_size(t->dtype);
    atomic_fetch_add_explicit(&t->storage->version, 1, memory_order_relaxed);
    if (t->storage->device.type == NB_CPU) {
        memcpy(nb__data(t), nb__data(h), bytes);
        return 0;
    }
    return nb__cu_check(fn, nb__k_upload(nb__data(t), nb__data(h), bytes));
}

/* in: param, grad, step (i64, 0-d), coefficients (f64 [6]), state... (NAdam: then mu_product);
   all of the parameter's shape dense (inference checked it). */
int nb__cuda_optim_update(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    const char *fn = "optim_update";
    bool nadam = args->i[0] == NB_UPDATE_NADAM;
    nb_tensor *host[8] = { 0 }, *hin[8] = { 0 };
    if (nin > 8 || nin < 4) {
        nb__error("nb_%s: cuda: %d tensors, not 4 to 8", fn, nin);
        return -1;
    }
    int rc = -1;
    for (int k = 0; k < nin; k++) hin[k] = in[k];
    if (!(host[2] = nb__cu_to_host(fn, in[2])) || !(host[3] = nb__cu_to_host(fn, in[3])) ||
        (nadam && !(host[6] = nb__cu_to_host(fn, in[6]))))
        goto done;
    hin[2] = host[2];
    hin[3] = host[3];
    if (nadam) hin[6] = host[6];
    nb_op_args a;
    nb__optim_begin(hin, nin, args, &a); /* reads step, coefficients, mu_product (and updates it) */
    if (nadam && write_back(fn, in[6], host[6]) < 0) goto done;
    nb__k_optim u;
    memset(&u, 0, sizeof u);
    u.kind = (int)a.i[0];
    u.dtype = (int)out->dtype;
    u.n = out->numel;
    /* the parameter, the gradient, then the state: the cpu's x[] (step and coefficients skipped,
       and NAdam's mu_product) */
    int last = nadam ? 6 : nin;
    for (int k = 0, j = 0; k < last && j < 5; k++)
        if (k != 2 && k != 3) u.t[j++] = nb__data(in[k]);
    memcpy(u.f, a.f, sizeof u.f);
    for (int k = 0; k < 5; k++) u.i[k] = a.i[k];
    if (nb__cu_check(fn, nb__k_optim_update(&u)) < 0) goto done;
    nb__optim_end(hin); /* the host copy's step + 1 */
    rc = write_back(fn, in[2], host[2]);
done:
    for (int k = 0; k < 8; k++) nb_release(host[k]);
    return rc;
}
