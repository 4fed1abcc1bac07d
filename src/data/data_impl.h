/* Internal definitions of the data area: the dataset handle and the helpers its readers,
   datasets and loader share. Not installed. */
#ifndef NB_DATA_IMPL_H
#define NB_DATA_IMPL_H

#include "../core/core_impl.h"
#include "nabla/data.h"
#include "nabla/io.h"
#include "nabla/ops.h"
#include <stdlib.h>

struct nb_dataset {
    atomic_int refcount;
    const nb_dataset_class *cls;
    void *self;
};

/* Calls ds's get for index (range-checked) inside the caller's scope. */
int nb__ds_get(nb_dataset *ds, int64_t index, uint64_t key, nb_batch *out);
/* The samples at indices stacked: ds's get_batch when it has one, else get per sample and
   nb__collate. Runs inside the caller's scope. */
int nb__ds_get_batch(nb_dataset *ds, const int64_t *indices, int64_t n, uint64_t key, nb_batch *out);
/* Stacks n samples along a new axis 0 with plain copies (no kernel threads); the results
   belong to the current scope. */
int nb__collate(const nb_batch *samples, int64_t n, nb_batch *out, const char *who);
/* A dataset over in-memory x (and y); when x_scale > 0, u8 x is given as f32 times x_scale. */
nb_dataset *nb__data_tensors_scaled(nb_tensor *x, nb_tensor *y, double x_scale);
/* malloc of n (>= 0; 0 counts as 1) int64_t values; NULL, recording nothing, when the byte count
   overflows or memory runs out. */
static inline int64_t *nb__alloc_i64(int64_t n) {
    int64_t bytes;
    if (n < 0 || nb__mul_overflows(n > 0 ? n : 1, (int64_t)sizeof(int64_t), &bytes) || (uint64_t)bytes > SIZE_MAX)
        return NULL;
    return malloc((size_t)bytes);
}
/* The rank and world size a loader takes when its opts leave world_size zero: set by
   nb_dist_init and nb_dist_finalize (src/dist, the layer above); (0, 1) until then. */
void nb__data_set_dist_default(int rank, int world_size);
/* Fills order[0..n) with a permutation drawn from key (Fisher-Yates; draw.c). */
void nb__data_permutation(int64_t *order, int64_t n, uint64_t key);
/* Runs transform t on sample x with the sample's key (transform.c); an owned tensor or NULL. */
nb_tensor *nb__transform_run(nb_transform *t, nb_tensor *x, uint64_t key);
/* Reads a whole file into a malloc'd buffer; NULL with an error naming the function and path. */
void *nb__read_file(const char *who, const char *path, size_t *size);
/* Whether bytes start as a JPEG file does (ff d8 ff). */
bool nb__is_jpeg(const void *data, size_t size);
/* Decodes JPEG bytes as u8 [channels, height, width] (1 gray or 3 RGB); NULL with an error naming
   who and name (also when nabla was built without libjpeg). The caller owns the tensor. */
nb_tensor *nb__decode_jpeg(const char *who, const void *data, size_t size, const char *name);

#endif
