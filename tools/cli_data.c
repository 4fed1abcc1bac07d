/* The nabla command's data sources: recognises what --data names, opens the split asked for, and
   finds the sample shape, the number of classes and their names (checking every label). */
#include "cli_data.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const char *const cli_fashion_classes[10] = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" };

static bool is_dir(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *dir, const char *name) {
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0;
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcasecmp(s + n - m, tail) == 0;
}

/* An IDX folder holds MNIST's file names, plain or gzip. */
static bool is_idx_dir(const char *dir) {
    return exists(dir, "train-images-idx3-ubyte") || exists(dir, "train-images-idx3-ubyte.gz") ||
           exists(dir, "t10k-images-idx3-ubyte") || exists(dir, "t10k-images-idx3-ubyte.gz");
}

static bool has_split_dirs(const char *dir) {
    char t[4200], v[4200];
    snprintf(t, sizeof t, "%s/train", dir);
    snprintf(v, sizeof v, "%s/test", dir);
    return is_dir(t) && is_dir(v);
}

bool cli_data_has_test(cli_data_spec spec) {
    return !spec.path || (is_dir(spec.path) && (is_idx_dir(spec.path) || has_split_dirs(spec.path)));
}

static int fail(const char *cmd, const char *what) {
    fprintf(stderr, "nabla %s: %s\n", cmd, what ? what : "cannot read the data");
    return -1;
}

/* Reads every label of d->ds: integers from 0, the class count one past the largest. */
static int scan_labels(cli_data *d, const char *where, const char *cmd) {
    int64_t n = nb_dataset_len(d->ds), max = -1;
    if (n <= 0) {
        fprintf(stderr, "nabla %s: %s holds no samples\n", cmd, where);
        return -1;
    }
    enum { CHUNK = 256 };
    int64_t idx[CHUNK], y[CHUNK];
    for (int64_t start = 0; start < n; start += CHUNK) {
        int64_t k = n - start < CHUNK ? n - start : CHUNK;
        for (int64_t i = 0; i < k; i++) idx[i] = start + i;
        nb_batch b = { 0 };
        nb_scope *s = nb_scope_begin();
        int rc = nb_dataset_get_batch(d->ds, idx, k, &b);
        if (rc == 0 && start == 0) {
            d->sample = nb_shape_of(b.x);
            d->sample.ndim--;
            memmove(d->sample.dim, d->sample.dim + 1, sizeof(int64_t) * (size_t)d->sample.ndim);
        }
        if (rc == 0 && (!b.y || nb_dtype_of(b.y) != NB_I64 || nb_ndim(b.y) != 1)) {
            char sh[160];
            fprintf(stderr, "nabla %s: the labels of %s are %s %s; classification needs one integer class per sample\n",
                    cmd, where, b.y ? nb_shape_str(nb_shape_of(b.y), sh, sizeof sh) : "missing",
                    b.y ? nb_dtype_name(nb_dtype_of(b.y)) : "");
            nb_scope_end(s);
            return -1;
        }
        if (rc < 0 || nb_copy_to(b.y, y, sizeof(int64_t) * (size_t)k) < 0) {
            nb_scope_end(s);
            return fail(cmd, nb_error());
        }
        nb_scope_end(s);
        for (int64_t i = 0; i < k; i++) {
            if (y[i] < 0 || y[i] >= 100000) {
                fprintf(stderr, "nabla %s: label %lld of sample %lld in %s is not a class index (0 to 99999)\n", cmd,
                        (long long)y[i], (long long)(start + i), where);
                return -1;
            }
            if (y[i] > max) max = y[i];
        }
    }
    d->classes = max + 1;
    return 0;
}

static int digit_names(cli_data *d) {
    d->names = calloc((size_t)d->classes, sizeof *d->names);
    if (!d->names) return -1;
    for (int64_t c = 0; c < d->classes; c++) {
        char buf[24];
        snprintf(buf, sizeof buf, "%lld", (long long)c);
        if (!(d->names[c] = strdup(buf))) return -1;
    }
    return 0;
}

int cli_data_open(cli_data_spec spec, bool train, cli_data *d, const char *cmd) {
    memset(d, 0, sizeof *d);
    const char *path = spec.path;
    char where[4200], sub[4200];
    snprintf(where, sizeof where, "%s", path ? path : "Fashion-MNIST");
    bool fashion = false, images = false;
    nb_dataset *folder = NULL; /* the image folder under the map, for its class names */
    struct stat st;
    if (path && stat(path, &st) < 0) {
        fprintf(stderr, "nabla %s: --data %s: %s\n", cmd, path, strerror(errno));
        return -1;
    }
    if (!path || is_dir(path)) {
        if (!path || is_idx_dir(path)) {
            d->kind = "idx";
            d->ds = nb_data_fashion_mnist(path, train);
            fashion = !path || strstr(path, "fashion") || strstr(path, "Fashion");
        } else {
            d->kind = "images";
            images = true;
            if (has_split_dirs(path)) {
                snprintf(sub, sizeof sub, "%s/%s", path, train ? "train" : "test");
                snprintf(where, sizeof where, "%s", sub);
                path = sub;
            }
            d->ds = nb_data_image_folder(path);
        }
    } else if (ends_with(path, ".csv")) {
        d->kind = "csv";
        nb_csv_opts o = { 0 };
        if (spec.label) {
            char *end;
            long k = strtol(spec.label, &end, 10);
            if (*spec.label && !*end) o.label_index = (int)k;
            else o.label = spec.label;
        }
        d->ds = nb_data_csv(path, o);
    } else if (ends_with(path, ".npy")) {
        d->kind = "npy";
        if (!spec.labels) {
            fprintf(stderr, "nabla %s: --data %s is an NPY array of samples; name its labels with --labels Y.npy\n", cmd, path);
            return -1;
        }
        d->ds = nb_data_npy(path, spec.labels);
    } else {
        fprintf(stderr, "nabla %s: --data %s is neither a folder (IDX files or class sub-folders of PNG and JPEG images), a .csv "
                        "nor a .npy file\n", cmd, path);
        return -1;
    }
    if (!d->ds) return fail(cmd, nb_error());
    snprintf(d->where, sizeof d->where, "%s", where);
    if ((spec.label && strcmp(d->kind, "csv")) || (spec.labels && strcmp(d->kind, "npy"))) {
        fprintf(stderr, "nabla %s: %s applies to %s data only\n", cmd, spec.label ? "--label" : "--labels",
                spec.label ? "CSV" : "NPY");
        cli_data_free(d);
        return -1;
    }
    if (images) { /* labels are the class folders by construction: read one sample for the shape */
        nb_batch b = { 0 };
        int64_t first = 0;
        nb_scope *s = nb_scope_begin();
        if (nb_dataset_get_batch(d->ds, &first, 1, &b) == 0) d->sample = nb_shape_of(b.x);
        nb_scope_end(s);
        while (nb_data_image_folder_class(d->ds, d->classes)) d->classes++;
        folder = d->ds;
        d->counts = calloc((size_t)(d->classes > 0 ? d->classes : 1), sizeof *d->counts);
        for (int64_t c = 0; d->counts && c < d->classes; c++) d->counts[c] = nb_data_image_folder_count(folder, c);
        if (nb_error() || d->sample.ndim != 4) {
            cli_data_free(d);
            return fail(cmd, nb_error());
        }
        /* every image converted and resized to one shape (the first image's unless asked), so
           folders of mixed sizes and colours batch */
        int64_t c = spec.channels ? spec.channels : d->sample.dim[1];
        int64_t h = spec.height ? spec.height : d->sample.dim[2], w = spec.width ? spec.width : d->sample.dim[3];
        if (c == 2 || c == 4) c--; /* alpha is dropped */
        d->sample = (nb_shape){ 3, { c, h, w } };
        nb_transform *t = nb_transform_compose(nb_transform_channels((int)c), nb_transform_resize(h, w), NULL);
        nb_dataset *mapped = t ? nb_data_map(d->ds, t) : NULL; /* holds its own reference to the folder */
        nb_dataset_free(d->ds);
        d->ds = mapped;
        if (!mapped) {
            cli_data_free(d);
            return fail(cmd, nb_error());
        }
    } else if (scan_labels(d, where, cmd) < 0) {
        cli_data_free(d);
        return -1;
    }
    int rc = 0;
    if (images) {
        d->names = calloc((size_t)d->classes, sizeof *d->names);
        for (int64_t c = 0; d->names && c < d->classes; c++) {
            const char *name = nb_data_image_folder_class(folder, c);
            d->names[c] = strdup(name ? name : "?");
            if (!d->names[c]) rc = -1;
        }
        if (!d->names) rc = -1;
    } else if (fashion && d->classes <= 10) {
        d->classes = 10; /* a subset may lack the last class; Fashion-MNIST has ten */
        d->names = calloc(10, sizeof *d->names);
        for (int c = 0; d->names && c < 10; c++)
            if (!(d->names[c] = strdup(cli_fashion_classes[c]))) rc = -1;
        if (!d->names) rc = -1;
    } else rc = digit_names(d);
    if (rc < 0) {
        cli_data_free(d);
        return fail(cmd, "out of memory");
    }
    return 0;
}

void cli_data_free(cli_data *d) {
    if (!d) return;
    nb_dataset_free(d->ds);
    for (int64_t c = 0; d->names && c < d->classes; c++) free(d->names[c]);
    free(d->names);
    free(d->counts);
    memset(d, 0, sizeof *d);
}
