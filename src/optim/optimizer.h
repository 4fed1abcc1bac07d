/* The optimizer's representation, shared by optim.c (groups, state, the step, the named state)
   and optimizers.c (each optimizer's constructor and defaults). Internal to src/optim. */
#ifndef NB_OPTIMIZER_H
#define NB_OPTIMIZER_H

#include "optim_impl.h"
#include "lbfgs.h"
#include "nabla/optim.h"
#include <math.h>

typedef enum {
    KIND_SGD, KIND_ADAM, KIND_ADAMW, KIND_RMSPROP, KIND_ADAGRAD, KIND_NADAM, KIND_RADAM, KIND_ADAMAX, KIND_ADADELTA,
    KIND_LBFGS, KIND_COUNT
} optim_kind;

typedef struct {
    nb_tensor *param;   /* borrowed */
    nb_tensor *state[3];
    nb_tensor *step;    /* i64 0-d: updates taken */
    int group;
    bool foreign;       /* another process owns it (a partition): no state, no update here */
} slot;

typedef struct {
    double lr, weight_decay;
    nb_tensor *hyper; /* f64 [6]: the update's coefficients, read by the update op at run time */
} group;

struct nb_optimizer {
    optim_kind kind;
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha, lr_decay, initial_acc;
    double momentum_decay, rho;
    bool nesterov, amsgrad, centered;
    nb__lbfgs *lbfgs; /* KIND_LBFGS: its history and settings */
    slot *slots;
    int nslots, cap;
    group *groups;
    int ngroups;
    char **state_names;
    int state_names_n;
    nb__optim_partition part; /* part.owns NULL: every parameter is this process's */
    int64_t leak_last, leak_start; /* nb_live_tensors() at the last step and where the growth began */
    int leak_growth;
};

/* A zero option is the default; NB_ZERO (negative zero) asks for an explicit 0. */
static inline double nb__opt_or(double v, double dflt) { return v == 0 && !signbit(v) ? dflt : (v == 0 ? 0.0 : v); }
/* A new optimizer of the kind with every setting zero; NULL with an error. */
nb_optimizer *nb__optim_make(int kind);
/* Validates o's settings, then adds the module's parameters (m may be NULL) as group 0; o, or
   NULL with an error (o freed). */
nb_optimizer *nb__optim_finish(nb_optimizer *o, nb_module *m);

#endif
