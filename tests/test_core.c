/* Core behaviour: creation, views that share storage, broadcasting, printing, scopes and
   ownership, errors that name what was wrong, the random generator, dtypes and threads. */
#include "test_util.h"
#include <pthread.h>

static void expect_format(nb_tensor *t, const char *want) {
    char buf[4096];
    nb_format(t, buf, sizeof buf);
    if (strcmp(buf, want) != 0) fail_msg("format mismatch:\n got: %s\nwant: %s", buf, want);
}

static void test_creation(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *z = nb_zeros(NB_SHAPE(2, 3), NB_F32);
    assert_int_equal(nb_ndim(z), 2);
    assert_int_equal(nb_dim(z, 0), 2);
    assert_int_equal(nb_dim(z, -1), 3);
    assert_int_equal(nb_numel(z), 6);
    assert_int_equal(nb_dtype_of(z), NB_F32);
    assert_true(nb_is_contiguous(z));
    assert_true(nb_item(nb_sum_all(nb_ones(NB_SHAPE(4, 5), NB_F64))) == 20.0);
    assert_true(nb_item(nb_full(NB_SHAPE(), 2.5, NB_F32)) == 2.5);
    nb_tensor *r = nb_arange(0, 5, 2, NB_I64);
    int64_t got[3];
    assert_int_equal(nb_copy_to(r, got, sizeof got), 0);
    assert_true(got[0] == 0 && got[1] == 2 && got[2] == 4);
    float data[] = { 1, 2, 3, 4, 5, 6 };
    nb_tensor *d = nb_from_data(data, NB_SHAPE(2, 3), NB_F32);
    assert_true(nb_item(nb_slice(nb_slice(d, 0, 1, 2, 1), 1, 2, 3, 1)) == 6.0);
    assert_int_equal(nb_ndim(nb_scalar(1)), 0);
    assert_int_equal(nb_numel(nb_zeros(NB_SHAPE(0, 3), NB_F32)), 0);
    nb_tensor *big = nb_zeros(NB_SHAPE(1, 1, 1, 1, 1, 1, 1, 2), NB_F32);
    assert_int_equal(nb_ndim(big), 8);
    nb_scope_end(s);
    assert_null(nb_error());
}

static void test_views_share_storage(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_arange(0, 24, 1, NB_F32);
    nb_tensor *v = nb_view(t, NB_SHAPE(2, 3, 4));
    assert_true(nb_shares_storage(t, v));
    nb_tensor *tr = nb_transpose(v, 0, 2);
    assert_true(nb_shares_storage(t, tr));
    assert_false(nb_is_contiguous(tr));
    assert_int_equal(nb_stride(tr, 0), 1);
    assert_int_equal(nb_stride(tr, 2), 12);
    assert_true(nb_shares_storage(t, nb_permute(v, (int[]){ 1, 2, 0 })));
    assert_true(nb_shares_storage(t, nb_slice(v, 2, 1, 4, 2)));
    assert_true(nb_shares_storage(t, nb_expand(nb_view(t, NB_SHAPE(1, 24)), NB_SHAPE(5, 24))));
    assert_true(nb_shares_storage(t, nb_unsqueeze(tr, 1)));
    assert_true(nb_shares_storage(t, nb_squeeze(nb_unsqueeze(tr, 1), 1)));
    assert_true(nb_shares_storage(t, nb_reshape(v, NB_SHAPE(6, 4))));
    assert_true(nb_shares_storage(t, nb_flatten(v, 0, 1)));
    assert_true(nb_shares_storage(t, nb_detach(v)));
    /* a view is possible for some non-contiguous shapes: splitting a transposed axis */
    assert_true(nb_shares_storage(t, nb_view(tr, NB_SHAPE(2, 2, 3, 2))));
    /* merging transposed axes needs a copy: view refuses, reshape copies */
    assert_null(nb_view(tr, NB_SHAPE(24)));
    ASSERT_ERROR_CONTAINS("nb_view: shape [24] is not compatible");
    nb_tensor *flat = nb_reshape(tr, NB_SHAPE(24));
    assert_false(nb_shares_storage(t, flat));
    float f[24];
    nb_copy_to(flat, f, sizeof f);
    assert_true(f[0] == 0 && f[1] == 12 && f[2] == 4 && f[3] == 16); /* row-major order of the transposed view */
    assert_false(nb_shares_storage(t, nb_contiguous(tr)));
    assert_true(nb_contiguous(t) == t); /* already contiguous: the same tensor */
    assert_false(nb_shares_storage(t, nb_clone(t)));
    nb_scope_end(s);
}

static void test_broadcasting(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_arange(0, 3, 1, NB_F32);
    nb_tensor *b = nb_view(nb_arange(0, 2, 1, NB_F32), NB_SHAPE(2, 1));
    nb_tensor *c = nb_add(a, b);
    nb_shape sh = nb_shape_of(c);
    assert_int_equal(sh.ndim, 2);
    assert_int_equal(sh.dim[0], 2);
    assert_int_equal(sh.dim[1], 3);
    float got[6];
    nb_copy_to(c, got, sizeof got);
    float want[] = { 0, 1, 2, 1, 2, 3 };
    assert_memory_equal(got, want, sizeof want);
    assert_null(nb_add(nb_zeros(NB_SHAPE(2, 3), NB_F32), nb_zeros(NB_SHAPE(4), NB_F32)));
    ASSERT_ERROR_CONTAINS("nb_add: shapes [2, 3] and [4] cannot be broadcast");
    /* dtype promotion as torch */
    assert_int_equal(nb_dtype_of(nb_add(nb_ones(NB_SHAPE(2), NB_I64), nb_ones(NB_SHAPE(2), NB_F32))), NB_F32);
    assert_int_equal(nb_dtype_of(nb_add(nb_ones(NB_SHAPE(2), NB_F64), nb_ones(NB_SHAPE(2), NB_F32))), NB_F64);
    assert_int_equal(nb_dtype_of(nb_div(nb_ones(NB_SHAPE(2), NB_I64), nb_ones(NB_SHAPE(2), NB_I64))), NB_F32);
    assert_int_equal(nb_dtype_of(nb_mul_scalar(nb_ones(NB_SHAPE(2), NB_I64), 2)), NB_I64);
    assert_int_equal(nb_dtype_of(nb_mul_scalar(nb_ones(NB_SHAPE(2), NB_I64), 0.5)), NB_F32);
    assert_int_equal(nb_dtype_of(nb_sum_all(nb_ones(NB_SHAPE(2), NB_U8))), NB_I64);
    assert_int_equal(nb_dtype_of(nb_lt(nb_ones(NB_SHAPE(2), NB_F32), nb_scalar(2))), NB_BOOL);
    nb_scope_end(s);
}

static void test_print(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    float m[] = { 1, 2, 3, 4 };
    expect_format(nb_from_data(m, NB_SHAPE(2, 2), NB_F32), "tensor([[1., 2.],\n        [3., 4.]])");
    float v[] = { 1.5f, -2.25f, 3 };
    expect_format(nb_from_data(v, NB_SHAPE(3), NB_F32), "tensor([ 1.5000, -2.2500,  3.0000])");
    float w[] = { 1e-5f, 1, 1000 };
    expect_format(nb_from_data(w, NB_SHAPE(3), NB_F32), "tensor([1.0000e-05, 1.0000e+00, 1.0000e+03])");
    expect_format(nb_reshape(nb_arange(0, 6, 1, NB_I64), NB_SHAPE(2, 3)), "tensor([[0, 1, 2],\n        [3, 4, 5]])");
    uint8_t b[] = { 1, 0 };
    expect_format(nb_from_data(b, NB_SHAPE(2), NB_BOOL), "tensor([ True, False])");
    expect_format(nb_full(NB_SHAPE(), 3.5, NB_F32), "tensor(3.5000)");
    expect_format(nb_arange(1, 3, 1, NB_F64), "tensor([1., 2.], dtype=torch.float64)");
    expect_format(nb_set_requires_grad(nb_arange(1, 3, 1, NB_F32), true), "tensor([1., 2.], requires_grad=True)");
    expect_format(nb_zeros(NB_SHAPE(2, 0), NB_F32), "tensor([], size=(2, 0))");
    expect_format(nb_arange(0, 2000, 1, NB_F32),
                  "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])");
    expect_format(nb_reshape(nb_arange(0, 24, 1, NB_F32), NB_SHAPE(2, 3, 4)),
                  "tensor([[[ 0.,  1.,  2.,  3.],\n         [ 4.,  5.,  6.,  7.],\n         [ 8.,  9., 10., 11.]],\n\n"
                  "        [[12., 13., 14., 15.],\n         [16., 17., 18., 19.],\n         [20., 21., 22., 23.]]])");
    float nf[] = { NAN, 1.5f, INFINITY };
    expect_format(nb_from_data(nf, NB_SHAPE(3), NB_F32), "tensor([   nan, 1.5000,    inf])");
    nb_tensor *x = nb_set_requires_grad(nb_ones(NB_SHAPE(2), NB_F32), true);
    expect_format(nb_mul(x, x), "tensor([1., 1.], grad_fn=<MulBackward>)");
    nb_scope_end(s);
}

static void test_scopes_and_ownership(void **state) {
    (void)state;
    size_t used0;
    nb_memory_stats(NULL, &used0, NULL);
    nb_tensor *kept;
    nb_scope *outer = nb_scope_begin();
    nb_scope *inner = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(100), NB_F32);
    kept = nb_keep(nb_mul_scalar(a, 3));
    (void)nb_add(a, a);
    nb_scope_end(outer); /* ends the inner scope too */
    (void)inner;
    /* outside a scope, results are owned by the caller */
    nb_tensor *sum = nb_sum_all(kept);
    assert_true(nb_item(sum) == 300.0);
    nb_release(sum);
    nb_release(kept);
    nb_tensor *r = nb_retain(nb_ones(NB_SHAPE(3), NB_F32));
    nb_release(r);
    nb_release(r);
    size_t used1;
    nb_memory_stats(NULL, &used1, NULL);
    assert_int_equal(used0, used1);
    nb_scope_end(outer); /* ending a scope twice is an error, not a crash */
    ASSERT_ERROR_CONTAINS("nb_scope_end");
}

static void test_null_in_null_out(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *bad = nb_matmul(a, nb_ones(NB_SHAPE(4, 5), NB_F32));
    assert_null(bad);
    /* the chain continues with NULL and the first error is kept */
    nb_tensor *chain = nb_relu(nb_add(nb_exp(bad), a));
    assert_null(chain);
    assert_string_equal(nb_error(), "nb_matmul: inner dimensions differ: a is [2, 3] f32, b is [4, 5] f32");
    nb_error_clear();
    assert_null(nb_add(NULL, a));
    ASSERT_ERROR_CONTAINS("nb_add: input 0 is NULL");
    assert_int_equal(nb_backward(NULL), -1);
    nb_error_clear();
    assert_true(isnan(nb_item(NULL)));
    nb_scope_end(s);
}

static void test_error_messages(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(2, 3), NB_F32);
    assert_null(nb_sum(a, 2, false));
    ASSERT_ERROR_CONTAINS("nb_sum: axis 2 is out of range for [2, 3] f32");
    assert_null(nb_transpose(a, 0, -3));
    ASSERT_ERROR_CONTAINS("nb_transpose: axes 0 and -3 are out of range");
    assert_null(nb_view(a, NB_SHAPE(4, 2)));
    ASSERT_ERROR_CONTAINS("nb_view: shape [4, 2] is invalid for input [2, 3] f32 of 6 elements");
    assert_null(nb_expand(a, NB_SHAPE(4, 3)));
    ASSERT_ERROR_CONTAINS("nb_expand: cannot expand [2, 3] f32 to [4, 3]");
    assert_null(nb_cat((nb_tensor *[]){ a, nb_ones(NB_SHAPE(2, 4), NB_F32) }, 2, 0));
    ASSERT_ERROR_CONTAINS("nb_cat: tensor 1 is [2, 4] f32 but tensor 0 is [2, 3] f32");
    assert_null(nb_where(a, a, a));
    ASSERT_ERROR_CONTAINS("nb_where: the condition must be bool, got [2, 3] f32");
    assert_null(nb_sub(nb_ones(NB_SHAPE(2), NB_BOOL), nb_ones(NB_SHAPE(2), NB_BOOL))); /* torch refuses it too */
    ASSERT_ERROR_CONTAINS("nb_sub: dtype bool is not supported");
    int64_t idx[] = { 0, 5 };
    assert_null(nb_index_select(a, 1, nb_from_data(idx, NB_SHAPE(2), NB_I64)));
    ASSERT_ERROR_CONTAINS("nb_index_select: index 5 is out of range for axis 1 of size 3");
    assert_null(nb_index_select(a, 1, nb_ones(NB_SHAPE(2), NB_F32)));
    ASSERT_ERROR_CONTAINS("nb_index_select: indices must be i64 or i32, got [2] f32");
    assert_null(nb_to(a, nb_device_parse("cuda:63"))); /* no machine has 64 GPUs for nabla */
    ASSERT_ERROR_CONTAINS("nb_to: device cuda:63 is not available");
    nb_device bad = nb_device_parse("tpu");
    assert_int_equal(bad.index, -1);
    ASSERT_ERROR_CONTAINS("nb_device_parse: unknown device \"tpu\"");
    assert_int_equal(nb_dim(a, 5), -1);
    ASSERT_ERROR_CONTAINS("nb_dim: axis 5 is out of range");
    assert_true(isnan(nb_item(a)));
    ASSERT_ERROR_CONTAINS("nb_item: tensor [2, 3] f32 has 6 elements, expected 1");
    float small[2];
    assert_int_equal(nb_copy_to(a, small, sizeof small), -1);
    ASSERT_ERROR_CONTAINS("nb_copy_to: destination has 8 bytes, tensor [2, 3] f32 needs 24");
    assert_null(nb_zeros(NB_SHAPE(-1, 2), NB_F32));
    ASSERT_ERROR_CONTAINS("negative dimension");
    assert_null(nb_clamp(a, 1, 0));
    ASSERT_ERROR_CONTAINS("nb_clamp: lower bound 1 is above upper bound 0");
    assert_int_equal(nb_assign(a, nb_ones(NB_SHAPE(3, 3), NB_F32)), -1);
    ASSERT_ERROR_CONTAINS("nb_assign: shapes [2, 3] and [3, 3] cannot be broadcast");
    nb_scope_end(s);
}

static int handler_calls;
static void count_errors(const char *msg, void *user) {
    (void)msg;
    *(int *)user += 1;
}

static void test_error_handler(void **state) {
    (void)state;
    nb_set_error_handler(count_errors, &handler_calls);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_exp(nb_matmul(nb_ones(NB_SHAPE(2, 3), NB_F32), nb_ones(NB_SHAPE(2, 3), NB_F32)));
    assert_null(x);
    nb_scope_end(s);
    nb_set_error_handler(NULL, NULL);
    assert_int_equal(handler_calls, 1); /* the first error only */
    nb_error_clear();
}

static void test_random(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(42);
    nb_tensor *a = nb_rand(NB_SHAPE(1000), NB_F32);
    nb_tensor *n1 = nb_randn(NB_SHAPE(100000), NB_F32);
    nb_manual_seed(42);
    nb_tensor *b = nb_rand(NB_SHAPE(1000), NB_F32);
    nb_tensor *n2 = nb_randn(NB_SHAPE(100000), NB_F32);
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(a, b), NB_I64))) == 1000);
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(n1, n2), NB_I64))) == 100000);
    assert_true(nb_item(nb_min(a, 0, false)) >= 0.0 && nb_item(nb_max(a, 0, false)) < 1.0);
    double mean = nb_item(nb_mean_all(n1)), var = nb_item(nb_var(n1, 0, false));
    assert_true(fabs(mean) < 0.02 && fabs(var - 1.0) < 0.03);
    nb_tensor *c = nb_rand(NB_SHAPE(1000), NB_F32); /* the counter moved on */
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(a, c), NB_I64))) < 10);
    uint64_t seed, off;
    nb_rng_get_state(&seed, &off);
    nb_tensor *d1 = nb_rand(NB_SHAPE(7), NB_F64);
    nb_rng_set_state(seed, off);
    nb_tensor *d2 = nb_rand(NB_SHAPE(7), NB_F64);
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(d1, d2), NB_I64))) == 7);
    nb_scope_end(s);
}

static void test_threads_do_not_change_results(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    double sums[3];
    float samples[3][4];
    static float rows[3][1000], convs[3][4][2048];
    for (int k = 0; k < 3; k++) { /* 1, 2 and 3 threads: 3 splits no loop evenly */
        nb_set_num_threads(k + 1);
        assert_int_equal(nb_get_num_threads(), k + 1);
        nb_manual_seed(7);
        nb_tensor *x = nb_randn(NB_SHAPE(300000), NB_F32);
        nb_tensor *y = nb_mul(nb_exp(nb_mul_scalar(x, 0.1)), x);
        nb_tensor *m = nb_view(nb_slice(x, 0, 0, 300 * 300, 1), NB_SHAPE(300, 300));
        nb_tensor *mm = nb_matmul(m, nb_transpose(m, 0, 1)); /* BLAS with 1 and 2 threads */
        /* one row times a matrix read row by row: its pieces follow the threads (a width of 1000
           splits unevenly in 3) */
        nb_tensor *row = nb_matmul(nb_view(nb_slice(x, 0, 0, 300, 1), NB_SHAPE(1, 300)),
                                   nb_view(nb_slice(x, 0, 0, 300 * 1000, 1), NB_SHAPE(300, 1000)));
        sums[k] = nb_item(nb_sum_all(y)) + nb_item(nb_sum_all(nb_sum(nb_view(y, NB_SHAPE(3000, 100)), 0, false))) +
                  nb_item(nb_sum_all(nb_softmax(mm, 1))) + nb_item(nb_sum_all(mm));
        assert_int_equal(nb_copy_to(row, rows[k], sizeof rows[k]), 0);
        /* convolutions of batch 1 (oneDNN splits these two over a team of the pool's size): 3x3,
           and 7x7 with stride 2 */
        nb_tensor *img = nb_view(nb_slice(x, 0, 0, 16 * 64 * 64, 1), NB_SHAPE(1, 16, 64, 64));
        nb_tensor *c3 = nb_conv2d(img, nb_view(nb_slice(x, 0, 1000, 1000 + 64 * 16 * 9, 1), NB_SHAPE(64, 16, 3, 3)), NULL,
                                  (nb_conv_opts){ .padding = { 1, 1 } });
        nb_tensor *c7 = nb_conv2d(img, nb_view(nb_slice(x, 0, 5000, 5000 + 64 * 16 * 49, 1), NB_SHAPE(64, 16, 7, 7)), NULL,
                                  (nb_conv_opts){ .stride = { 2, 2 }, .padding = { 3, 3 } });
        assert_int_equal(nb_copy_to(nb_slice(nb_reshape(c3, NB_SHAPE(-1)), 0, 0, 2048, 1), convs[k][0], sizeof convs[k][0]), 0);
        assert_int_equal(nb_copy_to(nb_slice(nb_reshape(c7, NB_SHAPE(-1)), 0, 2000, 4048, 1), convs[k][1], sizeof convs[k][1]), 0);
        /* a smaller one (12.5M multiply-adds), cut into pieces of output channels (32, 32, 16): the
           values across the first cut */
        nb_tensor *c5 = nb_conv2d(nb_view(nb_slice(x, 0, 0, 32 * 14 * 14, 1), NB_SHAPE(1, 32, 14, 14)),
                                  nb_view(nb_slice(x, 0, 9000, 9000 + 80 * 32 * 25, 1), NB_SHAPE(80, 32, 5, 5)),
                                  nb_view(nb_slice(x, 0, 100, 180, 1), NB_SHAPE(80)), (nb_conv_opts){ .padding = { 2, 2 } });
        assert_int_equal(nb_copy_to(nb_slice(nb_reshape(c5, NB_SHAPE(-1)), 0, 31 * 196 - 1024, 31 * 196 + 1024, 1), convs[k][2],
                                    sizeof convs[k][2]), 0);
        /* a wide 1x1 one (51M multiply-adds: a ResNet-50 layer-3 shape), whole on the team at
           any thread count, never cut by channels at one thread */
        nb_tensor *c1 = nb_conv2d(nb_view(nb_slice(x, 0, 0, 256 * 196, 1), NB_SHAPE(1, 256, 14, 14)),
                                  nb_view(nb_slice(x, 0, 20000, 20000 + 1024 * 256, 1), NB_SHAPE(1024, 256, 1, 1)), NULL,
                                  (nb_conv_opts){ 0 });
        assert_int_equal(nb_copy_to(nb_slice(nb_reshape(c1, NB_SHAPE(-1)), 0, 32 * 196 - 1024, 32 * 196 + 1024, 1), convs[k][3],
                                    sizeof convs[k][3]), 0);
        nb_copy_to(nb_slice(x, 0, 299996, 300000, 1), samples[k], sizeof samples[k]);
    }
    nb_set_num_threads(0);
    for (int k = 1; k < 3; k++) {
        assert_memory_equal(&sums[0], &sums[k], sizeof(double));
        assert_memory_equal(samples[0], samples[k], sizeof samples[0]);
        assert_memory_equal(rows[0], rows[k], sizeof rows[0]);
        assert_memory_equal(convs[0], convs[k], sizeof convs[0]);
    }
    nb_scope_end(s);
}

static void test_half_types(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    float vals[] = { 0.5f, -1.25f, 65504.0f, 1e-7f, 3.140625f };
    nb_tensor *f = nb_from_data(vals, NB_SHAPE(5), NB_F32);
    nb_tensor *h = nb_cast(f, NB_F16), *bh = nb_cast(f, NB_BF16);
    float back[5];
    nb_copy_to(nb_cast(h, NB_F32), back, sizeof back);
    assert_true(back[0] == 0.5f && back[1] == -1.25f && back[2] == 65504.0f && back[4] == 3.140625f);
    assert_true(fabsf(back[3] - 1e-7f) < 3e-8f); /* a subnormal in f16: spacing 6e-8 */
    nb_copy_to(nb_cast(bh, NB_F32), back, sizeof back);
    assert_true(back[0] == 0.5f && back[1] == -1.25f && back[4] == 3.140625f);
    /* ops on storage types compute in f32 and hand back the storage type */
    nb_tensor *sum = nb_add(h, h);
    assert_int_equal(nb_dtype_of(sum), NB_F16);
    assert_true(nb_item(nb_slice(sum, 0, 1, 2, 1)) == -2.5);
    assert_int_equal(nb_dtype_of(nb_mul(bh, f)), NB_F32);
    uint16_t raw;
    nb_copy_to(nb_slice(h, 0, 0, 1, 1), &raw, sizeof raw);
    assert_int_equal(raw, 0x3800); /* 0.5 in IEEE half */
    nb_scope_end(s);
}

/* i8: its size and name, casts both ways with torch 1.13's values (float to i8 truncates through
   int32 and wraps; beyond int32 and NaN give 0), wrapping arithmetic, promotion, fills, printing.
   Elementwise values against torch at large are in test_ops_torch (the *_i8 cases). */
static void test_i8(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    assert_int_equal(nb_dtype_size(NB_I8), 1);
    assert_string_equal(nb_dtype_name(NB_I8), "i8");
    assert_int_equal(NB_BOOL, 7); /* the codes before i8 are unchanged */
    double f[] = { -2.7, -0.5, 0.5, 2.7, 127.9, -128.9, 200.7, -200.7, 300, 1000.5, 1e10, -1e10, NAN, INFINITY,
                   -INFINITY, 2147483648.0 + 256, 2147483647.0, -2147483648.0 };
    const int8_t want[] = { -2, 0, 0, 2, 127, -128, -56, 56, 44, -24, 0, 0, 0, 0, 0, 0, -1, 0 };
    enum { NF = sizeof want };
    int8_t got[NF];
    for (int k = 0; k < 2; k++) { /* from f64 and from f32 (each value here is exact in f32 or rounds alike) */
        nb_tensor *src = nb_from_data(f, NB_SHAPE(NF), NB_F64);
        if (k) src = nb_cast(src, NB_F32);
        nb_tensor *c = nb_cast(src, NB_I8);
        assert_int_equal(nb_dtype_of(c), NB_I8);
        assert_int_equal(nb_copy_to(c, got, sizeof got), 0);
        for (int i = 0; i < (k ? NF - 2 : NF); i++)
            if (got[i] != want[i]) fail_msg("cast %s %g to i8: %d, torch gives %d", k ? "f32" : "f64", f[i], got[i], want[i]);
    }
    /* integers keep their low byte exactly, even beyond 2^53 */
    int64_t big[] = { 200, -200, ((int64_t)1 << 60) + 77, INT64_MIN + 3, 127 };
    nb_copy_to(nb_cast(nb_from_data(big, NB_SHAPE(5), NB_I64), NB_I8), got, 5);
    assert_true(got[0] == -56 && got[1] == 56 && got[2] == 77 && got[3] == 3 && got[4] == 127);
    int8_t v[] = { 100, -100, 127, -128 };
    nb_tensor *a = nb_from_data(v, NB_SHAPE(4), NB_I8);
    uint8_t u8[4];
    nb_copy_to(nb_cast(a, NB_U8), u8, 4);
    assert_true(u8[0] == 100 && u8[1] == 156 && u8[2] == 127 && u8[3] == 128);
    double back[4];
    nb_copy_to(nb_cast(a, NB_F64), back, sizeof back);
    assert_true(back[0] == 100 && back[1] == -100 && back[2] == 127 && back[3] == -128);
    /* wrapping arithmetic, as torch */
    nb_copy_to(nb_add(a, a), got, 4);
    assert_true(got[0] == -56 && got[1] == 56 && got[2] == -2 && got[3] == 0);
    nb_copy_to(nb_neg(a), got, 4);
    assert_true(got[0] == -100 && got[3] == -128);
    nb_copy_to(nb_mul_scalar(a, 3), got, 4);
    assert_true(got[0] == 44 && got[1] == -44 && got[2] == 125 && got[3] == -128);
    nb_copy_to(nb_add_scalar(a, 300), got, 4);
    assert_true(got[0] == -112 && got[1] == -56 && got[2] == -85 && got[3] == -84);
    assert_true(nb_item(nb_sum_all(a)) == -1 && nb_dtype_of(nb_sum_all(a)) == NB_I64);
    assert_true(nb_item(nb_max(a, 0, false)) == 127 && nb_item(nb_argmin(a, 0, false)) == 3);
    /* promotion: i8 with u8 gives i32 (torch's i16 is absent); the rest as torch */
    nb_tensor *u = nb_from_data((uint8_t[]){ 1, 2, 255, 0 }, NB_SHAPE(4), NB_U8);
    nb_tensor *sum = nb_add(a, u);
    assert_int_equal(nb_dtype_of(sum), NB_I32);
    int32_t s32[4];
    nb_copy_to(sum, s32, sizeof s32);
    assert_true(s32[0] == 101 && s32[1] == -98 && s32[2] == 382 && s32[3] == -128);
    assert_int_equal(nb_dtype_of(nb_mul(u, a)), NB_I32);
    assert_int_equal(nb_dtype_of(nb_add(a, nb_cast(u, NB_I64))), NB_I64);
    assert_int_equal(nb_dtype_of(nb_add(a, nb_cast(u, NB_BOOL))), NB_I8);
    assert_int_equal(nb_dtype_of(nb_add(a, nb_full(NB_SHAPE(), 5, NB_I64))), NB_I8); /* a 0-d operand of the same kind */
    assert_int_equal(nb_dtype_of(nb_mul(a, nb_ones(NB_SHAPE(4), NB_F32))), NB_F32);
    assert_int_equal(nb_dtype_of(nb_add_scalar(a, 0.5)), NB_F32);
    assert_int_equal(nb_dtype_of(nb_div(a, a)), NB_F32);
    /* creation and fills wrap like the cast */
    nb_copy_to(nb_full(NB_SHAPE(2), 200, NB_I8), got, 2);
    assert_true(got[0] == -56 && got[1] == -56);
    assert_true(nb_item(nb_sum_all(nb_ones(NB_SHAPE(5), NB_I8))) == 5 && nb_item(nb_slice(nb_arange(-3, 3, 1, NB_I8), 0, 0, 1, 1)) == -3);
    /* printing, as torch */
    expect_format(a, "tensor([ 100, -100,  127, -128], dtype=torch.int8)");
    expect_format(nb_reshape(nb_arange(-2, 2, 1, NB_I8), NB_SHAPE(2, 2)), "tensor([[-2, -1],\n        [ 0,  1]], dtype=torch.int8)");
    expect_format(nb_full(NB_SHAPE(), -7, NB_I8), "tensor(-7, dtype=torch.int8)");
    /* an i8 result carries no gradient (as any integer result) */
    nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(4), NB_F32), true);
    assert_false(nb_requires_grad(nb_cast(w, NB_I8)));
    assert_null(nb_error());
    nb_scope_end(s);
}

static void test_assign(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_zeros(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *alias = nb_transpose(w, 0, 1);
    assert_int_equal(nb_assign(w, nb_arange(0, 3, 1, NB_F32)), 0);
    assert_true(nb_item(nb_sum_all(w)) == 6.0);
    assert_true(nb_item(nb_sum_all(alias)) == 6.0); /* views see the write */
    /* overlapping source and destination: shift by one element */
    nb_tensor *flat = nb_view(w, NB_SHAPE(6));
    assert_int_equal(nb_assign(nb_slice(flat, 0, 1, 6, 1), nb_slice(flat, 0, 0, 5, 1)), 0);
    float got[6];
    nb_copy_to(flat, got, sizeof got);
    float want[] = { 0, 0, 1, 2, 0, 1 };
    assert_memory_equal(got, want, sizeof want);
    nb_tensor *p = nb_set_requires_grad(nb_ones(NB_SHAPE(2), NB_F32), true);
    assert_int_equal(nb_assign(p, nb_zeros(NB_SHAPE(2), NB_F32)), -1);
    ASSERT_ERROR_CONTAINS("requires grad");
    bool prev = nb_set_grad_enabled(false);
    assert_int_equal(nb_assign(p, nb_zeros(NB_SHAPE(2), NB_F32)), 0);
    nb_set_grad_enabled(prev);
    assert_true(nb_item(nb_sum_all(p)) == 0.0);
    nb_scope_end(s);
}

/* nb_set_flush_denormal: denormal inputs read as zero and denormal results become zero on every
   kernel thread (the tensors are large enough to run in parallel); off restores IEEE. */
static float last_of(nb_tensor *t) { return ((const float *)nb_data_ptr(t))[nb_numel(t) - 1]; }
static float first_of(nb_tensor *t) { return ((const float *)nb_data_ptr(t))[0]; }

static void test_flush_denormal(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_set_num_threads(2);
    nb_tensor *tiny = nb_full(NB_SHAPE(200000), 1e-39, NB_F32), *small = nb_full(NB_SHAPE(200000), 1e-30, NB_F32);
    nb_tensor *r = nb_mul_scalar(tiny, 1.0);
    assert_true(first_of(r) > 0 && last_of(r) > 0); /* IEEE by default */
    if (!nb_set_flush_denormal(true)) {
        nb_scope_end(s);
        skip(); /* not an x86 CPU */
    }
    r = nb_mul_scalar(tiny, 1.0);
    assert_true(first_of(r) == 0 && last_of(r) == 0); /* denormal inputs read as zero */
    r = nb_mul_scalar(small, 1e-10);
    assert_true(first_of(r) == 0 && last_of(r) == 0); /* denormal results become zero */
    r = nb_mul_scalar(small, 1e-5);
    const float normal = 1e-30f * 1e-5f;
    assert_true(first_of(r) == normal && last_of(r) == normal); /* normal numbers unchanged */
    assert_true(nb_set_flush_denormal(false));
    r = nb_mul_scalar(small, 1e-10);
    assert_true(first_of(r) > 0 && last_of(r) > 0);
    nb_set_num_threads(0);
    nb_scope_end(s);
}

/* Sizes computed from user shapes are checked for overflow: each is an error naming the shape,
   never a tensor whose element count wrapped to something small. */
static void expect_too_large(nb_tensor *t, const char *fn) {
    assert_null(t);
    assert_non_null(nb_error());
    if (!strstr(nb_error(), fn) || !strstr(nb_error(), "too large")) fail_msg("unexpected error: %s", nb_error());
    nb_error_clear();
}

static void test_size_overflow(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    expect_too_large(nb_zeros(NB_SHAPE(1LL << 32, 1LL << 32, 4), NB_F32), "[4294967296, 4294967296, 4]");
    expect_too_large(nb_ones(NB_SHAPE(1LL << 62, 4), NB_F32), "nb_full");
    expect_too_large(nb_empty(NB_SHAPE(1LL << 61, 2), NB_F64), "nb_empty"); /* elements fit, bytes do not */
    /* a zero dimension beside huge ones: numel 0, but the strides would overflow */
    expect_too_large(nb_zeros(NB_SHAPE(0, 1LL << 40, 1LL << 40), NB_F32), "nb_full");
    nb_tensor *b = nb_ones(NB_SHAPE(1, 8), NB_F32);
    expect_too_large(nb_expand(b, NB_SHAPE(1LL << 62, 8)), "nb_expand");
    expect_too_large(nb_expand(b, NB_SHAPE(1LL << 40, 1LL << 40, 8)), "nb_expand");
    /* slice bounds at the ends of int64 are clamped, without overflow */
    nb_tensor *v = nb_slice(b, 1, INT64_MIN, INT64_MAX, INT64_MAX);
    assert_non_null(v);
    assert_int_equal(nb_dim(v, 1), 1);
    v = nb_slice(b, 1, 3, INT64_MAX, INT64_MAX - 1);
    assert_int_equal(nb_dim(v, 1), 1);
    assert_true(nb_item(v) == 1.0);
    v = nb_slice(b, 1, INT64_MAX, INT64_MIN, 1);
    assert_int_equal(nb_dim(v, 1), 0);
    v = nb_slice(b, 1, 1, 8, 3); /* 1, 4, 7 */
    assert_int_equal(nb_dim(v, 1), 3);
    assert_null(nb_error());
    nb_scope_end(s);
}

/* A thread's release queue (the tensors freed while another is being freed: a graph's inputs
   released by its output's node) is its own, and goes when the thread ends. Each thread here
   frees a chain of nodes, which fills the queue, and exits; the bytes in use must come back to
   what they were (2 KB a thread stayed, held by the ended thread; LeakSanitizer reported it). */
static void *release_chain(void *arg) {
    (void)arg;
    nb_tensor *x = nb_set_requires_grad(nb_ones(NB_SHAPE(4), NB_F32), true);
    nb_tensor *y = nb_mul_scalar(x, 2);
    nb_release(x); /* y's node holds the last reference: freed inside y's release */
    for (int i = 0; i < 40; i++) {
        nb_tensor *z = nb_add_scalar(y, 1);
        nb_release(y);
        y = z;
    }
    nb_release(y);
    return nb_error() ? (void *)1 : NULL;
}

static void test_thread_exit_frees_release_queue(void **state) {
    (void)state;
    size_t used0, used1;
    nb_memory_stats(NULL, &used0, NULL);
    for (int round = 0; round < 2; round++) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, release_chain, NULL), 0);
        for (int i = 0; i < 4; i++) {
            void *r;
            pthread_join(t[i], &r);
            assert_null(r);
        }
    }
    nb_memory_stats(NULL, &used1, NULL);
    if (used1 != used0) fail_msg("%zu bytes in use after the threads ended, %zu before", used1, used0);
}

/* Enum values from outside their enum (a dtype of 42 or -1, one past the last) are errors naming
   the entry and the value, before any table is indexed with them (nb_empty read past the
   dtype-size table, and -1 crashed). */
static void test_enum_ranges(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3), NB_F32);
    const int bad[] = { -1, 42, NB_DTYPE_COUNT }; /* -1 first: it crashed nb_empty */
    char want[64];
    for (int k = 0; k < 3; k++) {
        nb_dtype d = (nb_dtype)bad[k];
        snprintf(want, sizeof want, "dtype %d is not an nb_dtype value", bad[k]);
#define EXPECT_BAD(call, fn)                                                                          \
        do {                                                                                          \
            assert_null(call);                                                                        \
            if (!nb_error() || strncmp(nb_error(), fn ": ", strlen(fn) + 2)) fail_msg("%s: %s", fn, nb_error()); \
            ASSERT_ERROR_CONTAINS(want);                                                              \
        } while (0)
        EXPECT_BAD(nb_empty(NB_SHAPE(2), d), "nb_empty");
        EXPECT_BAD(nb_zeros(NB_SHAPE(2), d), "nb_zeros");
        EXPECT_BAD(nb_full(NB_SHAPE(2), 1, d), "nb_full");
        EXPECT_BAD(nb_randn(NB_SHAPE(2), d), "nb_randn");
        EXPECT_BAD(nb_arange(0, 3, 1, d), "nb_arange");
        EXPECT_BAD(nb_from_data((float[]){ 1, 2 }, NB_SHAPE(2), d), "nb_from_data");
        EXPECT_BAD(nb_eye(2, 2, d), "nb_eye");
        EXPECT_BAD(nb_linspace(0, 1, 3, d), "nb_linspace");
        EXPECT_BAD(nb_cast(x, d), "nb_cast");
        assert_int_equal(nb_autocast(d), NB_F32); /* the previous setting, unchanged */
        ASSERT_ERROR_CONTAINS(want);
        assert_int_equal(nb_autocast_dtype(), NB_F32);
#undef EXPECT_BAD
    }
    /* a device type, a reduction and a padding mode */
    assert_null(nb_to(x, (nb_device){ (nb_device_type)-1, 0 }));
    ASSERT_ERROR_CONTAINS("nb_to: device type -1 is not an nb_device_type value");
    assert_null(nb_mse_loss(x, x, (nb_reduction)42));
    ASSERT_ERROR_CONTAINS("nb_mse_loss: reduction 42 is not an nb_reduction value");
    assert_null(nb_cross_entropy(x, nb_zeros(NB_SHAPE(2), NB_I64), (nb_ce_opts){ .reduction = (nb_reduction)-1 }));
    ASSERT_ERROR_CONTAINS("nb_cross_entropy: reduction -1 is not an nb_reduction value");
    assert_null(nb_pad(x, (int64_t[]){ 1, 1 }, 2, (nb_pad_mode)-1, 0));
    ASSERT_ERROR_CONTAINS("nb_pad: mode -1 is not an nb_pad_mode value");
    assert_null(nb_interpolate(nb_ones(NB_SHAPE(1, 1, 2, 2), NB_F32), (nb_interp_opts){ .size = { 4, 4 }, .mode = (nb_interp_mode)7 }));
    ASSERT_ERROR_CONTAINS("nb_interpolate: mode 7 is not an nb_interp_mode value");
    nb_scope_end(s);
}

/* Non-finite values print as torch 1.13 prints them: the column width comes from the nonzero
   finite values only, so inf, -inf and nan are padded to it, never widen it. */
static void test_print_nonfinite(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    const float I = INFINITY, N = NAN;
    struct { float v[3]; int n; const char *want; } cases[] = {
        { { I, 1, -I }, 3, "tensor([inf, 1., -inf])" },
        { { I, 1.5f, -I }, 3, "tensor([   inf, 1.5000,   -inf])" },
        { { N, 1, -2 }, 3, "tensor([nan,  1., -2.])" },
        { { N, I }, 2, "tensor([nan, inf])" },
        { { I }, 1, "tensor([inf])" },
        { { -I, 2, N }, 3, "tensor([-inf, 2., nan])" },
        { { 1e-5f, I, 1000 }, 3, "tensor([1.0000e-05,        inf, 1.0000e+03])" },
        { { 1e10f, I }, 2, "tensor([1.0000e+10,        inf])" },
        { { 0, -I }, 2, "tensor([0., -inf])" },
        { { N, -1.5f, 1e6f }, 3, "tensor([        nan, -1.5000e+00,  1.0000e+06])" },
        { { 1e9f, N, -I }, 3, "tensor([1.0000e+09,        nan,       -inf])" },
        { { 100, -I }, 2, "tensor([100., -inf])" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_format(nb_from_data(cases[i].v, NB_SHAPE(cases[i].n), NB_F32), cases[i].want);
    float m[] = { I, -1, N, 12 };
    expect_format(nb_from_data(m, NB_SHAPE(2, 2), NB_F32), "tensor([[inf, -1.],\n        [nan, 12.]])");
    double d[] = { -INFINITY, 1 };
    expect_format(nb_from_data(d, NB_SHAPE(2), NB_F64), "tensor([-inf, 1.], dtype=torch.float64)");
    int64_t iv[] = { -12, 3, 100 };
    expect_format(nb_from_data(iv, NB_SHAPE(3), NB_I64), "tensor([-12,   3, 100])");
    nb_scope_end(s);
}

/* Signed zeros as torch: neg flips the sign of a zero, relu keeps -0, sign of -0 is 0. */
static void test_signed_zeros(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F64 : NB_F32;
        nb_tensor *z = nb_cast(nb_from_data((float[]){ 0.0f, -0.0f }, NB_SHAPE(2), NB_F32), dt);
        double v[2];
        assert_int_equal(nb_copy_to(nb_cast(nb_neg(z), NB_F64), v, sizeof v), 0);
        assert_true(signbit(v[0]) && !signbit(v[1]));
        assert_int_equal(nb_copy_to(nb_cast(nb_relu(z), NB_F64), v, sizeof v), 0);
        assert_true(!signbit(v[0]) && signbit(v[1]));
        assert_int_equal(nb_copy_to(nb_cast(nb_mul_scalar(z, -1), NB_F64), v, sizeof v), 0);
        assert_true(signbit(v[0]) && !signbit(v[1]));
    }
    nb_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_creation, clear_error_setup),
        cmocka_unit_test_setup(test_views_share_storage, clear_error_setup),
        cmocka_unit_test_setup(test_broadcasting, clear_error_setup),
        cmocka_unit_test_setup(test_print, clear_error_setup),
        cmocka_unit_test_setup(test_scopes_and_ownership, clear_error_setup),
        cmocka_unit_test_setup(test_null_in_null_out, clear_error_setup),
        cmocka_unit_test_setup(test_error_messages, clear_error_setup),
        cmocka_unit_test_setup(test_error_handler, clear_error_setup),
        cmocka_unit_test_setup(test_random, clear_error_setup),
        cmocka_unit_test_setup(test_threads_do_not_change_results, clear_error_setup),
        cmocka_unit_test_setup(test_flush_denormal, clear_error_setup),
        cmocka_unit_test_setup(test_half_types, clear_error_setup),
        cmocka_unit_test_setup(test_assign, clear_error_setup),
        cmocka_unit_test_setup(test_i8, clear_error_setup),
        cmocka_unit_test_setup(test_size_overflow, clear_error_setup),
        cmocka_unit_test_setup(test_enum_ranges, clear_error_setup),
        cmocka_unit_test_setup(test_thread_exit_frees_release_queue, clear_error_setup),
        cmocka_unit_test_setup(test_print_nonfinite, clear_error_setup),
        cmocka_unit_test_setup(test_signed_zeros, clear_error_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
