/* bf16 autocast (nb_autocast): matmul, linear and the convolutions, forward and backward, equal
   products of bf16-rounded operands summed in f32, against a double-precision reference written
   here; everything else stays f32; the scope nests, is per thread, and guards compiled graphs.
   Run twice by ctest: on this CPU's fastest path, and with NABLA_BF16=emulate (f32 kernels on
   rounded operands), which machines without bf16 instructions take. */
#include "test_util.h"
#include <math.h>
#include <pthread.h>
#include <string.h>

/* x rounded to the nearest bf16, ties to even: the reference's own rounding, not nabla's */
static double bf(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float r;
    memcpy(&r, &u, 4);
    return r;
}

static nb_tensor *rand_t(nb_shape s, bool grad) {
    nb_tensor *t = nb_randn(s, NB_F32);
    if (grad) nb_set_requires_grad(t, true);
    return t;
}

static void read_f32(nb_tensor *t, float *v, int64_t n) {
    assert_int_equal(nb_numel(t), n);
    assert_int_equal(nb_copy_to(t, v, sizeof(float) * (size_t)n), 0);
}

/* got[i] equals want[i] within f32 summation error of the terms' magnitude mag[i] */
static void expect_close(const float *got, const double *want, const double *mag, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-5 * mag[i] + 1e-30)
            fail_msg("%s[%lld]: got %.9g, want %.9g (terms' magnitude %.3g)", what, (long long)i, got[i], want[i], mag[i]);
}

/* Some element of got is further from want than f32 summation error: the result did round. */
static void expect_differs(const float *got, const double *want, const double *mag, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-4 * mag[i]) return;
    fail_msg("the result equals the f32 product: the operands were not rounded to bf16");
}

/* C = A B with A [n, k], B [k, m], in double from the (optionally bf16-rounded) operands */
static void ref_mm(const float *a, const float *b, int n, int k, int m, bool round, double *c, double *mag) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double s = 0, t = 0;
            for (int q = 0; q < k; q++) {
                double x = round ? bf(a[i * k + q]) : a[i * k + q], y = round ? bf(b[q * m + j]) : b[q * m + j];
                s += x * y;
                t += fabs(x * y);
            }
            c[i * m + j] = s;
            mag[i * m + j] = t;
        }
}

/* transpose of a [r, c] array into [c, r] */
static void transpose(const float *a, int r, int c, float *t) {
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) t[j * r + i] = a[i * c + j];
}

enum { N = 37, K = 70, M = 19 };

/* y = x W^T + b under autocast, the gradients after the scope has ended: every product rounded. */
static void test_linear_forward_backward(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_tensor *x = rand_t(NB_SHAPE(N, K), true), *w = rand_t(NB_SHAPE(M, K), true), *b = rand_t(NB_SHAPE(M), true);
    nb_tensor *g = rand_t(NB_SHAPE(N, M), false);
    assert_int_equal(nb_autocast(NB_BF16), NB_F32);
    assert_int_equal(nb_autocast_dtype(), NB_BF16);
    nb_tensor *y = nb_linear(x, w, b);
    assert_int_equal(nb_autocast(NB_F32), NB_BF16);
    assert_non_null(y);
    assert_int_equal(nb_dtype_of(y), NB_F32);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(y, g))), 0);

    static float xv[N * K], wv[M * K], wt[K * M], bv[M], gv[N * M], yv[N * M], dx[N * K], dw[M * K], db[M];
    static float gt[M * N], xt[K * N];
    static double ref[N * K], mag[N * K], ref32[N * M], mag32[N * M];
    read_f32(x, xv, N * K);
    read_f32(w, wv, M * K);
    read_f32(b, bv, M);
    read_f32(g, gv, N * M);
    read_f32(y, yv, N * M);
    transpose(wv, M, K, wt);
    ref_mm(xv, wt, N, K, M, true, ref, mag);
    for (int i = 0; i < N * M; i++) ref[i] += bv[i % M], mag[i] += fabs(bv[i % M]);
    expect_close(yv, ref, mag, N * M, "y");
    ref_mm(xv, wt, N, K, M, false, ref32, mag32);
    for (int i = 0; i < N * M; i++) ref32[i] += bv[i % M];
    expect_differs(yv, ref32, mag32, N * M);

    /* dx = g W, dw = g^T x, from rounded operands; db = sum of g in f32 (no product) */
    read_f32(nb_grad_of(x), dx, N * K);
    ref_mm(gv, wv, N, M, K, true, ref, mag);
    expect_close(dx, ref, mag, N * K, "dx");
    read_f32(nb_grad_of(w), dw, M * K);
    transpose(gv, N, M, gt);
    ref_mm(gt, xv, M, N, K, true, ref, mag);
    expect_close(dw, ref, mag, M * K, "dw");
    read_f32(nb_grad_of(b), db, M);
    for (int j = 0; j < M; j++) {
        double t = 0, a = 0;
        for (int i = 0; i < N; i++) t += gv[i * M + j], a += fabs(gv[i * M + j]);
        ref[j] = t, mag[j] = a;
    }
    expect_close(db, ref, mag, M, "db");
    (void)xt;
    nb_scope_end(s);
}

/* batched and broadcast products, a matrix-vector product and a one-row product */
static void test_matmul_shapes(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(4);
    enum { B = 3, n = 5, k = 33, m = 7 };
    nb_tensor *a = rand_t(NB_SHAPE(B, n, k), false), *b = rand_t(NB_SHAPE(k, m), false), *v = rand_t(NB_SHAPE(k), false);
    nb_tensor *r = rand_t(NB_SHAPE(1, k), false);
    nb_dtype prev = nb_autocast(NB_BF16);
    nb_tensor *y = nb_matmul(a, b), *yv = nb_matmul(a, v), *yr = nb_matmul(r, b);
    nb_autocast(prev);
    static float av[B * n * k], bv[k * m], vv[k], rv[k], got[B * n * m];
    static double ref[B * n * m], mag[B * n * m];
    read_f32(a, av, B * n * k);
    read_f32(b, bv, k * m);
    read_f32(v, vv, k);
    read_f32(r, rv, k);
    read_f32(y, got, B * n * m);
    for (int i = 0; i < B; i++) ref_mm(av + i * n * k, bv, n, k, m, true, ref + i * n * m, mag + i * n * m);
    expect_close(got, ref, mag, B * n * m, "batched");
    read_f32(yv, got, B * n);
    for (int i = 0; i < B; i++) ref_mm(av + i * n * k, vv, n, k, 1, true, ref + i * n, mag + i * n);
    expect_close(got, ref, mag, B * n, "matrix-vector");
    read_f32(yr, got, m);
    ref_mm(rv, bv, 1, k, m, true, ref, mag);
    expect_close(got, ref, mag, m, "one row");
    nb_scope_end(s);
}

/* conv2d in double from (optionally rounded) operands: x [n, c, h, w], w [o, c/g, kh, kw] */
typedef struct { int n, c, h, w, o, kh, kw, s, p, g, oh, ow; } geo;
static void ref_conv(const geo *q, const float *x, const float *w, bool round, double *y, double *mag) {
    int cg = q->c / q->g, og = q->o / q->g;
    for (int n = 0; n < q->n; n++)
        for (int o = 0; o < q->o; o++)
            for (int i = 0; i < q->oh; i++)
                for (int j = 0; j < q->ow; j++) {
                    double sum = 0, a = 0;
                    for (int c = 0; c < cg; c++)
                        for (int u = 0; u < q->kh; u++)
                            for (int v = 0; v < q->kw; v++) {
                                int hi = i * q->s - q->p + u, wi = j * q->s - q->p + v;
                                if (hi < 0 || hi >= q->h || wi < 0 || wi >= q->w) continue;
                                float xf = x[((n * q->c + (o / og) * cg + c) * q->h + hi) * q->w + wi];
                                float wf = w[((o * cg + c) * q->kh + u) * q->kw + v];
                                double t = (round ? bf(xf) : xf) * (round ? bf(wf) : wf);
                                sum += t;
                                a += fabs(t);
                            }
                    y[((n * q->o + o) * q->oh + i) * q->ow + j] = sum;
                    mag[((n * q->o + o) * q->oh + i) * q->ow + j] = a;
                }
}

/* dx and dw of sum(y * g), in double from rounded g, w and x */
static void ref_conv_grads(const geo *q, const float *x, const float *w, const float *g, double *dx, double *dxm,
                           double *dw, double *dwm) {
    int cg = q->c / q->g, og = q->o / q->g;
    int64_t nx = (int64_t)q->n * q->c * q->h * q->w, nw = (int64_t)q->o * cg * q->kh * q->kw;
    memset(dx, 0, sizeof(double) * (size_t)nx);
    memset(dxm, 0, sizeof(double) * (size_t)nx);
    memset(dw, 0, sizeof(double) * (size_t)nw);
    memset(dwm, 0, sizeof(double) * (size_t)nw);
    for (int n = 0; n < q->n; n++)
        for (int o = 0; o < q->o; o++)
            for (int i = 0; i < q->oh; i++)
                for (int j = 0; j < q->ow; j++) {
                    double gr = bf(g[((n * q->o + o) * q->oh + i) * q->ow + j]);
                    for (int c = 0; c < cg; c++)
                        for (int u = 0; u < q->kh; u++)
                            for (int v = 0; v < q->kw; v++) {
                                int hi = i * q->s - q->p + u, wi = j * q->s - q->p + v;
                                if (hi < 0 || hi >= q->h || wi < 0 || wi >= q->w) continue;
                                int64_t xi = ((int64_t)(n * q->c + (o / og) * cg + c) * q->h + hi) * q->w + wi;
                                int64_t wi2 = ((int64_t)(o * cg + c) * q->kh + u) * q->kw + v;
                                double tx = gr * bf(w[wi2]), tw = gr * bf(x[xi]);
                                dx[xi] += tx, dxm[xi] += fabs(tx);
                                dw[wi2] += tw, dwm[wi2] += fabs(tw);
                            }
                }
}

static void check_conv(const geo *q) {
    nb_scope *s = nb_scope_begin();
    int cg = q->c / q->g;
    int64_t nx = (int64_t)q->n * q->c * q->h * q->w, nw = (int64_t)q->o * cg * q->kh * q->kw;
    int64_t ny = (int64_t)q->n * q->o * q->oh * q->ow;
    nb_tensor *x = rand_t(NB_SHAPE(q->n, q->c, q->h, q->w), true), *w = rand_t(NB_SHAPE(q->o, cg, q->kh, q->kw), true);
    nb_tensor *g = rand_t(NB_SHAPE(q->n, q->o, q->oh, q->ow), false);
    nb_dtype prev = nb_autocast(NB_BF16);
    nb_tensor *y = nb_conv2d(x, w, NULL, (nb_conv_opts){ { q->s, q->s }, { q->p, q->p }, { 1, 1 }, q->g });
    nb_autocast(prev);
    assert_non_null(y);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(y, g))), 0);
    float *xv = test_malloc(sizeof(float) * (size_t)nx), *wv = test_malloc(sizeof(float) * (size_t)nw);
    float *gv = test_malloc(sizeof(float) * (size_t)ny), *got = test_malloc(sizeof(float) * (size_t)(nx + nw + ny));
    double *ref = test_malloc(sizeof(double) * (size_t)(nx + nw + ny)), *mag = test_malloc(sizeof(double) * (size_t)(nx + nw + ny));
    double *ref2 = test_malloc(sizeof(double) * (size_t)nw), *mag2 = test_malloc(sizeof(double) * (size_t)nw);
    read_f32(x, xv, nx);
    read_f32(w, wv, nw);
    read_f32(g, gv, ny);
    read_f32(y, got, ny);
    ref_conv(q, xv, wv, true, ref, mag);
    expect_close(got, ref, mag, ny, "conv y");
    ref_conv(q, xv, wv, false, ref, mag);
    expect_differs(got, ref, mag, ny);
    ref_conv_grads(q, xv, wv, gv, ref, mag, ref2, mag2);
    read_f32(nb_grad_of(x), got, nx);
    expect_close(got, ref, mag, nx, "conv dx");
    read_f32(nb_grad_of(w), got, nw);
    expect_close(got, ref2, mag2, nw, "conv dw");
    test_free(xv), test_free(wv), test_free(gv), test_free(got), test_free(ref), test_free(mag), test_free(ref2), test_free(mag2);
    nb_scope_end(s);
}

/* a batch longer than oneDNN's pieces, padding, stride, groups */
static void test_conv2d(void **state) {
    (void)state;
    nb_manual_seed(5);
    geo a = { 19, 6, 9, 8, 8, 3, 3, 1, 1, 1, 9, 8 };
    check_conv(&a);
    geo b = { 3, 4, 7, 7, 6, 3, 2, 2, 1, 2, 4, 4 };
    b.ow = (7 + 2 - 2) / 2 + 1;
    check_conv(&b);
}

/* the transposed convolution is conv2d's input gradient: rounded too */
static void test_conv_transpose(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(6);
    nb_tensor *x = rand_t(NB_SHAPE(2, 4, 5, 5), false), *w = rand_t(NB_SHAPE(4, 3, 3, 3), false);
    nb_conv_transpose_opts o = { .stride = { 2, 2 }, .padding = { 1, 1 } };
    nb_dtype prev = nb_autocast(NB_BF16);
    nb_tensor *y = nb_conv_transpose2d(x, w, NULL, o);
    nb_autocast(prev);
    nb_tensor *xr = nb_cast(nb_cast(x, NB_BF16), NB_F32), *wr = nb_cast(nb_cast(w, NB_BF16), NB_F32);
    nb_tensor *want = nb_conv_transpose2d(xr, wr, NULL, o); /* rounded operands, f32 products */
    int64_t n = nb_numel(y);
    float *a = test_malloc(sizeof(float) * (size_t)n), *bv = test_malloc(sizeof(float) * (size_t)n);
    read_f32(y, a, n);
    read_f32(want, bv, n);
    for (int64_t i = 0; i < n; i++) assert_true(fabsf(a[i] - bv[i]) <= 1e-5f * (1 + fabsf(bv[i])));
    test_free(a), test_free(bv);
    nb_scope_end(s);
}

/* f64 and integers are never autocast; other ops stay f32; the scope nests and rejects f16 */
static void test_scope(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(8);
    nb_tensor *a = nb_randn(NB_SHAPE(6, 9), NB_F64), *b = nb_randn(NB_SHAPE(9, 4), NB_F64);
    nb_tensor *plain = nb_matmul(a, b);
    nb_dtype prev = nb_autocast(NB_BF16);
    nb_tensor *inside = nb_matmul(a, b);
    assert_int_equal(nb_dtype_of(inside), NB_F64);
    double p[24], q[24];
    assert_int_equal(nb_copy_to(plain, p, sizeof p), 0);
    assert_int_equal(nb_copy_to(inside, q, sizeof q), 0);
    assert_memory_equal(p, q, sizeof p);
    /* an elementwise op and a softmax: the same bits as outside */
    nb_tensor *x = nb_randn(NB_SHAPE(5, 7), NB_F32);
    nb_tensor *sm_in = nb_softmax(nb_mul_scalar(x, 3), -1);
    assert_int_equal(nb_autocast(NB_BF16), NB_BF16); /* nested */
    assert_int_equal(nb_autocast(NB_F16), NB_BF16);  /* refused, kept */
    assert_non_null(nb_error());
    assert_non_null(strstr(nb_error(), "bf16"));
    nb_error_clear();
    assert_int_equal(nb_autocast_dtype(), NB_BF16);
    nb_autocast(prev);
    assert_int_equal(nb_autocast_dtype(), NB_F32);
    nb_tensor *sm_out = nb_softmax(nb_mul_scalar(x, 3), -1);
    float u[35], v[35];
    assert_int_equal(nb_copy_to(sm_in, u, sizeof u), 0);
    assert_int_equal(nb_copy_to(sm_out, v, sizeof v), 0);
    assert_memory_equal(u, v, sizeof u);
    nb_scope_end(s);
}

static void *other_thread(void *arg) {
    *(nb_dtype *)arg = nb_autocast_dtype();
    return NULL;
}

/* the setting belongs to the thread that made it */
static void test_per_thread(void **state) {
    (void)state;
    nb_dtype prev = nb_autocast(NB_BF16), seen = NB_BF16;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &seen), 0);
    pthread_join(t, NULL);
    nb_autocast(prev);
    assert_int_equal(seen, NB_F32);
}

static nb_tensor *mlp_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_matmul(nb_relu(nb_matmul(in[0], in[1])), in[2]);
}

/* a compiled function guards on autocast: traced once per setting, each replay as eager */
static void test_compiled(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(9);
    nb_tensor *in[3] = { nb_randn(NB_SHAPE(16, 40), NB_F32), nb_randn(NB_SHAPE(40, 24), NB_F32), nb_randn(NB_SHAPE(24, 5), NB_F32) };
    nb_compiled *c = nb_compile(mlp_fn, NULL, (nb_graph_opts){ 0 });
    assert_non_null(c);
    nb_tensor *off = nb_compiled_run(c, in, 3);
    nb_dtype prev = nb_autocast(NB_BF16);
    nb_tensor *on = nb_compiled_run(c, in, 3), *on2 = nb_compiled_run(c, in, 3), *eager = mlp_fn(in, 3, NULL);
    nb_autocast(prev);
    nb_tensor *eager_off = mlp_fn(in, 3, NULL);
    assert_int_equal(nb_compiled_get_stats(c).traces, 2);
    float a[80], b[80], e[80], f[80], g[80];
    assert_int_equal(nb_copy_to(off, a, sizeof a), 0);
    assert_int_equal(nb_copy_to(on, b, sizeof b), 0);
    assert_int_equal(nb_copy_to(on2, g, sizeof g), 0);
    assert_int_equal(nb_copy_to(eager, e, sizeof e), 0);
    assert_int_equal(nb_copy_to(eager_off, f, sizeof f), 0);
    bool differ = false;
    for (int i = 0; i < 80; i++) {
        assert_true(fabsf(b[i] - e[i]) <= 1e-5f * (1 + fabsf(e[i])));
        assert_true(fabsf(a[i] - f[i]) <= 1e-5f * (1 + fabsf(f[i])));
        assert_true(b[i] == g[i]);
        differ |= fabsf(a[i] - b[i]) > 1e-4f * (1 + fabsf(a[i]));
    }
    assert_true(differ);
    nb_compiled_free(c);
    nb_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_forward_backward),
        cmocka_unit_test(test_matmul_shapes),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv_transpose),
        cmocka_unit_test(test_scope),
        cmocka_unit_test(test_per_thread),
        cmocka_unit_test(test_compiled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
