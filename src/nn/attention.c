/* Scaled dot-product attention and multi-head attention, composed from ops, with
   torch.nn.MultiheadAttention's parameter layout (batch first). */
#include "nn_impl.h"
#include <math.h>
#include <stdio.h>

typedef struct {
    nb_module base;
    int64_t embed;
    int heads;
    nb_mha_opts opts;
    nb_tensor *in_w, *in_b;
    nb_module *out_proj;
} mha;

/* [B, T, E] -> [B, heads, T, E / heads] */
static nb_tensor *split_heads(nb_tensor *x, int heads) {
    int64_t b = nb_dim(x, 0), t = nb_dim(x, 1), e = nb_dim(x, 2);
    return nb_transpose(nb_reshape(x, NB_SHAPE(b, t, heads, e / heads)), 1, 2);
}

static const nb_module_class MHA;

nb_tensor *nb_mha_forward(nb_module *self, nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_tensor *mask) {
    if (!self || !q || !k || !v) {
        if (!nb__has_error()) nb__error("nb_mha_forward: an argument is NULL");
        return NULL;
    }
    if (self->cls != &MHA) { /* another module's memory is not an attention layer's */
        nb__error("nb_mha_forward: %s is a %s, not a MultiheadAttention", nb__layer_name(self),
                  self->cls && self->cls->name ? self->cls->name : "module");
        return NULL;
    }
    mha *m = (mha *)self;
    nb_tensor *xs[3] = { q, k, v };
    for (int i = 0; i < 3; i++)
        if (nb_ndim(xs[i]) != 3 || nb_dim(xs[i], 2) != m->embed || nb_dim(xs[i], 0) != nb_dim(q, 0)) {
            char sh[160];
            nb__error("nb_nn_multihead_attention %s: expected %s [B, T, %lld], got %s", nb__layer_name(self),
                      i == 0 ? "query" : i == 1 ? "key" : "value", (long long)m->embed,
                      nb_shape_str(nb_shape_of(xs[i]), sh, sizeof sh));
            return NULL;
        }
    int64_t e = m->embed, b = nb_dim(q, 0), tq = nb_dim(q, 1);
    nb_scope *s = nb_scope_begin();
    nb_tensor *qp, *kp, *vp;
    if (q == k && k == v) { /* self-attention: one product for all three projections */
        nb_tensor *qkv = nb_linear(q, m->in_w, m->in_b);
        qp = nb_slice(qkv, 2, 0, e, 1);
        kp = nb_slice(qkv, 2, e, 2 * e, 1);
        vp = nb_slice(qkv, 2, 2 * e, 3 * e, 1);
    } else {
        nb_tensor *bq = m->in_b ? nb_slice(m->in_b, 0, 0, e, 1) : NULL, *bk = m->in_b ? nb_slice(m->in_b, 0, e, 2 * e, 1) : NULL,
                  *bv = m->in_b ? nb_slice(m->in_b, 0, 2 * e, 3 * e, 1) : NULL;
        qp = nb_linear(q, nb_slice(m->in_w, 0, 0, e, 1), bq);
        kp = nb_linear(k, nb_slice(m->in_w, 0, e, 2 * e, 1), bk);
        vp = nb_linear(v, nb_slice(m->in_w, 0, 2 * e, 3 * e, 1), bv);
    }
    nb_attn_opts ao = { .mask = mask, .causal = m->opts.causal, .training = self->training, .dropout = m->opts.dropout };
    nb_tensor *att = nb_scaled_dot_product_attention(split_heads(qp, m->heads), split_heads(kp, m->heads),
                                                     split_heads(vp, m->heads), ao);
    nb_tensor *merged = nb_reshape(nb_transpose(att, 1, 2), NB_SHAPE(b, tq, e));
    nb_tensor *r = nb_keep(nb_forward(m->out_proj, merged));
    nb_scope_end(s);
    return nb__own(r);
}

static nb_tensor *mha_forward(nb_module *self, nb_tensor *x) { return nb_mha_forward(self, x, x, x, NULL); }

static const nb_module_class MHA = { .name = "MultiheadAttention", .forward = mha_forward };

nb_module *nb_nn_multihead_attention(int64_t embed, int heads, nb_mha_opts opts) {
    if (embed <= 0 || heads <= 0 || embed % heads != 0) {
        nb__error("nb_nn_multihead_attention: embed_dim %lld must be a positive multiple of heads %d", (long long)embed, heads);
        return NULL;
    }
    if (!(opts.dropout >= 0 && opts.dropout < 1)) {
        nb__error("nb_nn_multihead_attention: dropout must be in [0, 1), got %g", opts.dropout);
        return NULL;
    }
    mha *m = (mha *)nb_module_new(&MHA, sizeof(mha));
    if (!m) return NULL;
    m->embed = embed;
    m->heads = heads;
    m->opts = opts;
    /* torch: xavier_uniform_ on in_proj_weight, zeros on in_proj_bias and out_proj.bias */
    m->in_w = nb_module_param(&m->base, "in_proj_weight", nb_empty(NB_SHAPE(3 * embed, embed), NB_F32));
    bool ok = m->in_w && nb_init_xavier_uniform(m->in_w, 1.0) == 0;
    if (ok && !opts.no_bias) ok = (m->in_b = nb_module_param(&m->base, "in_proj_bias", nb_zeros(NB_SHAPE(3 * embed), NB_F32))) != NULL;
    if (ok) {
        m->out_proj = nb_module_child(&m->base, "out_proj", opts.no_bias ? nb_nn_linear_no_bias(embed, embed) : nb_nn_linear(embed, embed));
        ok = m->out_proj && (opts.no_bias || nb_init_constant(nb_module_get(m->out_proj, "bias"), 0.0) == 0);
    }
    if (!ok) {
        nb_module_free(&m->base);
        return NULL;
    }
    return &m->base;
}
