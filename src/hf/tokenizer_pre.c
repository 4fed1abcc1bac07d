/* The pre-tokenizers: BERT's and the white-space split, and byte-level BPE's GPT-2 pattern written
   out by hand over the Unicode class tables, run in the order tokenizer.json lists them. */
#include "hf_impl.h"

#include <stdlib.h>
#include <string.h>

/* BERT's punctuation: ASCII punctuation or a P* character (of Unicode 9.0, as tokenizers). */
static bool is_bert_punct(uint32_t c) {
    if (c < 128) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return nb__uc_bert_class(c) == NB_UC_P;
}

/* Splits on white space (removed) and, when punct, isolates each punctuation character. */
static int pre_bert(const char *s, size_t n, bool punct, nb__pieces *out, nb__cps *cps) {
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


/* ---------- the GPT-2 pattern ----------
   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
   Each match at position i is the first alternative that matches there; every character is
   a letter, a number, white space or none of those, so the matches tile the text. */
enum { CL_OTHER, CL_L, CL_N, CL_SPACE };
static int gpt2_class(uint32_t cp) {
    if (nb__uc_space(cp)) return CL_SPACE;
    int c = nb__uc_class(cp);
    return c == NB_UC_L ? CL_L : c == NB_UC_N ? CL_N : CL_OTHER;
}

/* The length (in code points) of the match at i of the n code points c (classes k). */
static size_t gpt2_match(const uint32_t *c, const unsigned char *k, size_t n, size_t i) {
    if (c[i] == '\'' && i + 1 < n) {
        uint32_t a = c[i + 1], b = i + 2 < n ? c[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    size_t j = i + (c[i] == ' ' && i + 1 < n && k[i + 1] != CL_SPACE);
    if (k[j] == CL_L || k[j] == CL_N) {
        int want = k[j];
        while (j < n && k[j] == want) j++;
        return j - i;
    }
    if (k[j] == CL_OTHER) {
        while (j < n && k[j] == CL_OTHER) j++;
        return j - i;
    }
    /* white space: the run, less its last character when a non-space follows and that leaves some */
    j = i;
    while (j < n && k[j] == CL_SPACE) j++;
    if (j < n && j - i >= 2) j--;
    return j - i;
}

/* Appends the pieces of one split, byte-mapped, to out. */
static int bytelevel_split(const nb__pre_step *st, const char *s, size_t n, nb__pieces *out, nb__cps *cps,
                           unsigned char **kls, size_t *kcap, nb__buf *tmp) {
    cps->n = 0;
    if (st->add_prefix_space && (n == 0 || s[0] != ' ') && nb__cps_push(cps, ' ') < 0) return -1;
    if (nb__utf8_decode(cps, s, n) < 0) return -1;
    size_t m = cps->n;
    if (m > *kcap) {
        unsigned char *k = realloc(*kls, m);
        if (!k) return -1;
        *kls = k, *kcap = m;
    }
    for (size_t i = 0; i < m; i++) (*kls)[i] = (unsigned char)gpt2_class(cps->v[i]);
    for (size_t i = 0; i < m;) {
        size_t len = st->use_regex ? gpt2_match(cps->v, *kls, m, i) : m - i;
        tmp->n = 0;
        for (size_t j = i; j < i + len; j++) {
            unsigned char e[4];
            /* the character's UTF-8 bytes, each written as its alphabet character */
            uint32_t cp = cps->v[j];
            int ne = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (ne == 1) e[0] = (unsigned char)cp;
            else if (ne == 2) e[0] = (unsigned char)(0xC0 | cp >> 6), e[1] = (unsigned char)(0x80 | (cp & 0x3F));
            else if (ne == 3) {
                e[0] = (unsigned char)(0xE0 | cp >> 12), e[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
                e[2] = (unsigned char)(0x80 | (cp & 0x3F));
            } else {
                e[0] = (unsigned char)(0xF0 | cp >> 18), e[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
                e[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)), e[3] = (unsigned char)(0x80 | (cp & 0x3F));
            }
            for (int b = 0; b < ne; b++)
                if (nb__buf_putc(tmp, nb__byte_char(e[b])) < 0) return -1;
        }
        if (nb__pieces_add(out, tmp->s, tmp->n) < 0) return -1;
        i += len;
    }
    return 0;
}

int nb__tok_pretokenize(const nb_tokenizer *t, const char *s, size_t n, nb__pieces *words) {
    nb__pieces a = { 0 }, b = { 0 };
    nb__cps cps = { 0 };
    nb__buf tmp = { 0 };
    unsigned char *kls = NULL;
    size_t kcap = 0;
    int rc = -1;
    nb__pieces_clear(words);
    if (nb__pieces_add(&a, s, n) < 0) goto done;
    for (int st = 0; st < t->n_pre; st++) {
        nb__pieces_clear(&b);
        for (size_t i = 0; i < a.n; i++) {
            const char *p = a.buf.s + a.off[i];
            size_t len = a.len[i];
            int r;
            if (t->pre[st].kind == NB_PRE_BYTELEVEL) r = bytelevel_split(&t->pre[st], p, len, &b, &cps, &kls, &kcap, &tmp);
            else r = pre_bert(p, len, t->pre[st].kind == NB_PRE_BERT, &b, &cps);
            if (r < 0) goto done;
        }
        nb__pieces sw = a;
        a = b, b = sw;
    }
    for (size_t i = 0; i < a.n; i++)
        if (a.len[i] && nb__pieces_add(words, a.buf.s + a.off[i], a.len[i]) < 0) goto done;
    rc = 0;
done:
    nb__pieces_free(&a);
    nb__pieces_free(&b);
    free(cps.v);
    free(tmp.s);
    free(kls);
    return rc;
}
