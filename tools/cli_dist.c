/* The nabla command's side of a job of several ranks: a failed group ends the job (MPI_Abort)
   rather than finalizing with a peer that will never answer. */
#include "cli_dist.h"
#include <nabla.h>
#include <stdio.h>

int cli_dist_end(int rc, const char *cmd) {
    const char *why = nb_dist_failure();
    if (!why) {
        nb_dist_finalize();
        return rc;
    }
    /* the checkpoint of the last whole epoch is left as it was: the run resumes from it */
    (void)why; /* the error that marked it was reported where it happened */
    fprintf(stderr, "nabla %s: rank %d: the process group failed; ending every rank of the job (MPI_Abort)\n", cmd,
            nb_dist_rank());
    fflush(stdout);
    fflush(stderr);
    nb_dist_abort(rc ? rc : 1);
    return rc ? rc : 1; /* not reached */
}
