/* The TensorFlow tutorial's convnet from the Fashion-MNIST benchmark table: conv 5x5x32 same
   + relu, max-pool 2, conv 5x5x64 same + relu, max-pool 2, dense 1024 + relu, dropout 0.4,
   dense 10; Adam lr 1e-3, batch 64.
   Usage: cnn [epochs (3)] [data dir] [limit: train and test on the first N samples only] [seed (0)]
   bench/cnn_accuracy_torch.py runs the same recipe in PyTorch. */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static nb_module *cnn_new(void) {
    return nb_nn_sequential(
        nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
}

/* The first n samples of ds (all of them when n is 0); the caller frees the result. */
static nb_dataset *first(nb_dataset *ds, int64_t n) {
    int64_t len = nb_dataset_len(ds);
    if (n <= 0 || n >= len) n = len;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    nb_dataset *sub = nb_data_subset(ds, idx, n);
    free(idx);
    return sub;
}

static double accuracy(nb_module *model, nb_data_loader *loader) {
    bool prev = nb_set_grad_enabled(false);
    nb_module_train(model, false);
    int64_t correct = 0, seen = 0;
    nb_batch b;
    while (nb_data_loader_next(loader, &b)) {
        nb_scope *s = nb_scope_begin();
        correct += (int64_t)nb_item(nb_sum_all(nb_eq(nb_argmax(nb_forward(model, b.x), 1, false), b.y)));
        seen += nb_dim(b.y, 0);
        nb_scope_end(s);
    }
    nb_module_train(model, true);
    nb_set_grad_enabled(prev);
    return seen ? (double)correct / (double)seen : 0.0;
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 3;
    const char *root = argc > 2 && argv[2][0] ? argv[2] : NULL;
    int64_t limit = argc > 3 ? atoll(argv[3]) : 0;
    char *end = NULL;
    unsigned long long seed = argc > 4 ? strtoull(argv[4], &end, 10) : 0;
    if (epochs <= 0 || limit < 0 || (end && (end == argv[4] || *end))) {
        fprintf(stderr, "usage: %s [epochs] [data dir] [limit] [seed]\n", argv[0]);
        return 2;
    }
    nb_manual_seed(seed); /* the weights, the dropout masks and the loader's order */
    nb_dataset *train_all = nb_data_fashion_mnist(root, true), *test_all = nb_data_fashion_mnist(root, false);
    if (!train_all || !test_all) {
        fprintf(stderr, "error: %s\n", nb_error());
        return 1;
    }
    nb_dataset *train = first(train_all, limit), *test = first(test_all, limit);
    nb_data_loader *loader = nb_data_loader_new(train, (nb_loader_opts){ .batch_size = 64, .shuffle = true, .num_workers = 2 });
    nb_data_loader *test_loader = nb_data_loader_new(test, (nb_loader_opts){ .batch_size = 500 });
    nb_module *model = cnn_new();
    nb_optimizer *opt = nb_optim_adam(model, (nb_adam_opts){ .lr = 1e-3 });
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        return 1;
    }
    for (int epoch = 0; epoch < epochs && !nb_error(); epoch++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        double loss_sum = 0;
        int64_t steps = 0, samples = 0;
        nb_batch b;
        while (nb_data_loader_next(loader, &b)) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *loss = nb_cross_entropy(nb_forward(model, b.x), b.y, (nb_ce_opts){ 0 });
            nb_optim_zero_grad(opt);
            nb_backward(loss);
            nb_optim_step(opt);
            loss_sum += nb_item(loss);
            steps++;
            samples += nb_dim(b.y, 0);
            nb_scope_end(s);
        }
        if (nb_data_loader_failed(loader) || nb_error()) break;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        printf("epoch %d  loss %.4f  test accuracy %.4f  (%.1f s, %.0f samples/s)\n", epoch + 1, loss_sum / (double)steps,
               accuracy(model, test_loader), secs, (double)samples / secs);
        fflush(stdout);
    }
    int rc = 0;
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    } else printf("final test accuracy %.4f\n", accuracy(model, test_loader));
    nb_optim_free(opt);
    nb_module_free(model);
    nb_data_loader_free(loader);
    nb_data_loader_free(test_loader);
    nb_dataset_free(train);
    nb_dataset_free(test);
    nb_dataset_free(train_all);
    nb_dataset_free(test_all);
    return rc;
}
