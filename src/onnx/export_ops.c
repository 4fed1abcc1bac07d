/* The ONNX form of each op: the table generated from ops.def's onnx column, and the exporters
   of the ops that need attributes, constants or several nodes (ONNX_FN). Each reads its node's
   arguments as the op's inference left them (axes made non-negative, slice bounds clamped). */
#include "onnx_impl.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

#define IN(k) nb__onnxw_in(w, n, k)
#define OUT() nb__onnxw_out(w, n)
#define NODE1(op, a, out) nb__onnxw_node(w, op, (const char *const[]){ a }, 1, out)
#define NODE2(op, a, b, out) nb__onnxw_node(w, op, (const char *const[]){ a, b }, 2, out)
#define DONE(nd) ((nd) && !w->failed ? 0 : -1)

static const nb_shape *in_shape(const onnx_writer *w, const cnode *n, int k) { return &w->g->v[n->in[k]].shape; }
static const nb_shape *out_shape(const onnx_writer *w, const cnode *n) { return &w->g->v[n->out].shape; }
static nb_dtype out_dtype(const onnx_writer *w, const cnode *n) { return w->g->v[n->out].dtype; }

static int batch_error(onnx_writer *w, const cnode *n, const char *what) {
    nb__error("%s: op %s (node %d): %s changes with the batch size, which the exporter cannot express", w->fn,
              nb__ops[n->op].name, n->pos, what);
    return -1;
}

/* Whether the node's scalar arguments are the same at both batch sizes. */
static bool same_scalars(const cnode *n, const cnode *n2) {
    return !n2 || memcmp(n->args.f, n2->args.f, sizeof n->args.f) == 0;
}

/* A binary op of x and a constant of x's dtype. */
static int with_scalar(onnx_writer *w, const cnode *n, const cnode *n2, const char *op, double v) {
    if (!same_scalars(n, n2)) return batch_error(w, n, "the scalar");
    const char *c = nb__onnxw_const_scalar(w, out_dtype(w, n), v);
    return DONE(NODE2(op, IN(0), c, OUT()));
}

/* ---------------------------------------------------------------- creation */

static int onnx_full(onnx_writer *w, const cnode *n, const cnode *n2) {
    const nb_shape *s = &n->args.shape;
    if (n2 && (!nb__shape_eq(s, &n2->args.shape) || !same_scalars(n, n2))) return batch_error(w, n, "the shape or value");
    const char *shape = nb__onnxw_const_i64(w, s->dim, s->ndim, false);
    Onnx__NodeProto *nd = NODE1("ConstantOfShape", shape, OUT());
    nb__onnxw_attr_scalar_tensor(w, nd, "value", n->args.dtype, n->args.f[0]);
    return DONE(nd);
}

/* ONNX's Range counts ceil((limit - start) / delta) elements in the dtype's own arithmetic;
   the exact values nabla made are written instead, as a constant. */
static int onnx_arange(onnx_writer *w, const cnode *n, const cnode *n2) {
    if (n2 && (!nb__shape_eq(&n->args.shape, &n2->args.shape) || !same_scalars(n, n2)))
        return batch_error(w, n, "the range");
    int64_t len = n->args.shape.dim[0];
    nb_dtype d = out_dtype(w, n);
    double start = n->args.f[0], step = n->args.f[1];
    if (d == NB_F32 || d == NB_F64 || d == NB_I64 || d == NB_I32) {
        /* integers count exactly; floats too when every value is an integer multiple in range */
        bool exact = !nb__is_float(d) || (start == floor(start) && step == floor(step) && fabs(start) + fabs(step) * (double)len < 1e7);
        if (exact) {
            const char *in[3] = { nb__onnxw_const_scalar(w, d, start), nb__onnxw_const_scalar(w, d, start + step * (double)len),
                                  nb__onnxw_const_scalar(w, d, step) };
            return DONE(nb__onnxw_node(w, "Range", in, 3, OUT()));
        }
    }
    /* otherwise start + step * index, computed in f64 and cast like nabla's kernel */
    const char *r = nb__onnxw_tmp(w, "arange");
    const char *z = nb__onnxw_const_scalar(w, NB_I64, 0), *l = nb__onnxw_const_scalar(w, NB_I64, (double)len),
               *one = nb__onnxw_const_scalar(w, NB_I64, 1);
    nb__onnxw_node(w, "Range", (const char *const[]){ z, l, one }, 3, r);
    const char *rf = nb__onnxw_tmp(w, "arange");
    nb__onnxw_attr_int(w, NODE1("Cast", r, rf), "to", nb__onnx_dtype(NB_F64));
    const char *m = nb__onnxw_tmp(w, "arange"), *a = nb__onnxw_tmp(w, "arange");
    NODE2("Mul", rf, nb__onnxw_const_scalar(w, NB_F64, step), m);
    NODE2("Add", m, nb__onnxw_const_scalar(w, NB_F64, start), a);
    Onnx__NodeProto *c = NODE1("Cast", a, OUT());
    nb__onnxw_attr_int(w, c, "to", nb__onnx_dtype(d));
    return DONE(c);
}

/* ---------------------------------------------------------------- elementwise */

static int onnx_add_scalar(onnx_writer *w, const cnode *n, const cnode *n2) { return with_scalar(w, n, n2, "Add", n->args.f[0]); }
static int onnx_mul_scalar(onnx_writer *w, const cnode *n, const cnode *n2) { return with_scalar(w, n, n2, "Mul", n->args.f[0]); }
static int onnx_pow_scalar(onnx_writer *w, const cnode *n, const cnode *n2) { return with_scalar(w, n, n2, "Pow", n->args.f[0]); }

/* gelu(x) = x * (1 + erf(x / sqrt 2)) / 2: ONNX's Gelu from opset 20, its formula before. */
static int onnx_gelu(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    if (w->opset >= 20) return DONE(NODE1("Gelu", IN(0), OUT()));
    nb_dtype d = out_dtype(w, n);
    const char *a = nb__onnxw_tmp(w, "gelu"), *b = nb__onnxw_tmp(w, "gelu"), *c = nb__onnxw_tmp(w, "gelu"),
               *e = nb__onnxw_tmp(w, "gelu");
    NODE2("Mul", IN(0), nb__onnxw_const_scalar(w, d, 0.70710678118654752440), a);
    NODE1("Erf", a, b);
    NODE2("Add", b, nb__onnxw_const_scalar(w, d, 1.0), c);
    NODE2("Mul", IN(0), c, e);
    return DONE(NODE2("Mul", e, nb__onnxw_const_scalar(w, d, 0.5), OUT()));
}

static int onnx_log1p(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const char *a = nb__onnxw_tmp(w, "log1p");
    NODE2("Add", IN(0), nb__onnxw_const_scalar(w, out_dtype(w, n), 1.0), a);
    return DONE(NODE1("Log", a, OUT()));
}

static int onnx_expm1(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const char *a = nb__onnxw_tmp(w, "expm1");
    NODE1("Exp", IN(0), a);
    return DONE(NODE2("Sub", a, nb__onnxw_const_scalar(w, out_dtype(w, n), 1.0), OUT()));
}

static int onnx_rsqrt(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const char *a = nb__onnxw_tmp(w, "rsqrt");
    NODE1("Sqrt", IN(0), a);
    return DONE(NODE1("Reciprocal", a, OUT()));
}

/* trunc(x) = sign(x) * floor(|x|) for floats; integers are their own truncation. */
static int onnx_trunc(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    if (!nb__is_float(out_dtype(w, n))) return DONE(NODE1("Identity", IN(0), OUT()));
    const char *a = nb__onnxw_tmp(w, "trunc"), *f = nb__onnxw_tmp(w, "trunc"), *s = nb__onnxw_tmp(w, "trunc");
    NODE1("Abs", IN(0), a);
    NODE1("Floor", a, f);
    NODE1("Sign", IN(0), s);
    return DONE(NODE2("Mul", s, f, OUT()));
}

/* Clip with the bounds as inputs (opset 11); an infinite bound is left out. */
static int onnx_clamp(onnx_writer *w, const cnode *n, const cnode *n2) {
    if (!same_scalars(n, n2)) return batch_error(w, n, "a bound");
    nb_dtype d = out_dtype(w, n);
    double lo = n->args.f[0], hi = n->args.f[1];
    const char *in[3] = { IN(0), "", "" };
    if (!isinf(lo)) in[1] = nb__onnxw_const_scalar(w, d, nb__is_float(d) ? lo : ceil(lo));
    if (!isinf(hi)) in[2] = nb__onnxw_const_scalar(w, d, nb__is_float(d) ? hi : floor(hi));
    return DONE(nb__onnxw_node(w, "Clip", in, 3, OUT()));
}

static int onnx_cast(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    Onnx__NodeProto *nd = NODE1("Cast", IN(0), OUT());
    nb__onnxw_attr_int(w, nd, "to", nb__onnx_dtype(n->args.dtype));
    return DONE(nd);
}

/* ---------------------------------------------------------------- views */

/* Reshape to the traced shape; with a second trace, an axis that follows the batch is 0 (copy
   the input's axis) where it is the input's same axis at both sizes, else the one -1. */
static int onnx_view(onnx_writer *w, const cnode *n, const cnode *n2) {
    nb_shape s = n->args.shape;
    const nb_shape *x = in_shape(w, n, 0);
    if (n2) {
        const nb_shape *s2 = &n2->args.shape, *x2 = &w->g2->v[n->in[0]].shape;
        int minus = 0;
        for (int k = 0; k < s.ndim; k++) {
            if (s.dim[k] == s2->dim[k]) continue;
            if (k < x->ndim && s.dim[k] == x->dim[k] && s2->dim[k] == x2->dim[k]) s.dim[k] = 0;
            else { s.dim[k] = -1; minus++; }
        }
        if (minus > 1) return batch_error(w, n, "more than one axis of the shape");
    }
    for (int k = 0; k < n->args.shape.ndim; k++)
        if (n->args.shape.dim[k] == 0) {
            nb__error("%s: op view (node %d) makes an empty axis, which ONNX's Reshape reads as 'copy'", w->fn, n->pos);
            return -1;
        }
    const char *shape = nb__onnxw_const_i64(w, s.dim, s.ndim, false);
    return DONE(NODE2("Reshape", IN(0), shape, OUT()));
}

static int onnx_permute(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    Onnx__NodeProto *nd = NODE1("Transpose", IN(0), OUT());
    nb__onnxw_attr_ints(w, nd, "perm", n->args.i, in_shape(w, n, 0)->ndim);
    return DONE(nd);
}

/* Expand broadcasts both ways, so an axis that keeps the input's size may be written as 1:
   with a second trace, that is how an axis that follows the batch is written. */
static int onnx_expand(onnx_writer *w, const cnode *n, const cnode *n2) {
    nb_shape s = n->args.shape;
    if (n2) {
        const nb_shape *s2 = &n2->args.shape, *x = in_shape(w, n, 0), *x2 = &w->g2->v[n->in[0]].shape;
        int lead = s.ndim - x->ndim;
        for (int k = 0; k < s.ndim; k++) {
            if (s.dim[k] == s2->dim[k]) continue;
            if (k >= lead && x->dim[k - lead] == s.dim[k] && x2->dim[k - lead] == s2->dim[k]) s.dim[k] = 1;
            else return batch_error(w, n, "the size it expands to");
        }
    }
    const char *shape = nb__onnxw_const_i64(w, s.dim, s.ndim, false);
    return DONE(NODE2("Expand", IN(0), shape, OUT()));
}

static int onnx_slice(onnx_writer *w, const cnode *n, const cnode *n2) {
    int64_t axis = n->args.i[0], start = n->args.i[1], end = n->args.i[2], step = n->args.i[3];
    if (n2) {
        const nb_shape *x = in_shape(w, n, 0), *x2 = &w->g2->v[n->in[0]].shape;
        if (n2->args.i[0] != axis || n2->args.i[1] != start || n2->args.i[3] != step) return batch_error(w, n, "the slice");
        if (n2->args.i[2] != end) {
            if (end == x->dim[axis] && n2->args.i[2] == x2->dim[axis]) end = INT64_MAX;
            else return batch_error(w, n, "the slice's end");
        }
    }
    const char *in[5] = { IN(0), nb__onnxw_const_i64(w, &start, 1, false), nb__onnxw_const_i64(w, &end, 1, false),
                          nb__onnxw_const_i64(w, &axis, 1, false), nb__onnxw_const_i64(w, &step, 1, false) };
    return DONE(nb__onnxw_node(w, "Slice", in, 5, OUT()));
}

/* ---------------------------------------------------------------- comparisons */

/* a != b as Not(Equal); a <= b and a >= b as Or(Less, Equal) (LessOrEqual is opset 12, and
   Not(Greater) would be true for NaN). */
static int onnx_ne(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const char *e = nb__onnxw_tmp(w, "ne");
    NODE2("Equal", IN(0), IN(1), e);
    return DONE(NODE1("Not", e, OUT()));
}
static int or_equal(onnx_writer *w, const cnode *n, const char *strict) {
    const char *s = nb__onnxw_tmp(w, "cmp"), *e = nb__onnxw_tmp(w, "cmp");
    NODE2(strict, IN(0), IN(1), s);
    NODE2("Equal", IN(0), IN(1), e);
    return DONE(NODE2("Or", s, e, OUT()));
}
static int onnx_le(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return or_equal(w, n, "Less"); }
static int onnx_ge(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return or_equal(w, n, "Greater"); }

/* ---------------------------------------------------------------- reductions */

/* Reduce op_type over the axes of the mask in i[0]; the axes are an input from axes_input_opset,
   an attribute before. */
static int reduce(onnx_writer *w, const cnode *n, const char *op_type, int axes_input_opset) {
    const nb_shape *x = in_shape(w, n, 0);
    int64_t axes[NB_MAX_DIMS];
    int na = 0;
    for (int d = 0; d < x->ndim; d++)
        if (n->args.i[0] & ((int64_t)1 << d)) axes[na++] = d;
    const char *src = IN(0);
    nb_dtype od = out_dtype(w, n);
    if (nb__onnxw_vdtype(w, n->in[0]) != od) { /* integer sums are i64, as in torch */
        const char *c = nb__onnxw_tmp(w, "sum");
        nb__onnxw_attr_int(w, NODE1("Cast", src, c), "to", nb__onnx_dtype(od));
        src = c;
    }
    if (na == 0) return DONE(NODE1("Identity", src, OUT()));
    Onnx__NodeProto *nd;
    if (w->opset >= axes_input_opset) nd = NODE2(op_type, src, nb__onnxw_const_i64(w, axes, na, false), OUT());
    else {
        nd = NODE1(op_type, src, OUT());
        nb__onnxw_attr_ints(w, nd, "axes", axes, na);
    }
    nb__onnxw_attr_int(w, nd, "keepdims", n->args.i[1] != 0);
    return DONE(nd);
}

static int onnx_sum(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return reduce(w, n, "ReduceSum", 13); }
static int onnx_max(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return reduce(w, n, "ReduceMax", 18); }
static int onnx_min(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return reduce(w, n, "ReduceMin", 18); }

/* ArgMax/ArgMin take one axis; a reduction over every axis flattens first. */
static int arg_reduce(onnx_writer *w, const cnode *n, const char *op_type) {
    const nb_shape *x = in_shape(w, n, 0);
    int na = 0, axis = 0;
    for (int d = 0; d < x->ndim; d++)
        if (n->args.i[0] & ((int64_t)1 << d)) { na++; axis = d; }
    bool keep = n->args.i[1] != 0;
    if (na <= 1 && x->ndim > 0) {
        Onnx__NodeProto *nd = NODE1(op_type, IN(0), OUT());
        nb__onnxw_attr_int(w, nd, "axis", axis);
        nb__onnxw_attr_int(w, nd, "keepdims", keep);
        return DONE(nd);
    }
    int64_t flat = -1;
    const char *f = nb__onnxw_tmp(w, "flat"), *r = nb__onnxw_tmp(w, "arg");
    NODE2("Reshape", IN(0), nb__onnxw_const_i64(w, &flat, 1, false), f);
    Onnx__NodeProto *nd = NODE1(op_type, f, r);
    nb__onnxw_attr_int(w, nd, "axis", 0);
    nb__onnxw_attr_int(w, nd, "keepdims", 0);
    const nb_shape *o = out_shape(w, n);
    return DONE(NODE2("Reshape", r, nb__onnxw_const_i64(w, o->dim, o->ndim, false), OUT()));
}

static int onnx_argmax(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return arg_reduce(w, n, "ArgMax"); }
static int onnx_argmin(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return arg_reduce(w, n, "ArgMin"); }

/* Softmax over one axis: before opset 13 ONNX's Softmax flattens the axes from `axis` on, which
   is the same only for the last axis, so another axis goes there and back by Transpose. */
static int softmax(onnx_writer *w, const cnode *n, const char *op_type) {
    int nd = in_shape(w, n, 0)->ndim, a = (int)n->args.i[0];
    if (w->opset >= 13 || a == nd - 1 || nd == 0) {
        Onnx__NodeProto *s = NODE1(op_type, IN(0), OUT());
        nb__onnxw_attr_int(w, s, "axis", nd == 0 ? 0 : a);
        return DONE(s);
    }
    int64_t perm[NB_MAX_DIMS];
    for (int k = 0; k < nd; k++) perm[k] = k;
    perm[a] = nd - 1;
    perm[nd - 1] = a;
    const char *t = nb__onnxw_tmp(w, "softmax"), *s = nb__onnxw_tmp(w, "softmax");
    nb__onnxw_attr_ints(w, NODE1("Transpose", IN(0), t), "perm", perm, nd);
    nb__onnxw_attr_int(w, NODE1(op_type, t, s), "axis", nd - 1);
    Onnx__NodeProto *back = NODE1("Transpose", s, OUT());
    nb__onnxw_attr_ints(w, back, "perm", perm, nd);
    return DONE(back);
}

static int onnx_softmax(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return softmax(w, n, "Softmax"); }
static int onnx_log_softmax(onnx_writer *w, const cnode *n, const cnode *n2) { (void)n2; return softmax(w, n, "LogSoftmax"); }

/* CumSum (opset 11) takes its axis as an input and `reverse` as an attribute. */
static int onnx_cumsum(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    int64_t axis = n->args.i[0];
    Onnx__NodeProto *nd = NODE2("CumSum", IN(0), nb__onnxw_const_i64(w, &axis, 1, true), OUT());
    if (nd && n->args.i[1]) nb__onnxw_attr_int(w, nd, "reverse", 1);
    return DONE(nd);
}

/* ---------------------------------------------------------------- indexing and joining */

/* index_select keeps the axis for a 0-d index (one row), where Gather would drop it. */
static int onnx_index_select(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const char *idx = IN(1);
    if (in_shape(w, n, 1)->ndim == 0) {
        int64_t one = 1;
        const char *r = nb__onnxw_tmp(w, "index");
        NODE2("Reshape", idx, nb__onnxw_const_i64(w, &one, 1, false), r);
        idx = r;
    }
    Onnx__NodeProto *nd = NODE2("Gather", IN(0), idx, OUT());
    nb__onnxw_attr_int(w, nd, "axis", n->args.i[0]);
    return DONE(nd);
}

static int onnx_gather(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    Onnx__NodeProto *nd = NODE2("GatherElements", IN(0), IN(1), OUT());
    nb__onnxw_attr_int(w, nd, "axis", n->args.i[0]);
    return DONE(nd);
}

/* t with a last axis of size 1 (Reshape to its shape and 1: Unsqueeze changed form at opset 13). */
static const char *append_axis(onnx_writer *w, const char *t) {
    int64_t one = 1;
    const char *s = nb__onnxw_tmp(w, "index"), *s1 = nb__onnxw_tmp(w, "index"), *r = nb__onnxw_tmp(w, "index");
    NODE1("Shape", t, s);
    nb__onnxw_attr_int(w, NODE2("Concat", s, nb__onnxw_const_i64(w, &one, 1, false), s1), "axis", 0);
    NODE2("Reshape", t, s1, r);
    return r;
}

/* Advanced indexing's index tensors, inputs [first, first + count) of n, as GatherND's and
   ScatterND's one int64 tensor [B..., count]: each cast to int64, broadcast against the others
   (each plus the others times zero), a negative index moved up by its axis's size of x (read
   from x's shape at run time, so a dynamic batch axis works), then stacked on a last axis. */
static const char *nd_indices(onnx_writer *w, const cnode *n, int first, int count) {
    const char **idx = nb__onnxw_alloc(w, sizeof(char *) * (size_t)count);
    if (!idx) return NULL;
    for (int k = 0; k < count; k++) {
        idx[k] = IN(first + k);
        if (nb__onnxw_vdtype(w, n->in[first + k]) != NB_I64) {
            const char *c = nb__onnxw_tmp(w, "index");
            nb__onnxw_attr_int(w, NODE1("Cast", idx[k], c), "to", nb__onnx_dtype(NB_I64));
            idx[k] = c;
        }
    }
    const char *zero = NULL, *z64 = nb__onnxw_const_scalar(w, NB_I64, 0);
    for (int k = 0; count > 1 && k < count; k++) {
        const char *m = nb__onnxw_tmp(w, "index");
        NODE2("Mul", idx[k], z64, m);
        if (zero) {
            const char *sum = nb__onnxw_tmp(w, "index");
            NODE2("Add", zero, m, sum);
            zero = sum;
        } else zero = m;
    }
    const char *shape = nb__onnxw_tmp(w, "index");
    NODE1("Shape", IN(0), shape);
    const char **cols = nb__onnxw_alloc(w, sizeof(char *) * (size_t)count);
    if (!cols) return NULL;
    for (int k = 0; k < count; k++) {
        const char *t = idx[k];
        if (zero) {
            const char *b = nb__onnxw_tmp(w, "index");
            NODE2("Add", t, zero, b);
            t = b;
        }
        int64_t axis = k;
        const char *size = nb__onnxw_tmp(w, "index"), *neg = nb__onnxw_tmp(w, "index"), *negi = nb__onnxw_tmp(w, "index"),
                   *shift = nb__onnxw_tmp(w, "index"), *pos = nb__onnxw_tmp(w, "index");
        NODE2("Gather", shape, nb__onnxw_const_i64(w, &axis, 1, true), size);
        NODE2("Less", t, z64, neg);
        nb__onnxw_attr_int(w, NODE1("Cast", neg, negi), "to", nb__onnx_dtype(NB_I64));
        NODE2("Mul", negi, size, shift);
        NODE2("Add", t, shift, pos);
        cols[k] = append_axis(w, pos);
    }
    if (count == 1) return cols[0];
    const char *all = nb__onnxw_tmp(w, "index");
    nb__onnxw_attr_int(w, nb__onnxw_node(w, "Concat", cols, count, all), "axis", -1);
    return all;
}

/* x[i0, ..., ik-1] as GatherND over x's leading axes. */
static int onnx_index(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const char *idx = nd_indices(w, n, 1, n->nin - 1);
    return idx ? DONE(NODE2("GatherND", IN(0), idx, OUT())) : -1;
}

/* x with x[i0, ...] = values as ScatterND, the values expanded to the indexed shape (the
   indices' broadcast shape, then x's axes they leave); accumulate as ScatterND's reduction
   "add", from opset 16. */
static int onnx_index_put(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    bool accumulate = n->args.i[0] != 0;
    if (accumulate && w->opset < 16) {
        nb__error("%s: op index_put (node %d) with accumulate needs ScatterND's reduction, opset 16 or newer (exporting "
                  "at opset %d)", w->fn, n->pos, w->opset);
        return -1;
    }
    int count = n->nin - 2;
    const char *idx = nd_indices(w, n, 2, count);
    if (!idx) return -1;
    int64_t zero = 0, minus1 = -1, k = count, big = INT64_MAX;
    const char *is = nb__onnxw_tmp(w, "index"), *b = nb__onnxw_tmp(w, "index"), *xs = nb__onnxw_tmp(w, "index"),
               *rest = nb__onnxw_tmp(w, "index"), *target = nb__onnxw_tmp(w, "index"), *v = nb__onnxw_tmp(w, "index");
    NODE1("Shape", idx, is);
    nb__onnxw_node(w, "Slice", (const char *const[]){ is, nb__onnxw_const_i64(w, &zero, 1, false), nb__onnxw_const_i64(w, &minus1, 1, false) }, 3, b);
    NODE1("Shape", IN(0), xs);
    nb__onnxw_node(w, "Slice", (const char *const[]){ xs, nb__onnxw_const_i64(w, &k, 1, false), nb__onnxw_const_i64(w, &big, 1, false) }, 3, rest);
    nb__onnxw_attr_int(w, NODE2("Concat", b, rest, target), "axis", 0);
    NODE2("Expand", IN(1), target, v);
    Onnx__NodeProto *nd = nb__onnxw_node(w, "ScatterND", (const char *const[]){ IN(0), idx, v }, 3, OUT());
    if (nd && accumulate) nb__onnxw_attr_string(w, nd, "reduction", "add");
    return DONE(nd);
}

static int onnx_cat(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const char **in = nb__onnxw_alloc(w, sizeof(char *) * (size_t)n->nin);
    if (!in) return -1;
    for (int k = 0; k < n->nin; k++) in[k] = IN(k);
    Onnx__NodeProto *nd = nb__onnxw_node(w, "Concat", in, n->nin, OUT());
    nb__onnxw_attr_int(w, nd, "axis", n->args.i[0]);
    return DONE(nd);
}

/* ---------------------------------------------------------------- convolution and pooling */

static int onnx_conv2d(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const int64_t *a = n->args.i;
    const nb_shape *wt = in_shape(w, n, 1);
    const char *in[3] = { IN(0), IN(1), n->nin == 3 ? IN(2) : "" };
    Onnx__NodeProto *nd = nb__onnxw_node(w, "Conv", in, n->nin, OUT());
    nb__onnxw_attr_ints(w, nd, "kernel_shape", (const int64_t[]){ wt->dim[2], wt->dim[3] }, 2);
    nb__onnxw_attr_ints(w, nd, "strides", (const int64_t[]){ a[0], a[1] }, 2);
    nb__onnxw_attr_ints(w, nd, "pads", (const int64_t[]){ a[2], a[3], a[2], a[3] }, 4);
    nb__onnxw_attr_ints(w, nd, "dilations", (const int64_t[]){ a[4], a[5] }, 2);
    nb__onnxw_attr_int(w, nd, "group", a[6]);
    return DONE(nd);
}

static Onnx__NodeProto *pool2d(onnx_writer *w, const cnode *n, const char *op_type) {
    const int64_t *a = n->args.i;
    Onnx__NodeProto *nd = NODE1(op_type, IN(0), OUT());
    nb__onnxw_attr_ints(w, nd, "kernel_shape", (const int64_t[]){ a[0], a[1] }, 2);
    nb__onnxw_attr_ints(w, nd, "strides", (const int64_t[]){ a[2], a[3] }, 2);
    nb__onnxw_attr_ints(w, nd, "pads", (const int64_t[]){ a[4], a[5], a[4], a[5] }, 4);
    if (a[8]) nb__onnxw_attr_int(w, nd, "ceil_mode", 1); /* opset 10 on: the exporter writes 11 and newer */
    return nd;
}

static int onnx_max_pool2d(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    Onnx__NodeProto *nd = pool2d(w, n, "MaxPool");
    const int64_t *a = n->args.i;
    if ((a[6] > 1 || a[7] > 1) && nd) nb__onnxw_attr_ints(w, nd, "dilations", (const int64_t[]){ a[6] ? a[6] : 1, a[7] ? a[7] : 1 }, 2);
    return DONE(nd);
}

/* nabla's average pool counts the padding in each window unless asked not to, as torch's
   count_include_pad. */
static int onnx_avg_pool2d(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    Onnx__NodeProto *nd = pool2d(w, n, "AveragePool");
    nb__onnxw_attr_int(w, nd, "count_include_pad", n->args.i[9] ? 0 : 1);
    return DONE(nd);
}

/* An adaptive average pool is a global one for a 1x1 output, and a plain one when the output
   divides the input; other sizes have uneven windows ONNX has no operator for. */
static int onnx_adaptive_avg_pool2d(onnx_writer *w, const cnode *n, const cnode *n2) {
    (void)n2;
    const nb_shape *x = in_shape(w, n, 0);
    int64_t oh = n->args.i[0], ow = n->args.i[1];
    if (oh == 1 && ow == 1) return DONE(NODE1("GlobalAveragePool", IN(0), OUT()));
    if (x->dim[2] % oh || x->dim[3] % ow) {
        nb__error("%s: op adaptive_avg_pool2d (node %d): output %lldx%lld does not divide input %lldx%lld; ONNX has no "
                  "adaptive pooling", w->fn, n->pos, (long long)oh, (long long)ow, (long long)x->dim[2], (long long)x->dim[3]);
        return -1;
    }
    int64_t kh = x->dim[2] / oh, kw = x->dim[3] / ow;
    Onnx__NodeProto *nd = NODE1("AveragePool", IN(0), OUT());
    nb__onnxw_attr_ints(w, nd, "kernel_shape", (const int64_t[]){ kh, kw }, 2);
    nb__onnxw_attr_ints(w, nd, "strides", (const int64_t[]){ kh, kw }, 2);
    return DONE(nd);
}

/* ---------------------------------------------------------------- the table */

#define ONNX(op) { #op, NULL }
#define ONNX_FN(name) { NULL, onnx_##name }
#define ONNX_NONE { NULL, NULL }
const onnx_op_entry nb__onnx_ops[NB_OP_COUNT] = {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) [NB_OP_##ID] = onnx,
#include "../ops/ops.def"
#undef NB_OP
};
