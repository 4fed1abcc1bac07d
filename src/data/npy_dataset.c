/* A dataset over NPY arrays, read by the library's one NPY reader (nb_load_npy in src/io/). */
#include "data_impl.h"

nb_dataset *nb_data_npy(const char *x_path, const char *y_path) {
    if (!x_path) { nb__error("nb_data_npy: x_path is NULL"); return NULL; }
    nb_scope *s = nb_scope_begin();
    nb_dataset *ds = NULL;
    nb_tensor *x = nb_load_npy(x_path);
    nb_tensor *y = y_path ? nb_load_npy(y_path) : NULL;
    if (x && (!y_path || y)) {
        if (y && !nb__is_float(y->dtype) && y->dtype != NB_I64) y = nb_cast(y, NB_I64);
        if (y && x->shape.ndim >= 1 && y->shape.ndim >= 1 && x->shape.dim[0] != y->shape.dim[0]) {
            nb__error("nb_data_npy: %s holds %lld samples but %s holds %lld", x_path, (long long)x->shape.dim[0], y_path,
                      (long long)y->shape.dim[0]);
        } else if (!y_path || y) {
            ds = nb_data_tensors(x, y);
        }
    }
    nb_scope_end(s);
    return ds;
}
