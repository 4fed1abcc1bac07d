/* CPU 2-D pooling over [N, C, H, W]: max (values, window argmax indices, and the gradient
   scattered to each window's first largest element; windows may be dilated), average (padding
   counted in the divisor, as torch's default, or left out) and adaptive average (windows floor(i*H/OH) .. ceil((i+1)*H/OH)).
   Inputs may have any strides; outputs are contiguous. Work is split by (n, c) planes, each
   plane done by one thread in a fixed order, so results do not depend on the thread count. */
#include "iter.h"
#include <math.h>
#include <string.h>

typedef nb_pool_geom pool_geom;

/* Output position o's window [lo, hi) along an axis of size n with nout outputs; span is the
   divisor's share (the window clipped to the padded input, as torch counts it). */
static void window(const pool_geom *g, int axis, int64_t o, int64_t n, int64_t nout, int64_t *lo, int64_t *hi, int64_t *span) {
    if (g->adaptive) {
        *lo = o * n / nout;
        *hi = ((o + 1) * n + nout - 1) / nout;
        *span = *hi - *lo;
        return;
    }
    int64_t a = o * g->s[axis] - g->p[axis];
    int64_t b = a + g->k[axis];
    if (b > n + g->p[axis]) b = n + g->p[axis];
    *span = b - a;
    *lo = a < 0 ? 0 : a;
    *hi = b > n ? n : b;
}

/* A max pool's dilated window along an axis: places first, first + d, ... (count of them) that lie
   inside the input; first is the window's first place inside it. */
static void dilated_window(const pool_geom *g, int axis, int64_t o, int64_t n, int64_t *first, int64_t *count) {
    int64_t a = o * g->s[axis] - g->p[axis], d = g->d[axis];
    int64_t t0 = a < 0 ? (-a + d - 1) / d : 0; /* the first step that lands inside */
    int64_t t1 = a + (g->k[axis] - 1) * d < n ? g->k[axis] : (n - 1 - a) / d + 1;
    *first = a + t0 * d;
    *count = t1 > t0 ? t1 - t0 : 0;
}

static int plane_threads(int64_t planes, int64_t work) {
    return planes > 1 && work >= NB_PARALLEL_GRAIN ? nb__threads() : 1;
}

/* The common 2x2 window at stride 2 without padding or dilation over rows of unit stride, every
   window inside the plane (no ceil_mode window past its end), so no window bounds are computed; the four reads are compared in the
   generic loop's order, so values and indices are the same. */
static bool is_2x2(const pool_geom *g) {
    return !g->adaptive && g->k[0] == 2 && g->k[1] == 2 && g->s[0] == 2 && g->s[1] == 2 && g->p[0] == 0 &&
           g->p[1] == 0 && g->d[0] == 1 && g->d[1] == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W && g->xs[3] == 1;
}

/* m becomes v where v is larger or NaN (a later NaN replaces an earlier one, as torch's loop),
   without a branch: random data would mispredict half of them */
#define MAX_SEL(T, m, v)                     \
    do {                                     \
        T v_ = (v);                          \
        m = (v_ > m || v_ != v_) ? v_ : m;   \
    } while (0)
/* The plane offset, from the window's top-left, of a 2x2 window's first largest value (rows r0
   and r1 of width W), by the generic loop's comparisons in its order. */
#define ARG_2X2(T, r0, r1, W)                                                                    \
    ({                                                                                           \
        T m_ = (r0)[0];                                                                          \
        int64_t a_ = 0;                                                                          \
        T v1_ = (r0)[1], v2_ = (r1)[0], v3_ = (r1)[1];                                           \
        bool t_ = v1_ > m_ || v1_ != v1_;                                                        \
        m_ = t_ ? v1_ : m_, a_ = t_ ? 1 : a_;                                                    \
        t_ = v2_ > m_ || v2_ != v2_;                                                             \
        m_ = t_ ? v2_ : m_, a_ = t_ ? (W) : a_;                                                  \
        t_ = v3_ > m_ || v3_ != v3_;                                                             \
        a_ = t_ ? (W) + 1 : a_;                                                                  \
        a_;                                                                                      \
    })

/* mode 0: max values, 1: argmax indices (i64, h * W + w within the plane) */
#define POOL_FNS(T)                                                                                      \
    /* Output row oh of a max pool's values. Columns whose windows lie inside the row take one pass  \
       per window place over the row, selects the compiler vectorises (a branch per compare         \
       mispredicts half the time on random data); the rest walk their clipped windows. Each output \
       sees its window's places in the generic loop's order, so the values are the same. */         \
    static inline void max_row_##T(const pool_geom *g, const T *restrict x, T *restrict o, int64_t oh) { \
        int64_t h0, hn, p1 = g->p[1], s1 = g->s[1], d1 = g->d[1], k1 = g->k[1];                       \
        dilated_window(g, 0, oh, g->H, &h0, &hn);                                                        \
        int64_t a = (p1 + s1 - 1) / s1, last = g->W - 1 + p1 - (k1 - 1) * d1;                           \
        int64_t b = last < 0 ? 0 : last / s1 + 1;                                                        \
        if (b > g->OW) b = g->OW;                                                                        \
        if (a > b) a = b;                                                                                \
        if (g->xs[3] != 1) a = b = 0; /* strided rows: every column walks its window */                  \
        for (int64_t ow = 0; ow < g->OW; ow++) {                                                         \
            if (ow == a) ow = b;                                                                         \
            if (ow >= g->OW) break;                                                                      \
            int64_t w0, wn;                                                                              \
            dilated_window(g, 1, ow, g->W, &w0, &wn);                                                    \
            const T *p = x + h0 * g->xs[2] + w0 * g->xs[3];                                              \
            T m = -INFINITY;                                                                             \
            for (int64_t th = 0; th < hn; th++, p += g->d[0] * g->xs[2])                                 \
                for (int64_t tw = 0; tw < wn; tw++) MAX_SEL(T, m, p[tw * d1 * g->xs[3]]);                \
            o[ow] = m;                                                                                   \
        }                                                                                                \
        for (int64_t ow = a; ow < b; ow++) o[ow] = -INFINITY;                                            \
        for (int64_t th = 0; th < hn; th++) {                                                            \
            const T *r = x + (h0 + th * g->d[0]) * g->xs[2];                                             \
            for (int64_t tw = 0; tw < k1; tw++) {                                                        \
                int64_t c = tw * d1 - p1; /* an offset: r + c may lie before the row */                 \
                if (s1 == 1)                                                                             \
                    for (int64_t ow = a; ow < b; ow++) MAX_SEL(T, o[ow], r[c + ow]);                     \
                else if (s1 == 2)                                                                        \
                    for (int64_t ow = a; ow < b; ow++) MAX_SEL(T, o[ow], r[c + 2 * ow]);                 \
                else                                                                                     \
                    for (int64_t ow = a; ow < b; ow++) MAX_SEL(T, o[ow], r[c + ow * s1]);                \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    NB_KERNEL_CLONES static void max_plane_##T(const pool_geom *g, const T *x, void *out, int mode) {                    \
        if (is_2x2(g)) {                                                                                 \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                                     \
                const T *r0 = x + 2 * oh * g->xs[2], *r1 = r0 + g->xs[2];                                \
                if (mode == 0) {                                                                         \
                    T *o = (T *)out + oh * g->OW;                                                        \
                    for (int64_t ow = 0; ow < g->OW; ow++) {                                             \
                        T m = r0[2 * ow];                                                                \
                        MAX_SEL(T, m, r0[2 * ow + 1]);                                                   \
                        MAX_SEL(T, m, r1[2 * ow]);                                                       \
                        MAX_SEL(T, m, r1[2 * ow + 1]);                                                   \
                        o[ow] = m;                                                                       \
                    }                                                                                    \
                } else                                                                                   \
                    for (int64_t ow = 0; ow < g->OW; ow++) {                                             \
                        int64_t at = 2 * oh * g->W + 2 * ow;                                             \
                        ((int64_t *)out)[oh * g->OW + ow] = at + ARG_2X2(T, r0 + 2 * ow, r1 + 2 * ow, g->W); \
                    }                                                                                    \
            }                                                                                            \
            return;                                                                                      \
        }                                                                                                \
        if (mode == 0) {                                                                                 \
            for (int64_t oh = 0; oh < g->OH; oh++) max_row_##T(g, x, (T *)out + oh * g->OW, oh);         \
            return;                                                                                      \
        }                                                                                                \
        int64_t i = 0;                                                                                   \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                         \
            int64_t h0, hn;                                                                              \
            dilated_window(g, 0, oh, g->H, &h0, &hn);                                                    \
            for (int64_t ow = 0; ow < g->OW; ow++, i++) {                                                \
                int64_t w0, wn;                                                                          \
                dilated_window(g, 1, ow, g->W, &w0, &wn);                                                \
                T m = -INFINITY;                                                                         \
                int64_t arg = h0 * g->W + w0;                                                            \
                for (int64_t th = 0, ih = h0; th < hn; th++, ih += g->d[0])                              \
                    for (int64_t tw = 0, iw = w0; tw < wn; tw++, iw += g->d[1]) {                        \
                        T v = x[ih * g->xs[2] + iw * g->xs[3]];                                          \
                        if (v > m || isnan(v)) { m = v; arg = ih * g->W + iw; }                          \
                    }                                                                                    \
                if (mode == 0) ((T *)out)[i] = m;                                                        \
                else ((int64_t *)out)[i] = arg;                                                          \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    /* dx (contiguous plane, zeroed) += dy at each window's argmax of x; dy has strides ys */            \
    NB_KERNEL_CLONES static void max_bwd_plane_##T(const pool_geom *g, const T *x, const T *dy, const int64_t *ys, T *dx) { \
        if (is_2x2(g)) { /* windows do not overlap: each of a window's four places is written once */ \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                                     \
                const T *r0 = x + 2 * oh * g->xs[2], *r1 = r0 + g->xs[2];                                \
                T *d0 = dx + 2 * oh * g->W, *d1 = d0 + g->W;                                             \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                                 \
                    int64_t k = ARG_2X2(T, r0 + 2 * ow, r1 + 2 * ow, g->W);                              \
                    T v = dy[oh * ys[2] + ow * ys[3]];                                                   \
                    d0[2 * ow] = k == 0 ? v : 0;                                                         \
                    d0[2 * ow + 1] = k == 1 ? v : 0;                                                     \
                    d1[2 * ow] = k == g->W ? v : 0;                                                      \
                    d1[2 * ow + 1] = k == g->W + 1 ? v : 0;                                              \
                }                                                                                        \
            }                                                                                            \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                         \
            int64_t h0, hn;                                                                              \
            dilated_window(g, 0, oh, g->H, &h0, &hn);                                                    \
            for (int64_t ow = 0; ow < g->OW; ow++) {                                                     \
                int64_t w0, wn;                                                                          \
                dilated_window(g, 1, ow, g->W, &w0, &wn);                                                \
                T m = -INFINITY;                                                                         \
                int64_t arg = h0 * g->W + w0;                                                            \
                for (int64_t th = 0, ih = h0; th < hn; th++, ih += g->d[0])                              \
                    for (int64_t tw = 0, iw = w0; tw < wn; tw++, iw += g->d[1]) {                        \
                        T v = x[ih * g->xs[2] + iw * g->xs[3]];                                          \
                        if (v > m || isnan(v)) { m = v; arg = ih * g->W + iw; }                          \
                    }                                                                                    \
                if (hn > 0 && wn > 0) dx[arg] += dy[oh * ys[2] + ow * ys[3]]; /* else all padding */     \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    NB_KERNEL_CLONES static void avg_plane_##T(const pool_geom *g, const T *x, T *y) {                                    \
        int64_t i = 0;                                                                                   \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                         \
            int64_t h0, h1, sh;                                                                          \
            window(g, 0, oh, g->H, g->OH, &h0, &h1, &sh);                                                \
            for (int64_t ow = 0; ow < g->OW; ow++, i++) {                                                \
                int64_t w0, w1, sw;                                                                      \
                window(g, 1, ow, g->W, g->OW, &w0, &w1, &sw);                                            \
                double s = 0;                                                                            \
                for (int64_t ih = h0; ih < h1; ih++)                                                     \
                    for (int64_t iw = w0; iw < w1; iw++) s += x[ih * g->xs[2] + iw * g->xs[3]];          \
                y[i] = (T)(s / (double)(g->exclude_padding ? (h1 - h0) * (w1 - w0) : sh * sw));         \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    NB_KERNEL_CLONES static void avg_bwd_plane_##T(const pool_geom *g, const T *dy, const int64_t *ys, T *dx) {           \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                         \
            int64_t h0, h1, sh;                                                                          \
            window(g, 0, oh, g->H, g->OH, &h0, &h1, &sh);                                                \
            for (int64_t ow = 0; ow < g->OW; ow++) {                                                     \
                int64_t w0, w1, sw;                                                                      \
                window(g, 1, ow, g->W, g->OW, &w0, &w1, &sw);                                            \
                T v = (T)(dy[oh * ys[2] + ow * ys[3]] / (double)(g->exclude_padding ? (h1 - h0) * (w1 - w0) : sh * sw)); \
                for (int64_t ih = h0; ih < h1; ih++)                                                     \
                    for (int64_t iw = w0; iw < w1; iw++) dx[ih * g->W + iw] += v;                        \
            }                                                                                            \
        }                                                                                                \
    }

POOL_FNS(float)
POOL_FNS(double)

static int64_t plane_off(const int64_t *st, int64_t plane, int64_t C) { return (plane / C) * st[0] + (plane % C) * st[1]; }

/* One pooling pass over planes, run on the thread pool. */
enum { MAX_FWD, MAX_BWD, AVG_FWD, AVG_BWD };
typedef struct {
    const pool_geom *g;
    int kind, mode;
    bool f64;
    const void *x, *dy;      /* the input read (x) and the gradient read (dy), as the pass needs */
    const int64_t *ys;       /* dy's strides */
    void *out;
    int64_t L, HW, oes;
} plane_job;

static void plane_range(void *c, int64_t lo, int64_t hi, int slot) {
    (void)slot;
    const plane_job *j = c;
    const pool_geom *g = j->g;
    for (int64_t pl = lo; pl < hi; pl++) {
        if (j->f64) {
            const double *px = j->x, *py = j->dy;
            double *pd = j->out;
            switch (j->kind) {
            case MAX_FWD: max_plane_double(g, px + plane_off(g->xs, pl, g->C), (char *)j->out + pl * j->L * j->oes, j->mode); break;
            case MAX_BWD: max_bwd_plane_double(g, px + plane_off(g->xs, pl, g->C), py + plane_off(j->ys, pl, g->C), j->ys, pd + pl * j->HW); break;
            case AVG_FWD: avg_plane_double(g, px + plane_off(g->xs, pl, g->C), pd + pl * j->L); break;
            default: avg_bwd_plane_double(g, py + plane_off(j->ys, pl, g->C), j->ys, pd + pl * j->HW); break;
            }
        } else {
            const float *px = j->x, *py = j->dy;
            float *pd = j->out;
            switch (j->kind) {
            case MAX_FWD: max_plane_float(g, px + plane_off(g->xs, pl, g->C), (char *)j->out + pl * j->L * j->oes, j->mode); break;
            case MAX_BWD: max_bwd_plane_float(g, px + plane_off(g->xs, pl, g->C), py + plane_off(j->ys, pl, g->C), j->ys, pd + pl * j->HW); break;
            case AVG_FWD: avg_plane_float(g, px + plane_off(g->xs, pl, g->C), pd + pl * j->L); break;
            default: avg_bwd_plane_float(g, py + plane_off(j->ys, pl, g->C), j->ys, pd + pl * j->HW); break;
            }
        }
    }
}

static int max_pool(nb_tensor *out, nb_tensor *x, const nb_op_args *args, int mode) {
    pool_geom g = nb__pool_geometry(&x->shape, &out->shape, args, false);
    memcpy(g.xs, x->stride, sizeof g.xs);
    int64_t planes = g.N * g.C, L = g.OH * g.OW;
    if (out->numel == 0) return 0;
    size_t oes = nb_dtype_size(out->dtype);
    char *po = nb__data(out);
    int threads = plane_threads(planes, out->numel * g.k[0] * g.k[1]);
    plane_job j = { &g, MAX_FWD, mode, x->dtype == NB_F64, nb__data(x), NULL, NULL, po, L, 0, (int64_t)oes };
    nb__parallel_for(threads, planes, plane_range, &j);
    return 0;
}

int nb__cpu_max_pool2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return max_pool(out, in[0], args, 0);
}

int nb__cpu_max_pool2d_indices(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return max_pool(out, in[0], args, 1);
}

/* max_pool2d_backward(dy, x) -> dx */
int nb__cpu_max_pool2d_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    nb_tensor *dy = in[0], *x = in[1];
    pool_geom g = nb__pool_geometry(&x->shape, &dy->shape, args, false);
    memcpy(g.xs, x->stride, sizeof g.xs);
    int64_t planes = g.N * g.C, HW = g.H * g.W;
    if (out->numel == 0) return 0;
    if (!is_2x2(&g) || g.H != 2 * g.OH || g.W != 2 * g.OW) /* else the windows write every place */
        memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
    int threads = plane_threads(planes, dy->numel * g.k[0] * g.k[1]);
    const int64_t *ys = dy->stride;
    plane_job j = { &g, MAX_BWD, 0, x->dtype == NB_F64, nb__data(x), nb__data(dy), ys, nb__data(out), 0, HW, 0 };
    nb__parallel_for(threads, planes, plane_range, &j);
    return 0;
}

static int avg_pool(nb_tensor *out, nb_tensor *x, const nb_op_args *args, bool adaptive) {
    pool_geom g = nb__pool_geometry(&x->shape, &out->shape, args, adaptive);
    memcpy(g.xs, x->stride, sizeof g.xs);
    int64_t planes = g.N * g.C, L = g.OH * g.OW;
    if (out->numel == 0) return 0;
    int64_t win = adaptive ? (g.H / g.OH + 1) * (g.W / g.OW + 1) : g.k[0] * g.k[1];
    int threads = plane_threads(planes, out->numel * win);
    plane_job j = { &g, AVG_FWD, 0, x->dtype == NB_F64, nb__data(x), NULL, NULL, nb__data(out), L, 0, 0 };
    nb__parallel_for(threads, planes, plane_range, &j);
    return 0;
}

static int avg_pool_backward(nb_tensor *out, nb_tensor *dy, const nb_op_args *args, bool adaptive) {
    pool_geom g = nb__pool_geometry(&out->shape, &dy->shape, args, adaptive);
    int64_t planes = g.N * g.C, HW = g.H * g.W;
    if (out->numel == 0) return 0;
    memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
    int64_t win = adaptive ? (g.H / g.OH + 1) * (g.W / g.OW + 1) : g.k[0] * g.k[1];
    int threads = plane_threads(planes, dy->numel * win);
    const int64_t *ys = dy->stride;
    plane_job j = { &g, AVG_BWD, 0, dy->dtype == NB_F64, NULL, nb__data(dy), ys, nb__data(out), 0, HW, 0 };
    nb__parallel_for(threads, planes, plane_range, &j);
    return 0;
}

int nb__cpu_avg_pool2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool(out, in[0], args, false);
}
int nb__cpu_avg_pool2d_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool_backward(out, in[0], args, false);
}
int nb__cpu_adaptive_avg_pool2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool(out, in[0], args, true);
}
int nb__cpu_adaptive_avg_pool2d_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return avg_pool_backward(out, in[0], args, true);
}
