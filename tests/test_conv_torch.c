/* Convolution, pooling and batch norm against PyTorch: functional forms and modules, forward
   and backward (input, weight and bias gradients), batch norm in training and evaluation mode
   with its running statistics and num_batches_tracked; plus module initialisation and the
   errors bad inputs give.

   tests/conv_ref.py (a CTest fixture, see tests/conv.cmake) writes the reference file; this
   test reads it. Usage: test_conv_torch REFERENCE_FILE. A missing file is a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nabla.h>
#include "op_coverage.h"
#include <nabla/nn.h>

/* ---- the reference file ---- */
typedef struct ref {
    char *name;
    nb_dtype dtype;
    nb_shape shape;
    int64_t numel;
    double *v;
} ref;

typedef struct ref_case {
    char kind[32];
    char name[96];
} ref_case;

static ref *refs;
static int nrefs;
static ref_case *cases;
static int ncases;
static const char *ref_path;

static char *next_tok(char **p) {
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r') (*p)++;
    if (!**p) return NULL;
    char *s = *p;
    while (**p && **p != ' ' && **p != '\n' && **p != '\t' && **p != '\r') (*p)++;
    if (**p) *(*p)++ = 0;
    return s;
}

static bool load_refs(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open the reference file %s (run tests/conv_ref.py)\n", path);
        return false;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(buf);
        return false;
    }
    fclose(f);
    buf[size] = 0;
    int cap_r = 256, cap_c = 64;
    refs = malloc(sizeof(ref) * (size_t)cap_r);
    cases = malloc(sizeof(ref_case) * (size_t)cap_c);
    char *p = buf, *t;
    bool ok = true;
    while (ok && (t = next_tok(&p))) {
        if (strcmp(t, "C") == 0) {
            if (ncases == cap_c) cases = realloc(cases, sizeof(ref_case) * (size_t)(cap_c *= 2));
            char *k = next_tok(&p), *n = next_tok(&p);
            if (!k || !n) { ok = false; break; }
            snprintf(cases[ncases].kind, sizeof cases[ncases].kind, "%s", k);
            snprintf(cases[ncases].name, sizeof cases[ncases].name, "%s", n);
            ncases++;
        } else if (strcmp(t, "T") == 0) {
            if (nrefs == cap_r) refs = realloc(refs, sizeof(ref) * (size_t)(cap_r *= 2));
            ref *r = &refs[nrefs];
            char *n = next_tok(&p), *d = next_tok(&p), *nd = next_tok(&p);
            if (!n || !d || !nd) { ok = false; break; }
            r->name = strdup(n);
            r->dtype = strcmp(d, "f64") == 0 ? NB_F64 : strcmp(d, "i64") == 0 ? NB_I64 : NB_F32;
            r->shape.ndim = atoi(nd);
            r->numel = 1;
            for (int i = 0; i < r->shape.ndim; i++) {
                char *s = next_tok(&p);
                if (!s) { ok = false; break; }
                r->shape.dim[i] = atoll(s);
                r->numel *= r->shape.dim[i];
            }
            r->v = malloc(sizeof(double) * (size_t)(r->numel ? r->numel : 1));
            for (int64_t i = 0; ok && i < r->numel; i++) {
                char *s = next_tok(&p);
                if (!s) { ok = false; break; }
                r->v[i] = strtod(s, NULL);
            }
            nrefs++;
        } else {
            fprintf(stderr, "%s: unexpected token '%s'\n", path, t);
            ok = false;
        }
    }
    free(buf);
    if (!ok) fprintf(stderr, "%s: truncated or malformed\n", path);
    return ok && ncases > 0;
}

static void free_refs(void) {
    for (int i = 0; i < nrefs; i++) {
        free(refs[i].name);
        free(refs[i].v);
    }
    free(refs);
    free(cases);
}

static const ref *find(const char *fmt, ...) {
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (int i = 0; i < nrefs; i++)
        if (strcmp(refs[i].name, name) == 0) return &refs[i];
    fprintf(stderr, "reference %s is missing\n", name);
    return NULL;
}

static int64_t cfg_at(const ref *c, int i) { return c && i < c->numel ? (int64_t)c->v[i] : 0; }

/* A tensor holding the reference's values (in the current scope). */
static nb_tensor *make(const ref *r) {
    if (!r) return NULL;
    nb_tensor *t = nb_empty(r->shape, r->dtype);
    if (!t) return NULL;
    void *p = nb_data_ptr(t);
    for (int64_t i = 0; i < r->numel; i++) {
        if (r->dtype == NB_F32) ((float *)p)[i] = (float)r->v[i];
        else if (r->dtype == NB_F64) ((double *)p)[i] = r->v[i];
        else ((int64_t *)p)[i] = (int64_t)r->v[i];
    }
    return t;
}

static nb_tensor *make_leaf(const ref *r) { return nb_set_requires_grad(make(r), true); }

/* Writes the reference's values into a module's parameter or buffer. */
static void set_param(nb_module *m, const char *path, const ref *r) {
    nb_scope *s = nb_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *t = nb_module_get(m, path);
    assert_non_null(t);
    assert_int_equal(nb_assign(t, make(r)), 0);
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
}

static int failures;

/* Compares a tensor with the reference: dtype, shape, and values by error normalised by the
   reference's largest magnitude (f32: 1e-5 * tol_factor, f64: 1e-11 * tol_factor). */
static void check(const char *what, const char *name, nb_tensor *t, const ref *r, double tol_factor) {
    if (!r) { failures++; return; }
    if (!t) {
        fprintf(stderr, "FAIL %s %s: got NULL (%s)\n", name, what, nb_error() ? nb_error() : "no error");
        failures++;
        return;
    }
    char a[160], b[160];
    if (nb_dtype_of(t) != r->dtype || nb_shape_of(t).ndim != r->shape.ndim ||
        memcmp(nb_shape_of(t).dim, r->shape.dim, sizeof(int64_t) * (size_t)r->shape.ndim) != 0) {
        fprintf(stderr, "FAIL %s %s: got %s %s, torch %s %s\n", name, what, nb_shape_str(nb_shape_of(t), a, sizeof a),
                nb_dtype_name(nb_dtype_of(t)), nb_shape_str(r->shape, b, sizeof b), nb_dtype_name(r->dtype));
        failures++;
        return;
    }
    double *v = malloc(sizeof(double) * (size_t)(r->numel ? r->numel : 1));
    nb_scope *s = nb_scope_begin();
    nb_tensor *d = nb_cast(t, NB_F64);
    assert_int_equal(nb_copy_to(d, v, sizeof(double) * (size_t)r->numel), 0);
    nb_scope_end(s);
    double scale = 1, worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < r->numel; i++)
        if (isfinite(r->v[i])) scale = fmax(scale, fabs(r->v[i]));
    for (int64_t i = 0; i < r->numel; i++) {
        /* NaN against NaN and an infinity against the same one are equal (max pooling passes both on) */
        bool same = (isnan(v[i]) && isnan(r->v[i])) || (isinf(r->v[i]) && v[i] == r->v[i]);
        double e = same ? 0 : fabs(v[i] - r->v[i]);
        if (!(e <= worst)) { worst = e; at = i; }
        if (isnan(worst)) break; /* a NaN against a number: no later element may replace it */
    }
    double tol = (r->dtype == NB_F64 ? 1e-11 : 1e-5) * tol_factor;
    if (!(worst / scale <= tol)) {
        fprintf(stderr, "FAIL %s %s: error %.3g (normalised %.3g > %.3g) at %lld: %.9g vs torch %.9g\n", name, what, worst,
                worst / scale, tol, (long long)at, v[at], r->v[at]);
        failures++;
    }
    free(v);
}

/* Runs the backward of sum(y * g). */
static void backward_with(nb_tensor *y, const ref *g) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *gt = make(g);
    if (y && gt) assert_int_equal(nb_backward_with(y, gt), 0);
    nb_scope_end(s);
}

static void run_conv(const char *n) {
    nb_scope *s = nb_scope_begin();
    const ref *c = find("%s.cfg", n);
    bool bias = cfg_at(c, 7) != 0;
    nb_tensor *x = make_leaf(find("%s.x", n)), *w = make_leaf(find("%s.w", n));
    nb_tensor *b = bias ? make_leaf(find("%s.b", n)) : NULL;
    nb_conv_opts o = { { (int)cfg_at(c, 0), (int)cfg_at(c, 1) }, { (int)cfg_at(c, 2), (int)cfg_at(c, 3) },
                       { (int)cfg_at(c, 4), (int)cfg_at(c, 5) }, (int)cfg_at(c, 6) };
    nb_tensor *y = nb_conv2d(x, w, b, o);
    check("forward", n, y, find("%s.y", n), 2);
    backward_with(y, find("%s.g", n));
    check("input grad", n, nb_grad_of(x), find("%s.dx", n), 2);
    check("weight grad", n, nb_grad_of(w), find("%s.dw", n), 2);
    if (bias) check("bias grad", n, nb_grad_of(b), find("%s.db", n), 2);
    nb_scope_end(s);
}

static void run_conv3d(const char *n) {
    nb_scope *s = nb_scope_begin();
    const ref *c = find("%s.cfg", n);
    bool bias = cfg_at(c, 10) != 0;
    nb_tensor *x = make_leaf(find("%s.x", n)), *w = make_leaf(find("%s.w", n)), *b = bias ? make_leaf(find("%s.b", n)) : NULL;
    nb_conv3d_opts o = { .groups = (int)cfg_at(c, 9) };
    for (int k = 0; k < 3; k++) {
        o.stride[k] = (int)cfg_at(c, k);
        o.padding[k] = (int)cfg_at(c, 3 + k);
        o.dilation[k] = (int)cfg_at(c, 6 + k);
    }
    nb_tensor *y = nb_conv3d(x, w, b, o);
    check("forward", n, y, find("%s.y", n), 2);
    backward_with(y, find("%s.g", n));
    check("input grad", n, nb_grad_of(x), find("%s.dx", n), 2);
    check("weight grad", n, nb_grad_of(w), find("%s.dw", n), 2);
    if (bias) check("bias grad", n, nb_grad_of(b), find("%s.db", n), 2);
    nb_scope_end(s);
}

static void run_pool(const char *kind, const char *n) {
    nb_scope *s = nb_scope_begin();
    const ref *c = find("%s.cfg", n);
    nb_tensor *x = make_leaf(find("%s.x", n)), *y;
    /* a square kernel goes through the kernel argument and the square fields, the rest per axis */
    int v[10];
    for (int k = 0; k < 10 && strcmp(kind, "adaptive"); k++) v[k] = (int)cfg_at(c, k);
    nb_pool_opts o = { .ceil_mode = v[8] != 0, .exclude_padding = v[9] != 0 };
    bool square = v[0] == v[1] && v[2] == v[3] && v[4] == v[5] && v[6] == v[7];
    if (square) o.stride = v[2], o.padding = v[4], o.dilation = v[6];
    else
        for (int a = 0; a < 2; a++) o.kernel_hw[a] = v[a], o.stride_hw[a] = v[2 + a], o.padding_hw[a] = v[4 + a], o.dilation_hw[a] = v[6 + a];
    if (strcmp(kind, "maxpool") == 0) y = nb_max_pool2d(x, square ? v[0] : 0, o);
    else if (strcmp(kind, "avgpool") == 0) y = nb_avg_pool2d(x, square ? v[0] : 0, o);
    else y = nb_adaptive_avg_pool2d(x, (int)cfg_at(c, 0), (int)cfg_at(c, 1));
    check("forward", n, y, find("%s.y", n), 1);
    backward_with(y, find("%s.g", n));
    check("input grad", n, nb_grad_of(x), find("%s.dx", n), 1);
    nb_scope_end(s);
}

static void run_conv_module(const char *n) {
    const ref *c = find("%s.cfg", n);
    int v[14]; /* dims in out kernel(h, w) stride(h, w) padding(h, w) dilation(h, w) groups bias padding_mode */
    for (int k = 0; k < 14; k++) v[k] = (int)cfg_at(c, k);
    int dims = v[0];
    bool bias = v[12] != 0;
    /* square values through the square fields, the rest per axis */
    nb_conv2d_opts o = { .groups = v[11], .no_bias = !bias, .padding_mode = (nb_pad_mode)v[13] };
    bool square = dims != 2 || (v[3] == v[4] && v[5] == v[6] && v[7] == v[8] && v[9] == v[10]);
    if (square) o.stride = v[6], o.padding = v[8], o.dilation = v[10];
    else
        for (int a = 0; a < 2; a++) o.kernel_hw[a] = v[3 + a], o.stride_hw[a] = v[5 + a], o.padding_hw[a] = v[7 + a], o.dilation_hw[a] = v[9 + a];
    nb_module *m = dims == 2   ? nb_nn_conv2d(v[1], v[2], square ? v[4] : 0, o)
                   : dims == 1 ? nb_nn_conv1d(v[1], v[2], v[4], o)
                               : nb_nn_conv3d(v[1], v[2], v[4], o);
    assert_non_null(m);
    assert_int_equal(nb_module_named_parameters(m, NULL, 0), bias ? 2 : 1);
    set_param(m, "weight", find("%s.w", n));
    if (bias) set_param(m, "bias", find("%s.b", n));
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = make_leaf(find("%s.x", n));
    nb_tensor *y = nb_forward(m, x);
    check("forward", n, y, find("%s.y", n), 2);
    backward_with(y, find("%s.g", n));
    check("input grad", n, nb_grad_of(x), find("%s.dx", n), 2);
    check("weight grad", n, nb_grad_of(nb_module_get(m, "weight")), find("%s.dw", n), 2);
    if (bias) check("bias grad", n, nb_grad_of(nb_module_get(m, "bias")), find("%s.db", n), 2);
    nb_scope_end(s);
    nb_module_free(m);
}

static void run_pool_module(const char *n) {
    const ref *c = find("%s.cfg", n);
    int kind = (int)cfg_at(c, 0);
    nb_module *m = kind == 0   ? nb_nn_max_pool2d((int)cfg_at(c, 1), (nb_pool_opts){ .stride = (int)cfg_at(c, 2), .padding = (int)cfg_at(c, 3) })
                   : kind == 1 ? nb_nn_avg_pool2d((int)cfg_at(c, 1), (nb_pool_opts){ .stride = (int)cfg_at(c, 2), .padding = (int)cfg_at(c, 3) })
                               : nb_nn_adaptive_avg_pool2d((int)cfg_at(c, 1), (int)cfg_at(c, 2));
    assert_non_null(m);
    assert_int_equal(nb_module_named_parameters(m, NULL, 0), 0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = make_leaf(find("%s.x", n));
    nb_tensor *y = nb_forward(m, x);
    check("forward", n, y, find("%s.y", n), 1);
    backward_with(y, find("%s.g", n));
    check("input grad", n, nb_grad_of(x), find("%s.dx", n), 1);
    nb_scope_end(s);
    nb_module_free(m);
}

/* Runs one batch-norm step of the module and checks it against the reference prefix p. */
static void bn_step(nb_module *m, const char *n, const char *p, bool train) {
    nb_scope *s = nb_scope_begin();
    nb_module_zero_grad(m);
    nb_tensor *x = make_leaf(find("%s.%s.x", n, p));
    nb_tensor *y = nb_forward(m, x);
    check(p, n, y, find("%s.%s.y", n, p), 2);
    backward_with(y, find("%s.%s.g", n, p));
    check("input grad", n, nb_grad_of(x), find("%s.%s.dx", n, p), 5);
    check("weight grad", n, nb_grad_of(nb_module_get(m, "weight")), find("%s.%s.dw", n, p), 5);
    check("bias grad", n, nb_grad_of(nb_module_get(m, "bias")), find("%s.%s.db", n, p), 5);
    if (train) {
        check("running_mean", n, nb_module_get(m, "running_mean"), find("%s.%s.running_mean", n, p), 2);
        check("running_var", n, nb_module_get(m, "running_var"), find("%s.%s.running_var", n, p), 2);
        check("num_batches_tracked", n, nb_module_get(m, "num_batches_tracked"), find("%s.%s.num_batches_tracked", n, p), 0);
    }
    nb_scope_end(s);
}

static void run_bn_module(const char *n) {
    const ref *c = find("%s.cfg", n);
    int64_t f = cfg_at(c, 1);
    nb_module *m = cfg_at(c, 0) == 1 ? nb_nn_batch_norm1d(f) : nb_nn_batch_norm2d(f);
    assert_non_null(m);
    /* torch's names and order: parameters weight, bias; buffers running_mean, running_var,
       num_batches_tracked (i64, 0-d) */
    nb_named_tensor e[8];
    assert_int_equal(nb_module_state_entries(m, e, 8), 5);
    const char *want[5] = { "weight", "bias", "running_mean", "running_var", "num_batches_tracked" };
    for (int i = 0; i < 5; i++) assert_string_equal(e[i].name, want[i]);
    assert_int_equal(nb_dtype_of(e[4].tensor), NB_I64);
    assert_int_equal(nb_ndim(e[4].tensor), 0);
    set_param(m, "weight", find("%s.w", n));
    set_param(m, "bias", find("%s.b", n));
    nb_module_train(m, true);
    bn_step(m, n, "train1", true);
    bn_step(m, n, "train2", true);
    nb_module_train(m, false);
    bn_step(m, n, "eval", false);
    /* evaluation leaves the running statistics and the counter alone */
    check("running_mean after eval", n, nb_module_get(m, "running_mean"), find("%s.train2.running_mean", n), 2);
    check("num_batches_tracked after eval", n, nb_module_get(m, "num_batches_tracked"), find("%s.train2.num_batches_tracked", n), 0);
    nb_module_free(m);
}

static void run_bn_functional(const char *n) {
    nb_scope *s = nb_scope_begin();
    const ref *c = find("%s.cfg", n);
    bool training = cfg_at(c, 0) != 0;
    double momentum = (double)cfg_at(c, 1) / 1000.0;
    nb_tensor *x = make_leaf(find("%s.x", n)), *w = make_leaf(find("%s.w", n)), *b = make_leaf(find("%s.b", n));
    nb_tensor *rm = make(find("%s.running_mean_before", n)), *rv = make(find("%s.running_var_before", n));
    nb_tensor *y = nb_batch_norm(x, rm, rv, w, b, training, momentum, 1e-5);
    check("forward", n, y, find("%s.y", n), 10);
    backward_with(y, find("%s.g", n));
    check("input grad", n, nb_grad_of(x), find("%s.dx", n), 100);
    check("weight grad", n, nb_grad_of(w), find("%s.dw", n), 10);
    check("bias grad", n, nb_grad_of(b), find("%s.db", n), 10);
    check("running_mean", n, rm, find("%s.running_mean", n), 10);
    check("running_var", n, rv, find("%s.running_var", n), 10);
    nb_scope_end(s);
}

static void test_against_torch(void **state) {
    (void)state;
    int ran = 0;
    op_coverage_begin();
    for (int i = 0; i < ncases; i++) {
        const char *k = cases[i].kind, *n = cases[i].name;
        nb_error_clear();
        if (strcmp(k, "conv") == 0) run_conv(n);
        else if (strcmp(k, "conv3d") == 0) run_conv3d(n);
        else if (strcmp(k, "maxpool") == 0 || strcmp(k, "avgpool") == 0 || strcmp(k, "adaptive") == 0) run_pool(k, n);
        else if (strcmp(k, "conv_module") == 0) run_conv_module(n);
        else if (strcmp(k, "pool_module") == 0) run_pool_module(n);
        else if (strcmp(k, "bn_module") == 0) run_bn_module(n);
        else if (strcmp(k, "bn_functional") == 0) run_bn_functional(n);
        else {
            fprintf(stderr, "unknown case kind %s\n", k);
            failures++;
            continue;
        }
        if (nb_error()) {
            fprintf(stderr, "FAIL %s: error %s\n", n, nb_error());
            failures++;
        }
        ran++;
    }
    op_coverage_end();
    if (op_coverage_write() < 0) failures++;
    fprintf(stderr, "%d cases against torch, %d failures\n", ran, failures);
    assert_int_equal(failures, 0);
    assert_true(ran >= 30);
}

/* ---- initialisation as torch: kaiming_uniform(a = sqrt(5)) weights, U(+-1/sqrt(fan_in)) bias ---- */
static void test_conv_init(void **state) {
    (void)state;
    nb_manual_seed(7);
    nb_module *m = nb_nn_conv2d(16, 32, 3, (nb_conv2d_opts){ .groups = 2 });
    assert_non_null(m);
    nb_tensor *w = nb_module_get(m, "weight"), *b = nb_module_get(m, "bias");
    char sh[64];
    assert_string_equal(nb_shape_str(nb_shape_of(w), sh, sizeof sh), "[32, 8, 3, 3]");
    assert_true(nb_requires_grad(w) && nb_requires_grad(b));
    double bound = 1.0 / sqrt(8.0 * 9.0); /* fan_in = in/groups * k * k */
    float wv[32 * 8 * 9], bv[32];
    assert_int_equal(nb_copy_to(w, wv, sizeof wv), 0);
    assert_int_equal(nb_copy_to(b, bv, sizeof bv), 0);
    double sum = 0, sq = 0, maxabs = 0;
    for (int i = 0; i < 32 * 8 * 9; i++) {
        sum += wv[i];
        sq += (double)wv[i] * wv[i];
        maxabs = fmax(maxabs, fabs(wv[i]));
    }
    int n = 32 * 8 * 9;
    assert_true(maxabs <= bound && maxabs > 0.95 * bound);
    assert_true(fabs(sum / n) < 0.1 * bound);
    double sd = sqrt(sq / n), want = bound / sqrt(3.0);
    assert_true(fabs(sd - want) < 0.05 * want);
    double bmax = 0;
    for (int i = 0; i < 32; i++) bmax = fmax(bmax, fabs(bv[i]));
    assert_true(bmax <= bound && bmax > 0.5 * bound);
    nb_module_free(m);

    m = nb_nn_conv2d(3, 4, 5, (nb_conv2d_opts){ .no_bias = true });
    assert_non_null(m);
    assert_null(nb_module_get(m, "bias"));
    assert_int_equal(nb_module_num_params(m), 4 * 3 * 5 * 5);
    nb_module_free(m);
}

/* ---- bad inputs: clear errors naming what was expected, and no crash ---- */
static void expect_error(nb_tensor *r, const char *const *parts) {
    assert_null(r);
    const char *e = nb_error();
    assert_non_null(e);
    for (int i = 0; parts[i]; i++)
        if (!strstr(e, parts[i])) fail_msg("error '%s' does not mention '%s'", e, parts[i]);
    nb_error_clear();
}
#define EXPECT_ERROR(call, ...) expect_error((call), (const char *const[]){ __VA_ARGS__, NULL })

static void test_bad_inputs(void **state) {
    (void)state;
    nb_error_clear();
    nb_scope *s = nb_scope_begin();
    nb_module *net = nb_nn_sequential(nb_nn_conv2d(3, 8, 3, (nb_conv2d_opts){ 0 }), nb_nn_batch_norm2d(8),
                                      nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }), NULL);
    assert_non_null(net);
    nb_module *conv = nb_module_get_child(net, "0"), *bn = nb_module_get_child(net, "1"),
              *pool = nb_module_get_child(net, "2");
    /* wrong channel count: the layer, the expected and the actual shape */
    EXPECT_ERROR(nb_forward(conv, nb_zeros(NB_SHAPE(8, 4, 32, 32), NB_F32)), "nb_nn_conv2d 0: expected input [N, 3, H, W], got [8, 4, 32, 32]");
    EXPECT_ERROR(nb_forward(conv, nb_zeros(NB_SHAPE(8, 32, 32), NB_F32)), "nb_nn_conv2d 0", "[N, 3, H, W]", "[8, 32, 32]");
    EXPECT_ERROR(nb_forward(bn, nb_zeros(NB_SHAPE(2, 4, 5, 5), NB_F32)), "nb_nn_batch_norm2d 1: expected input [N, 8, H, W], got [2, 4, 5, 5]");
    EXPECT_ERROR(nb_forward(pool, nb_zeros(NB_SHAPE(4, 4), NB_F32)), "nb_nn_max_pool2d 2", "[N, C, H, W]", "[4, 4]");
    /* the kernel larger than the (padded) input */
    EXPECT_ERROR(nb_forward(conv, nb_zeros(NB_SHAPE(1, 3, 2, 8), NB_F32)), "nb_nn_conv2d 0", "[1, 3, 2, 8]", "kernel");
    EXPECT_ERROR(nb_forward(pool, nb_zeros(NB_SHAPE(1, 3, 1, 8), NB_F32)), "nb_nn_max_pool2d 2", "[1, 3, 1, 8]");
    nb_module *c1 = nb_nn_conv2d(3, 8, 3, (nb_conv2d_opts){ 0 });
    nb_module_child(net, "extra", c1);
    EXPECT_ERROR(nb_forward(c1, nb_zeros(NB_SHAPE(2, 5, 8, 8), NB_F32)), "nb_nn_conv2d extra: expected input [N, 3, H, W], got [2, 5, 8, 8]");
    nb_module_free(net);

    nb_tensor *x = nb_randn(NB_SHAPE(2, 4, 5, 5), NB_F32);
    nb_tensor *w = nb_randn(NB_SHAPE(6, 2, 3, 3), NB_F32);
    EXPECT_ERROR(nb_conv2d(x, w, NULL, (nb_conv_opts){ 0 }), "nb_conv2d", "[2, 4, 5, 5]", "[6, 2, 3, 3]", "channels");
    EXPECT_ERROR(nb_conv2d(x, w, NULL, (nb_conv_opts){ .groups = 3 }), "nb_conv2d", "groups 3");
    EXPECT_ERROR(nb_conv2d(x, nb_randn(NB_SHAPE(6, 4, 7, 3), NB_F32), NULL, (nb_conv_opts){ .padding = { 0, 0 } }),
                 "nb_conv2d", "larger than the padded input", "[2, 4, 5, 5]");
    EXPECT_ERROR(nb_conv2d(x, nb_randn(NB_SHAPE(6, 4, 3, 3), NB_F32), NULL, (nb_conv_opts){ .dilation = { 3, 3 } }),
                 "nb_conv2d", "larger than the padded input");
    EXPECT_ERROR(nb_conv2d(x, w, nb_zeros(NB_SHAPE(5), NB_F32), (nb_conv_opts){ .groups = 2 }), "nb_conv2d", "bias", "[5]");
    EXPECT_ERROR(nb_conv2d(x, nb_randn(NB_SHAPE(6, 4, 3, 3), NB_F64), NULL, (nb_conv_opts){ 0 }), "nb_conv2d", "f64", "one dtype");
    EXPECT_ERROR(nb_conv2d(nb_zeros(NB_SHAPE(4, 5), NB_F32), w, NULL, (nb_conv_opts){ 0 }), "nb_conv2d", "[N, C, H, W]", "[4, 5]");
    EXPECT_ERROR(nb_conv2d(x, w, NULL, (nb_conv_opts){ .stride = { -1, 1 } }), "nb_conv2d", "negative");
    EXPECT_ERROR(nb_conv2d(nb_zeros(NB_SHAPE(2, 4, 5, 5), NB_I64), nb_zeros(NB_SHAPE(6, 4, 3, 3), NB_I64), NULL, (nb_conv_opts){ 0 }),
                 "nb_conv2d", "i64");
    EXPECT_ERROR(nb_max_pool2d(x, 2, (nb_pool_opts){ .padding = 2 }), "nb_max_pool2d", "padding");
    EXPECT_ERROR(nb_max_pool2d(x, 8, (nb_pool_opts){ 0 }), "nb_max_pool2d", "larger", "[2, 4, 5, 5]");
    EXPECT_ERROR(nb_avg_pool2d(x, 0, (nb_pool_opts){ 0 }), "nb_avg_pool2d", "kernel (0, 0)");
    EXPECT_ERROR(nb_avg_pool2d(x, 2, (nb_pool_opts){ .dilation = 2 }), "nb_avg_pool2d", "no dilation");
    EXPECT_ERROR(nb_max_pool2d(x, 2, (nb_pool_opts){ .exclude_padding = true }), "nb_max_pool2d", "exclude_padding");
    EXPECT_ERROR(nb_max_pool2d(x, 3, (nb_pool_opts){ .dilation = 3 }), "nb_max_pool2d", "larger", "dilation 3, 3");
    EXPECT_ERROR(nb_max_pool2d(x, 0, (nb_pool_opts){ .kernel_hw = { 2, 0 } }), "nb_max_pool2d", "kernel (2, 0)");
    EXPECT_ERROR(nb_max_pool2d(x, 2, (nb_pool_opts){ .dilation = -1 }), "nb_max_pool2d", "dilation");
    EXPECT_ERROR(nb_adaptive_avg_pool2d(x, 0, 3), "nb_adaptive_avg_pool2d", "output size");
    EXPECT_ERROR(nb_batch_norm(x, NULL, NULL, nb_ones(NB_SHAPE(3), NB_F32), NULL, true, 0, 0), "nb_batch_norm", "weight", "[4]", "[3]");
    EXPECT_ERROR(nb_batch_norm(x, NULL, NULL, NULL, NULL, false, 0, 0), "nb_batch_norm", "running_mean");
    EXPECT_ERROR(nb_batch_norm(nb_zeros(NB_SHAPE(1, 3), NB_F32), NULL, NULL, NULL, NULL, true, 0, 0), "nb_batch_norm",
                 "more than 1 value per channel");
    /* constructors */
    assert_null(nb_nn_conv2d(4, 6, 3, (nb_conv2d_opts){ .groups = 4 }));
    assert_non_null(strstr(nb_error(), "groups 4"));
    nb_error_clear();
    assert_null(nb_nn_conv2d(0, 6, 3, (nb_conv2d_opts){ 0 }));
    nb_error_clear();
    assert_null(nb_nn_max_pool2d(2, (nb_pool_opts){ .padding = 3 }));
    nb_error_clear();
    assert_null(nb_nn_avg_pool2d(3, (nb_pool_opts){ .dilation_hw = { 1, 2 } }));
    assert_non_null(strstr(nb_error(), "no dilation"));
    nb_error_clear();
    /* convolutions print as torch 1.13 prints them */
    nb_module *c1d = nb_nn_conv1d(2, 4, 3, (nb_conv2d_opts){ .stride = 2, .padding = 1, .dilation = 2, .groups = 2, .no_bias = true,
                                                             .padding_mode = NB_PAD_REFLECT });
    nb_module *c2d = nb_nn_conv2d(2, 4, 0, (nb_conv2d_opts){ .kernel_hw = { 2, 3 }, .stride_hw = { 1, 2 }, .padding_hw = { 1, 0 },
                                                             .padding_mode = NB_PAD_CIRCULAR });
    char *r1 = nb_module_repr(c1d), *r2 = nb_module_repr(c2d);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_string_equal(r1, "Conv1d(2, 4, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(2,), groups=2, bias=False, "
                            "padding_mode=reflect)");
    assert_string_equal(r2, "Conv2d(2, 4, kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), padding_mode=circular)");
    free(r1);
    free(r2);
    nb_module *c3d = nb_nn_conv3d(3, 4, 3, (nb_conv2d_opts){ .stride = 2, .padding = 1 });
    char *r3 = nb_module_repr(c3d);
    assert_non_null(r3);
    assert_string_equal(r3, "Conv3d(3, 4, kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1))");
    free(r3);
    EXPECT_ERROR(nb_forward(c3d, nb_zeros(NB_SHAPE(2, 4, 5, 5, 5), NB_F32)), "nb_nn_conv3d", "[N, 3, D, H, W]");
    EXPECT_ERROR(nb_conv3d(nb_zeros(NB_SHAPE(1, 3, 2, 5, 5), NB_F32), nb_zeros(NB_SHAPE(4, 3, 3, 3, 3), NB_F32), NULL,
                           (nb_conv3d_opts){ 0 }), "nb_conv3d", "larger than the padded input depth");
    EXPECT_ERROR(nb_conv3d(nb_zeros(NB_SHAPE(1, 3, 4, 5, 5), NB_F32), nb_zeros(NB_SHAPE(4, 2, 3, 3, 3), NB_F32), NULL,
                           (nb_conv3d_opts){ 0 }), "nb_conv3d", "do not fit");
    nb_module_free(c3d);
    EXPECT_ERROR(nb_forward(c1d, nb_zeros(NB_SHAPE(2, 3, 9), NB_F32)), "nb_nn_conv1d", "[N, 2, L]", "[2, 3, 9]");
    nb_module_free(c1d);
    nb_module_free(c2d);
    assert_null(nb_nn_conv2d(2, 4, 0, (nb_conv2d_opts){ .kernel_hw = { 2, 0 } }));
    assert_non_null(strstr(nb_error(), "kernel (2, 0)"));
    nb_error_clear();
    assert_null(nb_nn_conv1d(2, 4, 3, (nb_conv2d_opts){ .padding_mode = (nb_pad_mode)7 }));
    assert_non_null(strstr(nb_error(), "padding_mode"));
    nb_error_clear();
    /* the options print as torch prints them: an int for a square value, a pair otherwise */
    nb_module *mp = nb_nn_max_pool2d(0, (nb_pool_opts){ .kernel_hw = { 2, 3 }, .stride_hw = { 1, 2 }, .padding_hw = { 1, 0 },
                                                          .dilation = 2, .ceil_mode = true });
    char *rep = nb_module_repr(mp);
    assert_non_null(rep);
    assert_string_equal(rep, "MaxPool2d(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), dilation=2, ceil_mode=True)");
    free(rep);
    /* its forward needs the dilated window less the padding: (2 * (2 - 1) + 1) - 2 = 1 row, 5 columns */
    EXPECT_ERROR(nb_forward(mp, nb_zeros(NB_SHAPE(1, 2, 4, 4), NB_F32)), "nb_nn_max_pool2d", "5");
    assert_non_null(nb_forward(mp, nb_zeros(NB_SHAPE(1, 2, 1, 5), NB_F32)));
    nb_module_free(mp);
    assert_null(nb_nn_batch_norm2d(0));
    nb_error_clear();
    /* NULL in, NULL out */
    assert_null(nb_conv2d(NULL, w, NULL, (nb_conv_opts){ 0 }));
    assert_null(nb_max_pool2d(NULL, 2, (nb_pool_opts){ 0 }));
    assert_null(nb_batch_norm(NULL, NULL, NULL, NULL, NULL, true, 0, 0));
    nb_error_clear();
    nb_scope_end(s);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s REFERENCE_FILE\n", argv[0]);
        return 1;
    }
    ref_path = argv[1];
    if (!load_refs(ref_path)) {
        free_refs();
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_torch),
        cmocka_unit_test(test_conv_init),
        cmocka_unit_test(test_bad_inputs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free_refs();
    return rc;
}
