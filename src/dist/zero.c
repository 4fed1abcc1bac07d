/* ZeRO-1 (nb_ddp with NB_SHARD_OPTIMIZER): the optimizer's state sharded by parameter.
   As torch's ZeroRedundancyOptimizer: whole parameters are dealt out, largest first, each to the
   rank holding the fewest bytes so far (ties to the lowest rank), the same on every rank. Every
   rank still gets every averaged gradient (DDP's allreduce); its optimizer keeps state for, and
   updates, only its own parameters, and after each step each rank's parameters are broadcast
   from it, packed one dtype at a time. The arithmetic of every update is DDP's own, so the
   parameters are DDP's bit for bit. */
#include "ddp_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_size_desc(const void *a, const void *b) {
    const int64_t *x = a, *y = b; /* [bytes, index] pairs */
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

int nb__ddp_zero_partition(ddp_module *d) {
    int world = nb_dist_world_size(), me = nb_dist_rank();
    int64_t *order = malloc(sizeof(int64_t) * 2 * (size_t)(d->nparams > 0 ? d->nparams : 1));
    int64_t *load = calloc((size_t)world, sizeof(int64_t));
    if (!order || !load) { free(order); free(load); return -1; }
    for (int i = 0; i < d->nparams; i++) {
        order[2 * i] = nb_numel(d->params[i].t) * (int64_t)nb_dtype_size(nb_dtype_of(d->params[i].t));
        order[2 * i + 1] = i;
    }
    qsort(order, (size_t)d->nparams, 2 * sizeof(int64_t), by_size_desc);
    int64_t most = 0;
    for (int k = 0; k < d->nparams; k++) {
        int r = 0;
        for (int q = 1; q < world; q++)
            if (load[q] < load[r]) r = q;
        ddp_param *p = &d->params[order[2 * k + 1]];
        p->owner = r;
        load[r] += order[2 * k];
        if (r == me) { d->stats.params_owned++; d->stats.owned_bytes += order[2 * k]; }
    }
    for (int r = 0; r < world; r++) most = load[r] > most ? load[r] : most;
    free(order);
    free(load);
    d->staging = malloc(most > 0 ? (size_t)most : 1);
    return d->staging ? 0 : -1;
}

bool nb__ddp_zero_owns(const nb_tensor *param, void *ctx) {
    ddp_module *d = ctx;
    int i = nb__dist_index_get(&d->index, param);
    return i < 0 || d->params[i].owner == nb_dist_rank();
}

int nb__ddp_zero_after_step(void *ctx) {
    ddp_module *d = ctx;
    if (d->broken) {
        nb__error("nb_optim_step: a collective of this DDP module failed earlier; the process group is unusable (restart "
                  "the job)");
        return -1;
    }
    int world = nb_dist_world_size(), me = nb_dist_rank();
    if (world == 1) return 0;
    static const nb_dtype dtypes[2] = { NB_F32, NB_F64 };
    for (int r = 0; r < world; r++)
        for (int k = 0; k < 2; k++) {
            size_t es = nb_dtype_size(dtypes[k]), at = 0;
            for (int i = 0; i < d->nparams; i++) {
                ddp_param *p = &d->params[i];
                if (p->owner != r || nb_dtype_of(p->t) != dtypes[k]) continue;
                size_t n = (size_t)nb_numel(p->t) * es;
                if (r == me) memcpy((char *)d->staging + at, nb__data(p->t), n);
                at += n;
            }
            if (at == 0) continue;
            nb_dist_op *op = NULL;
            char what[96];
            snprintf(what, sizeof what, "the broadcast of rank %d's updated parameters (ZeRO-1)", r);
            if (nb__dist_start_broadcast(d->staging, (int64_t)(at / es), dtypes[k], r, "nb_optim_step", &op) < 0 ||
                nb__dist_wait(op, "nb_optim_step", what) < 0) {
                if (op) nb__dist_adopt(d->staging); /* MPI may still write it */
                d->staging = NULL;
                d->broken = true;
                return -1;
            }
            if (r == me) continue;
            at = 0;
            for (int i = 0; i < d->nparams; i++) {
                ddp_param *p = &d->params[i];
                if (p->owner != r || nb_dtype_of(p->t) != dtypes[k]) continue;
                size_t n = (size_t)nb_numel(p->t) * es;
                memcpy(nb__data(p->t), (char *)d->staging + at, n);
                atomic_fetch_add(&p->t->storage->version, 1); /* an in-place write, as the update's */
                at += n;
            }
        }
    return 0;
}

