/* CPU kernels of the fused optimizer updates: one pass per parameter over its gradient and
   state, in the order of PyTorch's single-tensor implementations. Coefficients such as
   1 - beta2 and lr / (1 - beta1^t) are formed in double, as PyTorch's Python does, and rounded
   once: 1 - (float)0.999 is 1.3e-5 off 0.001, a bias that exp_avg_sq would carry. */
#include "iter.h"
#include <math.h>

/* The per-optimizer loops are inlined into each ISA clone of update_T (a call out of a clone
   would run them at the baseline ISA, scalar SSE2 on x86-64). */
#define NB_INLINE_IN_CLONE static inline __attribute__((always_inline))

#define UPDATE_FNS(T, SQRT, ATTR)                                                                      \
    NB_INLINE_IN_CLONE void sgd_##T(T *p, const T *g, T *buf, int64_t n, const nb_op_args *a) {                    \
        const T lr = (T)a->f[0], mom = (T)a->f[1], keep = (T)(1 - a->f[2]), wd = (T)a->f[3];           \
        const bool nesterov = a->i[1] != 0, first = a->i[2] != 0;                                      \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T d = g[i];                                                                                \
            if (wd != 0) d += wd * p[i];                                                               \
            if (buf) {                                                                                 \
                T b = first ? d : buf[i] * mom + keep * d;                                             \
                buf[i] = b;                                                                            \
                d = nesterov ? d + mom * b : b;                                                        \
            }                                                                                          \
            p[i] -= lr * d;                                                                            \
        }                                                                                              \
    }                                                                                                  \
    NB_INLINE_IN_CLONE void adam_##T(T *p, const T *g, T *m, T *v, T *vmax, int64_t n, const nb_op_args *a) {      \
        const T b2 = (T)a->f[2], eps = (T)a->f[3], wd = (T)a->f[4];                                    \
        const T omb1 = (T)(1 - a->f[1]), omb2 = (T)(1 - a->f[2]), decay = (T)(1 - a->f[0] * a->f[4]);  \
        const bool decoupled = a->i[2] != 0;                                                           \
        const T bc2_sqrt = (T)a->f[6], step_size = (T)a->f[7]; /* set once per step by begin */         \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = g[i], pi = p[i];                                                                    \
            if (decoupled) pi *= decay;                                                                \
            else if (wd != 0) gi += wd * pi;                                                           \
            T mi = m[i] + omb1 * (gi - m[i]);                                                          \
            T vi = v[i] * b2 + omb2 * gi * gi;                                                         \
            m[i] = mi;                                                                                 \
            v[i] = vi;                                                                                 \
            if (vmax) {                                                                                \
                if (vi > vmax[i]) vmax[i] = vi;                                                        \
                vi = vmax[i];                                                                          \
            }                                                                                          \
            T denom = SQRT(vi) / bc2_sqrt + eps;                                                       \
            p[i] = pi - step_size * (mi / denom);                                                      \
        }                                                                                              \
    }                                                                                                  \
    NB_INLINE_IN_CLONE void rmsprop_##T(T *p, const T *g, T *sq, T *buf, T *gavg, int64_t n, const nb_op_args *a) { \
        const T lr = (T)a->f[0], alpha = (T)a->f[1], oma = (T)(1 - a->f[1]), eps = (T)a->f[2];        \
        const T wd = (T)a->f[3], mom = (T)a->f[4];                                                     \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = g[i];                                                                               \
            if (wd != 0) gi += wd * p[i];                                                              \
            T s = sq[i] * alpha + oma * gi * gi;                                                       \
            sq[i] = s;                                                                                 \
            T avg;                                                                                     \
            if (gavg) {                                                                                \
                T ga = gavg[i] + oma * (gi - gavg[i]);                                                 \
                gavg[i] = ga;                                                                          \
                avg = SQRT(s - ga * ga) + eps;                                                         \
            } else avg = SQRT(s) + eps;                                                                \
            if (buf) {                                                                                 \
                T b = buf[i] * mom + gi / avg;                                                         \
                buf[i] = b;                                                                            \
                p[i] -= lr * b;                                                                        \
            } else p[i] -= lr * (gi / avg);                                                            \
        }                                                                                              \
    }                                                                                                  \
    NB_INLINE_IN_CLONE void adagrad_##T(T *p, const T *g, T *sum, int64_t n, const nb_op_args *a) {                \
        const T clr = (T)a->f[0], eps = (T)a->f[1], wd = (T)a->f[2];                                   \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = g[i];                                                                               \
            if (wd != 0) gi += wd * p[i];                                                              \
            T s = sum[i] + gi * gi;                                                                    \
            sum[i] = s;                                                                                \
            p[i] -= clr * (gi / (SQRT(s) + eps));                                                      \
        }                                                                                              \
    }                                                                                                  \
    /* NAdam's, RAdam's and Adamax's coefficients f[1..4]: beta1, beta2, eps, weight decay */        \
    typedef struct { T b1, b2, eps, wd, omb1, omb2; } moments_##T;                                     \
    NB_INLINE_IN_CLONE moments_##T moments_of_##T(const nb_op_args *a) {                               \
        return (moments_##T){ (T)a->f[1], (T)a->f[2], (T)a->f[3], (T)a->f[4], (T)(1 - a->f[1]), (T)(1 - a->f[2]) }; \
    }                                                                                                  \
    /* the gradient with weight decay and its running mean (torch's mul_(beta1).add_) */           \
    NB_INLINE_IN_CLONE T first_moment_##T(const moments_##T *c, T gi, T pi, T *m) {                   \
        if (c->wd != 0) gi += c->wd * pi;                                                              \
        *m = *m * c->b1 + c->omb1 * gi;                                                                \
        return gi;                                                                                     \
    }                                                                                                  \
    /* NAdam (torch 1.13): f[0] and f[5] carry the two step coefficients, f[6] bias_correction2 */   \
    NB_INLINE_IN_CLONE void nadam_##T(T *p, const T *g, T *m, T *v, int64_t n, const nb_op_args *a) {             \
        const moments_##T c = moments_of_##T(a);                                                       \
        const T c_grad = (T)a->f[0], c_avg = (T)a->f[5], bc2 = (T)a->f[6];                             \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = first_moment_##T(&c, g[i], p[i], &m[i]);                                            \
            T vi = v[i] * c.b2 + c.omb2 * gi * gi;                                                     \
            v[i] = vi;                                                                                 \
            T denom = SQRT(vi / bc2) + c.eps;                                                          \
            T pi = p[i] + c_grad * gi / denom;                                                         \
            p[i] = pi + c_avg * m[i] / denom;                                                          \
        }                                                                                              \
    }                                                                                                  \
    /* RAdam: f[5] bias_correction1, f[6] sqrt(bias_correction2), f[7] the rectification (i[4]: on) */ \
    NB_INLINE_IN_CLONE void radam_##T(T *p, const T *g, T *m, T *v, int64_t n, const nb_op_args *a) {             \
        const moments_##T c = moments_of_##T(a);                                                       \
        const T lr = (T)a->f[0], bc1 = (T)a->f[5], bc2_sqrt = (T)a->f[6], rect = (T)a->f[7];           \
        const bool rectified = a->i[4] != 0;                                                           \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = first_moment_##T(&c, g[i], p[i], &m[i]);                                            \
            T vi = v[i] * c.b2 + c.omb2 * gi * gi;                                                     \
            v[i] = vi;                                                                                 \
            T corrected = m[i] / bc1;                                                                  \
            if (rectified) p[i] -= corrected * lr * (bc2_sqrt / (SQRT(vi) + c.eps)) * rect;            \
            else p[i] -= corrected * lr;                                                               \
        }                                                                                              \
    }                                                                                                  \
    /* Adamax: f[6] lr / bias_correction1 */                                                         \
    NB_INLINE_IN_CLONE void adamax_##T(T *p, const T *g, T *m, T *u, int64_t n, const nb_op_args *a) {            \
        const moments_##T c = moments_of_##T(a);                                                       \
        const T neg_clr = (T)(-a->f[6]);                                                               \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = first_moment_##T(&c, g[i], p[i], &m[i]);                                            \
            T decayed = u[i] * c.b2, fresh = (gi < 0 ? -gi : gi) + c.eps;                              \
            T ui = decayed > fresh || decayed != decayed ? decayed : fresh; /* torch.amax: NaN wins */ \
            u[i] = ui;                                                                                 \
            p[i] += neg_clr * m[i] / ui;                                                               \
        }                                                                                              \
    }                                                                                                  \
    NB_INLINE_IN_CLONE void adadelta_##T(T *p, const T *g, T *sq, T *acc, int64_t n, const nb_op_args *a) {       \
        const T lr = (T)a->f[0], rho = (T)a->f[1], omr = (T)(1 - a->f[1]), eps = (T)a->f[2];           \
        const T wd = (T)a->f[3];                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = g[i];                                                                               \
            if (wd != 0) gi += wd * p[i];                                                              \
            T s = sq[i] * rho + omr * gi * gi;                                                         \
            sq[i] = s;                                                                                 \
            T delta = SQRT(acc[i] + eps) / SQRT(s + eps) * gi;                                         \
            acc[i] = acc[i] * rho + omr * delta * delta;                                               \
            p[i] -= lr * delta;                                                                        \
        }                                                                                              \
    }                                                                                                  \
    ATTR static void update_##T(nb_tensor *const *in, int nin, int64_t lo, int64_t hi, const nb_op_args *a) { \
        T *x[6] = { 0 };                                                                               \
        if (a->i[0] == NB_UPDATE_NADAM) nin = 6; /* input 6, mu_product, was read by begin */          \
        for (int k = 0, j = 0; k < nin && j < 6; k++)                                                  \
            if (k != 2 && k != 3) x[j++] = (T *)nb__data(in[k]) + lo;                                  \
        int64_t n = hi - lo;                                                                           \
        switch ((int)a->i[0]) {                                                                        \
        case NB_UPDATE_SGD: sgd_##T(x[0], x[1], x[2], n, a); break;                                    \
        case NB_UPDATE_ADAM: adam_##T(x[0], x[1], x[2], x[3], x[4], n, a); break;                      \
        case NB_UPDATE_RMSPROP: {                                                                      \
            T *buf = a->i[3] ? x[3] : NULL;                                                            \
            T *gavg = a->i[1] ? x[a->i[3] ? 4 : 3] : NULL;                                             \
            rmsprop_##T(x[0], x[1], x[2], buf, gavg, n, a);                                            \
            break;                                                                                     \
        }                                                                                              \
        case NB_UPDATE_NADAM: nadam_##T(x[0], x[1], x[2], x[3], n, a); break;                         \
        case NB_UPDATE_RADAM: radam_##T(x[0], x[1], x[2], x[3], n, a); break;                         \
        case NB_UPDATE_ADAMAX: adamax_##T(x[0], x[1], x[2], x[3], n, a); break;                       \
        case NB_UPDATE_ADADELTA: adadelta_##T(x[0], x[1], x[2], x[3], n, a); break;                   \
        default: adagrad_##T(x[0], x[1], x[2], n, a);                                                  \
        }                                                                                              \
    }

/* AVX-512 where the CPU has it: an update whose state underflows pays a microcode assist per
   vector instruction that meets a denormal, so wider vectors halve that cost */
UPDATE_FNS(float, sqrtf, NB_WIDE_CLONES)
UPDATE_FNS(double, sqrt, NB_KERNEL_CLONES)

/* Chunks of a fixed size, so a parameter is updated identically whatever the thread count; small
   enough that a layer of some ten thousand weights is shared among the threads (an update costs
   about a nanosecond an element, a parallel region a few microseconds). */
#define UPDATE_CHUNK 8192

void nb__cpu_optim_range(nb_tensor *const *in, int nin, int64_t lo, int64_t hi, const nb_op_args *a) {
    if (in[0]->dtype == NB_F64) update_double(in, nin, lo, hi, a);
    else update_float(in, nin, lo, hi, a);
}

typedef struct {
    nb_tensor *const *in;
    int nin;
    int64_t n;
    const nb_op_args *a;
} optim_job;

/* Chunks [c0, c1) of UPDATE_CHUNK elements: the split never depends on the thread count. */
static void optim_chunks(void *c, int64_t c0, int64_t c1, int slot) {
    (void)slot;
    const optim_job *j = c;
    for (int64_t c = c0; c < c1; c++) {
        int64_t lo = c * UPDATE_CHUNK, hi = lo + UPDATE_CHUNK < j->n ? lo + UPDATE_CHUNK : j->n;
        nb__cpu_optim_range(j->in, j->nin, lo, hi, j->a);
    }
}

int nb__cpu_optim_update(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    nb_op_args a;
    nb__optim_begin(in, nin, args, &a);
    int64_t n = out->numel, chunks = (n + UPDATE_CHUNK - 1) / UPDATE_CHUNK;
    int threads = chunks > 1 ? nb__threads() : 1;
    optim_job j = { in, nin, n, &a };
    nb__parallel_for(threads, chunks, optim_chunks, &j);
    nb__optim_end(in);
    return 0;
}
