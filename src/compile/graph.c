/* Graph mode's pipeline and printer: the device-neutral passes run in order over a traced graph,
   then the lowering of the backend it runs on (its passes, memory planning between, its build);
   the tensors of one run (the part of every executor that is not the backend's); and the text
   form of a graph. The tracer, the passes, fusion, loop layout and planning are trace.c,
   passes.c, fuse.c, layout.c and plan.c. */
#include "compile_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ growth helpers */

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


/* ------------------------------------------------------------------ the pipeline */

int nb__optimize(cgraph *g, const nb_graph_opts *opts, char **note) {
    unsigned off = opts->disable;
    g->dump_before = nb__graph_print(g, "traced");
    int rc;
    /* DCE first, since passes after it look at uses */
    if (!(off & NB_PASS_DCE)) {
        if ((rc = nb__pass_dce(g)) < 0) goto oom;
        g->removed_dce += rc;
    }
    if (!(off & NB_PASS_FOLD)) g->folded = nb__pass_fold(g);
    if (!(off & NB_PASS_CSE)) g->removed_cse = nb__pass_cse(g) + nb__pass_identity_views(g);
    if (!(off & NB_PASS_DCE)) {
        if ((rc = nb__pass_dce(g)) < 0) goto oom;
        g->removed_dce += rc;
    }
    if (!(off & NB_PASS_FUSE) && g->lower->fuses) {
        if ((rc = nb__pass_fuse(g)) < 0) goto oom;
        g->fused_ops = rc;
        if ((rc = nb__pass_fuse_reductions(g)) < 0) goto oom;
        g->fused_ops += rc;
    }
    /* the backend's own passes (on the cpu: GEMM epilogues, row groups), before planning, which
       keeps a row group's values alive across the group */
    if (g->lower->passes && g->lower->passes(g, opts) < 0) goto oom;
    /* values that no longer need their trace-time tensor let it go */
    for (int i = 0; i < g->nv; i++) {
        cval *v = &g->v[i];
        if (v->kind == VAL_NODE && !v->is_const && v->t) { nb_release(v->t); v->t = NULL; }
        if (v->kind == VAL_INPUT && v->t) { nb_release(v->t); v->t = NULL; }
    }
    /* the trace's buffers are garbage now, in sizes the replays will not ask for: back to the
       system with them before the arena is made (nb__graph_bind), so the trace's peak and the
       replays' do not add up */
    nb_empty_cache();
    if (nb__plan_memory(g, !(off & NB_PASS_PLAN)) < 0 || nb__make_headers(g) < 0) goto oom;
    for (int i = 0; i < g->nn; i++) g->kernels += !g->nodes[i].dead && g->nodes[i].op == NODE_FUSED;
    return g->lower->build ? g->lower->build(g, opts, note) : 0;
oom:
    if (!nb__has_error()) nb__error("nb_compiled_run: out of memory while compiling");
    return -1;
}

/* ------------------------------------------------------------------ the run's tensors */

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

nb_tensor *nb__graph_run(cgraph *g, nb_tensor *const *inputs, int n) { return g->lower->run(g, inputs, n); }

/* ------------------------------------------------------------------ printing and freeing */

static const char *meta_str(const cval *v, char *buf, size_t size) {
    char sh[160];
    snprintf(buf, size, "%s%s", nb_dtype_name(v->dtype), nb_shape_str(v->shape, sh, sizeof sh));
    return buf;
}

static void print_args(nb_text *b, const cnode *n) {
    const nb_op_args *a = &n->args;
    switch (n->op) {
    case NB_OP_ADD_SCALAR: case NB_OP_MUL_SCALAR: case NB_OP_POW_SCALAR: case NB_OP_FULL:
        nb__text_printf(b, ", %g", a->f[0]); break;
    case NB_OP_CLAMP: nb__text_printf(b, ", %g, %g", a->f[0], a->f[1]); break;
    case NB_OP_CAST: nb__text_printf(b, ", %s", nb_dtype_name(a->dtype)); break;
    case NB_OP_SUM: case NB_OP_MAX: case NB_OP_MIN: case NB_OP_SOFTMAX: case NB_OP_LOG_SOFTMAX:
        nb__text_printf(b, ", axes=%lld", (long long)a->i[0]); break;
    default: break;
    }
}

char *nb__graph_print(const cgraph *g, const char *title) {
    nb_text b = { 0 };
    char m[200];
    nb__text_printf(&b, "graph (%s): %d ops\n", title, nb__live_count(g));
    for (int i = 0; i < g->nv; i++) {
        const cval *v = &g->v[i];
        if (v->kind == VAL_INPUT) nb__text_printf(&b, "  %%%d : %s = input %d\n", i, meta_str(v, m, sizeof m), v->input);
    }
    for (int i = 0; i < g->nv; i++) {
        const cval *v = &g->v[i];
        if (v->kind == VAL_CAPTURE) nb__text_printf(&b, "  %%%d : %s = capture\n", i, meta_str(v, m, sizeof m));
        else if (v->kind == VAL_NODE && v->is_const) nb__text_printf(&b, "  %%%d : %s = constant (folded)\n", i, meta_str(v, m, sizeof m));
    }
    for (int i = 0; i < g->nn; i++) {
        const cnode *n = &g->nodes[i];
        if (n->dead) continue;
        const cval *o = &g->v[n->out];
        if (n->op == NODE_FUSED)
            nb__text_printf(&b, "  %%%d : %s = fused[%s](", n->out, meta_str(o, m, sizeof m), n->fk->label);
        else nb__text_printf(&b, "  %%%d : %s = %s(", n->out, meta_str(o, m, sizeof m), nb__ops[n->op].name);
        for (int k = 0; k < n->nin; k++) nb__text_printf(&b, "%s%%%d", k ? ", " : "", n->in[k]);
        if (n->op != NODE_FUSED) print_args(&b, n);
        nb__text_printf(&b, ")");
        if (n->op == NODE_FUSED) {
            nb__text_printf(&b, "  # %d op%s, %s", n->fk->nops, n->fk->nops == 1 ? "" : "s", n->fk->fn ? "compiled C" : "interpreted");
            if (n->fk->epilogue) nb__text_printf(&b, n->fk->tile ? ", GEMM epilogue (inside the GEMM, per piece)" : ", after a GEMM");
            if (n->fk->red != RED_NONE)
                nb__text_printf(&b, ", reduces %s", n->fk->red == RED_ALL ? "all" : n->fk->red == RED_ROWS ? "rows" : "columns");
            if (n->rgroup >= 0) nb__text_printf(&b, ", row group of %%%d", g->nodes[n->rgroup].out);
        }
        if (o->share >= 0) nb__text_printf(&b, "%s in place of %%%d", n->op == NODE_FUSED ? "," : "  #", o->share);
        else if (o->loc == LOC_VIEW && o->base == o->root && !nb__is_view(n->op) && !(n->op >= 0 && (nb__ops[n->op].flags & NB_F_INPLACE)))
            nb__text_printf(&b, "%s made in %%%d (an assign there elided)", n->op == NODE_FUSED ? "," : "  #", o->root);
        if (n->deferred && n->op == NB_OP_OPTIM_UPDATE) nb__text_printf(&b, "  # inside the GEMM of its gradient, per piece");
        nb__text_printf(&b, "\n");
    }
    for (int k = 0; k < g->ngrads; k++) nb__text_printf(&b, "  grad of %%%d = %%%d\n", g->grad_leaf[k], g->grad_val[k]);
    nb__text_printf(&b, "  return %%%d\n", g->out);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
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
