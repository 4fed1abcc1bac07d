/* The module base: parameters, buffers and children registered by name in order, dotted
   names in PyTorch's order, train/eval mode, device moves and freeing a whole tree. */
#include "nn_impl.h"
#include "../backend/backend.h"
#include "../autograd/engine.h"
#include "../ops/ops_impl.h" /* nb__tracing */
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ENTRY_PARAM, ENTRY_BUFFER, ENTRY_CHILD };

typedef struct entry {
    char *name;
    int kind;
    nb_tensor *tensor;  /* owned (params, buffers) */
    nb_module *child;   /* owned */
} entry;

struct nb_module_state {
    entry *items;
    int n, cap;
    nb_module *parent;
    char *path;              /* dotted path from the root ("" for a root) */
    char **names;            /* every name a listing of this module handed out, owned */
    int names_n, names_cap;
};

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int nb__module_children(nb_module *m, const char **names, nb_module **kids, int cap) {
    int k = 0;
    for (int i = 0; m && m->state && i < m->state->n; i++) {
        entry *e = &m->state->items[i];
        if (e->kind != ENTRY_CHILD) continue;
        if (k < cap) {
            names[k] = e->name;
            kids[k] = e->child;
        }
        k++;
    }
    return k;
}

nb_module *nb_module_new(const nb_module_class *cls, size_t size) {
    if (!cls) { nb__error("nb_module_new: class is NULL"); return NULL; }
    if (size < sizeof(nb_module)) {
        nb__error("nb_module_new: size %zu is smaller than nb_module (%zu bytes): embed nb_module first", size, sizeof(nb_module));
        return NULL;
    }
    nb_module *m = calloc(1, size);
    nb_module_state *st = calloc(1, sizeof *st);
    char *path = dup_str("");
    if (!m || !st || !path) {
        free(m); free(st); free(path);
        nb__error("nb_module_new: out of memory creating %s", cls->name ? cls->name : "module");
        return NULL;
    }
    m->cls = cls;
    m->training = true;
    m->state = st;
    st->path = path;
    return m;
}

const char *nb_module_path(const nb_module *m) { return m && m->state ? m->state->path : ""; }

static int add_entry(nb_module *m, const char *fn, const char *name, int kind, nb_tensor *t, nb_module *child) {
    nb_module_state *st = m->state;
    if (!name || !*name || strchr(name, '.')) {
        nb__error("%s: invalid name \"%s\" (non-empty, without dots)", fn, name ? name : "(null)");
        return -1;
    }
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->items[i].name, name) == 0) {
            nb__error("%s: %s already has an entry named \"%s\"", fn, m->cls->name, name);
            return -1;
        }
    if (st->n == st->cap) {
        int cap = st->cap ? st->cap * 2 : 8;
        entry *grown = realloc(st->items, sizeof(entry) * (size_t)cap);
        if (!grown) { nb__error("%s: out of memory", fn); return -1; }
        st->items = grown;
        st->cap = cap;
    }
    char *copy = dup_str(name);
    if (!copy) { nb__error("%s: out of memory", fn); return -1; }
    st->items[st->n++] = (entry){ copy, kind, t, child };
    return 0;
}

static nb_tensor *register_tensor(nb_module *m, const char *fn, const char *name, nb_tensor *t, int kind) {
    if (!m || !t) {
        if (t) nb_release(nb_keep(t));
        if (!nb__has_error()) nb__error("%s: %s is NULL", fn, m ? "tensor" : "module");
        return NULL;
    }
    nb_keep(t); /* the module takes the caller's reference, out of its scope if it is in one */
    if (add_entry(m, fn, name, kind, t, NULL) < 0) {
        nb_release(t);
        return NULL;
    }
    if (kind == ENTRY_PARAM) nb_set_requires_grad(t, true);
    return t;
}

nb_tensor *nb_module_param(nb_module *m, const char *name, nb_tensor *t) {
    return register_tensor(m, "nb_module_param", name, t, ENTRY_PARAM);
}

nb_tensor *nb_module_buffer(nb_module *m, const char *name, nb_tensor *t) {
    return register_tensor(m, "nb_module_buffer", name, t, ENTRY_BUFFER);
}

/* Recomputes the dotted paths of m's subtree from m's own path. */
static void update_paths(nb_module *m) {
    nb_module_state *st = m->state;
    for (int i = 0; i < st->n; i++) {
        if (st->items[i].kind != ENTRY_CHILD) continue;
        nb_module *c = st->items[i].child;
        size_t n = strlen(st->path) + strlen(st->items[i].name) + 2;
        char *p = malloc(n);
        if (!p) continue;
        snprintf(p, n, "%s%s%s", st->path, *st->path ? "." : "", st->items[i].name);
        free(c->state->path);
        c->state->path = p;
        update_paths(c);
    }
}

nb_module *nb_module_child(nb_module *m, const char *name, nb_module *child) {
    if (!m || !child) {
        if (child) nb_module_free(child);
        if (!nb__has_error()) nb__error("nb_module_child: %s is NULL", m ? "child" : "module");
        return NULL;
    }
    if (child->state->parent) {
        nb__error("nb_module_child: module \"%s\" already belongs to another module", nb_module_path(child));
        return NULL;
    }
    if (add_entry(m, "nb_module_child", name, ENTRY_CHILD, NULL, child) < 0) {
        nb_module_free(child);
        return NULL;
    }
    child->state->parent = m;
    update_paths(m);
    return child;
}

/* ---- forward and backward hooks ---- */
enum { HOOK_FORWARD_PRE, HOOK_FORWARD, HOOK_BACKWARD_PRE, HOOK_BACKWARD };

typedef struct {
    int handle;
    int kind;
    nb_forward_pre_hook pre_fn;
    nb_forward_hook fn;
    nb_backward_pre_hook bw_pre_fn;
    nb_backward_hook bw_fn;
    void *ctx;
} hook;

struct nb_module_hooks {
    hook *items;
    int n, cap, next_handle;
    int n_backward; /* backward hooks and pre-hooks among items: nb_forward wraps only for them */
};

static int add_hook(nb_module *m, hook h, const char *fn) {
    if (!m || (!h.pre_fn && !h.fn && !h.bw_pre_fn && !h.bw_fn)) {
        nb__error("%s: %s is NULL", fn, m ? "the hook" : "module");
        return -1;
    }
    if (!m->hooks && !(m->hooks = calloc(1, sizeof *m->hooks))) {
        nb__error("%s: out of memory", fn);
        return -1;
    }
    struct nb_module_hooks *hs = m->hooks;
    if (hs->n == hs->cap) {
        int cap = hs->cap ? 2 * hs->cap : 4;
        hook *items = realloc(hs->items, sizeof(hook) * (size_t)cap);
        if (!items) {
            nb__error("%s: out of memory", fn);
            return -1;
        }
        hs->items = items;
        hs->cap = cap;
    }
    h.handle = hs->next_handle++;
    hs->items[hs->n++] = h;
    if (h.kind >= HOOK_BACKWARD_PRE) hs->n_backward++;
    return h.handle;
}

int nb_module_add_forward_pre_hook(nb_module *m, nb_forward_pre_hook fn, void *ctx) {
    return add_hook(m, (hook){ .kind = HOOK_FORWARD_PRE, .pre_fn = fn, .ctx = ctx }, "nb_module_add_forward_pre_hook");
}

int nb_module_add_forward_hook(nb_module *m, nb_forward_hook fn, void *ctx) {
    return add_hook(m, (hook){ .kind = HOOK_FORWARD, .fn = fn, .ctx = ctx }, "nb_module_add_forward_hook");
}

int nb_module_add_backward_hook(nb_module *m, nb_backward_hook fn, void *ctx) {
    return add_hook(m, (hook){ .kind = HOOK_BACKWARD, .bw_fn = fn, .ctx = ctx }, "nb_module_add_backward_hook");
}

int nb_module_add_backward_pre_hook(nb_module *m, nb_backward_pre_hook fn, void *ctx) {
    return add_hook(m, (hook){ .kind = HOOK_BACKWARD_PRE, .bw_pre_fn = fn, .ctx = ctx }, "nb_module_add_backward_pre_hook");
}

int nb_module_remove_hook(nb_module *m, int handle) {
    struct nb_module_hooks *hs = m ? m->hooks : NULL;
    for (int i = 0; hs && i < hs->n; i++)
        if (hs->items[i].handle == handle) {
            if (hs->items[i].kind >= HOOK_BACKWARD_PRE) hs->n_backward--;
            memmove(&hs->items[i], &hs->items[i + 1], sizeof(hook) * (size_t)(hs->n - i - 1));
            hs->n--;
            return 0;
        }
    nb__error("nb_module_remove_hook: %s has no hook %d", m ? nb__layer_name(m) : "(NULL module)", handle);
    return -1;
}

/* One nb_forward's backward hooks, as torch's BackwardHook: identity functions wrap the input
   (when it requires grad) and the output. The output's backward runs the pre-hooks and keeps
   grad_output; the input's runs the hooks with grad_input and that grad_output. Each identity
   node holds a reference, so the state lives exactly as long as the graph that can call it. */
typedef struct bw_call {
    atomic_int refs;
    nb_module *m;
    bool input_wrapped;
    nb_tensor *grad_output; /* owned: from the output's backward until the input's */
    int n;
    hook hooks[]; /* the backward hooks m had at the call (a hook may change m's list) */
} bw_call;

static void bw_call_drop(void *p) {
    bw_call *c = p;
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
    nb_release(c->grad_output);
    free(c);
}

/* Pushes the context that errors inside hook i of c are told in, as "nb_backward: the backward hook
   (handle H) of module M (Class) failed: ...". */
static void hook_context(nb__error_ctx *ec, const bw_call *c, int i) {
    nb__error_push(ec, NULL, "nb_backward: the %s (handle %d) of module %s (%s) failed",
                   c->hooks[i].kind == HOOK_BACKWARD ? "backward hook" : "backward pre-hook", c->hooks[i].handle,
                   nb__layer_name(c->m), c->m->cls->name);
}

/* r, what hook i of c returned for gradient g (NULL: keep g), as the gradient to pass on; NULL
   with an error when the hook failed or r does not fit. */
static nb_tensor *bw_result(bw_call *c, int i, const char *what, nb_tensor *g, nb_tensor *r, uint64_t errors0) {
    const char *kind = c->hooks[i].kind == HOOK_BACKWARD ? "backward hook" : "backward pre-hook";
    if (nb__error_count() != errors0) return NULL; /* told in the hook's context (hook_context) */
    if (!r || r == g) return g;
    if (!nb__shape_eq(&r->shape, &g->shape) || r->dtype != g->dtype) {
        char d1[200], d2[200];
        nb__error("nb_backward: the %s (handle %d) of module %s (%s) returned %s for %s %s", kind, c->hooks[i].handle,
                  nb__layer_name(c->m), c->m->cls->name, nb__describe(r, d1, sizeof d1), what,
                  nb__describe(g, d2, sizeof d2));
        return NULL;
    }
    return r;
}

static nb_tensor *bw_identity(nb_function_ctx *ctx, nb_tensor *const *in, int n, void *user) {
    (void)ctx, (void)n, (void)user;
    return in[0];
}

/* The gradient of the module's output arrives: pre-hooks, then (input not wrapped) the hooks
   with grad_input NULL, as torch calls them then. Tensors made here belong to the engine's
   scope around this backward, which outlives their use. */
static int bw_output_backward(nb_function_ctx *ctx, nb_tensor *g, nb_tensor **gin, int n, void *user) {
    (void)ctx, (void)n;
    bw_call *c = user;
    for (int i = 0; i < c->n && g; i++) {
        if (c->hooks[i].kind != HOOK_BACKWARD_PRE) continue;
        uint64_t errors0 = nb__error_count();
        nb__error_ctx ec;
        hook_context(&ec, c, i);
        nb_tensor *r = c->hooks[i].bw_pre_fn(c->m, g, c->hooks[i].ctx);
        nb__error_pop(&ec);
        g = bw_result(c, i, "grad_output", g, r, errors0);
    }
    if (!g) return -1;
    nb_release(c->grad_output);
    c->grad_output = nb_retain(g);
    if (!c->input_wrapped) {
        for (int i = 0; i < c->n; i++) {
            if (c->hooks[i].kind != HOOK_BACKWARD) continue;
            uint64_t errors0 = nb__error_count();
            nb__error_ctx ec;
            hook_context(&ec, c, i);
            nb_tensor *r = c->hooks[i].bw_fn(c->m, NULL, g, c->hooks[i].ctx);
            nb__error_pop(&ec);
            if (!bw_result(c, i, "grad_input", g, NULL, errors0)) return -1;
            if (r) {
                nb__error("nb_backward: the backward hook (handle %d) of module %s (%s) returned a gradient, but the "
                          "module's input needs none (grad_input is NULL): return NULL", c->hooks[i].handle,
                          nb__layer_name(c->m), c->m->cls->name);
                return -1;
            }
        }
        nb_release(c->grad_output);
        c->grad_output = NULL;
    }
    gin[0] = g;
    return 0;
}

/* The gradient of the module's input is complete: the hooks, each seeing the last replacement. */
static int bw_input_backward(nb_function_ctx *ctx, nb_tensor *g, nb_tensor **gin, int n, void *user) {
    (void)ctx, (void)n;
    bw_call *c = user;
    for (int i = 0; i < c->n && g; i++) {
        if (c->hooks[i].kind != HOOK_BACKWARD) continue;
        uint64_t errors0 = nb__error_count();
        nb__error_ctx ec;
        hook_context(&ec, c, i);
        nb_tensor *r = c->hooks[i].bw_fn(c->m, g, c->grad_output, c->hooks[i].ctx);
        nb__error_pop(&ec);
        g = bw_result(c, i, "grad_input", g, r, errors0);
    }
    nb_release(c->grad_output);
    c->grad_output = NULL;
    if (!g) return -1;
    gin[0] = g;
    return 0;
}

static const nb_function BW_INPUT = { "BackwardHookFunction", bw_identity, bw_input_backward };
static const nb_function BW_OUTPUT = { "BackwardHookFunction", bw_identity, bw_output_backward };

/* The state of a call that records a graph through a module with backward hooks; NULL when none
   is needed, or with an error (*failed) when out of memory. */
static bw_call *bw_call_new(nb_module *m, bool *failed) {
    struct nb_module_hooks *hs = m->hooks;
    *failed = false;
    if (!hs->n_backward || !nb_is_grad_enabled()) return NULL;
    if (nb__tracing()) {
        nb__error("nb_forward: module %s (%s) has backward hooks, which a compiled graph would never call; run it "
                  "eagerly, or compile it with grad disabled", nb__layer_name(m), m->cls->name);
        *failed = true;
        return NULL;
    }
    bw_call *c = calloc(1, sizeof *c + sizeof(hook) * (size_t)hs->n_backward);
    if (!c) {
        nb__error("nb_forward: out of memory");
        *failed = true;
        return NULL;
    }
    atomic_init(&c->refs, 1);
    c->m = m;
    for (int i = 0; i < hs->n; i++)
        if (hs->items[i].kind >= HOOK_BACKWARD_PRE) c->hooks[c->n++] = hs->items[i];
    return c;
}

/* t wrapped in call's identity function fn (the caller's own reference), or NULL with an error. */
static nb_tensor *bw_wrap(bw_call *c, const nb_function *fn, nb_tensor *t) {
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); /* the node's, dropped with it */
    return nb__function_apply_owned(fn, &t, 1, c, bw_call_drop);
}

/* The forward with the hooks around it: forward pre-hooks in order, the input's backward-hook
   wrapper, the forward, every forward hook (each also on a failure, with y NULL, so none misses
   the end of a call it began), then the output's wrapper; torch's order in Module._call_impl. */
static nb_tensor *hooked_forward(nb_module *m, nb_tensor *x) {
    struct nb_module_hooks *hs = m->hooks;
    int n = hs->n;
    hook stack[8], *hooks = n <= 8 ? stack : malloc(sizeof(hook) * (size_t)n);
    if (!hooks) {
        nb__error("nb_forward: out of memory");
        return NULL;
    }
    memcpy(hooks, hs->items, sizeof(hook) * (size_t)n); /* a hook may add or remove hooks */
    bool failed;
    bw_call *call = bw_call_new(m, &failed);
    nb_tensor *in = x, *y = NULL, *wrapped_in = NULL;
    bool ok = !failed;
    for (int i = 0; i < n && ok; i++)
        if (hooks[i].kind == HOOK_FORWARD_PRE && !(in = hooks[i].pre_fn(m, in, hooks[i].ctx))) ok = false;
    if (ok && call && in->requires_grad) {
        ok = (wrapped_in = bw_wrap(call, &BW_INPUT, in)) != NULL;
        call->input_wrapped = ok;
        if (ok) in = wrapped_in;
    }
    if (ok) y = m->cls->forward(m, in);
    for (int i = 0; i < n; i++)
        if (hooks[i].kind == HOOK_FORWARD) {
            nb_tensor *r = hooks[i].fn(m, in ? in : x, y, hooks[i].ctx);
            y = y ? r : NULL; /* a failure stays one */
        }
    if (y && call && y->requires_grad) {
        nb_tensor *wrapped = bw_wrap(call, &BW_OUTPUT, y);
        /* without a scope the caller would own y, which it now never sees */
        if (wrapped && !nb__scope_open() && y != x && y != in) nb_release(y);
        y = nb__own(wrapped);
    }
    if (call) bw_call_drop(call);
    nb_release(wrapped_in); /* the graph holds it where it is used */
    if (hooks != stack) free(hooks);
    return y;
}
nb_tensor *nb_forward(nb_module *m, nb_tensor *x) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_forward: module is NULL");
        return NULL;
    }
    if (!x) {
        nb__error("nb_forward: input is NULL");
        return NULL;
    }
    if (!m->cls->forward) {
        nb__error("nb_forward: %s has no forward", m->cls->name);
        return NULL;
    }
    if (m->hooks && m->hooks->n) return hooked_forward(m, x); /* no cost to a module without hooks */
    return m->cls->forward(m, x);
}

/* Moves every parameter and buffer of m and its children to dev; on a failure, moves back
   those already moved (to where each was) and returns -1. */
static int move_tree(nb_module *m, nb_device dev, nb_tensor ***moved, nb_device **from, int *n, int *cap) {
    nb_module_state *st = m->state;
    for (int i = 0; i < st->n; i++) {
        if (st->items[i].kind == ENTRY_CHILD) {
            if (move_tree(st->items[i].child, dev, moved, from, n, cap) < 0) return -1;
            continue;
        }
        nb_tensor *t = st->items[i].tensor;
        if (*n == *cap) {
            int c = *cap ? 2 * *cap : 16;
            nb_tensor **a = realloc(*moved, sizeof(nb_tensor *) * (size_t)c);
            if (a) *moved = a;
            nb_device *b = realloc(*from, sizeof(nb_device) * (size_t)c);
            if (b) *from = b;
            if (!a || !b) {
                nb__error("nb_module_to: out of memory");
                return -1;
            }
            *cap = c;
        }
        (*moved)[*n] = t;
        (*from)[*n] = nb_device_of(t);
        if (nb__tensor_move(t, dev) < 0) return -1;
        ++*n;
    }
    return 0;
}

nb_module *nb_module_to(nb_module *m, nb_device device) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_module_to: module is NULL");
        return NULL;
    }
    if (!nb__backend_for("nb_module_to", device)) return NULL;
    nb_tensor **moved = NULL;
    nb_device *from = NULL;
    int n = 0, cap = 0;
    nb__error_ctx quiet;
    nb__error_quiet(&quiet);
    int rc = move_tree(m, device, &moved, &from, &n, &cap);
    if (rc < 0) {
        for (int i = n - 1; i >= 0; i--) nb__tensor_move(moved[i], from[i]); /* back where each was */
        nb__error_reword("%s (the module is left where it was)", nb_error());
    }
    nb__error_pop(&quiet);
    free(moved);
    free(from);
    return rc < 0 ? NULL : m;
}

void nb_module_train(nb_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->state->n; i++)
        if (m->state->items[i].kind == ENTRY_CHILD) nb_module_train(m->state->items[i].child, training);
}

int nb__module_modes(nb_module *m, bool *modes, int cap, int k, bool restore) {
    if (k < cap) {
        if (restore) m->training = modes[k];
        else modes[k] = m->training;
    }
    k++;
    for (int i = 0; i < m->state->n; i++)
        if (m->state->items[i].kind == ENTRY_CHILD) k = nb__module_modes(m->state->items[i].child, modes, cap, k, restore);
    return k;
}

static void free_names(nb_module_state *st) {
    for (int i = 0; i < st->names_n; i++) free(st->names[i]);
    free(st->names);
    st->names = NULL;
    st->names_n = st->names_cap = 0;
}

void nb_module_free(nb_module *m) {
    if (!m) return;
    if (m->cls->free) m->cls->free(m);
    nb_module_state *st = m->state;
    for (int i = st->n - 1; i >= 0; i--) {
        if (st->items[i].kind == ENTRY_CHILD) nb_module_free(st->items[i].child);
        else nb_release(st->items[i].tensor);
        free(st->items[i].name);
    }
    free(st->items);
    free_names(st);
    free(st->path);
    free(st);
    if (m->hooks) free(m->hooks->items);
    free(m->hooks);
    free(m);
}

nb_module *nb_module_get_child(nb_module *m, const char *name) {
    if (!m || !name) return NULL;
    for (int i = 0; i < m->state->n; i++)
        if (m->state->items[i].kind == ENTRY_CHILD && strcmp(m->state->items[i].name, name) == 0) return m->state->items[i].child;
    return NULL;
}

nb_tensor *nb_module_get(nb_module *m, const char *path) {
    if (!m || !path) return NULL;
    const char *dot = strchr(path, '.');
    if (dot) {
        char head[256];
        size_t n = (size_t)(dot - path);
        if (n >= sizeof head) return NULL;
        memcpy(head, path, n);
        head[n] = 0;
        return nb_module_get(nb_module_get_child(m, head), dot + 1);
    }
    for (int i = 0; i < m->state->n; i++)
        if (m->state->items[i].kind != ENTRY_CHILD && strcmp(m->state->items[i].name, path) == 0) return m->state->items[i].tensor;
    return NULL;
}

/* Walks the tree in PyTorch's order: a module's own parameters, then its buffers (state_dict
   order, whatever the order of registration), then its children. The names come from the
   listed module's pool, so they live as long as it does and a repeated listing adds none. */
typedef struct {
    nb_module_state *pool;
    nb_named_tensor *out;
    int cap, count;
    int hint; /* where the next name is likely to be in the pool */
    bool failed;
} listing;

static const char *pooled_name(listing *l, const char *prefix, const char *name) {
    nb_module_state *st = l->pool;
    size_t n = strlen(prefix) + strlen(name) + 2;
    char *full = malloc(n);
    if (!full) { l->failed = true; return NULL; }
    snprintf(full, n, "%s%s%s", prefix, *prefix ? "." : "", name);
    for (int k = 0; k < st->names_n; k++) {
        int i = (l->hint + k) % st->names_n;
        if (strcmp(st->names[i], full) == 0) {
            free(full);
            l->hint = i + 1;
            return st->names[i];
        }
    }
    if (st->names_n == st->names_cap) {
        int cap = st->names_cap ? st->names_cap * 2 : 16;
        char **grown = realloc(st->names, sizeof(char *) * (size_t)cap);
        if (!grown) { free(full); l->failed = true; return NULL; }
        st->names = grown;
        st->names_cap = cap;
    }
    st->names[st->names_n++] = full;
    l->hint = st->names_n;
    return full;
}

static void list_walk(nb_module *m, const char *prefix, bool params, bool buffers, listing *l) {
    nb_module_state *st = m->state;
    for (int kind = ENTRY_PARAM; kind <= ENTRY_BUFFER; kind++) {
        if ((kind == ENTRY_PARAM && !params) || (kind == ENTRY_BUFFER && !buffers)) continue;
        for (int i = 0; i < st->n; i++) {
            entry *e = &st->items[i];
            if (e->kind != kind) continue;
            const char *name = pooled_name(l, prefix, e->name);
            if (!name) return;
            if (l->count < l->cap && l->out) l->out[l->count] = (nb_named_tensor){ name, e->tensor };
            l->count++;
        }
    }
    for (int i = 0; i < st->n && !l->failed; i++) {
        entry *e = &st->items[i];
        if (e->kind != ENTRY_CHILD) continue;
        size_t n = strlen(prefix) + strlen(e->name) + 2;
        char *p = malloc(n);
        if (!p) { l->failed = true; return; }
        snprintf(p, n, "%s%s%s", prefix, *prefix ? "." : "", e->name);
        list_walk(e->child, p, params, buffers, l);
        free(p);
    }
}

static int list_entries(nb_module *m, const char *fn, bool params, bool buffers, nb_named_tensor *out, int cap) {
    if (!m) {
        if (!nb__has_error()) nb__error("%s: module is NULL", fn);
        return -1;
    }
    listing l = { m->state, out, cap, 0, 0, false };
    list_walk(m, "", params, buffers, &l);
    if (l.failed) {
        nb__error("%s: out of memory", fn);
        return -1;
    }
    return l.count;
}

int nb_module_named_parameters(nb_module *m, nb_named_tensor *out, int cap) {
    return list_entries(m, "nb_module_named_parameters", true, false, out, cap);
}
int nb_module_named_buffers(nb_module *m, nb_named_tensor *out, int cap) {
    return list_entries(m, "nb_module_named_buffers", false, true, out, cap);
}
int nb_module_state_entries(nb_module *m, nb_named_tensor *out, int cap) {
    return list_entries(m, "nb_module_state_entries", true, true, out, cap);
}

/* Visits every parameter of the tree. */
void nb__module_each_param(nb_module *m, void (*fn)(nb_tensor *p, void *ctx), void *ctx) {
    if (!m) return;
    for (int i = 0; i < m->state->n; i++) {
        entry *e = &m->state->items[i];
        if (e->kind == ENTRY_PARAM) fn(e->tensor, ctx);
        else if (e->kind == ENTRY_CHILD) nb__module_each_param(e->child, fn, ctx);
    }
}

static void add_numel(nb_tensor *p, void *ctx) { *(int64_t *)ctx += nb_numel(p); }
int64_t nb_module_num_params(nb_module *m) {
    int64_t n = 0;
    nb__module_each_param(m, add_numel, &n);
    return n;
}

static void drop_grad(nb_tensor *p, void *ctx) { (void)ctx; nb_zero_grad(p); }
void nb_module_zero_grad(nb_module *m) { nb__module_each_param(m, drop_grad, NULL); }
