/* The cpu's runs of fused kernels: an interpreter of their instructions (when no C compiler was
   there, or interpretation was asked for), and the parallel drivers that run a kernel, compiled or
   interpreted, over its rows: alone, as a row group, or on the pieces of a GEMM. */
#include "lower.h"
#include "../../formulas.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ interpreter */

#define BLK 64

static inline float load1(const char *p, nb_dtype d) {
    switch (d) {
    case NB_F32: return *(const float *)p;
    case NB_F64: return (float)*(const double *)p;
    case NB_I64: return (float)*(const int64_t *)p;
    case NB_I32: return (float)*(const int32_t *)p;
    case NB_I8: return *(const int8_t *)p;
    case NB_BOOL: return *(const uint8_t *)p != 0;
    default: return *(const uint8_t *)p;
    }
}

static void interpret(const fkernel *k, int64_t r0, int64_t r1, int64_t cols, char *const *p, const int64_t *rs,
                      const int64_t *cs) {
    float reg[k->n][BLK]; /* at most a few hundred registers: see MAX_GROUP in src/compile/fuse.c */
    const double *sc = k->scal;
    for (int64_t r = r0; r < r1; r++) {
        double lane[8] = { 0 }; /* row and whole sums: element j in lane j % 8, as sum_lanes_float */
        for (int64_t j0 = 0; j0 < cols; j0 += BLK) {
            int n = (int)(cols - j0 < BLK ? cols - j0 : BLK);
            for (int i = 0; i < k->n; i++) {
                const finstr *c = &k->code[i];
                float *o = reg[i];
                const float *a = reg[c->a], *b = reg[c->b], *w = reg[c->c];
                bool unary = c->op >= 0 && nb__cpu_op_info[c->op].nin == 1;
                const double s0 = unary ? sc[c->s] : 0, s1 = unary ? sc[c->s + 1] : 0;
                switch (c->op) {
                case FI_LOAD: {
                    const char *q = p[c->a + 1] + r * rs[c->a + 1] + j0 * cs[c->a + 1];
                    for (int e = 0; e < n; e++) o[e] = load1(q + e * cs[c->a + 1], k->in_dtype[c->a]);
                    break;
                }
/* every fusible op of ops.def: its formula over the block, by its number of inputs */
#define FORMULA_1(name) nbf_##name(a[e], s0, s1)
#define FORMULA_2(name) nbf_##name(a[e], b[e])
#define FORMULA_3(name) nbf_##name(a[e], b[e], w[e])
#define FUSE_CASE_NONE(ID, name, nin)
#define FUSE_CASE_EW(ID, name, nin) \
                case NB_OP_##ID: for (int e = 0; e < n; e++) o[e] = FORMULA_##nin(name); break;
#define FUSE_CASE_CHEAP FUSE_CASE_EW
#define FUSE_CASE_CMP FUSE_CASE_NONE
#define FUSE_CASE_MOVE FUSE_CASE_EW
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) FUSE_CASE_##fuse(ID, name, nin)
#include "../../../ops/ops.def"
#undef NB_OP
                default: break; /* not reached: build_kernel emits loads and fusible ops only */
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
