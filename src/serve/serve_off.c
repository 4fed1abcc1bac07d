/* The model server's entry points in a build without libmicrohttpd or jansson: each fails (or
   answers NULL's value) with the reason, as the JSON features do without jansson. */
#include "../core/core_impl.h"
#include "nabla/serve.h"

nb_server *nb_serve_start(const nb_serve_opts *opts) {
    (void)opts;
#ifndef NABLA_HAVE_JSON
    nb__error("nb_serve_start: nabla was built without jansson (NABLA_WITH_JSON=OFF), the JSON parser the server needs");
#else
    nb__error("nb_serve_start: nabla was built without libmicrohttpd (NABLA_WITH_HTTP=OFF or libmicrohttpd-dev missing), "
              "the HTTP server");
#endif
    return NULL;
}

int nb_serve_port(const nb_server *s) { (void)s; return -1; }

char *nb_serve_describe(const nb_server *s) {
    (void)s;
    nb__error("nb_serve_describe: nabla was built without the model server");
    return NULL;
}

int nb_serve_stop(nb_server *s) { (void)s; return 0; }
