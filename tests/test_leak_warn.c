/* nb_live_tensors and NABLA_WARN_LEAKS: a training loop with a scope per step keeps the live
   count flat and is not warned about; the loop a PyTorch user writes first (no scopes) grows it
   each step and gets one line on stderr, once, and only when NABLA_WARN_LEAKS=1. */
#include "test_util.h"

#include <fcntl.h>
#include <unistd.h>

/* Runs steps SGD steps of a linear regression, each in a scope or not; the live tensors after.
   The loop without scopes per step runs inside one outer scope, as a loop in a function called
   in a scope would: it grows the same way, and what it kept is freed at the end (no leak for
   the sanitizers to report). */
static int64_t train(int steps, bool scoped) {
    nb_manual_seed(1);
    nb_module *m = nb_nn_linear(4, 1);
    nb_optimizer *opt = nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.01 });
    assert_non_null(opt);
    nb_scope *outer = nb_scope_begin();
    for (int i = 0; i < steps; i++) {
        nb_scope *s = scoped ? nb_scope_begin() : NULL;
        nb_tensor *x = nb_randn(NB_SHAPE(8, 4), NB_F32);
        nb_tensor *loss = nb_mse_loss(nb_forward(m, x), nb_zeros(NB_SHAPE(8, 1), NB_F32), NB_REDUCTION_MEAN);
        nb_optim_zero_grad(opt);
        assert_int_equal(nb_backward(loss), 0);
        assert_int_equal(nb_optim_step(opt), 0);
        if (s) nb_scope_end(s);
    }
    int64_t live = nb_live_tensors();
    nb_scope_end(outer);
    nb_optim_free(opt);
    nb_module_free(m);
    return live;
}

/* Runs train() with stderr in a file; what it wrote. */
static char *train_capturing(int steps, bool scoped, int64_t *live) {
    char path[] = "/tmp/nabla_leak_warn_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    *live = train(steps, scoped);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    char *text = read_whole_file(path);
    unlink(path);
    assert_non_null(text);
    return text;
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++) n++;
    return n;
}

static void test_live_count(void **state) {
    (void)state;
    int64_t before = nb_live_tensors();
    nb_scope *s = nb_scope_begin();
    nb_tensor *a = nb_ones(NB_SHAPE(3), NB_F32);
    nb_tensor *b = nb_add(a, a);
    assert_non_null(b);
    assert_int_equal(nb_live_tensors(), before + 2);
    nb_scope_end(s);
    assert_int_equal(nb_live_tensors(), before);
}

static void test_warned_once_without_scopes(void **state) {
    (void)state;
    int64_t base = nb_live_tensors(), live;
    /* a scope per step: flat, no warning */
    char *out = train_capturing(30, true, &live);
    assert_int_equal(count(out, "NABLA_WARN_LEAKS"), 0);
    free(out);
    /* no scopes: the count grows each step, one warning */
    out = train_capturing(30, false, &live);
    printf("without scopes: %lld live tensors after 30 steps (%lld before)\n", (long long)live, (long long)base);
    assert_true(live > base + 30);
    if (count(out, "NABLA_WARN_LEAKS") != 1 || !strstr(out, "nb_scope_begin")) fail_msg("stderr: \"%s\"", out);
    free(out);
    /* once a process */
    out = train_capturing(30, false, &live);
    assert_int_equal(count(out, "NABLA_WARN_LEAKS"), 0);
    free(out);
}

int main(int argc, char **argv) {
    /* "quiet": the variable unset, the same leaking loop says nothing (the library never prints
       unasked) */
    if (argc > 1 && !strcmp(argv[1], "quiet")) {
        unsetenv("NABLA_WARN_LEAKS");
        int64_t live;
        char *out = train_capturing(30, false, &live);
        int bad = out[0] != 0;
        if (bad) fprintf(stderr, "printed without NABLA_WARN_LEAKS: %s\n", out);
        free(out);
        return bad;
    }
    setenv("NABLA_WARN_LEAKS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_count),
        cmocka_unit_test(test_warned_once_without_scopes),
    };
    return RUN_TESTS(tests);
}
