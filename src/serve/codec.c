/* The model server's JSON tensor codec: request bodies (with TF Serving's NaN and Infinity
   tokens) to nabla tensors of a declared dtype, and tensors back to JSON text, each float
   written so that it reads back to the same bits. Shared by both protocol front ends. */
#include "serve_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The markers the bare tokens become: strings that start with a NUL, which a float element's
   JSON has no other reason to hold (any other string there is refused). */
static const char M_NAN[] = "\"\\u0000NaN\"", M_INF[] = "\"\\u0000Inf\"", M_NINF[] = "\"\\u0000-Inf\"";

/* Whether a value token starts at body[i] (outside strings, after prev); its marker and length. */
static const char *token_at(const char *body, size_t len, size_t i, char prev, size_t *tok) {
    if (prev != '[' && prev != ',' && prev != ':') return NULL;
    const char *p = body + i;
    size_t left = len - i;
    if (left >= 3 && !memcmp(p, "NaN", 3)) return *tok = 3, M_NAN;
    if (left >= 8 && !memcmp(p, "Infinity", 8)) return *tok = 8, M_INF;
    if (left >= 9 && !memcmp(p, "-Infinity", 9)) return *tok = 9, M_NINF;
    return NULL;
}

char *nb__sv_json_prepare(const char *body, size_t len, size_t *out_len) {
    /* a first pass counts the tokens, so the copy is the body's size plus 9 bytes per token */
    size_t extra = 0;
    for (int pass = 0; pass < 2; pass++) {
        char *out = NULL;
        if (pass == 1) {
            if (len > SIZE_MAX - extra - 1 || !(out = malloc(len + extra + 1))) return NULL;
        }
        size_t o = 0;
        bool in_str = false;
        char prev = '[';  /* the last significant character outside strings */
        for (size_t i = 0; i < len; i++) {
            char c = body[i];
            if (in_str) {
                if (out) out[o] = c;
                o++;
                if (c == '\\' && i + 1 < len) {
                    if (out) out[o] = body[i + 1];
                    o++;
                    i++;
                } else if (c == '"') in_str = false;
                continue;
            }
            size_t tok = 0;
            const char *m = token_at(body, len, i, prev, &tok);
            if (m) {
                size_t ml = strlen(m);
                if (out) memcpy(out + o, m, ml);
                else extra += ml - tok;
                o += ml;
                i += tok - 1;
                prev = '"';
                continue;
            }
            if (out) out[o] = c;
            o++;
            if (c == '"') in_str = true;
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') prev = c;
        }
        if (out) {
            out[o] = 0;
            *out_len = o;
            return out;
        }
    }
    return NULL;
}

json_t *nb__sv_json_parse(const char *body, size_t len, char *err, size_t errsize) {
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) snprintf(err, errsize, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    else if (!json_is_object(root)) {
        snprintf(err, errsize, "the body must be a JSON object");
        json_decref(root);
        root = NULL;
    }
    return root;
}

const char *nb__sv_tf_dtype(nb_dtype d) {
    switch (d) {
    case NB_F32: return "DT_FLOAT";
    case NB_F64: return "DT_DOUBLE";
    case NB_F16: return "DT_HALF";
    case NB_BF16: return "DT_BFLOAT16";
    case NB_I64: return "DT_INT64";
    case NB_I32: return "DT_INT32";
    case NB_U8: return "DT_UINT8";
    case NB_BOOL: return "DT_BOOL";
    case NB_I8: return "DT_INT8";
    default: return "DT_INVALID";
    }
}

static const char *const V2_NAMES[NB_DTYPE_COUNT] = {
    [NB_F32] = "FP32", [NB_F64] = "FP64", [NB_F16] = "FP16", [NB_BF16] = "BF16", [NB_I64] = "INT64",
    [NB_I32] = "INT32", [NB_U8] = "UINT8", [NB_BOOL] = "BOOL", [NB_I8] = "INT8",
};

const char *nb__sv_v2_dtype(nb_dtype d) { return (unsigned)d < NB_DTYPE_COUNT && V2_NAMES[d] ? V2_NAMES[d] : "UNKNOWN"; }

bool nb__sv_v2_parse_dtype(const char *name, nb_dtype *d) {
    for (int i = 0; i < NB_DTYPE_COUNT; i++)
        if (V2_NAMES[i] && !strcmp(V2_NAMES[i], name)) {
            *d = (nb_dtype)i;
            return true;
        }
    return false;
}

static bool is_float(nb_dtype d) { return d == NB_F32 || d == NB_F64 || d == NB_F16 || d == NB_BF16; }

/* Writes leaf x as element i of buf (half dtypes into an f32 buffer). false with err set. */
static bool put_leaf(const json_t *x, nb_dtype dt, void *buf, int64_t i, const char *what, char *err, size_t es) {
    if (is_float(dt)) {
        double v;
        if (json_is_integer(x)) v = (double)json_integer_value(x);
        else if (json_is_real(x)) v = json_real_value(x);
        else if (json_is_string(x) && json_string_length(x) == 4 && !memcmp(json_string_value(x), "\0NaN", 4)) v = NAN;
        else if (json_is_string(x) && json_string_length(x) == 4 && !memcmp(json_string_value(x), "\0Inf", 4)) v = INFINITY;
        else if (json_is_string(x) && json_string_length(x) == 5 && !memcmp(json_string_value(x), "\0-Inf", 5)) v = -INFINITY;
        else {
            snprintf(err, es, "element %lld of '%s' is not a number (the tensor is %s)", (long long)i, what,
                     nb__sv_v2_dtype(dt));
            return false;
        }
        if (dt == NB_F64) ((double *)buf)[i] = v;
        else ((float *)buf)[i] = (float)v;
        return true;
    }
    if (dt == NB_BOOL) {
        if (!json_is_boolean(x)) {
            snprintf(err, es, "element %lld of '%s' is not true or false (the tensor is BOOL)", (long long)i, what);
            return false;
        }
        ((bool *)buf)[i] = json_is_true(x);
        return true;
    }
    if (!json_is_integer(x)) {
        snprintf(err, es, "element %lld of '%s' is not a whole number (the tensor is %s)", (long long)i, what,
                 nb__sv_v2_dtype(dt));
        return false;
    }
    json_int_t v = json_integer_value(x);
    int64_t lo = dt == NB_I8 ? INT8_MIN : dt == NB_U8 ? 0 : dt == NB_I32 ? INT32_MIN : INT64_MIN;
    int64_t hi = dt == NB_I8 ? INT8_MAX : dt == NB_U8 ? UINT8_MAX : dt == NB_I32 ? INT32_MAX : INT64_MAX;
    if (v < lo || v > hi) {
        snprintf(err, es, "element %lld of '%s' is %lld, outside %s's range %lld..%lld", (long long)i, what,
                 (long long)v, nb__sv_v2_dtype(dt), (long long)lo, (long long)hi);
        return false;
    }
    switch (dt) {
    case NB_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case NB_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case NB_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((int64_t *)buf)[i] = (int64_t)v; break;
    }
    return true;
}

/* A buffer for n elements of dt (f32 for the half dtypes); NULL with err set. */
static void *alloc_elems(int64_t n, nb_dtype dt, char *err, size_t es) {
    size_t esz = dt == NB_F16 || dt == NB_BF16 ? 4 : nb__esize(dt);
    if (n < 0 || (uint64_t)n > (SIZE_MAX - 1) / esz) {
        snprintf(err, es, "a tensor of %lld elements is too large", (long long)n);
        return NULL;
    }
    void *p = malloc((size_t)n * esz + 1);
    if (!p) snprintf(err, es, "out of memory for a tensor of %lld elements", (long long)n);
    return p;
}

/* The tensor of buf's elements (copied; half dtypes cast from the f32 buffer). */
static nb_tensor *make_tensor(const void *buf, nb_shape s, nb_dtype dt, char *err, size_t es) {
    bool half = dt == NB_F16 || dt == NB_BF16;
    nb_tensor *t = nb_from_data(buf, s, half ? NB_F32 : dt);
    if (t && half) t = nb_cast(t, dt);
    if (!t) snprintf(err, es, "%s", nb_error() ? nb_error() : "out of memory");
    return t;
}

/* Fills buf from the nested arrays at v, checking each level's length against s. */
static bool fill_nested(const json_t *v, const nb_shape *s, int depth, nb_dtype dt, void *buf, int64_t *i,
                        const char *what, char *err, size_t es) {
    if (depth == s->ndim) {
        if (json_is_array(v)) {
            snprintf(err, es, "'%s' is nested deeper at element %lld than at its first (shape [%d dims])", what,
                     (long long)*i, s->ndim);
            return false;
        }
        return put_leaf(v, dt, buf, (*i)++, what, err, es);
    }
    if (!json_is_array(v) || (int64_t)json_array_size(v) != s->dim[depth]) {
        snprintf(err, es, "'%s' is not a regular nested list: dimension %d holds %s%lld where the first element's holds %lld",
                 what, depth, json_is_array(v) ? "" : "a scalar, not a list, ",
                 (long long)(json_is_array(v) ? (int64_t)json_array_size(v) : 0), (long long)s->dim[depth]);
        return false;
    }
    for (size_t k = 0; k < json_array_size(v); k++)
        if (!fill_nested(json_array_get(v, k), s, depth + 1, dt, buf, i, what, err, es)) return false;
    return true;
}

/* The count of elements of shape s, or -1 when it overflows or a dimension is negative. */
static int64_t shape_numel(const nb_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->dim[d] < 0) return -1;
        if (s->dim[d] && n > INT64_MAX / s->dim[d]) return -1;
        n *= s->dim[d];
    }
    return n;
}

/* The count of leaves of v (nested or flat), or -1 when it nests too deep. */
static int64_t count_leaves(const json_t *v, int depth) {
    if (!json_is_array(v)) return 1;
    if (depth >= NB_MAX_DIMS) return -1;
    int64_t n = 0;
    for (size_t k = 0; k < json_array_size(v); k++) {
        int64_t c = count_leaves(json_array_get(v, k), depth + 1);
        if (c < 0) return -1;
        n += c;
    }
    return n;
}

nb_tensor *nb__sv_tensor_from_json(const json_t *v, nb_dtype dt, const char *what, char *err, size_t es) {
    nb_shape s = { 0 };
    for (const json_t *x = v; json_is_array(x); x = json_array_size(x) ? json_array_get(x, 0) : NULL) {
        if (s.ndim == NB_MAX_DIMS) {
            snprintf(err, es, "'%s' is nested more than %d deep; nabla tensors have at most %d dimensions", what,
                     NB_MAX_DIMS, NB_MAX_DIMS);
            return NULL;
        }
        s.dim[s.ndim++] = (int64_t)json_array_size(x);
    }
    int64_t n = shape_numel(&s);
    if (n < 0) {
        snprintf(err, es, "'%s' has too many elements", what);
        return NULL;
    }
    /* The first element's path sets the shape; the leaves counted must fill it before a
       buffer of that size is allocated, so little data cannot claim a huge tensor. */
    int64_t have = count_leaves(v, 0);
    if (have != n) {
        snprintf(err, es, "'%s' is not a regular nested list: it holds %lld elements where its first element's "
                 "nesting makes a tensor of %lld", what, (long long)(have < 0 ? 0 : have), (long long)n);
        return NULL;
    }
    void *buf = alloc_elems(n, dt, err, es);
    if (!buf) return NULL;
    int64_t i = 0;
    nb_tensor *t = fill_nested(v, &s, 0, dt, buf, &i, what, err, es) ? make_tensor(buf, s, dt, err, es) : NULL;
    free(buf);
    return t;
}

/* Fills buf with the leaves of v (nested or flat) in order; at most n. */
static bool fill_flat(const json_t *v, int depth, nb_dtype dt, void *buf, int64_t n, int64_t *i, const char *what,
                      char *err, size_t es) {
    if (!json_is_array(v)) {
        if (*i >= n) {
            snprintf(err, es, "'%s' holds more than the %lld elements its shape has", what, (long long)n);
            return false;
        }
        return put_leaf(v, dt, buf, (*i)++, what, err, es);
    }
    if (depth >= NB_MAX_DIMS) {
        snprintf(err, es, "'%s' data is nested more than %d deep", what, NB_MAX_DIMS);
        return false;
    }
    for (size_t k = 0; k < json_array_size(v); k++)
        if (!fill_flat(json_array_get(v, k), depth + 1, dt, buf, n, i, what, err, es)) return false;
    return true;
}

nb_tensor *nb__sv_tensor_from_data(const json_t *v, nb_dtype dt, nb_shape s, const char *what, char *err, size_t es) {
    int64_t n = shape_numel(&s);
    if (n < 0) {
        snprintf(err, es, "'%s' has a negative or too large shape", what);
        return NULL;
    }
    /* The data's own count comes first, so a large claimed shape over little data
       is refused before anything is allocated for it. */
    int64_t have = count_leaves(v, 0);
    if (have < 0) {
        snprintf(err, es, "'%s' data is nested more than %d deep", what, NB_MAX_DIMS);
        return NULL;
    }
    if (have != n) {
        snprintf(err, es, "'%s' holds %lld elements; its shape has %lld", what, (long long)have, (long long)n);
        return NULL;
    }
    void *buf = alloc_elems(n, dt, err, es);
    if (!buf) return NULL;
    int64_t i = 0;
    nb_tensor *t = NULL;
    if (fill_flat(v, 0, dt, buf, n, &i, what, err, es)) t = make_tensor(buf, s, dt, err, es);
    free(buf);
    return t;
}

/* Writes element i of the host copy. */
static void put_elem(sv_buf *b, const void *data, nb_dtype dt, int64_t i) {
    switch (dt) {
    case NB_F32:
    case NB_F64: {
        double v = dt == NB_F32 ? (double)((const float *)data)[i] : ((const double *)data)[i];
        if (isnan(v)) nb__sv_puts(b, "NaN");
        else if (isinf(v)) nb__sv_puts(b, v > 0 ? "Infinity" : "-Infinity");
        else nb__sv_printf(b, dt == NB_F32 ? "%.9g" : "%.17g", v);
        break;
    }
    case NB_I64: nb__sv_printf(b, "%lld", (long long)((const int64_t *)data)[i]); break;
    case NB_I32: nb__sv_printf(b, "%d", (int)((const int32_t *)data)[i]); break;
    case NB_I8: nb__sv_printf(b, "%d", (int)((const int8_t *)data)[i]); break;
    case NB_U8: nb__sv_printf(b, "%u", (unsigned)((const uint8_t *)data)[i]); break;
    case NB_BOOL: nb__sv_puts(b, ((const bool *)data)[i] ? "true" : "false"); break;
    default: nb__sv_puts(b, "null"); break;
    }
}

static void put_nested(sv_buf *b, const void *data, nb_dtype dt, const int64_t *dim, int ndim, int64_t *i) {
    if (ndim == 0) {
        put_elem(b, data, dt, (*i)++);
        return;
    }
    nb__sv_put(b, "[", 1);
    for (int64_t k = 0; k < dim[0]; k++) {
        if (k) nb__sv_put(b, ",", 1);
        put_nested(b, data, dt, dim + 1, ndim - 1, i);
    }
    nb__sv_put(b, "]", 1);
}

int nb__sv_write_tensor(sv_buf *b, nb_tensor *t, int64_t row, bool flat) {
    nb_scope *sc = nb_scope_begin();
    nb_dtype dt = nb_dtype_of(t);
    if (dt == NB_F16 || dt == NB_BF16) { /* every half value is exactly an f32 */
        t = nb_cast(t, NB_F32);
        dt = NB_F32;
    }
    int64_t n = t ? nb_numel(t) : 0;
    void *data = t ? malloc((size_t)n * nb__esize(dt) + 1) : NULL;
    int rc = -1;
    if (!t || !data || nb_copy_to(t, data, (size_t)n * nb__esize(dt)) < 0) {
        if (t && !data) nb__error("nb_serve: out of memory writing an output of %lld elements", (long long)n);
        goto done;
    }
    nb_shape s = nb_shape_of(t);
    int64_t i = 0;
    if (row >= 0) { /* one row of dimension 0 */
        int64_t per = s.dim[0] ? n / s.dim[0] : 0;
        i = row * per;
        put_nested(b, data, dt, s.dim + 1, s.ndim - 1, &i);
    } else if (flat) {
        nb__sv_put(b, "[", 1);
        for (int64_t k = 0; k < n; k++) {
            if (k) nb__sv_put(b, ",", 1);
            put_elem(b, data, dt, k);
        }
        nb__sv_put(b, "]", 1);
    } else put_nested(b, data, dt, s.dim, s.ndim, &i);
    rc = 0;
done:
    if (rc < 0) b->failed = true; /* the response becomes a 500 */
    free(data);
    nb_scope_end(sc);
    return rc;
}
