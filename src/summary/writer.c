/* The TensorBoard event writer: event-file naming, buffered TFRecord output flushed by a timer
   thread, and the Event messages for scalars, histograms, text and hyper-parameters. */
#include "../core/core_impl.h"
#include "nabla.h"
#include "pb.h"
#include "summary_impl.h"
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct nb_summary_writer {
    char *path;
    int fd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool has_thread, stop;
    nb_pb_buf out;   /* framed records waiting for the file */
    nb_pb_buf msg;   /* scratch for the event being encoded */
    size_t max_buffer;
    double flush_secs;
    int io_errno;    /* first failed write (sticky); reported by the next call */
};

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Writes the buffered records to the file; called with mu held. */
static void write_out(nb_summary_writer *w) {
    size_t done = 0;
    while (done < w->out.len && !w->io_errno) {
        ssize_t k = write(w->fd, w->out.data + done, w->out.len - done);
        if (k < 0) {
            if (errno == EINTR) continue;
            w->io_errno = errno;
        } else {
            done += (size_t)k;
        }
    }
    w->out.len = 0;
}

static void *flush_thread(void *arg) {
    nb_summary_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double secs = floor(w->flush_secs);
        ts.tv_sec += (time_t)secs;
        ts.tv_nsec += (long)((w->flush_secs - secs) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        while (!w->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (w->out.len) write_out(w);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Checks the writer and its sticky write error; records an error naming fn. */
static bool usable(const nb_summary_writer *w, const char *fn) {
    if (!w) {
        if (!nb__has_error()) nb__error("%s: writer is NULL", fn);
        return false;
    }
    if (w->io_errno) {
        nb__error("%s: writing '%s' failed: %s", fn, w->path, strerror(w->io_errno));
        return false;
    }
    return true;
}

/* Checks only that there is a writer (for use before taking its lock). */
static bool not_null(const nb_summary_writer *w, const char *fn) {
    if (!w && !nb__has_error()) nb__error("%s: writer is NULL", fn);
    return w != NULL;
}

/* Starts an Event in w->msg (mu held). */
static void event_begin(nb_summary_writer *w, int64_t step) {
    w->msg.len = 0;
    w->msg.failed = false;
    nb__pb_double(&w->msg, 1, wall_now());
    nb__pb_int(&w->msg, 2, step);
}

/* Frames w->msg into the output buffer, writing out when it is full (mu held). */
static int event_end(nb_summary_writer *w, const char *fn) {
    if (w->msg.failed) {
        nb__error("%s: out of memory encoding an event", fn);
        return -1;
    }
    nb__tfrecord(&w->out, w->msg.data, w->msg.len);
    if (w->out.failed) {
        w->out.failed = false;
        w->out.len = 0;
        nb__error("%s: out of memory buffering an event", fn);
        return -1;
    }
    if (w->out.len >= w->max_buffer) write_out(w);
    if (w->io_errno) {
        nb__error("%s: writing '%s' failed: %s", fn, w->path, strerror(w->io_errno));
        return -1;
    }
    return 0;
}

/* mkdir -p; 0 or an errno. */
static int make_dirs(const char *dir) {
    size_t n = strlen(dir);
    char *p = malloc(n + 1);
    if (!p) return ENOMEM;
    memcpy(p, dir, n + 1);
    int err = 0;
    for (size_t i = 1; i <= n && !err; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) err = errno;
        p[i] = c;
    }
    free(p);
    if (err) return err;
    struct stat st;
    if (stat(dir, &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

static atomic_int writer_counter;

nb_summary_writer *nb_summary_open(const char *logdir) { return nb_summary_open_opts(logdir, (nb_summary_opts){ 0 }); }

nb_summary_writer *nb_summary_open_opts(const char *logdir, nb_summary_opts opts) {
    if (!logdir || !*logdir) {
        nb__error("nb_summary_open: logdir is %s", logdir ? "empty" : "NULL");
        return NULL;
    }
    int err = make_dirs(logdir);
    if (err) {
        nb__error("nb_summary_open: cannot create log folder '%s': %s", logdir, strerror(err));
        return NULL;
    }
    nb_summary_writer *w = calloc(1, sizeof *w);
    if (!w) {
        nb__error("nb_summary_open: out of memory");
        return NULL;
    }
    w->fd = -1;
    w->flush_secs = opts.flush_secs == 0 ? 2.0 : opts.flush_secs;
    w->max_buffer = opts.max_buffer_bytes ? opts.max_buffer_bytes : (size_t)1 << 20;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) strcpy(host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    const char *suffix = opts.filename_suffix ? opts.filename_suffix : "";
    size_t cap = strlen(logdir) + strlen(host) + strlen(suffix) + 96;
    w->path = malloc(cap);
    if (!w->path) {
        free(w);
        nb__error("nb_summary_open: out of memory");
        return NULL;
    }
    /* TensorBoard's name: events.out.tfevents.<10-digit seconds>.<host>, then pid and a per-process
       counter so that writers opened in the same second never share a file. */
    for (int tries = 0; tries < 1000 && w->fd < 0; tries++) {
        snprintf(w->path, cap, "%s/events.out.tfevents.%010lld.%s.%d.%d%s", logdir, (long long)time(NULL), host,
                 (int)getpid(), atomic_fetch_add(&writer_counter, 1), suffix);
        w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (w->fd < 0 && errno != EEXIST) break;
    }
    if (w->fd < 0) {
        nb__error("nb_summary_open: cannot create an event file in '%s': %s", logdir, strerror(errno));
        free(w->path);
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);

    /* The first event names the format version, written at once so the file is valid early. */
    pthread_mutex_lock(&w->mu);
    w->msg.len = 0;
    nb__pb_double(&w->msg, 1, wall_now());
    static const char version[] = "brain.Event:2";
    nb__pb_string(&w->msg, 3, version, sizeof version - 1);
    int rc = event_end(w, "nb_summary_open");
    if (rc == 0) write_out(w);
    pthread_mutex_unlock(&w->mu);
    if (rc != 0 || w->io_errno) {
        if (w->io_errno) nb__error("nb_summary_open: writing '%s' failed: %s", w->path, strerror(w->io_errno));
        w->io_errno = 0;
        nb_summary_close(w);
        return NULL;
    }
    if (w->flush_secs > 0) {
        if (pthread_create(&w->thread, NULL, flush_thread, w) != 0) {
            nb__error("nb_summary_open: cannot start the flush thread");
            nb_summary_close(w);
            return NULL;
        }
        w->has_thread = true;
    }
    return w;
}

const char *nb_summary_path(const nb_summary_writer *w) { return w ? w->path : NULL; }

int nb_summary_scalar(nb_summary_writer *w, const char *tag, double value, int64_t step) {
    if (!tag) {
        nb__error("nb_summary_scalar: tag is NULL");
        return -1;
    }
    if (!not_null(w, "nb_summary_scalar")) return -1;
    pthread_mutex_lock(&w->mu);
    int rc = -1;
    if (usable(w, "nb_summary_scalar")) {
        event_begin(w, step);
        size_t s = nb__pb_begin(&w->msg, 5);       /* Event.summary */
        size_t v = nb__pb_begin(&w->msg, 1);       /* Summary.value */
        nb__pb_string(&w->msg, 1, tag, strlen(tag)); /* Value.tag */
        nb__pb_float(&w->msg, 2, (float)value);   /* Value.simple_value */
        nb__pb_end(&w->msg, v);
        nb__pb_end(&w->msg, s);
        rc = event_end(w, "nb_summary_scalar");
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int nb_summary_session_start(nb_summary_writer *w, int64_t step) {
    if (!not_null(w, "nb_summary_session_start")) return -1;
    pthread_mutex_lock(&w->mu);
    int rc = -1;
    if (usable(w, "nb_summary_session_start")) {
        event_begin(w, step);
        size_t l = nb__pb_begin(&w->msg, 7); /* Event.session_log */
        nb__pb_int(&w->msg, 1, 1);           /* SessionLog.status = START */
        nb__pb_end(&w->msg, l);
        rc = event_end(w, "nb_summary_session_start");
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* ---- histograms ---- */

static double *bucket_limits;
static int n_bucket_limits;
static pthread_once_t buckets_once = PTHREAD_ONCE_INIT;

/* TensorFlow's default histogram buckets (tensorflow/core/lib/histogram/histogram.cc, also
   TensorBoard's and PyTorch's "tensorflow" bins): +-1e-12 growing by 1.1 up to 1e20, +-DBL_MAX at
   the ends and 0 in the middle. Bucket i counts values in [limit[i-1], limit[i]). */
static void buckets_init(void) {
    int k = 0;
    for (double v = 1e-12; v < 1e20; v *= 1.1) k++;
    double *l = malloc(sizeof(double) * (size_t)(2 * k + 3));
    if (!l) return;
    int n = 0;
    l[n++] = -DBL_MAX;
    double *pos = l + k + 2; /* positions of the positive limits */
    int j = 0;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos[j++] = v;
    for (int i = k - 1; i >= 0; i--) l[n++] = -pos[i];
    l[n++] = 0.0;
    n += k;
    l[n++] = DBL_MAX;
    bucket_limits = l;
    n_bucket_limits = n;
}

const double *nb__summary_bucket_limits(int *n) {
    pthread_once(&buckets_once, buckets_init);
    *n = n_bucket_limits;
    return bucket_limits;
}

/* Index of the first limit greater than (finite) v: a guess from log_1.1(|v| / 1e-12), then
   corrected by stepping along the true limits, so the answer is exact whatever the rounding. */
static int bucket_of(const double *l, int n, double v) {
    int k = (n - 3) / 2; /* positive limits l[k+2 .. 2k+1]; negative l[1 .. k]; 0 at l[k+1] */
    double a = fabs(v);
    int idx;
    if (a < 1e-12) {
        idx = v >= 0 ? k + 2 : k + 1;
    } else {
        double j = floor(log(a * 1e12) * 10.492058687257577); /* 1 / ln(1.1) */
        if (j > k) j = k;
        idx = v >= 0 ? k + 2 + (int)j + 1 : k - (int)j;
        if (idx < 0) idx = 0;
        if (idx > n - 1) idx = n - 1;
    }
    while (idx > 0 && l[idx - 1] > v) idx--;
    while (idx < n - 1 && !(l[idx] > v)) idx++;
    return idx;
}

int nb__summary_histo_build(const double *values, int64_t n, nb_histo *h) {
    memset(h, 0, sizeof *h);
    int nl;
    const double *l = nb__summary_bucket_limits(&nl);
    if (!l) return -1;
    double *counts = calloc((size_t)nl, sizeof(double));
    h->limit = malloc(sizeof(double) * (size_t)nl);
    h->count = malloc(sizeof(double) * (size_t)nl);
    if (!counts || !h->limit || !h->count) {
        free(counts);
        nb__summary_histo_free(h);
        return -1;
    }
    double mn = 0, mx = 0, sum = 0, sq = 0, num = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = values[i];
        if (!isfinite(v)) continue;
        if (num == 0 || v < mn) mn = v;
        if (num == 0 || v > mx) mx = v;
        num += 1;
        sum += v;
        sq += v * v;
        counts[bucket_of(l, nl, v)] += 1;
    }
    h->min = mn, h->max = mx, h->num = num, h->sum = sum, h->sum_squares = sq;
    /* As TensorFlow's Histogram::EncodeToProto: a run of empty buckets becomes one entry. */
    int nb = 0;
    for (int i = 0; i < nl;) {
        double end = l[i], c = counts[i];
        i++;
        if (c <= 0) {
            while (i < nl && counts[i] <= 0) {
                end = l[i];
                c = counts[i];
                i++;
            }
        }
        h->limit[nb] = end;
        h->count[nb] = c;
        nb++;
    }
    h->n = nb;
    free(counts);
    return 0;
}

void nb__summary_histo_free(nb_histo *h) {
    free(h->limit);
    free(h->count);
    h->limit = h->count = NULL;
}

double *nb__summary_values_of(nb_tensor *t, int64_t *n, const char *fn) {
    *n = 0;
    if (!t) {
        if (!nb__has_error()) nb__error("%s: tensor is NULL", fn);
        return NULL;
    }
    int64_t cnt = nb_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(cnt ? cnt : 1));
    if (!v) {
        nb__error("%s: out of memory for %lld values", fn, (long long)cnt);
        return NULL;
    }
    bool prev = nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    nb_tensor *c = t;
    if (nb_device_of(c).type != NB_CPU) c = nb_to(c, (nb_device){ NB_CPU, 0 });
    if (c && nb_dtype_of(c) != NB_F64) c = nb_cast(c, NB_F64);
    int rc = c ? nb_copy_to(c, v, sizeof(double) * (size_t)cnt) : -1;
    nb_scope_end(s);
    nb_set_grad_enabled(prev);
    if (rc != 0) {
        free(v);
        return NULL;
    }
    *n = cnt;
    return v;
}

int nb_summary_histogram_values(nb_summary_writer *w, const char *tag, const double *values, int64_t n, int64_t step) {
    const char *fn = "nb_summary_histogram";
    if (!tag || (!values && n > 0) || n < 0) {
        nb__error("%s: %s", fn, !tag ? "tag is NULL" : "bad values or count");
        return -1;
    }
    if (!not_null(w, fn)) return -1;
    nb_histo h;
    if (nb__summary_histo_build(values, n, &h) != 0) {
        nb__error("%s: out of memory", fn);
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    int rc = -1;
    if (usable(w, fn)) {
        event_begin(w, step);
        size_t s = nb__pb_begin(&w->msg, 5);
        size_t v = nb__pb_begin(&w->msg, 1);
        nb__pb_string(&w->msg, 1, tag, strlen(tag));
        size_t hp = nb__pb_begin(&w->msg, 5); /* Value.histo: HistogramProto */
        nb__pb_double(&w->msg, 1, h.min);
        nb__pb_double(&w->msg, 2, h.max);
        nb__pb_double(&w->msg, 3, h.num);
        nb__pb_double(&w->msg, 4, h.sum);
        nb__pb_double(&w->msg, 5, h.sum_squares);
        nb__pb_packed_doubles(&w->msg, 6, h.limit, (size_t)h.n);
        nb__pb_packed_doubles(&w->msg, 7, h.count, (size_t)h.n);
        nb__pb_end(&w->msg, hp);
        nb__pb_end(&w->msg, v);
        nb__pb_end(&w->msg, s);
        rc = event_end(w, fn);
    }
    pthread_mutex_unlock(&w->mu);
    nb__summary_histo_free(&h);
    return rc;
}

int nb_summary_histogram(nb_summary_writer *w, const char *tag, nb_tensor *t, int64_t step) {
    if (!not_null(w, "nb_summary_histogram")) return -1;
    int64_t n;
    double *v = nb__summary_values_of(t, &n, "nb_summary_histogram");
    if (!v) return -1;
    int rc = nb_summary_histogram_values(w, tag, v, n, step);
    free(v);
    return rc;
}

/* ---- text and hyper-parameters ---- */

/* SummaryMetadata { plugin_data { plugin_name, content } } as Value.metadata (field 9). */
static void plugin_metadata(nb_pb_buf *m, const char *plugin, const void *content, size_t n) {
    size_t md = nb__pb_begin(m, 9);
    size_t pd = nb__pb_begin(m, 1);
    nb__pb_string(m, 1, plugin, strlen(plugin));
    if (n) nb__pb_string(m, 2, content, n);
    nb__pb_end(m, pd);
    nb__pb_end(m, md);
}

int nb_summary_text(nb_summary_writer *w, const char *tag, const char *text, int64_t step) {
    const char *fn = "nb_summary_text";
    if (!tag || !text) {
        nb__error("%s: %s is NULL", fn, !tag ? "tag" : "text");
        return -1;
    }
    if (!not_null(w, fn)) return -1;
    pthread_mutex_lock(&w->mu);
    int rc = -1;
    if (usable(w, fn)) {
        event_begin(w, step);
        size_t s = nb__pb_begin(&w->msg, 5);
        size_t v = nb__pb_begin(&w->msg, 1);
        nb__pb_string(&w->msg, 1, tag, strlen(tag));
        plugin_metadata(&w->msg, "text", NULL, 0);
        size_t tp = nb__pb_begin(&w->msg, 8); /* Value.tensor: TensorProto */
        nb__pb_int(&w->msg, 1, 7);            /* dtype DT_STRING */
        size_t sh = nb__pb_begin(&w->msg, 2); /* tensor_shape { dim { size: 1 } } */
        size_t d = nb__pb_begin(&w->msg, 2);
        nb__pb_int(&w->msg, 1, 1);
        nb__pb_end(&w->msg, d);
        nb__pb_end(&w->msg, sh);
        nb__pb_string(&w->msg, 8, text, strlen(text)); /* string_val */
        nb__pb_end(&w->msg, tp);
        nb__pb_end(&w->msg, v);
        nb__pb_end(&w->msg, s);
        rc = event_end(w, fn);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* One event with a single Value carrying the hparams plugin's content (no value of its own),
   as TensorBoard's hparams summary_v2 and PyTorch's add_hparams write them. */
static int hparams_event(nb_summary_writer *w, const char *tag, const nb_pb_buf *content) {
    event_begin(w, 0);
    size_t s = nb__pb_begin(&w->msg, 5);
    size_t v = nb__pb_begin(&w->msg, 1);
    nb__pb_string(&w->msg, 1, tag, strlen(tag));
    plugin_metadata(&w->msg, "hparams", content->data, content->len);
    nb__pb_end(&w->msg, v);
    nb__pb_end(&w->msg, s);
    return event_end(w, "nb_summary_hparams");
}

int nb_summary_hparams(nb_summary_writer *w, const nb_hparam *hp, int n, const char *const *metrics, int n_metrics) {
    const char *fn = "nb_summary_hparams";
    if ((n > 0 && !hp) || n < 0 || n_metrics < 0 || (n_metrics > 0 && !metrics)) {
        nb__error("%s: bad hyper-parameter or metric list", fn);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!hp[i].name) {
            nb__error("%s: hyper-parameter %d has no name", fn, i);
            return -1;
        }
    for (int i = 0; i < n_metrics; i++)
        if (!metrics[i]) {
            nb__error("%s: metric tag %d is NULL", fn, i);
            return -1;
        }
    if (!not_null(w, fn)) return -1;
    /* HParamsPluginData (tensorboard/plugins/hparams/plugin_data.proto): version 0 (omitted),
       then experiment (2), session_start_info (3) or session_end_info (4). */
    nb_pb_buf exp = { 0 }, ssi = { 0 }, sei = { 0 };
    size_t e = nb__pb_begin(&exp, 2);
    for (int i = 0; i < n; i++) {
        size_t hi = nb__pb_begin(&exp, 4); /* HParamInfo { name, type } */
        nb__pb_string(&exp, 1, hp[i].name, strlen(hp[i].name));
        nb__pb_int(&exp, 4, hp[i].text ? 1 : 3); /* DATA_TYPE_STRING / DATA_TYPE_FLOAT64 */
        nb__pb_end(&exp, hi);
    }
    for (int i = 0; i < n_metrics; i++) {
        size_t mi = nb__pb_begin(&exp, 5); /* MetricInfo { name { tag } } */
        size_t mn = nb__pb_begin(&exp, 1);
        nb__pb_string(&exp, 2, metrics[i], strlen(metrics[i]));
        nb__pb_end(&exp, mn);
        nb__pb_end(&exp, mi);
    }
    nb__pb_end(&exp, e);
    size_t si = nb__pb_begin(&ssi, 3);
    for (int i = 0; i < n; i++) {
        size_t ent = nb__pb_begin(&ssi, 1); /* map<string, google.protobuf.Value> entry */
        nb__pb_string(&ssi, 1, hp[i].name, strlen(hp[i].name));
        size_t val = nb__pb_begin(&ssi, 2);
        if (hp[i].text) nb__pb_string(&ssi, 3, hp[i].text, strlen(hp[i].text)); /* string_value */
        else nb__pb_double(&ssi, 2, hp[i].number);                           /* number_value */
        nb__pb_end(&ssi, val);
        nb__pb_end(&ssi, ent);
    }
    nb__pb_double(&ssi, 5, wall_now()); /* start_time_secs */
    nb__pb_end(&ssi, si);
    size_t ei = nb__pb_begin(&sei, 4);
    nb__pb_int(&sei, 1, 1); /* STATUS_SUCCESS */
    nb__pb_end(&sei, ei);
    int rc = -1;
    if (exp.failed || ssi.failed || sei.failed) {
        nb__error("%s: out of memory", fn);
    } else {
        pthread_mutex_lock(&w->mu);
        if (usable(w, fn)) {
            rc = hparams_event(w, "_hparams_/experiment", &exp);
            if (rc == 0) rc = hparams_event(w, "_hparams_/session_start_info", &ssi);
            if (rc == 0) rc = hparams_event(w, "_hparams_/session_end_info", &sei);
        }
        pthread_mutex_unlock(&w->mu);
    }
    nb__pb_free(&exp);
    nb__pb_free(&ssi);
    nb__pb_free(&sei);
    return rc;
}

int nb_summary_flush(nb_summary_writer *w) {
    if (!not_null(w, "nb_summary_flush")) return -1;
    pthread_mutex_lock(&w->mu);
    write_out(w);
    int rc = usable(w, "nb_summary_flush") ? 0 : -1;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int nb_summary_close(nb_summary_writer *w) {
    if (!w) return 0;
    if (w->has_thread) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    pthread_mutex_lock(&w->mu);
    write_out(w);
    pthread_mutex_unlock(&w->mu);
    int rc = 0;
    if (w->io_errno) {
        nb__error("nb_summary_close: writing '%s' failed: %s", w->path, strerror(w->io_errno));
        rc = -1;
    }
    if (w->fd >= 0 && close(w->fd) != 0 && rc == 0) {
        nb__error("nb_summary_close: closing '%s' failed: %s", w->path, strerror(errno));
        rc = -1;
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    nb__pb_free(&w->out);
    nb__pb_free(&w->msg);
    free(w->path);
    free(w);
    return rc;
}
