/* The nabla command's guard on output paths: no subcommand writes over a file it reads (compared
   by device and inode, so a second name, a link or a path through another folder is caught). */
#ifndef NABLA_CLI_PATHS_H
#define NABLA_CLI_PATHS_H

#include <stdbool.h>

/* What a subcommand reads: a file, or a folder. Of a folder, every file below it is read, or,
   with match set, only the files directly in it whose name contains match (a run folder's
   event files). */
typedef struct cli_input {
    const char *opt;   /* how the command line named it ("--input", "MODEL"), for the message */
    const char *path;  /* NULL: not given (skipped) */
    const char *match; /* a folder's files that are read: NULL for all of them */
} cli_input;

/* Whether writing path would replace one of the n inputs (path, or a file it names, is an input
   file, an input folder, or a file read from an input folder). When it would, prints
   "nabla CMD: OPT PATH is ..." naming the input to stderr and returns true; a path that does
   not exist yet replaces nothing. */
bool cli_output_replaces_input(const char *cmd, const char *opt, const char *path, const cli_input *in, int n);

/* Whether a and b name one file or folder (the same device and inode; false when either is not
   there). */
bool cli_same_file(const char *a, const char *b);

struct train_opts;
/* Whether `nabla train` (a built-in classifier) would write over one of its inputs: --out, or,
   with --logdir, the model, checkpoint and curves it writes there, against --data, --labels,
   --test, --test-labels, --resume and a --model config file. Says why on stderr. */
bool cli_train_replaces_input(const struct train_opts *o);

/* Whether the file at path was written by nabla's plotter: an SVG carrying the mark of
   nb_plot_svg, or a CSV with nb_plot_csv's header. False when it cannot be read. */
bool cli_is_nabla_plot(const char *path);

#endif
