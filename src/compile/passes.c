/* Graph mode's first passes: mutations, dead-code elimination, constant folding, common
   sub-expressions and identity views (the IR's queries they use are ir.c's). */
#include "compile_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ mutations */


/* Roots that some in-place op writes. */
static void mark_mutations(cgraph *g) {
    for (int i = 0; i < g->nv; i++) g->v[i].mutated_root = false;
    for (int i = 0; i < g->nn; i++) {
        const cnode *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0, w = nb__inputs_written(n); k < w; k++) g->v[g->v[n->in[k]].root].mutated_root = true;
    }
}





/* ------------------------------------------------------------------ dead-code elimination */

static void mark_value(cgraph *g, int v, bool *live, int *stack, int *sp) {
    while (v >= 0) {
        int n = g->v[v].kind == VAL_NODE && !g->v[v].is_const ? g->v[v].node : -1;
        if (n >= 0 && !live[n] && !g->nodes[n].dead) {
            live[n] = true;
            stack[(*sp)++] = n;
        }
        v = g->v[v].base;
    }
}

/* Keeps what the result, the leaf gradients, in-place writes and random draws need. */
int nb__pass_dce(cgraph *g) {
    bool *live = calloc((size_t)g->nn + 1, sizeof *live);
    int *stack = malloc(sizeof(int) * ((size_t)g->nn + 1));
    if (!live || !stack) { free(live); free(stack); return -1; }
    int sp = 0;
    mark_value(g, g->out, live, stack, &sp);
    for (int k = 0; k < g->ngrads; k++) mark_value(g, g->grad_val[k], live, stack, &sp);
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        /* in-place writes are the point of a training step; random ops advance the generator
           as the eager code did, so later draws match */
        if (!n->dead && (nb__is_inplace(n->op) || (n->op >= 0 && nb__is_random(n->op))) && !live[i]) {
            live[i] = true;
            stack[sp++] = i;
        }
    }
    while (sp > 0) {
        cnode *n = &g->nodes[stack[--sp]];
        for (int k = 0; k < n->nin; k++) mark_value(g, n->in[k], live, stack, &sp);
    }
    int removed = 0;
    for (int i = 0; i < g->nn; i++)
        if (!g->nodes[i].dead && !live[i]) {
            g->nodes[i].dead = true;
            removed++;
        }
    free(live);
    free(stack);
    return removed;
}

/* ------------------------------------------------------------------ constant folding */

/* A value computed only from constants, on storage no one writes in place, is its trace-time
   tensor: the node that made it need not run again. Random and uninitialised makers are not. */
int nb__pass_fold(cgraph *g) {
    mark_mutations(g);
    int folded = 0;
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || !nb__is_pure(n->op)) continue;
        cval *o = &g->v[n->out];
        if (g->v[o->root].mutated_root || !o->t) continue; /* no tensor: the tracer let it go */
        bool all = true;
        for (int k = 0; k < n->nin && all; k++) all = g->v[n->in[k]].is_const;
        if (!all) continue;
        o->is_const = true;
        n->dead = true;
        folded++;
    }
    return folded;
}

/* ------------------------------------------------------------------ common sub-expressions */

static bool same_args(const nb_op_args *a, const nb_op_args *b) {
    if (memcmp(a->i, b->i, sizeof a->i) || memcmp(a->f, b->f, sizeof a->f) || a->dtype != b->dtype) return false;
    if (a->shape.ndim != b->shape.ndim) return false;
    return memcmp(a->shape.dim, b->shape.dim, sizeof(int64_t) * (size_t)a->shape.ndim) == 0;
}

static void replace_value(cgraph *g, int from, int to) {
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] == from) n->in[k] = to;
    }
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].base == from) g->v[i].base = to;
    if (g->out == from) g->out = to;
    for (int k = 0; k < g->ngrads; k++)
        if (g->grad_val[k] == from) g->grad_val[k] = to;
}

/* Two nodes with the same op, inputs and arguments compute the same value, unless an input's
   storage is written in place somewhere (then their order matters) or the op draws randoms. */
int nb__pass_cse(cgraph *g) {
    mark_mutations(g);
    int removed = 0;
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || !nb__is_pure(n->op)) continue;
        bool stable = true;
        for (int k = 0; k < n->nin && stable; k++) stable = !g->v[g->v[n->in[k]].root].mutated_root;
        if (!stable) continue;
        for (int j = 0; j < i; j++) {
            cnode *m = &g->nodes[j];
            if (m->dead || m->op != n->op || m->nin != n->nin) continue;
            if (memcmp(m->in, n->in, sizeof(int) * (size_t)n->nin) || !same_args(&m->args, &n->args)) continue;
            if (g->v[m->out].dtype != g->v[n->out].dtype || !nb__shape_eq(&g->v[m->out].shape, &g->v[n->out].shape))
                continue;
            replace_value(g, n->out, m->out);
            n->dead = true;
            removed++;
            break;
        }
    }
    return removed;
}

/* A view that shows its root exactly (the same offset, sizes, strides and dtype: a permute of a
   permute, say, as the backward of a linear layer's weight makes) is its root: its readers read
   the root, so later passes see the value itself (a product a fused loop may run on in place).
   Returns the number of views bypassed; the dead-code pass removes their nodes. */
int nb__pass_identity_views(cgraph *g) {
    int bypassed = 0;
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || !nb__is_view(n->op)) continue;
        int v = n->out, r = g->v[v].root;
        const cval *x = &g->v[v], *rv = &g->v[r];
        if (r == v || x->dtype != rv->dtype || !nb__shape_eq(&x->shape, &rv->shape)) continue;
        int64_t off = 0;
        for (int w = v; w != r; w = g->v[w].base) off += g->v[w].delta;
        bool same = off == 0;
        for (int d = 0; d < x->shape.ndim && same; d++) same = x->shape.dim[d] == 1 || x->stride[d] == rv->stride[d];
        if (!same) continue;
        replace_value(g, v, r);
        bypassed++;
    }
    return bypassed;
}

