/* CPU kernels that move elements by index: index_select / index_add, gather / scatter_add,
   cat and the backward of slice. Out-of-range indices are errors naming the index. */
#include "iter.h"
#include <string.h>

nb_inner_fn nb__cpu_copy_fn(size_t esize);

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
