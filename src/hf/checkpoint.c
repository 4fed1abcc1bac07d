/* A Hugging Face checkpoint's weights: model.safetensors, or the shards that
   model.safetensors.index.json names, each mapped copy-on-write so that a parameter whose dtype
   matches is a view of the file (no second copy; a training step's write copies its pages
   only), with each tensor taken once by name as the architecture is built. */
#include "hf_model.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One mapped file, alive while the reader or any view of it holds it. */
typedef struct hf_map {
    nb_storage_ops ops; /* first: a view's storage ops point here */
    atomic_int refs;
    nb__map map;
} hf_map;

typedef struct {
    char *path;
    hf_map *m;
    nb_safetensors *st;
    bool *taken;
} hf_shard;

struct hf_weights {
    const char *fn;
    hf_shard *s;
    int n;
};

static void map_unref(hf_map *m) {
    if (atomic_fetch_sub(&m->refs, 1) == 1) {
        nb__map_close(&m->map);
        free(m);
    }
}

static void view_release(nb_storage *st) { map_unref((hf_map *)(void *)st->ops); }

static int view_read(const nb_storage *st, size_t off, void *dst, size_t n) {
    memcpy(dst, (const char *)st->data + off, n);
    return 0;
}

static int open_shard(hf_weights *w, const char *path) {
    hf_shard *s = &w->s[w->n];
    memset(s, 0, sizeof *s);
    s->path = strdup(path);
    s->m = calloc(1, sizeof *s->m);
    if (!s->path || !s->m) {
        free(s->path);
        free(s->m);
        nb__error("%s: out of memory", w->fn);
        return -1;
    }
    s->m->ops = (nb_storage_ops){ .release = view_release, .read = view_read };
    atomic_init(&s->m->refs, 1);
    w->n++;
    if (nb__map_open_cow(&s->m->map, w->fn, path) < 0) return -1;
    nb__error_ctx ec; /* the reader's errors name the shard */
    nb__error_push(&ec, "nb_safetensors_open_memory", "%s: %s", w->fn, path);
    s->st = nb_safetensors_open_memory(s->m->map.data, s->m->map.size);
    nb__error_pop(&ec);
    if (!s->st) {
        if (!nb__has_error()) nb__error("%s: %s: unreadable", w->fn, path);
        return -1;
    }
    s->taken = calloc((size_t)nb_safetensors_count(s->st) + 1, 1);
    if (!s->taken) { nb__error("%s: out of memory", w->fn); return -1; }
    return 0;
}

/* The shard files an index names, each once, checked to stay in dir. */
static int open_index(hf_weights *w, const char *dir, const char *index) {
    json_error_t je;
    json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        nb__error("%s: %s: not valid JSON (line %d: %s)", w->fn, index, je.line, je.text);
        return -1;
    }
    json_t *map = json_object_get(root, "weight_map");
    int rc = 0;
    if (!json_is_object(map) || json_object_size(map) == 0) {
        nb__error("%s: %s: no \"weight_map\" object", w->fn, index);
        rc = -1;
    }
    size_t nfiles = 0, cap = json_is_object(map) ? json_object_size(map) : 0;
    const char **files = calloc(cap + 1, sizeof *files);
    if (!files && rc == 0) { nb__error("%s: out of memory", w->fn); rc = -1; }
    const char *key;
    json_t *val;
    json_object_foreach(map, key, val) {
        if (rc < 0) break;
        const char *f = json_string_value(val);
        if (!f || !*f || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..")) {
            nb__error("%s: %s: the shard of \"%s\" is not a file name in the checkpoint's folder", w->fn, index, key);
            rc = -1;
            break;
        }
        size_t k = 0;
        while (k < nfiles && strcmp(files[k], f)) k++;
        if (k == nfiles) files[nfiles++] = f;
    }
    if (rc == 0) {
        w->s = calloc(nfiles, sizeof *w->s);
        if (!w->s) { nb__error("%s: out of memory", w->fn); rc = -1; }
    }
    for (size_t k = 0; k < nfiles && rc == 0; k++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        struct stat sb;
        if (stat(path, &sb) != 0) {
            nb__error("%s: %s lists shard %s, which is not in %s", w->fn, index, files[k], dir);
            rc = -1;
            break;
        }
        rc = open_shard(w, path);
    }
    /* every key the index maps must be in the shard it names */
    json_object_foreach(map, key, val) {
        if (rc < 0) break;
        int s = 0;
        while (s < w->n && strcmp(strrchr(w->s[s].path, '/') + 1, json_string_value(val))) s++;
        if (s == w->n || nb_safetensors_find(w->s[s].st, key) < 0) {
            nb__error("%s: %s maps \"%s\" to %s, which does not hold it", w->fn, index, key, json_string_value(val));
            rc = -1;
        }
    }
    free(files);
    json_decref(root);
    return rc;
}

hf_weights *nb__hf_weights_open(const char *fn, const char *dir) {
    hf_weights *w = calloc(1, sizeof *w);
    if (!w) { nb__error("%s: out of memory", fn); return NULL; }
    w->fn = fn;
    char single[PATH_MAX], index[PATH_MAX];
    snprintf(single, sizeof single, "%s/model.safetensors", dir);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    struct stat sb;
    int rc;
    if (stat(single, &sb) == 0) {
        w->s = calloc(1, sizeof *w->s);
        rc = w->s ? open_shard(w, single) : -1;
        if (!w->s) nb__error("%s: out of memory", fn);
    } else if (stat(index, &sb) == 0) rc = open_index(w, dir, index);
    else {
        nb__error("%s: %s has neither model.safetensors nor model.safetensors.index.json (nabla reads safetensors "
                  "checkpoints, not pytorch_model.bin)", fn, dir);
        rc = -1;
    }
    if (rc < 0) {
        nb__hf_weights_close(w);
        return NULL;
    }
    return w;
}

static bool find(const hf_weights *w, const char *name, int *s, int *i) {
    for (int k = 0; k < w->n; k++) {
        int j = nb_safetensors_find(w->s[k].st, name);
        if (j >= 0) { *s = k; *i = j; return true; }
    }
    return false;
}

bool nb__hf_has(const hf_weights *w, const char *name) {
    int s, i;
    return find(w, name, &s, &i);
}

nb_tensor *nb__hf_take(hf_weights *w, const char *name, nb_shape shape, nb_dtype dtype) {
    int s, i;
    char want[160], got[160];
    nb_shape_str(shape, want, sizeof want);
    if (!find(w, name, &s, &i)) {
        nb__error("%s: the checkpoint has no \"%s\" (a %s tensor the config asks for)", w->fn, name, want);
        return NULL;
    }
    hf_shard *sh = &w->s[s];
    if (sh->taken[i]) {
        nb__error("%s: \"%s\" is used twice", w->fn, name);
        return NULL;
    }
    nb_dtype fd;
    nb_shape fs;
    nb__error_ctx ec;
    nb__error_push(&ec, NULL, "%s: %s", w->fn, sh->path);
    int info = nb_safetensors_info(sh->st, i, &fd, &fs);
    nb__error_pop(&ec);
    if (info < 0) return NULL;
    if (!nb__shape_eq(&fs, &shape)) {
        nb__error("%s: \"%s\" in %s is %s, but the config makes it %s", w->fn, name, sh->path,
                  nb_shape_str(fs, got, sizeof got), want);
        return NULL;
    }
    if (!nb__is_float(fd) && fd != NB_F16 && fd != NB_BF16) {
        nb__error("%s: \"%s\" in %s is %s, not a float tensor", w->fn, name, sh->path, nb_dtype_name(fd));
        return NULL;
    }
    int64_t numel;
    size_t nbytes;
    if (!nb__tensor_size(shape, fd, &numel, &nbytes)) return NULL;
    void *data = (void *)nb__safetensors_data(sh->st, i);
    nb_storage *st = nb__storage_header((nb_device){ NB_CPU, 0 }, data, nbytes, &sh->m->ops);
    nb_tensor *t = st ? nb__tensor_on(st, shape, fd, numel) : NULL;
    if (!t) {
        if (st) nb__free(st, sizeof *st);
        nb__error("%s: out of memory", w->fn);
        return NULL;
    }
    atomic_fetch_add(&sh->m->refs, 1); /* the view's: its storage's release lets it go */
    sh->taken[i] = true;
    if (fd == dtype) return t;
    /* another dtype (bf16 or f16 weights, f32 compute): a converted copy */
    nb_tensor *c = nb__dispatch(NB_OP_CAST, &t, 1, &(nb_op_args){ .dtype = dtype });
    nb_release(t);
    return c;
}

int nb__hf_check_all_taken(hf_weights *w, bool (*ignorable)(const char *name)) {
    char list[512] = "";
    int extra = 0;
    size_t len = 0;
    for (int k = 0; k < w->n; k++)
        for (int i = 0; i < nb_safetensors_count(w->s[k].st); i++) {
            const char *name = nb_safetensors_name(w->s[k].st, i);
            if (w->s[k].taken[i] || (ignorable && ignorable(name))) continue;
            if (extra++ < 4 && len < sizeof list - 1)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s\"%s\"", len ? ", " : "", name);
            if (len >= sizeof list) len = sizeof list - 1;
        }
    if (!extra) return 0;
    nb__error("%s: the checkpoint has %d key%s the architecture does not use: %s%s", w->fn, extra,
              extra == 1 ? "" : "s", list, extra > 4 ? ", ..." : "");
    return -1;
}

void nb__hf_weights_close(hf_weights *w) {
    if (!w) return;
    for (int k = 0; k < w->n; k++) {
        nb_safetensors_close(w->s[k].st);
        if (w->s[k].m) map_unref(w->s[k].m);
        free(w->s[k].taken);
        free(w->s[k].path);
    }
    free(w->s);
    free(w);
}
