/* A character-level LSTM language model: an embedding, an LSTM and a linear head over the bytes
   (all 256 values, so no vocabulary to build) of the text files given, trained with Adam on random windows; prints the loss as it falls,
   then a sample generated one character at a time, carrying the LSTM's state from step to step
   (nb_rnn_forward's h_n and c_n).
   Usage: lstm_lm [--steps N (300)] [--batch B (16)] [--seq T (64)] [--hidden H (128)]
                  [--lr LR (3e-3)] [--sample CHARS (200)] FILE... */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EMBED = 32 };

typedef struct {
    nb_module base;
    nb_module *embed, *lstm, *head;
} LM;

/* ids [B, T] (i64) from states h, c (NULL: zeros) -> logits [B, T, vocab], the final states in *h_n, *c_n */
static nb_tensor *lm_run(LM *lm, nb_tensor *ids, nb_tensor *h, nb_tensor *c, nb_tensor **h_n, nb_tensor **c_n) {
    nb_tensor *seq = nb_rnn_forward(lm->lstm, nb_forward(lm->embed, ids), h, c, h_n, c_n);
    return nb_forward(lm->head, seq);
}
static nb_tensor *lm_forward(nb_module *self, nb_tensor *ids) { return lm_run((LM *)self, ids, NULL, NULL, NULL, NULL); }
static const nb_module_class LM_CLASS = { .name = "LM", .forward = lm_forward };

static LM *lm_new(int64_t vocab, int64_t hidden) {
    LM *lm = (LM *)nb_module_new(&LM_CLASS, sizeof(LM));
    if (!lm) return NULL;
    lm->embed = nb_module_child(&lm->base, "embed", nb_nn_embedding(vocab, EMBED));
    lm->lstm = nb_module_child(&lm->base, "lstm", nb_nn_lstm(EMBED, hidden, (nb_rnn_opts){ .batch_first = true }));
    lm->head = nb_module_child(&lm->base, "head", nb_nn_linear(hidden, vocab));
    return lm;
}

/* The bytes of the files, one after another (free it); NULL with a message on failure. */
static unsigned char *slurp(char **paths, int n, long *len) {
    size_t cap = 1 << 16, used = 0;
    unsigned char *buf = malloc(cap);
    for (int i = 0; buf && i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) {
            fprintf(stderr, "cannot open %s\n", paths[i]);
            free(buf);
            return NULL;
        }
        for (size_t got; (got = fread(buf + used, 1, cap - used, f)) > 0;) {
            used += got;
            if (used == cap) {
                unsigned char *grown = realloc(buf, cap *= 2);
                if (!grown) break;
                buf = grown;
            }
        }
        fclose(f);
    }
    *len = (long)used;
    return buf;
}

static int usage(const char *prog) {
    fprintf(stderr, "usage: %s [--steps N] [--batch B] [--seq T] [--hidden H] [--lr LR] [--sample CHARS] FILE...\n", prog);
    return 2;
}

int main(int argc, char **argv) {
    int steps = 300, batch = 16, seq = 64, hidden = 128, sample = 200, nfiles = 0;
    double lr = 3e-3;
    char *files[64];
    for (int i = 1; i < argc; i++) {
        int *opt = !strcmp(argv[i], "--steps") ? &steps : !strcmp(argv[i], "--batch") ? &batch : !strcmp(argv[i], "--seq") ? &seq
                 : !strcmp(argv[i], "--hidden") ? &hidden : !strcmp(argv[i], "--sample") ? &sample : NULL;
        if (opt && i + 1 < argc) *opt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = atof(argv[++i]);
        else if (argv[i][0] == '-' || nfiles == 64) return usage(argv[0]);
        else files[nfiles++] = argv[i];
    }
    if (nfiles == 0 || steps <= 0 || batch <= 0 || seq <= 0 || hidden <= 0 || sample < 0 || !(lr > 0)) return usage(argv[0]);
    long len;
    unsigned char *text = slurp(files, nfiles, &len);
    if (!text) return 1;
    if (len < seq + 2) {
        fprintf(stderr, "the text is too short: %ld bytes, need more than %d\n", len, seq + 1);
        free(text);
        return 1;
    }
    enum { vocab = 256 };
    printf("%ld bytes of text\n", len);

    nb_manual_seed(0);
    LM *lm = lm_new(vocab, hidden);
    nb_optimizer *opt = lm ? nb_optim_adam(&lm->base, (nb_adam_opts){ .lr = lr }) : NULL;
    int64_t *xb = malloc(sizeof(int64_t) * (size_t)batch * (size_t)seq), *yb = malloc(sizeof(int64_t) * (size_t)batch * (size_t)seq);
    float *u = malloc(sizeof(float) * (size_t)batch);
    if (!opt || !xb || !yb || !u) {
        fprintf(stderr, "error: %s\n", nb_error() ? nb_error() : "out of memory");
        return 1;
    }
    printf("%lld parameters\n", (long long)nb_module_num_params(&lm->base));
    double first = 0, last = 0; /* the first step's loss; the mean of the last ten */
    for (int step = 1; step <= steps && !nb_error(); step++) {
        nb_scope *s = nb_scope_begin();
        nb_copy_to(nb_rand(NB_SHAPE(batch), NB_F32), u, sizeof(float) * (size_t)batch);
        for (int b = 0; b < batch; b++) {
            long start = (long)(u[b] * (float)(len - seq - 1));
            for (int t = 0; t < seq; t++) {
                xb[b * seq + t] = text[start + t];
                yb[b * seq + t] = text[start + t + 1];
            }
        }
        nb_tensor *logits = nb_forward(&lm->base, nb_from_data(xb, NB_SHAPE(batch, seq), NB_I64));
        nb_tensor *loss = nb_cross_entropy(nb_reshape(logits, NB_SHAPE(-1, vocab)),
                                           nb_from_data(yb, NB_SHAPE(batch * seq), NB_I64), (nb_ce_opts){ 0 });
        nb_optim_zero_grad(opt);
        if (nb_backward(loss) == 0 && nb_clip_grad_norm(&lm->base, 1.0) >= 0 && nb_optim_step(opt) == 0) {
            double l = nb_item(loss);
            if (step == 1) first = l;
            if (step > steps - 10) last += l / (steps < 10 ? steps : 10);
            if (step == 1 || step % 50 == 0 || step == steps) printf("step %4d  loss %.4f\n", step, l);
        }
        nb_scope_end(s);
    }

    /* Sample: one character at a time, the state carried over, each drawn from the softmax. */
    if (!nb_error() && sample > 0) {
        bool prev = nb_set_grad_enabled(false);
        nb_module_train(&lm->base, false);
        nb_scope *s = nb_scope_begin();
        nb_tensor *h = NULL, *c = NULL;
        int64_t ch = text[0];
        float *probs = malloc(sizeof(float) * (size_t)vocab);
        printf("sample: %c", (int)ch);
        for (int i = 0; probs && i < sample && !nb_error(); i++) {
            nb_tensor *logits = lm_run(lm, nb_from_data(&ch, NB_SHAPE(1, 1), NB_I64), h, c, &h, &c);
            nb_copy_to(nb_softmax(nb_reshape(logits, NB_SHAPE(vocab)), 0), probs, sizeof(float) * (size_t)vocab);
            float r;
            nb_copy_to(nb_rand(NB_SHAPE(1), NB_F32), &r, sizeof r);
            int k = 0;
            for (float acc = probs[0]; acc < r && k < vocab - 1; acc += probs[++k]) {}
            ch = k;
            putchar(k);
        }
        putchar('\n');
        free(probs);
        nb_scope_end(s);
        nb_set_grad_enabled(prev);
    }
    int rc = 0;
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    } else printf("final loss %.4f (initial %.4f)\n", last, first);
    free(xb);
    free(yb);
    free(u);
    free(text);
    nb_optim_free(opt);
    nb_module_free(&lm->base);
    return rc;
}
