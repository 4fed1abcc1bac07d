/* The model server's HTTP layer: libmicrohttpd in thread-pool mode behind nb__sv_http_start/stop, so
   the front ends see whole requests (sv_request) and fill responses (sv_response). Its limits: a
   body larger than max_body is refused with 413 before it is read when Content-Length declares
   it, and the connection is dropped when a chunked one grows past it; headers beyond 64 KiB get
   the library's 431; at most max_connections at once; an idle connection is closed after
   timeout_s. The pool's workers poll their connections (a slow client holds a socket, never a
   worker), and run the handler when a request is whole. A stop takes no new connection, answers
   the requests already begun and waits for bodies still arriving while bytes keep coming. */
#include "serve_impl.h"
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void nb__sv_put(sv_buf *b, const char *s, size_t len) {
    if (b->failed) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) {
            if (cap > SIZE_MAX / 2) { b->failed = true; return; }
            cap *= 2;
        }
        char *q = realloc(b->p, cap);
        if (!q) { b->failed = true; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

void nb__sv_puts(sv_buf *b, const char *s) { nb__sv_put(b, s, strlen(s)); }

void nb__sv_printf(sv_buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) { b->failed = true; return; }
    if ((size_t)k < sizeof small) { nb__sv_put(b, small, (size_t)k); return; }
    char *big = malloc((size_t)k + 1);
    if (!big) { b->failed = true; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    nb__sv_put(b, big, (size_t)k);
    free(big);
}

void nb__sv_json_str(sv_buf *b, const char *s) {
    nb__sv_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = { '\\', (char)*p };
            nb__sv_put(b, e, 2);
        } else if (*p < 0x20) nb__sv_printf(b, "\\u%04x", *p);
        else nb__sv_put(b, (const char *)p, 1);
    }
    nb__sv_put(b, "\"", 1);
}

void nb__sv_error(sv_response *r, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->status = status;
    r->content_type = NULL;
    r->body.n = 0;
    r->body.failed = false;
    nb__sv_puts(&r->body, "{\"error\": ");
    nb__sv_json_str(&r->body, msg);
    nb__sv_puts(&r->body, "}");
}

struct sv_http {
    struct MHD_Daemon *d;
    sv_handler handler;
    void *ctx;
    size_t max_body;
    FILE *log;
    int port;
    atomic_int receiving;       /* requests whose body is still arriving */
    atomic_int answering;       /* requests being answered (handler running or response queued) */
    atomic_llong last_byte_ns;  /* when a body's bytes last arrived (monotonic) */
    atomic_bool stopping;
};

/* One request's state between the access handler's calls. */
typedef struct req_state {
    char *body;
    size_t len, cap;
    size_t declared;            /* Content-Length, 0 when none was sent */
    bool answering;             /* counted in answering, else in receiving */
    int status;
    size_t sent;
    char model[128];
    char line[256];             /* "METHOD PATH" for the access log */
    struct timespec start;
} req_state;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* Moves a request from receiving to answering. */
static void to_answering(sv_http *h, req_state *st) {
    if (st->answering) return;
    st->answering = true;
    atomic_fetch_add(&h->answering, 1);
    atomic_fetch_sub(&h->receiving, 1);
}

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static enum MHD_Result send_response(sv_http *h, struct MHD_Connection *c, req_state *st, sv_response *r, bool close) {
    to_answering(h, st);
    if (r->body.failed) {
        free(r->body.p);
        r->body = (sv_buf){ 0 };
        nb__sv_error(r, 500, "out of memory writing the response");
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->body.n, r->body.p ? r->body.p : (void *)"", r->body.p ? MHD_RESPMEM_MUST_FREE
                                                                                             : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body.p);
        return MHD_NO;
    }
    r->body.p = NULL; /* the response owns it now */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type ? r->content_type : "application/json");
    if (r->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    st->status = r->status;
    st->sent = r->body.n;
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    sv_http *h = cls;
    req_state *st = *con_cls;
    if (!st) { /* the headers are in: decide on the body before any of it is read */
        if (!(st = calloc(1, sizeof *st))) return MHD_NO;
        clock_gettime(CLOCK_MONOTONIC, &st->start);
        *con_cls = st;
        snprintf(st->line, sizeof st->line, "%s %s", method, url);
        for (char *q = st->line; *q; q++) /* the client's bytes cannot forge log lines or quotes */
            if ((unsigned char)*q < 0x20 || *q == '"' || *q == 0x7f) *q = '?';
        atomic_fetch_add(&h->receiving, 1);
        atomic_store(&h->last_byte_ns, now_ns());
        sv_response r = { 0 };
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (atomic_load(&h->stopping)) {
            nb__sv_error(&r, 503, "the server is shutting down");
            return send_response(h, c, st, &r, true);
        }
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (*cl == '-' || *end || errno || n > h->max_body) {
                nb__sv_error(&r, 413, "the request body (Content-Length %s) is larger than the server's limit of %zu bytes",
                         cl, h->max_body);
                return send_response(h, c, st, &r, true);
            }
            /* the buffer grows as bytes arrive: a client that declares a large body and sends
               little holds little memory */
            st->declared = (size_t)n;
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (st->len + n > h->max_body) return MHD_NO; /* a chunked body past the limit: the connection is dropped */
        if (st->len + n + 1 > st->cap) {
            size_t cap = st->cap ? st->cap : 4096;
            while (cap < st->len + n + 1) cap *= 2;
            size_t most = (st->declared ? st->declared : h->max_body) + 1;
            if (cap > most && most >= st->len + n + 1) cap = most;
            char *q = realloc(st->body, cap);
            if (!q) return MHD_NO;
            st->body = q;
            st->cap = cap;
        }
        memcpy(st->body + st->len, upload_data, n);
        st->len += n;
        atomic_store(&h->last_byte_ns, now_ns());
        return MHD_YES;
    }
    /* the whole request */
    if (st->body) st->body[st->len] = 0;
    /* a request admitted before the stop began is served in full: that is the graceful part */
    bool stopping = atomic_load(&h->stopping);
    sv_request req = { .method = method, .path = url, .body = st->body ? st->body : "", .body_len = st->len,
                       .stopping = stopping };
    sv_response r = { .status = 200 };
    h->handler(h->ctx, &req, &r);
    if (r.model) snprintf(st->model, sizeof st->model, "%s", r.model);
    return send_response(h, c, st, &r, stopping);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    sv_http *h = cls;
    req_state *st = *con_cls;
    if (!st) return;
    if (h->log) {
        char addr[INET6_ADDRSTRLEN + 8] = "-";
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, addr, sizeof addr);
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, addr, sizeof addr);
        }
        time_t now = time(NULL);
        struct tm tm;
        char stamp[40];
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
        /* one fprintf per line: stdio locks the stream, so lines of several workers do not mix */
        fprintf(h->log, "%s %s \"%s\" %d %zu %.6f%s%s%s\n", stamp, addr, st->line, code == MHD_REQUEST_TERMINATED_COMPLETED_OK ? st->status : 0,
                st->sent, since(&st->start), *st->model ? " model=" : "", st->model,
                code == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed before the response was sent)");
        fflush(h->log);
    }
    atomic_fetch_sub(st->answering ? &h->answering : &h->receiving, 1);
    free(st->body);
    free(st);
    *con_cls = NULL;
}

sv_http *nb__sv_http_start(const sv_http_opts *o, sv_handler handler, void *ctx) {
    sv_http *h = calloc(1, sizeof *h);
    if (!h) { nb__error("nb_serve_start: out of memory"); return NULL; }
    h->handler = handler;
    h->ctx = ctx;
    h->max_body = o->max_body;
    h->log = o->access_log;
    atomic_init(&h->receiving, 0);
    atomic_init(&h->answering, 0);
    atomic_init(&h->last_byte_ns, 0);
    atomic_init(&h->stopping, false);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai) {
        nb__error("nb_serve_start: cannot resolve the host '%s': %s", o->host, gai_strerror(gai));
        free(h);
        return NULL;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->threads,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_END);
    int err = errno;
    freeaddrinfo(ai);
    if (!h->d) {
        nb__error("nb_serve_start: cannot listen on %s port %d: %s", o->host, o->port,
                  err ? strerror(err) : "libmicrohttpd refused the settings");
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? (int)di->port : o->port;
    return h;
}

int nb__sv_http_port(const sv_http *h) { return h ? h->port : -1; }

int nb__sv_http_stop(sv_http *h, int drain_s) {
    if (!h) return 0;
    atomic_store(&h->stopping, true);
    MHD_socket ls = MHD_quiesce_daemon(h->d); /* no new connections from here on */
    if (ls != MHD_INVALID_SOCKET) close(ls);
    /* Requests being answered are waited for; so are bodies still arriving, while they keep
       arriving: a client that stalled mid-body for STALL_NS (or half-closed its side, which
       libmicrohttpd takes as a live connection until its timeout) is cut off. */
    const long long STALL_NS = 2000000000ll;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int ans = atomic_load(&h->answering), rec = atomic_load(&h->receiving);
        bool moving = rec > 0 && now_ns() - atomic_load(&h->last_byte_ns) < STALL_NS;
        if ((!ans && !moving) || since(&t0) >= drain_s) break;
        nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
    }
    int left = atomic_load(&h->answering);
    int rc = left > 0 ? -1 : 0;
    if (rc < 0)
        nb__error("nb_serve_stop: %d request%s still being answered after %d s were cut off", left, left == 1 ? "" : "s",
                  drain_s);
    MHD_stop_daemon(h->d);
    free(h);
    return rc;
}
