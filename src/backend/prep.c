/* Device-neutral preparation that every backend's kernels share: a pooling op's geometry, the
   element offsets of advanced indexing, the optimizer update's per-step coefficients and the
   CTC loss's job with its checked lengths and labels. Each reads tensors on the host and records
   its errors in the library's words, so the cpu and the cuda backend refuse the same inputs the
   same way; neither backend reaches into the other for them. */
#include "prep.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- pooling ---------- */
nb_pool_geom nb__pool_geometry(const nb_shape *x, const nb_shape *y, const nb_op_args *a, bool adaptive) {
    nb_pool_geom g;
    memset(&g, 0, sizeof g);
    g.N = x->dim[0]; g.C = x->dim[1]; g.H = x->dim[2]; g.W = x->dim[3];
    g.OH = y->dim[2]; g.OW = y->dim[3];
    g.adaptive = adaptive;
    for (int k = 0; k < 2; k++) {
        g.k[k] = a->i[k];
        g.s[k] = a->i[2 + k];
        g.p[k] = a->i[4 + k];
        g.d[k] = adaptive || a->i[6 + k] < 1 ? 1 : a->i[6 + k];
    }
    g.exclude_padding = !adaptive && a->i[9];
    return g;
}

/* ---------- index / index_put: advanced indexing on the leading axes ---------- */
void nb__bcast_strides(const nb_tensor *t, const nb_shape *to, int64_t *st) {
    int lead = to->ndim - t->shape.ndim;
    for (int d = 0; d < to->ndim; d++) st[d] = d < lead || t->shape.dim[d - lead] == 1 ? 0 : t->stride[d - lead];
}

void nb__index_shape(nb_tensor *const *idx, int n, nb_shape *b) {
    *b = idx[0]->shape;
    for (int k = 1; k < n; k++) {
        const nb_shape *s = &idx[k]->shape;
        nb_shape o = { s->ndim > b->ndim ? s->ndim : b->ndim, { 0 } };
        for (int d = 0; d < o.ndim; d++) {
            int db = d - (o.ndim - b->ndim), ds = d - (o.ndim - s->ndim);
            int64_t x = db >= 0 ? b->dim[db] : 1, y = ds >= 0 ? s->dim[ds] : 1;
            o.dim[d] = x == 1 ? y : x;
        }
        *b = o;
    }
}

int64_t *nb__index_offsets(const char *fn, const nb_shape *xs, const int64_t *stride, nb_tensor *const *idx, int n,
                              const nb_shape *b, int64_t count) {
    int64_t *offs = malloc(sizeof(int64_t) * (size_t)(count ? count : 1));
    if (!offs) {
        nb__error("nb_%s: out of memory for %lld index offsets", fn, (long long)count);
        return NULL;
    }
    int64_t st[NB_MAX_DIMS][NB_MAX_DIMS], c[NB_MAX_DIMS] = { 0 };
    for (int k = 0; k < n; k++) nb__bcast_strides(idx[k], b, st[k]);
    for (int64_t e = 0; e < count; e++) {
        int64_t off = 0;
        for (int k = 0; k < n; k++) {
            int64_t at = 0;
            for (int d = 0; d < b->ndim; d++) at += c[d] * st[k][d];
            const char *p = nb__data(idx[k]);
            int64_t v = idx[k]->dtype == NB_I64 ? ((const int64_t *)p)[at] : ((const int32_t *)p)[at], size = xs->dim[k];
            if (v < -size || v >= size) {
                free(offs);
                nb__error("nb_%s: index %lld is out of range for axis %d of size %lld", fn, (long long)v, k, (long long)size);
                return NULL;
            }
            off += (v < 0 ? v + size : v) * stride[k];
        }
        offs[e] = off;
        for (int d = b->ndim - 1; d >= 0; d--) {
            if (++c[d] < b->dim[d]) break;
            c[d] = 0;
        }
    }
    return offs;
}

/* ---------- the optimizer update ---------- */
void nb__optim_begin(nb_tensor *const *in, int nin, const nb_op_args *args, nb_op_args *a) {
    /* the coefficients and the step come from tensors, so that a replayed graph reads them fresh */
    *a = *args;
    const int64_t *step_p = (const int64_t *)nb__data(in[2]);
    const double *coef = (const double *)nb__data(in[3]);
    int64_t step = *step_p + 1;
    for (int k = 0; k < 6; k++) a->f[k] = coef[k];
    switch ((int)a->i[0]) {
    case NB_UPDATE_SGD: a->i[2] = step == 1; break;
    case NB_UPDATE_ADAM:
        /* the bias corrections, once per step rather than once per range (a GEMM epilogue runs
           the update in hundreds of ranges) */
        a->f[6] = sqrt(1 - pow(coef[2], (double)step));
        a->f[7] = coef[0] / (1 - pow(coef[1], (double)step));
        break;
    case NB_UPDATE_ADAGRAD: a->f[0] = coef[0] / (1 + (double)(step - 1) * coef[3]); break;
    case NB_UPDATE_NADAM: {
        /* torch 1.13's _single_tensor_nadam: mu_product is an f32 tensor, multiplied in float,
           and mu_product_next takes mu twice (mu_product * mu * mu_next after mu_product *= mu) */
        double b1 = coef[1], md = coef[5], t = (double)step;
        double mu = b1 * (1. - 0.5 * pow(0.96, t * md)), mu_next = b1 * (1. - 0.5 * pow(0.96, (t + 1) * md));
        float *mu_product = (float *)nb__data(in[6]);
        float prod = *mu_product * (float)mu;
        float prod_next = prod * (float)mu * (float)mu_next;
        *mu_product = prod;
        a->f[0] = -coef[0] * (1. - mu) / (1. - (double)prod);
        a->f[5] = -coef[0] * mu_next / (1. - (double)prod_next);
        a->f[6] = 1 - pow(coef[2], t);
        break;
    }
    case NB_UPDATE_RADAM: {
        double b2 = coef[2], t = (double)step, bc2 = 1 - pow(b2, t);
        double rho_inf = 2 / (1 - b2) - 1, rho_t = rho_inf - 2 * t * pow(b2, t) / bc2;
        a->f[5] = 1 - pow(coef[1], t);
        a->f[6] = sqrt(bc2);
        a->i[4] = rho_t > 5.;
        a->f[7] = rho_t > 5. ? sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0;
        break;
    }
    case NB_UPDATE_ADAMAX: a->f[6] = coef[0] / (1 - pow(coef[1], (double)step)); break;
    default: break;
    }
    for (int k = 0; k < nin; k++)
        if (k != 1 && k != 3) atomic_fetch_add_explicit(&in[k]->storage->version, 1, memory_order_relaxed);
}

void nb__optim_end(nb_tensor *const *in) { (*(int64_t *)nb__data(in[2]))++; }

/* ---------- the CTC loss ---------- */
static int64_t length_at(const nb_tensor *t, int64_t b) {
    return ctc_int_at(nb__data(t), t->dtype, t->shape.ndim ? b * t->stride[0] : 0);
}

/* Reads and checks the lengths and labels (inference checked shapes and dtypes) into meta
   (4 N values: il, tl, off, then N feasibility bytes); sizes the scratch. */
int nb__ctc_prepare(nb_tensor *const *in, nb_ctc_job *j, int64_t *meta, size_t *work_slot, size_t *labels_slot) {
    const nb_tensor *tg = in[1];
    int64_t *il = meta, *tl = meta + j->N, *off = meta + 2 * j->N;
    unsigned char *feasible = (unsigned char *)(meta + 3 * j->N);
    bool padded = tg->shape.ndim == 2;
    int64_t S = padded ? tg->shape.dim[1] : tg->shape.dim[0], pos = 0;
    j->tst = padded ? tg->stride[1] : tg->stride[0];
    int64_t max_cells = 0, max_L = 0;
    for (int64_t b = 0; b < j->N; b++) {
        il[b] = length_at(in[2], b);
        tl[b] = length_at(in[3], b);
        if (il[b] < 0 || il[b] > j->T) {
            nb__error("nb_ctc_loss: input_lengths[%lld] is %lld, outside [0, %lld] (log_probs has %lld steps)", (long long)b,
                      (long long)il[b], (long long)j->T, (long long)j->T);
            return -1;
        }
        if (tl[b] < 0 || (padded && tl[b] > S) || (!padded && tl[b] > S - pos)) {
            if (tl[b] < 0) nb__error("nb_ctc_loss: target_lengths[%lld] is %lld, a negative length", (long long)b, (long long)tl[b]);
            else if (padded)
                nb__error("nb_ctc_loss: target_lengths[%lld] is %lld, longer than the %lld labels of each row of targets [%lld, %lld]",
                          (long long)b, (long long)tl[b], (long long)S, (long long)j->N, (long long)S);
            else
                nb__error("nb_ctc_loss: target_lengths[%lld] is %lld, but the concatenated targets [%lld] have %lld left after the "
                          "sequences before it", (long long)b, (long long)tl[b], (long long)S, (long long)(S - pos));
            return -1;
        }
        off[b] = padded ? b * tg->stride[0] : pos * tg->stride[0];
        int64_t need = tl[b];
        for (int64_t k = 0; k < tl[b]; k++) {
            int64_t v = ctc_int_at(nb__data(tg), tg->dtype, off[b] + k * j->tst);
            if (v < 0 || v >= j->C || v == j->blank) {
                char where[128];
                if (padded) snprintf(where, sizeof where, "targets[%lld, %lld]", (long long)b, (long long)k);
                else snprintf(where, sizeof where, "targets[%lld] (sequence %lld's label %lld)", (long long)(pos + k), (long long)b, (long long)k);
                if (v == j->blank) nb__error("nb_ctc_loss: %s is the blank (%lld): targets hold labels only", where, (long long)v);
                else nb__error("nb_ctc_loss: %s is %lld, outside the %lld classes of log_probs", where, (long long)v, (long long)j->C);
                return -1;
            }
            if (k > 0 && v == ctc_int_at(nb__data(tg), tg->dtype, off[b] + (k - 1) * j->tst)) need++;
        }
        if (!padded) pos += tl[b];
        /* too few steps for the labels and the blanks that must separate repeats: p = 0 without a
           table (tl <= il from here on, so the table's size below is bounded by T (2 T + 1)) */
        feasible[b] = il[b] >= need;
        if (!feasible[b] || il[b] == 0) continue;
        int64_t L = 2 * tl[b] + 1, cells;
        if (__builtin_mul_overflow(il[b], L, &cells)) {
            nb__error("nb_ctc_loss: sequence %lld needs a %lld x %lld alignment table, more than memory can hold", (long long)b,
                      (long long)il[b], (long long)L);
            return -1;
        }
        if (L > max_L) max_L = L;
        if (cells > max_cells) max_cells = cells;
    }
    j->il = il;
    j->tl = tl;
    j->off = off;
    j->feasible = feasible;
    /* per thread: alpha (two rows, or the table), beta's two rows and a gradient row */
    int64_t need_work;
    bool over = j->backward ? __builtin_add_overflow(max_cells, 2 * max_L + j->C, &need_work) : (need_work = 2 * max_L, false);
    if (over || (uint64_t)need_work > SIZE_MAX / sizeof(double)) {
        nb__error("nb_ctc_loss: the alignment tables (%lld values) are more than memory can hold", (long long)max_cells);
        return -1;
    }
    *work_slot = (size_t)need_work;
    *labels_slot = (size_t)max_L;
    return 0;
}

/* in: log_probs [T, N, C], targets, input_lengths, target_lengths (and the gradient [N] for the
   backward); i[0] the blank, i[1] zero_infinity. */
nb_ctc_job nb__ctc_job(nb_tensor *out, nb_tensor *const *in, const nb_op_args *args, bool backward) {
    const nb_tensor *lp = in[0];
    nb_ctc_job j = { .lp = nb__data(lp), .dt = lp->dtype, .tg = nb__data(in[1]), .tdt = in[1]->dtype, .out = nb__data(out),
                  .T = lp->shape.dim[0], .N = lp->shape.dim[1], .C = lp->shape.dim[2], .blank = args->i[0],
                  .zero_inf = args->i[1] != 0, .backward = backward };
    for (int d = 0; d < 3; d++) j.lst[d] = lp->stride[d];
    if (backward) {
        j.g = nb__data(in[4]);
        j.gst = in[4]->stride[0];
    }
    return j;
}

