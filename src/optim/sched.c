/* Learning-rate schedules in PyTorch's closed forms: step, multi-step, exponential, cosine
   annealing, linear warm-up, one-cycle (with momentum cycling), a C function of the epoch,
   cosine annealing with warm restarts and cyclic rates; a sequence of schedules handing over at
   milestones; and the reduction on a plateau of a metric. */
#include "../core/core_impl.h"
#include "nabla/optim.h"
#include "optim_impl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>


typedef enum {
    S_STEP, S_MULTISTEP, S_EXPONENTIAL, S_COSINE, S_LINEAR, S_ONE_CYCLE, S_LAMBDA, S_WARM_RESTARTS, S_CYCLIC,
    S_SEQUENTIAL, S_PLATEAU
} sched_kind;

struct nb_scheduler {
    sched_kind kind;
    nb_optimizer *opt;
    int last_epoch;
    double *base_lr; /* per group */
    int ngroups;
    int step_size;
    double gamma, eta_min, start_factor, end_factor;
    int t_max, total;
    int *milestones;
    int nmilestones;
    /* one-cycle (max_lr, base_mom, max_mom, cycle_momentum also cyclic's; min_lr also plateau's) */
    double max_lr, initial_lr, min_lr, pct_start, base_mom, max_mom;
    bool linear_anneal, cycle_momentum;
    /* lambda */
    double (*fn)(int epoch, void *ctx);
    void *fn_ctx;
    /* warm restarts: the epoch within the period and the period's length */
    int64_t t_0, t_mult, t_cur, t_i;
    /* cyclic */
    double total_size, step_ratio;
    nb_cyclic_mode mode;
    /* sequential: the children it owns (milestones above) */
    nb_scheduler **children;
    int nchildren;
    /* plateau */
    bool mode_max, threshold_abs;
    double factor, threshold, eps, best;
    int patience, cooldown, num_bad, cooldown_counter;
};

static double anneal(const nb_scheduler *s, double start, double end, double pct) {
    if (s->linear_anneal) return (end - start) * pct + start;
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1);
}

/* Cyclic: where epoch e is in its cycle (0 at the base, 1 at the peak), and the scale of its cycle. */
static double cyclic_position(const nb_scheduler *s, int e, double *scale) {
    double cycle = floor(1 + e / s->total_size), x = 1. + e / s->total_size - cycle;
    *scale = s->mode == NB_CYCLIC_TRIANGULAR ? 1. : s->mode == NB_CYCLIC_TRIANGULAR2 ? 1 / pow(2., cycle - 1) : pow(s->gamma, e);
    return x <= s->step_ratio ? x / s->step_ratio : (x - 1) / (s->step_ratio - 1);
}

static double lr_at(const nb_scheduler *s, double base, int e) {
    switch (s->kind) {
    case S_LAMBDA: return base * s->fn(e, s->fn_ctx);
    case S_WARM_RESTARTS: return s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * (double)s->t_cur / (double)s->t_i)) / 2;
    case S_CYCLIC: {
        double scale, pos = cyclic_position(s, e, &scale);
        return base + (s->max_lr - base) * pos * scale;
    }
    case S_STEP: return base * pow(s->gamma, (double)(e / s->step_size));
    case S_MULTISTEP: {
        int passed = 0;
        for (int i = 0; i < s->nmilestones; i++) passed += s->milestones[i] <= e;
        return base * pow(s->gamma, passed);
    }
    case S_EXPONENTIAL: return base * pow(s->gamma, e);
    case S_COSINE: return s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * (double)e / s->t_max)) / 2;
    case S_LINEAR: {
        int k = e < s->total ? e : s->total;
        return base * (s->start_factor + (s->end_factor - s->start_factor) * (double)k / s->total);
    }
    default: { /* one-cycle: warm up to max_lr, then anneal to min_lr */
        double up_end = s->pct_start * s->total - 1, down_end = s->total - 1;
        if (e <= up_end) return anneal(s, s->initial_lr, s->max_lr, up_end > 0 ? e / up_end : 1);
        return anneal(s, s->max_lr, s->min_lr, (e - up_end) / (down_end - up_end));
    }
    }
}

static double momentum_at(const nb_scheduler *s, int e) {
    double up_end = s->pct_start * s->total - 1, down_end = s->total - 1;
    if (e <= up_end) return anneal(s, s->max_mom, s->base_mom, up_end > 0 ? e / up_end : 1);
    return anneal(s, s->base_mom, s->max_mom, (e - up_end) / (down_end - up_end));
}

/* Sets the learning rates (and a cycled momentum) for s->last_epoch. */
static int apply(nb_scheduler *s) {
    if (s->kind == S_PLATEAU || s->kind == S_SEQUENTIAL) return 0; /* no closed form: their steps set the rates */
    /* as torch: the step after the last one (epoch == total) is allowed, so a loop of total
       optimizer steps may step the schedule after each */
    if (s->kind == S_ONE_CYCLE && s->last_epoch > s->total) {
        nb__error("nb_sched_step: one-cycle schedule stepped %d times, past its %d total steps", s->last_epoch, s->total);
        return -1;
    }
    for (int g = 0; g < s->ngroups; g++) nb_optim_set_group_lr(s->opt, g, lr_at(s, s->base_lr[g], s->last_epoch));
    if (s->kind == S_ONE_CYCLE && s->cycle_momentum) nb__optim_set_momentum(s->opt, momentum_at(s, s->last_epoch));
    if (s->kind == S_CYCLIC && s->cycle_momentum) {
        double scale, pos = cyclic_position(s, s->last_epoch, &scale);
        nb__optim_set_momentum(s->opt, s->max_mom - (s->max_mom - s->base_mom) * pos * scale);
    }
    return 0;
}

static nb_scheduler *make(const char *fn, nb_optimizer *opt, sched_kind kind) {
    if (!opt) {
        if (!nb__has_error()) nb__error("%s: optimizer is NULL", fn);
        return NULL;
    }
    nb_scheduler *s = calloc(1, sizeof *s);
    int n = nb_optim_num_groups(opt);
    if (s) s->base_lr = calloc((size_t)(n ? n : 1), sizeof(double));
    if (!s || !s->base_lr) {
        free(s);
        nb__error("%s: out of memory", fn);
        return NULL;
    }
    s->kind = kind;
    s->opt = opt;
    s->ngroups = n;
    for (int g = 0; g < n; g++) s->base_lr[g] = nb_optim_get_lr(opt, g);
    return s;
}

/* Sets the epoch-0 learning rates, as torch's constructors do. */
static nb_scheduler *start(nb_scheduler *s) {
    if (!s) return NULL;
    s->last_epoch = 0;
    if (apply(s) < 0) {
        nb_sched_free(s);
        return NULL;
    }
    return s;
}

nb_scheduler *nb_sched_step_lr(nb_optimizer *opt, int step_size, double gamma) {
    if (step_size <= 0) {
        nb__error("nb_sched_step_lr: step_size must be positive, got %d", step_size);
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_step_lr", opt, S_STEP);
    if (s) {
        s->step_size = step_size;
        s->gamma = gamma == 0 ? 0.1 : gamma;
    }
    return start(s);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

nb_scheduler *nb_sched_multistep(nb_optimizer *opt, const int *milestones, int n, double gamma) {
    if (n < 0 || (n > 0 && !milestones)) {
        nb__error("nb_sched_multistep: invalid milestones");
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_multistep", opt, S_MULTISTEP);
    if (!s) return NULL;
    s->milestones = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!s->milestones) {
        nb_sched_free(s);
        nb__error("nb_sched_multistep: out of memory");
        return NULL;
    }
    if (n) memcpy(s->milestones, milestones, sizeof(int) * (size_t)n);
    qsort(s->milestones, (size_t)n, sizeof(int), cmp_int);
    s->nmilestones = n;
    s->gamma = gamma == 0 ? 0.1 : gamma;
    return start(s);
}

nb_scheduler *nb_sched_exponential(nb_optimizer *opt, double gamma) {
    if (!(gamma > 0)) {
        nb__error("nb_sched_exponential: gamma must be positive, got %g", gamma);
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_exponential", opt, S_EXPONENTIAL);
    if (s) s->gamma = gamma;
    return start(s);
}

nb_scheduler *nb_sched_cosine(nb_optimizer *opt, int t_max, double eta_min) {
    if (t_max <= 0) {
        nb__error("nb_sched_cosine: t_max must be positive, got %d", t_max);
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_cosine", opt, S_COSINE);
    if (s) {
        s->t_max = t_max;
        s->eta_min = eta_min;
    }
    return start(s);
}

nb_scheduler *nb_sched_linear(nb_optimizer *opt, double start_factor, double end_factor, int total_iters) {
    /* zero means torch's default; NB_ZERO (negative zero) asks for an explicit 0 */
    start_factor = start_factor == 0 && !signbit(start_factor) ? 1.0 / 3 : start_factor;
    end_factor = end_factor == 0 ? (signbit(end_factor) ? 0.0 : 1.0) : end_factor; /* -0.5 stays wrong */
    total_iters = total_iters == 0 ? 5 : total_iters;
    if (!(start_factor > 0 && start_factor <= 1) || !(end_factor >= 0 && end_factor <= 1) || total_iters < 0) {
        nb__error("nb_sched_linear: start_factor must be in (0, 1], end_factor in [0, 1] and total_iters positive "
                  "(got %g, %g, %d)", start_factor, end_factor, total_iters);
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_linear", opt, S_LINEAR);
    if (s) {
        s->start_factor = start_factor;
        s->end_factor = end_factor;
        s->total = total_iters;
    }
    return start(s);
}

nb_scheduler *nb_sched_one_cycle(nb_optimizer *opt, double max_lr, int total_steps, nb_one_cycle_opts o) {
    if (total_steps <= 0 || !(max_lr > 0)) {
        nb__error("nb_sched_one_cycle: max_lr and total_steps must be positive (got %g, %d)", max_lr, total_steps);
        return NULL;
    }
    double pct = o.pct_start == 0 ? 0.3 : o.pct_start;
    if (!(pct > 0 && pct < 1)) {
        nb__error("nb_sched_one_cycle: pct_start must be in (0, 1), got %g", pct);
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_one_cycle", opt, S_ONE_CYCLE);
    if (!s) return NULL;
    s->max_lr = max_lr;
    s->total = total_steps;
    s->pct_start = pct;
    s->initial_lr = max_lr / (o.div_factor == 0 ? 25.0 : o.div_factor);
    s->min_lr = s->initial_lr / (o.final_div_factor == 0 ? 1e4 : o.final_div_factor);
    s->linear_anneal = o.linear_anneal;
    bool has_momentum;
    nb__optim_momentum(opt, &has_momentum);
    s->cycle_momentum = !o.no_cycle_momentum && has_momentum;
    s->base_mom = o.base_momentum == 0 ? 0.85 : o.base_momentum;
    s->max_mom = o.max_momentum == 0 ? 0.95 : o.max_momentum;
    return start(s);
}

nb_scheduler *nb_sched_lambda(nb_optimizer *opt, double (*fn)(int epoch, void *ctx), void *ctx) {
    if (!fn) {
        nb__error("nb_sched_lambda: the function is NULL");
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_lambda", opt, S_LAMBDA);
    if (s) {
        s->fn = fn;
        s->fn_ctx = ctx;
    }
    return start(s);
}

/* Warm restarts: the period and the epoch within it at epoch e, as torch's steps reach them. */
static void warm_restarts_at(nb_scheduler *s, int e) {
    s->t_i = s->t_0;
    s->t_cur = e;
    if (s->t_mult == 1) s->t_cur %= s->t_0;
    while (s->t_cur >= s->t_i) {
        s->t_cur -= s->t_i;
        s->t_i *= s->t_mult; /* grows at least twofold: no overflow before t_cur runs out */
    }
}

nb_scheduler *nb_sched_cosine_warm_restarts(nb_optimizer *opt, int t_0, int t_mult, double eta_min) {
    t_mult = t_mult == 0 ? 1 : t_mult;
    if (t_0 < 1 || t_mult < 1) {
        nb__error("nb_sched_cosine_warm_restarts: T_0 must be a positive integer and T_mult an integer >= 1 "
                  "(got %d and %d)", t_0, t_mult);
        return NULL;
    }
    nb_scheduler *s = make("nb_sched_cosine_warm_restarts", opt, S_WARM_RESTARTS);
    if (s) {
        s->t_0 = t_0;
        s->t_mult = t_mult;
        s->eta_min = eta_min;
        warm_restarts_at(s, 0);
    }
    return start(s);
}

nb_scheduler *nb_sched_cyclic(nb_optimizer *opt, double base_lr, double max_lr, nb_cyclic_opts o) {
    const char *fn = "nb_sched_cyclic";
    int up = o.step_size_up ? o.step_size_up : 2000, down = o.step_size_down ? o.step_size_down : up;
    double gamma = o.gamma == 0 ? 1. : o.gamma;
    if (!(base_lr >= 0) || !(max_lr >= 0) || up < 0 || down < 0 || !(gamma > 0)) {
        nb__error("%s: base_lr and max_lr must be non-negative, the step sizes positive and gamma positive (got %g, %g, "
                  "%d, %d, %g)", fn, base_lr, max_lr, up, down, gamma);
        return NULL;
    }
    if (!nb__enum_ok(fn, "mode", (int)o.mode, NB_CYCLIC_EXP_RANGE + 1, "nb_cyclic_mode",
                     "NB_CYCLIC_TRIANGULAR, NB_CYCLIC_TRIANGULAR2, NB_CYCLIC_EXP_RANGE"))
        return NULL;
    nb_scheduler *s = make(fn, opt, S_CYCLIC);
    if (!s) return NULL;
    for (int g = 0; g < s->ngroups; g++) s->base_lr[g] = base_lr; /* as torch: the cycle starts at base_lr */
    s->max_lr = max_lr;
    s->total_size = (double)up + (double)down;
    s->step_ratio = (double)up / s->total_size;
    s->mode = o.mode;
    s->gamma = gamma;
    /* torch cycles the momentum of optimizers with one ('momentum' in their defaults); here SGD's */
    s->cycle_momentum = !o.no_cycle_momentum && nb__optim_has_sgd_momentum(opt);
    s->base_mom = o.base_momentum == 0 ? 0.8 : o.base_momentum;
    s->max_mom = o.max_momentum == 0 ? 0.9 : o.max_momentum;
    return start(s);
}

nb_scheduler *nb_sched_sequential(nb_optimizer *opt, nb_scheduler *const *scheds, int n, const int *milestones) {
    const char *fn = "nb_sched_sequential";
    bool ok = opt && n >= 1 && scheds && (n == 1 || milestones);
    if (!ok && !nb__has_error())
        nb__error("%s: needs its optimizer, at least one schedule and n - 1 milestones (n %d)", fn, n);
    for (int i = 0; ok && i < n; i++) {
        const nb_scheduler *c = scheds[i];
        if (!c) {
            if (!nb__has_error()) nb__error("%s: schedule %d is NULL", fn, i);
            ok = false;
        } else if (c->opt != opt || c->kind == S_PLATEAU || c->kind == S_SEQUENTIAL) {
            nb__error("%s: schedule %d %s", fn, i, c->opt != opt ? "schedules another optimizer" : "is a plateau or sequential schedule, which cannot be a child");
            ok = false;
        }
        for (int k = 0; ok && k < i; k++)
            if (scheds[k] == c) {
                nb__error("%s: schedules %d and %d are the same", fn, k, i);
                ok = false;
            }
        if (ok && i > 0 && i < n - 1 && milestones[i] <= milestones[i - 1]) {
            nb__error("%s: milestones must increase, got %d after %d", fn, milestones[i], milestones[i - 1]);
            ok = false;
        }
    }
    nb_scheduler *s = ok ? make(fn, opt, S_SEQUENTIAL) : NULL;
    if (s) {
        s->children = malloc(sizeof(nb_scheduler *) * (size_t)n);
        s->milestones = malloc(sizeof(int) * (size_t)n);
        if (!s->children || !s->milestones) {
            nb__error("%s: out of memory", fn);
            nb_sched_free(s);
            s = NULL;
        }
    }
    if (!s) { /* the children are this function's in every case (each freed once) */
        for (int i = 0; scheds && i < n; i++) {
            bool seen = false;
            for (int k = 0; k < i; k++) seen = seen || scheds[k] == scheds[i];
            if (!seen) nb_sched_free(scheds[i]);
        }
        return NULL;
    }
    memcpy(s->children, scheds, sizeof(nb_scheduler *) * (size_t)n);
    if (n > 1) memcpy(s->milestones, milestones, sizeof(int) * (size_t)(n - 1));
    s->nchildren = n;
    s->nmilestones = n - 1;
    /* as torch: every child starts from the rates the first began with (torch's initial_lr) and the
       first takes epoch 0 */
    for (int i = 1; i < n; i++)
        if (s->children[i]->kind != S_CYCLIC)
            for (int g = 0; g < s->children[i]->ngroups && g < s->children[0]->ngroups; g++)
                s->children[i]->base_lr[g] = s->children[0]->base_lr[g];
    for (int g = 0; g < s->ngroups && g < s->children[0]->ngroups; g++) s->base_lr[g] = s->children[0]->base_lr[g];
    if (nb_sched_set_last_epoch(s, 0) < 0) {
        nb_sched_free(s);
        return NULL;
    }
    return s;
}

nb_scheduler *nb_sched_reduce_on_plateau(nb_optimizer *opt, nb_plateau_opts o) {
    const char *fn = "nb_sched_reduce_on_plateau";
    double factor = o.factor == 0 && !signbit(o.factor) ? 0.1 : o.factor;
    double threshold = o.threshold == 0 && !signbit(o.threshold) ? 1e-4 : o.threshold;
    double eps = o.eps == 0 && !signbit(o.eps) ? 1e-8 : o.eps;
    if (!(factor >= 0 && factor < 1) || !(threshold >= 0) || !(eps >= 0) || !(o.min_lr >= 0) || o.cooldown < 0) {
        nb__error("%s: factor must be in [0, 1), threshold, eps, min_lr and cooldown non-negative (got factor %g, "
                  "threshold %g, eps %g, min_lr %g, cooldown %d)", fn, factor, threshold, eps, o.min_lr, o.cooldown);
        return NULL;
    }
    nb_scheduler *s = make(fn, opt, S_PLATEAU);
    if (!s) return NULL;
    s->mode_max = o.mode_max;
    s->threshold_abs = o.threshold_abs;
    s->factor = factor;
    s->threshold = threshold;
    s->eps = eps;
    s->min_lr = o.min_lr;
    s->patience = o.patience == 0 ? 10 : o.patience < 0 ? 0 : o.patience;
    s->cooldown = o.cooldown;
    s->best = o.mode_max ? -INFINITY : INFINITY;
    return s; /* as torch: the rates stay until a plateau */
}

/* ReduceLROnPlateau.is_better */
static bool improves(const nb_scheduler *s, double a) {
    if (!s->mode_max) return s->threshold_abs ? a < s->best - s->threshold : a < s->best * (1. - s->threshold);
    return s->threshold_abs ? a > s->best + s->threshold : a > s->best * (s->threshold + 1.);
}

int nb_sched_step_metric(nb_scheduler *s, double metric) {
    if (!s || s->kind != S_PLATEAU) {
        nb__error("nb_sched_step_metric: %s", s ? "only a plateau schedule (nb_sched_reduce_on_plateau) takes a metric; "
                                                  "step the others with nb_sched_step"
                                                : "scheduler is NULL");
        return -1;
    }
    s->last_epoch++;
    if (improves(s, metric)) {
        s->best = metric;
        s->num_bad = 0;
    } else s->num_bad++;
    if (s->cooldown_counter > 0) { /* bad epochs in the cooldown do not count */
        s->cooldown_counter--;
        s->num_bad = 0;
    }
    if (s->num_bad > s->patience) {
        for (int g = 0; g < s->ngroups; g++) {
            double old = nb_optim_get_lr(s->opt, g), lr = old * s->factor;
            if (s->min_lr > lr) lr = s->min_lr;
            if (old - lr > s->eps) nb_optim_set_group_lr(s->opt, g, lr);
        }
        s->cooldown_counter = s->cooldown;
        s->num_bad = 0;
    }
    return 0;
}

/* SequentialLR.step: the child whose milestone is passed steps, or starts at epoch 0 on it. */
static int sequential_step(nb_scheduler *s) {
    s->last_epoch++;
    int idx = 0;
    while (idx < s->nmilestones && s->milestones[idx] <= s->last_epoch) idx++;
    nb_scheduler *c = s->children[idx];
    if (idx > 0 && s->milestones[idx - 1] == s->last_epoch) return nb_sched_set_last_epoch(c, 0);
    return nb_sched_step(c);
}

int nb_sched_step(nb_scheduler *s) {
    if (!s) {
        nb__error("nb_sched_step: scheduler is NULL");
        return -1;
    }
    if (s->kind == S_PLATEAU) {
        nb__error("nb_sched_step: a plateau schedule (nb_sched_reduce_on_plateau) steps with nb_sched_step_metric");
        return -1;
    }
    if (s->kind == S_SEQUENTIAL) return sequential_step(s);
    if (s->kind == S_WARM_RESTARTS && ++s->t_cur >= s->t_i) {
        s->t_cur -= s->t_i;
        s->t_i *= s->t_mult;
    }
    s->last_epoch++;
    return apply(s);
}

int nb_sched_last_epoch(const nb_scheduler *s) { return s ? s->last_epoch : -1; }

int nb_sched_set_last_epoch(nb_scheduler *s, int epoch) {
    if (!s) {
        nb__error("nb_sched_set_last_epoch: scheduler is NULL");
        return -1;
    }
    if (epoch < 0) {
        nb__error("nb_sched_set_last_epoch: epoch must be non-negative, got %d", epoch);
        return -1;
    }
    if (s->kind == S_SEQUENTIAL) { /* replayed from the start: the children keep state */
        for (int g = 0; g < s->ngroups; g++) nb_optim_set_group_lr(s->opt, g, s->base_lr[g]);
        int rc = nb_sched_set_last_epoch(s->children[0], 0);
        s->last_epoch = 0;
        while (rc == 0 && s->last_epoch < epoch) rc = sequential_step(s);
        return rc;
    }
    if (s->kind == S_WARM_RESTARTS) warm_restarts_at(s, epoch);
    s->last_epoch = epoch;
    return apply(s);
}

void nb_sched_free(nb_scheduler *s) {
    if (!s) return;
    for (int i = 0; i < s->nchildren; i++) nb_sched_free(s->children[i]);
    free(s->children);
    free(s->base_lr);
    free(s->milestones);
    free(s);
}
