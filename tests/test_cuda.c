/* The CUDA backend. `test_cuda --host` runs everywhere: the allocator's size classes and the
   errors of a build or machine without a GPU. `test_cuda` needs a GPU and exits 77 (ctest:
   skipped) without one, saying why; on a GPU it checks the caching allocator (statistics, reuse,
   the out-of-memory message), copies, products and convolutions against the cpu, 100 training
   steps of an MLP, a CNN and a char GPT against the cpu within 1e-4, a resume from a checkpoint
   saved from and loaded to the GPU (bit-identical), and that two runs are bit-identical. */
#include "test_util.h"
#include "../src/backend/backend.h"
#include "../src/backend/cuda/alloc_class.h"
#include "gpt_model.h"
#include <math.h>
#include <unistd.h>

static const nb_device cpu = { NB_CPU, 0 }, gpu = { NB_CUDA, 0 };

/* ---- without a GPU (and with one) ---- */
static void test_size_classes(void **state) {
    (void)state;
    assert_int_equal(nb__cuda_size_class(0), 512);
    assert_int_equal(nb__cuda_size_class(1), 512);
    assert_int_equal(nb__cuda_size_class(512), 512);
    assert_int_equal(nb__cuda_size_class(513), 1024);
    assert_int_equal(nb__cuda_size_class((size_t)1 << 20), (size_t)1 << 20);
    assert_int_equal(nb__cuda_size_class(((size_t)1 << 20) + 1), (size_t)2 << 20);
    assert_int_equal(nb__cuda_size_class((size_t)5 << 20), (size_t)6 << 20);
    assert_int_equal(nb__cuda_size_class(SIZE_MAX), 0); /* rounding up would overflow */
    for (size_t n = 1; n < ((size_t)8 << 20); n = n * 3 + 7) {
        size_t c = nb__cuda_size_class(n);
        assert_true(c >= n && c - n < (n <= ((size_t)1 << 20) ? 512 : (size_t)2 << 20));
        assert_true(nb__cuda_bucket(c) < NB_CUDA_BUCKETS);
    }
}

static void test_errors_without_a_device(void **state) {
    (void)state;
    int n = nb_cuda_device_count();
    assert_true(n >= 0);
    assert_int_equal(nb_cuda_is_available(), n > 0);
    assert_int_equal(nb_device_count(NB_CUDA), n);
    if (n == 0) assert_true(strlen(nb_cuda_why_unavailable()) > 0);
    nb_device missing = { NB_CUDA, n }; /* one past the last: not there on any machine */
    char name[32];
    nb_device_str(missing, name, sizeof name);
    nb_tensor *t = nb_ones(NB_SHAPE(3), NB_F32);
    assert_null(nb_to(t, missing));
    char want[80];
    snprintf(want, sizeof want, "nb_to: device %s is not available", name);
    ASSERT_ERROR_CONTAINS(want);
    nb_error_clear();
    nb_cuda_memory m;
    assert_int_equal(nb_cuda_memory_stats(n, &m), -1);
    ASSERT_ERROR_CONTAINS("nb_cuda_memory_stats: device");
    nb_error_clear();
    assert_int_equal(m.allocated, 0);
    bool prev = nb_cuda_allow_tf32();
    nb_cuda_set_allow_tf32(true);
    assert_true(nb_cuda_allow_tf32());
    nb_cuda_set_allow_tf32(prev);
    nb_release(t);
}

/* ---- on a GPU ---- */
/* Largest |a - b| over the elements (both read to the host as f64). */
static double max_diff(nb_tensor *a, nb_tensor *b) {
    nb_tensor *x = nb_cast(nb_to(a, cpu), NB_F64), *y = nb_cast(nb_to(b, cpu), NB_F64);
    assert_non_null(x);
    assert_non_null(y);
    int64_t n = nb_numel(x);
    assert_int_equal(n, nb_numel(y));
    double *u = malloc(sizeof(double) * (size_t)(n + 1)), *v = malloc(sizeof(double) * (size_t)(n + 1));
    nb_copy_to(x, u, sizeof(double) * (size_t)n);
    nb_copy_to(y, v, sizeof(double) * (size_t)n);
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(u[i] - v[i]);
        if (!(e <= d)) d = e; /* NaN wins */
    }
    free(u);
    free(v);
    return d;
}

static void test_allocator(void **state) {
    (void)state;
    nb_cuda_memory m0, m1, m2, m3;
    assert_int_equal(nb_cuda_memory_stats(0, &m0), 0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_to(nb_ones(NB_SHAPE(1000), NB_F32), gpu);
    assert_non_null(t);
    assert_int_equal(nb_cuda_memory_stats(0, &m1), 0);
    assert_true(m1.allocated >= m0.allocated + 4000);
    assert_true(m1.reserved >= m1.allocated && m1.peak >= m1.allocated);
    nb_scope_end(s); /* back to the cache, not to the driver */
    assert_int_equal(nb_cuda_memory_stats(0, &m2), 0);
    assert_int_equal(m2.allocated, m0.allocated);
    assert_int_equal(m2.reserved, m1.reserved);
    s = nb_scope_begin();
    assert_non_null(nb_to(nb_ones(NB_SHAPE(1000), NB_F32), gpu)); /* the same class again: reused */
    assert_int_equal(nb_cuda_memory_stats(0, &m3), 0);
    assert_true(m3.reuses > m2.reuses);
    assert_int_equal(m3.device_mallocs, m2.device_mallocs);
    nb_scope_end(s);
    assert_int_equal(nb_cuda_reset_peak(0), 0);
    assert_int_equal(nb_cuda_empty_cache(0), 0);
    assert_int_equal(nb_cuda_memory_stats(0, &m3), 0);
    assert_int_equal(m3.cached, 0);
    /* a petabyte: an error naming the bytes asked for and what is free, never an abort */
    const nb_backend *b = nb__backend_get(NB_CUDA);
    assert_non_null(b);
    nb_error_clear();
    assert_null(b->alloc((size_t)1 << 50, 0));
    ASSERT_ERROR_CONTAINS("cuda:0: out of memory allocating 1125899906842624 bytes (");
    ASSERT_ERROR_CONTAINS("reserved by nabla)");
    nb_error_clear();
}

static void test_copies_round_trip(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    for (int d = 0; d < NB_DTYPE_COUNT; d++) {
        nb_tensor *x = nb_cast(nb_mul_scalar(nb_randn(NB_SHAPE(37, 11), NB_F32), 10), (nb_dtype)d);
        nb_tensor *g = nb_to(x, gpu);
        assert_non_null(g);
        assert_int_equal(nb_device_of(g).type, NB_CUDA);
        nb_tensor *back = nb_to(g, cpu);
        assert_true(max_diff(back, x) == 0);
        nb_tensor *strided = nb_to(nb_transpose(g, 0, 1), cpu); /* a strided view made dense on the GPU */
        assert_true(max_diff(strided, nb_transpose(x, 0, 1)) == 0);
    }
    assert_int_equal(nb_synchronize(gpu), 0);
    nb_scope_end(s);
}

static void check_matmul(nb_shape sa, nb_shape sb, nb_dtype dt, bool transpose_b, double tol) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_cast(nb_mul_scalar(nb_randn(sa, NB_F32), 3), dt), *b = nb_cast(nb_mul_scalar(nb_randn(sb, NB_F32), 3), dt);
    /* b column-major on the GPU (a transposed view of a dense tensor there): cuBLAS reads it in place */
    nb_tensor *bg = transpose_b ? nb_transpose(nb_to(nb_contiguous(nb_transpose(b, -1, -2)), gpu), -1, -2) : nb_to(b, gpu);
    nb_tensor *ref = nb_matmul(a, b), *got = nb_matmul(nb_to(a, gpu), bg);
    if (!got) fprintf(stderr, "matmul on cuda: %s\n", nb_error());
    assert_non_null(got);
    double d = max_diff(got, ref);
    if (!(d <= tol)) fprintf(stderr, "matmul %s: max difference %g (tolerance %g)\n", nb_dtype_name(dt), d, tol);
    assert_true(d <= tol);
    nb_scope_end(s);
}

static void test_matmul_against_the_cpu(void **state) {
    (void)state;
    nb_manual_seed(5);
    check_matmul(NB_SHAPE(3, 5), NB_SHAPE(5, 4), NB_F32, false, 1e-4);
    check_matmul(NB_SHAPE(2, 3, 64, 70), NB_SHAPE(70, 33), NB_F32, false, 1e-3); /* broadcast batch */
    check_matmul(NB_SHAPE(4, 1, 16, 8), NB_SHAPE(3, 8, 16), NB_F32, true, 1e-4); /* both broadcast, b transposed */
    check_matmul(NB_SHAPE(2, 9, 7), NB_SHAPE(2, 7, 5), NB_F64, false, 1e-12);
    check_matmul(NB_SHAPE(2, 9, 7), NB_SHAPE(7, 5), NB_I32, false, 0);
    check_matmul(NB_SHAPE(9, 7), NB_SHAPE(7, 5), NB_I64, false, 0);
    check_matmul(NB_SHAPE(1, 300), NB_SHAPE(300, 1), NB_F32, false, 1e-3);
    /* TF32 allowed: close, not exact */
    nb_cuda_set_allow_tf32(true);
    check_matmul(NB_SHAPE(128, 256), NB_SHAPE(256, 64), NB_F32, false, 0.5);
    nb_cuda_set_allow_tf32(false);
    /* autocast: bf16 operands, f32 accumulation */
    nb_dtype prev = nb_autocast(NB_BF16);
    check_matmul(NB_SHAPE(32, 64), NB_SHAPE(64, 16), NB_F32, false, 1e-2);
    nb_autocast(prev);
}

static void test_conv_against_the_cpu(void **state) {
    (void)state;
    nb_manual_seed(9);
    const nb_conv_opts cases[] = {
        { .stride = { 1, 1 }, .padding = { 1, 1 }, .dilation = { 1, 1 }, .groups = 1 },
        { .stride = { 2, 1 }, .padding = { 0, 2 }, .dilation = { 1, 2 }, .groups = 2 },
    };
    for (int dt = 0; dt < 2; dt++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            nb_scope *s = nb_scope_begin();
            nb_dtype d = dt ? NB_F64 : NB_F32;
            nb_tensor *x = nb_set_requires_grad(nb_randn(NB_SHAPE(2, 4, 9, 10), d), true);
            nb_tensor *w = nb_set_requires_grad(nb_randn(NB_SHAPE(6, 4 / cases[c].groups, 3, 3), d), true);
            nb_tensor *b = nb_set_requires_grad(nb_randn(NB_SHAPE(6), d), true);
            nb_tensor *xg = nb_set_requires_grad(nb_to(nb_detach(x), gpu), true);
            nb_tensor *wg = nb_set_requires_grad(nb_to(nb_detach(w), gpu), true);
            nb_tensor *bg = nb_set_requires_grad(nb_to(nb_detach(b), gpu), true);
            nb_tensor *ref = nb_conv2d(x, w, b, cases[c]), *got = nb_conv2d(xg, wg, bg, cases[c]);
            if (!got) fprintf(stderr, "conv2d on cuda: %s\n", nb_error());
            assert_non_null(got);
            double tol = dt ? 1e-10 : 1e-4;
            assert_true(max_diff(got, ref) <= tol);
            nb_tensor *up = nb_randn(nb_shape_of(ref), d);
            assert_int_equal(nb_backward(nb_sum_all(nb_mul(ref, up))), 0);
            assert_int_equal(nb_backward(nb_sum_all(nb_mul(got, nb_to(up, gpu)))), 0);
            assert_true(max_diff(nb_grad_of(xg), nb_grad_of(x)) <= tol);
            assert_true(max_diff(nb_grad_of(wg), nb_grad_of(w)) <= tol);
            assert_true(max_diff(nb_grad_of(bg), nb_grad_of(b)) <= tol);
            nb_scope_end(s);
        }
}

/* ---- training ---- */
enum { MLP, CNN, GPT };

static nb_module *make_model(int kind) {
    nb_manual_seed(21);
    return kind == MLP ? nb_nn_sequential(nb_nn_linear(32, 64), nb_nn_relu(), nb_nn_linear(64, 10), NULL)
           : kind == CNN ? nb_nn_sequential(nb_nn_conv2d(1, 8, 3, (nb_conv2d_opts){ .padding = 1 }), nb_nn_relu(),
                                            nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }), nb_nn_flatten(), nb_nn_linear(8 * 8 * 8, 10),
                                            NULL)
                         : gpt_model_new(16, 16, 32, 2, 2);
}

/* One AdamW step of model m on a batch drawn from seed; the loss. */
static double train_one(int kind, nb_module *m, nb_optimizer *o, nb_device dev, uint64_t seed) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(seed);
    nb_tensor *x = kind == MLP ? nb_randn(NB_SHAPE(16, 32), NB_F32)
                   : kind == CNN ? nb_randn(NB_SHAPE(16, 1, 16, 16), NB_F32)
                                 : nb_randint(0, 16, NB_SHAPE(4, 16));
    nb_tensor *y = kind == GPT ? nb_randint(0, 16, NB_SHAPE(64)) : nb_randint(0, 10, NB_SHAPE(16));
    nb_tensor *logits = nb_forward(m, nb_to(x, dev));
    if (kind == GPT) logits = nb_reshape(logits, NB_SHAPE(64, 16));
    nb_optim_zero_grad(o);
    nb_tensor *loss = nb_cross_entropy(logits, nb_to(y, dev), (nb_ce_opts){ 0 });
    if (!loss) fprintf(stderr, "model %d on %s: %s\n", kind, dev.type == NB_CUDA ? "cuda" : "cpu", nb_error());
    assert_non_null(loss);
    assert_int_equal(nb_backward(loss), 0);
    assert_int_equal(nb_optim_step(o), 0);
    double l = nb_item(loss);
    nb_scope_end(s);
    return l;
}

/* Largest difference between two models' parameters. */
static double params_diff(nb_module *a, nb_module *b) {
    nb_named_tensor pa[128], pb[128];
    int n = nb_module_named_parameters(a, pa, 128);
    assert_int_equal(nb_module_named_parameters(b, pb, 128), n);
    double d = 0;
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < n; i++) {
        double e = max_diff(pa[i].tensor, pb[i].tensor);
        if (!(e <= d)) d = e;
    }
    nb_scope_end(s);
    return d;
}

static void test_training_matches_the_cpu(void **state) {
    (void)state;
    const char *names[] = { "MLP", "CNN", "char GPT" };
    for (int kind = MLP; kind <= GPT; kind++) {
        nb_module *c = make_model(kind), *g = make_model(kind);
        assert_non_null(nb_module_to(g, gpu));
        nb_optimizer *oc = nb_optim_adamw(c, (nb_adamw_opts){ .lr = 1e-3 }), *og = nb_optim_adamw(g, (nb_adamw_opts){ .lr = 1e-3 });
        double worst = 0;
        for (int step = 0; step < 100; step++) {
            double lc = train_one(kind, c, oc, cpu, 1000 + step), lg = train_one(kind, g, og, gpu, 1000 + step);
            if (!(fabs(lc - lg) <= worst)) worst = fabs(lc - lg);
        }
        double pd = params_diff(c, g);
        printf("%s: 100 steps, largest loss difference %.3g, largest parameter difference %.3g\n", names[kind], worst, pd);
        assert_true(worst <= 1e-4);
        assert_true(pd <= 1e-4);
        nb_optim_free(oc);
        nb_optim_free(og);
        nb_module_free(c);
        nb_module_free(g);
    }
}

static void test_runs_are_bit_identical(void **state) {
    (void)state;
    for (int kind = MLP; kind <= GPT; kind++) {
        nb_module *a = make_model(kind), *b = make_model(kind);
        assert_non_null(nb_module_to(a, gpu));
        assert_non_null(nb_module_to(b, gpu));
        nb_optimizer *oa = nb_optim_adamw(a, (nb_adamw_opts){ .lr = 1e-3 }), *ob = nb_optim_adamw(b, (nb_adamw_opts){ .lr = 1e-3 });
        for (int step = 0; step < 20; step++) assert_true(train_one(kind, a, oa, gpu, 50 + step) == train_one(kind, b, ob, gpu, 50 + step));
        assert_true(params_diff(a, b) == 0);
        nb_optim_free(oa);
        nb_optim_free(ob);
        nb_module_free(a);
        nb_module_free(b);
    }
}

static void test_checkpoint_resume_on_the_gpu(void **state) {
    (void)state;
    SKIP_WITHOUT_JSON(); /* checkpoints are safetensors files */
    char path[] = "/tmp/nb_cuda_ckXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int kind = MLP; kind <= GPT; kind++) {
        nb_module *a = make_model(kind), *b = make_model(kind);
        assert_non_null(nb_module_to(a, gpu));
        nb_optimizer *oa = nb_optim_adamw(a, (nb_adamw_opts){ .lr = 1e-3 }), *ob = nb_optim_adamw(b, (nb_adamw_opts){ .lr = 1e-3 });
        for (int step = 0; step < 10; step++) train_one(kind, a, oa, gpu, 70 + step);
        assert_int_equal(nb_checkpoint_save(&(nb_checkpoint){ .model = a, .optimizer = oa, .global_step = 10 }, path), 0);
        for (int step = 10; step < 20; step++) train_one(kind, a, oa, gpu, 70 + step);
        assert_non_null(nb_module_to(b, gpu)); /* the resumed run: a fresh model on the GPU */
        nb_checkpoint ck = { .model = b, .optimizer = ob };
        int rc = nb_checkpoint_load(&ck, path);
        if (rc < 0) fprintf(stderr, "checkpoint load: %s\n", nb_error());
        assert_int_equal(rc, 0);
        for (int step = 10; step < 20; step++) train_one(kind, b, ob, gpu, 70 + step);
        assert_true(params_diff(a, b) == 0);
        nb_optim_free(oa);
        nb_optim_free(ob);
        nb_module_free(a);
        nb_module_free(b);
    }
    unlink(path);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--host")) {
        const struct CMUnitTest host[] = {
            cmocka_unit_test_setup(test_size_classes, clear_error_setup),
            cmocka_unit_test_setup(test_errors_without_a_device, clear_error_setup),
        };
        return cmocka_run_group_tests(host, NULL, NULL);
    }
    if (nb_cuda_device_count() == 0) {
        printf("SKIPPED: test_cuda needs a CUDA device: %s\n", nb_cuda_why_unavailable());
        return 77;
    }
    const struct CMUnitTest gpu_tests[] = {
        cmocka_unit_test_setup(test_allocator, clear_error_setup),
        cmocka_unit_test_setup(test_copies_round_trip, clear_error_setup),
        cmocka_unit_test_setup(test_matmul_against_the_cpu, clear_error_setup),
        cmocka_unit_test_setup(test_conv_against_the_cpu, clear_error_setup),
        cmocka_unit_test_setup(test_training_matches_the_cpu, clear_error_setup),
        cmocka_unit_test_setup(test_runs_are_bit_identical, clear_error_setup),
        cmocka_unit_test_setup(test_checkpoint_resume_on_the_gpu, clear_error_setup),
    };
    return cmocka_run_group_tests(gpu_tests, NULL, NULL);
}
