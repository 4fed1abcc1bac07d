/* The nabla command's side of a job of several ranks: how it ends when the group failed. */
#ifndef NABLA_CLI_DIST_H
#define NABLA_CLI_DIST_H

/* Leaves the process group and returns rc; when the group failed (a peer stopped, died or was
   cut off) it ends the whole job with nb_dist_abort(rc) instead, since MPI_Finalize would wait
   for the lost peer forever. cmd names the subcommand in the message. */
int cli_dist_end(int rc, const char *cmd);

#endif
