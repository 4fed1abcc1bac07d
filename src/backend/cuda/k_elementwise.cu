/* CUDA kernels of the elementwise ops (binary, comparisons, where, unary math), casts and copies,
   creation (full, arange, rand, randn) and the host/device transfers the C side needs. One thread
   per output element, with the formulas of src/backend/cpu/formulas.h. */
#include "k_common.cuh"
#include <math.h>
#include <type_traits>

/* ---------- formulas.h's arithmetic for one type ---------- */
/* Integers wrap as two's complement (computed unsigned, where overflow is defined). */
template <typename T> __device__ __forceinline__ T w_add(T x, T y) {
    if constexpr (std::is_integral<T>::value) {
        typedef typename std::make_unsigned<T>::type U;
        return (T)(U)((U)x + (U)y);
    } else return x + y;
}
template <typename T> __device__ __forceinline__ T w_sub(T x, T y) {
    if constexpr (std::is_integral<T>::value) {
        typedef typename std::make_unsigned<T>::type U;
        return (T)(U)((U)x - (U)y);
    } else return x - y;
}
template <typename T> __device__ __forceinline__ T w_mul(T x, T y) {
    if constexpr (std::is_integral<T>::value) {
        typedef typename std::make_unsigned<T>::type U;
        return (T)(U)((U)x * (U)y);
    } else return x * y;
}
/* -x: floats by negation, so that -(+0) is -0 */
template <typename T> __device__ __forceinline__ T w_neg(T x) {
    if constexpr (std::is_integral<T>::value) return w_sub<T>((T)0, x);
    else return -x;
}

/* A double scalar as an operand of type T (formulas.h's NBF_SCALAR). */
template <typename T> __device__ __forceinline__ T as_scalar(double v) {
    if constexpr (std::is_same<T, int64_t>::value) return nb__k_sat_i64(v);
    else if constexpr (std::is_same<T, int32_t>::value) return (int32_t)(uint32_t)(uint64_t)nb__k_sat_i64(v);
    else if constexpr (std::is_same<T, uint8_t>::value) return (uint8_t)(uint64_t)nb__k_sat_i64(v);
    else if constexpr (std::is_same<T, int8_t>::value) return (int8_t)(uint8_t)(uint64_t)nb__k_sat_i64(v);
    else return (T)v;
}

/* bool with bool, as torch: add is a logical or, mul a logical and */
template <typename T> __device__ __forceinline__ T logical_op(int op, T x, T y) {
    if constexpr (std::is_integral<T>::value) return op == NBC_ADD ? (T)(x | y) : (T)(x & y);
    else return x;
}

template <typename T> __device__ __forceinline__ T binary_op(int op, T x, T y, bool logical) {
    switch (op) {
    case NBC_ADD: return logical ? logical_op(op, x, y) : w_add(x, y);
    case NBC_SUB: return w_sub(x, y);
    case NBC_MUL: return logical ? logical_op(op, x, y) : w_mul(x, y);
    case NBC_DIV: return x / y;
    case NBC_POW:
        if constexpr (std::is_floating_point<T>::value) return pow(x, y);
        else return 0; /* float dtypes only (ops.def) */
    /* NaN-propagating, as torch.maximum and torch.minimum */
    case NBC_MAXIMUM: return x != x ? x : y != y ? y : x > y ? x : y;
    case NBC_MINIMUM: return x != x ? x : y != y ? y : x < y ? x : y;
    default: return y <= 0 ? (T)0 : x; /* relu_backward(g, y): a NaN output passes g */
    }
}

template <typename T> __device__ __forceinline__ uint8_t compare_op(int op, T x, T y) {
    switch (op) {
    case NBC_EQ: return x == y;
    case NBC_LT: return x < y;
    case NBC_GT: return x > y;
    case NBC_NE: return x != y;
    case NBC_LE: return x <= y;
    default: return x >= y;
    }
}

template <typename T>
__global__ void binary_kernel(int op, bool logical, nb__k_view out, nb__k_view a, nb__k_view b) {
    const T *pa = (const T *)a.data, *pb = (const T *)b.data;
    NBC_GRID_LOOP(i, out.numel) {
        T x = pa[nb__k_offset_as(out, a, i)], y = pb[nb__k_offset_as(out, b, i)];
        if (op >= NBC_EQ) ((uint8_t *)out.data)[nb__k_offset(out, i)] = compare_op(op, x, y);
        else ((T *)out.data)[nb__k_offset(out, i)] = binary_op(op, x, y, logical);
    }
}

extern "C" int nb__k_binary(int op, const nb__k_view *out, const nb__k_view *a, const nb__k_view *b) {
    if (out->numel == 0) return 0;
    bool logical = a->dtype == NB_BOOL;
    nb__k_view o = *out, x = *a, y = *b;
    nb__k_view *ins[] = { &x, &y };
    nb__k_flatten_dense(&o, ins, 2);
    return nb__k_by_num_dtype(a->dtype, [&](auto t) {
        typedef decltype(t) T;
        binary_kernel<T><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(op, logical, o, x, y);
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

/* ---------- unary ---------- */
template <typename T> __device__ __forceinline__ T float_exp(T x) {
    if constexpr (std::is_same<T, float>::value) return nbk_expf(x);
    else return exp(x);
}
template <typename T> __device__ __forceinline__ T float_erf(T x) {
    if constexpr (std::is_same<T, float>::value) return nbk_erff(x);
    else return erf(x);
}

/* The float-only formulas (ops.def: NB_T_FLOAT); never reached for integers. */
template <typename T> __device__ __forceinline__ T float_unary(int op, T x, double s0) {
    if constexpr (std::is_floating_point<T>::value) {
        switch (op) {
        case NBC_POW_SCALAR: return pow(x, (T)s0);
        case NBC_EXP: return float_exp(x);
        case NBC_LOG: return log(x);
        case NBC_SQRT: return sqrt(x);
        case NBC_TANH: return tanh(x);
        case NBC_SIGMOID: return (T)1 / ((T)1 + float_exp(-x));
        case NBC_GELU: return (T)0.5 * x * ((T)1 + float_erf(x * (T)0.70710678118654752440));
        case NBC_ERF: return float_erf(x);
        case NBC_SIN: return sin(x);
        case NBC_COS: return cos(x);
        case NBC_LOG1P: return log1p(x);
        case NBC_EXPM1: return expm1(x);
        case NBC_RECIPROCAL: return (T)1 / x;
        case NBC_RSQRT: return (T)1 / sqrt(x);
        case NBC_FLOOR: return floor(x);
        case NBC_CEIL: return ceil(x);
        case NBC_ROUND: return rint(x); /* halves to even, as torch.round */
        default: return trunc(x);
        }
    } else return x; /* integers are whole: floor, ceil, round and trunc give them back */
}

/* x < 0, without comparing an unsigned u8 with zero */
template <typename T> __device__ __forceinline__ bool negative(T x) {
    if constexpr (std::is_unsigned<T>::value) return false;
    else return x < 0;
}

template <typename T> __device__ __forceinline__ T unary_op(int op, T x, double s0, double s1) {
    switch (op) {
    case NBC_ADD_SCALAR: return w_add(x, as_scalar<T>(s0));
    case NBC_MUL_SCALAR: return w_mul(x, as_scalar<T>(s0));
    case NBC_NEG: return w_neg(x);
    case NBC_ABS: return negative(x) ? w_neg(x) : x;
    case NBC_SIGN: return (T)((x > 0) - negative(x));
    case NBC_RELU: return negative(x) ? (T)0 : x; /* NaN stays NaN, -0 stays -0 */
    /* the bounds compare in double, so an integer is held to a fractional bound exactly; a NaN
       bound gives NaN, as torch (nb_clamp makes an integer input float first) */
    case NBC_CLAMP:
        return s0 != s0 || s1 != s1 ? as_scalar<T>(s0 + s1) : (double)x < s0 ? as_scalar<T>(s0) : (double)x > s1 ? as_scalar<T>(s1) : x;
    default: return float_unary(op, x, s0);
    }
}

template <typename T> __global__ void unary_kernel(int op, nb__k_view out, nb__k_view x, double s0, double s1) {
    NBC_GRID_LOOP(i, out.numel)
        ((T *)out.data)[nb__k_offset(out, i)] = unary_op(op, ((const T *)x.data)[nb__k_offset_as(out, x, i)], s0, s1);
}

extern "C" int nb__k_unary(int op, const nb__k_view *out, const nb__k_view *x, double s0, double s1) {
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
    case NB_I64: bits = (uint64_t)nb__k_sat_i64(v); break;
    case NB_I32: bits = (uint32_t)(uint64_t)nb__k_sat_i64(v); break;
    case NB_BOOL: bits = v != 0; break;
    default: bits = (uint8_t)(uint64_t)nb__k_sat_i64(v); break; /* u8 and i8 wrap, as an integer scalar */
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
