/* Fine-tuning a Hugging Face causal LM: the causal LM loss (each position predicts the next
   token), a text cut into blocks of tokens as run_clm.py's group_texts cuts it, and nb_hf_save,
   which writes a trained model back as a checkpoint folder with the keys, order, dtypes and
   shards of the folder it was loaded from, so transformers' from_pretrained reads it. */
#include "hf_model.h"
#include "hub.h"
#include "nabla/hf.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

nb_tensor *nb_hf_causal_lm_loss(nb_tensor *logits, nb_tensor *ids) {
    const char *fn = "nb_hf_causal_lm_loss";
    if (!logits || !ids) {
        if (!nb__has_error()) nb__error("%s: %s is NULL", fn, logits ? "ids" : "logits");
        return NULL;
    }
    if (nb_ndim(logits) != 3 || nb_ndim(ids) != 2 || nb_dim(logits, 0) != nb_dim(ids, 0) ||
        nb_dim(logits, 1) != nb_dim(ids, 1) || nb_dim(ids, 1) < 2) {
        char dl[200], di[200];
        nb__error("%s: needs logits [B, T, vocab] and the ids [B, T] they were computed from, T >= 2: got logits %s and "
                  "ids %s", fn, nb__describe(logits, dl, sizeof dl), nb__describe(ids, di, sizeof di));
        return NULL;
    }
    int64_t B = nb_dim(ids, 0), T = nb_dim(ids, 1), V = nb_dim(logits, 2);
    nb_scope *s = nb_scope_begin();
    /* transformers: logits[..., :-1, :].contiguous().view(-1, V) against labels[..., 1:].view(-1) */
    nb_tensor *pred = nb_reshape(nb_contiguous(nb_slice(logits, 1, 0, T - 1, 1)), NB_SHAPE(B * (T - 1), V));
    nb_tensor *next = nb_reshape(nb_contiguous(nb_slice(ids, 1, 1, T, 1)), NB_SHAPE(B * (T - 1)));
    return nb__hf_scope_return(s, nb_cross_entropy(pred, next, (nb_ce_opts){ 0 }));
}

nb_tensor *nb_hf_text_blocks(nb_tokenizer *tok, const char *text, size_t len, int64_t block) {
    const char *fn = "nb_hf_text_blocks";
    if (!tok || !text || block < 1) {
        nb__error("%s: needs a tokenizer, a text and a block of at least 1 token (got block %lld)", fn, (long long)block);
        return NULL;
    }
    nb_tokenize_opts o = { .no_special_tokens = true, .no_truncation = true, .no_padding = true };
    /* a token covers at least one byte in the tokenizers nabla reads (bar a prefix or an unknown
       token), so one pass nearly always fits; a second one with the exact count otherwise */
    int64_t cap = (int64_t)len + 16;
    int64_t *ids = malloc(sizeof *ids * (size_t)cap);
    int64_t n = ids ? nb_tokenize_ex(tok, text, len, ids, cap, o) : -1;
    if (n > cap) {
        int64_t *big = realloc(ids, sizeof *ids * (size_t)n);
        if (!big) {
            free(ids);
            ids = NULL;
        } else {
            ids = big;
            int64_t again = nb_tokenize_ex(tok, text, len, ids, n, o);
            if (again != n && again >= 0)
                nb__error("%s: the text gave %lld tokens, then %lld", fn, (long long)n, (long long)again);
            n = again == n ? n : -1;
        }
    }
    if (!ids) {
        nb__error("%s: out of memory for the ids of %zu bytes of text", fn, len);
        return NULL;
    }
    nb_tensor *out = NULL;
    if (n >= 0 && n < block)
        nb__error("%s: the text has %lld tokens, fewer than one block of %lld (give more text or a smaller block)", fn,
                  (long long)n, (long long)block);
    else if (n >= 0) /* group_texts: consecutive blocks, the remainder dropped */
        out = nb_from_data(ids, NB_SHAPE(n / block, block), NB_I64);
    free(ids);
    return out;
}

/* ---------------------------------------------------------------- nb_hf_save */

/* Files of a checkpoint folder copied as they are beside the weights: the config, the
   generation defaults and every tokenizer file transformers and nabla read. */
static const char *const COPIED[] = { "config.json", "generation_config.json", "model.safetensors.index.json",
                                      "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                      "added_tokens.json", "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model" };

/* Copies src to dst (atomically) when src exists; 0, or -1 with an error. */
static int copy_file(const char *fn, const char *src, const char *dst) {
    struct stat st;
    if (stat(src, &st) < 0) {
        if (errno == ENOENT) return 0; /* a file this checkpoint does not have */
        nb__error("%s: cannot stat %s: %s", fn, src, strerror(errno));
        return -1;
    }
    nb__map m;
    if (nb__map_open(&m, fn, src) < 0) return -1;
    nb__afile f;
    int rc = nb__afile_open(&f, fn, dst);
    if (rc == 0 && (rc = nb__afile_write(&f, m.data, m.size)) == 0) rc = nb__afile_commit(&f);
    nb__map_close(&m);
    return rc;
}

/* One weights file of the source folder, open (read-only: the bytes as on disk, whatever
   training wrote into the copy-on-write views of the module). */
typedef struct {
    char name[256];
    nb_safetensors *st;
} src_file;

/* The weights files of dir: model.safetensors, else the shards its index names (each once, a
   plain name in dir). *n of them, malloc'ed; NULL with an error. */
static src_file *open_sources(const char *fn, const char *dir, int *n) {
    char path[PATH_MAX];
    struct stat sb;
    *n = 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    json_t *root = NULL, *map = NULL;
    size_t cap = 1;
    if (stat(path, &sb) != 0) {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        json_error_t je;
        root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        map = json_object_get(root, "weight_map");
        if (!json_is_object(map)) {
            nb__error("%s: %s has neither model.safetensors nor a model.safetensors.index.json with a weight_map", fn, dir);
            json_decref(root);
            return NULL;
        }
        cap = json_object_size(map) + 1;
    }
    src_file *s = calloc(cap, sizeof *s);
    bool ok = s != NULL;
    if (!s) nb__error("%s: out of memory", fn);
    if (ok && !map) snprintf(s[(*n)++].name, sizeof s->name, "model.safetensors");
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        const char *file = json_string_value(v);
        if (!ok) break;
        if (!file || strchr(file, '/') || strlen(file) >= sizeof s->name || !strcmp(file, "..")) {
            nb__error("%s: %s: \"%s\" names no file of the folder", fn, path, key);
            ok = false;
            break;
        }
        bool seen = false;
        for (int i = 0; i < *n && !seen; i++) seen = !strcmp(s[i].name, file);
        if (!seen) snprintf(s[(*n)++].name, sizeof s->name, "%s", file);
    }
    json_decref(root);
    for (int i = 0; ok && i < *n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, s[i].name);
        ok = (s[i].st = nb_safetensors_open(path)) != NULL;
    }
    if (!ok && s) {
        for (int i = 0; i < *n; i++) nb_safetensors_close(s[i].st);
        free(s);
        s = NULL;
    }
    return s;
}

/* The module's entry called name, or NULL. */
static nb_tensor *entry(const nb_named_tensor *e, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].name, name)) return e[i].tensor;
    return NULL;
}

/* For a key the module does not hold: the module's tensor the file stores it as a copy of (a
   tied lm_head.weight holds the token embedding's bytes), or NULL. */
static nb_tensor *tied_to(const src_file *s, int ns, int file, int i, const nb_named_tensor *e, int n) {
    size_t nb = nb_safetensors_nbytes(s[file].st, i);
    const void *p = nb__safetensors_data(s[file].st, i);
    for (int f = 0; p && f < ns; f++)
        for (int j = 0; j < nb_safetensors_count(s[f].st); j++) {
            nb_tensor *t = entry(e, n, nb_safetensors_name(s[f].st, j));
            const void *q = nb__safetensors_data(s[f].st, j);
            if (t && q && (f != file || j != i) && nb_safetensors_nbytes(s[f].st, j) == nb &&
                !strcmp(nb_safetensors_dtype_name(s[f].st, j), nb_safetensors_dtype_name(s[file].st, i)) && !memcmp(p, q, nb))
                return t;
        }
    return NULL;
}

/* Writes src file `file` again into out with the module's values; 0 or -1. */
static int save_file(const char *fn, const src_file *s, int ns, int file, const nb_named_tensor *e, int n, const char *out) {
    nb_safetensors *st = s[file].st;
    int count = nb_safetensors_count(st);
    nb_named_tensor *w = calloc((size_t)count + 1, sizeof *w);
    if (!w) {
        nb__error("%s: out of memory", fn);
        return -1;
    }
    int rc = 0;
    nb_scope *sc = nb_scope_begin();
    for (int i = 0; i < count && rc == 0; i++) {
        const char *name = nb_safetensors_name(st, i);
        nb_dtype dt;
        nb_shape shape;
        if (nb_safetensors_info(st, i, &dt, &shape) < 0) {
            rc = -1;
            break;
        }
        nb_tensor *t = entry(e, n, name);
        if (!t) t = tied_to(s, ns, file, i, e, n);
        nb_shape ts = t ? nb_shape_of(t) : shape;
        if (!t) /* a buffer no architecture reads (attn.bias): as it was */
            t = nb_safetensors_get(st, name);
        else if (!nb__shape_eq(&ts, &shape)) {
            char a[160], b[160];
            nb__error("%s: \"%s\" is %s in the module but %s in %s", fn, name, nb_shape_str(ts, a, sizeof a),
                      nb_shape_str(shape, b, sizeof b), s[file].name);
            rc = -1;
            break;
        }
        if (t && nb_dtype_of(t) != dt) t = nb_cast(t, dt); /* bf16 or f16 weights trained in f32 go back as they came */
        if (!t) rc = -1;
        w[i] = (nb_named_tensor){ name, t };
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", out, s[file].name);
    if (rc == 0) rc = nb__save_named(fn, path, w, count, nb_safetensors_metadata(st));
    nb_scope_end(sc);
    free(w);
    return rc;
}

/* Whether a and b name one folder (b may not exist yet: then they differ). */
static bool same_folder(const char *a, const char *b) {
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

int nb_hf_save(nb_module *m, const char *src_dir, const char *out_dir) {
    const char *fn = "nb_hf_save";
    if (!m || !src_dir || !out_dir) {
        nb__error("%s: %s is NULL", fn, !m ? "the module" : !src_dir ? "src_dir" : "out_dir");
        return -1;
    }
    char resolved[NB__HF_DIR_MAX];
    if (nb__hf_resolve(fn, src_dir, resolved, sizeof resolved) < 0) return -1;
    src_dir = resolved;
    if (same_folder(src_dir, out_dir)) {
        nb__error("%s: out_dir %s is the folder the model was loaded from; a fine-tuned model goes to a folder of its own",
                  fn, out_dir);
        return -1;
    }
    if (mkdir(out_dir, 0777) < 0 && errno != EEXIST) {
        nb__error("%s: cannot create %s: %s", fn, out_dir, strerror(errno));
        return -1;
    }
    int n = nb_module_state_entries(m, NULL, 0), ns = 0;
    nb_named_tensor *e = n >= 0 ? calloc((size_t)n + 1, sizeof *e) : NULL;
    if (!e || nb_module_state_entries(m, e, n) != n) {
        if (!nb__has_error()) nb__error("%s: cannot list the module's parameters", fn);
        free(e);
        return -1;
    }
    src_file *s = open_sources(fn, src_dir, &ns);
    int rc = s ? 0 : -1;
    /* every module tensor must land in some file, or the folder would load as another model */
    for (int i = 0; rc == 0 && i < n; i++) {
        bool found = false;
        for (int f = 0; f < ns && !found; f++) found = nb_safetensors_find(s[f].st, e[i].name) >= 0;
        if (!found) {
            nb__error("%s: the module's \"%s\" is in none of %s's weights files (was the model loaded from it?)", fn,
                      e[i].name, src_dir);
            rc = -1;
        }
    }
    bool prev = nb_set_grad_enabled(false);
    for (int f = 0; rc == 0 && f < ns; f++) rc = save_file(fn, s, ns, f, e, n, out_dir);
    nb_set_grad_enabled(prev);
    for (size_t k = 0; rc == 0 && k < sizeof COPIED / sizeof *COPIED; k++) {
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof from, "%s/%s", src_dir, COPIED[k]);
        snprintf(to, sizeof to, "%s/%s", out_dir, COPIED[k]);
        rc = copy_file(fn, from, to);
    }
    for (int f = 0; f < ns; f++) nb_safetensors_close(s[f].st);
    free(s);
    free(e);
    return rc;
}
