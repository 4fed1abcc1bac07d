/* nabla nn: modules (the PyTorch nn.Module idea in C), layers, initialisers and losses. */
#ifndef NABLA_NN_H
#define NABLA_NN_H

#include "core.h"
#include "functional.h" /* the functional forms the layers run */
#include "ops.h"        /* nb_pad_mode, the convolutions' padding modes */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nb_module nb_module;

/* What a kind of module does: its name, its forward, and (optionally) how to free what a
   subclass holds beyond its registered parameters, buffers and children, and its settings as
   nb_module_repr shows them between parentheses (torch's extra_repr: snprintf's contract). */
typedef struct nb_module_class {
    const char *name;
    nb_tensor *(*forward)(nb_module *self, nb_tensor *x);
    void (*free)(nb_module *self);
    int (*extra_repr)(nb_module *self, char *buf, size_t size);
} nb_module_class;

/* The header every module embeds as its first member. Fields other than these are private. */
struct nb_module {
    const nb_module_class *cls;
    bool training;
    struct nb_module_state *state;
    struct nb_module_hooks *hooks; /* private: forward and backward hooks (nb_module_add_*_hook) */
};

/* A name and a borrowed tensor, as listed by nb_module_named_parameters. */
typedef struct nb_named_tensor {
    const char *name;
    nb_tensor *tensor;
} nb_named_tensor;

/* ---- the module base ---- */
/* Allocates a zeroed module of size bytes (the user's struct, nb_module first), in training mode;
   the caller frees it with nb_module_free (or hands it to a parent). */
NB_API nb_module *nb_module_new(const nb_module_class *cls, size_t size);
/* Registers a parameter under name, taking over the caller's reference (out of its scope if it
   is in one) and marking it as requiring grad; returns t (borrowed), or NULL with t released. */
NB_API nb_tensor *nb_module_param(nb_module *m, const char *name, nb_tensor *t);
/* Registers a buffer (state saved with the weights, no gradient), taking over the reference as
   nb_module_param does; returns t (borrowed), or NULL with t released. */
NB_API nb_tensor *nb_module_buffer(nb_module *m, const char *name, nb_tensor *t);
/* Registers a child module under name; m owns it from now on. Returns child, or NULL with child
   freed (kept when it already belongs to another module). */
NB_API nb_module *nb_module_child(nb_module *m, const char *name, nb_module *child);
/* Runs the module's forward on x, with its forward and backward hooks around it. */
NB_API nb_tensor *nb_forward(nb_module *m, nb_tensor *x);
/* A forward pre-hook (torch's register_forward_pre_hook): called by nb_forward before m's forward;
   returns the input the forward gets (x, or another tensor), or NULL with an error to fail. */
typedef nb_tensor *(*nb_forward_pre_hook)(nb_module *m, nb_tensor *x, void *ctx);
/* A forward hook (torch's register_forward_hook): called after m's forward with its input and
   output y; returns what nb_forward returns (y, or another tensor), or NULL with an error. It is
   also called when the forward (or an earlier hook) failed, with y NULL, so a hook that took
   something for the call can give it back; it returns NULL then. */
typedef nb_tensor *(*nb_forward_hook)(nb_module *m, nb_tensor *x, nb_tensor *y, void *ctx);
/* Adds a pre-hook to m (run in the order added); a handle (>= 0) for nb_module_remove_hook, or
   <0 with the error. */
NB_API int nb_module_add_forward_pre_hook(nb_module *m, nb_forward_pre_hook fn, void *ctx);
/* Adds a forward hook to m (run in the order added); a handle, or <0 with the error. */
NB_API int nb_module_add_forward_hook(nb_module *m, nb_forward_hook fn, void *ctx);
/* A backward hook (torch's register_full_backward_hook): called during backward once the
   gradient w.r.t. the module's input is computed, with that gradient and the gradient w.r.t. its
   output; returns a replacement for grad_input (its shape and dtype), or NULL to keep it. When
   the input needs no gradient, grad_input is NULL (as torch passes None), the hook is called when
   grad_output arrives, and must return NULL. An error recorded while it runs (a nabla call of
   its failing) fails the backward. */
typedef nb_tensor *(*nb_backward_hook)(nb_module *m, nb_tensor *grad_input, nb_tensor *grad_output, void *ctx);
/* A backward pre-hook (torch's register_full_backward_pre_hook): called when the gradient w.r.t.
   the module's output arrives, before the module's backward; returns a replacement for it (its
   shape and dtype), or NULL to keep it. An error recorded while it runs fails the backward. */
typedef nb_tensor *(*nb_backward_pre_hook)(nb_module *m, nb_tensor *grad_output, void *ctx);
/* Adds a backward hook to m (run in the order added, later ones seeing earlier replacements); a
   handle, or <0 with the error. nb_forward then wraps the module's input and output in identity
   functions, as torch's BackwardHook does, so the hooks of a call see that call's gradients;
   the hooks are those m had when nb_forward ran, and m must outlive the backward. */
NB_API int nb_module_add_backward_hook(nb_module *m, nb_backward_hook fn, void *ctx);
/* Adds a backward pre-hook to m (run in the order added); a handle, or <0 with the error. */
NB_API int nb_module_add_backward_pre_hook(nb_module *m, nb_backward_pre_hook fn, void *ctx);
/* Removes the hook with that handle from m; 0, or <0 when m has no such hook. */
NB_API int nb_module_remove_hook(nb_module *m, int handle);
/* Moves parameters and buffers (and their gradients) to device in place, as torch's
   module.to: each keeps its identity, so an optimizer made before still updates it, and its
   state follows on the next step. Returns m, or NULL with the error recorded and nothing moved
   (an unavailable device, memory run out). */
NB_API nb_module *nb_module_to(nb_module *m, nb_device device);
/* The module tree as text, as print(model) in torch: "Sequential(\n  (0): Linear(in_features=4,
   out_features=3, bias=True)\n  ...)"; malloc'ed (free() it), or NULL with an error. */
NB_API char *nb_module_repr(nb_module *m);
/* Writes nb_module_repr(m) and a newline to standard output (asked for, like nb_print); 0 or <0. */
NB_API int nb_module_print(nb_module *m);
/* Sets training (true) or evaluation (false) mode on m and every descendant. */
NB_API void nb_module_train(nb_module *m, bool training);
/* Frees m, its children, parameters and buffers. NULL is ignored. */
NB_API void nb_module_free(nb_module *m);
/* The registered child called name (borrowed), or NULL. */
NB_API nb_module *nb_module_get_child(nb_module *m, const char *name);
/* The parameter or buffer at a dotted path such as "fc1.weight" (borrowed), or NULL. */
NB_API nb_tensor *nb_module_get(nb_module *m, const char *path);
/* The module's path in its tree ("" for the root or NULL, "layers.2.attn"), for messages; valid
   until nb_module_child is next called on a module above m (which rewrites the paths below it). */
NB_API const char *nb_module_path(const nb_module *m);
/* Lists parameters with dotted names in PyTorch's order (own first, then children in
   registration order). Fills at most cap entries (out may be NULL to count); returns the total
   count, or -1 with an error. Names live as long as the module. */
NB_API int nb_module_named_parameters(nb_module *m, nb_named_tensor *out, int cap);
/* Lists buffers the same way. */
NB_API int nb_module_named_buffers(nb_module *m, nb_named_tensor *out, int cap);
/* Lists parameters and buffers in PyTorch's state_dict order (per module: parameters, buffers,
   then children). */
NB_API int nb_module_state_entries(nb_module *m, nb_named_tensor *out, int cap);
/* Number of parameter elements in the tree. */
NB_API int64_t nb_module_num_params(nb_module *m);
/* Drops every parameter's gradient (PyTorch's zero_grad(set_to_none=True)). */
NB_API void nb_module_zero_grad(nb_module *m);

/* ---- layers (PyTorch's defaults and initialisation) ---- */
/* y = x W^T + b; weight [out, in] and bias [out], kaiming-uniform as torch.nn.Linear. */
NB_API nb_module *nb_nn_linear(int64_t in_features, int64_t out_features);
/* Linear without a bias. */
NB_API nb_module *nb_nn_linear_no_bias(int64_t in_features, int64_t out_features);
/* Activation module: max(x, 0). */
NB_API nb_module *nb_nn_relu(void);
/* Activation module: GELU, exact (erf) form. */
NB_API nb_module *nb_nn_gelu(void);
/* Activation module: x * sigmoid(x). */
NB_API nb_module *nb_nn_silu(void);
/* Activation module: tanh. */
NB_API nb_module *nb_nn_tanh(void);
/* Activation module: sigmoid. */
NB_API nb_module *nb_nn_sigmoid(void);
/* Activation module: leaky ReLU (negative_slope 0: torch's 0.01), torch's LeakyReLU. */
NB_API nb_module *nb_nn_leaky_relu(double negative_slope);
/* Activation module: ELU (alpha 0: torch's 1.0). */
NB_API nb_module *nb_nn_elu(double alpha);
/* Activation module: PReLU with a learned slope, parameter "weight" [num_parameters] (0: 1; else
   the channels, axis 1 of the input) filled with init (0: torch's 0.25). */
NB_API nb_module *nb_nn_prelu(int64_t num_parameters, double init);
/* Activation module: softplus (beta 0: 1; threshold 0: 20, torch's defaults). */
NB_API nb_module *nb_nn_softplus(double beta, double threshold);
/* Activation module: x * tanh(softplus(x)). */
NB_API nb_module *nb_nn_mish(void);
/* Activation module: hardswish. */
NB_API nb_module *nb_nn_hardswish(void);
/* Activation module: hardsigmoid. */
NB_API nb_module *nb_nn_hardsigmoid(void);
/* Softmax over axis. */
NB_API nb_module *nb_nn_softmax(int axis);
/* Log-softmax over axis. */
NB_API nb_module *nb_nn_log_softmax(int axis);
/* Flattens axes 1..-1 (a 1-D [N] input becomes [N, 1]). */
NB_API nb_module *nb_nn_flatten(void);
/* Zeroes elements with probability p (in [0, 1), else NULL) in training mode and scales the rest by 1/(1-p). */
NB_API nb_module *nb_nn_dropout(double p);
/* A table of num vectors of size dim, N(0, 1) as torch.nn.Embedding. */
NB_API nb_module *nb_nn_embedding(int64_t num, int64_t dim);
/* An embedding whose row padding_idx (negative counts from the end) starts at zero and gets no
   gradient (torch's padding_idx). */
NB_API nb_module *nb_nn_embedding_padded(int64_t num, int64_t dim, int64_t padding_idx);
/* Layer norm over the last axis of size dim, with weight and bias, eps 1e-5. */
NB_API nb_module *nb_nn_layer_norm(int64_t dim);
/* The same with the given eps (torch.nn.LayerNorm(dim, eps=eps)). */
NB_API nb_module *nb_nn_layer_norm_eps(int64_t dim, double eps);
/* RMS norm over the last axis of size dim with a weight of ones (torch.nn.RMSNorm(dim, eps));
   eps 0 is torch's eps=None, the dtype's machine epsilon. */
NB_API nb_module *nb_nn_rms_norm(int64_t dim, double eps);
/* Runs its children in order: nb_nn_sequential(a, b, c, NULL); children are named "0", "1", ...
   Takes over every module given (all freed on failure); the list ends at the first NULL. */
NB_API nb_module *nb_nn_sequential(nb_module *first, ...);
/* Appends a child to a sequential module, taking it over; returns seq, or NULL with child freed as
   nb_module_child does (also when seq is not a sequential). */
NB_API nb_module *nb_nn_sequential_add(nb_module *seq, nb_module *child);
/* A module whose forward returns its input (a new reference), torch's Identity. */
NB_API nb_module *nb_nn_identity(void);
/* An empty list of modules, torch's ModuleList: children "0", "1", ... (state dict "0.weight");
   it has no forward (nb_forward on it is an error): its owner runs the children. */
NB_API nb_module *nb_nn_module_list(void);
/* Appends child to a list, taking it over; returns list, or NULL with child freed as
   nb_nn_sequential_add does (also when list is not a ModuleList). */
NB_API nb_module *nb_nn_module_list_append(nb_module *list, nb_module *child);
/* The number of modules in a list, or -1 with an error when it is not a ModuleList. */
NB_API int nb_nn_module_list_len(const nb_module *list);
/* The list's module at index (negative counts from the end; borrowed), or NULL with an error. */
NB_API nb_module *nb_nn_module_list_get(nb_module *list, int index);
/* An empty dict of modules, torch's ModuleDict: children under their keys, in insertion order;
   no forward of its own. Look a child up with nb_module_get_child. */
NB_API nb_module *nb_nn_module_dict(void);
/* Adds child under key (non-empty, without dots), taking it over; returns dict, or NULL with child
   freed as nb_module_child does. A key already there is an error (torch would replace it). */
NB_API nb_module *nb_nn_module_dict_set(nb_module *dict, const char *key, nb_module *child);

/* Options of nb_nn_conv2d and nb_nn_conv1d (zero fields: stride 1, padding 0, dilation 1, groups
   1, with bias, zero padding). The *_hw fields give (height, width) apart for Conv2d and win
   over the square value where non-zero (a kernel_hw lets the kernel argument be 0);
   padding_mode pads with zeros (NB_PAD_CONSTANT) or by reflecting, replicating or wrapping the
   input, as torch's padding_mode. */
typedef struct nb_conv2d_opts {
    int stride, padding, dilation, groups;
    bool no_bias;
    int kernel_hw[2], stride_hw[2], padding_hw[2], dilation_hw[2];
    nb_pad_mode padding_mode;
} nb_conv2d_opts;
/* 2-D convolution (torch.nn.Conv2d) over [N, C, H, W] (or [C, H, W]), weight [out, in/groups,
   kh, kw], kaiming-uniform as torch; groups must divide both channel counts. */
NB_API nb_module *nb_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv2d_opts opts);
/* 1-D convolution (torch.nn.Conv1d) over [N, C, L] (or [C, L]), weight [out, in/groups, k]; the
   square fields of opts apply. */
NB_API nb_module *nb_nn_conv1d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv2d_opts opts);
/* 3-D convolution (torch.nn.Conv3d) over [N, C, D, H, W] (or [C, D, H, W]), weight [out,
   in/groups, k, k, k]; the square fields of opts and padding_mode apply. */
NB_API nb_module *nb_nn_conv3d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv2d_opts opts);
/* Options of the transposed convolution modules (zero: stride 1, dilation 1, groups 1, bias on). */
typedef struct nb_conv_transpose2d_opts {
    int stride, padding, output_padding, dilation, groups;
    bool no_bias;
} nb_conv_transpose2d_opts;
/* Transposed 2-D convolution (torch.nn.ConvTranspose2d): weight [in, out/groups, k, k], bias [out]. */
NB_API nb_module *nb_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv_transpose2d_opts opts);
/* Transposed 1-D convolution (torch.nn.ConvTranspose1d): weight [in, out/groups, k], bias [out]. */
NB_API nb_module *nb_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int kernel, nb_conv_transpose2d_opts opts);
/* Upsampling (torch.nn.Upsample) by nb_interpolate: size[0] or scale_factor[0] alone serves
   every spatial axis; linear and bilinear follow the input's rank. */
NB_API nb_module *nb_nn_upsample(nb_interp_opts opts);
/* Max pooling (torch.nn.MaxPool2d) over k x k windows, or opts.kernel_hw, with the options of
   nb_pool_opts (stride, padding, dilation, ceil_mode, each square or per axis). */
NB_API nb_module *nb_nn_max_pool2d(int kernel, nb_pool_opts opts);
/* Average pooling (torch.nn.AvgPool2d) over k x k windows, or opts.kernel_hw (padding counted,
   as torch's default, unless opts.exclude_padding; ceil_mode as max pooling's). */
NB_API nb_module *nb_nn_avg_pool2d(int kernel, nb_pool_opts opts);
/* Average pooling to an out_h x out_w output whatever the input size. */
NB_API nb_module *nb_nn_adaptive_avg_pool2d(int out_h, int out_w);
/* Batch norm over [N, C] or [N, C, L] with running statistics (momentum 0.1, eps 1e-5). */
NB_API nb_module *nb_nn_batch_norm1d(int64_t features);
/* Batch norm over [N, C, H, W]. */
NB_API nb_module *nb_nn_batch_norm2d(int64_t features);
/* Group norm over channels split into groups (torch.nn.GroupNorm, affine: weight and bias [channels]). */
NB_API nb_module *nb_nn_group_norm(int64_t groups, int64_t channels);
/* Instance norm of [N, C, L] or [C, L] (torch.nn.InstanceNorm1d: no running statistics; weight and
   bias only when affine, as torch's affine=True). */
NB_API nb_module *nb_nn_instance_norm1d(int64_t features, bool affine);
/* Instance norm of [N, C, H, W] or [C, H, W] (torch.nn.InstanceNorm2d). */
NB_API nb_module *nb_nn_instance_norm2d(int64_t features, bool affine);

/* Options of multi-head attention: no_bias drops the projections' biases; causal masks
   the future; dropout applies to the attention weights in training. */
typedef struct nb_mha_opts {
    bool no_bias, causal;
    double dropout;
} nb_mha_opts;
/* Self-attention over x [B, T, E] (batch first) with PyTorch's parameter names
   (in_proj_weight [3E, E], in_proj_bias, out_proj.weight, out_proj.bias). */
NB_API nb_module *nb_nn_multihead_attention(int64_t embed_dim, int heads, nb_mha_opts opts);
/* Attention of query/key/value [B, T, E] through the module's projections (cross-attention
   when kv differs from q); mask (or NULL) is added to the scores [B, heads, Tq, Tk] or broadcasts.
   mha must come from nb_nn_multihead_attention (its class is not checked). */
NB_API nb_tensor *nb_mha_forward(nb_module *mha, nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_tensor *mask);

/* ---- transformer layers (src/nn/transformer.c): torch.nn.TransformerEncoderLayer,
   TransformerDecoderLayer, TransformerEncoder and TransformerDecoder, batch first ([B, T, E]) ---- */
/* The feed-forward block's activation. */
typedef enum nb_transformer_activation { NB_TRANSFORMER_RELU = 0, NB_TRANSFORMER_GELU } nb_transformer_activation;
/* Options of the transformer layers; zero fields are torch's defaults: dim_feedforward 2048,
   dropout 0.1 (no_dropout: none), relu, layer_norm_eps 1e-5, post-norm (norm_first false).
   final_norm gives a stack a LayerNorm after its last layer ("norm", torch's norm=). */
typedef struct nb_transformer_opts {
    int64_t dim_feedforward;
    double dropout;
    bool no_dropout;
    nb_transformer_activation activation;
    double layer_norm_eps;
    bool norm_first, final_norm;
} nb_transformer_opts;
/* torch.nn.TransformerEncoderLayer(d_model, nhead, batch_first=True): children self_attn,
   linear1, dropout, linear2, norm1, norm2, dropout1, dropout2; nb_forward runs it unmasked. */
NB_API nb_module *nb_nn_transformer_encoder_layer(int64_t d_model, int nhead, nb_transformer_opts opts);
/* torch.nn.TransformerDecoderLayer(d_model, nhead, batch_first=True): self_attn, multihead_attn
   (over the memory), linear1, dropout, linear2, norm1..3, dropout1..3; run by nb_transformer_forward. */
NB_API nb_module *nb_nn_transformer_decoder_layer(int64_t d_model, int nhead, nb_transformer_opts opts);
/* torch.nn.TransformerEncoder: num_layers encoder layers ("layers.0", ...) that start with the
   same weights, as torch's copies of one layer do, and "norm" with opts.final_norm. */
NB_API nb_module *nb_nn_transformer_encoder(int64_t d_model, int nhead, int num_layers, nb_transformer_opts opts);
/* torch.nn.TransformerDecoder, as nb_nn_transformer_encoder with decoder layers. */
NB_API nb_module *nb_nn_transformer_decoder(int64_t d_model, int nhead, int num_layers, nb_transformer_opts opts);
/* The masks of a transformer forward (NULL: none). An attention mask is bool (true: do not
   attend) or float (added to the scores) over [T, S] or broadcasting to [B, heads, T, S]; a key
   padding mask is bool [B, S] (true: the key is padding); causal hides later positions from
   self-attention (is_causal). memory_* apply to a decoder's attention over its memory. */
typedef struct nb_transformer_masks {
    nb_tensor *mask, *key_padding_mask;
    nb_tensor *memory_mask, *memory_key_padding_mask;
    bool causal;
} nb_transformer_masks;
/* Runs a transformer layer or stack on x [B, T, E] (a decoder's also on memory [B, S, E]). */
NB_API nb_tensor *nb_transformer_forward(nb_module *m, nb_tensor *x, nb_tensor *memory, nb_transformer_masks masks);

/* ---- recurrent layers (src/nn/rnn.c), torch.nn.RNN, LSTM and GRU ---- */
/* The elementwise function of nb_nn_rnn's cell. */
typedef enum nb_rnn_nonlinearity { NB_RNN_TANH = 0, NB_RNN_RELU } nb_rnn_nonlinearity;
/* Options of the recurrent layers; zero fields are torch's defaults (one layer, with biases,
   time first, one direction, no dropout, tanh). */
typedef struct nb_rnn_opts {
    int num_layers;                   /* 0: 1 */
    nb_rnn_nonlinearity nonlinearity; /* nb_nn_rnn only */
    bool no_bias, batch_first, bidirectional;
    double dropout;                   /* on each layer's output but the last, in training mode */
} nb_rnn_opts;
/* Elman RNN h' = act(W_ih x + b_ih + W_hh h + b_hh), torch's parameters weight_ih_l0 [H, in],
   weight_hh_l0 [H, H], bias_ih_l0, bias_hh_l0 (and _reverse, _l1, ...), U(-1/sqrt(H), 1/sqrt(H)). */
NB_API nb_module *nb_nn_rnn(int64_t input_size, int64_t hidden_size, nb_rnn_opts opts);
/* LSTM with torch's gate order i, f, g, o (weight_ih_l0 [4H, in], ...). */
NB_API nb_module *nb_nn_lstm(int64_t input_size, int64_t hidden_size, nb_rnn_opts opts);
/* GRU with torch's gate order r, z, n and n = tanh(W_in x + b_in + r (W_hn h + b_hn)) ([3H, in], ...). */
NB_API nb_module *nb_nn_gru(int64_t input_size, int64_t hidden_size, nb_rnn_opts opts);
/* Runs a recurrent layer on x [T, N, in] ([N, T, in] batch first, or unbatched [T, in]) from h0
   (and an LSTM's c0) [D * num_layers, N, H] ([D * num_layers, H] unbatched; NULL: zeros); returns
   the last layer's outputs [T, N, D * H] ([N, T, D * H] batch first, [T, D * H] unbatched) and,
   where h_n and c_n are not NULL, the final states shaped as h0. c0 and c_n are for an LSTM only.
   nb_forward(m, x) returns the outputs alone. NULL with an error naming the shapes on bad input. */
NB_API nb_tensor *nb_rnn_forward(nb_module *m, nb_tensor *x, nb_tensor *h0, nb_tensor *c0, nb_tensor **h_n,
                                 nb_tensor **c_n);

/* ---- initialisers (in place, recorded nowhere; from the seeded generator; 0 or <0; the fan-based
   ones need at least 2 dimensions) ---- */
/* U(lo, hi) */
NB_API int nb_init_uniform(nb_tensor *t, double lo, double hi);
/* N(mean, std^2) */
NB_API int nb_init_normal(nb_tensor *t, double mean, double std);
/* A constant. */
NB_API int nb_init_constant(nb_tensor *t, double value);
/* Kaiming (He) uniform with leaky-relu slope a, fan_in mode, as torch.nn.init.kaiming_uniform_. */
NB_API int nb_init_kaiming_uniform(nb_tensor *t, double a);
/* Kaiming normal, fan_in mode, relu gain. */
NB_API int nb_init_kaiming_normal(nb_tensor *t);
/* Xavier (Glorot) uniform with gain. */
NB_API int nb_init_xavier_uniform(nb_tensor *t, double gain);
/* Xavier normal with gain. */
NB_API int nb_init_xavier_normal(nb_tensor *t, double gain);

/* ---- models from a config, residual blocks, summaries (src/nn/config.c) ---- */
/* A residual block act(body(x) + shortcut(x)) with act relu or none; shortcut NULL is the
   identity. Takes over body and shortcut (freed on failure); children "body" and "shortcut". */
NB_API nb_module *nb_nn_residual(nb_module *body, nb_module *shortcut, bool relu);
/* A sequential built from a Keras-like JSON config {"input": [C, H, W], "layers": [{"type": ...}]}
   (docs in src/nn/config.c); sample_shape (no batch axis; ndim 0: the config's "input", which it must
   match when both are given) sizes the layers. NULL with an error naming the layer on a bad config. */
NB_API nb_module *nb_nn_from_config(const char *json, nb_shape sample_shape);
/* A malloc'ed Keras-style text (free() it), or NULL: each top-level layer's output shape and parameters,
   then totals, from a forward of one sample of sample_shape (no batch axis) in evaluation mode. */
NB_API char *nb_module_summary(nb_module *m, nb_shape sample_shape);
/* The static JSON config of a built-in model, "mlp", "cnn" or "resnet" (10 classes, 1x28x28 input), or NULL. */
NB_API const char *nb_nn_config_builtin(const char *name);

#ifdef __cplusplus
}
#endif
#endif
