/* Graph mode's fusion: elementwise chains into one kernel, into the sums that consume them and into a
   product's epilogue, and row groups (kernels over the same rows run together, chunk by chunk). */
#include "compile_impl.h"
#include "../backend/cpu/iter.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ fusion */

static bool loadable(nb_dtype d) {
    return d == NB_F32 || d == NB_F64 || d == NB_BOOL || d == NB_U8 || d == NB_I8 || d == NB_I32 || d == NB_I64;
}

static bool fusable(const cgraph *g, const cnode *n) {
    if (n->dead || n->op < 0 || nb__ops[n->op].fuse == NB_FUSE_NONE) return false;
    const cval *o = &g->v[n->out];
    if (o->dtype != NB_F32 || o->base >= 0 || o->is_const) return false;
    for (int k = 0; k < n->nin; k++) {
        const cval *x = &g->v[n->in[k]];
        if (!loadable(x->dtype)) return false;
        if (x->dtype != NB_F32 && !(n->op == NB_OP_CAST || (n->op == NB_OP_WHERE && k == 0))) return false;
        if (x->shape.ndim > o->shape.ndim) return false;
    }
    return true;
}

/* Ops cheap enough to recompute for every element of a broadcast result (ops.def's CHEAP). */
static bool cheap(int op) { return op >= 0 && nb__ops[op].fuse == NB_FUSE_CHEAP; }

/* Whether value v is a product that only its consumer reads (so that consumer is its epilogue). */
static bool private_product(const cgraph *g, int v, const nb_shape *shape) {
    const cval *x = &g->v[v];
    return x->kind == VAL_NODE && !x->is_const && x->uses == 1 && x->base < 0 && x->node >= 0 &&
           g->nodes[x->node].op == NB_OP_MATMUL && x->dtype == NB_F32 && nb__shape_eq(&x->shape, shape);
}

#define MAX_GROUP 48

typedef struct {
    int member[MAX_GROUP]; /* node indices */
    int n;
} group;

static bool in_group(const group *gr, int node) {
    for (int i = 0; i < gr->n; i++)
        if (gr->member[i] == node) return true;
    return false;
}

static int cmp_pos(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static char *dup_str(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

/* Builds the kernel for a group whose last member (by position) makes the result. */
static fkernel *build_kernel(cgraph *g, group *gr) {
    qsort(gr->member, (size_t)gr->n, sizeof(int), cmp_pos);
    fkernel *k = calloc(1, sizeof *k);
    int cap_in = 4 * gr->n + 4, cap_code = 5 * gr->n + 4;
    if (!k) return NULL;
    k->in = malloc(sizeof(int) * (size_t)cap_in);
    k->in_dtype = malloc(sizeof(nb_dtype) * (size_t)cap_in);
    k->code = malloc(sizeof(finstr) * (size_t)cap_code);
    k->scal = malloc(sizeof(double) * (size_t)(2 * gr->n + 1));
    int *reg_of_node = malloc(sizeof(int) * (size_t)gr->n);
    char label[512] = "";
    if (!k->in || !k->in_dtype || !k->code || !k->scal || !reg_of_node) goto oom;
    for (int m = 0; m < gr->n; m++) {
        cnode *n = &g->nodes[gr->member[m]];
        int src[3] = { 0, 0, 0 };
        for (int a = 0; a < n->nin; a++) {
            int v = n->in[a], p = g->v[v].node, reg = -1;
            for (int q = 0; q < m; q++)
                if (gr->member[q] == p && g->v[v].kind == VAL_NODE) reg = reg_of_node[q];
            if (reg < 0) { /* an external input: load it once */
                int idx = -1;
                for (int q = 0; q < k->nin; q++)
                    if (k->in[q] == v) idx = q;
                if (idx < 0) {
                    idx = k->nin++;
                    k->in[idx] = v;
                    k->in_dtype[idx] = g->v[v].dtype;
                }
                for (int q = 0; q < k->n; q++)
                    if (k->code[q].op == FI_LOAD && k->code[q].a == idx) reg = q;
                if (reg < 0) {
                    k->code[k->n] = (finstr){ .op = FI_LOAD, .a = idx };
                    reg = k->n++;
                }
            }
            src[a] = reg;
        }
        finstr ins = { .op = n->op, .a = src[0], .b = src[1], .c = src[2], .s = k->nscal };
        if (nb__ops[n->op].nin == 1) { /* a unary formula takes the op's two float arguments */
            k->scal[k->nscal++] = n->args.f[0];
            k->scal[k->nscal++] = n->args.f[1];
        }
        k->code[k->n] = ins;
        reg_of_node[m] = k->n++;
        size_t len = strlen(label);
        snprintf(label + len, sizeof label - len, "%s%s", m ? "+" : "", nb__ops[n->op].name);
    }
    k->nops = gr->n;
    k->label = dup_str(label);
    if (!k->label) goto oom;
    k->loop = g->v[g->nodes[gr->member[gr->n - 1]].out].shape;
    free(reg_of_node);
    return k;
oom:
    free(reg_of_node);
    free(k->in); free(k->in_dtype); free(k->code); free(k->scal); free(k);
    return NULL;
}

void nb__kernel_free(fkernel *k) {
    if (!k) return;
    free(k->in); free(k->in_dtype); free(k->code); free(k->scal); free(k->label); free(k->st); free(k->cls);
    free(k);
}

/* Merges chains of elementwise f32 ops into one kernel each: a producer joins its consumer when
   the consumer alone uses its result, the shapes agree, and no in-place write between the two
   changes what the producer reads. */
int nb__pass_fuse(cgraph *g) {
    nb__count_uses(g);
    int merged = 0;
    for (int i = g->nn - 1; i >= 0; i--) {
        cnode *root = &g->nodes[i];
        if (!fusable(g, root) || root->fk) continue;
        group gr = { .member = { i }, .n = 1 };
        const nb_shape *shape = &g->v[root->out].shape;
        for (int scan = 0; scan < gr.n; scan++) {
            cnode *m = &g->nodes[gr.member[scan]];
            for (int a = 0; a < m->nin && gr.n < MAX_GROUP; a++) {
                int v = m->in[a];
                cval *x = &g->v[v];
                if (x->kind != VAL_NODE || x->is_const || x->base >= 0 || x->uses != 1) continue;
                if (x->node < 0 || in_group(&gr, x->node)) continue;
                cnode *p = &g->nodes[x->node];
                if (!fusable(g, p) || p->fk || nb__is_grad_value(g, v) || v == g->out) continue;
                /* a producer of a smaller, broadcast shape is recomputed per element: only when cheap */
                if (!nb__shape_eq(&x->shape, shape) && !(cheap(p->op) && x->shape.ndim <= shape->ndim)) continue;
                bool safe = true;
                for (int b = 0; b < p->nin && safe; b++)
                    safe = !nb__written_between(g, g->v[p->in[b]].root, p->pos, root->pos);
                if (!safe) continue;
                gr.member[gr.n++] = x->node;
            }
        }
        bool epilogue = false; /* a lone op on a product still saves a pass: it runs in place */
        for (int a = 0; a < root->nin && gr.n == 1; a++) epilogue = epilogue || private_product(g, root->in[a], shape);
        if (gr.n < 2 && !epilogue) continue;
        fkernel *k = build_kernel(g, &gr);
        if (!k) return -1;
        for (int m = 0; m < gr.n; m++)
            if (gr.member[m] != i) g->nodes[gr.member[m]].dead = true;
        free(root->in);
        root->in = malloc(sizeof(int) * (size_t)k->nin);
        if (!root->in) { nb__kernel_free(k); return -1; }
        memcpy(root->in, k->in, sizeof(int) * (size_t)k->nin);
        root->nin = k->nin;
        root->op = NODE_FUSED;
        root->fk = k;
        merged += gr.n - 1;
        nb__count_uses(g);
    }
    return merged;
}

/* The reduction a sum makes of its operand, seen as [rows, cols] (leading axes, last axis). */
static red_kind reduction_of(const cnode *n, const cval *x) {
    int nd = x->shape.ndim;
    int64_t mask = n->args.i[0], all = nd ? ((int64_t)1 << nd) - 1 : 0;
    if (nd == 0) return RED_NONE;
    if ((mask & all) == all) return RED_ALL;
    if ((mask & all) == ((int64_t)1 << (nd - 1))) return RED_ROWS;
    if (nd >= 2 && (mask & all) == all - ((int64_t)1 << (nd - 1))) return RED_COLS;
    return RED_NONE;
}

/* A sum whose operand an elementwise chain made for it alone takes the chain in: the kernel
   reduces as it computes, and the operand is never stored. */
int nb__pass_fuse_reductions(cgraph *g) {
    nb__count_uses(g);
    int merged = 0;
    for (int i = 0; i < g->nn; i++) {
        cnode *s = &g->nodes[i];
        if (s->dead || s->op != NB_OP_SUM || g->v[s->out].dtype != NB_F32) continue;
        int xv = s->in[0];
        cval *x = &g->v[xv];
        if (x->kind != VAL_NODE || x->is_const || x->base >= 0 || x->uses != 1 || x->dtype != NB_F32) continue;
        if (x->node < 0 || nb__is_grad_value(g, xv) || xv == g->out) continue;
        cnode *p = &g->nodes[x->node];
        red_kind red = reduction_of(s, x);
        if (p->dead || red == RED_NONE || (p->op != NODE_FUSED && !fusable(g, p))) continue;
        if (p->op == NODE_FUSED && (p->fk->red != RED_NONE || p->fk->epilogue)) continue;
        bool safe = true;
        for (int b = 0; b < p->nin && safe; b++) safe = !nb__written_between(g, g->v[p->in[b]].root, p->pos, s->pos);
        if (!safe) continue;
        fkernel *k = p->fk;
        if (!k) {
            group gr = { .member = { x->node }, .n = 1 };
            if (!(k = build_kernel(g, &gr))) return -1;
        }
        k->red = red;
        if (nb__kernel_layout(k, g, xv) != 0) { /* operands that do not walk as [rows, cols] */
            k->red = RED_NONE;
            if (!p->fk) nb__kernel_free(k);
            continue;
        }
        size_t len = strlen(k->label);
        char *label = realloc(k->label, len + 5);
        if (!label) { if (!p->fk) nb__kernel_free(k); return -1; }
        memcpy(label + len, "+sum", 5);
        k->label = label;
        k->nops++;
        free(s->in);
        s->in = malloc(sizeof(int) * (size_t)k->nin);
        if (!s->in) { if (!p->fk) nb__kernel_free(k); return -1; }
        memcpy(s->in, k->in, sizeof(int) * (size_t)k->nin);
        s->nin = k->nin;
        s->op = NODE_FUSED;
        s->fk = k;
        p->fk = NULL;
        p->dead = true;
        merged++;
        nb__count_uses(g);
    }
    return merged;
}

/* A fused kernel that reads, as one operand, the product a matmul made just for it runs right
   after that matmul, in place on its buffer: the GEMM's epilogue. */
void nb__mark_epilogues(cgraph *g) {
    nb__count_uses(g);
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || n->op != NODE_FUSED || n->fk->red != RED_NONE) continue;
        for (int a = 0; a < n->nin; a++)
            if (private_product(g, n->in[a], &g->v[n->out].shape)) n->fk->epilogue = true;
    }
}

/* ------------------------------------------------------------------ row groups */

/* Whether two loops have the same leading axes (all but the last): the same rows. */
static bool same_rows(const nb_shape *a, const nb_shape *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim - 1; d++)
        if (a->dim[d] != b->dim[d]) return false;
    return true;
}

/* How value x is read by a loop over `loop`: 'r' one row of x per row of the loop, 'i' the same
   for every row (it broadcasts over the leading axes), 0 neither. */
static char row_access(const cval *x, const nb_shape *loop) {
    bool aligned = true, invariant = true;
    for (int d = 0; d < loop->ndim - 1; d++) {
        if (loop->dim[d] == 1) continue;
        int di = d - (loop->ndim - x->shape.ndim);
        int64_t n = di < 0 ? 1 : x->shape.dim[di];
        aligned = aligned && n == loop->dim[d];
        invariant = invariant && n == 1;
    }
    return aligned ? 'r' : invariant ? 'i' : 0;
}

/* A lone f32 sum over the last axis (group_loop said so) becomes a one-load fused kernel, so it
   can join a row group. NULL when out of memory. */
static fkernel *sum_kernel(const cgraph *g, const cnode *s) {
    const cval *x = &g->v[s->in[0]];
    fkernel *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->in = malloc(sizeof(int));
    k->in_dtype = malloc(sizeof(nb_dtype));
    k->code = malloc(sizeof(finstr));
    k->scal = malloc(sizeof(double));
    k->label = dup_str("sum");
    if (!k->in || !k->in_dtype || !k->code || !k->scal || !k->label) { nb__kernel_free(k); return NULL; }
    k->nin = 1;
    k->in[0] = s->in[0];
    k->in_dtype[0] = NB_F32;
    k->code[0] = (finstr){ .op = FI_LOAD, .a = 0 };
    k->n = 1;
    k->nops = 1;
    k->red = RED_ROWS;
    k->loop = x->shape;
    return k;
}

/* The loop of a node that may join a row group (a fused kernel, or a lone row sum), else NULL. */
static const nb_shape *group_loop(const cgraph *g, const cnode *n) {
    if (n->dead) return NULL;
    if (n->op == NODE_FUSED)
        return n->fk->epilogue || n->fk->tile || (n->fk->red != RED_NONE && n->fk->red != RED_ROWS) ? NULL : &n->fk->loop;
    if (n->op == NB_OP_SUM && g->v[n->in[0]].dtype == NB_F32 && g->v[n->out].dtype == NB_F32 &&
        reduction_of(n, &g->v[n->in[0]]) == RED_ROWS)
        return &g->v[n->in[0]].shape;
    return NULL;
}

/* Row groups: runs of consecutive fused kernels over the same rows where each reads what the
   others make only in the row it computes, the rest only as values shared by every row (a layer
   norm: the row sum, the centring, the sum of squares, the scale, the affine map). They run
   chunk of rows by chunk of rows, chunks in parallel, so a row stays in cache from the first
   kernel to the last and five small serial loops become one parallel one. Each row computes
   exactly what it did alone. Returns the number of groups. */
int nb__pass_row_groups(cgraph *g) {
    int groups = 0;
    for (int i = 0; i < g->nn; i++) {
        const nb_shape *loop = group_loop(g, &g->nodes[i]);
        if (!loop || loop->ndim < 2 || g->nodes[i].rgroup >= 0) continue;
        int member[MAX_ROW_GROUP], n = 0;
        for (int j = i; j < g->nn && n < MAX_ROW_GROUP; j++) {
            cnode *c = &g->nodes[j];
            if (c->dead) continue;
            const nb_shape *l = group_loop(g, c);
            if (!l || !same_rows(l, loop)) break;
            /* every operand: a row per row, or shared by every row and made outside the group */
            bool ok = true;
            for (int a = -1; a < c->nin && ok; a++) {
                int v = a < 0 ? c->out : c->in[a];
                const cval *x = &g->v[v];
                char acc = a < 0 ? 'r' : row_access(x, l);
                if (acc == 'r' && a < 0 && c->op == NODE_FUSED && c->fk->red == RED_NONE)
                    acc = nb__shape_eq(&x->shape, l) ? 'r' : 0;
                if (acc == 'i')
                    for (int m = 0; m < n && ok; m++) ok = g->v[v].root != g->v[g->nodes[member[m]].out].root;
                ok = ok && acc != 0;
            }
            if (!ok) break;
            member[n++] = j;
        }
        if (n < 2) continue;
        /* lone sums become kernels; every member must walk its operands as [rows, cols] */
        fkernel *made[MAX_ROW_GROUP] = { 0 };
        bool ok = true;
        for (int m = 0; m < n && ok; m++) {
            cnode *c = &g->nodes[member[m]];
            fkernel *k = c->fk;
            if (c->op != NODE_FUSED && !(k = made[m] = sum_kernel(g, c))) {
                for (int q = 0; q < m; q++) nb__kernel_free(made[q]);
                return -1;
            }
            k->rows = true;
            int rc = nb__kernel_layout(k, g, k->red != RED_NONE ? -1 : c->out);
            k->rows = false;
            if (rc < 0) {
                for (int q = 0; q <= m; q++) nb__kernel_free(made[q]);
                return -1;
            }
            ok = rc == 0;
        }
        if (!ok) {
            for (int m = 0; m < n; m++) nb__kernel_free(made[m]);
            continue;
        }
        for (int m = 0; m < n; m++) {
            cnode *c = &g->nodes[member[m]];
            if (made[m]) {
                c->op = NODE_FUSED;
                c->fk = made[m];
            }
            c->rgroup = member[0];
            c->fk->rows = true;
        }
        groups++;
        i = member[n - 1];
    }
    return groups;
}
