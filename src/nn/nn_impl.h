/* Internal helpers shared by the nn sources. */
#ifndef NB_NN_IMPL_H
#define NB_NN_IMPL_H

#include "../core/core_impl.h"
#include "nabla.h"
#include "nabla/nn.h"

typedef struct nb_module_state nb_module_state;

/* Visits every parameter of the tree in registration order. */
void nb__module_each_param(nb_module *m, void (*fn)(nb_tensor *p, void *ctx), void *ctx);

/* The name a layer uses in messages: its path, or its class name for a root. */
static inline const char *nb__layer_name(const nb_module *m) {
    const char *p = nb_module_path(m);
    return *p ? p : "(root)";
}

#endif
