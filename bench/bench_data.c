/* Input-pipeline benchmarks, nabla's side (bench/bench_data_torch.py is PyTorch's):
   (a) load all 70,000 Fashion-MNIST images from the gzip files and turn them into f32 batches;
   (b) a loader whose per-batch transform costs about one training step, with 2 workers: the time
       the training loop waits for data as a fraction of its step time.
   Prints "name value" lines that bench/run_data.sh compares. Usage: bench_data [--quick] */
#include <nabla.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* (a): seconds to load both splits and iterate them as f32 batches of 1000. */
static double load_all(double *load_only) {
    double t0 = now();
    nb_dataset *train = nb_data_fashion_mnist(NULL, true), *test = nb_data_fashion_mnist(NULL, false);
    *load_only = now() - t0;
    if (!train || !test) { fprintf(stderr, "%s\n", nb_error()); exit(2); }
    nb_dataset *both[2] = { train, test };
    nb_dataset *all = nb_data_concat(both, 2);
    double sum = 0;
    int64_t n = 0;
    for (int part = 0; part < 2; part++) {
        nb_data_loader *l = nb_data_loader_new(both[part], (nb_loader_opts){ .batch_size = 1000 });
        nb_batch b;
        while (nb_data_loader_next(l, &b)) {
            sum += ((float *)nb_data_ptr(b.x))[0];
            n += nb_dim(b.x, 0);
        }
        nb_data_loader_free(l);
    }
    double t = now() - t0;
    if (n != 70000) { fprintf(stderr, "bench_data: loaded %lld images\n", (long long)n); exit(2); }
    nb_dataset_free(all);
    nb_dataset_free(train);
    nb_dataset_free(test);
    (void)sum;
    return t;
}

/* A transform that burns CPU: `passes` passes of a smooth function over the image, and one
   more for a fraction `extra` of the samples (drawn from the sample's key), so that a batch's
   cost can be set to a step's to about 1%, not to the nearest whole pass (some 20% of a step). */
static int passes = 1;
static double extra = 0;
static nb_tensor *busy(nb_tensor *x, uint64_t key, void *ctx) {
    nb_tensor *y = nb_clone(x);
    float *p = nb_data_ptr(y);
    int64_t n = nb_numel(y);
    int reps = passes + (nb_data_uniform(key, 0) < extra);
    for (int r = 0; r < reps; r++)
        for (int64_t i = 0; i < n; i++) p[i] = 0.5f * p[i] + 0.5f * tanhf(p[i]);
    return y;
}

static double step(nb_module *model, nb_optimizer *opt, nb_tensor *x, nb_tensor *y) {
    double t0 = now();
    nb_scope *s = nb_scope_begin();
    nb_tensor *loss = nb_cross_entropy(nb_forward(model, nb_flatten(x, 1, -1)), y, (nb_ce_opts){ 0 });
    nb_optim_zero_grad(opt);
    nb_backward(loss);
    nb_optim_step(opt);
    nb_scope_end(s);
    return now() - t0;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int rounds = quick ? 1 : 5;
    double ta[5], tl[5];
    for (int r = 0; r < rounds; r++) ta[r] = load_all(&tl[r]);
    qsort(ta, (size_t)rounds, sizeof *ta, cmp_d);
    qsort(tl, (size_t)rounds, sizeof *tl, cmp_d);
    printf("a_load_s %.4f\n", tl[rounds / 2]);
    printf("a_load_iterate_s %.4f\n", ta[rounds / 2]);

    /* (b): the training step runs on one thread; the two workers use the other core(s). */
    nb_set_num_threads(1);
    nb_manual_seed(0);
    const int64_t bs = 64;
    nb_dataset *train = nb_data_fashion_mnist(NULL, true);
    nb_module *model = nb_nn_sequential(nb_nn_linear(784, 512), nb_nn_relu(), nb_nn_linear(512, 512), nb_nn_relu(),
                                        nb_nn_linear(512, 10), NULL);
    nb_optimizer *opt = nb_optim_adamw(model, (nb_adamw_opts){ .lr = 1e-3 });
    nb_batch b0;
    int64_t idx[64];
    for (int i = 0; i < 64; i++) idx[i] = i;
    nb_dataset_get_batch(train, idx, bs, &b0);
    double st[30];
    for (int i = 0; i < 30; i++) st[i] = step(model, opt, b0.x, b0.y);
    qsort(st, 30, sizeof *st, cmp_d);
    double step_s = st[15];
    /* Calibrate the transform to one step per batch, as it is applied to each sample: a batch's
       time with no pass (the copy and the calls) and with 10, each the median of several
       timings like the step's, so one slow moment of a shared machine does not set it. */
    nb_transform *probe = nb_transform_fn(busy, NULL);
    double fixed = 0, per_pass = 0;
    for (int pass = 0; pass < 2; pass++) {
        passes = pass ? 10 : 0;
        double pt[15];
        for (int r = 0; r < 15; r++) {
            double t0 = now();
            for (int i = 0; i < bs; i++) {
                nb_scope *s = nb_scope_begin();
                nb_transform_apply(probe, nb_slice(b0.x, 0, i, i + 1, 1), 0);
                nb_scope_end(s);
            }
            pt[r] = now() - t0;
        }
        qsort(pt, 15, sizeof *pt, cmp_d);
        if (pass) per_pass = (pt[7] - fixed) / 10; else fixed = pt[7];
    }
    nb_transform_free(probe);
    double want = fmax(1, (step_s - fixed) / per_pass);
    passes = (int)want;
    extra = want - passes;
    nb_release(b0.x);
    nb_release(b0.y);
    int64_t steps = quick ? 60 : 300;
    int64_t *sub = malloc(sizeof(int64_t) * (size_t)(steps * bs));
    for (int64_t i = 0; i < steps * bs; i++) sub[i] = i;
    nb_dataset *part = nb_data_subset(train, sub, steps * bs);
    nb_dataset *mapped = nb_data_map(part, nb_transform_fn(busy, NULL));
    free(sub);
    for (int w = 0; w <= 2; w += 2) {
        nb_data_loader *l = nb_data_loader_new(mapped, (nb_loader_opts){ .batch_size = bs, .shuffle = true, .num_workers = w, .seed = 7 });
        nb_batch b;
        double steps_s = 0, t1 = now();
        int64_t k = 0;
        while (nb_data_loader_next(l, &b)) { steps_s += step(model, opt, b.x, b.y); k++; }
        double wall = now() - t1, wait = nb_data_loader_wait_seconds(l);
        printf("b_workers%d_step_ms %.3f\n", w, 1e3 * steps_s / (double)k);
        printf("b_workers%d_transform_ms_per_batch %.3f\n", w, 1e3 * (fixed + per_pass * want));
        printf("b_workers%d_wait_ms_per_step %.3f\n", w, 1e3 * wait / (double)k);
        printf("b_workers%d_wait_fraction %.4f\n", w, wait / steps_s);
        printf("b_workers%d_wall_s %.3f\n", w, wall);
        nb_data_loader_free(l);
    }
    if (nb_error()) { fprintf(stderr, "%s\n", nb_error()); return 1; }
    nb_dataset_free(mapped);
    nb_dataset_free(part);
    nb_dataset_free(train);
    nb_optim_free(opt);
    nb_module_free(model);
    return 0;
}
