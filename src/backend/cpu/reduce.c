/* CPU kernels for reductions (sum, max, min, argmax, argmin) and softmax / log-softmax.
   Each output is reduced serially, in a fixed order; a single large reduction is split into
   chunks of a fixed size combined in order, so results never depend on the thread count. */
#include "iter.h"
#include "../kmath.h"
#include <math.h>
#include <omp.h>
#include <string.h>

#define RED_CHUNK 16384

typedef struct {
    int nk, nr;
    int64_t kdim[NB_MAX_DIMS], kst[NB_MAX_DIMS]; /* kept axes: sizes and input strides */
    int64_t rdim[NB_MAX_DIMS], rst[NB_MAX_DIMS]; /* reduced axes, coalesced */
    int64_t nout, nred;
} red_plan;

static void plan_reduce(const nb_tensor *t, int64_t mask, red_plan *p) {
    memset(p, 0, sizeof *p);
    p->nout = p->nred = 1;
    for (int d = 0; d < t->shape.ndim; d++) {
        int64_t n = t->shape.dim[d];
        if (mask & ((int64_t)1 << d)) {
            p->nred *= n;
            if (n == 1) continue;
            if (p->nr > 0 && p->rst[p->nr - 1] == t->stride[d] * n) {
                p->rdim[p->nr - 1] *= n;
                p->rst[p->nr - 1] = t->stride[d];
            } else {
                p->rdim[p->nr] = n;
                p->rst[p->nr++] = t->stride[d];
            }
        } else {
            p->nout *= n;
            p->kdim[p->nk] = n;
            p->kst[p->nk++] = t->stride[d];
        }
    }
    if (p->nr == 0) { p->rdim[0] = 1; p->rst[0] = 0; p->nr = 1; }
}

static int64_t kept_offset(const red_plan *p, int64_t o) {
    int64_t off = 0;
    for (int d = p->nk - 1; d >= 0; d--) {
        off += (o % p->kdim[d]) * p->kst[d];
        o /= p->kdim[d];
    }
    return off;
}

enum { R_SUM, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN };

/* The sum of n contiguous floats in double, in eight running sums (element j in sum j % 8)
   combined pairwise: it vectorises, and its order depends on n alone. The graph compiler's fused
   row sums (backend/cpu/lower/fused.c, jit.c) add in the same order, so compiled sums equal eager ones. */
NB_WIDE_CLONES static double sum_lanes_float(const float *x, int64_t n) {
    double a[8] = { 0 };
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) a[k] += (double)x[j + k];
    for (int k = 0; j < n; j++, k++) a[k] += (double)x[j];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* Reduces one 1-D run; for max/min it also reports the run index of the first extreme
   (NaN counts as the extreme, as torch does). Wide clones: a clone calls its callees' clone of
   the same level, so this is how sum_lanes_float's AVX-512 clone is reached. */
#define ROW_FN(T, ACC, CONTIGUOUS_SUM)                                                            \
    NB_WIDE_CLONES static void row_##T(int op, const T *x, int64_t n, int64_t st, ACC *acc, T *ext, int64_t *arg) { \
        if (op == R_SUM) {                                                                        \
            ACC s = 0;                                                                            \
            if (st == 1) s = CONTIGUOUS_SUM;                                                      \
            else for (int64_t j = 0; j < n; j++) s += (ACC)x[j * st];                            \
            *acc = s;                                                                             \
            return;                                                                               \
        }                                                                                         \
        bool want_max = op == R_MAX || op == R_ARGMAX;                                            \
        T m = x[0];                                                                               \
        int64_t a = 0;                                                                            \
        if (m == m)                                                                               \
            for (int64_t j = 1; j < n; j++) {                                                     \
                T v = x[j * st];                                                                  \
                if (v != v) { m = v; a = j; break; }                                              \
                if (want_max ? v > m : v < m) { m = v; a = j; }                                   \
            }                                                                                     \
        *ext = m;                                                                                 \
        *arg = a;                                                                                 \
    }

/* The sum of x[0..n) in order, in ACC. */
#define SEQ_SUM_FN(T, ACC)                                                                        \
    static inline ACC seq_sum_##T(const T *x, int64_t n) {                                        \
        ACC s = 0;                                                                                \
        for (int64_t j = 0; j < n; j++) s += (ACC)x[j];                                           \
        return s;                                                                                 \
    }
SEQ_SUM_FN(double, double)
SEQ_SUM_FN(int64_t, uint64_t)
SEQ_SUM_FN(int32_t, uint64_t)
SEQ_SUM_FN(uint8_t, uint64_t)
SEQ_SUM_FN(int8_t, uint64_t)
ROW_FN(float, double, sum_lanes_float(x, n))
ROW_FN(double, double, seq_sum_double(x, n))
ROW_FN(int64_t, uint64_t, seq_sum_int64_t(x, n))
ROW_FN(int32_t, uint64_t, seq_sum_int32_t(x, n))
ROW_FN(uint8_t, uint64_t, seq_sum_uint8_t(x, n))
ROW_FN(int8_t, uint64_t, seq_sum_int8_t(x, n))

/* out_f / out_i receive sums (f32/f64 or i64), extremes (input type) or indices (i64). */
#define REDUCE_FN(T, ACC, OUT_SUM_T)                                                                 \
    typedef struct {                                                                                \
        int op;                                                                                     \
        const T *base;                                                                              \
        int64_t rn, rs;                                                                             \
        ACC *acc;                                                                                   \
        T *ext;                                                                                     \
        int64_t *arg;                                                                               \
        const red_plan *p;                                                                          \
        void *out;                                                                                  \
        bool single;                                                                                \
    } red_job_##T;                                                                                  \
    /* chunks [lo, hi) of one long reduction, each into its own partial */                         \
    static void red_chunks_##T(void *c_, int64_t lo, int64_t hi, int slot) {                        \
        (void)slot;                                                                                 \
        const red_job_##T *j = c_;                                                                  \
        for (int64_t c = lo; c < hi; c++) {                                                         \
            int64_t a0 = c * RED_CHUNK, len = j->rn - a0 < RED_CHUNK ? j->rn - a0 : RED_CHUNK;      \
            row_##T(j->op, j->base + a0 * j->rs, len, j->rs, &j->acc[c], &j->ext[c], &j->arg[c]);   \
            j->arg[c] += a0;                                                                        \
        }                                                                                           \
    }                                                                                               \
    /* outputs [lo, hi), each reduced whole */                                                      \
    static void red_outs_##T(void *c_, int64_t lo, int64_t hi, int slot) {                          \
        (void)slot;                                                                                 \
        const red_job_##T *j = c_;                                                                  \
        const red_plan *p = j->p;                                                                   \
        const T *base = j->base;                                                                    \
        int op = j->op;                                                                             \
        int64_t rn = j->rn, rs = j->rs;                                                             \
        bool single = j->single;                                                                    \
        void *out = j->out;                                                                         \
        for (int64_t o = lo; o < hi; o++) {                                                         \
                const T *x = base + kept_offset(p, o);                                                  \
                ACC acc = 0;                                                                            \
                T ext = 0;                                                                              \
                int64_t arg = 0;                                                                        \
                if (single) row_##T(op, x, rn, rs, &acc, &ext, &arg);                                   \
                else {                                                                                  \
                    /* several reduced axes (sums only): rows of the innermost one, in order */         \
                    int64_t rows = p->nred / p->rdim[p->nr - 1];                                        \
                    int64_t idx[NB_MAX_DIMS] = { 0 };                                                   \
                    for (int64_t r = 0; r < rows; r++) {                                                \
                        int64_t off = 0;                                                                \
                        for (int d = 0; d < p->nr - 1; d++) off += idx[d] * p->rst[d];                  \
                        ACC part;                                                                       \
                        row_##T(R_SUM, x + off, p->rdim[p->nr - 1], p->rst[p->nr - 1], &part, &ext, &arg); \
                        acc += part;                                                                    \
                        for (int d = p->nr - 2; d >= 0; d--) {                                          \
                            if (++idx[d] < p->rdim[d]) break;                                           \
                            idx[d] = 0;                                                                 \
                        }                                                                               \
                    }                                                                                   \
                }                                                                                       \
                if (op == R_SUM) ((OUT_SUM_T *)out)[o] = (OUT_SUM_T)acc;                                \
                else if (op == R_MAX || op == R_MIN) ((T *)out)[o] = ext;                               \
                else ((int64_t *)out)[o] = arg;                                                         \
        }                                                                                           \
    }                                                                                               \
    static void reduce_##T(int op, const nb_tensor *t, const red_plan *p, void *out) {              \
        const T *base = (const T *)nb__data(t);                                                     \
        bool single = p->nr == 1;                                                                   \
        int64_t rn = p->rdim[0], rs = p->rst[0];                                                    \
        if (p->nout == 1 && single && p->nred >= 2 * RED_CHUNK) {                                   \
            /* one long reduction: fixed-size chunks in parallel, combined in order */              \
            int64_t chunks = (rn + RED_CHUNK - 1) / RED_CHUNK;                                      \
            ACC *acc = nb__alloc(sizeof(ACC) * (size_t)chunks);                                     \
            T *ext = nb__alloc(sizeof(T) * (size_t)chunks);                                         \
            int64_t *arg = nb__alloc(sizeof(int64_t) * (size_t)chunks);                             \
            if (acc && ext && arg) {                                                                \
                red_job_##T j = { op, base, rn, rs, acc, ext, arg, p, out, single };                \
                nb__parallel_for(nb__threads(), chunks, red_chunks_##T, &j);                        \
                ACC s = 0;                                                                          \
                T m = ext[0];                                                                       \
                int64_t a = arg[0];                                                                 \
                bool want_max = op == R_MAX || op == R_ARGMAX;                                      \
                for (int64_t c = 0; c < chunks; c++) {                                              \
                    s += acc[c];                                                                    \
                    if (c > 0 && m == m && (ext[c] != ext[c] || (want_max ? ext[c] > m : ext[c] < m))) { m = ext[c]; a = arg[c]; } \
                }                                                                                   \
                if (op == R_SUM) *(OUT_SUM_T *)out = (OUT_SUM_T)s;                                  \
                else if (op == R_MAX || op == R_MIN) *(T *)out = m;                                 \
                else *(int64_t *)out = a;                                                           \
            }                                                                                       \
            nb__free(acc, sizeof(ACC) * (size_t)chunks);                                            \
            nb__free(ext, sizeof(T) * (size_t)chunks);                                              \
            nb__free(arg, sizeof(int64_t) * (size_t)chunks);                                        \
            return;                                                                                 \
        }                                                                                           \
        int threads = p->nout * p->nred >= NB_PARALLEL_GRAIN && p->nout > 1 ? nb__threads() : 1;    \
        red_job_##T j = { op, base, rn, rs, NULL, NULL, NULL, p, out, single };                     \
        nb__parallel_for(threads, p->nout, red_outs_##T, &j);                                       \
    }

/* Sums over leading rows of a [R, K] layout (the gradient of a broadcast bias, sum_to): rows
   are added into a block of column accumulators, in row order, so each column is summed in
   exactly the order of the per-output loop, vectorised across columns. Column blocks are
   fixed in size, so results do not depend on the thread count. */
#define COLUMN_BLOCK 512
#define COLUMN_SUM_FN(T)                                                                         \
    typedef struct { const T *x; int64_t rows, cols; T *out; } colsum_job_##T;                   \
    NB_KERNEL_CLONES static void column_blocks_##T(void *c_, int64_t lo, int64_t hi, int slot) {                  \
        (void)slot;                                                                              \
        const colsum_job_##T *j = c_;                                                            \
        for (int64_t blk = lo; blk < hi; blk++) {                                                \
            double acc[COLUMN_BLOCK];                                                            \
            int64_t c0 = blk * COLUMN_BLOCK, n = j->cols - c0 < COLUMN_BLOCK ? j->cols - c0 : COLUMN_BLOCK; \
            for (int64_t q = 0; q < n; q++) acc[q] = 0;                                          \
            for (int64_t r = 0; r < j->rows; r++) {                                              \
                const T *row = j->x + r * j->cols + c0;                                          \
                for (int64_t q = 0; q < n; q++) acc[q] += (double)row[q];                        \
            }                                                                                    \
            for (int64_t q = 0; q < n; q++) j->out[c0 + q] = (T)acc[q];                          \
        }                                                                                        \
    }                                                                                            \
    static void column_sum_##T(const T *x, int64_t rows, int64_t cols, T *out) {                 \
        int64_t blocks = (cols + COLUMN_BLOCK - 1) / COLUMN_BLOCK;                               \
        int threads = rows * cols >= NB_PARALLEL_GRAIN && blocks > 1 ? nb__threads() : 1;        \
        colsum_job_##T j = { x, rows, cols, out };                                               \
        nb__parallel_for(threads, blocks, column_blocks_##T, &j);                                \
    }
COLUMN_SUM_FN(float)
COLUMN_SUM_FN(double)

/* Whether a sum is over the leading rows of a dense [R, K] layout: one reduced run of stride K
   whose kept axes are contiguous behind it. */
static bool leading_rows(const nb_tensor *t, const red_plan *p) {
    if (p->nr != 1 || p->rdim[0] <= 1 || p->rst[0] != p->nout || !nb_is_contiguous(t)) return false;
    int64_t st = 1;
    for (int d = p->nk - 1; d >= 0; d--) {
        if (p->kdim[d] != 1 && p->kst[d] != st) return false;
        st *= p->kdim[d];
    }
    return true;
}

REDUCE_FN(float, double, float)
REDUCE_FN(double, double, double)
/* integer sums accumulate in uint64_t: they wrap around as torch's i64 sums do, with no
   undefined overflow, and the i64 result is the same bits */
REDUCE_FN(int64_t, uint64_t, int64_t)
REDUCE_FN(int32_t, uint64_t, int64_t)
REDUCE_FN(uint8_t, uint64_t, int64_t)
REDUCE_FN(int8_t, uint64_t, int64_t)

static int run_reduce(int op, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    const nb_tensor *t = in[0];
    red_plan p;
    plan_reduce(t, args->i[0], &p);
    if (p.nout == 0) return 0;
    if (p.nred == 0) { /* sum over an empty axis */
        memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype));
        return 0;
    }
    void *o = nb__data(out);
    if (op == R_SUM && (t->dtype == NB_F32 || t->dtype == NB_F64) && p.nout > 1 && leading_rows(t, &p)) {
        if (t->dtype == NB_F32) column_sum_float(nb__data(t), p.rdim[0], p.nout, o);
        else column_sum_double(nb__data(t), p.rdim[0], p.nout, o);
        return 0;
    }
    switch (t->dtype) {
    case NB_F32: reduce_float(op, t, &p, o); break;
    case NB_F64: reduce_double(op, t, &p, o); break;
    case NB_I64: reduce_int64_t(op, t, &p, o); break;
    case NB_I32: reduce_int32_t(op, t, &p, o); break;
    case NB_U8:
    case NB_BOOL: reduce_uint8_t(op, t, &p, o); break; /* bool sums count the true elements */
    case NB_I8: reduce_int8_t(op, t, &p, o); break;
    default: nb__error("nb_reduce: no cpu kernel for dtype %s", nb_dtype_name(t->dtype)); return -1;
    }
    return 0;
}

int nb__cpu_sum(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { (void)nin; return run_reduce(R_SUM, out, in, args); }
int nb__cpu_max(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { (void)nin; return run_reduce(R_MAX, out, in, args); }
int nb__cpu_min(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { (void)nin; return run_reduce(R_MIN, out, in, args); }
int nb__cpu_argmax(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { (void)nin; return run_reduce(R_ARGMAX, out, in, args); }
int nb__cpu_argmin(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { (void)nin; return run_reduce(R_ARGMIN, out, in, args); }

/* ---------- softmax ---------- */
#define SOFTMAX_FN(T, EXP, LOG)                                                                      \
    typedef struct { const red_plan *p; const T *base; T *obase; int64_t n, st, ost; bool log_out; } softmax_job_##T; \
    NB_KERNEL_CLONES static void softmax_outs_##T(void *c_, int64_t lo, int64_t hi, int slot) {                      \
        (void)slot;                                                                                 \
        const softmax_job_##T *jb = c_;                                                              \
        const red_plan *pp = jb->p;                                                                  \
        const T *base = jb->base;                                                                    \
        T *obase = jb->obase;                                                                        \
        int64_t n = jb->n, st = jb->st, ost = jb->ost;                                                 \
        bool log_out = jb->log_out;                                                                  \
        for (int64_t o = lo; o < hi; o++) {                                                         \
            const T *x = base + kept_offset(pp, o);                                                 \
            int64_t inner = ost, oo = (o / inner) * inner * n + o % inner;                          \
            T *y = obase + oo;                                                                      \
            T m = x[0];                                                                             \
            for (int64_t j = 1; j < n; j++) if (x[j * st] > m) m = x[j * st];                       \
            if (m == -(T)INFINITY) m = 0;                                                           \
            double s = 0;                                                                           \
            for (int64_t j = 0; j < n; j++) {                                                       \
                T e = EXP(x[j * st] - m);                                                           \
                s += e;                                                                             \
                y[j * ost] = e;                                                                     \
            }                                                                                       \
            if (log_out) {                                                                          \
                T ls = (T)LOG(s);                                                                   \
                for (int64_t j = 0; j < n; j++) y[j * ost] = x[j * st] - m - ls;                    \
            } else {                                                                                \
                T inv = (T)(1.0 / s);                                                               \
                for (int64_t j = 0; j < n; j++) y[j * ost] *= inv;                                  \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
    static void softmax_##T(const nb_tensor *t, nb_tensor *out, int axis, bool log_out) {           \
        red_plan p;                                                                                 \
        plan_reduce(t, (int64_t)1 << axis, &p);                                                     \
        int64_t n = t->shape.ndim ? t->shape.dim[axis] : 1, st = t->shape.ndim ? t->stride[axis] : 0; \
        int64_t ost = 1;                                                                            \
        for (int d = axis + 1; d < out->shape.ndim; d++) ost *= out->shape.dim[d];                  \
        const T *base = (const T *)nb__data(t);                                                     \
        T *obase = (T *)nb__data(out);                                                              \
        int threads = t->numel >= NB_PARALLEL_GRAIN && p.nout > 1 ? nb__threads() : 1;              \
        softmax_job_##T j = { &p, base, obase, n, st, ost, log_out };                               \
        nb__parallel_for(threads, p.nout, softmax_outs_##T, &j);                                    \
    }
SOFTMAX_FN(float, nbk_expf, log)
SOFTMAX_FN(double, exp, log)

/* Softmax over one contiguous row in float, the attention case: the max, exp and sum loops
   vectorise (kmath.h's exp; the sum in double in simd lanes, an order fixed by the build, never
   by the thread count). */
NB_WIDE_CLONES static void softmax_row_float(const float *x, float *y, int64_t n, bool log_out) {
    float m = x[0];
    #pragma omp simd reduction(max : m)
    for (int64_t j = 1; j < n; j++) m = x[j] > m ? x[j] : m;
    if (m == -INFINITY) m = 0;
    double s = 0;
    #pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++) {
        float e = nbk_expf(x[j] - m);
        s += e;
        y[j] = e;
    }
    if (log_out) {
        float ls = (float)log(s);
        #pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = x[j] - m - ls;
    } else {
        float inv = (float)(1.0 / s);
        #pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] *= inv;
    }
}

typedef struct { const float *base; float *obase; int64_t n; bool log_out; } softmax_rows_job;

static void softmax_rows_range(void *c, int64_t lo, int64_t hi, int slot) {
    (void)slot;
    const softmax_rows_job *j = c;
    for (int64_t r = lo; r < hi; r++) softmax_row_float(j->base + r * j->n, j->obase + r * j->n, j->n, j->log_out);
}

static void softmax_rows_float(nb_tensor *t, nb_tensor *out, bool log_out) {
    int64_t n = t->shape.dim[t->shape.ndim - 1], rows = t->numel / n;
    const float *base = (const float *)nb__data(t);
    float *obase = (float *)nb__data(out);
    int threads = t->numel >= NB_PARALLEL_GRAIN && rows > 1 ? nb__threads() : 1;
    softmax_rows_job j = { base, obase, n, log_out };
    nb__parallel_for(threads, rows, softmax_rows_range, &j);
}

static int run_softmax(nb_tensor *out, nb_tensor *const *in, const nb_op_args *args, bool log_out) {
    if (in[0]->numel == 0) return 0;
    nb_tensor *t = in[0];
    int axis = (int)args->i[0];
    if (t->dtype == NB_F32 && t->shape.ndim > 0 && axis == t->shape.ndim - 1 && nb_is_contiguous(t) &&
        nb_is_contiguous(out))
        softmax_rows_float(t, out, log_out);
    else if (t->dtype == NB_F32) softmax_float(in[0], out, axis, log_out);
    else softmax_double(in[0], out, (int)args->i[0], log_out);
    return 0;
}
int nb__cpu_softmax(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { (void)nin; return run_softmax(out, in, args, false); }
int nb__cpu_log_softmax(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { (void)nin; return run_softmax(out, in, args, true); }
