/* TF Serving's REST API (tensorflow_serving/g3doc/api_rest.md) over the registry: model status,
   model metadata (the "serving_default" signature) and predict in its row ("instances") and
   columnar ("inputs") forms. Labels, :classify, :regress and base64 values are not built yet. */
#include "serve_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void version_status(sv_buf *b, const sv_version *v) {
    nb__sv_printf(b, "{\"version\": \"%lld\", \"state\": \"AVAILABLE\", \"status\": {\"error_code\": \"OK\", "
                 "\"error_message\": \"\"}}", (long long)v->version);
}

static void model_status(sv_model *m, int64_t ver, sv_response *r) {
    sv_buf *b = &r->body;
    nb__sv_puts(b, "{\"model_version_status\": [");
    for (int k = 0, first = 1; k < m->nv; k++) {
        if (ver >= 0 && m->v[k].version != ver) continue;
        if (!first) nb__sv_puts(b, ", ");
        first = 0;
        version_status(b, &m->v[k]);
    }
    nb__sv_puts(b, "]}");
}

static void tensor_info(sv_buf *b, const sv_io *io, int n) {
    nb__sv_puts(b, "{");
    for (int i = 0; i < n; i++) {
        if (i) nb__sv_puts(b, ", ");
        nb__sv_json_str(b, io[i].name);
        nb__sv_printf(b, ": {\"dtype\": \"%s\", \"tensor_shape\": {", nb__sv_tf_dtype(io[i].dtype));
        if (io[i].ndim < 0) nb__sv_puts(b, "\"dim\": [], \"unknown_rank\": true}");
        else {
            nb__sv_puts(b, "\"dim\": [");
            for (int d = 0; d < io[i].ndim; d++)
                nb__sv_printf(b, "%s{\"size\": \"%lld\", \"name\": \"\"}", d ? ", " : "", (long long)io[i].dim[d]);
            nb__sv_puts(b, "], \"unknown_rank\": false}");
        }
        nb__sv_puts(b, ", \"name\": ");
        nb__sv_json_str(b, io[i].name);
        nb__sv_puts(b, "}");
    }
    nb__sv_puts(b, "}");
}

static void metadata(sv_model *m, sv_version *v, sv_response *r) {
    sv_buf *b = &r->body;
    nb__sv_puts(b, "{\"model_spec\": {\"name\": ");
    nb__sv_json_str(b, m->name);
    nb__sv_printf(b, ", \"signature_name\": \"\", \"version\": \"%lld\"}, \"metadata\": {\"signature_def\": "
                 "{\"signature_def\": {\"serving_default\": {\"inputs\": ", (long long)v->version);
    tensor_info(b, v->in, v->nin);
    nb__sv_puts(b, ", \"outputs\": ");
    tensor_info(b, v->out, v->nout);
    nb__sv_puts(b, ", \"method_name\": \"tensorflow/serving/predict\"}}}}}");
}

/* The index of the input called name, or -1. */
static int input_index(const sv_version *v, const char *name) {
    for (int i = 0; i < v->nin; i++)
        if (!strcmp(v->in[i].name, name)) return i;
    return -1;
}

/* The row format: "instances" is a list, of values (one input) or of objects naming each input. */
static bool row_inputs(sv_version *v, json_t *inst, nb_tensor **x, char *err, size_t es) {
    if (!json_is_array(inst) || !json_array_size(inst)) {
        snprintf(err, es, "\"instances\" must be a non-empty list");
        return false;
    }
    bool objects = json_is_object(json_array_get(inst, 0));
    if (!objects) {
        if (v->nin != 1) {
            snprintf(err, es, "the model takes %d inputs: each instance must be an object naming them", v->nin);
            return false;
        }
        return (x[0] = nb__sv_tensor_from_json(inst, v->in[0].dtype, v->in[0].name, err, es)) != NULL;
    }
    size_t n = json_array_size(inst), k;
    json_t *o;
    json_array_foreach(inst, k, o) {
        if (!json_is_object(o)) {
            snprintf(err, es, "instance %zu is not an object as instance 0 is", k);
            return false;
        }
        const char *key;
        json_t *val;
        json_object_foreach(o, key, val) {
            (void)val;
            if (input_index(v, key) < 0) {
                snprintf(err, es, "instance %zu names '%s', which is not an input of the model", k, key);
                return false;
            }
        }
    }
    for (int i = 0; i < v->nin; i++) {
        json_t *col = json_array();
        if (!col) { snprintf(err, es, "out of memory"); return false; }
        for (k = 0; k < n; k++) {
            json_t *val = json_object_get(json_array_get(inst, k), v->in[i].name);
            if (!val) {
                snprintf(err, es, "instance %zu lacks input '%s'", k, v->in[i].name);
                json_decref(col);
                return false;
            }
            json_array_append(col, val);
        }
        x[i] = nb__sv_tensor_from_json(col, v->in[i].dtype, v->in[i].name, err, es);
        json_decref(col);
        if (!x[i]) return false;
    }
    return true;
}

/* The columnar format: "inputs" is the one input's value, or an object naming each input. */
static bool columnar_inputs(sv_version *v, json_t *in, nb_tensor **x, char *err, size_t es) {
    bool named = json_is_object(in);
    if (!named) {
        if (v->nin != 1) {
            snprintf(err, es, "the model takes %d inputs: \"inputs\" must be an object naming them", v->nin);
            return false;
        }
        return (x[0] = nb__sv_tensor_from_json(in, v->in[0].dtype, v->in[0].name, err, es)) != NULL;
    }
    const char *key;
    json_t *val;
    json_object_foreach(in, key, val) {
        (void)val;
        if (input_index(v, key) < 0) {
            snprintf(err, es, "\"inputs\" names '%s', which is not an input of the model", key);
            return false;
        }
    }
    for (int i = 0; i < v->nin; i++) {
        json_t *t = json_object_get(in, v->in[i].name);
        if (!t) {
            snprintf(err, es, "\"inputs\" lacks input '%s'", v->in[i].name);
            return false;
        }
        if (!(x[i] = nb__sv_tensor_from_json(t, v->in[i].dtype, v->in[i].name, err, es))) return false;
    }
    return true;
}

/* The "predictions" of a row request: per row, the one output's value or an object of them. */
static void row_outputs(sv_version *v, nb_tensor **y, int64_t batch, sv_response *r) {
    for (int k = 0; k < v->nout; k++)
        if (nb_shape_of(y[k]).ndim < 1 || nb_shape_of(y[k]).dim[0] != batch) {
            nb__sv_error(r, 400, "output '%s' does not have the batch size %lld of the instances as its first dimension; "
                             "ask in the columnar format (\"inputs\")", v->out[k].name, (long long)batch);
            return;
        }
    sv_buf *b = &r->body;
    nb__sv_puts(b, "{\"predictions\": [");
    for (int64_t i = 0; i < batch; i++) {
        if (i) nb__sv_puts(b, ", ");
        if (v->nout == 1) nb__sv_write_tensor(b, y[0], i, false);
        else {
            nb__sv_puts(b, "{");
            for (int k = 0; k < v->nout; k++) {
                if (k) nb__sv_puts(b, ", ");
                nb__sv_json_str(b, v->out[k].name);
                nb__sv_puts(b, ": ");
                nb__sv_write_tensor(b, y[k], i, false);
            }
            nb__sv_puts(b, "}");
        }
    }
    nb__sv_puts(b, "]}");
}

static void columnar_outputs(sv_version *v, nb_tensor **y, sv_response *r) {
    sv_buf *b = &r->body;
    nb__sv_puts(b, "{\"outputs\": ");
    if (v->nout == 1) nb__sv_write_tensor(b, y[0], -1, false);
    else {
        nb__sv_puts(b, "{");
        for (int k = 0; k < v->nout; k++) {
            if (k) nb__sv_puts(b, ", ");
            nb__sv_json_str(b, v->out[k].name);
            nb__sv_puts(b, ": ");
            nb__sv_write_tensor(b, y[k], -1, false);
        }
        nb__sv_puts(b, "}");
    }
    nb__sv_puts(b, "}");
}

static void predict(sv_model *m, sv_version *v, const sv_request *req, sv_response *r) {
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
    json_t *inst = json_object_get(root, "instances"), *in = json_object_get(root, "inputs");
    const char *sig = json_string_value(json_object_get(root, "signature_name"));
    nb_scope *sc = nb_scope_begin();
    if (v->nin > 64 || v->nout > 64) nb__sv_error(r, 500, "the model has more than 64 inputs or outputs");
    else if (sig && *sig && strcmp(sig, "serving_default"))
        nb__sv_error(r, 400, "signature '%s' not found: the model has \"serving_default\" only", sig);
    else if (inst && in) nb__sv_error(r, 400, "the body has both \"instances\" (row format) and \"inputs\" (columnar); give one");
    else if (!inst && !in) nb__sv_error(r, 400, "the body has neither \"instances\" (row format) nor \"inputs\" (columnar)");
    else if (!(inst ? row_inputs(v, inst, x, err, sizeof err) : columnar_inputs(v, in, x, err, sizeof err)))
        nb__sv_error(r, 400, "%s", err);
    else {
        bool ok = true;
        for (int i = 0; i < v->nin && ok; i++) ok = nb__sv_check_input(&v->in[i], x[i], err, sizeof err);
        if (!ok) nb__sv_error(r, 400, "%s", err);
        else if (nb__sv_run(v, x, y) < 0) nb__sv_error(r, 500, "the model's run failed: %s", nb_error() ? nb_error() : "?");
        else if (inst) row_outputs(v, y, (int64_t)json_array_size(inst), r);
        else columnar_outputs(v, y, r);
    }
    for (int k = 0; k < 64; k++) nb_release(y[k]);
    nb_scope_end(sc);
    json_decref(root);
    (void)m;
}

void nb__sv_tfs_handle(sv_server *s, const sv_request *req, const char *rest, sv_response *r) {
    size_t nl = strcspn(rest, "/:");
    char name[128];
    if (!nl || nl >= sizeof name) {
        nb__sv_error(r, 404, "no model name in %s", req->path);
        return;
    }
    memcpy(name, rest, nl);
    name[nl] = 0;
    const char *p = rest + nl;
    int64_t ver;
    if (!strncmp(p, "/labels/", 8)) {
        nb__sv_error(r, 400, "version labels are not supported by nabla serve yet; name the version (/versions/N)");
        return;
    }
    if (!nb__sv_parse_version(&p, &ver)) {
        nb__sv_error(r, 400, "the version in %s is not a number", req->path);
        return;
    }
    enum { STATUS, METADATA, PREDICT, OTHER_VERB } what;
    if (!*p) what = STATUS;
    else if (!strcmp(p, "/metadata")) what = METADATA;
    else if (!strcmp(p, ":predict")) what = PREDICT;
    else if (!strcmp(p, ":classify") || !strcmp(p, ":regress")) what = OTHER_VERB;
    else {
        nb__sv_error(r, 404, "no such endpoint: %s %s", req->method, req->path);
        return;
    }
    const char *want = what == PREDICT || what == OTHER_VERB ? "POST" : "GET";
    if (strcmp(req->method, want)) {
        nb__sv_error(r, 405, "%s takes %s, not %s", req->path, want, req->method);
        r->allow = want;
        return;
    }
    if (what == OTHER_VERB) {
        nb__sv_error(r, 501, "%s is not built in nabla serve yet (predict is)", p + 1);
        return;
    }
    sv_model *m = nb__sv_find_model(&s->reg, name);
    sv_version *v = nb__sv_find_version(m, ver);
    if (!m) {
        nb__sv_error(r, 404, "Servable not found for request: %s(%s%s)", ver < 0 ? "Latest" : "Specific", name, "");
        return;
    }
    r->model = m->name;
    if (!v) {
        nb__sv_error(r, 404, "Servable not found for request: Specific(%s, %lld)", name, (long long)ver);
        return;
    }
    if (what == STATUS) model_status(m, ver, r);
    else if (what == METADATA) metadata(m, v, r);
    else {
        double t0 = nb__sv_now();
        predict(m, v, req, r);
        nb__sv_record(m, nb__sv_now() - t0, r->status >= 400);
    }
}
