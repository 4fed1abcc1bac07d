/* Convolution through oneDNN: the forward, the input gradient and the weight gradient run
   oneDNN's JIT kernels (AVX-512 where the CPU has it) on its blocked layouts, reordering from
   and to NCHW around each call (the reorders round to bf16 where autocast asks for bf16
   operands); and autocast's bf16 GEMM, a matmul primitive with sizes given at run time. Every
   call runs on the calling thread, with that thread's own primitive cache and stream: the CPU
   kernels split the batch into pieces fixed by shape and run the pieces on nabla's thread pool,
   and oneDNN runs each piece on one thread (its OpenMP threads would spin on the cores the pool
   needs). A forward whose batch is one piece (up to 16 samples: inference at batch 1) would
   leave all but one core idle, so it runs on an OpenMP team as large as the pool while the pool
   waits; a forward convolution sums each output over its inputs on one thread whatever the team,
   so results do not depend on the thread count (test_conv_torch checks 1, 2 and 3).
   Without libdnnl this file compiles to stubs. */
#include "dnnl_conv.h"
#include "../../core/core_impl.h"

#ifndef NABLA_HAVE_DNNL
int nb__dnnl_conv_forward(const nb_conv_shape *s, const float *x, const float *w, const float *b, float *y, int threads,
                          const nb_conv_const *wc) {
    (void)s; (void)x; (void)w; (void)b; (void)y; (void)threads; (void)wc;
    return 0;
}
int nb__dnnl_conv_backward_data(const nb_conv_shape *s, const float *dy, const float *w, float *dx) {
    (void)s; (void)dy; (void)w; (void)dx;
    return 0;
}
int nb__dnnl_conv_backward_weights(const nb_conv_shape *s, const float *x, const float *dy, float *dw) {
    (void)s; (void)x; (void)dy; (void)dw;
    return 0;
}
bool nb__dnnl_bf16_fast(void) { return false; }
bool nb__dnnl_conv_ready(int kind, const nb_conv_shape *s, bool bias) {
    (void)kind; (void)s; (void)bias;
    return false;
}
int nb__dnnl_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
                       int64_t ldb, float *C, int64_t ldc) {
    (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)A; (void)lda; (void)B; (void)ldb; (void)C; (void)ldc;
    return 0;
}
#else
#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

enum { KIND_FORWARD = NB_DNNL_FORWARD, KIND_BACKWARD_DATA = NB_DNNL_BACKWARD_DATA, KIND_BACKWARD_WEIGHTS = NB_DNNL_BACKWARD_WEIGHTS };

/* CPUID leaf 7: AVX512-BF16 is subleaf 1's EAX bit 5, AMX-BF16 subleaf 0's EDX bit 22. Other
   CPUs get the bf16 kernels only through oneDNN's emulation or reference code, slower than the
   f32 products on rounded operands that the callers run instead. */
static bool cpu_has_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (d & (1u << 22)) return true;
    return a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
#else
    return false;
#endif
}

bool nb__dnnl_bf16_fast(void) {
    static int fast = -1; /* decided once: every call of a process takes the same path */
    if (fast < 0) {
        const char *env = getenv("NABLA_BF16");
        fast = cpu_has_bf16() && !(env && !strcmp(env, "emulate"));
    }
    return fast;
}

/* Whether a primitive descriptor's kernel is oneDNN's reference code, which is correct and
   very slow: bf16 work is declined there (the callers round and run f32 kernels instead). */
static bool is_reference(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return true;
    return strstr(impl, "ref") != NULL;
}

typedef struct {
    bool used;
    int kind;
    bool bias;
    nb_conv_shape shape;
    dnnl_primitive_t prim;
    /* user (plain) memory, pointed at the caller's buffers each call */
    dnnl_memory_t in_user, w_user, out_user, b_mem;
    /* the primitive's own layouts and the reorders into and out of them (NULL when plain) */
    dnnl_memory_t in_mem, w_mem, out_mem;
    dnnl_primitive_t in_reorder, w_reorder, out_reorder;
    uint64_t last_use;
    int threads; /* the OpenMP team it was built for (oneDNN fixes its split at creation) */
} entry;

static dnnl_engine_t engine;
static bool broken;
static _Thread_local uint64_t clock_tick; /* each thread's cache ages by its own uses */

static void free_entry(entry *e) {
    dnnl_primitive_t prims[] = { e->prim, e->in_reorder, e->w_reorder, e->out_reorder };
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        if (prims[i]) dnnl_primitive_destroy(prims[i]);
    dnnl_memory_t mems[] = { e->in_user, e->w_user, e->out_user, e->b_mem, e->in_mem, e->w_mem, e->out_mem };
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    memset(e, 0, sizeof *e);
}

/* A memory object in the layout the primitive wants, and a reorder between it and the user's
   plain one (none when they are the same). */
static bool internal_memory(const dnnl_memory_desc_t *want, dnnl_memory_t user, bool to_internal, dnnl_memory_t *mem,
                            dnnl_primitive_t *reorder) {
    const dnnl_memory_desc_t *user_md;
    if (dnnl_memory_get_memory_desc(user, &user_md) != dnnl_success) return false;
    *mem = NULL;
    *reorder = NULL;
    if (dnnl_memory_desc_equal(user_md, want)) return true;
    if (dnnl_memory_create(mem, want, engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) return false;
    dnnl_primitive_desc_t rpd;
    dnnl_status_t st = to_internal ? dnnl_reorder_primitive_desc_create(&rpd, user_md, engine, want, engine, NULL)
                                   : dnnl_reorder_primitive_desc_create(&rpd, want, engine, user_md, engine, NULL);
    if (st != dnnl_success) return false;
    st = dnnl_primitive_create(reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return st == dnnl_success;
}

static bool build(entry *e, int kind, const nb_conv_shape *s, bool bias) {
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->shape = *s;
    e->bias = bias;
    dnnl_dims_t xd = { s->N, s->C, s->H, s->W }, yd = { s->N, s->O, s->OH, s->OW }, bd = { s->O };
    dnnl_dims_t strides = { s->sh, s->sw }, dil = { s->dh - 1, s->dw - 1 }, pl = { s->ph, s->pw };
    dnnl_dims_t pr = { (s->OH - 1) * s->sh + (s->kh - 1) * s->dh + 1 - s->H - s->ph,
                       (s->OW - 1) * s->sw + (s->kw - 1) * s->dw + 1 - s->W - s->pw };
    bool grouped = s->groups > 1;
    dnnl_dims_t wd5 = { s->groups, s->O / s->groups, s->C / s->groups, s->kh, s->kw }, wd4 = { s->O, s->C, s->kh, s->kw };
    dnnl_memory_desc_t x_any, w_any, y_any, x_u, w_u, y_u, b_md;
    /* under bf16 the two operands of the kind are bf16 inside oneDNN, the result f32:
       forward (x, w) -> y, data gradient (dy, w) -> dx, weight gradient (x, dy) -> dw */
    bool h = s->bf16 != 0;
    dnnl_data_type_t xt = h && kind != KIND_BACKWARD_DATA ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t wt = h && kind != KIND_BACKWARD_WEIGHTS ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t yt = h && kind != KIND_FORWARD ? dnnl_bf16 : dnnl_f32;
    bool ok = dnnl_memory_desc_init_by_tag(&x_any, 4, xd, xt, dnnl_format_tag_any) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&y_any, 4, yd, yt, dnnl_format_tag_any) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&w_any, grouped ? 5 : 4, grouped ? wd5 : wd4, wt, dnnl_format_tag_any) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&x_u, 4, xd, dnnl_f32, dnnl_nchw) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&y_u, 4, yd, dnnl_f32, dnnl_nchw) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&w_u, grouped ? 5 : 4, grouped ? wd5 : wd4, dnnl_f32, grouped ? dnnl_goihw : dnnl_oihw) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x) == dnnl_success;
    if (!ok) return false;
    /* the forward (the hint of the gradients) in the forward's own types */
    dnnl_memory_desc_t fx = x_any, fw = w_any, fy = y_any;
    if (h) {
        ok = dnnl_memory_desc_init_by_tag(&fx, 4, xd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&fw, grouped ? 5 : 4, grouped ? wd5 : wd4, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&fy, 4, yd, dnnl_f32, dnnl_format_tag_any) == dnnl_success;
        if (!ok) return false;
    }
    dnnl_convolution_desc_t fwd;
    if (dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &fx, &fw,
                                                   bias ? &b_md : NULL, &fy, strides, dil, pl, pr) != dnnl_success)
        return false;
    dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
    if (dnnl_primitive_desc_create(&fwd_pd, &fwd, NULL, engine, NULL) != dnnl_success) return false;
    if (kind == KIND_FORWARD) pd = fwd_pd;
    else if (kind == KIND_BACKWARD_WEIGHTS) {
        dnnl_convolution_desc_t bwd;
        if (dnnl_dilated_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &x_any, &w_any, NULL, &y_any,
                                                                strides, dil, pl, pr) != dnnl_success ||
            dnnl_primitive_desc_create(&pd, &bwd, NULL, engine, fwd_pd) != dnnl_success) {
            dnnl_primitive_desc_destroy(fwd_pd);
            return false;
        }
        dnnl_primitive_desc_destroy(fwd_pd);
    } else {
        dnnl_convolution_desc_t bwd;
        if (dnnl_dilated_convolution_backward_data_desc_init(&bwd, dnnl_convolution_direct, &x_any, &w_any, &y_any, strides,
                                                             dil, pl, pr) != dnnl_success ||
            dnnl_primitive_desc_create(&pd, &bwd, NULL, engine, fwd_pd) != dnnl_success) {
            dnnl_primitive_desc_destroy(fwd_pd);
            return false;
        }
        dnnl_primitive_desc_destroy(fwd_pd);
    }
    /* the three tensors as (in, w, out): forward (x, w, y), data gradient (dy, w, dx), weight
       gradient (x, dy, dw), with out the one written */
    const dnnl_memory_desc_t *in_md, *w_md, *out_md, *in_u = &x_u, *w_u2 = &w_u, *out_u = &y_u;
    if (kind == KIND_FORWARD) {
        in_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        out_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    } else if (kind == KIND_BACKWARD_DATA) {
        in_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
        w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        out_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0);
        in_u = &y_u;
        out_u = &x_u;
    } else {
        in_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
        out_md = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
        w_u2 = &y_u;
        out_u = &w_u;
    }
    ok = !(h && is_reference(pd)) && dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
         dnnl_memory_create(&e->in_user, in_u, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&e->w_user, w_u2, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&e->out_user, out_u, engine, DNNL_MEMORY_NONE) == dnnl_success &&
         (!bias || dnnl_memory_create(&e->b_mem, &b_md, engine, DNNL_MEMORY_NONE) == dnnl_success) &&
         internal_memory(in_md, e->in_user, true, &e->in_mem, &e->in_reorder) &&
         internal_memory(w_md, e->w_user, true, &e->w_mem, &e->w_reorder) &&
         internal_memory(out_md, e->out_user, false, &e->out_mem, &e->out_reorder);
    dnnl_primitive_desc_destroy(pd);
    if (!ok) free_entry(e);
    else e->used = true;
    return ok;
}

static entry *lookup(entry *cache, int size, int kind, const nb_conv_shape *s, bool bias, int threads) {
    entry *oldest = &cache[0];
    for (int i = 0; i < size; i++) {
        entry *e = &cache[i];
        if (e->used && e->kind == kind && e->bias == bias && e->threads == threads && memcmp(&e->shape, s, sizeof *s) == 0)
            return e;
        if (!e->used || (oldest->used && e->last_use < oldest->last_use)) oldest = e;
    }
    if (oldest->used) free_entry(oldest);
    if (!build(oldest, kind, s, bias)) return NULL;
    oldest->threads = threads;
    return oldest;
}

static bool exec_reorder(dnnl_stream_t stream, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to) {
    dnnl_exec_arg_t args[] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, to } };
    return dnnl_primitive_execute(r, stream, 2, args) == dnnl_success;
}

/* Creates the shared engine (once per process: every piece of every call asks). */
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static void make_engine(void) {
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        broken = true; /* no usable oneDNN: the callers fall back for good */
}

/* The shared engine; false when oneDNN cannot run here. */
static bool ensure_engine(void) {
    pthread_once(&engine_once, make_engine);
    return !broken;
}

/* Runs the cached primitive for (kind, s) on the given buffers through stream. */
static dnnl_memory_t cached_weights(dnnl_stream_t stream, const entry *e, const nb_conv_const *wc, const float *w);

static int execute(entry *cache, int size, dnnl_stream_t stream, int kind, const nb_conv_shape *s, const float *in,
                   const float *w, const float *b, float *out, int threads, const nb_conv_const *wc) {
    int rc = 0;
    entry *e = lookup(cache, size, kind, s, b != NULL, threads);
    if (!e) return 0; /* a shape oneDNN declines: fall back */
    e->last_use = ++clock_tick;
    rc = -1;
    if (dnnl_memory_set_data_handle(e->in_user, (void *)in) != dnnl_success ||
        dnnl_memory_set_data_handle(e->w_user, (void *)w) != dnnl_success ||
        dnnl_memory_set_data_handle(e->out_user, out) != dnnl_success ||
        (b && dnnl_memory_set_data_handle(e->b_mem, (void *)b) != dnnl_success))
        goto fail;
    dnnl_memory_t in_m = e->in_mem ? e->in_mem : e->in_user, w_m = e->w_mem ? e->w_mem : e->w_user;
    dnnl_memory_t out_m = e->out_mem ? e->out_mem : e->out_user;
    if (e->in_reorder && !exec_reorder(stream, e->in_reorder, e->in_user, in_m)) goto fail;
    if (e->w_reorder) {
        dnnl_memory_t kept = wc && wc->id ? cached_weights(stream, e, wc, w) : NULL;
        if (kept) w_m = kept;
        else if (!exec_reorder(stream, e->w_reorder, e->w_user, w_m)) goto fail;
    }
    dnnl_exec_arg_t args[4];
    int n = 0;
    if (kind == KIND_FORWARD) {
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, in_m };
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, w_m };
        if (b) args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, e->b_mem };
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_DST, out_m };
    } else if (kind == KIND_BACKWARD_DATA) {
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, in_m };
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, w_m };
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_SRC, out_m };
    } else {
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, in_m };
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_DST, w_m };
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_DIFF_WEIGHTS, out_m };
    }
    if (dnnl_primitive_execute(e->prim, stream, n, args) != dnnl_success) goto fail;
    if (e->out_reorder && !exec_reorder(stream, e->out_reorder, out_m, e->out_user)) goto fail;
    if (dnnl_stream_wait(stream) != dnnl_success) goto fail;
    return 1;
fail:
    nb__error("nb_conv2d: oneDNN failed on input [%lld, %lld, %lld, %lld] with %lld filters of %lldx%lld",
              (long long)s->N, (long long)s->C, (long long)s->H, (long long)s->W, (long long)s->O, (long long)s->kh,
              (long long)s->kw);
    return rc;
}

/* Pieces run on many threads at once, each with its own cache and stream, and oneDNN held to
   one thread inside each (its own splits would depend on the count). A layer needs up to six
   entries (three kinds, a full piece and a shorter last one). */
#define LOCAL_CACHE_SIZE 24
static _Thread_local entry local_cache[LOCAL_CACHE_SIZE];
static _Thread_local dnnl_stream_t local_stream;
static pthread_key_t local_key;
static pthread_once_t local_key_once = PTHREAD_ONCE_INIT;

/* autocast's bf16 GEMMs on this thread, one per layout of the operands (ta * 2 + tb): built
   once, their sizes given at each call (state 0: not tried yet, 1: built, -1: declined) */
static _Thread_local dnnl_primitive_t local_gemm[4];
static _Thread_local int local_gemm_state[4];

/* Constant weights in the layouts the forwards on this thread asked for (nb_conv_const), the
   least recently used dropped past a count and a byte budget. */
#define WEIGHT_CACHE_SIZE 64
#define WEIGHT_CACHE_BYTES ((size_t)512 << 20)
typedef struct {
    uint64_t id, last_use;
    unsigned version;
    const float *w;
    size_t bytes;
    dnnl_memory_t mem; /* NULL: a free slot */
} kept_weights;
static _Thread_local kept_weights local_weights[WEIGHT_CACHE_SIZE];
static _Thread_local size_t local_weight_bytes;
static _Thread_local uint64_t local_constants_freed; /* nb__constants_freed when last looked at */

static void drop_weights(kept_weights *k) {
    if (k->mem) dnnl_memory_destroy(k->mem);
    local_weight_bytes -= k->bytes;
    memset(k, 0, sizeof *k);
}

/* w (constant, per wc) in the layout of e's forward: the copy kept from an earlier call, or a new
   one reordered now and kept; NULL when it cannot be kept (the caller reorders as before). */
static dnnl_memory_t cached_weights(dnnl_stream_t stream, const entry *e, const nb_conv_const *wc, const float *w) {
    const dnnl_memory_desc_t *want;
    if (dnnl_memory_get_memory_desc(e->w_mem, &want) != dnnl_success) return NULL;
    /* a model was freed since: its weights kept here would never match again, so let them go
       (all of them: which ones were its is not recorded) rather than hold them until evicted */
    uint64_t freed = atomic_load(&nb__constants_freed);
    if (freed != local_constants_freed) {
        for (int i = 0; i < WEIGHT_CACHE_SIZE; i++)
            if (local_weights[i].mem) drop_weights(&local_weights[i]);
        local_constants_freed = freed;
    }
    kept_weights *slot = NULL;
    for (int i = 0; i < WEIGHT_CACHE_SIZE; i++) {
        kept_weights *k = &local_weights[i];
        const dnnl_memory_desc_t *md;
        if (k->mem && k->id == wc->id && k->version == wc->version && k->w == w &&
            dnnl_memory_get_memory_desc(k->mem, &md) == dnnl_success && dnnl_memory_desc_equal(md, want)) {
            k->last_use = clock_tick;
            return k->mem;
        }
        if (!slot || !k->mem || (slot->mem && k->last_use < slot->last_use)) slot = k;
    }
    size_t bytes = dnnl_memory_desc_get_size(want);
    if (bytes > WEIGHT_CACHE_BYTES) return NULL;
    if (slot->mem) drop_weights(slot);
    while (local_weight_bytes + bytes > WEIGHT_CACHE_BYTES) { /* the least recently used go */
        kept_weights *old = NULL;
        for (int i = 0; i < WEIGHT_CACHE_SIZE; i++)
            if (local_weights[i].mem && (!old || local_weights[i].last_use < old->last_use)) old = &local_weights[i];
        drop_weights(old);
    }
    dnnl_memory_t mem;
    if (dnnl_memory_create(&mem, want, engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) return NULL;
    if (!exec_reorder(stream, e->w_reorder, e->w_user, mem)) {
        dnnl_memory_destroy(mem);
        return NULL;
    }
    *slot = (kept_weights){ wc->id, clock_tick, wc->version, w, bytes, mem };
    local_weight_bytes += bytes;
    return mem;
}

static void local_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < WEIGHT_CACHE_SIZE; i++)
        if (local_weights[i].mem) drop_weights(&local_weights[i]);
    for (int i = 0; i < LOCAL_CACHE_SIZE; i++)
        if (local_cache[i].used) free_entry(&local_cache[i]);
    for (int i = 0; i < 4; i++) {
        if (local_gemm[i]) dnnl_primitive_destroy(local_gemm[i]);
        local_gemm[i] = NULL;
        local_gemm_state[i] = 0;
    }
    if (local_stream) dnnl_stream_destroy(local_stream);
    local_stream = NULL;
}

static bool local_key_made;
static void make_local_key(void) { local_key_made = pthread_key_create(&local_key, local_exit) == 0; }

/* At unload: this thread's primitives are freed and the thread-exit hook removed (it would run
   in unmapped code). Runs after the pool has joined its workers, which freed theirs as they ended. */
__attribute__((destructor(101))) static void local_unload(void) {
    if (local_key_made) {
        pthread_key_delete(local_key);
        local_key_made = false;
    }
    local_exit(NULL);
}

/* The engine and this thread's stream (made on first use); false when oneDNN cannot run. */
static bool ensure_local(void) {
    if (!ensure_engine()) return false;
    if (!local_stream) {
        if (dnnl_stream_create(&local_stream, engine, dnnl_stream_default_flags) != dnnl_success) return false;
        pthread_once(&local_key_once, make_local_key);
        pthread_setspecific(local_key, &local_stream);
    }
    return true;
}

static int run_local(int kind, const nb_conv_shape *s, const float *in, const float *w, const float *b, float *out,
                     int threads, const nb_conv_const *wc) {
    if (!ensure_local()) return 0;
    int prev = nb__omp_team_begin(threads);
    int rc = execute(local_cache, LOCAL_CACHE_SIZE, local_stream, kind, s, in, w, b, out, threads, wc);
    nb__omp_serial_end(prev);
    return rc;
}

int nb__dnnl_conv_forward(const nb_conv_shape *s, const float *x, const float *w, const float *b, float *y, int threads,
                          const nb_conv_const *wc) {
    return run_local(KIND_FORWARD, s, x, w, b, y, threads > 1 ? threads : 1, wc);
}

bool nb__dnnl_conv_ready(int kind, const nb_conv_shape *s, bool bias) {
    if (s->bf16 && !nb__dnnl_bf16_fast()) return false;
    if (!ensure_local()) return false;
    int prev = nb__omp_serial_begin();
    entry *e = lookup(local_cache, LOCAL_CACHE_SIZE, kind, s, bias, 1);
    nb__omp_serial_end(prev);
    return e != NULL;
}

/* The bf16 x bf16 -> f32 matmul primitive for one layout of the operands (ta, tb: stored
   transposed), every size and leading dimension left to run time, so one serves every product. */
static bool build_gemm(bool ta, bool tb, dnnl_primitive_t *prim) {
    dnnl_dims_t rt = { DNNL_RUNTIME_DIM_VAL, DNNL_RUNTIME_DIM_VAL }, rows = { DNNL_RUNTIME_DIM_VAL, 1 },
                cols = { 1, DNNL_RUNTIME_DIM_VAL };
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_memory_desc_init_by_strides(&a_md, 2, rt, dnnl_bf16, ta ? cols : rows) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&b_md, 2, rt, dnnl_bf16, tb ? cols : rows) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&c_md, 2, rt, dnnl_f32, rows) == dnnl_success &&
              dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md) == dnnl_success &&
              dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL) == dnnl_success;
    ok = ok && !is_reference(pd) && dnnl_primitive_create(prim, pd) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* A memory object over a rows x cols matrix at p with leading dimension ld, stored row-major
   or (trans) column-major. */
static dnnl_memory_t matrix(int64_t rows, int64_t cols, int64_t ld, bool trans, dnnl_data_type_t t, const void *p) {
    dnnl_dims_t d = { rows, cols }, st = { trans ? 1 : ld, trans ? ld : 1 };
    dnnl_memory_desc_t md;
    dnnl_memory_t m = NULL;
    if (dnnl_memory_desc_init_by_strides(&md, 2, d, t, st) != dnnl_success ||
        dnnl_memory_create(&m, &md, engine, (void *)p) != dnnl_success)
        return NULL;
    return m;
}

int nb__dnnl_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
                       int64_t ldb, float *C, int64_t ldc) {
    if (!nb__dnnl_bf16_fast() || !ensure_local()) return 0;
    int prev = nb__omp_serial_begin();
    int layout = ta * 2 + tb;
    if (local_gemm_state[layout] == 0) local_gemm_state[layout] = build_gemm(ta, tb, &local_gemm[layout]) ? 1 : -1;
    int rc = 0;
    if (local_gemm_state[layout] > 0) {
        dnnl_memory_t a = matrix(M, K, lda, ta, dnnl_bf16, A), b = matrix(K, N, ldb, tb, dnnl_bf16, B),
                      c = matrix(M, N, ldc, false, dnnl_f32, C);
        dnnl_exec_arg_t args[] = { { DNNL_ARG_SRC, a }, { DNNL_ARG_WEIGHTS, b }, { DNNL_ARG_DST, c } };
        rc = a && b && c && dnnl_primitive_execute(local_gemm[layout], local_stream, 3, args) == dnnl_success &&
                     dnnl_stream_wait(local_stream) == dnnl_success ? 1 : -1;
        if (rc < 0)
            nb__error("nb_matmul: oneDNN's bf16 product failed on [%lld, %lld] x [%lld, %lld]", (long long)M, (long long)K,
                      (long long)K, (long long)N);
        dnnl_memory_t ms[] = { a, b, c };
        for (int i = 0; i < 3; i++)
            if (ms[i]) dnnl_memory_destroy(ms[i]);
    }
    nb__omp_serial_end(prev);
    return rc;
}

int nb__dnnl_conv_backward_data(const nb_conv_shape *s, const float *dy, const float *w, float *dx) {
    return run_local(KIND_BACKWARD_DATA, s, dy, w, NULL, dx, 1, NULL);
}

int nb__dnnl_conv_backward_weights(const nb_conv_shape *s, const float *x, const float *dy, float *dw) {
    return run_local(KIND_BACKWARD_WEIGHTS, s, x, dy, NULL, dw, 1, NULL);
}
#endif
