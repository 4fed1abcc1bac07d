/* nb_hf_load: a Hugging Face checkpoint folder (config.json and model.safetensors or its
   shards) to a module of the architecture its config names, the weights viewed in the mapped
   files; and nb_hf_embed, sentence embeddings of texts as sentence-transformers makes them. */
#include "hf_model.h"
#include "hub.h"
#include "nabla/hf.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Whether name ends in suffix. */
static bool ends_with(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && !strcmp(name + n - k, suffix);
}

/* Keys a checkpoint may carry that no architecture reads: the position ids older transformers
   saved as a buffer (a constant arange). */
static bool ignorable(const char *name) { return ends_with(name, "embeddings.position_ids"); }

/* GPT-2's too: the causal-mask buffers of older checkpoints (attn.bias, attn.masked_bias), and
   lm_head.weight where it was saved beside the token embedding it is tied to. */
static bool ignorable_gpt2(const char *name) {
    return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") || !strcmp(name, "lm_head.weight");
}

/* Llama's: the rotary frequencies older checkpoints saved as a buffer. */
static bool ignorable_llama(const char *name) { return ends_with(name, ".rotary_emb.inv_freq"); }

nb_module *nb_hf_load(const char *dir, nb_hf_opts opts) {
    const char *fn = "nb_hf_load";
    if (!dir) {
        nb__error("%s: dir is NULL", fn);
        return NULL;
    }
    char resolved[NB__HF_DIR_MAX];
    if (nb__hf_resolve(fn, dir, resolved, sizeof resolved) < 0) return NULL;
    dir = resolved;
    nb_dtype dt = opts.dtype;
    if (!nb__dtype_ok(fn, dt)) return NULL;
    if (dt != NB_F32 && dt != NB_F64) {
        nb__error("%s: dtype %s is not supported (f32 or f64: nabla computes products in those)", fn, nb_dtype_name(dt));
        return NULL;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!cfg) {
        nb__error("%s: %s: %s (line %d)", fn, path, je.text, je.line);
        return NULL;
    }
    if (!json_is_object(cfg)) {
        nb__error("%s: %s is not a JSON object", fn, path);
        json_decref(cfg);
        return NULL;
    }
    const char *type = nb__hf_str(cfg, "model_type", NULL);
    nb_module *m = NULL;
    if (!type) nb__error("%s: %s has no \"model_type\"", fn, path);
    else if (strcmp(type, "bert") && strcmp(type, "gpt2") && strcmp(type, "llama") && strcmp(type, "mistral")) {
        nb__error("%s: %s: \"model_type\" \"%s\" is not supported (bert, gpt2, llama, mistral)", fn, path, type);
    } else {
        hf_weights *w = nb__hf_weights_open(fn, dir);
        bool gpt2 = !strcmp(type, "gpt2"), mistral = !strcmp(type, "mistral"), llama = mistral || !strcmp(type, "llama");
        if (w) {
            m = gpt2    ? nb__hf_gpt2_new(fn, cfg, w, dt)
                : llama ? nb__hf_llama_new(fn, cfg, w, dt, mistral)
                        : nb__hf_bert_new(fn, cfg, w, dt);
            if (m && nb__hf_check_all_taken(w, gpt2 ? ignorable_gpt2 : llama ? ignorable_llama : ignorable) < 0) {
                nb_module_free(m);
                m = NULL;
            }
            nb__hf_weights_close(w);
        }
    }
    if (m) nb_module_train(m, false); /* as from_pretrained: eval mode */
    json_decref(cfg);
    return m;
}

/* The longest input sentence-transformers feeds the model (sentence_bert_config.json's
   max_seq_length), else the model's positions. */
static int64_t max_tokens(const char *dir, int64_t positions) {
    char folder[NB__HF_DIR_MAX], path[NB__HF_DIR_MAX + 32];
    if (!dir || nb__hf_resolve("nb_hf_embed", dir, folder, sizeof folder) < 0) {
        nb_error_clear(); /* no folder: the model's own limit, as without model_dir */
        return positions;
    }
    snprintf(path, sizeof path, "%s/sentence_bert_config.json", folder);
    json_t *c = json_load_file(path, 0, NULL);
    json_t *v = c ? json_object_get(c, "max_seq_length") : NULL;
    int64_t n = json_is_integer(v) ? json_integer_value(v) : positions;
    json_decref(c);
    return n > 0 && n < positions ? n : positions;
}

/* Encodes the k texts order[0..k) (token ids ids[i], len[i]) padded to the longest of them, and
   writes each one's pooled, normalised embedding into row order[j] of out [n, H] (elem bytes a
   value). 0 or -1. */
static int embed_batch(nb_module *m, int64_t *const *ids, const int64_t *len, const int *order, int k, int64_t pad,
                       char *out, size_t row_bytes) {
    int64_t longest = 1;
    for (int j = 0; j < k; j++) longest = len[order[j]] > longest ? len[order[j]] : longest;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_full(NB_SHAPE(k, longest), (double)pad, NB_I64);
    nb_tensor *mask = nb_zeros(NB_SHAPE(k, longest), NB_I64);
    int64_t *xp = x ? nb_data_ptr(x) : NULL, *mp = mask ? nb_data_ptr(mask) : NULL;
    for (int j = 0; xp && mp && j < k; j++)
        for (int64_t t = 0; t < len[order[j]]; t++) {
            xp[j * longest + t] = ids[order[j]][t];
            mp[j * longest + t] = 1;
        }
    nb_tensor *h = xp && mp ? nb_hf_encode(m, x, mask, NULL) : NULL;
    nb_tensor *e = h ? nb_contiguous(nb_hf_mean_pool(h, mask, true)) : NULL;
    const char *ep = e ? nb_data_ptr(e) : NULL;
    for (int j = 0; ep && j < k; j++) memcpy(out + (size_t)order[j] * row_bytes, ep + (size_t)j * row_bytes, row_bytes);
    nb_scope_end(s);
    return ep ? 0 : -1;
}

typedef struct {
    int64_t len;
    int text;
} text_len;

/* The characters of a UTF-8 text (bytes that do not continue one), the length
   sentence-transformers sorts by (len() of the str). */
static int64_t characters(const char *t) {
    int64_t n = 0;
    for (; *t; t++) n += ((unsigned char)*t & 0xC0) != 0x80;
    return n;
}

/* Longest first, as sentence-transformers' encode orders its batches; ties in input order. */
static int by_length(const void *a, const void *b) {
    const text_len *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return (x->text > y->text) - (x->text < y->text);
}

nb_tensor *nb_hf_embed(nb_module *m, nb_tokenizer *tok, const char *const *texts, int n, nb_hf_embed_opts opts) {
    const char *fn = "nb_hf_embed";
    if (!nb__hf_is_bert(m)) {
        nb__error("%s: the module is not an encoder (BERT-family) that nb_hf_load made", fn);
        return NULL;
    }
    if (!tok || !texts || n < 1) {
        nb__error("%s: needs a tokenizer and at least one text", fn);
        return NULL;
    }
    if (opts.batch_size < 0) {
        nb__error("%s: batch_size %lld is negative", fn, (long long)opts.batch_size);
        return NULL;
    }
    /* the special tokens need 2; past the model's positions the encoder would refuse the batch
       (and the buffers below are sized by it) */
    if (opts.max_tokens < 0 || opts.max_tokens == 1 || opts.max_tokens > nb__hf_positions(m)) {
        nb__error("%s: max_tokens %lld is outside 2 to %lld, the model's positions (or 0: the default)", fn,
                  (long long)opts.max_tokens, (long long)nb__hf_positions(m));
        return NULL;
    }
    int batch = opts.batch_size > 0 && opts.batch_size < n ? (int)opts.batch_size : opts.batch_size > 0 ? n : 32;
    int64_t limit = opts.max_tokens > 0 ? opts.max_tokens : max_tokens(opts.model_dir, nb__hf_positions(m));
    if (limit < 2) limit = 2; /* room for the special tokens at least */
    int64_t pad = opts.pad_id;
    int64_t **ids = calloc((size_t)n, sizeof *ids);
    int64_t *len = calloc((size_t)n, sizeof *len);
    int *order = malloc(sizeof(int) * (size_t)n);
    text_len *sorted = malloc(sizeof *sorted * (size_t)n);
    bool ok = ids && len && order && sorted;
    if (!ok) nb__error("%s: out of memory", fn);
    for (int i = 0; i < n && ok; i++) {
        if (!texts[i]) {
            nb__error("%s: text %d is NULL", fn, i);
            ok = false;
            break;
        }
        /* into a buffer of the longest input: a second pass only for a text that is longer */
        nb_tokenize_opts to = { .no_padding = true, .no_truncation = true };
        size_t tl = strlen(texts[i]);
        ids[i] = malloc(sizeof(int64_t) * (size_t)limit);
        int64_t c = ids[i] ? nb_tokenize_ex(tok, texts[i], tl, ids[i], limit, to) : -1;
        if (c > limit && c <= INT32_MAX) {
            int64_t *big = realloc(ids[i], sizeof(int64_t) * (size_t)c);
            if (big) ids[i] = big;
            c = big && nb_tokenize_ex(tok, texts[i], tl, ids[i], c, to) == c ? c : -1;
            if (!big) nb__error("%s: out of memory", fn);
        } else if (c > limit) {
            nb__error("%s: text %d has %lld tokens", fn, i, (long long)c);
            c = -1;
        }
        if (c < 0) {
            if (!ids[i]) nb__error("%s: out of memory", fn);
            ok = false;
            break;
        }
        /* truncation as transformers does it for one sequence: the text is cut, the closing
           special token ([SEP]) kept */
        if (c > limit) {
            ids[i][limit - 1] = ids[i][c - 1];
            c = limit;
        }
        len[i] = c;
        sorted[i] = (text_len){ characters(texts[i]), i };
    }
    nb_tensor *out = NULL;
    if (ok) {
        /* batches of texts of similar length pad least: sort, encode a batch at a time, and put
           each row back in its text's place */
        qsort(sorted, (size_t)n, sizeof *sorted, by_length);
        for (int i = 0; i < n; i++) order[i] = sorted[i].text;
        nb_tensor *table = nb_module_get(m, "embeddings.word_embeddings.weight"); /* [vocab, H] */
        int64_t H = nb_dim(table, 1);
        nb_dtype dt = nb_dtype_of(table);
        out = nb_empty(NB_SHAPE(n, H), dt);
        size_t row = (size_t)H * nb_dtype_size(dt);
        bool grad = nb_set_grad_enabled(false); /* inference, as encode's torch.no_grad() */
        for (int i = 0; out && i < n; i += batch)
            if (embed_batch(m, ids, len, order + i, n - i < batch ? n - i : batch, pad, nb_data_ptr(out), row) < 0) {
                nb_release(out);
                out = NULL;
            }
        nb_set_grad_enabled(grad);
    }
    for (int i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
    free(len);
    free(order);
    free(sorted);
    return out;
}
