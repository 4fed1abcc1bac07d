/* BPE: GPT-2's byte-to-unicode alphabet, and the model of `tokenizers`: ignore_merges, byte
   fallback to <0xNN> tokens, unknown tokens (fused or not), and the merge loop (lowest rank
   first, leftmost on ties, on a heap so a long word costs n log n). The pre-tokenizers,
   GPT-2's pattern among them, are in tokenizer_pre.c. */
#include "hf_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- the byte alphabet (GPT-2's bytes_to_unicode) ---------- */
/* Printable bytes stand for themselves; the other 68 take 256, 257, ... in byte order. */
static bool byte_is_printable(unsigned b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t nb__byte_char(unsigned b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 256 + b;            /* 0x00-0x20: 256-288 */
    if (b <= 0xA0) return 289 + (b - 0x7F);   /* 0x7F-0xA0: 289-322 */
    return 323;                               /* 0xAD */
}

int nb__char_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 0x7F);
    return cp == 323 ? 0xAD : -1;
}

/* ---------- the BPE merges ---------- */
typedef struct {
    int64_t id;
    int64_t prev, next; /* neighbours, -1 at the ends */
    bool gone;
} bpe_sym;
typedef struct {
    uint32_t rank;
    uint32_t pos;
    int64_t new_id;
} bpe_merge;

static bool merge_less(const bpe_merge *a, const bpe_merge *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(bpe_merge *h, size_t *n, bpe_merge m) {
    size_t i = (*n)++;
    h[i] = m;
    while (i && merge_less(&h[i], &h[(i - 1) / 2])) {
        bpe_merge t = h[i];
        h[i] = h[(i - 1) / 2], h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static bpe_merge heap_pop(bpe_merge *h, size_t *n) {
    bpe_merge top = h[0];
    h[0] = h[--*n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && merge_less(&h[l], &h[m])) m = l;
        if (r < *n && merge_less(&h[r], &h[m])) m = r;
        if (m == i) break;
        bpe_merge t = h[i];
        h[i] = h[m], h[m] = t;
        i = m;
    }
    return top;
}

static bool pair_merge(const nb_tokenizer *t, int64_t a, int64_t b, uint32_t *rank, int64_t *new_id) {
    uint64_t v;
    if (!nb__u64map_get(&t->merges, (uint64_t)a << 32 | (uint64_t)b, &v)) return false;
    *rank = (uint32_t)(v >> 32);
    *new_id = (int64_t)(v & 0xFFFFFFFFu);
    return true;
}

/* Appends a symbol to the growable array; 0 or <0. */
static int sym_push(bpe_sym **sym, size_t *n, size_t *cap, int64_t id) {
    if (nb__tok_grow((void **)sym, cap, *n, sizeof **sym) < 0) return -1;
    (*sym)[(*n)++] = (bpe_sym){ id, 0, 0, false };
    return 0;
}

int nb__bpe_word(const nb_tokenizer *t, const char *w, size_t n, nb__ids *out) {
    if (!n) return 0;
    if (t->ignore_merges) {
        int64_t id = nb__strmap_get(&t->vocab, w, n);
        if (id >= 0) return nb__ids_push(out, id);
    }
    size_t plen = strlen(t->prefix), slen = strlen(t->suffix);
    bpe_sym *sym = NULL;
    bpe_merge *heap = NULL;
    size_t ns = 0, scap = 0;
    int rc = -1;
    char *key = malloc(plen + slen + 8);
    if (!key) return -1;
    int64_t unk = -1; /* a pending unknown symbol (fuse_unk joins a run of them) */
    const unsigned char *u = (const unsigned char *)w;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        (void)nb__utf8_next(u, n, &j);
        size_t kl = 0;
        if (i > 0) memcpy(key, t->prefix, plen), kl = plen;
        memcpy(key + kl, w + i, j - i), kl += j - i;
        if (j == n) memcpy(key + kl, t->suffix, slen), kl += slen;
        int64_t id = nb__strmap_get(&t->vocab, key, kl);
        if (id >= 0) {
            if (unk >= 0 && sym_push(&sym, &ns, &scap, unk) < 0) goto done;
            unk = -1;
            if (sym_push(&sym, &ns, &scap, id) < 0) goto done;
        } else {
            bool fell_back = false;
            if (t->byte_fallback) {
                /* every byte as its <0xXX> token, or none of them (as `tokenizers`, a pending
                   unknown symbol stays pending across the bytes) */
                size_t k = 0;
                for (; k < kl; k++) {
                    char code[8];
                    snprintf(code, sizeof code, "<0x%02X>", (unsigned char)key[k]);
                    if (nb__strmap_get(&t->vocab, code, 6) < 0) break;
                }
                if (k == kl) {
                    for (k = 0; k < kl; k++) {
                        char code[8];
                        snprintf(code, sizeof code, "<0x%02X>", (unsigned char)key[k]);
                        if (sym_push(&sym, &ns, &scap, nb__strmap_get(&t->vocab, code, 6)) < 0) goto done;
                    }
                    fell_back = true;
                }
            }
            if (!fell_back && t->unk_id >= 0) {
                if (unk >= 0 && !t->fuse_unk && sym_push(&sym, &ns, &scap, unk) < 0) goto done;
                unk = t->unk_id;
            }
            /* no unknown token: `tokenizers` drops the character, and so does nabla */
        }
        i = j;
    }
    if (unk >= 0 && sym_push(&sym, &ns, &scap, unk) < 0) goto done;
    /* each merge pushes at most two entries: 3 ns bounds the heap */
    heap = malloc((3 * ns + 1) * sizeof *heap);
    if (!heap) goto done;
    for (size_t i = 0; i < ns; i++) sym[i].prev = (int64_t)i - 1, sym[i].next = i + 1 < ns ? (int64_t)i + 1 : -1;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        uint32_t rank;
        int64_t nid;
        if (pair_merge(t, sym[i].id, sym[i + 1].id, &rank, &nid)) heap_push(heap, &hn, (bpe_merge){ rank, (uint32_t)i, nid });
    }
    while (hn) {
        bpe_merge top = heap_pop(heap, &hn);
        bpe_sym *s = &sym[top.pos];
        if (s->gone || s->next < 0) continue;
        bpe_sym *r = &sym[s->next];
        uint32_t rank;
        int64_t nid;
        /* an entry made stale by an earlier merge no longer names this pair's result */
        if (!pair_merge(t, s->id, r->id, &rank, &nid) || nid != top.new_id) continue;
        s->id = top.new_id;
        r->gone = true;
        s->next = r->next;
        if (r->next >= 0) sym[r->next].prev = top.pos;
        if (s->prev >= 0 && pair_merge(t, sym[s->prev].id, s->id, &rank, &nid))
            heap_push(heap, &hn, (bpe_merge){ rank, (uint32_t)s->prev, nid });
        if (s->next >= 0 && pair_merge(t, s->id, sym[s->next].id, &rank, &nid))
            heap_push(heap, &hn, (bpe_merge){ rank, top.pos, nid });
    }
    rc = 0;
    for (size_t i = 0; i < ns && rc == 0; i++)
        if (!sym[i].gone) rc = nb__ids_push(out, sym[i].id);
done:
    free(sym), free(heap), free(key);
    return rc;
}
