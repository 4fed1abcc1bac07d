/* Optimizers: parameter groups over borrowed parameters, state created at the first step,
   and one fused update op per parameter through the dispatch path (LBFGS, which runs a closure
   and a line search over all parameters at once, lives in lbfgs.c). */
#include "../ops/ops_impl.h"
#include "../nn/nn_impl.h"
#include "optim_impl.h"
#include "optimizer.h"
#include "nabla/optim.h"
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[KIND_COUNT] = { "nb_optim_sgd",   "nb_optim_adam",     "nb_optim_adamw",
                                                    "nb_optim_rmsprop", "nb_optim_adagrad", "nb_optim_nadam",
                                                    "nb_optim_radam", "nb_optim_adamax",   "nb_optim_adadelta",
                                                    "nb_optim_lbfgs" };

/* ---- partitions (optim_impl.h): which module's optimizers update only some parameters ---- */
enum { MAX_PARTITIONS = 64 };
static struct { const nb_module *m; nb__optim_partition p; } partitions[MAX_PARTITIONS];
static pthread_mutex_t partition_lock = PTHREAD_MUTEX_INITIALIZER;

int nb__optim_partition_set(const nb_module *m, const nb__optim_partition *p) {
    pthread_mutex_lock(&partition_lock);
    int at = -1, rc = 0;
    for (int i = 0; i < MAX_PARTITIONS; i++) {
        if (partitions[i].m == m) { at = i; break; }
        if (!partitions[i].m && at < 0) at = i;
    }
    if (p && at >= 0) partitions[at].m = m, partitions[at].p = *p;
    else if (!p && at >= 0 && partitions[at].m == m) partitions[at].m = NULL;
    else if (p) rc = -1;
    pthread_mutex_unlock(&partition_lock);
    if (rc < 0) nb__error("nb_optim: %d modules have a sharded optimizer already", MAX_PARTITIONS);
    return rc;
}

static bool partition_of(const nb_module *m, nb__optim_partition *out) {
    bool found = false;
    pthread_mutex_lock(&partition_lock);
    for (int i = 0; i < MAX_PARTITIONS && !found; i++)
        if (partitions[i].m == m) { *out = partitions[i].p; found = true; }
    pthread_mutex_unlock(&partition_lock);
    return found;
}


/* The state's names, as torch's optimizer state_dict() has them. */
static const char *const state_names[KIND_COUNT][3] = {
    { "momentum_buffer", NULL, NULL },
    { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" },
    { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" },
    { "square_avg", "momentum_buffer", "grad_avg" },
    { "sum", NULL, NULL },
    { "exp_avg", "exp_avg_sq", "mu_product" },
    { "exp_avg", "exp_avg_sq", NULL },
    { "exp_avg", "exp_inf", NULL },
    { "square_avg", "acc_delta", NULL },
    { NULL, NULL, NULL },
};

/* Which state tensors this optimizer keeps per parameter. */
static bool uses_state(const nb_optimizer *o, int k) {
    switch (o->kind) {
    case KIND_SGD: return k == 0 && o->momentum != 0;
    case KIND_ADAM:
    case KIND_ADAMW: return k < 2 || (k == 2 && o->amsgrad);
    case KIND_RMSPROP: return k == 0 || (k == 1 && o->momentum != 0) || (k == 2 && o->centered);
    case KIND_NADAM: return true;
    case KIND_RADAM:
    case KIND_ADAMAX:
    case KIND_ADADELTA: return k < 2;
    case KIND_LBFGS: return false;
    default: return k == 0;
    }
}

nb_optimizer *nb__optim_make(int kind) {
    nb_optimizer *o = calloc(1, sizeof *o);
    if (!o) {
        nb__error("%s: out of memory", kind_names[kind]);
        return NULL;
    }
    o->kind = kind;
    return o;
}

static bool check_hyper(nb_optimizer *o) {
    const char *fn = kind_names[o->kind];
    if (!(o->lr >= 0) || !(o->weight_decay >= 0) || !(o->momentum >= 0) || !(o->eps >= 0)) {
        nb__error("%s: learning rate, weight decay, momentum and eps must be non-negative (lr %g, weight decay %g)", fn,
                  o->lr, o->weight_decay);
        return false;
    }
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1)) {
        nb__error("%s: betas must be in [0, 1), got %g and %g", fn, o->beta1, o->beta2);
        return false;
    }
    if (!(o->rho >= 0 && o->rho <= 1) || !(o->momentum_decay >= 0)) {
        nb__error("%s: rho must be in [0, 1] and momentum_decay non-negative, got %g and %g", fn, o->rho,
                  o->momentum_decay);
        return false;
    }
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0)) {
        nb__error("%s: nesterov needs a momentum and zero dampening", fn);
        return false;
    }
    return true;
}

typedef struct {
    nb_tensor **items;
    int n, cap;
} param_list;

static void collect(nb_tensor *p, void *ctx) {
    param_list *l = ctx;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        nb_tensor **g = realloc(l->items, sizeof(nb_tensor *) * (size_t)cap);
        if (!g) return;
        l->items = g;
        l->cap = cap;
    }
    l->items[l->n++] = p;
}

nb_optimizer *nb__optim_finish(nb_optimizer *o, nb_module *m) {
    if (!check_hyper(o)) {
        nb_optim_free(o);
        return NULL;
    }
    if (m && o->kind == KIND_LBFGS && partition_of(m, &(nb__optim_partition){ 0 })) {
        nb__error("nb_optim_lbfgs: the module's optimizer state is sharded (NB_SHARD_OPTIMIZER), which LBFGS's "
                  "history over all parameters cannot be");
        nb_optim_free(o);
        return NULL;
    }
    if (m) {
        param_list l = { 0 };
        nb__module_each_param(m, collect, &l);
        int rc = nb_optim_add_param_group(o, l.items, l.n, (nb_group_opts){ 0 });
        free(l.items);
        if (rc >= 0 && partition_of(m, &o->part))
            for (int i = 0; i < o->nslots; i++) o->slots[i].foreign = !o->part.owns(o->slots[i].param, o->part.ctx);
        if (rc < 0) {
            nb_optim_free(o);
            return NULL;
        }
    }
    return o;
}

int nb_optim_add_param_group(nb_optimizer *o, nb_tensor *const *params, int n, nb_group_opts opts) {
    if (!o) {
        nb__error("nb_optim_add_param_group: optimizer is NULL");
        return -1;
    }
    const char *fn = "nb_optim_add_param_group";
    if (o->kind == KIND_LBFGS && o->ngroups > 0) {
        nb__error("%s: LBFGS takes one parameter group (as torch.optim.LBFGS), it has one already", fn);
        return -1;
    }
    if (n < 0 || (n > 0 && !params)) {
        nb__error("%s: invalid parameter list", fn);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char d[200];
        if (!params[i]) {
            nb__error("%s: parameter %d is NULL", fn, i);
            return -1;
        }
        if (!nb__is_float(nb_dtype_of(params[i])) || !nb_is_leaf(params[i])) {
            nb__error("%s: parameter %d %s must be a float leaf tensor", fn, i, nb__describe(params[i], d, sizeof d));
            return -1;
        }
        for (int k = 0; k < o->nslots; k++)
            if (o->slots[k].param == params[i]) {
                nb__error("%s: parameter %d %s is already in group %d", fn, i, nb__describe(params[i], d, sizeof d),
                          o->slots[k].group);
                return -1;
            }
    }
    group *g = realloc(o->groups, sizeof(group) * (size_t)(o->ngroups + 1));
    if (!g) {
        nb__error("%s: out of memory", fn);
        return -1;
    }
    o->groups = g;
    if (o->nslots + n > o->cap) {
        int cap = o->nslots + n + 16;
        slot *s = realloc(o->slots, sizeof(slot) * (size_t)cap);
        if (!s) {
            nb__error("%s: out of memory", fn);
            return -1;
        }
        o->slots = s;
        o->cap = cap;
    }
    int gi = o->ngroups++;
    o->groups[gi] = (group){ nb__opt_or(opts.lr, o->lr), nb__opt_or(opts.weight_decay, o->weight_decay), NULL };
    for (int i = 0; i < n; i++) {
        nb_set_requires_grad(params[i], true);
        o->slots[o->nslots++] = (slot){ .param = params[i], .group = gi };
    }
    return gi;
}

/* Makes the slot's state in the caller's scope; 0, or <0 with the slot left without state. */
static int init_slot(nb_optimizer *o, slot *s) {
    nb_shape shape = nb_shape_of(s->param);
    nb_dtype dt = nb_dtype_of(s->param);
    nb_device dev = s->param->storage->device;
    s->step = nb__full_on(NB_SHAPE(), 0, NB_I64, dev);
    bool ok = s->step != NULL;
    for (int k = 0; k < 3; k++)
        if (uses_state(o, k)) {
            if (o->kind == KIND_NADAM && k == 2) s->state[k] = nb__full_on(NB_SHAPE(), 1.0, NB_F32, dev); /* mu_product */
            else s->state[k] = nb__full_on(shape, o->kind == KIND_ADAGRAD ? o->initial_acc : 0.0, dt, dev);
            ok = ok && s->state[k];
        }
    if (ok) return 0; /* not nb__has_error(): an earlier error the caller did not clear is no failure here */
    s->step = NULL;   /* what was made belongs to the caller's scope */
    for (int k = 0; k < 3; k++) s->state[k] = NULL;
    return -1;
}

/* The update's float coefficients for group g, in the layout src/ops/optim_ops.c documents. */
static void hyper_values(const nb_optimizer *o, int g, double f[6]) {
    const group *gr = &o->groups[g];
    memset(f, 0, 6 * sizeof(double));
    switch (o->kind) {
    case KIND_SGD: f[0] = gr->lr; f[1] = o->momentum; f[2] = o->dampening; f[3] = gr->weight_decay; break;
    case KIND_ADAM:
    case KIND_ADAMW: f[0] = gr->lr; f[1] = o->beta1; f[2] = o->beta2; f[3] = o->eps; f[4] = gr->weight_decay; break;
    case KIND_RMSPROP: f[0] = gr->lr; f[1] = o->alpha; f[2] = o->eps; f[3] = gr->weight_decay; f[4] = o->momentum; break;
    case KIND_NADAM:
    case KIND_RADAM:
    case KIND_ADAMAX:
        f[0] = gr->lr; f[1] = o->beta1; f[2] = o->beta2; f[3] = o->eps; f[4] = gr->weight_decay; f[5] = o->momentum_decay;
        break;
    case KIND_ADADELTA: f[0] = gr->lr; f[1] = o->rho; f[2] = o->eps; f[3] = gr->weight_decay; break;
    default: f[0] = gr->lr; f[1] = o->eps; f[2] = gr->weight_decay; f[3] = o->lr_decay;
    }
}

/* Writes the current coefficients into each group's tensor: the update op reads them there, so a
   compiled training step sees a new learning rate or momentum without tracing again. */
static void sync_hyper(nb_optimizer *o) {
    for (int g = 0; g < o->ngroups; g++)
        if (o->groups[g].hyper) hyper_values(o, g, (double *)nb__data(o->groups[g].hyper));
}

int nb_optim_init_state(nb_optimizer *o) {
    if (!o) {
        nb__error("nb_optim_init_state: optimizer is NULL");
        return -1;
    }
    /* State is made once and kept: a tracer must capture it, not record its creation. */
    bool traced = nb__trace_suspend(true);
    int rc = 0;
    for (int g = 0; g < o->ngroups && rc == 0; g++) {
        if (o->groups[g].hyper) continue;
        o->groups[g].hyper = nb__tensor_new(NB_SHAPE(6), NB_F64);
        if (!o->groups[g].hyper) rc = -1;
    }
    if (rc == 0) sync_hyper(o);
    for (int i = 0; i < o->nslots && rc == 0 && o->kind != KIND_LBFGS; i++) {
        slot *s = &o->slots[i];
        if (s->foreign) continue;
        if (s->step) {
            /* the state follows its parameter to another device (nb_module_to), as PyTorch's
               optimizer load_state_dict moves it */
            nb_device dev = s->param->storage->device, at = s->step->storage->device;
            if (dev.type == at.type && dev.index == at.index) continue;
            rc = nb__tensor_move(s->step, dev);
            for (int k = 0; k < 3 && rc == 0; k++)
                if (s->state[k]) rc = nb__tensor_move(s->state[k], dev);
            continue;
        }
        nb_scope *sc = nb_scope_begin();
        rc = init_slot(o, s);
        if (s->step) nb_keep(s->step); /* the optimizer owns its state */
        for (int k = 0; k < 3; k++)
            if (s->state[k]) nb_keep(s->state[k]);
        nb_scope_end(sc);
    }
    nb__trace_suspend(traced);
    return rc;
}

void nb_optim_zero_grad(nb_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->nslots; i++) nb_zero_grad(o->slots[i].param);
}

/* LBFGS: one step of up to max_iter iterations over the parameters of group 0 (every
   parameter, this process's: LBFGS refuses partitions). */
static int lbfgs_step(nb_optimizer *o) {
    nb_tensor **ps = malloc(sizeof(nb_tensor *) * (size_t)(o->nslots ? o->nslots : 1));
    if (!ps) {
        nb__error("nb_optim_step: out of memory");
        return -1;
    }
    for (int i = 0; i < o->nslots; i++) ps[i] = o->slots[i].param;
    int rc = nb__lbfgs_step(o->lbfgs, ps, o->nslots, o->ngroups ? o->groups[0].lr : o->lr);
    free(ps);
    return rc;
}

/* Steps in a row the live tensors must grow before NABLA_WARN_LEAKS warns. */
enum { LEAK_STEPS = 10 };

/* NABLA_WARN_LEAKS=1 (the user's explicit request; the library prints nothing otherwise): one
   line on stderr, once a process, when the live tensors grew at each of LEAK_STEPS steps in a
   row, the mark of a loop that makes its step's tensors outside a scope. */
static void watch_leaks(nb_optimizer *o) {
    static atomic_int enabled = -1; /* -1: the variable not read yet */
    static atomic_bool warned;
    int on = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (on < 0) {
        const char *v = getenv("NABLA_WARN_LEAKS");
        on = v && !strcmp(v, "1");
        atomic_store_explicit(&enabled, on, memory_order_relaxed);
    }
    if (!on) return;
    int64_t live = nb_live_tensors();
    if (o->leak_last > 0 && live > o->leak_last) o->leak_growth++;
    else o->leak_growth = 0;
    if (o->leak_growth == 1) o->leak_start = o->leak_last;
    o->leak_last = live;
    if (o->leak_growth >= LEAK_STEPS && !atomic_exchange(&warned, true))
        fprintf(stderr,
                "nabla: NABLA_WARN_LEAKS: the live tensors grew at each of the last %d optimizer steps (%lld to %lld): "
                "a training loop that makes its tensors outside a scope never frees them; wrap each step in "
                "nb_scope_begin() ... nb_scope_end() (README, \"A first program\")\n",
                LEAK_STEPS, (long long)o->leak_start, (long long)live);
}

int nb_optim_step(nb_optimizer *o) {
    if (!o) {
        if (!nb__has_error()) nb__error("nb_optim_step: optimizer is NULL");
        return -1;
    }
    watch_leaks(o);
    if (o->kind == KIND_LBFGS) return lbfgs_step(o);
    if (nb_optim_init_state(o) < 0) return -1;
    sync_hyper(o);
    bool prev = nb_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; i < o->nslots && rc == 0; i++) {
        slot *s = &o->slots[i];
        nb_tensor *g = nb_grad_of(s->param);
        if (!g || s->foreign) continue; /* a parameter without a gradient is left alone, as in torch */
        /* the step count and the coefficients are tensors the op reads, not arguments */
        nb_op_args a = { .i = { 0 } };
        nb_tensor *in[7] = { s->param, g, s->step, o->groups[s->group].hyper };
        int nin = 4;
        switch (o->kind) {
        case KIND_SGD:
            a.i[0] = NB_UPDATE_SGD;
            a.i[1] = o->nesterov;
            if (s->state[0]) in[nin++] = s->state[0];
            break;
        case KIND_ADAM:
        case KIND_ADAMW:
            a.i[0] = NB_UPDATE_ADAM;
            a.i[2] = o->kind == KIND_ADAMW;
            in[nin++] = s->state[0];
            in[nin++] = s->state[1];
            if (o->amsgrad) in[nin++] = s->state[2];
            break;
        case KIND_RMSPROP:
            a.i[0] = NB_UPDATE_RMSPROP;
            a.i[1] = o->centered;
            a.i[3] = s->state[1] != NULL;
            in[nin++] = s->state[0];
            if (s->state[1]) in[nin++] = s->state[1];
            if (s->state[2]) in[nin++] = s->state[2];
            break;
        case KIND_NADAM:
        case KIND_RADAM:
        case KIND_ADAMAX:
        case KIND_ADADELTA:
            a.i[0] = o->kind == KIND_NADAM ? NB_UPDATE_NADAM
                     : o->kind == KIND_RADAM ? NB_UPDATE_RADAM
                     : o->kind == KIND_ADAMAX ? NB_UPDATE_ADAMAX : NB_UPDATE_ADADELTA;
            for (int k = 0; k < 3; k++)
                if (s->state[k]) in[nin++] = s->state[k];
            break;
        default:
            a.i[0] = NB_UPDATE_ADAGRAD;
            in[nin++] = s->state[0];
        }
        nb_scope *sc = nb_scope_begin();
        if (!nb_is_contiguous(g)) in[1] = nb_contiguous(g);
        nb_device dev = s->param->storage->device;
        if (dev.type != NB_CPU) {
            /* the coefficients are kept on the host and sent along with each update */
            in[3] = nb_to(in[3], dev);
            if (!in[3]) rc = -1;
        }
        nb_tensor *r = rc == 0 ? nb__dispatch(NB_OP_OPTIM_UPDATE, in, nin, &a) : NULL;
        if (r) nb_release(r);
        else rc = -1;
        nb_scope_end(sc);
    }
    nb_set_grad_enabled(prev);
    if (rc == 0 && o->part.after_step) rc = o->part.after_step(o->part.ctx);
    return rc;
}

void nb_optim_set_lr(nb_optimizer *o, double lr) {
    if (!o) return;
    for (int g = 0; g < o->ngroups; g++) o->groups[g].lr = lr;
    o->lr = lr;
    sync_hyper(o);
}

int nb_optim_set_group_lr(nb_optimizer *o, int g, double lr) {
    if (!o) {
        nb__error("nb_optim_set_group_lr: optimizer is NULL");
        return -1;
    }
    if (g < 0 || g >= o->ngroups) {
        nb__error("nb_optim_set_group_lr: group %d does not exist (%d groups)", g, o->ngroups);
        return -1;
    }
    o->groups[g].lr = lr;
    sync_hyper(o);
    return 0;
}

double nb_optim_get_lr(const nb_optimizer *o, int g) {
    if (!o) {
        nb__error("nb_optim_get_lr: optimizer is NULL");
        return NAN;
    }
    if (g < 0 || g >= o->ngroups) {
        nb__error("nb_optim_get_lr: group %d is out of range (the optimizer has %d)", g, o->ngroups);
        return NAN;
    }
    return o->groups[g].lr;
}

int nb_optim_num_groups(const nb_optimizer *o) { return o ? o->ngroups : 0; }

/* Internal to the schedules: the optimizer's first-moment coefficient (SGD momentum or Adam's
   beta1), which one-cycle cycles. */
static bool has_betas(optim_kind k) {
    return k == KIND_ADAM || k == KIND_ADAMW || k == KIND_NADAM || k == KIND_RADAM || k == KIND_ADAMAX;
}
double nb__optim_momentum(const nb_optimizer *o, bool *has) {
    *has = o->kind == KIND_SGD ? o->momentum != 0 : has_betas(o->kind);
    return o->kind == KIND_SGD ? o->momentum : o->beta1;
}
bool nb__optim_has_sgd_momentum(const nb_optimizer *o) { return o->kind == KIND_SGD && o->momentum != 0; }
void nb__optim_set_momentum(nb_optimizer *o, double m) {
    if (o->kind == KIND_SGD) o->momentum = m;
    else if (has_betas(o->kind)) o->beta1 = m;
    sync_hyper(o);
}

bool nb__optim_scalar_state(const char *kind) { return strcmp(kind, "step") == 0 || strcmp(kind, "mu_product") == 0; }

static void free_state_names(nb_optimizer *o) {
    for (int i = 0; i < o->state_names_n; i++) free(o->state_names[i]);
    free(o->state_names);
    o->state_names = NULL;
    o->state_names_n = 0;
}

int nb_optim_named_state(nb_optimizer *o, nb_named_tensor *out, int cap) {
    if (!o) {
        nb__error("nb_optim_named_state: optimizer is NULL");
        return -1;
    }
    free_state_names(o);
    int total = 0;
    for (int i = 0; i < o->nslots; i++) {
        slot *s = &o->slots[i];
        if (!s->step) continue;
        total++;
        for (int k = 0; k < 3; k++) total += s->state[k] != NULL;
    }
    o->state_names = calloc((size_t)(total ? total : 1), sizeof(char *));
    if (!o->state_names) {
        nb__error("nb_optim_named_state: out of memory");
        return -1;
    }
    int n = 0;
    for (int i = 0; i < o->nslots; i++) {
        slot *s = &o->slots[i];
        if (!s->step) continue;
        for (int k = -1; k < 3; k++) {
            nb_tensor *t = k < 0 ? s->step : s->state[k];
            if (!t) continue;
            char buf[64];
            snprintf(buf, sizeof buf, "%d.%s", i, k < 0 ? "step" : state_names[o->kind][k]);
            char *name = malloc(strlen(buf) + 1);
            if (!name) {
                nb__error("nb_optim_named_state: out of memory");
                return -1;
            }
            strcpy(name, buf);
            o->state_names[o->state_names_n++] = name;
            if (n < cap && out) out[n] = (nb_named_tensor){ name, t };
            n++;
        }
    }
    return n;
}

void nb_optim_free(nb_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->nslots; i++) {
        nb_release(o->slots[i].step);
        for (int k = 0; k < 3; k++) nb_release(o->slots[i].state[k]);
    }
    for (int g = 0; g < o->ngroups; g++) nb_release(o->groups[g].hyper);
    nb__lbfgs_free(o->lbfgs);
    free_state_names(o);
    free(o->slots);
    free(o->groups);
    free(o);
}
