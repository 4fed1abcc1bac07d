/* Convolution and the bf16 matrix product through oneDNN (libdnnl), used by the CPU kernels
   when nabla is built with it: the convolution's forward and both gradients in f32 (or with
   bf16 operands under autocast), and autocast's bf16 GEMM; each call on the calling thread
   alone (the kernels run pieces of the work on nabla's thread pool). */
#ifndef NB_DNNL_CONV_H
#define NB_DNNL_CONV_H

#include <stdbool.h>
#include <stdint.h>

/* The geometry of one 2-D convolution, as the CPU kernels hold it; bf16 nonzero: the two
   operands are rounded to bf16 (by oneDNN's reorders) and multiplied with f32 accumulation,
   the result f32. */
typedef struct nb_conv_shape {
    int64_t N, C, H, W, O, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, groups, bf16;
} nb_conv_shape;

/* The three convolution kinds, for nb__dnnl_conv_ready. */
enum { NB_DNNL_FORWARD, NB_DNNL_BACKWARD_DATA, NB_DNNL_BACKWARD_WEIGHTS };

/* Whether oneDNN runs bf16 products fast here: built with oneDNN, a CPU with AVX512-BF16 or
   AMX-BF16, and NABLA_BF16 not set to "emulate" (which tests use to check the other path). */
bool nb__dnnl_bf16_fast(void);
/* Whether oneDNN takes a convolution of this kind and shape (building and caching its
   primitive on the calling thread); a bf16 one only with nb__dnnl_bf16_fast and a kernel that
   is not oneDNN's slow reference code. */
bool nb__dnnl_conv_ready(int kind, const nb_conv_shape *s, bool bias);
/* C[M, N] = op(A) op(B), A and B bf16 with leading dimensions lda and ldb (ta, tb: stored
   transposed, as [K, M] and [N, K] row-major), C f32 row-major with ldc, on the calling thread
   with f32 accumulation: 1 when done, 0 when oneDNN declined (no bf16 kernel here), -1 on error
   (recorded). */
int nb__dnnl_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
                       int64_t ldb, float *C, int64_t ldc);

/* A forward's weights that never change (a loaded model's initializers): their storage's
   constant_id (0: not constant) and version. Their reordered copy is kept per thread under
   these and the weights' address, so later calls skip the reorder. */
typedef struct nb_conv_const {
    uint64_t id;
    unsigned version;
} nb_conv_const;

/* y = conv(x, w) + b (b may be NULL), all dense f32 in NCHW / OIHW, on the calling thread with
   an OpenMP team of `threads` (1 for a piece the pool runs beside others); wc (may be NULL)
   says whether w is constant. 1 when done, 0 when oneDNN is not available or declines the
   shape (the caller falls back), -1 on error. */
int nb__dnnl_conv_forward(const nb_conv_shape *s, const float *x, const float *w, const float *b, float *y, int threads,
                          const nb_conv_const *wc);
/* dx = the gradient of conv with respect to its input, from dy and w, on the calling thread.
   Same return codes. */
int nb__dnnl_conv_backward_data(const nb_conv_shape *s, const float *dy, const float *w, float *dx);

/* dw = the weight gradient over this call's samples, computed by oneDNN on the calling thread
   alone (its own cache and stream), so that callers can split the batch into pieces fixed by
   shape and sum them in order: deterministic whatever the thread count. Same return codes. */
int nb__dnnl_conv_backward_weights(const nb_conv_shape *s, const float *x, const float *dy, float *dw);

#endif
