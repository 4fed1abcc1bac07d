/* The DESIGN.md program: a 784-128-10 MLP trained on Fashion-MNIST with AdamW (lr 1e-3),
   cross entropy and batches of 64, written as the explicit PyTorch-style loop.
   Usage: mlp [epochs (10)] [data dir (/usr/share/datasets/fashion-mnist)] [train limit]
   Until nabla's data loader lands, a minimal reader of gzipped IDX files lives here. */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

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

/* Reads a gzipped IDX file: images as f32 [n, 784] scaled to [0, 1], labels as i64 [n]. */
static nb_tensor *read_idx(const char *dir, const char *name, bool images) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (install Debian's dataset-fashion-mnist, or pass the folder)\n", path);
        return NULL;
    }
    unsigned char header[16];
    int need = images ? 16 : 8;
    nb_tensor *out = NULL;
    if (gzread(f, header, (unsigned)need) != need) {
        fprintf(stderr, "%s: truncated header\n", path);
        goto done;
    }
    uint32_t magic = (uint32_t)header[0] << 24 | header[1] << 16 | header[2] << 8 | header[3];
    uint32_t n = (uint32_t)header[4] << 24 | header[5] << 16 | header[6] << 8 | header[7];
    if (magic != (images ? 0x803u : 0x801u) || n == 0 || n > 1000000) {
        fprintf(stderr, "%s: not an IDX %s file (magic 0x%x, count %u)\n", path, images ? "image" : "label", magic, n);
        goto done;
    }
    size_t per = images ? 784 : 1;
    unsigned char *raw = malloc((size_t)n * per);
    if (!raw) goto done;
    if (gzread(f, raw, (unsigned)(n * per)) != (int)(n * per)) {
        fprintf(stderr, "%s: truncated data\n", path);
        free(raw);
        goto done;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *bytes = nb_from_data(raw, images ? NB_SHAPE((int64_t)n, 784) : NB_SHAPE((int64_t)n), NB_U8);
    out = nb_keep(images ? nb_mul_scalar(nb_cast(bytes, NB_F32), 1.0 / 255.0) : nb_cast(bytes, NB_I64));
    nb_scope_end(s);
    free(raw);
done:
    gzclose(f);
    return out;
}

/* Accuracy of the model on (x, y), in batches, without recording a graph. */
static double accuracy(nb_module *model, nb_tensor *x, nb_tensor *y) {
    bool prev = nb_set_grad_enabled(false);
    int64_t n = nb_dim(x, 0), correct = 0;
    for (int64_t i = 0; i < n; i += 1000) {
        nb_scope *s = nb_scope_begin();
        int64_t end = i + 1000 < n ? i + 1000 : n;
        nb_tensor *pred = nb_argmax(nb_forward(model, nb_slice(x, 0, i, end, 1)), 1, false);
        correct += (int64_t)nb_item(nb_sum_all(nb_eq(pred, nb_slice(y, 0, i, end, 1))));
        nb_scope_end(s);
    }
    nb_set_grad_enabled(prev);
    return (double)correct / (double)n;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
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
    nb_tensor *x_train = read_idx(dir, "train-images-idx3-ubyte.gz", true);
    nb_tensor *y_train = read_idx(dir, "train-labels-idx1-ubyte.gz", false);
    nb_tensor *x_test = read_idx(dir, "t10k-images-idx3-ubyte.gz", true);
    nb_tensor *y_test = read_idx(dir, "t10k-labels-idx1-ubyte.gz", false);
    if (!x_train || !y_train || !x_test || !y_test) return 1;
    int64_t n = nb_dim(x_train, 0);
    if (limit > 0 && limit < n) n = limit;

    nb_module *model = net_new();
    nb_optimizer *opt = nb_optim_adamw(model, (nb_adamw_opts){ .lr = 1e-3 });
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n);
    float *draws = malloc(sizeof(float) * (size_t)n);
    const int64_t batch = 64;
    for (int epoch = 0; epoch < epochs; epoch++) {
        /* a seeded shuffle: Fisher-Yates driven by the generator */
        nb_tensor *u = nb_rand(NB_SHAPE(n), NB_F32);
        nb_copy_to(u, draws, sizeof(float) * (size_t)n);
        nb_release(u);
        for (int64_t i = 0; i < n; i++) order[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(draws[i] * (float)(i + 1));
            if (j > i) j = i;
            int64_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
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
    free(draws);
    nb_optim_free(opt);
    nb_module_free(model);
    nb_release(x_train);
    nb_release(y_train);
    nb_release(x_test);
    nb_release(y_test);
    return rc;
}
