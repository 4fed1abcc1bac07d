/* nabla optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, NAdam, RAdam, Adamax, Adadelta,
   LBFGS) with parameter groups, learning-rate schedules and gradient clipping, following
   PyTorch's formulas and defaults (torch 1.13's, where versions differ). */
#ifndef NABLA_OPTIM_H
#define NABLA_OPTIM_H

#include "core.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Option fields left at zero take PyTorch's defaults. To ask for an explicit zero where the
   default is not zero (AdamW's weight decay, Adam's beta1), pass NB_ZERO. */
#define NB_ZERO (-0.0)

typedef struct nb_optimizer nb_optimizer;

/* SGD: lr 1e-3, momentum 0, dampening 0, weight_decay 0, nesterov off. */
typedef struct nb_sgd_opts { double lr, momentum, dampening, weight_decay; bool nesterov; } nb_sgd_opts;
/* Adam / AdamW: lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0 (Adam) or 1e-2 (AdamW). */
typedef struct nb_adam_opts { double lr, beta1, beta2, eps, weight_decay; bool amsgrad; } nb_adam_opts;
typedef nb_adam_opts nb_adamw_opts;
/* RMSprop: lr 1e-2, alpha 0.99, eps 1e-8, weight decay 0, momentum 0, not centered. */
typedef struct nb_rmsprop_opts { double lr, alpha, eps, weight_decay, momentum; bool centered; } nb_rmsprop_opts;
/* Adagrad: lr 1e-2, lr_decay 0, weight decay 0, initial accumulator 0, eps 1e-10. */
typedef struct nb_adagrad_opts { double lr, lr_decay, weight_decay, initial_accumulator_value, eps; } nb_adagrad_opts;
/* NAdam: lr 2e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0, momentum_decay 4e-3. */
typedef struct nb_nadam_opts { double lr, beta1, beta2, eps, weight_decay, momentum_decay; } nb_nadam_opts;
/* RAdam: lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0. */
typedef struct nb_radam_opts { double lr, beta1, beta2, eps, weight_decay; } nb_radam_opts;
/* Adamax: lr 2e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0. */
typedef struct nb_adamax_opts { double lr, beta1, beta2, eps, weight_decay; } nb_adamax_opts;
/* Adadelta: lr 1, rho 0.9, eps 1e-6, weight decay 0. */
typedef struct nb_adadelta_opts { double lr, rho, eps, weight_decay; } nb_adadelta_opts;
/* LBFGS's step length: lr as it is, or torch's strong-Wolfe line search from it. */
typedef enum nb_line_search { NB_LINE_SEARCH_NONE, NB_LINE_SEARCH_STRONG_WOLFE } nb_line_search;
/* LBFGS: lr 1, max_iter 20 iterations per step, max_eval max_iter * 5 / 4 evaluations per step,
   tolerance_grad 1e-7, tolerance_change 1e-9, history_size 100, no line search. closure (needed)
   recomputes the loss and the gradients, zeroing them first (as a torch closure does), and
   returns the loss, or NaN when it failed (the step then fails); it runs with grad enabled and
   inside a scope of its own, which its tensors may be left to. */
typedef struct nb_lbfgs_opts {
    double lr;
    int max_iter, max_eval;
    double tolerance_grad, tolerance_change;
    int history_size;
    nb_line_search line_search;
    double (*closure)(void *ctx);
    void *ctx;
} nb_lbfgs_opts;
/* A parameter group's own learning rate and weight decay (zero: the optimizer's). */
typedef struct nb_group_opts { double lr, weight_decay; } nb_group_opts;

/* Optimizers over every parameter of module (which may be NULL: add groups later). The
   optimizer borrows the parameters; free it before the module. NULL with an error for a
   negative learning rate, weight decay, momentum or eps, betas outside [0, 1), or nesterov without
   momentum or with dampening. This one: SGD (with momentum and nesterov as torch.optim.SGD). */
NB_API nb_optimizer *nb_optim_sgd(nb_module *module, nb_sgd_opts opts);
/* Adam (weight decay added to the gradient, as torch.optim.Adam). */
NB_API nb_optimizer *nb_optim_adam(nb_module *module, nb_adam_opts opts);
/* AdamW (decoupled weight decay, as torch.optim.AdamW). */
NB_API nb_optimizer *nb_optim_adamw(nb_module *module, nb_adamw_opts opts);
/* RMSprop. */
NB_API nb_optimizer *nb_optim_rmsprop(nb_module *module, nb_rmsprop_opts opts);
/* Adagrad. */
NB_API nb_optimizer *nb_optim_adagrad(nb_module *module, nb_adagrad_opts opts);
/* NAdam (torch 1.13's formulas; its state mu_product is an f32 0-d tensor, as torch keeps it). */
NB_API nb_optimizer *nb_optim_nadam(nb_module *module, nb_nadam_opts opts);
/* RAdam (rectified once the approximated SMA length passes 5, plain momentum SGD before). */
NB_API nb_optimizer *nb_optim_radam(nb_module *module, nb_radam_opts opts);
/* Adamax (the infinity norm's exponentially weighted maximum). */
NB_API nb_optimizer *nb_optim_adamax(nb_module *module, nb_adamax_opts opts);
/* Adadelta (NULL with an error for rho outside [0, 1]). */
NB_API nb_optimizer *nb_optim_adadelta(nb_module *module, nb_adadelta_opts opts);
/* LBFGS, as torch.optim.LBFGS: each nb_optim_step calls the closure and runs up to max_iter
   iterations over every parameter, flattened (one dtype and device). One parameter group only
   (nb_optim_add_param_group fails after the first), not with a sharded optimizer state; its
   history is not in nb_optim_named_state, so a checkpoint does not carry it. */
NB_API nb_optimizer *nb_optim_lbfgs(nb_module *module, nb_lbfgs_opts opts);
/* Adds a group of n parameters (borrowed float leaves, in no other group; marked as requiring
   grad) with its own settings; returns the group's index or <0. */
NB_API int nb_optim_add_param_group(nb_optimizer *opt, nb_tensor *const *params, int n, nb_group_opts opts);
/* Drops every parameter's gradient. */
NB_API void nb_optim_zero_grad(nb_optimizer *opt);
/* Updates every parameter that has a gradient, in place; 0 or <0. */
NB_API int nb_optim_step(nb_optimizer *opt);
/* Sets the learning rate of every group, and of groups added later with lr 0. NULL is ignored. */
NB_API void nb_optim_set_lr(nb_optimizer *opt, double lr);
/* Sets one group's learning rate; 0, or <0 for a group that does not exist. */
NB_API int nb_optim_set_group_lr(nb_optimizer *opt, int group, double lr);
/* The learning rate of a group; NaN with an error for a group that does not exist. */
NB_API double nb_optim_get_lr(const nb_optimizer *opt, int group);
/* Number of parameter groups (0 for NULL). */
NB_API int nb_optim_num_groups(const nb_optimizer *opt);
/* Creates every state tensor now (they are otherwise made at the first step), e.g. to load a
   checkpoint into them; 0 or <0. */
NB_API int nb_optim_init_state(nb_optimizer *opt);
/* Lists the state as named tensors ("3.exp_avg", "3.step" for parameter 3, counted across
   groups; steps are i64 0-d), borrowed and writable with nb_assign; parameters without state yet
   are left out. Returns the count (or -1); the names last until the next listing or nb_optim_free. */
NB_API int nb_optim_named_state(nb_optimizer *opt, nb_named_tensor *out, int cap);
/* Frees the optimizer and its state (not the parameters). */
NB_API void nb_optim_free(nb_optimizer *opt);

/* Scales every gradient of module so their global L2 norm is at most max_norm; returns the
   norm before clipping (negative on error), as torch.nn.utils.clip_grad_norm_. */
NB_API double nb_clip_grad_norm(nb_module *module, double max_norm);
/* The same, returning the norm before clipping as an f64 0-d tensor (in the current scope; NULL
   on error): tensor ops only, nothing read on the host, so a compiled step (nb_compile) can clip. */
NB_API nb_tensor *nb_clip_grad_norm_tensor(nb_module *module, double max_norm);
/* The global L2 norm of the module's gradients (0 with none; negative on error). */
NB_API double nb_grad_norm(nb_module *module);
/* Clamps every gradient of module to [-clip_value, clip_value], as
   torch.nn.utils.clip_grad_value_; 0, or <0 with an error (clip_value negative or NaN). */
NB_API int nb_clip_grad_value(nb_module *module, double clip_value);

/* ---- learning-rate schedules: call nb_sched_step once per epoch (or per step). Each borrows its
   optimizer, schedules the groups it had when made, and sets the epoch-0 rates at once (as torch);
   NULL with an error for invalid arguments. ---- */
typedef struct nb_scheduler nb_scheduler;
/* lr = base * gamma^(epoch / step_size) (integer division; gamma 0: torch's 0.1) */
NB_API nb_scheduler *nb_sched_step_lr(nb_optimizer *opt, int step_size, double gamma);
/* lr = base * gamma^(milestones passed) (gamma 0: torch's 0.1) */
NB_API nb_scheduler *nb_sched_multistep(nb_optimizer *opt, const int *milestones, int n, double gamma);
/* lr = base * gamma^epoch (gamma > 0) */
NB_API nb_scheduler *nb_sched_exponential(nb_optimizer *opt, double gamma);
/* Cosine annealing from base to eta_min over t_max epochs. */
NB_API nb_scheduler *nb_sched_cosine(nb_optimizer *opt, int t_max, double eta_min);
/* Linear warm-up: the factor goes from start_factor to end_factor over total_iters (zeros: torch's
   1/3, 1 and 5; NB_ZERO for an explicit end factor of 0). */
NB_API nb_scheduler *nb_sched_linear(nb_optimizer *opt, double start_factor, double end_factor, int total_iters);
/* One-cycle: options with zero fields mean pct_start 0.3, div_factor 25, final_div_factor 1e4,
   cosine annealing, momentum cycled between 0.85 and 0.95 (as torch's OneCycleLR). */
typedef struct nb_one_cycle_opts {
    double pct_start, div_factor, final_div_factor, base_momentum, max_momentum;
    bool linear_anneal, no_cycle_momentum;
} nb_one_cycle_opts;
/* One-cycle over total_steps from max_lr / div_factor up to max_lr and down; momentum cycles only
   where the optimizer has one (SGD momentum, Adam's beta1). Stepping past total_steps is an error. */
NB_API nb_scheduler *nb_sched_one_cycle(nb_optimizer *opt, double max_lr, int total_steps, nb_one_cycle_opts opts);
/* LambdaLR: lr = base * fn(epoch, ctx), one function for every group. */
NB_API nb_scheduler *nb_sched_lambda(nb_optimizer *opt, double (*fn)(int epoch, void *ctx), void *ctx);
/* CosineAnnealingWarmRestarts: cosine annealing from base to eta_min over t_0 epochs, then again
   from base over periods t_mult times the last (t_mult 0: torch's 1). t_0 >= 1, t_mult >= 1. */
NB_API nb_scheduler *nb_sched_cosine_warm_restarts(nb_optimizer *opt, int t_0, int t_mult, double eta_min);
/* CyclicLR's policies: a triangle each cycle, one whose height halves each cycle, and one scaled
   by gamma^step. */
typedef enum nb_cyclic_mode { NB_CYCLIC_TRIANGULAR, NB_CYCLIC_TRIANGULAR2, NB_CYCLIC_EXP_RANGE } nb_cyclic_mode;
/* CyclicLR's options: zero fields mean step_size_up 2000, step_size_down step_size_up, gamma 1,
   momentum cycled between 0.8 and 0.9. Momentum cycles (inversely to the rate) for SGD with a
   momentum only: torch also cycles RMSprop's and refuses optimizers without one, where here the
   momentum is left alone. */
typedef struct nb_cyclic_opts {
    int step_size_up, step_size_down;
    nb_cyclic_mode mode;
    double gamma, base_momentum, max_momentum;
    bool no_cycle_momentum;
} nb_cyclic_opts;
/* CyclicLR: every group's rate cycles between base_lr and max_lr (one value for all groups;
   torch's custom scale functions are not offered). Step it once per batch. */
NB_API nb_scheduler *nb_sched_cyclic(nb_optimizer *opt, double base_lr, double max_lr, nb_cyclic_opts opts);
/* SequentialLR: scheds[0] until milestones[0], scheds[1] (from its epoch 0) until milestones[1],
   ..., for n schedules over the same optimizer and n - 1 increasing milestones. It takes the
   schedules over, in every case: nb_sched_free frees them with it, and a failure frees them (so
   they may be made in the call's argument list). Every child starts from the rates the first
   was made with (torch's initial_lr); none may be a plateau or sequential schedule. */
NB_API nb_scheduler *nb_sched_sequential(nb_optimizer *opt, nb_scheduler *const *scheds, int n, const int *milestones);
/* ReduceLROnPlateau's options: zero fields mean mode min, factor 0.1, patience 10 (negative: 0),
   threshold 1e-4 relative (threshold_abs: absolute), cooldown 0, min_lr 0, eps 1e-8 (NB_ZERO
   for an explicit 0 factor, threshold or eps). */
typedef struct nb_plateau_opts {
    bool mode_max, threshold_abs;
    double factor;
    int patience;
    double threshold;
    int cooldown;
    double min_lr, eps;
} nb_plateau_opts;
/* ReduceLROnPlateau: multiplies every group's rate by factor (not below min_lr) once the metric
   has not improved for more than patience steps of nb_sched_step_metric; the rates are left as
   they are until then. NULL with an error for a factor outside [0, 1) or a negative threshold,
   cooldown, min_lr or eps. */
NB_API nb_scheduler *nb_sched_reduce_on_plateau(nb_optimizer *opt, nb_plateau_opts opts);
/* Steps a plateau schedule with this epoch's metric (a validation loss, say); 0 or <0. Other
   schedules step with nb_sched_step, a plateau schedule only with this. */
NB_API int nb_sched_step_metric(nb_scheduler *s, double metric);
/* Advances the schedule by one and sets the optimizer's learning rates; 0 or <0 (a plateau
   schedule steps with nb_sched_step_metric instead). */
NB_API int nb_sched_step(nb_scheduler *s);
/* Schedule steps taken so far (torch's last_epoch); -1 for NULL. */
NB_API int nb_sched_last_epoch(const nb_scheduler *s);
/* Jumps to a step count (to resume, >= 0) and sets the learning rates for it; 0 or <0. A
   sequential schedule replays its steps from 0; a plateau schedule sets the count only (its
   best metric and counters stay, and so do the rates). */
NB_API int nb_sched_set_last_epoch(nb_scheduler *s, int epoch);
/* Frees the schedule (not the optimizer; a sequential schedule's children too). NULL is ignored. */
NB_API void nb_sched_free(nb_scheduler *s);

#ifdef __cplusplus
}
#endif
#endif
