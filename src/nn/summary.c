/* A Keras-style text summary of a module (nb_module_summary): each layer's output shape and
   parameter count from a forward of a zero sample, then the totals. */
#include "nn_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- summary ---------- */
/* n with thousands separators: 1,234,567. */
static const char *group_digits(int64_t n, char *buf, size_t size) {
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)(n < 0 ? -n : n));
    size_t len = strlen(raw), o = 0;
    if (n < 0 && o + 1 < size) buf[o++] = '-';
    for (size_t i = 0; i < len && o + 2 < size; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = 0;
    return buf;
}

static const char *human_bytes(int64_t n, char *buf, size_t size) {
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0) snprintf(buf, size, "%lld B", (long long)n);
    else snprintf(buf, size, "%.2f %s", v, units[u]);
    return buf;
}

/* The output shape with the batch axis as -1. */
static const char *batch_shape_str(nb_shape s, char *buf, size_t size) {
    if (s.ndim == 0) return nb_shape_str(s, buf, size);
    size_t o = (size_t)snprintf(buf, size, "[-1");
    for (int i = 1; i < s.ndim && o < size; i++) o += (size_t)snprintf(buf + o, size - o, ", %lld", (long long)s.dim[i]);
    if (o < size) snprintf(buf + o, size - o, "]");
    return buf;
}

typedef struct {
    char name[96], cls[64], shape[160];
    int64_t params;
} summary_row;

/* Sums the elements and bytes of a listing; trainable ones (requires grad) too when asked. */
static int sum_entries(nb_module *m, bool params, int64_t *count, int64_t *bytes, int64_t *trainable, int64_t *trainable_bytes) {
    int n = params ? nb_module_named_parameters(m, NULL, 0) : nb_module_named_buffers(m, NULL, 0);
    if (n < 0) return -1;
    nb_named_tensor *list = malloc(sizeof *list * (size_t)(n ? n : 1));
    if (!list) {
        nb__error("nb_module_summary: out of memory");
        return -1;
    }
    n = params ? nb_module_named_parameters(m, list, n) : nb_module_named_buffers(m, list, n);
    *count = *bytes = 0;
    if (trainable) *trainable = *trainable_bytes = 0;
    for (int i = 0; i < n; i++) {
        int64_t e = nb_numel(list[i].tensor), sz = e * (int64_t)nb__esize(nb_dtype_of(list[i].tensor));
        *count += e;
        *bytes += sz;
        if (trainable && nb_requires_grad(list[i].tensor)) {
            *trainable += e;
            *trainable_bytes += sz;
        }
    }
    free(list);
    return n < 0 ? -1 : 0;
}

char *nb_module_summary(nb_module *m, nb_shape sample_shape) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_module_summary: module is NULL");
        return NULL;
    }
    char a[160];
    if (sample_shape.ndim < 0 || sample_shape.ndim >= NB_MAX_DIMS) {
        nb__error("nb_module_summary: sample shape has %d axes; give 0 to %d (one sample, without the batch axis)", sample_shape.ndim,
                  NB_MAX_DIMS - 1);
        return NULL;
    }
    nb_shape batch = { .ndim = sample_shape.ndim + 1 };
    batch.dim[0] = 1;
    for (int i = 0; i < sample_shape.ndim; i++) batch.dim[i + 1] = sample_shape.dim[i];

    /* the rows: each top-level child of a sequential, else the module itself */
    nb_module *probe = nb_nn_sequential(NULL);
    bool is_seq = probe && m->cls == probe->cls;
    nb_module_free(probe);
    int nrows = 0;
    if (is_seq) {
        char nm[16];
        for (;; nrows++) {
            snprintf(nm, sizeof nm, "%d", nrows);
            if (!nb_module_get_child(m, nm)) break;
        }
    }
    int cap = is_seq ? nrows : 1;
    summary_row *rows = calloc((size_t)(cap ? cap : 1), sizeof *rows);
    if (!rows) {
        nb__error("nb_module_summary: out of memory");
        return NULL;
    }

    bool prev_training = m->training, prev_grad = nb_set_grad_enabled(false);
    nb_module_train(m, false);
    bool had = nb__has_error(), failed = false;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_zeros(batch, NB_F32);
    failed = !x;
    for (int r = 0; r < cap && !failed; r++) {
        nb_module *layer = m;
        summary_row *row = &rows[r];
        if (is_seq) {
            snprintf(row->name, sizeof row->name, "%d", r);
            layer = nb_module_get_child(m, row->name);
        } else snprintf(row->name, sizeof row->name, "%s", *nb_module_path(m) ? nb_module_path(m) : "(model)");
        snprintf(row->cls, sizeof row->cls, "%s", layer->cls->name ? layer->cls->name : "?");
        nb_shape in = nb_shape_of(x);
        nb__error_ctx ec;
        nb__error_quiet(&ec);
        x = nb_forward(layer, x);
        if (!x) {
            char prefix[400];
            if (is_seq)
                snprintf(prefix, sizeof prefix, "nb_module_summary: layer %d (%s) fails on input %s", r, row->cls,
                         batch_shape_str(in, a, sizeof a));
            else snprintf(prefix, sizeof prefix, "nb_module_summary: %s fails on input %s", row->cls, batch_shape_str(in, a, sizeof a));
            if (!nb_error()) nb__error("%s", prefix);
            else if (!had) nb__error_reword("%s: %s", prefix, nb_error()); /* in the quiet context */
            failed = true;
        }
        nb__error_pop(&ec);
        if (failed) break;
        batch_shape_str(nb_shape_of(x), row->shape, sizeof row->shape);
        row->params = nb_module_num_params(layer);
    }
    nb_scope_end(s);
    nb_module_train(m, prev_training);
    nb_set_grad_enabled(prev_grad);

    int64_t total, total_b, train, train_b, nbuf, nbuf_b;
    if (failed || sum_entries(m, true, &total, &total_b, &train, &train_b) < 0 ||
        sum_entries(m, false, &nbuf, &nbuf_b, NULL, NULL) < 0) {
        free(rows);
        return NULL;
    }

    int wn = (int)strlen("Layer (type)"), ws = (int)strlen("Output Shape");
    for (int r = 0; r < cap; r++) {
        int w = (int)(strlen(rows[r].name) + strlen(rows[r].cls) + 3);
        if (w > wn) wn = w;
        if ((int)strlen(rows[r].shape) > ws) ws = (int)strlen(rows[r].shape);
    }
    wn += 3;
    ws += 3;
    int width = wn + ws + 14;
    char line[512], dline[512], num[40], hb[40];
    if (width > (int)sizeof line - 1) width = (int)sizeof line - 1;
    memset(line, '_', (size_t)width);
    line[width] = 0;
    memset(dline, '=', (size_t)width);
    dline[width] = 0;

    nb_text t = { 0 };
    nb__text_printf(&t, "Model: \"%s\"\n%s\n", m->cls->name ? m->cls->name : "?", line);
    nb__text_printf(&t, "%-*s%-*s%s\n%s\n", wn, "Layer (type)", ws, "Output Shape", "Param #", dline);
    char cell[200];
    nb__text_printf(&t, "%-*s%-*s%s\n", wn, "input", ws, batch_shape_str(batch, a, sizeof a), "0");
    for (int r = 0; r < cap; r++) {
        snprintf(cell, sizeof cell, "%s (%s)", rows[r].name, rows[r].cls);
        nb__text_printf(&t, "%-*s%-*s%s\n", wn, cell, ws, rows[r].shape, group_digits(rows[r].params, num, sizeof num));
    }
    nb__text_printf(&t, "%s\n", dline);
    nb__text_printf(&t, "Total params: %s (%s)\n", group_digits(total, num, sizeof num), human_bytes(total_b, hb, sizeof hb));
    nb__text_printf(&t, "Trainable params: %s (%s)\n", group_digits(train, num, sizeof num), human_bytes(train_b, hb, sizeof hb));
    nb__text_printf(&t, "Non-trainable params: %s (%s)\n", group_digits(total - train, num, sizeof num),
                    human_bytes(total_b - train_b, hb, sizeof hb));
    nb__text_printf(&t, "Parameter bytes: %s\n", group_digits(total_b, num, sizeof num));
    nb__text_printf(&t, "Buffers: %s elements (%s)\n%s\n", group_digits(nbuf, num, sizeof num), human_bytes(nbuf_b, hb, sizeof hb),
                    line);
    free(rows);
    if (t.failed || !t.s) {
        free(t.s);
        nb__error("nb_module_summary: out of memory");
        return NULL;
    }
    return t.s;
}

