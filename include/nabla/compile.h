/* Graph mode: nb_compile traces a C function of tensors into a graph, optimises it and replays it. */
#ifndef NABLA_COMPILE_H
#define NABLA_COMPILE_H

#include "core.h"
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The function to compile: takes tensors, returns one (an owned or scope-held reference). */
typedef nb_tensor *(*nb_graph_fn)(nb_tensor *const *inputs, int n, void *ctx);

/* A compiled function: its cache of traced variants, each an optimised graph. */
typedef struct nb_compiled nb_compiled;

/* The passes, as bits for nb_graph_opts.disable. */
enum {
    NB_PASS_DCE = 1,   /* dead-code elimination */
    NB_PASS_FOLD = 2,  /* constant folding */
    NB_PASS_CSE = 4,   /* common sub-expression elimination */
    NB_PASS_FUSE = 8,  /* elementwise chains fused, into GEMM epilogues and reductions too */
    NB_PASS_PLAN = 16, /* memory planning: buffers reused by lifetime, in place where safe */
};

/* Options of nb_compile; zero fields take the defaults. */
typedef struct nb_graph_opts {
    bool dynamic_batch;    /* dimension 0 of the inputs may vary: every batch size shares one cache
                              entry (16 sizes kept per entry). The first call traces the function
                              at its batch size B and twice more, shapes only, at B+1 and B+2 (at
                              2, 3 and 4 when B is 1), and fits every size and shape-derived
                              scalar to the batch size, so a new size (other than 1) replays
                              without running the function; where the fit fails (the function
                              branches on the size), each new size is traced and
                              nb_compiled_note says why */
    int cache_size;        /* traced variants kept (least recently used goes first); 0: 8, at most 1024 */
    unsigned disable;      /* NB_PASS_* bits of passes to skip */
    bool interpret;        /* run fused kernels interpreted instead of compiling them as C */
    const char *cache_dir; /* where compiled kernels are kept; NULL: $NABLA_CACHE_DIR, else
                              $XDG_CACHE_HOME/nabla, else $HOME/.cache/nabla, else
                              /tmp/nabla-cache-<uid> */
    const char *cc;        /* the C compiler; NULL: $NABLA_CC, else $CC, else "cc" */
} nb_graph_opts;

/* Counters of a compiled function, for tests and tuning. */
typedef struct nb_compiled_stats {
    int traces;            /* times the function ran under the tracer, probe_traces included */
    int probe_traces;      /* of those, the shape-only probes of dynamic_batch (two per variant,
                              three when its first batch was 1) */
    int instantiations;    /* graphs made for a new batch size from a variant's fit, without tracing */
    int variants;          /* variants cached now */
    int evictions;         /* variants dropped to keep the cache bound */
    int64_t runs;          /* replays of a compiled graph */
    /* of the variant used last: */
    int ops_traced;        /* ops recorded */
    int ops_after;         /* nodes run after the passes (a fused kernel counts once) */
    int removed_dce, removed_cse, folded, fused_ops; /* ops each pass took away */
    int kernels;           /* fused kernels */
    int kernels_native;    /* of which run as compiled C (the rest interpreted) */
    int kernels_built;     /* C compiler runs this variant needed (0 when the disk cache had them) */
    int row_groups;        /* runs of kernels over the same rows run together, chunk of rows by chunk */
    int64_t arena_bytes;   /* bytes of the planned buffer */
    int64_t unplanned_bytes; /* bytes the same values would take without reuse */
    double compile_seconds; /* passes, code generation and loading (the trace run excluded) */
} nb_compiled_stats;

/* Wraps fn for graph mode; tracing happens at the first nb_compiled_run. NULL on bad options. */
NB_API nb_compiled *nb_compile(nb_graph_fn fn, void *ctx, nb_graph_opts opts);
/* Runs the compiled function on n inputs (at most 32): traces on the first call and whenever the
   inputs' shapes, dtypes, strides or requires_grad, or the grad mode, match no cached variant (the
   trace computes shapes only, so it takes little memory; the new graph's first replay is that
   call's result; with dynamic_batch, a new batch size of a variant is made from its fit instead
   where it can be), replays the optimised graph otherwise. The result belongs to the current scope
   (or the caller outside one); it never requires grad. NULL on error. */
NB_API nb_tensor *nb_compiled_run(nb_compiled *c, nb_tensor *const *inputs, int n);
/* Writes the graph of the variant run last, before and after the passes, one op per line; 0 or <0. */
NB_API int nb_compiled_dump(const nb_compiled *c, FILE *f);
/* The counters (zero for NULL). */
NB_API nb_compiled_stats nb_compiled_get_stats(const nb_compiled *c);
/* A note the compiler left (for example that no C compiler was found and kernels run
   interpreted), or NULL; the library prints nothing itself. */
NB_API const char *nb_compiled_note(const nb_compiled *c);
/* Frees the compiled function and its graphs (not ctx); NULL is ignored. */
NB_API void nb_compiled_free(nb_compiled *c);

#ifdef __cplusplus
}
#endif

#endif
