/* Trains a small MLP on synthetic data with the explicit loop: forward, loss, backward,
   an SGD step, and the loss printed as it falls. Usage: mlp_synthetic [steps] */
#include <nabla.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

enum { FEATURES = 64, HIDDEN = 128, CLASSES = 10, BATCH = 64, SAMPLES = 4096 };

/* A parameter initialised as torch.nn.Linear does: uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)]. */
static nb_tensor *param(nb_shape shape, int fan_in) {
    nb_scope *s = nb_scope_begin();
    double bound = 1.0 / sqrt((double)fan_in);
    nb_tensor *p = nb_keep(nb_add_scalar(nb_mul_scalar(nb_rand(shape, NB_F32), 2 * bound), -bound));
    nb_scope_end(s);
    return nb_set_requires_grad(p, true);
}

/* Mean cross entropy of logits [n, classes] against i64 labels [n]. */
static nb_tensor *cross_entropy(nb_tensor *logits, nb_tensor *labels) {
    nb_tensor *picked = nb_gather(nb_log_softmax(logits, 1), 1, nb_unsqueeze(labels, 1));
    return nb_neg(nb_mean_all(picked));
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 600;
    if (steps <= 0) {
        fprintf(stderr, "usage: %s [steps]   (steps must be a positive number)\n", argv[0]);
        return 2;
    }
    nb_manual_seed(0);

    /* Synthetic data: each class is a Gaussian blob around its own random centre. The scope
       frees the temporaries; nb_keep hands the two results out of it. */
    nb_scope *data_scope = nb_scope_begin();
    nb_tensor *centres = nb_randn(NB_SHAPE(CLASSES, FEATURES), NB_F32);
    nb_tensor *labels = nb_keep(nb_cast(nb_mul_scalar(nb_rand(NB_SHAPE(SAMPLES), NB_F32), CLASSES), NB_I64));
    nb_tensor *noise = nb_mul_scalar(nb_randn(NB_SHAPE(SAMPLES, FEATURES), NB_F32), 3.0);
    nb_tensor *inputs = nb_keep(nb_add(nb_index_select(centres, 0, labels), noise));
    nb_scope_end(data_scope);

    nb_tensor *w1 = param(NB_SHAPE(HIDDEN, FEATURES), FEATURES), *b1 = param(NB_SHAPE(HIDDEN), FEATURES);
    nb_tensor *w2 = param(NB_SHAPE(CLASSES, HIDDEN), HIDDEN), *b2 = param(NB_SHAPE(CLASSES), HIDDEN);
    nb_tensor *params[] = { w1, b1, w2, b2 };
    const double lr = 0.05;

    for (int step = 0; step < steps; step++) {
        nb_scope *s = nb_scope_begin();
        int64_t start = (int64_t)(step * BATCH) % SAMPLES;
        nb_tensor *x = nb_slice(inputs, 0, start, start + BATCH, 1);
        nb_tensor *y = nb_slice(labels, 0, start, start + BATCH, 1);
        nb_tensor *hidden = nb_relu(nb_linear(x, w1, b1));
        nb_tensor *loss = cross_entropy(nb_linear(hidden, w2, b2), y);
        if (nb_backward(loss) < 0) break;
        bool prev = nb_set_grad_enabled(false); /* the update is not part of the graph */
        for (int i = 0; i < 4; i++) {
            nb_assign(params[i], nb_sub(params[i], nb_mul_scalar(nb_grad_of(params[i]), lr)));
            nb_zero_grad(params[i]);
        }
        nb_set_grad_enabled(prev);
        if (step % 100 == 0 || step == steps - 1) printf("step %4d  loss %.4f\n", step, nb_item(loss));
        nb_scope_end(s);
    }

    nb_scope *s = nb_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *pred = nb_argmax(nb_linear(nb_relu(nb_linear(inputs, w1, b1)), w2, b2), 1, false);
    double accuracy = nb_item(nb_mean_all(nb_eq(pred, labels)));
    nb_set_grad_enabled(prev);
    printf("training accuracy %.4f\n", accuracy);
    nb_scope_end(s);

    for (int i = 0; i < 4; i++) nb_release(params[i]);
    nb_release(inputs);
    nb_release(labels);
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        return 1;
    }
    return 0;
}
