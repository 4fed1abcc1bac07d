/* safetensors files: a validating memory-mapped reader, an atomic writer, and state dicts
   (save, strict and non-strict load) built on them.

   The JSON header is parsed with jansson (Debian's libjansson-dev) rather than cJSON because
   jansson keeps integers as exact 64-bit json_int_t (offsets and shapes of large files lose
   nothing to doubles), parses a buffer of a given length without a terminating NUL
   (json_loadb), rejects duplicate keys (JSON_REJECT_DUPLICATES) and bounds nesting depth, and
   keeps object keys in insertion order for the writer. A build without jansson
   (NABLA_WITH_JSON=OFF) reads and writes no file: its open_common and save_named say so. */
#include "io_impl.h"

#include <errno.h>
#ifdef NABLA_HAVE_JSON
#include <jansson.h>
#endif
#include <stdlib.h>
#include <string.h>

/* ---------- dtypes ---------- */
typedef struct {
    const char *name;
    int size;
    int dtype; /* nb_dtype, or -1 when nabla has none */
} st_dtype;

/* The first NB_DTYPE_COUNT entries are nabla's dtypes in nb_dtype's order (nb_safetensors_dtype_str
   indexes them by dtype). */
static const st_dtype st_dtypes[] = {
    { "F32", 4, NB_F32 }, { "F64", 8, NB_F64 }, { "F16", 2, NB_F16 }, { "BF16", 2, NB_BF16 },
    { "I64", 8, NB_I64 }, { "I32", 4, NB_I32 }, { "U8", 1, NB_U8 }, { "BOOL", 1, NB_BOOL },
    { "I8", 1, NB_I8 }, { "I16", 2, -1 }, { "U16", 2, -1 }, { "U32", 4, -1 }, { "U64", 8, -1 },
    { "F8_E4M3", 1, -1 }, { "F8_E5M2", 1, -1 },
};
#define N_ST_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

const char *nb_safetensors_dtype_str(nb_dtype dtype) {
    return (unsigned)dtype < NB_DTYPE_COUNT ? st_dtypes[dtype].name : NULL;
}

/* ---------- the reader ---------- */
typedef struct {
    char *name;
    const st_dtype *dt;
    nb_shape shape;
    uint64_t begin, end; /* into the data section */
} st_entry;

struct nb_safetensors {
    nb__map map;
    const unsigned char *data; /* start of the data section */
    uint64_t data_size;
    int n;
    st_entry *e;     /* in data-offset order */
    int *by_name;    /* indices sorted by name */
    nb_metadata *md;
};

void nb_safetensors_close(nb_safetensors *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->e[i].name);
    free(f->e);
    free(f->by_name);
    nb_metadata_free(f->md);
    nb__map_close(&f->map);
    free(f);
}

#ifdef NABLA_HAVE_JSON
static int cmp_offset(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

typedef struct {
    const char *name;
    int idx;
} name_idx;
static int cmp_name_idx(const void *a, const void *b) {
    return strcmp(((const name_idx *)a)->name, ((const name_idx *)b)->name);
}

/* Parses and validates the header of the bytes in f->map; 0 or <0 with why filled. */
static int parse(nb_safetensors *f, char *why, size_t wsz) {
    const unsigned char *d = f->map.data;
    size_t size = f->map.size;
    if (size < 8) {
        snprintf(why, wsz, "%zu bytes is too short for a safetensors file", size);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | d[i];
    if (hlen > size - 8) {
        snprintf(why, wsz, "header length %llu runs past the end of the file (%zu bytes)", (unsigned long long)hlen,
                 size);
        return -1;
    }
    if (hlen < 2 || d[8] != '{') {
        snprintf(why, wsz, "header is not a JSON object");
        return -1;
    }
    f->data = d + 8 + hlen;
    f->data_size = size - 8 - hlen;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)d + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(why, wsz, "bad JSON header: %s (at byte %d)", jerr.text, jerr.position);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        snprintf(why, wsz, "header is not a JSON object");
        goto done;
    }
    size_t count = json_object_size(root);
    f->md = nb_metadata_new();
    f->e = calloc(count ? count : 1, sizeof *f->e);
    f->by_name = calloc(count ? count : 1, sizeof *f->by_name);
    if (!f->md || !f->e || !f->by_name) {
        snprintf(why, wsz, "out of memory");
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                snprintf(why, wsz, "__metadata__ is not an object");
                goto done;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    snprintf(why, wsz, "__metadata__ value of '%.60s' is not a string", mk);
                    goto done;
                }
                if (nb_metadata_set(f->md, mk, json_string_value(mv)) < 0) {
                    snprintf(why, wsz, "out of memory");
                    goto done;
                }
            }
            continue;
        }
        st_entry *e = &f->e[f->n];
        if (!json_is_object(val)) {
            snprintf(why, wsz, "entry '%.60s' is not an object", key);
            goto done;
        }
        json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
               *jo = json_object_get(val, "data_offsets");
        if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2) {
            snprintf(why, wsz, "entry '%.60s' needs a dtype string, a shape array and two data_offsets", key);
            goto done;
        }
        const char *dn = json_string_value(jd);
        for (int i = 0; i < N_ST_DTYPES; i++)
            if (strcmp(dn, st_dtypes[i].name) == 0) e->dt = &st_dtypes[i];
        if (!e->dt) {
            snprintf(why, wsz, "entry '%.60s' has unknown dtype '%.20s'", key, dn);
            goto done;
        }
        size_t nd = json_array_size(js);
        if (nd > NB_MAX_DIMS) {
            snprintf(why, wsz, "entry '%.60s' has %zu dimensions, more than %d", key, nd, NB_MAX_DIMS);
            goto done;
        }
        e->shape.ndim = (int)nd;
        /* span: the product of the dimensions with zeros as ones (it bounds every stride); it, the
           element count and the byte sizes of the file's and the tensor's elements must fit */
        int64_t numel, span = 1, nbytes = 0;
        bool overflow = false, zero = false;
        for (size_t i = 0; i < nd; i++) {
            json_t *x = json_array_get(js, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0) {
                snprintf(why, wsz, "entry '%.60s' has a shape that is not non-negative integers", key);
                goto done;
            }
            int64_t v = (int64_t)json_integer_value(x);
            e->shape.dim[i] = v;
            if (v == 0) zero = true;
            else if (nb__mul_overflows(span, v, &span)) overflow = true;
        }
        numel = zero ? 0 : span;
        int64_t widest = e->dt->dtype >= 0 && (int)nb__esize((nb_dtype)e->dt->dtype) > e->dt->size
                             ? (int64_t)nb__esize((nb_dtype)e->dt->dtype) : e->dt->size, span_bytes;
        if (!overflow && (nb__mul_overflows(span, widest, &span_bytes) || nb__mul_overflows(numel, e->dt->size, &nbytes)))
            overflow = true;
        json_t *b = json_array_get(jo, 0), *en = json_array_get(jo, 1);
        if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
            json_integer_value(en) < json_integer_value(b)) {
            snprintf(why, wsz, "entry '%.60s' has bad data_offsets", key);
            goto done;
        }
        e->begin = (uint64_t)json_integer_value(b);
        e->end = (uint64_t)json_integer_value(en);
        if (e->end > f->data_size) {
            snprintf(why, wsz, "entry '%.60s' has data_offsets [%llu, %llu] beyond the %llu bytes of data", key,
                     (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)f->data_size);
            goto done;
        }
        if (overflow || (uint64_t)nbytes != e->end - e->begin) {
            char sb[200];
            snprintf(why, wsz, "entry '%.60s': %s %s needs %s bytes but data_offsets hold %llu", key, dn,
                     nb_shape_str(e->shape, sb, sizeof sb), overflow ? "too many" : "a different number of",
                     (unsigned long long)(e->end - e->begin));
            goto done;
        }
        e->name = strdup(key);
        if (!e->name) {
            snprintf(why, wsz, "out of memory");
            goto done;
        }
        f->n++;
    }
    qsort(f->e, (size_t)f->n, sizeof *f->e, cmp_offset);
    for (int i = 1; i < f->n; i++)
        if (f->e[i].begin < f->e[i - 1].end) {
            snprintf(why, wsz, "entries '%.60s' and '%.60s' overlap", f->e[i - 1].name, f->e[i].name);
            goto done;
        }
    name_idx *ni = malloc((size_t)(f->n ? f->n : 1) * sizeof *ni);
    if (!ni) {
        snprintf(why, wsz, "out of memory");
        goto done;
    }
    for (int i = 0; i < f->n; i++) ni[i] = (name_idx){ f->e[i].name, i };
    qsort(ni, (size_t)f->n, sizeof *ni, cmp_name_idx);
    for (int i = 0; i < f->n; i++) f->by_name[i] = ni[i].idx;
    free(ni);
    rc = 0;
done:
    json_decref(root);
    return rc;
}

static nb_safetensors *open_common(nb_safetensors *f, const char *fn, const char *path) {
    char why[400];
    if (parse(f, why, sizeof why) < 0) {
        if (path) nb__error("%s: '%s' is not a valid safetensors file: %s", fn, path, why);
        else nb__error("%s: not a valid safetensors buffer: %s", fn, why);
        nb_safetensors_close(f);
        return NULL;
    }
    return f;
}
#else
/* Without jansson no header can be read, so every file and buffer is refused. */
static nb_safetensors *open_common(nb_safetensors *f, const char *fn, const char *path) {
    (void)path;
    NB__NO_JSON(fn, "safetensors headers");
    nb_safetensors_close(f);
    return NULL;
}
#endif

nb_safetensors *nb_safetensors_open(const char *path) {
    nb_safetensors *f = calloc(1, sizeof *f);
    if (!f) {
        nb__error("nb_safetensors_open: out of memory");
        return NULL;
    }
    if (nb__map_open(&f->map, "nb_safetensors_open", path) < 0) {
        free(f);
        return NULL;
    }
    return open_common(f, "nb_safetensors_open", path);
}

nb_safetensors *nb_safetensors_open_memory(const void *data, size_t size) {
    if (!data && size) {
        nb__error("nb_safetensors_open_memory: data is NULL");
        return NULL;
    }
    nb_safetensors *f = calloc(1, sizeof *f);
    if (!f) {
        nb__error("nb_safetensors_open_memory: out of memory");
        return NULL;
    }
    static const unsigned char empty[1];
    f->map.data = data ? data : empty;
    f->map.size = size;
    f->map.mapped = false;
    return open_common(f, "nb_safetensors_open_memory", NULL);
}

int nb_safetensors_count(const nb_safetensors *f) { return f ? f->n : 0; }

const char *nb_safetensors_name(const nb_safetensors *f, int i) {
    return f && i >= 0 && i < f->n ? f->e[i].name : NULL;
}

int nb_safetensors_find(const nb_safetensors *f, const char *name) {
    if (!f || !name) return -1;
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(f->e[f->by_name[mid]].name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

const char *nb_safetensors_dtype_name(const nb_safetensors *f, int i) {
    return f && i >= 0 && i < f->n ? f->e[i].dt->name : NULL;
}

int nb_safetensors_info(const nb_safetensors *f, int i, nb_dtype *dtype, nb_shape *shape) {
    if (!f || i < 0 || i >= f->n) {
        nb__error("nb_safetensors_info: index %d out of range [0, %d)", i, f ? f->n : 0);
        return -1;
    }
    if (shape) *shape = f->e[i].shape;
    if (f->e[i].dt->dtype < 0) {
        nb__error("nb_safetensors_info: '%s' has dtype %s, which nabla does not have", f->e[i].name, f->e[i].dt->name);
        return -1;
    }
    if (dtype) *dtype = (nb_dtype)f->e[i].dt->dtype;
    return 0;
}

const void *nb__safetensors_data(const nb_safetensors *f, int i) {
    return f && i >= 0 && i < f->n ? f->data + f->e[i].begin : NULL;
}

size_t nb_safetensors_nbytes(const nb_safetensors *f, int i) {
    return f && i >= 0 && i < f->n ? (size_t)(f->e[i].end - f->e[i].begin) : 0;
}

nb_tensor *nb_safetensors_get(const nb_safetensors *f, const char *name) {
    int i = nb_safetensors_find(f, name);
    if (i < 0) {
        nb__error("nb_safetensors_get: no tensor '%s' in the file", name ? name : "(null)");
        return NULL;
    }
    nb_dtype dt;
    nb_shape shape;
    if (nb_safetensors_info(f, i, &dt, &shape) < 0) return NULL;
    nb_tensor *t = nb__tensor_new(shape, dt);
    if (!t) return NULL;
    memcpy(nb__data(t), f->data + f->e[i].begin, (size_t)(f->e[i].end - f->e[i].begin));
    return nb__own(t);
}

const nb_metadata *nb_safetensors_metadata(const nb_safetensors *f) { return f ? f->md : NULL; }

/* ---------- the writer ---------- */
#ifdef NABLA_HAVE_JSON
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Writes tensors with the public function fn named in messages. */
static int save_named(const char *fn, const char *path, const nb_named_tensor *ts, int n, const nb_metadata *md) {
    if (n < 0 || (n > 0 && !ts)) {
        nb__error("%s: no tensors given for '%s'", fn, path ? path : "(null)");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i].name || !ts[i].tensor) {
            nb__error("%s: entry %d (%s) has a NULL %s, saving '%s'", fn, i, ts[i].name ? ts[i].name : "?",
                          ts[i].name ? "tensor" : "name", path ? path : "(null)");
            return -1;
        } else if (strcmp(ts[i].name, "__metadata__") == 0) {
            nb__error("%s: '__metadata__' cannot name a tensor, saving '%s'", fn, path ? path : "(null)");
            return -1;
        }
    /* names must be unique */
    const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
    if (!names) {
        nb__error("%s: out of memory", fn);
        return -1;
    }
    for (int i = 0; i < n; i++) names[i] = ts[i].name;
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i], names[i - 1]) == 0) {
            nb__error("%s: the name '%s' appears twice, saving '%s'", fn, names[i], path ? path : "(null)");
            free(names);
            return -1;
        }
    free(names);

    int rc = -1;
    char *text = NULL;
    json_t *root = json_object();
    nb_scope *s = nb_scope_begin();
    nb_tensor **cs = calloc((size_t)(n ? n : 1), sizeof *cs);
    if (!root || !cs) {
        nb__error("%s: out of memory", fn);
        goto done;
    }
    if (md && md->n > 0) {
        json_t *jm = json_object();
        if (!jm || json_object_set_new(root, "__metadata__", jm) < 0) goto oom;
        for (int i = 0; i < md->n; i++)
            if (json_object_set_new(jm, md->keys[i], json_string(md->values[i])) < 0) {
                nb__error("%s: metadata '%s' is not valid UTF-8 (saving '%s')", fn, md->keys[i], path);
                goto done;
            }
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        nb_tensor *c = nb_contiguous(nb_to(ts[i].tensor, (nb_device){ NB_CPU, 0 }));
        if (!c) goto done;
        cs[i] = c;
        uint64_t nb = (uint64_t)c->numel * nb__esize(c->dtype);
        json_t *je = json_object(), *shape = json_array(), *offs = json_array();
        if (!je || !shape || !offs) {
            json_decref(je);
            json_decref(shape);
            json_decref(offs);
            goto oom;
        }
        for (int k = 0; k < c->shape.ndim; k++) json_array_append_new(shape, json_integer(c->shape.dim[k]));
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + nb)));
        json_object_set_new(je, "dtype", json_string(st_dtypes[c->dtype].name));
        json_object_set_new(je, "shape", shape);
        json_object_set_new(je, "data_offsets", offs);
        if (json_object_set_new(root, ts[i].name, je) < 0) {
            nb__error("%s: the name '%s' is not valid UTF-8 (saving '%s')", fn, ts[i].name, path);
            goto done;
        }
        off += nb;
    }
    text = json_dumps(root, JSON_COMPACT);
    if (!text) goto oom;
    size_t tl = strlen(text);
    size_t hlen = (8 + tl + 7) / 8 * 8 - 8; /* pad with spaces so the data starts 8-byte aligned */
    unsigned char pre[8];
    for (int i = 0; i < 8; i++) pre[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    char pad[8] = "        ";
    nb__afile af;
    if (nb__afile_open(&af, fn, path) < 0) goto done;
    if (nb__afile_write(&af, pre, 8) < 0 || nb__afile_write(&af, text, tl) < 0 ||
        nb__afile_write(&af, pad, hlen - tl) < 0)
        goto done;
    for (int i = 0; i < n; i++)
        if (nb__afile_write(&af, nb__data(cs[i]), (size_t)cs[i]->numel * nb__esize(cs[i]->dtype)) < 0) goto done;
    rc = nb__afile_commit(&af);
    goto done;
oom:
    nb__error("%s: out of memory (saving '%s')", fn, path);
done:
    free(text);
    free(cs);
    json_decref(root);
    nb_scope_end(s);
    return rc;
}
#else
/* Without jansson no header can be written: every save fails before touching the file. */
static int save_named(const char *fn, const char *path, const nb_named_tensor *ts, int n, const nb_metadata *md) {
    (void)path; (void)ts; (void)n; (void)md;
    NB__NO_JSON(fn, "safetensors headers");
    return -1;
}
#endif

int nb_save_safetensors(const char *path, const nb_named_tensor *tensors, int n, const nb_metadata *md) {
    return save_named("nb_save_safetensors", path, tensors, n, md);
}

/* ---------- state dicts ---------- */
void nb_load_report_free(nb_load_report *r) {
    if (!r) return;
    free(r->text);
    memset(r, 0, sizeof *r);
}

static bool prefixed(const char *name, const char *const *prefixes, int np) {
    if (np == 0) return true;
    for (int i = 0; i < np; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return false;
}

/* Loads file tensors into the targets (names are full file keys). File keys outside the
   prefixes are ignored. Strict: any difference fails before anything is written. */
int nb__load_named(const char *fn, const char *path, const nb_safetensors *f, const nb_named_tensor *targets, int n,
                   const char *const *prefixes, int np, bool strict, nb_load_report *report) {
    int rc = -1;
    nb_text b = { 0 };
    int missing = 0, unexpected = 0, mismatched = 0, loaded = 0;
    int *match = malloc((size_t)(n ? n : 1) * sizeof *match);
    bool *used = calloc((size_t)(f->n ? f->n : 1), sizeof *used);
    if (!match || !used) {
        nb__error("%s: out of memory", fn);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        nb_tensor *t = targets[i].tensor;
        int j = nb_safetensors_find(f, targets[i].name);
        match[i] = -1;
        if (j < 0) {
            missing++;
            nb__text_printf(&b, "  missing key: %s\n", targets[i].name);
            continue;
        }
        used[j] = true;
        const st_entry *e = &f->e[j];
        char fs[200], ms[200];
        if (!nb__shape_eq(&e->shape, &t->shape)) {
            mismatched++;
            nb__text_printf(&b, "  %s: file has %s, model has %s\n", targets[i].name, nb_shape_str(e->shape, fs, sizeof fs),
                      nb_shape_str(t->shape, ms, sizeof ms));
            continue;
        }
        bool ok = e->dt->dtype >= 0 &&
                  (e->dt->dtype == (int)t->dtype || (nb__is_float((nb_dtype)e->dt->dtype) && nb__is_float(t->dtype)));
        if (!ok) {
            mismatched++;
            nb__text_printf(&b, "  %s: file has dtype %s, model has %s\n", targets[i].name, e->dt->name,
                      nb_dtype_name(t->dtype));
            continue;
        }
        match[i] = j;
    }
    for (int j = 0; j < f->n; j++)
        if (!used[j] && prefixed(f->e[j].name, prefixes, np)) {
            unexpected++;
            nb__text_printf(&b, "  unexpected key: %s\n", f->e[j].name);
        }
    if (b.failed) {
        nb__error("%s: out of memory", fn);
        goto done;
    }
    int problems = missing + unexpected + mismatched;
    if (strict && problems) {
        char head[512];
        int hn = snprintf(head, sizeof head,
                          "%s: '%s' does not match the model (%d missing key%s, %d unexpected key%s, %d mismatch%s); "
                          "nothing was loaded:\n",
                          fn, path, missing, missing == 1 ? "" : "s", unexpected, unexpected == 1 ? "" : "s",
                          mismatched, mismatched == 1 ? "" : "es");
        /* the error buffer is bounded: the full list is in the report */
        const size_t room = 1800;
        if ((size_t)hn + b.n > room) nb__error("%s%.*s  ... (truncated; nb_load_opts.report has the full list)", head,
                                                (int)(room > (size_t)hn ? room - (size_t)hn : 0), b.s);
        else nb__error("%s%.*s", head, b.n ? (int)b.n - 1 : 0, b.s ? b.s : "");
        goto done;
    }
    /* write: straight from the mapping into CPU tensors, through a staging tensor otherwise */
    bool prev = nb_set_grad_enabled(false);
    for (int i = 0; i < n; i++) {
        if (match[i] < 0) continue;
        nb_tensor *t = targets[i].tensor;
        const st_entry *e = &f->e[match[i]];
        const void *src = f->data + e->begin;
        if (t->storage->device.type == NB_CPU && nb_is_contiguous(t)) {
            nb__convert(nb__data(t), t->dtype, src, (nb_dtype)e->dt->dtype, t->numel);
            atomic_fetch_add(&t->storage->version, 1);
        } else {
            nb_scope *s = nb_scope_begin();
            nb_tensor *tmp = nb_empty(t->shape, t->dtype);
            int r = -1;
            if (tmp) {
                nb__convert(nb__data(tmp), t->dtype, src, (nb_dtype)e->dt->dtype, t->numel);
                /* a target on a device (a model moved to cuda) takes the values there */
                nb_tensor *there = t->storage->device.type == NB_CPU ? tmp : nb_to(tmp, t->storage->device);
                r = there ? nb_assign(t, there) : -1;
            }
            nb_scope_end(s);
            if (r < 0) {
                nb_set_grad_enabled(prev);
                goto done;
            }
        }
        loaded++;
    }
    nb_set_grad_enabled(prev);
    rc = 0;
done:
    if (report) {
        nb_load_report_free(report);
        report->loaded = loaded;
        report->missing = missing;
        report->unexpected = unexpected;
        report->mismatched = mismatched;
        report->text = b.s ? b.s : calloc(1, 1);
        b.s = NULL;
    }
    free(b.s);
    free(match);
    free(used);
    return rc;
}

/* The module's state entries (malloc'ed; *n set), optionally with names prefixed (then the
   names are malloc'ed too and freed by free_entries). */
nb_named_tensor *nb__module_entries(const char *fn, nb_module *m, const char *prefix, int *n) {
    *n = 0;
    if (!m) {
        if (!nb__has_error()) nb__error("%s: module is NULL", fn);
        return NULL;
    }
    int count = nb_module_state_entries(m, NULL, 0);
    if (count < 0) return NULL;
    nb_named_tensor *es = calloc((size_t)(count ? count : 1), sizeof *es);
    if (!es) {
        nb__error("%s: out of memory", fn);
        return NULL;
    }
    nb_module_state_entries(m, es, count);
    if (prefix) {
        for (int i = 0; i < count; i++) {
            size_t len = strlen(prefix) + strlen(es[i].name) + 1;
            char *s = malloc(len);
            if (!s) {
                for (int k = 0; k < i; k++) free((char *)es[k].name);
                free(es);
                nb__error("%s: out of memory", fn);
                return NULL;
            }
            snprintf(s, len, "%s%s", prefix, es[i].name);
            es[i].name = s;
        }
    }
    *n = count;
    return es;
}

void nb__free_entries(nb_named_tensor *es, int n, bool names) {
    if (!es) return;
    if (names)
        for (int i = 0; i < n; i++) free((char *)es[i].name);
    free(es);
}

int nb__save_named(const char *fn, const char *path, const nb_named_tensor *ts, int n, const nb_metadata *md) {
    return save_named(fn, path, ts, n, md);
}

int nb_save_state_dict_meta(nb_module *m, const char *path, const nb_metadata *md) {
    int n;
    nb_named_tensor *es = nb__module_entries("nb_save_state_dict", m, NULL, &n);
    if (!es) return -1;
    int rc = save_named("nb_save_state_dict", path, es, n, md);
    nb__free_entries(es, n, false);
    return rc;
}

int nb_save_state_dict(nb_module *m, const char *path) { return nb_save_state_dict_meta(m, path, NULL); }

static int load_from(nb_module *m, const nb_safetensors *f, const char *path, nb_load_opts opts) {
    const char *fn = "nb_load_state_dict";
    int n;
    nb_named_tensor *es = nb__module_entries(fn, m, opts.prefix && *opts.prefix ? opts.prefix : NULL, &n);
    if (!es) return -1;
    const char *pre[1] = { opts.prefix };
    int np = opts.prefix && *opts.prefix ? 1 : 0;
    int rc = nb__load_named(fn, path, f, es, n, pre, np, !opts.non_strict, opts.report);
    nb__free_entries(es, n, np > 0);
    return rc;
}

int nb_load_state_dict_from(nb_module *m, const nb_safetensors *f, nb_load_opts opts) {
    if (!f) {
        if (!nb__has_error()) nb__error("nb_load_state_dict: file is NULL");
        return -1;
    }
    return load_from(m, f, "(open file)", opts);
}

int nb_load_state_dict(nb_module *m, const char *path, nb_load_opts opts) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_load_state_dict: module is NULL (loading '%s')", path ? path : "(null)");
        return -1;
    }
    nb__error_ctx ec; /* the reader's errors are told as this function's */
    nb__error_push(&ec, "nb_safetensors_open", "nb_load_state_dict");
    nb_safetensors *f = nb_safetensors_open(path);
    nb__error_pop(&ec);
    if (!f) return -1;
    int rc = load_from(m, f, path, opts);
    nb_safetensors_close(f);
    return rc;
}
