/* Internals shared by ONNX export (export.c, export_ops.c) and import (import.c): the
   protobuf-c types generated from onnx.proto, dtype mapping, and the exporter's node writer.
   Not installed. */
#ifndef NB_ONNX_IMPL_H
#define NB_ONNX_IMPL_H

#include "../compile/compile_impl.h"
#include "../io/io_impl.h"
#include "nabla/onnx.h"
#include "onnx_pb_prefix.h" /* protobuf-c's symbols under the nb__pb_ prefix */
#include "onnx.pb-c.h"

/* The opsets the exporter writes: 11 to the newest that ONNX Runtime 1.31 runs (26). */
#define NB_ONNX_OPSET_DEFAULT 17
#define NB_ONNX_OPSET_MIN 11
#define NB_ONNX_OPSET_MAX 26

/* ONNX's TensorProto.DataType of a nabla dtype (0 = UNDEFINED: none). */
int nb__onnx_dtype(nb_dtype d);
/* nabla's dtype of an ONNX data type; false when nabla has none. */
bool nb__onnx_to_dtype(int onnx_type, nb_dtype *d);

/* ---- the exporter (export.c) ---- */

/* An export in progress: the graph being written, with every allocation in one list. */
typedef struct onnx_writer {
    const char *fn;           /* the public function, for messages */
    int opset;
    const cgraph *g;          /* the trace (at the example batch size) */
    const cgraph *g2;         /* the same function traced at another batch size, or NULL */
    Onnx__GraphProto *graph;
    Onnx__NodeProto **nodes;
    size_t nnodes, capnodes;
    Onnx__TensorProto **inits;
    size_t ninits, capinits;
    char **names;             /* per value of g: its ONNX name once written, else NULL */
    void **owned;             /* every allocation, freed with the writer */
    size_t nowned, capowned;
    int counter;              /* for fresh names */
    bool failed;              /* out of memory */
} onnx_writer;

/* An op's exporter: writes node n of the trace (n2: the same node at the other batch size, or
   NULL) as ONNX nodes, reading its inputs' names with nb__onnxw_in and naming its result
   nb__onnxw_out. 0, or -1 with the error set. */
typedef int (*onnx_export_fn)(onnx_writer *w, const cnode *n, const cnode *n2);

/* The exporter of each op, from ops.def's onnx column (export_ops.c). */
typedef struct onnx_op_entry {
    const char *op_type;      /* ONNX(Op): the one operator, same inputs, no attributes */
    onnx_export_fn fn;        /* ONNX_FN(name) */
} onnx_op_entry;
extern const onnx_op_entry nb__onnx_ops[NB_OP_COUNT];

/* The ONNX name of input k of node n (written before it, in trace order). */
const char *nb__onnxw_in(onnx_writer *w, const cnode *n, int k);
/* The ONNX name of node n's result (made on first use). */
const char *nb__onnxw_out(onnx_writer *w, const cnode *n);
/* A fresh name for an intermediate ("name_7"). */
const char *nb__onnxw_tmp(onnx_writer *w, const char *name);
/* Adds a node of op_type with nin inputs and one output; returns it for attributes (NULL: out of
   memory, w->failed set). An empty input name is an omitted optional input. */
Onnx__NodeProto *nb__onnxw_node(onnx_writer *w, const char *op_type, const char *const *in, int nin, const char *out);
/* Attributes on a node. */
void nb__onnxw_attr_int(onnx_writer *w, Onnx__NodeProto *nd, const char *name, int64_t v);
void nb__onnxw_attr_float(onnx_writer *w, Onnx__NodeProto *nd, const char *name, float v);
void nb__onnxw_attr_ints(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const int64_t *v, int n);
/* A string attribute; v must outlive the writer (a literal). */
void nb__onnxw_attr_string(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const char *v);
/* An attribute holding a tensor (ConstantOfShape's value): one element of dtype d. */
void nb__onnxw_attr_scalar_tensor(onnx_writer *w, Onnx__NodeProto *nd, const char *name, nb_dtype d, double v);
/* An initializer of n int64s (1-D, or 0-d when scalar) under a fresh name; returns the name. */
const char *nb__onnxw_const_i64(onnx_writer *w, const int64_t *v, int n, bool scalar);
/* A 0-d initializer of dtype d holding v; returns its name. */
const char *nb__onnxw_const_scalar(onnx_writer *w, nb_dtype d, double v);
/* Allocation owned by the writer (zeroed; NULL sets w->failed). */
void *nb__onnxw_alloc(onnx_writer *w, size_t size);
/* The dtype of value v in the trace. */
static inline nb_dtype nb__onnxw_vdtype(const onnx_writer *w, int v) { return w->g->v[v].dtype; }

#endif
