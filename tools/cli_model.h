/* The nabla command's models: a built-in name or a JSON config fitted to the data, and saved
   files that carry their config and class names, so eval, predict and summary need no --model. */
#ifndef NABLA_CLI_MODEL_H
#define NABLA_CLI_MODEL_H

#include <nabla.h>

/* A model and what rebuilds it. */
typedef struct cli_model {
    nb_module *module;  /* owned */
    char *config;       /* the JSON it was built from, with "input" set (malloc'ed) */
    int64_t classes;
    char **names;       /* a name per class (malloc'ed, as the array) */
    nb_shape sample;    /* one input sample's shape */
} cli_model;

/* Builds the model named by spec ("mlp", "cnn", "resnet" or a .json file) for samples of the
   given shape and classes; the names are copied. 0, or -1 with a message on stderr. */
int cli_model_build(const char *spec, nb_shape sample, int64_t classes, char *const *names, cli_model *m,
                    const char *cmd);
/* Saves m's state dict to path with its config and class names in the metadata; 0 or -1. */
int cli_model_save(const cli_model *m, const char *path, const char *cmd);
/* Loads a saved model: from the config in its metadata, else (a file saved before configs were
   stored) the built-in named by fallback for Fashion-MNIST. In eval mode. 0, or -1 with a message. */
int cli_model_load(const char *path, const char *fallback, cli_model *m, const char *cmd);
/* Frees what cli_model_build or cli_model_load made. */
void cli_model_free(cli_model *m);

#endif
