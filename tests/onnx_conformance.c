/* ONNX's node conformance tests through nb_onnx_load and nb_onnx_run: reads the folder that
   tests/onnx_node_data.py writes, runs every data set of every test and compares with ONNX's
   reference outputs as onnx's backend runner does (rtol 1e-3, atol 1e-7, NaN equals NaN, dtypes
   and shapes exact). Reports per operator how many tests pass. A test fails the run when it
   fails on an operator version nabla claims; tests needing a dtype nabla lacks, an unclaimed
   operator or an unclaimed version of one are counted and listed apart, never passed.

   Usage: onnx_conformance DATA_DIR [--doc FILE] [--only NAME] [--verbose] [--compile]
          [--rtol R] [--atol A]
          onnx_conformance --attrs FILE
   --compile runs the models through nb_compile; --attrs writes the attribute schema of every
   implemented operator version (tests/onnx_attr_schema.py compares it with onnx's); --doc writes the import section of docs/onnx.md (the operator table) to FILE. */
#include "../src/onnx/import_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* XFAIL_FN: an expanded body of a function nabla does not claim (Attention in bf16, say) that
   differs from the reference: listed, not gating (the reference rounds each half-precision
   step as numpy does; nabla computes an op in f32 and rounds once). RANDOM: training-mode
   Dropout, whose reference draws from numpy's generator, which no other runtime can repeat. */
/* NOCOMPILE (with --compile): a model nb_compile cannot take, refused with its reason: several
   outputs, or shapes read from the input values (the node tests give shapes as inputs). */
enum { PASS, FAIL, NODTYPE, NOOP, NOVERSION, XFAIL_FN, RANDOM, NOCOMPILE, NCAT };
static const char *cat_name[NCAT] = { "passed", "FAILED", "unsupported dtype", "unsupported operator",
                                      "unsupported version", "unclaimed function's expansion differs",
                                      "random (irreproducible)", "not compilable" };

typedef struct {
    char op[128];
    int n[NCAT];
} op_row;

static op_row rows[512];
static double rtol = 1e-3, abs_tol = 1e-7;
static bool compile_mode;
static int nrows;

static op_row *row_of(const char *op) {
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].op, op)) return &rows[i];
    if (nrows == 512) return &rows[511];
    snprintf(rows[nrows].op, sizeof rows[nrows].op, "%s", op);
    return &rows[nrows++];
}

static bool dtype_by_name(const char *s, nb_dtype *d) {
    for (int k = 0; k < NB_DTYPE_COUNT; k++)
        if (!strcmp(nb_dtype_name((nb_dtype)k), s)) { *d = (nb_dtype)k; return true; }
    return false;
}

/* A .bin tensor file (onnx_node_data.py's format), owned by the caller; NULL when unreadable. */
static nb_tensor *read_bin(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char line[512];
    nb_tensor *t = NULL;
    if (fgets(line, sizeof line, f)) {
        char dn[16];
        int nd, off;
        nb_dtype d;
        nb_shape s = { 0, { 0 } };
        if (sscanf(line, "%15s %d%n", dn, &nd, &off) == 2 && dtype_by_name(dn, &d) && nd >= 0 && nd <= NB_MAX_DIMS) {
            s.ndim = nd;
            char *p = line + off;
            int64_t numel = 1;
            for (int i = 0; i < nd; i++) {
                s.dim[i] = strtoll(p, &p, 10);
                numel *= s.dim[i];
            }
            size_t bytes = (size_t)numel * nb_dtype_size(d);
            void *buf = malloc(bytes ? bytes : 1);
            if (buf && fread(buf, 1, bytes, f) == bytes) t = nb_keep(nb_from_data(buf, s, d));
            free(buf);
        }
    }
    fclose(f);
    return t;
}

/* Compares got with want as onnx's runner does; 0, or -1 with why. */
static int compare(nb_tensor *got, nb_tensor *want, char *why, size_t size) {
    if (nb_dtype_of(got) != nb_dtype_of(want)) {
        snprintf(why, size, "dtype %s, expected %s", nb_dtype_name(nb_dtype_of(got)), nb_dtype_name(nb_dtype_of(want)));
        return -1;
    }
    nb_shape a = nb_shape_of(got), b = nb_shape_of(want);
    bool same = a.ndim == b.ndim;
    for (int i = 0; same && i < a.ndim; i++) same = a.dim[i] == b.dim[i];
    if (!same) {
        char x[100], y[100];
        snprintf(why, size, "shape %s, expected %s", nb_shape_str(a, x, sizeof x), nb_shape_str(b, y, sizeof y));
        return -1;
    }
    int64_t n = nb_numel(want);
    bool fl = nb_dtype_of(want) == NB_F32 || nb_dtype_of(want) == NB_F64 || nb_dtype_of(want) == NB_F16 ||
              nb_dtype_of(want) == NB_BF16;
    nb_tensor *gc = nb_keep(nb_cast(got, fl ? NB_F64 : NB_I64)), *wc = nb_keep(nb_cast(want, fl ? NB_F64 : NB_I64));
    int rc = 0;
    if (fl) {
        double *g = malloc(sizeof(double) * (size_t)(n + 1)), *w = malloc(sizeof(double) * (size_t)(n + 1));
        nb_copy_to(gc, g, sizeof(double) * (size_t)n);
        nb_copy_to(wc, w, sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n && rc == 0; i++) {
            bool ok = (isnan(g[i]) && isnan(w[i])) || g[i] == w[i] || fabs(g[i] - w[i]) <= abs_tol + rtol * fabs(w[i]);
            if (!ok) {
                snprintf(why, size, "element %lld is %.9g, expected %.9g", (long long)i, g[i], w[i]);
                rc = -1;
            }
        }
        free(g);
        free(w);
    } else {
        int64_t *g = malloc(sizeof(int64_t) * (size_t)(n + 1)), *w = malloc(sizeof(int64_t) * (size_t)(n + 1));
        nb_copy_to(gc, g, sizeof(int64_t) * (size_t)n);
        nb_copy_to(wc, w, sizeof(int64_t) * (size_t)n);
        for (int64_t i = 0; i < n && rc == 0; i++)
            if (g[i] != w[i]) {
                snprintf(why, size, "element %lld is %lld, expected %lld", (long long)i, (long long)g[i], (long long)w[i]);
                rc = -1;
            }
        free(g);
        free(w);
    }
    nb_release(gc);
    nb_release(wc);
    return rc;
}

/* Runs one test's data sets; the category, with why for a failure. */
static int run_test(const char *dir, const char *name, int nsets, char *why, size_t size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    nb_error_clear();
    nb_onnx_model *m = nb_onnx_load(path, (nb_onnx_load_opts){ .compile = compile_mode });
    if (!m) {
        const char *e = nb_error() ? nb_error() : "(no error)";
        snprintf(why, size, "%s", e);
        if (strstr(e, "is not supported (opset") && strstr(e, ": operator ")) return NOOP;
        if (strstr(e, "operator domain")) return NOOP;
        if (strstr(e, "nabla implements versions")) return NOVERSION;
        if (compile_mode && strstr(e, "compile needs a model with one output")) return NOCOMPILE;
        return FAIL;
    }
    int cat = PASS;
    for (int s = 0; s < nsets && cat == PASS; s++) {
        int nin = nb_onnx_num_inputs(m), nout = nb_onnx_num_outputs(m);
        nb_tensor *in[64] = { 0 }, *out[64] = { 0 }, *want[64] = { 0 };
        if (nin > 64 || nout > 64) { snprintf(why, size, "too many inputs"); cat = FAIL; break; }
        /* the data set's inputs may be fewer than the graph's (optional ones left out) */
        int given = 0;
        for (int k = 0; k < nin; k++) {
            snprintf(path, sizeof path, "%s/%s/%d_in%d.bin", dir, name, s, k);
            if ((in[k] = read_bin(path))) given = k + 1;
        }
        for (int k = 0; k < nout; k++) {
            snprintf(path, sizeof path, "%s/%s/%d_out%d.bin", dir, name, s, k);
            want[k] = read_bin(path);
        }
        nb_error_clear();
        if (nb_onnx_run(m, in, given, out, nout) < 0) {
            snprintf(why, size, "set %d: %s", s, nb_error() ? nb_error() : "(no error)");
            cat = nb_error() && strstr(nb_error(), "training-mode dropout draws random numbers") ? RANDOM : FAIL;
            if (compile_mode && nb_error() && strstr(nb_error(), "so the model cannot be compiled")) cat = NOCOMPILE;
        }
        for (int k = 0; k < nout && cat == PASS; k++) {
            char w[300];
            if (!want[k]) { snprintf(why, size, "set %d: reference output %d missing", s, k); cat = FAIL; }
            else if (compare(out[k], want[k], w, sizeof w) < 0) {
                snprintf(why, size, "set %d output %d (%s): %s", s, k, nb_onnx_output_name(m, k), w);
                cat = FAIL;
            }
        }
        for (int k = 0; k < 64; k++) {
            nb_release(in[k]);
            nb_release(out[k]);
            nb_release(want[k]);
        }
    }
    nb_onnx_free(m);
    return cat;
}

/* The opsets at which the implemented versions of op apply, as "7–13" or "7+". */
static void opset_range(const onnx_op *op, char *buf, size_t size) {
    int next = 0;
    for (const char *p = op->history; *p;) {
        int v = atoi(p);
        if (v > op->max_v && (!next || v < next)) next = v;
        while (*p && *p != ',') p++;
        if (*p) p++;
    }
    if (next) snprintf(buf, size, "%d–%d", op->min_v, next - 1);
    else snprintf(buf, size, "%d+", op->min_v);
}

static int write_doc(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    int count = 0;
    for (const onnx_op *o = nb__onnx_import_ops; o->name; o++) count++;
    fprintf(f, "## Import: supported operators\n\n"
               "Generated by `onnx_conformance --doc` from the importer's table (src/onnx/import_ops.c);\n"
               "the test `onnx_doc_current` fails when this section is stale. %d operators of the default\n"
               "domain. *Opsets* are the model opsets at which the implemented versions apply (a model's\n"
               "opset picks each operator's newest version not above it); *versions* are the operator's\n"
               "ONNX schema versions nabla implements, of its whole history (onnx 1.23). Every ONNX node\n"
               "conformance test of these versions passes, except those needing a dtype nabla lacks and the\n"
               "training-mode Dropout tests, whose reference draws numpy's random numbers. *Attributes*\n"
               "are those nabla reads, checked at load against their types and versions (the test\n"
               "`onnx_attr_schema` compares the table with onnx's schemas); ! marks a required one.\n\n"
               "| operator | opsets | versions | history | attributes |\n|---|---|---|---|---|\n", count);
    for (const onnx_op *o = nb__onnx_import_ops; o->name; o++) {
        char range[32], vers[200] = "";
        opset_range(o, range, sizeof range);
        size_t l = 0;
        for (const char *p = o->history; *p;) {
            int v = atoi(p);
            if (v >= o->min_v && v <= o->max_v) l += (size_t)snprintf(vers + l, sizeof vers - l, l ? ", %d" : "%d", v);
            while (*p && *p != ',') p++;
            if (*p) p++;
        }
        char attrs[600] = "";
        l = 0;
        onnx_attr_spec sp, prev;
        for (const char *p = o->attrs; nb__onnx_next_attr_spec(&p, &sp) && l < sizeof attrs - 64;) {
            bool again = false; /* one name in two version ranges */
            for (const char *q = o->attrs; q < p && nb__onnx_next_attr_spec(&q, &prev) && q < p;) again |= !strcmp(prev.name, sp.name);
            if (!again) l += (size_t)snprintf(attrs + l, sizeof attrs - l, "%s%s%s", l ? ", " : "", sp.name, sp.required ? "!" : "");
        }
        fprintf(f, "| %s | %s | %s | %s | %s |\n", o->name, range, vers, o->history, *attrs ? attrs : "—");
    }
    fclose(f);
    return 0;
}

/* The attribute schema of every implemented version of every operator, one line each
   "op version name type required", for tests/onnx_attr_schema.py to compare with onnx's. */
static int write_attrs(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    int bad = 0;
    for (const onnx_op *o = nb__onnx_import_ops; o->name; o++) {
        const char *p = o->attrs;
        onnx_attr_spec sp;
        /* every comma-separated entry must parse: the parser stops at a bad one, and a bad last
           entry leaves p at the end just as a good one does, so entries are counted */
        int parsed = 0, entries = *p ? 1 : 0;
        while (nb__onnx_next_attr_spec(&p, &sp)) parsed++;
        for (const char *c = o->attrs; *c; c++) entries += *c == ',';
        if (parsed != entries) { fprintf(stderr, "%s: unreadable attribute schema \"%s\"\n", o->name, o->attrs); bad = 1; }
        for (const char *h = o->history; *h;) {
            int v = atoi(h);
            if (v >= o->min_v && v <= o->max_v) {
                fprintf(f, "%s %d -\n", o->name, v); /* the version, even without attributes */
                for (p = o->attrs; nb__onnx_next_attr_spec(&p, &sp);)
                    if (v >= sp.lo && v <= sp.hi) fprintf(f, "%s %d %s %s %d\n", o->name, v, sp.name, nb__onnx_attr_type_name(sp.type), sp.required);
            }
            while (*h && *h != ',') h++;
            if (*h) h++;
        }
    }
    fclose(f);
    return bad;
}

/* The manifest's operator of test name (a single-node test), or NULL. */
static char man_names[4096][96], man_ops[4096][64];
static int nman;
static const char *op_of_test(const char *name) {
    for (int i = 0; i < nman; i++)
        if (!strcmp(man_names[i], name)) return man_ops[i];
    return NULL;
}

/* Whether the operator of row key ("Softmax (expanded)") is in nabla's table. */
static bool claimed_op(const char *key) {
    char op[128];
    snprintf(op, sizeof op, "%s", key);
    char *sp = strchr(op, ' ');
    if (sp) *sp = 0;
    return nb__onnx_find_op(op) != NULL;
}

static void read_manifest_ops(FILE *mf) {
    char line[4096];
    while (fgets(line, sizeof line, mf) && nman < 4096) {
        if (line[0] == '#') continue;
        char *name = strtok(line, "\t"), *status = strtok(NULL, "\t"), *ops = strtok(NULL, "\t");
        if (!name || !status || !ops || strchr(ops, ',')) continue;
        snprintf(man_names[nman], sizeof man_names[0], "%s", name);
        snprintf(man_ops[nman], sizeof man_ops[0], "%s", ops);
        nman++;
    }
    rewind(mf);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *only = NULL, *doc = NULL;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--doc") && i + 1 < argc) doc = argv[++i];
        else if (!strcmp(argv[i], "--attrs") && i + 1 < argc) return write_attrs(argv[++i]);
        else if (!strcmp(argv[i], "--verbose")) verbose = true;
        else if (!strcmp(argv[i], "--compile")) compile_mode = true;
        else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) rtol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--atol") && i + 1 < argc) abs_tol = atof(argv[++i]);
        else dir = argv[i];
    }
    if (doc) return write_doc(doc);
    if (!dir) { fprintf(stderr, "usage: onnx_conformance DATA_DIR [--doc FILE] [--only NAME] [--verbose]\n"); return 2; }
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.tsv", dir);
    FILE *mf = fopen(path, "r");
    if (!mf) { fprintf(stderr, "onnx_conformance: cannot read %s (run tests/onnx_node_data.py)\n", path); return 2; }
    read_manifest_ops(mf);
    char line[4096];
    int total[NCAT] = { 0 }, tests = 0;
    static char fails[64][1000], xfails[64][1000];
    int nfails = 0, nxf = 0;
    while (fgets(line, sizeof line, mf)) {
        if (line[0] == '#') continue;
        char *name = strtok(line, "\t"), *status = strtok(NULL, "\t"), *ops = strtok(NULL, "\t"), *sets = strtok(NULL, "\t\n");
        if (!name || !status || !ops || !sets) continue;
        if (only && strcmp(only, name)) continue;
        tests++;
        /* a single-node test counts for its operator; an expanded function body (test X_expanded,
           X_expanded_verN) for the operator of test X, in a row of its own */
        char key[128];
        bool expanded = strstr(name, "_expanded") != NULL;
        if (expanded) {
            char base[256];
            snprintf(base, sizeof base, "%s", name);
            *strstr(base, "_expanded") = 0;
            const char *bop = op_of_test(base);
            snprintf(key, sizeof key, "%s (expanded)", bop ? bop : "?");
        } else snprintf(key, sizeof key, "%s", strchr(ops, ',') ? "(several operators)" : ops);
        char why[800] = "";
        int cat;
        if (strcmp(status, "ok")) {
            cat = NODTYPE;
            snprintf(why, sizeof why, "%s", status);
        } else cat = run_test(dir, name, atoi(sets), why, sizeof why);
        if (cat == FAIL && expanded && !claimed_op(key)) cat = XFAIL_FN;
        row_of(key)->n[cat]++;
        total[cat]++;
        if (cat == FAIL && nfails < 64) snprintf(fails[nfails++], sizeof fails[0], "%s: %s", name, why);
        if (cat == XFAIL_FN && nxf < 64) snprintf(xfails[nxf++], sizeof xfails[0], "%s: %s", name, why);
        if (verbose || only) printf("%-60s %s%s%s\n", name, cat_name[cat], *why ? ": " : "", why);
    }
    fclose(mf);
    /* per operator, claimed ones first */
    printf("%-34s %7s %7s %7s %7s %7s %7s %7s %7s\n", "operator", "passed", "failed", "dtype", "unsup", "version", "xfn",
           "random", "nocomp");
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nrows; i++) {
            op_row *o = &rows[i];
            bool claimed = o->n[PASS] + o->n[FAIL] > 0;
            if (claimed != (pass == 0)) continue;
            printf("%-34s %7d %7d %7d %7d %7d %7d %7d %7d\n", o->op, o->n[PASS], o->n[FAIL], o->n[NODTYPE], o->n[NOOP],
                   o->n[NOVERSION], o->n[XFAIL_FN], o->n[RANDOM], o->n[NOCOMPILE]);
        }
    printf("\n%d tests: ", tests);
    for (int c = 0; c < NCAT; c++) printf("%s%d %s", c ? ", " : "", total[c], cat_name[c]);
    printf("\n");
    for (int i = 0; i < nxf; i++) printf("unclaimed function's expansion differs: %s\n", xfails[i]);
    for (int i = 0; i < nfails; i++) printf("FAILED %s\n", fails[i]);
    if (total[FAIL]) {
        printf("onnx_conformance: %d tests of claimed operators FAILED\n", total[FAIL]);
        return 1;
    }
    printf("onnx_conformance: every test of a claimed operator passed\n");
    return 0;
}
