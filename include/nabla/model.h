/* nabla model: the Keras way — compile, fit, evaluate and predict, with the loop hidden. */
#ifndef NABLA_MODEL_H
#define NABLA_MODEL_H

#include "core.h"
#include "data.h"
#include "nn.h"
#include "optim.h"
#include "summary.h"
#include "health.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nb_model nb_model;
typedef struct nb_history nb_history;

/* Optimizers by kind (PyTorch's defaults beside the learning rate). */
typedef enum nb_optim_kind { NB_OPTIM_ADAMW = 0, NB_OPTIM_ADAM, NB_OPTIM_SGD, NB_OPTIM_RMSPROP, NB_OPTIM_ADAGRAD } nb_optim_kind;
/* Losses by kind: cross entropy of logits against class indices, MSE, BCE of logits. */
typedef enum nb_loss_kind { NB_LOSS_SPARSE_CE_LOGITS = 0, NB_LOSS_MSE, NB_LOSS_BCE_LOGITS } nb_loss_kind;
/* Metrics, or-ed together (the mean loss is always reported). */
enum { NB_METRIC_ACCURACY = 1 << 0, NB_METRIC_TOP5_ACCURACY = 1 << 1 };

/* What nb_model_compile sets; zero fields are the defaults (AdamW, cross entropy, lr 0: the chosen
   optimizer's PyTorch default, 1e-3 for AdamW). Not the options of graph mode's nb_compile, which
   are nb_graph_opts (nabla/compile.h). */
typedef struct nb_model_compile_opts {
    nb_optim_kind optimizer;
    double lr;
    nb_loss_kind loss;
    unsigned metrics;
    nb_optimizer *optimizer_obj; /* an optimizer of the caller's over the module, used instead of
                                    optimizer and lr (the model frees it once compile succeeds) */
    nb_tensor *(*loss_fn)(nb_tensor *pred, nb_tensor *target, void *ctx); /* a loss of the caller's */
    void *loss_ctx;
} nb_model_compile_opts;
/* The older name of nb_model_compile_opts, kept so that code written for it compiles. */
typedef nb_model_compile_opts nb_compile_opts;

/* Hooks called by fit; any may be NULL. Returning false from on_epoch_end or on_batch_end stops
   training after that epoch or batch. logs: the metric names and values so far. step: the global
   step, the batches done since training began (initial_epoch's included), this one counted. */
typedef struct nb_callback {
    void (*on_train_begin)(nb_model *m, void *user);
    void (*on_epoch_begin)(nb_model *m, int epoch, void *user);
    void (*on_batch_begin)(nb_model *m, int64_t step, void *user);
    bool (*on_batch_end)(nb_model *m, int64_t step, double loss, void *user);
    bool (*on_epoch_end)(nb_model *m, int epoch, const char *const *names, const double *values, int n, void *user);
    void (*on_train_end)(nb_model *m, void *user);
    void *user;
} nb_callback;

/* Options of nb_model_fit; zero fields are the defaults (batch 32, 1 epoch, shuffled, progress
   shown, no validation). */
typedef struct nb_fit_opts {
    int64_t batch_size;
    int epochs;                     /* the epoch to end at (counting initial_epoch) */
    int initial_epoch;              /* epochs already done, when resuming (Keras's initial_epoch) */
    double validation_split;        /* the last fraction of (x, y) held out for validation */
    nb_tensor *val_x, *val_y;       /* or explicit validation tensors */
    bool no_shuffle;
    int verbose;                    /* 0 (or > 0): progress line (in place on a terminal), < 0: silent */
    uint64_t seed;                  /* shuffling seed (0: from nb_manual_seed's generator) */
    int num_workers;                /* loader threads for tensor data (0: in the calling thread) */
    /* early stopping on val_loss (or loss without validation): stop after patience epochs
       without improvement; restore the best weights when asked (and training stopped early) */
    int early_stopping_patience;    /* 0: off */
    bool restore_best_weights;
    const nb_callback *callbacks;
    int n_callbacks;
    /* ready-made callbacks (NULL: off) */
    nb_summary_writer *tensorboard; /* epoch/<metric> scalars, the learning rate and gradient norm per epoch */
    bool tensorboard_histograms;    /* and a weight and gradient histogram per parameter each epoch */
    int64_t log_every;              /* with tensorboard: nb_health's per-step signals every N steps (0: off) */
    const char *csv_path;           /* one row of metrics per epoch (header first), flushed each epoch */
    const char *checkpoint_path;    /* the state dict, saved atomically whenever the monitored loss improves */
    nb_scheduler *lr_schedule;      /* stepped once after each epoch */
    /* data-parallel training: sums n values in place across the workers (every worker calls it
       once per step), so the loss and metrics fit prints, logs, checks and passes to callbacks
       are the whole job's; 0 or <0 with an error. NULL: one worker. */
    int (*all_sum)(double *values, int n, void *ctx);
    void *all_sum_ctx;
    double clip_grad_norm;          /* > 0: gradients rescaled to this total norm before each step */
} nb_fit_opts;

/* Wraps module (the model owns it from now on, and frees it on failure too). */
NB_API nb_model *nb_model_new(nb_module *module);
/* The wrapped module (borrowed). */
NB_API nb_module *nb_model_module(nb_model *m);
/* Chooses the optimizer, loss and metrics (again: replaces and frees the earlier optimizer); 0 or <0. */
NB_API int nb_model_compile(nb_model *m, nb_model_compile_opts opts);
/* Trains on tensors x [N, ...] and y [N, ...] (validation in batches of 256); returns the per-epoch
   history (free it), or NULL with an error (a nan or inf training loss is one: it stops training at
   that step, as Keras's TerminateOnNaN). Needs nb_model_compile first. */
NB_API nb_history *nb_model_fit(nb_model *m, nb_tensor *x, nb_tensor *y, nb_fit_opts opts);
/* Trains on a data loader, validating on val (or NULL) after each epoch; the loaders stay the
   caller's. Returns the history as nb_model_fit does. */
NB_API nb_history *nb_model_fit_loader(nb_model *m, nb_data_loader *train, nb_data_loader *val, nb_fit_opts opts);
/* Mean loss and metrics on (x, y) in batches (0: 256); fills names/values (up to cap; names are
   static) and returns their count, or -1 with an error. Needs nb_model_compile first. */
NB_API int nb_model_evaluate(nb_model *m, nb_tensor *x, nb_tensor *y, int64_t batch_size, const char **names, double *values, int cap);
/* The model's outputs for x in batches of batch_size (0: 256), in evaluation mode and without
   recording a graph; a new tensor, or NULL with an error. */
NB_API nb_tensor *nb_model_predict(nb_model *m, nb_tensor *x, int64_t batch_size);
/* Frees the model, its module and its optimizer; NULL is ignored. */
NB_API void nb_model_free(nb_model *m);

/* Epochs recorded (0 for NULL). */
NB_API int nb_history_epochs(const nb_history *h);
/* Number of metric names recorded ("loss", "accuracy", "val_loss", ...). */
NB_API int nb_history_num_metrics(const nb_history *h);
/* The i-th metric name (static), or NULL when i is out of range. */
NB_API const char *nb_history_metric(const nb_history *h, int i);
/* A metric's value at an epoch (0-based); NAN when absent. */
NB_API double nb_history_get(const nb_history *h, const char *metric, int epoch);
/* Frees the history; NULL is ignored. */
NB_API void nb_history_free(nb_history *h);

#ifdef __cplusplus
}
#endif
#endif
