/* Graph mode's fusion, device-neutral: elementwise chains into one kernel, and into the sums that
   consume them. Where such kernels run (a GEMM's epilogue, a row group) is the lowering's call. */
#include "compile_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ fusion */

static bool loadable(nb_dtype d) {
    return d == NB_F32 || d == NB_F64 || d == NB_BOOL || d == NB_U8 || d == NB_I8 || d == NB_I32 || d == NB_I64;
}

/* Whether ops.def's fuse column lets op join a fused kernel. */
static bool fuses(int op) {
    nb_fuse_kind f = nb__ops[op].fuse;
    return f == NB_FUSE_EW || f == NB_FUSE_CHEAP || f == NB_FUSE_MOVE;
}

static bool fusable(const cgraph *g, const cnode *n) {
    if (n->dead || n->op < 0 || !fuses(n->op)) return false;
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
static bool cheap(int op) { return op >= 0 && (nb__ops[op].fuse == NB_FUSE_CHEAP || nb__ops[op].fuse == NB_FUSE_MOVE); }


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
        for (int a = 0; a < root->nin && gr.n == 1; a++) epilogue = epilogue || nb__private_product(g, root->in[a], shape);
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
        red_kind red = nb__reduction_of(s, x);
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
