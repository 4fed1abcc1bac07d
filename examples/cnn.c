/* The TensorFlow tutorial's convnet from the Fashion-MNIST benchmark table: conv 5x5x32 same
   + relu, max-pool 2, conv 5x5x64 same + relu, max-pool 2, dense 1024 + relu, dropout 0.4,
   dense 10; Adam lr 1e-3, batch 64.
   Usage: cnn [epochs (3)] [data dir] [limit: train and test on the first N samples only] */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include "fashion_mnist.h"

static nb_module *cnn_new(void) {
    return nb_nn_sequential(
        nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 3;
    const char *dir = argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist";
    int64_t limit = argc > 3 ? atoll(argv[3]) : 0;
    if (epochs <= 0) {
        fprintf(stderr, "usage: %s [epochs] [data dir] [train limit]\n", argv[0]);
        return 2;
    }
    nb_manual_seed(0);
    nb_tensor *x_train, *y_train, *x_test, *y_test;
    if (!load_fashion_mnist(dir, &x_train, &y_train, &x_test, &y_test)) return 1;
    /* images as [n, 1, 28, 28], as torchvision gives them */
    nb_tensor *images = nb_view(x_train, NB_SHAPE(-1, 1, 28, 28)), *test_images = nb_view(x_test, NB_SHAPE(-1, 1, 28, 28));
    int64_t n = nb_dim(images, 0);
    if (limit > 0 && limit < n) { /* a short run: fewer training and test samples */
        n = limit;
        nb_tensor *ti = nb_slice(test_images, 0, 0, limit, 1), *ty = nb_slice(y_test, 0, 0, limit, 1);
        nb_release(test_images);
        nb_release(y_test);
        test_images = ti;
        y_test = ty;
    }

    nb_module *model = cnn_new();
    nb_optimizer *opt = nb_optim_adam(model, (nb_adam_opts){ .lr = 1e-3 });
    if (!model || !opt) {
        fprintf(stderr, "error: %s\n", nb_error());
        return 1;
    }
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n);
    for (int epoch = 0; epoch < epochs; epoch++) {
        shuffled_order(order, n);
        nb_module_train(model, true);
        double t0 = now(), loss_sum = 0;
        int64_t steps = 0;
        for (int64_t i = 0; i < n; i += 64) {
            nb_scope *s = nb_scope_begin();
            int64_t m = i + 64 <= n ? 64 : n - i;
            nb_tensor *idx = nb_from_data(order + i, NB_SHAPE(m), NB_I64);
            nb_tensor *loss = nb_cross_entropy(nb_forward(model, nb_index_select(images, 0, idx)),
                                               nb_index_select(y_train, 0, idx), (nb_ce_opts){ 0 });
            nb_optim_zero_grad(opt);
            nb_backward(loss);
            nb_optim_step(opt);
            loss_sum += nb_item(loss);
            steps++;
            nb_scope_end(s);
            if (nb_error()) break;
        }
        if (nb_error()) break;
        nb_module_train(model, false);
        double secs = now() - t0;
        printf("epoch %d  loss %.4f  test accuracy %.4f  (%.1f s, %.0f samples/s)\n", epoch + 1, loss_sum / (double)steps,
               accuracy(model, test_images, y_test), secs, (double)n / secs);
        fflush(stdout);
    }
    int rc = 0;
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    } else printf("final test accuracy %.4f\n", accuracy(model, test_images, y_test));
    free(order);
    nb_optim_free(opt);
    nb_module_free(model);
    nb_release(images);
    nb_release(test_images);
    nb_release(x_train);
    nb_release(y_train);
    nb_release(x_test);
    nb_release(y_test);
    return rc;
}
