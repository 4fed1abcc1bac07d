/* The backward engine: orders the recorded graph, runs each node's backward formula (ops
   themselves, through the one dispatch path), accumulates gradients into leaves and frees
   the graph as it goes. Sits above ops; the graph record it walks sits below them. */
#include "../ops/ops_impl.h"
#include <math.h>
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

int nb_backward_with(nb_tensor *root, nb_tensor *seed) {
    if (!root) {
        if (!nb__has_error()) nb__error("nb_backward: tensor is NULL");
        return -1;
    }
    char d[200], ds[200];
    if (!root->requires_grad) {
        nb__error("nb_backward: tensor %s does not require grad (no input was marked with nb_set_requires_grad, "
                  "or it was made with grad disabled)", nb__describe(root, d, sizeof d));
        return -1;
    }
    if (!seed) {
        if (!nb__has_error()) nb__error("nb_backward: the gradient is NULL");
        return -1;
    }
    if (!nb__is_float(seed->dtype)) {
        nb__error("nb_backward: gradient %s must be a float tensor, for tensor %s", nb__describe(seed, ds, sizeof ds),
                  nb__describe(root, d, sizeof d));
        return -1;
    }
    if (!nb__shape_eq(&seed->shape, &root->shape)) {
        nb__error("nb_backward: gradient %s does not match tensor %s", nb__describe(seed, ds, sizeof ds),
                  nb__describe(root, d, sizeof d));
        return -1;
    }
    bool was_enabled = nb_set_grad_enabled(false);
    int rc = 0;
    nb_scope *outer = nb_scope_begin();
    nb_tensor *seed_c = nb_cast(seed, root->dtype);
    if (!seed_c) { rc = -1; goto out; }
    if (!root->grad_fn) {
        rc = accumulate_leaf(root, seed_c);
        goto out;
    }

    /* Order the nodes: depth-first post-order from the root, counting each node's consumers. */
    node_list order = { 0 }, stack = { 0 };
    nb_node *r = root->grad_fn;
    static _Atomic int visit_epoch;
    int epoch = atomic_fetch_add(&visit_epoch, 2) + 2;
    if (r->released) {
        nb__error("nb_backward: the graph behind %s (made by nb_%s) was already freed by an earlier nb_backward; "
                  "run the forward again", nb__describe(root, d, sizeof d), nb__node_op_name(r));
        rc = -1;
        goto out;
    }
    /* visit = epoch: on the stack; epoch + 1: done */
    r->visit = epoch;
    r->deps = 0;
    if (list_push(&stack, r) < 0) { rc = -1; goto oom; }
    while (stack.n > 0) {
        nb_node *n = stack.items[stack.n - 1];
        bool pushed = false;
        for (int i = 0; i < n->nin && !pushed; i++) {
            nb_tensor *in = n->inputs[i];
            if (!in || !in->requires_grad || !in->grad_fn) continue;
            nb_node *c = in->grad_fn;
            if (c->visit == epoch || c->visit == epoch + 1) continue;
            if (c->released) {
                nb__error("nb_backward: the graph behind an input of nb_%s (made by nb_%s) was already freed by an "
                          "earlier nb_backward; run the forward again", nb__node_op_name(n), nb__node_op_name(c));
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
    for (int k = 0; k < order.n; k++) {
        nb_node *n = order.items[k];
        for (int i = 0; i < n->nin; i++)
            if (n->inputs[i]->requires_grad && n->inputs[i]->grad_fn) n->inputs[i]->grad_fn->deps++;
    }

    /* Run the nodes from the root down (reverse post-order is a topological order). */
    r->grad_acc = nb_retain(seed_c);
    bool anomaly = nb__anomaly_enabled();
    for (int k = order.n - 1; k >= 0 && rc == 0; k--) {
        nb_node *n = order.items[k];
        nb_tensor *g = n->grad_acc;
        n->grad_acc = NULL;
        if (!g) { nb__node_release_saved(n); continue; } /* no gradient reached it */
        const nb_op_def *def = &nb__ops[n->op];
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
        int brc = def->backward(n, g, gin);
        nb__anomaly_suspend(suspended);
        if (brc < 0 || nb__error_count() != errors0) {
            if (!nb__has_error()) nb__error("nb_backward: the backward of nb_%s failed", def->name);
            rc = -1;
        }
        for (int i = 0; rc == 0 && i < n->nin; i++) {
            nb_tensor *in = n->inputs[i];
            if (!in->requires_grad) continue;
            if (!gin[i]) {
                nb__error("nb_backward: the backward of nb_%s gave no gradient for input %d", def->name, i);
                rc = -1;
                break;
            }
            if (anomaly && backward_anomaly(n, g, gin[i])) {
                nb__error("nb_backward: anomaly detected: the backward of nb_%s produced NaN or Inf in the gradient of "
                          "input %d %s", def->name, i, nb__describe(in, d, sizeof d));
                rc = -1;
                break;
            }
            if (in->grad_fn) rc = accumulate(&in->grad_fn->grad_acc, gin[i]);
            else rc = accumulate_leaf(in, gin[i]);
        }
        nb_scope_end(s);
        if (gin != stack_gin) nb__free(gin, sizeof(nb_tensor *) * (size_t)n->nin);
        nb_release(g);
        nb__node_release_saved(n);
    }
fail:
oom:
    if (rc < 0 && !nb__has_error()) nb__error("nb_backward: out of memory");
    for (int k = 0; k < order.n; k++) {
        nb_node *n = order.items[k];
        if (n->grad_acc) { nb_release(n->grad_acc); n->grad_acc = NULL; }
        nb__node_unref(n);
    }
    list_free(&order);
    list_free(&stack);
out:
    nb_scope_end(outer);
    nb_set_grad_enabled(was_enabled);
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
