/* WordPiece and the text steps around the models: the normalizers (BertNormalizer: clean text,
   CJK spacing, NFD accent stripping, lower case; and Lowercase, NFD, StripAccents), the BERT
   and white-space pre-tokenizers, the WordPiece model (greedy longest match, "##"
   continuations, [UNK]), and the decoders (WordPiece, ByteLevel, none). Each follows what
   `tokenizers` does, character class by character class. */
#include "hf_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------- normalizers ---------- */
/* The CJK Unified Ideograph blocks BERT spaces out (tokenizers' is_chinese_char). */
static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* NFD of a: full decompositions, then combining marks in canonical order (a stable sort by
   combining class within each run of non-zero classes). */
static int nfd(const nb__cps *a, nb__cps *b) {
    b->n = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint32_t d[4];
        int k = nb__uc_decompose(a->v[i], d);
        for (int j = 0; j < k; j++)
            if (nb__cps_push(b, d[j]) < 0) return -1;
    }
    for (size_t i = 1; i < b->n; i++) { /* insertion sort: runs of marks are short */
        int c = nb__uc_combining(b->v[i]);
        if (!c) continue;
        size_t j = i;
        uint32_t x = b->v[i];
        while (j > 0 && nb__uc_combining(b->v[j - 1]) > c) {
            b->v[j] = b->v[j - 1];
            j--;
        }
        b->v[j] = x;
    }
    return 0;
}

static int lower(const nb__cps *a, nb__cps *b) {
    b->n = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint32_t l[3];
        int k = nb__uc_lower(a->v[i], l);
        for (int j = 0; j < k; j++)
            if (nb__cps_push(b, l[j]) < 0) return -1;
    }
    return 0;
}

/* Drops the nonspacing marks (as Unicode 9.0 has them: tokenizers' table). */
static void drop_marks(nb__cps *a) {
    size_t m = 0;
    for (size_t i = 0; i < a->n; i++)
        if (nb__uc_bert_class(a->v[i]) != NB_UC_MN) a->v[m++] = a->v[i];
    a->n = m;
}

int nb__tok_normalize(const nb_tokenizer *t, const char *s, size_t n, nb__buf *out) {
    out->n = 0;
    if (!t->n_norm) return nb__buf_put(out, s, n);
    nb__cps a = { 0 }, b = { 0 };
    int rc = -1;
    if (nb__utf8_decode(&a, s, n) < 0) goto done;
    for (int st = 0; st < t->n_norm; st++) {
        const nb__norm_step *ns = &t->norm[st];
        nb__cps sw;
        switch (ns->kind) {
        case NB_NORM_BERT:
            if (ns->clean_text) { /* drop NUL, U+FFFD and controls (Cc Cf Co but \t \n \r); spaces to ' ' */
                size_t m = 0;
                for (size_t i = 0; i < a.n; i++) {
                    uint32_t c = a.v[i];
                    bool keep_ctl = c == '\t' || c == '\n' || c == '\r';
                    if (c == 0 || c == 0xFFFD || (!keep_ctl && nb__uc_bert_class(c) == NB_UC_OTHER)) continue;
                    a.v[m++] = keep_ctl || nb__uc_space(c) ? ' ' : c;
                }
                a.n = m;
            }
            if (ns->chinese) {
                b.n = 0;
                for (size_t i = 0; i < a.n; i++) {
                    bool cjk = is_cjk(a.v[i]);
                    if ((cjk && nb__cps_push(&b, ' ') < 0) || nb__cps_push(&b, a.v[i]) < 0 ||
                        (cjk && nb__cps_push(&b, ' ') < 0))
                        goto done;
                }
                sw = a, a = b, b = sw;
            }
            if (ns->strip_accents) {
                if (nfd(&a, &b) < 0) goto done;
                sw = a, a = b, b = sw;
                drop_marks(&a);
            }
            if (ns->lowercase) {
                if (lower(&a, &b) < 0) goto done;
                sw = a, a = b, b = sw;
            }
            break;
        case NB_NORM_LOWERCASE:
            if (lower(&a, &b) < 0) goto done;
            sw = a, a = b, b = sw;
            break;
        case NB_NORM_NFD:
            if (nfd(&a, &b) < 0) goto done;
            sw = a, a = b, b = sw;
            break;
        case NB_NORM_STRIP_ACCENTS: drop_marks(&a); break;
        }
    }
    for (size_t i = 0; i < a.n; i++)
        if (nb__buf_putc(out, a.v[i]) < 0) goto done;
    if (nb__buf_put(out, "", 0) < 0) goto done;
    rc = 0;
done:
    free(a.v);
    free(b.v);
    return rc;
}

/* ---------- pre-tokenizers ---------- */
/* BERT's punctuation: ASCII punctuation or a P* character (of Unicode 9.0, as tokenizers). */
static bool is_bert_punct(uint32_t c) {
    if (c < 128) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return nb__uc_bert_class(c) == NB_UC_P;
}

/* Splits on white space (removed) and, when punct, isolates each punctuation character. */
int nb__pre_bert(const char *s, size_t n, bool punct, nb__pieces *out, nb__cps *cps);
int nb__pre_bert(const char *s, size_t n, bool punct, nb__pieces *out, nb__cps *cps) {
    const unsigned char *u = (const unsigned char *)s;
    size_t start = 0, i = 0;
    (void)cps;
    while (i < n) {
        size_t j = i;
        uint32_t c = nb__utf8_next(u, n, &j);
        bool sp = nb__uc_space(c), p = !sp && punct && is_bert_punct(c);
        if (sp || p) {
            if (i > start && nb__pieces_add(out, s + start, i - start) < 0) return -1;
            if (p && nb__pieces_add(out, s + i, j - i) < 0) return -1;
            start = j;
        }
        i = j;
    }
    if (n > start && nb__pieces_add(out, s + start, n - start) < 0) return -1;
    return 0;
}

/* ---------- the WordPiece model ---------- */
int nb__wordpiece_word(const nb_tokenizer *t, const char *w, size_t n, nb__ids *out) {
    const unsigned char *u = (const unsigned char *)w;
    size_t chars = 0;
    for (size_t i = 0; i < n; chars++) (void)nb__utf8_next(u, n, &i);
    if ((int64_t)chars > t->max_chars) return nb__ids_push(out, t->unk_id);
    size_t plen = strlen(t->prefix), mark = out->n;
    char *key = malloc(plen + n + 1);
    if (!key) return -1;
    memcpy(key, t->prefix, plen);
    for (size_t start = 0; start < n;) {
        size_t end = n;
        int64_t id = -1;
        while (start < end) {
            const char *k = w + start;
            size_t kl = end - start;
            if (start > 0) {
                memcpy(key + plen, w + start, end - start);
                k = key, kl = plen + end - start;
            }
            if ((id = nb__strmap_get(&t->vocab, k, kl)) >= 0) break;
            /* back off one character */
            do end--;
            while (end > start && (u[end] & 0xC0) == 0x80);
        }
        if (id < 0) { /* a word with no full cover is one [UNK] */
            out->n = mark;
            free(key);
            return nb__ids_push(out, t->unk_id);
        }
        if (nb__ids_push(out, id) < 0) {
            free(key);
            return -1;
        }
        start = end;
    }
    free(key);
    return 0;
}

/* ---------- decoders ---------- */
/* tokenizers' WordPiece cleanup, applied to each token. */
static int cleanup(nb__buf *b) {
    static const char *const from[] = { " .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not", " 's", " 've", " 're" };
    static const char *const to[] = { ".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve", "'re" };
    for (int r = 0; r < 11; r++) {
        size_t fl = strlen(from[r]), tl = strlen(to[r]);
        if (b->n < fl || !strstr(b->s, from[r])) continue;
        nb__buf o = { 0 };
        for (size_t i = 0; i < b->n;) {
            if (i + fl <= b->n && memcmp(b->s + i, from[r], fl) == 0) {
                if (nb__buf_put(&o, to[r], tl) < 0) return free(o.s), -1;
                i += fl;
            } else {
                if (nb__buf_put(&o, b->s + i, 1) < 0) return free(o.s), -1;
                i++;
            }
        }
        free(b->s);
        *b = o;
    }
    return 0;
}

int nb__tok_decode(const nb_tokenizer *t, const char *const *toks, size_t n, nb__buf *out) {
    if (t->decoder == NB_DEC_BYTELEVEL) {
        /* each token's characters as bytes of the alphabet (a token with a character outside it,
           an added token, stays as its UTF-8), then the bytes read as UTF-8 with U+FFFD */
        nb__buf raw = { 0 };
        for (size_t i = 0; i < n; i++) {
            const unsigned char *u = (const unsigned char *)toks[i];
            size_t len = strlen(toks[i]), mark = raw.n;
            bool all = true;
            for (size_t j = 0; j < len;) {
                int b = nb__char_byte(nb__utf8_next(u, len, &j));
                if (b < 0) {
                    all = false;
                    break;
                }
                unsigned char c = (unsigned char)b;
                if (nb__buf_put(&raw, &c, 1) < 0) return free(raw.s), -1;
            }
            if (!all) {
                raw.n = mark;
                if (nb__buf_put(&raw, toks[i], len) < 0) return free(raw.s), -1;
            }
        }
        int rc = nb__utf8_sanitize(out, raw.s ? raw.s : "", raw.n);
        free(raw.s);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        const char *tok = toks[i];
        if (t->decoder == NB_DEC_NONE) { /* no decoder: the tokens joined by spaces */
            if ((i && nb__buf_put(out, " ", 1) < 0) || nb__buf_put(out, tok, strlen(tok)) < 0) return -1;
            continue;
        }
        nb__buf one = { 0 };
        size_t pl = strlen(t->dec_prefix);
        int rc = 0;
        if (i && strncmp(tok, t->dec_prefix, pl) == 0) rc = nb__buf_put(&one, tok + pl, strlen(tok) - pl);
        else if (i) rc = nb__buf_put(&one, " ", 1) < 0 ? -1 : nb__buf_put(&one, tok, strlen(tok));
        else rc = nb__buf_put(&one, tok, strlen(tok));
        if (rc == 0 && !one.s) rc = nb__buf_put(&one, "", 0);
        if (rc == 0 && t->dec_cleanup) rc = cleanup(&one);
        if (rc == 0) rc = nb__buf_put(out, one.s, one.n);
        free(one.s);
        if (rc < 0) return -1;
    }
    if (!out->s) return nb__buf_put(out, "", 0);
    return 0;
}
