/* nabla data: datasets, the data loader with worker threads, readers and transforms. */
#ifndef NABLA_DATA_H
#define NABLA_DATA_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A sample (x [...], y 0-d) or a batch (x [n, ...], y [n]); y is NULL for unlabelled data. */
typedef struct nb_batch { nb_tensor *x, *y; } nb_batch;

/* Opaque, reference-counted dataset handle. */
typedef struct nb_dataset nb_dataset;
/* Opaque chain of per-sample transforms. */
typedef struct nb_transform nb_transform;
/* Opaque data loader. */
typedef struct nb_data_loader nb_data_loader;

/* What a user's dataset implements. Every function may be called from several loader threads at
   once, so get/get_batch must only read shared state. key carries the epoch's randomness: draw a
   sample's random numbers from nb_data_key(key, index), never from a shared generator.
   get/get_batch fill out and return 0, or record an error (nb_error) and return <0. They run
   inside a scope the caller opens: tensors made there belong to it (return them as made), and
   tensors the dataset holds may be returned borrowed; the caller retains what it keeps. */
typedef struct nb_dataset_class {
    const char *name;                                                  /* for error messages */
    int64_t (*len)(void *self);                                        /* number of samples */
    int (*get)(void *self, int64_t index, uint64_t key, nb_batch *out); /* one sample */
    /* optional fast path: the n samples at indices stacked along a new axis 0, exactly as
       stacking get's results would give them */
    int (*get_batch)(void *self, const int64_t *indices, int64_t n, uint64_t key, nb_batch *out);
    void (*free)(void *self);                                          /* optional: frees self */
} nb_dataset_class;

/* ---- datasets (each constructor returns a handle the caller frees with nb_dataset_free;
   datasets built on others hold their own reference to them) ---- */
/* Wraps a user's dataset: cls's functions receive self, and cls->free(self) runs when the last
   reference goes. NULL with an error when cls lacks len/get (self stays the caller's then). */
NB_API nb_dataset *nb_dataset_new(const nb_dataset_class *cls, void *self);
/* Drops the caller's reference to the dataset; NULL is ignored. */
NB_API void nb_dataset_free(nb_dataset *ds);
/* Number of samples (-1 for NULL). */
NB_API int64_t nb_dataset_len(nb_dataset *ds);
/* Sample index (negative counts from the end): new references as any tensor function returns; 0 or <0. */
NB_API int nb_dataset_get(nb_dataset *ds, int64_t index, nb_batch *out);
/* The n samples at indices stacked (x [n, ...], y [n]), as the loader builds a batch; 0 or <0. */
NB_API int nb_dataset_get_batch(nb_dataset *ds, const int64_t *indices, int64_t n, nb_batch *out);
/* Samples x[i], y[i] of in-memory tensors sharing axis 0 (y may be NULL); retains both (a
   contiguous copy of one that is not contiguous). */
NB_API nb_dataset *nb_data_tensors(nb_tensor *x, nb_tensor *y);
/* The samples of ds at indices[0..n) (copied), in that order; an index outside ds is an error (NULL). */
NB_API nb_dataset *nb_data_subset(nb_dataset *ds, const int64_t *indices, int64_t n);
/* Splits ds into n disjoint subsets of the given lengths (summing to its length), shuffled by seed;
   fills out[0..n) with new handles the caller frees; 0, or <0 with out[] all NULL. */
NB_API int nb_data_random_split(nb_dataset *ds, const int64_t *lengths, int n, uint64_t seed, nb_dataset **out);
/* The samples of ds[0], then ds[1], ... (n datasets). */
NB_API nb_dataset *nb_data_concat(nb_dataset *const *ds, int n);
/* ds with x_transform applied to each sample's x (NULL: none); takes ownership of the transform
   (freed on failure too). */
NB_API nb_dataset *nb_data_map(nb_dataset *ds, nb_transform *x_transform);

/* ---- readers ---- */
/* Reads an IDX file (MNIST format), plain or gzip, as a tensor of its own dtype (u8, i32, f32, f64). */
NB_API nb_tensor *nb_read_idx(const char *path);
/* Parses IDX bytes (plain or gzip) held in memory; name is used in error messages. */
NB_API nb_tensor *nb_parse_idx(const void *data, size_t size, const char *name);
/* Images and labels from two IDX files: x f32 [1, rows, cols] (or [features] from a 2-D file), u8
   pixels scaled to [0, 1] (other dtypes unscaled), y i64 0-d. */
NB_API nb_dataset *nb_data_idx(const char *images_path, const char *labels_path);
/* Fashion-MNIST (train or test split) from root (only there, when root is not NULL), else $NABLA_DATA
   or $NABLA_DATA/fashion-mnist, else
   /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist): samples x f32 [1, 28, 28] in [0, 1] and
   y i64 0-d, as torchvision. */
NB_API nb_dataset *nb_data_fashion_mnist(const char *root, bool train);

/* CSV options; zero fields are the defaults. */
typedef struct nb_csv_opts {
    char delimiter;        /* field separator (default ',') */
    bool no_header;        /* the first row is data, not column names (default: it is a header) */
    const char *label;     /* name of the label column (needs a header); NULL: use label_index */
    int label_index;       /* index of the label column (negative counts from the end; default 0) */
    bool no_label;         /* every column is a feature and samples have no y */
} nb_csv_opts;
/* A numeric CSV file: x f32 [columns - 1] ([columns] with no_label), y i64 0-d (f32 for every
   sample when any label is not an integer).
   Quoted fields are read as RFC 4180 says; a missing, ragged or non-numeric value is an error naming the line. */
NB_API nb_dataset *nb_data_csv(const char *path, nb_csv_opts opts);
/* As nb_data_csv, from CSV text held in memory; name is used in error messages. */
NB_API nb_dataset *nb_data_csv_parse(const char *text, size_t size, const char *name, nb_csv_opts opts);
/* Two NPY files read by nb_load_npy: x and labels y (NULL for none; integer labels become i64). */
NB_API nb_dataset *nb_data_npy(const char *x_path, const char *y_path);
/* Decodes a PNG file as u8 [channels, height, width] (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA). */
NB_API nb_tensor *nb_read_png(const char *path);
/* Decodes PNG bytes held in memory; name is used in error messages. */
NB_API nb_tensor *nb_decode_png(const void *data, size_t size, const char *name);
/* Decodes a PNG or a JPEG file (told by its first bytes) as u8 [channels, height, width]; JPEG
   needs libjpeg (NABLA_WITH_JPEG). */
NB_API nb_tensor *nb_read_image(const char *path);
/* As nb_read_image, from bytes held in memory; name is used in error messages. */
NB_API nb_tensor *nb_decode_image(const void *data, size_t size, const char *name);
/* A folder with one sub-folder of PNG and JPEG images per class (classes numbered in sorted name
   order): x f32 [channels, height, width] in [0, 1], decoded when a sample is read; y i64 0-d.
   Every file of a class folder must be an image (hidden ones aside): another is an error naming it. */
NB_API nb_dataset *nb_data_image_folder(const char *root);
/* The number of images of class i of an image folder dataset; -1 with an error when ds is not
   one or i is out of range. */
NB_API int64_t nb_data_image_folder_count(nb_dataset *ds, int64_t i);
/* The name of class i of an image folder dataset (NULL when out of range; NULL with an error when ds
   is not nb_data_image_folder's own handle, e.g. one wrapped by nb_data_map). Borrowed from ds. */
NB_API const char *nb_data_image_folder_class(nb_dataset *ds, int64_t i);

/* ---- transforms (per sample; random ones draw from the sample's key, so results depend only
   on the loader's seed, the epoch and the sample index) ---- */
/* x converted to f32 and multiplied by scale (0 means 1; 1/255 scales u8 images to [0, 1]). */
NB_API nb_transform *nb_transform_to_float(double scale);
/* (x - mean[c]) / std[c] per channel c of a [C, ...] f32 sample (n == C, or n == 1 for all). */
NB_API nb_transform *nb_transform_normalize(const float *mean, const float *std, int n);
/* Pads [C, H, W] (or [H, W]) by padding zeros on each side, then crops a random height x width window. */
NB_API nb_transform *nb_transform_random_crop(int64_t height, int64_t width, int64_t padding);
/* Mirrors the last axis with probability p (in [0, 1]; 0 means 0.5). */
NB_API nb_transform *nb_transform_random_hflip(double p);
/* Bilinear resize of an f32 [C, H, W] or [H, W] sample to height x width, as torch's
   interpolate(mode="bilinear", align_corners=False) without antialiasing. */
NB_API nb_transform *nb_transform_resize(int64_t height, int64_t width);
/* An f32 [C, H, W] image (C 1 to 4) to 1 channel (gray, torchvision's luma weights) or 3 (RGB); alpha is dropped. */
NB_API nb_transform *nb_transform_channels(int channels);
/* A user's transform: fn returns the new x (as a tensor function would); key seeds its randomness. */
NB_API nb_transform *nb_transform_fn(nb_tensor *(*fn)(nb_tensor *x, uint64_t key, void *ctx), void *ctx);
/* Applies first, then each next transform, up to a NULL; takes ownership of them (all freed on failure). */
NB_API nb_transform *nb_transform_compose(nb_transform *first, ...);
/* Applies t to one sample x with randomness key (as the loader derives it); a new reference (to x
   itself when nothing changes, e.g. a flip not drawn), or NULL. */
NB_API nb_tensor *nb_transform_apply(nb_transform *t, nb_tensor *x, uint64_t key);
/* Frees a transform not handed to nb_data_map or nb_transform_compose; NULL is ignored. */
NB_API void nb_transform_free(nb_transform *t);

/* ---- randomness for datasets and transforms (counter-based: no shared state) ---- */
/* A new 64-bit key mixing key and a (e.g. a sample index or a transform's position). */
NB_API uint64_t nb_data_key(uint64_t key, uint64_t a);
/* The i-th uniform number in [0, 1) of the stream key (53 random bits). */
NB_API double nb_data_uniform(uint64_t key, uint64_t i);

/* ---- data loader ---- */
/* Loader options; zero fields are the defaults. */
typedef struct nb_loader_opts {
    int64_t batch_size; /* samples per batch (default 1) */
    bool shuffle;       /* a new order each epoch, drawn from seed */
    bool drop_last;     /* drop a last batch smaller than batch_size */
    int num_workers;    /* worker threads (0: batches are made in the calling thread) */
    int prefetch;       /* batches each worker prepares ahead (default 2) */
    uint64_t seed;      /* order and augmentation seed (0: drawn from nb_manual_seed's generator,
                           advancing it) */
    nb_device device;   /* where batches are delivered (zero: the cpu); the copy is made by the
                           worker that makes the batch, so it overlaps the training step */
    /* Distributed sampling, as torch's DistributedSampler (drop_last false): each epoch every rank
       draws the same order (so the seed must agree across ranks: set it, or call nb_manual_seed
       with one value everywhere), pads it to a multiple of world_size by repeating its start,
       and serves the samples at rank, rank + world_size, ...; so every rank has
       ceil(len / world_size) samples and the same number of batches. world_size 0 takes both
       from nb_dist (nb_dist_init; a single process before it), and rank must then be 0. */
    int rank;
    int world_size;
} nb_loader_opts;

/* Counters of a loader since it was made. */
typedef struct nb_loader_stats {
    double wait_seconds; /* time nb_data_loader_next spent waiting for (or making) batches */
    int64_t batches;     /* batches returned */
    int64_t epochs;      /* epochs completed */
} nb_loader_stats;

/* A loader over ds (retained); its worker threads start on the first epoch at once. */
NB_API nb_data_loader *nb_data_loader_new(nb_dataset *ds, nb_loader_opts opts);
/* The next batch, in order, into *out (borrowed: valid until the next call or free). false once at
   each epoch end (the next call starts the next epoch) and on error (see nb_data_loader_failed),
   which also ends the epoch: the rest of its batches are skipped. */
NB_API bool nb_data_loader_next(nb_data_loader *loader, nb_batch *out);
/* Whether the last nb_data_loader_next returned false for an error (its message is in nb_error()). */
NB_API bool nb_data_loader_failed(const nb_data_loader *loader);
/* Batches per epoch (0 for NULL). */
NB_API int64_t nb_data_loader_len(const nb_data_loader *loader);
/* Time waited for data, batches and epochs so far. */
NB_API nb_loader_stats nb_data_loader_stats(const nb_data_loader *loader);
/* Seconds nb_data_loader_next has waited for data so far. */
NB_API double nb_data_loader_wait_seconds(const nb_data_loader *loader);
/* Where the loader stands: the epoch being served and the next batch it returns (to checkpoint). */
NB_API void nb_data_loader_position(const nb_data_loader *loader, int64_t *epoch, int64_t *batch);
/* Moves to batch of epoch (to resume): the same order and augmentation as a run that got there;
   0 or <0. The batch last returned is released. */
NB_API int nb_data_loader_set_position(nb_data_loader *loader, int64_t epoch, int64_t batch);
/* Stops the workers (mid-epoch too), frees the loader and drops its dataset reference; NULL is ignored. */
NB_API void nb_data_loader_free(nb_data_loader *loader);

#ifdef __cplusplus
}
#endif
#endif
