/* nabla on a CUDA GPU, beside bench/bench_cuda_torch.py (PyTorch on the same GPU), run by
   scripts/gpu_check.sh: one JSON object a line on stdout, medians of repeated timed runs, the
   device synchronised around each timing.
     matmul  4096 x 4096 x 4096: f32 (TF32 off), TF32, bf16 operands with f32 accumulation (GFLOP/s)
     mlp     the seed MLP 784-128-10, batch 64, AdamW lr 1e-3, cross entropy (samples/s)
     gpt2    GPT-2 small (124M: 50257 tokens, 1024 positions, 768 wide, 12 layers, 12 heads),
             batch 8 x 1024, AdamW lr 3e-4: ms per training step, and the peak device memory
   Usage: bench_cuda [matmul] [mlp] [gpt2]   (none named: all) */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const nb_device gpu = { NB_CUDA, 0 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool failed(const char *name) {
    if (!nb_error()) return false;
    printf("{\"name\": \"%s\", \"error\": \"", name);
    for (const char *p = nb_error(); *p; p++) putchar(*p == '"' || *p == '\\' ? '\'' : *p);
    printf("\"}\n");
    fflush(stdout);
    nb_error_clear();
    return true;
}

static void result(const char *name, double value, const char *unit) {
    printf("{\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"}\n", name, value, unit);
    fflush(stdout);
}

static void peak_memory(const char *name) {
    nb_cuda_memory m;
    if (nb_cuda_memory_stats(0, &m) == 0) {
        char n[96];
        snprintf(n, sizeof n, "%s_peak_memory", name);
        result(n, (double)m.peak / (1 << 20), "MiB");
    }
}

/* ---- matmul ---- */
static void bench_matmul(const char *name, bool tf32, bool bf16) {
    enum { N = 4096, PER = 20, REPS = 7 };
    nb_scope *s = nb_scope_begin();
    nb_cuda_set_allow_tf32(tf32);
    nb_manual_seed(1);
    nb_tensor *a = nb_to(nb_randn(NB_SHAPE(N, N), NB_F32), gpu), *b = nb_to(nb_randn(NB_SHAPE(N, N), NB_F32), gpu);
    if (bf16) {
        a = nb_cast(a, NB_BF16);
        b = nb_cast(b, NB_BF16);
    }
    nb_dtype prev = nb_autocast(bf16 ? NB_BF16 : NB_F32);
    double t[REPS];
    for (int w = 0; w < 3; w++) nb_matmul(a, b); /* warm-up: cuBLAS loaded, its handle made */
    nb_synchronize(gpu);
    for (int r = 0; r < REPS && !nb_error(); r++) {
        nb_scope *inner = nb_scope_begin();
        double t0 = now();
        for (int k = 0; k < PER; k++) nb_matmul(a, b);
        nb_synchronize(gpu);
        t[r] = (now() - t0) / PER;
        nb_scope_end(inner);
    }
    nb_autocast(prev);
    nb_cuda_set_allow_tf32(false);
    if (!failed(name)) result(name, 2.0 * N * N * (double)N / median(t, REPS) / 1e9, "GFLOP/s");
    nb_scope_end(s);
}

/* ---- training steps ---- */
typedef struct {
    nb_module *model;
    nb_optimizer *opt;
    bool lm; /* logits [B, T, V] against targets [B, T] */
} trainer;

static int step(trainer *t, nb_tensor *x, nb_tensor *y) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *logits = nb_forward(t->model, x);
    if (t->lm && logits) logits = nb_reshape(logits, NB_SHAPE(nb_dim(logits, 0) * nb_dim(logits, 1), nb_dim(logits, 2)));
    nb_optim_zero_grad(t->opt);
    nb_tensor *loss = nb_cross_entropy(logits, t->lm ? nb_reshape(y, NB_SHAPE(nb_numel(y))) : y, (nb_ce_opts){ 0 });
    int rc = loss && nb_backward(loss) == 0 && nb_optim_step(t->opt) == 0 ? 0 : -1;
    nb_scope_end(s);
    return rc;
}

/* Median seconds per step over reps timings of `per` steps each, after warm steps. */
static double time_steps(trainer *t, nb_tensor *x, nb_tensor *y, int warm, int per, int reps) {
    double v[16];
    for (int w = 0; w < warm; w++)
        if (step(t, x, y) < 0) return -1;
    nb_synchronize(gpu);
    for (int r = 0; r < reps && r < 16; r++) {
        double t0 = now();
        for (int k = 0; k < per; k++)
            if (step(t, x, y) < 0) return -1;
        if (nb_synchronize(gpu) < 0) return -1;
        v[r] = (now() - t0) / per;
    }
    return median(v, reps < 16 ? reps : 16);
}

static void bench_mlp(void) {
    nb_manual_seed(0);
    trainer t = { nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL), NULL,
                  false };
    if (t.model && nb_module_to(t.model, gpu)) t.opt = nb_optim_adamw(t.model, (nb_adamw_opts){ .lr = 1e-3 });
    nb_tensor *x = nb_to(nb_rand(NB_SHAPE(64, 1, 28, 28), NB_F32), gpu), *y = nb_to(nb_randint(0, 10, NB_SHAPE(64)), gpu);
    if (!failed("mlp")) {
        nb_cuda_reset_peak(0);
        double sec = time_steps(&t, x, y, 20, 200, 5);
        if (!failed("mlp") && sec > 0) {
            result("mlp_samples_per_s", 64.0 / sec, "samples/s");
            peak_memory("mlp");
        }
    }
    nb_release(x);
    nb_release(y);
    nb_optim_free(t.opt);
    nb_module_free(t.model);
}

/* GPT-2 small: pre-norm blocks of causal self-attention and a GELU MLP (tests/gpt_model.h's
   model at GPT-2's sizes; untied head) */
typedef struct {
    nb_module base;
    nb_module *ln1, *attn, *ln2, *mlp;
} block;
static nb_tensor *block_forward(nb_module *self, nb_tensor *x) {
    block *b = (block *)self;
    x = nb_add(x, nb_forward(b->attn, nb_forward(b->ln1, x)));
    return nb_add(x, nb_forward(b->mlp, nb_forward(b->ln2, x)));
}
static const nb_module_class BLOCK = { .name = "Block", .forward = block_forward };
typedef struct {
    nb_module base;
    nb_module *tok, *pos, *blocks, *ln_f, *head;
} gpt;
static nb_tensor *gpt_forward(nb_module *self, nb_tensor *idx) {
    gpt *g = (gpt *)self;
    nb_tensor *pos = nb_to(nb_arange(0, (double)nb_dim(idx, 1), 1, NB_I64), nb_device_of(idx));
    nb_tensor *x = nb_add(nb_forward(g->tok, idx), nb_forward(g->pos, pos));
    return nb_forward(g->head, nb_forward(g->ln_f, nb_forward(g->blocks, x)));
}
static const nb_module_class GPT = { .name = "GPT", .forward = gpt_forward };

static nb_module *gpt2_small(void) {
    enum { VOCAB = 50257, CONTEXT = 1024, WIDTH = 768, LAYERS = 12, HEADS = 12 };
    gpt *g = (gpt *)nb_module_new(&GPT, sizeof(gpt));
    if (!g) return NULL;
    g->tok = nb_module_child(&g->base, "tok", nb_nn_embedding(VOCAB, WIDTH));
    g->pos = nb_module_child(&g->base, "pos", nb_nn_embedding(CONTEXT, WIDTH));
    g->blocks = nb_module_child(&g->base, "blocks", nb_nn_sequential(NULL));
    for (int i = 0; i < LAYERS && g->blocks; i++) {
        block *b = (block *)nb_module_new(&BLOCK, sizeof(block));
        if (!b) break;
        b->ln1 = nb_module_child(&b->base, "ln1", nb_nn_layer_norm(WIDTH));
        b->attn = nb_module_child(&b->base, "attn", nb_nn_multihead_attention(WIDTH, HEADS, (nb_mha_opts){ .causal = true }));
        b->ln2 = nb_module_child(&b->base, "ln2", nb_nn_layer_norm(WIDTH));
        b->mlp = nb_module_child(&b->base, "mlp", nb_nn_sequential(nb_nn_linear(WIDTH, 4 * WIDTH), nb_nn_gelu(),
                                                                   nb_nn_linear(4 * WIDTH, WIDTH), NULL));
        nb_nn_sequential_add(g->blocks, &b->base);
    }
    g->ln_f = nb_module_child(&g->base, "ln_f", nb_nn_layer_norm(WIDTH));
    g->head = nb_module_child(&g->base, "head", nb_nn_linear(WIDTH, VOCAB));
    if (nb_error()) {
        nb_module_free(&g->base);
        return NULL;
    }
    return &g->base;
}

static void bench_gpt2(void) {
    nb_manual_seed(0);
    trainer t = { gpt2_small(), NULL, true };
    if (t.model && nb_module_to(t.model, gpu)) t.opt = nb_optim_adamw(t.model, (nb_adamw_opts){ .lr = 3e-4 });
    nb_tensor *x = nb_to(nb_randint(0, 50257, NB_SHAPE(8, 1024)), gpu), *y = nb_to(nb_randint(0, 50257, NB_SHAPE(8, 1024)), gpu);
    if (!failed("gpt2")) {
        nb_cuda_reset_peak(0);
        double sec = time_steps(&t, x, y, 2, 1, 7);
        if (!failed("gpt2") && sec > 0) {
            result("gpt2_step_ms", sec * 1e3, "ms");
            result("gpt2_tokens_per_s", 8 * 1024 / sec, "tokens/s");
            peak_memory("gpt2");
        }
    }
    nb_release(x);
    nb_release(y);
    nb_optim_free(t.opt);
    nb_module_free(t.model);
}

int main(int argc, char **argv) {
    bool mm = false, mlp = false, g2 = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "matmul")) mm = true;
        else if (!strcmp(argv[i], "mlp")) mlp = true;
        else if (!strcmp(argv[i], "gpt2")) g2 = true;
        else {
            fprintf(stderr, "usage: %s [matmul] [mlp] [gpt2]\n", argv[0]);
            return 2;
        }
    }
    if (argc == 1) mm = mlp = g2 = true;
    if (nb_cuda_device_count() == 0) {
        printf("{\"name\": \"device\", \"error\": \"no CUDA device: %s\"}\n", nb_cuda_why_unavailable());
        return 77;
    }
    if (mm) {
        bench_matmul("matmul_f32", false, false);
        bench_matmul("matmul_tf32", true, false);
        bench_matmul("matmul_bf16", false, true);
    }
    if (mlp) bench_mlp();
    if (g2) bench_gpt2();
    return 0;
}
