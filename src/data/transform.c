/* Per-sample transforms: to float and scale, per-channel normalisation, random crop with
   padding, random horizontal flip, a user's function, and composition. Random ones draw from
   the sample's key only, so results never depend on which thread runs them. */
#include "data_impl.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { TF_FLOAT, TF_NORMALIZE, TF_CROP, TF_FLIP, TF_FN, TF_COMPOSE };

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
    }
    return NULL;
}

/* Runs t on x inside the caller's scope; leaf i of a compose draws from nb_data_key(key, i). */
nb_tensor *nb__transform_run(nb_transform *t, nb_tensor *x, uint64_t key);
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
