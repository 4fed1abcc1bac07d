/* The pre-tokenizers, run in the order tokenizer.json lists them: BERT's and the white-space
   split, ByteLevel, Metaspace, and Split with a literal or one of the regexes written out here by
   hand over the Unicode class tables (GPT-2's; Llama 3's, which is cl100k's). Every step cuts a
   piece into spans and keeps some, as `tokenizers`' NormalizedString::split does. */
#include "hf_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------- spans ---------- */
/* Bytes [off, off + len) of a piece's text; match: the step's pattern matched them. */
typedef struct {
    size_t off, len;
    bool match;
} span;
typedef struct {
    span *v;
    size_t n, cap;
} spans;

static int span_push(spans *s, size_t off, size_t len, bool match) {
    if (nb__tok_grow((void **)&s->v, &s->cap, s->n, sizeof *s->v) < 0) return -1;
    s->v[s->n++] = (span){ off, len, match };
    return 0;
}

/* The spans a split keeps, from the matched and unmatched spans that tile the text (in place):
   tokenizers' SplitDelimiterBehavior. */
static void apply_behavior(spans *s, int behavior) {
    size_t m = 0;
    bool prev = false;
    if (behavior == NB_SPLIT_MERGED_NEXT) { /* a match joins the span after it: walk backwards */
        size_t w = s->n;
        for (size_t i = s->n; i-- > 0;) {
            span x = s->v[i];
            if (x.match && !prev && w < s->n) s->v[w].off = x.off, s->v[w].len += x.len;
            else s->v[--w] = x, s->v[w].match = false;
            prev = x.match;
        }
        memmove(s->v, s->v + w, (s->n - w) * sizeof *s->v);
        s->n -= w;
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        span x = s->v[i];
        bool join = m > 0 && ((behavior == NB_SPLIT_CONTIGUOUS && x.match == prev) ||
                              (behavior == NB_SPLIT_MERGED_PREVIOUS && x.match && !prev));
        prev = x.match;
        if (behavior == NB_SPLIT_REMOVED && x.match) continue;
        if (join) s->v[m - 1].len = x.off + x.len - s->v[m - 1].off;
        else s->v[m++] = x;
    }
    s->n = m;
}

/* ---------- the hand-coded patterns ----------
   Each match at position i is the first alternative that matches there; every character is a
   letter, a number, white space or none of those, and each pattern has an alternative for each
   class, so the matches tile the text. */
enum { CL_OTHER, CL_L, CL_N, CL_SPACE };
static int char_class(uint32_t cp) {
    if (nb__uc_space(cp)) return CL_SPACE;
    int c = nb__uc_class(cp);
    return c == NB_UC_L ? CL_L : c == NB_UC_N ? CL_N : CL_OTHER;
}

static bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* The length of white space at i: \s+(?!\S), else \s+ (a run less its last character when a
   non-space follows and that leaves some). */
static size_t space_run(const unsigned char *k, size_t n, size_t i) {
    size_t j = i;
    while (j < n && k[j] == CL_SPACE) j++;
    if (j < n && j - i >= 2) j--;
    return j - i;
}

/* The contraction at i ('s 't 're 've 'm 'll 'd), case-insensitive when fold: its length or 0.
   Oniguruma's case folding gives 's' two more forms, 'S' and U+017F (long s). */
static size_t contraction(const uint32_t *c, size_t n, size_t i, bool fold) {
    if (c[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = c[i + 1], b = i + 2 < n ? c[i + 2] : 0;
    if (fold) {
        a = a == 0x17F ? 's' : a - 'A' < 26 ? a + 32 : a;
        b = b == 0x17F ? 's' : b - 'A' < 26 ? b + 32 : b;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* GPT-2's: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
   The length (in code points) of the match at i of the n code points c (classes k). */
static size_t gpt2_match(const uint32_t *c, const unsigned char *k, size_t n, size_t i) {
    size_t q = contraction(c, n, i, false);
    if (q) return q;
    size_t j = i + (c[i] == ' ' && i + 1 < n && k[i + 1] != CL_SPACE);
    if (k[j] != CL_SPACE) {
        int want = k[j];
        while (j < n && k[j] == want) j++;
        return j - i;
    }
    return space_run(k, n, i);
}

/* Llama 3's (and cl100k's): (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t llama3_match(const uint32_t *c, const unsigned char *k, size_t n, size_t i) {
    size_t q = contraction(c, n, i, true), j = i;
    if (q) return q;
    /* one character that is no letter, number, \r or \n may lead a run of letters */
    if (k[i] != CL_L && k[i] != CL_N && !is_crlf(c[i]) && i + 1 < n && k[i + 1] == CL_L) j++;
    if (k[j] == CL_L) {
        while (j < n && k[j] == CL_L) j++;
        return j - i;
    }
    if (k[i] == CL_N) {
        while (j < n && j - i < 3 && k[j] == CL_N) j++;
        return j - i;
    }
    j = i + (c[i] == ' ' && i + 1 < n && k[i + 1] == CL_OTHER);
    if (k[j] == CL_OTHER) {
        while (j < n && k[j] == CL_OTHER) j++;
        while (j < n && is_crlf(c[j])) j++;
        return j - i;
    }
    /* white space: \s*[\r\n]+ backs off to the run's last \r or \n, if it has one */
    size_t last = 0;
    for (j = i; j < n && k[j] == CL_SPACE; j++)
        if (is_crlf(c[j])) last = j + 1;
    return last ? last - i : space_run(k, n, i);
}

/* ---------- the steps ---------- */
/* What the steps share: decoded code points, their classes and byte offsets, rewritten text. */
typedef struct {
    nb__cps cps;
    unsigned char *kls;
    size_t *boff;
    size_t cap;
    nb__buf text, tmp;
    spans sp;
} scratch;

/* The matches of a hand-coded pattern in s[0..n), which tile it, into sc->sp. */
static int pattern_spans(int pattern, const char *s, size_t n, scratch *sc) {
    sc->cps.n = 0;
    if (nb__utf8_decode(&sc->cps, s, n) < 0) return -1;
    size_t m = sc->cps.n;
    if (m + 1 > sc->cap) {
        unsigned char *k = realloc(sc->kls, m + 1);
        if (k) sc->kls = k;
        size_t *b = realloc(sc->boff, (m + 1) * sizeof *b);
        if (b) sc->boff = b;
        if (!k || !b) return -1;
        sc->cap = m + 1;
    }
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0, at = 0; i < m; i++) {
        sc->kls[i] = (unsigned char)char_class(sc->cps.v[i]);
        sc->boff[i] = at;
        (void)nb__utf8_next(u, n, &at);
    }
    sc->boff[m] = n;
    for (size_t i = 0; i < m;) {
        size_t len = pattern == NB_PAT_GPT2 ? gpt2_match(sc->cps.v, sc->kls, m, i) : llama3_match(sc->cps.v, sc->kls, m, i);
        if (span_push(&sc->sp, sc->boff[i], sc->boff[i + len] - sc->boff[i], true) < 0) return -1;
        i += len;
    }
    return 0;
}

/* The occurrences of lit (non-overlapping, leftmost first) and the stretches between them. */
static int literal_spans(const char *lit, size_t ll, const char *s, size_t n, scratch *sc) {
    size_t prev = 0;
    for (size_t i = 0; ll && i + ll <= n;) {
        if (memcmp(s + i, lit, ll) != 0) {
            i++;
            continue;
        }
        if ((i > prev && span_push(&sc->sp, prev, i - prev, false) < 0) || span_push(&sc->sp, i, ll, true) < 0) return -1;
        i += ll, prev = i;
    }
    return n > prev ? span_push(&sc->sp, prev, n - prev, false) : 0;
}

/* BERT's punctuation: ASCII punctuation or a P* character (of Unicode 9.0, as tokenizers). */
static bool is_bert_punct(uint32_t c) {
    if (c < 128) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return nb__uc_bert_class(c) == NB_UC_P;
}

/* The white space split (spaces removed; BERT's also isolates each punctuation character). */
static int space_spans(bool bert, const char *s, size_t n, scratch *sc) {
    const unsigned char *u = (const unsigned char *)s;
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint32_t c = nb__utf8_next(u, n, &j);
        bool sp = nb__uc_space(c), p = !sp && bert && is_bert_punct(c);
        if (sp || p) {
            if ((i > start && span_push(&sc->sp, start, i - start, false) < 0) || (p && span_push(&sc->sp, i, j - i, false) < 0))
                return -1;
            start = j;
        }
        i = j;
    }
    return n > start ? span_push(&sc->sp, start, n - start, false) : 0;
}

/* Metaspace: spaces become the replacement, which may lead the piece (into sc->text); split,
   each replacement begins a span. */
static int metaspace_spans(const nb__pre_step *st, const char **s, size_t *n, bool lead, scratch *sc) {
    char rep[4];
    sc->text.n = 0;
    if (nb__buf_putc(&sc->text, st->replacement) < 0) return -1;
    size_t rl = sc->text.n;
    memcpy(rep, sc->text.s, rl);
    /* tokenizers prepends to a piece not empty and not starting with the replacement (after
       the spaces became it), and with "first" only to the one that begins the input */
    if (!*n || (*s)[0] == ' ' || (*n >= rl && memcmp(*s, rep, rl) == 0) || st->prepend == NB_PREPEND_NEVER ||
        (st->prepend == NB_PREPEND_FIRST && !lead))
        sc->text.n = 0;
    for (size_t i = 0; i < *n; i++)
        if (((*s)[i] == ' ' ? nb__buf_put(&sc->text, rep, rl) : nb__buf_put(&sc->text, *s + i, 1)) < 0) return -1;
    *s = sc->text.s ? sc->text.s : "", *n = sc->text.n;
    if (!st->split) return span_push(&sc->sp, 0, *n, false);
    if (literal_spans(rep, rl, *s, *n, sc) < 0) return -1;
    apply_behavior(&sc->sp, NB_SPLIT_MERGED_NEXT);
    return 0;
}

/* The spans of one step over the piece s[0..n), into sc->sp; the step may rewrite the piece
   first (*s, *n then point at sc->text). lead: the piece begins the input. */
static int step_spans(const nb__pre_step *st, const char **s, size_t *n, bool lead, scratch *sc) {
    switch (st->kind) {
    case NB_PRE_BERT:
    case NB_PRE_WHITESPACE_SPLIT: return space_spans(st->kind == NB_PRE_BERT, *s, *n, sc);
    case NB_PRE_BYTELEVEL:
        if (st->add_prefix_space && *n && (*s)[0] != ' ') {
            sc->text.n = 0;
            if (nb__buf_put(&sc->text, " ", 1) < 0 || nb__buf_put(&sc->text, *s, *n) < 0) return -1;
            *s = sc->text.s, *n = sc->text.n;
        }
        return st->use_regex ? pattern_spans(NB_PAT_GPT2, *s, *n, sc) : span_push(&sc->sp, 0, *n, false);
    case NB_PRE_METASPACE: return metaspace_spans(st, s, n, lead, sc);
    case NB_PRE_SPLIT:
        if (st->pattern == NB_PAT_STRING) {
            if (literal_spans(st->literal, strlen(st->literal), *s, *n, sc) < 0) return -1;
        } else if (pattern_spans(st->pattern, *s, *n, sc) < 0) return -1;
        for (size_t i = 0; st->invert && i < sc->sp.n; i++) sc->sp.v[i].match = !sc->sp.v[i].match;
        apply_behavior(&sc->sp, st->behavior);
        return 0;
    }
    return 0;
}

int nb__tok_pretokenize(const nb_tokenizer *t, const char *s, size_t n, bool at_start, nb__pieces *words) {
    nb__pieces a = { 0 }, b = { 0 };
    scratch sc = { 0 };
    int rc = -1;
    nb__pieces_clear(words);
    if (nb__pieces_add(&a, s, n) < 0) goto done;
    /* lead: a's first piece begins the input (a step that drops the start of the text ends it) */
    bool lead = at_start;
    for (int st = 0; st < t->n_pre; st++) {
        const nb__pre_step *step = &t->pre[st];
        nb__pieces_clear(&b);
        bool next_lead = false;
        for (size_t i = 0; i < a.n; i++) {
            const char *p = a.buf.s + a.off[i];
            size_t len = a.len[i];
            sc.sp.n = 0;
            if (step_spans(step, &p, &len, lead && i == 0, &sc) < 0) goto done;
            for (size_t k = 0; k < sc.sp.n; k++) {
                const span *x = &sc.sp.v[k];
                if (!x->len) continue; /* tokenizers drops empty pieces after every step */
                if (b.n == 0) next_lead = lead && i == 0 && x->off == 0;
                if (step->kind != NB_PRE_BYTELEVEL) {
                    if (nb__pieces_add(&b, p + x->off, x->len) < 0) goto done;
                    continue;
                }
                sc.tmp.n = 0; /* each byte as its character of GPT-2's alphabet */
                for (size_t q = x->off; q < x->off + x->len; q++)
                    if (nb__buf_putc(&sc.tmp, nb__byte_char((unsigned char)p[q])) < 0) goto done;
                if (nb__pieces_add(&b, sc.tmp.s, sc.tmp.n) < 0) goto done;
            }
        }
        nb__pieces sw = a;
        a = b, b = sw;
        lead = next_lead;
    }
    for (size_t i = 0; i < a.n; i++)
        if (a.len[i] && nb__pieces_add(words, a.buf.s + a.off[i], a.len[i]) < 0) goto done;
    rc = 0;
done:
    nb__pieces_free(&a);
    nb__pieces_free(&b);
    free(sc.cps.v), free(sc.kls), free(sc.boff), free(sc.text.s), free(sc.tmp.s), free(sc.sp.v);
    return rc;
}
