/* Every differentiable op's backward against central finite differences in f64, on inputs
   that include broadcasting and non-contiguous views. */
#include <nabla.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

typedef nb_tensor *(*op_fn)(nb_tensor **in);

enum { ANY, POSITIVE, AWAY_FROM_ZERO, DISTINCT };

typedef struct {
    const char *name;
    op_fn fn;
    int nin;
    nb_shape shapes[3];
    int kind[3];
    bool transpose[3]; /* hand the op a transposed view of a leaf stored the other way round */
    double coarse;     /* step and tolerance for ops that pass through f32 (0: exact f64 check) */
} grad_case;

static nb_tensor *f_add(nb_tensor **x) { return nb_add(x[0], x[1]); }
static nb_tensor *f_sub(nb_tensor **x) { return nb_sub(x[0], x[1]); }
static nb_tensor *f_mul(nb_tensor **x) { return nb_mul(x[0], x[1]); }
static nb_tensor *f_div(nb_tensor **x) { return nb_div(x[0], x[1]); }
static nb_tensor *f_pow(nb_tensor **x) { return nb_pow(x[0], x[1]); }
static nb_tensor *f_maximum(nb_tensor **x) { return nb_maximum(x[0], x[1]); }
static nb_tensor *f_minimum(nb_tensor **x) { return nb_minimum(x[0], x[1]); }
static nb_tensor *f_where(nb_tensor **x) { return nb_where(nb_gt(x[0], nb_scalar(0)), x[1], x[2]); }
static nb_tensor *f_add_scalar(nb_tensor **x) { return nb_add_scalar(x[0], 2.5); }
static nb_tensor *f_mul_scalar(nb_tensor **x) { return nb_mul_scalar(x[0], -1.5); }
static nb_tensor *f_pow_scalar(nb_tensor **x) { return nb_pow_scalar(x[0], 2.5); }
static nb_tensor *f_neg(nb_tensor **x) { return nb_neg(x[0]); }
static nb_tensor *f_exp(nb_tensor **x) { return nb_exp(x[0]); }
static nb_tensor *f_log(nb_tensor **x) { return nb_log(x[0]); }
static nb_tensor *f_sqrt(nb_tensor **x) { return nb_sqrt(x[0]); }
static nb_tensor *f_abs(nb_tensor **x) { return nb_abs(x[0]); }
static nb_tensor *f_tanh(nb_tensor **x) { return nb_tanh(x[0]); }
static nb_tensor *f_sigmoid(nb_tensor **x) { return nb_sigmoid(x[0]); }
static nb_tensor *f_relu(nb_tensor **x) { return nb_relu(x[0]); }
static nb_tensor *f_gelu(nb_tensor **x) { return nb_gelu(x[0]); }
static nb_tensor *f_erf(nb_tensor **x) { return nb_erf(x[0]); }
static nb_tensor *f_clamp(nb_tensor **x) { return nb_clamp(x[0], -0.5, 0.5); }
static nb_tensor *f_matmul(nb_tensor **x) { return nb_matmul(x[0], x[1]); }
static nb_tensor *f_sum(nb_tensor **x) { return nb_sum(x[0], 1, false); }
static nb_tensor *f_sum_keep(nb_tensor **x) { return nb_sum(x[0], -1, true); }
static nb_tensor *f_mean(nb_tensor **x) { return nb_mean(x[0], 0, false); }
static nb_tensor *f_max(nb_tensor **x) { return nb_max(x[0], 1, false); }
static nb_tensor *f_min(nb_tensor **x) { return nb_min(x[0], 0, true); }
static nb_tensor *f_logsumexp(nb_tensor **x) { return nb_logsumexp(x[0], 1, false); }
static nb_tensor *f_var(nb_tensor **x) { return nb_var(x[0], 1, true); }
static nb_tensor *f_sum_all(nb_tensor **x) { return nb_sum_all(x[0]); }
static nb_tensor *f_mean_all(nb_tensor **x) { return nb_mean_all(x[0]); }
static nb_tensor *f_softmax(nb_tensor **x) { return nb_softmax(x[0], 1); }
static nb_tensor *f_log_softmax(nb_tensor **x) { return nb_log_softmax(x[0], 0); }
static nb_tensor *f_reshape(nb_tensor **x) { return nb_reshape(x[0], NB_SHAPE(2, -1)); }
static nb_tensor *f_permute(nb_tensor **x) { return nb_permute(x[0], (int[]){ 2, 0, 1 }); }
static nb_tensor *f_expand(nb_tensor **x) { return nb_expand(x[0], NB_SHAPE(2, 3, 4)); }
static nb_tensor *f_squeeze(nb_tensor **x) { return nb_mul(nb_squeeze(x[0], 1), nb_scalar(3)); }
static nb_tensor *f_unsqueeze(nb_tensor **x) { return nb_mul(nb_unsqueeze(x[0], 0), nb_scalar(3)); }
static nb_tensor *f_flatten(nb_tensor **x) { return nb_flatten(x[0], 0, -1); }
static nb_tensor *f_slice(nb_tensor **x) { return nb_slice(x[0], 1, 1, 5, 2); }
static nb_tensor *f_cat(nb_tensor **x) { return nb_cat(x, 2, 0); }
static nb_tensor *f_stack(nb_tensor **x) { return nb_stack(x, 2, 1); }
static nb_tensor *f_index_select(nb_tensor **x) {
    int64_t idx[] = { 2, 0, 2, 1 };
    return nb_index_select(x[0], 0, nb_from_data(idx, NB_SHAPE(4), NB_I64));
}
static nb_tensor *f_gather(nb_tensor **x) {
    int64_t idx[] = { 0, 2, 1, 1, 0, 0 };
    return nb_gather(x[0], 1, nb_from_data(idx, NB_SHAPE(3, 2), NB_I64));
}
static nb_tensor *f_embedding(nb_tensor **x) {
    int64_t idx[] = { 1, 3, 1, 0, 2, 2 };
    return nb_embedding(x[0], nb_from_data(idx, NB_SHAPE(2, 3), NB_I64));
}
static nb_tensor *f_contiguous(nb_tensor **x) { return nb_mul(nb_contiguous(x[0]), x[0]); }
static nb_tensor *f_clone(nb_tensor **x) { return nb_mul(nb_clone(x[0]), nb_scalar(2)); }
static nb_tensor *f_cast(nb_tensor **x) { return nb_cast(nb_mul(nb_cast(x[0], NB_F32), nb_scalar(2)), NB_F64); }
static nb_tensor *f_linear(nb_tensor **x) { return nb_linear(x[0], x[1], x[2]); }
static nb_tensor *f_reuse(nb_tensor **x) { /* one tensor used on several paths */
    nb_tensor *y = nb_mul(x[0], x[0]);
    return nb_add(nb_mul(y, x[0]), nb_sum(y, 1, true));
}

#define S(...) NB_SHAPE(__VA_ARGS__)
static const grad_case cases[] = {
    { "add_broadcast", f_add, 2, { S(3, 4), S(4) }, { ANY, ANY }, { false, false }, 0 },
    { "add_transposed", f_add, 2, { S(3, 4), S(3, 1) }, { ANY, ANY }, { true, false }, 0 },
    { "sub_broadcast", f_sub, 2, { S(2, 1, 4), S(3, 1) }, { ANY, ANY }, { false, false }, 0 },
    { "mul_broadcast", f_mul, 2, { S(3, 4), S(3, 1) }, { ANY, ANY }, { true, false }, 0 },
    { "div", f_div, 2, { S(3, 4), S(4) }, { ANY, AWAY_FROM_ZERO }, { false, false }, 0 },
    { "pow", f_pow, 2, { S(3, 4), S(3, 4) }, { POSITIVE, ANY }, { false, true }, 0 },
    { "maximum", f_maximum, 2, { S(3, 4), S(4) }, { DISTINCT, DISTINCT }, { false, false }, 0 },
    { "minimum", f_minimum, 2, { S(3, 4), S(3, 4) }, { DISTINCT, DISTINCT }, { true, false }, 0 },
    { "where", f_where, 3, { S(3, 4), S(3, 4), S(4) }, { AWAY_FROM_ZERO, ANY, ANY }, { false, true, false }, 0 },
    { "add_scalar", f_add_scalar, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "mul_scalar", f_mul_scalar, 1, { S(3, 4) }, { ANY }, { false }, 0 },
    { "pow_scalar", f_pow_scalar, 1, { S(3, 4) }, { POSITIVE }, { true }, 0 },
    { "neg", f_neg, 1, { S(5) }, { ANY }, { false }, 0 },
    { "exp", f_exp, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "log", f_log, 1, { S(3, 4) }, { POSITIVE }, { false }, 0 },
    { "sqrt", f_sqrt, 1, { S(3, 4) }, { POSITIVE }, { true }, 0 },
    { "abs", f_abs, 1, { S(3, 4) }, { AWAY_FROM_ZERO }, { false }, 0 },
    { "tanh", f_tanh, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "sigmoid", f_sigmoid, 1, { S(3, 4) }, { ANY }, { false }, 0 },
    { "relu", f_relu, 1, { S(3, 4) }, { AWAY_FROM_ZERO }, { true }, 0 },
    { "gelu", f_gelu, 1, { S(3, 4) }, { ANY }, { false }, 0 },
    { "erf", f_erf, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "clamp", f_clamp, 1, { S(4, 5) }, { DISTINCT }, { false }, 0 },
    { "matmul_2d", f_matmul, 2, { S(3, 4), S(4, 5) }, { ANY, ANY }, { false, false }, 0 },
    { "matmul_transposed", f_matmul, 2, { S(3, 4), S(4, 5) }, { ANY, ANY }, { true, true }, 0 },
    { "matmul_batched", f_matmul, 2, { S(2, 3, 4), S(4, 2) }, { ANY, ANY }, { false, true }, 0 },
    { "matmul_broadcast_batch", f_matmul, 2, { S(2, 1, 3, 4), S(3, 4, 2) }, { ANY, ANY }, { false, false }, 0 },
    { "matmul_vec_mat", f_matmul, 2, { S(4), S(4, 3) }, { ANY, ANY }, { false, false }, 0 },
    { "matmul_mat_vec", f_matmul, 2, { S(3, 4), S(4) }, { ANY, ANY }, { true, false }, 0 },
    { "matmul_dot", f_matmul, 2, { S(4), S(4) }, { ANY, ANY }, { false, false }, 0 },
    { "sum", f_sum, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "sum_keepdim", f_sum_keep, 1, { S(2, 3, 4) }, { ANY }, { false }, 0 },
    { "mean", f_mean, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "max", f_max, 1, { S(3, 4) }, { DISTINCT }, { false }, 0 },
    { "min_keepdim", f_min, 1, { S(3, 4) }, { DISTINCT }, { true }, 0 },
    { "logsumexp", f_logsumexp, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "var", f_var, 1, { S(3, 4) }, { ANY }, { false }, 0 },
    { "sum_all", f_sum_all, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "mean_all", f_mean_all, 1, { S(2, 3, 2) }, { ANY }, { false }, 0 },
    { "softmax", f_softmax, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "log_softmax", f_log_softmax, 1, { S(3, 4) }, { ANY }, { false }, 0 },
    { "reshape_of_view", f_reshape, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "permute", f_permute, 1, { S(2, 3, 4) }, { ANY }, { false }, 0 },
    { "expand", f_expand, 1, { S(3, 1) }, { ANY }, { false }, 0 },
    { "squeeze", f_squeeze, 1, { S(3, 1, 2) }, { ANY }, { false }, 0 },
    { "unsqueeze", f_unsqueeze, 1, { S(3, 2) }, { ANY }, { true }, 0 },
    { "flatten", f_flatten, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "slice_step", f_slice, 1, { S(3, 6) }, { ANY }, { false }, 0 },
    { "cat", f_cat, 2, { S(2, 3), S(4, 3) }, { ANY, ANY }, { false, true }, 0 },
    { "stack", f_stack, 2, { S(2, 3), S(2, 3) }, { ANY, ANY }, { true, false }, 0 },
    { "index_select_repeats", f_index_select, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "gather", f_gather, 1, { S(3, 4) }, { ANY }, { false }, 0 },
    { "embedding", f_embedding, 1, { S(4, 5) }, { ANY }, { false }, 0 },
    { "contiguous", f_contiguous, 1, { S(3, 4) }, { ANY }, { true }, 0 },
    { "clone", f_clone, 1, { S(3, 4) }, { ANY }, { false }, 0 },
    { "cast_roundtrip", f_cast, 1, { S(3, 4) }, { ANY }, { false }, 1e-3 },
    { "linear", f_linear, 3, { S(5, 4), S(3, 4), S(3) }, { ANY, ANY, ANY }, { false, false, false }, 0 },
    { "reused_tensor", f_reuse, 1, { S(3, 4) }, { ANY }, { false }, 0 },
};

/* Deterministic inputs without the generator (so the check does not depend on it). */
static double value_for(int kind, int64_t i, int input) {
    double u = sin(1.7 * (double)(i + 1) + 0.9 * input) * 0.5 + 0.5; /* in [0, 1] */
    switch (kind) {
    case POSITIVE: return 0.5 + 1.5 * u;
    case AWAY_FROM_ZERO: return (u < 0.5 ? -1 : 1) * (0.3 + u);
    case DISTINCT: return -2.0 + 0.37 * (double)i + 0.11 * input + 0.05 * u;
    default: return 2.0 * u - 1.0;
    }
}

static nb_shape reversed(nb_shape s) {
    nb_shape r = s;
    for (int i = 0; i < s.ndim; i++) r.dim[i] = s.dim[s.ndim - 1 - i];
    return r;
}

/* The op's input: the leaf itself, or a transposed view of it (leaf stored reversed). */
static nb_tensor *op_input(nb_tensor *leaf, bool transpose) {
    if (!transpose || nb_ndim(leaf) < 2) return leaf;
    int perm[NB_MAX_DIMS];
    for (int i = 0; i < nb_ndim(leaf); i++) perm[i] = nb_ndim(leaf) - 1 - i;
    return nb_permute(leaf, perm);
}

static double weighted_output(const grad_case *c, nb_tensor **leaves, nb_tensor *weights) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *in[3];
    for (int k = 0; k < c->nin; k++) in[k] = op_input(leaves[k], c->transpose[k]);
    double v = nb_item(nb_sum_all(nb_mul(c->fn(in), weights)));
    nb_scope_end(s);
    return v;
}

static void check_case(const grad_case *c) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *leaves[3];
    for (int k = 0; k < c->nin; k++) {
        nb_shape shape = c->transpose[k] ? reversed(c->shapes[k]) : c->shapes[k];
        leaves[k] = nb_empty(shape, NB_F64);
        double *p = nb_data_ptr(leaves[k]);
        for (int64_t i = 0; i < nb_numel(leaves[k]); i++) p[i] = value_for(c->kind[k], i, k);
        nb_set_requires_grad(leaves[k], true);
    }
    nb_tensor *in[3];
    for (int k = 0; k < c->nin; k++) in[k] = op_input(leaves[k], c->transpose[k]);
    nb_tensor *out = c->fn(in);
    if (!out) fail_msg("%s: forward failed: %s", c->name, nb_error());
    /* weights make every output element matter differently */
    nb_tensor *w = nb_empty(nb_shape_of(out), NB_F64);
    double *pw = nb_data_ptr(w);
    for (int64_t i = 0; i < nb_numel(w); i++) pw[i] = 0.5 + 0.25 * (double)(i % 7);
    if (nb_backward(nb_sum_all(nb_mul(out, w))) < 0) fail_msg("%s: backward failed: %s", c->name, nb_error());

    bool was = nb_set_grad_enabled(false);
    const double eps = c->coarse ? c->coarse : 1e-6, tol = c->coarse ? c->coarse : 1e-5;
    for (int k = 0; k < c->nin; k++) {
        /* an input that only feeds a condition gets no gradient: its derivative must be 0 */
        nb_tensor *g = nb_grad_of(leaves[k]);
        if (!g) g = nb_zeros(nb_shape_of(leaves[k]), NB_F64);
        assert_true(nb_is_contiguous(g));
        const double *ga = nb_data_ptr(g);
        double *p = nb_data_ptr(leaves[k]);
        for (int64_t i = 0; i < nb_numel(leaves[k]); i++) {
            double orig = p[i];
            p[i] = orig + eps;
            double up = weighted_output(c, leaves, w);
            p[i] = orig - eps;
            double down = weighted_output(c, leaves, w);
            p[i] = orig;
            double numeric = (up - down) / (2 * eps);
            double err = fabs(numeric - ga[i]) / (1e-6 + fabs(numeric));
            if (err > tol && fabs(numeric - ga[i]) > 1e-7)
                fail_msg("%s: input %d element %lld: analytic %.10g, numeric %.10g", c->name, k, (long long)i, ga[i], numeric);
        }
    }
    nb_set_grad_enabled(was);
    nb_scope_end(s);
    assert_null(nb_error());
}

static void test_all_ops(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_error_clear();
        check_case(&cases[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_all_ops) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
