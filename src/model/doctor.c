/* nabla doctor: reads a run's scalars with the summary reader, finds its series by role (loss,
   validation loss, accuracy, the health signals of nb_health) in one pass over the tags, and runs
   a table of detectors over them; each finding carries its step, numbers, sparkline and advice. */
#include "../core/core_impl.h"
#include "nabla.h"
#include "nabla/doctor.h"
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef NABLA_HAVE_JSON
#include <jansson.h>
#endif

/* ---- thresholds ---- */

static const struct param {
    const char *name;
    double def;
    const char *meaning;
} params[] = {
    { "classes", 0, "number of classes for the chance-level check (0: the run's health/classes tag)" },
    { "divergence.ratio", 3, "divergence: the smoothed loss ends above this many times its minimum and above its start" },
    { "spike.factor", 3, "loss spike: a point above this many times the mean of the spike.window points before it" },
    { "spike.window", 10, "loss spike: points in the moving mean (and to recover in)" },
    { "spike.min_rise", 0.1, "loss spike: the rise must also exceed this fraction of the starting loss" },
    { "plateau.window", 20, "plateau: points averaged at the start and at the end" },
    { "plateau.min_drop", 0.05, "plateau: the loss fell by less than this fraction from start to end" },
    { "oscillation.amplitude", 0.25, "oscillation: a swing counts when it exceeds this fraction of the loss's range" },
    { "oscillation.min_level", 0.1, "oscillation: and this fraction of the mean loss" },
    { "oscillation.swings", 4, "oscillation: swings (reversals) of the smoothed loss that make it" },
    { "overfit.rise", 0.1, "overfitting: the validation loss ends this fraction above its minimum while the training loss falls" },
    { "overfit.min_epochs", 3, "overfitting: validation points needed" },
    { "chance.factor", 1.5, "chance level: accuracy below this many times 1/classes" },
    { "chance.loss_fraction", 0.9, "chance level (no accuracy logged): cross entropy above this fraction of ln(classes)" },
    { "vanishing.ratio", 1e-3, "vanishing gradients: first layer's gradient norm below this fraction of the last's" },
    { "exploding.ratio", 1e3, "exploding gradients: first layer's gradient norm above this many times the last's" },
    { "exploding.growth", 100, "exploding gradients: the global gradient norm grows this many times from start to end" },
    { "lr.high", 0.1, "learning rate too high: the median update-to-weight ratio over layers above this" },
    { "lr.low", 1e-5, "learning rate too low: every layer's median update-to-weight ratio below this" },
    { "starvation.share", 0.2, "loader starvation: the median share of the step spent waiting for data above this" },
    { "starvation.min_ms", 1, "loader starvation: a mean wait below this many milliseconds is only info" },
    { "frozen.min_grad_fraction", 1e-3, "frozen: a never-updated layer with a gradient at least this fraction of the moving layers' (smaller: vanishing)" },
    { "dead_relu.share", 0.9, "dead ReLUs: a ReLU layer's median share of exactly-zero outputs above this" },
    { "saturation.share", 0.3, "saturation: a sigmoid/tanh layer's median share of saturated outputs above this" },
    { "evalmode.epochs", 3, "evaluation mode: validation points identical (or better than training) for this many epochs" },
    { "evalmode.ratio", 0.5, "evaluation mode: validation loss below this fraction of the training loss at every epoch" },
};
#define NP ((int)(sizeof params / sizeof *params))

struct nb_doctor {
    double v[NP];
};

static int param_index(const char *name, size_t len) {
    for (int i = 0; i < NP; i++)
        if (strlen(params[i].name) == len && !strncmp(params[i].name, name, len)) return i;
    return -1;
}

static double P(const nb_doctor *d, const char *name) { return d->v[param_index(name, strlen(name))]; }

nb_doctor *nb_doctor_new(void) {
    nb_doctor *d = calloc(1, sizeof *d);
    if (!d) {
        nb__error("nb_doctor_new: out of memory");
        return NULL;
    }
    for (int i = 0; i < NP; i++) d->v[i] = params[i].def;
    return d;
}

void nb_doctor_free(nb_doctor *d) { free(d); }

int nb_doctor_num_params(void) { return NP; }

const char *nb_doctor_param(int i, double *def, const char **meaning) {
    if (i < 0 || i >= NP) return NULL;
    if (def) *def = params[i].def;
    if (meaning) *meaning = params[i].meaning;
    return params[i].name;
}

int nb_doctor_set(nb_doctor *d, const char *a) {
    if (!d || !a) {
        nb__error("nb_doctor_set: %s is NULL", d ? "assignment" : "doctor");
        return -1;
    }
    const char *eq = strchr(a, '=');
    int i = eq ? param_index(a, (size_t)(eq - a)) : -1;
    if (!eq) {
        nb__error("nb_doctor_set: \"%s\" is not name=value (e.g. plateau.window=20)", a);
        return -1;
    }
    if (i < 0) {
        nb__error("nb_doctor_set: unknown threshold \"%.*s\" (nabla doctor --help lists them)", (int)(eq - a), a);
        return -1;
    }
    char *end;
    double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !isfinite(v) || v < 0) {
        nb__error("nb_doctor_set: %s needs a finite number >= 0, got \"%s\"", params[i].name, eq + 1);
        return -1;
    }
    d->v[i] = v;
    return 0;
}

/* ---- findings and the report ---- */

typedef struct finding {
    nb_doctor_finding f;
    int order; /* the run's index, for a stable ranking */
} finding;

struct nb_doctor_report {
    finding *f;
    int n, cap;
    char **runs;
    int n_runs;
    char *notes;
    bool oom;
};

static char *vfmt(const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int len = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (s) vsnprintf(s, (size_t)len + 1, fmt, ap);
    return s;
}

static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = vfmt(f, ap);
    va_end(ap);
    return s;
}

static void add_note(nb_doctor_report *r, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = vfmt(f, ap);
    va_end(ap);
    if (!s) {
        r->oom = true;
        return;
    }
    size_t old = r->notes ? strlen(r->notes) : 0;
    char *n = realloc(r->notes, old + strlen(s) + 2);
    if (!n) {
        r->oom = true;
        free(s);
        return;
    }
    if (old) n[old++] = '\n';
    strcpy(n + old, s);
    r->notes = n;
    free(s);
}

/* Values downsampled to at most width bucket means (a bucket with a non-finite value stays NaN). */
static int64_t buckets(const double *v, int64_t n, int64_t width, double *out) {
    if (n <= width) {
        memcpy(out, v, sizeof *v * (size_t)n);
        return n;
    }
    for (int64_t b = 0; b < width; b++) {
        int64_t lo = n * b / width, hi = n * (b + 1) / width;
        double s = 0;
        for (int64_t k = lo; k < hi; k++) s += v[k];
        out[b] = s / (double)(hi - lo);
    }
    return width;
}

#define SPARK 40

static char *spark(const double *v, int64_t n) {
    double b[SPARK];
    char buf[SPARK * 4 + 1];
    if (!v || n <= 0) return fmt("%s", "");
    int64_t k = buckets(v, n, SPARK, b);
    return fmt("%s", nb_sparkline(b, k, SPARK, buf, sizeof buf));
}

static void add_finding(nb_doctor_report *r, int order, const char *run, const char *id, nb_doctor_severity sev,
                        int64_t step, const char *tag, const double *sv, int64_t sn, const char *advice,
                        const char *summary_fmt, const char *evidence_fmt, ...) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        finding *f = realloc(r->f, sizeof *f * (size_t)cap);
        if (!f) {
            r->oom = true;
            return;
        }
        r->f = f;
        r->cap = cap;
    }
    va_list ap;
    va_start(ap, evidence_fmt);
    char *evidence = vfmt(evidence_fmt, ap);
    va_end(ap);
    finding *f = &r->f[r->n];
    f->order = order;
    f->f = (nb_doctor_finding){ .run = run, .id = id, .severity = sev, .step = step, .tag = fmt("%s", tag ? tag : ""),
                                .summary = fmt("%s", summary_fmt), .evidence = evidence, .sparkline = spark(sv, sn),
                                .advice = advice };
    if (!f->f.summary || !f->f.evidence || !f->f.sparkline || !f->f.tag) {
        free((char *)f->f.tag);
        free((char *)f->f.summary);
        free((char *)f->f.evidence);
        free((char *)f->f.sparkline);
        r->oom = true;
        return;
    }
    r->n++;
}

/* ---- a run's series by role ---- */

typedef struct ser {
    bool per_epoch; /* counted in epochs, not in the steps of the run's first non-finite value */
    const char *tag;
    const int64_t *step;
    const double *v;
    int64_t n;
} ser;

typedef struct layer {
    const char *name;
    ser grad, weight, ratio, nonfinite;
} layer;

typedef struct run {
    const char *path;
    int order;
    nb_scalar_log *log[2];
    const char *prefix[2];
    int nlogs;
    ser loss_step, loss_epoch, val_loss, acc, val_acc, lr, grad_norm, step_time, data_wait, classes, nonfinite_loss,
        nonfinite_all;
    int rank_loss_step, rank_loss_epoch, rank_val_loss, rank_acc, rank_val_acc, rank_lr;
    layer *layers;
    int n_layers;
    ser *acts[2]; /* health/relu_zero/<layer>, health/saturated/<layer> */
    int n_acts[2], cap_acts[2];
    int64_t first_bad; /* the first step with a non-finite value (INT64_MAX: none) */
} run;

static const char *const c_loss_step[] = { "step/loss", "train/loss", "loss/train", "train_loss", "batch_loss",
                                           "train/batch_loss", "loss", "training_loss", NULL };
static const char *const c_loss_epoch[] = { "epoch/loss", "epoch_loss", "train/epoch_loss", "loss/train_epoch", NULL };
static const char *const c_val_loss[] = { "epoch/val_loss", "validation/epoch_loss", "val_loss", "epoch_val_loss",
                                          "loss/val", "loss/validation", "loss/valid", "loss/test", "val/loss",
                                          "validation/loss", "valid/loss", "test/loss", "validation_loss", NULL };
static const char *const c_acc[] = { "epoch/accuracy", "train/epoch_accuracy", "epoch_accuracy", "accuracy/train",
                                     "train/accuracy", "train/acc", "acc/train", "accuracy", "acc", "train_accuracy", NULL };
static const char *const c_val_acc[] = { "epoch/val_accuracy", "validation/epoch_accuracy", "val_accuracy",
                                         "epoch_val_accuracy", "accuracy/val", "accuracy/validation", "accuracy/valid",
                                         "accuracy/test", "val/accuracy", "val/acc", "acc/val", "acc/test",
                                         "validation/accuracy", "test/accuracy", NULL };
static const char *const c_lr[] = { "step/lr", "lr", "learning_rate", "epoch/learning_rate", "train/epoch_learning_rate",
                                    "epoch_learning_rate", "lr/group0", "lr-adam", "lr-sgd", NULL };

static int rank_of(const char *const *c, const char *lower) {
    for (int i = 0; c[i]; i++)
        if (!strcmp(c[i], lower)) return i;
    return -1;
}

static void take(ser *s, int *best, int rank, const nb_scalar_log *log, int i) {
    if (rank < 0 || (*best >= 0 && rank >= *best)) return;
    *best = rank;
    s->tag = nb_scalar_log_tag(log, i);
    s->n = nb_scalar_log_points(log, i, &s->step, NULL, &s->v);
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static void get(const nb_scalar_log *log, const char *prefix, const char *name, ser *s) {
    char tag[1024];
    snprintf(tag, sizeof tag, "%s%s", prefix, name);
    int i = nb_scalar_log_find(log, tag);
    if (i >= 0) {
        s->tag = nb_scalar_log_tag(log, i);
        s->n = nb_scalar_log_points(log, i, &s->step, NULL, &s->v);
    }
}

/* One pass over the tags: the best-ranked candidate of each role, and the per-layer health series
   (found by hash from each weight-norm tag, so a log of 60,000 tags stays linear). */
static int find_roles(run *r) {
    r->rank_loss_step = r->rank_loss_epoch = r->rank_val_loss = r->rank_acc = r->rank_val_acc = r->rank_lr = -1;
    int cap = 0;
    for (int l = 0; l < r->nlogs; l++) {
        const nb_scalar_log *log = r->log[l];
        int nt = nb_scalar_log_num_tags(log);
        for (int i = 0; i < nt; i++) {
            const char *tag = nb_scalar_log_tag(log, i);
            char lower[600];
            size_t k = (size_t)snprintf(lower, sizeof lower, "%s%s", r->prefix[l], tag);
            if (k >= sizeof lower) continue;
            for (char *c = lower; *c; c++) *c = (char)tolower((unsigned char)*c);
            take(&r->loss_step, &r->rank_loss_step, rank_of(c_loss_step, lower), log, i);
            take(&r->loss_epoch, &r->rank_loss_epoch, rank_of(c_loss_epoch, lower), log, i);
            take(&r->val_loss, &r->rank_val_loss, rank_of(c_val_loss, lower), log, i);
            take(&r->acc, &r->rank_acc, rank_of(c_acc, lower), log, i);
            take(&r->val_acc, &r->rank_val_acc, rank_of(c_val_acc, lower), log, i);
            take(&r->lr, &r->rank_lr, rank_of(c_lr, lower), log, i);
            for (int a = 0; a < 2; a++) {
                if (!starts(tag, a ? "health/saturated/" : "health/relu_zero/")) continue;
                if (r->n_acts[a] == r->cap_acts[a]) {
                    int c2 = r->cap_acts[a] ? 2 * r->cap_acts[a] : 8;
                    ser *ns = realloc(r->acts[a], sizeof *ns * (size_t)c2);
                    if (!ns) return -1;
                    r->acts[a] = ns, r->cap_acts[a] = c2;
                }
                ser *as = &r->acts[a][r->n_acts[a]++];
                memset(as, 0, sizeof *as);
                as->tag = tag;
                as->n = nb_scalar_log_points(log, i, &as->step, NULL, &as->v);
            }
            if (starts(tag, "health/weight_norm/")) {
                if (r->n_layers == cap) {
                    cap = cap ? 2 * cap : 16;
                    layer *ly = realloc(r->layers, sizeof *ly * (size_t)cap);
                    if (!ly) return -1;
                    r->layers = ly;
                }
                layer *ly = &r->layers[r->n_layers++];
                memset(ly, 0, sizeof *ly);
                ly->name = tag + strlen("health/weight_norm/");
                ly->weight.tag = tag;
                ly->weight.n = nb_scalar_log_points(log, i, &ly->weight.step, NULL, &ly->weight.v);
                get(log, "health/grad_norm/", ly->name, &ly->grad);
                get(log, "health/update_ratio/", ly->name, &ly->ratio);
                get(log, "health/nonfinite/", ly->name, &ly->nonfinite);
            }
        }
        get(log, "", "health/grad_norm", &r->grad_norm);
        if (!r->grad_norm.n) get(log, "", "grad_norm/global", &r->grad_norm);
        get(log, "", "step/time", &r->step_time);
        get(log, "", "step/data_wait", &r->data_wait);
        get(log, "", "health/classes", &r->classes);
        get(log, "", "health/nonfinite_loss", &r->nonfinite_loss);
        get(log, "", "health/nonfinite", &r->nonfinite_all);
    }
    return 0;
}

/* The training loss for curve detectors: per step when logged so, else per epoch. */
static const ser *curve_loss(const run *r) {
    if (r->loss_step.n >= 8 || (r->loss_step.n && r->loss_step.n >= r->loss_epoch.n)) return &r->loss_step;
    return r->loss_epoch.n ? &r->loss_epoch : NULL;
}

/* Points of s before the run's first non-finite step. */
static int64_t finite_prefix(const run *r, const ser *s) {
    int64_t n = 0;
    while (n < s->n && (s->per_epoch || s->step[n] < r->first_bad) && isfinite(s->v[n])) n++;
    return n;
}

static double mean(const double *v, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    return n ? s / (double)n : NAN;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of the finite values of s before the run's first non-finite step (NAN: none). */
static double median(const run *r, const ser *s) {
    double *t = malloc(sizeof *t * (size_t)(s->n ? s->n : 1));
    if (!t) return NAN;
    int64_t k = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (s->step[i] < r->first_bad && isfinite(s->v[i])) t[k++] = s->v[i];
    qsort(t, (size_t)k, sizeof *t, cmp_d);
    double m = k ? (k % 2 ? t[k / 2] : 0.5 * (t[k / 2 - 1] + t[k / 2])) : NAN;
    free(t);
    return m;
}

/* The value of s at step (the last point at or before it; the first point when none is). */
static double value_at(const ser *s, int64_t step) {
    double v = s->n ? s->v[0] : NAN;
    for (int64_t i = 0; i < s->n && s->step[i] <= step; i++) v = s->v[i];
    return v;
}

typedef struct ctx {
    const nb_doctor *d;
    nb_doctor_report *rep;
    run *r;
} ctx;

#define FIND(id, sev, step, tag, sv, sn, advice, summary, ...) \
    add_finding(c->rep, c->r->order, c->r->path, id, sev, step, tag, sv, sn, advice, summary, __VA_ARGS__)

/* ---- the detectors ---- */

static const char *adv_nonfinite = "lower the learning rate, clip gradients (nb_clip_grad_norm), and check the data and "
                                   "the loss for NaN/Inf, log(0) and division by zero";
static const char *adv_divergence = "lower the learning rate (by 3-10x), add warm-up or gradient clipping";
static const char *adv_spike = "lower the learning rate or clip gradients; look for bad batches at the spike's step";
static const char *adv_plateau = "raise the learning rate (nabla lr-find will suggest one), check that the optimizer "
                                 "holds the parameters, and normalize the inputs";
static const char *adv_osc = "lower the learning rate or the momentum (e.g. 0.9), or use Adam";
static const char *adv_overfit = "use the best epoch's checkpoint, stop early, and add regularization (weight decay, "
                                 "dropout, augmentation) or more data";
static const char *adv_chance = "check that labels match their inputs (not shuffled apart), that the loss fits the "
                                "task, and that the model can learn (learning rate, depth, gradients)";
static const char *adv_vanish = "use ReLU-family activations instead of sigmoid/tanh, normalization layers, residual "
                                "connections, or He/Xavier initialization";
static const char *adv_explode = "clip gradients, lower the learning rate, add normalization layers";
static const char *adv_lr_high = "lower the learning rate: update-to-weight ratios near 1e-3 train well";
static const char *adv_lr_low = "raise the learning rate: update-to-weight ratios near 1e-3 train well";
static const char *adv_starve = "use more loader workers (--workers, num_workers), prefetch, cache decoded data, or "
                                "read from a faster disk";
static const char *adv_frozen = "if not meant: check requires_grad, that the optimizer holds these parameters, and "
                                "that their group's learning rate is not 0";
static const char *adv_dead = "lower the learning rate, use LeakyReLU/GELU, check the initialization and biases, "
                              "normalize the inputs";
static const char *adv_sat = "scale the initialization down (Xavier/Glorot), normalize inputs and pre-activations, or "
                             "use ReLU-family activations";
static const char *adv_eval = "evaluate the model being trained (not a stale copy), in evaluation mode, on held-out "
                              "data that does not overlap the training set";
static const char *adv_noloss = "log the loss (nabla train does; nb_model_fit with a tensorboard writer; "
                                "SummaryWriter.add_scalar(\"Loss/train\", ...) in PyTorch)";

static void d_nonfinite(ctx *c) {
    run *r = c->r;
    if (r->first_bad == INT64_MAX) return;
    const ser *loss = curve_loss(r);
    const char *first_layer = NULL;
    double count = 0;
    for (int i = 0; i < r->n_layers && !first_layer; i++)
        for (int64_t k = 0; k < r->layers[i].nonfinite.n; k++)
            if (r->layers[i].nonfinite.step[k] == r->first_bad && r->layers[i].nonfinite.v[k] > 0) {
                first_layer = r->layers[i].name;
                count = r->layers[i].nonfinite.v[k];
                break;
            }
    double before = NAN, at = NAN;
    int64_t before_step = -1;
    if (loss)
        for (int64_t k = 0; k < loss->n; k++) {
            if (loss->step[k] < r->first_bad) before = loss->v[k], before_step = loss->step[k];
            else {
                at = loss->v[k];
                break;
            }
        }
    char lay[600] = "";
    if (first_layer) snprintf(lay, sizeof lay, "; first layer with NaN/Inf: %s (%.0f values)", first_layer, count);
    else if (r->n_layers) snprintf(lay, sizeof lay, "; no layer's gradients or weights were non-finite at that step");
    int64_t n = loss ? finite_prefix(r, loss) : 0;
    char summary[700];
    snprintf(summary, sizeof summary, "non-finite values from step %lld%s%s", (long long)r->first_bad,
             first_layer ? " in " : "", first_layer ? first_layer : "");
    FIND("nonfinite", NB_DOCTOR_FAILURE, r->first_bad, loss ? loss->tag : "health/nonfinite", loss ? loss->v : NULL,
         loss ? (n < loss->n ? n + 1 : n) : 0, adv_nonfinite, summary, "loss %.6g at step %lld, then %s at step %lld%s",
         before, (long long)before_step, isnan(at) ? "NaN" : at > 0 ? "Inf" : at < 0 ? "-Inf" : "finite", (long long)r->first_bad, lay);
}

static void d_divergence(ctx *c) {
    const ser *s = curve_loss(c->r);
    if (!s) return;
    int64_t n = finite_prefix(c->r, s);
    if (n < 6) return;
    double b[SPARK];
    int64_t k = buckets(s->v, n, n >= 3 * SPARK ? SPARK : n / 3 > 2 ? n / 3 : 2, b);
    double lo = INFINITY;
    int64_t lo_i = 0;
    for (int64_t i = 0; i < k; i++)
        if (b[i] < lo) lo = b[i], lo_i = i;
    double ratio = P(c->d, "divergence.ratio");
    if (!(b[k - 1] > ratio * lo && b[k - 1] > b[0])) return;
    int64_t start = n * (lo_i + 1) / k, at = s->step[n - 1];
    for (int64_t i = start; i < n; i++)
        if (s->v[i] > ratio * lo) {
            at = s->step[i];
            break;
        }
    FIND("divergence", NB_DOCTOR_FAILURE, at, s->tag, s->v, n, adv_divergence, "the loss diverges",
         "smoothed loss %.4g at the start, %.4g at its lowest, %.4g at the end (%.3gx the lowest; rule: > %g x and above "
         "the start)", b[0], lo, b[k - 1], b[k - 1] / lo, ratio);
}

static void d_spikes(ctx *c) {
    const ser *s = curve_loss(c->r);
    if (!s) return;
    int64_t n = finite_prefix(c->r, s);
    int64_t w = (int64_t)P(c->d, "spike.window");
    if (w < 1) w = 1;
    if (n < w + 2) return;
    double factor = P(c->d, "spike.factor"), base = mean(s->v, w) * P(c->d, "spike.min_rise");
    int64_t count = 0, unrecovered = 0, first = -1;
    double worst = 0;
    for (int64_t i = w; i < n; i++) {
        double m = mean(s->v + i - w, w);
        if (!(s->v[i] > factor * m && s->v[i] - m > base)) continue;
        count++;
        if (first < 0) first = s->step[i];
        if (s->v[i] / m > worst) worst = s->v[i] / m;
        bool back = false;
        for (int64_t j = i + 1; j < n && j <= i + 2 * w && !back; j++) back = s->v[j] < 1.5 * m;
        if (!back) unrecovered++;
        i += w; /* one spike, not each of its points */
    }
    if (!count) return;
    FIND("loss_spike", unrecovered ? NB_DOCTOR_WARNING : NB_DOCTOR_INFO, first, s->tag, s->v, n, adv_spike,
         unrecovered ? "loss spikes that did not recover" : "loss spikes (recovered)",
         "%lld spike(s) above %g x the mean of the %lld points before, the first at step %lld, the largest %.1fx; %lld "
         "not back under 1.5x within %lld points", (long long)count, factor, (long long)w, (long long)first, worst,
         (long long)unrecovered, (long long)(2 * w));
}

static void d_plateau(ctx *c) {
    const ser *s = curve_loss(c->r);
    if (!s) return;
    int64_t n = finite_prefix(c->r, s);
    int64_t w = (int64_t)P(c->d, "plateau.window");
    if (w > n / 2) w = n / 2;
    if (w < 2) return;
    double a = mean(s->v, w), z = mean(s->v + n - w, w), drop = (a - z) / fabs(a);
    double min_drop = P(c->d, "plateau.min_drop");
    if (!(fabs(drop) < min_drop)) return;
    FIND("plateau", NB_DOCTOR_WARNING, s->step[0], s->tag, s->v, n, adv_plateau, "the loss does not fall",
         "mean of the first %lld points %.4g, of the last %lld %.4g: %+.1f%% (rule: |change| < %g%%)", (long long)w, a,
         (long long)w, z, -100 * drop, 100 * min_drop);
}

static void d_oscillation(ctx *c) {
    const ser *s = curve_loss(c->r);
    if (!s) return;
    int64_t n = finite_prefix(c->r, s);
    if (n < 8) return;
    double b[SPARK];
    int64_t k = buckets(s->v, n, n >= 2 * SPARK ? SPARK : n / 2, b);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < k; i++) lo = fmin(lo, b[i]), hi = fmax(hi, b[i]);
    double h = fmax(P(c->d, "oscillation.amplitude") * (hi - lo), P(c->d, "oscillation.min_level") * fabs(mean(b, k)));
    /* zigzag: a reversal counts once the move from the last extreme exceeds h */
    int dir = 0, swings = 0;
    int64_t first = -1;
    double ext = b[0], mx = b[0], mn = b[0];
    for (int64_t i = 1; i < k; i++) {
        if (dir == 0) { /* no direction yet: the first move larger than h sets it */
            mx = fmax(mx, b[i]), mn = fmin(mn, b[i]);
            if (mx - b[i] > h) dir = -1, ext = b[i];
            else if (b[i] - mn > h) dir = 1, ext = b[i];
        } else if (dir > 0 ? b[i] > ext : b[i] < ext) {
            ext = b[i];
        } else if (fabs(b[i] - ext) > h) {
            swings++;
            if (first < 0) first = s->step[n * i / k];
            dir = -dir, ext = b[i];
        }
    }
    double need = P(c->d, "oscillation.swings");
    if (swings < need) return;
    FIND("oscillation", NB_DOCTOR_WARNING, first, s->tag, b, k, adv_osc, "the loss oscillates",
         "%d swings larger than %.4g in the smoothed loss (range %.4g to %.4g; rule: >= %g swings)", swings, h, lo, hi,
         need);
}

static void d_overfit(ctx *c) {
    run *r = c->r;
    const ser *v = &r->val_loss, *t = r->loss_epoch.n ? &r->loss_epoch : curve_loss(r);
    int64_t n = finite_prefix(r, v);
    if (!t || n < (int64_t)P(c->d, "overfit.min_epochs")) return;
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v->v[i] < v->v[b]) b = i;
    double last = v->v[n - 1], rise = P(c->d, "overfit.rise");
    double t_best = value_at(t, v->step[b]), t_last = value_at(t, v->step[n - 1]);
    if (!(b < n - 1 && last > (1 + rise) * v->v[b] && t_last < t_best)) return;
    FIND("overfitting", NB_DOCTOR_WARNING, v->step[b], v->tag, v->v, n, adv_overfit,
         "validation loss rises while training loss falls (overfitting)",
         "validation loss lowest %.4g at step %lld (the best checkpoint), %.4g at the end (%+.0f%%); training loss %.4g "
         "-> %.4g", v->v[b], (long long)v->step[b], last, 100 * (last / v->v[b] - 1), t_best, t_last);
}

static void d_chance(ctx *c) {
    run *r = c->r;
    double classes = P(c->d, "classes");
    if (!(classes >= 2) && r->classes.n) classes = r->classes.v[r->classes.n - 1];
    if (!(classes >= 2)) {
        if (r->acc.n || r->val_acc.n)
            add_note(c->rep, "%s: chance-level check skipped: the number of classes is not logged (--set classes=K)",
                     r->path);
        return;
    }
    const ser *a = r->val_acc.n ? &r->val_acc : r->acc.n ? &r->acc : NULL;
    double factor = P(c->d, "chance.factor");
    if (a) {
        int64_t n = a->n, k = n < 3 ? n : 3;
        double last = mean(a->v + n - k, k), chance = 1 / classes;
        if (!(last < factor * chance)) return;
        FIND("chance_level", NB_DOCTOR_FAILURE, a->step[0], a->tag, a->v, n, adv_chance,
             "accuracy stays at chance level (underfitting)",
             "%s %.4f over the last %lld points; chance with %.0f classes is %.4f (rule: < %g x chance)", a->tag, last,
             (long long)k, classes, chance, factor);
        return;
    }
    const ser *l = r->loss_epoch.n ? &r->loss_epoch : curve_loss(r);
    if (!l) return;
    int64_t n = finite_prefix(r, l), k = n < 3 ? n : 3;
    if (!n) return;
    double last = mean(l->v + n - k, k), ce = log(classes), frac = P(c->d, "chance.loss_fraction");
    if (!(last > frac * ce)) return;
    FIND("chance_level", NB_DOCTOR_FAILURE, l->step[0], l->tag, l->v, n, adv_chance,
         "the loss stays at chance level (underfitting)",
         "loss %.4g over the last %lld points; cross entropy at chance with %.0f classes is ln(%.0f) = %.4f (rule: > %g x)",
         last, (long long)k, classes, classes, ce, frac);
}

/* The layers whose gradient norms compare: the weights when there are two or more, else all. */
static int grad_layers(const run *r, int *idx) {
    int k = 0;
    for (int i = 0; i < r->n_layers; i++) {
        size_t len = strlen(r->layers[i].name);
        if (r->layers[i].grad.n && len >= 6 && !strcmp(r->layers[i].name + len - 6, "weight")) idx[k++] = i;
    }
    if (k >= 2) return k;
    k = 0;
    for (int i = 0; i < r->n_layers; i++)
        if (r->layers[i].grad.n) idx[k++] = i;
    return k;
}

static void d_gradients(ctx *c) {
    run *r = c->r;
    int *idx = malloc(sizeof *idx * (size_t)(r->n_layers ? r->n_layers : 1));
    double *med = malloc(sizeof *med * (size_t)(r->n_layers ? r->n_layers : 1));
    if (!idx || !med) {
        free(idx), free(med);
        c->rep->oom = true;
        return;
    }
    int k = grad_layers(r, idx);
    for (int i = 0; i < k; i++) med[i] = median(r, &r->layers[idx[i]].grad);
    if (k >= 2 && med[k - 1] > 0 && isfinite(med[0])) {
        double ratio = med[0] / med[k - 1];
        double *lg = malloc(sizeof *lg * (size_t)k);
        for (int i = 0; lg && i < k; i++) lg[i] = log10(med[i] > 0 ? med[i] : 1e-30);
        const layer *a = &r->layers[idx[0]], *z = &r->layers[idx[k - 1]];
        int64_t at = a->grad.n ? a->grad.step[0] : -1;
        if (ratio < P(c->d, "vanishing.ratio"))
            FIND("vanishing_gradients", NB_DOCTOR_WARNING, at, a->grad.tag, lg, lg ? k : 0, adv_vanish,
                 "gradients vanish toward the input",
                 "median gradient norm %.3g in %s (first), %.3g in %s (last): ratio %.2g (rule: < %g); the sparkline is "
                 "log10 of each layer's median, input to output", med[0], a->name, med[k - 1], z->name, ratio,
                 P(c->d, "vanishing.ratio"));
        else if (ratio > P(c->d, "exploding.ratio"))
            FIND("exploding_gradients", NB_DOCTOR_WARNING, at, a->grad.tag, lg, lg ? k : 0, adv_explode,
                 "gradients explode toward the input",
                 "median gradient norm %.3g in %s (first), %.3g in %s (last): ratio %.2g (rule: > %g)", med[0], a->name,
                 med[k - 1], z->name, ratio, P(c->d, "exploding.ratio"));
        free(lg);
    }
    free(idx), free(med);
    const ser *g = &r->grad_norm;
    int64_t n = finite_prefix(r, g);
    if (n >= 8) {
        int64_t q = n / 4;
        double a = mean(g->v, q), z = mean(g->v + n - q, q), growth = P(c->d, "exploding.growth");
        if (a > 0 && z > growth * a)
            FIND("exploding_gradients", NB_DOCTOR_WARNING, g->step[n - q], g->tag, g->v, n, adv_explode,
                 "the gradient norm grows without bound", "mean gradient norm %.4g over the first quarter, %.4g over the "
                 "last (%.0fx; rule: > %g x)", a, z, z / a, growth);
    }
}

static void d_lr(ctx *c) {
    run *r = c->r;
    double *med = malloc(sizeof *med * (size_t)(r->n_layers ? r->n_layers : 1));
    if (!med) return;
    int k = 0;
    const layer *top = NULL;
    double hi = -1;
    for (int i = 0; i < r->n_layers; i++) {
        if (!r->layers[i].ratio.n) continue;
        double m = median(r, &r->layers[i].ratio);
        if (!(m > 0)) continue; /* frozen layers tell nothing of the learning rate */
        med[k++] = m;
        if (m > hi) hi = m, top = &r->layers[i];
    }
    if (k) {
        qsort(med, (size_t)k, sizeof *med, cmp_d);
        double mid = k % 2 ? med[k / 2] : 0.5 * (med[k / 2 - 1] + med[k / 2]);
        double lr_now = r->lr.n ? r->lr.v[r->lr.n - 1] : NAN;
        char lr_text[64] = "";
        if (isfinite(lr_now)) snprintf(lr_text, sizeof lr_text, "; learning rate %g", lr_now);
        if (mid > P(c->d, "lr.high"))
            FIND("lr_too_high", NB_DOCTOR_WARNING, -1, top->ratio.tag, med, k, adv_lr_high, "the learning rate is too high",
                 "median update-to-weight ratio over %d layers %.3g (rule: > %g; about 1e-3 is healthy)%s", k, mid,
                 P(c->d, "lr.high"), lr_text);
        else if (hi < P(c->d, "lr.low"))
            FIND("lr_too_low", NB_DOCTOR_WARNING, -1, top->ratio.tag, med, k, adv_lr_low, "the learning rate is too low",
                 "the largest layer median update-to-weight ratio is %.3g in %s (rule: every layer < %g; about 1e-3 is "
                 "healthy)%s", hi, top->name, P(c->d, "lr.low"), lr_text);
    }
    free(med);
}

static void d_starvation(ctx *c) {
    run *r = c->r;
    const ser *w = &r->data_wait, *t = &r->step_time;
    int64_t n = w->n < t->n ? w->n : t->n;
    double *share = malloc(sizeof *share * (size_t)(n ? n : 1));
    if (!share) return;
    /* the median share: one point where the machine stalled the loader is no starvation */
    double sw = 0, st = 0, limit = P(c->d, "starvation.share");
    int64_t k = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(w->v[i]) || !(t->v[i] > 0)) continue;
        share[k++] = w->v[i] / t->v[i];
        sw += w->v[i], st += t->v[i];
        if (first < 0 && w->v[i] / t->v[i] > limit) first = w->step[i];
    }
    qsort(share, (size_t)k, sizeof *share, cmp_d);
    double med = k ? share[k / 2] : 0;
    free(share);
    if (!(med > limit)) return;
    /* a wait of a fraction of a millisecond is a tiny model's, not worth a loader worker: info */
    bool small = 1e3 * sw / (double)k < P(c->d, "starvation.min_ms");
    FIND("loader_starvation", small ? NB_DOCTOR_INFO : NB_DOCTOR_WARNING, first, w->tag, w->v, w->n, adv_starve,
         "training waits for data (loader starvation)",
         "waiting %.3g ms of each %.3g ms step on average; median share %.0f%% (rule: > %.0f%%)", 1e3 * sw / (double)k,
         1e3 * st / (double)k, 100 * med, 100 * limit);
}

static void d_frozen(ctx *c) {
    run *r = c->r;
    double moving = NAN;
    double *g = malloc(sizeof *g * (size_t)(r->n_layers ? r->n_layers : 1));
    bool *still = calloc((size_t)(r->n_layers ? r->n_layers : 1), sizeof *still);
    if (!g || !still) {
        free(g), free(still);
        return;
    }
    int km = 0, kf = 0;
    for (int i = 0; i < r->n_layers; i++) {
        const ser *s = &r->layers[i].ratio;
        int64_t n = finite_prefix(r, s);
        if (!n) continue;
        bool zero = true;
        for (int64_t k = 0; k < n && zero; k++) zero = s->v[k] == 0;
        still[i] = zero;
        if (!zero) {
            double m = median(r, &r->layers[i].grad);
            if (isfinite(m)) g[km++] = m;
        }
    }
    if (km) {
        qsort(g, (size_t)km, sizeof *g, cmp_d);
        moving = g[km / 2];
    }
    char names[1024] = "";
    size_t len = 0;
    const char *tag = NULL;
    int64_t step = -1;
    for (int i = 0; i < r->n_layers && km; i++) {
        if (!still[i]) continue;
        double m = r->layers[i].grad.n ? median(r, &r->layers[i].grad) : 0;
        /* a tiny but nonzero gradient is vanishing, not frozen */
        if (m > 0 && m < P(c->d, "frozen.min_grad_fraction") * moving) continue;
        if (!tag) tag = r->layers[i].ratio.tag, step = r->layers[i].ratio.step[0];
        kf++;
        if (len < sizeof names - 200) len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", r->layers[i].name);
    }
    free(g), free(still);
    if (!kf) return;
    FIND("frozen_parameters", NB_DOCTOR_WARNING, step, tag, NULL, 0, adv_frozen, "parameters never change",
         "%d parameter(s) with an update-to-weight ratio of exactly 0 at every logged step while others move: %s", kf,
         names);
}

static void d_evalmode(ctx *c) {
    run *r = c->r;
    const ser *v = &r->val_loss, *t = r->loss_epoch.n ? &r->loss_epoch : curve_loss(r);
    int64_t need = (int64_t)P(c->d, "evalmode.epochs");
    if (need < 2) need = 2;
    if (v->n < need || !t) return;
    int64_t run_len = 1, best = 1, at = v->step[0];
    for (int64_t i = 1; i < v->n; i++) {
        run_len = fabs(v->v[i] - v->v[i - 1]) <= 1e-7 * fabs(v->v[i]) ? run_len + 1 : 1;
        if (run_len > best) best = run_len, at = v->step[i - run_len + 1];
    }
    bool train_moves = false;
    for (int64_t i = 1; i < t->n && !train_moves; i++) train_moves = t->v[i] != t->v[0];
    if (best >= need && train_moves) {
        FIND("eval_mode", NB_DOCTOR_WARNING, at, v->tag, v->v, v->n, adv_eval, "validation results never change",
             "%s identical (%.6g) at %lld validations in a row while the training loss moves", v->tag, v->v[v->n - 1],
             (long long)best);
        return;
    }
    double ratio = P(c->d, "evalmode.ratio");
    bool better = true;
    for (int64_t i = 0; i < v->n && better; i++) better = v->v[i] < ratio * value_at(t, v->step[i]);
    if (better)
        FIND("eval_mode", NB_DOCTOR_WARNING, v->step[0], v->tag, v->v, v->n, adv_eval,
             "validation is far better than training from the start",
             "%s below %g x the training loss at every one of %lld validations, from the first (%.4g vs %.4g)", v->tag,
             ratio, (long long)v->n, v->v[0], value_at(t, v->step[0]));
}

/* dead_relu (a = 0) and saturation (a = 1): layers whose median share is above the threshold. */
static void activations(ctx *c, int a) {
    run *r = c->r;
    double limit = P(c->d, a ? "saturation.share" : "dead_relu.share");
    char names[1024] = "";
    size_t len = 0;
    int k = 0;
    const ser *worst = NULL;
    double worst_m = -1;
    double *med = malloc(sizeof *med * (size_t)(r->n_acts[a] ? r->n_acts[a] : 1));
    if (!med) return;
    for (int i = 0; i < r->n_acts[a]; i++) {
        const ser *s = &r->acts[a][i];
        double m = median(r, s);
        med[i] = m;
        if (!(m > limit)) continue;
        k++;
        if (m > worst_m) worst_m = m, worst = s;
        const char *layer = s->tag + strlen(a ? "health/saturated/" : "health/relu_zero/");
        if (len < sizeof names - 200)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s (%.0f%%)", len ? ", " : "", layer, 100 * m);
    }
    if (k && a == 0)
        FIND("dead_relu", NB_DOCTOR_WARNING, worst->step[0], worst->tag, med, r->n_acts[a],
             adv_dead, "ReLU units are dead (always zero)",
             "%d ReLU layer(s) with a median share of exactly-zero outputs above %.0f%%: %s; the sparkline is each "
             "ReLU layer's median share", k, 100 * limit, names);
    else if (k)
        FIND("saturation", NB_DOCTOR_WARNING, worst->step[0], worst->tag, med, r->n_acts[a],
             adv_sat, "sigmoid/tanh outputs are saturated",
             "%d layer(s) with a median share of saturated outputs above %.0f%%: %s; the sparkline is each layer's "
             "median share", k, 100 * limit, names);
    free(med);
}

static void d_dead_relu(ctx *c) { activations(c, 0); }
static void d_saturation(ctx *c) { activations(c, 1); }

static const struct detector {
    const char *id;
    void (*fn)(ctx *c);
    const char *rule;
    const char **advice;
} detectors[] = {
    { "nonfinite", d_nonfinite, "a NaN/Inf loss, gradient or weight: the first step and the first layer", &adv_nonfinite },
    { "divergence", d_divergence, "the smoothed loss ends above divergence.ratio x its minimum and above its start", &adv_divergence },
    { "loss_spike", d_spikes, "a point above spike.factor x the mean of the spike.window before it (warning unless it recovers)", &adv_spike },
    { "plateau", d_plateau, "the mean of the last plateau.window points is within plateau.min_drop of the first's", &adv_plateau },
    { "oscillation", d_oscillation, "oscillation.swings or more reversals of the smoothed loss, each above oscillation.amplitude of its range", &adv_osc },
    { "overfitting", d_overfit, "validation loss ends overfit.rise above its minimum while the training loss keeps falling", &adv_overfit },
    { "chance_level", d_chance, "accuracy below chance.factor / classes (or cross entropy above chance.loss_fraction x ln classes)", &adv_chance },
    { "vanishing_gradients", d_gradients, "first layer's median gradient norm below vanishing.ratio x the last's", &adv_vanish },
    { "exploding_gradients", NULL, "first/last gradient norm ratio above exploding.ratio, or global norm growth above exploding.growth", &adv_explode },
    { "lr_too_high", d_lr, "median update-to-weight ratio over layers above lr.high", &adv_lr_high },
    { "lr_too_low", NULL, "every layer's median update-to-weight ratio below lr.low", &adv_lr_low },
    { "loader_starvation", d_starvation, "the median share of data wait in the step time above starvation.share (info under starvation.min_ms)", &adv_starve },
    { "frozen_parameters", d_frozen, "update-to-weight ratio exactly 0 at every logged step (with a gradient that is not vanishing)", &adv_frozen },
    { "dead_relu", d_dead_relu, "a ReLU layer whose median share of exactly-zero outputs is above dead_relu.share", &adv_dead },
    { "saturation", d_saturation, "a sigmoid/tanh layer whose median share of saturated outputs is above saturation.share", &adv_sat },
    { "eval_mode", d_evalmode, "validation identical for evalmode.epochs validations, or below evalmode.ratio x training loss at every one", &adv_eval },
    { "no_loss", NULL, "no training or validation loss series among the tags", &adv_noloss },
};
#define ND ((int)(sizeof detectors / sizeof *detectors))

int nb_doctor_num_detectors(void) { return ND; }

const char *nb_doctor_detector(int i, const char **rule, const char **advice) {
    if (i < 0 || i >= ND) return NULL;
    if (rule) *rule = detectors[i].rule;
    if (advice) *advice = *detectors[i].advice;
    return detectors[i].id;
}

/* ---- reading runs ---- */

static int64_t first_nonfinite(const run *r) {
    int64_t first = INT64_MAX;
    const ser *loss = curve_loss(r);
    /* validation counts when the loss is per epoch too: nabla logs it per epoch beside per-step signals */
    const ser *all[] = { loss, loss == &r->loss_epoch ? &r->val_loss : NULL, &r->grad_norm };
    for (int i = 0; i < 3; i++)
        if (all[i])
            for (int64_t k = 0; k < all[i]->n; k++)
                if (!isfinite(all[i]->v[k])) {
                    if (all[i]->step[k] < first) first = all[i]->step[k];
                    break;
                }
    const ser *flags[] = { &r->nonfinite_loss, &r->nonfinite_all };
    for (int i = 0; i < 2; i++)
        for (int64_t k = 0; k < flags[i]->n; k++)
            if (flags[i]->v[k] != 0) {
                if (flags[i]->step[k] < first) first = flags[i]->step[k];
                break;
            }
    for (int i = 0; i < r->n_layers; i++)
        for (int64_t k = 0; k < r->layers[i].nonfinite.n; k++)
            if (r->layers[i].nonfinite.v[k] > 0) {
                if (r->layers[i].nonfinite.step[k] < first) first = r->layers[i].nonfinite.step[k];
                break;
            }
    return first;
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A run's logs: the path itself, or its train/ and validation/ subfolders (Keras's layout). */
static int open_run(run *r, const char *path) {
    uint64_t errors0 = nb__error_count();
    r->log[0] = nb_scalar_log_read(path);
    r->prefix[0] = "";
    if (r->log[0]) {
        r->nlogs = 1;
        return 0;
    }
    static const char *const subs[] = { "train", "validation" };
    char sub[4096];
    for (int i = 0; i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/%s", path, subs[i]);
        if (!is_dir(sub)) continue;
        nb_scalar_log *l = nb_scalar_log_read(sub);
        if (!l) return -1;
        r->log[r->nlogs] = l;
        r->prefix[r->nlogs++] = i ? "validation/" : "train/";
    }
    if (r->nlogs) {
        if (nb__error_count() != errors0) nb_error_clear(); /* the first attempt's error is not this run's */
        return 0;
    }
    if (!nb__has_error()) nb__error("nb_doctor_diagnose: cannot read '%s'", path);
    return -1;
}

static int cmp_finding(const void *a, const void *b) {
    const finding *x = a, *y = b;
    if (x->f.severity != y->f.severity) return x->f.severity > y->f.severity ? -1 : 1;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return x->f.step < y->f.step ? -1 : x->f.step > y->f.step;
}

nb_doctor_report *nb_doctor_diagnose(const nb_doctor *d, const char *const *paths, int n) {
    if (!d || !paths || n < 1) {
        nb__error("nb_doctor_diagnose: %s", !d ? "doctor is NULL" : "no run to diagnose");
        return NULL;
    }
    nb_doctor_report *rep = calloc(1, sizeof *rep);
    if (!rep || !(rep->runs = calloc((size_t)n, sizeof *rep->runs))) {
        free(rep);
        nb__error("nb_doctor_diagnose: out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!paths[i] || !(rep->runs[i] = fmt("%s", paths[i]))) {
            nb__error("nb_doctor_diagnose: %s", paths[i] ? "out of memory" : "a path is NULL");
            nb_doctor_report_free(rep);
            return NULL;
        }
        rep->n_runs++;
    }
    for (int i = 0; i < n; i++) {
        run r;
        memset(&r, 0, sizeof r);
        r.path = rep->runs[i];
        r.order = i;
        if (open_run(&r, r.path) < 0 || find_roles(&r) < 0) {
            if (!nb__has_error()) nb__error("nb_doctor_diagnose: out of memory reading '%s'", r.path);
            for (int l = 0; l < r.nlogs; l++) nb_scalar_log_free(r.log[l]);
            free(r.layers), free(r.acts[0]), free(r.acts[1]);
            nb_doctor_report_free(rep);
            return NULL;
        }
        for (int l = 0; l < r.nlogs; l++) {
            const char *note = nb_scalar_log_note(r.log[l]);
            if (note) add_note(rep, "%s (the findings use what came before)", note);
        }
        r.first_bad = first_nonfinite(&r);
        r.loss_epoch.per_epoch = r.val_loss.per_epoch = r.acc.per_epoch = r.val_acc.per_epoch = true;
        ctx c = { d, rep, &r };
        if (!curve_loss(&r) && !r.val_loss.n) {
            int tags = 0;
            for (int l = 0; l < r.nlogs; l++) tags += nb_scalar_log_num_tags(r.log[l]);
            add_finding(rep, i, r.path, "no_loss", NB_DOCTOR_WARNING, -1, "", NULL, 0, adv_noloss,
                        "nothing to diagnose: no loss series", "%d scalar tags, none a known training or validation "
                        "loss (docs/doctor.md lists the names read)", tags);
        } else {
            if (!r.n_layers)
                add_note(rep, "%s: no per-layer health signals (nb_health): gradient, learning-rate and frozen-parameter "
                              "checks skipped", r.path);
            for (int k = 0; k < ND; k++)
                if (detectors[k].fn) detectors[k].fn(&c);
        }
        for (int l = 0; l < r.nlogs; l++) nb_scalar_log_free(r.log[l]);
        free(r.layers), free(r.acts[0]), free(r.acts[1]);
    }
    if (rep->oom) {
        nb__error("nb_doctor_diagnose: out of memory");
        nb_doctor_report_free(rep);
        return NULL;
    }
    if (rep->n) qsort(rep->f, (size_t)rep->n, sizeof *rep->f, cmp_finding); /* f is NULL when there are none */
    return rep;
}

int nb_doctor_report_count(const nb_doctor_report *r) { return r ? r->n : 0; }

const nb_doctor_finding *nb_doctor_report_finding(const nb_doctor_report *r, int i) {
    return r && i >= 0 && i < r->n ? &r->f[i].f : NULL;
}

int nb_doctor_report_status(const nb_doctor_report *r) {
    int s = 0;
    for (int i = 0; r && i < r->n; i++)
        if ((int)r->f[i].f.severity > s) s = (int)r->f[i].f.severity;
    return s;
}

const char *nb_doctor_report_notes(const nb_doctor_report *r) { return r ? r->notes : NULL; }

static const char *sev_name(nb_doctor_severity s) {
    return s == NB_DOCTOR_FAILURE ? "failure" : s == NB_DOCTOR_WARNING ? "warning" : "info";
}

/* A growing string. */
typedef struct sbuf { char *s; size_t len, cap; bool oom; } sbuf;

static void sb_add(sbuf *b, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *t = vfmt(f, ap);
    va_end(ap);
    if (!t) {
        b->oom = true;
        return;
    }
    size_t k = strlen(t);
    if (b->len + k + 1 > b->cap) {
        size_t cap = (b->cap ? 2 * b->cap : 1024) + k;
        char *s = realloc(b->s, cap);
        if (!s) {
            free(t);
            b->oom = true;
            return;
        }
        b->s = s, b->cap = cap;
    }
    memcpy(b->s + b->len, t, k + 1);
    b->len += k;
    free(t);
}

char *nb_doctor_report_text(const nb_doctor_report *r) {
    if (!r) {
        nb__error("nb_doctor_report_text: report is NULL");
        return NULL;
    }
    sbuf b = { 0 };
    int counts[3] = { 0 };
    for (int i = 0; i < r->n; i++) counts[r->f[i].f.severity]++;
    for (int i = 0; i < r->n; i++) {
        const nb_doctor_finding *f = &r->f[i].f;
        sb_add(&b, "%-7s  %s", f->severity == NB_DOCTOR_FAILURE ? "FAILURE" : f->severity == NB_DOCTOR_WARNING ? "WARNING" : "info",
               f->id);
        if (f->step >= 0) sb_add(&b, " at step %lld", (long long)f->step);
        if (r->n_runs > 1) sb_add(&b, " in %s", f->run);
        sb_add(&b, ": %s\n", f->summary);
        sb_add(&b, "         %s\n", f->evidence);
        if (f->sparkline[0]) sb_add(&b, "         %s  %s\n", f->tag, f->sparkline);
        sb_add(&b, "         try: %s\n", f->advice);
    }
    if (r->notes) {
        const char *p = r->notes;
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t k = e ? (size_t)(e - p) : strlen(p);
            sb_add(&b, "note: %.*s\n", (int)k, p);
            p += k + (e ? 1 : 0);
        }
    }
    static const char *const verdict[] = { "healthy", "warnings", "failures" };
    sb_add(&b, "%d run%s: %d failure%s, %d warning%s, %d info: %s\n", r->n_runs, r->n_runs == 1 ? "" : "s", counts[2],
           counts[2] == 1 ? "" : "s", counts[1], counts[1] == 1 ? "" : "s", counts[0], verdict[nb_doctor_report_status(r)]);
    if (b.oom) {
        free(b.s);
        nb__error("nb_doctor_report_text: out of memory");
        return NULL;
    }
    return b.s;
}

char *nb_doctor_report_json(const nb_doctor_report *r) {
    if (!r) {
        nb__error("nb_doctor_report_json: report is NULL");
        return NULL;
    }
#ifdef NABLA_HAVE_JSON
    json_t *root = json_object(), *runs = json_array(), *fs = json_array(), *notes = json_array();
    for (int i = 0; i < r->n_runs; i++) json_array_append_new(runs, json_string(r->runs[i]));
    for (int i = 0; i < r->n; i++) {
        const nb_doctor_finding *f = &r->f[i].f;
        json_t *o = json_object();
        json_object_set_new(o, "run", json_string(f->run));
        json_object_set_new(o, "id", json_string(f->id));
        json_object_set_new(o, "severity", json_string(sev_name(f->severity)));
        json_object_set_new(o, "step", f->step >= 0 ? json_integer((json_int_t)f->step) : json_null());
        json_object_set_new(o, "tag", json_string(f->tag));
        json_object_set_new(o, "summary", json_string(f->summary));
        json_object_set_new(o, "evidence", json_string(f->evidence));
        json_object_set_new(o, "sparkline", json_string(f->sparkline));
        json_object_set_new(o, "advice", json_string(f->advice));
        json_array_append_new(fs, o);
    }
    for (const char *p = r->notes; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        json_array_append_new(notes, json_stringn(p, k));
        p += k + (e ? 1 : 0);
    }
    static const char *const verdict[] = { "healthy", "warnings", "failures" };
    int status = nb_doctor_report_status(r);
    json_object_set_new(root, "runs", runs);
    json_object_set_new(root, "findings", fs);
    json_object_set_new(root, "notes", notes);
    json_object_set_new(root, "status", json_integer(status));
    json_object_set_new(root, "verdict", json_string(verdict[status]));
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) nb__error("nb_doctor_report_json: out of memory");
    return s;
#else
    (void)sev_name;
    nb__error("nb_doctor_report_json: built without jansson (NABLA_WITH_JSON=OFF)");
    return NULL;
#endif
}

void nb_doctor_report_free(nb_doctor_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free((char *)r->f[i].f.tag);
        free((char *)r->f[i].f.summary);
        free((char *)r->f[i].f.evidence);
        free((char *)r->f[i].f.sparkline);
    }
    free(r->f);
    for (int i = 0; i < r->n_runs; i++) free(r->runs[i]);
    free(r->runs);
    free(r->notes);
    free(r);
}
