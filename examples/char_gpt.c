/* A small decoder-only transformer trained on text, character by character: vocabulary from
   the text, context 128, 4 layers, 4 heads, width 128. Prints the loss as it falls, then a
   sample of generated text.
   Usage: char_gpt [--steps N (1000)] [--batch B (16)] [--lr LR (1e-3)] [--sample CHARS (300)]
                   [--compile] FILE...
   --compile runs the training step as one compiled graph (nb_compile): same results, faster. */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CONTEXT = 128, WIDTH = 128, LAYERS = 4, HEADS = 4 };

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

/* idx [B, T] (i64) -> logits [B, T, vocab] */
static nb_tensor *gpt_forward(nb_module *self, nb_tensor *idx) {
    GPT *g = (GPT *)self;
    int64_t t = nb_dim(idx, 1);
    nb_tensor *x = nb_add(nb_forward(g->tok, idx), nb_forward(g->pos, nb_arange(0, (double)t, 1, NB_I64)));
    return nb_forward(g->head, nb_forward(g->ln_f, nb_forward(g->blocks, x)));
}
static const nb_module_class GPT_CLASS = { .name = "GPT", .forward = gpt_forward };

static nb_module *gpt_new(int64_t vocab) {
    GPT *g = (GPT *)nb_module_new(&GPT_CLASS, sizeof(GPT));
    g->tok = nb_module_child(&g->base, "tok", nb_nn_embedding(vocab, WIDTH));
    g->pos = nb_module_child(&g->base, "pos", nb_nn_embedding(CONTEXT, WIDTH));
    g->blocks = nb_module_child(&g->base, "blocks", nb_nn_sequential(NULL));
    for (int i = 0; i < LAYERS; i++) nb_nn_sequential_add(g->blocks, block_new());
    g->ln_f = nb_module_child(&g->base, "ln_f", nb_nn_layer_norm(WIDTH));
    g->head = nb_module_child(&g->base, "head", nb_nn_linear(WIDTH, vocab));
    return &g->base;
}

typedef struct {
    nb_module *model;
    nb_optimizer *opt;
    int64_t vocab;
    double max_norm; /* gradient clipping */
} char_trainer;

/* One training step on x [B, T] and the next characters y [B, T] (or [B * T]): forward, loss,
   backward, clipping, AdamW. Ops only (nb_clip_grad_norm_tensor reads nothing on the host), so
   it runs eagerly or compiled alike. Returns the loss. */
static nb_tensor *char_train_step(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    char_trainer *t = ctx;
    nb_tensor *logits = nb_reshape(nb_forward(t->model, in[0]), NB_SHAPE(-1, t->vocab));
    nb_tensor *loss = nb_cross_entropy(logits, nb_reshape(in[1], NB_SHAPE(-1)), (nb_ce_opts){ 0 });
    nb_optim_zero_grad(t->opt);
    if (nb_backward(loss) < 0 || !nb_clip_grad_norm_tensor(t->model, t->max_norm) || nb_optim_step(t->opt) < 0)
        return NULL;
    return loss;
}

/* Reads and concatenates the files; NULL with a message on failure. */
static unsigned char *read_files(char **paths, int n, long *len) {
    unsigned char *text = NULL;
    *len = 0;
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) {
            fprintf(stderr, "cannot open %s\n", paths[i]);
            free(text);
            return NULL;
        }
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        unsigned char *grown = realloc(text, (size_t)(*len + size + 1));
        if (!grown || fread(grown + *len, 1, (size_t)size, f) != (size_t)size) {
            fprintf(stderr, "cannot read %s\n", paths[i]);
            fclose(f);
            free(grown ? grown : text);
            return NULL;
        }
        text = grown;
        *len += size;
        fclose(f);
    }
    return text;
}

int main(int argc, char **argv) {
    int steps = 1000, batch = 16, sample = 300;
    double lr = 1e-3;
    char *files[256];
    int nfiles = 0;
    bool compile = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--compile")) compile = true;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = atof(argv[++i]);
        else if (!strcmp(argv[i], "--sample") && i + 1 < argc) sample = atoi(argv[++i]);
        else if (argv[i][0] == '-' || nfiles == 256) {
            fprintf(stderr, "usage: %s [--steps N] [--batch B] [--lr LR] [--sample CHARS] [--compile] FILE...\n", argv[0]);
            return 2;
        } else files[nfiles++] = argv[i];
    }
    if (nfiles == 0 || steps <= 0 || batch <= 0 || !(lr > 0)) {
        fprintf(stderr, "usage: %s [--steps N] [--batch B] [--lr LR] [--sample CHARS] [--compile] FILE...\n", argv[0]);
        return 2;
    }
    long len;
    unsigned char *text = read_files(files, nfiles, &len);
    if (!text) return 1;
    if (len < CONTEXT + 2) {
        fprintf(stderr, "the text is too short: %ld bytes, need more than %d\n", len, CONTEXT + 1);
        free(text);
        return 1;
    }
    int stoi[256], itos[256], vocab = 0;
    bool seen[256] = { false };
    for (long i = 0; i < len; i++) seen[text[i]] = true;
    for (int c = 0; c < 256; c++)
        if (seen[c]) { stoi[c] = vocab; itos[vocab++] = c; }
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)len);
    for (long i = 0; i < len; i++) ids[i] = stoi[text[i]];
    printf("%ld characters, vocabulary of %d\n", len, vocab);

    nb_manual_seed(0);
    nb_module *model = gpt_new(vocab);
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        return 1;
    }
    printf("%lld parameters\n", (long long)nb_module_num_params(model));
    nb_optimizer *opt = nb_optim_adamw(model, (nb_adamw_opts){ .lr = lr });
    char_trainer tr = { model, opt, vocab, 1.0 };
    nb_compiled *compiled = compile ? nb_compile(char_train_step, &tr, (nb_graph_opts){ 0 }) : NULL;
    int64_t *xb = malloc(sizeof(int64_t) * (size_t)batch * CONTEXT), *yb = malloc(sizeof(int64_t) * (size_t)batch * CONTEXT);
    float *u = malloc(sizeof(float) * (size_t)batch);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double recent = 0;
    for (int step = 1; step <= steps; step++) {
        nb_scope *s = nb_scope_begin();
        nb_copy_to(nb_rand(NB_SHAPE(batch), NB_F32), u, sizeof(float) * (size_t)batch);
        for (int b = 0; b < batch; b++) {
            long start = (long)(u[b] * (float)(len - CONTEXT - 1));
            memcpy(xb + (size_t)b * CONTEXT, ids + start, sizeof(int64_t) * CONTEXT);
            memcpy(yb + (size_t)b * CONTEXT, ids + start + 1, sizeof(int64_t) * CONTEXT);
        }
        nb_tensor *x = nb_from_data(xb, NB_SHAPE(batch, CONTEXT), NB_I64);
        nb_tensor *y = nb_from_data(yb, NB_SHAPE(batch * CONTEXT), NB_I64);
        nb_tensor *in[2] = { x, y };
        nb_tensor *loss = compiled ? nb_compiled_run(compiled, in, 2) : char_train_step(in, 2, &tr);
        if (!loss) {
            nb_scope_end(s);
            break;
        }
        if (step == 1 && compiled && nb_compiled_note(compiled)) printf("note: %s\n", nb_compiled_note(compiled));
        double l = nb_item(loss);
        recent = step == 1 ? l : 0.9 * recent + 0.1 * l;
        if (step % 50 == 0 || step == 1 || step == steps) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6) / step;
            printf("step %5d  loss %.4f  (smoothed %.4f)  %.1f ms/step\n", step, l, recent, ms);
            fflush(stdout);
        }
        nb_scope_end(s);
        if (nb_error()) break;
    }

    /* Sample: feed the last CONTEXT characters, draw the next from the softmax. */
    if (!nb_error()) {
        bool prev = nb_set_grad_enabled(false);
        nb_module_train(model, false);
        int64_t ctx[CONTEXT];
        int have = 1;
        ctx[0] = ids[0];
        printf("sample: %c", itos[ids[0]]);
        float *probs = malloc(sizeof(float) * (size_t)vocab);
        for (int i = 0; i < sample; i++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *logits = nb_forward(model, nb_from_data(ctx, NB_SHAPE(1, have), NB_I64));
            nb_tensor *last = nb_slice(nb_reshape(logits, NB_SHAPE(have, vocab)), 0, have - 1, have, 1);
            nb_copy_to(nb_softmax(last, -1), probs, sizeof(float) * (size_t)vocab);
            float r;
            nb_copy_to(nb_rand(NB_SHAPE(1), NB_F32), &r, sizeof r);
            int c = 0;
            for (float acc = probs[0]; acc < r && c < vocab - 1; acc += probs[++c]) {}
            putchar(itos[c]);
            if (have == CONTEXT) memmove(ctx, ctx + 1, sizeof(int64_t) * (CONTEXT - 1));
            else have++;
            ctx[have - 1] = c;
            nb_scope_end(s);
        }
        putchar('\n');
        free(probs);
        nb_set_grad_enabled(prev);
    }
    int rc = 0;
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    } else printf("final loss (smoothed) %.4f\n", recent);
    free(xb);
    free(yb);
    free(u);
    free(ids);
    free(text);
    nb_compiled_free(compiled);
    nb_optim_free(opt);
    nb_module_free(model);
    return rc;
}
