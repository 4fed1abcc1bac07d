/* The ops that the CUDA backend's own kernels run (src/backend/cuda/k_*.cu behind their C entry
   points nb__cuda_<name>), as X(name) entries; the backend's table is built from it. Products
   and convolutions (cuBLAS, cuDNN) are listed by the runtime, not here. */
#ifndef NB_CUDA_KERNEL_LIST_H
#define NB_CUDA_KERNEL_LIST_H

#define NB_CUDA_KERNEL_LIST(X)                                                                     \
    X(full) X(rand) X(randn) X(arange)                                                             \
    X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum)                                       \
    X(eq) X(lt) X(gt) X(ne) X(le) X(ge) X(where)                                                   \
    X(add_scalar) X(mul_scalar) X(pow_scalar)                                                      \
    X(neg) X(exp) X(log) X(sqrt) X(abs) X(sign) X(tanh) X(sigmoid) X(relu) X(relu_backward)        \
    X(gelu) X(erf) X(sin) X(cos) X(log1p) X(expm1) X(reciprocal) X(rsqrt)                          \
    X(floor) X(ceil) X(round) X(trunc) X(clamp)                                                    \
    X(cast) X(copy) X(slice_backward)                                                              \
    X(sum) X(max) X(min) X(argmax) X(argmin) X(softmax) X(log_softmax)                             \
    X(cumsum) X(cumprod) X(cumprod_backward) X(argsort)                                            \
    X(index_select) X(index_add) X(gather) X(scatter_add) X(index) X(index_put) X(cat) X(assign)   \
    X(max_pool2d) X(max_pool2d_indices) X(max_pool2d_backward)                                     \
    X(avg_pool2d) X(avg_pool2d_backward) X(adaptive_avg_pool2d) X(adaptive_avg_pool2d_backward)    \
    X(optim_update)                                                                                \
    X(batch_norm) X(batch_norm_stats) X(batch_norm_reduce) X(batch_norm_backward)                  \
    X(ctc_loss) X(ctc_loss_backward)

#endif
