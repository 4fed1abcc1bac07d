/* Advanced indexing on the index and index_put primitives: nb_index (x[indices]), nb_index_put
   (x[indices] = values, out of place) and nb_masked_scatter. A bool mask among the indices is
   read on the host, as torch does (its count sets the result's size), and becomes one i64
   index tensor of its true positions per axis it covers (torch's nonzero). */
#include "ops_impl.h"
#include "shape_util.h"
#include <stdio.h>
#include <stdlib.h>

/* mask's true positions, row-major, as m = mask's ndim i64 index tensors on dev (out[0..m)). */
static int mask_positions(const char *fn, nb_tensor *mask, nb_device dev, nb_tensor **out) {
    int m = mask->shape.ndim;
    int64_t n = mask->numel;
    nb_tensor *c = nb_contiguous(mask);
    uint8_t *host = malloc((size_t)(n ? n : 1));
    int64_t *pos = NULL, count = 0;
    int rc = -1;
    if (!host) {
        nb__error("nb_%s: out of memory for a mask of %lld elements", fn, (long long)n);
        goto done;
    }
    if (!c || nb_copy_to(c, host, (size_t)n) < 0) goto done;
    for (int64_t i = 0; i < n; i++) count += host[i] != 0;
    if (!(pos = malloc(sizeof(int64_t) * (size_t)(count ? count : 1) * (size_t)m))) {
        nb__error("nb_%s: out of memory for the %lld true positions of a mask", fn, (long long)count);
        goto done;
    }
    for (int64_t i = 0, k = 0; i < n; i++) {
        if (!host[i]) continue;
        int64_t r = i;
        for (int d = m - 1; d >= 0; d--) {
            pos[(size_t)d * (size_t)count + (size_t)k] = r % mask->shape.dim[d];
            r /= mask->shape.dim[d];
        }
        k++;
    }
    rc = 0;
    for (int d = 0; d < m && rc == 0; d++)
        if (!(out[d] = nb_to(nb_from_data(pos + (size_t)d * (size_t)count, NB_SHAPE(count), NB_I64), dev))) rc = -1;
done:
    free(host);
    free(pos);
    return rc;
}

/* The indices as the primitives take them: i64 and i32 tensors as they are, each bool mask of m
   axes as m index tensors, checked against the axes of x it covers. The count of index tensors
   written to out (at most x's axes), or -1 with the error recorded. */
static int expand_indices(const char *fn, nb_tensor *x, nb_tensor *const *indices, int n, nb_tensor **out) {
    char dx[200], di[200];
    if (n < 1 || !indices) {
        nb__error("nb_%s: needs at least one index tensor (got %d%s)", fn, n, indices ? "" : ", indices is NULL");
        return -1;
    }
    int axis = 0;
    for (int k = 0; k < n; k++) {
        nb_tensor *t = indices[k];
        if (!nb__check_input(fn, t)) return -1;
        int covers = t->dtype == NB_BOOL ? t->shape.ndim : 1;
        if (t->dtype != NB_BOOL && t->dtype != NB_I64 && t->dtype != NB_I32) {
            nb__error("nb_%s: index %d must be i64, i32 or a bool mask, got %s", fn, k, nb__describe(t, di, sizeof di));
            return -1;
        }
        if (t->dtype == NB_BOOL && t->shape.ndim == 0) {
            nb__error("nb_%s: index %d is a 0-d bool mask, which nabla does not take (give it the axes it masks)", fn, k);
            return -1;
        }
        if (axis + covers > x->shape.ndim) {
            nb__error("nb_%s: the indices cover %d axes of %s, which has %d", fn, axis + covers, nb__describe(x, dx, sizeof dx),
                      x->shape.ndim);
            return -1;
        }
        if (t->dtype == NB_BOOL) {
            for (int d = 0; d < covers; d++)
                if (t->shape.dim[d] != x->shape.dim[axis + d]) {
                    nb__error("nb_%s: the mask %s (index %d) does not match %s at axis %d: %lld vs %lld", fn,
                              nb__describe(t, di, sizeof di), k, nb__describe(x, dx, sizeof dx), axis + d,
                              (long long)t->shape.dim[d], (long long)x->shape.dim[axis + d]);
                    return -1;
                }
            if (mask_positions(fn, t, x->storage->device, out + axis) < 0) return -1;
        } else {
            out[axis] = t;
        }
        axis += covers;
    }
    return axis;
}

nb_tensor *nb_index(nb_tensor *x, nb_tensor *const *indices, int n) {
    if (!nb__check_input("index", x)) return NULL;
    COMPOSITE_BEGIN
    nb_tensor *in[NB_MAX_DIMS + 1] = { x };
    int m = expand_indices("index", x, indices, n, in + 1);
    if (m >= 0) result_ = nb__call(NB_OP_INDEX, in, m + 1, NULL);
    COMPOSITE_END
}

nb_tensor *nb_index_put(nb_tensor *x, nb_tensor *const *indices, int n, nb_tensor *values, bool accumulate) {
    if (!nb__check_input("index_put", x) || !nb__check_input("index_put", values)) return NULL;
    COMPOSITE_BEGIN
    nb_tensor *in[NB_MAX_DIMS + 2] = { x, values->dtype == x->dtype ? values : nb_cast(values, x->dtype) };
    int m = expand_indices("index_put", x, indices, n, in + 2);
    if (m >= 0) result_ = nb__call(NB_OP_INDEX_PUT, in, m + 2, &(nb_op_args){ .i = { accumulate } });
    COMPOSITE_END
}

nb_tensor *nb_masked_scatter(nb_tensor *x, nb_tensor *mask, nb_tensor *source) {
    const char *fn = "masked_scatter";
    if (!nb__check_input(fn, x) || !nb__check_input(fn, mask) || !nb__check_input(fn, source)) return NULL;
    char dm[200], ds[200];
    if (mask->dtype != NB_BOOL) {
        nb__error("nb_%s: the mask must be bool, got %s", fn, nb__describe(mask, dm, sizeof dm));
        return NULL;
    }
    nb_shape both;
    if (nb__broadcast_shapes(fn, &x->shape, &mask->shape, &both) < 0) return NULL;
    COMPOSITE_BEGIN
    nb_tensor *xe = nb_expand(x, both), *me = nb_expand(mask, both);
    nb_tensor *in[NB_MAX_DIMS + 2] = { xe, NULL };
    if (both.ndim == 0) { /* a 0-d x and mask: one axis of one element */
        xe = in[0] = nb_reshape(xe, NB_SHAPE(1));
        me = nb_reshape(me, NB_SHAPE(1));
    }
    if (xe && me && mask_positions(fn, me, x->storage->device, in + 2) == 0) { /* one index tensor per axis */
        int64_t count = nb_numel(in[2]);
        if (count > nb_numel(source)) {
            nb__error("nb_%s: source %s has %lld elements, fewer than the %lld the mask %s selects", fn,
                      nb__describe(source, ds, sizeof ds), (long long)nb_numel(source), (long long)count,
                      nb__describe(mask, dm, sizeof dm));
        } else {
            nb_tensor *v = nb_slice(nb_reshape(source, NB_SHAPE(-1)), 0, 0, count, 1);
            in[1] = v && v->dtype != x->dtype ? nb_cast(v, x->dtype) : v;
            result_ = nb__call(NB_OP_INDEX_PUT, in, xe->shape.ndim + 2, &(nb_op_args){ .i = { 0 } });
            if (both.ndim == 0) result_ = nb_reshape(result_, both);
        }
    }
    COMPOSITE_END
}
