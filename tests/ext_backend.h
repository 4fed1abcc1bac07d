/* A backend built only in the tests: the cpu kernels behind the NB_EXT device type, over
   memory of its own (each buffer's size recorded and checked at free), counting its kernel
   calls, copies and synchronisations. Optionally with ops left out (erf, gelu) and tanh
   refused at f64, to reach the "no kernel" errors; optionally with a lowering of its own for
   compiled graphs (unfused, node by node on its kernels). Include once per test program. */
#ifndef NABLA_TEST_EXT_BACKEND_H
#define NABLA_TEST_EXT_BACKEND_H

#include "../src/ops/ops_impl.h"
#include "../src/compile/ir.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long live_bytes, kernel_calls, copies, syncs, graph_runs;

#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx)                                      \
    int nb__cpu_##name(nb_tensor *, nb_tensor *const *, int, const nb_op_args *);            \
    static int ext_##name(nb_tensor *o, nb_tensor *const *i, int n, const nb_op_args *a) {  \
        atomic_fetch_add(&kernel_calls, 1);                                                  \
        return nb__cpu_##name(o, i, n, a);                                                   \
    }
#define NB_OP_NO_KERNEL(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx)
#include "../src/ops/ops.def"
#undef NB_OP
#undef NB_OP_NO_KERNEL

static nb_kernel_fn ext_kernels[NB_OP_COUNT] = {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) [NB_OP_##ID] = ext_##name,
#define NB_OP_NO_KERNEL(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx)
#include "../src/ops/ops.def"
#undef NB_OP
#undef NB_OP_NO_KERNEL
};

static bool ext_partial; /* erf and gelu left out, tanh f32 only */
static bool xb_supports(nb_op_id op, nb_dtype dtype) { return !(ext_partial && op == NB_OP_TANH && dtype == NB_F64); }
static int xb_count(void) { return 2; }

/* Memory of its own, with a header recording the size, so a leak or a wrong size shows. */
static void *xb_alloc(size_t bytes, int index) {
    (void)index;
    size_t *p = malloc(bytes + 64);
    if (!p) return NULL;
    p[0] = bytes;
    atomic_fetch_add(&live_bytes, (long)bytes);
    return (char *)p + 64;
}
static void xb_free(void *q, size_t bytes, int index) {
    (void)index;
    size_t *p = (size_t *)((char *)q - 64);
    if (p[0] != bytes) abort(); /* a size that does not match what was allocated */
    atomic_fetch_sub(&live_bytes, (long)bytes);
    free(p);
}
static int xb_copy(nb_tensor *dst, const nb_tensor *src) {
    atomic_fetch_add(&copies, 1);
    memcpy(nb__data(dst), nb__data(src), (size_t)dst->numel * nb__esize(dst->dtype));
    return 0;
}
static int xb_sync(int index) {
    (void)index;
    atomic_fetch_add(&syncs, 1);
    return 0;
}

/* The lowering: no passes of its own, nothing to build; a run calls the backend's kernels node by
   node, and copies what an nb_to uploads. It runs no fused kernel, so the compiler leaves every op unfused for it. */
static nb_tensor *xb_run(cgraph *g, nb_tensor *const *inputs, int n) {
    (void)n;
    atomic_fetch_add(&graph_runs, 1);
    nb_graph_frame f;
    if (nb__frame_begin(g, inputs, &f) < 0) return NULL;
    bool ok = true;
    for (int i = 0; i < g->nn && ok; i++) {
        const cnode *nd = &g->nodes[i];
        if (nd->dead || nb__is_view(nd->op)) continue;
        nb_tensor *in[16];
        for (int k = 0; k < nd->nin && k < 16; k++) in[k] = f.vt[nd->in[k]];
        if (nd->op == NB_OP_TO) { /* a host input or capture uploaded (the optimizer's coefficients) */
            ok = nb__copy_between(f.vt[nd->out], in[0]) == 0;
            continue;
        }
        nb_kernel_fn kern = nd->op >= 0 && nd->nin <= 16 ? ext_kernels[nd->op] : NULL;
        if (!kern) nb__error("ext lowering: no kernel for node %d", i);
        ok = kern && kern(f.vt[nd->out], in, nd->nin, &nd->args) == 0;
    }
    return nb__frame_end(g, inputs, &f, ok);
}

static const nb_lowering ext_lowering = { .fuses = false, .run = xb_run };

static nb_backend ext_backend = {
    .name = "ext", .type = NB_EXT, .kernels = ext_kernels, .supports = xb_supports, .device_count = xb_count,
    .alloc = xb_alloc, .free = xb_free, .copy = xb_copy, .sync = xb_sync,
};

/* Registers the test backend for NB_EXT; partial leaves erf and gelu out and tanh at f64. */
static void ext_backend_register(bool partial) {
    ext_partial = partial;
    ext_kernels[NB_OP_ERF] = partial ? NULL : ext_erf;
    ext_kernels[NB_OP_GELU] = partial ? NULL : ext_gelu;
    nb__backend_register(&ext_backend);
}

/* Gives the test backend its lowering (compiled graphs run on it) or takes it away. */
static inline void ext_backend_lowered(bool on) { ext_backend.lower = on ? &ext_lowering : NULL; }

#endif
