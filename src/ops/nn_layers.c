/* Functional layers: batch norm (in training one op over the batch's statistics, with two
   kernels for its gradient; in evaluation a per-channel scale and shift; running statistics
   updated in place with recording off, the running variance taking the unbiased batch
   variance, as torch), and, composed from ops, layer norm, RMS norm, rotary position embeddings,
   group norm, dropout and SiLU. The
   modules of src/nn hold their parameters and call these. */
#include "ops_impl.h"
#include "nabla/functional.h"
#include "nabla/autograd.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static bool is_channel_vector(nb_tensor *t, int64_t c) { return !t || (nb_ndim(t) == 1 && nb_dim(t, 0) == c); }

nb_tensor *nb_batch_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *w, nb_tensor *b,
                         bool training, double momentum, double eps) {
    if (!x) return NULL;
    char d[200], sh[160];
    int nd = nb_ndim(x);
    if (nd < 2) {
        nb__error("nb_batch_norm: expected input [N, C, ...], got %s", nb__describe(x, d, sizeof d));
        return NULL;
    }
    nb_shape xs = nb_shape_of(x);
    int64_t n = xs.dim[0], c = xs.dim[1], l = 1;
    for (int i = 2; i < nd; i++) l *= xs.dim[i];
    nb_tensor *vecs[4] = { running_mean, running_var, w, b };
    static const char *names[4] = { "running_mean", "running_var", "weight", "bias" };
    for (int i = 0; i < 4; i++)
        if (!is_channel_vector(vecs[i], c)) {
            nb__error("nb_batch_norm: %s must be [%lld] for input %s, got %s", names[i], (long long)c,
                      nb__describe(x, d, sizeof d), nb_shape_str(nb_shape_of(vecs[i]), sh, sizeof sh));
            return NULL;
        }
    if (!training && (!running_mean || !running_var)) {
        nb__error("nb_batch_norm: evaluation mode needs running_mean and running_var");
        return NULL;
    }
    int64_t count = n * l;
    if (training && count <= 1) {
        nb__error("nb_batch_norm: expected more than 1 value per channel when training, got input %s",
                  nb__describe(x, d, sizeof d));
        return NULL;
    }
    if (momentum == 0) momentum = 0.1;
    if (eps <= 0) eps = 1e-5;

    nb_scope *scope = nb_scope_begin();
    nb_shape col = NB_SHAPE(c, 1);
    nb_tensor *y;
    if (training) {
        /* one op over the batch's own statistics; its backward is two kernels */
        nb_dtype dt = nb_dtype_of(x);
        nb_device dev = nb_device_of(x);
        nb_tensor *in[3] = { x, w ? w : nb__full_on(NB_SHAPE(c), 1, dt, dev), b ? b : nb__full_on(NB_SHAPE(c), 0, dt, dev) };
        y = nb__call(NB_OP_BATCH_NORM, in, 3, &(nb_op_args){ .f = { eps } });
        if (y && running_mean && running_var) {
            bool prev = nb_set_grad_enabled(false);
            nb_tensor *stats = nb__call(NB_OP_BATCH_NORM_STATS, &x, 1, &(nb_op_args){ 0 });
            nb_tensor *m = nb_reshape(nb_slice(stats, 0, 0, 1, 1), NB_SHAPE(c));
            nb_tensor *v = nb_reshape(nb_mul_scalar(nb_slice(stats, 0, 1, 2, 1), (double)count / (double)(count - 1)), NB_SHAPE(c));
            nb_assign(running_mean, nb_add(nb_mul_scalar(running_mean, 1 - momentum), nb_mul_scalar(m, momentum)));
            nb_assign(running_var, nb_add(nb_mul_scalar(running_var, 1 - momentum), nb_mul_scalar(v, momentum)));
            nb_set_grad_enabled(prev);
        }
    } else {
        /* y = x * alpha + beta with alpha = w / sqrt(var + eps), beta = b - mean * alpha per channel,
           as torch's CPU kernel computes it: two passes over x */
        nb_tensor *xr = nb_reshape(x, NB_SHAPE(n, c, l));
        nb_tensor *alpha = nb_pow_scalar(nb_add_scalar(nb_reshape(running_var, col), eps), -0.5);
        if (w) alpha = nb_mul(alpha, nb_reshape(w, col));
        nb_tensor *beta = nb_neg(nb_mul(nb_reshape(running_mean, col), alpha));
        if (b) beta = nb_add(beta, nb_reshape(b, col));
        y = nb_reshape(nb_add(nb_mul(xr, alpha), beta), xs);
    }
    nb_tensor *r = y;
    if (r && nb_dtype_of(r) != nb_dtype_of(x)) r = nb_cast(r, nb_dtype_of(x)); /* f32 statistics with f64 x */
    nb_keep(r);
    nb_scope_end(scope);
    return nb__own(r);
}

/* batch_norm(x, w, b) -> x's shape; batch_norm_stats(x) -> [2, C] (mean; biased variance);
   batch_norm_reduce(g, x) -> [2, C] (sum of g; sum of g * normalised x);
   batch_norm_backward(g, x, w) -> x's shape. f[0] is eps. */
int nb__infer_batch_norm(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    (void)args;
    bool grad = op == NB_OP_BATCH_NORM_REDUCE || op == NB_OP_BATCH_NORM_BACKWARD;
    nb_tensor *x = in[grad ? 1 : 0];
    char d[200], d2[200];
    if (x->shape.ndim < 2) {
        nb__error("nb_%s: expected input [N, C, ...], got %s", fn, nb__describe(x, d, sizeof d));
        return -1;
    }
    int64_t c = x->shape.dim[1];
    if (grad && !nb__shape_eq(&in[0]->shape, &x->shape)) {
        nb__error("nb_%s: the gradient %s does not match the input %s", fn, nb__describe(in[0], d, sizeof d),
                  nb__describe(x, d2, sizeof d2));
        return -1;
    }
    for (int i = grad ? 2 : 1; i < nin; i++)
        if (in[i]->shape.ndim != 1 || in[i]->shape.dim[0] != c) {
            nb__error("nb_%s: input %d must be [%lld] for input %s, got %s", fn, i, (long long)c, nb__describe(x, d, sizeof d),
                      nb__describe(in[i], d2, sizeof d2));
            return -1;
        }
    out->dtype = x->dtype;
    if (op == NB_OP_BATCH_NORM_STATS || op == NB_OP_BATCH_NORM_REDUCE) out->shape = (nb_shape){ 2, { 2, c } };
    else out->shape = x->shape;
    return 0;
}

/* The gradient of batch_norm(x, w, b) over the batch's statistics, with xhat = (x - mean) *
   invstd and M values per channel: db = sum g, dw = sum g * xhat, dx = w * invstd * (g - db / M -
   xhat * dw / M). Two kernels compute it; under create_graph it is written with ops instead
   (the statistics recomputed from x), so that it can be differentiated again. */
int nb__bwd_batch_norm(nb_node *node, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *x = node->inputs[0], *w = node->inputs[1];
    bool want_x = x->requires_grad, want_w = w->requires_grad, want_b = node->inputs[2]->requires_grad;
    double eps = node->args.f[0];
    if (!nb_is_grad_enabled()) {
        if (want_x) {
            nb_tensor *in[3] = { g, x, w };
            gin[0] = nb__call(NB_OP_BATCH_NORM_BACKWARD, in, 3, &node->args);
        }
        if (want_w || want_b) {
            nb_tensor *in[2] = { g, x };
            nb_tensor *red = nb__call(NB_OP_BATCH_NORM_REDUCE, in, 2, &node->args);
            int64_t c = x->shape.dim[1];
            if (want_w) gin[1] = nb_reshape(nb_slice(red, 0, 1, 2, 1), NB_SHAPE(c));
            if (want_b) gin[2] = nb_reshape(nb_slice(red, 0, 0, 1, 1), NB_SHAPE(c));
        }
        return 0;
    }
    nb_shape xs = x->shape;
    int64_t n = xs.dim[0], c = xs.dim[1], l = 1;
    for (int i = 2; i < xs.ndim; i++) l *= xs.dim[i];
    double m = (double)(n * l);
    nb_shape col = NB_SHAPE(c, 1);
    nb_tensor *xr = nb_reshape(x, NB_SHAPE(n, c, l)), *gr = nb_reshape(g, NB_SHAPE(n, c, l));
    nb_tensor *centered = nb_sub(xr, nb_mul_scalar(nb_sum_to(xr, col), 1.0 / m));
    nb_tensor *var = nb_mul_scalar(nb_sum_to(nb_mul(centered, centered), col), 1.0 / m);
    nb_tensor *invstd = nb_pow_scalar(nb_add_scalar(var, eps), -0.5);
    nb_tensor *xhat = nb_mul(centered, invstd);
    nb_tensor *db = nb_sum_to(gr, col), *dw = nb_sum_to(nb_mul(gr, xhat), col);
    if (want_x) {
        nb_tensor *inner = nb_sub(nb_sub(gr, nb_mul_scalar(db, 1.0 / m)), nb_mul(xhat, nb_mul_scalar(dw, 1.0 / m)));
        gin[0] = nb_reshape(nb_mul(inner, nb_mul(invstd, nb_reshape(w, col))), xs);
    }
    if (want_w) gin[1] = nb_reshape(dw, NB_SHAPE(c));
    if (want_b) gin[2] = nb_reshape(db, NB_SHAPE(c));
    return 0;
}

/* ---------- layer norm ---------- */
nb_tensor *nb_layer_norm(nb_tensor *x, nb_tensor *w, nb_tensor *b, double eps) {
    if (!x) {
        nb__error("nb_layer_norm: input is NULL");
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *mu = nb_mean(x, -1, true);
    nb_tensor *d = nb_sub(x, mu);
    nb_tensor *var = nb_mean(nb_mul(d, d), -1, true); /* biased, as torch's layer norm */
    nb_tensor *y = nb_mul(d, nb_pow_scalar(nb_add_scalar(var, eps), -0.5));
    if (w) y = nb_mul(y, w);
    if (b) y = nb_add(y, b);
    nb_keep(y);
    nb_scope_end(s);
    return nb__own(y);
}

nb_tensor *nb_rms_norm(nb_tensor *x, nb_tensor *w, double eps) {
    if (!x) {
        if (!nb__has_error()) nb__error("nb_rms_norm: input is NULL");
        return NULL;
    }
    char d[200], dw[200];
    if (nb_ndim(x) < 1 || (w && (nb_ndim(w) != 1 || nb_dim(w, 0) != nb_dim(x, -1)))) {
        nb__error("nb_rms_norm: weight %s does not fit input %s (a vector the size of the last axis)",
                  w ? nb__describe(w, dw, sizeof dw) : "none", nb__describe(x, d, sizeof d));
        return NULL;
    }
    nb_dtype dt = nb_dtype_of(x);
    bool half = dt == NB_F16 || dt == NB_BF16;
    /* torch's eps=None: the machine epsilon of the input's dtype */
    if (eps <= 0) eps = dt == NB_F64 ? DBL_EPSILON : dt == NB_F16 ? 0x1p-10 : dt == NB_BF16 ? 0x1p-7 : FLT_EPSILON;
    nb_scope *s = nb_scope_begin();
    /* half types are normalised in f32 and rounded back, as torch's rms_norm and Llama's RMSNorm
       do (an eps of 1e-6 would vanish beside a mean of squares rounded to bf16) */
    nb_tensor *xf = half ? nb_cast(x, NB_F32) : x;
    nb_tensor *ms = nb_mean(nb_mul(xf, xf), -1, true);
    nb_tensor *y = nb_mul(xf, nb_rsqrt(nb_add_scalar(ms, eps)));
    if (half) y = nb_cast(y, dt);
    if (w) y = nb_mul(w, y);
    nb_keep(y);
    nb_scope_end(s);
    return nb__own(y);
}

int nb__rotary_tables(int nd, int64_t D, nb_tensor *positions, nb_rope_opts o, nb_dtype dt, nb_tensor **cos,
                      nb_tensor **sin) {
    int64_t half = D / 2;
    float *inv = malloc(sizeof(float) * (size_t)D);
    if (!inv) {
        nb__error("nb_rotary_embedding: out of memory");
        return -1;
    }
    for (int64_t j = 0; j < half; j++) {
        float e = (float)(2 * j) / (float)D;
        inv[j] = inv[j + half] = 1.0f / powf((float)o.theta, e);
    }
    nb_tensor *freq = nb_from_data(inv, NB_SHAPE(D), NB_F32);
    free(inv);
    nb_tensor *p = nb_cast(positions, NB_F32);
    if (o.scale != 1) p = nb_div(p, nb_full(NB_SHAPE(1), o.scale, NB_F32)); /* linear scaling: positions / factor */
    nb_tensor *ang = nb_mul(nb_unsqueeze(p, -1), freq);
    /* positions [B, T] against x [B, H.., T, D]: an axis of 1 for each axis between */
    if (ang && nb_ndim(positions) == 2)
        for (int i = 2; i < nd - 1; i++) ang = nb_unsqueeze(ang, 1);
    *cos = nb_cast(nb_cos(ang), dt);
    *sin = nb_cast(nb_sin(ang), dt);
    return *cos && *sin ? 0 : -1;
}

nb_tensor *nb__rotary_apply(nb_tensor *x, nb_tensor *cos, nb_tensor *sin) {
    if (!x || !cos || !sin) return NULL;
    nb_scope *s = nb_scope_begin();
    /* rotate_half: [-x2, x1] for the halves x1, x2 of the last axis */
    int nd = nb_ndim(x);
    int64_t half = nb_dim(x, -1) / 2;
    nb_tensor *x1 = nb_slice(x, nd - 1, 0, half, 1), *x2 = nb_slice(x, nd - 1, half, 2 * half, 1);
    nb_tensor *rot = nb_cat((nb_tensor *[]){ nb_neg(x2), x1 }, 2, nd - 1);
    nb_tensor *y = nb_keep(nb_add(nb_mul(x, cos), nb_mul(rot, sin)));
    nb_scope_end(s);
    return nb__own(y);
}

nb_tensor *nb_rotary_embedding(nb_tensor *x, nb_tensor *positions, nb_rope_opts o) {
    if (!x || !positions) {
        if (!nb__has_error()) nb__error("nb_rotary_embedding: %s is NULL", !x ? "x" : "positions");
        return NULL;
    }
    char d[200], dp[200];
    int nd = nb_ndim(x), np = nb_ndim(positions);
    nb_dtype pt = nb_dtype_of(positions);
    bool fits = nd >= 2 && nb_dim(x, -1) % 2 == 0 && (pt == NB_I64 || pt == NB_I32) &&
                ((np == 1 && nb_dim(positions, 0) == nb_dim(x, -2)) ||
                 (np == 2 && nd >= 3 && nb_dim(positions, 0) == nb_dim(x, 0) && nb_dim(positions, 1) == nb_dim(x, -2)));
    if (!fits) {
        nb__error("nb_rotary_embedding: x %s and positions %s do not fit (x [..., T, D] with D even; integer positions "
                  "[T], or [B, T] for x [B, ..., T, D])",
                  nb__describe(x, d, sizeof d), nb__describe(positions, dp, sizeof dp));
        return NULL;
    }
    if (o.theta == 0) o.theta = 10000;
    if (o.scale == 0) o.scale = 1;
    if (!(o.theta > 1) || !(o.scale > 0)) {
        nb__error("nb_rotary_embedding: theta %g must be above 1 and scale %g above 0", o.theta, o.scale);
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *cos = NULL, *sin = NULL, *y = NULL;
    if (nb__rotary_tables(nd, nb_dim(x, -1), positions, o, nb_dtype_of(x), &cos, &sin) == 0)
        y = nb__rotary_apply(x, cos, sin);
    nb_keep(y);
    nb_scope_end(s);
    return nb__own(y);
}

nb_tensor *nb_group_norm(nb_tensor *x, int64_t groups, nb_tensor *w, nb_tensor *b, double eps) {
    if (!x) {
        if (!nb__has_error()) nb__error("nb_group_norm: input is NULL");
        return NULL;
    }
    char d[200];
    int nd = nb_ndim(x);
    if (nd < 2 || groups <= 0 || nb_dim(x, 1) % groups != 0) {
        nb__error("nb_group_norm: expected input [N, C, ...] with C divisible by the %lld groups, got %s", (long long)groups,
                  nb__describe(x, d, sizeof d));
        return NULL;
    }
    int64_t c = nb_dim(x, 1);
    nb_shape per_channel = { nd, { 0 } };
    for (int i = 0; i < nd; i++) per_channel.dim[i] = i == 1 ? c : 1;
    nb_scope *s = nb_scope_begin();
    nb_tensor *xr = nb_reshape(x, NB_SHAPE(nb_dim(x, 0), groups, -1));
    nb_tensor *mu = nb_mean(xr, 2, true);
    nb_tensor *dev = nb_sub(xr, mu);
    nb_tensor *var = nb_mean(nb_mul(dev, dev), 2, true); /* biased, as torch */
    nb_tensor *y = nb_reshape(nb_mul(dev, nb_pow_scalar(nb_add_scalar(var, eps > 0 ? eps : 1e-5), -0.5)), nb_shape_of(x));
    if (w) y = nb_mul(y, nb_reshape(w, per_channel));
    if (b) y = nb_add(y, nb_reshape(b, per_channel));
    nb_keep(y);
    nb_scope_end(s);
    return nb__own(y);
}

nb_tensor *nb_instance_norm(nb_tensor *x, nb_tensor *w, nb_tensor *b, double eps) {
    if (!x) {
        if (!nb__has_error()) nb__error("nb_instance_norm: input is NULL");
        return NULL;
    }
    if (nb_ndim(x) < 3) {
        char d[200];
        nb__error("nb_instance_norm: expected input [N, C, L...] (at least 3 dimensions), got %s", nb__describe(x, d, sizeof d));
        return NULL;
    }
    return nb_group_norm(x, nb_dim(x, 1), w, b, eps); /* one group per channel */
}

nb_tensor *nb_silu(nb_tensor *x) {
    if (!x) {
        nb__error("nb_silu: input is NULL");
        return NULL;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *r = nb_keep(nb_mul(x, nb_sigmoid(x)));
    nb_scope_end(s);
    return nb__own(r);
}

nb_tensor *nb_dropout(nb_tensor *x, double p, bool training) {
    if (!x) {
        nb__error("nb_dropout: input is NULL");
        return NULL;
    }
    if (!(p >= 0 && p <= 1)) {
        nb__error("nb_dropout: probability must be in [0, 1], got %g", p);
        return NULL;
    }
    if (!training || p == 0) return nb__own(nb_retain(x));
    nb_scope *s = nb_scope_begin();
    nb_dtype dt = nb__is_float(nb_dtype_of(x)) ? nb_dtype_of(x) : NB_F32;
    nb_tensor *r;
    if (p == 1) r = nb_mul(x, nb_zeros(NB_SHAPE(), dt));
    else {
        /* keep with probability 1 - p, scaled so the expectation is unchanged */
        nb_tensor *keep = nb_lt(nb__rand_on(nb_shape_of(x), NB_F32, nb_device_of(x)), nb_full(NB_SHAPE(), 1.0 - p, NB_F32));
        r = nb_mul(x, nb_mul_scalar(nb_cast(keep, dt), 1.0 / (1.0 - p)));
    }
    nb_keep(r);
    nb_scope_end(s);
    return nb__own(r);
}
