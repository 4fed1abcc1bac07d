/* CPU 2-D convolution: im2col + GEMM (gemm.h: CBLAS, or nabla's own), for the forward and both gradients.

   Each sample's output is one GEMM per group over its own column buffer. With more than one
   thread and a batch to share, samples are spread over nabla's thread pool (BLAS runs serially
   inside each). Either way
   each output element is computed by one GEMM in one order, so results do not depend on the
   thread count. The weight gradient sums over samples: samples are cut into chunks whose
   number depends only on the shapes, each chunk accumulates its samples in order into its own
   buffer, and the chunks are added in order. */
#include "iter.h"
#include "dnnl_conv.h"
#include "gemm.h"
#include <string.h>


/* t itself (a new reference) when contiguous, else a contiguous copy made by the backend. */
static nb_tensor *dense(nb_tensor *t) {
    if (nb_is_contiguous(t)) return nb_retain(t);
    nb_tensor *c = nb__tensor_new(t->shape, t->dtype);
    if (!c) return NULL;
    nb_iter it;
    nb__iter_init(&it, c, &t, 1);
    nb__iter_run(&it, nb__cpu_copy_fn(nb_dtype_size(t->dtype)), NULL);
    return c;
}

typedef struct conv_geom {
    int64_t N, C, H, W;     /* input */
    int64_t O, OH, OW;      /* output */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int64_t Cg, Og;         /* channels per group */
    int64_t K, L;           /* GEMM inner size Cg*kh*kw and spatial size OH*OW */
    bool direct;            /* 1x1, stride 1, no padding: the input is its own column matrix */
    bool bf16;              /* autocast: operands rounded to bf16 (oneDNN's bf16 kernels) */
    nb_conv_const wconst;   /* the forward's weights, when constant (oneDNN keeps them reordered) */
} conv_geom;

static conv_geom make_geom(const nb_shape *x, const nb_shape *w, const nb_shape *y, const nb_op_args *a) {
    conv_geom g;
    g.N = x->dim[0]; g.C = x->dim[1]; g.H = x->dim[2]; g.W = x->dim[3];
    g.O = w->dim[0]; g.kh = w->dim[2]; g.kw = w->dim[3];
    g.OH = y->dim[2]; g.OW = y->dim[3];
    g.sh = a->i[0]; g.sw = a->i[1]; g.ph = a->i[2]; g.pw = a->i[3]; g.dh = a->i[4]; g.dw = a->i[5];
    g.groups = a->i[6];
    g.Cg = g.C / g.groups;
    g.Og = g.O / g.groups;
    g.K = g.Cg * g.kh * g.kw;
    g.L = g.OH * g.OW;
    g.direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    g.bf16 = a->i[NB_CONV_ARG_BF16] != 0;
    g.wconst = (nb_conv_const){ 0, 0 };
    return g;
}

/* The oneDNN geometry of samples [n0, n1). */
static nb_conv_shape dnnl_shape(const conv_geom *g, int64_t n0, int64_t n1) {
    return (nb_conv_shape){ n1 - n0, g->C, g->H, g->W, g->O, g->OH, g->OW, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh,
                            g->dw, g->groups, g->bf16 };
}

static bool round_operands(conv_geom *g, nb_tensor **x, nb_tensor **y);

/* Under autocast, whether oneDNN's bf16 kernel takes this convolution in pieces of `piece`
   samples (the full pieces and the last one). When it does not, the two operands are replaced
   by their rounded f32 copies and g->bf16 cleared: the f32 kernels then compute the same
   products (exact in f32), so a machine without bf16 instructions gives autocast's numbers too.
   false on an allocation failure (recorded). */
static bool bf16_operands(conv_geom *g, int kind, int64_t piece, bool bias, nb_tensor **x, nb_tensor **y) {
    if (!g->bf16) return true;
    int64_t last = g->N % piece ? g->N % piece : piece;
    nb_conv_shape full = dnnl_shape(g, 0, piece < g->N ? piece : g->N), tail = dnnl_shape(g, 0, last);
    if (nb__dnnl_conv_ready(kind, &full, bias) && nb__dnnl_conv_ready(kind, &tail, bias)) return true;
    return round_operands(g, x, y);
}

/* Replaces the operands x and y by their values rounded to bf16, kept in f32, for the f32
   kernels; false on an allocation failure (recorded). */
static bool round_operands(conv_geom *g, nb_tensor **x, nb_tensor **y) {
    g->bf16 = false;
    nb_tensor *rx = nb__cpu_round_bf16(*x), *ry = rx ? nb__cpu_round_bf16(*y) : NULL;
    if (!ry) {
        nb_release(rx);
        return false;
    }
    nb_release(*x);
    nb_release(*y);
    *x = rx;
    *y = ry;
    return true;
}

/* The range [lo, hi) of output positions o whose input position o * s + off lies in [0, n). */
static void valid_range(int64_t n_out, int64_t s, int64_t off, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = n - off <= 0 ? 0 : (n - 1 - off) / s + 1;
    if (a > n_out) a = n_out;
    if (b > n_out) b = n_out;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

#define CONV_FNS(T, GEMM)                                                                                  \
    /* cols[K, L] from one group of one sample x[Cg, H, W] */                                           \
    NB_KERNEL_CLONES static void im2col_##T(const conv_geom *g, const T *x, T *cols) {                                   \
        for (int64_t c = 0; c < g->Cg; c++)                                                             \
            for (int64_t i = 0; i < g->kh; i++)                                                         \
                for (int64_t j = 0; j < g->kw; j++) {                                                   \
                    T *row = cols + ((c * g->kh + i) * g->kw + j) * g->L;                               \
                    int64_t offw = j * g->dw - g->pw, lo, hi;                                           \
                    valid_range(g->OW, g->sw, offw, g->W, &lo, &hi);                                    \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                            \
                        T *r = row + oh * g->OW;                                                        \
                        int64_t ih = oh * g->sh - g->ph + i * g->dh;                                    \
                        if (ih < 0 || ih >= g->H) {                                                     \
                            memset(r, 0, sizeof(T) * (size_t)g->OW);                                    \
                            continue;                                                                   \
                        }                                                                               \
                        const T *xr = x + (c * g->H + ih) * g->W + offw;                                \
                        for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                                  \
                        if (g->sw == 1) for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow];            \
                        else for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->sw];               \
                        for (int64_t ow = hi; ow < g->OW; ow++) r[ow] = 0;                              \
                    }                                                                                   \
                }                                                                                       \
    }                                                                                                   \
    /* dx[Cg, H, W] += the columns scattered back (dx is zeroed by the caller) */                       \
    NB_KERNEL_CLONES static void col2im_##T(const conv_geom *g, const T *cols, T *dx) {                                  \
        for (int64_t c = 0; c < g->Cg; c++)                                                             \
            for (int64_t i = 0; i < g->kh; i++)                                                         \
                for (int64_t j = 0; j < g->kw; j++) {                                                   \
                    const T *row = cols + ((c * g->kh + i) * g->kw + j) * g->L;                         \
                    int64_t offw = j * g->dw - g->pw, lo, hi;                                           \
                    valid_range(g->OW, g->sw, offw, g->W, &lo, &hi);                                    \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                            \
                        int64_t ih = oh * g->sh - g->ph + i * g->dh;                                    \
                        if (ih < 0 || ih >= g->H) continue;                                             \
                        const T *r = row + oh * g->OW;                                                  \
                        T *xr = dx + (c * g->H + ih) * g->W + offw;                                     \
                        if (g->sw == 1) for (int64_t ow = lo; ow < hi; ow++) xr[ow] += r[ow];           \
                        else for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->sw] += r[ow];              \
                    }                                                                                   \
                }                                                                                       \
    }                                                                                                   \
    /* y[n] = W * cols(x[n]) (+ b), one sample */                                                       \
    static void fwd_one_##T(const conv_geom *g, const T *x, const T *w, const T *b, T *y, T *cols,      \
                            int64_t n) {                                                                \
        for (int64_t gi = 0; gi < g->groups; gi++) {                                                    \
            const T *xg = x + (n * g->C + gi * g->Cg) * g->H * g->W;                                    \
            const T *colp = xg;                                                                         \
            if (!g->direct) {                                                                           \
                im2col_##T(g, xg, cols);                                                                \
                colp = cols;                                                                            \
            }                                                                                           \
            T *yg = y + (n * g->O + gi * g->Og) * g->L;                                                 \
            GEMM(false, false, g->Og, g->L, g->K, 1,                                                    \
                 w + gi * g->Og * g->K, (int)g->K, colp, (int)g->L, 0, yg, (int)g->L);                  \
        }                                                                                               \
        if (b)                                                                                          \
            for (int64_t o = 0; o < g->O; o++) {                                                        \
                T *r = y + (n * g->O + o) * g->L, bo = b[o];                                            \
                for (int64_t l = 0; l < g->L; l++) r[l] += bo;                                          \
            }                                                                                           \
    }                                                                                                   \
    /* dx[n] = col2im(W^T * dy[n]), one sample */                                                       \
    static void bwd_input_one_##T(const conv_geom *g, const T *dy, const T *w, T *dx, T *cols,          \
                                  int64_t n) {                                                          \
        for (int64_t gi = 0; gi < g->groups; gi++) {                                                    \
            T *dxg = dx + (n * g->C + gi * g->Cg) * g->H * g->W;                                        \
            const T *dyg = dy + (n * g->O + gi * g->Og) * g->L;                                         \
            T *dst = g->direct ? dxg : cols;                                                            \
            GEMM(true, false, g->K, g->L, g->Og, 1,                                                        \
                 w + gi * g->Og * g->K, (int)g->K, dyg, (int)g->L, 0, dst, (int)g->L);                  \
            if (!g->direct) {                                                                           \
                memset(dxg, 0, sizeof(T) * (size_t)(g->Cg * g->H * g->W));                              \
                col2im_##T(g, cols, dxg);                                                               \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
    /* dw += dy[n] * cols(x[n])^T, one sample (beta: 0 for the first sample of a chunk) */              \
    static void bwd_weight_one_##T(const conv_geom *g, const T *dy, const T *x, T *dw, T *cols,         \
                                   int64_t n, T beta) {                                                 \
        for (int64_t gi = 0; gi < g->groups; gi++) {                                                    \
            const T *xg = x + (n * g->C + gi * g->Cg) * g->H * g->W;                                    \
            const T *colp = xg;                                                                         \
            if (!g->direct) {                                                                           \
                im2col_##T(g, xg, cols);                                                                \
                colp = cols;                                                                            \
            }                                                                                           \
            GEMM(false, true, g->Og, g->K, g->L, 1,                                                        \
                 dy + (n * g->O + gi * g->Og) * g->L, (int)g->L, colp, (int)g->L, beta,                 \
                 dw + gi * g->Og * g->K, (int)g->K);                                                    \
        }                                                                                               \
    }

CONV_FNS(float, nb__sgemm)
CONV_FNS(double, nb__dgemm)

/* One chunk's weight gradient through oneDNN (f32 with oneDNN built in); false to fall back. */
static bool wgrad_dnnl_float(const conv_geom *g, const float *dy, const float *x, float *dw, int64_t n0, int64_t n1) {
    nb_conv_shape cs = dnnl_shape(g, n0, n1);
    return nb__dnnl_conv_backward_weights(&cs, x + n0 * g->C * g->H * g->W, dy + n0 * g->O * g->L, dw) > 0;
}
static bool wgrad_dnnl_double(const conv_geom *g, const double *dy, const double *x, double *dw, int64_t n0, int64_t n1) {
    (void)g; (void)dy; (void)x; (void)dw; (void)n0; (void)n1;
    return false;
}


/* One pass over samples (or weight-gradient chunks) on the thread pool; each participant has
   its own column buffer, cols + slot * per. */
enum { CONV_FWD, CONV_BWD_INPUT, CONV_WGRAD, CONV_WGRAD_SUM, CONV_DNNL_FWD, CONV_DNNL_BWD_INPUT };
typedef struct {
    const conv_geom *g;
    int kind;
    bool f64;
    const void *a, *b, *c; /* x, w, bias (forward); dy, w (input gradient); dy, x (weights) */
    void *out, *cols, *partial;
    int64_t per, per_chunk, chunks, wn;
    signed char *status; /* oneDNN pieces: each one's return code */
    int team;            /* a oneDNN forward of one piece: the OpenMP team it runs on */
    bool by_channel;     /* a one-sample oneDNN forward in pieces of DNNL_CHANNEL_PIECE output channels */
} conv_job;

#define CONV_RANGE(T)                                                                                    \
    static void conv_range_##T(const conv_job *j, int64_t lo, int64_t hi, int slot) {                    \
        const conv_geom *g = j->g;                                                                       \
        T *colbuf = j->cols ? (T *)j->cols + slot * j->per : NULL;                                       \
        for (int64_t i = lo; i < hi; i++) {                                                              \
            switch (j->kind) {                                                                           \
            case CONV_FWD: fwd_one_##T(g, j->a, j->b, j->c, j->out, colbuf, i); break;                   \
            case CONV_BWD_INPUT: bwd_input_one_##T(g, j->a, j->b, j->out, colbuf, i); break;             \
            case CONV_WGRAD: {                                                                           \
                T *dst = i == 0 ? (T *)j->out : (T *)j->partial + (i - 1) * j->wn;                       \
                int64_t n0 = i * j->per_chunk, n1 = n0 + j->per_chunk < g->N ? n0 + j->per_chunk : g->N; \
                if (wgrad_dnnl_##T(g, j->a, j->b, dst, n0, n1)) break;                                   \
                if (g->bf16) { /* oneDNN took the shape on the calling thread: a failure here */         \
                    j->status[i] = -1;                                                                   \
                    break;                                                                               \
                }                                                                                        \
                for (int64_t n = n0; n < n1; n++) bwd_weight_one_##T(g, j->a, j->b, dst, colbuf, n, n == n0 ? 0 : 1); \
                break;                                                                                   \
            }                                                                                            \
            default: {                                                                                   \
                T *pdw = j->out;                                                                         \
                const T *pp = j->partial;                                                                \
                T s = pdw[i];                                                                            \
                for (int64_t c = 1; c < j->chunks; c++) s += pp[(c - 1) * j->wn + i];                    \
                pdw[i] = s;                                                                              \
            }                                                                                            \
            }                                                                                            \
        }                                                                                                \
    }
CONV_RANGE(float)
CONV_RANGE(double)
#undef CONV_RANGE

/* Output channels per piece of a one-sample forward split by channels (run_dnnl). */
#define DNNL_CHANNEL_PIECE 32

/* Pieces [lo, hi) of a forward or input gradient through oneDNN, per_chunk samples each, or of
   a one-sample forward, DNNL_CHANNEL_PIECE output channels each (j->by_channel). */
static void dnnl_range(const conv_job *j, int64_t lo, int64_t hi) {
    const conv_geom *g = j->g;
    for (int64_t c = lo; c < hi; c++) {
        if (j->by_channel) { /* output channels [o0, o1): their weights, biases and output plane are one run each */
            int64_t o0 = c * DNNL_CHANNEL_PIECE, o1 = o0 + DNNL_CHANNEL_PIECE < g->O ? o0 + DNNL_CHANNEL_PIECE : g->O;
            nb_conv_shape cs = dnnl_shape(g, 0, 1);
            cs.O = o1 - o0;
            j->status[c] = (signed char)nb__dnnl_conv_forward(&cs, j->a, (const float *)j->b + o0 * g->K,
                                                              j->c ? (const float *)j->c + o0 : NULL,
                                                              (float *)j->out + o0 * g->L, 1, &g->wconst);
            continue;
        }
        int64_t n0 = c * j->per_chunk, n1 = n0 + j->per_chunk < g->N ? n0 + j->per_chunk : g->N;
        nb_conv_shape cs = dnnl_shape(g, n0, n1);
        int64_t in_per = g->C * g->H * g->W, out_per = g->O * g->L;
        if (j->kind == CONV_DNNL_FWD)
            j->status[c] = (signed char)nb__dnnl_conv_forward(&cs, (const float *)j->a + n0 * in_per, j->b, j->c,
                                                              (float *)j->out + n0 * out_per, j->team, &g->wconst);
        else
            j->status[c] = (signed char)nb__dnnl_conv_backward_data(&cs, (const float *)j->a + n0 * out_per, j->b,
                                                                    (float *)j->out + n0 * in_per);
    }
}

static void conv_range(void *c, int64_t lo, int64_t hi, int slot) {
    const conv_job *j = c;
    if (j->kind == CONV_DNNL_FWD || j->kind == CONV_DNNL_BWD_INPUT) dnnl_range(j, lo, hi);
    else if (j->f64) conv_range_double(j, lo, hi, slot);
    else conv_range_float(j, lo, hi, slot);
}

/* Samples per oneDNN piece: fixed, so the pieces (and the bits) do not depend on the threads. */
#define DNNL_PIECE 16

/* Runs a forward (CONV_DNNL_FWD) or input gradient through oneDNN in pieces of the batch on the
   thread pool: 1 when done, 0 when oneDNN declined (the caller falls back), -1 on error. */
static int run_dnnl(const conv_geom *g, int kind, const void *a, const void *b, const void *c, void *out) {
#ifndef NABLA_HAVE_DNNL
    (void)g; (void)kind; (void)a; (void)b; (void)c; (void)out;
    return 0;
#else
    int64_t chunks = (g->N + DNNL_PIECE - 1) / DNNL_PIECE;
    int64_t work = g->O * g->L * g->K * DNNL_PIECE;
    /* one piece (a batch of up to 16: inference) would run on one core: oneDNN splits it over a
       team of the pool's size instead, the pool idle meanwhile, when it is large enough to pay
       for starting the team (32M multiply-adds and up: ResNet-18's 3x3 layers are, 115M or more;
       the small CNN's 10M layer ran slower split) */
    int64_t macs = g->O * g->L * g->K * g->N;
    bool one_forward = chunks == 1 && kind == CONV_DNNL_FWD && !g->bf16, big = macs >= ((int64_t)1 << 25);
    int team = one_forward && big ? nb__threads() : 1;
    /* a smaller one-sample forward (2M multiply-adds and up: the small CNN's second layer) is cut
       by output channels instead, into pieces of a size fixed by the shape, which the pool runs;
       waking an OpenMP team beside the pool cost it more than it saved. Which way a forward goes
       depends on its shape alone, never on the thread count, so its bits do not either. */
    bool by_channel = one_forward && !big && g->N == 1 && g->groups == 1 && g->O >= 2 * DNNL_CHANNEL_PIECE &&
                      macs >= ((int64_t)1 << 21);
    if (by_channel) chunks = (g->O + DNNL_CHANNEL_PIECE - 1) / DNNL_CHANNEL_PIECE;
    signed char *status = nb__alloc((size_t)chunks);
    if (!status) {
        nb__error("nb_conv2d: out of memory");
        return -1;
    }
    conv_job j = { g, kind, false, a, b, c, out, NULL, NULL, 0, DNNL_PIECE, chunks, 0, status, team, by_channel };
    nb__parallel_for(chunks > 1 && work >= NB_PARALLEL_GRAIN ? nb__threads() : 1, chunks, conv_range, &j);
    int rc = 1;
    for (int64_t i = 0; i < chunks; i++) {
        if (status[i] < 0) rc = -1;
        else if (status[i] == 0 && rc > 0) rc = 0;
    }
    nb__free(status, (size_t)chunks);
    return rc;
#endif
}

/* Threads for a loop over `items` samples of `work` multiply-adds each: one per sample when
   there are enough samples to share, else 1 (and BLAS threads each product itself). */
static int sample_threads(int64_t items, int64_t work) {
    int threads = nb__threads();
    if (threads <= 1 || items < 2 || work * items < (int64_t)1 << 20) return 1;
    return threads;
}

/* One column buffer per thread. */
static void *cols_alloc(const conv_geom *g, size_t es, int threads, size_t *bytes) {
    *bytes = g->direct ? 0 : (size_t)(g->K * g->L) * es * (size_t)threads;
    if (*bytes == 0) return NULL;
    void *p = nb__alloc(*bytes);
    if (!p) nb__error("nb_conv2d: out of memory for a %lld x %lld column buffer", (long long)g->K, (long long)g->L);
    return p;
}

int nb__cpu_conv2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    conv_geom g = make_geom(&in[0]->shape, &in[1]->shape, &out->shape, args);
    if (out->numel == 0) return 0;
    if (g.K == 0) memset(nb__data(out), 0, (size_t)out->numel * nb_dtype_size(out->dtype)); /* then y = b */
    nb_tensor *x = dense(in[0]), *w = dense(in[1]), *b = nin == 3 ? dense(in[2]) : NULL;
    int rc = -1;
    size_t es = nb_dtype_size(out->dtype), bytes = 0;
    int threads = sample_threads(g.N, g.O * g.L * g.K);
    void *cols = NULL;
    if (!x || !w || (nin == 3 && !b)) goto done;
    if (g.K > 0 && !bf16_operands(&g, NB_DNNL_FORWARD, DNNL_PIECE, b != NULL, &x, &w)) goto done;
    if (w == in[1] && w->storage->constant_id) /* not a copy: the weights' own storage */
        g.wconst = (nb_conv_const){ w->storage->constant_id, atomic_load(&w->storage->version) };
    if (out->dtype == NB_F32 && g.K > 0) { /* oneDNN's kernels where nabla is built with them */
        int done = run_dnnl(&g, CONV_DNNL_FWD, nb__data(x), nb__data(w), b ? nb__data(b) : NULL, nb__data(out));
        if (done != 0) {
            rc = done > 0 ? 0 : -1;
            goto done;
        }
        if (g.bf16 && !round_operands(&g, &x, &w)) goto done;
    }
    if (g.K > 0 && !(cols = cols_alloc(&g, es, threads, &bytes)) && bytes) goto done;
    if (g.K == 0) {
        if (b) { /* y = b broadcast */
            for (int64_t n = 0; n < g.N; n++)
                for (int64_t o = 0; o < g.O; o++)
                    for (int64_t l = 0; l < g.L; l++) {
                        int64_t i = (n * g.O + o) * g.L + l;
                        if (out->dtype == NB_F32) ((float *)nb__data(out))[i] = ((const float *)nb__data(b))[o];
                        else ((double *)nb__data(out))[i] = ((const double *)nb__data(b))[o];
                    }
        }
        rc = 0;
        goto done;
    }
    conv_job j = { &g, CONV_FWD, out->dtype == NB_F64, nb__data(x), nb__data(w), b ? nb__data(b) : NULL,
                   nb__data(out), cols, NULL, g.K * g.L, 0, 0, 0, NULL, 1, false };
    nb__parallel_for(threads, g.N, conv_range, &j);
    rc = 0;
done:
    if (cols) nb__free(cols, bytes);
    nb_release(x);
    nb_release(w);
    nb_release(b);
    return rc;
}

/* conv2d_backward_input(dy, w) -> dx with args->shape */
int nb__cpu_conv2d_backward_input(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    conv_geom g = make_geom(&out->shape, &in[1]->shape, &in[0]->shape, args);
    size_t es = nb_dtype_size(out->dtype), bytes = 0;
    if (out->numel == 0) return 0;
    if (g.L == 0 || g.Og == 0) {
        memset(nb__data(out), 0, (size_t)out->numel * es);
        return 0;
    }
    nb_tensor *dy = dense(in[0]), *w = dense(in[1]);
    int rc = -1;
    int threads = sample_threads(g.N, g.O * g.L * g.K);
    void *cols = NULL;
    if (!dy || !w) goto done;
    if (!bf16_operands(&g, NB_DNNL_BACKWARD_DATA, DNNL_PIECE, false, &dy, &w)) goto done;
    if (out->dtype == NB_F32) { /* oneDNN's kernels where nabla is built with them */
        int done = run_dnnl(&g, CONV_DNNL_BWD_INPUT, nb__data(dy), nb__data(w), NULL, nb__data(out));
        if (done != 0) {
            rc = done > 0 ? 0 : -1;
            goto done;
        }
        if (g.bf16 && !round_operands(&g, &dy, &w)) goto done;
    }
    if (!(cols = cols_alloc(&g, es, threads, &bytes)) && bytes) goto done;
    conv_job j = { &g, CONV_BWD_INPUT, out->dtype == NB_F64, nb__data(dy), nb__data(w), NULL, nb__data(out), cols,
                   NULL, g.K * g.L, 0, 0, 0, NULL, 1, false };
    nb__parallel_for(threads, g.N, conv_range, &j);
    rc = 0;
done:
    if (cols) nb__free(cols, bytes);
    nb_release(dy);
    nb_release(w);
    return rc;
}

/* Partial weight gradients held at once are capped at this many elements (in all). */
#define WGRAD_PARTIAL_CAP ((int64_t)1 << 24)
/* Samples per chunk at the least. */
#define WGRAD_MIN_CHUNK 8

/* conv2d_backward_weight(dy, x) -> dw with args->shape */
int nb__cpu_conv2d_backward_weight(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    conv_geom g = make_geom(&in[1]->shape, &out->shape, &in[0]->shape, args);
    size_t es = nb_dtype_size(out->dtype), cbytes = 0, pbytes = 0;
    if (out->numel == 0) return 0;
    if (g.N == 0 || g.L == 0) {
        memset(nb__data(out), 0, (size_t)out->numel * es);
        return 0;
    }
    /* the chunking depends on the shapes only, never on the thread count */
    int64_t wn = out->numel;
    int64_t chunks = (g.N + WGRAD_MIN_CHUNK - 1) / WGRAD_MIN_CHUNK;
    int64_t cap = WGRAD_PARTIAL_CAP / wn;
    if (chunks > cap) chunks = cap;
    if (chunks < 1) chunks = 1;
    int64_t per_chunk = (g.N + chunks - 1) / chunks;
    chunks = (g.N + per_chunk - 1) / per_chunk;
    int threads = sample_threads(chunks, g.O * g.L * g.K * per_chunk);
    if (threads > chunks) threads = (int)chunks;
    nb_tensor *dy = dense(in[0]), *x = dense(in[1]);
    int rc = -1;
    void *cols = NULL, *partial = NULL;
    signed char *status = NULL; /* bf16: each chunk's failure, which must not fall back unrounded */
    if (!dy || !x) goto done;
    if (!bf16_operands(&g, NB_DNNL_BACKWARD_WEIGHTS, per_chunk, false, &x, &dy)) goto done;
    if (g.bf16 && !(status = nb__alloc((size_t)chunks))) {
        nb__error("nb_conv2d: out of memory");
        goto done;
    }
    if (status) memset(status, 0, (size_t)chunks);
    if (!(cols = cols_alloc(&g, es, threads, &cbytes)) && cbytes) goto done;
    pbytes = (size_t)((chunks - 1) * wn) * es;
    if (pbytes && !(partial = nb__alloc(pbytes))) {
        nb__error("nb_conv2d: out of memory for the weight gradient's partial sums");
        goto done;
    }
    conv_job j = { &g, CONV_WGRAD, out->dtype == NB_F64, nb__data(dy), nb__data(x), NULL, nb__data(out), cols,
                   partial, g.K * g.L, per_chunk, chunks, wn, status, 1, false };
    nb__parallel_for(threads, chunks, conv_range, &j);
    for (int64_t c = 0; status && c < chunks; c++)
        if (status[c] < 0) {
            nb__error("nb_conv2d: oneDNN's bf16 weight gradient failed on samples %lld..%lld", (long long)(c * per_chunk),
                      (long long)((c + 1) * per_chunk));
            goto done;
        }
    if (chunks > 1) { /* the chunks' partial sums, added in chunk order */
        j.kind = CONV_WGRAD_SUM;
        nb__parallel_for(wn * chunks >= NB_PARALLEL_GRAIN ? nb__threads() : 1, wn, conv_range, &j);
    }
    rc = 0;
done:
    if (cols) nb__free(cols, cbytes);
    if (partial) nb__free(partial, pbytes);
    if (status) nb__free(status, (size_t)chunks);
    nb_release(dy);
    nb_release(x);
    return rc;
}
