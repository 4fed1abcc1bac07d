/* A classifier's training step as a graph function (cross entropy, backward, the optimizer's
   step), shared by the graph-mode tests and benchmarks: ctx is a train_ctx. */
#ifndef NABLA_TEST_TRAIN_STEP_H
#define NABLA_TEST_TRAIN_STEP_H

#include "nabla.h"

typedef struct {
    nb_module *model;
    nb_optimizer *opt;
} trainer;

/* in[0] the batch, in[1] its labels; returns the loss (NULL with the error recorded). */
static inline nb_tensor *train_step(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    trainer *t = ctx;
    nb_tensor *loss = nb_cross_entropy(nb_forward(t->model, in[0]), in[1], (nb_ce_opts){ 0 });
    nb_optim_zero_grad(t->opt);
    if (nb_backward(loss) < 0 || nb_optim_step(t->opt) < 0) return NULL;
    return loss;
}

#endif
