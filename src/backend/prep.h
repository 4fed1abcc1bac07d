/* Device-neutral preparation that every backend's kernels share (prep.c): what a kernel job needs
   computed or checked on the host before any backend runs it. Below ops, beside kernel.h: a
   backend includes this, never another backend's files. */
#ifndef NB_BACKEND_PREP_H
#define NB_BACKEND_PREP_H

#include "kernel.h"
#include "pool_geom.h"
#include "ctc_recursion.h"

/* The geometry of a pooling op from its input shape x, output shape y and args (i[0..1] kernel,
   i[2..3] stride, i[4..5] padding, i[6..7] dilation, i[9] padding left out of the divisor); xs
   is left 0. */
nb_pool_geom nb__pool_geometry(const nb_shape *x, const nb_shape *y, const nb_op_args *a, bool adaptive);

/* Strides (in elements) that read t as broadcast to shape `to`: 0 on the axes it lacks or has of
   size 1. */
void nb__bcast_strides(const nb_tensor *t, const nb_shape *to, int64_t *st);
/* The n index tensors of index / index_put broadcast together: their shape in *b (shapes were
   checked by inference). */
void nb__index_shape(nb_tensor *const *idx, int n, nb_shape *b);
/* For each position of the indices' broadcast shape b (row-major), the element offset, by
   `stride`, of x[i0, ..., in-1] over x's leading n axes (xs: x's shape); a negative index counts
   from the end. A malloc'ed array of count offsets (freed by the caller), or NULL with the error
   "nb_<fn>: index ... is out of range ..." recorded. The index tensors are on the host; every
   index is checked before anything is written. */
int64_t *nb__index_offsets(const char *fn, const nb_shape *xs, const int64_t *stride, nb_tensor *const *idx, int n,
                           const nb_shape *b, int64_t count);

/* The fused optimizer update's step, before and after the elements are updated: reads the step
   and coefficients (tensors in[2] and in[3], so that a replayed graph reads them fresh) into *a
   with the per-step bias corrections, and marks the written tensors; then stores the new step. */
void nb__optim_begin(nb_tensor *const *in, int nin, const nb_op_args *args, nb_op_args *a);
void nb__optim_end(nb_tensor *const *in);

/* The CTC loss's job (backward: its gradient) over out and in (log_probs, targets,
   input_lengths, target_lengths, then the gradient [N]): their pointers, strides and sizes, the
   blank i[0] and zero_infinity i[1]. */
nb_ctc_job nb__ctc_job(nb_tensor *out, nb_tensor *const *in, const nb_op_args *args, bool backward);
/* Reads and checks the lengths and labels of in (on the host; shapes and dtypes checked by
   inference) into meta (4 N values: il, tl, off, then N feasibility bytes), which j points at,
   with j's target stride; sizes the scratch a sequence needs (values, labels). 0, or -1 with
   "nb_ctc_loss: ..." recorded. */
int nb__ctc_prepare(nb_tensor *const *in, nb_ctc_job *j, int64_t *meta, size_t *work_slot, size_t *labels_slot);

#endif
