/* nabla-plot: draws the scalar curves of one or more runs' event files as an SVG, exports them as
   CSV, or shows the last values with a sparkline in the terminal (once, or live with --watch). */
#include "cli_paths.h"
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The name the user typed: built into the nabla command this is its plot subcommand. */
#ifdef NABLA_PLOT_NO_MAIN
#define PLOT_NAME "nabla plot"
#else
#define PLOT_NAME "nabla-plot"
#endif

static void usage(FILE *f) {
    fputs("usage: " PLOT_NAME " LOGDIR|EVENTFILE... [-o curves.svg] [--smooth 0.6] [--csv out.csv]\n"
          "                  [--tag TEXT] [--title TEXT] [--text] [--watch SECONDS] [--overwrite]\n"
          "  -o FILE        write the curves of every scalar tag, one panel per tag, as SVG\n"
          "  --smooth W     TensorBoard's smoothing weight in [0, 1) (default 0: none)\n"
          "  --csv FILE     write every scalar as run,tag,step,wall_time,value\n"
          "  --tag TEXT     only tags containing TEXT\n"
          "  --title TEXT   a title above the panels\n"
          "  --text         print each tag's last value and a sparkline\n"
          "  --watch S      like --text, re-read every S seconds until interrupted\n"
          "  --overwrite    replace an existing -o or --csv file that nabla did not draw (its own\n"
          "                 SVG and CSV files are replaced without it; an input never is)\n",
          f);
}

/* Prints the last value and a sparkline of each tag of each run. */
static void print_text(nb_scalar_log **logs, char **names, int n, const char *filter) {
    for (int r = 0; r < n; r++) {
        printf("%s\n", names[r]);
        for (int i = 0; i < nb_scalar_log_num_tags(logs[r]); i++) {
            const char *tag = nb_scalar_log_tag(logs[r], i);
            if (filter && !strstr(tag, filter)) continue;
            const int64_t *st;
            const double *v;
            int64_t k = nb_scalar_log_points(logs[r], i, &st, NULL, &v);
            if (k <= 0) continue;
            char spark[256];
            printf("  %-28s step %-8lld %-12.6g %s\n", tag, (long long)st[k - 1], v[k - 1], nb_sparkline(v, k, 40, spark, sizeof spark));
        }
    }
}

static int read_all(nb_scalar_log **logs, char **names, int n) {
    for (int r = 0; r < n; r++) {
        logs[r] = nb_scalar_log_read(names[r]);
        if (!logs[r]) {
            fprintf(stderr, PLOT_NAME ": %s\n", nb_error());
            return -1;
        }
        if (nb_scalar_log_note(logs[r])) fprintf(stderr, PLOT_NAME ": stopped early: %s\n", nb_scalar_log_note(logs[r]));
    }
    return 0;
}

/* Whether writing path (given as opt) is refused: it is one of the runs' files, or an existing
   file that nabla did not draw and overwrite was not given. Says why on stderr. */
static bool refuse_output(const char *opt, const char *path, char **runs, int n, bool overwrite) {
    cli_input *in = calloc((size_t)n, sizeof *in);
    if (!in) return true;
    for (int r = 0; r < n; r++) {
        struct stat st;
        bool folder = stat(runs[r], &st) == 0 && S_ISDIR(st.st_mode);
        in[r] = (cli_input){ "run", runs[r], folder ? "tfevents" : NULL }; /* a folder's event files are read */
    }
    bool refused = cli_output_replaces_input("plot", opt, path, in, n);
    free(in);
    struct stat st;
    if (!refused && !overwrite && stat(path, &st) == 0 && !cli_is_nabla_plot(path)) {
        fprintf(stderr, "nabla-plot: %s %s exists and is not a file nabla plot wrote; give --overwrite to replace it\n", opt,
                path);
        refused = true;
    }
    return refused;
}

/* The nabla-plot program (also `nabla plot`): reads runs, writes SVG/CSV or a terminal view. */
int nabla_plot_main(int argc, char **argv);
int nabla_plot_main(int argc, char **argv) {
    const char *svg = NULL, *csv = NULL, *tag = NULL, *title = NULL;
    double smooth = 0, watch = 0;
    bool text = false, overwrite = false;
    char **runs = calloc((size_t)argc, sizeof *runs);
    int n = 0;
    if (!runs) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(runs);
            return 0;
        } else if (!strcmp(a, "-o") && has_next) svg = argv[++i];
        else if (!strcmp(a, "--csv") && has_next) csv = argv[++i];
        else if (!strcmp(a, "--tag") && has_next) tag = argv[++i];
        else if (!strcmp(a, "--title") && has_next) title = argv[++i];
        else if (!strcmp(a, "--smooth") && has_next) smooth = atof(argv[++i]);
        else if (!strcmp(a, "--watch") && has_next) watch = atof(argv[++i]), text = true;
        else if (!strcmp(a, "--text")) text = true;
        else if (!strcmp(a, "--overwrite")) overwrite = true;
        else if (a[0] == '-' && a[1]) {
            bool valued = !strcmp(a, "-o") || !strcmp(a, "--csv") || !strcmp(a, "--tag") || !strcmp(a, "--title") ||
                          !strcmp(a, "--smooth") || !strcmp(a, "--watch");
            if (valued) fprintf(stderr, PLOT_NAME ": %s needs a value\n", a);
            else fprintf(stderr, PLOT_NAME ": unknown option %s (" PLOT_NAME " --help lists the options)\n", a);
            free(runs);
            return 2;
        } else runs[n++] = argv[i];
    }
    if (n == 0 || (!svg && !csv && !text)) {
        /* one line saying what is missing, then the usage */
        if (n == 0) fprintf(stderr, "nabla plot: name the run folders (or event files) to read\n");
        else fprintf(stderr, "nabla plot: say what to make of %s: -o FILE.svg for the curves, --csv FILE.csv for the "
                             "values or --text for the last values in the terminal\n", runs[0]);
        usage(stderr);
        free(runs);
        return 2;
    }
    if (!(smooth >= 0 && smooth < 1)) {
        fprintf(stderr, PLOT_NAME ": --smooth must be in [0, 1), got %g\n", smooth);
        free(runs);
        return 2;
    }
    if (svg && csv && (!strcmp(svg, csv) || cli_same_file(svg, csv))) {
        fprintf(stderr, "nabla-plot: -o %s and --csv %s are the same file\n", svg, csv);
        free(runs);
        return 2;
    }
    if ((svg && refuse_output("-o", svg, runs, n, overwrite)) || (csv && refuse_output("--csv", csv, runs, n, overwrite))) {
        free(runs);
        return 2;
    }
    /* legend names: each run's last path component, or the whole path when two would clash */
    char **labels = calloc((size_t)n, sizeof *labels);
    char *copies = NULL;
    if (labels) {
        size_t total = 0;
        for (int r = 0; r < n; r++) total += strlen(runs[r]) + 1;
        copies = malloc(total ? total : 1);
    }
    if (!labels || !copies) {
        free(labels), free(copies), free(runs);
        return 1;
    }
    char *c = copies;
    for (int r = 0; r < n; r++) {
        strcpy(c, runs[r]);
        size_t len = strlen(c);
        while (len > 1 && c[len - 1] == '/') c[--len] = 0;
        char *slash = strrchr(c, '/');
        labels[r] = slash && slash[1] ? slash + 1 : c;
        c += strlen(runs[r]) + 1;
    }
    for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++)
            if (q != r && !strcmp(labels[r], labels[q])) labels[r] = runs[r];
    nb_scalar_log **logs = calloc((size_t)n, sizeof *logs);
    int rc = logs && read_all(logs, runs, n) == 0 ? 0 : 1;
    if (rc == 0 && svg) {
        if (nb_plot_svg((const nb_scalar_log *const *)logs, (const char *const *)labels, n, svg,
                        (nb_plot_opts){ .smooth = smooth, .title = title, .tag_filter = tag }) != 0) {
            fprintf(stderr, PLOT_NAME ": %s\n", nb_error());
            rc = 1;
        }
    }
    if (rc == 0 && csv && nb_plot_csv((const nb_scalar_log *const *)logs, (const char *const *)labels, n, csv) != 0) {
        fprintf(stderr, PLOT_NAME ": %s\n", nb_error());
        rc = 1;
    }
    if (rc == 0 && text) {
        for (;;) {
            if (watch > 0) printf("\033[H\033[2J");
            print_text(logs, labels, n, tag);
            fflush(stdout);
            if (!(watch > 0)) break;
            struct timespec ts = { (time_t)watch, (long)((watch - (double)(time_t)watch) * 1e9) };
            nanosleep(&ts, NULL);
            for (int r = 0; r < n; r++) nb_scalar_log_free(logs[r]), logs[r] = NULL;
            if (read_all(logs, runs, n) != 0) {
                rc = 1;
                break;
            }
        }
    }
    if (logs)
        for (int r = 0; r < n; r++) nb_scalar_log_free(logs[r]);
    free(logs);
    free(labels);
    free(copies);
    free(runs);
    return rc;
}

#ifndef NABLA_PLOT_NO_MAIN
int main(int argc, char **argv) { return nabla_plot_main(argc, argv); }
#endif
