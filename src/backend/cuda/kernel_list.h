/* The ops whose CUDA kernels are written by hand (src/backend/cuda/k_*.cu behind their C entry
   points nb__cuda_<name>), as X(name) entries. The elementwise ops are not listed: every op of
   ops.def with a fuse kind other than NONE has its entry by that column (ops_elementwise.c).
   Products and convolutions (cuBLAS, cuDNN) are listed by the runtime (backend.c); the ops no
   cuda kernel runs are named, with the reason, in tests/test_backend_ops.c (cuda_lacks). */
#ifndef NB_CUDA_KERNEL_LIST_H
#define NB_CUDA_KERNEL_LIST_H

#define NB_CUDA_KERNEL_LIST(X)                                                                     \
    X(full) X(rand) X(randn) X(arange) X(slice_backward)                                           \
    X(sum) X(max) X(min) X(argmax) X(argmin) X(softmax) X(log_softmax)                             \
    X(cumsum) X(cumprod) X(cumprod_backward) X(argsort)                                            \
    X(index_select) X(index_add) X(gather) X(scatter_add) X(index) X(index_put) X(cat) X(assign)   \
    X(max_pool2d) X(max_pool2d_indices) X(max_pool2d_backward)                                     \
    X(avg_pool2d) X(avg_pool2d_backward) X(adaptive_avg_pool2d) X(adaptive_avg_pool2d_backward)    \
    X(optim_update)                                                                                \
    X(batch_norm) X(batch_norm_stats) X(batch_norm_reduce) X(batch_norm_backward)                  \
    X(ctc_loss) X(ctc_loss_backward)

#endif
