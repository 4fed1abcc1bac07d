/* CPU kernels that move elements by index: index_select / index_add, gather / scatter_add,
   index / index_put, cat and the backward of slice. Out-of-range indices are errors naming the index. */
#include "iter.h"
#include <stdlib.h>
#include <string.h>

static int64_t index_at(const nb_tensor *idx, int64_t i) {
    const char *p = nb__data(idx);
    int64_t off = 0, r = i;
    for (int d = idx->shape.ndim - 1; d >= 0; d--) {
        off += (r % idx->shape.dim[d]) * idx->stride[d];
        r /= idx->shape.dim[d];
    }
    return idx->dtype == NB_I64 ? ((const int64_t *)p)[off] : ((const int32_t *)p)[off];
}

static int bad_index(const char *fn, int64_t v, int axis, int64_t size) {
    nb__error("nb_%s: index %lld is out of range for axis %d of size %lld", fn, (long long)v, axis, (long long)size);
    return -1;
}

/* Copies src (any strides) into the region of dst starting at element offset off with strides. */
static void copy_into(nb_tensor *dst, int64_t off, const int64_t *stride, nb_tensor *src) {
    nb_iter it;
    size_t es = nb_dtype_size(dst->dtype);
    nb__iter_init_raw(&it, &src->shape, (char *)nb__data(dst) + off * (int64_t)es, stride, es, &src, 1);
    nb__iter_run(&it, nb__cpu_copy_fn(es), NULL);
}

/* The (outer, size, inner) split of a shape around axis. */
static void split_axis(const nb_shape *s, int axis, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= s->dim[d];
    for (int d = axis + 1; d < s->ndim; d++) *inner *= s->dim[d];
}

int nb__cpu_index_select(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *t = in[0], *idx = in[1];
    int axis = (int)args->i[0];
    int64_t size = t->shape.ndim ? t->shape.dim[axis] : 1, nidx = idx->numel;
    for (int64_t j = 0; j < nidx; j++) {
        int64_t v = index_at(idx, j);
        if (v < 0 || v >= size) return bad_index("index_select", v, axis, size);
    }
    size_t es = nb_dtype_size(t->dtype);
    if (t->shape.ndim == 0) { /* every index is 0 */
        for (int64_t j = 0; j < nidx; j++) memcpy((char *)nb__data(out) + j * (int64_t)es, nb__data(t), es);
        return 0;
    }
    if (nb_is_contiguous(t)) { /* rows of contiguous memory: plain copies (the embedding case) */
        int64_t outer, inner;
        split_axis(&t->shape, axis, &outer, &inner);
        const char *src = nb__data(t);
        char *o = nb__data(out);
        size_t row = (size_t)inner * es;
        for (int64_t q = 0; q < outer; q++)
            for (int64_t j = 0; j < nidx; j++)
                memcpy(o + (q * nidx + j) * (int64_t)row, src + (q * size + index_at(idx, j)) * (int64_t)row, row);
        return 0;
    }
    /* each selected slab: a view of t at that index, copied into out's slab */
    nb_shape slab = t->shape;
    slab.dim[axis] = 1;
    for (int64_t j = 0; j < nidx; j++) {
        int64_t v = index_at(idx, j);
        nb_tensor src = *t;
        src.shape = slab;
        src.offset = t->offset + v * t->stride[axis];
        nb_tensor *srcp = &src;
        copy_into(out, j * out->stride[axis], out->stride, srcp);
    }
    return 0;
}

int nb__cpu_index_add(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *src = in[0], *idx = in[1];
    int axis = (int)args->i[0];
    memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
    int64_t size = out->shape.ndim ? out->shape.dim[axis] : 1;
    int64_t outer, inner;
    nb_shape ss = src->shape;
    if (out->shape.ndim == 0) { outer = inner = 1; }
    else split_axis(&ss, axis, &outer, &inner);
    int64_t nidx = idx->numel;
    for (int64_t j = 0; j < nidx; j++) {
        int64_t v = index_at(idx, j);
        if (v < 0 || v >= size) return bad_index("index_add", v, axis, size);
    }
    /* src may be strided: walk it with a counter */
    int nd = src->shape.ndim;
    int64_t cidx[NB_MAX_DIMS] = { 0 };
    char *o = nb__data(out);
    const char *s = nb__data(src);
    for (int64_t e = 0; e < src->numel; e++) {
        int64_t soff = 0, ooff = 0;
        for (int d = 0; d < nd; d++) {
            soff += cidx[d] * src->stride[d];
            int64_t c = d == axis ? index_at(idx, cidx[d]) : cidx[d];
            ooff += c * out->stride[d];
        }
        if (nd == 0) ooff = 0;
        switch (out->dtype) {
        case NB_F32: ((float *)o)[ooff] += ((const float *)s)[soff]; break;
        case NB_F64: ((double *)o)[ooff] += ((const double *)s)[soff]; break;
        case NB_I64: ((int64_t *)o)[ooff] = (int64_t)((uint64_t)((int64_t *)o)[ooff] + (uint64_t)((const int64_t *)s)[soff]); break;
        case NB_I32: ((int32_t *)o)[ooff] = (int32_t)((uint32_t)((int32_t *)o)[ooff] + (uint32_t)((const int32_t *)s)[soff]); break;
        default: ((uint8_t *)o)[ooff] += ((const uint8_t *)s)[soff]; break; /* u8, and i8's same bits */
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++cidx[d] < src->shape.dim[d]) break;
            cidx[d] = 0;
        }
    }
    (void)outer; (void)inner;
    return 0;
}

int nb__cpu_gather(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *t = in[0], *idx = in[1];
    int axis = (int)args->i[0], nd = t->shape.ndim;
    int64_t size = nd ? t->shape.dim[axis] : 1;
    size_t es = nb_dtype_size(t->dtype);
    int64_t cidx[NB_MAX_DIMS] = { 0 };
    const char *src = nb__data(t);
    char *o = nb__data(out);
    for (int64_t e = 0; e < idx->numel; e++) {
        int64_t v = index_at(idx, e);
        if (v < 0 || v >= size) return bad_index("gather", v, axis, size);
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += (d == axis ? v : cidx[d]) * t->stride[d];
        memcpy(o + e * (int64_t)es, src + off * (int64_t)es, es);
        for (int d = nd - 1; d >= 0; d--) {
            if (++cidx[d] < idx->shape.dim[d]) break;
            cidx[d] = 0;
        }
    }
    return 0;
}

int nb__cpu_scatter_add(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *src = in[0], *idx = in[1];
    int axis = (int)args->i[0], nd = out->shape.ndim;
    int64_t size = nd ? out->shape.dim[axis] : 1;
    memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
    int64_t cidx[NB_MAX_DIMS] = { 0 };
    const char *s = nb__data(src);
    char *o = nb__data(out);
    for (int64_t e = 0; e < src->numel; e++) {
        int64_t v = index_at(idx, e);
        if (v < 0 || v >= size) return bad_index("scatter_add", v, axis, size);
        int64_t soff = 0, ooff = 0;
        for (int d = 0; d < nd; d++) {
            soff += cidx[d] * src->stride[d];
            ooff += (d == axis ? v : cidx[d]) * out->stride[d];
        }
        switch (out->dtype) {
        case NB_F32: ((float *)o)[ooff] += ((const float *)s)[soff]; break;
        case NB_F64: ((double *)o)[ooff] += ((const double *)s)[soff]; break;
        case NB_I64: ((int64_t *)o)[ooff] = (int64_t)((uint64_t)((int64_t *)o)[ooff] + (uint64_t)((const int64_t *)s)[soff]); break;
        case NB_I32: ((int32_t *)o)[ooff] = (int32_t)((uint32_t)((int32_t *)o)[ooff] + (uint32_t)((const int32_t *)s)[soff]); break;
        default: ((uint8_t *)o)[ooff] += ((const uint8_t *)s)[soff]; break; /* u8, and i8's same bits */
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++cidx[d] < src->shape.dim[d]) break;
            cidx[d] = 0;
        }
    }
    return 0;
}

int nb__cpu_cat(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    int axis = (int)args->i[0];
    int64_t at = 0;
    for (int k = 0; k < nin; k++) {
        if (in[k]->numel > 0) copy_into(out, at * out->stride[axis], out->stride, in[k]);
        at += in[k]->shape.dim[axis];
    }
    return 0;
}

int nb__cpu_slice_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
    int axis = (int)args->i[0];
    if (in[0]->numel == 0) return 0;
    int64_t stride[NB_MAX_DIMS];
    memcpy(stride, out->stride, sizeof stride);
    stride[axis] *= args->i[3];
    copy_into(out, args->i[1] * out->stride[axis], stride, in[0]);
    return 0;
}

/* ---------- index / index_put: advanced indexing on the leading axes (offsets: prep.c) ---------- */
/* The trailing axes of t from axis `from` on, as a view header at element offset `at`: the
   sub-tensor one index position selects. */
static nb_tensor trailing_view(const nb_tensor *t, int from, const int64_t *stride, int64_t at) {
    nb_tensor v = *t;
    v.shape.ndim = t->shape.ndim - from;
    v.numel = 1;
    for (int d = 0; d < v.shape.ndim; d++) {
        v.shape.dim[d] = t->shape.dim[from + d];
        v.stride[d] = stride[from + d];
        v.numel *= v.shape.dim[d];
    }
    v.offset = at;
    return v;
}

/* Whether the axes from `from` on are dense and row-major by stride (size-1 axes aside). */
static bool dense_tail(const nb_shape *s, const int64_t *stride, int from) {
    int64_t want = 1;
    for (int d = s->ndim - 1; d >= from; d--) {
        if (s->dim[d] != 1 && stride[d] != want) return false;
        want *= s->dim[d];
    }
    return true;
}

int nb__cpu_index(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)args;
    nb_tensor *x = in[0];
    int n = nin - 1;
    nb_shape b;
    nb__index_shape(in + 1, n, &b);
    int64_t count = nb__shape_numel(&b);
    int64_t *offs = nb__index_offsets("index", &x->shape, x->stride, in + 1, n, &b, count);
    if (!offs) return -1;
    nb_tensor tail = trailing_view(x, n, x->stride, 0);
    size_t es = nb_dtype_size(x->dtype), row = (size_t)tail.numel * es;
    if (row > 0) {
        char *o = nb__data(out);
        if (dense_tail(&x->shape, x->stride, n)) { /* whole rows: one copy each (the embedding case) */
            const char *src = (const char *)nb__data(x);
            for (int64_t e = 0; e < count; e++) memcpy(o + (size_t)e * row, src + offs[e] * (int64_t)es, row);
        } else {
            for (int64_t e = 0; e < count; e++) {
                nb_tensor v = trailing_view(x, n, x->stride, x->offset + offs[e]);
                copy_into(out, e * tail.numel, out->stride + b.ndim, &v);
            }
        }
    }
    free(offs);
    return 0;
}

/* dst[i] += src[i] over src's shape (any strides), in row-major order; dst's element offset
   `at` with strides dstride. Integers wrap, bools or, f16/bf16 add in f32 and round, as torch. */
static void add_into(nb_tensor *dst, int64_t at, const int64_t *dstride, const nb_tensor *src) {
    int nd = src->shape.ndim;
    int64_t c[NB_MAX_DIMS] = { 0 };
    char *o = nb__data(dst);
    const char *s = nb__data(src);
    for (int64_t e = 0; e < src->numel; e++) {
        int64_t so = 0, oo = at;
        for (int d = 0; d < nd; d++) {
            so += c[d] * src->stride[d];
            oo += c[d] * dstride[d];
        }
        switch (dst->dtype) {
        case NB_F32: ((float *)o)[oo] += ((const float *)s)[so]; break;
        case NB_F64: ((double *)o)[oo] += ((const double *)s)[so]; break;
        case NB_I64: ((int64_t *)o)[oo] = (int64_t)((uint64_t)((int64_t *)o)[oo] + (uint64_t)((const int64_t *)s)[so]); break;
        case NB_I32: ((int32_t *)o)[oo] = (int32_t)((uint32_t)((int32_t *)o)[oo] + (uint32_t)((const int32_t *)s)[so]); break;
        case NB_BOOL: ((uint8_t *)o)[oo] = ((uint8_t *)o)[oo] | ((const uint8_t *)s)[so]; break;
        case NB_F16: case NB_BF16:
            nb__store(o, dst->dtype, oo, (float)(nb__load(o, dst->dtype, oo) + nb__load(s, dst->dtype, so)));
            break;
        default: ((uint8_t *)o)[oo] = (uint8_t)(((uint8_t *)o)[oo] + ((const uint8_t *)s)[so]); break; /* u8, i8 */
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++c[d] < src->shape.dim[d]) break;
            c[d] = 0;
        }
    }
}

/* out = x with out[i0, ...] = values (or += with accumulate), the index positions taken in
   row-major order: a repeated index ends with the last value written (or the sum, added in that
   order), the same on every run. */
int nb__cpu_index_put(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    nb_tensor *x = in[0], *v = in[1];
    int n = nin - 2;
    bool accumulate = args->i[0] != 0;
    nb_shape b;
    nb__index_shape(in + 2, n, &b);
    int64_t count = nb__shape_numel(&b);
    int64_t *offs = nb__index_offsets("index_put", &x->shape, out->stride, in + 2, n, &b, count);
    if (!offs) return -1;
    nb__cpu_copy(out, &x, 1, NULL);
    /* values read as broadcast to b + x's trailing axes */
    nb_shape indexed = b;
    for (int d = n; d < x->shape.ndim; d++) indexed.dim[indexed.ndim++] = x->shape.dim[d];
    int64_t vst[NB_MAX_DIMS], c[NB_MAX_DIMS] = { 0 };
    nb__bcast_strides(v, &indexed, vst);
    nb_tensor vb = *v; /* v's header over the indexed shape */
    vb.shape = indexed;
    memcpy(vb.stride, vst, sizeof vst);
    nb_tensor tail = trailing_view(&vb, b.ndim, vst, 0);
    /* out is dense: a values row that is dense too (or one element) goes with one copy */
    bool rows = !accumulate && dense_tail(&indexed, vst, b.ndim);
    size_t es = nb_dtype_size(x->dtype), row = (size_t)tail.numel * es;
    if (tail.numel > 0)
        for (int64_t e = 0; e < count; e++) {
            int64_t at = v->offset;
            for (int d = 0; d < b.ndim; d++) at += c[d] * vst[d];
            nb_tensor src = trailing_view(&vb, b.ndim, vst, at);
            if (rows) memcpy((char *)nb__data(out) + offs[e] * (int64_t)es, nb__data(&src), row);
            else if (accumulate) add_into(out, offs[e], out->stride + n, &src);
            else copy_into(out, offs[e], out->stride + n, &src);
            for (int d = b.ndim - 1; d >= 0; d--) {
                if (++c[d] < b.dim[d]) break;
                c[d] = 0;
            }
        }
    free(offs);
    return 0;
}
