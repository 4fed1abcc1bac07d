/* Scaled dot-product attention, composed from ops (the multi-head module is src/nn/attention.c). */
#include "ops_impl.h"
#include "nabla/functional.h"
#include <math.h>


/* An additive causal mask [tq, tk]: 0 where key <= query (aligned at the end), -inf after. */
static nb_tensor *causal_mask(int64_t tq, int64_t tk, nb_dtype dt, nb_device dev) {
    nb_tensor *qi = nb_reshape(nb__arange_on((double)(tk - tq), (double)tk, 1, NB_I64, dev), NB_SHAPE(tq, 1));
    nb_tensor *ki = nb_reshape(nb__arange_on(0, (double)tk, 1, NB_I64, dev), NB_SHAPE(1, tk));
    return nb_where(nb_gt(ki, qi), nb_full(NB_SHAPE(), -INFINITY, dt), nb_zeros(NB_SHAPE(), dt));
}

nb_tensor *nb_scaled_dot_product_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_attn_opts o) {
    if (!q || !k || !v) {
        if (!nb__has_error()) nb__error("nb_scaled_dot_product_attention: %s is NULL", !q ? "q" : !k ? "k" : "v");
        return NULL;
    }
    char dq[200], dk[200], dv[200];
    int nq = nb_ndim(q), nk = nb_ndim(k), nv = nb_ndim(v);
    if (nq < 2 || nk < 2 || nv < 2 || nb_dim(q, -1) != nb_dim(k, -1) || nb_dim(k, -2) != nb_dim(v, -2)) {
        nb__error("nb_scaled_dot_product_attention: q %s, k %s and v %s do not fit ([..., Tq, d], [..., Tk, d], [..., Tk, dv])",
                  nb__describe(q, dq, sizeof dq), nb__describe(k, dk, sizeof dk), nb__describe(v, dv, sizeof dv));
        return NULL;
    }
    double scale = o.scale != 0 ? o.scale : 1.0 / sqrt((double)nb_dim(q, -1));
    nb_scope *s = nb_scope_begin();
    nb_tensor *scores = nb_mul_scalar(nb_matmul(q, nb_transpose(k, -1, -2)), scale);
    if (o.causal) scores = nb_add(scores, causal_mask(nb_dim(q, -2), nb_dim(k, -2), nb_dtype_of(scores), nb_device_of(scores)));
    if (o.mask) scores = nb_add(scores, o.mask);
    nb_tensor *w = nb_softmax(scores, -1);
    if (o.dropout > 0) w = nb_dropout(w, o.dropout, o.training);
    nb_tensor *r = nb_keep(nb_matmul(w, v));
    nb_scope_end(s);
    return nb__own(r);
}
