/* Graph mode: compiled equals eager for the example models (forward, and 100 training steps of
   the MLP and the CNN), each pass on small graphs, retracing, the dynamic batch dimension (new
   sizes made from the fit of three traces without tracing, and the fallbacks where it does not
   fit), the cache bound, the compiler fallback and bad input. */
#include "test_util.h"
#include <math.h>
#include <string.h>
#include <unistd.h>

/* The examples' models, taken from the examples themselves so the tests follow them. */
#pragma GCC diagnostic ignored "-Wunused-function"
#define main mlp_example_main
#include "../examples/mlp.c"
#undef main
#define main cnn_example_main
#include "../examples/cnn.c"
#undef main
#define main gpt_example_main
#include "../examples/char_gpt.c"

/* Kernels a build compiles as C: none where it was built without the JIT (NABLA_WITH_JIT=OFF). */
#ifdef NABLA_WITH_JIT
#define JIT_KERNELS(n) (n)
#else
#define JIT_KERNELS(n) 0
#endif
#undef main

/* Random class indices in [0, classes) of the given shape, owned by the caller. */
static nb_tensor *random_labels(nb_shape shape, int classes) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *y = nb_keep(nb_cast(nb_mul_scalar(nb_rand(shape, NB_F32), classes - 0.01), NB_I64));
    nb_scope_end(s);
    return y;
}

/* Largest |a - b| / max(|b|, 1e-3) over the elements. */
static double max_rel(nb_tensor *a, nb_tensor *b) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *ad = nb_contiguous(nb_cast(a, NB_F64)), *bd = nb_contiguous(nb_cast(b, NB_F64));
    assert_non_null(ad);
    assert_non_null(bd);
    assert_int_equal(nb_numel(ad), nb_numel(bd));
    const double *x = nb_data_ptr(ad), *y = nb_data_ptr(bd);
    double m = 0;
    for (int64_t i = 0; i < nb_numel(ad); i++) {
        double d = fabs(x[i] - y[i]) / fmax(fabs(y[i]), 1e-3);
        if (!(d <= m)) m = d;
    }
    nb_scope_end(s);
    return m;
}

/* Largest relative difference over two modules' parameters (same architecture). */
static double params_rel(nb_module *a, nb_module *b) {
    nb_named_tensor pa[64], pb[64];
    int n = nb_module_named_parameters(a, pa, 64);
    assert_int_equal(n, nb_module_named_parameters(b, pb, 64));
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, max_rel(pa[i].tensor, pb[i].tensor));
    return m;
}

/* What nb_compiled_dump writes for c, as a string the caller frees. */
static char *dump_text(const nb_compiled *c) {
    char path[] = "/tmp/nabla_dump_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_int_equal(nb_compiled_dump(c, f), 0);
    fclose(f);
    char *text = read_whole_file(path);
    unlink(path);
    assert_non_null(text);
    return text;
}

static nb_graph_opts test_opts(void) { return (nb_graph_opts){ .cache_dir = NULL }; }

/* The dump of fn compiled and run once on x (malloc'ed). */
static char *dump_after_one_run(nb_graph_fn fn, nb_tensor *x) {
    nb_compiled *c = nb_compile(fn, NULL, test_opts());
    nb_scope *s = nb_scope_begin();
    assert_non_null(nb_compiled_run(c, &x, 1));
    nb_scope_end(s);
    char *text = dump_text(c);
    nb_compiled_free(c);
    return text;
}

/* ---------------------------------------------------------------- training steps */

#include "train_step.h"

/* Trains two copies of a model on the batch (x, y), one eagerly and one compiled with `step`,
   and checks loss, parameters and gradients agree at every step. Each step reseeds, so dropout
   draws the same masks. Takes x and y; returns the compiled function's counters. */
static nb_compiled_stats compare_training_with(nb_module *(*make)(void), nb_graph_fn step, nb_tensor *x, nb_tensor *y, int steps,
                                  bool schedule) {
    nb_manual_seed(3);
    nb_module *ma = make();
    nb_manual_seed(3);
    nb_module *mb = make();
    trainer ta = { ma, nb_optim_adamw(ma, (nb_adamw_opts){ .lr = 1e-3 }) };
    trainer tb = { mb, nb_optim_adamw(mb, (nb_adamw_opts){ .lr = 1e-3 }) };
    nb_compiled *c = nb_compile(step, &tb, test_opts());
    assert_non_null(c);
    double worst_loss = 0;
    for (int i = 0; i < steps; i++) {
        if (schedule) { /* a learning rate that changes every step reaches the compiled graph */
            nb_optim_set_lr(ta.opt, 1e-3 * (1.0 + 0.5 * cos(i)));
            nb_optim_set_lr(tb.opt, 1e-3 * (1.0 + 0.5 * cos(i)));
        }
        nb_scope *s = nb_scope_begin();
        nb_manual_seed(100 + (uint64_t)i);
        nb_tensor *le = step((nb_tensor *[]){ x, y }, 2, &ta);
        nb_manual_seed(100 + (uint64_t)i);
        nb_tensor *lc = nb_compiled_run(c, (nb_tensor *[]){ x, y }, 2);
        if (!lc) fail_msg("compiled step %d: %s", i, nb_error());
        assert_non_null(le);
        assert_false(nb_requires_grad(lc));
        worst_loss = fmax(worst_loss, fabs(nb_item(le) - nb_item(lc)) / fabs(nb_item(le)));
        nb_scope_end(s);
    }
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.traces, 1);
    assert_int_equal(st.runs, steps - 1);
    assert_true(worst_loss <= 1e-5);
    assert_true(params_rel(ma, mb) <= 1e-5);
    /* the compiled step hands the leaves their gradients, as the eager one does */
    nb_named_tensor pa[64], pb[64];
    int np = nb_module_named_parameters(ma, pa, 64);
    nb_module_named_parameters(mb, pb, 64);
    for (int i = 0; i < np && i < 64; i++) {
        assert_non_null(nb_grad_of(pb[i].tensor));
        assert_true(max_rel(nb_grad_of(pa[i].tensor), nb_grad_of(pb[i].tensor)) <= 1e-4);
    }
    nb_compiled_free(c);
    nb_optim_free(ta.opt);
    nb_optim_free(tb.opt);
    nb_module_free(ma);
    nb_module_free(mb);
    nb_release(x);
    nb_release(y);
    return st;
}

static void compare_training(nb_module *(*make)(void), nb_shape xshape, int steps, bool schedule) {
    nb_manual_seed(11);
    nb_tensor *x = nb_randn(xshape, NB_F32);
    compare_training_with(make, train_step, x, random_labels(NB_SHAPE(xshape.dim[0]), 10), steps, schedule);
}

static nb_module *mlp_model(void) { return net_new(); }
static nb_module *cnn_model(void) { return cnn_new(); }

static void test_mlp_training_matches_eager(void **state) {
    (void)state;
    compare_training(mlp_model, NB_SHAPE(64, 784), 100, false);
}

static void test_mlp_training_with_schedule(void **state) {
    (void)state;
    compare_training(mlp_model, NB_SHAPE(32, 784), 20, true);
}

static void test_cnn_training_matches_eager(void **state) {
    (void)state;
    compare_training(cnn_model, NB_SHAPE(4, 1, 28, 28), 100, false);
}

/* examples/char_gpt.c's training step, clipping at 0.5 (below this model's gradient norm of
   ~0.8, so the clipping scales): layer norms forward and backward run as row groups. */
static nb_tensor *gpt_train_step(nb_tensor *const *in, int n, void *ctx) {
    trainer *t = ctx;
    char_trainer ct = { t->model, t->opt, 65, 0.5 };
    return char_train_step(in, n, &ct);
}

static nb_module *gpt_model(void) { return gpt_new(65); }

static void test_gpt_training_matches_eager(void **state) {
    (void)state;
    nb_tensor *x = random_labels(NB_SHAPE(2, CONTEXT), 65), *y = random_labels(NB_SHAPE(2, CONTEXT), 65);
    assert_true(compare_training_with(gpt_model, gpt_train_step, x, y, 5, false).row_groups > 0);
}

/* examples/mlp_synthetic.c's loop: raw parameters updated with nb_assign, gradients dropped. */
static nb_tensor *raw_sgd_step(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor **p = ctx;
    nb_tensor *hidden = nb_relu(nb_linear(in[0], p[0], p[1]));
    nb_tensor *logp = nb_log_softmax(nb_linear(hidden, p[2], p[3]), 1);
    nb_tensor *loss = nb_neg(nb_mean_all(nb_gather(logp, 1, nb_unsqueeze(in[1], 1))));
    if (nb_backward(loss) < 0) return NULL;
    bool prev = nb_set_grad_enabled(false);
    for (int i = 0; i < 4; i++) {
        nb_assign(p[i], nb_sub(p[i], nb_mul_scalar(nb_grad_of(p[i]), 0.05)));
        nb_zero_grad(p[i]);
    }
    nb_set_grad_enabled(prev);
    return loss;
}

static void test_raw_sgd_matches_eager(void **state) {
    (void)state;
    nb_shape shapes[4] = { NB_SHAPE(32, 16), NB_SHAPE(32), NB_SHAPE(10, 32), NB_SHAPE(10) };
    nb_tensor *pa[4], *pb[4];
    for (int i = 0; i < 4; i++) {
        pa[i] = nb_randn(shapes[i], NB_F32);
        nb_scope *s = nb_scope_begin();
        pb[i] = nb_set_requires_grad(nb_keep(nb_clone(pa[i])), true);
        nb_scope_end(s);
        nb_set_requires_grad(pa[i], true);
    }
    nb_tensor *x = nb_randn(NB_SHAPE(24, 16), NB_F32), *y = random_labels(NB_SHAPE(24), 10);
    nb_compiled *c = nb_compile(raw_sgd_step, pb, test_opts());
    for (int i = 0; i < 50; i++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *le = raw_sgd_step((nb_tensor *[]){ x, y }, 2, pa);
        nb_tensor *lc = nb_compiled_run(c, (nb_tensor *[]){ x, y }, 2);
        if (!lc) fail_msg("%s", nb_error());
        assert_true(fabs(nb_item(le) - nb_item(lc)) <= 1e-5 * fabs(nb_item(le)));
        nb_scope_end(s);
    }
    for (int i = 0; i < 4; i++) {
        assert_true(max_rel(pa[i], pb[i]) <= 1e-5);
        assert_null(nb_grad_of(pb[i])); /* dropped, as the eager step drops it */
    }
    assert_int_equal(nb_compiled_get_stats(c).traces, 1);
    nb_compiled_free(c);
    for (int i = 0; i < 4; i++) { nb_release(pa[i]); nb_release(pb[i]); }
    nb_release(x);
    nb_release(y);
}

/* ---------------------------------------------------------------- forwards */

static nb_tensor *forward(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_forward((nb_module *)ctx, in[0]);
}

static void compare_forward(nb_module *m, nb_tensor *x, int runs) {
    nb_compiled *c = nb_compile(forward, m, test_opts());
    for (int i = 0; i < runs; i++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *e = nb_forward(m, x), *r = nb_compiled_run(c, &x, 1);
        if (!r) fail_msg("compiled forward: %s", nb_error());
        double rel = max_rel(r, e);
        if (!(rel <= 1e-5)) fail_msg("compiled forward of %s differs from eager by %g (relative)", m->cls->name, rel);
        nb_scope_end(s);
    }
    assert_int_equal(nb_compiled_get_stats(c).traces, 1);
    nb_compiled_free(c);
}

static void test_example_forwards(void **state) {
    (void)state;
    nb_manual_seed(5);
    nb_module *mlp = net_new(), *cnn = cnn_new(), *gpt = gpt_new(65);
    nb_module_train(cnn, false);
    nb_module_train(gpt, false);
    nb_tensor *xm = nb_randn(NB_SHAPE(64, 784), NB_F32), *xc = nb_randn(NB_SHAPE(8, 1, 28, 28), NB_F32);
    nb_tensor *xg = random_labels(NB_SHAPE(1, CONTEXT), 65);
    compare_forward(mlp, xm, 3);
    compare_forward(cnn, xc, 3);
    compare_forward(gpt, xg, 3);
    nb_release(xm); nb_release(xc); nb_release(xg);
    nb_module_free(mlp); nb_module_free(cnn); nb_module_free(gpt);
}

/* ---------------------------------------------------------------- passes on small graphs */

typedef struct {
    nb_compiled_stats st;
    double rel;
} pass_result;

/* Runs fn compiled (twice, so the second is a replay) with the passes `disable` leaves on,
   against fn run eagerly. */
static pass_result run_small(nb_graph_fn fn, nb_tensor *x, unsigned disable, bool interpret) {
    nb_compiled *c = nb_compile(fn, NULL, (nb_graph_opts){ .disable = disable, .interpret = interpret });
    pass_result r = { 0 };
    nb_scope *s = nb_scope_begin();
    nb_tensor *e = fn(&x, 1, NULL);
    assert_non_null(nb_compiled_run(c, &x, 1));
    nb_tensor *out = nb_compiled_run(c, &x, 1);
    if (!out) fail_msg("%s", nb_error());
    r.rel = max_rel(out, e);
    nb_scope_end(s);
    r.st = nb_compiled_get_stats(c);
    assert_int_equal(r.st.runs, 1);
    nb_compiled_free(c);
    return r;
}

static nb_tensor *with_dead_code(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *unused = nb_exp(nb_mul(in[0], in[0])); /* 2 dead ops */
    (void)unused;
    return nb_relu(in[0]);
}

static void test_pass_dce(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(8, 16), NB_F32);
    pass_result off = run_small(with_dead_code, x, NB_PASS_DCE | NB_PASS_FUSE, false);
    pass_result on = run_small(with_dead_code, x, NB_PASS_FUSE, false);
    assert_int_equal(off.st.ops_traced, 3);
    assert_int_equal(off.st.ops_after, 3);
    assert_int_equal(on.st.removed_dce, 2);
    assert_int_equal(on.st.ops_after, 1);
    assert_true(on.rel == 0 && off.rel == 0);
    nb_release(x);
}

static nb_tensor *with_common(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_add(nb_tanh(in[0]), nb_tanh(in[0]));
}

static void test_pass_cse(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(8, 16), NB_F32);
    pass_result off = run_small(with_common, x, NB_PASS_CSE | NB_PASS_FUSE, false);
    pass_result on = run_small(with_common, x, NB_PASS_FUSE, false);
    assert_int_equal(off.st.ops_after, 3);
    assert_int_equal(on.st.removed_cse, 1);
    assert_int_equal(on.st.ops_after, 2);
    assert_true(on.rel == 0);
    nb_release(x);
}

static nb_tensor *with_constants(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *k = nb_add(nb_full(NB_SHAPE(16), 2, NB_F32), nb_exp(nb_full(NB_SHAPE(16), 1, NB_F32)));
    return nb_mul(in[0], k);
}

static void test_pass_fold(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(8, 16), NB_F32);
    pass_result off = run_small(with_constants, x, NB_PASS_FOLD | NB_PASS_FUSE, false);
    pass_result on = run_small(with_constants, x, NB_PASS_FUSE, false);
    assert_int_equal(off.st.ops_after, 5);
    assert_int_equal(on.st.folded, 4); /* full, full, exp, add */
    assert_int_equal(on.st.ops_after, 1);
    assert_true(on.rel == 0);
    nb_release(x);
}

static nb_tensor *chain(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *x = in[0];
    nb_tensor *y = nb_sigmoid(nb_add_scalar(nb_mul_scalar(x, 0.5), 1.0));
    return nb_sub(nb_mul(y, nb_gelu(x)), nb_clamp(nb_sqrt(nb_abs(x)), 0.1, 0.9));
}

static void test_pass_fuse(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(37, 129), NB_F32); /* odd sizes: tails of loops */
    pass_result off = run_small(chain, x, NB_PASS_FUSE, false);
    pass_result on = run_small(chain, x, 0, false);
    pass_result interp = run_small(chain, x, 0, true);
    assert_int_equal(off.st.ops_after, 9);
    assert_int_equal(on.st.ops_after, 1);
    assert_int_equal(on.st.fused_ops, 8);
    assert_int_equal(on.st.kernels, 1);
    assert_int_equal(on.st.kernels_native, JIT_KERNELS(1));
    assert_int_equal(interp.st.kernels_native, 0);
    if (on.rel > 1e-6 || interp.rel > 1e-6) fail_msg("compiled %g, interpreted %g", on.rel, interp.rel);
    assert_true(interp.rel <= 1e-6);
    nb_release(x);
}

/* Broadcast operands (a row, a column, a scalar) and a strided one inside a fused kernel. */
static nb_tensor *broadcasts(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *x = in[0];                                   /* [6, 5, 7] */
    nb_tensor *row = nb_slice(x, 0, 0, 1, 1);               /* [1, 5, 7] */
    nb_tensor *col = nb_sum(x, 2, true);                    /* [6, 5, 1] */
    nb_tensor *t = nb_transpose(nb_exp(x), 0, 2);           /* [7, 5, 6], strided */
    nb_tensor *y = nb_relu(nb_mul(nb_add(x, row), nb_neg(col)));
    return nb_add(nb_transpose(y, 0, 2), nb_mul_scalar(t, 0.25));
}

static void test_fuse_broadcast_and_strides(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(6, 5, 7), NB_F32);
    pass_result on = run_small(broadcasts, x, 0, false), interp = run_small(broadcasts, x, 0, true);
    assert_true(on.st.fused_ops >= 3);
    assert_true(on.rel <= 1e-6);
    assert_true(interp.rel <= 1e-6);
    nb_release(x);
}

/* Advanced indexing and an i8 round trip: index and index_put run as kernels in the graph, and the
   i8 values (wrapped where x * 10 leaves its range) are loaded by the fused dequantising chain. */
static nb_tensor *index_int8(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *x = nb_relu(in[0]); /* [6, 5, 7] */
    nb_tensor *i = nb_arange(5, -2, -3, NB_I64); /* 5, 2, -1: a repeat (-1 is 5) */
    nb_tensor *y = nb_index_put(x, &i, 1, nb_mul_scalar(nb_index(x, &i, 1), 3), true);
    nb_tensor *q = nb_cast(nb_mul_scalar(y, 40), NB_I8);
    return nb_add(nb_mul_scalar(nb_cast(q, NB_F32), 0.025), nb_exp(y));
}

static void test_index_and_int8(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(6, 5, 7), NB_F32);
    pass_result on = run_small(index_int8, x, 0, false), interp = run_small(index_int8, x, 0, true);
    assert_true(on.st.fused_ops >= 3);
    assert_true(on.rel == 0 && interp.rel == 0);
    nb_release(x);
}

/* Sums over rows, over columns and over everything, each of a chain made for it alone. */
static nb_tensor *reductions(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *x = in[0]; /* [37, 129] */
    nb_tensor *rows = nb_sum(nb_mul(nb_exp(nb_mul_scalar(x, 0.1)), x), -1, false);    /* [37] */
    nb_tensor *cols = nb_sum(nb_tanh(nb_add(x, x)), 0, true);                          /* [1, 129] */
    nb_tensor *all = nb_sum_all(nb_relu(nb_sub(x, nb_mul_scalar(x, 0.5))));           /* [] */
    return nb_add(nb_add(nb_unsqueeze(rows, 1), cols), all);
}

static void test_fuse_into_reductions(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(37, 129), NB_F32);
    pass_result off = run_small(reductions, x, NB_PASS_FUSE, false);
    pass_result on = run_small(reductions, x, 0, false), interp = run_small(reductions, x, 0, true);
    assert_int_equal(off.st.ops_after, 14);
    /* each sum takes its chain in; the two last adds fuse; the view stays */
    assert_int_equal(on.st.kernels, 4);
    assert_int_equal(on.st.fused_ops, 9);
    assert_int_equal(on.st.ops_after, 5);
    if (on.rel > 1e-6 || interp.rel > 1e-6) fail_msg("compiled %g, interpreted %g", on.rel, interp.rel);
    nb_release(x);
}

/* Row groups: a layer norm's five kernels (row sum, centring, sum of squares, scale, affine)
   run together, chunk of rows by chunk; a sum read across rows (s[j] added to row i) must not. */
static nb_tensor *norm_ctx[2];

static nb_tensor *layer_norm_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_layer_norm(in[0], norm_ctx[0], norm_ctx[1], 1e-5);
}

static nb_tensor *sum_across_rows(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_relu(nb_add(in[0], nb_sum(in[0], -1, false))); /* [64, 64] + [64]: sum i into column i */
}

static void test_row_groups(void **state) {
    (void)state;
    nb_shape shapes[3] = { NB_SHAPE(37, 129), NB_SHAPE(3, 37, 129), NB_SHAPE(1, 5) };
    for (int t = 0; t < 3; t++) {
        nb_tensor *x = nb_randn(shapes[t], NB_F32);
        int64_t c = shapes[t].dim[shapes[t].ndim - 1];
        norm_ctx[0] = nb_randn(NB_SHAPE(c), NB_F32);
        norm_ctx[1] = nb_randn(NB_SHAPE(c), NB_F32);
        pass_result off = run_small(layer_norm_fn, x, NB_PASS_FUSE, false);
        pass_result on = run_small(layer_norm_fn, x, 0, false), interp = run_small(layer_norm_fn, x, 0, true);
        assert_int_equal(off.st.row_groups, 0);
        assert_int_equal(on.st.row_groups, 1);
        assert_int_equal(interp.st.row_groups, 1);
        assert_int_equal(on.st.kernels, 5); /* the lone row sum became a kernel of the group */
        /* each row computes what it computed alone: the same bits as eager */
        if (on.rel != 0 || interp.rel != 0) fail_msg("shape %d: compiled %g, interpreted %g", t, on.rel, interp.rel);
        assert_true(off.rel == 0);
        nb_release(x);
        nb_release(norm_ctx[0]);
        nb_release(norm_ctx[1]);
    }
    nb_tensor *sq = nb_randn(NB_SHAPE(64, 64), NB_F32);
    pass_result across = run_small(sum_across_rows, sq, 0, false);
    assert_int_equal(across.st.row_groups, 0);
    assert_true(across.rel <= 1e-6);
    nb_release(sq);
    /* the dump says which kernels run as a group */
    norm_ctx[0] = nb_randn(NB_SHAPE(16), NB_F32);
    norm_ctx[1] = nb_randn(NB_SHAPE(16), NB_F32);
    nb_tensor *x = nb_randn(NB_SHAPE(8, 16), NB_F32);
    char *text = dump_after_one_run(layer_norm_fn, x);
    assert_non_null(strstr(text, "fused[sum]"));
    assert_non_null(strstr(text, "row group of"));
    free(text);
    nb_release(x);
    nb_release(norm_ctx[0]);
    nb_release(norm_ctx[1]);
}

/* An elementwise chain on a product that only it reads runs inside the GEMM, piece by piece. */
static nb_tensor *linear_relu_softmax(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_softmax(nb_mul_scalar(nb_relu(nb_add(nb_matmul(in[0], in[1]), in[2])), 0.5), -1);
}

static void test_gemm_epilogue(void **state) {
    (void)state;
    /* one piece, pieces along rows, along columns, and a batch of products */
    nb_shape shapes[4][3] = { { NB_SHAPE(8, 8), NB_SHAPE(8, 8), NB_SHAPE(8) },
                              { NB_SHAPE(600, 40), NB_SHAPE(40, 96), NB_SHAPE(96) },
                              { NB_SHAPE(40, 64), NB_SHAPE(64, 700), NB_SHAPE(700) },
                              { NB_SHAPE(3, 130, 64), NB_SHAPE(64, 200), NB_SHAPE(1, 200) } };
    for (int t = 0; t < 4; t++) {
        nb_tensor *in[3];
        for (int k = 0; k < 3; k++) in[k] = nb_randn(shapes[t][k], NB_F32);
        nb_compiled *c = nb_compile(linear_relu_softmax, NULL, test_opts());
        nb_scope *s = nb_scope_begin();
        assert_non_null(nb_compiled_run(c, in, 3));
        nb_tensor *r = nb_compiled_run(c, in, 3);
        if (!r) fail_msg("%s", nb_error());
        assert_true(max_rel(r, linear_relu_softmax(in, 3, NULL)) <= 1e-6);
        nb_scope_end(s);
        char *text = dump_text(c);
        assert_non_null(strstr(text, "fused[add+relu+mul_scalar]"));
        assert_non_null(strstr(text, "GEMM epilogue (inside the GEMM, per piece)"));
        free(text);
        nb_compiled_free(c);
        for (int k = 0; k < 3; k++) nb_release(in[k]);
    }
}

/* A value assigned into part of a tensor the function captures (as DDP packs a gradient into
   its bucket), and the tensor summed. The value: a product, halved; or made from the slot itself
   (its transpose made dense, its log-softmax), which its kernel must read before the slot is
   written. With a reader, the slot's old values are summed through it after the value is made
   and before the assign: the buffer itself, or another tensor over its storage that the function
   captures too. */
typedef struct {
    nb_tensor *buf, *reader;
    int value; /* 0: the product; 1: the slot's transpose; 2: its log-softmax */
} assign_case;

static nb_tensor *assign_into(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    assign_case *a = ctx;
    nb_tensor *slot = nb_view(nb_slice(a->buf, 0, 10, 74, 1), NB_SHAPE(8, 8));
    nb_tensor *v = a->value == 1 ? nb_contiguous(nb_transpose(slot, 0, 1))
                 : a->value == 2 ? nb_log_softmax(slot, 1)
                                 : nb_mul_scalar(nb_matmul(in[0], in[1]), 0.5);
    nb_tensor *before = a->reader ? nb_sum(nb_slice(a->reader, 0, 10, 74, 1), 0, false) : NULL;
    if (nb_assign(slot, v) < 0) return NULL;
    nb_tensor *total = nb_sum(a->buf, 0, false);
    return before ? nb_add(before, total) : total;
}

/* buf's values before each run: all different, so a transpose shows */
static void fill_buffer(nb_tensor *buf) {
    float *b = nb_data_ptr(buf);
    for (int i = 0; i < 100; i++) b[i] = (float)sin(0.37 * i);
}

/* An assign of a value made for it alone into a captured tensor has the value made there (the
   GEMM and its epilogue write the slot, the copy goes), unless the slot is read in between or by
   the kernel that makes the value. Each compiled run matches the eager function. */
static void test_assign_made_in_place(void **state) {
    (void)state;
    nb_scope *outer = nb_scope_begin();
    nb_tensor *in[2] = { nb_randn(NB_SHAPE(8, 8), NB_F32), nb_randn(NB_SHAPE(8, 8), NB_F32) };
    struct { int reader, value; bool placed; } cases[] = {
        { 0, 0, true }, { 1, 0, false }, { 2, 0, false }, { 0, 1, false }, { 0, 2, false },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        nb_tensor *buf = nb_empty(NB_SHAPE(100), NB_F32), *ref = nb_empty(NB_SHAPE(100), NB_F32);
        int rd = cases[k].reader;
        assign_case a = { buf, rd == 0 ? NULL : rd == 1 ? buf : nb_view(buf, NB_SHAPE(100)), cases[k].value };
        assign_case e = { ref, rd == 0 ? NULL : ref, cases[k].value };
        fill_buffer(ref);
        double want = nb_item(assign_into(in, 2, &e));
        nb_compiled *c = nb_compile(assign_into, &a, test_opts());
        for (int run = 0; run < 3; run++) { /* a trace, then replays, each from the same buffer */
            fill_buffer(buf);
            nb_scope *s = nb_scope_begin();
            nb_tensor *r = nb_compiled_run(c, in, 2);
            if (!r) fail_msg("%s", nb_error());
            if (!(fabs(nb_item(r) - want) <= 1e-4 * fmax(1, fabs(want))))
                fail_msg("case %zu, run %d: %g, eagerly %g", k, run, nb_item(r), want);
            nb_scope_end(s);
            const float *b = nb_data_ptr(buf), *w = nb_data_ptr(ref);
            for (int i = 0; i < 100; i++)
                if (fabsf(b[i] - w[i]) > 1e-5f) fail_msg("case %zu, run %d: buf[%d] = %g, eagerly %g", k, run, i, b[i], w[i]);
        }
        char *text = dump_text(c);
        bool placed = strstr(text, "made in") != NULL;
        if (placed != cases[k].placed) fail_msg("case %zu: the assign was %selided:\n%s", k, placed ? "" : "not ", text);
        if (placed) assert_non_null(strstr(text, "GEMM epilogue"));
        free(text);
        nb_compiled_free(c);
    }
    nb_scope_end(outer);
}

static nb_tensor *long_chain(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *x = in[0];
    for (int i = 0; i < 8; i++) x = nb_tanh(nb_matmul(x, in[0]));
    return x;
}

static void test_memory_planning(void **state) {
    (void)state;
    nb_scope *sx = nb_scope_begin();
    nb_tensor *x = nb_keep(nb_mul_scalar(nb_randn(NB_SHAPE(32, 32), NB_F32), 0.1));
    nb_scope_end(sx);
    pass_result unplanned = run_small(long_chain, x, NB_PASS_PLAN, false);
    pass_result planned = run_small(long_chain, x, 0, false);
    assert_int_equal(unplanned.st.arena_bytes, 0);
    /* 15 intermediate [32, 32] values live one or two at a time */
    assert_int_equal(planned.st.unplanned_bytes, 15 * 32 * 32 * 4);
    assert_true(planned.st.arena_bytes <= 2 * 32 * 32 * 4);
    assert_true(planned.rel <= 1e-6 && unplanned.rel <= 1e-6);
    nb_release(x);
}

/* A warm compiled training step makes no system allocation. */
static void test_warm_step_allocates_nothing(void **state) {
    (void)state;
    nb_manual_seed(1);
    nb_module *m = net_new();
    trainer t = { m, nb_optim_adamw(m, (nb_adamw_opts){ .lr = 1e-3 }) };
    nb_compiled *c = nb_compile(train_step, &t, test_opts());
    nb_tensor *x = nb_randn(NB_SHAPE(64, 784), NB_F32), *y = nb_zeros(NB_SHAPE(64), NB_I64);
    for (int i = 0; i < 20; i++) {
        nb_scope *s = nb_scope_begin();
        assert_non_null(nb_compiled_run(c, (nb_tensor *[]){ x, y }, 2));
        nb_scope_end(s);
    }
    uint64_t a0, a1;
    nb_memory_stats(NULL, NULL, &a0);
    for (int i = 0; i < 200; i++) {
        nb_scope *s = nb_scope_begin();
        assert_non_null(nb_compiled_run(c, (nb_tensor *[]){ x, y }, 2));
        nb_scope_end(s);
    }
    nb_memory_stats(NULL, NULL, &a1);
    assert_int_equal(a0, a1);
    /* the weights' AdamW updates run inside the GEMMs that make their gradients */
    char *text = dump_text(c);
    const char *at = strstr(text, "inside the GEMM of its gradient");
    assert_non_null(at);
    assert_non_null(strstr(at + 1, "inside the GEMM of its gradient"));
    free(text);
    nb_compiled_free(c);
    nb_optim_free(t.opt);
    nb_module_free(m);
    nb_release(x);
    nb_release(y);
}

/* ---------------------------------------------------------------- guards and the cache */

static nb_tensor *softmax_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_softmax(nb_mul_scalar(nb_add_scalar(in[0], 1), 2), -1);
}

static void check_run(nb_compiled *c, nb_tensor *x) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *r = nb_compiled_run(c, &x, 1);
    if (!r) fail_msg("%s", nb_error());
    assert_true(max_rel(r, softmax_fn(&x, 1, NULL)) <= 1e-6);
    nb_scope_end(s);
}

static void test_retrace_on_new_shape(void **state) {
    (void)state;
    nb_compiled *c = nb_compile(softmax_fn, NULL, test_opts());
    nb_tensor *a = nb_randn(NB_SHAPE(4, 10), NB_F32), *b = nb_randn(NB_SHAPE(4, 12), NB_F32);
    nb_tensor *d = nb_cast(a, NB_F64);
    check_run(c, a);
    check_run(c, a);
    check_run(c, b);
    assert_int_equal(nb_compiled_get_stats(c).traces, 2);
    check_run(c, a); /* the first variant is still there */
    check_run(c, d); /* another dtype is another variant */
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.traces, 3);
    assert_int_equal(st.variants, 3);
    assert_int_equal(st.runs, 2);
    nb_compiled_free(c);
    nb_release(a); nb_release(b); nb_release(d);
}

/* Fails when the compiled function fell back to a trace per batch size (its note says so); a
   build without the JIT has a note of its own, which is no fallback. */
static void assert_no_fallback(const nb_compiled *c) {
    const char *note = nb_compiled_note(c);
    if (note && strstr(note, "dynamic_batch")) fail_msg("fell back: %s", note);
}

static void test_dynamic_batch(void **state) {
    (void)state;
    nb_compiled *c = nb_compile(softmax_fn, NULL, (nb_graph_opts){ .dynamic_batch = true });
    nb_tensor *x[3] = { nb_randn(NB_SHAPE(64, 10), NB_F32), nb_randn(NB_SHAPE(17, 10), NB_F32),
                        nb_randn(NB_SHAPE(3, 10), NB_F32) };
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++) check_run(c, x[i]);
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.variants, 1); /* one entry serves every batch size */
    assert_int_equal(st.traces, 3);   /* the first call's, and its two probes */
    assert_int_equal(st.probe_traces, 2);
    assert_int_equal(st.instantiations, 2); /* 17 and 3 came from the fit, without a trace */
    assert_int_equal(st.kernels_built, 0); /* the kernels were compiled once, for the first size */
    assert_int_equal(st.runs, 3);
    assert_no_fallback(c);
    /* another feature size is not a batch size */
    nb_tensor *w = nb_randn(NB_SHAPE(64, 11), NB_F32);
    check_run(c, w);
    assert_int_equal(nb_compiled_get_stats(c).variants, 2);
    assert_int_equal(nb_compiled_get_stats(c).traces, 6); /* a new variant: traced and probed */
    nb_compiled_free(c);
    for (int i = 0; i < 3; i++) nb_release(x[i]);
    nb_release(w);
}

/* ---------------------------------------------------------------- dynamic batch without retracing */

/* An MSE step on nb_mean (1/N of the batch baked in by C) with plain SGD. */
static nb_tensor *mse_sgd_step(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    trainer *t = ctx;
    nb_tensor *d = nb_sub(nb_forward(t->model, in[0]), in[1]);
    nb_tensor *loss = nb_mean(nb_mean(nb_mul(d, d), 1, false), 0, false);
    nb_optim_zero_grad(t->opt);
    if (nb_backward(loss) < 0 || nb_optim_step(t->opt) < 0) return NULL;
    return loss;
}

/* A batch of b for the MLP: x [b, 784], y labels [b] (or [b, 10] floats for the MSE step). */
static void mlp_batch(int64_t b, nb_tensor **x, nb_tensor **y) {
    *x = nb_randn(NB_SHAPE(b, 784), NB_F32);
    *y = random_labels(NB_SHAPE(b), 10);
}
static void mse_batch(int64_t b, nb_tensor **x, nb_tensor **y) {
    *x = nb_randn(NB_SHAPE(b, 784), NB_F32);
    *y = nb_randn(NB_SHAPE(b, 10), NB_F32);
}
static void cnn_batch(int64_t b, nb_tensor **x, nb_tensor **y) {
    *x = nb_randn(NB_SHAPE(b, 1, 28, 28), NB_F32);
    *y = random_labels(NB_SHAPE(b), 10);
}
static void gpt_batch(int64_t b, nb_tensor **x, nb_tensor **y) {
    *x = random_labels(NB_SHAPE(b, CONTEXT), 65);
    *y = random_labels(NB_SHAPE(b, CONTEXT), 65);
}

/* Trains an eager and a compiled (dynamic_batch) copy of a model with `step` over the batch sizes
   in bs (reseeding before each step, so dropout draws the same masks): the loss, the parameters
   and their gradients agree after every step, and no size after the first runs the function
   under the tracer. Then a batch of 1 runs, traced unless the first batch was 1, and agrees too. */
static void dynamic_training(nb_module *(*make)(void), nb_graph_fn step, bool adam,
                             void (*batch)(int64_t, nb_tensor **, nb_tensor **), const int64_t *bs, int nb) {
    nb_manual_seed(3);
    nb_module *ma = make();
    nb_manual_seed(3);
    nb_module *mb = make();
    trainer ta = { ma, adam ? nb_optim_adamw(ma, (nb_adamw_opts){ .lr = 1e-3 }) : nb_optim_sgd(ma, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9 }) };
    trainer tb = { mb, adam ? nb_optim_adamw(mb, (nb_adamw_opts){ .lr = 1e-3 }) : nb_optim_sgd(mb, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9 }) };
    nb_compiled *c = nb_compile(step, &tb, (nb_graph_opts){ .dynamic_batch = true });
    assert_non_null(c);
    for (int i = 0; i <= nb; i++) {
        int64_t b = i < nb ? bs[i] : 1;
        nb_tensor *x, *y;
        nb_manual_seed(50 + (uint64_t)i);
        batch(b, &x, &y);
        nb_scope *s = nb_scope_begin();
        nb_manual_seed(100 + (uint64_t)i);
        nb_tensor *le = step((nb_tensor *[]){ x, y }, 2, &ta);
        nb_manual_seed(100 + (uint64_t)i);
        nb_tensor *lc = nb_compiled_run(c, (nb_tensor *[]){ x, y }, 2);
        if (!lc) fail_msg("compiled step %d (batch %lld): %s", i, (long long)b, nb_error());
        assert_non_null(le);
        double rel = fabs(nb_item(le) - nb_item(lc)) / fabs(nb_item(le));
        if (!(rel <= 1e-5)) fail_msg("step %d (batch %lld): loss %g eager, %g compiled", i, (long long)b, nb_item(le), nb_item(lc));
        nb_scope_end(s);
        double prel = params_rel(ma, mb);
        if (!(prel <= 1e-5)) fail_msg("step %d (batch %lld): parameters differ by %g", i, (long long)b, prel);
        nb_named_tensor pa[64], pb[64];
        int np = nb_module_named_parameters(ma, pa, 64);
        nb_module_named_parameters(mb, pb, 64);
        for (int k = 0; k < np; k++) assert_true(max_rel(nb_grad_of(pa[k].tensor), nb_grad_of(pb[k].tensor)) <= 1e-4);
        nb_compiled_stats st = nb_compiled_get_stats(c);
        /* the first call traces and probes twice (three times after a first batch of 1, whose
           graph serves 1 alone); a batch of 1, where C code may take paths of its own (a
           broadcast, a squeeze), is traced unless the first call's was 1 */
        int want = bs[0] == 1 ? 4 : i < nb ? 3 : 4;
        if (st.traces != want)
            fail_msg("step %d (batch %lld): %d traces; note: %s", i, (long long)b, st.traces,
                     nb_compiled_note(c) ? nb_compiled_note(c) : "(none)");
        nb_release(x);
        nb_release(y);
    }
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.probe_traces, bs[0] == 1 ? 3 : 2);
    assert_int_equal(st.variants, 1);
    assert_no_fallback(c);
    /* every size but the first and its repeats was made from the fit */
    int fresh = 0;
    for (int i = 1; i < nb; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen = seen || bs[j] == bs[i];
        fresh += !seen;
    }
    assert_int_equal(st.instantiations, fresh);
    assert_int_equal(st.runs, nb - 1 - fresh + (bs[0] == 1));
    nb_compiled_free(c);
    nb_optim_free(ta.opt);
    nb_optim_free(tb.opt);
    nb_module_free(ma);
    nb_module_free(mb);
}

static void test_dynamic_batch_training(void **state) {
    (void)state;
    const int64_t bs[] = { 8, 5, 13, 8, 5, 64, 2 };
    dynamic_training(mlp_model, train_step, true, mlp_batch, bs, 7);     /* cross entropy, AdamW */
    dynamic_training(mlp_model, mse_sgd_step, false, mse_batch, bs, 7);  /* nb_mean, SGD with momentum */
    dynamic_training(cnn_model, train_step, true, cnn_batch, (const int64_t[]){ 4, 3, 6, 4 }, 4); /* dropout */
    /* [B, T] through embeddings, attention and a cross entropy over B*T, clipped */
    dynamic_training(gpt_model, gpt_train_step, true, gpt_batch, (const int64_t[]){ 2, 3, 5, 2 }, 4);
    /* from a batch of 1, whose bias gradients C code reduces differently */
    dynamic_training(mlp_model, train_step, false, mlp_batch, (const int64_t[]){ 1, 4, 9, 4, 2 }, 5);
}

/* A [B, T, C] input through a reshape over B*T, a product, a reshape back, a softmax and a mean
   over every element, with a constant of the batch's shape (nb_full) folded in. */
static nb_tensor *reshape_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor *x = in[0], *w = ctx;
    int64_t b = nb_dim(x, 0), t = nb_dim(x, 1), ch = nb_dim(x, 2);
    nb_tensor *h = nb_matmul(nb_reshape(x, NB_SHAPE(b * t, ch)), w);
    h = nb_reshape(h, NB_SHAPE(b, t, nb_dim(w, 1)));
    h = nb_add(nb_softmax(h, -1), nb_full(NB_SHAPE(b, t, 1), 0.25, NB_F32));
    return nb_add(nb_mean_all(h), nb_sum(nb_mean(h, 1, false), 0, false));
}

static void test_dynamic_batch_reshape(void **state) {
    (void)state;
    nb_tensor *w = nb_randn(NB_SHAPE(6, 5), NB_F32);
    nb_compiled *c = nb_compile(reshape_fn, w, (nb_graph_opts){ .dynamic_batch = true });
    const int64_t bs[] = { 1, 4, 7, 1, 2, 4 }; /* the first call at batch 1 */
    for (int i = 0; i < 6; i++) {
        nb_tensor *x = nb_randn(NB_SHAPE(bs[i], 3, 6), NB_F32);
        nb_scope *s = nb_scope_begin();
        nb_tensor *r = nb_compiled_run(c, &x, 1);
        if (!r) fail_msg("%s", nb_error());
        double rel = max_rel(r, reshape_fn(&x, 1, w));
        if (!(rel <= 1e-5)) fail_msg("batch %lld: compiled differs from eager by %g", (long long)bs[i], rel);
        nb_scope_end(s);
        nb_release(x);
    }
    nb_compiled_stats st = nb_compiled_get_stats(c);
    /* batch 1 traced, then probed at 2, 3 and 4 */
    if (st.traces != 4) fail_msg("%d traces; note: %s", st.traces, nb_compiled_note(c) ? nb_compiled_note(c) : "(none)");
    char *text = dump_text(c); /* the last graph came from the fit, and says so */
    assert_non_null(strstr(text, "graph (made from the batch fit for batch 4, not traced)"));
    free(text);
    assert_int_equal(st.instantiations, 3); /* 4, 7 and 2 (1 came back from the cache) */
    assert_true(st.folded > 0);             /* the batch-shaped constant was folded at every size */
    nb_compiled_free(c);
    nb_release(w);
}

/* Branches on the batch size: 1 is added only when it is even. */
static nb_tensor *parity_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *y = nb_mul_scalar(in[0], 2);
    if (nb_dim(in[0], 0) % 2 == 0) y = nb_add_scalar(y, 1);
    return nb_mean(y, 0, false);
}

/* A scalar that is no power of the batch size: the unbiased variance's n / (n - 1). */
static nb_tensor *unbiased_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    double b = (double)nb_dim(in[0], 0);
    nb_tensor *d = nb_sub(in[0], nb_mean(in[0], 0, true));
    return nb_mul_scalar(nb_mean(nb_mul(d, d), 0, false), b / (b - 1));
}

/* Adds a vector made on the host at every call: a new captured tensor at each trace. */
static nb_tensor *host_vector_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    const float v[4] = { 1, 2, 3, 4 };
    return nb_add(in[0], nb_from_data(v, NB_SHAPE(4), NB_F32));
}

/* The first half of the rows: a size floor(B / 2), which no a*B + c gives at every batch size. */
static nb_tensor *half_rows_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_mul_scalar(nb_slice(in[0], 0, 0, nb_dim(in[0], 0) / 2, 1), 2);
}

/* Functions whose graph the fit cannot describe fall back to a trace per new size, with the
   reason in the note, and stay right. */
static void check_fallback(nb_graph_fn fn, const int64_t *bs, int nb, int traces, const char *why) {
    nb_compiled *c = nb_compile(fn, NULL, (nb_graph_opts){ .dynamic_batch = true });
    for (int i = 0; i < nb; i++) {
        nb_tensor *x = nb_randn(NB_SHAPE(bs[i], 4), NB_F32);
        nb_scope *s = nb_scope_begin();
        nb_tensor *r = nb_compiled_run(c, &x, 1);
        if (!r) fail_msg("%s", nb_error());
        double rel = max_rel(r, fn(&x, 1, NULL));
        if (!(rel <= 1e-5)) fail_msg("batch %lld: compiled differs from eager by %g", (long long)bs[i], rel);
        nb_scope_end(s);
        nb_release(x);
    }
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.instantiations, 0);
    assert_int_equal(st.traces, traces);
    const char *note = nb_compiled_note(c);
    assert_non_null(note);
    if (!strstr(note, "dynamic_batch") || !strstr(note, why)) fail_msg("note: %s", note);
    assert_null(nb_error());
    nb_compiled_free(c);
}

static void test_dynamic_batch_falls_back(void **state) {
    (void)state;
    /* 8 and 9 differ in their ops; 5, 6 and 9 are traced (8 comes back from the cache) */
    check_fallback(parity_fn, (const int64_t[]){ 8, 5, 6, 8, 9 }, 5, 6, "ops");
    check_fallback(parity_fn, (const int64_t[]){ 1, 2, 3, 4 }, 4, 7, "ops"); /* from batch 1: 3 probes */
    check_fallback(unbiased_fn, (const int64_t[]){ 6, 3, 10, 6 }, 4, 5, "no c*B^k");
    check_fallback(host_vector_fn, (const int64_t[]){ 3, 5 }, 2, 4, "another captured tensor");
    /* sizes not linear in the batch: B / 2 rows */
    for (int64_t b0 = 2; b0 <= 9; b0++) { /* whichever sizes the probes take, the fit cannot hold */
        nb_compiled *c = nb_compile(half_rows_fn, NULL, (nb_graph_opts){ .dynamic_batch = true });
        const int64_t sizes[] = { b0, 7, 12, 3, 16, 5 };
        for (int i = 0; i < 6; i++) {
            nb_tensor *x = nb_randn(NB_SHAPE(sizes[i], 3), NB_F32);
            nb_scope *s = nb_scope_begin();
            nb_tensor *r = nb_compiled_run(c, &x, 1), *want = half_rows_fn(&x, 1, NULL);
            if (!r) fail_msg("batch %lld after %lld: %s", (long long)sizes[i], (long long)b0, nb_error());
            char a[64], b[64];
            if (strcmp(nb_shape_str(nb_shape_of(r), a, sizeof a), nb_shape_str(nb_shape_of(want), b, sizeof b)))
                fail_msg("batch %lld after %lld: compiled gives %s, eager %s", (long long)sizes[i], (long long)b0, a, b);
            if (!(max_rel(r, want) <= 1e-6)) fail_msg("batch %lld after %lld: compiled differs from eager", (long long)sizes[i], (long long)b0);
            nb_scope_end(s);
            nb_release(x);
        }
        /* every size traced (the first's two probes besides), none instantiated from a fit */
        nb_compiled_stats st = nb_compiled_get_stats(c);
        assert_int_equal(st.instantiations, 0);
        /* 3, 5, 7: one later size was traced already (a probe of 3 or 5, or 7 itself) */
        assert_int_equal(st.traces, 6 + 2 - (b0 == 3 || b0 == 5 || b0 == 7));
        const char *note = nb_compiled_note(c);
        if (!note || !strstr(note, "made by nb_slice") || !strstr(note, "no whole-number a*B + c"))
            fail_msg("batch %lld: note %s", (long long)b0, note ? note : "(none)");
        assert_null(nb_error());
        nb_compiled_free(c);
    }
}

/* Reaches a second parameter only at batch sizes of 2 mod 3; both gradients are dropped first. */
static nb_tensor *even_param_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor **p = ctx;
    nb_zero_grad(p[0]);
    nb_zero_grad(p[1]);
    nb_tensor *y = nb_mul(in[0], p[0]);
    if (nb_dim(in[0], 0) % 3 == 2) y = nb_add(y, p[1]);
    nb_tensor *loss = nb_mean_all(nb_mul(y, y));
    return nb_backward(loss) < 0 ? NULL : loss;
}

/* The last probe (11, after 9 and 10) hands the second parameter a gradient that no kernel
   computed; the first call, at 9, must leave it without one, as eager does. */
/* a slice clamped to 4 rows is constant over the traced sizes 8, 9 and 10; at batch 2 its fitted
   view would run past the input: that size is traced, and gives eager's [2, 3] */
static nb_tensor *first_four_rows(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    (void)ctx;
    return nb_mul_scalar(nb_slice(in[0], 0, 0, 4, 1), 1);
}

static void test_dynamic_batch_view_past_its_input(void **state) {
    (void)state;
    nb_compiled *c = nb_compile(first_four_rows, NULL, (nb_graph_opts){ .dynamic_batch = true });
    nb_scope *s = nb_scope_begin();
    int sizes[] = { 8, 2, 20 };
    for (int i = 0; i < 3; i++) {
        nb_tensor *x = nb_randn(NB_SHAPE(sizes[i], 3), NB_F32);
        nb_tensor *r = nb_compiled_run(c, &x, 1), *want = first_four_rows(&x, 1, NULL);
        assert_non_null(r);
        char a[64], b[64];
        assert_string_equal(nb_shape_str(nb_shape_of(r), a, sizeof a), nb_shape_str(nb_shape_of(want), b, sizeof b));
        assert_true(max_rel(r, want) < 1e-6);
    }
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.traces, 4);         /* 8 and its two probes, then 2 */
    assert_int_equal(st.instantiations, 1); /* 20 */
    nb_scope_end(s);
    nb_compiled_free(c);
}

static void test_dynamic_batch_probe_leaves_no_gradient(void **state) {
    (void)state;
    nb_tensor *pa[2] = { nb_randn(NB_SHAPE(4), NB_F32), nb_randn(NB_SHAPE(4), NB_F32) };
    nb_tensor *pb[2];
    for (int i = 0; i < 2; i++) {
        nb_scope *s = nb_scope_begin();
        pb[i] = nb_set_requires_grad(nb_keep(nb_clone(pa[i])), true);
        nb_scope_end(s);
        nb_set_requires_grad(pa[i], true);
    }
    nb_compiled *c = nb_compile(even_param_fn, pb, (nb_graph_opts){ .dynamic_batch = true });
    const int64_t bs[] = { 9, 11, 7 };
    for (int i = 0; i < 3; i++) {
        nb_tensor *x = nb_randn(NB_SHAPE(bs[i], 4), NB_F32);
        nb_scope *s = nb_scope_begin();
        nb_tensor *le = even_param_fn(&x, 1, pa), *lc = nb_compiled_run(c, &x, 1);
        if (!lc) fail_msg("%s", nb_error());
        assert_true(fabs(nb_item(le) - nb_item(lc)) <= 1e-5 * fabs(nb_item(le)));
        nb_scope_end(s);
        for (int k = 0; k < 2; k++) {
            if (!nb_grad_of(pa[k])) {
                if (nb_grad_of(pb[k])) fail_msg("batch %lld: parameter %d has a gradient eager does not give it", (long long)bs[i], k);
                continue;
            }
            assert_true(max_rel(nb_grad_of(pb[k]), nb_grad_of(pa[k])) <= 1e-5);
        }
        nb_release(x);
    }
    assert_non_null(nb_compiled_note(c)); /* 9 and 11 differ: a trace per size */
    nb_compiled_free(c);
    for (int i = 0; i < 2; i++) {
        nb_release(pa[i]);
        nb_release(pb[i]);
    }
}

/* Only inputs whose dimension 0 is the first input's batch are batched; another keeps its size. */
static nb_tensor *two_inputs_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_mean_all(nb_relu(nb_matmul(in[0], in[1])));
}

static void test_dynamic_batch_fixed_input(void **state) {
    (void)state;
    nb_compiled *c = nb_compile(two_inputs_fn, NULL, (nb_graph_opts){ .dynamic_batch = true });
    nb_tensor *w = nb_randn(NB_SHAPE(5, 3), NB_F32), *w2 = nb_randn(NB_SHAPE(6, 3), NB_F32);
    struct { int64_t b; nb_tensor *w; } calls[] = { { 4, w }, { 9, w }, { 3, w2 }, { 2, w }, { 6, w2 } };
    for (int i = 0; i < 5; i++) {
        nb_tensor *x = nb_randn(NB_SHAPE(calls[i].b, nb_dim(calls[i].w, 0)), NB_F32);
        nb_tensor *in[2] = { x, calls[i].w };
        nb_scope *s = nb_scope_begin();
        nb_tensor *r = nb_compiled_run(c, in, 2);
        if (!r) fail_msg("%s", nb_error());
        assert_true(max_rel(r, two_inputs_fn(in, 2, NULL)) <= 1e-5);
        nb_scope_end(s);
        nb_release(x);
    }
    nb_compiled_stats st = nb_compiled_get_stats(c);
    /* x [3, 6] is another feature size: a new variant, traced and probed; in its last call the
       second input's 6 rows equal the batch, and stay fixed all the same */
    assert_int_equal(st.instantiations, 3);
    assert_int_equal(st.traces, 6);
    assert_no_fallback(c);
    nb_compiled_free(c);
    nb_release(w);
    nb_release(w2);
}

static void test_cache_bound(void **state) {
    (void)state;
    nb_compiled *c = nb_compile(softmax_fn, NULL, (nb_graph_opts){ .cache_size = 2 });
    nb_tensor *x[3] = { nb_randn(NB_SHAPE(2, 3), NB_F32), nb_randn(NB_SHAPE(2, 4), NB_F32), nb_randn(NB_SHAPE(2, 5), NB_F32) };
    check_run(c, x[0]);
    check_run(c, x[1]);
    check_run(c, x[0]); /* x[1] is now the least recently used */
    check_run(c, x[2]);
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.variants, 2);
    assert_int_equal(st.evictions, 1);
    check_run(c, x[0]); /* kept */
    assert_int_equal(nb_compiled_get_stats(c).traces, 3);
    check_run(c, x[1]); /* dropped: traced again */
    assert_int_equal(nb_compiled_get_stats(c).traces, 4);
    nb_compiled_free(c);
    for (int i = 0; i < 3; i++) nb_release(x[i]);
}

/* ---------------------------------------------------------------- bad input and fallbacks */

static nb_tensor *returns_null(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_matmul(in[0], in[0]); /* [2, 3] @ [2, 3] fails */
}

static nb_tensor *reads_values(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    double m = nb_item(nb_sum_all(in[0]));
    return m > 0 ? nb_relu(in[0]) : nb_neg(in[0]);
}

static void test_bad_functions(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3), NB_F32);
    nb_compiled *c = nb_compile(returns_null, NULL, test_opts());
    assert_null(nb_compiled_run(c, &x, 1));
    ASSERT_ERROR_CONTAINS("the traced function returned NULL: nb_matmul");
    nb_error_clear();
    nb_compiled_free(c);

    c = nb_compile(reads_values, NULL, test_opts());
    assert_null(nb_compiled_run(c, &x, 1));
    ASSERT_ERROR_CONTAINS("read tensor values on the host");
    nb_error_clear();
    nb_compiled_free(c);

    assert_null(nb_compile(NULL, NULL, test_opts()));
    ASSERT_ERROR_CONTAINS("nb_compile: the function is NULL");
    nb_error_clear();
    assert_null(nb_compiled_run(NULL, &x, 1));
    nb_error_clear();
    c = nb_compile(softmax_fn, NULL, test_opts());
    assert_null(nb_compiled_run(c, (nb_tensor *[]){ NULL }, 1));
    ASSERT_ERROR_CONTAINS("input 0 is NULL");
    nb_error_clear();
    assert_int_equal(nb_compiled_dump(c, stdout), 0); /* before any trace: says so */
    nb_compiled_free(c);
    nb_release(x);
}

static void test_compiler_failure_falls_back(void **state) {
    (void)state;
#ifndef NABLA_WITH_JIT
    skip(); /* no compiler is ever run: test_build_config checks the build's note */
#endif
    nb_tensor *x = nb_randn(NB_SHAPE(37, 129), NB_F32);
    nb_compiled *c = nb_compile(chain, NULL, (nb_graph_opts){ .cc = "/nonexistent/cc", .cache_dir = "/tmp/nabla-test-nocc" });
    nb_scope *s = nb_scope_begin();
    assert_non_null(nb_compiled_run(c, &x, 1));
    nb_tensor *r = nb_compiled_run(c, &x, 1);
    assert_non_null(r);
    assert_true(max_rel(r, chain(&x, 1, NULL)) <= 1e-6);
    nb_scope_end(s);
    nb_compiled_stats st = nb_compiled_get_stats(c);
    assert_int_equal(st.kernels, 1);
    assert_int_equal(st.kernels_native, 0);
    assert_non_null(nb_compiled_note(c));
    assert_non_null(strstr(nb_compiled_note(c), "C compiler failed"));
    assert_null(nb_error());
    nb_compiled_free(c);
    nb_release(x);
}

static void test_dump(void **state) {
    (void)state;
    nb_tensor *x = nb_randn(NB_SHAPE(4, 8), NB_F32);
    char *text = dump_after_one_run(chain, x);
    assert_non_null(strstr(text, "graph (traced): 9 ops"));
    assert_non_null(strstr(text, "%0 : f32[4, 8] = input 0"));
    assert_non_null(strstr(text, "= sigmoid(%"));
    assert_non_null(strstr(text, "graph (after passes): 1 ops"));
    assert_non_null(strstr(text, "fused[mul_scalar+add_scalar+sigmoid"));
    assert_non_null(strstr(text, "return %"));
    free(text);
    nb_release(x);
}

/* ---------------------------------------------------------------- NaN through fused relu */

/* Whether a and b hold the same f32 values, NaN where the other has NaN (bit patterns aside). */
static bool same_values(nb_tensor *a, nb_tensor *b) {
    int64_t n = nb_numel(a);
    if (n != nb_numel(b) || n > 64) return false;
    float x[64], y[64];
    nb_copy_to(a, x, sizeof(float) * (size_t)n);
    nb_copy_to(b, y, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        if (!(x[i] == y[i] || (isnan(x[i]) && isnan(y[i])))) return false;
    return true;
}

static const float NAN_INPUT[16] = { NAN, -1, 2, INFINITY, -INFINITY, -0.0f, 0.5f, 3,
                                     -2, NAN, 0, 1e-30f, -1e-30f, 7, NAN, -INFINITY };

static nb_tensor *relu_chain(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    return nb_add_scalar(nb_relu(nb_mul_scalar(in[0], 2.0)), 1.0);
}

/* loss = sum(relu(w * in0) * in1); returns dloss/dw, whose relu backward sees a NaN output */
static nb_tensor *relu_grad_step(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor *w = ctx;
    nb_tensor *loss = nb_sum_all(nb_mul(nb_relu(nb_mul(w, in[0])), in[1]));
    if (nb_backward(loss) < 0) return NULL;
    nb_tensor *gw = nb_mul_scalar(nb_grad_of(w), 1.0);
    nb_zero_grad(w);
    return gw;
}

/* relu(NaN) is NaN, as torch, in the eager kernel, the generated C and the interpreter; and its
   backward passes the gradient where the output is NaN (torch's threshold_backward). */
static void test_relu_nan_compiled(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_from_data(NAN_INPUT, NB_SHAPE(2, 8), NB_F32);
    nb_tensor *e = relu_chain(&x, 1, NULL);
    float v[16];
    nb_copy_to(e, v, sizeof v);
    assert_true(isnan(v[0]) && isnan(v[9]) && isnan(v[14]));
    assert_true(v[1] == 1 && v[2] == 5 && v[3] == INFINITY && v[4] == 1);
    for (int interp = 0; interp < 2; interp++) {
        nb_compiled *c = nb_compile(relu_chain, NULL, (nb_graph_opts){ .interpret = interp });
        assert_non_null(nb_compiled_run(c, &x, 1));
        nb_tensor *r = nb_compiled_run(c, &x, 1);
        if (!r) fail_msg("%s", nb_error());
        assert_int_equal(nb_compiled_get_stats(c).kernels, 1);
        if (!same_values(r, e)) fail_msg("compiled relu (%s) differs from eager on NaN/inf input", interp ? "interpreted" : "C");
        nb_compiled_free(c);
    }
    nb_tensor *w = nb_set_requires_grad(nb_from_data(NAN_INPUT, NB_SHAPE(2, 8), NB_F32), true);
    nb_tensor *two = nb_full(NB_SHAPE(2, 8), 2.0, NB_F32), *g = nb_randn(NB_SHAPE(2, 8), NB_F32);
    nb_tensor *in[2] = { two, g };
    nb_tensor *ge = relu_grad_step(in, 2, w);
    assert_non_null(ge);
    float gv[16], gg[16];
    nb_copy_to(ge, gv, sizeof gv);
    nb_copy_to(g, gg, sizeof gg);
    assert_true(gv[0] == 2 * gg[0] && gv[9] == 2 * gg[9]); /* NaN output: the gradient passes */
    assert_true(gv[1] == 0 && gv[5] == 0 && gv[2] == 2 * gg[2]);
    for (int interp = 0; interp < 2; interp++) {
        nb_compiled *c = nb_compile(relu_grad_step, w, (nb_graph_opts){ .interpret = interp });
        assert_non_null(nb_compiled_run(c, in, 2));
        nb_tensor *r = nb_compiled_run(c, in, 2);
        if (!r) fail_msg("%s", nb_error());
        if (!same_values(r, ge)) fail_msg("compiled relu backward (%s) differs from eager", interp ? "interpreted" : "C");
        nb_compiled_free(c);
    }
    assert_null(nb_error());
    nb_scope_end(s);
}

/* ---------------------------------------------------------------- CSE and random ops */

static nb_tensor *rand_minus_rand(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_shape s = nb_shape_of(in[0]);
    return nb_add(nb_mul_scalar(in[0], 0.0), nb_sub(nb_rand(s, NB_F32), nb_rand(s, NB_F32)));
}

/* two dropouts on same-shaped activations, in training mode */
static nb_tensor *two_dropouts(nb_tensor *const *in, int n, void *ctx) {
    (void)n; (void)ctx;
    nb_tensor *h = nb_tanh(in[0]);
    return nb_sub(nb_dropout(h, 0.5, true), nb_dropout(h, 0.5, true));
}

/* CSE never merges random draws: each run of the compiled graph equals eager under the same
   seed, with and without fusion, and two draws of one shape differ. */
static void check_random_graph(nb_graph_fn fn, unsigned disable) {
    nb_manual_seed(7);
    nb_tensor *x = nb_randn(NB_SHAPE(16, 24), NB_F32);
    nb_compiled *c = nb_compile(fn, NULL, (nb_graph_opts){ .disable = disable });
    for (int run = 0; run < 3; run++) { /* the trace, then replays */
        nb_scope *s = nb_scope_begin();
        nb_manual_seed(100 + (uint64_t)run);
        nb_tensor *e = fn(&x, 1, NULL);
        nb_manual_seed(100 + (uint64_t)run);
        nb_tensor *r = nb_compiled_run(c, &x, 1);
        if (!r) fail_msg("%s", nb_error());
        if (max_rel(r, e) != 0) fail_msg("run %d: compiled differs from eager under the same seed", run);
        double m = nb_item(nb_max(nb_abs(nb_reshape(r, NB_SHAPE(-1))), 0, false));
        if (!(m > 0.1)) fail_msg("run %d: two random draws of one shape were merged (max |difference| %g)", run, m);
        nb_scope_end(s);
    }
    nb_compiled_free(c);
    nb_release(x);
}

static void test_cse_keeps_random_ops(void **state) {
    (void)state;
    check_random_graph(rand_minus_rand, 0);
    check_random_graph(rand_minus_rand, NB_PASS_FUSE);
    check_random_graph(two_dropouts, 0);
    check_random_graph(two_dropouts, NB_PASS_FUSE);
    assert_null(nb_error());
}

static nb_tensor *times_host_data(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    float *host = ctx;
    return nb_mul(in[0], nb_from_data(host, NB_SHAPE(3), NB_F32));
}

/* A tensor made from host data inside the traced function is a constant of the graph, with the
   values it had at trace time (as torch.compile bakes a torch.tensor([...]) in): never the
   uninitialised buffer of an `empty` op. */
static void test_host_data_is_captured(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    float host[3] = { 1, 2, 3 }, x[3] = { 0.5f, -1, 4 }, got[3];
    nb_compiled *c = nb_compile(times_host_data, host, (nb_graph_opts){ 0 });
    nb_tensor *in = nb_from_data(x, NB_SHAPE(3), NB_F32);
    for (int run = 0; run < 3; run++) {
        nb_tensor *y = nb_compiled_run(c, &in, 1);
        assert_non_null(y);
        assert_int_equal(nb_copy_to(y, got, sizeof got), 0);
        for (int i = 0; i < 3; i++) assert_true(got[i] == x[i] * (float)(i + 1));
        host[0] = 100; /* later changes to the host buffer do not reach the traced constant */
    }
    assert_int_equal(nb_compiled_get_stats(c).traces, 1);
    nb_compiled_free(c);
    nb_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_host_data_is_captured, clear_error_setup),
        cmocka_unit_test_setup(test_mlp_training_matches_eager, clear_error_setup),
        cmocka_unit_test_setup(test_assign_made_in_place, clear_error_setup),
        cmocka_unit_test_setup(test_mlp_training_with_schedule, clear_error_setup),
        cmocka_unit_test_setup(test_cnn_training_matches_eager, clear_error_setup),
        cmocka_unit_test_setup(test_gpt_training_matches_eager, clear_error_setup),
        cmocka_unit_test_setup(test_raw_sgd_matches_eager, clear_error_setup),
        cmocka_unit_test_setup(test_example_forwards, clear_error_setup),
        cmocka_unit_test_setup(test_pass_dce, clear_error_setup),
        cmocka_unit_test_setup(test_pass_cse, clear_error_setup),
        cmocka_unit_test_setup(test_pass_fold, clear_error_setup),
        cmocka_unit_test_setup(test_pass_fuse, clear_error_setup),
        cmocka_unit_test_setup(test_fuse_broadcast_and_strides, clear_error_setup),
        cmocka_unit_test_setup(test_index_and_int8, clear_error_setup),
        cmocka_unit_test_setup(test_fuse_into_reductions, clear_error_setup),
        cmocka_unit_test_setup(test_row_groups, clear_error_setup),
        cmocka_unit_test_setup(test_gemm_epilogue, clear_error_setup),
        cmocka_unit_test_setup(test_memory_planning, clear_error_setup),
        cmocka_unit_test_setup(test_warm_step_allocates_nothing, clear_error_setup),
        cmocka_unit_test_setup(test_retrace_on_new_shape, clear_error_setup),
        cmocka_unit_test_setup(test_dynamic_batch, clear_error_setup),
        cmocka_unit_test_setup(test_dynamic_batch_training, clear_error_setup),
        cmocka_unit_test_setup(test_dynamic_batch_reshape, clear_error_setup),
        cmocka_unit_test_setup(test_dynamic_batch_falls_back, clear_error_setup),
        cmocka_unit_test_setup(test_dynamic_batch_fixed_input, clear_error_setup),
        cmocka_unit_test_setup(test_dynamic_batch_probe_leaves_no_gradient, clear_error_setup),
        cmocka_unit_test_setup(test_dynamic_batch_view_past_its_input, clear_error_setup),
        cmocka_unit_test_setup(test_cache_bound, clear_error_setup),
        cmocka_unit_test_setup(test_bad_functions, clear_error_setup),
        cmocka_unit_test_setup(test_compiler_failure_falls_back, clear_error_setup),
        cmocka_unit_test_setup(test_dump, clear_error_setup),
        cmocka_unit_test_setup(test_relu_nan_compiled, clear_error_setup),
        cmocka_unit_test_setup(test_cse_keeps_random_ops, clear_error_setup),
    };
    return RUN_TESTS(tests);
}
