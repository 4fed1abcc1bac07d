/* Distributed-training benchmark, nabla side: DDP throughput, allreduce overlap and per-rank memory (bench/run_dist.sh). */
/* Launched once per configuration, under mpirun for several ranks or as one plain process for
   one rank; the PyTorch side is bench_dist_torch.py, and run_dist.sh runs both, alternating, and
   prints the tables. Rank 0 prints "key value" lines on stdout.

   bench_dist [--quick] [--compiled] mlp|cnn
     Trains the model (with --compiled, its step compiled by nb_compile: graph-mode DDP) on synthetic data (random inputs in [0, 1), random labels 0..9; 256 batches
     per rank for the MLP, 16 for the CNN, used in turn) with SGD
     (lr 0.01, momentum 0.9) and cross entropy, global batch 64 per step split across the ranks
     (64 / world each). One rank: the plain model in one process (no DDP, no MPI). Several: the
     model under nb_ddp (default buckets). After a warm-up, timed windows of a fixed number of
     steps, each between two barriers; the figure is the median window.
       mlp  784-128-10 (flatten, linear, relu, linear), as bench_nn.c's and examples/mlp.c's
       cnn  bench_nn.c's convnet (conv 5x5 32, pool, conv 5x5 64, pool, linear 1024, dropout 0.4, linear 10)
     Prints <m>_samples_per_s (global samples per second), <m>_step_ms, <m>_other_cpu (cores kept
     busy by other processes during the windows), and with several ranks the DDP counters and the
     overlap: <m>_allreduce_alone_ms (the DDP's buckets allreduced one after another with
     nb_dist_all_reduce, nothing else running, after a barrier: the median over reps, averaged
     over ranks), <m>_wait_ms (the DDP's wait_seconds per backward, averaged over ranks: the time
     the end of backward waited for the allreduces) and <m>_hidden_share = 1 - wait / alone,
     clamped to [0, 1].

   bench_dist [--quick] gpt ddp|zero1|full
     The char GPT of tests/gpt_model.h (vocabulary 65, context 64, width 512, 4 layers, 4 heads:
     12.7M parameters, 51 MB of f32, so that the state dominates the small activations of a
     batch of 4 x 64 tokens per rank) trained 3 AdamW steps (lr 1e-3) under NB_SHARD_NONE,
     NB_SHARD_OPTIMIZER or NB_SHARD_FULL. Prints, for each rank r, gpt_peak_rss_kib_r<r> (VmHWM
     of the process, which runs only this configuration), gpt_start_rss_kib_r<r> (VmRSS after
     nb_dist_init, before the model), gpt_wrap_rss_kib_r<r> (after nb_ddp and the optimizer),
     gpt_first_step_peak_kib_r<r> (VmHWM after the first step), the bytes the rank holds:
     gpt_param_bytes_r<r> and gpt_grad_bytes_r<r> (its module's parameters and their gradients
     after the last backward: every parameter, or under full sharding its shards),
     gpt_optim_bytes_r<r> (the optimizer's state tensors, steps aside, from nb_optim_named_state),
     gpt_alloc_used_kib_r<r> / gpt_alloc_held_kib_r<r> (nb_memory_stats at the end: bytes in use,
     bytes held from the system with the allocator's cache), and gpt_bucket_bytes (the DDP's
     gradient buckets, or the full-sharding units' flat sizes). */
#define _GNU_SOURCE
#include <nabla.h>
#include "bench_util.h"
#include "../tests/gpt_model.h"
#include "../tests/train_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Synthetic batches per rank, used in turn: the MLP runs thousands of steps and would memorise a
   few batches of random labels, and the tiny (denormal) gradients that follow would then time
   the arithmetic on them rather than the step; 256 batches (16384 samples) keep its loss near
   ln 10. The CNN runs a few dozen steps. */
#define NBATCH 256
#define GLOBAL_BATCH 64

static bool quick = false;
static int rank = 0, world = 1;

static void check(const char *where) {
    const char *e = nb_error();
    if (e) {
        fprintf(stderr, "bench_dist (rank %d of %d): %s: %s\n", rank, world, where, e);
        fflush(stderr);
        exit(1);
    }
}

/* rank 0 prints */
#define OUT(...)                                                                                                                \
    do {                                                                                                                        \
        if (rank == 0) printf(__VA_ARGS__);                                                                                     \
    } while (0)

/* The sum (or max) of v over the ranks. */
static double reduce_double(double v, nb_reduce_op op) {
    if (world == 1) return v;
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_from_data(&v, NB_SHAPE(1), NB_F64);
    if (nb_dist_all_reduce(t, op) < 0) check("all_reduce of a figure");
    double r = nb_item(t);
    nb_scope_end(s);
    return r;
}

/* v of every rank, in rank order, into out[world]. */
static void gather_i64(int64_t v, int64_t *out) {
    if (world == 1) {
        out[0] = v;
        return;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *all = nb_dist_all_gather(nb_from_data(&v, NB_SHAPE(1), NB_I64));
    check("all_gather of a figure");
    nb_copy_to(all, out, sizeof(int64_t) * (size_t)world);
    nb_scope_end(s);
}

static void barrier(void) {
    if (world > 1 && nb_dist_barrier() < 0) check("barrier");
}

/* ---- throughput: mlp and cnn ---- */

static bool compiled = false; /* --compiled: the step under nb_compile (graph mode) */

typedef struct {
    trainer tr;         /* the model and its optimizer (tests/train_step.h) */
    nb_tensor *x[NBATCH], *y[NBATCH];
    int nbatch;
    long step;
    double last_loss;
    nb_compiled *graph; /* train_step compiled, with --compiled */
} bench_run;

static void train_steps(bench_run *t, long n) {
    for (long i = 0; i < n; i++, t->step++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *in[2] = { t->x[t->step % t->nbatch], t->y[t->step % t->nbatch] };
        nb_tensor *loss = t->graph ? nb_compiled_run(t->graph, in, 2) : train_step(in, 2, &t->tr);
        if (!loss) check("training step");
        if (i == n - 1) t->last_loss = nb_item(loss);
        nb_scope_end(s);
    }
    check("training steps");
}

static nb_module *mlp_new(void) {
    return nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
}

static nb_module *cnn_new(void) {
    return nb_nn_sequential(
        nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
}

static void bench_throughput(const char *name) {
    bool is_mlp = !strcmp(name, "mlp");
    int warmup = is_mlp ? (quick ? 10 : 50) : (quick ? 1 : 3);
    int windows = is_mlp ? (quick ? 3 : 7) : (quick ? 3 : 5);
    double target_s = is_mlp ? (quick ? 0.1 : 0.3) : (quick ? 0.3 : 1.0);
    int reps = is_mlp ? (quick ? 20 : 100) : (quick ? 5 : 20);
    int64_t local = GLOBAL_BATCH / world;

    bench_run t = { 0 };
    nb_manual_seed(0); /* the same weights everywhere (nb_ddp broadcasts rank 0's anyway) */
    nb_module *m = is_mlp ? mlp_new() : cnn_new();
    check("model");
    int64_t nparams = nb_module_num_params(m);
    t.tr.model = world > 1 ? nb_ddp(m, (nb_ddp_opts){ 0 }) : m;
    check("nb_ddp");
    t.tr.opt = nb_optim_sgd(t.tr.model, (nb_sgd_opts){ .lr = 0.01, .momentum = 0.9 });
    check("optimizer");
    if (compiled) t.graph = nb_compile(train_step, &t.tr, (nb_graph_opts){ 0 });
    check("nb_compile");
    nb_manual_seed(100 + (uint64_t)rank); /* each rank its own share of the global batch */
    t.nbatch = is_mlp ? NBATCH : 16;
    for (int b = 0; b < t.nbatch; b++) {
        t.x[b] = nb_rand(NB_SHAPE(local, 1, 28, 28), NB_F32);
        t.y[b] = nb_cast(nb_floor(nb_mul_scalar(nb_rand(NB_SHAPE(local), NB_F32), 9.9999)), NB_I64);
    }
    check("data");
    OUT("%s_params %lld\n", name, (long long)nparams);
    OUT("%s_local_batch %lld\n", name, (long long)local);

    train_steps(&t, warmup);
    /* steps per window: from the slowest rank's step, the same on every rank */
    barrier();
    double t0 = now_s();
    train_steps(&t, 2);
    double one = reduce_double((now_s() - t0) / 2, NB_REDUCE_MAX);
    long per = (long)(target_s / (one > 1e-9 ? one : 1e-9));
    if (per < 1) per = 1;

    nb_ddp_stats st0 = world > 1 ? nb_ddp_get_stats(t.tr.model) : (nb_ddp_stats){ 0 };
    double *ts = malloc(sizeof(double) * (size_t)windows);
    barrier();
    double busy0 = machine_busy_s(), own0 = own_cpu_s(), wall0 = now_s();
    for (int w = 0; w < windows; w++) {
        barrier();
        t0 = now_s();
        train_steps(&t, per);
        barrier();
        ts[w] = (now_s() - t0) / (double)per;
    }
    double wall = now_s() - wall0;
    double own = reduce_double(own_cpu_s() - own0, NB_REDUCE_SUM);
    double other = (machine_busy_s() - busy0 - own) / wall;
    double step = median(ts, windows);
    free(ts);
    OUT("%s_step_ms %.4f\n", name, 1e3 * step);
    OUT("%s_samples_per_s %.2f\n", name, (double)GLOBAL_BATCH / step);
    OUT("%s_steps_per_window %ld\n", name, per);
    OUT("%s_windows %d\n", name, windows);
    OUT("%s_loss %.4f\n", name, t.last_loss);
    if (busy0 >= 0) OUT("%s_other_cpu %.2f\n", name, other < 0 ? 0 : other);

    if (world > 1) {
        nb_ddp_stats st = nb_ddp_get_stats(t.tr.model);
        int64_t nb = st.backwards - st0.backwards;
        double wait = nb > 0 ? (st.wait_seconds - st0.wait_seconds) / (double)nb : 0;
        double wait_mean = reduce_double(wait, NB_REDUCE_SUM) / world, wait_max = reduce_double(wait, NB_REDUCE_MAX);
        OUT("%s_buckets %d\n", name, st.buckets);
        OUT("%s_bucket_bytes_max %lld\n", name, (long long)st.bucket_bytes_max);
        OUT("%s_buckets_early_per_backward %.2f\n", name, (double)(st.buckets_early - st0.buckets_early) / (double)(nb > 0 ? nb : 1));
        OUT("%s_buckets_late_per_backward %.2f\n", name, (double)(st.buckets_late - st0.buckets_late) / (double)(nb > 0 ? nb : 1));
        /* the same buckets allreduced alone: one tensor per bucket */
        nb_tensor *buf[64];
        int nbk = st.buckets < 64 ? st.buckets : 64;
        int64_t total = 0;
        for (int i = 0; i < nbk; i++) {
            int64_t bytes = 0;
            nb_ddp_bucket_info(t.tr.model, i, &bytes, NULL);
            buf[i] = nb_rand(NB_SHAPE(bytes / 4), NB_F32);
            total += bytes;
        }
        check("buckets");
        double *ar = malloc(sizeof(double) * (size_t)reps);
        for (int r = 0; r < 3; r++) /* warm the transport */
            for (int i = 0; i < nbk; i++) nb_dist_all_reduce(buf[i], NB_REDUCE_SUM);
        for (int r = 0; r < reps; r++) {
            barrier();
            t0 = now_s();
            for (int i = 0; i < nbk; i++)
                if (nb_dist_all_reduce(buf[i], NB_REDUCE_SUM) < 0) check("allreduce alone");
            ar[r] = now_s() - t0;
        }
        double alone = reduce_double(median(ar, reps), NB_REDUCE_SUM) / world;
        free(ar);
        for (int i = 0; i < nbk; i++) nb_release(buf[i]);
        double hidden = alone > 0 ? 1 - wait_mean / alone : 0;
        hidden = hidden < 0 ? 0 : hidden > 1 ? 1 : hidden;
        OUT("%s_grad_bytes %lld\n", name, (long long)total);
        OUT("%s_allreduce_alone_ms %.4f\n", name, 1e3 * alone);
        OUT("%s_wait_ms %.4f\n", name, 1e3 * wait_mean);
        OUT("%s_wait_ms_max_rank %.4f\n", name, 1e3 * wait_max);
        OUT("%s_hidden_share %.3f\n", name, hidden);
    }
    int64_t rss[64];
    gather_i64(vm_hwm_kib(), rss);
    for (int r = 0; r < world && r < 64; r++) OUT("%s_peak_rss_kib_r%d %lld\n", name, r, (long long)rss[r]);
    fflush(stdout);

    nb_compiled_free(t.graph);
    nb_optim_free(t.tr.opt);
    nb_module_free(t.tr.model);
    for (int b = 0; b < t.nbatch; b++) {
        nb_release(t.x[b]);
        nb_release(t.y[b]);
    }
}

/* ---- memory: the char GPT under DDP, ZeRO-1 and full sharding ---- */

enum { VOCAB = 65, CONTEXT = 64, WIDTH = 512, LAYERS = 4, HEADS = 4, GPT_BATCH = 4 };

static int64_t tensor_bytes(nb_tensor *t) { return t ? nb_numel(t) * (int64_t)nb_dtype_size(nb_dtype_of(t)) : 0; }

static void bench_gpt(const char *mode) {
    nb_shard shard = !strcmp(mode, "ddp") ? NB_SHARD_NONE : !strcmp(mode, "zero1") ? NB_SHARD_OPTIMIZER : NB_SHARD_FULL;
    int steps = quick ? 2 : 3;
    long start_rss = proc_status_kib("VmRSS:");
    nb_manual_seed(0);
    nb_module *m = gpt_model_new(VOCAB, CONTEXT, WIDTH, LAYERS, HEADS);
    check("gpt_model_new");
    int64_t nparams = nb_module_num_params(m);
    nb_module *model = nb_ddp(m, (nb_ddp_opts){ .shard = shard });
    check("nb_ddp");
    nb_optimizer *opt = nb_optim_adamw(model, (nb_adamw_opts){ .lr = 1e-3 });
    check("optimizer");
    long wrap_rss = proc_status_kib("VmRSS:"), wrap_peak = vm_hwm_kib(), first_peak = 0;
    nb_manual_seed(200 + (uint64_t)rank);
    double *ts = malloc(sizeof(double) * (size_t)steps);
    double last_loss = 0;
    for (int i = 0; i < steps; i++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *ids = nb_cast(nb_floor(nb_mul_scalar(nb_rand(NB_SHAPE(GPT_BATCH, CONTEXT + 1), NB_F32), VOCAB - 0.001)), NB_I64);
        nb_tensor *x = nb_contiguous(nb_slice(ids, 1, 0, CONTEXT, 1));
        nb_tensor *y = nb_reshape(nb_contiguous(nb_slice(ids, 1, 1, CONTEXT + 1, 1)), NB_SHAPE(GPT_BATCH * CONTEXT));
        barrier();
        double t0 = now_s();
        nb_tensor *logits = nb_forward(model, x);
        nb_tensor *loss = nb_cross_entropy(nb_reshape(logits, NB_SHAPE(GPT_BATCH * CONTEXT, VOCAB)), y, (nb_ce_opts){ 0 });
        nb_optim_zero_grad(opt);
        if (nb_backward(loss) < 0 || nb_optim_step(opt) < 0) check("gpt step");
        barrier();
        ts[i] = now_s() - t0;
        last_loss = nb_item(loss);
        nb_scope_end(s);
        if (i == 0) first_peak = vm_hwm_kib();
    }
    check("gpt steps");
    size_t held = 0, used = 0;
    nb_memory_stats(&held, &used, NULL);
    /* what the rank holds: its module's parameters and gradients, its optimizer's state */
    nb_named_tensor e[256];
    int k = nb_module_named_parameters(model, e, 256);
    int64_t pbytes = 0, gbytes = 0, obytes = 0, bbytes = 0;
    for (int i = 0; i < k && i < 256; i++) {
        pbytes += tensor_bytes(e[i].tensor);
        gbytes += tensor_bytes(nb_grad_of(e[i].tensor));
    }
    int ns = nb_optim_named_state(opt, e, 256);
    for (int i = 0; i < ns && i < 256; i++)
        if (!strstr(e[i].name, ".step")) obytes += tensor_bytes(e[i].tensor);
    nb_ddp_stats st = nb_ddp_get_stats(model);
    for (int i = 0; i < st.buckets; i++) {
        int64_t b = 0;
        if (nb_ddp_bucket_info(model, i, &b, NULL) == 0) bbytes += b;
    }
    nb_error_clear();
    long peak = vm_hwm_kib();

    OUT("gpt_mode %s\n", mode);
    OUT("gpt_config vocab=%d context=%d width=%d layers=%d heads=%d batch_per_rank=%d steps=%d\n", VOCAB, CONTEXT, WIDTH, LAYERS,
        HEADS, GPT_BATCH, steps);
    OUT("gpt_params %lld\n", (long long)nparams);
    OUT("gpt_step_ms %.2f\n", 1e3 * median(ts + 1, steps - 1)); /* the first step makes the state */
    OUT("gpt_loss %.4f\n", last_loss);
    OUT("gpt_buckets %d\n", st.buckets);
    OUT("gpt_bucket_bytes %lld\n", (long long)bbytes);
    OUT("gpt_owned_bytes_r0 %lld\n", (long long)st.owned_bytes);
    enum { NK = 10 };
    int64_t v[NK][64];
    int64_t mine[NK] = { peak, start_rss, pbytes, gbytes, obytes, wrap_rss, wrap_peak, first_peak, (int64_t)held / 1024, (int64_t)used / 1024 };
    static const char *const keys[NK] = { "peak_rss_kib", "start_rss_kib", "param_bytes", "grad_bytes", "optim_bytes",
                                          "wrap_rss_kib", "wrap_peak_kib", "first_step_peak_kib", "alloc_held_kib", "alloc_used_kib" };
    for (int j = 0; j < NK; j++) gather_i64(mine[j], v[j]);
    for (int j = 0; j < NK; j++)
        for (int r = 0; r < world && r < 64; r++) OUT("gpt_%s_r%d %lld\n", keys[j], r, (long long)v[j][r]);
    fflush(stdout);
    free(ts);
    nb_optim_free(opt);
    nb_module_free(model);
}

int main(int argc, char **argv) {
    if (nb_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "bench_dist: %s\n", nb_error());
        return 1;
    }
    rank = nb_dist_rank();
    world = nb_dist_world_size();
    const char *what = NULL, *mode = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--compiled")) compiled = true;
        else if (!what) what = argv[i];
        else if (!mode) mode = argv[i];
        else what = "?";
    }
    bool ok = what && (((!strcmp(what, "mlp") || !strcmp(what, "cnn")) && !mode) ||
                       (!strcmp(what, "gpt") && mode && (!strcmp(mode, "ddp") || !strcmp(mode, "zero1") || !strcmp(mode, "full"))));
    if (!ok) {
        if (rank == 0) fprintf(stderr, "usage: %s [--quick] [--compiled] mlp|cnn  |  %s [--quick] gpt ddp|zero1|full  (under mpirun for several ranks)\n", argv[0], argv[0]);
        nb_dist_finalize();
        return 2;
    }
    if (GLOBAL_BATCH % world != 0) {
        if (rank == 0) fprintf(stderr, "bench_dist: the global batch %d does not split over %d ranks\n", GLOBAL_BATCH, world);
        nb_dist_finalize();
        return 2;
    }
    OUT("nabla_version %s\n", nb_version());
    OUT("dist_backend %s\n", nb_dist_backend());
    OUT("world %d\n", world);
    OUT("threads %d\n", nb_get_num_threads());
    fflush(stdout);
    if (!strcmp(what, "gpt")) bench_gpt(mode);
    else bench_throughput(what);
    nb_dist_finalize();
    return 0;
}
