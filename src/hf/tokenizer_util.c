/* The tokenizers' plumbing: Unicode look-ups over the generated tables, UTF-8 reading with
   replacement, growable buffers, and the two hash maps (token strings, id pairs). */
#include "hf_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------- Unicode ---------- */
static int range_find(const nb__uc_range *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return r[mid].v;
    }
    return 0;
}

int nb__uc_class(uint32_t cp) {
    if (cp < 128) { /* the hot path: ASCII */
        if ((cp | 32) - 'a' < 26) return NB_UC_L;
        if (cp - '0' < 10) return NB_UC_N;
    }
    return range_find(nb__uc_classes, nb__uc_classes_n, cp);
}

int nb__uc_bert_class(uint32_t cp) {
    if ((cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000) return cp <= 0x10FFFD && (cp & 0xFFFF) <= 0xFFFD ? NB_UC_OTHER : 0;
    return range_find(nb__uc_bert9, nb__uc_bert9_n, cp);
}

int nb__uc_combining(uint32_t cp) { return cp < 0x300 ? 0 : range_find(nb__uc_ccc, nb__uc_ccc_n, cp); }

bool nb__uc_space(uint32_t cp) {
    /* White_Space (PropList.txt), unchanged since Unicode 6.3 */
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static const nb__uc_mapn *mapn_find(const nb__uc_mapn *m, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (cp < m[mid].cp) hi = mid - 1;
        else if (cp > m[mid].cp) lo = mid + 1;
        else return &m[mid];
    }
    return NULL;
}

int nb__uc_lower(uint32_t cp, uint32_t out[3]) {
    if (cp < 128) {
        out[0] = cp - 'A' < 26 ? cp + 32 : cp;
        return 1;
    }
    int lo = 0, hi = nb__uc_lower1_n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (cp < nb__uc_lower1[mid].cp) hi = mid - 1;
        else if (cp > nb__uc_lower1[mid].cp) lo = mid + 1;
        else {
            out[0] = nb__uc_lower1[mid].to;
            return 1;
        }
    }
    const nb__uc_mapn *m = mapn_find(nb__uc_lowern, nb__uc_lowern_n, cp);
    if (m && m->len <= 3) {
        for (uint32_t i = 0; i < m->len; i++) out[i] = nb__uc_lower_pool[m->off + i];
        return (int)m->len;
    }
    out[0] = cp;
    return 1;
}

int nb__uc_decompose(uint32_t cp, uint32_t out[4]) {
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllables: the algorithm of Unicode chapter 3.12 */
        uint32_t s = cp - 0xAC00, l = s / 588, v = (s % 588) / 28, t = s % 28;
        out[0] = 0x1100 + l;
        out[1] = 0x1161 + v;
        if (!t) return 2;
        out[2] = 0x11A7 + t;
        return 3;
    }
    const nb__uc_mapn *m = cp < 0xC0 ? NULL : mapn_find(nb__uc_nfd, nb__uc_nfd_n, cp);
    if (m && m->len <= 4) {
        for (uint32_t i = 0; i < m->len; i++) out[i] = nb__uc_nfd_pool[m->off + i];
        return (int)m->len;
    }
    out[0] = cp;
    return 1;
}

/* ---------- UTF-8 ---------- */
uint32_t nb__utf8_next(const unsigned char *s, size_t n, size_t *i) {
    size_t p = *i;
    unsigned c = s[p];
    if (c < 0x80) {
        *i = p + 1;
        return c;
    }
    int need;
    uint32_t cp;
    unsigned lo = 0x80, hi = 0xBF; /* the valid range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2, cp = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3, cp = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *i = p + 1;
        return 0xFFFD;
    }
    /* the maximal subpart: the bytes that could still begin a valid sequence are one U+FFFD */
    size_t q = p + 1;
    for (int k = 0; k < need; k++, q++) {
        unsigned b = q < n ? s[q] : 0;
        unsigned blo = k == 0 ? lo : 0x80, bhi = k == 0 ? hi : 0xBF;
        if (q >= n || b < blo || b > bhi) {
            *i = q;
            return 0xFFFD;
        }
        cp = cp << 6 | (b & 0x3F);
    }
    *i = q;
    return cp;
}

int nb__tok_grow(void **v, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 16;
    if (c < *cap || c > SIZE_MAX / elem) return -1;
    void *p = realloc(*v, c * elem);
    if (!p) return -1;
    *v = p, *cap = c;
    return 0;
}

int nb__cps_push(nb__cps *c, uint32_t cp) {
    if (nb__tok_grow((void **)&c->v, &c->cap, c->n, sizeof *c->v) < 0) return -1;
    c->v[c->n++] = cp;
    return 0;
}

int nb__utf8_decode(nb__cps *cps, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;)
        if (nb__cps_push(cps, nb__utf8_next(u, n, &i)) < 0) return -1;
    return 0;
}

static int buf_reserve(nb__buf *b, size_t extra) {
    if (extra > SIZE_MAX / 2 - b->n) return -1;
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) return -1;
    b->s = s, b->cap = cap;
    return 0;
}

int nb__buf_put(nb__buf *b, const void *p, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
    return 0;
}

int nb__buf_putc(nb__buf *b, uint32_t cp) {
    unsigned char e[4];
    size_t k;
    if (cp < 0x80) e[0] = (unsigned char)cp, k = 1;
    else if (cp < 0x800) e[0] = (unsigned char)(0xC0 | cp >> 6), e[1] = (unsigned char)(0x80 | (cp & 0x3F)), k = 2;
    else if (cp < 0x10000) {
        e[0] = (unsigned char)(0xE0 | cp >> 12), e[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        e[2] = (unsigned char)(0x80 | (cp & 0x3F)), k = 3;
    } else {
        e[0] = (unsigned char)(0xF0 | cp >> 18), e[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        e[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)), e[3] = (unsigned char)(0x80 | (cp & 0x3F)), k = 4;
    }
    return nb__buf_put(b, e, k);
}

int nb__utf8_sanitize(nb__buf *out, const char *s, size_t n) {
    out->n = 0;
    if (buf_reserve(out, n) < 0) return -1;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        /* copy a run of ASCII at once */
        while (j < n && u[j] < 0x80) j++;
        if (j > i && nb__buf_put(out, s + i, j - i) < 0) return -1;
        if (j >= n) break;
        size_t k = j;
        uint32_t cp = nb__utf8_next(u, n, &k);
        if (cp == 0xFFFD && !(k - j == 3 && u[j] == 0xEF && u[j + 1] == 0xBF && u[j + 2] == 0xBD)) {
            if (nb__buf_putc(out, 0xFFFD) < 0) return -1;
        } else if (nb__buf_put(out, s + j, k - j) < 0) return -1;
        i = k;
    }
    out->s[out->n] = 0; /* buf_reserve made room for it */
    return 0;
}

int nb__replace_all(nb__buf *out, const char *s, size_t n, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), prev = 0;
    for (size_t i = 0; fl && i + fl <= n;) {
        if (s[i] != from[0] || memcmp(s + i, from, fl) != 0) {
            i++;
            continue;
        }
        if (nb__buf_put(out, s + prev, i - prev) < 0 || nb__buf_put(out, to, tl) < 0) return -1;
        i += fl, prev = i;
    }
    return nb__buf_put(out, s + prev, n - prev);
}

int nb__ids_push(nb__ids *d, int64_t id) {
    if (nb__tok_grow((void **)&d->v, &d->cap, d->n, sizeof *d->v) < 0) return -1;
    d->v[d->n++] = id;
    return 0;
}

int nb__pieces_add(nb__pieces *ps, const char *p, size_t n) {
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 64;
        size_t *off = realloc(ps->off, cap * sizeof *off);
        if (!off) return -1;
        ps->off = off;
        size_t *len = realloc(ps->len, cap * sizeof *len);
        if (!len) return -1;
        ps->len = len, ps->cap = cap;
    }
    ps->off[ps->n] = ps->buf.n;
    ps->len[ps->n] = n;
    if (nb__buf_put(&ps->buf, p, n) < 0) return -1;
    ps->n++;
    return 0;
}

void nb__pieces_clear(nb__pieces *ps) {
    ps->n = 0;
    ps->buf.n = 0;
}

void nb__pieces_free(nb__pieces *ps) {
    free(ps->buf.s);
    free(ps->off);
    free(ps->len);
    memset(ps, 0, sizeof *ps);
}

/* ---------- hash maps ---------- */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ h >> 29;
}

static int strmap_grow(nb__strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    char **key = calloc(cap, sizeof *key);
    uint32_t *klen = calloc(cap, sizeof *klen);
    int64_t *val = calloc(cap, sizeof *val);
    if (!key || !klen || !val) {
        free(key), free(klen), free(val);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->key[i]) continue;
        size_t j = hash_bytes(m->key[i], m->klen[i]) & (cap - 1);
        while (key[j]) j = (j + 1) & (cap - 1);
        key[j] = m->key[i], klen[j] = m->klen[i], val[j] = m->val[i];
    }
    free(m->key), free(m->klen), free(m->val);
    m->key = key, m->klen = klen, m->val = val, m->cap = cap;
    return 0;
}

int nb__strmap_set(nb__strmap *m, const char *key, size_t klen, int64_t val) {
    if (klen > UINT32_MAX) return -1;
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m) < 0) return -1;
    size_t j = hash_bytes(key, klen) & (m->cap - 1);
    while (m->key[j]) {
        if (m->klen[j] == klen && memcmp(m->key[j], key, klen) == 0) {
            m->val[j] = val;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    char *k = malloc(klen + 1);
    if (!k) return -1;
    if (klen) memcpy(k, key, klen);
    k[klen] = 0;
    m->key[j] = k, m->klen[j] = (uint32_t)klen, m->val[j] = val;
    m->n++;
    return 0;
}

int64_t nb__strmap_get(const nb__strmap *m, const char *key, size_t klen) {
    if (!m->cap) return -1;
    size_t j = hash_bytes(key, klen) & (m->cap - 1);
    while (m->key[j]) {
        if (m->klen[j] == klen && memcmp(m->key[j], key, klen) == 0) return m->val[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void nb__strmap_free(nb__strmap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->key[i]);
    free(m->key), free(m->klen), free(m->val);
    memset(m, 0, sizeof *m);
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static int u64map_grow(nb__u64map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *key = malloc(cap * sizeof *key), *val = malloc(cap * sizeof *val);
    unsigned char *used = calloc(cap, 1);
    if (!key || !val || !used) {
        free(key), free(val), free(used);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        size_t j = hash_u64(m->key[i]) & (cap - 1);
        while (used[j]) j = (j + 1) & (cap - 1);
        used[j] = 1, key[j] = m->key[i], val[j] = m->val[i];
    }
    free(m->key), free(m->val), free(m->used);
    m->key = key, m->val = val, m->used = used, m->cap = cap;
    return 0;
}

int nb__u64map_set(nb__u64map *m, uint64_t key, uint64_t val) {
    if ((m->n + 1) * 2 > m->cap && u64map_grow(m) < 0) return -1;
    size_t j = hash_u64(key) & (m->cap - 1);
    while (m->used[j]) {
        if (m->key[j] == key) {
            m->val[j] = val;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->used[j] = 1, m->key[j] = key, m->val[j] = val;
    m->n++;
    return 0;
}

bool nb__u64map_get(const nb__u64map *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return false;
    size_t j = hash_u64(key) & (m->cap - 1);
    while (m->used[j]) {
        if (m->key[j] == key) {
            *val = m->val[j];
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

void nb__u64map_free(nb__u64map *m) {
    free(m->key), free(m->val), free(m->used);
    memset(m, 0, sizeof *m);
}
