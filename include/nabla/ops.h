/* nabla ops: the functional tensor operations. Each returns a new reference (NULL on error). */
#ifndef NABLA_OPS_H
#define NABLA_OPS_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise, broadcasting by NumPy's rules, dtypes promoted as PyTorch does ---- */
/* a + b */
NB_API nb_tensor *nb_add(nb_tensor *a, nb_tensor *b);
/* a - b */
NB_API nb_tensor *nb_sub(nb_tensor *a, nb_tensor *b);
/* a * b */
NB_API nb_tensor *nb_mul(nb_tensor *a, nb_tensor *b);
/* a / b (true division: integer inputs give f32) */
NB_API nb_tensor *nb_div(nb_tensor *a, nb_tensor *b);
/* a raised to the power b */
NB_API nb_tensor *nb_pow(nb_tensor *a, nb_tensor *b);
/* Elementwise larger of a and b. */
NB_API nb_tensor *nb_maximum(nb_tensor *a, nb_tensor *b);
/* Elementwise smaller of a and b. */
NB_API nb_tensor *nb_minimum(nb_tensor *a, nb_tensor *b);
/* a == b, as bool. */
NB_API nb_tensor *nb_eq(nb_tensor *a, nb_tensor *b);
/* a < b, as bool. */
NB_API nb_tensor *nb_lt(nb_tensor *a, nb_tensor *b);
/* a > b, as bool. */
NB_API nb_tensor *nb_gt(nb_tensor *a, nb_tensor *b);
/* a != b, as bool (NaN != NaN is true). */
NB_API nb_tensor *nb_ne(nb_tensor *a, nb_tensor *b);
/* a <= b, as bool. */
NB_API nb_tensor *nb_le(nb_tensor *a, nb_tensor *b);
/* a >= b, as bool. */
NB_API nb_tensor *nb_ge(nb_tensor *a, nb_tensor *b);
/* Elementwise a AND b on the truth of each (nonzero is true), as bool. */
NB_API nb_tensor *nb_logical_and(nb_tensor *a, nb_tensor *b);
/* Elementwise a OR b on the truth of each, as bool. */
NB_API nb_tensor *nb_logical_or(nb_tensor *a, nb_tensor *b);
/* Elementwise a XOR b on the truth of each, as bool. */
NB_API nb_tensor *nb_logical_xor(nb_tensor *a, nb_tensor *b);
/* Elementwise NOT t (t == 0), as bool. */
NB_API nb_tensor *nb_logical_not(nb_tensor *t);
/* Whether each element is NaN, as bool (false for integers). */
NB_API nb_tensor *nb_isnan(nb_tensor *t);
/* Whether each element is +inf or -inf, as bool. */
NB_API nb_tensor *nb_isinf(nb_tensor *t);
/* Whether each element is finite, as bool (true for integers). */
NB_API nb_tensor *nb_isfinite(nb_tensor *t);
/* t with NaN replaced by nan, +inf by posinf and -inf by neginf; an infinite posinf or neginf means
   the dtype's largest finite value of that sign (torch's None). The gradient passes where t is finite. */
NB_API nb_tensor *nb_nan_to_num(nb_tensor *t, double nan, double posinf, double neginf);
/* t with value where mask (bool) is true; the two broadcast together, as torch's out-of-place masked_fill. */
NB_API nb_tensor *nb_masked_fill(nb_tensor *t, nb_tensor *mask, double value);
/* The elements of t where mask is true (both broadcast), as a 1-D tensor in row-major order
   (t[mask] in torch; the mask is read on the host). */
NB_API nb_tensor *nb_masked_select(nb_tensor *t, nb_tensor *mask);
/* cond ? a : b elementwise (cond is bool); all three broadcast. */
NB_API nb_tensor *nb_where(nb_tensor *cond, nb_tensor *a, nb_tensor *b);
/* t + s (an integer t stays integer when s is a whole number; torch would give f32 for 2.0) */
NB_API nb_tensor *nb_add_scalar(nb_tensor *t, double s);
/* t * s (integer t stays integer when s is a whole number) */
NB_API nb_tensor *nb_mul_scalar(nb_tensor *t, double s);
/* t raised to the power s */
NB_API nb_tensor *nb_pow_scalar(nb_tensor *t, double s);

/* ---- unary ---- */
/* -t */
NB_API nb_tensor *nb_neg(nb_tensor *t);
/* e^t */
NB_API nb_tensor *nb_exp(nb_tensor *t);
/* Natural logarithm. */
NB_API nb_tensor *nb_log(nb_tensor *t);
/* Square root. */
NB_API nb_tensor *nb_sqrt(nb_tensor *t);
/* |t| */
NB_API nb_tensor *nb_abs(nb_tensor *t);
/* Hyperbolic tangent. */
NB_API nb_tensor *nb_tanh(nb_tensor *t);
/* 1 / (1 + e^-t) */
NB_API nb_tensor *nb_sigmoid(nb_tensor *t);
/* max(t, 0) */
NB_API nb_tensor *nb_relu(nb_tensor *t);
/* Gaussian error linear unit, exact (erf) form as torch's default. */
NB_API nb_tensor *nb_gelu(nb_tensor *t);
/* Error function. */
NB_API nb_tensor *nb_erf(nb_tensor *t);
/* Sign of t: -1, 0 or 1 (its gradient is zero, as in torch). */
NB_API nb_tensor *nb_sign(nb_tensor *t);
/* sin(t), elementwise (integers compute in f32, as every float function here). */
NB_API nb_tensor *nb_sin(nb_tensor *t);
/* cos(t). */
NB_API nb_tensor *nb_cos(nb_tensor *t);
/* log(1 + t), accurate near 0. */
NB_API nb_tensor *nb_log1p(nb_tensor *t);
/* exp(t) - 1, accurate near 0. */
NB_API nb_tensor *nb_expm1(nb_tensor *t);
/* 1 / t. */
NB_API nb_tensor *nb_reciprocal(nb_tensor *t);
/* 1 / sqrt(t). */
NB_API nb_tensor *nb_rsqrt(nb_tensor *t);
/* The largest whole number <= t (integers unchanged; the gradient is zero, as for ceil, round
   and trunc). */
NB_API nb_tensor *nb_floor(nb_tensor *t);
/* The smallest whole number >= t. */
NB_API nb_tensor *nb_ceil(nb_tensor *t);
/* The nearest whole number, halves to even (as torch.round). */
NB_API nb_tensor *nb_round(nb_tensor *t);
/* t rounded toward zero. */
NB_API nb_tensor *nb_trunc(nb_tensor *t);
/* t limited to [lo, hi]. */
NB_API nb_tensor *nb_clamp(nb_tensor *t, double lo, double hi);

/* ---- linear algebra ---- */
/* Matrix product with torch.matmul semantics: 1-D to N-D, batch dimensions broadcast. */
NB_API nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b);

/* ---- mixed precision ---- */
/* Autocast on the CPU, as torch.autocast("cpu", dtype=torch.bfloat16): while it is on (for the
   calling thread), nb_matmul, nb_linear and the convolutions round their f32 operands to bf16
   and multiply them with f32 accumulation, into f32 results; their gradients are computed the
   same way, whether or not backward runs inside the scope. Every other op (reductions,
   normalisations, softmax, losses, optimizer updates) stays f32, and f64 is never touched.
   NB_BF16 turns it on, NB_F32 off; returns the previous setting, so scopes nest:
   `nb_dtype prev = nb_autocast(NB_BF16); ... nb_autocast(prev);`. Another dtype is an error
   (the setting is kept). The speed comes from oneDNN's bf16 kernels on CPUs with AVX512-BF16
   or AMX; elsewhere the rounding is the same and the products run in f32. */
NB_API nb_dtype nb_autocast(nb_dtype dtype);
/* This thread's autocast dtype: NB_BF16 inside an autocast scope, NB_F32 outside. */
NB_API nb_dtype nb_autocast_dtype(void);

/* ---- einsum ---- */
/* Einstein summation as torch.einsum; 3+ operands contract pairwise, the smallest result first. */
NB_API nb_tensor *nb_einsum(const char *equation, nb_tensor *const *operands, int n);

/* ---- reductions over one axis (negative counts from the end) ---- */
/* Sum over axis (bool and integer inputs sum to i64, as torch). */
NB_API nb_tensor *nb_sum(nb_tensor *t, int axis, bool keepdim);
/* Mean over axis (integer inputs give f32; an empty axis gives NaN). */
NB_API nb_tensor *nb_mean(nb_tensor *t, int axis, bool keepdim);
/* Largest value over axis (gradient to the first largest, as torch.max(dim)). */
NB_API nb_tensor *nb_max(nb_tensor *t, int axis, bool keepdim);
/* Smallest value over axis (gradient to the first smallest). */
NB_API nb_tensor *nb_min(nb_tensor *t, int axis, bool keepdim);
/* Index (i64) of the first largest value over axis. */
NB_API nb_tensor *nb_argmax(nb_tensor *t, int axis, bool keepdim);
/* Index (i64) of the first smallest value over axis. */
NB_API nb_tensor *nb_argmin(nb_tensor *t, int axis, bool keepdim);
/* log(sum(exp(t))) over axis, computed stably. */
NB_API nb_tensor *nb_logsumexp(nb_tensor *t, int axis, bool keepdim);
/* Unbiased variance over axis, as torch.var. */
NB_API nb_tensor *nb_var(nb_tensor *t, int axis, bool keepdim);
/* Sum of every element, as a 0-d tensor (bool and integer inputs sum to i64). */
NB_API nb_tensor *nb_sum_all(nb_tensor *t);
/* Mean of every element, as a 0-d tensor (integer inputs give f32). */
NB_API nb_tensor *nb_mean_all(nb_tensor *t);
/* Sum over the axes where shape has 1 (or is missing) so the result has shape (the reverse of broadcasting). */
NB_API nb_tensor *nb_sum_to(nb_tensor *t, nb_shape shape);
/* Whether any element over axis is nonzero, as bool. */
NB_API nb_tensor *nb_any(nb_tensor *t, int axis, bool keepdim);
/* Whether every element over axis is nonzero, as bool. */
NB_API nb_tensor *nb_all(nb_tensor *t, int axis, bool keepdim);
/* Product over axis (integers give i64; the gradient is exact where t has zeros). */
NB_API nb_tensor *nb_prod(nb_tensor *t, int axis, bool keepdim);
/* Running sum along axis (integers and bools accumulate in i64, floats in double, as torch). */
NB_API nb_tensor *nb_cumsum(nb_tensor *t, int axis);
/* Running product along axis (integers in i64; the gradient is exact where t has zeros). */
NB_API nb_tensor *nb_cumprod(nb_tensor *t, int axis);
/* Largest value over axis, the gradient shared evenly among ties (torch.amax). */
NB_API nb_tensor *nb_amax(nb_tensor *t, int axis, bool keepdim);
/* Smallest value over axis, the gradient shared evenly among ties (torch.amin). */
NB_API nb_tensor *nb_amin(nb_tensor *t, int axis, bool keepdim);
/* Unbiased standard deviation over axis, as torch.std. */
NB_API nb_tensor *nb_std(nb_tensor *t, int axis, bool keepdim);
/* The p-norm over axis of a float tensor: p = 2 (Euclidean), 1, INFINITY (largest |x|), -INFINITY,
   0 (count of nonzeros) or any other p; the gradient is 0 where the norm is 0, as torch. */
NB_API nb_tensor *nb_norm(nb_tensor *t, double p, int axis, bool keepdim);
/* The p-norm of every element as a 0-d tensor (p = 2 is the Frobenius norm, torch.norm(t)). */
NB_API nb_tensor *nb_norm_all(nb_tensor *t, double p);
/* Softmax over axis. */
NB_API nb_tensor *nb_softmax(nb_tensor *t, int axis);
/* Log of the softmax over axis, computed stably. */
NB_API nb_tensor *nb_log_softmax(nb_tensor *t, int axis);

/* ---- shape (views share storage and copy nothing where PyTorch copies nothing) ---- */
/* Same elements in a new shape; a view when the strides allow, else a copy. One -1 axis is inferred. */
NB_API nb_tensor *nb_reshape(nb_tensor *t, nb_shape shape);
/* Same elements in a new shape, always a view (one -1 axis is inferred); an error when the strides do not allow it. */
NB_API nb_tensor *nb_view(nb_tensor *t, nb_shape shape);
/* Swaps two axes (a view). */
NB_API nb_tensor *nb_transpose(nb_tensor *t, int axis0, int axis1);
/* Reorders the axes: result axis i is t's axis perm[i] (a view). */
NB_API nb_tensor *nb_permute(nb_tensor *t, const int *perm);
/* Broadcasts size-1 axes to shape (a view; -1 keeps an axis). */
NB_API nb_tensor *nb_expand(nb_tensor *t, nb_shape shape);
/* Removes axis if its size is 1 (a view). */
NB_API nb_tensor *nb_squeeze(nb_tensor *t, int axis);
/* Inserts a size-1 axis at axis (a view). */
NB_API nb_tensor *nb_unsqueeze(nb_tensor *t, int axis);
/* Merges axes start..end into one (a view where possible). */
NB_API nb_tensor *nb_flatten(nb_tensor *t, int start_axis, int end_axis);
/* Elements start, start+step, ... below end along axis (a view; step > 0; bounds clamp as in Python). */
NB_API nb_tensor *nb_slice(nb_tensor *t, int axis, int64_t start, int64_t end, int64_t step);
/* Joins n tensors along an existing axis. */
NB_API nb_tensor *nb_cat(nb_tensor *const *ts, int n, int axis);
/* Joins n tensors of one shape along a new axis. */
NB_API nb_tensor *nb_stack(nb_tensor *const *ts, int n, int axis);

/* t reversed along each of the n axes (a copy, as torch.flip). */
NB_API nb_tensor *nb_flip(nb_tensor *t, const int *axes, int n);
/* t rotated by shift positions along axis (elements pushed past the end come in at the start). */
NB_API nb_tensor *nb_roll(nb_tensor *t, int64_t shift, int axis);
/* t repeated reps[i] times along axis i, as torch's Tensor.repeat (n >= t's dimensions; extra
   leading reps add axes). */
NB_API nb_tensor *nb_repeat(nb_tensor *t, const int64_t *reps, int n);
/* As nb_repeat, but fewer reps than dimensions repeat the last axes (torch.tile). */
NB_API nb_tensor *nb_tile(nb_tensor *t, const int64_t *reps, int n);
/* Views of t in pieces of size along axis (the last may be smaller), written to out[0..]; returns
   the count (or -1 when more than cap). The pieces belong to the caller's scope. */
NB_API int nb_split(nb_tensor *t, int64_t size, int axis, nb_tensor **out, int cap);
/* t in at most chunks views of ceil(size / chunks) along axis, as torch.chunk; returns the count. */
NB_API int nb_chunk(nb_tensor *t, int chunks, int axis, nb_tensor **out, int cap);
/* How nb_pad fills. */
typedef enum nb_pad_mode { NB_PAD_CONSTANT = 0, NB_PAD_REFLECT, NB_PAD_REPLICATE, NB_PAD_CIRCULAR } nb_pad_mode;
/* t padded as torch.nn.functional.pad: pads holds (before, after) pairs from the last axis
   backwards (npads even, at most two per axis); constant mode fills with value and crops where an
   amount is negative. */
NB_API nb_tensor *nb_pad(nb_tensor *t, const int64_t *pads, int npads, nb_pad_mode mode, double value);
/* The lower triangle of the last two axes: elements with column - row <= k, the rest zero. */
NB_API nb_tensor *nb_tril(nb_tensor *t, int64_t k);
/* The upper triangle of the last two axes: elements with column - row >= k, the rest zero. */
NB_API nb_tensor *nb_triu(nb_tensor *t, int64_t k);
/* The diagonal at offset of the axes axis1 and axis2, as a last axis after the others (torch.diagonal;
   a view when t is contiguous in those axes, else a copy). */
NB_API nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int axis1, int axis2);

/* ---- sorting ---- */
/* Indices (i64) that sort t along axis; stable (ties keep their order), NaN above every number. */
NB_API nb_tensor *nb_argsort(nb_tensor *t, int axis, bool descending);
/* t sorted along axis (stable); the indices too when indices is not NULL (the caller's scope owns them). */
NB_API nb_tensor *nb_sort(nb_tensor *t, int axis, bool descending, nb_tensor **indices);
/* The k largest (or smallest) values along axis, in order, and their indices when indices is not NULL. */
NB_API nb_tensor *nb_topk(nb_tensor *t, int64_t k, int axis, bool largest, nb_tensor **indices);

/* ---- indexing ---- */
/* Entries of t at the indices idx (1-D, i64 or i32) along axis. */
NB_API nb_tensor *nb_index_select(nb_tensor *t, int axis, nb_tensor *idx);
/* out[i][j] = t[i][idx[i][j]] along axis (torch.gather; idx is i64 or i32, with t's number of axes). */
NB_API nb_tensor *nb_gather(nb_tensor *t, int axis, nb_tensor *idx);
/* x[indices[0], ..., indices[n-1]], torch's advanced indexing on x's leading axes: i64 or i32
   index tensors broadcast together to a shape B and the result is B + the axes of x they do not
   cover; a negative index counts from the end; a bool mask covers as many axes as it has and
   picks its true positions (x[mask]; the mask is read on the host). An index out of range is an
   error naming it and the axis size. The gradient is added back at the indices. */
NB_API nb_tensor *nb_index(nb_tensor *x, nb_tensor *const *indices, int n);
/* x with x[indices...] = values (out of place; torch's index_put, x[idx] = v): indices as for
   nb_index; values (converted to x's dtype, as x[idx] = v does) broadcast to the indexed shape.
   A repeated index keeps the last value written, positions taken in row-major order of the
   indices (what torch's cpu does, and nabla guarantees); accumulate adds the values instead,
   summing repeats in that fixed order. Gradients: to x, g with the written positions zeroed (all
   of g when accumulating); to values, g at the indices, summed over the values' broadcast. */
NB_API nb_tensor *nb_index_put(nb_tensor *x, nb_tensor *const *indices, int n, nb_tensor *values, bool accumulate);
/* x with source's first elements (row-major) written where mask is true, in order (torch's
   masked_scatter); x and the bool mask broadcast together; source needs at least as many
   elements as the mask selects (the mask is read on the host). */
NB_API nb_tensor *nb_masked_scatter(nb_tensor *x, nb_tensor *mask, nb_tensor *source);
/* Rows of weight [num, dim] picked by the indices idx (i64 or i32): shape idx.shape + [dim]. */
NB_API nb_tensor *nb_embedding(nb_tensor *weight, nb_tensor *idx);

/* One-hot rows (i64) of class indices idx: shape idx.shape + [num_classes]; num_classes < 0 means
   the largest index + 1. An index outside the classes is an error. */
NB_API nb_tensor *nb_one_hot(nb_tensor *idx, int64_t num_classes);

/* ---- creation beyond core.h ---- */
/* The n x m identity matrix (ones on the main diagonal). */
NB_API nb_tensor *nb_eye(int64_t n, int64_t m, nb_dtype dtype);
/* steps values from start to end inclusive, evenly spaced, with torch.linspace's rounding. */
NB_API nb_tensor *nb_linspace(double start, double end, int64_t steps, nb_dtype dtype);
/* Integers drawn uniformly from [low, high) (i64). */
NB_API nb_tensor *nb_randint(int64_t low, int64_t high, nb_shape shape);
/* A random permutation of 0..n-1 (i64). */
NB_API nb_tensor *nb_randperm(int64_t n);
/* 1 with probability p, else 0, elementwise, in p's dtype (p in [0, 1]). Uniform and normal fills
   in place are nb_init_uniform and nb_init_normal (nabla/nn.h). */
NB_API nb_tensor *nb_bernoulli(nb_tensor *p);
/* n category indices (i64) drawn per row of the weights probs [C] or [R, C], with or without replacement. */
NB_API nb_tensor *nb_multinomial(nb_tensor *probs, int64_t n, bool replacement);

/* ---- conversion ---- */
/* A contiguous tensor with t's values: t itself (a new reference) when already contiguous. */
NB_API nb_tensor *nb_contiguous(nb_tensor *t);
/* t copied to device (differentiable: the gradient goes back to t's device); t itself, a new
   reference, when already there. NULL with an error for a device this build or machine lacks. */
NB_API nb_tensor *nb_to(nb_tensor *t, nb_device device);
/* t converted to dtype (t itself, a new reference, when already that dtype). */
NB_API nb_tensor *nb_cast(nb_tensor *t, nb_dtype dtype);
/* A view of t cut from the autograd graph. */
NB_API nb_tensor *nb_detach(nb_tensor *t);
/* A copy of t with its own storage (gradients flow back to t). */
NB_API nb_tensor *nb_clone(nb_tensor *t);

/* Writes src (broadcast and converted) into dst's elements in place; 0 or <0. Not recorded by
   autograd: a dst that requires grad must be updated with grad disabled (optimizer steps). */
NB_API int nb_assign(nb_tensor *dst, nb_tensor *src);

/* Whether the device's backend runs the primitive op named op (a name of the op table that
   docs/ops.md lists: "add", "matmul", "conv2d", ...) at dtype, as dispatch hands it to the kernel
   (ops that promote, or compute integers in f32, convert first), as ggml's supports_op: false
   for a device that is not available or an op the backend lacks. An unknown op name also
   records an error. */
NB_API bool nb_device_supports(nb_device device, const char *op, nb_dtype dtype);

/* ---- functional nn ---- */
/* x @ w^T + b, as torch.nn.functional.linear; b may be NULL. */
NB_API nb_tensor *nb_linear(nb_tensor *x, nb_tensor *w, nb_tensor *b);

#ifdef __cplusplus
}
#endif
#endif
