/* The run folder and the validation split that both kinds of `nabla train` share. */
#ifndef NABLA_CLI_RUN_H
#define NABLA_CLI_RUN_H

#include "train_args.h"
#include <nabla.h>

/* Makes path and its missing parents (as mkdir -p); 0, or -1 with errno set. */
int cli_mkdirs(const char *path);
/* The name of a run of model under runs/: a built-in's name, a config file's or a checkpoint
   folder's base name without ".json" ("configs/small.json" -> "small"), in buf. */
const char *cli_run_name(const char *model, char *buf, size_t size);
/* The run folder into logdir: --logdir as asked (new or empty unless --overwrite or --resume),
   or a new runs/<name>/YYYYmmdd-HHMMSS and the link runs/<name>/latest to it. 0, or -1 with a
   message on stderr. */
int cli_choose_logdir(const train_opts *o, const char *name, char *logdir, size_t size);
/* Of the first `limit` samples of ds (all when 0): a seeded shuffle (splitmix64 from
   seed ^ 0x5EEDC0DE, Fisher-Yates), the last val_frac of it as *val (NULL when none) and the
   rest as *train, each in the order of the original indices. 0, or -1 with a message. */
int cli_split_samples(nb_dataset *ds, int64_t limit, double val_frac, uint64_t seed, nb_dataset **train,
                      nb_dataset **val);
/* Whether the folder at path holds anything (false when it does not exist). */
bool cli_folder_has_files(const char *path);
/* The run's TensorBoard scalars in logdir drawn as curves into svg; 0, or -1 with a message. */
int cli_plot_run(const char *logdir, const char *svg);
/* nb_model_fit_loader with opts, then *w closed (and set to NULL); 0, or -1 with a message. */
int cli_fit(nb_model *model, nb_data_loader *train, nb_data_loader *val, nb_fit_opts opts, nb_summary_writer **w);

#endif
