/* The nabla command: `nabla train` (the main job: a model trained on Fashion-MNIST with a
   progress line, TensorBoard logs, a saved state dict, an SVG of the curves and the test
   accuracy), `nabla eval`, `nabla predict`, `nabla info FILE...` and `nabla plot LOGDIR...`. */
#include "train_args.h"
#include <nabla.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int nabla_info_main(int argc, char **argv, FILE *out, FILE *err);
int nabla_plot_main(int argc, char **argv);

/* What the run's callbacks need: the checkpoint written after each epoch (model, optimizer, RNG,
   loader position) and, with --log-every, the writer of per-step losses. */
typedef struct {
    nb_optimizer *opt;
    nb_data_loader *loader;
    const char *path;
    nb_summary_writer *w;
    int64_t log_every;
} run_ctx;

static bool save_checkpoint(nb_model *m, int epoch, const char *const *names, const double *values, int n, void *user) {
    (void)names; (void)values; (void)n;
    run_ctx *c = user;
    nb_metadata *md = nb_metadata_new();
    int64_t loader_epoch, batch;
    nb_data_loader_position(c->loader, &loader_epoch, &batch);
    nb_metadata_set_int(md, "data.epoch", loader_epoch);
    nb_metadata_set_int(md, "data.batch", batch);
    nb_checkpoint ck = { .model = nb_model_module(m), .optimizer = c->opt, .epoch = epoch,
                         .global_step = epoch * nb_data_loader_len(c->loader), .metadata = md };
    int rc = nb_checkpoint_save(&ck, c->path);
    nb_metadata_free(md);
    return rc == 0; /* a failed save stops training; fit reports the error */
}

static bool log_step(nb_model *m, int64_t step, double loss, void *user) {
    (void)m;
    run_ctx *c = user;
    if (c->log_every > 0 && (step + 1) % c->log_every == 0)
        return nb_summary_scalar(c->w, "step/loss", loss, step + 1) == 0;
    return true;
}

static nb_module *make_model(const char *name) {
    if (!strcmp(name, "mlp"))
        return nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
    return nb_nn_sequential(
        nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
}

/* splitmix64: the CLI's own small generator, so the split depends on --seed alone. */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Of the first `limit` samples of ds (all when 0): a seeded shuffle, the last val_frac of it as
   *val and the rest as *train, each kept in the order of the original indices. */
static int split_samples(nb_dataset *ds, int64_t limit, double val_frac, uint64_t seed, nb_dataset **train,
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

/* The first n samples of ds (all when n is 0), as a new handle. */
static nb_dataset *first_samples(nb_dataset *ds, int64_t n) {
    int64_t len = nb_dataset_len(ds);
    if (n <= 0 || n > len) n = len;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!idx) return NULL;
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    nb_dataset *sub = nb_data_subset(ds, idx, n);
    free(idx);
    return sub;
}

static int mkdirs(const char *path) {
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
static bool folder_has_files(const char *path) {
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
static int choose_logdir(const train_opts *o, char *logdir, size_t size) {
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
        if (!o->resume && folder_has_files(logdir)) {
            if (!o->overwrite) {
                fprintf(stderr, "nabla train: --logdir %s holds an earlier run; its events would mix with this run's "
                                "(give a new folder, --overwrite to replace it, or --resume to continue it)\n", logdir);
                return -1;
            }
            if (remove_event_files(logdir) < 0) return -1;
        }
        if (mkdirs(logdir) < 0) {
            fprintf(stderr, "nabla train: cannot create the log folder %s: %s\n", logdir, strerror(errno));
            return -1;
        }
        return 0;
    }
    char parent[256], stamp[32];
    snprintf(parent, sizeof parent, "runs/%s", o->model);
    if (mkdirs(parent) < 0) {
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

/* Counts predictions of m over l into confusion[true][predicted]; 0, or -1 with a message
   (a label outside 0..9 is an error naming it, never dropped from the count). */
static int confusion_of(nb_module *m, nb_data_loader *l, int64_t confusion[10][10], const char *cmd) {
    bool prev = nb_set_grad_enabled(false);
    int rc = 0;
    int64_t seen = 0;
    nb_batch b;
    while (rc == 0 && nb_data_loader_next(l, &b)) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *pred = nb_argmax(nb_forward(m, b.x), 1, false);
        int64_t n = nb_dim(b.y, 0), p[500], y[500];
        if (!pred || n > 500 || nb_copy_to(pred, p, sizeof(int64_t) * (size_t)n) < 0 ||
            nb_copy_to(b.y, y, sizeof(int64_t) * (size_t)n) < 0) {
            fprintf(stderr, "nabla %s: %s\n", cmd, nb_error() ? nb_error() : "evaluation failed");
            rc = -1;
        }
        for (int64_t i = 0; rc == 0 && i < n; i++) {
            if (y[i] < 0 || y[i] >= 10) {
                fprintf(stderr, "nabla %s: label %lld of sample %lld is outside the 10 classes 0..9\n", cmd,
                        (long long)y[i], (long long)(seen + i));
                rc = -1;
            } else confusion[y[i]][p[i]]++;
        }
        seen += n;
        nb_scope_end(s);
    }
    nb_set_grad_enabled(prev);
    if (rc == 0 && nb_error()) {
        fprintf(stderr, "nabla %s: %s\n", cmd, nb_error());
        rc = -1;
    }
    return rc;
}

/* Accuracy of a confusion matrix (0 when empty). */
static double accuracy_of(int64_t confusion[10][10], int64_t *right, int64_t *all) {
    *right = *all = 0;
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++) {
            *all += confusion[i][j];
            if (i == j) *right += confusion[i][j];
        }
    return *all ? (double)*right / (double)*all : 0.0;
}

static int train(train_opts o) {
    struct stat st;
    if (o.data && (stat(o.data, &st) < 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "nabla train: --data %s is not a folder\n", o.data);
        return 1;
    }
    if (o.threads > 0) nb_set_num_threads(o.threads);
    char logdir[512], out[640], svg[640];
    if (choose_logdir(&o, logdir, sizeof logdir) < 0) return 1;
    snprintf(out, sizeof out, "%s", o.out ? o.out : "");
    if (!o.out) snprintf(out, sizeof out, "%s/model.safetensors", logdir);
    snprintf(svg, sizeof svg, "%s/curves.svg", logdir);
    nb_manual_seed(o.seed);
    nb_dataset *train_all = nb_data_fashion_mnist(o.data, true), *test_all = NULL;
    nb_dataset *train_ds = NULL, *val_ds = NULL, *test_ds = NULL;
    nb_data_loader *loader = NULL, *val_loader = NULL, *test_loader = NULL;
    nb_module *mod = NULL;
    nb_optimizer *opt = NULL;
    nb_model *model = NULL;
    nb_summary_writer *w = NULL;
    int rc = 1;
    if (!train_all || !(test_all = nb_data_fashion_mnist(o.data, false))) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    if (split_samples(train_all, o.limit, o.val_split, o.seed, &train_ds, &val_ds) < 0) goto done;
    test_ds = first_samples(test_all, o.limit);
    loader = nb_data_loader_new(train_ds, (nb_loader_opts){ .batch_size = o.batch, .shuffle = true,
                                                            .num_workers = o.workers, .seed = o.seed + 1 });
    if (val_ds) val_loader = nb_data_loader_new(val_ds, (nb_loader_opts){ .batch_size = 500 });
    test_loader = nb_data_loader_new(test_ds, (nb_loader_opts){ .batch_size = 500 });
    mod = make_model(o.model);
    if (mod) {
        if (!strcmp(o.optimizer, "sgd")) opt = nb_optim_sgd(mod, (nb_sgd_opts){ .lr = o.lr, .momentum = 0.9 });
        else if (!strcmp(o.optimizer, "adam")) opt = nb_optim_adam(mod, (nb_adam_opts){ .lr = o.lr });
        else opt = nb_optim_adamw(mod, (nb_adamw_opts){ .lr = o.lr });
    }
    model = mod && opt && test_loader && (val_loader || !val_ds) ? nb_model_new(mod) : NULL;
    w = model ? nb_summary_open(logdir) : NULL;
    if (!w || nb_model_compile(model, (nb_compile_opts){ .optimizer_obj = opt, .metrics = NB_METRIC_ACCURACY }) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    nb_optimizer *model_opt = opt;
    opt = NULL; /* the model owns it now */
    int initial_epoch = 0;
    if (o.resume) {
        nb_metadata *md = nb_metadata_new();
        nb_checkpoint ck = { .model = mod, .optimizer = model_opt, .metadata = md };
        int64_t loader_epoch = 0, batch = 0;
        if (nb_checkpoint_load(&ck, o.resume) < 0 || nb_metadata_get_int(md, "data.epoch", &loader_epoch) < 0 ||
            nb_metadata_get_int(md, "data.batch", &batch) < 0 || nb_data_loader_set_position(loader, loader_epoch, batch) < 0) {
            fprintf(stderr, "nabla train: cannot resume from %s: %s\n", o.resume, nb_error() ? nb_error() : "no loader position");
            nb_metadata_free(md);
            goto done;
        }
        nb_metadata_free(md);
        initial_epoch = (int)ck.epoch;
        if (initial_epoch >= o.epochs) {
            fprintf(stderr, "nabla train: %s already holds %d epochs; ask for more with --epochs\n", o.resume, initial_epoch);
            goto done;
        }
    }
    char ckpt_path[640];
    snprintf(ckpt_path, sizeof ckpt_path, "%s/checkpoint.safetensors", logdir);
    run_ctx cc = { model_opt, loader, ckpt_path, w, o.log_every };
    nb_callback cb = { .on_epoch_end = save_checkpoint, .on_batch_end = o.log_every ? log_step : NULL, .user = &cc };
    if (!o.quiet)
        printf("nabla train: %s on Fashion-MNIST (%lld training samples, %lld held out for validation), %s lr %g, "
               "batch %lld, %d epochs, %d workers, logs in %s\n",
               o.model, (long long)nb_dataset_len(train_ds), (long long)(val_ds ? nb_dataset_len(val_ds) : 0),
               o.optimizer, o.lr, (long long)o.batch, o.epochs, o.workers, logdir);
    /* the validation split picks the best epoch, whose weights fit saves to out; the test set is
       touched once, at the end, by the model that was saved */
    nb_history *h = nb_model_fit_loader(model, loader, val_loader,
                                        (nb_fit_opts){ .epochs = o.epochs, .initial_epoch = initial_epoch,
                                                       .verbose = o.quiet ? -1 : 0, .tensorboard = w,
                                                       .checkpoint_path = out, .callbacks = &cb, .n_callbacks = 1 });
    nb_summary_close(w);
    w = NULL;
    if (!h) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    nb_history_free(h);
    int64_t confusion[10][10] = { { 0 } }, right, all;
    if (nb_load_state_dict(mod, out, (nb_load_opts){ 0 }) < 0) {
        fprintf(stderr, "nabla train: cannot read back the saved model: %s\n", nb_error());
        goto done;
    }
    nb_module_train(mod, false);
    if (confusion_of(mod, test_loader, confusion, "train") < 0) goto done;
    double test_acc = accuracy_of(confusion, &right, &all);
    nb_scalar_log *log = nb_scalar_log_read(logdir);
    const char *name = logdir;
    rc = 0;
    if (!log || nb_plot_svg((const nb_scalar_log *const *)&log, &name, 1, svg, (nb_plot_opts){ 0 }) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        rc = 1;
    }
    nb_scalar_log_free(log);
    if (rc == 0 && !o.quiet)
        printf("test accuracy %.4f (%lld of %lld, the saved model)\nsaved %s (the %s) and %s; TensorBoard logs "
               "and curves.svg in %s\n",
               test_acc, (long long)right, (long long)all, out,
               val_ds ? "best epoch by validation loss" : "best epoch by training loss", ckpt_path, logdir);
done:
    nb_summary_close(w);
    nb_optim_free(opt);
    if (model) nb_model_free(model); /* frees the module and the optimizer it owns */
    else nb_module_free(mod);
    nb_data_loader_free(loader);
    nb_data_loader_free(val_loader);
    nb_data_loader_free(test_loader);
    nb_dataset_free(train_ds);
    nb_dataset_free(val_ds);
    nb_dataset_free(test_ds);
    nb_dataset_free(train_all);
    nb_dataset_free(test_all);
    return rc;
}

static int train_main(int argc, char **argv) {
    train_opts o = train_defaults();
    int rc = train_parse_args(argc, argv, &o, stdout, stderr);
    if (rc == 1) return 0;
    if (rc) return 2;
    return train(o);
}

static const char *const CLASSES[10] = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                          "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" };

/* The architecture named by --model with the weights of a state dict, in evaluation mode. */
static nb_module *load_model(const char *arch, const char *path, const char *cmd) {
    nb_module *m = make_model(arch);
    if (!m || nb_load_state_dict(m, path, (nb_load_opts){ 0 }) < 0) {
        fprintf(stderr, "nabla %s: %s\n", cmd, nb_error());
        nb_module_free(m);
        return NULL;
    }
    nb_module_train(m, false);
    return m;
}

/* Parses "--model mlp|cnn" and "--data DIR" among args; the rest are positional. */
static int common_args(const char *cmd, int argc, char **argv, const char **arch, const char **data, int *top,
                       int64_t *limit, const char **pos, int max_pos) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) *arch = argv[++i];
        else if (limit && !strcmp(argv[i], "--limit") && i + 1 < argc) {
            char *end;
            errno = 0;
            long long k = strtoll(argv[++i], &end, 10);
            if (!*argv[i] || *end || errno || k < 1) {
                fprintf(stderr, "nabla %s: --limit needs a whole number >= 1, got \"%s\"\n", cmd, argv[i]);
                return -1;
            }
            *limit = k;
        }
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) *data = argv[++i];
        else if (top && !strcmp(argv[i], "--top") && i + 1 < argc) {
            char *end;
            long k = strtol(argv[++i], &end, 10);
            *top = *argv[i] && !*end && k >= 1 && k <= 10 ? (int)k : 0; /* 0: refused below */
        }
        else if (argv[i][0] == '-' || n == max_pos) {
            fprintf(stderr, "nabla %s: unknown or extra argument \"%s\"\n", cmd, argv[i]);
            return -1;
        } else pos[n++] = argv[i];
    }
    if (strcmp(*arch, "mlp") && strcmp(*arch, "cnn")) {
        fprintf(stderr, "nabla %s: --model is mlp or cnn, got \"%s\"\n", cmd, *arch);
        return -1;
    }
    if (top && (*top < 1 || *top > 10)) {
        fprintf(stderr, "nabla %s: --top is 1 to 10\n", cmd);
        return -1;
    }
    return n;
}

/* nabla eval MODEL: accuracy, per-class accuracy and the confusion matrix on the test set. */
static int eval_main(int argc, char **argv) {
    const char *arch = "mlp", *data = NULL, *pos[1];
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: nabla eval MODEL.safetensors [--model mlp|cnn] [--data DIR] [--limit N]\n"
               "  test-set accuracy, per-class accuracy and the confusion matrix of a saved model\n"
               "  (on the first N test samples with --limit, as nabla train --limit N reports it)\n");
        return 0;
    }
    int64_t limit = 0;
    if (common_args("eval", argc, argv, &arch, &data, NULL, &limit, pos, 1) != 1) {
        fprintf(stderr, "usage: nabla eval MODEL.safetensors [--model mlp|cnn] [--data DIR] [--limit N]\n");
        return 2;
    }
    nb_module *m = load_model(arch, pos[0], "eval");
    if (!m) return 1;
    nb_dataset *test_all = nb_data_fashion_mnist(data, false), *test = test_all ? first_samples(test_all, limit) : NULL;
    nb_data_loader *l = test ? nb_data_loader_new(test, (nb_loader_opts){ .batch_size = 500 }) : NULL;
    int64_t confusion[10][10] = { { 0 } };
    int rc = 0;
    if (!l) {
        fprintf(stderr, "nabla eval: %s\n", nb_error());
        rc = 1;
    } else if (confusion_of(m, l, confusion, "eval") < 0) rc = 1;
    else {
        int64_t right, all;
        double acc = accuracy_of(confusion, &right, &all);
        printf("test accuracy %.4f (%lld of %lld)\n\nper class:\n", acc, (long long)right, (long long)all);
        for (int i = 0; i < 10; i++) {
            int64_t row = 0;
            for (int j = 0; j < 10; j++) row += confusion[i][j];
            printf("  %d %-12s %.4f\n", i, CLASSES[i], row ? (double)confusion[i][i] / (double)row : 0.0);
        }
        printf("\nconfusion matrix (rows: true class, columns: predicted):\n     ");
        for (int j = 0; j < 10; j++) printf("%6d", j);
        printf("\n");
        for (int i = 0; i < 10; i++) {
            printf("  %d  ", i);
            for (int j = 0; j < 10; j++) printf("%6lld", (long long)confusion[i][j]);
            printf("\n");
        }
    }
    nb_data_loader_free(l);
    nb_dataset_free(test);
    nb_dataset_free(test_all);
    nb_module_free(m);
    return rc;
}

/* nabla predict MODEL IMAGES: the top classes of each image of an IDX file or one 28x28 PNG. */
static int predict_main(int argc, char **argv) {
    const char *arch = "mlp", *data = NULL, *pos[2];
    int top = 3;
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: nabla predict MODEL.safetensors IMAGES [--model mlp|cnn] [--top K]\n"
               "  IMAGES: an IDX image file (plain or gzip) or a 28x28 grayscale PNG\n");
        return 0;
    }
    if (common_args("predict", argc, argv, &arch, &data, &top, NULL, pos, 2) != 2) {
        fprintf(stderr, "usage: nabla predict MODEL.safetensors IMAGES [--model mlp|cnn] [--top K]\n");
        return 2;
    }
    nb_module *m = load_model(arch, pos[0], "predict");
    if (!m) return 1;
    size_t len = strlen(pos[1]);
    bool png = len > 4 && !strcmp(pos[1] + len - 4, ".png");
    nb_scope *s = nb_scope_begin();
    nb_tensor *raw = png ? nb_read_png(pos[1]) : nb_read_idx(pos[1]);
    int rc = 0;
    if (raw && (nb_dtype_of(raw) != NB_U8 || nb_numel(raw) % 784 != 0 || (png && nb_numel(raw) != 784))) {
        char sh[160];
        fprintf(stderr, "nabla predict: %s holds %s %s; expected 28x28 u8 grayscale images\n", pos[1],
                nb_shape_str(nb_shape_of(raw), sh, sizeof sh), nb_dtype_name(nb_dtype_of(raw)));
        rc = 1;
    } else if (!raw) {
        fprintf(stderr, "nabla predict: %s\n", nb_error());
        rc = 1;
    }
    if (rc == 0) {
        bool prev = nb_set_grad_enabled(false);
        nb_tensor *x = nb_mul_scalar(nb_cast(nb_reshape(raw, NB_SHAPE(-1, 1, 28, 28)), NB_F32), 1.0 / 255.0);
        int64_t n = nb_dim(x, 0), shown = n < 20 ? n : 20;
        nb_tensor *probs = nb_softmax(nb_forward(m, nb_slice(x, 0, 0, shown, 1)), 1);
        float p[20 * 10];
        if (!probs || nb_copy_to(probs, p, sizeof(float) * (size_t)(shown * 10)) < 0) {
            fprintf(stderr, "nabla predict: %s\n", nb_error());
            rc = 1;
        }
        for (int64_t i = 0; rc == 0 && i < shown; i++) {
            printf("image %lld:", (long long)i);
            bool used[10] = { false };
            for (int k = 0; k < top; k++) {
                int best = -1;
                for (int c = 0; c < 10; c++)
                    if (!used[c] && (best < 0 || p[i * 10 + c] > p[i * 10 + best])) best = c;
                used[best] = true;
                printf("  %s %.3f", CLASSES[best], p[i * 10 + best]);
            }
            printf("\n");
        }
        if (rc == 0 && n > shown) printf("(%lld more images not shown)\n", (long long)(n - shown));
        nb_set_grad_enabled(prev);
    }
    nb_scope_end(s);
    nb_module_free(m);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: nabla COMMAND [ARGS]\n"
               "  train [options]       train a model on Fashion-MNIST (nabla train --help)\n"
               "  eval MODEL            test accuracy, per-class accuracy, confusion matrix\n"
               "  predict MODEL IMAGES  top classes of IDX or PNG images\n"
               "  info FILE...          a safetensors or .npy file's tensors, shapes and metadata\n"
               "  plot LOGDIR... -o F   TensorBoard scalars as SVG curves (nabla plot for its options)\n"
               "  version               the library version\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "train")) return train_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return eval_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "predict")) return predict_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) {
        if (argc >= 3 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help"))) {
            printf("usage: nabla info FILE...   (a .safetensors state dict or checkpoint, or a .npy array)\n");
            return 0;
        }
        return nabla_info_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (!strcmp(cmd, "plot")) return nabla_plot_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("nabla %s\n", nb_version());
        return 0;
    }
    fprintf(stderr, "nabla: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
