/* DDP (nb_ddp) under mpirun with 2 and 3 ranks (tests/dist.cmake), and as a single process:
   - equivalence: examples/mlp.c's 784-128-10 MLP on synthetic data, trained with a global batch
     of 60 split across the ranks by the loader's shards, against one process on the same global
     batches: parameters within 1e-5 relative with SGD + momentum, 1e-4 with AdamW (see below);
   - repeatability: two DDP runs are bit-identical, and every rank holds the same bits;
   - construction: ranks that start from different weights end with rank 0's; the buckets are in
     reverse registration order, the first smaller; every bucket starts during backward;
   - unused parameters: one used only on rank 0 gets rank 0's gradient / W everywhere, one used
     nowhere keeps no gradient, and nothing hangs;
   - state dicts keep the inner names and a rank-0 save loads into a plain module;
   - graph mode: the DDP training step under nb_compile (the reducer recorded as host calls) trains
     as eager DDP and as one process, repeats itself bit for bit, and starts every bucket during
     backward;
   - errors: ZeRO-1 under nb_compile, a different architecture on one rank (named), bad options.
   Exits 77 (CTest's SKIPPED) in a build without MPI. */
#include "test_util.h"
#include "dist_util.h"
#include "gpt_model.h"
#include "train_step.h"


typedef struct { nb_module base; nb_module *fc1, *fc2; } Net;

static nb_tensor *net_forward(nb_module *self, nb_tensor *x) {
    Net *net = (Net *)self;
    return nb_forward(net->fc2, nb_relu(nb_forward(net->fc1, x)));
}
static const nb_module_class NET = { .name = "Net", .forward = net_forward };

static nb_module *net_new(int64_t hidden) {
    Net *net = (Net *)nb_module_new(&NET, sizeof(Net));
    net->fc1 = nb_module_child(&net->base, "fc1", nb_nn_linear(784, hidden));
    net->fc2 = nb_module_child(&net->base, "fc2", nb_nn_linear(hidden, 10));
    return &net->base;
}

enum { SAMPLES = 600, GLOBAL_BATCH = 60, STEPS = 20 };

/* The synthetic data set, the same on every rank: x N(0, 1) [600, 784], y = argmax of a fixed
   random projection (a learnable rule). */
static nb_dataset *make_data(void) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(7);
    nb_tensor *x = nb_randn(NB_SHAPE(SAMPLES, 784), NB_F32);
    nb_tensor *y = nb_argmax(nb_matmul(x, nb_randn(NB_SHAPE(784, 10), NB_F32)), 1, false);
    nb_dataset *ds = nb_data_tensors(x, y);
    nb_scope_end(s);
    assert_non_null(ds);
    return ds;
}

/* All of m's parameters, flattened in order, as one malloc'ed f32 array of *n floats. */
static float *flat_tensors(nb_module *m, int64_t *n, bool grads) {
    nb_named_tensor e[64];
    int k = nb_module_named_parameters(m, e, 64);
    assert_true(k >= 0 && k <= 64);
    int64_t total = 0;
    for (int i = 0; i < k; i++) total += nb_numel(e[i].tensor);
    float *out = malloc(sizeof(float) * (size_t)total), *at = out;
    for (int i = 0; i < k; i++) {
        nb_tensor *t = grads ? nb_grad_of(e[i].tensor) : e[i].tensor;
        if (!t) fail_msg("rank %d: parameter %s has no gradient", R, e[i].name);
        assert_int_equal(nb_copy_to(t, at, sizeof(float) * (size_t)nb_numel(e[i].tensor)), 0);
        at += nb_numel(e[i].tensor);
    }
    *n = total;
    return out;
}

/* m's parameters, flattened (malloc'ed). */
static float *flat_params(nb_module *m, int64_t *n) { return flat_tensors(m, n, false); }

/* Overwrites m's parameters with the flat values. */
static void set_params(nb_module *m, const float *v) {
    nb_named_tensor e[16];
    int k = nb_module_named_parameters(m, e, 16);
    for (int i = 0; i < k; i++) {
        memcpy(nb_data_ptr(e[i].tensor), v, sizeof(float) * (size_t)nb_numel(e[i].tensor));
        v += nb_numel(e[i].tensor);
    }
}

/* Bytes of optimizer state the last train() kept (its state tensors but the step counts). */
static int64_t last_state_bytes;
/* The gradients the last train()'s final step left on the parameters, flattened (malloc'ed). */
static float *last_grads;

/* Graph mode for train(): the step compiled (tests/train_step.h's, the same ops) when set. */
static bool compiled_steps;

/* Trains model (a DDP module or a plain one) for STEPS batches of loader; adamw or SGD + momentum. */
static void train(nb_module *model, nb_data_loader *loader, bool adamw) {
    nb_optimizer *opt = adamw ? nb_optim_adamw(model, (nb_adamw_opts){ .lr = 1e-3 })
                              : nb_optim_sgd(model, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9 });
    assert_non_null(opt);
    trainer tr = { model, opt };
    nb_compiled *c = compiled_steps ? nb_compile(train_step, &tr, (nb_graph_opts){ 0 }) : NULL;
    int steps = 0;
    while (steps < STEPS) {
        nb_batch b;
        while (steps < STEPS && nb_data_loader_next(loader, &b)) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *loss = c ? nb_compiled_run(c, (nb_tensor *[]){ b.x, b.y }, 2) : train_step((nb_tensor *[]){ b.x, b.y }, 2, &tr);
            if (!loss) fail_msg("rank %d, step %d: %s", R, steps, nb_error());
            nb_scope_end(s);
            steps++;
        }
        assert_false(nb_data_loader_failed(loader));
    }
    if (c) assert_int_equal(nb_compiled_get_stats(c).traces, 1);
    int64_t ng;
    free(last_grads);
    last_grads = flat_tensors(model, &ng, true);
    nb_compiled_free(c);
    nb_named_tensor st[64];
    int k = nb_optim_named_state(opt, st, 64);
    assert_true(k >= 0 && k <= 64);
    last_state_bytes = 0;
    for (int i = 0; i < k; i++)
        if (!strstr(st[i].name, ".step")) last_state_bytes += nb_numel(st[i].tensor) * (int64_t)sizeof(float);
    nb_optim_free(opt);
}

/* DDP training from rank-specific initial weights: the final parameters (malloc'ed), the
   initial ones (rank 0's, after nb_ddp) in *init. */
static float *train_ddp(nb_dataset *ds, bool adamw, double bucket_mb, nb_shard shard, float **init, nb_ddp_stats *stats) {
    nb_manual_seed(1000 + (uint64_t)R); /* each rank starts elsewhere: nb_ddp brings rank 0's weights */
    nb_module *ddp = nb_ddp(net_new(128), (nb_ddp_opts){ .bucket_mb = bucket_mb, .shard = shard });
    if (!ddp) fail_msg("rank %d: %s", R, nb_error());
    int64_t n;
    assert_int_equal(nb_dist_full_params_begin(ddp), 0); /* a no-op but under NB_SHARD_FULL */
    if (init) *init = flat_params(nb_ddp_inner(ddp), &n);
    assert_int_equal(nb_dist_full_params_end(ddp, false), 0);
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = GLOBAL_BATCH / W, .shuffle = true, .seed = 5 });
    assert_non_null(l);
    assert_int_equal(nb_data_loader_len(l), SAMPLES / GLOBAL_BATCH);
    train(ddp, l, adamw);
    nb_data_loader_free(l);
    if (stats) *stats = nb_ddp_get_stats(ddp);
    assert_int_equal(nb_dist_full_params_begin(ddp), 0);
    float *out = flat_params(nb_ddp_inner(ddp), &n);
    assert_int_equal(nb_dist_full_params_end(ddp, false), 0);
    nb_module_free(ddp);
    return out;
}

/* Whether every rank holds exactly these n floats (compared with rank 0's). */
static void expect_same_on_every_rank(const float *v, int64_t n, const char *what) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *all = nb_dist_all_gather(nb_from_data(v, NB_SHAPE(n), NB_F32));
    assert_non_null(all);
    const float *a = nb_data_ptr(all);
    for (int r = 1; r < W; r++)
        if (memcmp(a, a + (size_t)r * (size_t)n, sizeof(float) * (size_t)n) != 0)
            fail_msg("%s: rank %d's bits differ from rank 0's", what, r);
    nb_scope_end(s);
}

/* The MLP's four parameter tensors, in flat_params order. */
static const int64_t mlp_sizes[4] = { 128 * 784, 128, 10 * 128, 10 };

/* The largest difference between got and ref, relative to the largest weight of each of the
   MLP's four tensors in ref. */
static double rel_difference(const float *got, const float *ref) {
    int64_t at = 0;
    double worst = 0;
    for (int t = 0; t < 4; t++) {
        double big = 0, diff = 0;
        for (int64_t i = at; i < at + mlp_sizes[t]; i++) {
            big = fmax(big, fabs(ref[i]));
            diff = fmax(diff, fabs((double)got[i] - ref[i]));
        }
        worst = fmax(worst, diff / big);
        at += mlp_sizes[t];
    }
    return worst;
}

static void equivalence(bool adamw) {
    nb_dataset *ds = make_data();
    float *init = NULL;
    nb_ddp_stats st;
    float *ddp = train_ddp(ds, adamw, 0.004, NB_SHARD_NONE, &init, &st);
    int64_t n = 784 * 128 + 128 + 128 * 10 + 10;
    /* one process on the same global batches from the same start */
    nb_module *ref = net_new(128);
    set_params(ref, init);
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = GLOBAL_BATCH, .shuffle = true, .seed = 5, .world_size = 1 });
    train(ref, l, adamw);
    nb_data_loader_free(l);
    int64_t m;
    float *want = flat_params(ref, &m);
    assert_int_equal(m, n);
    double worst = rel_difference(ddp, want), moved = 0;
    for (int64_t i = 0; i < n; i++) moved = fmax(moved, fabs((double)want[i] - init[i]));
    if (R == 0) printf("# %s, %d ranks: largest relative difference from one process %.3g\n", adamw ? "AdamW" : "SGD", W, worst);
    /* SGD's steps are proportional to the gradients, so the ranks' different order of summing
       shows as rounding (2e-7 measured). Adam divides by sqrt(v): a gradient element that is
       near zero after the batch's terms cancel, rounded differently, moves its weight by a
       sizeable part of lr (9e-6 measured over 20 steps), so AdamW is held to 1e-4. */
    double tol = adamw ? 1e-4 : 1e-5;
    if (!(worst <= tol)) fail_msg("rank %d: DDP differs from one process by %.3g relative (at most %g)", R, worst, tol);
    assert_true(moved > 1e-3); /* it trained */
    expect_same_on_every_rank(ddp, n, "the trained parameters");
    /* every bucket started during backward: two buckets (fc2's, then fc1's) per step */
    assert_int_equal(st.buckets, 2);
    assert_int_equal(st.backwards, STEPS);
    assert_int_equal(st.buckets_early, 2 * STEPS);
    assert_int_equal(st.buckets_late, 0);
    /* a second run repeats the first bit for bit */
    float *again = train_ddp(ds, adamw, 0.004, NB_SHARD_NONE, NULL, NULL);
    if (memcmp(again, ddp, sizeof(float) * (size_t)n) != 0) fail_msg("rank %d: two DDP runs differ", R);
    free(again);
    int64_t full_state = last_state_bytes;
    /* ZeRO-1: the same updates on the same averaged gradients, each by its owner: DDP's bits */
    nb_ddp_stats zs;
    float *zero = train_ddp(ds, adamw, 0.004, NB_SHARD_OPTIMIZER, NULL, &zs);
    if (memcmp(zero, ddp, sizeof(float) * (size_t)n) != 0) fail_msg("rank %d: ZeRO-1 differs from DDP", R);
    expect_same_on_every_rank(zero, n, "the ZeRO-1 parameters");
    /* the state is dealt out: every parameter owned once; whole parameters, so the rank with
       fc1's weight (98.6% of the elements) holds most of it, as torch's ZeroRedundancyOptimizer */
    int64_t mine[2] = { zs.params_owned, last_state_bytes };
    nb_scope *sc = nb_scope_begin();
    nb_tensor *all = nb_dist_all_gather(nb_from_data(mine, NB_SHAPE(2), NB_I64));
    assert_non_null(all);
    const int64_t *a = nb_data_ptr(all);
    int64_t owned = 0, state = 0, most = 0;
    for (int r = 0; r < W; r++) owned += a[2 * r], state += a[2 * r + 1], most = a[2 * r + 1] > most ? a[2 * r + 1] : most;
    assert_int_equal(owned, 4);
    assert_int_equal(state, full_state);
    if (W > 1) assert_true(most < full_state && most >= 784 * 128 * 4);
    if (R == 0)
        printf("# ZeRO-1, %d ranks: optimizer state %lld bytes on the fullest rank, %lld in all (%lld under DDP)\n", W,
               (long long)most, (long long)state, (long long)full_state);
    nb_scope_end(sc);
    free(zero);
    /* full sharding: the same averaged gradients, summed by a reduce-scatter and then divided,
       where DDP divides each share and sums on a ring, in another order on 3 ranks, and the same
       updates element by element: within 1e-6 with SGD (2e-7 measured on 3 ranks; 0 on 2, where
       a + b = b + a and halving is exact); AdamW magnifies the rounding of near-zero gradients
       as above (4e-7 to 2e-6 on 3 ranks), so it is held to 1e-5 */
    nb_ddp_stats fs;
    float *full = train_ddp(ds, adamw, 0, NB_SHARD_FULL, NULL, &fs);
    double fworst = rel_difference(full, ddp);
    if (R == 0) printf("# full sharding, %d ranks: largest relative difference from DDP %.3g\n", W, fworst);
    double ftol = adamw ? 1e-5 : 1e-6;
    if (!(fworst <= ftol)) fail_msg("rank %d: full sharding differs from DDP by %.3g relative (at most %g)", R, fworst, ftol);
    expect_same_on_every_rank(full, n, "the fully sharded parameters");
    /* two units (fc1, fc2), each reduce-scattered during backward; the state is 1/world of DDP's
       but for the padding of each unit to a multiple of the world size */
    assert_int_equal(fs.buckets, 2);
    assert_int_equal(fs.backwards, STEPS);
    assert_int_equal(fs.buckets_early, 2 * STEPS);
    int64_t fmine = last_state_bytes, per_kind = adamw ? 2 : 1;
    int64_t bound = per_kind * 4 * ((784 * 128 + 128) / W + 1 + (128 * 10 + 10) / W + 1);
    if (fmine > bound) fail_msg("rank %d: %lld bytes of optimizer state under full sharding (at most %lld)", R, (long long)fmine, (long long)bound);
    if (R == 0) printf("# full sharding, %d ranks: optimizer state %lld bytes per rank (%lld under DDP)\n", W, (long long)fmine, (long long)full_state);
    free(full);
    free(want);
    free(ddp);
    free(init);
    nb_module_free(ref);
    nb_dataset_free(ds);
}

static void test_equivalence_sgd(void **state) {
    (void)state;
    equivalence(false);
}

static void test_equivalence_adamw(void **state) {
    (void)state;
    equivalence(true);
}

/* Graph mode: the DDP step compiled, against eager DDP and one process from the same start. The
   compiled step fuses elementwise ops (their bits may differ from eager's in the last place), so
   it is held to eager DDP within 1e-5 relative, like every compiled step; to one process as eager
   DDP is. */
static void compiled_equivalence(bool adamw) {
    nb_dataset *ds = make_data();
    float *init = NULL;
    nb_ddp_stats eager_st, st;
    float *eager = train_ddp(ds, adamw, 0.004, NB_SHARD_NONE, &init, &eager_st);
    float *eager_grads = last_grads;
    last_grads = NULL;
    compiled_steps = true;
    float *graph = train_ddp(ds, adamw, 0.004, NB_SHARD_NONE, NULL, &st);
    /* the replay hands each parameter the averaged gradient, as eager DDP does */
    double worst_grad = rel_difference(last_grads, eager_grads);
    if (!(worst_grad <= 1e-4)) fail_msg("rank %d: compiled DDP's last gradients differ from eager DDP's by %.3g relative", R, worst_grad);
    free(eager_grads);
    float *again = train_ddp(ds, adamw, 0.004, NB_SHARD_NONE, NULL, NULL);
    compiled_steps = false;
    int64_t n = 784 * 128 + 128 + 128 * 10 + 10;
    if (memcmp(again, graph, sizeof(float) * (size_t)n) != 0) fail_msg("rank %d: two compiled DDP runs differ", R);
    expect_same_on_every_rank(graph, n, "the parameters of compiled DDP");
    double worst = rel_difference(graph, eager);
    if (R == 0) printf("# compiled DDP (%s), %d ranks: largest relative difference from eager DDP %.3g\n", adamw ? "AdamW" : "SGD", W, worst);
    if (!(worst <= 1e-5)) fail_msg("rank %d: compiled DDP differs from eager DDP by %.3g relative", R, worst);
    /* the reducer ran at every replay: every bucket started during backward, every step waited */
    assert_int_equal(st.buckets, 2);
    assert_int_equal(st.backwards, STEPS);
    assert_int_equal(st.buckets_early, 2 * STEPS);
    assert_int_equal(st.buckets_late, 0);
    free(again);
    free(graph);
    free(eager);
    free(init);
    nb_dataset_free(ds);
}

static void test_compiled_sgd(void **state) {
    (void)state;
    compiled_equivalence(false);
}

static void test_compiled_adamw(void **state) {
    (void)state;
    compiled_equivalence(true);
}

/* The CNN (conv 8, pool, conv 16, pool, linear) trained with SGD + momentum on global batches of
   60 images split across the ranks (the 64 does not split across 3 ranks; 60 does),
   against one process on the same global batches, within 1e-5:
   - with tanh and average pooling, 100 steps (2e-7 and 4e-7 measured on 2 and 3 ranks);
   - with ReLU and max pooling, 50 steps (3e-7 and 3e-7). Past step 50 this one parts from one
     process whatever DDP does: one process summing two parts of 30 (or three of 20) with no
     MPI at all parts from one process on the whole batches by 8e-4 at step 60 and 0.26 at step
     100 while the loss falls fastest, as rounding flips a max-pool or ReLU choice and training
     amplifies it, so it is held for 50 steps. */
static nb_module *cnn_new(bool smooth) {
    if (smooth)
        return nb_nn_sequential(nb_nn_conv2d(1, 8, 3, (nb_conv2d_opts){ 0 }), nb_nn_tanh(), nb_nn_avg_pool2d(2, (nb_pool_opts){ 0 }),
                                nb_nn_conv2d(8, 16, 3, (nb_conv2d_opts){ 0 }), nb_nn_tanh(), nb_nn_avg_pool2d(2, (nb_pool_opts){ 0 }),
                                nb_nn_flatten(), nb_nn_linear(16 * 5 * 5, 10), NULL);
    return nb_nn_sequential(nb_nn_conv2d(1, 8, 3, (nb_conv2d_opts){ 0 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
                            nb_nn_conv2d(8, 16, 3, (nb_conv2d_opts){ 0 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
                            nb_nn_flatten(), nb_nn_linear(16 * 5 * 5, 10), NULL);
}

/* Trains m for steps batches of 60 rows, this rank's per of them from offset; the parameters,
   malloc'ed. */
static float *cnn_train(nb_module *m, nb_tensor *x, nb_tensor *y, int64_t per, int64_t offset, int steps) {
    nb_optimizer *opt = nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9 });
    for (int s = 0; s < steps; s++) {
        nb_scope *sc = nb_scope_begin();
        int64_t at = (s % 10) * 60 + offset;
        nb_tensor *loss = nb_cross_entropy(nb_forward(m, nb_slice(x, 0, at, at + per, 1)), nb_slice(y, 0, at, at + per, 1), (nb_ce_opts){ 0 });
        nb_optim_zero_grad(opt);
        if (nb_backward(loss) < 0 || nb_optim_step(opt) < 0) fail_msg("rank %d, step %d: %s", R, s, nb_error());
        nb_scope_end(sc);
    }
    nb_optim_free(opt);
    int64_t n;
    return flat_params(m, &n);
}

static double cnn_difference(nb_module *ref, const float *got, const float *want) {
    nb_named_tensor e[16];
    int k = nb_module_named_parameters(ref, e, 16);
    double worst = 0;
    int64_t at = 0;
    for (int t = 0; t < k; t++) {
        double big = 0, diff = 0;
        for (int64_t i = at; i < at + nb_numel(e[t].tensor); i++) big = fmax(big, fabs(want[i])), diff = fmax(diff, fabs((double)got[i] - want[i]));
        worst = fmax(worst, diff / big);
        at += nb_numel(e[t].tensor);
    }
    return worst;
}

static void test_equivalence_cnn(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(8);
    nb_tensor *x = nb_randn(NB_SHAPE(600, 1, 28, 28), NB_F32);
    nb_tensor *y = nb_argmax(nb_matmul(nb_reshape(x, NB_SHAPE(600, 784)), nb_randn(NB_SHAPE(784, 10), NB_F32)), 1, false);
    for (int smooth = 0; smooth < 2; smooth++) {
        int steps = smooth ? 100 : 50;
        nb_manual_seed(300 + (uint64_t)R);
        nb_module *ddp = nb_ddp(cnn_new(smooth), (nb_ddp_opts){ 0 });
        assert_non_null(ddp);
        int64_t n;
        float *init = flat_params(ddp, &n);
        float *got = cnn_train(ddp, x, y, 60 / W, R * (60 / W), steps);
        expect_same_on_every_rank(got, n, "the CNN's parameters");
        nb_module *one = cnn_new(smooth);
        set_params(one, init);
        float *want = cnn_train(one, x, y, 60, 0, steps);
        double worst = cnn_difference(one, got, want);
        if (R == 0)
            printf("# CNN (%s), %d SGD steps, %d ranks: largest relative difference from one process %.3g\n",
                   smooth ? "tanh, average pooling" : "ReLU, max pooling", steps, W, worst);
        if (!(worst <= 1e-5)) fail_msg("rank %d: the CNN under DDP differs from one process by %.3g relative (at most 1e-5)", R, worst);
        free(init);
        free(got);
        free(want);
        nb_module_free(one);
        nb_module_free(ddp);
    }
    nb_scope_end(s);
}

static void test_construction(void **state) {
    (void)state;
    nb_manual_seed(50 + (uint64_t)R);
    nb_module *net = net_new(128);
    int64_t n;
    float *before = flat_params(net, &n);
    nb_module *ddp = nb_ddp(net, (nb_ddp_opts){ 0 });
    if (!ddp) fail_msg("%s", nb_error());
    assert_ptr_equal(nb_ddp_inner(ddp), net);
    float *after = flat_params(ddp, &n);
    expect_same_on_every_rank(after, n, "the parameters after nb_ddp");
    if (R == 0) assert_memory_equal(before, after, sizeof(float) * (size_t)n);
    /* the default: one bucket of everything (407 KB < the first bucket's 1 MiB) */
    assert_int_equal(nb_ddp_get_stats(ddp).buckets, 1);
    int64_t bytes;
    int params;
    assert_int_equal(nb_ddp_bucket_info(ddp, 0, &bytes, &params), 0);
    assert_int_equal(bytes, 4 * (784 * 128 + 128 + 128 * 10 + 10));
    assert_int_equal(params, 4);
    assert_int_equal(nb_ddp_bucket_info(ddp, 1, &bytes, &params), -1);
    ASSERT_ERROR_CONTAINS("bucket 1 of 1");
    /* names are the inner module's */
    nb_named_tensor e[8];
    assert_int_equal(nb_module_named_parameters(ddp, e, 8), 4);
    assert_string_equal(e[0].name, "fc1.weight");
    assert_string_equal(e[3].name, "fc2.bias");
    nb_module_free(ddp);
    free(before);
    free(after);
    /* 4 KiB buckets: reverse order, the first closes once it holds 4 KiB: fc2.bias + fc2.weight,
       then fc1.bias + fc1.weight */
    ddp = nb_ddp(net_new(128), (nb_ddp_opts){ .bucket_mb = 0.004 });
    assert_non_null(ddp);
    assert_int_equal(nb_ddp_get_stats(ddp).buckets, 2);
    assert_int_equal(nb_ddp_bucket_info(ddp, 0, &bytes, &params), 0);
    assert_int_equal(bytes, 4 * (10 + 1280));
    assert_int_equal(params, 2);
    assert_int_equal(nb_ddp_bucket_info(ddp, 1, &bytes, &params), 0);
    assert_int_equal(bytes, 4 * (128 + 784 * 128));
    nb_module_free(ddp);
    /* 2 MiB buckets: the first is capped at 1 MiB; a 3-layer net of 0.4 + 1 + 1 MiB layers */
    nb_module *seq = nb_nn_sequential(nb_nn_linear(1024, 256), nb_nn_linear(256, 1024), nb_nn_linear(1024, 256), NULL);
    ddp = nb_ddp(seq, (nb_ddp_opts){ .bucket_mb = 2 });
    assert_non_null(ddp);
    assert_int_equal(nb_ddp_get_stats(ddp).buckets, 2);
    assert_int_equal(nb_ddp_bucket_info(ddp, 0, &bytes, &params), 0);
    assert_int_equal(bytes, 4 * (256 + 256 * 1024)); /* 2.bias, 2.weight: 1 MiB + 1 KiB >= 1 MiB */
    assert_int_equal(nb_ddp_bucket_info(ddp, 1, &bytes, &params), 0);
    assert_int_equal(params, 4);
    nb_module_free(ddp);
}

/* fc_a always, fc_b on rank 0 only, fc_c never */
typedef struct { nb_module base; nb_module *a, *b, *c; } Branchy;
static nb_tensor *branchy_forward(nb_module *self, nb_tensor *x) {
    Branchy *m = (Branchy *)self;
    nb_tensor *h = nb_forward(m->a, x);
    if (nb_dist_rank() == 0) h = nb_add(h, nb_forward(m->b, x));
    return h;
}
static const nb_module_class BRANCHY = { .name = "Branchy", .forward = branchy_forward };

static void test_unused_parameters(void **state) {
    (void)state;
    nb_manual_seed(3);
    Branchy *br = (Branchy *)nb_module_new(&BRANCHY, sizeof(Branchy));
    br->a = nb_module_child(&br->base, "a", nb_nn_linear(6, 4));
    br->b = nb_module_child(&br->base, "b", nb_nn_linear(6, 4));
    br->c = nb_module_child(&br->base, "c", nb_nn_linear(6, 4));
    nb_module *ddp = nb_ddp(&br->base, (nb_ddp_opts){ .bucket_mb = 0.00005 }); /* a bucket per layer */
    if (!ddp) fail_msg("%s", nb_error());
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(11 + (uint64_t)R);
    nb_tensor *x = nb_randn(NB_SHAPE(5, 6), NB_F32);
    /* this rank's own gradients, from the inner module (no reduction) */
    nb_module *inner = nb_ddp_inner(ddp);
    assert_int_equal(nb_backward(nb_sum_all(nb_forward(inner, x))), 0);
    nb_tensor *own_a = nb_clone(nb_grad_of(nb_module_get(inner, "a.weight")));
    nb_tensor *own_b = R == 0 ? nb_clone(nb_grad_of(nb_module_get(inner, "b.weight"))) : nb_zeros(NB_SHAPE(4, 6), NB_F32);
    assert_null(nb_grad_of(nb_module_get(inner, "c.weight")));
    nb_module_zero_grad(ddp);
    /* through DDP: averaged */
    for (int step = 0; step < 2; step++) {
        nb_module_zero_grad(ddp);
        if (nb_backward(nb_sum_all(nb_forward(ddp, x))) < 0) fail_msg("rank %d: %s", R, nb_error());
        nb_tensor *ga = nb_grad_of(nb_module_get(ddp, "a.weight")), *gb = nb_grad_of(nb_module_get(ddp, "b.weight"));
        assert_non_null(ga);
        assert_non_null(gb); /* used on rank 0 only, so every rank has it */
        assert_null(nb_grad_of(nb_module_get(ddp, "c.weight"))); /* used nowhere: none */
        assert_null(nb_grad_of(nb_module_get(ddp, "c.bias")));
        nb_tensor *want_a = nb_clone(own_a), *want_b = nb_clone(own_b);
        assert_int_equal(nb_dist_all_reduce(want_a, NB_REDUCE_AVG), 0);
        assert_int_equal(nb_dist_all_reduce(want_b, NB_REDUCE_AVG), 0);
        assert_true(nb_item(nb_max(nb_flatten(nb_abs(nb_sub(ga, want_a)), 0, -1), 0, false)) < 1e-6);
        assert_true(nb_item(nb_max(nb_flatten(nb_abs(nb_sub(gb, want_b)), 0, -1), 0, false)) < 1e-6);
    }
    nb_ddp_stats st = nb_ddp_get_stats(ddp);
    assert_int_equal(st.backwards, 2);
    assert_true(st.buckets_late >= 2); /* c's bucket at least, each step */
    nb_scope_end(s);
    nb_module_free(ddp);
}

static void test_state_dict(void **state) {
    SKIP_WITHOUT_JSON();
    (void)state;
    nb_manual_seed(60 + (uint64_t)R);
    nb_module *ddp = nb_ddp(net_new(32), (nb_ddp_opts){ 0 });
    assert_non_null(ddp);
    char path[64];
    snprintf(path, sizeof path, "ddp_state_%d.safetensors", W);
    if (R == 0) assert_int_equal(nb_save_state_dict(ddp, path), 0);
    assert_int_equal(nb_dist_barrier(), 0);
    /* a single process's module of the same architecture loads it strictly */
    nb_manual_seed(999);
    nb_module *plain = net_new(32);
    if (nb_load_state_dict(plain, path, (nb_load_opts){ 0 }) < 0) fail_msg("%s", nb_error());
    int64_t n, m;
    float *a = flat_params(ddp, &n), *b = flat_params(plain, &m);
    assert_int_equal(n, m);
    assert_memory_equal(a, b, sizeof(float) * (size_t)n);
    /* and the DDP module loads it back under the same names */
    assert_int_equal(nb_load_state_dict(ddp, path, (nb_load_opts){ 0 }), 0);
    assert_int_equal(nb_dist_barrier(), 0);
    free(a); free(b);
    nb_module_free(plain);
    nb_module_free(ddp);
}

static nb_tensor *pair_forward(nb_module *self, nb_tensor *x) {
    Branchy *m = (Branchy *)self; /* c is never used */
    return nb_add(nb_forward(m->a, x), nb_forward(m->b, x));
}
static const nb_module_class PAIR = { .name = "Pair", .forward = pair_forward };

/* The elements of a flat parameter's shard on this rank, from a plain module's tensors a and b
   (a unit's parameters, concatenated): *n of them, in a malloc'ed array. */
static float *shard_of(nb_tensor *a, nb_tensor *b, int64_t shard) {
    int64_t na = nb_numel(a), nb = nb_numel(b);
    float *all = calloc((size_t)(shard * W), sizeof(float));
    assert_int_equal(nb_copy_to(a, all, sizeof(float) * (size_t)na), 0);
    assert_int_equal(nb_copy_to(b, all + na, sizeof(float) * (size_t)nb), 0);
    float *mine = malloc(sizeof(float) * (size_t)shard);
    memcpy(mine, all + (size_t)(R * shard), sizeof(float) * (size_t)shard);
    free(all);
    return mine;
}

static void test_full_sharding(void **state) {
    SKIP_WITHOUT_JSON();
    (void)state;
    nb_manual_seed(60 + (uint64_t)R); /* each rank starts elsewhere: rank 0's weights win */
    nb_module *fs = nb_ddp(net_new(32), (nb_ddp_opts){ .shard = NB_SHARD_FULL });
    if (!fs) fail_msg("rank %d: %s", R, nb_error());
    nb_module *inner = nb_ddp_inner(fs);
    /* the module's parameters are the units' shards */
    nb_named_tensor e[8];
    assert_int_equal(nb_module_named_parameters(fs, e, 8), 2);
    assert_string_equal(e[0].name, "flat_param_fc1");
    assert_string_equal(e[1].name, "flat_param_fc2");
    int64_t s1 = (784 * 32 + 32 + W - 1) / W, s2 = (32 * 10 + 10 + W - 1) / W;
    assert_int_equal(nb_numel(e[0].tensor), s1);
    assert_int_equal(nb_numel(e[1].tensor), s2);
    /* the wrapped module's parameters have no memory between uses: errors, not crashes */
    float v[32];
    assert_true(nb_copy_to(nb_module_get(inner, "fc1.bias"), v, sizeof v) < 0);
    ASSERT_ERROR_CONTAINS("no memory now");
    nb_scope *s = nb_scope_begin();
    assert_null(nb_neg(nb_module_get(inner, "fc1.bias")));
    ASSERT_ERROR_CONTAINS("has no memory now: its storage was released");
    /* rank 0 saves an ordinary state dict; one process's module loads it strictly */
    char path[64];
    snprintf(path, sizeof path, "fsdp_state_%d.safetensors", W);
    if (nb_dist_save_state_dict(fs, path) < 0) fail_msg("rank %d: %s", R, nb_error());
    nb_module *plain = net_new(32);
    if (nb_load_state_dict(plain, path, (nb_load_opts){ 0 }) < 0) fail_msg("%s", nb_error());
    /* its forward is the sharded module's, in eval without grad and in training with it */
    nb_manual_seed(5);
    nb_tensor *x = nb_randn(NB_SHAPE(6, 784), NB_F32);
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *want = nb_forward(plain, x), *got = nb_forward(fs, x);
    nb_set_grad_enabled(prev);
    assert_non_null(got);
    assert_true(nb_item(nb_max(nb_flatten(nb_abs(nb_sub(got, want)), 0, -1), 0, false)) == 0);
    /* gradients: every rank has the same batch, so the average is one process's gradient */
    assert_int_equal(nb_backward(nb_sum_all(nb_forward(plain, x))), 0);
    if (nb_backward(nb_sum_all(nb_forward(fs, x))) < 0) fail_msg("rank %d: %s", R, nb_error());
    float *w1 = shard_of(nb_grad_of(nb_module_get(plain, "fc1.weight")), nb_grad_of(nb_module_get(plain, "fc1.bias")), s1);
    float *g1 = malloc(sizeof(float) * (size_t)s1);
    assert_non_null(nb_grad_of(e[0].tensor));
    assert_int_equal(nb_copy_to(nb_grad_of(e[0].tensor), g1, sizeof(float) * (size_t)s1), 0);
    for (int64_t i = 0; i < s1; i++)
        if (fabsf(g1[i] - w1[i]) > 1e-5f * (1 + fabsf(w1[i]))) fail_msg("rank %d: gradient element %lld: %g, want %g", R, (long long)i, g1[i], w1[i]);
    free(w1);
    free(g1);
    /* the wrapped module's own gradients were dropped with the full parameters */
    assert_null(nb_grad_of(nb_module_get(inner, "fc1.weight")));
    /* a fresh sharded module loads the file, every rank reading it */
    nb_manual_seed(77);
    nb_module *fs2 = nb_ddp(net_new(32), (nb_ddp_opts){ .shard = NB_SHARD_FULL });
    assert_non_null(fs2);
    if (nb_dist_load_state_dict(fs2, path, (nb_load_opts){ 0 }) < 0) fail_msg("rank %d: %s", R, nb_error());
    prev = nb_set_grad_enabled(false);
    got = nb_forward(fs2, x);
    nb_set_grad_enabled(prev);
    assert_true(nb_item(nb_max(nb_flatten(nb_abs(nb_sub(got, want)), 0, -1), 0, false)) == 0);
    /* a file of another shape fails on every rank, saying why */
    nb_module *fs3 = nb_ddp(net_new(16), (nb_ddp_opts){ .shard = NB_SHARD_FULL });
    assert_non_null(fs3);
    assert_true(nb_dist_load_state_dict(fs3, path, (nb_load_opts){ 0 }) < 0);
    assert_non_null(nb_error());
    nb_error_clear();
    /* and so is a sharded checkpoint of another shape, naming the parameter */
    char dir[64];
    snprintf(dir, sizeof dir, "fsdp_sharded_%d", W);
    if (nb_dist_save_sharded(fs2, NULL, dir, NULL) < 0) fail_msg("rank %d: %s", R, nb_error());
    assert_true(nb_dist_load_sharded(fs3, NULL, dir, NULL) < 0);
    ASSERT_ERROR_CONTAINS("where the model has \"fc1.weight\" [16, 784]");
    nb_scope_end(s);
    nb_module_free(fs3);
    nb_module_free(fs2);
    nb_module_free(plain);
    nb_module_free(fs);

    /* a unit no rank uses: no collective for it in forward, nothing hangs, its shard keeps no
       gradient; the others have theirs */
    nb_manual_seed(3);
    Branchy *br = (Branchy *)nb_module_new(&PAIR, sizeof(Branchy));
    br->a = nb_module_child(&br->base, "a", nb_nn_linear(6, 4));
    br->b = nb_module_child(&br->base, "b", nb_nn_linear(6, 4));
    br->c = nb_module_child(&br->base, "c", nb_nn_linear(6, 4));
    nb_module *pair = nb_ddp(&br->base, (nb_ddp_opts){ .shard = NB_SHARD_FULL });
    assert_non_null(pair);
    s = nb_scope_begin();
    for (int step = 0; step < 2; step++) {
        nb_module_zero_grad(pair);
        if (nb_backward(nb_sum_all(nb_forward(pair, nb_randn(NB_SHAPE(5, 6), NB_F32)))) < 0) fail_msg("rank %d: %s", R, nb_error());
        assert_non_null(nb_grad_of(nb_module_get(pair, "flat_param_a")));
        assert_non_null(nb_grad_of(nb_module_get(pair, "flat_param_b")));
        assert_null(nb_grad_of(nb_module_get(pair, "flat_param_c")));
    }
    nb_ddp_stats st = nb_ddp_get_stats(pair);
    assert_int_equal(st.backwards, 2);
    assert_int_equal(st.buckets, 3);
    nb_scope_end(s);
    nb_module_free(pair);
}

/* The char GPT trained 5 SGD + momentum steps under DDP and under full sharding from the same
   start: the same parameters within 1e-6 of the largest weight. (With AdamW at lr 1e-2 the two
   part by 1e-4 on 3 ranks: the first Adam steps move every weight by about lr whatever its
   gradient's size, so a near-zero gradient summed in another order can move it the other way.)
   Its units are the blocks of its Sequential, as torch wraps a transformer, beside the
   embeddings, the final norm and the head. */
static float *train_gpt(nb_shard shard, int64_t *n, nb_module **keep) {
    nb_manual_seed(21);
    nb_module *m = nb_ddp(gpt_model_new(20, 8, 16, 2, 2), (nb_ddp_opts){ .shard = shard });
    if (!m) fail_msg("rank %d: %s", R, nb_error());
    nb_optimizer *opt = nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.1, .momentum = 0.9 });
    nb_manual_seed(100 + (uint64_t)R); /* each rank its own batch */
    for (int step = 0; step < 5; step++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *idx = nb_cast(nb_floor(nb_mul_scalar(nb_rand(NB_SHAPE(3, 9), NB_F32), 19.99)), NB_I64);
        nb_tensor *x = nb_contiguous(nb_slice(idx, 1, 0, 8, 1)), *y = nb_slice(idx, 1, 1, 9, 1);
        nb_tensor *logits = nb_forward(m, x);
        nb_tensor *loss = nb_cross_entropy(nb_reshape(logits, NB_SHAPE(24, 20)), nb_reshape(nb_contiguous(y), NB_SHAPE(24)), (nb_ce_opts){ 0 });
        nb_optim_zero_grad(opt);
        if (nb_backward(loss) < 0 || nb_optim_step(opt) < 0) fail_msg("rank %d, step %d: %s", R, step, nb_error());
        nb_scope_end(s);
    }
    nb_optim_free(opt);
    assert_int_equal(nb_dist_full_params_begin(m), 0);
    float *out = flat_params(nb_ddp_inner(m), n);
    assert_int_equal(nb_dist_full_params_end(m, false), 0);
    if (keep) *keep = m;
    else nb_module_free(m);
    return out;
}

static void test_full_sharding_gpt(void **state) {
    (void)state;
    int64_t n, m;
    nb_module *fs = NULL;
    float *ddp = train_gpt(NB_SHARD_NONE, &n, NULL), *full = train_gpt(NB_SHARD_FULL, &m, &fs);
    assert_int_equal(n, m);
    static const char *const units[] = { "flat_param_tok", "flat_param_pos", "flat_param_blocks_0", "flat_param_blocks_1",
                                         "flat_param_ln_f", "flat_param_head" };
    nb_named_tensor e[8];
    assert_int_equal(nb_module_named_parameters(fs, e, 8), 6);
    for (int i = 0; i < 6; i++) assert_string_equal(e[i].name, units[i]);
    double worst = 0, big = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)full[i] - ddp[i])), big = fmax(big, fabs(ddp[i]));
    if (R == 0) printf("# char GPT, full sharding on %d ranks: largest difference from DDP %.3g (largest weight %.3g)\n", W, worst, big);
    if (!(worst <= 1e-6 * big)) fail_msg("rank %d: the sharded GPT differs from DDP's by %.3g", R, worst);
    free(ddp);
    free(full);
    nb_module_free(fs);
}

/* A training step of a ZeRO-1 module under nb_compile: refused, since the replay would skip the
   parameters' broadcast after the sharded update. */
static nb_tensor *ddp_step(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor *loss = nb_sum_all(nb_forward((nb_module *)ctx, in[0]));
    if (!loss || nb_backward(loss) < 0) return NULL;
    return loss;
}

static void test_errors(void **state) {
    (void)state;
    assert_null(nb_ddp(net_new(8), (nb_ddp_opts){ .shard = (nb_shard)7 }));
    ASSERT_ERROR_CONTAINS("shard 7 is not an nb_shard value");
    assert_null(nb_ddp(net_new(8), (nb_ddp_opts){ .bucket_mb = -1 }));
    ASSERT_ERROR_CONTAINS("bucket_mb -1 must be in");
    assert_null(nb_ddp(NULL, (nb_ddp_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("module is NULL");
    nb_module *plain = net_new(8);
    assert_null(nb_ddp_inner(plain));
    ASSERT_ERROR_CONTAINS("not a DDP module");
    nb_module_free(plain);
    nb_module *ddp = nb_ddp(net_new(8), (nb_ddp_opts){ 0 });
    assert_non_null(ddp);
    assert_null(nb_ddp(ddp, (nb_ddp_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("a DDP module already");
    nb_module_free(ddp);
    nb_module *zero = nb_ddp(net_new(8), (nb_ddp_opts){ .shard = NB_SHARD_OPTIMIZER });
    assert_non_null(zero);
    nb_compiled *c = nb_compile(ddp_step, zero, (nb_graph_opts){ 0 });
    nb_scope *s = nb_scope_begin();
    assert_null(nb_compiled_run(c, (nb_tensor *[]){ nb_zeros(NB_SHAPE(2, 784), NB_F32) }, 1));
    ASSERT_ERROR_CONTAINS("a ZeRO-1 training step cannot be compiled yet");
    nb_scope_end(s);
    nb_compiled_free(c);
    nb_module_free(zero);
    if (W == 1) return;
    /* the last rank's module is narrower: every rank fails, naming a rank that differs */
    assert_null(nb_ddp(net_new(R == W - 1 ? 16 : 8), (nb_ddp_opts){ 0 }));
    const char *e = nb_error();
    if (!e || !strstr(e, "nb_ddp: rank ") || !strstr(e, "must wrap the same architecture")) fail_msg("error: %s", e ? e : "(none)");
    nb_error_clear();
    /* the group is still usable */
    assert_int_equal(nb_dist_barrier(), 0);
}

int main(int argc, char **argv) {
    int started = dist_test_start(&argc, &argv);
    if (started) return started;
    if (GLOBAL_BATCH % W != 0) {
        printf("SKIPPED: the global batch of %d does not split across %d ranks\n", GLOBAL_BATCH, W);
        nb_dist_finalize();
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_construction, clear_error_setup),
        cmocka_unit_test_setup(test_equivalence_sgd, clear_error_setup),
        cmocka_unit_test_setup(test_equivalence_adamw, clear_error_setup),
        cmocka_unit_test_setup(test_equivalence_cnn, clear_error_setup),
        cmocka_unit_test_setup(test_compiled_sgd, clear_error_setup),
        cmocka_unit_test_setup(test_compiled_adamw, clear_error_setup),
        cmocka_unit_test_setup(test_unused_parameters, clear_error_setup),
        cmocka_unit_test_setup(test_state_dict, clear_error_setup),
        cmocka_unit_test_setup(test_full_sharding, clear_error_setup),
        cmocka_unit_test_setup(test_full_sharding_gpt, clear_error_setup),
        cmocka_unit_test_setup(test_errors, clear_error_setup),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    nb_dist_finalize();
    return failed;
}
