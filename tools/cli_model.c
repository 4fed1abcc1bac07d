/* The nabla command's models: fits a built-in or a user's JSON config to the data (its input
   shape and class count), and saves and loads state dicts whose metadata carry that config and
   the class names ("nabla.config", "nabla.classes"). A build without jansson has none of it. */
#include "cli_model.h"
#include "cli_data.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef NABLA_HAVE_JSON
#include <jansson.h>

static char **copy_names(char *const *names, int64_t n) {
    char **out = calloc((size_t)(n > 0 ? n : 1), sizeof *out);
    for (int64_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(names && names[i] ? names[i] : "?"))) {
            while (i-- > 0) free(out[i]);
            free(out);
            return NULL;
        }
    return out;
}

/* The "layers" array's last linear layer, whose "out" (Keras's Dense: "units") is the class
   count; *key is the field's name. */
static json_t *last_linear(json_t *root, const char **key) {
    json_t *layers = json_object_get(root, "layers"), *found = NULL;
    size_t i;
    json_t *l;
    *key = "out";
    json_array_foreach(layers, i, l) {
        const char *type = json_string_value(json_object_get(l, "type"));
        if (type && (!strcmp(type, "linear") || !strcasecmp(type, "dense"))) {
            found = l;
            *key = strcmp(type, "linear") && json_object_get(l, "units") ? "units" : "out";
        }
    }
    return found;
}

int cli_model_build(const char *spec, nb_shape sample, int64_t classes, char *const *names, cli_model *m,
                    const char *cmd) {
    memset(m, 0, sizeof *m);
    size_t len = strlen(spec);
    bool file = len > 5 && !strcmp(spec + len - 5, ".json");
    json_error_t jerr;
    json_t *root = NULL;
    if (file) {
        root = json_load_file(spec, 0, &jerr);
        if (!root) {
            /* jansson gives no place (-1) when the file cannot be read at all */
            if (jerr.line >= 1)
                fprintf(stderr, "nabla %s: --model %s: %s at line %d, column %d\n", cmd, spec, jerr.text, jerr.line,
                        jerr.column);
            else fprintf(stderr, "nabla %s: --model %s: %s\n", cmd, spec, jerr.text);
            return -1;
        }
    } else {
        const char *text = nb_nn_config_builtin(spec);
        if (!text) {
            fprintf(stderr, "nabla %s: --model is mlp, cnn, resnet or a FILE.json, got \"%s\"\n", cmd, spec);
            return -1;
        }
        root = json_loads(text, 0, &jerr);
        if (!root) {
            fprintf(stderr, "nabla %s: the built-in %s config does not parse: %s\n", cmd, spec, jerr.text);
            return -1;
        }
    }
    const char *out_key;
    json_t *out_layer = json_is_object(root) ? last_linear(root, &out_key) : NULL;
    json_t *outs = out_layer ? json_object_get(out_layer, out_key) : NULL;
    if (!file) { /* a built-in takes the data's shape and classes */
        json_object_del(root, "input");
        if (out_layer) json_object_set_new(out_layer, "out", json_integer(classes));
    } else if (json_is_integer(outs) && json_integer_value(outs) != classes) { /* other mistakes: the config reader's */
        fprintf(stderr, "nabla %s: --model %s: its last linear layer has %lld outputs; the data has %lld classes\n", cmd,
                spec, (long long)json_integer_value(outs), (long long)classes);
        json_decref(root);
        return -1;
    }
    json_t *input = json_object_get(root, "input");
    if (json_is_object(root) && !input) {
        json_t *dims = json_array();
        for (int i = 0; i < sample.ndim; i++) json_array_append_new(dims, json_integer(sample.dim[i]));
        json_object_set_new(root, "input", dims);
    }
    m->config = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!m->config) {
        fprintf(stderr, "nabla %s: out of memory\n", cmd);
        return -1;
    }
    m->module = nb_nn_from_config(m->config, sample);
    if (!m->module) {
        fprintf(stderr, "nabla %s: --model %s: %s\n", cmd, spec, nb_error());
        cli_model_free(m);
        return -1;
    }
    m->classes = classes;
    m->sample = sample;
    m->names = copy_names(names, classes);
    if (!m->names) {
        fprintf(stderr, "nabla %s: out of memory\n", cmd);
        cli_model_free(m);
        return -1;
    }
    return 0;
}

int cli_model_save(const cli_model *m, const char *path, const char *cmd) {
    json_t *names = json_array();
    for (int64_t i = 0; names && i < m->classes; i++) json_array_append_new(names, json_string(m->names[i]));
    char *names_text = names ? json_dumps(names, JSON_COMPACT) : NULL;
    json_decref(names);
    nb_metadata *md = nb_metadata_new();
    int rc = -1;
    if (names_text && md && nb_metadata_set(md, "nabla.config", m->config) == 0 &&
        nb_metadata_set(md, "nabla.classes", names_text) == 0)
        rc = nb_save_state_dict_meta(m->module, path, md);
    if (rc < 0) fprintf(stderr, "nabla %s: cannot save %s: %s\n", cmd, path, nb_error() ? nb_error() : "out of memory");
    nb_metadata_free(md);
    free(names_text);
    return rc;
}

/* The input shape a config's "input" names. */
static bool config_input(const char *config, nb_shape *sample) {
    json_t *root = json_loads(config, 0, NULL), *input = json_object_get(root, "input");
    bool ok = json_is_array(input) && json_array_size(input) <= NB_MAX_DIMS;
    if (ok) {
        sample->ndim = (int)json_array_size(input);
        for (int i = 0; i < sample->ndim; i++) {
            json_int_t d = json_integer_value(json_array_get(input, (size_t)i));
            ok = ok && d > 0;
            sample->dim[i] = d;
        }
    }
    json_decref(root);
    return ok;
}

int cli_model_load(const char *path, const char *fallback, cli_model *m, const char *cmd) {
    memset(m, 0, sizeof *m);
    nb_safetensors *f = nb_safetensors_open(path);
    if (!f) {
        fprintf(stderr, "nabla %s: %s\n", cmd, nb_error());
        return -1;
    }
    const nb_metadata *md = nb_safetensors_metadata(f);
    const char *config = md ? nb_metadata_get(md, "nabla.config") : NULL;
    const char *names_text = md ? nb_metadata_get(md, "nabla.classes") : NULL;
    int rc = -1;
    if (config) {
        json_t *names = names_text ? json_loads(names_text, 0, NULL) : NULL;
        m->config = strdup(config);
        m->classes = json_is_array(names) ? (int64_t)json_array_size(names) : 0;
        m->names = calloc((size_t)(m->classes > 0 ? m->classes : 1), sizeof *m->names);
        for (int64_t i = 0; m->names && i < m->classes; i++) {
            const char *s = json_string_value(json_array_get(names, (size_t)i));
            m->names[i] = strdup(s ? s : "?");
        }
        json_decref(names);
        if (!m->config || !m->names || m->classes < 1 || !config_input(config, &m->sample))
            fprintf(stderr, "nabla %s: %s: its nabla.config or nabla.classes metadata is damaged\n", cmd, path);
        else if (!(m->module = nb_nn_from_config(config, m->sample)))
            fprintf(stderr, "nabla %s: %s: its stored config does not build: %s\n", cmd, path, nb_error());
        else rc = 0;
    } else {
        char *const *names = (char *const *)cli_fashion_classes;
        rc = cli_model_build(fallback, (nb_shape){ 3, { 1, 28, 28 } }, 10, names, m, cmd);
    }
    if (rc == 0 && nb_load_state_dict_from(m->module, f, (nb_load_opts){ 0 }) < 0) {
        fprintf(stderr, "nabla %s: %s%s\n", cmd, nb_error(),
                config ? "" : " (the file stores no model config; name its architecture with --model)");
        rc = -1;
    }
    nb_safetensors_close(f);
    if (rc < 0) cli_model_free(m);
    else nb_module_train(m->module, false);
    return rc;
}

#else
/* Without jansson no config is read or edited and no state dict saved or loaded. */
static int without_json(const char *cmd) {
    fprintf(stderr, "nabla %s: nabla was built without jansson (NABLA_WITH_JSON=OFF), the JSON parser of model configs "
                    "and safetensors files\n", cmd);
    return -1;
}

int cli_model_build(const char *spec, nb_shape sample, int64_t classes, char *const *names, cli_model *m,
                    const char *cmd) {
    (void)spec; (void)sample; (void)classes; (void)names;
    memset(m, 0, sizeof *m);
    return without_json(cmd);
}

int cli_model_save(const cli_model *m, const char *path, const char *cmd) {
    (void)m; (void)path;
    return without_json(cmd);
}

int cli_model_load(const char *path, const char *fallback, cli_model *m, const char *cmd) {
    (void)path; (void)fallback;
    memset(m, 0, sizeof *m);
    return without_json(cmd);
}
#endif

void cli_model_free(cli_model *m) {
    if (!m) return;
    nb_module_free(m->module);
    free(m->config);
    for (int64_t i = 0; m->names && i < m->classes; i++) free(m->names[i]);
    free(m->names);
    memset(m, 0, sizeof *m);
}
