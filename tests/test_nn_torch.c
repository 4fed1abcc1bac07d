/* Layers, losses, optimizers, learning-rate schedules, gradient clipping, attention and module
   backward hooks against PyTorch.

   tests/nn_ref.py (run by CTest as a fixture, see tests/nn.cmake) writes a flat store of named
   tensors: for each layer case torch's parameters, input, output, a random upstream gradient
   and the gradients; for each loss case the input, target, options' tensors, loss, upstream
   gradient and the input's gradient; for the optimizers the initial parameters, 100 gradient
   pairs and, for each configuration, the parameters and state after 100 steps (and a
   schedule's learning rate after each step); for attention q, k, v, masks and the gradients
   of each (the functional form against the formula written out in torch, the module against
   torch.nn.MultiheadAttention, self-attention modules, a GPT block and a tiny GPT as layer
   cases). This test builds the same modules and optimizers in nabla, loads torch's values
   into them, runs the same steps and compares.
   A failure names the case, the tensor and the largest error.

   Usage: test_nn_torch REFERENCE_FILE [NAME_SUBSTRING]
   A missing or unreadable reference file is a failure, not a skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "test_util.h"
#include "op_coverage.h"
#include "gpt_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nabla.h>

#define STEPS 100
#define MAX_NAMED 64

#include "ref_store.h"

/* ---------------------------------------------------------------- layers */

typedef struct layer_case {
    const char *name;
    nb_module *(*make)(void);
    double rtol, atol; /* 0: 1e-5 and 1e-6 */
    bool transposed;   /* torch's x [r, c] is a transpose: nabla's is one too (a non-contiguous view) */
} layer_case;

static nb_module *mk_linear(void) { return nb_nn_linear(6, 4); }
static nb_module *mk_linear_no_bias(void) { return nb_nn_linear_no_bias(6, 4); }
static nb_module *mk_softmax(void) { return nb_nn_softmax(1); }
static nb_module *mk_log_softmax(void) { return nb_nn_log_softmax(-1); }
static nb_module *mk_dropout_eval(void) {
    nb_module *m = nb_nn_dropout(0.3);
    nb_module_train(m, false);
    return m;
}
static nb_module *mk_embedding(void) { return nb_nn_embedding(10, 4); }
static nb_module *mk_embedding_padded(void) { return nb_nn_embedding_padded(10, 4, -7); }
static nb_module *mk_layer_norm(void) { return nb_nn_layer_norm(5); }
static nb_module *mk_rms_norm(void) { return nb_nn_rms_norm(6, 1e-6); }
static nb_module *mk_rms_norm_default_eps(void) { return nb_nn_rms_norm(6, 0); }

/* nb_rotary_embedding at fixed positions, as a layer (nn_ref.py's RotaryRef) */
typedef struct {
    nb_module base;
    nb_tensor *pos;
    nb_rope_opts o;
} rotary_layer;
static nb_tensor *rotary_forward(nb_module *self, nb_tensor *x) {
    rotary_layer *r = (rotary_layer *)self;
    return nb_rotary_embedding(x, r->pos, r->o);
}
static void rotary_free(nb_module *self) { nb_release(((rotary_layer *)self)->pos); }
static const nb_module_class ROTARY = { .name = "RotaryRef", .forward = rotary_forward, .free = rotary_free };
static nb_module *rotary_new(const int64_t *pos, nb_shape shape, nb_rope_opts o) {
    rotary_layer *r = (rotary_layer *)nb_module_new(&ROTARY, sizeof *r);
    r->pos = nb_keep(nb_from_data(pos, shape, NB_I64));
    r->o = o;
    return &r->base;
}
static nb_module *mk_rotary(void) { return rotary_new((int64_t[]){ 0, 1, 2, 3, 4 }, NB_SHAPE(5), (nb_rope_opts){ 0 }); }
static nb_module *mk_rotary_rows(void) {
    return rotary_new((int64_t[]){ 20, 21, 22, 23, 1, 1, 0, 1 }, NB_SHAPE(2, 4), (nb_rope_opts){ 0 });
}
static nb_module *mk_rotary_scaled(void) {
    return rotary_new((int64_t[]){ 37, 38, 39, 40, 41 }, NB_SHAPE(5), (nb_rope_opts){ .theta = 500000, .scale = 2 });
}
static nb_module *mk_group_norm(void) { return nb_nn_group_norm(3, 6); }
#define UP(NAME, ...) static nb_module *NAME(void) { return nb_nn_upsample((nb_interp_opts){ __VA_ARGS__ }); }
UP(mk_up_nearest2x, .scale_factor = { 2 })
UP(mk_up_nearest_size, .size = { 5, 7 })
UP(mk_up_nearest_down, .size = { 2, 3 })
UP(mk_up_bilinear2x, .scale_factor = { 2 }, .mode = NB_INTERP_BILINEAR)
UP(mk_up_bilinear_size, .size = { 5, 7 }, .mode = NB_INTERP_BILINEAR)
UP(mk_up_bilinear_ac, .size = { 5, 7 }, .mode = NB_INTERP_BILINEAR, .align_corners = true)
UP(mk_up_bilinear_down, .size = { 2, 3 }, .mode = NB_INTERP_BILINEAR)
UP(mk_up_bilinear_15, .scale_factor = { 1.5 }, .mode = NB_INTERP_BILINEAR)
UP(mk_up_linear, .scale_factor = { 3 }, .mode = NB_INTERP_LINEAR)
UP(mk_up_linear_ac, .size = { 9 }, .mode = NB_INTERP_LINEAR, .align_corners = true)
UP(mk_up_nearest1d, .size = { 8 })
#undef UP
static nb_module *mk_convt(void) { return nb_nn_conv_transpose2d(3, 4, 3, (nb_conv_transpose2d_opts){ 0 }); }
static nb_module *mk_convt_s2(void) {
    return nb_nn_conv_transpose2d(4, 2, 3, (nb_conv_transpose2d_opts){ .stride = 2, .padding = 1, .output_padding = 1 });
}
static nb_module *mk_convt_g2(void) {
    return nb_nn_conv_transpose2d(4, 6, 2, (nb_conv_transpose2d_opts){ .stride = 2, .groups = 2, .no_bias = true });
}
static nb_module *mk_convt_dil(void) { return nb_nn_conv_transpose2d(2, 3, 3, (nb_conv_transpose2d_opts){ .dilation = 2, .padding = 1 }); }
static nb_module *mk_convt_unbatched(void) { return nb_nn_conv_transpose2d(3, 2, 3, (nb_conv_transpose2d_opts){ .stride = 2 }); }
static nb_module *mk_convt1d(void) { return nb_nn_conv_transpose1d(3, 5, 4, (nb_conv_transpose2d_opts){ .stride = 2, .padding = 1 }); }
static nb_module *mk_convt1d_op(void) {
    return nb_nn_conv_transpose1d(2, 2, 3, (nb_conv_transpose2d_opts){ .stride = 3, .output_padding = 2 });
}
static nb_module *mk_group_norm_3d(void) { return nb_nn_group_norm(2, 4); }
static nb_module *mk_group_norm_1group(void) { return nb_nn_group_norm(1, 4); }
static nb_module *mk_instance_norm2d(void) { return nb_nn_instance_norm2d(3, false); }
static nb_module *mk_instance_norm2d_affine(void) { return nb_nn_instance_norm2d(3, true); }
static nb_module *mk_instance_norm1d_affine(void) { return nb_nn_instance_norm1d(4, true); }
static nb_module *mk_sequential(void) {
    return nb_nn_sequential(nb_nn_linear(6, 8), nb_nn_tanh(), nb_nn_linear(8, 8), nb_nn_gelu(), nb_nn_layer_norm(8),
                            nb_nn_linear(8, 3), nb_nn_log_softmax(1), NULL);
}

/* issue 15's activations (zero arguments are torch's defaults) */
static nb_module *mk_leaky_relu(void) { return nb_nn_leaky_relu(0); }
static nb_module *mk_leaky_relu_02(void) { return nb_nn_leaky_relu(0.2); }
static nb_module *mk_elu(void) { return nb_nn_elu(0); }
static nb_module *mk_elu_07(void) { return nb_nn_elu(0.7); }
static nb_module *mk_elu_05(void) { return nb_nn_elu(0.5); }
static nb_module *mk_softplus(void) { return nb_nn_softplus(0, 0); }
static nb_module *mk_softplus_b2_t3(void) { return nb_nn_softplus(2, 3); }
static nb_module *mk_softplus_b2_t4(void) { return nb_nn_softplus(2, 4); }
static nb_module *mk_prelu(void) { return nb_nn_prelu(0, 0); }
static nb_module *mk_prelu_3(void) { return nb_nn_prelu(3, 0.1); }
static nb_module *mk_prelu_03(void) { return nb_nn_prelu(1, 0.3); }
static nb_module *mk_sequential_act(void) {
    return nb_nn_sequential(nb_nn_linear(5, 6), nb_nn_prelu(6, 0), nb_nn_linear(6, 6), nb_nn_hardswish(), nb_nn_identity(),
                            nb_nn_linear(6, 4), nb_nn_mish(), nb_nn_linear(4, 3), nb_nn_softplus(0, 0), nb_nn_elu(0),
                            nb_nn_leaky_relu(0.05), nb_nn_hardsigmoid(), NULL);
}

/* Self-attention modules: nb_forward(m, x) is nb_mha_forward(m, x, x, x, NULL). */
static nb_module *mk_mha_self(void) { return nb_nn_multihead_attention(8, 2, (nb_mha_opts){ 0 }); }
static nb_module *mk_mha_self_causal(void) { return nb_nn_multihead_attention(12, 3, (nb_mha_opts){ .causal = true }); }
static nb_module *mk_mha_self_no_bias(void) { return nb_nn_multihead_attention(8, 4, (nb_mha_opts){ .no_bias = true }); }
static nb_module *mk_mha_self_causal_no_bias(void) {
    return nb_nn_multihead_attention(12, 3, (nb_mha_opts){ .causal = true, .no_bias = true });
}
static nb_module *mk_mha_self_one_head(void) { return nb_nn_multihead_attention(6, 1, (nb_mha_opts){ .causal = true }); }

static nb_module *mk_gpt_block(void) { return gpt_block_new(16, 4); }
/* examples/char_gpt.c's model, small: vocabulary 11, context 8, width 16, 4 heads, 2 blocks. */
static nb_module *mk_gpt_tiny(void) { return gpt_model_new(11, 8, 16, 2, 4); }

static const layer_case LAYERS[] = {
    { "linear", mk_linear, 0, 0, false },
    { "linear3d", mk_linear, 0, 0, false },
    { "linear_no_bias", mk_linear_no_bias, 0, 0, false },
    { "relu", nb_nn_relu, 0, 0, false },
    { "gelu", nb_nn_gelu, 0, 0, false },
    { "silu", nb_nn_silu, 0, 0, false },
    { "tanh", nb_nn_tanh, 0, 0, false },
    { "sigmoid", nb_nn_sigmoid, 0, 0, false },
    { "softmax", mk_softmax, 0, 0, false },
    { "log_softmax", mk_log_softmax, 0, 0, false },
    { "flatten", nb_nn_flatten, 0, 0, false },
    { "dropout_eval", mk_dropout_eval, 0, 0, false },
    { "embedding", mk_embedding, 0, 0, false },
    { "embedding_padded", mk_embedding_padded, 0, 0, false },
    { "layer_norm", mk_layer_norm, 0, 0, false },
    { "rms_norm", mk_rms_norm, 0, 0, false },
    { "rms_norm_default_eps", mk_rms_norm_default_eps, 0, 0, false },
    { "rotary", mk_rotary, 0, 0, false },
    { "rotary_rows", mk_rotary_rows, 0, 0, false },
    { "rotary_scaled", mk_rotary_scaled, 0, 0, false },
    { "group_norm", mk_group_norm, 0, 0, false },
    { "upsample_nearest2x", mk_up_nearest2x, 0, 0, false },
    { "upsample_nearest_size", mk_up_nearest_size, 0, 0, false },
    { "upsample_nearest_down", mk_up_nearest_down, 0, 0, false },
    { "upsample_bilinear2x", mk_up_bilinear2x, 0, 0, false },
    { "upsample_bilinear_size", mk_up_bilinear_size, 0, 0, false },
    { "upsample_bilinear_ac", mk_up_bilinear_ac, 0, 0, false },
    { "upsample_bilinear_down", mk_up_bilinear_down, 0, 0, false },
    { "upsample_bilinear_15", mk_up_bilinear_15, 0, 0, false },
    { "upsample_linear", mk_up_linear, 0, 0, false },
    { "upsample_linear_ac", mk_up_linear_ac, 0, 0, false },
    { "upsample_nearest1d", mk_up_nearest1d, 0, 0, false },
    { "conv_transpose2d", mk_convt, 0, 0, false },
    { "conv_transpose2d_s2", mk_convt_s2, 0, 0, false },
    { "conv_transpose2d_g2", mk_convt_g2, 0, 0, false },
    { "conv_transpose2d_dil", mk_convt_dil, 0, 0, false },
    { "conv_transpose2d_unbatched", mk_convt_unbatched, 0, 0, false },
    { "conv_transpose1d", mk_convt1d, 0, 0, false },
    { "conv_transpose1d_op", mk_convt1d_op, 0, 0, false },
    { "group_norm_3d", mk_group_norm_3d, 0, 0, false },
    { "group_norm_1group", mk_group_norm_1group, 0, 0, false },
    { "instance_norm2d", mk_instance_norm2d, 0, 0, false },
    { "instance_norm2d_affine", mk_instance_norm2d_affine, 0, 0, false },
    { "instance_norm1d_affine", mk_instance_norm1d_affine, 0, 0, false },
    { "instance_norm2d_unbatched", mk_instance_norm2d_affine, 0, 0, false },
    { "sequential", mk_sequential, 0, 0, false },
    { "leaky_relu", mk_leaky_relu, 0, 0, false },
    { "leaky_relu_02", mk_leaky_relu_02, 0, 0, false },
    { "elu", mk_elu, 0, 0, false },
    { "elu_07", mk_elu_07, 0, 0, false },
    { "softplus", mk_softplus, 0, 0, false },
    { "softplus_b2_t3", mk_softplus_b2_t3, 0, 0, false },
    { "mish", nb_nn_mish, 0, 0, false },
    { "hardswish", nb_nn_hardswish, 0, 0, false },
    { "hardsigmoid", nb_nn_hardsigmoid, 0, 0, false },
    { "identity", nb_nn_identity, 0, 0, false },
    { "prelu", mk_prelu, 0, 0, false },
    { "prelu_3", mk_prelu_3, 0, 0, false },
    { "prelu_3_2d", mk_prelu_3, 0, 0, false },
    { "hardswish_t", nb_nn_hardswish, 0, 0, true },
    { "elu_t", mk_elu_05, 0, 0, true },
    { "softplus_t", mk_softplus_b2_t4, 0, 0, true },
    { "sequential_act", mk_sequential_act, 0, 0, false },
    { "leaky_relu_kinks", mk_leaky_relu_02, 0, 0, false },
    { "elu_kinks", mk_elu_07, 0, 0, false },
    { "prelu_kinks", mk_prelu_03, 0, 0, false },
    { "softplus_kinks", mk_softplus_b2_t3, 0, 0, false },
    { "mish_kinks", nb_nn_mish, 0, 0, false },
    { "hardswish_kinks", nb_nn_hardswish, 0, 0, false },
    { "hardsigmoid_kinks", nb_nn_hardsigmoid, 0, 0, false },
    { "mha_self", mk_mha_self, 0, 0, false },
    { "mha_self_causal", mk_mha_self_causal, 0, 0, false },
    { "mha_self_no_bias", mk_mha_self_no_bias, 0, 0, false },
    { "mha_self_causal_no_bias", mk_mha_self_causal_no_bias, 0, 0, false },
    { "mha_self_one_head", mk_mha_self_one_head, 0, 0, false },
    /* deeper: a gradient such as ln2.weight's sums terms that cancel, and torch's f32 is as far
       from the f64 value as nabla's (both within 3e-5 relative) */
    { "gpt_block", mk_gpt_block, 1e-4, 1e-5, false },
    { "gpt_tiny", mk_gpt_tiny, 1e-4, 1e-5, false },
};

static void test_layer(void **state) {
    const layer_case *lc = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "layer %s", lc->name);
    double rtol = lc->rtol > 0 ? lc->rtol : 1e-5, atol = lc->atol > 0 ? lc->atol : 1e-6;
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    bool ok = true;
    nb_module *m = lc->make();
    if (!m) {
        fprintf(stderr, "  %s: building the module failed: %s\n", cs, nb_error() ? nb_error() : "?");
        finish_case(cs, false, used);
        return;
    }
    /* the parameters are torch's, by name and in torch's order */
    nb_named_tensor params[MAX_NAMED];
    int np = nb_module_named_parameters(m, params, MAX_NAMED);
    snprintf(ref, sizeof ref, "layer.%s.params", lc->name);
    const record *names = find(ref, true);
    ok = names && np == names->nwords;
    for (int i = 0; ok && i < np; i++) ok = strcmp(params[i].name, names->words[i]) == 0;
    if (names && !ok) {
        fprintf(stderr, "  %s: nabla's parameters are", cs);
        for (int i = 0; i < np && i < MAX_NAMED; i++) fprintf(stderr, " %s", params[i].name);
        fprintf(stderr, "; torch's are");
        for (int i = 0; i < names->nwords; i++) fprintf(stderr, " %s", names->words[i]);
        fprintf(stderr, "\n");
    }
    for (int i = 0; ok && i < np; i++) {
        snprintf(ref, sizeof ref, "layer.%s.param.%s", lc->name, params[i].name);
        ok = load_into(cs, params[i].tensor, ref);
    }
    /* a torch.nn module's class name is nabla's (what a model print shows) */
    snprintf(ref, sizeof ref, "layer.%s.class", lc->name);
    const record *cls = find_quiet(ref, true);
    if (ok && cls && strcmp(cls->words[0], m->cls->name) != 0) {
        fprintf(stderr, "  %s: nabla's class is %s, torch's %s\n", cs, m->cls->name, cls->words[0]);
        ok = false;
    }
    nb_scope *sc = nb_scope_begin();
    if (ok) {
        nb_tensor *leaf = lc->transposed ? leaf_transposed(ref_tensor("layer.%s.x", lc->name))
                                         : ref_tensor("layer.%s.x", lc->name);
        bool x_grad = nb_dtype_of(leaf) != NB_I64;
        if (x_grad) nb_set_requires_grad(leaf, true);
        nb_tensor *x = lc->transposed ? nb_transpose(leaf, 0, 1) : leaf;
        nb_tensor *y = nb_forward(m, x);
        snprintf(ref, sizeof ref, "layer.%s.y", lc->name);
        ok = compare(cs, "output", y, ref, rtol, atol);
        if (ok) {
            int rc = nb_backward_with(y, ref_tensor("layer.%s.g", lc->name));
            if (rc < 0) {
                fprintf(stderr, "  %s: nb_backward_with failed: %s\n", cs, nb_error() ? nb_error() : "?");
                ok = false;
            }
        }
        if (ok && x_grad) {
            snprintf(ref, sizeof ref, "layer.%s.gx", lc->name);
            ok = compare(cs, "input gradient", lc->transposed ? nb_transpose(nb_grad_of(leaf), 0, 1) : nb_grad_of(leaf), ref,
                         rtol, atol);
        }
        for (int i = 0; ok && i < np; i++) {
            char what[128];
            snprintf(what, sizeof what, "gradient of %s", params[i].name);
            snprintf(ref, sizeof ref, "layer.%s.grad.%s", lc->name, params[i].name);
            ok = compare(cs, what, nb_grad_of(params[i].tensor), ref, rtol, atol) && ok;
        }
    }
    nb_scope_end(sc);
    nb_module_free(m);
    finish_case(cs, ok, used);
}

/* ---------------------------------------------------------------- losses */

enum { L_CE, L_NLL, L_MSE, L_L1, L_SMOOTH_L1, L_BCE };

typedef struct loss_case {
    const char *name;
    int kind;
    nb_reduction red;
    double smoothing, beta;
    bool use_ignore;
    int64_t ignore;
    bool weight; /* class weights (CE, NLL) or pos_weight (BCE) from the reference */
} loss_case;

#define R_MEAN NB_REDUCTION_MEAN
#define R_SUM NB_REDUCTION_SUM
#define R_NONE NB_REDUCTION_NONE

static const loss_case LOSSES[] = {
    { "ce_mean", L_CE, R_MEAN, 0, 0, false, 0, false },
    { "ce_sum", L_CE, R_SUM, 0, 0, false, 0, false },
    { "ce_none", L_CE, R_NONE, 0, 0, false, 0, false },
    { "ce_nd", L_CE, R_MEAN, 0, 0, false, 0, false },
    { "ce_nd_none", L_CE, R_NONE, 0, 0, false, 0, false },
    { "ce_smooth", L_CE, R_MEAN, 0.2, 0, false, 0, false },
    { "ce_ignore", L_CE, R_MEAN, 0, 0, true, 2, false },
    { "ce_weight_mean", L_CE, R_MEAN, 0, 0, false, 0, true },
    { "ce_weight_sum", L_CE, R_SUM, 0, 0, false, 0, true },
    { "ce_weight_none", L_CE, R_NONE, 0, 0, false, 0, true },
    { "ce_all_mean", L_CE, R_MEAN, 0.1, 0, true, 4, true },
    { "ce_all_sum", L_CE, R_SUM, 0.1, 0, true, 4, true },
    { "ce_all_none", L_CE, R_NONE, 0.1, 0, true, 4, true },
    { "nll_mean", L_NLL, R_MEAN, 0, 0, false, 0, false },
    { "nll_sum", L_NLL, R_SUM, 0, 0, false, 0, false },
    { "nll_none", L_NLL, R_NONE, 0, 0, false, 0, false },
    { "nll_weight_ignore_mean", L_NLL, R_MEAN, 0, 0, true, 1, true },
    { "nll_weight_ignore_sum", L_NLL, R_SUM, 0, 0, true, 1, true },
    { "nll_weight_ignore_none", L_NLL, R_NONE, 0, 0, true, 1, true },
    { "mse_mean", L_MSE, R_MEAN, 0, 0, false, 0, false },
    { "mse_sum", L_MSE, R_SUM, 0, 0, false, 0, false },
    { "mse_none", L_MSE, R_NONE, 0, 0, false, 0, false },
    { "l1_mean", L_L1, R_MEAN, 0, 0, false, 0, false },
    { "l1_sum", L_L1, R_SUM, 0, 0, false, 0, false },
    { "l1_none", L_L1, R_NONE, 0, 0, false, 0, false },
    { "smooth_l1_mean", L_SMOOTH_L1, R_MEAN, 0, 0, false, 0, false },
    { "smooth_l1_sum", L_SMOOTH_L1, R_SUM, 0, 0, false, 0, false },
    { "smooth_l1_none", L_SMOOTH_L1, R_NONE, 0, 0, false, 0, false },
    { "smooth_l1_b05_mean", L_SMOOTH_L1, R_MEAN, 0, 0.5, false, 0, false },
    { "smooth_l1_b05_sum", L_SMOOTH_L1, R_SUM, 0, 0.5, false, 0, false },
    { "smooth_l1_b05_none", L_SMOOTH_L1, R_NONE, 0, 0.5, false, 0, false },
    { "bce_mean", L_BCE, R_MEAN, 0, 0, false, 0, false },
    { "bce_sum", L_BCE, R_SUM, 0, 0, false, 0, false },
    { "bce_none", L_BCE, R_NONE, 0, 0, false, 0, false },
    { "bce_pw_mean", L_BCE, R_MEAN, 0, 0, false, 0, true },
    { "bce_pw_sum", L_BCE, R_SUM, 0, 0, false, 0, true },
    { "bce_pw_none", L_BCE, R_NONE, 0, 0, false, 0, true },
    { "bce_nonfinite", L_BCE, R_NONE, 0, 0, false, 0, false },
    { "bce_pw_nonfinite", L_BCE, R_NONE, 0, 0, false, 0, true },
    { "bce_zero_mean", L_BCE, R_MEAN, 0, 0, false, 0, false },
};

static void test_loss(void **state) {
    const loss_case *lc = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "loss %s", lc->name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    bool ok = true;
    nb_scope *sc = nb_scope_begin();
    nb_tensor *x = nb_set_requires_grad(ref_tensor("loss.%s.x", lc->name), true);
    nb_tensor *t = ref_tensor("loss.%s.target", lc->name);
    nb_tensor *w = NULL;
    if (lc->weight) w = ref_tensor(lc->kind == L_BCE ? "loss.%s.pos_weight" : "loss.%s.weight", lc->name);
    nb_ce_opts ce = { .reduction = lc->red, .label_smoothing = lc->smoothing, .ignore_index = lc->ignore,
                      .use_ignore_index = lc->use_ignore, .weight = w };
    nb_tensor *y = NULL;
    switch (lc->kind) {
    case L_CE: y = nb_cross_entropy(x, t, ce); break;
    case L_NLL: y = nb_nll_loss(x, t, ce); break;
    case L_MSE: y = nb_mse_loss(x, t, lc->red); break;
    case L_L1: y = nb_l1_loss(x, t, lc->red); break;
    case L_SMOOTH_L1: y = nb_smooth_l1_loss(x, t, lc->red, lc->beta); break;
    default: y = nb_bce_with_logits(x, t, lc->red, w);
    }
    snprintf(ref, sizeof ref, "loss.%s.y", lc->name);
    ok = compare(cs, "loss", y, ref, 1e-5, 1e-6);
    if (ok && nb_backward_with(y, ref_tensor("loss.%s.g", lc->name)) < 0) {
        fprintf(stderr, "  %s: nb_backward_with failed: %s\n", cs, nb_error() ? nb_error() : "?");
        ok = false;
    }
    snprintf(ref, sizeof ref, "loss.%s.gx", lc->name);
    if (ok) ok = compare(cs, "input gradient", nb_grad_of(x), ref, 1e-5, 1e-6);
    nb_scope_end(sc);
    finish_case(cs, ok, used);
}

/* issue 15's losses, whose inputs may all be learned: nn_ref.py's loss_multi writes the
   function and its options (S loss.<case>.opts: fn=..., reduction=..., margin=...), the inputs
   whose gradients it compares (S loss.<case>.inputs) and the constants. Cases whose name ends
   in _t give every input as torch had it, a transpose: here a non-contiguous view. The CTC
   loss's cases add the lengths and options of their own: x is logits put through log_softmax
   (from_logits) or the log-probabilities, stored batch first when torch had a transpose. */
#define MAX_LOSS_IN 4

typedef struct loss_opts {
    char fn[32];
    nb_reduction red;
    double delta, margin, p, eps;
    bool swap, log_target;
    int64_t blank; /* the CTC loss's */
    bool zero_infinity, from_logits, batch_first, int32;
} loss_opts;

static bool parse_loss_opts(const char *cs, const record *r, loss_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 0; r && i < r->nwords; i++) {
        const char *w = r->words[i], *eq = strchr(w, '=');
        if (!eq) return false;
        size_t k = (size_t)(eq - w);
        const char *v = eq + 1;
#define KEY(s) (k == strlen(s) && strncmp(w, s, k) == 0)
        if (KEY("fn")) snprintf(o->fn, sizeof o->fn, "%s", v);
        else if (KEY("reduction"))
            o->red = !strcmp(v, "sum") ? NB_REDUCTION_SUM : !strcmp(v, "none") ? NB_REDUCTION_NONE
                   : !strcmp(v, "batchmean") ? NB_REDUCTION_BATCHMEAN : NB_REDUCTION_MEAN;
        else if (KEY("delta")) o->delta = strtod(v, NULL);
        else if (KEY("margin")) o->margin = strtod(v, NULL);
        else if (KEY("p")) o->p = strtod(v, NULL);
        else if (KEY("eps")) o->eps = strtod(v, NULL);
        else if (KEY("swap")) o->swap = atoi(v) != 0;
        else if (KEY("log_target")) o->log_target = atoi(v) != 0;
        else if (KEY("blank")) o->blank = atoll(v);
        else if (KEY("zero_infinity")) o->zero_infinity = atoi(v) != 0;
        else if (KEY("from_logits")) o->from_logits = atoi(v) != 0;
        else if (KEY("batch_first")) o->batch_first = atoi(v) != 0;
        else if (KEY("int32")) o->int32 = atoi(v) != 0;
        else {
            fprintf(stderr, "  %s: unknown option %s\n", cs, w);
            return false;
        }
#undef KEY
    }
    return r && o->fn[0];
}

/* A reference tensor (NULL when the case has none, silently), as a non-contiguous view when
   transposed and 2-D (*transposed says which); *leaf gets the tensor that takes the gradient. */
static nb_tensor *loss_input(const char *name, const char *what, bool learned, bool *transposed, nb_tensor **leaf) {
    char ref[256];
    snprintf(ref, sizeof ref, "loss.%s.%s", name, what);
    const record *r = find_quiet(ref, false);
    nb_tensor *t = r ? make_tensor(r) : NULL;
    *transposed = *transposed && t && nb_ndim(t) == 2;
    if (*transposed) t = leaf_transposed(t);
    *leaf = learned ? nb_set_requires_grad(t, true) : t;
    return *transposed ? nb_transpose(t, 0, 1) : t;
}

static void test_loss_multi(void **state) {
    const char *name = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "loss %s", name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    size_t len = strlen(name);
    bool transposed = len > 2 && strcmp(name + len - 2, "_t") == 0;
    loss_opts o;
    snprintf(ref, sizeof ref, "loss.%s.opts", name);
    bool ok = parse_loss_opts(cs, find(ref, true), &o);
    snprintf(ref, sizeof ref, "loss.%s.inputs", name);
    const record *inputs = find(ref, true);
    ok = ok && inputs && inputs->nwords <= MAX_LOSS_IN;
    nb_scope *sc = nb_scope_begin();
    /* every tensor of the case by name; the learned ones require grad */
    static const char *const all[] = { "x", "target", "weight", "x1", "x2", "a", "pos", "neg", "input_lengths", "target_lengths" };
    enum { NALL = sizeof all / sizeof *all };
    nb_tensor *t[NALL] = { 0 }, *leaf[NALL] = { 0 };
    bool was_t[NALL] = { false };
    for (int i = 0; ok && i < NALL; i++) {
        bool learned = false;
        for (int k = 0; k < inputs->nwords; k++) learned = learned || strcmp(inputs->words[k], all[i]) == 0;
        was_t[i] = transposed;
        t[i] = loss_input(name, all[i], learned, &was_t[i], &leaf[i]);
        if (learned && !t[i]) ok = false;
    }
    enum { X, TARGET, WEIGHT, X1, X2, A, POS, NEG, INPUT_LENGTHS, TARGET_LENGTHS };
    nb_tensor *y = NULL;
    if (ok) {
        if (!strcmp(o.fn, "bce")) y = nb_bce_loss(t[X], t[TARGET], o.red, t[WEIGHT]);
        else if (!strcmp(o.fn, "kl")) y = nb_kl_div_loss(t[X], t[TARGET], o.red, o.log_target);
        else if (!strcmp(o.fn, "huber")) y = nb_huber_loss(t[X], t[TARGET], o.red, o.delta);
        else if (!strcmp(o.fn, "margin_ranking")) y = nb_margin_ranking_loss(t[X1], t[X2], t[TARGET], o.margin, o.red);
        else if (!strcmp(o.fn, "triplet"))
            y = nb_triplet_margin_loss(t[A], t[POS], t[NEG],
                                       (nb_triplet_opts){ .margin = o.margin, .p = o.p, .eps = o.eps, .swap = o.swap, .reduction = o.red });
        else if (!strcmp(o.fn, "cosine")) y = nb_cosine_embedding_loss(t[X1], t[X2], t[TARGET], o.margin, o.red);
        else if (!strcmp(o.fn, "ctc")) {
            /* x is stored [N, T, C] when batch first: log_probs is its transpose, a strided view */
            nb_tensor *lp = o.batch_first ? nb_transpose(t[X], 0, 1) : t[X];
            if (o.from_logits) lp = nb_log_softmax(lp, -1);
            nb_tensor *tg = t[TARGET], *il = t[INPUT_LENGTHS], *tl = t[TARGET_LENGTHS];
            if (o.int32) tg = nb_cast(tg, NB_I32), il = nb_cast(il, NB_I32), tl = nb_cast(tl, NB_I32);
            y = nb_ctc_loss(lp, tg, il, tl, (nb_ctc_opts){ .blank = o.blank, .reduction = o.red, .zero_infinity = o.zero_infinity });
        }
        else {
            fprintf(stderr, "  %s: unknown loss %s\n", cs, o.fn);
            ok = false;
        }
    }
    /* f64 cases (the CTC loss's) are held to f64's precision */
    bool f64 = ok && nb_dtype_of(t[X]) == NB_F64;
    double rtol = f64 ? 1e-10 : 1e-5, atol = f64 ? 1e-12 : 1e-6;
    snprintf(ref, sizeof ref, "loss.%s.y", name);
    ok = ok && compare(cs, "loss", y, ref, rtol, atol);
    if (ok && nb_backward_with(y, ref_tensor("loss.%s.g", name)) < 0) {
        fprintf(stderr, "  %s: nb_backward_with failed: %s\n", cs, nb_error() ? nb_error() : "?");
        ok = false;
    }
    for (int k = 0; ok && k < inputs->nwords; k++)
        for (int i = 0; i < NALL; i++)
            if (strcmp(inputs->words[k], all[i]) == 0) {
                char what[64];
                snprintf(what, sizeof what, "gradient of %s", all[i]);
                snprintf(ref, sizeof ref, "loss.%s.g%s", name, all[i]);
                nb_tensor *g = nb_grad_of(leaf[i]);
                ok = compare(cs, what, was_t[i] && g ? nb_transpose(g, 0, 1) : g, ref, rtol, atol) && ok;
            }
    nb_scope_end(sc);
    finish_case(cs, ok, used);
}

/* The names of the loss_multi cases: each base at each reduction, then the single cases. */
static const char *const LOSS_MULTI_BASES[] = {
    "bce_prob", "bce_prob_w", "bce_prob_wcol", "huber", "huber_d05", "margin_ranking", "margin_ranking_m025", "triplet",
    "triplet_p1", "triplet_p3", "triplet_pinf", "triplet_swap", "triplet_m05", "cosine", "cosine_m02",
    "ctc_padded", "ctc_concat", "ctc_unbatched", "ctc_zero_inf", "ctc_f64", "ctc_leaf",
};
static const char *const KL_BASES[] = { "kl", "kl_log", "kl_zero", "kl_3d" };
static const char *const LOSS_MULTI_SINGLE[] = {
    "triplet_1d", "cosine_1d_pos", "cosine_1d_neg", "cosine_int_target", "bce_prob_t", "kl_t", "huber_t", "triplet_t", "cosine_t",
    "ctc_inf_sum", "ctc_inf_none", "ctc_repeats", "ctc_blank3", "ctc_batch_first", "ctc_long", "ctc_leaf_f64", "ctc_leaf_zero_inf",
};
enum {
    N_LOSS_MULTI = (int)(sizeof LOSS_MULTI_BASES / sizeof *LOSS_MULTI_BASES) * 3 + (int)(sizeof KL_BASES / sizeof *KL_BASES) * 4 +
                   (int)(sizeof LOSS_MULTI_SINGLE / sizeof *LOSS_MULTI_SINGLE)
};
static char loss_multi_names[N_LOSS_MULTI][64];

static void make_loss_multi_names(void) {
    static const char *const reds[] = { "mean", "sum", "none", "batchmean" };
    int n = 0;
    for (size_t b = 0; b < sizeof LOSS_MULTI_BASES / sizeof *LOSS_MULTI_BASES; b++)
        for (int r = 0; r < 3; r++) snprintf(loss_multi_names[n++], 64, "%s_%s", LOSS_MULTI_BASES[b], reds[r]);
    for (size_t b = 0; b < sizeof KL_BASES / sizeof *KL_BASES; b++)
        for (int r = 0; r < 4; r++) snprintf(loss_multi_names[n++], 64, "%s_%s", KL_BASES[b], reds[r]);
    for (size_t b = 0; b < sizeof LOSS_MULTI_SINGLE / sizeof *LOSS_MULTI_SINGLE; b++)
        snprintf(loss_multi_names[n++], 64, "%s", LOSS_MULTI_SINGLE[b]);
}

/* ---------------------------------------------------------------- containers */

/* The state-dict names of a ModuleList and a ModuleDict (no forward: nothing else to compare)
   are torch's, so a torch state dict loads strictly. */
static nb_module *mk_state_module_list(void) {
    nb_module *inner = nb_nn_module_list_append(nb_nn_module_list(), nb_nn_linear(4, 2));
    nb_module *l = nb_nn_module_list();
    nb_nn_module_list_append(l, nb_nn_linear(3, 4));
    nb_nn_module_list_append(l, nb_nn_relu());
    nb_nn_module_list_append(l, nb_nn_prelu(4, 0));
    return nb_nn_module_list_append(l, inner);
}

static nb_module *mk_state_module_dict(void) {
    nb_module *d = nb_nn_module_dict();
    nb_nn_module_dict_set(d, "encoder", nb_nn_linear(3, 4));
    nb_nn_module_dict_set(d, "act", nb_nn_prelu(0, 0));
    nb_nn_module_dict_set(d, "blocks", nb_nn_module_list_append(nb_nn_module_list(), nb_nn_linear(4, 4)));
    return nb_nn_module_dict_set(d, "head", nb_nn_sequential(nb_nn_identity(), nb_nn_linear(4, 2), NULL));
}

typedef struct container_case {
    const char *name;
    nb_module *(*make)(void);
} container_case;

static const container_case CONTAINERS[] = {
    { "module_list", mk_state_module_list },
    { "module_dict", mk_state_module_dict },
};

static void test_container_state(void **state) {
    const container_case *cc = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "state dict of %s", cc->name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    nb_module *m = cc->make();
    snprintf(ref, sizeof ref, "state.%s", cc->name);
    const record *names = find(ref, true);
    nb_named_tensor entries[MAX_NAMED];
    int n = m ? nb_module_state_entries(m, entries, MAX_NAMED) : -1;
    bool ok = names && n == names->nwords;
    for (int i = 0; ok && i < n; i++) ok = strcmp(entries[i].name, names->words[i]) == 0;
    if (!ok) {
        fprintf(stderr, "  %s: nabla's names are", cs);
        for (int i = 0; i < n && i < MAX_NAMED; i++) fprintf(stderr, " %s", entries[i].name);
        if (!m) fprintf(stderr, " (building failed: %s)", nb_error() ? nb_error() : "?");
        fprintf(stderr, "; torch's are");
        for (int i = 0; names && i < names->nwords; i++) fprintf(stderr, " %s", names->words[i]);
        fprintf(stderr, "\n");
    }
    nb_module_free(m);
    finish_case(cs, ok, used);
}

/* ---------------------------------------------------------------- optimizers and schedules */

static nb_tensor *params_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    return nb_retain(x);
}
static const nb_module_class PARAMS = { .name = "Params", .forward = params_forward };

/* The optimizer of a configuration (the same settings as OPTIMIZERS/SCHEDULES in nn_ref.py). */
static nb_optimizer *make_opt(const char *name, nb_module *m, nb_tensor *p0, nb_tensor *p1) {
#define IS(s) (strcmp(name, s) == 0)
    if (IS("sgd_plain")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.1 });
    if (IS("sgd_momentum")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9 });
    if (IS("sgd_dampening")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9, .dampening = 0.3 });
    if (IS("sgd_nesterov")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9, .nesterov = true });
    if (IS("sgd_wd")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.05, .weight_decay = 0.1 });
    if (IS("sgd_momentum_wd")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.5, .weight_decay = 0.01 });
    if (IS("adam_default")) return nb_optim_adam(m, (nb_adam_opts){ 0 });
    if (IS("adam_wd")) return nb_optim_adam(m, (nb_adam_opts){ .lr = 1e-2, .weight_decay = 0.1 });
    if (IS("adam_amsgrad")) return nb_optim_adam(m, (nb_adam_opts){ .lr = 1e-2, .amsgrad = true });
    if (IS("adam_betas")) return nb_optim_adam(m, (nb_adam_opts){ .lr = 1e-2, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-6 });
    if (IS("adamw_default")) return nb_optim_adamw(m, (nb_adamw_opts){ 0 });
    if (IS("adamw_lr")) return nb_optim_adamw(m, (nb_adamw_opts){ .lr = 1e-2 });
    if (IS("adamw_amsgrad")) return nb_optim_adamw(m, (nb_adamw_opts){ .lr = 1e-2, .weight_decay = 0.05, .amsgrad = true });
    if (IS("rmsprop_default")) return nb_optim_rmsprop(m, (nb_rmsprop_opts){ 0 });
    if (IS("rmsprop_momentum")) return nb_optim_rmsprop(m, (nb_rmsprop_opts){ .lr = 1e-3, .momentum = 0.9 });
    if (IS("rmsprop_centered")) return nb_optim_rmsprop(m, (nb_rmsprop_opts){ .lr = 1e-3, .centered = true });
    if (IS("rmsprop_all"))
        return nb_optim_rmsprop(m, (nb_rmsprop_opts){ .lr = 1e-3, .alpha = 0.9, .momentum = 0.5, .centered = true,
                                                      .weight_decay = 0.1 });
    if (IS("rmsprop_wd")) return nb_optim_rmsprop(m, (nb_rmsprop_opts){ .weight_decay = 0.1 });
    if (IS("adagrad_default")) return nb_optim_adagrad(m, (nb_adagrad_opts){ 0 });
    if (IS("adagrad_lr_decay")) return nb_optim_adagrad(m, (nb_adagrad_opts){ .lr = 0.1, .lr_decay = 0.01 });
    if (IS("adagrad_wd")) return nb_optim_adagrad(m, (nb_adagrad_opts){ .lr = 0.1, .weight_decay = 0.1 });
    if (IS("adagrad_init_acc")) return nb_optim_adagrad(m, (nb_adagrad_opts){ .lr = 0.1, .initial_accumulator_value = 0.5 });
    if (IS("groups_sgd")) { /* an optimizer without a module, then one group per parameter */
        nb_optimizer *o = nb_optim_sgd(NULL, (nb_sgd_opts){ .lr = 0.05, .momentum = 0.9 });
        if (nb_optim_add_param_group(o, &p0, 1, (nb_group_opts){ 0 }) != 0 ||
            nb_optim_add_param_group(o, &p1, 1, (nb_group_opts){ .lr = 0.01, .weight_decay = 0.05 }) != 1) {
            nb_optim_free(o);
            return NULL;
        }
        return o;
    }
    if (IS("groups_adam")) {
        nb_optimizer *o = nb_optim_adam(NULL, (nb_adam_opts){ .lr = 1e-2 });
        if (nb_optim_add_param_group(o, &p0, 1, (nb_group_opts){ .weight_decay = 0.1 }) != 0 ||
            nb_optim_add_param_group(o, &p1, 1, (nb_group_opts){ .lr = 0.05 }) != 1) {
            nb_optim_free(o);
            return NULL;
        }
        return o;
    }
    if (IS("set_lr") || IS("step") || IS("multistep") || IS("cosine") || IS("cosine_restart") || IS("onecycle_sgd") ||
        IS("onecycle_no_momentum"))
        return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.1, .momentum = 0.9 });
    if (IS("exponential") || IS("onecycle_adam")) return nb_optim_adam(m, (nb_adam_opts){ .lr = 1e-2 });
    if (IS("linear") || IS("onecycle_linear")) return nb_optim_adamw(m, (nb_adamw_opts){ .lr = 1e-2 });
    if (IS("linear_end")) return nb_optim_sgd(m, (nb_sgd_opts){ .lr = 0.1 });
    return NULL;
}

static nb_scheduler *make_sched(const char *name, nb_optimizer *o) {
    if (IS("step")) return nb_sched_step_lr(o, 30, 0.5);
    if (IS("multistep")) return nb_sched_multistep(o, (const int[]){ 50, 20, 80 }, 3, 0.3); /* unsorted on purpose */
    if (IS("exponential")) return nb_sched_exponential(o, 0.97);
    if (IS("cosine")) return nb_sched_cosine(o, 100, 1e-3);
    if (IS("cosine_restart")) return nb_sched_cosine(o, 40, 0);
    if (IS("linear")) return nb_sched_linear(o, 0.25, 0, 20);
    if (IS("linear_end")) return nb_sched_linear(o, 0.5, 0.1, 60);
    if (IS("onecycle_sgd")) return nb_sched_one_cycle(o, 0.1, 100, (nb_one_cycle_opts){ 0 });
    if (IS("onecycle_adam")) return nb_sched_one_cycle(o, 1e-2, 100, (nb_one_cycle_opts){ 0 });
    if (IS("onecycle_linear"))
        return nb_sched_one_cycle(o, 2e-2, 120,
                                  (nb_one_cycle_opts){ .pct_start = 0.25, .div_factor = 10, .final_div_factor = 100,
                                                       .linear_anneal = true, .base_momentum = 0.8, .max_momentum = 0.9 });
    if (IS("onecycle_no_momentum"))
        return nb_sched_one_cycle(o, 0.1, 100, (nb_one_cycle_opts){ .no_cycle_momentum = true });
    return NULL;
#undef IS
}

typedef struct opt_case {
    const char *name;
    bool sched;
} opt_case;

static const opt_case OPTS[] = {
    { "sgd_plain", false },       { "sgd_momentum", false },     { "sgd_dampening", false },   { "sgd_nesterov", false },
    { "sgd_wd", false },          { "sgd_momentum_wd", false },  { "adam_default", false },    { "adam_wd", false },
    { "adam_amsgrad", false },    { "adam_betas", false },       { "adamw_default", false },   { "adamw_lr", false },
    { "adamw_amsgrad", false },   { "rmsprop_default", false },  { "rmsprop_momentum", false }, { "rmsprop_centered", false },
    { "rmsprop_all", false },     { "rmsprop_wd", false },       { "adagrad_default", false }, { "adagrad_lr_decay", false },
    { "adagrad_wd", false },      { "adagrad_init_acc", false }, { "groups_sgd", false },      { "groups_adam", false },
    { "set_lr", false },          { "step", true },              { "multistep", true },        { "exponential", true },
    { "cosine", true },           { "cosine_restart", true },    { "linear", true },           { "linear_end", true },
    { "onecycle_sgd", true },     { "onecycle_adam", true },     { "onecycle_linear", true },  { "onecycle_no_momentum", true },
};

/* Compares nb_optim_named_state with torch's optimizer.state_dict()['state']: the same names
   (nabla also counts steps for SGD, which torch does not keep) and the same values. */
static bool compare_state(const char *cs, const char *pre, nb_optimizer *o) {
    char ref[256];
    snprintf(ref, sizeof ref, "%s.state_names", pre);
    const record *names = find(ref, true);
    if (!names) return false;
    nb_named_tensor st[MAX_NAMED];
    int n = nb_optim_named_state(o, st, MAX_NAMED);
    bool ok = n >= 0 && n <= MAX_NAMED;
    for (int i = 0; ok && i < n; i++) {
        bool in_torch = false;
        for (int k = 0; k < names->nwords; k++) in_torch = in_torch || strcmp(names->words[k], st[i].name) == 0;
        if (!in_torch) {
            /* torch's SGD keeps no step count; nabla counts steps for every optimizer */
            const char *dot = strchr(st[i].name, '.');
            bool torch_counts = false;
            for (int k = 0; k < names->nwords; k++) torch_counts = torch_counts || strstr(names->words[k], ".step");
            if (!dot || strcmp(dot, ".step") != 0 || torch_counts) {
                fprintf(stderr, "  %s: nabla has state %s, torch does not\n", cs, st[i].name);
                ok = false;
            }
            continue;
        }
        char what[96];
        snprintf(what, sizeof what, "state %s", st[i].name);
        snprintf(ref, sizeof ref, "%s.state.%s", pre, st[i].name);
        ok = compare(cs, what, st[i].tensor, ref, 1e-5, 1e-6) && ok;
    }
    for (int k = 0; ok && k < names->nwords; k++) {
        bool found = false;
        for (int i = 0; i < n; i++) found = found || strcmp(names->words[k], st[i].name) == 0;
        if (!found) {
            fprintf(stderr, "  %s: torch has state %s, nabla does not\n", cs, names->words[k]);
            ok = false;
        }
    }
    return ok;
}

static void test_opt(void **state) {
    const opt_case *oc = *state;
    char cs[96], pre[96], ref[256];
    snprintf(cs, sizeof cs, "%s %s", oc->sched ? "schedule" : "optimizer", oc->name);
    snprintf(pre, sizeof pre, "%s.%s", oc->sched ? "sched" : "opt", oc->name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    bool ok = true;
    /* two parameters [7, 5] and [5] in a module, as torch's params list */
    nb_module *m = nb_module_new(&PARAMS, sizeof(nb_module));
    nb_tensor *p[2];
    p[0] = nb_module_param(m, "p0", ref_tensor("opt.init.p0"));
    p[1] = nb_module_param(m, "p1", ref_tensor("opt.init.p1"));
    nb_optimizer *o = p[0] && p[1] ? make_opt(oc->name, m, p[0], p[1]) : NULL;
    nb_scheduler *s = o && oc->sched ? make_sched(oc->name, o) : NULL;
    if (!o || (oc->sched && !s)) {
        fprintf(stderr, "  %s: building the optimizer failed: %s\n", cs, nb_error() ? nb_error() : "?");
        ok = false;
    }
    double lrs[STEPS + 1];
    if (ok) lrs[0] = nb_optim_get_lr(o, 0);
    for (int k = 0; ok && k < STEPS; k++) {
        if (strcmp(oc->name, "set_lr") == 0 && k == 50) nb_optim_set_lr(o, 0.01);
        nb_scope *sc = nb_scope_begin();
        for (int i = 0; i < 2; i++) nb_set_grad(p[i], ref_tensor("opt.grad.%d.%d", k, i));
        int rc = nb_optim_step(o);
        if (rc < 0) fprintf(stderr, "  %s: nb_optim_step %d failed: %s\n", cs, k, nb_error() ? nb_error() : "?");
        if (rc == 0 && s && (rc = nb_sched_step(s)) < 0)
            fprintf(stderr, "  %s: nb_sched_step %d failed: %s\n", cs, k, nb_error() ? nb_error() : "?");
        nb_scope_end(sc);
        ok = rc == 0;
        lrs[k + 1] = nb_optim_get_lr(o, 0);
    }
    if (ok && s) {
        const record *want = findf("%s.lr", pre);
        ok = want && want->numel == STEPS + 1 && compare_values(cs, "learning rate after each step", lrs, STEPS + 1, want,
                                                               1e-9, 1e-12);
        if (ok && nb_sched_last_epoch(s) != STEPS) {
            fprintf(stderr, "  %s: last epoch is %d after %d steps\n", cs, nb_sched_last_epoch(s), STEPS);
            ok = false;
        }
        /* a one-cycle schedule of 100 steps takes the step after the 100th (as torch), no more */
        if (ok && strncmp(oc->name, "onecycle", 8) == 0 && strcmp(oc->name, "onecycle_linear") != 0) {
            double lr = nb_optim_get_lr(o, 0);
            if (nb_sched_step(s) == 0 || !nb_error() || strncmp(nb_error(), "nb_sched_step:", 14) != 0) {
                fprintf(stderr, "  %s: stepping past total_steps + 1 gave no error\n", cs);
                ok = false;
            }
            nb_error_clear();
            if (nb_optim_get_lr(o, 0) != lr) {
                fprintf(stderr, "  %s: a failed step changed the learning rate\n", cs);
                ok = false;
            }
        }
    }
    if (ok) {
        for (int i = 0; i < 2; i++) {
            char what[64];
            snprintf(what, sizeof what, "parameter %d after %d steps", i, STEPS);
            snprintf(ref, sizeof ref, "%s.p%d", pre, i);
            ok = compare(cs, what, p[i], ref, 1e-5, 1e-6) && ok;
        }
        ok = compare_state(cs, pre, o) && ok;
    }
    nb_sched_free(s);
    nb_optim_free(o);
    nb_module_free(m);
    finish_case(cs, ok, used);
}

/* ---------------------------------------------------------------- gradient clipping */

static void test_clip(void **state) {
    const char *name = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "clip_grad_norm %s", name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    nb_module *m = nb_module_new(&PARAMS, sizeof(nb_module));
    nb_tensor *a = nb_module_param(m, "a", nb_zeros(NB_SHAPE(4, 3), NB_F32));
    nb_tensor *b = nb_module_param(m, "b", nb_zeros(NB_SHAPE(3), NB_F32));
    nb_tensor *c = nb_module_param(m, "c", nb_zeros(NB_SHAPE(2), NB_F32)); /* no gradient: skipped */
    nb_scope *sc = nb_scope_begin();
    nb_set_grad(a, ref_tensor("clip.%s.ga", name));
    nb_set_grad(b, ref_tensor("clip.%s.gb", name));
    const record *max_norm = findf("clip.%s.max_norm", name), *norm = findf("clip.%s.norm", name);
    bool ok = max_norm && norm;
    if (ok) {
        double before = nb_grad_norm(m);
        double got = nb_clip_grad_norm(m, max_norm->v[0]);
        ok = compare_values(cs, "nb_grad_norm", &before, 1, norm, 1e-5, 0) &&
             compare_values(cs, "returned norm", &got, 1, norm, 1e-5, 0);
    }
    snprintf(ref, sizeof ref, "clip.%s.ga_clipped", name);
    ok = compare(cs, "clipped gradient of a", nb_grad_of(a), ref, 1e-5, 1e-7) && ok;
    snprintf(ref, sizeof ref, "clip.%s.gb_clipped", name);
    ok = compare(cs, "clipped gradient of b", nb_grad_of(b), ref, 1e-5, 1e-7) && ok;
    if (nb_grad_of(c)) {
        fprintf(stderr, "  %s: a parameter without a gradient got one\n", cs);
        ok = false;
    }
    nb_scope_end(sc);
    nb_module_free(m);
    finish_case(cs, ok, used);
}

/* ---------------------------------------------------------------- attention */

/* nb_scaled_dot_product_attention against softmax(q k^T * scale + mask) v written out in torch
   (nn_ref.py's sdpa_ref): q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv]. */
typedef struct sdpa_case {
    const char *name;
    bool causal, mask;
    double scale;      /* 0: 1/sqrt(d) */
    bool as_3d;        /* H is 1: also run on [B, T, d] with the head axis dropped */
    bool dropout_eval; /* dropout 0.5 with training false must change nothing */
} sdpa_case;

static const sdpa_case SDPAS[] = {
    { "sdpa_plain", false, false, 0, false, false },
    { "sdpa_plain", false, false, 0, false, true },
    { "sdpa_causal", true, false, 0, false, false },
    { "sdpa_mask", false, true, 0, false, false },
    { "sdpa_mask_full", false, true, 0, false, false },
    { "sdpa_mask_head", false, true, 0, false, false },
    { "sdpa_cross", false, false, 0, false, false },
    { "sdpa_cross_causal", true, false, 0, false, false },
    { "sdpa_causal_mask", true, true, 0, false, false },
    { "sdpa_scale", false, false, 0.7, false, false },
    { "sdpa_3d", false, true, 0, false, false },
    { "sdpa_3d", false, true, 0, true, false },
};

/* A leaf that requires grad, holding t's values reshaped to s (a copy: t stays as it is). */
static nb_tensor *leaf_as(nb_tensor *t, nb_shape s) {
    return nb_set_requires_grad(nb_contiguous(nb_clone(nb_reshape(t, s))), true);
}

/* s without axis 1 (for the [B, 1, T, d] -> [B, T, d] runs). */
static nb_shape drop_axis1(nb_shape s) {
    for (int i = 1; i + 1 < s.ndim; i++) s.dim[i] = s.dim[i + 1];
    s.ndim--;
    return s;
}

static void test_sdpa(void **state) {
    const sdpa_case *ac = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "attention %s%s%s", ac->name, ac->as_3d ? " as [B, T, d]" : "",
             ac->dropout_eval ? " with dropout in eval mode" : "");
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    nb_scope *sc = nb_scope_begin();
    nb_tensor *in[4] = { ref_tensor("attn.%s.q", ac->name), ref_tensor("attn.%s.k", ac->name),
                         ref_tensor("attn.%s.v", ac->name), ac->mask ? ref_tensor("attn.%s.mask", ac->name) : NULL };
    int n = ac->mask ? 4 : 3;
    bool ok = in[0] && in[1] && in[2] && (!ac->mask || in[3]);
    nb_shape shape4[4];
    for (int i = 0; ok && i < n; i++) {
        shape4[i] = nb_shape_of(in[i]);
        nb_shape s = ac->as_3d && i < 3 ? drop_axis1(shape4[i]) : shape4[i];
        in[i] = leaf_as(in[i], s);
        ok = in[i] != NULL;
    }
    nb_tensor *y = NULL;
    if (ok) {
        nb_attn_opts o = { .mask = in[3], .causal = ac->causal, .scale = ac->scale };
        if (ac->dropout_eval) o.dropout = 0.5, o.training = false;
        y = nb_scaled_dot_product_attention(in[0], in[1], in[2], o);
        if (ac->as_3d && y) y = nb_reshape(y, NB_SHAPE(nb_dim(y, 0), 1, nb_dim(y, 1), nb_dim(y, 2)));
        snprintf(ref, sizeof ref, "attn.%s.y", ac->name);
        ok = compare(cs, "output", y, ref, 1e-5, 1e-6);
    }
    if (ok && nb_backward_with(y, ref_tensor("attn.%s.g", ac->name)) < 0) {
        fprintf(stderr, "  %s: nb_backward_with failed: %s\n", cs, nb_error() ? nb_error() : "?");
        ok = false;
    }
    static const char *const names[4] = { "q", "k", "v", "mask" };
    for (int i = 0; ok && i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "gradient of %s", names[i]);
        snprintf(ref, sizeof ref, "attn.%s.g%s", ac->name, names[i]);
        nb_tensor *g = nb_grad_of(in[i]);
        if (g && ac->as_3d) g = nb_reshape(g, shape4[i]);
        ok = compare(cs, what, g, ref, 1e-5, 1e-6) && ok;
    }
    nb_scope_end(sc);
    finish_case(cs, ok, used);
}

/* nb_mha_forward(m, q, k, v, mask) against torch.nn.MultiheadAttention(q, k, v, attn_mask,
   need_weights=False), batch first, with torch's weights loaded by parameter name. */
typedef struct mha_case {
    const char *name;
    int64_t embed;
    int heads;
    bool no_bias, mask, kv_same;
} mha_case;

static const mha_case MHAS[] = {
    { "mha_cross", 8, 2, false, false, false },
    { "mha_cross_mask", 12, 3, false, true, false },
    { "mha_cross_mask_full", 8, 2, false, true, false },
    { "mha_cross_kv_same", 8, 2, false, false, true },
    { "mha_cross_no_bias", 8, 4, true, true, false },
    { "mha_cross_same_len", 8, 2, false, true, false },
};

/* m's parameters into params (*np of them), checked against the names torch listed in
   "<prefix>.params" (printed side by side when they differ) and loaded from "<prefix>.param.NAME". */
static bool load_named_params(const char *cs, nb_module *m, const char *prefix, nb_named_tensor *params, int *np) {
    char ref[256];
    *np = nb_module_named_parameters(m, params, MAX_NAMED);
    snprintf(ref, sizeof ref, "%s.params", prefix);
    const record *names = find(ref, true);
    bool ok = names && *np == names->nwords;
    for (int i = 0; ok && i < *np; i++) ok = strcmp(params[i].name, names->words[i]) == 0;
    if (names && !ok) {
        fprintf(stderr, "  %s: nabla's parameters are", cs);
        for (int i = 0; i < *np && i < MAX_NAMED; i++) fprintf(stderr, " %s", params[i].name);
        fprintf(stderr, "; torch's are");
        for (int i = 0; i < names->nwords; i++) fprintf(stderr, " %s", names->words[i]);
        fprintf(stderr, "\n");
    }
    for (int i = 0; ok && i < *np; i++) {
        snprintf(ref, sizeof ref, "%s.param.%s", prefix, params[i].name);
        ok = load_into(cs, params[i].tensor, ref);
    }
    return ok;
}

static void test_mha_cross(void **state) {
    const mha_case *mc = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "attention %s", mc->name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    nb_module *m = nb_nn_multihead_attention(mc->embed, mc->heads, (nb_mha_opts){ .no_bias = mc->no_bias });
    bool ok = m != NULL;
    if (!ok) fprintf(stderr, "  %s: building the module failed: %s\n", cs, nb_error() ? nb_error() : "?");
    nb_named_tensor params[MAX_NAMED];
    int np = 0;
    snprintf(ref, sizeof ref, "attn.%s", mc->name);
    ok = ok && load_named_params(cs, m, ref, params, &np);
    nb_scope *sc = nb_scope_begin();
    if (ok) {
        nb_tensor *q = nb_set_requires_grad(ref_tensor("attn.%s.q", mc->name), true);
        nb_tensor *k = nb_set_requires_grad(ref_tensor("attn.%s.k", mc->name), true);
        nb_tensor *v = mc->kv_same ? k : nb_set_requires_grad(ref_tensor("attn.%s.v", mc->name), true);
        nb_tensor *mask = mc->mask ? ref_tensor("attn.%s.mask", mc->name) : NULL;
        nb_tensor *y = nb_mha_forward(m, q, k, v, mask);
        snprintf(ref, sizeof ref, "attn.%s.y", mc->name);
        ok = compare(cs, "output", y, ref, 1e-5, 1e-6);
        if (ok && nb_backward_with(y, ref_tensor("attn.%s.g", mc->name)) < 0) {
            fprintf(stderr, "  %s: nb_backward_with failed: %s\n", cs, nb_error() ? nb_error() : "?");
            ok = false;
        }
        nb_tensor *ins[3] = { q, k, v };
        static const char *const in_names[3] = { "q", "k", "v" };
        for (int i = 0; ok && i < (mc->kv_same ? 2 : 3); i++) {
            char what[64];
            snprintf(what, sizeof what, "gradient of %s", in_names[i]);
            snprintf(ref, sizeof ref, "attn.%s.g%s", mc->name, in_names[i]);
            ok = compare(cs, what, nb_grad_of(ins[i]), ref, 1e-5, 1e-6) && ok;
        }
        for (int i = 0; ok && i < np; i++) {
            char what[128];
            snprintf(what, sizeof what, "gradient of %s", params[i].name);
            snprintf(ref, sizeof ref, "attn.%s.grad.%s", mc->name, params[i].name);
            ok = compare(cs, what, nb_grad_of(params[i].tensor), ref, 1e-5, 1e-6) && ok;
        }
    }
    nb_scope_end(sc);
    nb_module_free(m);
    finish_case(cs, ok, used);
}

/* ---------------------------------------------------------------- transformer layers */
/* The cases of nn_ref.py's TRANSFORMERS, in its order of fields. */
typedef struct tf_case {
    const char *name;
    int kind; /* 0 encoder layer, 1 decoder layer, 2 encoder stack, 3 decoder stack */
    int64_t d, heads, ff;
    int layers;
    bool norm_first, gelu, final_norm;
    int mask; /* 0 none, 1 float, 2 bool */
    bool causal, kpm;
    int mem_mask;
    bool mem_kpm;
} tf_case;

static const tf_case TRANSFORMERS[] = {
    { "enc_layer", 0, 8, 2, 16, 1, false, false, false, 0, false, false, 0, false },
    { "enc_layer_norm_first_gelu", 0, 12, 3, 20, 1, true, true, false, 1, false, true, 0, false },
    { "enc_layer_causal_bool", 0, 8, 4, 12, 1, false, false, false, 2, true, false, 0, false },
    { "dec_layer", 1, 8, 2, 16, 1, false, false, false, 0, false, false, 0, false },
    { "dec_layer_masks", 1, 12, 3, 24, 1, false, true, false, 1, true, true, 2, true },
    { "dec_layer_norm_first", 1, 8, 2, 10, 1, true, false, false, 0, true, false, 1, false },
    { "encoder_stack", 2, 8, 2, 16, 3, false, false, true, 0, true, true, 0, false },
    { "decoder_stack_norm_first", 3, 8, 4, 12, 2, true, true, true, 2, false, true, 0, true },
};

/* A mask of the store: float as it is, a bool one (stored 0/1) back to bool. */
static nb_tensor *tf_mask(const tf_case *tc, const char *tag, bool is_bool) {
    nb_tensor *m = ref_tensor("tf.%s.%s", tc->name, tag);
    return is_bool && m ? nb_ne(m, nb_zeros(NB_SHAPE(), nb_dtype_of(m))) : m;
}

static void test_transformer(void **state) {
    const tf_case *tc = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "transformer %s", tc->name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    nb_transformer_opts o = { .dim_feedforward = tc->ff, .no_dropout = true, .norm_first = tc->norm_first,
                              .activation = tc->gelu ? NB_TRANSFORMER_GELU : NB_TRANSFORMER_RELU, .final_norm = tc->final_norm };
    nb_module *m = tc->kind == 0   ? nb_nn_transformer_encoder_layer(tc->d, (int)tc->heads, o)
                   : tc->kind == 1 ? nb_nn_transformer_decoder_layer(tc->d, (int)tc->heads, o)
                   : tc->kind == 2 ? nb_nn_transformer_encoder(tc->d, (int)tc->heads, tc->layers, o)
                                   : nb_nn_transformer_decoder(tc->d, (int)tc->heads, tc->layers, o);
    bool ok = m != NULL;
    if (!ok) fprintf(stderr, "  %s: building the module failed: %s\n", cs, nb_error() ? nb_error() : "?");
    nb_named_tensor params[MAX_NAMED];
    int np = 0;
    snprintf(ref, sizeof ref, "tf.%s", tc->name);
    ok = ok && load_named_params(cs, m, ref, params, &np);
    nb_scope *sc = nb_scope_begin();
    bool dec = tc->kind == 1 || tc->kind == 3;
    if (ok) {
        nb_tensor *x = nb_set_requires_grad(ref_tensor("tf.%s.x", tc->name), true);
        nb_tensor *mem = dec ? nb_set_requires_grad(ref_tensor("tf.%s.memory", tc->name), true) : NULL;
        nb_transformer_masks mk = { .causal = tc->causal };
        if (tc->mask) mk.mask = tf_mask(tc, "mask", tc->mask == 2);
        if (tc->kpm) mk.key_padding_mask = tf_mask(tc, "kpm", true);
        if (tc->mem_mask) mk.memory_mask = tf_mask(tc, "mem_mask", tc->mem_mask == 2);
        if (tc->mem_kpm) mk.memory_key_padding_mask = tf_mask(tc, "mem_kpm", true);
        nb_tensor *y = !dec && !tc->mask && !tc->causal && !tc->kpm ? nb_forward(m, x) : nb_transformer_forward(m, x, mem, mk);
        if (!y) fprintf(stderr, "  %s: forward failed: %s\n", cs, nb_error() ? nb_error() : "?");
        snprintf(ref, sizeof ref, "tf.%s.y", tc->name);
        ok = compare(cs, "output", y, ref, 1e-5, 1e-6);
        if (ok && nb_backward_with(y, ref_tensor("tf.%s.g", tc->name)) < 0) {
            fprintf(stderr, "  %s: nb_backward_with failed: %s\n", cs, nb_error() ? nb_error() : "?");
            ok = false;
        }
        snprintf(ref, sizeof ref, "tf.%s.gx", tc->name);
        ok = ok && compare(cs, "gradient of x", nb_grad_of(x), ref, 1e-5, 1e-6);
        snprintf(ref, sizeof ref, "tf.%s.gmemory", tc->name);
        if (dec) ok = ok && compare(cs, "gradient of memory", nb_grad_of(mem), ref, 1e-5, 1e-6);
        for (int i = 0; ok && i < np; i++) {
            char what[128];
            snprintf(what, sizeof what, "gradient of %s", params[i].name);
            snprintf(ref, sizeof ref, "tf.%s.grad.%s", tc->name, params[i].name);
            ok = compare(cs, what, nb_grad_of(params[i].tensor), ref, 1e-5, 1e-6) && ok;
        }
    }
    nb_scope_end(sc);
    nb_module_free(m);
    finish_case(cs, ok, used);
}

/* ---------------------------------------------------------------- main */

/* ---------------------------------------------------------------- module backward hooks */
/* nn_ref.py's HOOK_CASES: an MLP with backward hooks on Linears "0" and "2"; the gradients the
   hooks see and the parameters' gradients after a hook's replacement, against torch's. */
static const char *const HOOK_CASES[] = { "record", "scale", "pre", "nograd" };

typedef struct {
    nb_tensor *gin, *gout; /* what the hook saw (owned) */
    int calls;
    double scale; /* 0: keep grad_input */
} hook_seen;

static nb_tensor *seen_hook(nb_module *m, nb_tensor *gin, nb_tensor *gout, void *ctx) {
    (void)m;
    hook_seen *h = ctx;
    h->calls++;
    nb_release(h->gin);
    nb_release(h->gout);
    h->gin = gin ? nb_retain(gin) : NULL;
    h->gout = nb_retain(gout);
    return gin && h->scale ? nb_mul_scalar(gin, h->scale) : NULL;
}

static nb_tensor *triple_pre_hook(nb_module *m, nb_tensor *gout, void *ctx) {
    (void)m, (void)ctx;
    return nb_mul_scalar(gout, 3.0);
}

static void test_module_hooks(void **state) {
    const char *name = *state;
    char cs[96], ref[256], pre[64];
    snprintf(cs, sizeof cs, "hooks %s", name);
    snprintf(pre, sizeof pre, "hook.%s", name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    nb_module *m = nb_nn_sequential(nb_nn_linear(5, 8), nb_nn_tanh(), nb_nn_linear(8, 6), nb_nn_tanh(), nb_nn_linear(6, 3), NULL);
    nb_named_tensor params[MAX_NAMED];
    int np = 0;
    bool ok = m && load_named_params(cs, m, pre, params, &np);
    static const char *const hooked[2] = { "0", "2" };
    hook_seen seen[2] = { { 0 }, { .scale = strcmp(name, "scale") == 0 ? 2.5 : 0 } };
    for (int k = 0; ok && k < 2; k++) ok = nb_module_add_backward_hook(nb_module_get_child(m, hooked[k]), seen_hook, &seen[k]) >= 0;
    if (ok && strcmp(name, "pre") == 0) ok = nb_module_add_backward_pre_hook(nb_module_get_child(m, "2"), triple_pre_hook, NULL) >= 0;
    bool x_grad = strcmp(name, "nograd") != 0;
    /* op coverage records through the tracer, under which backward hooks are an error (a
       compiled graph would not call them); these cases reach no op the layers do not */
    bool was_paused = nb__trace_suspend(true);
    nb_scope *sc = nb_scope_begin();
    if (ok) {
        nb_tensor *x = ref_tensor("%s.x", pre);
        if (x_grad) nb_set_requires_grad(x, true);
        nb_tensor *y = nb_forward(m, x);
        snprintf(ref, sizeof ref, "%s.y", pre);
        ok = compare(cs, "output", y, ref, 1e-5, 1e-6);
        if (ok && nb_backward_with(y, ref_tensor("%s.g", pre)) < 0) {
            fprintf(stderr, "  %s: nb_backward_with failed: %s\n", cs, nb_error() ? nb_error() : "?");
            ok = false;
        }
        if (ok && x_grad) {
            snprintf(ref, sizeof ref, "%s.gx", pre);
            ok = compare(cs, "input gradient", nb_grad_of(x), ref, 1e-5, 1e-6);
        }
        for (int i = 0; ok && i < np; i++) {
            char what[128];
            snprintf(what, sizeof what, "gradient of %s", params[i].name);
            snprintf(ref, sizeof ref, "%s.grad.%s", pre, params[i].name);
            ok = compare(cs, what, nb_grad_of(params[i].tensor), ref, 1e-5, 1e-6) && ok;
        }
        for (int k = 0; ok && k < 2; k++) {
            char what[128];
            if (seen[k].calls != 1) {
                fprintf(stderr, "  %s: the hook on %s ran %d times, not once\n", cs, hooked[k], seen[k].calls);
                ok = false;
                break;
            }
            snprintf(ref, sizeof ref, "%s.gin.%s", pre, hooked[k]);
            bool torch_none = !find_quiet(ref, false);
            if (torch_none != !seen[k].gin) {
                fprintf(stderr, "  %s: the hook on %s saw grad_input %s, torch's %s\n", cs, hooked[k],
                        seen[k].gin ? "set" : "NULL", torch_none ? "None" : "set");
                ok = false;
            } else if (!torch_none) {
                snprintf(what, sizeof what, "grad_input seen by the hook on %s", hooked[k]);
                ok = compare(cs, what, seen[k].gin, ref, 1e-5, 1e-6) && ok;
            }
            snprintf(what, sizeof what, "grad_output seen by the hook on %s", hooked[k]);
            snprintf(ref, sizeof ref, "%s.gout.%s", pre, hooked[k]);
            ok = compare(cs, what, seen[k].gout, ref, 1e-5, 1e-6) && ok;
        }
    }
    nb_scope_end(sc);
    nb__trace_suspend(was_paused);
    for (int k = 0; k < 2; k++) {
        nb_release(seen[k].gin);
        nb_release(seen[k].gout);
    }
    nb_module_free(m);
    finish_case(cs, ok, used);
}

int main(int argc, char **argv) {
    char *text;
    if (!load_store(argc, argv, "test_nn_torch", "tests/nn_ref.py", &text)) return 1;
    enum { NL = sizeof LAYERS / sizeof *LAYERS, NLOSS = sizeof LOSSES / sizeof *LOSSES, NO = sizeof OPTS / sizeof *OPTS,
           NA = sizeof SDPAS / sizeof *SDPAS, NM = sizeof MHAS / sizeof *MHAS, NC = sizeof CONTAINERS / sizeof *CONTAINERS,
           NTF = sizeof TRANSFORMERS / sizeof *TRANSFORMERS, NH = sizeof HOOK_CASES / sizeof *HOOK_CASES,
           NT = NL + NLOSS + N_LOSS_MULTI + NC + NO + 2 + NA + NM + NTF + NH };
    static const char *const clips[] = { "clip", "noclip" };
    struct CMUnitTest tests[NT];
    static char names[NT][96];
    size_t nt = 0;
    const char *filter = argc > 2 ? argv[2] : NULL;
#define ADD(label, fn, data)                                                                   \
    do {                                                                                       \
        snprintf(names[nt], sizeof names[nt], "%s", label);                                    \
        if (!filter || strstr(names[nt], filter))                                              \
            tests[nt] = (struct CMUnitTest){ names[nt], fn, NULL, NULL, (void *)(data) }, nt++; \
    } while (0)
    char label[96];
    for (int i = 0; i < NL; i++) {
        snprintf(label, sizeof label, "layer_%s", LAYERS[i].name);
        ADD(label, test_layer, &LAYERS[i]);
    }
    for (int i = 0; i < NLOSS; i++) {
        snprintf(label, sizeof label, "loss_%s", LOSSES[i].name);
        ADD(label, test_loss, &LOSSES[i]);
    }
    make_loss_multi_names();
    for (int i = 0; i < N_LOSS_MULTI; i++) {
        snprintf(label, sizeof label, "loss_%.60s", loss_multi_names[i]);
        ADD(label, test_loss_multi, loss_multi_names[i]);
    }
    for (int i = 0; i < NC; i++) {
        snprintf(label, sizeof label, "state_%s", CONTAINERS[i].name);
        ADD(label, test_container_state, &CONTAINERS[i]);
    }
    for (int i = 0; i < NO; i++) {
        snprintf(label, sizeof label, "%s_%s", OPTS[i].sched ? "sched" : "optim", OPTS[i].name);
        ADD(label, test_opt, &OPTS[i]);
    }
    for (int i = 0; i < 2; i++) {
        snprintf(label, sizeof label, "clip_grad_norm_%s", clips[i]);
        ADD(label, test_clip, clips[i]);
    }
    for (int i = 0; i < NA; i++) {
        snprintf(label, sizeof label, "attn_%s%s%s", SDPAS[i].name, SDPAS[i].as_3d ? "_as_3d" : "",
                 SDPAS[i].dropout_eval ? "_dropout_eval" : "");
        ADD(label, test_sdpa, &SDPAS[i]);
    }
    for (int i = 0; i < NM; i++) {
        snprintf(label, sizeof label, "attn_%s", MHAS[i].name);
        ADD(label, test_mha_cross, &MHAS[i]);
    }
    for (int i = 0; i < NTF; i++) {
        snprintf(label, sizeof label, "transformer_%s", TRANSFORMERS[i].name);
        ADD(label, test_transformer, &TRANSFORMERS[i]);
    }
    for (int i = 0; i < NH; i++) {
        snprintf(label, sizeof label, "hooks_%s", HOOK_CASES[i]);
        ADD(label, test_module_hooks, HOOK_CASES[i]);
    }
    int failed = 1;
    if (nt == 0) fprintf(stderr, "test_nn_torch: no case matches\n");
    else {
        /* warm up: the first scope and backward allocate per-thread state that stays, so the
           per-case check of bytes in use starts from there */
        nb_scope *warm = nb_scope_begin();
        nb_tensor *w = nb_set_requires_grad(nb_ones(NB_SHAPE(2), NB_F32), true);
        nb_backward(nb_sum_all(nb_mul(w, w)));
        nb_scope_end(warm);
        nb_error_clear();
        op_coverage_begin(); /* the layers, losses and optimizers compared with torch */
        failed = _cmocka_run_group_tests("nn_vs_torch", tests, nt, NULL, NULL);
        op_coverage_end();
        if (!filter && op_coverage_write() < 0) failed++;
    }
    free_store();
    free(text);
    return failed ? 1 : 0;
}
