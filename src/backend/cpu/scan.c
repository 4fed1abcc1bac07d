/* CPU kernels that run along one axis, lane by lane: cumulative sums and products (and the
   product's exact backward) and the stable argsort. Each lane is computed serially in a fixed
   order, so results never depend on the thread count. The output is contiguous; the inputs may
   be strided. */
#include "iter.h"
#include "../../core/threadpool.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A tensor's lanes along axis: lane o (row-major over the other axes) starts at start(o) and
   steps by step elements. */
typedef struct lanes {
    int nk;
    int64_t kdim[NB_MAX_DIMS], kst[NB_MAX_DIMS];
    int64_t n, step, count;
} lanes;

static void lanes_of(const nb_tensor *t, int axis, lanes *l) {
    memset(l, 0, sizeof *l);
    l->count = 1;
    l->n = t->shape.ndim ? t->shape.dim[axis] : 1;
    l->step = t->shape.ndim ? t->stride[axis] : 0;
    for (int d = 0; d < t->shape.ndim; d++) {
        if (d == axis) continue;
        l->kdim[l->nk] = t->shape.dim[d];
        l->kst[l->nk++] = t->stride[d];
        l->count *= t->shape.dim[d];
    }
}

static int64_t lane_start(const lanes *l, int64_t o) {
    int64_t off = 0;
    for (int d = l->nk - 1; d >= 0; d--) {
        off += (o % l->kdim[d]) * l->kst[d];
        o /= l->kdim[d];
    }
    return off;
}

typedef struct scan_job {
    nb_tensor *out;
    nb_tensor *const *in;
    int nin;
    lanes l[3]; /* out, in[0], in[1] */
    bool reverse;
    void *scratch;
    size_t scratch_lane;
    bool descending;
    int max_threads; /* 0: no cap; else the slots of scratch there are */
} scan_job;

typedef void (*lane_fn)(const scan_job *j, int64_t o, int slot);

typedef struct { const scan_job *j; lane_fn fn; } lane_range;

static void run_range(void *c, int64_t lo, int64_t hi, int slot) {
    const lane_range *r = c;
    for (int64_t o = lo; o < hi; o++) r->fn(r->j, o, slot);
}

static void run_lanes(scan_job *j, int axis, lane_fn fn) {
    lanes_of(j->out, axis, &j->l[0]);
    for (int k = 0; k < j->nin && k < 2; k++) lanes_of(j->in[k], axis, &j->l[k + 1]);
    lane_range r = { j, fn };
    int threads = j->out->numel >= NB_PARALLEL_GRAIN && j->l[0].count > 1 ? nb__threads() : 1;
    if (j->max_threads > 0 && threads > j->max_threads) threads = j->max_threads;
    nb__parallel_for(threads, j->l[0].count, run_range, &r);
}

/* ---------- cumsum and cumprod: f32 and f64 accumulate in double, as torch's CPU kernel; i64 in
   uint64_t, so it wraps around as torch's does, with no undefined overflow (the same bits) ---------- */
#define SCAN_LANE(NAME, T, ACC, INIT, OPX)                                                      \
    static void NAME(const scan_job *j, int64_t o, int slot) {                                \
        (void)slot;                                                                            \
        const T *x = (const T *)nb__data(j->in[0]) + lane_start(&j->l[1], o);                  \
        T *y = (T *)nb__data(j->out) + lane_start(&j->l[0], o);                                \
        int64_t n = j->l[0].n, xs = j->l[1].step, ys = j->l[0].step;                           \
        ACC acc = INIT;                                                                        \
        for (int64_t k = 0; k < n; k++) {                                                      \
            int64_t i = j->reverse ? n - 1 - k : k;                                            \
            acc = acc OPX (ACC)x[i * xs];                                                      \
            y[i * ys] = (T)acc;                                                                \
        }                                                                                      \
    }
SCAN_LANE(cumsum_f32, float, double, 0, +)
SCAN_LANE(cumsum_f64, double, double, 0, +)
SCAN_LANE(cumsum_i64, int64_t, uint64_t, 0, +)
SCAN_LANE(cumprod_f32, float, double, 1, *)
SCAN_LANE(cumprod_f64, double, double, 1, *)
SCAN_LANE(cumprod_i64, int64_t, uint64_t, 1, *)

static int scan(nb_tensor *out, nb_tensor *const *in, const nb_op_args *args, lane_fn f32, lane_fn f64, lane_fn i64) {
    if (out->numel == 0) return 0;
    scan_job j = { .out = out, .in = in, .nin = 1, .reverse = args->i[1] != 0 };
    lane_fn fn = in[0]->dtype == NB_F32 ? f32 : in[0]->dtype == NB_F64 ? f64 : i64;
    run_lanes(&j, (int)args->i[0], fn);
    return 0;
}

int nb__cpu_cumsum(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return scan(out, in, args, cumsum_f32, cumsum_f64, cumsum_i64);
}
int nb__cpu_cumprod(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return scan(out, in, args, cumprod_f32, cumprod_f64, cumprod_i64);
}

/* The gradient of y_k = x_0 ... x_k, exact where x has zeros (dividing by x would not be):
   dL/dx_i = P_i * S_i with P_i = x_0 ... x_{i-1} and S_i = sum_{k >= i} g_k x_{i+1} ... x_k,
   which satisfies S_i = g_i + x_{i+1} S_{i+1}. Inputs: x, then the upstream gradient g. */
#define CUMPROD_BWD_LANE(NAME, T)                                                               \
    static void NAME(const scan_job *j, int64_t o, int slot) {                                \
        (void)slot;                                                                            \
        const T *x = (const T *)nb__data(j->in[0]) + lane_start(&j->l[1], o);                  \
        const T *g = (const T *)nb__data(j->in[1]) + lane_start(&j->l[2], o);                  \
        T *y = (T *)nb__data(j->out) + lane_start(&j->l[0], o);                                \
        int64_t n = j->l[0].n, xs = j->l[1].step, gs = j->l[2].step, ys = j->l[0].step;        \
        double s = 0;                                                                          \
        for (int64_t i = n - 1; i >= 0; i--) {                                                 \
            s = (double)g[i * gs] + (i + 1 < n ? (double)x[(i + 1) * xs] * s : 0);            \
            y[i * ys] = (T)s; /* S_i for now */                                                \
        }                                                                                      \
        double p = 1;                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                      \
            y[i * ys] = (T)(p * (double)y[i * ys]);                                            \
            p *= (double)x[i * xs];                                                            \
        }                                                                                      \
    }
CUMPROD_BWD_LANE(cumprod_bwd_f32, float)
CUMPROD_BWD_LANE(cumprod_bwd_f64, double)

int nb__cpu_cumprod_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    if (out->numel == 0) return 0;
    scan_job j = { .out = out, .in = in, .nin = 2 };
    run_lanes(&j, (int)args->i[0], out->dtype == NB_F32 ? cumprod_bwd_f32 : cumprod_bwd_f64);
    return 0;
}

/* ---------- argsort: a stable merge sort of each lane's indices ---------- */
/* NaN sorts above every number (last ascending, first descending), as torch.sort. */
#define NB_IS_NAN(v) ((v) != (v))
#define SORT_LANE(NAME, T)                                                                       \
    static bool NAME##_before(T a, T b, bool desc) {                                           \
        if (desc) return NB_IS_NAN(a) ? !NB_IS_NAN(b) : a > b;                                 \
        return NB_IS_NAN(b) ? !NB_IS_NAN(a) : a < b;                                           \
    }                                                                                          \
    static void NAME(const scan_job *j, int64_t o, int slot) {                                \
        const T *x = (const T *)nb__data(j->in[0]) + lane_start(&j->l[1], o);                  \
        int64_t *y = (int64_t *)nb__data(j->out) + lane_start(&j->l[0], o);                    \
        int64_t n = j->l[0].n, xs = j->l[1].step, ys = j->l[0].step;                           \
        char *base = (char *)j->scratch + (size_t)slot * j->scratch_lane;                      \
        T *v = (T *)base;                                                                      \
        int64_t *a = (int64_t *)(base + (((size_t)n * sizeof(T) + 7) & ~(size_t)7)), *b = a + n; \
        for (int64_t i = 0; i < n; i++) { v[i] = x[i * xs]; a[i] = i; }                        \
        /* bottom-up merges of runs of width w; a tie keeps the left run's element first */     \
        for (int64_t w = 1; w < n; w *= 2) {                                                   \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                        \
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;   \
                int64_t p = lo, q = mid, k = lo;                                               \
                while (p < mid && q < hi) b[k++] = NAME##_before(v[a[q]], v[a[p]], j->descending) ? a[q++] : a[p++]; \
                while (p < mid) b[k++] = a[p++];                                               \
                while (q < hi) b[k++] = a[q++];                                                \
            }                                                                                  \
            int64_t *t = a; a = b; b = t;                                                      \
        }                                                                                      \
        for (int64_t i = 0; i < n; i++) y[i * ys] = a[i];                                      \
    }
SORT_LANE(sort_f32, float)
SORT_LANE(sort_f64, double)
SORT_LANE(sort_i64, int64_t)
SORT_LANE(sort_i32, int32_t)
SORT_LANE(sort_u8, uint8_t)
SORT_LANE(sort_i8, int8_t)

int nb__cpu_argsort(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    if (out->numel == 0) return 0;
    nb_tensor *t = in[0];
    int axis = (int)args->i[0];
    int64_t n = t->shape.ndim ? t->shape.dim[axis] : 1;
    size_t es = nb_dtype_size(t->dtype);
    scan_job j = { .out = out, .in = in, .nin = 1, .descending = args->i[1] != 0 };
    j.scratch_lane = (((size_t)n * es + 7) & ~(size_t)7) + 2 * (size_t)n * sizeof(int64_t);
    int slots = nb__threads() > 0 ? nb__threads() : 1;
    j.max_threads = slots;
    j.scratch = malloc(j.scratch_lane * (size_t)slots);
    if (!j.scratch) {
        nb__error("nb_argsort: out of memory for %d sort buffers of %lld elements", slots, (long long)n);
        return -1;
    }
    lane_fn fn = NULL;
    switch (t->dtype) {
    case NB_F32: fn = sort_f32; break;
    case NB_F64: fn = sort_f64; break;
    case NB_I64: fn = sort_i64; break;
    case NB_I32: fn = sort_i32; break;
    case NB_I8: fn = sort_i8; break;
    default: fn = sort_u8; break; /* u8 and bool */
    }
    run_lanes(&j, axis, fn);
    free(j.scratch);
    return 0;
}
