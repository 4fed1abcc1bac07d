/* Functional convolution and pooling: option defaults, unbatched [C, H, W] inputs, then one
   call into the dispatch path (the ops are conv2d, max_pool2d, avg_pool2d and
   adaptive_avg_pool2d in ops.def); the transposed convolutions as conv2d_backward_input. */
#include "ops_impl.h"
#include "nabla/functional.h"
#include <string.h>

/* An unbatched [C, H, W] input is run as [1, C, H, W] and the batch axis removed again, as
   torch does; other ranks go to the op, whose inference names what it expected. */
static nb_tensor *run_batched(nb_op_id op, nb_tensor **in, int nin, const nb_op_args *a) {
    if (in[0]->shape.ndim != 3) return nb__call(op, in, nin, a);
    nb_scope *s = nb_scope_begin();
    nb_tensor *u[3] = { nb_unsqueeze(in[0], 0), nin > 1 ? in[1] : NULL, nin > 2 ? in[2] : NULL };
    nb_tensor *r = nb_squeeze(u[0] ? nb__call(op, u, nin, a) : NULL, 0);
    nb_keep(r);
    nb_scope_end(s);
    return nb__own(r);
}

nb_tensor *nb_conv2d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_opts opts) {
    if (!x || !w) {
        if (!nb__has_error()) nb__error("nb_conv2d: %s is NULL", x ? "weight" : "input");
        return NULL;
    }
    nb_op_args a = { 0 };
    for (int k = 0; k < 2; k++) {
        if (opts.stride[k] < 0 || opts.padding[k] < 0 || opts.dilation[k] < 0) {
            nb__error("nb_conv2d: stride (%d, %d), padding (%d, %d) and dilation (%d, %d) must not be negative",
                      opts.stride[0], opts.stride[1], opts.padding[0], opts.padding[1], opts.dilation[0], opts.dilation[1]);
            return NULL;
        }
        a.i[k] = opts.stride[k] ? opts.stride[k] : 1;
        a.i[2 + k] = opts.padding[k];
        a.i[4 + k] = opts.dilation[k] ? opts.dilation[k] : 1;
    }
    if (opts.groups < 0) {
        nb__error("nb_conv2d: groups must be positive, got %d", opts.groups);
        return NULL;
    }
    a.i[6] = opts.groups ? opts.groups : 1;
    nb_tensor *in[3] = { x, w, b };
    return run_batched(NB_OP_CONV2D, in, b ? 3 : 2, &a);
}

/* The transposed convolution is the input gradient of the convolution it transposes:
   conv2d_backward_input of x with w, shaped as the larger image, so its own backward is the
   convolution ops again. Output size (H - 1) s - 2 p + d (k - 1) + output_padding + 1. */
nb_tensor *nb_conv_transpose2d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_transpose_opts opts) {
    if (!x || !w) {
        if (!nb__has_error()) nb__error("nb_conv_transpose2d: %s is NULL", x ? "weight" : "input");
        return NULL;
    }
    char dx[200], dw[200];
    int groups = opts.groups ? opts.groups : 1;
    bool unbatched = x->shape.ndim == 3;
    if ((x->shape.ndim != 4 && !unbatched) || w->shape.ndim != 4 || groups < 1 ||
        x->shape.dim[unbatched ? 0 : 1] != w->shape.dim[0] || w->shape.dim[0] % groups) {
        nb__error("nb_conv_transpose2d: expected input [N, C, H, W] (or [C, H, W]) and weight [C, out/groups, kh, kw] with "
                  "groups %d dividing C, got %s and %s", groups, nb__describe(x, dx, sizeof dx), nb__describe(w, dw, sizeof dw));
        return NULL;
    }
    nb_op_args a = { 0 };
    nb_shape out = { 4, { unbatched ? 1 : x->shape.dim[0], w->shape.dim[1] * groups, 0, 0 } };
    for (int k = 0; k < 2; k++) {
        int s = opts.stride[k] ? opts.stride[k] : 1, d = opts.dilation[k] ? opts.dilation[k] : 1;
        if (opts.stride[k] < 0 || opts.padding[k] < 0 || opts.dilation[k] < 0 || opts.output_padding[k] < 0 ||
            (opts.output_padding[k] >= s && opts.output_padding[k] >= d)) {
            nb__error("nb_conv_transpose2d: stride (%d, %d), padding (%d, %d) and dilation must not be negative, and "
                      "output_padding (%d, %d) must be smaller than the stride or the dilation", opts.stride[0], opts.stride[1],
                      opts.padding[0], opts.padding[1], opts.output_padding[0], opts.output_padding[1]);
            return NULL;
        }
        a.i[k] = s;
        a.i[2 + k] = opts.padding[k];
        a.i[4 + k] = d;
        int64_t h = x->shape.dim[(unbatched ? 1 : 2) + k];
        out.dim[2 + k] = (h - 1) * s - 2 * (int64_t)opts.padding[k] + (int64_t)d * (w->shape.dim[2 + k] - 1) + opts.output_padding[k] + 1;
        if (out.dim[2 + k] <= 0) {
            nb__error("nb_conv_transpose2d: input %s with weight %s gives an empty output", nb__describe(x, dx, sizeof dx),
                      nb__describe(w, dw, sizeof dw));
            return NULL;
        }
    }
    a.i[6] = groups;
    a.shape = out;
    nb_scope *sc = nb_scope_begin();
    nb_tensor *in[2] = { unbatched ? nb_unsqueeze(x, 0) : x, w };
    nb_tensor *y = in[0] ? nb__call(NB_OP_CONV2D_BACKWARD_INPUT, in, 2, &a) : NULL;
    if (y && b) y = nb_add(y, nb_reshape(b, NB_SHAPE(out.dim[1], 1, 1)));
    if (y && unbatched) y = nb_squeeze(y, 0);
    nb_keep(y);
    nb_scope_end(sc);
    return nb__own(y);
}

nb_tensor *nb_conv_transpose1d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_transpose_opts opts) {
    if (!x || !w) {
        if (!nb__has_error()) nb__error("nb_conv_transpose1d: %s is NULL", x ? "weight" : "input");
        return NULL;
    }
    if ((x->shape.ndim != 3 && x->shape.ndim != 2) || w->shape.ndim != 3) {
        char dx[200], dw[200];
        nb__error("nb_conv_transpose1d: expected input [N, C, L] (or [C, L]) and weight [C, out/groups, k], got %s and %s",
                  nb__describe(x, dx, sizeof dx), nb__describe(w, dw, sizeof dw));
        return NULL;
    }
    /* as a 2-D one over [.., 1, L]: the first axis's settings are the identity's */
    nb_conv_transpose_opts o2 = { { 1, opts.stride[0] }, { 0, opts.padding[0] }, { 0, opts.output_padding[0] },
                                  { 1, opts.dilation[0] }, opts.groups };
    nb_scope *sc = nb_scope_begin();
    int axis = x->shape.ndim - 1; /* the new height axis, before the length */
    nb_tensor *y = nb_squeeze(nb_conv_transpose2d(nb_unsqueeze(x, axis), nb_unsqueeze(w, 2), b, o2), axis);
    nb_keep(y);
    nb_scope_end(sc);
    return nb__own(y);
}

static nb_tensor *pool(nb_op_id op, const char *fn, nb_tensor *x, int kernel, nb_pool_opts opts) {
    if (!x) {
        nb__error("nb_%s: input is NULL", fn);
        return NULL;
    }
    if (kernel < 1 || opts.stride < 0 || opts.padding < 0) {
        nb__error("nb_%s: kernel %d must be positive and stride %d and padding %d not negative", fn, kernel, opts.stride,
                  opts.padding);
        return NULL;
    }
    int s = opts.stride ? opts.stride : kernel;
    nb_op_args a = { .i = { kernel, kernel, s, s, opts.padding, opts.padding } };
    return run_batched(op, &x, 1, &a);
}

nb_tensor *nb_max_pool2d(nb_tensor *x, int kernel, nb_pool_opts opts) {
    return pool(NB_OP_MAX_POOL2D, "max_pool2d", x, kernel, opts);
}

nb_tensor *nb_avg_pool2d(nb_tensor *x, int kernel, nb_pool_opts opts) {
    return pool(NB_OP_AVG_POOL2D, "avg_pool2d", x, kernel, opts);
}

nb_tensor *nb_adaptive_avg_pool2d(nb_tensor *x, int out_h, int out_w) {
    if (!x) {
        nb__error("nb_adaptive_avg_pool2d: input is NULL");
        return NULL;
    }
    nb_op_args a = { .i = { out_h, out_w } };
    return run_batched(NB_OP_ADAPTIVE_AVG_POOL2D, &x, 1, &a);
}
