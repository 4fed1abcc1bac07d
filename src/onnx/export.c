/* ONNX export: traces a function (or a module's forward pass), writes each recorded op as ONNX
   nodes through its entry in the op table (export_ops.c), the captured tensors as initializers,
   and packs the model with protobuf-c into an atomically written file. */
#include "onnx_impl.h"
#include "../nn/nn_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the writer's allocations */

void *nb__onnxw_alloc(onnx_writer *w, size_t size) {
    if (w->failed) return NULL;
    if (w->nowned == w->capowned) {
        size_t c = w->capowned ? w->capowned * 2 : 256;
        void **p = realloc(w->owned, c * sizeof *p);
        if (!p) { w->failed = true; return NULL; }
        w->owned = p;
        w->capowned = c;
    }
    void *q = calloc(1, size ? size : 1);
    if (!q) { w->failed = true; return NULL; }
    w->owned[w->nowned++] = q;
    return q;
}

static char *wstrdup(onnx_writer *w, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = nb__onnxw_alloc(w, n);
    if (p) memcpy(p, s, n);
    return p;
}

static char *wprintf(onnx_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *wprintf(onnx_writer *w, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return wstrdup(w, buf);
}

/* Appends p to a growing array of pointers. */
static bool push(onnx_writer *w, void ***arr, size_t *n, size_t *cap, void *p) {
    if (!p) return false;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        void **q = realloc(*arr, c * sizeof *q);
        if (!q) { w->failed = true; return false; }
        *arr = q;
        *cap = c;
    }
    (*arr)[(*n)++] = p;
    return true;
}

/* ------------------------------------------------------------------ names, nodes, attributes */

const char *nb__onnxw_tmp(onnx_writer *w, const char *name) { return wprintf(w, "%s_t%d", name, w->counter++); }

const char *nb__onnxw_in(onnx_writer *w, const cnode *n, int k) { return w->names[n->in[k]]; }

const char *nb__onnxw_out(onnx_writer *w, const cnode *n) {
    if (!w->names[n->out]) w->names[n->out] = wprintf(w, "%s_%d", nb__ops[n->op].name, n->out);
    return w->names[n->out];
}

Onnx__NodeProto *nb__onnxw_node(onnx_writer *w, const char *op_type, const char *const *in, int nin, const char *out) {
    Onnx__NodeProto *nd = nb__onnxw_alloc(w, sizeof *nd);
    char **ins = nb__onnxw_alloc(w, sizeof(char *) * (size_t)(nin > 0 ? nin : 1));
    char **outs = nb__onnxw_alloc(w, sizeof(char *));
    if (!nd || !ins || !outs || !out) { w->failed = true; return NULL; }
    *nd = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    for (int k = 0; k < nin; k++) {
        if (!in[k]) { w->failed = true; return NULL; }
        ins[k] = (char *)in[k];
    }
    outs[0] = (char *)out;
    nd->n_input = (size_t)nin;
    nd->input = ins;
    nd->n_output = 1;
    nd->output = outs;
    nd->op_type = wstrdup(w, op_type);
    nd->name = wprintf(w, "%s_%zu", op_type, w->nnodes);
    if (!push(w, (void ***)&w->nodes, &w->nnodes, &w->capnodes, nd)) { w->failed = true; return NULL; }
    return nd;
}

static Onnx__AttributeProto *new_attr(onnx_writer *w, Onnx__NodeProto *nd, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    if (!nd) return NULL;
    Onnx__AttributeProto *a = nb__onnxw_alloc(w, sizeof *a);
    Onnx__AttributeProto **arr = nb__onnxw_alloc(w, sizeof *arr * (nd->n_attribute + 1));
    if (!a || !arr) return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = wstrdup(w, name);
    a->has_type = true;
    a->type = type;
    if (nd->n_attribute) memcpy(arr, nd->attribute, sizeof *arr * nd->n_attribute);
    arr[nd->n_attribute++] = a;
    nd->attribute = arr; /* the old array stays owned by the writer */
    return a;
}

void nb__onnxw_attr_int(onnx_writer *w, Onnx__NodeProto *nd, const char *name, int64_t v) {
    Onnx__AttributeProto *a = new_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) { a->has_i = true; a->i = v; }
}

void nb__onnxw_attr_float(onnx_writer *w, Onnx__NodeProto *nd, const char *name, float v) {
    Onnx__AttributeProto *a = new_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) { a->has_f = true; a->f = v; }
}

void nb__onnxw_attr_ints(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const int64_t *v, int n) {
    Onnx__AttributeProto *a = new_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = nb__onnxw_alloc(w, sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!a || !c) return;
    memcpy(c, v, sizeof(int64_t) * (size_t)n);
    a->n_ints = (size_t)n;
    a->ints = c;
}

void nb__onnxw_attr_string(onnx_writer *w, Onnx__NodeProto *nd, const char *name, const char *v) {
    Onnx__AttributeProto *a = new_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return;
    a->has_s = true;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)v; /* a string literal of the exporter's, which outlives the file */
}

/* Writes v as one element of dtype d: halves through f32, as nabla's kernels round them. */
static void scalar_bytes(nb_dtype d, double v, void *out) {
    nb__store(out, d, 0, d == NB_F16 || d == NB_BF16 ? (double)(float)v : v);
}

/* A tensor proto of dtype d and shape, holding nbytes of raw data copied from p (NULL: left for
   the caller to fill, at raw_data.data). */
static Onnx__TensorProto *tensor_proto(onnx_writer *w, const char *name, nb_dtype d, const int64_t *dims, int nd,
                                       const void *p, size_t nbytes) {
    Onnx__TensorProto *t = nb__onnxw_alloc(w, sizeof *t);
    int64_t *dd = nb__onnxw_alloc(w, sizeof(int64_t) * (size_t)(nd > 0 ? nd : 1));
    uint8_t *data = nb__onnxw_alloc(w, nbytes);
    if (!t || !dd || !data) return NULL;
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    if (nd) memcpy(dd, dims, sizeof(int64_t) * (size_t)nd);
    t->n_dims = (size_t)nd;
    t->dims = dd;
    t->has_data_type = true;
    t->data_type = nb__onnx_dtype(d);
    t->name = name ? (char *)name : NULL;
    if (nbytes && p) memcpy(data, p, nbytes);
    t->has_raw_data = true;
    t->raw_data.len = nbytes;
    t->raw_data.data = data;
    return t;
}

void nb__onnxw_attr_scalar_tensor(onnx_writer *w, Onnx__NodeProto *nd, const char *name, nb_dtype d, double v) {
    Onnx__AttributeProto *a = new_attr(w, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    unsigned char b[8] = { 0 };
    scalar_bytes(d, v, b);
    int64_t one = 1;
    if (a) a->t = tensor_proto(w, NULL, d, &one, 1, b, nb__esize(d));
}

static const char *add_init(onnx_writer *w, Onnx__TensorProto *t) {
    if (!t || !push(w, (void ***)&w->inits, &w->ninits, &w->capinits, t)) { w->failed = true; return NULL; }
    return t->name;
}

const char *nb__onnxw_const_i64(onnx_writer *w, const int64_t *v, int n, bool scalar) {
    int64_t len = n;
    const char *name = nb__onnxw_tmp(w, "const");
    return add_init(w, tensor_proto(w, name, NB_I64, &len, scalar ? 0 : 1, v, sizeof(int64_t) * (size_t)n));
}

const char *nb__onnxw_const_scalar(onnx_writer *w, nb_dtype d, double v) {
    unsigned char b[8] = { 0 };
    scalar_bytes(d, v, b);
    return add_init(w, tensor_proto(w, nb__onnxw_tmp(w, "const"), d, NULL, 0, b, nb__esize(d)));
}

/* ------------------------------------------------------------------ graph inputs and outputs */

/* A value info for a tensor of dtype d whose dimension k is dims[k], or symbolic when sym[k]. */
static Onnx__ValueInfoProto *value_info(onnx_writer *w, const char *name, nb_dtype d, const nb_shape *s,
                                        char *const *sym) {
    Onnx__ValueInfoProto *vi = nb__onnxw_alloc(w, sizeof *vi);
    Onnx__TypeProto *tp = nb__onnxw_alloc(w, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = nb__onnxw_alloc(w, sizeof *tt);
    Onnx__TensorShapeProto *sp = nb__onnxw_alloc(w, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = nb__onnxw_alloc(w, sizeof *dims * (size_t)(s->ndim ? s->ndim : 1));
    if (!vi || !tp || !tt || !sp || !dims) return NULL;
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int k = 0; k < s->ndim; k++) {
        Onnx__TensorShapeProto__Dimension *dm = nb__onnxw_alloc(w, sizeof *dm);
        if (!dm) return NULL;
        *dm = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (sym && sym[k]) {
            dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dm->dim_param = sym[k];
        } else {
            dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dm->dim_value = s->dim[k];
        }
        dims[k] = dm;
    }
    sp->n_dim = (size_t)s->ndim;
    sp->dim = dims;
    tt->has_elem_type = true;
    tt->elem_type = nb__onnx_dtype(d);
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

/* The symbolic names of value v's dimensions: those that differ between the two traces. */
static char **symbolic_dims(onnx_writer *w, int v) {
    const nb_shape *a = &w->g->v[v].shape;
    char **sym = nb__onnxw_alloc(w, sizeof(char *) * NB_MAX_DIMS);
    if (!sym || !w->g2) return sym;
    const nb_shape *b = &w->g2->v[v].shape;
    int64_t b1 = w->g->v[0].shape.dim[0], b2 = w->g2->v[0].shape.dim[0];
    for (int k = 0; k < a->ndim && k < b->ndim; k++) {
        if (a->dim[k] == b->dim[k]) continue;
        if (a->dim[k] == b1 && b->dim[k] == b2) sym[k] = "batch";
        else if (a->dim[k] % b1 == 0 && b->dim[k] % b2 == 0 && a->dim[k] / b1 == b->dim[k] / b2)
            sym[k] = wprintf(w, "batch*%lld", (long long)(a->dim[k] / b1));
        else sym[k] = wprintf(w, "dim_%d", k);
    }
    return sym;
}

/* ------------------------------------------------------------------ the export */

/* The ONNX IR version that goes with an opset (onnx/helper.py's VERSION_TABLE). The exporter
   writes none of the fields the later IR versions added, so Debian's IR 8 schema serves. */
static int ir_version_of(int opset) {
    if (opset <= 11) return 6;
    if (opset <= 14) return 7;
    if (opset <= 18) return 8;
    if (opset <= 20) return 9;
    if (opset <= 22) return 10;
    if (opset <= 23) return 11;
    if (opset <= 24) return 12;
    return 13;
}

/* Marks the nodes the result needs (the trace also holds what the function computed and let
   go). */
static bool *live_nodes(const cgraph *g) {
    bool *live = calloc((size_t)g->nn + 1, 1);
    int *stack = malloc(sizeof(int) * ((size_t)g->nv + 1));
    bool *seen = calloc((size_t)g->nv + 1, 1);
    if (!live || !stack || !seen) { free(live); free(stack); free(seen); return NULL; }
    int sp = 0;
    stack[sp++] = g->out;
    seen[g->out] = true;
    while (sp > 0) {
        const cval *v = &g->v[stack[--sp]];
        if (v->kind != VAL_NODE) continue;
        const cnode *n = &g->nodes[v->node];
        live[v->node] = true;
        for (int k = 0; k < n->nin; k++)
            if (!seen[n->in[k]]) { seen[n->in[k]] = true; stack[sp++] = n->in[k]; }
    }
    free(stack);
    free(seen);
    return live;
}

/* Whether the two traces recorded the same ops on the same values. */
static bool same_structure(const cgraph *a, const cgraph *b) {
    if (a->nn != b->nn || a->nv != b->nv || a->out != b->out) return false;
    for (int i = 0; i < a->nn; i++) {
        const cnode *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->op != y->op || x->nin != y->nin || x->out != y->out) return false;
        for (int k = 0; k < x->nin; k++)
            if (x->in[k] != y->in[k]) return false;
    }
    for (int i = 0; i < a->nv; i++)
        if (a->v[i].kind != b->v[i].kind || a->v[i].dtype != b->v[i].dtype) return false;
    return true;
}

/* The name of a captured tensor: its state-dict name when names_from holds it. */
static const char *capture_name(onnx_writer *w, const nb_tensor *t, const nb_named_tensor *es, int nes, int vid) {
    for (int i = 0; i < nes; i++)
        if (es[i].tensor == t) return es[i].name;
    return wprintf(w, "const_%d", vid);
}

/* Writes capture vid as an initializer. */
static int write_capture(onnx_writer *w, int vid, const char *name) {
    const cval *v = &w->g->v[vid];
    int64_t numel;
    size_t nbytes;
    if (!nb__tensor_size(v->shape, v->dtype, &numel, &nbytes)) return -1;
    /* read straight into the initializer's bytes: one copy of each weight */
    Onnx__TensorProto *t = tensor_proto(w, name, v->dtype, v->shape.dim, v->shape.ndim, NULL, nbytes);
    if (!t) { nb__error("%s: out of memory copying %s", w->fn, name); return -1; }
    if (nb__read_to_host(v->t, t->raw_data.data) < 0) return -1;
    const char *r = add_init(w, t);
    w->names[vid] = (char *)r;
    return r ? 0 : -1;
}

/* Writes node n by its op's entry. */
static int write_node(onnx_writer *w, int i) {
    const cnode *n = &w->g->nodes[i], *n2 = w->g2 ? &w->g2->nodes[i] : NULL;
    const onnx_op_entry *e = &nb__onnx_ops[n->op];
    if (!e->op_type && !e->fn) {
        nb__error("%s: op %s (node %d) has no ONNX form", w->fn, nb__ops[n->op].name, i);
        return -1;
    }
    if (e->fn) return e->fn(w, n, n2);
    if (n2 && memcmp(&n->args, &n2->args, sizeof n->args) != 0) {
        nb__error("%s: the arguments of op %s (node %d) change with the batch size", w->fn, nb__ops[n->op].name, i);
        return -1;
    }
    const char *in[NB_MAX_DIMS + 2];
    if (n->nin > (int)(sizeof in / sizeof in[0])) {
        nb__error("%s: op %s (node %d) has %d inputs", w->fn, nb__ops[n->op].name, i, n->nin);
        return -1;
    }
    for (int k = 0; k < n->nin; k++) in[k] = nb__onnxw_in(w, n, k);
    return nb__onnxw_node(w, e->op_type, in, n->nin, nb__onnxw_out(w, n)) ? 0 : -1;
}

/* Packs the model and writes it atomically. */
static int write_model(onnx_writer *w, const char *path) {
    Onnx__OperatorSetIdProto ops = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    ops.domain = "";
    ops.has_version = true;
    ops.version = w->opset;
    Onnx__OperatorSetIdProto *opsp = &ops;
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = true;
    model.ir_version = ir_version_of(w->opset);
    model.n_opset_import = 1;
    model.opset_import = &opsp;
    model.producer_name = "nabla";
    model.producer_version = (char *)nb_version();
    model.graph = w->graph;
    size_t size = onnx__model_proto__get_packed_size(&model);
    if (size > (size_t)INT32_MAX) {
        nb__error("%s: the model is %zu bytes, past protobuf's 2 GiB; external data is not written yet", w->fn, size);
        return -1;
    }
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) { nb__error("%s: out of memory packing %zu bytes", w->fn, size); return -1; }
    onnx__model_proto__pack(&model, buf);
    nb__afile f;
    int rc = nb__afile_open(&f, w->fn, path);
    if (rc == 0) rc = nb__afile_write(&f, buf, size);
    if (rc == 0) rc = nb__afile_commit(&f);
    free(buf);
    return rc < 0 ? -1 : 0;
}

static void writer_free(onnx_writer *w) {
    for (size_t i = 0; i < w->nowned; i++) free(w->owned[i]);
    free(w->owned);
    free(w->nodes);
    free(w->inits);
    free(w->names);
}

/* The inputs at the second batch size (zeros: the shape-only trace never reads them), held by
   the current scope. */
static int second_inputs(const char *fn, nb_tensor *const *in, int n, int64_t b2, nb_tensor **out) {
    for (int k = 0; k < n; k++) {
        nb_shape s = in[k]->shape;
        if (s.ndim == 0) {
            nb__error("%s: dynamic_batch needs a batch axis, but input %d is 0-d", fn, k);
            return -1;
        }
        if (s.dim[0] != in[0]->shape.dim[0]) {
            nb__error("%s: dynamic_batch: input %d has %lld rows but input 0 has %lld", fn, k, (long long)s.dim[0],
                      (long long)in[0]->shape.dim[0]);
            return -1;
        }
        s.dim[0] = b2;
        out[k] = nb_zeros(s, in[k]->dtype);
        if (!out[k]) return -1;
    }
    return 0;
}

static int export_graph(onnx_writer *w, const nb_named_tensor *es, int nes, const char *path,
                        const nb_onnx_export_opts *o) {
    const cgraph *g = w->g;
    w->names = calloc((size_t)g->nv + 1, sizeof(char *));
    w->graph = nb__onnxw_alloc(w, sizeof *w->graph);
    bool *live = live_nodes(g);
    if (!w->names || !w->graph || !live) {
        free(live);
        nb__error("%s: out of memory", w->fn);
        return -1;
    }
    *w->graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    w->graph->name = (char *)(o->graph_name ? o->graph_name : "nabla");
    int rc = 0;
    Onnx__ValueInfoProto **ins = nb__onnxw_alloc(w, sizeof *ins * (size_t)g->ninputs);
    for (int k = 0; k < g->ninputs && ins; k++) {
        const char *name = o->input_names ? o->input_names[k] : g->ninputs == 1 ? "input" : wprintf(w, "input_%d", k);
        if (!name) {
            nb__error("%s: input name %d is NULL", w->fn, k);
            rc = -1;
            break;
        }
        w->names[k] = (char *)name;
        ins[k] = value_info(w, name, g->v[k].dtype, &g->v[k].shape, symbolic_dims(w, k));
    }
    /* captures first, as initializers, in the order the function reached them */
    for (int i = 0; i < g->nn && rc == 0; i++) {
        if (!live[i]) continue;
        const cnode *n = &g->nodes[i];
        for (int k = 0; k < n->nin && rc == 0; k++) {
            int v = n->in[k];
            if (g->v[v].kind == VAL_CAPTURE && !w->names[v]) rc = write_capture(w, v, capture_name(w, g->v[v].t, es, nes, v));
        }
    }
    const char *out_name = o->output_names && o->output_names[0] ? o->output_names[0] : "output";
    if (g->v[g->out].kind == VAL_NODE) w->names[g->out] = (char *)out_name;
    for (int i = 0; i < g->nn && rc == 0; i++) {
        if (!live[i]) continue;
        if (g->nodes[i].op >= 0 && (nb__ops[g->nodes[i].op].flags & NB_F_INPLACE)) {
            nb__error("%s: op %s (node %d) writes in place, which ONNX cannot express", w->fn,
                      nb__ops[g->nodes[i].op].name, i);
            rc = -1;
            break;
        }
        rc = write_node(w, i);
        if (rc == 0 && w->failed) rc = -1;
    }
    free(live);
    if (rc == 0 && g->v[g->out].kind != VAL_NODE) {
        if (g->v[g->out].kind == VAL_CAPTURE && !w->names[g->out])
            rc = write_capture(w, g->out, capture_name(w, g->v[g->out].t, es, nes, g->out));
        const char *src = w->names[g->out];
        if (rc == 0 && !nb__onnxw_node(w, "Identity", &src, 1, out_name)) rc = -1;
    }
    if (rc == 0) {
        Onnx__ValueInfoProto *outv = value_info(w, out_name, g->v[g->out].dtype, &g->v[g->out].shape,
                                                symbolic_dims(w, g->out));
        Onnx__ValueInfoProto **outs = nb__onnxw_alloc(w, sizeof *outs);
        if (outs) outs[0] = outv;
        w->graph->n_input = (size_t)g->ninputs;
        w->graph->input = ins;
        w->graph->n_output = 1;
        w->graph->output = outs;
        w->graph->n_node = w->nnodes;
        w->graph->node = w->nodes;
        w->graph->n_initializer = w->ninits;
        w->graph->initializer = w->inits;
        if (w->failed || !outv) rc = -1;
    }
    if (rc < 0 && w->failed && !nb__has_error()) nb__error("%s: out of memory", w->fn);
    if (rc == 0) rc = write_model(w, path);
    return rc;
}

static int export_impl(const char *fn, nb_graph_fn f, void *ctx, nb_tensor *const *inputs, int n, const char *path,
                       nb_onnx_export_opts o) {
    nb_module *names_from = o.names_from;
    if (!f || !path || !inputs || n < 1 || n > 32) {
        nb__error("%s: needs a function, 1 to 32 example inputs and a path", fn);
        return -1;
    }
    for (int k = 0; k < n; k++)
        if (!inputs[k]) { nb__error("%s: example input %d is NULL", fn, k); return -1; }
    int opset = o.opset ? o.opset : NB_ONNX_OPSET_DEFAULT;
    if (opset < NB_ONNX_OPSET_MIN || opset > NB_ONNX_OPSET_MAX) {
        nb__error("%s: opset %d is not supported (%d to %d)", fn, opset, NB_ONNX_OPSET_MIN, NB_ONNX_OPSET_MAX);
        return -1;
    }
    nb_named_tensor *es = NULL;
    int nes = 0;
    if (names_from) {
        nes = nb_module_state_entries(names_from, NULL, 0);
        es = nes > 0 ? malloc(sizeof *es * (size_t)nes) : NULL;
        if (nes < 0 || (nes > 0 && !es)) { free(es); return -1; }
        if (nes > 0) nb_module_state_entries(names_from, es, nes);
    }
    bool grad = nb_is_grad_enabled();
    nb_set_grad_enabled(false);
    nb_scope *scope = nb_scope_begin(); /* holds the second batch's inputs */
    nb_tensor *res = NULL, *in2[32] = { 0 };
    /* the trace's own errors begin "nb_compiled_run:"; they are reworded to say which function
       it was, in a quiet context so a handler hears the whole message once */
    nb__error_ctx ec;
    nb__error_quiet(&ec);
    cgraph *g = nb__trace(f, ctx, inputs, n, &res), *g2 = NULL;
    nb_release(res);
    int rc = g ? 0 : -1;
    if (rc == 0 && o.dynamic_batch) {
        int64_t b1 = inputs[0]->shape.ndim ? inputs[0]->shape.dim[0] : 0, b2 = b1 + 3;
        rc = second_inputs(fn, inputs, n, b2, in2);
        if (rc == 0) {
            res = NULL;
            g2 = nb__trace(f, ctx, in2, n, &res);
            nb_release(res);
            if (!g2) rc = -1;
        }
        if (rc == 0 && !same_structure(g, g2)) {
            nb__error("%s: dynamic_batch: the function records different ops at batch %lld and %lld; export it at a "
                      "fixed batch size", fn, (long long)b1, (long long)b2);
            rc = -1;
        }
    }
    nb_set_grad_enabled(grad);
    if (rc < 0 && nb__has_error() && strncmp(nb_error(), "nb_compiled_run: ", 17) == 0)
        nb__error_reword("%s: %s", fn, nb_error() + 17);
    nb__error_pop(&ec);
    if (rc == 0) {
        onnx_writer w = { .fn = fn, .opset = opset, .g = g, .g2 = g2 };
        rc = export_graph(&w, es, nes, path, &o);
        writer_free(&w);
    }
    nb_scope_end(scope);
    nb__graph_free(g);
    nb__graph_free(g2);
    free(es);
    return rc;
}

int nb_onnx_export_fn(nb_graph_fn fn, void *ctx, nb_tensor *const *example_inputs, int n, const char *path,
                      nb_onnx_export_opts opts) {
    return export_impl("nb_onnx_export_fn", fn, ctx, example_inputs, n, path, opts);
}

static nb_tensor *module_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    return nb_forward(ctx, in[0]);
}

int nb_onnx_export(nb_module *m, nb_tensor *const *example_inputs, int n, const char *path, nb_onnx_export_opts opts) {
    if (!m || !example_inputs || !example_inputs[0]) {
        nb__error("nb_onnx_export: the module and the example input must not be NULL");
        return -1;
    }
    if (n != 1) {
        nb__error("nb_onnx_export: a module takes one input, got %d; export a function of several with "
                  "nb_onnx_export_fn", n);
        return -1;
    }
    /* eval mode for the trace, and each module's own mode back after it */
    int nm = nb__module_modes(m, NULL, 0, 0, false);
    bool *saved = malloc(sizeof(bool) * (size_t)nm);
    if (!saved) { nb__error("nb_onnx_export: out of memory"); return -1; }
    nb__module_modes(m, saved, nm, 0, false);
    nb_module_train(m, false);
    opts.names_from = m;
    int rc = export_impl("nb_onnx_export", module_fn, m, example_inputs, 1, path, opts);
    nb__module_modes(m, saved, nm, 0, true);
    free(saved);
    return rc;
}
