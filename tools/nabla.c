/* The nabla command: `nabla train` (the main job: a classifier trained on Fashion-MNIST or the
   user's data, with a progress line, TensorBoard logs, a saved model that carries its config, an
   SVG of the curves and the saved model's test accuracy), `nabla eval`, `nabla predict`,
   `nabla summary`, `nabla info FILE...`, `nabla plot LOGDIR...`, the ONNX commands (`nabla export`,
   `nabla run`: tools/cli_onnx.c) and the pretrained-model ones (`nabla generate`, `nabla embed`:
   tools/cli_hf.c). */
#include "cli_data.h"
#include "cli_dist.h"
#include "cli_finetune.h"
#include "cli_model.h"
#include "cli_hf.h"
#include "cli_completion.h"
#include "cli_onnx.h"
#include "cli_paths.h"
#include "cli_run.h"
#include "cli_serve.h"
#include "train_args.h"
#include <nabla.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int nabla_info_main(int argc, char **argv, FILE *out, FILE *err);
int nabla_plot_main(int argc, char **argv);
int cli_doctor_main(int argc, char **argv);

/* What the run's callbacks need: the checkpoint written after each epoch (model, optimizer, RNG,
   loader position) and, with --log-every, the writer of per-step losses. */
typedef struct {
    nb_optimizer *opt;
    nb_data_loader *loader;
    const char *path;
    nb_summary_writer *w;
    int64_t log_every;
    nb_scheduler *per_step; /* a schedule stepped after every batch (one-cycle) */
    int last_epoch;         /* the last epoch that ended (to tell an early stop) */
} run_ctx;

static bool save_checkpoint(nb_model *m, int epoch, const char *const *names, const double *values, int n, void *user) {
    (void)names; (void)values; (void)n;
    run_ctx *c = user;
    c->last_epoch = epoch;
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
    if (c->per_step && nb_sched_step(c->per_step) < 0) return false;
    (void)step, (void)loss; /* step/loss is logged by fit's health signals (nb_fit_opts.log_every) */
    return true;
}

/* fit's all_sum under several ranks: the step's loss sum, sample count and correct predictions
   summed over the ranks, so every figure printed and logged is the whole job's, not rank 0's share. */
static int sum_over_ranks(double *values, int n, void *ctx) {
    (void)ctx;
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_from_data(values, NB_SHAPE(n), NB_F64);
    int rc = t && nb_dist_all_reduce(t, NB_REDUCE_SUM) == 0 && nb_copy_to(t, values, sizeof(double) * (size_t)n) == 0 ? 0 : -1;
    nb_scope_end(s);
    return rc;
}

/* --label-smoothing: the cross entropy against smoothed targets (ctx: the smoothing). */
static nb_tensor *smoothed_ce(nb_tensor *pred, nb_tensor *y, void *ctx) {
    return nb_cross_entropy(pred, y, (nb_ce_opts){ .label_smoothing = *(const double *)ctx });
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

static bool same_shape(nb_shape a, nb_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dim[i] != b.dim[i]) return false;
    return true;
}

/* Counts predictions of m over l into confusion[true * k + predicted]; 0, or -1 with a message
   (a label outside 0..k-1 is an error naming it, never dropped from the count). */
static int confusion_of(nb_module *m, nb_data_loader *l, int64_t k, int64_t *confusion, const char *cmd) {
    bool prev = nb_set_grad_enabled(false);
    int rc = 0;
    int64_t seen = 0;
    nb_batch b;
    while (rc == 0 && nb_data_loader_next(l, &b)) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *logits = nb_forward(m, b.x);
        nb_tensor *pred = nb_argmax(logits, 1, false);
        int64_t n = nb_dim(b.y, 0), p[500], y[500];
        if (!pred || n > 500 || nb_dim(logits, 1) != k || nb_copy_to(pred, p, sizeof(int64_t) * (size_t)n) < 0 ||
            nb_copy_to(b.y, y, sizeof(int64_t) * (size_t)n) < 0) {
            if (pred && nb_dim(logits, 1) != k)
                fprintf(stderr, "nabla %s: the model gives %lld outputs for %lld classes\n", cmd,
                        (long long)nb_dim(logits, 1), (long long)k);
            else fprintf(stderr, "nabla %s: %s\n", cmd, nb_error() ? nb_error() : "evaluation failed");
            rc = -1;
        }
        for (int64_t i = 0; rc == 0 && i < n; i++) {
            if (y[i] < 0 || y[i] >= k) {
                fprintf(stderr, "nabla %s: label %lld of sample %lld is outside the model's %lld classes 0..%lld\n", cmd,
                        (long long)y[i], (long long)(seen + i), (long long)k, (long long)(k - 1));
                rc = -1;
            } else confusion[y[i] * k + p[i]]++;
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

/* Accuracy of a k x k confusion matrix (0 when empty). */
static double accuracy_of(const int64_t *confusion, int64_t k, int64_t *right, int64_t *all) {
    *right = *all = 0;
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < k; j++) {
            *all += confusion[i * k + j];
            if (i == j) *right += confusion[i * k + j];
        }
    return *all ? (double)*right / (double)*all : 0.0;
}

/* The saved model's accuracy on a data set: 0 and *acc, or -1 with a message. */
static int test_accuracy(nb_module *m, nb_dataset *ds, int64_t k, double *acc, int64_t *right, int64_t *all,
                         const char *cmd, nb_device dev) {
    int64_t *conf = calloc((size_t)(k * k), sizeof *conf);
    /* the whole set, whatever the rank (a loader's default under nb_dist is this rank's shard) */
    nb_data_loader *l = conf ? nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 500, .world_size = 1, .device = dev })
                             : NULL;
    int rc = -1;
    if (!l) fprintf(stderr, "nabla %s: %s\n", cmd, nb_error() ? nb_error() : "out of memory");
    else if (confusion_of(m, l, k, conf, cmd) == 0) {
        *acc = accuracy_of(conf, k, right, all);
        rc = 0;
    }
    nb_data_loader_free(l);
    free(conf);
    return rc;
}

/* --nproc N: the same command again under mpirun, as N ranks of this machine (without --nproc). */
static int launch_ranks(int nproc, int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK")) {
        fprintf(stderr, "nabla train: --nproc starts mpirun, but this process was started by an MPI launcher already; "
                        "leave out --nproc (mpirun -n N nabla train ...)\n");
        return 2;
    }
    char self[4096], n[16];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) snprintf(self, sizeof self, "%s", "nabla");
    else self[len] = 0;
    snprintf(n, sizeof n, "%d", nproc);
    char **args = calloc((size_t)argc + 12, sizeof *args);
    if (!args) { fprintf(stderr, "nabla train: out of memory\n"); return 1; }
    int k = 0;
    args[k++] = "mpirun";
    if (geteuid() == 0) args[k++] = "--allow-run-as-root"; /* containers and CI run as root */
    /* every rank may use several threads: no pinning of a rank to one core; more ranks than
       cores are allowed (they share them) */
    args[k++] = "--bind-to";
    args[k++] = "none";
    args[k++] = "--oversubscribe";
    args[k++] = "-n";
    args[k++] = n;
    args[k++] = self;
    args[k++] = "train";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nproc")) { i++; continue; }
        args[k++] = argv[i];
    }
    fflush(stdout);
    execvp("mpirun", args);
    fprintf(stderr, "nabla train: --nproc %d needs Open MPI's mpirun (Debian: apt install openmpi-bin): %s\n", nproc,
            strerror(errno));
    free(args);
    return 1;
}

static int train_ranks(train_opts o, int rank, int world);

/* Whether the global batch does not split evenly across world ranks (said when speak is set). */
static bool uneven_batch(int64_t batch, int world, bool speak) {
    if (batch % world == 0) return false;
    if (speak)
        fprintf(stderr, "nabla train: --batch-size %lld is the global batch, split across the %d ranks: give a multiple "
                        "of %d\n", (long long)batch, world, world);
    return true;
}

/* Several ranks on one machine share its cores: without --threads or NABLA_NUM_THREADS, each
   takes its part of them. */
static void share_cores(int threads) {
    if (threads > 0 || getenv("NABLA_NUM_THREADS")) return;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long ranks = local ? strtol(local, NULL, 10) : 1, cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (ranks > 1 && cores > 0) nb_set_num_threads((int)(cores / ranks > 0 ? cores / ranks : 1));
}

static int train(train_opts o) {
    if (o.threads > 0) nb_set_num_threads(o.threads);
    /* training, validation and the test all run under it, as a torch loop inside torch.autocast */
    if (o.autocast_bf16) nb_autocast(NB_BF16);
    /* data-parallel when started by mpirun: every rank trains on its shard of each global batch,
       rank 0 alone prints and writes */
    if (nb_dist_init(NULL, NULL) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        return 1;
    }
    int rank = nb_dist_rank(), world = nb_dist_world_size();
    if (world > 1) {
        share_cores(o.threads);
        /* ranks started with different options would train apart in silence, or wait on each
           other until the timeout: every rank refuses, naming the option and the ranks */
        if (cli_train_agree(&o) < 0) return cli_dist_end(2, "train");
        if (uneven_batch(o.batch, world, rank == 0)) {
            nb_dist_finalize();
            return 2;
        }
        o.batch /= world;
        if (rank != 0) o.quiet = true;
    }
    return cli_dist_end(train_ranks(o, rank, world), "train");
}

static int train_ranks(train_opts o, int rank, int world) {
    bool resnet = !strcmp(o.model, "resnet");
    bool augment = o.augment == 1 || (o.augment == -1 && resnet);
    const char *schedule = o.schedule ? o.schedule : resnet ? "onecycle" : "none";
    cli_data_spec spec = { o.data, o.labels, o.label, o.channels, o.height, o.width };
    cli_data train_src = { 0 }, test_src = { 0 };
    cli_model cm = { 0 };
    nb_dataset *train_ds = NULL, *val_ds = NULL, *test_ds = NULL, *aug_ds = NULL;
    nb_data_loader *loader = NULL, *val_loader = NULL;
    nb_optimizer *opt = NULL;
    nb_model *model = NULL;
    nb_scheduler *sched = NULL;
    nb_summary_writer *w = NULL;
    int rc = 1;
    char logdir[512], out[640], svg[640];
    nb_device dev = nb_device_parse(o.device); /* checked by the parser */
    nb_manual_seed(o.seed);
    if (cli_data_open(spec, true, &train_src, "train") < 0) return 1;
    if (o.test) {
        if (cli_data_open((cli_data_spec){ o.test, o.test_labels, o.label, o.channels, o.height, o.width }, false, &test_src,
                          "train") < 0)
            goto done;
    } else if (o.test_labels) {
        fprintf(stderr, "nabla train: --test-labels needs --test\n");
        goto done;
    } else if (cli_data_has_test(spec)) {
        cli_data_spec test_spec = spec; /* test images take the training images' shape */
        if (!strcmp(train_src.kind, "images") && train_src.sample.ndim == 3) {
            test_spec.channels = train_src.sample.dim[0];
            test_spec.height = train_src.sample.dim[1];
            test_spec.width = train_src.sample.dim[2];
        }
        if (cli_data_open(test_spec, false, &test_src, "train") < 0) goto done;
    }
    int64_t classes = train_src.classes > test_src.classes ? train_src.classes : test_src.classes;
    if (test_src.ds && !same_shape(train_src.sample, test_src.sample)) {
        char a[160], b[160];
        fprintf(stderr, "nabla train: training samples are %s but test samples are %s\n",
                nb_shape_str(train_src.sample, a, sizeof a), nb_shape_str(test_src.sample, b, sizeof b));
        goto done;
    }
    if (cli_model_build(o.model, train_src.sample, classes, train_src.names, &cm, "train") < 0) goto done;
    if (dev.type != NB_CPU) { /* --device cuda: the parameters there (the optimizer's state follows them), batches too */
        if (world > 1) {
            fprintf(stderr, "nabla train: --device %s with several ranks: not supported yet (NCCL is not built)\n", o.device);
            goto done;
        }
        if (!nb_module_to(cm.module, dev)) {
            fprintf(stderr, "nabla train: --device %s: %s\n", o.device, nb_error());
            goto done;
        }
    }
    if (world > 1) {
        /* rank 0's initial weights everywhere; gradients averaged over the ranks in backward */
        cm.module = nb_ddp(cm.module, (nb_ddp_opts){ 0 });
        if (!cm.module) {
            fprintf(stderr, "nabla train: rank %d: %s\n", rank, nb_error());
            goto done;
        }
    }
    logdir[0] = 0;
    char run_name[256];
    if (rank == 0 && cli_choose_logdir(&o, cli_run_name(o.model, run_name, sizeof run_name), logdir, sizeof logdir) < 0)
        goto done;
    snprintf(out, sizeof out, "%s", o.out ? o.out : "");
    if (!o.out) snprintf(out, sizeof out, "%s/model.safetensors", logdir);
    snprintf(svg, sizeof svg, "%s/curves.svg", logdir);
    if (cli_split_samples(train_src.ds, o.limit, o.val_split, o.seed, &train_ds, &val_ds) < 0) goto done;
    if (test_src.ds) test_ds = first_samples(test_src.ds, o.limit);
    if (augment) {
        if (train_src.sample.ndim != 3) {
            char sh[160];
            fprintf(stderr, "nabla train: --augment needs images [channels, height, width]; samples are %s\n",
                    nb_shape_str(train_src.sample, sh, sizeof sh));
            goto done;
        }
        nb_transform *aug = nb_transform_compose(nb_transform_random_crop(train_src.sample.dim[1], train_src.sample.dim[2], 2),
                                                 nb_transform_random_hflip(0.5), NULL);
        aug_ds = aug ? nb_data_map(train_ds, aug) : NULL; /* the mapped set owns the transform */
        if (!aug_ds) {
            fprintf(stderr, "nabla train: %s\n", nb_error());
            goto done;
        }
    }
    loader = nb_data_loader_new(aug_ds ? aug_ds : train_ds, (nb_loader_opts){ .batch_size = o.batch, .shuffle = true,
                                                                               .num_workers = o.workers, .seed = o.seed + 1,
                                                                               .device = dev });
    /* every rank validates on the whole split, so all of them pick the same best epoch */
    if (val_ds) val_loader = nb_data_loader_new(val_ds, (nb_loader_opts){ .batch_size = 500, .world_size = 1, .device = dev });
    /* --weight-decay 0 with AdamW is a zero decay, not the default 0.01 (NB_ZERO) */
    double wd = o.weight_decay_set && o.weight_decay == 0 ? NB_ZERO : o.weight_decay;
    if (!strcmp(o.optimizer, "sgd")) opt = nb_optim_sgd(cm.module, (nb_sgd_opts){ .lr = o.lr, .momentum = 0.9, .weight_decay = wd });
    else if (!strcmp(o.optimizer, "adam")) opt = nb_optim_adam(cm.module, (nb_adam_opts){ .lr = o.lr, .weight_decay = wd });
    else opt = nb_optim_adamw(cm.module, (nb_adamw_opts){ .lr = o.lr, .weight_decay = wd });
    model = loader && opt && (val_loader || !val_ds) ? nb_model_new(cm.module) : NULL;
    if (model) cm.module = NULL; /* the model owns the module now */
    w = model && rank == 0 ? nb_summary_open(logdir) : NULL;
    if ((rank == 0 && !w) || !model ||
        nb_model_compile(model, (nb_compile_opts){ .optimizer_obj = opt, .metrics = NB_METRIC_ACCURACY,
                                                   .loss_fn = o.label_smoothing > 0 ? smoothed_ce : NULL,
                                                   .loss_ctx = &o.label_smoothing }) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    nb_module *mod = nb_model_module(model);
    nb_optimizer *model_opt = opt;
    opt = NULL; /* the model owns it now */
    int64_t steps = nb_data_loader_len(loader);
    if (!strcmp(schedule, "onecycle")) sched = nb_sched_one_cycle(model_opt, o.lr, (int)(steps * o.epochs), (nb_one_cycle_opts){ 0 });
    else if (!strcmp(schedule, "cosine")) sched = nb_sched_cosine(model_opt, o.epochs, 0);
    if (strcmp(schedule, "none") && !sched) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
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
        /* TensorBoard (and nabla plot) drop what the interrupted run logged after the checkpoint */
        if (w && nb_summary_session_start(w, ck.global_step + 1) < 0) {
            fprintf(stderr, "nabla train: %s\n", nb_error());
            goto done;
        }
        if (initial_epoch >= o.epochs) {
            fprintf(stderr, "nabla train: %s already holds %d epochs; ask for more with --epochs\n", o.resume, initial_epoch);
            goto done;
        }
        if (sched && nb_sched_set_last_epoch(sched, !strcmp(schedule, "onecycle") ? (int)(initial_epoch * steps) : initial_epoch) < 0) {
            fprintf(stderr, "nabla train: %s\n", nb_error());
            goto done;
        }
    }
    char ckpt_path[640];
    snprintf(ckpt_path, sizeof ckpt_path, "%s/checkpoint.safetensors", logdir);
    run_ctx cc = { model_opt, loader, ckpt_path, w, o.log_every, !strcmp(schedule, "onecycle") ? sched : NULL, 0 };
    nb_callback cb = { .on_epoch_end = rank == 0 ? save_checkpoint : NULL, .on_batch_end = o.log_every || cc.per_step ? log_step : NULL, .user = &cc };
    char split[64] = "";
    if (world > 1) snprintf(split, sizeof split, " (%lld on each of %d ranks)", (long long)o.batch, world);
    if (!o.quiet)
        printf("nabla train: %s on %s (%lld training samples %s, %lld classes, %lld held out for validation), %s lr %g%s%s, "
               "batch %lld%s, %d epochs, %d workers%s%s, logs in %s\n",
               o.model, o.data ? o.data : "Fashion-MNIST", (long long)nb_dataset_len(train_ds),
               nb_shape_str(train_src.sample, (char[160]){ 0 }, 160), (long long)classes,
               (long long)(val_ds ? nb_dataset_len(val_ds) : 0), o.optimizer, o.lr,
               strcmp(schedule, "none") ? " " : "", strcmp(schedule, "none") ? schedule : "", (long long)o.batch * world,
               split, o.epochs,
               o.workers, augment ? ", augmented" : "", o.autocast_bf16 ? ", bf16 autocast" : "", logdir);
    if (!o.quiet && train_src.counts) { /* what the folder gave, so a class short of images shows */
        printf("images per class in %s:", train_src.where);
        for (int64_t c = 0; c < train_src.classes; c++)
            printf("%s %s %lld", c ? "," : "", train_src.names[c], (long long)train_src.counts[c]);
        printf("\n");
    }
    /* the validation split picks the best epoch, whose weights fit saves to out; the test set is
       touched once, at the end, by the model that was saved */
    if (cli_fit(model, loader, val_loader,
                (nb_fit_opts){ .epochs = o.epochs, .initial_epoch = initial_epoch, .verbose = o.quiet ? -1 : 0,
                               .tensorboard = w, .log_every = o.log_every ? o.log_every : 50,
                               .checkpoint_path = rank == 0 ? out : NULL, .callbacks = &cb,
                               .n_callbacks = 1, .lr_schedule = cc.per_step ? NULL : sched,
                               .all_sum = world > 1 ? sum_over_ranks : NULL, .clip_grad_norm = o.clip_grad_norm,
                               .early_stopping_patience = o.early_stopping, .restore_best_weights = o.early_stopping > 0 },
                &w) < 0)
        goto done;
    if (rank == 0 && !o.quiet && o.early_stopping && cc.last_epoch < o.epochs)
        printf("early stopping: %s did not improve for %d epochs; stopped after epoch %d\n", val_ds ? "val_loss" : "loss",
               o.early_stopping, cc.last_epoch);
    if (rank != 0) { /* rank 0 saves, tests and plots */
        rc = 0;
        goto done;
    }
    /* the best epoch's weights, saved again with the config and class names beside them */
    cm.module = mod;
    if (nb_load_state_dict(mod, out, (nb_load_opts){ 0 }) < 0) {
        fprintf(stderr, "nabla train: cannot read back the saved model: %s\n", nb_error());
        cm.module = NULL;
        goto done;
    }
    int saved = cli_model_save(&cm, out, "train");
    cm.module = NULL;
    if (saved < 0) goto done;
    nb_module_train(mod, false);
    double test_acc = 0;
    int64_t right = 0, all = 0;
    if (test_ds && test_accuracy(mod, test_ds, classes, &test_acc, &right, &all, "train", dev) < 0) goto done;
    rc = cli_plot_run(logdir, svg) < 0 ? 1 : 0;
    if (rc == 0 && !o.quiet) {
        if (test_ds) printf("test accuracy %.4f (%lld of %lld, the saved model)\n", test_acc, (long long)right, (long long)all);
        else printf("no test set (--test PATH names one); validation picked the saved model\n");
        printf("saved %s (the %s) and %s; TensorBoard logs and curves.svg in %s\n", out,
               val_ds ? "best epoch by validation loss" : "best epoch by training loss", ckpt_path, logdir);
    }
done:
    nb_summary_close(w);
    nb_sched_free(sched);
    nb_optim_free(opt);
    nb_model_free(model); /* frees the module and the optimizer it owns */
    cli_model_free(&cm);
    nb_data_loader_free(loader);
    nb_data_loader_free(val_loader);
    nb_dataset_free(aug_ds);
    nb_dataset_free(train_ds);
    nb_dataset_free(val_ds);
    nb_dataset_free(test_ds);
    cli_data_free(&train_src);
    cli_data_free(&test_src);
    return rc;
}

static int train_main(int argc, char **argv) {
    train_opts o = train_defaults();
    int rc = train_parse_args(argc, argv, &o, stdout, stderr);
    if (rc == 1) return 0;
    if (rc) return 2;
    if (o.hf_model) return cli_finetune(o);
    if (cli_train_replaces_input(&o)) return 2;
    if (o.nproc > 1) return uneven_batch(o.batch, o.nproc, true) ? 2 : launch_ranks(o.nproc, argc, argv);
    return train(o);
}

/* Parses the options of eval, predict and summary; the rest are positional. */
typedef struct {
    const char *arch, *data, *labels, *label, *input, *out;
    int top;
    int64_t limit;
} use_opts;

static int use_args(const char *cmd, int argc, char **argv, use_opts *o, const char **pos, int max_pos) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--model")) o->arch = argv[++i];
        else if (v && !strcmp(a, "--data")) o->data = argv[++i];
        else if (v && !strcmp(a, "--labels")) o->labels = argv[++i];
        else if (v && !strcmp(a, "--label")) o->label = argv[++i];
        else if (v && !strcmp(a, "--input")) o->input = argv[++i];
        else if (v && !strcmp(cmd, "predict") && (!strcmp(a, "-o") || !strcmp(a, "--out"))) o->out = argv[++i];
        else if (v && (!strcmp(a, "--limit") || !strcmp(a, "--top"))) {
            char *end;
            errno = 0;
            long long k = strtoll(argv[++i], &end, 10);
            bool top = !strcmp(a, "--top");
            if (!*argv[i] || *end || errno || k < 1 || (top && k > 1000)) {
                fprintf(stderr, "nabla %s: %s needs a whole number from 1 to %s, got \"%s\"\n", cmd, a,
                        top ? "1000" : "2^63", argv[i]);
                return -1;
            }
            if (top) o->top = (int)k;
            else o->limit = k;
        } else if (a[0] == '-') {
            static const char *const options[] = { "--model", "--data", "--labels", "--label", "--input", "--limit",
                                                    "--top", "--out", "-o", "--help" };
            bool valued = false;
            for (size_t k = 0; k < sizeof options / sizeof *options; k++) valued = valued || !strcmp(a, options[k]);
            if (valued) fprintf(stderr, "nabla %s: %s needs a value\n", cmd, a);
            else cli_unknown_option(stderr, cmd, a, options, sizeof options / sizeof *options);
            return -1;
        } else if (n == max_pos) {
            fprintf(stderr, "nabla %s: extra argument \"%s\"\n", cmd, a);
            return -1;
        } else pos[n++] = a;
    }
    if (strcmp(o->arch, "mlp") && strcmp(o->arch, "cnn")) {
        fprintf(stderr, "nabla %s: --model names the architecture of a file saved without its config: mlp or cnn, got \"%s\"\n",
                cmd, o->arch);
        return -1;
    }
    return n;
}

/* nabla eval MODEL: accuracy, per-class accuracy and the confusion matrix on the test set. */
static int eval_main(int argc, char **argv) {
    const char *usage_line = "usage: nabla eval MODEL.safetensors [--data PATH [--labels Y.npy] [--label COLUMN]] [--limit N]\n";
    use_opts uo = { .arch = "mlp" };
    const char *pos[1];
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("%s  accuracy, per-class accuracy and the confusion matrix of a saved model on the test split of\n"
               "  --data (Fashion-MNIST's by default; a source without a split is used whole); --limit N: its\n"
               "  first N samples, as nabla train --limit N reports them. --model mlp|cnn only for files saved\n"
               "  before models carried their config.\n", usage_line);
        return 0;
    }
    int given = use_args("eval", argc, argv, &uo, pos, 1);
    if (given != 1) {
        if (given >= 0) fprintf(stderr, "%s", usage_line); /* a bad option was named in one line already */
        return 2;
    }
    cli_model cm;
    if (cli_model_load(pos[0], uo.arch, &cm, "eval") < 0) return 1;
    if (!uo.data && !same_shape(cm.sample, (nb_shape){ 3, { 1, 28, 28 } })) {
        char a[160];
        fprintf(stderr, "nabla eval: %s takes samples %s, not Fashion-MNIST's [1, 28, 28]: pass the data to evaluate it on "
                        "with --data (a folder of images, a CSV or an NPY file)\n", pos[0], nb_shape_str(cm.sample, a, sizeof a));
        cli_model_free(&cm);
        return 2;
    }
    cli_data src;
    cli_data_spec spec = { .path = uo.data, .labels = uo.labels, .label = uo.label };
    if (cm.sample.ndim == 3) { /* image folders are converted to the model's input */
        spec.channels = cm.sample.dim[0];
        spec.height = cm.sample.dim[1];
        spec.width = cm.sample.dim[2];
    }
    if (cli_data_open(spec, false, &src, "eval") < 0) {
        cli_model_free(&cm);
        return 1;
    }
    int64_t k = cm.classes;
    nb_dataset *test = first_samples(src.ds, uo.limit);
    int64_t *confusion = calloc((size_t)(k * k), sizeof *confusion);
    nb_data_loader *l = test && confusion ? nb_data_loader_new(test, (nb_loader_opts){ .batch_size = 500 }) : NULL;
    int rc = 0;
    if (!same_shape(src.sample, cm.sample)) {
        char a[160], b[160];
        fprintf(stderr, "nabla eval: the model takes samples %s; the data's are %s\n", nb_shape_str(cm.sample, a, sizeof a),
                nb_shape_str(src.sample, b, sizeof b));
        rc = 1;
    } else if (!l) {
        fprintf(stderr, "nabla eval: %s\n", nb_error() ? nb_error() : "out of memory");
        rc = 1;
    } else if (confusion_of(cm.module, l, k, confusion, "eval") < 0) rc = 1;
    else {
        int64_t right, all;
        double acc = accuracy_of(confusion, k, &right, &all);
        printf("test accuracy %.4f (%lld of %lld)\n\nper class:\n", acc, (long long)right, (long long)all);
        for (int64_t i = 0; i < k; i++) {
            int64_t row = 0;
            for (int64_t j = 0; j < k; j++) row += confusion[i * k + j];
            printf("  %lld %-12s %.4f\n", (long long)i, cm.names[i], row ? (double)confusion[i * k + i] / (double)row : 0.0);
        }
        if (k <= 20) {
            printf("\nconfusion matrix (rows: true class, columns: predicted):\n     ");
            for (int64_t j = 0; j < k; j++) printf("%6lld", (long long)j);
            printf("\n");
            for (int64_t i = 0; i < k; i++) {
                printf("  %lld  ", (long long)i);
                for (int64_t j = 0; j < k; j++) printf("%6lld", (long long)confusion[i * k + j]);
                printf("\n");
            }
        }
    }
    nb_data_loader_free(l);
    free(confusion);
    nb_dataset_free(test);
    cli_data_free(&src);
    cli_model_free(&cm);
    return rc;
}

static bool has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), m = strlen(ext);
    return n > m && !strcasecmp(path + n - m, ext);
}

/* The samples of one input of nabla predict, as the model takes them: x [n, ...] f32 (in the
   current scope) and a name per sample ("photo.jpg", "test.csv[3]"). */
typedef struct {
    nb_tensor **parts; /* one per file (an image) or array, joined once at the end */
    int nparts;
    char **names;
    int64_t n;
} predict_batch;

static int add_part(predict_batch *p, nb_tensor *x) {
    nb_tensor **g = realloc(p->parts, sizeof *g * (size_t)(p->nparts + 1));
    if (!g) return -1;
    p->parts = g;
    p->parts[p->nparts++] = x;
    p->n += nb_dim(x, 0);
    return 0;
}

static int add_names(predict_batch *p, const char *path, int64_t n, bool single) {
    char **g = realloc(p->names, sizeof *g * (size_t)(p->n + n));
    if (!g) return -1;
    p->names = g;
    for (int64_t i = 0; i < n; i++) {
        char buf[4200];
        if (single) snprintf(buf, sizeof buf, "%s", path);
        else snprintf(buf, sizeof buf, "%s[%lld]", path, (long long)i);
        if (!(p->names[p->n + i] = strdup(buf))) return -1;
    }
    return 0;
}

/* One image converted and resized to the model's input, as in training; NULL with an error. */
static nb_tensor *image_input(const char *path, nb_shape sample) {
    nb_tensor *raw = nb_read_image(path);
    if (!raw || sample.ndim != 3) return raw ? nb_cast(raw, NB_F32) : NULL;
    nb_transform *t = nb_transform_compose(nb_transform_to_float(1.0 / 255.0), nb_transform_channels((int)sample.dim[0]),
                                           nb_transform_resize(sample.dim[1], sample.dim[2]), NULL);
    nb_tensor *x = t ? nb_transform_apply(t, raw, 0) : NULL;
    nb_transform_free(t);
    return x ? nb_unsqueeze(x, 0) : NULL;
}

static int predict_input(const char *path, const use_opts *uo, const cli_model *cm, predict_batch *out, int depth);

/* Every file of a folder (sorted; sub-folders too, one level down), each an image. */
static int predict_folder(const char *dir, const use_opts *uo, const cli_model *cm, predict_batch *out, int depth) {
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, alphasort), rc = 0;
    if (n < 0) {
        fprintf(stderr, "nabla predict: cannot read the folder %s: %s\n", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[4200];
        if (rc == 0 && list[i]->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
            struct stat st;
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && depth > 0) {
                fprintf(stderr, "nabla predict: %s: folders nest deeper than class folders\n", path);
                rc = -1;
            } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) rc = predict_folder(path, uo, cm, out, depth + 1);
            else {
                nb_tensor *x = image_input(path, cm->sample);
                if (!x) {
                    fprintf(stderr, "nabla predict: %s\n", nb_error());
                    rc = -1;
                } else if (add_names(out, path, 1, true) < 0 || add_part(out, x) < 0) {
                    fprintf(stderr, "nabla predict: out of memory\n");
                    rc = -1;
                }
            }
        }
        free(list[i]);
    }
    free(list);
    return rc;
}

/* One input of nabla predict: a folder, an image, a CSV, an NPY or an IDX file. */
static int predict_input(const char *path, const use_opts *uo, const cli_model *cm, predict_batch *out, int depth) {
    struct stat st;
    if (stat(path, &st) < 0) {
        fprintf(stderr, "nabla predict: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) return predict_folder(path, uo, cm, out, depth);
    nb_tensor *raw = NULL;
    bool image = has_ext(path, ".png") || has_ext(path, ".jpg") || has_ext(path, ".jpeg");
    if (image) raw = image_input(path, cm->sample);
    else if (has_ext(path, ".csv")) { /* features only, unless --label names the column to leave out */
        nb_csv_opts co = { .no_label = !uo->label };
        if (uo->label) {
            char *end;
            long k = strtol(uo->label, &end, 10);
            if (*uo->label && !*end) co.label_index = (int)k;
            else co.label = uo->label;
        }
        nb_dataset *ds = nb_data_csv(path, co);
        int64_t n = ds ? nb_dataset_len(ds) : 0, *idx = ds ? calloc((size_t)(n ? n : 1), sizeof *idx) : NULL;
        for (int64_t i = 0; idx && i < n; i++) idx[i] = i;
        nb_batch b = { 0 };
        if (idx && nb_dataset_get_batch(ds, idx, n, &b) == 0) raw = b.x;
        free(idx);
        nb_dataset_free(ds);
    } else raw = has_ext(path, ".npy") ? nb_load_npy(path) : nb_read_idx(path);
    if (!raw) {
        fprintf(stderr, "nabla predict: %s\n", nb_error() ? nb_error() : "out of memory");
        return -1;
    }
    int64_t per = 1;
    for (int i = 0; i < cm->sample.ndim; i++) per *= cm->sample.dim[i];
    /* one sample, or samples along axis 0 each of the model's size (a CSV of 5 columns is not
       5/4 samples of 4) */
    if (nb_numel(raw) == 0 || (nb_numel(raw) != per && (nb_ndim(raw) < 1 || nb_numel(raw) / nb_dim(raw, 0) != per))) {
        char a[160], b[160];
        fprintf(stderr, "nabla predict: %s holds %s %s; the model takes samples %s%s\n", path,
                nb_shape_str(nb_shape_of(raw), a, sizeof a), nb_dtype_name(nb_dtype_of(raw)),
                nb_shape_str(cm->sample, b, sizeof b), has_ext(path, ".csv") && !uo->label ? " (a label column? name it with --label)" : "");
        return -1;
    }
    nb_shape batch = { cm->sample.ndim + 1, { -1 } };
    for (int i = 0; i < cm->sample.ndim; i++) batch.dim[i + 1] = cm->sample.dim[i];
    nb_tensor *x = nb_reshape(raw, batch);
    x = nb_dtype_of(raw) == NB_U8 ? nb_mul_scalar(nb_cast(x, NB_F32), 1.0 / 255.0) : nb_cast(x, NB_F32);
    int64_t n = x ? nb_dim(x, 0) : 0;
    if (!x || add_names(out, path, n, image) < 0 || add_part(out, x) < 0) {
        fprintf(stderr, "nabla predict: %s\n", nb_error() ? nb_error() : "out of memory");
        return -1;
    }
    return 0;
}

/* nabla predict MODEL INPUTS...: the top classes of every sample of image files, folders of
   images, CSV, NPY or IDX files; -o FILE.csv writes each sample's class and probability. */
static int predict_main(int argc, char **argv) {
    const char *usage_line = "usage: nabla predict MODEL.safetensors INPUTS... [--top K] [-o predictions.csv] [--label COLUMN]\n";
    use_opts uo = { .arch = "mlp", .top = 3 };
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("%s  INPUTS: PNG or JPEG images, folders of them (class sub-folders too), CSV files (every column a\n"
               "  feature, unless --label names one to leave out), .npy arrays or IDX files (plain or gzip), holding\n"
               "  samples of the model's input shape (images are converted and resized to it; u8 values are scaled\n"
               "  by 1/255, as in training). Prints the top K classes of the first 20 samples; -o FILE.csv writes\n"
               "  every sample's predicted class and its probability (file,class,probability).\n", usage_line);
        return 0;
    }
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int given = pos ? use_args("predict", argc, argv, &uo, pos, argc) : -1;
    if (given < 2) {
        if (given >= 0) fprintf(stderr, "%s", usage_line);
        free(pos);
        return 2;
    }
    cli_model cm;
    if (cli_model_load(pos[0], uo.arch, &cm, "predict") < 0) {
        free(pos);
        return 1;
    }
    nb_scope *s = nb_scope_begin();
    predict_batch in = { 0 };
    int rc = 0;
    for (int i = 1; i < given && rc == 0; i++) rc = predict_input(pos[i], &uo, &cm, &in, 0) < 0 ? 1 : 0;
    int64_t k = cm.classes, top = uo.top < k ? uo.top : k, n = in.n;
    float *p = NULL;
    nb_tensor *all = rc == 0 ? nb_cat(in.parts, in.nparts, 0) : NULL;
    if (rc == 0 && !all) {
        fprintf(stderr, "nabla predict: %s\n", nb_error() ? nb_error() : "out of memory");
        rc = 1;
    }
    if (rc == 0) {
        bool prev = nb_set_grad_enabled(false);
        nb_tensor *probs = NULL;
        for (int64_t a = 0; a < n; a += 256) { /* in batches, so a large input does not need one huge forward */
            nb_tensor *part = nb_softmax(nb_forward(cm.module, nb_slice(all, 0, a, a + 256 < n ? a + 256 : n, 1)), 1);
            probs = probs ? nb_cat((nb_tensor *const[]){ probs, part }, 2, 0) : part;
        }
        nb_set_grad_enabled(prev);
        p = malloc(sizeof(float) * (size_t)(n * k));
        if (!probs || !p || nb_dim(probs, 1) != k || nb_copy_to(probs, p, sizeof(float) * (size_t)(n * k)) < 0) {
            fprintf(stderr, "nabla predict: %s\n", nb_error() ? nb_error() : "out of memory");
            rc = 1;
        }
    }
    FILE *csv = rc == 0 && uo.out ? fopen(uo.out, "w") : NULL;
    if (rc == 0 && uo.out && !csv) {
        fprintf(stderr, "nabla predict: cannot write %s: %s\n", uo.out, strerror(errno));
        rc = 1;
    }
    if (csv) fprintf(csv, "file,class,probability\n");
    int64_t shown = n < 20 ? n : 20;
    bool *used = rc == 0 ? calloc((size_t)k, 1) : NULL;
    for (int64_t i = 0; rc == 0 && used && i < n; i++) {
        memset(used, 0, (size_t)k);
        if (i < shown) printf("%s:", in.names[i]);
        for (int64_t j = 0; j < (i < shown ? top : 1); j++) { /* selection by repeated maximum */
            int64_t best = -1;
            for (int64_t c = 0; c < k; c++)
                if (!used[c] && (best < 0 || p[i * k + c] > p[i * k + best])) best = c;
            used[best] = true;
            if (i < shown) printf("  %s %.3f", cm.names[best], p[i * k + best]);
            if (csv && j == 0) { /* RFC 4180: a field with a comma or a quote is quoted, quotes doubled */
                const char *fields[2] = { in.names[i], cm.names[best] };
                for (int f = 0; f < 2; f++) {
                    bool q = strpbrk(fields[f], ",\"\n\r") != NULL;
                    if (q) fputc('"', csv);
                    for (const char *c = fields[f]; *c; c++) {
                        if (*c == '"') fputc('"', csv);
                        fputc(*c, csv);
                    }
                    if (q) fputc('"', csv);
                    fputc(',', csv);
                }
                fprintf(csv, "%.6f\n", p[i * k + best]);
            }
        }
        if (i < shown) printf("\n");
    }
    if (rc == 0 && n > shown) printf("(%lld more samples not shown%s)\n", (long long)(n - shown), uo.out ? "" : "; -o FILE.csv writes all");
    if (csv && (fclose(csv) != 0) && rc == 0) {
        fprintf(stderr, "nabla predict: cannot write %s: %s\n", uo.out, strerror(errno));
        rc = 1;
    }
    if (rc == 0 && uo.out) printf("wrote %lld predictions to %s\n", (long long)n, uo.out);
    free(used);
    free(p);
    for (int64_t i = 0; i < in.n; i++) free(in.names[i]);
    free(in.names);
    free(in.parts);
    nb_scope_end(s);
    cli_model_free(&cm);
    free(pos);
    return rc;
}

/* Parses "C,H,W" into a shape. */
static bool parse_shape(const char *text, nb_shape *s) {
    s->ndim = 0;
    const char *p = text;
    while (*p && s->ndim < NB_MAX_DIMS) {
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (end == p || errno || d < 1 || d > (1LL << 31)) return false;
        s->dim[s->ndim++] = d;
        if (*end == 0) return true;
        if (*end != ',' && *end != 'x') return false;
        p = end + 1;
    }
    return false;
}

/* nabla summary MODEL|NAME|FILE.json: layers, output shapes and parameter counts. */
static int summary_main(int argc, char **argv) {
    const char *usage_line = "usage: nabla summary MODEL.safetensors | mlp|cnn|resnet|FILE.json [--input C,H,W] [--classes K]\n";
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("%s  each layer of a saved model or a config, its output shape and parameter count, as Keras'\n"
               "  model.summary(); a config is built for --input (default 1,28,28) and --classes (default 10)\n",
               usage_line);
        return 0;
    }
    const char *what = NULL, *input = "1,28,28";
    int64_t classes = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc) input = argv[++i];
        else if (!strcmp(argv[i], "--classes") && i + 1 < argc) {
            char *end;
            long long k = strtoll(argv[++i], &end, 10);
            if (!*argv[i] || *end || k < 1 || k > 100000) {
                fprintf(stderr, "nabla summary: --classes needs a whole number from 1 to 100000, got \"%s\"\n", argv[i]);
                return 2;
            }
            classes = k;
        } else if (argv[i][0] == '-') {
            static const char *const options[] = { "--input", "--classes", "--help" };
            cli_unknown_option(stderr, "summary", argv[i], options, sizeof options / sizeof *options);
            return 2;
        } else if (what) {
            fprintf(stderr, "nabla summary: extra argument \"%s\"\n%s", argv[i], usage_line);
            return 2;
        } else what = argv[i];
    }
    if (!what) {
        fprintf(stderr, "%s", usage_line);
        return 2;
    }
    cli_model cm;
    size_t len = strlen(what);
    bool saved = len > 12 && !strcmp(what + len - 12, ".safetensors");
    nb_shape sample;
    if (!saved && !parse_shape(input, &sample)) {
        fprintf(stderr, "nabla summary: --input needs dimensions like 1,28,28, got \"%s\"\n", input);
        return 2;
    }
    char **names = calloc((size_t)classes, sizeof *names);
    int rc = !names ? -1
           : saved ? cli_model_load(what, "mlp", &cm, "summary")
                   : cli_model_build(what, sample, classes, names, &cm, "summary");
    free(names);
    if (rc < 0) return 1;
    char *text = nb_module_summary(cm.module, cm.sample);
    if (!text) {
        fprintf(stderr, "nabla summary: %s\n", nb_error());
        cli_model_free(&cm);
        return 1;
    }
    fputs(text, stdout);
    free(text);
    cli_model_free(&cm);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: nabla COMMAND [ARGS]\n"
               "  train [options]       train a classifier (nabla train --help)\n"
               "  eval MODEL            test accuracy, per-class accuracy, confusion matrix\n"
               "  predict MODEL INPUTS  top classes of the samples of an IDX, NPY or image file\n"
               "  summary MODEL|CONFIG  layers, output shapes and parameter counts\n"
               "  info FILE...          a safetensors, .npy or .onnx file's tensors, shapes and metadata\n"
               "  export MODEL -o F     a saved model as an ONNX file (nabla export --help)\n"
               "  run MODEL.onnx ...    an ONNX model on NPY inputs (nabla run --help)\n"
               "  generate DIR --prompt T   a Hugging Face causal LM continues T (nabla generate --help)\n"
               "  embed DIR --text T    sentence embeddings of a Hugging Face encoder (nabla embed --help)\n"
               "  serve --model_name N --model_base_path D   a model server: TF Serving REST and KServe v2 (nabla serve --help)\n"
               "  plot LOGDIR... -o F   TensorBoard scalars as SVG curves (nabla plot for its options)\n"
               "  completion bash|zsh   a shell completion script (nabla completion --help)\n"
               "  manpage               this command's manual page, as troff\n"
               "  doctor LOGDIR...      diagnoses training runs from their logs (nabla doctor --help)\n"
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
    if (!strcmp(cmd, "summary")) return summary_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) {
        if (argc >= 3 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help"))) {
            printf("usage: nabla info FILE...   (a .safetensors state dict or checkpoint, a .npy array or a .onnx model)\n");
            return 0;
        }
        return nabla_info_main(argc - 1, argv + 1, stdout, stderr);
    }
    if (!strcmp(cmd, "export")) return cli_export_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cli_run_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate")) return cli_generate_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed")) return cli_embed_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cli_serve_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "plot")) return nabla_plot_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "completion") || !strcmp(cmd, "manpage")) return cli_completion_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "doctor")) return cli_doctor_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("nabla %s\n", nb_version());
        return 0;
    }
    fprintf(stderr, "nabla: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
