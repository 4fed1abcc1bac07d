/* nabla run health: gradient norms, the learning rate and parameter histograms logged to a
   summary writer, the check for NaN/Inf or exploding gradients, and the per-step signals that
   nabla doctor reads. */
#ifndef NABLA_HEALTH_H
#define NABLA_HEALTH_H

#include "nn.h"
#include "optim.h"
#include "summary.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Logs the global L2 norm of the module's gradients as "grad_norm/global"; returns it (<0 on error). */
NB_API double nb_summary_grad_norm(nb_summary_writer *w, nb_module *m, int64_t step);
/* Clips the gradients as nb_clip_grad_norm, logging "grad_norm/before_clip" and
   "grad_norm/after_clip"; returns the norm before clipping (<0 on error). */
NB_API double nb_summary_clip_grad_norm(nb_summary_writer *w, nb_module *m, double max_norm, int64_t step);
/* Logs the learning rate as "lr" (one group) or "lr/group<i>" (several). 0 or <0. */
NB_API int nb_summary_lr(nb_summary_writer *w, const nb_optimizer *opt, int64_t step);
/* What nb_summary_parameters logs: weight histograms, gradient histograms, or both. */
enum { NB_SUMMARY_WEIGHTS = 1, NB_SUMMARY_GRADS = 2 };
/* Logs "weights/<name>" and/or "grads/<name>" histograms for each parameter (what is a mask of
   NB_SUMMARY_WEIGHTS and NB_SUMMARY_GRADS; parameters without a gradient are skipped). 0 or <0. */
NB_API int nb_summary_parameters(nb_summary_writer *w, nb_module *m, int what, int64_t step);

/* What nb_check_grads found. */
enum { NB_GRADS_OK = 0, NB_GRADS_NONFINITE = 1, NB_GRADS_EXPLODING = 2 };
/* Checks each parameter's gradient: returns NB_GRADS_NONFINITE naming the first parameter with a
   NaN/Inf gradient, NB_GRADS_EXPLODING when the global norm exceeds max_norm (<= 0: 1e4), else
   NB_GRADS_OK (<0 on error). A warning is kept for nb_check_grads_message (never printed) and,
   when w is not NULL, logged as text under "health/warning". */
NB_API int nb_check_grads(nb_summary_writer *w, nb_module *m, double max_norm, int64_t step);
/* The message of this thread's last nb_check_grads warning ("" when the last check was clean). */
NB_API const char *nb_check_grads_message(void);

/* ---- per-step health signals for nabla doctor (docs/doctor.md lists the tags) ---- */

/* Options of nb_health_new; zero fields take the defaults. */
typedef struct nb_health_opts {
    int64_t log_every; /* the per-layer signals every this many steps (0: 50) */
    int64_t classes;   /* the number of classes, logged once as "health/classes" (0: not logged) */
} nb_health_opts;

/* A training loop's health logger: every log_every steps it logs the loss, learning rate, mean
   step time and data wait, and per parameter the gradient norm, weight norm, update-to-weight
   ratio and non-finite counts; a non-finite loss is logged (with the per-layer scan) at the step
   it happens. nb_model_fit uses one; a hand-written loop calls the two functions below. */
typedef struct nb_health nb_health;

/* A logger on writer w for module m and optimizer opt (opt may be NULL: no learning rate); all
   three stay the caller's, and m must outlive the logger: it hooks m's ReLU, Sigmoid and Tanh
   layers to log, on logging steps, "health/relu_zero/<layer>" (share of exactly-zero outputs) and
   "health/saturated/<layer>" (outputs within 0.005 of a sigmoid's bounds, above 0.99 in |tanh|).
   It keeps a double-precision copy of the parameters for the update ratio (allocated once, reused
   at every logging step). NULL with an error. */
NB_API nb_health *nb_health_new(nb_summary_writer *w, nb_module *m, const nb_optimizer *opt, nb_health_opts opts);
/* Call after backward and before the optimizer step of step (counted from 1) with its loss: on a
   logging step (or when the loss is not finite) logs the gradient and weight norms and the
   non-finite counts, and keeps the weights to measure the update. 0 or <0. */
NB_API int nb_health_before_update(nb_health *h, int64_t step, double loss);
/* Call after the optimizer step: logs the update ratios, loss, learning rate and the step time
   and data wait (seconds spent waiting for the batch; < 0: unknown), as means over the interval. 0 or <0. */
NB_API int nb_health_after_update(nb_health *h, int64_t step, double data_wait_s);
/* Frees the logger (not the writer, module or optimizer); NULL is ignored. */
NB_API void nb_health_free(nb_health *h);

#ifdef __cplusplus
}
#endif
#endif
