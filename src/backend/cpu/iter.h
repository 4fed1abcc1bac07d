/* Strided iteration for CPU kernels: broadcast operands against an output shape, merge
   dimensions that are contiguous in every operand, and run an inner-loop function over
   1-D runs, in parallel above a size threshold. */
#ifndef NB_CPU_ITER_H
#define NB_CPU_ITER_H

#include "../kernel.h"
#include "../prep.h"

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

/* The fused optimizer update's elements [lo, hi) (between nb__optim_begin and nb__optim_end of
   prep.h), so a graph can run it on the pieces of the GEMM that makes the gradient. */
void nb__cpu_optim_range(nb_tensor *const *in, int nin, int64_t lo, int64_t hi, const nb_op_args *a);

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
