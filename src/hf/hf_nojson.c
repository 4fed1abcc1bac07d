/* nabla/hf.h in a build without jansson (NABLA_WITH_JSON=OFF): config.json, tokenizer.json and
   the shard index are JSON, so no model or tokenizer can be made and src/hf/ is left out; each
   function that can fail says why, the queries answer as for a NULL model or tokenizer. */
#include "../core/core_impl.h"
#include "nabla/hf.h"

#define OFF(fn) NB__NO_JSON(fn, "Hugging Face checkpoints and tokenizers (config.json, tokenizer.json)")

nb_tokenizer *nb_tokenizer_load(const char *path) {
    (void)path;
    OFF("nb_tokenizer_load");
    return NULL;
}

nb_tokenizer *nb_tokenizer_from_json(const char *json, size_t len) {
    (void)json; (void)len;
    OFF("nb_tokenizer_from_json");
    return NULL;
}

void nb_tokenizer_free(nb_tokenizer *t) { (void)t; }

int64_t nb_tokenize_ex(nb_tokenizer *t, const char *text, size_t len, int64_t *ids, int64_t cap, nb_tokenize_opts opts) {
    (void)t; (void)text; (void)len; (void)ids; (void)cap; (void)opts;
    OFF("nb_tokenize");
    return -1;
}

int64_t nb_tokenize(nb_tokenizer *t, const char *text, int64_t *ids, int64_t cap) {
    return nb_tokenize_ex(t, text, 0, ids, cap, (nb_tokenize_opts){ 0 });
}

char *nb_detokenize_ex(nb_tokenizer *t, const int64_t *ids, int64_t n, nb_detokenize_opts opts) {
    (void)t; (void)ids; (void)n; (void)opts;
    OFF("nb_detokenize");
    return NULL;
}

char *nb_detokenize(nb_tokenizer *t, const int64_t *ids, int64_t n) {
    return nb_detokenize_ex(t, ids, n, (nb_detokenize_opts){ 0 });
}

int64_t nb_tokenizer_vocab_size(const nb_tokenizer *t) { (void)t; return 0; }
int64_t nb_token_to_id(const nb_tokenizer *t, const char *token) { (void)t; (void)token; return -1; }

const char *nb_id_to_token(const nb_tokenizer *t, int64_t id) {
    (void)t; (void)id;
    OFF("nb_id_to_token");
    return NULL;
}

nb_module *nb_hf_load(const char *dir, nb_hf_opts opts) {
    (void)dir; (void)opts;
    OFF("nb_hf_load");
    return NULL;
}

nb_tensor *nb_hf_encode(nb_module *m, nb_tensor *ids, nb_tensor *attention_mask, nb_tensor *token_type_ids) {
    (void)m; (void)ids; (void)attention_mask; (void)token_type_ids;
    OFF("nb_hf_encode");
    return NULL;
}

nb_tensor *nb_hf_mean_pool(nb_tensor *hidden, nb_tensor *attention_mask, bool normalize) {
    (void)hidden; (void)attention_mask; (void)normalize;
    OFF("nb_hf_mean_pool");
    return NULL;
}

nb_tensor *nb_hf_embed(nb_module *m, nb_tokenizer *tok, const char *const *texts, int n, nb_hf_embed_opts opts) {
    (void)m; (void)tok; (void)texts; (void)n; (void)opts;
    OFF("nb_hf_embed");
    return NULL;
}

bool nb_hf_is_causal_lm(const nb_module *m) { (void)m; return false; }
int64_t nb_hf_eos_id(const nb_module *lm) { (void)lm; return -1; }
int nb_hf_eos_ids(const nb_module *lm, int64_t *ids, int cap) { (void)lm; (void)ids; (void)cap; return 0; }

nb_tensor *nb_generate(nb_module *lm, nb_tensor *ids, nb_generate_opts opts) {
    (void)lm; (void)ids; (void)opts;
    OFF("nb_generate");
    return NULL;
}

nb_tensor *nb_hf_causal_lm_loss(nb_tensor *logits, nb_tensor *ids) {
    (void)logits; (void)ids;
    OFF("nb_hf_causal_lm_loss");
    return NULL;
}

nb_tensor *nb_hf_text_blocks(nb_tokenizer *tok, const char *text, size_t len, int64_t block) {
    (void)tok; (void)text; (void)len; (void)block;
    OFF("nb_hf_text_blocks");
    return NULL;
}

int nb_hf_save(nb_module *m, const char *src_dir, const char *out_dir) {
    (void)m; (void)src_dir; (void)out_dir;
    OFF("nb_hf_save");
    return -1;
}
