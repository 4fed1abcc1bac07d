/* Strided iteration for CPU kernels: broadcast operands against an output shape, merge
   dimensions that are contiguous in every operand, and run an inner-loop function over
   1-D runs, in parallel above a size threshold. */
#ifndef NB_CPU_ITER_H
#define NB_CPU_ITER_H

#include "../kernel.h"
#include "../pool_geom.h"
#include "../ctc_recursion.h"

#define NB_ITER_MAX_OPS 4

typedef struct nb_iter {
    int nd, nops;
    int64_t dim[NB_MAX_DIMS];
    int64_t st[NB_ITER_MAX_OPS][NB_MAX_DIMS]; /* byte strides per operand */
    char *ptr[NB_ITER_MAX_OPS];
    int64_t numel;
} nb_iter;

/* Inner loop over n elements; p[k] points at operand k's first element, s[k] is its byte stride. */
typedef void (*nb_inner_fn)(char **p, const int64_t *s, int64_t n, const void *ctx);

/* Sets up iteration over out (operand 0) and inputs broadcast to out's shape. */
void nb__iter_init(nb_iter *it, nb_tensor *out, nb_tensor *const *in, int nin);
/* Same, with an explicit output region: shape, element strides and a base pointer. */
void nb__iter_init_raw(nb_iter *it, const nb_shape *shape, char *out_ptr, const int64_t *out_stride, size_t out_esize,
                       nb_tensor *const *in, int nin);
/* Runs fn over every element (parallel above NB_PARALLEL_GRAIN elements). */
void nb__iter_run(nb_iter *it, nb_inner_fn fn, const void *ctx);

/* Called after each piece of a product: rows [r0, r1) and columns [c0, c1) of product `batch`
   (flattened over the batch dimensions) are final. */
typedef void (*nb_gemm_epilogue)(void *ctx, int64_t batch, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
/* The CPU matmul kernel with an epilogue run on each finished piece, on the thread that made it;
   whole_rows asks for pieces of whole rows, so the epilogue streams through contiguous memory. */
int nb__cpu_matmul_epilogue(nb_tensor *out, nb_tensor *const *in, nb_gemm_epilogue epi, void *ctx, bool whole_rows);

/* A dense f32 copy of the f32 tensor t with its values rounded to bf16 (nearest, ties to even):
   autocast's convolution operands for the f32 kernels that stand in for bf16 ones. */
nb_tensor *nb__cpu_round_bf16(nb_tensor *t);
/* A dense f32 copy of the bf16 tensor t (exact), for the f32 kernels that stand in for bf16 ones,
   keeping a transposed view transposed (the copy runs in its storage's order). */
nb_tensor *nb__cpu_widen_bf16(nb_tensor *t);

/* The inner loop that copies elements of esize bytes (elementwise.c), for the kernels that move
   data: products, convolutions, index ops. */
nb_inner_fn nb__cpu_copy_fn(size_t esize);
/* The copy kernel (the `copy` op: out = in[0], any dtype). */
int nb__cpu_copy(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args);

/* The fused optimizer update in three parts, so a graph can run it on the pieces of the GEMM that
   makes the gradient: read the step and coefficients into *a (and mark the tensors written), update
   elements [lo, hi), then store the new step count. */
void nb__cpu_optim_begin(nb_tensor *const *in, int nin, const nb_op_args *args, nb_op_args *a);
void nb__cpu_optim_range(nb_tensor *const *in, int nin, int64_t lo, int64_t hi, const nb_op_args *a);
void nb__cpu_optim_end(nb_tensor *const *in);

/* The n index tensors of index / index_put broadcast together: their shape in *b (the CUDA
   backend's index ops share the cpu's reading of them). */
void nb__cpu_index_shape(nb_tensor *const *idx, int n, nb_shape *b);
/* For each position of the indices' broadcast shape b (row-major), the element offset, by
   `stride`, of x[i0, ..., in-1] over x's leading n axes (xs: x's shape); a negative index counts
   from the end. A malloc'ed array of count offsets (freed by the caller), or NULL with the error
   "nb_<fn>: index ... is out of range ..." recorded. The index tensors are on the host. */
int64_t *nb__cpu_index_offsets(const char *fn, const nb_shape *xs, const int64_t *stride, nb_tensor *const *idx, int n,
                               const nb_shape *b, int64_t count);

/* The geometry of a pooling op from its input shape x, output shape y and args (i[0..1] kernel,
   i[2..3] stride, i[4..5] padding, i[6..7] dilation, i[9] padding left out of the divisor); xs
   is left 0. */
nb_pool_geom nb__cpu_pool_geometry(const nb_shape *x, const nb_shape *y, const nb_op_args *a, bool adaptive);

/* The CTC loss's job (backward: its gradient) over out and in (log_probs, targets,
   input_lengths, target_lengths, then the gradient [N]): their pointers, strides and sizes, the
   blank i[0] and zero_infinity i[1]. */
nb_ctc_job nb__cpu_ctc_job(nb_tensor *out, nb_tensor *const *in, const nb_op_args *args, bool backward);
/* Reads and checks the lengths and labels of in (on the host; shapes and dtypes checked by
   inference) into meta (4 N values: il, tl, off, then N feasibility bytes), which j points at,
   with j's target stride; sizes the scratch a sequence needs (values, labels). 0, or -1 with
   "nb_ctc_loss: ..." recorded. */
int nb__cpu_ctc_prepare(nb_tensor *const *in, nb_ctc_job *j, int64_t *meta, size_t *work_slot, size_t *labels_slot);

/* Kernels are built for several ISA levels and chosen by cpuid when the library loads (GCC's
   target_clones, an ifunc): the library itself is built for baseline x86-64 so that it runs on
   any x86 CPU, and each hot inner loop also for AVX2+FMA (x86-64-v3). A machine always runs the
   same clone, so its bits do not depend on the thread count. NABLA_NATIVE builds
   (-march=native) and other compilers or CPUs need no clones. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(NABLA_NATIVE_BUILD)
#define NB_KERNEL_CLONES __attribute__((target_clones("default", "arch=x86-64-v3")))
#define NB_WIDE_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NB_KERNEL_CLONES
#define NB_WIDE_CLONES __attribute__((target_clones("default", "arch=x86-64-v4")))
#else
#define NB_KERNEL_CLONES
#define NB_WIDE_CLONES
#endif
/* NB_WIDE_CLONES, on the hot loops of double-precision math (kmath.h) or costly float
   arithmetic: AVX-512 (x86-64-v4) as well, where it runs their polynomials in twice the lanes.
   Plain elementwise loops stay at AVX2: they are bound by memory, and heavy 512-bit code lowers
   some Xeons' clock for everything around it. */

#endif
