/* Training benchmarks, nabla side. The PyTorch side is bench_nn_torch.py; bench/run_nn.sh runs
   both, alternating, and prints the table with ratios and PASS/FAIL (bench/report_nn.py).

   Each section trains a model on synthetic data shaped like Fashion-MNIST batches (made before
   the clock starts; nothing is read from disk) and prints "key value" lines on stdout:
     mlp  784-128-10 MLP (flatten, linear, relu, linear), AdamW lr 1e-3, batch 64, cross entropy
     cnn  the TF tutorial's convnet of examples/cnn.c, Adam lr 1e-3, batch 64, dropout 0.4 in training
     gpt  the char GPT step of examples/char_gpt.c: vocabulary 86, context 128, 4 layers, 4 heads,
          width 128, batch 16, AdamW lr 1e-3, gradient clipping at 1.0
   Figures: <s>_step_ms (the median over the timed loops of the mean step time in each loop, after
   warm-up), <s>_samples_per_s (batch / step time), <s>_loss (at the end) and <s>_peak_rss_kib
   (VmHWM of this process: run one section per process to get a section's own peak), and
   <s>_other_cpu, the cores that other processes kept busy on average during the timed loops
   (from /proc/stat less this process's own CPU time): the load the figures were taken under.

     cnn_bf16, gpt_bf16  the same under bf16 autocast (nb_autocast; PyTorch: torch.autocast("cpu",
          dtype=torch.bfloat16) around the forward and the loss)

   Usage: bench_nn [--quick] [mlp] [cnn] [gpt] [cnn_bf16] [gpt_bf16]   (none named: mlp cnn gpt) */
#define _GNU_SOURCE
#include <nabla.h>
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NBATCH 8 /* synthetic batches, used in turn */

#define CHECK(where) bench_check("bench_nn", where)

static bool quick = false;

/* ---- the training harness: one model, one optimizer, batches in turn ---- */

typedef struct trainer {
    nb_module *model;
    nb_optimizer *opt;
    nb_tensor *x[NBATCH], *y[NBATCH];
    double clip; /* 0: no clipping */
    bool bf16; /* the forward (and so its backward) under nb_autocast(NB_BF16) */
    bool flat_logits; /* gpt: logits [B, T, V] -> [B * T, V] */
    long step;
    double last_loss;
} trainer;

static void train_steps(trainer *t, long n) {
    for (long i = 0; i < n; i++, t->step++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = t->x[t->step % NBATCH], *y = t->y[t->step % NBATCH];
        nb_dtype prev = nb_autocast(t->bf16 ? NB_BF16 : NB_F32);
        nb_tensor *logits = nb_forward(t->model, x);
        if (t->flat_logits) logits = nb_reshape(logits, NB_SHAPE(-1, nb_dim(logits, -1)));
        nb_tensor *loss = nb_cross_entropy(logits, y, (nb_ce_opts){ 0 });
        nb_autocast(prev);
        nb_optim_zero_grad(t->opt);
        nb_backward(loss);
        if (t->clip > 0) nb_clip_grad_norm(t->model, t->clip);
        nb_optim_step(t->opt);
        if (i == n - 1) t->last_loss = nb_item(loss);
        nb_scope_end(s);
    }
}

/* Warm-up, then `loops` timed loops of about target_s each; prints the figures of section name. */
static void run(const char *name, trainer *t, int64_t batch, int warmup, int loops, double target_s) {
    train_steps(t, warmup);
    CHECK(name);
    double t0 = now_s();
    train_steps(t, 1);
    double one = now_s() - t0;
    long per = (long)(target_s / (one > 1e-9 ? one : 1e-9));
    if (per < 1) per = 1;
    double *ts = malloc(sizeof(double) * (size_t)loops);
    double busy0 = machine_busy_s(), own0 = own_cpu_s(), wall0 = now_s();
    for (int r = 0; r < loops; r++) {
        t0 = now_s();
        train_steps(t, per);
        ts[r] = (now_s() - t0) / (double)per;
    }
    double other = (machine_busy_s() - busy0 - (own_cpu_s() - own0)) / (now_s() - wall0);
    CHECK(name);
    double step = median(ts, loops);
    free(ts);
    printf("%s_step_ms %.4f\n", name, 1e3 * step);
    printf("%s_samples_per_s %.2f\n", name, (double)batch / step);
    printf("%s_steps_per_loop %ld\n", name, per);
    printf("%s_loss %.4f\n", name, t->last_loss);
    printf("%s_peak_rss_kib %ld\n", name, vm_hwm_kib());
    if (busy0 >= 0) printf("%s_other_cpu %.2f\n", name, other < 0 ? 0 : other);
    size_t held = 0;
    nb_memory_stats(&held, NULL, NULL);
    printf("%s_alloc_held_kib %zu\n", name, held / 1024);
    fflush(stdout);
}

static void trainer_free(trainer *t) {
    nb_optim_free(t->opt);
    nb_module_free(t->model);
    for (int b = 0; b < NBATCH; b++) {
        nb_release(t->x[b]);
        nb_release(t->y[b]);
    }
}

/* Fashion-MNIST-shaped batches: x [64, 1, 28, 28] in [0, 1), y [64] i64 in 0..9. */
static void image_batches(trainer *t) {
    int64_t labels[64];
    for (int b = 0; b < NBATCH; b++) {
        t->x[b] = nb_rand(NB_SHAPE(64, 1, 28, 28), NB_F32);
        for (int i = 0; i < 64; i++) labels[i] = (b * 7 + i * 13) % 10;
        t->y[b] = nb_from_data(labels, NB_SHAPE(64), NB_I64);
    }
}

/* ---- mlp ---- */

static void bench_mlp(void) {
    trainer t = { 0 };
    nb_manual_seed(0);
    t.model = nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
    t.opt = nb_optim_adamw(t.model, (nb_adamw_opts){ .lr = 1e-3 });
    image_batches(&t);
    CHECK("mlp setup");
    run("mlp", &t, 64, quick ? 20 : 200, quick ? 3 : 9, quick ? 0.05 : 0.2);
    trainer_free(&t);
}

/* ---- cnn (examples/cnn.c) ---- */

static void bench_cnn(bool bf16) {
    trainer t = { .bf16 = bf16 };
    nb_manual_seed(0);
    t.model = nb_nn_sequential(
        nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
    t.opt = nb_optim_adam(t.model, (nb_adam_opts){ .lr = 1e-3 });
    image_batches(&t);
    CHECK("cnn setup");
    run(bf16 ? "cnn_bf16" : "cnn", &t, 64, quick ? 2 : 4, quick ? 3 : 5, quick ? 0.15 : 0.5);
    trainer_free(&t);
}

/* ---- gpt (examples/char_gpt.c) ---- */

enum { VOCAB = 86, CONTEXT = 128, WIDTH = 128, LAYERS = 4, HEADS = 4, GPT_BATCH = 16 };

typedef struct {
    nb_module base;
    nb_module *ln1, *attn, *ln2, *mlp;
} Block;

static nb_tensor *block_forward(nb_module *self, nb_tensor *x) {
    Block *b = (Block *)self;
    x = nb_add(x, nb_forward(b->attn, nb_forward(b->ln1, x)));
    return nb_add(x, nb_forward(b->mlp, nb_forward(b->ln2, x)));
}
static const nb_module_class BLOCK = { .name = "Block", .forward = block_forward };

static nb_module *block_new(void) {
    Block *b = (Block *)nb_module_new(&BLOCK, sizeof(Block));
    b->ln1 = nb_module_child(&b->base, "ln1", nb_nn_layer_norm(WIDTH));
    b->attn = nb_module_child(&b->base, "attn", nb_nn_multihead_attention(WIDTH, HEADS, (nb_mha_opts){ .causal = true }));
    b->ln2 = nb_module_child(&b->base, "ln2", nb_nn_layer_norm(WIDTH));
    b->mlp = nb_module_child(&b->base, "mlp", nb_nn_sequential(nb_nn_linear(WIDTH, 4 * WIDTH), nb_nn_gelu(),
                                                               nb_nn_linear(4 * WIDTH, WIDTH), NULL));
    return &b->base;
}

typedef struct {
    nb_module base;
    nb_module *tok, *pos, *blocks, *ln_f, *head;
} GPT;

static nb_tensor *gpt_forward(nb_module *self, nb_tensor *idx) {
    GPT *g = (GPT *)self;
    int64_t t = nb_dim(idx, 1);
    nb_tensor *x = nb_add(nb_forward(g->tok, idx), nb_forward(g->pos, nb_arange(0, (double)t, 1, NB_I64)));
    return nb_forward(g->head, nb_forward(g->ln_f, nb_forward(g->blocks, x)));
}
static const nb_module_class GPT_CLASS = { .name = "GPT", .forward = gpt_forward };

static nb_module *gpt_new(void) {
    GPT *g = (GPT *)nb_module_new(&GPT_CLASS, sizeof(GPT));
    g->tok = nb_module_child(&g->base, "tok", nb_nn_embedding(VOCAB, WIDTH));
    g->pos = nb_module_child(&g->base, "pos", nb_nn_embedding(CONTEXT, WIDTH));
    g->blocks = nb_module_child(&g->base, "blocks", nb_nn_sequential(NULL));
    for (int i = 0; i < LAYERS; i++) nb_nn_sequential_add(g->blocks, block_new());
    g->ln_f = nb_module_child(&g->base, "ln_f", nb_nn_layer_norm(WIDTH));
    g->head = nb_module_child(&g->base, "head", nb_nn_linear(WIDTH, VOCAB));
    return &g->base;
}

static void bench_gpt(bool bf16) {
    trainer t = { .clip = 1.0, .flat_logits = true, .bf16 = bf16 };
    nb_manual_seed(0);
    t.model = gpt_new();
    t.opt = nb_optim_adamw(t.model, (nb_adamw_opts){ .lr = 1e-3 });
    /* windows of a random "text": y is x shifted by one, as char_gpt.c cuts them */
    static int64_t ids[GPT_BATCH * (CONTEXT + 1)];
    srand(1);
    for (int b = 0; b < NBATCH; b++) {
        for (int i = 0; i < GPT_BATCH * (CONTEXT + 1); i++) ids[i] = rand() % VOCAB;
        int64_t xb[GPT_BATCH * CONTEXT], yb[GPT_BATCH * CONTEXT];
        for (int r = 0; r < GPT_BATCH; r++) {
            memcpy(xb + r * CONTEXT, ids + r * (CONTEXT + 1), sizeof(int64_t) * CONTEXT);
            memcpy(yb + r * CONTEXT, ids + r * (CONTEXT + 1) + 1, sizeof(int64_t) * CONTEXT);
        }
        t.x[b] = nb_from_data(xb, NB_SHAPE(GPT_BATCH, CONTEXT), NB_I64);
        t.y[b] = nb_from_data(yb, NB_SHAPE(GPT_BATCH * CONTEXT), NB_I64);
    }
    CHECK("gpt setup");
    printf("gpt_params %lld\n", (long long)nb_module_num_params(t.model));
    run(bf16 ? "gpt_bf16" : "gpt", &t, GPT_BATCH, quick ? 1 : 3, quick ? 3 : 5, quick ? 0.2 : 0.6);
    trainer_free(&t);
}

int main(int argc, char **argv) {
    bool mlp = false, cnn = false, gpt = false, cnn_bf16 = false, gpt_bf16 = false, any = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "mlp")) mlp = any = true;
        else if (!strcmp(argv[i], "cnn")) cnn = any = true;
        else if (!strcmp(argv[i], "gpt")) gpt = any = true;
        else if (!strcmp(argv[i], "cnn_bf16")) cnn_bf16 = any = true;
        else if (!strcmp(argv[i], "gpt_bf16")) gpt_bf16 = any = true;
        else {
            fprintf(stderr, "usage: %s [--quick] [mlp] [cnn] [gpt] [cnn_bf16] [gpt_bf16]\n", argv[0]);
            return 2;
        }
    }
    if (!any) mlp = cnn = gpt = true;
    printf("nabla_version %s\n", nb_version());
    printf("threads %d\n", nb_get_num_threads());
    fflush(stdout);
    if (mlp) { fprintf(stderr, "bench_nn: mlp\n"); bench_mlp(); }
    if (cnn) { fprintf(stderr, "bench_nn: cnn\n"); bench_cnn(false); }
    if (gpt) { fprintf(stderr, "bench_nn: gpt\n"); bench_gpt(false); }
    if (cnn_bf16) { fprintf(stderr, "bench_nn: cnn_bf16\n"); bench_cnn(true); }
    if (gpt_bf16) { fprintf(stderr, "bench_nn: gpt_bf16\n"); bench_gpt(true); }
    return 0;
}
