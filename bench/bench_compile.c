/* Graph-mode benchmarks, nabla side, printed as "key value" lines (bench/run_compile.sh reads them;
   bench_compile_torch.py does the same work with torch.compile):
     mlp  the seed MLP's training step (flatten, 784-128-10, AdamW lr 1e-3, batch 64, cross
          entropy) on the first 200 batches of real Fashion-MNIST training images, cycled: eager
          against compiled, alternating loops in one process; again with denormals flushed to
          zero (mlp_flush_*)
     cnn  the TF tutorial's convnet of examples/cnn.c, training step (Adam lr 1e-3, batch 64,
          dropout 0.4) on the same 200 batches: eager against compiled
     gpt_train  the char GPT's training step (examples/char_gpt.c's char_train_step: vocabulary
          86, context 128, 4 layers, 4 heads, width 128, batch 16 as char_gpt and bench_nn use,
          AdamW lr 1e-3, clipping at 1.0) on 8 batches of random characters: eager against compiled
     gpt  the same GPT's forward at batch 1 in eval mode: eager against compiled
     compile  the first call of each compiled function (trace, passes, code generation, the C
          compiler and loading) with an empty kernel cache of its own (cold) and again with the
          cache that call filled (warm); *_compile_s is the part after the trace.
   Usage: bench_compile [--quick] [--only mlp|cnn|gpt_train|gpt]  (--only runs one comparison, for
   a profiler; the first calls are all measured) */
#include "bench_util.h"
#include <sys/resource.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wunused-function"
#define main gpt_example_main
#include "../examples/char_gpt.c"
#undef main
#define main cnn_example_main
#include "../examples/cnn.c"
#undef main

static bool quick;
static const char *only;

#include "../tests/train_step.h"

static nb_tensor *forward(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_forward((nb_module *)ctx, in[0]);
}

/* The batches a loop cycles through: inputs[b * n .. b * n + n) is batch b. */
static nb_tensor **batches;
static int nbatches = 1, cursor;

/* Seconds per call of fn (eager) or of c (compiled), over `per` calls. */
static double loop(nb_graph_fn fn, void *ctx, nb_compiled *c, nb_tensor **in, int n, int per) {
    double t0 = now_s();
    for (int i = 0; i < per; i++) {
        nb_tensor **b = batches ? batches + (cursor++ % nbatches) * n : in;
        nb_scope *s = nb_scope_begin();
        nb_tensor *r = c ? nb_compiled_run(c, b, n) : fn(b, n, ctx);
        nb_scope_end(s);
        if (!r) bench_check("bench_compile", c ? "compiled" : "eager");
    }
    return (now_s() - t0) / per;
}

/* Alternates short eager and compiled loops many times and prints the medians and their ratio:
   with both sides sampled side by side, a burst of load from elsewhere falls on both alike. */
static void compare(const char *name, nb_graph_fn fn, void *ctx, nb_compiled *c, nb_tensor **in, int n, int per,
                    int loops) {
    for (int i = 0; i < 3; i++) { loop(fn, ctx, NULL, in, n, per); loop(fn, ctx, c, in, n, per); }
    double *e = malloc(sizeof(double) * (size_t)loops), *k = malloc(sizeof(double) * (size_t)loops);
    if (!e || !k) { fprintf(stderr, "bench_compile: out of memory\n"); exit(1); }
    double busy0 = machine_busy_s(), own0 = own_cpu_s(), wall0 = now_s();
    for (int i = 0; i < loops; i++) {
        e[i] = loop(fn, ctx, NULL, in, n, per);
        k[i] = loop(fn, ctx, c, in, n, per);
    }
    double other = (machine_busy_s() - busy0 - (own_cpu_s() - own0)) / (now_s() - wall0);
    if (busy0 >= 0) printf("%s_other_cpu %.2f\n", name, other < 0 ? 0 : other);
    double me = median(e, loops), mk = median(k, loops);
    free(e);
    free(k);
    printf("%s_eager_ms %.4f\n%s_compiled_ms %.4f\n%s_speedup %.3f\n", name, 1e3 * me, name, 1e3 * mk, name, me / mk);
    nb_compiled_stats st = nb_compiled_get_stats(c);
    printf("%s_ops_traced %d\n%s_ops_after %d\n%s_kernels %d\n%s_kernels_native %d\n", name, st.ops_traced, name,
           st.ops_after, name, st.kernels, name, st.kernels_native);
    printf("%s_arena_bytes %lld\n%s_unplanned_bytes %lld\n%s_traces %d\n", name, (long long)st.arena_bytes, name,
           (long long)st.unplanned_bytes, name, st.traces);
    fflush(stdout);
}

/* The first call's time with the kernel cache dir/name (a new, empty directory at the cold call;
   each workload has its own, so kernels that another workload built do not warm it). */
static void first_call(const char *name, const char *label, nb_graph_fn fn, void *ctx, nb_tensor **in, int n,
                       const char *dir) {
    char sub[256];
    snprintf(sub, sizeof sub, "%s/%s", dir, name);
    nb_compiled *c = nb_compile(fn, ctx, (nb_graph_opts){ .cache_dir = sub });
    double t0 = now_s();
    nb_scope *s = nb_scope_begin();
    if (!nb_compiled_run(c, in, n)) bench_check("bench_compile", "first call");
    nb_scope_end(s);
    double t = now_s() - t0;
    nb_compiled_stats st = nb_compiled_get_stats(c);
    printf("%s_first_call_%s_s %.4f\n%s_compile_%s_s %.4f\n%s_cc_runs_%s %d\n", name, label, t, name, label,
           st.compile_seconds, name, label, st.kernels_built);
    if (nb_compiled_note(c)) printf("%s_note %s\n", name, nb_compiled_note(c));
    nb_compiled_free(c);
    fflush(stdout);
}

static bool runs(const char *name) { return !only || !strcmp(only, name); }

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "mlp") || !strcmp(argv[i + 1], "cnn") || !strcmp(argv[i + 1], "gpt_train") ||
                  !strcmp(argv[i + 1], "gpt")))
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_compile [--quick] [--only mlp|cnn|gpt_train|gpt]\n");
            return 2;
        }
    }
    char dir[] = "/tmp/nabla-bench-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_compile: mkdtemp");
        return 1;
    }
    printf("threads %d\n", nb_get_num_threads());

    /* mlp */
    nb_manual_seed(0);
    nb_module *mlp = nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
    trainer t = { mlp, nb_optim_adamw(mlp, (nb_adamw_opts){ .lr = 1e-3 }) };
    /* 200 batches of real Fashion-MNIST images, cycled: a loop over a few synthetic batches soon
       memorises them, its gradients underflow and Adam's arithmetic on denormal floats then
       dominates both sides alike */
    enum { NB = 200 };
    nb_tensor *mlp_batches[2 * NB];
    nb_dataset *fm = nb_data_fashion_mnist(NULL, true);
    bench_check("bench_compile", "Fashion-MNIST");
    for (int b = 0; b < NB; b++) {
        int64_t idx[64];
        for (int i = 0; i < 64; i++) idx[i] = (int64_t)b * 64 + i;
        nb_batch bt;
        if (nb_dataset_get_batch(fm, idx, 64, &bt) < 0) bench_check("bench_compile", "a batch");
        mlp_batches[2 * b] = bt.x;
        mlp_batches[2 * b + 1] = bt.y;
    }
    nb_dataset_free(fm);
    nb_scope *sd = nb_scope_begin();
    nb_tensor *x = mlp_batches[0], *y = mlp_batches[1];
    nb_tensor *idx = nb_keep(nb_cast(nb_mul_scalar(nb_rand(NB_SHAPE(1, CONTEXT), NB_F32), 85.99), NB_I64));
    nb_scope_end(sd);
    nb_tensor *mlp_in[2] = { x, y };
    first_call("mlp", "cold", train_step, &t, mlp_in, 2, dir);
    first_call("mlp", "warm", train_step, &t, mlp_in, 2, dir);
    char mdir[256], cdir[256], tdir[256], gdir[256];
    snprintf(mdir, sizeof mdir, "%s/mlp", dir);
    snprintf(cdir, sizeof cdir, "%s/cnn", dir);
    snprintf(tdir, sizeof tdir, "%s/gpt_train", dir);
    snprintf(gdir, sizeof gdir, "%s/gpt", dir);
    nb_compiled *cm = nb_compile(train_step, &t, (nb_graph_opts){ .cache_dir = mdir });
    batches = mlp_batches;
    nbatches = NB;
    if (runs("mlp")) {
        compare("mlp", train_step, &t, cm, mlp_in, 2, 5, quick ? 30 : 400);
        /* the same with denormals flushed (nb_set_flush_denormal): this training underflows
           gradients and Adam's second moments, and each denormal operation costs ~100 cycles */
        if (nb_set_flush_denormal(true)) {
            compare("mlp_flush", train_step, &t, cm, mlp_in, 2, 5, quick ? 30 : 400);
            nb_set_flush_denormal(false);
        }
    }

    /* cnn: examples/cnn.c's model and recipe, on the MLP's batches */
    nb_manual_seed(0);
    nb_module *cnn = cnn_new();
    trainer tc = { cnn, nb_optim_adam(cnn, (nb_adam_opts){ .lr = 1e-3 }) };
    bench_check("bench_compile", "cnn");
    cursor = 0;
    first_call("cnn", "cold", train_step, &tc, mlp_in, 2, dir);
    first_call("cnn", "warm", train_step, &tc, mlp_in, 2, dir);
    nb_compiled *cc = nb_compile(train_step, &tc, (nb_graph_opts){ .cache_dir = cdir });
    if (runs("cnn")) compare("cnn", train_step, &tc, cc, mlp_in, 2, 1, quick ? 5 : 30);
    batches = NULL;

    /* gpt_train: char_gpt.c's step at its default batch, 16 windows of 128 random characters,
       y the next characters ([16 * 128]), 8 batches cycled */
    enum { GB = 16, GNB = 8 };
    nb_manual_seed(0);
    nb_module *gpt_t = gpt_new(86);
    char_trainer tr = { gpt_t, nb_optim_adamw(gpt_t, (nb_adamw_opts){ .lr = 1e-3 }), 86, 1.0 };
    nb_tensor *gpt_batches[2 * GNB];
    srand(1);
    for (int b = 0; b < GNB; b++) {
        static int64_t ids[GB * (CONTEXT + 1)], xb[GB * CONTEXT], yb[GB * CONTEXT];
        for (int i = 0; i < GB * (CONTEXT + 1); i++) ids[i] = rand() % 86;
        for (int r = 0; r < GB; r++) {
            memcpy(xb + r * CONTEXT, ids + r * (CONTEXT + 1), sizeof(int64_t) * CONTEXT);
            memcpy(yb + r * CONTEXT, ids + r * (CONTEXT + 1) + 1, sizeof(int64_t) * CONTEXT);
        }
        gpt_batches[2 * b] = nb_from_data(xb, NB_SHAPE(GB, CONTEXT), NB_I64);
        gpt_batches[2 * b + 1] = nb_from_data(yb, NB_SHAPE(GB * CONTEXT), NB_I64);
    }
    bench_check("bench_compile", "gpt_train");
    first_call("gpt_train", "cold", char_train_step, &tr, gpt_batches, 2, dir);
    first_call("gpt_train", "warm", char_train_step, &tr, gpt_batches, 2, dir);
    nb_compiled *ct = nb_compile(char_train_step, &tr, (nb_graph_opts){ .cache_dir = tdir });
    batches = gpt_batches;
    nbatches = GNB;
    cursor = 0;
    if (runs("gpt_train")) compare("gpt_train", char_train_step, &tr, ct, gpt_batches, 2, 1, quick ? 3 : 12);
    batches = NULL;

    /* gpt */
    nb_module *gpt = gpt_new(86);
    nb_module_train(gpt, false);
    first_call("gpt", "cold", forward, gpt, &idx, 1, dir);
    first_call("gpt", "warm", forward, gpt, &idx, 1, dir);
    nb_compiled *cg = nb_compile(forward, gpt, (nb_graph_opts){ .cache_dir = gdir });
    if (runs("gpt")) compare("gpt", forward, gpt, cg, &idx, 1, 2, quick ? 10 : 100);

    nb_compiled_free(cm);
    nb_compiled_free(cc);
    nb_compiled_free(ct);
    nb_compiled_free(cg);
    nb_optim_free(t.opt);
    nb_optim_free(tc.opt);
    nb_optim_free(tr.opt);
    nb_module_free(mlp);
    nb_module_free(cnn);
    nb_module_free(gpt_t);
    nb_module_free(gpt);
    for (int b = 0; b < 2 * NB; b++) nb_release(mlp_batches[b]);
    for (int b = 0; b < 2 * GNB; b++) nb_release(gpt_batches[b]);
    nb_release(idx);
    /* the cold cache was this run's own: remove it */
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_compile: could not remove %s\n", dir);
    return 0;
}
