/* CUDA kernels of the reductions (sum, max, min, argmax, argmin), softmax and log-softmax, and
   batch normalisation's four ops. One block per output (per row, per channel): each thread runs
   over its share of the reduced elements in a fixed order, then the block combines the threads'
   results in a fixed tree (k_common.cuh's nb__k_block_sum), never with atomics, so a run repeats
   its bits exactly. */
#include "k_common.cuh"
#include <math.h>
#include <type_traits>

/* The accumulator of a sum: floats in double (as the cpu), integers in uint64_t (wrapping as
   torch's i64 sums). */
template <typename T> struct sum_acc { typedef typename std::conditional<std::is_floating_point<T>::value, double, uint64_t>::type type; };

/* Whether the candidate (v, i) replaces the extreme (m, j) so far: NaN is the extreme (the first
   NaN), then the larger (smaller) value, then on a tie the earlier index. */
template <typename T> __device__ __forceinline__ bool better(T v, int64_t i, T m, int64_t j, bool want_max) {
    if (m != m) return v != v && i < j;
    if (v != v) return true;
    if (want_max ? v > m : v < m) return true;
    return v == m && i < j;
}

/* One block per output o (grid-stride over outputs): kept gives o's element offset in the input
   (the kept axes' shape and strides), red the offsets of the reduced elements from there. */
template <typename T>
__global__ void reduce_kernel(int op, nb__k_view out, nb__k_view kept, nb__k_view red) {
    typedef typename sum_acc<T>::type A;
    __shared__ A sums[NBC_BLOCK];
    __shared__ T vals[NBC_BLOCK];
    __shared__ int64_t args[NBC_BLOCK];
    const T *x = (const T *)kept.data;
    bool want_max = op == NBC_MAX || op == NBC_ARGMAX;
    int t = threadIdx.x;
    for (int64_t o = blockIdx.x; o < kept.numel; o += gridDim.x) {
        const T *base = x + nb__k_offset(kept, o);
        if (op == NBC_SUM) {
            A s = 0;
            for (int64_t r = t; r < red.numel; r += NBC_BLOCK) s += (A)base[nb__k_offset(red, r)];
            s = nb__k_block_sum(s, sums);
            if (t == 0) {
                if (out.dtype == NB_F32) ((float *)out.data)[o] = (float)s;
                else if (out.dtype == NB_F64) ((double *)out.data)[o] = (double)s;
                else ((int64_t *)out.data)[o] = (int64_t)s;
            }
            continue;
        }
        /* the thread's extreme over its elements, ascending, then the tree over the threads */
        T m = 0;
        int64_t j = -1;
        for (int64_t r = t; r < red.numel; r += NBC_BLOCK) {
            T v = base[nb__k_offset(red, r)];
            if (j < 0 || better(v, r, m, j, want_max)) { m = v; j = r; }
        }
        vals[t] = m;
        args[t] = j;
        __syncthreads();
        for (int w = NBC_BLOCK / 2; w > 0; w /= 2) {
            if (t < w && args[t + w] >= 0 && (args[t] < 0 || better(vals[t + w], args[t + w], vals[t], args[t], want_max))) {
                vals[t] = vals[t + w];
                args[t] = args[t + w];
            }
            __syncthreads();
        }
        if (t == 0) {
            if (op == NBC_MAX || op == NBC_MIN) ((T *)out.data)[o] = vals[0];
            else ((int64_t *)out.data)[o] = args[0];
        }
        __syncthreads();
    }
}

extern "C" int nb__k_reduce(int op, const nb__k_view *out, const nb__k_view *kept, const nb__k_view *red) {
    if (kept->numel == 0) return 0;
    return nb__k_by_num_dtype(kept->dtype, [&](auto z) {
        reduce_kernel<decltype(z)><<<nb__k_blocks(kept->numel * NBC_BLOCK), NBC_BLOCK, 0, nb__k_queue()>>>(op, *out, *kept, *red);
        return nb__k_launched();
    });
}

/* ---------- softmax and log-softmax along one axis ---------- */
template <typename T> __device__ __forceinline__ T exp_of(T x) {
    if constexpr (std::is_same<T, float>::value) return nbk_expf(x); /* the cpu's exp */
    else return exp(x);
}

/* One block per row: xrow/yrow give the row's first element (the other axes' shape and strides),
   xs/ys the step along the axis, n its length. The cpu's three passes: the max, the exps and
   their sum in double, then the scaling (or the log-sum subtracted). */
template <typename T>
__global__ void softmax_kernel(nb__k_view xrow, nb__k_view yrow, int64_t n, int64_t xs, int64_t ys, bool log_out) {
    __shared__ double sums[NBC_BLOCK];
    __shared__ T maxes[NBC_BLOCK];
    int t = threadIdx.x;
    for (int64_t o = blockIdx.x; o < xrow.numel; o += gridDim.x) {
        const T *x = (const T *)xrow.data + nb__k_offset(xrow, o);
        T *y = (T *)yrow.data + nb__k_offset(yrow, o);
        T m = x[0];
        for (int64_t j = t; j < n; j += NBC_BLOCK) m = x[j * xs] > m ? x[j * xs] : m;
        maxes[t] = m;
        __syncthreads();
        for (int w = NBC_BLOCK / 2; w > 0; w /= 2) {
            if (t < w && maxes[t + w] > maxes[t]) maxes[t] = maxes[t + w];
            __syncthreads();
        }
        m = maxes[0];
        __syncthreads();
        if (m == -(T)INFINITY) m = 0;
        double s = 0;
        for (int64_t j = t; j < n; j += NBC_BLOCK) {
            T e = exp_of<T>(x[j * xs] - m);
            s += e;
            y[j * ys] = e;
        }
        s = nb__k_block_sum(s, sums);
        if (log_out) {
            T ls = (T)log(s);
            for (int64_t j = t; j < n; j += NBC_BLOCK) y[j * ys] = x[j * xs] - m - ls;
        } else {
            T inv = (T)(1.0 / s);
            for (int64_t j = t; j < n; j += NBC_BLOCK) y[j * ys] *= inv; /* this thread's own exps */
        }
    }
}

extern "C" int nb__k_softmax(const nb__k_view *xrow, const nb__k_view *yrow, int64_t n, int64_t xs, int64_t ys, int log_out) {
    if (xrow->numel == 0 || n == 0) return 0;
    return nb__k_by_float_dtype(xrow->dtype, [&](auto z) {
        softmax_kernel<decltype(z)><<<nb__k_blocks(xrow->numel * NBC_BLOCK), NBC_BLOCK, 0, nb__k_queue()>>>(*xrow, *yrow, n, xs, ys,
                                                                                                    log_out != 0);
        return nb__k_launched();
    });
}

/* ---------- batch normalisation over [N, C, ...] ---------- */
/* One block per channel c. x and g are views of x and the gradient with the channel axis taken
   out ([N, rest...]), their channel strides xc and gc apart; y likewise for a dense output
   (stride yc). w and b: the weight and bias, [C] (stride w.stride[0]). The moments about the
   channel's first value, in double: the cpu's formulas (src/backend/cpu/norm.c). */
template <typename T>
__global__ void batch_norm_kernel(int kind, nb__k_view out, nb__k_view x, int64_t xc, nb__k_view g, int64_t gc, int64_t yc, nb__k_view w,
                                  nb__k_view b, int64_t C, double eps) {
    __shared__ double sums[NBC_BLOCK];
    int t = threadIdx.x;
    bool grad = kind == NBC_BN_REDUCE || kind == NBC_BN_BACKWARD;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        const T *xp = (const T *)x.data + c * xc;
        const T *gp = grad ? (const T *)g.data + c * gc : NULL;
        double shift0 = (double)xp[0], sd = 0, sdd = 0, sg = 0, sgd = 0;
        for (int64_t r = t; r < x.numel; r += NBC_BLOCK) {
            double d = (double)xp[nb__k_offset(x, r)] - shift0;
            sd += d;
            sdd += d * d;
            if (grad) {
                double gv = (double)gp[nb__k_offset(g, r)];
                sg += gv;
                sgd += gv * d;
            }
        }
        sd = nb__k_block_sum(sd, sums);
        sdd = nb__k_block_sum(sdd, sums);
        if (grad) {
            sg = nb__k_block_sum(sg, sums);
            sgd = nb__k_block_sum(sgd, sums);
        }
        double M = (double)x.numel, shift = sd / M;
        double mean = shift0 + shift, var = sdd / M - shift * shift;
        if (var < 0) var = 0;
        T *o = (T *)out.data;
        if (kind == NBC_BN_STATS) {
            if (t == 0) {
                o[c] = (T)mean;
                o[C + c] = (T)var;
            }
            continue;
        }
        double invstd = 1.0 / sqrt(var + eps);
        const T *wp = (const T *)w.data;
        if (kind == NBC_BN_FORWARD) {
            double alpha = invstd * wp[c * w.stride[0]];
            T a = (T)alpha, be = (T)(((const T *)b.data)[c * b.stride[0]] - mean * alpha);
            for (int64_t r = t; r < x.numel; r += NBC_BLOCK) o[c * yc + nb__k_offset(out, r)] = xp[nb__k_offset(x, r)] * a + be;
            continue;
        }
        double dot = sgd - shift * sg; /* the sum of g * (x - mean) */
        if (kind == NBC_BN_REDUCE) {
            if (t == 0) {
                o[c] = (T)sg;
                o[C + c] = (T)(dot * invstd);
            }
            continue;
        }
        T mn = (T)mean, mean_g = (T)(sg / M), k = (T)(dot * invstd * invstd / M), scale = (T)(invstd * wp[c * w.stride[0]]);
        for (int64_t r = t; r < x.numel; r += NBC_BLOCK)
            o[c * yc + nb__k_offset(out, r)] = (gp[nb__k_offset(g, r)] - mean_g - (xp[nb__k_offset(x, r)] - mn) * k) * scale;
    }
}

extern "C" int nb__k_batch_norm(int kind, const nb__k_view *out, const nb__k_view *x, int64_t xc, const nb__k_view *g, int64_t gc,
                              int64_t yc, const nb__k_view *w, const nb__k_view *b, int64_t C, double eps) {
    if (C == 0 || x->numel == 0) return 0;
    return nb__k_by_float_dtype(x->dtype, [&](auto z) {
        batch_norm_kernel<decltype(z)><<<nb__k_blocks(C * NBC_BLOCK), NBC_BLOCK, 0, nb__k_queue()>>>(kind, *out, *x, xc, *g, gc, yc, *w,
                                                                                             *b, C, eps);
        return nb__k_launched();
    });
}
