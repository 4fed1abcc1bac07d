/* Tests of src/summary: the protobuf encoder and CRC byte for byte, the event writer (naming,
   framing, buffering and the flush timer), histograms, run-health helpers, the event reader on
   whole, truncated and corrupt files, and the SVG/CSV plotter. It also writes the fixture runs
   (argv[1]) that tests/tb_reader.py and tests/summary_plot.sh check independently. */
#include "test_util.h"
#include "../src/summary/pb.h"
#include "../src/summary/summary_impl.h"
#include <errno.h>
#include <float.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *fixture_dir = "summary_fixture";
static char tmp_dir[512];

/* Makes a fresh empty folder under the temporary directory and returns its path (static buffer). */
static const char *fresh_dir(const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
    return path;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc((size_t)sz + 1);
    assert_int_equal(fread(d, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return d;
}

static void write_all(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, 1, n, f), n);
    fclose(f);
}

/* ---- encoder ---- */

static void expect_bytes(const nb_pb_buf *b, const unsigned char *want, size_t n) {
    if (b->len != n) fail_msg("encoded %zu bytes, expected %zu", b->len, n);
    for (size_t i = 0; i < n; i++)
        if (b->data[i] != want[i]) fail_msg("byte %zu is 0x%02x, expected 0x%02x", i, b->data[i], want[i]);
}

static void test_pb_encoder(void **state) {
    nb_pb_buf b = { 0 };
    nb__pb_varint(&b, 0);
    nb__pb_varint(&b, 1);
    nb__pb_varint(&b, 127);
    nb__pb_varint(&b, 128);
    nb__pb_varint(&b, 300);
    expect_bytes(&b, (const unsigned char[]){ 0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02 }, 7);
    b.len = 0;
    nb__pb_varint(&b, UINT64_MAX);
    expect_bytes(&b, (const unsigned char[]){ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 10);
    b.len = 0;
    nb__pb_int(&b, 2, -1); /* int64 -1: ten bytes, as protobuf encodes it */
    assert_int_equal(b.len, 11);
    assert_int_equal(b.data[0], 0x10);
    b.len = 0;
    nb__pb_int(&b, 2, 150); /* the protobuf docs' example: 08 96 01 for field 1; field 2 is 0x10 */
    expect_bytes(&b, (const unsigned char[]){ 0x10, 0x96, 0x01 }, 3);
    b.len = 0;
    nb__pb_string(&b, 1, "testing", 7); /* docs: 12 07 74 65 73 74 69 6e 67 for field 2 */
    expect_bytes(&b, (const unsigned char[]){ 0x0a, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g' }, 9);
    b.len = 0;
    nb__pb_double(&b, 1, 1.0);
    expect_bytes(&b, (const unsigned char[]){ 0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f }, 9);
    b.len = 0;
    nb__pb_float(&b, 2, 1.0f);
    expect_bytes(&b, (const unsigned char[]){ 0x15, 0, 0, 0x80, 0x3f }, 5);
    b.len = 0;
    nb__pb_packed_doubles(&b, 6, (const double[]){ 1.0, -2.0 }, 2);
    expect_bytes(&b, (const unsigned char[]){ 0x32, 16, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0xc0 }, 18);
    b.len = 0;
    size_t m = nb__pb_begin(&b, 5);
    nb__pb_int(&b, 1, 3);
    nb__pb_end(&b, m); /* length 2 as a padded five-byte varint */
    expect_bytes(&b, (const unsigned char[]){ 0x2a, 0x82, 0x80, 0x80, 0x80, 0x00, 0x08, 0x03 }, 8);
    /* and the decoder reads it back */
    nb_pb_reader r = { b.data, b.data + b.len, false };
    nb_pb_field f;
    assert_true(nb__pb_next(&r, &f));
    assert_int_equal(f.field, 5);
    assert_int_equal(f.len, 2);
    nb_pb_reader q = { f.bytes, f.bytes + f.len, false };
    assert_true(nb__pb_next(&q, &f));
    assert_int_equal(f.field, 1);
    assert_int_equal(f.u, 3);
    assert_false(nb__pb_next(&q, &f));
    assert_false(q.bad);
    /* a field running past its message is malformed, not read */
    const unsigned char bad[] = { 0x0a, 0x09, 'x' };
    nb_pb_reader rb = { bad, bad + 3, false };
    assert_false(nb__pb_next(&rb, &f));
    assert_true(rb.bad);
    nb__pb_free(&b);
}

static void test_crc32c(void **state) {
    /* Reference values: RFC 3720 (iSCSI) B.4 and the common "123456789" check value. */
    assert_int_equal(nb__crc32c(0, "123456789", 9), 0xe3069283u);
    unsigned char zeros[32] = { 0 }, ones[32], inc[32];
    memset(ones, 0xff, 32);
    for (int i = 0; i < 32; i++) inc[i] = (unsigned char)i;
    assert_int_equal(nb__crc32c(0, zeros, 32), 0x8a9136aau);
    assert_int_equal(nb__crc32c(0, ones, 32), 0x62a8ab43u);
    assert_int_equal(nb__crc32c(0, inc, 32), 0x46dd794eu);
    /* continuing a CRC over pieces gives the CRC of the whole */
    assert_int_equal(nb__crc32c(nb__crc32c(0, "12345", 5), "6789", 4), 0xe3069283u);
    /* TFRecord framing: length, masked CRCs */
    nb_pb_buf b = { 0 };
    nb__tfrecord(&b, "abc", 3);
    assert_int_equal(b.len, 3 + 16);
    assert_int_equal(b.data[0], 3);
    for (int i = 1; i < 8; i++) assert_int_equal(b.data[i], 0);
    uint32_t lc = (uint32_t)b.data[8] | (uint32_t)b.data[9] << 8 | (uint32_t)b.data[10] << 16 | (uint32_t)b.data[11] << 24;
    assert_int_equal(lc, nb__crc_mask(nb__crc32c(0, b.data, 8)));
    uint32_t dc = (uint32_t)b.data[15] | (uint32_t)b.data[16] << 8 | (uint32_t)b.data[17] << 16 | (uint32_t)b.data[18] << 24;
    assert_int_equal(dc, nb__crc_mask(nb__crc32c(0, "abc", 3)));
    nb__pb_free(&b);
}

/* ---- histograms ---- */

static void check_histogram(const double *v, int64_t n) {
    nb_histo h;
    assert_int_equal(nb__summary_histo_build(v, n, &h), 0);
    double num = 0, mn = INFINITY, mx = -INFINITY, sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        num++, sum += v[i], sq += v[i] * v[i];
        mn = fmin(mn, v[i]), mx = fmax(mx, v[i]);
    }
    double total = 0;
    for (int i = 0; i < h.n; i++) {
        total += h.count[i];
        if (i) assert_true(h.limit[i] > h.limit[i - 1]);
    }
    assert_true(total == num);
    assert_true(h.num == num);
    if (num) {
        assert_true(h.min == mn);
        assert_true(h.max == mx);
    }
    assert_true(h.sum == sum);
    assert_true(h.sum_squares == sq || fabs(h.sum_squares - sq) <= 1e-12 * fabs(sq)); /* FMA may contract */
    /* every finite value falls in a bucket [limit[i-1], limit[i]) whose count covers it */
    for (int64_t k = 0; k < n; k++) {
        if (!isfinite(v[k])) continue;
        int i = 0;
        while (!(h.limit[i] > v[k])) i++;
        assert_true(h.count[i] > 0);
        if (i) assert_true(h.limit[i - 1] <= v[k]);
    }
    nb__summary_histo_free(&h);
}

static void test_histogram_buckets(void **state) {
    int nl;
    const double *l = nb__summary_bucket_limits(&nl);
    assert_non_null(l);
    /* TensorFlow's defaults: 774 positive limits from 1e-12 by 1.1, mirrored, 0 and +-DBL_MAX */
    assert_int_equal(nl, 2 * 774 + 3);
    assert_true(l[0] == -DBL_MAX && l[nl - 1] == DBL_MAX && l[nl / 2] == 0.0);
    assert_true(l[nl / 2 + 1] == 1e-12);
    assert_true(fabs(l[nl / 2 + 2] - 1.1e-12) < 1e-24);
    const double a[] = { 0, 1, -1, 0.5, 1e-15, -3e7, 2.5, 2.5, 1e30, -DBL_MAX, NAN, INFINITY, -INFINITY };
    check_histogram(a, sizeof a / sizeof a[0]);
    check_histogram(a, 0);
    nb_manual_seed(1);
    nb_tensor *t = nb_randn(NB_SHAPE(5000), NB_F64);
    check_histogram(nb_data_ptr(t), 5000);
    nb_release(t);
    /* an empty histogram still has one bucket, as TensorFlow's */
    nb_histo h;
    assert_int_equal(nb__summary_histo_build(NULL, 0, &h), 0);
    assert_true(h.n >= 1 && h.num == 0);
    nb__summary_histo_free(&h);
}

/* ---- the writer, with the fixture runs for the independent reader ---- */

typedef struct fixture { FILE *expected; } fixture;

static void expect_scalar(FILE *f, const char *tag, int64_t step, double v) {
    fprintf(f, "scalar\t%s\t%lld\t%.9g\n", tag, (long long)step, (double)(float)v);
}

static nb_module *tiny_net(void) { return nb_nn_sequential(nb_nn_linear(4, 3), nb_nn_relu(), nb_nn_linear(3, 2), NULL); }

/* Runs one forward and backward pass so every parameter has a gradient. */
static void tiny_backward(nb_module *m) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(5, 4), NB_F32);
    nb_tensor *loss = nb_sum_all(nb_mul(nb_forward(m, x), nb_forward(m, x)));
    assert_int_equal(nb_backward(loss), 0);
    nb_scope_end(s);
}

static void test_writer_fixture(void **state) {
    char run_a[1024], run_b[1024], path[1200];
    snprintf(run_a, sizeof run_a, "%s/run_a", fixture_dir);
    snprintf(run_b, sizeof run_b, "%s/run_b", fixture_dir);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/run_a' '%s/run_b'", fixture_dir, fixture_dir);
    assert_int_equal(system(cmd), 0);
    nb_summary_writer *w = nb_summary_open(run_a);
    assert_non_null(w);
    const char *p = nb_summary_path(w);
    assert_non_null(strstr(p, "/events.out.tfevents."));
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    if (host[0]) assert_non_null(strstr(p, host));
    /* a second writer on the same folder in the same second gets its own file */
    nb_summary_writer *w2 = nb_summary_open(run_a);
    assert_non_null(w2);
    assert_string_not_equal(nb_summary_path(w), nb_summary_path(w2));
    snprintf(path, sizeof path, "%s/expected.txt", run_a);
    FILE *ex = fopen(path, "w");
    assert_non_null(ex);
    for (int s = 0; s < 200; s++) {
        double loss = 2.0 * exp(-s / 50.0) + 0.05 * sin(s);
        assert_int_equal(nb_summary_scalar(w, "loss/train", loss, s), 0);
        expect_scalar(ex, "loss/train", s, loss);
        if (s % 20 == 0) {
            assert_int_equal(nb_summary_scalar(w2, "accuracy", 0.5 + s / 500.0, s), 0);
            expect_scalar(ex, "accuracy", s, 0.5 + s / 500.0);
        }
    }
    assert_int_equal(nb_summary_scalar(w, "negative step", -7.25, -3), 0);
    expect_scalar(ex, "negative step", -3, -7.25);
    /* histograms: a tensor, and values with NaN/Inf left out */
    nb_manual_seed(7);
    nb_tensor *t = nb_randn(NB_SHAPE(10, 100), NB_F32);
    assert_int_equal(nb_summary_histogram(w, "weights/randn", t, 5), 0);
    float fv[1000];
    assert_int_equal(nb_copy_to(t, fv, sizeof fv), 0);
    double mn = INFINITY, mx = -INFINITY, sum = 0, sq = 0;
    for (int i = 0; i < 1000; i++) mn = fmin(mn, fv[i]), mx = fmax(mx, fv[i]), sum += fv[i], sq += (double)fv[i] * fv[i];
    fprintf(ex, "histo\tweights/randn\t5\t1000\t%.17g\t%.17g\t%.17g\t%.17g\n", mn, mx, sum, sq);
    nb_release(t);
    const double odd[] = { 3, NAN, -1, INFINITY, 0, 1e9 };
    assert_int_equal(nb_summary_histogram_values(w, "odd", odd, 6, 6), 0);
    fprintf(ex, "histo\todd\t6\t4\t-1\t1e9\t%.17g\t%.17g\n", 3 - 1 + 0 + 1e9, 9.0 + 1 + 0 + 1e18);
    nb_tensor *ti = nb_arange(0, 10, 1, NB_I64); /* any dtype */
    assert_int_equal(nb_summary_histogram(w, "ints", ti, 1), 0);
    fprintf(ex, "histo\tints\t1\t10\t0\t9\t45\t285\n");
    nb_release(ti);
    /* text and hyper-parameters */
    assert_int_equal(nb_summary_text(w, "notes", "**hello** from nabla", 3), 0);
    fprintf(ex, "text\tnotes\t3\t**hello** from nabla\n");
    const nb_hparam hp[] = { { "lr", 0.001, NULL }, { "optimizer", 0, "adamw" }, { "batch_size", 64, NULL } };
    const char *metrics[] = { "loss/train", "accuracy" };
    assert_int_equal(nb_summary_hparams(w, hp, 3, metrics, 2), 0);
    fprintf(ex, "hparam\tlr\t#0.001\nhparam\toptimizer\tadamw\nhparam\tbatch_size\t#64\n");
    /* run health */
    nb_manual_seed(3);
    nb_module *m = tiny_net();
    nb_optimizer *opt = nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.125 });
    tiny_backward(m);
    double norm = nb_grad_norm(m);
    assert_true(norm > 0);
    assert_true(nb_summary_grad_norm(w, m, 10) == norm);
    expect_scalar(ex, "grad_norm/global", 10, norm);
    double before = nb_summary_clip_grad_norm(w, m, norm / 4, 10);
    assert_true(before == norm);
    double after = nb_grad_norm(m);
    assert_true(fabs(after - norm / 4) < 1e-4 * norm);
    expect_scalar(ex, "grad_norm/before_clip", 10, before);
    expect_scalar(ex, "grad_norm/after_clip", 10, after);
    assert_int_equal(nb_summary_lr(w, opt, 10), 0);
    expect_scalar(ex, "lr", 10, 0.125);
    assert_int_equal(nb_summary_parameters(w, m, NB_SUMMARY_WEIGHTS | NB_SUMMARY_GRADS, 10), 0);
    nb_named_tensor np[4];
    assert_int_equal(nb_module_named_parameters(m, np, 4), 4);
    for (int i = 0; i < 4; i++) {
        for (int kind = 0; kind < 2; kind++) {
            nb_tensor *x = kind ? nb_grad_of(np[i].tensor) : np[i].tensor;
            int64_t n;
            double *v = nb__summary_values_of(x, &n, "test");
            assert_non_null(v);
            double a = INFINITY, b = -INFINITY, s1 = 0, s2 = 0;
            for (int64_t k = 0; k < n; k++) a = fmin(a, v[k]), b = fmax(b, v[k]), s1 += v[k], s2 += v[k] * v[k];
            fprintf(ex, "histo\t%s/%s\t10\t%lld\t%.17g\t%.17g\t%.17g\t%.17g\n", kind ? "grads" : "weights", np[i].name,
                    (long long)n, a, b, s1, s2);
            free(v);
        }
    }
    assert_int_equal(nb_check_grads(w, m, 0, 11), NB_GRADS_OK);
    assert_string_equal(nb_check_grads_message(), "");
    /* a NaN gradient is named */
    nb_tensor *g = nb_full(NB_SHAPE(2), 1.0, NB_F32);
    float *gd = nb_data_ptr(g);
    gd[1] = NAN;
    nb_set_grad(np[3].tensor, g);
    nb_release(g);
    assert_int_equal(nb_check_grads(w, m, 0, 12), NB_GRADS_NONFINITE);
    assert_non_null(strstr(nb_check_grads_message(), "'2.bias'"));
    assert_non_null(strstr(nb_check_grads_message(), "1 NaN"));
    assert_null(nb_error()); /* a warning, not an error */
    fprintf(ex, "text\thealth/warning\t12\t%s\n", nb_check_grads_message());
    /* an exploding norm names the largest gradient */
    g = nb_full(NB_SHAPE(3, 4), 1e5, NB_F32);
    nb_set_grad(np[0].tensor, g);
    nb_release(g);
    nb_zero_grad(np[3].tensor);
    assert_int_equal(nb_check_grads(NULL, m, 1000, 13), NB_GRADS_EXPLODING);
    assert_non_null(strstr(nb_check_grads_message(), "'0.weight'"));
    assert_non_null(strstr(nb_check_grads_message(), "exceeds 1000"));
    nb_optim_free(opt);
    nb_module_free(m);
    fclose(ex);
    assert_int_equal(nb_summary_close(w2), 0);
    assert_int_equal(nb_summary_close(w), 0);
    assert_null(nb_error());

    /* our own reader reads back what was written */
    nb_scalar_log *log = nb_scalar_log_read(run_a);
    assert_non_null(log);
    assert_null(nb_scalar_log_note(log));
    int k = nb_scalar_log_find(log, "loss/train");
    assert_true(k >= 0);
    const int64_t *st;
    const double *v, *wt;
    assert_int_equal(nb_scalar_log_points(log, k, &st, &wt, &v), 200);
    for (int s = 0; s < 200; s++) {
        assert_int_equal(st[s], s);
        assert_true(v[s] == (float)(2.0 * exp(-s / 50.0) + 0.05 * sin(s)));
        assert_true(wt[s] > 1.5e9);
    }
    assert_int_equal(nb_scalar_log_points(log, nb_scalar_log_find(log, "accuracy"), NULL, NULL, NULL), 10);
    assert_int_equal(nb_scalar_log_points(log, nb_scalar_log_find(log, "lr"), NULL, NULL, &v), 1);
    assert_true(v[0] == 0.125);
    assert_int_equal(nb_scalar_log_find(log, "weights/randn"), -1); /* histograms are not scalars */
    nb_scalar_log_free(log);

    /* run_b: a second run for the plots */
    nb_summary_writer *wb = nb_summary_open(run_b);
    assert_non_null(wb);
    for (int s = 0; s < 200; s += 2) {
        nb_summary_scalar(wb, "loss/train", 2.2 * exp(-s / 40.0) + 0.08 * cos(s), s);
        if (s % 20 == 0) nb_summary_scalar(wb, "accuracy", 0.45 + s / 420.0, s);
    }
    assert_int_equal(nb_summary_close(wb), 0);
}

static void test_flush_timer(void **state) {
    const char *dir = fresh_dir("flush");
    nb_summary_writer *w = nb_summary_open_opts(dir, (nb_summary_opts){ .flush_secs = 0.05 });
    assert_non_null(w);
    long first = file_size(nb_summary_path(w));
    assert_true(first > 16); /* the file_version event is on disk at once */
    assert_int_equal(nb_summary_scalar(w, "x", 1, 1), 0);
    long grown = first;
    for (int i = 0; i < 200 && grown == first; i++) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        grown = file_size(nb_summary_path(w));
    }
    assert_true(grown > first); /* written by the timer, with no flush call */
    assert_int_equal(nb_summary_close(w), 0);

    /* no timer: nothing reaches the file until flush (or a full buffer) */
    w = nb_summary_open_opts(fresh_dir("noflush"), (nb_summary_opts){ .flush_secs = -1 });
    assert_non_null(w);
    first = file_size(nb_summary_path(w));
    for (int i = 0; i < 100; i++) assert_int_equal(nb_summary_scalar(w, "x", i, i), 0);
    assert_int_equal(file_size(nb_summary_path(w)), first);
    assert_int_equal(nb_summary_flush(w), 0);
    assert_true(file_size(nb_summary_path(w)) > first);
    assert_int_equal(nb_summary_close(w), 0);

    /* a small buffer is written out whenever it fills */
    w = nb_summary_open_opts(fresh_dir("small"), (nb_summary_opts){ .flush_secs = -1, .max_buffer_bytes = 100 });
    assert_non_null(w);
    first = file_size(nb_summary_path(w));
    for (int i = 0; i < 10; i++) nb_summary_scalar(w, "x", i, i);
    assert_true(file_size(nb_summary_path(w)) > first);
    assert_int_equal(nb_summary_close(w), 0);
}

static void test_bad_input(void **state) {
    /* a log folder under a regular file cannot be created: the error names it */
    const char *dir = fresh_dir("badlog");
    assert_int_equal(mkdir(dir, 0755), 0);
    char file[1100], logdir[1200];
    snprintf(file, sizeof file, "%s/plain", dir);
    write_all(file, "x", 1);
    snprintf(logdir, sizeof logdir, "%s/plain/run", dir);
    assert_null(nb_summary_open(logdir));
    ASSERT_ERROR_CONTAINS(logdir);
    assert_null(nb_summary_open(file)); /* a file, not a folder */
    ASSERT_ERROR_CONTAINS("plain");
    if (geteuid() != 0) { /* a read-only folder (root writes anyway) */
        char ro[1200];
        snprintf(ro, sizeof ro, "%s/readonly", dir);
        assert_int_equal(mkdir(ro, 0555), 0);
        assert_null(nb_summary_open(ro));
        ASSERT_ERROR_CONTAINS(ro);
        chmod(ro, 0755);
    }
    assert_null(nb_summary_open(NULL));
    ASSERT_ERROR_CONTAINS("NULL");
    assert_int_equal(nb_summary_scalar(NULL, "x", 1, 1), -1);
    ASSERT_ERROR_CONTAINS("writer is NULL");
    assert_int_equal(nb_summary_close(NULL), 0);
    assert_null(nb_scalar_log_read("/nonexistent/nabla/run"));
    ASSERT_ERROR_CONTAINS("/nonexistent/nabla/run");
    assert_null(nb_scalar_log_read(dir)); /* a folder with no event files */
    ASSERT_ERROR_CONTAINS("no event files");
    nb_summary_writer *w = nb_summary_open(fresh_dir("bad2"));
    assert_non_null(w);
    assert_int_equal(nb_summary_histogram(w, "h", NULL, 0), -1);
    ASSERT_ERROR_CONTAINS("NULL");
    assert_int_equal(nb_summary_scalar(w, NULL, 1, 0), -1);
    ASSERT_ERROR_CONTAINS("tag is NULL");
    assert_true(nb_summary_grad_norm(w, NULL, 0) < 0);
    ASSERT_ERROR_CONTAINS("NULL");
    assert_int_equal(nb_summary_close(w), 0);
}

static void test_truncated_and_corrupt(void **state) {
    const char *dir = fresh_dir("trunc");
    char d[1100];
    snprintf(d, sizeof d, "%s", dir);
    nb_summary_writer *w = nb_summary_open(d);
    assert_non_null(w);
    for (int i = 0; i < 50; i++) nb_summary_scalar(w, "loss", 1.0 / (i + 1), i);
    char path[1200];
    snprintf(path, sizeof path, "%s", nb_summary_path(w));
    assert_int_equal(nb_summary_close(w), 0);
    size_t n;
    unsigned char *data = read_all(path, &n);
    char cut[1200];
    snprintf(cut, sizeof cut, "%s/cut.tfevents", d);
    /* record boundaries, from the length fields */
    size_t bounds[64] = { 0 };
    int nb = 0;
    for (size_t pos = 0; pos < n && nb < 64; nb++) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)data[pos + i] << (8 * i);
        pos += 16 + (size_t)len;
        bounds[nb] = pos;
    }
    assert_int_equal(nb, 51);
    assert_int_equal(bounds[50], n);
    /* every cut across the last three records: the whole records before it are read, and the
       reader says where it stopped unless the cut falls on a boundary */
    for (size_t len = bounds[46]; len < n; len++) {
        write_all(cut, data, len);
        nb_scalar_log *log = nb_scalar_log_read(cut);
        assert_non_null(log);
        int whole = 0;
        while (whole < nb && bounds[whole] <= len) whole++;
        assert_int_equal(nb_scalar_log_records(log), whole);
        assert_int_equal(nb_scalar_log_points(log, nb_scalar_log_find(log, "loss"), NULL, NULL, NULL), whole - 1);
        const char *note = nb_scalar_log_note(log);
        if (bounds[whole - 1] == len) {
            assert_null(note);
        } else {
            if (!note) fail_msg("a cut at %zu of %zu bytes was not reported", len, n);
            assert_non_null(strstr(note, "truncated record at byte"));
            assert_non_null(strstr(note, "cut.tfevents"));
        }
        nb_scalar_log_free(log);
    }
    /* a flipped byte in the middle stops the reader at that record, reporting a CRC mismatch */
    data[n / 2] ^= 0x10;
    write_all(cut, data, n);
    nb_scalar_log *log = nb_scalar_log_read(cut);
    assert_non_null(log);
    assert_non_null(nb_scalar_log_note(log));
    assert_non_null(strstr(nb_scalar_log_note(log), "CRC mismatch"));
    int64_t pts = nb_scalar_log_points(log, 0, NULL, NULL, NULL);
    assert_true(pts > 10 && pts < 40);
    nb_scalar_log_free(log);
    free(data);
}

typedef struct thread_arg { nb_summary_writer *w; int id; } thread_arg;
static void *log_thread(void *p) {
    thread_arg *a = p;
    char tag[16];
    snprintf(tag, sizeof tag, "t%d", a->id);
    for (int i = 0; i < 2000; i++) nb_summary_scalar(a->w, tag, i, i);
    return NULL;
}

static void test_threads(void **state) {
    nb_summary_writer *w = nb_summary_open_opts(fresh_dir("threads"), (nb_summary_opts){ .flush_secs = 0.01, .max_buffer_bytes = 4096 });
    assert_non_null(w);
    char path[1200];
    snprintf(path, sizeof path, "%s", nb_summary_path(w));
    pthread_t th[3];
    thread_arg args[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (thread_arg){ w, i };
        pthread_create(&th[i], NULL, log_thread, &args[i]);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    assert_int_equal(nb_summary_close(w), 0);
    nb_scalar_log *log = nb_scalar_log_read(path);
    assert_non_null(log);
    assert_null(nb_scalar_log_note(log));
    assert_int_equal(nb_scalar_log_num_tags(log), 3);
    for (int i = 0; i < 3; i++) {
        const int64_t *st;
        assert_int_equal(nb_scalar_log_points(log, i, &st, NULL, NULL), 2000);
        for (int k = 0; k < 2000; k++) assert_int_equal(st[k], k);
    }
    nb_scalar_log_free(log);
}

static void test_plot(void **state) {
    const char *dir = fresh_dir("plot");
    char a[1100], b[1100], svg[1200], csv[1200];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    nb_summary_writer *wa = nb_summary_open(a), *wb = nb_summary_open(b);
    assert_non_null(wa);
    assert_non_null(wb);
    for (int s = 0; s < 100; s++) {
        nb_summary_scalar(wa, "loss", 1.0 / (1 + s), s);
        nb_summary_scalar(wb, "loss", 1.2 / (1 + s), s);
        nb_summary_scalar(wb, "lr", s < 50 ? 0.1 : 0.01, s);
    }
    nb_summary_scalar(wa, "loss", NAN, 100); /* a break in the line, not a broken plot */
    nb_summary_close(wa);
    nb_summary_close(wb);
    nb_scalar_log *la = nb_scalar_log_read(a), *lb = nb_scalar_log_read(b);
    assert_non_null(la);
    assert_non_null(lb);
    const nb_scalar_log *runs[] = { la, lb };
    const char *names[] = { "baseline <a&b>", "tuned" };
    snprintf(svg, sizeof svg, "%s/curves.svg", dir);
    assert_int_equal(nb_plot_svg(runs, names, 2, svg, (nb_plot_opts){ .smooth = 0.6, .title = "two runs" }), 0);
    size_t n;
    char *text = (char *)read_all(svg, &n);
    text[n] = 0;
    assert_non_null(strstr(text, "<svg"));
    assert_non_null(strstr(text, "</svg>"));
    assert_non_null(strstr(text, "baseline &lt;a&amp;b&gt;"));
    assert_non_null(strstr(text, ">tuned<"));
    assert_non_null(strstr(text, ">lr<"));
    assert_non_null(strstr(text, "<polyline"));
    free(text);
    snprintf(csv, sizeof csv, "%s/scalars.csv", dir);
    assert_int_equal(nb_plot_csv(runs, names, 2, csv), 0);
    FILE *f = fopen(csv, "r");
    assert_non_null(f);
    char line[256];
    int lines = 0;
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "run,tag,step,wall_time,value\n");
    while (fgets(line, sizeof line, f)) lines++;
    fclose(f);
    assert_int_equal(lines, 101 + 100 + 100);
    /* errors: a bad smoothing weight, an unwritable path */
    assert_int_equal(nb_plot_svg(runs, names, 2, svg, (nb_plot_opts){ .smooth = 1.5 }), -1);
    ASSERT_ERROR_CONTAINS("smoothing");
    assert_int_equal(nb_plot_svg(runs, names, 2, "/nonexistent/dir/x.svg", (nb_plot_opts){ 0 }), -1);
    ASSERT_ERROR_CONTAINS("/nonexistent/dir/x.svg");
    nb_scalar_log_free(la);
    nb_scalar_log_free(lb);
    /* sparkline: rising values give rising blocks */
    char spark[128];
    const double up[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    assert_string_equal(nb_sparkline(up, 8, 40, spark, sizeof spark), "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588");
    assert_string_equal(nb_sparkline(up, 8, 2, spark, sizeof spark), "\u2581\u2588");
}

/* Regression (found fuzzing the reader, issue 20): a tag holding a NUL byte never matched
   itself, so each of its points made a new series; and tags were looked up by a linear scan, so
   a file of many distinct tags took quadratic time (minutes for this one). */
static void test_reader_hostile_tags(void **state) {
    const char *dir = fresh_dir("hostile_tags");
    assert_int_equal(mkdir(dir, 0755), 0);
    char path[1200];
    snprintf(path, sizeof path, "%s/events.out.tfevents.hostile", dir);
    enum { NTAGS = 200000, NUL_TAGS = 100 };
    nb_pb_buf out = { 0 }, msg = { 0 };
    for (int i = 0; i < NTAGS + NUL_TAGS; i++) {
        msg.len = 0;
        nb__pb_double(&msg, 1, 1.5);
        nb__pb_int(&msg, 2, i);
        size_t sm = nb__pb_begin(&msg, 5), v = nb__pb_begin(&msg, 1);
        char tag[32];
        int n = i < NTAGS ? snprintf(tag, sizeof tag, "tag%d", i) : 3;
        if (i >= NTAGS) memcpy(tag, "a\0b", 3);
        nb__pb_string(&msg, 1, tag, (size_t)n);
        nb__pb_float(&msg, 2, (float)i);
        nb__pb_end(&msg, v);
        nb__pb_end(&msg, sm);
        nb__tfrecord(&out, msg.data, msg.len);
    }
    assert_false(out.failed || msg.failed);
    write_all(path, out.data, out.len);
    nb__pb_free(&out);
    nb__pb_free(&msg);
    nb_scalar_log *log = nb_scalar_log_read(path);
    assert_non_null(log);
    assert_null(nb_scalar_log_note(log));
    assert_int_equal(nb_scalar_log_records(log), NTAGS + NUL_TAGS);
    assert_int_equal(nb_scalar_log_num_tags(log), NTAGS); /* the NUL-tagged values are skipped */
    assert_int_equal(nb_scalar_log_find(log, "a"), -1);
    int k = nb_scalar_log_find(log, "tag123456");
    assert_true(k >= 0);
    assert_string_equal(nb_scalar_log_tag(log, k), "tag123456");
    const int64_t *steps;
    const double *values;
    assert_int_equal(nb_scalar_log_points(log, k, &steps, NULL, &values), 1);
    assert_int_equal(steps[0], 123456);
    assert_true(values[0] == 123456.0);
    nb_scalar_log_free(log);
}

/* ---- a histogram read back with the library's own decoder ---- */

/* The HistogramProto of the first histogram tagged tag in the event file at path. */
static bool read_histogram(const char *path, const char *tag, nb_histo *h) {
    size_t n;
    unsigned char *d = read_all(path, &n);
    bool found = false;
    for (size_t at = 0; !found && at + 12 <= n;) {
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--) len = len << 8 | d[at + (size_t)i];
        assert_true(len <= n - at - 16);
        nb_pb_reader ev = { d + at + 12, d + at + 12 + len, false };
        at += 16 + (size_t)len;
        nb_pb_field f;
        while (!found && nb__pb_next(&ev, &f)) {
            if (f.field != 5 || f.wire != 2) continue; /* Event.summary */
            nb_pb_reader sm = { f.bytes, f.bytes + f.len, false };
            nb_pb_field g;
            while (!found && nb__pb_next(&sm, &g)) {
                if (g.field != 1 || g.wire != 2) continue; /* Summary.value */
                nb_pb_reader val = { g.bytes, g.bytes + g.len, false };
                nb_pb_field v;
                const unsigned char *histo = NULL;
                size_t hlen = 0;
                bool tagged = false;
                while (nb__pb_next(&val, &v)) {
                    if (v.field == 1 && v.wire == 2) tagged = v.len == strlen(tag) && memcmp(v.bytes, tag, v.len) == 0;
                    if (v.field == 5 && v.wire == 2) histo = v.bytes, hlen = v.len;
                }
                if (!tagged || !histo) continue;
                memset(h, 0, sizeof *h);
                nb_pb_reader hr = { histo, histo + hlen, false };
                double buckets = 0;
                while (nb__pb_next(&hr, &v)) {
                    if (v.wire == 1 && v.field >= 1 && v.field <= 5) {
                        double x = nb__pb_as_double(&v);
                        double *dst[] = { &h->min, &h->max, &h->num, &h->sum, &h->sum_squares };
                        *dst[v.field - 1] = x;
                    } else if (v.field == 7 && v.wire == 2) { /* packed bucket counts */
                        for (size_t k = 0; k + 8 <= v.len; k += 8) {
                            nb_pb_field c = { 0 };
                            for (int i = 0; i < 8; i++) c.u |= (uint64_t)v.bytes[k + (size_t)i] << (8 * i);
                            buckets += nb__pb_as_double(&c);
                        }
                    }
                }
                assert_false(hr.bad);
                assert_true(buckets == h->num); /* the buckets hold every value counted */
                found = true;
            }
        }
    }
    free(d);
    return found;
}

/* min, max, num and sum of histograms as the event file holds them: values of both signs with
   NaN and infinities left out, all positive (the minimum is not 0) and all negative (nor is the
   maximum). */
static void test_histogram_read_back(void **state) {
    const char *dir = fresh_dir("histo_back");
    nb_summary_writer *w = nb_summary_open(dir);
    assert_non_null(w);
    char path[1200];
    snprintf(path, sizeof path, "%s", nb_summary_path(w));
    const double mixed[] = { 3, NAN, -2.5, INFINITY, 0, 1e9, -INFINITY, -7 };
    assert_int_equal(nb_summary_histogram_values(w, "mixed", mixed, 8, 1), 0);
    const float pos[] = { 5, 2.5f, 9, 4 }, neg[] = { -5, -1.5f, -9 };
    nb_tensor *tp = nb_from_data(pos, NB_SHAPE(2, 2), NB_F32), *tn = nb_from_data(neg, NB_SHAPE(3), NB_F32);
    assert_int_equal(nb_summary_histogram(w, "positive", tp, 2), 0);
    assert_int_equal(nb_summary_histogram(w, "negative", tn, 3), 0);
    nb_release(tp);
    nb_release(tn);
    assert_int_equal(nb_summary_close(w), 0);
    nb_histo h;
    assert_true(read_histogram(path, "mixed", &h));
    assert_true(h.min == -7 && h.max == 1e9 && h.num == 5 && h.sum == 1e9 - 6.5);
    assert_true(h.sum_squares == 9 + 6.25 + 1e18 + 49);
    assert_true(read_histogram(path, "positive", &h));
    assert_true(h.min == 2.5 && h.max == 9 && h.num == 4 && h.sum == 20.5);
    assert_true(read_histogram(path, "negative", &h));
    assert_true(h.min == -9 && h.max == -1.5 && h.num == 3 && h.sum == -15.5);
    assert_false(read_histogram(path, "absent", &h));
}

/* A restart (nb_summary_session_start at step 3, in a second file as a resumed run writes it):
   the points of the first run at step 3 and later are dropped, for every tag, and the second
   run's take their place (TensorBoard's _CheckForRestartAndMaybePurge). */
static void test_session_restart(void **state) {
    (void)state;
    const char *dir = fresh_dir("restart");
    nb_summary_writer *w = nb_summary_open(dir);
    assert_non_null(w);
    for (int s = 1; s <= 5; s++) {
        assert_int_equal(nb_summary_scalar(w, "loss", 10 + s, s), 0);
        assert_int_equal(nb_summary_scalar(w, "other", 20 + s, s), 0);
    }
    assert_int_equal(nb_summary_close(w), 0);
    sleep(1); /* the second file's name (its time in seconds) sorts after the first's */
    w = nb_summary_open(dir);
    assert_non_null(w);
    assert_int_equal(nb_summary_session_start(w, 3), 0);
    for (int s = 3; s <= 4; s++) assert_int_equal(nb_summary_scalar(w, "loss", 30 + s, s), 0);
    assert_int_equal(nb_summary_close(w), 0);
    nb_scalar_log *log = nb_scalar_log_read(dir);
    assert_non_null(log);
    const int64_t *st;
    const double *v;
    int64_t n = nb_scalar_log_points(log, nb_scalar_log_find(log, "loss"), &st, NULL, &v);
    assert_int_equal(n, 4);
    const int64_t want_st[] = { 1, 2, 3, 4 };
    const double want_v[] = { 11, 12, 33, 34 };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(st[i], want_st[i]);
        assert_true(v[i] == want_v[i]);
    }
    assert_int_equal(nb_scalar_log_points(log, nb_scalar_log_find(log, "other"), &st, NULL, &v), 2);
    nb_scalar_log_free(log);
}

/* ---- plotting many tags ---- */

/* How many times pat occurs in text[0..n) (a plain scan: strstr from each hit re-measures the
   whole text under ASan, which is quadratic for a picture this size). */
static int count_in(const char *text, size_t n, const char *pat) {
    size_t k = strlen(pat);
    int c = 0;
    for (size_t i = 0; i + k <= n; i++) c += text[i] == pat[0] && memcmp(text + i, pat, k) == 0;
    return c;
}

/* 20000 tags, each its own panel, in 10 runs: gathering the tags and finding each in each run is
   linear (a quadratic plotter scanned the tags gathered so far for each of the runs' 110000 tags,
   and each run's tags for each panel). No time is asserted: the size alone makes a quadratic
   plotter take minutes under a sanitizer. */
static void test_plot_many_tags(void **state) {
    const char *dir = fresh_dir("many_tags");
    enum { NTAGS = 20000, NRUNS = 10 };
    char paths[NRUNS][1100], svg[1200], tag[32];
    nb_scalar_log *logs[NRUNS];
    for (int r = 0; r < NRUNS; r++) {
        snprintf(paths[r], sizeof paths[r], "%s/run%d", dir, r);
        nb_summary_writer *w = nb_summary_open(paths[r]);
        assert_non_null(w);
        /* run 0 holds every tag, the others every other one (in reverse order) and one of their own */
        for (int i = r ? NTAGS - 2 : 0; r ? i >= 0 : i < NTAGS; i += r ? -2 : 1) {
            snprintf(tag, sizeof tag, "layer%05d/norm", i);
            assert_int_equal(nb_summary_scalar(w, tag, r ? -i : i, r), 0);
        }
        snprintf(tag, sizeof tag, "only_in_%d", r);
        assert_int_equal(nb_summary_scalar(w, tag, 1, 0), 0);
        assert_int_equal(nb_summary_close(w), 0);
        logs[r] = nb_scalar_log_read(paths[r]);
        assert_non_null(logs[r]);
    }
    assert_int_equal(nb_scalar_log_num_tags(logs[0]), NTAGS + 1);
    const nb_scalar_log *runs[NRUNS];
    for (int r = 0; r < NRUNS; r++) runs[r] = logs[r];
    snprintf(svg, sizeof svg, "%s/many.svg", dir);
    assert_int_equal(nb_plot_svg(runs, NULL, NRUNS, svg, (nb_plot_opts){ .panel_width = 120, .panel_height = 80 }), 0);
    size_t n;
    char *text = (char *)read_all(svg, &n);
    text[n] = 0;
    assert_int_equal(count_in(text, n, "<g class=\"panel\">"), NTAGS + NRUNS);
    assert_non_null(strstr(text, ">layer19999/norm<"));
    assert_non_null(strstr(text, ">only_in_9<"));
    free(text);
    /* a filter keeps the matching tags only */
    assert_int_equal(nb_plot_svg(runs, NULL, NRUNS, svg, (nb_plot_opts){ .tag_filter = "layer1999" }), 0);
    text = (char *)read_all(svg, &n);
    text[n] = 0;
    assert_int_equal(count_in(text, n, "<g class=\"panel\">"), 10); /* layer19990 .. layer19999 */
    free(text);
    for (int r = 0; r < NRUNS; r++) nb_scalar_log_free(logs[r]);
}

int main(int argc, char **argv) {
    if (argc > 1) fixture_dir = argv[1];
    mkdir(fixture_dir, 0755);
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/nabla_test_summary.%d", t && *t ? t : "/tmp", (int)getpid());
    mkdir(tmp_dir, 0755);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_pb_encoder, clear_error_setup),
        cmocka_unit_test_setup(test_crc32c, clear_error_setup),
        cmocka_unit_test_setup(test_histogram_buckets, clear_error_setup),
        cmocka_unit_test_setup(test_writer_fixture, clear_error_setup),
        cmocka_unit_test_setup(test_flush_timer, clear_error_setup),
        cmocka_unit_test_setup(test_bad_input, clear_error_setup),
        cmocka_unit_test_setup(test_truncated_and_corrupt, clear_error_setup),
        cmocka_unit_test_setup(test_threads, clear_error_setup),
        cmocka_unit_test_setup(test_session_restart, clear_error_setup),
        cmocka_unit_test_setup(test_plot, clear_error_setup),
        cmocka_unit_test_setup(test_histogram_read_back, clear_error_setup),
        cmocka_unit_test_setup(test_plot_many_tags, clear_error_setup),
        cmocka_unit_test_setup(test_reader_hostile_tags, clear_error_setup),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) rc = 1;
    return rc;
}
