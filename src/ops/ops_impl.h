/* The op table and the one dispatch function every tensor operation goes through. */
#ifndef NB_OPS_IMPL_H
#define NB_OPS_IMPL_H

#include "nabla/core.h"
#include "nabla/ops.h"
#include "nabla/autograd.h"
#include "nabla/functional.h"
#include "../autograd/graph.h"
#include "../backend/backend.h"

#include "dtype_masks.h"

/* flags */
enum {
    NB_F_CREATE = 1 << 0,    /* no inputs: makes a tensor from its arguments */
    NB_F_PROMOTE = 1 << 1,   /* inputs are brought to one dtype as PyTorch promotes */
    NB_F_FLOAT = 1 << 2,     /* integer inputs compute in f32 */
    NB_F_SAVE_OUT = 1 << 3,  /* backward reads the output */
    NB_F_VIEW = 1 << 4,      /* output shares the input's storage */
    NB_F_NONDIFF = 1 << 5,   /* output never requires grad */
    NB_F_ANY_DTYPE = 1 << 6, /* kernel moves elements of any dtype, f16/bf16 included */
    NB_F_SCALAR = 1 << 7,    /* a float scalar argument makes an integer input compute in f32 */
    NB_F_INPLACE = 1 << 8,   /* writes into input 0 and returns it */
    NB_F_COND0 = 1 << 9,     /* input 0 is a bool condition: no dtype promotion */
    NB_F_INDEX1 = 1 << 10,   /* inputs 1 and on hold indices: no dtype promotion */
    NB_F_DEVICE = 1 << 11,   /* the result is made on args.device (`to`), by the backends' copies */
    NB_F_INDEX2 = 1 << 12,   /* inputs 2 and on hold indices (index_put: x, values, indices...) */
    NB_F_WRITES_ALL = 1 << 13, /* with NB_F_INPLACE: may write every input, not input 0 alone */
    NB_F_OPAQUE = 1 << 14,   /* args.i hold pointers (host_call's function and context), not sizes */
    NB_F_RANDOM = 1 << 15,   /* draws from the generator: runs again at every replay, never shared or folded */
    NB_F_UNINIT = 1 << 16,   /* leaves its output uninitialised (empty): never folded or shared */
};

/* What inference decides about the output. For views it also sets strides and offset. */
typedef struct nb_meta {
    nb_shape shape;
    nb_dtype dtype;
    int64_t stride[NB_MAX_DIMS];
    int64_t offset;
} nb_meta;

typedef int (*nb_infer_fn)(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out);
typedef int (*nb_backward_fn)(nb_node *node, nb_tensor *grad_out, nb_tensor **grad_in);

/* How the graph compiler fuses an op (the fuse column of ops.def). */
typedef enum nb_fuse_kind {
    NB_FUSE_NONE,  /* not fused */
    NB_FUSE_EW,    /* elementwise, formula nbf_<name> in src/backend/formulas.h */
    NB_FUSE_CHEAP, /* elementwise, and cheap enough to recompute per element of a broadcast */
    NB_FUSE_CMP,   /* a comparison, formula nbf_<name>, not fused (its output is bool) */
    NB_FUSE_MOVE,  /* fused as CHEAP (a copy or cast); the kernels move elements of any dtype */
} nb_fuse_kind;

typedef struct nb_op_def {
    const char *name;
    int nin;
    nb_infer_fn infer;
    nb_backward_fn backward;
    unsigned flags;
    unsigned dtypes;
    nb_fuse_kind fuse;
} nb_op_def;

extern const nb_op_def nb__ops[NB_OP_COUNT];

/* The funnel: checks, promotes, infers, runs the kernel, records autograd. Returns an owned
   reference that no scope holds (callers that return it to users pass it to nb__own). */
nb_tensor *nb__dispatch(nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args);

/* Dispatch and hand the result to the current scope. */
static inline nb_tensor *nb__call(nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args) {
    return nb__own(nb__dispatch(op, in, nin, args));
}

/* ---- tracing: the compiler (src/compile) installs a recorder that sees every op dispatched ---- */
typedef void (*nb_trace_record_fn)(void *ctx, nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args,
                                   nb_tensor *out);
/* Makes rec(ctx, ...) this thread's tracer, called after each op's kernel; NULL stops tracing. */
void nb__trace_set(nb_trace_record_fn rec, void *ctx);
/* Asked before each op while tracing (after its checks, before its output is made): true runs the
   kernel, false makes the output without computing it (a shape-only trace). */
typedef bool (*nb_trace_before_fn)(void *ctx, nb_op_id op, nb_tensor *const *in, int nin);
void nb__trace_set_before(nb_trace_before_fn before);
/* Pauses (true) or resumes (false) recording on this thread; returns the previous state. Host reads
   (nb_item, nb_data_ptr) made while paused are not counted against the trace. */
bool nb__trace_suspend(bool suspend);
/* Whether this thread is recording a trace now (a tracer set and not paused). */
bool nb__tracing(void);
/* Runs fn(ctx, t, n) as the op host_call: at once when eager, and, when traced, at every replay of
   the graph at this point of it (src/ops/host_call.c). The graph takes it as reading and writing
   all of t. 0, or -1 with the error recorded. */
int nb__host_call(nb_host_fn fn, void *ctx, nb_tensor *const *t, int n);

/* ---- for composites (api.c and the *_ops.c files): ops made of other ops ---- */
/* A composite runs inside its own scope and hands only its result (result_) to the caller's. */
#define COMPOSITE_BEGIN nb_scope *composite_scope_ = nb_scope_begin(); nb_tensor *result_ = NULL;
#define COMPOSITE_END \
    nb_keep(result_); \
    nb_scope_end(composite_scope_); \
    return nb__own(result_);
/* Whether autocast (nb_autocast) is on for bf16 on this thread and a (and b, when given) are
   f32: the products and convolutions then compute in bf16. */
bool nb__autocast_bf16(const nb_tensor *a, const nb_tensor *b);
/* t cast to bf16 as autocast's products read it (a transposed view converted in its storage's
   order); a new reference, or NULL with the error. */
nb_tensor *nb__bf16_operand(nb_tensor *t);
/* Whether t is there; else the error "nb_<fn>: input is NULL" (unless an earlier one explains it). */
bool nb__check_input(const char *fn, const nb_tensor *t);
/* Whether r is an nb_reduction value (recording the error when not). */
static inline bool nb__reduction_ok(const char *fn, nb_reduction r) {
    return nb__enum_ok(fn, "reduction", (int)r, NB_REDUCTION_BATCHMEAN + 1, "nb_reduction", "mean, sum, none, batchmean");
}
/* axis made non-negative for t, or -1 with the error "nb_<fn>: axis ... is out of range for ...". */
int nb__axis_of(const char *fn, const nb_tensor *t, int axis);

/* Inference of ops defined outside infer.c: the optimizer update (src/ops/optim_ops.c). */
int nb__infer_optim_update(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out);
/* Inference of host_call (src/ops/host_call.c): the result is input 0, written in place. */
int nb__infer_host_call(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out);
/* Inference and backward of the scans and the sort (src/ops/scan_ops.c). */
int nb__infer_scan(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out);
int nb__infer_argsort(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out);
int nb__bwd_cumsum(nb_node *node, nb_tensor *grad_out, nb_tensor **grad_in);
int nb__bwd_cumprod(nb_node *node, nb_tensor *grad_out, nb_tensor **grad_in);
/* Inference of the batch-norm ops and the backward of batch_norm (src/ops/nn_layers.c):
   batch_norm(x, w, b) and batch_norm_stats(x) over x [N, C, ...], batch_norm_reduce(g, x) and
   batch_norm_backward(g, x, w). */
int nb__infer_batch_norm(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out);
int nb__bwd_batch_norm(nb_node *node, nb_tensor *grad_out, nb_tensor **grad_in);
/* Inference of the CTC loss ops and the backward of ctc_loss (src/ops/ctc_loss.c): ctc_loss(log_probs,
   targets, input_lengths, target_lengths) -> [N] and ctc_loss_backward(the same, g [N]) -> log_probs' shape. */
int nb__infer_ctc_loss(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out);
int nb__bwd_ctc_loss(nb_node *node, nb_tensor *grad_out, nb_tensor **grad_in);


/* Anomaly mode's classes of values, ordered: finite < infinities (no NaN) < NaN. */
enum { NB_NONFINITE_NONE, NB_NONFINITE_INF, NB_NONFINITE_NAN };
/* The class of t's values (scanned on the host: cpu tensors). */
int nb__nonfinite_class(const nb_tensor *t);
/* The class of an op's float arguments (a scalar operand, clamp's bounds). */
int nb__args_nonfinite_class(const nb_op_args *args);

/* Creation on a device, for composites and backward formulas that make constants beside their
   operands: nb_full, nb_arange and nb_rand with the device named. Owned by the current scope. */
nb_tensor *nb__full_on(nb_shape shape, double value, nb_dtype dtype, nb_device dev);
nb_tensor *nb__arange_on(double start, double end, double step, nb_dtype dtype, nb_device dev);
nb_tensor *nb__rand_on(nb_shape shape, nb_dtype dtype, nb_device dev);

/* Rotary embeddings in two steps, so a model whose layers share positions makes the tables once
   (nb_rotary_embedding does both, with its checks): the cos and sin tables [P..., 1.., T, D] for
   a tensor of nd axes whose last is D (even) at positions [T] or [B, T], opts with their defaults
   filled in, each half of the last axis the same (transformers' cat((freqs, freqs), -1)), in f32
   arithmetic as transformers' LlamaRotaryEmbedding, cast to dt; 0 or -1. */
int nb__rotary_tables(int nd, int64_t D, nb_tensor *positions, nb_rope_opts o, nb_dtype dt, nb_tensor **cos,
                      nb_tensor **sin);
/* x cos + rotate_half(x) sin (rotate_half: [-x2, x1] for the halves of the last axis); NULL in,
   NULL out. */
nb_tensor *nb__rotary_apply(nb_tensor *x, nb_tensor *cos, nb_tensor *sin);

/* Result dtype of combining a and b, by PyTorch's promotion (bool < integers < floats). */
nb_dtype nb__promote(nb_dtype a, nb_dtype b);

#endif
