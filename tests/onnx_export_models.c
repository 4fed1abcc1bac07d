/* Writes the models tests/onnx_export_check.py compares with ONNX Runtime: the seed MLP, the
   TF-tutorial CNN, the residual CNN (batch norm in eval mode), a char GPT, pooling options,
   advanced indexing and every layer with unequal height and width options (asym), each exported
   at opsets 17 and 26 (the newest ONNX Runtime 1.31 runs) with a dynamic batch axis, and
   nabla's own outputs for inputs at batch 1 and batch 5 (NPY files), into DIR.
   Usage: onnx_export_models DIR */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_model.h"

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "onnx_export_models: %s failed: %s\n", #x, nb_error() ? nb_error() : "?"); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Exports m at each opset, and saves inputs and nabla's outputs at batch 1 and 5, and the
   state dict's names (NAME_names.txt) that the initializers must carry. */
static int write_model(const char *dir, const char *name, nb_module *m, nb_shape sample, nb_dtype dtype, int64_t hi) {
    char path[512];
    nb_module_train(m, false);
    snprintf(path, sizeof path, "%s/%s_names.txt", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f);
    int ne = nb_module_state_entries(m, NULL, 0);
    nb_named_tensor *es = calloc((size_t)ne + 1, sizeof *es);
    CHECK(es && nb_module_state_entries(m, es, ne) == ne);
    for (int i = 0; i < ne; i++) /* the batch counter is not read in eval mode, so not exported */
        if (!strstr(es[i].name, "num_batches_tracked")) fprintf(f, "%s\n", es[i].name);
    free(es);
    fclose(f);
    int64_t batches[2] = { 1, 5 };
    for (int b = 0; b < 2; b++) {
        nb_shape s = { sample.ndim + 1, { batches[b] } };
        for (int k = 0; k < sample.ndim; k++) s.dim[k + 1] = sample.dim[k];
        nb_tensor *x = dtype == NB_I64 ? nb_cast(nb_floor(nb_mul_scalar(nb_rand(s, NB_F32), (double)hi)), NB_I64)
                                       : nb_randn(s, NB_F32);
        CHECK(x);
        nb_tensor *y = nb_forward(m, x);
        CHECK(y);
        snprintf(path, sizeof path, "%s/%s_b%lld_in.npy", dir, name, (long long)batches[b]);
        CHECK(nb_save_npy(x, path) == 0);
        snprintf(path, sizeof path, "%s/%s_b%lld_out.npy", dir, name, (long long)batches[b]);
        CHECK(nb_save_npy(y, path) == 0);
        if (b == 0) {
            int opsets[2] = { 17, 26 };
            for (int o = 0; o < 2; o++) {
                snprintf(path, sizeof path, "%s/%s_op%d.onnx", dir, name, opsets[o]);
                CHECK(nb_onnx_export(m, &x, 1, path, (nb_onnx_export_opts){ .opset = opsets[o], .dynamic_batch = true }) == 0);
            }
        }
    }
    return 0;
}

/* Advanced indexing on x [N, 6, 5] (its leading axes after a permute, the batch axis last):
   x[i0, i1] with i64 and i32 indices broadcast together and negative ones, x[j] = v (GatherND
   and ScatterND), and x[k] += v with a repeated index (ScatterND's reduction "add"). */
static nb_tensor *indexing_forward(nb_module *self, nb_tensor *x) {
    (void)self;
    static const int64_t i0[4] = { 0, 2, -1, 3 }, j[3] = { 1, -2, 3 }, k[4] = { 0, 5, 0, -3 };
    static const int32_t i1[2] = { 4, -5 };
    nb_tensor *p = nb_permute(x, (int[]){ 1, 2, 0 }); /* [6, 5, N] */
    nb_tensor *ia[2] = { nb_from_data(i0, NB_SHAPE(2, 2), NB_I64), nb_from_data(i1, NB_SHAPE(2), NB_I32) };
    nb_tensor *a = nb_index(p, ia, 2); /* [2, 2, N] */
    nb_tensor *jj = nb_from_data(j, NB_SHAPE(3), NB_I64), *kk = nb_from_data(k, NB_SHAPE(4), NB_I64);
    nb_tensor *v = nb_reshape(nb_arange(0, 5, 1, NB_F32), NB_SHAPE(5, 1));
    nb_tensor *b = nb_index_put(p, &jj, 1, nb_mul_scalar(v, -1), false);
    nb_tensor *c = nb_index_put(p, &kk, 1, nb_reshape(nb_arange(0, 20, 1, NB_F32), NB_SHAPE(4, 5, 1)), true);
    nb_tensor *flat[3] = { nb_reshape(nb_permute(a, (int[]){ 2, 0, 1 }), NB_SHAPE(-1, 4)),
                           nb_reshape(nb_permute(b, (int[]){ 2, 0, 1 }), NB_SHAPE(-1, 30)),
                           nb_reshape(nb_permute(c, (int[]){ 2, 0, 1 }), NB_SHAPE(-1, 30)) };
    return nb_cat(flat, 3, 1);
}
static const nb_module_class INDEXING = { .name = "Indexing", .forward = indexing_forward };

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    nb_manual_seed(7);
    nb_scope *s = nb_scope_begin();
    nb_module *mlp = nb_nn_from_config(nb_nn_config_builtin("mlp"), NB_SHAPE(1, 28, 28));
    nb_module *cnn = nb_nn_from_config(nb_nn_config_builtin("cnn"), NB_SHAPE(1, 28, 28));
    nb_module *resnet = nb_nn_from_config(nb_nn_config_builtin("resnet"), NB_SHAPE(1, 28, 28));
    nb_module *gpt = gpt_model_new(86, 32, 64, 2, 4);
    /* pooling's options as ONNX attributes: non-square, dilated and ceil-mode max pooling, an
       average leaving its padding out */
    nb_module *pools = nb_nn_sequential(
        nb_nn_conv2d(2, 4, 3, (nb_conv2d_opts){ .padding = 1 }),
        nb_nn_max_pool2d(0, (nb_pool_opts){ .kernel_hw = { 2, 3 }, .stride_hw = { 1, 2 }, .padding_hw = { 1, 0 }, .dilation = 2,
                                            .ceil_mode = true }),
        nb_nn_avg_pool2d(3, (nb_pool_opts){ .stride = 2, .padding = 1, .exclude_padding = true }),
        nb_nn_max_pool2d(2, (nb_pool_opts){ .ceil_mode = true }), nb_nn_flatten(), NULL);
    nb_module *indexing = nb_module_new(&INDEXING, sizeof(nb_module));
    /* every layer with unequal height and width options, each option unequal at once: kernel,
       stride, padding and dilation of a convolution (plain, grouped, reflect-padded), of max and
       average pooling (average with and without its padding counted) */
    nb_module *asym = nb_nn_sequential(
        nb_nn_conv2d(2, 4, 0, (nb_conv2d_opts){ .kernel_hw = { 3, 5 }, .stride_hw = { 1, 2 }, .padding_hw = { 2, 1 },
                                                .dilation_hw = { 2, 1 } }),
        nb_nn_conv2d(4, 6, 0, (nb_conv2d_opts){ .kernel_hw = { 2, 3 }, .stride_hw = { 2, 1 }, .padding_hw = { 0, 2 },
                                                .dilation_hw = { 1, 3 }, .groups = 2 }),
        nb_nn_conv2d(6, 6, 0, (nb_conv2d_opts){ .kernel_hw = { 3, 1 }, .padding_hw = { 1, 0 }, .padding_mode = NB_PAD_REFLECT }),
        nb_nn_max_pool2d(0, (nb_pool_opts){ .kernel_hw = { 3, 2 }, .stride_hw = { 2, 1 }, .padding_hw = { 1, 0 },
                                            .dilation_hw = { 1, 2 } }),
        nb_nn_avg_pool2d(0, (nb_pool_opts){ .kernel_hw = { 2, 3 }, .stride_hw = { 1, 2 }, .padding_hw = { 0, 1 } }),
        nb_nn_avg_pool2d(0, (nb_pool_opts){ .kernel_hw = { 1, 3 }, .stride_hw = { 1, 1 }, .padding_hw = { 0, 1 },
                                            .exclude_padding = true }),
        nb_nn_flatten(), NULL);
    CHECK(mlp && cnn && resnet && gpt && pools && indexing && asym);
    int rc = write_model(argv[1], "mlp", mlp, NB_SHAPE(1, 28, 28), NB_F32, 0) ||
             write_model(argv[1], "cnn", cnn, NB_SHAPE(1, 28, 28), NB_F32, 0) ||
             write_model(argv[1], "resnet", resnet, NB_SHAPE(1, 28, 28), NB_F32, 0) ||
             write_model(argv[1], "gpt", gpt, NB_SHAPE(32), NB_I64, 86) ||
             write_model(argv[1], "pools", pools, NB_SHAPE(2, 13, 15), NB_F32, 0) ||
             write_model(argv[1], "indexing", indexing, NB_SHAPE(6, 5), NB_F32, 0) ||
             write_model(argv[1], "asym", asym, NB_SHAPE(2, 17, 23), NB_F32, 0);
    nb_scope_end(s);
    nb_module_free(mlp);
    nb_module_free(cnn);
    nb_module_free(resnet);
    nb_module_free(gpt);
    nb_module_free(pools);
    nb_module_free(indexing);
    nb_module_free(asym);
    return rc;
}
