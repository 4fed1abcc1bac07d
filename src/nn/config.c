/* Models from a Keras-like JSON config (nb_nn_from_config). The residual block is residual.c's,
   the summary summary.c's and the CLI's built-in configs config_builtin.c's.

   A config is {"input": [C, H, W], "layers": [{"type": ..., fields...}, ...], "name": "..."}
   ("name" optional, ignored), or the bare list of layers when the caller gives the sample shape.
   "input" is one sample's shape without the batch axis. Each layer's input size (in_channels,
   in_features, the norms' features) is inferred by propagating that shape through the layers
   with the arithmetic of the modules' ops, checked for overflow, so a config that builds also
   runs. The result is a sequential whose children are "0", "1", ... with PyTorch's parameter
   names ("3.body.0.weight"). Types and fields (defaults in parentheses):
     linear               out, bias (true); acts on the last axis, so after a conv it needs a flatten
     conv2d               out, kernel, stride (1), padding (0), dilation (1), groups (1), bias
                          (true), padding_mode ("zeros"; "reflect", "replicate" or "circular",
                          as torch's, reflect needing the padding below the input size and
                          circular at most it); kernel, stride, padding and dilation are each an
                          integer or a [height, width] pair, padding also "valid" or "same" (for
                          stride 1 and an odd dilated kernel)
     conv1d               the fields of conv2d, each one integer, over [C, L] per sample
     conv3d               the fields of conv2d, each one integer for all three axes (nb_nn_conv3d
                          has cubic kernels), over [C, D, H, W] per sample
     max_pool2d           kernel, stride (kernel), padding (0, at most half the kernel),
                          dilation (1), ceil_mode (false)
     avg_pool2d           kernel, stride, padding, ceil_mode as max_pool2d's, count_include_pad
                          (true: padding counted in the average, as torch)
     adaptive_avg_pool2d  out (1): an integer or [height, width]
     global_avg_pool      [C, H, W] -> [C], as Keras' GlobalAveragePooling2D (no flatten needed)
     batch_norm           BatchNorm1d on [C] or [C, L], BatchNorm2d on [C, H, W]
     layer_norm           over the last axis
     dropout              p (0.5)
     flatten, identity, relu, gelu, silu, tanh, sigmoid, mish, hardswish, hardsigmoid
     leaky_relu           negative_slope (0.01)
     elu                  alpha (1.0)
     softplus             beta (1.0), threshold (20.0)
     prelu                num_parameters (1, or the channels: the sample's first axis), init (0.25)
     rnn, lstm, gru       hidden, num_layers (1), bidirectional (false), dropout (0), bias (true),
                          and for rnn nonlinearity ("tanh" or "relu"): over [T, features] per
                          sample (batch first), giving the output sequence [T, D * hidden]
     residual             layers (its body, a list as above), activation ("relu"; "gelu", "silu",
                          "tanh", "sigmoid", "mish", "hardswish", "hardsigmoid", "none" or
                          null): act(body(x) + shortcut(x)); the
                          shortcut is the identity when the body keeps the shape, else a
                          projection: a 1x1 convolution (the stride that matches, no bias) and
                          batch norm for [C, H, W] (torchvision's BasicBlock downsample), a
                          linear without bias and batch norm for [features]; children "body"
                          and "shortcut".
   Keras's names are aliases (any case): Dense (units, use_bias), Conv1D/Conv2D (filters,
   kernel_size, strides, dilation_rate), MaxPooling2D/AveragePooling2D (pool_size, strides),
   GlobalAveragePooling2D, BatchNormalization, LayerNormalization, Dropout (rate), Flatten, and
   "activation" on Dense and Conv, which adds that activation layer after it (softmax is refused:
   the losses take logits).
   Every field is checked: a wrong type, a missing required field or an unknown one (a typo) is
   an error naming the layer by index and type and the field:
   nb_nn_from_config: layer 3 (conv2d): field "kernel" must be a positive integer, got "x".
   A build without jansson (NABLA_WITH_JSON=OFF) leaves the config reader out: nb_nn_from_config
   says so. */
#include "nn_impl.h"
#include "../ops/pool_opts.h"
#ifdef NABLA_HAVE_JSON
#include <jansson.h>
#endif
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CFG "nb_nn_from_config"

#ifdef NABLA_HAVE_JSON
typedef nb_tensor *(*act_fn)(nb_tensor *);

/* Rewords the message of a call that failed as "prefix: message" when the failure is the first
   error since the caller cleared it (so the first message still wins otherwise). Called inside a
   quiet context around the call (nb__error_quiet), so a handler hears the whole message once. */
static void rewrap_error(bool had, const char *prefix) {
    if (had || !nb_error() || !strncmp(nb_error(), CFG ": ", strlen(CFG ": "))) return;
    nb__error_reword("%s: %s", prefix, nb_error());
}

/* ---------- config: messages and fields ---------- */
typedef struct {
    char where[400]; /* "layer 3 (conv2d)", or "layer 2 (residual), layer 0 (conv2d)" nested */
    const char *type;
} layer_ctx;

static void cfg_error(const layer_ctx *lc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cfg_error(const layer_ctx *lc, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (lc) nb__error(CFG ": %s: %s", lc->where, msg);
    else nb__error(CFG ": %s", msg);
}

/* A JSON value as compact text for messages, cut at about 60 characters. */
static const char *value_str(const json_t *v, char *buf, size_t size) {
    char *d = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (!d) {
        snprintf(buf, size, "%s", v ? "(a value)" : "nothing");
        return buf;
    }
    if (strlen(d) > 60) snprintf(buf, size, "%.57s...", d);
    else snprintf(buf, size, "%s", d);
    free(d);
    return buf;
}

static const char *shape_str(nb_shape s, char *buf, size_t size) { return nb_shape_str(s, buf, size); }

/* Reads an integer field in [lo, hi]; def when absent unless required. */
static int get_int(const layer_ctx *lc, json_t *obj, const char *field, long long lo, long long hi, bool required, long long def,
                   long long *out, const char *hint) {
    json_t *v = json_object_get(obj, field);
    char vs[96];
    if (!v) {
        if (required) {
            cfg_error(lc, "missing required field \"%s\"", field);
            return -1;
        }
        *out = def;
        return 0;
    }
    const char *what = lo == 1 ? "a positive integer" : lo == 0 ? "a non-negative integer" : "an integer";
    if (!json_is_integer(v)) {
        cfg_error(lc, "field \"%s\" must be %s%s, got %s", field, what, hint ? hint : "", value_str(v, vs, sizeof vs));
        return -1;
    }
    long long x = (long long)json_integer_value(v);
    if (x < lo) {
        cfg_error(lc, "field \"%s\" must be %s, got %lld", field, what, x);
        return -1;
    }
    if (x > hi) {
        cfg_error(lc, "field \"%s\" is too large: %lld (at most %lld)", field, x, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* Reads a number field (an integer or a real, finite); def when absent. */
static int get_number(const layer_ctx *lc, json_t *obj, const char *field, double def, double *out) {
    json_t *v = json_object_get(obj, field);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v))) {
        char vs[96];
        cfg_error(lc, "field \"%s\" must be a number, got %s", field, value_str(v, vs, sizeof vs));
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

static int get_bool(const layer_ctx *lc, json_t *obj, const char *field, bool def, bool *out) {
    json_t *v = json_object_get(obj, field);
    char vs[96];
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        cfg_error(lc, "field \"%s\" must be true or false, got %s", field, value_str(v, vs, sizeof vs));
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* Unknown fields are errors (a typo such as "kernal" must not be ignored). fields: the names a
   type takes, separated by spaces. */
static int check_fields(const layer_ctx *lc, json_t *obj, const char *fields) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!strcmp(key, "type")) continue;
        size_t n = strlen(key);
        bool known = false;
        for (const char *p = fields; *p && !known;) {
            const char *e = strchr(p, ' ');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            known = len == n && !strncmp(p, key, n);
            p += len + (e ? 1 : 0);
        }
        if (!known) {
            if (!*fields) cfg_error(lc, "unknown field \"%s\" (%s takes no fields besides \"type\")", key, lc->type);
            else {
                char list[200];
                snprintf(list, sizeof list, "%s", fields);
                for (char *c = list; *c; c++)
                    if (*c == ' ') *c = ',';
                cfg_error(lc, "unknown field \"%s\" (%s takes: %s)", key, lc->type, list);
            }
            return -1;
        }
    }
    return 0;
}

/* The number of elements of a sample shape, or -1 when it, or its size in bytes at 8 bytes an
   element, overflows int64. */
static int64_t shape_numel(nb_shape s) {
    int64_t n = 1, bytes;
    for (int i = 0; i < s.ndim; i++)
        if (nb__mul_overflows(n, s.dim[i], &n)) return -1;
    return nb__mul_overflows(n, 8, &bytes) ? -1 : n;
}

/* Checks a new sample shape: no overflow of the element count (a batch of any size is the
   caller's to check). */
static int check_out_shape(const layer_ctx *lc, nb_shape s) {
    if (shape_numel(s) < 0) {
        char sh[160];
        cfg_error(lc, "output %s per sample is too large", shape_str(s, sh, sizeof sh));
        return -1;
    }
    return 0;
}

/* Needs an image-like [C, H, W] sample. */
static int need_chw(const layer_ctx *lc, nb_shape s) {
    if (s.ndim == 3) return 0;
    char sh[160];
    if (s.ndim == 2)
        cfg_error(lc, "expects [channels, height, width] per sample, got %s: give the input a channel axis, as [1, %lld, %lld]",
                  shape_str(s, sh, sizeof sh), (long long)s.dim[0], (long long)s.dim[1]);
    else if (s.ndim == 1)
        cfg_error(lc, "expects [channels, height, width] per sample, got flat features %s (after a flatten or a linear)",
                  shape_str(s, sh, sizeof sh));
    else cfg_error(lc, "expects [channels, height, width] per sample, got %s", shape_str(s, sh, sizeof sh));
    return -1;
}

/* ---------- config: the layers ---------- */
static nb_module *build_layers(const char *prefix, json_t *layers, nb_shape *shape);

static nb_module *build_linear(const layer_ctx *lc, json_t *o, nb_shape *s) {
    long long out;
    bool bias;
    if (check_fields(lc, o, "out bias") < 0 || get_int(lc, o, "out", 1, INT_MAX, true, 0, &out, NULL) < 0 ||
        get_bool(lc, o, "bias", true, &bias) < 0)
        return NULL;
    char sh[160];
    if (s->ndim >= 3) {
        cfg_error(lc, "expects flat features, but its input is %s per sample (from a convolution or pooling): add "
                      "{\"type\": \"flatten\"} (or {\"type\": \"global_avg_pool\"}) before it",
                  shape_str(*s, sh, sizeof sh));
        return NULL;
    }
    if (s->ndim == 0) {
        cfg_error(lc, "expects [features] per sample, got a scalar");
        return NULL;
    }
    int64_t in = s->dim[s->ndim - 1];
    nb_shape r = *s;
    r.dim[r.ndim - 1] = out;
    if (check_out_shape(lc, r) < 0) return NULL;
    *s = r;
    return bias ? nb_nn_linear(in, out) : nb_nn_linear_no_bias(in, out);
}

/* Reads a field given as an integer in [lo, INT_MAX] or, where pairs is true, as a [height,
   width] pair of them, into out[0..1] (an integer serves both axes); def when absent. A pair
   where pairs is false is an error with hint after the expected kind. */
static int get_int_or_pair(const layer_ctx *lc, json_t *obj, const char *field, long long lo, bool required, long long def,
                           bool pairs, const char *hint, long long out[2]) {
    json_t *v = json_object_get(obj, field);
    if (!json_is_array(v) || !pairs) {
        if (get_int(lc, obj, field, lo, INT_MAX, required, def, &out[0], json_is_array(v) ? hint : NULL) < 0) return -1;
        out[1] = out[0];
        return 0;
    }
    bool ok = json_array_size(v) == 2;
    for (int a = 0; a < 2 && ok; a++) {
        json_t *e = json_array_get(v, (size_t)a);
        ok = json_is_integer(e) && json_integer_value(e) >= lo && json_integer_value(e) <= INT_MAX;
        if (ok) out[a] = (long long)json_integer_value(e);
    }
    if (!ok) {
        const char *what = lo == 1 ? "positive integer" : "non-negative integer";
        char vs[96];
        cfg_error(lc, "field \"%s\" must be a %s or [height, width] of %ss (at most %d), got %s", field, what, what, INT_MAX,
                  value_str(v, vs, sizeof vs));
        return -1;
    }
    return 0;
}

/* The spatial axes' names of a convolution over dims axes, for messages. */
static const char *conv_sample(int dims) {
    return dims == 1 ? "[channels, length]" : dims == 2 ? "[channels, height, width]" : "[channels, depth, height, width]";
}

/* conv1d ([C, L] per sample), conv2d ([C, H, W]; each of kernel, stride, padding and dilation
   an integer or a [height, width] pair) and conv3d ([C, D, H, W]), with padding an integer,
   "valid" or "same" and padding_mode torch's "zeros", "reflect", "replicate" or "circular". */
static nb_module *build_conv(const layer_ctx *lc, json_t *o, nb_shape *s, int dims) {
    static const char *const MODES[] = { "zeros", "reflect", "replicate", "circular" }; /* nb_pad_mode's order */
    const char *hint = dims == 1 ? " (conv1d has one axis)" : " (nb_nn_conv3d takes one value for all three axes)";
    long long out, groups, k[2], stride[2], dil[2], pad[2] = { 0, 0 };
    bool bias;
    if (check_fields(lc, o, "out kernel stride padding dilation groups bias padding_mode") < 0 ||
        get_int(lc, o, "out", 1, INT_MAX, true, 0, &out, NULL) < 0 ||
        get_int_or_pair(lc, o, "kernel", 1, true, 0, dims == 2, hint, k) < 0 ||
        get_int_or_pair(lc, o, "stride", 1, false, 1, dims == 2, hint, stride) < 0 ||
        get_int_or_pair(lc, o, "dilation", 1, false, 1, dims == 2, hint, dil) < 0 ||
        get_int(lc, o, "groups", 1, INT_MAX, false, 1, &groups, NULL) < 0 || get_bool(lc, o, "bias", true, &bias) < 0)
        return NULL;
    int64_t span[2] = { dil[0] * (k[0] - 1), dil[1] * (k[1] - 1) }; /* fit: all below 2^31 */
    json_t *pv = json_object_get(o, "padding");
    char vs[96], sh[160];
    const char *padding_kinds = dims == 2 ? "a non-negative integer, [height, width] of them, \"same\" or \"valid\""
                                          : "a non-negative integer, \"same\" or \"valid\"";
    if (json_is_string(pv)) {
        const char *p = json_string_value(pv);
        if (!strcmp(p, "same")) {
            if (stride[0] != 1 || stride[1] != 1) {
                cfg_error(lc, "field \"padding\" \"same\" needs stride 1 (as torch), got stride %lld%s: give the padding as an "
                              "integer", stride[0] != 1 ? stride[0] : stride[1], stride[0] != stride[1] ? " on one axis" : "");
                return NULL;
            }
            for (int a = 0; a < 2; a++) {
                if (span[a] % 2) {
                    cfg_error(lc, "field \"padding\" \"same\" needs an odd kernel (dilation x (kernel - 1) even), got kernel %lld "
                                  "with dilation %lld: give the padding as an integer", k[a], dil[a]);
                    return NULL;
                }
                if (span[a] / 2 > INT_MAX) {
                    cfg_error(lc, "field \"padding\" \"same\" gives a padding too large: %lld", (long long)(span[a] / 2));
                    return NULL;
                }
                pad[a] = span[a] / 2;
            }
        } else if (strcmp(p, "valid")) {
            cfg_error(lc, "field \"padding\" must be %s, got %s", padding_kinds, value_str(pv, vs, sizeof vs));
            return NULL;
        }
    } else if (pv && !json_is_integer(pv) && !(dims == 2 && json_is_array(pv))) {
        cfg_error(lc, "field \"padding\" must be %s, got %s", padding_kinds, value_str(pv, vs, sizeof vs));
        return NULL;
    } else if (get_int_or_pair(lc, o, "padding", 0, false, 0, dims == 2, hint, pad) < 0)
        return NULL;
    json_t *mv = json_object_get(o, "padding_mode");
    int mode = -1;
    for (int i = 0; json_is_string(mv) && i < 4 && mode < 0; i++)
        if (!strcmp(json_string_value(mv), MODES[i])) mode = i;
    if (!mv) mode = NB_PAD_CONSTANT;
    else if (mode < 0) {
        cfg_error(lc, "field \"padding_mode\" must be \"zeros\", \"reflect\", \"replicate\" or \"circular\", got %s",
                  value_str(mv, vs, sizeof vs));
        return NULL;
    }
    if (s->ndim != dims + 1) {
        if (dims == 2) need_chw(lc, *s);
        else cfg_error(lc, "expects %s per sample, got %s", conv_sample(dims), shape_str(*s, sh, sizeof sh));
        return NULL;
    }
    int64_t in = s->dim[0];
    if (in % groups || out % groups) {
        cfg_error(lc, "field \"groups\" (%lld) must divide the input channels (%lld) and \"out\" (%lld)", groups, (long long)in, out);
        return NULL;
    }
    nb_shape r = *s;
    r.dim[0] = out;
    for (int a = 1; a <= dims; a++) {
        int ax = dims == 2 ? a - 1 : 0; /* which of the pairs' values: conv1d and conv3d have one */
        int64_t size = s->dim[a];
        if ((mode == NB_PAD_REFLECT && pad[ax] >= size) || (mode == NB_PAD_CIRCULAR && pad[ax] > size)) {
            cfg_error(lc, "field \"padding_mode\" \"%s\" needs the padding %s the input size: padding %lld, input %s per sample",
                      MODES[mode], mode == NB_PAD_REFLECT ? "below" : "at most", pad[ax], shape_str(*s, sh, sizeof sh));
            return NULL;
        }
        int64_t padded = size + 2 * pad[ax]; /* dims come from checked shapes, pad below 2^31 */
        if (padded < span[ax] + 1) {
            cfg_error(lc, "kernel %lld%s is larger than the padded input: input %s per sample, padding %lld", k[ax],
                      dil[ax] > 1 ? " (dilated)" : "", shape_str(*s, sh, sizeof sh), pad[ax]);
            return NULL;
        }
        r.dim[a] = (padded - span[ax] - 1) / stride[ax] + 1;
    }
    if (check_out_shape(lc, r) < 0) return NULL;
    *s = r;
    nb_conv2d_opts co = { .stride = (int)stride[0], .padding = (int)pad[0], .dilation = (int)dil[0], .groups = (int)groups,
                          .no_bias = !bias, .padding_mode = (nb_pad_mode)mode };
    if (dims == 1) return nb_nn_conv1d(in, out, (int)k[0], co);
    if (dims == 3) return nb_nn_conv3d(in, out, (int)k[0], co);
    co.padding = 0; /* the pairs win; a zero entry of padding_hw falls back to this */
    for (int a = 0; a < 2; a++) {
        co.kernel_hw[a] = (int)k[a];
        co.stride_hw[a] = (int)stride[a];
        co.padding_hw[a] = (int)pad[a];
        co.dilation_hw[a] = (int)dil[a];
    }
    return nb_nn_conv2d(in, out, (int)k[0], co);
}

static nb_module *build_conv1d(const layer_ctx *lc, json_t *o, nb_shape *s) { return build_conv(lc, o, s, 1); }
static nb_module *build_conv2d(const layer_ctx *lc, json_t *o, nb_shape *s) { return build_conv(lc, o, s, 2); }
static nb_module *build_conv3d(const layer_ctx *lc, json_t *o, nb_shape *s) { return build_conv(lc, o, s, 3); }

static nb_module *build_pool(const layer_ctx *lc, json_t *o, nb_shape *s, bool max) {
    long long k, stride, pad, dil = 1;
    bool ceil_mode = false, include_pad = true;
    if (check_fields(lc, o, max ? "kernel stride padding dilation ceil_mode" : "kernel stride padding ceil_mode count_include_pad") < 0 ||
        get_int(lc, o, "kernel", 1, INT_MAX, true, 0, &k, json_is_array(json_object_get(o, "kernel"))
                    ? " (the pooling layers of a config have square windows)" : NULL) < 0 ||
        get_int(lc, o, "stride", 1, INT_MAX, false, k, &stride, NULL) < 0 ||
        get_int(lc, o, "padding", 0, INT_MAX, false, 0, &pad, NULL) < 0 ||
        (max && get_int(lc, o, "dilation", 1, INT_MAX, false, 1, &dil, NULL) < 0) ||
        get_bool(lc, o, "ceil_mode", false, &ceil_mode) < 0 ||
        (!max && get_bool(lc, o, "count_include_pad", true, &include_pad) < 0))
        return NULL;
    if (pad > k / 2) {
        cfg_error(lc, "field \"padding\" must be at most half the kernel (%lld), got %lld", k / 2, pad);
        return NULL;
    }
    if (need_chw(lc, *s) < 0) return NULL;
    nb_shape r = *s;
    for (int a = 1; a <= 2; a++) {
        r.dim[a] = nb__pool_out_size(s->dim[a], k, stride, pad, dil, ceil_mode);
        if (r.dim[a] < 1) {
            char sh[160];
            cfg_error(lc, "kernel %lld%s is larger than the padded input: input %s per sample, padding %lld", k,
                      dil > 1 ? " (dilated)" : "", shape_str(*s, sh, sizeof sh), pad);
            return NULL;
        }
    }
    *s = r;
    nb_pool_opts po = { .stride = (int)stride, .padding = (int)pad, .dilation = (int)dil, .ceil_mode = ceil_mode,
                        .exclude_padding = !include_pad };
    return max ? nb_nn_max_pool2d((int)k, po) : nb_nn_avg_pool2d((int)k, po);
}

static nb_module *build_adaptive(const layer_ctx *lc, json_t *o, nb_shape *s) {
    if (check_fields(lc, o, "out") < 0) return NULL;
    json_t *v = json_object_get(o, "out");
    long long oh = 1, ow = 1;
    if (json_is_array(v)) {
        json_t *h = json_array_get(v, 0), *w = json_array_get(v, 1);
        if (json_array_size(v) != 2 || !json_is_integer(h) || !json_is_integer(w) || json_integer_value(h) < 1 ||
            json_integer_value(w) < 1 || json_integer_value(h) > INT_MAX || json_integer_value(w) > INT_MAX) {
            char vs[96];
            cfg_error(lc, "field \"out\" must be a positive integer or [height, width] of positive integers, got %s",
                      value_str(v, vs, sizeof vs));
            return NULL;
        }
        oh = json_integer_value(h);
        ow = json_integer_value(w);
    } else if (v && !json_is_integer(v)) {
        char vs[96];
        cfg_error(lc, "field \"out\" must be a positive integer or [height, width] of positive integers, got %s",
                  value_str(v, vs, sizeof vs));
        return NULL;
    } else if (get_int(lc, o, "out", 1, INT_MAX, false, 1, &oh, NULL) < 0)
        return NULL;
    else ow = oh;
    if (need_chw(lc, *s) < 0) return NULL;
    nb_shape r = NB_SHAPE(s->dim[0], oh, ow);
    if (check_out_shape(lc, r) < 0) return NULL;
    *s = r;
    return nb_nn_adaptive_avg_pool2d((int)oh, (int)ow);
}

static nb_module *build_global_pool(const layer_ctx *lc, json_t *o, nb_shape *s) {
    if (check_fields(lc, o, "") < 0 || need_chw(lc, *s) < 0) return NULL;
    *s = NB_SHAPE(s->dim[0]);
    return nb__nn_global_avg_pool();
}

static nb_module *build_batch_norm(const layer_ctx *lc, json_t *o, nb_shape *s) {
    if (check_fields(lc, o, "") < 0) return NULL;
    if (s->ndim < 1 || s->ndim > 3) {
        char sh[160];
        cfg_error(lc, "expects [features], [channels, length] or [channels, height, width] per sample, got %s",
                  shape_str(*s, sh, sizeof sh));
        return NULL;
    }
    return s->ndim == 3 ? nb_nn_batch_norm2d(s->dim[0]) : nb_nn_batch_norm1d(s->dim[0]);
}

static nb_module *build_layer_norm(const layer_ctx *lc, json_t *o, nb_shape *s) {
    if (check_fields(lc, o, "") < 0) return NULL;
    if (s->ndim < 1) {
        cfg_error(lc, "expects at least one axis per sample, got a scalar");
        return NULL;
    }
    return nb_nn_layer_norm(s->dim[s->ndim - 1]);
}

static nb_module *build_recurrent(const layer_ctx *lc, json_t *o, nb_shape *s) {
    bool rnn = !strcmp(lc->type, "rnn"), bias;
    long long hidden, layers;
    nb_rnn_opts opts = { .batch_first = true };
    if (check_fields(lc, o, rnn ? "hidden num_layers bidirectional dropout bias nonlinearity"
                                : "hidden num_layers bidirectional dropout bias") < 0 ||
        get_int(lc, o, "hidden", 1, INT_MAX, true, 0, &hidden, NULL) < 0 ||
        get_int(lc, o, "num_layers", 1, INT_MAX, false, 1, &layers, NULL) < 0 ||
        get_bool(lc, o, "bidirectional", false, &opts.bidirectional) < 0 || get_bool(lc, o, "bias", true, &bias) < 0 ||
        get_number(lc, o, "dropout", 0, &opts.dropout) < 0)
        return NULL;
    json_t *nl = json_object_get(o, "nonlinearity");
    if (nl && !(json_is_string(nl) && (!strcmp(json_string_value(nl), "tanh") || !strcmp(json_string_value(nl), "relu")))) {
        char vs[96];
        cfg_error(lc, "field \"nonlinearity\" must be \"tanh\" or \"relu\", got %s", value_str(nl, vs, sizeof vs));
        return NULL;
    }
    if (s->ndim != 2) {
        char sh[160];
        cfg_error(lc, "expects [time, features] per sample, got %s", shape_str(*s, sh, sizeof sh));
        return NULL;
    }
    opts.num_layers = (int)layers;
    opts.no_bias = !bias;
    opts.nonlinearity = nl && !strcmp(json_string_value(nl), "relu") ? NB_RNN_RELU : NB_RNN_TANH;
    nb_shape r = NB_SHAPE(s->dim[0], (opts.bidirectional ? 2 : 1) * (int64_t)hidden);
    if (check_out_shape(lc, r) < 0) return NULL;
    int64_t in = s->dim[1];
    *s = r;
    return rnn ? nb_nn_rnn(in, hidden, opts) : !strcmp(lc->type, "lstm") ? nb_nn_lstm(in, hidden, opts) : nb_nn_gru(in, hidden, opts);
}

static nb_module *build_dropout(const layer_ctx *lc, json_t *o, nb_shape *s) {
    (void)s;
    if (check_fields(lc, o, "p") < 0) return NULL;
    json_t *v = json_object_get(o, "p");
    double p = 0.5;
    if (v) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) < 1)) {
            char vs[96];
            cfg_error(lc, "field \"p\" must be a number in [0, 1), got %s", value_str(v, vs, sizeof vs));
            return NULL;
        }
        p = json_number_value(v);
    }
    return nb_nn_dropout(p);
}

static nb_module *build_flatten(const layer_ctx *lc, json_t *o, nb_shape *s) {
    if (check_fields(lc, o, "") < 0) return NULL;
    *s = NB_SHAPE(shape_numel(*s)); /* checked when the shape was made */
    return nb_nn_flatten();
}

static const struct {
    const char *name;
    nb_module *(*make)(void);
    act_fn fn;
} ACTIVATIONS[] = {
    { "relu", nb_nn_relu, nb_relu },          { "gelu", nb_nn_gelu, nb_gelu },
    { "silu", nb_nn_silu, nb_silu },          { "tanh", nb_nn_tanh, nb_tanh },
    { "sigmoid", nb_nn_sigmoid, nb_sigmoid }, { "mish", nb_nn_mish, nb_mish },
    { "hardswish", nb_nn_hardswish, nb_hardswish }, { "hardsigmoid", nb_nn_hardsigmoid, nb_hardsigmoid },
};
#define N_ACTIVATIONS ((int)(sizeof ACTIVATIONS / sizeof ACTIVATIONS[0]))

/* The stride of a 1x1 convolution taking [h, w] to [oh, ow], or 0 when none does. */
static int64_t projection_stride(int64_t h, int64_t w, int64_t oh, int64_t ow) {
    int64_t lo = 1, hi = INT_MAX;
    int64_t in[2] = { h, w }, out[2] = { oh, ow };
    for (int a = 0; a < 2; a++) { /* (in - 1) / s + 1 == out */
        if (out[a] < 1 || out[a] > in[a]) return 0;
        int64_t l, u;
        if (out[a] == 1) {
            l = in[a];
            u = INT_MAX;
        } else {
            l = (in[a] - 1) / out[a] + 1;
            u = (in[a] - 1) / (out[a] - 1);
        }
        if (l > lo) lo = l;
        if (u < hi) hi = u;
    }
    return lo <= hi ? lo : 0;
}

static nb_module *build_residual(const layer_ctx *lc, json_t *o, nb_shape *s) {
    if (check_fields(lc, o, "layers activation") < 0) return NULL;
    json_t *layers = json_object_get(o, "layers"), *av = json_object_get(o, "activation");
    char vs[96], a[160], b[160];
    if (!layers) {
        cfg_error(lc, "missing required field \"layers\"");
        return NULL;
    }
    if (!json_is_array(layers) || json_array_size(layers) == 0) {
        cfg_error(lc, "field \"layers\" must be a non-empty list of layers, got %s", value_str(layers, vs, sizeof vs));
        return NULL;
    }
    act_fn act = nb_relu;
    if (av && json_is_null(av)) act = NULL;
    else if (av) {
        const char *name = json_is_string(av) ? json_string_value(av) : NULL;
        act = NULL;
        bool found = name && !strcmp(name, "none");
        for (int i = 0; name && i < N_ACTIVATIONS && !found; i++)
            if (!strcmp(name, ACTIVATIONS[i].name)) {
                act = ACTIVATIONS[i].fn;
                found = true;
            }
        if (!found) {
            char names[200] = "";
            for (int i = 0; i < N_ACTIVATIONS; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "\"%s\", ", ACTIVATIONS[i].name);
            cfg_error(lc, "field \"activation\" must be %sor \"none\", got %s", names, value_str(av, vs, sizeof vs));
            return NULL;
        }
    }
    char prefix[420];
    snprintf(prefix, sizeof prefix, "%s, ", lc->where);
    nb_shape in = *s, out = *s;
    nb_module *body = build_layers(prefix, layers, &out);
    if (!body) return NULL;
    nb_module *shortcut = NULL;
    if (!nb__shape_eq(&in, &out)) {
        if (in.ndim == 3 && out.ndim == 3) {
            int64_t st = projection_stride(in.dim[1], in.dim[2], out.dim[1], out.dim[2]);
            if (!st) {
                cfg_error(lc, "the body changes %s to %s per sample, which no 1x1 strided convolution shortcut matches",
                          shape_str(in, a, sizeof a), shape_str(out, b, sizeof b));
                nb_module_free(body);
                return NULL;
            }
            shortcut = nb_nn_sequential(nb_nn_conv2d(in.dim[0], out.dim[0], 1, (nb_conv2d_opts){ .stride = (int)st, .no_bias = true }),
                                        nb_nn_batch_norm2d(out.dim[0]), NULL);
        } else if (in.ndim == 1 && out.ndim == 1) {
            shortcut = nb_nn_sequential(nb_nn_linear_no_bias(in.dim[0], out.dim[0]), nb_nn_batch_norm1d(out.dim[0]), NULL);
        } else {
            cfg_error(lc, "the body changes %s to %s per sample; a projection shortcut needs [C, H, W] (1x1 convolution) or "
                          "[features] (linear) both in and out",
                      shape_str(in, a, sizeof a), shape_str(out, b, sizeof b));
            nb_module_free(body);
            return NULL;
        }
        if (!shortcut) { /* build_layers names the layer in the message */
            nb_module_free(body);
            return NULL;
        }
    }
    *s = out;
    return nb__nn_residual_make(CFG, body, shortcut, act);
}

static nb_module *build_activation(const layer_ctx *lc, json_t *o, nb_shape *s) {
    (void)s;
    if (check_fields(lc, o, "") < 0) return NULL;
    for (int i = 0; i < N_ACTIVATIONS; i++)
        if (!strcmp(lc->type, ACTIVATIONS[i].name)) return ACTIVATIONS[i].make();
    return NULL;
}

static nb_module *build_identity(const layer_ctx *lc, json_t *o, nb_shape *s) {
    (void)s;
    return check_fields(lc, o, "") < 0 ? NULL : nb_nn_identity();
}

/* The activations with arguments: leaky_relu, elu and softplus (zero is each one's default too). */
static nb_module *build_scalar_activation(const layer_ctx *lc, json_t *o, nb_shape *s) {
    (void)s;
    double a, b;
    if (!strcmp(lc->type, "leaky_relu"))
        return check_fields(lc, o, "negative_slope") < 0 || get_number(lc, o, "negative_slope", 0.01, &a) < 0 ? NULL
                                                                                                          : nb_nn_leaky_relu(a);
    if (!strcmp(lc->type, "elu"))
        return check_fields(lc, o, "alpha") < 0 || get_number(lc, o, "alpha", 1.0, &a) < 0 ? NULL : nb_nn_elu(a);
    if (check_fields(lc, o, "beta threshold") < 0 || get_number(lc, o, "beta", 1.0, &a) < 0 ||
        get_number(lc, o, "threshold", 20.0, &b) < 0)
        return NULL;
    return nb_nn_softplus(a, b);
}

static nb_module *build_prelu(const layer_ctx *lc, json_t *o, nb_shape *s) {
    long long n;
    double init;
    if (check_fields(lc, o, "num_parameters init") < 0 || get_int(lc, o, "num_parameters", 1, INT_MAX, false, 1, &n, NULL) < 0 ||
        get_number(lc, o, "init", 0.25, &init) < 0)
        return NULL;
    if (n != 1 && (s->ndim < 1 || s->dim[0] != n)) {
        char sh[160];
        cfg_error(lc, "field \"num_parameters\" must be 1 or the channels (the first axis of the sample), got %lld for %s", n,
                  shape_str(*s, sh, sizeof sh));
        return NULL;
    }
    return nb_nn_prelu(n, init);
}

static nb_module *build_max_pool(const layer_ctx *lc, json_t *o, nb_shape *s) { return build_pool(lc, o, s, true); }
static nb_module *build_avg_pool(const layer_ctx *lc, json_t *o, nb_shape *s) { return build_pool(lc, o, s, false); }

static const struct {
    const char *type;
    nb_module *(*build)(const layer_ctx *lc, json_t *o, nb_shape *s);
} TYPES[] = {
    { "linear", build_linear },
    { "conv1d", build_conv1d },
    { "conv2d", build_conv2d },
    { "conv3d", build_conv3d },
    { "max_pool2d", build_max_pool },
    { "avg_pool2d", build_avg_pool },
    { "adaptive_avg_pool2d", build_adaptive },
    { "global_avg_pool", build_global_pool },
    { "batch_norm", build_batch_norm },
    { "layer_norm", build_layer_norm },
    { "dropout", build_dropout },
    { "flatten", build_flatten },
    { "relu", build_activation },
    { "gelu", build_activation },
    { "silu", build_activation },
    { "tanh", build_activation },
    { "sigmoid", build_activation },
    { "mish", build_activation },
    { "hardswish", build_activation },
    { "hardsigmoid", build_activation },
    { "leaky_relu", build_scalar_activation },
    { "elu", build_scalar_activation },
    { "softplus", build_scalar_activation },
    { "prelu", build_prelu },
    { "identity", build_identity },
    { "rnn", build_recurrent },
    { "lstm", build_recurrent },
    { "gru", build_recurrent },
    { "residual", build_residual },
};
#define N_TYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

/* Keras's layer names, accepted as aliases: the type (any case, as Keras's class_name "Dense"
   or its snake_case "dense") and its fields renamed to ours; "activation" becomes the activation
   layer after it. Other Keras fields stay and are refused by name as unknown ones. */
static const struct {
    const char *keras, *type, *renames; /* renames: "keras:ours" pairs separated by spaces */
} KERAS[] = {
    { "dense", "linear", "units:out use_bias:bias activation:" },
    { "conv1d", "conv1d", "filters:out kernel_size:kernel strides:stride dilation_rate:dilation use_bias:bias activation:" },
    { "conv2d", "conv2d", "filters:out kernel_size:kernel strides:stride dilation_rate:dilation use_bias:bias activation:" },
    { "maxpooling2d", "max_pool2d", "pool_size:kernel strides:stride" },
    { "max_pooling2d", "max_pool2d", "pool_size:kernel strides:stride" },
    { "averagepooling2d", "avg_pool2d", "pool_size:kernel strides:stride" },
    { "average_pooling2d", "avg_pool2d", "pool_size:kernel strides:stride" },
    { "globalaveragepooling2d", "global_avg_pool", "" },
    { "global_average_pooling2d", "global_avg_pool", "" },
    { "batchnormalization", "batch_norm", "" },
    { "batch_normalization", "batch_norm", "" },
    { "layernormalization", "layer_norm", "" },
    { "layer_normalization", "layer_norm", "" },
    { "dropout", "dropout", "rate:p" },
    { "flatten", "flatten", "" },
};

/* When o is a Keras-named layer: *out is a copy in our names (the caller releases it), lc->type
   our type and *act the activation to add after it (NULL: none). 0, or -1 with an error. */
static int keras_alias(layer_ctx *lc, json_t *o, json_t **out, const char **act) {
    *out = NULL;
    *act = NULL;
    int k = 0, n = (int)(sizeof KERAS / sizeof KERAS[0]);
    while (k < n && strcasecmp(KERAS[k].keras, lc->type)) k++;
    if (k == n) return 0;
    char *paren = strrchr(lc->where, '(');
    if (paren && strcmp(KERAS[k].type, lc->type)) {
        char user[48];
        snprintf(user, sizeof user, "%.40s", lc->type);
        snprintf(paren, sizeof lc->where - (size_t)(paren - lc->where), "(%s, as %s)", user, KERAS[k].type);
    }
    json_t *c = json_deep_copy(o);
    if (!c) { cfg_error(lc, "out of memory"); return -1; }
    for (const char *p = KERAS[k].renames; *p;) {
        const char *colon = strchr(p, ':'), *end = strchr(p, ' ');
        if (!end) end = p + strlen(p);
        char from[40], to[40];
        snprintf(from, sizeof from, "%.*s", (int)(colon - p), p);
        snprintf(to, sizeof to, "%.*s", (int)(end - colon - 1), colon + 1);
        json_t *v = json_object_get(c, from);
        if (v && !strcmp(from, "activation")) {
            const char *a = json_is_null(v) ? "linear" : json_string_value(v);
            if (!a) { cfg_error(lc, "field \"activation\" must be a string"); json_decref(c); return -1; }
            if (!strcmp(a, "swish")) a = "silu";
            bool known = !strcmp(a, "linear");
            for (int i = 0; i < N_ACTIVATIONS && !known; i++) known = !strcmp(a, ACTIVATIONS[i].name);
            if (!strcmp(a, "softmax"))
                cfg_error(lc, "activation \"softmax\": the loss takes the raw outputs (logits) and applies softmax "
                              "itself; leave the activation out");
            else if (!known) cfg_error(lc, "activation \"%.40s\" is not one nabla knows", a);
            if (!known) { json_decref(c); return -1; }
            for (int i = 0; i < N_ACTIVATIONS; i++)
                if (!strcmp(a, ACTIVATIONS[i].name)) *act = ACTIVATIONS[i].name;
            json_object_del(c, from);
        } else if (v && !json_object_get(c, to)) {
            json_object_set(c, to, v);
            json_object_del(c, from);
        }
        p = *end ? end + 1 : end;
    }
    lc->type = KERAS[k].type;
    *out = c;
    return 0;
}

/* A sequential of the layers, with *shape propagated through them; NULL with an error. */
static nb_module *build_layers(const char *prefix, json_t *layers, nb_shape *shape) {
    nb_module *seq = nb_nn_sequential(NULL);
    if (!seq) return NULL;
    size_t i;
    json_t *o;
    json_array_foreach(layers, i, o) {
        layer_ctx lc = { .type = "?" };
        char vs[96];
        snprintf(lc.where, sizeof lc.where, "%slayer %zu", prefix, i);
        if (!json_is_object(o)) {
            cfg_error(&lc, "expected an object such as {\"type\": \"relu\"}, got %s", value_str(o, vs, sizeof vs));
            goto fail;
        }
        json_t *tv = json_object_get(o, "type");
        if (!tv) {
            cfg_error(&lc, "missing required field \"type\"");
            goto fail;
        }
        if (!json_is_string(tv)) {
            cfg_error(&lc, "field \"type\" must be a string, got %s", value_str(tv, vs, sizeof vs));
            goto fail;
        }
        lc.type = json_string_value(tv);
        snprintf(lc.where, sizeof lc.where, "%slayer %zu (%.60s)", prefix, i, lc.type);
        json_t *alias;
        const char *act;
        if (keras_alias(&lc, o, &alias, &act) < 0) goto fail;
        if (alias) o = alias;
        int t = 0;
        while (t < N_TYPES && strcmp(TYPES[t].type, lc.type)) t++;
        if (t == N_TYPES) {
            char known[400] = "";
            for (int k = 0; k < N_TYPES; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", TYPES[k].type);
            cfg_error(&lc, "unknown type \"%.60s\" (known: %s)", lc.type, known);
            goto fail;
        }
        bool had = nb__has_error();
        nb__error_ctx ec;
        nb__error_quiet(&ec);
        nb_module *m = TYPES[t].build(&lc, o, shape);
        json_decref(alias);
        if (!m) {
            char prefix[440];
            snprintf(prefix, sizeof prefix, CFG ": %s", lc.where);
            rewrap_error(had, prefix);
        }
        nb__error_pop(&ec);
        if (!m) goto fail;
        if (!nb_nn_sequential_add(seq, m)) goto fail;
        for (int a = 0; act && a < N_ACTIVATIONS; a++)
            if (!strcmp(act, ACTIVATIONS[a].name) && !nb_nn_sequential_add(seq, ACTIVATIONS[a].make())) goto fail;
    }
    return seq;
fail:
    nb_module_free(seq);
    return NULL;
}

/* The sample shape of an "input" field. */
static int parse_input(json_t *v, nb_shape *out) {
    char vs[96];
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    bool ok = n >= 1 && n < NB_MAX_DIMS;
    nb_shape s = { 0 };
    for (size_t i = 0; ok && i < n; i++) {
        json_t *d = json_array_get(v, i);
        ok = json_is_integer(d) && json_integer_value(d) >= 1;
        if (ok) s.dim[s.ndim++] = (int64_t)json_integer_value(d);
    }
    if (!ok) {
        nb__error(CFG ": field \"input\" must be one sample's shape without the batch axis, 1 to %d positive integers such as "
                  "[1, 28, 28], got %s", NB_MAX_DIMS - 1, value_str(v, vs, sizeof vs));
        return -1;
    }
    if (shape_numel(s) < 0) {
        nb__error(CFG ": field \"input\" %s is too large", value_str(v, vs, sizeof vs));
        return -1;
    }
    *out = s;
    return 0;
}

nb_module *nb_nn_from_config(const char *json, nb_shape sample_shape) {
    if (!json) {
        nb__error(CFG ": config text is NULL");
        return NULL;
    }
    char a[160], b[160];
    bool given = sample_shape.ndim != 0;
    if (sample_shape.ndim < 0 || sample_shape.ndim >= NB_MAX_DIMS) {
        nb__error(CFG ": sample shape has %d axes; give 1 to %d (one sample, without the batch axis) or 0 to take \"input\"",
                  sample_shape.ndim, NB_MAX_DIMS - 1);
        return NULL;
    }
    for (int i = 0; i < sample_shape.ndim; i++)
        if (sample_shape.dim[i] < 1) {
            nb__error(CFG ": sample shape %s must have positive sizes", shape_str(sample_shape, a, sizeof a));
            return NULL;
        }
    if (given && shape_numel(sample_shape) < 0) {
        nb__error(CFG ": sample shape %s is too large", shape_str(sample_shape, a, sizeof a));
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root) {
        nb__error(CFG ": invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    nb_module *result = NULL;
    json_t *layers = NULL, *input = NULL;
    if (json_is_array(root)) layers = root;
    else if (json_is_object(root)) {
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            if (strcmp(key, "input") && strcmp(key, "layers") && strcmp(key, "name")) {
                nb__error(CFG ": unknown top-level field \"%.60s\" (a config takes \"input\", \"layers\" and \"name\")", key);
                goto done;
            }
        }
        layers = json_object_get(root, "layers");
        input = json_object_get(root, "input");
        if (!layers) {
            nb__error(CFG ": missing required field \"layers\" (the list of layers)");
            goto done;
        }
    } else {
        char vs[96];
        nb__error(CFG ": expected an object {\"input\": [...], \"layers\": [...]} or a list of layers, got %s",
                  value_str(root, vs, sizeof vs));
        goto done;
    }
    if (!json_is_array(layers)) {
        char vs[96];
        nb__error(CFG ": field \"layers\" must be a list of layers, got %s", value_str(layers, vs, sizeof vs));
        goto done;
    }
    if (json_array_size(layers) == 0) {
        nb__error(CFG ": the list of layers is empty: give at least one layer");
        goto done;
    }
    nb_shape shape = sample_shape;
    if (input) {
        nb_shape cs;
        if (parse_input(input, &cs) < 0) goto done;
        if (given && !nb__shape_eq(&cs, &sample_shape)) {
            nb__error(CFG ": the sample shape %s differs from the config's \"input\" %s", shape_str(sample_shape, a, sizeof a),
                      shape_str(cs, b, sizeof b));
            goto done;
        }
        shape = cs;
    } else if (!given) {
        nb__error(CFG ": no input shape: give \"input\" in the config (one sample's shape, such as [1, 28, 28]) or a sample shape");
        goto done;
    }
    result = build_layers("", layers, &shape);
done:
    json_decref(root);
    return result;
}
#else
nb_module *nb_nn_from_config(const char *json, nb_shape sample_shape) {
    (void)json; (void)sample_shape;
    NB__NO_JSON(CFG, "model configs");
    return NULL;
}
#endif

