/* The backward engine's hooks (engine.c): a layer above autograd (DDP in src/dist) learns when
   each leaf's gradient is final during nb_backward, and when a backward ends. Internal. */
#ifndef NB_ENGINE_H
#define NB_ENGINE_H

#include "../core/core_impl.h"
#include "nabla/autograd.h" /* nb_function */

/* Called on the thread that runs nb_backward / nb_backward_with. */
typedef struct nb_backward_hooks {
    /* leaf's gradient is final for this backward: every node of the graph that leads to it has
       run (or was skipped, reached by no gradient). got is whether this backward added to it;
       nb_grad_of(leaf) is then the accumulated gradient (NULL when it never had one). The
       nodes' other inputs may still be in use: read leaf's gradient, do not replace it here. */
    void (*grad_ready)(nb_tensor *leaf, bool got, void *ctx);
    /* The backward ended with status rc (0 or <0), its graph freed; a hook returning <0 (with an
       error recorded) makes nb_backward fail. */
    int (*finished)(int rc, void *ctx);
    void *ctx;
} nb_backward_hooks;

/* Registers hooks for every later backward, in any thread; returns an id (>= 0), or -1 with an
   error when 64 are registered already. */
int nb__backward_hooks_add(nb_backward_hooks hooks);
/* Removes hooks registered under id; not while a backward that may call them runs. */
void nb__backward_hooks_remove(int id);

/* nb_function_apply for a layer above whose user state must live exactly as long as the graph
   (module backward hooks): drop(user) runs when the recorded node is freed, or before this
   returns when no node is recorded (recording off, no input requiring grad, a failure). The
   output is the caller's own reference, in no scope. */
nb_tensor *nb__function_apply_owned(const nb_function *fn, nb_tensor *const *inputs, int n, void *user,
                                    void (*drop)(void *user));

/* The backward of a custom function's node (function.c): the user's backward, its gradients checked. */
struct nb_node;
int nb__function_backward(struct nb_node *node, nb_tensor *grad_out, nb_tensor **grad_in);

#endif
