/* Transformer layers with torch.nn's structure, parameter names and defaults (batch first):
   TransformerEncoderLayer, TransformerDecoderLayer and their stacks TransformerEncoder and
   TransformerDecoder, post-norm or pre-norm, composed from multi-head attention, linear,
   dropout and layer-norm modules. */
#include "nn_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    nb_module base;
    bool decoder, norm_first;
    nb_transformer_activation activation;
    nb_module *self_attn, *cross_attn, *linear1, *dropout, *linear2, *norm[3], *drop[3];
} tlayer;

typedef struct {
    nb_module base;
    bool decoder;
    nb_module *layers, *norm;
} tstack;

static const nb_module_class ENCODER_LAYER, DECODER_LAYER, ENCODER, DECODER;

static bool is_layer(const nb_module *m) { return m->cls == &ENCODER_LAYER || m->cls == &DECODER_LAYER; }
static bool is_stack(const nb_module *m) { return m->cls == &ENCODER || m->cls == &DECODER; }

/* An attention mask as scores to add: a float mask as it is, a bool one -inf where true (a place
   not to attend), as torch's attn_mask. NULL stays NULL. */
static nb_tensor *additive(const char *what, nb_tensor *mask, nb_dtype dtype) {
    if (!mask) return NULL;
    nb_dtype d = nb_dtype_of(mask);
    if (d == NB_BOOL) return nb_masked_fill(nb_zeros(nb_shape_of(mask), dtype), mask, -INFINITY);
    if (d == NB_F32 || d == NB_F64) return d == dtype ? mask : nb_cast(mask, dtype);
    char sh[160];
    nb__error("nb_transformer_forward: %s must be bool (true: do not attend) or float (added to the scores), got %s %s", what,
              nb_dtype_name(d), nb_shape_str(nb_shape_of(mask), sh, sizeof sh));
    return NULL;
}

/* The mask of one attention over tq queries and tk keys of x's batch: the attention mask, the
   causal mask and the key padding mask [B, tk] (true: padding) summed, broadcasting to [B, 1, tq,
   tk]; NULL when there is none (or on an error, which is then recorded). */
static nb_tensor *attention_mask(nb_tensor *mask, bool causal, nb_tensor *padding, int64_t b, int64_t tq, int64_t tk,
                                 nb_dtype dtype, bool *failed) {
    uint64_t errors = nb__error_count(); /* its own failures, not an error the caller left */
    nb_tensor *m = additive("the attention mask", mask, dtype);
    *failed = mask && !m;
    if (causal && !*failed) {
        nb_tensor *c = nb_triu(nb_full(NB_SHAPE(tq, tk), -INFINITY, dtype), 1);
        m = m ? nb_add(m, c) : c;
    }
    if (padding && !*failed) {
        if (nb_ndim(padding) != 2 || nb_dim(padding, 0) != b || nb_dim(padding, 1) != tk) {
            char sh[160];
            nb__error("nb_transformer_forward: a key padding mask must be [%lld, %lld] (batch, keys), got %s", (long long)b,
                      (long long)tk, nb_shape_str(nb_shape_of(padding), sh, sizeof sh));
            *failed = true;
            return NULL;
        }
        nb_tensor *p = additive("a key padding mask", padding, dtype);
        p = p ? nb_reshape(p, NB_SHAPE(b, 1, 1, tk)) : NULL;
        *failed = !p;
        m = m && p ? nb_add(m, p) : p ? p : m;
    }
    *failed = *failed || nb__error_count() != errors;
    return m;
}

static nb_tensor *attend(nb_module *attn, nb_module *drop, nb_tensor *q, nb_tensor *kv, nb_tensor *mask) {
    return nb_forward(drop, nb_mha_forward(attn, q, kv, kv, mask));
}

/* linear2(dropout(activation(linear1(x)))), then the block's dropout */
static nb_tensor *feed_forward(tlayer *l, nb_tensor *x, nb_module *drop) {
    nb_tensor *h = nb_forward(l->linear1, x);
    h = l->activation == NB_TRANSFORMER_GELU ? nb_gelu(h) : nb_relu(h);
    return nb_forward(drop, nb_forward(l->linear2, nb_forward(l->dropout, h)));
}

/* torch's layer: each block (self-attention, the decoder's cross-attention, feed-forward) added
   to x and normalised after (post-norm), or applied to x normalised before (norm_first) */
static nb_tensor *layer_forward(tlayer *l, nb_tensor *x, nb_tensor *memory, nb_tensor *self_mask, nb_tensor *cross_mask) {
    nb_module **n = l->norm, **d = l->drop;
    int ff = l->decoder ? 2 : 1; /* the feed-forward block's norm and dropout */
    if (l->norm_first) {
        nb_tensor *h = nb_forward(n[0], x);
        x = nb_add(x, attend(l->self_attn, d[0], h, h, self_mask));
        if (l->decoder) x = nb_add(x, attend(l->cross_attn, d[1], nb_forward(n[1], x), memory, cross_mask));
        return nb_add(x, feed_forward(l, nb_forward(n[ff], x), d[ff]));
    }
    x = nb_forward(n[0], nb_add(x, attend(l->self_attn, d[0], x, x, self_mask)));
    if (l->decoder) x = nb_forward(n[1], nb_add(x, attend(l->cross_attn, d[1], x, memory, cross_mask)));
    return nb_forward(n[ff], nb_add(x, feed_forward(l, x, d[ff])));
}

nb_tensor *nb_transformer_forward(nb_module *m, nb_tensor *x, nb_tensor *memory, nb_transformer_masks masks) {
    if (!m || !x) {
        if (!nb__has_error()) nb__error("nb_transformer_forward: %s is NULL", m ? "the input" : "the module");
        return NULL;
    }
    if (!is_layer(m) && !is_stack(m)) {
        nb__error("nb_transformer_forward: %s is a %s, not a transformer layer or stack", nb__layer_name(m),
                  m->cls && m->cls->name ? m->cls->name : "module");
        return NULL;
    }
    bool decoder = m->cls == &DECODER_LAYER || m->cls == &DECODER;
    char sh[160];
    if (nb_ndim(x) != 3 || (decoder && (!memory || nb_ndim(memory) != 3 || nb_dim(memory, 0) != nb_dim(x, 0)))) {
        nb__error("nb_transformer_forward: %s %s takes %s [B, T, E]%s, got %s%s", m->cls->name, nb__layer_name(m),
                  decoder ? "a target" : "an input", decoder ? " and a memory [B, S, E] of the same batch" : "",
                  nb_shape_str(nb_shape_of(x), sh, sizeof sh), decoder && !memory ? " and no memory" : "");
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    int64_t b = nb_dim(x, 0), t = nb_dim(x, 1);
    bool bad_self = false, bad_cross = false;
    nb_tensor *self_mask = attention_mask(masks.mask, masks.causal, masks.key_padding_mask, b, t, t, nb_dtype_of(x), &bad_self);
    nb_tensor *cross_mask = decoder && !bad_self ? attention_mask(masks.memory_mask, false, masks.memory_key_padding_mask, b, t,
                                                                   nb_dim(memory, 1), nb_dtype_of(x), &bad_cross)
                                                 : NULL;
    nb_tensor *y = NULL;
    if (!bad_self && !bad_cross) {
        if (is_layer(m)) y = layer_forward((tlayer *)m, x, memory, self_mask, cross_mask);
        else {
            tstack *st = (tstack *)m;
            y = x;
            for (int i = 0, n = nb_nn_module_list_len(st->layers); i < n && y; i++)
                y = layer_forward((tlayer *)nb_nn_module_list_get(st->layers, i), y, memory, self_mask, cross_mask);
            if (y && st->norm) y = nb_forward(st->norm, y);
        }
    }
    nb_keep(y);
    nb_scope_end(s);
    return nb__own(y);
}

static nb_tensor *transformer_module_forward(nb_module *self, nb_tensor *x) {
    if (self->cls == &DECODER_LAYER || self->cls == &DECODER) {
        nb__error("nb_forward: %s %s needs a memory too: call nb_transformer_forward(m, target, memory, masks)", self->cls->name,
                  nb__layer_name(self));
        return NULL;
    }
    return nb_transformer_forward(self, x, NULL, (nb_transformer_masks){ 0 });
}

static const nb_module_class ENCODER_LAYER = { .name = "TransformerEncoderLayer", .forward = transformer_module_forward };
static const nb_module_class DECODER_LAYER = { .name = "TransformerDecoderLayer", .forward = transformer_module_forward };
static const nb_module_class ENCODER = { .name = "TransformerEncoder", .forward = transformer_module_forward };
static const nb_module_class DECODER = { .name = "TransformerDecoder", .forward = transformer_module_forward };

/* opts with torch's defaults filled in, or -1 with an error naming fn */
static int resolve(const char *fn, int64_t d_model, int nhead, nb_transformer_opts *o) {
    if (!nb__enum_ok(fn, "activation", (int)o->activation, NB_TRANSFORMER_GELU + 1, "nb_transformer_activation", "relu, gelu"))
        return -1;
    if (o->dim_feedforward == 0) o->dim_feedforward = 2048;
    if (o->dropout == 0 && !o->no_dropout) o->dropout = 0.1;
    if (o->no_dropout) o->dropout = 0;
    if (o->layer_norm_eps == 0) o->layer_norm_eps = 1e-5;
    if (d_model <= 0 || nhead <= 0 || d_model % nhead || o->dim_feedforward < 0 || !(o->dropout >= 0 && o->dropout < 1) ||
        !(o->layer_norm_eps > 0) || (unsigned)o->activation > NB_TRANSFORMER_GELU) {
        nb__error("%s: d_model %lld must be a positive multiple of nhead %d, dim_feedforward %lld positive, dropout %g in [0, "
                  "1), layer_norm_eps %g above 0 and the activation relu or gelu", fn, (long long)d_model, nhead,
                  (long long)o->dim_feedforward, o->dropout, o->layer_norm_eps);
        return -1;
    }
    return 0;
}

static nb_module *make_layer(bool decoder, int64_t d_model, int nhead, nb_transformer_opts o) {
    const char *fn = decoder ? "nb_nn_transformer_decoder_layer" : "nb_nn_transformer_encoder_layer";
    if (resolve(fn, d_model, nhead, &o) < 0) return NULL;
    tlayer *l = (tlayer *)nb_module_new(decoder ? &DECODER_LAYER : &ENCODER_LAYER, sizeof(tlayer));
    if (!l) return NULL;
    l->decoder = decoder;
    l->norm_first = o.norm_first;
    l->activation = o.activation;
    nb_mha_opts ao = { .dropout = o.dropout };
    nb_module *b = &l->base;
    /* children in torch's order, so they print and list as torch's do */
    bool ok = (l->self_attn = nb_module_child(b, "self_attn", nb_nn_multihead_attention(d_model, nhead, ao))) != NULL;
    if (ok && decoder) ok = (l->cross_attn = nb_module_child(b, "multihead_attn", nb_nn_multihead_attention(d_model, nhead, ao))) != NULL;
    ok = ok && (l->linear1 = nb_module_child(b, "linear1", nb_nn_linear(d_model, o.dim_feedforward))) != NULL;
    ok = ok && (l->dropout = nb_module_child(b, "dropout", nb_nn_dropout(o.dropout))) != NULL;
    ok = ok && (l->linear2 = nb_module_child(b, "linear2", nb_nn_linear(o.dim_feedforward, d_model))) != NULL;
    static const char *const norms[3] = { "norm1", "norm2", "norm3" }, *const drops[3] = { "dropout1", "dropout2", "dropout3" };
    int blocks = decoder ? 3 : 2;
    for (int i = 0; i < blocks && ok; i++) ok = (l->norm[i] = nb_module_child(b, norms[i], nb_nn_layer_norm_eps(d_model, o.layer_norm_eps))) != NULL;
    for (int i = 0; i < blocks && ok; i++) ok = (l->drop[i] = nb_module_child(b, drops[i], nb_nn_dropout(o.dropout))) != NULL;
    if (!ok) {
        nb_module_free(b);
        return NULL;
    }
    return b;
}

nb_module *nb_nn_transformer_encoder_layer(int64_t d_model, int nhead, nb_transformer_opts opts) {
    return make_layer(false, d_model, nhead, opts);
}

nb_module *nb_nn_transformer_decoder_layer(int64_t d_model, int nhead, nb_transformer_opts opts) {
    return make_layer(true, d_model, nhead, opts);
}

/* torch's stacks deep-copy the layer they are given, so every layer starts with the same
   weights: the first layer's are copied into the others. */
static int copy_parameters(nb_module *from, nb_module *to) {
    int n = nb_module_named_parameters(from, NULL, 0);
    nb_named_tensor *a = calloc((size_t)(n > 0 ? 2 * n : 1), sizeof *a);
    if (!a) {
        nb__error("nb_nn_transformer_encoder: out of memory");
        return -1;
    }
    int rc = nb_module_named_parameters(from, a, n) == n && nb_module_named_parameters(to, a + n, n) == n ? 0 : -1;
    bool prev = nb_set_grad_enabled(false);
    for (int i = 0; i < n && rc == 0; i++) rc = nb_assign(a[n + i].tensor, a[i].tensor);
    nb_set_grad_enabled(prev);
    free(a);
    return rc;
}

static nb_module *make_stack(bool decoder, int64_t d_model, int nhead, int num_layers, nb_transformer_opts o) {
    const char *fn = decoder ? "nb_nn_transformer_decoder" : "nb_nn_transformer_encoder";
    if (num_layers <= 0) {
        nb__error("%s: num_layers must be positive, got %d", fn, num_layers);
        return NULL;
    }
    tstack *st = (tstack *)nb_module_new(decoder ? &DECODER : &ENCODER, sizeof(tstack));
    if (!st) return NULL;
    st->decoder = decoder;
    bool ok = (st->layers = nb_module_child(&st->base, "layers", nb_nn_module_list())) != NULL;
    nb_module *first = NULL;
    for (int i = 0; i < num_layers && ok; i++) {
        nb_module *l = make_layer(decoder, d_model, nhead, o);
        ok = l && nb_nn_module_list_append(st->layers, l) != NULL;
        if (ok && i == 0) first = l;
        else if (ok) ok = copy_parameters(first, l) == 0;
    }
    if (ok && o.final_norm) {
        nb_transformer_opts r = o;
        resolve(fn, d_model, nhead, &r);
        ok = (st->norm = nb_module_child(&st->base, "norm", nb_nn_layer_norm_eps(d_model, r.layer_norm_eps))) != NULL;
    }
    if (!ok) {
        nb_module_free(&st->base);
        return NULL;
    }
    return &st->base;
}

nb_module *nb_nn_transformer_encoder(int64_t d_model, int nhead, int num_layers, nb_transformer_opts opts) {
    return make_stack(false, d_model, nhead, num_layers, opts);
}

nb_module *nb_nn_transformer_decoder(int64_t d_model, int nhead, int num_layers, nb_transformer_opts opts) {
    return make_stack(true, d_model, nhead, num_layers, opts);
}
