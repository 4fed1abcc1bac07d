/* The thread count of the kernels (nabla's thread pool, threadpool.c): nb_set_num_threads, else
   NABLA_NUM_THREADS, else OMP_NUM_THREADS, else the cores this process may use; and the
   denormal mode. OpenMP is used only where a dependency forces it: Debian's oneDNN runs its
   convolutions on OpenMP threads, whose team size and floating-point mode are set here. */
#define _GNU_SOURCE
#include "core_impl.h"
#include <sched.h>
#include <stdlib.h>
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
       OpenBLAS's OpenMP build also sets OpenMP's default team size, so oneDNN's is set after it. */
#ifdef NABLA_HAVE_BLAS
    openblas_set_num_threads(1);
#endif
#ifdef NABLA_HAVE_DNNL
    omp_set_num_threads(n);
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

#ifdef NB_HAVE_MXCSR
/* MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) on this thread. */
static void flush_mode(bool on) {
    unsigned m = _mm_getcsr();
    _mm_setcsr(on ? m | 0x8040u : m & ~0x8040u);
}
#endif

bool nb_set_flush_denormal(bool on) {
#ifdef NB_HAVE_MXCSR
    /* nabla's pool runs each loop in its caller's mode; oneDNN's OpenMP team is set here (it
       is reused by every later region, and threads it adds later inherit this thread's mode) */
    flush_mode(on);
#ifdef NABLA_HAVE_DNNL
    int n = nb__threads();
    _Pragma("omp parallel num_threads(n)") flush_mode(on);
#endif
    return true;
#else
    (void)on;
    return false;
#endif
}
