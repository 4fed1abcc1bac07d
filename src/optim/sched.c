/* Learning-rate schedules in PyTorch's closed forms: step, multi-step, exponential, cosine
   annealing, linear warm-up and one-cycle (with momentum cycling). */
#include "../core/core_impl.h"
#include "nabla.h"
#include "nabla/optim.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

double nb__optim_momentum(const nb_optimizer *o, bool *has);
void nb__optim_set_momentum(nb_optimizer *o, double m);

typedef enum { S_STEP, S_MULTISTEP, S_EXPONENTIAL, S_COSINE, S_LINEAR, S_ONE_CYCLE } sched_kind;

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
    /* one-cycle */
    double max_lr, initial_lr, min_lr, pct_start, base_mom, max_mom;
    bool linear_anneal, cycle_momentum;
};

static double anneal(const nb_scheduler *s, double start, double end, double pct) {
    if (s->linear_anneal) return (end - start) * pct + start;
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1);
}

static double lr_at(const nb_scheduler *s, double base, int e) {
    switch (s->kind) {
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

static int apply(nb_scheduler *s) {
    /* as torch: the step after the last one (epoch == total) is allowed, so a loop of total
       optimizer steps may step the schedule after each */
    if (s->kind == S_ONE_CYCLE && s->last_epoch > s->total) {
        nb__error("nb_sched_step: one-cycle schedule stepped %d times, past its %d total steps", s->last_epoch, s->total);
        return -1;
    }
    for (int g = 0; g < s->ngroups; g++) nb_optim_set_group_lr(s->opt, g, lr_at(s, s->base_lr[g], s->last_epoch));
    if (s->kind == S_ONE_CYCLE && s->cycle_momentum) nb__optim_set_momentum(s->opt, momentum_at(s, s->last_epoch));
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

int nb_sched_step(nb_scheduler *s) {
    if (!s) {
        nb__error("nb_sched_step: scheduler is NULL");
        return -1;
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
    s->last_epoch = epoch;
    return apply(s);
}

void nb_sched_free(nb_scheduler *s) {
    if (!s) return;
    free(s->base_lr);
    free(s->milestones);
    free(s);
}
