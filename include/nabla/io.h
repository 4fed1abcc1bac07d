/* nabla io: NumPy arrays, safetensors files and state dicts, checkpoints, and atomic writes. */
#ifndef NABLA_IO_H
#define NABLA_IO_H

#include "core.h"
#include "nn.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every file this header's functions write is written atomically: into a temporary file in the
   same folder, flushed and fsync'ed, then renamed over the destination, so an error or a crash at
   any point leaves the earlier file whole. Failures return <0 with an error naming the path. */

/* ---- NumPy .npy ---- */
/* Reads a NumPy .npy file (v1-v3, little or big endian, C or Fortran order) as a new tensor.
   Dtypes: f4 f8 f2 i8 i4 u1 i1 b1 as themselves (i1 is nabla's i8); i2 u2 widen to i32, u4 to i64. */
NB_API nb_tensor *nb_load_npy(const char *path);
/* Parses .npy bytes held in memory (size bytes at data) as a new tensor; NULL on bad input. */
NB_API nb_tensor *nb_npy_parse(const void *data, size_t size);
/* Writes t as a NumPy .npy file (v1, little endian, C order), atomically; 0 or <0 (bf16,
   which NumPy lacks, is refused). */
NB_API int nb_save_npy(const nb_tensor *t, const char *path);

/* ---- string metadata (the safetensors "__metadata__" map; checkpoint fields) ---- */
/* An ordered map of string keys to string values; setting a key again replaces its value. */
typedef struct nb_metadata nb_metadata;
/* A new empty map (NULL on out of memory, with an error). */
NB_API nb_metadata *nb_metadata_new(void);
/* Frees the map; NULL is ignored. */
NB_API void nb_metadata_free(nb_metadata *md);
/* Sets key to a copy of value; 0 or <0. */
NB_API int nb_metadata_set(nb_metadata *md, const char *key, const char *value);
/* Sets key to the decimal text of value; 0 or <0. */
NB_API int nb_metadata_set_int(nb_metadata *md, const char *key, int64_t value);
/* The value of key (borrowed, valid until the key is set again or the map freed), or NULL. */
NB_API const char *nb_metadata_get(const nb_metadata *md, const char *key);
/* The value of key parsed as an integer into *value; 0, or <0 (with an error) when absent or not an integer. */
NB_API int nb_metadata_get_int(const nb_metadata *md, const char *key, int64_t *value);
/* Number of entries (0 for NULL). */
NB_API int nb_metadata_count(const nb_metadata *md);
/* The i-th key in insertion order (borrowed), or NULL when i is out of range. */
NB_API const char *nb_metadata_key(const nb_metadata *md, int i);
/* The i-th value in insertion order (borrowed), or NULL when i is out of range. */
NB_API const char *nb_metadata_value(const nb_metadata *md, int i);

/* ---- safetensors files: generic named tensors ---- */
/* An open safetensors file (memory-mapped and validated), read by name or index. */
typedef struct nb_safetensors nb_safetensors;
/* Opens and validates a safetensors file (header, dtypes, shapes, offsets); NULL on error. */
NB_API nb_safetensors *nb_safetensors_open(const char *path);
/* Validates safetensors bytes held in memory; they are borrowed and must outlive the handle. */
NB_API nb_safetensors *nb_safetensors_open_memory(const void *data, size_t size);
/* Unmaps and frees; NULL is ignored. */
NB_API void nb_safetensors_close(nb_safetensors *f);
/* Number of tensors in the file (0 for NULL). */
NB_API int nb_safetensors_count(const nb_safetensors *f);
/* Name of the i-th tensor (in data-offset order; borrowed until the handle is closed), or NULL. */
NB_API const char *nb_safetensors_name(const nb_safetensors *f, int i);
/* Index of the tensor called name, or -1 (no error recorded). */
NB_API int nb_safetensors_find(const nb_safetensors *f, const char *name);
/* The i-th tensor's safetensors dtype name ("F32", "BF16", "I8", ...), or NULL. */
NB_API const char *nb_safetensors_dtype_name(const nb_safetensors *f, int i);
/* The i-th tensor's nabla dtype and shape; <0 (with an error) when nabla has no such dtype. */
NB_API int nb_safetensors_info(const nb_safetensors *f, int i, nb_dtype *dtype, nb_shape *shape);
/* Size in bytes of the i-th tensor's data (0 when i is out of range). */
NB_API size_t nb_safetensors_nbytes(const nb_safetensors *f, int i);
/* A new CPU tensor holding a copy of the tensor called name, in its file dtype; NULL with an error
   if absent or of a dtype nabla lacks. */
NB_API nb_tensor *nb_safetensors_get(const nb_safetensors *f, const char *name);
/* The file's "__metadata__" (borrowed until the handle is closed; empty when the file has none). */
NB_API const nb_metadata *nb_safetensors_metadata(const nb_safetensors *f);
/* Writes n named tensors (and metadata, which may be NULL) as a safetensors file, atomically;
   0 or <0. Names must be unique; tensors are written in the order given. */
NB_API int nb_save_safetensors(const char *path, const nb_named_tensor *tensors, int n, const nb_metadata *md);
/* The safetensors dtype name of a nabla dtype ("F32", "BF16", "BOOL", ...); NULL for an invalid dtype. */
NB_API const char *nb_safetensors_dtype_str(nb_dtype dtype);

/* ---- state dicts ---- */
/* Options of nb_load_state_dict. Zero fields are the defaults: strict loading, as PyTorch's
   load_state_dict(strict=True). (The field is non_strict, not strict, so that a zero struct
   means strict and `.strict = false` cannot silently mean the opposite.) */
typedef struct nb_load_opts {
    bool non_strict;        /* load what matches and report the rest instead of failing */
    const char *prefix;     /* only file keys starting with it are considered, with it removed */
    struct nb_load_report *report; /* filled with what happened when not NULL (zeroed or filled
                                      before: its old text is freed) */
} nb_load_opts;
/* What a load did: counts, and the full text of every missing key, unexpected key and shape or
   dtype mismatch, one per line (malloc'ed; release with nb_load_report_free). */
typedef struct nb_load_report {
    int loaded, missing, unexpected, mismatched;
    char *text;
} nb_load_report;
/* Frees the report's text and zeroes it. */
NB_API void nb_load_report_free(nb_load_report *r);

/* Saves the module's parameters and buffers (PyTorch's state_dict names and order) as
   safetensors, atomically; 0 or <0. */
NB_API int nb_save_state_dict(nb_module *m, const char *path);
/* Saves the state dict with metadata (may be NULL) in "__metadata__"; 0 or <0. */
NB_API int nb_save_state_dict_meta(nb_module *m, const char *path, const nb_metadata *md);
/* Loads a safetensors state dict into m, converting f16/bf16/f64/f32 to each tensor's dtype.
   Strict (the default): any missing key, unexpected key, shape mismatch or non-float dtype mismatch
   fails with an error listing each of them and changes no tensor. Non-strict: loads what matches;
   returns 0 or <0. */
NB_API int nb_load_state_dict(nb_module *m, const char *path, nb_load_opts opts);
/* nb_load_state_dict from an already open file (borrowed). */
NB_API int nb_load_state_dict_from(nb_module *m, const nb_safetensors *f, nb_load_opts opts);

/* ---- checkpoints ---- */
/* Everything needed to resume training, in one safetensors file: the model's state dict under
   "model.", the optimizer's state under "optim." (moments, steps; every group's learning rate
   in the metadata), the schedule's step, epoch, global step, the RNG state, and the caller's
   own metadata (for example the data loader's position). On save, optimizer, scheduler and
   metadata may be NULL. On load, model (and optimizer, scheduler when given) must be built
   as they were; epoch and global_step are filled in, and metadata, when not NULL, receives
   every metadata entry of the file. The RNG state is always saved and restored. */
typedef struct nb_checkpoint {
    nb_module *model;
    nb_optimizer *optimizer;
    nb_scheduler *scheduler;
    int64_t epoch, global_step;
    nb_metadata *metadata;
} nb_checkpoint;
/* Writes a checkpoint atomically; 0 or <0. */
NB_API int nb_checkpoint_save(const nb_checkpoint *ck, const char *path);
/* Restores a checkpoint strictly (any mismatch fails and changes nothing); 0 or <0. */
NB_API int nb_checkpoint_load(nb_checkpoint *ck, const char *path);

/* ---- testing hook ---- */
/* Makes every atomic write fail as a full disk (ENOSPC) once `bytes` bytes of the file have been
   written (negative: no limit, the default). For tests of the failure paths. */
NB_API void nb_io_set_write_limit(int64_t bytes);

#ifdef __cplusplus
}
#endif
#endif
