/* nabla run health: gradient norms, the learning rate and parameter histograms logged to a
   summary writer, and the check for NaN/Inf or exploding gradients. */
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

#ifdef __cplusplus
}
#endif
#endif
