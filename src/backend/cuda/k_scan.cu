/* CUDA kernels that run along one axis lane by lane: cumulative sums and products and the
   product's exact backward. One thread per lane, walking it in the cpu's order with the cpu's
   accumulators (double for floats), so a lane's values are the cpu's own. */
#include "k_common.cuh"
#include <type_traits>

/* Lane o of x starts at nb__k_offset(xl, o) (xl: the other axes' shape and strides) and steps xs;
   out's likewise. mul: a product, else a sum; reverse: from the lane's end. */
template <typename T>
__global__ void scan_kernel(nb__k_view yl, nb__k_view xl, int64_t n, int64_t ys, int64_t xs, bool mul, bool reverse) {
    typedef typename std::conditional<std::is_floating_point<T>::value, double, uint64_t>::type A;
    NBC_GRID_LOOP(o, xl.numel) {
        const T *x = (const T *)xl.data + nb__k_offset(xl, o);
        T *y = (T *)yl.data + nb__k_offset(yl, o);
        A acc = mul ? (A)1 : (A)0;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = reverse ? n - 1 - k : k;
            acc = mul ? acc * (A)x[i * xs] : acc + (A)x[i * xs]; /* integers wrap, in uint64_t */
            y[i * ys] = (T)acc;
        }
    }
}

extern "C" int nb__k_scan(const nb__k_view *yl, const nb__k_view *xl, int64_t n, int64_t ys, int64_t xs, int mul, int reverse) {
    if (xl->numel == 0 || n == 0) return 0;
    switch (xl->dtype) {
    case NB_F32: scan_kernel<float><<<nb__k_blocks(xl->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*yl, *xl, n, ys, xs, mul, reverse); break;
    case NB_F64: scan_kernel<double><<<nb__k_blocks(xl->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*yl, *xl, n, ys, xs, mul, reverse); break;
    case NB_I64: scan_kernel<int64_t><<<nb__k_blocks(xl->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*yl, *xl, n, ys, xs, mul, reverse); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return nb__k_launched();
}

/* dL/dx_i = P_i * S_i, P_i = x_0 ... x_{i-1}, S_i = g_i + x_{i+1} S_{i+1}: exact where x has zeros
   (src/backend/cpu/scan.c's CUMPROD_BWD_LANE). */
template <typename T>
__global__ void cumprod_backward_kernel(nb__k_view yl, nb__k_view xl, nb__k_view gl, int64_t n, int64_t ys, int64_t xs, int64_t gs) {
    NBC_GRID_LOOP(o, xl.numel) {
        const T *x = (const T *)xl.data + nb__k_offset(xl, o);
        const T *g = (const T *)gl.data + nb__k_offset(gl, o);
        T *y = (T *)yl.data + nb__k_offset(yl, o);
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

extern "C" int nb__k_cumprod_backward(const nb__k_view *yl, const nb__k_view *xl, const nb__k_view *gl, int64_t n, int64_t ys, int64_t xs,
                                    int64_t gs) {
    if (xl->numel == 0 || n == 0) return 0;
    return nb__k_by_float_dtype(xl->dtype, [&](auto z) {
        cumprod_backward_kernel<decltype(z)><<<nb__k_blocks(xl->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*yl, *xl, *gl, n, ys, xs, gs);
        return nb__k_launched();
    });
}

/* ---------- argsort: each lane's indices by a stable bottom-up merge sort ---------- */
/* Whether a sorts before b: NaN above every number (last ascending, first descending), as torch.sort. */
template <typename T> __device__ __forceinline__ bool sorts_before(T a, T b, bool desc) {
    if (desc) return a != a ? b == b : a > b;
    return b != b ? a == a : a < b;
}

/* One thread per lane, src/backend/cpu/scan.c's SORT_LANE step for step (so the order, ties
   kept in index order, is the cpu's): runs of width w merged pairwise between the lane's two
   index buffers in scratch (2 n int64s a lane), a tie taking the left run's element first. */
template <typename T>
__global__ void argsort_kernel(nb__k_view yl, nb__k_view xl, int64_t n, int64_t ys, int64_t xs, bool desc, int64_t *scratch) {
    NBC_GRID_LOOP(o, xl.numel) {
        const T *x = (const T *)xl.data + nb__k_offset(xl, o);
        int64_t *y = (int64_t *)yl.data + nb__k_offset(yl, o);
        int64_t *a = scratch + o * 2 * n, *b = a + n;
        for (int64_t i = 0; i < n; i++) a[i] = i;
        for (int64_t w = 1; w < n; w *= 2) {
            for (int64_t lo = 0; lo < n; lo += 2 * w) {
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
                int64_t p = lo, q = mid, k = lo;
                while (p < mid && q < hi) b[k++] = sorts_before(x[a[q] * xs], x[a[p] * xs], desc) ? a[q++] : a[p++];
                while (p < mid) b[k++] = a[p++];
                while (q < hi) b[k++] = a[q++];
            }
            int64_t *t = a;
            a = b;
            b = t;
        }
        for (int64_t i = 0; i < n; i++) y[i * ys] = a[i];
    }
}

extern "C" int nb__k_argsort(const nb__k_view *yl, const nb__k_view *xl, int64_t n, int64_t ys, int64_t xs, int descending) {
    if (xl->numel == 0 || n == 0) return 0;
    size_t bytes = sizeof(int64_t) * 2 * (size_t)n * (size_t)xl->numel;
    int64_t *scratch = (int64_t *)nb__k_scratch_alloc(bytes);
    if (!scratch) return (int)cudaErrorMemoryAllocation;
    int rc = nb__k_by_num_dtype(xl->dtype, [&](auto z) {
        argsort_kernel<decltype(z)><<<nb__k_blocks(xl->numel), NBC_BLOCK, 0, nb__k_queue()>>>(*yl, *xl, n, ys, xs, descending != 0,
                                                                                       scratch);
        return nb__k_launched();
    });
    nb__k_scratch_free(scratch, bytes); /* in stream order: the sort queued above still has it */
    return rc;
}
