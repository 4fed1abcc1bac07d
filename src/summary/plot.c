/* Curves as pictures: an SVG plotter overlaying the scalar curves of several runs (one panel per
   tag, TensorBoard's debiased smoothing, axes, ticks, labels, legend), CSV export and sparklines. */
#include "../core/core_impl.h"
#include "../io/io_impl.h"
#include "nabla.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const palette[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf" };
#define N_COLORS ((int)(sizeof palette / sizeof palette[0]))

/* Writes s with XML's special characters escaped. */
static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

/* A file's text built in memory, then written to a temporary file renamed over the path: a reader
   (a browser reloading the picture) never sees half of it, and a failure leaves the old file. */
typedef struct out_text {
    nb__afile af;
    FILE *f;
    char *text;
    size_t len;
} out_text;

/* Opens the temporary file (failing early on a folder that cannot be written) and the memory
   stream; the stream, or NULL with the error recorded. */
static FILE *out_open(out_text *o, const char *fn, const char *path) {
    memset(o, 0, sizeof *o);
    if (nb__afile_open(&o->af, fn, path) < 0) return NULL;
    o->f = open_memstream(&o->text, &o->len);
    if (!o->f) {
        nb__afile_abort(&o->af);
        nb__error("%s: out of memory for '%s'", fn, path);
    }
    return o->f;
}

/* Drops what was written (after an error elsewhere). */
static void out_abort(out_text *o) {
    if (o->f) fclose(o->f);
    free(o->text);
    nb__afile_abort(&o->af);
    o->f = NULL;
    o->text = NULL;
}

/* Writes the text out and gives the file its name; 0 or -1 with the error recorded. */
static int out_commit(out_text *o, const char *fn, const char *path) {
    bool bad = ferror(o->f);
    int closed = fclose(o->f);
    o->f = NULL;
    if (closed != 0 || bad) {
        nb__error("%s: writing '%s' failed: out of memory", fn, path);
        out_abort(o);
        return -1;
    }
    int rc = nb__afile_write(&o->af, o->text, o->len) == 0 && nb__afile_commit(&o->af) == 0 ? 0 : -1;
    free(o->text);
    o->text = NULL;
    nb__afile_abort(&o->af); /* nothing left after a commit or a failed write */
    return rc;
}

/* A "nice" tick spacing (1, 2 or 5 times a power of ten) for about `want` ticks over range. */
static double nice_step(double range, int want) {
    double raw = range / want;
    double e = pow(10, floor(log10(raw)));
    double f = raw / e;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * e;
}

/* Formats a tick value compactly: "0.001", "2.5", "1e+06", "-0" shown as "0". */
static void tick_label(char *buf, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-9) v = 0;
    snprintf(buf, n, "%.4g", v);
}

/* TensorBoard's smoothing: an exponential moving average debiased by 1 - w^k. */
static void smooth_series(const double *v, double *out, int64_t n, double w) {
    double last = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) {
            out[i] = v[i];
            continue;
        }
        last = last * w + (1 - w) * v[i];
        k++;
        out[i] = w == 0 ? v[i] : last / (1 - pow(w, (double)k));
    }
}

/* Draws one polyline per stretch of finite values. */
static void polyline(FILE *f, const int64_t *steps, const double *v, int64_t n, double x0, double xs, double xmin,
                     double y0, double ys, double ymin, const char *color, double width, double opacity) {
    bool open = false;
    for (int64_t i = 0; i < n; i++) {
        bool alone = isfinite(v[i]) && (i == 0 || !isfinite(v[i - 1])) && (i + 1 == n || !isfinite(v[i + 1]));
        if (alone) { /* a point with no neighbour to join: a dot */
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.2g\" fill=\"%s\" fill-opacity=\"%.2g\"/>\n",
                    x0 + ((double)steps[i] - xmin) * xs, y0 - (v[i] - ymin) * ys, width + 1.5, color, opacity);
            continue;
        }
        if (!isfinite(v[i])) {
            if (open) fputs("\"/>\n", f);
            open = false;
            continue;
        }
        if (!open) {
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.2g\" stroke-opacity=\"%.2g\" points=\"", color,
                    width, opacity);
            open = true;
        } else {
            fputc(' ', f);
        }
        fprintf(f, "%.1f,%.1f", x0 + ((double)steps[i] - xmin) * xs, y0 - (v[i] - ymin) * ys);
    }
    if (open) fputs("\"/>\n", f);
}

/* The tags to plot, in first-seen order, with a hash set over them (open addressing, linear
   probing) so that gathering the tags of many runs is linear in their number, not quadratic. */
typedef struct tag_list {
    const char **tags;
    int n, cap;
    int *slot;    /* nslot entries: 1 + an index into tags, 0 when empty */
    size_t nslot; /* a power of two, kept above twice n */
} tag_list;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The index of t in l, or -1. */
static int tag_find(const tag_list *l, const char *t) {
    if (!l->nslot) return -1;
    for (size_t i = (size_t)hash_str(t) & (l->nslot - 1);; i = (i + 1) & (l->nslot - 1)) {
        int k = l->slot[i] - 1;
        if (k < 0) return -1;
        if (strcmp(l->tags[k], t) == 0) return k;
    }
}

static void tag_list_free(tag_list *l) {
    free(l->tags);
    free(l->slot);
}

/* Adds t unless it is there; false when memory runs out. */
static bool tag_add(tag_list *l, const char *t) {
    if (tag_find(l, t) >= 0) return true;
    if (l->n == l->cap) {
        if (l->cap > INT32_MAX / 2) return false;
        int cap = l->cap ? l->cap * 2 : 16;
        const char **n = realloc(l->tags, sizeof *n * (size_t)cap);
        if (!n) return false;
        l->tags = n;
        l->cap = cap;
    }
    if ((size_t)(l->n + 1) * 2 > l->nslot) { /* grow and rehash */
        size_t nslot = l->nslot ? l->nslot * 2 : 64;
        int *slot = calloc(nslot, sizeof *slot);
        if (!slot) return false;
        for (int k = 0; k < l->n; k++) {
            size_t i = (size_t)hash_str(l->tags[k]) & (nslot - 1);
            while (slot[i]) i = (i + 1) & (nslot - 1);
            slot[i] = k + 1;
        }
        free(l->slot);
        l->slot = slot;
        l->nslot = nslot;
    }
    size_t i = (size_t)hash_str(t) & (l->nslot - 1);
    while (l->slot[i]) i = (i + 1) & (l->nslot - 1);
    l->tags[l->n] = t;
    l->slot[i] = ++l->n;
    return true;
}

int nb_plot_svg(const nb_scalar_log *const *runs, const char *const *names, int n_runs, const char *path, nb_plot_opts o) {
    const char *fn = "nb_plot_svg";
    if (!runs || n_runs <= 0 || !path) {
        nb__error("%s: %s", fn, !path ? "path is NULL" : "no runs to plot");
        return -1;
    }
    for (int r = 0; r < n_runs; r++)
        if (!runs[r]) {
            nb__error("%s: run %d is NULL", fn, r);
            return -1;
        }
    if (!(o.smooth >= 0 && o.smooth < 1)) {
        nb__error("%s: smoothing must be in [0, 1), got %g", fn, o.smooth);
        return -1;
    }
    int pw = o.panel_width > 0 ? o.panel_width : 480, ph = o.panel_height > 0 ? o.panel_height : 300;
    tag_list tl = { 0 };
    for (int r = 0; r < n_runs; r++)
        for (int i = 0; i < nb_scalar_log_num_tags(runs[r]); i++) {
            const char *t = nb_scalar_log_tag(runs[r], i);
            if (o.tag_filter && !strstr(t, o.tag_filter)) continue;
            if (!tag_add(&tl, t)) {
                tag_list_free(&tl);
                nb__error("%s: out of memory for %d tags", fn, tl.n);
                return -1;
            }
        }
    /* where each tag is in each run (-1: absent), found through the hash set: nb_scalar_log_find
       per panel and run would make the whole plot quadratic in the number of tags */
    int64_t cells;
    int *where = NULL;
    if (nb__mul_overflows(tl.n ? tl.n : 1, n_runs, &cells) || (uint64_t)cells > SIZE_MAX / sizeof *where ||
        !(where = malloc((size_t)cells * sizeof *where))) {
        tag_list_free(&tl);
        nb__error("%s: out of memory for %d tags of %d runs", fn, tl.n, n_runs);
        return -1;
    }
    for (int64_t c = 0; c < cells; c++) where[c] = -1;
    for (int r = 0; r < n_runs; r++)
        for (int i = 0; i < nb_scalar_log_num_tags(runs[r]); i++) {
            int ti = tag_find(&tl, nb_scalar_log_tag(runs[r], i));
            if (ti >= 0 && where[(int64_t)ti * n_runs + r] < 0) where[(int64_t)ti * n_runs + r] = i;
        }
    int cols = o.columns > 0 ? o.columns : 2;
    if (cols > tl.n) cols = tl.n > 0 ? tl.n : 1;
    int rows = tl.n / cols + (tl.n % cols ? 1 : 0);
    if (rows == 0) rows = 1;
    int64_t w64, h64;
    if (nb__mul_overflows(cols, pw, &w64) || w64 > INT32_MAX / 2 || nb__mul_overflows(rows, ph, &h64) ||
        h64 > INT32_MAX / 2 || n_runs > INT32_MAX / 64) {
        free(where), tag_list_free(&tl);
        nb__error("%s: %d panels of %dx%d pixels in %d columns make too large a picture", fn, tl.n, pw, ph, cols);
        return -1;
    }
    int W = cols * pw, title_h = o.title ? 30 : 0;
    /* legend entries flow left to right and wrap; a name's width is estimated at 6.5 px a character */
    int *lx = malloc(sizeof(int) * (size_t)n_runs), *ly = malloc(sizeof(int) * (size_t)n_runs);
    if (!lx || !ly) {
        free(lx), free(ly), free(where), tag_list_free(&tl);
        nb__error("%s: out of memory", fn);
        return -1;
    }
    int cx = 16, line = 0;
    for (int r = 0; r < n_runs; r++) {
        size_t len = names && names[r] ? strlen(names[r]) : 6;
        int w = 28 + (int)(6.5 * (double)(len < 100000 ? len : 100000)) + 24;
        if (cx > 16 && cx + w > W - 8) cx = 16, line++;
        lx[r] = cx, ly[r] = title_h + 16 + 18 * line;
        cx += w;
    }
    int legend_h = 22 + 18 * line;
    int H = title_h + legend_h + rows * ph;
    out_text ot;
    FILE *f = out_open(&ot, fn, path);
    if (!f) {
        free(where), tag_list_free(&tl), free(lx), free(ly);
        return -1;
    }
    double *sm = NULL;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" NB_PLOT_SVG_MARK "\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\">\n", W, H, W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    if (o.title) {
        fprintf(f, "<text x=\"%d\" y=\"21\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">", W / 2);
        xml_text(f, o.title);
        fputs("</text>\n", f);
    }
    /* legend: a short line and the run's name, four runs a row */
    fprintf(f, "<g class=\"legend\">\n");
    for (int r = 0; r < n_runs; r++) {
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>", lx[r], ly[r],
                lx[r] + 22, ly[r], palette[r % N_COLORS]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">", lx[r] + 28, ly[r] + 4);
        char def[32];
        snprintf(def, sizeof def, "run %d", r + 1);
        xml_text(f, names && names[r] ? names[r] : def);
        fputs("</text>\n", f);
    }
    fprintf(f, "</g>\n");
    free(lx), free(ly);
    if (tl.n == 0) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#666\">no scalars to plot</text>\n", W / 2,
                title_h + legend_h + ph / 2);
    }
    const double ml = 64, mr = 16, mt = 30, mb = 38;
    for (int ti = 0; ti < tl.n; ti++) {
        const char *tag = tl.tags[ti];
        double px = (ti % cols) * pw, py = title_h + legend_h + (ti / cols) * ph;
        double x0 = px + ml, x1 = px + pw - mr, y0 = py + ph - mb, y1 = py + mt;
        double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
        for (int r = 0; r < n_runs; r++) {
            int k = where[(int64_t)ti * n_runs + r];
            if (k < 0) continue;
            const int64_t *st;
            const double *v;
            int64_t n = nb_scalar_log_points(runs[r], k, &st, NULL, &v);
            for (int64_t i = 0; i < n; i++) {
                if (!isfinite(v[i])) continue;
                xmin = fmin(xmin, (double)st[i]), xmax = fmax(xmax, (double)st[i]);
                ymin = fmin(ymin, v[i]), ymax = fmax(ymax, v[i]);
            }
        }
        fprintf(f, "<g class=\"panel\">\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">",
                (x0 + x1) / 2, py + 18);
        xml_text(f, tag);
        fputs("</text>\n", f);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#999\"/>\n", x0, y1,
                x1 - x0, y0 - y1);
        if (!(xmin <= xmax)) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#666\">no finite values</text>\n</g>\n",
                    (x0 + x1) / 2, (y0 + y1) / 2);
            continue;
        }
        if (xmax == xmin) xmin -= 1, xmax += 1;
        if (ymax == ymin) {
            double d = fabs(ymin) > 0 ? fabs(ymin) * 0.1 : 1;
            ymin -= d, ymax += d;
        } else {
            double pad = (ymax - ymin) * 0.05;
            ymin -= pad, ymax += pad;
        }
        double xs = (x1 - x0) / (xmax - xmin), ys = (y0 - y1) / (ymax - ymin);
        /* ticks and grid lines */
        char lab[64];
        double xstep = nice_step(xmax - xmin, 6);
        if (xstep < 1) xstep = 1; /* steps are integers */
        for (double t = ceil(xmin / xstep) * xstep; t <= xmax + xstep * 1e-9; t += xstep) {
            double x = x0 + (t - xmin) * xs;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>", x, y1, x, y0);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>", x, y0, x, y0 + 4);
            tick_label(lab, sizeof lab, t, xstep);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, y0 + 16, lab);
        }
        double ystep = nice_step(ymax - ymin, 5);
        for (double t = ceil(ymin / ystep) * ystep; t <= ymax + ystep * 1e-9; t += ystep) {
            double y = y0 - (t - ymin) * ys;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>", x0, y, x1, y);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>", x0 - 4, y, x0, y);
            tick_label(lab, sizeof lab, t, ystep);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 7, y + 4, lab);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">step</text>\n", (x0 + x1) / 2, y0 + 31);
        fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\" fill=\"#444\">value</text>\n",
                px + 14, (y0 + y1) / 2);
        for (int r = 0; r < n_runs; r++) {
            int k = where[(int64_t)ti * n_runs + r];
            if (k < 0) continue;
            const int64_t *st;
            const double *v;
            int64_t n = nb_scalar_log_points(runs[r], k, &st, NULL, &v);
            const char *color = palette[r % N_COLORS];
            if (o.smooth > 0) {
                free(sm);
                sm = malloc(sizeof(double) * (size_t)(n ? n : 1));
                if (!sm) {
                    out_abort(&ot);
                    free(where);
                    tag_list_free(&tl);
                    nb__error("%s: out of memory", fn);
                    return -1;
                }
                smooth_series(v, sm, n, o.smooth);
                polyline(f, st, v, n, x0, xs, xmin, y0, ys, ymin, color, 1, 0.25);
                polyline(f, st, sm, n, x0, xs, xmin, y0, ys, ymin, color, 1.8, 1);
            } else {
                polyline(f, st, v, n, x0, xs, xmin, y0, ys, ymin, color, 1.6, 1);
            }
        }
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    free(sm);
    free(where);
    tag_list_free(&tl);
    return out_commit(&ot, fn, path);
}

/* Writes a CSV field, quoted when it holds a comma, quote or line break. */
static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int nb_plot_csv(const nb_scalar_log *const *runs, const char *const *names, int n_runs, const char *path) {
    const char *fn = "nb_plot_csv";
    if (!runs || n_runs <= 0 || !path) {
        nb__error("%s: %s", fn, !path ? "path is NULL" : "no runs to export");
        return -1;
    }
    out_text ot;
    FILE *f = out_open(&ot, fn, path);
    if (!f) return -1;
    fputs(NB_PLOT_CSV_HEADER "\n", f);
    for (int r = 0; r < n_runs; r++) {
        char def[32];
        snprintf(def, sizeof def, "run %d", r + 1);
        const char *name = names && names[r] ? names[r] : def;
        for (int i = 0; i < nb_scalar_log_num_tags(runs[r]); i++) {
            const int64_t *st;
            const double *wt, *v;
            int64_t n = nb_scalar_log_points(runs[r], i, &st, &wt, &v);
            for (int64_t k = 0; k < n; k++) {
                csv_field(f, name);
                fputc(',', f);
                csv_field(f, nb_scalar_log_tag(runs[r], i));
                fprintf(f, ",%lld,%.6f,%.9g\n", (long long)st[k], wt[k], v[k]);
            }
        }
    }
    return out_commit(&ot, fn, path);
}

const char *nb_sparkline(const double *v, int64_t n, int width, char *buf, size_t size) {
    static const char *const blocks[] = { "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588" };
    if (!buf || size == 0) return buf;
    buf[0] = 0;
    if (!v || n <= 0 || width <= 0) return buf;
    int64_t first = n > width ? n - width : 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = first; i < n; i++)
        if (isfinite(v[i])) lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    size_t len = 0;
    for (int64_t i = first; i < n; i++) {
        const char *c = " ";
        if (isfinite(v[i])) {
            int level = hi > lo ? (int)((v[i] - lo) / (hi - lo) * 7.999) : 3;
            c = blocks[level < 0 ? 0 : level > 7 ? 7 : level];
        }
        size_t k = strlen(c);
        if (len + k + 1 > size) break;
        memcpy(buf + len, c, k + 1);
        len += k;
    }
    return buf;
}
