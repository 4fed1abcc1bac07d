/* The graph IR's store and its queries: growing the value and node arrays, new values, a value's
   metadata, the op table's facts the passes ask (views, purity, random draws, in-place writes),
   uses and liveness, in-place writes between two positions, how a sum reduces, private products,
   the tensors of one run (the frame) and freeing a graph. Everything above it (the tracer, the
   passes, fusion, planning, the pipeline) and a backend's lowering call into this file; it calls
   into none of them. */
#include "compile_impl.h"
#include <stdlib.h>
#include <string.h>

int nb__grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
    *p = q;
    *cap = c;
    return 0;
}

int nb__new_value(cgraph *g) {
    if (nb__grow((void **)&g->v, &g->capv, g->nv + 1, sizeof(cval)) < 0) return -1;
    cval *v = &g->v[g->nv];
    memset(v, 0, sizeof *v);
    v->base = -1;
    v->root = g->nv;
    v->share = -1;
    v->node = -1;
    return g->nv++;
}

void nb__set_meta(cval *v, const nb_tensor *t) {
    v->shape = t->shape;
    v->dtype = t->dtype;
    memcpy(v->stride, t->stride, sizeof v->stride);
    v->toff = t->offset;
}

/* ---- what the op table says of an op (ops.def's flags) ---- */

bool nb__is_random(int op) { return op >= 0 && (nb__ops[op].flags & NB_F_RANDOM); }

bool nb__is_pure(int op) {
    return op >= 0 && !(nb__ops[op].flags & (NB_F_INPLACE | NB_F_RANDOM | NB_F_UNINIT));
}

bool nb__is_inplace(int op) { return op >= 0 && (nb__ops[op].flags & NB_F_INPLACE); }

bool nb__is_view(int op) { return op >= 0 && (nb__ops[op].flags & NB_F_VIEW); }

/* How many of node n's inputs it writes in place: input 0, every input (host_call), or none. */
int nb__inputs_written(const cnode *n) {
    if (!nb__is_inplace(n->op)) return 0;
    return nb__ops[n->op].flags & NB_F_WRITES_ALL ? n->nin : 1;
}

/* Whether an in-place op between trace positions lo and hi (exclusive) writes root r. */
bool nb__written_between(const cgraph *g, int r, int lo, int hi) {
    for (int i = 0; i < g->nn; i++) {
        const cnode *n = &g->nodes[i];
        if (n->dead || n->pos <= lo || n->pos >= hi) continue;
        for (int k = 0, w = nb__inputs_written(n); k < w; k++)
            if (g->v[n->in[k]].root == r) return true;
    }
    return false;
}

/* ---- uses and liveness ---- */

bool nb__is_grad_value(const cgraph *g, int v) {
    for (int k = 0; k < g->ngrads; k++)
        if (g->grad_val[k] == v) return true;
    return false;
}

/* Counts each value's uses by live nodes, the result and the gradients handed to leaves. */
void nb__count_uses(cgraph *g) {
    for (int i = 0; i < g->nv; i++) g->v[i].uses = 0;
    for (int i = 0; i < g->nn; i++) {
        if (g->nodes[i].dead) continue;
        for (int k = 0; k < g->nodes[i].nin; k++) g->v[g->nodes[i].in[k]].uses++;
    }
    g->v[g->out].uses++;
    for (int k = 0; k < g->ngrads; k++) g->v[g->grad_val[k]].uses++;
}

int nb__live_count(const cgraph *g) {
    int n = 0;
    for (int i = 0; i < g->nn; i++) n += !g->nodes[i].dead;
    return n;
}

red_kind nb__reduction_of(const cnode *n, const cval *x) {
    int nd = x->shape.ndim;
    int64_t mask = n->args.i[0], all = nd ? ((int64_t)1 << nd) - 1 : 0;
    if (nd == 0) return RED_NONE;
    if ((mask & all) == all) return RED_ALL;
    if ((mask & all) == ((int64_t)1 << (nd - 1))) return RED_ROWS;
    if (nd >= 2 && (mask & all) == all - ((int64_t)1 << (nd - 1))) return RED_COLS;
    return RED_NONE;
}

bool nb__private_product(const cgraph *g, int v, const nb_shape *shape) {
    const cval *x = &g->v[v];
    return x->kind == VAL_NODE && !x->is_const && x->uses == 1 && x->base < 0 && x->node >= 0 &&
           g->nodes[x->node].op == NB_OP_MATMUL && x->dtype == NB_F32 && nb__shape_eq(&x->shape, shape);
}

void nb__kernel_free(fkernel *k) {
    if (!k) return;
    free(k->in); free(k->in_dtype); free(k->code); free(k->scal); free(k->label); free(k->st); free(k->cls);
    free(k);
}

int nb__frame_begin(cgraph *g, nb_tensor *const *inputs, nb_graph_frame *f) {
    if (g->arena_bytes > 0 && !g->arena) {
        nb__error("nb_compiled_run: the graph has no arena bound");
        return -1;
    }
    /* the gradients the last run handed to the leaves go before this run makes new ones, as
       the eager step's zero_grad drops them before its backward, so two sets never live at
       once (a caller that kept one has its own reference). The graph never reads them: what
       it reads of a leaf's gradient is the tensor it captured */
    for (int k = 0; k < g->ngrads; k++) {
        const cval *lv = &g->v[g->grad_leaf[k]];
        nb_tensor *leaf = lv->kind == VAL_INPUT ? inputs[lv->input] : lv->t;
        if (g->v[g->v[g->grad_val[k]].root].loc != LOC_FRESH || !leaf->grad) continue;
        nb_tensor *old = leaf->grad;
        leaf->grad = NULL;
        nb_release(old);
    }
    f->vt = g->nv <= 256 ? f->small : nb__alloc(sizeof(nb_tensor *) * (size_t)g->nv);
    f->own = f->vt ? (bool *)nb__alloc((size_t)g->nv) : NULL;
    if (!f->own) {
        if (f->vt && f->vt != f->small) nb__free(f->vt, sizeof(nb_tensor *) * (size_t)g->nv);
        nb__error("nb_compiled_run: out of memory");
        return -1;
    }
    memset(f->own, 0, (size_t)g->nv);
    nb_tensor **vt = f->vt;
    int rc = 0;
    for (int i = 0; i < g->nv; i++) {
        cval *v = &g->v[i];
        vt[i] = NULL;
        if (rc) continue;
        switch (v->loc) {
        case LOC_EXTERNAL: vt[i] = v->kind == VAL_INPUT ? inputs[v->input] : v->t; break;
        case LOC_ARENA:
        case LOC_OWN: vt[i] = g->hdr[i]; break;
        case LOC_FRESH:
            if (!(vt[i] = nb__tensor_new_on(v->shape, v->dtype, g->device))) rc = -1;
            f->own[i] = true;
            break;
        case LOC_NONE: break;
        case LOC_VIEW:
            if (g->hdr[i]) vt[i] = g->hdr[i];
            else if (vt[v->base]) {
                nb_tensor *b = vt[v->base];
                if (!(vt[i] = nb__tensor_view(b, v->shape, v->stride, b->offset + v->delta))) rc = -1;
                else { vt[i]->dtype = v->dtype; f->own[i] = true; }
            }
            break;
        }
    }
    if (rc < 0) {
        nb__frame_end(g, inputs, f, false);
        return -1;
    }
    return 0;
}

nb_tensor *nb__frame_end(cgraph *g, nb_tensor *const *inputs, nb_graph_frame *f, bool ok) {
    nb_tensor **vt = f->vt, *result = NULL;
    if (ok) {
        for (int k = 0; k < g->ngrads; k++) {
            const cval *lv = &g->v[g->grad_leaf[k]];
            nb_tensor *leaf = lv->kind == VAL_INPUT ? inputs[lv->input] : lv->t, *gr = vt[g->grad_val[k]];
            if (leaf->grad == gr) continue;
            nb_tensor *old = leaf->grad;
            leaf->grad = nb_retain(gr);
            if (old) nb_release(old);
        }
        result = nb_retain(vt[g->out]);
    }
    for (int i = 0; i < g->nv; i++)
        if (f->own[i] && vt[i]) nb_release(vt[i]);
    nb__free(f->own, (size_t)g->nv);
    if (vt != f->small) nb__free(vt, sizeof(nb_tensor *) * (size_t)g->nv);
    return result;
}

void nb__graph_free(cgraph *g) {
    if (!g) return;
    if (g->lower && g->lower->release) g->lower->release(g); /* first: it may keep state per node or kernel */
    if (g->hdr)
        for (int i = 0; i < g->nv; i++)
            if (g->hdr[i]) nb_release(g->hdr[i]);
    free(g->hdr);
    if (g->arena) nb_release(g->arena);
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].t) nb_release(g->v[i].t);
    for (int i = 0; i < g->nn; i++) {
        free(g->nodes[i].in);
        nb__kernel_free(g->nodes[i].fk);
    }
    free(g->v);
    free(g->nodes);
    free(g->grad_leaf);
    free(g->grad_val);
    free(g->dump_before);
    free(g);
}
