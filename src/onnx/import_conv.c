/* ONNX import's Conv, MaxPool and AveragePool in any number of spatial axes: windows are gathered
   with index_select from a precomputed table (the general case: 1-D and 3-D, asymmetric pads,
   auto_pad, ceil_mode, dilations, MaxPool's Indices), and nabla's own conv2d and 2-D pools run
   the common 2-D cases. */
#include "import_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) return (nb__onnx_node_error(n, __VA_ARGS__), -1)
#define MAXSP 6 /* spatial axes */

/* A convolution's or pool's geometry. */
typedef struct {
    int sp;                      /* spatial axes */
    int64_t d[MAXSP], k[MAXSP], s[MAXSP], dl[MAXSP], pb[MAXSP], pe[MAXSP], o[MAXSP];
    int64_t S, K, O;             /* products of d, k, o */
} geom;

int nb__onnx_check_pool(const onnx_node *n, char *msg, size_t size) {
    char buf[32];
    const char *ap = nb__onnx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (strcmp(ap, "NOTSET") && strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER") && strcmp(ap, "VALID"))
        return snprintf(msg, size, "auto_pad '%s' is not supported", ap), -1;
    return 0;
}

/* Reads a per-axis attribute (default def when absent); -1 on a wrong count. */
static int per_axis(const onnx_node *n, const char *name, int sp, int64_t def, int64_t *out, int mult) {
    const int64_t *v;
    int c = nb__onnx_attr_ints(n, name, &v);
    if (c < 0) {
        for (int i = 0; i < sp * mult; i++) out[i] = def;
        return 0;
    }
    if (c != sp * mult) {
        nb__onnx_node_error(n, "'%s' has %d values for %d spatial axes", name, c, sp);
        return -1;
    }
    memcpy(out, v, sizeof(int64_t) * (size_t)c);
    return 0;
}

static int make_geom(const onnx_node *n, nb_shape xs, const int64_t *kernel, bool pool, geom *g) {
    g->sp = xs.ndim - 2;
    if (g->sp < 1 || g->sp > MAXSP) FAIL("the input must be [N, C, spatial...] with 1 to %d spatial axes, not %d-D", MAXSP, xs.ndim);
    int64_t pads[2 * MAXSP];
    if (per_axis(n, "strides", g->sp, 1, g->s, 1) < 0 || per_axis(n, "dilations", g->sp, 1, g->dl, 1) < 0 ||
        per_axis(n, "pads", g->sp, 0, pads, 2) < 0)
        return -1;
    char buf[32];
    const char *ap = nb__onnx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    bool ceil_mode = pool && nb__onnx_attr_i(n, "ceil_mode", 0) != 0;
    g->S = g->K = g->O = 1;
    for (int i = 0; i < g->sp; i++) {
        g->d[i] = xs.dim[i + 2];
        g->k[i] = kernel[i];
        if (g->k[i] < 1 || g->s[i] < 1 || g->dl[i] < 1) FAIL("kernel sizes, strides and dilations must be positive");
        if (g->k[i] > (1 << 20) || g->s[i] > (1 << 20) || g->dl[i] > (1 << 20)) FAIL("kernel, stride or dilation too large");
        int64_t eff = (g->k[i] - 1) * g->dl[i] + 1;
        g->pb[i] = pads[i];
        g->pe[i] = pads[i + g->sp];
        if (g->pb[i] < 0 || g->pe[i] < 0 || g->pb[i] > (1 << 20) || g->pe[i] > (1 << 20)) FAIL("pads must be between 0 and 2^20");
        if (!strcmp(ap, "VALID")) {
            g->pb[i] = g->pe[i] = 0;
            g->o[i] = g->d[i] >= eff ? (g->d[i] - eff) / g->s[i] + 1 : 0;
        } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            g->o[i] = (g->d[i] + g->s[i] - 1) / g->s[i];
            int64_t tot = (g->o[i] - 1) * g->s[i] + eff - g->d[i];
            if (tot < 0) tot = 0;
            int64_t small = tot / 2;
            g->pb[i] = !strcmp(ap, "SAME_UPPER") ? small : tot - small;
            g->pe[i] = tot - g->pb[i];
        } else {
            int64_t span = g->d[i] + g->pb[i] + g->pe[i] - eff;
            if (span < 0) g->o[i] = 0;
            else if (ceil_mode) {
                g->o[i] = (span + g->s[i] - 1) / g->s[i] + 1;
                /* the last window must start inside the input or its start padding */
                if ((g->o[i] - 1) * g->s[i] >= g->d[i] + g->pb[i]) g->o[i]--;
            } else g->o[i] = span / g->s[i] + 1;
        }
        if (g->o[i] <= 0) FAIL("the output would be empty along spatial axis %d", i);
        if (g->S > (INT64_MAX >> 24) / (g->d[i] + 1) || g->K > (INT64_MAX >> 24) / g->k[i] || g->O > (INT64_MAX >> 24) / g->o[i])
            FAIL("the sizes overflow");
        g->S *= g->d[i];
        g->K *= g->k[i];
        g->O *= g->o[i];
    }
    if (g->O > ((int64_t)1 << 40) / g->K) FAIL("too many windows");
    return 0;
}

/* The window table: per output position and kernel offset, the flat input position, or S for one
   in the padding. inside (optional) counts per output the positions in the input, padded (those
   within the explicit pads) in padded. */
static int64_t *window_table(const geom *g, int64_t *inside, int64_t *padded) {
    int64_t *t = malloc(sizeof(int64_t) * (size_t)(g->O * g->K));
    if (!t) return NULL;
    int64_t oi[MAXSP] = { 0 };
    for (int64_t o = 0; o < g->O; o++) {
        int64_t ki[MAXSP] = { 0 }, cin = 0, cpad = 0;
        for (int64_t k = 0; k < g->K; k++) {
            int64_t flat = 0;
            bool ok = true, inpad = true;
            for (int i = 0; i < g->sp; i++) {
                int64_t p = oi[i] * g->s[i] - g->pb[i] + ki[i] * g->dl[i];
                if (p < 0 || p >= g->d[i]) ok = false;
                if (p < -g->pb[i] || p >= g->d[i] + g->pe[i]) inpad = false;
                flat = flat * g->d[i] + p;
            }
            t[o * g->K + k] = ok ? flat : g->S;
            cin += ok;
            cpad += inpad;
            for (int i = g->sp - 1; i >= 0; i--) { /* next kernel offset */
                if (++ki[i] < g->k[i]) break;
                ki[i] = 0;
            }
        }
        if (inside) inside[o] = cin;
        if (padded) padded[o] = cpad;
        for (int i = g->sp - 1; i >= 0; i--) {
            if (++oi[i] < g->o[i]) break;
            oi[i] = 0;
        }
    }
    return t;
}

/* x [N, C, spatial] gathered into windows [N, C, O, K], padding with pad. */
static nb_tensor *windows(nb_tensor *x, const geom *g, const int64_t *table, double pad) {
    nb_shape s = nb_shape_of(x);
    int64_t N = s.dim[0], C = s.dim[1];
    nb_tensor *flat = nb_reshape(x, NB_SHAPE(N, C, g->S));
    nb_tensor *parts[2] = { flat, nb_full(NB_SHAPE(N, C, 1), pad, nb_dtype_of(x)) };
    nb_tensor *ext = nb_cat(parts, 2, 2);
    nb_tensor *idx = nb__onnx_const(table, NB_SHAPE(g->O * g->K), NB_I64);
    return nb_reshape(nb_index_select(ext, 2, idx), NB_SHAPE(N, C, g->O, g->K));
}

/* [N, C, O] back to [N, C, o...] */
static nb_tensor *unflatten(nb_tensor *y, const geom *g) {
    nb_shape s = nb_shape_of(y), o = { 2 + g->sp, { s.dim[0], s.dim[1] } };
    for (int i = 0; i < g->sp; i++) o.dim[2 + i] = g->o[i];
    return nb_reshape(y, o);
}

static bool symmetric2d(const geom *g) {
    return g->sp == 2 && g->pb[0] == g->pe[0] && g->pb[1] == g->pe[1] && g->pb[0] <= INT32_MAX && g->pb[1] <= INT32_MAX;
}

int nb__onnx_conv(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout) {
    (void)r, (void)nout;
    nb_tensor *x = in[0], *w = in[1], *b = nin > 2 ? in[2] : NULL;
    nb_shape xs = nb_shape_of(x), ws = nb_shape_of(w);
    if (ws.ndim != xs.ndim) FAIL("the weight is %d-D for a %d-D input", ws.ndim, xs.ndim);
    int64_t kernel[MAXSP];
    if (xs.ndim < 3 || xs.ndim > MAXSP + 2) FAIL("the input must be [N, C, spatial...], not %d-D", xs.ndim);
    if (per_axis(n, "kernel_shape", xs.ndim - 2, 0, kernel, 1) < 0) return -1;
    for (int i = 0; i < xs.ndim - 2; i++) {
        if (kernel[i] == 0) kernel[i] = ws.dim[i + 2];
        if (kernel[i] != ws.dim[i + 2]) FAIL("kernel_shape disagrees with the weight");
    }
    geom g;
    if (make_geom(n, xs, kernel, false, &g) < 0) return -1;
    int64_t grp = nb__onnx_attr_i(n, "group", 1), N = xs.dim[0], C = xs.dim[1], M = ws.dim[0];
    if (grp < 1 || C % grp || M % grp || ws.dim[1] != C / grp)
        FAIL("group %lld does not fit %lld input and %lld output channels (weight [%lld, %lld, ...])", (long long)grp,
             (long long)C, (long long)M, (long long)ws.dim[0], (long long)ws.dim[1]);
    if (b && (nb_ndim(b) != 1 || nb_dim(b, 0) != M)) FAIL("the bias must be [%lld]", (long long)M);
    nb_dtype dt = nb_dtype_of(x);
    if (symmetric2d(&g) && grp <= INT32_MAX && g.s[0] <= INT32_MAX && g.s[1] <= INT32_MAX && (dt == NB_F32 || dt == NB_F64)) {
        nb_conv_opts o = { .stride = { (int)g.s[0], (int)g.s[1] }, .padding = { (int)g.pb[0], (int)g.pb[1] },
                           .dilation = { (int)g.dl[0], (int)g.dl[1] }, .groups = (int)grp };
        out[0] = nb_conv2d(x, w, b, o);
        return out[0] ? 0 : -1;
    }
    int64_t *table = window_table(&g, NULL, NULL);
    if (!table) FAIL("out of memory");
    nb_tensor *win = windows(x, &g, table, 0); /* [N, C, O, K] */
    free(table);
    int64_t cg = C / grp, mg = M / grp;
    nb_tensor *cols = nb_reshape(win, NB_SHAPE(N, grp, cg, g.O, g.K));
    int perm[5] = { 0, 1, 3, 2, 4 };
    cols = nb_reshape(nb_permute(cols, perm), NB_SHAPE(N, grp, g.O, cg * g.K));
    nb_tensor *wm = nb_transpose(nb_reshape(w, NB_SHAPE(grp, mg, cg * g.K)), 1, 2); /* [g, CK, M/g] */
    nb_tensor *y = nb_matmul(cols, wm); /* [N, g, O, M/g] */
    int perm2[4] = { 0, 1, 3, 2 };
    y = nb_reshape(nb_permute(y, perm2), NB_SHAPE(N, M, g.O));
    if (b) y = nb_add(y, nb_reshape(b, NB_SHAPE(M, 1)));
    out[0] = unflatten(y, &g);
    return out[0] ? 0 : -1;
}

/* The lowest value of a dtype (max pooling's padding). */
static double lowest(nb_dtype d) {
    switch (d) {
    case NB_U8: case NB_BOOL: return 0;
    case NB_I8: return -128;
    case NB_I32: return -2147483648.0;
    case NB_I64: return -9223372036854775808.0;
    default: return -INFINITY;
    }
}

/* A pooling node's windows over x's shape: the kernel_shape attribute and the padding, strides
   and dilations make_geom reads. 0, or -1 with the error naming the node. */
static int pool_geom(const onnx_node *n, nb_shape xs, geom *g) {
    int64_t kernel[MAXSP];
    if (xs.ndim < 3 || xs.ndim > MAXSP + 2) FAIL("the input must be [N, C, spatial...], not %d-D", xs.ndim);
    if (per_axis(n, "kernel_shape", xs.ndim - 2, 0, kernel, 1) < 0) return -1;
    return make_geom(n, xs, kernel, true, g);
}

int nb__onnx_maxpool(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout) {
    (void)r, (void)nin;
    nb_tensor *x = in[0];
    nb_shape xs = nb_shape_of(x);
    geom g;
    if (pool_geom(n, xs, &g) < 0) return -1;
    bool want_idx = nout > 1 && n->out[1] >= 0;
    nb_dtype dt = nb_dtype_of(x);
    if (!want_idx && symmetric2d(&g) && g.k[0] == g.k[1] && g.s[0] == g.s[1] && g.pb[0] == g.pb[1] && g.dl[0] == 1 &&
        g.dl[1] == 1 && 2 * g.pb[0] <= g.k[0] && (dt == NB_F32 || dt == NB_F64) &&
        g.o[0] == (g.d[0] + 2 * g.pb[0] - g.k[0]) / g.s[0] + 1 && g.o[1] == (g.d[1] + 2 * g.pb[1] - g.k[1]) / g.s[1] + 1) {
        out[0] = nb_max_pool2d(x, (int)g.k[0], (nb_pool_opts){ .stride = (int)g.s[0], .padding = (int)g.pb[0] });
        return out[0] ? 0 : -1;
    }
    int64_t *table = window_table(&g, NULL, NULL);
    if (!table) FAIL("out of memory");
    nb_tensor *win = windows(x, &g, table, lowest(dt));
    out[0] = unflatten(nb_max(win, 3, false), &g);
    if (want_idx) {
        /* the flat index (over N, C and the spatial axes, row-major or, with storage_order 1,
           spatial axes column-major) of each window's first largest element */
        bool colmajor = nb__onnx_attr_i(n, "storage_order", 0) != 0;
        for (int64_t q = 0; q < g.O * g.K; q++) {
            int64_t f = table[q];
            if (f == g.S || !colmajor) continue;
            int64_t c = 0, mul = 1, rem = f;
            int64_t idx[MAXSP];
            for (int i = g.sp - 1; i >= 0; i--) { idx[i] = rem % g.d[i]; rem /= g.d[i]; }
            for (int i = 0; i < g.sp; i++) { c += idx[i] * mul; mul *= g.d[i]; }
            table[q] = c;
        }
        nb_tensor *am = nb_argmax(win, 3, true); /* [N, C, O, 1] */
        nb_tensor *tab = nb_expand(nb__onnx_const(table, NB_SHAPE(1, 1, g.O, g.K), NB_I64), NB_SHAPE(xs.dim[0], xs.dim[1], g.O, g.K));
        nb_tensor *pos = nb_reshape(nb_gather(nb_contiguous(tab), 3, am), NB_SHAPE(xs.dim[0], xs.dim[1], g.O));
        nb_tensor *base = nb_mul_scalar(nb_reshape(nb_arange(0, (double)(xs.dim[0] * xs.dim[1]), 1, NB_I64),
                                                   NB_SHAPE(xs.dim[0], xs.dim[1], 1)), (double)g.S);
        out[1] = unflatten(nb_add(pos, base), &g);
        if (!out[1]) { free(table); return -1; }
    }
    free(table);
    return out[0] ? 0 : -1;
}

int nb__onnx_avgpool(onnx_run *r, const onnx_node *n, nb_tensor *const *in, int nin, nb_tensor **out, int nout) {
    (void)r, (void)nin, (void)nout;
    nb_tensor *x = in[0];
    nb_shape xs = nb_shape_of(x);
    geom g;
    if (pool_geom(n, xs, &g) < 0) return -1;
    bool incl = nb__onnx_attr_i(n, "count_include_pad", 0) != 0;
    int64_t *inside = malloc(sizeof(int64_t) * (size_t)g.O), *padded = malloc(sizeof(int64_t) * (size_t)g.O);
    int64_t *table = inside && padded ? window_table(&g, inside, padded) : NULL;
    if (!table) { free(inside); free(padded); FAIL("out of memory"); }
    double *cnt = malloc(sizeof(double) * (size_t)g.O);
    if (!cnt) { free(inside); free(padded); free(table); FAIL("out of memory"); }
    for (int64_t o = 0; o < g.O; o++) cnt[o] = (double)(incl ? padded[o] : inside[o]);
    nb_dtype dt = nb_dtype_of(x);
    nb_tensor *win = windows(x, &g, table, 0);
    nb_tensor *div = nb_cast(nb__onnx_const(cnt, NB_SHAPE(g.O), NB_F64), dt);
    out[0] = unflatten(nb_div(nb_sum(win, 3, false), div), &g);
    free(inside);
    free(padded);
    free(table);
    free(cnt);
    return out[0] ? 0 : -1;
}
