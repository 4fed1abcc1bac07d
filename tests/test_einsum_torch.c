/* nb_einsum against torch.einsum (the reference from tests/einsum_ref.py, given as argv[1]):
   values and the gradients of every float input for each equation there, on contiguous and
   transposed (non-contiguous) inputs; the greedy contraction order (the path taken, and a chain
   whose left-to-right order would make a 64 MB intermediate run in a fraction of that); and
   the errors of bad equations. */
#include "test_util.h"
#include "../src/ops/einsum.h"

static const char *ref_path;
static double worst_seen[3]; /* the worst error of worst_error over f64, f32 and i64 results */

enum { MAX_OPS = 8 };

/* The reference's next whitespace-separated word, copied into buf; false at the end of the line. */
static bool word(const char **p, char *buf, size_t size) {
    while (**p == ' ') (*p)++;
    if (!**p || **p == '\n') return false;
    size_t n = 0;
    while (**p && **p != ' ' && **p != '\n') {
        if (n + 1 < size) buf[n++] = **p;
        (*p)++;
    }
    buf[n] = 0;
    return true;
}

static double number(const char **p) {
    char *end;
    double v = strtod(*p, &end);
    if (end == *p) fail_msg("expected a number at \"%.20s\"", *p);
    *p = end;
    return v;
}

static void next_line(const char **p) {
    while (**p && **p != '\n') (*p)++;
    if (**p) (*p)++;
}

static nb_dtype dtype_named(const char *s) {
    if (!strcmp(s, "f32")) return NB_F32;
    if (!strcmp(s, "f64")) return NB_F64;
    if (!strcmp(s, "i64")) return NB_I64;
    fail_msg("unknown dtype %s", s);
    return NB_F32;
}

/* n numbers of the line as a tensor of shape (read as f64, then cast) */
static nb_tensor *read_values(const char **p, nb_shape shape, nb_dtype dtype) {
    int64_t n = 1;
    for (int d = 0; d < shape.ndim; d++) n *= shape.dim[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = number(p);
    nb_tensor *t = nb_cast(nb_from_data(v, shape, NB_F64), dtype);
    free(v);
    return t;
}

static nb_shape read_shape(const char **p) {
    nb_shape s = { (int)number(p), { 0 } };
    for (int d = 0; d < s.ndim; d++) s.dim[d] = (int64_t)number(p);
    return s;
}

/* How far got is from want, relative to the larger of |want| and want's root mean square (and 1),
   so that an element that cancels to near zero is held to its terms' scale; the worst over all
   elements, or INFINITY when the shapes differ. */
static double worst_error(nb_tensor *got, nb_tensor *want) {
    if (!got) return INFINITY;
    nb_shape a = nb_shape_of(got), b = nb_shape_of(want);
    if (a.ndim != b.ndim) return INFINITY;
    for (int d = 0; d < a.ndim; d++)
        if (a.dim[d] != b.dim[d]) return INFINITY;
    int64_t n = nb_numel(want);
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1)), *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double worst = 0, rms = 0;
    if (nb_copy_to(nb_cast(got, NB_F64), x, sizeof(double) * (size_t)n) < 0 ||
        nb_copy_to(nb_cast(want, NB_F64), y, sizeof(double) * (size_t)n) < 0)
        worst = INFINITY;
    for (int64_t i = 0; i < n && worst < INFINITY; i++) rms += y[i] * y[i] / (double)n;
    rms = sqrt(rms);
    for (int64_t i = 0; i < n && worst < INFINITY; i++) {
        double e = fabs(x[i] - y[i]) / fmax(fmax(fabs(y[i]), rms), 1.0);
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    free(x);
    free(y);
    int di = nb_dtype_of(want) == NB_F64 ? 0 : nb_dtype_of(want) == NB_F32 ? 1 : 2;
    if (worst > worst_seen[di]) worst_seen[di] = worst;
    return worst;
}


static double tolerance(nb_dtype dtype) { return dtype == NB_F64 ? 1e-10 : dtype == NB_F32 ? 1e-5 : 0; }

/* Runs one case block (the "case" line already read); the number of mismatches, each printed. */
static int run_case(const char **p, const char *name, int nops) {
    int bad = 0;
    char w[64], eq[256] = "";
    nb_tensor *leaf[MAX_OPS] = { 0 }, *operand[MAX_OPS] = { 0 }, *want = NULL, *up = NULL, *out = NULL;
    nb_dtype out_dtype = NB_F32;
    assert_true(nops >= 1 && nops <= MAX_OPS);
    nb_scope *s = nb_scope_begin();
    for (;;) {
        assert_true(word(p, w, sizeof w));
        if (!strcmp(w, "end")) break;
        if (!strcmp(w, "eq")) {
            (*p)++; /* the one space after "eq" */
            size_t n = 0;
            while (**p && **p != '\n' && n + 1 < sizeof eq) eq[n++] = *(*p)++;
            eq[n] = 0;
        } else if (!strcmp(w, "in")) {
            int k = (int)number(p);
            assert_true(k >= 0 && k < nops && word(p, w, sizeof w));
            nb_dtype dt = dtype_named(w);
            bool transposed = number(p) != 0;
            nb_shape shape = read_shape(p);
            leaf[k] = read_values(p, shape, dt);
            if (dt != NB_I64) nb_set_requires_grad(leaf[k], true);
            operand[k] = transposed ? nb_transpose(leaf[k], -1, -2) : leaf[k];
        } else if (!strcmp(w, "out")) {
            assert_true(word(p, w, sizeof w));
            out_dtype = dtype_named(w);
            want = read_values(p, read_shape(p), out_dtype);
            out = nb_einsum(eq, operand, nops);
            if (!out) {
                printf("%s \"%s\": %s\n", name, eq, nb_error() ? nb_error() : "(no error)");
                nb_error_clear();
                bad++;
            } else if (nb_dtype_of(out) != out_dtype) {
                printf("%s \"%s\": dtype %s, torch gives %s\n", name, eq, nb_dtype_name(nb_dtype_of(out)), nb_dtype_name(out_dtype));
                bad++;
            } else if (worst_error(out, want) > tolerance(out_dtype)) {
                printf("%s \"%s\": the values differ by %g relative\n", name, eq, worst_error(out, want));
                bad++;
            }
        } else if (!strcmp(w, "up")) {
            up = read_values(p, nb_shape_of(want), out_dtype);
            if (out && nb_backward(nb_sum_all(nb_mul(out, up))) < 0) {
                printf("%s \"%s\": backward: %s\n", name, eq, nb_error());
                nb_error_clear();
                bad++;
            }
        } else if (!strcmp(w, "grad")) {
            int k = (int)number(p);
            assert_true(k >= 0 && k < nops && leaf[k]);
            nb_tensor *g = read_values(p, nb_shape_of(leaf[k]), nb_dtype_of(leaf[k]));
            double e = out ? worst_error(nb_grad_of(leaf[k]), g) : 0;
            if (e > tolerance(nb_dtype_of(leaf[k]))) {
                printf("%s \"%s\": the gradient of operand %d differs by %g relative\n", name, eq, k, e);
                bad++;
            }
        } else {
            fail_msg("unknown record %s in case %s", w, name);
        }
        next_line(p);
    }
    next_line(p);
    (void)up;
    nb_scope_end(s);
    return bad;
}

static void test_against_torch(void **state) {
    (void)state;
    char *text = read_whole_file(ref_path);
    if (!text) fail_msg("cannot read the reference %s (tests/einsum_ref.py writes it)", ref_path ? ref_path : "(none given)");
    const char *p = text;
    int cases = 0, bad = 0, transposed = 0, three_plus = 0;
    char w[64], name[64];
    while (word(&p, w, sizeof w)) {
        assert_string_equal(w, "case");
        assert_true(word(&p, name, sizeof name));
        int nops = (int)number(&p);
        next_line(&p);
        bad += run_case(&p, name, nops);
        cases++;
        transposed += strstr(name, "noncontig") != NULL;
        three_plus += nops >= 3;
    }
    free(text);
    printf("%d einsum cases against torch (%d with transposed inputs, %d with 3+ operands), %d mismatches\n", cases,
           transposed, three_plus, bad);
    printf("worst relative errors: f64 %g, f32 %g, i64 %g\n", worst_seen[0], worst_seen[1], worst_seen[2]);
    assert_true(cases >= 40);
    assert_int_equal(bad, 0);
}

/* The path taken: the pair with the smallest result first, not left to right. */
static void test_greedy_path(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    int path[6];
    /* (jk, kl) makes [2, 3]; (ij, jk) would make [30, 30] */
    nb_tensor *c3[3] = { nb_randn(NB_SHAPE(30, 2), NB_F64), nb_randn(NB_SHAPE(2, 30), NB_F64),
                         nb_randn(NB_SHAPE(30, 3), NB_F64) };
    nb_tensor *r = nb__einsum_path("ij,jk,kl->il", c3, 3, path);
    assert_non_null(r);
    assert_int_equal(path[0], 1);
    assert_int_equal(path[1], 2);
    assert_int_equal(path[2], 0);
    assert_int_equal(path[3], 1);
    assert_true(worst_error(r, nb_matmul(c3[0], nb_matmul(c3[1], c3[2]))) < 1e-12);
    /* (bc, cd) makes [40, 2]; then (ab, bd) [40, 2]; then (de, ad) */
    nb_tensor *c4[4] = { nb_randn(NB_SHAPE(40, 40), NB_F64), nb_randn(NB_SHAPE(40, 40), NB_F64),
                         nb_randn(NB_SHAPE(40, 2), NB_F64), nb_randn(NB_SHAPE(2, 40), NB_F64) };
    r = nb__einsum_path("ab,bc,cd,de->ae", c4, 4, path);
    assert_non_null(r);
    const int want[6] = { 1, 2, 0, 2, 0, 1 };
    for (int i = 0; i < 6; i++) assert_int_equal(path[i], want[i]);
    nb_tensor *ref = nb_matmul(nb_matmul(c4[0], nb_matmul(c4[1], c4[2])), c4[3]);
    assert_true(worst_error(r, ref) < 1e-10);
    /* nb_einsum itself takes the same path: the same bits */
    assert_true(worst_error(nb_einsum("ab,bc,cd,de->ae", c4, 4), r) == 0);
    nb_scope_end(s);
}

/* A chain whose left-to-right order makes a [4000, 4000] f32 intermediate (64 MB) runs in a
   fraction of that: the allocator holds less than 8 MB more after it (its cache keeps what
   was freed, so the bytes held bound the peak). */
static void test_greedy_memory(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *ops[3] = { nb_randn(NB_SHAPE(4000, 2), NB_F32), nb_randn(NB_SHAPE(2, 4000), NB_F32),
                          nb_randn(NB_SHAPE(4000, 2), NB_F32) };
    nb_tensor *ref = nb_matmul(ops[0], nb_matmul(ops[1], ops[2]));
    nb_empty_cache();
    size_t held0, held1, used;
    uint64_t allocs;
    nb_memory_stats(&held0, &used, &allocs);
    nb_tensor *r = nb_einsum("ij,jk,kl->il", ops, 3);
    nb_memory_stats(&held1, &used, &allocs);
    assert_non_null(r);
    printf("held %zu bytes more after the chain\n", held1 - held0);
    assert_true(held1 - held0 < (size_t)8 << 20);
    assert_true(worst_error(r, ref) < 1e-5);
    nb_scope_end(s);
}

/* Outside a scope the caller owns the result, a new tensor even when no op was needed. */
static void test_ownership(void **state) {
    (void)state;
    nb_tensor *a = nb_randn(NB_SHAPE(3, 4), NB_F32);
    nb_tensor *r = nb_einsum("ij->ij", &a, 1);
    assert_non_null(r);
    assert_true(r != a);
    nb_release(r);
    nb_tensor *b = nb_randn(NB_SHAPE(4, 5), NB_F32), *ab[2] = { a, b };
    r = nb_einsum("ij,jk", ab, 2);
    assert_non_null(r);
    nb_release(r);
    assert_int_equal(nb_numel(a), 12);
    nb_release(a);
    nb_release(b);
}

static void expect_error(nb_tensor *t, const char *needle) {
    assert_null(t);
    const char *e = nb_error();
    if (!e || !strstr(e, needle)) fail_msg("error \"%s\" does not mention \"%s\"", e ? e : "(none)", needle);
    nb_error_clear();
}

static void test_errors(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *m34 = nb_randn(NB_SHAPE(3, 4), NB_F32), *m56 = nb_randn(NB_SHAPE(5, 6), NB_F32);
    nb_tensor *m33 = nb_randn(NB_SHAPE(3, 3), NB_F32), *m23 = nb_randn(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *two[2] = { m34, m56 }, *ell[2] = { m23, m33 }, *null2[2] = { m34, NULL };
    expect_error(nb_einsum("ij,jk->ik", &m34, 1), "\"ij,jk->ik\": the subscripts name 2 operands but 1 was given");
    expect_error(nb_einsum("ij", two, 2), "name 1 operand but 2 were given");
    expect_error(nb_einsum("ij->i#", &m34, 1), "the output subscripts have '#', which is not a letter");
    expect_error(nb_einsum("i1->i", &m34, 1), "the subscripts of operand 0 have '1'");
    expect_error(nb_einsum("ij-i", &m34, 1), "have '-'");
    expect_error(nb_einsum("i.j->i", &m34, 1), "a '.' outside an ellipsis");
    expect_error(nb_einsum("...i...->i", &m34, 1), "more than one ellipsis");
    expect_error(nb_einsum("ij->ij->ij", &m34, 1), "more than one '->'");
    expect_error(nb_einsum("ij->k", &m34, 1), "output subscript 'k' appears in no operand");
    expect_error(nb_einsum("ij->ii", &m34, 1), "output subscript 'i' appears more than once");
    expect_error(nb_einsum("ij,jk->ik", two, 2),
                 "\"ij,jk->ik\": subscript 'j' has size 4 in operand 0 but 5 in operand 1 (sizes must match or be 1)");
    expect_error(nb_einsum("...i,...i", ell, 2), "dimension 0 of the ellipsis has size 2 in operand 0 but 3 in operand 1");
    expect_error(nb_einsum("ii->i", &m34, 1), "subscript 'i' is repeated in operand 0 with sizes 3 and 4");
    expect_error(nb_einsum("ijk->ijk", &m34, 1), "operand 0 has 2 dimensions but its subscripts \"ijk\" name 3");
    expect_error(nb_einsum("...ijk", &m34, 1), "name at least 3");
    expect_error(nb_einsum("abcdefghi->a", &m34, 1), "name more than 8 dimensions");
    nb_tensor *five = nb_randn(NB_SHAPE(1, 1, 1, 1, 1), NB_F32), *four = nb_randn(NB_SHAPE(1, 1, 1, 1), NB_F32);
    nb_tensor *nine[2] = { five, four };
    expect_error(nb_einsum("...abcd,efgh->...abcdefgh", nine, 2), "the output has more than 8 dimensions");
    expect_error(nb_einsum("...abcd,efgh", nine, 2), "the output has more than 8 dimensions");
    expect_error(nb_einsum(NULL, &m34, 1), "nb_einsum: the equation is NULL");
    expect_error(nb_einsum("ij", &m34, 0), "0 operands given");
    expect_error(nb_einsum("ij", NULL, 1), "operands given");
    expect_error(nb_einsum("ij,jk", null2, 2), "operand 1 is NULL");
    nb_scope_end(s);
}

int main(int argc, char **argv) {
    ref_path = argc > 1 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_against_torch, clear_error_setup),
        cmocka_unit_test_setup(test_greedy_path, clear_error_setup),
        cmocka_unit_test_setup(test_greedy_memory, clear_error_setup),
        cmocka_unit_test_setup(test_ownership, clear_error_setup),
        cmocka_unit_test_setup(test_errors, clear_error_setup),
    };
    return RUN_TESTS(tests);
}
