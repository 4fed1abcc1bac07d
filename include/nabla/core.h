/* nabla core: tensors, dtypes, devices, ownership (scopes), errors, random numbers, threads. */
#ifndef NABLA_CORE_H
#define NABLA_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(NB_BUILDING_LIBRARY)
#define NB_API __attribute__((visibility("default")))
#else
#define NB_API
#endif

#define NB_VERSION_MAJOR 0
#define NB_VERSION_MINOR 1
#define NB_VERSION_PATCH 0

#define NB_MAX_DIMS 8

/* Element types. f32 is the working type; f16/bf16 are storage types (ops compute them in f32).
   i8 (int8) is the quantised storage type; its arithmetic wraps around as torch's does. The
   numeric values are kept as they are when a dtype is added (new ones go last), though no file
   format of nabla's stores them: files name dtypes by strings.
   Promotion follows torch (bool < integers < floats, wider wins), with one difference: torch
   gives i16 for i8 with u8, which nabla lacks, so nabla gives i32 there. */
typedef enum nb_dtype { NB_F32, NB_F64, NB_F16, NB_BF16, NB_I64, NB_I32, NB_U8, NB_BOOL, NB_I8, NB_DTYPE_COUNT } nb_dtype;

/* NB_EXT is for a backend that the program registers itself (PyTorch's PrivateUse1); nabla
   builds none in, and its tests register one there. */
typedef enum nb_device_type { NB_CPU = 0, NB_CUDA = 1, NB_EXT = 2 } nb_device_type;

/* Where a tensor lives. index is -1 for a device string that did not parse. */
typedef struct nb_device { nb_device_type type; int index; } nb_device;

/* A shape is a value: ndim dimensions, up to NB_MAX_DIMS. */
typedef struct nb_shape { int ndim; int64_t dim[NB_MAX_DIMS]; } nb_shape;

/* NB_SHAPE(64, 784) builds an nb_shape from its dimensions; NB_SHAPE() is a 0-d (scalar) shape.
   It means the same in strict C11/C17, GNU C and C++, without GNU's `, ##__VA_ARGS__` (which
   strict C reads as one empty dimension, a 1-d shape [0]): in C an empty list is told apart by
   the preprocessor (NB__IS_EMPTY) and the count is the length of an array literal of the
   dimensions; in C++ it is a function template. More than NB_MAX_DIMS dimensions is a compile-time
   diagnostic ("excess elements", or a static assertion in C++). */
#ifdef __cplusplus
extern "C++" {
template <typename... D> inline nb_shape nb__shape_of(D... dims) {
    static_assert(sizeof...(D) <= NB_MAX_DIMS, "NB_SHAPE: more than NB_MAX_DIMS dimensions");
    const int64_t d[] = {0, static_cast<int64_t>(dims)...};
    nb_shape s = {};
    s.ndim = static_cast<int>(sizeof...(D));
    for (int i = 0; i < s.ndim; i++) s.dim[i] = d[i + 1];
    return s;
}
}
#define NB_SHAPE(...) nb__shape_of(__VA_ARGS__)
#else
/* Whether the argument list is empty, in standard C (Jens Gustedt's four-comma test): 1 or 0. */
#define NB__ARG16(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, ...) _15
#define NB__HAS_COMMA(...) NB__ARG16(__VA_ARGS__, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0)
#define NB__COMMA_IF_CALLED(...) ,
#define NB__IS_EMPTY(...) NB__IS_EMPTY_(NB__HAS_COMMA(__VA_ARGS__), NB__HAS_COMMA(NB__COMMA_IF_CALLED __VA_ARGS__), \
                                        NB__HAS_COMMA(__VA_ARGS__ ()), NB__HAS_COMMA(NB__COMMA_IF_CALLED __VA_ARGS__ ()))
#define NB__IS_EMPTY_(a, b, c, d) NB__HAS_COMMA(NB__PASTE5(NB__EMPTY_CASE_, a, b, c, d))
#define NB__PASTE5(a, b, c, d, e) a##b##c##d##e
#define NB__EMPTY_CASE_0001 ,
#define NB__SHAPE_PICK(empty) NB__SHAPE_PICK_(empty)
#define NB__SHAPE_PICK_(empty) NB__SHAPE_##empty
#define NB__SHAPE_1(...) ((nb_shape){ 0, { 0 } })
#define NB__SHAPE_0(...) ((nb_shape){ (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), { __VA_ARGS__ } })
#define NB_SHAPE(...) NB__SHAPE_PICK(NB__IS_EMPTY(__VA_ARGS__))(__VA_ARGS__)
#endif

/* Opaque, reference-counted tensor. */
typedef struct nb_tensor nb_tensor;
/* A region that owns every tensor made inside it (see nb_scope_begin). */
typedef struct nb_scope nb_scope;

/* The library version as "MAJOR.MINOR.PATCH". */
NB_API const char *nb_version(void);

/* ---- errors ---- */
/* The first error message recorded on this thread since nb_error_clear(), or NULL. */
NB_API const char *nb_error(void);
/* Forget this thread's recorded error. */
NB_API void nb_error_clear(void);
/* Called with each first error as it is recorded (e.g. to print and stop); NULL removes it. */
NB_API void nb_set_error_handler(void (*handler)(const char *message, void *user), void *user);

/* ---- dtypes and devices ---- */
/* The dtype's short name ("f32", "i64", ...); "?" for a value outside nb_dtype. */
NB_API const char *nb_dtype_name(nb_dtype dtype);
/* Bytes per element of the dtype; 0 for a value outside nb_dtype. */
NB_API size_t nb_dtype_size(nb_dtype dtype);
/* Parses "cpu", "cuda", "cuda:1", "ext:0"; on a bad string records an error and returns index -1. */
NB_API nb_device nb_device_parse(const char *text);
/* Writes the device's name ("cpu", "cuda:0") into buf and returns buf. */
NB_API const char *nb_device_str(nb_device device, char *buf, size_t size);
/* How many devices of the type this build and machine can use (1 for the cpu; 0 for a type
   with no backend built in). */
NB_API int nb_device_count(nb_device_type type);
/* Whether tensors can be made on the device: its type has a backend and its index exists. */
NB_API bool nb_device_available(nb_device device);
/* Waits until the device has finished the work queued on it; 0, or -1 with the error recorded
   (an unavailable device). The cpu runs each op to its end, so for it this returns at once. */
NB_API int nb_synchronize(nb_device device);

/* ---- creation (each returns a new reference; see the ownership rules) ---- */
/* Uninitialised tensor of the given shape and dtype. */
NB_API nb_tensor *nb_empty(nb_shape shape, nb_dtype dtype);
/* Tensor of zeros. */
NB_API nb_tensor *nb_zeros(nb_shape shape, nb_dtype dtype);
/* Tensor of ones. */
NB_API nb_tensor *nb_ones(nb_shape shape, nb_dtype dtype);
/* Tensor filled with value. */
NB_API nb_tensor *nb_full(nb_shape shape, double value, nb_dtype dtype);
/* Uniform samples in [0, 1) from the seeded generator (float dtypes). */
NB_API nb_tensor *nb_rand(nb_shape shape, nb_dtype dtype);
/* Standard normal samples from the seeded generator (float dtypes). */
NB_API nb_tensor *nb_randn(nb_shape shape, nb_dtype dtype);
/* 1-D tensor start, start+step, ... below end (above end for a negative step). */
NB_API nb_tensor *nb_arange(double start, double end, double step, nb_dtype dtype);
/* Tensor holding a copy of numel(shape) elements of dtype read from data. */
NB_API nb_tensor *nb_from_data(const void *data, nb_shape shape, nb_dtype dtype);
/* 0-d f32 tensor holding value. */
NB_API nb_tensor *nb_scalar(double value);
/* Tensor of zeros with t's shape and dtype. */
NB_API nb_tensor *nb_zeros_like(const nb_tensor *t);
/* Tensor of ones with t's shape and dtype. */
NB_API nb_tensor *nb_ones_like(const nb_tensor *t);
/* Tensor of value with t's shape, dtype and device. */
NB_API nb_tensor *nb_full_like(const nb_tensor *t, double value);
/* Seeds the global counter-based (Philox 4x32-10) generator and resets its counter. */
NB_API void nb_manual_seed(uint64_t seed);
/* The generator's state (seed and counter), to save and restore a run's randomness. */
NB_API void nb_rng_get_state(uint64_t *seed, uint64_t *offset);
/* Restores a state read by nb_rng_get_state. */
NB_API void nb_rng_set_state(uint64_t seed, uint64_t offset);

/* ---- inspection ---- */
/* The tensor's shape (ndim 0 for a NULL tensor). */
NB_API nb_shape nb_shape_of(const nb_tensor *t);
/* Number of dimensions (0 for NULL). */
NB_API int nb_ndim(const nb_tensor *t);
/* Size of one axis (negative counts from the end); -1 with an error when out of range. */
NB_API int64_t nb_dim(const nb_tensor *t, int axis);
/* Number of elements (0 for NULL). */
NB_API int64_t nb_numel(const nb_tensor *t);
/* Element type (NB_F32 for NULL). */
NB_API nb_dtype nb_dtype_of(const nb_tensor *t);
/* Device the tensor lives on (the CPU for NULL). */
NB_API nb_device nb_device_of(const nb_tensor *t);
/* Stride of one axis, in elements (negative counts from the end); -1 with an error when out of range. */
NB_API int64_t nb_stride(const nb_tensor *t, int axis);
/* Whether the elements are laid out densely in row-major order. */
NB_API bool nb_is_contiguous(const nb_tensor *t);
/* Whether two tensors share one storage (one is a view of the other). */
NB_API bool nb_shares_storage(const nb_tensor *a, const nb_tensor *b);
/* The value of a one-element tensor as a double; NAN with an error otherwise. */
NB_API double nb_item(const nb_tensor *t);
/* Copies the elements, in row-major order, into dst (bytes must be numel * dtype size); 0 or <0. */
NB_API int nb_copy_to(const nb_tensor *t, void *dst, size_t bytes);
/* Pointer to the first element of a contiguous CPU tensor (NULL with an error otherwise). */
NB_API void *nb_data_ptr(nb_tensor *t);
/* Prints the tensor to stdout as PyTorch does: tensor([[1.0000, 2.0000]], requires_grad=True). */
NB_API void nb_print(const nb_tensor *t);
/* Formats like nb_print into buf (truncated to size); returns the length it needed. */
NB_API size_t nb_format(const nb_tensor *t, char *buf, size_t size);
/* Formats a shape as "[64, 784]" into buf and returns buf. */
NB_API const char *nb_shape_str(nb_shape shape, char *buf, size_t size);

/* ---- ownership ---- */
/* Adds a reference owned by the caller; returns t. */
NB_API nb_tensor *nb_retain(nb_tensor *t);
/* Drops one reference owned by the caller; NULL is ignored. */
NB_API void nb_release(nb_tensor *t);
/* Opens a scope on this thread: every tensor made on it until the scope's end belongs to it. Scopes
   nest. NULL with an error when out of memory. */
NB_API nb_scope *nb_scope_begin(void);
/* Closes the scope (and any left open inside it), releasing every tensor it owns. */
NB_API void nb_scope_end(nb_scope *scope);
/* Moves t out of the innermost scope holding it: the caller owns it and releases it. Returns t. */
NB_API nb_tensor *nb_keep(nb_tensor *t);

/* ---- threads and memory ---- */
/* Threads for the kernels, which split matrix products themselves (BLAS stays single-threaded, so
   results do not depend on n); n <= 0 restores the default (NABLA_NUM_THREADS, OMP_NUM_THREADS, cores). */
NB_API void nb_set_num_threads(int n);
/* Threads the kernels use when called from this thread (1 in a data-loader worker). */
NB_API int nb_get_num_threads(void);
/* Treats denormal floats as zero, as inputs and as results (x86's DAZ and FTZ), in the calling
   thread and the kernel threads, like torch.set_flush_denormal: off by default (IEEE). Each
   operation on a denormal costs ~100 cycles, and underflowing gradients and optimizer state
   make many. Returns false, changing nothing, where the CPU has no such mode. */
NB_API bool nb_set_flush_denormal(bool on);
/* Returns cached free buffers to the system: the shared lists' and this thread's (other threads'
   caches are kept until those threads exit). */
NB_API void nb_empty_cache(void);
/* How many tensors are alive now, in every thread: made and not yet freed (views and gradients
   count). A training loop whose count grows step after step keeps what each step makes: see the
   ownership rules (a scope per step) and NABLA_WARN_LEAKS (nb_optim_step). */
NB_API int64_t nb_live_tensors(void);
/* Allocator counters: bytes held from the system, bytes in use (exact when other threads are
   idle), and system allocations so far. */
NB_API void nb_memory_stats(size_t *held_bytes, size_t *used_bytes, uint64_t *system_allocs);

#ifdef __cplusplus
}
#endif
#endif
