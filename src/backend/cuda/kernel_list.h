/* The ops that the CUDA backend's own kernels run (src/backend/cuda/k_*.cu behind their C entry
   points nb__cuda_<name>), as X(name) entries; the backend's table is built from it. Products
   and convolutions (cuBLAS, cuDNN) are listed by the runtime, not here. */
#ifndef NB_CUDA_KERNEL_LIST_H
#define NB_CUDA_KERNEL_LIST_H

#define NB_CUDA_KERNEL_LIST(X)

#endif
