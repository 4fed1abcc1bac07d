/* The layers Hugging Face architectures share, built around weights taken from a checkpoint
   (linear, layer norm and RMS norm with the config's eps, embedding, containers), and config.json's fields. */
#include "hf_model.h"

#include <math.h>

/* ---------------------------------------------------------------- config fields */

int nb__hf_int(const char *fn, json_t *cfg, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    json_t *v = json_object_get(cfg, key);
    if (!json_is_integer(v)) {
        nb__error("%s: config.json: \"%s\" %s", fn, key, v ? "is not an integer" : "is missing");
        return -1;
    }
    int64_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        nb__error("%s: config.json: \"%s\" is %lld, outside [%lld, %lld]", fn, key, (long long)x, (long long)lo,
                  (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

int nb__hf_num(const char *fn, json_t *cfg, const char *key, double def, hf_range range, double *out) {
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) {
        nb__error("%s: config.json: \"%s\" is not a number", fn, key);
        return -1;
    }
    double x = json_number_value(v);
    /* a bad epsilon or theta loads and then computes NaN from every input: refused here */
    bool ok = isfinite(x) && (range == HF_POSITIVE ? x > 0 : range == HF_PROBABILITY ? x >= 0 && x < 1 : x > 1);
    if (!ok) {
        nb__error("%s: config.json: \"%s\" is %g; it must be %s", fn, key, x,
                  range == HF_POSITIVE ? "a finite number above 0" : range == HF_PROBABILITY ? "in [0, 1)" : "a finite number above 1");
        return -1;
    }
    *out = x;
    return 0;
}

const char *nb__hf_str(json_t *cfg, const char *key, const char *def) {
    const char *s = json_string_value(json_object_get(cfg, key));
    return s ? s : def;
}

void nb__hf_eos(json_t *cfg, hf_lm *lm) {
    json_t *eos = json_object_get(cfg, "eos_token_id");
    size_t n = json_is_array(eos) ? json_array_size(eos) : 1;
    lm->neos = 0;
    for (size_t i = 0; i < n && lm->neos < 8; i++) {
        json_t *e = json_is_array(eos) ? json_array_get(eos, i) : eos;
        if (json_is_integer(e) && json_integer_value(e) >= 0 && json_integer_value(e) < lm->vocab)
            lm->eos[lm->neos++] = json_integer_value(e);
    }
}

bool nb__hf_must_be_false(const char *fn, json_t *cfg, const char *key) {
    if (json_is_true(json_object_get(cfg, key))) {
        nb__error("%s: config.json: \"%s\": true is not supported", fn, key);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- helpers */

nb_tensor *nb__hf_split_heads(nb_tensor *x, int64_t heads) {
    nb_shape s = nb_shape_of(x);
    return nb_permute(nb_reshape(x, NB_SHAPE(s.dim[0], s.dim[1], heads, s.dim[2] / heads)), (int[]){ 0, 2, 1, 3 });
}

nb_tensor *nb__hf_merge_heads(nb_tensor *x) {
    if (!x) return NULL; /* the attention failed: its error stands */
    nb_shape s = nb_shape_of(x);
    return nb_reshape(nb_permute(x, (int[]){ 0, 2, 1, 3 }), NB_SHAPE(s.dim[0], s.dim[2], s.dim[1] * s.dim[3]));
}

nb_tensor *nb__hf_scope_return(nb_scope *s, nb_tensor *x) {
    if (x) nb_keep(x);
    nb_scope_end(s);
    return x ? nb__own(x) : NULL;
}

/* ---------------------------------------------------------------- modules */

static nb_tensor *no_forward(nb_module *self, nb_tensor *x) {
    (void)x;
    nb__error("nb_forward: %s (%s) is a container; call its parts", nb_module_path(self), self->cls->name);
    return NULL;
}

/* Containers keep their class name for messages; one class per name used. */
static const nb_module_class CONTAINERS[] = {
    { .name = "BertEmbeddings", .forward = no_forward }, { .name = "BertEncoder", .forward = no_forward },
    { .name = "ModuleList", .forward = no_forward },     { .name = "BertLayer", .forward = no_forward },
    { .name = "BertAttention", .forward = no_forward },  { .name = "BertSelfAttention", .forward = no_forward },
    { .name = "BertSelfOutput", .forward = no_forward }, { .name = "BertIntermediate", .forward = no_forward },
    { .name = "BertOutput", .forward = no_forward },     { .name = "BertPooler", .forward = no_forward },
    { .name = "LlamaModel", .forward = no_forward },     { .name = "LlamaDecoderLayer", .forward = no_forward },
    { .name = "LlamaAttention", .forward = no_forward }, { .name = "LlamaMLP", .forward = no_forward },
    { .name = "Module", .forward = no_forward },
};

nb_module *nb__hf_container(const char *cls_name) {
    size_t n = sizeof CONTAINERS / sizeof CONTAINERS[0];
    size_t k = 0;
    while (k < n - 1 && strcmp(CONTAINERS[k].name, cls_name)) k++;
    return nb_module_new(&CONTAINERS[k], sizeof(nb_module));
}

typedef struct {
    nb_module base;
    nb_tensor *w, *b;
} hf_linear;

static nb_tensor *linear_forward(nb_module *self, nb_tensor *x) {
    hf_linear *l = (hf_linear *)self;
    return nb_linear(x, l->w, l->b);
}
static const nb_module_class LINEAR = { .name = "Linear", .forward = linear_forward };

/* Takes prefix.name of shape s into module m as a parameter; NULL with the error. */
static nb_tensor *param(nb_module *m, hf_weights *w, const char *prefix, const char *name, nb_shape s, nb_dtype dt) {
    char key[512];
    snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", name);
    nb_tensor *t = nb__hf_take(w, key, s, dt);
    return t ? nb_module_param(m, name, t) : NULL;
}

nb_module *nb__hf_linear(hf_weights *w, const char *prefix, int64_t in, int64_t out, bool bias, nb_dtype dt) {
    hf_linear *l = (hf_linear *)nb_module_new(&LINEAR, sizeof *l);
    if (!l) return NULL;
    l->w = param(&l->base, w, prefix, "weight", NB_SHAPE(out, in), dt);
    l->b = bias ? param(&l->base, w, prefix, "bias", NB_SHAPE(out), dt) : NULL;
    if (!l->w || (bias && !l->b)) {
        nb_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

typedef struct {
    nb_module base;
    nb_tensor *w, *b;
    double eps;
} hf_layer_norm;

static nb_tensor *layer_norm_forward(nb_module *self, nb_tensor *x) {
    hf_layer_norm *l = (hf_layer_norm *)self;
    return nb_layer_norm(x, l->w, l->b, l->eps);
}
static const nb_module_class LAYER_NORM = { .name = "LayerNorm", .forward = layer_norm_forward };

nb_module *nb__hf_layer_norm(hf_weights *w, const char *prefix, int64_t dim, double eps, nb_dtype dt) {
    hf_layer_norm *l = (hf_layer_norm *)nb_module_new(&LAYER_NORM, sizeof *l);
    if (!l) return NULL;
    l->eps = eps;
    l->w = param(&l->base, w, prefix, "weight", NB_SHAPE(dim), dt);
    l->b = l->w ? param(&l->base, w, prefix, "bias", NB_SHAPE(dim), dt) : NULL;
    if (!l->b) {
        nb_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

static nb_tensor *rms_norm_forward(nb_module *self, nb_tensor *x) {
    hf_layer_norm *l = (hf_layer_norm *)self;
    return nb_rms_norm(x, l->w, l->eps);
}
static const nb_module_class RMS_NORM = { .name = "LlamaRMSNorm", .forward = rms_norm_forward };

nb_module *nb__hf_rms_norm(hf_weights *w, const char *prefix, int64_t dim, double eps, nb_dtype dt) {
    hf_layer_norm *l = (hf_layer_norm *)nb_module_new(&RMS_NORM, sizeof *l);
    if (!l) return NULL;
    l->eps = eps;
    if (!(l->w = param(&l->base, w, prefix, "weight", NB_SHAPE(dim), dt))) {
        nb_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

typedef struct {
    nb_module base;
    nb_tensor *w;
} hf_embedding;

static nb_tensor *embedding_forward(nb_module *self, nb_tensor *ids) {
    return nb_embedding(((hf_embedding *)self)->w, ids);
}
static const nb_module_class EMBEDDING = { .name = "Embedding", .forward = embedding_forward };

nb_module *nb__hf_embedding(hf_weights *w, const char *prefix, int64_t num, int64_t dim, nb_dtype dt) {
    hf_embedding *e = (hf_embedding *)nb_module_new(&EMBEDDING, sizeof *e);
    if (!e) return NULL;
    e->w = param(&e->base, w, prefix, "weight", NB_SHAPE(num, dim), dt);
    if (!e->w) {
        nb_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}
