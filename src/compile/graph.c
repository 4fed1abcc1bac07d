/* Graph mode's middle: the tracer that records dispatched ops into a graph, the passes (dead
   code, constant folding, common sub-expressions, elementwise fusion), memory planning, the
   executor that replays a planned graph, and the graph printer. */
#include "compile_impl.h"
#include "../backend/cpu/iter.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ growth helpers */

static int grow(void **p, int *cap, int need, size_t elem) {
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

static int new_value(cgraph *g) {
    if (grow((void **)&g->v, &g->capv, g->nv + 1, sizeof(cval)) < 0) return -1;
    cval *v = &g->v[g->nv];
    memset(v, 0, sizeof *v);
    v->base = -1;
    v->root = g->nv;
    v->share = -1;
    v->node = -1;
    return g->nv++;
}

static void set_meta(cval *v, const nb_tensor *t) {
    v->shape = t->shape;
    v->dtype = t->dtype;
    memcpy(v->stride, t->stride, sizeof v->stride);
    v->toff = t->offset;
}

/* ------------------------------------------------------------------ tracing */

static bool is_random(int op) { return op == NB_OP_RAND || op == NB_OP_RANDN; }

/* Open addressing from a pointer to a value id. */
typedef struct {
    const void **keys;
    int *ids;
    int cap, count;
} ptrmap;

/* The tracer runs the traced code with shapes only: dispatch asks it before each op (before)
   and it lets only what constant folding needs be computed, so an op's output is allocated but
   never written (never resident) and the trace holds little memory; the first replay is the
   call's answer. It holds a reference to each recorded op's result, so that a pointer in the
   maps below always names the tensor (or storage) it was recorded for: a freed header's address
   could come back as a new tensor that no op made. It lets a result go as soon as it alone holds
   it, before the next op allocates, as the eager code would have freed it (see sweep). */
typedef struct {
    cgraph *g;
    nb_tensor *const *inputs;
    int ninputs;
    ptrmap tensors;  /* tensor -> the value it holds now (-1: none any more) */
    ptrmap storages; /* storage -> the value that made it (-1: none any more) */
    ptrmap held_on;  /* storage -> how many tensors on it the tracer holds */
    int *held;       /* values whose trace-time tensor the tracer holds and may let go */
    int nheld, capheld;
    bool failed;
    bool off_host;   /* an op ran on a device other than the cpu: device names it */
    nb_device device;
} tracer;

static size_t hash_ptr(const void *p, int cap) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0xed5ad4bbu;
    x ^= x >> 11;
    return (size_t)x & (size_t)(cap - 1);
}

static int map_find(const ptrmap *m, const void *key) {
    if (!m->cap) return -1;
    for (size_t h = hash_ptr(key, m->cap);; h = (h + 1) & (size_t)(m->cap - 1)) {
        if (!m->keys[h]) return -1;
        if (m->keys[h] == key) return m->ids[h];
    }
}

static int map_put(ptrmap *m, const void *key, int id) {
    if (2 * (m->count + 1) > m->cap) {
        int cap = m->cap ? m->cap * 2 : 256;
        const void **keys = calloc((size_t)cap, sizeof *keys);
        int *ids = calloc((size_t)cap, sizeof *ids);
        if (!keys || !ids) { free(keys); free(ids); return -1; }
        const void **ok = m->keys;
        int *oi = m->ids, oc = m->cap;
        m->keys = keys; m->ids = ids; m->cap = cap; m->count = 0;
        for (int i = 0; i < oc; i++)
            if (ok[i]) map_put(m, ok[i], oi[i]);
        free(ok);
        free(oi);
    }
    size_t h = hash_ptr(key, m->cap);
    while (m->keys[h] && m->keys[h] != key) h = (h + 1) & (size_t)(m->cap - 1);
    if (!m->keys[h]) m->count++;
    m->keys[h] = key;
    m->ids[h] = id;
    return 0;
}

/* The id slot of a key in the map, or NULL. */
static int *map_slot(ptrmap *m, const void *key) {
    if (!m->cap) return NULL;
    for (size_t h = hash_ptr(key, m->cap);; h = (h + 1) & (size_t)(m->cap - 1)) {
        if (!m->keys[h]) return NULL;
        if (m->keys[h] == key) return &m->ids[h];
    }
}

/* Forgets what key stands for when it stands for id (any id when id < 0). The key stays, as
   a tombstone that a later map_put reuses. */
static void map_forget(ptrmap *m, const void *key, int id) {
    int *slot = map_slot(m, key);
    if (slot && (id < 0 || *slot == id)) *slot = -1;
}

static void map_free(ptrmap *m) {
    free(m->keys);
    free(m->ids);
}

static int add_node(tracer *tr, nb_op_id op, const int *ids, int nin, const nb_op_args *args, nb_tensor *out,
                    int64_t in0_off);

/* The value a tensor stands for: recorded already, one of the inputs, an alias that the autograd
   record made of a recorded value's storage (a saved output), or a capture. */
static int value_of(tracer *tr, nb_tensor *t) {
    int id = map_find(&tr->tensors, t);
    if (id >= 0) return id;
    int owner = map_find(&tr->storages, t->storage);
    if (owner >= 0) { /* recorded as a detach of the value that owns the storage */
        if (add_node(tr, NB_OP_DETACH, &owner, 1, &(nb_op_args){ 0 }, t, tr->g->v[owner].toff) < 0) return -1;
        return map_find(&tr->tensors, t);
    }
    cgraph *g = tr->g;
    id = new_value(g);
    if (id < 0) return -1;
    cval *v = &g->v[id];
    v->kind = VAL_CAPTURE;
    for (int k = 0; k < tr->ninputs; k++)
        if (tr->inputs[k] == t) { v->kind = VAL_INPUT; v->input = k; break; }
    v->t = nb_retain(t);
    set_meta(v, t);
    if (map_put(&tr->tensors, t, id) < 0) return -1;
    if (v->kind == VAL_INPUT && map_put(&tr->storages, t->storage, id) < 0) return -1;
    return id;
}

/* Holds out for value vid: takes over the reference of the value that held the same tensor
   before (an in-place op hands back its operand), or takes a new one. 0 or -1. */
static int hold(tracer *tr, int vid, nb_tensor *out) {
    cgraph *g = tr->g;
    int w = map_find(&tr->tensors, out);
    if (w >= 0 && g->v[w].t == out) {
        if (g->v[w].kind != VAL_NODE) return 0; /* an input's or a capture's: their reference keeps it */
        g->v[vid].t = out;
        g->v[w].t = NULL;
    } else {
        int on = map_find(&tr->held_on, out->storage);
        if (map_put(&tr->held_on, out->storage, on < 0 ? 1 : on + 1) < 0) return -1;
        g->v[vid].t = nb_retain(out);
    }
    if (grow((void **)&tr->held, &tr->capheld, tr->nheld + 1, sizeof(int)) < 0) return -1;
    tr->held[tr->nheld++] = vid;
    return 0;
}

/* Lets go of held tensors that nothing but the tracer holds any more: the traced code cannot
   name them again, and the eager step would have freed them by now. A tensor goes when its
   storage goes with it, or when the tracer holds another tensor on that storage, so the
   storage map never outlives its storage either (a storage kept alive by something else, an
   autograd record's alias say, keeps the tracer's last tensor on it until that goes too).
   Values that folding may turn into constants keep their tensor: it is their value. */
static void sweep(tracer *tr) {
    cgraph *g = tr->g;
    int keep = 0;
    for (int i = 0; i < tr->nheld; i++) {
        int id = tr->held[i];
        cval *v = &g->v[id];
        nb_tensor *t = v->t;
        if (!t) continue; /* a later value took it over */
        bool drop = false;
        if (!(v->foldable && !g->v[v->root].mutated_root) && atomic_load(&t->refcount) == 1) {
            nb_storage *st = t->storage;
            int *on = map_slot(&tr->held_on, st); /* hold put it there */
            if (atomic_load(&st->refcount) == 1) { /* the storage goes too */
                drop = true;
                map_forget(&tr->storages, st, -1);
                if (on) *on = -1;
            } else if (on && *on >= 2) {
                drop = true;
                (*on)--;
            }
        }
        if (drop) {
            map_forget(&tr->tensors, t, id);
            v->t = NULL;
            nb_release(t);
        } else tr->held[keep++] = id;
    }
    tr->nheld = keep;
}

static int add_node(tracer *tr, nb_op_id op, const int *ids_in, int nin, const nb_op_args *args, nb_tensor *out,
                    int64_t in0_off) {
    cgraph *g = tr->g;
    int *ids = malloc(sizeof(int) * (size_t)(nin > 0 ? nin : 1));
    if (!ids) return -1;
    memcpy(ids, ids_in, sizeof(int) * (size_t)nin);
    int vid = new_value(g);
    if (vid < 0 || grow((void **)&g->nodes, &g->capn, g->nn + 1, sizeof(cnode)) < 0) {
        free(ids);
        return -1;
    }
    cval *v = &g->v[vid];
    v->kind = VAL_NODE;
    v->node = g->nn;
    set_meta(v, out);
    unsigned flags = nb__ops[op].flags;
    if (flags & (NB_F_VIEW | NB_F_INPLACE)) {
        v->base = ids[0];
        v->delta = out->offset - in0_off;
        v->root = g->v[ids[0]].root;
    }
    /* what pass_fold could make a constant: no input but constants, no random draw */
    v->foldable = !(flags & NB_F_INPLACE) && !is_random(op) && op != NB_OP_EMPTY;
    for (int k = 0; k < nin && v->foldable; k++) v->foldable = g->v[ids[k]].foldable;
    if (flags & NB_F_INPLACE) g->v[v->root].mutated_root = true;
    g->nodes[g->nn] = (cnode){ .op = op, .nin = nin, .in = ids, .args = *args, .out = vid, .pos = g->nn, .epi = -1, .opt_epi = -1, .rgroup = -1 };
    g->nn++;
    if (hold(tr, vid, out) < 0) return -1;
    if (map_put(&tr->tensors, out, vid) < 0) return -1;
    if (!(flags & (NB_F_VIEW | NB_F_INPLACE)) && map_put(&tr->storages, out->storage, vid) < 0) return -1;
    return vid;
}

/* Before an op makes its output: lets go what the traced code let go, and says whether the
   kernel runs. Only what folding may need is computed: the op of constants alone. Nothing else
   is ever read while tracing (a host read fails the trace), and an in-place op or a random draw
   left out leaves the parameters, the optimizer state and the generator for the replay. */
static bool before(void *ctx, nb_op_id op, nb_tensor *const *in, int nin) {
    tracer *tr = ctx;
    if (tr->failed) return true;
    sweep(tr);
    if ((nb__ops[op].flags & NB_F_INPLACE) || is_random(op) || op == NB_OP_EMPTY) return false;
    for (int i = 0; i < nin; i++) {
        int id = map_find(&tr->tensors, in[i]);
        if (id < 0 || !tr->g->v[id].foldable) return false;
    }
    return true;
}

static void record(void *ctx, nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args, nb_tensor *out) {
    tracer *tr = ctx;
    if (tr->failed) return;
    for (int i = -1; i < nin && !tr->off_host; i++) { /* the output, then each input */
        nb_device d = (i < 0 ? out : in[i])->storage->device;
        if (d.type != NB_CPU) {
            tr->off_host = true;
            tr->device = d;
        }
    }
    int stack_ids[16];
    int *ids = nin <= 16 ? stack_ids : malloc(sizeof(int) * (size_t)nin);
    if (!ids) { tr->failed = true; return; }
    for (int i = 0; i < nin && !tr->failed; i++)
        if ((ids[i] = value_of(tr, in[i])) < 0) tr->failed = true;
    if (!tr->failed && add_node(tr, op, ids, nin, args, out, nin ? in[0]->offset : 0) < 0) tr->failed = true;
    if (ids != stack_ids) free(ids);
}

cgraph *nb__trace(nb_graph_fn fn, void *ctx, nb_tensor *const *inputs, int n, nb_tensor **result) {
    *result = NULL;
    cgraph *g = calloc(1, sizeof *g);
    if (!g) { nb__error("nb_compiled_run: out of memory"); return NULL; }
    g->ninputs = n;
    g->out = -1;
    tracer tr = { .g = g, .inputs = inputs, .ninputs = n };
    /* inputs are values 0..n-1 even when the function ignores some */
    for (int k = 0; k < n && !tr.failed; k++)
        if (value_of(&tr, inputs[k]) < 0) tr.failed = true;
    unsigned reads = nb__host_reads;
    bool prev_grad = nb_is_grad_enabled();
    nb_scope *s = nb_scope_begin();
    nb__trace_set(record, &tr);
    nb__trace_set_before(before);
    nb_tensor *r = tr.failed ? NULL : fn(inputs, n, ctx);
    nb__trace_set(NULL, NULL);
    nb__trace_set_before(NULL);
    unsigned host_reads = nb__host_reads - reads;
    nb_set_grad_enabled(prev_grad);
    if (r && !tr.failed) {
        g->out = value_of(&tr, r);
        if (g->out < 0) tr.failed = true;
    }
    if (r) *result = nb_retain(r);
    nb_scope_end(s);
    if (tr.off_host) {
        /* the lowering to run graphs is the cpu backend's; other backends have none yet */
        char dv[32];
        nb__error("nb_compiled_run: the traced function ran ops on %s, but compiled graphs run on the cpu only; "
                  "call the function directly there", nb_device_str(tr.device, dv, sizeof dv));
        goto fail;
    }
    if (tr.failed) {
        nb__error("nb_compiled_run: out of memory while tracing");
        goto fail;
    }
    if (!r) {
        if (!nb__has_error()) nb__error("nb_compiled_run: the traced function returned NULL");
        else {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", nb_error());
            nb_error_clear();
            nb__error("nb_compiled_run: the traced function returned NULL: %s", msg);
        }
        goto fail;
    }
    if (host_reads) {
        nb__error("nb_compiled_run: the traced function read tensor values on the host %u time%s (nb_item or "
                  "nb_data_ptr); a compiled graph cannot repeat C code that depends on values: compute it with ops",
                  host_reads, host_reads == 1 ? "" : "s");
        goto fail;
    }
    /* leaves whose gradient the traced code made (captured parameters, and inputs that require
       grad): the replay hands them their new gradient */
    for (int i = 0; i < g->nv; i++) {
        cval *v = &g->v[i];
        if ((v->kind != VAL_CAPTURE && v->kind != VAL_INPUT) || !v->t || !v->t->grad) continue;
        int gv = map_find(&tr.tensors, v->t->grad);
        if (gv < 0 || g->v[gv].kind != VAL_NODE) continue;
        int *a = realloc(g->grad_leaf, sizeof(int) * (size_t)(g->ngrads + 1));
        if (a) g->grad_leaf = a;
        int *b = realloc(g->grad_val, sizeof(int) * (size_t)(g->ngrads + 1));
        if (b) g->grad_val = b;
        if (!a || !b) { nb__error("nb_compiled_run: out of memory while tracing"); goto fail; }
        g->grad_leaf[g->ngrads] = i;
        g->grad_val[g->ngrads++] = gv;
    }
    g->ops_traced = g->nn;
    map_free(&tr.tensors);
    map_free(&tr.storages);
    map_free(&tr.held_on);
    free(tr.held);
    return g;
fail:
    map_free(&tr.tensors);
    map_free(&tr.storages);
    map_free(&tr.held_on);
    free(tr.held);
    if (*result) { nb_release(*result); *result = NULL; }
    nb__graph_free(g);
    return NULL;
}

/* ------------------------------------------------------------------ analysis helpers */

static bool is_inplace(int op) { return op >= 0 && (nb__ops[op].flags & NB_F_INPLACE); }
static bool is_view(int op) { return op >= 0 && (nb__ops[op].flags & NB_F_VIEW); }

/* Roots that some in-place op writes. */
static void mark_mutations(cgraph *g) {
    for (int i = 0; i < g->nv; i++) g->v[i].mutated_root = false;
    for (int i = 0; i < g->nn; i++)
        if (!g->nodes[i].dead && is_inplace(g->nodes[i].op)) g->v[g->v[g->nodes[i].in[0]].root].mutated_root = true;
}

/* Whether an in-place op between trace positions lo and hi (exclusive) writes root r. */
static bool written_between(const cgraph *g, int r, int lo, int hi) {
    for (int i = 0; i < g->nn; i++) {
        const cnode *n = &g->nodes[i];
        if (n->dead || !is_inplace(n->op) || n->pos <= lo || n->pos >= hi) continue;
        if (g->v[n->in[0]].root == r) return true;
    }
    return false;
}

static bool is_grad_value(const cgraph *g, int v) {
    for (int k = 0; k < g->ngrads; k++)
        if (g->grad_val[k] == v) return true;
    return false;
}

/* Counts each value's uses by live nodes, the result and the gradients handed to leaves. */
static void count_uses(cgraph *g) {
    for (int i = 0; i < g->nv; i++) g->v[i].uses = 0;
    for (int i = 0; i < g->nn; i++) {
        if (g->nodes[i].dead) continue;
        for (int k = 0; k < g->nodes[i].nin; k++) g->v[g->nodes[i].in[k]].uses++;
    }
    g->v[g->out].uses++;
    for (int k = 0; k < g->ngrads; k++) g->v[g->grad_val[k]].uses++;
}

static int live_count(const cgraph *g) {
    int n = 0;
    for (int i = 0; i < g->nn; i++) n += !g->nodes[i].dead;
    return n;
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
static int pass_dce(cgraph *g) {
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
        if (!n->dead && (is_inplace(n->op) || (n->op >= 0 && is_random(n->op))) && !live[i]) {
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
static int pass_fold(cgraph *g) {
    mark_mutations(g);
    int folded = 0;
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || n->op < 0 || is_inplace(n->op) || is_random(n->op) || n->op == NB_OP_EMPTY) continue;
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
static int pass_cse(cgraph *g) {
    mark_mutations(g);
    int removed = 0;
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || n->op < 0 || is_inplace(n->op) || is_random(n->op) || n->op == NB_OP_EMPTY) continue;
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

static void kernel_free(fkernel *k) {
    if (!k) return;
    free(k->in); free(k->in_dtype); free(k->code); free(k->scal); free(k->label); free(k->st); free(k->cls);
    free(k);
}

/* Merges chains of elementwise f32 ops into one kernel each: a producer joins its consumer when
   the consumer alone uses its result, the shapes agree, and no in-place write between the two
   changes what the producer reads. */
static int pass_fuse(cgraph *g) {
    count_uses(g);
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
                if (!fusable(g, p) || p->fk || is_grad_value(g, v) || v == g->out) continue;
                /* a producer of a smaller, broadcast shape is recomputed per element: only when cheap */
                if (!nb__shape_eq(&x->shape, shape) && !(cheap(p->op) && x->shape.ndim <= shape->ndim)) continue;
                bool safe = true;
                for (int b = 0; b < p->nin && safe; b++)
                    safe = !written_between(g, g->v[p->in[b]].root, p->pos, root->pos);
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
        if (!root->in) { kernel_free(k); return -1; }
        memcpy(root->in, k->in, sizeof(int) * (size_t)k->nin);
        root->nin = k->nin;
        root->op = NODE_FUSED;
        root->fk = k;
        merged += gr.n - 1;
        count_uses(g);
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
static int pass_fuse_reductions(cgraph *g) {
    count_uses(g);
    int merged = 0;
    for (int i = 0; i < g->nn; i++) {
        cnode *s = &g->nodes[i];
        if (s->dead || s->op != NB_OP_SUM || g->v[s->out].dtype != NB_F32) continue;
        int xv = s->in[0];
        cval *x = &g->v[xv];
        if (x->kind != VAL_NODE || x->is_const || x->base >= 0 || x->uses != 1 || x->dtype != NB_F32) continue;
        if (x->node < 0 || is_grad_value(g, xv) || xv == g->out) continue;
        cnode *p = &g->nodes[x->node];
        red_kind red = reduction_of(s, x);
        if (p->dead || red == RED_NONE || (p->op != NODE_FUSED && !fusable(g, p))) continue;
        if (p->op == NODE_FUSED && (p->fk->red != RED_NONE || p->fk->epilogue)) continue;
        bool safe = true;
        for (int b = 0; b < p->nin && safe; b++) safe = !written_between(g, g->v[p->in[b]].root, p->pos, s->pos);
        if (!safe) continue;
        fkernel *k = p->fk;
        if (!k) {
            group gr = { .member = { x->node }, .n = 1 };
            if (!(k = build_kernel(g, &gr))) return -1;
        }
        k->red = red;
        if (nb__kernel_layout(k, g, xv) != 0) { /* operands that do not walk as [rows, cols] */
            k->red = RED_NONE;
            if (!p->fk) kernel_free(k);
            continue;
        }
        size_t len = strlen(k->label);
        char *label = realloc(k->label, len + 5);
        if (!label) { if (!p->fk) kernel_free(k); return -1; }
        memcpy(label + len, "+sum", 5);
        k->label = label;
        k->nops++;
        free(s->in);
        s->in = malloc(sizeof(int) * (size_t)k->nin);
        if (!s->in) { if (!p->fk) kernel_free(k); return -1; }
        memcpy(s->in, k->in, sizeof(int) * (size_t)k->nin);
        s->nin = k->nin;
        s->op = NODE_FUSED;
        s->fk = k;
        p->fk = NULL;
        p->dead = true;
        merged++;
        count_uses(g);
    }
    return merged;
}

/* A fused kernel that reads, as one operand, the product a matmul made just for it runs right
   after that matmul, in place on its buffer: the GEMM's epilogue. */
static void mark_epilogues(cgraph *g) {
    count_uses(g);
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
    if (!k->in || !k->in_dtype || !k->code || !k->scal || !k->label) { kernel_free(k); return NULL; }
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
                for (int q = 0; q < m; q++) kernel_free(made[q]);
                return -1;
            }
            k->rows = true;
            int rc = nb__kernel_layout(k, g, k->red != RED_NONE ? -1 : c->out);
            k->rows = false;
            if (rc < 0) {
                for (int q = 0; q <= m; q++) kernel_free(made[q]);
                return -1;
            }
            ok = rc == 0;
        }
        if (!ok) {
            for (int m = 0; m < n; m++) kernel_free(made[m]);
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

/* Places every value a node makes: the result in a fresh tensor per run, views on their base,
   the rest in one arena where values whose lifetimes do not overlap share bytes, and a fused
   kernel's result on an operand that dies there when the shapes agree (in place). */
static int plan(cgraph *g, bool reuse) {
    count_uses(g);
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
static int make_headers(cgraph *g) {
    g->hdr = calloc((size_t)g->nv, sizeof *g->hdr);
    if (!g->hdr) return -1;
    bool failed = false;
    for (int i = 0; i < g->nv && !failed; i++) {
        cval *v = &g->v[i];
        if (on_arena(g, v)) continue;
        if (v->loc == LOC_OWN) {
            if (!(g->hdr[i] = nb__tensor_new(v->shape, v->dtype))) return -1;
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
            ready = ready && !written_between(g, g->v[v].root, mm->pos - 1, f->pos);
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

/* ------------------------------------------------------------------ the pipeline */

int nb__optimize(cgraph *g, const nb_graph_opts *opts, char **note) {
    unsigned off = opts->disable;
    g->dump_before = nb__graph_print(g, "traced");
    int rc;
    /* DCE first, since passes after it look at uses */
    if (!(off & NB_PASS_DCE)) {
        if ((rc = pass_dce(g)) < 0) goto oom;
        g->removed_dce += rc;
    }
    if (!(off & NB_PASS_FOLD)) g->folded = pass_fold(g);
    if (!(off & NB_PASS_CSE)) g->removed_cse = pass_cse(g);
    if (!(off & NB_PASS_DCE)) {
        if ((rc = pass_dce(g)) < 0) goto oom;
        g->removed_dce += rc;
    }
    if (!(off & NB_PASS_FUSE)) {
        if ((rc = pass_fuse(g)) < 0) goto oom;
        g->fused_ops = rc;
        if ((rc = pass_fuse_reductions(g)) < 0) goto oom;
        g->fused_ops += rc;
        mark_epilogues(g);
        if ((rc = pass_row_groups(g)) < 0) goto oom;
        g->row_groups = rc;
    }
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
    if (plan(g, !(off & NB_PASS_PLAN)) < 0 || make_headers(g) < 0) goto oom;
    attach_tile_epilogues(g);
    attach_optimizer_epilogues(g);
    for (int i = 0; i < g->nn; i++) {
        cnode *n = &g->nodes[i];
        if (n->dead || n->op != NODE_FUSED) continue;
        g->kernels++;
        if (nb__kernel_layout(n->fk, g, n->fk->red != RED_NONE ? -1 : n->out) < 0) goto oom;
    }
    return nb__kernels_build(g, opts, note);
oom:
    if (!nb__has_error()) nb__error("nb_compiled_run: out of memory while compiling");
    return -1;
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

nb_tensor *nb__graph_run(cgraph *g, nb_tensor *const *inputs, int n) {
    (void)n;
    if (g->arena_bytes > 0 && !g->arena) {
        nb__error("nb_compiled_run: the graph has no arena bound");
        return NULL;
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
    nb_tensor *stack_vt[256];
    nb_tensor **vt = g->nv <= 256 ? stack_vt : nb__alloc(sizeof(nb_tensor *) * (size_t)g->nv);
    if (!vt) { nb__error("nb_compiled_run: out of memory"); return NULL; }
    bool *own = (bool *)nb__alloc((size_t)g->nv);
    if (!own) {
        if (vt != stack_vt) nb__free(vt, sizeof(nb_tensor *) * (size_t)g->nv);
        nb__error("nb_compiled_run: out of memory");
        return NULL;
    }
    memset(own, 0, (size_t)g->nv);
    nb_tensor *result = NULL;
    int rc = 0;
    for (int i = 0; i < g->nv && rc == 0; i++) {
        cval *v = &g->v[i];
        vt[i] = NULL;
        switch (v->loc) {
        case LOC_EXTERNAL: vt[i] = v->kind == VAL_INPUT ? inputs[v->input] : v->t; break;
        case LOC_ARENA:
        case LOC_OWN: vt[i] = g->hdr[i]; break;
        case LOC_FRESH:
            if (!(vt[i] = nb__tensor_new(v->shape, v->dtype))) rc = -1;
            own[i] = true;
            break;
        case LOC_NONE: break;
        case LOC_VIEW:
            if (g->hdr[i]) vt[i] = g->hdr[i];
            else if (vt[v->base]) {
                nb_tensor *b = vt[v->base];
                if (!(vt[i] = nb__tensor_view(b, v->shape, v->stride, b->offset + v->delta))) rc = -1;
                else { vt[i]->dtype = v->dtype; own[i] = true; }
            }
            break;
        }
    }
    nb_tensor *scratch[64];
    for (int i = 0; i < g->nn && rc == 0; i++) {
        cnode *nd = &g->nodes[i];
        if (nd->dead || nd->deferred) continue;
        if (nd->nin > 64) { nb__error("nb_compiled_run: node with %d inputs", nd->nin); rc = -1; break; }
        for (int k = 0; k < nd->nin; k++) scratch[k] = vt[nd->in[k]];
        if (nd->op == NODE_FUSED && nd->rgroup == i) { /* a row group: all its kernels at once */
            fkernel *gk[MAX_ROW_GROUP];
            nb_tensor *gout[MAX_ROW_GROUP], *gin[MAX_ROW_GROUP][64], *const *gins[MAX_ROW_GROUP];
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
        if (is_view(nd->op)) continue;
        if (nd->op == NB_OP_MATMUL && nd->opt_epi >= 0) {
            cnode *u = &g->nodes[nd->opt_epi];
            nb_tensor *uin[8];
            for (int k = 0; k < u->nin; k++) uin[k] = vt[u->in[k]];
            optim_ctx oc = { .in = uin, .nin = u->nin, .cols = vt[nd->out]->shape.dim[1] };
            nb__cpu_optim_begin(uin, u->nin, &u->args, &oc.a);
            /* whole rows: the update streams through its parameter and state, which column pieces
               would cut into short runs the prefetcher cannot follow */
            rc = nb__cpu_matmul_epilogue(vt[nd->out], scratch, run_optim, &oc, true);
            nb__cpu_optim_end(uin);
            continue;
        }
        if (nd->op == NB_OP_MATMUL && nd->epi >= 0) {
            cnode *f = &g->nodes[nd->epi];
            nb_tensor *fin[64];
            for (int k = 0; k < f->nin; k++) fin[k] = vt[f->in[k]];
            tile_ctx tc = { f->fk, vt[f->out], fin };
            rc = nb__cpu_matmul_epilogue(vt[nd->out], scratch, run_tile, &tc, false);
            continue;
        }
        nb_kernel_fn kernel = nb__cpu_backend.kernels[nd->op];
        if (!kernel) {
            nb__error("nb_compiled_run: op nb_%s has no cpu kernel", nb__ops[nd->op].name);
            rc = -1;
            break;
        }
        if (kernel(vt[nd->out], scratch, nd->nin, &nd->args) < 0) {
            if (!nb__has_error()) nb__error("nb_compiled_run: the kernel of nb_%s failed", nb__ops[nd->op].name);
            rc = -1;
        }
    }
    if (rc == 0) {
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
        if (own[i] && vt[i]) nb_release(vt[i]);
    nb__free(own, (size_t)g->nv);
    if (vt != stack_vt) nb__free(vt, sizeof(nb_tensor *) * (size_t)g->nv);
    return result;
}

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
    nb__text_printf(&b, "graph (%s): %d ops\n", title, live_count(g));
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
    if (g->hdr)
        for (int i = 0; i < g->nv; i++)
            if (g->hdr[i]) nb_release(g->hdr[i]);
    free(g->hdr);
    if (g->arena) nb_release(g->arena);
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].t) nb_release(g->v[i].t);
    for (int i = 0; i < g->nn; i++) {
        free(g->nodes[i].in);
        kernel_free(g->nodes[i].fk);
    }
    free(g->v);
    free(g->nodes);
    free(g->grad_leaf);
    free(g->grad_val);
    free(g->dump_before);
    if (g->dl) nb__kernels_unload(g->dl);
    free(g);
}
