/* Internals of the model server (src/serve/): the HTTP layer's small interface (http.c, the one
   file that knows libmicrohttpd), the model registry (registry.c), the JSON tensor codec
   (codec.c), the protocol front ends (tfs.c, v2.c) and the metrics (metrics.c). Each global is
   named nb__sv_... (the library's symbols all start with nb_). Not installed. */
#ifndef NB_SERVE_IMPL_H
#define NB_SERVE_IMPL_H

#include "../core/core_impl.h"
#include "nabla/autograd.h"
#include "nabla/io.h"
#include "nabla/nn.h"
#include "nabla/onnx.h"
#include "nabla/serve.h"
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

/* ---- a growing text buffer (responses) ---- */
typedef struct sv_buf {
    char *p;
    size_t n, cap;
    bool failed;  /* out of memory: the response becomes a 500 */
} sv_buf;

/* Appends len bytes. */
void nb__sv_put(sv_buf *b, const char *s, size_t len);
/* Appends a NUL-terminated string. */
void nb__sv_puts(sv_buf *b, const char *s);
/* Appends printf output. */
void nb__sv_printf(sv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string, quotes included. */
void nb__sv_json_str(sv_buf *b, const char *s);

/* ---- the HTTP layer ---- */
/* A request as the front ends see it: the path (decoded, without the query), the body whole. */
typedef struct sv_request {
    const char *method;
    const char *path;
    const char *body;
    size_t body_len;
    bool stopping;          /* the server is draining: a new request gets 503 */
} sv_request;

/* The response a handler fills: status and a body it owns (sv_buf), JSON unless said otherwise. */
typedef struct sv_response {
    int status;
    sv_buf body;
    const char *content_type;  /* NULL: application/json */
    const char *allow;         /* the Allow header of a 405 */
    const char *model;         /* the model the request went to, for the access log and metrics */
} sv_response;

/* Sets an error response: {"error": "..."} with the status. */
void nb__sv_error(sv_response *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Answers one request; runs on the HTTP worker threads, several at once. */
typedef void (*sv_handler)(void *ctx, const sv_request *req, sv_response *resp);

/* The HTTP layer's settings. */
typedef struct sv_http_opts {
    const char *host;
    int port;
    int threads;
    size_t max_body;
    int max_connections;
    int timeout_s;
    FILE *access_log;
} sv_http_opts;

typedef struct sv_http sv_http;
/* Starts listening with a pool of worker threads; NULL with the error. */
sv_http *nb__sv_http_start(const sv_http_opts *o, sv_handler h, void *ctx);
/* The bound port. */
int nb__sv_http_port(const sv_http *h);
/* Stops taking connections, waits up to drain_s for requests in flight, then closes all; 0, or -1
   when requests were still running at the deadline. */
int nb__sv_http_stop(sv_http *h, int drain_s);

/* ---- the model registry ---- */
/* A declared input or output: its name, dtype and shape (ndim -1: unknown; a dim -1: any). */
typedef struct sv_io {
    char *name;
    nb_dtype dtype;
    int ndim;
    int64_t dim[NB_MAX_DIMS];
} sv_io;

/* Latency histogram bounds in seconds (the last bucket is +Inf). */
#define SV_BUCKETS 12
extern const double nb__sv_bucket_bounds[SV_BUCKETS];

/* One loaded version. */
typedef struct sv_version {
    int64_t version;
    char *path;
    const char *kind;          /* "onnx" or "nabla" */
    nb_onnx_model *onnx;
    nb_module *module;         /* a nabla model.safetensors, in eval mode */
    sv_io *in, *out;
    int nin, nout;
    pthread_mutex_t mu;        /* one run at a time per version (registry.c says why) */
} sv_version;

/* One model: its versions, newest last, and its counters. */
typedef struct sv_model {
    char *name;
    char *base;
    sv_version *v;
    int nv;
    atomic_uint_least64_t requests, errors, bucket[SV_BUCKETS + 1], micros;
} sv_model;

typedef struct sv_registry {
    sv_model *m;
    int n;
} sv_registry;

/* Loads what opts names into r; 0, or -1 with the error. */
int nb__sv_registry_load(sv_registry *r, const nb_serve_opts *opts);
/* Frees every model. */
void nb__sv_registry_free(sv_registry *r);
/* The model called name, or NULL. */
sv_model *nb__sv_find_model(sv_registry *r, const char *name);
/* Version v of m (-1: the newest), or NULL. */
sv_version *nb__sv_find_version(sv_model *m, int64_t v);
/* Runs the version on its nin inputs (in its order); writes nout outputs the caller releases.
   0, or -1 with the error. */
int nb__sv_run(sv_version *v, nb_tensor *const *in, nb_tensor **out);
/* Whether t fits the declared input (dtype, rank, fixed dimensions); false with the message in err. */
bool nb__sv_check_input(const sv_io *io, const nb_tensor *t, char *err, size_t errsize);
/* Seconds on the monotonic clock. */
double nb__sv_now(void);
/* Parses "/versions/V" at *p (advancing past it) into *v; *v stays -1 when p holds none. false
   when the version is not a number. */
bool nb__sv_parse_version(const char **p, int64_t *v);
/* Records a request to m that took the given seconds. */
void nb__sv_record(sv_model *m, double seconds, bool failed);

/* ---- the JSON tensor codec ---- */
/* Replaces the bare NaN, Infinity and -Infinity tokens outside strings (which TF Serving's JSON
   allows and jansson does not) by marker strings the decoder maps back; a new NUL-terminated
   buffer (malloc'ed), or NULL when out of memory. */
char *nb__sv_json_prepare(const char *body, size_t len, size_t *out_len);
/* Parses a request body (after nb__sv_json_prepare); NULL with the message in err. */
json_t *nb__sv_json_parse(const char *body, size_t len, char *err, size_t errsize);
/* A tensor of dtype from a nested JSON array (or a scalar): its shape is the nesting's, which
   must be regular. In the current scope; NULL with the message in err naming what. */
nb_tensor *nb__sv_tensor_from_json(const json_t *v, nb_dtype dtype, const char *what, char *err, size_t errsize);
/* A tensor of dtype and the given shape from JSON data, flat or nested (row-major): the leaf
   count must match the shape. In the current scope; NULL with the message in err. */
nb_tensor *nb__sv_tensor_from_data(const json_t *v, nb_dtype dtype, nb_shape shape, const char *what, char *err,
                               size_t errsize);
/* Writes t's elements as nested JSON arrays (rows [r0, r1) of dimension 0 when row >= 0: only
   row r0's sub-tensor; whole when row_lo < 0); floats as %.9g (f32) or %.17g (f64), NaN and
   Infinity as TF Serving writes them. 0, or -1 with the error. */
int nb__sv_write_tensor(sv_buf *b, nb_tensor *t, int64_t row, bool flat);
/* TF Serving's name of a dtype ("DT_FLOAT"). */
const char *nb__sv_tf_dtype(nb_dtype d);
/* The Open Inference Protocol's name of a dtype ("FP32"). */
const char *nb__sv_v2_dtype(nb_dtype d);
/* The dtype of an Open Inference Protocol name; false when nabla has none. */
bool nb__sv_v2_parse_dtype(const char *name, nb_dtype *d);

/* ---- the front ends ---- */
/* The server as the front ends see it. */
typedef struct sv_server {
    sv_registry reg;
    atomic_uint_least64_t http_requests, http_errors;
} sv_server;

/* /v1/models/...: TF Serving's REST API. */
void nb__sv_tfs_handle(sv_server *s, const sv_request *req, const char *rest, sv_response *resp);
/* /v2...: the Open Inference Protocol. */
void nb__sv_v2_handle(sv_server *s, const sv_request *req, const char *rest, sv_response *resp);
/* /monitoring/prometheus/metrics. */
void nb__sv_metrics_handle(sv_server *s, const sv_request *req, sv_response *resp);

#endif
