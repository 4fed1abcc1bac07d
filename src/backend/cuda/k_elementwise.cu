/* CUDA kernels of the elementwise ops (binary, comparisons, where, unary math), casts and copies,
   creation (full, arange, rand, randn) and the host/device transfers the C side needs. One thread
   per output element. The math ops' cases are generated from ops.def over the formulas of
   src/backend/formulas.h, which the CPU kernels and the JIT evaluate too. */
#include "k_common.cuh" /* formulas.h with it */
#include <math.h>
#include <type_traits>

/* ---------- binary ops and comparisons: formulas.h's, generated from ops.def ---------- */
/* Every elementwise binary op of ops.def (fuse EW, CHEAP or CMP with two inputs) is a case of
   its formula; a new one needs no line here. */
#define NBC_CASE_NONE(ID, name, nin)
#define NBC_CASE_EW(ID, name, nin) NBC_CASE_##nin(ID, name)
#define NBC_CASE_CHEAP NBC_CASE_EW
#define NBC_CASE_CMP NBC_CASE_EW
#define NBC_CASE_MOVE NBC_CASE_NONE /* copy and cast: the cast kernel below */
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) NBC_CASE_##fuse(ID, name, nin)

template <typename T> __device__ __forceinline__ T binary_op(nb_op_id op, T x, T y) {
    switch (op) {
#define NBC_CASE_1(ID, name)
#define NBC_CASE_2(ID, name) case NB_OP_##ID: return (T)nbf_##name(x, y);
#define NBC_CASE_3(ID, name)
#include "../../ops/ops.def"
#undef NBC_CASE_1
#undef NBC_CASE_2
#undef NBC_CASE_3
    default: return x; /* not reached: the C side passes binary ops only */
    }
}

/* bool with bool, as torch: add is a logical or, mul a logical and; the rest by their formulas */
template <typename T> __device__ __forceinline__ T logical_op(nb_op_id op, T x, T y) {
    if constexpr (std::is_integral<T>::value) {
        if (op == NB_OP_ADD) return (T)(x | y);
        if (op == NB_OP_MUL) return (T)(x & y);
    }
    return binary_op(op, x, y);
}

template <typename T>
__global__ void binary_kernel(nb_op_id op, bool logical, bool compare, nb__k_view out, nb__k_view a, nb__k_view b) {
    const T *pa = (const T *)a.data, *pb = (const T *)b.data;
    NBC_GRID_LOOP(i, out.numel) {
        T x = pa[nb__k_offset_as(out, a, i)], y = pb[nb__k_offset_as(out, b, i)];
        T r = logical ? logical_op(op, x, y) : binary_op(op, x, y);
        if (compare) ((uint8_t *)out.data)[nb__k_offset(out, i)] = (uint8_t)r;
        else ((T *)out.data)[nb__k_offset(out, i)] = r;
    }
}

extern "C" int nb__k_binary(nb_op_id op, const nb__k_view *out, const nb__k_view *a, const nb__k_view *b) {
    if (out->numel == 0) return 0;
    /* comparisons write bools; bool inputs give a bool out, whose bytes are written either way */
    bool logical = a->dtype == NB_BOOL, compare = out->dtype == NB_BOOL;
    nb__k_view o = *out, x = *a, y = *b;
    nb__k_view *ins[] = { &x, &y };
    nb__k_flatten_dense(&o, ins, 2);
    return nb__k_by_num_dtype(a->dtype, [&](auto t) {
        typedef decltype(t) T;
        binary_kernel<T><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(op, logical, compare, o, x, y);
        return nb__k_launched();
    });
}

/* ---------- where: moves elements by their size ---------- */
template <typename T> __global__ void where_kernel(nb__k_view out, nb__k_view c, nb__k_view a, nb__k_view b) {
    NBC_GRID_LOOP(i, out.numel) {
        bool take_a = ((const uint8_t *)c.data)[nb__k_offset_as(out, c, i)] != 0;
        ((T *)out.data)[nb__k_offset(out, i)] =
            take_a ? ((const T *)a.data)[nb__k_offset_as(out, a, i)] : ((const T *)b.data)[nb__k_offset_as(out, b, i)];
    }
}

extern "C" int nb__k_where(const nb__k_view *out, const nb__k_view *cond, const nb__k_view *a, const nb__k_view *b) {
    if (out->numel == 0) return 0;
    nb__k_view o = *out, c = *cond, x = *a, y = *b;
    nb__k_view *ins[] = { &c, &x, &y };
    nb__k_flatten_dense(&o, ins, 3);
    return nb__k_by_size(out->dtype, [&](auto t) {
        where_kernel<decltype(t)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(o, c, x, y);
        return nb__k_launched();
    });
}

/* ---------- unary: formulas.h's, generated from ops.def ---------- */
/* Every elementwise unary op of ops.def is a case of its formula. Copies and casts have kernels
   of their own (below), which move any dtype. */
template <typename T> __device__ __forceinline__ T unary_op(nb_op_id op, T x, double s0, double s1) {
    switch (op) {
#define NBC_CASE_1(ID, name) case NB_OP_##ID: return (T)nbf_##name(x, s0, s1);
#define NBC_CASE_2(ID, name)
#define NBC_CASE_3(ID, name)
#include "../../ops/ops.def"
#undef NBC_CASE_1
#undef NBC_CASE_2
#undef NBC_CASE_3
    default: return x; /* not reached: the C side passes unary ops only */
    }
}
#undef NB_OP

template <typename T> __global__ void unary_kernel(nb_op_id op, nb__k_view out, nb__k_view x, double s0, double s1) {
    NBC_GRID_LOOP(i, out.numel)
        ((T *)out.data)[nb__k_offset(out, i)] = unary_op(op, ((const T *)x.data)[nb__k_offset_as(out, x, i)], s0, s1);
}

extern "C" int nb__k_unary(nb_op_id op, const nb__k_view *out, const nb__k_view *x, double s0, double s1) {
    if (out->numel == 0) return 0;
    nb__k_view o = *out, v = *x;
    nb__k_view *ins[] = { &v };
    nb__k_flatten_dense(&o, ins, 1);
    return nb__k_by_num_dtype(x->dtype, [&](auto t) {
        unary_kernel<decltype(t)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(op, o, v, s0, s1);
        return nb__k_launched();
    });
}

/* ---------- casts and copies ---------- */
/* One kernel for every pair of dtypes (no cross product of instantiations): the same dtype moves
   bytes; i64 to i32 and to i8 keep the low bits, as the cpu's exact casts (a double would round
   beyond 2^53); every other pair goes through a double, as the cpu's cast table does. */
static __global__ void cast_kernel(nb__k_view out, nb__k_view x) {
    NBC_GRID_LOOP(i, out.numel) {
        int64_t o = nb__k_offset(out, i), s = nb__k_offset_as(out, x, i);
        if (out.dtype == x.dtype) {
            switch (out.dtype) {
            case NB_F64: case NB_I64: ((uint64_t *)out.data)[o] = ((const uint64_t *)x.data)[s]; break;
            case NB_F32: case NB_I32: ((uint32_t *)out.data)[o] = ((const uint32_t *)x.data)[s]; break;
            case NB_F16: case NB_BF16: ((uint16_t *)out.data)[o] = ((const uint16_t *)x.data)[s]; break;
            default: ((uint8_t *)out.data)[o] = ((const uint8_t *)x.data)[s];
            }
        } else if (x.dtype == NB_I64 && out.dtype == NB_I32)
            ((int32_t *)out.data)[o] = (int32_t)((const int64_t *)x.data)[s];
        else if (x.dtype == NB_I64 && out.dtype == NB_I8)
            ((int8_t *)out.data)[o] = (int8_t)(uint8_t)((const int64_t *)x.data)[s];
        else nb__k_store_cast(out.data, out.dtype, o, nb__k_load(x.data, x.dtype, s));
    }
}

extern "C" int nb__k_cast(const nb__k_view *out, const nb__k_view *x) {
    if (out->numel == 0) return 0;
    nb__k_view o = *out, v = *x;
    nb__k_view *ins[] = { &v };
    nb__k_flatten_dense(&o, ins, 1);
    cast_kernel<<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(o, v);
    return nb__k_launched();
}

/* ---------- creation ---------- */
template <typename T> __global__ void fill_kernel(T *p, int64_t n, T v) {
    NBC_GRID_LOOP(i, n) p[i] = v;
}

extern "C" int nb__k_fill(const nb__k_view *out, double v) {
    int64_t n = out->numel;
    if (n == 0) return 0;
    /* the element's bits, made once here as the cpu's full makes them */
    uint64_t bits = 0;
    switch (out->dtype) {
    case NB_F32: { float f = (float)v; memcpy(&bits, &f, 4); break; }
    case NB_F64: memcpy(&bits, &v, 8); break;
    case NB_F16: bits = nb__float_to_half((float)v); break;
    case NB_BF16: bits = nb__f32_to_bf16((float)v); break;
    case NB_I64: bits = (uint64_t)nbf_sat_i64(v); break;
    case NB_I32: bits = (uint32_t)(uint64_t)nbf_sat_i64(v); break;
    case NB_BOOL: bits = v != 0; break;
    default: bits = (uint8_t)(uint64_t)nbf_sat_i64(v); break; /* u8 and i8 wrap, as an integer scalar */
    }
    return nb__k_by_size(out->dtype, [&](auto t) {
        typedef decltype(t) U;
        fill_kernel<U><<<nb__k_blocks(n), NBC_BLOCK, 0, nb__k_queue()>>>((U *)out->data, n, (U)bits);
        return nb__k_launched();
    });
}

static __global__ void arange_kernel(nb__k_view out, double start, double step) {
    NBC_GRID_LOOP(i, out.numel)
        nb__k_store_cast(out.data, out.dtype, i, start + (double)i * step);
}

extern "C" int nb__k_arange(const nb__k_view *out, double start, double step) {
    if (out->numel == 0) return 0;
    arange_kernel<<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*out, start, step);
    return nb__k_launched();
}

/* Uniform in [0, 1) from 24 (f32) or 53 (f64) random bits, as the cpu kernel. */
static __device__ __forceinline__ float u24(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
static __device__ __forceinline__ double u53(uint32_t hi, uint32_t lo) {
    return (double)(((uint64_t)(hi >> 5) << 26) | (lo >> 6)) * (1.0 / 9007199254740992.0);
}

/* Counter block b gives 4 f32 or 2 f64 uniforms, or one Box-Muller pair: the cpu's rand_range
   per block, so element i has the cpu's value (normals up to the last bits of the device's
   double log, cos and sin). */
static __global__ void rand_kernel(void *p, int64_t n, int64_t blocks, uint64_t seed, uint64_t offset, bool f64, bool normal) {
    NBC_GRID_LOOP(b, blocks) {
        uint32_t w[4];
        nb__philox_block(seed, offset + (uint64_t)b, w);
        if (normal) {
            double u1 = u53(w[0], w[1]), u2 = u53(w[2], w[3]);
            double r = sqrt(-2.0 * log(1.0 - u1)), th = 6.283185307179586 * u2;
            double z0 = r * cos(th), z1 = r * sin(th);
            int64_t i = b * 2;
            if (f64) {
                ((double *)p)[i] = z0;
                if (i + 1 < n) ((double *)p)[i + 1] = z1;
            } else {
                ((float *)p)[i] = (float)z0;
                if (i + 1 < n) ((float *)p)[i + 1] = (float)z1;
            }
        } else if (f64) {
            for (int k = 0; k < 2 && b * 2 + k < n; k++) ((double *)p)[b * 2 + k] = u53(w[2 * k], w[2 * k + 1]);
        } else {
            for (int k = 0; k < 4 && b * 4 + k < n; k++) ((float *)p)[b * 4 + k] = u24(w[k]);
        }
    }
}

extern "C" int nb__k_rand(const nb__k_view *out, uint64_t seed, uint64_t offset, int normal) {
    int64_t n = out->numel;
    if (n == 0) return 0;
    bool f64 = out->dtype == NB_F64;
    int64_t blocks = normal ? (n + 1) / 2 : f64 ? (n + 1) / 2 : (n + 3) / 4;
    rand_kernel<<<nb__k_blocks(blocks), NBC_BLOCK, 0, nb__k_queue()>>>(out->data, n, blocks, seed, offset, f64, normal != 0);
    return nb__k_launched();
}

/* ---------- transfers ---------- */
extern "C" int nb__k_zero(void *p, size_t bytes) {
    if (bytes == 0) return 0;
    return (int)cudaMemsetAsync(p, 0, bytes, nb__k_queue());
}

extern "C" int nb__k_upload(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return 0;
    int rc = (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, nb__k_queue());
    return rc ? rc : (int)cudaStreamSynchronize(nb__k_queue());
}

/* Whether v's elements lie dense and row-major from v.data. */
static bool dense(const nb__k_view *v) {
    int64_t want = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->stride[d] != want) return false;
        want *= v->shape[d];
    }
    return true;
}

extern "C" int nb__k_download(void *dst, const nb__k_view *v) {
    size_t bytes = (size_t)v->numel * (size_t)nb__dtype_bytes(v->dtype);
    if (bytes == 0) return 0;
    const void *src = v->data;
    void *packed = NULL;
    if (!dense(v)) { /* gather the elements into scratch memory first */
        if (!(packed = nb__k_scratch_alloc(bytes))) return (int)cudaErrorMemoryAllocation;
        nb__k_view p = *v;
        p.data = packed;
        for (int64_t d = v->ndim - 1, st = 1; d >= 0; d--) {
            p.stride[d] = st;
            st *= v->shape[d];
        }
        int rc = nb__k_cast(&p, v);
        if (rc) {
            nb__k_scratch_free(packed, bytes);
            return rc;
        }
        src = packed;
    }
    int rc = (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, nb__k_queue());
    if (!rc) rc = (int)cudaStreamSynchronize(nb__k_queue());
    if (packed) nb__k_scratch_free(packed, bytes);
    return rc;
}
