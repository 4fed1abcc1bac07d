/* The CUDA backend's entry points of the ops that move elements by index (k_index.cu). The host
   reads the indices first (a wait for the device): it checks them, recording the cpu's error for
   an index out of range before anything is written, and for the ops whose writes may meet it
   sorts each destination's sources into a list in the cpu's order, so that the device adds them
   in that order, the same on every run, without atomics. */
#include "ops_cuda.h"
#include "ops_util.h"
#include "../prep.h"
#include <stdlib.h>

/* The host's copy of idx's values, each checked to lie in [0, size); NULL with the cpu's error. */
static int64_t *checked_indices(const char *fn, const nb_tensor *idx, int axis, int64_t size) {
    int64_t *v = nb__cu_index_values(fn, idx);
    for (int64_t j = 0; v && j < idx->numel; j++)
        if (v[j] < 0 || v[j] >= size) {
            nb__error("nb_%s: index %lld is out of range for axis %d of size %lld", fn, (long long)v[j], axis,
                      (long long)size);
            free(v);
            return NULL;
        }
    return v;
}

typedef int (*read_launch)(const nb__k_view *out, const nb__k_view *t, const nb__k_view *idx, int axis);

/* index_select and gather: in t, idx; args.i[0] the axis of t that idx indexes */
static int read_by_index(const char *fn, read_launch launch, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    nb_tensor *t = in[0], *idx = in[1];
    int axis = (int)args->i[0];
    int64_t *v = checked_indices(fn, idx, axis, t->shape.ndim ? t->shape.dim[axis] : 1);
    if (!v) return -1;
    free(v);
    nb__k_view o = nb__cu_view(out), tv = nb__cu_view(t), iv = nb__cu_view(idx);
    return nb__cu_check(fn, launch(&o, &tv, &iv, axis));
}

int nb__cuda_index_select(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return read_by_index("index_select", nb__k_index_select, out, in, args);
}

int nb__cuda_gather(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return read_by_index("gather", nb__k_gather, out, in, args);
}

/* Runs an accumulating kernel on lists of keys (freeing keys): the lists go to the device,
   launch gets them, and they are given back after it is queued. */
typedef int (*list_launch)(void *ctx, const int64_t *start, const int64_t *list);
static int with_lists(const char *fn, int64_t *keys, int64_t n, int64_t buckets, list_launch launch, void *ctx) {
    int64_t *lists = nb__cu_bucket_lists(fn, keys, n, buckets);
    free(keys);
    if (!lists) return -1;
    const int64_t *start, *list;
    size_t bytes;
    void *dev = nb__cu_upload_lists(fn, lists, n, buckets, &start, &list, &bytes);
    if (!dev) return -1;
    int rc = nb__cu_check(fn, launch(ctx, start, list));
    nb__cu_scratch_free(dev, bytes);
    return rc;
}

typedef struct { nb__k_view out, src, x; int axis; int64_t tailn; int accumulate; } list_job;

static int launch_index_add(void *ctx, const int64_t *start, const int64_t *list) {
    list_job *j = ctx;
    return nb__k_index_add(&j->out, &j->src, j->axis, start, list);
}

/* in: src, idx; out[..., idx[j], ...] += src[..., j, ...] over zeros; args.i[0]: the axis */
int nb__cuda_index_add(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *src = in[0], *idx = in[1];
    int axis = (int)args->i[0];
    int64_t size = out->shape.ndim ? out->shape.dim[axis] : 1;
    int64_t *v = checked_indices("index_add", idx, axis, size);
    if (!v) return -1;
    list_job j = { .out = nb__cu_view(out), .src = nb__cu_view(src), .axis = axis };
    if (out->shape.ndim == 0) { /* a 0-d source lands on the 0-d output whole */
        free(v);
        return nb__cu_check("index_add", nb__k_cast(&j.out, &j.src));
    }
    return with_lists("index_add", v, idx->numel, size, launch_index_add, &j);
}

static int launch_scatter_add(void *ctx, const int64_t *start, const int64_t *list) {
    list_job *j = ctx;
    return nb__k_scatter_add(&j->out, &j->src, start, list);
}

/* in: src, idx (src's shape); out[e's position with idx[e] on axis] += src[e] over zeros */
int nb__cuda_scatter_add(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *src = in[0], *idx = in[1];
    int axis = (int)args->i[0], nd = out->shape.ndim;
    int64_t size = nd ? out->shape.dim[axis] : 1;
    int64_t *v = checked_indices("scatter_add", idx, axis, size);
    if (!v) return -1;
    /* each source element's destination, a row-major index of the dense out, in place of its index */
    int64_t c[NB_MAX_DIMS] = { 0 };
    for (int64_t e = 0; e < src->numel; e++) {
        int64_t o = 0;
        for (int d = 0; d < nd; d++) o += (d == axis ? v[e] : c[d]) * out->stride[d];
        v[e] = o;
        for (int d = nd - 1; d >= 0; d--) {
            if (++c[d] < src->shape.dim[d]) break;
            c[d] = 0;
        }
    }
    list_job j = { .out = nb__cu_view(out), .src = nb__cu_view(src) };
    return with_lists("scatter_add", v, src->numel, out->numel, launch_scatter_add, &j);
}

/* Host copies of the n index tensors idx, their broadcast shape *b and count, and the offsets
   (by stride) they select in a tensor of shape xs: the cpu's reading (nb__index_offsets).
   NULL with the error recorded. */
static int64_t *index_offsets(const char *fn, const nb_shape *xs, const int64_t *stride, nb_tensor *const *idx, int n,
                              nb_shape *b, int64_t *count) {
    nb_tensor *host[NB_MAX_DIMS] = { 0 };
    int64_t *offs = NULL;
    if (n < 1 || n > NB_MAX_DIMS) {
        nb__error("nb_%s: cuda: %d index tensors, not 1 to %d", fn, n, NB_MAX_DIMS);
        return NULL;
    }
    int k = 0;
    for (; k < n; k++)
        if (!(host[k] = nb__cu_to_host(fn, idx[k]))) break;
    if (k == n) {
        nb__index_shape(host, n, b);
        *count = nb__shape_numel(b);
        offs = nb__index_offsets(fn, xs, stride, host, n, b, *count);
    }
    for (int j = 0; j < k; j++) nb_release(host[j]);
    return offs;
}

/* x's axes from n on: the part of x that one index position selects */
static nb__k_view tail_of(const nb_tensor *x, int n) {
    nb__k_view t = nb__cu_view(x);
    t.ndim = x->shape.ndim - n;
    t.numel = 1;
    for (int d = 0; d < t.ndim; d++) {
        t.shape[d] = x->shape.dim[n + d];
        t.stride[d] = x->stride[n + d];
        t.numel *= t.shape[d];
    }
    return t;
}

/* in: x, then the index tensors for x's leading axes */
int nb__cuda_index(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)args;
    nb_tensor *x = in[0];
    int n = nin - 1;
    nb_shape b;
    int64_t count;
    int64_t *offs = index_offsets("index", &x->shape, x->stride, in + 1, n, &b, &count);
    if (!offs) return -1;
    nb__k_view o = nb__cu_view(out), tail = tail_of(x, n);
    int rc = 0;
    if (count > 0 && tail.numel > 0) {
        size_t bytes = sizeof(int64_t) * (size_t)count;
        void *dev = nb__cu_upload("index", offs, bytes);
        rc = dev ? nb__cu_check("index", nb__k_index(&o, &tail, dev)) : -1;
        nb__cu_scratch_free(dev, bytes);
    }
    free(offs);
    return rc;
}

static int launch_index_put(void *ctx, const int64_t *start, const int64_t *list) {
    list_job *j = ctx;
    return nb__k_index_put(&j->out, &j->x, &j->src, start, list, j->tailn, j->accumulate);
}

/* in: x, values, then the index tensors; out = x with out[i0, ...] = values (or +=, args.i[0]) */
int nb__cuda_index_put(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    nb_tensor *x = in[0], *v = in[1];
    int n = nin - 2;
    nb_shape b;
    int64_t count;
    int64_t *offs = index_offsets("index_put", &x->shape, out->stride, in + 2, n, &b, &count);
    if (!offs) return -1;
    /* values read as broadcast to the index positions' shape, then x's trailing axes */
    nb_shape indexed = b;
    int64_t tailn = 1, rows = 1;
    for (int d = n; d < x->shape.ndim; d++) {
        indexed.dim[indexed.ndim++] = x->shape.dim[d];
        tailn *= x->shape.dim[d];
    }
    for (int d = 0; d < n; d++) rows *= x->shape.dim[d];
    if (out->numel == 0 || tailn == 0) {
        free(offs);
        return 0;
    }
    for (int64_t e = 0; e < count; e++) offs[e] /= tailn; /* out is dense: the offset's row */
    list_job j = { .out = nb__cu_view(out), .x = nb__cu_view(x), .src = nb__cu_view_as(v, &indexed), .tailn = tailn,
                   .accumulate = args->i[0] != 0 };
    return with_lists("index_put", offs, count, rows, launch_index_put, &j);
}
