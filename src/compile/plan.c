/* Graph mode's memory planning: buffers by lifetime in one arena (in place where safe), and the
   tensor headers over it. */
#include "compile_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ memory planning */

static int64_t value_bytes(const cval *v) { return nb__shape_numel(&v->shape) * (int64_t)nb__esize(v->dtype); }

static bool contiguous_meta(const cval *v) {
    int64_t st[NB_MAX_DIMS];
    nb__contiguous_strides(&v->shape, st);
    for (int d = 0; d < v->shape.ndim; d++)
        if (v->shape.dim[d] != 1 && v->stride[d] != st[d]) return false;
    return true;
}

typedef struct { int v; int first, last; int64_t bytes, off; } buffer;

static int cmp_buffer(const void *a, const void *b) {
    const buffer *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->first - y->first;
}

/* Value v's element offset from its root. */
static int64_t root_offset(const cgraph *g, int v) {
    int64_t off = 0;
    for (int w = v; g->v[w].base >= 0; w = g->v[w].base) off += g->v[w].delta;
    return off;
}

/* Whether value u may touch elements [lo, hi) of its root (any, unless u is dense). */
static bool may_overlap(const cgraph *g, int u, int64_t lo, int64_t hi) {
    const cval *x = &g->v[u];
    if (!contiguous_meta(x)) return true;
    int64_t off = root_offset(g, u);
    return off < hi && lo < off + nb__shape_numel(&x->shape);
}

/* Destination passing: an assign that copies a value made for it alone into a dense stretch of a
   tensor from outside the graph (a DDP bucket's slot) has the value made there instead, by the
   kernels that make it (a product, and the loop run in place on it), and the copy goes. It may
   when nothing from the value's first kernel to the assign reads or writes that stretch (the
   first kernel included: it must not read what it would write), and no other captured tensor
   shares the storage. As the other passes, it takes the graph's inputs not to alias its
   captures: an input that is a view of the captured tensor is not seen. */
static void place_assigned(cgraph *g, const int *order, int end) {
    for (int p = 0; p < end; p++) {
        cnode *a = &g->nodes[order[p]];
        if (a->op != NB_OP_ASSIGN || a->nin != 2) continue;
        int dst = a->in[0], src = a->in[1], root = g->v[dst].root;
        const cval *d = &g->v[dst], *s = &g->v[src];
        if (g->v[root].kind != VAL_CAPTURE || d->loc != LOC_VIEW || s->loc != LOC_ARENA || s->last != p) continue;
        if (s->dtype != d->dtype || !nb__shape_eq(&s->shape, &d->shape) || !contiguous_meta(d) || !contiguous_meta(s)) continue;
        /* the buffer: src and the values it works in place on, each dense, dead after the assign,
           shared by nothing else and seen through no view */
        /* another capture on the same storage would be a root of its own, unseen by the checks below */
        bool ok = g->v[root].t != NULL;
        for (int i = 0; i < g->nv && ok; i++)
            ok = i == root || g->v[i].kind != VAL_CAPTURE || !g->v[i].t || g->v[i].t->storage != g->v[root].t->storage;
        int chain[8], nc = 0;
        for (int w = src; w >= 0 && nc < 8; w = g->v[w].share) chain[nc++] = w;
        int owner = chain[nc - 1];
        ok = ok && g->v[owner].share < 0;
        for (int i = 0; i < g->nv && ok; i++) {
            const cval *w = &g->v[i];
            bool member = false;
            for (int c = 0; c < nc; c++) member = member || chain[c] == i;
            if (member) ok = w->loc == LOC_ARENA && w->last <= p && contiguous_meta(w) && w->dtype == s->dtype &&
                             nb__shape_numel(&w->shape) == nb__shape_numel(&s->shape);
            else
                for (int c = 0; c < nc && ok; c++)
                    ok = w->share != chain[c] && !(w->loc == LOC_VIEW && w->root == chain[c]);
        }
        /* nothing from the first kernel (which must not read the slot it would write) to the
           assign touches the slot; a view reads nothing */
        int64_t lo = root_offset(g, dst), hi = lo + nb__shape_numel(&d->shape);
        for (int q = g->v[owner].first; q < p && ok; q++) {
            const cnode *x = &g->nodes[order[q]];
            for (int k = 0; k < x->nin && ok && !nb__is_view(x->op); k++)
                ok = g->v[x->in[k]].root != root || !may_overlap(g, x->in[k], lo, hi);
        }
        if (!ok) continue;
        for (int c = 0; c < nc; c++) {
            cval *w = &g->v[chain[c]];
            w->loc = LOC_VIEW;
            w->base = root;
            w->root = root;
            w->delta = lo;
        }
        a->dead = true; /* its result, a view of dst, keeps its place */
    }
}

/* Places every value a node makes: the result in a fresh tensor per run, views on their base,
   the rest in one arena where values whose lifetimes do not overlap share bytes, and a fused
   kernel's result on an operand that dies there when the shapes agree (in place). */
int nb__plan_memory(cgraph *g, bool reuse) {
    nb__count_uses(g);
    int *order = malloc(sizeof(int) * ((size_t)g->nn + 1));
    if (!order) return -1;
    /* a row group runs its kernels interleaved: every value it touches lives through all of it */
    int *span = malloc(sizeof(int) * ((size_t)g->nn + 1) * 2);
    if (!span) { free(order); return -1; }
    int pos = 0;
    for (int i = 0; i < g->nn; i++) {
        if (g->nodes[i].dead) continue;
        order[pos] = i;
        int h = g->nodes[i].rgroup;
        if (h == i) span[2 * h] = pos;
        if (h >= 0) span[2 * h + 1] = pos;
        g->v[g->nodes[i].out].first = pos++;
    }
    for (int i = 0; i < g->nn; i++)
        if (!g->nodes[i].dead && g->nodes[i].rgroup >= 0) g->v[g->nodes[i].out].first = span[2 * g->nodes[i].rgroup];
    int end = pos;
    for (int i = 0; i < g->nv; i++) {
        cval *v = &g->v[i];
        v->last = -1;
        v->share = -1;
        if (v->kind != VAL_NODE || v->is_const) v->loc = LOC_EXTERNAL;
        else if (g->nodes[v->node].dead) v->loc = LOC_NONE;
        else if (v->base >= 0) v->loc = LOC_VIEW;
        else v->loc = reuse ? LOC_ARENA : LOC_OWN;
    }
    /* the result's storage is new each run, and so are the gradients handed to leaves (as
       eager, which never writes a gradient in place: one kept from a run stays as it was); so is
       anything they are views of */
    for (int k = -1; k < g->ngrads; k++) {
        int r = k < 0 ? g->out : g->grad_val[k];
        if (g->v[r].loc == LOC_VIEW || g->v[r].loc == LOC_ARENA || g->v[r].loc == LOC_OWN) {
            int root = g->v[r].root;
            if (g->v[root].loc == LOC_ARENA || g->v[root].loc == LOC_OWN) g->v[root].loc = LOC_FRESH;
        }
    }
    /* lifetimes: a use of a view keeps its root alive */
    for (int p = 0; p < end; p++) {
        cnode *n = &g->nodes[order[p]];
        int until = n->rgroup >= 0 ? span[2 * n->rgroup + 1] : p;
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k];
            for (int w = v; w >= 0; w = g->v[w].base)
                if (g->v[w].last < until) g->v[w].last = until;
        }
        if (n->rgroup >= 0 && g->v[n->out].last < until) g->v[n->out].last = until;
    }
    free(span);
    for (int k = 0; k < g->ngrads; k++)
        for (int w = g->grad_val[k]; w >= 0; w = g->v[w].base) g->v[w].last = end; /* read after the run */
    for (int i = 0; i < g->nv; i++) /* views made before their base is written still need it */
        if (g->v[i].loc == LOC_VIEW && g->v[i].first > g->v[g->v[i].root].last) g->v[g->v[i].root].last = g->v[i].first;
    /* in place: a fused elementwise kernel writes over an operand that dies at it (read at the
       element it writes). Never a reduction: its result may have an operand's shape and still
       be read across (a [R] sum of x * s with s [R] broadcast along the columns) */
    if (reuse)
        for (int p = 0; p < end; p++) {
            cnode *n = &g->nodes[order[p]];
            if (n->op != NODE_FUSED || n->fk->red != RED_NONE) continue;
            cval *o = &g->v[n->out];
            if (o->loc != LOC_ARENA) continue;
            for (int k = 0; k < n->nin; k++) {
                cval *x = &g->v[n->in[k]];
                if (x->loc != LOC_ARENA || x->share >= 0 || x->last != p || x->dtype != o->dtype) continue;
                if (!nb__shape_eq(&x->shape, &o->shape) || !contiguous_meta(x)) continue;
                bool used_by_view = false;
                for (int w = 0; w < g->nv && !used_by_view; w++)
                    used_by_view = g->v[w].loc == LOC_VIEW && g->v[w].root == n->in[k];
                if (used_by_view) continue;
                o->share = n->in[k];
                break;
            }
        }
    if (reuse) place_assigned(g, order, end);
    /* gather arena buffers: each sharing chain is one buffer */
    buffer *bufs = malloc(sizeof(buffer) * ((size_t)g->nv + 1));
    if (!bufs) { free(order); return -1; }
    int nb = 0;
    g->unplanned_bytes = 0;
    for (int i = 0; i < g->nv; i++) {
        cval *v = &g->v[i];
        if (v->loc != LOC_ARENA && v->loc != LOC_OWN) continue;
        g->unplanned_bytes += value_bytes(v);
        if (v->loc != LOC_ARENA || v->share >= 0) continue;
        bufs[nb++] = (buffer){ i, v->first, v->last < v->first ? v->first : v->last, (value_bytes(v) + 63) & ~(int64_t)63, 0 };
    }
    /* a buffer lives until the last use of any value that took it over */
    for (int i = 0; i < g->nv; i++) {
        if (g->v[i].share < 0) continue;
        int s = i;
        while (g->v[s].share >= 0) s = g->v[s].share;
        for (int b = 0; b < nb; b++)
            if (bufs[b].v == s && g->v[i].last > bufs[b].last) bufs[b].last = g->v[i].last;
    }
    qsort(bufs, (size_t)nb, sizeof *bufs, cmp_buffer);
    int64_t total = 0;
    for (int b = 0; b < nb; b++) {
        int64_t off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int c = 0; c < b; c++) {
                if (bufs[c].last < bufs[b].first || bufs[b].last < bufs[c].first) continue;
                if (off < bufs[c].off + bufs[c].bytes && bufs[c].off < off + bufs[b].bytes) {
                    off = bufs[c].off + bufs[c].bytes;
                    moved = true;
                }
            }
        }
        bufs[b].off = off;
        g->v[bufs[b].v].arena_off = off;
        if (off + bufs[b].bytes > total) total = off + bufs[b].bytes;
    }
    for (int i = 0; i < g->nv; i++) {
        int s = i;
        while (g->v[s].share >= 0) s = g->v[s].share;
        if (s != i) g->v[i].arena_off = g->v[s].arena_off;
    }
    g->arena_bytes = total;
    free(bufs);
    free(order);
    return 0;
}

/* Whether value v lies in the arena (planned there, or a view of what is). */
static bool on_arena(const cgraph *g, const cval *v) {
    return v->loc == LOC_ARENA || (v->loc == LOC_VIEW && g->v[v->root].loc == LOC_ARENA);
}

/* The header of view v on its base's header (or tensor). NULL when there is no base to view
   yet (made per run), or out of memory (error recorded). */
static nb_tensor *view_header(cgraph *g, const cval *v, bool *failed) {
    nb_tensor *base = g->v[v->base].loc == LOC_EXTERNAL ? g->v[v->base].t : g->hdr[v->base];
    if (!base) return NULL;
    nb_tensor *h = nb__tensor_view(base, v->shape, v->stride, base->offset + v->delta);
    if (!h) *failed = true;
    else h->dtype = v->dtype;
    return h;
}

/* Headers for every value whose storage is known at plan time, but the arena's (bound later:
   nb__graph_bind). */
int nb__make_headers(cgraph *g) {
    g->hdr = calloc((size_t)g->nv, sizeof *g->hdr);
    if (!g->hdr) return -1;
    bool failed = false;
    for (int i = 0; i < g->nv && !failed; i++) {
        cval *v = &g->v[i];
        if (on_arena(g, v)) continue;
        if (v->loc == LOC_OWN) {
            if (!(g->hdr[i] = nb__tensor_new_on(v->shape, v->dtype, g->device))) return -1;
        } else if (v->loc == LOC_VIEW) {
            cval *rv = &g->v[v->root];
            if (rv->loc == LOC_FRESH || rv->kind == VAL_INPUT) continue; /* made per run */
            g->hdr[i] = view_header(g, v, &failed);
        }
    }
    return failed ? -1 : 0;
}

int nb__graph_bind(cgraph *g, nb_tensor *arena) {
    for (int i = 0; i < g->nv; i++)
        if (g->hdr[i] && on_arena(g, &g->v[i])) {
            nb_release(g->hdr[i]);
            g->hdr[i] = NULL;
        }
    if (g->arena) nb_release(g->arena);
    g->arena = NULL;
    if (!arena || g->arena_bytes == 0) return 0;
    if (nb_numel(arena) < g->arena_bytes) {
        nb__error("nb_compiled_run: an arena of %lld bytes for a graph that plans %lld", (long long)nb_numel(arena),
                  (long long)g->arena_bytes);
        return -1;
    }
    g->arena = nb_retain(arena);
    bool failed = false;
    for (int i = 0; i < g->nv && !failed; i++) {
        cval *v = &g->v[i];
        if (!on_arena(g, v)) continue;
        if (v->loc == LOC_ARENA) {
            int64_t st[NB_MAX_DIMS];
            nb__contiguous_strides(&v->shape, st);
            if (!(g->hdr[i] = nb__tensor_view(arena, v->shape, st, v->arena_off / (int64_t)nb__esize(v->dtype)))) failed = true;
            else g->hdr[i]->dtype = v->dtype;
        } else g->hdr[i] = view_header(g, v, &failed);
    }
    if (failed) {
        nb__graph_bind(g, NULL);
        nb__error("nb_compiled_run: out of memory");
        return -1;
    }
    return 0;
}
