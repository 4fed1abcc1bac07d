/* Fused elementwise kernels of graph mode: the loop layout, C source generation, building with
   the system C compiler into a shared object cached on disk under a hash of its source, loading
   with dlopen, and an interpreter that runs the same code when no compiler is there. */
#include "compile_impl.h"
#include "../backend/cpu/iter.h"
#include "../backend/cpu/kmath.h"
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__linux__)
#include <sys/auxv.h>
#endif

#define MAX_OPERANDS 64

/* ------------------------------------------------------------------ layout */

/* Operand j's byte stride along loop axis d (0 where it broadcasts); operand 0 is the output. */
static int64_t axis_stride(const fkernel *k, const cgraph *g, int out, int j, int d) {
    if (j == 0 && out < 0) return 0;
    const cval *v = &g->v[j == 0 ? out : k->in[j - 1]];
    int di = d - (k->loop.ndim - v->shape.ndim);
    return di < 0 || v->shape.dim[di] == 1 ? 0 : v->stride[di] * (int64_t)nb__esize(v->dtype);
}

/* A reduction (or a member of a row group) walks [rows, cols]: the leading axes as one, the
   last axis. 1 when an operand's leading axes cannot be walked with one stride. out: the
   output value, or -1 for a reduction (which writes its result by row index). */
static int layout_rows(fkernel *k, const cgraph *g, int out) {
    const nb_shape *S = &k->loop;
    int nd = S->ndim, nops = k->nin + 1;
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= S->dim[d];
    k->nd = 2;
    k->dim[0] = rows;
    k->dim[1] = nd ? S->dim[nd - 1] : 1;
    for (int j = out < 0 ? 1 : 0; j < nops; j++) {
        int64_t rs = 0, span = 1; /* the stride of the innermost leading axis, and what it covers */
        bool set = false;
        for (int d = nd - 2; d >= 0; d--) {
            if (S->dim[d] == 1) continue;
            int64_t st = axis_stride(k, g, out, j, d);
            if (!set) { rs = st; set = true; }
            else if (st != rs * span) return 1;
            span *= S->dim[d];
        }
        k->st[j][0] = rs;
        k->st[j][1] = nd ? axis_stride(k, g, out, j, nd - 1) : 0;
    }
    if (out < 0) k->st[0][0] = k->st[0][1] = 0;
    return 0;
}

int nb__kernel_layout(fkernel *k, const cgraph *g, int out) {
    int nops = k->nin + 1;
    const nb_shape *S = &k->loop;
    free(k->st);
    free(k->cls);
    k->st = calloc((size_t)nops, sizeof *k->st);
    k->cls = calloc((size_t)nops + 1, 1);
    if (!k->st || !k->cls) return -1;
    int m = 0;
    int64_t dim[NB_MAX_DIMS];
    if (k->red != RED_NONE || k->rows) {
        if (layout_rows(k, g, k->red != RED_NONE ? -1 : out) != 0) return 1;
        m = 2;
        memcpy(dim, k->dim, sizeof(int64_t) * 2);
    } else if (k->tile) { /* every axis kept: the GEMM hands out rectangles of its last two */
        m = S->ndim;
        for (int d = 0; d < m; d++) {
            dim[d] = S->dim[d];
            for (int j = 0; j < nops; j++) k->st[j][d] = axis_stride(k, g, out, j, d);
        }
    } else {
        int nd = 0;
        for (int d = 0; d < S->ndim; d++) {
            if (S->dim[d] == 1) continue;
            dim[nd] = S->dim[d];
            for (int j = 0; j < nops; j++) k->st[j][nd] = axis_stride(k, g, out, j, d);
            nd++;
        }
        /* merge neighbours that every operand walks as one */
        for (int d = 0; d < nd; d++) {
            bool merge = m > 0;
            for (int j = 0; j < nops && merge; j++) merge = k->st[j][m - 1] == k->st[j][d] * dim[d];
            if (merge) {
                dim[m - 1] *= dim[d];
                for (int j = 0; j < nops; j++) k->st[j][m - 1] = k->st[j][d];
            } else {
                dim[m] = dim[d];
                for (int j = 0; j < nops; j++) k->st[j][m] = k->st[j][d];
                m++;
            }
        }
        if (m == 0) {
            dim[0] = 1;
            for (int j = 0; j < nops; j++) k->st[j][0] = 0;
            m = 1;
        }
    }
    k->nd = m;
    memcpy(k->dim, dim, sizeof(int64_t) * (size_t)m);
    for (int j = 1; j < nops; j++) {
        int64_t inner = k->st[j][m - 1], es = (int64_t)nb__esize(k->in_dtype[j - 1]);
        k->cls[j - 1] = inner == es ? 'c' : inner == 0 ? 'b' : 's';
    }
    return 0;
}

/* ------------------------------------------------------------------ interpreter */

#define BLK 64

static inline float load1(const char *p, nb_dtype d) {
    switch (d) {
    case NB_F32: return *(const float *)p;
    case NB_F64: return (float)*(const double *)p;
    case NB_I64: return (float)*(const int64_t *)p;
    case NB_I32: return (float)*(const int32_t *)p;
    case NB_BOOL: return *(const uint8_t *)p != 0;
    default: return *(const uint8_t *)p;
    }
}

static void interpret(const fkernel *k, int64_t r0, int64_t r1, int64_t cols, char *const *p, const int64_t *rs,
                      const int64_t *cs) {
    float reg[k->n][BLK]; /* at most a few hundred registers: see MAX_GROUP in graph.c */
    const double *sc = k->scal;
    for (int64_t r = r0; r < r1; r++) {
        double lane[8] = { 0 }; /* row and whole sums: element j in lane j % 8, as sum_lanes_float */
        for (int64_t j0 = 0; j0 < cols; j0 += BLK) {
            int n = (int)(cols - j0 < BLK ? cols - j0 : BLK);
            for (int i = 0; i < k->n; i++) {
                const finstr *c = &k->code[i];
                float *o = reg[i];
                const float *a = reg[c->a], *b = reg[c->b], *w = reg[c->c];
                switch (c->op) {
                case FI_LOAD: {
                    const char *q = p[c->a + 1] + r * rs[c->a + 1] + j0 * cs[c->a + 1];
                    for (int e = 0; e < n; e++) o[e] = load1(q + e * cs[c->a + 1], k->in_dtype[c->a]);
                    break;
                }
                case FI_ADD: for (int e = 0; e < n; e++) o[e] = a[e] + b[e]; break;
                case FI_SUB: for (int e = 0; e < n; e++) o[e] = a[e] - b[e]; break;
                case FI_MUL: for (int e = 0; e < n; e++) o[e] = a[e] * b[e]; break;
                case FI_DIV: for (int e = 0; e < n; e++) o[e] = a[e] / b[e]; break;
                case FI_POW: for (int e = 0; e < n; e++) o[e] = powf(a[e], b[e]); break;
                case FI_MAX:
                    for (int e = 0; e < n; e++) o[e] = a[e] != a[e] ? a[e] : b[e] != b[e] ? b[e] : a[e] > b[e] ? a[e] : b[e];
                    break;
                case FI_MIN:
                    for (int e = 0; e < n; e++) o[e] = a[e] != a[e] ? a[e] : b[e] != b[e] ? b[e] : a[e] < b[e] ? a[e] : b[e];
                    break;
                case FI_ADDS: { float s = (float)sc[c->s]; for (int e = 0; e < n; e++) o[e] = a[e] + s; break; }
                case FI_MULS: { float s = (float)sc[c->s]; for (int e = 0; e < n; e++) o[e] = a[e] * s; break; }
                case FI_POWS: { float s = (float)sc[c->s]; for (int e = 0; e < n; e++) o[e] = powf(a[e], s); break; }
                case FI_NEG: for (int e = 0; e < n; e++) o[e] = -a[e]; break;
                case FI_EXP: for (int e = 0; e < n; e++) o[e] = nbk_expf(a[e]); break;
                case FI_LOG: for (int e = 0; e < n; e++) o[e] = logf(a[e]); break;
                case FI_SQRT: for (int e = 0; e < n; e++) o[e] = sqrtf(a[e]); break;
                case FI_ABS: for (int e = 0; e < n; e++) o[e] = a[e] < 0 ? -a[e] : a[e]; break;
                case FI_SIGN: for (int e = 0; e < n; e++) o[e] = (float)((a[e] > 0) - (a[e] < 0)); break;
                case FI_TANH: for (int e = 0; e < n; e++) o[e] = tanhf(a[e]); break;
                case FI_SIGMOID: for (int e = 0; e < n; e++) o[e] = 1.0f / (1.0f + nbk_expf(-a[e])); break;
                case FI_RELU: for (int e = 0; e < n; e++) o[e] = a[e] < 0 ? 0 : a[e]; break;
                case FI_RELU_BW: for (int e = 0; e < n; e++) o[e] = b[e] <= 0 ? 0 : a[e]; break;
                case FI_GELU:
                    for (int e = 0; e < n; e++) o[e] = 0.5f * a[e] * (1.0f + nbk_erff(a[e] * 0.70710678118654752440f));
                    break;
                case FI_ERF: for (int e = 0; e < n; e++) o[e] = nbk_erff(a[e]); break;
                case FI_CLAMP: {
                    double lo = sc[c->s], hi = sc[c->s + 1];
                    for (int e = 0; e < n; e++) o[e] = (double)a[e] < lo ? (float)lo : (double)a[e] > hi ? (float)hi : a[e];
                    break;
                }
                case FI_WHERE: for (int e = 0; e < n; e++) o[e] = a[e] != 0 ? b[e] : w[e]; break;
                default: for (int e = 0; e < n; e++) o[e] = a[e]; break;
                }
            }
            const float *res = reg[k->n - 1];
            if (k->red == RED_NONE) {
                char *q = p[0] + r * rs[0] + j0 * cs[0];
                for (int e = 0; e < n; e++) *(float *)(q + e * cs[0]) = res[e];
            } else if (k->red == RED_COLS) {
                double *acc = (double *)p[0] + j0;
                for (int e = 0; e < n; e++) acc[e] += (double)res[e];
            } else {
                for (int e = 0; e < n; e++) lane[e & 7] += (double)res[e]; /* BLK is a multiple of 8 */
            }
        }
        double row_acc = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        if (k->red == RED_ROWS) ((float *)p[0])[r] = (float)row_acc;
        else if (k->red == RED_ALL) *(double *)p[0] += row_acc;
    }
}

/* ------------------------------------------------------------------ running */

static void run_rows(const fkernel *k, int64_t r0, int64_t r1, int64_t c0, int64_t c1, char *const *base,
                     const int64_t *rs, const int64_t *cs) {
    char *p[MAX_OPERANDS + 1];
    for (int j = 0; j <= k->nin; j++) p[j] = base[j] + c0 * cs[j];
    if (k->fn) k->fn(r0, r1, c1 - c0, p, rs, cs, k->scal);
    else interpret(k, r0, r1, c1 - c0, p, rs, cs);
}

void nb__kernel_run_tile(const fkernel *k, nb_tensor *out, nb_tensor *const *in, int64_t batch, int64_t r0, int64_t r1,
                         int64_t c0, int64_t c1) {
    char *b[MAX_OPERANDS + 1];
    int64_t rs[MAX_OPERANDS + 1], cs[MAX_OPERANDS + 1];
    int nd = k->nd, nops = k->nin + 1;
    for (int j = 0; j < nops; j++) {
        int64_t off = 0, rest = batch;
        for (int d = nd - 3; d >= 0; d--) {
            off += (rest % k->dim[d]) * k->st[j][d];
            rest /= k->dim[d];
        }
        b[j] = (char *)nb__data(j == 0 ? out : in[j - 1]) + off;
        rs[j] = k->st[j][nd - 2];
        cs[j] = k->st[j][nd - 1];
    }
    run_rows(k, r0, r1, c0, c1, b, rs, cs);
}

/* A kernel loop on the thread pool: pieces of rows or of columns, fixed by shape. */
enum { PIECE_ROWS, PIECE_COLS, PIECE_COL_BLOCKS, PIECE_ROW_SUMS, PIECE_GROUP };
typedef struct {
    int kind;
    const fkernel *k;
    fkernel *const *group;
    int ngroup;
    char **base;                       /* operand bases (a group: base[i] per kernel) */
    char *(*gbase)[MAX_OPERANDS + 1];
    int64_t *rs, *cs;
    int64_t (*grs)[MAX_OPERANDS + 1], (*gcs)[MAX_OPERANDS + 1];
    int64_t rows, cols, chunk;
    double *acc;
} piece_job;

static void run_pieces(void *c_, int64_t lo, int64_t hi, int slot) {
    (void)slot;
    const piece_job *j = c_;
    const fkernel *k = j->k;
    for (int64_t c = lo; c < hi; c++) {
        int64_t r0 = c * j->chunk, r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
        switch (j->kind) {
        case PIECE_ROWS: run_rows(k, r0, r1, 0, j->cols, j->base, j->rs, j->cs); break;
        case PIECE_COLS: { /* chunk is a count of columns here */
            int64_t c0 = c * j->chunk, c1 = c0 + j->chunk < j->cols ? c0 + j->chunk : j->cols;
            run_rows(k, 0, j->rows, c0, c1, j->base, j->rs, j->cs);
            break;
        }
        case PIECE_COL_BLOCKS: { /* column blocks summed into acc */
            int64_t c0 = c * j->chunk, c1 = c0 + j->chunk < j->cols ? c0 + j->chunk : j->cols;
            char *b[MAX_OPERANDS + 1];
            memcpy(b, j->base, sizeof(char *) * (size_t)(k->nin + 1));
            b[0] = (char *)j->acc;
            run_rows(k, 0, j->rows, c0, c1, b, j->rs, j->cs);
            break;
        }
        case PIECE_ROW_SUMS: { /* a whole sum: each chunk of rows into acc[c] */
            char *b[MAX_OPERANDS + 1];
            memcpy(b, j->base, sizeof(char *) * (size_t)(k->nin + 1));
            b[0] = (char *)&j->acc[c];
            run_rows(k, r0, r1, 0, j->cols, b, j->rs, j->cs);
            break;
        }
        default:
            for (int i = 0; i < j->ngroup; i++)
                run_rows(j->group[i], r0, r1, 0, j->group[i]->dim[1], j->gbase[i], j->grs[i], j->gcs[i]);
        }
    }
}

#define COLUMN_PIECE 8192 /* columns per piece of a loop with few rows */
#define COLUMN_BLOCK 512 /* as the eager column sum: the same order, so the same bits */
#define ROW_CHUNK_ELEMS 16384

/* Runs a reducing kernel over [rows, cols]: sums in double, in element order per output (row
   sums per row, column sums per fixed block of columns, a whole sum per fixed chunk of rows
   combined in order), so the result does not depend on the thread count. */
static int run_reduction(fkernel *k, nb_tensor *out, char **base, int64_t *rs, int64_t *cs) {
    int64_t rows = k->dim[0], cols = k->dim[1];
    int threads = rows * cols >= NB_PARALLEL_GRAIN ? nb__threads() : 1;
    float *o = nb__data(out);
    if (k->red == RED_ROWS) {
        base[0] = (char *)o;
        int64_t chunk = ROW_CHUNK_ELEMS / (cols ? cols : 1) > 1 ? ROW_CHUNK_ELEMS / cols : 1;
        int64_t nchunks = (rows + chunk - 1) / chunk;
        if (nchunks < 2) threads = 1;
        piece_job j = { .kind = PIECE_ROWS, .k = k, .base = base, .rs = rs, .cs = cs, .rows = rows, .cols = cols, .chunk = chunk };
        nb__parallel_for(threads, nchunks, run_pieces, &j);
        return 0;
    }
    int64_t nacc = k->red == RED_COLS ? cols : (rows * cols + ROW_CHUNK_ELEMS - 1) / ROW_CHUNK_ELEMS;
    if (nacc < 1) nacc = 1;
    double *acc = nb__alloc(sizeof(double) * (size_t)nacc);
    if (!acc) {
        nb__error("nb_compiled_run: out of memory in fused kernel %s", k->label);
        return -1;
    }
    memset(acc, 0, sizeof(double) * (size_t)nacc);
    if (k->red == RED_COLS) {
        int64_t blocks = (cols + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
        if (blocks < 2) threads = 1;
        cs[0] = sizeof(double);
        piece_job j = { .kind = PIECE_COL_BLOCKS, .k = k, .base = base, .rs = rs, .cs = cs, .rows = rows, .cols = cols,
                        .chunk = COLUMN_BLOCK, .acc = acc };
        nb__parallel_for(threads, blocks, run_pieces, &j);
        for (int64_t c = 0; c < cols; c++) o[c] = (float)acc[c];
    } else {
        int64_t chunk = ROW_CHUNK_ELEMS / (cols ? cols : 1) > 1 ? ROW_CHUNK_ELEMS / cols : 1;
        int64_t nchunks = (rows + chunk - 1) / chunk;
        if (nchunks < 2) threads = 1;
        piece_job j = { .kind = PIECE_ROW_SUMS, .k = k, .base = base, .rs = rs, .cs = cs, .rows = rows, .cols = cols,
                        .chunk = chunk, .acc = acc };
        nb__parallel_for(threads, nchunks, run_pieces, &j);
        double s = 0;
        for (int64_t c = 0; c < nchunks; c++) s += acc[c];
        o[0] = (float)s;
    }
    nb__free(acc, sizeof(double) * (size_t)nacc);
    return 0;
}

#define GROUP_CHUNK_ELEMS 2048 /* elements of the widest kernel per chunk of rows: ~8 KiB an operand */

void nb__kernel_run_group(fkernel *const *k, int n, nb_tensor *const *out, nb_tensor *const *const *in) {
    char *base[MAX_ROW_GROUP][MAX_OPERANDS + 1];
    int64_t rs[MAX_ROW_GROUP][MAX_OPERANDS + 1], cs[MAX_ROW_GROUP][MAX_OPERANDS + 1];
    int64_t rows = k[0]->dim[0], widest = 1, total = 0;
    for (int i = 0; i < n; i++) {
        base[i][0] = nb__data(out[i]);
        rs[i][0] = k[i]->st[0][0];
        cs[i][0] = k[i]->st[0][1];
        for (int j = 1; j <= k[i]->nin; j++) {
            base[i][j] = nb__data(in[i][j - 1]);
            rs[i][j] = k[i]->st[j][0];
            cs[i][j] = k[i]->st[j][1];
        }
        if (k[i]->dim[1] > widest) widest = k[i]->dim[1];
        total += rows * k[i]->dim[1];
    }
    /* chunks fixed by shape; a row computes the same whatever chunk it falls in */
    int64_t chunk = GROUP_CHUNK_ELEMS / widest > 1 ? GROUP_CHUNK_ELEMS / widest : 1;
    int64_t nchunks = (rows + chunk - 1) / chunk;
    int threads = nchunks > 1 && total >= NB_PARALLEL_GRAIN / 4 ? nb__threads() : 1;
    piece_job j = { .kind = PIECE_GROUP, .group = k, .ngroup = n, .gbase = base, .grs = rs, .gcs = cs, .rows = rows,
                    .chunk = chunk };
    nb__parallel_for(threads, nchunks, run_pieces, &j);
}

int nb__kernel_run(fkernel *k, nb_tensor *out, nb_tensor *const *in) {
    /* nb__kernels_build refused kernels with more than MAX_OPERANDS operands */
    char *base[MAX_OPERANDS + 1];
    int64_t rs[MAX_OPERANDS + 1], cs[MAX_OPERANDS + 1];
    int nd = k->nd, nops = k->nin + 1;
    base[0] = nb__data(out);
    for (int j = 1; j < nops; j++) base[j] = nb__data(in[j - 1]);
    int64_t rows = nd >= 2 ? k->dim[nd - 2] : 1, cols = k->dim[nd - 1];
    for (int j = 0; j < nops; j++) {
        rs[j] = nd >= 2 ? k->st[j][nd - 2] : 0;
        cs[j] = k->st[j][nd - 1];
    }
    if (k->red != RED_NONE) return run_reduction(k, out, base, rs, cs);
    int64_t outer = 1;
    for (int d = 0; d < nd - 2; d++) outer *= k->dim[d];
    int64_t idx[NB_MAX_DIMS] = { 0 };
    int64_t per_outer = rows * cols;
    int threads = per_outer >= NB_PARALLEL_GRAIN ? nb__threads() : 1;
    for (int64_t o = 0; o < outer; o++) {
        char *b[MAX_OPERANDS + 1];
        for (int j = 0; j < nops; j++) {
            int64_t off = 0;
            for (int d = 0; d < nd - 2; d++) off += idx[d] * k->st[j][d];
            b[j] = base[j] + off;
        }
        /* Pieces fixed by shape, never by the thread count: a vectorised loop's tail computes its
           last elements with scalar code, so where a row is cut must not depend on the threads. */
        if (rows >= 16 || cols <= COLUMN_PIECE) {
            int64_t chunk = NB_PARALLEL_GRAIN / cols > 1 ? NB_PARALLEL_GRAIN / cols : 1;
            int64_t nchunks = (rows + chunk - 1) / chunk;
            piece_job j = { .kind = PIECE_ROWS, .k = k, .base = b, .rs = rs, .cs = cs, .rows = rows, .cols = cols, .chunk = chunk };
            nb__parallel_for(nchunks > 1 ? threads : 1, nchunks, run_pieces, &j);
        } else {
            int64_t nchunks = (cols + COLUMN_PIECE - 1) / COLUMN_PIECE;
            piece_job j = { .kind = PIECE_COLS, .k = k, .base = b, .rs = rs, .cs = cs, .rows = rows, .cols = cols,
                            .chunk = COLUMN_PIECE };
            nb__parallel_for(threads, nchunks, run_pieces, &j);
        }
        for (int d = nd - 3; d >= 0; d--) {
            if (++idx[d] < k->dim[d]) break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ C generation */

static const char *c_type(nb_dtype d) {
    switch (d) {
    case NB_F32: return "float";
    case NB_F64: return "double";
    case NB_I64: return "int64_t";
    case NB_I32: return "int32_t";
    default: return "uint8_t";
    }
}

/* The loop body of a fused kernel: t0..tn-1 for element j, at the given indent. */
static void gen_body(nb_text *t, const fkernel *k, const char *ind) {
    for (int i = 0; i < k->n; i++) {
        const finstr *c = &k->code[i];
        int a = c->a, b = c->b, w = c->c, s = c->s;
        nb__text_printf(t, "%sconst float t%d = ", ind, i);
        switch (c->op) {
        case FI_LOAD: {
            const char *ty = c_type(k->in_dtype[a]);
            const char *conv = k->in_dtype[a] == NB_BOOL ? "(float)(0 != " : "(float)(";
            if (k->cls[a] == 'c') nb__text_printf(t, "%si%d[j])", conv, a);
            else if (k->cls[a] == 'b') nb__text_printf(t, "%si%d[0])", conv, a);
            else nb__text_printf(t, "%s*(const %s *)((const char *)i%d + j * cs[%d]))", conv, ty, a, a + 1);
            break;
        }
        case FI_ADD: nb__text_printf(t, "t%d + t%d", a, b); break;
        case FI_SUB: nb__text_printf(t, "t%d - t%d", a, b); break;
        case FI_MUL: nb__text_printf(t, "t%d * t%d", a, b); break;
        case FI_DIV: nb__text_printf(t, "t%d / t%d", a, b); break;
        case FI_POW: nb__text_printf(t, "powf(t%d, t%d)", a, b); break;
        case FI_MAX: nb__text_printf(t, "t%d != t%d ? t%d : t%d != t%d ? t%d : t%d > t%d ? t%d : t%d", a, a, a, b, b, b, a, b, a, b); break;
        case FI_MIN: nb__text_printf(t, "t%d != t%d ? t%d : t%d != t%d ? t%d : t%d < t%d ? t%d : t%d", a, a, a, b, b, b, a, b, a, b); break;
        case FI_ADDS: nb__text_printf(t, "t%d + (float)s%d", a, s); break;
        case FI_MULS: nb__text_printf(t, "t%d * (float)s%d", a, s); break;
        case FI_POWS: nb__text_printf(t, "powf(t%d, (float)s%d)", a, s); break;
        case FI_NEG: nb__text_printf(t, "-t%d", a); break;
        case FI_EXP: nb__text_printf(t, "nbk_expf(t%d)", a); break;
        case FI_LOG: nb__text_printf(t, "logf(t%d)", a); break;
        case FI_SQRT: nb__text_printf(t, "sqrtf(t%d)", a); break;
        case FI_ABS: nb__text_printf(t, "t%d < 0 ? -t%d : t%d", a, a, a); break;
        case FI_SIGN: nb__text_printf(t, "(float)((t%d > 0) - (t%d < 0))", a, a); break;
        case FI_TANH: nb__text_printf(t, "tanhf(t%d)", a); break;
        case FI_SIGMOID: nb__text_printf(t, "1.0f / (1.0f + nbk_expf(-t%d))", a); break;
        case FI_RELU: nb__text_printf(t, "t%d < 0 ? 0 : t%d", a, a); break;
        case FI_RELU_BW: nb__text_printf(t, "t%d <= 0 ? 0 : t%d", b, a); break;
        case FI_GELU: nb__text_printf(t, "0.5f * t%d * (1.0f + nbk_erff(t%d * 0.70710678118654752440f))", a, a); break;
        case FI_ERF: nb__text_printf(t, "nbk_erff(t%d)", a); break;
        case FI_CLAMP: nb__text_printf(t, "(double)t%d < s%d ? (float)s%d : (double)t%d > s%d ? (float)s%d : t%d", a, s, s, a, s + 1, s + 1, a); break;
        case FI_WHERE: nb__text_printf(t, "t%d != 0 ? t%d : t%d", a, b, w); break;
        default: nb__text_printf(t, "t%d", a); break;
        }
        nb__text_printf(t, ";\n");
    }
}

static void gen_kernel(nb_text *t, const fkernel *k) {
    nb__text_printf(t, "/* %s */\nvoid nbk%d(int64_t r0, int64_t r1, int64_t cols, char *const *p, const int64_t *rs, "
           "const int64_t *cs, const double *sc) {\n", k->label, k->index);
    nb__text_printf(t, "    (void)cs; (void)sc;\n");
    for (int s = 0; s < k->nscal; s++) nb__text_printf(t, "    const double s%d = sc[%d];\n", s, s);
    nb__text_printf(t, "    for (int64_t r = r0; r < r1; r++) {\n");
    if (k->red == RED_NONE) nb__text_printf(t, "        float *o = (float *)(p[0] + r * rs[0]);\n");
    else if (k->red == RED_COLS) nb__text_printf(t, "        double *acc = (double *)p[0];\n");
    else nb__text_printf(t, "        double acc[8] = { 0 };\n");
    for (int j = 0; j < k->nin; j++)
        nb__text_printf(t, "        const %s *i%d = (const %s *)(p[%d] + r * rs[%d]);\n", c_type(k->in_dtype[j]), j,
            c_type(k->in_dtype[j]), j + 1, j + 1);
    if (k->red == RED_NONE || k->red == RED_COLS) {
        /* elementwise (also column sums): each j is independent, and an output that is an
           operand is read at the same j it is written */
        nb__text_printf(t, "        #pragma omp simd\n        for (int64_t j = 0; j < cols; j++) {\n");
        gen_body(t, k, "            ");
        if (k->red == RED_NONE) nb__text_printf(t, "            o[j] = t%d;\n        }\n", k->n - 1);
        else nb__text_printf(t, "            acc[j] += (double)t%d;\n        }\n", k->n - 1);
    } else {
        /* row and whole sums: element j in running sum j % 8, combined pairwise, the order of
           the eager sum (sum_lanes_float in backend/cpu/reduce.c); blocks of 8 vectorise */
        nb__text_printf(t, "        int64_t j0 = 0;\n        for (; j0 + 8 <= cols; j0 += 8) {\n"
                           "            #pragma omp simd\n            for (int64_t q = 0; q < 8; q++) {\n"
                           "                const int64_t j = j0 + q;\n");
        gen_body(t, k, "                ");
        nb__text_printf(t, "                acc[q] += (double)t%d;\n            }\n        }\n", k->n - 1);
        nb__text_printf(t, "        for (int64_t j = j0, q = 0; j < cols; j++, q++) {\n");
        gen_body(t, k, "            ");
        nb__text_printf(t, "            acc[q] += (double)t%d;\n        }\n", k->n - 1);
        nb__text_printf(t, "        const double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));\n");
        if (k->red == RED_ROWS) nb__text_printf(t, "        ((float *)p[0])[r] = (float)sum;\n");
        else nb__text_printf(t, "        *(double *)p[0] += sum;\n");
    }
    nb__text_printf(t, "    }\n}\n\n");
}

static uint64_t fnv1a(const char *s, size_t n, uint64_t h);

/* The CPU's identity and features, folded into the kernel cache's key: kernels are built with
   -march=native, so a cache shared between machines (a network home, a copied build tree) must
   never hand one CPU's code to another. x86: vendor, family/model/stepping and the feature
   words of cpuid leaves 1 and 7; Linux elsewhere: the hardware capability words. */
static uint64_t cpu_identity(uint64_t h) {
    unsigned words[12] = { 0 };
#if defined(__x86_64__) || defined(__i386__)
    __get_cpuid(0, &words[0], &words[1], &words[2], &words[3]);     /* max leaf, vendor */
    __get_cpuid(1, &words[4], &words[5], &words[6], &words[7]);     /* signature, features */
    words[5] &= 0x00ffffffu; /* leaf 1 ebx holds the APIC id of the core that ran this: not identity */
    __get_cpuid_count(7, 0, &words[8], &words[9], &words[10], &words[11]);
#elif defined(__linux__)
    unsigned long caps[2] = { getauxval(AT_HWCAP), getauxval(AT_HWCAP2) };
    memcpy(words, caps, sizeof caps);
#endif
    return fnv1a((const char *)words, sizeof words, h);
}

static uint64_t fnv1a(const char *s, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int mkdir_p(const char *path) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *q = buf + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
            *q = '/';
        }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
    return 0;
}

static const char *cache_dir(const nb_graph_opts *o, char *buf, size_t size) {
    const char *e;
    if (o->cache_dir && *o->cache_dir) return o->cache_dir;
    if ((e = getenv("NABLA_CACHE_DIR")) && *e) return e;
    if ((e = getenv("XDG_CACHE_HOME")) && *e) { snprintf(buf, size, "%s/nabla", e); return buf; }
    if ((e = getenv("HOME")) && *e) { snprintf(buf, size, "%s/.cache/nabla", e); return buf; }
    snprintf(buf, size, "/tmp/nabla-cache-%ld", (long)getuid());
    return buf;
}

static const char *compiler(const nb_graph_opts *o) {
    const char *e;
    if (o->cc && *o->cc) return o->cc;
    if ((e = getenv("NABLA_CC")) && *e) return e;
    if ((e = getenv("CC")) && *e) return e;
    return "cc";
}

/* log, tanh and pow are libm's, called per element even inside vectorised loops, as in the
   eager kernels: the compiled graph must agree with eager, and a GPT forward drifts 2e-4 (in
   the tests' measure) from a 1-ulp change in erf alone. erf and exp are kmath.h's, shared with
   the eager kernels: vectorisable and within 1 ulp of libm's. -fno-trapping-math lets GCC turn its
   selects into vector blends (nabla never reads the floating-point exception flags). */
#define SOURCE_HEAD                                                                                 \
    "/* fused kernels generated by nabla's graph compiler */\n#include <math.h>\n#include <stdint.h>\n\n" \
    NBK_MATH_SOURCE "\n"
#define CFLAGS "-O3 -march=native -ffp-contract=off -fno-math-errno -fno-trapping-math -fopenmp-simd -fPIC -shared"

static void set_note(char **note, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_note(char **note, const char *fmt, ...) {
    if (*note) return; /* one note is enough */
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    *note = malloc(strlen(buf) + 1);
    if (*note) strcpy(*note, buf);
}

static bool safe_path(const char *s) { return !strchr(s, '\''); }

void nb__kernels_unload(void *dl) {
    if (dl) dlclose(dl);
}

int nb__kernels_build(cgraph *g, const nb_graph_opts *opts, char **note) {
    int nk = 0;
    for (int i = 0; i < g->nn; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == NODE_FUSED) g->nodes[i].fk->index = nk++;
    if (nk == 0) return 0;
    for (int i = 0; i < g->nn; i++) { /* the interpreter's registers are checked here, not per run */
        fkernel *k = g->nodes[i].dead || g->nodes[i].op != NODE_FUSED ? NULL : g->nodes[i].fk;
        if (k && k->nin + 1 > MAX_OPERANDS) {
            nb__error("nb_compiled_run: fused kernel %s has %d operands", k->label, k->nin);
            return -1;
        }
    }
    if (opts->interpret) return 0;
#ifndef NABLA_HAVE_JIT
    set_note(note, "nb_compile: built without the JIT (NABLA_WITH_JIT=OFF); fused kernels run interpreted");
    return 0;
#endif
    const char *cc = compiler(opts);
    nb_text src = { 0 };
    nb__text_printf(&src, "%s", SOURCE_HEAD);
    for (int i = 0; i < g->nn; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == NODE_FUSED) gen_kernel(&src, g->nodes[i].fk);
    if (src.failed) {
        free(src.s);
        nb__error("nb_compiled_run: out of memory generating kernels");
        return -1;
    }
    uint64_t h = fnv1a(src.s, src.n, 0xcbf29ce484222325ull);
    h = fnv1a(cc, strlen(cc), h);
    h = fnv1a(CFLAGS, strlen(CFLAGS), h);
    h = cpu_identity(h);
    char dirbuf[1024], so[1200], csrc[1300], tmp[1300], log[1300], cmd[6000];
    const char *dir = cache_dir(opts, dirbuf, sizeof dirbuf);
    snprintf(so, sizeof so, "%s/nbk-%016llx.so", dir, (unsigned long long)h);
    void *dl = NULL;
    if (access(so, R_OK) == 0) dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        if (mkdir_p(dir) < 0) {
            set_note(note, "nb_compile: cannot create the kernel cache %s (%s); fused kernels run interpreted", dir,
                     strerror(errno));
            free(src.s);
            return 0;
        }
        snprintf(csrc, sizeof csrc, "%s/nbk-%016llx.c", dir, (unsigned long long)h);
        snprintf(tmp, sizeof tmp, "%s/nbk-%016llx.%ld.tmp", dir, (unsigned long long)h, (long)getpid());
        snprintf(log, sizeof log, "%s/nbk-%016llx.log", dir, (unsigned long long)h);
        FILE *f = fopen(csrc, "w");
        bool wrote = f && fwrite(src.s, 1, src.n, f) == src.n;
        if (f && fclose(f) != 0) wrote = false;
        if (!wrote || !safe_path(csrc) || !safe_path(cc)) {
            set_note(note, "nb_compile: cannot write kernel source %s; fused kernels run interpreted", csrc);
            free(src.s);
            return 0;
        }
        snprintf(cmd, sizeof cmd, "'%s' " CFLAGS " -o '%s' '%s' -lm > '%s' 2>&1", cc, tmp, csrc, log);
        int st = system(cmd);
        g->kernels_built++;
        if (st != 0 || rename(tmp, so) != 0) {
            unlink(tmp);
            set_note(note, "nb_compile: the C compiler failed (%s, status %d; log: %s); fused kernels run interpreted",
                     cc, st, log);
            free(src.s);
            return 0;
        }
        dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
            set_note(note, "nb_compile: cannot load %s (%s); fused kernels run interpreted", so, dlerror());
            free(src.s);
            return 0;
        }
    }
    free(src.s);
    g->dl = dl;
    for (int i = 0; i < g->nn; i++) {
        if (g->nodes[i].dead || g->nodes[i].op != NODE_FUSED) continue;
        fkernel *k = g->nodes[i].fk;
        char name[32];
        snprintf(name, sizeof name, "nbk%d", k->index);
        *(void **)&k->fn = dlsym(dl, name);
        g->kernels_native += k->fn != NULL;
    }
    return 0;
}
