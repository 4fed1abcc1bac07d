/* Graph mode's tracer: runs the traced function with shapes only and records every dispatched op into
   a graph of values and nodes (inputs, captures, op results, aliases of their storage). */
#include "compile_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ tracing */



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
    bool two_devices; /* ops ran on a second device besides the cpu: other names it */
    nb_device other;
    int cpu_op;      /* an op whose result is on the cpu (-1: none); beside another device, refused */
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
    id = nb__new_value(g);
    if (id < 0) return -1;
    cval *v = &g->v[id];
    v->kind = VAL_CAPTURE;
    for (int k = 0; k < tr->ninputs; k++)
        if (tr->inputs[k] == t) { v->kind = VAL_INPUT; v->input = k; break; }
    v->t = nb_retain(t);
    nb__set_meta(v, t);
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
    if (nb__grow((void **)&tr->held, &tr->capheld, tr->nheld + 1, sizeof(int)) < 0) return -1;
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
    int vid = nb__new_value(g);
    if (vid < 0 || nb__grow((void **)&g->nodes, &g->capn, g->nn + 1, sizeof(cnode)) < 0) {
        free(ids);
        return -1;
    }
    cval *v = &g->v[vid];
    v->kind = VAL_NODE;
    v->node = g->nn;
    nb__set_meta(v, out);
    unsigned flags = nb__ops[op].flags;
    if (flags & (NB_F_VIEW | NB_F_INPLACE)) {
        v->base = ids[0];
        v->delta = out->offset - in0_off;
        v->root = g->v[ids[0]].root;
    }
    /* what pass_fold could make a constant: no input but constants, no random draw */
    v->foldable = nb__is_pure(op);
    for (int k = 0; k < nin && v->foldable; k++) v->foldable = g->v[ids[k]].foldable;
    if (flags & NB_F_INPLACE) g->v[v->root].mutated_root = true;
    if ((flags & NB_F_INPLACE) && (flags & NB_F_WRITES_ALL))
        for (int k = 1; k < nin; k++) g->v[g->v[ids[k]].root].mutated_root = true;
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
    if (!nb__is_pure(op)) return false;
    for (int i = 0; i < nin; i++) {
        int id = map_find(&tr->tensors, in[i]);
        if (id < 0 || !tr->g->v[id].foldable) return false;
    }
    return true;
}

static void record(void *ctx, nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args, nb_tensor *out) {
    tracer *tr = ctx;
    if (tr->failed) return;
    for (int i = -1; i < nin; i++) { /* the output, then each input */
        nb_device d = (i < 0 ? out : in[i])->storage->device;
        if (d.type == NB_CPU) continue;
        if (!tr->off_host) {
            tr->off_host = true;
            tr->device = d;
        } else if (d.type != tr->device.type || d.index != tr->device.index) {
            tr->two_devices = true;
            tr->other = d;
        }
    }
    if (out->storage->device.type == NB_CPU && tr->cpu_op < 0) tr->cpu_op = op;
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
    tracer tr = { .g = g, .inputs = inputs, .ninputs = n, .cpu_op = -1 };
    /* inputs are values 0..n-1 even when the function ignores some */
    for (int k = 0; k < n && !tr.failed; k++)
        if (value_of(&tr, inputs[k]) < 0) tr.failed = true;
    unsigned reads = nb__host_reads;
    bool prev_grad = nb_is_grad_enabled();
    nb_scope *s = nb_scope_begin();
    nb__trace_set(record, &tr);
    nb__trace_set_before(before);
    /* the function's own error is told as the traced function's (quiet: reworded below, then told) */
    bool had_error = nb__has_error();
    nb__error_ctx quiet;
    nb__error_quiet(&quiet);
    nb_tensor *r = tr.failed ? NULL : fn(inputs, n, ctx);
    if (!r && !had_error && nb__has_error())
        nb__error_reword("nb_compiled_run: the traced function returned NULL: %s", nb_error());
    nb__error_pop(&quiet);
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
    /* the graph runs on the one device besides the cpu its ops touched (the cpu when none), by
       that backend's lowering */
    g->device = tr.off_host ? tr.device : (nb_device){ NB_CPU, 0 };
    const nb_backend *be = nb__backend_get(g->device.type);
    g->lower = be ? be->lower : NULL;
    if (tr.two_devices) {
        char d1[32], d2[32];
        nb__error("nb_compiled_run: the traced function ran ops on two devices besides the cpu, %s and %s; "
                  "a compiled graph runs on one", nb_device_str(tr.device, d1, sizeof d1),
                  nb_device_str(tr.other, d2, sizeof d2));
        goto fail;
    }
    if (!g->lower) {
        char dv[32];
        nb__error("nb_compiled_run: the traced function ran ops on %s, and the %s backend has no lowering for "
                  "compiled graphs; call the function directly there", nb_device_str(g->device, dv, sizeof dv),
                  be ? be->name : "unregistered");
        goto fail;
    }
    if (tr.off_host && tr.cpu_op >= 0) {
        /* every value the graph makes lives on its device (inputs and captures may be on the
           cpu: an nb_to of one is an upload each run) */
        char dv[32];
        nb__error("nb_compiled_run: the traced function ran nb_%s on the cpu beside ops on %s; a compiled graph "
                  "runs on one device: move its inputs there before the call", nb__ops[tr.cpu_op].name,
                  nb_device_str(g->device, dv, sizeof dv));
        goto fail;
    }
    if (tr.failed) {
        nb__error("nb_compiled_run: out of memory while tracing");
        goto fail;
    }
    if (!r) {
        if (!nb__has_error()) nb__error("nb_compiled_run: the traced function returned NULL");
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
