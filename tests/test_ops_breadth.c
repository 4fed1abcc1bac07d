/* The breadth issue's ops where torch cannot be the reference, or where the contract is more than
   values: the random draws (ranges, frequencies, determinism under a seed), split and chunk
   (counts, views, the caller's room), sorting's independence of the thread count, and the
   errors each op gives for bad arguments. Values are checked against torch in test_ops_torch. */
#include "test_util.h"
#include <math.h>
#include <string.h>

static void values_i64(nb_tensor *t, int64_t *v, int64_t n) {
    assert_int_equal(nb_numel(t), n);
    assert_int_equal(nb_copy_to(nb_cast(t, NB_I64), v, sizeof(int64_t) * (size_t)n), 0);
}

static void expect_error(nb_tensor *t, const char *needle) {
    assert_null(t);
    assert_non_null(nb_error());
    if (!strstr(nb_error(), needle)) fail_msg("error \"%s\" does not mention \"%s\"", nb_error(), needle);
    nb_error_clear();
}

static void test_randint_randperm(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(7);
    enum { N = 60000 };
    static int64_t v[N];
    values_i64(nb_randint(-3, 4, NB_SHAPE(N)), v, N);
    int count[7] = { 0 };
    for (int i = 0; i < N; i++) {
        assert_true(v[i] >= -3 && v[i] < 4);
        count[v[i] + 3]++;
    }
    for (int k = 0; k < 7; k++) assert_true(fabs(count[k] - N / 7.0) < 5 * sqrt(N / 7.0)); /* 5 sigma */
    /* a permutation, and the same one again under the same seed */
    int64_t p[1000], q[1000];
    bool seen[1000] = { false };
    nb_manual_seed(11);
    values_i64(nb_randperm(1000), p, 1000);
    for (int i = 0; i < 1000; i++) {
        assert_true(p[i] >= 0 && p[i] < 1000 && !seen[p[i]]);
        seen[p[i]] = true;
    }
    nb_manual_seed(11);
    values_i64(nb_randperm(1000), q, 1000);
    assert_memory_equal(p, q, sizeof p);
    assert_int_equal(nb_numel(nb_randperm(0)), 0);
    expect_error(nb_randint(5, 5, NB_SHAPE(3)), "empty");
    expect_error(nb_randperm(-1), "non-negative");
    nb_scope_end(s);
}

static void test_bernoulli(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_tensor *p = nb_full(NB_SHAPE(50000), 0.3, NB_F32);
    nb_tensor *b = nb_bernoulli(p);
    assert_int_equal(nb_dtype_of(b), NB_F32);
    double mean = nb_item(nb_mean_all(b));
    assert_true(fabs(mean - 0.3) < 5 * sqrt(0.3 * 0.7 / 50000));
    float edge[] = { 0, 1, 0, 1 };
    float got[4];
    assert_int_equal(nb_copy_to(nb_bernoulli(nb_from_data(edge, NB_SHAPE(4), NB_F32)), got, sizeof got), 0);
    assert_memory_equal(got, edge, sizeof got);
    expect_error(nb_bernoulli(nb_full(NB_SHAPE(2), 1.5, NB_F32)), "[0, 1]");
    expect_error(nb_bernoulli(nb_full(NB_SHAPE(2), 1, NB_I64)), "float");
    nb_scope_end(s);
}

static void test_multinomial(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    /* weights 1 : 0 : 3 : 4 (unnormalised): frequencies 1/8, 0, 3/8, 1/2; category 1 never drawn */
    float w[] = { 1, 0, 3, 4, 0, 2, 0, 2 };
    nb_tensor *probs = nb_from_data(w, NB_SHAPE(2, 4), NB_F32);
    enum { N = 40000 };
    static int64_t v[2 * N];
    values_i64(nb_multinomial(probs, N, true), v, 2 * N);
    int count[2][4] = { { 0 } };
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N; i++) count[r][v[r * N + i]]++;
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++) {
            double e = N * w[r * 4 + k] / (r ? 4.0 : 8.0);
            if (w[r * 4 + k] == 0) assert_int_equal(count[r][k], 0);
            else assert_true(fabs(count[r][k] - e) < 5 * sqrt(e));
        }
    /* without replacement: distinct categories, zero weights last to never */
    int64_t d[3];
    for (int t = 0; t < 50; t++) {
        values_i64(nb_multinomial(nb_from_data(w, NB_SHAPE(4), NB_F32), 3, false), d, 3);
        assert_true(d[0] != d[1] && d[1] != d[2] && d[0] != d[2]);
        for (int k = 0; k < 3; k++) assert_true(d[k] != 1);
    }
    /* the first draw without replacement follows the weights too */
    int first[4] = { 0 };
    for (int t = 0; t < 4000; t++) {
        values_i64(nb_multinomial(nb_from_data(w, NB_SHAPE(4), NB_F32), 1, false), d, 1);
        first[d[0]]++;
    }
    assert_true(fabs((double)first[3] - 2000) < 5 * sqrt(2000.0 * 0.5));
    expect_error(nb_multinomial(nb_from_data(w, NB_SHAPE(4), NB_F32), 4, false), "positive weight");
    float neg[] = { 1, -1 };
    expect_error(nb_multinomial(nb_from_data(neg, NB_SHAPE(2), NB_F32), 1, true), "non-negative");
    float zero[] = { 0, 0 };
    expect_error(nb_multinomial(nb_from_data(zero, NB_SHAPE(2), NB_F32), 1, true), "no positive weight");
    nb_scope_end(s);
}

static void test_split_chunk(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_reshape(nb_arange(0, 21, 1, NB_F32), NB_SHAPE(7, 3));
    nb_tensor *p[8];
    assert_int_equal(nb_split(x, 3, 0, p, 8), 3);
    assert_int_equal(nb_dim(p[2], 0), 1);
    assert_true(nb_shares_storage(p[1], x));
    assert_int_equal(nb_chunk(x, 4, 0, p, 8), 4); /* ceil(7 / 4) = 2 each: 2, 2, 2, 1 */
    assert_int_equal(nb_dim(p[3], 0), 1);
    assert_int_equal(nb_chunk(nb_arange(0, 6, 1, NB_F32), 4, 0, p, 8), 3); /* torch gives 3 pieces of 2 */
    assert_int_equal(nb_split(x, 1, 0, p, 4), -1);
    assert_non_null(strstr(nb_error(), "room for 4"));
    nb_error_clear();
    assert_int_equal(nb_split(x, 0, 0, p, 8), -1);
    nb_error_clear();
    assert_int_equal(nb_chunk(x, 2, 5, p, 8), -1);
    assert_non_null(strstr(nb_error(), "out of range"));
    nb_error_clear();
    nb_scope_end(s);
}

/* Lanes are sorted in parallel above the grain: the same indices on 1 thread and on 2. */
static void test_sort_threads(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(9);
    nb_tensor *x = nb_floor(nb_mul_scalar(nb_rand(NB_SHAPE(400, 300), NB_F32), 20)); /* many ties */
    enum { N = 400 * 300 };
    static int64_t a[N], b[N];
    int prev = nb_get_num_threads();
    nb_set_num_threads(1);
    values_i64(nb_argsort(x, 1, false), a, N);
    nb_set_num_threads(2);
    values_i64(nb_argsort(x, 1, false), b, N);
    nb_set_num_threads(prev);
    assert_memory_equal(a, b, sizeof a);
    /* and stable: equal values keep their order */
    float v[300];
    assert_int_equal(nb_copy_to(nb_slice(x, 0, 0, 1, 1), v, sizeof v), 0);
    for (int i = 1; i < 300; i++) {
        assert_true(v[a[i]] >= v[a[i - 1]]);
        if (v[a[i]] == v[a[i - 1]]) assert_true(a[i] > a[i - 1]);
    }
    nb_scope_end(s);
}

static void test_errors(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(2, 3), NB_F32);
    expect_error(nb_topk(x, 4, 1, true, NULL), "k 4 is larger");
    expect_error(nb_topk(x, -1, 1, true, NULL), "non-negative");
    expect_error(nb_cumsum(x, 2), "out of range");
    expect_error(nb_flip(x, (int[]){ 1, -1 }, 2), "twice");
    expect_error(nb_tril(nb_ones(NB_SHAPE(3), NB_F32), 0), "at least 2 dimensions");
    expect_error(nb_diagonal(x, 0, 1, -1), "both axes");
    expect_error(nb_pad(x, (int64_t[]){ 3, 0 }, 2, NB_PAD_REFLECT, 0), "below the size");
    expect_error(nb_pad(x, (int64_t[]){ 1 }, 1, NB_PAD_CONSTANT, 0), "pairs");
    expect_error(nb_pad(x, (int64_t[]){ -1, 0 }, 2, NB_PAD_REPLICATE, 0), "does not fit");
    expect_error(nb_repeat(x, (int64_t[]){ 2, -1 }, 2), "negative");
    expect_error(nb_masked_fill(x, x, 0), "must be bool");
    expect_error(nb_one_hot(x, 3), "integer class indices");
    expect_error(nb_norm(nb_ones(NB_SHAPE(2), NB_I64), 2, 0, false), "float");
    expect_error(nb_linspace(0, 1, -1, NB_F32), "steps");
    expect_error(nb_eye(-1, 2, NB_F32), "non-negative");
    expect_error(nb_cumsum(NULL, 0), "NULL");
    nb_scope_end(s);
}

/* index / index_put beyond the torch reference: repeats resolved in a fixed order at every thread
   count, f16 and bool accumulation as torch, values converted to x's dtype, i32 indices, the
   errors (each naming the index and the size), and broadcast indices too large to exist. */
static void test_index_put(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    enum { N = 5000 };
    static int64_t rep[N];
    for (int i = 0; i < N; i++) rep[i] = (i * 7) % 3; /* 0, 1, 2, 0, ... with the last of each near the end */
    nb_tensor *idx = nb_from_data(rep, NB_SHAPE(N), NB_I64);
    nb_tensor *vals = nb_arange(0, N, 1, NB_F32), *x = nb_zeros(NB_SHAPE(3, 1), NB_F32);
    for (int threads = 1; threads <= 4; threads *= 2) {
        nb_set_num_threads(threads);
        float last[3], sum[3];
        nb_copy_to(nb_index_put(x, &idx, 1, nb_reshape(vals, NB_SHAPE(N, 1)), false), last, sizeof last);
        nb_copy_to(nb_index_put(x, &idx, 1, nb_reshape(vals, NB_SHAPE(N, 1)), true), sum, sizeof sum);
        float want_sum[3] = { 0 };
        for (int i = 0; i < N; i++) want_sum[rep[i]] += (float)i; /* in index order, as the kernel */
        for (int k = 0; k < 3; k++) {
            int lastk = N - 1;
            while (rep[lastk] != k) lastk--;
            assert_true(last[k] == (float)lastk);
            assert_true(sum[k] == want_sum[k]);
        }
    }
    nb_set_num_threads(0);
    /* f16 adds in f32 and rounds each time (torch gives 1001), bool accumulates as or */
    nb_tensor *h = nb_index_put(nb_zeros(NB_SHAPE(3), NB_F16), (nb_tensor *[]){ nb_zeros(NB_SHAPE(3), NB_I64) }, 1,
                                nb_cast(nb_from_data((float[]){ 1000, 0.3f, 0.3f }, NB_SHAPE(3), NB_F32), NB_F16), true);
    assert_int_equal(nb_dtype_of(h), NB_F16);
    assert_true(nb_item(nb_slice(h, 0, 0, 1, 1)) == 1001);
    int64_t i011[] = { 0, 1, 1 };
    nb_tensor *b = nb_index_put(nb_from_data((uint8_t[]){ 1, 0, 0 }, NB_SHAPE(3), NB_BOOL),
                                (nb_tensor *[]){ nb_from_data(i011, NB_SHAPE(3), NB_I64) }, 1, nb_full(NB_SHAPE(), 1, NB_BOOL), true);
    uint8_t bv[3];
    nb_copy_to(b, bv, 3);
    assert_true(bv[0] == 1 && bv[1] == 1 && bv[2] == 0);
    /* values of another dtype are converted (as x[idx] = v), the gradient going back in theirs */
    nb_tensor *v64 = nb_set_requires_grad(nb_from_data((double[]){ 2.5, -1 }, NB_SHAPE(2), NB_F64), true);
    nb_tensor *i32 = nb_from_data((int32_t[]){ 2, -3 }, NB_SHAPE(2), NB_I32);
    nb_tensor *y = nb_index_put(nb_zeros(NB_SHAPE(3), NB_F32), &i32, 1, v64, false);
    assert_int_equal(nb_dtype_of(y), NB_F32);
    assert_true(nb_item(nb_slice(y, 0, 0, 1, 1)) == -1 && nb_item(nb_slice(y, 0, 2, 3, 1)) == 2.5);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(y, nb_arange(1, 4, 1, NB_F32)))), 0);
    assert_int_equal(nb_dtype_of(nb_grad_of(v64)), NB_F64);
    assert_true(nb_item(nb_slice(nb_grad_of(v64), 0, 0, 1, 1)) == 3 && nb_item(nb_slice(nb_grad_of(v64), 0, 1, 2, 1)) == 1);
    nb_tensor *ints = nb_index_put(nb_zeros(NB_SHAPE(3), NB_I64), &i32, 1, nb_full(NB_SHAPE(), 2.9, NB_F32), false);
    assert_true(nb_item(nb_sum_all(ints)) == 4); /* 2.9 truncated to 2, twice */
    /* errors */
    nb_tensor *m = nb_ones(NB_SHAPE(3, 4), NB_F32), *big = nb_from_data((int64_t[]){ 0, 4 }, NB_SHAPE(2), NB_I64);
    nb_tensor *two[] = { big, big };
    expect_error(nb_index_put(m, two, 2, nb_scalar(0), false), "index 4 is out of range for axis 0 of size 3");
    expect_error(nb_index(m, (nb_tensor *[]){ nb_from_data((int64_t[]){ -4 }, NB_SHAPE(1), NB_I64) }, 1), "index -4 is out of range");
    expect_error(nb_index(m, (nb_tensor *[]){ nb_zeros(NB_SHAPE(2), NB_F32) }, 1), "i64, i32 or a bool mask");
    expect_error(nb_index(m, (nb_tensor *[]){ nb_zeros(NB_SHAPE(2), NB_BOOL) }, 1), "does not match");
    expect_error(nb_index(m, (nb_tensor *[]){ nb_zeros(NB_SHAPE(3, 4, 1), NB_BOOL) }, 1), "cover 3 axes");
    expect_error(nb_index(m, NULL, 1), "at least one index");
    expect_error(nb_index(m, (nb_tensor *[]){ NULL }, 1), "NULL");
    expect_error(nb_index_put(m, &big, 1, nb_ones(NB_SHAPE(3), NB_F32), false), "cannot be broadcast to the indexed shape [2, 4]");
    expect_error(nb_index_put(m, &big, 1, NULL, false), "NULL");
    expect_error(nb_masked_scatter(m, nb_gt(m, nb_scalar(0)), nb_ones(NB_SHAPE(11), NB_F32)), "fewer than the 12");
    /* indices broadcast (as stride-0 views, costing nothing) to 2^31 x 2^31 positions: refused
       before anything is allocated */
    nb_tensor *one = nb_zeros(NB_SHAPE(1), NB_I64);
    nb_tensor *huge[] = { nb_expand(nb_reshape(one, NB_SHAPE(1, 1)), NB_SHAPE((int64_t)1 << 31, 1)),
                          nb_expand(one, NB_SHAPE((int64_t)1 << 31)) };
    assert_null(nb_index(m, huge, 2));
    assert_non_null(nb_error());
    nb_error_clear();
    expect_error(nb_index_put(m, huge, 2, nb_scalar(1), false), "indexed shape");
    /* a 0-d x and mask in masked_scatter, and an empty selection */
    nb_tensor *z = nb_masked_scatter(nb_scalar(1), nb_full(NB_SHAPE(), 1, NB_BOOL), nb_full(NB_SHAPE(2), 7, NB_F32));
    assert_true(z && nb_ndim(z) == 0 && nb_item(z) == 7);
    nb_tensor *none = nb_index_put(m, (nb_tensor *[]){ nb_zeros(NB_SHAPE(3), NB_BOOL) }, 1, nb_scalar(5), false);
    assert_true(nb_item(nb_sum_all(none)) == 12);
    nb_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_randint_randperm, clear_error_setup),
        cmocka_unit_test_setup(test_bernoulli, clear_error_setup),
        cmocka_unit_test_setup(test_multinomial, clear_error_setup),
        cmocka_unit_test_setup(test_split_chunk, clear_error_setup),
        cmocka_unit_test_setup(test_sort_threads, clear_error_setup),
        cmocka_unit_test_setup(test_errors, clear_error_setup),
        cmocka_unit_test_setup(test_index_put, clear_error_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
