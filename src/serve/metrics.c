/* The model server's metrics in Prometheus's text format: per model, the inference requests
   (predict and infer), those that failed and a latency histogram; the model versions loaded;
   and every HTTP request and error response. */
#include "serve_impl.h"
#include <stdio.h>

/* A label value with \, " and newlines escaped as the text format asks. */
static void label(sv_buf *b, const char *s) {
    nb__sv_put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            char e[2] = { '\\', *s };
            nb__sv_put(b, e, 2);
        } else if (*s == '\n') nb__sv_put(b, "\\n", 2);
        else nb__sv_put(b, s, 1);
    }
    nb__sv_put(b, "\"", 1);
}

void nb__sv_metrics_handle(sv_server *s, const sv_request *req, sv_response *r) {
    (void)req;
    sv_buf *b = &r->body;
    const sv_registry *g = &s->reg;
    int versions = 0;
    for (int i = 0; i < g->n; i++) versions += g->m[i].nv;
    nb__sv_printf(b, "# HELP nabla_serve_models_loaded Model versions loaded and served.\n"
                 "# TYPE nabla_serve_models_loaded gauge\nnabla_serve_models_loaded %d\n", versions);
    nb__sv_printf(b, "# HELP nabla_serve_http_requests_total HTTP requests answered.\n"
                 "# TYPE nabla_serve_http_requests_total counter\nnabla_serve_http_requests_total %llu\n",
              (unsigned long long)atomic_load(&s->http_requests));
    nb__sv_printf(b, "# HELP nabla_serve_http_errors_total HTTP requests answered with a 4xx or 5xx status.\n"
                 "# TYPE nabla_serve_http_errors_total counter\nnabla_serve_http_errors_total %llu\n",
              (unsigned long long)atomic_load(&s->http_errors));
    nb__sv_puts(b, "# HELP nabla_serve_requests_total Inference requests (predict, infer) per model.\n"
               "# TYPE nabla_serve_requests_total counter\n");
    for (int i = 0; i < g->n; i++) {
        nb__sv_puts(b, "nabla_serve_requests_total{model=");
        label(b, g->m[i].name);
        nb__sv_printf(b, "} %llu\n", (unsigned long long)atomic_load(&g->m[i].requests));
    }
    nb__sv_puts(b, "# HELP nabla_serve_request_errors_total Inference requests answered with an error, per model.\n"
               "# TYPE nabla_serve_request_errors_total counter\n");
    for (int i = 0; i < g->n; i++) {
        nb__sv_puts(b, "nabla_serve_request_errors_total{model=");
        label(b, g->m[i].name);
        nb__sv_printf(b, "} %llu\n", (unsigned long long)atomic_load(&g->m[i].errors));
    }
    nb__sv_puts(b, "# HELP nabla_serve_request_duration_seconds Inference request latency (body parse, run, response), per model.\n"
               "# TYPE nabla_serve_request_duration_seconds histogram\n");
    for (int i = 0; i < g->n; i++) {
        sv_model *m = &g->m[i];
        unsigned long long cum = 0;
        for (int k = 0; k <= SV_BUCKETS; k++) {
            cum += (unsigned long long)atomic_load(&m->bucket[k]);
            nb__sv_puts(b, "nabla_serve_request_duration_seconds_bucket{model=");
            label(b, m->name);
            if (k < SV_BUCKETS) nb__sv_printf(b, ",le=\"%g\"} %llu\n", nb__sv_bucket_bounds[k], cum);
            else nb__sv_printf(b, ",le=\"+Inf\"} %llu\n", cum);
        }
        nb__sv_puts(b, "nabla_serve_request_duration_seconds_sum{model=");
        label(b, m->name);
        nb__sv_printf(b, "} %.6f\n", (double)atomic_load(&m->micros) * 1e-6);
        nb__sv_puts(b, "nabla_serve_request_duration_seconds_count{model=");
        label(b, m->name);
        nb__sv_printf(b, "} %llu\n", cum);
    }
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
