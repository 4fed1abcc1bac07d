/* The Keras-style model: fit matches the explicit loop, history and validation, callbacks and
   early stopping, evaluate and predict, and errors for misuse. */
#include "test_util.h"
#include <stdlib.h>
#include <unistd.h>

static nb_tensor *x_train, *y_train, *x_test, *y_test;
static const int64_t N_TRAIN = 12000;

static nb_tensor *images(const char *name, int64_t n) {
    char path[256];
    snprintf(path, sizeof path, "/usr/share/datasets/fashion-mnist/%s", name);
    nb_scope *s = nb_scope_begin();
    nb_tensor *raw = nb_read_idx(path);
    nb_tensor *x = raw ? nb_keep(nb_mul_scalar(nb_cast(nb_reshape(nb_slice(raw, 0, 0, n, 1), NB_SHAPE(-1, 784)), NB_F32), 1.0 / 255)) : NULL;
    nb_scope_end(s);
    return x;
}

static nb_tensor *labels(const char *name, int64_t n) {
    char path[256];
    snprintf(path, sizeof path, "/usr/share/datasets/fashion-mnist/%s", name);
    nb_scope *s = nb_scope_begin();
    nb_tensor *raw = nb_read_idx(path);
    nb_tensor *y = raw ? nb_keep(nb_cast(nb_slice(raw, 0, 0, n, 1), NB_I64)) : NULL;
    nb_scope_end(s);
    return y;
}

static int load(void **state) {
    (void)state;
    x_train = images("train-images-idx3-ubyte.gz", N_TRAIN);
    y_train = labels("train-labels-idx1-ubyte.gz", N_TRAIN);
    x_test = images("t10k-images-idx3-ubyte.gz", 10000);
    y_test = labels("t10k-labels-idx1-ubyte.gz", 10000);
    return x_train && y_train && x_test && y_test ? 0 : -1;
}

static int unload(void **state) {
    (void)state;
    nb_release(x_train);
    nb_release(y_train);
    nb_release(x_test);
    nb_release(y_test);
    return 0;
}

static nb_module *mlp(void) {
    nb_manual_seed(0);
    return nb_nn_sequential(nb_nn_linear(784, 128), nb_nn_relu(), nb_nn_linear(128, 10), NULL);
}

static double accuracy(nb_module *m) {
    nb_scope *s = nb_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    double acc = nb_item(nb_mean_all(nb_eq(nb_argmax(nb_forward(m, x_test), 1, false), y_test)));
    nb_set_grad_enabled(prev);
    nb_scope_end(s);
    return acc;
}

/* nb_model_fit gives the explicit loop's result for the same seed and settings. */
static void test_fit_matches_explicit_loop(void **state) {
    (void)state;
    /* the explicit loop, over the same loader fit builds */
    nb_module *net = mlp();
    nb_optimizer *opt = nb_optim_adamw(net, (nb_adamw_opts){ .lr = 1e-3 });
    nb_dataset *ds = nb_data_tensors(x_train, y_train);
    nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 64, .shuffle = true, .seed = 5 });
    for (int epoch = 0; epoch < 2; epoch++) {
        nb_batch b;
        while (nb_data_loader_next(l, &b)) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *loss = nb_cross_entropy(nb_forward(net, b.x), b.y, (nb_ce_opts){ 0 });
            nb_optim_zero_grad(opt);
            nb_backward(loss);
            nb_optim_step(opt);
            nb_scope_end(s);
        }
    }
    double loop_acc = accuracy(net);
    nb_data_loader_free(l);
    nb_dataset_free(ds);
    nb_optim_free(opt);
    nb_module_free(net);

    nb_model *model = nb_model_new(mlp());
    assert_int_equal(nb_model_compile(model, (nb_model_compile_opts){ .optimizer = NB_OPTIM_ADAMW, .lr = 1e-3,
                                                                 .loss = NB_LOSS_SPARSE_CE_LOGITS, .metrics = NB_METRIC_ACCURACY }), 0);
    nb_history *h = nb_model_fit(model, x_train, y_train, (nb_fit_opts){ .batch_size = 64, .epochs = 2, .seed = 5, .verbose = -1 });
    assert_non_null(h);
    double fit_acc = accuracy(nb_model_module(model));
    if (fabs(fit_acc - loop_acc) > 0.003) fail_msg("fit reached %.4f, the loop %.4f", fit_acc, loop_acc);
    assert_true(fit_acc > 0.8);
    assert_int_equal(nb_history_epochs(h), 2);
    assert_true(nb_history_get(h, "loss", 1) < nb_history_get(h, "loss", 0));
    const char *names[4];
    double values[4];
    int k = nb_model_evaluate(model, x_test, y_test, 500, names, values, 4);
    assert_int_equal(k, 2);
    assert_string_equal(names[1], "accuracy");
    assert_true(fabs(values[1] - fit_acc) < 1e-6); /* accuracy() averages in f32 */
    nb_scope *s = nb_scope_begin();
    nb_tensor *pred = nb_model_predict(model, nb_slice(x_test, 0, 0, 1000, 1), 300);
    assert_int_equal(nb_dim(pred, 0), 1000);
    assert_int_equal(nb_dim(pred, 1), 10);
    nb_scope_end(s);
    nb_history_free(h);
    nb_model_free(model);
    assert_null(nb_error());
}

static void test_validation_split_and_history(void **state) {
    (void)state;
    nb_model *model = nb_model_new(mlp());
    nb_model_compile(model, (nb_model_compile_opts){ .metrics = NB_METRIC_ACCURACY | NB_METRIC_TOP5_ACCURACY });
    nb_history *h = nb_model_fit(model, x_train, y_train,
                                 (nb_fit_opts){ .batch_size = 128, .epochs = 1, .validation_split = 0.25, .verbose = -1 });
    assert_non_null(h);
    const char *want[] = { "loss", "accuracy", "top5_accuracy", "val_loss", "val_accuracy", "val_top5_accuracy" };
    assert_int_equal(nb_history_num_metrics(h), 6);
    for (int i = 0; i < 6; i++) assert_string_equal(nb_history_metric(h, i), want[i]);
    assert_true(nb_history_get(h, "val_top5_accuracy", 0) >= nb_history_get(h, "val_accuracy", 0));
    assert_true(isnan(nb_history_get(h, "nope", 0)));
    nb_history_free(h);
    nb_model_free(model);
}

static int epochs_seen;
static bool stop_after_two(nb_model *m, int epoch, const char *const *names, const double *values, int n, void *user) {
    (void)m; (void)names; (void)values; (void)n; (void)user;
    epochs_seen = epoch;
    return epoch < 2;
}

static void test_callbacks_and_early_stopping(void **state) {
    (void)state;
    nb_model *model = nb_model_new(mlp());
    nb_model_compile(model, (nb_model_compile_opts){ 0 });
    nb_callback cb = { .on_epoch_end = stop_after_two };
    nb_tensor *x = nb_slice(x_train, 0, 0, 2000, 1), *y = nb_slice(y_train, 0, 0, 2000, 1);
    nb_history *h = nb_model_fit(model, x, y, (nb_fit_opts){ .epochs = 5, .verbose = -1, .callbacks = &cb, .n_callbacks = 1 });
    assert_int_equal(nb_history_epochs(h), 2);
    assert_int_equal(epochs_seen, 2);
    nb_history_free(h);
    /* a learning rate too large to improve: early stopping ends the run and restores the best */
    nb_model *bad = nb_model_new(mlp());
    nb_model_compile(bad, (nb_model_compile_opts){ .optimizer = NB_OPTIM_SGD, .lr = 50 });
    char ckpt[] = "/tmp/nabla_best_XXXXXX";
    int fd = mkstemp(ckpt);
    assert_true(fd >= 0);
    close(fd);
    h = nb_model_fit(bad, x, y, (nb_fit_opts){ .epochs = 20, .verbose = -1, .validation_split = 0.2,
                                               .early_stopping_patience = 2, .restore_best_weights = true,
                                               .checkpoint_path = ckpt });
    assert_non_null(h);
    int ran = nb_history_epochs(h);
    assert_true(ran < 20);
    /* the best-only checkpoint holds the best epoch, and so do the restored weights */
    double best = INFINITY;
    for (int e = 0; e < ran; e++) best = fmin(best, nb_history_get(h, "val_loss", e));
    nb_model *reloaded = nb_model_new(mlp());
    nb_model_compile(reloaded, (nb_model_compile_opts){ 0 });
    assert_int_equal(nb_load_state_dict(nb_model_module(reloaded), ckpt, (nb_load_opts){ 0 }), 0);
    const char *names[2];
    double v_ckpt[2], v_restored[2];
    nb_tensor *vx = nb_slice(x, 0, 1600, 2000, 1), *vy = nb_slice(y, 0, 1600, 2000, 1);
    assert_int_equal(nb_model_evaluate(reloaded, vx, vy, 0, names, v_ckpt, 2), 1);
    assert_int_equal(nb_model_evaluate(bad, vx, vy, 0, names, v_restored, 2), 1);
    assert_true(fabs(v_ckpt[0] - best) < 1e-5 * fabs(best) + 1e-6);
    assert_true(fabs(v_restored[0] - best) < 1e-5 * fabs(best) + 1e-6);
    nb_release(vx);
    nb_release(vy);
    nb_model_free(reloaded);
    unlink(ckpt);
    nb_history_free(h);
    nb_model_free(bad);
    nb_release(x);
    nb_release(y);
    nb_model_free(model);
    nb_error_clear();
}

static void test_ready_made_callbacks(void **state) {
    (void)state;
    char dir[] = "/tmp/nabla_model_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char csv[128], ckpt[128], logdir[128];
    snprintf(csv, sizeof csv, "%s/log.csv", dir);
    snprintf(ckpt, sizeof ckpt, "%s/best.safetensors", dir);
    snprintf(logdir, sizeof logdir, "%s/run", dir);
    nb_model *model = nb_model_new(mlp());
    nb_model_compile(model, (nb_model_compile_opts){ .optimizer = NB_OPTIM_SGD, .lr = 0.1, .metrics = NB_METRIC_ACCURACY });
    nb_summary_writer *w = nb_summary_open(logdir);
    assert_non_null(w);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_slice(x_train, 0, 0, 3000, 1), *y = nb_slice(y_train, 0, 0, 3000, 1);
    nb_history *h = nb_model_fit(model, x, y, (nb_fit_opts){ .epochs = 2, .verbose = -1, .validation_split = 0.2,
                                                             .tensorboard = w, .tensorboard_histograms = true,
                                                             .csv_path = csv, .checkpoint_path = ckpt });
    assert_non_null(h);
    nb_summary_close(w);
    /* the CSV: a header and one row per epoch */
    FILE *f = fopen(csv, "r");
    assert_non_null(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "epoch,loss,accuracy,val_loss,val_accuracy\n");
    int rows = 0;
    while (fgets(line, sizeof line, f)) rows++;
    fclose(f);
    assert_int_equal(rows, 2);
    /* the best weights load strictly into the same architecture */
    nb_module *fresh = mlp();
    assert_int_equal(nb_load_state_dict(fresh, ckpt, (nb_load_opts){ 0 }), 0);
    nb_module_free(fresh);
    /* TensorBoard: the epoch scalars, read back */
    nb_scalar_log *log = nb_scalar_log_read(logdir);
    assert_non_null(log);
    int i = nb_scalar_log_find(log, "epoch/val_loss");
    assert_true(i >= 0);
    const int64_t *steps;
    const double *walls, *vals;
    assert_int_equal(nb_scalar_log_points(log, i, &steps, &walls, &vals), 2);
    assert_true(fabs(vals[1] - nb_history_get(h, "val_loss", 1)) < 1e-5 * fabs(vals[1]) + 1e-6);
    assert_true(nb_scalar_log_find(log, "lr") >= 0);
    nb_scalar_log_free(log);
    nb_history_free(h);
    nb_scope_end(s);
    nb_model_free(model);
    assert_null(nb_error());
}

static void test_lr_schedule_callback(void **state) {
    (void)state;
    nb_module *net = mlp();
    nb_optimizer *opt = nb_optim_sgd(net, (nb_sgd_opts){ .lr = 0.1 });
    nb_scheduler *sched = nb_sched_step_lr(opt, 1, 0.5);
    nb_model *model = nb_model_new(net);
    nb_model_compile(model, (nb_model_compile_opts){ .optimizer_obj = opt });
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_slice(x_train, 0, 0, 1000, 1), *y = nb_slice(y_train, 0, 0, 1000, 1);
    nb_history *h = nb_model_fit(model, x, y, (nb_fit_opts){ .epochs = 3, .verbose = -1, .lr_schedule = sched });
    assert_non_null(h);
    assert_true(fabs(nb_optim_get_lr(opt, 0) - 0.1 * 0.125) < 1e-12); /* halved after each of 3 epochs */
    nb_history_free(h);
    nb_scope_end(s);
    nb_sched_free(sched);
    nb_model_free(model); /* frees the optimizer it was given */
}

static void test_misuse(void **state) {
    (void)state;
    nb_model *model = nb_model_new(mlp());
    assert_null(nb_model_fit(model, x_train, y_train, (nb_fit_opts){ .verbose = -1 }));
    ASSERT_ERROR_CONTAINS("nb_model_fit: the model is not compiled");
    nb_model_compile(model, (nb_model_compile_opts){ 0 });
    nb_tensor *y = nb_slice(y_train, 0, 0, 10, 1);
    assert_null(nb_model_fit(model, x_train, y, (nb_fit_opts){ .verbose = -1 }));
    ASSERT_ERROR_CONTAINS("must have the same number of samples");
    assert_null(nb_model_fit(model, x_train, y_train, (nb_fit_opts){ .validation_split = 1.5, .verbose = -1 }));
    ASSERT_ERROR_CONTAINS("validation_split must be in [0, 1)");
    nb_tensor *wrong = nb_zeros(NB_SHAPE(8, 785), NB_F32);
    assert_null(nb_model_predict(model, wrong, 0));
    ASSERT_ERROR_CONTAINS("nb_nn_linear 0: expected input [..., 784], got [8, 785]");
    nb_release(wrong);
    nb_release(y);
    nb_model_free(model);
}

/* ---- a model with more than 512 state entries: early stopping restores all of them ---- */

/* A loss that grows by one each call (on top of the mean output, which gives every weight a
   gradient): the first epoch is the best, so early stopping ends the run and restores it. */
static nb_tensor *growing_loss(nb_tensor *pred, nb_tensor *target, void *ctx) {
    (void)target;
    double *calls = ctx;
    *calls += 1;
    return nb_add_scalar(nb_mean_all(pred), *calls);
}

typedef struct {
    int epoch;      /* copy the weights at the end of this epoch */
    int n;          /* state entries */
    float **copies; /* their values then */
} weights_at;

static nb_named_tensor *entries_of(nb_module *m, int *n) {
    *n = nb_module_state_entries(m, NULL, 0);
    nb_named_tensor *e = calloc((size_t)*n, sizeof *e);
    assert_int_equal(nb_module_state_entries(m, e, *n), *n);
    return e;
}

static bool copy_weights(nb_model *m, int epoch, const char *const *names, const double *values, int k, void *user) {
    weights_at *w = user;
    if (epoch != w->epoch) return true;
    nb_named_tensor *e = entries_of(nb_model_module(m), &w->n);
    w->copies = calloc((size_t)w->n, sizeof *w->copies);
    for (int i = 0; i < w->n; i++) {
        size_t bytes = sizeof(float) * (size_t)nb_numel(e[i].tensor);
        w->copies[i] = malloc(bytes);
        assert_int_equal(nb_copy_to(e[i].tensor, w->copies[i], bytes), 0);
    }
    free(e);
    return true;
}

static void test_restore_best_many_entries(void **state) {
    (void)state;
    enum { LAYERS = 300 }; /* 600 state entries, past the 512 the best-weights copy once held */
    nb_manual_seed(11);
    nb_module *seq = nb_nn_sequential(NULL);
    for (int i = 0; i < LAYERS; i++) nb_nn_sequential_add(seq, nb_nn_linear(2, 2));
    nb_model *model = nb_model_new(seq);
    double calls = 0;
    assert_int_equal(nb_model_compile(model, (nb_model_compile_opts){ .optimizer = NB_OPTIM_SGD, .lr = 0.1,
                                                                 .loss_fn = growing_loss, .loss_ctx = &calls }), 0);
    nb_tensor *x = nb_randn(NB_SHAPE(8, 2), NB_F32), *y = nb_zeros(NB_SHAPE(8), NB_I64);
    weights_at best = { .epoch = 1 };
    nb_callback cb = { .on_epoch_end = copy_weights, .user = &best };
    nb_history *h = nb_model_fit(model, x, y, (nb_fit_opts){ .epochs = 10, .batch_size = 8, .verbose = -1,
                                                             .early_stopping_patience = 2, .restore_best_weights = true,
                                                             .callbacks = &cb, .n_callbacks = 1 });
    assert_non_null(h);
    assert_int_equal(nb_history_epochs(h), 3); /* epoch 1 is the best; 2 and 3 are worse */
    int n;
    nb_named_tensor *e = entries_of(seq, &n);
    assert_int_equal(n, 2 * LAYERS);
    assert_int_equal(best.n, n);
    int restored = 0;
    for (int i = 0; i < n; i++) {
        size_t bytes = sizeof(float) * (size_t)nb_numel(e[i].tensor);
        float *now = malloc(bytes);
        nb_copy_to(e[i].tensor, now, bytes);
        restored += memcmp(now, best.copies[i], bytes) == 0;
        free(now);
        free(best.copies[i]);
    }
    assert_int_equal(restored, n); /* every entry, the 513th and on too */
    free(best.copies);
    free(e);
    nb_history_free(h);
    nb_release(x);
    nb_release(y);
    nb_model_free(model);
    assert_null(nb_error());
}

/* A loss that ignores its target, so only the accuracy metric sees the labels. */
static nb_tensor *mean_loss(nb_tensor *pred, nb_tensor *target, void *ctx) {
    (void)target, (void)ctx;
    return nb_mean_all(nb_mul(pred, pred));
}

/* Labels outside [0, classes) are an error naming the first bad label and where it is, not
   silently left out of the accuracy; negative batch sizes are errors; NULL models are named. */
static void test_bad_labels_and_sizes(void **state) {
    (void)state;
    nb_manual_seed(12);
    nb_model *model = nb_model_new(nb_nn_linear(4, 3));
    assert_int_equal(nb_model_compile(model, (nb_model_compile_opts){ .loss_fn = mean_loss, .metrics = NB_METRIC_ACCURACY }), 0);
    nb_tensor *x = nb_randn(NB_SHAPE(10, 4), NB_F32);
    int64_t lab[10] = { 0, 1, 2, 0, 1, 7, 2, -1, 0, 1 };
    nb_tensor *y = nb_from_data(lab, NB_SHAPE(10), NB_I64);
    assert_null(nb_model_fit(model, x, y, (nb_fit_opts){ .batch_size = 4, .no_shuffle = true, .verbose = -1 }));
    ASSERT_ERROR_CONTAINS("nb_model_fit: label 7 at row 1 of batch 1 is not a class index in [0, 3)");
    const char *names[2];
    double values[2];
    assert_true(nb_model_evaluate(model, x, y, 0, names, values, 2) < 0);
    ASSERT_ERROR_CONTAINS("nb_model_evaluate: label 7 at row 5 of batch 0");
    lab[5] = 1;
    nb_tensor *y2 = nb_from_data(lab, NB_SHAPE(10), NB_I64);
    assert_true(nb_model_evaluate(model, x, y2, 3, names, values, 2) < 0);
    ASSERT_ERROR_CONTAINS("label -1 at row 1 of batch 2");
    lab[7] = 2;
    nb_tensor *y3 = nb_from_data(lab, NB_SHAPE(10), NB_I64);
    assert_int_equal(nb_model_evaluate(model, x, y3, 3, names, values, 2), 2);
    assert_string_equal(names[1], "accuracy");
    assert_null(nb_error());
    /* negative batch sizes */
    assert_null(nb_model_predict(model, x, -5));
    ASSERT_ERROR_CONTAINS("nb_model_predict: batch_size -5");
    assert_true(nb_model_evaluate(model, x, y3, -2, names, values, 2) < 0);
    ASSERT_ERROR_CONTAINS("nb_model_evaluate: batch_size -2");
    assert_null(nb_model_fit(model, x, y3, (nb_fit_opts){ .batch_size = -1, .verbose = -1 }));
    ASSERT_ERROR_CONTAINS("nb_model_fit: batch_size -1");
    assert_null(nb_model_fit(model, x, y3, (nb_fit_opts){ .epochs = -1, .verbose = -1 }));
    ASSERT_ERROR_CONTAINS("epochs -1");
    /* a huge batch size is one batch */
    nb_tensor *p = nb_model_predict(model, x, INT64_MAX);
    assert_non_null(p);
    assert_int_equal(nb_dim(p, 0), 10);
    nb_release(p);
    /* NULL models: an error, not a bare failure */
    assert_true(nb_model_compile(NULL, (nb_model_compile_opts){ 0 }) < 0);
    ASSERT_ERROR_CONTAINS("nb_model_compile: model is NULL");
    assert_null(nb_model_fit(NULL, x, y3, (nb_fit_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("nb_model_fit: model is NULL");
    assert_true(nb_model_evaluate(NULL, x, y3, 0, names, values, 2) < 0);
    ASSERT_ERROR_CONTAINS("nb_model_evaluate: model is NULL");
    nb_release(x);
    nb_release(y);
    nb_release(y2);
    nb_release(y3);
    nb_model_free(model);
    assert_null(nb_error());
}

/* An earlier error the caller never cleared is no failure of fit, evaluate or a checkpoint save:
   each judges only the failures of its own calls (they failed after the first batch before). */
static void test_stale_error_is_not_a_failure(void **state) {
    (void)state;
    nb_model *m = nb_model_new(mlp());
    assert_int_equal(nb_model_compile(m, (nb_model_compile_opts){ .metrics = NB_METRIC_ACCURACY }), 0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_slice(x_train, 0, 0, 256, 1), *y = nb_slice(y_train, 0, 0, 256, 1);
    nb_keep(x);
    nb_keep(y);
    nb_scope_end(s);
    assert_true(isnan(nb_item(NULL))); /* records "nb_item: ... NULL" and leaves it there */
    assert_non_null(nb_error());
    nb_history *h = nb_model_fit(m, x, y, (nb_fit_opts){ .batch_size = 32, .epochs = 2, .verbose = -1, .validation_split = 0.25 });
    assert_non_null(h);
    assert_int_equal(nb_history_epochs(h), 2);
    nb_history_free(h);
    const char *names[4];
    double values[4];
    assert_true(nb_model_evaluate(m, x, y, 64, names, values, 4) > 0);
    char path[] = "/tmp/nabla_stale_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    nb_checkpoint ck = { .model = nb_model_module(m), .epoch = 2 };
    assert_int_equal(nb_checkpoint_save(&ck, path), 0);
    unlink(path);
    assert_non_null(strstr(nb_error(), "nb_item")); /* the old message is still the first */
    nb_error_clear();
    nb_release(x);
    nb_release(y);
    nb_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fit_matches_explicit_loop, clear_error_setup),
        cmocka_unit_test_setup(test_validation_split_and_history, clear_error_setup),
        cmocka_unit_test_setup(test_callbacks_and_early_stopping, clear_error_setup),
        cmocka_unit_test_setup(test_ready_made_callbacks, clear_error_setup),
        cmocka_unit_test_setup(test_lr_schedule_callback, clear_error_setup),
        cmocka_unit_test_setup(test_misuse, clear_error_setup),
        cmocka_unit_test_setup(test_restore_best_many_entries, clear_error_setup),
        cmocka_unit_test_setup(test_bad_labels_and_sizes, clear_error_setup),
        cmocka_unit_test_setup(test_stale_error_is_not_a_failure, clear_error_setup),
    };
    if (getenv("NABLA_TEST_FILTER")) cmocka_set_test_filter(getenv("NABLA_TEST_FILTER"));
    return cmocka_run_group_tests(tests, load, unload);
}
