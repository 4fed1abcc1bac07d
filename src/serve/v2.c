/* The Open Inference Protocol (KServe's v2 REST API) over the registry: server metadata, health,
   model metadata and readiness, and infer with the JSON tensor format ("data" flat or nested, in
   row-major order). The binary tensor extension and request parameters are not built yet. */
#include "serve_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void io_list(sv_buf *b, const sv_io *io, int n) {
    nb__sv_puts(b, "[");
    for (int i = 0; i < n; i++) {
        nb__sv_puts(b, i ? ", {\"name\": " : "{\"name\": ");
        nb__sv_json_str(b, io[i].name);
        nb__sv_printf(b, ", \"datatype\": \"%s\", \"shape\": [", nb__sv_v2_dtype(io[i].dtype));
        /* an undeclared rank has no v2 form: one dynamic dimension is the closest */
        if (io[i].ndim < 0) nb__sv_puts(b, "-1");
        for (int d = 0; d < io[i].ndim; d++) nb__sv_printf(b, "%s%lld", d ? ", " : "", (long long)io[i].dim[d]);
        nb__sv_puts(b, "]}");
    }
    nb__sv_puts(b, "]");
}

static void model_metadata(sv_model *m, sv_version *v, sv_response *r) {
    sv_buf *b = &r->body;
    nb__sv_puts(b, "{\"name\": ");
    nb__sv_json_str(b, m->name);
    nb__sv_puts(b, ", \"versions\": [");
    for (int k = 0; k < m->nv; k++) nb__sv_printf(b, "%s\"%lld\"", k ? ", " : "", (long long)m->v[k].version);
    nb__sv_printf(b, "], \"platform\": \"%s\", \"inputs\": ", v->kind);
    io_list(b, v->in, v->nin);
    nb__sv_puts(b, ", \"outputs\": ");
    io_list(b, v->out, v->nout);
    nb__sv_puts(b, "}");
}

/* Reads one entry of "inputs" into x at the model's index for its name. */
static bool read_input(sv_version *v, const json_t *e, size_t k, nb_tensor **x, char *err, size_t es) {
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *dt = json_string_value(json_object_get(e, "datatype"));
    json_t *shape = json_object_get(e, "shape"), *data = json_object_get(e, "data");
    json_t *params = json_object_get(e, "parameters");
    if (!json_is_object(e) || !name || !dt || !json_is_array(shape)) {
        snprintf(err, es, "inputs[%zu] needs \"name\", \"datatype\" and \"shape\"", k);
        return false;
    }
    if (params && json_object_get(params, "binary_data_size")) {
        snprintf(err, es, "input '%s': the binary tensor extension is not supported by nabla serve yet; send \"data\"", name);
        return false;
    }
    if (!data) {
        snprintf(err, es, "input '%s' has no \"data\"", name);
        return false;
    }
    int i = 0;
    while (i < v->nin && strcmp(v->in[i].name, name)) i++;
    if (i == v->nin) {
        snprintf(err, es, "input '%s' is not an input of the model", name);
        return false;
    }
    if (x[i]) {
        snprintf(err, es, "input '%s' is given twice", name);
        return false;
    }
    nb_dtype d;
    if (!nb__sv_v2_parse_dtype(dt, &d)) {
        snprintf(err, es, "input '%s' has datatype '%s'; nabla serve takes BOOL, UINT8, INT8, INT32, INT64, FP16, BF16, "
                          "FP32 and FP64", name, dt);
        return false;
    }
    if (d != v->in[i].dtype) {
        snprintf(err, es, "input '%s' is %s; the model takes %s", name, dt, nb__sv_v2_dtype(v->in[i].dtype));
        return false;
    }
    nb_shape s = { 0 };
    if (json_array_size(shape) > NB_MAX_DIMS) {
        snprintf(err, es, "input '%s' has %zu dimensions; nabla tensors have at most %d", name, json_array_size(shape),
                 NB_MAX_DIMS);
        return false;
    }
    s.ndim = (int)json_array_size(shape);
    for (int j = 0; j < s.ndim; j++) {
        json_t *dj = json_array_get(shape, (size_t)j);
        if (!json_is_integer(dj) || json_integer_value(dj) < 0) {
            snprintf(err, es, "input '%s': shape[%d] is not a whole number >= 0", name, j);
            return false;
        }
        s.dim[j] = json_integer_value(dj);
    }
    return (x[i] = nb__sv_tensor_from_data(data, d, s, name, err, es)) != NULL;
}

static void infer(sv_model *m, sv_version *v, const sv_request *req, sv_response *r) {
    char err[1024] = "";
    size_t len = 0;
    char *text = nb__sv_json_prepare(req->body, req->body_len, &len);
    json_t *root = text ? nb__sv_json_parse(text, len, err, sizeof err) : NULL;
    bool oom = !text;
    free(text);
    if (!root) {
        nb__sv_error(r, oom ? 500 : 400, "%s", oom ? "out of memory reading the body" : err);
        return;
    }
    nb_tensor *x[64] = { 0 }, *y[64] = { 0 };
    bool want[64];
    json_t *inputs = json_object_get(root, "inputs"), *outputs = json_object_get(root, "outputs");
    json_t *id = json_object_get(root, "id");
    nb_scope *sc = nb_scope_begin();
    bool ok = true;
    if (v->nin > 64 || v->nout > 64) {
        nb__sv_error(r, 500, "the model has more than 64 inputs or outputs");
        ok = false;
    } else if (!json_is_array(inputs)) {
        nb__sv_error(r, 400, "the body needs \"inputs\", a list of tensors");
        ok = false;
    } else if (id && !json_is_string(id)) {
        nb__sv_error(r, 400, "\"id\" must be a string");
        ok = false;
    } else if (outputs && !json_is_array(outputs)) {
        nb__sv_error(r, 400, "\"outputs\" must be a list of {\"name\": ...}");
        ok = false;
    }
    for (size_t k = 0; ok && k < json_array_size(inputs); k++)
        if (!read_input(v, json_array_get(inputs, k), k, x, err, sizeof err)) {
            nb__sv_error(r, 400, "%s", err);
            ok = false;
        }
    for (int i = 0; ok && i < v->nin; i++)
        if (!x[i]) {
            nb__sv_error(r, 400, "input '%s' of the model is not given", v->in[i].name);
            ok = false;
        } else if (!nb__sv_check_input(&v->in[i], x[i], err, sizeof err)) {
            nb__sv_error(r, 400, "%s", err);
            ok = false;
        }
    for (int k = 0; ok && k < v->nout; k++) want[k] = !outputs;
    for (size_t k = 0; ok && k < json_array_size(outputs); k++) {
        const char *name = json_string_value(json_object_get(json_array_get(outputs, k), "name"));
        int j = 0;
        while (name && j < v->nout && strcmp(v->out[j].name, name)) j++;
        if (!name || j == v->nout) {
            nb__sv_error(r, 400, "outputs[%zu] does not name an output of the model", k);
            ok = false;
        } else want[j] = true;
    }
    if (ok && nb__sv_run(v, x, y) < 0) {
        nb__sv_error(r, 500, "the model's run failed: %s", nb_error() ? nb_error() : "?");
        ok = false;
    }
    if (ok) {
        sv_buf *b = &r->body;
        nb__sv_puts(b, "{\"model_name\": ");
        nb__sv_json_str(b, m->name);
        nb__sv_printf(b, ", \"model_version\": \"%lld\"", (long long)v->version);
        if (id) {
            nb__sv_puts(b, ", \"id\": ");
            nb__sv_json_str(b, json_string_value(id));
        }
        nb__sv_puts(b, ", \"outputs\": [");
        for (int k = 0, first = 1; k < v->nout; k++) {
            if (!want[k]) continue;
            nb_shape s = nb_shape_of(y[k]);
            nb__sv_puts(b, first ? "{\"name\": " : ", {\"name\": ");
            first = 0;
            nb__sv_json_str(b, v->out[k].name);
            nb__sv_printf(b, ", \"datatype\": \"%s\", \"shape\": [", nb__sv_v2_dtype(nb_dtype_of(y[k])));
            for (int d = 0; d < s.ndim; d++) nb__sv_printf(b, "%s%lld", d ? ", " : "", (long long)s.dim[d]);
            nb__sv_puts(b, "], \"data\": ");
            nb__sv_write_tensor(b, y[k], -1, true);
            nb__sv_puts(b, "}");
        }
        nb__sv_puts(b, "]}");
    }
    for (int k = 0; k < 64; k++) nb_release(y[k]);
    nb_scope_end(sc);
    json_decref(root);
}

void nb__sv_v2_handle(sv_server *s, const sv_request *req, const char *rest, sv_response *r) {
    bool get = !strcmp(req->method, "GET");
    if (!*rest || !strcmp(rest, "/") || !strcmp(rest, "/health/live") || !strcmp(rest, "/health/ready")) {
        if (!get) {
            nb__sv_error(r, 405, "%s takes GET, not %s", req->path, req->method);
            r->allow = "GET";
        } else if (!strcmp(rest, "/health/live")) nb__sv_puts(&r->body, "{\"live\": true}");
        else if (!strcmp(rest, "/health/ready")) {
            if (req->stopping) nb__sv_error(r, 503, "the server is shutting down");
            else nb__sv_puts(&r->body, "{\"ready\": true}");
        } else nb__sv_printf(&r->body, "{\"name\": \"nabla\", \"version\": \"%s\", \"extensions\": []}", nb_version());
        return;
    }
    if (strncmp(rest, "/models/", 8)) {
        nb__sv_error(r, 404, "no such endpoint: %s %s", req->method, req->path);
        return;
    }
    rest += 8;
    size_t nl = strcspn(rest, "/");
    char name[128];
    if (!nl || nl >= sizeof name) {
        nb__sv_error(r, 404, "no model name in %s", req->path);
        return;
    }
    memcpy(name, rest, nl);
    name[nl] = 0;
    const char *p = rest + nl;
    int64_t ver;
    if (!nb__sv_parse_version(&p, &ver)) {
        nb__sv_error(r, 400, "the version in %s is not a number", req->path);
        return;
    }
    enum { META, READY, INFER } what;
    if (!*p) what = META;
    else if (!strcmp(p, "/ready")) what = READY;
    else if (!strcmp(p, "/infer")) what = INFER;
    else {
        nb__sv_error(r, 404, "no such endpoint: %s %s", req->method, req->path);
        return;
    }
    const char *want = what == INFER ? "POST" : "GET";
    if (strcmp(req->method, want)) {
        nb__sv_error(r, 405, "%s takes %s, not %s", req->path, want, req->method);
        r->allow = want;
        return;
    }
    sv_model *m = nb__sv_find_model(&s->reg, name);
    sv_version *v = nb__sv_find_version(m, ver);
    if (!m) {
        nb__sv_error(r, 404, "unknown model '%s'", name);
        return;
    }
    r->model = m->name;
    if (!v) {
        nb__sv_error(r, 404, "model '%s' has no version %lld", name, (long long)ver);
        return;
    }
    if (what == META) model_metadata(m, v, r);
    else if (what == READY) {
        nb__sv_puts(&r->body, "{\"name\": ");
        nb__sv_json_str(&r->body, m->name);
        nb__sv_puts(&r->body, ", \"ready\": true}");
    } else {
        double t0 = nb__sv_now();
        infer(m, v, req, r);
        nb__sv_record(m, nb__sv_now() - t0, r->status >= 400);
    }
}
