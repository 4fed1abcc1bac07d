/* The nabla command's side of a job of several ranks: the options every rank must share, and
   how the job ends when the group failed. */
#ifndef NABLA_CLI_DIST_H
#define NABLA_CLI_DIST_H

/* Leaves the process group and returns rc; when the group failed (a peer stopped, died or was
   cut off) it ends the whole job with nb_dist_abort(rc) instead, since MPI_Finalize would wait
   for the lost peer forever. cmd names the subcommand in the message. */
int cli_dist_end(int rc, const char *cmd);

/* Whether every rank was given the same values for the n options named (names[i] = values[i] on
   this rank): one all-gather of every rank's list. 0 when they agree; else -1 on every rank,
   each difference printed as "nabla CMD: option --lr differs across ranks: 0.01 on rank 0, 0.1
   on rank 1". Collective: every rank calls it. */
int cli_dist_agree(const char *cmd, const char *const *names, const char *const *values, int n);

struct train_opts;
/* cli_dist_agree over the options of `nabla train` that decide what the ranks compute together
   (the data, model, optimizer, schedule, batch, epochs, seed, ...); those only rank 0 uses
   (--logdir, --out, --quiet) and those of each rank's own machine (--threads, --workers) may
   differ. */
int cli_train_agree(const struct train_opts *o);

#endif
