/* Datasets: the handle a user's dataset sits behind, in-memory tensors, subsets, seeded random
   splits, concatenation, mapping with a transform and batch collation (the data keys are draw.c's). */
#include "data_impl.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the handle ---- */
nb_dataset *nb_dataset_new(const nb_dataset_class *cls, void *self) {
    if (!cls || !cls->len || !cls->get) {
        nb__error("nb_dataset_new: the class must have len and get");
        return NULL;
    }
    nb_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) { nb__error("nb_dataset_new: out of memory"); return NULL; }
    atomic_init(&ds->refcount, 1);
    ds->cls = cls;
    ds->self = self;
    return ds;
}

void nb_dataset_free(nb_dataset *ds) {
    if (!ds || atomic_fetch_sub(&ds->refcount, 1) != 1) return;
    if (ds->cls->free) ds->cls->free(ds->self);
    free(ds);
}

static nb_dataset *ds_ref(nb_dataset *ds) {
    atomic_fetch_add(&ds->refcount, 1);
    return ds;
}

int64_t nb_dataset_len(nb_dataset *ds) { return ds ? ds->cls->len(ds->self) : -1; }

static const char *ds_name(nb_dataset *ds) { return ds->cls->name ? ds->cls->name : "dataset"; }

int nb__ds_get(nb_dataset *ds, int64_t index, uint64_t key, nb_batch *out) {
    int64_t len = ds->cls->len(ds->self);
    out->x = out->y = NULL;
    if (index < 0 || index >= len) {
        nb__error("%s: index %lld is out of range for %lld samples", ds_name(ds), (long long)index, (long long)len);
        return -1;
    }
    int rc = ds->cls->get(ds->self, index, key, out);
    if (rc == 0 && !out->x) {
        nb__error("%s: get(%lld) returned no x", ds_name(ds), (long long)index);
        rc = -1;
    }
    if (rc < 0 && !nb__has_error()) nb__error("%s: get(%lld) failed", ds_name(ds), (long long)index);
    return rc < 0 ? -1 : 0;
}

int nb__collate(const nb_batch *s, int64_t n, nb_batch *out, const char *who) {
    out->x = out->y = NULL;
    if (n <= 0) { nb__error("%s: a batch needs at least one sample", who); return -1; }
    for (int part = 0; part < 2; part++) {
        nb_tensor *first = part ? s[0].y : s[0].x;
        if (part == 1 && !first) {
            for (int64_t i = 1; i < n; i++)
                if (s[i].y) { nb__error("%s: sample %lld has a label but sample 0 has none", who, (long long)i); return -1; }
            break;
        }
        nb_shape sh = first->shape, bs;
        if (sh.ndim >= NB_MAX_DIMS) { nb__error("%s: samples have too many dimensions to batch", who); return -1; }
        bs.ndim = sh.ndim + 1;
        bs.dim[0] = n;
        for (int d = 0; d < sh.ndim; d++) bs.dim[d + 1] = sh.dim[d];
        nb_tensor *b = nb_empty(bs, first->dtype);
        if (!b) return -1;
        size_t bytes = (size_t)first->numel * nb__esize(first->dtype);
        char *dst = nb__data(b);
        for (int64_t i = 0; i < n; i++) {
            nb_tensor *t = part ? s[i].y : s[i].x;
            if (!t || !nb__shape_eq(&t->shape, &sh) || t->dtype != first->dtype) {
                char d0[200], d1[200];
                nb__error("%s: cannot batch samples of different shapes: sample %lld %s is %s, sample 0 is %s", who,
                          (long long)i, part ? "y" : "x", t ? nb__describe(t, d1, sizeof d1) : "missing",
                          nb__describe(first, d0, sizeof d0));
                return -1;
            }
            if (t->storage->device.type != NB_CPU) {
                if (nb_copy_to(t, dst + (size_t)i * bytes, bytes) < 0) return -1;
            } else if (nb_is_contiguous(t)) {
                memcpy(dst + (size_t)i * bytes, nb__data(t), bytes);
            } else if (nb_copy_to(t, dst + (size_t)i * bytes, bytes) < 0) {
                return -1;
            }
        }
        if (part) out->y = b; else out->x = b;
    }
    return 0;
}

int nb__ds_get_batch(nb_dataset *ds, const int64_t *idx, int64_t n, uint64_t key, nb_batch *out) {
    out->x = out->y = NULL;
    if (ds->cls->get_batch) {
        int64_t len = ds->cls->len(ds->self);
        for (int64_t i = 0; i < n; i++)
            if (idx[i] < 0 || idx[i] >= len) {
                nb__error("%s: index %lld is out of range for %lld samples", ds_name(ds), (long long)idx[i], (long long)len);
                return -1;
            }
        int rc = ds->cls->get_batch(ds->self, idx, n, key, out);
        if (rc < 0 && !nb__has_error()) nb__error("%s: get_batch failed", ds_name(ds));
        if (rc == 0 && !out->x) { nb__error("%s: get_batch returned no x", ds_name(ds)); rc = -1; }
        return rc < 0 ? -1 : 0;
    }
    nb_batch *s = calloc((size_t)(n > 0 ? n : 1), sizeof *s);
    if (!s) { nb__error("%s: out of memory", ds_name(ds)); return -1; }
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) rc = nb__ds_get(ds, idx[i], key, &s[i]);
    if (rc == 0) rc = nb__collate(s, n, out, ds_name(ds));
    free(s);
    return rc;
}

/* Runs fn's result out of a private scope into the caller's ownership rules. */
static void hand_out(nb_batch *b) {
    if (b->x) nb_retain(b->x);
    if (b->y) nb_retain(b->y);
}
static void own_out(nb_batch *b) {
    b->x = nb__own(b->x);
    b->y = nb__own(b->y);
}

int nb_dataset_get(nb_dataset *ds, int64_t index, nb_batch *out) {
    if (!out) { nb__error("nb_dataset_get: out is NULL"); return -1; }
    out->x = out->y = NULL;
    if (!ds) { nb__error("nb_dataset_get: dataset is NULL"); return -1; }
    if (index < 0) index += ds->cls->len(ds->self);
    nb_scope *s = nb_scope_begin();
    nb_batch b;
    int rc = nb__ds_get(ds, index, 0, &b);
    if (rc == 0) hand_out(&b);
    nb_scope_end(s);
    if (rc == 0) { *out = b; own_out(out); }
    return rc;
}

int nb_dataset_get_batch(nb_dataset *ds, const int64_t *indices, int64_t n, nb_batch *out) {
    if (!out) { nb__error("nb_dataset_get_batch: out is NULL"); return -1; }
    out->x = out->y = NULL;
    if (!ds || (!indices && n > 0)) { nb__error("nb_dataset_get_batch: dataset or indices is NULL"); return -1; }
    nb_scope *s = nb_scope_begin();
    nb_batch b;
    int rc = nb__ds_get_batch(ds, indices, n, 0, &b);
    if (rc == 0) hand_out(&b);
    nb_scope_end(s);
    if (rc == 0) { *out = b; own_out(out); }
    return rc;
}

/* ---- in-memory tensors ---- */
typedef struct {
    nb_tensor *x, *y; /* contiguous CPU tensors, owned */
    int64_t n;
    double x_scale;   /* > 0: u8 x is given as f32 * x_scale */
} tensors_ds;

static int64_t tensors_len(void *self) { return ((tensors_ds *)self)->n; }

/* Rows idx[0..n) of src (contiguous, [N, ...]) into a new tensor [n, ...] (or one row of the
   sample's shape when sample is true), converted to f32 * scale when scale > 0. */
static nb_tensor *gather_rows(nb_tensor *src, const int64_t *idx, int64_t n, bool sample, double scale) {
    nb_shape sh;
    if (sample) {
        sh.ndim = src->shape.ndim - 1;
        for (int d = 1; d < src->shape.ndim; d++) sh.dim[d - 1] = src->shape.dim[d];
    } else {
        sh = src->shape;
        sh.dim[0] = n;
    }
    bool conv = scale > 0 && src->dtype == NB_U8;
    nb_tensor *out = nb_empty(sh, conv ? NB_F32 : src->dtype);
    if (!out) return NULL;
    int64_t row = src->shape.dim[0] ? src->numel / src->shape.dim[0] : 0;
    if (conv) {
        const uint8_t *s = nb__data(src);
        float *d = nb__data(out);
        float lut[256];
        for (int v = 0; v < 256; v++) lut[v] = (float)(v * scale);
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *r = s + idx[i] * row;
            float *o = d + i * row;
            for (int64_t j = 0; j < row; j++) o[j] = lut[r[j]];
        }
    } else {
        size_t bytes = (size_t)row * nb__esize(src->dtype);
        const char *s = nb__data(src);
        char *d = nb__data(out);
        for (int64_t i = 0; i < n; i++) memcpy(d + (size_t)i * bytes, s + (size_t)idx[i] * bytes, bytes);
    }
    return out;
}

static int tensors_get(void *self, int64_t index, uint64_t key, nb_batch *out) {
    tensors_ds *t = self;
    out->x = gather_rows(t->x, &index, 1, true, t->x_scale);
    out->y = t->y ? gather_rows(t->y, &index, 1, true, 0) : NULL;
    return out->x && (!t->y || out->y) ? 0 : -1;
}

static int tensors_get_batch(void *self, const int64_t *idx, int64_t n, uint64_t key, nb_batch *out) {
    tensors_ds *t = self;
    out->x = gather_rows(t->x, idx, n, false, t->x_scale);
    out->y = t->y ? gather_rows(t->y, idx, n, false, 0) : NULL;
    return out->x && (!t->y || out->y) ? 0 : -1;
}

static void tensors_free(void *self) {
    tensors_ds *t = self;
    nb_release(t->x);
    nb_release(t->y);
    free(t);
}

static const nb_dataset_class TENSORS = {
    .name = "nb_data_tensors", .len = tensors_len, .get = tensors_get, .get_batch = tensors_get_batch, .free = tensors_free
};

/* A contiguous CPU tensor with t's values, owned by the caller. */
static nb_tensor *own_contiguous(nb_tensor *t) {
    if (t->storage->device.type == NB_CPU && nb_is_contiguous(t)) return nb_retain(t);
    nb_scope *s = nb_scope_begin();
    nb_tensor *c = nb_contiguous(nb_to(t, (nb_device){ NB_CPU, 0 }));
    if (c) nb_retain(c);
    nb_scope_end(s);
    return c;
}

nb_dataset *nb__data_tensors_scaled(nb_tensor *x, nb_tensor *y, double x_scale) {
    if (!x) { if (!nb__has_error()) nb__error("nb_data_tensors: x is NULL"); return NULL; }
    if (x->shape.ndim < 1 || (y && y->shape.ndim < 1)) {
        nb__error("nb_data_tensors: x and y need a sample axis 0, got %d-d x", x->shape.ndim);
        return NULL;
    }
    if (y && y->shape.dim[0] != x->shape.dim[0]) {
        char a[200], b[200];
        nb__error("nb_data_tensors: x %s and y %s differ in axis 0", nb__describe(x, a, sizeof a), nb__describe(y, b, sizeof b));
        return NULL;
    }
    tensors_ds *t = calloc(1, sizeof *t);
    if (!t) { nb__error("nb_data_tensors: out of memory"); return NULL; }
    t->x = own_contiguous(x);
    t->y = y ? own_contiguous(y) : NULL;
    t->n = x->shape.dim[0];
    t->x_scale = x_scale;
    nb_dataset *ds = (t->x && (!y || t->y)) ? nb_dataset_new(&TENSORS, t) : NULL;
    if (!ds) tensors_free(t);
    return ds;
}

nb_dataset *nb_data_tensors(nb_tensor *x, nb_tensor *y) { return nb__data_tensors_scaled(x, y, 0); }

/* ---- subsets ---- */
typedef struct {
    nb_dataset *base;
    int64_t *idx, n;
} subset_ds;

static int64_t subset_len(void *self) { return ((subset_ds *)self)->n; }

static int subset_get(void *self, int64_t index, uint64_t key, nb_batch *out) {
    subset_ds *s = self;
    return nb__ds_get(s->base, s->idx[index], key, out);
}

static int subset_get_batch(void *self, const int64_t *idx, int64_t n, uint64_t key, nb_batch *out) {
    subset_ds *s = self;
    int64_t *mapped = nb__alloc_i64(n);
    if (!mapped) { nb__error("nb_data_subset: out of memory"); return -1; }
    for (int64_t i = 0; i < n; i++) mapped[i] = s->idx[idx[i]];
    int rc = nb__ds_get_batch(s->base, mapped, n, key, out);
    free(mapped);
    return rc;
}

static void subset_free(void *self) {
    subset_ds *s = self;
    nb_dataset_free(s->base);
    free(s->idx);
    free(s);
}

static const nb_dataset_class SUBSET = {
    .name = "nb_data_subset", .len = subset_len, .get = subset_get, .get_batch = subset_get_batch, .free = subset_free
};

nb_dataset *nb_data_subset(nb_dataset *ds, const int64_t *indices, int64_t n) {
    if (!ds || n < 0 || (n > 0 && !indices)) { nb__error("nb_data_subset: dataset or indices is NULL"); return NULL; }
    int64_t len = nb_dataset_len(ds);
    for (int64_t i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= len) {
            nb__error("nb_data_subset: index %lld (position %lld) is out of range for %lld samples", (long long)indices[i],
                      (long long)i, (long long)len);
            return NULL;
        }
    subset_ds *s = calloc(1, sizeof *s);
    int64_t *idx = nb__alloc_i64(n);
    if (!s || !idx) { free(s); free(idx); nb__error("nb_data_subset: out of memory"); return NULL; }
    if (n) memcpy(idx, indices, sizeof(int64_t) * (size_t)n);
    s->base = ds_ref(ds);
    s->idx = idx;
    s->n = n;
    nb_dataset *out = nb_dataset_new(&SUBSET, s);
    if (!out) subset_free(s);
    return out;
}


int nb_data_random_split(nb_dataset *ds, const int64_t *lengths, int n, uint64_t seed, nb_dataset **out) {
    if (!ds || !lengths || !out || n <= 0) { nb__error("nb_data_random_split: dataset, lengths or out is NULL"); return -1; }
    int64_t len = nb_dataset_len(ds), total = 0;
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        if (lengths[i] < 0) { nb__error("nb_data_random_split: length %d is negative (%lld)", i, (long long)lengths[i]); return -1; }
        if (nb__add_overflows(total, lengths[i], &total)) {
            nb__error("nb_data_random_split: the lengths overflow 64 bits at length %d (%lld)", i, (long long)lengths[i]);
            return -1;
        }
    }
    if (total != len) {
        nb__error("nb_data_random_split: the lengths sum to %lld but the dataset has %lld samples", (long long)total, (long long)len);
        return -1;
    }
    int64_t *order = nb__alloc_i64(len);
    if (!order) { nb__error("nb_data_random_split: out of memory"); return -1; }
    nb__data_permutation(order, len, nb_data_key(seed, 0x73706c6974ull));
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        out[i] = nb_data_subset(ds, order + at, lengths[i]);
        at += lengths[i];
        if (!out[i]) {
            for (int j = 0; j < i; j++) { nb_dataset_free(out[j]); out[j] = NULL; }
            free(order);
            return -1;
        }
    }
    free(order);
    return 0;
}

/* ---- concatenation ---- */
typedef struct {
    nb_dataset **ds;
    int64_t *end; /* end[i]: samples in ds[0..i] */
    int n;
} concat_ds;

static int64_t concat_len(void *self) {
    concat_ds *c = self;
    return c->n ? c->end[c->n - 1] : 0;
}

static int concat_get(void *self, int64_t index, uint64_t key, nb_batch *out) {
    concat_ds *c = self;
    int lo = 0, hi = c->n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (index < c->end[mid]) hi = mid; else lo = mid + 1;
    }
    return nb__ds_get(c->ds[lo], index - (lo ? c->end[lo - 1] : 0), key, out);
}

static void concat_free(void *self) {
    concat_ds *c = self;
    for (int i = 0; i < c->n; i++) nb_dataset_free(c->ds[i]);
    free(c->ds);
    free(c->end);
    free(c);
}

static const nb_dataset_class CONCAT = { .name = "nb_data_concat", .len = concat_len, .get = concat_get, .free = concat_free };

nb_dataset *nb_data_concat(nb_dataset *const *ds, int n) {
    if (!ds || n <= 0) { nb__error("nb_data_concat: needs at least one dataset"); return NULL; }
    for (int i = 0; i < n; i++)
        if (!ds[i]) { nb__error("nb_data_concat: dataset %d is NULL", i); return NULL; }
    concat_ds *c = calloc(1, sizeof *c);
    if (c) {
        c->ds = calloc((size_t)n, sizeof *c->ds);
        c->end = calloc((size_t)n, sizeof *c->end);
    }
    if (!c || !c->ds || !c->end) {
        if (c) { free(c->ds); free(c->end); free(c); }
        nb__error("nb_data_concat: out of memory");
        return NULL;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        c->ds[i] = ds_ref(ds[i]);
        c->n = i + 1;
        int64_t len = nb_dataset_len(ds[i]);
        if (len < 0 || nb__add_overflows(total, len, &total)) {
            nb__error("nb_data_concat: dataset %d has %lld samples, %s", i, (long long)len,
                      len < 0 ? "a negative count" : "and the total overflows 64 bits");
            concat_free(c);
            return NULL;
        }
        c->end[i] = total;
    }
    nb_dataset *out = nb_dataset_new(&CONCAT, c);
    if (!out) concat_free(c);
    return out;
}

/* ---- map ---- */
typedef struct {
    nb_dataset *base;
    nb_transform *tx;
} map_ds;

/* Salts keeping the randomness of a mapped dataset and of the dataset under it apart. */
#define MAP_SALT_BASE 0x6261736525ull
#define MAP_SALT_SAMPLE 0x6d61707325ull

static int64_t map_len(void *self) { return nb_dataset_len(((map_ds *)self)->base); }


static int map_get(void *self, int64_t index, uint64_t key, nb_batch *out) {
    map_ds *m = self;
    if (nb__ds_get(m->base, index, nb_data_key(key, MAP_SALT_BASE), out) < 0) return -1;
    if (m->tx) out->x = nb__transform_run(m->tx, out->x, nb_data_key(nb_data_key(key, MAP_SALT_SAMPLE), (uint64_t)index));
    return out->x ? 0 : -1;
}

/* The base's batch, then the transform on each row (a view, no copy) and the rows stacked;
   the labels are the base's, untouched, so they pass through as one tensor. */
static int map_get_batch(void *self, const int64_t *idx, int64_t n, uint64_t key, nb_batch *out) {
    map_ds *m = self;
    if (m->tx && !m->base->cls->get_batch) {
        /* a base that reads sample by sample (an image folder) may hold samples of different
           shapes, which only the transform makes alike: transform each, then stack, with the
           same keys as map_get */
        nb_batch *s = calloc((size_t)(n > 0 ? n : 1), sizeof *s);
        if (!s) { nb__error("nb_data_map: out of memory"); return -1; }
        int rc = 0;
        for (int64_t i = 0; i < n && rc == 0; i++) rc = nb__ds_get(m->base, idx[i], nb_data_key(key, MAP_SALT_BASE), &s[i]);
        uint64_t sk = nb_data_key(key, MAP_SALT_SAMPLE);
        for (int64_t i = 0; i < n && rc == 0; i++)
            if (!(s[i].x = nb__transform_run(m->tx, s[i].x, nb_data_key(sk, (uint64_t)idx[i])))) rc = -1;
        if (rc == 0) rc = nb__collate(s, n, out, "nb_data_map");
        free(s);
        return rc;
    }
    nb_batch b;
    if (nb__ds_get_batch(m->base, idx, n, nb_data_key(key, MAP_SALT_BASE), &b) < 0) return -1;
    if (!m->tx) { *out = b; return 0; }
    nb_tensor *x = b.x;
    if (x->shape.ndim < 1 || x->shape.dim[0] != n || (b.y && (b.y->shape.ndim < 1 || b.y->shape.dim[0] != n))) {
        char d[200], e[200];
        nb__error("nb_data_map: the base's batch of %lld samples has x %s and y %s, not %lld along axis 0", (long long)n,
                  nb__describe(x, d, sizeof d), b.y ? nb__describe(b.y, e, sizeof e) : "none", (long long)n);
        return -1;
    }
    nb_batch *s = calloc((size_t)(n > 0 ? n : 1), sizeof *s);
    if (!s) { nb__error("nb_data_map: out of memory"); return -1; }
    nb_shape row_shape = { .ndim = x->shape.ndim - 1 };
    for (int d = 1; d < x->shape.ndim; d++) row_shape.dim[d - 1] = x->shape.dim[d];
    uint64_t sk = nb_data_key(key, MAP_SALT_SAMPLE);
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        nb_tensor *row = nb__own(nb__tensor_view(x, row_shape, x->stride + 1, x->offset + i * x->stride[0]));
        s[i].x = row ? nb__transform_run(m->tx, row, nb_data_key(sk, (uint64_t)idx[i])) : NULL;
        if (!s[i].x) rc = -1;
    }
    if (rc == 0) rc = nb__collate(s, n, out, "nb_data_map");
    if (rc == 0) out->y = b.y;
    free(s);
    return rc;
}


static void map_free(void *self) {
    map_ds *m = self;
    nb_dataset_free(m->base);
    nb_transform_free(m->tx);
    free(m);
}

static const nb_dataset_class MAP = {
    .name = "nb_data_map", .len = map_len, .get = map_get, .get_batch = map_get_batch, .free = map_free
};

nb_dataset *nb_data_map(nb_dataset *ds, nb_transform *tx) {
    if (!ds) { nb_transform_free(tx); if (!nb__has_error()) nb__error("nb_data_map: dataset is NULL"); return NULL; }
    map_ds *m = calloc(1, sizeof *m);
    if (!m) { nb_transform_free(tx); nb__error("nb_data_map: out of memory"); return NULL; }
    m->base = ds_ref(ds);
    m->tx = tx;
    nb_dataset *out = nb_dataset_new(&MAP, m);
    if (!out) map_free(m);
    return out;
}

/* ---- files ---- */
/* What a file that is not a regular one is, for messages. */
static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : "not a regular file";
}

void *nb__read_file(const char *who, const char *path, size_t *size) {
    *size = 0;
    if (!path) { nb__error("%s: path is NULL", who); return NULL; }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { nb__error("%s: cannot open %s: %s", who, path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        nb__error("%s: cannot stat %s: %s", who, path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        nb__error("%s: %s is not a regular file (it is %s)", who, path, file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    size_t cap = (size_t)1 << 16, n = 0;
    if (st.st_size > 0) {
        if ((uint64_t)st.st_size >= SIZE_MAX) {
            nb__error("%s: %s is too large to read (%lld bytes)", who, path, (long long)st.st_size);
            close(fd);
            return NULL;
        }
        cap = (size_t)st.st_size + 1; /* one more byte, to see the end at once */
    }
    char *buf = malloc(cap);
    int err = 0;
    while (buf) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR) continue;
            err = errno;
            break;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n < cap) continue;
        char *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL; /* the file grew while read */
        if (!grown) { free(buf); buf = NULL; break; }
        buf = grown;
        cap *= 2;
    }
    close(fd);
    if (!buf) { nb__error("%s: out of memory reading %s", who, path); return NULL; }
    if (err) {
        nb__error("%s: cannot read %s: %s (at byte %zu)", who, path, strerror(err), n);
        free(buf);
        return NULL;
    }
    *size = n;
    return buf;
}
