/* The options of `nabla train` and their parser, apart from main so a fuzz target can drive it. */
#ifndef NABLA_TRAIN_ARGS_H
#define NABLA_TRAIN_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct train_opts {
    const char *model, *optimizer, *logdir, *out, *data, *resume, *device;
    const char *labels, *label, *test, *test_labels, *schedule;
    int epochs, workers, threads;
    int nproc;       /* > 0: launch this many ranks under mpirun (--nproc) */
    int64_t batch, limit, log_every;
    int64_t channels, height, width; /* images converted and resized to these (0: the first image's) */
    double lr, val_split;
    uint64_t seed;
    bool quiet, overwrite;
    bool autocast_bf16; /* --autocast bf16: training and evaluation under nb_autocast(NB_BF16) */
    int augment; /* -1: the model's default (on for resnet), 0 off, 1 on */
    /* fine-tuning a pretrained causal LM (--model DIR, tools/cli_finetune.c) */
    bool hf_model;      /* --model names a folder (a Hugging Face checkpoint), not a built-in model */
    int64_t context;    /* tokens per block (0: min(the model's positions, 128)) */
    int64_t steps;      /* optimizer steps to stop after (0: --epochs decides) */
    double weight_decay;
    bool weight_decay_set, no_shuffle;
    bool lr_set, epochs_set, batch_set; /* given on the command line (the two kinds' defaults differ) */
    int early_stopping;     /* > 0: stop after this many epochs without a better validation loss */
    double clip_grad_norm;  /* > 0: gradients rescaled to this total norm before each step */
    double label_smoothing; /* the cross entropy's label smoothing (0: none) */
} train_opts;

/* The defaults of `nabla train`. */
train_opts train_defaults(void);
/* Prints the usage of `nabla train` to f. */
void train_usage(FILE *f);
/* Parses argv[1..argc-1] into *o (which holds the defaults); 0 when parsed, 1 when --help was
   printed to out, 2 on a bad argument (the message goes to err). Reads argv only; keeps pointers
   into it. */
int train_parse_args(int argc, char **argv, train_opts *o, FILE *out, FILE *err);

/* The option of options[0..n-1] nearest to given by edit distance, when it is near enough to be
   a slip of the fingers; else NULL. */
const char *cli_closest_option(const char *given, const char *const *options, size_t n);
/* Prints, in one line, "nabla CMD: unknown option GIVEN; did you mean X?" (or where the options
   are listed, when none is near). */
void cli_unknown_option(FILE *err, const char *cmd, const char *given, const char *const *options, size_t n);

#endif
