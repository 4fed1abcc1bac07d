/* Training runs made to fail on purpose, for nabla doctor's suite (tests/doctor.cmake): each
   trains a small net on synthetic data through nb_model_fit (or a hand loop with nb_health) and
   logs to OUT/<case>/. `doctor_runs OUT [CASE...]` makes the named cases (all by default);
   `doctor_runs --overhead` times fit with and without the health signals. */
#define _POSIX_C_SOURCE 200809L
#include "nabla.h"
#include "nabla/model.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEATURES 16
#define CLASSES 4

static int fail(const char *what) {
    fprintf(stderr, "doctor_runs: %s: %s\n", what, nb_error() ? nb_error() : "failed");
    return 1;
}

/* n samples of FEATURES normal features labelled by the argmax of a fixed linear map (random
   labels when shuffled); kept out of any scope. */
static void make_data(int64_t n, uint64_t seed, bool shuffled, nb_tensor **x, nb_tensor **y) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(1234); /* the same labelling map in every set */
    nb_tensor *w = nb_randn(NB_SHAPE(FEATURES, CLASSES), NB_F32);
    nb_manual_seed(seed);
    nb_tensor *xs = nb_randn(NB_SHAPE(n, FEATURES), NB_F32);
    nb_tensor *ys = shuffled ? nb_randint(0, CLASSES, NB_SHAPE(n)) : nb_argmax(nb_matmul(xs, w), 1, false);
    *x = nb_keep(xs);
    *y = nb_keep(ys);
    nb_scope_end(s);
}

static nb_module *activation(int kind) { return kind == 1 ? nb_nn_sigmoid() : kind == 2 ? nb_nn_tanh() : nb_nn_relu(); }

/* hidden-wide layers, depth of them, with ReLU (act 0), Sigmoid (1) or Tanh (2) after each. */
static nb_module *mlp(int64_t hidden, int depth, int act) {
    nb_module *m = nb_nn_sequential(nb_nn_linear(FEATURES, hidden), activation(act), NULL);
    for (int i = 1; i < depth; i++) {
        nb_nn_sequential_add(m, nb_nn_linear(hidden, hidden));
        nb_nn_sequential_add(m, activation(act));
    }
    return nb_nn_sequential_add(m, nb_nn_linear(hidden, CLASSES));
}

/* ---- a dataset that sleeps before every batch: a starved loader ---- */
typedef struct { nb_dataset *inner; long sleep_ns; } slow_ds;
static int64_t slow_len(void *self) { return nb_dataset_len(((slow_ds *)self)->inner); }
static int slow_get(void *self, int64_t i, uint64_t key, nb_batch *out) {
    (void)key;
    return nb_dataset_get(((slow_ds *)self)->inner, i, out);
}
static int slow_get_batch(void *self, const int64_t *idx, int64_t n, uint64_t key, nb_batch *out) {
    (void)key;
    slow_ds *s = self;
    struct timespec t = { 0, s->sleep_ns };
    nanosleep(&t, NULL);
    return nb_dataset_get_batch(s->inner, idx, n, out);
}
static const nb_dataset_class slow_class = { "slow", slow_len, slow_get, slow_get_batch, NULL };

/* ---- a NaN written into the first weight at a known step ---- */
#define NAN_STEP 120
static void inject_nan(nb_model *m, int64_t step, void *user) {
    (void)user;
    if (step != NAN_STEP) return;
    nb_named_tensor p[1];
    if (nb_module_named_parameters(nb_model_module(m), p, 1) < 1) return;
    float *w = nb_data_ptr(p[0].tensor);
    w[0] = NAN;
}

typedef struct {
    const char *name;
    int64_t n_train, hidden;
    int depth, epochs;
    int act;          /* 0 ReLU, 1 Sigmoid, 2 Tanh */
    double first_bias; /* nonzero: the first layer's bias set to it (-5: every ReLU dead) */
    double scale;      /* nonzero: every weight multiplied by it (8: tanh saturates) */
    bool shuffled, frozen, nan, slow;
    nb_optim_kind optimizer;
    double lr, momentum;
    int64_t batch;
} run_case;

static const run_case cases[] = {
    { .name = "healthy", .n_train = 2048, .hidden = 32, .depth = 1, .epochs = 5, .optimizer = NB_OPTIM_ADAM, .lr = 3e-3 },
    { .name = "lr_high", .n_train = 2048, .hidden = 32, .depth = 1, .epochs = 3, .optimizer = NB_OPTIM_SGD, .lr = 10 },
    { .name = "lr_low", .n_train = 2048, .hidden = 32, .depth = 1, .epochs = 5, .optimizer = NB_OPTIM_ADAM, .lr = 1e-7 },
    { .name = "momentum", .n_train = 2048, .hidden = 32, .depth = 1, .epochs = 5, .optimizer = NB_OPTIM_SGD, .lr = 0.1, .momentum = 0.95 },
    { .name = "sigmoid_deep", .n_train = 2048, .hidden = 16, .depth = 12, .epochs = 3, .act = 1, .optimizer = NB_OPTIM_SGD, .lr = 0.05 },
    { .name = "nan", .n_train = 2048, .hidden = 32, .depth = 1, .epochs = 3, .nan = true, .optimizer = NB_OPTIM_ADAM, .lr = 3e-3 },
    { .name = "overfit", .n_train = 48, .hidden = 256, .depth = 2, .epochs = 150, .optimizer = NB_OPTIM_ADAM, .lr = 1e-2, .batch = 16 },
    { .name = "chance", .n_train = 2048, .hidden = 8, .depth = 1, .epochs = 5, .shuffled = true, .optimizer = NB_OPTIM_ADAM, .lr = 3e-3 },
    { .name = "starved", .n_train = 1024, .hidden = 32, .depth = 1, .epochs = 3, .slow = true, .optimizer = NB_OPTIM_ADAM, .lr = 3e-3 },
    { .name = "dead_relu", .n_train = 2048, .hidden = 32, .depth = 1, .epochs = 3, .first_bias = -5, .optimizer = NB_OPTIM_ADAM, .lr = 3e-3 },
    { .name = "saturated", .n_train = 2048, .hidden = 32, .depth = 2, .epochs = 3, .act = 2, .scale = 8, .optimizer = NB_OPTIM_ADAM, .lr = 3e-3 },
    { .name = "frozen", .n_train = 2048, .hidden = 32, .depth = 1, .epochs = 5, .frozen = true, .optimizer = NB_OPTIM_ADAM, .lr = 3e-3 },
};

static int run_fit(const run_case *c, const char *out) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", out, c->name);
    nb_tensor *x, *y, *vx, *vy;
    make_data(c->n_train, 1, c->shuffled, &x, &y);
    make_data(512, 2, c->shuffled, &vx, &vy);
    nb_manual_seed(7);
    nb_module *net = mlp(c->hidden, c->depth, c->act);
    nb_named_tensor p[64];
    int np = nb_module_named_parameters(net, p, 64);
    for (int i = 0; i < np && i < 64; i++) { /* cpu f32 parameters: edited in place */
        float *v = nb_data_ptr(p[i].tensor);
        int64_t n = nb_numel(p[i].tensor);
        bool bias = strstr(p[i].name, "bias") != NULL;
        for (int64_t k = 0; k < n; k++) {
            if (c->first_bias && i == 1) v[k] = (float)c->first_bias;
            if (c->scale && !bias) v[k] *= (float)c->scale;
        }
    }
    nb_optimizer *opt = c->optimizer == NB_OPTIM_SGD ? nb_optim_sgd(net, (nb_sgd_opts){ .lr = c->lr, .momentum = c->momentum })
                                                     : nb_optim_adam(net, (nb_adam_opts){ .lr = c->lr });
    if (c->frozen) { /* the first layer's weight and bias never learn (after the optimizer, which marks its parameters) */
        nb_named_tensor p[2];
        nb_module_named_parameters(net, p, 2);
        nb_set_requires_grad(p[0].tensor, false);
        nb_set_requires_grad(p[1].tensor, false);
    }
    nb_model *m = nb_model_new(net);
    nb_summary_writer *w = nb_summary_open(dir);
    int rc = 1;
    if (!m || !opt || !w || nb_model_compile(m, (nb_compile_opts){ .optimizer_obj = opt, .metrics = NB_METRIC_ACCURACY }) < 0)
        goto done;
    nb_callback cb = { .on_batch_begin = c->nan ? inject_nan : NULL };
    nb_fit_opts fo = { .epochs = c->epochs, .batch_size = c->batch ? c->batch : 32, .verbose = -1, .seed = 3, .val_x = vx,
                       .val_y = vy, .tensorboard = w, .log_every = 4, .callbacks = &cb, .n_callbacks = 1 };
    nb_history *h = NULL;
    if (c->slow) {
        slow_ds sd = { nb_data_tensors(x, y), 3000000 };
        nb_dataset *ds = nb_dataset_new(&slow_class, &sd);
        nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 32, .shuffle = true, .seed = 3 });
        nb_dataset *vds = nb_data_tensors(vx, vy);
        nb_data_loader *vl = nb_data_loader_new(vds, (nb_loader_opts){ .batch_size = 256 });
        nb_dataset_free(vds);
        h = l && vl ? nb_model_fit_loader(m, l, vl, fo) : NULL;
        nb_data_loader_free(l);
        nb_data_loader_free(vl);
        nb_dataset_free(ds);
        nb_dataset_free(sd.inner);
    } else {
        h = nb_model_fit(m, x, y, fo);
    }
    opt = NULL; /* the model owns it */
    /* fit stops at the first nan or inf loss (as Keras's TerminateOnNaN), after the health signals
       logged it: for the runs made to blow up that is the run's end, and its logs are the evidence */
    if (h || ((c->nan || c->lr >= 10) && nb_error() && strstr(nb_error(), "nb_model_fit: the loss is"))) rc = 0;
    nb_history_free(h);
done:
    if (rc) fail(c->name);
    if (nb_summary_close(w) < 0 && !rc) rc = fail(c->name);
    nb_optim_free(opt);
    nb_model_free(m);
    nb_release(x), nb_release(y), nb_release(vx), nb_release(vy);
    nb_error_clear();
    return rc;
}

/* Validation measured on a stale copy of the initial net (as a loop that evaluates the wrong
   model would): the validation loss is the same every epoch. A hand loop with nb_health. */
static int run_evalmode(const char *out) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/evalmode", out);
    nb_tensor *x, *y, *vx, *vy;
    make_data(2048, 1, false, &x, &y);
    make_data(512, 2, false, &vx, &vy);
    nb_manual_seed(7);
    nb_module *net = mlp(32, 1, 0);
    nb_manual_seed(7);
    nb_module *stale = mlp(32, 1, 0);
    nb_optimizer *opt = nb_optim_adam(net, (nb_adam_opts){ .lr = 3e-3 });
    nb_summary_writer *w = nb_summary_open(dir);
    nb_health *h = w ? nb_health_new(w, net, opt, (nb_health_opts){ .log_every = 4, .classes = CLASSES }) : NULL;
    int rc = h ? 0 : 1;
    int64_t step = 0;
    for (int epoch = 1; epoch <= 5 && rc == 0; epoch++) {
        double sum = 0;
        int64_t batches = 0;
        for (int64_t i = 0; i + 32 <= 2048 && rc == 0; i += 32, batches++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *loss = nb_cross_entropy(nb_forward(net, nb_slice(x, 0, i, i + 32, 1)), nb_slice(y, 0, i, i + 32, 1), (nb_ce_opts){ 0 });
            nb_optim_zero_grad(opt);
            double l = nb_item(loss);
            step++;
            if (nb_backward(loss) < 0 || nb_health_before_update(h, step, l) < 0 || nb_optim_step(opt) < 0 ||
                nb_health_after_update(h, step, 0) < 0)
                rc = 1;
            sum += l;
            nb_scope_end(s);
        }
        nb_scope *s = nb_scope_begin();
        bool prev = nb_set_grad_enabled(false);
        double vl = nb_item(nb_cross_entropy(nb_forward(stale, vx), vy, (nb_ce_opts){ 0 }));
        nb_set_grad_enabled(prev);
        nb_scope_end(s);
        if (nb_summary_scalar(w, "epoch/loss", sum / (double)batches, epoch) < 0 || nb_summary_scalar(w, "epoch/val_loss", vl, epoch) < 0)
            rc = 1;
    }
    if (rc) fail("evalmode");
    nb_health_free(h);
    if (nb_summary_close(w) < 0 && !rc) rc = fail("evalmode");
    nb_optim_free(opt);
    nb_module_free(net);
    nb_module_free(stale);
    nb_release(x), nb_release(y), nb_release(vx), nb_release(vy);
    nb_error_clear();
    return rc;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds per step of fit on an MLP (784-256-256-10, batch 64), logging the health signals every
   log_every steps (0: none) to a writer in dir. */
static double time_fit(const char *dir, int64_t log_every, int64_t steps) {
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(5);
    nb_tensor *x = nb_randn(NB_SHAPE(steps * 64, 784), NB_F32), *y = nb_randint(0, 10, NB_SHAPE(steps * 64));
    nb_module *net = nb_nn_sequential(nb_nn_linear(784, 256), nb_nn_relu(), nb_nn_linear(256, 256), nb_nn_relu(), nb_nn_linear(256, 10), NULL);
    nb_model *m = nb_model_new(net);
    nb_model_compile(m, (nb_compile_opts){ .optimizer = NB_OPTIM_ADAM, .lr = 1e-3 });
    nb_summary_writer *w = nb_summary_open(dir);
    double t0 = now_s();
    nb_history *h = nb_model_fit(m, x, y, (nb_fit_opts){ .epochs = 1, .batch_size = 64, .verbose = -1, .tensorboard = w,
                                                          .log_every = log_every, .no_shuffle = true });
    double t = (now_s() - t0) / (double)steps;
    if (!h) fail("overhead");
    nb_history_free(h);
    nb_summary_close(w);
    nb_model_free(m);
    nb_scope_end(s);
    return h ? t : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: doctor_runs OUT [CASE...] | doctor_runs --overhead DIR\n");
        return 2;
    }
    if (!strcmp(argv[1], "--overhead")) {
        const char *dir = argc > 2 ? argv[2] : "/tmp/doctor_overhead";
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/off", dir);
        snprintf(b, sizeof b, "%s/on", dir);
        double off = 1e9, on = 1e9;
        for (int rep = 0; rep < 3; rep++) { /* the best of three, alternating, against noise */
            double t = time_fit(a, 0, 300);
            if (t < off) off = t;
            t = time_fit(b, 50, 300);
            if (t < on) on = t;
        }
        /* every step too: the cost of one logging step, which noise on a shared machine hides less */
        char c[1024];
        snprintf(c, sizeof c, "%s/each", dir);
        double each = 1e9;
        for (int rep = 0; rep < 3; rep++) {
            double t = time_fit(c, 1, 300);
            if (t < each) each = t;
        }
        printf("fit step: %.3f ms without health signals, %.3f ms with them every 50 steps (%+.2f%%), %.3f ms every "
               "step: one logging step costs %.3f ms, %.2f%% of a step when spread over 50\n", off * 1e3, on * 1e3,
               100 * (on - off) / off, each * 1e3, (each - off) * 1e3, 100 * (each - off) / off / 50);
        return off > 0 && on > 0 ? 0 : 1;
    }
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases + 1; i++) {
        const char *name = i < sizeof cases / sizeof *cases ? cases[i].name : "evalmode";
        bool wanted = argc == 2;
        for (int k = 2; k < argc; k++) wanted |= !strcmp(argv[k], name);
        if (!wanted) continue;
        rc |= i < sizeof cases / sizeof *cases ? run_fit(&cases[i], argv[1]) : run_evalmode(argv[1]);
    }
    return rc;
}
