/* nabla/dist.h's collectives, run under mpirun with 2 and 3 ranks (tests/dist.cmake) and as a
   single process: every collective against values computed here, every dtype it takes, the
   errors of a mismatch across ranks (shape, dtype, reduction, root, which collective) on every
   rank with the differing rank named and the group still usable after, the local argument
   errors, and the data loader's shards (as torch's DistributedSampler). Exits 77 (CTest's
   SKIPPED) in a build without MPI. */
#include "test_util.h"
#include "dist_util.h"


static int group_setup(void **state) {
    (void)state;
    return 0;
}

/* fails the test unless t holds exactly want[0..n) (as doubles) */
static void expect_values(nb_tensor *t, const double *want, int64_t n) {
    assert_non_null(t);
    assert_int_equal(nb_numel(t), n);
    nb_tensor *d = nb_contiguous(nb_cast(t, NB_F64));
    const double *p = nb_data_ptr(d);
    for (int64_t i = 0; i < n; i++)
        if (p[i] != want[i]) fail_msg("rank %d: element %lld is %.17g, expected %.17g", R, (long long)i, p[i], want[i]);
}

static void test_world(void **state) {
    (void)state;
    assert_true(nb_dist_is_initialized());
    assert_in_range(R, 0, W - 1);
    const char *env = getenv("OMPI_COMM_WORLD_SIZE");
    if (env) assert_int_equal(W, atoi(env));
    assert_non_null(strstr(nb_dist_backend(), "MPI"));
    assert_int_equal(nb_dist_init(NULL, NULL), 0); /* a second call is a no-op */
    assert_int_equal(nb_dist_barrier(), 0);
}

static void test_all_reduce(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    /* element i of rank r: r + 1 + 10 i */
    double v[6], sum[6], mx[6], mn[6], avg[6];
    for (int i = 0; i < 6; i++) {
        v[i] = R + 1 + 10 * i;
        sum[i] = 0;
        for (int r = 0; r < W; r++) sum[i] += r + 1 + 10 * i;
        mx[i] = W + 10 * i;
        mn[i] = 1 + 10 * i;
        avg[i] = sum[i] / W;
    }
    static const nb_dtype types[] = { NB_F32, NB_F64, NB_I64, NB_I32, NB_U8 };
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        nb_dtype dt = types[k];
        nb_tensor *t = nb_cast(nb_from_data(v, NB_SHAPE(2, 3), NB_F64), dt);
        t = nb_contiguous(t);
        assert_int_equal(nb_dist_all_reduce(t, NB_REDUCE_SUM), 0);
        expect_values(t, sum, 6);
        assert_true(nb_shape_of(t).ndim == 2 && nb_dtype_of(t) == dt);
        t = nb_contiguous(nb_cast(nb_from_data(v, NB_SHAPE(6), NB_F64), dt));
        assert_int_equal(nb_dist_all_reduce(t, NB_REDUCE_MAX), 0);
        expect_values(t, mx, 6);
        t = nb_contiguous(nb_cast(nb_from_data(v, NB_SHAPE(6), NB_F64), dt));
        assert_int_equal(nb_dist_all_reduce(t, NB_REDUCE_MIN), 0);
        expect_values(t, mn, 6);
    }
    nb_tensor *f = nb_from_data(v, NB_SHAPE(6), NB_F64);
    assert_int_equal(nb_dist_all_reduce(f, NB_REDUCE_AVG), 0);
    expect_values(f, avg, 6);
    /* f32 AVG: the sum divided by the world size in f32 */
    nb_tensor *g = nb_cast(nb_from_data(v, NB_SHAPE(6), NB_F64), NB_F32);
    assert_int_equal(nb_dist_all_reduce(g, NB_REDUCE_AVG), 0);
    double avg32[6];
    for (int i = 0; i < 6; i++) avg32[i] = (double)((float)sum[i] / (float)W);
    expect_values(g, avg32, 6);
    /* a 0-d tensor and an empty one */
    nb_tensor *z = nb_full(NB_SHAPE(), R, NB_F32);
    assert_int_equal(nb_dist_all_reduce(z, NB_REDUCE_SUM), 0);
    assert_true(nb_item(z) == W * (W - 1) / 2.0);
    nb_tensor *e = nb_zeros(NB_SHAPE(0, 4), NB_F32);
    assert_int_equal(nb_dist_all_reduce(e, NB_REDUCE_SUM), 0);
    /* a larger one: 1M floats */
    nb_tensor *big = nb_full(NB_SHAPE(1 << 20), R + 0.5, NB_F32);
    assert_int_equal(nb_dist_all_reduce(big, NB_REDUCE_SUM), 0);
    assert_true(nb_item(nb_min(big, 0, false)) == W * W / 2.0 && nb_item(nb_max(big, 0, false)) == W * W / 2.0);
    nb_scope_end(s);
}

static void test_broadcast(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    int root = W - 1;
    double v[4] = { R, R * 2 + 1, -R, 7 }, want[4] = { root, root * 2 + 1, -root, 7 };
    static const nb_dtype types[] = { NB_F32, NB_F64, NB_I64, NB_I32, NB_U8, NB_F16, NB_BF16, NB_I8 };
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        double vv[4], ww[4];
        for (int i = 0; i < 4; i++) {
            vv[i] = types[k] == NB_U8 ? fabs(v[i]) : v[i];
            ww[i] = types[k] == NB_U8 ? fabs(want[i]) : want[i];
        }
        nb_tensor *t = nb_contiguous(nb_cast(nb_from_data(vv, NB_SHAPE(2, 2), NB_F64), types[k]));
        assert_int_equal(nb_dist_broadcast(t, root), 0);
        expect_values(t, ww, 4);
    }
    nb_tensor *b = nb_gt(nb_full(NB_SHAPE(3), R, NB_F32), nb_scalar(0.5)); /* bool: true except on rank 0 */
    assert_int_equal(nb_dist_broadcast(b, 0), 0);
    double f3[3] = { 0, 0, 0 };
    expect_values(b, f3, 3);
    nb_scope_end(s);
}

static void test_all_gather(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    double v[6];
    for (int i = 0; i < 6; i++) v[i] = R * 100 + i;
    nb_tensor *out = nb_dist_all_gather(nb_from_data(v, NB_SHAPE(2, 3), NB_F64));
    if (!out) fail_msg("%s", nb_error());
    nb_shape sh = nb_shape_of(out);
    assert_true(sh.ndim == 2 && sh.dim[0] == 2 * W && sh.dim[1] == 3);
    double *want = malloc(sizeof(double) * 6 * (size_t)W);
    for (int r = 0; r < W; r++)
        for (int i = 0; i < 6; i++) want[r * 6 + i] = r * 100 + i;
    expect_values(out, want, 6 * W);
    free(want);
    /* a 0-d tensor gives [W]; i64 */
    nb_tensor *z = nb_dist_all_gather(nb_full(NB_SHAPE(), R * 3, NB_I64));
    assert_non_null(z);
    assert_true(nb_shape_of(z).ndim == 1 && nb_dim(z, 0) == W && nb_dtype_of(z) == NB_I64);
    for (int r = 0; r < W; r++) assert_true(nb_item(nb_slice(z, 0, r, r + 1, 1)) == r * 3);
    nb_scope_end(s);
}

static void test_reduce_scatter(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    /* [2W, 3]: element (row j, col c) on rank r is r + 10 j + c */
    int64_t n = 2 * (int64_t)W * 3;
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = R + 10 * (i / 3) + i % 3;
    nb_tensor *in = nb_from_data(v, NB_SHAPE(2 * W, 3), NB_F64);
    nb_tensor *sum = nb_dist_reduce_scatter(in, NB_REDUCE_SUM), *mx = nb_dist_reduce_scatter(in, NB_REDUCE_MAX);
    nb_tensor *avg = nb_dist_reduce_scatter(nb_cast(in, NB_F32), NB_REDUCE_AVG);
    if (!sum || !mx || !avg) fail_msg("%s", nb_error());
    assert_true(nb_shape_of(sum).ndim == 2 && nb_dim(sum, 0) == 2 && nb_dim(sum, 1) == 3);
    double ws[6], wm[6], wa[6];
    for (int i = 0; i < 6; i++) {
        int64_t row = 2 * R + i / 3, col = i % 3;
        double base = 10.0 * row + col;
        ws[i] = W * base + W * (W - 1) / 2.0;
        wm[i] = base + W - 1;
        wa[i] = (double)((float)ws[i] / (float)W);
    }
    expect_values(sum, ws, 6);
    expect_values(mx, wm, 6);
    expect_values(avg, wa, 6);
    free(v);
    /* axis 0 must split evenly */
    if (W > 1) {
        assert_null(nb_dist_reduce_scatter(nb_zeros(NB_SHAPE(2 * W + 1, 2), NB_F32), NB_REDUCE_SUM));
        ASSERT_ERROR_CONTAINS("not a multiple of the world size");
    }
    assert_null(nb_dist_reduce_scatter(nb_scalar(1), NB_REDUCE_SUM));
    ASSERT_ERROR_CONTAINS("0-d");
    nb_scope_end(s);
}

/* after a mismatch the group still works: no payload ran */
static void expect_usable(void) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_full(NB_SHAPE(2), 1, NB_F32);
    if (nb_dist_all_reduce(t, NB_REDUCE_SUM) < 0) fail_msg("rank %d: unusable after a mismatch: %s", R, nb_error());
    assert_true(nb_item(nb_sum_all(t)) == 2.0 * W);
    nb_scope_end(s);
}

static void test_mismatch(void **state) {
    (void)state;
    if (W == 1) skip();
    nb_scope *s = nb_scope_begin();
    char want[200];
    /* shape: rank 0 [3, 4], the others [4, 3]; each rank names the first other rank that differs */
    nb_tensor *t = R == 0 ? nb_zeros(NB_SHAPE(3, 4), NB_F32) : nb_zeros(NB_SHAPE(4, 3), NB_F32);
    assert_int_equal(nb_dist_all_reduce(t, NB_REDUCE_SUM), -1);
    if (R == 0) snprintf(want, sizeof want, "rank 1 has [4, 3] f32, rank 0 has [3, 4] f32");
    else snprintf(want, sizeof want, "rank 0 has [3, 4] f32, rank %d has [4, 3] f32", R);
    ASSERT_ERROR_CONTAINS(want);
    expect_usable();
    /* dtype, with the last rank the odd one */
    nb_tensor *u = nb_zeros(NB_SHAPE(5), R == W - 1 ? NB_F64 : NB_F32);
    assert_int_equal(nb_dist_broadcast(u, 0), -1);
    ASSERT_ERROR_CONTAINS(R == W - 1 ? "rank 0 has [5] f32" : "[5] f64");
    expect_usable();
    /* the reduction */
    assert_int_equal(nb_dist_all_reduce(nb_zeros(NB_SHAPE(2), NB_F32), R == 0 ? NB_REDUCE_MAX : NB_REDUCE_SUM), -1);
    ASSERT_ERROR_CONTAINS(R == 0 ? "rank 0 for NB_REDUCE_MAX" : "rank 0 asks for NB_REDUCE_MAX");
    /* the root */
    assert_int_equal(nb_dist_broadcast(nb_zeros(NB_SHAPE(2), NB_F32), R == 0 ? 1 : 0), -1);
    ASSERT_ERROR_CONTAINS("the root differs across ranks");
    /* which collective: rank 0 gathers while the others reduce */
    if (R == 0) assert_null(nb_dist_all_gather(nb_zeros(NB_SHAPE(2), NB_F32)));
    else assert_int_equal(nb_dist_all_reduce(nb_zeros(NB_SHAPE(2), NB_F32), NB_REDUCE_SUM), -1);
    ASSERT_ERROR_CONTAINS(R == 0 ? "rank 1 called nb_dist_all_reduce" : "rank 0 called nb_dist_all_gather");
    expect_usable();
    nb_scope_end(s);
}

static void test_local_errors(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *m = nb_zeros(NB_SHAPE(3, 4), NB_F32);
    assert_int_equal(nb_dist_all_reduce(nb_transpose(m, 0, 1), NB_REDUCE_SUM), -1);
    ASSERT_ERROR_CONTAINS("not contiguous");
    assert_int_equal(nb_dist_all_reduce(nb_zeros(NB_SHAPE(2), NB_F16), NB_REDUCE_SUM), -1);
    ASSERT_ERROR_CONTAINS("cannot reduce [2] f16");
    assert_int_equal(nb_dist_all_reduce(nb_zeros(NB_SHAPE(2), NB_I64), NB_REDUCE_AVG), -1);
    ASSERT_ERROR_CONTAINS("NB_REDUCE_AVG needs a float tensor");
    assert_int_equal(nb_dist_all_reduce(m, (nb_reduce_op)9), -1);
    ASSERT_ERROR_CONTAINS("not an nb_reduce_op");
    assert_int_equal(nb_dist_broadcast(m, W), -1);
    ASSERT_ERROR_CONTAINS("is not a rank of this group");
    assert_int_equal(nb_dist_all_reduce(NULL, NB_REDUCE_SUM), -1);
    ASSERT_ERROR_CONTAINS("tensor is NULL");
    expect_usable();
    nb_scope_end(s);
}

/* the indices a loader of a dataset 0..n-1 serves in one epoch */
static int64_t loader_indices(int64_t n, nb_loader_opts o, int64_t *out, int64_t cap) {
    nb_scope *s = nb_scope_begin();
    nb_dataset *ds = nb_data_tensors(nb_arange(0, (double)n, 1, NB_I64), NULL);
    nb_data_loader *l = nb_data_loader_new(ds, o);
    nb_dataset_free(ds);
    if (!l) fail_msg("%s", nb_error());
    int64_t k = 0;
    nb_batch b;
    while (nb_data_loader_next(l, &b))
        for (int64_t i = 0; i < nb_numel(b.x) && k < cap; i++) out[k++] = (int64_t)nb_item(nb_slice(b.x, 0, i, i + 1, 1));
    nb_data_loader_free(l);
    nb_scope_end(s);
    return k;
}

static void test_loader_shards(void **state) {
    (void)state;
    int64_t got[16];
    /* torch.utils.data.distributed.DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False) */
    static const int64_t torch3[3][4] = { { 0, 3, 6, 9 }, { 1, 4, 7, 0 }, { 2, 5, 8, 1 } };
    for (int r = 0; r < 3; r++) {
        int64_t k = loader_indices(10, (nb_loader_opts){ .batch_size = 3, .rank = r, .world_size = 3 }, got, 16);
        assert_int_equal(k, 4);
        for (int i = 0; i < 4; i++) assert_int_equal(got[i], torch3[r][i]);
    }
    /* fewer samples than ranks: ([[0], [1], [0]] from torch) */
    assert_int_equal(loader_indices(2, (nb_loader_opts){ .rank = 2, .world_size = 3 }, got, 16), 1);
    assert_int_equal(got[0], 0);
    /* bad shards */
    nb_scope *s0 = nb_scope_begin();
    nb_dataset *ds = nb_data_tensors(nb_arange(0, 4, 1, NB_I64), NULL);
    assert_null(nb_data_loader_new(ds, (nb_loader_opts){ .rank = 3, .world_size = 3 }));
    ASSERT_ERROR_CONTAINS("rank 3 is not a rank of a world of 3");
    assert_null(nb_data_loader_new(ds, (nb_loader_opts){ .rank = 1 }));
    ASSERT_ERROR_CONTAINS("give both, or neither");
    nb_dataset_free(ds);
    nb_scope_end(s0);
    /* the default shard is nb_dist's: shuffled with one seed, the ranks' shards cover the order
       padded to a multiple of W (torch pads with the order's first samples) */
    int64_t n = 11, per = (n + W - 1) / W;
    int64_t k = loader_indices(n, (nb_loader_opts){ .batch_size = 2, .shuffle = true, .seed = 99 }, got, 16);
    assert_int_equal(k, per);
    nb_scope *s = nb_scope_begin();
    nb_tensor *all = nb_dist_all_gather(nb_from_data(got, NB_SHAPE(per), NB_I64));
    assert_non_null(all);
    const int64_t *a = nb_data_ptr(all);
    int64_t padded[64], one[16];
    for (int r = 0; r < W; r++)
        for (int64_t i = 0; i < per; i++) padded[r + i * W] = a[r * per + i]; /* undo the interleaving */
    int count[16] = { 0 };
    for (int64_t i = 0; i < per * W; i++) count[padded[i]]++;
    for (int64_t i = 0; i < n; i++) assert_true(count[i] >= 1);
    for (int64_t i = n; i < per * W; i++) assert_int_equal(padded[i], padded[i - n]);
    /* the same order as one process's loader with the same seed */
    assert_int_equal(loader_indices(n, (nb_loader_opts){ .batch_size = 5, .shuffle = true, .seed = 99, .world_size = 1 }, one, 16), n);
    for (int64_t i = 0; i < n; i++) assert_int_equal(padded[i], one[i]);
    nb_scope_end(s);
}

int main(int argc, char **argv) {
    int started = dist_test_start(&argc, &argv);
    if (started) return started;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_world, clear_error_setup),
        cmocka_unit_test_setup(test_all_reduce, clear_error_setup),
        cmocka_unit_test_setup(test_broadcast, clear_error_setup),
        cmocka_unit_test_setup(test_all_gather, clear_error_setup),
        cmocka_unit_test_setup(test_reduce_scatter, clear_error_setup),
        cmocka_unit_test_setup(test_mismatch, clear_error_setup),
        cmocka_unit_test_setup(test_local_errors, clear_error_setup),
        cmocka_unit_test_setup(test_loader_shards, clear_error_setup),
    };
    int failed = cmocka_run_group_tests(tests, group_setup, NULL);
    nb_dist_finalize();
    return failed;
}
