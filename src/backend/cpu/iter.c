/* Strided, broadcasting iteration shared by the CPU elementwise kernels. */
#include "iter.h"
#include <string.h>

static void coalesce(nb_iter *it) {
    /* drop size-1 axes, then merge neighbours that are contiguous for every operand */
    int nd = 0;
    for (int d = 0; d < it->nd; d++) {
        if (it->dim[d] == 1) continue;
        it->dim[nd] = it->dim[d];
        for (int k = 0; k < it->nops; k++) it->st[k][nd] = it->st[k][d];
        nd++;
    }
    if (nd == 0) {
        it->dim[0] = 1;
        for (int k = 0; k < it->nops; k++) it->st[k][0] = 0;
        nd = 1;
    }
    int out = 0;
    for (int d = 1; d < nd; d++) {
        bool merge = true;
        for (int k = 0; k < it->nops && merge; k++) merge = it->st[k][out] == it->st[k][d] * it->dim[d];
        if (merge) {
            it->dim[out] *= it->dim[d];
            for (int k = 0; k < it->nops; k++) it->st[k][out] = it->st[k][d];
        } else {
            out++;
            it->dim[out] = it->dim[d];
            for (int k = 0; k < it->nops; k++) it->st[k][out] = it->st[k][d];
        }
    }
    it->nd = out + 1;
}

void nb__iter_init_raw(nb_iter *it, const nb_shape *shape, char *out_ptr, const int64_t *out_stride, size_t out_esize,
                       nb_tensor *const *in, int nin) {
    int nd = shape->ndim;
    it->nd = nd;
    it->nops = nin + 1;
    it->numel = nb__shape_numel(shape);
    it->ptr[0] = out_ptr;
    for (int d = 0; d < nd; d++) {
        it->dim[d] = shape->dim[d];
        it->st[0][d] = out_stride[d] * (int64_t)out_esize;
    }
    for (int k = 0; k < nin; k++) {
        const nb_tensor *t = in[k];
        int64_t es = (int64_t)nb_dtype_size(t->dtype);
        it->ptr[k + 1] = nb__data(t);
        int lead = nd - t->shape.ndim;
        for (int d = 0; d < nd; d++) {
            int td = d - lead;
            it->st[k + 1][d] = (td < 0 || t->shape.dim[td] == 1) ? 0 : t->stride[td] * es;
        }
    }
    coalesce(it);
}

void nb__iter_init(nb_iter *it, nb_tensor *out, nb_tensor *const *in, int nin) {
    nb__iter_init_raw(it, &out->shape, nb__data(out), out->stride, nb_dtype_size(out->dtype), in, nin);
}

/* Runs rows [r0, r1) of the iteration (a row is one run of the innermost axis), or, when
   the whole iteration is one axis, elements [r0, r1) of it. */
static void run_range(const nb_iter *it, nb_inner_fn fn, const void *ctx, int64_t r0, int64_t r1) {
    int nd = it->nd, nops = it->nops;
    int64_t inner = it->dim[nd - 1];
    int64_t s[NB_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) s[k] = it->st[k][nd - 1];
    char *p[NB_ITER_MAX_OPS];
    if (nd == 1) {
        for (int k = 0; k < nops; k++) p[k] = it->ptr[k] + r0 * s[k];
        fn(p, s, r1 - r0, ctx);
        return;
    }
    int64_t idx[NB_MAX_DIMS];
    int64_t r = r0;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = r % it->dim[d];
        r /= it->dim[d];
    }
    for (int64_t row = r0; row < r1; row++) {
        for (int k = 0; k < nops; k++) {
            char *q = it->ptr[k];
            for (int d = 0; d < nd - 1; d++) q += idx[d] * it->st[k][d];
            p[k] = q;
        }
        fn(p, s, inner, ctx);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < it->dim[d]) break;
            idx[d] = 0;
        }
    }
}

/* A one-axis iteration is cut into blocks of this many elements whatever the thread count:
   a vectorised inner loop ends in scalar code, so where a run is cut must not depend on the
   threads, or neither would the bits. */
#define ITER_BLOCK 8192

typedef struct {
    const nb_iter *it;
    nb_inner_fn fn;
    const void *ctx;
} iter_job;

/* Units [u0, u1): rows of the innermost axis, or blocks of a one-axis iteration. */
static void iter_units(void *c, int64_t u0, int64_t u1, int slot) {
    (void)slot;
    const iter_job *j = c;
    const nb_iter *it = j->it;
    if (it->nd != 1) {
        run_range(it, j->fn, j->ctx, u0, u1);
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        int64_t r0 = u * ITER_BLOCK, r1 = r0 + ITER_BLOCK < it->dim[0] ? r0 + ITER_BLOCK : it->dim[0];
        run_range(it, j->fn, j->ctx, r0, r1);
    }
}

void nb__iter_run(nb_iter *it, nb_inner_fn fn, const void *ctx) {
    if (it->numel == 0) return;
    int64_t units = it->nd == 1 ? (it->dim[0] + ITER_BLOCK - 1) / ITER_BLOCK : it->numel / it->dim[it->nd - 1];
    int threads = it->numel >= NB_PARALLEL_GRAIN && units > 1 ? nb__threads() : 1;
    iter_job j = { it, fn, ctx };
    nb__parallel_for(threads, units, iter_units, &j);
}
