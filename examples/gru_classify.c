/* A GRU sequence classifier on a synthetic task: is the sum of a sequence of random numbers
   positive? The GRU reads the sequence (batch first), a linear layer classifies its last hidden
   state (h_n); trained with Adam on fresh batches, then tested on sequences it has not seen.
   Usage: gru_classify [--steps N (300)] [--batch B (64)] [--len T (16)] [--hidden H (32)] [--lr LR (1e-2)] */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    nb_module base;
    nb_module *gru, *head;
} Classifier;

/* x [B, T, 1] -> logits [B, 2], from the GRU's final hidden state */
static nb_tensor *classifier_forward(nb_module *self, nb_tensor *x) {
    Classifier *m = (Classifier *)self;
    nb_tensor *h_n;
    if (!nb_rnn_forward(m->gru, x, NULL, NULL, &h_n, NULL)) return NULL;
    return nb_forward(m->head, nb_squeeze(h_n, 0)); /* h_n [1, B, H] */
}
static const nb_module_class CLASSIFIER = { .name = "Classifier", .forward = classifier_forward };

/* A batch of sequences x [B, T, 1] ~ N(0, 1) and labels y [B] (i64): 1 where the sum is positive. */
static nb_tensor *make_batch(int batch, int len, nb_tensor **y) {
    nb_tensor *x = nb_randn(NB_SHAPE(batch, len, 1), NB_F32);
    *y = nb_cast(nb_gt(nb_sum(x, 1, false), nb_scalar(0)), NB_I64);
    *y = nb_reshape(*y, NB_SHAPE(batch));
    return x;
}

/* The fraction of predictions equal to the labels. */
static double accuracy(nb_tensor *logits, nb_tensor *y) {
    return nb_item(nb_mean_all(nb_cast(nb_eq(nb_argmax(logits, 1, false), y), NB_F32)));
}

int main(int argc, char **argv) {
    int steps = 300, batch = 64, len = 16, hidden = 32;
    double lr = 1e-2;
    for (int i = 1; i < argc; i++) {
        int *opt = !strcmp(argv[i], "--steps") ? &steps : !strcmp(argv[i], "--batch") ? &batch
                 : !strcmp(argv[i], "--len") ? &len : !strcmp(argv[i], "--hidden") ? &hidden : NULL;
        if (opt && i + 1 < argc) *opt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = atof(argv[++i]);
        else steps = -1;
    }
    if (steps <= 0 || batch <= 0 || len <= 0 || hidden <= 0 || !(lr > 0)) {
        fprintf(stderr, "usage: %s [--steps N] [--batch B] [--len T] [--hidden H] [--lr LR]\n", argv[0]);
        return 2;
    }
    nb_manual_seed(0);
    Classifier *m = (Classifier *)nb_module_new(&CLASSIFIER, sizeof(Classifier));
    if (m) {
        m->gru = nb_module_child(&m->base, "gru", nb_nn_gru(1, hidden, (nb_rnn_opts){ .batch_first = true }));
        m->head = nb_module_child(&m->base, "head", nb_nn_linear(hidden, 2));
    }
    nb_optimizer *opt = m && m->gru && m->head ? nb_optim_adam(&m->base, (nb_adam_opts){ .lr = lr }) : NULL;
    if (!opt) {
        fprintf(stderr, "error: %s\n", nb_error() ? nb_error() : "out of memory");
        return 1;
    }
    for (int step = 1; step <= steps && !nb_error(); step++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *y, *x = make_batch(batch, len, &y);
        nb_tensor *logits = nb_forward(&m->base, x);
        nb_tensor *loss = nb_cross_entropy(logits, y, (nb_ce_opts){ 0 });
        nb_optim_zero_grad(opt);
        if (nb_backward(loss) == 0 && nb_optim_step(opt) == 0 && (step == 1 || step % 50 == 0 || step == steps))
            printf("step %4d  loss %.4f  batch accuracy %.3f\n", step, nb_item(loss), accuracy(logits, y));
        nb_scope_end(s);
    }
    int rc = 0;
    if (!nb_error()) { /* 2000 sequences it has not seen */
        bool prev = nb_set_grad_enabled(false);
        nb_module_train(&m->base, false);
        nb_scope *s = nb_scope_begin();
        nb_tensor *y, *x = make_batch(2000, len, &y);
        double acc = accuracy(nb_forward(&m->base, x), y);
        nb_scope_end(s);
        nb_set_grad_enabled(prev);
        if (!nb_error()) printf("test accuracy %.4f (chance 0.5)\n", acc);
    }
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    }
    nb_optim_free(opt);
    nb_module_free(&m->base);
    return rc;
}
