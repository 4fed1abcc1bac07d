/* nabla dist: training across processes on MPI: the process group (init, rank, world size),
   collectives on tensors with errors instead of hangs, and DDP (nb_ddp). docs/distributed.md
   says how to launch it (mpirun) and what is not built yet. */
#ifndef NABLA_DIST_H
#define NABLA_DIST_H

#include "core.h"
#include "io.h"
#include "nn.h"
#include "optim.h"

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
   at once, saying why (restart the job). The collectives take contiguous cpu tensors; the
   reductions f32, f64, i64, i32 or u8 (broadcast and all-gather move any dtype). Collectives
   are called from one thread at a time. */

/* Joins the process group: MPI_Init (unless the program already initialised MPI) when the
   process was started by an MPI launcher (mpirun, srun), else a world of one process with
   nothing to initialise. argc/argv may be NULL. 0, or <0 with the error (also when launched with
   several processes by a build without MPI: "built without MPI (NABLA_WITH_MPI=OFF)"). Calling
   it again is a no-op. The data loader takes its default rank and world size from here. */
NB_API int nb_dist_init(int *argc, char ***argv);
/* Leaves the group (MPI_Finalize when nb_dist_init initialised MPI); later calls are no-ops.
   After a failure (nb_dist_failure) MPI_Finalize can wait forever for a peer that is stopped or
   lost: a program ends such a job with nb_dist_abort instead. */
NB_API void nb_dist_finalize(void);
/* Why the group is unusable (a collective timed out or failed: the error that marked it), or
   NULL while it is usable or not initialised. Static text. */
NB_API const char *nb_dist_failure(void);
/* Ends the whole job at once with exit status code (1 when 0): MPI_Abort, so the launcher stops
   every rank, the stopped and the lost included; without peers, exit(code). For a program whose
   group failed (as `nabla train` does); the library never calls it itself. Does not return. */
NB_API void nb_dist_abort(int code);
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

/* ---- DDP: data-parallel training ---- */
/* What nb_ddp shards: NONE is plain DDP (every rank holds everything). OPTIMIZER is ZeRO-1:
   every optimizer made on the DDP module keeps state for, and updates, only the parameters this
   rank owns (whole parameters dealt out by size, as torch's ZeroRedundancyOptimizer), and
   nb_optim_step ends by broadcasting each rank's updated parameters to the others, so every rank
   holds every parameter and the results are plain DDP's bit for bit. FULL is FSDP-style full
   sharding: the wrapped module is cut into units (each direct child with parameters, the children
   of a child that is a Sequential instead of it, and the root's own parameters); each rank keeps 1/world of each unit's flattened parameters, which are
   the DDP module's only parameters (nb_module_named_parameters lists "flat_param_<child>"), so an
   optimizer made on it keeps 1/world of the state. A unit's full parameters are all-gathered
   before its forward and again before its backward, and released after each; its gradients are
   reduce-scattered during backward, leaving each rank its shard, averaged. Outside those
   moments the wrapped module's parameters have no memory: read or write them between
   nb_dist_full_params_begin and _end, and save and load with nb_dist_save_state_dict and
   nb_dist_load_state_dict. */
typedef enum nb_shard { NB_SHARD_NONE, NB_SHARD_OPTIMIZER, NB_SHARD_FULL } nb_shard;
/* Options of nb_ddp; zero fields are the defaults. */
typedef struct nb_ddp_opts {
    double bucket_mb; /* gradient bucket size in MiB (0: 25, as PyTorch); the first bucket holds
                         at most 1 MiB (or bucket_mb when smaller), so it starts early */
    nb_shard shard;   /* NB_SHARD_NONE (the default) */
} nb_ddp_opts;

/* Wraps m for data-parallel training (torch.nn.parallel.DistributedDataParallel), taking it
   over (freed with the DDP module, and on failure; a DDP module given again is refused and left
   to the caller). Collective: every rank calls it with the same
   architecture. Rank 0's parameters and buffers are broadcast to the others; parameter
   gradients are grouped in buckets in reverse registration order, and each bucket's allreduce
   starts during backward as soon as its last gradient is ready; the end of nb_backward waits
   for them and leaves every gradient averaged over the ranks. A parameter that got no gradient
   on a rank counts as zeros there; one that got none on any rank keeps no gradient. nb_forward
   runs m's forward. The module lists m's parameters, buffers and children under m's own names
   (no "module." prefix, unlike torch), so a state dict saved on rank 0 loads into m's
   architecture in a single process; optimizers are made on it as on m. One backward per forward:
   call nb_optim_zero_grad (or nb_module_zero_grad) before each backward. */
NB_API nb_module *nb_ddp(nb_module *m, nb_ddp_opts opts);
/* Collective: brings every unit's full parameters in (NB_SHARD_FULL; a no-op for the other
   modes), so the wrapped module's parameters can be read and written, as torch's
   summon_full_params. 0 or <0. */
NB_API int nb_dist_full_params_begin(nb_module *ddp);
/* Ends nb_dist_full_params_begin: with writeback, what was written into the full parameters
   (the same on every rank) goes into each rank's shard; then they are released. 0 or <0. */
NB_API int nb_dist_full_params_end(nb_module *ddp, bool writeback);
/* Collective: rank 0 writes the wrapped module's ordinary state dict (full parameters, the
   wrapped module's names), which loads into the plain architecture in one process. Every rank
   returns rank 0's status. Works for a plain module too. */
NB_API int nb_dist_save_state_dict(nb_module *ddp, const char *path);
/* Collective: every rank loads path (an ordinary state dict, read by each rank: a shared or
   copied file) into the wrapped module, then keeps its shard. Fails on every rank when any fails. */
NB_API int nb_dist_load_state_dict(nb_module *ddp, const char *path, nb_load_opts opts);
/* Collective: a sharded checkpoint of the module (DDP, ZeRO-1, fully sharded, or plain) and of
   opt's state (NULL: none) in folder dir (made if missing): each rank writes the elements it
   holds to dir/rank-R-of-W.safetensors (what every rank holds alike, split evenly among them),
   and rank 0 then writes dir/index.json naming the files and the parameters, so a folder
   without an index is a save that did not finish. md (rank 0's; NULL: none) goes into rank 0's
   file. 0, or <0 on every rank when any failed. */
NB_API int nb_dist_save_sharded(nb_module *ddp, nb_optimizer *opt, const char *dir, const nb_metadata *md);
/* Collective: loads a sharded checkpoint written by any number of ranks into the module and opt
   (NULL: none) under this world size and sharding mode, or into a plain module in one process;
   each rank reads the pieces that overlap what it holds. The parameters must match the index's
   names, dtypes and shapes. md (NULL: not wanted) receives the saved metadata. 0, or <0 on every
   rank when any failed (with what was missing or different named). For a plain module it is not
   collective: one rank alone may load a checkpoint into one. */
NB_API int nb_dist_load_sharded(nb_module *ddp, nb_optimizer *opt, const char *dir, nb_metadata *md);
/* The module nb_ddp wrapped (borrowed), or NULL with an error when ddp is not a DDP module. */
NB_API nb_module *nb_ddp_inner(nb_module *ddp);

/* What a DDP module has done since it was made. */
typedef struct nb_ddp_stats {
    int buckets;                /* gradient buckets */
    int64_t bucket_bytes_max;   /* bytes of the largest bucket */
    int64_t backwards;          /* backward passes reduced */
    int64_t buckets_early;      /* bucket allreduces started while backward was still running */
    int64_t buckets_late;       /* started at its end (a bucket with an unused parameter, the last one) */
    double wait_seconds;        /* time the ends of backward waited for allreduces */
    int params_owned;           /* parameters this rank's optimizer updates (all but under ZeRO-1) */
    int64_t owned_bytes;        /* their bytes */
} nb_ddp_stats;
/* The counters of a DDP module (zeros with an error when ddp is not one). */
NB_API nb_ddp_stats nb_ddp_get_stats(nb_module *ddp);
/* Bucket i's gradient bytes and parameter count (0 or <0 when out of range or not DDP). */
NB_API int nb_ddp_bucket_info(nb_module *ddp, int i, int64_t *bytes, int *params);

#ifdef __cplusplus
}
#endif
#endif
