/* BERT-family encoders as transformers' BertModel builds them (BERT, MiniLM): token, position
   and token-type embeddings with a layer norm, post-norm layers of self-attention (padding
   masked as transformers masks it) and a GELU MLP, and the pooler; parameter names as in the
   checkpoint (embeddings.word_embeddings.weight, encoder.layer.0.attention.self.query.weight,
   ...). Sentence embeddings: mean pooling over the mask, then L2 normalisation, as
   sentence-transformers computes them. */
#include "hf_model.h"
#include "nabla/hf.h"

#include <float.h>
#include <math.h>

typedef struct {
    nb_module *query, *key, *value, *attn_out, *attn_norm, *inter, *out, *out_norm;
} bert_layer;

typedef struct {
    nb_module base;
    int64_t hidden, heads, layers, positions, types;
    nb_module *word, *pos, *type, *emb_norm;
    bert_layer *layer;
} bert_model;

static nb_tensor *bert_forward(nb_module *self, nb_tensor *ids) { return nb_hf_encode(self, ids, NULL, NULL); }
static void bert_free(nb_module *self) { free(((bert_model *)self)->layer); }
static const nb_module_class BERT = { .name = "BertModel", .forward = bert_forward, .free = bert_free };

bool nb__hf_is_bert(const nb_module *m) { return m && m->cls == &BERT; }

int64_t nb__hf_positions(const nb_module *m) { return ((const bert_model *)m)->positions; }

nb_tensor *nb_hf_encode(nb_module *m, nb_tensor *ids, nb_tensor *attention_mask, nb_tensor *token_type_ids) {
    if (!nb__hf_is_bert(m)) {
        nb__error("nb_hf_encode: the module is not an encoder that nb_hf_load made");
        return NULL;
    }
    bert_model *b = (bert_model *)m;
    if (!ids || nb_ndim(ids) != 2 || (nb_dtype_of(ids) != NB_I64 && nb_dtype_of(ids) != NB_I32)) {
        char d[160] = "NULL";
        if (ids) nb_shape_str(nb_shape_of(ids), d, sizeof d);
        nb__error("nb_hf_encode: ids must be integer [batch, tokens], got %s", d);
        return NULL;
    }
    int64_t B = nb_dim(ids, 0), T = nb_dim(ids, 1);
    if (T > b->positions) {
        nb__error("nb_hf_encode: %lld tokens, but the model has %lld positions (max_position_embeddings)", (long long)T,
                  (long long)b->positions);
        return NULL;
    }
    for (int k = 0; k < 2; k++) {
        nb_tensor *t = k ? token_type_ids : attention_mask;
        if (t && (nb_ndim(t) != 2 || nb_dim(t, 0) != B || nb_dim(t, 1) != T)) {
            char d[160];
            nb__error("nb_hf_encode: %s must be [%lld, %lld] like ids, got %s", k ? "token_type_ids" : "attention_mask",
                      (long long)B, (long long)T, nb_shape_str(nb_shape_of(t), d, sizeof d));
            return NULL;
        }
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *pos = nb_arange(0, (double)T, 1, NB_I64);
    nb_tensor *types = token_type_ids ? token_type_ids : nb_zeros(NB_SHAPE(B, T), NB_I64);
    nb_tensor *x = nb_add(nb_add(nb_forward(b->word, ids), nb_forward(b->type, types)), nb_forward(b->pos, pos));
    x = nb_forward(b->emb_norm, x);
    /* transformers' extended mask: (1 - mask) * the dtype's lowest value, over the keys */
    nb_tensor *mask = NULL;
    if (attention_mask) {
        nb_tensor *keep = nb_cast(attention_mask, NB_F32);
        mask = nb_mul_scalar(nb_add_scalar(nb_neg(keep), 1.0), -FLT_MAX);
        mask = nb_reshape(mask, NB_SHAPE(B, 1, 1, T));
    }
    for (int64_t i = 0; i < b->layers && x; i++) {
        /* a scope a layer: its intermediates go when it ends, so a batch holds one layer's worth
           of activations (the graph keeps what backward needs when it records) */
        nb_scope *ls = nb_scope_begin();
        bert_layer *l = &b->layer[i];
        nb_tensor *q = nb__hf_split_heads(nb_forward(l->query, x), b->heads);
        nb_tensor *k = nb__hf_split_heads(nb_forward(l->key, x), b->heads);
        nb_tensor *v = nb__hf_split_heads(nb_forward(l->value, x), b->heads);
        nb_tensor *ctx = nb_scaled_dot_product_attention(q, k, v, (nb_attn_opts){ .mask = mask });
        ctx = nb__hf_merge_heads(ctx);
        x = nb_forward(l->attn_norm, nb_add(nb_forward(l->attn_out, ctx), x));
        nb_tensor *h = nb_gelu(nb_forward(l->inter, x));
        x = nb__hf_scope_return(ls, nb_forward(l->out_norm, nb_add(nb_forward(l->out, h), x)));
    }
    return nb__hf_scope_return(s, x);
}

nb_tensor *nb_hf_mean_pool(nb_tensor *hidden, nb_tensor *attention_mask, bool normalize) {
    if (!hidden || nb_ndim(hidden) != 3) {
        nb__error("nb_hf_mean_pool: hidden states must be [batch, tokens, hidden]");
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    int64_t B = nb_dim(hidden, 0), T = nb_dim(hidden, 1);
    nb_tensor *m = attention_mask ? nb_reshape(nb_cast(attention_mask, nb_dtype_of(hidden)), NB_SHAPE(B, T, 1))
                                  : nb_ones(NB_SHAPE(B, T, 1), nb_dtype_of(hidden));
    /* sentence-transformers: sum(h * mask) / clamp(sum(mask), min=1e-9) */
    nb_tensor *sum = nb_sum(nb_mul(hidden, m), 1, false);
    nb_tensor *count = nb_clamp(nb_sum(m, 1, false), 1e-9, INFINITY);
    nb_tensor *e = nb_div(sum, count);
    if (e && normalize) { /* F.normalize: x / max(||x||, 1e-12) */
        nb_tensor *norm = nb_clamp(nb_sqrt(nb_sum(nb_mul(e, e), 1, true)), 1e-12, INFINITY);
        e = nb_div(e, norm);
    }
    return nb__hf_scope_return(s, e);
}

/* A child named name under parent, made by mk (NULL on failure, the error set). */
#define CHILD(parent, name, mk) nb_module_child((parent), (name), (mk))

static bool build_layer(bert_model *b, hf_weights *w, int64_t i, int64_t inter, double eps, nb_dtype dt,
                        nb_module *list) {
    char p[128], q[192];
    snprintf(p, sizeof p, "encoder.layer.%lld", (long long)i);
    nb_module *layer = CHILD(list, p + strlen("encoder.layer."), nb__hf_container("BertLayer"));
    nb_module *att = layer ? CHILD(layer, "attention", nb__hf_container("BertAttention")) : NULL;
    nb_module *self = att ? CHILD(att, "self", nb__hf_container("BertSelfAttention")) : NULL;
    nb_module *aout = att ? CHILD(att, "output", nb__hf_container("BertSelfOutput")) : NULL;
    nb_module *im = layer ? CHILD(layer, "intermediate", nb__hf_container("BertIntermediate")) : NULL;
    nb_module *out = layer ? CHILD(layer, "output", nb__hf_container("BertOutput")) : NULL;
    if (!self || !aout || !im || !out) return false;
    bert_layer *l = &b->layer[i];
    int64_t E = b->hidden;
#define LIN(dst, parent, name, path, in, o)                                              \
    snprintf(q, sizeof q, "%s.%s", p, path);                                           \
    if (!(dst = CHILD(parent, name, nb__hf_linear(w, q, in, o, true, dt)))) return false
    LIN(l->query, self, "query", "attention.self.query", E, E);
    LIN(l->key, self, "key", "attention.self.key", E, E);
    LIN(l->value, self, "value", "attention.self.value", E, E);
    LIN(l->attn_out, aout, "dense", "attention.output.dense", E, E);
    LIN(l->inter, im, "dense", "intermediate.dense", E, inter);
    LIN(l->out, out, "dense", "output.dense", inter, E);
#undef LIN
    snprintf(q, sizeof q, "%s.attention.output.LayerNorm", p);
    if (!(l->attn_norm = CHILD(aout, "LayerNorm", nb__hf_layer_norm(w, q, E, eps, dt)))) return false;
    snprintf(q, sizeof q, "%s.output.LayerNorm", p);
    if (!(l->out_norm = CHILD(out, "LayerNorm", nb__hf_layer_norm(w, q, E, eps, dt)))) return false;
    return true;
}

nb_module *nb__hf_bert_new(const char *fn, json_t *cfg, hf_weights *w, nb_dtype dt) {
    int64_t vocab, hidden, layers, heads, inter, positions, types = 2;
    double eps;
    if (nb__hf_int(fn, cfg, "vocab_size", 1, INT32_MAX, &vocab) < 0 ||
        nb__hf_int(fn, cfg, "hidden_size", 1, 1 << 16, &hidden) < 0 ||
        nb__hf_int(fn, cfg, "num_hidden_layers", 1, 1024, &layers) < 0 ||
        nb__hf_int(fn, cfg, "num_attention_heads", 1, 1024, &heads) < 0 ||
        nb__hf_int(fn, cfg, "intermediate_size", 1, 1 << 20, &inter) < 0 ||
        nb__hf_int(fn, cfg, "max_position_embeddings", 1, 1 << 20, &positions) < 0 ||
        (json_object_get(cfg, "type_vocab_size") && nb__hf_int(fn, cfg, "type_vocab_size", 1, 1 << 20, &types) < 0) ||
        nb__hf_num(fn, cfg, "layer_norm_eps", 1e-12, HF_POSITIVE, &eps) < 0)
        return NULL;
    if (hidden % heads) {
        nb__error("%s: config.json: hidden_size %lld is not a multiple of num_attention_heads %lld", fn, (long long)hidden,
                  (long long)heads);
        return NULL;
    }
    const char *act = nb__hf_str(cfg, "hidden_act", "gelu");
    if (strcmp(act, "gelu")) {
        nb__error("%s: config.json: \"hidden_act\" \"%s\" is not supported (gelu)", fn, act);
        return NULL;
    }
    const char *pe = nb__hf_str(cfg, "position_embedding_type", "absolute");
    if (strcmp(pe, "absolute")) {
        nb__error("%s: config.json: \"position_embedding_type\" \"%s\" is not supported (absolute)", fn, pe);
        return NULL;
    }
    bert_model *b = (bert_model *)nb_module_new(&BERT, sizeof *b);
    if (!b) return NULL;
    b->hidden = hidden;
    b->heads = heads;
    b->layers = layers;
    b->positions = positions;
    b->types = types;
    b->layer = calloc((size_t)layers, sizeof *b->layer);
    nb_module *emb = b->layer ? CHILD(&b->base, "embeddings", nb__hf_container("BertEmbeddings")) : NULL;
    bool ok = emb && (b->word = CHILD(emb, "word_embeddings",
                                      nb__hf_embedding(w, "embeddings.word_embeddings", vocab, hidden, dt))) &&
              (b->pos = CHILD(emb, "position_embeddings",
                              nb__hf_embedding(w, "embeddings.position_embeddings", positions, hidden, dt))) &&
              (b->type = CHILD(emb, "token_type_embeddings",
                               nb__hf_embedding(w, "embeddings.token_type_embeddings", types, hidden, dt))) &&
              (b->emb_norm = CHILD(emb, "LayerNorm", nb__hf_layer_norm(w, "embeddings.LayerNorm", hidden, eps, dt)));
    nb_module *enc = ok ? CHILD(&b->base, "encoder", nb__hf_container("BertEncoder")) : NULL;
    nb_module *list = enc ? CHILD(enc, "layer", nb__hf_container("ModuleList")) : NULL;
    ok = list != NULL;
    for (int64_t i = 0; i < layers && ok; i++) ok = build_layer(b, w, i, inter, eps, dt, list);
    /* the pooler (dense + tanh over [CLS]) when the checkpoint has one: kept so the state dict
       round-trips; nb_hf_encode returns the hidden states before it */
    if (ok && nb__hf_has(w, "pooler.dense.weight")) {
        nb_module *pool = CHILD(&b->base, "pooler", nb__hf_container("BertPooler"));
        ok = pool && CHILD(pool, "dense", nb__hf_linear(w, "pooler.dense", hidden, hidden, true, dt));
    }
    if (!ok) {
        nb_module_free(&b->base);
        return NULL;
    }
    return &b->base;
}
