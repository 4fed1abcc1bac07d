/* The Keras-style model: compile, fit (on tensors or loaders), evaluate, predict, a per-epoch
   history, callbacks and early stopping, built on modules, optimizers and the data loader. */
#include "../core/core_impl.h"
#include "nabla.h"
#include "nabla/model.h"
#include "nabla/io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_METRICS 8

struct nb_model {
    nb_module *module;
    nb_optimizer *opt;
    nb_model_compile_opts c;
    bool compiled;
};

struct nb_history {
    int n_metrics, epochs, cap;
    const char *names[MAX_METRICS];
    double *values; /* epochs x n_metrics */
};

nb_model *nb_model_new(nb_module *module) {
    if (!module) {
        if (!nb__has_error()) nb__error("nb_model_new: module is NULL");
        return NULL;
    }
    nb_model *m = calloc(1, sizeof *m);
    if (!m) {
        nb_module_free(module);
        nb__error("nb_model_new: out of memory");
        return NULL;
    }
    m->module = module;
    return m;
}

nb_module *nb_model_module(nb_model *m) { return m ? m->module : NULL; }

int nb_model_compile(nb_model *m, nb_model_compile_opts o) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_model_compile: model is NULL");
        return -1;
    }
    if (!nb__enum_ok("nb_model_compile", "optimizer", (int)o.optimizer, NB_OPTIM_ADAGRAD + 1, "nb_optim_kind",
                     "NB_OPTIM_ADAMW, NB_OPTIM_ADAM, NB_OPTIM_SGD, NB_OPTIM_RMSPROP, NB_OPTIM_ADAGRAD") ||
        !nb__enum_ok("nb_model_compile", "loss", (int)o.loss, NB_LOSS_BCE_LOGITS + 1, "nb_loss_kind",
                     "NB_LOSS_SPARSE_CE_LOGITS, NB_LOSS_MSE, NB_LOSS_BCE_LOGITS"))
        return -1;
    if (!(o.lr >= 0)) {
        nb__error("nb_model_compile: the learning rate %g is not a number >= 0", o.lr);
        return -1;
    }
    nb_optimizer *opt = o.optimizer_obj;
    if (!opt) {
        switch (o.optimizer) {
        case NB_OPTIM_ADAM: opt = nb_optim_adam(m->module, (nb_adam_opts){ .lr = o.lr }); break;
        case NB_OPTIM_SGD: opt = nb_optim_sgd(m->module, (nb_sgd_opts){ .lr = o.lr }); break;
        case NB_OPTIM_RMSPROP: opt = nb_optim_rmsprop(m->module, (nb_rmsprop_opts){ .lr = o.lr }); break;
        case NB_OPTIM_ADAGRAD: opt = nb_optim_adagrad(m->module, (nb_adagrad_opts){ .lr = o.lr }); break;
        default: opt = nb_optim_adamw(m->module, (nb_adamw_opts){ .lr = o.lr });
        }
        if (!opt) return -1;
    }
    if (m->opt && m->opt != opt) nb_optim_free(m->opt);
    m->opt = opt;
    m->c = o;
    m->compiled = true;
    return 0;
}

static nb_tensor *compute_loss(nb_model *m, nb_tensor *pred, nb_tensor *y) {
    if (m->c.loss_fn) return m->c.loss_fn(pred, y, m->c.loss_ctx);
    switch (m->c.loss) {
    case NB_LOSS_MSE: return nb_mse_loss(pred, y, NB_REDUCTION_MEAN);
    case NB_LOSS_BCE_LOGITS: return nb_bce_with_logits(pred, y, NB_REDUCTION_MEAN, NULL);
    default: return nb_cross_entropy(pred, y, (nb_ce_opts){ 0 });
    }
}

/* Checks that the labels y of a batch of class logits [N, C] are class indices in [0, C): a
   label outside would count as wrong, or be dropped, without a word. Records an error naming
   the first bad label, its row in the batch and the batch. */
static bool labels_ok(const char *fn, nb_tensor *pred, nb_tensor *y, int64_t batch) {
    int64_t classes = nb_dim(pred, 1), n = nb_numel(y);
    if (nb_ndim(y) != 1 || nb_dim(y, 0) != nb_dim(pred, 0)) {
        char dp[200], dy[200];
        nb__error("%s: accuracy needs labels [N] beside logits [N, C]: got logits %s and labels %s (batch %lld)", fn,
                  nb__describe(pred, dp, sizeof dp), nb__describe(y, dy, sizeof dy), (long long)batch);
        return false;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *yd = nb_contiguous(nb_to(nb_cast(y, NB_F64), (nb_device){ NB_CPU, 0 }));
    const double *v = yd ? nb_data_ptr(yd) : NULL;
    bool ok = v != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        if (!(v[i] >= 0 && v[i] < (double)classes && v[i] == floor(v[i]))) {
            nb__error("%s: label %.17g at row %lld of batch %lld is not a class index in [0, %lld)", fn, v[i],
                      (long long)i, (long long)batch, (long long)classes);
            ok = false;
        }
    nb_scope_end(s);
    return ok;
}

/* Per-batch metric sums: correct predictions (top 1 and top 5) of class logits [N, C]. */
static void count_metrics(nb_model *m, const char *fn, int64_t batch, nb_tensor *pred, nb_tensor *y, double *top1,
                          double *top5) {
    if (!(m->c.metrics & (NB_METRIC_ACCURACY | NB_METRIC_TOP5_ACCURACY)) || nb_ndim(pred) != 2) return;
    if (!labels_ok(fn, pred, y, batch)) return;
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    if (m->c.metrics & NB_METRIC_ACCURACY) *top1 += nb_item(nb_sum_all(nb_eq(nb_argmax(pred, 1, false), y)));
    if (m->c.metrics & NB_METRIC_TOP5_ACCURACY) {
        /* the target is in the top 5 when fewer than 5 logits are larger than its own */
        nb_tensor *own = nb_gather(pred, 1, nb_unsqueeze(nb_cast(y, NB_I64), 1));
        nb_tensor *larger = nb_sum(nb_gt(pred, own), 1, false);
        *top5 += nb_item(nb_sum_all(nb_lt(larger, nb_full(NB_SHAPE(), 5, NB_I64))));
    }
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
}

typedef struct {
    double loss, top1, top5;
    int64_t n;
} totals;

/* Names and values of the metrics in t, prefixed ("" or "val_"). */
static int metric_values(const nb_model *m, const totals *t, const char *prefix, const char **names, double *values) {
    static const char *const plain[] = { "loss", "accuracy", "top5_accuracy" };
    static const char *const val[] = { "val_loss", "val_accuracy", "val_top5_accuracy" };
    const char *const *set = *prefix ? val : plain;
    int k = 0;
    double n = t->n ? (double)t->n : 1;
    names[k] = set[0];
    values[k++] = t->loss / n;
    if (m->c.metrics & NB_METRIC_ACCURACY) { names[k] = set[1]; values[k++] = t->top1 / n; }
    if (m->c.metrics & NB_METRIC_TOP5_ACCURACY) { names[k] = set[2]; values[k++] = t->top5 / n; }
    return k;
}

static int evaluate_loader(nb_model *m, const char *fn, nb_data_loader *loader, totals *t) {
    bool prev = nb_set_grad_enabled(false);
    bool was_training = m->module->training;
    nb_module_train(m->module, false);
    memset(t, 0, sizeof *t);
    uint64_t errors0 = nb__error_count(); /* this evaluation's failures, not an older uncleared error */
    nb_batch b;
    int64_t batch = 0;
    while (nb_data_loader_next(loader, &b)) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *pred = nb_forward(m->module, b.x);
        nb_tensor *loss = compute_loss(m, pred, b.y);
        if (!loss && !nb__has_error())
            nb__error("%s: the %s returned NULL for batch %lld", fn, pred ? "loss" : "module's forward", (long long)batch);
        int64_t n = nb_dim(b.y, 0);
        if (loss) t->loss += nb_item(loss) * (double)n;
        if (pred) count_metrics(m, fn, batch, pred, b.y, &t->top1, &t->top5);
        t->n += n;
        nb_scope_end(s);
        batch++;
        if (nb__error_count() != errors0) break;
    }
    nb_module_train(m->module, was_training);
    nb_set_grad_enabled(prev);
    return nb_data_loader_failed(loader) || nb__error_count() != errors0 ? -1 : 0;
}

static int history_add(nb_history *h, const char **names, const double *values, int n) {
    if (h->epochs == 0) {
        h->n_metrics = n;
        for (int i = 0; i < n; i++) h->names[i] = names[i];
    }
    if (h->epochs == h->cap) {
        int cap = h->cap ? h->cap * 2 : 16;
        double *grown = realloc(h->values, sizeof(double) * (size_t)cap * MAX_METRICS);
        if (!grown) return -1;
        h->values = grown;
        h->cap = cap;
    }
    for (int i = 0; i < h->n_metrics; i++) h->values[h->epochs * MAX_METRICS + i] = i < n ? values[i] : NAN;
    h->epochs++;
    return 0;
}

/* A duration as "42s", "3m05s" or "1h02m", for ETAs. */
static const char *duration(double secs, char *buf, size_t size) {
    long s = secs > 0 && secs < 1e9 ? (long)(secs + 0.5) : 0;
    if (s < 60) snprintf(buf, size, "%lds", s);
    else if (s < 3600) snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, size, "%ldh%02ldm", s / 3600, s / 60 % 60);
    return buf;
}

/* The progress line: in place on a terminal with the epoch's ETA; once per epoch otherwise. Each
   epoch's last line also gives the time left in the run, from the mean epoch so far
   (run_secs over epochs_run), when epochs remain. */
static void progress(int verbose, bool tty, int epoch, int epochs, int64_t done, int64_t total, double secs,
                     const char **names, const double *values, int n, bool final, double run_secs, int epochs_run) {
    if (verbose < 0 || (!tty && !final)) return;
    char bar[31], eta[32];
    int filled = total > 0 ? (int)(30 * done / total) : 30;
    for (int i = 0; i < 30; i++) bar[i] = i < filled ? '=' : (i == filled ? '>' : '.');
    bar[30] = 0;
    printf("%sEpoch %d/%d  %lld/%lld [%s] %.1fs %.2fms/step", tty ? "\r" : "", epoch, epochs, (long long)done,
           (long long)total, bar, secs, done ? 1e3 * secs / (double)done : 0.0);
    if (!final && done > 0 && done < total)
        printf(" - ETA %s", duration(secs / (double)done * (double)(total - done), eta, sizeof eta));
    for (int i = 0; i < n; i++) printf(" - %s: %.4f", names[i], values[i]);
    if (final && epoch < epochs && epochs_run > 0)
        printf(" - run ETA %s", duration(run_secs / epochs_run * (epochs - epoch), eta, sizeof eta));
    printf(final ? "\n" : "\033[K"); /* clear what a longer line left behind */
    fflush(stdout);
}


/* The module's state entries (malloc'ed, however many there are); NULL with an error. */
static nb_named_tensor *state_entries(nb_module *mod, int *count) {
    *count = nb_module_state_entries(mod, NULL, 0);
    if (*count < 0) {
        if (!nb__has_error()) nb__error("nb_model_fit: cannot list the module's parameters and buffers");
        return NULL;
    }
    nb_named_tensor *e = calloc((size_t)(*count ? *count : 1), sizeof *e);
    if (!e) {
        nb__error("nb_model_fit: out of memory for %d state entries", *count);
        return NULL;
    }
    if (nb_module_state_entries(mod, e, *count) != *count) {
        free(e);
        nb__error("nb_model_fit: the module's state entries changed while being listed");
        return NULL;
    }
    return e;
}

/* Copies of the parameters and buffers (the best weights of early stopping) into *snap (n
   entries, made on the first call); 0, or <0 with an error. */
static int snapshot(nb_module *mod, nb_tensor ***snap, int *n) {
    int count;
    nb_named_tensor *e = state_entries(mod, &count);
    if (!e) return -1;
    if (*snap && count != *n) {
        free(e);
        nb__error("nb_model_fit: the module had %d state entries at the best epoch so far and has %d now", *n, count);
        return -1;
    }
    if (!*snap) {
        *snap = calloc((size_t)(count ? count : 1), sizeof **snap);
        if (!*snap) {
            free(e);
            nb__error("nb_model_fit: out of memory for a copy of %d state entries (restore_best_weights)", count);
            return -1;
        }
        *n = count;
    }
    nb_tensor **s = *snap;
    int rc = 0;
    bool prev = nb_set_grad_enabled(false);
    for (int i = 0; i < count && rc == 0; i++) {
        if (!s[i]) {
            nb_scope *sc = nb_scope_begin();
            s[i] = nb_keep(nb_clone(e[i].tensor));
            nb_scope_end(sc);
            if (!s[i]) rc = -1;
        } else if (nb_assign(s[i], e[i].tensor) < 0) rc = -1;
    }
    nb_set_grad_enabled(prev);
    free(e);
    if (rc < 0 && !nb__has_error()) nb__error("nb_model_fit: cannot copy the best weights");
    return rc;
}

/* Puts the snapshot back into the module; 0, or <0 with an error. */
static int restore(nb_module *mod, nb_tensor **snap, int n) {
    int count;
    nb_named_tensor *e = state_entries(mod, &count);
    if (!e) return -1;
    int rc = 0;
    if (count != n) {
        nb__error("nb_model_fit: the module had %d state entries at the best epoch and has %d now", n, count);
        rc = -1;
    }
    bool prev = nb_set_grad_enabled(false);
    for (int i = 0; i < count && rc == 0; i++)
        if (nb_assign(e[i].tensor, snap[i]) < 0) rc = -1;
    nb_set_grad_enabled(prev);
    free(e);
    if (rc < 0 && !nb__has_error()) nb__error("nb_model_fit: cannot restore the best weights");
    return rc;
}

/* The ready-made callbacks of nb_fit_opts, after an epoch: TensorBoard scalars, a CSV row,
   the learning-rate schedule. */
static int ready_made(nb_model *m, const nb_fit_opts *o, int epoch, const char **names, const double *values, int k,
                      FILE **csv) {
    if (o->tensorboard) {
        char tag[64];
        for (int i = 0; i < k; i++) {
            snprintf(tag, sizeof tag, "epoch/%s", names[i]);
            if (nb_summary_scalar(o->tensorboard, tag, values[i], epoch) < 0) return -1;
        }
        if (nb_summary_lr(o->tensorboard, m->opt, epoch) < 0 || nb_summary_grad_norm(o->tensorboard, m->module, epoch) < 0)
            return -1;
        if (o->tensorboard_histograms &&
            nb_summary_parameters(o->tensorboard, m->module, NB_SUMMARY_WEIGHTS | NB_SUMMARY_GRADS, epoch) < 0)
            return -1;
        if (nb_summary_flush(o->tensorboard) < 0) return -1;
    }
    if (o->csv_path) {
        if (!*csv) {
            if (!(*csv = fopen(o->csv_path, "w"))) {
                nb__error("nb_model_fit: cannot write the CSV log %s", o->csv_path);
                return -1;
            }
            fprintf(*csv, "epoch");
            for (int i = 0; i < k; i++) fprintf(*csv, ",%s", names[i]);
            fprintf(*csv, "\n");
        }
        fprintf(*csv, "%d", epoch);
        for (int i = 0; i < k; i++) fprintf(*csv, ",%.9g", values[i]);
        fprintf(*csv, "\n");
        if (fflush(*csv) != 0) {
            nb__error("nb_model_fit: cannot write the CSV log %s", o->csv_path);
            return -1;
        }
    }
    if (o->lr_schedule && nb_sched_step(o->lr_schedule) < 0) return -1;
    return 0;
}

nb_history *nb_model_fit_loader(nb_model *m, nb_data_loader *train, nb_data_loader *val, nb_fit_opts o) {
    if (!m || !train) {
        if (!nb__has_error()) nb__error("nb_model_fit_loader: %s is NULL", m ? "the training loader" : "model");
        return NULL;
    }
    if (!m->compiled) {
        nb__error("nb_model_fit: the model is not compiled (call nb_model_compile first)");
        return NULL;
    }
    if (!(o.clip_grad_norm >= 0)) {
        nb__error("nb_model_fit: clip_grad_norm must be >= 0 (0: off), got %g", o.clip_grad_norm);
        return NULL;
    }
    if (o.epochs < 0 || o.early_stopping_patience < 0 || o.n_callbacks < 0 || (o.n_callbacks > 0 && !o.callbacks)) {
        nb__error("nb_model_fit: epochs %d, early_stopping_patience %d and n_callbacks %d must be >= 0%s", o.epochs,
                  o.early_stopping_patience, o.n_callbacks, o.n_callbacks > 0 && !o.callbacks ? " (callbacks is NULL)" : "");
        return NULL;
    }
    int epochs = o.epochs > 0 ? o.epochs : 1;
    nb_history *h = calloc(1, sizeof *h);
    if (!h) {
        nb__error("nb_model_fit: out of memory");
        return NULL;
    }
    bool tty = isatty(STDOUT_FILENO);
    for (int c = 0; c < o.n_callbacks; c++)
        if (o.callbacks[c].on_train_begin) o.callbacks[c].on_train_begin(m, o.callbacks[c].user);
    nb_module_train(m->module, true);
    double best = INFINITY;
    int wait = 0, n_best = 0;
    nb_tensor **best_state = NULL;
    /* the global step continues after a resume, so per-step logs do not start again at 0 */
    int64_t total = nb_data_loader_len(train), step = (int64_t)(o.initial_epoch > 0 ? o.initial_epoch : 0) * total;
    bool stop = false, failed = false;
    FILE *csv = NULL;
    if (o.initial_epoch < 0 || o.initial_epoch >= epochs) {
        nb__error("nb_model_fit: initial_epoch %d must be below epochs %d", o.initial_epoch, epochs);
        nb_history_free(h);
        return NULL;
    }
    uint64_t errors0 = nb__error_count(); /* failures of this run, not an older uncleared error */
    nb_health *health = NULL;
    if (o.tensorboard && o.log_every > 0 &&
        !(health = nb_health_new(o.tensorboard, m->module, m->opt, (nb_health_opts){ .log_every = o.log_every }))) {
        nb_history_free(h);
        return NULL;
    }
    double run_t0 = nb__now();
    for (int epoch = o.initial_epoch + 1; epoch <= epochs && !stop && !failed; epoch++) {
        for (int c = 0; c < o.n_callbacks; c++)
            if (o.callbacks[c].on_epoch_begin) o.callbacks[c].on_epoch_begin(m, epoch, o.callbacks[c].user);
        totals t = { 0 };
        double t0 = nb__now();
        int64_t done = 0;
        nb_batch b;
        const char *names[MAX_METRICS];
        double values[MAX_METRICS];
        double wait_t0 = nb__now();
        while (!stop && nb_data_loader_next(train, &b)) {
            double data_wait = nb__now() - wait_t0;
            for (int c = 0; c < o.n_callbacks; c++)
                if (o.callbacks[c].on_batch_begin) o.callbacks[c].on_batch_begin(m, step + 1, o.callbacks[c].user);
            nb_scope *s = nb_scope_begin();
            nb_tensor *pred = nb_forward(m->module, b.x);
            nb_tensor *loss = compute_loss(m, pred, b.y);
            nb_optim_zero_grad(m->opt);
            double l = loss ? nb_item(loss) : NAN;
            /* this batch's loss sum, samples and correct predictions; the whole job's with all_sum
               (summed before backward, so the health signals log the job's loss too) */
            double sums[4] = { 0, (double)nb_dim(b.y, 0), 0, 0 };
            sums[0] = l * sums[1];
            if (pred) count_metrics(m, "nb_model_fit", done, pred, b.y, &sums[2], &sums[3]);
            if (o.all_sum) {
                if (o.all_sum(sums, 4, o.all_sum_ctx) < 0) {
                    if (!nb__has_error()) nb__error("nb_model_fit: all_sum failed at step %lld", (long long)step + 1);
                    failed = true;
                } else l = sums[1] > 0 ? sums[0] / sums[1] : l;
            }
            int64_t hstep = step + 1; /* the global step: a resumed run continues the count */
            if (health && done == 0 && epoch == o.initial_epoch + 1 && !m->c.loss_fn &&
                m->c.loss == NB_LOSS_SPARSE_CE_LOGITS && pred && nb_ndim(pred) == 2 &&
                nb_summary_scalar(o.tensorboard, "health/classes", (double)nb_dim(pred, 1), hstep) < 0)
                failed = true;
            /* the health signals see the gradients before clipping, as they came out of backward */
            if (failed || nb_backward(loss) < 0 || (health && nb_health_before_update(health, hstep, l) < 0) ||
                (o.clip_grad_norm > 0 && nb_clip_grad_norm(m->module, o.clip_grad_norm) < 0) ||
                nb_optim_step(m->opt) < 0 || (health && nb_health_after_update(health, hstep, data_wait) < 0))
                failed = true;
            nb_scope_end(s);
            done++;
            step++;
            if (failed || nb__error_count() != errors0) {
                failed = true;
                break;
            }
            t.loss += sums[0];
            t.n += (int64_t)sums[1];
            t.top1 += sums[2];
            t.top5 += sums[3];
            if (!isfinite(l)) { /* as Keras's TerminateOnNaN: every later step would be nan too */
                nb__error("nb_model_fit: the loss is %s at step %lld (epoch %d, batch %lld of %lld); training stopped. "
                          "Lower the learning rate, clip the gradients, or look for nan or inf in the data",
                          isnan(l) ? "nan" : l > 0 ? "inf" : "-inf", (long long)step, epoch, (long long)done,
                          (long long)total);
                failed = true;
                break;
            }
            for (int c = 0; c < o.n_callbacks; c++)
                if (o.callbacks[c].on_batch_end && !o.callbacks[c].on_batch_end(m, step, l, o.callbacks[c].user)) stop = true;
            if (tty && done % 20 == 0) {
                int k = metric_values(m, &t, "", names, values);
                progress(o.verbose, tty, epoch, epochs, done, total, nb__now() - t0, names, values, k, false, 0, 0);
            }
            wait_t0 = nb__now();
        }
        if (nb_data_loader_failed(train)) failed = true;
        if (failed) break;
        int k = metric_values(m, &t, "", names, values);
        if (val) {
            totals v;
            if (evaluate_loader(m, "nb_model_fit (validation)", val, &v) < 0) {
                failed = true;
                break;
            }
            k += metric_values(m, &v, "val_", names + k, values + k);
        }
        progress(o.verbose, tty, epoch, epochs, done, total, nb__now() - t0, names, values, k, true, nb__now() - run_t0,
                 epoch - o.initial_epoch);
        if (history_add(h, names, values, k) < 0) {
            nb__error("nb_model_fit: out of memory");
            failed = true;
            break;
        }
        for (int c = 0; c < o.n_callbacks; c++)
            if (o.callbacks[c].on_epoch_end && !o.callbacks[c].on_epoch_end(m, epoch, names, values, k, o.callbacks[c].user))
                stop = true;
        if (ready_made(m, &o, epoch, names, values, k, &csv) < 0) {
            failed = true;
            break;
        }
        double monitored = val ? nb_history_get(h, "val_loss", h->epochs - 1) : values[0];
        if (monitored < best) {
            best = monitored;
            wait = 0;
            if (o.early_stopping_patience > 0 && o.restore_best_weights && snapshot(m->module, &best_state, &n_best) < 0) {
                failed = true;
                break;
            }
            if (o.checkpoint_path && nb_save_state_dict(m->module, o.checkpoint_path) < 0) {
                failed = true;
                break;
            }
        } else if (o.early_stopping_patience > 0 && ++wait >= o.early_stopping_patience) stop = true;
    }
    if (csv) fclose(csv);
    if (!failed && o.checkpoint_path && !(best < INFINITY) && epochs > o.initial_epoch) {
        /* no claim may later be made on a file this run never wrote */
        nb__error("nb_model_fit: no epoch gave a finite %s, so %s was not written", val ? "val_loss" : "loss",
                  o.checkpoint_path);
        failed = true;
    }
    nb_health_free(health);
    if (best_state) {
        /* stopped early: back to the best epoch's weights */
        if (!failed && stop && restore(m->module, best_state, n_best) < 0) failed = true;
        for (int i = 0; i < n_best; i++) nb_release(best_state[i]);
        free(best_state);
    }
    for (int c = 0; c < o.n_callbacks; c++)
        if (o.callbacks[c].on_train_end) o.callbacks[c].on_train_end(m, o.callbacks[c].user);
    if (failed) {
        if (!nb__has_error()) nb__error("nb_model_fit: training failed");
        nb_history_free(h);
        return NULL;
    }
    return h;
}

static bool check_xy(const char *fn, nb_tensor *x, nb_tensor *y) {
    if (!x || !y) {
        if (!nb__has_error()) nb__error("%s: %s is NULL", fn, x ? "y" : "x");
        return false;
    }
    if (nb_ndim(x) < 1 || nb_ndim(y) < 1 || nb_dim(x, 0) != nb_dim(y, 0)) {
        char dx[200], dy[200];
        nb__error("%s: x %s and y %s must have the same number of samples (axis 0)", fn, nb__describe(x, dx, sizeof dx),
                  nb__describe(y, dy, sizeof dy));
        return false;
    }
    return true;
}

nb_history *nb_model_fit(nb_model *m, nb_tensor *x, nb_tensor *y, nb_fit_opts o) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_model_fit: model is NULL");
        return NULL;
    }
    if (!check_xy("nb_model_fit", x, y)) return NULL;
    if (o.batch_size < 0) {
        nb__error("nb_model_fit: batch_size %lld must be >= 0 (0: 32)", (long long)o.batch_size);
        return NULL;
    }
    if (!(o.validation_split >= 0 && o.validation_split < 1)) {
        nb__error("nb_model_fit: validation_split must be in [0, 1), got %g", o.validation_split);
        return NULL;
    }
    if ((o.val_x || o.val_y) && !check_xy("nb_model_fit (validation)", o.val_x, o.val_y)) return NULL;
    int64_t n = nb_dim(x, 0), n_val = (int64_t)floor((double)n * o.validation_split);
    int64_t batch = o.batch_size > 0 ? o.batch_size : 32;
    nb_scope *s = nb_scope_begin();
    /* Keras holds out the last fraction, before shuffling */
    nb_tensor *tx = n_val ? nb_slice(x, 0, 0, n - n_val, 1) : x, *ty = n_val ? nb_slice(y, 0, 0, n - n_val, 1) : y;
    nb_tensor *vx = n_val ? nb_slice(x, 0, n - n_val, n, 1) : o.val_x, *vy = n_val ? nb_slice(y, 0, n - n_val, n, 1) : o.val_y;
    nb_dataset *train_ds = nb_data_tensors(tx, ty), *val_ds = vx ? nb_data_tensors(vx, vy) : NULL;
    nb_data_loader *train = nb_data_loader_new(train_ds, (nb_loader_opts){ .batch_size = batch, .shuffle = !o.no_shuffle,
                                                                           .num_workers = o.num_workers, .seed = o.seed });
    nb_data_loader *val = val_ds ? nb_data_loader_new(val_ds, (nb_loader_opts){ .batch_size = 256 }) : NULL;
    nb_history *h = train && (!val_ds || val) ? nb_model_fit_loader(m, train, val, o) : NULL;
    nb_data_loader_free(train);
    nb_data_loader_free(val);
    nb_dataset_free(train_ds);
    nb_dataset_free(val_ds);
    nb_scope_end(s);
    return h;
}

int nb_model_evaluate(nb_model *m, nb_tensor *x, nb_tensor *y, int64_t batch_size, const char **names, double *values, int cap) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_model_evaluate: model is NULL");
        return -1;
    }
    if (!check_xy("nb_model_evaluate", x, y)) return -1;
    if (batch_size < 0) {
        nb__error("nb_model_evaluate: batch_size %lld must be >= 0 (0: 256)", (long long)batch_size);
        return -1;
    }
    if (!m->compiled) {
        nb__error("nb_model_evaluate: the model is not compiled (call nb_model_compile first)");
        return -1;
    }
    nb_dataset *ds = nb_data_tensors(x, y);
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = batch_size > 0 ? batch_size : 256 });
    totals t;
    int rc = l ? evaluate_loader(m, "nb_model_evaluate", l, &t) : -1;
    nb_data_loader_free(l);
    nb_dataset_free(ds);
    if (rc < 0) return -1;
    const char *nm[MAX_METRICS];
    double v[MAX_METRICS];
    int k = metric_values(m, &t, "", nm, v);
    for (int i = 0; i < k && i < cap; i++) {
        if (names) names[i] = nm[i];
        if (values) values[i] = v[i];
    }
    return k;
}

nb_tensor *nb_model_predict(nb_model *m, nb_tensor *x, int64_t batch_size) {
    if (!m || !x) {
        if (!nb__has_error()) nb__error("nb_model_predict: %s is NULL", m ? "x" : "model");
        return NULL;
    }
    if (batch_size < 0) {
        nb__error("nb_model_predict: batch_size %lld must be >= 0 (0: 256)", (long long)batch_size);
        return NULL;
    }
    int64_t n = nb_ndim(x) ? nb_dim(x, 0) : 0, batch = batch_size > 0 ? batch_size : 256;
    if (n == 0) {
        nb__error("nb_model_predict: x has no samples");
        return NULL;
    }
    int64_t parts = n / batch + (n % batch ? 1 : 0); /* no n + batch - 1: it overflows for a huge batch */
    if (parts > INT32_MAX) {
        nb__error("nb_model_predict: %lld batches of %lld samples are too many to join", (long long)parts, (long long)batch);
        return NULL;
    }
    nb_tensor **outs = calloc((size_t)parts, sizeof *outs);
    if (!outs) {
        nb__error("nb_model_predict: out of memory");
        return NULL;
    }
    bool prev = nb_set_grad_enabled(false);
    bool was_training = m->module->training;
    nb_module_train(m->module, false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *r = NULL;
    bool ok = true;
    for (int64_t i = 0; i < parts && ok; i++) {
        int64_t a = i * batch, e = batch < n - a ? a + batch : n;
        ok = (outs[i] = nb_forward(m->module, nb_slice(x, 0, a, e, 1))) != NULL;
        if (!ok && !nb__has_error())
            nb__error("nb_model_predict: the module's forward returned NULL for samples %lld..%lld", (long long)a,
                      (long long)e);
    }
    if (ok) r = nb_keep(nb_cat(outs, (int)parts, 0));
    nb_scope_end(s);
    nb_module_train(m->module, was_training);
    nb_set_grad_enabled(prev);
    free(outs);
    return nb__own(r);
}

void nb_model_free(nb_model *m) {
    if (!m) return;
    nb_optim_free(m->opt);
    nb_module_free(m->module);
    free(m);
}

int nb_history_epochs(const nb_history *h) { return h ? h->epochs : 0; }
int nb_history_num_metrics(const nb_history *h) { return h ? h->n_metrics : 0; }
const char *nb_history_metric(const nb_history *h, int i) { return h && i >= 0 && i < h->n_metrics ? h->names[i] : NULL; }

double nb_history_get(const nb_history *h, const char *metric, int epoch) {
    if (!h || !metric || epoch < 0 || epoch >= h->epochs) return NAN;
    for (int i = 0; i < h->n_metrics; i++)
        if (!strcmp(h->names[i], metric)) return h->values[epoch * MAX_METRICS + i];
    return NAN;
}

void nb_history_free(nb_history *h) {
    if (!h) return;
    free(h->values);
    free(h);
}
