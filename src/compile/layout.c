/* The loop layout of a fused kernel: its loop's axes collapsed where every operand is contiguous
   across them, each operand's byte strides, and whether it walks as [rows, cols]. Fusion decides
   with it (a sum fuses only when its operands walk as rows), and a lowering runs by it. */
#include "compile_impl.h"
#include <stdlib.h>
#include <string.h>

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

