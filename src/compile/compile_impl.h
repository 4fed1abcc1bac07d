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

/* ---- tracing and passes (src/compile/graph.c) ---- */
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

#endif
