/* Save and load time of a ~100 MB state dict (six 2048x2048 linear layers, f32) with nabla's
   safetensors writer (atomic: temporary file, fsync, rename) and reader (mmap, straight into the
   parameters); bench/bench_io_torch.py times torch.save/torch.load on the same network.
   Usage: bench_io [DIR] (default /tmp). Prints "name ms" lines, each the median of 5 runs. */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static nb_module *net(void) {
    nb_module *m = nb_nn_sequential(NULL);
    for (int i = 0; i < 6; i++) nb_nn_sequential_add(m, nb_nn_linear(2048, 2048));
    return m;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char path[512];
    snprintf(path, sizeof path, "%s/nabla_bench_io.%ld.safetensors", dir, (long)getpid());
    nb_manual_seed(0);
    nb_module *a = net(), *b = net();
    double mb = (double)nb_module_num_params(a) * 4 / 1e6;
    enum { RUNS = 5 };
    double save[RUNS], load[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ms();
        if (nb_save_state_dict(a, path) < 0) break;
        double t1 = now_ms();
        if (nb_load_state_dict(b, path, (nb_load_opts){ 0 }) < 0) break;
        double t2 = now_ms();
        save[r] = t1 - t0;
        load[r] = t2 - t1;
    }
    unlink(path);
    if (nb_error()) {
        fprintf(stderr, "bench_io: %s\n", nb_error());
        return 1;
    }
    qsort(save, RUNS, sizeof save[0], cmp);
    qsort(load, RUNS, sizeof load[0], cmp);
    printf("state_dict_mb %.1f\n", mb);
    printf("save_ms %.2f\n", save[RUNS / 2]);
    printf("load_ms %.2f\n", load[RUNS / 2]);
    nb_module_free(a);
    nb_module_free(b);
    return 0;
}
