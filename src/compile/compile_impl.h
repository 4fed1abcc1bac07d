/* The graph IR of graph mode: values and nodes recorded by the tracer, the fused-kernel form
   the fusion pass makes, and the interfaces between tracing, passes, code generation and the
   executor. Not installed. */
#ifndef NB_COMPILE_IMPL_H
#define NB_COMPILE_IMPL_H

#include "../ops/ops_impl.h"
#include "nabla/compile.h"

typedef enum { VAL_INPUT, VAL_CAPTURE, VAL_NODE } val_kind;

/* Where a value's elements live at run time. */
typedef enum {
    LOC_EXTERNAL, /* an input, a captured tensor or a folded constant: read through its tensor */
    LOC_ARENA,    /* the planned buffer, at arena_off */
    LOC_OWN,      /* its own buffer made at plan time (planning off) */
    LOC_FRESH,    /* a new tensor every run: the result handed to the caller */
    LOC_VIEW,     /* shares base's storage */
    LOC_NONE,     /* made by a node the passes removed */
} val_loc;

typedef struct cval {
    val_kind kind;
    int input;              /* VAL_INPUT: which input */
    int node;               /* VAL_NODE: the node that makes it */
    nb_tensor *t;           /* captures and constants: the tensor (owned); others: the trace-time
                               tensor while the traced code can still reach it, else NULL */
    int64_t toff;           /* the trace-time tensor's element offset into its storage */
    bool foldable;          /* (tracing) made from constants only, so folding may need t */
    bool is_const;          /* folded: t holds the value */
    nb_shape shape;
    nb_dtype dtype;
    int64_t stride[NB_MAX_DIMS];
    int base;               /* views and in-place results: the value whose storage it shares, else -1 */
    int64_t delta;          /* element offset from base */
    int root;               /* the value that owns the storage (itself when base < 0) */
    bool mutated_root;      /* (roots) some in-place op writes this storage */
    /* planning */
    int uses;
    int first, last;        /* positions of definition and last use, over live nodes */
    val_loc loc;
    int64_t arena_off;
    int share;              /* in place: the value whose buffer it reuses, else -1 */
} cval;

typedef struct fkernel fkernel;

typedef struct cnode {
    int op;                 /* nb_op_id; NODE_FUSED for a fused kernel */
    int nin;
    int *in;                /* value ids (owned) */
    nb_op_args args;
    int out;
    int pos;                /* position in the trace (for reordering checks) */
    bool dead;
    fkernel *fk;            /* NODE_FUSED */
    int epi;                /* a matmul: the fused node run on each finished piece, else -1 */
    int opt_epi;            /* a matmul: the optimizer update run on each finished piece, else -1 */
    bool deferred;          /* a fused node that runs inside its matmul */
    int rgroup;             /* in a row group: the group's first node, else -1 */
} cnode;

#define NODE_FUSED (-1)
#define MAX_ROW_GROUP 16 /* kernels in one row group */

/* Fused elementwise code: registers in SSA form, one instruction each: a load of an input
   (FI_LOAD), or an op of ops.def whose fuse column is EW or CHEAP (op is its nb_op_id), which
   computes formulas.h's nbf_<name> on the float registers. */
#define FI_LOAD (-1)
typedef struct finstr {
    int op;
    int a, b, c;            /* source registers (FI_LOAD: a is the input index) */
    int s;                  /* a unary op's scalars: sc[s] and sc[s + 1] (its args.f[0], f[1]) */
} finstr;

/* How a fused kernel reduces what it computes (none, or a sum over a 2-D view of the output). */
typedef enum { RED_NONE, RED_ROWS, RED_COLS, RED_ALL } red_kind;

struct fkernel {
    int nin;
    int *in;                /* external input values */
    nb_dtype *in_dtype;
    int n;                  /* instructions; the last one's register is the result */
    finstr *code;
    int nscal;
    double *scal;
    int nops;               /* graph ops merged in */
    char *label;            /* "add+relu" */
    red_kind red;           /* with a reduction, out is the reduced value and shape the loop's */
    nb_shape loop;          /* the shape iterated (the elementwise result's) */
    bool epilogue;          /* runs in place on the buffer a GEMM just wrote */
    bool tile;              /* runs inside the GEMM, piece by piece: the loop keeps every axis */
    bool rows;              /* in a row group: laid out as [rows, cols] like a reduction */
    /* per specialization: the loop collapsed to (outer..., rows, cols) and each operand's strides */
    int nd;
    int64_t dim[NB_MAX_DIMS];
    int64_t (*st)[NB_MAX_DIMS]; /* [nin + 1][nd] byte strides; operand 0 is the output */
    char *cls;              /* per input: 'c' contiguous inner, 'b' broadcast inner, 's' strided */
    int index;              /* kernel number in the generated source */
    void (*fn)(int64_t r0, int64_t r1, int64_t cols, char *const *p, const int64_t *rs, const int64_t *cs,
               const double *sc);
};

/* One traced, optimised graph for one set of input shapes. */
typedef struct cgraph {
    cval *v;
    int nv, capv;
    cnode *nodes;
    int nn, capn;
    int ninputs;
    int out;                /* the result value */
    int *grad_leaf, *grad_val; /* leaves whose .grad the graph makes, and the value */
    int ngrads;
    char *dump_before;      /* the graph as traced, printed */
    nb_tensor *arena;       /* the planned buffer (u8) bound to (nb__graph_bind), or NULL */
    nb_tensor **hdr;        /* per value: a tensor header built at plan time, or NULL */
    int ops_traced, removed_dce, removed_cse, folded, fused_ops, kernels, kernels_native, kernels_built, row_groups;
    int64_t arena_bytes, unplanned_bytes;
    double compile_seconds;
    void *dl;               /* the loaded kernel library */
} cgraph;

/* ---- the tracer (trace.c), the pipeline, executor and printer (graph.c), binding (plan.c) ---- */
/* Runs fn under the tracer into a new graph, computing shapes only (no kernel runs but those of
   values folding may need); the shape-only result goes to *result. NULL on error. */
cgraph *nb__trace(nb_graph_fn fn, void *ctx, nb_tensor *const *inputs, int n, nb_tensor **result);
/* Runs the passes that opts leaves on, then plans memory. 0 or -1. */
int nb__optimize(cgraph *g, const nb_graph_opts *opts, char **note);
/* Prints the graph, one op per line, into a new string (malloc'ed). */
char *nb__graph_print(const cgraph *g, const char *title);
/* Frees a graph and the tensors it holds. */
void nb__graph_free(cgraph *g);
/* Makes the arena values' headers views of arena (at least g->arena_bytes of u8), releasing
   those on an arena bound before; a NULL arena only unbinds. 0, or -1 with an error. */
int nb__graph_bind(cgraph *g, nb_tensor *arena);
/* Runs g (bound to an arena when it plans one) on inputs; returns an owned tensor or NULL. */
nb_tensor *nb__graph_run(cgraph *g, nb_tensor *const *inputs, int n);

/* ---- fused kernels (src/compile/kernel.c) ---- */
/* Compiles the graph's fused kernels as one C file (or finds it in the disk cache) and binds
   them; kernels that cannot be compiled stay interpreted and *note says why. */
int nb__kernels_build(cgraph *g, const nb_graph_opts *opts, char **note);
/* Runs fused kernel k for the values' runtime tensors. */
int nb__kernel_run(fkernel *k, nb_tensor *out, nb_tensor *const *in);
/* Runs the n kernels of a row group chunk of rows by chunk of rows: out[i] and in[i] are kernel
   i's tensors. */
void nb__kernel_run_group(fkernel *const *k, int n, nb_tensor *const *out, nb_tensor *const *const *in);
/* Collapses the kernel's loop dimensions for its operands' strides in g (plan time). 0 or -1. */
int nb__kernel_layout(fkernel *k, const cgraph *g, int out);
/* Runs fused kernel k on rows [r0, r1) and columns [c0, c1) of product `batch` (tile layout). */
void nb__kernel_run_tile(const fkernel *k, nb_tensor *out, nb_tensor *const *in, int64_t batch, int64_t r0, int64_t r1,
                         int64_t c0, int64_t c1);
/* Unloads a kernel library that nb__kernels_build loaded. */
void nb__kernels_unload(void *dl);


/* ---- shared by the compiler's files (graph.c, trace.c, passes.c, fuse.c, plan.c) ---- */
/* Whether op draws random numbers (its node must run again at every replay). */
bool nb__is_random(int op);
/* Whether op's result depends on its inputs' values alone (no in-place write, no random draw, no
   uninitialised buffer): folding may compute it at trace time, CSE may share it. */
bool nb__is_pure(int op);
/* Counts each value's uses by live nodes, the result and the gradients handed to leaves. */
void nb__count_uses(cgraph *g);
/* Whether value v is a gradient the graph hands to a leaf. */
bool nb__is_grad_value(const cgraph *g, int v);
/* Whether op makes a view of its input's storage. */
bool nb__is_view(int op);
/* The number of nodes still to run (not removed by a pass). */
int nb__live_count(const cgraph *g);
/* Two nodes with the same op, inputs and arguments compute the same value, unless an input's
   storage is written in place somewhere (then their order matters) or the op draws randoms. */
int nb__pass_cse(cgraph *g);
/* Keeps what the result, the leaf gradients, in-place writes and random draws need. */
int nb__pass_dce(cgraph *g);
/* A value computed only from constants, on storage no one writes in place, is its trace-time
   tensor: the node that made it need not run again. Random and uninitialised makers are not. */
int nb__pass_fold(cgraph *g);
/* Whether an in-place op between trace positions lo and hi (exclusive) writes root r. */
bool nb__written_between(const cgraph *g, int r, int lo, int hi);
/* Frees a fused kernel's description (its loaded code belongs to the kernel cache). */
void nb__kernel_free(fkernel *k);
/* A fused kernel that reads, as one operand, the product a matmul made just for it runs right
   after that matmul, in place on its buffer: the GEMM's epilogue. */
void nb__mark_epilogues(cgraph *g);
/* Merges chains of elementwise f32 ops into one kernel each: a producer joins its consumer when
   the consumer alone uses its result, the shapes agree, and no in-place write between the two
   changes what the producer reads. */
int nb__pass_fuse(cgraph *g);
/* A sum whose operand an elementwise chain made for it alone takes the chain in: the kernel
   reduces as it computes, and the operand is never stored. */
int nb__pass_fuse_reductions(cgraph *g);
/* Row groups: runs of consecutive fused kernels over the same rows where each reads what the
   others make only in the row it computes, the rest only as values shared by every row (a layer
   norm: the row sum, the centring, the sum of squares, the scale, the affine map). They run
   chunk of rows by chunk of rows, chunks in parallel, so a row stays in cache from the first
   kernel to the last and five small serial loops become one parallel one. Each row computes
   exactly what it did alone. Returns the number of groups. */
int nb__pass_row_groups(cgraph *g);
/* Headers for every value whose storage is known at plan time, but the arena's (bound later:
   nb__graph_bind). */
int nb__make_headers(cgraph *g);
/* Places every value a node makes: the result in a fresh tensor per run, views on their base,
   the rest in one arena where values whose lifetimes do not overlap share bytes, and a fused
   kernel's result on an operand that dies there when the shapes agree (in place). */
int nb__plan_memory(cgraph *g, bool reuse);
/* A fused loop that works in place on a product only it reads moves into the GEMM: it runs on
   each piece as soon as the piece is final, on the thread that made it. It may when everything
   else it reads exists before the product and is not written in between. */
void nb__attach_tile_epilogues(cgraph *g);
/* An optimizer update whose gradient is a product (seen through views that change nothing)
   moves into that product's GEMM: each piece of the gradient updates its parameters and state
   while it is in cache, on the thread that made it. It may when nothing between the product and
   the update reads or writes the parameter, its step count or its state. */
void nb__attach_optimizer_epilogues(cgraph *g);
/* Grows the array *p of *cap elements of elem bytes to hold need, zeroing the new part; -1 when
   memory runs out. */
int nb__grow(void **p, int *cap, int need, size_t elem);
/* A new value of g, with no base, share or node yet; its index, or -1 when memory runs out. */
int nb__new_value(cgraph *g);
/* Copies t's shape, dtype, strides and offset into v. */
void nb__set_meta(cval *v, const nb_tensor *t);

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
