/* The model server's registry: each model is a base folder of numbered version folders, each
   holding model.onnx (nabla's ONNX importer) or a nabla model.safetensors whose metadata carries
   its config ("nabla.config", "nabla.classes", as nabla train saves it). Every version the
   policy keeps is loaded once, at start; a request without a version goes to the newest.

   Runs of one version are serialised by a mutex. Evidence says an eager nb_onnx_run could run
   from several threads at once (its value table is per call; scopes, the error, grad mode and
   the allocator's caches are thread-local; reference counts are atomic; oneDNN's primitive
   caches are per thread), but that has not been checked under ThreadSanitizer across every
   kernel, and a nabla module's forward is not promised to be reentrant. Versions and models run
   in parallel with each other; one run already uses the thread pool for its kernels. */
#include "serve_impl.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

const double nb__sv_bucket_bounds[SV_BUCKETS] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,   0.25,   0.5,   1.0,  5.0 };

/* The version policy: the newest n (latest), every one (all), or a list (specific). */
typedef struct policy {
    int latest;             /* > 0: the newest this many */
    bool all;
    const int64_t *specific;
    int nspecific;
} policy;

static char *dup_str(const char *s) {
    char *p = strdup(s);
    if (!p) nb__error("nb_serve_start: out of memory");
    return p;
}

static void free_io(sv_io *io, int n) {
    for (int i = 0; io && i < n; i++) free(io[i].name);
    free(io);
}

static void free_version(sv_version *v) {
    nb_onnx_free(v->onnx);
    nb_module_free(v->module);
    free_io(v->in, v->nin);
    free_io(v->out, v->nout);
    free(v->path);
    pthread_mutex_destroy(&v->mu);
}

static int load_onnx(sv_version *v) {
    if (!(v->onnx = nb_onnx_load(v->path, (nb_onnx_load_opts){ 0 }))) return -1;
    v->kind = "onnx";
    v->nin = nb_onnx_num_inputs(v->onnx);
    v->nout = nb_onnx_num_outputs(v->onnx);
    v->in = calloc((size_t)v->nin + 1, sizeof *v->in);
    v->out = calloc((size_t)v->nout + 1, sizeof *v->out);
    if (!v->in || !v->out) { nb__error("nb_serve_start: out of memory"); return -1; }
    for (int i = 0; i < v->nin; i++) {
        if (!(v->in[i].name = dup_str(nb_onnx_input_name(v->onnx, i)))) return -1;
        nb_onnx_input_info(v->onnx, i, &v->in[i].dtype, &v->in[i].ndim, v->in[i].dim);
    }
    for (int i = 0; i < v->nout; i++) {
        if (!(v->out[i].name = dup_str(nb_onnx_output_name(v->onnx, i)))) return -1;
        if (nb_onnx_output_info(v->onnx, i, &v->out[i].dtype, &v->out[i].ndim, v->out[i].dim) < 0) {
            v->out[i].dtype = NB_F32; /* undeclared: metadata says f32 of any shape */
            v->out[i].ndim = -1;
        }
    }
    return 0;
}

/* A nabla model.safetensors: its stored config builds the module, whose input is "input" (f32,
   [-1, the config's input shape]) and output "output" (f32, [-1, classes]), the names
   nabla export gives the same model in ONNX. */
static int load_nabla(sv_version *v) {
    nb_safetensors *f = nb_safetensors_open(v->path);
    if (!f) return -1;
    const nb_metadata *md = nb_safetensors_metadata(f);
    const char *config = md ? nb_metadata_get(md, "nabla.config") : NULL;
    const char *names = md ? nb_metadata_get(md, "nabla.classes") : NULL;
    json_t *root = config ? json_loads(config, 0, NULL) : NULL, *input = json_object_get(root, "input");
    json_t *classes = names ? json_loads(names, 0, NULL) : NULL;
    int rc = -1;
    nb_shape sample = { 0 };
    if (!config) {
        nb__error("nb_serve_start: %s carries no nabla.config metadata (save it with nabla train, or export it to "
                  "ONNX with nabla export --model SPEC)", v->path);
        goto done;
    }
    if (!json_is_array(input) || json_array_size(input) + 1 > NB_MAX_DIMS || !json_is_array(classes) ||
        !json_array_size(classes)) {
        nb__error("nb_serve_start: %s: its nabla.config or nabla.classes metadata is damaged", v->path);
        goto done;
    }
    sample.ndim = (int)json_array_size(input);
    for (int i = 0; i < sample.ndim; i++) {
        json_int_t d = json_integer_value(json_array_get(input, (size_t)i));
        if (d <= 0) {
            nb__error("nb_serve_start: %s: dimension %d of the config's input shape is not positive", v->path, i);
            goto done;
        }
        sample.dim[i] = d;
    }
    if (!(v->module = nb_nn_from_config(config, sample)) || nb_load_state_dict_from(v->module, f, (nb_load_opts){ 0 }) < 0)
        goto done;
    nb_module_train(v->module, false);
    v->kind = "nabla";
    v->nin = v->nout = 1;
    v->in = calloc(1, sizeof *v->in);
    v->out = calloc(1, sizeof *v->out);
    if (!v->in || !v->out || !(v->in->name = dup_str("input")) || !(v->out->name = dup_str("output"))) {
        nb__error("nb_serve_start: out of memory");
        goto done;
    }
    v->in->dtype = v->out->dtype = NB_F32;
    v->in->ndim = sample.ndim + 1;
    v->in->dim[0] = v->out->dim[0] = -1;
    for (int i = 0; i < sample.ndim; i++) v->in->dim[i + 1] = sample.dim[i];
    v->out->ndim = 2;
    v->out->dim[1] = (int64_t)json_array_size(classes);
    rc = 0;
done:
    json_decref(root);
    json_decref(classes);
    nb_safetensors_close(f);
    return rc;
}

/* Whether name is a version folder's: digits only, a number that fits. */
static bool version_number(const char *name, int64_t *v) {
    if (!*name || strlen(name) > 18) return false;
    for (const char *p = name; *p; p++)
        if (!isdigit((unsigned char)*p)) return false;
    *v = strtoll(name, NULL, 10);
    return true;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int load_model(sv_model *m, const char *name, const char *base, const policy *pol) {
    if (!*name || strpbrk(name, "/:") || strlen(name) > 100) {
        nb__error("nb_serve_start: model name '%s' is empty, too long or holds '/' or ':'", name);
        return -1;
    }
    if (!(m->name = dup_str(name)) || !(m->base = dup_str(base))) return -1;
    DIR *d = opendir(base);
    if (!d) {
        nb__error("nb_serve_start: model '%s': cannot open its base path %s: %s", name, base, strerror(errno));
        return -1;
    }
    int64_t *found = NULL;
    int nfound = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int64_t v;
        if (!version_number(e->d_name, &v)) continue;
        if (nfound == cap) {
            cap = cap ? cap * 2 : 8;
            int64_t *q = realloc(found, sizeof *q * (size_t)cap);
            if (!q) { free(found); closedir(d); nb__error("nb_serve_start: out of memory"); return -1; }
            found = q;
        }
        found[nfound++] = v;
    }
    closedir(d);
    if (!nfound) {
        free(found);
        nb__error("nb_serve_start: model '%s': %s holds no version folder (1/, 2/, ... with model.onnx or "
                  "model.safetensors)", name, base);
        return -1;
    }
    qsort(found, (size_t)nfound, sizeof *found, cmp_i64);
    /* which of them the policy keeps, oldest first */
    int first = 0, rc = 0;
    if (pol->latest > 0 && nfound > pol->latest) first = nfound - pol->latest;
    m->v = calloc((size_t)nfound, sizeof *m->v);
    if (!m->v) { free(found); nb__error("nb_serve_start: out of memory"); return -1; }
    for (int k = pol->specific ? 0 : first; k < nfound && rc == 0; k++) {
        bool keep = !pol->specific;
        for (int j = 0; pol->specific && j < pol->nspecific; j++) keep = keep || pol->specific[j] == found[k];
        if (!keep) continue;
        sv_version *v = &m->v[m->nv];
        v->version = found[k];
        char dir[4096], path[4200];
        snprintf(dir, sizeof dir, "%s/%lld", base, (long long)found[k]);
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        bool onnx = file_exists(path);
        if (!onnx) snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (!onnx && !file_exists(path)) {
            nb__error("nb_serve_start: model '%s' version %lld: %s holds neither model.onnx nor model.safetensors", name,
                      (long long)found[k], dir);
            rc = -1;
            break;
        }
        pthread_mutex_init(&v->mu, NULL);
        m->nv++;
        if (!(v->path = dup_str(path))) rc = -1;
        else rc = onnx ? load_onnx(v) : load_nabla(v);
        if (rc < 0 && nb_error() && !strstr(nb_error(), "nb_serve_start")) {
            char msg[900];
            snprintf(msg, sizeof msg, "%s", nb_error());
            nb_error_clear();
            nb__error("nb_serve_start: model '%s' version %lld: %s", name, (long long)found[k], msg);
        }
    }
    for (int j = 0; pol->specific && rc == 0 && j < pol->nspecific; j++) {
        bool there = false;
        for (int k = 0; k < m->nv && !there; k++) there = m->v[k].version == pol->specific[j];
        if (!there) {
            nb__error("nb_serve_start: model '%s': version %lld of its policy has no folder in %s", name,
                      (long long)pol->specific[j], base);
            rc = -1;
        }
    }
    free(found);
    return rc;
}

/* Reads one entry of model_config_list.config. */
static int load_config_entry(sv_registry *r, const json_t *c, const char *file, size_t idx) {
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *base = json_string_value(json_object_get(c, "base_path"));
    if (!json_is_object(c) || !name || !base) {
        nb__error("nb_serve_start: %s: model_config_list.config[%zu] needs \"name\" and \"base_path\" strings", file, idx);
        return -1;
    }
    const char *platform = json_string_value(json_object_get(c, "model_platform"));
    if (platform && strcmp(platform, "onnx") && strcmp(platform, "nabla")) {
        nb__error("nb_serve_start: %s: model '%s' has model_platform '%s'; nabla serves \"onnx\" and \"nabla\"", file, name,
                  platform);
        return -1;
    }
    policy pol = { .latest = 1 };
    int64_t versions[64];
    json_t *vp = json_object_get(c, "model_version_policy");
    if (vp) {
        json_t *latest = json_object_get(vp, "latest"), *all = json_object_get(vp, "all"),
               *specific = json_object_get(vp, "specific");
        if (!json_is_object(vp) || (latest != NULL) + (all != NULL) + (specific != NULL) != 1) {
            nb__error("nb_serve_start: %s: model '%s': model_version_policy holds one of \"latest\", \"all\", \"specific\"",
                      file, name);
            return -1;
        }
        if (latest) {
            json_t *n = json_object_get(latest, "num_versions");
            pol.latest = n ? (int)json_integer_value(n) : 1;
            if (n && (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > 1000)) {
                nb__error("nb_serve_start: %s: model '%s': latest.num_versions is a whole number from 1 to 1000", file, name);
                return -1;
            }
        } else if (all) {
            pol.latest = 0;
            pol.all = true;
        } else {
            json_t *list = json_object_get(specific, "versions");
            size_t k;
            json_t *x;
            if (!json_is_array(list) || !json_array_size(list) || json_array_size(list) > 64) {
                nb__error("nb_serve_start: %s: model '%s': specific.versions is a list of 1 to 64 versions", file, name);
                return -1;
            }
            json_array_foreach(list, k, x) {
                /* proto3's JSON writes int64 as strings; both forms are taken */
                const char *s = json_string_value(x);
                if (s ? !version_number(s, &versions[k]) : !json_is_integer(x) || json_integer_value(x) < 0) {
                    nb__error("nb_serve_start: %s: model '%s': specific.versions[%zu] is not a version number", file, name, k);
                    return -1;
                }
                if (!s) versions[k] = json_integer_value(x);
            }
            pol.latest = 0;
            pol.specific = versions;
            pol.nspecific = (int)json_array_size(list);
        }
    }
    if (nb__sv_find_model(r, name)) {
        nb__error("nb_serve_start: %s: model '%s' is named twice", file, name);
        return -1;
    }
    return load_model(&r->m[r->n++], name, base, &pol);
}

int nb__sv_registry_load(sv_registry *r, const nb_serve_opts *o) {
    memset(r, 0, sizeof *r);
    if (o->config_path && (o->model_name || o->model_base_path)) {
        nb__error("nb_serve_start: give config_path or model_name and model_base_path, not both");
        return -1;
    }
    if (!o->config_path) {
        if (!o->model_name || !o->model_base_path) {
            nb__error("nb_serve_start: no model: give model_name and model_base_path, or config_path");
            return -1;
        }
        if (!(r->m = calloc(1, sizeof *r->m))) { nb__error("nb_serve_start: out of memory"); return -1; }
        policy pol = { .latest = 1 };
        return load_model(&r->m[r->n++], o->model_name, o->model_base_path, &pol);
    }
    json_error_t je;
    json_t *root = json_load_file(o->config_path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        nb__error("nb_serve_start: model config %s: %s (line %d, column %d)", o->config_path, je.text, je.line, je.column);
        return -1;
    }
    json_t *list = json_object_get(json_object_get(root, "model_config_list"), "config");
    int rc = 0;
    if (!json_is_array(list) || !json_array_size(list) || json_array_size(list) > 1000) {
        nb__error("nb_serve_start: model config %s: expected {\"model_config_list\": {\"config\": [{\"name\": ..., "
                  "\"base_path\": ...}, ...]}} with 1 to 1000 models", o->config_path);
        rc = -1;
    } else if (!(r->m = calloc(json_array_size(list), sizeof *r->m))) {
        nb__error("nb_serve_start: out of memory");
        rc = -1;
    }
    for (size_t k = 0; rc == 0 && k < json_array_size(list); k++)
        rc = load_config_entry(r, json_array_get(list, k), o->config_path, k);
    json_decref(root);
    return rc;
}

void nb__sv_registry_free(sv_registry *r) {
    for (int i = 0; i < r->n; i++) {
        for (int k = 0; k < r->m[i].nv; k++) free_version(&r->m[i].v[k]);
        free(r->m[i].v);
        free(r->m[i].name);
        free(r->m[i].base);
    }
    free(r->m);
    memset(r, 0, sizeof *r);
}

sv_model *nb__sv_find_model(sv_registry *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (r->m[i].name && !strcmp(r->m[i].name, name)) return &r->m[i];
    return NULL;
}

sv_version *nb__sv_find_version(sv_model *m, int64_t v) {
    if (!m || !m->nv) return NULL;
    if (v < 0) return &m->v[m->nv - 1];
    for (int k = 0; k < m->nv; k++)
        if (m->v[k].version == v) return &m->v[k];
    return NULL;
}

int nb__sv_run(sv_version *v, nb_tensor *const *in, nb_tensor **out) {
    pthread_mutex_lock(&v->mu);
    int rc;
    if (v->onnx) rc = nb_onnx_run(v->onnx, in, v->nin, out, v->nout);
    else {
        bool grad = nb_set_grad_enabled(false);
        nb_scope *sc = nb_scope_begin();
        nb_tensor *y = nb_forward(v->module, in[0]);
        out[0] = y ? nb_keep(nb_contiguous(y)) : NULL;
        nb_scope_end(sc);
        nb_set_grad_enabled(grad);
        rc = out[0] ? 0 : -1;
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

void nb__sv_record(sv_model *m, double seconds, bool failed) {
    atomic_fetch_add(&m->requests, 1);
    if (failed) atomic_fetch_add(&m->errors, 1);
    int b = 0;
    while (b < SV_BUCKETS && seconds > nb__sv_bucket_bounds[b]) b++;
    atomic_fetch_add(&m->bucket[b], 1);
    atomic_fetch_add(&m->micros, (uint_least64_t)(seconds * 1e6 + 0.5));
}

double nb__sv_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

bool nb__sv_parse_version(const char **p, int64_t *v) {
    *v = -1;
    if (strncmp(*p, "/versions/", 10)) return true;
    const char *q = *p + 10;
    size_t n = strspn(q, "0123456789");
    char num[24];
    if (!n || n > 18) return false;
    memcpy(num, q, n);
    num[n] = 0;
    *v = strtoll(num, NULL, 10);
    *p = q + n;
    return true;
}

bool nb__sv_check_input(const sv_io *io, const nb_tensor *t, char *err, size_t es) {
    nb_shape s = nb_shape_of(t);
    if (nb_dtype_of(t) != io->dtype) {
        snprintf(err, es, "input '%s' is %s; the model takes %s", io->name, nb__sv_v2_dtype(nb_dtype_of(t)),
                 nb__sv_v2_dtype(io->dtype));
        return false;
    }
    bool ok = io->ndim < 0 || io->ndim == s.ndim;
    for (int d = 0; ok && io->ndim >= 0 && d < s.ndim; d++) ok = io->dim[d] < 0 || io->dim[d] == s.dim[d];
    if (ok) return true;
    char got[160], want[160];
    nb_shape_str(s, got, sizeof got);
    size_t l = (size_t)snprintf(want, sizeof want, "[");
    for (int d = 0; d < io->ndim && l < sizeof want - 24; d++)
        l += (size_t)snprintf(want + l, sizeof want - l, "%s%lld", d ? ", " : "", (long long)io->dim[d]);
    snprintf(want + l, sizeof want - l, "]");
    snprintf(err, es, "input '%s' has shape %s; the model takes %s (-1 is any size)", io->name, got, want);
    return false;
}
