/* The module base: user-defined modules, dotted names in PyTorch's order, lookups, train and
   eval, freeing whole trees, errors that name the layer, bad arguments and duplicate names;
   and what the layers promise without a reference: the default initialisation of
   nb_nn_linear and the scaling of dropout in training; the errors of issue 15's losses,
   activations and containers. No PyTorch needed (the comparison with PyTorch is
   tests/test_nn_torch.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nabla.h>

/* ---- the user's network of DESIGN.md section 1 ---- */
typedef struct {
    nb_module base;
    nb_module *fc1, *fc2;
} Net;

static nb_tensor *net_forward(nb_module *self, nb_tensor *x) {
    Net *net = (Net *)self;
    return nb_forward(net->fc2, nb_relu(nb_forward(net->fc1, x)));
}
static const nb_module_class NET = { .name = "Net", .forward = net_forward };

static nb_module *net_new(void) {
    Net *net = (Net *)nb_module_new(&NET, sizeof(Net));
    net->fc1 = nb_module_child(&net->base, "fc1", nb_nn_linear(784, 128));
    net->fc2 = nb_module_child(&net->base, "fc2", nb_nn_linear(128, 10));
    return &net->base;
}

/* ---- a deeper tree: embed, layers (a sequential of blocks), head ---- */
typedef struct {
    nb_module base;
    nb_module *attn, *norm;
    nb_tensor *scale, *count;
    int freed_extra; /* set by the class's free */
} Block;

static int blocks_freed;

static nb_tensor *block_forward(nb_module *self, nb_tensor *x) {
    Block *b = (Block *)self;
    return nb_add(x, nb_mul(nb_forward(b->norm, nb_forward(b->attn, x)), b->scale));
}
static void block_free(nb_module *self) {
    (void)self;
    blocks_freed++;
}
static const nb_module_class BLOCK = { .name = "Block", .forward = block_forward, .free = block_free };

/* Registers a buffer first, then the children, then its own parameter: PyTorch lists a
   module's own parameters (and in a state dict, its buffers) before its children whatever the
   order of registration. */
static nb_module *block_new(int64_t dim) {
    Block *b = (Block *)nb_module_new(&BLOCK, sizeof(Block));
    b->count = nb_module_buffer(&b->base, "count", nb_zeros(NB_SHAPE(), NB_I64));
    b->attn = nb_module_child(&b->base, "attn", nb_nn_linear(dim, dim));
    b->norm = nb_module_child(&b->base, "norm", nb_nn_layer_norm(dim));
    b->scale = nb_module_param(&b->base, "scale", nb_ones(NB_SHAPE(dim), NB_F32));
    return &b->base;
}

typedef struct {
    nb_module base;
    nb_module *embed, *layers, *head;
} Deep;

static nb_tensor *deep_forward(nb_module *self, nb_tensor *x) {
    Deep *d = (Deep *)self;
    return nb_forward(d->head, nb_forward(d->layers, nb_forward(d->embed, x)));
}
static const nb_module_class DEEP = { .name = "Deep", .forward = deep_forward };

static nb_module *deep_new(void) {
    Deep *d = (Deep *)nb_module_new(&DEEP, sizeof(Deep));
    d->embed = nb_module_child(&d->base, "embed", nb_nn_embedding(11, 4));
    /* the sequential is built before it joins the tree: its children's paths follow */
    nb_module *seq = nb_nn_sequential(block_new(4), block_new(4), NULL);
    nb_nn_sequential_add(seq, block_new(4));
    d->layers = nb_module_child(&d->base, "layers", seq);
    d->head = nb_module_child(&d->base, "head", nb_nn_linear(4, 3));
    return &d->base;
}

static size_t used_bytes(void) {
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    return used;
}

static void expect_names(const char *what, const nb_named_tensor *got, int n, const char *const *want, int nwant) {
    bool same = n == nwant;
    for (int i = 0; same && i < n; i++) same = strcmp(got[i].name, want[i]) == 0;
    if (!same) {
        fprintf(stderr, "%s: got %d names:", what, n);
        for (int i = 0; i < n; i++) fprintf(stderr, " %s", got[i].name);
        fprintf(stderr, "\nexpected %d:", nwant);
        for (int i = 0; i < nwant; i++) fprintf(stderr, " %s", want[i]);
        fprintf(stderr, "\n");
        fail_msg("%s: names or order differ from PyTorch's", what);
    }
}

static void expect_error(const char *want_prefix) {
    const char *e = nb_error();
    if (!e) fail_msg("expected an error starting \"%s\", got none", want_prefix);
    if (strncmp(e, want_prefix, strlen(want_prefix)) != 0) fail_msg("expected an error starting \"%s\", got \"%s\"", want_prefix, e);
    nb_error_clear();
}

/* ---------------------------------------------------------------- tests */

/* Transformer stacks start with equal layers, as torch's copies of one layer; wrong arguments
   and masks are errors that name them; a decoder run through nb_forward asks for its memory. */
static void test_transformer_layers(void **state) {
    (void)state;
    nb_error_clear();
    nb_manual_seed(3);
    nb_module *enc = nb_nn_transformer_encoder(8, 2, 3, (nb_transformer_opts){ .dim_feedforward = 16, .final_norm = true });
    assert_non_null(enc);
    assert_true(nb_module_get(enc, "norm.weight") != NULL);
    nb_tensor *w0 = nb_module_get(enc, "layers.0.linear1.weight"), *w2 = nb_module_get(enc, "layers.2.linear1.weight");
    assert_non_null(w0);
    assert_non_null(w2);
    nb_scope *s = nb_scope_begin();
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(w0, w2)))) == 0.0);
    assert_true(nb_item(nb_sum_all(nb_abs(w0))) > 0.0);
    /* dropout 0.1 by default, and a forward in evaluation mode is deterministic */
    nb_module_train(enc, false);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 5, 8), NB_F32);
    nb_tensor *y1 = nb_forward(enc, x), *y2 = nb_forward(enc, x);
    assert_non_null(y1);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(y1, y2)))) == 0.0);
    assert_null(nb_forward(enc, nb_zeros(NB_SHAPE(5, 8), NB_F32)));
    expect_error("nb_transformer_forward: TransformerEncoder");
    assert_null(nb_transformer_forward(enc, x, NULL, (nb_transformer_masks){ .key_padding_mask = nb_zeros(NB_SHAPE(2, 4), NB_BOOL) }));
    expect_error("nb_transformer_forward: a key padding mask must be [2, 5]");
    assert_null(nb_transformer_forward(enc, x, NULL, (nb_transformer_masks){ .mask = nb_zeros(NB_SHAPE(5, 5), NB_I64) }));
    expect_error("nb_transformer_forward: the attention mask must be bool");
    /* an error left uncleared before does not fail a later forward */
    assert_null(nb_nn_linear(0, 1));
    assert_non_null(nb_transformer_forward(enc, x, NULL, (nb_transformer_masks){ .causal = true }));
    nb_error_clear();
    nb_module *dec = nb_nn_transformer_decoder_layer(8, 2, (nb_transformer_opts){ .no_dropout = true });
    assert_non_null(dec);
    assert_null(nb_forward(dec, x));
    expect_error("nb_forward: TransformerDecoderLayer");
    assert_null(nb_transformer_forward(dec, x, nb_zeros(NB_SHAPE(3, 6, 8), NB_F32), (nb_transformer_masks){ 0 }));
    expect_error("nb_transformer_forward: TransformerDecoderLayer");
    assert_non_null(nb_transformer_forward(dec, x, nb_zeros(NB_SHAPE(2, 6, 8), NB_F32), (nb_transformer_masks){ .causal = true }));
    nb_module *lin = nb_nn_linear(2, 2);
    assert_null(nb_transformer_forward(lin, x, NULL, (nb_transformer_masks){ 0 }));
    expect_error("nb_transformer_forward:");
    nb_module_free(lin);
    nb_scope_end(s);
    assert_null(nb_nn_transformer_encoder_layer(10, 3, (nb_transformer_opts){ 0 }));
    expect_error("nb_nn_transformer_encoder_layer: d_model 10 must be a positive multiple of nhead 3");
    assert_null(nb_nn_transformer_decoder(8, 2, 0, (nb_transformer_opts){ 0 }));
    expect_error("nb_nn_transformer_decoder: num_layers");
    nb_module_free(enc);
    nb_module_free(dec);
}

static void test_net_names_and_lookup(void **state) {
    (void)state;
    nb_error_clear();
    nb_module *net = net_new();
    assert_non_null(net);
    assert_null(nb_error());
    nb_named_tensor p[8];
    int n = nb_module_named_parameters(net, p, 8);
    static const char *const want[] = { "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" };
    expect_names("Net named_parameters", p, n, want, 4);
    nb_named_tensor se[8];
    expect_names("Net state_entries", se, nb_module_state_entries(net, se, 8), want, 4);
    assert_int_equal(nb_module_named_buffers(net, NULL, 0), 0);
    /* shapes as torch: weight [out, in], bias [out] */
    assert_int_equal(nb_dim(p[0].tensor, 0), 128);
    assert_int_equal(nb_dim(p[0].tensor, 1), 784);
    assert_int_equal(nb_ndim(p[1].tensor), 1);
    assert_int_equal(nb_dim(p[1].tensor, 0), 128);
    assert_true(nb_requires_grad(p[0].tensor) && nb_requires_grad(p[3].tensor));
    assert_int_equal(nb_module_num_params(net), 784 * 128 + 128 + 128 * 10 + 10);
    /* lookups */
    Net *nt = (Net *)net;
    assert_ptr_equal(nb_module_get(net, "fc1.weight"), p[0].tensor);
    assert_ptr_equal(nb_module_get(net, "fc2.bias"), p[3].tensor);
    assert_ptr_equal(nb_module_get(nt->fc1, "weight"), p[0].tensor);
    assert_null(nb_module_get(net, "fc3.weight"));
    assert_null(nb_module_get(net, "fc1"));
    assert_null(nb_module_get(net, "fc1.weight.x"));
    assert_null(nb_module_get(net, ""));
    assert_ptr_equal(nb_module_get_child(net, "fc1"), nt->fc1);
    assert_null(nb_module_get_child(net, "fc1.weight"));
    assert_string_equal(nb_module_path(net), "");
    assert_string_equal(nb_module_path(nt->fc2), "fc2");
    /* a capacity smaller than the count fills what fits and returns the count */
    nb_named_tensor one[1];
    assert_int_equal(nb_module_named_parameters(net, one, 1), 4);
    assert_string_equal(one[0].name, "fc1.weight");
    assert_int_equal(nb_module_named_parameters(net, NULL, 0), 4);
    /* forward, and a wrong input shape names the layer */
    nb_scope *s = nb_scope_begin();
    nb_tensor *y = nb_forward(net, nb_randn(NB_SHAPE(2, 784), NB_F32));
    assert_non_null(y);
    assert_int_equal(nb_dim(y, 0), 2);
    assert_int_equal(nb_dim(y, 1), 10);
    assert_null(nb_forward(net, nb_randn(NB_SHAPE(64, 785), NB_F32)));
    assert_string_equal(nb_error(), "nb_nn_linear fc1: expected input [..., 784], got [64, 785]");
    nb_error_clear();
    nb_scope_end(s);
    nb_module_free(net);
}

static void test_nested_paths(void **state) {
    (void)state;
    nb_error_clear();
    blocks_freed = 0;
    nb_module *d = deep_new();
    assert_null(nb_error());
    nb_named_tensor p[64];
    int n = nb_module_named_parameters(d, p, 64);
    static const char *const want[] = {
        "embed.weight",
        "layers.0.scale", "layers.0.attn.weight", "layers.0.attn.bias", "layers.0.norm.weight", "layers.0.norm.bias",
        "layers.1.scale", "layers.1.attn.weight", "layers.1.attn.bias", "layers.1.norm.weight", "layers.1.norm.bias",
        "layers.2.scale", "layers.2.attn.weight", "layers.2.attn.bias", "layers.2.norm.weight", "layers.2.norm.bias",
        "head.weight", "head.bias",
    };
    expect_names("Deep named_parameters", p, n, want, (int)(sizeof want / sizeof *want));
    nb_named_tensor b[8];
    static const char *const want_b[] = { "layers.0.count", "layers.1.count", "layers.2.count" };
    expect_names("Deep named_buffers", b, nb_module_named_buffers(d, b, 8), want_b, 3);
    nb_named_tensor se[64];
    static const char *const want_se[] = {
        "embed.weight",
        "layers.0.scale", "layers.0.count", "layers.0.attn.weight", "layers.0.attn.bias", "layers.0.norm.weight",
        "layers.0.norm.bias",
        "layers.1.scale", "layers.1.count", "layers.1.attn.weight", "layers.1.attn.bias", "layers.1.norm.weight",
        "layers.1.norm.bias",
        "layers.2.scale", "layers.2.count", "layers.2.attn.weight", "layers.2.attn.bias", "layers.2.norm.weight",
        "layers.2.norm.bias",
        "head.weight", "head.bias",
    };
    expect_names("Deep state_entries", se, nb_module_state_entries(d, se, 64), want_se, (int)(sizeof want_se / sizeof *want_se));
    assert_int_equal(nb_module_num_params(d), 11 * 4 + 3 * (4 + 16 + 4 + 4 + 4) + 12 + 3);
    /* a listing of a subtree names from that subtree */
    nb_module *layers = nb_module_get_child(d, "layers");
    nb_named_tensor sub[32];
    int ns = nb_module_named_parameters(layers, sub, 32);
    assert_int_equal(ns, 15);
    assert_string_equal(sub[0].name, "0.scale");
    assert_string_equal(sub[14].name, "2.norm.bias");
    /* paths and lookups through nested modules */
    nb_module *blk = nb_module_get_child(layers, "2");
    nb_module *attn = nb_module_get_child(blk, "attn");
    assert_non_null(attn);
    assert_string_equal(nb_module_path(attn), "layers.2.attn");
    assert_string_equal(nb_module_path(layers), "layers");
    assert_ptr_equal(nb_module_get(d, "layers.2.attn.weight"), nb_module_get(attn, "weight"));
    assert_ptr_equal(nb_module_get(d, "layers.1.count"), ((Block *)nb_module_get_child(layers, "1"))->count);
    assert_null(nb_module_get(d, "layers.3.attn.weight"));
    /* the names of the first listing live as long as the module, whatever is listed later */
    assert_string_equal(p[12].name, "layers.2.attn.weight");
    assert_string_equal(b[2].name, "layers.2.count");
    assert_string_equal(se[20].name, "head.bias");
    assert_string_equal(sub[14].name, "2.norm.bias");
    for (int k = 0; k < 100; k++) nb_module_named_parameters(d, NULL, 0); /* relisting does not grow without bound */
    assert_string_equal(p[0].name, "embed.weight");
    /* forward through the tree; a wrong shape deep inside names the layer's path */
    nb_scope *s = nb_scope_begin();
    nb_tensor *idx = nb_from_data((const int64_t[]){ 1, 5, 10 }, NB_SHAPE(3), NB_I64);
    nb_tensor *y = nb_forward(d, idx);
    assert_non_null(y);
    assert_int_equal(nb_dim(y, 1), 3);
    assert_null(nb_forward(blk, nb_randn(NB_SHAPE(3, 5), NB_F32)));
    assert_string_equal(nb_error(), "nb_nn_linear layers.2.attn: expected input [..., 4], got [3, 5]");
    nb_error_clear();
    /* backward reaches every parameter */
    assert_int_equal(nb_backward(nb_sum_all(y)), 0);
    for (int i = 0; i < n; i++)
        if (!nb_grad_of(nb_module_get(d, want[i]))) fail_msg("%s has no gradient after backward", want[i]);
    nb_module_zero_grad(d);
    for (int i = 0; i < n; i++)
        if (nb_grad_of(nb_module_get(d, want[i]))) fail_msg("%s still has a gradient after nb_module_zero_grad", want[i]);
    nb_scope_end(s);
    nb_module_free(d);
    assert_int_equal(blocks_freed, 3); /* each class's free ran once */
}

static void test_train_eval(void **state) {
    (void)state;
    nb_error_clear();
    nb_module *drop = nb_nn_dropout(0.5);
    nb_module *seq = nb_nn_sequential(nb_nn_linear(8, 8), nb_nn_sequential(nb_nn_relu(), drop, NULL), NULL);
    assert_non_null(seq);
    nb_module *inner = nb_module_get_child(seq, "1");
    assert_string_equal(nb_module_path(drop), "1.1");
    assert_true(seq->training && inner->training && drop->training); /* modules start in training mode */
    nb_module_train(seq, false);
    assert_false(seq->training || inner->training || drop->training || nb_module_get_child(seq, "0")->training);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_add_scalar(nb_rand(NB_SHAPE(16, 8), NB_F32), 1.0);
    /* in eval dropout is the identity: the same values every time */
    nb_tensor *a = nb_forward(drop, x), *b = nb_forward(seq, x), *c = nb_forward(seq, x);
    assert_int_equal(nb_item(nb_sum_all(nb_abs(nb_sub(a, x)))), 0);
    assert_int_equal(nb_item(nb_sum_all(nb_abs(nb_sub(b, c)))), 0);
    nb_module_train(seq, true);
    assert_true(drop->training);
    nb_tensor *t = nb_forward(drop, x);
    double zeros = nb_item(nb_sum_all(nb_cast(nb_eq(t, nb_zeros(NB_SHAPE(), NB_F32)), NB_F32)));
    assert_true(zeros > 0 && zeros < 128); /* 128 elements, p = 0.5 */
    /* train on a subtree only */
    nb_module_train(seq, false);
    nb_module_train(inner, true);
    assert_false(seq->training);
    assert_true(drop->training);
    nb_scope_end(s);
    nb_module_free(seq);
}

static void test_names_outlive_later_listings(void **state) {
    (void)state;
    nb_module *net = net_new();
    nb_named_tensor p[4], se[4], c[2];
    nb_module_named_parameters(net, p, 4);
    nb_module_state_entries(net, se, 4);
    nb_module_named_buffers(net, NULL, 0);
    nb_module_named_parameters(((Net *)net)->fc1, c, 2);
    nb_module_named_parameters(net, NULL, 0);
    /* "Names live as long as the module" (nn.h) */
    assert_string_equal(p[0].name, "fc1.weight");
    assert_string_equal(p[3].name, "fc2.bias");
    assert_string_equal(se[1].name, "fc1.bias");
    assert_string_equal(c[0].name, "weight");
    nb_module_free(net);
}

static void test_free_tree_releases_everything(void **state) {
    (void)state;
    nb_error_clear();
    size_t before = used_bytes();
    for (int i = 0; i < 3; i++) {
        nb_module *d = deep_new();
        nb_module *net = net_new();
        nb_scope *s = nb_scope_begin();
        nb_tensor *y = nb_forward(net, nb_randn(NB_SHAPE(4, 784), NB_F32));
        nb_backward(nb_sum_all(y));
        nb_scope_end(s);
        nb_module_free(net);
        nb_module_free(d);
    }
    nb_module_free(NULL); /* ignored */
    assert_null(nb_error());
    assert_int_equal(used_bytes(), before);
}

/* A stale error from earlier (which the caller did not clear) does not break later calls. */
static void test_stale_error_does_not_fail_constructors(void **state) {
    (void)state;
    nb_error_clear();
    nb_scope *s = nb_scope_begin();
    assert_null(nb_matmul(nb_ones(NB_SHAPE(2, 3), NB_F32), nb_ones(NB_SHAPE(4, 5), NB_F32)));
    assert_non_null(nb_error());
    nb_scope_end(s);
    nb_module *l = nb_nn_linear(3, 4), *nb = nb_nn_linear_no_bias(3, 4), *e = nb_nn_embedding(5, 2), *ln = nb_nn_layer_norm(3);
    nb_module *seq = nb_nn_sequential(nb_nn_relu(), NULL);
    assert_non_null(l);
    assert_non_null(nb);
    assert_non_null(e);
    assert_non_null(ln);
    assert_non_null(seq);
    /* optimizers too: state is made at the first step */
    nb_optimizer *opt = nb_optim_adam(l, (nb_adam_opts){ .lr = 0.1 });
    assert_non_null(opt);
    s = nb_scope_begin();
    assert_null(nb_matmul(nb_ones(NB_SHAPE(2, 3), NB_F32), nb_ones(NB_SHAPE(4, 5), NB_F32)));
    nb_set_grad(nb_module_get(l, "weight"), nb_ones(NB_SHAPE(4, 3), NB_F32));
    double w0 = nb_item(nb_sum_all(nb_module_get(l, "weight")));
    assert_int_equal(nb_optim_step(opt), 0);
    assert_true(nb_item(nb_sum_all(nb_module_get(l, "weight"))) < w0 - 1.0); /* 12 elements moved by lr */
    nb_scope_end(s);
    nb_optim_free(opt);
    nb_module_free(l);
    nb_module_free(nb);
    nb_module_free(e);
    nb_module_free(ln);
    nb_module_free(seq);
    nb_error_clear();
}

static void test_bad_constructor_arguments(void **state) {
    (void)state;
    nb_error_clear();
    assert_null(nb_nn_linear(0, 3));
    expect_error("nb_nn_linear:");
    assert_null(nb_nn_linear(3, -2));
    expect_error("nb_nn_linear:");
    assert_null(nb_nn_linear_no_bias(-1, 3));
    expect_error("nb_nn_linear");
    assert_null(nb_nn_dropout(1.0));
    expect_error("nb_nn_dropout:");
    assert_null(nb_nn_dropout(-0.1));
    expect_error("nb_nn_dropout:");
    assert_null(nb_nn_dropout(NAN));
    expect_error("nb_nn_dropout:");
    assert_null(nb_nn_embedding(0, 4));
    expect_error("nb_nn_embedding:");
    assert_null(nb_nn_embedding(4, -1));
    expect_error("nb_nn_embedding:");
    assert_null(nb_nn_layer_norm(0));
    expect_error("nb_nn_layer_norm:");
    /* enum options from outside their enum name the field and the value */
    assert_null(nb_nn_conv2d(1, 1, 3, (nb_conv2d_opts){ .padding = 1, .padding_mode = (nb_pad_mode)42 }));
    expect_error("nb_nn_conv2d: padding_mode 42 is not an nb_pad_mode value");
    assert_null(nb_nn_conv3d(1, 1, 3, (nb_conv2d_opts){ .padding_mode = (nb_pad_mode)-1 }));
    expect_error("nb_nn_conv3d: padding_mode -1 is not an nb_pad_mode value");
    assert_null(nb_nn_transformer_encoder_layer(8, 2, (nb_transformer_opts){ .activation = (nb_transformer_activation)-1 }));
    expect_error("nb_nn_transformer_encoder_layer: activation -1 is not an nb_transformer_activation value");
    assert_null(nb_nn_lstm(3, 4, (nb_rnn_opts){ .nonlinearity = (nb_rnn_nonlinearity)42 }));
    expect_error("nb_nn_lstm: nonlinearity 42 is not an nb_rnn_nonlinearity value");
    assert_null(nb_nn_upsample((nb_interp_opts){ .size = { 2, 2 }, .mode = (nb_interp_mode)-1 }));
    expect_error("nb_nn_upsample: mode -1 is not an nb_interp_mode value");
    nb_model *model = nb_model_new(nb_nn_linear(3, 2));
    assert_int_equal(nb_model_compile(model, (nb_compile_opts){ .optimizer = (nb_optim_kind)-1 }), -1);
    expect_error("nb_model_compile: optimizer -1 is not an nb_optim_kind value");
    assert_int_equal(nb_model_compile(model, (nb_compile_opts){ .loss = (nb_loss_kind)42 }), -1);
    expect_error("nb_model_compile: loss 42 is not an nb_loss_kind value");
    nb_model_free(model);
    assert_null(nb_module_new(NULL, sizeof(nb_module)));
    expect_error("nb_module_new:");
    static const nb_module_class C = { .name = "C" };
    assert_null(nb_module_new(&C, sizeof(nb_module) - 1));
    expect_error("nb_module_new:");
    /* a module without a forward */
    nb_module *m = nb_module_new(&C, sizeof(nb_module));
    nb_scope *s = nb_scope_begin();
    assert_null(nb_forward(m, nb_ones(NB_SHAPE(1), NB_F32)));
    expect_error("nb_forward:");
    assert_null(nb_forward(NULL, nb_ones(NB_SHAPE(1), NB_F32)));
    expect_error("nb_forward:");
    /* wrong inputs to layers name the layer; a root is "(root)" */
    nb_module *emb = nb_nn_embedding(5, 2), *ln = nb_nn_layer_norm(3);
    assert_null(nb_forward(emb, nb_ones(NB_SHAPE(2), NB_F32)));
    expect_error("nb_nn_embedding (root): expected i64 indices");
    assert_null(nb_forward(ln, nb_ones(NB_SHAPE(2, 4), NB_F32)));
    expect_error("nb_nn_layer_norm (root): expected input [..., 3], got [2, 4]");
    /* nb_nn_sequential_add to something else frees the child it was given */
    assert_null(nb_nn_sequential_add(m, nb_nn_linear(2, 2)));
    expect_error("nb_nn_sequential_add:");
    assert_null(nb_nn_sequential_add(NULL, nb_nn_relu()));
    expect_error("nb_nn_sequential_add:");
    /* NULL arguments */
    assert_null(nb_module_param(NULL, "w", nb_ones(NB_SHAPE(2), NB_F32)));
    expect_error("nb_module_param:");
    assert_null(nb_module_param(m, "w", NULL));
    expect_error("nb_module_param:");
    assert_null(nb_module_child(NULL, "c", nb_nn_relu()));
    expect_error("nb_module_child:");
    assert_true(nb_module_named_parameters(NULL, NULL, 0) < 0);
    expect_error("nb_module_named_parameters:");
    nb_scope_end(s);
    nb_module_free(emb);
    nb_module_free(ln);
    nb_module_free(m);
}

static void test_duplicate_and_invalid_names(void **state) {
    (void)state;
    nb_error_clear();
    size_t before = used_bytes();
    static const nb_module_class C = { .name = "Custom" };
    nb_module *m = nb_module_new(&C, sizeof(nb_module));
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_module_param(m, "w", nb_ones(NB_SHAPE(2), NB_F32));
    assert_non_null(w);
    assert_null(nb_module_param(m, "w", nb_ones(NB_SHAPE(3), NB_F32))); /* released, not leaked */
    assert_non_null(strstr(nb_error(), "\"w\""));
    expect_error("nb_module_param:");
    assert_null(nb_module_buffer(m, "w", nb_ones(NB_SHAPE(3), NB_F32)));
    expect_error("nb_module_buffer:");
    assert_non_null(nb_module_child(m, "c", nb_nn_relu()));
    assert_null(nb_module_child(m, "c", nb_nn_linear(2, 2))); /* freed, not leaked */
    assert_non_null(strstr(nb_error(), "\"c\""));
    expect_error("nb_module_child:");
    assert_null(nb_module_param(m, "c", nb_ones(NB_SHAPE(3), NB_F32))); /* a child's name is taken too */
    expect_error("nb_module_param:");
    assert_null(nb_module_param(m, "a.b", nb_ones(NB_SHAPE(3), NB_F32)));
    expect_error("nb_module_param:");
    assert_null(nb_module_param(m, "", nb_ones(NB_SHAPE(3), NB_F32)));
    expect_error("nb_module_param:");
    assert_null(nb_module_child(m, "x.y", nb_nn_relu()));
    expect_error("nb_module_child:");
    /* a child that already belongs to a module is not taken (and stays with its owner) */
    nb_module *c = nb_module_get_child(m, "c");
    nb_module *other = nb_module_new(&C, sizeof(nb_module));
    assert_null(nb_module_child(other, "c", c));
    expect_error("nb_module_child:");
    assert_ptr_equal(nb_module_get_child(m, "c"), c);
    nb_scope_end(s);
    nb_named_tensor p[4];
    assert_int_equal(nb_module_named_parameters(m, p, 4), 1);
    assert_string_equal(p[0].name, "w");
    assert_ptr_equal(p[0].tensor, w);
    assert_true(nb_requires_grad(w));
    nb_module_free(other);
    nb_module_free(m);
    assert_int_equal(used_bytes(), before);
}

/* Modules own what they are given: a parameter made inside a scope survives the scope. */
static void test_param_taken_out_of_scope(void **state) {
    (void)state;
    static const nb_module_class C = { .name = "Custom" };
    nb_module *m = nb_module_new(&C, sizeof(nb_module));
    nb_scope *s = nb_scope_begin();
    nb_tensor *w = nb_module_param(m, "w", nb_full(NB_SHAPE(3), 2.5, NB_F32));
    nb_tensor *b = nb_module_buffer(m, "b", nb_full(NB_SHAPE(1), 4.0, NB_F32));
    nb_scope_end(s);
    assert_true(nb_item(nb_module_get(m, "b")) == 4.0);
    s = nb_scope_begin();
    assert_true(nb_item(nb_sum_all(w)) == 7.5);
    assert_false(nb_requires_grad(b));
    nb_scope_end(s);
    nb_module_free(m);
}

/* Default initialisation of nb_nn_linear, as torch.nn.Linear: kaiming_uniform(a = sqrt(5))
   gives U(-1/sqrt(in), 1/sqrt(in)) weights, and the bias is U(-1/sqrt(in), 1/sqrt(in)). */
static void uniform_stats(nb_tensor *t, double bound, const char *what) {
    int64_t n = nb_numel(t);
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(nb_copy_to(t, v, sizeof(float) * (size_t)n), 0);
    double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        sum += v[i];
        sq += (double)v[i] * v[i];
        if (v[i] < lo) lo = v[i];
        if (v[i] > hi) hi = v[i];
    }
    free(v);
    double mean = sum / (double)n, var = sq / (double)n - mean * mean, want_var = bound * bound / 3;
    /* the standard error of the mean is bound / sqrt(3 n); of the variance about 0.9 var / sqrt(n) */
    double se_mean = bound / sqrt(3.0 * (double)n), se_var = 0.9 * want_var / sqrt((double)n);
    if (lo < -bound || hi > bound) fail_msg("%s: values in [%g, %g], outside +-%g", what, lo, hi, bound);
    if (n >= 1000 && (lo > -0.99 * bound || hi < 0.99 * bound))
        fail_msg("%s: values in [%g, %g] do not fill +-%g", what, lo, hi, bound);
    if (fabs(mean) > 5 * se_mean) fail_msg("%s: mean %g, expected 0 (+-%g)", what, mean, 5 * se_mean);
    if (fabs(var - want_var) > 5 * se_var) fail_msg("%s: variance %g, expected %g (+-%g)", what, var, want_var, 5 * se_var);
}

static void test_linear_default_init(void **state) {
    (void)state;
    nb_manual_seed(1234);
    nb_module *l = nb_nn_linear(256, 512);
    uniform_stats(nb_module_get(l, "weight"), 1.0 / 16, "nb_nn_linear(256, 512) weight");
    uniform_stats(nb_module_get(l, "bias"), 1.0 / 16, "nb_nn_linear(256, 512) bias");
    nb_module *l2 = nb_nn_linear(50, 7);
    uniform_stats(nb_module_get(l2, "weight"), 1.0 / sqrt(50.0), "nb_nn_linear(50, 7) weight");
    uniform_stats(nb_module_get(l2, "bias"), 1.0 / sqrt(50.0), "nb_nn_linear(50, 7) bias");
    /* reproducible from the seed, different without it */
    nb_manual_seed(99);
    nb_module *a = nb_nn_linear(8, 8);
    nb_module *b = nb_nn_linear(8, 8);
    nb_manual_seed(99);
    nb_module *c = nb_nn_linear(8, 8);
    nb_scope *s = nb_scope_begin();
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(nb_module_get(a, "weight"), nb_module_get(c, "weight"))))) == 0);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(nb_module_get(a, "bias"), nb_module_get(c, "bias"))))) == 0);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(nb_module_get(a, "weight"), nb_module_get(b, "weight"))))) > 0);
    /* the other layers' defaults: embedding N(0, 1), layer norm ones and zeros */
    nb_module *e = nb_nn_embedding(1000, 64);
    nb_tensor *ew = nb_module_get(e, "weight");
    double m = nb_item(nb_mean_all(ew));
    double sd = sqrt(nb_item(nb_mean_all(nb_mul(ew, ew))) - m * m);
    assert_true(fabs(m) < 0.02 && fabs(sd - 1) < 0.02);
    nb_module *ln = nb_nn_layer_norm(6);
    assert_true(nb_item(nb_sum_all(nb_module_get(ln, "weight"))) == 6);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_module_get(ln, "bias")))) == 0);
    nb_scope_end(s);
    nb_module_free(l);
    nb_module_free(l2);
    nb_module_free(a);
    nb_module_free(b);
    nb_module_free(c);
    nb_module_free(e);
    nb_module_free(ln);
}

/* Dropout in training: kept elements are x / (1 - p), dropped ones 0, about a fraction p
   dropped; the gradient goes through the same mask with the same scale. */
static void test_dropout_training(void **state) {
    (void)state;
    nb_error_clear();
    const double ps[] = { 0.1, 0.3, 0.75 };
    for (int k = 0; k < 3; k++) {
        double p = ps[k];
        nb_module *d = nb_nn_dropout(p);
        nb_scope *s = nb_scope_begin();
        const int64_t n = 200 * 500;
        nb_tensor *x = nb_set_requires_grad(nb_add_scalar(nb_rand(NB_SHAPE(200, 500), NB_F32), 0.5), true);
        nb_tensor *y = nb_forward(d, x);
        assert_non_null(y);
        assert_int_equal(nb_backward(nb_sum_all(y)), 0);
        float *xv = malloc(sizeof(float) * (size_t)n), *yv = malloc(sizeof(float) * (size_t)n),
              *gv = malloc(sizeof(float) * (size_t)n);
        assert_int_equal(nb_copy_to(x, xv, sizeof(float) * (size_t)n), 0);
        assert_int_equal(nb_copy_to(y, yv, sizeof(float) * (size_t)n), 0);
        assert_int_equal(nb_copy_to(nb_grad_of(x), gv, sizeof(float) * (size_t)n), 0);
        int64_t dropped = 0;
        const double scale = 1.0 / (1.0 - p);
        for (int64_t i = 0; i < n; i++) {
            if (yv[i] == 0) {
                dropped++;
                if (gv[i] != 0) fail_msg("p %g: element %lld dropped but its gradient is %g", p, (long long)i, gv[i]);
            } else {
                if (fabs(yv[i] - xv[i] * scale) > 1e-6 * fabs(xv[i] * scale))
                    fail_msg("p %g: kept element %lld is %.9g, expected x / (1 - p) = %.9g", p, (long long)i, yv[i],
                             xv[i] * scale);
                if (fabs(gv[i] - scale) > 1e-6 * scale)
                    fail_msg("p %g: kept element %lld has gradient %.9g, expected %.9g", p, (long long)i, gv[i], scale);
            }
        }
        double frac = (double)dropped / (double)n, se = sqrt(p * (1 - p) / (double)n);
        if (fabs(frac - p) > 5 * se) fail_msg("p %g: dropped a fraction %g of %lld elements", p, frac, (long long)n);
        /* a second call draws a different mask */
        nb_tensor *y2 = nb_forward(d, x);
        assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(y, y2)))) > 0);
        free(xv);
        free(yv);
        free(gv);
        nb_scope_end(s);
        nb_module_free(d);
    }
    /* p = 0 in training and the functional form at p = 1 */
    nb_module *d0 = nb_nn_dropout(0);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_rand(NB_SHAPE(10, 10), NB_F32);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(nb_forward(d0, x), x)))) == 0);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_dropout(x, 1.0, true)))) == 0);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(nb_dropout(x, 0.9, false), x)))) == 0);
    assert_null(nb_dropout(x, 1.5, true));
    expect_error("nb_dropout:");
    nb_scope_end(s);
    nb_module_free(d0);
}

/* Optimizer arguments: bad hyperparameters and parameter lists are errors that name the
   function; NB_ZERO asks for an explicit zero; a parameter without a gradient is left alone. */
static void test_optim_arguments(void **state) {
    (void)state;
    nb_error_clear();
    size_t before = used_bytes();
    nb_module *l = nb_nn_linear(3, 2);
    assert_null(nb_optim_sgd(l, (nb_sgd_opts){ .lr = -1 }));
    expect_error("nb_optim_sgd:");
    assert_null(nb_optim_sgd(l, (nb_sgd_opts){ .lr = 0.1, .nesterov = true }));
    expect_error("nb_optim_sgd:");
    assert_null(nb_optim_adam(l, (nb_adam_opts){ .beta1 = 1.0 }));
    expect_error("nb_optim_adam:");
    assert_null(nb_optim_adamw(l, (nb_adamw_opts){ .beta2 = 1.5 }));
    expect_error("nb_optim_adamw:");
    assert_null(nb_optim_rmsprop(l, (nb_rmsprop_opts){ .weight_decay = -0.1 }));
    expect_error("nb_optim_rmsprop:");
    nb_optimizer *o = nb_optim_sgd(NULL, (nb_sgd_opts){ .lr = 0.1 });
    assert_non_null(o);
    assert_int_equal(nb_optim_num_groups(o), 0);
    nb_tensor *w = nb_module_get(l, "weight"), *b = nb_module_get(l, "bias");
    assert_int_equal(nb_optim_add_param_group(o, &w, 1, (nb_group_opts){ 0 }), 0);
    assert_true(nb_optim_add_param_group(o, &w, 1, (nb_group_opts){ 0 }) < 0); /* already in group 0 */
    expect_error("nb_optim_add_param_group:");
    nb_tensor *none[1] = { NULL };
    assert_true(nb_optim_add_param_group(o, none, 1, (nb_group_opts){ 0 }) < 0);
    expect_error("nb_optim_add_param_group:");
    nb_scope *s = nb_scope_begin();
    nb_tensor *not_leaf[1] = { nb_mul_scalar(w, 2.0) };
    assert_true(nb_optim_add_param_group(o, not_leaf, 1, (nb_group_opts){ 0 }) < 0);
    expect_error("nb_optim_add_param_group:");
    assert_int_equal(nb_optim_add_param_group(o, &b, 1, (nb_group_opts){ .lr = 0.5 }), 1);
    assert_true(nb_optim_get_lr(o, 1) == 0.5 && nb_optim_get_lr(o, 0) == 0.1);
    assert_true(nb_optim_set_group_lr(o, 2, 1.0) < 0);
    expect_error("nb_optim_set_group_lr:");
    nb_optim_set_lr(o, 0.25);
    assert_true(nb_optim_get_lr(o, 0) == 0.25 && nb_optim_get_lr(o, 1) == 0.25);
    assert_null(nb_sched_linear(o, 0.5, -0.5, 10)); /* a negative end factor is refused, not made positive */
    expect_error("nb_sched_linear:");
    nb_scheduler *lin = nb_sched_linear(o, 0.5, NB_ZERO, 10); /* an explicit end factor of 0 */
    assert_non_null(lin);
    nb_sched_free(lin);
    nb_optim_set_lr(o, 0.25);
    /* nb_mha_forward on a module of another kind is an error, not a cast */
    nb_tensor *q = nb_zeros(NB_SHAPE(1, 2, 3), NB_F32);
    assert_null(nb_mha_forward(l, q, q, q, NULL));
    expect_error("nb_mha_forward:");
    /* only w has a gradient: b is left alone */
    double b0 = nb_item(nb_sum_all(b)), w0 = nb_item(nb_sum_all(w));
    nb_set_grad(w, nb_ones(NB_SHAPE(2, 3), NB_F32));
    assert_int_equal(nb_optim_step(o), 0);
    assert_true(nb_item(nb_sum_all(b)) == b0);
    assert_true(fabs(nb_item(nb_sum_all(w)) - (w0 - 6 * 0.25)) < 1e-5);
    nb_optim_zero_grad(o);
    assert_null(nb_grad_of(w));
    nb_scope_end(s);
    nb_optim_free(o);
    /* AdamW with NB_ZERO weight decay is Adam; with its default (1e-2) it is not */
    nb_module *m[3] = { nb_nn_linear(3, 2), nb_nn_linear(3, 2), nb_nn_linear(3, 2) };
    bool prev = nb_set_grad_enabled(false);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(nb_assign(nb_module_get(m[i], "weight"), nb_module_get(m[0], "weight")), 0);
        assert_int_equal(nb_assign(nb_module_get(m[i], "bias"), nb_module_get(m[0], "bias")), 0);
    }
    nb_set_grad_enabled(prev);
    nb_optimizer *opts[3] = { nb_optim_adam(m[0], (nb_adam_opts){ .lr = 0.1 }),
                              nb_optim_adamw(m[1], (nb_adamw_opts){ .lr = 0.1, .weight_decay = NB_ZERO }),
                              nb_optim_adamw(m[2], (nb_adamw_opts){ .lr = 0.1 }) };
    s = nb_scope_begin();
    for (int k = 0; k < 3; k++) {
        nb_tensor *g = nb_randn(NB_SHAPE(2, 3), NB_F32), *gb = nb_randn(NB_SHAPE(2), NB_F32);
        for (int i = 0; i < 3; i++) {
            nb_set_grad(nb_module_get(m[i], "weight"), g);
            nb_set_grad(nb_module_get(m[i], "bias"), gb);
            assert_int_equal(nb_optim_step(opts[i]), 0);
        }
    }
    double d01 = nb_item(nb_sum_all(nb_abs(nb_sub(nb_module_get(m[0], "weight"), nb_module_get(m[1], "weight")))));
    double d02 = nb_item(nb_sum_all(nb_abs(nb_sub(nb_module_get(m[0], "weight"), nb_module_get(m[2], "weight")))));
    if (d01 > 1e-6) fail_msg("adam and adamw(weight_decay NB_ZERO) differ by %g", d01); /* rounding only */
    if (d02 < 1e-4) fail_msg("adam and adamw(default weight decay) differ by only %g", d02);
    nb_scope_end(s);
    for (int i = 0; i < 3; i++) {
        nb_optim_free(opts[i]);
        nb_module_free(m[i]);
    }
    nb_optim_free(NULL);
    nb_module_free(l);
    assert_int_equal(used_bytes(), before);
}

/* A few training steps of an MLP and a small CNN (convolution, pooling, softmax cross entropy,
   AdamW) end in the same bits with 1, 2 and 3 threads: every parallel loop's split is fixed by
   the shapes, never by the thread count. */
static int train_and_read(int threads, float *out, int cap) {
    nb_set_num_threads(threads);
    nb_manual_seed(11);
    nb_module *mlp = nb_nn_sequential(nb_nn_flatten(), nb_nn_linear(784, 256), nb_nn_relu(), nb_nn_linear(256, 10), NULL);
    nb_module *cnn = nb_nn_sequential(nb_nn_conv2d(1, 8, 3, (nb_conv2d_opts){ .padding = 1 }), nb_nn_relu(),
                                      nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }), nb_nn_flatten(), nb_nn_linear(8 * 14 * 14, 10), NULL);
    nb_module *nets[2] = { mlp, cnn };
    int n = 0;
    for (int k = 0; k < 2; k++) {
        nb_optimizer *opt = nb_optim_adamw(nets[k], (nb_adamw_opts){ .lr = 1e-3 });
        for (int step = 0; step < 3; step++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *x = nb_randn(NB_SHAPE(96, 1, 28, 28), NB_F32);
            nb_tensor *y = nb_cast(nb_mul_scalar(nb_rand(NB_SHAPE(96), NB_F32), 9.99), NB_I64);
            nb_tensor *loss = nb_cross_entropy(nb_forward(nets[k], x), y, (nb_ce_opts){ 0 });
            nb_optim_zero_grad(opt);
            assert_int_equal(nb_backward(loss), 0);
            nb_optim_step(opt);
            nb_scope_end(s);
        }
        nb_named_tensor ps[16];
        int np = nb_module_named_parameters(nets[k], ps, 16);
        for (int i = 0; i < np; i++) {
            int64_t m = nb_numel(ps[i].tensor);
            assert_true(n + m <= cap);
            assert_int_equal(nb_copy_to(ps[i].tensor, out + n, (size_t)m * sizeof(float)), 0);
            n += (int)m;
        }
        nb_optim_free(opt);
        nb_module_free(nets[k]);
    }
    nb_set_num_threads(0);
    return n;
}

static void test_training_bits_do_not_depend_on_threads(void **state) {
    (void)state;
    enum { CAP = 300000 };
    float *ref = malloc(CAP * sizeof(float)), *got = malloc(CAP * sizeof(float));
    assert_non_null(ref);
    assert_non_null(got);
    int n = train_and_read(1, ref, CAP);
    for (int threads = 2; threads <= 3; threads++) {
        assert_int_equal(train_and_read(threads, got, CAP), n);
        for (int i = 0; i < n; i++)
            if (memcmp(&ref[i], &got[i], sizeof(float)) != 0)
                fail_msg("parameter element %d differs with %d threads: %.9g against %.9g", i, threads, got[i], ref[i]);
    }
    free(ref);
    free(got);
}

/* Forward hooks, as torch's register_forward_pre_hook / register_forward_hook: in order, able
   to replace the input and the output, called on failure with no output, and removable. */
typedef struct { int pre, post, failed; } hook_log;
static nb_tensor *pre_scale(nb_module *m, nb_tensor *x, void *ctx) {
    (void)m;
    ((hook_log *)ctx)->pre++;
    return nb_mul_scalar(x, 2.0);
}
static nb_tensor *post_add(nb_module *m, nb_tensor *x, nb_tensor *y, void *ctx) {
    (void)m; (void)x;
    hook_log *log = ctx;
    if (!y) { log->failed++; return NULL; }
    log->post++;
    return nb_add_scalar(y, 1.0);
}

static void test_forward_hooks(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_module *relu = nb_nn_relu();
    hook_log log = { 0 };
    int a = nb_module_add_forward_pre_hook(relu, pre_scale, &log);
    int b = nb_module_add_forward_hook(relu, post_add, &log);
    assert_true(a >= 0 && b >= 0 && a != b);
    float out[2];
    nb_tensor *y = nb_forward(relu, nb_from_data((float[]){ -1, 3 }, NB_SHAPE(2), NB_F32));
    assert_int_equal(nb_copy_to(y, out, sizeof out), 0);
    assert_true(out[0] == 1 && out[1] == 7); /* relu(2x) + 1 */
    assert_int_equal(log.pre, 1);
    assert_int_equal(log.post, 1);
    /* a forward that fails still reaches the forward hook, with no output */
    nb_module *lin = nb_nn_linear(3, 2);
    assert_true(nb_module_add_forward_hook(lin, post_add, &log) >= 0);
    assert_null(nb_forward(lin, nb_zeros(NB_SHAPE(4, 5), NB_F32)));
    assert_int_equal(log.failed, 1);
    nb_error_clear();
    /* removed, it runs no more; a second removal is an error */
    assert_int_equal(nb_module_remove_hook(relu, a), 0);
    assert_int_equal(nb_module_remove_hook(relu, b), 0);
    assert_int_equal(nb_module_remove_hook(relu, b), -1);
    ASSERT_ERROR_CONTAINS("has no hook");
    y = nb_forward(relu, nb_from_data((float[]){ -1, 3 }, NB_SHAPE(2), NB_F32));
    assert_int_equal(nb_copy_to(y, out, sizeof out), 0);
    assert_true(out[0] == 0 && out[1] == 3);
    assert_int_equal(log.pre, 1);
    assert_int_equal(nb_module_add_forward_hook(relu, NULL, NULL), -1);
    ASSERT_ERROR_CONTAINS("the hook is NULL");
    nb_scope_end(s);
    nb_module_free(lin);
    nb_module_free(relu);
}

/* Backward hooks, as torch's register_full_backward_hook / register_full_backward_pre_hook, on
   values known by hand. A Linear with W = [[2, 3]], b = [0.5] on x = [[1, -1]], and the loss
   4 * y: grad_output is [[4]], grad_input = grad_output W = [[8, 12]], W's gradient
   grad_output^T x = [[4, -4]]. */
typedef struct {
    int calls, pre_calls;
    float gin[4], gout[4], pre_gout[4];
    bool gin_null;
    double scale_in, scale_out; /* 0: keep */
    bool wrong_shape, fail_op, give_when_null;
} bw_log;

static void read2(nb_tensor *t, float *out) {
    assert_non_null(t);
    assert_int_equal(nb_copy_to(nb_contiguous(t), out, sizeof(float) * (size_t)nb_numel(t)), 0);
}

static nb_tensor *bw_record(nb_module *m, nb_tensor *gin, nb_tensor *gout, void *ctx) {
    (void)m;
    bw_log *log = ctx;
    log->calls++;
    log->gin_null = gin == NULL;
    if (gin) read2(gin, log->gin);
    read2(gout, log->gout);
    if (log->give_when_null && !gin) return nb_zeros(NB_SHAPE(1), NB_F32);
    if (log->wrong_shape) return nb_zeros(NB_SHAPE(3), NB_F32);
    if (log->fail_op) return nb_matmul(gin, nb_zeros(NB_SHAPE(5, 5), NB_F32));
    return log->scale_in && gin ? nb_mul_scalar(gin, log->scale_in) : NULL;
}

static nb_tensor *bw_pre_record(nb_module *m, nb_tensor *gout, void *ctx) {
    (void)m;
    bw_log *log = ctx;
    log->pre_calls++;
    read2(gout, log->pre_gout);
    return log->scale_out ? nb_mul_scalar(gout, log->scale_out) : NULL;
}

static nb_module *hand_linear(void) {
    nb_module *lin = nb_nn_linear(2, 1);
    bool prev = nb_set_grad_enabled(false); /* an in-place write to a parameter, as torch.no_grad */
    assert_int_equal(nb_assign(nb_module_get(lin, "weight"), nb_from_data((float[]){ 2, 3 }, NB_SHAPE(1, 2), NB_F32)), 0);
    assert_int_equal(nb_assign(nb_module_get(lin, "bias"), nb_from_data((float[]){ 0.5f }, NB_SHAPE(1), NB_F32)), 0);
    nb_set_grad_enabled(prev);
    return lin;
}

/* Runs 4 * lin(x) backward, x = [[1, -1]] (needing grad or not); the backward's status. */
static int hand_backward(nb_module *lin, bool x_grad, nb_tensor **x_out) {
    nb_tensor *x = nb_from_data((float[]){ 1, -1 }, NB_SHAPE(1, 2), NB_F32);
    if (x_grad) nb_set_requires_grad(x, true);
    if (x_out) *x_out = x;
    nb_module_zero_grad(lin);
    return nb_backward(nb_sum_all(nb_mul_scalar(nb_forward(lin, x), 4.0)));
}

static nb_tensor *hooked_step(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor *loss = nb_sum_all(nb_forward((nb_module *)ctx, in[0]));
    if (!loss || nb_backward(loss) < 0) return NULL;
    return loss;
}

static void test_backward_hooks(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_module *lin = hand_linear();
    bw_log log = { 0 };
    int h = nb_module_add_backward_hook(lin, bw_record, &log);
    int p = nb_module_add_backward_pre_hook(lin, bw_pre_record, &log);
    assert_true(h >= 0 && p >= 0 && h != p);
    nb_tensor *x;
    float v[4];
    assert_int_equal(hand_backward(lin, true, &x), 0);
    assert_int_equal(log.calls, 1);
    assert_int_equal(log.pre_calls, 1);
    assert_false(log.gin_null);
    assert_true(log.pre_gout[0] == 4 && log.gout[0] == 4);
    assert_true(log.gin[0] == 8 && log.gin[1] == 12);
    read2(nb_grad_of(x), v);
    assert_true(v[0] == 8 && v[1] == 12);

    /* a hook's grad_input goes on upstream; the parameters' gradients do not see it */
    log.scale_in = 0.5;
    assert_int_equal(hand_backward(lin, true, &x), 0);
    read2(nb_grad_of(x), v);
    assert_true(v[0] == 4 && v[1] == 6);
    read2(nb_grad_of(nb_module_get(lin, "weight")), v);
    assert_true(v[0] == 4 && v[1] == -4);
    /* a pre-hook's grad_output goes into the module's backward and to the hooks */
    log.scale_in = 0;
    log.scale_out = 3;
    assert_int_equal(hand_backward(lin, true, &x), 0);
    assert_true(log.pre_gout[0] == 4 && log.gout[0] == 12);
    assert_true(log.gin[0] == 24 && log.gin[1] == 36);
    read2(nb_grad_of(nb_module_get(lin, "weight")), v);
    assert_true(v[0] == 12 && v[1] == -12);
    log.scale_out = 0;

    /* an input that needs no gradient: grad_input is NULL, the hook still hears grad_output */
    log.calls = 0;
    assert_int_equal(hand_backward(lin, false, NULL), 0);
    assert_int_equal(log.calls, 1);
    assert_true(log.gin_null && log.gout[0] == 4);
    log.give_when_null = true;
    assert_true(hand_backward(lin, false, NULL) < 0);
    ASSERT_ERROR_CONTAINS("needs none (grad_input is NULL)");
    log.give_when_null = false;

    /* errors: a grad_input of the wrong shape, a hook whose own op failed; both name the hook */
    log.wrong_shape = true;
    assert_true(hand_backward(lin, true, NULL) < 0);
    ASSERT_ERROR_CONTAINS("backward hook (handle 0) of module (root) (Linear) returned [3] f32 for grad_input [1, 2] f32");
    log.wrong_shape = false;
    log.fail_op = true;
    assert_true(hand_backward(lin, true, NULL) < 0);
    ASSERT_ERROR_CONTAINS("backward hook (handle 0) of module (root) (Linear) failed: nb_matmul");
    log.fail_op = false;

    /* a module used twice in one forward: each call's hooks see that call's gradients */
    log.calls = 0;
    nb_tensor *x2 = nb_set_requires_grad(nb_from_data((float[]){ 1, -1 }, NB_SHAPE(1, 2), NB_F32), true);
    nb_tensor *loss = nb_add(nb_sum_all(nb_forward(lin, x2)), nb_sum_all(nb_mul_scalar(nb_forward(lin, x2), 5.0)));
    assert_int_equal(nb_backward(loss), 0);
    assert_int_equal(log.calls, 2);
    read2(nb_grad_of(x2), v);
    assert_true(v[0] == 12 && v[1] == 18); /* (1 + 5) W */

    /* no hook runs without a graph, nor once removed */
    log.calls = log.pre_calls = 0;
    bool prev = nb_set_grad_enabled(false);
    assert_non_null(nb_forward(lin, x2));
    nb_set_grad_enabled(prev);
    assert_int_equal(nb_module_remove_hook(lin, h), 0);
    assert_int_equal(nb_module_remove_hook(lin, p), 0);
    assert_int_equal(hand_backward(lin, true, &x), 0);
    assert_int_equal(log.calls + log.pre_calls, 0);
    read2(nb_grad_of(x), v);
    assert_true(v[0] == 8 && v[1] == 12);
    assert_int_equal(nb_module_add_backward_hook(lin, NULL, NULL), -1);
    ASSERT_ERROR_CONTAINS("the hook is NULL");
    assert_int_equal(nb_module_add_backward_pre_hook(NULL, bw_pre_record, NULL), -1);
    ASSERT_ERROR_CONTAINS("module is NULL");

    /* a graph dropped without a backward frees the hooks' state with it (ASan's leak check) */
    assert_true(nb_module_add_backward_hook(lin, bw_record, &log) >= 0);
    nb_forward(lin, x2);
    /* nb_compile would replay the step without calling the hooks: an error naming the module */
    nb_compiled *c = nb_compile(hooked_step, lin, (nb_graph_opts){ 0 });
    assert_null(nb_compiled_run(c, (nb_tensor *[]){ x2 }, 1));
    ASSERT_ERROR_CONTAINS("module (root) (Linear) has backward hooks, which a compiled graph would never call");
    nb_compiled_free(c);
    nb_scope_end(s);
    nb_module_free(lin);
}

/* issue 15's losses: wrong shapes, dtypes, values and reductions are errors naming the function
   and the shapes; nothing is left allocated. */
static void test_loss_errors(void **state) {
    (void)state;
    size_t before = used_bytes();
    nb_scope *s = nb_scope_begin();
    nb_tensor *p23 = nb_full(NB_SHAPE(2, 3), 0.5, NB_F32), *p32 = nb_full(NB_SHAPE(3, 2), 0.5, NB_F32);
    nb_tensor *v3 = nb_ones(NB_SHAPE(3), NB_F32), *v4 = nb_ones(NB_SHAPE(4), NB_F32);
    assert_null(nb_bce_loss(p23, p32, NB_REDUCTION_MEAN, NULL));
    ASSERT_ERROR_CONTAINS("nb_bce_loss: input [2, 3] f32 and target [3, 2] f32 differ in shape");
    assert_null(nb_bce_loss(nb_from_data((float[]){ 0.5f, 1.5f, NAN }, NB_SHAPE(3), NB_F32), v3, NB_REDUCTION_MEAN, NULL));
    ASSERT_ERROR_CONTAINS("nb_bce_loss: input [3] f32 holds 2 values outside [0, 1]: it takes probabilities");
    assert_null(nb_bce_loss(nb_ones(NB_SHAPE(3), NB_I64), v3, NB_REDUCTION_MEAN, NULL));
    ASSERT_ERROR_CONTAINS("nb_bce_loss: input must be floating-point, got [3] i64");
    assert_null(nb_bce_loss(p23, p23, NB_REDUCTION_MEAN, v4));
    ASSERT_ERROR_CONTAINS("nb_bce_loss: weight [4] f32 does not broadcast to input [2, 3] f32");
    assert_null(nb_bce_loss(NULL, p23, NB_REDUCTION_MEAN, NULL));
    ASSERT_ERROR_CONTAINS("nb_bce_loss: input is NULL");
    /* batchmean is KL's only */
    assert_null(nb_mse_loss(p23, p23, NB_REDUCTION_BATCHMEAN));
    ASSERT_ERROR_CONTAINS("nb_mse_loss: reduction batchmean applies to nb_kl_div_loss only");
    assert_null(nb_cross_entropy(p23, nb_zeros(NB_SHAPE(2), NB_I64), (nb_ce_opts){ .reduction = NB_REDUCTION_BATCHMEAN }));
    ASSERT_ERROR_CONTAINS("nb_cross_entropy: reduction batchmean applies to nb_kl_div_loss only");
    assert_null(nb_huber_loss(p23, p23, (nb_reduction)7, 1.0));
    ASSERT_ERROR_CONTAINS("nb_huber_loss: reduction 7 is not an nb_reduction value");
    assert_non_null(nb_kl_div_loss(p23, p23, NB_REDUCTION_BATCHMEAN, false));
    assert_null(nb_kl_div_loss(p23, p32, NB_REDUCTION_BATCHMEAN, true));
    ASSERT_ERROR_CONTAINS("nb_kl_div_loss: input [2, 3] f32 and target [3, 2] f32 differ in shape");
    assert_null(nb_huber_loss(p23, p23, NB_REDUCTION_SUM, -1));
    ASSERT_ERROR_CONTAINS("nb_huber_loss: delta must be positive, got -1");
    assert_null(nb_margin_ranking_loss(v3, v3, v4, 0, NB_REDUCTION_MEAN));
    ASSERT_ERROR_CONTAINS("nb_margin_ranking_loss: input1 [3] f32 and target [4] f32 differ in shape");
    assert_null(nb_triplet_margin_loss(p23, p23, p32, (nb_triplet_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("nb_triplet_margin_loss: anchor [2, 3] f32 and negative [3, 2] f32 differ in shape");
    assert_null(nb_triplet_margin_loss(p23, p23, p23, (nb_triplet_opts){ .p = -1 }));
    ASSERT_ERROR_CONTAINS("nb_triplet_margin_loss: p must be positive");
    nb_tensor *zero_d = nb_ones(NB_SHAPE(), NB_F32);
    assert_null(nb_triplet_margin_loss(zero_d, zero_d, zero_d, (nb_triplet_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("nb_triplet_margin_loss: expected inputs [N, D] or [D]");
    assert_null(nb_cosine_embedding_loss(p23, p23, v3, 0, NB_REDUCTION_MEAN));
    ASSERT_ERROR_CONTAINS("nb_cosine_embedding_loss: expected target [N] with inputs [N, D] or a 0-d target with inputs [D], "
                          "got target [3] f32 and inputs [2, 3] f32");
    assert_null(nb_cosine_embedding_loss(p23, p23, p23, 0, NB_REDUCTION_MEAN));
    ASSERT_ERROR_CONTAINS("nb_cosine_embedding_loss: expected target [N]");
    assert_null(nb_cosine_embedding_loss(p23, p32, nb_ones(NB_SHAPE(2), NB_F32), 0, NB_REDUCTION_MEAN));
    ASSERT_ERROR_CONTAINS("nb_cosine_embedding_loss: input1 [2, 3] f32 and input2 [3, 2] f32 differ in shape");
    /* BCE at probabilities 0 and 1: torch's clamped values, and finite gradients */
    nb_tensor *p = nb_set_requires_grad(nb_from_data((float[]){ 0, 1, 0, 1 }, NB_SHAPE(4), NB_F32), true);
    nb_tensor *l = nb_bce_loss(p, nb_from_data((float[]){ 0, 1, 1, 0 }, NB_SHAPE(4), NB_F32), NB_REDUCTION_NONE, NULL);
    float lv[4], gv[4];
    assert_int_equal(nb_copy_to(l, lv, sizeof lv), 0);
    assert_true(lv[0] == 0 && lv[1] == 0 && lv[2] == 100 && lv[3] == 100);
    assert_int_equal(nb_backward(nb_sum_all(l)), 0);
    assert_int_equal(nb_copy_to(nb_grad_of(p), gv, sizeof gv), 0);
    for (int i = 0; i < 4; i++) assert_true(isfinite(gv[i]));
    nb_scope_end(s);
    assert_null(nb_error());
    assert_int_equal(used_bytes(), before);
}

/* The CTC loss: wrong shapes, dtypes, lengths, labels and options are errors naming the argument;
   a target longer than its input is not one (as torch: its loss is infinite, or 0 with
   zero_infinity); its gradient is not differentiated again; nothing is left allocated. */
static void test_ctc_loss_errors(void **state) {
    (void)state;
    size_t before = used_bytes();
    nb_scope *s = nb_scope_begin();
    nb_tensor *lp = nb_log_softmax(nb_zeros(NB_SHAPE(5, 2, 4), NB_F32), -1); /* T 5, N 2, C 4 */
    nb_tensor *tg = nb_from_data((int64_t[]){ 1, 2, 3, 0 }, NB_SHAPE(2, 2), NB_I64);
    nb_tensor *il = nb_from_data((int64_t[]){ 5, 4 }, NB_SHAPE(2), NB_I64), *tl = nb_from_data((int64_t[]){ 2, 1 }, NB_SHAPE(2), NB_I64);
    nb_ctc_opts o = { 0 };
    assert_non_null(nb_ctc_loss(lp, tg, il, tl, o));
    assert_null(nb_ctc_loss(lp, NULL, il, tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets is NULL");
    /* shapes and dtypes */
    assert_null(nb_ctc_loss(nb_zeros(NB_SHAPE(5, 2, 4), NB_I64), tg, il, tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: expected floating-point log_probs [T, N, C] or unbatched [T, C], got [5, 2, 4] i64");
    assert_null(nb_ctc_loss(nb_zeros(NB_SHAPE(5, 2, 4, 1), NB_F32), tg, il, tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: expected floating-point log_probs [T, N, C] or unbatched [T, C], got [5, 2, 4, 1] f32");
    assert_null(nb_ctc_loss(lp, nb_cast(tg, NB_F32), il, tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets must be i64 or i32, padded [N, S] or the N targets concatenated (1-D), for log_probs "
                          "[5, 2, 4] f32; got [2, 2] f32");
    assert_null(nb_ctc_loss(lp, nb_zeros(NB_SHAPE(3, 2), NB_I64), il, tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets must be i64 or i32, padded [N, S]");
    assert_null(nb_ctc_loss(lp, tg, nb_ones(NB_SHAPE(3), NB_I64), tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: input_lengths must hold one i64 or i32 length per sequence, [N] for log_probs [5, 2, 4] f32; "
                          "got [3] i64");
    assert_null(nb_ctc_loss(lp, tg, il, nb_cast(tl, NB_F32), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: target_lengths must hold one i64 or i32 length per sequence");
    nb_tensor *lp1 = nb_log_softmax(nb_zeros(NB_SHAPE(5, 4), NB_F32), -1); /* unbatched */
    assert_null(nb_ctc_loss(lp1, nb_from_data((int64_t[]){ 1, 2 }, NB_SHAPE(2), NB_I64), il, nb_full(NB_SHAPE(), 2, NB_I64), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: input_lengths must hold one i64 or i32 length per sequence, 0-d or [1] for log_probs [5, 4] f32");
    assert_null(nb_ctc_loss(lp1, tg, nb_full(NB_SHAPE(), 5, NB_I64), nb_full(NB_SHAPE(), 2, NB_I64), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets must be i64 or i32, [S] (unbatched)");
    /* options */
    assert_null(nb_ctc_loss(lp, tg, il, tl, (nb_ctc_opts){ .reduction = NB_REDUCTION_BATCHMEAN }));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: invalid reduction 3 (expected mean, sum or none)");
    assert_null(nb_ctc_loss(lp, tg, il, tl, (nb_ctc_opts){ .blank = 4 }));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: blank 4 is outside the 4 classes of log_probs [5, 2, 4] f32");
    /* lengths and labels, read by the kernel */
    assert_null(nb_ctc_loss(lp, tg, nb_from_data((int64_t[]){ 5, 6 }, NB_SHAPE(2), NB_I64), tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: input_lengths[1] is 6, outside [0, 5] (log_probs has 5 steps)");
    assert_null(nb_ctc_loss(lp, tg, nb_from_data((int32_t[]){ -1, 2 }, NB_SHAPE(2), NB_I32), tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: input_lengths[0] is -1, outside [0, 5]");
    assert_null(nb_ctc_loss(lp, tg, il, nb_from_data((int64_t[]){ -1, 1 }, NB_SHAPE(2), NB_I64), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: target_lengths[0] is -1, a negative length");
    assert_null(nb_ctc_loss(lp, tg, il, nb_from_data((int64_t[]){ 2, 3 }, NB_SHAPE(2), NB_I64), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: target_lengths[1] is 3, longer than the 2 labels of each row of targets [2, 2]");
    nb_tensor *cat = nb_from_data((int64_t[]){ 1, 2, 3 }, NB_SHAPE(3), NB_I64);
    assert_null(nb_ctc_loss(lp, cat, il, nb_from_data((int64_t[]){ 2, 2 }, NB_SHAPE(2), NB_I64), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: target_lengths[1] is 2, but the concatenated targets [3] have 1 left after the sequences "
                          "before it");
    assert_null(nb_ctc_loss(lp, cat, il, nb_from_data((int64_t[]){ 1, INT64_MAX }, NB_SHAPE(2), NB_I64), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: target_lengths[1] is 9223372036854775807, but the concatenated targets [3] have 2 left");
    assert_null(nb_ctc_loss(lp, nb_from_data((int64_t[]){ 1, INT64_MAX, 3, 1 }, NB_SHAPE(2, 2), NB_I64), il, tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets[0, 1] is 9223372036854775807, outside the 4 classes of log_probs");
    assert_null(nb_ctc_loss(lp, tg, il, nb_from_data((int64_t[]){ 2, 2 }, NB_SHAPE(2), NB_I64), o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets[1, 1] is the blank (0): targets hold labels only");
    assert_null(nb_ctc_loss(lp, nb_from_data((int32_t[]){ 1, 2, 7, 0 }, NB_SHAPE(2, 2), NB_I32), il, tl, o));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets[1, 0] is 7, outside the 4 classes of log_probs");
    assert_null(nb_ctc_loss(lp, cat, il, tl, (nb_ctc_opts){ .blank = 3 }));
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: targets[2] (sequence 1's label 0) is the blank (3)");
    /* a target longer than its input: infinite, or 0 with zero_infinity (and a zero gradient) */
    nb_tensor *x = nb_set_requires_grad(nb_zeros(NB_SHAPE(5, 2, 4), NB_F64), true);
    nb_tensor *short_il = nb_from_data((int64_t[]){ 5, 1 }, NB_SHAPE(2), NB_I64), *long_tl = nb_from_data((int64_t[]){ 2, 2 }, NB_SHAPE(2), NB_I64);
    nb_tensor *tg2 = nb_from_data((int64_t[]){ 1, 2, 3, 3 }, NB_SHAPE(2, 2), NB_I64);
    double v[2], g[40];
    assert_int_equal(nb_copy_to(nb_ctc_loss(nb_log_softmax(x, -1), tg2, short_il, long_tl, (nb_ctc_opts){ .reduction = NB_REDUCTION_NONE }),
                                v, sizeof v), 0);
    assert_true(isfinite(v[0]) && v[1] == INFINITY);
    nb_tensor *y = nb_ctc_loss(nb_log_softmax(x, -1), tg2, short_il, long_tl, (nb_ctc_opts){ .reduction = NB_REDUCTION_NONE, .zero_infinity = true });
    assert_int_equal(nb_copy_to(y, v, sizeof v), 0);
    assert_true(isfinite(v[0]) && v[1] == 0);
    assert_int_equal(nb_backward(nb_sum_all(y)), 0);
    assert_int_equal(nb_copy_to(nb_grad_of(x), g, sizeof g), 0);
    for (int t = 0; t < 5; t++)
        for (int c = 0; c < 4; c++) assert_true(g[(t * 2 + 1) * 4 + c] == 0 && isfinite(g[t * 2 * 4 + c]));
    /* the gradient is a kernel's: not differentiated again */
    nb_tensor *grad = NULL, *xl = nb_set_requires_grad(nb_zeros(NB_SHAPE(5, 2, 4), NB_F64), true);
    nb_tensor *loss = nb_ctc_loss(xl, tg, il, tl, o);
    assert_true(nb_autograd_grad(&loss, NULL, 1, &xl, 1, &grad, (nb_grad_opts){ .create_graph = true }) < 0);
    ASSERT_ERROR_CONTAINS("nb_ctc_loss: its gradient cannot be differentiated again");
    nb_scope_end(s);
    assert_null(nb_error());
    assert_int_equal(used_bytes(), before);
}

/* issue 15's activations and containers: bad arguments and inputs are errors naming the function
   or the layer; zero arguments are torch's defaults; the containers' lookups. */
static void test_activation_and_container_errors(void **state) {
    (void)state;
    size_t before = used_bytes();
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_from_data((float[]){ -2, 0.5f, 3 }, NB_SHAPE(1, 3), NB_F32);
    assert_null(nb_leaky_relu(nb_ones(NB_SHAPE(2), NB_I64), 0.1));
    ASSERT_ERROR_CONTAINS("nb_leaky_relu: expected a floating-point tensor, got [2] i64");
    assert_null(nb_hardswish(NULL));
    ASSERT_ERROR_CONTAINS("nb_hardswish: input is NULL");
    assert_null(nb_prelu(x, nb_ones(NB_SHAPE(4), NB_F32)));
    ASSERT_ERROR_CONTAINS("nb_prelu: weight [4] f32 must be [1] or [3] (the channels, axis 1) for input [1, 3] f32");
    assert_null(nb_prelu(x, nb_ones(NB_SHAPE(3, 1), NB_F32)));
    ASSERT_ERROR_CONTAINS("nb_prelu: weight [3, 1] f32 must be [1] or [3]");
    assert_null(nb_softplus(x, INFINITY, 0));
    ASSERT_ERROR_CONTAINS("nb_softplus: beta must be finite");
    /* zero means torch's default: slope 0.01, alpha 1 */
    float v[3];
    assert_int_equal(nb_copy_to(nb_leaky_relu(x, 0), v, sizeof v), 0);
    assert_true(fabsf(v[0] + 0.02f) < 1e-7f && v[1] == 0.5f && v[2] == 3);
    assert_int_equal(nb_copy_to(nb_elu(x, 0), v, sizeof v), 0);
    assert_true(fabsf(v[0] - (float)expm1(-2.0)) < 1e-7f);
    /* modules */
    assert_null(nb_nn_prelu(-1, 0));
    ASSERT_ERROR_CONTAINS("nb_nn_prelu: num_parameters must be positive");
    assert_null(nb_nn_softplus(NAN, 0));
    ASSERT_ERROR_CONTAINS("nb_nn_softplus:");
    nb_module *prelu = nb_nn_prelu(3, 0);
    assert_true(nb_item(nb_sum_all(nb_module_get(prelu, "weight"))) == 0.75); /* 3 x 0.25 */
    assert_null(nb_forward(prelu, nb_ones(NB_SHAPE(2, 4), NB_F32)));
    ASSERT_ERROR_CONTAINS("nb_nn_prelu (root): 3 parameters need input [N, 3, ...], got [2, 4]");
    /* containers */
    nb_module *list = nb_nn_module_list(), *dict = nb_nn_module_dict(), *id = nb_nn_identity();
    assert_ptr_equal(nb_nn_module_list_append(list, nb_nn_linear(2, 3)), list);
    assert_ptr_equal(nb_nn_module_list_append(list, prelu), list);
    assert_int_equal(nb_nn_module_list_len(list), 2);
    assert_ptr_equal(nb_nn_module_list_get(list, -1), prelu);
    assert_ptr_equal(nb_nn_module_list_get(list, 0), nb_module_get_child(list, "0"));
    assert_null(nb_nn_module_list_get(list, 2));
    ASSERT_ERROR_CONTAINS("nb_nn_module_list_get: index 2 is out of range for (root) of 2 modules");
    assert_string_equal(nb_module_path(prelu), "1");
    assert_null(nb_forward(list, x));
    ASSERT_ERROR_CONTAINS("nb_forward: ModuleList (root) has no forward");
    assert_null(nb_nn_module_list_append(dict, nb_nn_relu())); /* freed, not leaked */
    ASSERT_ERROR_CONTAINS("nb_nn_module_list_append: ModuleDict is not a ModuleList");
    assert_int_equal(nb_nn_module_list_len(dict), -1);
    ASSERT_ERROR_CONTAINS("nb_nn_module_list_len: ModuleDict is not a ModuleList");
    assert_ptr_equal(nb_nn_module_dict_set(dict, "enc", nb_nn_linear(3, 3)), dict);
    assert_ptr_equal(nb_nn_module_dict_set(dict, "layers", list), dict);
    assert_null(nb_nn_module_dict_set(dict, "enc", nb_nn_relu()));
    ASSERT_ERROR_CONTAINS("nb_module_child: ModuleDict already has an entry named \"enc\"");
    assert_null(nb_nn_module_dict_set(dict, "a.b", nb_nn_relu()));
    ASSERT_ERROR_CONTAINS("invalid name \"a.b\"");
    assert_null(nb_nn_module_dict_set(list, "c", nb_nn_relu()));
    ASSERT_ERROR_CONTAINS("nb_nn_module_dict_set: ModuleList is not a ModuleDict");
    assert_null(nb_forward(dict, x));
    ASSERT_ERROR_CONTAINS("nb_forward: ModuleDict (root) has no forward");
    assert_non_null(nb_module_get(dict, "layers.1.weight"));
    assert_int_equal(nb_module_num_params(dict), 2 * 3 + 3 + 3 + 3 * 3 + 3);
    /* identity: the input's values, and the gradient passes */
    nb_tensor *leaf = nb_set_requires_grad(nb_ones(NB_SHAPE(2), NB_F32), true);
    nb_tensor *y = nb_forward(id, leaf);
    assert_int_equal(nb_backward(nb_sum_all(nb_mul_scalar(y, 3))), 0);
    assert_true(nb_item(nb_sum_all(nb_grad_of(leaf))) == 6);
    nb_scope_end(s);
    nb_module_free(dict);
    nb_module_free(id);
    assert_null(nb_error());
    assert_int_equal(used_bytes(), before);
}

/* nb_module_repr prints what torch 1.13's print(model) prints for the same model. */
static void test_module_repr(void **state) {
    (void)state;
    nb_module *m = nb_nn_sequential(
        nb_nn_conv2d(1, 8, 3, (nb_conv2d_opts){ .padding = 1 }), nb_nn_batch_norm2d(8), nb_nn_relu(),
        nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }), nb_nn_conv2d(8, 16, 3, (nb_conv2d_opts){ .stride = 2, .no_bias = true }),
        nb_nn_adaptive_avg_pool2d(1, 1), nb_nn_flatten(), nb_nn_dropout(0.25), nb_nn_linear(16, 10), nb_nn_log_softmax(1), NULL);
    char *s = nb_module_repr(m);
    assert_string_equal(s, "Sequential(\n"
                           "  (0): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
                           "  (1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
                           "  (2): ReLU()\n"
                           "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
                           "  (4): Conv2d(8, 16, kernel_size=(3, 3), stride=(2, 2), bias=False)\n"
                           "  (5): AdaptiveAvgPool2d(output_size=(1, 1))\n"
                           "  (6): Flatten(start_dim=1, end_dim=-1)\n"
                           "  (7): Dropout(p=0.25, inplace=False)\n"
                           "  (8): Linear(in_features=16, out_features=10, bias=True)\n"
                           "  (9): LogSoftmax(dim=1)\n"
                           ")");
    free(s);
    nb_module_free(m);
    m = nb_nn_sequential(nb_nn_embedding(100, 16), nb_nn_layer_norm(16),
                         nb_nn_sequential(nb_nn_linear(16, 32), nb_nn_gelu(), nb_nn_leaky_relu(0.2), nb_nn_elu(0), nb_nn_prelu(0, 0),
                                          nb_nn_softplus(0, 0), nb_nn_tanh(), NULL),
                         nb_nn_avg_pool2d(2, (nb_pool_opts){ 0 }), NULL);
    s = nb_module_repr(m);
    assert_string_equal(s, "Sequential(\n"
                           "  (0): Embedding(100, 16)\n"
                           "  (1): LayerNorm((16,), eps=1e-05, elementwise_affine=True)\n"
                           "  (2): Sequential(\n"
                           "    (0): Linear(in_features=16, out_features=32, bias=True)\n"
                           "    (1): GELU(approximate='none')\n"
                           "    (2): LeakyReLU(negative_slope=0.2)\n"
                           "    (3): ELU(alpha=1.0)\n"
                           "    (4): PReLU(num_parameters=1)\n"
                           "    (5): Softplus(beta=1, threshold=20)\n"
                           "    (6): Tanh()\n"
                           "  )\n"
                           "  (3): AvgPool2d(kernel_size=2, stride=2, padding=0)\n"
                           ")");
    free(s);
    nb_module_free(m);
    m = nb_nn_sequential(nb_nn_group_norm(3, 6), nb_nn_instance_norm2d(3, false), nb_nn_instance_norm1d(4, true), NULL);
    s = nb_module_repr(m);
    assert_string_equal(s, "Sequential(\n"
                           "  (0): GroupNorm(3, 6, eps=1e-05, affine=True)\n"
                           "  (1): InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)\n"
                           "  (2): InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=False)\n"
                           ")");
    free(s);
    nb_module_free(m);
    m = nb_nn_sequential(nb_nn_conv_transpose2d(4, 2, 3, (nb_conv_transpose2d_opts){ .stride = 2, .padding = 1, .output_padding = 1 }),
                         nb_nn_conv_transpose1d(3, 5, 4, (nb_conv_transpose2d_opts){ .stride = 2, .no_bias = true }),
                         nb_nn_conv_transpose2d(4, 6, 2, (nb_conv_transpose2d_opts){ .groups = 2 }), NULL);
    s = nb_module_repr(m);
    assert_string_equal(s, "Sequential(\n"
                           "  (0): ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))\n"
                           "  (1): ConvTranspose1d(3, 5, kernel_size=(4,), stride=(2,), bias=False)\n"
                           "  (2): ConvTranspose2d(4, 6, kernel_size=(2, 2), stride=(1, 1), groups=2)\n"
                           ")");
    free(s);
    nb_module_free(m);
    assert_null(nb_nn_conv_transpose2d(4, 2, 3, (nb_conv_transpose2d_opts){ .stride = 2, .output_padding = 2 }));
    assert_non_null(strstr(nb_error(), "output_padding 2 below the stride"));
    nb_error_clear();
    m = nb_nn_sequential(nb_nn_upsample((nb_interp_opts){ .scale_factor = { 2 } }),
                         nb_nn_upsample((nb_interp_opts){ .size = { 4, 5 }, .mode = NB_INTERP_BILINEAR, .align_corners = true }),
                         nb_nn_upsample((nb_interp_opts){ .scale_factor = { 1.5 }, .mode = NB_INTERP_LINEAR }), NULL);
    s = nb_module_repr(m);
    assert_string_equal(s, "Sequential(\n"
                           "  (0): Upsample(scale_factor=2.0, mode=nearest)\n"
                           "  (1): Upsample(size=(4, 5), mode=bilinear)\n"
                           "  (2): Upsample(scale_factor=1.5, mode=linear)\n"
                           ")");
    free(s);
    nb_module_free(m);
    nb_tensor *img = nb_zeros(NB_SHAPE(1, 2, 3, 3), NB_F32);
    assert_null(nb_interpolate(img, (nb_interp_opts){ .size = { 4, 4 }, .mode = NB_INTERP_LINEAR }));
    assert_non_null(strstr(nb_error(), "[N, C, L] (nearest, linear)"));
    nb_error_clear();
    assert_null(nb_interpolate(img, (nb_interp_opts){ .size = { 4, 4 }, .align_corners = true }));
    assert_non_null(strstr(nb_error(), "align_corners"));
    nb_error_clear();
    assert_null(nb_interpolate(img, (nb_interp_opts){ .size = { 4 } }));
    assert_non_null(strstr(nb_error(), "every spatial axis"));
    nb_error_clear();
    nb_release(img);
    assert_null(nb_nn_group_norm(4, 6));
    assert_non_null(strstr(nb_error(), "6 channels cannot be split into 4 groups"));
    nb_error_clear();
    assert_null(nb_module_repr(NULL));
    nb_error_clear();
}

/* RMS norm and rotary embeddings: their errors name what does not fit; printing as torch. */
static void test_rms_norm_rotary_errors(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(2, 3, 4, 6), NB_F32);
    assert_null(nb_rms_norm(x, nb_ones(NB_SHAPE(5), NB_F32), 1e-6));
    ASSERT_ERROR_CONTAINS("weight [5] f32 does not fit input [2, 3, 4, 6] f32");
    nb_error_clear();
    assert_null(nb_rotary_embedding(x, nb_arange(0, 5, 1, NB_I64), (nb_rope_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("nb_rotary_embedding: x [2, 3, 4, 6] f32 and positions [5] i64 do not fit");
    nb_error_clear();
    assert_null(nb_rotary_embedding(nb_randn(NB_SHAPE(4, 5), NB_F32), nb_arange(0, 4, 1, NB_I64), (nb_rope_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("do not fit");
    nb_error_clear();
    assert_null(nb_rotary_embedding(x, nb_arange(0, 4, 1, NB_F32), (nb_rope_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("integer positions");
    nb_error_clear();
    assert_null(nb_rotary_embedding(x, nb_arange(0, 4, 1, NB_I64), (nb_rope_opts){ .theta = 0.5 }));
    ASSERT_ERROR_CONTAINS("theta 0.5 must be above 1");
    nb_error_clear();
    /* [B, T] positions against x [B, H, T, D]; position 0 leaves x as it is */
    nb_tensor *y = nb_rotary_embedding(x, nb_zeros(NB_SHAPE(2, 4), NB_I64), (nb_rope_opts){ 0 });
    assert_non_null(y);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(y, x)))) == 0);
    /* bf16 is normalised in f32 and rounded once, as torch */
    nb_tensor *xb = nb_cast(nb_mul_scalar(x, 1e-3), NB_BF16);
    nb_tensor *want = nb_cast(nb_rms_norm(nb_cast(xb, NB_F32), NULL, 1e-6), NB_BF16);
    assert_true(nb_item(nb_sum_all(nb_abs(nb_sub(nb_cast(nb_rms_norm(xb, NULL, 1e-6), NB_F32), nb_cast(want, NB_F32))))) == 0);
    nb_module *m = nb_nn_rms_norm(6, 0);
    char *repr = nb_module_repr(m);
    assert_string_equal(repr, "RMSNorm((6,), eps=None, elementwise_affine=True)");
    free(repr);
    assert_null(nb_forward(m, nb_randn(NB_SHAPE(2, 5), NB_F32)));
    ASSERT_ERROR_CONTAINS("expected input [..., 6], got [2, 5]");
    nb_module_free(m);
    assert_null(nb_nn_rms_norm(0, 1e-6));
    nb_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_repr),
        cmocka_unit_test(test_rms_norm_rotary_errors),
        cmocka_unit_test(test_net_names_and_lookup),
        cmocka_unit_test(test_nested_paths),
        cmocka_unit_test(test_train_eval),
        cmocka_unit_test(test_names_outlive_later_listings),
        cmocka_unit_test(test_free_tree_releases_everything),
        cmocka_unit_test(test_stale_error_does_not_fail_constructors),
        cmocka_unit_test(test_bad_constructor_arguments),
        cmocka_unit_test(test_duplicate_and_invalid_names),
        cmocka_unit_test(test_param_taken_out_of_scope),
        cmocka_unit_test(test_linear_default_init),
        cmocka_unit_test(test_dropout_training),
        cmocka_unit_test(test_optim_arguments),
        cmocka_unit_test(test_training_bits_do_not_depend_on_threads),
        cmocka_unit_test(test_transformer_layers),
        cmocka_unit_test_setup(test_forward_hooks, clear_error_setup),
        cmocka_unit_test_setup(test_backward_hooks, clear_error_setup),
        cmocka_unit_test_setup(test_loss_errors, clear_error_setup),
        cmocka_unit_test_setup(test_ctc_loss_errors, clear_error_setup),
        cmocka_unit_test_setup(test_activation_and_container_errors, clear_error_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
