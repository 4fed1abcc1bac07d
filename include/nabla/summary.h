/* nabla summary: TensorBoard event files and curve plots (the run-health helpers that log to
   them are nabla/health.h). */
#ifndef NABLA_SUMMARY_H
#define NABLA_SUMMARY_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- event writer: events.out.tfevents.* files that TensorBoard reads ---- */

/* Writes one event file in a log folder. Thread-safe: several threads may log to one writer. */
typedef struct nb_summary_writer nb_summary_writer;

/* Writer options; zero fields take the defaults: flush every 2 s (flush_secs < 0: only when the
   buffer fills, on nb_summary_flush and on close), a 1 MiB buffer, no file-name suffix. */
typedef struct nb_summary_opts {
    double flush_secs;
    size_t max_buffer_bytes;
    const char *filename_suffix;
} nb_summary_opts;

/* Opens a writer on a new event file in logdir (created, with its parents, when missing). */
NB_API nb_summary_writer *nb_summary_open(const char *logdir);
/* nb_summary_open with options. */
NB_API nb_summary_writer *nb_summary_open_opts(const char *logdir, nb_summary_opts opts);
/* The path of the writer's event file (valid until close). */
NB_API const char *nb_summary_path(const nb_summary_writer *w);
/* Logs a scalar under tag at step (kept as a 32-bit float, TensorBoard's simple_value); buffered. 0 or <0. */
NB_API int nb_summary_scalar(nb_summary_writer *w, const char *tag, double value, int64_t step);
/* Marks a restart (a resumed run) at step: a SessionLog START event, on which TensorBoard, and
   nb_scalar_log_read, drop the points already read at that step or later (an interrupted run's
   last ones), so a resumed run's points do not mix with them. 0 or <0. */
NB_API int nb_summary_session_start(nb_summary_writer *w, int64_t step);
/* Logs a histogram of t's elements (any dtype, any device) with TensorBoard's default
   exponential buckets; NaN/Inf elements are left out of every field. 0 or <0. */
NB_API int nb_summary_histogram(nb_summary_writer *w, const char *tag, nb_tensor *t, int64_t step);
/* Logs a histogram of n doubles, as nb_summary_histogram. */
NB_API int nb_summary_histogram_values(nb_summary_writer *w, const char *tag, const double *values, int64_t n, int64_t step);
/* Logs a text (Markdown) entry as TensorBoard's text plugin expects. 0 or <0. */
NB_API int nb_summary_text(nb_summary_writer *w, const char *tag, const char *text, int64_t step);

/* A hyper-parameter: a number, unless text is non-NULL. */
typedef struct nb_hparam { const char *name; double number; const char *text; } nb_hparam;
/* Logs a run's hyper-parameters and the metric tags to compare runs by (TensorBoard's HParams
   plugin: experiment, session start and end). 0 or <0. */
NB_API int nb_summary_hparams(nb_summary_writer *w, const nb_hparam *hparams, int n, const char *const *metric_tags, int n_metrics);
/* Writes the buffered events to the file now. 0 or <0. */
NB_API int nb_summary_flush(nb_summary_writer *w);
/* Flushes, closes the file and frees the writer (NULL is ignored). 0, or <0 when any write failed
   (a failed write is sticky: every later call on the writer fails too). */
NB_API int nb_summary_close(nb_summary_writer *w);

/* ---- reading event files and plotting curves ---- */

/* The scalars of one run: every tag with its (step, wall time, value) points, read from event
   files. */
typedef struct nb_scalar_log nb_scalar_log;

/* Reads the scalars of one event file, or of every event file in a folder (in name order).
   Records are checked by CRC; reading stops at a truncated or corrupt record and the log keeps
   what came before it (see nb_scalar_log_note). NULL on error (e.g. a missing path). */
NB_API nb_scalar_log *nb_scalar_log_read(const char *path);
/* Number of tags (0 for NULL). */
NB_API int nb_scalar_log_num_tags(const nb_scalar_log *log);
/* Name of tag i (borrowed until the log is freed), or NULL when i is out of range. */
NB_API const char *nb_scalar_log_tag(const nb_scalar_log *log, int i);
/* Index of a tag by name, or -1. */
NB_API int nb_scalar_log_find(const nb_scalar_log *log, const char *tag);
/* Points of tag i in the order read: sets the step, wall-time and value arrays (borrowed until the
   log is freed); returns the count, or -1 with an error when i is out of range. */
NB_API int64_t nb_scalar_log_points(const nb_scalar_log *log, int i, const int64_t **steps, const double **wall_times, const double **values);
/* Whole records read across the files. */
NB_API int64_t nb_scalar_log_records(const nb_scalar_log *log);
/* Where and why reading stopped early ("file: truncated record at byte 1234 of 1300 ..."), or
   NULL when every file was read to its end. */
NB_API const char *nb_scalar_log_note(const nb_scalar_log *log);
/* Frees the log; NULL is ignored. */
NB_API void nb_scalar_log_free(nb_scalar_log *log);

/* Plot options; zero fields take the defaults: 480 x 300 px per panel, 2 columns, no smoothing.
   smooth is TensorBoard's debiased exponential moving average weight in [0, 1). */
typedef struct nb_plot_opts {
    double smooth;
    int panel_width, panel_height, columns;
    const char *title;
    const char *tag_filter; /* only tags containing this text */
} nb_plot_opts;
/* The comment nb_plot_svg writes on the line after the XML declaration: what tells a tool that a
   file is a picture nabla drew (one it may draw again), not someone's own file. */
#define NB_PLOT_SVG_MARK "<!-- nabla: curves drawn by nb_plot_svg -->"
/* The header line of nb_plot_csv's files. */
#define NB_PLOT_CSV_HEADER "run,tag,step,wall_time,value"
/* Draws one panel per tag, overlaying the runs (named by names[i]), with axes, ticks, labels and
   a legend, into an SVG file (replaced atomically: a temporary file renamed over it); names may
   be NULL ("run 1", ...). 0 or <0. */
NB_API int nb_plot_svg(const nb_scalar_log *const *runs, const char *const *names, int n_runs, const char *svg_path, nb_plot_opts opts);
/* Writes every scalar as CSV rows "run,tag,step,wall_time,value" (with that header), replacing
   csv_path atomically; names may be NULL. 0 or <0. */
NB_API int nb_plot_csv(const nb_scalar_log *const *runs, const char *const *names, int n_runs, const char *csv_path);
/* Writes a sparkline of n values in Unicode blocks ("▁▂▃▅▇"), at most width characters (the last
   values), into buf; returns buf. */
NB_API const char *nb_sparkline(const double *values, int64_t n, int width, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
