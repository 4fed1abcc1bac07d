/* Convolutions on cuda through cuDNN (its legacy convolution API): forward with bias, and the
   gradients for the input and the weights, f32 and f64, groups, stride, padding and dilation as
   the cpu's args (src/backend/cpu/conv.c). Only algorithms cuDNN marks deterministic are taken,
   so a run is bit-identical to itself; f32 uses TF32 only when nb_cuda_set_allow_tf32 allows it.
   Autocast's bf16 flag is computed in f32 here (operands not rounded to bf16; docs/cuda.md). */
#include "cuda_impl.h"
#include "libs.h"
#include <limits.h>
#include <string.h>

enum { FWD, BWD_DATA, BWD_FILTER };

typedef struct conv_descs {
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} conv_descs;

static int dnn_fail(const char *fn, const char *what, cudnnStatus_t st) {
    nb__error("%s: cuDNN %s: %s", fn, what, nb__cudnn_fn.cudnnGetErrorString(st));
    return -1;
}

static void descs_free(conv_descs *d) {
    if (d->x) nb__cudnn_fn.cudnnDestroyTensorDescriptor(d->x);
    if (d->y) nb__cudnn_fn.cudnnDestroyTensorDescriptor(d->y);
    if (d->bias) nb__cudnn_fn.cudnnDestroyTensorDescriptor(d->bias);
    if (d->w) nb__cudnn_fn.cudnnDestroyFilterDescriptor(d->w);
    if (d->conv) nb__cudnn_fn.cudnnDestroyConvolutionDescriptor(d->conv);
}

static bool fits_int(const nb_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->dim[d] > INT_MAX) return false;
        n *= s->dim[d];
        if (n > INT_MAX) return false;
    }
    return true;
}

/* The descriptors of x [N, C, H, W], w [O, C/groups, kh, kw], y [N, O, OH, OW]. */
static int make_descs(const char *fn, conv_descs *d, const nb_shape *x, const nb_shape *w, const nb_shape *y,
                      const nb_op_args *a, nb_dtype dt, bool y_bias_only) {
    memset(d, 0, sizeof *d);
    if (!fits_int(x) || !fits_int(w) || !fits_int(y)) {
        nb__error("%s: not supported on cuda yet: a convolution operand of 2^31 elements or more", fn);
        return -1;
    }
    for (int k = 0; k < 7; k++)
        if (a->i[k] > INT_MAX || a->i[k] < 0) {
            nb__error("%s: not supported on cuda yet: a stride, padding, dilation or group count past int", fn);
            return -1;
        }
    cudnnDataType_t t = dt == NB_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cudnnStatus_t st;
#define TRY(call, what) if ((st = (call)) != CUDNN_STATUS_SUCCESS) { descs_free(d); return dnn_fail(fn, what, st); }
    TRY(nb__cudnn_fn.cudnnCreateTensorDescriptor(&d->y), "descriptor");
    TRY(nb__cudnn_fn.cudnnCreateTensorDescriptor(&d->bias), "descriptor");
    TRY(nb__cudnn_fn.cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, t, (int)y->dim[0], (int)y->dim[1], (int)y->dim[2],
                                                (int)y->dim[3]), "output descriptor");
    TRY(nb__cudnn_fn.cudnnSetTensor4dDescriptor(d->bias, CUDNN_TENSOR_NCHW, t, 1, (int)w->dim[0], 1, 1), "bias descriptor");
    if (y_bias_only) return 0; /* an empty sum: only the bias is added */
    TRY(nb__cudnn_fn.cudnnCreateTensorDescriptor(&d->x), "descriptor");
    TRY(nb__cudnn_fn.cudnnCreateFilterDescriptor(&d->w), "descriptor");
    TRY(nb__cudnn_fn.cudnnCreateConvolutionDescriptor(&d->conv), "descriptor");
    TRY(nb__cudnn_fn.cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, t, (int)x->dim[0], (int)x->dim[1], (int)x->dim[2],
                                                (int)x->dim[3]), "input descriptor");
    TRY(nb__cudnn_fn.cudnnSetFilter4dDescriptor(d->w, t, CUDNN_TENSOR_NCHW, (int)w->dim[0], (int)w->dim[1], (int)w->dim[2],
                                                (int)w->dim[3]), "weight descriptor");
    TRY(nb__cudnn_fn.cudnnSetConvolution2dDescriptor(d->conv, (int)a->i[2], (int)a->i[3], (int)a->i[0], (int)a->i[1],
                                                     (int)a->i[4], (int)a->i[5], CUDNN_CROSS_CORRELATION, t),
        "convolution descriptor");
    TRY(nb__cudnn_fn.cudnnSetConvolutionGroupCount(d->conv, (int)a->i[6]), "group count");
#undef TRY
    return 0;
}

/* Whether a math type is allowed: f32 without TF32 takes plain FMA only. */
static bool math_ok(cudnnMathType_t m, nb_dtype dt) {
    if (dt == NB_F64) return true;
    return nb__curt_tf32() ? true : m == CUDNN_FMA_MATH;
}

/* The fastest deterministic algorithm cuDNN's heuristics give for kind (its math type set on
   the descriptor), and its workspace bytes; -1 with an error when there is none. */
static int pick_algo(const char *fn, cudnnHandle_t h, conv_descs *d, int kind, nb_dtype dt, int *algo, size_t *ws) {
    cudnnStatus_t st = nb__cudnn_fn.cudnnSetConvolutionMathType(d->conv, dt == NB_F64 || nb__curt_tf32() ? CUDNN_DEFAULT_MATH
                                                                                                          : CUDNN_FMA_MATH);
    if (st != CUDNN_STATUS_SUCCESS) return dnn_fail(fn, "math type", st);
    enum { MAXA = 16 };
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t pf[MAXA];
    cudnnConvolutionBwdDataAlgoPerf_t pd[MAXA];
    cudnnConvolutionBwdFilterAlgoPerf_t pw[MAXA];
    if (kind == FWD) st = nb__cudnn_fn.cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, MAXA, &got, pf);
    else if (kind == BWD_DATA) st = nb__cudnn_fn.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x, MAXA, &got, pd);
    else st = nb__cudnn_fn.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w, MAXA, &got, pw);
    if (st != CUDNN_STATUS_SUCCESS) return dnn_fail(fn, "algorithm heuristics", st);
    for (int k = 0; k < got && k < MAXA; k++) {
        cudnnStatus_t s = kind == FWD ? pf[k].status : kind == BWD_DATA ? pd[k].status : pw[k].status;
        cudnnDeterminism_t det = kind == FWD ? pf[k].determinism : kind == BWD_DATA ? pd[k].determinism : pw[k].determinism;
        cudnnMathType_t m = kind == FWD ? pf[k].mathType : kind == BWD_DATA ? pd[k].mathType : pw[k].mathType;
        if (s != CUDNN_STATUS_SUCCESS || det != CUDNN_DETERMINISTIC || !math_ok(m, dt)) continue;
        *algo = kind == FWD ? (int)pf[k].algo : kind == BWD_DATA ? (int)pd[k].algo : (int)pw[k].algo;
        *ws = kind == FWD ? pf[k].memory : kind == BWD_DATA ? pd[k].memory : pw[k].memory;
        st = nb__cudnn_fn.cudnnSetConvolutionMathType(d->conv, m);
        return st == CUDNN_STATUS_SUCCESS ? 0 : dnn_fail(fn, "math type", st);
    }
    nb__error("%s: not supported on cuda yet: cuDNN offers no deterministic algorithm for this convolution", fn);
    return -1;
}

static bool has_zero(const nb_shape *s) {
    for (int d = 0; d < s->ndim; d++)
        if (s->dim[d] == 0) return true;
    return false;
}

/* kind's convolution: out from in[0], in[1] (and a bias for the forward). */
static int run_conv(const char *fn, int kind, nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *a) {
    if (out->numel == 0) return 0;
    cudaStream_t stream = nb__curt_stream_of(nb__curt_current());
    if (!stream) return -1;
    const nb_shape *xs = kind == FWD ? &in[0]->shape : kind == BWD_DATA ? &out->shape : &in[1]->shape;
    const nb_shape *ws = kind == FWD ? &in[1]->shape : kind == BWD_DATA ? &in[1]->shape : &out->shape;
    const nb_shape *ys = kind == FWD ? &out->shape : &in[0]->shape;
    size_t es = nb_dtype_size(out->dtype);
    bool dbl = out->dtype == NB_F64;
    const double one_d = 1.0, zero_d = 0.0;
    const float one_f = 1.0f, zero_f = 0.0f;
    const void *one = dbl ? (const void *)&one_d : (const void *)&one_f, *zero = dbl ? (const void *)&zero_d : (const void *)&zero_f;
    nb_tensor *t[3] = { NULL, NULL, NULL }; /* the operands, dense (owned) */
    conv_descs d = { 0 };
    void *work = NULL;
    size_t wbytes = 0;
    int rc = -1, algo = 0;
    cudnnHandle_t h = nb__cudnn(fn);
    if (!h) return -1;
    for (int i = 0; i < nin && i < 3; i++)
        if (!(t[i] = nb__dense_on_device(fn, in[i]))) goto done;
    bool empty_sum = has_zero(xs) || has_zero(ws) || has_zero(ys);
    if (!(empty_sum && kind != FWD) && make_descs(fn, &d, xs, ws, ys, a, out->dtype, empty_sum) < 0) goto done;
    if (empty_sum) { /* nothing to sum: zeros (and the bias) */
        cudaError_t e = cudaMemsetAsync(nb__data(out), 0, (size_t)out->numel * es, stream);
        if (e != cudaSuccess) {
            nb__curt_fail(fn, "cudaMemsetAsync", e);
            goto done;
        }
    } else {
        if (pick_algo(fn, h, &d, kind, out->dtype, &algo, &wbytes) < 0) goto done;
        if (wbytes && !(work = nb__k_scratch_alloc(wbytes))) goto done;
        cudnnStatus_t st;
        if (kind == FWD)
            st = nb__cudnn_fn.cudnnConvolutionForward(h, one, d.x, nb__data(t[0]), d.w, nb__data(t[1]), d.conv,
                                                      (cudnnConvolutionFwdAlgo_t)algo, work, wbytes, zero, d.y, nb__data(out));
        else if (kind == BWD_DATA)
            st = nb__cudnn_fn.cudnnConvolutionBackwardData(h, one, d.w, nb__data(t[1]), d.y, nb__data(t[0]), d.conv,
                                                           (cudnnConvolutionBwdDataAlgo_t)algo, work, wbytes, zero, d.x,
                                                           nb__data(out));
        else
            st = nb__cudnn_fn.cudnnConvolutionBackwardFilter(h, one, d.x, nb__data(t[1]), d.y, nb__data(t[0]), d.conv,
                                                             (cudnnConvolutionBwdFilterAlgo_t)algo, work, wbytes, zero, d.w,
                                                             nb__data(out));
        if (st != CUDNN_STATUS_SUCCESS) {
            dnn_fail(fn, "convolution", st);
            goto done;
        }
    }
    if (kind == FWD && nin == 3) {
        cudnnStatus_t st = nb__cudnn_fn.cudnnAddTensor(h, one, d.bias, nb__data(t[2]), one, d.y, nb__data(out));
        if (st != CUDNN_STATUS_SUCCESS) {
            dnn_fail(fn, "bias", st);
            goto done;
        }
    }
    rc = 0;
done:
    if (work) nb__k_scratch_free(work, wbytes); /* stream order: the next user of the block waits for this call */
    descs_free(&d);
    for (int i = 0; i < 3; i++) nb_release(t[i]);
    return rc;
}

int nb__cuda_conv2d(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    return run_conv("nb_conv2d", FWD, out, in, nin, args);
}

int nb__cuda_conv2d_backward_input(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run_conv("nb_conv2d", BWD_DATA, out, in, 2, args);
}

int nb__cuda_conv2d_backward_weight(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run_conv("nb_conv2d", BWD_FILTER, out, in, 2, args);
}
