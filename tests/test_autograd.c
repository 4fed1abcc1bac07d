/* Define-by-run autograd: control flow, accumulation, grad mode, detach, freed graphs,
   anomaly detection, and memory that stays flat over thousands of steps. */
#include "test_util.h"

static double grad_at(nb_tensor *t, int64_t i) {
    nb_tensor *g = nb_grad_of(t);
    if (!g) return NAN;
    return ((double *)nb_data_ptr(g))[i];
}

/* x^n by recursion: the graph follows the C control flow */
static nb_tensor *power(nb_tensor *x, int n) { return n == 1 ? x : nb_mul(x, power(x, n - 1)); }

static void test_control_flow(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_set_requires_grad(nb_full(NB_SHAPE(), 1.5, NB_F64), true);
    nb_tensor *y = power(x, 4);
    for (int i = 0; i < 3; i++) /* a loop whose branch depends on a value read mid-forward */
        y = nb_item(y) > 10 ? nb_mul_scalar(y, 0.5) : nb_add(y, x);
    assert_int_equal(nb_backward(y), 0);
    /* y = ((x^4 + x) ... ): x^4 = 5.0625, +x = 6.5625, +x = 8.0625, +x = 9.5625: d/dx = 4x^3 + 3 */
    assert_true(fabs(nb_item(y) - 9.5625) < 1e-12);
    assert_true(fabs(grad_at(x, 0) - (4 * 1.5 * 1.5 * 1.5 + 3)) < 1e-12);
    nb_scope_end(s);
}

static void test_accumulation_and_zero_grad(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_set_requires_grad(nb_arange(1, 4, 1, NB_F64), true);
    for (int k = 0; k < 2; k++) assert_int_equal(nb_backward(nb_sum_all(nb_mul(w, w))), 0);
    assert_true(grad_at(w, 2) == 12.0); /* 2 * (2w) */
    nb_zero_grad(w);
    assert_null(nb_grad_of(w));
    assert_int_equal(nb_backward(nb_sum_all(nb_mul_scalar(w, 3))), 0);
    assert_true(grad_at(w, 0) == 3.0);
    nb_scope_end(s);
}

static void test_grad_mode_and_detach(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(3), NB_F32), true);
    bool prev = nb_set_grad_enabled(false);
    assert_true(prev);
    assert_false(nb_is_grad_enabled());
    nb_tensor *y = nb_mul(w, w);
    assert_false(nb_requires_grad(y));
    assert_true(nb_is_leaf(y));
    nb_set_grad_enabled(true);
    nb_tensor *z = nb_mul(w, w);
    assert_true(nb_requires_grad(z));
    assert_false(nb_is_leaf(z));
    nb_tensor *d = nb_detach(z);
    assert_false(nb_requires_grad(d));
    assert_true(nb_shares_storage(d, z));
    /* the detached factor is a constant: d(w * detach(w*w))/dw = w*w = 1 */
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(w, d))), 0);
    float g[3];
    nb_copy_to(nb_grad_of(w), g, sizeof g);
    assert_true(g[0] == 1.0f && g[2] == 1.0f);
    /* integer and bool tensors cannot require grad */
    nb_set_requires_grad(nb_ones(NB_SHAPE(2), NB_I64), true);
    ASSERT_ERROR_CONTAINS("only float tensors can require gradients");
    nb_scope_end(s);
}

static void test_views_and_broadcast_gradients(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_set_requires_grad(nb_arange(0, 6, 1, NB_F64), true);
    nb_tensor *m = nb_view(w, NB_SHAPE(2, 3));
    nb_tensor *t = nb_transpose(m, 0, 1);              /* [3, 2] view */
    nb_tensor *col = nb_slice(t, 1, 1, 2, 1);           /* [3, 1]: elements 3, 4, 5 */
    nb_tensor *b = nb_add(col, nb_ones(NB_SHAPE(4, 3, 2), NB_F64)); /* broadcast to [4, 3, 2] */
    assert_int_equal(nb_backward(nb_sum_all(b)), 0);
    double want[] = { 0, 0, 0, 8, 8, 8 };
    double got[6];
    nb_copy_to(nb_grad_of(w), got, sizeof got);
    assert_memory_equal(got, want, sizeof want);
    nb_scope_end(s);
}

/* Many slices of one computed tensor, as an RNN's steps slice its input projection: the engine
   adds each slice's gradient into the part it covers (in place, once the input's gradient exists
   and is the engine's alone) instead of summing whole zero-padded copies. Overlapping windows, a
   strided slice and one along the other axis; the same gradients through nb_backward,
   nb_autograd_grad with create_graph (which takes the formula) and with a slice's gradient that
   the caller also holds. */
static void test_many_slices_of_one_tensor(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    enum { R = 7, C = 5 };
    double want[R * C] = { 0 }, got[R * C];
    nb_tensor *x = nb_set_requires_grad(nb_arange(0, R * C, 1, NB_F64), true);
    for (int pass = 0; pass < 3; pass++) {
        nb_tensor *p = nb_mul_scalar(nb_view(x, NB_SHAPE(R, C)), 3); /* computed: its node accumulates */
        nb_tensor *loss = nb_zeros(NB_SHAPE(), NB_F64);
        for (int t = 0; t + 2 <= R; t++) { /* rows t, t+1, weighted by t + 1 */
            loss = nb_add(loss, nb_mul_scalar(nb_sum_all(nb_slice(p, 0, t, t + 2, 1)), t + 1));
            if (pass == 0)
                for (int r = t; r < t + 2; r++)
                    for (int c = 0; c < C; c++) want[r * C + c] += 3.0 * (t + 1);
        }
        loss = nb_add(loss, nb_sum_all(nb_mul_scalar(nb_slice(p, 0, 1, R, 3), -2))); /* rows 1, 4 */
        loss = nb_add(loss, nb_sum_all(nb_slice(p, 1, 2, 4, 1)));                    /* columns 2, 3 */
        if (pass == 0) {
            for (int c = 0; c < C; c++) want[1 * C + c] -= 6, want[4 * C + c] -= 6;
            for (int r = 0; r < R; r++) want[r * C + 2] += 3, want[r * C + 3] += 3;
        }
        if (pass == 0) {
            assert_int_equal(nb_backward(loss), 0);
            assert_int_equal(nb_copy_to(nb_grad_of(x), got, sizeof got), 0);
        } else {
            nb_tensor *g = NULL;
            assert_int_equal(nb_autograd_grad(&loss, NULL, 1, &x, 1, &g, (nb_grad_opts){ .create_graph = pass == 2 }), 0);
            assert_int_equal(nb_copy_to(g, got, sizeof got), 0);
        }
        for (int i = 0; i < R * C; i++) assert_float_equal(got[i], want[i], 1e-12);
    }
    /* p is an output too, its gradient the caller's tensor, which reaches p's node first: a
       slice's gradient must not be added into it */
    nb_tensor *p = nb_mul_scalar(x, 1);
    nb_tensor *outs[2] = { p, nb_sum_all(nb_slice(p, 0, 10, 30, 1)) };
    nb_tensor *seeds[2] = { nb_ones(NB_SHAPE(R * C), NB_F64), nb_ones(NB_SHAPE(), NB_F64) };
    nb_tensor *g = NULL;
    assert_int_equal(nb_autograd_grad(outs, seeds, 2, &x, 1, &g, (nb_grad_opts){ 0 }), 0);
    assert_int_equal(nb_copy_to(g, got, sizeof got), 0);
    for (int i = 0; i < R * C; i++) assert_float_equal(got[i], 1 + (i >= 10 && i < 30), 1e-12);
    double ones[R * C];
    assert_int_equal(nb_copy_to(seeds[0], ones, sizeof ones), 0);
    for (int i = 0; i < R * C; i++) assert_float_equal(ones[i], 1, 0);
    nb_scope_end(s);
}

static void test_backward_errors(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(3), NB_F32), true);
    nb_tensor *y = nb_mul(w, w);
    assert_int_equal(nb_backward(y), -1);
    ASSERT_ERROR_CONTAINS("nb_backward: tensor [3] f32 has 3 elements; backward needs a single-element loss");
    nb_tensor *loss = nb_sum_all(y);
    assert_int_equal(nb_backward(loss), 0);
    assert_int_equal(nb_backward(loss), -1); /* the graph was freed by the first backward */
    ASSERT_ERROR_CONTAINS("was already freed by an earlier backward");
    assert_int_equal(nb_backward(nb_sum_all(nb_ones(NB_SHAPE(2), NB_F32))), -1);
    ASSERT_ERROR_CONTAINS("does not require grad");
    assert_int_equal(nb_backward_with(y, nb_ones(NB_SHAPE(4), NB_F32)), -1);
    ASSERT_ERROR_CONTAINS("nb_backward: gradient [4] f32 does not match tensor [3] f32");
    nb_scope_end(s);
}

static void test_inplace_write_after_use(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(3), NB_F32), true);
    nb_tensor *x = nb_full(NB_SHAPE(3), 2.0, NB_F32);
    nb_tensor *loss = nb_sum_all(nb_mul(w, x)); /* backward of mul needs x */
    assert_int_equal(nb_assign(x, nb_zeros(NB_SHAPE(3), NB_F32)), 0);
    assert_int_equal(nb_backward(loss), -1);
    ASSERT_ERROR_CONTAINS("input 1 [3] f32 of nb_mul was modified in place");
    nb_scope_end(s);
}

static void test_anomaly_forward(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_set_detect_anomaly(true);
    nb_tensor *x = nb_arange(-1, 2, 1, NB_F32);
    nb_tensor *y = nb_log(nb_add_scalar(nb_exp(x), -1.0)); /* log(0) and log of a negative */
    assert_null(y);
    ASSERT_ERROR_CONTAINS("nb_log: anomaly detected: the forward output [3] f32 contains NaN or Inf");
    nb_set_detect_anomaly(false);
    assert_non_null(nb_log(nb_add_scalar(nb_exp(x), -1.0))); /* off again: NaN flows silently */
    nb_scope_end(s);
}

static void test_anomaly_backward(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_set_detect_anomaly(true);
    nb_tensor *x = nb_set_requires_grad(nb_zeros(NB_SHAPE(2), NB_F32), true);
    nb_tensor *loss = nb_sum_all(nb_sqrt(x)); /* forward is finite, d sqrt(x)/dx at 0 is inf */
    assert_non_null(loss);
    assert_int_equal(nb_backward(loss), -1);
    ASSERT_ERROR_CONTAINS("the backward of nb_sqrt produced NaN or Inf");
    nb_set_detect_anomaly(false);
    nb_scope_end(s);
}

/* Anomaly mode flags what an op made, not what it was given or asked to make: creation ops are
   never checked (nb_empty's buffer may hold a flagged op's NaNs, nb_full(-inf) makes -inf), a
   -inf mask or a NaN carried through passes, and a NaN made in backward is still named. */
static void test_anomaly_rule(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_set_detect_anomaly(true);
    for (int k = 0; k < 3; k++) {
        assert_null(nb_log(nb_zeros(NB_SHAPE(4, 4), NB_F32))); /* -inf from finite input */
        ASSERT_ERROR_CONTAINS("nb_log: anomaly detected");
        /* the flagged output's buffer goes back to the cache; new tensors of its size are fine */
        assert_non_null(nb_empty(NB_SHAPE(4, 4), NB_F32));
        float v[16] = { 1 };
        assert_non_null(nb_from_data(v, NB_SHAPE(4, 4), NB_F32));
        assert_non_null(nb_zeros(NB_SHAPE(16), NB_F32));
        assert_null(nb_error());
    }
    nb_tensor *ninf = nb_full(NB_SHAPE(4), -INFINITY, NB_F32), *ones = nb_ones(NB_SHAPE(4), NB_F32);
    assert_non_null(ninf);
    assert_non_null(nb_add(ones, ninf));                      /* -inf given: passes */
    assert_non_null(nb_mul_scalar(ones, INFINITY));            /* asked for: passes */
    float nv[4] = { NAN, 1, 2, 3 };
    assert_non_null(nb_exp(nb_from_data(nv, NB_SHAPE(4), NB_F32))); /* a NaN carried along */
    assert_null(nb_error());
    assert_null(nb_add(nb_neg(ninf), ninf));                   /* inf - inf: a NaN made */
    ASSERT_ERROR_CONTAINS("nb_add: anomaly detected: the forward output [4] f32 contains NaN or Inf (NaN, where the "
                          "inputs held infinities only)");
    /* causal attention's own -inf mask, forward and backward */
    nb_manual_seed(3);
    nb_tensor *q = nb_set_requires_grad(nb_randn(NB_SHAPE(2, 5, 4), NB_F32), true);
    nb_tensor *kv = nb_set_requires_grad(nb_randn(NB_SHAPE(2, 5, 4), NB_F32), true);
    nb_tensor *a = nb_scaled_dot_product_attention(q, kv, kv, (nb_attn_opts){ .causal = true });
    if (!a) fail_msg("causal attention under anomaly mode: %s", nb_error());
    assert_int_equal(nb_backward(nb_sum_all(a)), 0);
    assert_null(nb_error());
    /* a NaN made in backward: d sqrt(x)/dx at 0 times a zero upstream gradient is 0 * inf */
    nb_tensor *x = nb_set_requires_grad(nb_zeros(NB_SHAPE(3), NB_F32), true);
    nb_tensor *loss = nb_sum_all(nb_mul_scalar(nb_sqrt(x), 0.0));
    assert_non_null(loss);
    assert_int_equal(nb_backward(loss), -1);
    ASSERT_ERROR_CONTAINS("the backward of nb_sqrt produced NaN or Inf");
    nb_set_detect_anomaly(false);
    nb_scope_end(s);
}

/* Every failing call records a message naming its function, a NULL argument included (the first
   message of a chain wins), and a gradient of the wrong kind is an error. */
static void test_failures_record_errors(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(2, 3), NB_F32);
#define EXPECT_NAMED(call, fn)                                                                            \
    do {                                                                                                  \
        nb_error_clear();                                                                                 \
        (void)(call);                                                                                     \
        if (!nb_error() || strncmp(nb_error(), fn ": ", strlen(fn) + 2) != 0)                             \
            fail_msg("%s: expected an error naming %s, got \"%s\"", #call, fn, nb_error() ? nb_error() : "(none)"); \
    } while (0)
    EXPECT_NAMED(nb_stack((nb_tensor *[]){ a, NULL }, 2, 0), "nb_stack");
    nb_module *lin = nb_nn_linear(3, 2);
    EXPECT_NAMED(nb_forward(lin, NULL), "nb_forward");
    EXPECT_NAMED(nb_forward(NULL, a), "nb_forward");
    EXPECT_NAMED(nb_item(NULL), "nb_item");
    EXPECT_NAMED(nb_dim(NULL, 0), "nb_dim");
    EXPECT_NAMED(nb_copy_to(NULL, NULL, 0), "nb_copy_to");
    EXPECT_NAMED(nb_add(a, NULL), "nb_add");
    EXPECT_NAMED(nb_relu(NULL), "nb_relu");
    EXPECT_NAMED(nb_sum(NULL, 0, false), "nb_sum");
    EXPECT_NAMED(nb_mean(NULL, 0, false), "nb_mean");
    EXPECT_NAMED(nb_sum_all(NULL), "nb_sum_all");
    EXPECT_NAMED(nb_reshape(NULL, NB_SHAPE(6)), "nb_reshape");
    EXPECT_NAMED(nb_transpose(NULL, 0, 1), "nb_transpose");
    EXPECT_NAMED(nb_cast(NULL, NB_F64), "nb_cast");
    EXPECT_NAMED(nb_max_pool2d(NULL, 2, (nb_pool_opts){ 0 }), "nb_max_pool2d");
    EXPECT_NAMED(nb_dropout(NULL, 0.5, true), "nb_dropout");
    EXPECT_NAMED(nb_backward(NULL), "nb_backward");
    nb_optimizer *o = nb_optim_sgd(lin, (nb_sgd_opts){ .lr = 0.1 });
    EXPECT_NAMED(nb_optim_get_lr(o, -5), "nb_optim_get_lr");
    nb_error_clear();
    assert_true(isnan(nb_optim_get_lr(o, 1)));
    ASSERT_ERROR_CONTAINS("nb_optim_get_lr: group 1 is out of range");
    EXPECT_NAMED(nb_optim_get_lr(NULL, 0), "nb_optim_get_lr");
    /* the first message of a chain wins */
    nb_error_clear();
    assert_null(nb_relu(nb_sum(a, 5, false)));
    ASSERT_ERROR_CONTAINS("nb_sum: axis 5 is out of range");
    /* nb_backward_with: a gradient of another shape or a non-float dtype is an error */
    nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(3), NB_F32), true);
    nb_tensor *y = nb_mul(w, w);
    int64_t gi[3] = { 1, 1, 1 };
    nb_error_clear();
    assert_int_equal(nb_backward_with(y, nb_from_data(gi, NB_SHAPE(3), NB_I64)), -1);
    ASSERT_ERROR_CONTAINS("nb_backward: gradient [3] i64 must be a float tensor");
    assert_null(nb_grad_of(w));
    assert_int_equal(nb_backward_with(y, nb_ones(NB_SHAPE(1, 3), NB_F32)), -1);
    ASSERT_ERROR_CONTAINS("nb_backward: gradient [1, 3] f32 does not match tensor [3] f32");
    assert_int_equal(nb_backward_with(y, nb_ones(NB_SHAPE(3), NB_F32)), 0);
    assert_null(nb_error());
#undef EXPECT_NAMED
    nb_optim_free(o);
    nb_module_free(lin);
    nb_scope_end(s);
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * 4;
}

/* A small training-like step: forward, backward, update in place with grad off. */
static void tiny_step(nb_tensor *w, nb_tensor *b, nb_tensor *x) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *h = nb_tanh(nb_linear(x, w, b));
    nb_tensor *loss = nb_mean_all(nb_mul(h, h));
    nb_backward(loss);
    bool prev = nb_set_grad_enabled(false);
    nb_assign(w, nb_sub(w, nb_mul_scalar(nb_grad_of(w), 0.01)));
    nb_assign(b, nb_sub(b, nb_mul_scalar(nb_grad_of(b), 0.01)));
    nb_set_grad_enabled(prev);
    nb_zero_grad(w);
    nb_zero_grad(b);
    nb_scope_end(s);
}

static void test_memory_flat_over_10000_steps(void **state) {
    (void)state;
    nb_manual_seed(1);
    nb_tensor *w = nb_set_requires_grad(nb_randn(NB_SHAPE(16, 8), NB_F32), true);
    nb_tensor *b = nb_set_requires_grad(nb_zeros(NB_SHAPE(16), NB_F32), true);
    nb_tensor *x = nb_randn(NB_SHAPE(4, 8), NB_F32);
    for (int i = 0; i < 500; i++) tiny_step(w, b, x); /* warm the caches */
    long rss0 = rss_kb();
    uint64_t allocs0;
    size_t used0;
    nb_memory_stats(NULL, &used0, &allocs0);
    for (int i = 0; i < 10000; i++) tiny_step(w, b, x);
    long rss1 = rss_kb();
    uint64_t allocs1;
    size_t used1;
    nb_memory_stats(NULL, &used1, &allocs1);
    assert_null(nb_error());
    assert_int_equal(allocs1, allocs0); /* a warm step takes every buffer from the cache */
    assert_int_equal(used1, used0);     /* and gives every one back */
#ifdef __SANITIZE_ADDRESS__ /* ASan's quarantine holds freed memory of the runtimes around us */
    (void)rss0; (void)rss1;
#else
    if (rss1 - rss0 > 512) fail_msg("resident memory grew from %ld kB to %ld kB over 10000 steps", rss0, rss1);
#endif
    nb_release(w);
    nb_release(b);
    nb_release(x);
}

/* torch's Tensor.register_hook: the hook sees the complete gradient (both uses of y summed),
   what it returns flows on, hooks run in order, and a failing or mis-shaped one fails backward. */
static nb_tensor *double_grad(nb_tensor *g, void *ctx) {
    (*(int *)ctx)++;
    return nb_mul_scalar(g, 2.0);
}
static nb_tensor *record_grad(nb_tensor *g, void *ctx) {
    *(double *)ctx = nb_item(nb_sum_all(g));
    return g;
}
static nb_tensor *bad_shape(nb_tensor *g, void *ctx) { (void)g; (void)ctx; return nb_zeros(NB_SHAPE(7), NB_F32); }
static nb_tensor *failing(nb_tensor *g, void *ctx) { (void)g; (void)ctx; nb_error_clear(); return NULL; }

/* Hooks on a leaf see its whole gradient of a backward once (every edge summed), before .grad;
   they stay with the tensor for later backwards; a failing one fails the backward. */
static void test_leaf_hooks(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_set_requires_grad(nb_from_data((float[]){ 1, 2, 3 }, NB_SHAPE(3), NB_F32), true);
    int calls = 0;
    double seen = 0;
    assert_int_equal(nb_tensor_register_hook(x, record_grad, &seen), 0);
    assert_int_equal(nb_tensor_register_hook(x, double_grad, &calls), 0);
    /* loss = sum(x^2) + sum(3 x) + sum(x): dx = 2x + 4 = (6, 8, 10), through three edges */
    nb_tensor *loss = nb_add(nb_add(nb_sum_all(nb_mul(x, x)), nb_sum_all(nb_mul_scalar(x, 3.0))), nb_sum_all(x));
    assert_int_equal(nb_backward(loss), 0);
    assert_int_equal(calls, 1);
    assert_true(seen == 24.0);
    float g[3];
    assert_int_equal(nb_copy_to(nb_grad_of(x), g, sizeof g), 0);
    assert_true(g[0] == 12 && g[1] == 16 && g[2] == 20);
    /* a second backward adds its hooked gradient to .grad; x as its own loss's root too */
    assert_int_equal(nb_backward(nb_sum_all(x)), 0);
    assert_int_equal(calls, 2);
    assert_int_equal(nb_copy_to(nb_grad_of(x), g, sizeof g), 0);
    assert_true(g[0] == 14 && g[1] == 18 && g[2] == 22);
    nb_tensor *one = nb_set_requires_grad(nb_from_data((float[]){ 5 }, NB_SHAPE(), NB_F32), true);
    assert_int_equal(nb_tensor_register_hook(one, double_grad, &calls), 0);
    assert_int_equal(nb_backward(one), 0);
    assert_true(nb_item(nb_grad_of(one)) == 2.0);
    /* a failing hook on a leaf fails the backward, naming it */
    nb_tensor *w = nb_set_requires_grad(nb_from_data((float[]){ 1, 2 }, NB_SHAPE(2), NB_F32), true);
    assert_int_equal(nb_tensor_register_hook(w, failing, NULL), 0);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul(w, w))), -1);
    ASSERT_ERROR_CONTAINS("a gradient hook on a leaf failed");
    assert_null(nb_grad_of(w));
    nb_scope_end(s);
}

static void test_tensor_hooks(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_set_requires_grad(nb_from_data((float[]){ 1, 2, 3 }, NB_SHAPE(3), NB_F32), true);
    nb_tensor *y = nb_mul(x, x);
    int calls = 0;
    double seen = 0;
    assert_int_equal(nb_tensor_register_hook(y, record_grad, &seen), 0);
    assert_int_equal(nb_tensor_register_hook(y, double_grad, &calls), 0);
    /* loss = sum(y) + sum(3 y): y's gradient is 4 per element, doubled to 8; x's is 8 * 2x */
    assert_int_equal(nb_backward(nb_add(nb_sum_all(y), nb_sum_all(nb_mul_scalar(y, 3.0)))), 0);
    assert_int_equal(calls, 1);
    assert_true(seen == 12.0);
    float g[3];
    assert_int_equal(nb_copy_to(nb_grad_of(x), g, sizeof g), 0);
    assert_true(g[0] == 16 && g[1] == 32 && g[2] == 48);
    /* a tensor without grad is refused */
    assert_int_equal(nb_tensor_register_hook(nb_zeros(NB_SHAPE(2), NB_F32), record_grad, &seen), -1);
    ASSERT_ERROR_CONTAINS("does not require grad");
    nb_tensor *z = nb_mul(x, x);
    assert_int_equal(nb_tensor_register_hook(z, bad_shape, NULL), 0);
    assert_int_equal(nb_backward(nb_sum_all(z)), -1);
    ASSERT_ERROR_CONTAINS("a gradient hook on the output of nb_mul returned [7] f32 for a gradient [3] f32");
    z = nb_mul(x, x);
    assert_int_equal(nb_tensor_register_hook(z, failing, NULL), 0);
    assert_int_equal(nb_backward(nb_sum_all(z)), -1);
    ASSERT_ERROR_CONTAINS("a gradient hook on the output of nb_mul failed");
    nb_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_control_flow, clear_error_setup),
        cmocka_unit_test_setup(test_accumulation_and_zero_grad, clear_error_setup),
        cmocka_unit_test_setup(test_grad_mode_and_detach, clear_error_setup),
        cmocka_unit_test_setup(test_views_and_broadcast_gradients, clear_error_setup),
        cmocka_unit_test_setup(test_many_slices_of_one_tensor, clear_error_setup),
        cmocka_unit_test_setup(test_backward_errors, clear_error_setup),
        cmocka_unit_test_setup(test_inplace_write_after_use, clear_error_setup),
        cmocka_unit_test_setup(test_anomaly_forward, clear_error_setup),
        cmocka_unit_test_setup(test_anomaly_backward, clear_error_setup),
        cmocka_unit_test_setup(test_anomaly_rule, clear_error_setup),
        cmocka_unit_test_setup(test_failures_record_errors, clear_error_setup),
        cmocka_unit_test_setup(test_memory_flat_over_10000_steps, clear_error_setup),
        cmocka_unit_test_setup(test_tensor_hooks, clear_error_setup),
        cmocka_unit_test_setup(test_leaf_hooks, clear_error_setup),
    };
    return RUN_TESTS(tests);
}
