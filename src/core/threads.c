/* The thread count of the kernels (nabla's thread pool, threadpool.c): nb_set_num_threads, else
   NABLA_NUM_THREADS, else OMP_NUM_THREADS, else the cores this process may use; the denormal
   mode; the monotonic clock (nb__now); and OpenMP held to one thread around the dependencies built on it (Debian's oneDNN and
   OpenBLAS's OpenMP build), which run on the pool's threads, never on teams of their own. */
#define _GNU_SOURCE
#include "core_impl.h"
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#ifdef NABLA_HAVE_DNNL
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define NB_HAVE_MXCSR 1
#endif

#ifdef NABLA_HAVE_BLAS
void openblas_set_num_threads(int num_threads);
#endif

static atomic_int num_threads;

static int env_threads(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long n = strtol(v, &end, 10);
    return (*end == 0 || *end == ',') && n > 0 && n < 4096 ? (int)n : 0;
}

static int default_threads(void) {
    int n = env_threads("NABLA_NUM_THREADS");
    if (!n) n = env_threads("OMP_NUM_THREADS");
    if (!n) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    }
    return n > 0 ? n : 1;
}

void nb_set_num_threads(int n) {
    if (n <= 0) n = default_threads();
    atomic_store(&num_threads, n);
    /* BLAS always runs single-threaded: nabla splits products into pieces whose shapes do
       not depend on the thread count and runs the pieces in parallel itself, so results are
       the same with any number of threads (BLAS's own threading changes its summation).
       (OpenBLAS's OpenMP build follows the calling thread's OpenMP setting instead:
       nb__omp_serial_begin holds that to one around every call.) */
#ifdef NABLA_HAVE_BLAS
    openblas_set_num_threads(1);
#endif

}

/* A per-thread cap (0: none): a data-loader worker runs kernels on itself alone, so the pool's
   threads stay with the training loop. */
static NB_TLS int local_limit;

void nb__limit_threads(int n) { local_limit = n > 0 ? n : 0; }

int nb__threads(void) {
    int n = atomic_load_explicit(&num_threads, memory_order_relaxed);
    if (n == 0) {
        nb_set_num_threads(0);
        n = atomic_load(&num_threads);
    }
    return local_limit && local_limit < n ? local_limit : n;
}

int nb_get_num_threads(void) { return nb__threads(); }

double nb__now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* OpenMP's team size for the calling thread. Only dependencies use OpenMP: oneDNN's
   convolutions, and OpenBLAS's OpenMP build, which sizes a team from the calling thread's
   setting whatever openblas_set_num_threads said, so a BLAS call on a pool worker would start a
   team of its own and oversubscribe the cores. Without oneDNN nabla does not link OpenMP: the
   calls go through weak references, live when a dependency brought libgomp in. */
#ifdef NABLA_HAVE_DNNL
#define HAVE_OMP() true
#else
extern int omp_get_max_threads(void) __attribute__((weak));
extern void omp_set_num_threads(int n) __attribute__((weak));
#define HAVE_OMP() (omp_get_max_threads && omp_set_num_threads)
#endif

int nb__omp_team_begin(int n) {
    if (!HAVE_OMP()) return 0;
    int prev = omp_get_max_threads();
    if (prev != n) omp_set_num_threads(n);
    return prev;
}

int nb__omp_serial_begin(void) { return nb__omp_team_begin(1); }

void nb__omp_serial_end(int prev) {
    if (prev > 0 && HAVE_OMP() && omp_get_max_threads() != prev) omp_set_num_threads(prev);
}

#ifdef NB_HAVE_MXCSR
/* MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) on this thread. */
static void flush_mode(bool on) {
    unsigned m = _mm_getcsr();
    _mm_setcsr(on ? m | 0x8040u : m & ~0x8040u);
}
#endif

bool nb_set_flush_denormal(bool on) {
#ifdef NB_HAVE_MXCSR
    /* nabla's pool runs each loop in its caller's mode (oneDNN too runs on the pool) */
    flush_mode(on);
    return true;
#else
    (void)on;
    return false;
#endif
}
