/* Graph nodes: creation, reference counting and release; grad mode and anomaly mode. */
#include "graph.h"
#include "nabla/autograd.h"
#include <string.h>

static NB_TLS bool grad_disabled; /* zero-initialised: recording is on by default */
static atomic_bool anomaly;
static const char *(*op_name_fn)(int);

bool nb__grad_enabled(void) { return !grad_disabled; }
bool nb_is_grad_enabled(void) { return !grad_disabled; }
bool nb_set_grad_enabled(bool enabled) {
    bool prev = !grad_disabled;
    grad_disabled = !enabled;
    return prev;
}
static NB_TLS bool anomaly_suspended;
bool nb__anomaly_enabled(void) { return !anomaly_suspended && atomic_load_explicit(&anomaly, memory_order_relaxed); }
bool nb__anomaly_suspend(bool suspend) {
    bool prev = anomaly_suspended;
    anomaly_suspended = suspend;
    return prev;
}
void nb_set_detect_anomaly(bool enabled) { atomic_store(&anomaly, enabled); }

void nb__graph_set_op_name(const char *(*name)(int)) { op_name_fn = name; }
const char *nb__node_op_name(const nb_node *n) { return op_name_fn ? op_name_fn(n->op) : "op"; }

static const char *node_print_name(const struct nb_node *n) {
    static _Thread_local char buf[64];
    const char *name = nb__node_op_name(n);
    /* PyTorch prints grad_fn=<MulBackward0>; we print the op's name the same way */
    size_t k = 0;
    bool up = true;
    for (const char *p = name; *p && k < sizeof buf - 10; p++) {
        if (*p == '_') { up = true; continue; }
        buf[k++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        up = false;
    }
    strcpy(buf + k, "Backward");
    return buf;
}

static void node_release_hook(struct nb_node *n) { nb__node_unref(n); }

__attribute__((constructor)) static void graph_init(void) {
    nb__set_node_release(node_release_hook);
    nb__set_node_name(node_print_name);
}

nb_node *nb__node_new(int op, nb_tensor *const *inputs, int nin, const nb_op_args *args, nb_tensor *out, bool save_out) {
    nb_node *n = nb__alloc(sizeof *n);
    if (!n) { nb__error("nb_backward: out of memory recording the graph"); return NULL; }
    memset(n, 0, sizeof *n);
    atomic_init(&n->refcount, 1);
    n->op = op;
    n->nin = nin;
    if (args) n->args = *args;
    if (nin <= 3) {
        n->inputs = n->inline_inputs;
        n->versions = n->inline_versions;
    } else {
        n->inputs = nb__alloc(sizeof(nb_tensor *) * (size_t)nin);
        n->versions = nb__alloc(sizeof(unsigned) * (size_t)nin);
        if (!n->inputs || !n->versions) {
            nb__free(n->inputs, sizeof(nb_tensor *) * (size_t)nin);
            nb__free(n->versions, sizeof(unsigned) * (size_t)nin);
            nb__free(n, sizeof *n);
            nb__error("nb_backward: out of memory recording the graph");
            return NULL;
        }
    }
    for (int i = 0; i < nin; i++) {
        n->inputs[i] = nb_retain(inputs[i]);
        n->versions[i] = atomic_load_explicit(&inputs[i]->storage->version, memory_order_relaxed);
    }
    if (save_out) {
        n->saved_out = nb__tensor_view(out, out->shape, out->stride, out->offset);
    }
    n->out_version = atomic_load_explicit(&out->storage->version, memory_order_relaxed);
    n->out_shape = out->shape;
    n->out_dtype = out->dtype;
    out->grad_fn = n;
    out->requires_grad = true;
    return n;
}

int nb__node_check_versions(const nb_node *n) {
    for (int i = 0; i < n->nin; i++) {
        const nb_tensor *t = n->inputs[i];
        if (t && atomic_load_explicit(&t->storage->version, memory_order_relaxed) != n->versions[i]) {
            char d[200];
            nb__error("nb_backward: input %d %s of nb_%s was modified in place (nb_assign) after the op used it; "
                      "its gradient would be wrong", i, nb__describe(t, d, sizeof d), nb__node_op_name(n));
            return -1;
        }
    }
    if (n->saved_out && atomic_load_explicit(&n->saved_out->storage->version, memory_order_relaxed) != n->out_version) {
        nb__error("nb_backward: the output of nb_%s was modified in place (nb_assign) before backward; its gradient "
                  "would be wrong", nb__node_op_name(n));
        return -1;
    }
    return 0;
}

void nb__node_release_saved(nb_node *n) {
    if (n->released) return;
    n->released = true;
    for (int i = 0; i < n->nin; i++) {
        nb_tensor *t = n->inputs[i];
        n->inputs[i] = NULL;
        nb_release(t);
    }
    nb_tensor *s = n->saved_out;
    n->saved_out = NULL;
    nb_release(s);
}

void nb__node_unref(nb_node *n) {
    if (!n || atomic_fetch_sub_explicit(&n->refcount, 1, memory_order_acq_rel) != 1) return;
    nb__node_release_saved(n);
    if (n->grad_acc) nb_release(n->grad_acc);
    nb__grad_hooks_free(n->hooks);
    if (n->drop) n->drop(n->drop_ctx);
    if (n->inputs != n->inline_inputs) {
        nb__free(n->inputs, sizeof(nb_tensor *) * (size_t)n->nin);
        nb__free(n->versions, sizeof(unsigned) * (size_t)n->nin);
    }
    nb__free(n, sizeof *n);
}

int nb_tensor_register_hook(nb_tensor *t, nb_grad_hook fn, void *ctx) {
    if (!t || !fn) {
        nb__error("nb_tensor_register_hook: %s is NULL", t ? "the hook" : "tensor");
        return -1;
    }
    char d[200];
    if (!t->requires_grad) {
        nb__error("nb_tensor_register_hook: tensor %s does not require grad", nb__describe(t, d, sizeof d));
        return -1;
    }
    nb_grad_hook_entry *h = nb__alloc(sizeof *h);
    if (!h) {
        nb__error("nb_tensor_register_hook: out of memory");
        return -1;
    }
    *h = (nb_grad_hook_entry){ fn, ctx, NULL };
    nb_grad_hook_entry **at = t->grad_fn ? &t->grad_fn->hooks : &t->hooks; /* a leaf holds its own */
    while (*at) at = &(*at)->next;
    *at = h;
    return 0;
}
