/* The backend interface, proved with a backend built only here: the cpu kernels behind the
   NB_EXT device type, over memory of its own, with a few ops left out. Tensors move to it and
   back, dispatch runs its kernels, a missing op and mixed devices give their errors, autograd
   and the optimizers run on it, nb_module_to moves parameters and optimizer state, the data
   loader delivers batches there, and compiled graphs run through its lowering; host_call (a
   function of the program's own as an op) runs at every replay of a cpu graph. */
#include "test_util.h"
#include <unistd.h>

#include "ext_backend.h"
#include "train_step.h"
#include "gpt_model.h"

static const nb_device cpu = { NB_CPU, 0 }, ext0 = { NB_EXT, 0 }, ext1 = { NB_EXT, 1 };

static bool on(const nb_tensor *t, nb_device d) {
    nb_device x = nb_device_of(t);
    return t && x.type == d.type && x.index == d.index;
}

/* Fails unless a (any device) and b hold the same values, to within tol. */
static void assert_close(nb_tensor *a, nb_tensor *b, double tol) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(nb_numel(a), nb_numel(b));
    nb_tensor *d = nb_to(nb_cast(nb_sub(nb_to(a, cpu), nb_to(b, cpu)), NB_F64), cpu);
    double m = nb_numel(d) ? nb_item(nb_max(nb_reshape(nb_abs(d), NB_SHAPE(-1)), 0, false)) : 0;
    if (!(m <= tol)) fail_msg("tensors differ by %g (tolerance %g)", m, tol);
}

static int setup(void **state) {
    (void)state;
    nb_error_clear();
    ext_backend_register(true);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    nb__backend_unregister(NB_EXT);
    return 0;
}

/* ---- the tests ---- */
static void test_registry_and_device_queries(void **state) {
    (void)state;
    nb__backend_unregister(NB_EXT);
    assert_int_equal(nb_device_count(NB_EXT), 0);
    assert_false(nb_device_available(ext0));
    nb_scope *s = nb_scope_begin();
    assert_null(nb_to(nb_ones(NB_SHAPE(2), NB_F32), ext0));
    ASSERT_ERROR_CONTAINS("nb_to: device ext:0 is not available: this build of nabla has no ext backend");
    nb_scope_end(s);
    ext_backend_register(true);
    assert_int_equal(nb_device_count(NB_CPU), 1);
    assert_int_equal(nb_device_count(NB_EXT), 2);
    assert_true(nb_device_available(ext1));
    assert_false(nb_device_available((nb_device){ NB_EXT, 2 }));
    assert_false(nb_device_available((nb_device){ NB_CUDA, nb_cuda_device_count() })); /* one past the last GPU */
    long before = syncs;
    assert_int_equal(nb_synchronize(ext1), 0);
    assert_int_equal(syncs, before + 1);
    assert_int_equal(nb_synchronize(cpu), 0);
    assert_int_equal(nb_synchronize((nb_device){ NB_EXT, 5 }), -1);
    ASSERT_ERROR_CONTAINS("nb_synchronize: device ext:5 is not available: the ext backend sees 2 devices");
    nb_device p = nb_device_parse("ext:1");
    assert_int_equal(p.type, NB_EXT);
    assert_int_equal(p.index, 1);
}

static void test_tensors_move_there_and_back(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(1);
    nb_tensor *x = nb_randn(NB_SHAPE(3, 5), NB_F32);
    long bytes = live_bytes;
    nb_tensor *y = nb_to(x, ext0);
    assert_true(on(y, ext0));
    assert_int_equal(live_bytes, bytes + 60);
    nb_tensor *back = nb_to(y, cpu);
    assert_true(on(back, cpu));
    assert_memory_equal(nb_data_ptr(back), nb_data_ptr(x), 60);
    /* a strided view goes dense */
    nb_tensor *t = nb_to(nb_transpose(y, 0, 1), cpu);
    assert_close(t, nb_transpose(x, 0, 1), 0);
    /* host reads of a device tensor */
    float row[5];
    assert_int_equal(nb_copy_to(nb_slice(y, 0, 1, 2, 1), row, sizeof row), 0);
    assert_memory_equal(row, (float *)nb_data_ptr(x) + 5, sizeof row);
    assert_true(nb_item(nb_slice(nb_slice(y, 0, 2, 3, 1), 1, 4, 5, 1)) == ((float *)nb_data_ptr(x))[14]);
    char buf[512];
    nb_format(nb_ones(NB_SHAPE(2), NB_F32), buf, sizeof buf);
    nb_format(nb_to(nb_ones(NB_SHAPE(2), NB_F32), ext1), buf, sizeof buf);
    assert_string_equal(buf, "tensor([1., 1.], device='ext:1')");
    assert_null(nb_data_ptr(y));
    ASSERT_ERROR_CONTAINS("is not a contiguous CPU tensor");
    /* an empty tensor there and back */
    nb_tensor *e = nb_to(nb_zeros(NB_SHAPE(0, 3), NB_F32), ext0);
    assert_true(on(e, ext0));
    assert_int_equal(nb_numel(nb_to(nb_sum(e, 0, false), cpu)), 3);
    nb_scope_end(s);
    assert_int_equal(live_bytes, bytes); /* every device buffer went with its last tensor */
}

static void test_dispatch_runs_the_backends_kernels(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_arange(0, 6, 1, NB_F32);
    nb_tensor *y = nb_to(x, ext0);
    long calls = kernel_calls;
    nb_tensor *z = nb_add(nb_mul(y, y), y);
    assert_true(on(z, ext0));
    assert_int_equal(kernel_calls, calls + 2);
    assert_close(z, nb_add(nb_mul(x, x), x), 0);
    /* creation on a device, reductions, views and promotion stay there */
    nb_tensor *m = nb_sum(nb_reshape(nb_cast(z, NB_F64), NB_SHAPE(2, 3)), 1, false);
    assert_true(on(m, ext0));
    assert_int_equal(nb_dtype_of(m), NB_F64);
    assert_true(on(nb_zeros_like(y), ext0));
    assert_true(on(nb_full_like(y, 2), ext0));
    /* a 0-d cpu tensor joins the op's device, as a cpu scalar joins a cuda op in torch */
    nb_tensor *w = nb_mul(y, nb_scalar(3));
    assert_true(on(w, ext0));
    assert_close(w, nb_mul_scalar(x, 3), 0);
    /* matmul, softmax and a host-read of the result */
    nb_tensor *a = nb_to(nb_reshape(x, NB_SHAPE(2, 3)), ext0);
    nb_tensor *p = nb_softmax(nb_matmul(a, nb_transpose(a, 0, 1)), -1);
    assert_true(on(p, ext0));
    assert_close(p, nb_softmax(nb_matmul(nb_reshape(x, NB_SHAPE(2, 3)), nb_transpose(nb_reshape(x, NB_SHAPE(2, 3)), 0, 1)), -1), 1e-7);
    nb_scope_end(s);
}

static void test_missing_kernels_and_mixed_devices(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_ones(NB_SHAPE(4), NB_F32);
    nb_tensor *y = nb_to(x, ext0);
    assert_null(nb_erf(y));
    ASSERT_ERROR_CONTAINS("nb_erf: no kernel for ext");
    assert_non_null(nb_tanh(y));
    assert_null(nb_tanh(nb_cast(y, NB_F64)));
    ASSERT_ERROR_CONTAINS("nb_tanh: no kernel for ext at dtype f64");
    assert_null(nb_add(y, x));
    ASSERT_ERROR_CONTAINS("nb_add: inputs are on two devices, ext:0 (input 0) and cpu (input 1); move one with nb_to");
    assert_null(nb_add(y, nb_to(x, ext1)));
    ASSERT_ERROR_CONTAINS("nb_add: inputs are on two devices, ext:0 (input 0) and ext:1 (input 1)");
    /* a 0-d device tensor does not join a cpu op (torch refuses it too) */
    assert_null(nb_add(x, nb_to(nb_scalar(1), ext0)));
    ASSERT_ERROR_CONTAINS("inputs are on two devices, cpu (input 0) and ext:0 (input 1)");
    assert_null(nb_to(x, (nb_device){ NB_EXT, 7 }));
    ASSERT_ERROR_CONTAINS("nb_to: device ext:7 is not available: the ext backend sees 2 devices");
    nb_scope_end(s);
}

static void test_autograd_on_the_device(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_tensor *xc = nb_set_requires_grad(nb_randn(NB_SHAPE(4, 3), NB_F32), true);
    nb_tensor *xd = nb_set_requires_grad(nb_to(nb_detach(xc), ext0), true);
    nb_tensor *lc = nb_sum_all(nb_mul(nb_tanh(xc), nb_sigmoid(nb_max(xc, 1, true))));
    nb_tensor *ld = nb_sum_all(nb_mul(nb_tanh(xd), nb_sigmoid(nb_max(xd, 1, true))));
    assert_int_equal(nb_backward(lc), 0);
    assert_int_equal(nb_backward(ld), 0);
    assert_true(on(nb_grad_of(xd), ext0));
    assert_close(nb_grad_of(xd), nb_grad_of(xc), 0);
    /* nb_to is differentiable: the gradient comes back to the cpu leaf */
    nb_tensor *leaf = nb_set_requires_grad(nb_arange(0, 4, 1, NB_F32), true);
    nb_tensor *sq = nb_sum_all(nb_mul(nb_to(leaf, ext1), nb_to(leaf, ext1)));
    assert_true(on(sq, ext1));
    assert_int_equal(nb_backward(sq), 0);
    assert_true(on(nb_grad_of(leaf), cpu));
    assert_close(nb_grad_of(leaf), nb_mul_scalar(nb_detach(leaf), 2), 0);
    /* a loss, dropout and causal attention run there too */
    int64_t tgt[] = { 0, 2, 1, 2 };
    nb_tensor *t = nb_from_data(tgt, NB_SHAPE(4), NB_I64);
    nb_tensor *ce = nb_cross_entropy(xd, nb_to(t, ext0), (nb_ce_opts){ 0 });
    assert_true(on(ce, ext0));
    assert_close(ce, nb_cross_entropy(xc, t, (nb_ce_opts){ 0 }), 1e-6);
    assert_true(on(nb_dropout(xd, 0.5, true), ext0));
    nb_tensor *q = nb_reshape(xd, NB_SHAPE(1, 4, 3));
    nb_tensor *att = nb_scaled_dot_product_attention(q, q, q, (nb_attn_opts){ .causal = true });
    assert_true(on(att, ext0));
    nb_tensor *qc = nb_reshape(xc, NB_SHAPE(1, 4, 3));
    assert_close(att, nb_scaled_dot_product_attention(qc, qc, qc, (nb_attn_opts){ .causal = true }), 1e-6);
    nb_scope_end(s);
}

/* Two copies of one model trained alike, one moved to ext after its first step: the same
   kernels run, so their parameters stay bit-equal, and the optimizer's state follows. */
static nb_module *small_model(void) {
    nb_manual_seed(7);
    return nb_nn_sequential(nb_nn_linear(6, 8), nb_nn_relu(), nb_nn_linear(8, 3), NULL);
}

static void eager_step(nb_module *m, nb_optimizer *o, nb_tensor *x, nb_tensor *y) {
    nb_scope *s = nb_scope_begin();
    nb_optim_zero_grad(o);
    nb_tensor *loss = nb_cross_entropy(nb_forward(m, x), y, (nb_ce_opts){ 0 });
    assert_non_null(loss);
    assert_int_equal(nb_backward(loss), 0);
    assert_int_equal(nb_optim_step(o), 0);
    nb_scope_end(s);
}

static void test_module_to_moves_parameters_and_optimizer_state(void **state) {
    (void)state;
    nb_module *a = small_model(), *b = small_model();
    nb_optimizer *oa = nb_optim_adam(a, (nb_adam_opts){ .lr = 0.01 });
    nb_optimizer *ob = nb_optim_adam(b, (nb_adam_opts){ .lr = 0.01 });
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(5, 6), NB_F32);
    int64_t yv[] = { 0, 1, 2, 1, 0 };
    nb_tensor *y = nb_from_data(yv, NB_SHAPE(5), NB_I64);
    eager_step(a, oa, x, y);
    eager_step(b, ob, x, y);
    nb_named_tensor pb[8];
    int n = nb_module_named_parameters(b, pb, 8);
    assert_int_equal(n, 4);
    nb_tensor *first = pb[0].tensor;
    assert_ptr_equal(nb_module_to(b, ext0), b);
    assert_ptr_equal(nb_module_named_parameters(b, pb, 8) == n ? pb[0].tensor : NULL, first); /* same tensors */
    for (int i = 0; i < n; i++) {
        assert_true(on(pb[i].tensor, ext0));
        assert_true(on(nb_grad_of(pb[i].tensor), ext0));
    }
    nb_tensor *xd = nb_to(x, ext0), *yd = nb_to(y, ext0);
    for (int k = 0; k < 3; k++) {
        eager_step(a, oa, x, y);
        eager_step(b, ob, xd, yd);
    }
    nb_named_tensor pa[8];
    nb_module_named_parameters(a, pa, 8);
    for (int i = 0; i < n; i++) assert_close(pb[i].tensor, pa[i].tensor, 0);
    /* a device that is not there moves nothing */
    assert_null(nb_module_to(b, (nb_device){ NB_EXT, 3 }));
    ASSERT_ERROR_CONTAINS("nb_module_to: device ext:3 is not available");
    assert_true(on(pb[0].tensor, ext0));
    /* and back to the cpu, where training goes on alike */
    assert_ptr_equal(nb_module_to(b, cpu), b);
    eager_step(a, oa, x, y);
    eager_step(b, ob, x, y);
    for (int i = 0; i < n; i++) {
        assert_true(on(pb[i].tensor, cpu));
        assert_close(pb[i].tensor, pa[i].tensor, 0);
    }
    nb_scope_end(s);
    nb_optim_free(oa);
    nb_optim_free(ob);
    nb_module_free(a);
    nb_module_free(b);
}

/* A checkpoint saved from a device and loaded into a model on a device resumes bit-identically
   (what test_cuda checks on a GPU, here on the test backend). */
static void test_checkpoint_saves_from_and_loads_to_the_device(void **state) {
    (void)state;
    SKIP_WITHOUT_JSON(); /* checkpoints are safetensors files */
    char path[] = "/tmp/nb_backend_ckXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    nb_module *a = small_model(), *b = small_model();
    nb_optimizer *oa = nb_optim_adam(a, (nb_adam_opts){ .lr = 0.01 });
    nb_optimizer *ob = nb_optim_adam(b, (nb_adam_opts){ .lr = 0.01 });
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_to(nb_randn(NB_SHAPE(5, 6), NB_F32), ext0);
    int64_t yv[] = { 0, 1, 2, 1, 0 };
    nb_tensor *y = nb_to(nb_from_data(yv, NB_SHAPE(5), NB_I64), ext0);
    assert_non_null(nb_module_to(a, ext0));
    eager_step(a, oa, x, y);
    eager_step(a, oa, x, y);
    assert_int_equal(nb_checkpoint_save(&(nb_checkpoint){ .model = a, .optimizer = oa, .global_step = 2 }, path), 0);
    eager_step(a, oa, x, y); /* the run that goes on */
    assert_non_null(nb_module_to(b, ext0));
    nb_checkpoint ck = { .model = b, .optimizer = ob };
    int lrc = nb_checkpoint_load(&ck, path);
    if (lrc < 0) fprintf(stderr, "load: %s\n", nb_error());
    assert_int_equal(lrc, 0);
    assert_int_equal(ck.global_step, 2);
    eager_step(b, ob, x, y); /* the resumed run */
    nb_named_tensor pa[8], pb[8];
    int n = nb_module_named_parameters(a, pa, 8);
    assert_int_equal(nb_module_named_parameters(b, pb, 8), n);
    for (int i = 0; i < n; i++) {
        assert_true(on(pb[i].tensor, ext0));
        assert_close(pb[i].tensor, pa[i].tensor, 0);
    }
    nb_scope_end(s);
    unlink(path);
    nb_optim_free(oa);
    nb_optim_free(ob);
    nb_module_free(a);
    nb_module_free(b);
}

/* The test models (an MLP, a CNN, a char GPT) train on a device as on the cpu: the same bits
   after 5 steps of AdamW, since the test backend runs the cpu's kernels (test_cuda checks the
   same on a GPU within 1e-4): nothing in nn, ops or optim makes a cpu tensor a device op needs. */
static void test_models_train_on_the_device(void **state) {
    (void)state;
    ext_backend_register(false); /* every kernel */
    for (int kind = 0; kind < 3; kind++) {
        nb_module *m[2];
        for (int d = 0; d < 2; d++) {
            nb_manual_seed(11);
            m[d] = kind == 0   ? nb_nn_sequential(nb_nn_linear(12, 16), nb_nn_relu(), nb_nn_linear(16, 5), NULL)
                   : kind == 1 ? nb_nn_sequential(nb_nn_conv2d(1, 4, 3, (nb_conv2d_opts){ .padding = 1 }), nb_nn_relu(),
                                                  nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }), nb_nn_flatten(),
                                                  nb_nn_linear(4 * 4 * 4, 5), NULL)
                               : gpt_model_new(5, 8, 16, 2, 2);
            assert_non_null(m[d]);
        }
        assert_non_null(nb_module_to(m[1], ext0));
        nb_optimizer *o[2] = { nb_optim_adamw(m[0], (nb_adamw_opts){ .lr = 0.01 }),
                               nb_optim_adamw(m[1], (nb_adamw_opts){ .lr = 0.01 }) };
        for (int step = 0; step < 5; step++) {
            nb_scope *s = nb_scope_begin();
            nb_tensor *x = kind == 0 ? nb_randn(NB_SHAPE(6, 12), NB_F32)
                           : kind == 1 ? nb_randn(NB_SHAPE(6, 1, 8, 8), NB_F32)
                                       : nb_randint(0, 5, NB_SHAPE(3, 8));
            nb_tensor *y = kind == 2 ? nb_randint(0, 5, NB_SHAPE(24)) : nb_randint(0, 5, NB_SHAPE(6));
            double loss[2];
            for (int d = 0; d < 2; d++) {
                nb_device dev = d ? ext0 : cpu;
                nb_tensor *logits = nb_forward(m[d], nb_to(x, dev));
                if (kind == 2) logits = nb_reshape(logits, NB_SHAPE(24, 5));
                nb_optim_zero_grad(o[d]);
                nb_tensor *l = nb_cross_entropy(logits, nb_to(y, dev), (nb_ce_opts){ 0 });
                if (!l) fprintf(stderr, "model %d on %s: %s\n", kind, d ? "ext" : "cpu", nb_error());
                assert_non_null(l);
                assert_int_equal(nb_backward(l), 0);
                assert_int_equal(nb_optim_step(o[d]), 0);
                loss[d] = nb_item(l);
            }
            assert_true(loss[0] == loss[1]);
            nb_scope_end(s);
        }
        nb_named_tensor p0[64], p1[64];
        int n = nb_module_named_parameters(m[0], p0, 64);
        assert_int_equal(nb_module_named_parameters(m[1], p1, 64), n);
        nb_scope *s = nb_scope_begin(); /* assert_close's temporaries */
        for (int i = 0; i < n; i++) assert_close(p1[i].tensor, p0[i].tensor, 0);
        nb_scope_end(s);
        for (int d = 0; d < 2; d++) {
            nb_optim_free(o[d]);
            nb_module_free(m[d]);
        }
    }
}

static nb_tensor *double_it(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    (void)ctx;
    return nb_add(in[0], in[0]);
}

static nb_tensor *back_to_cpu(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    (void)ctx;
    return nb_mul_scalar(nb_to(in[0], cpu), 2);
}

static void test_compiled_graphs_refuse_other_devices(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    /* a backend without a lowering runs no compiled graph */
    nb_compiled *c = nb_compile(double_it, NULL, (nb_graph_opts){ 0 });
    nb_tensor *y = nb_to(nb_ones(NB_SHAPE(3), NB_F32), ext0);
    assert_null(nb_compiled_run(c, &y, 1));
    ASSERT_ERROR_CONTAINS("nb_compiled_run: the traced function ran ops on ext:0, and the ext backend has no lowering "
                          "for compiled graphs");
    nb_compiled_free(c);
    /* with one, a graph that computes on the cpu beside the device is still refused: it runs on one */
    ext_backend_lowered(true);
    c = nb_compile(back_to_cpu, NULL, (nb_graph_opts){ 0 });
    assert_null(nb_compiled_run(c, &y, 1));
    ASSERT_ERROR_CONTAINS("ran nb_to on the cpu beside ops on ext:0; a compiled graph runs on one device");
    nb_compiled_free(c);
    ext_backend_lowered(false);
    nb_scope_end(s);
}


/* The compiler hands a graph traced on ext to ext's lowering: a training step compiled there runs
   through the backend's run, on its kernels and memory, and trains as the eager step on the cpu
   does, step for step (the same kernels, unfused). */
static void test_compiled_graphs_run_on_the_backends_lowering(void **state) {
    (void)state;
    ext_backend_lowered(true);
    nb_module *a = small_model(), *b = small_model();
    nb_optimizer *oa = nb_optim_adam(a, (nb_adam_opts){ .lr = 0.01 });
    assert_ptr_equal(nb_module_to(b, ext0), b);
    nb_optimizer *ob = nb_optim_adam(b, (nb_adam_opts){ .lr = 0.01 });
    trainer tb = { b, ob };
    nb_compiled *c = nb_compile(train_step, &tb, (nb_graph_opts){ 0 });
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(5, 6), NB_F32);
    int64_t yv[] = { 0, 1, 2, 1, 0 };
    nb_tensor *y = nb_from_data(yv, NB_SHAPE(5), NB_I64);
    nb_tensor *in[2] = { nb_to(x, ext0), nb_to(y, ext0) };
    long runs = graph_runs, calls = kernel_calls;
    for (int k = 0; k < 4; k++) {
        nb_scope *step = nb_scope_begin();
        nb_optim_zero_grad(oa);
        nb_tensor *la = nb_cross_entropy(nb_forward(a, x), y, (nb_ce_opts){ 0 });
        assert_int_equal(nb_backward(la), 0);
        assert_int_equal(nb_optim_step(oa), 0);
        nb_tensor *lb = nb_compiled_run(c, in, 2);
        if (!lb) fail_msg("%s", nb_error());
        assert_true(on(lb, ext0));
        assert_close(lb, la, 1e-6);
        nb_scope_end(step);
    }
    assert_int_equal(nb_compiled_get_stats(c).traces, 1);
    assert_int_equal(graph_runs, runs + 4);
    assert_true(kernel_calls > calls);
    nb_named_tensor pa[8], pb[8];
    int n = nb_module_named_parameters(a, pa, 8);
    assert_int_equal(nb_module_named_parameters(b, pb, 8), n);
    for (int i = 0; i < n; i++) {
        assert_true(on(pb[i].tensor, ext0));
        assert_close(pb[i].tensor, pa[i].tensor, 1e-6);
    }
    nb_scope_end(s);
    nb_compiled_free(c);
    nb_optim_free(oa);
    nb_optim_free(ob);
    nb_module_free(a);
    nb_module_free(b);
    ext_backend_lowered(false);
}

/* host_call in a graph: the function runs at every replay, between the op that makes its tensor
   and the one that reads it after, which fusion must not merge across it */
static int add_one_and_count(void *ctx, nb_tensor *const *t, int n) {
    (void)n;
    (*(int *)ctx)++;
    float *p = nb__data(t[0]);
    for (int64_t i = 0; i < t[0]->numel; i++) p[i] += 1;
    return 0;
}

static nb_tensor *host_call_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    nb_tensor *y = nb_mul_scalar(in[0], 2);
    if (nb__host_call(add_one_and_count, ctx, &y, 1) < 0) return NULL;
    return nb_exp(nb_add_scalar(y, 1));
}

static void test_host_call_runs_at_every_replay(void **state) {
    (void)state;
    int calls = 0;
    nb_compiled *c = nb_compile(host_call_fn, &calls, (nb_graph_opts){ 0 });
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(4, 8), NB_F32);
    nb_tensor *want = nb_exp(nb_add_scalar(nb_mul_scalar(x, 2), 2));
    for (int k = 0; k < 3; k++) {
        nb_tensor *got = nb_compiled_run(c, &x, 1);
        assert_non_null(got);
        assert_close(got, want, 1e-5);
        assert_int_equal(calls, k + 1); /* the trace only records it; each run calls it once */
    }
    assert_int_equal(nb_compiled_get_stats(c).traces, 1);
    nb_scope_end(s);
    nb_compiled_free(c);
}

static void test_loader_delivers_batches_on_the_device(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_reshape(nb_arange(0, 24, 1, NB_F32), NB_SHAPE(8, 3));
    nb_tensor *y = nb_arange(0, 8, 1, NB_I64);
    nb_dataset *ds = nb_data_tensors(x, y);
    assert_non_null(ds);
    for (int workers = 0; workers <= 2; workers += 2) {
        nb_data_loader *l = nb_data_loader_new(ds, (nb_loader_opts){ .batch_size = 4, .num_workers = workers, .device = ext1 });
        assert_non_null(l);
        nb_batch b;
        int got = 0;
        while (nb_data_loader_next(l, &b)) {
            assert_true(on(b.x, ext1));
            assert_true(on(b.y, ext1));
            assert_close(b.x, nb_slice(x, 0, 4 * got, 4 * got + 4, 1), 0);
            got++;
        }
        assert_false(nb_data_loader_failed(l));
        assert_int_equal(got, 2);
        nb_data_loader_free(l);
    }
    nb_device gone = { NB_CUDA, nb_cuda_device_count() }; /* one past the last GPU (cuda:0 without one) */
    char want[96], dv[32];
    snprintf(want, sizeof want, "nb_data_loader_new: device %s is not available", nb_device_str(gone, dv, sizeof dv));
    assert_null(nb_data_loader_new(ds, (nb_loader_opts){ .device = gone }));
    ASSERT_ERROR_CONTAINS(want);
    nb_dataset_free(ds);
    nb_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_registry_and_device_queries, clear_error_setup),
        cmocka_unit_test_setup(test_tensors_move_there_and_back, clear_error_setup),
        cmocka_unit_test_setup(test_dispatch_runs_the_backends_kernels, clear_error_setup),
        cmocka_unit_test_setup(test_missing_kernels_and_mixed_devices, clear_error_setup),
        cmocka_unit_test_setup(test_autograd_on_the_device, clear_error_setup),
        cmocka_unit_test_setup(test_module_to_moves_parameters_and_optimizer_state, clear_error_setup),
        cmocka_unit_test_setup(test_checkpoint_saves_from_and_loads_to_the_device, clear_error_setup),
        cmocka_unit_test_setup(test_models_train_on_the_device, clear_error_setup),
        cmocka_unit_test_setup(test_compiled_graphs_refuse_other_devices, clear_error_setup),
        cmocka_unit_test_setup(test_compiled_graphs_run_on_the_backends_lowering, clear_error_setup),
        cmocka_unit_test_setup(test_host_call_runs_at_every_replay, clear_error_setup),
        cmocka_unit_test_setup(test_loader_delivers_batches_on_the_device, clear_error_setup),
    };
    setup(NULL);
    int rc = RUN_TESTS(tests);
    teardown(NULL);
    return rc;
}
