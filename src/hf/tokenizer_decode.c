/* The decoders: tokens back to text (ByteLevel's bytes, WordPiece's "##" joins and clean-up, or
   the tokens joined by spaces when tokenizer.json has none), as `tokenizers` decodes. */
#include "hf_impl.h"

#include <stdlib.h>
#include <string.h>

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
