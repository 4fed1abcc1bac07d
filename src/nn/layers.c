/* Layers built on the module base: linear, activations, flatten, dropout, embedding, layer
   norm and sequential; their functional forms; and the initialisers. */
#include "nn_impl.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* ---------- initialisers ---------- */
/* Writes value into t in place with recording off (initialisation is not part of a graph). */
static int init_assign(nb_tensor *t, nb_tensor *value) {
    bool prev = nb_set_grad_enabled(false);
    int rc = nb_assign(t, value);
    nb_set_grad_enabled(prev);
    return rc;
}

int nb_init_uniform(nb_tensor *t, double lo, double hi) {
    if (!t) {
        nb__error("nb_init_uniform: input is NULL");
        return -1;
    }
    nb_scope *s = nb_scope_begin();
    int rc = init_assign(t, nb_add_scalar(nb_mul_scalar(nb_rand(nb_shape_of(t), nb_dtype_of(t)), hi - lo), lo));
    nb_scope_end(s);
    return rc;
}

int nb_init_normal(nb_tensor *t, double mean, double std) {
    if (!t) {
        nb__error("nb_init_normal: input is NULL");
        return -1;
    }
    nb_scope *s = nb_scope_begin();
    int rc = init_assign(t, nb_add_scalar(nb_mul_scalar(nb_randn(nb_shape_of(t), nb_dtype_of(t)), std), mean));
    nb_scope_end(s);
    return rc;
}

int nb_init_constant(nb_tensor *t, double value) {
    if (!t) {
        nb__error("nb_init_constant: input is NULL");
        return -1;
    }
    nb_scope *s = nb_scope_begin();
    int rc = init_assign(t, nb_full(NB_SHAPE(), value, nb_dtype_of(t)));
    nb_scope_end(s);
    return rc;
}

/* fan_in and fan_out as torch.nn.init._calculate_fan_in_and_fan_out. */
static int fans(nb_tensor *t, const char *fn, double *fan_in, double *fan_out) {
    int nd = nb_ndim(t);
    if (nd < 2) {
        char d[200];
        nb__error("%s: fan in and fan out need at least 2 dimensions, got %s", fn, nb__describe(t, d, sizeof d));
        return -1;
    }
    double field = 1;
    for (int i = 2; i < nd; i++) field *= (double)nb_dim(t, i);
    *fan_in = (double)nb_dim(t, 1) * field;
    *fan_out = (double)nb_dim(t, 0) * field;
    return 0;
}

int nb_init_kaiming_uniform(nb_tensor *t, double a) {
    double fi, fo;
    if (!t || fans(t, "nb_init_kaiming_uniform", &fi, &fo) < 0) return -1;
    double gain = sqrt(2.0 / (1 + a * a)), bound = gain * sqrt(3.0 / fi);
    return nb_init_uniform(t, -bound, bound);
}

int nb_init_kaiming_normal(nb_tensor *t) {
    double fi, fo;
    if (!t || fans(t, "nb_init_kaiming_normal", &fi, &fo) < 0) return -1;
    return nb_init_normal(t, 0, sqrt(2.0) / sqrt(fi));
}

int nb_init_xavier_uniform(nb_tensor *t, double gain) {
    double fi, fo;
    if (!t || fans(t, "nb_init_xavier_uniform", &fi, &fo) < 0) return -1;
    double bound = gain * sqrt(6.0 / (fi + fo));
    return nb_init_uniform(t, -bound, bound);
}

int nb_init_xavier_normal(nb_tensor *t, double gain) {
    double fi, fo;
    if (!t || fans(t, "nb_init_xavier_normal", &fi, &fo) < 0) return -1;
    return nb_init_normal(t, 0, gain * sqrt(2.0 / (fi + fo)));
}

/* ---------- linear ---------- */
typedef struct {
    nb_module base;
    int64_t in, out;
    nb_tensor *weight, *bias;
} linear;

/* Whether x is [..., n], else an error naming the layer (fn) and what it expected. */
static bool last_axis_is(nb_module *self, const char *fn, nb_tensor *x, int64_t n) {
    if (nb_ndim(x) >= 1 && nb_dim(x, -1) == n) return true;
    char sh[160];
    nb__error("%s %s: expected input [..., %lld], got %s", fn, nb__layer_name(self), (long long)n,
              nb_shape_str(nb_shape_of(x), sh, sizeof sh));
    return false;
}

static nb_tensor *linear_forward(nb_module *self, nb_tensor *x) {
    linear *l = (linear *)self;
    if (!last_axis_is(self, "nb_nn_linear", x, l->in)) return NULL;
    return nb_linear(x, l->weight, l->bias);
}

static int linear_repr(nb_module *self, char *buf, size_t size) {
    linear *l = (linear *)self;
    return snprintf(buf, size, "in_features=%lld, out_features=%lld, bias=%s", (long long)l->in, (long long)l->out,
                    l->bias ? "True" : "False");
}
static const nb_module_class LINEAR = { .name = "Linear", .forward = linear_forward, .extra_repr = linear_repr };

static nb_module *make_linear(int64_t in, int64_t out, bool bias) {
    if (in <= 0 || out <= 0) {
        nb__error("nb_nn_linear: features must be positive, got in %lld, out %lld", (long long)in, (long long)out);
        return NULL;
    }
    linear *l = (linear *)nb_module_new(&LINEAR, sizeof(linear));
    if (!l) return NULL;
    l->in = in;
    l->out = out;
    /* torch: kaiming_uniform_(weight, a=sqrt(5)) and bias U(-1/sqrt(in), 1/sqrt(in)) */
    l->weight = nb_module_param(&l->base, "weight", nb_empty(NB_SHAPE(out, in), NB_F32));
    bool ok = l->weight && nb_init_kaiming_uniform(l->weight, sqrt(5.0)) == 0;
    if (ok && bias) {
        l->bias = nb_module_param(&l->base, "bias", nb_empty(NB_SHAPE(out), NB_F32));
        double bound = 1.0 / sqrt((double)in);
        ok = l->bias && nb_init_uniform(l->bias, -bound, bound) == 0;
    }
    if (!ok) { /* not nb__has_error(): an earlier error the caller did not clear is no failure here */
        nb_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

nb_module *nb_nn_linear(int64_t in, int64_t out) { return make_linear(in, out, true); }
nb_module *nb_nn_linear_no_bias(int64_t in, int64_t out) { return make_linear(in, out, false); }

/* ---------- stateless layers ---------- */
typedef struct {
    nb_module base;
    int axis;
    double p;
} simple;

static nb_tensor *relu_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_relu(x); }
static nb_tensor *gelu_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_gelu(x); }
static nb_tensor *silu_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_silu(x); }
static nb_tensor *tanh_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_tanh(x); }
static nb_tensor *sigmoid_forward(nb_module *m, nb_tensor *x) { (void)m; return nb_sigmoid(x); }
static nb_tensor *softmax_forward(nb_module *m, nb_tensor *x) { return nb_softmax(x, ((simple *)m)->axis); }
static nb_tensor *log_softmax_forward(nb_module *m, nb_tensor *x) { return nb_log_softmax(x, ((simple *)m)->axis); }
static nb_tensor *flatten_forward(nb_module *m, nb_tensor *x) {
    if (nb_ndim(x) < 1) {
        nb__error("nb_nn_flatten %s: expected input [N, ...], got a 0-d tensor", nb__layer_name(m));
        return NULL;
    }
    return nb_ndim(x) == 1 ? nb_unsqueeze(x, 1) : nb_flatten(x, 1, -1);
}
static nb_tensor *dropout_forward(nb_module *m, nb_tensor *x) { return nb_dropout(x, ((simple *)m)->p, m->training); }

static const nb_module_class RELU = { .name = "ReLU", .forward = relu_forward };
static int gelu_repr(nb_module *m, char *buf, size_t size) { (void)m; return snprintf(buf, size, "approximate='none'"); }
static const nb_module_class GELU = { .name = "GELU", .forward = gelu_forward, .extra_repr = gelu_repr };
static const nb_module_class SILU = { .name = "SiLU", .forward = silu_forward };
static const nb_module_class TANH = { .name = "Tanh", .forward = tanh_forward };
static const nb_module_class SIGMOID = { .name = "Sigmoid", .forward = sigmoid_forward };
static int dim_repr(nb_module *m, char *buf, size_t size) { return snprintf(buf, size, "dim=%d", ((simple *)m)->axis); }
static int flatten_repr(nb_module *m, char *buf, size_t size) { (void)m; return snprintf(buf, size, "start_dim=1, end_dim=-1"); }
static int dropout_repr(nb_module *m, char *buf, size_t size) {
    char p[32];
    return snprintf(buf, size, "p=%s, inplace=False", nb__py_float(((simple *)m)->p, p, sizeof p));
}
static const nb_module_class SOFTMAX = { .name = "Softmax", .forward = softmax_forward, .extra_repr = dim_repr };
static const nb_module_class LOG_SOFTMAX = { .name = "LogSoftmax", .forward = log_softmax_forward, .extra_repr = dim_repr };
static const nb_module_class FLATTEN = { .name = "Flatten", .forward = flatten_forward, .extra_repr = flatten_repr };
static const nb_module_class DROPOUT = { .name = "Dropout", .forward = dropout_forward, .extra_repr = dropout_repr };

static nb_module *make_simple(const nb_module_class *cls, int axis, double p) {
    simple *s = (simple *)nb_module_new(cls, sizeof(simple));
    if (!s) return NULL;
    s->axis = axis;
    s->p = p;
    return &s->base;
}

nb_module *nb_nn_relu(void) { return make_simple(&RELU, 0, 0); }
nb_module *nb_nn_gelu(void) { return make_simple(&GELU, 0, 0); }
nb_module *nb_nn_silu(void) { return make_simple(&SILU, 0, 0); }
nb_module *nb_nn_tanh(void) { return make_simple(&TANH, 0, 0); }
nb_module *nb_nn_sigmoid(void) { return make_simple(&SIGMOID, 0, 0); }
nb_module *nb_nn_softmax(int axis) { return make_simple(&SOFTMAX, axis, 0); }
nb_module *nb_nn_log_softmax(int axis) { return make_simple(&LOG_SOFTMAX, axis, 0); }
nb_module *nb_nn_flatten(void) { return make_simple(&FLATTEN, 0, 0); }
nb_module *nb_nn_dropout(double p) {
    if (!(p >= 0 && p < 1)) {
        nb__error("nb_nn_dropout: probability must be in [0, 1), got %g", p);
        return NULL;
    }
    return make_simple(&DROPOUT, 0, p);
}



/* ---------- embedding ---------- */
typedef struct {
    nb_module base;
    int64_t num, dim, padding_idx; /* -1: none */
    nb_tensor *weight;
} embedding;

static nb_tensor *embedding_forward(nb_module *self, nb_tensor *idx) {
    embedding *e = (embedding *)self;
    nb_dtype dt = nb_dtype_of(idx);
    if (dt != NB_I64 && dt != NB_I32) {
        char d[200];
        nb__error("nb_nn_embedding %s: expected i64 indices, got %s", nb__layer_name(self), nb__describe(idx, d, sizeof d));
        return NULL;
    }
    if (e->padding_idx < 0) return nb_embedding(e->weight, idx);
    /* torch's padding_idx: the padding row gets no gradient (its rows of the output are detached) */
    nb_scope *s = nb_scope_begin();
    nb_tensor *y = nb_embedding(e->weight, idx);
    nb_tensor *pad = nb_unsqueeze(nb_eq(idx, nb_full((nb_shape){ 0, { 0 } }, (double)e->padding_idx, dt)), -1);
    nb_tensor *r = nb_keep(nb_where(pad, nb_detach(y), y));
    nb_scope_end(s);
    return nb__own(r);
}

static int embedding_repr(nb_module *self, char *buf, size_t size) {
    embedding *e = (embedding *)self;
    if (e->padding_idx >= 0)
        return snprintf(buf, size, "%lld, %lld, padding_idx=%lld", (long long)e->num, (long long)e->dim, (long long)e->padding_idx);
    return snprintf(buf, size, "%lld, %lld", (long long)e->num, (long long)e->dim);
}
static const nb_module_class EMBEDDING = { .name = "Embedding", .forward = embedding_forward, .extra_repr = embedding_repr };

/* padding_idx: -1 none, else the row (made non-negative by the caller). */
static nb_module *make_embedding(int64_t num, int64_t dim, int64_t padding_idx) {
    embedding *e = (embedding *)nb_module_new(&EMBEDDING, sizeof(embedding));
    if (!e) return NULL;
    e->num = num;
    e->dim = dim;
    e->padding_idx = padding_idx;
    e->weight = nb_module_param(&e->base, "weight", nb_randn(NB_SHAPE(num, dim), NB_F32));
    int rc = e->weight ? 0 : -1;
    if (rc == 0 && padding_idx >= 0) { /* torch zeroes the padding row at initialisation */
        bool prev = nb_set_grad_enabled(false);
        nb_scope *s = nb_scope_begin();
        rc = nb_assign(nb_slice(e->weight, 0, padding_idx, padding_idx + 1, 1), nb_zeros(NB_SHAPE(1, dim), NB_F32));
        nb_scope_end(s);
        nb_set_grad_enabled(prev);
    }
    if (rc < 0) {
        nb_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}

nb_module *nb_nn_embedding_padded(int64_t num, int64_t dim, int64_t padding_idx) {
    if (num <= 0 || dim <= 0 || padding_idx < -num || padding_idx >= num) {
        nb__error("nb_nn_embedding: sizes must be positive and padding_idx within [-num, num), got %lld x %lld, padding_idx %lld",
                  (long long)num, (long long)dim, (long long)padding_idx);
        return NULL;
    }
    return make_embedding(num, dim, padding_idx < 0 ? padding_idx + num : padding_idx);
}

nb_module *nb_nn_embedding(int64_t num, int64_t dim) {
    if (num <= 0 || dim <= 0) {
        nb__error("nb_nn_embedding: sizes must be positive, got %lld x %lld", (long long)num, (long long)dim);
        return NULL;
    }
    return make_embedding(num, dim, -1);
}


typedef struct {
    nb_module base;
    int64_t dim;
    double eps;
    nb_tensor *weight, *bias;
} layer_norm;

static nb_tensor *layer_norm_forward(nb_module *self, nb_tensor *x) {
    layer_norm *l = (layer_norm *)self;
    if (!last_axis_is(self, "nb_nn_layer_norm", x, l->dim)) return NULL;
    return nb_layer_norm(x, l->weight, l->bias, l->eps);
}

static int layer_norm_repr(nb_module *self, char *buf, size_t size) {
    layer_norm *l = (layer_norm *)self;
    char e[32];
    return snprintf(buf, size, "(%lld,), eps=%s, elementwise_affine=%s", (long long)l->dim, nb__py_float(l->eps, e, sizeof e),
                    l->weight ? "True" : "False");
}
static const nb_module_class LAYER_NORM = { .name = "LayerNorm", .forward = layer_norm_forward, .extra_repr = layer_norm_repr };

nb_module *nb_nn_layer_norm(int64_t dim) { return nb_nn_layer_norm_eps(dim, 1e-5); }

nb_module *nb_nn_layer_norm_eps(int64_t dim, double eps) {
    if (dim <= 0 || !(eps > 0)) {
        nb__error("nb_nn_layer_norm: size must be positive and eps above 0, got %lld and %g", (long long)dim, eps);
        return NULL;
    }
    layer_norm *l = (layer_norm *)nb_module_new(&LAYER_NORM, sizeof(layer_norm));
    if (!l) return NULL;
    l->dim = dim;
    l->eps = eps;
    l->weight = nb_module_param(&l->base, "weight", nb_ones(NB_SHAPE(dim), NB_F32));
    l->bias = nb_module_param(&l->base, "bias", nb_zeros(NB_SHAPE(dim), NB_F32));
    if (!l->weight || !l->bias) {
        nb_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

/* RMSNorm shares the layer norm's fields, with no bias; eps <= 0 is torch's eps=None. */
static nb_tensor *rms_norm_forward(nb_module *self, nb_tensor *x) {
    layer_norm *l = (layer_norm *)self;
    if (!last_axis_is(self, "nb_nn_rms_norm", x, l->dim)) return NULL;
    return nb_rms_norm(x, l->weight, l->eps);
}

static int rms_norm_repr(nb_module *self, char *buf, size_t size) {
    layer_norm *l = (layer_norm *)self;
    char e[32];
    return snprintf(buf, size, "(%lld,), eps=%s, elementwise_affine=True", (long long)l->dim,
                    l->eps > 0 ? nb__py_float(l->eps, e, sizeof e) : "None");
}
static const nb_module_class RMS_NORM = { .name = "RMSNorm", .forward = rms_norm_forward, .extra_repr = rms_norm_repr };

nb_module *nb_nn_rms_norm(int64_t dim, double eps) {
    if (dim <= 0 || eps < 0 || isnan(eps)) {
        nb__error("nb_nn_rms_norm: size must be positive and eps at least 0, got %lld and %g", (long long)dim, eps);
        return NULL;
    }
    layer_norm *l = (layer_norm *)nb_module_new(&RMS_NORM, sizeof(layer_norm));
    if (!l) return NULL;
    l->dim = dim;
    l->eps = eps;
    if (!(l->weight = nb_module_param(&l->base, "weight", nb_ones(NB_SHAPE(dim), NB_F32)))) {
        nb_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}

/* ---------- sequential ---------- */
typedef struct {
    nb_module base;
    int count;
} sequential;

static nb_tensor *sequential_forward(nb_module *self, nb_tensor *x) {
    sequential *s = (sequential *)self;
    char name[16];
    for (int i = 0; i < s->count && x; i++) {
        snprintf(name, sizeof name, "%d", i);
        x = nb_forward(nb_module_get_child(self, name), x);
    }
    return x;
}

static const nb_module_class SEQUENTIAL = { .name = "Sequential", .forward = sequential_forward };

bool nb__is_sequential(const nb_module *m) { return m && m->cls == &SEQUENTIAL; }

nb_module *nb__append_numbered(nb_module *m, int *count, nb_module *child) {
    char name[16];
    snprintf(name, sizeof name, "%d", *count);
    if (!nb_module_child(m, name, child)) return NULL;
    ++*count;
    return m;
}

nb_module *nb_nn_sequential_add(nb_module *seq, nb_module *child) {
    if (!seq || seq->cls != &SEQUENTIAL) {
        if (child) nb_module_free(child);
        if (!nb__has_error()) nb__error("nb_nn_sequential_add: not a sequential module");
        return NULL;
    }
    return nb__append_numbered(seq, &((sequential *)seq)->count, child);
}

nb_module *nb_nn_sequential(nb_module *first, ...) {
    va_list ap;
    sequential *s = (sequential *)nb_module_new(&SEQUENTIAL, sizeof(sequential));
    bool failed = !s;
    va_start(ap, first);
    for (nb_module *m = first; m; m = va_arg(ap, nb_module *)) {
        if (failed) nb_module_free(m); /* the sequential owns what it was given, even on failure */
        else if (!nb_nn_sequential_add(&s->base, m)) failed = true;
    }
    va_end(ap);
    if (failed) {
        if (s) nb_module_free(&s->base);
        if (!nb__has_error()) nb__error("nb_nn_sequential: a layer failed to build");
        return NULL;
    }
    return &s->base;
}
