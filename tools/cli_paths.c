/* The nabla command's guard on output paths: an output that names an input (by another name, a
   link, or as a file inside an input folder) is refused before anything is written. */
#include "cli_paths.h"
#include "train_args.h"
#include <nabla.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* How far below the folder `dir` the existing file at `real` (a canonical path) lies: 1 for a
   file directly in it, 0 when it is not below it. Compared by device and inode, each parent of
   the path in turn, so a folder reached through a link or a bind mount is still found. */
static int depth_below(const char *real, const struct stat *dir) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", real);
    for (int depth = 1;; depth++) {
        char *slash = strrchr(buf, '/');
        if (!slash) return 0;
        if (slash == buf) slash[1] = 0; /* the root */
        else *slash = 0;
        struct stat st;
        if (stat(buf, &st) == 0 && st.st_dev == dir->st_dev && st.st_ino == dir->st_ino) return depth;
        if (!strcmp(buf, "/")) return 0;
    }
}

bool cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool cli_output_replaces_input(const char *cmd, const char *opt, const char *path, const cli_input *in, int n) {
    struct stat os;
    if (!path || stat(path, &os) != 0) return false; /* nothing there yet: nothing to replace */
    char real[PATH_MAX];
    bool have_real = realpath(path, real) != NULL;
    const char *base = strrchr(have_real ? real : path, '/');
    base = base ? base + 1 : path;
    for (int i = 0; i < n; i++) {
        struct stat is;
        if (!in[i].path || stat(in[i].path, &is) != 0) continue;
        bool folder = S_ISDIR(is.st_mode);
        if (cli_same_file(path, in[i].path)) {
            fprintf(stderr, "nabla %s: %s %s is the input %s%s %s; writing it would destroy what is being read (give "
                            "another path)\n", cmd, opt, path, folder ? "folder " : "", in[i].opt, in[i].path);
            return true;
        }
        if (!folder || !have_real) continue;
        int depth = depth_below(real, &is);
        if (depth == 0 || (in[i].match && (depth != 1 || !strstr(base, in[i].match)))) continue;
        fprintf(stderr, "nabla %s: %s %s is a file of the input folder %s %s, which this command reads; writing it would "
                        "destroy %s (give a path outside that folder)\n", cmd, opt, path, in[i].opt, in[i].path,
                in[i].match ? "the run's events" : "the input");
        return true;
    }
    return false;
}

bool cli_train_replaces_input(const train_opts *o) {
    size_t len = strlen(o->model);
    bool config = len > 5 && !strcmp(o->model + len - 5, ".json");
    const cli_input in[] = { { "--data", o->data, NULL },       { "--labels", o->labels, NULL },
                             { "--test", o->test, NULL },       { "--test-labels", o->test_labels, NULL },
                             { "--model", config ? o->model : NULL, NULL }, { "--resume", o->resume, NULL } };
    int n = (int)(sizeof in / sizeof *in);
    if (cli_output_replaces_input("train", "--out", o->out, in, n)) return true;
    if (!o->logdir) return false; /* a new run folder of its own */
    char path[PATH_MAX];
    static const char *const files[] = { "model.safetensors", "checkpoint.safetensors", "curves.svg" };
    for (int i = o->out ? 1 : 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", o->logdir, files[i]);
        /* the checkpoint is rewritten after each epoch: --resume reads it before the first */
        if (cli_output_replaces_input("train", "--logdir", path, in, i == 1 ? n - 1 : n)) return true;
    }
    return false;
}

bool cli_is_nabla_plot(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char head[512];
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = 0;
    size_t csv = strlen(NB_PLOT_CSV_HEADER);
    if (n > csv && !memcmp(head, NB_PLOT_CSV_HEADER, csv) && head[csv] == '\n') return true;
    /* the mark is on the line after the XML declaration */
    const char *nl = strchr(head, '\n');
    return !strncmp(head, "<?xml", 5) && nl && !strncmp(nl + 1, NB_PLOT_SVG_MARK, strlen(NB_PLOT_SVG_MARK));
}
