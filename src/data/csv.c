/* CSV reader: RFC 4180 fields (quotes, doubled quotes, delimiters and newlines inside quotes),
   an optional header, a label column by name or index; every value numeric and finite, errors by
   line. */
#include "data_impl.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *who, *name;
    const char *p, *end;
    char delim;
    int64_t line;        /* line of the next character (1-based) */
    int64_t record_line; /* line the current record starts on */
    /* the current record: fields in buf, each NUL-terminated, starting at off[i] */
    char *buf;
    size_t buf_len, buf_cap;
    size_t *off;
    int64_t nf, off_cap;
} csv_reader;

static int buf_put(csv_reader *r, char c) {
    if (r->buf_len == r->buf_cap) {
        size_t cap = r->buf_cap ? r->buf_cap * 2 : 256;
        char *g = realloc(r->buf, cap);
        if (!g) { nb__error("%s: out of memory", r->who); return -1; }
        r->buf = g;
        r->buf_cap = cap;
    }
    r->buf[r->buf_len++] = c;
    return 0;
}

/* Adds a character of the current field (the r->nf-th); a NUL byte, which would end the field
   early, is an error naming the line and column. */
static int field_put(csv_reader *r, char c) {
    if (c == 0) {
        nb__error("%s: %s: a NUL byte inside the field at line %lld, column %lld", r->who, r->name, (long long)r->line,
                  (long long)r->nf);
        return -1;
    }
    return buf_put(r, c);
}

static int field_start(csv_reader *r) {
    if (r->nf == r->off_cap) {
        int64_t cap = r->off_cap ? r->off_cap * 2 : 16;
        size_t *g = realloc(r->off, sizeof *g * (size_t)cap);
        if (!g) { nb__error("%s: out of memory", r->who); return -1; }
        r->off = g;
        r->off_cap = cap;
    }
    r->off[r->nf++] = r->buf_len;
    return 0;
}

/* Reads the next record into r; 1 when one was read, 0 at the end, -1 on error. Blank lines
   are skipped. */
static int next_record(csv_reader *r) {
    for (;;) {
        if (r->p >= r->end) return 0;
        if (*r->p == '\n') { r->p++; r->line++; continue; }
        if (*r->p == '\r' && (r->p + 1 >= r->end || r->p[1] == '\n')) { r->p += r->p + 1 < r->end ? 2 : 1; r->line++; continue; }
        break;
    }
    r->record_line = r->line;
    r->buf_len = 0;
    r->nf = 0;
    for (;;) { /* one field per pass */
        if (field_start(r) < 0) return -1;
        if (r->p < r->end && *r->p == '"') {
            int64_t qline = r->line;
            r->p++;
            for (;;) {
                if (r->p >= r->end) {
                    nb__error("%s: %s: unterminated quoted field starting at line %lld, field %lld", r->who, r->name,
                              (long long)qline, (long long)r->nf);
                    return -1;
                }
                char c = *r->p++;
                if (c == '"') {
                    if (r->p < r->end && *r->p == '"') { r->p++; if (buf_put(r, '"') < 0) return -1; continue; }
                    break;
                }
                if (field_put(r, c) < 0) return -1;
                if (c == '\n') r->line++;
            }
            if (r->p < r->end && *r->p != r->delim && *r->p != '\n' && *r->p != '\r') {
                nb__error("%s: %s: unexpected character '%c' after a closing quote at line %lld, field %lld", r->who,
                          r->name, *r->p, (long long)r->line, (long long)r->nf);
                return -1;
            }
        } else {
            while (r->p < r->end && *r->p != r->delim && *r->p != '\n' &&
                   !(*r->p == '\r' && (r->p + 1 >= r->end || r->p[1] == '\n'))) {
                if (field_put(r, *r->p++) < 0) return -1;
            }
        }
        if (buf_put(r, 0) < 0) return -1;
        if (r->p < r->end && *r->p == r->delim) { r->p++; continue; }
        if (r->p < r->end) { /* end of line */
            r->p += *r->p == '\r' && r->p + 1 < r->end ? 2 : 1;
            r->line++;
        }
        return 1;
    }
}

/* Parses field text as a number; false when it is not one (or empty). */
static bool parse_number(const char *s, double *v) {
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) return false;
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    if (end == s) return false;
    while (*end == ' ' || *end == '\t') end++;
    return *end == 0;
}

static bool is_blank(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return !*s;
}

nb_dataset *nb_data_csv_parse(const char *text, size_t size, const char *name, nb_csv_opts opts) {
    const char *who = "nb_data_csv";
    if (!text && size) { nb__error("%s: text is NULL", who); return NULL; }
    csv_reader r = { .who = who, .name = name ? name : "(memory)", .p = text ? text : "", .end = (text ? text : "") + size,
                     .delim = opts.delimiter ? opts.delimiter : ',', .line = 1 };
    if (size >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB && (unsigned char)text[2] == 0xBF)
        r.p += 3; /* UTF-8 byte order mark */
    nb_dataset *ds = NULL;
    float *x = NULL;
    double *y = NULL;
    char **names = NULL;
    int64_t ncols = 0, rows = 0, cap = 0, label = -1;
    int rc = next_record(&r);
    if (rc <= 0) {
        if (rc == 0) nb__error("%s: %s: no rows", who, r.name);
        goto done;
    }
    ncols = r.nf;
    if (!opts.no_header) {
        names = calloc((size_t)ncols, sizeof *names);
        if (!names) { nb__error("%s: out of memory", who); goto done; }
        for (int64_t i = 0; i < ncols; i++) {
            names[i] = strdup(r.buf + r.off[i]);
            if (!names[i]) { nb__error("%s: out of memory", who); goto done; }
        }
    }
    if (!opts.no_label) {
        if (opts.label) {
            for (int64_t i = 0; names && i < ncols; i++)
                if (strcmp(names[i], opts.label) == 0) { label = i; break; }
            if (label < 0) {
                nb__error("%s: %s: no column named \"%s\" in the header at line %lld", who, r.name, opts.label,
                          (long long)r.record_line);
                goto done;
            }
        } else {
            label = opts.label_index < 0 ? ncols + opts.label_index : opts.label_index;
            if (label < 0 || label >= ncols) {
                nb__error("%s: %s: label_index %d is out of range for %lld columns", who, r.name, opts.label_index,
                          (long long)ncols);
                goto done;
            }
        }
    }
    int64_t nfeat = ncols - (label >= 0 ? 1 : 0);
    if (nfeat < 1) { nb__error("%s: %s: no feature columns besides the label", who, r.name); goto done; }
    if (!opts.no_header) rc = next_record(&r);
    for (; rc == 1; rc = next_record(&r)) {
        if (r.nf != ncols) {
            nb__error("%s: %s: line %lld has %lld fields, expected %lld (as on line 1)", who, r.name,
                      (long long)r.record_line, (long long)r.nf, (long long)ncols);
            goto done;
        }
        if (rows == cap) {
            int64_t xbytes;
            if (nb__mul_overflows(cap ? cap : 512, 2, &cap) || nb__mul_overflows(cap, nfeat, &xbytes) ||
                nb__mul_overflows(xbytes, (int64_t)sizeof(float), &xbytes) || (uint64_t)xbytes > SIZE_MAX) {
                nb__error("%s: %s: out of memory at line %lld (%lld rows of %lld features)", who, r.name,
                          (long long)r.record_line, (long long)rows, (long long)nfeat);
                goto done;
            }
            float *gx = realloc(x, (size_t)xbytes);
            if (gx) x = gx;
            double *gy = realloc(y, sizeof(double) * (size_t)cap);
            if (gy) y = gy;
            if (!gx || !gy) { nb__error("%s: out of memory", who); goto done; }
        }
        int64_t k = 0;
        for (int64_t i = 0; i < ncols; i++) {
            const char *f = r.buf + r.off[i];
            double v;
            bool number = parse_number(f, &v);
            if (!number || !isfinite(v) || (i != label && !isfinite((float)v))) {
                char col[300];
                if (names) snprintf(col, sizeof col, "%lld (\"%.200s\")", (long long)(i + 1), names[i]);
                else snprintf(col, sizeof col, "%lld", (long long)(i + 1));
                /* a nan or inf would train on as a nan loss every step, far from its cause */
                if (number)
                    nb__error("%s: %s: value \"%.100s\" at line %lld, column %s is not a finite f32 number "
                              "(a sample may not hold nan or inf: fill or drop it)", who, r.name, f, (long long)r.record_line, col);
                else if (is_blank(f))
                    nb__error("%s: %s: missing value at line %lld, column %s", who, r.name, (long long)r.record_line, col);
                else
                    nb__error("%s: %s: non-numeric field \"%.100s\" at line %lld, column %s", who, r.name, f,
                              (long long)r.record_line, col);
                goto done;
            }
            if (i == label) y[rows] = v;
            else x[rows * nfeat + k++] = (float)v;
        }
        rows++;
    }
    if (rc < 0) goto done;
    if (rows == 0) { nb__error("%s: %s: no data rows", who, r.name); goto done; }
    nb_scope *s = nb_scope_begin();
    nb_tensor *tx = nb_from_data(x, NB_SHAPE(rows, nfeat), NB_F32), *ty = NULL;
    if (label >= 0) {
        bool integral = true;
        for (int64_t i = 0; i < rows && integral; i++) integral = y[i] == floor(y[i]) && fabs(y[i]) < 9e15;
        if (integral) {
            int64_t *yi = (int64_t *)y; /* converted in place: same size */
            for (int64_t i = 0; i < rows; i++) yi[i] = (int64_t)y[i];
            ty = nb_from_data(yi, NB_SHAPE(rows), NB_I64);
        } else {
            ty = nb_cast(nb_from_data(y, NB_SHAPE(rows), NB_F64), NB_F32);
        }
    }
    if (tx && (label < 0 || ty)) ds = nb_data_tensors(tx, ty);
    nb_scope_end(s);
done:
    if (names)
        for (int64_t i = 0; i < ncols; i++) free(names[i]);
    free(names);
    free(x);
    free(y);
    free(r.buf);
    free(r.off);
    return ds;
}

nb_dataset *nb_data_csv(const char *path, nb_csv_opts opts) {
    size_t size;
    char *text = nb__read_file("nb_data_csv", path, &size);
    if (!text) return NULL;
    nb_dataset *ds = nb_data_csv_parse(text, size, path, opts);
    free(text);
    return ds;
}
