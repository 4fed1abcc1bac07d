/* The library's one NumPy .npy reader and writer (format versions 1-3). */
#include "io_impl.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* What a descr such as '<f4' maps to: the file's element size and kind, and the nabla dtype it
   becomes. */
typedef struct {
    char kind;      /* f, i, u, b */
    int size;       /* bytes per element in the file */
    bool big;       /* big-endian elements */
    nb_dtype dtype; /* the tensor's dtype */
} npy_type;

static int parse_descr(const char *s, size_t n, npy_type *t, char *why, size_t wsz) {
    if (n < 3 || n > 4) {
        snprintf(why, wsz, "unsupported descr '%.*s'", (int)(n > 40 ? 40 : n), s);
        return -1;
    }
    char order = s[0];
    if (order != '<' && order != '>' && order != '|' && order != '=') {
        snprintf(why, wsz, "descr '%.*s' has no byte order", (int)n, s);
        return -1;
    }
    t->kind = s[1];
    t->size = 0;
    for (size_t i = 2; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) {
            snprintf(why, wsz, "unsupported descr '%.*s'", (int)n, s);
            return -1;
        }
        t->size = t->size * 10 + (s[i] - '0');
    }
    t->big = order == '>' && t->size > 1;
    static const struct { char kind; int size; nb_dtype dtype; } table[] = {
        { 'f', 4, NB_F32 }, { 'f', 8, NB_F64 }, { 'f', 2, NB_F16 }, { 'i', 8, NB_I64 }, { 'i', 4, NB_I32 },
        { 'u', 1, NB_U8 }, { 'b', 1, NB_BOOL }, { 'i', 1, NB_I8 }, { 'i', 2, NB_I32 }, { 'u', 2, NB_I32 },
        { 'u', 4, NB_I64 },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].kind == t->kind && table[i].size == t->size) {
            t->dtype = table[i].dtype;
            return 0;
        }
    snprintf(why, wsz, "unsupported descr '%.*s' (nabla reads f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 b1)", (int)n, s);
    return -1;
}

/* A tiny reader of the header's Python dict literal. */
typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string: sets *s and *n to its contents (no escapes are allowed in npy headers). */
static bool read_str(cursor *c, const char **s, size_t *n) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\') return false;
        c->p++;
    }
    if (c->p >= c->end) return false;
    *s = start;
    *n = (size_t)(c->p - start);
    c->p++;
    return true;
}

static bool read_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

static int parse_header(const char *h, size_t n, npy_type *t, bool *fortran, nb_shape *shape, char *why,
                        size_t wsz) {
    cursor c = { h, h + n };
    bool have_descr = false, have_order = false, have_shape = false;
    if (!eat(&c, '{')) {
        snprintf(why, wsz, "header is not a dict");
        return -1;
    }
    for (;;) {
        if (eat(&c, '}')) break;
        const char *k;
        size_t kn;
        if (!read_str(&c, &k, &kn) || !eat(&c, ':')) {
            snprintf(why, wsz, "malformed header dict");
            return -1;
        }
        if (kn == 5 && memcmp(k, "descr", 5) == 0 && !have_descr) {
            const char *s;
            size_t sn;
            if (!read_str(&c, &s, &sn)) {
                snprintf(why, wsz, "descr is not a string (structured dtypes are not supported)");
                return -1;
            }
            if (parse_descr(s, sn, t, why, wsz) < 0) return -1;
            have_descr = true;
        } else if (kn == 13 && memcmp(k, "fortran_order", 13) == 0 && !have_order) {
            if (read_word(&c, "True")) *fortran = true;
            else if (read_word(&c, "False")) *fortran = false;
            else {
                snprintf(why, wsz, "fortran_order is not True or False");
                return -1;
            }
            have_order = true;
        } else if (kn == 5 && memcmp(k, "shape", 5) == 0 && !have_shape) {
            if (!eat(&c, '(')) {
                snprintf(why, wsz, "shape is not a tuple");
                return -1;
            }
            shape->ndim = 0;
            for (;;) {
                if (eat(&c, ')')) break;
                skip_ws(&c);
                if (c.p >= c.end || !isdigit((unsigned char)*c.p)) {
                    snprintf(why, wsz, "shape holds something other than non-negative integers");
                    return -1;
                }
                int64_t v = 0;
                while (c.p < c.end && isdigit((unsigned char)*c.p)) {
                    if (v > (INT64_MAX - 9) / 10) {
                        snprintf(why, wsz, "a dimension is too large");
                        return -1;
                    }
                    v = v * 10 + (*c.p++ - '0');
                }
                if (c.p < c.end && *c.p == 'L') c.p++; /* Python 2 longs */
                if (shape->ndim == NB_MAX_DIMS) {
                    snprintf(why, wsz, "more than %d dimensions", NB_MAX_DIMS);
                    return -1;
                }
                shape->dim[shape->ndim++] = v;
                if (eat(&c, ')')) break;
                if (!eat(&c, ',')) {
                    snprintf(why, wsz, "malformed shape tuple");
                    return -1;
                }
            }
            have_shape = true;
        } else {
            snprintf(why, wsz, "unexpected or repeated key '%.*s'", (int)(kn > 40 ? 40 : kn), k);
            return -1;
        }
        if (eat(&c, '}')) break;
        if (!eat(&c, ',')) {
            snprintf(why, wsz, "malformed header dict");
            return -1;
        }
    }
    if (!have_descr || !have_shape || !have_order) {
        snprintf(why, wsz, "header lacks '%s'", !have_descr ? "descr" : !have_shape ? "shape" : "fortran_order");
        return -1;
    }
    skip_ws(&c);
    if (c.p != c.end) {
        snprintf(why, wsz, "bytes after the header dict");
        return -1;
    }
    return 0;
}

/* Reads element i of the file's data (size bytes, maybe big-endian) into the tensor's dtype. */
static void read_elem(const unsigned char *src, const npy_type *t, void *dst, int64_t di) {
    unsigned char b[8];
    for (int k = 0; k < t->size; k++) b[k] = src[t->big ? t->size - 1 - k : k];
    if (t->kind == 'f' || (t->kind == 'i' && t->size >= 4 && nb__esize(t->dtype) == (size_t)t->size) ||
        (t->kind == 'u' && t->size == 1) || (t->kind == 'i' && t->size == 1) || t->kind == 'b') {
        memcpy((char *)dst + (size_t)di * (size_t)t->size, b, (size_t)t->size);
        if (t->kind == 'b') ((unsigned char *)dst)[di] = b[0] != 0;
        return;
    }
    int64_t v;
    switch (t->kind * 16 + t->size) {
    case 'i' * 16 + 2: { int16_t x; memcpy(&x, b, 2); v = x; break; }
    case 'u' * 16 + 2: { uint16_t x; memcpy(&x, b, 2); v = x; break; }
    default: { uint32_t x; memcpy(&x, b, 4); v = x; break; } /* u4 */
    }
    if (t->dtype == NB_I32) ((int32_t *)dst)[di] = (int32_t)v;
    else ((int64_t *)dst)[di] = v;
}

nb_tensor *nb_npy_parse(const void *data, size_t size) {
    const unsigned char *d = data;
    if (!d && size) {
        nb__error("nb_npy_parse: data is NULL");
        return NULL;
    }
    if (size < 10 || memcmp(d, "\x93NUMPY", 6) != 0) {
        nb__error("nb_npy_parse: not a .npy file (no \\x93NUMPY magic)");
        return NULL;
    }
    int major = d[6];
    size_t pre, hlen;
    if (major == 1) {
        pre = 10;
        hlen = (size_t)d[8] | (size_t)d[9] << 8;
    } else if (major == 2 || major == 3) {
        pre = 12;
        if (size < 12) {
            nb__error("nb_npy_parse: truncated header (%zu bytes)", size);
            return NULL;
        }
        hlen = (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24;
    } else {
        nb__error("nb_npy_parse: unsupported format version %d.%d", major, d[7]);
        return NULL;
    }
    if (hlen > size - pre) {
        nb__error("nb_npy_parse: header length %zu runs past the end of the file (%zu bytes)", hlen, size);
        return NULL;
    }
    npy_type t = { 0 };
    bool fortran = false;
    nb_shape shape = { 0 };
    char why[160];
    if (parse_header((const char *)d + pre, hlen, &t, &fortran, &shape, why, sizeof why) < 0) {
        nb__error("nb_npy_parse: bad header: %s", why);
        return NULL;
    }
    /* the element count and byte size must fit (nb__shape_check also bounds every stride, even
       when a zero dimension makes the array empty), for the file's elements and the tensor's */
    int64_t numel, bytes;
    size_t esize = nb__esize(t.dtype) > (size_t)t.size ? nb__esize(t.dtype) : (size_t)t.size;
    if (!nb__shape_check("nb_npy_parse: header", &shape, esize, &numel)) return NULL;
    size_t avail = size - pre - hlen;
    if (nb__mul_overflows(numel, t.size, &bytes) || (uint64_t)bytes > avail) {
        char sb[200];
        nb__error("nb_npy_parse: shape %s of %d-byte elements needs %lld bytes, the file holds %zu",
                  nb_shape_str(shape, sb, sizeof sb), t.size, (long long)bytes, avail);
        return NULL;
    }
    nb_tensor *out = nb__tensor_new(shape, t.dtype);
    if (!out) return NULL;
    void *dst = nb__data(out);
    const unsigned char *src = d + pre + hlen;
    if (!fortran || shape.ndim < 2) {
        if (nb__esize(t.dtype) == (size_t)t.size && !t.big && t.kind != 'b')
            memcpy(dst, src, (size_t)numel * (size_t)t.size);
        else
            for (int64_t i = 0; i < numel; i++) read_elem(src + (size_t)i * (size_t)t.size, &t, dst, i);
    } else if (numel > 0) {
        /* column-major: walk the file in order, the first index fastest */
        int64_t stride[NB_MAX_DIMS], idx[NB_MAX_DIMS] = { 0 }, di = 0;
        nb__contiguous_strides(&shape, stride);
        for (int64_t i = 0; i < numel; i++) {
            read_elem(src + (size_t)i * (size_t)t.size, &t, dst, di);
            for (int k = 0; k < shape.ndim; k++) {
                idx[k]++;
                di += stride[k];
                if (idx[k] < shape.dim[k]) break;
                di -= stride[k] * idx[k];
                idx[k] = 0;
            }
        }
    }
    return nb__own(out);
}

nb_tensor *nb_load_npy(const char *path) {
    nb__map m;
    if (nb__map_open(&m, "nb_load_npy", path) < 0) return NULL;
    nb__error_ctx ec; /* the parser's errors name the file */
    nb__error_push(&ec, "nb_npy_parse", "nb_load_npy: '%s'", path);
    nb_tensor *t = nb_npy_parse(m.data, m.size);
    nb__error_pop(&ec);
    nb__map_close(&m);
    return t;
}

int nb_save_npy(const nb_tensor *tc, const char *path) {
    nb_tensor *t = (nb_tensor *)tc;
    if (!t) {
        if (!nb__has_error()) nb__error("nb_save_npy: tensor is NULL (saving '%s')", path ? path : "(null)");
        return -1;
    }
    static const char *descr[NB_DTYPE_COUNT] = { "<f4", "<f8", "<f2", NULL, "<i8", "<i4", "|u1", "|b1", "|i1" };
    if (!descr[t->dtype]) {
        nb__error("nb_save_npy: NumPy has no %s dtype; cast to f32 before saving '%s'", nb_dtype_name(t->dtype),
                  path ? path : "(null)");
        return -1;
    }
    char header[1024];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr[t->dtype]);
    for (int i = 0; i < t->shape.ndim; i++)
        n += snprintf(header + n, sizeof header - (size_t)n, "%lld%s", (long long)t->shape.dim[i],
                      t->shape.ndim == 1 || i + 1 < t->shape.ndim ? ", " : "");
    if (t->shape.ndim == 1) n -= 1; /* "(3,)" */
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    /* pad with spaces and a newline so the data starts on a 64-byte boundary, as NumPy does */
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                              (unsigned char)(hlen >> 8) };
    memset(header + n, ' ', hlen - (size_t)n - 1);
    header[hlen - 1] = '\n';

    int rc = -1;
    nb_scope *s = nb_scope_begin();
    nb_tensor *c = nb_contiguous(nb_to(t, (nb_device){ NB_CPU, 0 }));
    nb__afile f;
    if (c && nb__afile_open(&f, "nb_save_npy", path) == 0) {
        if (nb__afile_write(&f, pre, 10) == 0 && nb__afile_write(&f, header, hlen) == 0 &&
            nb__afile_write(&f, nb__data(c), (size_t)c->numel * nb__esize(c->dtype)) == 0 && nb__afile_commit(&f) == 0)
            rc = 0;
    }
    nb_scope_end(s);
    return rc;
}
