/* A dataset over NPY arrays, read by the library's one NPY reader (nb_load_npy in src/io/). */
#include "data_impl.h"
#include <math.h>
#include <stdio.h>

/* Whether every value of a float array is finite; else records an error naming the file, the
   sample (row) and the place inside it, since a nan or inf would train on as a nan loss every
   step, far from its cause. */
static bool all_finite(nb_tensor *t, const char *path) {
    if (!nb__is_float(t->dtype)) return true;
    bool f32 = t->dtype == NB_F32; /* read in place; other float types through an f64 copy */
    nb_tensor *d = nb_contiguous(f32 ? t : nb_cast(t, NB_F64));
    const void *v = d ? nb_data_ptr(d) : NULL;
    if (!v) return false;
    int64_t n = nb_numel(d), per = 1;
    for (int i = 1; i < t->shape.ndim; i++) per *= t->shape.dim[i];
    for (int64_t i = 0; i < n; i++) {
        double x = f32 ? (double)((const float *)v)[i] : ((const double *)v)[i];
        if (!isfinite(x)) {
            nb__error("nb_data_npy: %s: value %g of sample %lld (element %lld of the sample) is not finite (a sample may "
                      "not hold nan or inf: fill or drop it)", path, x, (long long)(per ? i / per : 0),
                      (long long)(per ? i % per : 0));
            return false;
        }
    }
    return true;
}

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
        } else if ((!y_path || y) && all_finite(x, x_path) && (!y || all_finite(y, y_path))) {
            ds = nb_data_tensors(x, y);
        }
    }
    nb_scope_end(s);
    return ds;
}
