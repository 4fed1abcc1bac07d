/* Models from a JSON config (nb_nn_from_config), the residual block, the Keras-style summary and
   the built-in configs: every layer type builds and gives the inferred shape (the convolutions'
   [height, width] fields and padding modes too, their parameters and settings checked); the "cnn"
   built-in has the parameter names and shapes of the CLI's hand-built convnet (so old saved
   files load); residual names and forward by hand; an error for each kind of wrong config,
   naming the layer and the field; the activations' fields by hand; the summary's shapes,
   counts and restored modes. */
#include "test_util.h"

#include <stdint.h>

static nb_module *from(const char *json) { return nb_nn_from_config(json, (nb_shape){ 0 }); }

/* The CLI's model before configs (tools/nabla.c's make_model). */
static nb_module *hand_cnn(void) {
    return nb_nn_sequential(
        nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
}

static nb_module *hand_mlp(void) {
    return nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
}

static bool has_param(nb_module *m, const char *name) {
    nb_named_tensor list[256];
    int n = nb_module_named_parameters(m, list, 256);
    for (int i = 0; i < n && i < 256; i++)
        if (!strcmp(list[i].name, name)) return true;
    return false;
}

/* Runs a batch of 2 through m and checks the output is [2, want...]. */
static void expect_forward(nb_module *m, nb_shape sample, nb_shape want, const char *json) {
    nb_shape in = { .ndim = sample.ndim + 1 };
    in.dim[0] = 2;
    for (int i = 0; i < sample.ndim; i++) in.dim[i + 1] = sample.dim[i];
    nb_scope *s = nb_scope_begin();
    nb_tensor *y = nb_forward(m, nb_randn(in, NB_F32));
    if (!y) fail_msg("forward of %s failed: %s", json, nb_error());
    nb_shape got = nb_shape_of(y);
    char a[160], b[160];
    bool ok = got.ndim == want.ndim + 1 && got.dim[0] == 2;
    for (int i = 0; ok && i < want.ndim; i++) ok = got.dim[i + 1] == want.dim[i];
    if (!ok) fail_msg("%s: output %s, want [2] + %s", json, nb_shape_str(got, a, sizeof a), nb_shape_str(want, b, sizeof b));
    nb_scope_end(s);
}

static void test_each_layer_type(void **state) {
    (void)state;
    static const struct {
        const char *json;
        nb_shape want;
        const char *cls0; /* class of the first layer */
    } cases[] = {
        { "{\"input\": [20], \"layers\": [{\"type\": \"linear\", \"out\": 7}]}", { 1, { 7 } }, "Linear" },
        { "{\"input\": [3, 20], \"layers\": [{\"type\": \"linear\", \"out\": 7, \"bias\": false}]}", { 2, { 3, 7 } }, "Linear" },
        { "{\"input\": [3, 12, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3}]}", { 3, { 8, 10, 8 } }, "Conv2d" },
        { "{\"input\": [3, 12, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 5, \"padding\": \"same\"}]}",
          { 3, { 8, 12, 10 } }, "Conv2d" },
        { "{\"input\": [3, 12, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": \"valid\", "
          "\"bias\": false}]}", { 3, { 8, 10, 8 } }, "Conv2d" },
        { "{\"input\": [4, 13, 11], \"layers\": [{\"type\": \"conv2d\", \"out\": 6, \"kernel\": 3, \"stride\": 2, \"padding\": 1, "
          "\"groups\": 2}]}", { 3, { 6, 7, 6 } }, "Conv2d" },
        { "{\"input\": [2, 12, 12], \"layers\": [{\"type\": \"conv2d\", \"out\": 4, \"kernel\": 3, \"dilation\": 2, "
          "\"padding\": \"same\"}]}", { 3, { 4, 12, 12 } }, "Conv2d" },
        { "{\"input\": [2, 12, 12], \"layers\": [{\"type\": \"conv2d\", \"out\": 4, \"kernel\": 3, \"dilation\": 3}]}",
          { 3, { 4, 6, 6 } }, "Conv2d" },
        /* non-square fields as [height, width]: H (12 + 2 - 3) / 1 + 1, W (20 - 2 * 4 - 1) / 2 + 1 */
        { "{\"input\": [3, 12, 20], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": [3, 5], \"stride\": [1, 2], "
          "\"padding\": [1, 0], \"dilation\": [1, 2]}]}", { 3, { 8, 12, 6 } }, "Conv2d" },
        { "{\"input\": [3, 12, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": [3, 5], \"padding\": \"same\"}]}",
          { 3, { 8, 12, 10 } }, "Conv2d" },
        { "{\"input\": [3, 12, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": 1, "
          "\"padding_mode\": \"reflect\"}]}", { 3, { 8, 12, 10 } }, "Conv2d" },
        { "{\"input\": [3, 12, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": [5, 3], \"padding\": [2, 1], "
          "\"padding_mode\": \"circular\"}]}", { 3, { 8, 12, 10 } }, "Conv2d" },
        { "{\"input\": [3, 2, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": 3, "
          "\"padding_mode\": \"replicate\"}]}", { 3, { 8, 6, 14 } }, "Conv2d" },
        { "{\"input\": [3, 12, 10], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": 1, "
          "\"padding_mode\": \"zeros\"}]}", { 3, { 8, 12, 10 } }, "Conv2d" },
        /* conv1d over [C, L]: (20 + 2 - 4 - 1) / 2 + 1 */
        { "{\"input\": [4, 20], \"layers\": [{\"type\": \"conv1d\", \"out\": 6, \"kernel\": 5, \"stride\": 2, \"padding\": 1}]}",
          { 2, { 6, 9 } }, "Conv1d" },
        { "{\"input\": [4, 20], \"layers\": [{\"type\": \"conv1d\", \"out\": 6, \"kernel\": 3, \"dilation\": 2, \"groups\": 2, "
          "\"padding\": \"same\", \"padding_mode\": \"circular\", \"bias\": false}]}", { 2, { 6, 20 } }, "Conv1d" },
        /* conv3d over [C, D, H, W]: (n + 2 - 2 - 1) / 2 + 1 per axis */
        { "{\"input\": [2, 6, 7, 8], \"layers\": [{\"type\": \"conv3d\", \"out\": 4, \"kernel\": 3, \"stride\": 2, \"padding\": 1}]}",
          { 4, { 4, 3, 4, 4 } }, "Conv3d" },
        { "{\"input\": [2, 6, 7, 8], \"layers\": [{\"type\": \"conv3d\", \"out\": 4, \"kernel\": 3, \"padding\": \"same\", "
          "\"padding_mode\": \"replicate\"}, {\"type\": \"flatten\"}]}", { 1, { 4 * 6 * 7 * 8 } }, "Conv3d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"max_pool2d\", \"kernel\": 2}]}", { 3, { 3, 4, 4 } }, "MaxPool2d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"max_pool2d\", \"kernel\": 3, \"stride\": 2, \"padding\": 1}]}",
          { 3, { 3, 5, 4 } }, "MaxPool2d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"avg_pool2d\", \"kernel\": 3, \"stride\": 1}]}", { 3, { 3, 7, 6 } },
          "AvgPool2d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"max_pool2d\", \"kernel\": 3, \"stride\": 2, \"padding\": 1, "
          "\"dilation\": 2, \"ceil_mode\": true}]}", { 3, { 3, 4, 4 } }, "MaxPool2d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"avg_pool2d\", \"kernel\": 2, \"ceil_mode\": true, "
          "\"count_include_pad\": false}]}", { 3, { 3, 5, 4 } }, "AvgPool2d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"adaptive_avg_pool2d\"}]}", { 3, { 3, 1, 1 } }, "AdaptiveAvgPool2d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"adaptive_avg_pool2d\", \"out\": 2}]}", { 3, { 3, 2, 2 } },
          "AdaptiveAvgPool2d" },
        { "{\"input\": [3, 9, 8], \"layers\": [{\"type\": \"adaptive_avg_pool2d\", \"out\": [3, 2]}]}", { 3, { 3, 3, 2 } },
          "AdaptiveAvgPool2d" },
        { "{\"input\": [5, 9, 8], \"layers\": [{\"type\": \"global_avg_pool\"}]}", { 1, { 5 } }, "GlobalAvgPool2d" },
        { "{\"input\": [5, 9, 8], \"layers\": [{\"type\": \"batch_norm\"}]}", { 3, { 5, 9, 8 } }, "BatchNorm2d" },
        { "{\"input\": [5], \"layers\": [{\"type\": \"batch_norm\"}]}", { 1, { 5 } }, "BatchNorm1d" },
        { "{\"input\": [5, 6], \"layers\": [{\"type\": \"batch_norm\"}]}", { 2, { 5, 6 } }, "BatchNorm1d" },
        { "{\"input\": [5, 6], \"layers\": [{\"type\": \"layer_norm\"}]}", { 2, { 5, 6 } }, "LayerNorm" },
        { "{\"input\": [5, 6], \"layers\": [{\"type\": \"dropout\"}]}", { 2, { 5, 6 } }, "Dropout" },
        { "{\"input\": [5, 6], \"layers\": [{\"type\": \"dropout\", \"p\": 0.25}]}", { 2, { 5, 6 } }, "Dropout" },
        { "{\"input\": [5, 6, 7], \"layers\": [{\"type\": \"flatten\"}]}", { 1, { 210 } }, "Flatten" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"relu\"}]}", { 1, { 4 } }, "ReLU" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"gelu\"}]}", { 1, { 4 } }, "GELU" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"silu\"}]}", { 1, { 4 } }, "SiLU" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"tanh\"}]}", { 1, { 4 } }, "Tanh" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"sigmoid\"}]}", { 1, { 4 } }, "Sigmoid" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"mish\"}]}", { 1, { 4 } }, "Mish" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"hardswish\"}]}", { 1, { 4 } }, "Hardswish" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"hardsigmoid\"}]}", { 1, { 4 } }, "Hardsigmoid" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"identity\"}]}", { 1, { 4 } }, "Identity" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"leaky_relu\"}]}", { 1, { 4 } }, "LeakyReLU" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"leaky_relu\", \"negative_slope\": 0.2}]}", { 1, { 4 } }, "LeakyReLU" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"elu\", \"alpha\": 2}]}", { 1, { 4 } }, "ELU" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"softplus\", \"beta\": 2, \"threshold\": 5}]}", { 1, { 4 } }, "Softplus" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"prelu\"}]}", { 1, { 4 } }, "PReLU" },
        { "{\"input\": [3, 5, 5], \"layers\": [{\"type\": \"prelu\", \"num_parameters\": 3, \"init\": 0.1}]}", { 3, { 3, 5, 5 } },
          "PReLU" },
        { "{\"input\": [4, 8, 8], \"layers\": [{\"type\": \"residual\", \"activation\": \"hardswish\", \"layers\": [{\"type\": "
          "\"conv2d\", \"out\": 4, \"kernel\": 3, \"padding\": 1}]}]}", { 3, { 4, 8, 8 } }, "Residual" },
        { "{\"input\": [4, 8, 8], \"layers\": [{\"type\": \"residual\", \"layers\": [{\"type\": \"conv2d\", \"out\": 4, "
          "\"kernel\": 3, \"padding\": 1}, {\"type\": \"batch_norm\"}]}]}", { 3, { 4, 8, 8 } }, "Residual" },
        { "{\"input\": [4, 9, 9], \"layers\": [{\"type\": \"residual\", \"activation\": \"gelu\", \"layers\": [{\"type\": "
          "\"conv2d\", \"out\": 8, \"kernel\": 3, \"stride\": 2, \"padding\": 1}]}]}", { 3, { 8, 5, 5 } }, "Residual" },
        { "{\"input\": [4, 8, 8], \"layers\": [{\"type\": \"residual\", \"activation\": \"none\", \"layers\": [{\"type\": "
          "\"max_pool2d\", \"kernel\": 2}, {\"type\": \"conv2d\", \"out\": 6, \"kernel\": 1}]}]}", { 3, { 6, 4, 4 } }, "Residual" },
        { "{\"input\": [6], \"layers\": [{\"type\": \"residual\", \"activation\": null, \"layers\": [{\"type\": \"linear\", "
          "\"out\": 3}]}]}", { 1, { 3 } }, "Residual" },
        { "{\"input\": [7, 5], \"layers\": [{\"type\": \"lstm\", \"hidden\": 6}, {\"type\": \"linear\", \"out\": 3}]}",
          { 2, { 7, 3 } }, "LSTM" },
        { "{\"input\": [7, 5], \"layers\": [{\"type\": \"gru\", \"hidden\": 4, \"num_layers\": 2, \"bidirectional\": true, "
          "\"dropout\": 0.1, \"bias\": false}]}", { 2, { 7, 8 } }, "GRU" },
        { "{\"input\": [7, 5], \"layers\": [{\"type\": \"rnn\", \"hidden\": 3, \"nonlinearity\": \"relu\"}, {\"type\": "
          "\"flatten\"}]}", { 1, { 21 } }, "RNN" },
        /* the example; a bare list of layers with the sample shape from the caller below */
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernel\": 5, \"padding\": \"same\"}, "
          "{\"type\": \"relu\"}, {\"type\": \"max_pool2d\", \"kernel\": 2}, {\"type\": \"flatten\"}, {\"type\": \"linear\", "
          "\"out\": 10}]}", { 1, { 10 } }, "Conv2d" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_error_clear();
        nb_module *m = from(cases[i].json);
        if (!m) fail_msg("%s: %s", cases[i].json, nb_error());
        nb_module *first = nb_module_get_child(m, "0");
        assert_non_null(first);
        assert_string_equal(first->cls->name, cases[i].cls0);
        assert_string_equal(m->cls->name, "Sequential");
        /* the sample shape, from "input", equals the first layer's input */
        const char *p = strstr(cases[i].json, "\"input\": [");
        nb_shape sample = { 0 };
        for (p += 10; *p != ']';) {
            sample.dim[sample.ndim++] = strtoll(p, (char **)&p, 10);
            while (*p == ',' || *p == ' ') p++;
        }
        expect_forward(m, sample, cases[i].want, cases[i].json);
        nb_module_train(m, false);
        expect_forward(m, sample, cases[i].want, cases[i].json);
        nb_module_free(m);
        /* the same sample shape given by the caller is accepted too */
        m = nb_nn_from_config(cases[i].json, sample);
        if (!m) fail_msg("%s with its sample shape: %s", cases[i].json, nb_error());
        nb_module_free(m);
    }
    /* a bare list of layers takes the caller's sample shape */
    nb_module *m = nb_nn_from_config("[{\"type\": \"flatten\"}, {\"type\": \"linear\", \"out\": 3}]", NB_SHAPE(2, 5));
    assert_non_null(m);
    expect_forward(m, NB_SHAPE(2, 5), NB_SHAPE(3), "bare list");
    assert_int_equal(nb_dim(nb_module_get(m, "1.weight"), 1), 10);
    nb_module_free(m);
    assert_null(nb_error());
}

static void expect_same_entries(nb_module *a, nb_module *b) {
    nb_named_tensor la[64], lb[64];
    int na = nb_module_state_entries(a, la, 64), nbb = nb_module_state_entries(b, lb, 64);
    assert_int_equal(na, nbb);
    for (int i = 0; i < na; i++) {
        assert_string_equal(la[i].name, lb[i].name);
        nb_shape sa = nb_shape_of(la[i].tensor), sb = nb_shape_of(lb[i].tensor);
        assert_int_equal(sa.ndim, sb.ndim);
        for (int d = 0; d < sa.ndim; d++) assert_int_equal(sa.dim[d], sb.dim[d]);
        assert_int_equal(nb_dtype_of(la[i].tensor), nb_dtype_of(lb[i].tensor));
        assert_int_equal(nb_requires_grad(la[i].tensor), nb_requires_grad(lb[i].tensor));
    }
    assert_int_equal(nb_module_num_params(a), nb_module_num_params(b));
}

static void test_builtins_match_hand_built(void **state) {
    (void)state;
    nb_module *c = from(nb_nn_config_builtin("cnn")), *h = hand_cnn();
    assert_non_null(c);
    assert_non_null(h);
    expect_same_entries(c, h);
    assert_true(has_param(c, "7.weight"));
    assert_true(has_param(c, "10.bias"));
    /* same classes too, layer by layer */
    char nm[8];
    for (int i = 0; i < 11; i++) {
        snprintf(nm, sizeof nm, "%d", i);
        assert_string_equal(nb_module_get_child(c, nm)->cls->name, nb_module_get_child(h, nm)->cls->name);
    }
    nb_module_free(c);
    nb_module_free(h);

    nb_module *m = from(nb_nn_config_builtin("mlp"));
    h = hand_mlp();
    assert_non_null(m);
    expect_same_entries(m, h);
    nb_module_free(m);
    nb_module_free(h);

    m = from(nb_nn_config_builtin("resnet"));
    if (!m) fail_msg("resnet: %s", nb_error());
    expect_forward(m, NB_SHAPE(1, 28, 28), NB_SHAPE(10), "resnet");
    assert_true(has_param(m, "4.body.0.weight"));
    assert_false(has_param(m, "4.shortcut.0.weight")); /* 32 -> 32: identity */
    assert_true(has_param(m, "5.shortcut.0.weight"));
    assert_true(has_param(m, "5.shortcut.1.weight"));
    assert_true(has_param(m, "6.shortcut.0.weight"));
    nb_module_free(m);

    assert_null(nb_nn_config_builtin("vgg"));
    ASSERT_ERROR_CONTAINS("nb_nn_config_builtin: unknown model \"vgg\"");
    assert_null(nb_nn_config_builtin(NULL));
    ASSERT_ERROR_CONTAINS("nb_nn_config_builtin");
}

static void test_residual_names(void **state) {
    (void)state;
    nb_module *m = from("{\"input\": [3, 16, 16], \"layers\": ["
                        "{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": 1},"
                        "{\"type\": \"residual\", \"layers\": ["
                        "  {\"type\": \"conv2d\", \"out\": 16, \"kernel\": 3, \"stride\": 2, \"padding\": 1, \"bias\": false},"
                        "  {\"type\": \"batch_norm\"}, {\"type\": \"relu\"},"
                        "  {\"type\": \"conv2d\", \"out\": 16, \"kernel\": 3, \"padding\": 1, \"bias\": false},"
                        "  {\"type\": \"batch_norm\"}]},"
                        "{\"type\": \"residual\", \"layers\": [{\"type\": \"conv2d\", \"out\": 16, \"kernel\": 3, \"padding\": 1}]}]}");
    if (!m) fail_msg("%s", nb_error());
    static const char *want[] = {
        "0.weight", "0.bias", "1.body.0.weight", "1.body.1.weight", "1.body.1.bias", "1.body.3.weight", "1.body.4.weight",
        "1.body.4.bias", "1.shortcut.0.weight", "1.shortcut.1.weight", "1.shortcut.1.bias", "2.body.0.weight", "2.body.0.bias",
    };
    nb_named_tensor list[32];
    int n = nb_module_named_parameters(m, list, 32);
    assert_int_equal(n, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < n; i++) assert_string_equal(list[i].name, want[i]);
    /* the projection: 1x1, stride 2, no bias, then batch norm */
    nb_tensor *w = nb_module_get(m, "1.shortcut.0.weight");
    assert_int_equal(nb_dim(w, 0), 16);
    assert_int_equal(nb_dim(w, 1), 8);
    assert_int_equal(nb_dim(w, 2), 1);
    assert_int_equal(nb_dim(w, 3), 1);
    assert_null(nb_module_get(m, "1.shortcut.0.bias"));
    assert_non_null(nb_module_get(m, "1.shortcut.1.running_mean"));
    nb_module *r = nb_module_get_child(m, "1");
    assert_string_equal(r->cls->name, "Residual");
    assert_string_equal(nb_module_get_child(r, "body")->cls->name, "Sequential");
    assert_null(nb_module_get_child(nb_module_get_child(m, "2"), "shortcut"));
    expect_forward(m, NB_SHAPE(3, 16, 16), NB_SHAPE(16, 8, 8), "residual names");
    nb_module_free(m);
}

/* max |a - b| */
static double max_diff(nb_tensor *a, nb_tensor *b) {
    int64_t n = nb_numel(a);
    assert_int_equal(n, nb_numel(b));
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(nb_copy_to(a, x, sizeof(float) * (size_t)n), 0);
    assert_int_equal(nb_copy_to(b, y, sizeof(float) * (size_t)n), 0);
    double d = 0;
    for (int64_t i = 0; i < n; i++) { /* not fmax: aarch64 GCC 12 crashes vectorising that reduction */
        double e = fabs((double)x[i] - (double)y[i]);
        if (e > d) d = e;
    }
    free(x);
    free(y);
    return d;
}

static void test_residual_forward_by_hand(void **state) {
    (void)state;
    nb_manual_seed(7);
    nb_scope *s = nb_scope_begin();
    /* plain module, projection shortcut, relu */
    nb_module *body = nb_nn_sequential(nb_nn_linear(5, 4), nb_nn_tanh(), nb_nn_linear(4, 3), NULL);
    nb_module *sc = nb_nn_linear_no_bias(5, 3);
    nb_module *r = nb_nn_residual(body, sc, true);
    assert_non_null(r);
    assert_ptr_equal(nb_module_get_child(r, "body"), body);
    assert_ptr_equal(nb_module_get_child(r, "shortcut"), sc);
    nb_tensor *x = nb_randn(NB_SHAPE(6, 5), NB_F32);
    nb_tensor *want = nb_relu(nb_add(nb_forward(body, x), nb_forward(sc, x)));
    nb_tensor *got = nb_forward(r, x);
    assert_non_null(got);
    assert_true(max_diff(got, want) < 1e-6);
    assert_true(has_param(r, "body.0.weight"));
    assert_true(has_param(r, "shortcut.weight"));
    /* gradients flow through both paths */
    nb_backward(nb_sum_all(got));
    assert_non_null(nb_grad_of(nb_module_get(r, "body.0.weight")));
    assert_non_null(nb_grad_of(nb_module_get(r, "shortcut.weight")));
    nb_module_free(r);

    /* identity shortcut, no activation: body(x) + x */
    body = nb_nn_linear(5, 5);
    r = nb_nn_residual(body, NULL, false);
    want = nb_add(nb_forward(body, x), x);
    assert_true(max_diff(nb_forward(r, x), want) < 1e-6);
    nb_module_free(r);

    /* the config's residual: relu(body(x) + shortcut(x)) with its own children, in eval mode */
    nb_module *m = from("{\"input\": [2, 6, 6], \"layers\": [{\"type\": \"residual\", \"layers\": ["
                        "{\"type\": \"conv2d\", \"out\": 3, \"kernel\": 3, \"stride\": 2, \"padding\": 1}, {\"type\": \"batch_norm\"}]}]}");
    assert_non_null(m);
    nb_module_train(m, false);
    nb_module *res = nb_module_get_child(m, "0");
    nb_tensor *xi = nb_randn(NB_SHAPE(2, 2, 6, 6), NB_F32);
    want = nb_relu(nb_add(nb_forward(nb_module_get_child(res, "body"), xi), nb_forward(nb_module_get_child(res, "shortcut"), xi)));
    got = nb_forward(m, xi);
    assert_true(max_diff(got, want) < 1e-6);
    assert_int_equal(nb_dim(got, 1), 3);
    assert_int_equal(nb_dim(got, 2), 3);
    nb_module_free(m);

    /* a body that changes the shape needs a shortcut that matches */
    r = nb_nn_residual(nb_nn_linear(5, 3), NULL, true);
    assert_null(nb_forward(r, x));
    ASSERT_ERROR_CONTAINS("nb_nn_residual (root): the body gives [6, 3] for input [6, 5] but the identity shortcut gives [6, 5]");
    nb_module_free(r);
    assert_null(nb_nn_residual(NULL, nb_nn_relu(), true)); /* frees the shortcut */
    ASSERT_ERROR_CONTAINS("nb_nn_residual: body is NULL");
    nb_scope_end(s);
}

/* The convolutions' new fields reach the modules: parameter names and shapes (a [height, width]
   kernel, conv1d's and conv3d's weights), torch's repr of each setting, and a circular padding
   by hand (nb_pad, then an unpadded nb_conv2d with the same weights). */
static void expect_param(nb_module *m, const char *name, nb_shape want) {
    nb_tensor *t = nb_module_get(m, name);
    if (!t) fail_msg("no parameter %s", name);
    nb_shape got = nb_shape_of(t);
    char a[160], b[160];
    bool ok = got.ndim == want.ndim;
    for (int i = 0; ok && i < got.ndim; i++) ok = got.dim[i] == want.dim[i];
    if (!ok) fail_msg("%s is %s, want %s", name, nb_shape_str(got, a, sizeof a), nb_shape_str(want, b, sizeof b));
}

static void expect_repr(nb_module *m, const char *want) {
    char *r = nb_module_repr(m);
    assert_non_null(r);
    if (!strstr(r, want)) fail_msg("repr %s lacks %s", r, want);
    free(r);
}

static void test_conv_fields(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_module *m = from("{\"input\": [4, 12, 20], \"layers\": [{\"type\": \"conv2d\", \"out\": 6, \"kernel\": [3, 5], \"stride\": "
                        "[1, 2], \"padding\": [1, 0], \"dilation\": [1, 2], \"groups\": 2, \"padding_mode\": \"reflect\"}]}");
    if (!m) fail_msg("%s", nb_error());
    assert_int_equal(nb_module_named_parameters(m, NULL, 0), 2);
    expect_param(m, "0.weight", NB_SHAPE(6, 2, 3, 5));
    expect_param(m, "0.bias", NB_SHAPE(6));
    expect_repr(m, "Conv2d(4, 6, kernel_size=(3, 5), stride=(1, 2), padding=(1, 0), dilation=(1, 2), groups=2, "
                   "padding_mode=reflect)");
    nb_module_free(m);

    m = from("{\"input\": [4, 20], \"layers\": [{\"type\": \"conv1d\", \"out\": 6, \"kernel\": 5, \"stride\": 2, "
             "\"padding\": 2, \"bias\": false, \"padding_mode\": \"replicate\"}]}");
    if (!m) fail_msg("%s", nb_error());
    assert_int_equal(nb_module_named_parameters(m, NULL, 0), 1);
    expect_param(m, "0.weight", NB_SHAPE(6, 4, 5));
    expect_repr(m, "Conv1d(4, 6, kernel_size=(5,), stride=(2,), padding=(2,), bias=False, padding_mode=replicate)");
    nb_module_free(m);

    m = from("{\"input\": [2, 5, 6, 7], \"layers\": [{\"type\": \"conv3d\", \"out\": 4, \"kernel\": 3, \"padding\": 1, "
             "\"padding_mode\": \"circular\"}]}");
    if (!m) fail_msg("%s", nb_error());
    expect_param(m, "0.weight", NB_SHAPE(4, 2, 3, 3, 3));
    expect_param(m, "0.bias", NB_SHAPE(4));
    expect_repr(m, "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), padding_mode=circular)");
    nb_module_free(m);

    /* circular padding by hand */
    m = from("{\"input\": [2, 5, 6], \"layers\": [{\"type\": \"conv2d\", \"out\": 3, \"kernel\": [3, 5], \"padding\": [1, 2], "
             "\"padding_mode\": \"circular\"}]}");
    if (!m) fail_msg("%s", nb_error());
    nb_tensor *x = nb_randn(NB_SHAPE(2, 2, 5, 6), NB_F32);
    int64_t pads[4] = { 2, 2, 1, 1 };
    nb_tensor *want = nb_conv2d(nb_pad(x, pads, 4, NB_PAD_CIRCULAR, 0), nb_module_get(m, "0.weight"), nb_module_get(m, "0.bias"),
                                (nb_conv_opts){ .stride = { 1, 1 }, .dilation = { 1, 1 }, .groups = 1 });
    nb_tensor *got = nb_forward(m, x);
    assert_int_equal(nb_dim(got, 2), 5);
    assert_int_equal(nb_dim(got, 3), 6);
    assert_true(max_diff(got, want) < 1e-6);
    nb_module_free(m);
    nb_scope_end(s);
}

static void test_config_errors(void **state) {
    (void)state;
    static const struct {
        const char *json, *want;
    } cases[] = {
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernel\": \"x\"}]}",
          "nb_nn_from_config: layer 0 (conv2d): field \"kernel\" must be a positive integer, got \"x\"" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"relu\"}, {\"type\": \"conv2d\", \"out\": 32, \"kernel\": 0}]}",
          "nb_nn_from_config: layer 1 (conv2d): field \"kernel\" must be a positive integer, got 0" },
        { "{\"input\": [1, 28], \"layers\": [{\"type\": \"conv1d\", \"out\": 32, \"kernel\": [3, 5]}]}",
          "layer 0 (conv1d): field \"kernel\" must be a positive integer (conv1d has one axis), got [3,5]" },
        { "{\"input\": [1, 8, 8, 8], \"layers\": [{\"type\": \"conv3d\", \"out\": 2, \"kernel\": 3, \"stride\": [1, 2]}]}",
          "layer 0 (conv3d): field \"stride\" must be a positive integer (nb_nn_conv3d takes one value for all three axes), got [1,2]" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernel\": [3]}]}",
          "layer 0 (conv2d): field \"kernel\" must be a positive integer or [height, width] of positive integers (at most "
          "2147483647), got [3]" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernel\": 3, \"stride\": [1, 0]}]}",
          "layer 0 (conv2d): field \"stride\" must be a positive integer or [height, width] of positive integers" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernel\": 3, \"dilation\": [2, \"x\"]}]}",
          "layer 0 (conv2d): field \"dilation\" must be a positive integer or [height, width] of positive integers" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernel\": 3, \"padding\": [1, -1]}]}",
          "layer 0 (conv2d): field \"padding\" must be a non-negative integer or [height, width] of non-negative integers" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernel\": 3, \"padding\": [1, 2, 3]}]}",
          "layer 0 (conv2d): field \"padding\" must be a non-negative integer or [height, width] of non-negative integers" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"stride\": [1, 2], "
          "\"padding\": \"same\"}]}", "layer 0 (conv2d): field \"padding\" \"same\" needs stride 1 (as torch), got stride 2 on one axis" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": [3, 4], \"padding\": \"same\"}]}",
          "layer 0 (conv2d): field \"padding\" \"same\" needs an odd kernel (dilation x (kernel - 1) even), got kernel 4" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding_mode\": \"mirror\"}]}",
          "layer 0 (conv2d): field \"padding_mode\" must be \"zeros\", \"reflect\", \"replicate\" or \"circular\", got \"mirror\"" },
        { "{\"input\": [1, 28], \"layers\": [{\"type\": \"conv1d\", \"out\": 8, \"kernel\": 3, \"padding_mode\": 1}]}",
          "layer 0 (conv1d): field \"padding_mode\" must be \"zeros\", \"reflect\", \"replicate\" or \"circular\", got 1" },
        { "{\"input\": [1, 3, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": 3, "
          "\"padding_mode\": \"reflect\"}]}",
          "layer 0 (conv2d): field \"padding_mode\" \"reflect\" needs the padding below the input size: padding 3, input [1, 3, 8] per sample" },
        { "{\"input\": [1, 3], \"layers\": [{\"type\": \"conv1d\", \"out\": 8, \"kernel\": 3, \"padding\": 4, "
          "\"padding_mode\": \"circular\"}]}",
          "layer 0 (conv1d): field \"padding_mode\" \"circular\" needs the padding at most the input size: padding 4, input [1, 3] per sample" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"conv1d\", \"out\": 8, \"kernel\": 3}]}",
          "layer 0 (conv1d): expects [channels, length] per sample, got [3, 8, 8]" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"conv3d\", \"out\": 8, \"kernel\": 3}]}",
          "layer 0 (conv3d): expects [channels, depth, height, width] per sample, got [3, 8, 8]" },
        { "{\"input\": [3, 4, 8, 8], \"layers\": [{\"type\": \"conv3d\", \"out\": 8, \"kernel\": 5}]}",
          "layer 0 (conv3d): kernel 5 is larger than the padded input: input [3, 4, 8, 8] per sample, padding 0" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 32, \"kernal\": 5}]}",
          "nb_nn_from_config: layer 0 (conv2d): unknown field \"kernal\" (conv2d takes: out,kernel,stride,padding,dilation,groups,bias,"
          "padding_mode)" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"lstm\", \"hidden\": 8}]}",
          "nb_nn_from_config: layer 0 (lstm): expects [time, features] per sample, got [1, 28, 28]" },
        { "{\"input\": [7, 5], \"layers\": [{\"type\": \"rnn\", \"hidden\": 8, \"nonlinearity\": \"gelu\"}]}",
          "layer 0 (rnn): field \"nonlinearity\" must be \"tanh\" or \"relu\", got \"gelu\"" },
        { "{\"input\": [7, 5], \"layers\": [{\"type\": \"gru\", \"hidden\": 8, \"nonlinearity\": \"relu\"}]}",
          "layer 0 (gru): unknown field \"nonlinearity\"" },
        { "{\"input\": [7, 5], \"layers\": [{\"type\": \"lstm\"}]}", "layer 0 (lstm): missing required field \"hidden\"" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"relu\", \"inplace\": true}]}",
          "layer 0 (relu): unknown field \"inplace\" (relu takes no fields besides \"type\")" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"flatten\"}, {\"type\": \"convv2d\"}]}",
          "nb_nn_from_config: layer 1 (convv2d): unknown type \"convv2d\" (known: linear, conv1d, conv2d, conv3d," },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"flatten\"}, {\"type\": \"linear\"}]}",
          "nb_nn_from_config: layer 1 (linear): missing required field \"out\"" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3}, {\"type\": \"linear\", \"out\": 10}]}",
          "nb_nn_from_config: layer 1 (linear): expects flat features, but its input is [8, 26, 26] per sample (from a convolution "
          "or pooling): add {\"type\": \"flatten\"}" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"flatten\"}, {\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3}]}",
          "layer 1 (conv2d): expects [channels, height, width] per sample, got flat features [784]" },
        { "{\"input\": [28, 28], \"layers\": [{\"type\": \"max_pool2d\", \"kernel\": 2}]}",
          "layer 0 (max_pool2d): expects [channels, height, width] per sample, got [28, 28]: give the input a channel axis, as [1, 28, 28]" },
        { "{\"input\": [1, 4, 4], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 5}]}",
          "layer 0 (conv2d): kernel 5 is larger than the padded input: input [1, 4, 4] per sample, padding 0" },
        { "{\"input\": [1, 4, 4], \"layers\": [{\"type\": \"avg_pool2d\", \"kernel\": 7, \"padding\": 1}]}",
          "layer 0 (avg_pool2d): kernel 7 is larger than the padded input" },
        { "{\"input\": [1, 8, 8], \"layers\": [{\"type\": \"max_pool2d\", \"kernel\": 2, \"padding\": 2}]}",
          "layer 0 (max_pool2d): field \"padding\" must be at most half the kernel (1), got 2" },
        { "{\"input\": [1, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"stride\": 2, \"padding\": \"same\"}]}",
          "layer 0 (conv2d): field \"padding\" \"same\" needs stride 1" },
        { "{\"input\": [1, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 2, \"padding\": \"same\"}]}",
          "layer 0 (conv2d): field \"padding\" \"same\" needs an odd kernel" },
        { "{\"input\": [1, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": \"full\"}]}",
          "layer 0 (conv2d): field \"padding\" must be a non-negative integer, [height, width] of them, \"same\" or \"valid\", "
          "got \"full\"" },
        { "{\"input\": [1, 8], \"layers\": [{\"type\": \"conv1d\", \"out\": 8, \"kernel\": 3, \"padding\": true}]}",
          "layer 0 (conv1d): field \"padding\" must be a non-negative integer, \"same\" or \"valid\", got true" },
        { "{\"input\": [1, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"padding\": -1}]}",
          "layer 0 (conv2d): field \"padding\" must be a non-negative integer, got -1" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"groups\": 2}]}",
          "layer 0 (conv2d): field \"groups\" (2) must divide the input channels (3) and \"out\" (8)" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 8, \"kernel\": 3, \"bias\": \"yes\"}]}",
          "layer 0 (conv2d): field \"bias\" must be true or false, got \"yes\"" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 3000000000, \"kernel\": 3}]}",
          "layer 0 (conv2d): field \"out\" is too large: 3000000000 (at most 2147483647)" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 2.5, \"kernel\": 3}]}",
          "layer 0 (conv2d): field \"out\" must be a positive integer, got 2.5" },
        { "{\"input\": [10], \"layers\": [{\"type\": \"dropout\", \"p\": 1.5}]}",
          "layer 0 (dropout): field \"p\" must be a number in [0, 1), got 1.5" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"adaptive_avg_pool2d\", \"out\": [2]}]}",
          "layer 0 (adaptive_avg_pool2d): field \"out\" must be a positive integer or [height, width] of positive integers, got [2]" },
        { "{\"input\": [3, 8, 8, 2, 2], \"layers\": [{\"type\": \"batch_norm\"}]}",
          "layer 0 (batch_norm): expects [features], [channels, length] or [channels, height, width] per sample, got [3, 8, 8, 2, 2]" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"relu\"}, 5]}",
          "nb_nn_from_config: layer 1: expected an object such as {\"type\": \"relu\"}, got 5" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"out\": 5}]}", "nb_nn_from_config: layer 0: missing required field \"type\"" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": 5}]}", "nb_nn_from_config: layer 0: field \"type\" must be a string, got 5" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"residual\"}]}", "layer 0 (residual): missing required field \"layers\"" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"residual\", \"layers\": []}]}",
          "layer 0 (residual): field \"layers\" must be a non-empty list of layers, got []" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"relu\"}, {\"type\": \"residual\", \"layers\": [{\"type\": \"conv2d\", "
          "\"out\": 4, \"kernel\": 3, \"stirde\": 2}]}]}",
          "nb_nn_from_config: layer 1 (residual), layer 0 (conv2d): unknown field \"stirde\"" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"residual\", \"activation\": \"relu6\", \"layers\": [{\"type\": \"relu\"}]}]}",
          "layer 0 (residual): field \"activation\" must be \"relu\", \"gelu\", \"silu\", \"tanh\", \"sigmoid\", \"mish\", "
          "\"hardswish\", \"hardsigmoid\", or \"none\", got \"relu6\"" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"leaky_relu\", \"negative_slope\": \"small\"}]}",
          "layer 0 (leaky_relu): field \"negative_slope\" must be a number, got \"small\"" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"elu\", \"slope\": 1}]}",
          "layer 0 (elu): unknown field \"slope\" (elu takes: alpha)" },
        { "{\"input\": [4], \"layers\": [{\"type\": \"softplus\", \"beta\": true}]}",
          "layer 0 (softplus): field \"beta\" must be a number, got true" },
        { "{\"input\": [3, 5, 5], \"layers\": [{\"type\": \"prelu\", \"num_parameters\": 4}]}",
          "layer 0 (prelu): field \"num_parameters\" must be 1 or the channels (the first axis of the sample), got 4 for [3, 5, 5]" },
        { "{\"input\": [3], \"layers\": [{\"type\": \"prelu\", \"num_parameters\": 0}]}",
          "layer 0 (prelu): field \"num_parameters\" must be a positive integer, got 0" },
        { "{\"input\": [3], \"layers\": [{\"type\": \"identity\", \"x\": 0}]}",
          "layer 0 (identity): unknown field \"x\" (identity takes no fields besides \"type\")" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"residual\", \"layers\": [{\"type\": \"flatten\"}]}]}",
          "layer 0 (residual): the body changes [3, 8, 8] to [192] per sample; a projection shortcut needs" },
        { "{\"input\": [3, 8, 8], \"layers\": [{\"type\": \"residual\", \"layers\": [{\"type\": \"conv2d\", \"out\": 4, \"kernel\": 3, "
          "\"padding\": 2}]}]}",
          "layer 0 (residual): the body changes [3, 8, 8] to [4, 10, 10] per sample, which no 1x1 strided convolution shortcut matches" },
        { "{\"input\": [1, 28, 28],\n \"layers\": [{\"type\": \"relu\"},]}", "nb_nn_from_config: invalid JSON at line 2, column" },
        { "", "nb_nn_from_config: invalid JSON at line 1" },
        { "{\"input\": [1, 28, 28], \"layers\": [{\"type\": \"relu\", \"type\": \"tanh\"}]}", "invalid JSON" },
        { "{\"input\": [1, 28, 28], \"layers\": []}", "nb_nn_from_config: the list of layers is empty" },
        { "{\"input\": [1, 28, 28]}", "nb_nn_from_config: missing required field \"layers\"" },
        { "{\"input\": [1, 28, 28], \"layers\": {\"type\": \"relu\"}}", "nb_nn_from_config: field \"layers\" must be a list of layers" },
        { "{\"input\": [1, 28, 28], \"layer\": []}", "nb_nn_from_config: unknown top-level field \"layer\"" },
        { "{\"input\": [0, 28], \"layers\": [{\"type\": \"relu\"}]}", "nb_nn_from_config: field \"input\" must be one sample's shape" },
        { "{\"input\": \"mnist\", \"layers\": [{\"type\": \"relu\"}]}", "nb_nn_from_config: field \"input\" must be" },
        { "{\"layers\": [{\"type\": \"relu\"}]}", "nb_nn_from_config: no input shape" },
        { "[{\"type\": \"relu\"}]", "nb_nn_from_config: no input shape" },
        { "42", "nb_nn_from_config: expected an object" },
        { "{\"input\": [3000000, 3000000, 3000000], \"layers\": [{\"type\": \"relu\"}]}", "field \"input\" [3000000,3000000,3000000] is too large" },
        { "{\"input\": [4, 4000000, 4000000], \"layers\": [{\"type\": \"conv2d\", \"out\": 2000000000, \"kernel\": 1}]}",
          "layer 0 (conv2d): output [2000000000, 4000000, 4000000] per sample is too large" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_error_clear();
        nb_module *m = from(cases[i].json);
        if (m) fail_msg("built %s", cases[i].json);
        const char *e = nb_error();
        if (!e || !strstr(e, cases[i].want)) fail_msg("%s:\n  expected error containing %s\n  got %s", cases[i].json, cases[i].want, e ? e : "(none)");
        nb_error_clear();
    }
    /* the caller's sample shape against the config's */
    assert_null(nb_nn_from_config(nb_nn_config_builtin("cnn"), NB_SHAPE(3, 32, 32)));
    ASSERT_ERROR_CONTAINS("nb_nn_from_config: the sample shape [3, 32, 32] differs from the config's \"input\" [1, 28, 28]");
    assert_null(nb_nn_from_config("[{\"type\": \"relu\"}]", NB_SHAPE(3, 0)));
    ASSERT_ERROR_CONTAINS("nb_nn_from_config: sample shape [3, 0] must have positive sizes");
    assert_null(nb_nn_from_config(NULL, NB_SHAPE(3)));
    ASSERT_ERROR_CONTAINS("nb_nn_from_config: config text is NULL");
    /* an earlier error the caller did not clear is kept, and does not fail a good config */
    nb_error_clear();
    assert_null(from("{\"input\": [1], \"layers\": [{\"type\": \"bogus\"}]}"));
    nb_module *m = from(nb_nn_config_builtin("mlp"));
    assert_non_null(m);
    ASSERT_ERROR_CONTAINS("layer 0 (bogus)");
    nb_module_free(m);
}

/* The activations' fields reach the modules: a value on each side of each kink, by hand. */
/* Keras's names (Conv2D, filters, kernel_size, MaxPooling2D, pool_size, Dense, units, rate,
   activation) build the same model as ours; softmax on the logits is refused with the reason. */
static void test_keras_names(void **state) {
    (void)state;
    nb_module *keras = from("{\"input\": [1, 8, 8], \"layers\": [{\"type\": \"Conv2D\", \"filters\": 4, \"kernel_size\": 3, "
                            "\"padding\": \"same\", \"activation\": \"relu\"}, {\"type\": \"MaxPooling2D\", \"pool_size\": 2}, "
                            "{\"type\": \"Flatten\"}, {\"type\": \"Dropout\", \"rate\": 0.25}, "
                            "{\"type\": \"Dense\", \"units\": 10, \"use_bias\": false}]}");
    nb_module *ours = from("{\"input\": [1, 8, 8], \"layers\": [{\"type\": \"conv2d\", \"out\": 4, \"kernel\": 3, "
                           "\"padding\": \"same\"}, {\"type\": \"relu\"}, {\"type\": \"max_pool2d\", \"kernel\": 2}, "
                           "{\"type\": \"flatten\"}, {\"type\": \"dropout\", \"p\": 0.25}, "
                           "{\"type\": \"linear\", \"out\": 10, \"bias\": false}]}");
    assert_non_null(keras);
    assert_non_null(ours);
    char *a = nb_module_summary(keras, NB_SHAPE(1, 8, 8)), *b = nb_module_summary(ours, NB_SHAPE(1, 8, 8));
    assert_non_null(a);
    assert_string_equal(a, b);
    free(a);
    free(b);
    nb_module_free(keras);
    nb_module_free(ours);
    nb_error_clear();
    assert_null(from("{\"input\": [4], \"layers\": [{\"type\": \"dense\", \"units\": 3, \"activation\": \"softmax\"}]}"));
    assert_non_null(strstr(nb_error(), "layer 0 (dense, as linear): activation \"softmax\": the loss takes the raw outputs"));
}

static void test_activation_fields(void **state) {
    (void)state;
    static const struct {
        const char *json;
        double y[3]; /* at x = -1, 0.5, 2 */
    } cases[] = {
        { "[{\"type\": \"leaky_relu\", \"negative_slope\": 0.2}]", { -0.2, 0.5, 2 } },
        { "[{\"type\": \"leaky_relu\"}]", { -0.01, 0.5, 2 } },
        { "[{\"type\": \"elu\", \"alpha\": 2}]", { -1.2642411176571153, 0.5, 2 } },
        { "[{\"type\": \"softplus\", \"beta\": 2, \"threshold\": 3}]", { 0.06346400552148625, 0.6566308437591114, 2 } },
        { "[{\"type\": \"prelu\", \"init\": 0.5}]", { -0.5, 0.5, 2 } },
        { "[{\"type\": \"hardsigmoid\"}]", { 1.0 / 3, 3.5 / 6, 5.0 / 6 } },
        { "[{\"type\": \"identity\"}]", { -1, 0.5, 2 } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_module *m = nb_nn_from_config(cases[i].json, NB_SHAPE(3));
        if (!m) fail_msg("%s: %s", cases[i].json, nb_error());
        nb_scope *s = nb_scope_begin();
        nb_tensor *y = nb_forward(m, nb_from_data((float[]){ -1, 0.5f, 2 }, NB_SHAPE(1, 3), NB_F32));
        float got[3] = { 0 };
        assert_int_equal(nb_copy_to(y, got, sizeof got), 0);
        for (int k = 0; k < 3; k++)
            if (fabs(got[k] - cases[i].y[k]) > 1e-6) fail_msg("%s: y[%d] is %.9g, want %.9g", cases[i].json, k, got[k], cases[i].y[k]);
        nb_scope_end(s);
        nb_module_free(m);
    }
}

static void test_summary(void **state) {
    (void)state;
    nb_module *m = from(nb_nn_config_builtin("cnn"));
    assert_non_null(m);
    assert_true(m->training);
    assert_true(nb_is_grad_enabled());
    char *s = nb_module_summary(m, NB_SHAPE(1, 28, 28));
    if (!s) fail_msg("%s", nb_error());
    static const char *rows[] = {
        "0 (Conv2d)", "[-1, 32, 28, 28]", "832",        "1 (ReLU)",    "2 (MaxPool2d)", "[-1, 32, 14, 14]",
        "3 (Conv2d)", "[-1, 64, 14, 14]", "51,264",     "5 (MaxPool2d)", "[-1, 64, 7, 7]", "6 (Flatten)",
        "[-1, 3136]", "7 (Linear)",       "3,212,288",  "[-1, 1024]",  "9 (Dropout)",   "10 (Linear)",
        "[-1, 10]",   "10,250",           "Model: \"Sequential\"", "input", "[-1, 1, 28, 28]",
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!strstr(s, rows[i])) fail_msg("summary lacks \"%s\":\n%s", rows[i], s);
    int64_t total = nb_module_num_params(m);
    assert_int_equal(total, 3274634);
    char want[128];
    snprintf(want, sizeof want, "Total params: 3,274,634 (%.2f MiB)", (double)total * 4 / 1048576.0);
    if (!strstr(s, want)) fail_msg("summary lacks \"%s\":\n%s", want, s);
    assert_non_null(strstr(s, "Trainable params: 3,274,634"));
    assert_non_null(strstr(s, "Non-trainable params: 0"));
    assert_non_null(strstr(s, "Parameter bytes: 13,098,536"));
    free(s);
    assert_true(m->training); /* modes restored */
    assert_true(nb_is_grad_enabled());
    nb_module_free(m);

    /* batch norm: eval mode (running statistics untouched), no graph, grad mode off restored */
    m = from(nb_nn_config_builtin("resnet"));
    assert_non_null(m);
    nb_module_train(m, false);
    bool prev = nb_set_grad_enabled(false);
    s = nb_module_summary(m, NB_SHAPE(1, 28, 28));
    assert_non_null(s);
    assert_false(m->training);
    assert_false(nb_is_grad_enabled());
    nb_set_grad_enabled(prev);
    nb_module_train(m, true);
    free(s);
    s = nb_module_summary(m, NB_SHAPE(1, 28, 28));
    assert_non_null(s);
    assert_true(m->training);
    assert_int_equal((int)nb_item(nb_module_get(m, "1.num_batches_tracked")), 0);
    nb_scope *sc = nb_scope_begin();
    assert_true(nb_item(nb_sum_all(nb_module_get(m, "1.running_mean"))) == 0);
    nb_scope_end(sc);
    assert_null(nb_grad_of(nb_module_get(m, "0.weight")));
    assert_non_null(strstr(s, "4 (Residual)"));
    assert_non_null(strstr(s, "[-1, 128, 4, 4]"));
    assert_non_null(strstr(s, "7 (GlobalAvgPool2d)"));
    assert_non_null(strstr(s, "[-1, 128]"));
    char grouped[40], raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)nb_module_num_params(m));
    size_t len = strlen(raw), o = 0;
    for (size_t i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) grouped[o++] = ',';
        grouped[o++] = raw[i];
    }
    grouped[o] = 0;
    snprintf(want, sizeof want, "Total params: %s", grouped);
    if (!strstr(s, want)) fail_msg("summary lacks \"%s\":\n%s", want, s);
    free(s);

    /* a frozen parameter counts as non-trainable */
    nb_set_requires_grad(nb_module_get(m, "8.weight"), false);
    s = nb_module_summary(m, NB_SHAPE(1, 28, 28));
    assert_non_null(s);
    assert_non_null(strstr(s, "Non-trainable params: 1,280 (5.00 KiB)"));
    free(s);

    /* a forward that fails names the layer and the sample */
    assert_null(nb_module_summary(m, NB_SHAPE(3, 28, 28)));
    ASSERT_ERROR_CONTAINS("nb_module_summary: layer 0 (Conv2d) fails on input [-1, 3, 28, 28]: nb_nn_conv2d 0: expected input");
    assert_true(m->training);
    assert_true(nb_is_grad_enabled());
    nb_module_free(m);

    /* any other module is its own row */
    m = nb_nn_linear(6, 3);
    s = nb_module_summary(m, NB_SHAPE(6));
    assert_non_null(s);
    assert_non_null(strstr(s, "(model) (Linear)"));
    assert_non_null(strstr(s, "[-1, 3]"));
    assert_non_null(strstr(s, "Total params: 21 (84 B)"));
    free(s);
    assert_null(nb_module_summary(m, NB_SHAPE(5)));
    ASSERT_ERROR_CONTAINS("nb_module_summary: Linear fails on input [-1, 5]");
    nb_module_free(m);
    assert_null(nb_module_summary(NULL, NB_SHAPE(5)));
    ASSERT_ERROR_CONTAINS("nb_module_summary: module is NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_each_layer_type, clear_error_setup),
        cmocka_unit_test_setup(test_builtins_match_hand_built, clear_error_setup),
        cmocka_unit_test_setup(test_residual_names, clear_error_setup),
        cmocka_unit_test_setup(test_residual_forward_by_hand, clear_error_setup),
        cmocka_unit_test_setup(test_conv_fields, clear_error_setup),
        cmocka_unit_test_setup(test_config_errors, clear_error_setup),
        cmocka_unit_test_setup(test_activation_fields, clear_error_setup),
        cmocka_unit_test_setup(test_keras_names, clear_error_setup),
        cmocka_unit_test_setup(test_summary, clear_error_setup),
    };
    int failed = RUN_TESTS(tests);
    nb_empty_cache(); /* cached blocks back to the system, so LeakSanitizer sees only real leaks */
    return failed;
}
