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
/* Lets MPI move started collectives on (MPI progresses only inside its calls); whether op is done. */
bool nb__dist_test(nb_dist_op *op);
/* Waits for op against the timeout and frees it (NULL is done); 0, or <0 with an error naming fn
   and what. On a timeout or an MPI error the group becomes unusable, and the buffer the op writes
   must not be freed: hand it to nb__dist_adopt. */
int nb__dist_wait(nb_dist_op *op, const char *fn, const char *what);
/* Takes malloc'ed memory that an abandoned collective may still write; freed after MPI_Finalize. */
void nb__dist_adopt(void *mem);
/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double nb__dist_now(void);

#endif
