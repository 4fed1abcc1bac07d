/* Per-sample transforms: to float and scale, per-channel normalisation, random crop with
   padding, random horizontal flip, bilinear resize, gray/RGB conversion, a user's function, and
   composition. Random ones draw from
   the sample's key only, so results never depend on which thread runs them. */
#include "data_impl.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { TF_FLOAT, TF_NORMALIZE, TF_CROP, TF_FLIP, TF_RESIZE, TF_CHANNELS, TF_FN, TF_COMPOSE };

struct nb_transform {
    int kind;
    double scale, p;
    int64_t height, width, padding;
    float *mean, *std;
    int nmean;
    nb_tensor *(*fn)(nb_tensor *x, uint64_t key, void *ctx);
    void *ctx;
    nb_transform **items; /* a compose holds leaves only, flattened */
    int n;
};

static nb_transform *tf_new(int kind, const char *who) {
    nb_transform *t = calloc(1, sizeof *t);
    if (!t) nb__error("%s: out of memory", who);
    else t->kind = kind;
    return t;
}

void nb_transform_free(nb_transform *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) nb_transform_free(t->items[i]);
    free(t->items);
    free(t->mean);
    free(t->std);
    free(t);
}

nb_transform *nb_transform_to_float(double scale) {
    nb_transform *t = tf_new(TF_FLOAT, "nb_transform_to_float");
    if (t) t->scale = scale == 0 ? 1.0 : scale;
    return t;
}

nb_transform *nb_transform_normalize(const float *mean, const float *std, int n) {
    if (!mean || !std || n <= 0) { nb__error("nb_transform_normalize: needs n >= 1 means and stds"); return NULL; }
    for (int i = 0; i < n; i++)
        if (!(std[i] != 0)) { nb__error("nb_transform_normalize: std[%d] is %g", i, (double)std[i]); return NULL; }
    nb_transform *t = tf_new(TF_NORMALIZE, "nb_transform_normalize");
    if (!t) return NULL;
    t->mean = malloc(sizeof(float) * (size_t)n);
    t->std = malloc(sizeof(float) * (size_t)n);
    if (!t->mean || !t->std) { nb_transform_free(t); nb__error("nb_transform_normalize: out of memory"); return NULL; }
    memcpy(t->mean, mean, sizeof(float) * (size_t)n);
    memcpy(t->std, std, sizeof(float) * (size_t)n);
    t->nmean = n;
    return t;
}

nb_transform *nb_transform_random_crop(int64_t height, int64_t width, int64_t padding) {
    if (height <= 0 || width <= 0 || padding < 0) {
        nb__error("nb_transform_random_crop: size %lldx%lld and padding %lld must be positive", (long long)height,
                  (long long)width, (long long)padding);
        return NULL;
    }
    nb_transform *t = tf_new(TF_CROP, "nb_transform_random_crop");
    if (t) { t->height = height; t->width = width; t->padding = padding; }
    return t;
}

nb_transform *nb_transform_random_hflip(double p) {
    if (p < 0 || p > 1) { nb__error("nb_transform_random_hflip: p %g is not in [0, 1]", p); return NULL; }
    nb_transform *t = tf_new(TF_FLIP, "nb_transform_random_hflip");
    if (t) t->p = p == 0 ? 0.5 : p;
    return t;
}

nb_transform *nb_transform_resize(int64_t height, int64_t width) {
    if (height <= 0 || width <= 0 || height > (1 << 20) || width > (1 << 20)) {
        nb__error("nb_transform_resize: size %lldx%lld must be from 1 to 2^20 on each side", (long long)height, (long long)width);
        return NULL;
    }
    nb_transform *t = tf_new(TF_RESIZE, "nb_transform_resize");
    if (t) { t->height = height; t->width = width; }
    return t;
}

nb_transform *nb_transform_channels(int channels) {
    if (channels != 1 && channels != 3) {
        nb__error("nb_transform_channels: channels is 1 (gray) or 3 (RGB), got %d", channels);
        return NULL;
    }
    nb_transform *t = tf_new(TF_CHANNELS, "nb_transform_channels");
    if (t) t->height = channels;
    return t;
}

nb_transform *nb_transform_fn(nb_tensor *(*fn)(nb_tensor *, uint64_t, void *), void *ctx) {
    if (!fn) { nb__error("nb_transform_fn: fn is NULL"); return NULL; }
    nb_transform *t = tf_new(TF_FN, "nb_transform_fn");
    if (t) { t->fn = fn; t->ctx = ctx; }
    return t;
}

static int compose_add(nb_transform *c, nb_transform *t) {
    if (t->kind == TF_COMPOSE) {
        for (int i = 0; i < t->n; i++) {
            if (compose_add(c, t->items[i]) < 0) return -1;
            t->items[i] = NULL;
        }
        t->n = 0;
        nb_transform_free(t);
        return 0;
    }
    nb_transform **grown = realloc(c->items, sizeof *grown * (size_t)(c->n + 1));
    if (!grown) { nb_transform_free(t); return -1; }
    c->items = grown;
    c->items[c->n++] = t;
    return 0;
}

nb_transform *nb_transform_compose(nb_transform *first, ...) {
    va_list ap;
    va_start(ap, first);
    nb_transform *c = tf_new(TF_COMPOSE, "nb_transform_compose");
    bool bad = !c || !first;
    int i = 0;
    for (nb_transform *t = first; t; t = va_arg(ap, nb_transform *), i++) {
        if (!bad && compose_add(c, t) < 0) { bad = true; nb__error("nb_transform_compose: out of memory"); continue; }
        if (bad) nb_transform_free(t);
    }
    va_end(ap);
    if (bad) {
        if (c && !first) nb__error("nb_transform_compose: the first transform is NULL (did making it fail?)");
        nb_transform_free(c);
        return NULL;
    }
    return c;
}

/* ---- the leaves; each returns a new tensor owned by the current scope ---- */
static nb_tensor *run_float(nb_transform *t, nb_tensor *x) {
    nb_tensor *out = nb_empty(x->shape, NB_F32);
    if (!out) return NULL;
    float *o = nb__data(out);
    float s = (float)t->scale;
    int64_t n = x->numel;
    if (x->dtype == NB_U8) {
        const uint8_t *p = nb__data(x);
        for (int64_t i = 0; i < n; i++) o[i] = (float)p[i] * s;
    } else if (x->dtype == NB_F32) {
        const float *p = nb__data(x);
        for (int64_t i = 0; i < n; i++) o[i] = p[i] * s;
    } else {
        const void *p = nb__data(x);
        for (int64_t i = 0; i < n; i++) o[i] = (float)(nb__load(p, x->dtype, i) * t->scale);
    }
    return out;
}

static nb_tensor *run_normalize(nb_transform *t, nb_tensor *x) {
    char d[200];
    if (x->dtype != NB_F32 || x->shape.ndim < 1) {
        nb__error("nb_transform_normalize: expects an f32 [C, ...] sample, got %s (put nb_transform_to_float first)",
                  nb__describe(x, d, sizeof d));
        return NULL;
    }
    int64_t c = x->shape.dim[0];
    if (t->nmean != 1 && t->nmean != c) {
        nb__error("nb_transform_normalize: %d means for a sample %s with %lld channels", t->nmean,
                  nb__describe(x, d, sizeof d), (long long)c);
        return NULL;
    }
    nb_tensor *out = nb_empty(x->shape, NB_F32);
    if (!out) return NULL;
    int64_t per = c ? x->numel / c : 0;
    const float *p = nb__data(x);
    float *o = nb__data(out);
    for (int64_t ch = 0; ch < c; ch++) {
        int k = t->nmean == 1 ? 0 : (int)ch;
        float m = t->mean[k], inv = 1.0f / t->std[k];
        for (int64_t i = 0; i < per; i++) o[ch * per + i] = (p[ch * per + i] - m) * inv;
    }
    return out;
}

static nb_tensor *run_crop(nb_transform *t, nb_tensor *x, uint64_t key) {
    char d[200];
    if (x->shape.ndim != 2 && x->shape.ndim != 3) {
        nb__error("nb_transform_random_crop: expects a [C, H, W] or [H, W] sample, got %s", nb__describe(x, d, sizeof d));
        return NULL;
    }
    int nd = x->shape.ndim;
    int64_t c = nd == 3 ? x->shape.dim[0] : 1, h = x->shape.dim[nd - 2], w = x->shape.dim[nd - 1], p = t->padding;
    if (t->height > h + 2 * p || t->width > w + 2 * p) {
        nb__error("nb_transform_random_crop: a %lldx%lld crop does not fit a sample %s padded by %lld", (long long)t->height,
                  (long long)t->width, nb__describe(x, d, sizeof d), (long long)p);
        return NULL;
    }
    int64_t top = (int64_t)(nb_data_uniform(key, 0) * (double)(h + 2 * p - t->height + 1));
    int64_t left = (int64_t)(nb_data_uniform(key, 1) * (double)(w + 2 * p - t->width + 1));
    nb_shape sh = x->shape;
    sh.dim[nd - 2] = t->height;
    sh.dim[nd - 1] = t->width;
    nb_tensor *out = nb_zeros(sh, x->dtype);
    if (!out) return NULL;
    size_t es = nb__esize(x->dtype);
    const char *src = nb__data(x);
    char *dst = nb__data(out);
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < t->height; i++) {
            int64_t sy = top + i - p;
            if (sy < 0 || sy >= h) continue;
            int64_t x0 = left - p, lo = x0 < 0 ? -x0 : 0, hi = t->width;
            if (x0 + hi > w) hi = w - x0;
            if (hi <= lo) continue;
            memcpy(dst + ((size_t)(ch * t->height + i) * (size_t)t->width + (size_t)lo) * es,
                   src + ((size_t)(ch * h + sy) * (size_t)w + (size_t)(x0 + lo)) * es, (size_t)(hi - lo) * es);
        }
    return out;
}

static nb_tensor *run_flip(nb_transform *t, nb_tensor *x, uint64_t key) {
    if (x->shape.ndim < 1) { nb__error("nb_transform_random_hflip: a 0-d sample has no axis to mirror"); return NULL; }
    if (nb_data_uniform(key, 0) >= t->p) return nb__own(nb_retain(x));
    nb_tensor *out = nb_empty(x->shape, x->dtype);
    if (!out) return NULL;
    int64_t w = x->shape.dim[x->shape.ndim - 1], rows = w ? x->numel / w : 0;
    size_t es = nb__esize(x->dtype);
    const char *src = nb__data(x);
    char *dst = nb__data(out);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < w; j++) memcpy(dst + (size_t)(r * w + j) * es, src + (size_t)(r * w + w - 1 - j) * es, es);
    return out;
}

/* Bilinear resampling with half-pixel centres, as torch's interpolate(mode="bilinear",
   align_corners=False) without antialiasing: source coordinate (i + 0.5) * in / out - 0.5,
   clamped at 0, blended between its two neighbours. */
static nb_tensor *run_resize(nb_transform *t, nb_tensor *x) {
    char d[200];
    if ((x->shape.ndim != 2 && x->shape.ndim != 3) || x->dtype != NB_F32) {
        nb__error("nb_transform_resize: expects an f32 [C, H, W] or [H, W] sample, got %s (put nb_transform_to_float "
                  "first)", nb__describe(x, d, sizeof d));
        return NULL;
    }
    int nd = x->shape.ndim;
    int64_t c = nd == 3 ? x->shape.dim[0] : 1, h = x->shape.dim[nd - 2], w = x->shape.dim[nd - 1];
    int64_t oh = t->height, ow = t->width;
    if (h == 0 || w == 0) {
        nb__error("nb_transform_resize: the sample %s has no pixels to resample", nb__describe(x, d, sizeof d));
        return NULL;
    }
    if (oh == h && ow == w) return nb__own(nb_retain(x)); /* every source coordinate is a pixel */
    nb_shape sh = x->shape;
    sh.dim[nd - 2] = oh;
    sh.dim[nd - 1] = ow;
    nb_tensor *out = nb_empty(sh, NB_F32);
    if (!out) return NULL;
    const float *src = nb__data(x);
    float *dst = nb__data(out);
    float sy_scale = (float)h / (float)oh, sx_scale = (float)w / (float)ow;
    for (int64_t i = 0; i < oh; i++) {
        float sy = ((float)i + 0.5f) * sy_scale - 0.5f;
        if (sy < 0) sy = 0;
        int64_t y0 = (int64_t)sy, y1 = y0 + 1 < h ? y0 + 1 : h - 1;
        float ly = sy - (float)y0;
        for (int64_t j = 0; j < ow; j++) {
            float sx = ((float)j + 0.5f) * sx_scale - 0.5f;
            if (sx < 0) sx = 0;
            int64_t x0 = (int64_t)sx, x1 = x0 + 1 < w ? x0 + 1 : w - 1;
            float lx = sx - (float)x0;
            for (int64_t ch = 0; ch < c; ch++) {
                const float *p = src + ch * h * w;
                float top = p[y0 * w + x0] * (1 - lx) + p[y0 * w + x1] * lx;
                float bottom = p[y1 * w + x0] * (1 - lx) + p[y1 * w + x1] * lx;
                dst[(ch * oh + i) * ow + j] = top * (1 - ly) + bottom * ly;
            }
        }
    }
    return out;
}

/* To gray: torchvision's weights 0.2989 R + 0.587 G + 0.114 B (alpha dropped); to RGB: gray
   repeated (alpha dropped). A sample already of that many channels passes through. */
static nb_tensor *run_channels(nb_transform *t, nb_tensor *x) {
    char d[200];
    int64_t c = x->shape.ndim == 3 ? x->shape.dim[0] : 0, want = t->height;
    if (c < 1 || c > 4 || x->dtype != NB_F32) {
        nb__error("nb_transform_channels: expects an f32 [C, H, W] sample of 1 to 4 channels, got %s",
                  nb__describe(x, d, sizeof d));
        return NULL;
    }
    if (c == want) return nb__own(nb_retain(x));
    nb_shape sh = x->shape;
    sh.dim[0] = want;
    nb_tensor *out = nb_empty(sh, NB_F32);
    if (!out) return NULL;
    int64_t per = x->shape.dim[1] * x->shape.dim[2];
    const float *p = nb__data(x);
    float *o = nb__data(out);
    bool color = c >= 3; /* 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA */
    for (int64_t i = 0; i < per; i++) {
        float g = color ? 0.2989f * p[i] + 0.587f * p[per + i] + 0.114f * p[2 * per + i] : p[i];
        if (want == 1) o[i] = g;
        else
            for (int k = 0; k < 3; k++) o[k * per + i] = color ? p[k * per + i] : g;
    }
    return out;
}

static nb_tensor *run_leaf(nb_transform *t, nb_tensor *x, uint64_t key) {
    if (!x) return NULL;
    if (t->kind == TF_FN) return t->fn(x, key, t->ctx);
    if (x->storage->device.type != NB_CPU || !nb_is_contiguous(x)) {
        x = nb_contiguous(nb_to(x, (nb_device){ NB_CPU, 0 }));
        if (!x) return NULL;
    }
    switch (t->kind) {
    case TF_FLOAT: return run_float(t, x);
    case TF_NORMALIZE: return run_normalize(t, x);
    case TF_CROP: return run_crop(t, x, key);
    case TF_FLIP: return run_flip(t, x, key);
    case TF_RESIZE: return run_resize(t, x);
    case TF_CHANNELS: return run_channels(t, x);
    }
    return NULL;
}

/* Runs t on x inside the caller's scope; leaf i of a compose draws from nb_data_key(key, i). */
nb_tensor *nb__transform_run(nb_transform *t, nb_tensor *x, uint64_t key) {
    if (t->kind != TF_COMPOSE) return run_leaf(t, x, nb_data_key(key, 0));
    for (int i = 0; i < t->n && x; i++) x = run_leaf(t->items[i], x, nb_data_key(key, (uint64_t)i));
    return x;
}

nb_tensor *nb_transform_apply(nb_transform *t, nb_tensor *x, uint64_t key) {
    if (!t || !x) {
        if (!t && !nb__has_error()) nb__error("nb_transform_apply: transform is NULL");
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *y = nb__transform_run(t, x, key);
    if (y) nb_retain(y);
    nb_scope_end(s);
    return nb__own(y);
}
