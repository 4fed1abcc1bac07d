/* The device-neutral graph compiler's own interfaces: tracing, the pipeline, the passes, memory
   planning, the printer. The IR itself is ir.h, which a backend's lowering shares; what the
   lowering adds (GEMM epilogues, row groups, code generation, the executor) is the backend's.
   Not installed. */
#ifndef NB_COMPILE_IMPL_H
#define NB_COMPILE_IMPL_H

#include "../ops/ops_impl.h"
#include "ir.h"

/* ---- the tracer (trace.c), the pipeline and printer (graph.c), planning and binding (plan.c);
   the IR's store and queries are ir.h's (ir.c) ---- */
/* Runs fn under the tracer into a new graph, computing shapes only (no kernel runs but those of
   values folding may need); the shape-only result goes to *result. NULL on error. */
cgraph *nb__trace(nb_graph_fn fn, void *ctx, nb_tensor *const *inputs, int n, nb_tensor **result);
/* Runs the passes that opts leaves on, hands the graph to the lowering of the backend it runs on
   (its own passes, then memory planning, then its build). 0 or -1. */
int nb__optimize(cgraph *g, const nb_graph_opts *opts, char **note);
/* Prints the graph, one op per line, into a new string (malloc'ed). */
char *nb__graph_print(const cgraph *g, const char *title);
/* Makes the arena values' headers views of arena (at least g->arena_bytes of u8), releasing
   those on an arena bound before; a NULL arena only unbinds. 0, or -1 with an error. */
int nb__graph_bind(cgraph *g, nb_tensor *arena);
/* Runs g (bound to an arena when it plans one) on inputs through its lowering; returns an owned
   tensor or NULL. */
nb_tensor *nb__graph_run(cgraph *g, nb_tensor *const *inputs, int n);

/* ---- the device-neutral passes (passes.c, fuse.c) and planning (plan.c) ---- */
/* Two nodes with the same op, inputs and arguments compute the same value, unless an input's
   storage is written in place somewhere (then their order matters) or the op draws randoms. */
int nb__pass_cse(cgraph *g);
/* Readers of a view that shows its root exactly read the root; returns how many views. */
int nb__pass_identity_views(cgraph *g);
/* Keeps what the result, the leaf gradients, in-place writes and random draws need. */
int nb__pass_dce(cgraph *g);
/* A value computed only from constants, on storage no one writes in place, is its trace-time
   tensor: the node that made it need not run again. Random and uninitialised makers are not. */
int nb__pass_fold(cgraph *g);
/* Merges chains of elementwise f32 ops into one kernel each: a producer joins its consumer when
   the consumer alone uses its result, the shapes agree, and no in-place write between the two
   changes what the producer reads. */
int nb__pass_fuse(cgraph *g);
/* A sum whose operand an elementwise chain made for it alone takes the chain in: the kernel
   reduces as it computes, and the operand is never stored. */
int nb__pass_fuse_reductions(cgraph *g);
/* Headers for every value whose storage is known at plan time, but the arena's (bound later:
   nb__graph_bind). */
int nb__make_headers(cgraph *g);
/* Places every value a node makes: the result in a fresh tensor per run, views on their base,
   the rest in one arena where values whose lifetimes do not overlap share bytes, and a fused
   kernel's result on an operand that dies there when the shapes agree (in place). A row group
   the lowering formed counts as one span. */
int nb__plan_memory(cgraph *g, bool reuse);

/* ---- the symbolic batch size of dynamic_batch (symbolic.c) ---- */
/* A variant's template: its raw graph with every size fitted as a*B + c and every scalar
   argument as c*B^k over the batch size B. */
typedef struct nb_symgraph nb_symgraph;
/* Traces fn twice more, shapes only, with stand-ins whose batch (the first input's dimension 0)
   is B+1 and B+2, and fits raw (traced on in at B, before any pass) against them (when B is 1,
   three times, at 2, 3 and 4, fitted without raw): the template, or NULL with why (size bytes)
   saying why not. *probes counts the traces it ran. */
nb_symgraph *nb__sym_build(nb_graph_fn fn, void *ctx, nb_tensor *const *in, int n, const cgraph *raw, int *probes,
                           char *why, size_t size);
/* The batch size of inputs whose graph the template can make, else -1. */
int64_t nb__sym_batch(const nb_symgraph *s, nb_tensor *const *in, int n);
/* Makes into *out the raw graph of batch b for inputs in (ready for nb__optimize): 0; 1 when the
   fits give no valid graph at b (trace instead); -1 with an error. */
int nb__sym_instantiate(const nb_symgraph *s, int64_t b, nb_tensor *const *in, cgraph **out);
/* Frees a template; NULL is ignored. */
void nb__sym_free(nb_symgraph *s);

#endif
