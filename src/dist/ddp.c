/* DDP (nb_ddp): data-parallel training as torch's DistributedDataParallel and its reducer.
   Made collectively: the ranks check that their modules agree (parameter count, names, shapes,
   dtypes, bucket size), then rank 0's parameters and buffers are broadcast. Gradients are grouped
   in buckets over the parameters in reverse registration order (the order backward makes them),
   the first at most 1 MiB so its allreduce starts early, the others bucket_mb. The backward
   engine's hooks (src/autograd/engine.h) report each parameter whose gradient is final; its
   gradient, divided by the world size, is copied into its bucket's flat buffer, and once a
   bucket is full its allreduce (MPI_Iallreduce, a sum) starts, buckets always in the same order
   on every rank, so communication runs beside the rest of backward. The end of backward starts
   what is left (the buckets of parameters that got no gradient: zeros there), waits, and makes
   every gradient a view of its slot of the bucket: the average over ranks. Each bucket carries one extra element per
   parameter, 1 where the rank had a gradient, so a parameter that had none on every rank keeps
   none (torch's find_unused_parameters). The sums are MPI's, in an order fixed for a given world
   size, so a run repeats bit for bit.
   The DDP module shares the wrapped module's registry (its state), so parameters, buffers and
   children are listed under the wrapped module's own names. */
#include "ddp_impl.h"
#include "../autograd/engine.h"
#include "../optim/optim_impl.h"
#include "../ops/ops_impl.h"
#include "nabla.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Graph mode: a traced backward records the reducer's work as ops and host calls
   (nb__host_call), which every replay runs at the same points. Each gradient is divided by the
   world size into its bucket slot by traced ops (an nb_assign the compiler turns into the
   gradient's kernels writing there); a launch then sets the bucket's used flags and starts its
   allreduce; the finish waits for every bucket, whose slots the gradients handed to the leaves
   are views of (bucket_views). The host calls' inputs are bucket buffers only, which they write. */
typedef struct ddp_call {
    ddp_module *d;
    int bucket;         /* a launch: its bucket; the finish: -1 */
    bool early;         /* a launch during backward (not at its end) */
    bool *has_grad;     /* per parameter of the bucket (a launch) or of d (the finish): whether
                           the traced step made its gradient */
    struct ddp_call *next;
} ddp_call;

static void ddp_free(nb_module *self);
static nb_tensor *ddp_forward(nb_module *self, nb_tensor *x);
static const nb_module_class DDP = { .name = "DistributedDataParallel", .forward = ddp_forward, .free = ddp_free };

static ddp_module *as_ddp(nb_module *m, const char *fn) {
    if (!m || m->cls != &DDP) {
        if (!nb__has_error()) nb__error("%s: %s", fn, m ? "the module is not a DDP module (nb_ddp)" : "module is NULL");
        return NULL;
    }
    return (ddp_module *)m;
}


static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fingerprint(uint64_t h, const nb_named_tensor *e, int n) {
    for (int i = 0; i < n; i++) {
        h = fnv(h, e[i].name, strlen(e[i].name) + 1);
        nb_shape s = nb_shape_of(e[i].tensor);
        int32_t dt = nb_dtype_of(e[i].tensor);
        h = fnv(h, &dt, sizeof dt);
        h = fnv(h, &s.ndim, sizeof s.ndim);
        h = fnv(h, s.dim, sizeof(int64_t) * (size_t)s.ndim);
    }
    return h;
}

/* Checks that every rank's module agrees with this one's: -1 with an error naming the first
   rank that differs. */
static int check_ranks(const nb_named_tensor *params, int np, const nb_named_tensor *bufs, int nbuf, double bucket_mb) {
    int64_t total = 0;
    for (int i = 0; i < np; i++) total += nb_numel(params[i].tensor);
    uint64_t hp = fingerprint(0xcbf29ce484222325ull, params, np), hb = fingerprint(0xcbf29ce484222325ull, bufs, nbuf);
    int64_t mb_bits;
    memcpy(&mb_bits, &bucket_mb, sizeof mb_bits);
    int64_t mine[5] = { np, total, (int64_t)hp, nbuf, mb_bits };
    mine[4] ^= (int64_t)hb;
    nb_scope *s = nb_scope_begin();
    nb__error_ctx ec;
    nb__error_push(&ec, NULL, "nb_ddp: checking the modules across ranks");
    nb_tensor *all = nb_dist_all_gather(nb_from_data(mine, NB_SHAPE(5), NB_I64));
    if (!all && !nb__has_error()) nb__error("the all-gather failed");
    nb__error_pop(&ec);
    int rc = all ? 0 : -1;
    if (all) {
        const int64_t *a = nb_data_ptr(all);
        int me = nb_dist_rank();
        for (int r = 0; r < nb_dist_world_size() && rc == 0; r++) {
            const int64_t *o = a + 5 * r;
            if (o[0] != mine[0] || o[1] != mine[1])
                nb__error("nb_ddp: rank %d's module has %lld parameters (%lld elements), rank %d's has %lld (%lld): every "
                          "rank must wrap the same architecture", r, (long long)o[0], (long long)o[1], me, (long long)mine[0],
                          (long long)mine[1]);
            else if (o[2] != mine[2])
                nb__error("nb_ddp: the parameters' names, shapes or dtypes differ between rank %d and rank %d", r, me);
            else if (o[3] != mine[3] || o[4] != mine[4])
                nb__error("nb_ddp: the buffers or bucket_mb differ between rank %d and rank %d", r, me);
            if (nb__has_error()) rc = -1;
        }
    }
    nb_scope_end(s);
    return rc;
}

/* Groups the parameters (already in reverse registration order) in buckets, torch's way: per
   dtype, a bucket closes once it holds at least its limit (the first limit, then bucket). */
static int assign_buckets(ddp_module *d, double first, double bucket) {
    enum { MAXDT = NB_DTYPE_COUNT };
    int open[MAXDT], closed[MAXDT];
    double bytes[MAXDT];
    for (int i = 0; i < MAXDT; i++) { open[i] = -1; closed[i] = 0; bytes[i] = 0; }
    d->buckets = calloc((size_t)(d->nparams > 0 ? d->nparams : 1), sizeof *d->buckets);
    if (!d->buckets) return -1;
    /* first pass: each parameter's bucket; buckets numbered in the order they open */
    int *of = malloc(sizeof(int) * (size_t)(d->nparams > 0 ? d->nparams : 1));
    if (!of) return -1;
    for (int i = 0; i < d->nparams; i++) {
        nb_dtype dt = nb_dtype_of(d->params[i].t);
        if (open[dt] < 0) {
            open[dt] = d->nbuckets++;
            d->buckets[open[dt]].dtype = dt;
            bytes[dt] = 0;
        }
        of[i] = open[dt];
        bytes[dt] += (double)nb_numel(d->params[i].t) * (double)nb_dtype_size(dt);
        if (bytes[dt] >= (closed[dt] == 0 ? first : bucket)) {
            open[dt] = -1;
            closed[dt]++;
        }
    }
    /* second pass: the parameters reordered bucket by bucket (stable within each) */
    ddp_param *sorted = malloc(sizeof(ddp_param) * (size_t)(d->nparams > 0 ? d->nparams : 1));
    if (!sorted) { free(of); return -1; }
    int at = 0;
    for (int b = 0; b < d->nbuckets; b++) {
        ddp_bucket *bk = &d->buckets[b];
        bk->first = at;
        for (int i = 0; i < d->nparams; i++) {
            if (of[i] != b) continue;
            sorted[at] = d->params[i];
            sorted[at].bucket = b;
            sorted[at].offset = bk->numel;
            sorted[at].flag = bk->count++;
            int64_t n = nb_numel(d->params[i].t);
            if (nb__add_overflows(bk->numel, n, &bk->numel)) { free(of); free(sorted); return -1; }
            at++;
        }
        int64_t elems, bytes_total;
        if (nb__add_overflows(bk->numel, bk->count, &elems) ||
            nb__mul_overflows(elems, (int64_t)nb_dtype_size(bk->dtype), &bytes_total) || (uint64_t)bytes_total > SIZE_MAX) {
            free(of); free(sorted);
            return -1;
        }
        bk->flat = nb__tensor_new(NB_SHAPE(elems), bk->dtype);
        if (!bk->flat) { free(of); free(sorted); return -1; }
        bk->buf = nb__data(bk->flat);
        int64_t gb = bk->numel * (int64_t)nb_dtype_size(bk->dtype);
        if (gb > d->stats.bucket_bytes_max) d->stats.bucket_bytes_max = gb;
    }
    free(d->params);
    d->params = sorted;
    free(of);
    d->stats.buckets = d->nbuckets;
    return 0;
}

static int build_index(ddp_module *d) {
    if (nb__dist_index_init(&d->index, d->nparams) < 0) return -1;
    for (int i = 0; i < d->nparams; i++) nb__dist_index_put(&d->index, d->params[i].t, i);
    return 0;
}

/* Where parameter p's used flag lies in its bucket (after the gradients). */
static char *flag_of(const ddp_module *d, const ddp_param *p) {
    const ddp_bucket *b = &d->buckets[p->bucket];
    return (char *)b->buf + (size_t)(b->numel + p->flag) * nb_dtype_size(b->dtype);
}

/* Writes parameter p's used flag into its bucket: 1 when this rank made its gradient. */
static void set_flag(ddp_module *d, ddp_param *p, bool used) {
    char *flag = flag_of(d, p);
    if (d->buckets[p->bucket].dtype == NB_F32) *(float *)flag = used ? 1.0f : 0.0f;
    else *(double *)flag = used ? 1.0 : 0.0;
}

/* Writes gradient g of parameter p divided by the world size (zeros when g is NULL) and its used
   flag into p's bucket: the sum over the ranks is then the average, as torch's reducer divides before it
   sums (exact on a power-of-two world; on others each rank's share is rounded once more). */
static void pack_grad(ddp_module *d, ddp_param *p, nb_tensor *g) {
    ddp_bucket *b = &d->buckets[p->bucket];
    size_t es = nb_dtype_size(b->dtype);
    char *dst = (char *)b->buf + (size_t)p->offset * es;
    int64_t n = nb_numel(p->t);
    bool used = g != NULL;
    /* the gradient may be last step's view of this very slot (no zero_grad since): it is there */
    bool in_place = used && g->storage == b->flat->storage && nb__data(g) == (void *)dst;
    if (used && !in_place) {
        /* a contiguous host gradient is scaled as it is copied; any other is copied, then scaled */
        if (nb_is_contiguous(g) && g->storage->device.type == NB_CPU && nb_dtype_of(g) == b->dtype)
            nb__dist_scale(dst, nb__data(g), n, b->dtype, nb_dist_world_size());
        else if (nb_copy_to(g, dst, (size_t)n * es) < 0) used = false;
        else in_place = true;
    }
    if (in_place && used) nb__dist_scale(dst, dst, n, b->dtype, nb_dist_world_size());
    if (!used) memset(dst, 0, (size_t)n * es);
    set_flag(d, p, used);
}

/* Packs parameter p's gradient as it is now, in eager mode, and counts it ready. */
static void pack(ddp_module *d, ddp_param *p) {
    pack_grad(d, p, nb_grad_of(p->t));
    p->ready = true;
    d->buckets[p->bucket].ready++;
}

/* Starts bucket b's allreduce; -1 (and the group broken) when MPI refuses. */
static int start_bucket(ddp_module *d, ddp_bucket *b, bool early) {
    if (nb__dist_start_sum(b->buf, b->numel + b->count, b->dtype, "nb_ddp", &b->op) < 0) {
        d->broken = true; /* the end of backward reports it */
        return -1;
    }
    b->launched = true;
    nb__dist_progress(b->op); /* moved on beside the rest of backward */
    if (early) d->stats.buckets_early++;
    else d->stats.buckets_late++;
    return 0;
}

/* MPI moves collectives on only inside its calls: nudges the oldest one in flight. */
static void nudge(ddp_module *d) {
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].op) {
            nb__dist_test(d->buckets[b].op);
            break;
        }
}

static int record_launch(ddp_module *d, int bucket, bool early);

/* Starts the buckets that are full, in order (records their launches when traced); early: during
   backward. */
static void launch_ready(ddp_module *d, bool early) {
    while (d->next_launch < d->nbuckets && d->buckets[d->next_launch].ready == d->buckets[d->next_launch].count) {
        /* traced: the launch is recorded, for every replay to run */
        if (nb__tracing() ? record_launch(d, d->next_launch, early) < 0 : start_bucket(d, &d->buckets[d->next_launch], early) < 0) {
            if (nb__tracing()) d->record_failed = true;
            return;
        }
        d->next_launch++;
    }
}

static void on_grad_ready(nb_tensor *leaf, bool got, void *ctx) {
    (void)got; /* the gradient that exists is reduced, whatever this backward added */
    ddp_module *d = ctx;
    if (!d->armed || d->broken) return;
    int i = nb__dist_index_get(&d->index, leaf);
    if (i < 0 || d->params[i].ready) return;
    if (nb__tracing()) { /* shapes only: the launch's host call packs at replay */
        d->params[i].ready = true;
        d->buckets[d->params[i].bucket].ready++;
    } else pack(d, &d->params[i]);
    if (d->buckets[d->params[i].bucket].ready == d->buckets[d->params[i].bucket].count) launch_ready(d, true);
    if (!nb__tracing()) nudge(d);
}

/* The sum over the ranks of parameter p's used flag, after the allreduce (0: no rank had a
   gradient). */
static double ranks_with_grad(const ddp_module *d, const ddp_param *p) {
    const char *flag = flag_of(d, p);
    return d->buckets[p->bucket].dtype == NB_F32 ? *(const float *)flag : *(const double *)flag;
}

/* Gives every parameter that had a gradient on some rank a view of its slot of the reduced
   bucket (the average) as its gradient, as torch's gradient_as_bucket_view: no copy out. The next
   backward's packing writes the slots again, so a gradient kept from an earlier step changes
   then (zero the gradients before each backward, as DDP asks). */
static int unpack(ddp_module *d) {
    int rc = 0;
    bool prev = nb_set_grad_enabled(false);
    uint64_t errors0 = nb__error_count();
    for (int b = 0; b < d->nbuckets; b++) atomic_fetch_add(&d->buckets[b].flat->storage->version, 1);
    for (int i = 0; i < d->nparams && rc == 0; i++) {
        ddp_param *p = &d->params[i];
        ddp_bucket *b = &d->buckets[p->bucket];
        if (ranks_with_grad(d, p) == 0) continue; /* no rank had a gradient: it keeps none */
        nb_scope *s = nb_scope_begin();
        nb__error_ctx ec;
        nb__error_push(&ec, NULL, "nb_ddp: setting the averaged gradient of \"%s\"", p->name);
        nb_shape shape = nb_shape_of(p->t);
        int64_t stride[NB_MAX_DIMS];
        nb__contiguous_strides(&shape, stride);
        nb_tensor *g = nb__tensor_view(b->flat, shape, stride, p->offset);
        if (g) nb__own(g);
        nb_device dev = nb_device_of(p->t);
        if (g && dev.type != NB_CPU) g = nb_to(g, dev);
        if (g) nb_set_grad(p->t, g);
        if (!g || nb__error_count() != errors0) rc = -1;
        if (rc < 0 && !nb__has_error()) nb__error("out of memory");
        nb__error_pop(&ec);
        nb_scope_end(s);
    }
    nb_set_grad_enabled(prev);
    return rc;
}

/* Records that an earlier reduction broke the group; -1. */
static int broken_error(void) {
    nb__error("nb_ddp: a gradient allreduce failed in an earlier step; the process group is unusable (restart the job)");
    return -1;
}

/* Waits for every bucket started; -1 with an error (and the group broken) when one failed. */
static int wait_buckets(ddp_module *d) {
    double t0 = nb__dist_now();
    bool failed = d->broken;
    for (int b = 0; b < d->nbuckets; b++) {
        ddp_bucket *bk = &d->buckets[b];
        if (!bk->launched) continue;
        char what[96];
        snprintf(what, sizeof what, "the gradient allreduce of bucket %d (of %d)", b, d->nbuckets);
        if (!failed && nb__dist_wait(bk->op, "nb_ddp", what) == 0) bk->op = NULL;
        else failed = true;
        if (failed && bk->op) {
            /* in flight or never waited: MPI may still write the buffer */
            bk->flat = NULL; /* never released: MPI may still write it */
            bk->buf = NULL;
            bk->op = NULL;
        }
        bk->launched = false;
    }
    d->stats.wait_seconds += nb__dist_now() - t0;
    if (failed) {
        if (!d->broken) d->broken = true;
        else if (!nb__has_error()) broken_error();
        return -1;
    }
    return 0;
}

/* ---- graph mode: the reducer as host calls ---- */

/* A launch at replay: the graph packed the gradients it makes; the others are zeros with a
   cleared flag. Starts the bucket's allreduce. */
static int launch_call(void *ctx, nb_tensor *const *t, int n) {
    (void)t; (void)n;
    ddp_call *c = ctx;
    ddp_module *d = c->d;
    ddp_bucket *b = &d->buckets[c->bucket];
    if (d->broken || !b->buf) return broken_error();
    for (int j = 0; j < b->count; j++) {
        ddp_param *p = &d->params[b->first + j];
        if (!c->has_grad[j]) pack_grad(d, p, NULL);
        else set_flag(d, p, true);
    }
    if (start_bucket(d, b, c->early) < 0) return -1;
    nudge(d);
    return 0;
}

/* At the start of a replay's forward: a bucket still in flight from a replay that failed before
   its finish is waited for (the group breaks if that fails), since this replay's kernels write
   the buckets before any launch could. */
static int settle_call(void *ctx, nb_tensor *const *t, int n) {
    (void)t; (void)n;
    ddp_module *d = ctx;
    for (int b = 0; b < d->nbuckets; b++)
        if (d->buckets[b].launched) return wait_buckets(d);
    return d->broken ? broken_error() : 0;
}

/* The finish at replay: waits for every bucket and checks that no parameter got a gradient on
   another rank only. The averages need no copying: the trace made each gradient the graph hands
   its leaf a view of the parameter's slot (bucket_views), as eager DDP's unpack does. */
static int finish_call(void *ctx, nb_tensor *const *t, int n) {
    (void)t; (void)n;
    ddp_call *c = ctx;
    ddp_module *d = c->d;
    if (wait_buckets(d) < 0) return -1;
    for (int i = 0; i < d->nparams; i++) {
        ddp_param *p = &d->params[i];
        if (!c->has_grad[i] && ranks_with_grad(d, p) != 0) {
            nb__error("nb_ddp: \"%s\" got a gradient on another rank, but this rank's compiled step makes none (the "
                      "ranks traced different graphs)", p->name);
            return -1;
        }
    }
    d->stats.backwards++;
    return 0;
}

/* The buffers of buckets [first, first + count) as host-call inputs (malloc'ed), or NULL. */
static nb_tensor **bucket_buffers(ddp_module *d, int first, int count) {
    nb_tensor **t = malloc(sizeof *t * (size_t)(count > 0 ? count : 1));
    if (t)
        for (int b = 0; b < count; b++) t[b] = d->buckets[first + b].flat;
    return t;
}

/* Traced: divides each gradient of bucket b that the step made by the world size into its slot
   of the bucket, by ops (the eager pack_grad's arithmetic). */
static int record_pack(ddp_module *d, int bucket) {
    ddp_bucket *b = &d->buckets[bucket];
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *world = nb_full(NB_SHAPE(), (double)nb_dist_world_size(), b->dtype);
    int rc = world ? 0 : -1;
    for (int j = 0; j < b->count && rc == 0; j++) {
        ddp_param *p = &d->params[b->first + j];
        nb_tensor *g = nb_grad_of(p->t);
        if (!g) continue;
        nb_tensor *slot = nb_slice(b->flat, 0, p->offset, p->offset + nb_numel(p->t), 1);
        slot = slot ? nb_view(slot, nb_shape_of(p->t)) : NULL;
        nb_tensor *q = slot ? nb_div(g, world) : NULL;
        if (!q || nb_assign(slot, q) < 0) rc = -1;
    }
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    return rc;
}

/* Records a host call of fn over the bucket's buffer (a launch) or every bucket's (the finish,
   bucket -1), noting which of its parameters have a gradient now. */
static int record_call(ddp_module *d, int bucket, bool early, nb_host_fn fn) {
    int first = bucket >= 0 ? d->buckets[bucket].first : 0;
    int count = bucket >= 0 ? d->buckets[bucket].count : d->nparams;
    if (bucket >= 0 && record_pack(d, bucket) < 0) return -1;
    ddp_call *c = calloc(1, sizeof *c);
    nb_tensor **t = bucket >= 0 ? bucket_buffers(d, bucket, 1) : bucket_buffers(d, 0, d->nbuckets);
    if (c) c->has_grad = malloc(sizeof(bool) * (size_t)(count ? count : 1));
    if (!c || !t || !c->has_grad) {
        if (c) free(c->has_grad);
        free(c);
        free(t);
        nb__error("nb_ddp: out of memory recording the gradient reduction of a compiled step");
        return -1;
    }
    c->d = d;
    c->bucket = bucket;
    c->early = early;
    c->next = d->calls;
    d->calls = c; /* d owns it from now: a graph that recorded it may replay it */
    for (int j = 0; j < count; j++) c->has_grad[j] = nb_grad_of(d->params[first + j].t) != NULL;
    int rc = nb__host_call(fn, c, t, bucket >= 0 ? 1 : d->nbuckets);
    free(t);
    return rc;
}

static int record_launch(ddp_module *d, int bucket, bool early) { return record_call(d, bucket, early, launch_call); }

static void free_calls(ddp_module *d) {
    while (d->calls) {
        ddp_call *c = d->calls;
        d->calls = c->next;
        free(c->has_grad);
        free(c);
    }
}

/* Traced, after the finish: every parameter with a gradient gets, as its gradient, a view of its
   slot of the bucket, made by traced ops on the bucket's buffer (which the finish writes), so
   each replay hands the leaves the averages in place and what reads them (the optimizer's
   update) reads the bucket after the finish: one copy fewer than writing them back. */
static int bucket_views(ddp_module *d) {
    bool prev = nb_set_grad_enabled(false);
    int rc = 0;
    nb__error_ctx ec;
    nb__error_push(&ec, NULL, "nb_ddp: making the averaged gradients of a compiled step");
    for (int i = 0; i < d->nparams && rc == 0; i++) {
        ddp_param *p = &d->params[i];
        if (!nb_grad_of(p->t)) continue;
        nb_scope *s = nb_scope_begin();
        nb_tensor *slot = nb_slice(d->buckets[p->bucket].flat, 0, p->offset, p->offset + nb_numel(p->t), 1);
        nb_tensor *g = slot ? nb_view(slot, nb_shape_of(p->t)) : NULL;
        if (g) nb_set_grad(p->t, g);
        else rc = -1;
        nb_scope_end(s);
    }
    if (rc < 0 && !nb__has_error()) nb__error("out of memory");
    nb__error_pop(&ec);
    nb_set_grad_enabled(prev);
    return rc;
}

static int on_backward_finished(int rc, void *ctx) {
    ddp_module *d = ctx;
    if (!d->armed) return 0;
    d->armed = false;
    if (nb__tracing()) {
        /* the buckets not started during backward, then the finish, all as host calls */
        for (int b = d->next_launch; b < d->nbuckets && !d->record_failed; b++)
            if (record_launch(d, b, false) < 0) d->record_failed = true;
        bool failed = d->record_failed || record_call(d, -1, false, finish_call) < 0 || bucket_views(d) < 0;
        d->record_failed = false;
        return failed ? -1 : rc;
    }
    /* what backward did not reach: zeros and a cleared flag, so every rank starts every bucket */
    if (!d->broken) {
        for (int i = 0; i < d->nparams; i++)
            if (!d->params[i].ready) pack(d, &d->params[i]);
        launch_ready(d, false);
    }
    if (wait_buckets(d) < 0) return -1;
    d->stats.backwards++;
    if (rc < 0) return rc; /* this rank's backward failed: its peers were served, its gradients stay */
    return unpack(d);
}

static nb_tensor *ddp_forward(nb_module *self, nb_tensor *x) {
    ddp_module *d = (ddp_module *)self;
    d->inner->training = self->training;
    if (nb_is_grad_enabled() && nb__tracing() && d->shard != NB_SHARD_NONE) {
        /* ZeRO-1's sharded step and broadcast run outside backward's hooks, where no host call records them */
        nb__error("nb_ddp: a ZeRO-1 training step cannot be compiled yet (nb_compile would replay it without its "
                  "parameter broadcast); run it eagerly, or use plain DDP (NB_SHARD_NONE) under nb_compile");
        return NULL;
    }
    if (nb_is_grad_enabled() && nb__tracing() && d->nbuckets > 0) {
        nb_tensor **t = bucket_buffers(d, 0, d->nbuckets);
        int rc = t ? nb__host_call(settle_call, d, t, d->nbuckets) : -1;
        free(t);
        if (rc < 0) {
            if (!nb__has_error()) nb__error("nb_ddp: out of memory recording a compiled step");
            return NULL;
        }
    }
    if (nb_is_grad_enabled()) {
        d->armed = true;
        d->next_launch = 0;
        for (int i = 0; i < d->nparams; i++) d->params[i].ready = false;
        for (int b = 0; b < d->nbuckets; b++) d->buckets[b].ready = 0;
    }
    return nb_forward(d->inner, x);
}

static void ddp_free(nb_module *self) {
    ddp_module *d = (ddp_module *)self;
    if (d->hooks >= 0) nb__backward_hooks_remove(d->hooks);
    if (d->shard == NB_SHARD_OPTIMIZER) nb__optim_partition_set(self, NULL);
    free(d->staging);
    /* a compiled step whose replay failed between a launch and its finish left it in flight */
    bool in_flight = false;
    for (int b = 0; b < d->nbuckets; b++) in_flight = in_flight || d->buckets[b].launched;
    bool had_error = nb__has_error();
    if (in_flight && !d->broken && wait_buckets(d) < 0 && !had_error) nb_error_clear(); /* freeing reports nothing */
    free_calls(d);
    for (int b = 0; b < d->nbuckets; b++) nb_release(d->buckets[b].flat);
    free(d->buckets);
    free(d->params);
    nb__dist_index_free(&d->index);
    /* the inner module goes with its registry, which base shares: base gets its own empty one
       back for nb_module_free to free */
    nb_module_free(d->inner);
    self->state = d->own_state;
}

int nb__ddp_prepare(nb_module *m, double bucket, nb_named_tensor **params, int *nparams, nb_named_tensor **buffers,
                    int *nbuffers) {
    nb_named_tensor *pl = NULL, *bl = NULL;
    int np = nb_module_named_parameters(m, NULL, 0), nbuf = nb_module_named_buffers(m, NULL, 0);
    if (np < 0 || nbuf < 0) return -1;
    pl = malloc(sizeof *pl * (size_t)(np > 0 ? np : 1));
    bl = malloc(sizeof *bl * (size_t)(nbuf > 0 ? nbuf : 1));
    if (!pl || !bl) { nb__error("nb_ddp: out of memory"); goto fail; }
    nb_module_named_parameters(m, pl, np);
    nb_module_named_buffers(m, bl, nbuf);
    for (int i = 0; i < np; i++) {
        nb_tensor *t = pl[i].tensor;
        char desc[200];
        nb_dtype dt = nb_dtype_of(t);
        if (dt != NB_F32 && dt != NB_F64) {
            nb__error("nb_ddp: parameter \"%s\" is %s; DDP reduces f32 and f64 gradients", pl[i].name, nb_dtype_name(dt));
            goto fail;
        }
        if (nb_device_of(t).type != NB_CPU || !nb_is_contiguous(t)) {
            nb__error("nb_ddp: parameter \"%s\" is not a contiguous cpu tensor (%s on %s); MPI reduces host memory (NCCL is "
                      "not built yet)", pl[i].name, nb_dtype_name(dt), nb_device_str(nb_device_of(t), desc, sizeof desc));
            goto fail;
        }
    }
    if (check_ranks(pl, np, bl, nbuf, bucket) < 0) goto fail;
    /* rank 0's values everywhere: parameters, then buffers, in registration order */
    for (int i = 0; i < np + nbuf; i++) {
        const nb_named_tensor *e = i < np ? &pl[i] : &bl[i - np];
        nb_tensor *t = e->tensor;
        if (nb_device_of(t).type != NB_CPU || !nb_is_contiguous(t)) {
            nb__error("nb_ddp: buffer \"%s\" is not a contiguous cpu tensor; MPI broadcasts host memory", e->name);
            goto fail;
        }
        nb__error_ctx ec;
        nb__error_push(&ec, NULL, "nb_ddp: broadcasting \"%s\" from rank 0", e->name);
        int brc = nb_dist_broadcast(t, 0);
        if (brc < 0 && !nb__has_error()) nb__error("failed");
        nb__error_pop(&ec);
        if (brc < 0) goto fail;
    }
    *params = pl, *nparams = np, *buffers = bl, *nbuffers = nbuf;
    return 0;
fail:
    free(pl);
    free(bl);
    return -1;
}

nb_module *nb_ddp(nb_module *m, nb_ddp_opts opts) {
    const char *fn = "nb_ddp";
    if (!m) {
        if (!nb__has_error()) nb__error("nb_ddp: module is NULL");
        return NULL;
    }
    if (m->cls == &DDP || nb__fsdp_is(m)) {
        nb__error("nb_ddp: the module is a DDP module already");
        return NULL; /* it is not taken over: freeing it would free the caller's DDP */
    }
    if (!nb__enum_ok("nb_ddp", "shard", (int)opts.shard, NB_SHARD_FULL + 1, "nb_shard", "none, optimizer, full")) {
        nb_module_free(m);
        return NULL;
    }
    if (!(opts.bucket_mb >= 0) || opts.bucket_mb > 1e6) {
        nb__error("nb_ddp: bucket_mb %g must be in [0, 1e6] (0: 25 MiB)", opts.bucket_mb);
        nb_module_free(m);
        return NULL;
    }
    if (nb__dist_usable(fn) < 0) { nb_module_free(m); return NULL; }
    double bucket = (opts.bucket_mb > 0 ? opts.bucket_mb : 25.0) * 1048576.0;
    double first = bucket < 1048576.0 ? bucket : 1048576.0;

    nb_named_tensor *pl = NULL, *bl = NULL;
    int np = 0, nbuf = 0;
    if (nb__ddp_prepare(m, bucket, &pl, &np, &bl, &nbuf) < 0) { nb_module_free(m); return NULL; }
    if (opts.shard == NB_SHARD_FULL) {
        nb_module *f = nb__fsdp_new(m, pl, np, bl, nbuf);
        free(pl);
        free(bl);
        return f;
    }
    ddp_module *d = (ddp_module *)nb_module_new(&DDP, sizeof(ddp_module));
    if (!d) { free(pl); free(bl); nb_module_free(m); return NULL; }
    d->inner = m;
    d->hooks = -1;
    d->params = calloc((size_t)(np > 0 ? np : 1), sizeof *d->params);
    if (!d->params) { nb__error("nb_ddp: out of memory"); goto fail; }
    /* reverse registration order: backward makes the last layers' gradients first */
    for (int i = 0; i < np; i++) d->params[np - 1 - i] = (ddp_param){ .t = pl[i].tensor, .name = pl[i].name };
    d->nparams = np;
    if (assign_buckets(d, first, bucket) < 0 || build_index(d) < 0) {
        nb__error("nb_ddp: out of memory for the gradient buckets of %d parameters", np);
        goto fail;
    }
    d->hooks = nb__backward_hooks_add((nb_backward_hooks){ .grad_ready = on_grad_ready, .finished = on_backward_finished, .ctx = d });
    if (d->hooks < 0) goto fail;
    if (opts.shard == NB_SHARD_OPTIMIZER) {
        if (nb__ddp_zero_partition(d) < 0) {
            nb__error("nb_ddp: out of memory for the ZeRO-1 partition of %d parameters", np);
            goto fail;
        }
        if (nb__optim_partition_set(&d->base, &(nb__optim_partition){ nb__ddp_zero_owns, nb__ddp_zero_after_step, d }) < 0) goto fail;
        d->shard = NB_SHARD_OPTIMIZER;
    } else {
        d->stats.params_owned = np;
        for (int i = 0; i < np; i++) d->stats.owned_bytes += nb_numel(pl[i].tensor) * (int64_t)nb_dtype_size(nb_dtype_of(pl[i].tensor));
    }
    free(pl);
    free(bl);
    /* share the inner module's registry: the same names, parameters, buffers and children */
    d->own_state = d->base.state;
    d->base.state = m->state;
    d->base.training = m->training;
    return &d->base;
fail:
    free(pl);
    free(bl);
    /* base still has its own registry here: ddp_free frees the inner module and keeps it */
    d->own_state = d->base.state;
    nb_module_free(&d->base);
    return NULL;
}

nb_module *nb_ddp_inner(nb_module *ddp) {
    if (nb__fsdp_is(ddp)) return nb__fsdp_inner(ddp);
    ddp_module *d = as_ddp(ddp, "nb_ddp_inner");
    return d ? d->inner : NULL;
}

nb_ddp_stats nb_ddp_get_stats(nb_module *ddp) {
    if (nb__fsdp_is(ddp)) return nb__fsdp_stats(ddp);
    ddp_module *d = as_ddp(ddp, "nb_ddp_get_stats");
    return d ? d->stats : (nb_ddp_stats){ 0 };
}

int nb_ddp_bucket_info(nb_module *ddp, int i, int64_t *bytes, int *params) {
    if (nb__fsdp_is(ddp)) return nb__fsdp_unit_info(ddp, i, bytes, params);
    ddp_module *d = as_ddp(ddp, "nb_ddp_bucket_info");
    if (!d) return -1;
    if (i < 0 || i >= d->nbuckets) {
        nb__error("nb_ddp_bucket_info: bucket %d of %d", i, d->nbuckets);
        return -1;
    }
    if (bytes) *bytes = d->buckets[i].numel * (int64_t)nb_dtype_size(d->buckets[i].dtype);
    if (params) *params = d->buckets[i].count;
    return 0;
}

bool nb__ddp_is_zero(const nb_module *m) { return m && m->cls == &DDP && ((const ddp_module *)m)->shard == NB_SHARD_OPTIMIZER; }

nb_module *nb__dist_wrapped(nb_module *m) {
    if (nb__fsdp_is(m)) return nb__fsdp_inner(m);
    return m && m->cls == &DDP ? ((ddp_module *)m)->inner : m;
}

int nb__dist_segments(nb_module *m, int i, const nb_named_tensor *entry, nb__dist_segment *out, int cap,
                      nb__dist_layout *layout) {
    if (nb__fsdp_is(m)) {
        *layout = (nb__dist_layout){ false, false };
        return nb__fsdp_segments(m, i, out, cap);
    }
    /* the module's own parameter, under the wrapped module's name */
    *layout = (nb__dist_layout){ true, !nb__ddp_is_zero(m) };
    if (cap > 0) out[0] = (nb__dist_segment){ entry->name, entry->tensor, 0, nb_numel(entry->tensor), 0 };
    return 1;
}
