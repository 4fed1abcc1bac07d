/* Convolution through oneDNN (libdnnl), used by the CPU conv kernels for f32 when nabla is
   built with it: the forward and both gradients, each call on the calling thread alone (the
   kernels run pieces of the batch on nabla's thread pool). */
#ifndef NB_DNNL_CONV_H
#define NB_DNNL_CONV_H

#include <stdbool.h>
#include <stdint.h>

/* The geometry of one 2-D convolution, as the CPU kernels hold it. */
typedef struct nb_conv_shape {
    int64_t N, C, H, W, O, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, groups;
} nb_conv_shape;

/* y = conv(x, w) + b (b may be NULL), all dense f32 in NCHW / OIHW, on the calling thread. 1
   when done, 0 when oneDNN is not available or declines the shape (the caller falls back), -1
   on error. */
int nb__dnnl_conv_forward(const nb_conv_shape *s, const float *x, const float *w, const float *b, float *y);
/* dx = the gradient of conv with respect to its input, from dy and w, on the calling thread.
   Same return codes. */
int nb__dnnl_conv_backward_data(const nb_conv_shape *s, const float *dy, const float *w, float *dx);

/* dw = the weight gradient over this call's samples, computed by oneDNN on the calling thread
   alone (its own cache and stream), so that callers can split the batch into pieces fixed by
   shape and sum them in order: deterministic whatever the thread count. Same return codes. */
int nb__dnnl_conv_backward_weights(const nb_conv_shape *s, const float *x, const float *dy, float *dw);

#endif
