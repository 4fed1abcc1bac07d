/* nb_print and nb_format: tensors as text, following PyTorch's layout (precision 4,
   right-aligned columns, scientific notation for wide ranges, "..." past 1000 elements). */
#include "core_impl.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t size, len;
} out_buf;

static void emit(out_buf *o, const char *s) {
    size_t n = strlen(s);
    if (o->len < o->size) {
        size_t room = o->size - o->len - 1;
        memcpy(o->buf + o->len, s, n < room ? n : room);
        o->buf[o->len + (n < room ? n : room)] = 0;
    }
    o->len += n;
}

typedef struct {
    const nb_tensor *t;
    bool floating, int_mode, sci;
    int width;
    bool summarize;
} fmt_state;

static double element(const nb_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->shape.ndim; d++) off += idx[d] * t->stride[d];
    return nb__load(nb__data(t), t->dtype, off);
}

static void format_value(const fmt_state *f, double v, char *s, size_t n) {
    if (f->t->dtype == NB_BOOL) snprintf(s, n, "%s", v != 0 ? "True" : "False");
    else if (!f->floating) snprintf(s, n, "%lld", (long long)v);
    else if (isnan(v)) snprintf(s, n, "nan");
    else if (isinf(v)) snprintf(s, n, v > 0 ? "inf" : "-inf");
    else if (f->sci) snprintf(s, n, "%.4e", v);
    else if (f->int_mode) snprintf(s, n, "%.0f.", v);
    else snprintf(s, n, "%.4f", v);
}

/* Visits the elements that will be shown (all, or the 3 at each end of each axis). */
static void scan(fmt_state *f, int64_t *idx, int d, double *amin, double *amax, bool *all_int, int *width) {
    const nb_tensor *t = f->t;
    if (d == t->shape.ndim) {
        double v = element(t, idx);
        if (f->floating && isfinite(v)) {
            double a = fabs(v);
            if (v != floor(v)) *all_int = false;
            if (a > 0) {
                if (a < *amin) *amin = a;
                if (a > *amax) *amax = a;
            }
        }
        /* as torch's _Formatter: a float column is as wide as its nonzero finite values; nan,
           inf and zeros are padded to that width (or overflow it), never set it */
        if (f->floating && !(isfinite(v) && v != 0)) return;
        char s[64];
        format_value(f, v, s, sizeof s);
        int w = (int)strlen(s);
        if (w > *width) *width = w;
        return;
    }
    int64_t n = t->shape.dim[d];
    for (int64_t i = 0; i < n; i++) {
        if (f->summarize && n > 6 && i == 3) i = n - 3;
        idx[d] = i;
        scan(f, idx, d + 1, amin, amax, all_int, width);
    }
}

/* One axis, as torch's _tensor_str_with_formatter: the last axis is a list of values joined
   by ", " and wrapped at 80 columns; outer axes join their slices with "," and newlines. */
static void format_axis(fmt_state *f, out_buf *o, int64_t *idx, int d, int indent) {
    const nb_tensor *t = f->t;
    int nd = t->shape.ndim;
    int64_t n = t->shape.dim[d];
    bool cut = f->summarize && n > 6;
    emit(o, "[");
    if (d == nd - 1) {
        int per_line = (80 - indent) / (f->width + 2);
        if (per_line < 1) per_line = 1;
        int item = 0;
        for (int64_t i = 0; i < n; i++, item++) {
            if (item > 0) {
                if (item % per_line == 0) {
                    emit(o, ",\n");
                    for (int k = 0; k < indent + 1; k++) emit(o, " ");
                } else emit(o, ", ");
            }
            if (cut && i == 3) {
                emit(o, " ...");
                i = n - 4;
                continue;
            }
            idx[d] = i;
            char s[64], padded[96];
            format_value(f, element(t, idx), s, sizeof s);
            snprintf(padded, sizeof padded, "%*s", f->width, s);
            emit(o, padded);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (i > 0) {
                emit(o, ",");
                for (int k = 0; k < nd - d - 1; k++) emit(o, "\n");
                for (int k = 0; k < indent + 1; k++) emit(o, " ");
            }
            if (cut && i == 3) {
                emit(o, "...");
                i = n - 4;
                continue;
            }
            idx[d] = i;
            format_axis(f, o, idx, d + 1, indent + 1);
        }
    }
    emit(o, "]");
}

static const char *torch_dtype(nb_dtype d) {
    switch (d) {
    case NB_F64: return "torch.float64";
    case NB_F16: return "torch.float16";
    case NB_BF16: return "torch.bfloat16";
    case NB_I32: return "torch.int32";
    case NB_U8: return "torch.uint8";
    case NB_I8: return "torch.int8";
    default: return NULL; /* f32, i64 and bool are PyTorch's defaults and go unnamed */
    }
}

static const char *(*node_name)(const struct nb_node *);
void nb__set_node_name(const char *(*name)(const struct nb_node *)) { node_name = name; }

size_t nb_format(const nb_tensor *t, char *buf, size_t size) {
    out_buf o = { buf, size, 0 };
    if (size) buf[0] = 0;
    if (!t) { emit(&o, "NULL"); return o.len; }
    /* a device's tensor is formatted from a host copy */
    const nb_tensor *shown = t;
    nb_tensor *host = NULL;
    if (t->storage->device.type != NB_CPU) {
        host = nb__tensor_new(t->shape, t->dtype);
        if (!host || nb__read_to_host(t, nb__data(host)) < 0) {
            nb_release(host);
            emit(&o, "tensor(<unreadable>)");
            return o.len;
        }
        shown = host;
    }
    fmt_state f = { .t = shown, .floating = nb__is_float(t->dtype), .int_mode = true, .width = 1,
                    .summarize = t->numel > 1000 };
    int64_t idx[NB_MAX_DIMS] = { 0 };
    emit(&o, "tensor(");
    if (t->numel == 0) {
        emit(&o, "[]");
        if (t->shape.ndim > 1) {
            char sh[160], s[180];
            nb_shape_str(t->shape, sh, sizeof sh);
            sh[0] = '(';
            sh[strlen(sh) - 1] = ')';
            snprintf(s, sizeof s, ", size=%s", sh);
            emit(&o, s);
        }
    } else {
        double amin = INFINITY, amax = 0;
        bool all_int = true;
        int width = 1;
        scan(&f, idx, 0, &amin, &amax, &all_int, &width);
        if (f.floating) {
            f.int_mode = all_int;
            if (amax > 0) {
                if (all_int) f.sci = amax / amin > 1000.0 || amax > 1e8;
                else f.sci = amax / amin > 1000.0 || amax > 1e8 || amin < 1e-4;
            }
            width = 1;
            bool ignore = true;
            double a = INFINITY, b = 0;
            scan(&f, idx, 0, &a, &b, &ignore, &width);
        }
        f.width = width;
        if (t->shape.ndim == 0) {
            char s[64];
            format_value(&f, element(shown, idx), s, sizeof s);
            emit(&o, s);
        } else format_axis(&f, &o, idx, 0, 7);
    }
    if (host) {
        char dv[32], s[48];
        snprintf(s, sizeof s, ", device='%s'", nb_device_str(t->storage->device, dv, sizeof dv));
        emit(&o, s);
        nb_release(host);
    }
    const char *dt = torch_dtype(t->dtype);
    if (dt) {
        emit(&o, ", dtype=");
        emit(&o, dt);
    }
    if (t->grad_fn && node_name) {
        emit(&o, ", grad_fn=<");
        emit(&o, node_name(t->grad_fn));
        emit(&o, ">");
    } else if (t->requires_grad) emit(&o, ", requires_grad=True");
    emit(&o, ")");
    return o.len;
}

void nb_print(const nb_tensor *t) {
    char stack_buf[4096];
    size_t n = nb_format(t, stack_buf, sizeof stack_buf);
    if (n < sizeof stack_buf) { fputs(stack_buf, stdout); fputc('\n', stdout); return; }
    char *big = nb__alloc(n + 1);
    if (!big) { nb__error("nb_print: out of memory formatting %zu characters", n); return; }
    nb_format(t, big, n + 1);
    fputs(big, stdout);
    fputc('\n', stdout);
    nb__free(big, n + 1);
}
