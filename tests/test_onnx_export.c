/* ONNX export's errors: bad arguments, an op with no ONNX form, an in-place op, a graph that
   changes with the batch size; a failed export leaves the file that was there. (The exported
   numbers are checked against ONNX Runtime by tests/onnx_export_check.py.) */
#include "test_util.h"
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int setup(void **state) {
    (void)state;
    nb_error_clear();
    return 0;
}

static const char *path_in(const char *name) {
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static nb_tensor *fn_relu(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_relu(in[0]);
}

static nb_tensor *fn_rand(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_add(in[0], nb_rand(nb_shape_of(in[0]), NB_F32));
}

static nb_tensor *fn_null(nb_tensor *const *in, int n, void *ctx) {
    (void)in; (void)n; (void)ctx;
    nb_error_clear();
    return NULL;
}

/* A graph that records one op more at odd batch sizes. */
static nb_tensor *fn_batch_branch(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *y = nb_relu(in[0]);
    return nb_dim(in[0], 0) % 2 ? nb_neg(y) : y;
}

/* A product whose scalar is the batch size: not expressible with a fixed constant. */
static nb_tensor *fn_batch_scalar(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_mul_scalar(in[0], (double)nb_dim(in[0], 0));
}

/* x[i] += ones, an index_put that accumulates. */
static nb_tensor *fn_index_add(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    static const int64_t i[3] = { 0, 1, 0 };
    nb_tensor *idx = nb_from_data(i, NB_SHAPE(3), NB_I64);
    return nb_index_put(in[0], &idx, 1, nb_ones(NB_SHAPE(3), NB_F32), true);
}

static void test_export_bad_arguments(void **state) {
    (void)state;
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *in[1] = { x };
    assert_int_equal(nb_onnx_export_fn(fn_relu, NULL, in, 1, NULL, (nb_onnx_export_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("nb_onnx_export_fn: needs a function");
    assert_int_equal(nb_onnx_export_fn(fn_relu, NULL, in, 0, path_in("a.onnx"), (nb_onnx_export_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("1 to 32 example inputs");
    assert_int_equal(nb_onnx_export_fn(fn_relu, NULL, in, 1, path_in("a.onnx"), (nb_onnx_export_opts){ .opset = 9 }), -1);
    ASSERT_ERROR_CONTAINS("opset 9 is not supported (11 to 26)");
    assert_int_equal(nb_onnx_export(NULL, in, 1, path_in("a.onnx"), (nb_onnx_export_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("must not be NULL");
    nb_tensor *s = nb_scalar(1);
    nb_tensor *ins[1] = { s };
    assert_int_equal(nb_onnx_export_fn(fn_relu, NULL, ins, 1, path_in("a.onnx"), (nb_onnx_export_opts){ .dynamic_batch = true }), -1);
    ASSERT_ERROR_CONTAINS("dynamic_batch needs a batch axis, but input 0 is 0-d");
    assert_int_equal(nb_onnx_export_fn(fn_null, NULL, in, 1, path_in("a.onnx"), (nb_onnx_export_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("nb_onnx_export_fn: the traced function returned NULL");
    assert_int_equal(access(path_in("a.onnx"), F_OK), -1);
}

static void test_export_no_onnx_form(void **state) {
    (void)state;
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *in[1] = { x };
    assert_int_equal(nb_onnx_export_fn(fn_rand, NULL, in, 1, path_in("r.onnx"), (nb_onnx_export_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("op rand (node 0) has no ONNX form");
    /* ScatterND adds repeated indices' values only from opset 16 */
    assert_int_equal(nb_onnx_export_fn(fn_index_add, NULL, in, 1, path_in("i.onnx"), (nb_onnx_export_opts){ .opset = 15 }), -1);
    ASSERT_ERROR_CONTAINS("with accumulate needs ScatterND's reduction, opset 16 or newer (exporting at opset 15)");
    assert_int_equal(access(path_in("i.onnx"), F_OK), -1);
    assert_int_equal(nb_onnx_export_fn(fn_index_add, NULL, in, 1, path_in("i.onnx"), (nb_onnx_export_opts){ .opset = 16 }), 0);
}

static void test_export_batch_dependence(void **state) {
    (void)state;
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *in[1] = { x };
    nb_onnx_export_opts dyn = { .dynamic_batch = true };
    assert_int_equal(nb_onnx_export_fn(fn_batch_branch, NULL, in, 1, path_in("b.onnx"), dyn), -1);
    ASSERT_ERROR_CONTAINS("records different ops at batch 2 and 5");
    assert_int_equal(nb_onnx_export_fn(fn_batch_scalar, NULL, in, 1, path_in("b.onnx"), dyn), -1);
    ASSERT_ERROR_CONTAINS("op mul_scalar (node 0): the scalar changes with the batch size");
    /* at a fixed batch size both are plain graphs */
    assert_int_equal(nb_onnx_export_fn(fn_batch_scalar, NULL, in, 1, path_in("b.onnx"), (nb_onnx_export_opts){ 0 }), 0);
    assert_int_equal(access(path_in("b.onnx"), F_OK), 0);
}

/* A failed export leaves the old file as it was; a good one replaces it whole. */
static void test_export_keeps_old_file(void **state) {
    (void)state;
    const char *p = path_in("keep.onnx");
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fputs("old contents", f);
    fclose(f);
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *in[1] = { x };
    assert_int_equal(nb_onnx_export_fn(fn_rand, NULL, in, 1, p, (nb_onnx_export_opts){ 0 }), -1);
    nb_error_clear();
    char *text = read_whole_file(p);
    assert_non_null(text);
    assert_string_equal(text, "old contents");
    free(text);
    assert_int_equal(nb_onnx_export_fn(fn_relu, NULL, in, 1, p, (nb_onnx_export_opts){ 0 }), 0);
    text = read_whole_file(p);
    assert_non_null(text);
    assert_true(strcmp(text, "old contents") != 0);
    free(text);
    /* a folder that does not exist */
    assert_int_equal(nb_onnx_export_fn(fn_relu, NULL, in, 1, "/nonexistent-dir/x.onnx", (nb_onnx_export_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("/nonexistent-dir/x.onnx");
}

/* The module's mode comes back after the export, which traced it in eval mode. */
/* Quantise to i8, add an i8 tensor made outside (an initializer), dequantise: the Cast nodes and
   the initializer are ONNX INT8, and nabla's importer runs the file to the same values. */
static nb_tensor *fn_int8(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor *q = nb_cast(nb_round(nb_mul_scalar(in[0], 10)), NB_I8);
    return nb_mul_scalar(nb_cast(nb_add(q, ctx), NB_F32), 0.1);
}

static void test_export_int8(void **state) {
    (void)state;
    float xv[6] = { 0.31f, -2.5f, 9.9f, -1.04f, 0.0f, 12.7f };
    nb_tensor *x = nb_from_data(xv, NB_SHAPE(2, 3), NB_F32);
    nb_tensor *c = nb_from_data((int8_t[]){ -100, 0, 27 }, NB_SHAPE(3), NB_I8);
    nb_tensor *want = fn_int8(&x, 1, c);
    if (nb_onnx_export_fn(fn_int8, c, &x, 1, path_in("q.onnx"), (nb_onnx_export_opts){ 0 }) != 0) fail_msg("%s", nb_error());
    nb_onnx_model *m = nb_onnx_load(path_in("q.onnx"), (nb_onnx_load_opts){ 0 });
    assert_non_null(m);
    char *sum = nb_onnx_summary(m);
    assert_non_null(strstr(sum, "Cast"));
    free(sum);
    nb_tensor *y = NULL;
    assert_int_equal(nb_onnx_run(m, &x, 1, &y, 1), 0);
    float a[6], b[6];
    assert_int_equal(nb_copy_to(want, a, sizeof a), 0);
    assert_int_equal(nb_copy_to(y, b, sizeof b), 0);
    for (int i = 0; i < 6; i++) assert_true(a[i] == b[i]);
    assert_true(b[2] == nb_item(nb_mul_scalar(nb_full(NB_SHAPE(), 126, NB_F32), 0.1)) && a[5] == b[5]); /* 99 + 27, 127 + 27 wraps */
    nb_release(y);
    nb_onnx_free(m);
    assert_null(nb_error());
}

static void test_export_restores_mode(void **state) {
    (void)state;
    nb_module *m = nb_nn_sequential(nb_nn_linear(3, 4), nb_nn_dropout(0.5), nb_nn_batch_norm1d(4), NULL);
    assert_non_null(m);
    nb_module_train(m, true);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *in2[2] = { x, x };
    assert_int_equal(nb_onnx_export(m, in2, 2, path_in("m.onnx"), (nb_onnx_export_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("a module takes one input, got 2");
    assert_int_equal(nb_onnx_export(m, in2, 1, path_in("m.onnx"), (nb_onnx_export_opts){ .dynamic_batch = true }), 0);
    assert_true(m->training);
    assert_true(nb_module_get_child(m, "1")->training);
    nb_module_free(m);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/nabla-onnx-export-%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_export_bad_arguments, setup),
        cmocka_unit_test_setup(test_export_no_onnx_form, setup),
        cmocka_unit_test_setup(test_export_batch_dependence, setup),
        cmocka_unit_test_setup(test_export_keeps_old_file, setup),
        cmocka_unit_test_setup(test_export_restores_mode, setup),
        cmocka_unit_test_setup(test_export_int8, setup),
    };
    nb_scope *s = nb_scope_begin();
    int rc = RUN_TESTS(tests);
    nb_scope_end(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return rc;
}
