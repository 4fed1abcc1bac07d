/* Helpers of the CUDA backend's C entry points: views, errors, host copies and bucket lists. */
#include "ops_util.h"
#include <cuda_runtime_api.h>
#include <stdlib.h>

nb__k_view nb__cu_view(const nb_tensor *t) {
    nb__k_view v;
    memset(&v, 0, sizeof v);
    v.data = nb__data(t);
    v.dtype = (int)t->dtype;
    v.ndim = t->shape.ndim;
    v.numel = t->numel;
    for (int d = 0; d < t->shape.ndim; d++) {
        v.shape[d] = t->shape.dim[d];
        v.stride[d] = t->stride[d];
    }
    return v;
}

nb__k_view nb__cu_broadcast(nb__k_view v, const nb_shape *shape) {
    nb__k_view b = v;
    int lead = shape->ndim - v.ndim;
    b.ndim = shape->ndim;
    b.numel = nb__shape_numel(shape);
    for (int d = 0; d < shape->ndim; d++) {
        int vd = d - lead;
        b.shape[d] = shape->dim[d];
        b.stride[d] = vd < 0 || v.shape[vd] == 1 ? 0 : v.stride[vd];
    }
    return b;
}

nb__k_view nb__cu_view_as(const nb_tensor *t, const nb_shape *shape) { return nb__cu_broadcast(nb__cu_view(t), shape); }

nb__k_view nb__cu_view_without(const nb_tensor *t, int axis) {
    nb__k_view v = nb__cu_view(t);
    if (t->shape.ndim == 0) return v;
    v.ndim = 0;
    v.numel = 1;
    for (int d = 0; d < t->shape.ndim; d++) {
        if (d == axis) continue;
        v.shape[v.ndim] = t->shape.dim[d];
        v.stride[v.ndim++] = t->stride[d];
        v.numel *= t->shape.dim[d];
    }
    return v;
}

nb__k_view nb__cu_view_dense(void *data, nb_dtype dtype, const nb_shape *shape) {
    nb__k_view v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.dtype = (int)dtype;
    v.ndim = shape->ndim;
    v.numel = nb__shape_numel(shape);
    nb__contiguous_strides(shape, v.stride);
    for (int d = 0; d < shape->ndim; d++) v.shape[d] = shape->dim[d];
    return v;
}

int nb__cu_check(const char *fn, int rc) {
    if (rc == 0) return 0;
    nb__error("nb_%s: cuda: %s", fn, cudaGetErrorString((cudaError_t)rc));
    return -1;
}

nb_tensor *nb__cu_to_host(const char *fn, const nb_tensor *t) {
    nb_tensor *h = nb__tensor_new(t->shape, t->dtype);
    if (!h) return NULL;
    if (t->storage->device.type == NB_CPU) { /* a host tensor among a device op's inputs */
        if (nb__read_to_host(t, nb__data(h)) == 0) return h;
        nb_release(h);
        return NULL;
    }
    nb__k_view v = nb__cu_view(t);
    if (nb__cu_check(fn, nb__k_download(nb__data(h), &v)) < 0) {
        nb_release(h);
        return NULL;
    }
    return h;
}

int64_t *nb__cu_index_values(const char *fn, const nb_tensor *idx) {
    nb_tensor *h = nb__cu_to_host(fn, idx);
    if (!h) return NULL;
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(idx->numel ? idx->numel : 1));
    if (!v) nb__error("nb_%s: out of memory for %lld indices", fn, (long long)idx->numel);
    else
        for (int64_t i = 0; i < idx->numel; i++)
            v[i] = idx->dtype == NB_I64 ? ((const int64_t *)nb__data(h))[i] : ((const int32_t *)nb__data(h))[i];
    nb_release(h);
    return v;
}

/* Scratch sizes: whole int64s, never 0 (an empty list still has a pointer to hand over). */
static size_t scratch_bytes(size_t bytes) { return bytes < 8 ? 8 : (bytes + 7) & ~(size_t)7; }

void *nb__cu_upload(const char *fn, const void *src, size_t bytes) {
    void *p = nb__k_scratch_alloc(scratch_bytes(bytes));
    if (!p) {
        nb__error("nb_%s: cuda: out of device memory for %zu bytes of scratch", fn, bytes);
        return NULL;
    }
    if (nb__cu_check(fn, nb__k_upload(p, src, bytes)) < 0) {
        nb__k_scratch_free(p, scratch_bytes(bytes));
        return NULL;
    }
    return p;
}

void nb__cu_scratch_free(void *p, size_t bytes) {
    if (p) nb__k_scratch_free(p, scratch_bytes(bytes));
}

int64_t *nb__cu_bucket_lists(const char *fn, const int64_t *keys, int64_t n, int64_t buckets) {
    int64_t *s = calloc((size_t)(buckets + 1 + n), sizeof(int64_t));
    if (!s) {
        nb__error("nb_%s: out of memory for the lists of %lld indices", fn, (long long)n);
        return NULL;
    }
    int64_t *list = s + buckets + 1;
    for (int64_t e = 0; e < n; e++) s[keys[e] + 1]++;
    for (int64_t b = 0; b < buckets; b++) s[b + 1] += s[b];
    /* fill in ascending e, each bucket from its start: the lists keep the cpu's order */
    int64_t *next = malloc(sizeof(int64_t) * (size_t)(buckets ? buckets : 1));
    if (!next) {
        free(s);
        nb__error("nb_%s: out of memory for the lists of %lld indices", fn, (long long)n);
        return NULL;
    }
    memcpy(next, s, sizeof(int64_t) * (size_t)buckets);
    for (int64_t e = 0; e < n; e++) list[next[keys[e]]++] = e;
    free(next);
    return s;
}

void *nb__cu_upload_lists(const char *fn, int64_t *lists, int64_t n, int64_t buckets, const int64_t **start,
                          const int64_t **list, size_t *bytes) {
    *bytes = sizeof(int64_t) * (size_t)(buckets + 1 + n);
    int64_t *d = nb__cu_upload(fn, lists, *bytes);
    free(lists);
    if (!d) return NULL;
    *start = d;
    *list = d + buckets + 1;
    return d;
}
