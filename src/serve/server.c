/* The model server's entry points (nb_serve_start, nb_serve_port, nb_serve_describe,
   nb_serve_stop) and its router: /v1/models/ to TF Serving's front end, /v2 to the Open Inference
   Protocol's, /monitoring/prometheus/metrics to the metrics; anything else is a JSON 404. */
#include "serve_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nb_server {
    sv_server s;
    sv_http *http;
    int drain_s;
};

static void route(void *ctx, const sv_request *req, sv_response *resp) {
    sv_server *s = ctx;
    const char *p = req->path;
    atomic_fetch_add(&s->http_requests, 1);
    nb_error_clear(); /* the error is per thread and keeps the first: this request's own is reported */
    if (!strncmp(p, "/v1/models/", 11)) nb__sv_tfs_handle(s, req, p + 11, resp);
    else if (!strcmp(p, "/v2") || !strncmp(p, "/v2/", 4)) nb__sv_v2_handle(s, req, p + 3, resp);
    else if (!strcmp(p, "/monitoring/prometheus/metrics")) {
        if (strcmp(req->method, "GET")) {
            nb__sv_error(resp, 405, "%s takes GET, not %s", p, req->method);
            resp->allow = "GET";
        } else nb__sv_metrics_handle(s, req, resp);
    } else nb__sv_error(resp, 404, "no such endpoint: %s %s (nabla serve answers /v1/models/..., /v2/... and "
                               "/monitoring/prometheus/metrics)", req->method, p);
    if (resp->status >= 400) atomic_fetch_add(&s->http_errors, 1);
}

nb_server *nb_serve_start(const nb_serve_opts *opts) {
    if (!opts) { nb__error("nb_serve_start: opts is NULL"); return NULL; }
    if (opts->port < 0 || opts->port > 65535 || opts->threads < 0 || opts->threads > 1024 || opts->max_connections < 0 ||
        opts->timeout_s < 0 || opts->drain_timeout_s < 0) {
        nb__error("nb_serve_start: port %d, threads %d, max_connections %d, timeout_s %d or drain_timeout_s %d is out of "
                  "range (port 0..65535, threads 0..1024, the others >= 0)", opts->port, opts->threads,
                  opts->max_connections, opts->timeout_s, opts->drain_timeout_s);
        return NULL;
    }
    nb_server *sv = calloc(1, sizeof *sv);
    if (!sv) { nb__error("nb_serve_start: out of memory"); return NULL; }
    if (nb__sv_registry_load(&sv->s.reg, opts) < 0) {
        nb__sv_registry_free(&sv->s.reg);
        free(sv);
        return NULL;
    }
    sv_http_opts ho = {
        .host = opts->host ? opts->host : "127.0.0.1",
        .port = opts->port,
        .threads = opts->threads ? opts->threads : 4,
        .max_body = opts->max_body_bytes ? opts->max_body_bytes : (size_t)16 << 20,
        .max_connections = opts->max_connections ? opts->max_connections : 256,
        .timeout_s = opts->timeout_s ? opts->timeout_s : 30,
        .access_log = opts->access_log,
    };
    sv->drain_s = opts->drain_timeout_s ? opts->drain_timeout_s : 30;
    if (!(sv->http = nb__sv_http_start(&ho, route, &sv->s))) {
        nb__sv_registry_free(&sv->s.reg);
        free(sv);
        return NULL;
    }
    return sv;
}

int nb_serve_port(const nb_server *s) { return s ? nb__sv_http_port(s->http) : -1; }

char *nb_serve_describe(const nb_server *s) {
    if (!s) { nb__error("nb_serve_describe: server is NULL"); return NULL; }
    sv_buf b = { 0 };
    for (int i = 0; i < s->s.reg.n; i++) {
        const sv_model *m = &s->s.reg.m[i];
        for (int k = 0; k < m->nv; k++)
            nb__sv_printf(&b, "%s version %lld: %s (%s, %d input%s, %d output%s)\n", m->name, (long long)m->v[k].version,
                      m->v[k].path, m->v[k].kind, m->v[k].nin, m->v[k].nin == 1 ? "" : "s", m->v[k].nout,
                      m->v[k].nout == 1 ? "" : "s");
    }
    if (b.failed || !b.p) {
        free(b.p);
        nb__error("nb_serve_describe: out of memory");
        return NULL;
    }
    return b.p;
}

int nb_serve_stop(nb_server *s) {
    if (!s) return 0;
    int rc = nb__sv_http_stop(s->http, s->drain_s);
    nb__sv_registry_free(&s->s.reg);
    free(s);
    return rc;
}
