/* Run-health helpers: gradient norms before and after clipping, the learning rate, per-parameter
   weight and gradient histograms, and the NaN/Inf and exploding-gradient check. */
#include "../core/core_impl.h"
#include "nabla.h"
#include "../summary/summary_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
