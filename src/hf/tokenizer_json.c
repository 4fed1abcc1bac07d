/* The pipeline sections of tokenizer.json: "normalizer", "pre_tokenizer", "post_processor" and
   "decoder", read into the tokenizer's steps, each type or field nabla does not run an error
   naming tokenizer.json and the field. */
#include "hf_impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef nb__tokctx ctx;
#define FAIL(c, ...) (nb__tok_fail((c), __VA_ARGS__), -1)

/* The regexes of Split that nabla runs (tokenizer_pre.c writes them out by hand), as
   tokenizer.json spells them: GPT-2's, and Llama 3's, which is also OpenAI's cl100k. */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char llama3_pattern[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The one character of the string o[field] (a Rust char in tokenizers). */
static int get_char(const ctx *c, json_t *o, const char *field, const char *where, uint32_t *cp) {
    json_t *j = json_object_get(o, field);
    const unsigned char *s = (const unsigned char *)json_string_value(j);
    size_t n = json_string_length(j), i = 0;
    if (s && n) *cp = nb__utf8_next(s, n, &i);
    if (!s || !n || i != n) return FAIL(c, "%s.%s is not a string of one character", where, field);
    return 0;
}

/* A non-negative integer o[field] (dflt when absent). */
static int get_count(const ctx *c, json_t *o, const char *field, const char *where, int64_t dflt, int64_t *out) {
    json_t *j = json_object_get(o, field);
    *out = dflt;
    if (!j || json_is_null(j)) return 0;
    if (!json_is_integer(j) || json_integer_value(j) < 0) return FAIL(c, "%s.%s is not a non-negative integer", where, field);
    *out = json_integer_value(j);
    return 0;
}

/* The pattern {"String": text} of Replace (and of Split) copied into *out. */
static int string_pattern(const ctx *c, json_t *o, const char *where, char **out) {
    json_t *p = json_object_get(o, "pattern"), *s = json_object_get(p, "String");
    if (json_object_get(p, "Regex"))
        return FAIL(c, "%s.pattern: a Regex pattern is not supported here (a {\"String\": text} is)", where);
    if (!json_is_string(s) || !json_string_length(s)) return FAIL(c, "%s.pattern is not {\"String\": text} with some text", where);
    *out = strdup(json_string_value(s));
    return *out ? 0 : FAIL(c, "out of memory");
}

/* Metaspace's prepend_scheme ("always" when absent), or the older add_prefix_space: false. */
static int prepend_scheme(const ctx *c, json_t *o, const char *where, int *out) {
    json_t *ps = json_object_get(o, "prepend_scheme"), *aps = json_object_get(o, "add_prefix_space");
    const char *s = json_string_value(ps);
    *out = NB_PREPEND_ALWAYS;
    if (ps && !json_is_null(ps)) {
        if (s && strcmp(s, "first") == 0) *out = NB_PREPEND_FIRST;
        else if (s && strcmp(s, "never") == 0) *out = NB_PREPEND_NEVER;
        else if (!s || strcmp(s, "always") != 0)
            return FAIL(c, "%s.prepend_scheme is not \"first\", \"always\" or \"never\"", where);
    }
    if (json_is_false(aps)) {
        if (*out != NB_PREPEND_NEVER && ps && !json_is_null(ps))
            return FAIL(c, "%s.add_prefix_space false does not match prepend_scheme", where);
        *out = NB_PREPEND_NEVER;
    }
    return 0;
}

static int parse_normalizer(nb_tokenizer *t, const ctx *c, json_t *n, const char *where) {
    if (!n || json_is_null(n)) return 0;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!json_is_object(n) || !type) return FAIL(c, "%s has no \"type\"", where);
    if (strcmp(type, "Sequence") == 0 && strchr(where, '[') == NULL) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) return FAIL(c, "normalizer.normalizers is not an array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char w[64];
            snprintf(w, sizeof w, "normalizer.normalizers[%zu]", i);
            if (parse_normalizer(t, c, json_array_get(list, i), w) < 0) return -1;
        }
        return 0;
    }
    if (t->n_norm == NB_TOK_MAX_STEPS) return FAIL(c, "normalizer: more than %d steps", NB_TOK_MAX_STEPS);
    nb__norm_step *st = &t->norm[t->n_norm];
    memset(st, 0, sizeof *st);
    json_t *content = json_object_get(n, strcmp(type, "Prepend") == 0 ? "prepend" : "content");
    if (strcmp(type, "BertNormalizer") == 0) {
        st->kind = NB_NORM_BERT;
        if (nb__tok_bool(c, n, "clean_text", where, true, &st->clean_text) < 0 ||
            nb__tok_bool(c, n, "handle_chinese_chars", where, true, &st->chinese) < 0 ||
            nb__tok_bool(c, n, "lowercase", where, true, &st->lowercase) < 0 ||
            nb__tok_bool(c, n, "strip_accents", where, st->lowercase, &st->strip_accents) < 0)
            return -1;
    } else if (strcmp(type, "Lowercase") == 0) st->kind = NB_NORM_LOWERCASE;
    else if (strcmp(type, "NFD") == 0) st->kind = NB_NORM_NFD;
    else if (strcmp(type, "StripAccents") == 0) st->kind = NB_NORM_STRIP_ACCENTS;
    else if (strcmp(type, "Prepend") == 0 || strcmp(type, "Replace") == 0) {
        st->kind = type[0] == 'P' ? NB_NORM_PREPEND : NB_NORM_REPLACE;
        t->n_norm++; /* counted now: nb_tokenizer_free frees its strings */
        if (!json_is_string(content))
            return FAIL(c, "%s.%s is not a string", where, st->kind == NB_NORM_PREPEND ? "prepend" : "content");
        if (!(st->content = strdup(json_string_value(content)))) return FAIL(c, "out of memory");
        return st->kind == NB_NORM_REPLACE ? string_pattern(c, n, where, &st->pattern) : 0;
    } else
        return FAIL(c, "%s type '%.40s' is not supported (BertNormalizer, Lowercase, NFD, StripAccents, Prepend, "
                       "Replace, Sequence)", where, type);
    t->n_norm++;
    return 0;
}

/* Split's pattern and behavior. */
static int parse_split(nb__pre_step *st, const ctx *c, json_t *p, const char *where) {
    static const char *const behaviors[] = { "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous" };
    const char *re = json_string_value(json_object_get(json_object_get(p, "pattern"), "Regex"));
    if (!re) {
        st->pattern = NB_PAT_STRING;
        if (string_pattern(c, p, where, &st->literal) < 0) return -1;
    } else if (strcmp(re, gpt2_pattern) == 0) st->pattern = NB_PAT_GPT2;
    else if (strcmp(re, llama3_pattern) == 0) st->pattern = NB_PAT_LLAMA3;
    else
        return FAIL(c, "%s.pattern.Regex '%.80s' is not supported: nabla has no regex engine, and runs GPT-2's "
                       "pattern and Llama 3's (cl100k's) as tokenizer.json writes them, or a {\"String\": text}", where, re);
    const char *b = json_string_value(json_object_get(p, "behavior"));
    st->behavior = -1;
    for (int k = 0; k < 5 && b; k++)
        if (strcmp(b, behaviors[k]) == 0) st->behavior = k; /* the order of NB_SPLIT_* */
    if (st->behavior < 0)
        return FAIL(c, "%s.behavior is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", where);
    return nb__tok_bool(c, p, "invert", where, false, &st->invert);
}

static int parse_pre(nb_tokenizer *t, const ctx *c, json_t *p, const char *where) {
    if (!p || json_is_null(p)) return 0;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!json_is_object(p) || !type) return FAIL(c, "%s has no \"type\"", where);
    if (strcmp(type, "Sequence") == 0 && strchr(where, '[') == NULL) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) return FAIL(c, "pre_tokenizer.pretokenizers is not an array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char w[64];
            snprintf(w, sizeof w, "pre_tokenizer.pretokenizers[%zu]", i);
            if (parse_pre(t, c, json_array_get(list, i), w) < 0) return -1;
        }
        return 0;
    }
    if (t->n_pre == NB_TOK_MAX_STEPS) return FAIL(c, "pre_tokenizer: more than %d steps", NB_TOK_MAX_STEPS);
    if (t->n_pre && t->pre[t->n_pre - 1].kind == NB_PRE_BYTELEVEL)
        return FAIL(c, "%s: a step after ByteLevel is not supported", where);
    nb__pre_step *st = &t->pre[t->n_pre++]; /* counted now: nb_tokenizer_free frees its strings */
    memset(st, 0, sizeof *st);
    if (strcmp(type, "ByteLevel") == 0) {
        st->kind = NB_PRE_BYTELEVEL;
        return nb__tok_bool(c, p, "add_prefix_space", where, true, &st->add_prefix_space) < 0 ||
                       nb__tok_bool(c, p, "use_regex", where, true, &st->use_regex) < 0
                   ? -1
                   : 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        st->kind = NB_PRE_METASPACE;
        return get_char(c, p, "replacement", where, &st->replacement) < 0 || prepend_scheme(c, p, where, &st->prepend) < 0 ||
                       nb__tok_bool(c, p, "split", where, true, &st->split) < 0
                   ? -1
                   : 0;
    }
    if (strcmp(type, "Split") == 0) {
        st->kind = NB_PRE_SPLIT;
        return parse_split(st, c, p, where);
    }
    if (strcmp(type, "BertPreTokenizer") == 0) st->kind = NB_PRE_BERT;
    else if (strcmp(type, "WhitespaceSplit") == 0) st->kind = NB_PRE_WHITESPACE_SPLIT;
    else
        return FAIL(c, "%s type '%.40s' is not supported (ByteLevel, Metaspace, Split, BertPreTokenizer, "
                       "WhitespaceSplit, Sequence)", where, type);
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

static int parse_decoder(nb_tokenizer *t, const ctx *c, json_t *d, const char *where) {
    if (!d || json_is_null(d)) return 0;
    const char *type = json_string_value(json_object_get(d, "type"));
    if (!json_is_object(d) || !type) return FAIL(c, "%s has no \"type\"", where);
    if (strcmp(type, "Sequence") == 0 && strchr(where, '[') == NULL) {
        json_t *list = json_object_get(d, "decoders");
        if (!json_is_array(list)) return FAIL(c, "decoder.decoders is not an array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char w[64];
            snprintf(w, sizeof w, "decoder.decoders[%zu]", i);
            if (parse_decoder(t, c, json_array_get(list, i), w) < 0) return -1;
        }
        return 0;
    }
    if (t->n_dec == NB_TOK_MAX_STEPS) return FAIL(c, "decoder: more than %d steps", NB_TOK_MAX_STEPS);
    nb__dec_step *st = &t->dec[t->n_dec++]; /* counted now: nb_tokenizer_free frees its strings */
    memset(st, 0, sizeof *st);
    json_t *content = json_object_get(d, "content");
    if (strcmp(type, "ByteLevel") == 0) st->kind = NB_DEC_BYTELEVEL;
    else if (strcmp(type, "ByteFallback") == 0) st->kind = NB_DEC_BYTEFALLBACK;
    else if (strcmp(type, "Fuse") == 0) st->kind = NB_DEC_FUSE;
    else if (strcmp(type, "WordPiece") == 0) {
        st->kind = NB_DEC_WORDPIECE;
        if (nb__tok_str(&st->pattern, c, "decoder.prefix", json_object_get(d, "prefix"), "##") < 0 ||
            nb__tok_bool(c, d, "cleanup", where, true, &st->cleanup) < 0)
            return -1;
    } else if (strcmp(type, "Replace") == 0) {
        st->kind = NB_DEC_REPLACE;
        if (!json_is_string(content)) return FAIL(c, "%s.content is not a string", where);
        if (!(st->content = strdup(json_string_value(content)))) return FAIL(c, "out of memory");
        return string_pattern(c, d, where, &st->pattern);
    } else if (strcmp(type, "Strip") == 0) {
        st->kind = NB_DEC_STRIP;
        return get_char(c, d, "content", where, &st->ch) < 0 || get_count(c, d, "start", where, 0, &st->start) < 0 ||
                       get_count(c, d, "stop", where, 0, &st->stop) < 0
                   ? -1
                   : 0;
    } else if (strcmp(type, "Metaspace") == 0) {
        st->kind = NB_DEC_METASPACE;
        int scheme;
        if (get_char(c, d, "replacement", where, &st->ch) < 0 || prepend_scheme(c, d, where, &scheme) < 0) return -1;
        st->prepend = scheme != NB_PREPEND_NEVER;
    } else
        return FAIL(c, "%s type '%.40s' is not supported (ByteLevel, WordPiece, Metaspace, Replace, ByteFallback, "
                       "Fuse, Strip, Sequence)", where, type);
    return 0;
}

int nb__tok_parse_steps(nb_tokenizer *t, const nb__tokctx *c, json_t *root) {
    return parse_normalizer(t, c, json_object_get(root, "normalizer"), "normalizer") < 0 ||
                   parse_pre(t, c, json_object_get(root, "pre_tokenizer"), "pre_tokenizer") < 0 ||
                   parse_post(t, c, json_object_get(root, "post_processor"), 0) < 0 ||
                   parse_decoder(t, c, json_object_get(root, "decoder"), "decoder") < 0
               ? -1
               : 0;
}
