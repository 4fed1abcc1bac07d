/* Convolution, pooling and batch norm backward against central finite differences in f64,
   including strided (transposed) inputs and unbatched [C, H, W] inputs; the backward ops'
   own backwards (called through the op table, as a tracer would); and results that do not
   depend on the thread count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <nabla.h>
#include <nabla/nn.h>
#include "ops/ops_impl.h"

typedef nb_tensor *(*op_fn)(nb_tensor **in);

enum { ANY, DISTINCT };

typedef struct {
    const char *name;
    op_fn fn;
    int nin;
    nb_shape shapes[3];
    int kind[3];
    bool transpose[3]; /* hand the op a view with its last two axes swapped */
} grad_case;

#define CONV(...) ((nb_conv_opts){ __VA_ARGS__ })
static nb_tensor *f_conv(nb_tensor **x) {
    return nb_conv2d(x[0], x[1], x[2], CONV(.stride = { 2, 1 }, .padding = { 1, 1 }, .dilation = { 1, 2 }));
}
static nb_tensor *f_conv_groups(nb_tensor **x) { return nb_conv2d(x[0], x[1], x[2], CONV(.padding = { 1, 0 }, .groups = 2)); }
static nb_tensor *f_conv_1x1(nb_tensor **x) { return nb_conv2d(x[0], x[1], NULL, CONV(0)); }
static nb_tensor *f_conv_depthwise(nb_tensor **x) {
    return nb_conv2d(x[0], x[1], NULL, CONV(.stride = { 2, 2 }, .padding = { 1, 1 }, .groups = 3));
}
static nb_tensor *f_conv_unbatched(nb_tensor **x) { return nb_conv2d(x[0], x[1], x[2], CONV(.padding = { 1, 1 })); }
static nb_tensor *f_max_pool(nb_tensor **x) { return nb_max_pool2d(x[0], 3, (nb_pool_opts){ .stride = 2, .padding = 1 }); }
static nb_tensor *f_max_pool2(nb_tensor **x) { return nb_max_pool2d(x[0], 2, (nb_pool_opts){ 0 }); }
static nb_tensor *f_max_pool_overlap(nb_tensor **x) { return nb_max_pool2d(x[0], 3, (nb_pool_opts){ .stride = 1, .padding = 1 }); }
static nb_tensor *f_avg_pool(nb_tensor **x) { return nb_avg_pool2d(x[0], 3, (nb_pool_opts){ .stride = 2, .padding = 1 }); }
static nb_tensor *f_avg_pool2(nb_tensor **x) { return nb_avg_pool2d(x[0], 2, (nb_pool_opts){ .stride = 1, .padding = 0 }); }
static nb_tensor *f_adaptive(nb_tensor **x) { return nb_adaptive_avg_pool2d(x[0], 3, 4); }
static nb_tensor *f_adaptive_up(nb_tensor **x) { return nb_adaptive_avg_pool2d(x[0], 7, 5); }
static nb_tensor *f_bn_train(nb_tensor **x) { return nb_batch_norm(x[0], NULL, NULL, x[1], x[2], true, 0, 1e-5); }
static nb_tensor *f_bn_eval(nb_tensor **x) {
    nb_tensor *rm = nb_full(NB_SHAPE(3), 0.25, NB_F64), *rv = nb_full(NB_SHAPE(3), 1.5, NB_F64);
    return nb_batch_norm(x[0], rm, rv, x[1], x[2], false, 0, 1e-5);
}
static nb_tensor *f_conv_bn_pool(nb_tensor **x) { /* a small CNN block */
    nb_tensor *y = nb_conv2d(x[0], x[1], NULL, CONV(.padding = { 1, 1 }));
    y = nb_batch_norm(y, NULL, NULL, NULL, NULL, true, 0, 1e-5);
    return nb_adaptive_avg_pool2d(nb_max_pool2d(nb_tanh(y), 2, (nb_pool_opts){ 0 }), 1, 1);
}

/* The backward ops themselves, called through the op table with torch-like arguments. */
static nb_op_args conv_args(nb_shape shape) {
    return (nb_op_args){ .i = { 2, 1, 1, 0, 1, 2, 2 }, .shape = shape }; /* stride (2,1) pad (1,0) dil (1,2) groups 2 */
}
static nb_tensor *f_conv_bwd_input(nb_tensor **x) { /* (g [2,4,3,3], w [4,2,3,2]) -> dx [2,4,5,5] */
    nb_op_args a = conv_args(NB_SHAPE(2, 4, 5, 5));
    return nb__call(NB_OP_CONV2D_BACKWARD_INPUT, x, 2, &a);
}
static nb_tensor *f_conv_bwd_weight(nb_tensor **x) { /* (g [2,4,3,3], x [2,4,5,5]) -> dw [4,2,3,2] */
    nb_op_args a = conv_args(NB_SHAPE(4, 2, 3, 2));
    return nb__call(NB_OP_CONV2D_BACKWARD_WEIGHT, x, 2, &a);
}
static nb_op_args pool_args(nb_shape shape) { return (nb_op_args){ .i = { 3, 3, 2, 2, 1, 1 }, .shape = shape }; }
static nb_tensor *f_max_pool_bwd(nb_tensor **x) { /* (g [2,2,3,4], x [2,2,5,7]) */
    nb_op_args a = pool_args(NB_SHAPE(2, 2, 5, 7));
    return nb__call(NB_OP_MAX_POOL2D_BACKWARD, x, 2, &a);
}
static nb_tensor *f_avg_pool_bwd(nb_tensor **x) {
    nb_op_args a = pool_args(NB_SHAPE(2, 2, 5, 7));
    return nb__call(NB_OP_AVG_POOL2D_BACKWARD, x, 1, &a);
}
static nb_tensor *f_adaptive_bwd(nb_tensor **x) { /* g [2,2,3,4] -> [2,2,5,7] */
    nb_op_args a = { .i = { 3, 4 }, .shape = NB_SHAPE(2, 2, 5, 7) };
    return nb__call(NB_OP_ADAPTIVE_AVG_POOL2D_BACKWARD, x, 1, &a);
}

#define S(...) NB_SHAPE(__VA_ARGS__)
static const grad_case cases[] = {
    { "conv2d_stride_pad_dilation", f_conv, 3, { S(2, 3, 5, 6), S(4, 3, 3, 2), S(4) }, { ANY, ANY, ANY }, { false, false, false } },
    { "conv2d_transposed_input", f_conv, 3, { S(2, 3, 6, 5), S(4, 3, 3, 2), S(4) }, { ANY, ANY, ANY }, { true, true, false } },
    { "conv2d_groups", f_conv_groups, 3, { S(2, 4, 5, 4), S(6, 2, 3, 2), S(6) }, { ANY, ANY, ANY }, { false, false, false } },
    { "conv2d_1x1", f_conv_1x1, 2, { S(2, 3, 3, 4), S(2, 3, 1, 1) }, { ANY, ANY }, { false, false } },
    { "conv2d_depthwise", f_conv_depthwise, 2, { S(2, 3, 5, 6), S(3, 1, 3, 3) }, { ANY, ANY }, { false, false } },
    { "conv2d_unbatched", f_conv_unbatched, 3, { S(2, 4, 5), S(3, 2, 3, 3), S(3) }, { ANY, ANY, ANY }, { false, false, false } },
    { "max_pool2d_k3_s2_p1", f_max_pool, 1, { S(2, 2, 5, 7) }, { DISTINCT }, { false } },
    { "max_pool2d_k2_transposed", f_max_pool2, 1, { S(2, 2, 5, 6) }, { DISTINCT }, { true } },
    { "max_pool2d_overlapping", f_max_pool_overlap, 1, { S(1, 2, 4, 5) }, { DISTINCT }, { false } },
    { "avg_pool2d_k3_s2_p1", f_avg_pool, 1, { S(2, 2, 5, 7) }, { ANY }, { false } },
    { "avg_pool2d_k2_s1_transposed", f_avg_pool2, 1, { S(2, 2, 4, 5) }, { ANY }, { true } },
    { "adaptive_avg_pool2d", f_adaptive, 1, { S(2, 2, 5, 7) }, { ANY }, { false } },
    { "adaptive_avg_pool2d_upsample", f_adaptive_up, 1, { S(1, 2, 3, 4) }, { ANY }, { false } },
    { "batch_norm_train", f_bn_train, 3, { S(4, 3, 2, 3), S(3), S(3) }, { ANY, ANY, ANY }, { false, false, false } },
    { "batch_norm_train_2d", f_bn_train, 3, { S(5, 3), S(3), S(3) }, { ANY, ANY, ANY }, { false, false, false } },
    { "batch_norm_eval", f_bn_eval, 3, { S(4, 3, 2, 3), S(3), S(3) }, { ANY, ANY, ANY }, { true, false, false } },
    { "conv_bn_pool_block", f_conv_bn_pool, 2, { S(2, 2, 4, 4), S(3, 2, 3, 3) }, { ANY, ANY }, { false, false } },
    { "op_conv2d_backward_input", f_conv_bwd_input, 2, { S(2, 4, 3, 3), S(4, 2, 3, 2) }, { ANY, ANY }, { false, false } },
    { "op_conv2d_backward_weight", f_conv_bwd_weight, 2, { S(2, 4, 3, 3), S(2, 4, 5, 5) }, { ANY, ANY }, { false, false } },
    { "op_max_pool2d_backward", f_max_pool_bwd, 2, { S(2, 2, 3, 4), S(2, 2, 5, 7) }, { ANY, DISTINCT }, { false, false } },
    { "op_avg_pool2d_backward", f_avg_pool_bwd, 1, { S(2, 2, 3, 4) }, { ANY }, { false } },
    { "op_adaptive_avg_pool2d_backward", f_adaptive_bwd, 1, { S(2, 2, 3, 4) }, { ANY }, { false } },
};

/* A leaf holding the values for shape (stored transposed in its last two axes when asked). */
static nb_tensor *make_leaf(nb_shape shape, int kind, bool transpose) {
    nb_shape stored = shape;
    if (transpose) {
        stored.dim[shape.ndim - 1] = shape.dim[shape.ndim - 2];
        stored.dim[shape.ndim - 2] = shape.dim[shape.ndim - 1];
    }
    nb_tensor *t;
    if (kind == DISTINCT) { /* a shuffled ramp: no ties, gaps far wider than the step */
        int64_t n = 1;
        for (int i = 0; i < stored.ndim; i++) n *= stored.dim[i];
        double v[512];
        assert_true(n <= 512);
        for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 37) % n) * 0.05 - 1.0;
        t = nb_from_data(v, stored, NB_F64);
    } else t = nb_randn(stored, NB_F64);
    return nb_set_requires_grad(t, true);
}

static double loss_value(const grad_case *c, nb_tensor **views, nb_tensor *r) {
    nb_scope *s = nb_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    double v = nb_item(nb_sum_all(nb_mul(c->fn(views), r)));
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    return v;
}

static int64_t checked;

static int check_case(const grad_case *c) {
    int bad = 0;
    nb_scope *s = nb_scope_begin();
    nb_tensor *leaves[3] = { 0 }, *views[3] = { 0 };
    for (int i = 0; i < c->nin; i++) {
        leaves[i] = make_leaf(c->shapes[i], c->kind[i], c->transpose[i]);
        views[i] = c->transpose[i] ? nb_transpose(leaves[i], -1, -2) : leaves[i];
    }
    nb_tensor *y = c->fn(views);
    if (!y) {
        fprintf(stderr, "FAIL %s: %s\n", c->name, nb_error());
        nb_scope_end(s);
        return 1;
    }
    nb_tensor *r = nb_randn(nb_shape_of(y), NB_F64);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(y, r))), 0);
    const double h = 1e-6;
    for (int i = 0; i < c->nin; i++) {
        nb_tensor *ga = nb_grad_of(leaves[i]);
        double *x = nb_data_ptr(leaves[i]);
        int64_t n = nb_numel(leaves[i]);
        double ana[512];
        assert_true(n <= 512);
        if (ga) assert_int_equal(nb_copy_to(ga, ana, sizeof(double) * (size_t)n), 0);
        else memset(ana, 0, sizeof ana);
        for (int64_t j = 0; j < n; j++) {
            double keep = x[j];
            x[j] = keep + h;
            double fp = loss_value(c, views, r);
            x[j] = keep - h;
            double fm = loss_value(c, views, r);
            x[j] = keep;
            double num = (fp - fm) / (2 * h);
            checked++;
            if (!(fabs(num - ana[j]) <= 1e-6 * fmax(1.0, fabs(num)))) {
                if (bad < 5)
                    fprintf(stderr, "FAIL %s: input %d element %lld: analytic %.10g, numeric %.10g\n", c->name, i, (long long)j,
                            ana[j], num);
                bad++;
            }
        }
    }
    nb_scope_end(s);
    return bad;
}

static void test_gradcheck(void **state) {
    (void)state;
    nb_manual_seed(1234);
    int failed = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        nb_error_clear();
        int bad = check_case(&cases[k]);
        if (nb_error()) {
            fprintf(stderr, "FAIL %s: error %s\n", cases[k].name, nb_error());
            bad++;
        }
        failed += bad != 0;
    }
    fprintf(stderr, "%lld gradient elements checked in %d cases\n", (long long)checked, (int)(sizeof cases / sizeof cases[0]));
    assert_int_equal(failed, 0);
    assert_true(checked > 1000);
}

/* One conv + pool forward and backward in f32; returns the output and the gradients. */
static void run_net(float *out, float *dx, float *dw, float *db, size_t no, size_t nx, size_t nw, size_t nbias) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(99);
    nb_tensor *x = nb_set_requires_grad(nb_randn(NB_SHAPE(9, 16, 13, 12), NB_F32), true);
    nb_tensor *w = nb_set_requires_grad(nb_randn(NB_SHAPE(32, 16, 3, 3), NB_F32), true);
    nb_tensor *b = nb_set_requires_grad(nb_randn(NB_SHAPE(32), NB_F32), true);
    nb_tensor *y = nb_conv2d(x, w, b, CONV(.padding = { 1, 1 }));
    y = nb_avg_pool2d(nb_max_pool2d(y, 2, (nb_pool_opts){ 0 }), 3, (nb_pool_opts){ .stride = 1, .padding = 1 });
    assert_non_null(y);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(y, y))), 0);
    assert_int_equal(nb_copy_to(y, out, no * sizeof(float)), 0);
    assert_int_equal(nb_copy_to(nb_grad_of(x), dx, nx * sizeof(float)), 0);
    assert_int_equal(nb_copy_to(nb_grad_of(w), dw, nw * sizeof(float)), 0);
    assert_int_equal(nb_copy_to(nb_grad_of(b), db, nbias * sizeof(float)), 0);
    nb_scope_end(s);
}

static void test_thread_count_independent(void **state) {
    (void)state;
    size_t no = 9 * 32 * 6 * 6, nx = 9 * 16 * 13 * 12, nw = 32 * 16 * 9, nbias = 32;
    float *a[4], *b[4];
    size_t sizes[4] = { no, nx, nw, nbias };
    for (int i = 0; i < 4; i++) {
        a[i] = test_malloc(sizes[i] * sizeof(float));
        b[i] = test_malloc(sizes[i] * sizeof(float));
    }
    nb_set_num_threads(1);
    run_net(a[0], a[1], a[2], a[3], no, nx, nw, nbias);
    for (int threads = 2; threads <= 3; threads++) { /* 3: a count that splits no loop evenly */
        nb_set_num_threads(threads);
        run_net(b[0], b[1], b[2], b[3], no, nx, nw, nbias);
        for (int i = 0; i < 4; i++) assert_memory_equal(a[i], b[i], sizes[i] * sizeof(float));
    }
    nb_set_num_threads(0);
    for (int i = 0; i < 4; i++) {
        test_free(a[i]);
        test_free(b[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_thread_count_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
