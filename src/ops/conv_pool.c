/* Functional convolution and pooling: option defaults, unbatched [C, H, W] inputs, then one
   call into the dispatch path (the ops are conv2d, max_pool2d, avg_pool2d and
   adaptive_avg_pool2d in ops.def); the transposed convolutions as conv2d_backward_input; and
   interpolation (nearest, linear, bilinear) as index_select and lerp. */
#include "ops_impl.h"
#include "pool_opts.h"
#include <stdio.h>
#include "nabla/functional.h"
#include <math.h>
#include <stdlib.h>
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
    a.i[NB_CONV_ARG_BF16] = nb__autocast_bf16(x, w);
    nb_tensor *in[3] = { x, w, b };
    return run_batched(NB_OP_CONV2D, in, b ? 3 : 2, &a);
}

nb_tensor *nb_conv1d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_opts opts) {
    if (!x || !w) {
        if (!nb__has_error()) nb__error("nb_conv1d: %s is NULL", x ? "weight" : "input");
        return NULL;
    }
    if ((x->shape.ndim != 3 && x->shape.ndim != 2) || w->shape.ndim != 3) {
        char dx[200], dw[200];
        nb__error("nb_conv1d: expected input [N, C, L] (or [C, L]) and weight [O, C/groups, k], got %s and %s",
                  nb__describe(x, dx, sizeof dx), nb__describe(w, dw, sizeof dw));
        return NULL;
    }
    /* as a 2-D one over [.., 1, L]: the first axis's settings are the identity's */
    nb_conv_opts o2 = { { 1, opts.stride[0] }, { 0, opts.padding[0] }, { 1, opts.dilation[0] }, opts.groups };
    nb_scope *sc = nb_scope_begin();
    int axis = x->shape.ndim - 1; /* the new height axis, before the length */
    nb_tensor *y = nb_squeeze(nb_conv2d(nb_unsqueeze(x, axis), nb_unsqueeze(w, 2), b, o2), axis);
    nb_keep(y);
    nb_scope_end(sc);
    return nb__own(y);
}

nb_tensor *nb_conv3d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv3d_opts opts) {
    if (!x || !w) {
        if (!nb__has_error()) nb__error("nb_conv3d: %s is NULL", x ? "weight" : "input");
        return NULL;
    }
    char dx[200], dw[200];
    bool unbatched = x->shape.ndim == 4;
    if ((x->shape.ndim != 5 && !unbatched) || w->shape.ndim != 5) {
        nb__error("nb_conv3d: expected input [N, C, D, H, W] (or [C, D, H, W]) and weight [O, C/groups, kd, kh, kw], got %s "
                  "and %s", nb__describe(x, dx, sizeof dx), nb__describe(w, dw, sizeof dw));
        return NULL;
    }
    int s[3], p[3], d[3];
    for (int k = 0; k < 3; k++) {
        if (opts.stride[k] < 0 || opts.padding[k] < 0 || opts.dilation[k] < 0) {
            nb__error("nb_conv3d: stride (%d, %d, %d), padding (%d, %d, %d) and dilation (%d, %d, %d) must not be negative",
                      opts.stride[0], opts.stride[1], opts.stride[2], opts.padding[0], opts.padding[1], opts.padding[2],
                      opts.dilation[0], opts.dilation[1], opts.dilation[2]);
            return NULL;
        }
        s[k] = opts.stride[k] ? opts.stride[k] : 1;
        p[k] = opts.padding[k];
        d[k] = opts.dilation[k] ? opts.dilation[k] : 1;
    }
    nb_scope *sc = nb_scope_begin();
    nb_tensor *xb = unbatched ? nb_unsqueeze(x, 0) : x;
    int64_t n = xb->shape.dim[0], c = xb->shape.dim[1], depth = xb->shape.dim[2], kd = w->shape.dim[2];
    int64_t span = (int64_t)d[0] * (kd - 1) + 1, od = depth + 2 * (int64_t)p[0] - span < 0 ? 0 : (depth + 2 * (int64_t)p[0] - span) / s[0] + 1;
    nb_tensor *y = NULL;
    int groups = opts.groups ? opts.groups : 1;
    if (groups < 1 || c != w->shape.dim[1] * groups || w->shape.dim[0] % groups ||
        (b && (b->shape.ndim != 1 || b->shape.dim[0] != w->shape.dim[0]))) {
        nb__error("nb_conv3d: input %s, weight %s%s and groups %d do not fit: the weight is [O, C/groups, kd, kh, kw] "
                  "with O divisible by groups, the bias [O]", nb__describe(x, dx, sizeof dx), nb__describe(w, dw, sizeof dw),
                  b ? " and a bias" : "", opts.groups);
    } else if (od < 1 || kd < 1) {
        nb__error("nb_conv3d: kernel depth %lld (dilation %d) is larger than the padded input depth %lld of input %s",
                  (long long)kd, d[0], (long long)(depth + 2 * p[0]), nb__describe(x, dx, sizeof dx));
    } else {
        /* zero padding in depth up front; height and width go to the 2-D convolutions */
        int64_t pads[6] = { 0, 0, 0, 0, p[0], p[0] };
        nb_tensor *xp = p[0] ? nb_pad(xb, pads, 6, NB_PAD_CONSTANT, 0) : xb;
        nb_conv_opts o2 = { { s[1], s[2] }, { p[1], p[2] }, { d[1], d[2] }, opts.groups };
        for (int64_t t = 0; t < kd; t++) {
            /* the input depths tap t reads for output depths 0..od-1, as a batch of planes */
            int64_t z0 = t * d[0];
            nb_tensor *planes = nb_slice(xp, 2, z0, z0 + (od - 1) * s[0] + 1, s[0]);          /* [N, C, od, H, W] */
            planes = nb_reshape(nb_permute(planes, (int[]){ 0, 2, 1, 3, 4 }), NB_SHAPE(n * od, c, xb->shape.dim[3], xb->shape.dim[4]));
            nb_tensor *wt = nb_squeeze(nb_slice(w, 2, t, t + 1, 1), 2);                       /* [O, C/g, kh, kw] */
            nb_tensor *yt = nb_conv2d(planes, wt, NULL, o2);                                  /* [N*od, O, OH, OW] */
            y = t == 0 ? yt : nb_add(y, yt);
            if (!y) break;
        }
        if (y) {
            nb_shape ys = nb_shape_of(y);
            y = nb_permute(nb_reshape(y, NB_SHAPE(n, od, ys.dim[1], ys.dim[2], ys.dim[3])), (int[]){ 0, 2, 1, 3, 4 });
            if (b) y = nb_add(y, nb_reshape(b, NB_SHAPE(-1, 1, 1, 1)));
            if (unbatched) y = nb_squeeze(y, 0);
        }
    }
    nb_keep(y);
    nb_scope_end(sc);
    return nb__own(y);
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
    a.i[NB_CONV_ARG_BF16] = nb__autocast_bf16(x, w);
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

/* i[0..1] kernel, i[2..3] stride, i[4..5] padding, i[6..7] dilation, i[8] ceil_mode, i[9]
   exclude_padding (per axis: height, width) */
static nb_tensor *pool(nb_op_id op, const char *fn, nb_tensor *x, int kernel, nb_pool_opts opts) {
    char name[32];
    snprintf(name, sizeof name, "nb_%s", fn);
    if (!x) {
        nb__error("%s: input is NULL", name);
        return NULL;
    }
    nb__pool_geom g;
    if (nb__pool_resolve(name, kernel, opts, op == NB_OP_MAX_POOL2D, &g) < 0) return NULL;
    nb_op_args a = { .i = { g.k[0], g.k[1], g.s[0], g.s[1], g.p[0], g.p[1], g.d[0], g.d[1], g.ceil_mode, g.exclude_padding } };
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

/* ---- interpolation ---- */
/* The source position of output index j along an axis of in -> out, as torch's
   area_pixel_compute_source_index (scale: in / out, or 1 / scale_factor when one was given). */
static double source_index(int64_t j, double scale, bool align_corners, int64_t in, int64_t out) {
    if (align_corners) return out > 1 ? (double)j * (double)(in - 1) / (double)(out - 1) : 0;
    double s = scale * ((double)j + 0.5) - 0.5;
    return s < 0 ? 0 : s;
}

/* x resized along axis from in to out: nearest (floor(j * scale), torch's "nearest") or linear
   (the two neighbours weighted by their distances), as index_select and lerp so it differentiates. */
static nb_tensor *resize_axis(nb_tensor *x, int axis, int64_t out, double scale, nb_interp_mode mode, bool align_corners) {
    int64_t in = x->shape.dim[axis];
    int64_t *i0 = malloc(sizeof(int64_t) * (size_t)out), *i1 = malloc(sizeof(int64_t) * (size_t)out);
    double *l1 = malloc(sizeof(double) * (size_t)out);
    nb_tensor *r = NULL;
    if (!i0 || !i1 || !l1) nb__error("nb_interpolate: out of memory");
    else {
        for (int64_t j = 0; j < out; j++) {
            if (mode == NB_INTERP_NEAREST) {
                int64_t k = (int64_t)floor((double)j * scale);
                i0[j] = k < in - 1 ? k : in - 1;
                continue;
            }
            double src = source_index(j, scale, align_corners, in, out);
            int64_t k = (int64_t)src;
            i0[j] = k < in - 1 ? k : in - 1;
            i1[j] = k + 1 < in ? k + 1 : in - 1;
            l1[j] = src - (double)k;
        }
        nb_device dev = x->storage->device;
        nb_tensor *a = nb_index_select(x, axis, nb_to(nb_from_data(i0, NB_SHAPE(out), NB_I64), dev));
        if (mode == NB_INTERP_NEAREST) r = a;
        else {
            nb_tensor *b = nb_index_select(x, axis, nb_to(nb_from_data(i1, NB_SHAPE(out), NB_I64), dev));
            nb_shape ls = { x->shape.ndim, { 0 } };
            for (int d = 0; d < ls.ndim; d++) ls.dim[d] = d == axis ? out : 1;
            nb_tensor *w1 = nb_to(nb_cast(nb_from_data(l1, ls, NB_F64), x->dtype), dev);
            nb_tensor *w0 = nb_add_scalar(nb_neg(w1), 1);
            r = nb_add(nb_mul(a, w0), nb_mul(b, w1));
        }
    }
    free(i0);
    free(i1);
    free(l1);
    return r;
}

nb_tensor *nb_interpolate(nb_tensor *x, nb_interp_opts opts) {
    if (!x) {
        if (!nb__has_error()) nb__error("nb_interpolate: input is NULL");
        return NULL;
    }
    if (!nb__enum_ok("nb_interpolate", "mode", (int)opts.mode, NB_INTERP_BILINEAR + 1, "nb_interp_mode", "nearest, linear, bilinear"))
        return NULL;
    char d[200];
    int nd = x->shape.ndim, spatial = nd - 2;
    bool linear = opts.mode == NB_INTERP_LINEAR || opts.mode == NB_INTERP_BILINEAR;
    if ((nd != 3 && nd != 4) || (unsigned)opts.mode > NB_INTERP_BILINEAR ||
        (opts.mode == NB_INTERP_LINEAR && nd != 3) || (opts.mode == NB_INTERP_BILINEAR && nd != 4) || !nb__is_float(x->dtype)) {
        nb__error("nb_interpolate: expected a float input [N, C, L] (nearest, linear) or [N, C, H, W] (nearest, bilinear), got %s "
                  "with mode %d", nb__describe(x, d, sizeof d), (int)opts.mode);
        return NULL;
    }
    if (!linear && opts.align_corners) {
        nb__error("nb_interpolate: align_corners applies to the linear modes only (as torch)");
        return NULL;
    }
    int64_t out[2];
    double scale[2];
    for (int k = 0; k < spatial; k++) {
        int64_t in = x->shape.dim[2 + k];
        if (opts.size[k] > 0) {
            out[k] = opts.size[k];
            scale[k] = (double)in / (double)out[k];
        } else if (opts.scale_factor[k] > 0) {
            out[k] = (int64_t)floor((double)in * opts.scale_factor[k]);
            scale[k] = 1.0 / opts.scale_factor[k];
        } else {
            nb__error("nb_interpolate: give a positive size or scale_factor for every spatial axis of %s", nb__describe(x, d, sizeof d));
            return NULL;
        }
        if (out[k] <= 0 || in <= 0 || out[k] > ((int64_t)1 << 31)) {
            nb__error("nb_interpolate: %s resized to %lld along axis %d", nb__describe(x, d, sizeof d), (long long)out[k], 2 + k);
            return NULL;
        }
    }
    nb_scope *sc = nb_scope_begin();
    nb_tensor *y = x;
    for (int k = spatial - 1; k >= 0 && y; k--) y = resize_axis(y, 2 + k, out[k], scale[k], opts.mode, opts.align_corners);
    if (y == x) y = nb_clone(x);
    nb_keep(y);
    nb_scope_end(sc);
    return nb__own(y);
}
