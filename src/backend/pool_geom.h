/* The geometry of a 2-D pooling op, shared by the cpu's pooling and the CUDA backend's device
   code (plain C with no nabla header, so nvcc reads it too). */
#ifndef NB_POOL_GEOM_H
#define NB_POOL_GEOM_H

#include <stdbool.h>
#include <stdint.h>

/* Pooling over [N, C, H, W] to [N, C, OH, OW]: per axis the kernel, stride, padding and dilation
   (1 for the adaptive average, whose windows are floor(i*H/OH) .. ceil((i+1)*H/OH)), and
   whether padding is left out of an average's divisor. */
typedef struct nb_pool_geom {
    int64_t N, C, H, W, OH, OW;
    int64_t k[2], s[2], p[2], d[2]; /* kernel, stride, padding, dilation */
    bool adaptive, exclude_padding;
    int64_t xs[4]; /* strides of the input being read (x or g), where a kernel keeps them here */
} nb_pool_geom;

#endif
