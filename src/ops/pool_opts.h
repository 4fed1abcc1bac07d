/* Pooling options resolved per axis (kernel, stride, padding, dilation as torch takes them) and
   checked once, for the functional pools (src/ops/conv_pool.c) and the pooling modules
   (src/nn/conv.c), which must agree on them. */
#ifndef NB_POOL_OPTS_H
#define NB_POOL_OPTS_H

#include "../core/core_impl.h"
#include "nabla/functional.h"

/* Per axis (height, width): kernel, stride, padding and dilation; ceil_mode; whether padding is
   left out of an average's divisor. */
typedef struct nb__pool_geom {
    int k[2], s[2], p[2], d[2];
    bool ceil_mode, exclude_padding;
} nb__pool_geom;

/* The window along one axis: d * (k - 1) + 1 places. */
static inline int64_t nb__pool_span(const nb__pool_geom *g, int axis) { return (int64_t)g->d[axis] * (g->k[axis] - 1) + 1; }

/* Output size along an axis of n places, as torch's pooling_output_shape: a window spans
   d(k-1)+1 places, the count rounds down (or up with ceil_mode, a last window still starting
   inside the input or its left padding); < 1 when the window does not fit the padded input. */
static inline int64_t nb__pool_out_size(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t span = d * (k - 1) + 1, room = n + 2 * p - span;
    if (room < 0) return 0;
    int64_t o = (room + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (o - 1) * s >= n + p) o--;
    return o;
}

/* Resolves (kernel, opts) of nb_<fn> into g: a per-axis field wins over the square one, a zero
   stride is the kernel, a zero dilation 1. 0, or -1 with an error naming fn and the values. */
static inline int nb__pool_resolve(const char *fn, int kernel, nb_pool_opts o, bool is_max, nb__pool_geom *g) {
    for (int a = 0; a < 2; a++) {
        g->k[a] = o.kernel_hw[a] ? o.kernel_hw[a] : kernel;
        g->s[a] = o.stride_hw[a] ? o.stride_hw[a] : o.stride ? o.stride : g->k[a];
        g->p[a] = o.padding_hw[a] ? o.padding_hw[a] : o.padding;
        g->d[a] = o.dilation_hw[a] ? o.dilation_hw[a] : o.dilation ? o.dilation : 1;
    }
    g->ceil_mode = o.ceil_mode;
    g->exclude_padding = o.exclude_padding;
    bool ok = true;
    for (int a = 0; a < 2; a++)
        ok = ok && g->k[a] >= 1 && g->s[a] >= 1 && g->d[a] >= 1 && g->p[a] >= 0 && g->p[a] <= g->k[a] / 2;
    if (!ok || o.stride < 0 || o.padding < 0 || o.dilation < 0) {
        nb__error("%s: kernel (%d, %d) must be positive, stride (%d, %d) and dilation (%d, %d) positive and padding (%d, %d) "
                  "between 0 and half the kernel", fn, g->k[0], g->k[1], g->s[0], g->s[1], g->d[0], g->d[1], g->p[0],
                  g->p[1]);
        return -1;
    }
    if (!is_max && (g->d[0] != 1 || g->d[1] != 1)) {
        nb__error("%s: average pooling has no dilation (got %d, %d), as torch's", fn, g->d[0], g->d[1]);
        return -1;
    }
    if (is_max && g->exclude_padding) {
        nb__error("%s: exclude_padding is an average pooling option (max pooling never counts padding)", fn);
        return -1;
    }
    return 0;
}

#endif
