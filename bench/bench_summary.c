/* Benchmark of the TensorBoard event writer: the average cost of a buffered nb_summary_scalar
   over 100,000 calls (the floor: under 1 us), and a histogram of a million elements. */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of this thread: on a loaded machine, wall time also counts time spent descheduled. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 && !strcmp(argv[1], "--quick") ? 1 : 5;
    const int n = 100000;
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nabla_bench_summary.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    double per[5], cpu[5], close_ms[5];
    for (int r = 0; r < rounds; r++) {
        nb_summary_writer *w = nb_summary_open(dir);
        if (!w) {
            fprintf(stderr, "bench_summary: %s\n", nb_error());
            return 1;
        }
        double t0 = now(), c0 = cpu_now();
        for (int i = 0; i < n; i++)
            if (nb_summary_scalar(w, "loss/train", 1.0 / (1 + i), i) != 0) {
                fprintf(stderr, "bench_summary: %s\n", nb_error());
                return 1;
            }
        double t1 = now();
        cpu[r] = (cpu_now() - c0) / n * 1e9;
        if (nb_summary_close(w) != 0) {
            fprintf(stderr, "bench_summary: %s\n", nb_error());
            return 1;
        }
        per[r] = (t1 - t0) / n * 1e9;
        close_ms[r] = (now() - t1) * 1e3;
    }
    qsort(per, (size_t)rounds, sizeof per[0], cmp);
    qsort(cpu, (size_t)rounds, sizeof cpu[0], cmp);
    qsort(close_ms, (size_t)rounds, sizeof close_ms[0], cmp);
    double med = per[rounds / 2];
    printf("summary_scalar_buffered   %8.1f ns/scalar  (100000 scalars, median of %d; floor 1000 ns) %s\n", med, rounds,
           med < 1000 ? "PASS" : "FAIL");
    printf("summary_scalar_cpu        %8.1f ns/scalar  (thread CPU time of the same loop)\n", cpu[rounds / 2]);
    printf("summary_close_flush       %8.2f ms         (writing the rest of the buffer and closing)\n", close_ms[rounds / 2]);

    nb_manual_seed(0);
    nb_tensor *t = nb_randn(NB_SHAPE(1000, 1000), NB_F32);
    nb_summary_writer *w = nb_summary_open(dir);
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        nb_summary_histogram(w, "weights", t, r);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    nb_summary_close(w);
    nb_release(t);
    printf("summary_histogram_1M      %8.2f ms         (1,000,000 f32 elements, best of %d)\n", best * 1e3, rounds);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 && med < 1000 ? 0 : 1;
}
