/* Internal io helpers shared by the NPY, safetensors and checkpoint code: atomic files,
   read-only mappings, dtype conversion. Not installed. */
#ifndef NB_IO_IMPL_H
#define NB_IO_IMPL_H

#include "../core/core_impl.h"
#include "nabla/autograd.h"
#include "nabla/io.h"
#include "nabla/ops.h"
#include <stdio.h>

/* A file being written atomically: an unnamed file (O_TMPFILE) in path's folder, linked in on
   commit, so a writer killed midway leaves nothing behind; where the file system has no
   O_TMPFILE, a named temporary beside path, renamed over it on commit. */
typedef struct nb__afile {
    int fd;
    const char *fn;   /* the public function, for messages */
    char *path;       /* destination */
    char *tmp;        /* the named temporary in the same folder (a name for the unnamed file at commit) */
    bool unnamed;     /* fd is an O_TMPFILE file: no name until commit */
    bool tmp_exists;  /* tmp names a file this writer made (removed on abort) */
    uint64_t written;
} nb__afile;

/* Creates the temporary file; 0 or <0 with an error naming path. */
int nb__afile_open(nb__afile *f, const char *fn, const char *path);
/* Writes n bytes (all of them, retrying short writes); 0 or <0 with an error (the file is aborted). */
int nb__afile_write(nb__afile *f, const void *p, size_t n);
/* Flushes, fsyncs, gives the file its name (linking the unnamed file in, or renaming the named
   temporary over the destination), closes, then fsyncs the folder; 0 or <0 (the temporary is
   removed and the destination left as it was). */
int nb__afile_commit(nb__afile *f);
/* Closes and removes the temporary file (after an error elsewhere). Safe to call twice. */
void nb__afile_abort(nb__afile *f);

/* A read-only whole-file mapping. */
typedef struct nb__map {
    const unsigned char *data;
    size_t size;
    bool mapped;      /* munmap on close (an empty file is not mapped) */
} nb__map;
/* Maps path read-only; 0 or <0 with an error naming fn and path. */
int nb__map_open(nb__map *m, const char *fn, const char *path);
/* Maps path copy-on-write: readable and writable, a write copying its page and never reaching
   the file (parameters viewed in a checkpoint that training may update). 0 or <0. */
int nb__map_open_cow(nb__map *m, const char *fn, const char *path);
void nb__map_close(nb__map *m);

/* Converts n elements from src (of dtype sd) into dst (of dtype dd), both dense. */
void nb__convert(void *dst, nb_dtype dd, const void *src, nb_dtype sd, int64_t n);

/* The ordered string map behind nb_metadata. */
struct nb_metadata {
    int n, cap;
    char **keys, **values;
};

/* Where tensor i's bytes are in the memory the file was opened from (nb_safetensors_nbytes of
   them), or NULL: for views over a mapping that outlives the reader (src/hf/). */
const void *nb__safetensors_data(const nb_safetensors *f, int i);

/* ---- shared by state dicts and checkpoints (src/io/safetensors.c) ---- */
/* Loads the file's tensors into targets named by full file keys; file keys outside prefixes
   (when np > 0) are ignored. Strict: any difference fails, listing all, before any write. */
int nb__load_named(const char *fn, const char *path, const nb_safetensors *f, const nb_named_tensor *targets, int n,
                   const char *const *prefixes, int np, bool strict, nb_load_report *report);
/* The module's state entries (malloc'ed), names prefixed (and malloc'ed) when prefix is set. */
nb_named_tensor *nb__module_entries(const char *fn, nb_module *m, const char *prefix, int *n);
/* Frees a list from nb__module_entries (names too when they were prefixed). */
void nb__free_entries(nb_named_tensor *es, int n, bool names);
/* nb_save_safetensors with fn named in messages. */
int nb__save_named(const char *fn, const char *path, const nb_named_tensor *ts, int n, const nb_metadata *md);

#endif
