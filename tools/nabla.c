/* The nabla command: `nabla train` (the main job: a model trained on Fashion-MNIST with a
   progress line, TensorBoard logs, a saved state dict, an SVG of the curves and the test
   accuracy), `nabla info FILE...` and `nabla plot LOGDIR...`. */
#include <nabla.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int nabla_info_main(int argc, char **argv, FILE *out, FILE *err);
int nabla_plot_main(int argc, char **argv);

typedef struct {
    const char *model, *optimizer, *logdir, *out, *data;
    int epochs, workers;
    int64_t batch, limit;
    double lr;
    uint64_t seed;
    bool quiet;
} train_opts;

static void train_usage(FILE *f) {
    fprintf(f, "usage: nabla train [options]\n"
               "  Trains a model on Fashion-MNIST and reports the test accuracy.\n"
               "  --model mlp|cnn          the 784-128-10 MLP (default) or the TF tutorial convnet\n"
               "  --epochs N               epochs (default 5)\n"
               "  --batch-size N           samples per batch (default 64)\n"
               "  --lr X                   learning rate (default 1e-3)\n"
               "  --optimizer adamw|adam|sgd   (default adamw)\n"
               "  --workers N              data-loader threads (default 2)\n"
               "  --seed N                 seed of the run (default 0)\n"
               "  --logdir DIR             TensorBoard run folder (default runs/<model>)\n"
               "  --out FILE               state dict to save (default <logdir>/model.safetensors)\n"
               "  --data DIR               Fashion-MNIST folder (default $NABLA_DATA, else Debian's)\n"
               "  --limit N                train and test on the first N samples only\n"
               "  --quiet                  no progress output\n");
}

static nb_module *make_model(const char *name) {
    if (!strcmp(name, "mlp"))
        return nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
    return nb_nn_sequential(
        nb_nn_conv2d(1, 32, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_conv2d(32, 64, 5, (nb_conv2d_opts){ .padding = 2 }), nb_nn_relu(), nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }),
        nb_nn_flatten(), nb_nn_linear(7 * 7 * 64, 1024), nb_nn_relu(), nb_nn_dropout(0.4), nb_nn_linear(1024, 10), NULL);
}

/* The first n samples of ds (all when n is 0), as a new handle. */
static nb_dataset *first_samples(nb_dataset *ds, int64_t n) {
    int64_t len = nb_dataset_len(ds);
    if (n <= 0 || n > len) n = len;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    if (!idx) return NULL;
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    nb_dataset *sub = nb_data_subset(ds, idx, n);
    free(idx);
    return sub;
}

static int mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) < 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) < 0 && errno != EEXIST ? -1 : 0;
}

static int train(train_opts o) {
    char logdir[512], out[640], svg[640];
    snprintf(logdir, sizeof logdir, "%s", o.logdir ? o.logdir : (!strcmp(o.model, "mlp") ? "runs/mlp" : "runs/cnn"));
    snprintf(out, sizeof out, "%s", o.out ? o.out : "");
    if (!o.out) snprintf(out, sizeof out, "%s/model.safetensors", logdir);
    snprintf(svg, sizeof svg, "%s/curves.svg", logdir);
    if (mkdirs(logdir) < 0) {
        fprintf(stderr, "nabla train: cannot create the log folder %s: %s\n", logdir, strerror(errno));
        return 1;
    }
    nb_manual_seed(o.seed);
    nb_dataset *train_all = nb_data_fashion_mnist(o.data, true), *test_all = nb_data_fashion_mnist(o.data, false);
    nb_dataset *train_ds = train_all ? first_samples(train_all, o.limit) : NULL;
    nb_dataset *test_ds = test_all ? first_samples(test_all, o.limit) : NULL;
    nb_data_loader *loader = nb_data_loader_new(train_ds, (nb_loader_opts){ .batch_size = o.batch, .shuffle = true,
                                                                            .num_workers = o.workers, .seed = o.seed + 1 });
    nb_data_loader *test_loader = nb_data_loader_new(test_ds, (nb_loader_opts){ .batch_size = 500 });
    nb_module *mod = make_model(o.model);
    nb_optimizer *opt = NULL;
    if (mod) {
        if (!strcmp(o.optimizer, "sgd")) opt = nb_optim_sgd(mod, (nb_sgd_opts){ .lr = o.lr, .momentum = 0.9 });
        else if (!strcmp(o.optimizer, "adam")) opt = nb_optim_adam(mod, (nb_adam_opts){ .lr = o.lr });
        else opt = nb_optim_adamw(mod, (nb_adamw_opts){ .lr = o.lr });
    }
    nb_model *model = mod && opt ? nb_model_new(mod) : NULL;
    nb_summary_writer *w = model ? nb_summary_open(logdir) : NULL;
    int rc = 0;
    if (!w || nb_model_compile(model, (nb_compile_opts){ .optimizer_obj = opt, .metrics = NB_METRIC_ACCURACY }) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        rc = 1;
        goto done;
    }
    opt = NULL; /* the model owns it now */
    if (!o.quiet)
        printf("nabla train: %s on Fashion-MNIST (%lld training samples), %s lr %g, batch %lld, %d epochs, %d workers\n",
               o.model, (long long)nb_dataset_len(train_ds), o.optimizer, o.lr, (long long)o.batch, o.epochs, o.workers);
    /* the held-out test set validates each epoch; the best epoch's weights are saved */
    nb_history *h = nb_model_fit_loader(model, loader, test_loader,
                                        (nb_fit_opts){ .epochs = o.epochs, .verbose = o.quiet ? -1 : 0, .tensorboard = w,
                                                       .checkpoint_path = out });
    nb_summary_close(w);
    w = NULL;
    if (!h) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        rc = 1;
        goto done;
    }
    double test_acc = nb_history_get(h, "val_accuracy", nb_history_epochs(h) - 1);
    nb_history_free(h);
    nb_scalar_log *log = nb_scalar_log_read(logdir);
    const char *name = logdir;
    if (!log || nb_plot_svg((const nb_scalar_log *const *)&log, &name, 1, svg, (nb_plot_opts){ 0 }) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        rc = 1;
    }
    nb_scalar_log_free(log);
    if (rc == 0 && !o.quiet)
        printf("test accuracy %.4f\nsaved %s (the best epoch); TensorBoard logs and curves.svg in %s\n", test_acc, out, logdir);
done:
    nb_summary_close(w);
    nb_optim_free(opt);
    if (model) nb_model_free(model); /* frees the module and the optimizer it owns */
    else nb_module_free(mod);
    nb_data_loader_free(loader);
    nb_data_loader_free(test_loader);
    nb_dataset_free(train_ds);
    nb_dataset_free(test_ds);
    nb_dataset_free(train_all);
    nb_dataset_free(test_all);
    return rc;
}

/* Parses a number option; false (with a message) when it is not one. */
static bool number(const char *opt, const char *text, double lo, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text ? text : "", &end);
    if (!text || !*text || *end || errno || !(v >= lo)) {
        fprintf(stderr, "nabla train: %s needs a number >= %g, got \"%s\"\n", opt, lo, text ? text : "");
        return false;
    }
    *out = v;
    return true;
}

static int train_main(int argc, char **argv) {
    train_opts o = { .model = "mlp", .optimizer = "adamw", .epochs = 5, .workers = 2, .batch = 64, .lr = 1e-3 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            train_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) o.quiet = true;
        else if (!strcmp(a, "--model") && v) {
            if (strcmp(v, "mlp") && strcmp(v, "cnn")) {
                fprintf(stderr, "nabla train: --model is mlp or cnn, got \"%s\"\n", v);
                return 2;
            }
            o.model = argv[++i];
        } else if (!strcmp(a, "--optimizer") && v) {
            if (strcmp(v, "adamw") && strcmp(v, "adam") && strcmp(v, "sgd")) {
                fprintf(stderr, "nabla train: --optimizer is adamw, adam or sgd, got \"%s\"\n", v);
                return 2;
            }
            o.optimizer = argv[++i];
        } else if (!strcmp(a, "--logdir") && v) o.logdir = argv[++i];
        else if (!strcmp(a, "--out") && v) o.out = argv[++i];
        else if (!strcmp(a, "--data") && v) o.data = argv[++i];
        else if (!strcmp(a, "--epochs")) { if (!number(a, v, 1, &x)) return 2; o.epochs = (int)x; i++; }
        else if (!strcmp(a, "--batch-size")) { if (!number(a, v, 1, &x)) return 2; o.batch = (int64_t)x; i++; }
        else if (!strcmp(a, "--lr")) { if (!number(a, v, 1e-12, &x)) return 2; o.lr = x; i++; }
        else if (!strcmp(a, "--workers")) { if (!number(a, v, 0, &x)) return 2; o.workers = (int)x; i++; }
        else if (!strcmp(a, "--seed")) { if (!number(a, v, 0, &x)) return 2; o.seed = (uint64_t)x; i++; }
        else if (!strcmp(a, "--limit")) { if (!number(a, v, 1, &x)) return 2; o.limit = (int64_t)x; i++; }
        else {
            fprintf(stderr, "nabla train: unknown or incomplete option \"%s\"\n", a);
            train_usage(stderr);
            return 2;
        }
    }
    return train(o);
}

static void usage(FILE *f) {
    fprintf(f, "usage: nabla COMMAND [ARGS]\n"
               "  train [options]       train a model on Fashion-MNIST (nabla train --help)\n"
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
    if (!strcmp(cmd, "info")) return nabla_info_main(argc - 1, argv + 1, stdout, stderr);
    if (!strcmp(cmd, "plot")) return nabla_plot_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("nabla %s\n", nb_version());
        return 0;
    }
    fprintf(stderr, "nabla: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
