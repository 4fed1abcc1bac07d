/* CUDA kernels that move elements by index: index_select, gather, index (reads), and index_add,
   scatter_add, index_put (writes, which may meet at one place). A write is never an atomic: the
   host sorts the sources of each destination into a list, in the cpu's order (the C side,
   ops_index.c), and one thread per destination element walks its list, so repeated indices sum
   in the same order on every run and the last write wins as on the cpu. */
#include "k_common.cuh"

/* a + b for the element type dtype held in the bits of T: floats add in their own precision
   (f16 and bf16 in f32, rounded back, as the cpu's index_put), integers wrap, bools or. */
template <typename T> __device__ __forceinline__ T add_elem(int dtype, T a, T b) {
    if constexpr (sizeof(T) == 8) {
        if (dtype == NB_F64) return (T)__double_as_longlong(__longlong_as_double((long long)a) + __longlong_as_double((long long)b));
        return a + b; /* i64: unsigned, wraps */
    } else if constexpr (sizeof(T) == 4) {
        if (dtype == NB_F32) return (T)__float_as_uint(__uint_as_float(a) + __uint_as_float(b));
        return a + b; /* i32 */
    } else if constexpr (sizeof(T) == 2) {
        if (dtype == NB_F16) return nb__float_to_half(nb__half_to_float(a) + nb__half_to_float(b));
        return nb__f32_to_bf16(nb__bf16_to_f32(a) + nb__bf16_to_f32(b));
    } else {
        if (dtype == NB_BOOL) return (T)(a | b);
        return (T)(a + b); /* u8, and i8's same bits */
    }
}

/* An index element (i64 or i32) at element offset off. */
static __device__ __forceinline__ int64_t index_value(const nb__k_view &idx, int64_t off) {
    return idx.dtype == NB_I64 ? ((const int64_t *)idx.data)[off] : ((const int32_t *)idx.data)[off];
}

/* ---------- index_select: out[..., j, ...] = t[..., idx[j], ...] ---------- */
template <typename T> __global__ void index_select_kernel(nb__k_view out, nb__k_view t, nb__k_view idx, int axis) {
    NBC_GRID_LOOP(i, out.numel) {
        int64_t r = i, src = 0;
        for (int d = out.ndim - 1; d >= 0; d--) {
            int64_t c = r % out.shape[d];
            r /= out.shape[d];
            if (t.ndim == 0) continue; /* a 0-d input: every index is 0 */
            src += (d == axis ? index_value(idx, nb__k_offset(idx, c)) : c) * t.stride[d];
        }
        ((T *)out.data)[nb__k_offset(out, i)] = ((const T *)t.data)[src];
    }
}

extern "C" int nb__k_index_select(const nb__k_view *out, const nb__k_view *t, const nb__k_view *idx, int axis) {
    if (out->numel == 0) return 0;
    return nb__k_by_size(t->dtype, [&](auto z) {
        index_select_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*out, *t, *idx, axis);
        return nb__k_launched();
    });
}

/* ---------- gather: out[e] = t[e's position with idx[e] on axis] ---------- */
template <typename T> __global__ void gather_kernel(nb__k_view out, nb__k_view t, nb__k_view idx, int axis) {
    NBC_GRID_LOOP(e, out.numel) {
        int64_t v = index_value(idx, nb__k_offset(idx, e)), r = e, src = 0;
        for (int d = idx.ndim - 1; d >= 0; d--) {
            int64_t c = r % idx.shape[d];
            r /= idx.shape[d];
            src += (d == axis ? v : c) * t.stride[d];
        }
        ((T *)out.data)[nb__k_offset(out, e)] = ((const T *)t.data)[src];
    }
}

extern "C" int nb__k_gather(const nb__k_view *out, const nb__k_view *t, const nb__k_view *idx, int axis) {
    if (out->numel == 0) return 0;
    return nb__k_by_size(t->dtype, [&](auto z) {
        gather_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*out, *t, *idx, axis);
        return nb__k_launched();
    });
}

/* ---------- index: out[e, tail...] = x[offs[e] + tail...] ---------- */
template <typename T> __global__ void index_kernel(nb__k_view out, nb__k_view tail, const int64_t *offs, int64_t tailn) {
    NBC_GRID_LOOP(i, out.numel) {
        int64_t e = i / tailn, k = i % tailn;
        ((T *)out.data)[nb__k_offset(out, i)] = ((const T *)tail.data)[offs[e] + nb__k_offset(tail, k)];
    }
}

extern "C" int nb__k_index(const nb__k_view *out, const nb__k_view *tail, const int64_t *offs) {
    if (out->numel == 0 || tail->numel == 0) return 0;
    return nb__k_by_size(out->dtype, [&](auto z) {
        index_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*out, *tail, offs, tail->numel);
        return nb__k_launched();
    });
}

/* ---------- index_add: out[..., i, ...] = sum over j with idx[j] == i of src[..., j, ...] ---------- */
/* start[i] .. start[i + 1] delimit the positions j (in list, ascending) that idx sends to i. */
template <typename T>
__global__ void index_add_kernel(nb__k_view out, nb__k_view src, int axis, const int64_t *start, const int64_t *list) {
    NBC_GRID_LOOP(i, out.numel) {
        int64_t r = i, base = 0, at = 0;
        for (int d = out.ndim - 1; d >= 0; d--) {
            int64_t c = r % out.shape[d];
            r /= out.shape[d];
            if (d == axis) at = c;
            else base += c * src.stride[d];
        }
        T acc = 0;
        for (int64_t k = start[at]; k < start[at + 1]; k++)
            acc = add_elem<T>(out.dtype, acc, ((const T *)src.data)[base + list[k] * src.stride[axis]]);
        ((T *)out.data)[nb__k_offset(out, i)] = acc;
    }
}

extern "C" int nb__k_index_add(const nb__k_view *out, const nb__k_view *src, int axis, const int64_t *start, const int64_t *list) {
    if (out->numel == 0) return 0;
    return nb__k_by_size(out->dtype, [&](auto z) {
        index_add_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*out, *src, axis, start, list);
        return nb__k_launched();
    });
}

/* ---------- scatter_add: out[o] = sum of src[e] over the e (ascending) that land on o ---------- */
template <typename T> __global__ void scatter_add_kernel(nb__k_view out, nb__k_view src, const int64_t *start, const int64_t *list) {
    NBC_GRID_LOOP(o, out.numel) {
        T acc = 0;
        for (int64_t k = start[o]; k < start[o + 1]; k++)
            acc = add_elem<T>(out.dtype, acc, ((const T *)src.data)[nb__k_offset(src, list[k])]);
        ((T *)out.data)[nb__k_offset(out, o)] = acc;
    }
}

extern "C" int nb__k_scatter_add(const nb__k_view *out, const nb__k_view *src, const int64_t *start, const int64_t *list) {
    if (out->numel == 0) return 0;
    return nb__k_by_size(out->dtype, [&](auto z) {
        scatter_add_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*out, *src, start, list);
        return nb__k_launched();
    });
}

/* ---------- index_put: out = x, then row r of out's leading axes takes the values of the
   index positions e (ascending) that name it: the last one, or x's plus all of them ---------- */
template <typename T>
__global__ void index_put_kernel(nb__k_view out, nb__k_view x, nb__k_view values, const int64_t *start, const int64_t *list,
                                 int64_t tailn, bool accumulate) {
    NBC_GRID_LOOP(o, out.numel) {
        int64_t r = o / tailn, k = o % tailn;
        T acc = ((const T *)x.data)[nb__k_offset_as(out, x, o)];
        int64_t lo = start[r], hi = start[r + 1];
        if (!accumulate && hi > lo) lo = hi - 1; /* the last write wins */
        for (int64_t q = lo; q < hi; q++) {
            T v = ((const T *)values.data)[nb__k_offset(values, list[q] * tailn + k)];
            acc = accumulate ? add_elem<T>(out.dtype, acc, v) : v;
        }
        ((T *)out.data)[nb__k_offset(out, o)] = acc;
    }
}

extern "C" int nb__k_index_put(const nb__k_view *out, const nb__k_view *x, const nb__k_view *values, const int64_t *start,
                             const int64_t *list, int64_t tailn, int accumulate) {
    if (out->numel == 0 || tailn == 0) return 0;
    return nb__k_by_size(out->dtype, [&](auto z) {
        index_put_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*out, *x, *values, start, list,
                                                                                           tailn, accumulate != 0);
        return nb__k_launched();
    });
}
