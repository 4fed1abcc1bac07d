/* Internal core definitions shared by every layer of the library: the tensor and storage
   structs, the caching allocator, scopes and error recording. Not installed. */
#ifndef NB_CORE_IMPL_H
#define NB_CORE_IMPL_H

#include "nabla/core.h"
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include "threadpool.h"
#include "portable.h"

struct nb_node;

/* Thread-locals take the compiler's model for the build: in the shared library that is dynamic
   TLS, reached through TLS descriptors (-mtls-dialect=gnu2 on x86-64; the default on aarch64),
   which cost a call only on a thread's first touch. The initial-exec model would mark the whole
   library STATIC_TLS, and its ~9 KB of thread-locals (error text, oneDNN's per-thread cache)
   do not fit the static surplus a dlopen needs: dlopen failed with "cannot allocate memory in
   static TLS block". tests/dlclose_test.c loads and unloads it. */
#define NB_TLS _Thread_local

/* Bytes per element, inlined for the hot paths (portable.h's table, which the device code reads too). */
static inline size_t nb__esize(nb_dtype d) { return nb__dtype_bytes((int)d); }

/* Seconds on the monotonic clock: the one clock of step times, timeouts and waits. */
double nb__now(void);

/* A double converted to i8 as torch's cpu cast does: truncated toward zero to an int32, whose
   low byte is kept (wrapping: 200.7 gives -56). Where no int32 holds the value (beyond +-2^31,
   infinities) and for NaN it is 0, which is what torch gives on x86, where C leaves it undefined. */
static inline int8_t nb__to_i8(double v) {
    return v != v || v >= 2147483648.0 || v <= -2147483649.0 ? 0 : (int8_t)(uint8_t)(uint32_t)(int32_t)v;
}

struct nb_storage;
/* How core reaches memory that is not the host's: set by the backend layer on the storage it
   makes for a device, so core frees and reads it without knowing the backend. */
typedef struct nb_storage_ops {
    /* Frees st->data (the header is core's). */
    void (*release)(struct nb_storage *st);
    /* Copies n bytes from byte offset off of st's data into host memory at dst. */
    int (*read)(const struct nb_storage *st, size_t off, void *dst, size_t n);
} nb_storage_ops;

/* A block of elements; views share one. Host storage is one block with its data behind the
   header; a device's storage has ops, and its data is the device's; so does host memory from
   elsewhere, whose data the host reads directly (its device is the cpu). */
typedef struct nb_storage {
    atomic_int refcount;
    atomic_uint version; /* bumped by every in-place write, so saved tensors can be checked */
    nb_device device;
    size_t nbytes;     /* usable bytes at data */
    size_t block;      /* size of the whole block handed out by the allocator */
    void *data;
    const nb_storage_ops *ops; /* NULL: nabla's own host memory, freed with the header; else a
                                  device's memory, or host memory nabla does not own (a mapped
                                  file) that ops->release lets go */
    uint64_t constant_id;      /* 0, or a number no other storage ever gets (nb__tensor_freeze):
                                  its values change no more, so kernels may cache forms derived
                                  from them under it (a convolution's weights in oneDNN's layout) */
} nb_storage;

struct nb_tensor {
    atomic_int refcount;
    nb_dtype dtype;
    bool requires_grad;
    nb_shape shape;
    int64_t stride[NB_MAX_DIMS]; /* in elements */
    int64_t offset;              /* in elements, into storage */
    int64_t numel;
    nb_storage *storage;
    struct nb_node *grad_fn;     /* the node that made this tensor (owned reference) */
    nb_tensor *grad;             /* accumulated gradient of a leaf (owned reference) */
    struct nb_grad_hook_entry *hooks; /* a leaf's gradient hooks (nb_tensor_register_hook), owned */
};

/* A gradient hook (nb_tensor_register_hook), in the order registered: on a leaf's tensor, or on
   the node of a computed one. */
typedef struct nb_grad_hook_entry {
    nb_tensor *(*fn)(nb_tensor *grad, void *ctx); /* nabla/autograd.h's nb_grad_hook */
    void *ctx;
    struct nb_grad_hook_entry *next;
} nb_grad_hook_entry;
/* Frees a list of hooks. */
void nb__grad_hooks_free(nb_grad_hook_entry *h);

/* ---- allocator (src/core/alloc.c): a size-class caching allocator, thread-safe ---- */
void *nb__alloc(size_t bytes);
void nb__free(void *p, size_t bytes);

/* ---- errors (src/core/error.c) ---- */
/* Records a formatted message as this thread's error unless one is already recorded. */
void nb__error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether this thread has an error recorded. */
bool nb__has_error(void);
/* How many failures this thread has reported (each nb__error call, kept message or not): a
   function that compares the count before and after its calls sees its own failures, where
   nb__has_error would also see an earlier error the caller never cleared. */
uint64_t nb__error_count(void);
/* A context that errors recorded inside it are told in: while pushed, a message that nb__error
   records becomes "<context>: <message>", the message's own leading "<strip>: " (the inner
   function's name, which the context replaces) dropped; contexts nest, the outermost first. The
   handler of nb_set_error_handler fires once, with the whole text, so a caller never clears an
   error to record it again with a prefix. Lives on the caller's stack between push and pop. */
typedef struct nb__error_ctx {
    char text[400];
    const char *strip;
    bool quiet;
    struct nb__error_ctx *outer;
} nb__error_ctx;
/* Pushes context c (formatted from fmt); strip may be NULL. Pop it before the function returns. */
void nb__error_push(nb__error_ctx *c, const char *strip, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Pushes a quiet context: an error recorded inside it fires the handler only when the last quiet
   context is popped, if it is still recorded then, so the caller may first reword it
   (nb__error_reword) or drop it (a probe that may fail) without the handler seeing it twice. */
void nb__error_quiet(nb__error_ctx *c);
/* Pops context c, the innermost one. */
void nb__error_pop(nb__error_ctx *c);
/* Rewords this thread's recorded error in place (nb_error() may be one of the arguments), without
   firing the handler: for use inside a quiet context. No effect when none is recorded. */
void nb__error_reword(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The one range check of an enum value that a caller passed (a dtype, a reduction, a mode):
   true when 0 <= value < count; else records "fn: what N is not an nb_TYPE value (names)" naming
   every valid value, so no table is indexed with a value from outside the enum. names lists
   the count values' names in order, separated by ", ". */
bool nb__enum_ok(const char *fn, const char *what, long long value, int count, const char *type, const char *names);
/* nb__enum_ok for an nb_dtype. */
bool nb__dtype_ok(const char *fn, nb_dtype dtype);
/* Records the error of a feature that reads or writes JSON in a build without jansson
   (NABLA_WITH_JSON=OFF): "fn: nabla was built without jansson (...), the JSON parser of what". */
#define NB__NO_JSON(fn, what) \
    nb__error("%s: nabla was built without jansson (NABLA_WITH_JSON=OFF), the JSON parser of %s", fn, what)

/* ---- tensors (src/core/tensor.c) ---- */
/* A fresh contiguous tensor with new storage (uninitialised). Owned by the caller, not a scope. */
nb_tensor *nb__tensor_new(nb_shape shape, nb_dtype dtype);
/* Checks a new tensor's dtype and shape (recording "nb_empty: ..." when they are bad, or past
   64 TiB); sets the element count and byte size. */
bool nb__tensor_size(nb_shape shape, nb_dtype dtype, int64_t *numel, size_t *nbytes);
/* A contiguous tensor header over st, which it takes over (released with the tensor); NULL
   when memory runs out (st is then the caller's). */
nb_tensor *nb__tensor_on(nb_storage *st, nb_shape shape, nb_dtype dtype, int64_t numel);
/* A new tensor header over t's storage with the given shape, strides and offset. */
nb_tensor *nb__tensor_view(nb_tensor *t, nb_shape shape, const int64_t *stride, int64_t offset);
/* Marks t's storage as constant from now on (a loaded model's initializer), giving it its
   constant_id; the caller promises that nothing writes to it again. */
void nb__tensor_freeze(nb_tensor *t);
/* How many constant storages have been freed so far: a kernel's cache of derived forms drops
   them when this moves (their ids never come back, so this is about memory, not correctness). */
extern atomic_uint_least64_t nb__constants_freed;
/* A storage header for nbytes of device memory at data (ops set, refcount 1), or NULL. */
nb_storage *nb__storage_header(nb_device dev, void *data, size_t nbytes, const nb_storage_ops *ops);
/* Copies t's elements (any strides, any device) into dense host memory at dst; -1 on failure. */
int nb__read_to_host(const nb_tensor *t, void *dst);
/* Pointer to element 0 of t. */
static inline void *nb__data(const nb_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)nb__esize(t->dtype);
}
/* Row-major contiguous strides of shape. */
void nb__contiguous_strides(const nb_shape *shape, int64_t *stride);
/* Product of the dimensions of a shape already checked by nb__shape_check. */
int64_t nb__shape_numel(const nb_shape *shape);
/* a * b into *out; true when the product overflows int64 (*out is then meaningless). The one
   checked multiply for every size computed from user data: counts, strides, byte sizes. */
static inline bool nb__mul_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out); }
/* a + b into *out; true when the sum overflows int64. */
static inline bool nb__add_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out); }
/* Checks a shape made from user data: 0..NB_MAX_DIMS dimensions, none negative, and the product
   of the dimensions (zeros counted as ones, so strides fit too) times esize bytes within int64.
   Sets *numel (when not NULL) and returns true; otherwise records "fn: ..." naming the shape
   (nothing when fn is NULL: a caller that formats its name only on failure). */
bool nb__shape_check(const char *fn, const nb_shape *shape, size_t esize, int64_t *numel);
/* Whether a and b are the same shape. */
bool nb__shape_eq(const nb_shape *a, const nb_shape *b);
/* Whether the dtype is f32, f64, f16 or bf16. */
bool nb__is_float(nb_dtype dtype);
/* Normalises a possibly negative axis for ndim dimensions; -1 (no error recorded) when out of range. */
int nb__axis(int axis, int ndim);
/* Hands a freshly made tensor to the innermost scope (if any) and returns it. */
nb_tensor *nb__own(nb_tensor *t);
/* Whether a scope is open on this thread: without one, a caller owns what it is handed. */
bool nb__scope_open(void);
/* Sets the hook that frees a graph node when the last tensor referring to it goes. */
void nb__set_node_release(void (*release)(struct nb_node *));
/* Sets how the printer names a tensor's grad_fn (autograd sets it: core knows no node's insides). */
void nb__set_node_name(const char *(*name)(const struct nb_node *));
/* Describes t as "[64, 784] f32" into buf. */
const char *nb__describe(const nb_tensor *t, char *buf, size_t size);

/* Reads of tensor values by the host (nb_item, nb_data_ptr) on this thread: a tracer checks that
   the traced function made none, since a compiled graph could not repeat them. */
extern NB_TLS unsigned nb__host_reads;

/* ---- text (src/core/text.c) ---- */
/* A growing, malloc'ed, NUL-terminated text; zero-initialise it; failed is set when memory ran out. */
typedef struct nb_text {
    char *s;
    size_t n, cap;
    bool failed;
} nb_text;
/* Appends formatted text (nothing once failed). */
void nb__text_printf(nb_text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- conversion helpers (src/core/dtype.c) ---- */
float nb__f16_to_f32(uint16_t h);
uint16_t nb__f32_to_f16(float f);
/* nb__bf16_to_f32 and nb__f32_to_bf16, inline: src/core/portable.h (shared with the CUDA kernels) */
/* Reads element i (of a dense array of dtype) as a double. */
double nb__load(const void *p, nb_dtype dtype, int64_t i);
/* Writes v as element i of a dense array of dtype. */
void nb__store(void *p, nb_dtype dtype, int64_t i, double v);

/* ---- random numbers (src/core/rng.c) ---- */
/* Reserves n counters of the global generator; returns the seed and the first counter. */
void nb__rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset);
/* Philox4x32-10: four 32-bit words for (seed, counter). */
void nb__philox(uint64_t seed, uint64_t counter, uint32_t out[4]);

/* ---- threads (src/core/threads.c) ---- */
/* Work (in elements) below which kernels stay serial. */
#define NB_PARALLEL_GRAIN 32768
int nb__threads(void);
/* Caps the kernels' threads for the calling thread (0 lifts the cap). */
void nb__limit_threads(int n);
/* Holds OpenMP dependencies (oneDNN, OpenBLAS's OpenMP build) to one thread on the calling
   thread until nb__omp_serial_end; returns what to restore. */
int nb__omp_serial_begin(void);
/* Sets the calling thread's OpenMP team to n threads (a one-piece oneDNN convolution, while
   the pool is idle) until nb__omp_serial_end; returns what to restore. */
int nb__omp_team_begin(int n);
/* Restores the calling thread's OpenMP team size saved by nb__omp_serial_begin or
   nb__omp_team_begin. */
void nb__omp_serial_end(int prev);

#endif
