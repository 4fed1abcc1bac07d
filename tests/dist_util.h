/* Shared by the MPI tests: joining the process group as one rank, or reporting the test skipped
   in a build without MPI. Include once per test program, after test_util.h. */
#ifndef NABLA_TEST_DIST_UTIL_H
#define NABLA_TEST_DIST_UTIL_H

static int R, W; /* this rank, the world size */

/* Joins the group with one kernel thread per rank and sets R and W; 0 to go on, else the
   program's exit status (77, which CTest reports as SKIPPED, without MPI; 1 when init fails). */
static int dist_test_start(int *argc, char ***argv) {
#ifndef NABLA_WITH_MPI
    (void)argc;
    (void)argv;
    printf("SKIPPED: nabla was built without MPI (NABLA_WITH_MPI=OFF)\n");
    return 77;
#else
    if (nb_dist_init(argc, argv) < 0) {
        fprintf(stderr, "nb_dist_init: %s\n", nb_error());
        return 1;
    }
    nb_set_num_threads(1);
    R = nb_dist_rank();
    W = nb_dist_world_size();
    return 0;
#endif
}

#endif
