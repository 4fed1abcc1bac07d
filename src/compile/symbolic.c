/* Graph mode's symbolic batch size (dynamic_batch): the graph traced at one batch size is compared
   with two shape-only probe traces at other sizes; each integer that may carry a size is fitted as
   a*B + c and each scalar argument as c*B^k, so a new batch size gets its graph by evaluating the
   fits (a template instantiated) instead of running the function under the tracer again. */
#include "compile_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Relative tolerance of a scalar argument's fit c*B^k at the third batch size: a few roundings of
   a double, far below any float kernel's precision, far above what a formula other than c*B^k
   (n/(n-1), 1/sqrt(n)) could match at three sizes. */
#define FIT_RTOL 1e-12
#define F_CONST 127 /* fk[]: the argument is the same at every batch size */
#define NARGS_F 8   /* nb_op_args.f */
#define NARGS_I (NB_MAX_DIMS + 2) /* nb_op_args.i */

struct nb_symgraph {
    cgraph *g;           /* the raw graph traced at batch b[0]: inputs' and nodes' tensors dropped,
                            captures' held (a freed capture's address could come back as another tensor) */
    cgraph *slope;       /* the same layout; each size-carrying integer holds its slope per unit of batch */
    signed char *fk;     /* per node and scalar argument (nn * 8): F_CONST, or k of c*B^k */
    double *fc;          /* per node and scalar argument: c */
    bool *keep_t;        /* per value: a foldable node value whose trace-time tensor the trace kept,
                            which constant folding uses as its value */
    int64_t b[3];        /* the batch sizes traced: the real call's, then the probes' */
    int n;               /* inputs */
    int64_t *dim0;       /* per input: its dimension 0 at b[0] (-1 for a 0-d input) */
    bool *batched;       /* per input: dimension 0 is the batch */
};

/* ------------------------------------------------------------------ the integer fields */

#define MAX_FIELDS (2 * NB_MAX_DIMS + 2 + NARGS_I + NB_MAX_DIMS)

/* Pointers to the integers of value v that may carry a size (dims, strides, offsets), in a fixed
   order; their count. Strides past the rank are leftovers of a header, not sizes: skipped. */
static int value_ints(cval *v, int64_t **p) {
    int n = 0;
    for (int d = 0; d < v->shape.ndim; d++) p[n++] = &v->shape.dim[d];
    for (int d = 0; d < v->shape.ndim; d++) p[n++] = &v->stride[d];
    p[n++] = &v->toff;
    p[n++] = &v->delta;
    return n;
}

/* Pointers to the integers of node x's arguments that may carry a size: every args.i (a reshape's
   or a slice's sizes, an index, an axis mask alike) and the target shape's dims. An op whose
   args.i are pointers (host_call) has none there: a fit would make a wild pointer of them, so an
   instantiated graph keeps the real trace's (a probe's host call was recorded for the same work;
   DDP's records map the same parameters). */
static int node_ints(cnode *x, int64_t **p) {
    int n = 0;
    if (x->op < 0 || !(nb__ops[x->op].flags & NB_F_OPAQUE))
        for (int j = 0; j < NARGS_I; j++) p[n++] = &x->args.i[j];
    for (int d = 0; d < x->args.shape.ndim; d++) p[n++] = &x->args.shape.dim[d];
    return n;
}

/* x = x0 + a (b - b0) with whole a through the first two points, checked at the third; false when
   no whole slope fits. */
static bool fit_int(const int64_t b[3], const int64_t x[3], int64_t *a) {
    int64_t d1, d2, s;
    if (__builtin_sub_overflow(x[1], x[0], &d1) || __builtin_sub_overflow(x[2], x[0], &d2)) return false;
    int64_t db1 = b[1] - b[0], db2 = b[2] - b[0];
    if (d1 % db1) return false;
    *a = d1 / db1;
    return !nb__mul_overflows(*a, db2, &s) && s == d2;
}

/* The value of a fitted integer at batch b: x0 + a (b - b0); false when it overflows. */
static bool eval_int(int64_t x0, int64_t a, int64_t b0, int64_t b, int64_t *out) {
    int64_t s;
    return !nb__mul_overflows(a, b - b0, &s) && !nb__add_overflows(x0, s, out);
}

/* b^|k| as a double. */
static double powk(int64_t b, int k) {
    double r = 1;
    for (int j = 0; j < (k < 0 ? -k : k); j++) r *= (double)b;
    return r;
}

static double eval_float(double c, int k, int64_t b) { return k > 0 ? c * powk(b, k) : c / powk(b, k); }

/* A scalar argument at the three sizes: the same bits at all three (F_CONST), or c*B^k with whole
   k in [-3, 3], k != 0, within FIT_RTOL at the other two. false when neither. */
static bool fit_float(const int64_t b[3], const double x[3], signed char *k, double *c) {
    if (!memcmp(&x[0], &x[1], sizeof(double)) && !memcmp(&x[0], &x[2], sizeof(double))) {
        *k = F_CONST;
        *c = x[0];
        return true;
    }
    for (int i = 0; i < 3; i++)
        if (!isfinite(x[i]) || x[i] == 0) return false;
    for (int kk = -3; kk <= 3; kk++) {
        if (!kk) continue;
        double cc = kk > 0 ? x[0] / powk(b[0], kk) : x[0] * powk(b[0], kk);
        bool ok = isfinite(cc) && cc != 0;
        for (int i = 1; i < 3 && ok; i++) ok = fabs(eval_float(cc, kk, b[i]) - x[i]) <= FIT_RTOL * fabs(x[i]);
        if (ok) {
            *k = (signed char)kk;
            *c = cc;
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------ copies */

/* A copy of g's values, nodes and gradients without tensors but the captures' (retained), for the
   template; NULL when memory runs out. */
static cgraph *copy_graph(const cgraph *g) {
    cgraph *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ninputs = g->ninputs;
    c->out = g->out;
    c->device = g->device;
    c->lower = g->lower;
    c->ops_traced = g->ops_traced;
    c->v = malloc(sizeof(cval) * (size_t)(g->nv ? g->nv : 1));
    c->nodes = calloc((size_t)(g->nn ? g->nn : 1), sizeof(cnode));
    c->grad_leaf = malloc(sizeof(int) * (size_t)(g->ngrads ? g->ngrads : 1));
    c->grad_val = malloc(sizeof(int) * (size_t)(g->ngrads ? g->ngrads : 1));
    if (!c->v || !c->nodes || !c->grad_leaf || !c->grad_val) goto oom;
    c->capv = c->nv = g->nv;
    if (g->nv > 0) memcpy(c->v, g->v, sizeof(cval) * (size_t)g->nv);
    for (int i = 0; i < g->nv; i++) {
        cval *v = &c->v[i];
        v->t = v->kind == VAL_CAPTURE && v->t ? nb_retain(v->t) : NULL;
    }
    c->capn = g->nn;
    for (int i = 0; i < g->nn; i++) {
        cnode *x = &c->nodes[i];
        *x = g->nodes[i];
        x->fk = NULL;
        x->in = malloc(sizeof(int) * (size_t)(x->nin > 0 ? x->nin : 1));
        if (!x->in) {
            c->nn = i;
            goto oom;
        }
        if (x->nin > 0) memcpy(x->in, g->nodes[i].in, sizeof(int) * (size_t)x->nin);
    }
    c->nn = g->nn;
    c->ngrads = g->ngrads;
    if (g->ngrads > 0) {
        memcpy(c->grad_leaf, g->grad_leaf, sizeof(int) * (size_t)g->ngrads);
        memcpy(c->grad_val, g->grad_val, sizeof(int) * (size_t)g->ngrads);
    }
    return c;
oom:
    nb__graph_free(c);
    return NULL;
}

/* ------------------------------------------------------------------ comparing traces */

static const char *op_str(int op) { return op >= 0 && op < NB_OP_COUNT ? nb__ops[op].name : "?"; }

/* Whether raw graphs a (batch ba) and o (batch bo) have the same structure: values, nodes,
   operands, dtypes, ranks, captured tensors, which constants the trace kept. false with *why. */
static bool same_structure(const cgraph *a, int64_t ba, const cgraph *o, int64_t bo, char *why, size_t size) {
    long long x = (long long)ba, y = (long long)bo;
    if (a->nn != o->nn || a->nv != o->nv) {
        snprintf(why, size, "the graph at batch %lld has %d ops and %d values, the graph at batch %lld %d ops and %d values",
                 x, a->nn, a->nv, y, o->nn, o->nv);
        return false;
    }
    if (a->out != o->out || a->ngrads != o->ngrads || a->ninputs != o->ninputs ||
        (a->ngrads > 0 && (memcmp(a->grad_leaf, o->grad_leaf, sizeof(int) * (size_t)a->ngrads) ||
                           memcmp(a->grad_val, o->grad_val, sizeof(int) * (size_t)a->ngrads)))) {
        snprintf(why, size, "the result or the gradients handed to leaves differ between batches %lld and %lld", x, y);
        return false;
    }
    for (int i = 0; i < a->nn; i++) {
        const cnode *p = &a->nodes[i], *q = &o->nodes[i];
        bool same = p->op == q->op && p->nin == q->nin && p->out == q->out && p->pos == q->pos &&
                    !memcmp(p->in, q->in, sizeof(int) * (size_t)p->nin) && p->args.dtype == q->args.dtype &&
                    p->args.device.type == q->args.device.type && p->args.device.index == q->args.device.index &&
                    p->args.shape.ndim == q->args.shape.ndim && p->args.shape.ndim >= 0 &&
                    p->args.shape.ndim <= NB_MAX_DIMS;
        if (!same) {
            snprintf(why, size, "op %d differs between batches %lld and %lld (nb_%s and nb_%s)", i, x, y, op_str(p->op),
                     op_str(q->op));
            return false;
        }
    }
    for (int i = 0; i < a->nv; i++) {
        const cval *p = &a->v[i], *q = &o->v[i];
        bool kept_p = p->kind == VAL_NODE && p->foldable && p->t, kept_q = q->kind == VAL_NODE && q->foldable && q->t;
        bool same = p->kind == q->kind && p->input == q->input && p->node == q->node && p->dtype == q->dtype &&
                    p->shape.ndim == q->shape.ndim && p->base == q->base && p->root == q->root &&
                    p->foldable == q->foldable && p->is_const == q->is_const && p->mutated_root == q->mutated_root &&
                    kept_p == kept_q && (p->kind != VAL_CAPTURE || p->t == q->t);
        if (!same) {
            if (p->kind == VAL_CAPTURE && q->kind == VAL_CAPTURE && p->t != q->t)
                snprintf(why, size, "value %%%d is another captured tensor at batch %lld than at %lld (a tensor the "
                         "function makes without an op)", i, y, x);
            else snprintf(why, size, "value %%%d differs between batches %lld and %lld", i, x, y);
            return false;
        }
    }
    return true;
}

/* Describes the op or value an unfitted integer belongs to. */
static void describe_field(const cgraph *g, int node, int value, char *why, size_t size, const char *what,
                           const int64_t b[3], const int64_t x[3]) {
    char where[96];
    if (node >= 0) snprintf(where, sizeof where, "an argument of op %d (nb_%s)", node, op_str(g->nodes[node].op));
    else if (g->v[value].kind == VAL_NODE)
        snprintf(where, sizeof where, "value %%%d (made by nb_%s)", value, op_str(g->nodes[g->v[value].node].op));
    else snprintf(where, sizeof where, "value %%%d", value);
    snprintf(why, size, "%s of %s is %lld, %lld, %lld at batches %lld, %lld, %lld: %s", what, where, (long long)x[0],
             (long long)x[1], (long long)x[2], (long long)b[0], (long long)b[1], (long long)b[2],
             "no whole-number a*B + c");
}

/* Fits the three raw graphs (same structure) into s: slopes of the integers, c and k of the scalar
   arguments. false with *why. */
static bool fit(nb_symgraph *s, cgraph *const gs[3], char *why, size_t size) {
    const cgraph *g = gs[0];
    int64_t *f[3][MAX_FIELDS], *sl[MAX_FIELDS];
    for (int i = 0; i < g->nv; i++) {
        int nf = value_ints(&gs[0]->v[i], f[0]);
        value_ints(&gs[1]->v[i], f[1]);
        value_ints(&gs[2]->v[i], f[2]);
        value_ints(&s->slope->v[i], sl);
        for (int j = 0; j < nf; j++) {
            int64_t x[3] = { *f[0][j], *f[1][j], *f[2][j] };
            if (!fit_int(s->b, x, sl[j])) {
                int nd = g->v[i].shape.ndim;
                describe_field(g, -1, i, why, size, j < nd ? "a size" : j < 2 * nd ? "a stride" : "the offset", s->b, x);
                return false;
            }
        }
    }
    for (int i = 0; i < g->nn; i++) {
        int nf = node_ints(&gs[0]->nodes[i], f[0]);
        node_ints(&gs[1]->nodes[i], f[1]);
        node_ints(&gs[2]->nodes[i], f[2]);
        node_ints(&s->slope->nodes[i], sl);
        for (int j = 0; j < nf; j++) {
            int64_t x[3] = { *f[0][j], *f[1][j], *f[2][j] };
            if (!fit_int(s->b, x, sl[j])) {
                describe_field(g, i, -1, why, size, j < NARGS_I ? "an integer" : "a target size", s->b, x);
                return false;
            }
        }
        for (int j = 0; j < NARGS_F; j++) {
            double x[3] = { gs[0]->nodes[i].args.f[j], gs[1]->nodes[i].args.f[j], gs[2]->nodes[i].args.f[j] };
            if (!fit_float(s->b, x, &s->fk[i * NARGS_F + j], &s->fc[i * NARGS_F + j])) {
                snprintf(why, size, "a scalar argument of op %d (nb_%s) is %.17g, %.17g, %.17g at batches %lld, %lld, "
                         "%lld: no c*B^k", i, op_str(g->nodes[i].op), x[0], x[1], x[2], (long long)s->b[0],
                         (long long)s->b[1], (long long)s->b[2]);
                return false;
            }
        }
    }
    return true;
}

/* ------------------------------------------------------------------ building the template */

void nb__sym_free(nb_symgraph *s) {
    if (!s) return;
    nb__graph_free(s->g);
    nb__graph_free(s->slope);
    free(s->fk);
    free(s->fc);
    free(s->keep_t);
    free(s->dim0);
    free(s->batched);
    free(s);
}

/* A stand-in for input t with dimension 0 of b: the same dtype, strides, offset, requires_grad and
   other sizes, holding t's rows over again (row i is row i mod B). The tracer computes shapes
   only, but checks that the library reads on the host with the tracer paused (cross entropy's
   target range) read the inputs, which must hold real values. NULL with an error when its size
   overflows or memory runs out. */
static nb_tensor *stand_in(nb_tensor *t, int64_t b) {
    nb_shape shape = t->shape;
    shape.dim[0] = b;
    int64_t extent = t->offset, numel, bytes;
    if (!nb__shape_check("nb_compiled_run", &shape, nb__esize(t->dtype), &numel) ||
        nb__mul_overflows(b, (int64_t)sizeof(int64_t), &bytes))
        return NULL;
    if (numel > 0) { /* elements up to the last one the strides reach */
        bool over = nb__add_overflows(extent, 1, &extent);
        for (int d = 0; d < shape.ndim && !over; d++) {
            int64_t s;
            over = t->stride[d] < 0 || nb__mul_overflows(shape.dim[d] - 1, t->stride[d], &s) ||
                   nb__add_overflows(extent, s, &extent);
        }
        if (over) {
            nb__error("nb_compiled_run: a stand-in of batch %lld for a strided input overflows", (long long)b);
            return NULL;
        }
    }
    nb_tensor *base = nb__tensor_new(NB_SHAPE(extent), t->dtype);
    if (!base) return NULL;
    nb_tensor *s = nb__tensor_view(base, shape, t->stride, t->offset);
    nb_release(base);
    int64_t *rows = s ? malloc((size_t)(bytes ? bytes : 1)) : NULL;
    if (!rows) {
        if (s && !nb__has_error()) nb__error("nb_compiled_run: out of memory");
        nb_release(s);
        return NULL;
    }
    for (int64_t i = 0; i < b; i++) rows[i] = i % t->shape.dim[0];
    bool prev = nb_set_grad_enabled(false);
    nb_scope *sc = nb_scope_begin();
    int rc = nb_assign(s, nb_index_select(nb_detach(t), 0, nb_from_data(rows, NB_SHAPE(b), NB_I64)));
    nb_scope_end(sc);
    nb_set_grad_enabled(prev);
    free(rows);
    if (rc < 0) {
        nb_release(s);
        return NULL;
    }
    s->requires_grad = t->requires_grad;
    return s;
}

/* The tensor of leaf value lv of g, traced on inputs in. */
static nb_tensor *leaf_tensor(const cgraph *g, int lv, nb_tensor *const *in) {
    const cval *v = &g->v[lv];
    return v->kind == VAL_INPUT ? in[v->input] : v->t;
}

/* A probe's backward hands leaves gradients that no kernel computed. The real call's first replay
   replaces those of the leaves its graph reaches, but a leaf that only the probe's graph reaches
   (the function branches on the batch size) would keep one: it is left without a gradient. */
static void forget_probe_grads(const cgraph *g, nb_tensor *const *st, const cgraph *raw, nb_tensor *const *in) {
    for (int k = 0; k < g->ngrads; k++) {
        nb_tensor *leaf = leaf_tensor(g, g->grad_leaf[k], st), *gt = g->v[g->grad_val[k]].t;
        if (!leaf || !gt || leaf->grad != gt) continue;
        bool reached = false;
        for (int j = 0; j < raw->ngrads && !reached; j++) reached = leaf_tensor(raw, raw->grad_leaf[j], in) == leaf;
        if (reached) continue;
        leaf->grad = NULL;
        nb_release(gt); /* the leaf's reference; the graph keeps its own */
    }
}

/* Traces fn at batch b with stand-ins for the batched inputs (the same tensor where the caller
   passed one tensor twice); the raw graph, or NULL with *why. raw is the real call's graph. */
static cgraph *probe(nb_graph_fn fn, void *ctx, nb_tensor *const *in, int n, const nb_symgraph *s, int64_t b,
                     const cgraph *raw, char *why, size_t size) {
    nb_tensor *stack[32], **st = n <= 32 ? stack : calloc((size_t)n, sizeof *st);
    if (!st) {
        snprintf(why, size, "out of memory");
        return NULL;
    }
    bool had_error = nb__has_error();
    uint64_t errors = nb__error_count();
    cgraph *g = NULL;
    int made = 0;
    for (; made < n; made++) {
        int same = -1;
        for (int j = 0; j < made && same < 0; j++)
            if (in[j] == in[made]) same = j;
        if (same >= 0) st[made] = nb_retain(st[same]);
        else if (!s->batched[made]) st[made] = nb_retain(in[made]);
        else if (!(st[made] = stand_in(in[made], b))) break;
    }
    /* the function may fail at another size (a reshape to a fixed batch): no error of the call, so
       the handler never sees it (quiet) */
    nb__error_ctx quiet;
    nb__error_quiet(&quiet);
    if (made == n) {
        nb_tensor *result = NULL;
        g = nb__trace(fn, ctx, st, n, &result);
        nb_release(result);
        if (g) forget_probe_grads(g, st, raw, in);
    }
    for (int k = 0; k < made; k++) nb_release(st[k]);
    if (st != stack) free(st);
    if (!g) {
        const char *msg = nb__error_count() != errors && !had_error ? nb_error() : NULL;
        snprintf(why, size, "the trace at batch %lld failed%s%s", (long long)b, msg ? ": " : "", msg ? msg : "");
        if (!had_error) nb_error_clear();
    }
    nb__error_pop(&quiet);
    return g;
}

nb_symgraph *nb__sym_build(nb_graph_fn fn, void *ctx, nb_tensor *const *in, int n, const cgraph *raw, int *probes,
                           char *why, size_t size) {
    *probes = 0;
    why[0] = 0;
    nb_symgraph *s = calloc(1, sizeof *s);
    cgraph *gs[3] = { NULL, NULL, NULL };
    if (!s || !(s->dim0 = malloc(sizeof(int64_t) * (size_t)(n ? n : 1))) ||
        !(s->batched = calloc((size_t)(n ? n : 1), sizeof(bool))))
        goto oom;
    s->n = n;
    /* the batch is the first input's dimension 0 (inputs of rank 0 have none); inputs whose
       dimension 0 differs from it keep theirs */
    s->b[0] = -1;
    for (int k = 0; k < n; k++) {
        s->dim0[k] = in[k]->shape.ndim ? in[k]->shape.dim[0] : -1;
        if (s->b[0] < 0 && in[k]->shape.ndim) s->b[0] = s->dim0[k];
    }
    if (s->b[0] < 1 || s->b[0] > INT64_MAX / 4) {
        snprintf(why, size, s->b[0] < 0 ? "no input has a batch dimension" : "batch size %lld", (long long)s->b[0]);
        nb__sym_free(s);
        return NULL;
    }
    for (int k = 0; k < n; k++) s->batched[k] = s->dim0[k] == s->b[0];
    /* B+1 and B+2: with B they cover both parities and every residue mod 3, so a function that
       branches on the batch size's parity (or mod 3) shows a different graph. A first batch of 1
       is special (broadcasting and squeezing make C code take paths of its own there): its graph
       serves batch 1 alone, and the fit is made from 2, 3 and 4 */
    bool one = s->b[0] == 1;
    if (one) s->b[0] = 2;
    s->b[1] = s->b[0] + 1;
    s->b[2] = s->b[0] + 2;
    const cgraph *r0 = raw;
    for (int p = one ? 0 : 1; p < 3; p++) {
        (*probes)++;
        if (!(gs[p] = probe(fn, ctx, in, n, s, s->b[p], raw, why, size))) goto fail;
    }
    if (one) r0 = gs[0];
    for (int p = 1; p < 3; p++)
        if (!same_structure(r0, s->b[0], gs[p], s->b[p], why, size)) goto fail;
    if (!(s->slope = copy_graph(r0)) || !(s->fk = malloc((size_t)(r0->nn ? r0->nn : 1) * NARGS_F)) ||
        !(s->fc = malloc(sizeof(double) * (size_t)(r0->nn ? r0->nn : 1) * NARGS_F)) ||
        !(s->keep_t = calloc((size_t)(r0->nv ? r0->nv : 1), sizeof(bool))))
        goto oom;
    for (int i = 0; i < r0->nv; i++) s->keep_t[i] = r0->v[i].kind == VAL_NODE && r0->v[i].foldable && r0->v[i].t;
    cgraph *g0 = copy_graph(r0); /* without the trace-time tensors, which the template does not need */
    if (!g0) goto oom;
    nb__graph_free(gs[0]); /* the probe's at 2, or NULL */
    gs[0] = g0;
    if (!fit(s, gs, why, size)) goto fail;
    s->g = gs[0];
    nb__graph_free(gs[1]);
    nb__graph_free(gs[2]);
    return s;
oom:
    snprintf(why, size, "out of memory");
fail:
    for (int p = 0; p < 3; p++) nb__graph_free(gs[p]);
    nb__sym_free(s);
    return NULL;
}

/* ------------------------------------------------------------------ instantiating */

int64_t nb__sym_batch(const nb_symgraph *s, nb_tensor *const *in, int n) {
    if (!s || n != s->n) return -1;
    int64_t b = -1;
    for (int k = 0; k < n; k++) {
        int64_t d = in[k]->shape.ndim ? in[k]->shape.dim[0] : -1;
        if (!s->batched[k]) {
            if (d != s->dim0[k]) return -1;
        } else if (b < 0) b = d;
        else if (d != b) return -1;
    }
    /* a size of 1 is where broadcasting and squeezing change what C code records, which the
       sizes fitted (2 and above) cannot show: it is traced, or was, as the first call's (a view
       that a fit would put past its storage is found at instantiation: views_inside) */
    if (b < 2) return -1;
    return b;
}

/* The tensor of foldable node x of instantiated graph g, computed as dispatch computed it at trace
   time (the kernel on its operands' tensors vt, or a view of its base); NULL with an error, or
   with *skip when an operand is missing or the layout is not what a fresh tensor has. */
static nb_tensor *fold_value(const cgraph *g, const cnode *x, nb_tensor **vt, bool *skip) {
    const cval *o = &g->v[x->out];
    nb_tensor *in[64];
    if (x->nin > 64) {
        *skip = true;
        return NULL;
    }
    for (int k = 0; k < x->nin; k++)
        if (!(in[k] = vt[x->in[k]])) {
            *skip = true;
            return NULL;
        }
    unsigned flags = nb__ops[x->op].flags;
    if (flags & NB_F_VIEW) {
        nb_tensor *t = nb__tensor_view(in[0], o->shape, o->stride, in[0]->offset + o->delta);
        if (t) t->dtype = o->dtype;
        return t;
    }
    if (flags & NB_F_DEVICE) return nb__to_device(in[0], x->args.device);
    const nb_backend *be = nb__backend_get(g->device.type); /* the graph's device's, as dispatch picked */
    nb_kernel_fn kernel = be ? be->kernels[x->op] : NULL;
    if (!kernel) {
        *skip = true;
        return NULL;
    }
    nb_tensor *t = nb__tensor_new_on(o->shape, o->dtype, g->device);
    if (!t) return NULL;
    for (int d = 0; d < o->shape.ndim; d++)
        if (o->shape.dim[d] != 1 && t->stride[d] != o->stride[d]) *skip = true;
    if (*skip) {
        nb_release(t);
        return NULL;
    }
    if (kernel(t, in, x->nin, &x->args) < 0) {
        if (!nb__has_error()) nb__error("nb_compiled_run: the kernel of nb_%s failed", nb__ops[x->op].name);
        nb_release(t);
        return NULL;
    }
    return t;
}

/* Whether every view of instantiated graph g lies inside the storage of the value it views: a
   fitted size that the traced sizes showed constant may be clamped (a slice of at most 4 rows at
   batches 8, 9 and 10), and at a batch below that its view would run past its input. Node values
   own a dense buffer of their shape; inputs and captures their tensor's storage. */
static bool views_inside(const cgraph *g, nb_tensor *const *in) {
    for (int i = 0; i < g->nv; i++) {
        const cval *v = &g->v[i];
        if (v->base < 0) continue;
        int64_t off = 0, lo, hi;
        int r = i;
        for (; g->v[r].base >= 0; r = g->v[r].base)
            if (__builtin_add_overflow(off, g->v[r].delta, &off)) return false;
        const cval *root = &g->v[r];
        const nb_tensor *t = root->kind == VAL_INPUT ? in[root->input] : root->kind == VAL_CAPTURE ? root->t : NULL;
        if (t) { /* the root tensor's own first element, and its storage's elements */
            int64_t es = (int64_t)nb__esize(t->dtype);
            lo = -t->offset;
            hi = (int64_t)(t->storage->nbytes / (size_t)es) - t->offset;
        } else {
            lo = 0;
            hi = nb__shape_numel(&root->shape);
        }
        if (nb__shape_numel(&v->shape) == 0) continue;
        int64_t first = off, last = off;
        for (int d = 0; d < v->shape.ndim; d++) {
            int64_t step;
            if (__builtin_mul_overflow(v->shape.dim[d] - 1, v->stride[d], &step)) return false;
            if (step < 0 ? __builtin_add_overflow(first, step, &first) : __builtin_add_overflow(last, step, &last))
                return false;
        }
        /* in place or aliasing views reinterpreting the dtype are left to the trace */
        if (v->dtype != root->dtype) return false;
        if (first < lo || last >= hi) return false;
    }
    return true;
}

int nb__sym_instantiate(const nb_symgraph *s, int64_t b, nb_tensor *const *in, cgraph **out) {
    *out = NULL;
    bool had_error = nb__has_error();
    cgraph *g = copy_graph(s->g);
    if (!g) goto oom;
    int64_t *f[MAX_FIELDS], *sl[MAX_FIELDS], *f0[MAX_FIELDS];
    for (int i = 0; i < g->nv; i++) {
        int nf = value_ints(&g->v[i], f);
        value_ints(&s->slope->v[i], sl);
        value_ints(&s->g->v[i], f0);
        for (int j = 0; j < nf; j++)
            if (!eval_int(*f0[j], *sl[j], s->b[0], b, f[j])) goto skip;
        if (!nb__shape_check(NULL, &g->v[i].shape, nb__esize(g->v[i].dtype), NULL)) goto skip;
        if (g->v[i].kind == VAL_INPUT && !nb__shape_eq(&g->v[i].shape, &in[g->v[i].input]->shape)) goto skip;
    }
    if (!views_inside(g, in)) goto skip;
    for (int i = 0; i < g->nn; i++) {
        cnode *x = &g->nodes[i];
        int nf = node_ints(x, f);
        node_ints(&s->slope->nodes[i], sl);
        node_ints(&s->g->nodes[i], f0);
        for (int j = 0; j < nf; j++)
            if (!eval_int(*f0[j], *sl[j], s->b[0], b, f[j])) goto skip;
        for (int j = 0; j < NARGS_F; j++) {
            int k = s->fk[i * NARGS_F + j];
            x->args.f[j] = k == F_CONST ? s->fc[i * NARGS_F + j] : eval_float(s->fc[i * NARGS_F + j], k, b);
        }
    }
    /* constants: folding takes a foldable value's tensor as its value, which the trace computed
       at its own size; compute every foldable value again, in trace order, at this size */
    nb_tensor **vt = calloc((size_t)(g->nv ? g->nv : 1), sizeof *vt);
    if (!vt) goto oom;
    bool skip = false, failed = false;
    nb__error_ctx quiet; /* a failure here is dropped (below): the handler never sees it */
    nb__error_quiet(&quiet);
    for (int i = 0; i < g->nn && !skip && !failed; i++) {
        const cnode *x = &g->nodes[i];
        if (!g->v[x->out].foldable) continue;
        if (!(vt[x->out] = fold_value(g, x, vt, &skip)) && !skip) failed = true;
    }
    for (int i = 0; i < g->nv; i++) {
        if (!skip && !failed && s->keep_t[i] && vt[i]) g->v[i].t = nb_retain(vt[i]);
        if (vt[i]) nb_release(vt[i]);
    }
    free(vt);
    if (failed && !had_error) /* a kernel that fails here fails the same way in the trace, which
                                 reports it in the call's own terms: leave it to the trace */
        nb_error_clear();
    nb__error_pop(&quiet);
    if (skip || failed) goto skip;
    *out = g;
    return 0;
skip:
    nb__graph_free(g);
    return 1;
oom:
    nb__error("nb_compiled_run: out of memory");
    nb__graph_free(g);
    return -1;
}
