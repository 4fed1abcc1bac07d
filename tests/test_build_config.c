/* What this build was configured with (CMake passes the NABLA_WITH_* options): a feature built
   in works, one left out fails with an error that names the missing library and the option (MPI:
   a process not started by mpirun is a world of one either way, and a build without MPI
   refuses to join a launcher's world of several; jansson: safetensors, state dicts, model configs,
   sharded checkpoints and Hugging Face files); and
   matrix products (OpenBLAS or nabla's own GEMM) match a plain double-precision loop over odd
   shapes and every transpose. Runs in every configuration, the aarch64 one included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nabla.h>

static inline bool error_has(const char *what) {
    const char *e = nb_error();
    return e && strstr(e, what);
}

static double max_abs_diff(nb_tensor *a, nb_tensor *b) { return nb_item(nb_max(nb_flatten(nb_abs(nb_sub(a, b)), 0, -1), 0, false)); }

/* a one-byte IDX file (magic 0x00000801, one item: 7), gzipped by zlib at level 9 */
static const uint8_t idx_gz[] = { 0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60, 0xe0, 0x60, 0x64,
                                0x60, 0x60, 0x60, 0x64, 0x07, 0x00, 0x8e, 0x2d, 0xc5, 0x99, 0x09, 0x00, 0x00, 0x00 };

static void test_gzip_idx(void **state) {
    (void)state;
    nb_tensor *t = nb_parse_idx(idx_gz, sizeof idx_gz, "one.idx.gz");
#ifdef NABLA_WITH_ZLIB
    if (!t) fail_msg("gzip IDX refused: %s", nb_error());
    assert_int_equal(nb_numel(t), 1);
    assert_true(nb_item(t) == 7.0);
    nb_release(t);
#else
    assert_null(t);
    if (!error_has("built without zlib") || !error_has("NABLA_WITH_ZLIB")) fail_msg("error: %s", nb_error());
#endif
    nb_error_clear();
}

/* a 1x1 8-bit grey PNG holding 200 */
static const uint8_t png1[] = { 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
                                0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x3a,
                                0x7e, 0x9b, 0x55, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x38,
                                0x01, 0x00, 0x00, 0xca, 0x00, 0xc9, 0x99, 0xca, 0x5d, 0x7e, 0x00, 0x00, 0x00, 0x00, 0x49,
                                0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82 };

static void test_png(void **state) {
    (void)state;
    nb_tensor *t = nb_decode_png(png1, sizeof png1, "one.png");
#ifdef NABLA_WITH_PNG
    if (!t) fail_msg("PNG refused: %s", nb_error());
    assert_int_equal(nb_numel(t), 1);
    assert_true(nb_item(t) == 200.0);
    nb_release(t);
#else
    assert_null(t);
    if (!error_has("built without libpng") || !error_has("NABLA_WITH_PNG")) fail_msg("error: %s", nb_error());
#endif
    nb_error_clear();
}

static nb_tensor *fused(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_relu(nb_add(nb_mul(in[0], in[0]), nb_exp(in[0])));
}

static void test_jit(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_compiled *c = nb_compile(fused, NULL, (nb_graph_opts){ 0 });
    nb_tensor *x = nb_randn(NB_SHAPE(64, 33), NB_F32);
    nb_tensor *y = nb_compiled_run(c, &x, 1);
    if (!y) fail_msg("compiled run failed: %s", nb_error());
    nb_tensor *want = fused(&x, 1, NULL);
    assert_true(max_abs_diff(y, want) < 1e-5);
    nb_compiled_stats st = nb_compiled_get_stats(c);
    const char *note = nb_compiled_note(c);
#ifdef NABLA_WITH_JIT
    (void)note;
    assert_true(st.kernels_native + (note != NULL) > 0); /* compiled C, or a note saying why not */
#else
    assert_int_equal(st.kernels_native, 0);
    if (!note || !strstr(note, "built without the JIT")) fail_msg("note: %s", note ? note : "(none)");
#endif
    nb_compiled_free(c);
    nb_scope_end(s);
}

/* nabla/dist.h: a world of one process when not started by a launcher, with or without MPI */
static void test_dist(void **state) {
    (void)state;
#ifdef NABLA_WITH_MPI
    if (!strstr(nb_dist_backend(), "MPI (")) fail_msg("backend: %s", nb_dist_backend());
#else
    if (!strstr(nb_dist_backend(), "built without MPI: NABLA_WITH_MPI=OFF")) fail_msg("backend: %s", nb_dist_backend());
    /* as if started by mpirun -n 2: the process cannot join its peers */
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    assert_int_equal(nb_dist_init(NULL, NULL), -1);
    if (!error_has("built without MPI (NABLA_WITH_MPI=OFF)") || !error_has("one of 2 processes")) fail_msg("error: %s", nb_error());
    nb_error_clear();
    unsetenv("OMPI_COMM_WORLD_SIZE");
    assert_false(nb_dist_is_initialized());
#endif
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_from_data((float[]){ 1, 2, 3 }, NB_SHAPE(3), NB_F32);
    assert_int_equal(nb_dist_all_reduce(t, NB_REDUCE_SUM), -1); /* before nb_dist_init */
    if (!error_has("call nb_dist_init first")) fail_msg("error: %s", nb_error());
    nb_error_clear();
    assert_int_equal(nb_dist_init(NULL, NULL), 0);
    assert_int_equal(nb_dist_rank(), 0);
    assert_int_equal(nb_dist_world_size(), 1);
    assert_int_equal(nb_dist_all_reduce(t, NB_REDUCE_SUM), 0);
    assert_int_equal(nb_dist_all_reduce(t, NB_REDUCE_AVG), 0);
    assert_int_equal(nb_dist_broadcast(t, 0), 0);
    assert_true(nb_item(nb_sum_all(t)) == 6.0);
    assert_int_equal(nb_dist_broadcast(t, 1), -1);
    nb_error_clear();
    nb_tensor *g = nb_dist_all_gather(t), *r = nb_dist_reduce_scatter(t, NB_REDUCE_SUM);
    assert_non_null(g);
    assert_non_null(r);
    assert_true(max_abs_diff(g, t) == 0 && max_abs_diff(r, t) == 0);
    assert_int_equal(nb_dist_barrier(), 0);
    /* DDP of one process: the gradients are the module's own */
    nb_manual_seed(5);
    nb_module *ddp = nb_ddp(nb_nn_linear(3, 2), (nb_ddp_opts){ 0 });
    if (!ddp) fail_msg("nb_ddp: %s", nb_error());
    nb_tensor *x = nb_randn(NB_SHAPE(4, 3), NB_F32);
    assert_int_equal(nb_backward(nb_sum_all(nb_forward(ddp, x))), 0);
    nb_tensor *w = nb_module_get(ddp, "weight");
    nb_tensor *gw = nb_clone(nb_grad_of(w));
    nb_module_zero_grad(ddp);
    assert_int_equal(nb_backward(nb_sum_all(nb_forward(nb_ddp_inner(ddp), x))), 0);
    assert_true(max_abs_diff(gw, nb_grad_of(w)) == 0);
    assert_int_equal(nb_ddp_get_stats(ddp).backwards, 1);
    nb_module_free(ddp);
    nb_scope_end(s);
    nb_dist_finalize();
    assert_false(nb_dist_is_initialized());
}

#ifndef NABLA_WITH_JSON
/* The call failed (failed) and said that fn needs jansson, naming the option. */
static void expect_no_json(bool failed, const char *fn) {
    if (!failed) fail_msg("%s worked in a build without jansson", fn);
    const char *e = nb_error();
    if (!e || strncmp(e, fn, strlen(fn)) || !strstr(e, "built without jansson (NABLA_WITH_JSON=OFF)"))
        fail_msg("%s: error: %s", fn, e ? e : "(none)");
    nb_error_clear();
}
#endif

/* What reads or writes JSON (jansson): safetensors files and state dicts, model configs, sharded
   checkpoints (a plain module in one process needs no MPI), Hugging Face tokenizers and
   checkpoints. */
static void test_json(void **state) {
    (void)state;
    char dir[] = "/tmp/nabla_build_config.XXXXXX", path[64], sharded[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    snprintf(sharded, sizeof sharded, "%s/sharded", dir);
    static const char tok_json[] = "{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"a\":1}}}";
    static const uint8_t header_only[] = { 2, 0, 0, 0, 0, 0, 0, 0, '{', '}' }; /* a file of no tensors */
    nb_module *m = nb_nn_linear(3, 2);
#ifdef NABLA_WITH_JSON
    nb_module *cfg = nb_nn_from_config(nb_nn_config_builtin("mlp"), (nb_shape){ 0 });
    nb_tokenizer *tok = nb_tokenizer_from_json(tok_json, sizeof tok_json - 1);
    if (!cfg || !tok) fail_msg("%s", nb_error());
    assert_int_equal(nb_token_to_id(tok, "a"), 1);
    assert_int_equal(nb_save_state_dict(m, path), 0);
    assert_int_equal(nb_load_state_dict(m, path, (nb_load_opts){ 0 }), 0);
    nb_safetensors *f = nb_safetensors_open(path);
    assert_non_null(f);
    assert_int_equal(nb_safetensors_count(f), 2);
    nb_safetensors_close(f);
    f = nb_safetensors_open_memory(header_only, sizeof header_only);
    assert_non_null(f);
    nb_safetensors_close(f);
    if (nb_dist_save_sharded(m, NULL, sharded, NULL) < 0 || nb_dist_load_sharded(m, NULL, sharded, NULL) < 0)
        fail_msg("sharded checkpoint: %s", nb_error());
    assert_null(nb_hf_load(dir, (nb_hf_opts){ 0 })); /* no config.json there: an error, but not this one */
    if (!error_has("config.json") || error_has("built without")) fail_msg("error: %s", nb_error());
    nb_error_clear();
    nb_tokenizer_free(tok);
    nb_module_free(cfg);
#else
    expect_no_json(nb_nn_from_config(nb_nn_config_builtin("mlp"), (nb_shape){ 0 }) == NULL, "nb_nn_from_config");
    expect_no_json(nb_tokenizer_from_json(tok_json, sizeof tok_json - 1) == NULL, "nb_tokenizer_from_json");
    expect_no_json(nb_tokenizer_load(dir) == NULL, "nb_tokenizer_load");
    expect_no_json(nb_save_state_dict(m, path) < 0, "nb_save_state_dict");
    expect_no_json(nb_save_safetensors(path, NULL, 0, NULL) < 0, "nb_save_safetensors");
    expect_no_json(nb_checkpoint_save(&(nb_checkpoint){ .model = m }, path) < 0, "nb_checkpoint_save");
    assert_int_equal(access(path, F_OK), -1); /* nothing written */
    expect_no_json(nb_safetensors_open_memory(header_only, sizeof header_only) == NULL, "nb_safetensors_open_memory");
    FILE *w = fopen(path, "wb"); /* a real file: the refusal is not a missing file's */
    assert_non_null(w);
    assert_int_equal(fwrite(header_only, 1, sizeof header_only, w), sizeof header_only);
    fclose(w);
    expect_no_json(nb_safetensors_open(path) == NULL, "nb_safetensors_open");
    expect_no_json(nb_load_state_dict(m, path, (nb_load_opts){ 0 }) < 0, "nb_load_state_dict");
    expect_no_json(nb_checkpoint_load(&(nb_checkpoint){ .model = m }, path) < 0, "nb_checkpoint_load");
    expect_no_json(nb_dist_save_sharded(m, NULL, sharded, NULL) < 0, "nb_dist_save_sharded");
    expect_no_json(nb_dist_load_sharded(m, NULL, sharded, NULL) < 0, "nb_dist_load_sharded");
    expect_no_json(nb_hf_load(dir, (nb_hf_opts){ 0 }) == NULL, "nb_hf_load");
#endif
    nb_module_free(m);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
}

/* nb_matmul against a double loop: sizes around the own GEMM's blocks (4 rows, 256 of k, 512
   columns), operands transposed in place, and a broadcast batch. */
static void check_matmul(int64_t n, int64_t k, int64_t m, bool ta, bool tb, nb_dtype dt) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = ta ? nb_transpose(nb_randn(NB_SHAPE(k, n), dt), 0, 1) : nb_randn(NB_SHAPE(n, k), dt);
    nb_tensor *b = tb ? nb_transpose(nb_randn(NB_SHAPE(m, k), dt), 0, 1) : nb_randn(NB_SHAPE(k, m), dt);
    nb_tensor *c = nb_matmul(a, b);
    assert_non_null(c);
    nb_tensor *a64 = nb_contiguous(nb_cast(a, NB_F64)), *b64 = nb_contiguous(nb_cast(b, NB_F64));
    nb_tensor *c64 = nb_cast(c, NB_F64);
    const double *pa = nb_data_ptr(a64), *pb = nb_data_ptr(b64), *pc = nb_data_ptr(c64);
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double ref = 0, mag = 0;
            for (int64_t p = 0; p < k; p++) {
                ref += pa[i * k + p] * pb[p * m + j];
                mag += fabs(pa[i * k + p] * pb[p * m + j]);
            }
            double err = fabs(pc[i * m + j] - ref) / (mag + 1e-30);
            if (err > worst) worst = err;
        }
    double tol = dt == NB_F32 ? 1e-5 : 1e-13;
    if (worst > tol)
        fail_msg("matmul %lldx%lldx%lld ta=%d tb=%d %s: relative error %g", (long long)n, (long long)k, (long long)m, ta, tb,
                 dt == NB_F32 ? "f32" : "f64", worst);
    nb_scope_end(s);
}

/* The model server: built in, a missing model is the error; left out (no libmicrohttpd, or no
   jansson), nb_serve_start names what the build lacks. */
static void test_serve(void **state) {
    (void)state;
    nb_error_clear();
    nb_serve_opts o = { .model_name = "m", .model_base_path = "/nonexistent/serve/model" };
    assert_null(nb_serve_start(&o));
#if defined(NABLA_WITH_HTTP)
    if (!error_has("/nonexistent/serve/model") || error_has("built without")) fail_msg("error: %s", nb_error());
#elif defined(NABLA_WITH_JSON)
    if (!error_has("built without libmicrohttpd") || !error_has("NABLA_WITH_HTTP")) fail_msg("error: %s", nb_error());
#else
    if (!error_has("built without jansson") || !error_has("NABLA_WITH_JSON")) fail_msg("error: %s", nb_error());
#endif
    assert_int_equal(nb_serve_stop(NULL), 0);
}

static void test_matmul_shapes(void **state) {
    (void)state;
    static const int64_t shapes[][3] = { { 1, 1, 1 }, { 3, 5, 7 }, { 5, 257, 9 }, { 9, 300, 513 }, { 130, 70, 33 }, { 4, 1, 600 } };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int t = 0; t < 4; t++) {
            check_matmul(shapes[i][0], shapes[i][1], shapes[i][2], t & 1, t & 2, NB_F32);
            check_matmul(shapes[i][0], shapes[i][1], shapes[i][2], t & 1, t & 2, NB_F64);
        }
    /* a batch broadcast against one matrix */
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_randn(NB_SHAPE(3, 6, 5), NB_F32), *b = nb_randn(NB_SHAPE(5, 4), NB_F32);
    nb_tensor *c = nb_matmul(a, b);
    for (int64_t bi = 0; bi < 3; bi++) {
        nb_tensor *one = nb_matmul(nb_squeeze(nb_slice(a, 0, bi, bi + 1, 1), 0), b);
        assert_true(max_abs_diff(nb_squeeze(nb_slice(c, 0, bi, bi + 1, 1), 0), one) == 0.0);
    }
    nb_scope_end(s);
}

int main(void) {
    nb_manual_seed(3);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gzip_idx),
        cmocka_unit_test(test_png),
        cmocka_unit_test(test_jit),
        cmocka_unit_test(test_matmul_shapes),
        cmocka_unit_test(test_dist),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_serve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
