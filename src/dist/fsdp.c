/* Full sharding (nb_ddp with NB_SHARD_FULL), as torch's FullyShardedDataParallel: the wrapped
   module's parameters are cut into units (each direct child with parameters, and the root's own
   parameters; a Sequential child is looked into, its children being the units, as torch wraps
   each block of a transformer), each unit flattened into one padded vector whose 1/world shard
   is all a rank keeps between uses. A unit's full parameters exist only while it runs: a
   forward pre-hook all-gathers them into one block the unit's parameter tensors point into, the forward hook
   releases it (and hooks the unit's output), and in backward that hook gathers them again before
   the unit's gradients are computed. Once every parameter of a unit has its gradient, the full
   gradient is packed and reduce-scattered (sum, on the second communicator, units always in
   reverse order) while backward goes on; the full gradient and parameters are dropped. The end of
   backward waits and leaves each rank's shard of every unit's gradient, averaged, on the
   unit's flat parameter: the parameters of the FSDP module that optimizers are made on, so the
   optimizer's state is sharded too. Each rank's block of the reduce-scatter carries one more
   element, 1 where the rank had a gradient for the unit, so a unit no rank used keeps none. */
#include "dist_impl.h"
#include "../autograd/engine.h"
#include "../nn/nn_impl.h"
#include "../ops/ops_impl.h"
#include "nabla.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    nb_tensor *t;       /* the wrapped module's parameter: a view into its unit's full block */
    const char *name;   /* its dotted name (the module's pool) */
    int unit;
    int64_t offset;     /* first element in the unit's flat vector */
    bool ready;         /* its gradient is final in this backward */
} fsdp_param;

typedef struct {
    nb_module *mod;     /* the child that is this unit, or the wrapped module for its own parameters */
    char *name;         /* the child's name, or "(root)" */
    nb_dtype dtype;
    int first, count;   /* params[first .. first + count) */
    int64_t numel, shard; /* the unit's elements; each rank's shard (world x shard >= numel) */
    nb_storage *full;   /* the full parameters' block; data NULL while sharded */
    nb_tensor *flat;    /* this rank's shard: a parameter of the FSDP module */
    int uses;           /* running forwards and backwards that need the full parameters */
    bool in_backward;   /* gathered for this backward, not yet done with it */
    int ready;          /* parameters ready in this backward */
    bool packed;        /* its gradient is in grad_blocks */
    void *grad_blocks;  /* world blocks of shard + 1 elements: the full gradient and the used flags */
    void *grad_mine;    /* shard + 1: this rank's block, summed over the ranks */
    nb_dist_op *op;     /* the reduce-scatter in flight */
    bool launched;
    int pre_hook, post_hook;
} fsdp_unit;

typedef struct {
    nb_module base;     /* its own registry: the units' flat parameters */
    nb_module *inner;
    fsdp_param *params;
    int nparams;
    fsdp_unit *units;
    int nunits;
    nb__dist_index index; /* parameter address -> index in params */
    int next_launch;    /* reduce-scatters start from the last unit down: the next one */
    bool armed;         /* a forward with grad ran: its backward reduces */
    bool broken;        /* a collective failed: the group is unusable */
    int hooks;
    nb_ddp_stats stats;
} fsdp_module;

static void fsdp_free(nb_module *self);
static nb_tensor *fsdp_forward(nb_module *self, nb_tensor *x);
static const nb_module_class FSDP = { .name = "FullyShardedDataParallel", .forward = fsdp_forward, .free = fsdp_free };

bool nb__fsdp_is(const nb_module *m) { return m && m->cls == &FSDP; }
nb_module *nb__fsdp_inner(nb_module *m) { return ((fsdp_module *)m)->inner; }
nb_ddp_stats nb__fsdp_stats(nb_module *m) { return ((fsdp_module *)m)->stats; }

/* ---- memory that lives only while a unit runs ----
   Mapped from the system and unmapped after, not taken from the caching allocator, so what
   full sharding saves shows in the process's memory (a cache would keep every unit's block). */
static void *big_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void big_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes ? bytes : 1);
}

/* ---- the full parameters' block ---- */
static void block_release(nb_storage *st) {
    if (st->data) big_free(st->data, st->nbytes);
    st->data = NULL;
    st->nbytes = 0;
}

static int block_read(const nb_storage *st, size_t off, void *dst, size_t n) {
    if (!st->data || off + n > st->nbytes) {
        nb__error("nb_copy_to: a sharded module's parameters have no memory outside its forward and backward");
        return -1;
    }
    memcpy(dst, (const char *)st->data + off, n);
    return 0;
}

static const nb_storage_ops block_ops = { .release = block_release, .read = block_read };


/* Brings unit u's full parameters in (an all-gather of the shards), unless a use holds them. */
static int gather(fsdp_module *f, fsdp_unit *u, const char *fn) {
    if (u->uses++ > 0) return 0;
    if (f->broken) {
        nb__error("%s: a collective of this sharded module failed earlier; the process group is unusable (restart the job)", fn);
        u->uses--;
        return -1;
    }
    size_t es = nb_dtype_size(u->dtype), bytes = (size_t)u->shard * (size_t)nb_dist_world_size() * es;
    void *data = big_alloc(bytes);
    if (!data) {
        nb__error("%s: out of memory for the full parameters of unit \"%s\" (%zu bytes)", fn, u->name, bytes);
        u->uses--;
        return -1;
    }
    nb_dist_op *op = NULL;
    char what[160];
    snprintf(what, sizeof what, "the all-gather of unit \"%s\"'s parameters", u->name);
    if (nb__dist_start_all_gather(nb__data(u->flat), data, u->shard, u->dtype, false, fn, &op) < 0 ||
        nb__dist_wait(op, fn, what) < 0) {
        if (!op) big_free(data, bytes); /* else left mapped: MPI may still write it */
        f->broken = true;
        u->uses--;
        return -1;
    }
    u->full->data = data;
    u->full->nbytes = bytes ? bytes : 1;
    return 0;
}

/* One use of unit u's full parameters is over; the last lets the block go. */
static void reshard(fsdp_unit *u) {
    if (u->uses <= 0 || --u->uses > 0) return;
    block_release(u->full);
}

/* ---- forward: gather before, release after, hook the output for backward ---- */
typedef struct { fsdp_module *f; int unit; } unit_ref;

static nb_tensor *pre_backward(nb_tensor *grad, void *ctx) {
    fsdp_module *f = ((unit_ref *)ctx)->f;
    fsdp_unit *u = &f->units[((unit_ref *)ctx)->unit];
    if (!f->armed || u->in_backward) return grad;
    if (gather(f, u, "nb_backward") < 0) return NULL;
    u->in_backward = true;
    return grad;
}

static nb_tensor *unit_pre(nb_module *m, nb_tensor *x, void *ctx) {
    unit_ref *r = ctx;
    (void)m;
    return gather(r->f, &r->f->units[r->unit], "nb_forward") < 0 ? NULL : x;
}

static nb_tensor *unit_post(nb_module *m, nb_tensor *x, nb_tensor *y, void *ctx) {
    unit_ref *r = ctx;
    fsdp_unit *u = &r->f->units[r->unit];
    (void)m; (void)x;
    if (y && r->f->armed && nb_requires_grad(y) && !nb_is_leaf(y) && nb_tensor_register_hook(y, pre_backward, r) < 0) y = NULL;
    reshard(u);
    return y;
}

/* ---- backward: pack, reduce-scatter in order, unpack ---- */

/* Copies n elements of src into the gradient blocks at flat offset off (blocks of shard + 1). */
static void to_blocks(fsdp_unit *u, const void *src, int64_t off, int64_t n) {
    size_t es = nb_dtype_size(u->dtype);
    while (n > 0) {
        int64_t b = off / u->shard, at = off % u->shard, k = u->shard - at < n ? u->shard - at : n;
        char *dst = (char *)u->grad_blocks + (size_t)(b * (u->shard + 1) + at) * es;
        if (src) memcpy(dst, src, (size_t)k * es), src = (const char *)src + (size_t)k * es;
        else memset(dst, 0, (size_t)k * es);
        off += k;
        n -= k;
    }
}

/* Writes unit u's gradients (zeros where a parameter has none) and this rank's used flag into
   its blocks, drops the full gradients, and lets the backward's gather go. */
static int pack(fsdp_module *f, fsdp_unit *u) {
    int world = nb_dist_world_size();
    size_t es = nb_dtype_size(u->dtype);
    int64_t blocks = (u->shard + 1) * world;
    if (!u->grad_blocks) {
        u->grad_blocks = big_alloc((size_t)blocks * es); /* unmapped once reduced */
        if (!u->grad_mine) u->grad_mine = malloc((size_t)(u->shard + 1) * es);
        if (!u->grad_blocks || !u->grad_mine) {
            nb__error("nb_backward: out of memory for the gradient of unit \"%s\"", u->name);
            return -1;
        }
    }
    memset(u->grad_blocks, 0, (size_t)blocks * es);
    bool used = false;
    for (int i = u->first; i < u->first + u->count; i++) {
        fsdp_param *p = &f->params[i];
        nb_tensor *g = nb_grad_of(p->t);
        if (g && nb_is_contiguous(g)) {
            to_blocks(u, nb__data(g), p->offset, nb_numel(p->t));
            used = true;
        }
        nb_zero_grad(p->t);
        p->ready = true;
    }
    for (int r = 0; r < world; r++) {
        char *flag = (char *)u->grad_blocks + (size_t)(r * (u->shard + 1) + u->shard) * es;
        if (u->dtype == NB_F32) *(float *)flag = used ? 1.0f : 0.0f;
        else *(double *)flag = used ? 1.0 : 0.0;
    }
    u->packed = true;
    if (u->in_backward) {
        u->in_backward = false;
        reshard(u);
    }
    return 0;
}

/* Starts the reduce-scatters of packed units, from the last unit down, in order. */
static void launch_ready(fsdp_module *f, bool early) {
    while (f->next_launch >= 0 && f->units[f->next_launch].packed && !f->broken) {
        fsdp_unit *u = &f->units[f->next_launch];
        if (nb__dist_start_reduce_scatter(u->grad_blocks, u->grad_mine, u->shard + 1, u->dtype, true, "nb_backward", &u->op) < 0) {
            f->broken = true;
            return;
        }
        u->launched = true;
        nb__dist_progress(u->op);
        if (early) f->stats.buckets_early++;
        else f->stats.buckets_late++;
        f->next_launch--;
    }
}

static void on_grad_ready(nb_tensor *leaf, bool got, void *ctx) {
    (void)got;
    fsdp_module *f = ctx;
    if (!f->armed || f->broken) return;
    int i = nb__dist_index_get(&f->index, leaf);
    if (i < 0 || f->params[i].ready) return;
    f->params[i].ready = true;
    fsdp_unit *u = &f->units[f->params[i].unit];
    if (++u->ready < u->count) return;
    if (pack(f, u) < 0) { f->broken = true; return; }
    launch_ready(f, true);
    for (int k = f->nunits - 1; k > f->next_launch; k--)
        if (f->units[k].op) { nb__dist_test(f->units[k].op); break; }
}

/* The averaged shard of unit u's gradient onto its flat parameter (none when no rank had one). */
static int unpack(fsdp_unit *u) {
    double used = u->dtype == NB_F32 ? ((const float *)u->grad_mine)[u->shard] : ((const double *)u->grad_mine)[u->shard];
    if (used == 0) return 0;
    nb_scope *s = nb_scope_begin();
    nb_tensor *g = nb_empty(NB_SHAPE(u->shard), u->dtype);
    if (g) {
        nb__dist_scale(nb_data_ptr(g), u->grad_mine, u->shard, u->dtype, nb_dist_world_size());
        nb_tensor *old = nb_grad_of(u->flat);
        nb_set_grad(u->flat, old ? nb_add(old, g) : g); /* a second backward without zero_grad adds, as torch */
    }
    int rc = g && nb_grad_of(u->flat) ? 0 : -1;
    nb_scope_end(s);
    return rc;
}

static int on_backward_finished(int rc, void *ctx) {
    fsdp_module *f = ctx;
    if (!f->armed) return 0;
    f->armed = false;
    /* what backward did not reach: zeros and a cleared flag, so every rank starts every unit */
    for (int k = f->nunits - 1; k >= 0 && !f->broken; k--)
        if (!f->units[k].packed && pack(f, &f->units[k]) < 0) f->broken = true;
    launch_ready(f, false);
    double t0 = nb__dist_now();
    bool failed = f->broken;
    for (int k = f->nunits - 1; k >= 0; k--) {
        fsdp_unit *u = &f->units[k];
        if (u->in_backward) { u->in_backward = false; reshard(u); }
        if (!u->launched) continue;
        char what[160];
        snprintf(what, sizeof what, "the gradient reduce-scatter of unit \"%s\"", u->name);
        if (!failed && nb__dist_wait(u->op, "nb_backward", what) == 0) u->op = NULL;
        else failed = true;
        if (failed && u->op) { /* MPI may still write them: left mapped, and adopted */
            nb__dist_adopt(u->grad_mine);
            u->grad_blocks = u->grad_mine = NULL;
            u->op = NULL;
        }
        u->launched = false;
    }
    f->stats.wait_seconds += nb__dist_now() - t0;
    if (failed) {
        f->broken = true;
        if (!nb__has_error())
            nb__error("nb_backward: a collective of this sharded module failed; the process group is unusable (restart the job)");
        return -1;
    }
    f->stats.backwards++;
    for (int k = 0; k < f->nunits; k++) { /* the full gradients are reduced: let them go */
        fsdp_unit *u = &f->units[k];
        big_free(u->grad_blocks, (size_t)((u->shard + 1) * nb_dist_world_size()) * nb_dtype_size(u->dtype));
        u->grad_blocks = NULL;
    }
    if (rc < 0) return rc;
    for (int k = 0; k < f->nunits; k++) {
        nb__error_ctx ec;
        nb__error_push(&ec, NULL, "nb_backward: setting unit \"%s\"'s averaged gradient", f->units[k].name);
        int urc = unpack(&f->units[k]);
        if (urc < 0 && !nb__has_error()) nb__error("failed");
        nb__error_pop(&ec);
        if (urc < 0) {
            f->broken = true;
            return -1;
        }
    }
    return 0;
}

static nb_tensor *fsdp_forward(nb_module *self, nb_tensor *x) {
    fsdp_module *f = (fsdp_module *)self;
    f->inner->training = self->training;
    if (nb__tracing()) {
        nb__error("nb_ddp: a fully sharded module cannot run under nb_compile yet (its all-gathers and reduce-scatters "
                  "run in hooks a replayed graph would never call); run it eagerly");
        return NULL;
    }
    if (nb_is_grad_enabled()) {
        f->armed = true;
        f->next_launch = f->nunits - 1;
        for (int i = 0; i < f->nparams; i++) f->params[i].ready = false;
        for (int k = 0; k < f->nunits; k++) f->units[k].ready = 0, f->units[k].packed = false;
    }
    return nb_forward(f->inner, x);
}

/* ---- making and freeing ---- */
/* The module and what its units' hooks are handed: one reference per unit. */
typedef struct {
    fsdp_module f;
    unit_ref *refs;
} fsdp_holder;

static void fsdp_free(nb_module *self) {
    fsdp_module *f = (fsdp_module *)self;
    if (f->hooks >= 0) nb__backward_hooks_remove(f->hooks);
    for (int k = 0; k < f->nunits; k++) {
        fsdp_unit *u = &f->units[k];
        if (u->pre_hook >= 0) nb_module_remove_hook(u->mod, u->pre_hook);
        if (u->post_hook >= 0) nb_module_remove_hook(u->mod, u->post_hook);
        if (u->full) {
            /* the parameters stay views of the block (released with the last of them) */
            if (atomic_fetch_sub(&u->full->refcount, 1) == 1) {
                block_release(u->full);
                nb__free(u->full, u->full->block);
            }
        }
        big_free(u->grad_blocks, (size_t)((u->shard + 1) * nb_dist_world_size()) * nb_dtype_size(u->dtype));
        free(u->grad_mine);
        free(u->name);
    }
    free(f->units);
    free(f->params);
    nb__dist_index_free(&f->index);
    free(((fsdp_holder *)f)->refs);
    nb_module_free(f->inner);
}

/* The unit a parameter belongs to, as torch's transformer wrapping cuts a model: the child of
   the root its name starts with, or, where that child is a Sequential, the child of it (and so
   on down nested Sequentials); the root itself for its own parameters. *mod is the unit's module
   and key its dotted path ("" for the root). */
static void unit_key(nb_module *m, const char *name, char *key, size_t cap, nb_module **mod) {
    *mod = m;
    key[0] = 0;
    const char *at = name;
    size_t len = 0;
    for (;;) {
        const char *dot = strchr(at, '.');
        if (!dot || len + (size_t)(dot - at) + 2 >= cap) return;
        char part[256];
        size_t n = (size_t)(dot - at) < sizeof part ? (size_t)(dot - at) : sizeof part - 1;
        memcpy(part, at, n);
        part[n] = 0;
        nb_module *child = nb_module_get_child(*mod, part);
        if (!child) return;
        if (len) key[len++] = '.';
        memcpy(key + len, part, n + 1);
        len += n;
        *mod = child;
        if (!nb__is_sequential(child)) return;
        at = dot + 1;
    }
}

nb_module *nb__fsdp_new(nb_module *m, const nb_named_tensor *pl, int np, const nb_named_tensor *bl, int nbuf) {
    (void)bl; (void)nbuf; /* buffers stay whole on every rank (broadcast from rank 0 already) */
    int world = nb_dist_world_size(), me = nb_dist_rank();
    fsdp_holder *h = (fsdp_holder *)nb_module_new(&FSDP, sizeof(fsdp_holder));
    if (!h) { nb_module_free(m); return NULL; }
    fsdp_module *f = &h->f;
    f->inner = m;
    f->hooks = -1;
    f->params = calloc((size_t)(np > 0 ? np : 1), sizeof *f->params);
    f->units = calloc((size_t)(np > 0 ? np : 1), sizeof *f->units);
    if (!f->params || !f->units || nb__dist_index_init(&f->index, np) < 0) { nb__error("nb_ddp: out of memory"); goto fail; }
    for (int k = 0; k < np; k++) f->units[k].pre_hook = f->units[k].post_hook = -1;

    /* units in the order their first parameter was registered; parameters grouped by unit */
    int *unit_of = malloc(sizeof(int) * (size_t)(np > 0 ? np : 1));
    if (!unit_of) { nb__error("nb_ddp: out of memory"); goto fail; }
    for (int i = 0; i < np; i++) {
        char key[256];
        nb_module *mod;
        unit_key(m, pl[i].name, key, sizeof key, &mod);
        bool child = mod != m;
        int u = -1;
        for (int k = 0; k < f->nunits && u < 0; k++)
            if (f->units[k].mod == mod) u = k;
        if (u < 0) {
            u = f->nunits++;
            f->units[u].mod = mod;
            f->units[u].dtype = nb_dtype_of(pl[i].tensor);
            size_t n = child ? strlen(key) + 1 : sizeof "(root)";
            f->units[u].name = malloc(n);
            if (!f->units[u].name) { free(unit_of); nb__error("nb_ddp: out of memory"); goto fail; }
            memcpy(f->units[u].name, child ? key : "(root)", n);
        }
        if (nb_dtype_of(pl[i].tensor) != f->units[u].dtype) {
            nb__error("nb_ddp: unit \"%s\" mixes %s and %s parameters (\"%s\"); NB_SHARD_FULL flattens each unit into one "
                      "vector of one dtype", f->units[u].name, nb_dtype_name(f->units[u].dtype),
                      nb_dtype_name(nb_dtype_of(pl[i].tensor)), pl[i].name);
            free(unit_of);
            goto fail;
        }
        unit_of[i] = u;
    }
    int at = 0;
    for (int k = 0; k < f->nunits; k++) {
        fsdp_unit *u = &f->units[k];
        u->first = at;
        for (int i = 0; i < np; i++) {
            if (unit_of[i] != k) continue;
            f->params[at] = (fsdp_param){ .t = pl[i].tensor, .name = pl[i].name, .unit = k, .offset = u->numel };
            if (nb__add_overflows(u->numel, nb_numel(pl[i].tensor), &u->numel)) {
                free(unit_of);
                nb__error("nb_ddp: unit \"%s\" is too large", u->name);
                goto fail;
            }
            if (nb__dist_index_put(&f->index, pl[i].tensor, at) >= 0) {
                free(unit_of);
                nb__error("nb_ddp: parameter \"%s\" is listed twice (tied weights); NB_SHARD_FULL does not share a "
                          "parameter between places yet", pl[i].name);
                goto fail;
            }
            at++;
            u->count++;
        }
        u->shard = (u->numel + world - 1) / world;
        if (u->shard == 0) u->shard = 1;
    }
    f->nparams = np;
    free(unit_of);

    h->refs = calloc((size_t)(f->nunits > 0 ? f->nunits : 1), sizeof *h->refs);
    if (!h->refs) { nb__error("nb_ddp: out of memory"); goto fail; }
    for (int k = 0; k < f->nunits; k++) {
        fsdp_unit *u = &f->units[k];
        size_t es = nb_dtype_size(u->dtype);
        nb_scope *s = nb_scope_begin();
        /* this rank's shard of the flat vector (zeros past its end) */
        nb_tensor *flat = nb_zeros(NB_SHAPE(u->shard), u->dtype);
        u->full = flat ? nb__storage_header((nb_device){ NB_CPU, 0 }, NULL, 0, &block_ops) : NULL;
        if (!u->full) { nb_scope_end(s); nb__error("nb_ddp: out of memory"); goto fail; }
        int64_t lo = (int64_t)me * u->shard, hi = lo + u->shard;
        for (int i = u->first; i < u->first + u->count; i++) {
            fsdp_param *p = &f->params[i];
            int64_t a = p->offset > lo ? p->offset : lo, b = p->offset + nb_numel(p->t) < hi ? p->offset + nb_numel(p->t) : hi;
            if (a < b) memcpy((char *)nb_data_ptr(flat) + (size_t)(a - lo) * es, (char *)nb__data(p->t) + (size_t)(a - p->offset) * es, (size_t)(b - a) * es);
            /* the parameter becomes a view of the unit's block: its old memory goes */
            nb_storage *old = p->t->storage;
            atomic_fetch_add(&u->full->refcount, 1);
            p->t->storage = u->full;
            p->t->offset = p->offset;
            if (atomic_fetch_sub(&old->refcount, 1) == 1) {
                if (old->ops) old->ops->release(old);
                nb__free(old, old->block);
            }
            nb_zero_grad(p->t);
        }
        char name[300];
        if (u->mod == m) snprintf(name, sizeof name, "flat_param");
        else snprintf(name, sizeof name, "flat_param_%s", u->name);
        for (char *c = name; *c; c++)
            if (*c == '.') *c = '_'; /* "flat_param_blocks_0" for unit blocks.0 */
        nb_keep(flat);
        nb_scope_end(s);
        u->flat = nb_module_param(&f->base, name, flat);
        if (!u->flat) goto fail;
        h->refs[k] = (unit_ref){ f, k };
        int64_t bytes = u->numel * (int64_t)es;
        if (bytes > f->stats.bucket_bytes_max) f->stats.bucket_bytes_max = bytes;
        f->stats.owned_bytes += u->shard * (int64_t)es;
        u->pre_hook = nb_module_add_forward_pre_hook(u->mod, unit_pre, &h->refs[k]);
        u->post_hook = nb_module_add_forward_hook(u->mod, unit_post, &h->refs[k]);
        if (u->pre_hook < 0 || u->post_hook < 0) goto fail;
    }
    f->stats.buckets = f->nunits;
    f->stats.params_owned = f->nunits;
    f->hooks = nb__backward_hooks_add((nb_backward_hooks){ .grad_ready = on_grad_ready, .finished = on_backward_finished, .ctx = f });
    if (f->hooks < 0) goto fail;
    f->base.training = m->training;
    return &f->base;
fail:
    nb_module_free(&f->base);
    return NULL;
}

/* ---- the full parameters on demand (torch's summon_full_params) ---- */
int nb_dist_full_params_begin(nb_module *m) {
    if (!m) {
        nb__error("nb_dist_full_params_begin: module is NULL");
        return -1;
    }
    if (!nb__fsdp_is(m)) return 0; /* every rank holds every parameter already */
    fsdp_module *f = (fsdp_module *)m;
    for (int k = 0; k < f->nunits; k++)
        if (gather(f, &f->units[k], "nb_dist_full_params_begin") < 0) {
            while (k-- > 0) reshard(&f->units[k]);
            return -1;
        }
    return 0;
}

int nb_dist_full_params_end(nb_module *m, bool writeback) {
    if (!m || !nb__fsdp_is(m)) return 0;
    fsdp_module *f = (fsdp_module *)m;
    int me = nb_dist_rank();
    for (int k = 0; k < f->nunits; k++) {
        fsdp_unit *u = &f->units[k];
        if (u->uses <= 0) continue;
        if (writeback) {
            /* this rank's part of what the caller wrote; every rank wrote the same values */
            size_t es = nb_dtype_size(u->dtype);
            int64_t lo = (int64_t)me * u->shard, n = u->numel - lo < u->shard ? u->numel - lo : u->shard;
            if (n > 0) memcpy(nb__data(u->flat), (char *)u->full->data + (size_t)lo * es, (size_t)n * es);
            atomic_fetch_add(&u->flat->storage->version, 1);
        }
        reshard(u);
    }
    return 0;
}

int nb_dist_save_state_dict(nb_module *m, const char *path) {
    const char *fn = "nb_dist_save_state_dict";
    if (!m || !path) {
        nb__error("%s: %s is NULL", fn, m ? "path" : "module");
        return -1;
    }
    if (nb_dist_full_params_begin(m) < 0) return -1;
    nb_module *plain = nb__fsdp_is(m) ? nb__fsdp_inner(m) : m;
    int rc = nb_dist_rank() == 0 ? nb_save_state_dict(plain, path) : 0;
    nb_dist_full_params_end(m, false);
    return nb__dist_agree(rc, fn);
}

int nb_dist_load_state_dict(nb_module *m, const char *path, nb_load_opts opts) {
    const char *fn = "nb_dist_load_state_dict";
    if (!m || !path) {
        nb__error("%s: %s is NULL", fn, m ? "path" : "module");
        return -1;
    }
    if (nb_dist_full_params_begin(m) < 0) return -1;
    nb_module *plain = nb__fsdp_is(m) ? nb__fsdp_inner(m) : m;
    int rc = nb_load_state_dict(plain, path, opts);
    nb_dist_full_params_end(m, rc == 0);
    return nb__dist_agree(rc, fn); /* every rank read the file itself: any rank's failure is every rank's */
}

int nb__fsdp_unit_info(nb_module *m, int i, int64_t *bytes, int *params) {
    fsdp_module *f = (fsdp_module *)m;
    if (i < 0 || i >= f->nunits) {
        nb__error("nb_ddp_bucket_info: unit %d of %d", i, f->nunits);
        return -1;
    }
    if (bytes) *bytes = f->units[i].numel * (int64_t)nb_dtype_size(f->units[i].dtype);
    if (params) *params = f->units[i].count;
    return 0;
}

int nb__fsdp_segments(nb_module *m, int i, nb__dist_segment *out, int cap) {
    fsdp_module *f = (fsdp_module *)m;
    if (i < 0 || i >= f->nunits) {
        nb__error("nb_dist_save_sharded: parameter %d of %d", i, f->nunits);
        return -1;
    }
    fsdp_unit *u = &f->units[i];
    int64_t lo = (int64_t)nb_dist_rank() * u->shard, hi = lo + u->shard;
    int n = 0;
    for (int k = u->first; k < u->first + u->count; k++) {
        fsdp_param *p = &f->params[k];
        int64_t a = p->offset > lo ? p->offset : lo, b = p->offset + nb_numel(p->t) < hi ? p->offset + nb_numel(p->t) : hi;
        if (a >= b) continue;
        if (n < cap) out[n] = (nb__dist_segment){ p->name, p->t, a - p->offset, b - a, a - lo };
        n++;
    }
    return n;
}
