/* Helpers of the CUDA backend's C entry points (ops_*.c): nabla's tensors as the nb__k_views the
   device code reads, the one error path, and the trips to the host some ops make (reading and
   checking indices and lengths, sorting the writes that meet). */
#ifndef NB_CUDA_OPS_UTIL_H
#define NB_CUDA_OPS_UTIL_H

#include "../kernel.h"
#include "cuda_kernels.h"

/* t as device code sees it: its first element, dtype, shape and strides. */
nb__k_view nb__cu_view(const nb_tensor *t);
/* v read as broadcast to shape (which its shape broadcasts to): stride 0 on the axes it lacks or
   has of size 1. */
nb__k_view nb__cu_broadcast(nb__k_view v, const nb_shape *shape);
/* t read as broadcast to shape: nb__cu_broadcast of t's view. */
nb__k_view nb__cu_view_as(const nb_tensor *t, const nb_shape *shape);
/* t without axis (its lanes' or rows' first elements, one per position of the other axes). */
nb__k_view nb__cu_view_without(const nb_tensor *t, int axis);
/* A dense view of shape over the device memory at data (the strides of a contiguous tensor). */
nb__k_view nb__cu_view_dense(void *data, nb_dtype dtype, const nb_shape *shape);
/* 0 when the launcher returned 0; otherwise records "nb_<fn>: cuda: <the error>" and returns -1. */
int nb__cu_check(const char *fn, int rc);
/* A dense host copy of t (on the device, or the host), owned by the caller; NULL with the error recorded. */
nb_tensor *nb__cu_to_host(const char *fn, const nb_tensor *t);
/* idx's values (i64 or i32, any strides, on the device) as a malloc'ed int64_t array on the host,
   row-major; NULL with the error recorded. */
int64_t *nb__cu_index_values(const char *fn, const nb_tensor *idx);
/* Device scratch memory (nb__k_scratch_alloc, bytes rounded up to 8, at least 8) holding a copy of
   the host memory src; NULL with the error recorded. Give it back with nb__cu_scratch_free. */
void *nb__cu_upload(const char *fn, const void *src, size_t bytes);
/* Gives back scratch memory from nb__cu_upload (bytes as asked there). */
void nb__cu_scratch_free(void *p, size_t bytes);
/* The lists of a stable counting sort: for n keys in [0, buckets), start[b] .. start[b + 1]
   index the positions list[] (ascending) whose key is b; one malloc'ed block of buckets + 1 + n
   int64s, start first; NULL with the error recorded. */
int64_t *nb__cu_bucket_lists(const char *fn, const int64_t *keys, int64_t n, int64_t buckets);
/* Uploads bucket lists from nb__cu_bucket_lists (and frees them): *start and *list point into
   the returned scratch block (free it with nb__cu_scratch_free and *bytes); NULL with the error
   recorded. */
void *nb__cu_upload_lists(const char *fn, int64_t *lists, int64_t n, int64_t buckets, const int64_t **start,
                          const int64_t **list, size_t *bytes);

#endif
