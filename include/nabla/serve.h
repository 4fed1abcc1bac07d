/* nabla serve: a model server a C program can embed. One HTTP port speaks TF Serving's REST API
   (/v1/models/...) and the Open Inference Protocol v2 (/v2/...) over a registry of models, each
   a folder of numbered version folders holding model.onnx or a nabla model.safetensors.
   docs/serving.md describes the endpoints; it needs libmicrohttpd and jansson at build time. */
#ifndef NABLA_SERVE_H
#define NABLA_SERVE_H

#include "core.h"
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A running server. */
typedef struct nb_server nb_server;

/* What nb_serve_start serves and how; zero fields take the defaults. Either model_name and
   model_base_path (one model) or config_path (a JSON file naming several) are given. */
typedef struct nb_serve_opts {
    const char *host;             /* the address to listen on; NULL: "127.0.0.1" */
    int port;                     /* 0: a free port the system picks (nb_serve_port says which) */
    const char *model_name;       /* the model's name in URLs */
    const char *model_base_path;  /* a folder of version folders 1/, 2/, ... each with model.onnx
                                     or model.safetensors; the highest number is served */
    const char *config_path;      /* JSON: {"model_config_list": {"config": [{"name": ..,
                                     "base_path": .., "model_version_policy": ..}, ...]}} */
    int threads;                  /* HTTP worker threads; 0: 4 */
    size_t max_body_bytes;        /* a larger request body is refused with 413; 0: 16 MiB
                                     (jansson holds about 40 bytes per number) */
    int max_connections;          /* connections open at once; 0: 256 */
    int timeout_s;                /* an idle connection is closed after this; 0: 30 */
    int drain_timeout_s;          /* nb_serve_stop waits this long for requests in flight; 0: 30 */
    FILE *access_log;             /* one line per request, or NULL for none */
} nb_serve_opts;

/* Loads the models and starts listening. NULL with the error (a model that does not load, a
   port in use, a build without libmicrohttpd or jansson). */
NB_API nb_server *nb_serve_start(const nb_serve_opts *opts);
/* The port the server listens on (the one picked when opts.port was 0), or -1 for NULL. */
NB_API int nb_serve_port(const nb_server *s);
/* What is served, one line per model version ("NAME version V: PATH (onnx)"); malloc'ed, the
   caller frees it; NULL with the error. */
NB_API char *nb_serve_describe(const nb_server *s);
/* Stops the server gracefully: no new connections are taken, requests in flight finish (up to
   opts.drain_timeout_s; a body still arriving is waited for while its bytes keep coming, and cut
   off once they stall for 2 s), then the models are freed. 0, or -1 when requests were still
   being answered at the deadline (they were cut off). NULL is ignored (0). */
NB_API int nb_serve_stop(nb_server *s);

#ifdef __cplusplus
}
#endif

#endif
