/* Internal definitions of the dist area (comm.c, ddp.c): started collectives on raw buffers,
   which DDP runs without the per-call header (it checks its layout across ranks once, when it is
   made), and the group's state. Not installed. */
#ifndef NB_DIST_IMPL_H
#define NB_DIST_IMPL_H

#include "../core/core_impl.h"
#include "nabla/dist.h"

/* A payload collective started and not yet waited for (NULL when the world has one process,
   where there is nothing to wait for). */
typedef struct nb_dist_op nb_dist_op;

/* 0 when the group can run collectives; else <0 with "fn: ..." saying why (nb_dist_init not
   called, or an earlier collective failed). */
int nb__dist_usable(const char *fn);
/* Starts an in-place sum over the ranks of count elements of dtype (f32, f64, i64, i32, u8) at
   buf, which must stay untouched until nb__dist_wait. Every rank makes the same call in the same
   order (no header is exchanged). *op is NULL when the world has one process. 0 or <0. */
int nb__dist_start_sum(void *buf, int64_t count, nb_dtype dtype, const char *fn, nb_dist_op **op);
/* As nb__dist_start_sum, a broadcast of count elements from root. */
int nb__dist_start_broadcast(void *buf, int64_t count, nb_dtype dtype, int root, const char *fn, nb_dist_op **op);
/* Starts an all-gather of per elements from each rank: send (per elements) into recv (world x
   per, in rank order). side: on the second communicator, whose collectives keep an order of
   their own beside the first's. Every rank makes the same calls in the same order on each. */
int nb__dist_start_all_gather(const void *send, void *recv, int64_t per, nb_dtype dtype, bool side, const char *fn,
                              nb_dist_op **op);
/* As nb__dist_start_all_gather, a reduce-scatter: send (world x per) summed over the ranks, and
   this rank's per elements into recv. */
int nb__dist_start_reduce_scatter(const void *send, void *recv, int64_t per, nb_dtype dtype, bool side, const char *fn,
                                  nb_dist_op **op);
/* Hands op to the progress thread, which tests it every 50 us until it is done or waited for,
   so it moves on while the caller computes (a no-op when the thread is off: MPI initialised by
   the program, or NABLA_DIST_PROGRESS=0). */
void nb__dist_progress(nb_dist_op *op);
/* Lets MPI move started collectives on (MPI progresses only inside its calls); whether op is done. */
bool nb__dist_test(nb_dist_op *op);
/* Waits for op against the timeout and frees it (NULL is done); 0, or <0 with an error naming fn
   and what. On a timeout or an MPI error the group becomes unusable, and the buffer the op writes
   must not be freed: hand it to nb__dist_adopt. */
int nb__dist_wait(nb_dist_op *op, const char *fn, const char *what);
/* Takes malloc'ed memory that an abandoned collective may still write; freed after MPI_Finalize. */
void nb__dist_adopt(void *mem);
/* nb_ddp's common start (ddp.c): lists m's parameters and buffers (malloc'ed arrays the caller
   frees), checks they are contiguous f32/f64 cpu tensors and that every rank's module agrees,
   and broadcasts rank 0's values. 0, or <0 with an error (m is left to the caller). */
int nb__ddp_prepare(nb_module *m, double bucket, nb_named_tensor **params, int *nparams, nb_named_tensor **buffers,
                    int *nbuffers);
/* Full sharding (fsdp.c): the FSDP module over m (taken over, also on failure), after
   nb__ddp_prepare listed pl and bl. */
nb_module *nb__fsdp_new(nb_module *m, const nb_named_tensor *pl, int np, const nb_named_tensor *bl, int nbuf);
/* Whether m is an FSDP module; its wrapped module; its counters. */
bool nb__fsdp_is(const nb_module *m);
nb_module *nb__fsdp_inner(nb_module *m);
nb_ddp_stats nb__fsdp_stats(nb_module *m);
/* nb_ddp_bucket_info for an FSDP module: unit i's full bytes and parameter count. */
int nb__fsdp_unit_info(nb_module *m, int i, int64_t *bytes, int *params);
/* ---- sharded checkpoints (checkpoint.c): where each module parameter's elements are ---- */
/* A run of one logical parameter's elements that this rank holds in a tensor of the module:
   elements [start, start + count) of param (named name, of the wrapped module) are at element
   local of the holding tensor. */
typedef struct nb__dist_segment {
    const char *name;
    nb_tensor *param;   /* the logical parameter (its shape and dtype; under full sharding it has no memory) */
    int64_t start, count, local;
} nb__dist_segment;
/* How an optimizer slot's tensors (slot i: the module's parameter i, in nb_module_named_parameters
   order) are held: replicated (every rank holds the same) or not (a shard, or the owner's only). */
typedef struct nb__dist_layout {
    bool values_replicated, state_replicated;
} nb__dist_layout;
/* The segments of the module's parameter i (entry, as nb_module_named_parameters listed it) held
   on this rank (up to cap in out); their count, or <0. layout says what is replicated. Plain
   modules, DDP and ZeRO-1: one whole segment. */
int nb__dist_segments(nb_module *m, int i, const nb_named_tensor *entry, nb__dist_segment *out, int cap,
                      nb__dist_layout *layout);
/* Under full sharding (fsdp.c): the same for its flat parameter i. */
int nb__fsdp_segments(nb_module *m, int i, nb__dist_segment *out, int cap);
/* The module a DDP or FSDP module wraps, or m itself. */
nb_module *nb__dist_wrapped(nb_module *m);
/* Whether m is a DDP module under ZeRO-1 (ddp.c). */
bool nb__ddp_is_zero(const nb_module *m);
/* A table from tensor addresses to indices (DDP's and FSDP's parameters, found again by the
   backward hook that names a leaf): open addressing, sized once for n keys. */
typedef struct nb__dist_index {
    const nb_tensor **keys;
    int *vals;
    size_t cap; /* a power of two */
} nb__dist_index;
/* Makes an empty table for n keys; 0, or -1 when memory runs out. */
int nb__dist_index_init(nb__dist_index *ix, int n);
/* Files t under v; -1, or the value t is filed under already (nothing changes then). */
int nb__dist_index_put(nb__dist_index *ix, const nb_tensor *t, int v);
/* The value t is filed under, or -1. */
int nb__dist_index_get(const nb__dist_index *ix, const nb_tensor *t);
void nb__dist_index_free(nb__dist_index *ix);

/* dst[k] = src[k] / world for n f32 or f64 elements (src may be dst): an average from a sum, or
   a rank's share of one. */
void nb__dist_scale(void *dst, const void *src, int64_t n, nb_dtype dtype, int world);
/* Every rank's status, collectively: <0 on all of them when any rank's rc was <0 (that rank keeps
   its own error; the others name it). rc as it is in a world of one. */
int nb__dist_agree(int rc, const char *fn);
/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double nb__dist_now(void);

#endif
