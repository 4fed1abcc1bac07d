/* `nabla train --model DIR --data FILE.txt`: fine-tuning a Hugging Face causal LM on a text. */
#ifndef NABLA_CLI_FINETUNE_H
#define NABLA_CLI_FINETUNE_H

#include "train_args.h"

/* Runs the fine-tuning that o describes (o.hf_model set); the exit status: 0, 1 on a failure, 2
   on options that do not apply or conflict. Messages go to stderr, progress to stdout. */
int cli_finetune(train_opts o);

#endif
