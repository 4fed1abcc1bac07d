/* Validation and shape inference for every op: each names the function, the shapes and the
   dtypes involved when it refuses its inputs. */
#include "ops_impl.h"
#include "pool_opts.h"
#include "shape_util.h"
#include <stdio.h>
#include <string.h>

#define DESC(t, buf) nb__describe((t), (buf), sizeof(buf))

int nb__broadcast_shapes(const char *fn, const nb_shape *a, const nb_shape *b, nb_shape *out) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    out->ndim = nd;
    for (int i = 0; i < nd; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[160], sb[160];
            nb__error("nb_%s: shapes %s and %s cannot be broadcast (axis %d: %lld vs %lld)", fn,
                      nb_shape_str(*a, sa, sizeof sa), nb_shape_str(*b, sb, sizeof sb), i - nd, (long long)da, (long long)db);
            return -1;
        }
        out->dim[i] = da == 1 ? db : da;
    }
    return 0;
}

bool nb__view_strides(const nb_tensor *t, const nb_shape *shape, int64_t *stride) {
    /* PyTorch's rule: a view is possible when each run of merged or split input axes is
       contiguous within itself. Walk the old axes from the back, matching chunks. */
    const nb_shape *os = &t->shape;
    if (t->numel == 0 || os->ndim == 0 || shape->ndim == 0) {
        nb__contiguous_strides(shape, stride);
        return true;
    }
    int view_d = shape->ndim - 1;
    int64_t chunk_base_stride = t->stride[os->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = os->ndim - 1; tensor_d >= 0; tensor_d--) {
        tensor_numel *= os->dim[tensor_d];
        if (tensor_d == 0 || (os->dim[tensor_d - 1] != 1 && t->stride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape->dim[view_d] == 1)) {
                stride[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape->dim[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (tensor_d > 0) {
                chunk_base_stride = t->stride[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

int nb__resolve_shape(const char *fn, const nb_tensor *t, nb_shape *shape) {
    int infer = -1;
    int64_t known = 1;
    char sh[160], d[200];
    if (shape->ndim < 0 || shape->ndim > NB_MAX_DIMS) {
        nb__error("nb_%s: %d dimensions (at most %d)", fn, shape->ndim, NB_MAX_DIMS);
        return -1;
    }
    for (int i = 0; i < shape->ndim; i++) {
        if (shape->dim[i] == -1) {
            if (infer >= 0) {
                nb__error("nb_%s: shape %s has more than one -1", fn, nb_shape_str(*shape, sh, sizeof sh));
                return -1;
            }
            infer = i;
        } else if (shape->dim[i] < 0) {
            nb__error("nb_%s: invalid dimension in shape %s", fn, nb_shape_str(*shape, sh, sizeof sh));
            return -1;
        } else known *= shape->dim[i];
    }
    if (infer >= 0) {
        if (known == 0 || t->numel % known != 0) {
            nb__error("nb_%s: shape %s is invalid for input %s of %lld elements", fn, nb_shape_str(*shape, sh, sizeof sh),
                      DESC(t, d), (long long)t->numel);
            return -1;
        }
        shape->dim[infer] = t->numel / known;
    } else if (known != t->numel) {
        nb__error("nb_%s: shape %s is invalid for input %s of %lld elements", fn, nb_shape_str(*shape, sh, sizeof sh),
                  DESC(t, d), (long long)t->numel);
        return -1;
    }
    return 0;
}

static int infer_create(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    (void)in; (void)nin;
    char name[48];
    snprintf(name, sizeof name, "nb_%s", nb__ops[op].name);
    if (!nb__dtype_ok(name, args->dtype)) return -1; /* dispatch sizes the result by it next */
    out->shape = args->shape;
    out->dtype = args->dtype;
    return 0;
}

static int infer_binary(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin; (void)args;
    out->dtype = in[0]->dtype;
    return nb__broadcast_shapes(fn, &in[0]->shape, &in[1]->shape, &out->shape);
}

static int infer_compare(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    int rc = infer_binary(op, in, nin, args, out);
    out->dtype = NB_BOOL;
    return rc;
}

static int infer_where(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin; (void)args;
    if (in[0]->dtype != NB_BOOL) {
        char d[200];
        nb__error("nb_%s: the condition must be bool, got %s", fn, DESC(in[0], d));
        return -1;
    }
    nb_shape ab;
    if (nb__broadcast_shapes(fn, &in[1]->shape, &in[2]->shape, &ab) < 0) return -1;
    out->dtype = in[1]->dtype;
    return nb__broadcast_shapes(fn, &in[0]->shape, &ab, &out->shape);
}

static int infer_unary(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    (void)nin; (void)args;
    out->shape = in[0]->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

static int infer_cast(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    char name[48];
    snprintf(name, sizeof name, "nb_%s", fn);
    if (!nb__dtype_ok(name, args->dtype)) return -1;
    out->shape = in[0]->shape;
    out->dtype = args->dtype;
    return 0;
}

static int infer_view(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    const nb_tensor *t = in[0];
    if (nb__resolve_shape(fn, t, &args->shape) < 0) return -1;
    if (!nb__view_strides(t, &args->shape, out->stride)) {
        char sh[160], d[200];
        nb__error("nb_%s: shape %s is not compatible with the strides of input %s (it is not contiguous); "
                  "use nb_reshape, which copies when it must", fn, nb_shape_str(args->shape, sh, sizeof sh), DESC(t, d));
        return -1;
    }
    out->shape = args->shape;
    out->dtype = t->dtype;
    out->offset = t->offset;
    return 0;
}

static int infer_permute(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    const nb_tensor *t = in[0];
    int nd = t->shape.ndim;
    bool seen[NB_MAX_DIMS] = { false };
    for (int i = 0; i < nd; i++) {
        int a = nb__axis((int)args->i[i], nd);
        if (a < 0 || nd == 0 || seen[a]) {
            char d[200];
            nb__error("nb_%s: axes do not form a permutation of %d axes for %s (axis %lld at position %d)", fn, nd,
                      DESC(t, d), (long long)args->i[i], i);
            return -1;
        }
        seen[a] = true;
        args->i[i] = a;
        out->shape.dim[i] = t->shape.dim[a];
        out->stride[i] = t->stride[a];
    }
    out->shape.ndim = nd;
    out->dtype = t->dtype;
    out->offset = t->offset;
    return 0;
}

static int infer_expand(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    const nb_tensor *t = in[0];
    nb_shape *s = &args->shape;
    char sh[160], d[200];
    if (s->ndim < t->shape.ndim || s->ndim > NB_MAX_DIMS) {
        nb__error("nb_%s: cannot expand %s to %s (fewer dimensions)", fn, DESC(t, d), nb_shape_str(*s, sh, sizeof sh));
        return -1;
    }
    int lead = s->ndim - t->shape.ndim;
    for (int i = 0; i < s->ndim; i++) {
        if (i < lead) {
            if (s->dim[i] < 0) {
                nb__error("nb_%s: -1 is not allowed for a new leading axis in %s", fn, nb_shape_str(*s, sh, sizeof sh));
                return -1;
            }
            out->stride[i] = 0;
            continue;
        }
        int64_t td = t->shape.dim[i - lead];
        if (s->dim[i] == -1) s->dim[i] = td;
        if (s->dim[i] == td) out->stride[i] = t->stride[i - lead];
        else if (td == 1 && s->dim[i] >= 0) out->stride[i] = 0;
        else {
            nb__error("nb_%s: cannot expand %s to %s (axis %d has size %lld, not 1)", fn, DESC(t, d),
                      nb_shape_str(*s, sh, sizeof sh), i, (long long)td);
            return -1;
        }
    }
    out->shape = *s;
    out->dtype = t->dtype;
    out->offset = t->offset;
    return 0;
}

/* Clamps Python-style slice bounds for an axis of size n; returns the result length. */
static int64_t slice_len(int64_t n, int64_t *start, int64_t *end, int64_t step) {
    int64_t s = *start, e = *end;
    if (s < 0) s += n;
    if (e < 0) e += n;
    if (s < 0) s = 0;
    if (s > n) s = n;
    if (e < s) e = s;
    if (e > n) e = n;
    *start = s;
    *end = e;
    return e == s ? 0 : (e - s - 1) / step + 1; /* no e - s + step: it overflows for a huge step */
}

static int infer_slice(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    const nb_tensor *t = in[0];
    int nd = t->shape.ndim;
    int a = nb__axis((int)args->i[0], nd);
    char d[200];
    if (a < 0 || nd == 0) {
        nb__error("nb_%s: axis %lld is out of range for %s", fn, (long long)args->i[0], DESC(t, d));
        return -1;
    }
    if (args->i[3] <= 0) {
        nb__error("nb_%s: step must be positive, got %lld", fn, (long long)args->i[3]);
        return -1;
    }
    int64_t len = slice_len(t->shape.dim[a], &args->i[1], &args->i[2], args->i[3]);
    args->i[0] = a;
    out->shape = t->shape;
    out->shape.dim[a] = len;
    memcpy(out->stride, t->stride, sizeof(int64_t) * (size_t)nd);
    /* with two or more elements the step is below the axis size, so the product fits */
    out->stride[a] = len > 1 ? t->stride[a] * args->i[3] : t->stride[a];
    out->offset = t->offset + (len > 0 ? args->i[1] * t->stride[a] : 0);
    out->dtype = t->dtype;
    return 0;
}

static int infer_detach(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    (void)nin; (void)args;
    out->shape = in[0]->shape;
    memcpy(out->stride, in[0]->stride, sizeof out->stride);
    out->offset = in[0]->offset;
    out->dtype = in[0]->dtype;
    return 0;
}

static int infer_slice_backward(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    int a = (int)args->i[0];
    nb_shape expect = args->shape;
    int64_t s = args->i[1], e = args->i[2];
    expect.dim[a] = slice_len(args->shape.dim[a], &s, &e, args->i[3]);
    if (!nb__shape_eq(&expect, &in[0]->shape)) {
        char sh[160], d[200];
        nb__error("nb_%s: gradient %s does not match the slice shape %s", fn, DESC(in[0], d), nb_shape_str(expect, sh, sizeof sh));
        return -1;
    }
    out->shape = args->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

/* args: i[0] = bit mask of reduced axes, i[1] = keepdim. */
static int infer_reduce(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    const nb_tensor *t = in[0];
    int nd = t->shape.ndim;
    int64_t mask = args->i[0];
    bool keep = args->i[1] != 0;
    /* the op tells which reduction this is */
    bool is_sum = op == NB_OP_SUM;
    bool is_arg = op == NB_OP_ARGMAX || op == NB_OP_ARGMIN;
    out->shape.ndim = 0;
    for (int d = 0; d < nd; d++) {
        if (mask & ((int64_t)1 << d)) {
            if (t->shape.dim[d] == 0 && !is_sum) {
                char dd[200];
                nb__error("nb_%s: cannot reduce over axis %d of %s: it is empty", fn, d, DESC(t, dd));
                return -1;
            }
            if (keep) out->shape.dim[out->shape.ndim++] = 1;
        } else out->shape.dim[out->shape.ndim++] = t->shape.dim[d];
    }
    if (nd == 0 && t->numel == 0) { nb__error("nb_%s: empty input", fn); return -1; }
    if (is_arg) out->dtype = NB_I64;
    else if (is_sum && !nb__is_float(t->dtype)) out->dtype = NB_I64;
    else out->dtype = t->dtype;
    return 0;
}

static int infer_softmax(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    int a = nb__axis((int)args->i[0], in[0]->shape.ndim);
    if (a < 0) {
        char d[200];
        nb__error("nb_%s: axis %lld is out of range for %s", fn, (long long)args->i[0], DESC(in[0], d));
        return -1;
    }
    args->i[0] = a;
    out->shape = in[0]->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

static int infer_matmul(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin; (void)args;
    const nb_tensor *a = in[0], *b = in[1];
    char da[200], db[200];
    if (a->shape.ndim < 2 || b->shape.ndim < 2) {
        nb__error("nb_%s: both inputs need at least 2 dimensions here, got %s and %s", fn, DESC(a, da), DESC(b, db));
        return -1;
    }
    int na = a->shape.ndim, nbd = b->shape.ndim;
    if (a->shape.dim[na - 1] != b->shape.dim[nbd - 2]) {
        nb__error("nb_%s: inner dimensions differ: a is %s, b is %s", fn, DESC(a, da), DESC(b, db));
        return -1;
    }
    nb_shape ba = a->shape, bb = b->shape, batch;
    ba.ndim -= 2;
    bb.ndim -= 2;
    if (nb__broadcast_shapes(fn, &ba, &bb, &batch) < 0) return -1;
    out->shape = batch;
    out->shape.dim[out->shape.ndim++] = a->shape.dim[na - 2];
    out->shape.dim[out->shape.ndim++] = b->shape.dim[nbd - 1];
    out->dtype = a->dtype;
    return 0;
}

/* autocast's product: bf16 operands (nb_matmul casts them), an f32 result */
static int infer_matmul_bf16(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    if (in[0]->dtype != NB_BF16 || in[1]->dtype != NB_BF16) {
        char da[200], db[200];
        nb__error("nb_%s: both operands must be bf16, got %s and %s", fn, DESC(in[0], da), DESC(in[1], db));
        return -1;
    }
    if (infer_matmul(op, in, nin, args, out) < 0) return -1;
    out->dtype = NB_F32;
    return 0;
}

static int check_index(const char *fn, const nb_tensor *idx) {
    if (idx->dtype != NB_I64 && idx->dtype != NB_I32) {
        char d[200];
        nb__error("nb_%s: indices must be i64 or i32, got %s", fn, DESC(idx, d));
        return -1;
    }
    return 0;
}

/* index_select(t, idx) along i[0]: t's shape with that axis replaced by idx's length. */
static int infer_index_select(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    const nb_tensor *t = in[0], *idx = in[1];
    char d[200], di[200];
    if (check_index(fn, idx) < 0) return -1;
    if (idx->shape.ndim > 1) {
        nb__error("nb_%s: indices must be 1-D, got %s", fn, DESC(idx, di));
        return -1;
    }
    int a = nb__axis((int)args->i[0], t->shape.ndim);
    if (a < 0) {
        nb__error("nb_%s: axis %lld is out of range for %s", fn, (long long)args->i[0], DESC(t, d));
        return -1;
    }
    args->i[0] = a;
    out->shape = t->shape;
    if (t->shape.ndim == 0) out->shape = idx->shape;
    else out->shape.dim[a] = idx->numel;
    out->dtype = t->dtype;
    return 0;
}

/* index_add(src, idx) into zeros of args->shape along i[0] (the backward of index_select). */
static int infer_index_add(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    if (check_index(fn, in[1]) < 0) return -1;
    nb_shape expect = args->shape;
    int a = (int)args->i[0];
    if (expect.ndim > 0) expect.dim[a] = in[1]->numel;
    if (!nb__shape_eq(&expect, &in[0]->shape)) {
        char d[200], sh[160];
        nb__error("nb_%s: source %s does not match %s", fn, DESC(in[0], d), nb_shape_str(expect, sh, sizeof sh));
        return -1;
    }
    out->shape = args->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

static int infer_gather(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    const nb_tensor *t = in[0], *idx = in[1];
    char d[200], di[200];
    if (check_index(fn, idx) < 0) return -1;
    int nd = t->shape.ndim;
    int a = nb__axis((int)args->i[0], nd);
    if (a < 0) {
        nb__error("nb_%s: axis %lld is out of range for %s", fn, (long long)args->i[0], DESC(t, d));
        return -1;
    }
    if (idx->shape.ndim != nd) {
        nb__error("nb_%s: indices %s must have as many dimensions as the input %s", fn, DESC(idx, di), DESC(t, d));
        return -1;
    }
    for (int i = 0; i < nd; i++)
        if (i != a && idx->shape.dim[i] > t->shape.dim[i]) {
            nb__error("nb_%s: indices %s are larger than the input %s at axis %d", fn, DESC(idx, di), DESC(t, d), i);
            return -1;
        }
    args->i[0] = a;
    out->shape = idx->shape;
    out->dtype = t->dtype;
    return 0;
}

static int infer_scatter_add(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    if (check_index(fn, in[1]) < 0) return -1;
    if (!nb__shape_eq(&in[0]->shape, &in[1]->shape)) {
        char d[200], di[200];
        nb__error("nb_%s: source %s and indices %s differ in shape", fn, DESC(in[0], d), DESC(in[1], di));
        return -1;
    }
    out->shape = args->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

/* The n index tensors of index / index_put over x's leading n axes: each i64 or i32, broadcast
   together to *b; *indexed is b followed by x's remaining axes (what x[indices] has). */
static int infer_indexed(const char *fn, const nb_tensor *x, nb_tensor *const *idx, int n, nb_shape *b, nb_shape *indexed) {
    char d[200];
    if (n < 1) {
        nb__error("nb_%s: needs at least one index tensor", fn);
        return -1;
    }
    if (n > x->shape.ndim) {
        nb__error("nb_%s: %d index tensors for %s, which has %d axes", fn, n, DESC(x, d), x->shape.ndim);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        if (check_index(fn, idx[k]) < 0) return -1;
        nb_shape both;
        if (k == 0) both = idx[0]->shape;
        else if (nb__broadcast_shapes(fn, b, &idx[k]->shape, &both) < 0) return -1;
        *b = both;
    }
    int nd = b->ndim + x->shape.ndim - n;
    if (nd > NB_MAX_DIMS) {
        char sb[160];
        nb__error("nb_%s: indices of shape %s over %d axes of %s give %d axes, more than %d", fn, nb_shape_str(*b, sb, sizeof sb),
                  n, DESC(x, d), nd, NB_MAX_DIMS);
        return -1;
    }
    *indexed = *b;
    for (int a = n; a < x->shape.ndim; a++) indexed->dim[indexed->ndim++] = x->shape.dim[a];
    if (!nb__shape_check(NULL, indexed, nb__esize(x->dtype), NULL)) { /* broadcast (expanded) indices can multiply up */
        char name[48];
        snprintf(name, sizeof name, "nb_%s: the indexed shape", fn);
        nb__shape_check(name, indexed, nb__esize(x->dtype), NULL);
        return -1;
    }
    return 0;
}

/* index(x, i0, ..., in-1): x[i0, ..., in-1], advanced indexing on the leading axes. */
static int infer_index(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)args;
    nb_shape b;
    if (nin < 2) {
        nb__error("nb_%s: needs x and at least one index tensor", fn);
        return -1;
    }
    if (infer_indexed(fn, in[0], in + 1, nin - 1, &b, &out->shape) < 0) return -1;
    out->dtype = in[0]->dtype;
    return 0;
}

/* index_put(x, values, i0, ..., in-1): x with x[i0, ...] = values (i[0]: accumulate, +=). */
static int infer_index_put(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    if (nin < 3) {
        nb__error("nb_%s: needs x, values and at least one index tensor", fn);
        return -1;
    }
    const nb_tensor *x = in[0], *v = in[1];
    char dx[200], dv[200], sh[160];
    nb_shape b, indexed;
    if (infer_indexed(fn, x, in + 2, nin - 2, &b, &indexed) < 0) return -1;
    if (v->dtype != x->dtype) {
        nb__error("nb_%s: values %s must have the dtype of x %s", fn, DESC(v, dv), DESC(x, dx));
        return -1;
    }
    bool fits = v->shape.ndim <= indexed.ndim;
    for (int a = 0; fits && a < v->shape.ndim; a++) {
        int64_t want = indexed.dim[indexed.ndim - v->shape.ndim + a];
        fits = v->shape.dim[a] == 1 || v->shape.dim[a] == want;
    }
    if (!fits) {
        nb__error("nb_%s: values %s cannot be broadcast to the indexed shape %s of %s", fn, DESC(v, dv),
                  nb_shape_str(indexed, sh, sizeof sh), DESC(x, dx));
        return -1;
    }
    args->i[0] = args->i[0] != 0;
    out->shape = x->shape;
    out->dtype = x->dtype;
    return 0;
}

static int infer_cat(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    char d0[200], d[200];
    if (nin < 1) {
        nb__error("nb_%s: needs at least one tensor", fn);
        return -1;
    }
    const nb_tensor *t0 = in[0];
    int nd = t0->shape.ndim;
    int a = nb__axis((int)args->i[0], nd);
    if (a < 0 || nd == 0) {
        nb__error("nb_%s: axis %lld is out of range for %s", fn, (long long)args->i[0], DESC(t0, d0));
        return -1;
    }
    args->i[0] = a;
    out->shape = t0->shape;
    out->shape.dim[a] = 0;
    for (int k = 0; k < nin; k++) {
        const nb_tensor *t = in[k];
        bool ok = t->shape.ndim == nd;
        for (int i = 0; ok && i < nd; i++) ok = i == a || t->shape.dim[i] == t0->shape.dim[i];
        if (!ok) {
            nb__error("nb_%s: tensor %d is %s but tensor 0 is %s (all axes but %d must match)", fn, k, DESC(t, d), DESC(t0, d0), a);
            return -1;
        }
        out->shape.dim[a] += t->shape.dim[a];
    }
    out->dtype = t0->dtype;
    return 0;
}

/* assign(dst, src): src broadcast and converted into dst's elements, in place. */
static int infer_assign(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin; (void)args;
    nb_tensor *dst = in[0], *src = in[1];
    char dd[200], ds[200];
    nb_shape b;
    if (nb__broadcast_shapes(fn, &dst->shape, &src->shape, &b) < 0) return -1;
    if (!nb__shape_eq(&b, &dst->shape)) {
        nb__error("nb_%s: source %s does not broadcast to destination %s", fn, DESC(src, ds), DESC(dst, dd));
        return -1;
    }
    if (dst->requires_grad && nb__grad_enabled()) {
        nb__error("nb_%s: destination %s requires grad; update it with grad disabled (nb_set_grad_enabled(false))", fn,
                  DESC(dst, dd));
        return -1;
    }
    for (int d = 0; d < dst->shape.ndim; d++)
        if (dst->stride[d] == 0 && dst->shape.dim[d] > 1) {
            nb__error("nb_%s: destination %s is an expanded view whose elements overlap", fn, DESC(dst, dd));
            return -1;
        }
    out->shape = dst->shape;
    out->dtype = dst->dtype;
    return 0;
}

/* ---- convolution and pooling over [N, C, H, W] ----
   conv args: i[0..1] stride, i[2..3] padding, i[4..5] dilation, i[6] groups; the backward ops
   carry the shape of what they produce (x for the input gradient, w for the weight's).
   pool args: i[0..1] kernel, i[2..3] stride, i[4..5] padding; adaptive: i[0..1] output size.
   Their backward ops carry the input's shape. */

/* The output shape of a convolution of x by w, or an error naming fn and both shapes. */
static int conv_out_shape(const char *fn, const nb_shape *x, nb_dtype xd, const nb_shape *w, nb_dtype wd,
                          const nb_op_args *a, nb_shape *out) {
    char sx[160], sw[160];
    nb_shape_str(*x, sx, sizeof sx);
    nb_shape_str(*w, sw, sizeof sw);
    if (x->ndim != 4 || w->ndim != 4) {
        nb__error("nb_%s: expected input [N, C, H, W] and weight [O, C/groups, kh, kw], got input %s %s and weight %s %s",
                  fn, sx, nb_dtype_name(xd), sw, nb_dtype_name(wd));
        return -1;
    }
    if (xd != wd) {
        nb__error("nb_%s: input %s %s and weight %s %s must have one dtype", fn, sx, nb_dtype_name(xd), sw, nb_dtype_name(wd));
        return -1;
    }
    for (int k = 0; k < 2; k++)
        if (a->i[k] < 1 || a->i[2 + k] < 0 || a->i[4 + k] < 1) {
            nb__error("nb_%s: stride (%lld, %lld) and dilation (%lld, %lld) must be positive and padding (%lld, %lld) "
                      "non-negative", fn, (long long)a->i[0], (long long)a->i[1], (long long)a->i[4], (long long)a->i[5],
                      (long long)a->i[2], (long long)a->i[3]);
            return -1;
        }
    int64_t groups = a->i[6];
    if (groups < 1 || w->dim[0] % groups != 0) {
        nb__error("nb_%s: groups %lld must be positive and divide the %lld output channels of weight %s", fn,
                  (long long)groups, (long long)w->dim[0], sw);
        return -1;
    }
    if (x->dim[1] != w->dim[1] * groups) {
        nb__error("nb_%s: input %s has %lld channels, but weight %s with groups %lld expects %lld", fn, sx,
                  (long long)x->dim[1], sw, (long long)groups, (long long)(w->dim[1] * groups));
        return -1;
    }
    out->ndim = 4;
    out->dim[0] = x->dim[0];
    out->dim[1] = w->dim[0];
    for (int k = 0; k < 2; k++) {
        int64_t eff = a->i[4 + k] * (w->dim[2 + k] - 1) + 1, padded = x->dim[2 + k] + 2 * a->i[2 + k];
        if (w->dim[2 + k] < 1 || eff > padded) {
            nb__error("nb_%s: kernel %lldx%lld (dilated %lld) is larger than the padded input (%lld) of input %s",
                      fn, (long long)w->dim[2], (long long)w->dim[3], (long long)eff, (long long)padded, sx);
            return -1;
        }
        out->dim[2 + k] = (padded - eff) / a->i[k] + 1;
    }
    return 0;
}

static int infer_conv2d(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    char d[200], db[200];
    if (nin != 2 && nin != 3) {
        nb__error("nb_%s: expected 2 or 3 inputs (x, w[, b]), got %d", fn, nin);
        return -1;
    }
    if (conv_out_shape(fn, &in[0]->shape, in[0]->dtype, &in[1]->shape, in[1]->dtype, args, &out->shape) < 0) return -1;
    if (nin == 3) {
        const nb_tensor *b = in[2];
        if (b->shape.ndim != 1 || b->shape.dim[0] != in[1]->shape.dim[0] || b->dtype != in[0]->dtype) {
            nb__error("nb_%s: bias %s must be [%lld] %s to match weight %s", fn, DESC(b, db), (long long)in[1]->shape.dim[0],
                      nb_dtype_name(in[0]->dtype), DESC(in[1], d));
            return -1;
        }
    }
    out->dtype = in[0]->dtype;
    return 0;
}

/* conv2d_backward_input(g, w) -> [x shape]; conv2d_backward_weight(g, x) -> [w shape]. */
static int infer_conv2d_backward(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    bool wants_input = op == NB_OP_CONV2D_BACKWARD_INPUT;
    const nb_tensor *g = in[0], *other = in[1];
    nb_shape xs = wants_input ? args->shape : other->shape, ws = wants_input ? other->shape : args->shape;
    nb_shape ys;
    if (conv_out_shape(fn, &xs, other->dtype, &ws, other->dtype, args, &ys) < 0) return -1;
    if (!nb__shape_eq(&ys, &g->shape) || g->dtype != other->dtype) {
        char d[200], sh[160];
        nb__error("nb_%s: gradient %s does not match the convolution's output %s %s", fn, DESC(g, d),
                  nb_shape_str(ys, sh, sizeof sh), nb_dtype_name(other->dtype));
        return -1;
    }
    out->shape = args->shape;
    out->dtype = g->dtype;
    return 0;
}

/* The pooled shape of x, or an error naming fn. */
static int pool_out_shape(const char *fn, const nb_shape *x, const nb_op_args *a, nb_shape *out) {
    char sx[160];
    nb_shape_str(*x, sx, sizeof sx);
    if (x->ndim != 4) {
        nb__error("nb_%s: expected input [N, C, H, W], got %s", fn, sx);
        return -1;
    }
    *out = *x;
    if (strstr(fn, "adaptive")) {
        for (int k = 0; k < 2; k++)
            if (a->i[k] < 1 || x->dim[2 + k] < 1) {
                nb__error("nb_%s: output size (%lld, %lld) must be positive and input %s non-empty", fn, (long long)a->i[0],
                          (long long)a->i[1], sx);
                return -1;
            }
        out->dim[2] = a->i[0];
        out->dim[3] = a->i[1];
        return 0;
    }
    for (int k = 0; k < 2; k++) {
        int64_t kk = a->i[k], s = a->i[2 + k], p = a->i[4 + k], d = a->i[6 + k] ? a->i[6 + k] : 1;
        int64_t span = kk >= 1 && d >= 1 && kk <= INT32_MAX && d <= INT32_MAX ? d * (kk - 1) + 1 : 0;
        if (kk < 1 || s < 1 || d < 1 || p < 0 || span < 1 || p > kk / 2) { /* torch's bound: half the kernel */
            nb__error("nb_%s: kernel (%lld, %lld), stride (%lld, %lld) and dilation (%lld, %lld) must be positive and padding "
                      "(%lld, %lld) at most half the kernel", fn, (long long)a->i[0], (long long)a->i[1],
                      (long long)a->i[2], (long long)a->i[3], (long long)(a->i[6] ? a->i[6] : 1),
                      (long long)(a->i[7] ? a->i[7] : 1), (long long)a->i[4], (long long)a->i[5]);
            return -1;
        }
        int64_t padded = x->dim[2 + k] + 2 * p;
        if (span > padded) {
            nb__error("nb_%s: kernel %lldx%lld (dilation %lld, %lld) is larger than the padded input (%lld) of input %s", fn,
                      (long long)a->i[0], (long long)a->i[1], (long long)(a->i[6] ? a->i[6] : 1),
                      (long long)(a->i[7] ? a->i[7] : 1), (long long)padded, sx);
            return -1;
        }
        out->dim[2 + k] = nb__pool_out_size(x->dim[2 + k], kk, s, p, d, a->i[8] != 0);
    }
    return 0;
}

static int infer_pool2d(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)nin;
    if (pool_out_shape(fn, &in[0]->shape, args, &out->shape) < 0) return -1;
    out->dtype = op == NB_OP_MAX_POOL2D_INDICES ? NB_I64 : in[0]->dtype;
    return 0;
}

/* *_pool2d_backward(g[, x]) -> [x shape] */
static int infer_pool2d_backward(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    nb_shape ys;
    char d[200], sh[160];
    if (pool_out_shape(fn, &args->shape, args, &ys) < 0) return -1;
    if (!nb__shape_eq(&ys, &in[0]->shape)) {
        nb__error("nb_%s: gradient %s does not match the pooled shape %s", fn, DESC(in[0], d), nb_shape_str(ys, sh, sizeof sh));
        return -1;
    }
    if (nin == 2 && (!nb__shape_eq(&in[1]->shape, &args->shape) || in[1]->dtype != in[0]->dtype)) {
        nb__error("nb_%s: input %s does not match shape %s %s", fn, DESC(in[1], d), nb_shape_str(args->shape, sh, sizeof sh),
                  nb_dtype_name(in[0]->dtype));
        return -1;
    }
    out->shape = args->shape;
    out->dtype = in[0]->dtype;
    return 0;
}

#include "backward.inc"

const nb_op_def nb__ops[NB_OP_COUNT] = {
#define NB_OP(ID, nm, n, inf, bwd, fl, dt, fuse, onnx) [NB_OP_##ID] = { #nm, n, inf, bwd, fl, dt, NB_FUSE_##fuse },
#include "ops.def"
#undef NB_OP
};
