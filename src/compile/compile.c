/* nb_compile's public face: the cache of traced variants keyed by the inputs' shapes and dtypes
   (the guards), tracing on a miss (or, for a new batch size under dynamic_batch, instantiating the
   variant's symbolic template), replaying on a hit, counters, notes and the dump. */
#include "compile_impl.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_INPUTS 32
#define MAX_SPECS 16 /* batch sizes kept per dynamic variant */

typedef struct spec {
    int64_t dim0[MAX_INPUTS];
    cgraph *g;
    uint64_t used;
} spec;

typedef struct variant {
    int n;
    bool grad;
    nb_dtype autocast;    /* traced inside an autocast scope or not: its products differ */
    nb_dtype dtype[MAX_INPUTS];
    bool requires_grad[MAX_INPUTS]; /* a graph that gives an input its gradient, or not */
    nb_shape shape[MAX_INPUTS];
    int64_t stride[MAX_INPUTS][NB_MAX_DIMS];
    spec specs[MAX_SPECS];
    int nspecs;
    uint64_t used;
    nb_symgraph *sym;     /* dynamic_batch: the graph of any batch size, fitted at the first trace */
    bool sym_tried;       /* the probes ran (a template, or a note saying why none) */
} variant;

struct nb_compiled {
    nb_graph_fn fn;
    void *ctx;
    nb_graph_opts opts;
    variant **vars;
    int nvars;
    uint64_t clock;
    cgraph *last;
    /* One arena for all the graphs: one runs at a time, and nothing a run hands out lives in
       it (results and gradients are new tensors), so every variant shares the largest's bytes
       instead of holding its own. A graph binds to it when it runs; it lives on the device of
       the graph that ran last. */
    nb_tensor *arena;
    char *note;
    bool kernel_noted;    /* the note says why kernels run interpreted */
    nb_compiled_stats stats;
};

nb_compiled *nb_compile(nb_graph_fn fn, void *ctx, nb_graph_opts opts) {
    if (!fn) {
        nb__error("nb_compile: the function is NULL");
        return NULL;
    }
    if (opts.cache_size < 0 || opts.cache_size > 1024) {
        nb__error("nb_compile: cache_size %d must be between 0 (the default, 8) and 1024", opts.cache_size);
        return NULL;
    }
    nb_compiled *c = calloc(1, sizeof *c);
    if (!c) {
        nb__error("nb_compile: out of memory");
        return NULL;
    }
    if (opts.cache_size == 0) opts.cache_size = 8;
    c->fn = fn;
    c->ctx = ctx;
    c->opts = opts;
    c->vars = calloc((size_t)opts.cache_size, sizeof *c->vars);
    if (!c->vars) {
        free(c);
        nb__error("nb_compile: out of memory");
        return NULL;
    }
    return c;
}

/* The guard: grad mode and autocast (as torch.compile guards on them), then dtype,
   requires_grad, rank, sizes (dimension 0 aside when it is dynamic) and strides of each input. */
static bool guard_holds(const nb_compiled *c, const variant *v, nb_tensor *const *in, int n) {
    if (v->n != n || v->grad != nb_is_grad_enabled() || v->autocast != nb_autocast_dtype()) return false;
    for (int k = 0; k < n; k++) {
        const nb_tensor *t = in[k];
        if (t->dtype != v->dtype[k] || t->requires_grad != v->requires_grad[k] || t->shape.ndim != v->shape[k].ndim)
            return false;
        for (int d = 0; d < t->shape.ndim; d++) {
            if (t->shape.dim[d] != v->shape[k].dim[d] && !(d == 0 && c->opts.dynamic_batch)) return false;
            if (t->stride[d] != v->stride[k][d] && t->shape.dim[d] != 1) return false;
        }
    }
    return true;
}

static spec *find_spec(variant *v, nb_tensor *const *in, int n) {
    for (int s = 0; s < v->nspecs; s++) {
        bool same = true;
        for (int k = 0; k < n && same; k++) same = in[k]->shape.ndim == 0 || in[k]->shape.dim[0] == v->specs[s].dim0[k];
        if (same) return &v->specs[s];
    }
    return NULL;
}

/* Unbinds every graph and lets the arena go, so a trace does not run beside it. */
static void drop_arena(nb_compiled *c) {
    for (int i = 0; i < c->nvars; i++)
        for (int s = 0; s < c->vars[i]->nspecs; s++) nb__graph_bind(c->vars[i]->specs[s].g, NULL);
    nb_release(c->arena);
    c->arena = NULL;
}

/* Binds g to the shared arena, made (as large as the largest graph's) when there is none. */
static int bind_arena(nb_compiled *c, cgraph *g) {
    if (g->arena_bytes == 0 || (g->arena && g->arena == c->arena)) return 0;
    bool elsewhere = c->arena && (c->arena->storage->device.type != g->device.type ||
                                  c->arena->storage->device.index != g->device.index);
    if (!c->arena || elsewhere || nb_numel(c->arena) < g->arena_bytes) {
        drop_arena(c);
        int64_t bytes = g->arena_bytes;
        for (int i = 0; i < c->nvars; i++)
            for (int s = 0; s < c->vars[i]->nspecs; s++) {
                const cgraph *o = c->vars[i]->specs[s].g;
                if (o->arena_bytes > bytes && o->device.type == g->device.type && o->device.index == g->device.index)
                    bytes = o->arena_bytes;
            }
        if (!(c->arena = nb__tensor_new_on(NB_SHAPE(bytes), NB_U8, g->device))) {
            if (!nb__has_error()) nb__error("nb_compiled_run: out of memory for an arena of %lld bytes", (long long)bytes);
            return -1;
        }
    }
    return nb__graph_bind(g, c->arena);
}

static void variant_free(variant *v) {
    if (!v) return;
    for (int s = 0; s < v->nspecs; s++) nb__graph_free(v->specs[s].g);
    nb__sym_free(v->sym);
    free(v);
}


static void take_counters(nb_compiled *c, const cgraph *g) {
    nb_compiled_stats *s = &c->stats;
    s->ops_traced = g->ops_traced;
    int live = 0;
    for (int i = 0; i < g->nn; i++) live += !g->nodes[i].dead;
    s->ops_after = live;
    s->removed_dce = g->removed_dce;
    s->removed_cse = g->removed_cse;
    s->folded = g->folded;
    s->fused_ops = g->fused_ops;
    s->kernels = g->kernels;
    s->kernels_native = g->kernels_native;
    s->kernels_built = g->kernels_built;
    s->row_groups = g->row_groups;
    s->arena_bytes = g->arena_bytes;
    s->unplanned_bytes = g->unplanned_bytes;
    s->compile_seconds = g->compile_seconds;
}

/* Adds msg to the note, unless the note says it already. */
static void add_note(nb_compiled *c, const char *msg) {
    if (c->note && strstr(c->note, msg)) return;
    size_t had = c->note ? strlen(c->note) : 0, len = strlen(msg);
    char *s = realloc(c->note, had + len + 3);
    if (!s) return; /* a note is advice: without memory for it, the call still runs */
    if (had) memcpy(s + had, "; ", 2), had += 2;
    memcpy(s + had, msg, len + 1);
    c->note = s;
}

/* dynamic_batch, at a variant's first trace: the probes and the fit (nb__sym_build). The
   template, or NULL with a note saying why; *tried when the probes ran. */
static nb_symgraph *make_template(nb_compiled *c, nb_tensor *const *in, int n, const cgraph *raw, bool *tried) {
    char why[400], msg[512];
    int probes = 0;
    nb_symgraph *sym = nb__sym_build(c->fn, c->ctx, in, n, raw, &probes, why, sizeof why);
    c->stats.traces += probes;
    c->stats.probe_traces += probes;
    *tried = probes > 0;
    if (!sym && *tried) {
        snprintf(msg, sizeof msg, "dynamic_batch: %s, so each new batch size runs the function under the tracer", why);
        add_note(c, msg);
    }
    return sym;
}

/* The dump's title of a graph made from the fit: what it says of the one traced ("graph (traced):
   N ops") would claim a trace that never ran. */
static void retitle(cgraph *g, int64_t batch) {
    static const char traced[] = "graph (traced)";
    if (!g->dump_before || strncmp(g->dump_before, traced, sizeof traced - 1)) return;
    char head[96];
    int w = snprintf(head, sizeof head, "graph (made from the batch fit for batch %lld, not traced)", (long long)batch);
    const char *rest = g->dump_before + sizeof traced - 1;
    char *s = malloc((size_t)w + strlen(rest) + 1);
    if (!s) return; /* the old title stays: only the dump's words are at stake */
    memcpy(s, head, (size_t)w);
    strcpy(s + w, rest);
    free(g->dump_before);
    g->dump_before = s;
}

/* Optimises g (traced, or instantiated from v's template for batch `fitted`, else -1), files it
   under variant v (made when NULL, taking sym; tried marks that the probes ran) and runs it.
   result is the trace's shape-only answer (or NULL), let go before the run; t0 when making g
   began. */
static nb_tensor *install(nb_compiled *c, variant *v, cgraph *g, nb_symgraph *sym, bool tried, int64_t fitted,
                          nb_tensor *result, nb_tensor *const *in, int n, double t0) {
    char *note = NULL;
    if (nb__optimize(g, &c->opts, &note) < 0) {
        free(note);
        nb__graph_free(g);
        nb__sym_free(sym);
        nb_release(result);
        return NULL;
    }
    if (fitted >= 0) retitle(g, fitted);
    g->compile_seconds = nb__now() - t0;
    if (bind_arena(c, g) < 0) {
        free(note);
        nb__graph_free(g);
        nb__sym_free(sym);
        nb_release(result);
        return NULL;
    }
    if (note && !c->kernel_noted) { /* the compiler's trouble is said once */
        add_note(c, note);
        c->kernel_noted = true;
    }
    free(note);
    if (!v) {
        if (c->nvars == c->opts.cache_size) { /* the bound: the least recently used variant goes */
            int lru = 0;
            for (int i = 1; i < c->nvars; i++)
                if (c->vars[i]->used < c->vars[lru]->used) lru = i;
            if (c->last && c->vars[lru]->nspecs)
                for (int s = 0; s < c->vars[lru]->nspecs; s++)
                    if (c->vars[lru]->specs[s].g == c->last) c->last = NULL;
            variant_free(c->vars[lru]);
            c->vars[lru] = c->vars[--c->nvars];
            c->stats.evictions++;
        }
        v = calloc(1, sizeof *v);
        if (!v) {
            nb__graph_free(g);
            nb__sym_free(sym);
            nb_release(result);
            nb__error("nb_compiled_run: out of memory");
            return NULL;
        }
        v->n = n;
        v->grad = nb_is_grad_enabled();
        v->autocast = nb_autocast_dtype();
        for (int k = 0; k < n; k++) {
            v->dtype[k] = in[k]->dtype;
            v->requires_grad[k] = in[k]->requires_grad;
            v->shape[k] = in[k]->shape;
            memcpy(v->stride[k], in[k]->stride, sizeof v->stride[k]);
        }
        c->vars[c->nvars++] = v;
    }
    if (sym && !v->sym) v->sym = sym;
    else nb__sym_free(sym);
    v->sym_tried = v->sym_tried || tried;
    spec *s;
    if (v->nspecs == MAX_SPECS) {
        int lru = 0;
        for (int i = 1; i < v->nspecs; i++)
            if (v->specs[i].used < v->specs[lru].used) lru = i;
        if (c->last == v->specs[lru].g) c->last = NULL;
        nb__graph_free(v->specs[lru].g);
        s = &v->specs[lru];
    } else s = &v->specs[v->nspecs++];
    memset(s, 0, sizeof *s);
    for (int k = 0; k < n; k++) s->dim0[k] = in[k]->shape.ndim ? in[k]->shape.dim[0] : 0;
    s->g = g;
    s->used = v->used = ++c->clock;
    c->last = g;
    take_counters(c, g);
    c->stats.variants = c->nvars;
    /* the trace computed shapes only: the graph's first replay is this call's answer (and makes
       its updates, its gradients and its random draws, as the eager step would have) */
    nb_release(result);
    return nb__graph_run(g, in, n);
}

/* Traces, optimises and files a new graph under variant v (made when NULL); with dynamic_batch,
   a variant's first trace also makes its template. */
static nb_tensor *trace_new(nb_compiled *c, variant *v, nb_tensor *const *in, int n) {
    nb_tensor *result = NULL;
    c->stats.traces++;
    drop_arena(c);
    cgraph *g = nb__trace(c->fn, c->ctx, in, n, &result);
    if (!g) return NULL;
    nb_symgraph *sym = NULL;
    bool tried = false;
    if (c->opts.dynamic_batch && (!v || !v->sym_tried)) sym = make_template(c, in, n, g, &tried);
    return install(c, v, g, sym, tried, -1, result, in, n, nb__now());
}

/* A new batch size of variant v made from its template without running the function: the
   result, or NULL with *made false when the template cannot make it (then the caller traces). */
static nb_tensor *instantiate_new(nb_compiled *c, variant *v, nb_tensor *const *in, int n, bool *made) {
    *made = false;
    int64_t b = nb__sym_batch(v->sym, in, n);
    if (b < 0) return NULL;
    double t0 = nb__now();
    cgraph *g = NULL;
    int rc = nb__sym_instantiate(v->sym, b, in, &g);
    if (rc != 0) {
        *made = rc < 0; /* an error: reported, not traced over */
        return NULL;
    }
    *made = true;
    c->stats.instantiations++;
    return install(c, v, g, NULL, false, b, NULL, in, n, t0);
}

nb_tensor *nb_compiled_run(nb_compiled *c, nb_tensor *const *inputs, int n) {
    if (!c) {
        if (!nb__has_error()) nb__error("nb_compiled_run: compiled function is NULL");
        return NULL;
    }
    if (n < 0 || n > MAX_INPUTS || (n > 0 && !inputs)) {
        nb__error("nb_compiled_run: %d inputs (at most %d)", n, MAX_INPUTS);
        return NULL;
    }
    for (int k = 0; k < n; k++)
        if (!inputs[k]) {
            if (!nb__has_error()) nb__error("nb_compiled_run: input %d is NULL", k);
            return NULL;
        }
    variant *v = NULL;
    for (int i = 0; i < c->nvars && !v; i++)
        if (guard_holds(c, c->vars[i], inputs, n)) v = c->vars[i];
    spec *s = v ? find_spec(v, inputs, n) : NULL;
    if (!s && v && v->sym) {
        bool made;
        nb_tensor *r = instantiate_new(c, v, inputs, n, &made);
        if (made) return nb__own(r);
    }
    if (!s) return nb__own(trace_new(c, v, inputs, n));
    s->used = v->used = ++c->clock;
    if (c->last != s->g) take_counters(c, s->g);
    c->last = s->g;
    c->stats.runs++;
    if (bind_arena(c, s->g) < 0) return NULL;
    return nb__own(nb__graph_run(s->g, inputs, n));
}

int nb_compiled_dump(const nb_compiled *c, FILE *f) {
    if (!c || !f) {
        nb__error("nb_compiled_dump: %s is NULL", c ? "the file" : "the compiled function");
        return -1;
    }
    if (!c->last) {
        fprintf(f, "(not traced yet: nb_compiled_run traces at its first call)\n");
        return 0;
    }
    char *after = nb__graph_print(c->last, "after passes");
    if (c->last->dump_before) fputs(c->last->dump_before, f);
    if (after) fputs(after, f);
    fprintf(f, "memory: %lld bytes planned for values that would take %lld\n", (long long)c->last->arena_bytes,
            (long long)c->last->unplanned_bytes);
    if (c->note) fprintf(f, "note: %s\n", c->note);
    free(after);
    return 0;
}

nb_compiled_stats nb_compiled_get_stats(const nb_compiled *c) {
    nb_compiled_stats s = { 0 };
    return c ? c->stats : s;
}

const char *nb_compiled_note(const nb_compiled *c) { return c ? c->note : NULL; }

void nb_compiled_free(nb_compiled *c) {
    if (!c) return;
    for (int i = 0; i < c->nvars; i++) variant_free(c->vars[i]);
    nb_release(c->arena);
    free(c->vars);
    free(c->note);
    free(c);
}
