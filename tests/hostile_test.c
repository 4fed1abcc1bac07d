/* Feeds every file of the hostile corpus (tests/hostile_files.py) to the library's loaders (ONNX's among them): each call must succeed or fail with nb_error() set, never crash, hang, leak or trip a sanitizer. */
/* Why a process per file: a crash in one parser must not hide the findings in the others, and
   a child's exit status says exactly what went wrong (a signal, a sanitizer's exit, a hang or a
   NULL without a message). Usage: hostile_test DIR [PARSER [FILE]]; with a FILE the loaders run
   in this process, for a debugger. */
#include <nabla.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OK = 0, FAILED_WITH_MESSAGE = 10, FAILED_SILENTLY = 11, GOOD_REJECTED = 12 };

static char good_dir[4096];

static void good_path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", good_dir, name); }

static char first_message[512]; /* the first refusal's message, for the one-file mode */

/* A call that returned failure: it must have said why. */
static int failure(void) {
    if (nb_error() && !first_message[0]) snprintf(first_message, sizeof first_message, "%s", nb_error());
    return nb_error() ? FAILED_WITH_MESSAGE : FAILED_SILENTLY;
}

/* Reads every sample of a dataset, so lazily decoded data is decoded too. */
static int drain(nb_dataset *ds) {
    int64_t n = nb_dataset_len(ds);
    if (n < 0) return failure();
    for (int64_t i = 0; i < n && i < 64; i++) {
        nb_batch b;
        if (nb_dataset_get(ds, i, &b) != 0) return failure();
        nb_release(b.x);
        nb_release(b.y);
    }
    return nb_error() ? FAILED_WITH_MESSAGE : OK;
}

/* Reads every element, so a tensor viewing memory past a file's end is seen by ASan. */
static void touch(nb_tensor *t) {
    if (!t) return;
    nb_scope *s = nb_scope_begin();
    (void)nb_sum_all(nb_cast(t, NB_F64));
    nb_scope_end(s);
    nb_error_clear(); /* a loaded tensor too big to copy is not the loader's failure */
}

static nb_module *cli_mlp(void) {
    return nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
}

static int try_safetensors(const char *path) {
    int worst = OK;
    nb_safetensors *f = nb_safetensors_open(path);
    if (!f) worst = failure();
    else {
        int n = nb_safetensors_count(f);
        for (int i = 0; i < n; i++) {
            const char *name = nb_safetensors_name(f, i);
            (void)nb_safetensors_dtype_name(f, i);
            nb_dtype dt;
            nb_shape shape;
            if (nb_safetensors_info(f, i, &dt, &shape) < 0 && !nb_error()) return FAILED_SILENTLY;
            (void)nb_safetensors_nbytes(f, i);
            nb_error_clear();
            nb_tensor *t = nb_safetensors_get(f, name);
            if (!t && !nb_error()) return FAILED_SILENTLY;
            touch(t);
            nb_release(t);
            nb_error_clear();
        }
        const nb_metadata *md = nb_safetensors_metadata(f);
        for (int i = 0; i < nb_metadata_count(md); i++)
            if (!nb_metadata_key(md, i) || !nb_metadata_value(md, i)) return FAILED_SILENTLY;
        nb_safetensors_close(f);
    }
    nb_error_clear();
    nb_module *m = cli_mlp();
    if (nb_load_state_dict(m, path, (nb_load_opts){ 0 }) < 0 && !nb_error()) worst = FAILED_SILENTLY;
    nb_module_free(m);
    nb_error_clear();
    return worst;
}

static int try_npy(const char *path) {
    nb_tensor *t = nb_load_npy(path);
    int r = t ? OK : failure();
    touch(t);
    nb_release(t);
    nb_error_clear();
    char y[4200];
    good_path(y, sizeof y, "y.npy");
    nb_dataset *ds = nb_data_npy(path, NULL);
    int r2 = ds ? drain(ds) : failure();
    nb_dataset_free(ds);
    nb_error_clear();
    ds = nb_data_npy(path, y);
    int r3 = ds ? drain(ds) : failure();
    nb_dataset_free(ds);
    nb_error_clear();
    return r == FAILED_SILENTLY || r2 == FAILED_SILENTLY || r3 == FAILED_SILENTLY ? FAILED_SILENTLY : r;
}

static int try_idx(const char *path) {
    nb_tensor *t = nb_read_idx(path);
    int r = t ? OK : failure();
    touch(t);
    nb_release(t);
    nb_error_clear();
    char images[4200], labels[4200];
    good_path(images, sizeof images, "images.idx");
    good_path(labels, sizeof labels, "labels.idx");
    const char *pairs[2][2] = { { path, labels }, { images, path } };
    for (int k = 0; k < 2; k++) {
        nb_dataset *ds = nb_data_idx(pairs[k][0], pairs[k][1]);
        int rk = ds ? drain(ds) : failure();
        nb_dataset_free(ds);
        nb_error_clear();
        if (rk == FAILED_SILENTLY) return rk;
    }
    return r;
}

static int try_csv(const char *path) {
    const nb_csv_opts opts[] = { { 0 }, { .no_header = true }, { .label = "label" }, { .label_index = -1 },
                                 { .no_label = true }, { .delimiter = ';' } };
    int r = OK;
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        nb_dataset *ds = nb_data_csv(path, opts[k]);
        int rk = ds ? drain(ds) : failure();
        nb_dataset_free(ds);
        nb_error_clear();
        if (rk == FAILED_SILENTLY) return rk;
        if (k == 0) r = rk;
    }
    return r;
}

static int try_png(const char *path) {
    nb_tensor *t = nb_read_png(path);
    int r = t ? OK : failure();
    touch(t);
    nb_release(t);
    nb_error_clear();
    return r;
}

static int try_events(const char *path) {
    nb_scalar_log *log = nb_scalar_log_read(path);
    if (!log) return failure();
    for (int i = 0; i < nb_scalar_log_num_tags(log); i++) {
        const int64_t *steps;
        const double *walls, *values;
        int64_t n = nb_scalar_log_points(log, i, &steps, &walls, &values);
        volatile double sink = 0;
        for (int64_t k = 0; k < n; k++) sink += (double)steps[k] + walls[k] + values[k];
        (void)sink;
        if (nb_scalar_log_find(log, nb_scalar_log_tag(log, i)) < 0) return FAILED_SILENTLY;
    }
    (void)nb_scalar_log_note(log);
    nb_scalar_log_free(log);
    return OK;
}

/* An ONNX model: loaded, described, and run on all-zero [2, 2] f32 inputs (a model declaring
   others refuses them with a message), eagerly and compiled. */
static int try_onnx(const char *path) {
    int worst = OK;
    for (int compile = 0; compile <= 1; compile++) {
        nb_onnx_model *m = nb_onnx_load(path, (nb_onnx_load_opts){ .compile = compile });
        if (!m) {
            int r = failure();
            nb_error_clear();
            if (r == FAILED_SILENTLY) return r;
            if (!compile) worst = r;
            continue;
        }
        char *text = nb_onnx_summary(m);
        if (!text && !nb_error()) return FAILED_SILENTLY;
        free(text);
        int n = nb_onnx_num_inputs(m);
        if (n <= 8) {
            nb_tensor *in[8], *out[4] = { NULL };
            int nout = nb_onnx_num_outputs(m) < 4 ? nb_onnx_num_outputs(m) : 4;
            for (int i = 0; i < n; i++) in[i] = nb_zeros(NB_SHAPE(2, 2), NB_F32);
            if (nb_onnx_run(m, in, n, out, compile ? 1 : nout) < 0 && !nb_error()) return FAILED_SILENTLY;
            for (int k = 0; k < nout; k++) touch(out[k]), nb_release(out[k]);
            for (int i = 0; i < n; i++) nb_release(in[i]);
        }
        nb_onnx_free(m);
        nb_error_clear();
    }
    return worst;
}

typedef struct parser {
    const char *name;
    int (*run)(const char *path);
    const char *good; /* a file of good/ this parser must accept */
} parser;

static const parser PARSERS[] = {
    { "safetensors", try_safetensors, "small.safetensors" }, { "npy", try_npy, "x.npy" },
    { "idx", try_idx, "images.idx" },  { "csv", try_csv, "data.csv" },
    { "png", try_png, "gray.png" },    { "events", try_events, "events.out.tfevents.good" },
    { "onnx", try_onnx, "model.onnx" },
};
enum { NPARSERS = sizeof PARSERS / sizeof PARSERS[0] };

/* Runs one parser on one file in a child; returns the child's verdict, or -1 and a reason. */
static int run_child(const parser *p, const char *path, char *why, size_t nwhy) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, nwhy, "fork failed: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        alarm(60); /* a hang becomes SIGALRM */
        int r = p->run(path);
        nb_empty_cache();
        exit(r); /* exit, not _exit: LeakSanitizer runs at exit */
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, nwhy, "waitpid failed: %s", strerror(errno));
            return -1;
        }
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        snprintf(why, nwhy, "%s", sig == SIGALRM ? "hung (over 60 s)" : strsignal(sig));
        return -1;
    }
    int code = WEXITSTATUS(st);
    if (code == OK || code == FAILED_WITH_MESSAGE) return code;
    if (code == FAILED_SILENTLY) snprintf(why, nwhy, "failed without an error message (nb_error() is NULL)");
    else if (code == 23) snprintf(why, nwhy, "LeakSanitizer found a leak (exit 23)");
    else snprintf(why, nwhy, "exit %d (a sanitizer report: see its output above)", code);
    return -1;
}

/* Whether this build has no ONNX (nb_onnx_load says so): its onnx pass would prove nothing. */
static bool built_without_onnx(void) {
    nb_onnx_model *m = nb_onnx_load_memory("", 0, (nb_onnx_load_opts){ 0 });
    bool off = !m && nb_error() && strstr(nb_error(), "built without ONNX");
    nb_onnx_free(m);
    nb_error_clear();
    return off;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [PARSER [FILE]]\n", argv[0]);
        return 2;
    }
    snprintf(good_dir, sizeof good_dir, "%s/good", argv[1]);
    if (argc == 4) { /* one file, in this process */
        for (int i = 0; i < NPARSERS; i++)
            if (!strcmp(PARSERS[i].name, argv[2])) {
                int r = PARSERS[i].run(argv[3]);
                printf("%s %s: %s%s\n", argv[2], argv[3], r == OK ? "ok" : r == FAILED_WITH_MESSAGE ? "error: " : "FAILED silently",
                       r == FAILED_WITH_MESSAGE ? first_message : "");
                return r == OK || r == FAILED_WITH_MESSAGE ? 0 : 1;
            }
        fprintf(stderr, "no parser '%s'\n", argv[2]);
        return 2;
    }
    int failures = 0;
    for (int pi = 0; pi < NPARSERS; pi++) {
        const parser *p = &PARSERS[pi];
        if (argc == 3 && strcmp(argv[2], p->name)) continue;
        char why[256], path[8192];
        /* the harness must accept a good file, or every "error" below proves nothing */
        good_path(path, sizeof path, p->good);
        int g = run_child(p, path, why, sizeof why);
        if (g == FAILED_WITH_MESSAGE && !strcmp(p->name, "onnx") && built_without_onnx()) {
            printf("%-12s skipped: built without ONNX\n", p->name);
            continue;
        }
        if (g != OK) {
            printf("FAIL %s: the good file %s was not read: %s\n", p->name, path, g < 0 ? why : "an error");
            failures++;
        }
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", argv[1], p->name);
        DIR *d = opendir(dir);
        if (!d) {
            printf("FAIL %s: cannot open %s: %s (run tests/hostile_files.py first)\n", p->name, dir, strerror(errno));
            failures++;
            continue;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                names = realloc(names, cap * sizeof *names);
                if (!names) return 2;
            }
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp_str);
        int ok = 0, errors = 0, bad = 0;
        for (size_t i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            int r = run_child(p, path, why, sizeof why);
            if (r == OK) ok++;
            else if (r == FAILED_WITH_MESSAGE) errors++;
            else {
                printf("FAIL %s %s: %s\n", p->name, path, why);
                bad++;
            }
            free(names[i]);
        }
        free(names);
        printf("%-12s %5zu files tried: %d read, %d refused with a message, %d FAILED\n", p->name, n, ok, errors, bad);
        failures += bad;
    }
    if (failures) printf("%d hostile files broke the contract\n", failures);
    return failures ? 1 : 0;
}
