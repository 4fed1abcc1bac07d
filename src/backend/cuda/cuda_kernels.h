/* The CUDA backend's contract between its C side (the kernel entry points dispatch calls, which
   read nabla's tensors) and its .cu files (the device code, which knows nothing of nabla's core
   structs: core_impl.h uses C11 atomics that nvcc's C++ cannot read). Plain C, readable by both. */
#ifndef NB_CUDA_KERNELS_H
#define NB_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "../op_ids.h"
#include "../pool_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NBC_MAX_DIMS 8 /* nabla/core.h's NB_MAX_DIMS */

/* A tensor as device code sees it: its first element on the device, its dtype (nabla/core.h's
   nb_dtype value), and its sizes and strides in elements (any strides: views, broadcasts with
   stride 0, negative never). */
typedef struct nb__k_view {
    void *data;
    int dtype;
    int ndim;
    int64_t numel;
    int64_t shape[NBC_MAX_DIMS];
    int64_t stride[NBC_MAX_DIMS];
} nb__k_view;

/* The stream every kernel of the current device is queued on (a cudaStream_t), from the runtime. */
void *nb__k_stream(void);
/* Temporary device memory from the backend's caching allocator, in stream order; NULL when the
   device has none left (the allocator has recorded the error). */
void *nb__k_scratch_alloc(size_t bytes);
/* Gives back memory from nb__k_scratch_alloc (bytes as asked). */
void nb__k_scratch_free(void *p, size_t bytes);

/* ---- the launchers of the backend's own kernels (k_*.cu). Each queues its work on nb__k_stream()
   and returns 0 or the cudaError_t of the launch; none waits for the device unless it says so.
   An input view handed with an output is read as broadcast to the output's shape: the caller
   gives it the output's ndim and stride 0 on the axes it broadcasts (nb__k_view's shape is then
   the output's). ---- */

/* out = a op b for op an elementwise binary op of ops.def (fuse EW, CHEAP or CMP), by its
   formula nbf_<name> (out dense; a and b of one dtype; comparisons write bools). */
int nb__k_binary(nb_op_id op, const nb__k_view *out, const nb__k_view *a, const nb__k_view *b);
/* out = cond ? a : b (cond bool; out dense). */
int nb__k_where(const nb__k_view *out, const nb__k_view *cond, const nb__k_view *a, const nb__k_view *b);
/* out = op(x, s0, s1) for op an elementwise unary op of ops.def, by its formula nbf_<name>
   (out dense, x of out's dtype). */
int nb__k_unary(nb_op_id op, const nb__k_view *out, const nb__k_view *x, double s0, double s1);
/* out = x converted to out's dtype as the cpu's cast converts (out of any strides, x of any
   dtype): cast, copy, assign, and the pieces of cat and slice's backward. */
int nb__k_cast(const nb__k_view *out, const nb__k_view *x);
/* Every element of the dense out set to v as the cpu's full sets it. */
int nb__k_fill(const nb__k_view *out, double v);
/* out[i] = start + i * step (out dense). */
int nb__k_arange(const nb__k_view *out, double start, double step);
/* out (dense f32 or f64) drawn from Philox4x32-10 counters offset.. of seed, uniform in [0, 1)
   or (normal) standard normal, element for element the cpu kernel's values. */
int nb__k_rand(const nb__k_view *out, uint64_t seed, uint64_t offset, int normal);
/* Zeroes bytes at device memory p. */
int nb__k_zero(void *p, size_t bytes);
/* Copies bytes of host memory to the device and waits for the copy (the host memory may go). */
int nb__k_upload(void *dst, const void *src, size_t bytes);
/* Copies the elements of the device view v, row-major, into dense host memory at dst, and waits. */
int nb__k_download(void *dst, const nb__k_view *v);

/* ---- reductions, softmax, batch norm (k_reduce.cu) ---- */
enum nb__k_reduce_op { NBC_SUM, NBC_MAX, NBC_MIN, NBC_ARGMAX, NBC_ARGMIN };
/* out[o] (dense) = op over the elements kept.data + offset of o in kept + offset of r in red, r
   over red's elements: kept holds the input's kept axes (shape, strides), red its reduced ones.
   Sums of floats accumulate in double, of integers in wrapping 64 bits; argmax/argmin give the
   first index of the extreme (a NaN is the extreme). */
int nb__k_reduce(int op, const nb__k_view *out, const nb__k_view *kept, const nb__k_view *red);
/* Softmax (or log-softmax) of rows of n elements: xrow and yrow give each row's first element
   (the other axes of x and out), xs and ys the step along the axis. */
int nb__k_softmax(const nb__k_view *xrow, const nb__k_view *yrow, int64_t n, int64_t xs, int64_t ys, int log_out);
enum nb__k_bn_kind { NBC_BN_STATS, NBC_BN_FORWARD, NBC_BN_REDUCE, NBC_BN_BACKWARD };
/* Batch norm of kind over C channels: x and g are the input and gradient with the channel axis
   taken out ([N, rest...]), xc and gc their channel strides; out is the dense output the same
   way (channel stride yc) for FORWARD and BACKWARD, or [2, C] for STATS and REDUCE; w and b
   [C] (b for FORWARD only). */
int nb__k_batch_norm(int kind, const nb__k_view *out, const nb__k_view *x, int64_t xc, const nb__k_view *g, int64_t gc,
                   int64_t yc, const nb__k_view *w, const nb__k_view *b, int64_t C, double eps);

/* ---- scans and sorts (k_scan.cu): lanes along an axis; xl, yl (gl) give each lane's first element ---- */
/* Cumulative sum (or product, mul) of lanes of n elements with steps xs, ys; reverse from the end. */
int nb__k_scan(const nb__k_view *yl, const nb__k_view *xl, int64_t n, int64_t ys, int64_t xs, int mul, int reverse);
/* The gradient of cumprod from x and the upstream gradient g, lane by lane. */
int nb__k_cumprod_backward(const nb__k_view *yl, const nb__k_view *xl, const nb__k_view *gl, int64_t n, int64_t ys, int64_t xs,
                         int64_t gs);

/* The stable argsort of lanes of n elements (ascending, or descending), indices into yl's i64
   lanes; NaN sorts above every number. Takes 16 n bytes a lane of scratch memory. */
int nb__k_argsort(const nb__k_view *yl, const nb__k_view *xl, int64_t n, int64_t ys, int64_t xs, int descending);

/* ---- indexing (k_index.cu): index tensors are i64 or i32, already checked by the host ---- */
/* out[..., j, ...] = t[..., idx[j], ...] (out dense). */
int nb__k_index_select(const nb__k_view *out, const nb__k_view *t, const nb__k_view *idx, int axis);
/* out[e] = t at e's position with idx[e] on axis (out dense, idx's shape). */
int nb__k_gather(const nb__k_view *out, const nb__k_view *t, const nb__k_view *idx, int axis);
/* out[e, k] = tail.data[offs[e] + offset of k in tail] (offs on the device, out dense). */
int nb__k_index(const nb__k_view *out, const nb__k_view *tail, const int64_t *offs);
/* out[..., i, ...] = the sum over list[start[i] .. start[i + 1]) of src[..., j, ...] (device arrays). */
int nb__k_index_add(const nb__k_view *out, const nb__k_view *src, int axis, const int64_t *start, const int64_t *list);
/* out[o] = the sum over list[start[o] .. start[o + 1]) of src's element (row-major index) list[k]. */
int nb__k_scatter_add(const nb__k_view *out, const nb__k_view *src, const int64_t *start, const int64_t *list);
/* out = x (read as out's shape), then for row r of out's leading axes (tailn elements each) the
   values rows list[start[r] .. start[r + 1]) of values (shape: index positions, then the tail):
   the last one written, or all of them added (accumulate). */
int nb__k_index_put(const nb__k_view *out, const nb__k_view *x, const nb__k_view *values, const int64_t *start,
                  const int64_t *list, int64_t tailn, int accumulate);

/* ---- pooling (k_pool.cu) over [N, C, H, W] ---- */
/* The pooling geometry, the cpu's (src/backend/pool_geom.h). */
typedef nb_pool_geom nb__k_pool_geom;
/* Max pool values (or, indices, each window's argmax as h * W + w) into dense out. */
int nb__k_max_pool2d(const nb__k_pool_geom *g, const nb__k_view *out, const nb__k_view *x, int indices);
/* dx (dense) = dy gathered to each window's argmax of x. */
int nb__k_max_pool2d_backward(const nb__k_pool_geom *g, const nb__k_view *dx, const nb__k_view *dy, const nb__k_view *x);
/* Average (or adaptive average, g->adaptive) pool into dense out. */
int nb__k_avg_pool2d(const nb__k_pool_geom *g, const nb__k_view *out, const nb__k_view *x);
/* Its gradient into dense dx. */
int nb__k_avg_pool2d_backward(const nb__k_pool_geom *g, const nb__k_view *dx, const nb__k_view *dy);

/* ---- the CTC loss (k_ctc.cu) ---- */
struct nb_ctc_job;
/* The loss (or its gradient, j->backward) of the j->N sequences of j (src/backend/ctc_recursion.h),
   every pointer of j on the device, j->work and j->labels holding j->work_slot values and
   j->labels_slot labels a sequence. */
int nb__k_ctc(const struct nb_ctc_job *j);

/* ---- the fused optimizer update (k_optim.cu) ---- */
/* src/backend/kernel.h's update kinds, in its order. */
enum nb__k_update_kind {
    NBC_UPDATE_SGD, NBC_UPDATE_ADAM, NBC_UPDATE_RMSPROP, NBC_UPDATE_ADAGRAD,
    NBC_UPDATE_NADAM, NBC_UPDATE_RADAM, NBC_UPDATE_ADAMAX, NBC_UPDATE_ADADELTA
};
/* One update: t[0] the parameter, t[1] its gradient, t[2..4] its state (NULL where absent), all
   dense of n elements of dtype; f and i the step's coefficients and flags as the cpu's
   nb__optim_begin leaves them. */
typedef struct nb__k_optim {
    int kind, dtype;
    int64_t n;
    void *t[5];
    double f[8];
    int64_t i[5];
} nb__k_optim;
/* Applies the update u. */
int nb__k_optim_update(const nb__k_optim *u);

#ifdef __cplusplus
}
#endif

#endif
