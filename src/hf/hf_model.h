/* Internals of the Hugging Face model loader (src/hf/checkpoint.c, bert.c, load.c): a
   checkpoint's tensors viewed in its mapped safetensors files, taken by name as the
   architecture is built, and the small layer modules the architectures share. Not installed. */
#ifndef NB_HF_MODEL_H
#define NB_HF_MODEL_H

#include "../io/io_impl.h"
#include "../ops/ops_impl.h"
#include <jansson.h>
#include <string.h>

/* A checkpoint folder's weights: model.safetensors, or the shards its index names. */
typedef struct hf_weights hf_weights;

/* Opens dir's weights (maps every file copy-on-write); NULL with an error naming the file. */
hf_weights *nb__hf_weights_open(const char *fn, const char *dir);
/* Takes the tensor called name, which must have the given shape: a view of the mapping when
   its dtype is dtype, else a converted copy (owned). NULL with an error naming the key (missing,
   or its shape or dtype). Each key can be taken once. */
nb_tensor *nb__hf_take(hf_weights *w, const char *name, nb_shape shape, nb_dtype dtype);
/* Whether the checkpoint has a key. */
bool nb__hf_has(const hf_weights *w, const char *name);
/* Checks that every key was taken but those the predicate accepts as ignorable; an error lists
   the first few unexpected keys with their file. 0 or -1. */
int nb__hf_check_all_taken(hf_weights *w, bool (*ignorable)(const char *name));
/* Closes the files; views taken keep their mapping alive until they go. */
void nb__hf_weights_close(hf_weights *w);

/* ---- config.json fields (errors name the file and the field) ---- */
/* An integer field, which must be present and in [lo, hi]. 0 or -1. */
int nb__hf_int(const char *fn, json_t *cfg, const char *key, int64_t lo, int64_t hi, int64_t *out);
/* What a number field of config.json may hold: every one is finite, and besides */
typedef enum { HF_POSITIVE, HF_PROBABILITY, HF_ABOVE_ONE } hf_range; /* > 0; in [0, 1); > 1 */
/* A number field in range (an error naming the field and the value otherwise), or def when
   absent. 0 or -1. */
int nb__hf_num(const char *fn, json_t *cfg, const char *key, double def, hf_range range, double *out);
/* A string field, or def when absent (borrowed from cfg). */
const char *nb__hf_str(json_t *cfg, const char *key, const char *def);

/* ---- layers with their weights given (Hugging Face's parameter names) ---- */
/* A container module (no forward of its own) of the named class. */
nb_module *nb__hf_container(const char *cls_name);
/* Linear: weight [out, in] (and bias [out] when bias) taken as prefix.weight / prefix.bias. */
nb_module *nb__hf_linear(hf_weights *w, const char *prefix, int64_t in, int64_t out, bool bias, nb_dtype dt);
/* Layer norm over the last axis with prefix.weight and prefix.bias, eps. */
nb_module *nb__hf_layer_norm(hf_weights *w, const char *prefix, int64_t dim, double eps, nb_dtype dt);
/* Embedding table prefix.weight [num, dim]. */
nb_module *nb__hf_embedding(hf_weights *w, const char *prefix, int64_t num, int64_t dim, nb_dtype dt);
/* [B, T, E] -> [B, heads, T, E / heads], the attention's layout. */
nb_tensor *nb__hf_split_heads(nb_tensor *x, int64_t heads);
/* [B, heads, T, d] -> [B, T, heads * d], back from the attention's layout. */
nb_tensor *nb__hf_merge_heads(nb_tensor *x);
/* Ends scope s, handing x (made inside it, or NULL) to the scope around it. */
nb_tensor *nb__hf_scope_return(nb_scope *s, nb_tensor *x);

/* ---- the architectures ---- */
/* BERT-family encoders (BertModel: BERT, MiniLM) from config.json; NULL with the error. */
nb_module *nb__hf_bert_new(const char *fn, json_t *cfg, hf_weights *w, nb_dtype dt);
/* Whether m is a BERT model that nb__hf_bert_new made. */
bool nb__hf_is_bert(const nb_module *m);
/* A BERT model's max_position_embeddings. */
int64_t nb__hf_positions(const nb_module *m);
/* A generation's key/value cache: per layer, keys and values [B, kv heads, cap, head size],
   made at the first step (NULL before; owned) and written in place, so a step copies only its
   own keys and values (appending by concatenation copied all of them, O(T^2) over a run). */
typedef struct hf_cache {
    nb_tensor **kv; /* 2 per layer */
    int64_t cap;    /* positions the cache holds: prompt and new tokens */
} hf_cache;

/* Writes x [B, H, T, d] (a layer's new keys, which = 0, or values, 1) at positions past..
   past + T - 1 of layer's cache and returns a view of its first past + T positions; NULL with
   the error (past + T beyond the capacity). */
nb_tensor *nb__hf_cache_put(hf_cache *c, int64_t layer, int which, nb_tensor *x, int64_t past);

/* What generation needs of a causal LM: the first member of each one's struct. A causal LM's
   class has nb__hf_lm_forward as its forward, which is how nb__hf_lm knows one. */
typedef struct hf_lm {
    nb_module base;
    int64_t layers, positions, vocab;
    int64_t eos[8]; /* config.json's eos_token_id, one or a list (Llama 3's has three) */
    int neos;
    /* The logits [B, T, vocab] for ids [B, T] at positions past.. past + T - 1 (or pos_ids [B, T]
       i64); with cache (or NULL) the new keys and values are written into it and attention reads
       the first past + T of it; key_mask [B, 1, 1, past + T] (or NULL) masks keys out (left
       padding: added to the attention scores, merged with a sliding window's by the minimum). */
    nb_tensor *(*step)(nb_module *m, nb_tensor *ids, hf_cache *cache, int64_t past, nb_tensor *pos_ids,
                       nb_tensor *key_mask);
} hf_lm;
/* The forward of every causal LM class: its step over all of ids, no cache (logits [B, T, vocab]). */
nb_tensor *nb__hf_lm_forward(nb_module *m, nb_tensor *ids);
/* m as a causal LM that nb_hf_load made, or NULL. */
hf_lm *nb__hf_lm(const nb_module *m);
/* Checks that ids are [B, T] and that past + T fit the LM's positions; fn names the caller. 0 or -1. */
int nb__hf_lm_check_ids(const hf_lm *lm, const char *fn, nb_tensor *ids, int64_t past);
/* config.json's eos_token_id, an id or a list, into lm->eos (the ids below vocab, at most 8). */
void nb__hf_eos(json_t *cfg, hf_lm *lm);
/* A boolean config field that must be false (or absent): nabla does not implement it. */
bool nb__hf_must_be_false(const char *fn, json_t *cfg, const char *key);

/* GPT-2 (GPT2LMHeadModel or GPT2Model keys) from config.json; NULL with the error. */
nb_module *nb__hf_gpt2_new(const char *fn, json_t *cfg, hf_weights *w, nb_dtype dt);
/* Llama-family decoders (LlamaForCausalLM keys) from config.json, or Mistral's (the same with a
   sliding window); NULL with the error. */
nb_module *nb__hf_llama_new(const char *fn, json_t *cfg, hf_weights *w, nb_dtype dt, bool mistral);
/* RMS norm over the last axis with prefix.weight, eps (class "LlamaRMSNorm"). */
nb_module *nb__hf_rms_norm(hf_weights *w, const char *prefix, int64_t dim, double eps, nb_dtype dt);

#endif
