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
#include <string.h>
#include <cmocka.h>

/* cmocka setup: every test starts with no recorded error. */
static inline int clear_error_setup(void **state) {
    (void)state;
    nb_error_clear();
    return 0;
}

/* Fails unless the recorded error contains text; clears it. */
#define ASSERT_ERROR_CONTAINS(text)                                                                             \
    do {                                                                                                        \
        const char *e_ = nb_error();                                                                            \
        if (!e_ || !strstr(e_, (text))) fail_msg("expected error containing \"%s\", got \"%s\"", (text), e_ ? e_ : "(none)"); \
        nb_error_clear();                                                                                       \
    } while (0)

#endif
