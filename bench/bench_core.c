/* Core benchmarks, nabla side. The PyTorch side is bench_core_torch.py; bench/run_core.sh runs both
   and prints the table with ratios (bench/report_core.py).

   Prints one "key value" line per figure on stdout (progress goes to stderr):
     (a) eager overhead: a tiny autograd step and one tiny op, per call;
     (b) 784-128-10 MLP forward + backward + SGD update at batch 64, steps/s, and peak RSS;
     (c) f32 square matmul, nb_matmul vs cblas_sgemm called directly, GFLOP/s.
   Every figure is the median over REPEATS timed loops, after warm-up.

   Usage: bench_core [--quick] [a] [b] [c]   (no section named: all three) */
#define _GNU_SOURCE
#include <nabla.h>
#include "bench_util.h"
#include <omp.h>
#include <cblas.h>

/* OpenBLAS extension (declared here too in case cblas.h is another vendor's). */
int openblas_get_num_threads(void);
int openblas_get_parallel(void); /* 0 sequential, 1 pthreads, 2 OpenMP */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(where) bench_check("bench_core", where)
#define REPEATS 15
#define MM_REPEATS 21

static bool quick = false;

/* ---- a timing harness: fn(ctx, iters) runs the work iters times ---- */

typedef void (*work_fn)(void *ctx, long iters);

/* Iterations so that one timed loop lasts about target_s (at least 1). */
static long calibrate(work_fn fn, void *ctx, double target_s) {
    long iters = 1;
    for (;;) {
        double t0 = now_s();
        fn(ctx, iters);
        double dt = now_s() - t0;
        if (dt >= target_s / 4 || iters >= (1L << 30)) {
            long n = (long)(iters * target_s / (dt > 1e-9 ? dt : 1e-9));
            return n < 1 ? 1 : n;
        }
        iters *= dt < target_s / 100 ? 10 : 2;
    }
}

/* Median seconds per iteration of fn over REPEATS loops of iters iterations. */
static double time_per_iter(work_fn fn, void *ctx, long iters) {
    double t[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_s();
        fn(ctx, iters);
        t[r] = (now_s() - t0) / (double)iters;
    }
    return median(t, REPEATS);
}

/* ---- (a) eager overhead ---- */

typedef struct { nb_tensor *w, *x, *a, *b; } tiny_ctx;

/* y = sum(w * x); backward; zero the grad, inside a scope per step as users write loops. */
static void tiny_step(void *p, long iters) {
    tiny_ctx *c = p;
    for (long i = 0; i < iters; i++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *y = nb_sum_all(nb_mul(c->w, c->x));
        nb_backward(y);
        nb_scope_end(s);
        nb_zero_grad(c->w);
    }
}

/* One nb_add of two 1-element tensors; the result is released at once (torch: c = a + b). */
static void tiny_add(void *p, long iters) {
    tiny_ctx *c = p;
    for (long i = 0; i < iters; i++) nb_release(nb_add(c->a, c->b));
}

/* The same op, each inside its own scope. */
static void tiny_add_scoped(void *p, long iters) {
    tiny_ctx *c = p;
    for (long i = 0; i < iters; i++) {
        nb_scope *s = nb_scope_begin();
        nb_add(c->a, c->b);
        nb_scope_end(s);
    }
}

static void bench_eager(void) {
    tiny_ctx c;
    c.w = nb_set_requires_grad(nb_full(NB_SHAPE(1), 0.5, NB_F32), true);
    c.x = nb_full(NB_SHAPE(1), 2.0, NB_F32);
    c.a = nb_full(NB_SHAPE(1), 1.0, NB_F32);
    c.b = nb_full(NB_SHAPE(1), 2.0, NB_F32);
    CHECK("eager setup");

    double target = quick ? 0.005 : 0.02;
    tiny_step(&c, 2000); /* warm-up: fills the caching allocator */
    CHECK("eager step");
    long n = calibrate(tiny_step, &c, target);
    printf("eager_step_us %.4f\n", 1e6 * time_per_iter(tiny_step, &c, n));
    CHECK("eager step");

    tiny_add(&c, 2000);
    n = calibrate(tiny_add, &c, target);
    printf("eager_add_us %.4f\n", 1e6 * time_per_iter(tiny_add, &c, n));
    tiny_add_scoped(&c, 2000);
    n = calibrate(tiny_add_scoped, &c, target);
    printf("eager_add_scoped_us %.4f\n", 1e6 * time_per_iter(tiny_add_scoped, &c, n));
    CHECK("eager add");

    nb_tensor *t[] = { c.w, c.x, c.a, c.b };
    for (int i = 0; i < 4; i++) nb_release(t[i]);
    fflush(stdout);
}

/* ---- (b) MLP training step ---- */

#define MLP_IN 784
#define MLP_HID 128
#define MLP_OUT 10
#define MLP_BATCH 64
#define MLP_NBATCH 10

typedef struct {
    nb_tensor *params[4]; /* w1 [128,784], b1 [128], w2 [10,128], b2 [10] */
    nb_tensor *x[MLP_NBATCH], *y[MLP_NBATCH]; /* [64,784] f32, [64,1] i64 */
    long step;
    float lr;
    double last_loss;
} mlp_ctx;

static void mlp_steps(void *p, long iters) {
    mlp_ctx *c = p;
    nb_tensor **P = c->params;
    for (long i = 0; i < iters; i++, c->step++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = c->x[c->step % MLP_NBATCH], *y = c->y[c->step % MLP_NBATCH];
        nb_tensor *h = nb_relu(nb_linear(x, P[0], P[1]));
        nb_tensor *logits = nb_linear(h, P[2], P[3]);
        nb_tensor *loss = nb_neg(nb_mean_all(nb_gather(nb_log_softmax(logits, 1), 1, y)));
        nb_backward(loss);
        bool prev = nb_set_grad_enabled(false);
        for (int k = 0; k < 4; k++) {
            nb_assign(P[k], nb_sub(P[k], nb_mul_scalar(nb_grad_of(P[k]), c->lr)));
            nb_zero_grad(P[k]);
        }
        nb_set_grad_enabled(prev);
        if (i == iters - 1) c->last_loss = nb_item(loss);
        nb_scope_end(s);
    }
}

static void bench_mlp(void) {
    mlp_ctx c = { .lr = 0.01f };
    nb_manual_seed(0);
    const nb_shape shapes[4] = { NB_SHAPE(MLP_HID, MLP_IN), NB_SHAPE(MLP_HID), NB_SHAPE(MLP_OUT, MLP_HID),
                                 NB_SHAPE(MLP_OUT) };
    const double scale[4] = { 0.0357, 0.0357, 0.0884, 0.0884 }; /* ~1/sqrt(fan_in) */
    for (int k = 0; k < 4; k++) {
        nb_tensor *r = nb_randn(shapes[k], NB_F32);
        c.params[k] = nb_set_requires_grad(nb_mul_scalar(r, scale[k]), true);
        nb_release(r);
    }
    int64_t labels[MLP_BATCH];
    for (int b = 0; b < MLP_NBATCH; b++) {
        c.x[b] = nb_randn(NB_SHAPE(MLP_BATCH, MLP_IN), NB_F32);
        for (int i = 0; i < MLP_BATCH; i++) labels[i] = (b * 7 + i * 13) % MLP_OUT;
        c.y[b] = nb_from_data(labels, NB_SHAPE(MLP_BATCH, 1), NB_I64);
    }
    CHECK("mlp setup");

    mlp_steps(&c, quick ? 20 : 100); /* warm-up */
    CHECK("mlp step");
    long n = calibrate(mlp_steps, &c, quick ? 0.02 : 0.05);
    double t = time_per_iter(mlp_steps, &c, n);
    CHECK("mlp step");
    printf("mlp_step_ms %.4f\n", 1e3 * t);
    printf("mlp_steps_per_s %.2f\n", 1.0 / t);
    printf("mlp_loss %.4f\n", c.last_loss);
    printf("mlp_peak_rss_kib %ld\n", vm_hwm_kib());
    size_t held = 0, used = 0;
    uint64_t sys = 0;
    nb_memory_stats(&held, &used, &sys);
    printf("mlp_alloc_held_kib %zu\n", held / 1024);

    for (int k = 0; k < 4; k++) nb_release(c.params[k]);
    for (int b = 0; b < MLP_NBATCH; b++) { nb_release(c.x[b]); nb_release(c.y[b]); }
    fflush(stdout);
}

/* ---- (c) square f32 matmul ---- */

typedef struct { int n; nb_tensor *a, *b; float *pa, *pb, *pc; } mm_ctx;

static void mm_nabla(void *p, long iters) {
    mm_ctx *c = p;
    for (long i = 0; i < iters; i++) nb_release(nb_matmul(c->a, c->b));
}

void openblas_set_num_threads(int num_threads);

/* OpenBLAS on its own, with its own threading over nabla's thread count (nabla itself keeps
   BLAS single-threaded and splits products into pieces for determinism; the reference is BLAS
   as a user calling it directly would run it). */
static void mm_blas(void *p, long iters) {
    mm_ctx *c = p;
    openblas_set_num_threads(nb_get_num_threads());
    omp_set_num_threads(nb_get_num_threads()); /* OpenBLAS's OpenMP build sizes its team from this */
    for (long i = 0; i < iters; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->n, c->n, c->n, 1.0f, c->pa, c->n, c->pb, c->n,
                    0.0f, c->pc, c->n);
    nb_set_num_threads(nb_get_num_threads()); /* back to nabla's settings: BLAS on one thread */
}

/* nabla's products at every size first, then OpenBLAS's: once OpenBLAS's OpenMP team has run,
   its threads keep spinning between products, and nabla's pool timed after them shared the
   cores with them (the BLAS path measured at half its speed, 0.5x, where it runs at 1.0x alone).
   A program that uses one of the two never meets the other's threads; the repeats and run_core.sh's
   alternating rounds spread the machine's noise instead. */
static void bench_matmul(void) {
    static const int sizes[] = { 256, 512, 1024, 2048 };
    enum { NSIZES = sizeof sizes / sizeof *sizes };
    mm_ctx ctx[NSIZES];
    double t_nb[NSIZES][MM_REPEATS], t_bl[NSIZES][MM_REPEATS];
    double target = quick ? 0.005 : 0.01;
    for (int s = 0; s < NSIZES; s++) {
        mm_ctx *c = &ctx[s];
        int n = sizes[s];
        *c = (mm_ctx){ .n = n };
        c->a = nb_randn(NB_SHAPE(n, n), NB_F32);
        c->b = nb_randn(NB_SHAPE(n, n), NB_F32);
        CHECK("matmul setup");
        c->pa = malloc(sizeof(float) * (size_t)n * n);
        c->pb = malloc(sizeof(float) * (size_t)n * n);
        c->pc = malloc(sizeof(float) * (size_t)n * n);
        nb_copy_to(c->a, c->pa, sizeof(float) * (size_t)n * n);
        nb_copy_to(c->b, c->pb, sizeof(float) * (size_t)n * n);
    }
    for (int side = 0; side < 2; side++) /* 0: nabla, 1: OpenBLAS */
        for (int s = 0; s < NSIZES; s++) {
            void (*fn)(void *, long) = side ? mm_blas : mm_nabla;
            fn(&ctx[s], 2);
            long it = calibrate(fn, &ctx[s], target);
            for (int r = 0; r < MM_REPEATS; r++) {
                double t0 = now_s();
                fn(&ctx[s], it);
                (side ? t_bl : t_nb)[s][r] = (now_s() - t0) / (double)it;
            }
            CHECK("matmul");
        }
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s];
        double flop = 2.0 * n * (double)n * n, nb = median(t_nb[s], MM_REPEATS), bl = median(t_bl[s], MM_REPEATS);
        printf("mm%d_nabla_gflops %.3f\n", n, flop / nb * 1e-9);
        printf("mm%d_blas_gflops %.3f\n", n, flop / bl * 1e-9);
        printf("mm%d_nabla_over_blas %.4f\n", n, bl / nb);
        nb_release(ctx[s].a);
        nb_release(ctx[s].b);
        free(ctx[s].pa);
        free(ctx[s].pb);
        free(ctx[s].pc);
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    bool run_a = false, run_b = false, run_c = false, any = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "a")) run_a = any = true;
        else if (!strcmp(argv[i], "b")) run_b = any = true;
        else if (!strcmp(argv[i], "c")) run_c = any = true;
        else {
            fprintf(stderr, "usage: %s [--quick] [a] [b] [c]\n", argv[0]);
            return 2;
        }
    }
    if (!any) run_a = run_b = run_c = true;

    printf("nabla_version %s\n", nb_version());
    printf("threads %d\n", nb_get_num_threads());
    printf("blas_threads %d\n", openblas_get_num_threads());
    int par = openblas_get_parallel();
    printf("blas_build %s\n", par == 2 ? "openmp" : par == 1 ? "pthreads" : "sequential");
    fflush(stdout);
    /* (b) before (c), so the peak RSS it reports is not the matmul's 2048^2 buffers. */
    if (run_a) { fprintf(stderr, "bench_core: (a) eager overhead\n"); bench_eager(); }
    if (run_b) { fprintf(stderr, "bench_core: (b) MLP step\n"); bench_mlp(); }
    if (run_c) { fprintf(stderr, "bench_core: (c) matmul\n"); bench_matmul(); }
    return 0;
}
