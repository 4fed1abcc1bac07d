/* Internal helpers shared by the nn sources. */
#ifndef NB_NN_IMPL_H
#define NB_NN_IMPL_H

#include "../core/core_impl.h"
#include "nabla/autograd.h"
#include "nabla/nn.h"
#include "nabla/ops.h"

typedef struct nb_module_state nb_module_state;

/* Whether m is an nb_nn_sequential container. */
bool nb__is_sequential(const nb_module *m);

/* Registers child under the name "<*count>" and counts it (Sequential's and ModuleList's
   children "0", "1", ...); returns m, or NULL with child freed as nb_module_child does. */
nb_module *nb__append_numbered(nb_module *m, int *count, nb_module *child);

/* The direct children of m in registration order: up to cap names (borrowed) and modules into
   names/kids; returns how many there are. */
int nb__module_children(nb_module *m, const char **names, nb_module **kids, int cap);

/* v as Python's repr writes a float (0.1, 1e-05, 1.0), for the extra_repr of the layers; returns buf. */
const char *nb__py_float(double v, char *buf, size_t size);

/* Visits every parameter of the tree in registration order. */
void nb__module_each_param(nb_module *m, void (*fn)(nb_tensor *p, void *ctx), void *ctx);

/* Records (restore false) or sets back (true) the training flag of m and every descendant, in
   one fixed order, into modes[k..] (at most cap of them); returns the count the tree needs, so a
   first call with cap 0 sizes the array. */
int nb__module_modes(nb_module *m, bool *modes, int cap, int k, bool restore);

/* The name a layer uses in messages: its path, or its class name for a root. */
static inline const char *nb__layer_name(const nb_module *m) {
    const char *p = nb_module_path(m);
    return *p ? p : "(root)";
}

/* The residual block act(body(x) + shortcut(x)) (act NULL: none; shortcut NULL: the identity);
   fn names the caller in errors (residual.c). */
nb_module *nb__nn_residual_make(const char *fn, nb_module *body, nb_module *shortcut, nb_tensor *(*act)(nb_tensor *));
/* Global average pooling: [N, C, H, W] -> [N, C] (residual.c). */
nb_module *nb__nn_global_avg_pool(void);

#endif
