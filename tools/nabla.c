/* The nabla command: `nabla train` (the main job: a model trained on Fashion-MNIST with a
   progress line, TensorBoard logs, a saved state dict, an SVG of the curves and the test
   accuracy), `nabla eval`, `nabla predict`, `nabla info FILE...` and `nabla plot LOGDIR...`. */
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
    const char *model, *optimizer, *logdir, *out, *data, *resume;
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
               "  --resume FILE            continue from a checkpoint (<logdir>/checkpoint.safetensors is\n"
               "                           written after every epoch); --epochs counts the epochs done\n"
               "  --quiet                  no progress output\n");
}

/* After each epoch: the checkpoint a run resumes from (model, optimizer, RNG, loader position). */
typedef struct {
    nb_optimizer *opt;
    nb_data_loader *loader;
    const char *path;
} ckpt_ctx;

static bool save_checkpoint(nb_model *m, int epoch, const char *const *names, const double *values, int n, void *user) {
    (void)names; (void)values; (void)n;
    ckpt_ctx *c = user;
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
    struct stat st;
    if (o.data && (stat(o.data, &st) < 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "nabla train: --data %s is not a folder\n", o.data);
        return 1;
    }
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
            rc = 1;
            goto done;
        }
        nb_metadata_free(md);
        initial_epoch = (int)ck.epoch;
        if (initial_epoch >= o.epochs) {
            fprintf(stderr, "nabla train: %s already holds %d epochs; ask for more with --epochs\n", o.resume, initial_epoch);
            rc = 1;
            goto done;
        }
    }
    char ckpt_path[640];
    snprintf(ckpt_path, sizeof ckpt_path, "%s/checkpoint.safetensors", logdir);
    ckpt_ctx cc = { model_opt, loader, ckpt_path };
    nb_callback cb = { .on_epoch_end = save_checkpoint, .user = &cc };
    if (!o.quiet)
        printf("nabla train: %s on Fashion-MNIST (%lld training samples), %s lr %g, batch %lld, %d epochs, %d workers\n",
               o.model, (long long)nb_dataset_len(train_ds), o.optimizer, o.lr, (long long)o.batch, o.epochs, o.workers);
    /* the held-out test set validates each epoch; the best epoch's weights are saved */
    nb_history *h = nb_model_fit_loader(model, loader, test_loader,
                                        (nb_fit_opts){ .epochs = o.epochs, .initial_epoch = initial_epoch,
                                                       .verbose = o.quiet ? -1 : 0, .tensorboard = w,
                                                       .checkpoint_path = out, .callbacks = &cb, .n_callbacks = 1 });
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
        printf("test accuracy %.4f\nsaved %s (the best epoch) and %s; TensorBoard logs and curves.svg in %s\n", test_acc,
               out, ckpt_path, logdir);
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
        else if (!strcmp(a, "--resume") && v) o.resume = argv[++i];
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
                       const char **pos, int max_pos) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) *arch = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) *data = argv[++i];
        else if (top && !strcmp(argv[i], "--top") && i + 1 < argc) *top = atoi(argv[++i]);
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
        printf("usage: nabla eval MODEL.safetensors [--model mlp|cnn] [--data DIR]\n"
               "  test-set accuracy, per-class accuracy and the confusion matrix of a saved model\n");
        return 0;
    }
    if (common_args("eval", argc, argv, &arch, &data, NULL, pos, 1) != 1) {
        fprintf(stderr, "usage: nabla eval MODEL.safetensors [--model mlp|cnn] [--data DIR]\n");
        return 2;
    }
    nb_module *m = load_model(arch, pos[0], "eval");
    if (!m) return 1;
    nb_dataset *test = nb_data_fashion_mnist(data, false);
    nb_data_loader *l = test ? nb_data_loader_new(test, (nb_loader_opts){ .batch_size = 500 }) : NULL;
    int64_t confusion[10][10] = { { 0 } };
    int rc = 0;
    if (!l) rc = 1;
    bool prev = nb_set_grad_enabled(false);
    nb_batch b;
    while (l && nb_data_loader_next(l, &b)) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *pred = nb_argmax(nb_forward(m, b.x), 1, false);
        int64_t n = nb_dim(b.y, 0), p[500], y[500];
        if (!pred || n > 500 || nb_copy_to(pred, p, sizeof(int64_t) * (size_t)n) < 0 ||
            nb_copy_to(b.y, y, sizeof(int64_t) * (size_t)n) < 0)
            rc = 1;
        for (int64_t i = 0; rc == 0 && i < n; i++)
            if (y[i] >= 0 && y[i] < 10 && p[i] >= 0 && p[i] < 10) confusion[y[i]][p[i]]++;
        nb_scope_end(s);
        if (rc) break;
    }
    nb_set_grad_enabled(prev);
    if (rc || nb_error()) {
        fprintf(stderr, "nabla eval: %s\n", nb_error() ? nb_error() : "evaluation failed");
        rc = 1;
    } else {
        int64_t right = 0, all = 0;
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 10; j++) {
                all += confusion[i][j];
                if (i == j) right += confusion[i][j];
            }
        printf("test accuracy %.4f (%lld of %lld)\n\nper class:\n", all ? (double)right / (double)all : 0.0,
               (long long)right, (long long)all);
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
    if (common_args("predict", argc, argv, &arch, &data, &top, pos, 2) != 2) {
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
