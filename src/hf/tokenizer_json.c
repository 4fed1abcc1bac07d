/* The pipeline sections of tokenizer.json: "normalizer", "pre_tokenizer", "post_processor" and
   "decoder", read into the tokenizer's steps, each type or field nabla does not run an error
   naming tokenizer.json and the field. */
#include "hf_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef nb__tokctx ctx;
#define FAIL(c, ...) (nb__tok_fail((c), __VA_ARGS__), -1)

static int parse_normalizer(nb_tokenizer *t, const ctx *c, json_t *n, int depth) {
    if (!n || json_is_null(n)) return 0;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!json_is_object(n) || !type) return FAIL(c, "normalizer has no \"type\"");
    if (strcmp(type, "Sequence") == 0 && depth == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) return FAIL(c, "normalizer.normalizers is not an array");
        for (size_t i = 0; i < json_array_size(list); i++)
            if (parse_normalizer(t, c, json_array_get(list, i), 1) < 0) return -1;
        return 0;
    }
    if (t->n_norm == NB_TOK_MAX_STEPS) return FAIL(c, "normalizer: more than %d steps", NB_TOK_MAX_STEPS);
    nb__norm_step *st = &t->norm[t->n_norm];
    memset(st, 0, sizeof *st);
    if (strcmp(type, "BertNormalizer") == 0) {
        st->kind = NB_NORM_BERT;
        if (nb__tok_bool(c, n, "clean_text", "normalizer", true, &st->clean_text) < 0 ||
            nb__tok_bool(c, n, "handle_chinese_chars", "normalizer", true, &st->chinese) < 0 ||
            nb__tok_bool(c, n, "lowercase", "normalizer", true, &st->lowercase) < 0 ||
            nb__tok_bool(c, n, "strip_accents", "normalizer", st->lowercase, &st->strip_accents) < 0)
            return -1;
    } else if (strcmp(type, "Lowercase") == 0) st->kind = NB_NORM_LOWERCASE;
    else if (strcmp(type, "NFD") == 0) st->kind = NB_NORM_NFD;
    else if (strcmp(type, "StripAccents") == 0) st->kind = NB_NORM_STRIP_ACCENTS;
    else return FAIL(c, "normalizer type '%.40s' is not supported (BertNormalizer, Lowercase, NFD, StripAccents, Sequence)", type);
    t->n_norm++;
    return 0;
}

static int parse_pre(nb_tokenizer *t, const ctx *c, json_t *p, int depth) {
    if (!p || json_is_null(p)) return 0;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!json_is_object(p) || !type) return FAIL(c, "pre_tokenizer has no \"type\"");
    if (strcmp(type, "Sequence") == 0 && depth == 0) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) return FAIL(c, "pre_tokenizer.pretokenizers is not an array");
        for (size_t i = 0; i < json_array_size(list); i++)
            if (parse_pre(t, c, json_array_get(list, i), 1) < 0) return -1;
        return 0;
    }
    if (t->n_pre == NB_TOK_MAX_STEPS) return FAIL(c, "pre_tokenizer: more than %d steps", NB_TOK_MAX_STEPS);
    if (t->n_pre && t->pre[t->n_pre - 1].kind == NB_PRE_BYTELEVEL)
        return FAIL(c, "pre_tokenizer: a step after ByteLevel is not supported");
    nb__pre_step *st = &t->pre[t->n_pre];
    memset(st, 0, sizeof *st);
    if (strcmp(type, "ByteLevel") == 0) {
        st->kind = NB_PRE_BYTELEVEL;
        if (nb__tok_bool(c, p, "add_prefix_space", "pre_tokenizer", true, &st->add_prefix_space) < 0 ||
            nb__tok_bool(c, p, "use_regex", "pre_tokenizer", true, &st->use_regex) < 0)
            return -1;
    } else if (strcmp(type, "BertPreTokenizer") == 0) st->kind = NB_PRE_BERT;
    else if (strcmp(type, "WhitespaceSplit") == 0) st->kind = NB_PRE_WHITESPACE_SPLIT;
    else return FAIL(c, "pre_tokenizer type '%.40s' is not supported (ByteLevel, BertPreTokenizer, WhitespaceSplit, Sequence)", type);
    t->n_pre++;
    return 0;
}

/* Appends ids to *v (a post-processor's special tokens). */
int nb__tok_push_ids(int64_t **v, int *n, const int64_t *ids, int k) {
    int64_t *w = realloc(*v, (size_t)(*n + k + 1) * sizeof *w);
    if (!w) return -1;
    memcpy(w + *n, ids, (size_t)k * sizeof *ids);
    *v = w, *n += k;
    return 0;
}

/* ["[CLS]", 101] of BertProcessing and RobertaProcessing. */
static int pair_id(nb_tokenizer *t, const ctx *c, json_t *j, const char *field, int64_t *id) {
    json_t *x = json_array_get(j, 1);
    if (!json_is_array(j) || json_array_size(j) != 2 || !json_is_integer(x) || json_integer_value(x) < 0 ||
        json_integer_value(x) >= t->n_ids)
        return FAIL(c, "post_processor.%s is not a [token, id] pair with an id of the vocabulary", field);
    *id = json_integer_value(x);
    return 0;
}

static int parse_post(nb_tokenizer *t, const ctx *c, json_t *p, int depth) {
    if (!p || json_is_null(p)) return 0;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!json_is_object(p) || !type) return FAIL(c, "post_processor has no \"type\"");
    if (strcmp(type, "Sequence") == 0 && depth == 0) {
        json_t *list = json_object_get(p, "processors");
        if (!json_is_array(list)) return FAIL(c, "post_processor.processors is not an array");
        for (size_t i = 0; i < json_array_size(list); i++)
            if (parse_post(t, c, json_array_get(list, i), 1) < 0) return -1;
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) return 0; /* offsets only */
    if (t->n_post_pre || t->n_post_post) return FAIL(c, "post_processor: two processors add special tokens");
    if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        int64_t cls, sep;
        if (pair_id(t, c, json_object_get(p, "cls"), "cls", &cls) < 0 ||
            pair_id(t, c, json_object_get(p, "sep"), "sep", &sep) < 0)
            return -1;
        if (nb__tok_push_ids(&t->post_pre, &t->n_post_pre, &cls, 1) < 0 || nb__tok_push_ids(&t->post_post, &t->n_post_post, &sep, 1) < 0)
            return FAIL(c, "out of memory");
        return 0;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return FAIL(c, "post_processor type '%.40s' is not supported (TemplateProcessing, BertProcessing, "
                       "RobertaProcessing, ByteLevel, Sequence)", type);
    json_t *single = json_object_get(p, "single"), *special = json_object_get(p, "special_tokens");
    if (!json_is_array(single)) return FAIL(c, "post_processor.single is not an array");
    bool seen_a = false;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *item = json_array_get(single, i), *st = json_object_get(item, "SpecialToken"),
               *sq = json_object_get(item, "Sequence");
        if (sq) {
            const char *id = json_string_value(json_object_get(sq, "id"));
            if (!id || strcmp(id, "A") != 0 || seen_a)
                return FAIL(c, "post_processor.single[%zu]: a single sequence template holds $A once", i);
            seen_a = true;
            continue;
        }
        const char *name = json_string_value(json_object_get(st, "id"));
        json_t *ids = json_object_get(json_object_get(special, name ? name : ""), "ids");
        if (!name || !json_is_array(ids))
            return FAIL(c, "post_processor.single[%zu]: special token '%.40s' is not in special_tokens", i,
                        name ? name : "?");
        for (size_t k = 0; k < json_array_size(ids); k++) {
            json_t *x = json_array_get(ids, k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= t->n_ids)
                return FAIL(c, "post_processor.special_tokens['%.40s'].ids holds an id outside the vocabulary", name);
            int64_t id = json_integer_value(x);
            if (nb__tok_push_ids(seen_a ? &t->post_post : &t->post_pre, seen_a ? &t->n_post_post : &t->n_post_pre, &id, 1) < 0)
                return FAIL(c, "out of memory");
        }
    }
    if (!seen_a) return FAIL(c, "post_processor.single has no $A");
    return 0;
}

static int parse_decoder(nb_tokenizer *t, const ctx *c, json_t *d) {
    if (nb__tok_str(&t->dec_prefix, c, "decoder.prefix", NULL, "") < 0) return -1;
    if (!d || json_is_null(d)) return 0;
    const char *type = json_string_value(json_object_get(d, "type"));
    if (!json_is_object(d) || !type) return FAIL(c, "decoder has no \"type\"");
    if (strcmp(type, "ByteLevel") == 0) t->decoder = NB_DEC_BYTELEVEL;
    else if (strcmp(type, "WordPiece") == 0) {
        t->decoder = NB_DEC_WORDPIECE;
        if (nb__tok_str(&t->dec_prefix, c, "decoder.prefix", json_object_get(d, "prefix"), "##") < 0) return -1;
        if (nb__tok_bool(c, d, "cleanup", "decoder", true, &t->dec_cleanup) < 0) return -1;
    } else return FAIL(c, "decoder type '%.40s' is not supported (ByteLevel, WordPiece)", type);
    return 0;
}

int nb__tok_parse_steps(nb_tokenizer *t, const nb__tokctx *c, json_t *root) {
    return parse_normalizer(t, c, json_object_get(root, "normalizer"), 0) < 0 ||
                   parse_pre(t, c, json_object_get(root, "pre_tokenizer"), 0) < 0 ||
                   parse_post(t, c, json_object_get(root, "post_processor"), 0) < 0 ||
                   parse_decoder(t, c, json_object_get(root, "decoder")) < 0
               ? -1
               : 0;
}
