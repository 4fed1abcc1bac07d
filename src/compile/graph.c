/* Graph mode's pipeline and printer: the device-neutral passes run in order over a traced graph,
   then the lowering of the backend it runs on (its passes, memory planning between, its build);
   and the text form of a graph. The IR's store, its queries and a run's tensors are ir.c; the
   tracer, the passes, fusion, loop layout and planning are trace.c, passes.c, fuse.c, layout.c
   and plan.c. */
#include "compile_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>





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

/* ------------------------------------------------------------------ running and printing */

nb_tensor *nb__graph_run(cgraph *g, nb_tensor *const *inputs, int n) { return g->lower->run(g, inputs, n); }

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

