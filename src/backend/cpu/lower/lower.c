/* The cpu backend's lowering of compiled graphs: its passes before memory planning (a fused loop
   on a product becomes the GEMM's epilogue; kernels over the same rows form row groups), its build
   after planning (epilogues and optimizer updates moved into the GEMM's pieces, loops laid out,
   kernels compiled), and the executor that runs the result node by node on the cpu kernels. */
#include "lower.h"
#include <stdlib.h>
#include <string.h>

const nb_cpu_op_info nb__cpu_op_info[NB_OP_COUNT] = {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) [NB_OP_##ID] = { #name, nin },
#include "../../../ops/ops.def"
#undef NB_OP
};

/* ------------------------------------------------------------------ GEMM epilogues */

/* A fused kernel that reads, as one operand, the product a matmul made just for it runs right
   after that matmul, in place on its buffer: the GEMM's epilogue. */
static void mark_epilogues(cgraph *g) {
    nb__count_uses(g);
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || n->op != NODE_FUSED || n->fk->red != RED_NONE) continue;
        for (int a = 0; a < n->nin; a++)
            if (nb__private_product(g, n->in[a], &g->v[n->out].shape)) n->fk->epilogue = true;
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
    k->label = malloc(sizeof "sum");
    if (k->label) memcpy(k->label, "sum", sizeof "sum");
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
        nb__reduction_of(n, &g->v[n->in[0]]) == RED_ROWS)
        return &g->v[n->in[0]].shape;
    return NULL;
}

/* Row groups: runs of consecutive fused kernels over the same rows where each reads what the
   others make only in the row it computes, the rest only as values shared by every row (a layer
   norm: the row sum, the centring, the sum of squares, the scale, the affine map). They run
   chunk of rows by chunk of rows, chunks in parallel, so a row stays in cache from the first
   kernel to the last and five small serial loops become one parallel one. Each row computes
   exactly what it did alone. Returns the number of groups. */
static int pass_row_groups(cgraph *g) {
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

/* ------------------------------------------------------------------ epilogues inside the GEMM */

/* A fused loop that works in place on a product only it reads moves into the GEMM: it runs on
   each piece as soon as the piece is final, on the thread that made it. It may when everything
   else it reads exists before the product and is not written in between. */
static void attach_tile_epilogues(cgraph *g) {
    for (int i = 0; i < g->nn; i++) {
        cnode *f = &g->nodes[i];
        if (f->dead || f->op != NODE_FUSED || !f->fk->epilogue || f->fk->red != RED_NONE) continue;
        cval *o = &g->v[f->out];
        if (o->share < 0 || o->shape.ndim < 2) continue;
        cval *m = &g->v[o->share];
        if (m->kind != VAL_NODE || m->node < 0 || g->nodes[m->node].op != NB_OP_MATMUL) continue;
        cnode *mm = &g->nodes[m->node];
        if (mm->epi >= 0) continue;
        bool ready = true;
        for (int a = 0; a < f->nin && ready; a++) {
            int v = f->in[a];
            if (v == o->share) continue;
            for (int w = v; w >= 0 && ready; w = g->v[w].base)
                if (g->v[w].kind == VAL_NODE && !g->v[w].is_const && g->v[w].node >= 0)
                    ready = g->nodes[g->v[w].node].pos < mm->pos;
            ready = ready && !nb__written_between(g, g->v[v].root, mm->pos - 1, f->pos);
        }
        if (!ready) continue;
        f->fk->tile = true;
        f->deferred = true;
        mm->epi = i;
    }
}

/* Whether node x reads or writes any of the storages in roots[0..n). */
static bool touches(const cgraph *g, const cnode *x, const int *roots, int n) {
    for (int a = 0; a < x->nin; a++)
        for (int r = 0; r < n; r++)
            if (g->v[x->in[a]].root == roots[r]) return true;
    return false;
}

/* An optimizer update whose gradient is a product (seen through views that change nothing)
   moves into that product's GEMM: each piece of the gradient updates its parameters and state
   while it is in cache, on the thread that made it. It may when nothing between the product and
   the update reads or writes the parameter, its step count or its state. */
static void attach_optimizer_epilogues(cgraph *g) {
    for (int i = 0; i < g->nn; i++) {
        cnode *u = &g->nodes[i];
        if (u->dead || u->op != NB_OP_OPTIM_UPDATE || u->nin < 4 || u->nin > 8) continue;
        const cval *gv = &g->v[u->in[1]], *p = &g->v[u->in[0]];
        const cval *r = &g->v[gv->root];
        if (r->kind != VAL_NODE || r->is_const || r->node < 0 || r->dtype != NB_F32 || p->dtype != NB_F32) continue;
        if (r->loc != LOC_ARENA && r->loc != LOC_OWN && r->loc != LOC_FRESH) continue;
        cnode *mm = &g->nodes[r->node];
        if (mm->dead || mm->op != NB_OP_MATMUL || mm->epi >= 0 || mm->opt_epi >= 0 || r->shape.ndim != 2) continue;
        /* the gradient must be the product itself, element for element */
        int64_t st[NB_MAX_DIMS];
        nb__contiguous_strides(&r->shape, st);
        if (!nb__shape_eq(&gv->shape, &r->shape) || !nb__shape_eq(&p->shape, &r->shape)) continue;
        bool same = true;
        int64_t off = 0;
        for (int w = u->in[1]; w >= 0 && g->v[w].base >= 0; w = g->v[w].base) off += g->v[w].delta;
        for (int d = 0; d < gv->shape.ndim && same; d++) same = gv->shape.dim[d] == 1 || gv->stride[d] == st[d];
        if (!same || off != 0) continue;
        /* a gradient written in between (DDP's allreduce, a host_call) must be final first */
        if (nb__written_between(g, gv->root, mm->pos, u->pos)) continue;
        int roots[8], nr = 0;
        for (int a = 0; a < u->nin; a++)
            if (a != 1 && a != 3) roots[nr++] = g->v[u->in[a]].root;
        bool clear = true;
        for (int j = 0; j < g->nn && clear; j++) {
            const cnode *x = &g->nodes[j];
            if (j == i || x->dead || x->pos <= mm->pos || x->pos >= u->pos) continue;
            clear = !touches(g, x, roots, nr);
        }
        for (int a = 0; a < u->nin && clear; a++) /* the update's other inputs exist before the product */
            if (a != 1)
                for (int w = u->in[a]; w >= 0 && clear; w = g->v[w].base)
                    if (g->v[w].kind == VAL_NODE && !g->v[w].is_const && g->v[w].node >= 0)
                        clear = g->nodes[g->v[w].node].pos < mm->pos;
        if (!clear) continue;
        mm->opt_epi = i;
        u->deferred = true;
    }
}

/* ------------------------------------------------------------------ the executor */

typedef struct {
    const fkernel *k;
    nb_tensor *out;
    nb_tensor *const *in;
} tile_ctx;

typedef struct {
    nb_tensor *const *in;
    int nin;
    nb_op_args a;
    int64_t cols;
} optim_ctx;

/* The GEMM hands out pieces of whole rows (whole_rows below), so a piece is one contiguous range. */
static void run_optim(void *ctx, int64_t batch, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    (void)batch; (void)c0; (void)c1;
    optim_ctx *o = ctx;
    nb__cpu_optim_range(o->in, o->nin, r0 * o->cols, r1 * o->cols, &o->a);
}

static void run_tile(void *ctx, int64_t batch, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    tile_ctx *t = ctx;
    nb__kernel_run_tile(t->k, t->out, t->in, batch, r0, r1, c0, c1);
}

/* Runs node nd's op on its cpu kernel: 0, or -1 with the error recorded. */
static int run_plain(const cnode *nd, nb_tensor *out, nb_tensor *const *in) {
    nb_kernel_fn kernel = nb__cpu_backend.kernels[nd->op];
    if (!kernel) {
        nb__error("nb_compiled_run: op nb_%s has no cpu kernel", nb__cpu_op_info[nd->op].name);
        return -1;
    }
    if (kernel(out, in, nd->nin, &nd->args) < 0) {
        if (!nb__has_error()) nb__error("nb_compiled_run: the kernel of nb_%s failed", nb__cpu_op_info[nd->op].name);
        return -1;
    }
    return 0;
}

static nb_tensor *cpu_run(cgraph *g, nb_tensor *const *inputs, int n) {
    (void)n;
    nb_graph_frame f;
    if (nb__frame_begin(g, inputs, &f) < 0) return NULL;
    nb_tensor **vt = f.vt;
    int rc = 0;
    nb_tensor *scratch[MAX_OPERANDS];
    for (int i = 0; i < g->nn && rc == 0; i++) {
        cnode *nd = &g->nodes[i];
        if (nd->dead || nd->deferred) continue;
        if (nd->nin > MAX_OPERANDS) { /* a plain op of many inputs (a host_call over a bucket's gradients) */
            nb_tensor **many = nd->op == NODE_FUSED ? NULL : nb__alloc(sizeof *many * (size_t)nd->nin);
            if (!many) {
                nb__error("nb_compiled_run: node with %d inputs (%s)", nd->nin, nd->op == NODE_FUSED ? "fused" : "out of memory");
                rc = -1;
                break;
            }
            for (int k = 0; k < nd->nin; k++) many[k] = vt[nd->in[k]];
            rc = run_plain(nd, vt[nd->out], many);
            nb__free(many, sizeof *many * (size_t)nd->nin);
            continue;
        }
        for (int k = 0; k < nd->nin; k++) scratch[k] = vt[nd->in[k]];
        if (nd->op == NODE_FUSED && nd->rgroup == i) { /* a row group: all its kernels at once */
            fkernel *gk[MAX_ROW_GROUP];
            nb_tensor *gout[MAX_ROW_GROUP], *gin[MAX_ROW_GROUP][MAX_OPERANDS], *const *gins[MAX_ROW_GROUP];
            int n = 0;
            for (int j = i; j < g->nn; j++) {
                cnode *c = &g->nodes[j];
                if (c->dead) continue;
                if (c->rgroup != i) break;
                gk[n] = c->fk;
                gout[n] = vt[c->out];
                for (int k = 0; k < c->nin; k++) gin[n][k] = vt[c->in[k]];
                gins[n] = gin[n];
                n++;
            }
            nb__kernel_run_group(gk, n, gout, gins);
            continue;
        }
        if (nd->op == NODE_FUSED && nd->rgroup >= 0) continue; /* ran with its group */
        if (nd->op == NODE_FUSED) {
            rc = nb__kernel_run(nd->fk, vt[nd->out], scratch);
            continue;
        }
        if (nb__is_view(nd->op)) continue;
        if (nd->op == NB_OP_MATMUL && nd->opt_epi >= 0) {
            cnode *u = &g->nodes[nd->opt_epi];
            nb_tensor *uin[8];
            for (int k = 0; k < u->nin; k++) uin[k] = vt[u->in[k]];
            optim_ctx oc = { .in = uin, .nin = u->nin, .cols = vt[nd->out]->shape.dim[1] };
            nb__optim_begin(uin, u->nin, &u->args, &oc.a);
            /* whole rows: the update streams through its parameter and state, which column pieces
               would cut into short runs the prefetcher cannot follow */
            rc = nb__cpu_matmul_epilogue(vt[nd->out], scratch, run_optim, &oc, true);
            nb__optim_end(uin);
            continue;
        }
        if (nd->op == NB_OP_MATMUL && nd->epi >= 0) {
            cnode *e = &g->nodes[nd->epi];
            nb_tensor *fin[MAX_OPERANDS];
            for (int k = 0; k < e->nin; k++) fin[k] = vt[e->in[k]];
            tile_ctx tc = { e->fk, vt[e->out], fin };
            rc = nb__cpu_matmul_epilogue(vt[nd->out], scratch, run_tile, &tc, false);
            continue;
        }
        rc = run_plain(nd, vt[nd->out], scratch);
    }
    return nb__frame_end(g, inputs, &f, rc == 0);
}

/* ------------------------------------------------------------------ the lowering */

static int cpu_passes(cgraph *g, const nb_graph_opts *opts) {
    if (opts->disable & NB_PASS_FUSE) return 0;
    mark_epilogues(g);
    int rc = pass_row_groups(g);
    if (rc < 0) return -1;
    g->row_groups = rc;
    return 0;
}

static int cpu_build(cgraph *g, const nb_graph_opts *opts, char **note) {
    attach_tile_epilogues(g);
    attach_optimizer_epilogues(g);
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || n->op != NODE_FUSED) continue;
        if (nb__kernel_layout(n->fk, g, n->fk->red != RED_NONE ? -1 : n->out) < 0) {
            nb__error("nb_compiled_run: out of memory while compiling");
            return -1;
        }
    }
    return nb__kernels_build(g, opts, note);
}

static void cpu_release(cgraph *g) {
    if (g->dl) nb__kernels_unload(g->dl);
    g->dl = NULL;
}

const nb_lowering nb__cpu_lowering = {
    .fuses = true,
    .passes = cpu_passes,
    .build = cpu_build,
    .run = cpu_run,
    .release = cpu_release,
};
