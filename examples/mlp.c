/* The DESIGN.md program: a 784-128-10 MLP trained on Fashion-MNIST with AdamW (lr 1e-3),
   cross entropy, batches of 64 from the data loader, written as the explicit PyTorch-style loop.
   Usage: mlp [epochs (10)] [data dir (default: $NABLA_DATA, else Debian's folder)] [workers (2)] */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

/* Test-set accuracy, without recording a graph. */
static double evaluate(nb_module *model, nb_data_loader *test) {
    bool prev = nb_set_grad_enabled(false);
    int64_t correct = 0, seen = 0;
    nb_batch b;
    while (nb_data_loader_next(test, &b)) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *pred = nb_argmax(nb_forward(model, nb_flatten(b.x, 1, -1)), 1, false);
        correct += (int64_t)nb_item(nb_sum_all(nb_eq(pred, b.y)));
        seen += nb_dim(b.y, 0);
        nb_scope_end(s);
    }
    nb_set_grad_enabled(prev);
    return seen ? (double)correct / (double)seen : 0.0;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 10;
    const char *root = argc > 2 && argv[2][0] ? argv[2] : NULL;
    int workers = argc > 3 ? atoi(argv[3]) : 2;
    if (epochs <= 0 || workers < 0) {
        fprintf(stderr, "usage: %s [epochs] [data dir] [workers]\n", argv[0]);
        return 2;
    }
    nb_manual_seed(0);
    nb_dataset *train = nb_data_fashion_mnist(root, true), *test = nb_data_fashion_mnist(root, false);
    nb_data_loader *loader = nb_data_loader_new(train, (nb_loader_opts){ .batch_size = 64, .shuffle = true, .num_workers = workers });
    nb_data_loader *test_loader = nb_data_loader_new(test, (nb_loader_opts){ .batch_size = 1000 });
    nb_module *model = net_new();
    nb_optimizer *opt = nb_optim_adamw(model, (nb_adamw_opts){ .lr = 1e-3 });
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        return 1;
    }
    for (int epoch = 0; epoch < epochs && !nb_error(); epoch++) {
        double t0 = now(), loss_sum = 0;
        int64_t steps = 0;
        nb_batch b;
        while (nb_data_loader_next(loader, &b)) { /* false once per epoch end */
            nb_scope *s = nb_scope_begin();
            nb_tensor *x = nb_flatten(b.x, 1, -1); /* [64, 1, 28, 28] -> [64, 784] */
            nb_tensor *loss = nb_cross_entropy(nb_forward(model, x), b.y, (nb_ce_opts){ 0 });
            nb_optim_zero_grad(opt);
            nb_backward(loss);
            nb_optim_step(opt);
            loss_sum += nb_item(loss);
            steps++;
            nb_scope_end(s);
        }
        if (nb_data_loader_failed(loader) || nb_error()) break;
        printf("epoch %2d  loss %.4f  test accuracy %.4f  (%.2f s, waited %.2f s for data)\n", epoch + 1,
               loss_sum / (double)steps, evaluate(model, test_loader), now() - t0, nb_data_loader_wait_seconds(loader));
        fflush(stdout);
    }
    int rc = 0;
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    } else printf("final test accuracy %.4f\n", evaluate(model, test_loader));
    nb_optim_free(opt);
    nb_module_free(model);
    nb_data_loader_free(loader);
    nb_data_loader_free(test_loader);
    nb_dataset_free(train);
    nb_dataset_free(test);
    return rc;
}
