/* The PyTorch reference store of the layer tests (written by tests/nn_ref.py's put() and
   put_words(), and by the scripts that share its format): parsing, look-up by name, tensors made
   from records, comparisons that name the case and the worst element, and loading weights. */
#ifndef NABLA_REF_STORE_H
#define NABLA_REF_STORE_H

#include "test_util.h"

typedef struct record {
    const char *name;
    bool is_words;
    nb_dtype dtype;
    nb_shape shape;
    int64_t numel;
    double *v;          /* tensor values */
    const char **words; /* word list */
    int nwords;
} record;

static record *store;
static int nstore;

static inline char *tok(char **p) {
    char *s = *p;
    while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t') s++;
    if (!*s) {
        *p = s;
        return NULL;
    }
    char *start = s;
    while (*s && *s != ' ' && *s != '\n' && *s != '\r' && *s != '\t') s++;
    if (*s) *s++ = 0;
    *p = s;
    return start;
}

static inline bool tok_int(char **p, int64_t *out) {
    char *t = tok(p), *end;
    if (!t) return false;
    *out = strtoll(t, &end, 10);
    return !*end;
}

/* Parses the whole file; false (with a message) on a malformed record. */
static inline bool parse_store(char *text, const char *path) {
    int cap = 1024;
    store = calloc((size_t)cap, sizeof *store);
    if (!store) return false;
    char *p = text, *kind;
    while ((kind = tok(&p))) {
        if (nstore == cap) {
            cap *= 2;
            record *g = realloc(store, sizeof *store * (size_t)cap);
            if (!g) return false;
            store = g;
        }
        record *r = &store[nstore];
        memset(r, 0, sizeof *r);
        r->name = tok(&p);
        int64_t n = 0;
        bool ok = r->name != NULL;
        if (ok && strcmp(kind, "S") == 0) {
            r->is_words = true;
            ok = tok_int(&p, &n) && n >= 0 && n < 100000;
            r->nwords = (int)n;
            r->words = ok ? calloc((size_t)(n ? n : 1), sizeof(char *)) : NULL;
            ok = ok && r->words;
            for (int i = 0; ok && i < r->nwords; i++) ok = (r->words[i] = tok(&p)) != NULL;
        } else if (ok && strcmp(kind, "T") == 0) {
            const char *dt = tok(&p);
            ok = dt != NULL;
            if (ok && strcmp(dt, "f32") == 0) r->dtype = NB_F32;
            else if (ok && strcmp(dt, "f64") == 0) r->dtype = NB_F64;
            else if (ok && strcmp(dt, "i64") == 0) r->dtype = NB_I64;
            else ok = false;
            ok = ok && tok_int(&p, &n) && n >= 0 && n <= NB_MAX_DIMS;
            r->shape.ndim = (int)n;
            r->numel = 1;
            for (int i = 0; ok && i < r->shape.ndim; i++) {
                ok = tok_int(&p, &r->shape.dim[i]) && r->shape.dim[i] >= 0;
                r->numel *= r->shape.dim[i];
            }
            r->v = ok ? malloc(sizeof(double) * (size_t)(r->numel ? r->numel : 1)) : NULL;
            ok = ok && r->v;
            for (int64_t i = 0; ok && i < r->numel; i++) {
                char *t = tok(&p), *end;
                ok = t != NULL;
                if (ok) r->v[i] = strtod(t, &end);
                ok = ok && !*end;
            }
        } else ok = false;
        nstore++;
        if (!ok) {
            fprintf(stderr, "reference %s: malformed record %d (%s)\n", path, nstore, r->name ? r->name : "?");
            return false;
        }
    }
    return nstore > 0;
}

static inline void free_store(void) {
    for (int i = 0; i < nstore; i++) {
        free(store[i].v);
        free(store[i].words);
    }
    free(store);
}

/* The store read from the file that test's main was given (argv[1]; its text in *text, to free
   after free_store), naming script as its writer when the file is missing; false after saying why. */
static inline bool load_store(int argc, char **argv, const char *test, const char *script, char **text) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s REFERENCE_FILE [NAME_SUBSTRING]\n", argv[0]);
        return false;
    }
    *text = read_whole_file(argv[1]);
    if (!*text) {
        fprintf(stderr, "%s: cannot read the PyTorch reference %s; it is written by %s, which needs /usr/bin/python3 "
                        "with torch (Debian: apt-get install python3-torch)\n", test, argv[1], script);
        return false;
    }
    if (!parse_store(*text, argv[1])) {
        fprintf(stderr, "%s: %s is not a reference file\n", test, argv[1]);
        free_store();
        free(*text);
        return false;
    }
    return true;
}

/* The record called name, or NULL after printing that it is missing. */
static inline const record *find(const char *name, bool is_words) {
    for (int i = 0; i < nstore; i++)
        if (store[i].is_words == is_words && strcmp(store[i].name, name) == 0) return &store[i];
    fprintf(stderr, "  reference has no %s \"%s\" (the reference script and this test disagree)\n",
            is_words ? "word list" : "tensor", name);
    return NULL;
}

/* The record called name, or NULL (nothing printed: for records only some cases have). */
static inline const record *find_quiet(const char *name, bool is_words) {
    for (int i = 0; i < nstore; i++)
        if (store[i].is_words == is_words && strcmp(store[i].name, name) == 0) return &store[i];
    return NULL;
}

/* For a reference tensor t [r, c] that torch had as a transpose: a contiguous leaf [c, r] of
   its values transposed, whose transpose (a non-contiguous view) holds t's values. */
static inline nb_tensor *leaf_transposed(nb_tensor *t) { return t ? nb_contiguous(nb_transpose(t, 0, 1)) : NULL; }

static inline const record *findf(const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return find(name, false);
}

/* A new nabla tensor holding the record's values (in the current scope). */
static inline nb_tensor *make_tensor(const record *r) {
    if (!r) return NULL;
    size_t es = nb_dtype_size(r->dtype);
    unsigned char *buf = malloc(es * (size_t)(r->numel ? r->numel : 1));
    if (!buf) return NULL;
    for (int64_t i = 0; i < r->numel; i++) {
        void *p = buf + (size_t)i * es;
        if (r->dtype == NB_F32) *(float *)p = (float)r->v[i];
        else if (r->dtype == NB_F64) *(double *)p = r->v[i];
        else *(int64_t *)p = (int64_t)r->v[i];
    }
    nb_tensor *t = nb_from_data(buf, r->shape, r->dtype);
    free(buf);
    return t;
}

static inline nb_tensor *ref_tensor(const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return make_tensor(find(name, false));
}

/* The tensor's elements (row-major) as doubles; NULL on error. */
static inline double *read_values(nb_tensor *t) {
    int64_t n = nb_numel(t);
    nb_dtype dt = nb_dtype_of(t);
    size_t es = nb_dtype_size(dt);
    unsigned char *buf = malloc(es * (size_t)(n ? n : 1));
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!buf || !v || nb_copy_to(t, buf, es * (size_t)n) < 0 || (dt != NB_F32 && dt != NB_F64 && dt != NB_I64)) {
        free(buf);
        free(v);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        const void *p = buf + (size_t)i * es;
        v[i] = dt == NB_F32 ? *(const float *)p : dt == NB_F64 ? *(const double *)p : (double)*(const int64_t *)p;
    }
    free(buf);
    return v;
}

/* Compares values against want elementwise: |a - b| <= atol + rtol |b|. Prints the case, the
   tensor, how many elements differ and the worst one. */
static inline bool compare_values(const char *cs, const char *what, const double *v, int64_t n, const record *want, double rtol,
                           double atol) {
    double max_err = 0, worst_ratio = 0;
    int64_t worst = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = v[i], b = want->v[i], err;
        if (isnan(a) || isnan(b)) err = isnan(a) && isnan(b) ? 0 : INFINITY;
        else if (isinf(a) || isinf(b)) err = a == b ? 0 : INFINITY;
        else err = fabs(a - b);
        double limit = atol + rtol * fabs(b);
        if (err > max_err) max_err = err;
        if (err > limit) bad++;
        double ratio = err == 0 ? 0 : limit > 0 ? err / limit : INFINITY;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    if (bad)
        fprintf(stderr,
                "  %s: %s differs from torch at %lld of %lld elements: max abs error %.3g; worst at flat index %lld: "
                "nabla %.10g, torch %.10g (rtol %.1g, atol %.1g)\n",
                cs, what, (long long)bad, (long long)n, max_err, (long long)worst, v[worst], want->v[worst], rtol, atol);
    return bad == 0;
}

/* Compares a nabla tensor with the reference tensor called ref (shape, then values). */
static inline bool compare(const char *cs, const char *what, nb_tensor *got, const char *ref, double rtol, double atol) {
    const record *want = find(ref, false);
    if (!want) return false;
    if (!got) {
        fprintf(stderr, "  %s: %s is missing%s%s\n", cs, what, nb_error() ? ": " : "", nb_error() ? nb_error() : "");
        return false;
    }
    nb_shape s = nb_shape_of(got);
    bool same = s.ndim == want->shape.ndim;
    for (int i = 0; same && i < s.ndim; i++) same = s.dim[i] == want->shape.dim[i];
    if (!same) {
        char gs[160], ws[160];
        fprintf(stderr, "  %s: %s shape is %s, torch gives %s\n", cs, what, nb_shape_str(s, gs, sizeof gs),
                nb_shape_str(want->shape, ws, sizeof ws));
        return false;
    }
    double *v = read_values(got);
    if (!v) {
        fprintf(stderr, "  %s: cannot read %s: %s\n", cs, what, nb_error() ? nb_error() : "?");
        return false;
    }
    bool ok = compare_values(cs, what, v, want->numel, want, rtol, atol);
    free(v);
    return ok;
}

/* Writes the reference tensor into t in place (grad disabled, as loading weights does),
   checking the shape first (nb_assign would broadcast). */
static inline bool load_into(const char *cs, nb_tensor *t, const char *ref) {
    const record *r = find(ref, false);
    if (!r || !t) return false;
    nb_shape s = nb_shape_of(t);
    bool same = s.ndim == r->shape.ndim;
    for (int i = 0; same && i < s.ndim; i++) same = s.dim[i] == r->shape.dim[i];
    if (!same) {
        char gs[160], ws[160];
        fprintf(stderr, "  %s: %s is %s in nabla, %s in torch\n", cs, ref, nb_shape_str(s, gs, sizeof gs),
                nb_shape_str(r->shape, ws, sizeof ws));
        return false;
    }
    nb_scope *sc = nb_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    int rc = nb_assign(t, make_tensor(r));
    nb_set_grad_enabled(prev);
    nb_scope_end(sc);
    if (rc < 0) fprintf(stderr, "  %s: loading %s failed: %s\n", cs, ref, nb_error() ? nb_error() : "?");
    return rc == 0;
}

/* Fails the cmocka test when a case left bytes in use or did not pass. */
static inline void finish_case(const char *cs, bool ok, size_t used_before) {
    size_t used_after;
    nb_memory_stats(NULL, &used_after, NULL);
    if (used_after != used_before) {
        fprintf(stderr, "  %s: %zu bytes still in use after the case (%zu before)\n", cs, used_after, used_before);
        ok = false;
    }
    nb_error_clear(); /* before fail_msg, which does not return */
    if (!ok) fail_msg("%s: mismatch with torch (see above)", cs);
}

#endif
