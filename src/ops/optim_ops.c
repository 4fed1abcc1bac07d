/* The fused optimizer update op: one pass over a parameter, its gradient and its state,
   written in place. Inputs: (param, grad, state...). Arguments by kind:
     SGD      f: lr, momentum, dampening, weight_decay   i[1]: nesterov, i[2]: first step
              state: momentum buffer (when momentum != 0)
     ADAM     f: lr, beta1, beta2, eps, weight_decay     i[1]: step, i[2]: decoupled (AdamW),
              i[3]: amsgrad; state: exp_avg, exp_avg_sq[, max_exp_avg_sq]
     RMSPROP  f: lr, alpha, eps, weight_decay, momentum  i[1]: centered
              state: square_avg[, momentum buffer][, grad_avg]
     ADAGRAD  f: clr (decayed lr), eps, weight_decay     state: sum */
#include "ops_impl.h"

int infer_optim_update(const char *fn, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    char d0[200], d[200];
    if (nin < 2) {
        nb__error("nb_%s: needs a parameter and its gradient", fn);
        return -1;
    }
    if (args->i[0] < NB_UPDATE_SGD || args->i[0] > NB_UPDATE_ADAGRAD) {
        nb__error("nb_%s: unknown update kind %lld", fn, (long long)args->i[0]);
        return -1;
    }
    for (int k = 0; k < nin; k++) {
        if (!nb__shape_eq(&in[k]->shape, &in[0]->shape) || in[k]->dtype != in[0]->dtype) {
            nb__error("nb_%s: tensor %d is %s but the parameter is %s", fn, k, nb__describe(in[k], d, sizeof d),
                      nb__describe(in[0], d0, sizeof d0));
            return -1;
        }
        if (!nb_is_contiguous(in[k])) {
            nb__error("nb_%s: tensor %d %s is not contiguous", fn, k, nb__describe(in[k], d, sizeof d));
            return -1;
        }
    }
    if (nb__grad_enabled()) {
        nb__error("nb_%s: run optimizer updates with grad disabled", fn);
        return -1;
    }
    out->shape = in[0]->shape;
    out->dtype = in[0]->dtype;
    return 0;
}
