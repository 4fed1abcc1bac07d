/* Llama-family decoders as transformers' LlamaForCausalLM builds them: token embeddings; pre-norm
   blocks of RMSNorm, grouped-query causal self-attention with rotary position embeddings, and a
   SiLU-gated MLP (down(silu(gate(x)) * up(x))); a final RMSNorm and the LM head, tied to the
   embeddings when the config says. Mistral (MistralForCausalLM) is the same with each query
   seeing only the last sliding_window keys. Parameter names as in the checkpoint
   (model.layers.0.self_attn.q_proj.weight, ...). Runs with a key/value cache for generation
   (src/hf/generate.c); the cache holds the keys after rotation, kv heads only. */
#include "hf_model.h"
#include "nabla/hf.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

typedef struct {
    nb_module *ln1, *q, *k, *v, *o, *ln2, *gate, *up, *down;
} llama_block;

typedef struct {
    hf_lm lm;
    int64_t hidden, heads, kv_heads, head_dim;
    int64_t window; /* Mistral's sliding window: a query at i sees keys i - window..i, as transformers
                       4.40 builds the mask (window + 1 keys with its own; 0: all) */
    double attn_dropout;
    nb_rope_opts rope;
    nb_module *embed, *norm, *head; /* head NULL: tied to embed */
    nb_tensor *embed_w;
    llama_block *block;
} llama_model;

static void llama_free(nb_module *self) { free(((llama_model *)self)->block); }
static const nb_module_class LLAMA = { .name = "LlamaForCausalLM", .forward = nb__hf_lm_forward, .free = llama_free };
static const nb_module_class MISTRAL = { .name = "MistralForCausalLM", .forward = nb__hf_lm_forward, .free = llama_free };


/* The keys a sliding window hides from queries past.. past + T - 1 of past + T keys, as a mask
   [1, 1, T, past + T] (lowest float where hidden), merged with key_mask [B, 1, 1, past + T] (or
   NULL) by the minimum, as transformers merges them: a sum could make -inf and a row of NaN.
   key_mask itself when the window hides nothing. */
static nb_tensor *window_mask(int64_t window, int64_t past, int64_t T, nb_tensor *key_mask) {
    int64_t Tk = past + T;
    if (window <= 0 || Tk <= window) return key_mask;
    float *m = malloc(sizeof(float) * (size_t)(T * Tk));
    if (!m) {
        nb__error("nb_forward: out of memory for a sliding-window mask");
        return NULL;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < Tk; j++) m[t * Tk + j] = j < past + t - window ? -FLT_MAX : 0.0f;
    nb_tensor *w = nb_from_data(m, NB_SHAPE(1, 1, T, Tk), NB_F32);
    free(m);
    return key_mask ? nb_minimum(w, key_mask) : w;
}

/* Causal attention of q [B, H, T, d] over k, v [B, Hkv, Tk, d], query head h reading kv head
   h / (H / Hkv) as transformers' repeat_kv, without copying the kv heads: the H / Hkv query heads
   of a group become an axis that broadcasts against the group's one kv head. */
static nb_tensor *grouped_attention(const llama_model *l, nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_tensor *key_mask,
                                    bool training) {
    int64_t B = nb_dim(q, 0), T = nb_dim(q, 2), rep = l->heads / l->kv_heads, d = l->head_dim;
    nb_attn_opts o = { .mask = key_mask, .causal = true, .dropout = l->attn_dropout, .training = training };
    if (rep == 1) return nb_scaled_dot_product_attention(q, k, v, o);
    nb_tensor *a;
    if (T == 1) { /* one query a row: the group's queries are rows of one product, none masked by another */
        o.causal = false; /* the mask, [B or 1, 1, 1, Tk], broadcasts over the group's rows */
        a = nb_scaled_dot_product_attention(nb_reshape(q, NB_SHAPE(B, l->kv_heads, rep, d)), k, v, o);
    } else {
        if (key_mask) o.mask = nb_unsqueeze(key_mask, 1);
        a = nb_scaled_dot_product_attention(nb_reshape(q, NB_SHAPE(B, l->kv_heads, rep, T, d)), nb_unsqueeze(k, 2),
                                            nb_unsqueeze(v, 2), o);
    }
    return nb_reshape(a, NB_SHAPE(B, l->heads, T, d));
}

static nb_tensor *llama_step(nb_module *m, nb_tensor *ids, hf_cache *cache, int64_t past, nb_tensor *pos_ids,
                             nb_tensor *key_mask) {
    llama_model *l = (llama_model *)m;
    if (nb__hf_lm_check_ids(&l->lm, "nb_forward: Llama", ids, past) < 0) return NULL;
    int64_t T = nb_dim(ids, 1);
    bool training = m->training;
    nb_scope *s = nb_scope_begin();
    nb_tensor *pos = pos_ids ? pos_ids : nb_arange((double)past, (double)(past + T), 1, NB_I64);
    nb_tensor *x = nb_forward(l->embed, ids);
    key_mask = window_mask(l->window, past, T, key_mask);
    /* the rotary tables of these positions, once for every layer's queries and keys */
    nb_tensor *cos = NULL, *sin = NULL;
    if (x && nb__rotary_tables(4, l->head_dim, pos, l->rope, nb_dtype_of(x), &cos, &sin) < 0) x = NULL;
    if (l->window > 0 && past + T > l->window && !key_mask) x = NULL;
    for (int64_t i = 0; i < l->lm.layers && x; i++) {
        nb_scope *ls = nb_scope_begin(); /* one layer's intermediates at a time */
        llama_block *b = &l->block[i];
        nb_tensor *h = nb_forward(b->ln1, x);
        nb_tensor *q = nb__rotary_apply(nb__hf_split_heads(nb_forward(b->q, h), l->heads), cos, sin);
        nb_tensor *k = nb__rotary_apply(nb__hf_split_heads(nb_forward(b->k, h), l->kv_heads), cos, sin);
        nb_tensor *v = nb__hf_split_heads(nb_forward(b->v, h), l->kv_heads);
        if (cache) { /* the keys and values of the tokens before, then these */
            k = nb__hf_cache_put(cache, i, 0, k, past);
            v = nb__hf_cache_put(cache, i, 1, v, past);
        }
        nb_tensor *a = q && k && v ? grouped_attention(l, q, k, v, key_mask, training) : NULL;
        a = nb__hf_merge_heads(a);
        x = nb_add(x, nb_forward(b->o, a));
        h = nb_forward(b->ln2, x);
        x = nb__hf_scope_return(ls, nb_add(x, nb_forward(b->down, nb_mul(nb_silu(nb_forward(b->gate, h)), nb_forward(b->up, h)))));
    }
    x = x ? nb_forward(l->norm, x) : NULL;
    nb_tensor *logits = !x ? NULL : l->head ? nb_forward(l->head, x) : nb_matmul(x, nb_transpose(l->embed_w, 0, 1));
    return nb__hf_scope_return(s, logits);
}

static bool build_block(llama_model *l, hf_weights *w, const char *pre, int64_t i, int64_t inter, double eps, bool bias,
                        nb_dtype dt, nb_module *list) {
    char name[32], p[160], q[224];
    snprintf(name, sizeof name, "%lld", (long long)i);
    snprintf(p, sizeof p, "%slayers.%lld", pre, (long long)i);
    nb_module *blk = nb_module_child(list, name, nb__hf_container("LlamaDecoderLayer"));
    nb_module *attn = blk ? nb_module_child(blk, "self_attn", nb__hf_container("LlamaAttention")) : NULL;
    nb_module *mlp = blk ? nb_module_child(blk, "mlp", nb__hf_container("LlamaMLP")) : NULL;
    if (!attn || !mlp) return false;
    llama_block *b = &l->block[i];
    int64_t E = l->hidden, Q = l->heads * l->head_dim, KV = l->kv_heads * l->head_dim;
#define PART(dst, parent, nm, path, mk) \
    snprintf(q, sizeof q, "%s.%s", p, path); \
    if (!(dst = nb_module_child(parent, nm, mk))) return false
    PART(b->ln1, blk, "input_layernorm", "input_layernorm", nb__hf_rms_norm(w, q, E, eps, dt));
    PART(b->q, attn, "q_proj", "self_attn.q_proj", nb__hf_linear(w, q, E, Q, bias, dt));
    PART(b->k, attn, "k_proj", "self_attn.k_proj", nb__hf_linear(w, q, E, KV, bias, dt));
    PART(b->v, attn, "v_proj", "self_attn.v_proj", nb__hf_linear(w, q, E, KV, bias, dt));
    PART(b->o, attn, "o_proj", "self_attn.o_proj", nb__hf_linear(w, q, Q, E, bias, dt));
    PART(b->ln2, blk, "post_attention_layernorm", "post_attention_layernorm", nb__hf_rms_norm(w, q, E, eps, dt));
    PART(b->gate, mlp, "gate_proj", "mlp.gate_proj", nb__hf_linear(w, q, E, inter, false, dt));
    PART(b->up, mlp, "up_proj", "mlp.up_proj", nb__hf_linear(w, q, E, inter, false, dt));
    PART(b->down, mlp, "down_proj", "mlp.down_proj", nb__hf_linear(w, q, inter, E, false, dt));
#undef PART
    return true;
}

/* rope_scaling: null, or linear scaling ({"type" or "rope_type": "linear", "factor": f}), the
   kinds transformers 4.40 computes; the others (dynamic, llama3, yarn, ...) are refused by name. */
static int rope_scaling(const char *fn, json_t *cfg, nb_rope_opts *o) {
    json_t *rs = json_object_get(cfg, "rope_scaling");
    if (!rs || json_is_null(rs)) return 0;
    const char *type = json_string_value(json_object_get(rs, "rope_type"));
    if (!type) type = json_string_value(json_object_get(rs, "type"));
    json_t *f = json_object_get(rs, "factor");
    if (!type || strcmp(type, "linear") || !json_is_number(f) || !(json_number_value(f) > 0) || !isfinite(json_number_value(f))) {
        nb__error("%s: config.json: \"rope_scaling\" of type \"%s\" is not supported (null, or \"linear\" with a factor above 0)",
                  fn, type ? type : "(none)");
        return -1;
    }
    o->scale = json_number_value(f);
    return 0;
}

nb_module *nb__hf_llama_new(const char *fn, json_t *cfg, hf_weights *w, nb_dtype dt, bool mistral) {
    int64_t vocab, hidden, inter, layers, heads, kv_heads, positions;
    double eps, theta, attn_drop;
    if (nb__hf_int(fn, cfg, "vocab_size", 1, INT32_MAX, &vocab) < 0 ||
        nb__hf_int(fn, cfg, "hidden_size", 1, 1 << 16, &hidden) < 0 ||
        nb__hf_int(fn, cfg, "intermediate_size", 1, 1 << 20, &inter) < 0 ||
        nb__hf_int(fn, cfg, "num_hidden_layers", 1, 1024, &layers) < 0 ||
        nb__hf_int(fn, cfg, "num_attention_heads", 1, 1024, &heads) < 0 ||
        nb__hf_int(fn, cfg, "max_position_embeddings", 1, 1 << 24, &positions) < 0 ||
        nb__hf_num(fn, cfg, "rms_norm_eps", 1e-6, HF_POSITIVE, &eps) < 0 ||
        nb__hf_num(fn, cfg, "rope_theta", 10000, HF_ABOVE_ONE, &theta) < 0 ||
        nb__hf_num(fn, cfg, "attention_dropout", 0, HF_PROBABILITY, &attn_drop) < 0)
        return NULL;
    kv_heads = heads;
    json_t *kv = json_object_get(cfg, "num_key_value_heads");
    if (kv && !json_is_null(kv) && nb__hf_int(fn, cfg, "num_key_value_heads", 1, heads, &kv_heads) < 0) return NULL;
    if (hidden % heads || heads % kv_heads || (hidden / heads) % 2) {
        nb__error("%s: config.json: hidden_size %lld, num_attention_heads %lld and num_key_value_heads %lld do not fit "
                  "(the heads must divide the width into an even head size, the kv heads the heads)",
                  fn, (long long)hidden, (long long)heads, (long long)kv_heads);
        return NULL;
    }
    json_t *hd = json_object_get(cfg, "head_dim");
    if (hd && !json_is_null(hd) && json_integer_value(hd) != hidden / heads) {
        nb__error("%s: config.json: \"head_dim\" other than hidden_size / num_attention_heads (%lld) is not supported", fn,
                  (long long)(hidden / heads));
        return NULL;
    }
    const char *act = nb__hf_str(cfg, "hidden_act", "silu");
    if (strcmp(act, "silu")) {
        nb__error("%s: config.json: \"hidden_act\" \"%s\" is not supported (silu)", fn, act);
        return NULL;
    }
    int64_t window = 0;
    json_t *sw = json_object_get(cfg, "sliding_window");
    if (mistral && sw && !json_is_null(sw) && nb__hf_int(fn, cfg, "sliding_window", 1, INT64_MAX, &window) < 0) return NULL;
    if (!mistral && sw && !json_is_null(sw)) {
        nb__error("%s: config.json: \"sliding_window\" is not a Llama field (model_type \"mistral\" has one)", fn);
        return NULL;
    }
    nb_rope_opts rope = { .theta = theta, .scale = 1 };
    if (rope_scaling(fn, cfg, &rope) < 0 || !nb__hf_must_be_false(fn, cfg, "mlp_bias")) return NULL;
    bool bias = json_is_true(json_object_get(cfg, "attention_bias"));
    bool tied = json_is_true(json_object_get(cfg, "tie_word_embeddings")); /* LlamaConfig's default is false */
    /* LlamaForCausalLM's keys start with "model." */
    const char *pre = nb__hf_has(w, "model.embed_tokens.weight") ? "model." : "";
    llama_model *l = (llama_model *)nb_module_new(mistral ? &MISTRAL : &LLAMA, sizeof *l);
    if (!l) return NULL;
    l->lm.layers = layers;
    l->lm.positions = positions;
    l->lm.vocab = vocab;
    nb__hf_eos(cfg, &l->lm);
    l->lm.step = llama_step;
    l->hidden = hidden;
    l->heads = heads;
    l->kv_heads = kv_heads;
    l->head_dim = hidden / heads;
    l->attn_dropout = attn_drop;
    l->window = window;
    l->rope = rope;
    l->block = calloc((size_t)layers, sizeof *l->block);
    char k[160];
    nb_module *mdl = l->block ? (*pre ? nb_module_child(&l->lm.base, "model", nb__hf_container("LlamaModel")) : &l->lm.base)
                              : NULL;
    bool ok = mdl != NULL;
    snprintf(k, sizeof k, "%sembed_tokens", pre);
    ok = ok && (l->embed = nb_module_child(mdl, "embed_tokens", nb__hf_embedding(w, k, vocab, hidden, dt)));
    nb_module *list = ok ? nb_module_child(mdl, "layers", nb__hf_container("ModuleList")) : NULL;
    ok = list != NULL;
    for (int64_t i = 0; i < layers && ok; i++) ok = build_block(l, w, pre, i, inter, eps, bias, dt, list);
    snprintf(k, sizeof k, "%snorm", pre);
    ok = ok && (l->norm = nb_module_child(mdl, "norm", nb__hf_rms_norm(w, k, hidden, eps, dt)));
    if (ok && !tied) ok = (l->head = nb_module_child(&l->lm.base, "lm_head", nb__hf_linear(w, "lm_head", hidden, vocab, false, dt)));
    else if (ok && nb__hf_has(w, "lm_head.weight")) /* tied, the head saved anyway: the embedding serves, as in transformers */
        nb_release(nb__hf_take(w, "lm_head.weight", NB_SHAPE(vocab, hidden), dt));
    if (!ok) {
        nb_module_free(&l->lm.base);
        return NULL;
    }
    l->embed_w = nb_module_get(l->embed, "weight");
    return &l->lm.base;
}
