/* The parser of `nabla train`'s options: every number is checked whole and in range, so
   `--epochs 1e30` or `--batch-size 99999999999999999999` is an error, never a wrapped cast. */
#include "train_args.h"
#include <nabla.h>
#include <errno.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

train_opts train_defaults(void) {
    return (train_opts){ .model = "mlp", .optimizer = "adamw", .device = "cpu", .epochs = 5, .workers = 2,
                         .batch = 64, .lr = 1e-3, .val_split = 0.1, .augment = -1 };
}

void train_usage(FILE *f) {
    fprintf(f, "usage: nabla train [options]\n"
               "  Trains a classifier (on Fashion-MNIST by default), validating on a split held out\n"
               "  from the training set, and reports the test accuracy of the model it saved.\n"
               "  --model NAME|FILE.json   mlp (784-128-10, default), cnn (the TF tutorial convnet),\n"
               "                           resnet (a small residual CNN), or a JSON list of layers\n"
               "  --model DIR              a Hugging Face causal LM folder (config.json, safetensors,\n"
               "                           tokenizer): fine-tunes it on --data FILE.txt (see below)\n"
               "  --data PATH              an IDX folder (MNIST's file names; default $NABLA_DATA, else\n"
               "                           Debian's Fashion-MNIST), a folder of class sub-folders of PNG\n"
               "                           and JPEG images (with train/ and test/ inside, or one\n"
               "                           split), a .csv file or an .npy array of samples\n"
               "  --label COLUMN           the CSV column holding the class (name or index; default 0)\n"
               "  --labels Y.npy           the labels of an .npy --data\n"
               "  --test PATH              test data when --data has no test split (--test-labels Y.npy)\n"
               "  --image-size HxW         resize images to H x W (default: the first image's size)\n"
               "  --channels 1|3           convert images to gray or RGB (default: the first image's)\n"
               "  --augment on|off         random crop (padding 2) and horizontal flip of training images\n"
               "                           (default: on for resnet, off otherwise)\n"
               "  --schedule none|cosine|onecycle   learning-rate schedule (default none; onecycle for\n"
               "                           resnet, peaking at --lr)\n"
               "  --epochs N               epochs (default 5)\n"
               "  --batch-size N           samples per batch (default 64)\n"
               "  --lr X                   learning rate (default 1e-3)\n"
               "  --optimizer adamw|adam|sgd   (default adamw)\n"
               "  --val-split X            fraction of the training set held out to pick the best\n"
               "                           epoch (default 0.1, drawn with --seed; 0: keep the last)\n"
               "  --workers N              data-loader threads (default 2)\n"
               "  --threads N              compute threads (default: NABLA_NUM_THREADS, else the cores)\n"
               "  --autocast bf16|off      products and convolutions in bf16 with f32 accumulation, the\n"
               "                           rest in f32, as torch.autocast (default off)\n"
               "  --device cpu             where to train: cpu, cuda or cuda:N (docs/cuda.md)\n"
               "  --nproc N                train data-parallel on N processes of this machine (runs\n"
               "                           mpirun; `mpirun -n N nabla train ...` does the same on a\n"
               "                           cluster); --batch-size is then the global batch, split evenly\n"
               "                           across them, and only rank 0 prints and writes files\n"
               "  --seed N                 seed of the run: weights, split, shuffling (default 0)\n"
               "  --logdir DIR             run folder (default runs/<model>/YYYYmmdd-HHMMSS); must be\n"
               "                           empty or new unless --overwrite or --resume\n"
               "  --overwrite              reuse a --logdir that holds an earlier run (its event\n"
               "                           files are removed first, so curves do not mix)\n"
               "  --log-every N            log the loss and health signals every N steps (default 50; nabla doctor)\n"
               "  --out FILE               state dict to save (default <logdir>/model.safetensors)\n"
               "  --limit N                train and test on the first N samples only\n"
               "  --resume FILE            continue from a checkpoint (<logdir>/checkpoint.safetensors is\n"
               "                           written after every epoch); --epochs counts the epochs done\n"
               "  --quiet                  no progress output\n"
               "  --early-stopping N       stop after N epochs without a better validation loss (the best\n"
               "                           epoch's weights are the ones saved, as Keras's EarlyStopping)\n"
               "  --clip-grad-norm X       rescale the gradients to total norm X before each step\n"
               "  --label-smoothing X      cross entropy against targets smoothed by X (0 to 1)\n"
               "  --weight-decay X         the optimizer's weight decay (AdamW: decoupled, default 0.01;\n"
               "                           Adam, SGD: L2, default 0)\n");
    /* two literals: each stays under the 4,095 characters C11 promises a compiler takes */
    fprintf(f, "Fine-tuning (--model DIR --data FILE.txt): the UTF-8 text is tokenized as one text with\n"
               "  DIR's tokenizer and cut into blocks of --context tokens (the remainder dropped), which\n"
               "  --val-split, --batch-size, --seed, --limit (blocks) and --log-every apply to; the loss is\n"
               "  the causal LM loss, validation reports loss and perplexity after each epoch, and the\n"
               "  model of the last step is saved as a Hugging Face folder (config, model.safetensors\n"
               "  with DIR's keys, tokenizer) in --out DIR (-o DIR; default the run folder). Defaults\n"
               "  there: --epochs 3, --batch-size 8, --lr 5e-5 (AdamW, as transformers' Trainer).\n"
               "  --context N              tokens per block (default: the model's positions, at most 128)\n"
               "  --steps N                stop after N optimizer steps (default: --epochs decides)\n"
               "  --weight-decay X         AdamW's decoupled weight decay, on matrices only, not on\n"
               "                           biases and layer-norm weights, as Trainer (default 0)\n"
               "  --no-shuffle             batches in the order of the text (default: shuffled by --seed)\n");
}

/* A whole number in [lo, hi]; false (with a message) when text is not one. */
static bool whole(FILE *err, const char *opt, const char *text, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = text && *text && *text != ' ' ? strtoll(text, &end, 10) : 0;
    if (!text || !*text || !end || *end || errno || v < lo || v > hi) {
        fprintf(err, "nabla train: %s needs a whole number from %lld to %lld, got \"%s\"\n", opt, lo, hi,
                text ? text : "(nothing)");
        return false;
    }
    *out = v;
    return true;
}

/* A finite number in [lo, hi]; false (with a message) when text is not one. */
static bool real(FILE *err, const char *opt, const char *text, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = text && *text ? strtod(text, &end) : 0;
    if (!text || !*text || !end || *end || errno || !(v >= lo && v <= hi)) {
        fprintf(err, "nabla train: %s needs a number from %g to %g, got \"%s\"\n", opt, lo, hi, text ? text : "(nothing)");
        return false;
    }
    *out = v;
    return true;
}

/* The seed: any 64-bit unsigned whole number. */
static bool seed_of(FILE *err, const char *text, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = text && *text >= '0' && *text <= '9' ? strtoull(text, &end, 10) : 0;
    if (!text || !end || *end || errno) {
        fprintf(err, "nabla train: --seed needs a whole number from 0 to %llu, got \"%s\"\n", (unsigned long long)UINT64_MAX,
                text ? text : "(nothing)");
        return false;
    }
    *out = v;
    return true;
}

/* Whether text is one of the '|'-separated words of choices. */
static bool one_of(const char *text, const char *choices) {
    size_t n = strlen(text);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && !strncmp(c, text, n)) return true;
        if (!bar) break;
        c = bar + 1;
    }
    return false;
}

/* Levenshtein distance of a and b (inputs of up to 63 characters; longer ones are "far"). */
static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 1 << 20;
    int row[64];
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[m];
}

const char *cli_closest_option(const char *given, const char *const *options, size_t n) {
    const char *best = NULL;
    int best_d = 1 << 20;
    for (size_t k = 0; k < n; k++) {
        int d = edit_distance(given, options[k]);
        if (d < best_d) best_d = d, best = options[k];
    }
    /* close enough to be a slip of the fingers: two edits, or a third of a long name */
    int limit = (int)strlen(given) / 3 > 2 ? (int)strlen(given) / 3 : 2;
    return best_d <= limit ? best : NULL;
}

void cli_unknown_option(FILE *err, const char *cmd, const char *given, const char *const *options, size_t n) {
    const char *near = given[0] == '-' ? cli_closest_option(given, options, n) : NULL;
    if (given[0] != '-') fprintf(err, "nabla %s: unexpected argument \"%s\" (nabla %s --help lists the options)\n", cmd, given, cmd);
    else if (near) fprintf(err, "nabla %s: unknown option %s; did you mean %s?\n", cmd, given, near);
    else fprintf(err, "nabla %s: unknown option %s (nabla %s --help lists the options)\n", cmd, given, cmd);
}

int train_parse_args(int argc, char **argv, train_opts *o, FILE *out, FILE *err) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!a) break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            train_usage(out);
            return 1;
        }
        if (!strcmp(a, "--quiet")) { o->quiet = true; continue; }
        if (!strcmp(a, "--overwrite")) { o->overwrite = true; continue; }
        if (!strcmp(a, "--no-shuffle")) { o->no_shuffle = true; continue; }
        if (!strcmp(a, "-o")) a = "--out";
        /* every other option takes a value */
        static const char *const valued[] = { "--model", "--optimizer", "--logdir", "--out", "--data", "--resume",
                                              "--device", "--epochs", "--batch-size", "--lr", "--workers", "--labels", "--label",
                                              "--test", "--test-labels", "--augment", "--schedule", "--autocast",
                                              "--image-size", "--channels",
                                              "--threads", "--nproc", "--seed", "--limit", "--val-split", "--log-every",
                                              "--context", "--steps", "--weight-decay", "--early-stopping",
                                              "--clip-grad-norm", "--label-smoothing" };
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known = known || !strcmp(a, valued[k]);
        if (!known) {
            static const char *const flags[] = { "--quiet", "--overwrite", "--no-shuffle", "--help" };
            const char *all[sizeof valued / sizeof *valued + sizeof flags / sizeof *flags];
            size_t n_all = 0;
            for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) all[n_all++] = valued[k];
            for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) all[n_all++] = flags[k];
            cli_unknown_option(err, "train", a, all, n_all);
            return 2;
        }
        if (!v) {
            fprintf(err, "nabla train: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--model")) {
            size_t len = strlen(v);
            struct stat st;
            char dir[4096]; /* a folder, or a model name in the Hugging Face cache */
            o->hf_model = !one_of(v, "mlp|cnn|resnet") && nb_hf_resolve(v, dir, sizeof dir) == 0 && stat(dir, &st) == 0 &&
                          S_ISDIR(st.st_mode);
            nb_error_clear();
            if (!o->hf_model && !one_of(v, "mlp|cnn|resnet") && !(len > 5 && !strcmp(v + len - 5, ".json"))) {
                fprintf(err, "nabla train: --model is mlp, cnn, resnet, a FILE.json or a Hugging Face checkpoint folder, "
                             "got \"%s\"\n", v);
                return 2;
            }
            o->model = v;
        } else if (!strcmp(a, "--image-size")) {
            char *end = NULL;
            errno = 0;
            long long h = *v >= '1' && *v <= '9' ? strtoll(v, &end, 10) : 0, w = 0;
            if (end && *end == 'x' && end[1] >= '1' && end[1] <= '9') w = strtoll(end + 1, &end, 10);
            if (!end || *end || errno || h < 1 || w < 1 || h > 65536 || w > 65536) {
                fprintf(err, "nabla train: --image-size needs HxW, each from 1 to 65536, got \"%s\"\n", v);
                return 2;
            }
            o->height = h;
            o->width = w;
        } else if (!strcmp(a, "--channels")) {
            if (!one_of(v, "1|3")) { fprintf(err, "nabla train: --channels is 1 or 3, got \"%s\"\n", v); return 2; }
            o->channels = *v - '0';
        } else if (!strcmp(a, "--augment")) {
            if (!one_of(v, "on|off")) { fprintf(err, "nabla train: --augment is on or off, got \"%s\"\n", v); return 2; }
            o->augment = !strcmp(v, "on");
        } else if (!strcmp(a, "--schedule")) {
            if (!one_of(v, "none|cosine|onecycle")) {
                fprintf(err, "nabla train: --schedule is none, cosine or onecycle, got \"%s\"\n", v);
                return 2;
            }
            o->schedule = v;
        } else if (!strcmp(a, "--optimizer")) {
            if (!one_of(v, "adamw|adam|sgd")) {
                fprintf(err, "nabla train: --optimizer is adamw, adam or sgd, got \"%s\"\n", v);
                return 2;
            }
            o->optimizer = v;
        } else if (!strcmp(a, "--autocast")) {
            if (!one_of(v, "bf16|off")) {
                fprintf(err, "nabla train: --autocast is bf16 or off, got \"%s\"\n", v);
                return 2;
            }
            o->autocast_bf16 = !strcmp(v, "bf16");
        } else if (!strcmp(a, "--device")) {
            nb_device_type type = !strcmp(v, "cpu") ? NB_CPU : !strncmp(v, "cuda", 4) ? NB_CUDA : NB_EXT;
            nb_device dev = type == NB_EXT ? (nb_device){ NB_EXT, -1 } : nb_device_parse(v);
            nb_error_clear();
            if (dev.index < 0) {
                fprintf(err, "nabla train: --device is cpu, cuda or cuda:N, got \"%s\"\n", v);
                return 2;
            }
            if (type == NB_CUDA && !nb_device_available(dev)) {
                if (nb_cuda_device_count() == 0)
                    fprintf(err, "nabla train: --device %s: no CUDA device is available (%s)\n", v, nb_cuda_why_unavailable());
                else
                    fprintf(err, "nabla train: --device %s: this machine has %d CUDA device%s\n", v, nb_cuda_device_count(),
                            nb_cuda_device_count() == 1 ? "" : "s");
                return 2;
            }
            o->device = v;
        } else if (!strcmp(a, "--logdir") || !strcmp(a, "--out") || !strcmp(a, "--data") || !strcmp(a, "--resume") ||
                   !strcmp(a, "--labels") || !strcmp(a, "--label") || !strcmp(a, "--test") || !strcmp(a, "--test-labels")) {
            if (!*v) { fprintf(err, "nabla train: %s needs a value, got \"\"\n", a); return 2; }
            if (!strcmp(a, "--logdir")) o->logdir = v;
            else if (!strcmp(a, "--out")) o->out = v;
            else if (!strcmp(a, "--data")) o->data = v;
            else if (!strcmp(a, "--labels")) o->labels = v;
            else if (!strcmp(a, "--label")) o->label = v;
            else if (!strcmp(a, "--test")) o->test = v;
            else if (!strcmp(a, "--test-labels")) o->test_labels = v;
            else o->resume = v;
        } else if (!strcmp(a, "--epochs")) {
            if (!whole(err, a, v, 1, 1000000, &n)) return 2;
            o->epochs = (int)n;
            o->epochs_set = true;
        } else if (!strcmp(a, "--batch-size")) {
            if (!whole(err, a, v, 1, 1 << 30, &n)) return 2;
            o->batch = n;
            o->batch_set = true;
        } else if (!strcmp(a, "--context")) { if (!whole(err, a, v, 2, 1 << 24, &n)) return 2; o->context = n; }
        else if (!strcmp(a, "--steps")) { if (!whole(err, a, v, 1, INT64_MAX, &n)) return 2; o->steps = n; }
        else if (!strcmp(a, "--weight-decay")) {
            if (!real(err, a, v, 0, 1e6, &o->weight_decay)) return 2;
            o->weight_decay_set = true;
        }
        else if (!strcmp(a, "--early-stopping")) { if (!whole(err, a, v, 1, 1000000, &n)) return 2; o->early_stopping = (int)n; }
        else if (!strcmp(a, "--clip-grad-norm")) { if (!real(err, a, v, 1e-12, 1e12, &o->clip_grad_norm)) return 2; }
        else if (!strcmp(a, "--label-smoothing")) { if (!real(err, a, v, 0, 1, &o->label_smoothing)) return 2; }
        else if (!strcmp(a, "--workers")) { if (!whole(err, a, v, 0, 256, &n)) return 2; o->workers = (int)n; }
        else if (!strcmp(a, "--nproc")) { if (!whole(err, a, v, 1, 4096, &n)) return 2; o->nproc = (int)n; }
        else if (!strcmp(a, "--threads")) { if (!whole(err, a, v, 1, 1024, &n)) return 2; o->threads = (int)n; }
        else if (!strcmp(a, "--limit")) { if (!whole(err, a, v, 1, INT64_MAX, &n)) return 2; o->limit = n; }
        else if (!strcmp(a, "--log-every")) { if (!whole(err, a, v, 1, INT64_MAX, &n)) return 2; o->log_every = n; }
        else if (!strcmp(a, "--seed")) { if (!seed_of(err, v, &o->seed)) return 2; }
        else if (!strcmp(a, "--lr")) {
            if (!real(err, a, v, 1e-12, 1e6, &o->lr)) return 2;
            o->lr_set = true;
        }
        else if (!strcmp(a, "--val-split")) { if (!real(err, a, v, 0, 0.9, &o->val_split)) return 2; }
    }
    if (!o->hf_model && (o->context || o->steps || o->no_shuffle)) {
        fprintf(err, "nabla train: --context, --steps and --no-shuffle are for fine-tuning a pretrained model (--model DIR)\n");
        return 2;
    }
    if (o->hf_model && (o->early_stopping || o->clip_grad_norm > 0 || o->label_smoothing > 0)) {
        fprintf(err, "nabla train: --early-stopping, --clip-grad-norm and --label-smoothing are for classifiers, not "
                     "fine-tuning a pretrained model (--model DIR)\n");
        return 2;
    }
    if (o->resume && o->overwrite) {
        fprintf(err, "nabla train: --resume continues a run and --overwrite starts one afresh; give one of them\n");
        return 2;
    }
    return 0;
}
