/* Sharded checkpoints (nb_dist_save_sharded, nb_dist_load_sharded), as torch's distributed
   checkpoint: every rank writes the elements it holds of each parameter and of the optimizer's
   state, in pieces named "<parameter>@<first element>" and "<parameter>/<state>@<first>"
   ("<parameter>/step" for the step count and NAdam's "<parameter>/mu_product", one number per
   parameter, "buffer:<name>" for buffers), to its own file
   rank-R-of-W.safetensors, and rank 0 then writes index.json (the world size, the files, every
   parameter's name, dtype and shape), so a folder without an index is a save that did not end.
   What every rank holds alike (DDP's parameters and state) is written once, split evenly over
   the ranks. Pieces are addressed by parameter and element, not by rank, so a checkpoint loads
   into any world size and any sharding mode, or into one plain process: each rank reads the
   pieces that overlap what it holds now. */
#include "dist_impl.h"
#include "../io/io_impl.h"
#include "../optim/optim_impl.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_FORMAT "nabla.sharded_checkpoint/1"

/* The arguments every entry point takes: a module and a folder name of a sane length. */
static int check_args(const nb_module *m, const char *dir, const char *fn) {
    if (!m || !dir || !*dir) {
        nb__error("%s: %s", fn, m ? "the folder is NULL or empty" : "module is NULL");
        return -1;
    }
    if (strlen(dir) > 4000) {
        nb__error("%s: the folder name is too long", fn);
        return -1;
    }
    return 0;
}

static int barrier(void) { return nb_dist_is_initialized() && nb_dist_world_size() > 1 ? nb_dist_barrier() : 0; }

/* The optimizer state's slot and kind from its name "<slot>.<kind>"; false when it is not one. */
static bool state_name(const char *name, int *slot, const char **kind) {
    char *end = NULL;
    long v = strtol(name, &end, 10);
    if (end == name || *end != '.' || v < 0 || v > 1 << 30) return false;
    *slot = (int)v;
    *kind = end + 1;
    return true;
}

typedef struct {
    nb_named_tensor *items;
    char **names;
    int n, cap;
} piece_list;

/* Adds a piece: count elements of t (flattened) from element at, named name. */
static int add_piece(piece_list *l, const char *name, nb_tensor *t, int64_t at, int64_t count) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        nb_named_tensor *items = realloc(l->items, sizeof *items * (size_t)cap);
        if (items) l->items = items;
        char **names = realloc(l->names, sizeof *names * (size_t)cap);
        if (names) l->names = names;
        if (!items || !names) return -1;
        l->cap = cap;
    }
    nb_tensor *flat = nb_reshape(t, NB_SHAPE(nb_numel(t)));
    nb_tensor *v = flat ? nb_slice(flat, 0, at, at + count, 1) : NULL;
    char *copy = malloc(strlen(name) + 1);
    if (!v || !copy) { free(copy); return -1; }
    strcpy(copy, name);
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], copy)) { free(copy); return 0; } /* a step count already written */
    l->names[l->n] = copy;
    l->items[l->n++] = (nb_named_tensor){ copy, v };
    return 0;
}

static void piece_list_free(piece_list *l) {
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    free(l->items);
}

/* The part of [start, start + count) in this rank's even share of [0, n): false when empty. */
static bool my_share(int64_t n, int64_t *start, int64_t *count) {
    int world = nb_dist_world_size();
    int64_t per = (n + world - 1) / world, lo = per * nb_dist_rank(), hi = lo + per < n ? lo + per : n;
    int64_t a = *start > lo ? *start : lo, b = *start + *count < hi ? *start + *count : hi;
    if (a >= b) return false;
    *count = b - a;
    *start = a;
    return true;
}

/* The module's parameters and the optimizer's state, listed once (freed by list_free). */
typedef struct {
    nb_named_tensor *params, *state, *buffers;
    int np, nstate, nbuf;
} listing;

static void list_free(listing *l) {
    free(l->params);
    free(l->state);
    free(l->buffers);
}

/* The named parameters (params) or buffers of m, in a malloc'ed array of *n; NULL with an error. */
static nb_named_tensor *named(nb_module *m, bool params, int *n, const char *fn) {
    int k = params ? nb_module_named_parameters(m, NULL, 0) : nb_module_named_buffers(m, NULL, 0);
    nb_named_tensor *e = k >= 0 ? malloc(sizeof *e * (size_t)(k + 1)) : NULL;
    if (!e) {
        if (k >= 0) nb__error("%s: out of memory", fn);
        return NULL;
    }
    if (params) nb_module_named_parameters(m, e, k);
    else nb_module_named_buffers(m, e, k);
    *n = k;
    return e;
}

static int list_all(nb_module *m, nb_optimizer *opt, listing *l, const char *fn) {
    memset(l, 0, sizeof *l);
    l->params = named(m, true, &l->np, fn);
    l->buffers = named(nb__dist_wrapped(m), false, &l->nbuf, fn);
    l->nstate = opt ? nb_optim_named_state(opt, NULL, 0) : 0;
    if (!l->params || !l->buffers || l->nstate < 0) return -1;
    l->state = malloc(sizeof *l->state * (size_t)(l->nstate + 1));
    if (!l->state) {
        nb__error("%s: out of memory", fn);
        return -1;
    }
    if (opt) nb_optim_named_state(opt, l->state, l->nstate);
    return 0;
}

/* This rank's segments of slot i, in a malloc'ed array (*n of them). */
static nb__dist_segment *segments_of(nb_module *m, const listing *l, int i, int *n, nb__dist_layout *layout) {
    int k = nb__dist_segments(m, i, &l->params[i], NULL, 0, layout);
    if (k < 0) return NULL;
    nb__dist_segment *segs = malloc(sizeof *segs * (size_t)(k + 1));
    if (!segs) { nb__error("nb_dist: out of memory"); return NULL; }
    nb__dist_segments(m, i, &l->params[i], segs, k, layout);
    *n = k;
    return segs;
}

/* The pieces this rank writes of holder (slot i's parameter or one of its state tensors). */
static int add_segments(piece_list *pl, const nb__dist_segment *segs, int nseg, nb_tensor *holder, const char *kind,
                        bool replicated) {
    for (int s = 0; s < nseg; s++) {
        int64_t start = segs[s].start, count = segs[s].count;
        if (replicated && !my_share(nb_numel(segs[s].param), &start, &count)) continue;
        char name[600];
        snprintf(name, sizeof name, "%s%s%s@%lld", segs[s].name, kind ? "/" : "", kind ? kind : "", (long long)start);
        if (add_piece(pl, name, holder, segs[s].local + (start - segs[s].start), count) < 0) return -1;
    }
    return 0;
}

static int write_index(const char *dir, const listing *l, nb_module *m, int world, const char *fn) {
    int np = 0;
    nb_named_tensor *e = named(nb__dist_wrapped(m), true, &np, fn);
    if (!e) return -1;
    json_t *root = json_object(), *files = json_array(), *params = json_array(), *bufs = json_array();
    if (!root || !files || !params || !bufs) goto oom;
    json_object_set_new(root, "format", json_string(INDEX_FORMAT));
    json_object_set_new(root, "world_size", json_integer(world));
    for (int r = 0; r < world; r++) {
        char f[64];
        snprintf(f, sizeof f, "rank-%d-of-%d.safetensors", r, world);
        json_array_append_new(files, json_string(f));
    }
    for (int i = 0; i < np; i++) {
        json_t *p = json_object(), *shape = json_array();
        nb_shape s = nb_shape_of(e[i].tensor);
        for (int d = 0; d < s.ndim; d++) json_array_append_new(shape, json_integer(s.dim[d]));
        json_object_set_new(p, "name", json_string(e[i].name));
        json_object_set_new(p, "dtype", json_string(nb_safetensors_dtype_str(nb_dtype_of(e[i].tensor))));
        json_object_set_new(p, "shape", shape);
        json_array_append_new(params, p);
    }
    free(e);
    for (int i = 0; i < l->nbuf; i++) json_array_append_new(bufs, json_string(l->buffers[i].name));
    json_object_set_new(root, "files", files);
    json_object_set_new(root, "parameters", params);
    json_object_set_new(root, "buffers", bufs);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    if (!text) { nb__error("%s: out of memory", fn); return -1; }
    char path[4200];
    snprintf(path, sizeof path, "%s/index.json", dir);
    nb__afile af;
    int rc = nb__afile_open(&af, fn, path);
    if (rc == 0) rc = nb__afile_write(&af, text, strlen(text));
    if (rc == 0) rc = nb__afile_commit(&af);
    free(text);
    return rc;
oom:
    free(e);
    json_decref(root);
    json_decref(files);
    json_decref(params);
    json_decref(bufs);
    nb__error("%s: out of memory", fn);
    return -1;
}

int nb_dist_save_sharded(nb_module *m, nb_optimizer *opt, const char *dir, const nb_metadata *md) {
    const char *fn = "nb_dist_save_sharded";
    if (check_args(m, dir, fn) < 0) return -1;
    int rank = nb_dist_rank(), world = nb_dist_world_size();
    int rc = 0;
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
        nb__error("%s: cannot create the folder %s: %s", fn, dir, strerror(errno));
        rc = -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/index.json", dir);
    if (rc == 0 && rank == 0 && unlink(path) < 0 && errno != ENOENT) {
        nb__error("%s: cannot remove the old %s: %s", fn, path, strerror(errno));
        rc = -1;
    }
    /* the old index is gone on every rank's view before any shard is replaced */
    if (nb__dist_agree(rc, fn) < 0 || barrier() < 0) return -1;
    listing l;
    piece_list pl = { 0 };
    nb_scope *s = nb_scope_begin();
    rc = list_all(m, opt, &l, fn);
    for (int i = 0; rc == 0 && i < l.np; i++) {
        int nseg = 0;
        nb__dist_layout lay;
        nb__dist_segment *segs = segments_of(m, &l, i, &nseg, &lay);
        if (!segs) { rc = -1; break; }
        rc = add_segments(&pl, segs, nseg, l.params[i].tensor, NULL, lay.values_replicated);
        for (int k = 0; rc == 0 && k < l.nstate; k++) {
            int slot;
            const char *kind;
            if (!state_name(l.state[k].name, &slot, &kind) || slot != i) continue;
            if (nb__optim_scalar_state(kind)) {
                if (lay.state_replicated && rank != 0) continue;
                for (int q = 0; q < nseg && rc == 0; q++) {
                    char name[600];
                    snprintf(name, sizeof name, "%s/%s", segs[q].name, kind);
                    rc = add_piece(&pl, name, l.state[k].tensor, 0, 1);
                }
            } else rc = add_segments(&pl, segs, nseg, l.state[k].tensor, kind, lay.state_replicated);
        }
        free(segs);
    }
    for (int i = 0; rc == 0 && rank == 0 && i < l.nbuf; i++) {
        char name[600];
        snprintf(name, sizeof name, "buffer:%s", l.buffers[i].name);
        rc = add_piece(&pl, name, l.buffers[i].tensor, 0, nb_numel(l.buffers[i].tensor));
    }
    if (rc < 0 && !nb__has_error()) nb__error("%s: out of memory", fn);
    snprintf(path, sizeof path, "%s/rank-%d-of-%d.safetensors", dir, rank, world);
    if (rc == 0) rc = nb_save_safetensors(path, pl.items, pl.n, rank == 0 ? md : NULL);
    nb_scope_end(s);
    piece_list_free(&pl);
    rc = nb__dist_agree(rc, fn);
    /* every shard is written: the index makes the checkpoint whole */
    if (rc == 0 && rank == 0) rc = write_index(dir, &l, m, world, fn);
    list_free(&l);
    return nb__dist_agree(rc, fn);
}

/* ---- loading ---- */
typedef struct {
    const nb_safetensors *file;
    const char *tensor; /* its name in the file */
    size_t keylen;      /* the name up to '@' (the parameter, or parameter/state) */
    int64_t start, count;
} avail;

typedef struct {
    nb_safetensors **files;
    int nfiles;
    avail *a;
    int n;
} store;

static void store_close(store *st) {
    for (int i = 0; i < st->nfiles; i++) nb_safetensors_close(st->files[i]);
    free(st->files);
    free(st->a);
}

static int store_open(store *st, const char *dir, json_t *files, const char *fn) {
    memset(st, 0, sizeof *st);
    st->nfiles = (int)json_array_size(files);
    st->files = calloc((size_t)st->nfiles + 1, sizeof *st->files);
    if (!st->files) { nb__error("%s: out of memory", fn); return -1; }
    int total = 0;
    for (int i = 0; i < st->nfiles; i++) {
        const char *name = json_string_value(json_array_get(files, (size_t)i));
        if (!name || strchr(name, '/')) {
            nb__error("%s: %s/index.json: file %d is not a plain file name", fn, dir, i);
            return -1;
        }
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        st->files[i] = nb_safetensors_open(path);
        if (!st->files[i]) return -1;
        total += nb_safetensors_count(st->files[i]);
    }
    st->a = malloc(sizeof *st->a * (size_t)(total + 1));
    if (!st->a) { nb__error("%s: out of memory", fn); return -1; }
    for (int i = 0; i < st->nfiles; i++)
        for (int k = 0; k < nb_safetensors_count(st->files[i]); k++) {
            const char *t = nb_safetensors_name(st->files[i], k);
            const char *at = strrchr(t, '@');
            nb_dtype dt;
            nb_shape sh;
            if (nb_safetensors_info(st->files[i], k, &dt, &sh) < 0) return -1;
            int64_t n = 1;
            for (int d = 0; d < sh.ndim; d++) n *= sh.dim[d];
            st->a[st->n++] = (avail){ st->files[i], t, at ? (size_t)(at - t) : strlen(t), at ? strtoll(at + 1, NULL, 10) : 0, n };
        }
    return 0;
}

/* Fills count elements of dst (dtype dt) with elements [start, start + count) of key's pieces;
   -1 with an error naming what is missing. */
static int fill(const store *st, const char *key, nb_dtype dt, void *dst, int64_t start, int64_t count, const char *fn) {
    size_t keylen = strlen(key), es = nb_dtype_size(dt);
    int64_t covered = 0;
    for (int i = 0; i < st->n && covered < count; i++) {
        const avail *a = &st->a[i];
        if (a->keylen != keylen || strncmp(a->tensor, key, keylen)) continue;
        int64_t lo = a->start > start ? a->start : start, hi = a->start + a->count < start + count ? a->start + a->count : start + count;
        if (lo >= hi) continue;
        nb_scope *s = nb_scope_begin();
        nb_tensor *t = nb_safetensors_get(a->file, a->tensor);
        int rc = t ? 0 : -1;
        if (t && nb_dtype_of(t) != dt) {
            nb__error("%s: piece \"%s\" is %s; the model's is %s", fn, a->tensor, nb_dtype_name(nb_dtype_of(t)), nb_dtype_name(dt));
            rc = -1;
        }
        if (rc == 0) memcpy((char *)dst + (size_t)(lo - start) * es, (const char *)nb_data_ptr(t) + (size_t)(lo - a->start) * es, (size_t)(hi - lo) * es);
        nb_scope_end(s);
        if (rc < 0) return -1;
        covered += hi - lo;
    }
    if (covered < count) {
        nb__error("%s: the checkpoint holds %lld of the %lld elements of \"%s\" from element %lld", fn, (long long)covered,
                  (long long)count, key, (long long)start);
        return -1;
    }
    return 0;
}

/* The index's parameters against the wrapped module's: the same names, dtypes and shapes. */
static int check_params(json_t *list, nb_module *m, const char *dir, const char *fn) {
    int np = 0;
    nb_named_tensor *e = named(nb__dist_wrapped(m), true, &np, fn);
    if (!e) return -1;
    int rc = 0;
    if ((int)json_array_size(list) != np) {
        nb__error("%s: %s holds %zu parameters; the model has %d", fn, dir, json_array_size(list), np);
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < np; i++) {
        json_t *p = json_array_get(list, (size_t)i), *shape = json_object_get(p, "shape");
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *dtype = json_string_value(json_object_get(p, "dtype"));
        nb_shape s = nb_shape_of(e[i].tensor);
        bool same = name && !strcmp(name, e[i].name) && dtype && !strcmp(dtype, nb_safetensors_dtype_str(nb_dtype_of(e[i].tensor))) &&
                    json_is_array(shape) && (int)json_array_size(shape) == s.ndim;
        for (int d = 0; same && d < s.ndim; d++) same = json_integer_value(json_array_get(shape, (size_t)d)) == s.dim[d];
        if (!same) {
            char want[160];
            nb__error("%s: parameter %d of %s is \"%s\" (%s), where the model has \"%s\" %s %s", fn, i, dir, name ? name : "?",
                      dtype ? dtype : "?", e[i].name, nb_shape_str(s, want, sizeof want), nb_dtype_name(nb_dtype_of(e[i].tensor)));
            rc = -1;
        }
    }
    free(e);
    return rc;
}

static int load_here(nb_module *m, nb_optimizer *opt, const char *dir, nb_metadata *md, const char *fn) {
    char path[4200];
    snprintf(path, sizeof path, "%s/index.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (access(path, F_OK) < 0)
            nb__error("%s: %s has no index.json: not a sharded checkpoint, or its save did not finish", fn, dir);
        else nb__error("%s: %s: %s (line %d)", fn, path, jerr.text, jerr.line);
        return -1;
    }
    const char *format = json_string_value(json_object_get(root, "format"));
    json_t *files = json_object_get(root, "files"), *params = json_object_get(root, "parameters");
    int rc = 0;
    if (!format || strcmp(format, INDEX_FORMAT) || !json_is_array(files) || !json_is_array(params)) {
        nb__error("%s: %s is not a nabla sharded checkpoint index (format \"%s\")", fn, path, format ? format : "?");
        rc = -1;
    }
    if (rc == 0) rc = check_params(params, m, dir, fn);
    store st = { 0 };
    if (rc == 0) rc = store_open(&st, dir, files, fn);
    listing l = { 0 };
    if (rc == 0 && opt) rc = nb_optim_init_state(opt);
    if (rc == 0) rc = list_all(m, opt, &l, fn);
    bool prev = nb_set_grad_enabled(false);
    for (int i = 0; rc == 0 && i < l.np; i++) {
        int nseg = 0;
        nb__dist_layout lay;
        nb__dist_segment *segs = segments_of(m, &l, i, &nseg, &lay);
        if (!segs) { rc = -1; break; }
        nb_tensor *h = l.params[i].tensor;
        size_t es = nb_dtype_size(nb_dtype_of(h));
        if (!lay.values_replicated) memset(nb_data_ptr(h), 0, (size_t)nb_numel(h) * es); /* a shard's padding */
        for (int q = 0; rc == 0 && q < nseg; q++)
            rc = fill(&st, segs[q].name, nb_dtype_of(h), (char *)nb_data_ptr(h) + (size_t)segs[q].local * es, segs[q].start,
                      segs[q].count, fn);
        atomic_fetch_add(&h->storage->version, 1);
        for (int k = 0; rc == 0 && k < l.nstate; k++) {
            int slot;
            const char *kind;
            if (!state_name(l.state[k].name, &slot, &kind) || slot != i || nseg == 0) continue;
            nb_tensor *t = l.state[k].tensor;
            char key[600];
            if (nb__optim_scalar_state(kind)) {
                snprintf(key, sizeof key, "%s/%s", segs[0].name, kind);
                rc = fill(&st, key, nb_dtype_of(t), nb_data_ptr(t), 0, 1, fn);
            } else
                for (int q = 0; rc == 0 && q < nseg; q++) {
                    snprintf(key, sizeof key, "%s/%s", segs[q].name, kind);
                    rc = fill(&st, key, nb_dtype_of(t), (char *)nb_data_ptr(t) + (size_t)segs[q].local * es, segs[q].start,
                              segs[q].count, fn);
                }
            atomic_fetch_add(&t->storage->version, 1);
        }
        free(segs);
    }
    for (int i = 0; rc == 0 && i < l.nbuf; i++) {
        char key[600];
        snprintf(key, sizeof key, "buffer:%s", l.buffers[i].name);
        nb_tensor *t = l.buffers[i].tensor;
        rc = fill(&st, key, nb_dtype_of(t), nb_data_ptr(t), 0, nb_numel(t), fn);
        atomic_fetch_add(&t->storage->version, 1);
    }
    nb_set_grad_enabled(prev);
    if (rc == 0 && md && st.nfiles > 0) {
        const nb_metadata *src = nb_safetensors_metadata(st.files[0]);
        for (int i = 0; rc == 0 && i < nb_metadata_count(src); i++) rc = nb_metadata_set(md, nb_metadata_key(src, i), nb_metadata_value(src, i));
    }
    list_free(&l);
    store_close(&st);
    json_decref(root);
    return rc;
}

int nb_dist_load_sharded(nb_module *m, nb_optimizer *opt, const char *dir, nb_metadata *md) {
    const char *fn = "nb_dist_load_sharded";
    if (check_args(m, dir, fn) < 0) return -1;
    int rc = load_here(m, opt, dir, md, fn);
    /* a plain module loads on its own (one rank may read a checkpoint by itself); DDP and FSDP
       modules load together, so all ranks fail together */
    return m == nb__dist_wrapped(m) ? rc : nb__dist_agree(rc, fn);
}
