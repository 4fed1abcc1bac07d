/* Tensor and storage lifetime, shapes and strides, inspection, and scopes. */
#include "core_impl.h"
#include "nabla/autograd.h" /* the gradient fields of a tensor are declared there */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORAGE_HEADER 64 /* keeps the data 64-byte aligned behind the storage header */

static const char *const dtype_names[NB_DTYPE_COUNT] = { "f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool", "i8" };
static const size_t dtype_sizes[NB_DTYPE_COUNT] = { 4, 8, 2, 2, 8, 4, 1, 1, 1 };

const char *nb_dtype_name(nb_dtype d) { return (unsigned)d < NB_DTYPE_COUNT ? dtype_names[d] : "?"; }
size_t nb_dtype_size(nb_dtype d) { return (unsigned)d < NB_DTYPE_COUNT ? dtype_sizes[d] : 0; }
bool nb__is_float(nb_dtype d) { return d == NB_F32 || d == NB_F64 || d == NB_F16 || d == NB_BF16; }

static const char *const device_type_names[] = { [NB_CPU] = "cpu", [NB_CUDA] = "cuda", [NB_EXT] = "ext" };

nb_device nb_device_parse(const char *text) {
    nb_device dev = { NB_CPU, 0 };
    if (!text) { nb__error("nb_device_parse: device string is NULL"); dev.index = -1; return dev; }
    if (strcmp(text, "cpu") == 0) return dev;
    for (int k = NB_CUDA; k <= NB_EXT; k++) {
        size_t n = strlen(device_type_names[k]);
        if (strncmp(text, device_type_names[k], n) != 0) continue;
        dev.type = (nb_device_type)k;
        if (text[n] == 0) return dev;
        if (text[n] == ':' && text[n + 1] >= '0' && text[n + 1] <= '9') {
            char *end;
            long idx = strtol(text + n + 1, &end, 10);
            if (*end == 0 && idx < 1024) { dev.index = (int)idx; return dev; }
        }
    }
    nb__error("nb_device_parse: unknown device \"%s\" (expected \"cpu\", \"cuda\", \"cuda:N\" or \"ext:N\")", text);
    dev.type = NB_CPU;
    dev.index = -1;
    return dev;
}

const char *nb_device_str(nb_device d, char *buf, size_t size) {
    if (d.type == NB_CPU) snprintf(buf, size, "cpu");
    else if ((unsigned)d.type <= NB_EXT) snprintf(buf, size, "%s:%d", device_type_names[d.type], d.index);
    else snprintf(buf, size, "device%d:%d", (int)d.type, d.index);
    return buf;
}

const char *nb_shape_str(nb_shape s, char *buf, size_t size) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "[");
    for (int i = 0; i < s.ndim; i++)
        n += (size_t)snprintf(buf + n, n < size ? size - n : 0, i ? ", %lld" : "%lld", (long long)s.dim[i]);
    snprintf(buf + n, n < size ? size - n : 0, "]");
    return buf;
}

const char *nb__describe(const nb_tensor *t, char *buf, size_t size) {
    if (!t) { snprintf(buf, size, "NULL"); return buf; }
    char sh[160];
    nb_shape_str(t->shape, sh, sizeof sh);
    if (t->storage->device.type == NB_CPU) snprintf(buf, size, "%s %s", sh, nb_dtype_name(t->dtype));
    else {
        char dv[32];
        snprintf(buf, size, "%s %s on %s", sh, nb_dtype_name(t->dtype), nb_device_str(t->storage->device, dv, sizeof dv));
    }
    return buf;
}

int64_t nb__shape_numel(const nb_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dim[i];
    return n;
}

bool nb__shape_check(const char *fn, const nb_shape *s, size_t esize, int64_t *numel) {
    char sh[160];
    if (s->ndim < 0 || s->ndim > NB_MAX_DIMS) {
        if (fn) nb__error("%s: %d dimensions (at most %d are supported)", fn, s->ndim, NB_MAX_DIMS);
        return false;
    }
    int64_t n = 1, span = 1; /* span: the product with zeros as ones, the largest stride's reach */
    bool zero = false;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dim[i] < 0) {
            if (fn) nb__error("%s: negative dimension in shape %s", fn, nb_shape_str(*s, sh, sizeof sh));
            return false;
        }
        if (s->dim[i] == 0) zero = true;
        else if (nb__mul_overflows(span, s->dim[i], &span)) goto too_large;
    }
    int64_t bytes;
    if (nb__mul_overflows(span, esize ? (int64_t)esize : 1, &bytes)) goto too_large;
    n = zero ? 0 : span;
    if (numel) *numel = n;
    return true;
too_large:
    if (fn) nb__error("%s: shape %s is too large (its element count or byte size overflows 64 bits)", fn,
              nb_shape_str(*s, sh, sizeof sh));
    return false;
}

bool nb__shape_eq(const nb_shape *a, const nb_shape *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

void nb__contiguous_strides(const nb_shape *s, int64_t *stride) {
    int64_t st = 1;
    for (int i = s->ndim - 1; i >= 0; i--) {
        stride[i] = st;
        st *= s->dim[i] > 1 ? s->dim[i] : 1;
    }
}

int nb__axis(int axis, int ndim) {
    int n = ndim == 0 ? 1 : ndim; /* a 0-d tensor accepts axis 0 and -1, as torch does */
    if (axis < -n || axis >= n) return -1;
    return axis < 0 ? axis + n : axis;
}

/* Tensors made and not yet freed, in every thread (nb_live_tensors): relaxed, a count to watch,
   not a synchronisation. */
static atomic_int_least64_t live_tensors;

int64_t nb_live_tensors(void) { return (int64_t)atomic_load_explicit(&live_tensors, memory_order_relaxed); }

static nb_tensor *tensor_header(void) {
    nb_tensor *t = nb__alloc(sizeof(nb_tensor));
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    atomic_init(&t->refcount, 1);
    atomic_fetch_add_explicit(&live_tensors, 1, memory_order_relaxed);
    return t;
}

bool nb__tensor_size(nb_shape shape, nb_dtype dtype, int64_t *numel, size_t *nbytes) {
    if (!nb__dtype_ok("nb_empty", dtype)) return false;
    size_t esize = nb_dtype_size(dtype);
    if (!nb__shape_check("nb_empty", &shape, esize, numel)) return false;
    if (*numel > 0 && (uint64_t)*numel > ((uint64_t)1 << 46) / esize) { /* past any machine's memory */
        char sh[160];
        nb__error("nb_empty: shape %s %s needs %llu bytes, more than the 64 TiB nabla allocates at most",
                  nb_shape_str(shape, sh, sizeof sh), nb_dtype_name(dtype), (unsigned long long)*numel * esize);
        return false;
    }
    *nbytes = (size_t)*numel * esize;
    return true;
}

nb_tensor *nb__tensor_on(nb_storage *st, nb_shape shape, nb_dtype dtype, int64_t numel) {
    nb_tensor *t = tensor_header();
    if (!t) return NULL;
    t->dtype = dtype;
    t->shape = shape;
    nb__contiguous_strides(&shape, t->stride);
    t->numel = numel;
    t->storage = st;
    return t;
}

nb_tensor *nb__tensor_new(nb_shape shape, nb_dtype dtype) {
    int64_t numel;
    size_t nbytes;
    if (!nb__tensor_size(shape, dtype, &numel, &nbytes)) return NULL;
    size_t block = STORAGE_HEADER + (nbytes ? nbytes : 1);
    nb_storage *st = nb__alloc(block);
    nb_tensor *t = st ? nb__tensor_on(st, shape, dtype, numel) : NULL;
    if (!t) {
        nb__free(st, block);
        char sh[160];
        nb__error("nb_empty: out of memory allocating %zu bytes for %s %s", nbytes,
                  nb_shape_str(shape, sh, sizeof sh), nb_dtype_name(dtype));
        return NULL;
    }
    atomic_init(&st->refcount, 1);
    atomic_init(&st->version, 0);
    st->device = (nb_device){ NB_CPU, 0 };
    st->nbytes = nbytes;
    st->block = block;
    st->data = (char *)st + STORAGE_HEADER;
    st->ops = NULL;
    st->constant_id = 0;
    return t;
}

void nb__tensor_freeze(nb_tensor *t) {
    static atomic_uint_least64_t next_id = 1;
    if (t && !t->storage->constant_id) t->storage->constant_id = atomic_fetch_add(&next_id, 1);
}

nb_tensor *nb__tensor_view(nb_tensor *base, nb_shape shape, const int64_t *stride, int64_t offset) {
    int64_t numel;
    if (!nb__shape_check("nb_view", &shape, nb__esize(base->dtype), &numel)) return NULL;
    nb_tensor *t = tensor_header();
    if (!t) { nb__error("nb_view: out of memory"); return NULL; }
    t->dtype = base->dtype;
    t->shape = shape;
    memcpy(t->stride, stride, sizeof(int64_t) * (size_t)shape.ndim);
    t->offset = offset;
    t->numel = numel;
    t->storage = base->storage;
    atomic_fetch_add_explicit(&base->storage->refcount, 1, memory_order_relaxed);
    return t;
}

/* ---- release: iterative, so freeing a long graph does not recurse deeply ---- */
static void (*node_release)(struct nb_node *);
void nb__set_node_release(void (*release)(struct nb_node *)) { node_release = release; }

nb_storage *nb__storage_header(nb_device dev, void *data, size_t nbytes, const nb_storage_ops *ops) {
    nb_storage *st = nb__alloc(sizeof *st);
    if (!st) return NULL;
    memset(st, 0, sizeof *st);
    atomic_init(&st->refcount, 1);
    atomic_init(&st->version, 0);
    st->device = dev;
    st->nbytes = nbytes;
    st->block = sizeof *st;
    st->data = data;
    st->ops = ops;
    return st;
}

atomic_uint_least64_t nb__constants_freed;

static void storage_free(nb_storage *st) {
    if (st->constant_id) atomic_fetch_add(&nb__constants_freed, 1);
    if (st->ops) st->ops->release(st);
    nb__free(st, st->block);
}

void nb__grad_hooks_free(nb_grad_hook_entry *h) {
    for (nb_grad_hook_entry *next; h; h = next) {
        next = h->next;
        nb__free(h, sizeof *h);
    }
}

static void tensor_free(nb_tensor *t) {
    nb__grad_hooks_free(t->hooks);
    nb_storage *st = t->storage;
    if (atomic_fetch_sub_explicit(&st->refcount, 1, memory_order_acq_rel) == 1) storage_free(st);
    nb_tensor *grad = t->grad;
    struct nb_node *fn = t->grad_fn;
    nb__free(t, sizeof *t);
    atomic_fetch_sub_explicit(&live_tensors, 1, memory_order_relaxed);
    if (grad) nb_release(grad);
    if (fn && node_release) node_release(fn);
}

nb_tensor *nb_retain(nb_tensor *t) {
    if (t) atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
    return t;
}

static NB_TLS nb_tensor **pending;
static NB_TLS int pending_n, pending_cap;
static NB_TLS bool releasing;

/* The queue is kept for the thread's next release, and freed when the thread ends: a key whose
   value is set once the thread has a queue (a data-loader worker, a caller's own thread). */
static pthread_key_t pending_key;
static pthread_once_t pending_key_once = PTHREAD_ONCE_INIT;
static bool pending_key_made;

static void pending_free(void *arg) {
    (void)arg;
    nb__free(pending, sizeof(nb_tensor *) * (size_t)pending_cap);
    pending = NULL;
    pending_n = pending_cap = 0;
}

static void make_pending_key(void) { pending_key_made = pthread_key_create(&pending_key, pending_free) == 0; }

/* At unload (dlclose, or the process's exit): the key goes, as its destructor's code would be
   unmapped, and this thread's queue with it. Runs after the thread pool has joined its workers
   and before the allocator hands its cached blocks back (priority 101, later). */
__attribute__((destructor(102))) static void pending_unload(void) {
    if (pending_key_made) {
        pthread_key_delete(pending_key);
        pending_key_made = false;
    }
    pending_free(NULL);
}

void nb_release(nb_tensor *t) {
    if (!t) return;
    if (atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1) return;
    if (releasing) { /* inside a release already: queue it instead of recursing */
        if (pending_n == pending_cap) {
            int cap = pending_cap ? pending_cap * 2 : 256;
            nb_tensor **grown = nb__alloc(sizeof(nb_tensor *) * (size_t)cap);
            if (!grown) { tensor_free(t); return; } /* no memory: fall back to recursion */
            if (pending) memcpy(grown, pending, sizeof(nb_tensor *) * (size_t)pending_n);
            else { /* this thread's first queue: freed when the thread ends */
                pthread_once(&pending_key_once, make_pending_key);
                if (pending_key_made) pthread_setspecific(pending_key, &pending);
            }
            nb__free(pending, sizeof(nb_tensor *) * (size_t)pending_cap);
            pending = grown;
            pending_cap = cap;
        }
        pending[pending_n++] = t;
        return;
    }
    releasing = true;
    tensor_free(t);
    while (pending_n > 0) tensor_free(pending[--pending_n]);
    releasing = false;
}

/* ---- scopes ---- */
struct nb_scope {
    nb_tensor **items;
    int n, cap;
    nb_scope *parent;
};

static NB_TLS nb_scope *current_scope;

nb_scope *nb_scope_begin(void) {
    nb_scope *s = nb__alloc(sizeof *s);
    if (!s) { nb__error("nb_scope_begin: out of memory"); return NULL; }
    s->items = NULL;
    s->n = s->cap = 0;
    s->parent = current_scope;
    current_scope = s;
    return s;
}

static void scope_close(nb_scope *s) {
    current_scope = s->parent;
    for (int i = s->n - 1; i >= 0; i--) nb_release(s->items[i]);
    nb__free(s->items, sizeof(nb_tensor *) * (size_t)s->cap);
    nb__free(s, sizeof *s);
}

void nb_scope_end(nb_scope *s) {
    if (!s) return;
    nb_scope *c = current_scope;
    while (c && c != s) c = c->parent;
    if (!c) { nb__error("nb_scope_end: this scope is not open on this thread"); return; }
    while (current_scope != s) scope_close(current_scope);
    scope_close(s);
}

nb_tensor *nb__own(nb_tensor *t) {
    nb_scope *s = current_scope;
    if (!t || !s) return t;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        nb_tensor **grown = nb__alloc(sizeof(nb_tensor *) * (size_t)cap);
        if (!grown) { nb__error("nb_scope: out of memory"); nb_release(t); return NULL; }
        if (s->items) memcpy(grown, s->items, sizeof(nb_tensor *) * (size_t)s->n);
        nb__free(s->items, sizeof(nb_tensor *) * (size_t)s->cap);
        s->items = grown;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return t;
}

bool nb__scope_open(void) { return current_scope != NULL; }

nb_tensor *nb_keep(nb_tensor *t) {
    if (!t) return NULL;
    for (nb_scope *s = current_scope; s; s = s->parent)
        for (int i = s->n - 1; i >= 0; i--)
            if (s->items[i] == t) {
                memmove(s->items + i, s->items + i + 1, sizeof(nb_tensor *) * (size_t)(s->n - i - 1));
                s->n--;
                return t;
            }
    return t;
}

/* ---- inspection ---- */
nb_shape nb_shape_of(const nb_tensor *t) { return t ? t->shape : (nb_shape){ 0, { 0 } }; }
int nb_ndim(const nb_tensor *t) { return t ? t->shape.ndim : 0; }
int64_t nb_numel(const nb_tensor *t) { return t ? t->numel : 0; }
nb_dtype nb_dtype_of(const nb_tensor *t) { return t ? t->dtype : NB_F32; }
nb_device nb_device_of(const nb_tensor *t) { return t ? t->storage->device : (nb_device){ NB_CPU, 0 }; }

int64_t nb_dim(const nb_tensor *t, int axis) {
    if (!t) {
        nb__error("nb_dim: input is NULL");
        return -1;
    }
    int a = nb__axis(axis, t->shape.ndim);
    if (a < 0 || t->shape.ndim == 0) {
        char d[200];
        nb__error("nb_dim: axis %d is out of range for %s", axis, nb__describe(t, d, sizeof d));
        return -1;
    }
    return t->shape.dim[a];
}

int64_t nb_stride(const nb_tensor *t, int axis) {
    if (!t) {
        nb__error("nb_stride: input is NULL");
        return -1;
    }
    int a = nb__axis(axis, t->shape.ndim);
    if (a < 0 || t->shape.ndim == 0) {
        char d[200];
        nb__error("nb_stride: axis %d is out of range for %s", axis, nb__describe(t, d, sizeof d));
        return -1;
    }
    return t->stride[a];
}

bool nb_is_contiguous(const nb_tensor *t) {
    if (!t) return false;
    int64_t st = 1;
    for (int i = t->shape.ndim - 1; i >= 0; i--) {
        if (t->shape.dim[i] == 1) continue;
        if (t->stride[i] != st) return false;
        st *= t->shape.dim[i];
    }
    return true;
}

bool nb_shares_storage(const nb_tensor *a, const nb_tensor *b) {
    return a && b && a->storage == b->storage;
}

NB_TLS unsigned nb__host_reads;

void *nb_data_ptr(nb_tensor *t) {
    if (!t) {
        nb__error("nb_data_ptr: input is NULL");
        return NULL;
    }
    nb__host_reads++;
    if (!nb_is_contiguous(t) || t->storage->device.type != NB_CPU) {
        char d[200];
        nb__error("nb_data_ptr: tensor %s is not a contiguous CPU tensor (call nb_contiguous first)",
                  nb__describe(t, d, sizeof d));
        return NULL;
    }
    return nb__data(t);
}

/* Copies t's elements, in row-major order, from host memory at base (t's element 0) to dst. */
static void gather_dense(const nb_tensor *t, const char *base, void *dst) {
    size_t es = nb_dtype_size(t->dtype);
    if (nb_is_contiguous(t)) { memcpy(dst, base, (size_t)t->numel * es); return; }
    int64_t idx[NB_MAX_DIMS] = { 0 };
    int nd = t->shape.ndim;
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * t->stride[d];
        memcpy((char *)dst + (size_t)i * es, base + off * (int64_t)es, es);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < t->shape.dim[d]) break;
            idx[d] = 0;
        }
    }
}

int nb_copy_to(const nb_tensor *t, void *dst, size_t bytes) {
    if (!t) {
        nb__error("nb_copy_to: input is NULL");
        return -1;
    }
    size_t need = (size_t)t->numel * nb_dtype_size(t->dtype);
    if (bytes != need) {
        char d[200];
        nb__error("nb_copy_to: destination has %zu bytes, tensor %s needs %zu", bytes, nb__describe(t, d, sizeof d), need);
        return -1;
    }
    if (!dst && need) { nb__error("nb_copy_to: destination is NULL"); return -1; }
    return nb__read_to_host(t, dst);
}

int nb__read_to_host(const nb_tensor *t, void *dst) {
    if (t->numel == 0) return 0;
    if (!t->storage->data) {
        char d[200];
        nb__error("nb_copy_to: %s has no memory now: its storage was released (a sharded module's parameters exist "
                  "only during its forward and backward)", nb__describe(t, d, sizeof d));
        return -1;
    }
    if (t->storage->device.type == NB_CPU) {
        gather_dense(t, nb__data(t), dst);
        return 0;
    }
    /* a device's tensor: bring the span of storage its view covers to the host, then gather */
    size_t es = nb_dtype_size(t->dtype);
    int64_t last = 0;
    for (int d = 0; d < t->shape.ndim; d++) last += (t->shape.dim[d] - 1) * t->stride[d];
    size_t n = (size_t)(last + 1) * es;
    char *span = nb__alloc(n);
    if (!span) {
        char d[200];
        nb__error("nb_copy_to: out of memory reading %s to the host", nb__describe(t, d, sizeof d));
        return -1;
    }
    int rc = t->storage->ops->read(t->storage, (size_t)t->offset * es, span, n);
    if (rc == 0) gather_dense(t, span, dst);
    nb__free(span, n);
    return rc;
}

double nb_item(const nb_tensor *t) {
    if (!t) {
        nb__error("nb_item: input is NULL");
        return NAN;
    }
    nb__host_reads++;
    if (t->numel != 1) {
        char d[200];
        nb__error("nb_item: tensor %s has %lld elements, expected 1", nb__describe(t, d, sizeof d), (long long)t->numel);
        return NAN;
    }
    if (t->storage->device.type != NB_CPU) {
        uint64_t v;
        if (nb__read_to_host(t, &v) < 0) return NAN;
        return nb__load(&v, t->dtype, 0);
    }
    return nb__load(nb__data(t), t->dtype, 0);
}

nb_tensor *nb_set_requires_grad(nb_tensor *t, bool requires_grad) {
    if (!t) {
        nb__error("nb_set_requires_grad: input is NULL");
        return NULL;
    }
    if (t->grad_fn) {
        if (!requires_grad) {
            char d[200];
            nb__error("nb_set_requires_grad: %s is the result of an op, not a leaf; use nb_detach to cut it from the graph",
                      nb__describe(t, d, sizeof d));
        }
        return t;
    }
    if (requires_grad && !nb__is_float(t->dtype)) {
        char d[200];
        nb__error("nb_set_requires_grad: only float tensors can require gradients, got %s", nb__describe(t, d, sizeof d));
        return t;
    }
    t->requires_grad = requires_grad;
    return t;
}

bool nb_requires_grad(const nb_tensor *t) { return t && t->requires_grad; }
bool nb_is_leaf(const nb_tensor *t) { return t && !t->grad_fn; }
nb_tensor *nb_grad_of(const nb_tensor *t) { return t ? t->grad : NULL; }
void nb_set_grad(nb_tensor *t, nb_tensor *grad) {
    if (!t) return;
    if (grad && (!nb__shape_eq(&grad->shape, &t->shape) || grad->dtype != t->dtype)) {
        char dg[200], dt[200];
        nb__error("nb_set_grad: gradient %s does not match tensor %s", nb__describe(grad, dg, sizeof dg),
                  nb__describe(t, dt, sizeof dt));
        return;
    }
    nb_tensor *old = t->grad;
    t->grad = nb_retain(grad);
    nb_release(old);
}

void nb_zero_grad(nb_tensor *t) {
    if (!t || !t->grad) return;
    nb_tensor *g = t->grad;
    t->grad = NULL;
    nb_release(g);
}
