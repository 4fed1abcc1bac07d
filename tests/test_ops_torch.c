/* Every op's forward and backward against PyTorch.

   tests/torch_ref.py (run by CTest as a fixture, see tests/torch.cmake) writes the cases: for
   each, the op, its arguments, its inputs as contiguous leaves plus the views (permute, slice
   with a step, expand) that turn each leaf into what the op sees, torch's output, a random
   upstream gradient g and torch's gradients of sum(out * g) with respect to the leaves. This
   test rebuilds the same views in nabla (so the kernels meet transposed, strided and
   broadcast inputs), runs the op, backpropagates g with nb_backward_with and compares the
   output (dtype, shape, values) and each leaf's gradient (dtype, shape, values).

   Usage: test_ops_torch REFERENCE_FILE [NAME_SUBSTRING]
   A missing or unreadable reference file is a failure, not a skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nabla.h>
#include "op_coverage.h"

#define MAX_IN 6
#define MAX_ARGS 8

typedef struct ref_tensor {
    nb_dtype dtype;
    nb_shape shape;
    int64_t numel;
    double *v; /* values as doubles (exact for the small integers and bools used) */
} ref_tensor;

typedef struct ref_input {
    bool grad;
    int nperm;          /* -1: no permute */
    int perm[NB_MAX_DIMS];
    bool has_slice;     /* slice(axis, start, end, step) after the permute */
    int64_t sl[4];
    bool has_expand;    /* expand to this shape after the slice */
    nb_shape expand;
    ref_tensor data;    /* the contiguous leaf */
} ref_input;

typedef struct ref_case {
    char name[96];
    char op[32];
    bool expect_error;
    int nia, nfa;
    int64_t ia[MAX_ARGS];
    double fa[MAX_ARGS];
    bool has_sh;
    nb_shape sh;
    bool has_dt;
    nb_dtype dt;
    double tol;
    int nin;
    ref_input in[MAX_IN];
    bool has_out, has_g;
    ref_tensor out, g;
    bool has_grad[MAX_IN];
    ref_tensor grad[MAX_IN];
    bool strided_g; /* seed the backward with a transposed view of g */
} ref_case;

/* ---- reading the reference file ---- */

typedef struct reader {
    char *p;
    const char *path;
    bool bad;
} reader;

static const char *next_tok(reader *r) {
    if (r->bad) return "";
    while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r') r->p++;
    if (!*r->p) {
        r->bad = true;
        return "";
    }
    char *s = r->p;
    while (*r->p && *r->p != ' ' && *r->p != '\n' && *r->p != '\t' && *r->p != '\r') r->p++;
    if (*r->p) *r->p++ = 0;
    return s;
}

static void expect_tok(reader *r, const char *want) {
    const char *t = next_tok(r);
    if (!r->bad && strcmp(t, want) != 0) {
        fprintf(stderr, "%s: expected '%s', found '%s'\n", r->path, want, t);
        r->bad = true;
    }
}

static int64_t next_int(reader *r) {
    const char *t = next_tok(r);
    char *end;
    long long v = strtoll(t, &end, 10);
    if (!r->bad && (*end || end == t)) {
        fprintf(stderr, "%s: expected an integer, found '%s'\n", r->path, t);
        r->bad = true;
    }
    return v;
}

static double next_double(reader *r) {
    const char *t = next_tok(r);
    char *end;
    double v = strtod(t, &end);
    if (!r->bad && (*end || end == t)) {
        fprintf(stderr, "%s: expected a number, found '%s'\n", r->path, t);
        r->bad = true;
    }
    return v;
}

static bool parse_dtype(const char *s, nb_dtype *out) {
    for (int d = 0; d < NB_DTYPE_COUNT; d++)
        if (strcmp(s, nb_dtype_name((nb_dtype)d)) == 0) {
            *out = (nb_dtype)d;
            return true;
        }
    return false;
}

static nb_shape read_shape(reader *r, int ndim) {
    nb_shape s = { 0, { 0 } };
    if (ndim < 0 || ndim > NB_MAX_DIMS) {
        r->bad = true;
        return s;
    }
    s.ndim = ndim;
    for (int i = 0; i < ndim; i++) s.dim[i] = next_int(r);
    return s;
}

static void read_tensor(reader *r, ref_tensor *t) {
    const char *name = next_tok(r);
    if (!parse_dtype(name, &t->dtype)) {
        if (!r->bad) fprintf(stderr, "%s: unknown dtype '%s'\n", r->path, name);
        r->bad = true;
        return;
    }
    t->shape = read_shape(r, (int)next_int(r));
    t->numel = 1;
    for (int i = 0; i < t->shape.ndim; i++) t->numel *= t->shape.dim[i];
    t->v = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
    if (!t->v) {
        r->bad = true;
        return;
    }
    for (int64_t i = 0; i < t->numel; i++) t->v[i] = next_double(r);
}

/* An optional tensor: '-' or a tensor. */
static bool read_opt_tensor(reader *r, ref_tensor *t) {
    char *save = r->p;
    const char *s = next_tok(r);
    if (strcmp(s, "-") == 0) return false;
    /* put the token back: next_tok wrote a NUL after it, restore the separator */
    if (r->p > save && r->p[-1] == 0) r->p[-1] = ' ';
    r->p = save;
    read_tensor(r, t);
    return true;
}

static void read_case(reader *r, ref_case *c) {
    expect_tok(r, "CASE");
    snprintf(c->name, sizeof c->name, "%s", next_tok(r));
    snprintf(c->op, sizeof c->op, "%s", next_tok(r));
    c->expect_error = strcmp(next_tok(r), "error") == 0;
    expect_tok(r, "IA");
    c->nia = (int)next_int(r);
    if (c->nia < 0 || c->nia > MAX_ARGS) r->bad = true;
    for (int i = 0; !r->bad && i < c->nia; i++) c->ia[i] = next_int(r);
    expect_tok(r, "FA");
    c->nfa = (int)next_int(r);
    if (c->nfa < 0 || c->nfa > MAX_ARGS) r->bad = true;
    for (int i = 0; !r->bad && i < c->nfa; i++) c->fa[i] = next_double(r);
    expect_tok(r, "SH");
    int nd = (int)next_int(r);
    c->has_sh = nd >= 0;
    if (c->has_sh) c->sh = read_shape(r, nd);
    expect_tok(r, "DT");
    const char *dt = next_tok(r);
    c->has_dt = strcmp(dt, "-") != 0;
    if (c->has_dt && !parse_dtype(dt, &c->dt)) r->bad = true;
    expect_tok(r, "TOL");
    c->tol = next_double(r);
    expect_tok(r, "NIN");
    c->nin = (int)next_int(r);
    if (c->nin < 0 || c->nin > MAX_IN) r->bad = true;
    for (int k = 0; !r->bad && k < c->nin; k++) {
        ref_input *in = &c->in[k];
        expect_tok(r, "IN");
        in->grad = next_int(r) != 0;
        in->nperm = (int)next_int(r);
        if (in->nperm > NB_MAX_DIMS) r->bad = true;
        for (int i = 0; !r->bad && i < in->nperm; i++) in->perm[i] = (int)next_int(r);
        int64_t axis = next_int(r);
        in->has_slice = axis >= 0;
        if (in->has_slice) {
            in->sl[0] = axis;
            for (int i = 1; i < 4; i++) in->sl[i] = next_int(r);
        }
        int end = (int)next_int(r);
        in->has_expand = end >= 0;
        if (in->has_expand) in->expand = read_shape(r, end);
        read_tensor(r, &in->data);
    }
    expect_tok(r, "OUT");
    c->has_out = read_opt_tensor(r, &c->out);
    expect_tok(r, "G");
    c->has_g = read_opt_tensor(r, &c->g);
    for (int k = 0; !r->bad && k < c->nin; k++) {
        expect_tok(r, "GRAD");
        c->has_grad[k] = read_opt_tensor(r, &c->grad[k]);
    }
    expect_tok(r, "END");
}

/* ---- nabla side ---- */

static nb_tensor *make_tensor(const ref_tensor *t) {
    size_t es = nb_dtype_size(t->dtype);
    unsigned char *buf = malloc(es * (size_t)(t->numel ? t->numel : 1));
    if (!buf) return NULL;
    for (int64_t i = 0; i < t->numel; i++) {
        double v = t->v[i];
        void *p = buf + (size_t)i * es;
        switch (t->dtype) {
        case NB_F32: *(float *)p = (float)v; break;
        case NB_F64: *(double *)p = v; break;
        case NB_I64: *(int64_t *)p = (int64_t)v; break;
        case NB_I32: *(int32_t *)p = (int32_t)v; break;
        case NB_U8: *(uint8_t *)p = (uint8_t)v; break;
        case NB_I8: *(int8_t *)p = (int8_t)v; break;
        case NB_BOOL: *(uint8_t *)p = v != 0; break;
        default: free(buf); return NULL;
        }
    }
    nb_tensor *r = nb_from_data(buf, t->shape, t->dtype);
    free(buf);
    return r;
}

/* The tensor's elements (row-major) as doubles; NULL on error. */
static double *read_values(nb_tensor *t) {
    int64_t n = nb_numel(t);
    nb_dtype dt = nb_dtype_of(t);
    size_t es = nb_dtype_size(dt);
    unsigned char *buf = malloc(es * (size_t)(n ? n : 1));
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!buf || !v || nb_copy_to(t, buf, es * (size_t)n) < 0) {
        free(buf);
        free(v);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        const void *p = buf + (size_t)i * es;
        switch (dt) {
        case NB_F32: v[i] = *(const float *)p; break;
        case NB_F64: v[i] = *(const double *)p; break;
        case NB_I64: v[i] = (double)*(const int64_t *)p; break;
        case NB_I32: v[i] = *(const int32_t *)p; break;
        case NB_U8: v[i] = *(const uint8_t *)p; break;
        case NB_I8: v[i] = *(const int8_t *)p; break;
        case NB_BOOL: v[i] = *(const uint8_t *)p != 0; break;
        default: free(buf); free(v); return NULL;
        }
    }
    free(buf);
    return v;
}

static nb_tensor *run_op(const ref_case *c, nb_tensor **x) {
    const char *op = c->op;
    const int64_t *ia = c->ia;
    const double *fa = c->fa;
#define IS(s) (strcmp(op, s) == 0)
    if (IS("add")) return nb_add(x[0], x[1]);
    if (IS("sub")) return nb_sub(x[0], x[1]);
    if (IS("mul")) return nb_mul(x[0], x[1]);
    if (IS("div")) return nb_div(x[0], x[1]);
    if (IS("pow")) return nb_pow(x[0], x[1]);
    if (IS("maximum")) return nb_maximum(x[0], x[1]);
    if (IS("minimum")) return nb_minimum(x[0], x[1]);
    if (IS("eq")) return nb_eq(x[0], x[1]);
    if (IS("lt")) return nb_lt(x[0], x[1]);
    if (IS("gt")) return nb_gt(x[0], x[1]);
    if (IS("where")) return nb_where(x[0], x[1], x[2]);
    if (IS("add_scalar")) return nb_add_scalar(x[0], fa[0]);
    if (IS("mul_scalar")) return nb_mul_scalar(x[0], fa[0]);
    if (IS("pow_scalar")) return nb_pow_scalar(x[0], fa[0]);
    if (IS("neg")) return nb_neg(x[0]);
    if (IS("exp")) return nb_exp(x[0]);
    if (IS("log")) return nb_log(x[0]);
    if (IS("sqrt")) return nb_sqrt(x[0]);
    if (IS("abs")) return nb_abs(x[0]);
    if (IS("tanh")) return nb_tanh(x[0]);
    if (IS("sigmoid")) return nb_sigmoid(x[0]);
    if (IS("relu")) return nb_relu(x[0]);
    if (IS("gelu")) return nb_gelu(x[0]);
    if (IS("erf")) return nb_erf(x[0]);
    if (IS("sign")) return nb_sign(x[0]);
    if (IS("sin")) return nb_sin(x[0]);
    if (IS("cos")) return nb_cos(x[0]);
    if (IS("log1p")) return nb_log1p(x[0]);
    if (IS("expm1")) return nb_expm1(x[0]);
    if (IS("reciprocal")) return nb_reciprocal(x[0]);
    if (IS("rsqrt")) return nb_rsqrt(x[0]);
    if (IS("floor")) return nb_floor(x[0]);
    if (IS("ceil")) return nb_ceil(x[0]);
    if (IS("round")) return nb_round(x[0]);
    if (IS("trunc")) return nb_trunc(x[0]);
    if (IS("clamp")) return nb_clamp(x[0], fa[0], fa[1]);
    if (IS("matmul")) return nb_matmul(x[0], x[1]);
    if (IS("matmul_autocast")) {
        nb_dtype prev = nb_autocast(NB_BF16);
        nb_tensor *r = nb_matmul(x[0], x[1]);
        nb_autocast(prev);
        return r;
    }
    if (IS("sum")) return nb_sum(x[0], (int)ia[0], ia[1] != 0);
    if (IS("mean")) return nb_mean(x[0], (int)ia[0], ia[1] != 0);
    if (IS("max")) return nb_max(x[0], (int)ia[0], ia[1] != 0);
    if (IS("min")) return nb_min(x[0], (int)ia[0], ia[1] != 0);
    if (IS("argmax")) return nb_argmax(x[0], (int)ia[0], ia[1] != 0);
    if (IS("argmin")) return nb_argmin(x[0], (int)ia[0], ia[1] != 0);
    if (IS("logsumexp")) return nb_logsumexp(x[0], (int)ia[0], ia[1] != 0);
    if (IS("var")) return nb_var(x[0], (int)ia[0], ia[1] != 0);
    if (IS("sum_all")) return nb_sum_all(x[0]);
    if (IS("mean_all")) return nb_mean_all(x[0]);
    if (IS("sum_to")) return nb_sum_to(x[0], c->sh);
    if (IS("softmax")) return nb_softmax(x[0], (int)ia[0]);
    if (IS("log_softmax")) return nb_log_softmax(x[0], (int)ia[0]);
    if (IS("reshape")) return nb_reshape(x[0], c->sh);
    if (IS("view")) return nb_view(x[0], c->sh);
    if (IS("transpose")) return nb_transpose(x[0], (int)ia[0], (int)ia[1]);
    if (IS("permute")) {
        int perm[NB_MAX_DIMS];
        for (int i = 0; i < c->nia; i++) perm[i] = (int)ia[i];
        return nb_permute(x[0], perm);
    }
    if (IS("expand")) return nb_expand(x[0], c->sh);
    if (IS("squeeze")) return nb_squeeze(x[0], (int)ia[0]);
    if (IS("unsqueeze")) return nb_unsqueeze(x[0], (int)ia[0]);
    if (IS("flatten")) return nb_flatten(x[0], (int)ia[0], (int)ia[1]);
    if (IS("slice")) return nb_slice(x[0], (int)ia[0], ia[1], ia[2], ia[3]);
    if (IS("cat")) return nb_cat(x, c->nin, (int)ia[0]);
    if (IS("stack")) return nb_stack(x, c->nin, (int)ia[0]);
    if (IS("index_select")) return nb_index_select(x[0], (int)ia[0], x[1]);
    if (IS("gather")) return nb_gather(x[0], (int)ia[0], x[1]);
    if (IS("embedding")) return nb_embedding(x[0], x[1]);
    if (IS("contiguous")) return nb_contiguous(x[0]);
    if (IS("clone")) return nb_clone(x[0]);
    if (IS("detach")) return nb_detach(x[0]);
    if (IS("cast")) return nb_cast(x[0], c->dt);
    if (IS("linear")) return nb_linear(x[0], x[1], c->nin > 2 ? x[2] : NULL);
    if (IS("ne")) return nb_ne(x[0], x[1]);
    if (IS("le")) return nb_le(x[0], x[1]);
    if (IS("ge")) return nb_ge(x[0], x[1]);
    if (IS("logical_and")) return nb_logical_and(x[0], x[1]);
    if (IS("logical_or")) return nb_logical_or(x[0], x[1]);
    if (IS("logical_xor")) return nb_logical_xor(x[0], x[1]);
    if (IS("logical_not")) return nb_logical_not(x[0]);
    if (IS("isnan")) return nb_isnan(x[0]);
    if (IS("isinf")) return nb_isinf(x[0]);
    if (IS("isfinite")) return nb_isfinite(x[0]);
    if (IS("nan_to_num")) return nb_nan_to_num(x[0], fa[0], fa[1], fa[2]);
    if (IS("masked_fill")) return nb_masked_fill(x[0], x[1], fa[0]);
    if (IS("masked_select")) return nb_masked_select(x[0], x[1]);
    if (IS("any")) return nb_any(x[0], (int)ia[0], ia[1] != 0);
    if (IS("all")) return nb_all(x[0], (int)ia[0], ia[1] != 0);
    if (IS("prod")) return nb_prod(x[0], (int)ia[0], ia[1] != 0);
    if (IS("cumsum")) return nb_cumsum(x[0], (int)ia[0]);
    if (IS("cumprod")) return nb_cumprod(x[0], (int)ia[0]);
    if (IS("amax")) return nb_amax(x[0], (int)ia[0], ia[1] != 0);
    if (IS("amin")) return nb_amin(x[0], (int)ia[0], ia[1] != 0);
    if (IS("std")) return nb_std(x[0], (int)ia[0], ia[1] != 0);
    if (IS("norm")) return nb_norm(x[0], fa[0], (int)ia[0], ia[1] != 0);
    if (IS("norm_all")) return nb_norm_all(x[0], fa[0]);
    if (IS("argsort")) return nb_argsort(x[0], (int)ia[0], ia[1] != 0);
    if (IS("sort") || IS("sort_indices")) {
        nb_tensor *idx = NULL, *v = nb_sort(x[0], (int)ia[0], ia[1] != 0, &idx);
        return IS("sort") ? v : idx;
    }
    if (IS("topk") || IS("topk_indices")) {
        nb_tensor *idx = NULL, *v = nb_topk(x[0], ia[0], (int)ia[1], ia[2] != 0, &idx);
        return IS("topk") ? v : idx;
    }
    if (IS("flip")) {
        int axes[MAX_ARGS];
        for (int i = 0; i < c->nia; i++) axes[i] = (int)ia[i];
        return nb_flip(x[0], axes, c->nia);
    }
    if (IS("roll")) return nb_roll(x[0], ia[0], (int)ia[1]);
    if (IS("repeat")) return nb_repeat(x[0], ia, c->nia);
    if (IS("tile")) return nb_tile(x[0], ia, c->nia);
    if (IS("split") || IS("chunk")) {
        nb_tensor *pieces[16];
        int n = IS("split") ? nb_split(x[0], ia[0], (int)ia[1], pieces, 16) : nb_chunk(x[0], (int)ia[0], (int)ia[1], pieces, 16);
        return n > ia[2] ? pieces[ia[2]] : NULL;
    }
    if (IS("pad")) return nb_pad(x[0], ia + 1, c->nia - 1, (nb_pad_mode)ia[0], fa[0]);
    if (IS("tril")) return nb_tril(x[0], ia[0]);
    if (IS("triu")) return nb_triu(x[0], ia[0]);
    if (IS("diagonal")) return nb_diagonal(x[0], ia[0], (int)ia[1], (int)ia[2]);
    if (IS("eye")) return nb_eye(ia[0], ia[1], c->dt);
    if (IS("linspace")) return nb_linspace(fa[0], fa[1], ia[0], c->dt);
    if (IS("one_hot")) return nb_one_hot(x[0], ia[0]);
    if (IS("index")) return nb_index(x[0], x + 1, c->nin - 1);
    if (IS("index_put")) return nb_index_put(x[0], x + 2, c->nin - 2, x[1], ia[0] != 0);
    if (IS("masked_scatter")) return nb_masked_scatter(x[0], x[1], x[2]);
#undef IS
    return NULL;
}

static int n_noncontig_inputs, n_backward_cases;

/* Compares a nabla tensor with a reference; prints what differs and returns false. */
static bool compare(const ref_case *c, const char *what, nb_tensor *got, const ref_tensor *want) {
    char gs[128], ws[128];
    if (!got) {
        print_error("%s (%s): %s is missing%s%s\n", c->name, c->op, what, nb_error() ? ": " : "",
                    nb_error() ? nb_error() : "");
        return false;
    }
    if (nb_dtype_of(got) != want->dtype) {
        print_error("%s (%s): %s dtype is %s, torch gives %s\n", c->name, c->op, what, nb_dtype_name(nb_dtype_of(got)),
                    nb_dtype_name(want->dtype));
        return false;
    }
    nb_shape s = nb_shape_of(got);
    bool same = s.ndim == want->shape.ndim;
    for (int i = 0; same && i < s.ndim; i++) same = s.dim[i] == want->shape.dim[i];
    if (!same) {
        print_error("%s (%s): %s shape is %s, torch gives %s\n", c->name, c->op, what, nb_shape_str(s, gs, sizeof gs),
                    nb_shape_str(want->shape, ws, sizeof ws));
        return false;
    }
    double *v = read_values(got);
    if (!v) {
        print_error("%s (%s): cannot read %s: %s\n", c->name, c->op, what, nb_error() ? nb_error() : "?");
        return false;
    }
    bool is_float = want->dtype == NB_F32 || want->dtype == NB_F64;
    double rtol = 0, atol = 0;
    if (want->dtype == NB_F32) rtol = 1e-5 * c->tol, atol = 1e-6 * c->tol;
    if (want->dtype == NB_F64) rtol = 1e-10 * c->tol, atol = 1e-12 * c->tol;
    double max_err = 0, worst_ratio = 0;
    int64_t worst = -1, bad = 0;
    for (int64_t i = 0; i < want->numel; i++) {
        double a = v[i], b = want->v[i];
        double err;
        if (isnan(a) || isnan(b)) err = isnan(a) && isnan(b) ? 0 : INFINITY;
        else if (isinf(a) || isinf(b)) err = a == b ? 0 : INFINITY;
        else err = fabs(a - b);
        double limit = is_float ? atol + rtol * fabs(b) : 0;
        if (err > max_err) max_err = err;
        double ratio = err == 0 ? 0 : (limit > 0 ? err / limit : INFINITY);
        if (err > limit) bad++;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    bool ok = bad == 0;
    if (!ok)
        print_error("%s (%s): %s differs from torch at %lld of %lld elements: max abs error %.3g; worst at flat index "
                    "%lld: nabla %.10g, torch %.10g (rtol %.1g, atol %.1g)\n",
                    c->name, c->op, what, (long long)bad, (long long)want->numel, max_err, (long long)worst, v[worst],
                    want->v[worst], rtol, atol);
    free(v);
    return ok;
}

static void test_case(void **state) {
    const ref_case *c = *state;
    bool ok = true;
    nb_error_clear();
    size_t used_before, used_after;
    nb_memory_stats(NULL, &used_before, NULL);
    nb_scope *scope = nb_scope_begin();
    nb_tensor *leaf[MAX_IN] = { 0 }, *x[MAX_IN] = { 0 };
    for (int k = 0; k < c->nin; k++) {
        const ref_input *in = &c->in[k];
        leaf[k] = make_tensor(&in->data);
        if (leaf[k] && in->grad) nb_set_requires_grad(leaf[k], true);
        nb_tensor *v = leaf[k];
        if (in->nperm >= 0) v = nb_permute(v, in->perm);
        if (in->has_slice) v = nb_slice(v, (int)in->sl[0], in->sl[1], in->sl[2], in->sl[3]);
        if (in->has_expand) v = nb_expand(v, in->expand);
        if (!v) {
            print_error("%s: building input %d failed: %s\n", c->name, k, nb_error() ? nb_error() : "?");
            ok = false;
        } else if (!nb_is_contiguous(v)) n_noncontig_inputs++;
        x[k] = v;
    }
    if (ok && c->expect_error) {
        nb_tensor *out = run_op(c, x);
        if (out || !nb_error()) {
            print_error("%s (%s): expected an error as torch raises one, got %s\n", c->name, c->op,
                        out ? "a result" : "NULL without a message");
            ok = false;
        } else if (strncmp(nb_error(), "nb_", 3) != 0) {
            print_error("%s (%s): error message does not name the function: %s\n", c->name, c->op, nb_error());
            ok = false;
        }
    } else if (ok) {
        op_coverage_begin(); /* the ops that make compared outputs and gradients */
        nb_tensor *out = run_op(c, x);
        op_coverage_end();
        ok = compare(c, "output", out, &c->out);
        if (ok && c->has_g) {
            n_backward_cases++;
            nb_tensor *g = make_tensor(&c->g);
            if (c->strided_g && c->g.shape.ndim >= 2) {
                /* every other case seeds the backward with a non-contiguous g (same values) */
                int rev[NB_MAX_DIMS];
                for (int i = 0; i < c->g.shape.ndim; i++) rev[i] = c->g.shape.ndim - 1 - i;
                g = nb_permute(nb_contiguous(nb_permute(g, rev)), rev);
            }
            op_coverage_begin();
            int rc = nb_backward_with(out, g);
            op_coverage_end();
            if (rc < 0) {
                print_error("%s (%s): nb_backward_with failed (%d): %s\n", c->name, c->op, rc, nb_error() ? nb_error() : "?");
                ok = false;
            }
            for (int k = 0; ok && k < c->nin; k++) {
                char what[32];
                snprintf(what, sizeof what, "grad of input %d", k);
                nb_tensor *gr = nb_grad_of(leaf[k]);
                if (c->has_grad[k]) ok = compare(c, what, gr, &c->grad[k]) && ok;
                else if (gr) {
                    print_error("%s (%s): input %d has a gradient, torch gives none\n", c->name, c->op, k);
                    ok = false;
                }
            }
        } else if (ok && out && nb_requires_grad(out) && !c->has_g) {
            /* torch's result does not require grad (comparisons, argmax, detach, sign, ...) */
            bool any = false;
            for (int k = 0; k < c->nin; k++) any = any || c->in[k].grad;
            if (any && strcmp(c->op, "sign") != 0) {
                print_error("%s (%s): the result requires grad, torch's does not\n", c->name, c->op);
                ok = false;
            }
        }
    }
    nb_scope_end(scope);
    nb_memory_stats(NULL, &used_after, NULL);
    if (used_after != used_before) {
        /* every tensor of the case belonged to its scope: its end must free them all */
        print_error("%s (%s): %zu bytes still in use after the case's scope ended (%zu before)\n", c->name, c->op,
                    used_after, used_before);
        ok = false;
    }
    if (!ok)
        fail_msg("%s: mismatch with torch (see above)%s", c->name,
                 c->strided_g && c->has_g && c->g.shape.ndim >= 2 ? "; g was a transposed view" : "");
    nb_error_clear();
}

/* ---- fixed cases, beside the reference file (which carries values as doubles, so cannot
   hold int64 values beyond 2^53): each expected value is what torch 1.13 gives ---- */

static void expect_i64(const char *what, nb_tensor *t, const int64_t *want, int64_t n) {
    if (!t) fail_msg("%s: no result: %s", what, nb_error() ? nb_error() : "(no error)");
    if (nb_dtype_of(t) != NB_I64) fail_msg("%s: dtype %s, torch gives i64", what, nb_dtype_name(nb_dtype_of(t)));
    if (nb_numel(t) != n) fail_msg("%s: %lld elements, want %lld", what, (long long)nb_numel(t), (long long)n);
    int64_t got[8];
    assert_true(n <= 8);
    assert_int_equal(nb_copy_to(t, got, sizeof(int64_t) * (size_t)n), 0);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s: element %lld is %lld, torch gives %lld", what, (long long)i, (long long)got[i], (long long)want[i]);
}

/* i64 arithmetic wraps around as torch's does (two's complement), and without undefined
   behaviour: the sanitizer build (UBSan fatal) runs this too. */
static void test_int64_wraps(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    const int64_t M = INT64_MAX, m = INT64_MIN;
    const int64_t av[] = { M, m, M, 3, m }, bv[] = { 1, -1, M, M, m };
    nb_tensor *a = nb_from_data(av, NB_SHAPE(5), NB_I64), *b = nb_from_data(bv, NB_SHAPE(5), NB_I64);
    expect_i64("add", nb_add(a, b), (int64_t[]){ m, M, -2, m + 2, 0 }, 5);
    expect_i64("sub", nb_sub(a, b), (int64_t[]){ M - 1, m + 1, 0, -(M - 3), 0 }, 5);
    expect_i64("mul", nb_mul(a, b), (int64_t[]){ M, m, 1, M - 2, 0 }, 5);
    expect_i64("neg", nb_neg(a), (int64_t[]){ -M, m, -M, -3, m }, 5);
    expect_i64("abs", nb_abs(a), (int64_t[]){ M, m, M, 3, m }, 5);
    /* strided and broadcast operands take the kernels' other loops */
    expect_i64("add bcast", nb_add(a, nb_full(NB_SHAPE(), 1, NB_I64)), (int64_t[]){ m, m + 1, m, 4, m + 1 }, 5);
    expect_i64("add strided", nb_add(nb_slice(a, 0, 0, 5, 2), nb_slice(b, 0, 0, 5, 2)), (int64_t[]){ m, -2, 0 }, 3);
    expect_i64("add_scalar", nb_add_scalar(nb_slice(a, 0, 0, 1, 1), 5), (int64_t[]){ m + 4 }, 1);
    expect_i64("mul_scalar", nb_mul_scalar(nb_slice(a, 0, 0, 1, 1), 2), (int64_t[]){ -2 }, 1);
    /* sums: short, and long enough for the chunked path */
    expect_i64("sum_all", nb_sum_all(nb_from_data((int64_t[]){ M, 1, 1 }, NB_SHAPE(3), NB_I64)), (int64_t[]){ m + 1 }, 1);
    expect_i64("sum axis", nb_sum(nb_from_data((int64_t[]){ M, M, M }, NB_SHAPE(1, 3), NB_I64), 1, false),
               (int64_t[]){ M - 2 }, 1);
    expect_i64("sum long", nb_sum_all(nb_full(NB_SHAPE(40000), (double)M, NB_I64)), (int64_t[]){ -40000 }, 1);
    expect_i64("matmul", nb_matmul(nb_from_data((int64_t[]){ M, 2 }, NB_SHAPE(1, 2), NB_I64),
                                   nb_from_data((int64_t[]){ 2, M }, NB_SHAPE(2, 1), NB_I64)), (int64_t[]){ -4 }, 1);
    /* running sums and products, and prod (made of cumprod) */
    expect_i64("cumsum", nb_cumsum(nb_from_data((int64_t[]){ M, 1, 1, M }, NB_SHAPE(4), NB_I64), 0),
               (int64_t[]){ M, m, m + 1, 0 }, 4);
    const int64_t pv[] = { (int64_t)1 << 62, 4, 3, -1 };
    expect_i64("cumprod", nb_cumprod(nb_from_data(pv, NB_SHAPE(4), NB_I64), 0), (int64_t[]){ (int64_t)1 << 62, 0, 0, 0 }, 4);
    expect_i64("cumprod signs", nb_cumprod(nb_from_data((int64_t[]){ M, 3, m }, NB_SHAPE(3), NB_I64), 0),
               (int64_t[]){ M, M - 2, m }, 3);
    expect_i64("prod", nb_prod(nb_from_data((int64_t[]){ M, M, 2, m }, NB_SHAPE(2, 2), NB_I64), 1, false),
               (int64_t[]){ 1, 0 }, 2);
    /* i32 wraps at its own width */
    int32_t big = INT32_MAX;
    nb_tensor *c = nb_from_data(&big, NB_SHAPE(1), NB_I32);
    int32_t got[2];
    nb_copy_to(nb_add(c, c), got, sizeof(int32_t));
    nb_copy_to(nb_mul(c, nb_from_data((int32_t[]){ 3 }, NB_SHAPE(1), NB_I32)), got + 1, sizeof(int32_t));
    assert_int_equal(got[0], -2);
    assert_int_equal(got[1], 2147483645);
    assert_null(nb_error());
    nb_scope_end(s);
}

static int clear_error(void **state) {
    (void)state;
    nb_error_clear();
    return 0;
}

static int run_fixed_tests(void) {
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test_setup(test_int64_wraps, clear_error),
    };
    return cmocka_run_group_tests_name("ops_fixed", fixed, NULL, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s REFERENCE_FILE [NAME_SUBSTRING]\n", argv[0]);
        return 1;
    }
    char *text = read_whole_file(argv[1]);
    if (!text) {
        fprintf(stderr, "test_ops_torch: cannot read the PyTorch reference %s; it is written by tests/torch_ref.py, "
                        "which needs /usr/bin/python3 with torch (Debian: apt-get install python3-torch)\n", argv[1]);
        return 1;
    }
    reader r = { text, argv[1], false };
    expect_tok(&r, "NCASES");
    int64_t n = next_int(&r);
    if (r.bad || n <= 0 || n > 100000) {
        fprintf(stderr, "test_ops_torch: %s is not a reference file\n", argv[1]);
        return 1;
    }
    ref_case *cases = calloc((size_t)n, sizeof *cases);
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    if (!cases || !tests) return 1;
    size_t nt = 0;
    for (int64_t i = 0; i < n && !r.bad; i++) {
        read_case(&r, &cases[i]);
        cases[i].strided_g = i % 2 == 1;
        if (r.bad) {
            fprintf(stderr, "test_ops_torch: %s: malformed case %lld (%s)\n", argv[1], (long long)i, cases[i].name);
            return 1;
        }
        if (argc > 2 && !strstr(cases[i].name, argv[2])) continue;
        tests[nt++] = (struct CMUnitTest){ cases[i].name, test_case, NULL, NULL, &cases[i] };
    }
    if (nt == 0) {
        fprintf(stderr, "test_ops_torch: no case matches\n");
        return 1;
    }
    /* warm up: the first scope and backward allocate per-thread state that stays, so the
       per-case check of bytes in use starts from there */
    nb_scope *warm = nb_scope_begin();
    nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(2), NB_F32), true);
    nb_backward(nb_sum_all(nb_mul(w, w)));
    nb_scope_end(warm);
    nb_error_clear();
    int failed = _cmocka_run_group_tests("ops_vs_torch", tests, nt, NULL, NULL);
    if (argc <= 2) failed += run_fixed_tests();
    if (argc <= 2 && op_coverage_write() < 0) failed++;
    printf("test_ops_torch: %zu cases (%d with a backward), %d non-contiguous inputs, %d failed\n", nt, n_backward_cases,
           n_noncontig_inputs, failed);
    for (int64_t i = 0; i < n; i++) {
        free(cases[i].out.v);
        free(cases[i].g.v);
        for (int k = 0; k < cases[i].nin; k++) {
            free(cases[i].in[k].data.v);
            free(cases[i].grad[k].v);
        }
    }
    free(cases);
    free(tests);
    free(text);
    return failed ? 1 : 0;
}
