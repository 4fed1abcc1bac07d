/* Internal to the optimizers: the partition hook (optim.c), by which a layer above (ZeRO-1 in
   src/dist) makes an optimizer built on a module update only the parameters this process owns,
   keep state for those alone, and bring the others in from their owners after each step; and the
   momentum that the schedules (sched.c) read and cycle. */
#ifndef NB_OPTIM_IMPL_H
#define NB_OPTIM_IMPL_H

#include "../core/core_impl.h"
#include "nabla/nn.h"
#include "nabla/optim.h"

typedef struct nb__optim_partition {
    /* whether this process updates param (a parameter the partition does not know: true) */
    bool (*owns)(const nb_tensor *param, void *ctx);
    /* after every step: the parameters this process does not own, from their owners (0, or <0
       with an error, which nb_optim_step returns) */
    int (*after_step)(void *ctx);
    void *ctx;
} nb__optim_partition;

/* Whether the optimizer state called kind ("exp_avg", "step", ...) holds one number per
   parameter (the step count, NAdam's mu_product) rather than one per element: a sharded
   checkpoint writes it whole, not in pieces of the parameter. */
bool nb__optim_scalar_state(const char *kind);

/* Sets the partition every optimizer made later on module m follows (a NULL p removes it);
   0, or -1 with an error when 64 modules have one already. */
int nb__optim_partition_set(const nb_module *m, const nb__optim_partition *p);

/* The optimizer's momentum (SGD's momentum, Adam's beta1); *has says whether it has one. */
double nb__optim_momentum(const nb_optimizer *o, bool *has);
/* Whether o is SGD with a non-zero momentum (one-cycle cycles only that). */
bool nb__optim_has_sgd_momentum(const nb_optimizer *o);
/* Sets the momentum (SGD's momentum, Adam's beta1) of every group of o. */
void nb__optim_set_momentum(nb_optimizer *o, double m);

#endif
