/* DDP's module and its buckets (ddp.c), shared with ZeRO-1's sharded optimizer step (zero.c). */
#ifndef NB_DDP_IMPL_H
#define NB_DDP_IMPL_H

#include "dist_impl.h"

typedef struct {
    nb_tensor *t;       /* the parameter (the module's) */
    const char *name;   /* its dotted name (the module's pool) */
    int bucket;
    int64_t offset;     /* first element in the bucket's buffer */
    int flag;           /* index of its used flag among the bucket's flags */
    bool ready;         /* reported in this backward */
    int owner;          /* ZeRO-1: the rank whose optimizer updates it */
} ddp_param;

typedef struct {
    nb_dtype dtype;
    int64_t numel;      /* gradient elements; the count flags follow them in buf */
    int first, count;   /* params[first .. first + count) */
    nb_tensor *flat;    /* the bucket: numel gradient elements, then count flags; the averaged
                           gradients are views of it */
    void *buf;          /* flat's data */
    int ready;          /* parameters ready in this backward */
    nb_dist_op *op;     /* the allreduce in flight */
    bool launched;
} ddp_bucket;

typedef struct ddp_module {
    nb_module base;     /* base.state is the inner module's */
    nb_module *inner;
    struct nb_module_state *own_state; /* the empty registry nb_module_new gave base */
    int nparams;
    ddp_param *params;  /* in bucket order: reverse registration */
    nb__dist_index index; /* parameter address -> index in params */
    ddp_bucket *buckets;
    int nbuckets;
    int next_launch;    /* buckets start in order: the next one to start */
    bool armed;         /* a forward recorded a graph; its backward reduces */
    bool broken;        /* a reduction failed: the group is unusable */
    int hooks;
    nb_shard shard;
    void *staging;      /* ZeRO-1: one rank's parameters of one dtype, packed for their broadcast */
    struct ddp_call *calls; /* graph mode: what compiled steps' host calls point at (freed with d) */
    bool record_failed; /* graph mode: a host call could not be recorded in this backward */
    nb_ddp_stats stats;
} ddp_module;

/* ZeRO-1 (zero.c): deals the parameters out to the ranks (each p->owner), largest first, and
   makes the staging buffer; 0, or -1 out of memory. */
int nb__ddp_zero_partition(ddp_module *d);
/* The optimizer partition's hooks: whether this rank owns param, and the broadcast of every
   rank's updated parameters after a step (0, or -1 with the error; the module is then broken). */
bool nb__ddp_zero_owns(const nb_tensor *param, void *ctx);
int nb__ddp_zero_after_step(void *ctx);

#endif
