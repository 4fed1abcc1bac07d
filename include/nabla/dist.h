/* nabla dist: training across processes on MPI: the process group (init, rank, world size) and
   collectives on tensors with errors instead of hangs. */
#ifndef NABLA_DIST_H
#define NABLA_DIST_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How nb_dist_all_reduce and nb_dist_reduce_scatter combine the ranks' values. AVG is the sum
   divided by the world size (float tensors only). */
typedef enum nb_reduce_op { NB_REDUCE_SUM, NB_REDUCE_AVG, NB_REDUCE_MAX, NB_REDUCE_MIN } nb_reduce_op;

/* ---- the process group ----
   Every collective is called by every rank in the same order. Each one first exchanges a small
   header (which collective, dtype, shape, root) with every peer, so a mismatch is an error on
   every rank naming the rank that differs, and a rank that does not arrive within the timeout is
   an error naming it; the payload then runs as a non-blocking MPI call polled against the same
   deadline. After a timeout or an MPI error the group is unusable: every later collective fails
   at once, saying why (restart the job). The collectives take contiguous cpu tensors of f32,
   f64, i64, i32 or u8. */

/* Joins the process group: MPI_Init (unless the program already initialised MPI) when the
   process was started by an MPI launcher (mpirun, srun), else a world of one process with
   nothing to initialise. argc/argv may be NULL. 0, or <0 with the error (also when launched with
   several processes by a build without MPI: "built without MPI (NABLA_WITH_MPI=OFF)"). Calling
   it again is a no-op. The data loader takes its default rank and world size from here. */
NB_API int nb_dist_init(int *argc, char ***argv);
/* Leaves the group (MPI_Finalize when nb_dist_init initialised MPI); later calls are no-ops. */
NB_API void nb_dist_finalize(void);
/* Whether nb_dist_init has run (and nb_dist_finalize has not). */
NB_API bool nb_dist_is_initialized(void);
/* This process's rank, 0 .. world size - 1 (0 before nb_dist_init). */
NB_API int nb_dist_rank(void);
/* The number of processes in the group (1 before nb_dist_init). */
NB_API int nb_dist_world_size(void);
/* What the collectives run on: "MPI (Open MPI v4.1.4, ...)", or "none (built without MPI:
   NABLA_WITH_MPI=OFF)". Static text. */
NB_API const char *nb_dist_backend(void);
/* Sets the collectives' timeout in seconds (> 0; the default is $NABLA_DIST_TIMEOUT, else 60)
   and returns the previous one; a value <= 0 restores the default. */
NB_API double nb_dist_set_timeout(double seconds);

/* ---- collectives on tensors (0 or <0; the tensors are borrowed) ---- */
/* Combines t across ranks with op, in place: every rank ends with the same values. */
NB_API int nb_dist_all_reduce(nb_tensor *t, nb_reduce_op op);
/* Copies root's t into every other rank's t, in place (the same dtype and shape everywhere). */
NB_API int nb_dist_broadcast(nb_tensor *t, int root);
/* Every rank's t (one shape and dtype everywhere) concatenated along axis 0 in rank order: a new
   tensor [world * d0, ...] ([world] for a 0-d t), as torch's all_gather_into_tensor. */
NB_API nb_tensor *nb_dist_all_gather(nb_tensor *t);
/* t [world * k, ...] combined across ranks with op, and the rank's own k rows returned: a new
   tensor [k, ...], as torch's reduce_scatter_tensor. */
NB_API nb_tensor *nb_dist_reduce_scatter(nb_tensor *t, nb_reduce_op op);
/* Returns once every rank has called it (or an error naming those that did not, in time). */
NB_API int nb_dist_barrier(void);

#ifdef __cplusplus
}
#endif
#endif
