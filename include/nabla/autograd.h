/* nabla autograd: define-by-run gradients recorded as ops run. */
#ifndef NABLA_AUTOGRAD_H
#define NABLA_AUTOGRAD_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a leaf tensor as needing a gradient (float dtypes only); returns t, adding no reference. */
NB_API nb_tensor *nb_set_requires_grad(nb_tensor *t, bool requires_grad);
/* Whether t needs a gradient (a leaf marked so, or the result of an op on one). */
NB_API bool nb_requires_grad(const nb_tensor *t);
/* Whether t is a leaf: made by no recorded op, so no graph node stands behind it (false for NULL). */
NB_API bool nb_is_leaf(const nb_tensor *t);
/* Backpropagates from the one-element tensor t, accumulating into leaves' gradients; 0 or <0. */
NB_API int nb_backward(nb_tensor *t);
/* Backpropagates from t seeded with grad (same shape as t). */
NB_API int nb_backward_with(nb_tensor *t, nb_tensor *grad);
/* The accumulated gradient of a leaf (borrowed: valid until it is zeroed or t is freed), or NULL. */
NB_API nb_tensor *nb_grad_of(const nb_tensor *t);
/* Replaces t's gradient with grad (a reference is added; NULL drops it). Gradients are never
   written in place, so a tensor handed here may be shared. */
NB_API void nb_set_grad(nb_tensor *t, nb_tensor *grad);
/* Drops t's accumulated gradient. */
NB_API void nb_zero_grad(nb_tensor *t);
/* Turns recording of the graph on or off for this thread; returns the previous setting. */
NB_API bool nb_set_grad_enabled(bool enabled);
/* Whether recording is on for this thread. */
NB_API bool nb_is_grad_enabled(void);
/* Checks every op's output, forward and backward, for NaN/Inf and fails naming the op. */
NB_API void nb_set_detect_anomaly(bool enabled);

#ifdef __cplusplus
}
#endif
#endif
