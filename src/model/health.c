/* Run-health helpers: gradient norms before and after clipping, the learning rate, per-parameter
   weight and gradient histograms, the NaN/Inf and exploding-gradient check, and the per-step
   logger (nb_health) whose signals nabla doctor reads. */
#include "../core/core_impl.h"
#include "nabla.h"
#include "../summary/summary_impl.h"
#include "../nn/nn_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char check_message[1024];

const char *nb_check_grads_message(void) { return check_message; }

/* The module's named parameters in a malloc'd array; NULL with an error (or when there are none,
   with *n 0). */
static nb_named_tensor *params_of(nb_module *m, int *n, const char *fn) {
    *n = 0;
    if (!m) {
        if (!nb__has_error()) nb__error("%s: module is NULL", fn);
        return NULL;
    }
    int cnt = nb_module_named_parameters(m, NULL, 0);
    if (cnt <= 0) return NULL;
    nb_named_tensor *p = malloc(sizeof *p * (size_t)cnt);
    if (!p) {
        nb__error("%s: out of memory", fn);
        return NULL;
    }
    *n = nb_module_named_parameters(m, p, cnt);
    return p;
}

double nb_summary_grad_norm(nb_summary_writer *w, nb_module *m, int64_t step) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_summary_grad_norm: module is NULL");
        return -1;
    }
    double norm = nb_grad_norm(m);
    if (norm < 0) {
        if (!nb__has_error()) nb__error("nb_summary_grad_norm: cannot compute the gradient norm");
        return -1;
    }
    return nb_summary_scalar(w, "grad_norm/global", norm, step) == 0 ? norm : -1;
}

double nb_summary_clip_grad_norm(nb_summary_writer *w, nb_module *m, double max_norm, int64_t step) {
    double before = nb_clip_grad_norm(m, max_norm);
    if (before < 0) return -1;
    double after = nb_grad_norm(m);
    if (after < 0) return -1;
    if (nb_summary_scalar(w, "grad_norm/before_clip", before, step) != 0) return -1;
    if (nb_summary_scalar(w, "grad_norm/after_clip", after, step) != 0) return -1;
    return before;
}

int nb_summary_lr(nb_summary_writer *w, const nb_optimizer *opt, int64_t step) {
    if (!opt) {
        if (!nb__has_error()) nb__error("nb_summary_lr: optimizer is NULL");
        return -1;
    }
    int g = nb_optim_num_groups(opt);
    if (g == 1) return nb_summary_scalar(w, "lr", nb_optim_get_lr(opt, 0), step);
    for (int i = 0; i < g; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "lr/group%d", i);
        if (nb_summary_scalar(w, tag, nb_optim_get_lr(opt, i), step) != 0) return -1;
    }
    return 0;
}

int nb_summary_parameters(nb_summary_writer *w, nb_module *m, int what, int64_t step) {
    const char *fn = "nb_summary_parameters";
    if (!w) {
        if (!nb__has_error()) nb__error("%s: writer is NULL", fn);
        return -1;
    }
    int n;
    uint64_t errors0 = nb__error_count(); /* a module without parameters is no failure */
    nb_named_tensor *p = params_of(m, &n, fn);
    if (!p && nb__error_count() != errors0) return -1;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        size_t len = strlen(p[i].name) + 16;
        char *tag = malloc(len);
        if (!tag) {
            nb__error("%s: out of memory", fn);
            rc = -1;
            break;
        }
        if (what & NB_SUMMARY_WEIGHTS) {
            snprintf(tag, len, "weights/%s", p[i].name);
            rc = nb_summary_histogram(w, tag, p[i].tensor, step);
        }
        nb_tensor *g = nb_grad_of(p[i].tensor);
        if (rc == 0 && (what & NB_SUMMARY_GRADS) && g) {
            snprintf(tag, len, "grads/%s", p[i].name);
            rc = nb_summary_histogram(w, tag, g, step);
        }
        free(tag);
    }
    free(p);
    return rc;
}

int nb_check_grads(nb_summary_writer *w, nb_module *m, double max_norm, int64_t step) {
    const char *fn = "nb_check_grads";
    check_message[0] = 0;
    if (!(max_norm > 0)) max_norm = 1e4;
    int n;
    uint64_t errors0 = nb__error_count(); /* a module without parameters is no failure */
    nb_named_tensor *p = params_of(m, &n, fn);
    if (!p && nb__error_count() != errors0) return -1;
    double total = 0, largest = -1;
    int largest_i = -1, status = NB_GRADS_OK;
    for (int i = 0; i < n; i++) {
        nb_tensor *g = nb_grad_of(p[i].tensor);
        if (!g) continue;
        int64_t cnt;
        double *v = nb__summary_values_of(g, &cnt, fn);
        if (!v) {
            free(p);
            return -1;
        }
        int64_t nans = 0, infs = 0;
        double sq = 0;
        for (int64_t k = 0; k < cnt; k++) {
            if (isnan(v[k])) nans++;
            else if (isinf(v[k])) infs++;
            else sq += v[k] * v[k];
        }
        free(v);
        if (nans || infs) {
            char shape[128];
            nb_shape_str(nb_shape_of(g), shape, sizeof shape);
            snprintf(check_message, sizeof check_message,
                     "nb_check_grads: step %lld: the gradient of '%s' %s has %lld NaN and %lld Inf of %lld elements",
                     (long long)step, p[i].name, shape, (long long)nans, (long long)infs, (long long)cnt);
            status = NB_GRADS_NONFINITE;
            break;
        }
        total += sq;
        if (sqrt(sq) > largest) {
            largest = sqrt(sq);
            largest_i = i;
        }
    }
    total = sqrt(total);
    if (status == NB_GRADS_OK && total > max_norm) {
        snprintf(check_message, sizeof check_message,
                 "nb_check_grads: step %lld: the global gradient norm %.6g exceeds %.6g; the largest is '%s' with norm %.6g",
                 (long long)step, total, max_norm, largest_i >= 0 ? p[largest_i].name : "?", largest);
        status = NB_GRADS_EXPLODING;
    }
    free(p);
    if (status != NB_GRADS_OK && w && nb_summary_text(w, "health/warning", check_message, step) != 0) return -1;
    return status;
}

/* ---- the per-step logger ---- */

/* An activation layer watched by a forward hook: ReLU (share of exactly-zero outputs), Sigmoid or
   Tanh (share of saturated outputs, where the derivative is below about 0.02). */
typedef struct act {
    struct nb_health *h;
    nb_module *m;
    int handle, kind; /* 0 ReLU, 1 Sigmoid, 2 Tanh */
    char *path;
    double sum;       /* shares measured in this step's forwards */
    int64_t calls;
} act;

struct nb_health {
    act **acts;
    int n_acts, cap_acts;
    bool armed;        /* this step's forward is measured (the step before a logging step arms it) */
    nb_summary_writer *w;
    nb_module *m;
    const nb_optimizer *opt;
    int64_t every, classes;
    nb_named_tensor *p;
    int n;
    double **before;   /* per parameter: the weights before this logging step's update (NULL: none) */
    int64_t *before_n;
    double *before_norm;
    bool snapped;      /* before[] holds this step's weights */
    double last_t;     /* when the last step ended (0: none yet) */
    double sum_time, sum_wait;
    int64_t timed, waited;
    int nonfinite_scans; /* forced scans of non-finite steps left, so a broken run stays fast */
    double loss;
};

static int watch(nb_health *h, nb_module *m);

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

nb_health *nb_health_new(nb_summary_writer *w, nb_module *m, const nb_optimizer *opt, nb_health_opts o) {
    const char *fn = "nb_health_new";
    if (!w || !m) {
        if (!nb__has_error()) nb__error("%s: %s is NULL", fn, w ? "module" : "writer");
        return NULL;
    }
    if (o.log_every < 0 || o.classes < 0) {
        nb__error("%s: log_every %lld and classes %lld must be >= 0", fn, (long long)o.log_every, (long long)o.classes);
        return NULL;
    }
    nb_health *h = calloc(1, sizeof *h);
    if (!h) {
        nb__error("%s: out of memory", fn);
        return NULL;
    }
    h->w = w, h->m = m, h->opt = opt;
    h->every = o.log_every ? o.log_every : 50;
    h->classes = o.classes;
    h->nonfinite_scans = 3;
    uint64_t errors0 = nb__error_count();
    h->p = params_of(m, &h->n, fn);
    if (!h->p && nb__error_count() != errors0) {
        free(h);
        return NULL;
    }
    h->armed = h->every == 1;
    if (watch(h, m) < 0) {
        nb_health_free(h);
        return NULL;
    }
    if (h->n > 0) {
        h->before = calloc((size_t)h->n, sizeof *h->before);
        h->before_n = calloc((size_t)h->n, sizeof *h->before_n);
        h->before_norm = calloc((size_t)h->n, sizeof *h->before_norm);
        if (!h->before || !h->before_n || !h->before_norm) {
            nb__error("%s: out of memory", fn);
            nb_health_free(h);
            return NULL;
        }
    }
    return h;
}

/* A tensor's elements: its own memory when it is a contiguous f32 tensor on the cpu (the usual
   parameter or gradient: no copy, which kept a logging step of a 270k-parameter MLP from costing
   three training steps), else a double copy. */
typedef struct elems { const float *f; double *d; int64_t n; } elems;

static int elems_of(nb_tensor *t, elems *e, const char *fn) {
    e->f = NULL, e->d = NULL, e->n = 0;
    if (nb_device_of(t).type == NB_CPU && nb_dtype_of(t) == NB_F32 && nb_is_contiguous(t) && (e->f = nb_data_ptr(t))) {
        e->n = nb_numel(t);
        return 0;
    }
    e->d = nb__summary_values_of(t, &e->n, fn);
    return e->d ? 0 : -1;
}

/* The sum of squares of the finite elements, their copy (when copy is not NULL) and the count of
   NaN/Inf. Written to vectorize (x - x is 0 exactly when x is finite): a plain loop with
   isfinite's branch made a logging step cost most of a training step. */
static double sum_squares(const elems *e, double *copy, int64_t *nonfinite) {
    double sq = 0;
    int64_t bad = 0, n = e->n;
    if (e->f) {
        const float *f = e->f;
        if (copy) {
#pragma omp simd reduction(+ : sq, bad)
            for (int64_t k = 0; k < n; k++) {
                double v = f[k];
                bool ok = v - v == 0;
                copy[k] = v;
                sq += ok ? v * v : 0;
                bad += !ok;
            }
        } else {
#pragma omp simd reduction(+ : sq, bad)
            for (int64_t k = 0; k < n; k++) {
                double v = f[k];
                bool ok = v - v == 0;
                sq += ok ? v * v : 0;
                bad += !ok;
            }
        }
    } else {
        const double *d = e->d;
        for (int64_t k = 0; k < n; k++) {
            double v = d[k];
            bool ok = v - v == 0;
            if (copy) copy[k] = v;
            sq += ok ? v * v : 0;
            bad += !ok;
        }
    }
    *nonfinite += bad;
    return sq;
}

/* The sum of squares of the finite differences between e and before. */
static double sum_sq_diff(const elems *e, const double *before, int64_t n) {
    double sq = 0;
    if (e->f) {
        const float *f = e->f;
#pragma omp simd reduction(+ : sq)
        for (int64_t k = 0; k < n; k++) {
            double d = (double)f[k] - before[k];
            sq += d - d == 0 ? d * d : 0;
        }
    } else {
        for (int64_t k = 0; k < n; k++) {
            double d = e->d[k] - before[k];
            sq += d - d == 0 ? d * d : 0;
        }
    }
    return sq;
}

static nb_tensor *act_hook(nb_module *m, nb_tensor *x, nb_tensor *y, void *ctx) {
    (void)x;
    act *a = ctx;
    if (!y || !a->h->armed || !m->training) return y; /* validation forwards are not the step's */
    elems e;
    if (elems_of(y, &e, "nb_health (activation hook)") < 0) return NULL;
    int64_t hit = 0;
    for (int64_t k = 0; k < e.n; k++) {
        double v = e.f ? (double)e.f[k] : e.d[k];
        hit += a->kind == 0 ? v == 0 : a->kind == 1 ? (v < 0.005 || v > 0.995) : fabs(v) > 0.99;
    }
    free(e.d);
    if (e.n) a->sum += (double)hit / (double)e.n, a->calls++;
    return y;
}

/* Hooks every ReLU, Sigmoid and Tanh layer of the tree; 0 or -1 with an error. */
static int watch(nb_health *h, nb_module *m) {
    static const char *const kinds[] = { "ReLU", "Sigmoid", "Tanh" };
    for (int k = 0; k < 3 && m->cls && m->cls->name; k++) {
        if (strcmp(m->cls->name, kinds[k])) continue;
        if (h->n_acts == h->cap_acts) {
            int cap = h->cap_acts ? 2 * h->cap_acts : 8;
            act **n = realloc(h->acts, sizeof *n * (size_t)cap);
            if (!n) goto oom;
            h->acts = n, h->cap_acts = cap;
        }
        act *a = calloc(1, sizeof *a);
        const char *path = nb_module_path(m);
        if (!a || !(a->path = malloc(strlen(path) + 16))) {
            free(a);
            goto oom;
        }
        snprintf(a->path, strlen(path) + 16, "%s", path[0] ? path : kinds[k]);
        a->h = h, a->m = m, a->kind = k;
        if ((a->handle = nb_module_add_forward_hook(m, act_hook, a)) < 0) {
            free(a->path), free(a);
            return -1;
        }
        h->acts[h->n_acts++] = a;
    }
    int n = nb__module_children(m, NULL, NULL, 0);
    if (n <= 0) return 0;
    nb_module **kids = malloc(sizeof *kids * (size_t)n);
    const char **names = malloc(sizeof *names * (size_t)n);
    if (!kids || !names) {
        free(kids), free(names);
        goto oom;
    }
    nb__module_children(m, names, kids, n);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = watch(h, kids[i]);
    free(kids), free(names);
    return rc;
oom:
    nb__error("nb_health_new: out of memory");
    return -1;
}

/* Logs "<kind>/<param name>" under health/. */
static int log_param(nb_health *h, const char *kind, int i, double v, int64_t step) {
    char tag[512];
    snprintf(tag, sizeof tag, "health/%s/%s", kind, h->p[i].name);
    return nb_summary_scalar(h->w, tag, v, step);
}

int nb_health_before_update(nb_health *h, int64_t step, double loss) {
    const char *fn = "nb_health_before_update";
    if (!h) {
        if (!nb__has_error()) nb__error("%s: logger is NULL", fn);
        return -1;
    }
    h->snapped = false;
    h->loss = loss;
    bool bad = !isfinite(loss);
    if (step % h->every != 0 && !(bad && h->nonfinite_scans > 0)) return 0;
    if (bad) {
        h->nonfinite_scans--;
        if (nb_summary_scalar(h->w, "health/nonfinite_loss", 1, step) != 0) return -1;
    }
    if (h->classes > 0 && nb_summary_scalar(h->w, "health/classes", (double)h->classes, step) == 0) h->classes = 0;
    double total = 0;
    int64_t total_bad = 0;
    for (int i = 0; i < h->n; i++) {
        elems wv;
        if (elems_of(h->p[i].tensor, &wv, fn) < 0) return -1;
        if (wv.n != h->before_n[i] || !h->before[i]) { /* kept from step to step: no allocation per logging step */
            free(h->before[i]);
            h->before_n[i] = 0;
            if (!(h->before[i] = malloc(sizeof(double) * (size_t)(wv.n ? wv.n : 1)))) {
                free(wv.d);
                nb__error("%s: out of memory for a copy of '%s' (%lld values)", fn, h->p[i].name, (long long)wv.n);
                return -1;
            }
            h->before_n[i] = wv.n;
        }
        int64_t nonfinite = 0;
        double wsq = sum_squares(&wv, h->before[i], &nonfinite);
        free(wv.d);
        h->before_norm[i] = sqrt(wsq);
        if (log_param(h, "weight_norm", i, sqrt(wsq), step) != 0) return -1;
        nb_tensor *g = nb_grad_of(h->p[i].tensor);
        if (g) {
            elems gv;
            if (elems_of(g, &gv, fn) < 0) return -1;
            double gsq = sum_squares(&gv, NULL, &nonfinite);
            free(gv.d);
            total += gsq;
            if (log_param(h, "grad_norm", i, sqrt(gsq), step) != 0) return -1;
        }
        /* only when there are some: a healthy run logs no series of zeros */
        if (nonfinite && log_param(h, "nonfinite", i, (double)nonfinite, step) != 0) return -1;
        total_bad += nonfinite;
    }
    for (int i = 0; i < h->n_acts; i++) {
        act *a = h->acts[i];
        if (!a->calls) continue;
        char tag[512];
        snprintf(tag, sizeof tag, "health/%s/%s", a->kind ? "saturated" : "relu_zero", a->path);
        if (nb_summary_scalar(h->w, tag, a->sum / (double)a->calls, step) != 0) return -1;
        a->sum = 0, a->calls = 0;
    }
    if (nb_summary_scalar(h->w, "health/grad_norm", sqrt(total), step) != 0 ||
        nb_summary_scalar(h->w, "health/nonfinite", (double)total_bad, step) != 0)
        return -1;
    h->snapped = true;
    return 0;
}

int nb_health_after_update(nb_health *h, int64_t step, double data_wait_s) {
    const char *fn = "nb_health_after_update";
    if (!h) {
        if (!nb__has_error()) nb__error("%s: logger is NULL", fn);
        return -1;
    }
    h->armed = (step + 1) % h->every == 0; /* the next step's forward is a logging step's */
    for (int i = 0; i < h->n_acts; i++) h->acts[i]->sum = 0, h->acts[i]->calls = 0;
    double t = now_s();
    if (h->last_t > 0) {
        h->sum_time += t - h->last_t;
        h->timed++;
    }
    h->last_t = t;
    if (data_wait_s >= 0) {
        h->sum_wait += data_wait_s;
        h->waited++;
    }
    if (!h->snapped) return 0;
    h->snapped = false;
    for (int i = 0; i < h->n; i++) {
        if (!h->before[i]) continue;
        elems wv;
        if (elems_of(h->p[i].tensor, &wv, fn) < 0) return -1;
        double dsq = sum_sq_diff(&wv, h->before[i], wv.n < h->before_n[i] ? wv.n : h->before_n[i]);
        free(wv.d);
        /* a zero weight has no ratio; the update's own size then stands for it */
        double ratio = sqrt(dsq) / (h->before_norm[i] > 0 ? h->before_norm[i] : 1);
        if (log_param(h, "update_ratio", i, ratio, step) != 0) return -1;
    }
    if (nb_summary_scalar(h->w, "step/loss", h->loss, step) != 0) return -1;
    if (h->opt && nb_summary_scalar(h->w, "step/lr", nb_optim_get_lr(h->opt, 0), step) != 0) return -1;
    if (h->timed && nb_summary_scalar(h->w, "step/time", h->sum_time / (double)h->timed, step) != 0) return -1;
    if (h->waited && nb_summary_scalar(h->w, "step/data_wait", h->sum_wait / (double)h->waited, step) != 0) return -1;
    h->sum_time = h->sum_wait = 0;
    h->timed = h->waited = 0;
    return 0;
}

void nb_health_free(nb_health *h) {
    if (!h) return;
    for (int i = 0; i < h->n_acts; i++) {
        nb_module_remove_hook(h->acts[i]->m, h->acts[i]->handle);
        free(h->acts[i]->path);
        free(h->acts[i]);
    }
    free(h->acts);
    for (int i = 0; i < h->n && h->before; i++) free(h->before[i]);
    free(h->before);
    free(h->before_n);
    free(h->before_norm);
    free(h->p);
    free(h);
}
