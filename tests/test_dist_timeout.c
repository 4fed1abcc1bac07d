/* A rank that does not join a collective: the last rank goes straight to nb_dist_finalize while
   the others call nb_dist_all_reduce with a 1 s timeout ($NABLA_DIST_TIMEOUT, set by
   tests/dist.cmake). They must get an error naming the collective and the missing rank within
   a few seconds, not hang, and every later collective must fail at once saying why; then every
   rank finalizes and exits. Exits 77 (CTest's SKIPPED) in a build without MPI. */
#include "test_util.h"
#include "dist_util.h"
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}


static void test_missing_rank(void **state) {
    (void)state;
    if (W < 2) skip();
    /* the timeout comes from the environment; nb_dist_set_timeout changes it and gives it back */
    double t = nb_dist_set_timeout(5);
    assert_true(t == 1.0);
    assert_true(nb_dist_set_timeout(0) == 5.0);
    assert_int_equal(nb_dist_barrier(), 0);
    assert_null(nb_dist_failure()); /* usable so far */
    if (R == W - 1) return; /* this rank never arrives */
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(4), NB_F32);
    double t0 = now();
    int rc = nb_dist_all_reduce(x, NB_REDUCE_SUM);
    double took = now() - t0;
    assert_int_equal(rc, -1);
    char want[120];
    snprintf(want, sizeof want, "rank %d did not arrive", W - 1);
    const char *e = nb_error();
    if (!e || !strstr(e, "nb_dist_all_reduce: timed out after 1 s") || !strstr(e, want))
        fail_msg("rank %d: error \"%s\"", R, e ? e : "(none)");
    nb_error_clear();
    /* the group is marked failed with that error, for a program to end the job (nb_dist_abort) */
    const char *why = nb_dist_failure();
    if (!why || !strstr(why, "nb_dist_all_reduce: timed out after 1 s") || !strstr(why, want))
        fail_msg("rank %d: nb_dist_failure() \"%s\"", R, why ? why : "(NULL)");
    if (took < 0.9 || took > 10) fail_msg("rank %d: the timeout took %.2f s (1 s asked)", R, took);
    /* the group is unusable now, and says so at once */
    t0 = now();
    assert_int_equal(nb_dist_barrier(), -1);
    assert_true(now() - t0 < 0.5);
    ASSERT_ERROR_CONTAINS("unusable since an earlier collective failed (nb_dist_all_reduce: timed out");
    nb_scope_end(s);
}

int main(int argc, char **argv) {
    int started = dist_test_start(&argc, &argv);
    if (started) return started;
    const struct CMUnitTest tests[] = { cmocka_unit_test_setup(test_missing_rank, clear_error_setup) };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    nb_dist_finalize();
    return failed;
}
