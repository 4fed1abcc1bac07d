/* Internals of ONNX import shared by the loader (import.c) and the operators (import_ops.c,
   import_conv.c): the loaded model, the operator table and the run context. Not installed. */
#ifndef NB_ONNX_IMPORT_IMPL_H
#define NB_ONNX_IMPORT_IMPL_H

#include "onnx_impl.h"

/* A graph value's place: the model's input, an initializer, or a node's output. */
typedef struct onnx_value {
    const char *name;         /* borrowed from the protobuf */
    int input;                /* graph input index, else -1 */
    nb_tensor *init;          /* initializer (owned), else NULL */
    int producer;             /* node index, else -1 */
    int last_use;             /* position in run order of the last node reading it (to free early) */
    bool is_output;
} onnx_value;

/* One node, resolved at load: its operator entry and the value ids of its inputs and outputs
   (-1 for an omitted optional one). */
typedef struct onnx_node {
    const Onnx__NodeProto *pb;
    const struct onnx_op *op;
    int version;              /* the operator's schema version at the model's opset */
    int *in, nin;
    int *out, nout;
    int index;                /* in the file */
    bool folded;              /* computed at load from initializers alone: its outputs are initializers */
} onnx_node;

/* A declared graph input: dtype and shape (-1 for a symbolic or missing dimension). */
typedef struct onnx_input {
    const char *name;
    nb_dtype dtype;
    int ndim;                 /* -1: no shape declared */
    int64_t dim[NB_MAX_DIMS];
    int value;
} onnx_input;

struct nb_onnx_model {
    Onnx__ModelProto *pb;
    nb__map map;              /* the file, while pb borrows nothing from it (protobuf-c copies) */
    int opset;
    onnx_value *v;
    int nv;
    onnx_node *nodes;         /* in run (topological) order */
    int nn;
    onnx_input *inputs;
    int ninputs;
    int *outputs;             /* value ids */
    int noutputs;
    nb_onnx_load_opts opts;
    nb_compiled *compiled;    /* opts.compile */
};

/* What running a node sees: the model, whether this run is being traced (values may then be
   read on the host only when known: made from initializers, constants and shapes alone). */
typedef struct onnx_run {
    nb_onnx_model *m;
    bool tracing;
    const onnx_node *node;    /* the node running, for messages */
    nb_tensor **vals;         /* per value id: its tensor this run */
    const bool *known;        /* per value id: known (readable on the host while tracing) */
} onnx_run;

/* An operator's implementation: reads in[0..nin) (NULL for an omitted optional input) and writes
   out[0..nout) (each NULL slot the model does not read may be left NULL). 0, or -1 with the
   error set. */
typedef int (*onnx_op_fn)(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout);
/* Load-time checks of a node's attribute values and input/output counts beyond the names; 0, or
   -1 with why written into msg. */
typedef int (*onnx_check_fn)(const onnx_node *n, char *msg, size_t size);

/* Half dtypes (f16, bf16) are computed in f32 by the interpreter around the op. */
#define OP_HALF_UPCAST 1
/* Reads its input's shape only (Shape, Size): its result is known even while tracing. */
#define OP_SHAPE_ONLY 2
/* Never folded on the host (random draws). */
#define OP_NEVER_KNOWN 4

/* One supported operator. */
typedef struct onnx_op {
    const char *name;
    const char *history;      /* every schema version ONNX has, "1,6,13,14" (onnx 1.23) */
    int min_v, max_v;         /* the versions nabla implements */
    const char *attrs;        /* its attributes' schema: "name:type" each, comma-separated, type one of
                                 float, int, string, tensor, floats, ints; '!' after the type: required;
                                 "@lo-hi": only in schema versions lo to hi (either may be left out).
                                 "to:int!,saturate:int@19-" */
    int min_in, max_in;       /* input count */
    int max_out;
    onnx_op_fn run;
    onnx_check_fn check;      /* or NULL */
    int flags;
} onnx_op;

/* One attribute of an operator's schema (onnx_op.attrs), parsed. */
typedef struct onnx_attr_spec {
    char name[48];
    int type;                 /* ONNX's AttributeProto.AttributeType */
    bool required;
    int lo, hi;               /* the schema versions that have it */
} onnx_attr_spec;
/* Parses the next entry of an attrs schema at *p into a, advancing *p; false at the end (or at an
   entry the table should not hold, which the schema test catches). */
bool nb__onnx_next_attr_spec(const char **p, onnx_attr_spec *a);
/* ONNX's name of an attribute type ("int", "ints"...). */
const char *nb__onnx_attr_type_name(int type);

/* The operator table (import_ops.c), ended by a NULL name. */
extern const onnx_op nb__onnx_import_ops[];
/* The entry of an operator, or NULL. */
const onnx_op *nb__onnx_find_op(const char *name);
/* The schema version of op at opset (the newest in its history not above it), or 0. */
int nb__onnx_op_version(const onnx_op *op, int opset);

/* ---- attributes of a node ---- */
/* The attribute called name, or NULL. */
const Onnx__AttributeProto *nb__onnx_attr(const onnx_node *n, const char *name);
/* Integer attribute (def when absent). */
int64_t nb__onnx_attr_i(const onnx_node *n, const char *name, int64_t def);
/* Float attribute (def when absent). */
double nb__onnx_attr_f(const onnx_node *n, const char *name, double def);
/* String attribute (def when absent; not NUL-terminated in the protobuf: copied into buf). */
const char *nb__onnx_attr_s(const onnx_node *n, const char *name, const char *def, char *buf, size_t size);
/* Integer-list attribute: its count (-1 when absent), the values in *v (borrowed). */
int nb__onnx_attr_ints(const onnx_node *n, const char *name, const int64_t **v);

/* ---- values ---- */
/* A tensor from a TensorProto (raw or typed fields; external data under dir, NULL: refused), a
   reference the caller owns (no scope holds it); NULL with the error naming what. */
nb_tensor *nb__onnx_tensor(const Onnx__TensorProto *tp, const char *dir, const char *what);
/* nb_from_data with the tracer paused: a constant the graph captures with its elements (made
   while tracing, a new tensor would have no elements yet). Owned by the current scope. */
nb_tensor *nb__onnx_const(const void *data, nb_shape shape, nb_dtype dtype);
/* Reads 1-D (or 0-d) integer tensor t into v (at most cap values); the count, or -1 with the
   error (when tracing, t must be known: made from constants). */
int nb__onnx_read_ints(onnx_run *r, nb_tensor *t, const char *what, int64_t *v, int cap);
/* Reads one number of tensor t (known when tracing); NAN with the error. */
double nb__onnx_read_scalar(onnx_run *r, nb_tensor *t, const char *what, bool *ok);
/* Records an error prefixed with the running node ("Conv node 'conv1' (#3): ..."). */
void nb__onnx_node_error(const onnx_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Generic convolution and pooling (import_conv.c). */
int nb__onnx_conv(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout);
int nb__onnx_maxpool(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout);
int nb__onnx_avgpool(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout);
/* Load checks of Conv and the pools (auto_pad values). */
int nb__onnx_check_pool(const onnx_node *n, char *msg, size_t size);

#endif
