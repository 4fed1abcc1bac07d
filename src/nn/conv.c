/* Convolution and pooling layers on the module base: nb_nn_conv2d, nb_nn_conv1d, nb_nn_max_pool2d,
   nb_nn_avg_pool2d and nb_nn_adaptive_avg_pool2d, with torch's defaults and initialisation.
   Each checks its input's shape and names itself, the expected and the actual shape. */
#include "nn_impl.h"
#include "../ops/pool_opts.h"
#include <math.h>
#include <stdio.h>

/* "[N, 3, H, W]" (naming the unbatched form too for a 3-D input) for messages; channels < 0
   writes "C". */
static const char *expected_nchw(int64_t channels, bool unbatched, char *buf, size_t size) {
    char c[24];
    if (channels < 0) snprintf(c, sizeof c, "C");
    else snprintf(c, sizeof c, "%lld", (long long)channels);
    if (unbatched) snprintf(buf, size, "[N, %s, H, W] or [%s, H, W]", c, c);
    else snprintf(buf, size, "[N, %s, H, W]", c);
    return buf;
}

/* Checks x is [N, C, H, W] or [C, H, W] (with C == channels unless channels < 0) and that its
   spatial size is at least min_h x min_w; names the layer when not. */
static int check_input(const char *cls, nb_module *self, nb_tensor *x, int64_t channels, int64_t min_h, int64_t min_w) {
    int nd = nb_ndim(x);
    char sh[160], ex[96];
    nb_shape s = nb_shape_of(x);
    if (nd != 3 && nd != 4) {
        nb__error("%s %s: expected input %s, got %s", cls, nb__layer_name(self), expected_nchw(channels, false, ex, sizeof ex),
                  nb_shape_str(s, sh, sizeof sh));
        return -1;
    }
    int c = nd - 3;
    if (channels >= 0 && s.dim[c] != channels) {
        nb__error("%s %s: expected input %s, got %s", cls, nb__layer_name(self), expected_nchw(channels, nd == 3, ex, sizeof ex),
                  nb_shape_str(s, sh, sizeof sh));
        return -1;
    }
    if (s.dim[c + 1] < min_h || s.dim[c + 2] < min_w) {
        nb__error("%s %s: input %s is smaller than the (padded) kernel, which needs at least %lld x %lld", cls,
                  nb__layer_name(self), nb_shape_str(s, sh, sizeof sh), (long long)min_h, (long long)min_w);
        return -1;
    }
    return 0;
}

/* A convolution's weight (shape ws) and bias [out] (unless no_bias) as torch initialises them:
   kaiming_uniform_(a=sqrt(5)) on the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias. 0, or
   -1 with the error recorded (the module is then the caller's to free). */
static int conv_params(nb_module *m, nb_shape ws, int64_t out, int64_t fan_in, bool no_bias, nb_tensor **weight, nb_tensor **bias) {
    *weight = nb_module_param(m, "weight", nb_empty(ws, NB_F32));
    int rc = *weight ? nb_init_kaiming_uniform(*weight, sqrt(5.0)) : -1;
    if (rc == 0 && !no_bias) {
        *bias = nb_module_param(m, "bias", nb_empty(NB_SHAPE(out), NB_F32));
        double bound = 1.0 / sqrt((double)fan_in);
        rc = *bias ? nb_init_uniform(*bias, -bound, bound) : -1;
    }
    return rc;
}

/* ---------- conv2d and conv1d ---------- */
typedef struct {
    nb_module base;
    int64_t in, out;
    int dims;            /* 1 or 2 */
    int k[2], pad[2];    /* kernel and padding per axis: height, width (a 1-D one's height is 1, 0) */
    nb_pad_mode mode;    /* how padding fills; other than zeros it is done by nb_pad before */
    nb_conv_opts opts;   /* what nb_conv2d gets (padding 0 when nb_pad did it); nb_conv1d gets [1] */
    nb_tensor *weight, *bias;
} conv2d;

static const char *const PAD_MODE_NAMES[] = { "zeros", "reflect", "replicate", "circular" };

static nb_tensor *conv2d_forward(nb_module *self, nb_tensor *x) {
    conv2d *c = (conv2d *)self;
    int64_t need[2];
    for (int a = 0; a < 2; a++) need[a] = (int64_t)c->opts.dilation[a] * (c->k[a] - 1) + 1 - 2 * (int64_t)c->pad[a];
    if (c->dims == 2 && check_input("nb_nn_conv2d", self, x, c->in, need[0], need[1]) < 0) return NULL;
    if (c->dims == 1) {
        int nd = nb_ndim(x);
        if ((nd != 2 && nd != 3) || nb_dim(x, nd - 2) != c->in || nb_dim(x, nd - 1) < need[1]) {
            char sh[160];
            nb__error("nb_nn_conv1d %s: expected input [N, %lld, L] or [%lld, L] with L at least %lld, got %s",
                      nb__layer_name(self), (long long)c->in, (long long)c->in, (long long)need[1],
                      nb_shape_str(nb_shape_of(x), sh, sizeof sh));
            return NULL;
        }
    }
    /* a 1-D convolution is the length axis, [1], of the options */
    nb_conv_opts o1 = { { c->opts.stride[1] }, { c->opts.padding[1] }, { c->opts.dilation[1] }, c->opts.groups };
    if (c->mode == NB_PAD_CONSTANT) return c->dims == 2 ? nb_conv2d(x, c->weight, c->bias, c->opts) : nb_conv1d(x, c->weight, c->bias, o1);
    nb_scope *sc = nb_scope_begin();
    int64_t pads[4] = { c->pad[1], c->pad[1], c->pad[0], c->pad[0] }; /* from the last axis back */
    nb_tensor *xp = nb_pad(x, pads, c->dims == 2 ? 4 : 2, c->mode, 0);
    nb_tensor *y = c->dims == 2 ? nb_conv2d(xp, c->weight, c->bias, c->opts) : nb_conv1d(xp, c->weight, c->bias, o1);
    nb_keep(y);
    nb_scope_end(sc);
    return nb__own(y);
}

/* "(3, 3)", or "(3,)" for one axis, as torch prints its tuples */
static int tuple_str(const conv2d *c, const int *v, char *buf, size_t size) {
    return c->dims == 1 ? snprintf(buf, size, "(%d,)", v[1]) : snprintf(buf, size, "(%d, %d)", v[0], v[1]);
}

/* torch's Conv1d/Conv2d: padding, dilation, groups, bias and padding_mode only where they
   differ from the defaults */
static int conv2d_repr(nb_module *self, char *buf, size_t size) {
    conv2d *c = (conv2d *)self;
    const nb_conv_opts *o = &c->opts;
    char k[32], st[32], pd[32], dl[32];
    tuple_str(c, c->k, k, sizeof k);
    tuple_str(c, o->stride, st, sizeof st);
    tuple_str(c, c->pad, pd, sizeof pd);
    tuple_str(c, o->dilation, dl, sizeof dl);
    int n = snprintf(buf, size, "%lld, %lld, kernel_size=%s, stride=%s", (long long)c->in, (long long)c->out, k, st);
    if ((c->pad[0] || c->pad[1]) && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", padding=%s", pd);
    if ((o->dilation[0] > 1 || o->dilation[1] > 1) && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", dilation=%s", dl);
    if (o->groups > 1 && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", groups=%d", o->groups);
    if (!c->bias && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", bias=False");
    if (c->mode != NB_PAD_CONSTANT && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", padding_mode=%s", PAD_MODE_NAMES[c->mode]);
    return n;
}
static const nb_module_class CONV2D = { .name = "Conv2d", .forward = conv2d_forward, .extra_repr = conv2d_repr };
static const nb_module_class CONV1D = { .name = "Conv1d", .forward = conv2d_forward, .extra_repr = conv2d_repr };

static nb_module *make_conv(int dims, int64_t in_channels, int64_t out_channels, int kernel, nb_conv2d_opts opts) {
    const char *fn = dims == 2 ? "nb_nn_conv2d" : "nb_nn_conv1d";
    if (!nb__enum_ok(fn, "padding_mode", (int)opts.padding_mode, NB_PAD_CIRCULAR + 1, "nb_pad_mode", "constant, reflect, replicate, circular")) return NULL;
    int groups = opts.groups ? opts.groups : 1;
    int k[2], s[2], p[2], d[2];
    bool ok = in_channels > 0 && out_channels > 0 && groups > 0 && (unsigned)opts.padding_mode <= NB_PAD_CIRCULAR;
    for (int a = 0; a < 2; a++) {
        bool own = dims == 2 || a == 1; /* a 1-D convolution's height is the identity's */
        k[a] = !own ? 1 : dims == 2 && opts.kernel_hw[a] ? opts.kernel_hw[a] : kernel;
        s[a] = !own ? 1 : dims == 2 && opts.stride_hw[a] ? opts.stride_hw[a] : opts.stride ? opts.stride : 1;
        p[a] = !own ? 0 : dims == 2 && opts.padding_hw[a] ? opts.padding_hw[a] : opts.padding;
        d[a] = !own ? 1 : dims == 2 && opts.dilation_hw[a] ? opts.dilation_hw[a] : opts.dilation ? opts.dilation : 1;
        ok = ok && k[a] > 0 && s[a] > 0 && p[a] >= 0 && d[a] > 0;
    }
    if (!ok || opts.stride < 0 || opts.dilation < 0) {
        nb__error("%s: channels (%lld -> %lld) and kernel (%d, %d) must be positive, stride (%d, %d) and dilation (%d, %d) "
                  "positive, padding (%d, %d) and groups %d not negative and padding_mode one of nb_pad_mode's", fn,
                  (long long)in_channels, (long long)out_channels, k[0], k[1], s[0], s[1], d[0], d[1], p[0], p[1], opts.groups);
        return NULL;
    }
    if (in_channels % groups || out_channels % groups) {
        nb__error("%s: groups %d must divide both in_channels %lld and out_channels %lld", fn, groups,
                  (long long)in_channels, (long long)out_channels);
        return NULL;
    }
    conv2d *c = (conv2d *)nb_module_new(dims == 2 ? &CONV2D : &CONV1D, sizeof(conv2d));
    if (!c) return NULL;
    c->in = in_channels;
    c->out = out_channels;
    c->dims = dims;
    c->mode = opts.padding_mode;
    bool zeros = c->mode == NB_PAD_CONSTANT;
    c->opts = (nb_conv_opts){ { s[0], s[1] }, { zeros ? p[0] : 0, zeros ? p[1] : 0 }, { d[0], d[1] }, groups };
    for (int a = 0; a < 2; a++) c->k[a] = k[a], c->pad[a] = p[a];
    int64_t cin = in_channels / groups;
    nb_shape ws = dims == 2 ? NB_SHAPE(out_channels, cin, k[0], k[1]) : NB_SHAPE(out_channels, cin, k[1]);
    if (conv_params(&c->base, ws, out_channels, cin * k[0] * k[1], opts.no_bias, &c->weight, &c->bias) < 0) {
        nb_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}

nb_module *nb_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv2d_opts opts) {
    return make_conv(2, in_channels, out_channels, kernel, opts);
}

nb_module *nb_nn_conv1d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv2d_opts opts) {
    return make_conv(1, in_channels, out_channels, kernel, opts);
}

/* ---------- conv3d ---------- */
typedef struct {
    nb_module base;
    int64_t in, out;
    int kernel, pad;
    nb_pad_mode mode;
    nb_conv3d_opts opts; /* padding 0 when nb_pad does it */
    nb_tensor *weight, *bias;
} conv3d;

static nb_tensor *conv3d_forward(nb_module *self, nb_tensor *x) {
    conv3d *c = (conv3d *)self;
    int nd = nb_ndim(x);
    if ((nd != 4 && nd != 5) || nb_dim(x, nd - 4) != c->in) {
        char sh[160];
        nb__error("nb_nn_conv3d %s: expected input [N, %lld, D, H, W] or [%lld, D, H, W], got %s", nb__layer_name(self),
                  (long long)c->in, (long long)c->in, nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        return NULL;
    }
    if (c->mode == NB_PAD_CONSTANT) return nb_conv3d(x, c->weight, c->bias, c->opts);
    nb_scope *sc = nb_scope_begin();
    int64_t pads[6] = { c->pad, c->pad, c->pad, c->pad, c->pad, c->pad };
    nb_tensor *y = nb_conv3d(nb_pad(x, pads, 6, c->mode, 0), c->weight, c->bias, c->opts);
    nb_keep(y);
    nb_scope_end(sc);
    return nb__own(y);
}

static int conv3d_repr(nb_module *self, char *buf, size_t size) {
    conv3d *c = (conv3d *)self;
    const nb_conv3d_opts *o = &c->opts;
    int n = snprintf(buf, size, "%lld, %lld, kernel_size=(%d, %d, %d), stride=(%d, %d, %d)", (long long)c->in, (long long)c->out,
                     c->kernel, c->kernel, c->kernel, o->stride[0], o->stride[0], o->stride[0]);
    if (c->pad && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", padding=(%d, %d, %d)", c->pad, c->pad, c->pad);
    if (o->dilation[0] > 1 && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", dilation=(%d, %d, %d)", o->dilation[0], o->dilation[0], o->dilation[0]);
    if (o->groups > 1 && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", groups=%d", o->groups);
    if (!c->bias && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", bias=False");
    if (c->mode != NB_PAD_CONSTANT && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ", padding_mode=%s", PAD_MODE_NAMES[c->mode]);
    return n;
}
static const nb_module_class CONV3D = { .name = "Conv3d", .forward = conv3d_forward, .extra_repr = conv3d_repr };

nb_module *nb_nn_conv3d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv2d_opts opts) {
    if (!nb__enum_ok("nb_nn_conv3d", "padding_mode", (int)opts.padding_mode, NB_PAD_CIRCULAR + 1, "nb_pad_mode", "constant, reflect, replicate, circular"))
        return NULL;
    int groups = opts.groups ? opts.groups : 1, s = opts.stride ? opts.stride : 1, d = opts.dilation ? opts.dilation : 1;
    if (in_channels <= 0 || out_channels <= 0 || kernel <= 0 || s <= 0 || d <= 0 || opts.padding < 0 || groups <= 0 ||
        (unsigned)opts.padding_mode > NB_PAD_CIRCULAR) {
        nb__error("nb_nn_conv3d: channels (%lld -> %lld) and kernel %d must be positive, stride %d and dilation %d positive, "
                  "padding %d and groups %d not negative and padding_mode one of nb_pad_mode's", (long long)in_channels,
                  (long long)out_channels, kernel, opts.stride, opts.dilation, opts.padding, opts.groups);
        return NULL;
    }
    if (in_channels % groups || out_channels % groups) {
        nb__error("nb_nn_conv3d: groups %d must divide both in_channels %lld and out_channels %lld", groups,
                  (long long)in_channels, (long long)out_channels);
        return NULL;
    }
    conv3d *c = (conv3d *)nb_module_new(&CONV3D, sizeof(conv3d));
    if (!c) return NULL;
    c->in = in_channels;
    c->out = out_channels;
    c->kernel = kernel;
    c->pad = opts.padding;
    c->mode = opts.padding_mode;
    int p = c->mode == NB_PAD_CONSTANT ? opts.padding : 0;
    c->opts = (nb_conv3d_opts){ { s, s, s }, { p, p, p }, { d, d, d }, groups };
    int64_t cin = in_channels / groups;
    if (conv_params(&c->base, NB_SHAPE(out_channels, cin, kernel, kernel, kernel), out_channels, cin * kernel * kernel * kernel,
                    opts.no_bias, &c->weight, &c->bias) < 0) {
        nb_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}

/* ---------- transposed convolutions ---------- */
typedef struct {
    nb_module base;
    int64_t in, out;
    int kernel, dims; /* 1 or 2 */
    nb_conv_transpose_opts opts;
    nb_tensor *weight, *bias;
} conv_transpose;

static nb_tensor *conv_transpose_forward(nb_module *self, nb_tensor *x) {
    conv_transpose *c = (conv_transpose *)self;
    int nd = nb_ndim(x);
    if ((nd != c->dims + 2 && nd != c->dims + 1) || nb_dim(x, nd - c->dims - 1) != c->in) {
        char sh[160];
        nb__error("nb_nn_conv_transpose%dd %s: expected input [N, %lld, %s] or [%lld, %s], got %s", c->dims, nb__layer_name(self),
                  (long long)c->in, c->dims == 1 ? "L" : "H, W", (long long)c->in, c->dims == 1 ? "L" : "H, W",
                  nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        return NULL;
    }
    return c->dims == 1 ? nb_conv_transpose1d(x, c->weight, c->bias, c->opts) : nb_conv_transpose2d(x, c->weight, c->bias, c->opts);
}

static int conv_transpose_repr(nb_module *self, char *buf, size_t size) {
    conv_transpose *c = (conv_transpose *)self;
    const nb_conv_transpose_opts *o = &c->opts;
    int n;
    if (c->dims == 1) {
        n = snprintf(buf, size, "%lld, %lld, kernel_size=(%d,), stride=(%d,)", (long long)c->in, (long long)c->out, c->kernel,
                     o->stride[0]);
        if (o->padding[0] && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", padding=(%d,)", o->padding[0]);
        if (o->output_padding[0] && n >= 0 && (size_t)n < size)
            n += snprintf(buf + n, size - (size_t)n, ", output_padding=(%d,)", o->output_padding[0]);
        if (o->dilation[0] > 1 && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", dilation=(%d,)", o->dilation[0]);
    } else {
        n = snprintf(buf, size, "%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d)", (long long)c->in, (long long)c->out, c->kernel,
                     c->kernel, o->stride[0], o->stride[1]);
        if (o->padding[0] && n >= 0 && (size_t)n < size)
            n += snprintf(buf + n, size - (size_t)n, ", padding=(%d, %d)", o->padding[0], o->padding[1]);
        if (o->output_padding[0] && n >= 0 && (size_t)n < size)
            n += snprintf(buf + n, size - (size_t)n, ", output_padding=(%d, %d)", o->output_padding[0], o->output_padding[1]);
        if (o->dilation[0] > 1 && n >= 0 && (size_t)n < size)
            n += snprintf(buf + n, size - (size_t)n, ", dilation=(%d, %d)", o->dilation[0], o->dilation[1]);
    }
    if (o->groups > 1 && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", groups=%d", o->groups);
    if (!c->bias && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", bias=False");
    return n;
}
static const nb_module_class CONV_TRANSPOSE1D = { .name = "ConvTranspose1d", .forward = conv_transpose_forward,
                                                  .extra_repr = conv_transpose_repr };
static const nb_module_class CONV_TRANSPOSE2D = { .name = "ConvTranspose2d", .forward = conv_transpose_forward,
                                                  .extra_repr = conv_transpose_repr };

static nb_module *make_conv_transpose(const nb_module_class *cls, int dims, int64_t in_channels, int64_t out_channels, int kernel,
                                      nb_conv_transpose2d_opts opts) {
    int groups = opts.groups ? opts.groups : 1;
    int s = opts.stride ? opts.stride : 1, d = opts.dilation ? opts.dilation : 1;
    if (in_channels <= 0 || out_channels <= 0 || kernel <= 0 || opts.stride < 0 || opts.padding < 0 || opts.dilation < 0 ||
        groups < 0 || opts.output_padding < 0 || (opts.output_padding >= s && opts.output_padding >= d)) {
        nb__error("nb_nn_conv_transpose%dd: channels (%lld -> %lld) and kernel %d must be positive, stride %d, padding %d, "
                  "dilation %d and groups %d not negative, and output_padding %d below the stride or the dilation", dims,
                  (long long)in_channels, (long long)out_channels, kernel, opts.stride, opts.padding, opts.dilation, opts.groups,
                  opts.output_padding);
        return NULL;
    }
    if (in_channels % groups || out_channels % groups) {
        nb__error("nb_nn_conv_transpose%dd: groups %d must divide both in_channels %lld and out_channels %lld", dims, groups,
                  (long long)in_channels, (long long)out_channels);
        return NULL;
    }
    conv_transpose *c = (conv_transpose *)nb_module_new(cls, sizeof(conv_transpose));
    if (!c) return NULL;
    c->in = in_channels;
    c->out = out_channels;
    c->kernel = kernel;
    c->dims = dims;
    c->opts = (nb_conv_transpose_opts){ { s, s }, { opts.padding, opts.padding }, { opts.output_padding, opts.output_padding },
                                        { d, d }, groups };
    /* torch: weight [in, out/groups, k...], kaiming_uniform_(a=sqrt(5)) with fan_in out/groups * k^dims, bias likewise */
    int64_t cout = out_channels / groups, fan_in = cout * kernel * (dims == 2 ? kernel : 1);
    nb_shape ws = dims == 2 ? NB_SHAPE(in_channels, cout, kernel, kernel) : NB_SHAPE(in_channels, cout, kernel);
    if (conv_params(&c->base, ws, out_channels, fan_in, opts.no_bias, &c->weight, &c->bias) < 0) {
        nb_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}

nb_module *nb_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv_transpose2d_opts opts) {
    return make_conv_transpose(&CONV_TRANSPOSE2D, 2, in_channels, out_channels, kernel, opts);
}
nb_module *nb_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv_transpose2d_opts opts) {
    return make_conv_transpose(&CONV_TRANSPOSE1D, 1, in_channels, out_channels, kernel, opts);
}

/* ---------- upsampling ---------- */
typedef struct {
    nb_module base;
    nb_interp_opts opts;
} upsample;

/* The options made for the input's rank: one size or factor serves every spatial axis. */
static nb_tensor *upsample_forward(nb_module *self, nb_tensor *x) {
    nb_interp_opts o = ((upsample *)self)->opts;
    if (o.mode == NB_INTERP_LINEAR && nb_ndim(x) == 4) o.mode = NB_INTERP_BILINEAR;
    if (o.mode == NB_INTERP_BILINEAR && nb_ndim(x) == 3) o.mode = NB_INTERP_LINEAR;
    return nb_interpolate(x, o);
}

static const char *const interp_names[] = { "nearest", "linear", "bilinear" };

static int upsample_repr(nb_module *self, char *buf, size_t size) {
    const nb_interp_opts *o = &((upsample *)self)->opts;
    char f[32];
    if (o->size[0] > 0)
        return o->size[1] > 0 && o->size[1] != o->size[0]
                   ? snprintf(buf, size, "size=(%lld, %lld), mode=%s", (long long)o->size[0], (long long)o->size[1], interp_names[o->mode])
                   : snprintf(buf, size, "size=%lld, mode=%s", (long long)o->size[0], interp_names[o->mode]);
    return snprintf(buf, size, "scale_factor=%s, mode=%s", nb__py_float(o->scale_factor[0], f, sizeof f), interp_names[o->mode]);
}
static const nb_module_class UPSAMPLE = { .name = "Upsample", .forward = upsample_forward, .extra_repr = upsample_repr };

nb_module *nb_nn_upsample(nb_interp_opts opts) {
    if (!nb__enum_ok("nb_nn_upsample", "mode", (int)opts.mode, NB_INTERP_BILINEAR + 1, "nb_interp_mode", "nearest, linear, bilinear"))
        return NULL;
    if (opts.size[0] <= 0 && !(opts.scale_factor[0] > 0)) {
        nb__error("nb_nn_upsample: give a positive size or scale_factor");
        return NULL;
    }
    for (int k = 1; k < 2; k++) { /* one value serves both axes, as torch's single size or factor */
        if (opts.size[k] <= 0) opts.size[k] = opts.size[0];
        if (!(opts.scale_factor[k] > 0)) opts.scale_factor[k] = opts.scale_factor[0];
    }
    upsample *u = (upsample *)nb_module_new(&UPSAMPLE, sizeof(upsample));
    if (!u) return NULL;
    u->opts = opts;
    return &u->base;
}

/* ---------- pooling ---------- */
typedef struct {
    nb_module base;
    int kernel, out_h, out_w;
    nb_pool_opts opts;
    nb__pool_geom g; /* the options resolved per axis */
} pool2d;

/* The smallest input a pool's windows fit (the dilated kernel less the padding), per axis. */
static int64_t pool_need(const pool2d *p, int axis) { return nb__pool_span(&p->g, axis) - 2 * (int64_t)p->g.p[axis]; }

static nb_tensor *max_pool2d_forward(nb_module *self, nb_tensor *x) {
    pool2d *p = (pool2d *)self;
    if (check_input("nb_nn_max_pool2d", self, x, -1, pool_need(p, 0), pool_need(p, 1)) < 0) return NULL;
    return nb_max_pool2d(x, p->kernel, p->opts);
}

static nb_tensor *avg_pool2d_forward(nb_module *self, nb_tensor *x) {
    pool2d *p = (pool2d *)self;
    if (check_input("nb_nn_avg_pool2d", self, x, -1, pool_need(p, 0), pool_need(p, 1)) < 0) return NULL;
    return nb_avg_pool2d(x, p->kernel, p->opts);
}

static nb_tensor *adaptive_avg_pool2d_forward(nb_module *self, nb_tensor *x) {
    pool2d *p = (pool2d *)self;
    if (check_input("nb_nn_adaptive_avg_pool2d", self, x, -1, 1, 1) < 0) return NULL;
    return nb_adaptive_avg_pool2d(x, p->out_h, p->out_w);
}

/* "2" for a value both axes share, "(2, 3)" otherwise, as torch prints an int or a tuple. */
static const char *pair_str(const int *v, char *buf, size_t size) {
    if (v[0] == v[1]) snprintf(buf, size, "%d", v[0]);
    else snprintf(buf, size, "(%d, %d)", v[0], v[1]);
    return buf;
}

static int max_pool2d_repr(nb_module *self, char *buf, size_t size) {
    pool2d *p = (pool2d *)self;
    char k[32], st[32], pd[32], dl[32];
    return snprintf(buf, size, "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", pair_str(p->g.k, k, sizeof k),
                    pair_str(p->g.s, st, sizeof st), pair_str(p->g.p, pd, sizeof pd), pair_str(p->g.d, dl, sizeof dl),
                    p->g.ceil_mode ? "True" : "False");
}
static int avg_pool2d_repr(nb_module *self, char *buf, size_t size) {
    pool2d *p = (pool2d *)self;
    char k[32], st[32], pd[32];
    return snprintf(buf, size, "kernel_size=%s, stride=%s, padding=%s", pair_str(p->g.k, k, sizeof k), pair_str(p->g.s, st, sizeof st),
                    pair_str(p->g.p, pd, sizeof pd));
}
static int adaptive_repr(nb_module *self, char *buf, size_t size) {
    pool2d *p = (pool2d *)self;
    return snprintf(buf, size, "output_size=(%d, %d)", p->out_h, p->out_w);
}
static const nb_module_class MAX_POOL2D = { .name = "MaxPool2d", .forward = max_pool2d_forward, .extra_repr = max_pool2d_repr };
static const nb_module_class AVG_POOL2D = { .name = "AvgPool2d", .forward = avg_pool2d_forward, .extra_repr = avg_pool2d_repr };
static const nb_module_class ADAPTIVE_AVG_POOL2D = { .name = "AdaptiveAvgPool2d", .forward = adaptive_avg_pool2d_forward,
                                                     .extra_repr = adaptive_repr };

static nb_module *make_pool(const nb_module_class *cls, const char *fn, int kernel, nb_pool_opts opts) {
    nb__pool_geom g;
    if (nb__pool_resolve(fn, kernel, opts, cls == &MAX_POOL2D, &g) < 0) return NULL;
    pool2d *p = (pool2d *)nb_module_new(cls, sizeof(pool2d));
    if (!p) return NULL;
    p->kernel = kernel;
    p->opts = opts;
    p->g = g;
    return &p->base;
}

nb_module *nb_nn_max_pool2d(int kernel, nb_pool_opts opts) {
    return make_pool(&MAX_POOL2D, "nb_nn_max_pool2d", kernel, opts);
}

nb_module *nb_nn_avg_pool2d(int kernel, nb_pool_opts opts) {
    return make_pool(&AVG_POOL2D, "nb_nn_avg_pool2d", kernel, opts);
}

nb_module *nb_nn_adaptive_avg_pool2d(int out_h, int out_w) {
    if (out_h <= 0 || out_w <= 0) {
        nb__error("nb_nn_adaptive_avg_pool2d: output size %d x %d must be positive", out_h, out_w);
        return NULL;
    }
    pool2d *p = (pool2d *)nb_module_new(&ADAPTIVE_AVG_POOL2D, sizeof(pool2d));
    if (!p) return NULL;
    p->out_h = out_h;
    p->out_w = out_w;
    return &p->base;
}
