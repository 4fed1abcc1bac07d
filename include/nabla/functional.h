/* nabla functional nn ops: convolution, pooling, normalisation, dropout, attention, activations
   and the losses, as functions of tensors (the layers of nabla/nn.h hold their parameters). */
#ifndef NABLA_FUNCTIONAL_H
#define NABLA_FUNCTIONAL_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of the pooling layers; zero fields are torch's defaults. stride 0 is the kernel size,
   dilation 0 is 1 (max pooling only); the *_hw fields give (height, width) apart and win over the
   square value where non-zero (a kernel_hw lets the kernel argument be 0). ceil_mode rounds the
   output size up, a last window still starting inside the input or its left padding;
   exclude_padding leaves padded places out of an average's divisor (count_include_pad=False). */
typedef struct nb_pool_opts {
    int stride, padding, dilation;
    int kernel_hw[2], stride_hw[2], padding_hw[2], dilation_hw[2];
    bool ceil_mode, exclude_padding;
} nb_pool_opts;
/* ---- functional forms ---- */
/* Options of nb_scaled_dot_product_attention: an additive mask (or NULL), causal masking,
   dropout probability on the weights (applied when training is true), scale (0: 1/sqrt(d)).
   With Tq != Tk the causal mask is aligned at the end: query i sees keys 0..i + Tk - Tq (the
   last queries of a sequence whose earlier keys are cached); PyTorch 2's is_causal aligns at
   the start instead. */
typedef struct nb_attn_opts {
    nb_tensor *mask;
    bool causal, training;
    double dropout, scale;
} nb_attn_opts;
/* softmax(q k^T * scale + mask) v over q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv]. */
NB_API nb_tensor *nb_scaled_dot_product_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_attn_opts opts);
/* Options of nb_conv2d: per-axis stride, padding and dilation (zero: 1, 0, 1), groups (0: 1). */
typedef struct nb_conv_opts {
    int stride[2], padding[2], dilation[2];
    int groups;
} nb_conv_opts;
/* 2-D convolution of x [N, C, H, W] (or unbatched [C, H, W]) with w [O, C/groups, kh, kw] and bias b [O] (or NULL). */
NB_API nb_tensor *nb_conv2d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_opts opts);
/* Options of nb_conv3d, per axis (depth, height, width); zero: stride 1, padding 0, dilation 1,
   groups 1. */
typedef struct nb_conv3d_opts {
    int stride[3], padding[3], dilation[3];
    int groups;
} nb_conv3d_opts;
/* 3-D convolution (torch.nn.functional.conv3d) of x [N, C, D, H, W] (or [C, D, H, W]) with w [O,
   C/groups, kd, kh, kw] and bias b [O] (or NULL): one 2-D convolution per depth tap over every
   output depth at once, summed (differentiable through them). */
NB_API nb_tensor *nb_conv3d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv3d_opts opts);
/* 1-D convolution (torch.nn.functional.conv1d) of x [N, C, L] (or [C, L]) with w [O, C/groups, k]
   and bias b [O] (or NULL); element 0 of each field of opts applies. */
NB_API nb_tensor *nb_conv1d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_opts opts);
/* Options of the transposed convolutions, per axis (zero: stride 1, padding 0, output_padding 0,
   dilation 1; groups 0: 1); the 1-D form reads element 0 of each. */
typedef struct nb_conv_transpose_opts {
    int stride[2], padding[2], output_padding[2], dilation[2];
    int groups;
} nb_conv_transpose_opts;
/* Transposed 2-D convolution (torch.nn.functional.conv_transpose2d) of x [N, C, H, W] (or
   [C, H, W]) with w [C, out/groups, kh, kw] and bias b [out] (or NULL). */
NB_API nb_tensor *nb_conv_transpose2d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_transpose_opts opts);
/* Transposed 1-D convolution of x [N, C, L] (or [C, L]) with w [C, out/groups, k] and bias b [out] (or NULL). */
NB_API nb_tensor *nb_conv_transpose1d(nb_tensor *x, nb_tensor *w, nb_tensor *b, nb_conv_transpose_opts opts);
/* How nb_interpolate resizes: torch's "nearest" (floor of the scaled index), "linear" (3-D input)
   and "bilinear" (4-D input). */
typedef enum nb_interp_mode { NB_INTERP_NEAREST = 0, NB_INTERP_LINEAR, NB_INTERP_BILINEAR } nb_interp_mode;
/* Options of nb_interpolate: the output size per spatial axis, or else a scale factor (output
   floor(in * scale), the index scaled by 1 / scale as torch does); align_corners for the linear modes. */
typedef struct nb_interp_opts {
    int64_t size[2];
    double scale_factor[2];
    nb_interp_mode mode;
    bool align_corners;
} nb_interp_opts;
/* x [N, C, L] or [N, C, H, W] resized as torch.nn.functional.interpolate (differentiable in x). */
NB_API nb_tensor *nb_interpolate(nb_tensor *x, nb_interp_opts opts);
/* Max pooling of [N, C, H, W] (or [C, H, W]) over kernel x kernel (or opts.kernel_hw) windows. */
NB_API nb_tensor *nb_max_pool2d(nb_tensor *x, int kernel, nb_pool_opts opts);
/* Average pooling of [N, C, H, W] (or [C, H, W]), padding counted as torch's default unless
   opts.exclude_padding. */
NB_API nb_tensor *nb_avg_pool2d(nb_tensor *x, int kernel, nb_pool_opts opts);
/* Adaptive average pooling of [N, C, H, W] to [N, C, out_h, out_w] (or [C, H, W] to [C, out_h, out_w]). */
NB_API nb_tensor *nb_adaptive_avg_pool2d(nb_tensor *x, int out_h, int out_w);
/* Batch norm of x [N, C, ...]: batch statistics when training (updating the running ones in
   place, momentum 0 means 0.1), running statistics otherwise; eps <= 0 means 1e-5; w and b may
   be NULL (the running statistics too when training). */
NB_API nb_tensor *nb_batch_norm(nb_tensor *x, nb_tensor *running_mean, nb_tensor *running_var, nb_tensor *w,
                                nb_tensor *b, bool training, double momentum, double eps);
/* x * sigmoid(x) */
NB_API nb_tensor *nb_silu(nb_tensor *x);
/* The activations below take floating-point x and give torch's values and gradients, also at
   their kinks; a zero scalar argument means torch's default, as in an options struct. */
/* x where x > 0, negative_slope * x elsewhere (0: torch's 0.01; the gradient at 0 is the slope). */
NB_API nb_tensor *nb_leaky_relu(nb_tensor *x, double negative_slope);
/* x where x > 0, alpha (e^x - 1) elsewhere (alpha 0: 1.0; the gradient at 0 is alpha). */
NB_API nb_tensor *nb_elu(nb_tensor *x, double alpha);
/* x where x > 0, weight * x elsewhere; weight [1], or [C] for the channel axis 1 of x [N, C, ...]. */
NB_API nb_tensor *nb_prelu(nb_tensor *x, nb_tensor *weight);
/* log(1 + e^(beta x)) / beta, and x itself where beta x > threshold (beta 0: 1; threshold 0: 20). */
NB_API nb_tensor *nb_softplus(nb_tensor *x, double beta, double threshold);
/* x * tanh(softplus(x)). */
NB_API nb_tensor *nb_mish(nb_tensor *x);
/* x * min(max(x + 3, 0), 6) / 6; the gradient is x/3 + 1/2 on [-3, 3], both ends included, as torch. */
NB_API nb_tensor *nb_hardswish(nb_tensor *x);
/* min(max(x + 3, 0), 6) / 6; the gradient is 1/6 strictly inside (-3, 3), 0 at both ends, as torch. */
NB_API nb_tensor *nb_hardsigmoid(nb_tensor *x);
/* Dropout with probability p (in [0, 1]) when training is true; x itself (a new reference) otherwise. */
NB_API nb_tensor *nb_dropout(nb_tensor *x, double p, bool training);
/* Layer norm over the last axis; w and b may be NULL. */
NB_API nb_tensor *nb_layer_norm(nb_tensor *x, nb_tensor *w, nb_tensor *b, double eps);
/* RMS norm over the last axis, x / sqrt(mean(x^2) + eps) * w (torch.nn.functional.rms_norm;
   Llama's RMSNorm); w [last axis] may be NULL; eps <= 0 means the dtype's machine epsilon, as torch. */
NB_API nb_tensor *nb_rms_norm(nb_tensor *x, nb_tensor *w, double eps);
/* Options of nb_rotary_embedding; zero fields take the defaults. */
typedef struct nb_rope_opts {
    double theta; /* the base of the frequencies (0: 10000) */
    double scale; /* linear position scaling: positions are divided by it (0: 1) */
} nb_rope_opts;
/* Rotary position embeddings of x [..., T, D] (D even) at integer positions [T], or [B, T] for
   x [B, ..., T, D]: x cos + rotate_half(x) sin with angle p theta^(-2j/D) for pair j = (j, j + D/2)
   (the half-split layout of Hugging Face's Llama, GPT-NeoX and RoFormer). */
NB_API nb_tensor *nb_rotary_embedding(nb_tensor *x, nb_tensor *positions, nb_rope_opts opts);

/* Group norm of x [N, C, ...] over groups of C / groups channels (torch.nn.functional.group_norm);
   w and b [C] may be NULL; eps <= 0 means 1e-5. */
NB_API nb_tensor *nb_group_norm(nb_tensor *x, int64_t groups, nb_tensor *w, nb_tensor *b, double eps);
/* Instance norm of x [N, C, L...] over each sample's channel, without running statistics (torch's
   instance_norm as InstanceNorm*d uses it by default); w and b [C] may be NULL; eps <= 0 means 1e-5. */
NB_API nb_tensor *nb_instance_norm(nb_tensor *x, nb_tensor *w, nb_tensor *b, double eps);

/* ---- losses ---- */
/* How a loss reduces its per-element terms. BATCHMEAN (the sum divided by the size of the first
   axis, torch's "batchmean") is nb_kl_div_loss's only; the other losses reject it. */
typedef enum nb_reduction { NB_REDUCTION_MEAN = 0, NB_REDUCTION_SUM, NB_REDUCTION_NONE, NB_REDUCTION_BATCHMEAN } nb_reduction;

/* Options of nb_cross_entropy (zero fields are PyTorch's defaults). */
typedef struct nb_ce_opts {
    nb_reduction reduction;
    double label_smoothing;  /* 0..1 */
    int64_t ignore_index;    /* targets equal to it are skipped, only when use_ignore_index is set
                                (zero does not mean torch's -100) */
    bool use_ignore_index;
    nb_tensor *weight;       /* per-class weights [classes], or NULL */
} nb_ce_opts;

/* Cross entropy of logits [N, C] (or [N, C, d...]) against i64 or i32 class indices [N] ([N, d...]);
   an index outside 0..C-1 is an error. */
NB_API nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target, nb_ce_opts opts);
/* Negative log likelihood of log-probabilities [N, C] (or [N, C, d...]) against class indices, as
   nb_cross_entropy; label_smoothing must be 0. */
NB_API nb_tensor *nb_nll_loss(nb_tensor *log_probs, nb_tensor *target, nb_ce_opts opts);
/* Mean squared error (input and target of one shape: no broadcasting). */
NB_API nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);
/* Mean absolute error (input and target of one shape). */
NB_API nb_tensor *nb_l1_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);
/* Huber-style smooth L1 with threshold beta (0 means torch's default 1.0; negative is an error). */
NB_API nb_tensor *nb_smooth_l1_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction, double beta);
/* Huber loss of d = input - target: d^2 / 2 where |d| < delta, delta (|d| - delta / 2) elsewhere
   (delta 0 means torch's 1.0; negative is an error). */
NB_API nb_tensor *nb_huber_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction, double delta);
/* Binary cross entropy on logits (target of the logits' shape), computed stably; pos_weight may be NULL. */
NB_API nb_tensor *nb_bce_with_logits(nb_tensor *logits, nb_tensor *target, nb_reduction reduction, nb_tensor *pos_weight);
/* Binary cross entropy of probabilities p in [0, 1] (a value outside is an error, as torch's),
   -weight (y log p + (1 - y) log(1 - p)), each log clamped at -100 as torch's; target of p's
   shape; weight (or NULL) broadcasts to it. */
NB_API nb_tensor *nb_bce_loss(nb_tensor *probs, nb_tensor *target, nb_reduction reduction, nb_tensor *weight);
/* KL divergence as torch's kl_div: target (log target - input), input holding log-probabilities,
   target probabilities (0 log 0 = 0) or, with log_target, log-probabilities; of one shape.
   Reduction NB_REDUCTION_BATCHMEAN gives the true KL divergence per sample; MEAN (torch's
   default) divides by every element. */
NB_API nb_tensor *nb_kl_div_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction, bool log_target);
/* max(0, -y (x1 - x2) + margin) for y of 1 or -1 (x1 should rank higher where y is 1); x1, x2
   and y of one shape. */
NB_API nb_tensor *nb_margin_ranking_loss(nb_tensor *x1, nb_tensor *x2, nb_tensor *y, double margin, nb_reduction reduction);
/* Options of nb_triplet_margin_loss (zero fields are torch's defaults: margin 1, p 2, eps 1e-6,
   no swap, mean). p may be INFINITY. */
typedef struct nb_triplet_opts {
    double margin, p, eps;
    bool swap; /* the negative's distance is the smaller of d(anchor, negative) and d(positive, negative) */
    nb_reduction reduction;
} nb_triplet_opts;
/* max(0, margin + d(anchor, positive) - d(anchor, negative)), d the p-norm over the last axis of
   a - b + eps (torch's pairwise_distance); inputs of one shape, [N, D] or [D]. */
NB_API nb_tensor *nb_triplet_margin_loss(nb_tensor *anchor, nb_tensor *positive, nb_tensor *negative, nb_triplet_opts opts);
/* 1 - cos(x1, x2) where y is 1, max(0, cos(x1, x2) - margin) where y is -1 (0 elsewhere), with
   cos over D of inputs [N, D] and y [N] (or inputs [D] and a 0-d y), eps 1e-12 as torch. */
NB_API nb_tensor *nb_cosine_embedding_loss(nb_tensor *x1, nb_tensor *x2, nb_tensor *y, double margin, nb_reduction reduction);
/* Options of nb_ctc_loss (zero fields are torch's defaults: blank 0, mean, infinities kept). */
typedef struct nb_ctc_opts {
    int64_t blank;          /* the class index of the blank, in [0, C) */
    nb_reduction reduction; /* MEAN divides each sequence's loss by its target length (at least 1)
                               before averaging over the batch, as torch */
    bool zero_infinity;     /* a sequence with no possible alignment (too short for its target) gets
                               loss 0 and gradient 0 instead of an infinite loss */
} nb_ctc_opts;
/* Connectionist temporal classification loss (torch's ctc_loss), for unsegmented sequence labelling
   (speech, handwriting): log_probs [T, N, C] (unbatched [T, C]), f32 or f64; targets padded [N, S]
   or all N concatenated (1-D; unbatched [S]), labels in [0, C) other than the blank, i64 or i32;
   input_lengths and target_lengths [N] (unbatched 0-d or [1]), i64 or i32. The gradient is d loss /
   d log_probs itself: torch's adds exp(log_probs), which a log_softmax in front cancels, so the
   two agree on the gradient of the logits. */
NB_API nb_tensor *nb_ctc_loss(nb_tensor *log_probs, nb_tensor *targets, nb_tensor *input_lengths, nb_tensor *target_lengths,
                              nb_ctc_opts opts);

#ifdef __cplusplus
}
#endif
#endif
