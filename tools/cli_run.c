/* What both kinds of `nabla train` run share (tools/nabla.c's classifiers, tools/cli_finetune.c's
   fine-tuning of a pretrained LM): the run folder and the seeded validation split. */
#include "cli_run.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* splitmix64: the CLI's own small generator, so the split depends on --seed alone. */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Of the first `limit` samples of ds (all when 0): a seeded shuffle, the last val_frac of it as
   *val and the rest as *train, each kept in the order of the original indices. */
int cli_split_samples(nb_dataset *ds, int64_t limit, double val_frac, uint64_t seed, nb_dataset **train,
                      nb_dataset **val) {
    int64_t len = nb_dataset_len(ds);
    if (limit > 0 && limit < len) len = limit;
    int64_t nval = (int64_t)(val_frac * (double)len);
    if (val_frac > 0 && nval == 0) nval = 1;
    if (nval >= len) {
        fprintf(stderr, "nabla train: --val-split %g leaves no training samples of %lld\n", val_frac, (long long)len);
        return -1;
    }
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(len ? len : 1));
    bool *is_val = calloc((size_t)(len ? len : 1), 1);
    if (!idx || !is_val) {
        free(idx);
        free(is_val);
        fprintf(stderr, "nabla train: out of memory splitting %lld samples\n", (long long)len);
        return -1;
    }
    for (int64_t i = 0; i < len; i++) idx[i] = i;
    uint64_t s = seed ^ 0x5EEDC0DEull;
    for (int64_t i = len - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)(splitmix(&s) % (uint64_t)(i + 1));
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    for (int64_t i = len - nval; i < len; i++) is_val[idx[i]] = true;
    int64_t nt = 0, nv = 0;
    for (int64_t i = 0; i < len; i++) { /* train indices first, then val, both ascending */
        if (!is_val[i]) idx[nt++] = i;
    }
    for (int64_t i = 0; i < len; i++)
        if (is_val[i]) idx[nt + nv++] = i;
    *train = nb_data_subset(ds, idx, nt);
    *val = nv ? nb_data_subset(ds, idx + nt, nv) : NULL;
    free(idx);
    free(is_val);
    if (!*train || (nv && !*val)) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        return -1;
    }
    return 0;
}

const char *cli_run_name(const char *model, char *buf, size_t size) {
    snprintf(buf, size, "%s", model);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    if (n > 5 && !strcmp(buf + n - 5, ".json")) buf[n -= 5] = 0;
    const char *slash = strrchr(buf, '/');
    return slash && slash[1] ? slash + 1 : buf;
}

int cli_mkdirs(const char *path) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) < 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) < 0 && errno != EEXIST ? -1 : 0;
}

/* Whether the folder at path holds anything (false when it does not exist). */
bool cli_folder_has_files(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    bool any = false;
    for (struct dirent *e; !any && (e = readdir(d));) any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return any;
}

/* Removes the event files of an earlier run in path, so --overwrite starts the curves afresh. */
static int remove_event_files(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20)) continue;
        char f[1400];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        if (unlink(f) < 0) {
            fprintf(stderr, "nabla train: cannot remove %s: %s\n", f, strerror(errno));
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

/* The run folder: --logdir as asked (new or empty unless --overwrite or --resume), or a new
   runs/<model>/YYYYmmdd-HHMMSS (with -2, -3, ... when a run of the same second holds it) and the
   link runs/<model>/latest to it. */
int cli_choose_logdir(const train_opts *o, const char *name, char *logdir, size_t size) {
    if (o->logdir) {
        if (snprintf(logdir, size, "%s", o->logdir) >= (int)size) {
            fprintf(stderr, "nabla train: --logdir is too long\n");
            return -1;
        }
        struct stat st;
        if (stat(logdir, &st) == 0 && !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "nabla train: --logdir %s exists and is not a folder\n", logdir);
            return -1;
        }
        if (!o->resume && cli_folder_has_files(logdir)) {
            if (!o->overwrite) {
                fprintf(stderr, "nabla train: --logdir %s holds an earlier run; its events would mix with this run's "
                                "(give a new folder, --overwrite to replace it, or --resume to continue it)\n", logdir);
                return -1;
            }
            if (remove_event_files(logdir) < 0) return -1;
        }
        if (cli_mkdirs(logdir) < 0) {
            fprintf(stderr, "nabla train: cannot create the log folder %s: %s\n", logdir, strerror(errno));
            return -1;
        }
        return 0;
    }
    char parent[256], stamp[32];
    snprintf(parent, sizeof parent, "runs/%s", name);
    if (cli_mkdirs(parent) < 0) {
        fprintf(stderr, "nabla train: cannot create the log folder %s: %s\n", parent, strerror(errno));
        return -1;
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (int k = 1; k < 1000; k++) {
        if (k == 1) snprintf(logdir, size, "%s/%s", parent, stamp);
        else snprintf(logdir, size, "%s/%s-%d", parent, stamp, k);
        if (mkdir(logdir, 0777) == 0) { /* mkdir claims the name: two runs at once get two folders */
            char link[300], tmp[320];
            snprintf(link, sizeof link, "%s/latest", parent);
            snprintf(tmp, sizeof tmp, "%s/.latest.%ld", parent, (long)getpid());
            unlink(tmp);
            if (symlink(logdir + strlen(parent) + 1, tmp) == 0 && rename(tmp, link) < 0) unlink(tmp);
            return 0;
        }
        if (errno != EEXIST) break;
    }
    fprintf(stderr, "nabla train: cannot create a run folder in %s: %s\n", parent, strerror(errno));
    return -1;
}

int cli_plot_run(const char *logdir, const char *svg) {
    nb_scalar_log *log = nb_scalar_log_read(logdir);
    const char *name = logdir;
    int rc = log && nb_plot_svg((const nb_scalar_log *const *)&log, &name, 1, svg, (nb_plot_opts){ 0 }) == 0 ? 0 : -1;
    if (rc < 0) fprintf(stderr, "nabla train: %s\n", nb_error());
    nb_scalar_log_free(log);
    return rc;
}

int cli_fit(nb_model *model, nb_data_loader *train, nb_data_loader *val, nb_fit_opts opts, nb_summary_writer **w) {
    nb_history *h = nb_model_fit_loader(model, train, val, opts);
    nb_summary_close(*w); /* flushed and closed before the curves are drawn from it */
    *w = NULL;
    if (!h) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        return -1;
    }
    nb_history_free(h);
    return 0;
}
