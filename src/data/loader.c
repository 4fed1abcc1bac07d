/* The data loader: batches in order from a dataset, made in the calling thread or by worker
   threads (pthreads) filling a bounded ring of slots; the order and every sample's randomness
   come from (seed, epoch, index), so results do not depend on the number of workers. With a
   world size above one, each rank serves its shard of the epoch's order, as torch's
   DistributedSampler. */
#include "data_impl.h"
#ifdef NABLA_HAVE_DNNL
#include <omp.h>
#endif
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The default shard of a loader (opts.world_size 0), as nb_dist_init set it. */
static _Atomic int dist_rank = 0, dist_world = 1;

void nb__data_set_dist_default(int rank, int world_size) {
    atomic_store(&dist_rank, rank);
    atomic_store(&dist_world, world_size > 0 ? world_size : 1);
}

enum { SLOT_FREE, SLOT_BUSY, SLOT_READY };

typedef struct {
    int state;
    int64_t batch;
    nb_tensor *x, *y;
    char *err; /* malloc'd message when making the batch failed */
} slot_t;

struct nb_data_loader {
    nb_dataset *ds;
    nb_loader_opts opts;
    int64_t len;      /* samples this rank serves an epoch (the dataset's, with one rank) */
    int64_t ds_len;   /* samples in the dataset */
    int rank, world;  /* this loader's shard */
    int64_t *perm;    /* the whole epoch's order, when world > 1 */
    int64_t nbatches; /* per epoch */
    int64_t *order;   /* this epoch's sample order */
    int64_t epoch;    /* the epoch being served */
    uint64_t key;     /* this epoch's randomness: nb_data_key(seed, epoch) */
    bool failed;
    nb_batch held;    /* the batch last returned (owned, lent to the caller) */
    nb_loader_stats stats;

    /* workers */
    pthread_mutex_t lock;
    pthread_cond_t work, ready;
    pthread_t *threads;
    int nthreads;
    bool stop;
    uint64_t gen;     /* bumped at each epoch start; stale results are dropped */
    int64_t next_dispatch, next_return;
    int idle_workers;  /* workers asleep on work */
    int64_t awaited;   /* the batch the loop sleeps on ready for; -1 when it is not asleep */
    slot_t *slots;
    int nslots;
};


/* Makes batch b of the current epoch (indices copied by the caller) as owned references. Errors
   are left in this thread's error state. */
static int make_batch(nb_data_loader *l, const int64_t *idx, int64_t n, uint64_t key, nb_batch *out) {
    nb_scope *s = nb_scope_begin();
    nb_batch b;
    int rc = nb__ds_get_batch(l->ds, idx, n, key, &b);
    if (rc == 0 && l->opts.device.type != NB_CPU) {
        /* delivered on the training device: the copy runs here, in the worker, beside the step */
        bool has_y = b.y != NULL;
        b.x = nb_to(b.x, l->opts.device);
        if (has_y) b.y = nb_to(b.y, l->opts.device);
        if (!b.x || (has_y && !b.y)) rc = -1;
    }
    if (rc == 0) {
        out->x = nb_retain(b.x);
        out->y = b.y ? nb_retain(b.y) : NULL;
    }
    nb_scope_end(s);
    return rc;
}

/* The samples in batch b (< nbatches, so b * batch_size < len: nothing here overflows). */
static int64_t batch_size(const nb_data_loader *l, int64_t b) {
    int64_t bs = l->opts.batch_size, start = b * bs;
    return bs <= l->len - start ? bs : l->len - start;
}

static char *format_failure(int64_t b, const int64_t *idx, int64_t n) {
    const char *inner = nb_error();
    char *msg = malloc(2300);
    if (msg)
        snprintf(msg, 2300, "nb_data_loader: batch %lld (samples %lld..., %lld in all): %s", (long long)b,
                 (long long)(n ? idx[0] : -1), (long long)n, inner ? inner : "the dataset failed without a message");
    return msg;
}

static void *worker_main(void *arg) {
    nb_data_loader *l = arg;
    /* Workers run per-sample work on one thread each: no kernel thread teams of their own,
       which would spin on cores the training loop needs. */
#ifdef NABLA_HAVE_DNNL
    omp_set_num_threads(1); /* oneDNN sizes its teams from this */
#endif
    nb__limit_threads(1);
    /* Workers yield to the training loop: when threads outnumber cores, the scheduler should
       run the loop first and feed workers the rest, so the loop does not wait behind them.
       Not by much: with a transform as costly as a step and 2 workers on 2 cores, +4 served
       the loop as well as +5 on an otherwise idle machine and starved the workers less when
       other programs took CPU time; +2 and below (and SCHED_IDLE) made the loop wait longer.
       (Raising a thread's nice value needs no privilege; a failure changes nothing.) */
    enum { WORKER_NICE = 4 };
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (errno == 0)
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_now + WORKER_NICE > 19 ? 19 : nice_now + WORKER_NICE);
    int64_t *idx = nb__alloc_i64(l->opts.batch_size < l->len ? l->opts.batch_size : l->len);
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->stop && !(l->next_dispatch < l->nbatches && l->next_dispatch < l->next_return + l->nslots)) {
            l->idle_workers++;
            pthread_cond_wait(&l->work, &l->lock);
            l->idle_workers--;
        }
        if (l->stop) break;
        int64_t b = l->next_dispatch++;
        uint64_t gen = l->gen, key = l->key;
        int64_t n = batch_size(l, b);
        if (idx) memcpy(idx, l->order + b * l->opts.batch_size, sizeof(int64_t) * (size_t)n);
        slot_t *s = &l->slots[b % l->nslots];
        s->state = SLOT_BUSY;
        s->batch = b;
        pthread_mutex_unlock(&l->lock);

        nb_batch out = { 0 };
        char *err = NULL;
        /* a failure is handed to the loop, which tells it (quiet: the handler fires there, once) */
        nb__error_ctx quiet;
        nb__error_quiet(&quiet);
        nb_error_clear();
        if (!idx) {
            nb__error("nb_data_loader: out of memory in a worker");
            err = format_failure(b, NULL, 0);
        } else if (make_batch(l, idx, n, key, &out) < 0) {
            err = format_failure(b, idx, n);
        }
        nb_error_clear();
        nb__error_pop(&quiet);

        pthread_mutex_lock(&l->lock);
        if (gen == l->gen && !l->stop) {
            s->x = out.x;
            s->y = out.y;
            s->err = err;
            s->state = SLOT_READY;
            /* Wake the loop only when it sleeps on this very batch: a batch made ahead is
               found ready when its turn comes, with no wake-up (and no switch) at all. */
            if (l->awaited == b) pthread_cond_signal(&l->ready);
        } else {
            pthread_mutex_unlock(&l->lock);
            nb_release(out.x);
            nb_release(out.y);
            free(err);
            pthread_mutex_lock(&l->lock);
        }
    }
    pthread_mutex_unlock(&l->lock);
    free(idx);
    return NULL;
}

/* Empties every slot, releasing what it holds. Called with the lock held. */
static void clear_slots(nb_data_loader *l) {
    for (int i = 0; i < l->nslots; i++) {
        slot_t *s = &l->slots[i];
        nb_release(s->x);
        nb_release(s->y);
        free(s->err);
        s->x = s->y = NULL;
        s->err = NULL;
        s->state = SLOT_FREE;
    }
}

static void release_held(nb_data_loader *l) {
    nb_release(l->held.x);
    nb_release(l->held.y);
    l->held.x = l->held.y = NULL;
}

/* Sets up the order of epoch l->epoch and lets the workers start on it at batch first. */
static void start_epoch_at(nb_data_loader *l, int64_t first) {
    if (l->nthreads) pthread_mutex_lock(&l->lock);
    l->key = nb_data_key(l->opts.seed, (uint64_t)l->epoch);
    int64_t *all = l->world > 1 ? l->perm : l->order;
    if (l->opts.shuffle) nb__data_permutation(all, l->ds_len, nb_data_key(l->key, 0x73687566ull));
    else for (int64_t i = 0; i < l->ds_len; i++) all[i] = i;
    /* the rank's shard: every world-th sample of the order padded cyclically to a multiple of
       the world size (len * world < ds_len + world, so the index fits) */
    if (l->world > 1)
        for (int64_t i = 0; i < l->len; i++) l->order[i] = all[(l->rank + i * l->world) % l->ds_len];
    l->next_dispatch = l->next_return = first;
    if (l->nthreads) {
        l->gen++;
        clear_slots(l);
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->lock);
    }
}

static void start_epoch(nb_data_loader *l) { start_epoch_at(l, 0); }

int nb_data_loader_set_position(nb_data_loader *l, int64_t epoch, int64_t batch) {
    if (!l) return -1;
    if (epoch < 0 || epoch == INT64_MAX || batch < 0 || batch > l->nbatches) {
        nb__error("nb_data_loader_set_position: epoch %lld, batch %lld is not a position of this loader (%lld batches an epoch)",
                  (long long)epoch, (long long)batch, (long long)l->nbatches);
        return -1;
    }
    release_held(l);
    l->epoch = epoch;
    start_epoch_at(l, batch);
    return 0;
}

void nb_data_loader_position(const nb_data_loader *l, int64_t *epoch, int64_t *batch) {
    if (epoch) *epoch = l ? l->epoch : 0;
    if (batch) *batch = l ? l->next_return : 0;
}

nb_data_loader *nb_data_loader_new(nb_dataset *ds, nb_loader_opts opts) {
    if (!ds) { if (!nb__has_error()) nb__error("nb_data_loader_new: dataset is NULL"); return NULL; }
    if (opts.batch_size < 0 || opts.num_workers < 0 || opts.prefetch < 0 || opts.num_workers > 1024) {
        nb__error("nb_data_loader_new: batch_size %lld, num_workers %d and prefetch %d must be >= 0 (num_workers at most 1024)",
                  (long long)opts.batch_size, opts.num_workers, opts.prefetch);
        return NULL;
    }
    if (!nb_device_available(opts.device)) {
        char dv[32];
        nb__error("nb_data_loader_new: device %s is not available (nb_device_count: %d)",
                  nb_device_str(opts.device, dv, sizeof dv), nb_device_count(opts.device.type));
        return NULL;
    }
    if (opts.batch_size == 0) opts.batch_size = 1;
    if (opts.prefetch == 0) opts.prefetch = 2;
    /* the ring holds num_workers * prefetch batches: at most 65536 of them */
    int64_t nslots;
    if (nb__mul_overflows(opts.num_workers, opts.prefetch, &nslots) || nslots > 65536) {
        nb__error("nb_data_loader_new: prefetch %d times num_workers %d is %lld batches in flight; at most 65536",
                  opts.prefetch, opts.num_workers, (long long)nslots);
        return NULL;
    }
    if (opts.seed == 0) {
        uint64_t seed, offset;
        nb__rng_reserve(4, &seed, &offset);
        uint32_t w[4];
        nb__philox(seed, offset, w);
        opts.seed = (uint64_t)w[0] | (uint64_t)w[1] << 32;
    }
    if (opts.world_size == 0) {
        if (opts.rank != 0) {
            nb__error("nb_data_loader_new: rank %d with world_size 0: give both, or neither (they then come from nb_dist)",
                      opts.rank);
            return NULL;
        }
        opts.rank = atomic_load(&dist_rank);
        opts.world_size = atomic_load(&dist_world);
    }
    if (opts.world_size < 0 || opts.rank < 0 || opts.rank >= opts.world_size) {
        nb__error("nb_data_loader_new: rank %d is not a rank of a world of %d (0 <= rank < world_size)", opts.rank,
                  opts.world_size);
        return NULL;
    }
    int64_t ds_len = nb_dataset_len(ds);
    if (ds_len < 0) { nb__error("nb_data_loader_new: the dataset's len is %lld", (long long)ds_len); return NULL; }
    /* this rank's samples: ceil(ds_len / world) (the shard of a padded order) */
    int64_t len = ds_len / opts.world_size + (ds_len % opts.world_size ? 1 : 0);
    nb_data_loader *l = calloc(1, sizeof *l);
    if (!l) { nb__error("nb_data_loader_new: out of memory"); return NULL; }
    l->ds = ds;
    atomic_fetch_add(&ds->refcount, 1);
    l->opts = opts;
    l->len = len;
    l->ds_len = ds_len;
    l->rank = opts.rank;
    l->world = opts.world_size;
    l->awaited = -1;
    /* batches an epoch, rounded up unless drop_last: no len + batch_size - 1, which overflows
       for a batch_size near INT64_MAX */
    l->nbatches = len / opts.batch_size + (!opts.drop_last && len % opts.batch_size ? 1 : 0);
    l->order = nb__alloc_i64(len);
    if (l->world > 1) l->perm = nb__alloc_i64(ds_len);
    if (!l->order || (l->world > 1 && !l->perm)) {
        nb__error("nb_data_loader_new: out of memory for the order of %lld samples", (long long)ds_len);
        nb_data_loader_free(l);
        return NULL;
    }
    if (opts.num_workers > 0) {
        l->nslots = (int)nslots;
        l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
        l->threads = calloc((size_t)opts.num_workers, sizeof *l->threads);
        if (!l->slots || !l->threads) goto oom;
        pthread_mutex_init(&l->lock, NULL);
        pthread_cond_init(&l->work, NULL);
        pthread_cond_init(&l->ready, NULL);
        for (int i = 0; i < opts.num_workers; i++) {
            if (pthread_create(&l->threads[i], NULL, worker_main, l) != 0) {
                nb__error("nb_data_loader_new: cannot start worker thread %d", i);
                nb_data_loader_free(l);
                return NULL;
            }
            l->nthreads++;
        }
    }
    start_epoch(l);
    return l;
oom:
    nb__error("nb_data_loader_new: out of memory");
    nb_data_loader_free(l);
    return NULL;
}


/* Ends the epoch (at its end or after an error) and starts the next one. */
static void end_epoch(nb_data_loader *l) {
    l->epoch++;
    l->stats.epochs++;
    start_epoch(l);
}

bool nb_data_loader_next(nb_data_loader *l, nb_batch *out) {
    if (out) out->x = out->y = NULL;
    if (!l || !out) { nb__error("nb_data_loader_next: loader or out is NULL"); return false; }
    release_held(l);
    l->failed = false;
    if (l->next_return >= l->nbatches) {
        end_epoch(l);
        return false;
    }
    double t0 = nb__now();
    int64_t b = l->next_return;
    char *err = NULL;
    nb_batch got = { 0 };
    if (l->nthreads == 0) {
        int64_t n = batch_size(l, b);
        const int64_t *idx = l->order + b * l->opts.batch_size;
        /* Keep an error the caller already had; otherwise wrap the dataset's message (quiet: the
           handler fires once, for the wrapped message) */
        bool had = nb__has_error();
        nb__error_ctx quiet;
        nb__error_quiet(&quiet);
        if (make_batch(l, idx, n, l->key, &got) < 0) {
            err = format_failure(b, idx, n);
            if (!had) nb_error_clear();
        }
        nb__error_pop(&quiet);
        l->next_return++;
    } else {
        pthread_mutex_lock(&l->lock);
        slot_t *s = &l->slots[b % l->nslots];
        while (!(s->state == SLOT_READY && s->batch == b)) {
            l->awaited = b;
            pthread_cond_wait(&l->ready, &l->lock);
        }
        l->awaited = -1;
        got.x = s->x;
        got.y = s->y;
        err = s->err;
        s->x = s->y = NULL;
        s->err = NULL;
        s->state = SLOT_FREE;
        l->next_return++;
        /* One slot came free, so one sleeping worker (if any) has a batch to make. */
        if (l->idle_workers > 0) pthread_cond_signal(&l->work);
        pthread_mutex_unlock(&l->lock);
    }
    l->stats.wait_seconds += nb__now() - t0;
    if (err) {
        nb__error("%s", err);
        free(err);
        nb_release(got.x);
        nb_release(got.y);
        l->failed = true;
        end_epoch(l);
        return false;
    }
    l->held = got;
    *out = got;
    l->stats.batches++;
    return true;
}

bool nb_data_loader_failed(const nb_data_loader *l) { return l && l->failed; }

int64_t nb_data_loader_len(const nb_data_loader *l) { return l ? l->nbatches : 0; }

nb_loader_stats nb_data_loader_stats(const nb_data_loader *l) {
    return l ? l->stats : (nb_loader_stats){ 0 };
}

double nb_data_loader_wait_seconds(const nb_data_loader *l) { return l ? l->stats.wait_seconds : 0; }

void nb_data_loader_free(nb_data_loader *l) {
    if (!l) return;
    if (l->slots && l->threads) {
        pthread_mutex_lock(&l->lock);
        l->stop = true;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->lock);
        for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
        clear_slots(l);
        pthread_cond_destroy(&l->work);
        pthread_cond_destroy(&l->ready);
        pthread_mutex_destroy(&l->lock);
    }
    release_held(l);
    free(l->slots);
    free(l->threads);
    free(l->order);
    free(l->perm);
    nb_dataset_free(l->ds);
    free(l);
}
