/* Thread-local first-error recording, the optional error handler and the range check of the
   enum values callers pass. */
#include "core_impl.h"
#include <stdio.h>

static _Thread_local char error_text[2048];
static NB_TLS bool error_set;
static NB_TLS uint64_t error_count;
static void (*error_handler)(const char *, void *);
static void *error_handler_user;

void nb__error(const char *fmt, ...) {
    error_count++;
    if (error_set) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof error_text, fmt, ap);
    va_end(ap);
    error_set = true;
    if (error_handler) error_handler(error_text, error_handler_user);
}

bool nb__has_error(void) { return error_set; }

uint64_t nb__error_count(void) { return error_count; }

const char *nb_error(void) { return error_set ? error_text : NULL; }

void nb_error_clear(void) { error_set = false; error_text[0] = 0; }

void nb_set_error_handler(void (*handler)(const char *, void *), void *user) {
    error_handler = handler;
    error_handler_user = user;
}

bool nb__enum_ok(const char *fn, const char *what, long long value, int count, const char *type, const char *names) {
    if (value >= 0 && value < count) return true;
    nb__error("%s: %s %lld is not an %s value (%s)", fn, what, value, type, names);
    return false;
}

bool nb__dtype_ok(const char *fn, nb_dtype dtype) {
    return nb__enum_ok(fn, "dtype", (int)dtype, NB_DTYPE_COUNT, "nb_dtype", "f32, f64, f16, bf16, i64, i32, u8, bool, i8");
}

const char *nb_version(void) {
#define NB_STR_(x) #x
#define NB_STR(x) NB_STR_(x)
    return NB_STR(NB_VERSION_MAJOR) "." NB_STR(NB_VERSION_MINOR) "." NB_STR(NB_VERSION_PATCH);
}
