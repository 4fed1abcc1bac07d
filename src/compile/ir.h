/* The graph IR of graph mode: values and nodes recorded by the tracer, the fused-kernel form the
   fusion pass makes, and the helpers over them that the device-neutral compiler and a backend's
   lowering share. A backend's lowering includes this header and nothing else of src/compile/:
   it sees the graph, not the tracer or the op table. Not installed. */
#ifndef NB_IR_H
#define NB_IR_H

#include "../backend/backend.h"
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
    /* set by the lowering (the cpu's: GEMM epilogues and row groups); planning honours rgroup */
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
    /* the lowering's (the cpu's): where it runs and how its loop is laid out */
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
    nb_device device;       /* where it runs: the one device besides the cpu its ops touched, else the cpu */
    const nb_lowering *lower; /* that device's backend's lowering */
    void *dl;               /* the lowering's: the loaded kernel library */
} cgraph;

/* ---- the IR's store and queries (ir.c; the fused loop's layout is layout.c): the only functions
   of the compiler that a backend's lowering calls (tests/layering_test.py holds it) ---- */
/* Grows the array *p of *cap elements of elem bytes to hold need, zeroing the new part; -1 when
   memory runs out. */
int nb__grow(void **p, int *cap, int need, size_t elem);
/* A new value of g, with no base, share or node yet; its index, or -1 when memory runs out. */
int nb__new_value(cgraph *g);
/* Copies t's shape, dtype, strides and offset into v. */
void nb__set_meta(cval *v, const nb_tensor *t);
/* Whether op draws random numbers (ops.def's NB_F_RANDOM: its node must run again at every replay). */
bool nb__is_random(int op);
/* Whether op's result depends on its inputs' values alone (no in-place write, no random draw, no
   uninitialised buffer): folding may compute it at trace time, CSE may share it. */
bool nb__is_pure(int op);
/* Whether op writes into its input 0 (or, with NB_F_WRITES_ALL, any input) in place. */
bool nb__is_inplace(int op);
/* How many of node n's inputs it writes in place: input 0, every input (host_call), or none. */
int nb__inputs_written(const cnode *n);
/* Counts each value's uses by live nodes, the result and the gradients handed to leaves. */
void nb__count_uses(cgraph *g);
/* Whether value v is a gradient the graph hands to a leaf. */
bool nb__is_grad_value(const cgraph *g, int v);
/* Whether op makes a view of its input's storage. */
bool nb__is_view(int op);
/* The number of nodes still to run (not removed by a pass). */
int nb__live_count(const cgraph *g);
/* Whether an in-place op between trace positions lo and hi (exclusive) writes root r. */
bool nb__written_between(const cgraph *g, int r, int lo, int hi);
/* How a sum node n over operand x reduces, seen as a loop over x: RED_ROWS (the last axis),
   RED_COLS, RED_ALL, or RED_NONE when no such form fits. */
red_kind nb__reduction_of(const cnode *n, const cval *x);
/* Whether value v is a product (a matmul's) of the given shape that only its one consumer reads,
   so that consumer may run in place on it as the product's epilogue. */
bool nb__private_product(const cgraph *g, int v, const nb_shape *shape);
/* Lays out fused kernel k's loop for its operands' strides in g (layout.c): the loop's axes
   collapsed where every operand walks them as one, each operand's byte strides, each input's
   access class; a reduction or a row-group member (k->rows) as [rows, cols]. out: the output
   value, or -1 for a reduction. 0; 1 when the operands cannot walk as [rows, cols]; -1 when
   memory runs out. */
int nb__kernel_layout(fkernel *k, const cgraph *g, int out);
/* Frees a fused kernel's description (its loaded code belongs to the kernel cache). */
void nb__kernel_free(fkernel *k);

/* The tensors of one run of a graph: vt[i] is value i's tensor (inputs, captures, the planned
   headers, a fresh result, views), own[i] whether the run made it. */
typedef struct nb_graph_frame {
    nb_tensor **vt;
    bool *own;
    nb_tensor *small[256];
} nb_graph_frame;
/* Starts a run: drops the gradients the last run handed to the leaves and fills f's tensors. 0, or
   -1 with an error (f then needs no end). */
int nb__frame_begin(cgraph *g, nb_tensor *const *inputs, nb_graph_frame *f);
/* Ends a run: when ok, hands the leaves their gradients and returns the result (retained); frees
   what the run made. NULL when !ok. */
nb_tensor *nb__frame_end(cgraph *g, nb_tensor *const *inputs, nb_graph_frame *f, bool ok);
/* Frees a graph, what its lowering built for it, and the tensors it holds. */
void nb__graph_free(cgraph *g);

#endif
