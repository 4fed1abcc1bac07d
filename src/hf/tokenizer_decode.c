/* The decoders, a chain of steps from tokens to text as `tokenizers`' decode_chain: ByteLevel's
   bytes, WordPiece's "##" joins and clean-up, Metaspace, and the SentencePiece steps of Llama 2
   (Replace, ByteFallback, Fuse, Strip); with none the tokens are joined by spaces. */
#include "hf_impl.h"

#include <stdlib.h>
#include <string.h>

/* tokenizers' WordPiece cleanup, applied to each token. */
static int cleanup(nb__buf *b) {
    static const char *const from[] = { " .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not", " 's", " 've", " 're" };
    static const char *const to[] = { ".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve", "'re" };
    for (int r = 0; r < 11; r++) {
        if (b->n < strlen(from[r]) || !strstr(b->s, from[r])) continue;
        nb__buf o = { 0 };
        if (nb__replace_all(&o, b->s, b->n, from[r], to[r]) < 0) return free(o.s), -1;
        free(b->s);
        *b = o;
    }
    return 0;
}

/* Whether s[0..n) is valid UTF-8 (a U+FFFD read from bytes that are not U+FFFD's own is an error). */
static bool utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (nb__utf8_next(u, n, &j) == 0xFFFD && !(j - i == 3 && u[i] == 0xEF && u[i + 1] == 0xBF && u[i + 2] == 0xBD))
            return false;
        i = j;
    }
    return true;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
}

/* The byte of a token "<0xNN>" (Rust's u8::from_str_radix on NN: a leading '+' is allowed), or -1. */
static int byte_token(const char *tok, size_t n) {
    if (n != 6 || memcmp(tok, "<0x", 3) != 0 || tok[5] != '>') return -1;
    int hi = tok[3] == '+' ? 0 : hex_digit(tok[3]), lo = hex_digit(tok[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* ByteFallback's end of a run of byte tokens: their bytes as one token when they are UTF-8,
   else one U+FFFD a byte. */
static int flush_bytes(nb__buf *bytes, nb__pieces *b) {
    if (!bytes->n) return 0;
    int rc = 0;
    if (utf8_valid(bytes->s, bytes->n)) rc = nb__pieces_add(b, bytes->s, bytes->n);
    else
        for (size_t k = 0; k < bytes->n && rc == 0; k++) rc = nb__pieces_add(b, "\xef\xbf\xbd", 3);
    bytes->n = 0;
    return rc;
}

/* The n characters of a token less Strip's cuts: up to start copies of ch at its start, up to stop at its end. */
static int strip(const nb__dec_step *d, const char *tok, size_t len, nb__cps *cps, nb__buf *one) {
    cps->n = 0;
    if (nb__utf8_decode(cps, tok, len) < 0) return -1;
    size_t a = 0, z = cps->n;
    while (a < cps->n && (int64_t)a < d->start && cps->v[a] == d->ch) a++;
    while (z > 0 && (int64_t)(cps->n - z) < d->stop && cps->v[z - 1] == d->ch) z--;
    /* the cuts may cross on a token of nothing but ch (tokenizers panics there): nothing is left */
    for (size_t i = a; i < z; i++)
        if (nb__buf_putc(one, cps->v[i]) < 0) return -1;
    return 0;
}

/* One decoder step: the tokens of a into b (emptied first). */
static int dec_step(const nb__dec_step *d, const nb__pieces *a, nb__pieces *b, nb__buf *one, nb__cps *cps) {
    nb__pieces_clear(b);
    one->n = 0;
    if (d->kind == NB_DEC_BYTELEVEL) {
        /* each token's characters as bytes of the alphabet (a token with a character outside it,
           an added token, stays as its UTF-8), then the bytes read as UTF-8 with U+FFFD */
        for (size_t i = 0; i < a->n; i++) {
            const char *tok = a->buf.s + a->off[i];
            const unsigned char *u = (const unsigned char *)tok;
            size_t len = a->len[i], mark = one->n;
            bool all = true;
            for (size_t j = 0; j < len && all;) {
                int c = nb__char_byte(nb__utf8_next(u, len, &j));
                unsigned char ch = (unsigned char)c;
                if (c < 0) all = false;
                else if (nb__buf_put(one, &ch, 1) < 0) return -1;
            }
            if (!all) {
                one->n = mark;
                if (nb__buf_put(one, tok, len) < 0) return -1;
            }
        }
        nb__buf clean = { 0 };
        int rc = nb__utf8_sanitize(&clean, one->s ? one->s : "", one->n);
        if (rc == 0) rc = nb__pieces_add(b, clean.s, clean.n);
        free(clean.s);
        return rc;
    }
    if (d->kind == NB_DEC_FUSE) {
        for (size_t i = 0; i < a->n; i++)
            if (nb__buf_put(one, a->buf.s + a->off[i], a->len[i]) < 0) return -1;
        return nb__pieces_add(b, one->s ? one->s : "", one->n);
    }
    if (d->kind == NB_DEC_BYTEFALLBACK) { /* one holds the bytes of the run of byte tokens so far */
        for (size_t i = 0; i < a->n; i++) {
            int byte = byte_token(a->buf.s + a->off[i], a->len[i]);
            unsigned char c = (unsigned char)byte;
            if (byte >= 0 ? nb__buf_put(one, &c, 1) < 0
                          : flush_bytes(one, b) < 0 || nb__pieces_add(b, a->buf.s + a->off[i], a->len[i]) < 0)
                return -1;
        }
        return flush_bytes(one, b);
    }
    for (size_t i = 0; i < a->n; i++) {
        const char *tok = a->buf.s + a->off[i];
        size_t len = a->len[i], pl;
        one->n = 0;
        int rc = 0;
        switch (d->kind) {
        case NB_DEC_WORDPIECE:
            pl = strlen(d->pattern);
            if (i && len >= pl && memcmp(tok, d->pattern, pl) == 0) rc = nb__buf_put(one, tok + pl, len - pl);
            else rc = (i && nb__buf_put(one, " ", 1) < 0) ? -1 : nb__buf_put(one, tok, len);
            if (rc == 0 && !one->s) rc = nb__buf_put(one, "", 0);
            if (rc == 0 && d->cleanup) rc = cleanup(one);
            break;
        case NB_DEC_REPLACE: rc = nb__replace_all(one, tok, len, d->pattern, d->content); break;
        case NB_DEC_STRIP: rc = strip(d, tok, len, cps, one); break;
        case NB_DEC_METASPACE: /* the replacement is a space, or nothing in the first token */
            cps->n = 0;
            rc = nb__utf8_decode(cps, tok, len);
            for (size_t k = 0; k < cps->n && rc == 0; k++)
                if (cps->v[k] != d->ch || !(i == 0 && d->prepend)) rc = nb__buf_putc(one, cps->v[k] == d->ch ? ' ' : cps->v[k]);
            break;
        }
        if (rc < 0 || nb__pieces_add(b, one->s ? one->s : "", one->n) < 0) return -1;
    }
    return 0;
}

int nb__tok_decode(const nb_tokenizer *t, const char *const *toks, size_t n, nb__buf *out) {
    nb__pieces a = { 0 }, b = { 0 };
    nb__buf one = { 0 };
    nb__cps cps = { 0 };
    int rc = -1;
    for (size_t i = 0; i < n; i++)
        if (nb__pieces_add(&a, toks[i], strlen(toks[i])) < 0) goto done;
    for (int s = 0; s < t->n_dec; s++) {
        if (dec_step(&t->dec[s], &a, &b, &one, &cps) < 0) goto done;
        nb__pieces sw = a;
        a = b, b = sw;
    }
    /* decode_chain's tokens joined; with no decoder, by spaces */
    for (size_t i = 0; i < a.n; i++)
        if ((i && !t->n_dec && nb__buf_put(out, " ", 1) < 0) || nb__buf_put(out, a.buf.s + a.off[i], a.len[i]) < 0) goto done;
    rc = out->s ? 0 : nb__buf_put(out, "", 0);
done:
    nb__pieces_free(&a);
    nb__pieces_free(&b);
    free(one.s);
    free(cps.v);
    return rc;
}
