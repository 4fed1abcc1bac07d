/* CUDA kernels that run along one axis lane by lane: cumulative sums and products and the
   product's exact backward. One thread per lane, walking it in the cpu's order with the cpu's
   accumulators (double for floats), so a lane's values are the cpu's own. */
#include "k_common.cuh"
#include <type_traits>

/* Lane o of x starts at nbc_offset(xl, o) (xl: the other axes' shape and strides) and steps xs;
   out's likewise. mul: a product, else a sum; reverse: from the lane's end. */
template <typename T>
__global__ void scan_kernel(nbc_view yl, nbc_view xl, int64_t n, int64_t ys, int64_t xs, bool mul, bool reverse) {
    typedef typename std::conditional<std::is_floating_point<T>::value, double, uint64_t>::type A;
    NBC_GRID_LOOP(o, xl.numel) {
        const T *x = (const T *)xl.data + nbc_offset(xl, o);
        T *y = (T *)yl.data + nbc_offset(yl, o);
        A acc = mul ? (A)1 : (A)0;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = reverse ? n - 1 - k : k;
            acc = mul ? acc * (A)x[i * xs] : acc + (A)x[i * xs]; /* integers wrap, in uint64_t */
            y[i * ys] = (T)acc;
        }
    }
}

extern "C" int nbc_scan(const nbc_view *yl, const nbc_view *xl, int64_t n, int64_t ys, int64_t xs, int mul, int reverse) {
    if (xl->numel == 0 || n == 0) return 0;
    switch (xl->dtype) {
    case NB_F32: scan_kernel<float><<<nbc_blocks(xl->numel), NBC_BLOCK, 0, nbc_queue()>>>(*yl, *xl, n, ys, xs, mul, reverse); break;
    case NB_F64: scan_kernel<double><<<nbc_blocks(xl->numel), NBC_BLOCK, 0, nbc_queue()>>>(*yl, *xl, n, ys, xs, mul, reverse); break;
    case NB_I64: scan_kernel<int64_t><<<nbc_blocks(xl->numel), NBC_BLOCK, 0, nbc_queue()>>>(*yl, *xl, n, ys, xs, mul, reverse); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return nbc_launched();
}

/* dL/dx_i = P_i * S_i, P_i = x_0 ... x_{i-1}, S_i = g_i + x_{i+1} S_{i+1}: exact where x has zeros
   (src/backend/cpu/scan.c's CUMPROD_BWD_LANE). */
template <typename T>
__global__ void cumprod_backward_kernel(nbc_view yl, nbc_view xl, nbc_view gl, int64_t n, int64_t ys, int64_t xs, int64_t gs) {
    NBC_GRID_LOOP(o, xl.numel) {
        const T *x = (const T *)xl.data + nbc_offset(xl, o);
        const T *g = (const T *)gl.data + nbc_offset(gl, o);
        T *y = (T *)yl.data + nbc_offset(yl, o);
        double s = 0;
        for (int64_t i = n - 1; i >= 0; i--) {
            s = (double)g[i * gs] + (i + 1 < n ? (double)x[(i + 1) * xs] * s : 0);
            y[i * ys] = (T)s; /* S_i for now */
        }
        double p = 1;
        for (int64_t i = 0; i < n; i++) {
            y[i * ys] = (T)(p * (double)y[i * ys]);
            p *= (double)x[i * xs];
        }
    }
}

extern "C" int nbc_cumprod_backward(const nbc_view *yl, const nbc_view *xl, const nbc_view *gl, int64_t n, int64_t ys, int64_t xs,
                                    int64_t gs) {
    if (xl->numel == 0 || n == 0) return 0;
    return nbc_by_float_dtype(xl->dtype, [&](auto z) {
        cumprod_backward_kernel<decltype(z)><<<nbc_blocks(xl->numel), NBC_BLOCK, 0, nbc_queue()>>>(*yl, *xl, *gl, n, ys, xs, gs);
        return nbc_launched();
    });
}
