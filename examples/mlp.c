/* The DESIGN.md program: a 784-128-10 MLP trained on Fashion-MNIST with AdamW (lr 1e-3),
   cross entropy and batches of 64, written as the explicit PyTorch-style loop.
   Usage: mlp [epochs (10)] [data dir (/usr/share/datasets/fashion-mnist)] [train limit]
   Until nabla's data loader lands, a minimal reader of gzipped IDX files lives in
   fashion_mnist.h beside this file. */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fashion_mnist.h"

typedef struct { nb_module base; nb_module *fc1, *fc2; } Net;

static nb_tensor *net_forward(nb_module *self, nb_tensor *x) {
    Net *net = (Net *)self;
    return nb_forward(net->fc2, nb_relu(nb_forward(net->fc1, x)));
}
static const nb_module_class NET = { .name = "Net", .forward = net_forward };

static nb_module *net_new(void) {
    Net *net = (Net *)nb_module_new(&NET, sizeof(Net));
    net->fc1 = nb_module_child(&net->base, "fc1", nb_nn_linear(784, 128));
    net->fc2 = nb_module_child(&net->base, "fc2", nb_nn_linear(128, 10));
    return &net->base;
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 10;
    const char *dir = argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist";
    int64_t limit = argc > 3 ? atoll(argv[3]) : 0;
    if (epochs <= 0) {
        fprintf(stderr, "usage: %s [epochs] [data dir] [train limit]\n", argv[0]);
        return 2;
    }
    nb_manual_seed(0);
    nb_tensor *x_train, *y_train, *x_test, *y_test;
    if (!load_fashion_mnist(dir, &x_train, &y_train, &x_test, &y_test)) return 1;
    int64_t n = nb_dim(x_train, 0);
    if (limit > 0 && limit < n) n = limit;

    nb_module *model = net_new();
    nb_optimizer *opt = nb_optim_adamw(model, (nb_adamw_opts){ .lr = 1e-3 });
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n);
    const int64_t batch = 64;
    for (int epoch = 0; epoch < epochs; epoch++) {
        shuffled_order(order, n);
        double t0 = now(), loss_sum = 0;
        int64_t steps = 0;
        for (int64_t i = 0; i < n; i += batch) {
            nb_scope *s = nb_scope_begin();
            int64_t m = i + batch <= n ? batch : n - i;
            nb_tensor *idx = nb_from_data(order + i, NB_SHAPE(m), NB_I64);
            nb_tensor *x = nb_index_select(x_train, 0, idx);
            nb_tensor *y = nb_index_select(y_train, 0, idx);
            nb_tensor *loss = nb_cross_entropy(nb_forward(model, x), y, (nb_ce_opts){ 0 });
            nb_optim_zero_grad(opt);
            nb_backward(loss);
            nb_optim_step(opt);
            loss_sum += nb_item(loss);
            steps++;
            nb_scope_end(s);
        }
        if (nb_error()) break;
        printf("epoch %2d  loss %.4f  test accuracy %.4f  (%.2f s)\n", epoch + 1, loss_sum / (double)steps,
               accuracy(model, x_test, y_test), now() - t0);
        fflush(stdout);
    }
    int rc = 0;
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    } else printf("final test accuracy %.4f\n", accuracy(model, x_test, y_test));
    free(order);
    nb_optim_free(opt);
    nb_module_free(model);
    nb_release(x_train);
    nb_release(y_train);
    nb_release(x_test);
    nb_release(y_test);
    return rc;
}
