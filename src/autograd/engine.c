/* The backward engine: orders the recorded graph, runs each node's backward formula (ops
   themselves, through the one dispatch path), accumulates gradients into leaves and frees
   the graph as it goes. Sits above ops; the graph record it walks sits below them. Hooks
   (engine.h) tell a layer above when each leaf's gradient is final and when a backward ends. */
#include "../ops/ops_impl.h"
#include "engine.h"
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    nb_node **items;
    int n, cap;
} node_list;

static int list_push(node_list *l, nb_node *n) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        nb_node **grown = nb__alloc(sizeof(nb_node *) * (size_t)cap);
        if (!grown) return -1;
        if (l->items) memcpy(grown, l->items, sizeof(nb_node *) * (size_t)l->n);
        nb__free(l->items, sizeof(nb_node *) * (size_t)l->cap);
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->n++] = n;
    return 0;
}

static void list_free(node_list *l) { nb__free(l->items, sizeof(nb_node *) * (size_t)l->cap); }

/* Adds g into *slot (owned reference): the first gradient is taken as is, later ones summed. */
static int accumulate(nb_tensor **slot, nb_tensor *g) {
    if (!*slot) {
        *slot = nb_retain(g);
        return 0;
    }
    nb_tensor *sum = nb__dispatch(NB_OP_ADD, (nb_tensor *[]){ *slot, g }, 2, NULL);
    if (!sum) return -1;
    nb_release(*slot);
    *slot = sum;
    return 0;
}

/* Whether t holds NaN (NB_NONFINITE_NAN), infinities but no NaN (_INF) or neither, computed
   with ops so it runs on any backend: the sum of |t| is NaN, infinite or finite. */
static int nonfinite(nb_tensor *t) {
    if (!t || !nb__is_float(t->dtype)) return NB_NONFINITE_NONE;
    bool suspended = nb__anomaly_suspend(true);
    nb_scope *s = nb_scope_begin();
    double v = nb_item(nb_sum_all(nb_abs(nb_cast(t, NB_F64))));
    nb_scope_end(s);
    nb__anomaly_suspend(suspended);
    return v != v ? NB_NONFINITE_NAN : isinf(v) ? NB_NONFINITE_INF : NB_NONFINITE_NONE;
}

/* Anomaly mode's rule for a gradient gin of node n, given the gradient g that reached it: an
   anomaly when gin holds a NaN that neither g nor the node's inputs, output and arguments held,
   or an infinity where all of them were finite (the same rule as the forward check's). */
static bool backward_anomaly(nb_node *n, nb_tensor *g, nb_tensor *gin) {
    int c = nonfinite(gin);
    if (c == NB_NONFINITE_NONE) return false;
    int held = nb__args_nonfinite_class(&n->args);
    if (held < c) { int k = nonfinite(g); held = k > held ? k : held; }
    if (held < c) { int k = nonfinite(n->saved_out); held = k > held ? k : held; }
    for (int i = 0; i < n->nin && held < c; i++) {
        int k = nonfinite(n->inputs[i]);
        held = k > held ? k : held;
    }
    return c > held;
}

/* Leaf gradients are contiguous, of the leaf's dtype, and never alias another tensor's storage
   that a later op might write: they are a fresh tensor or one no one else holds. */
static int accumulate_leaf(nb_tensor *leaf, nb_tensor *g) {
    nb_tensor *c = g;
    if (!nb_is_contiguous(g) || g->dtype != leaf->dtype) {
        nb_op_args a = { .dtype = leaf->dtype };
        c = nb__dispatch(g->dtype != leaf->dtype ? NB_OP_CAST : NB_OP_COPY, &g, 1, &a);
        if (!c) return -1;
    } else nb_retain(c);
    int rc = 0;
    if (!leaf->grad) leaf->grad = c;
    else {
        rc = accumulate(&leaf->grad, c);
        nb_release(c);
    }
    return rc;
}

/* ---- hooks ---- */
enum { MAX_HOOKS = 64 };
static nb_backward_hooks hook_table[MAX_HOOKS];
static bool hook_used[MAX_HOOKS];
static _Atomic int hook_count;
static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;

int nb__backward_hooks_add(nb_backward_hooks hooks) {
    pthread_mutex_lock(&hook_lock);
    int id = -1;
    for (int i = 0; i < MAX_HOOKS && id < 0; i++)
        if (!hook_used[i]) id = i;
    if (id >= 0) {
        hook_table[id] = hooks;
        hook_used[id] = true;
        atomic_fetch_add(&hook_count, 1);
    }
    pthread_mutex_unlock(&hook_lock);
    if (id < 0) nb__error("nb_backward: %d backward hooks are registered already (free a DDP module first)", MAX_HOOKS);
    return id;
}

void nb__backward_hooks_remove(int id) {
    if (id < 0 || id >= MAX_HOOKS) return;
    pthread_mutex_lock(&hook_lock);
    if (hook_used[id]) {
        hook_used[id] = false;
        atomic_fetch_sub(&hook_count, 1);
    }
    pthread_mutex_unlock(&hook_lock);
}

/* The hooks registered when a backward starts (it calls these, whatever changes meanwhile). */
typedef struct {
    nb_backward_hooks h[MAX_HOOKS];
    int n;
} hook_set;

static void hooks_snapshot(hook_set *hs) {
    hs->n = 0;
    if (atomic_load(&hook_count) == 0) return;
    pthread_mutex_lock(&hook_lock);
    for (int i = 0; i < MAX_HOOKS; i++)
        if (hook_used[i]) hs->h[hs->n++] = hook_table[i];
    pthread_mutex_unlock(&hook_lock);
}

static void hooks_ready(const hook_set *hs, nb_tensor *leaf, bool got) {
    for (int i = 0; i < hs->n; i++)
        if (hs->h[i].grad_ready) hs->h[i].grad_ready(leaf, got, hs->h[i].ctx);
}

static int hooks_finished(const hook_set *hs, int rc) {
    int out = rc;
    for (int i = 0; i < hs->n; i++)
        if (hs->h[i].finished && hs->h[i].finished(rc, hs->h[i].ctx) < 0) out = -1;
    return out;
}

/* Leaves of one backward with the edges to them still to run: an open-addressing table keyed
   by the tensor's address, built only when hooks are registered. */
typedef struct {
    nb_tensor *leaf;
    int pending;     /* edges from nodes not yet run */
    bool got;        /* a gradient was added in this backward */
    nb_tensor *sum;  /* a hooked leaf's gradient so far, for its hooks once complete (owned) */
} leaf_entry;

typedef struct {
    leaf_entry *e;
    size_t cap; /* a power of two, or 0 */
} leaf_map;

static bool is_leaf_edge(const nb_tensor *in) { return in && in->requires_grad && !in->grad_fn; }

static leaf_entry *leaf_find(leaf_map *m, nb_tensor *t, bool insert) {
    size_t h = (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
    while (m->e[h].leaf && m->e[h].leaf != t) h = (h + 1) & (m->cap - 1);
    if (!m->e[h].leaf) {
        if (!insert) return NULL;
        m->e[h].leaf = t;
    }
    return &m->e[h];
}

/* Counts the edges to each leaf from the nodes of order; -1 when memory runs out. */
static int leaf_map_build(leaf_map *m, const node_list *order) {
    size_t edges = 0;
    for (int k = 0; k < order->n; k++)
        for (int i = 0; i < order->items[k]->nin; i++) edges += is_leaf_edge(order->items[k]->inputs[i]);
    m->cap = 16;
    while (m->cap < 2 * edges) m->cap *= 2;
    m->e = nb__alloc(sizeof(leaf_entry) * m->cap);
    if (!m->e) { m->cap = 0; return -1; }
    memset(m->e, 0, sizeof(leaf_entry) * m->cap);
    for (int k = 0; k < order->n; k++)
        for (int i = 0; i < order->items[k]->nin; i++)
            if (is_leaf_edge(order->items[k]->inputs[i])) leaf_find(m, order->items[k]->inputs[i], true)->pending++;
    return 0;
}

/* Runs the gradient hooks h on *g (an owned reference, replaced by what they return); 0 or -1. */
static int run_grad_hooks(nb_grad_hook_entry *h, nb_tensor **g, const char *fn, const char *on) {
    for (; h; h = h->next) {
        nb_scope *hs = nb_scope_begin();
        uint64_t errors0 = nb__error_count();
        nb_tensor *g2 = h->fn(*g, h->ctx);
        if (g2 && g2 != *g && (!nb__shape_eq(&g2->shape, &(*g)->shape) || g2->dtype != (*g)->dtype)) {
            char d1[200], d2[200];
            nb__error("%s: a gradient hook on %s returned %s for a gradient %s", fn, on, nb__describe(g2, d1, sizeof d1),
                      nb__describe(*g, d2, sizeof d2));
            g2 = NULL;
        }
        if (g2 && g2 != *g) {
            nb_retain(g2);
            nb_release(*g);
            *g = g2;
        }
        nb_scope_end(hs);
        if (!g2) {
            if (nb__error_count() == errors0) nb__error("%s: a gradient hook on %s failed", fn, on);
            return -1;
        }
    }
    return 0;
}

/* A leaf's whole gradient g of this backward (borrowed) through its hooks, into its .grad. */
static int accumulate_hooked_leaf(nb_tensor *leaf, nb_tensor *g, const char *fn) {
    nb_tensor *h = nb_retain(g);
    int rc = run_grad_hooks(leaf->hooks, &h, fn, "a leaf");
    if (rc == 0) rc = accumulate_leaf(leaf, h);
    nb_release(h);
    return rc;
}

/* One edge to leaf has run (got: it gave leaf a gradient); with none left, leaf is ready: a
   hooked leaf's gradient goes through its hooks into .grad, then the backward hooks hear of it. */
static int leaf_edge_done(leaf_map *m, const hook_set *hs, nb_tensor *leaf, bool got, const char *fn) {
    if (!m->cap) return 0;
    leaf_entry *e = leaf_find(m, leaf, false);
    if (!e) return 0;
    if (got) e->got = true;
    if (--e->pending > 0) return 0;
    int rc = 0;
    if (e->sum) {
        rc = accumulate_hooked_leaf(leaf, e->sum, fn);
        nb_release(e->sum);
        e->sum = NULL;
    }
    if (rc == 0) hooks_ready(hs, leaf, e->got);
    return rc;
}

/* Node n was skipped (no gradient reached it): its edges to leaves are done, giving nothing.
   Called while n still holds its inputs. */
static int leaf_map_node_skipped(leaf_map *m, const hook_set *hs, nb_node *n, const char *fn) {
    int rc = 0;
    if (!m->cap) return 0;
    for (int i = 0; i < n->nin; i++)
        if (is_leaf_edge(n->inputs[i]) && leaf_edge_done(m, hs, n->inputs[i], false, fn) < 0) rc = -1;
    return rc;
}

/* One backward: from roots seeded with seeds, either into the leaves' gradients (targets NULL:
   nb_backward) or into results[j] for targets[j] alone (nb_autograd_grad, .grad untouched, only
   the nodes that lead to a target run). create_graph runs the formulas with grad recording on,
   so the gradients are differentiable; retain_graph keeps the graph for another backward. */
typedef struct backward_req {
    const char *fn;
    nb_tensor *const *roots, *const *seeds;
    int nroots;
    nb_tensor *const *targets;
    int ntargets;
    nb_tensor **results; /* owned references, NULL where no gradient reached */
    bool create_graph, retain_graph;
} backward_req;

static int target_index(const backward_req *rq, const nb_tensor *t) {
    for (int j = 0; j < rq->ntargets; j++)
        if (rq->targets[j] == t) return j;
    return -1;
}

/* Whether a gradient into input `in` can reach a target: it is one, or its node is marked. */
static bool leads_to_target(const backward_req *rq, const nb_tensor *in, int mark) {
    return in->requires_grad && (target_index(rq, in) >= 0 || (in->grad_fn && in->grad_fn->visit == mark));
}

/* The formula of n under create_graph: an output it saved is recomputed from the inputs with
   recording on, so the gradient depends on the inputs through it (the saved alias is detached). */
static int run_formula(nb_node *n, nb_tensor *g, nb_tensor **gin, bool create_graph) {
    if (n->op == NB_OP_COUNT) return nb__function_backward(n, g, gin); /* a custom function */
    const nb_op_def *def = &nb__ops[n->op];
    nb_tensor *saved = n->saved_out, *redone = NULL;
    if (create_graph && saved) {
        redone = nb__dispatch((nb_op_id)n->op, n->inputs, n->nin, &n->args);
        if (!redone) return -1;
        n->saved_out = redone;
    }
    int rc = def->backward(n, g, gin);
    if (redone) {
        n->saved_out = saved;
        nb_release(redone);
    }
    return rc;
}

/* A slice node's gradient g added in place into the part of its input's accumulated gradient
   that the slice covers, when that gradient exists already and is the engine's alone (one
   reference to it and to its storage, contiguous, of g's dtype): 1 when done, 0 when it does not
   apply (the formula runs), -1 on failure. The formula would make a zero tensor the size of the
   whole input around g and add it, so the T steps of an RNN slicing one projection would cost
   T whole-size tensors, quadratic in T; this way they cost T slices. */
static int slice_into_grad(nb_node *n, nb_tensor *g, bool into_leaves, int epoch) {
    nb_tensor *in = n->inputs[0];
    if (!in->requires_grad || !in->grad_fn || (!into_leaves && in->grad_fn->visit != epoch + 2)) return 0;
    nb_tensor *acc = in->grad_fn->grad_acc;
    if (!acc || atomic_load(&acc->refcount) != 1 || atomic_load(&acc->storage->refcount) != 1 || acc->storage->ops ||
        !nb_is_contiguous(acc) || acc->dtype != g->dtype || acc->shape.ndim != in->shape.ndim ||
        memcmp(acc->shape.dim, in->shape.dim, sizeof(int64_t) * (size_t)in->shape.ndim) != 0)
        return 0;
    if (nb__node_check_versions(n) < 0) return -1;
    nb_scope *s = nb_scope_begin();
    const nb_op_args *a = &n->args;
    nb_tensor *part = nb_slice(acc, (int)a->i[0], a->i[1], a->i[2], a->i[3]);
    int rc = part && nb_assign(part, nb_add(part, g)) == 0 ? 1 : -1;
    nb_scope_end(s);
    return rc;
}

static int run_backward(const backward_req *rq) {
    const char *fn = rq->fn;
    char d[200], ds[200];
    for (int k = 0; k < rq->nroots; k++) {
        nb_tensor *root = rq->roots[k], *seed = rq->seeds[k];
        if (!root) {
            if (!nb__has_error()) nb__error("%s: tensor is NULL", fn);
            return -1;
        }
        if (!root->requires_grad) {
            nb__error("%s: tensor %s does not require grad (no input was marked with nb_set_requires_grad, "
                      "or it was made with grad disabled)", fn, nb__describe(root, d, sizeof d));
            return -1;
        }
        if (!seed) {
            if (!nb__has_error()) nb__error("%s: the gradient is NULL", fn);
            return -1;
        }
        if (!nb__is_float(seed->dtype)) {
            nb__error("%s: gradient %s must be a float tensor, for tensor %s", fn, nb__describe(seed, ds, sizeof ds),
                      nb__describe(root, d, sizeof d));
            return -1;
        }
        if (!nb__shape_eq(&seed->shape, &root->shape)) {
            nb__error("%s: gradient %s does not match tensor %s", fn, nb__describe(seed, ds, sizeof ds),
                      nb__describe(root, d, sizeof d));
            return -1;
        }
    }
    bool into_leaves = rq->targets == NULL, retain = rq->retain_graph || rq->create_graph;
    bool was_enabled = nb_set_grad_enabled(rq->create_graph);
    /* gradients compute in the precision their forward op chose (as torch's do under autocast),
       not by whether backward happens to run inside an autocast scope */
    nb_dtype was_autocast = nb_autocast(NB_F32);
    int rc = 0;
    hook_set hooks;
    hooks.n = 0;
    if (into_leaves) hooks_snapshot(&hooks); /* DDP and the like follow .grad, which autograd_grad leaves alone */
    leaf_map leaves = { 0 };
    node_list order = { 0 }, stack = { 0 };
    nb_scope *outer = nb_scope_begin();
    static _Atomic int visit_epoch;
    /* visit = epoch: on the stack; epoch + 1: done; epoch + 2: done and leads to a target */
    int epoch = atomic_fetch_add(&visit_epoch, 4) + 4;
    for (int k = 0; k < rq->nroots && rc == 0; k++) {
        nb_tensor *root = rq->roots[k];
        nb_tensor *seed_c = nb_cast(rq->seeds[k], root->dtype);
        if (!seed_c) { rc = -1; goto oom; }
        if (!root->grad_fn) { /* a leaf: its gradient is the seed */
            if (into_leaves) {
                rc = root->hooks ? accumulate_hooked_leaf(root, seed_c, fn) : accumulate_leaf(root, seed_c);
                if (rc == 0) hooks_ready(&hooks, root, true);
            } else if (target_index(rq, root) >= 0) rc = accumulate(&rq->results[target_index(rq, root)], seed_c);
            continue;
        }
        nb_node *r = root->grad_fn;
        if (r->released) {
            nb__error("%s: the graph behind %s (made by nb_%s) was already freed by an earlier backward; "
                      "run the forward again (or keep the graph with nb_autograd_grad's retain_graph)", fn, nb__describe(root, d, sizeof d), nb__node_op_name(r));
            rc = -1;
            goto fail;
        }
        if (r->visit != epoch + 1) {
            /* Order the nodes: depth-first post-order from the root. */
            r->visit = epoch;
            r->deps = 0;
            if (list_push(&stack, r) < 0) { rc = -1; goto oom; }
        }
        while (stack.n > 0) {
            nb_node *n = stack.items[stack.n - 1];
            bool pushed = false;
            for (int i = 0; i < n->nin && !pushed; i++) {
                nb_tensor *in = n->inputs[i];
                if (!in || !in->requires_grad || !in->grad_fn) continue;
                nb_node *c = in->grad_fn;
                if (c->visit == epoch || c->visit == epoch + 1) continue;
                if (c->released) {
                    nb__error("%s: the graph behind an input of nb_%s (made by nb_%s) was already freed by an "
                              "earlier backward; run the forward again", fn, nb__node_op_name(n), nb__node_op_name(c));
                    rc = -1;
                    goto fail;
                }
                c->visit = epoch;
                c->deps = 0;
                if (list_push(&stack, c) < 0) { rc = -1; goto oom; }
                pushed = true;
            }
            if (!pushed) {
                stack.n--;
                n->visit = epoch + 1;
                /* hold the node: releasing a node's inputs may drop the last tensor that owns another */
                atomic_fetch_add(&n->refcount, 1);
                if (list_push(&order, n) < 0) { nb__node_unref(n); rc = -1; goto oom; }
            }
        }
        rc = accumulate(&r->grad_acc, seed_c);
    }
    if (rc < 0) goto fail;
    bool hooked_leaves = false;
    for (int k = 0; k < order.n; k++) {
        nb_node *n = order.items[k];
        for (int i = 0; i < n->nin; i++) {
            if (n->inputs[i]->requires_grad && n->inputs[i]->grad_fn) n->inputs[i]->grad_fn->deps++;
            hooked_leaves = hooked_leaves || (into_leaves && is_leaf_edge(n->inputs[i]) && n->inputs[i]->hooks);
        }
    }
    /* with targets, mark the nodes that lead to one (post-order: inputs' nodes come first) */
    for (int k = 0; !into_leaves && k < order.n; k++) {
        nb_node *n = order.items[k];
        bool lead = false;
        for (int j = 0; j < rq->ntargets && !lead; j++) lead = rq->targets[j] && rq->targets[j]->grad_fn == n;
        for (int i = 0; i < n->nin && !lead; i++) lead = leads_to_target(rq, n->inputs[i], epoch + 2);
        if (lead) n->visit = epoch + 2;
    }

    if ((hooks.n > 0 || hooked_leaves) && leaf_map_build(&leaves, &order) < 0) { rc = -1; goto oom; }

    /* Run the nodes from the roots down (reverse post-order is a topological order). */
    bool anomaly = nb__anomaly_enabled();
    for (int k = order.n - 1; k >= 0 && rc == 0; k--) {
        nb_node *n = order.items[k];
        nb_tensor *g = n->grad_acc;
        n->grad_acc = NULL;
        if (!g) { /* no gradient reached it */
            rc = leaf_map_node_skipped(&leaves, &hooks, n, fn);
            if (!retain) nb__node_release_saved(n);
            continue;
        }
        if (n->hooks) {
            char on[64];
            snprintf(on, sizeof on, "the output of nb_%s", nb__node_op_name(n));
            if (run_grad_hooks(n->hooks, &g, fn, on) < 0) {
                nb_release(g);
                rc = -1;
                break;
            }
        }
        bool runs = true;
        if (!into_leaves) {
            for (int j = 0; j < rq->ntargets && rc == 0; j++)
                if (rq->targets[j] && rq->targets[j]->grad_fn == n) rc = accumulate(&rq->results[j], g);
            runs = false;
            for (int i = 0; i < n->nin && !runs; i++) runs = leads_to_target(rq, n->inputs[i], epoch + 2);
        }
        if (rc < 0 || !runs) {
            nb_release(g);
            if (!retain) nb__node_release_saved(n);
            continue;
        }
        if (n->op == NB_OP_SLICE && !rq->create_graph && !anomaly) {
            int done = slice_into_grad(n, g, into_leaves, epoch);
            if (done != 0) {
                nb_release(g);
                if (!retain) nb__node_release_saved(n);
                if (done < 0) rc = -1;
                continue;
            }
        }
        const char *op_name = nb__node_op_name(n);
        nb_tensor *stack_gin[8] = { 0 };
        nb_tensor **gin = n->nin <= 8 ? stack_gin : nb__alloc(sizeof(nb_tensor *) * (size_t)n->nin);
        if (!gin) { nb_release(g); rc = -1; goto oom; }
        if (gin != stack_gin) memset(gin, 0, sizeof(nb_tensor *) * (size_t)n->nin);
        if (nb__node_check_versions(n) < 0) {
            nb_release(g);
            if (gin != stack_gin) nb__free(gin, sizeof(nb_tensor *) * (size_t)n->nin);
            rc = -1;
            break;
        }
        nb_scope *s = nb_scope_begin();
        bool suspended = nb__anomaly_suspend(true);
        uint64_t errors0 = nb__error_count(); /* this formula's failures, not an older uncleared error */
        int brc = run_formula(n, g, gin, rq->create_graph);
        nb__anomaly_suspend(suspended);
        if (brc < 0 || nb__error_count() != errors0) {
            if (!nb__has_error()) nb__error("%s: the backward of nb_%s failed", fn, op_name);
            rc = -1;
        }
        for (int i = 0; rc == 0 && i < n->nin; i++) {
            nb_tensor *in = n->inputs[i];
            if (!in->requires_grad) continue;
            if (!gin[i]) {
                nb__error("%s: the backward of nb_%s gave no gradient for input %d", fn, op_name, i);
                rc = -1;
                break;
            }
            if (anomaly && backward_anomaly(n, g, gin[i])) {
                nb__error("%s: anomaly detected: the backward of nb_%s produced NaN or Inf in the gradient of "
                          "input %d %s", fn, op_name, i, nb__describe(in, d, sizeof d));
                rc = -1;
                break;
            }
            if (!into_leaves) {
                int j = in->grad_fn ? -1 : target_index(rq, in);
                if (j >= 0) rc = accumulate(&rq->results[j], gin[i]);
                else if (in->grad_fn && in->grad_fn->visit == epoch + 2) rc = accumulate(&in->grad_fn->grad_acc, gin[i]);
            } else if (in->grad_fn) rc = accumulate(&in->grad_fn->grad_acc, gin[i]);
            else if (in->hooks) { /* summed for its hooks, which see the whole gradient */
                rc = accumulate(&leaf_find(&leaves, in, false)->sum, gin[i]);
                if (rc == 0) rc = leaf_edge_done(&leaves, &hooks, in, true, fn);
            } else {
                rc = accumulate_leaf(in, gin[i]);
                if (rc == 0) rc = leaf_edge_done(&leaves, &hooks, in, true, fn);
            }
        }
        nb_scope_end(s);
        if (gin != stack_gin) nb__free(gin, sizeof(nb_tensor *) * (size_t)n->nin);
        nb_release(g);
        if (!retain) nb__node_release_saved(n);
    }
fail:
oom:
    if (rc < 0 && !nb__has_error()) nb__error("%s: out of memory", fn);
    for (int k = 0; k < order.n; k++) {
        nb_node *n = order.items[k];
        if (n->grad_acc) { nb_release(n->grad_acc); n->grad_acc = NULL; }
        n->visit = epoch + 1; /* no mark of this backward is mistaken for the next one's */
        nb__node_unref(n);
    }
    list_free(&order);
    list_free(&stack);
    nb_scope_end(outer);
    for (size_t k = 0; k < leaves.cap; k++) nb_release(leaves.e[k].sum); /* left by a failed backward */
    if (leaves.cap) nb__free(leaves.e, sizeof(leaf_entry) * leaves.cap);
    if (hooks.n > 0) rc = hooks_finished(&hooks, rc);
    nb_set_grad_enabled(was_enabled);
    nb_autocast(was_autocast);
    return rc;
}

int nb_backward_with(nb_tensor *root, nb_tensor *seed) {
    backward_req rq = { .fn = "nb_backward", .roots = &root, .seeds = &seed, .nroots = 1 };
    return run_backward(&rq);
}

int nb_autograd_grad(nb_tensor *const *outputs, nb_tensor *const *grad_outputs, int n_out, nb_tensor *const *inputs,
                     int n_in, nb_tensor **grads, nb_grad_opts opts) {
    const char *fn = "nb_autograd_grad";
    char d[200];
    if (n_out <= 0 || n_in <= 0 || !outputs || !inputs || !grads) {
        nb__error("%s: needs at least one output and one input, and room for the gradients (got %d outputs, %d inputs%s)",
                  fn, n_out, n_in, grads ? "" : ", grads NULL");
        return -1;
    }
    for (int j = 0; j < n_in; j++) grads[j] = NULL;
    for (int j = 0; j < n_in; j++) {
        if (!inputs[j]) {
            nb__error("%s: input %d is NULL", fn, j);
            return -1;
        }
        if (!inputs[j]->requires_grad) {
            nb__error("%s: input %d %s does not require grad", fn, j, nb__describe(inputs[j], d, sizeof d));
            return -1;
        }
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *stack_seeds[8], **seeds = n_out <= 8 ? stack_seeds : nb__alloc(sizeof(nb_tensor *) * (size_t)n_out);
    nb_tensor **results = nb__alloc(sizeof(nb_tensor *) * (size_t)n_in);
    int rc = seeds && results ? 0 : -1;
    if (rc < 0) nb__error("%s: out of memory", fn);
    else memset(results, 0, sizeof(nb_tensor *) * (size_t)n_in);
    for (int k = 0; rc == 0 && k < n_out; k++) {
        seeds[k] = grad_outputs ? grad_outputs[k] : NULL;
        if (seeds[k] || !outputs[k]) continue;
        if (outputs[k]->numel != 1) { /* as torch: an implicit gradient only for a single-element output */
            nb__error("%s: output %d %s has %lld elements; give its gradient in grad_outputs", fn, k,
                      nb__describe(outputs[k], d, sizeof d), (long long)outputs[k]->numel);
            rc = -1;
        } else seeds[k] = nb_ones_like(outputs[k]);
    }
    if (rc == 0) {
        backward_req rq = { .fn = fn, .roots = outputs, .seeds = seeds, .nroots = n_out, .targets = inputs,
                            .ntargets = n_in, .results = results, .create_graph = opts.create_graph,
                            .retain_graph = opts.retain_graph };
        rc = run_backward(&rq);
        for (int j = 0; rc == 0 && j < n_in; j++)
            if (!results[j] && !opts.allow_unused) {
                nb__error("%s: input %d %s was not used to compute the outputs (set allow_unused to get NULL for it)",
                          fn, j, nb__describe(inputs[j], d, sizeof d));
                rc = -1;
            }
    }
    nb_scope_end(s);
    for (int j = 0; results && j < n_in; j++) {
        if (rc == 0) grads[j] = nb__own(results[j]);
        else nb_release(results[j]);
    }
    if (seeds && seeds != stack_seeds) nb__free(seeds, sizeof(nb_tensor *) * (size_t)n_out);
    if (results) nb__free(results, sizeof(nb_tensor *) * (size_t)n_in);
    return rc;
}

int nb_backward(nb_tensor *t) {
    if (!t) {
        if (!nb__has_error()) nb__error("nb_backward: tensor is NULL");
        return -1;
    }
    if (t->numel != 1) {
        char d[200];
        nb__error("nb_backward: tensor %s has %lld elements; backward needs a single-element loss "
                  "(or nb_backward_with and a gradient)", nb__describe(t, d, sizeof d), (long long)t->numel);
        return -1;
    }
    nb_scope *s = nb_scope_begin();
    int rc = nb_backward_with(t, nb_ones_like(t));
    nb_scope_end(s);
    return rc;
}
