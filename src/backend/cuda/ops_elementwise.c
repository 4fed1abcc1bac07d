/* The CUDA backend's entry points of the elementwise ops, casts and copies (cast, copy, assign,
   cat, slice's backward) and creation (full, arange, rand, randn): nabla's tensors turned into
   views for k_elementwise.cu's launchers. */
#include "ops_cuda.h"
#include "ops_util.h"

/* ---------- the math ops: an entry per elementwise op of ops.def, generated ---------- */
/* Binary ops and comparisons: inputs of one dtype (dispatch promotes them). */
static int binary(const char *fn, nb_op_id op, nb_tensor *out, nb_tensor *const *in) {
    nb__k_view o = nb__cu_view(out), a = nb__cu_view_as(in[0], &out->shape), b = nb__cu_view_as(in[1], &out->shape);
    return nb__cu_check(fn, nb__k_binary(op, &o, &a, &b));
}

/* Unary ops: args.f[0] and f[1] are their scalars (clamp's bounds). */
static int unary(const char *fn, nb_op_id op, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    nb__k_view o = nb__cu_view(out), x = nb__cu_view_as(in[0], &out->shape);
    return nb__cu_check(fn, nb__k_unary(op, &o, &x, args->f[0], args->f[1]));
}

/* By ops.def's fuse column: every EW, CHEAP and CMP op of one or two inputs gets its entry
   nb__cuda_<name>; where and the MOVE ops (copy, cast) move elements of any dtype and are
   written by hand. */
#define ENTRY_1(ID, name)                                                                          \
    int nb__cuda_##name(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { \
        (void)nin;                                                                                 \
        return unary(#name, NB_OP_##ID, out, in, args);                                            \
    }
#define ENTRY_2(ID, name)                                                                          \
    int nb__cuda_##name(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) { \
        (void)nin; (void)args;                                                                     \
        return binary(#name, NB_OP_##ID, out, in);                                                 \
    }
#define ENTRY_3(ID, name)
#define ENTRY_NONE(ID, name, nin)
#define ENTRY_EW(ID, name, nin) ENTRY_##nin(ID, name)
#define ENTRY_CHEAP ENTRY_EW
#define ENTRY_CMP ENTRY_EW
#define ENTRY_MOVE ENTRY_NONE /* copy and cast: below */
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) ENTRY_##fuse(ID, name, nin)
#define NB_OP_NO_KERNEL(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx)
#include "../../ops/ops.def"
#undef NB_OP
#undef NB_OP_NO_KERNEL

int nb__cuda_where(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    nb__k_view o = nb__cu_view(out), c = nb__cu_view_as(in[0], &out->shape), a = nb__cu_view_as(in[1], &out->shape),
             b = nb__cu_view_as(in[2], &out->shape);
    return nb__cu_check("where", nb__k_where(&o, &c, &a, &b));
}

/* ---------- casts and copies ---------- */
/* Writes src (any dtype, broadcast to dst's shape) into dst converted to dst's dtype. */
static int convert(const char *fn, const nb__k_view *dst, nb_tensor *src) {
    nb_shape s = { dst->ndim, { 0 } };
    for (int d = 0; d < dst->ndim; d++) s.dim[d] = dst->shape[d];
    nb__k_view x = nb__cu_view_as(src, &s);
    return nb__cu_check(fn, nb__k_cast(dst, &x));
}

int nb__cuda_cast(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    nb__k_view o = nb__cu_view(out);
    return convert("cast", &o, in[0]);
}

int nb__cuda_copy(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    nb__k_view o = nb__cu_view(out);
    return convert("copy", &o, in[0]);
}

/* in[0] (out itself, any strides) = in[1] converted; a source in the same storage may overlap
   the destination, so it goes through a dense copy first, as on the cpu. */
int nb__cuda_assign(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin; (void)args;
    nb_tensor *src = in[1];
    nb__k_view o = nb__cu_view(out);
    atomic_fetch_add_explicit(&out->storage->version, 1, memory_order_relaxed);
    if (src->storage != out->storage) return convert("assign", &o, src);
    size_t bytes = (size_t)src->numel * nb_dtype_size(src->dtype);
    void *tmp = nb__k_scratch_alloc(bytes ? bytes : 1);
    if (!tmp) {
        nb__error("nb_assign: cuda: out of device memory for a %zu-byte copy of the source", bytes);
        return -1;
    }
    nb__k_view t = nb__cu_view_dense(tmp, src->dtype, &src->shape), s = nb__cu_view(src);
    int rc = nb__cu_check("assign", nb__k_cast(&t, &s));
    if (rc == 0) {
        nb__k_view tb = nb__cu_broadcast(t, &out->shape); /* the dense copy read as src would be */
        rc = nb__cu_check("assign", nb__k_cast(&o, &tb));
    }
    nb__k_scratch_free(tmp, bytes ? bytes : 1);
    return rc;
}

/* The region of out that src fills: shape src's, element offset `at`, strides out's (with the
   step along axis multiplied by step). */
static nb__k_view region(const nb_tensor *out, const nb_tensor *src, int axis, int64_t at, int64_t step) {
    nb__k_view r = nb__cu_view(out);
    r.data = (char *)r.data + at * (int64_t)nb_dtype_size(out->dtype);
    r.numel = src->numel;
    for (int d = 0; d < src->shape.ndim; d++) r.shape[d] = src->shape.dim[d];
    if (out->shape.ndim > 0) r.stride[axis] *= step;
    return r;
}

int nb__cuda_cat(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    int axis = (int)args->i[0];
    int64_t at = 0;
    for (int k = 0; k < nin; k++) {
        if (in[k]->numel > 0) {
            nb__k_view r = region(out, in[k], axis, at * out->stride[axis], 1);
            if (convert("cat", &r, in[k]) < 0) return -1;
        }
        at += in[k]->shape.dim[axis];
    }
    return 0;
}

/* out = zeros with the slice [i[1] : : i[3]] along axis i[0] taken from the gradient in[0] */
int nb__cuda_slice_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    if (nb__cu_check("slice_backward", nb__k_zero(nb__data(out), (size_t)out->numel * nb_dtype_size(out->dtype))) < 0)
        return -1;
    if (in[0]->numel == 0) return 0;
    int axis = (int)args->i[0];
    nb__k_view r = region(out, in[0], axis, args->i[1] * out->stride[axis], args->i[3]);
    return convert("slice_backward", &r, in[0]);
}

/* ---------- creation ---------- */
int nb__cuda_full(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin;
    nb__k_view o = nb__cu_view(out);
    return nb__cu_check("full", nb__k_fill(&o, args->f[0]));
}

int nb__cuda_arange(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin;
    nb__k_view o = nb__cu_view(out);
    return nb__cu_check("arange", nb__k_arange(&o, args->f[0], args->f[1]));
}

/* The generator is counter-based (Philox, src/core/rng.c): the device draws from the counters the
   cpu kernel would reserve, so a seed gives the cpu's values (normals up to the last bits of the
   device's double log, cos and sin). */
int nb__cuda_rand(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin; (void)args;
    int64_t n = out->numel;
    uint64_t seed, offset;
    nb__rng_reserve((uint64_t)(out->dtype == NB_F64 ? 2 * n : n), &seed, &offset);
    nb__k_view o = nb__cu_view(out);
    return nb__cu_check("rand", nb__k_rand(&o, seed, offset, 0));
}

int nb__cuda_randn(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)in; (void)nin; (void)args;
    uint64_t seed, offset;
    nb__rng_reserve((uint64_t)((out->numel + 1) / 2) * 4, &seed, &offset); /* a Box-Muller pair a counter */
    nb__k_view o = nb__cu_view(out);
    return nb__cu_check("randn", nb__k_rand(&o, seed, offset, 1));
}
