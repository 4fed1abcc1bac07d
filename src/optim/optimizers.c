/* The optimizers' constructors: torch's defaults for the zero fields of each one's options. */
#include "optimizer.h"

nb_optimizer *nb_optim_sgd(nb_module *m, nb_sgd_opts opts) {
    nb_optimizer *o = nb__optim_make(KIND_SGD);
    if (!o) return NULL;
    o->lr = nb__opt_or(opts.lr, 1e-3);
    o->momentum = opts.momentum;
    o->dampening = opts.dampening;
    o->weight_decay = opts.weight_decay;
    o->nesterov = opts.nesterov;
    return nb__optim_finish(o, m);
}

static nb_optimizer *adam_like(optim_kind kind, nb_module *m, nb_adam_opts opts) {
    nb_optimizer *o = nb__optim_make(kind);
    if (!o) return NULL;
    o->lr = nb__opt_or(opts.lr, 1e-3);
    o->beta1 = nb__opt_or(opts.beta1, 0.9);
    o->beta2 = nb__opt_or(opts.beta2, 0.999);
    o->eps = nb__opt_or(opts.eps, 1e-8);
    o->weight_decay = nb__opt_or(opts.weight_decay, kind == KIND_ADAMW ? 1e-2 : 0.0);
    o->amsgrad = opts.amsgrad;
    return nb__optim_finish(o, m);
}
nb_optimizer *nb_optim_adam(nb_module *m, nb_adam_opts opts) { return adam_like(KIND_ADAM, m, opts); }
nb_optimizer *nb_optim_adamw(nb_module *m, nb_adamw_opts opts) { return adam_like(KIND_ADAMW, m, opts); }

nb_optimizer *nb_optim_rmsprop(nb_module *m, nb_rmsprop_opts opts) {
    nb_optimizer *o = nb__optim_make(KIND_RMSPROP);
    if (!o) return NULL;
    o->lr = nb__opt_or(opts.lr, 1e-2);
    o->alpha = nb__opt_or(opts.alpha, 0.99);
    o->eps = nb__opt_or(opts.eps, 1e-8);
    o->weight_decay = opts.weight_decay;
    o->momentum = opts.momentum;
    o->centered = opts.centered;
    return nb__optim_finish(o, m);
}

nb_optimizer *nb_optim_adagrad(nb_module *m, nb_adagrad_opts opts) {
    nb_optimizer *o = nb__optim_make(KIND_ADAGRAD);
    if (!o) return NULL;
    o->lr = nb__opt_or(opts.lr, 1e-2);
    o->lr_decay = opts.lr_decay;
    o->weight_decay = opts.weight_decay;
    o->initial_acc = opts.initial_accumulator_value;
    o->eps = nb__opt_or(opts.eps, 1e-10);
    return nb__optim_finish(o, m);
}

/* The betas, eps and weight decay that NAdam, RAdam and Adamax share (torch's defaults). */
static nb_optimizer *betas_like(optim_kind kind, double lr, double beta1, double beta2, double eps, double weight_decay) {
    nb_optimizer *o = nb__optim_make(kind);
    if (!o) return NULL;
    o->lr = lr;
    o->beta1 = nb__opt_or(beta1, 0.9);
    o->beta2 = nb__opt_or(beta2, 0.999);
    o->eps = nb__opt_or(eps, 1e-8);
    o->weight_decay = weight_decay;
    return o;
}

nb_optimizer *nb_optim_nadam(nb_module *m, nb_nadam_opts opts) {
    nb_optimizer *o = betas_like(KIND_NADAM, nb__opt_or(opts.lr, 2e-3), opts.beta1, opts.beta2, opts.eps, opts.weight_decay);
    if (o) o->momentum_decay = nb__opt_or(opts.momentum_decay, 4e-3);
    return o ? nb__optim_finish(o, m) : NULL;
}

nb_optimizer *nb_optim_radam(nb_module *m, nb_radam_opts opts) {
    nb_optimizer *o = betas_like(KIND_RADAM, nb__opt_or(opts.lr, 1e-3), opts.beta1, opts.beta2, opts.eps, opts.weight_decay);
    return o ? nb__optim_finish(o, m) : NULL;
}

nb_optimizer *nb_optim_adamax(nb_module *m, nb_adamax_opts opts) {
    nb_optimizer *o = betas_like(KIND_ADAMAX, nb__opt_or(opts.lr, 2e-3), opts.beta1, opts.beta2, opts.eps, opts.weight_decay);
    return o ? nb__optim_finish(o, m) : NULL;
}

nb_optimizer *nb_optim_adadelta(nb_module *m, nb_adadelta_opts opts) {
    nb_optimizer *o = nb__optim_make(KIND_ADADELTA);
    if (!o) return NULL;
    o->lr = nb__opt_or(opts.lr, 1.0);
    o->rho = nb__opt_or(opts.rho, 0.9);
    o->eps = nb__opt_or(opts.eps, 1e-6);
    o->weight_decay = opts.weight_decay;
    return nb__optim_finish(o, m);
}

nb_optimizer *nb_optim_lbfgs(nb_module *m, nb_lbfgs_opts opts) {
    nb_optimizer *o = nb__optim_make(KIND_LBFGS);
    if (!o) return NULL;
    o->lr = nb__opt_or(opts.lr, 1.0);
    if (!(o->lbfgs = nb__lbfgs_new(&opts))) {
        nb_optim_free(o);
        return NULL;
    }
    return nb__optim_finish(o, m);
}

