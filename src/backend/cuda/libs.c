/* cuBLAS and cuDNN, opened with dlopen at their first use (linked in, their libraries would cost
   every program ~0.1 s and ~200 MB at start, GPU or not): their entry points as function
   pointers typed from the headers' own prototypes, one handle of each per device on the
   device's stream, and the TF32 switch. */
#include "cuda_impl.h"
#include "nabla/cuda.h"
#include "libs.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define MAX_DEVICES 64

nb_cublas_fns nb__cublas_fn;
nb_cudnn_fns nb__cudnn_fn;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int cublas_state, cudnn_state; /* 0 not tried, 1 loaded, -1 failed (the message kept) */
static char cublas_err[512], cudnn_err[512];
static cublasHandle_t cublas_h[MAX_DEVICES];
static cudnnHandle_t cudnn_h[MAX_DEVICES];
static atomic_bool allow_tf32;
static int cublas_math[MAX_DEVICES]; /* the math mode set on each handle: 1 + allow_tf32 */

#define LOAD(table, lib, name)                                                                            \
    do {                                                                                                  \
        if (!(table.name = (__typeof__(table.name))dlsym(lib, #name))) {                                 \
            snprintf(err, errlen, "cuda: %s lacks %s", soname, #name);                                   \
            return -1;                                                                                    \
        }                                                                                                 \
    } while (0)

static void *open_lib(const char *soname, char *err, size_t errlen) {
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) snprintf(err, errlen, "cuda: cannot load %s: %s", soname, dlerror());
    return h;
}

static int load_cublas(char *err, size_t errlen) {
    const char *soname = "libcublas.so.13";
    void *h = open_lib(soname, err, errlen);
    if (!h) return -1;
    LOAD(nb__cublas_fn, h, cublasCreate_v2);
    LOAD(nb__cublas_fn, h, cublasSetStream_v2);
    LOAD(nb__cublas_fn, h, cublasSetMathMode);
    LOAD(nb__cublas_fn, h, cublasGetStatusString);
    LOAD(nb__cublas_fn, h, cublasSgemmStridedBatched);
    LOAD(nb__cublas_fn, h, cublasDgemmStridedBatched);
    LOAD(nb__cublas_fn, h, cublasGemmStridedBatchedEx);
    return 0;
}

static int load_cudnn(char *err, size_t errlen) {
    const char *soname = "libcudnn.so.9";
    void *h = open_lib(soname, err, errlen);
    if (!h) return -1;
    LOAD(nb__cudnn_fn, h, cudnnCreate);
    LOAD(nb__cudnn_fn, h, cudnnSetStream);
    LOAD(nb__cudnn_fn, h, cudnnGetErrorString);
    LOAD(nb__cudnn_fn, h, cudnnCreateTensorDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnDestroyTensorDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnSetTensor4dDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnCreateFilterDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnDestroyFilterDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnSetFilter4dDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnCreateConvolutionDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnDestroyConvolutionDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnSetConvolution2dDescriptor);
    LOAD(nb__cudnn_fn, h, cudnnSetConvolutionGroupCount);
    LOAD(nb__cudnn_fn, h, cudnnSetConvolutionMathType);
    LOAD(nb__cudnn_fn, h, cudnnGetConvolutionForwardAlgorithm_v7);
    LOAD(nb__cudnn_fn, h, cudnnGetConvolutionBackwardDataAlgorithm_v7);
    LOAD(nb__cudnn_fn, h, cudnnGetConvolutionBackwardFilterAlgorithm_v7);
    LOAD(nb__cudnn_fn, h, cudnnGetConvolutionForwardAlgorithmMaxCount);
    LOAD(nb__cudnn_fn, h, cudnnGetConvolutionBackwardDataAlgorithmMaxCount);
    LOAD(nb__cudnn_fn, h, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount);
    LOAD(nb__cudnn_fn, h, cudnnConvolutionForward);
    LOAD(nb__cudnn_fn, h, cudnnConvolutionBackwardData);
    LOAD(nb__cudnn_fn, h, cudnnConvolutionBackwardFilter);
    LOAD(nb__cudnn_fn, h, cudnnAddTensor);
    return 0;
}

/* Loads a library once per process; its failure is kept and reported at every later ask. */
static bool loaded(int *state, char *err, size_t errlen, int (*load)(char *, size_t), const char *fn) {
    pthread_mutex_lock(&mu);
    if (*state == 0) *state = load(err, errlen) == 0 ? 1 : -1;
    bool ok = *state == 1;
    pthread_mutex_unlock(&mu);
    if (!ok) nb__error("%s: %s", fn, err);
    return ok;
}

void *nb__cublas(const char *fn) {
    int dev = nb__curt_current();
    if (dev < 0 || dev >= MAX_DEVICES) {
        nb__error("%s: no current cuda device", fn);
        return NULL;
    }
    if (!loaded(&cublas_state, cublas_err, sizeof cublas_err, load_cublas, fn)) return NULL;
    pthread_mutex_lock(&mu);
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (!cublas_h[dev]) {
        st = nb__cublas_fn.cublasCreate_v2(&cublas_h[dev]);
        if (st == CUBLAS_STATUS_SUCCESS) st = nb__cublas_fn.cublasSetStream_v2(cublas_h[dev], nb__curt_stream_of(dev));
        if (st != CUBLAS_STATUS_SUCCESS) cublas_h[dev] = NULL;
    }
    int want = 1 + atomic_load(&allow_tf32);
    if (st == CUBLAS_STATUS_SUCCESS && cublas_math[dev] != want) {
        /* TF32 off: every f32 product in full f32 (CUBLAS_PEDANTIC_MATH would also forbid
           reduced-precision reductions, which f32 GEMMs do not use) */
        st = nb__cublas_fn.cublasSetMathMode(cublas_h[dev], want == 2 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
        if (st == CUBLAS_STATUS_SUCCESS) cublas_math[dev] = want;
    }
    cublasHandle_t h = cublas_h[dev];
    pthread_mutex_unlock(&mu);
    if (st != CUBLAS_STATUS_SUCCESS) {
        nb__error("%s: cuda:%d: cuBLAS setup: %s", fn, dev, nb__cublas_fn.cublasGetStatusString(st));
        return NULL;
    }
    return h;
}

void *nb__cudnn(const char *fn) {
    int dev = nb__curt_current();
    if (dev < 0 || dev >= MAX_DEVICES) {
        nb__error("%s: no current cuda device", fn);
        return NULL;
    }
    if (!loaded(&cudnn_state, cudnn_err, sizeof cudnn_err, load_cudnn, fn)) return NULL;
    pthread_mutex_lock(&mu);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (!cudnn_h[dev]) {
        st = nb__cudnn_fn.cudnnCreate(&cudnn_h[dev]);
        if (st == CUDNN_STATUS_SUCCESS) st = nb__cudnn_fn.cudnnSetStream(cudnn_h[dev], nb__curt_stream_of(dev));
        if (st != CUDNN_STATUS_SUCCESS) cudnn_h[dev] = NULL;
    }
    cudnnHandle_t h = cudnn_h[dev];
    pthread_mutex_unlock(&mu);
    if (st != CUDNN_STATUS_SUCCESS) {
        nb__error("%s: cuda:%d: cuDNN setup: %s", fn, dev, nb__cudnn_fn.cudnnGetErrorString(st));
        return NULL;
    }
    return h;
}

bool nb__curt_tf32(void) { return atomic_load(&allow_tf32); }

void nb_cuda_set_allow_tf32(bool allow) { atomic_store(&allow_tf32, allow); }

bool nb_cuda_allow_tf32(void) { return atomic_load(&allow_tf32); }
