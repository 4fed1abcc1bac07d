/* Shape helpers shared by inference and the composite ops. */
#ifndef NB_SHAPE_UTIL_H
#define NB_SHAPE_UTIL_H

#include "ops_impl.h"

/* Broadcast a and b into out by NumPy's rules; records an error naming fn when they do not fit. */
int nb__broadcast_shapes(const char *fn, const nb_shape *a, const nb_shape *b, nb_shape *out);
/* Strides that view t with shape without copying, as PyTorch decides; false when impossible. */
bool nb__view_strides(const nb_tensor *t, const nb_shape *shape, int64_t *stride);
/* Replaces one -1 in shape by the size that keeps t's element count; checks the count. */
int nb__resolve_shape(const char *fn, const nb_tensor *t, nb_shape *shape);

#endif
