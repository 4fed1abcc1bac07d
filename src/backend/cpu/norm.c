/* CPU batch normalisation over [N, C, ...] with the batch's own statistics: the statistics
   alone (mean and biased variance, for the running averages), the normalised output, and the
   two halves of its gradient (the per-channel sums that give the weight and bias gradients, and
   the input gradient). Each channel is one piece of work done serially in a fixed order, in
   double, so results never depend on the thread count; a channel's values are read once from
   memory and again from cache. Inputs may have any strides (an expanded gradient has stride 0);
   outputs are contiguous. */
#include "iter.h"
#include "../../core/threadpool.h"
#include <math.h>
#include <string.h>

/* Channel c of a tensor [N, C, rest...]: sample n's values sit at base + n*sn + c*sc, then along
   the rest of the axes, merged into one run of L elements at stride sl when their strides allow
   (else each element's offset is unravelled). */
typedef struct chan_layout {
    const char *base;
    int64_t n, sn, sc, L, sl;
    bool merged;
    int nr;
    int64_t rdim[NB_MAX_DIMS], rst[NB_MAX_DIMS];
    size_t esize;
} chan_layout;

static chan_layout layout_of(const nb_tensor *t) {
    chan_layout c = { .base = nb__data(t), .n = t->shape.dim[0], .sn = t->stride[0], .sc = t->stride[1], .L = 1,
                      .merged = true, .esize = nb__esize(t->dtype) };
    int64_t expect = -1;
    for (int d = t->shape.ndim - 1; d >= 2; d--) {
        c.rdim[c.nr] = t->shape.dim[d];
        c.rst[c.nr++] = t->stride[d];
        c.L *= t->shape.dim[d];
        if (t->shape.dim[d] == 1) continue;
        if (expect < 0) c.sl = t->stride[d];
        else if (t->stride[d] != expect) c.merged = false;
        expect = t->stride[d] * t->shape.dim[d];
    }
    return c;
}

/* Element offset of the l-th value of a sample's run. */
static int64_t rest_offset(const chan_layout *c, int64_t l) {
    if (c->merged) return l * c->sl;
    int64_t off = 0;
    for (int k = 0; k < c->nr; k++) {
        off += (l % c->rdim[k]) * c->rst[k];
        l /= c->rdim[k];
    }
    return off;
}

typedef struct bn_job {
    chan_layout x, g;
    char *out;
    const char *w, *b;
    int64_t C;
    double eps;
    int kind;
} bn_job;

enum { BN_STATS, BN_FORWARD, BN_REDUCE, BN_BACKWARD };

/* One pass over a channel gathers everything its statistics and gradient need, in double, in
   eight running sums over its runs' groups of eight values and eight more over the runs' tails
   (the k-th value of a tail in sum k % 8), added pairwise at the end: it vectorises, and its
   order depends on the shape alone. Values are taken about a shift s, the channel's first
   value, so that the variance from the sums of d = x - s and d^2 loses nothing to cancellation
   unless the mean lies far outside the data. With a gradient g, the sums of g and g * d too. */
typedef struct moments { double s, d, dd, g, gd; } moments;
/* Four values as doubles (GCC's and clang's vector extensions: one AVX register, two SSE or NEON
   ones), for loops that the compilers do not vectorise on their own. */
typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
/* Four consecutive values at p as doubles (macros, not functions: a vector return would change
   the ABI of the clones built without AVX). */
#define LOAD4_float(p) ({ v4f f_; memcpy(&f_, (p), sizeof f_); __builtin_convertvector(f_, v4d); })
#define LOAD4_double(p) ({ v4d d_; memcpy(&d_, (p), sizeof d_); d_; })
/* Eight partial sums, four in lo and four in hi, added pairwise. */
#define LANES8(lo, hi) ((((lo)[0] + (lo)[1]) + ((lo)[2] + (lo)[3])) + (((hi)[0] + (hi)[1]) + ((hi)[2] + (hi)[3])))
#define BN_FNS(T)                                                                                            \
    NB_KERNEL_CLONES static moments chan_moments_##T(const chan_layout *x, const chan_layout *g, int64_t c) {   \
        moments m = { .s = (double)*((const T *)x->base + c * x->sc) };                                    \
        double s = m.s;                                                                                    \
        v4d a1l = { 0 }, a1h = { 0 }, a2l = { 0 }, a2h = { 0 }, b0l = { 0 }, b0h = { 0 }, b1l = { 0 }, b1h = { 0 }; \
        double t1[8] = { 0 }, t2[8] = { 0 }, u0[8] = { 0 }, u1[8] = { 0 }; /* the runs' tails */        \
        bool unit = x->merged && x->sl == 1 && (!g || (g->merged && g->sl == 1));                          \
        for (int64_t n = 0; n < x->n; n++) {                                                               \
            const T *xp = (const T *)x->base + n * x->sn + c * x->sc;                                      \
            const T *gp = g ? (const T *)g->base + n * g->sn + c * g->sc : NULL;                           \
            int64_t j = 0, L = x->L;                                                                       \
            if (unit && !g)                                                                                \
                for (; j + 8 <= L; j += 8) {                                                               \
                    v4d dl = LOAD4_##T(xp + j) - s, dh = LOAD4_##T(xp + j + 4) - s;                        \
                    a1l += dl;                                                                             \
                    a1h += dh;                                                                             \
                    a2l += dl * dl;                                                                        \
                    a2h += dh * dh;                                                                        \
                }                                                                                          \
            else if (unit)                                                                                 \
                for (; j + 8 <= L; j += 8) {                                                               \
                    v4d dl = LOAD4_##T(xp + j) - s, dh = LOAD4_##T(xp + j + 4) - s;                        \
                    v4d gl = LOAD4_##T(gp + j), gh = LOAD4_##T(gp + j + 4);                                \
                    a1l += dl;                                                                             \
                    a1h += dh;                                                                             \
                    a2l += dl * dl;                                                                        \
                    a2h += dh * dh;                                                                        \
                    b0l += gl;                                                                             \
                    b0h += gh;                                                                             \
                    b1l += gl * dl;                                                                        \
                    b1h += gh * dh;                                                                        \
                }                                                                                          \
            for (int k = 0; j < L; j++, k = (k + 1) % 8) {                                                 \
                double d = (double)xp[rest_offset(x, j)] - s, gv = g ? (double)gp[rest_offset(g, j)] : 0; \
                t1[k] += d;                                                                                \
                t2[k] += d * d;                                                                            \
                u0[k] += gv;                                                                               \
                u1[k] += gv * d;                                                                           \
            }                                                                                              \
        }                                                                                                  \
        m.d = LANES8(a1l, a1h) + LANES8(t1, t1 + 4);                                                       \
        m.dd = LANES8(a2l, a2h) + LANES8(t2, t2 + 4);                                                      \
        m.g = LANES8(b0l, b0h) + LANES8(u0, u0 + 4);                                                       \
        m.gd = LANES8(b1l, b1h) + LANES8(u1, u1 + 4);                                                      \
        return m;                                                                                          \
    }                                                                                                      \
    /* y = x * alpha + beta over channel c (y contiguous), as torch's CPU kernel writes it */              \
    NB_KERNEL_CLONES static void chan_affine_##T(const chan_layout *x, T *y, int64_t C, int64_t c, T alpha, T beta) { \
        for (int64_t n = 0; n < x->n; n++) {                                                               \
            const T *xp = (const T *)x->base + n * x->sn + c * x->sc;                                      \
            T *yp = y + (n * C + c) * x->L;                                                                \
            if (x->merged && x->sl == 1)                                                                   \
                for (int64_t j = 0; j < x->L; j++) yp[j] = xp[j] * alpha + beta;                           \
            else                                                                                           \
                for (int64_t j = 0; j < x->L; j++) yp[j] = xp[rest_offset(x, j)] * alpha + beta;          \
        }                                                                                                  \
    }                                                                                                      \
    /* dx = (g - mean_g - (x - mean) * k) * scale over channel c (dx contiguous) */                        \
    NB_KERNEL_CLONES static void chan_dx_##T(const chan_layout *x, const chan_layout *g, T *dx, int64_t C, int64_t c, \
                                             T mean, T mean_g, T k, T scale) {                             \
        for (int64_t n = 0; n < x->n; n++) {                                                               \
            const T *xp = (const T *)x->base + n * x->sn + c * x->sc;                                      \
            const T *gp = (const T *)g->base + n * g->sn + c * g->sc;                                      \
            T *dp = dx + (n * C + c) * x->L;                                                               \
            if (x->merged && x->sl == 1 && g->merged && g->sl == 1)                                        \
                for (int64_t j = 0; j < x->L; j++) dp[j] = (gp[j] - mean_g - (xp[j] - mean) * k) * scale; \
            else                                                                                           \
                for (int64_t j = 0; j < x->L; j++)                                                         \
                    dp[j] = (gp[rest_offset(g, j)] - mean_g - (xp[rest_offset(x, j)] - mean) * k) * scale; \
        }                                                                                                  \
    }                                                                                                      \
    static void channel_##T(const bn_job *j, int64_t c) {                                                  \
        bool grad = j->kind == BN_REDUCE || j->kind == BN_BACKWARD;                                        \
        moments mo = chan_moments_##T(&j->x, grad ? &j->g : NULL, c);                                      \
        double M = (double)(j->x.n * j->x.L), shift = mo.d / M;                                            \
        double mean = mo.s + shift, var = mo.dd / M - shift * shift;                                       \
        if (var < 0) var = 0;                                                                              \
        T *out = (T *)j->out;                                                                              \
        if (j->kind == BN_STATS) {                                                                         \
            out[c] = (T)mean;                                                                              \
            out[j->C + c] = (T)var;                                                                        \
            return;                                                                                        \
        }                                                                                                  \
        double invstd = 1.0 / sqrt(var + j->eps);                                                          \
        if (j->kind == BN_FORWARD) {                                                                       \
            double alpha = invstd * ((const T *)j->w)[c];                                                  \
            chan_affine_##T(&j->x, out, j->C, c, (T)alpha, (T)(((const T *)j->b)[c] - mean * alpha));     \
            return;                                                                                        \
        }                                                                                                  \
        double dot = mo.gd - shift * mo.g; /* sum of g * (x - mean) */                                     \
        if (j->kind == BN_REDUCE) {                                                                        \
            out[c] = (T)mo.g;                                                                              \
            out[j->C + c] = (T)(dot * invstd);                                                             \
            return;                                                                                        \
        }                                                                                                  \
        chan_dx_##T(&j->x, &j->g, out, j->C, c, (T)mean, (T)(mo.g / M), (T)(dot * invstd * invstd / M),   \
                    (T)(invstd * ((const T *)j->w)[c]));                                                   \
    }
BN_FNS(float)
BN_FNS(double)

static void channel_range(void *ctx, int64_t lo, int64_t hi, int slot) {
    (void)slot;
    const bn_job *j = ctx;
    for (int64_t c = lo; c < hi; c++) {
        if (j->x.esize == sizeof(float)) channel_float(j, c);
        else channel_double(j, c);
    }
}

/* in: x (or g, x for the gradient kinds), then w and b where the kind reads them */
static int run(int kind, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    bool grad = kind == BN_REDUCE || kind == BN_BACKWARD;
    nb_tensor *x = in[grad ? 1 : 0];
    bn_job j = { .x = layout_of(x), .out = nb__data(out), .C = x->shape.dim[1], .eps = args->f[0], .kind = kind };
    if (grad) j.g = layout_of(in[0]);
    if (kind == BN_FORWARD) {
        j.w = nb__data(in[1]);
        j.b = nb__data(in[2]);
    } else if (kind == BN_BACKWARD)
        j.w = nb__data(in[2]);
    if (j.C == 0) return 0;
    if (x->numel == 0) { /* no samples: the statistics are NaN, as torch's mean of nothing */
        if (kind == BN_STATS || kind == BN_REDUCE)
            for (int64_t k = 0; k < 2 * j.C; k++) {
                if (out->dtype == NB_F32) ((float *)j.out)[k] = kind == BN_STATS ? NAN : 0;
                else ((double *)j.out)[k] = kind == BN_STATS ? NAN : 0;
            }
        return 0;
    }
    int threads = x->numel >= NB_PARALLEL_GRAIN && j.C > 1 ? nb__threads() : 1;
    nb__parallel_for(threads, j.C, channel_range, &j);
    return 0;
}

int nb__cpu_batch_norm_stats(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run(BN_STATS, out, in, args);
}
int nb__cpu_batch_norm(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run(BN_FORWARD, out, in, args);
}
int nb__cpu_batch_norm_reduce(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run(BN_REDUCE, out, in, args);
}
int nb__cpu_batch_norm_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run(BN_BACKWARD, out, in, args);
}
