/* nabla's thread pool: the parallel loops of every kernel run on it. Workers spin briefly after
   a loop and then sleep (a futex on Linux, a condition variable elsewhere), so an idle nabla
   leaves the cores to other programs; the caller takes part and claims any piece a worker has
   not started, so a worker the scheduler has not run yet never holds the loop up. */
#define _GNU_SOURCE
#include "threadpool.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define NB_FUTEX 1
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NB_MXCSR 1
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* Pieces per participant: a few, so a participant that the scheduler delays costs a small
   piece, not a share of the loop. Which iterations form a piece never changes any result: each
   iteration is computed whole by one participant. */
#define PIECES_PER_THREAD 4
#define MAX_WORKERS 1023

/* How long an idle worker (or a caller waiting for the last piece) spins before it sleeps:
   long enough to catch the next loop of a training step, short enough that an idle pool is
   idle. NABLA_SPIN_US overrides it (0: sleep at once). */
#define DEFAULT_SPIN_NS 50000

typedef struct {
    nb_range_fn fn;
    void *ctx;
    int64_t n, piece, pieces;
    int participants;      /* the caller and workers 1 .. participants - 1 */
    unsigned mxcsr;        /* the caller's floating-point mode, which workers take on */
    atomic_llong next;     /* next piece to claim */
    atomic_uint done;      /* pieces finished: the caller's futex word */
    atomic_int caller_sleeps;
} job_t;

static struct {
    pthread_mutex_t spawn_lock;
    int nworkers;          /* started (guarded by spawn_lock; read relaxed elsewhere) */
    atomic_int started;
    atomic_bool shutdown;  /* the library is being unloaded: workers return */
    pthread_t threads[MAX_WORKERS];
    atomic_flag busy;      /* a loop is running: a second caller runs its loop alone */
    atomic_uint gen;       /* odd while a job is open: the workers' futex word */
    atomic_int refs;       /* workers reading the open job */
    atomic_int sleepers;   /* workers asleep on gen */
    job_t job;
    long spin_ns;
#ifndef NB_FUTEX
    pthread_mutex_t lock;
    pthread_cond_t cond;
#endif
} pool = {
    .spawn_lock = PTHREAD_MUTEX_INITIALIZER,
    .busy = ATOMIC_FLAG_INIT,
    .spin_ns = -1,
#ifndef NB_FUTEX
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
#endif
};

/* Set while this thread runs a piece: a loop started inside one runs inline (no nesting). */
static _Thread_local bool in_loop;

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static long spin_ns(void) {
    long s = __atomic_load_n(&pool.spin_ns, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *v = getenv("NABLA_SPIN_US");
        char *end;
        long us = v && *v ? strtol(v, &end, 10) : -1;
        s = us >= 0 && us <= 1000000 && *end == 0 ? us * 1000 : DEFAULT_SPIN_NS;
        __atomic_store_n(&pool.spin_ns, s, __ATOMIC_RELAXED);
    }
    return s;
}

/* Sleeps while *word == value (spurious returns are fine: callers loop). */
static void word_wait(atomic_uint *word, unsigned value) {
#ifdef NB_FUTEX
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#else
    pthread_mutex_lock(&pool.lock);
    if (atomic_load(word) == value) pthread_cond_wait(&pool.cond, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
#endif
}

static void word_wake(atomic_uint *word) {
#ifdef NB_FUTEX
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
#else
    (void)word;
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.cond);
    pthread_mutex_unlock(&pool.lock);
#endif
}

#ifdef NB_MXCSR
static unsigned fp_mode(void) { return _mm_getcsr(); }
static void set_fp_mode(unsigned m) {
    if (_mm_getcsr() != m) _mm_setcsr(m);
}
#else
static unsigned fp_mode(void) { return 0; }
static void set_fp_mode(unsigned m) { (void)m; }
#endif

/* Claims and runs pieces until none is left. */
static void run_pieces(job_t *j, int slot) {
    for (;;) {
        long long p = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (p >= j->pieces) return;
        int64_t lo = p * j->piece, hi = lo + j->piece < j->n ? lo + j->piece : j->n;
        j->fn(j->ctx, lo, hi, slot);
        unsigned d = atomic_fetch_add_explicit(&j->done, 1, memory_order_acq_rel) + 1;
        if (d == (unsigned)j->pieces && atomic_load(&j->caller_sleeps)) word_wake(&j->done);
    }
}

static void *worker_main(void *arg) {
    int slot = (int)(intptr_t)arg;
    in_loop = true;
    unsigned seen = atomic_load(&pool.gen);
    for (;;) {
        /* nothing new: spin for a while, yielding the core to anything else runnable, then sleep */
        unsigned g;
        long deadline = now_ns() + spin_ns();
        int spins = 0;
        while ((g = atomic_load(&pool.gen)) == seen || !(g & 1)) {
            if (atomic_load_explicit(&pool.shutdown, memory_order_relaxed)) return NULL;
            if (++spins < 64) {
                cpu_relax();
                continue;
            }
            spins = 0;
            if (now_ns() >= deadline) {
                atomic_fetch_add(&pool.sleepers, 1);
                g = atomic_load(&pool.gen);
                if ((g == seen || !(g & 1)) && !atomic_load(&pool.shutdown)) word_wait(&pool.gen, g);
                atomic_fetch_sub(&pool.sleepers, 1);
                deadline = now_ns() + spin_ns();
            } else {
                sched_yield();
            }
        }
        seen = g;
        atomic_fetch_add(&pool.refs, 1);
        /* the job may have closed between the load and the reference: then it is not ours */
        if (atomic_load(&pool.gen) == g && slot < pool.job.participants) {
            set_fp_mode(pool.job.mxcsr);
            run_pieces(&pool.job, slot);
        }
        atomic_fetch_sub(&pool.refs, 1);
    }
    return NULL;
}

static void after_fork_child(void) {
    /* the child has none of the parent's workers; the next loop starts its own */
    pool.nworkers = 0;
    atomic_store(&pool.started, 0);
    atomic_store(&pool.refs, 0);
    atomic_store(&pool.sleepers, 0);
    atomic_flag_clear(&pool.busy);
    pthread_mutex_init(&pool.spawn_lock, NULL);
}

/* When the library is unloaded (dlclose) or the process exits: workers must not run on in
   code about to be unmapped, so they are told to return and joined. A worker finishing a piece
   of another thread's loop returns after it. */
__attribute__((destructor)) static void stop_workers(void) {
    pthread_mutex_lock(&pool.spawn_lock);
    atomic_store(&pool.shutdown, true);
    atomic_fetch_add(&pool.gen, 2); /* a worker about to sleep on the old value does not */
    word_wake(&pool.gen);
    for (int i = 0; i < pool.nworkers; i++) pthread_join(pool.threads[i], NULL);
    pool.nworkers = 0;
    atomic_store(&pool.started, 0);
    pthread_mutex_unlock(&pool.spawn_lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void install_atfork(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* Starts workers up to `want` (fewer if the system refuses threads: the loop still completes,
   the caller claiming what nobody else does). */
static void ensure_workers(int want) {
    if (want > MAX_WORKERS) want = MAX_WORKERS;
    if (atomic_load_explicit(&pool.started, memory_order_acquire) >= want) return;
    pthread_once(&atfork_once, install_atfork);
    pthread_mutex_lock(&pool.spawn_lock);
    while (pool.nworkers < want) {
        if (pthread_create(&pool.threads[pool.nworkers], NULL, worker_main, (void *)(intptr_t)(pool.nworkers + 1)) != 0)
            break;
        pool.nworkers++;
    }
    atomic_store_explicit(&pool.started, pool.nworkers, memory_order_release);
    pthread_mutex_unlock(&pool.spawn_lock);
}

void nb__parallel_for(int threads, int64_t n, nb_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (threads > n) threads = n > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : (int)n;
    /* inline: one thread asked for, a loop inside a loop, or the pool busy with another
       thread's loop (two callers never oversubscribe the cores) */
    if (threads <= 1 || in_loop || atomic_flag_test_and_set_explicit(&pool.busy, memory_order_acquire)) {
        bool outer = in_loop;
        in_loop = true;
        fn(ctx, 0, n, 0);
        in_loop = outer;
        return;
    }
    ensure_workers(threads - 1);
    job_t *j = &pool.job;
    j->fn = fn;
    j->ctx = ctx;
    j->n = n;
    int64_t pieces = (int64_t)threads * PIECES_PER_THREAD;
    if (pieces > n) pieces = n;
    j->piece = (n + pieces - 1) / pieces;
    j->pieces = (n + j->piece - 1) / j->piece;
    j->participants = threads;
    j->mxcsr = fp_mode();
    atomic_store_explicit(&j->next, 0, memory_order_relaxed);
    atomic_store_explicit(&j->done, 0, memory_order_relaxed);
    atomic_store_explicit(&j->caller_sleeps, 0, memory_order_relaxed);
    atomic_fetch_add(&pool.gen, 1); /* odd: open */
    if (atomic_load(&pool.sleepers) > 0) word_wake(&pool.gen);

    in_loop = true;
    run_pieces(j, 0);
    in_loop = false;

    /* wait for pieces other participants claimed: spin, then sleep on the done count */
    long deadline = 0;
    unsigned d;
    int spins = 0;
    while ((d = atomic_load_explicit(&j->done, memory_order_acquire)) != (unsigned)j->pieces) {
        if (++spins < 64) {
            cpu_relax();
            continue;
        }
        spins = 0;
        long t = now_ns();
        if (!deadline) deadline = t + spin_ns();
        if (t < deadline) {
            sched_yield();
            continue;
        }
        atomic_store(&j->caller_sleeps, 1);
        if (atomic_load(&j->done) == d) word_wait(&j->done, d);
    }
    atomic_fetch_add(&pool.gen, 1); /* even: closed */
    /* a worker that took a reference before the close is leaving: the job's fields stay
       untouched until it has */
    while (atomic_load(&pool.refs) > 0) sched_yield();
    atomic_flag_clear_explicit(&pool.busy, memory_order_release);
}

int nb__pool_workers(void) { return atomic_load(&pool.started); }
