/* Functional convolution and pooling: option defaults, unbatched [C, H, W] inputs, then one
   call into the dispatch path (the ops are conv2d, max_pool2d, avg_pool2d and
   adaptive_avg_pool2d in ops.def). */
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
