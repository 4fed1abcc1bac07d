/* Shared by the cmocka unit tests: the includes cmocka needs, a per-test error reset and an
   assertion on the recorded error message. */
#ifndef NABLA_TEST_UTIL_H
#define NABLA_TEST_UTIL_H

#include <nabla.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* cmocka setup: every test starts with no recorded error. */
static inline int clear_error_setup(void **state) {
    (void)state;
    nb_error_clear();
    return 0;
}

/* Skips a case that needs the JSON features (safetensors files, model configs, sharded
   checkpoints) in a build without jansson, visibly: cmocka reports it SKIPPED. tests/CMakeLists.txt
   defines NABLA_WITH_JSON in a build with it. */
#ifdef NABLA_WITH_JSON
#define SKIP_WITHOUT_JSON() ((void)0)
#else
#define SKIP_WITHOUT_JSON() skip()
#endif

/* Fails unless the recorded error contains text; clears it. */
#define ASSERT_ERROR_CONTAINS(text)                                                                             \
    do {                                                                                                        \
        const char *e_ = nb_error();                                                                            \
        if (!e_ || !strstr(e_, (text))) fail_msg("expected error containing \"%s\", got \"%s\"", (text), e_ ? e_ : "(none)"); \
        nb_error_clear();                                                                                       \
    } while (0)

/* The whole file at path, NUL-terminated (free it), or NULL when it cannot be read. */
static inline char *read_whole_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

/* The first scope and backward on a thread allocate per-thread state that stays: a test that
   checks the bytes in use around each case runs this once first. */
static inline void warm_up_thread_state(void) {
    nb_scope *warm = nb_scope_begin();
    nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(2), NB_F32), true);
    nb_backward(nb_sum_all(nb_mul(w, w)));
    nb_scope_end(warm);
    nb_error_clear();
}

/* Runs a cmocka group, or only the test that NABLA_TEST_FILTER names. */
#define RUN_TESTS(tests)                                                                          \
    (getenv("NABLA_TEST_FILTER") ? cmocka_set_test_filter(getenv("NABLA_TEST_FILTER")) : (void)0, \
     cmocka_run_group_tests(tests, NULL, NULL))

#endif
