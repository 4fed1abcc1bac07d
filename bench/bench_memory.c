/* Peak memory of training, nabla side: one model trained for a fixed number of steps, eagerly or
   as one compiled graph (nb_compile), in its own process so the peak resident set (VmHWM) is that
   run's alone. bench/run_memory.sh runs every model both ways beside PyTorch
   (bench_memory_torch.py) and prints the table.

     mlp  784-128-10 MLP (flatten, linear, relu, linear), AdamW lr 1e-3, batch 64, cross entropy
     cnn  the TF tutorial's convnet of examples/cnn.c, Adam lr 1e-3, batch 64, dropout 0.4
     gpt  the char GPT step of examples/char_gpt.c (its own step function, clipping included):
          vocabulary 86, context 128, 4 layers, 4 heads, width 128, batch 16, AdamW lr 1e-3
   The models and data are bench_nn.c's (synthetic batches made before training, eight used in
   turn). Prints "key value" lines: start_rss_kib (VmRSS when main starts: the libraries'),
   peak_rss_kib (VmHWM at the end: the whole run's peak),
   first_step_peak_kib (VmHWM after the first step: for a compiled run, the trace, which runs
   the step eagerly), later_steps_peak_kib (the peak of steps 2..STEPS alone: VmHWM is reset
   after the first step through /proc/self/clear_refs, so this is the replays' peak when
   compiled; -1 where the kernel does not allow the reset), rss_kib (VmRSS at the end), held_kib
   and used_kib (the caching allocator's), arena_kib and unplanned_kib (compiled: the planned
   buffer and what its values would take unplanned), loss (after the last step).

   Usage: bench_memory mlp|cnn|gpt eager|compiled [STEPS] */
#include "bench_util.h"

#pragma GCC diagnostic ignored "-Wunused-function"
#define main char_gpt_main
#include "../examples/char_gpt.c"
#undef main

#include "../tests/train_step.h" /* the mlp's and the cnn's step */

#define NBATCH 8

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            kib = strtol(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return kib;
}

/* Resets VmHWM to the current resident set (Linux 4.0 and later); false where refused. */
static bool reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void image_batches(nb_tensor **x, nb_tensor **y) {
    int64_t labels[64];
    for (int b = 0; b < NBATCH; b++) {
        x[b] = nb_rand(NB_SHAPE(64, 1, 28, 28), NB_F32);
        for (int i = 0; i < 64; i++) labels[i] = (b * 7 + i * 13) % 10;
        y[b] = nb_from_data(labels, NB_SHAPE(64), NB_I64);
    }
}

/* Windows of a random "text": y is x shifted by one, as char_gpt.c cuts them (bench_nn.c's). */
static void text_batches(nb_tensor **x, nb_tensor **y, int vocab, int batch) {
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)batch * (CONTEXT + 1));
    int64_t *xb = malloc(sizeof(int64_t) * (size_t)batch * CONTEXT), *yb = malloc(sizeof(int64_t) * (size_t)batch * CONTEXT);
    srand(1);
    for (int b = 0; b < NBATCH; b++) {
        for (int i = 0; i < batch * (CONTEXT + 1); i++) ids[i] = rand() % vocab;
        for (int r = 0; r < batch; r++) {
            memcpy(xb + r * CONTEXT, ids + r * (CONTEXT + 1), sizeof(int64_t) * CONTEXT);
            memcpy(yb + r * CONTEXT, ids + r * (CONTEXT + 1) + 1, sizeof(int64_t) * CONTEXT);
        }
        x[b] = nb_from_data(xb, NB_SHAPE(batch, CONTEXT), NB_I64);
        y[b] = nb_from_data(yb, NB_SHAPE(batch * CONTEXT), NB_I64);
    }
    free(ids);
    free(xb);
    free(yb);
}

int main(int argc, char **argv) {
    const char *model_name = argc > 1 ? argv[1] : "";
    bool compiled = argc > 2 && !strcmp(argv[2], "compiled");
    bool known = !strcmp(model_name, "mlp") || !strcmp(model_name, "cnn") || !strcmp(model_name, "gpt");
    if (argc < 3 || argc > 4 || !known || (!compiled && strcmp(argv[2], "eager"))) {
        fprintf(stderr, "usage: %s mlp|cnn|gpt eager|compiled [STEPS]\n", argv[0]);
        return 2;
    }
    long steps = argc > 3 ? atol(argv[3]) : !strcmp(model_name, "mlp") ? 200 : 20;
    if (steps < 1) {
        fprintf(stderr, "%s: STEPS must be at least 1\n", argv[0]);
        return 2;
    }
    long start = status_kib("VmRSS:");
    nb_manual_seed(0);
    nb_tensor *x[NBATCH], *y[NBATCH];
    trainer img = { 0 };
    char_trainer txt = { 0 };
    nb_graph_fn fn;
    void *ctx;
    if (!strcmp(model_name, "gpt")) {
        enum { GPT_VOCAB = 86, GPT_BATCH = 16 };
        txt.model = gpt_new(GPT_VOCAB);
        txt.opt = nb_optim_adamw(txt.model, (nb_adamw_opts){ .lr = 1e-3 });
        txt.vocab = GPT_VOCAB;
        txt.max_norm = 1.0;
        text_batches(x, y, GPT_VOCAB, GPT_BATCH);
        fn = char_train_step;
        ctx = &txt;
    } else {
        if (!strcmp(model_name, "mlp")) {
            img.model = nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
            img.opt = nb_optim_adamw(img.model, (nb_adamw_opts){ .lr = 1e-3 });
        } else {
            img.model = nb_nn_sequential(
                nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
                nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
                nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
            img.opt = nb_optim_adam(img.model, (nb_adam_opts){ .lr = 1e-3 });
        }
        image_batches(x, y);
        fn = train_step;
        ctx = &img;
    }
    bench_check("bench_memory", "setup");
    nb_compiled *c = compiled ? nb_compile(fn, ctx, (nb_graph_opts){ 0 }) : NULL;
    bench_check("bench_memory", "nb_compile");
    long first_step = -1;
    bool reset = false;
    double loss = 0;
    for (long i = 0; i < steps; i++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *in[2] = { x[i % NBATCH], y[i % NBATCH] };
        nb_tensor *l = c ? nb_compiled_run(c, in, 2) : fn(in, 2, ctx);
        if (l && i == steps - 1) loss = nb_item(l);
        nb_scope_end(s);
        bench_check("bench_memory", c ? "compiled step" : "eager step");
        if (i == 0) {
            first_step = vm_hwm_kib();
            reset = steps > 1 && reset_peak();
        }
    }
    long later = reset ? vm_hwm_kib() : -1;
    size_t held = 0, used = 0;
    nb_memory_stats(&held, &used, NULL);
    printf("model %s\nmode %s\nsteps %ld\n", model_name, compiled ? "compiled" : "eager", steps);
    printf("start_rss_kib %ld\n", start);
    /* after the reset, the whole run's peak is the larger of the two parts */
    printf("peak_rss_kib %ld\n", !reset ? vm_hwm_kib() : later > first_step ? later : first_step);
    printf("first_step_peak_kib %ld\n", first_step);
    printf("later_steps_peak_kib %ld\n", later);
    printf("rss_kib %ld\n", status_kib("VmRSS:"));
    printf("held_kib %zu\nused_kib %zu\n", held / 1024, used / 1024);
    if (c) {
        nb_compiled_stats st = nb_compiled_get_stats(c);
        printf("arena_kib %lld\nunplanned_kib %lld\ntraces %lld\n", (long long)(st.arena_bytes / 1024),
               (long long)(st.unplanned_bytes / 1024), (long long)st.traces);
    }
    printf("loss %.4f\n", loss);
    nb_compiled_free(c);
    for (int b = 0; b < NBATCH; b++) {
        nb_release(x[b]);
        nb_release(y[b]);
    }
    nb_optim_free(img.opt ? img.opt : txt.opt);
    nb_module_free(img.model ? img.model : txt.model);
    return 0;
}
