/* The normalizers (BertNormalizer: clean text, CJK spacing, NFD accent stripping, lower case;
   Lowercase, NFD, StripAccents; SentencePiece's Prepend and Replace) and the WordPiece model
   (greedy longest match, "##" continuations, [UNK]). Each follows what `tokenizers` does,
   character class by character class. */
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
    nb__buf txt = { 0 }, rep = { 0 }, sw_buf;
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
        case NB_NORM_PREPEND: /* to a text that is not empty */
        case NB_NORM_REPLACE: /* literal, leftmost first: on the UTF-8 text */
            if (ns->kind == NB_NORM_PREPEND && !a.n) break;
            txt.n = 0;
            if (ns->kind == NB_NORM_PREPEND && nb__buf_put(&txt, ns->content, strlen(ns->content)) < 0) goto done;
            for (size_t i = 0; i < a.n; i++)
                if (nb__buf_putc(&txt, a.v[i]) < 0) goto done;
            if (ns->kind == NB_NORM_REPLACE) {
                rep.n = 0;
                if (nb__replace_all(&rep, txt.s ? txt.s : "", txt.n, ns->pattern, ns->content) < 0) goto done;
                sw_buf = txt, txt = rep, rep = sw_buf;
            }
            a.n = 0;
            if (nb__utf8_decode(&a, txt.s ? txt.s : "", txt.n) < 0) goto done;
            break;
        }
    }
    for (size_t i = 0; i < a.n; i++)
        if (nb__buf_putc(out, a.v[i]) < 0) goto done;
    if (nb__buf_put(out, "", 0) < 0) goto done;
    rc = 0;
done:
    free(a.v);
    free(b.v);
    free(txt.s);
    free(rep.s);
    return rc;
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
