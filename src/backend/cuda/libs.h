/* The entry points of cuBLAS and cuDNN that the backend calls, as pointers typed from the
   libraries' own headers (filled by libs.c's dlopen at first use). */
#ifndef NB_CUDA_LIBS_H
#define NB_CUDA_LIBS_H

#include <cublas_v2.h>
#include <cudnn.h>

#define NB_FN(name) __typeof__(name) *name
typedef struct nb_cublas_fns {
    NB_FN(cublasCreate_v2);
    NB_FN(cublasSetStream_v2);
    NB_FN(cublasSetMathMode);
    NB_FN(cublasGetStatusString);
    NB_FN(cublasSgemmStridedBatched);
    NB_FN(cublasDgemmStridedBatched);
    NB_FN(cublasGemmStridedBatchedEx);
} nb_cublas_fns;

typedef struct nb_cudnn_fns {
    NB_FN(cudnnCreate);
    NB_FN(cudnnSetStream);
    NB_FN(cudnnGetErrorString);
    NB_FN(cudnnCreateTensorDescriptor);
    NB_FN(cudnnDestroyTensorDescriptor);
    NB_FN(cudnnSetTensor4dDescriptor);
    NB_FN(cudnnCreateFilterDescriptor);
    NB_FN(cudnnDestroyFilterDescriptor);
    NB_FN(cudnnSetFilter4dDescriptor);
    NB_FN(cudnnCreateConvolutionDescriptor);
    NB_FN(cudnnDestroyConvolutionDescriptor);
    NB_FN(cudnnSetConvolution2dDescriptor);
    NB_FN(cudnnSetConvolutionGroupCount);
    NB_FN(cudnnSetConvolutionMathType);
    NB_FN(cudnnGetConvolutionForwardAlgorithm_v7);
    NB_FN(cudnnGetConvolutionBackwardDataAlgorithm_v7);
    NB_FN(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
    NB_FN(cudnnGetConvolutionForwardAlgorithmMaxCount);
    NB_FN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount);
    NB_FN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount);
    NB_FN(cudnnConvolutionForward);
    NB_FN(cudnnConvolutionBackwardData);
    NB_FN(cudnnConvolutionBackwardFilter);
    NB_FN(cudnnAddTensor);
} nb_cudnn_fns;
#undef NB_FN

extern nb_cublas_fns nb__cublas_fn;
extern nb_cudnn_fns nb__cudnn_fn;

#endif
