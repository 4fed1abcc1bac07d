/* Encoding and decoding, in the order of `tokenizers`' encode: added tokens matched in the raw
   text, normalisation of the rest, normalized added tokens, pre-tokenisation, the model, then
   truncation, the post-processor's special tokens and padding; decode maps ids back to tokens
   and runs the decoder. */
#include "hf_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------- added tokens ---------- */
/* regex's \w, near enough: letters, numbers, marks and '_' */
static bool is_word_char(uint32_t c) {
    int k = nb__uc_class(c);
    return c == '_' || k == NB_UC_L || k == NB_UC_N || k == NB_UC_MN;
}

static bool ends_with_word(const char *s, size_t n) {
    if (!n) return false;
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    return is_word_char(nb__utf8_next((const unsigned char *)s, n, &k));
}

static bool starts_with_word(const char *s, size_t n) {
    size_t k = 0;
    return n && is_word_char(nb__utf8_next((const unsigned char *)s, n, &k));
}

/* The length of the white space that s[0..n) ends with, and that it starts with. */
static size_t trailing_space(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t k = end - 1;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        size_t q = k;
        if (!nb__uc_space(nb__utf8_next((const unsigned char *)s, end, &q))) break;
        end = k;
    }
    return n - end;
}

static size_t leading_space(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t q = i;
        if (!nb__uc_space(nb__utf8_next((const unsigned char *)s, n, &q))) break;
        i = q;
    }
    return i;
}

/* One stretch of text: an added token's id, or text (id -1) at [off, off + len) of its buffer. */
typedef struct {
    size_t off, len;
    int64_t id;
} seg;
typedef struct {
    seg *v;
    size_t n, cap;
} segs;

static int seg_push(segs *s, size_t off, size_t len, int64_t id) {
    if (nb__tok_grow((void **)&s->v, &s->cap, s->n, sizeof *s->v) < 0) return -1;
    s->v[s->n++] = (seg){ off, len, id };
    return 0;
}

/* Splits s[0..n) on the added tokens whose normalized flag is `normalized` (the raw text
   matches the others), leftmost-longest as tokenizers' Aho-Corasick automaton, with
   single_word, lstrip and rstrip as tokenizers applies them. */
static int split_added(const nb_tokenizer *t, const char *s, size_t n, bool normalized, segs *out) {
    size_t start_off = 0, pos = 0;
    while (pos < n) {
        /* the leftmost position where a token matches, and the longest token there */
        const nb__added *best = NULL;
        size_t at = pos;
        for (; at < n && !best; at++) {
            for (int i = 0; i < t->n_added; i++) {
                const nb__added *a = &t->added[i];
                if (a->normalized != normalized) continue;
                const char *p = normalized ? a->norm : a->content;
                size_t l = normalized ? a->norm_len : a->len;
                if (l && l <= n - at && (unsigned char)p[0] == (unsigned char)s[at] && memcmp(p, s + at, l) == 0 &&
                    (!best || l > (normalized ? best->norm_len : best->len)))
                    best = a;
            }
            if (best) break;
        }
        if (!best) break;
        size_t mlen = normalized ? best->norm_len : best->len, start = at, stop = at + mlen;
        pos = stop; /* the automaton goes on after the match, kept or not */
        if (best->single_word && ((start > 0 && ends_with_word(s, start)) || (stop < n && starts_with_word(s + stop, n - stop))))
            continue;
        if (best->lstrip) {
            size_t ns = start - trailing_space(s, start);
            start = ns > start_off ? ns : start_off;
        }
        if (best->rstrip) stop += leading_space(s + stop, n - stop);
        if (start_off < start && seg_push(out, start_off, start - start_off, -1) < 0) return -1;
        if (seg_push(out, start, stop - start, best->id) < 0) return -1;
        start_off = stop;
    }
    if (start_off < n && seg_push(out, start_off, n - start_off, -1) < 0) return -1;
    return 0;
}

/* The model's ids of a stretch of normalized text (at_start: it begins the input). */
static int encode_text(const nb_tokenizer *t, const char *s, size_t n, bool at_start, nb__pieces *words, nb__ids *out) {
    if (nb__tok_pretokenize(t, s, n, at_start, words) < 0) return -1;
    for (size_t i = 0; i < words->n; i++) {
        const char *w = words->buf.s + words->off[i];
        int r = t->model == NB_TOK_BPE ? nb__bpe_word(t, w, words->len[i], out) : nb__wordpiece_word(t, w, words->len[i], out);
        if (r < 0) return -1;
    }
    return 0;
}

/* The ids of text, before truncation and the post-processor. */
static int encode(const nb_tokenizer *t, const char *text, size_t len, nb__ids *out) {
    nb__buf clean = { 0 }, norm = { 0 };
    nb__pieces words = { 0 };
    segs raw = { 0 }, ns = { 0 };
    int rc = -1;
    if (nb__utf8_sanitize(&clean, text, len) < 0) goto done;
    if (t->any_raw_added) {
        if (split_added(t, clean.s, clean.n, false, &raw) < 0) goto done;
    } else if (clean.n && seg_push(&raw, 0, clean.n, -1) < 0) goto done;
    for (size_t i = 0; i < raw.n; i++) {
        if (raw.v[i].id >= 0) {
            if (nb__ids_push(out, raw.v[i].id) < 0) goto done;
            continue;
        }
        if (nb__tok_normalize(t, clean.s + raw.v[i].off, raw.v[i].len, &norm) < 0) goto done;
        ns.n = 0;
        if (t->any_normalized_added) {
            if (split_added(t, norm.s, norm.n, true, &ns) < 0) goto done;
        } else if (norm.n && seg_push(&ns, 0, norm.n, -1) < 0) goto done;
        for (size_t j = 0; j < ns.n; j++) {
            /* Metaspace's "first" scheme: tokenizers asks whether the piece's offset in the
               original text is 0 (a normalizer that drops leading characters is not followed) */
            bool at_start = raw.v[i].off == 0 && ns.v[j].off == 0;
            int r = ns.v[j].id >= 0 ? nb__ids_push(out, ns.v[j].id)
                                    : encode_text(t, norm.s + ns.v[j].off, ns.v[j].len, at_start, &words, out);
            if (r < 0) goto done;
        }
    }
    rc = 0;
done:
    free(clean.s);
    free(norm.s);
    nb__pieces_free(&words);
    free(raw.v);
    free(ns.v);
    return rc;
}

int64_t nb_tokenize_ex(nb_tokenizer *t, const char *text, size_t len, int64_t *ids, int64_t cap, nb_tokenize_opts opts) {
    if (!t || (!text && len) || cap < 0 || (!ids && cap > 0)) {
        nb__error("nb_tokenize: %s", !t ? "tokenizer is NULL" : (!text && len) ? "text is NULL" : cap < 0 ? "cap is negative" : "ids is NULL");
        return -1;
    }
    if (len > INT32_MAX) {
        nb__error("nb_tokenize: text of %zu bytes is longer than 2 GiB", len);
        return -1;
    }
    nb__ids v = { 0 };
    if (encode(t, text ? text : "", len, &v) < 0) {
        free(v.v);
        nb__error("nb_tokenize: out of memory");
        return -1;
    }
    int64_t n_special = opts.no_special_tokens ? 0 : t->n_post_pre + t->n_post_post;
    if (t->trunc_on && !opts.no_truncation) {
        if (t->trunc_max < n_special) {
            free(v.v);
            nb__error("nb_tokenize: truncation.max_length %lld leaves no room for the %lld special tokens",
                      (long long)t->trunc_max, (long long)n_special);
            return -1;
        }
        size_t keep = (size_t)(t->trunc_max - n_special);
        if (v.n > keep) {
            if (t->trunc_left) memmove(v.v, v.v + (v.n - keep), keep * sizeof *v.v);
            v.n = keep;
        }
    }
    int64_t n = (int64_t)v.n + n_special, target = n;
    if (t->pad_mode && !opts.no_padding) {
        if (t->pad_mode == 1 && t->pad_len > target) target = t->pad_len;
        if (t->pad_multiple && target % t->pad_multiple) target += t->pad_multiple - target % t->pad_multiple;
    }
    int64_t lead = t->pad_left ? target - n : 0, k = 0;
    /* the output: left padding, the post-processor's tokens around the ids, right padding
       (padding is counted, not looped over: a Fixed length can be large) */
#define EMIT(x)                            \
    do {                                   \
        if (k < cap) ids[k] = (x);         \
        k++;                               \
    } while (0)
    for (int64_t i = 0; i < lead && k < cap; i++) ids[k++] = t->pad_id;
    k = lead;
    if (!opts.no_special_tokens)
        for (int i = 0; i < t->n_post_pre; i++) EMIT(t->post_pre[i]);
    for (size_t i = 0; i < v.n; i++) EMIT(v.v[i]);
    if (!opts.no_special_tokens)
        for (int i = 0; i < t->n_post_post; i++) EMIT(t->post_post[i]);
#undef EMIT
    for (int64_t i = k; i < target && i < cap; i++) ids[i] = t->pad_id;
    if (k < target) k = target;
    free(v.v);
    return k;
}

int64_t nb_tokenize(nb_tokenizer *t, const char *text, int64_t *ids, int64_t cap) {
    return nb_tokenize_ex(t, text, text ? strlen(text) : 0, ids, cap, (nb_tokenize_opts){ 0 });
}

/* ---------- decoding and the vocabulary ---------- */
static bool is_special(const nb_tokenizer *t, const char *tok) {
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].special && strcmp(t->added[i].content, tok) == 0) return true;
    return false;
}

char *nb_detokenize_ex(nb_tokenizer *t, const int64_t *ids, int64_t n, nb_detokenize_opts opts) {
    if (!t || n < 0 || (!ids && n > 0)) {
        nb__error("nb_detokenize: %s", !t ? "tokenizer is NULL" : n < 0 ? "n is negative" : "ids is NULL");
        return NULL;
    }
    const char **toks = malloc((size_t)(n ? n : 1) * sizeof *toks);
    if (!toks) {
        nb__error("nb_detokenize: out of memory");
        return NULL;
    }
    size_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->id_tok[ids[i]]) {
            nb__error("nb_detokenize: ids[%lld] = %lld is not in the vocabulary (size %lld)", (long long)i,
                      (long long)ids[i], (long long)t->n_ids);
            free(toks);
            return NULL;
        }
        const char *tok = t->id_tok[ids[i]];
        if (!opts.keep_special_tokens && is_special(t, tok)) continue;
        toks[m++] = tok;
    }
    nb__buf out = { 0 };
    int rc = nb__tok_decode(t, toks, m, &out);
    free(toks);
    if (rc < 0 || !out.s) {
        free(out.s);
        nb__error("nb_detokenize: out of memory");
        return NULL;
    }
    if (opts.len) *opts.len = out.n;
    return out.s;
}

char *nb_detokenize(nb_tokenizer *t, const int64_t *ids, int64_t n) {
    return nb_detokenize_ex(t, ids, n, (nb_detokenize_opts){ 0 });
}

int64_t nb_tokenizer_vocab_size(const nb_tokenizer *t) {
    if (!t) {
        nb__error("nb_tokenizer_vocab_size: tokenizer is NULL");
        return -1;
    }
    return t->n_ids;
}

int64_t nb_token_to_id(const nb_tokenizer *t, const char *token) {
    if (!t || !token) {
        nb__error("nb_token_to_id: %s is NULL", !t ? "tokenizer" : "token");
        return -1;
    }
    for (int i = 0; i < t->n_added; i++)
        if (strcmp(t->added[i].content, token) == 0) return t->added[i].id;
    return nb__strmap_get(&t->vocab, token, strlen(token));
}

const char *nb_id_to_token(const nb_tokenizer *t, int64_t id) {
    if (!t) {
        nb__error("nb_id_to_token: tokenizer is NULL");
        return NULL;
    }
    if (id < 0 || id >= t->n_ids || !t->id_tok[id]) {
        nb__error("nb_id_to_token: id %lld is not in the vocabulary (size %lld)", (long long)id, (long long)t->n_ids);
        return NULL;
    }
    return t->id_tok[id];
}
