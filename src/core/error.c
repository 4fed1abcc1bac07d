/* Thread-local first-error recording, the contexts errors are told in, the optional error handler
   and the range check of the enum values callers pass. */
#include "core_impl.h"
#include <stdio.h>
#include <string.h>

static _Thread_local char error_text[2048];
static NB_TLS bool error_set;
static NB_TLS uint64_t error_count;
static void (*error_handler)(const char *, void *);
static void *error_handler_user;

/* The contexts pushed on this thread, innermost first. */
static NB_TLS nb__error_ctx *contexts;

void nb__error_push(nb__error_ctx *c, const char *strip, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->text, sizeof c->text, fmt, ap);
    va_end(ap);
    c->strip = strip;
    c->quiet = false;
    c->outer = contexts;
    contexts = c;
}

/* How many quiet contexts are pushed, and whether an error recorded inside them still owes the
   handler its call. */
static NB_TLS int quiet_depth;
static NB_TLS bool handler_owed;

void nb__error_quiet(nb__error_ctx *c) {
    c->text[0] = 0;
    c->strip = NULL;
    c->quiet = true;
    c->outer = contexts;
    contexts = c;
    quiet_depth++;
}

void nb__error_pop(nb__error_ctx *c) {
    if (contexts != c) return;
    contexts = c->outer;
    if (c->quiet && --quiet_depth == 0 && handler_owed) {
        handler_owed = false;
        if (error_set && error_handler) error_handler(error_text, error_handler_user);
    }
}

void nb__error_reword(const char *fmt, ...) {
    if (!error_set) return;
    char text[sizeof error_text];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    memcpy(error_text, text, sizeof error_text);
}

/* "<context>: " + msg for one context, msg's leading "<strip>: " dropped; into out. */
static void in_context(const nb__error_ctx *c, const char *msg, char *out, size_t size) {
    size_t n = c->strip ? strlen(c->strip) : 0;
    if (n && strncmp(msg, c->strip, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
    size_t k = strlen(c->text);
    if (k + 2 >= size) k = size - 3;
    memcpy(out, c->text, k);
    memcpy(out + k, ": ", 2);
    size_t m = strlen(msg);
    if (k + 2 + m >= size) m = size - k - 3;
    memcpy(out + k + 2, msg, m);
    out[k + 2 + m] = 0;
}

void nb__error(const char *fmt, ...) {
    error_count++;
    if (error_set) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof error_text, fmt, ap);
    va_end(ap);
    for (const nb__error_ctx *c = contexts; c; c = c->outer) {
        if (c->quiet) continue;
        char told[sizeof error_text];
        in_context(c, error_text, told, sizeof told);
        memcpy(error_text, told, sizeof error_text);
    }
    error_set = true;
    if (quiet_depth > 0) handler_owed = true;
    else if (error_handler) error_handler(error_text, error_handler_user);
}

bool nb__has_error(void) { return error_set; }

uint64_t nb__error_count(void) { return error_count; }

const char *nb_error(void) { return error_set ? error_text : NULL; }

void nb_error_clear(void) {
    error_set = false;
    error_text[0] = 0;
    handler_owed = false;
}

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
