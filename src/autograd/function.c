/* Custom functions (torch.autograd.Function): a user's forward run with recording off, and a
   graph node whose backward is the user's. The node's inputs are the function's inputs followed
   by the saved tensors that are not inputs (detached aliases: made with recording off, they have
   no graph anyway), so the graph keeps them alive, frees them after the backward and catches
   their in-place change by the inputs' version check. A saved input is the input itself, so a
   backward written with ops differentiates through it under create_graph. */
#include "../ops/ops_impl.h"
#include "engine.h"
#include "nabla/ops.h"
#include <stdint.h>
#include <string.h>

enum { MAX_SAVED = 32, MAX_INPUTS = 64 };

struct nb_function_ctx {
    nb_tensor *const *inputs; /* the function's inputs */
    int n;
    nb_tensor *saved[MAX_SAVED]; /* forward: owned references; backward: borrowed from the node */
    int source[MAX_SAVED];       /* the input a saved tensor is, or -1 */
    int nsaved;
    bool forward;
};

/* Where the node keeps the function, its user pointer, its input count, the saved count and,
   packed a byte each from ARG_SOURCES on, which input each saved tensor is (SOURCE_OWN: the next
   of the node's extra inputs). */
enum { ARG_FN, ARG_USER, ARG_NIN, ARG_NSAVED, ARG_SOURCES };
#define SOURCE_OWN 0xFF

/* Whether fn can be applied to inputs[0..n); records why not. */
static bool apply_ok(const nb_function *fn, nb_tensor *const *inputs, int n) {
    if (!fn || !fn->forward || !fn->backward) {
        nb__error("nb_function_apply: the function%s needs a forward and a backward", fn && fn->name ? fn->name : "");
        return false;
    }
    const char *name = fn->name ? fn->name : "custom function";
    if (n < 0 || (n > 0 && !inputs) || n > MAX_INPUTS) {
        nb__error("nb_function_apply: %s: %d inputs", name, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!inputs[i]) {
            if (!nb__has_error()) nb__error("nb_function_apply: %s: input %d is NULL", name, i);
            return false;
        }
    if (nb__tracing()) { /* the trace would hold the forward's ops and differentiate those instead */
        nb__error("nb_function_apply: %s: custom functions cannot be traced by nb_compile yet", name);
        return false;
    }
    return true;
}

/* nb_function_apply's body: the output is the caller's own reference, in no scope; drop, when
   given, goes with the node (or runs before returning when no node is made). */
static nb_tensor *apply(const nb_function *fn, nb_tensor *const *inputs, int n, void *user, void (*drop)(void *)) {
    if (!apply_ok(fn, inputs, n)) {
        if (drop) drop(user);
        return NULL;
    }
    const char *name = fn->name ? fn->name : "custom function";
    nb_tensor *out = NULL;
    nb_node *node = NULL;
    bool record = nb_is_grad_enabled();
    bool any = false;
    for (int i = 0; i < n && record; i++) any = any || inputs[i]->requires_grad;
    nb_function_ctx ctx = { .inputs = inputs, .n = n, .forward = true };
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    uint64_t errors0 = nb__error_count();
    nb_tensor *y = fn->forward(&ctx, inputs, n, user);
    if (!y && nb__error_count() == errors0) nb__error("nb_function_apply: the forward of %s failed", name);
    if (y) out = nb_keep(nb_detach(y)); /* a header of its own: y may be an input or a view of one */
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    if (out && any) {
        nb_tensor *all[MAX_INPUTS + MAX_SAVED];
        int nall = n;
        for (int i = 0; i < n; i++) all[i] = inputs[i];
        nb_op_args args = { .i = { [ARG_FN] = (int64_t)(intptr_t)fn, [ARG_USER] = (int64_t)(intptr_t)user, [ARG_NIN] = n,
                                   [ARG_NSAVED] = ctx.nsaved } };
        for (int i = 0; i < ctx.nsaved; i++) {
            int64_t src = ctx.source[i] >= 0 ? ctx.source[i] : SOURCE_OWN;
            if (ctx.source[i] < 0) all[nall++] = ctx.saved[i];
            args.i[ARG_SOURCES + i / 8] |= src << (8 * (i % 8));
        }
        if (!(node = nb__node_new(NB_OP_COUNT, all, nall, &args, out, false))) {
            nb_release(out);
            out = NULL;
        }
    }
    for (int i = 0; i < ctx.nsaved; i++) nb_release(ctx.saved[i]);
    if (node) {
        node->drop = drop;
        node->drop_ctx = user;
    } else if (drop) drop(user);
    return out;
}

nb_tensor *nb_function_apply(const nb_function *fn, nb_tensor *const *inputs, int n, void *user) {
    return nb__own(apply(fn, inputs, n, user, NULL));
}

nb_tensor *nb__function_apply_owned(const nb_function *fn, nb_tensor *const *inputs, int n, void *user,
                                    void (*drop)(void *user)) {
    return apply(fn, inputs, n, user, drop);
}


int nb_function_save(nb_function_ctx *ctx, nb_tensor *t) {
    if (!ctx || !ctx->forward) {
        nb__error("nb_function_save: tensors are saved in the forward");
        return -1;
    }
    if (!t) {
        if (!nb__has_error()) nb__error("nb_function_save: tensor is NULL");
        return -1;
    }
    if (ctx->nsaved == MAX_SAVED) {
        nb__error("nb_function_save: at most %d tensors can be saved", MAX_SAVED);
        return -1;
    }
    int source = -1;
    for (int i = 0; i < ctx->n && source < 0; i++)
        if (ctx->inputs[i] == t) source = i;
    nb_tensor *kept = source >= 0 ? nb_retain(t) : nb_keep(nb_detach(t));
    if (!kept) return -1;
    ctx->source[ctx->nsaved] = source;
    ctx->saved[ctx->nsaved++] = kept;
    return 0;
}

nb_tensor *nb_function_saved(nb_function_ctx *ctx, int i) {
    if (!ctx || i < 0 || i >= ctx->nsaved) {
        nb__error("nb_function_saved: no saved tensor %d (%d saved)", i, ctx ? ctx->nsaved : 0);
        return NULL;
    }
    return ctx->saved[i];
}

bool nb_function_needs_grad(nb_function_ctx *ctx, int i) {
    return ctx && i >= 0 && i < ctx->n && ctx->inputs[i]->requires_grad;
}

int nb__function_backward(nb_node *node, nb_tensor *g, nb_tensor **gin) {
    const nb_function *fn = (const nb_function *)(intptr_t)node->args.i[ARG_FN];
    void *user = (void *)(intptr_t)node->args.i[ARG_USER];
    int n = (int)node->args.i[ARG_NIN];
    const char *name = fn->name ? fn->name : "custom function";
    nb_function_ctx ctx = { .inputs = node->inputs, .n = n, .nsaved = (int)node->args.i[ARG_NSAVED] };
    for (int i = 0, extra = n; i < ctx.nsaved; i++) {
        int src = (int)((node->args.i[ARG_SOURCES + i / 8] >> (8 * (i % 8))) & 0xFF);
        ctx.saved[i] = src == SOURCE_OWN ? node->inputs[extra++] : node->inputs[src];
    }
    uint64_t errors0 = nb__error_count();
    int rc = fn->backward(&ctx, g, gin, n, user);
    if (rc < 0) {
        if (nb__error_count() == errors0) nb__error("nb_backward: the backward of %s failed", name);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        nb_tensor *in = node->inputs[i], *gi = gin[i];
        if (!in->requires_grad || !gi) continue;
        if (!nb__shape_eq(&gi->shape, &in->shape) || gi->dtype != in->dtype) {
            char d1[200], d2[200];
            nb__error("nb_backward: the backward of %s gave %s for input %d %s", name, nb__describe(gi, d1, sizeof d1), i,
                      nb__describe(in, d2, sizeof d2));
            return -1;
        }
    }
    return 0;
}
