/* GPT-2 as transformers' GPT2LMHeadModel builds it: token and learned position embeddings,
   pre-norm blocks of causal self-attention and an MLP whose Conv1D weights are [in, out] (the
   transpose of nn.Linear's), a final layer norm, and logits through the token embedding (tied).
   Parameter names as in the checkpoint (transformer.h.0.attn.c_attn.weight, ...). Runs with a
   key/value cache for generation (src/hf/generate.c). */
#include "hf_model.h"
#include "nabla/hf.h"

#include <math.h>

/* Conv1D: y = x W + b with W [in, out]. */
typedef struct {
    nb_module base;
    nb_tensor *w, *b;
} conv1d;

static nb_tensor *conv1d_forward(nb_module *self, nb_tensor *x) {
    conv1d *c = (conv1d *)self;
    return nb_add(nb_matmul(x, c->w), c->b);
}
static const nb_module_class CONV1D = { .name = "Conv1D", .forward = conv1d_forward };

static nb_module *conv1d_new(hf_weights *w, const char *prefix, int64_t in, int64_t out, nb_dtype dt) {
    conv1d *c = (conv1d *)nb_module_new(&CONV1D, sizeof *c);
    if (!c) return NULL;
    char key[256];
    snprintf(key, sizeof key, "%s.weight", prefix);
    nb_tensor *t = nb__hf_take(w, key, NB_SHAPE(in, out), dt);
    c->w = t ? nb_module_param(&c->base, "weight", t) : NULL;
    snprintf(key, sizeof key, "%s.bias", prefix);
    t = c->w ? nb__hf_take(w, key, NB_SHAPE(out), dt) : NULL;
    c->b = t ? nb_module_param(&c->base, "bias", t) : NULL;
    if (!c->b) {
        nb_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}

typedef struct {
    nb_module *ln1, *c_attn, *c_proj, *ln2, *c_fc, *mlp_proj;
} gpt2_block;

typedef struct {
    hf_lm lm;
    int64_t embd, heads;
    bool gelu_tanh;
    double embd_pdrop, attn_pdrop, resid_pdrop; /* config.json's dropouts, applied in train mode only */
    nb_module *wte, *wpe, *ln_f;
    nb_tensor *wte_w;
    gpt2_block *block;
} gpt2_model;

static void gpt2_free(nb_module *self) { free(((gpt2_model *)self)->block); }
static const nb_module_class GPT2 = { .name = "GPT2LMHeadModel", .forward = nb__hf_lm_forward, .free = gpt2_free };


/* Dropout with probability p in train mode, as transformers' nn.Dropout modules; in eval mode
   (or p 0) x itself, so evaluation is exactly the deterministic forward. */
static nb_tensor *drop(const gpt2_model *g, nb_tensor *x, double p) {
    return g->lm.base.training && p > 0 ? nb_dropout(x, p, true) : x;
}

/* transformers' "gelu_new": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
static nb_tensor *gelu_tanh(nb_tensor *x) {
    nb_tensor *cube = nb_mul(nb_mul(x, x), x); /* torch.pow(x, 3.0), which torch computes as x * x * x */
    nb_tensor *inner = nb_mul_scalar(nb_add(x, nb_mul_scalar(cube, 0.044715)), sqrt(2.0 / M_PI));
    return nb_mul(nb_mul_scalar(x, 0.5), nb_add_scalar(nb_tanh(inner), 1.0));
}

static nb_tensor *gpt2_step(nb_module *m, nb_tensor *ids, hf_cache *cache, int64_t past, nb_tensor *pos_ids,
                            nb_tensor *key_mask) {
    gpt2_model *g = (gpt2_model *)m;
    if (nb__hf_lm_check_ids(&g->lm, "nb_forward: GPT-2", ids, past) < 0) return NULL;
    int64_t T = nb_dim(ids, 1);
    nb_scope *s = nb_scope_begin();
    nb_tensor *pos = pos_ids ? pos_ids : nb_arange((double)past, (double)(past + T), 1, NB_I64);
    nb_tensor *x = drop(g, nb_add(nb_forward(g->wte, ids), nb_forward(g->wpe, pos)), g->embd_pdrop);
    bool attn_drop = g->lm.base.training && g->attn_pdrop > 0;
    for (int64_t i = 0; i < g->lm.layers && x; i++) {
        nb_scope *ls = nb_scope_begin(); /* one layer's intermediates at a time */
        gpt2_block *b = &g->block[i];
        nb_tensor *qkv = nb_forward(b->c_attn, nb_forward(b->ln1, x));
        nb_tensor *q = nb__hf_split_heads(nb_slice(qkv, 2, 0, g->embd, 1), g->heads);
        nb_tensor *k = nb__hf_split_heads(nb_slice(qkv, 2, g->embd, 2 * g->embd, 1), g->heads);
        nb_tensor *v = nb__hf_split_heads(nb_slice(qkv, 2, 2 * g->embd, 3 * g->embd, 1), g->heads);
        if (cache) { /* the keys and values of the tokens before, then these */
            k = nb__hf_cache_put(cache, i, 0, k, past);
            v = nb__hf_cache_put(cache, i, 1, v, past);
        }
        nb_tensor *a = nb_scaled_dot_product_attention(q, k, v, (nb_attn_opts){ .causal = true, .mask = key_mask,
                                                                      .training = attn_drop,
                                                                      .dropout = attn_drop ? g->attn_pdrop : 0 });
        a = nb__hf_merge_heads(a);
        x = nb_add(x, drop(g, nb_forward(b->c_proj, a), g->resid_pdrop));
        nb_tensor *h = nb_forward(b->c_fc, nb_forward(b->ln2, x));
        h = g->gelu_tanh ? gelu_tanh(h) : nb_gelu(h);
        x = nb__hf_scope_return(ls, nb_add(x, drop(g, nb_forward(b->mlp_proj, h), g->resid_pdrop)));
    }
    return nb__hf_scope_return(s, x ? nb_matmul(nb_forward(g->ln_f, x), nb_transpose(g->wte_w, 0, 1)) : NULL);
}

static bool build_block(gpt2_model *g, hf_weights *w, const char *pre, int64_t i, int64_t inner, double eps,
                        nb_dtype dt, nb_module *list) {
    char name[32], p[160], q[224];
    snprintf(name, sizeof name, "%lld", (long long)i);
    snprintf(p, sizeof p, "%sh.%lld", pre, (long long)i);
    nb_module *blk = nb_module_child(list, name, nb__hf_container("Module"));
    nb_module *attn = blk ? nb_module_child(blk, "attn", nb__hf_container("Module")) : NULL;
    nb_module *mlp = blk ? nb_module_child(blk, "mlp", nb__hf_container("Module")) : NULL;
    if (!attn || !mlp) return false;
    gpt2_block *b = &g->block[i];
    int64_t E = g->embd;
#define PART(dst, parent, nm, path, mk) \
    snprintf(q, sizeof q, "%s.%s", p, path); \
    if (!(dst = nb_module_child(parent, nm, mk))) return false
    PART(b->ln1, blk, "ln_1", "ln_1", nb__hf_layer_norm(w, q, E, eps, dt));
    PART(b->c_attn, attn, "c_attn", "attn.c_attn", conv1d_new(w, q, E, 3 * E, dt));
    PART(b->c_proj, attn, "c_proj", "attn.c_proj", conv1d_new(w, q, E, E, dt));
    PART(b->ln2, blk, "ln_2", "ln_2", nb__hf_layer_norm(w, q, E, eps, dt));
    PART(b->c_fc, mlp, "c_fc", "mlp.c_fc", conv1d_new(w, q, E, inner, dt));
    PART(b->mlp_proj, mlp, "c_proj", "mlp.c_proj", conv1d_new(w, q, inner, E, dt));
#undef PART
    return true;
}

nb_module *nb__hf_gpt2_new(const char *fn, json_t *cfg, hf_weights *w, nb_dtype dt) {
    int64_t vocab, embd, layers, heads, positions, inner;
    double eps;
    if (nb__hf_int(fn, cfg, "vocab_size", 1, INT32_MAX, &vocab) < 0 || nb__hf_int(fn, cfg, "n_embd", 1, 1 << 16, &embd) < 0 ||
        nb__hf_int(fn, cfg, "n_layer", 1, 1024, &layers) < 0 || nb__hf_int(fn, cfg, "n_head", 1, 1024, &heads) < 0 ||
        nb__hf_int(fn, cfg, "n_positions", 1, 1 << 20, &positions) < 0 ||
        nb__hf_num(fn, cfg, "layer_norm_epsilon", 1e-5, HF_POSITIVE, &eps) < 0)
        return NULL;
    double pdrop[3]; /* GPT2Config's defaults: 0.1 each */
    static const char *const pdrop_keys[3] = { "embd_pdrop", "attn_pdrop", "resid_pdrop" };
    for (int i = 0; i < 3; i++)
        if (nb__hf_num(fn, cfg, pdrop_keys[i], 0.1, HF_PROBABILITY, &pdrop[i]) < 0) return NULL;
    json_t *ni = json_object_get(cfg, "n_inner");
    inner = 4 * embd;
    if (ni && !json_is_null(ni) && nb__hf_int(fn, cfg, "n_inner", 1, 1 << 20, &inner) < 0) return NULL;
    if (embd % heads) {
        nb__error("%s: config.json: n_embd %lld is not a multiple of n_head %lld", fn, (long long)embd, (long long)heads);
        return NULL;
    }
    const char *act = nb__hf_str(cfg, "activation_function", "gelu_new");
    bool tanh_gelu = !strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh");
    if (!tanh_gelu && strcmp(act, "gelu")) {
        nb__error("%s: config.json: \"activation_function\" \"%s\" is not supported (gelu_new, gelu_pytorch_tanh, gelu)",
                  fn, act);
        return NULL;
    }
    json_t *tie = json_object_get(cfg, "tie_word_embeddings");
    if ((tie && json_is_false(tie)) || !nb__hf_must_be_false(fn, cfg, "scale_attn_by_inverse_layer_idx") ||
        !nb__hf_must_be_false(fn, cfg, "reorder_and_upcast_attn") ||
        json_is_false(json_object_get(cfg, "scale_attn_weights"))) {
        if (!nb__has_error())
            nb__error("%s: config.json: untied embeddings or unscaled attention are not supported", fn);
        return NULL;
    }
    /* GPT2LMHeadModel's keys start with "transformer.", GPT2Model's do not */
    const char *pre = nb__hf_has(w, "transformer.wte.weight") ? "transformer." : "";
    gpt2_model *g = (gpt2_model *)nb_module_new(&GPT2, sizeof *g);
    if (!g) return NULL;
    g->embd = embd;
    g->heads = heads;
    g->lm.layers = layers;
    g->lm.positions = positions;
    g->lm.vocab = vocab;
    nb__hf_eos(cfg, &g->lm);
    g->lm.step = gpt2_step;
    g->gelu_tanh = tanh_gelu;
    g->embd_pdrop = pdrop[0];
    g->attn_pdrop = pdrop[1];
    g->resid_pdrop = pdrop[2];
    g->block = calloc((size_t)layers, sizeof *g->block);
    char k[160];
    nb_module *tr = g->block ? (*pre ? nb_module_child(&g->lm.base, "transformer", nb__hf_container("Module")) : &g->lm.base) : NULL;
    bool ok = tr != NULL;
    snprintf(k, sizeof k, "%swte", pre);
    ok = ok && (g->wte = nb_module_child(tr, "wte", nb__hf_embedding(w, k, vocab, embd, dt)));
    snprintf(k, sizeof k, "%swpe", pre);
    ok = ok && (g->wpe = nb_module_child(tr, "wpe", nb__hf_embedding(w, k, positions, embd, dt)));
    nb_module *h = ok ? nb_module_child(tr, "h", nb__hf_container("ModuleList")) : NULL;
    ok = h != NULL;
    for (int64_t i = 0; i < layers && ok; i++) ok = build_block(g, w, pre, i, inner, eps, dt, h);
    snprintf(k, sizeof k, "%sln_f", pre);
    ok = ok && (g->ln_f = nb_module_child(tr, "ln_f", nb__hf_layer_norm(w, k, embd, eps, dt)));
    if (!ok) {
        nb_module_free(&g->lm.base);
        return NULL;
    }
    g->wte_w = nb_module_get(g->wte, "weight");
    return &g->lm.base;
}
