/* nabla autograd: define-by-run gradients recorded as ops run. */
#ifndef NABLA_AUTOGRAD_H
#define NABLA_AUTOGRAD_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a leaf tensor as needing a gradient (float dtypes only, else an error); returns t, adding no
   reference (NULL for NULL). On an op's result true changes nothing and false is an error (use nb_detach). */
NB_API nb_tensor *nb_set_requires_grad(nb_tensor *t, bool requires_grad);
/* Whether t needs a gradient (a leaf marked so, or the result of an op on one). */
NB_API bool nb_requires_grad(const nb_tensor *t);
/* Whether t is a leaf: made by no recorded op, so no graph node stands behind it (false for NULL). */
NB_API bool nb_is_leaf(const nb_tensor *t);
/* A gradient hook (torch's Tensor.register_hook): called during backward with the tensor's
   gradient once it is complete, before it flows on to what made the tensor; returns the gradient
   to use instead (grad itself, or a tensor of its shape and dtype), or NULL with an error to fail
   the backward. What it returns in its own scope is kept for as long as the backward needs. */
typedef nb_tensor *(*nb_grad_hook)(nb_tensor *grad, void *ctx);
/* Registers fn on t, which requires grad; hooks run in the order registered. On a computed tensor
   they go with t's graph; on a leaf they stay with the tensor and see the leaf's whole gradient
   of each nb_backward before it is added to the leaf's .grad (nb_autograd_grad does not call a
   leaf's hooks). 0, or <0 with the error. */
NB_API int nb_tensor_register_hook(nb_tensor *t, nb_grad_hook fn, void *ctx);
/* Backpropagates from the one-element tensor t, accumulating into leaves' gradients; 0 or <0. The
   graph is freed as it goes: a second backward through it is an error (run the forward again). */
NB_API int nb_backward(nb_tensor *t);
/* Backpropagates from t seeded with grad (a float tensor of t's shape, borrowed); 0 or <0, as nb_backward. */
NB_API int nb_backward_with(nb_tensor *t, nb_tensor *grad);
/* Options of nb_autograd_grad: create_graph records the backward itself, so the gradients can be
   differentiated again (gradient penalties, double backward), and keeps the graph; retain_graph
   keeps it without that; allow_unused gives NULL for an input the outputs do not depend on
   (otherwise an error). */
typedef struct nb_grad_opts {
    bool create_graph, retain_graph, allow_unused;
} nb_grad_opts;
/* The gradients of sum_k <outputs[k], grad_outputs[k]> with respect to inputs[0..n_in), into
   grads[j] (the caller's scope owns them), as torch.autograd.grad: no .grad is touched and only
   the part of the graph that leads to the inputs runs. grad_outputs NULL means ones (each output
   must then have one element). The graph is freed unless create_graph or retain_graph. 0 or <0. */
NB_API int nb_autograd_grad(nb_tensor *const *outputs, nb_tensor *const *grad_outputs, int n_out,
                            nb_tensor *const *inputs, int n_in, nb_tensor **grads, nb_grad_opts opts);
/* ---- custom functions (torch.autograd.Function) ---- */
/* What a custom function's forward and backward see: its saved tensors and which inputs need a gradient. */
typedef struct nb_function_ctx nb_function_ctx;
/* A custom function: forward computes the output from inputs[0..n) with recording off (the ops
   inside are not differentiated) and may save tensors with nb_function_save; backward gets the
   output's gradient and writes grad_in[i], of input i's shape and dtype, for each input with
   nb_function_needs_grad (written with ops, it can be differentiated again under create_graph).
   Each returns NULL / <0 with an error on failure. The struct must outlive the graphs it is in
   (a static const is usual); user is passed to both as given. */
typedef struct nb_function {
    const char *name;
    nb_tensor *(*forward)(nb_function_ctx *ctx, nb_tensor *const *inputs, int n, void *user);
    int (*backward)(nb_function_ctx *ctx, nb_tensor *grad_out, nb_tensor **grad_in, int n, void *user);
} nb_function;
/* Runs fn on inputs and records it, so backward calls fn->backward; the output (a new tensor
   header over what forward returned) belongs to the caller's scope. Not traceable by nb_compile yet. */
NB_API nb_tensor *nb_function_apply(const nb_function *fn, nb_tensor *const *inputs, int n, void *user);
/* Saves t (forward only) for the backward, as ctx.save_for_backward: a detached alias, whose
   in-place change before the backward is an error then. 0 or <0. */
NB_API int nb_function_save(nb_function_ctx *ctx, nb_tensor *t);
/* The i-th saved tensor (borrowed), or NULL with an error. */
NB_API nb_tensor *nb_function_saved(nb_function_ctx *ctx, int i);
/* Whether input i needs a gradient in this backward (in the forward: whether it requires grad). */
NB_API bool nb_function_needs_grad(nb_function_ctx *ctx, int i);
/* The accumulated gradient of a leaf (borrowed: valid until it is zeroed, replaced by nb_set_grad or
   a later backward's sum, or t is freed), or NULL. */
NB_API nb_tensor *nb_grad_of(const nb_tensor *t);
/* Replaces t's gradient with grad (a reference is added; NULL drops it; an error, changing nothing,
   unless grad has t's shape and dtype). Gradients are never written in place, so a tensor handed
   here may be shared. */
NB_API void nb_set_grad(nb_tensor *t, nb_tensor *grad);
/* Drops t's accumulated gradient. */
NB_API void nb_zero_grad(nb_tensor *t);
/* Turns recording of the graph on or off for this thread; returns the previous setting. */
NB_API bool nb_set_grad_enabled(bool enabled);
/* Whether recording is on for this thread. */
NB_API bool nb_is_grad_enabled(void);
/* For every thread: fails an op, forward or backward, whose output holds a NaN or Inf that its
   inputs did not, naming the op. */
NB_API void nb_set_detect_anomaly(bool enabled);

#ifdef __cplusplus
}
#endif
#endif
