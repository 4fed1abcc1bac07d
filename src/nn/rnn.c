/* Recurrent layers RNN (tanh or relu), LSTM and GRU, composed from ops, with torch.nn.RNN, LSTM
   and GRU's parameter names and shapes, gate orders (LSTM i, f, g, o; GRU r, z, n) and
   initialisation, multi-layer, bidirectional, batch first, with dropout between layers. */
#include "nn_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { W_IH, W_HH, B_IH, B_HH }; /* the four parameters of one layer and direction, torch's order */

typedef struct {
    nb_module base;
    int64_t in, hidden;
    int layers, dirs; /* dirs 2 when bidirectional */
    nb_rnn_opts opts;
    nb_tensor *(*w)[4]; /* [layers * dirs]: borrowed parameters; the biases NULL with no_bias */
} rnn;

static void rnn_free(nb_module *self) { free(((rnn *)self)->w); }
static nb_tensor *rnn_module_forward(nb_module *self, nb_tensor *x) {
    return nb_rnn_forward(self, x, NULL, NULL, NULL, NULL);
}

/* torch's RNNBase.extra_repr: the sizes, then each option that is not its default (torch 1.13
   does not show the nonlinearity) */
static int rnn_repr(nb_module *self, char *buf, size_t size) {
    const rnn *m = (const rnn *)self;
    int n = snprintf(buf, size, "%lld, %lld", (long long)m->in, (long long)m->hidden);
#define MORE(...) (n += snprintf(buf + ((size_t)n < size ? (size_t)n : size), (size_t)n < size ? size - (size_t)n : 0, __VA_ARGS__))
    if (m->layers != 1) MORE(", num_layers=%d", m->layers);
    if (m->opts.no_bias) MORE(", bias=False");
    if (m->opts.batch_first) MORE(", batch_first=True");
    if (m->opts.dropout != 0) MORE(", dropout=%g", m->opts.dropout);
    if (m->dirs == 2) MORE(", bidirectional=True");
#undef MORE
    return n;
}

static const nb_module_class RNN = { .name = "RNN", .forward = rnn_module_forward, .free = rnn_free, .extra_repr = rnn_repr };
static const nb_module_class LSTM = { .name = "LSTM", .forward = rnn_module_forward, .free = rnn_free, .extra_repr = rnn_repr };
static const nb_module_class GRU = { .name = "GRU", .forward = rnn_module_forward, .free = rnn_free, .extra_repr = rnn_repr };

/* One time step: xp [N, G*H] is the step's input projection (bias_ih included), h [N, H] the
   state before; returns the new h and, for an LSTM, replaces *c by the new cell state. */
static nb_tensor *cell(const rnn *m, nb_tensor *xp, nb_tensor *h, nb_tensor **c, nb_tensor *const *w) {
    int64_t H = m->hidden;
    nb_tensor *hp = nb_linear(h, w[W_HH], w[B_HH]);
    if (m->base.cls == &RNN) {
        nb_tensor *a = nb_add(xp, hp);
        return m->opts.nonlinearity == NB_RNN_RELU ? nb_relu(a) : nb_tanh(a);
    }
    if (m->base.cls == &LSTM) {
        nb_tensor *g = nb_add(xp, hp);
        nb_tensor *i = nb_sigmoid(nb_slice(g, 1, 0, H, 1)), *f = nb_sigmoid(nb_slice(g, 1, H, 2 * H, 1));
        nb_tensor *cand = nb_tanh(nb_slice(g, 1, 2 * H, 3 * H, 1)), *o = nb_sigmoid(nb_slice(g, 1, 3 * H, 4 * H, 1));
        *c = nb_add(nb_mul(f, *c), nb_mul(i, cand));
        return nb_mul(o, nb_tanh(*c));
    }
    /* GRU, torch's formula: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) n + z h */
    nb_tensor *rz = nb_sigmoid(nb_add(nb_slice(xp, 1, 0, 2 * H, 1), nb_slice(hp, 1, 0, 2 * H, 1)));
    nb_tensor *r = nb_slice(rz, 1, 0, H, 1), *z = nb_slice(rz, 1, H, 2 * H, 1);
    nb_tensor *n = nb_tanh(nb_add(nb_slice(xp, 1, 2 * H, 3 * H, 1), nb_mul(r, nb_slice(hp, 1, 2 * H, 3 * H, 1))));
    return nb_add(n, nb_mul(z, nb_sub(h, n)));
}

/* Checks an initial state against [D * num_layers, N, H] ([D * num_layers, H] unbatched). */
static bool check_state(const rnn *m, const char *what, nb_tensor *s, bool batched, int64_t n, nb_dtype dt) {
    if (!s) return true;
    int64_t L = (int64_t)m->layers * m->dirs;
    nb_shape want = batched ? NB_SHAPE(L, n, m->hidden) : NB_SHAPE(L, m->hidden);
    nb_shape got = nb_shape_of(s);
    if (!nb__shape_eq(&want, &got) || nb_dtype_of(s) != dt) {
        char a[160], b[200];
        nb__error("nb_rnn_forward %s %s: expected %s %s %s, got %s", m->base.cls->name, nb__layer_name(&m->base), what,
                  nb_shape_str(want, a, sizeof a), nb_dtype_name(dt), nb__describe(s, b, sizeof b));
        return false;
    }
    return true;
}

/* Runs one layer in one direction over xp [T, N, G*H] from state h (and c); returns the outputs
   [T, N, H] and leaves the final states in *h and *c. */
static nb_tensor *run_direction(const rnn *m, nb_tensor *xp, nb_tensor **h, nb_tensor **c, nb_tensor *const *w,
                                bool reverse, nb_tensor **hs) {
    int64_t T = nb_dim(xp, 0);
    for (int64_t s = 0; s < T; s++) {
        int64_t t = reverse ? T - 1 - s : s;
        *h = hs[t] = cell(m, nb_squeeze(nb_slice(xp, 0, t, t + 1, 1), 0), *h, c, w);
    }
    return nb_stack(hs, (int)T, 0);
}

nb_tensor *nb_rnn_forward(nb_module *self, nb_tensor *x, nb_tensor *h0, nb_tensor *c0, nb_tensor **h_n, nb_tensor **c_n) {
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (!self || !x) {
        if (!nb__has_error()) nb__error("nb_rnn_forward: %s is NULL", self ? "the input" : "the module");
        return NULL;
    }
    if (self->cls != &RNN && self->cls != &LSTM && self->cls != &GRU) {
        nb__error("nb_rnn_forward: %s is a %s, not an RNN, LSTM or GRU", nb__layer_name(self),
                  self->cls && self->cls->name ? self->cls->name : "module");
        return NULL;
    }
    rnn *m = (rnn *)self;
    const char *kind = self->cls->name;
    bool lstm = self->cls == &LSTM;
    if (!lstm && (c0 || c_n)) {
        nb__error("nb_rnn_forward %s %s: only an LSTM has a cell state (c0 and c_n must be NULL)", kind, nb__layer_name(self));
        return NULL;
    }
    nb_dtype dt = nb_dtype_of(m->w[0][W_IH]);
    int nd = nb_ndim(x);
    bool batched = nd == 3;
    if ((nd != 2 && nd != 3) || nb_dim(x, -1) != m->in || nb_dtype_of(x) != dt || nb_dim(x, 0) == 0 ||
        (batched && nb_dim(x, 1) == 0)) {
        char d[200];
        nb__error("nb_rnn_forward %s %s: expected input %s of %s with %lld features (T, N > 0) or unbatched [T, %lld], got %s",
                  kind, nb__layer_name(self), m->opts.batch_first ? "[N, T, in]" : "[T, N, in]", nb_dtype_name(dt),
                  (long long)m->in, (long long)m->in, nb__describe(x, d, sizeof d));
        return NULL;
    }
    int64_t T = nb_dim(x, batched && m->opts.batch_first ? 1 : 0), N = batched ? nb_dim(x, m->opts.batch_first ? 0 : 1) : 1;
    if (T > INT32_MAX) {
        nb__error("nb_rnn_forward %s %s: %lld time steps is too many", kind, nb__layer_name(self), (long long)T);
        return NULL;
    }
    if (!check_state(m, "h0", h0, batched, N, dt) || !check_state(m, "c0", c0, batched, N, dt)) return NULL;
    int L = m->layers * m->dirs;
    nb_tensor **hs = malloc(sizeof *hs * (size_t)(T + 2 * L));
    if (!hs) {
        nb__error("nb_rnn_forward: out of memory for %lld time steps", (long long)T);
        return NULL;
    }
    nb_tensor **hn = hs + T, **cn = hn + L;
    nb_scope *s = nb_scope_begin();
    /* time first inside: [T, N, in]; an unbatched input is a batch of one */
    nb_tensor *in = batched ? (m->opts.batch_first ? nb_transpose(x, 0, 1) : x) : nb_unsqueeze(x, 1);
    if (!batched) {
        h0 = h0 ? nb_unsqueeze(h0, 1) : NULL;
        c0 = c0 ? nb_unsqueeze(c0, 1) : NULL;
    }
    nb_tensor *zero = nb_to(nb_zeros(NB_SHAPE(N, m->hidden), dt), nb_device_of(x));
    for (int l = 0; l < m->layers; l++) {
        nb_tensor *outs[2];
        for (int d = 0; d < m->dirs; d++) {
            int k = l * m->dirs + d;
            nb_tensor *const *w = m->w[k];
            nb_tensor *xp = nb_linear(in, w[W_IH], w[B_IH]); /* every step's input projection in one product */
            hn[k] = h0 ? nb_squeeze(nb_slice(h0, 0, k, k + 1, 1), 0) : zero;
            cn[k] = !lstm ? NULL : c0 ? nb_squeeze(nb_slice(c0, 0, k, k + 1, 1), 0) : zero;
            outs[d] = run_direction(m, xp, &hn[k], &cn[k], w, d == 1, hs);
        }
        in = m->dirs == 2 ? nb_cat(outs, 2, 2) : outs[0];
        if (l + 1 < m->layers && m->opts.dropout > 0) in = nb_dropout(in, m->opts.dropout, self->training);
    }
    nb_tensor *out = in, *hfin = nb_stack(hn, L, 0), *cfin = lstm ? nb_stack(cn, L, 0) : NULL;
    if (batched && m->opts.batch_first) out = nb_transpose(out, 0, 1);
    if (!batched) {
        out = nb_squeeze(out, 1);
        hfin = nb_squeeze(hfin, 1);
        cfin = cfin ? nb_squeeze(cfin, 1) : NULL;
    }
    bool ok = out && hfin && (!lstm || cfin);
    out = ok ? nb_keep(out) : NULL;
    hfin = ok && h_n ? nb_keep(hfin) : NULL;
    cfin = ok && c_n ? nb_keep(cfin) : NULL;
    nb_scope_end(s);
    free(hs);
    if (!ok) return NULL;
    if (h_n) *h_n = nb__own(hfin);
    if (c_n) *c_n = nb__own(cfin);
    return nb__own(out);
}

static nb_module *make_rnn(const nb_module_class *cls, const char *fn, int gates, int64_t in, int64_t hidden, nb_rnn_opts opts) {
    if (in <= 0 || hidden <= 0 || opts.num_layers < 0) {
        nb__error("%s: input_size %lld and hidden_size %lld must be positive and num_layers %d not negative", fn,
                  (long long)in, (long long)hidden, opts.num_layers);
        return NULL;
    }
    if (!(opts.dropout >= 0 && opts.dropout < 1)) {
        nb__error("%s: dropout must be in [0, 1), got %g", fn, opts.dropout);
        return NULL;
    }
    if (!nb__enum_ok(fn, "nonlinearity", (int)opts.nonlinearity, NB_RNN_RELU + 1, "nb_rnn_nonlinearity", "tanh, relu"))
        return NULL;
    if (opts.nonlinearity != NB_RNN_TANH && (cls != &RNN || opts.nonlinearity != NB_RNN_RELU)) {
        nb__error("%s: nonlinearity %d is not tanh or relu (and only nb_nn_rnn takes relu)", fn, (int)opts.nonlinearity);
        return NULL;
    }
    rnn *m = (rnn *)nb_module_new(cls, sizeof(rnn));
    if (!m) return NULL;
    m->in = in;
    m->hidden = hidden;
    m->layers = opts.num_layers ? opts.num_layers : 1;
    m->dirs = opts.bidirectional ? 2 : 1;
    m->opts = opts;
    m->w = calloc((size_t)m->layers * (size_t)m->dirs, sizeof *m->w);
    bool ok = m->w != NULL;
    if (!ok) nb__error("%s: out of memory", fn);
    /* torch: every parameter U(-1/sqrt(hidden), 1/sqrt(hidden)), registered layer by layer,
       direction by direction, as weight_ih, weight_hh, bias_ih, bias_hh */
    double bound = 1.0 / sqrt((double)hidden);
    static const char *const names[4] = { "weight_ih", "weight_hh", "bias_ih", "bias_hh" };
    for (int k = 0; ok && k < m->layers * m->dirs; k++) {
        int64_t layer_in = k < m->dirs ? in : hidden * m->dirs;
        nb_shape shapes[4] = { NB_SHAPE(gates * hidden, layer_in), NB_SHAPE(gates * hidden, hidden), NB_SHAPE(gates * hidden),
                               NB_SHAPE(gates * hidden) };
        for (int j = 0; ok && j < (opts.no_bias ? 2 : 4); j++) {
            char name[64];
            snprintf(name, sizeof name, "%s_l%d%s", names[j], k / m->dirs, k % m->dirs ? "_reverse" : "");
            m->w[k][j] = nb_module_param(&m->base, name, nb_empty(shapes[j], NB_F32));
            ok = m->w[k][j] && nb_init_uniform(m->w[k][j], -bound, bound) == 0;
        }
    }
    if (!ok) {
        nb_module_free(&m->base);
        return NULL;
    }
    return &m->base;
}

nb_module *nb_nn_rnn(int64_t input_size, int64_t hidden_size, nb_rnn_opts opts) {
    return make_rnn(&RNN, "nb_nn_rnn", 1, input_size, hidden_size, opts);
}
nb_module *nb_nn_lstm(int64_t input_size, int64_t hidden_size, nb_rnn_opts opts) {
    return make_rnn(&LSTM, "nb_nn_lstm", 4, input_size, hidden_size, opts);
}
nb_module *nb_nn_gru(int64_t input_size, int64_t hidden_size, nb_rnn_opts opts) {
    return make_rnn(&GRU, "nb_nn_gru", 3, input_size, hidden_size, opts);
}
