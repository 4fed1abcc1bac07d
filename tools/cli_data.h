/* The data the nabla command trains and evaluates on: a Fashion-MNIST/MNIST IDX folder, a CSV
   file, an NPY pair or a folder of images in class sub-folders, recognised from --data. */
#ifndef NABLA_CLI_DATA_H
#define NABLA_CLI_DATA_H

#include <nabla.h>

typedef struct cli_data {
    nb_dataset *ds;    /* owned */
    nb_shape sample;   /* the shape of one sample's x */
    int64_t classes;   /* labels are 0 .. classes - 1 */
    char **names;      /* a name per class (malloc'ed, as the array) */
    const char *kind;  /* "idx", "csv", "npy" or "images" */
    int64_t *counts;   /* images: the number of each class's images (malloc'ed); else NULL */
    char where[4200];  /* the file or folder read */
} cli_data;

/* Where a data set comes from: --data, and --labels (NPY) or --label (CSV column). */
typedef struct cli_data_spec {
    const char *path;   /* NULL: Fashion-MNIST from $NABLA_DATA or Debian's folder */
    const char *labels; /* the labels .npy beside an x .npy */
    const char *label;  /* the CSV column holding the label (name or index; default the first) */
    int64_t channels, height, width; /* images are converted and resized to these (0: the first image's) */
} cli_data_spec;

/* Opens the train or test split of spec: an IDX folder has both, a folder with train/ and test/
   image folders too; any other source is one split, returned for either. 0, or -1 with a
   message on stderr prefixed by "nabla CMD". */
int cli_data_open(cli_data_spec spec, bool train, cli_data *d, const char *cmd);
/* Whether spec names a source with a test split of its own. */
bool cli_data_has_test(cli_data_spec spec);
/* Frees what cli_data_open made. */
void cli_data_free(cli_data *d);
/* The names of the Fashion-MNIST classes. */
extern const char *const cli_fashion_classes[10];

#endif
