/* The residual block (nb_nn_residual: act(body(x) + shortcut(x))) and global average pooling
   (Keras' GlobalAveragePooling2D), the two modules the JSON configs (config.c) build beyond the
   layers of layers.c and conv.c. */
#include "nn_impl.h"
#include <stdio.h>
#include <string.h>

/* ---------- residual ---------- */
typedef struct {
    nb_module base;
    nb_module *body, *shortcut;
    nb_tensor *(*act)(nb_tensor *);
} residual;

static nb_tensor *residual_forward(nb_module *self, nb_tensor *x) {
    residual *r = (residual *)self;
    nb_scope *s = nb_scope_begin();
    nb_tensor *y = nb_forward(r->body, x);
    nb_tensor *sc = r->shortcut ? nb_forward(r->shortcut, x) : x;
    nb_tensor *out = NULL;
    if (y && sc) {
        nb_shape ys = nb_shape_of(y), ss = nb_shape_of(sc);
        if (!nb__shape_eq(&ys, &ss)) {
            char a[160], b[160], c[160];
            nb__error("nb_nn_residual %s: the body gives %s for input %s but the %s gives %s; they must be equal", nb__layer_name(self),
                      nb_shape_str(ys, a, sizeof a), nb_shape_str(nb_shape_of(x), b, sizeof b),
                      r->shortcut ? "shortcut" : "identity shortcut", nb_shape_str(ss, c, sizeof c));
        } else {
            out = nb_add(y, sc);
            if (out && r->act) out = r->act(out);
        }
    }
    nb_keep(out);
    nb_scope_end(s);
    return nb__own(out);
}

static const nb_module_class RESIDUAL = { .name = "Residual", .forward = residual_forward };

/* Takes over body and shortcut (both freed on failure). */
nb_module *nb__nn_residual_make(const char *fn, nb_module *body, nb_module *shortcut, nb_tensor *(*act)(nb_tensor *)) {
    if (!body) {
        nb_module_free(shortcut);
        if (!nb__has_error()) nb__error("%s: body is NULL", fn);
        return NULL;
    }
    residual *r = (residual *)nb_module_new(&RESIDUAL, sizeof(residual));
    if (!r) {
        nb_module_free(body);
        nb_module_free(shortcut);
        return NULL;
    }
    r->act = act;
    r->body = nb_module_child(&r->base, "body", body);
    if (!r->body) {
        nb_module_free(shortcut);
        nb_module_free(&r->base);
        return NULL;
    }
    if (shortcut) {
        r->shortcut = nb_module_child(&r->base, "shortcut", shortcut);
        if (!r->shortcut) {
            nb_module_free(&r->base);
            return NULL;
        }
    }
    return &r->base;
}

nb_module *nb_nn_residual(nb_module *body, nb_module *shortcut, bool relu) {
    return nb__nn_residual_make("nb_nn_residual", body, shortcut, relu ? nb_relu : NULL);
}

/* ---------- global average pooling (Keras' GlobalAveragePooling2D: [N, C, H, W] -> [N, C]) ---------- */
static nb_tensor *global_avg_pool_forward(nb_module *self, nb_tensor *x) {
    int nd = nb_ndim(x);
    if (nd != 3 && nd != 4) {
        char sh[160];
        nb__error("nb_nn_global_avg_pool %s: expected input [N, C, H, W] or [C, H, W], got %s", nb__layer_name(self),
                  nb_shape_str(nb_shape_of(x), sh, sizeof sh));
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *x4 = nd == 3 ? nb_unsqueeze(x, 0) : x;
    nb_tensor *y = nb_adaptive_avg_pool2d(x4, 1, 1);
    y = nd == 3 ? nb_reshape(y, NB_SHAPE(nb_dim(x, 0))) : nb_flatten(y, 1, -1);
    nb_keep(y);
    nb_scope_end(s);
    return nb__own(y);
}

static const nb_module_class GLOBAL_AVG_POOL = { .name = "GlobalAvgPool2d", .forward = global_avg_pool_forward };

nb_module *nb__nn_global_avg_pool(void) { return nb_module_new(&GLOBAL_AVG_POOL, sizeof(nb_module)); }
