/* CUDA kernels of 2-D pooling over [N, C, H, W]: max (values, window argmax indices, gradient),
   average and adaptive average (and gradients), with src/backend/cpu/pool.c's windows. One
   thread per output element; a gradient is gathered, one thread per input element walking the
   windows that hold it in the cpu's order, so it adds what the cpu adds in the cpu's order
   without atomics. */
#include "k_common.cuh"
#include <math.h>

/* Output position o's window [lo, hi) along axis of an input of size n (nout outputs); span
   is the divisor's share (the window clipped to the padded input, as torch counts it). */
static __device__ void window(const nb__k_pool_geom &g, int axis, int64_t o, int64_t n, int64_t nout, int64_t *lo, int64_t *hi,
                       int64_t *span) {
    if (g.adaptive) {
        *lo = o * n / nout;
        *hi = ((o + 1) * n + nout - 1) / nout;
        *span = *hi - *lo;
        return;
    }
    int64_t a = o * g.s[axis] - g.p[axis];
    int64_t b = a + g.k[axis];
    if (b > n + g.p[axis]) b = n + g.p[axis];
    *span = b - a;
    *lo = a < 0 ? 0 : a;
    *hi = b > n ? n : b;
}

/* A max pool's dilated window along an axis: first, first + d, ... (count of them) inside the input. */
static __device__ void dilated_window(const nb__k_pool_geom &g, int axis, int64_t o, int64_t n, int64_t *first, int64_t *count) {
    int64_t a = o * g.s[axis] - g.p[axis], d = g.d[axis];
    int64_t t0 = a < 0 ? (-a + d - 1) / d : 0;
    int64_t t1 = a + (g.k[axis] - 1) * d < n ? g.k[axis] : (n - 1 - a) / d + 1;
    *first = a + t0 * d;
    *count = t1 > t0 ? t1 - t0 : 0;
}

/* The max of window (oh, ow) of a plane (strides xs2, xs3) and its place ih * W + iw: the first
   largest, a later NaN replacing an earlier one (the cpu's loop); *any is whether the window
   holds any element of the input. */
template <typename T>
__device__ T window_max(const nb__k_pool_geom &g, const T *x, int64_t xs2, int64_t xs3, int64_t oh, int64_t ow, int64_t *arg,
                        bool *any) {
    int64_t h0, hn, w0, wn;
    dilated_window(g, 0, oh, g.H, &h0, &hn);
    dilated_window(g, 1, ow, g.W, &w0, &wn);
    T m = -INFINITY;
    *arg = h0 * g.W + w0;
    for (int64_t th = 0, ih = h0; th < hn; th++, ih += g.d[0])
        for (int64_t tw = 0, iw = w0; tw < wn; tw++, iw += g.d[1]) {
            T v = x[ih * xs2 + iw * xs3];
            if (v > m || v != v) {
                m = v;
                *arg = ih * g.W + iw;
            }
        }
    *any = hn > 0 && wn > 0;
    return m;
}

/* The outputs [lo, hi] along an axis whose windows can hold input place i (the caller checks). */
static __device__ void candidates(const nb__k_pool_geom &g, int axis, int64_t i, int64_t n, int64_t nout, int64_t *lo, int64_t *hi) {
    if (g.adaptive) {
        *lo = i * nout / n - 1;
        *hi = ((i + 1) * nout + n - 1) / n;
    } else {
        int64_t s = g.s[axis], top = i + g.p[axis], bottom = top - (g.k[axis] - 1) * g.d[axis];
        *lo = bottom <= 0 ? 0 : (bottom + s - 1) / s; /* ceil(bottom / s) */
        *hi = top < 0 ? -1 : top / s;
    }
    if (*lo < 0) *lo = 0;
    if (*hi > nout - 1) *hi = nout - 1;
}

/* x's plane (n, c): plane index pl = n * C + c. */
static __device__ __forceinline__ int64_t plane_offset(const nb__k_view &v, int64_t pl, int64_t C) {
    return (pl / C) * v.stride[0] + (pl % C) * v.stride[1];
}

template <typename T> __global__ void max_pool_kernel(nb__k_pool_geom g, nb__k_view out, nb__k_view x, bool indices) {
    NBC_GRID_LOOP(i, out.numel) {
        int64_t L = g.OH * g.OW, pl = i / L, oh = (i % L) / g.OW, ow = i % g.OW, arg;
        bool any;
        T m = window_max<T>(g, (const T *)x.data + plane_offset(x, pl, g.C), x.stride[2], x.stride[3], oh, ow, &arg, &any);
        if (indices) ((int64_t *)out.data)[i] = arg;
        else ((T *)out.data)[i] = m;
    }
}

template <typename T> __global__ void max_pool_backward_kernel(nb__k_pool_geom g, nb__k_view dx, nb__k_view dy, nb__k_view x) {
    NBC_GRID_LOOP(i, dx.numel) {
        int64_t HW = g.H * g.W, pl = i / HW, ih = (i % HW) / g.W, iw = i % g.W, place = ih * g.W + iw;
        const T *xp = (const T *)x.data + plane_offset(x, pl, g.C);
        const T *dyp = (const T *)dy.data + plane_offset(dy, pl, g.C);
        int64_t oh0, oh1, ow0, ow1;
        candidates(g, 0, ih, g.H, g.OH, &oh0, &oh1);
        candidates(g, 1, iw, g.W, g.OW, &ow0, &ow1);
        T acc = 0;
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                int64_t arg;
                bool any;
                window_max<T>(g, xp, x.stride[2], x.stride[3], oh, ow, &arg, &any);
                if (any && arg == place) acc += dyp[oh * dy.stride[2] + ow * dy.stride[3]];
            }
        ((T *)dx.data)[i] = acc;
    }
}

template <typename T> __global__ void avg_pool_kernel(nb__k_pool_geom g, nb__k_view out, nb__k_view x) {
    NBC_GRID_LOOP(i, out.numel) {
        int64_t L = g.OH * g.OW, pl = i / L, oh = (i % L) / g.OW, ow = i % g.OW;
        const T *xp = (const T *)x.data + plane_offset(x, pl, g.C);
        int64_t h0, h1, sh, w0, w1, sw;
        window(g, 0, oh, g.H, g.OH, &h0, &h1, &sh);
        window(g, 1, ow, g.W, g.OW, &w0, &w1, &sw);
        double s = 0;
        for (int64_t ih = h0; ih < h1; ih++)
            for (int64_t iw = w0; iw < w1; iw++) s += xp[ih * x.stride[2] + iw * x.stride[3]];
        ((T *)out.data)[i] = (T)(s / (double)(g.exclude_padding ? (h1 - h0) * (w1 - w0) : sh * sw));
    }
}

template <typename T> __global__ void avg_pool_backward_kernel(nb__k_pool_geom g, nb__k_view dx, nb__k_view dy) {
    NBC_GRID_LOOP(i, dx.numel) {
        int64_t HW = g.H * g.W, pl = i / HW, ih = (i % HW) / g.W, iw = i % g.W;
        const T *dyp = (const T *)dy.data + plane_offset(dy, pl, g.C);
        int64_t oh0, oh1, ow0, ow1;
        candidates(g, 0, ih, g.H, g.OH, &oh0, &oh1);
        candidates(g, 1, iw, g.W, g.OW, &ow0, &ow1);
        T acc = 0;
        for (int64_t oh = oh0; oh <= oh1; oh++) {
            int64_t h0, h1, sh;
            window(g, 0, oh, g.H, g.OH, &h0, &h1, &sh);
            if (ih < h0 || ih >= h1) continue;
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                int64_t w0, w1, sw;
                window(g, 1, ow, g.W, g.OW, &w0, &w1, &sw);
                if (iw < w0 || iw >= w1) continue;
                acc += (T)(dyp[oh * dy.stride[2] + ow * dy.stride[3]] /
                           (double)(g.exclude_padding ? (h1 - h0) * (w1 - w0) : sh * sw));
            }
        }
        ((T *)dx.data)[i] = acc;
    }
}

extern "C" int nb__k_max_pool2d(const nb__k_pool_geom *g, const nb__k_view *out, const nb__k_view *x, int indices) {
    if (out->numel == 0) return 0;
    return nb__k_by_float_dtype(x->dtype, [&](auto z) {
        max_pool_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*g, *out, *x, indices != 0);
        return nb__k_launched();
    });
}

extern "C" int nb__k_max_pool2d_backward(const nb__k_pool_geom *g, const nb__k_view *dx, const nb__k_view *dy, const nb__k_view *x) {
    if (dx->numel == 0) return 0;
    return nb__k_by_float_dtype(x->dtype, [&](auto z) {
        max_pool_backward_kernel<decltype(z)><<<nb__k_blocks(dx->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*g, *dx, *dy, *x);
        return nb__k_launched();
    });
}

extern "C" int nb__k_avg_pool2d(const nb__k_pool_geom *g, const nb__k_view *out, const nb__k_view *x) {
    if (out->numel == 0) return 0;
    return nb__k_by_float_dtype(x->dtype, [&](auto z) {
        avg_pool_kernel<decltype(z)><<<nb__k_blocks(out->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*g, *out, *x);
        return nb__k_launched();
    });
}

extern "C" int nb__k_avg_pool2d_backward(const nb__k_pool_geom *g, const nb__k_view *dx, const nb__k_view *dy) {
    if (dx->numel == 0) return 0;
    return nb__k_by_float_dtype(dy->dtype, [&](auto z) {
        avg_pool_backward_kernel<decltype(z)><<<nb__k_blocks(dx->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*g, *dx, *dy);
        return nb__k_launched();
    });
}
