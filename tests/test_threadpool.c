/* The thread pool on its own (built with src/core/threadpool.c alone, and again under
   ThreadSanitizer): every iteration runs exactly once, slots stay below the threads asked for,
   loops nest and run from several user threads at once, a forked child still completes its
   loops, and workers take on the caller's floating-point mode. */
#define _GNU_SOURCE
#include "../src/core/threadpool.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

static int failures;
#define CHECK(cond, ...)                                 \
    do {                                                 \
        if (!(cond)) {                                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                \
            fprintf(stderr, "\n");                       \
            failures++;                                  \
        }                                                \
    } while (0)

typedef struct {
    atomic_int *hits;
    int threads;
    atomic_int bad_slot, bad_range;
    int64_t n;
    int nest; /* run an inner loop from each range this many levels deep */
} cover_ctx;

static void cover(void *c, int64_t lo, int64_t hi, int slot) {
    cover_ctx *x = c;
    if (slot < 0 || slot >= x->threads) atomic_fetch_add(&x->bad_slot, 1);
    if (lo < 0 || hi > x->n || lo >= hi) atomic_fetch_add(&x->bad_range, 1);
    for (int64_t i = lo; i < hi && i < x->n && i >= 0; i++) atomic_fetch_add_explicit(&x->hits[i], 1, memory_order_relaxed);
    if (x->nest > 0) {
        /* an inner loop over its own counters: runs inline on this participant */
        atomic_int inner[16];
        for (int k = 0; k < 16; k++) atomic_init(&inner[k], 0);
        cover_ctx y = { inner, x->threads, 0, 0, 16, x->nest - 1 };
        nb__parallel_for(x->threads, 16, cover, &y);
        for (int k = 0; k < 16; k++)
            if (atomic_load(&inner[k]) != 1) atomic_fetch_add(&x->bad_range, 1);
        if (atomic_load(&y.bad_slot) || atomic_load(&y.bad_range)) atomic_fetch_add(&x->bad_range, 1);
    }
}

/* One loop of n iterations on `threads`; true when each ran once. */
static bool run_once(int threads, int64_t n, int nest) {
    atomic_int *hits = calloc((size_t)(n ? n : 1), sizeof *hits);
    cover_ctx x = { hits, threads, 0, 0, n, nest };
    nb__parallel_for(threads, n, cover, &x);
    bool ok = atomic_load(&x.bad_slot) == 0 && atomic_load(&x.bad_range) == 0;
    for (int64_t i = 0; i < n; i++) ok = ok && atomic_load(&hits[i]) == 1;
    free(hits);
    return ok;
}

static void test_coverage(void) {
    static const int64_t sizes[] = { 0, 1, 2, 3, 7, 64, 1000, 100003 };
    for (int t = 1; t <= 8; t++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            CHECK(run_once(t, sizes[s], 0), "threads %d, n %lld", t, (long long)sizes[s]);
    /* many loops in a row: the open/close protocol with workers arriving late */
    for (int r = 0; r < 2000; r++) CHECK(run_once(1 + r % 4, 1 + r % 37, 0), "loop %d", r);
}

static void test_nested(void) {
    for (int t = 2; t <= 4; t++) CHECK(run_once(t, 200, 2), "nested, threads %d", t);
}

static void *user_thread(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < 400; r++)
        if (!run_once(2 + (r + id) % 3, 1 + (r * 7 + id) % 500, r % 5 == 0)) return (void *)1;
    return NULL;
}

static void test_concurrent_callers(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, user_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        CHECK(rc == NULL, "user thread %d saw a loop run wrong", i);
    }
}

#if !defined(__SANITIZE_THREAD__)
static void test_fork(void) {
    CHECK(run_once(3, 1000, 0), "before fork");
    const char *emu = getenv("NABLA_TEST_EMULATOR");
    if (emu && *emu) { /* qemu-user itself crashes on a fork from a threaded process */
        printf("fork check skipped under %s\n", emu);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* the child has no workers: its loops start their own, or the caller does them all */
        bool ok = run_once(3, 1000, 0) && run_once(2, 50, 1);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked child's loops (status %d)", st);
}
#endif

#if defined(__x86_64__)
static void record_mode(void *c, int64_t lo, int64_t hi, int slot) {
    (void)slot;
    unsigned *modes = c;
    for (int64_t i = lo; i < hi; i++) modes[i] = _mm_getcsr() & 0x8040u;
}

static void test_fp_mode(void) {
    unsigned modes[256];
    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u);
    nb__parallel_for(4, 256, record_mode, modes);
    for (int i = 0; i < 256; i++) CHECK(modes[i] == 0x8040u, "iteration %d ran without the caller's flush-to-zero", i);
    _mm_setcsr(saved & ~0x8040u);
    nb__parallel_for(4, 256, record_mode, modes);
    for (int i = 0; i < 256; i++) CHECK(modes[i] == 0, "iteration %d kept flush-to-zero after the caller cleared it", i);
    _mm_setcsr(saved);
}
#endif

int main(void) {
    test_coverage();
    test_nested();
    test_concurrent_callers();
    /* ThreadSanitizer refuses threads started after a fork: the fork check runs in the plain build */
#if !defined(__SANITIZE_THREAD__)
    test_fork();
#endif
#if defined(__x86_64__)
    test_fp_mode();
#endif
    CHECK(nb__pool_workers() >= 1, "no worker was ever started");
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("threadpool: all checks passed (%d workers)\n", nb__pool_workers());
    return 0;
}
