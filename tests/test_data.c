/* The input pipeline: datasets, transforms, the loader's order and determinism with 0/1/4 workers,
   readers against files written by NumPy, Python's csv module, Pillow and Debian's Fashion-MNIST,
   and bad input giving errors that name the file and the place. Usage: test_data REF_DIR */
#include "test_util.h"
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static const char *ref_dir = ".";
static const char *FMNIST = "/usr/share/datasets/fashion-mnist";

static char tmpdir[64];

static const char *path_in(const char *dir, const char *name, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < size); /* the path fits */
    return buf;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* x [n, 1, 4, 4] u8 with x[i] filled by i, y [n] = i % 10. */
static nb_dataset *small_images(int64_t n) {
    uint8_t *x = malloc((size_t)n * 16);
    int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        for (int j = 0; j < 16; j++) x[i * 16 + j] = (uint8_t)(i * 3 + j);
        y[i] = i % 10;
    }
    nb_tensor *tx = nb_from_data(x, NB_SHAPE(n, 1, 4, 4), NB_U8), *ty = nb_from_data(y, NB_SHAPE(n), NB_I64);
    nb_dataset *ds = nb_data_tensors(tx, ty);
    nb_release(tx);
    nb_release(ty);
    free(x);
    free(y);
    return ds;
}

static void test_tensors_and_loader_order(void **state) {
    (void)state;
    nb_dataset *ds = small_images(10);
    assert_int_equal(nb_dataset_len(ds), 10);
    nb_batch s;
    assert_int_equal(nb_dataset_get(ds, 3, &s), 0);
    assert_int_equal(nb_ndim(s.x), 3);
    assert_int_equal(nb_ndim(s.y), 0);
    assert_true(nb_item(s.y) == 3);
    nb_release(s.x);
    nb_release(s.y);
    for (int w = 0; w <= 2; w++) {
        nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 4, .num_workers = w });
        assert_int_equal(nb_data_loader_len(l), 3);
        for (int epoch = 0; epoch < 2; epoch++) {
            nb_batch b;
            int64_t seen = 0, k = 0;
            while (nb_data_loader_next(l, &b)) {
                int64_t n = nb_dim(b.x, 0);
                assert_int_equal(n, k < 2 ? 4 : 2);
                assert_int_equal(nb_ndim(b.x), 4);
                int64_t y[4];
                assert_int_equal(nb_copy_to(b.y, y, sizeof(int64_t) * (size_t)n), 0);
                for (int64_t i = 0; i < n; i++) assert_int_equal(y[i], (seen + i) % 10);
                seen += n;
                k++;
            }
            assert_false(nb_data_loader_failed(l));
            assert_int_equal(seen, 10);
        }
        nb_loader_stats st = nb_data_loader_stats(l);
        assert_int_equal(st.batches, 6);
        assert_int_equal(st.epochs, 2);
        assert_true(st.wait_seconds >= 0);
        nb_data_loader_free(l);
    }
    /* drop_last */
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 4, .drop_last = true });
    assert_int_equal(nb_data_loader_len(l), 2);
    nb_data_loader_free(l);
    nb_dataset_free(ds);
    assert_null(nb_error());
}

/* A user's dataset with no get_batch, over the same values as small_images; fails at fail_at. */
typedef struct { int64_t n, fail_at; } user_ds;
static int64_t user_len(void *self) { return ((user_ds *)self)->n; }
static int user_get(void *self, int64_t i, uint64_t key, nb_batch *out) {
    user_ds *u = self;
    if (i == u->fail_at) {
        nb_dataset_get(NULL, 0, out); /* records an error, as a failing library call does */
        return -1;
    }
    uint8_t x[16];
    for (int j = 0; j < 16; j++) x[j] = (uint8_t)(i * 3 + j);
    int64_t y = i % 10;
    out->x = nb_from_data(x, NB_SHAPE(1, 4, 4), NB_U8);
    out->y = nb_from_data(&y, NB_SHAPE(), NB_I64);
    return 0;
}
static const nb_dataset_class USER = { .name = "user_ds", .len = user_len, .get = user_get };

/* All batches of two epochs, as bytes, from a mapped, shuffled pipeline. */
static size_t run_pipeline(nb_dataset *base, int workers, float *out, size_t cap) {
    nb_dataset *ds = nb_data_map(base, nb_transform_compose(nb_transform_to_float(1.0 / 255), nb_transform_random_crop(4, 4, 2),
                                                            nb_transform_random_hflip(0.5), NULL));
    assert_non_null(ds);
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 5, .shuffle = true, .num_workers = workers,
                                                                 .seed = 1234 });
    size_t used = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        nb_batch b;
        while (nb_data_loader_next(l, &b)) {
            size_t n = (size_t)nb_numel(b.x);
            assert_true(used + n + (size_t)nb_numel(b.y) <= cap);
            assert_int_equal(nb_copy_to(b.x, out + used, n * sizeof(float)), 0);
            used += n;
            int64_t y[5];
            nb_copy_to(b.y, y, sizeof(int64_t) * (size_t)nb_numel(b.y));
            for (int64_t i = 0; i < nb_numel(b.y); i++) out[used++] = (float)y[i];
        }
    }
    assert_false(nb_data_loader_failed(l));
    nb_data_loader_free(l);
    nb_dataset_free(ds);
    return used;
}

static void test_determinism_across_workers(void **state) {
    (void)state;
    size_t cap = 2 * 23 * 17 + 100;
    float *ref = malloc(cap * sizeof(float)), *got = malloc(cap * sizeof(float));
    nb_dataset *fast = small_images(23);
    size_t n0 = run_pipeline(fast, 0, ref, cap);
    assert_int_equal(n0, 2 * 23 * 17);
    for (int w = 1; w <= 4; w *= 4) {
        memset(got, 0, cap * sizeof(float));
        assert_int_equal(run_pipeline(fast, w, got, cap), n0);
        assert_memory_equal(ref, got, n0 * sizeof(float));
    }
    /* the per-sample path (no get_batch) gives the same batches as the fast path */
    user_ds u = { 23, -1 };
    nb_dataset *slow = nb_dataset_new(&USER, &u);
    assert_int_equal(run_pipeline(slow, 4, got, cap), n0);
    assert_memory_equal(ref, got, n0 * sizeof(float));
    /* the two epochs differ (a new order), and a padded crop left zeros somewhere */
    assert_memory_not_equal(ref, ref + n0 / 2, n0 / 2 * sizeof(float));
    nb_dataset_free(slow);
    nb_dataset_free(fast);
    free(ref);
    free(got);
    assert_null(nb_error());
}

/* A dataset whose get_batch hands back one row whatever it is asked for. */
static int short_get_batch(void *self, const int64_t *idx, int64_t n, uint64_t key, nb_batch *out) {
    (void)idx; (void)n;
    return user_get(self, 0, key, out) < 0 ? -1 : (out->x = nb_unsqueeze(out->x, 0), out->y = nb_unsqueeze(out->y, 0), 0);
}
static const nb_dataset_class SHORT = { .name = "short_ds", .len = user_len, .get = user_get, .get_batch = short_get_batch };

/* A mapped dataset stacks the transformed rows and passes the labels through; a base batch with
   the wrong number of rows is an error, not a read past its end. */
static void test_map_batch(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    user_ds u = { 6, -1 };
    nb_dataset *base = nb_dataset_new(&SHORT, &u), *ds = nb_data_map(base, nb_transform_to_float(1.0));
    int64_t idx[3] = { 0, 1, 2 };
    nb_batch b;
    assert_int_equal(nb_dataset_get_batch(ds, idx, 3, &b), -1);
    ASSERT_ERROR_CONTAINS("nb_data_map: the base's batch of 3 samples has x [1, 1, 4, 4] u8");
    nb_error_clear();
    assert_int_equal(nb_dataset_get_batch(ds, idx, 1, &b), 0);
    assert_int_equal(nb_dtype_of(b.x), NB_F32);
    assert_int_equal(nb_dim(b.y, 0), 1);
    assert_int_equal(nb_item(b.y), 0);
    nb_dataset_free(ds);
    nb_dataset_free(base);
    nb_scope_end(s);
    assert_null(nb_error());
}

static void test_worker_error_and_shutdown(void **state) {
    (void)state;
    user_ds u = { 50, 37 };
    nb_dataset *ds = nb_dataset_new(&USER, &u);
    for (int w = 0; w <= 4; w += 4) {
        nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 8, .num_workers = w });
        nb_batch b;
        int got = 0;
        while (nb_data_loader_next(l, &b)) got++;
        assert_int_equal(got, 4); /* batch 4 holds sample 37 */
        assert_true(nb_data_loader_failed(l));
        ASSERT_ERROR_CONTAINS("nb_data_loader: batch 4");
        /* the next epoch runs again (and fails again at the same place) */
        got = 0;
        while (nb_data_loader_next(l, &b)) got++;
        assert_int_equal(got, 4);
        assert_true(nb_data_loader_failed(l));
        nb_error_clear();
        nb_data_loader_free(l);
    }
    /* clean shutdown mid-epoch with batches in flight */
    u.fail_at = -1;
    for (int i = 0; i < 5; i++) {
        nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 3, .num_workers = 4, .shuffle = true });
        nb_batch b;
        for (int k = 0; k < i; k++) assert_true(nb_data_loader_next(l, &b));
        nb_data_loader_free(l);
    }
    nb_dataset_free(ds);
    assert_null(nb_error());
}

static void test_subset_split_concat(void **state) {
    (void)state;
    nb_dataset *ds = small_images(10);
    int64_t idx[] = { 9, 2, 5 };
    nb_dataset *sub = nb_data_subset(ds, idx, 3);
    nb_batch b;
    assert_int_equal(nb_dataset_get_batch(sub, (int64_t[]){ 0, 1, 2 }, 3, &b), 0);
    int64_t y[10];
    nb_copy_to(b.y, y, 3 * sizeof(int64_t));
    assert_true(y[0] == 9 && y[1] == 2 && y[2] == 5);
    nb_release(b.x);
    nb_release(b.y);
    assert_null(nb_data_subset(ds, (int64_t[]){ 10 }, 1));
    ASSERT_ERROR_CONTAINS("out of range");

    nb_dataset *parts[2], *again[2];
    assert_int_equal(nb_data_random_split(ds, (int64_t[]){ 7, 3 }, 2, 42, parts), 0);
    assert_int_equal(nb_data_random_split(ds, (int64_t[]){ 7, 3 }, 2, 42, again), 0);
    assert_int_equal(nb_dataset_len(parts[0]), 7);
    assert_int_equal(nb_dataset_len(parts[1]), 3);
    int seen[10] = { 0 };
    for (int p = 0; p < 2; p++)
        for (int64_t i = 0; i < nb_dataset_len(parts[p]); i++) {
            nb_batch s1, s2;
            assert_int_equal(nb_dataset_get(parts[p], i, &s1), 0);
            assert_int_equal(nb_dataset_get(again[p], i, &s2), 0);
            assert_true(nb_item(s1.y) == nb_item(s2.y));
            seen[(int)nb_item(s1.y)]++;
            nb_release(s1.x); nb_release(s1.y); nb_release(s2.x); nb_release(s2.y);
        }
    for (int i = 0; i < 10; i++) assert_int_equal(seen[i], 1);
    nb_dataset *bad[2];
    assert_int_equal(nb_data_random_split(ds, (int64_t[]){ 7, 4 }, 2, 42, bad) < 0, 1);
    ASSERT_ERROR_CONTAINS("sum to 11");

    nb_dataset *both[2] = { sub, parts[1] };
    nb_dataset *cat = nb_data_concat(both, 2);
    assert_int_equal(nb_dataset_len(cat), 6);
    nb_scope *sc = nb_scope_begin();
    assert_int_equal(nb_dataset_get(cat, 3, &b), 0);
    nb_batch s2;
    assert_int_equal(nb_dataset_get(parts[1], 0, &s2), 0);
    assert_true(nb_item(b.y) == nb_item(s2.y));
    assert_int_equal(nb_dataset_get(cat, -1, &b), 0); /* negative counts from the end */
    nb_scope_end(sc);
    /* free in any order: datasets hold references to what they are built on */
    nb_dataset_free(ds);
    nb_dataset_free(sub);
    nb_dataset_free(parts[0]);
    nb_dataset_free(parts[1]);
    nb_dataset_free(again[0]);
    nb_dataset_free(again[1]);
    nb_data_loader *l = nb_data_loader_new(cat, (nb_loader_opts){ .batch_size = 4, .num_workers = 2 });
    nb_dataset_free(cat);
    int n = 0;
    while (nb_data_loader_next(l, &b)) n += (int)nb_dim(b.x, 0);
    assert_int_equal(n, 6);
    nb_data_loader_free(l);
    assert_null(nb_error());
}

static void test_transforms(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    uint8_t px[2 * 2 * 3] = { 0, 51, 102, 153, 204, 255, 10, 20, 30, 40, 50, 60 };
    nb_tensor *x = nb_from_data(px, NB_SHAPE(2, 2, 3), NB_U8);
    nb_transform *tf = nb_transform_to_float(1.0 / 255);
    nb_tensor *f = nb_transform_apply(tf, x, 0);
    assert_int_equal(nb_dtype_of(f), NB_F32);
    assert_float_equal(nb_item(nb_slice(nb_flatten(f, 0, -1), 0, 1, 2, 1)), 0.2, 1e-6);
    nb_transform_free(tf);
    float mean[] = { 0.5f, 0.1f }, std[] = { 0.25f, 0.5f };
    tf = nb_transform_normalize(mean, std, 2);
    nb_tensor *nz = nb_transform_apply(tf, f, 0);
    float v[12];
    nb_copy_to(nz, v, sizeof v);
    assert_float_equal(v[0], (0 - 0.5) / 0.25, 1e-5);
    assert_float_equal(v[7], (20 / 255.0 - 0.1) / 0.5, 1e-5);
    assert_null(nb_transform_apply(tf, x, 0)); /* u8 input */
    ASSERT_ERROR_CONTAINS("nb_transform_to_float first");
    nb_transform_free(tf);
    /* flip with p = 1 mirrors the last axis; crop of the full size without padding is identity */
    tf = nb_transform_compose(nb_transform_random_crop(2, 3, 0), nb_transform_random_hflip(1.0), NULL);
    nb_tensor *fl = nb_transform_apply(tf, x, 99);
    uint8_t o[12];
    nb_copy_to(fl, o, sizeof o);
    assert_int_equal(o[0], 102);
    assert_int_equal(o[2], 0);
    assert_int_equal(o[11], 40);
    nb_transform_free(tf);
    /* padded crops: the same key gives the same window; over many keys every offset appears */
    tf = nb_transform_random_crop(2, 3, 1);
    int same = 0;
    for (uint64_t k = 0; k < 50; k++) {
        nb_tensor *c1 = nb_transform_apply(tf, x, k), *c2 = nb_transform_apply(tf, x, k);
        assert_true(nb_item(nb_sum_all(nb_eq(c1, c2))) == 12);
        same += nb_item(nb_sum_all(nb_eq(c1, x))) == 12; /* the centre window of nine */
    }
    assert_true(same > 0 && same < 20);
    assert_null(nb_transform_apply(tf, nb_zeros(NB_SHAPE(5), NB_U8), 0));
    ASSERT_ERROR_CONTAINS("nb_transform_random_crop");
    nb_transform_free(tf);
    nb_scope_end(s);
    assert_null(nb_error());
}

static void test_fashion_mnist(void **state) {
    (void)state;
    static const int64_t first_train[] = { 9, 0, 0, 3, 0, 2, 7, 2, 5, 5 }, first_test[] = { 9, 2, 1, 1, 6, 1, 4, 6, 5, 7 };
    for (int train = 1; train >= 0; train--) {
        nb_dataset *ds = nb_data_fashion_mnist(train ? FMNIST : NULL, train); /* NULL: $NABLA_DATA, then Debian's */
        assert_non_null(ds);
        assert_int_equal(nb_dataset_len(ds), train ? 60000 : 10000);
        nb_batch b;
        int64_t idx[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
        assert_int_equal(nb_dataset_get_batch(ds, idx, 10, &b), 0);
        nb_shape sh = nb_shape_of(b.x);
        assert_true(sh.ndim == 4 && sh.dim[0] == 10 && sh.dim[1] == 1 && sh.dim[2] == 28 && sh.dim[3] == 28);
        assert_int_equal(nb_dtype_of(b.x), NB_F32);
        assert_int_equal(nb_dtype_of(b.y), NB_I64);
        int64_t y[10];
        nb_copy_to(b.y, y, sizeof y);
        assert_memory_equal(y, train ? first_train : first_test, sizeof y);
        nb_scope *s = nb_scope_begin();
        nb_tensor *img0 = nb_slice(b.x, 0, 0, 1, 1);
        assert_float_equal(nb_item(nb_sum_all(img0)) * 255, train ? 76247 : 33456, 0.5);
        assert_true(nb_item(nb_max(nb_flatten(b.x, 0, -1), 0, false)) <= 1.0);
        nb_scope_end(s);
        nb_release(b.x);
        nb_release(b.y);
        nb_batch one;
        assert_int_equal(nb_dataset_get(ds, 0, &one), 0);
        assert_int_equal(nb_ndim(one.x), 3);
        assert_int_equal(nb_ndim(one.y), 0);
        nb_release(one.x);
        nb_release(one.y);
        nb_dataset_free(ds);
    }
    assert_null(nb_error());
}

static void test_readers_written_by_others(void **state) {
    (void)state;
    char p1[1024], p2[1024];
    nb_scope *s = nb_scope_begin();
    /* NPY by NumPy, through nb_load_npy */
    nb_dataset *ds = nb_data_npy(path_in(ref_dir, "x.npy", p1, sizeof p1), path_in(ref_dir, "y.npy", p2, sizeof p2));
    assert_non_null(ds);
    nb_batch b;
    assert_int_equal(nb_dataset_get(ds, 2, &b), 0);
    float x[3];
    nb_copy_to(b.x, x, sizeof x);
    assert_true(x[0] == 3.0f && x[1] == 3.5f && x[2] == 4.0f);
    assert_int_equal(nb_dtype_of(b.y), NB_I64);
    assert_true(nb_item(b.y) == 2);
    nb_dataset_free(ds);
    /* CSV by NumPy: the label by name */
    ds = nb_data_csv(path_in(ref_dir, "numpy.csv", p1, sizeof p1), (nb_csv_opts){ .label = "label" });
    assert_non_null(ds);
    assert_int_equal(nb_dataset_len(ds), 5);
    assert_int_equal(nb_dataset_get(ds, 4, &b), 0);
    nb_copy_to(b.x, x, sizeof x);
    assert_true(x[0] == 6.0f && x[1] == 6.5f && x[2] == 7.0f);
    assert_int_equal(nb_dtype_of(b.y), NB_I64);
    assert_true(nb_item(b.y) == 0);
    nb_dataset_free(ds);
    /* CSV by Python's csv module: every field quoted, CRLF, label by index in the middle */
    ds = nb_data_csv(path_in(ref_dir, "quoted.csv", p1, sizeof p1), (nb_csv_opts){ .label_index = 1 });
    assert_non_null(ds);
    assert_int_equal(nb_dataset_len(ds), 4);
    assert_int_equal(nb_dataset_get(ds, 3, &b), 0);
    float x2[2];
    nb_copy_to(b.x, x2, sizeof x2);
    assert_true(x2[0] == 4.5f && x2[1] == -3.0f);
    assert_true(nb_item(b.y) == 1);
    nb_dataset_free(ds);
    ds = nb_data_csv(p1, (nb_csv_opts){ .label = "feat, \"one\"" });
    assert_non_null(ds);
    nb_dataset_free(ds);
    /* PNG folder by Pillow: classes in sorted order, gray and RGB, pixels as written */
    ds = nb_data_image_folder(path_in(ref_dir, "images", p1, sizeof p1));
    assert_non_null(ds);
    assert_int_equal(nb_dataset_len(ds), 6);
    assert_string_equal(nb_data_image_folder_class(ds, 1), "b");
    assert_int_equal(nb_dataset_get(ds, 4, &b), 0); /* class b, img1 */
    nb_shape sh = nb_shape_of(b.x);
    assert_true(sh.ndim == 3 && sh.dim[0] == 3 && sh.dim[1] == 6 && sh.dim[2] == 5);
    assert_true(nb_item(b.y) == 1);
    float px[90];
    nb_copy_to(b.x, px, sizeof px);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 5; j++) assert_float_equal(px[c * 30 + i * 5 + j] * 255, ((7 * i + 3 * j + 50 * c + 1) % 256), 1e-3);
    assert_int_equal(nb_dataset_get(ds, 0, &b), 0);
    assert_int_equal(nb_dim(b.x, 0), 1);
    nb_tensor *raw = nb_read_png(path_in(ref_dir, "images/a/img2.png", p1, sizeof p1));
    assert_int_equal(nb_dtype_of(raw), NB_U8);
    assert_true(nb_item(nb_slice(nb_flatten(raw, 0, -1), 0, 6, 7, 1)) == (7 * 1 + 3 * 1 + 2) % 256);
    nb_dataset_free(ds);
    /* JPEGs by Pillow: the pixels Pillow decodes them to, RGB (chroma subsampled) and gray */
    for (int k = 0; k < 2; k++) {
        const char *kind = k ? "gray" : "rgb";
        char jpg[64], npy[64];
        snprintf(jpg, sizeof jpg, "photo_%s.jpg", kind);
        snprintf(npy, sizeof npy, "photo_%s.npy", kind);
        nb_tensor *img = nb_read_image(path_in(ref_dir, jpg, p1, sizeof p1));
#ifndef NABLA_HAVE_JPEG
        assert_null(img);
        ASSERT_ERROR_CONTAINS("built without libjpeg");
        nb_error_clear();
        continue;
#endif
        nb_tensor *want = nb_load_npy(path_in(ref_dir, npy, p2, sizeof p2)); /* HWC or HW */
        assert_non_null(img);
        assert_non_null(want);
        nb_tensor *chw = k ? nb_unsqueeze(want, 0) : nb_permute(want, (const int[]){ 2, 0, 1 });
        nb_shape a = nb_shape_of(img), b2 = nb_shape_of(chw);
        assert_int_equal(a.ndim, b2.ndim);
        for (int d = 0; d < a.ndim; d++) assert_int_equal(a.dim[d], b2.dim[d]);
        assert_true(nb_item(nb_sum_all(nb_ne(img, chw))) == 0);
    }
    nb_scope_end(s);
    assert_null(nb_error());
}

static void expect_fail_idx(const char *path, const char *what, const char *place) {
    nb_tensor *t = nb_read_idx(path);
    assert_null(t);
    ASSERT_ERROR_CONTAINS(path);
    /* re-read to check the message's other parts */
    nb_read_idx(path);
    ASSERT_ERROR_CONTAINS(what);
    nb_read_idx(path);
    ASSERT_ERROR_CONTAINS(place);
}

static void test_bad_input(void **state) {
    (void)state;
    char p[1024], p2[1024];
    /* truncated gzip: the first half of the labels file */
    size_t n;
    FILE *f = fopen(path_in(FMNIST, "t10k-labels-idx1-ubyte.gz", p, sizeof p), "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 16];
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_bytes(path_in(tmpdir, "trunc.gz", p, sizeof p), buf, n / 2);
    expect_fail_idx(p, "truncated gzip", "compressed offset");
    /* corrupt gzip: bytes flipped in the middle */
    for (size_t i = n / 2; i < n / 2 + 16; i++) buf[i] ^= 0x5a;
    write_bytes(path_in(tmpdir, "corrupt.gz", p, sizeof p), buf, n);
    expect_fail_idx(p, "gzip", "offset");
    /* wrong magic */
    unsigned char bad[16] = { 0, 0, 0x08, 0, 0, 0, 0, 1 };
    write_bytes(path_in(tmpdir, "magic.idx", p, sizeof p), bad, 16);
    expect_fail_idx(p, "magic 0x00000800", "offset 0");
    /* a header promising more data than the file holds, and a huge count */
    unsigned char shortf[12] = { 0, 0, 0x08, 1, 0, 0, 0, 9, 1, 2, 3, 4 };
    write_bytes(path_in(tmpdir, "short.idx", p, sizeof p), shortf, sizeof shortf);
    expect_fail_idx(p, "truncated", "offset 8");
    unsigned char huge[8] = { 0, 0, 0x08, 1, 0xff, 0xff, 0xff, 0xff };
    write_bytes(path_in(tmpdir, "huge.idx", p, sizeof p), huge, sizeof huge);
    expect_fail_idx(p, "promises", "offset");
    /* plain IDX round trip with i16 data, big-endian */
    unsigned char i16[12] = { 0, 0, 0x0B, 1, 0, 0, 0, 2, 0xff, 0xfe, 0x01, 0x00 };
    nb_tensor *t = nb_parse_idx(i16, sizeof i16, "i16");
    assert_non_null(t);
    assert_true(nb_dtype_of(t) == NB_I32);
    int32_t v[2];
    nb_copy_to(t, v, sizeof v);
    assert_true(v[0] == -2 && v[1] == 256);
    nb_release(t);
    /* image and label counts differ */
    assert_null(nb_data_idx(path_in(FMNIST, "t10k-images-idx3-ubyte.gz", p, sizeof p),
                            path_in(FMNIST, "train-labels-idx1-ubyte.gz", p2, sizeof p2)));
    ASSERT_ERROR_CONTAINS("holds 10000 images but");
    /* missing file */
    assert_null(nb_data_idx("/nonexistent/images.gz", p2));
    ASSERT_ERROR_CONTAINS("cannot open /nonexistent/images.gz");
    assert_null(nb_data_csv("/nonexistent/x.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("/nonexistent/x.csv");
    /* CSV: ragged row, non-numeric field, missing value, unterminated quote, unknown column */
    const char *ragged = "a,b,c\n1,2,3\n4,5\n";
    assert_null(nb_data_csv_parse(ragged, strlen(ragged), "ragged.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("ragged.csv: line 3 has 2 fields, expected 3");
    const char *word = "a,b\n1,2\n\"x\ny\",3\n4,five\n";
    assert_null(nb_data_csv_parse(word, strlen(word), "word.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("non-numeric field \"x\ny\" at line 3, column 1 (\"a\")");
    const char *word2 = "a,b\n1,2\n4,five\n";
    assert_null(nb_data_csv_parse(word2, strlen(word2), "word.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("\"five\" at line 3, column 2");
    const char *missing = "1,2\n3,\n";
    assert_null(nb_data_csv_parse(missing, strlen(missing), "m.csv", (nb_csv_opts){ .no_header = true }));
    ASSERT_ERROR_CONTAINS("missing value at line 2, column 2");
    const char *quote = "a,b\n1,\"2\n";
    assert_null(nb_data_csv_parse(quote, strlen(quote), "q.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("unterminated quoted field starting at line 2");
    assert_null(nb_data_csv_parse(ragged, strlen(ragged), "r.csv", (nb_csv_opts){ .label = "zz" }));
    ASSERT_ERROR_CONTAINS("no column named \"zz\"");
    /* not a PNG: directly, and from a worker thread of the loader over an image folder */
    assert_null(nb_decode_png("GIF89a..", 8, "fake.png"));
    ASSERT_ERROR_CONTAINS("fake.png: not a PNG file: the signature at offset 0 is 47 49 46");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/folder/cls", tmpdir);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/images/a/img0.png %s/", dir, ref_dir, dir);
    assert_int_equal(system(cmd), 0);
    write_bytes(path_in(dir, "zbad.png", p, sizeof p), "this is text", 12);
    char root[1024];
    snprintf(root, sizeof root, "%s/folder", tmpdir);
    /* a file of a class folder that is no image is named when the folder is opened, never skipped */
    assert_null(nb_data_image_folder(root));
    ASSERT_ERROR_CONTAINS("zbad.png is neither a PNG nor a JPEG image");
    nb_error_clear();
    /* one that starts as a PNG but is damaged fails when a worker decodes it */
    write_bytes(path_in(dir, "zbad.png", p, sizeof p), "\x89PNG\r\n\x1a\ntext", 12);
    snprintf(dir, sizeof dir, "%s", root);
    nb_dataset *ds = nb_data_image_folder(dir);
    assert_non_null(ds);
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 1, .num_workers = 2 });
    nb_batch b;
    assert_true(nb_data_loader_next(l, &b));
    assert_false(nb_data_loader_next(l, &b));
    assert_true(nb_data_loader_failed(l));
    ASSERT_ERROR_CONTAINS("zbad.png: bad PNG header");
    nb_data_loader_free(l);
    nb_dataset_free(ds);
    /* with no root, a missing $NABLA_DATA falls back to Debian's copy */
    setenv("NABLA_DATA", "/nonexistent-env", 1);
    ds = nb_data_fashion_mnist(NULL, true);
    unsetenv("NABLA_DATA");
    assert_non_null(ds);
    nb_dataset_free(ds);
    assert_null(nb_error());
}

/* A root that was named is the only place looked in: no data there is an error naming the folder
   and the files looked for, even when $NABLA_DATA and Debian's folder hold the data. */
static void test_fashion_mnist_named_root(void **state) {
    (void)state;
    setenv("NABLA_DATA", FMNIST, 1);
    assert_null(nb_data_fashion_mnist("/nonexistent", true));
    ASSERT_ERROR_CONTAINS("nb_data_fashion_mnist: /nonexistent does not exist");
    assert_null(nb_data_fashion_mnist("/nonexistent", false));
    ASSERT_ERROR_CONTAINS("t10k-images-idx3-ubyte(.gz) and t10k-labels-idx1-ubyte(.gz)");
    char dir[512], p[1024];
    snprintf(dir, sizeof dir, "%s/empty_root", tmpdir);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_null(nb_data_fashion_mnist(dir, true));
    const char *e = nb_error();
    assert_non_null(e);
    assert_non_null(strstr(e, dir));
    assert_non_null(strstr(e, "holds no Fashion-MNIST"));
    ASSERT_ERROR_CONTAINS("train-images-idx3-ubyte(.gz) and train-labels-idx1-ubyte(.gz)");
    /* only the images there: still an error, not a fallback */
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    write_bytes(p, "x", 1);
    assert_null(nb_data_fashion_mnist(dir, true));
    ASSERT_ERROR_CONTAINS(dir);
    write_bytes(path_in(tmpdir, "a_file", p, sizeof p), "x", 1);
    assert_null(nb_data_fashion_mnist(p, true));
    ASSERT_ERROR_CONTAINS("is not a folder");
    unsetenv("NABLA_DATA");
    assert_null(nb_error());
}

/* Every size computed from an IDX header is checked: dimensions whose product overflows 64 bits
   are an error naming the file and the shape, not a tensor of 0 elements over a 1-byte buffer. */
static void test_idx_sizes_checked(void **state) {
    (void)state;
    char p[1024];
    /* 00 00 08 03, dims 2^20, 2^20, 2^25 (their product is 2^65), and no data */
    const unsigned char big[16] = { 0, 0, 0x08, 3, 0, 0x10, 0, 0, 0, 0x10, 0, 0, 0x02, 0, 0, 0 };
    write_bytes(path_in(tmpdir, "overflow.idx", p, sizeof p), big, sizeof big);
    assert_null(nb_read_idx(p));
    const char *e = nb_error();
    assert_non_null(e);
    assert_non_null(strstr(e, p));
    ASSERT_ERROR_CONTAINS("[1048576, 1048576, 33554432]");
    assert_null(nb_parse_idx(big, sizeof big, "mem.idx"));
    ASSERT_ERROR_CONTAINS("mem.idx");
    /* a product that fits but promises more than the file holds names the shape too */
    const unsigned char fits[16] = { 0, 0, 0x0D, 3, 0, 0x10, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 2 };
    assert_null(nb_parse_idx(fits, sizeof fits, "fits.idx"));
    ASSERT_ERROR_CONTAINS("[1048576, 1048576, 2]");
    /* the same header gzip-compressed: its bound is checked without overflow too */
    unsigned char gz[128];
    z_stream z = { 0 };
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)big;
    z.avail_in = sizeof big;
    z.next_out = gz;
    z.avail_out = sizeof gz;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t gzn = sizeof gz - z.avail_out;
    deflateEnd(&z);
    assert_null(nb_parse_idx(gz, gzn, "big.idx.gz"));
    ASSERT_ERROR_CONTAINS("[1048576, 1048576, 33554432]");
    /* one empty dimension is a valid empty tensor */
    const unsigned char empty[12] = { 0, 0, 0x08, 2, 0, 0, 0, 0, 0, 0, 0, 5 };
    nb_tensor *t = nb_parse_idx(empty, sizeof empty, "empty.idx");
    assert_non_null(t);
    assert_int_equal(nb_numel(t), 0);
    nb_release(t);
    assert_null(nb_error());
}

/* Sizes in the loader: a batch_size near INT64_MAX gives one batch of everything (no
   len + batch_size - 1 overflow), and num_workers * prefetch is checked. */
static void test_loader_sizes(void **state) {
    (void)state;
    nb_dataset *ds = small_images(10);
    int64_t sizes[] = { INT64_MAX, INT64_MAX - 1, INT64_MAX / 2 + 1, 11 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int w = 0; w <= 2; w += 2) {
            nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = sizes[k], .num_workers = w });
            assert_non_null(l);
            assert_int_equal(nb_data_loader_len(l), 1);
            nb_batch b;
            assert_true(nb_data_loader_next(l, &b));
            assert_int_equal(nb_dim(b.x, 0), 10);
            assert_false(nb_data_loader_next(l, &b));
            assert_false(nb_data_loader_failed(l));
            nb_data_loader_free(l);
            l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = sizes[k], .num_workers = w, .drop_last = true });
            assert_non_null(l);
            assert_int_equal(nb_data_loader_len(l), 0);
            assert_false(nb_data_loader_next(l, &b));
            nb_data_loader_free(l);
        }
    assert_null(nb_error());
    assert_null(nb_data_loader_new(ds, (nb_loader_opts){ .num_workers = 2, .prefetch = INT32_MAX }));
    ASSERT_ERROR_CONTAINS("prefetch 2147483647");
    assert_null(nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = -1 }));
    ASSERT_ERROR_CONTAINS("batch_size -1");
    nb_dataset_free(ds);
    /* lengths that sum past INT64_MAX (and wrap to the dataset's length) are refused */
    ds = small_images(2);
    int64_t lens[3] = { INT64_MAX, INT64_MAX, 4 }; /* wraps to 2 */
    nb_dataset *parts[3];
    assert_int_equal(nb_data_random_split(ds, lens, 3, 1, parts), -1);
    ASSERT_ERROR_CONTAINS("overflow");
    nb_dataset_free(ds);
    assert_null(nb_error());
}

/* A NUL byte inside a CSV field would end the field early (so "1\0 2" read as 1): an error naming
   the line and column, quoted or not. */
static void test_csv_nul(void **state) {
    (void)state;
    const char plain[] = "a,b\n1,2\n3,1\0 2\n";
    assert_null(nb_data_csv_parse(plain, sizeof plain - 1, "nul.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("nul.csv: a NUL byte inside the field at line 3, column 2");
    const char quoted[] = "a,b\n\"1\0 2\",2\n";
    assert_null(nb_data_csv_parse(quoted, sizeof quoted - 1, "q.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("line 2, column 1");
    const char head[] = "a\0x,b\n1,2\n";
    assert_null(nb_data_csv_parse(head, sizeof head - 1, "h.csv", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("line 1, column 1");
    assert_null(nb_error());
}

/* A child that opens the FIFO at path for writing (waiting for a reader), then closes it: a
   reader that opened the FIFO would then read an empty file instead of waiting forever. */
static pid_t fifo_with_writer(const char *path) {
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        int fd = open(path, O_WRONLY);
        if (fd >= 0) close(fd);
        _exit(0);
    }
    return pid;
}

static void end_child(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* The data readers refuse what is not a regular file (a FIFO would block them forever, a
   folder reads as nonsense), with an error naming the path. */
static void test_readers_refuse_special_files(void **state) {
    (void)state;
    char p[1024];
    path_in(tmpdir, "fifo", p, sizeof p);
    pid_t pid = fifo_with_writer(p);
    nb_tensor *t = nb_read_idx(p);
    end_child(pid);
    assert_null(t);
    const char *e = nb_error();
    assert_non_null(e);
    assert_non_null(strstr(e, p));
    ASSERT_ERROR_CONTAINS("not a regular file (it is a FIFO)");
    pid = fifo_with_writer(p);
    nb_dataset *ds = nb_data_csv(p, (nb_csv_opts){ 0 });
    end_child(pid);
    assert_null(ds);
    ASSERT_ERROR_CONTAINS("not a regular file");
    pid = fifo_with_writer(p);
    t = nb_read_png(p);
    end_child(pid);
    assert_null(t);
    ASSERT_ERROR_CONTAINS("not a regular file");
    unlink(p);
    assert_null(nb_read_idx(tmpdir));
    ASSERT_ERROR_CONTAINS("not a regular file (it is a folder)");
    assert_null(nb_data_csv("/dev/null", (nb_csv_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("/dev/null is not a regular file (it is a character device)");
    assert_null(nb_error());
}

/* The order of each epoch: y is the sample index, so the labels of the batches are the order. */
static void epoch_orders(nb_dataset *ds, int64_t n, int workers, uint64_t seed, int epochs, int64_t *out) {
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 5, .shuffle = true, .num_workers = workers,
                                                                 .seed = seed });
    assert_non_null(l);
    for (int e = 0; e < epochs; e++) {
        nb_batch b;
        int64_t k = 0;
        while (nb_data_loader_next(l, &b)) {
            int64_t m = nb_numel(b.y);
            assert_true(k + m <= n);
            assert_int_equal(nb_copy_to(b.y, out + e * n + k, sizeof(int64_t) * (size_t)m), 0);
            k += m;
        }
        assert_false(nb_data_loader_failed(l));
        assert_int_equal(k, n);
    }
    nb_data_loader_free(l);
}

/* Shuffling, tested on the order itself: every epoch is a permutation of all indices, a new one
   each epoch, the same under the same seed whatever the number of workers, another under
   another seed. */
static void test_loader_shuffle_order(void **state) {
    (void)state;
    enum { N = 37, E = 3 };
    int64_t idx[N];
    for (int64_t i = 0; i < N; i++) idx[i] = i;
    nb_tensor *x = nb_from_data(idx, NB_SHAPE(N, 1), NB_I64), *y = nb_from_data(idx, NB_SHAPE(N), NB_I64);
    nb_dataset *ds = nb_data_tensors(x, y);
    nb_release(x);
    nb_release(y);
    static int64_t ref[E * N], got[E * N];
    epoch_orders(ds, N, 0, 42, E, ref);
    for (int e = 0; e < E; e++) {
        bool seen[N] = { false };
        bool identity = true;
        for (int64_t i = 0; i < N; i++) {
            int64_t v = ref[e * N + i];
            assert_true(v >= 0 && v < N);
            assert_false(seen[v]);
            seen[v] = true;
            identity = identity && v == i;
        }
        assert_false(identity);
        for (int f = 0; f < e; f++) assert_memory_not_equal(ref + e * N, ref + f * N, sizeof(int64_t) * N);
    }
    for (int w = 0; w <= 3; w++) {
        memset(got, 0xff, sizeof got);
        epoch_orders(ds, N, w, 42, E, got);
        assert_memory_equal(ref, got, sizeof ref);
    }
    epoch_orders(ds, N, 2, 43, E, got);
    assert_memory_not_equal(ref, got, sizeof(int64_t) * N);
    /* set_position to epoch 2 serves epoch 2's order */
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 5, .shuffle = true, .seed = 42 });
    assert_int_equal(nb_data_loader_set_position(l, 2, 0), 0);
    nb_batch b;
    assert_true(nb_data_loader_next(l, &b));
    int64_t first[5];
    nb_copy_to(b.y, first, sizeof first);
    assert_memory_equal(first, ref + 2 * N, sizeof first);
    nb_data_loader_free(l);
    nb_dataset_free(ds);
    assert_null(nb_error());
}

/* nb_transform_resize against torch's bilinear interpolate (down, up and the same size), and
   nb_transform_channels against torchvision's luma weights; wrong samples are errors. */
static double max_abs_diff(nb_tensor *a, nb_tensor *b) {
    return nb_item(nb_max(nb_flatten(nb_abs(nb_sub(a, b)), 0, -1), 0, false));
}

static void test_resize_channels(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    char p[4200];
    nb_tensor *src = nb_load_npy(path_in(ref_dir, "resize_src.npy", p, sizeof p));
    assert_non_null(src);
    const int64_t sizes[3][2] = { { 3, 4 }, { 9, 11 }, { 5, 7 } };
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "resize_%lldx%lld.npy", (long long)sizes[k][0], (long long)sizes[k][1]);
        nb_tensor *want = nb_load_npy(path_in(ref_dir, name, p, sizeof p));
        nb_transform *t = nb_transform_resize(sizes[k][0], sizes[k][1]);
        nb_tensor *got = nb_transform_apply(t, src, 0);
        nb_transform_free(t);
        assert_non_null(got);
        assert_int_equal(nb_dim(got, 1), sizes[k][0]);
        assert_int_equal(nb_dim(got, 2), sizes[k][1]);
        double err = max_abs_diff(got, want);
        if (!(err < 1e-5)) fail_msg("resize to %s: max error %g against torch", name, err);
    }
    nb_tensor *rgb = nb_load_npy(path_in(ref_dir, "rgb_src.npy", p, sizeof p));
    nb_tensor *gray_want = nb_load_npy(path_in(ref_dir, "rgb_gray.npy", p, sizeof p));
    nb_transform *g = nb_transform_channels(1), *c3 = nb_transform_channels(3);
    nb_tensor *gray = nb_transform_apply(g, rgb, 0);
    double err = max_abs_diff(gray, gray_want);
    if (!(err < 1e-6)) fail_msg("rgb to gray: max error %g against torchvision's weights", err);
    nb_tensor *back = nb_transform_apply(c3, gray, 0); /* gray repeated in three channels */
    assert_int_equal(nb_dim(back, 0), 3);
    assert_true(max_abs_diff(nb_slice(back, 0, 2, 3, 1), gray) == 0);
    assert_true(nb_transform_apply(c3, rgb, 0) != NULL); /* already RGB: unchanged */
    /* wrong samples and sizes are errors naming the transform */
    assert_null(nb_transform_apply(g, nb_zeros(NB_SHAPE(5, 4, 4), NB_F32), 0));
    ASSERT_ERROR_CONTAINS("nb_transform_channels");
    nb_transform *r = nb_transform_resize(4, 4);
    assert_null(nb_transform_apply(r, nb_zeros(NB_SHAPE(1, 4, 4), NB_U8), 0));
    ASSERT_ERROR_CONTAINS("nb_transform_resize");
    assert_null(nb_transform_resize(0, 4));
    ASSERT_ERROR_CONTAINS("nb_transform_resize");
    assert_null(nb_transform_channels(2));
    ASSERT_ERROR_CONTAINS("nb_transform_channels");
    nb_transform_free(r);
    nb_transform_free(g);
    nb_transform_free(c3);
    /* the reference folder mixes gray and RGB images: mapped to RGB and resized, they batch, and
       the batch equals the samples read one by one */
    nb_dataset *folder = nb_data_image_folder(path_in(ref_dir, "images", p, sizeof p));
    nb_dataset *mapped = nb_data_map(folder, nb_transform_compose(nb_transform_channels(3), nb_transform_resize(4, 4), NULL));
    nb_dataset_free(folder);
    const int64_t all[6] = { 0, 1, 2, 3, 4, 5 };
    nb_batch b;
    assert_int_equal(nb_dataset_get_batch(mapped, all, 6, &b), 0);
    assert_int_equal(nb_dim(b.x, 0), 6);
    assert_int_equal(nb_dim(b.x, 1), 3);
    for (int64_t i = 0; i < 6; i++) {
        nb_batch one;
        assert_int_equal(nb_dataset_get(mapped, i, &one), 0);
        assert_true(max_abs_diff(nb_slice(b.x, 0, i, i + 1, 1), nb_unsqueeze(one.x, 0)) == 0); /* the scope owns one */
    }
    nb_dataset_free(mapped);
    nb_scope_end(s);
}

int main(int argc, char **argv) {
    if (argc > 1) ref_dir = argv[1];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nabla_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_tensors_and_loader_order, clear_error_setup),
        cmocka_unit_test_setup(test_determinism_across_workers, clear_error_setup),
        cmocka_unit_test_setup(test_worker_error_and_shutdown, clear_error_setup),
        cmocka_unit_test_setup(test_map_batch, clear_error_setup),
        cmocka_unit_test_setup(test_subset_split_concat, clear_error_setup),
        cmocka_unit_test_setup(test_transforms, clear_error_setup),
        cmocka_unit_test_setup(test_fashion_mnist, clear_error_setup),
        cmocka_unit_test_setup(test_readers_written_by_others, clear_error_setup),
        cmocka_unit_test_setup(test_bad_input, clear_error_setup),
        cmocka_unit_test_setup(test_fashion_mnist_named_root, clear_error_setup),
        cmocka_unit_test_setup(test_idx_sizes_checked, clear_error_setup),
        cmocka_unit_test_setup(test_loader_sizes, clear_error_setup),
        cmocka_unit_test_setup(test_csv_nul, clear_error_setup),
        cmocka_unit_test_setup(test_readers_refuse_special_files, clear_error_setup),
        cmocka_unit_test_setup(test_loader_shuffle_order, clear_error_setup),
        cmocka_unit_test_setup(test_resize_channels, clear_error_setup),
    };
    int rc = RUN_TESTS(tests);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}
