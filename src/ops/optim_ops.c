/* The fused optimizer update op: one pass over a parameter, its gradient and its state,
   written in place. Inputs: (param, grad, step, coefficients, state...). step is the slot's i64
   0-d count of updates, which the op increments; coefficients is the group's f64 [6], read at
   run time so that a compiled step sees schedule changes. By kind:
     SGD      coef: lr, momentum, dampening, weight_decay   i[1]: nesterov
              state: momentum buffer (when momentum != 0)
     ADAM     coef: lr, beta1, beta2, eps, weight_decay     i[2]: decoupled (AdamW)
              state: exp_avg, exp_avg_sq[, max_exp_avg_sq]
     RMSPROP  coef: lr, alpha, eps, weight_decay, momentum  i[1]: centered, i[3]: momentum buffer
              state: square_avg[, momentum buffer][, grad_avg]
     ADAGRAD  coef: lr, eps, weight_decay, lr_decay         state: sum
     NADAM    coef: lr, beta1, beta2, eps, weight_decay, momentum_decay
              state: exp_avg, exp_avg_sq, mu_product (f32 0-d, as torch keeps it)
     RADAM    coef: lr, beta1, beta2, eps, weight_decay     state: exp_avg, exp_avg_sq
     ADAMAX   coef: lr, beta1, beta2, eps, weight_decay     state: exp_avg, exp_inf
     ADADELTA coef: lr, rho, eps, weight_decay              state: square_avg, acc_delta
   Every state tensor has the parameter's shape and dtype except NAdam's mu_product. */
#include "ops_impl.h"

int nb__infer_optim_update(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    char d0[200], d[200];
    if (nin < 4) {
        nb__error("nb_%s: needs a parameter, its gradient, a step count and coefficients", fn);
        return -1;
    }
    if (args->i[0] < NB_UPDATE_SGD || args->i[0] >= NB_UPDATE_KINDS) {
        nb__error("nb_%s: unknown update kind %lld", fn, (long long)args->i[0]);
        return -1;
    }
    if (in[2]->dtype != NB_I64 || in[2]->numel != 1 || in[3]->dtype != NB_F64 || in[3]->numel != 6 ||
        !nb_is_contiguous(in[3])) {
        nb__error("nb_%s: step %s must be i64 with one element and coefficients %s f64 [6]", fn,
                  nb__describe(in[2], d0, sizeof d0), nb__describe(in[3], d, sizeof d));
        return -1;
    }
    bool nadam = args->i[0] == NB_UPDATE_NADAM;
    if (nadam && (nin != 7 || in[6]->dtype != NB_F32 || in[6]->numel != 1)) {
        nb__error("nb_%s: NAdam's update takes its mu_product as an f32 0-d seventh input (%d inputs)", fn, nin);
        return -1;
    }
    for (int k = 0; k < nin; k++) {
        if (k == 2 || k == 3 || (nadam && k == 6)) continue;
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
