/* The error handler of nb_set_error_handler fires exactly once per failing public call, with the
   text nb_error() then returns, in every area whose calls tell an inner function's error in their
   own terms (files, the compiler, ONNX, model configs, module hooks, the data pipeline); and a failure the library
   drops itself (a dynamic-batch probe) never reaches it. */
#include "test_util.h"
#include <unistd.h>

static int fired;
static char seen[2048];

static void count_errors(const char *msg, void *user) {
    (void)user;
    fired++;
    snprintf(seen, sizeof seen, "%s", msg);
}

static int handler_setup(void **state) {
    (void)state;
    nb_error_clear();
    fired = 0;
    seen[0] = 0;
    nb_set_error_handler(count_errors, NULL);
    return 0;
}

static int handler_teardown(void **state) {
    (void)state;
    nb_set_error_handler(NULL, NULL);
    nb_error_clear();
    return 0;
}

/* The call failed once: one handler call, with the final text, which contains want. */
#define ASSERT_TOLD_ONCE(want)                                                                                    \
    do {                                                                                                          \
        assert_non_null(nb_error());                                                                             \
        if (fired != 1) fail_msg("the handler fired %d times (last: \"%s\")", fired, seen);                    \
        assert_string_equal(seen, nb_error());                                                                   \
        if (!strstr(nb_error(), (want))) fail_msg("expected \"%s\" in \"%s\"", (want), nb_error());             \
        nb_error_clear();                                                                                         \
        fired = 0;                                                                                                \
    } while (0)

/* A file of the given bytes at a fresh path (malloc'ed). */
static char *temp_file(const char *suffix, const char *bytes, size_t n) {
    char *path = malloc(256);
    snprintf(path, 256, "/tmp/nabla_test_errors_%d_%s", (int)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(bytes, 1, n, f);
    fclose(f);
    return path;
}

static void test_files(void **state) {
    (void)state;
    char *npy = temp_file("bad.npy", "\x93NUMPY\x01\x00garbage", 16);
    assert_null(nb_load_npy(npy));
    ASSERT_TOLD_ONCE("nb_load_npy: '");
    assert_null(strstr(seen, "nb_npy_parse"));
    unlink(npy);
    free(npy);
#ifdef NABLA_WITH_JSON
    char *st = temp_file("bad.safetensors", "\x10\x00\x00\x00\x00\x00\x00\x00{not json}", 18);
    nb_module *m = nb_nn_linear(3, 2);
    assert_int_not_equal(nb_load_state_dict(m, st, (nb_load_opts){ 0 }), 0);
    ASSERT_TOLD_ONCE("nb_load_state_dict: ");
    assert_null(strstr(seen, "nb_safetensors_open"));
    nb_checkpoint ck = { .model = m };
    assert_int_not_equal(nb_checkpoint_load(&ck, st), 0);
    ASSERT_TOLD_ONCE("nb_checkpoint_load: ");
    nb_module_free(m);
    unlink(st);
    free(st);
#endif
}

static nb_tensor *fails_inside(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_matmul(in[0], in[0]); /* [2, 3] @ [2, 3] */
}

/* Views its input as [4, -1]: fine at batch 4, fails at the probes' other batch sizes. */
static nb_tensor *fixed_batch(nb_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return nb_relu(nb_view(in[0], NB_SHAPE(4, -1)));
}

static void test_compiler(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3), NB_F32);
    nb_compiled *c = nb_compile(fails_inside, NULL, (nb_graph_opts){ 0 });
    assert_null(nb_compiled_run(c, &x, 1));
    ASSERT_TOLD_ONCE("nb_compiled_run: the traced function returned NULL: nb_matmul");
    nb_compiled_free(c);
    /* the probes at other batch sizes fail; the call does not, and the handler never hears of them */
    nb_tensor *y = nb_randn(NB_SHAPE(4, 3), NB_F32);
    c = nb_compile(fixed_batch, NULL, (nb_graph_opts){ .dynamic_batch = true });
    assert_non_null(nb_compiled_run(c, &y, 1)); /* the scope's */
    assert_int_equal(fired, 0);
    assert_null(nb_error());
    nb_compiled_free(c);
    nb_scope_end(s);
}

/* ONNX and model configs: a corrupt file names its path once, a failing export names the
   function, a config layer and a summary name the layer, each heard once. */
static void test_onnx_and_config(void **state) {
    (void)state;
#ifdef NABLA_WITH_ONNX
    char *bad = temp_file("bad.onnx", "\x08\x07\x12\xff\xff garbage", 14);
    assert_null(nb_onnx_load(bad, (nb_onnx_load_opts){ 0 }));
    ASSERT_TOLD_ONCE(bad);
    unlink(bad);
    free(bad);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3), NB_F32);
    char path[128];
    snprintf(path, sizeof path, "/tmp/nabla_test_errors_%d.onnx", (int)getpid());
    assert_int_not_equal(nb_onnx_export_fn(fails_inside, NULL, &x, 1, path, (nb_onnx_export_opts){ 0 }), 0);
    ASSERT_TOLD_ONCE("nb_onnx_export_fn: ");
    assert_null(strstr(seen, "nb_compiled_run"));
    assert_int_equal(access(path, F_OK), -1); /* nothing written */
    nb_scope_end(s);
#endif
#ifdef NABLA_WITH_JSON
    assert_null(nb_nn_from_config("{\"layers\": [{\"type\": \"linear\", \"out\": -3}]}", NB_SHAPE(1, 4)));
    assert_non_null(nb_error());
    if (fired != 1) fail_msg("the handler fired %d times (last: \"%s\")", fired, seen);
    assert_string_equal(seen, nb_error());
    nb_error_clear();
    fired = 0;
#endif
    nb_module *seq = nb_nn_sequential(nb_nn_linear(3, 2), nb_nn_linear(5, 1), NULL);
    assert_null(nb_module_summary(seq, NB_SHAPE(1, 3)));
    ASSERT_TOLD_ONCE("nb_module_summary: layer 1 (");
    nb_module_free(seq);
}

static nb_tensor *failing_hook(nb_module *m, nb_tensor *grad_input, nb_tensor *grad_output, void *ctx) {
    (void)m, (void)grad_input, (void)ctx;
    return nb_matmul(grad_output, grad_output); /* [1, 2] @ [1, 2] */
}

static void test_module_hooks(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_module *m = nb_nn_linear(3, 2);
    assert_true(nb_module_add_backward_hook(m, failing_hook, NULL) >= 0);
    nb_tensor *x = nb_set_requires_grad(nb_randn(NB_SHAPE(1, 3), NB_F32), true);
    nb_tensor *loss = nb_sum_all(nb_forward(m, x));
    assert_int_not_equal(nb_backward(loss), 0);
    ASSERT_TOLD_ONCE("backward hook (handle");
    assert_non_null(strstr(seen, "nb_matmul"));
    nb_scope_end(s);
    nb_module_free(m);
}

static int64_t bad_len(void *self) { (void)self; return 8; }

static int bad_get(void *self, int64_t index, uint64_t key, nb_batch *out) {
    (void)self, (void)key;
    if (index < 5) {
        out->x = nb_zeros(NB_SHAPE(3), NB_F32);
        out->y = nb_zeros(NB_SHAPE(1), NB_I64);
        return 0;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_matmul(nb_zeros(NB_SHAPE(2, 3), NB_F32), nb_zeros(NB_SHAPE(2, 3), NB_F32));
    nb_scope_end(s);
    return t ? 0 : -1;
}

static const nb_dataset_class BAD = { .name = "bad", .len = bad_len, .get = bad_get };

static void test_loader(void **state) {
    (void)state;
    for (int workers = 0; workers <= 2; workers += 2) {
        nb_dataset *ds = nb_dataset_new(&BAD, NULL);
        assert_non_null(ds);
        nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 4, .num_workers = workers });
        nb_dataset_free(ds);
        assert_non_null(l);
        nb_batch b;
        assert_true(nb_data_loader_next(l, &b));
        assert_int_equal(fired, 0);
        assert_false(nb_data_loader_next(l, &b));
        assert_true(nb_data_loader_failed(l));
        ASSERT_TOLD_ONCE("nb_matmul");
        nb_data_loader_free(l);
    }
    /* the labels are read on a second thread: their error is told once, on the caller's */
    char *img = temp_file("images.idx", "\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02", 10);
    assert_null(nb_data_idx(img, "/nonexistent/nabla-labels.idx"));
    ASSERT_TOLD_ONCE("nabla-labels.idx");
    unlink(img);
    free(img);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_files, handler_setup, handler_teardown),
        cmocka_unit_test_setup_teardown(test_compiler, handler_setup, handler_teardown),
        cmocka_unit_test_setup_teardown(test_onnx_and_config, handler_setup, handler_teardown),
        cmocka_unit_test_setup_teardown(test_module_hooks, handler_setup, handler_teardown),
        cmocka_unit_test_setup_teardown(test_loader, handler_setup, handler_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
