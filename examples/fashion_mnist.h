/* A minimal reader of Fashion-MNIST's gzipped IDX files and a batched accuracy helper, shared
   by the examples until nabla's data loader lands. */
#ifndef EXAMPLES_FASHION_MNIST_H
#define EXAMPLES_FASHION_MNIST_H

#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>

/* Reads a gzipped IDX file: images as f32 [n, 784] scaled to [0, 1], labels as i64 [n]. */
static inline nb_tensor *read_idx(const char *dir, const char *name, bool images) {
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

/* Loads the four files; false (with a message) when one is missing or malformed. */
static inline bool load_fashion_mnist(const char *dir, nb_tensor **x_train, nb_tensor **y_train, nb_tensor **x_test,
                                      nb_tensor **y_test) {
    *x_train = read_idx(dir, "train-images-idx3-ubyte.gz", true);
    *y_train = read_idx(dir, "train-labels-idx1-ubyte.gz", false);
    *x_test = read_idx(dir, "t10k-images-idx3-ubyte.gz", true);
    *y_test = read_idx(dir, "t10k-labels-idx1-ubyte.gz", false);
    return *x_train && *y_train && *x_test && *y_test;
}

/* Fills order[0..n) with a permutation drawn from the seeded generator (Fisher-Yates). */
static inline void shuffled_order(int64_t *order, int64_t n) {
    float *draws = malloc(sizeof(float) * (size_t)n);
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
    free(draws);
}

/* Accuracy of model on images x (shaped by view, e.g. [n, 784] or [n, 1, 28, 28]) and labels y. */
/* Accuracy of the model on (x, y), in batches, without recording a graph. */
static inline double accuracy(nb_module *model, nb_tensor *x, nb_tensor *y) {
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

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
