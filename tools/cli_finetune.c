/* `nabla train --model DIR --data FILE.txt`: fine-tunes a Hugging Face causal LM on a text, with
   the classifier's machinery (nb_model_fit_loader's loop and progress line, TensorBoard logs, the
   seeded validation split, the run folder) and the library's nb_hf_causal_lm_loss,
   nb_hf_text_blocks and nb_hf_save; the result is a checkpoint folder that `nabla generate` and
   transformers' from_pretrained both read. Everything is checked before anything is written. */
#include "cli_finetune.h"
#include "cli_paths.h"
#include "cli_run.h"
#ifdef NABLA_HAVE_JSON
#include <jansson.h>
#endif
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* What the callbacks need. */
typedef struct {
    nb_summary_writer *w;
    int64_t log_every, steps; /* steps: stop after this many (0: no limit) */
    bool quiet;
} ft_ctx;

static nb_tensor *lm_loss(nb_tensor *logits, nb_tensor *ids, void *ctx) {
    (void)ctx;
    return nb_hf_causal_lm_loss(logits, ids);
}

static bool ft_step(nb_model *m, int64_t step, double loss, void *user) {
    (void)m;
    ft_ctx *c = user;
    if (c->log_every > 0 && step % c->log_every == 0 && nb_summary_scalar(c->w, "step/loss", loss, step) < 0) return false;
    return !(c->steps > 0 && step >= c->steps);
}

/* After each epoch: the perplexities beside fit's losses, printed and logged. */
static bool ft_epoch(nb_model *m, int epoch, const char *const *names, const double *values, int n, void *user) {
    (void)m;
    ft_ctx *c = user;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        bool val = !strcmp(names[i], "val_loss");
        if (!val && strcmp(names[i], "loss")) continue;
        double ppl = exp(values[i]);
        ok = ok && nb_summary_scalar(c->w, val ? "epoch/val_perplexity" : "epoch/perplexity", ppl, epoch) == 0;
        if (val && !c->quiet) printf("  validation loss %.4f, perplexity %.3f\n", values[i], ppl);
    }
    return ok;
}

/* Options of the classifier's kind that mean nothing here: the first one given, or NULL. */
static const char *unused_option(const train_opts *o) {
    if (o->nproc > 1) return "--nproc";
    if (o->resume) return "--resume";
    if (o->augment >= 0) return "--augment";
    if (o->schedule && strcmp(o->schedule, "none")) return "--schedule";
    if (o->labels || o->label) return o->labels ? "--labels" : "--label";
    if (o->test || o->test_labels) return o->test ? "--test" : "--test-labels";
    if (o->height || o->channels) return o->height ? "--image-size" : "--channels";
    return NULL;
}

/* The model's positions from config.json (n_positions, max_position_embeddings or n_ctx), or 0. */
static int64_t config_positions(const char *dir, char *type, size_t size) {
#ifndef NABLA_HAVE_JSON
    /* not reached: in a build without jansson nb_hf_load has failed, saying why */
    (void)dir;
    snprintf(type, size, "unknown");
    return 0;
#else
    char folder[PATH_MAX / 2], path[PATH_MAX];
    if (nb_hf_resolve(dir, folder, sizeof folder) < 0) nb_error_clear(); /* nb_hf_load has said why */
    snprintf(path, sizeof path, "%s/config.json", folder);
    json_t *cfg = json_load_file(path, 0, NULL);
    const char *t = json_string_value(json_object_get(cfg, "model_type"));
    snprintf(type, size, "%s", t ? t : "unknown");
    static const char *const keys[] = { "n_positions", "max_position_embeddings", "n_ctx" };
    int64_t n = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys && n <= 0; i++) n = json_integer_value(json_object_get(cfg, keys[i]));
    json_decref(cfg);
    return n > 0 ? n : 0;
#endif
}

/* The whole file (malloc'ed, NUL-terminated) and its length; NULL with a message. */
static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "nabla train: cannot open --data %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, k;
    char *b = malloc(cap);
    while (b && (k = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *q = realloc(b, cap *= 2);
            if (!q) free(b);
            b = q;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        fprintf(stderr, "nabla train: cannot read --data %s: %s\n", path, b ? "read error" : "out of memory");
        free(b);
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

/* AdamW (Trainer's default), Adam or SGD over the module; with a weight decay, as Trainer, only
   the matrices decay: biases and layer-norm weights (every 1-D parameter) do not. */
static nb_optimizer *make_optimizer(nb_module *m, const train_opts *o) {
    if (!strcmp(o->optimizer, "sgd")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = o->lr, .weight_decay = o->weight_decay });
    if (!strcmp(o->optimizer, "adam")) return nb_optim_adam(m, (nb_adam_opts){ .lr = o->lr, .weight_decay = o->weight_decay });
    if (o->weight_decay == 0) return nb_optim_adamw(m, (nb_adamw_opts){ .lr = o->lr, .weight_decay = NB_ZERO });
    int n = nb_module_named_parameters(m, NULL, 0);
    nb_named_tensor *p = n > 0 ? calloc((size_t)n, sizeof *p) : NULL;
    nb_tensor **decay = n > 0 ? calloc((size_t)n, sizeof *decay) : NULL, **plain = n > 0 ? calloc((size_t)n, sizeof *plain) : NULL;
    nb_optimizer *opt = p && decay && plain ? nb_optim_adamw(NULL, (nb_adamw_opts){ .lr = o->lr, .weight_decay = NB_ZERO }) : NULL;
    int nd = 0, np = 0;
    if (opt && nb_module_named_parameters(m, p, n) == n) {
        for (int i = 0; i < n; i++) {
            if (nb_ndim(p[i].tensor) >= 2) decay[nd++] = p[i].tensor;
            else plain[np++] = p[i].tensor;
        }
        if ((nd && nb_optim_add_param_group(opt, decay, nd, (nb_group_opts){ .weight_decay = o->weight_decay }) < 0) ||
            (np && nb_optim_add_param_group(opt, plain, np, (nb_group_opts){ 0 }) < 0)) {
            nb_optim_free(opt);
            opt = NULL;
        }
    } else if (opt) {
        nb_optim_free(opt);
        opt = NULL;
    }
    free(p);
    free(decay);
    free(plain);
    return opt;
}

int cli_finetune(train_opts o) {
    const char *bad = unused_option(&o);
    if (bad) {
        fprintf(stderr, "nabla train: %s does not apply to fine-tuning a pretrained model (--model DIR)\n", bad);
        return 2;
    }
    if (!o.data) {
        fprintf(stderr, "nabla train: fine-tuning %s needs a text to learn from: --data FILE.txt (UTF-8)\n", o.model);
        return 2;
    }
    /* the input folder is only read: neither the model nor the run's logs may go into it */
    if ((o.out && cli_same_file(o.out, o.model)) || (!o.out && o.logdir && cli_same_file(o.logdir, o.model))) {
        fprintf(stderr, "nabla train: %s %s is the input model's folder; the fine-tuned model goes to a folder of its "
                        "own (it would replace the checkpoint it was loaded from)\n", o.out ? "--out" : "--logdir",
                o.out ? o.out : o.logdir);
        return 2;
    }
    if (o.logdir && cli_same_file(o.logdir, o.model)) {
        fprintf(stderr, "nabla train: --logdir %s is the input model's folder; give the run a folder of its own\n", o.logdir);
        return 2;
    }
    struct stat st;
    if (o.out && stat(o.out, &st) == 0 && (!S_ISDIR(st.st_mode) || (cli_folder_has_files(o.out) && !o.overwrite))) {
        fprintf(stderr, "nabla train: --out %s %s\n", o.out,
                S_ISDIR(st.st_mode) ? "holds files already (give a new folder, or --overwrite to write over them)"
                                    : "exists and is not a folder (fine-tuning writes a checkpoint folder)");
        return 2;
    }
    if (!o.lr_set) o.lr = 5e-5;
    if (!o.epochs_set) o.epochs = o.steps ? 1000000 : 3;
    if (!o.batch_set) o.batch = 8;
    if (o.threads > 0) nb_set_num_threads(o.threads);
    if (o.autocast_bf16) nb_autocast(NB_BF16);
    nb_manual_seed(o.seed);

    int rc = 1;
    char type[64], logdir[512], out[1024], name[256];
    size_t len = 0;
    char *text = NULL;
    nb_tokenizer *tok = NULL;
    nb_dataset *all = NULL, *train = NULL, *val = NULL;
    nb_data_loader *loader = NULL, *val_loader = NULL;
    nb_model *model = NULL;
    nb_summary_writer *w = NULL;
    nb_optimizer *opt = NULL;
    nb_module *m = nb_hf_load(o.model, (nb_hf_opts){ 0 });
    if (!m) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        return 1;
    }
    int64_t positions = config_positions(o.model, type, sizeof type);
    if (!nb_hf_is_causal_lm(m)) {
        fprintf(stderr, "nabla train: %s holds a \"%s\" model, which is not a causal LM: fine-tuning on a text needs one "
                        "that predicts the next token (GPT-2, Llama, Mistral)\n", o.model, type);
        goto done;
    }
    if (!(tok = nb_tokenizer_load(o.model))) {
        fprintf(stderr, "nabla train: the model's tokenizer: %s\n", nb_error());
        goto done;
    }
    int64_t context = o.context ? o.context : positions > 0 && positions < 128 ? positions : 128;
    if (positions > 0 && context > positions) {
        fprintf(stderr, "nabla train: --context %lld is longer than the model's %lld positions\n", (long long)context,
                (long long)positions);
        goto done;
    }
    if (!(text = read_text(o.data, &len))) goto done;
    nb_tensor *blocks = nb_hf_text_blocks(tok, text, len, context);
    if (!blocks) {
        fprintf(stderr, "nabla train: --data %s: %s\n", o.data, nb_error());
        goto done;
    }
    all = nb_data_tensors(blocks, blocks); /* input and target are the same ids: the loss shifts them */
    nb_release(blocks);
    if (!all) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    if (cli_split_samples(all, o.limit, o.val_split, o.seed, &train, &val) < 0) goto done;
    loader = nb_data_loader_new(train, (nb_loader_opts){ .batch_size = o.batch, .shuffle = !o.no_shuffle,
                                                         .num_workers = o.workers, .seed = o.seed + 1 });
    if (val) val_loader = nb_data_loader_new(val, (nb_loader_opts){ .batch_size = o.batch, .world_size = 1 });
    opt = loader && (val_loader || !val) ? make_optimizer(m, &o) : NULL;
    if (!opt) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    /* all checked: from here on the run writes */
    if (cli_choose_logdir(&o, cli_run_name(o.model, name, sizeof name), logdir, sizeof logdir) < 0) goto done;
    snprintf(out, sizeof out, "%s", o.out ? o.out : logdir);
    if (cli_mkdirs(out) < 0) {
        fprintf(stderr, "nabla train: cannot create %s: %s\n", out, strerror(errno));
        goto done;
    }
    model = nb_model_new(m);
    m = NULL; /* the model owns the module now, even when nb_model_new fails */
    w = model ? nb_summary_open(logdir) : NULL;
    if (!w || nb_model_compile(model, (nb_compile_opts){ .optimizer_obj = opt, .loss_fn = lm_loss }) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    opt = NULL; /* the model owns it now */
    int64_t per_epoch = nb_data_loader_len(loader);
    int epochs = o.epochs;
    if (o.steps) { /* the epochs --steps needs, when fewer than --epochs (no overflow at 2^63 - 1) */
        int64_t need = o.steps / per_epoch + (o.steps % per_epoch != 0);
        if (need < epochs) epochs = (int)need;
    }
    char plan[96];
    if (o.steps) snprintf(plan, sizeof plan, "%lld steps (%d epoch%s)", (long long)o.steps, epochs, epochs == 1 ? "" : "s");
    else snprintf(plan, sizeof plan, "%d epoch%s", epochs, epochs == 1 ? "" : "s");
    if (!o.quiet)
        printf("nabla train: fine-tuning %s (%s) on %s: %lld training blocks of %lld tokens (%lld held out for validation), "
               "%s lr %g, batch %lld, %s, logs in %s\n",
               o.model, type, o.data, (long long)nb_dataset_len(train), (long long)context,
               (long long)(val ? nb_dataset_len(val) : 0), o.optimizer, o.lr, (long long)o.batch, plan, logdir);
    ft_ctx c = { w, o.log_every, o.steps, o.quiet };
    nb_callback cb = { .on_batch_end = ft_step, .on_epoch_end = ft_epoch, .user = &c };
    if (cli_fit(model, loader, val_loader, (nb_fit_opts){ .epochs = epochs, .verbose = o.quiet ? -1 : 0, .tensorboard = w,
                                                           .callbacks = &cb, .n_callbacks = 1 }, &w) < 0)
        goto done;
    /* the last step's weights, as Trainer's save_model: with the input's keys, dtypes and shards */
    if (nb_hf_save(nb_model_module(model), o.model, out) < 0) {
        fprintf(stderr, "nabla train: %s\n", nb_error());
        goto done;
    }
    char svg[600];
    snprintf(svg, sizeof svg, "%s/curves.svg", logdir);
    if (cli_plot_run(logdir, svg) < 0) goto done;
    if (!o.quiet) printf("saved the fine-tuned model in %s (nabla generate %s); TensorBoard logs and curves.svg in %s\n", out, out, logdir);
    rc = 0;
done:
    nb_summary_close(w);
    nb_optim_free(opt);
    nb_model_free(model);
    nb_module_free(m);
    nb_data_loader_free(loader);
    nb_data_loader_free(val_loader);
    nb_dataset_free(train);
    nb_dataset_free(val);
    nb_dataset_free(all);
    nb_tokenizer_free(tok);
    free(text);
    return rc;
}
