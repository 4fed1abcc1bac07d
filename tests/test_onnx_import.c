/* ONNX import's unit tests: models built here with protobuf-c (the same generated onnx.pb-c.h
   the library uses), run eagerly and compiled, and bad input of each kind the issue names:
   truncated and corrupt files, a cycle, an initializer whose bytes do not match its shape,
   external data leaving the model's folder, an unknown operator or attribute, wrong inputs. */
#include "test_util.h"
#include "onnx_pb_prefix.h" /* the library's names for the generated protobuf-c code */
#include "onnx.pb-c.h"

#include <unistd.h>

/* ---------- building models ---------- */
typedef struct {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto nodes[8], *node_p[8];
    Onnx__AttributeProto attrs[8], *attr_p[8];
    Onnx__TensorProto inits[4], *init_p[4];
    Onnx__StringStringEntryProto ext[2], *ext_p[2];
    Onnx__ValueInfoProto vis[4], *in_p[2], *out_p[2];
    Onnx__TypeProto types[4];
    Onnx__TypeProto__Tensor ttypes[4];
    Onnx__TensorShapeProto shapes[4];
    Onnx__TensorShapeProto__Dimension dims[4][4], *dim_p[4][4];
    char *strs[8][4];
    int nattr;
} mb;

static void mb_init(mb *b, int opset) {
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->model);
    onnx__graph_proto__init(&b->graph);
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = "";
    b->opset.has_version = true;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->model.has_ir_version = true;
    b->model.ir_version = 8;
    b->model.n_opset_import = 1;
    b->model.opset_import = b->opsets;
    b->model.producer_name = "test_onnx_import";
    b->model.graph = &b->graph;
    b->graph.name = "g";
    b->graph.node = b->node_p;
    b->graph.initializer = b->init_p;
    b->graph.input = b->in_p;
    b->graph.output = b->out_p;
}

/* A value info of f32 with dims (-1: the symbolic "N"); k indexes the slot. */
static Onnx__ValueInfoProto *mb_vi(mb *b, int k, const char *name, int ndim, const int64_t *dims) {
    Onnx__ValueInfoProto *vi = &b->vis[k];
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(&b->types[k]);
    onnx__type_proto__tensor__init(&b->ttypes[k]);
    onnx__tensor_shape_proto__init(&b->shapes[k]);
    vi->name = (char *)name;
    vi->type = &b->types[k];
    b->types[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->types[k].tensor_type = &b->ttypes[k];
    b->ttypes[k].has_elem_type = true;
    b->ttypes[k].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    b->ttypes[k].shape = &b->shapes[k];
    b->shapes[k].n_dim = (size_t)ndim;
    b->shapes[k].dim = b->dim_p[k];
    for (int i = 0; i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = &b->dims[k][i];
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] < 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "N";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        b->dim_p[k][i] = d;
    }
    return vi;
}

static void mb_input(mb *b, const char *name, int ndim, const int64_t *dims) {
    b->in_p[b->graph.n_input] = mb_vi(b, (int)b->graph.n_input, name, ndim, dims);
    b->graph.n_input++;
}

static void mb_output(mb *b, const char *name) {
    b->out_p[b->graph.n_output] = mb_vi(b, 2 + (int)b->graph.n_output, name, 0, NULL);
    b->vis[2 + b->graph.n_output].type->tensor_type->shape = NULL;
    b->graph.n_output++;
}

/* A node with up to 3 inputs and one output (NULL ends the inputs). */
static Onnx__NodeProto *mb_node(mb *b, const char *op, const char *name, const char *in0, const char *in1,
                                const char *in2, const char *out) {
    int k = (int)b->graph.n_node++;
    Onnx__NodeProto *n = &b->nodes[k];
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    char **s = b->strs[k];
    int ni = 0;
    if (in0) s[ni++] = (char *)in0;
    if (in1) s[ni++] = (char *)in1;
    if (in2) s[ni++] = (char *)in2;
    n->n_input = (size_t)ni;
    n->input = s;
    s[3] = (char *)out;
    n->n_output = 1;
    n->output = &s[3];
    b->node_p[k] = n;
    return n;
}

static void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, int64_t *v, int count) {
    Onnx__AttributeProto *a = &b->attrs[b->nattr];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)count;
    a->ints = v;
    b->attr_p[b->nattr] = a;
    n->attribute = &b->attr_p[b->nattr];
    n->n_attribute = 1;
    b->nattr++;
}

/* An f32 initializer of dims holding bytes raw bytes (which need not match, for the tests). */
static Onnx__TensorProto *mb_init_f32(mb *b, const char *name, int ndim, int64_t *dims, const void *raw, size_t bytes) {
    int k = (int)b->graph.n_initializer++;
    Onnx__TensorProto *t = &b->inits[k];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = true;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)ndim;
    t->dims = dims;
    if (raw) {
        t->has_raw_data = true;
        t->raw_data.len = bytes;
        t->raw_data.data = (uint8_t *)raw;
    }
    b->init_p[k] = t;
    return t;
}

static void mb_attr_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = &b->attrs[b->nattr];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = true;
    a->i = v;
    b->attr_p[b->nattr] = a;
    n->attribute = &b->attr_p[b->nattr];
    n->n_attribute = 1;
    b->nattr++;
}

/* The model's bytes (malloc'ed). */
static uint8_t *mb_pack(mb *b, size_t *size) {
    *size = onnx__model_proto__get_packed_size(&b->model);
    uint8_t *buf = malloc(*size ? *size : 1);
    onnx__model_proto__pack(&b->model, buf);
    return buf;
}

static int64_t dims_b3[2] = { -1, 3 }, dims3[1] = { 3 };
static const float bias[3] = { 1, -2, 0.5f };

/* y = Relu(x + b) with x [N, 3] and b an initializer */
static void mb_add_relu(mb *b, int opset) {
    mb_init(b, opset);
    mb_input(b, "x", 2, dims_b3);
    mb_init_f32(b, "b", 1, dims3, bias, sizeof bias);
    mb_node(b, "Add", "add0", "x", "b", NULL, "s");
    mb_node(b, "Relu", "relu0", "s", NULL, NULL, "y");
    mb_output(b, "y");
}

static void test_runs(void **state) {
    (void)state;
    mb b;
    mb_add_relu(&b, 17);
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    free(buf);
    assert_non_null(m);
    assert_int_equal(nb_onnx_num_inputs(m), 1);
    assert_int_equal(nb_onnx_num_outputs(m), 1);
    assert_string_equal(nb_onnx_input_name(m, 0), "x");
    assert_string_equal(nb_onnx_output_name(m, 0), "y");
    assert_null(nb_onnx_input_name(m, 1));
    assert_int_equal(nb_onnx_opset(m), 17);
    char *sum = nb_onnx_summary(m);
    assert_non_null(strstr(sum, "Add"));
    assert_non_null(strstr(sum, "x: f32 [N, 3]"));
    assert_non_null(strstr(sum, "initializers: 1, 3 elements"));
    free(sum);
    /* two batch sizes through the symbolic dimension */
    for (int batch = 1; batch <= 2; batch++) {
        float x[6] = { -1, 1, 0, 2, 3, -4 }, want[6];
        for (int i = 0; i < 3 * batch; i++) want[i] = fmaxf(x[i] + bias[i % 3], 0);
        nb_tensor *in = nb_from_data(x, NB_SHAPE(batch, 3), NB_F32), *y = NULL;
        assert_int_equal(nb_onnx_run(m, &in, 1, &y, 1), 0);
        float got[6];
        assert_int_equal(nb_copy_to(y, got, sizeof(float) * (size_t)(3 * batch)), 0);
        for (int i = 0; i < 3 * batch; i++) assert_float_equal(got[i], want[i], 1e-6);
        nb_release(in);
        nb_release(y);
    }
    nb_onnx_free(m);
    assert_null(nb_error());
}

/* Two 3x3 convolutions of the same shape, y = Conv(Conv(x, w1), w2), their weights from seed:
   oneDNN keeps each constant weight reordered (nb_conv_const) under its storage's own id, so
   the two layers, a model loaded after another was freed, and two models alive at once must
   each get their own weights, eagerly and compiled, on every run. */
#define CW 8
static float conv_w[2][2][CW * CW * 9]; /* [model][layer] */
static uint8_t *conv_model(int which, size_t *size) {
    static int64_t xdims[4] = { -1, CW, 12, 12 }, wdims[4] = { CW, CW, 3, 3 };
    mb b;
    mb_init(&b, 17);
    mb_input(&b, "x", 4, xdims);
    mb_init_f32(&b, "w1", 4, wdims, conv_w[which][0], sizeof conv_w[which][0]);
    mb_init_f32(&b, "w2", 4, wdims, conv_w[which][1], sizeof conv_w[which][1]);
    mb_node(&b, "Conv", "conv1", "x", "w1", NULL, "h");
    mb_node(&b, "Conv", "conv2", "h", "w2", NULL, "y");
    mb_output(&b, "y");
    return mb_pack(&b, size);
}

/* The same two convolutions on weights nabla does not hold as constants. */
static nb_tensor *conv_reference(int which, nb_tensor *x) {
    nb_tensor *w1 = nb_from_data(conv_w[which][0], NB_SHAPE(CW, CW, 3, 3), NB_F32);
    nb_tensor *w2 = nb_from_data(conv_w[which][1], NB_SHAPE(CW, CW, 3, 3), NB_F32);
    nb_tensor *h = nb_conv2d(x, w1, NULL, (nb_conv_opts){ 0 }), *y = nb_conv2d(h, w2, NULL, (nb_conv_opts){ 0 });
    nb_release(w1), nb_release(w2), nb_release(h);
    return y;
}

static void expect_same(nb_tensor *got, nb_tensor *want) {
    assert_non_null(got);
    assert_int_equal(nb_numel(got), nb_numel(want));
    size_t n = (size_t)nb_numel(got);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_int_equal(nb_copy_to(got, a, n * sizeof *a), 0);
    assert_int_equal(nb_copy_to(want, b, n * sizeof *b), 0);
    for (size_t i = 0; i < n; i++) assert_float_equal(a[i], b[i], 1e-5 * (1 + fabsf(b[i])));
    free(a), free(b);
}

static void test_constant_conv_weights(void **state) {
    (void)state;
    nb_manual_seed(7);
    for (int m = 0; m < 2; m++)
        for (int l = 0; l < 2; l++) {
            nb_tensor *r = nb_randn(NB_SHAPE(CW * CW * 9), NB_F32);
            assert_int_equal(nb_copy_to(r, conv_w[m][l], sizeof conv_w[m][l]), 0);
            nb_release(r);
        }
    for (int compile = 0; compile <= 1; compile++) {
        nb_onnx_load_opts o = { .compile = compile };
        size_t size;
        uint8_t *buf = conv_model(0, &size);
        nb_onnx_model *a = nb_onnx_load_memory(buf, size, o);
        free(buf);
        assert_non_null(a);
        for (int batch = 1; batch <= 17; batch += 16) { /* one oneDNN piece, then two */
            nb_tensor *x = nb_randn(NB_SHAPE(batch, CW, 12, 12), NB_F32);
            nb_tensor *want_a = conv_reference(0, x), *want_b = conv_reference(1, x);
            for (int run = 0; run < 3; run++) {
                nb_tensor *y = NULL;
                assert_int_equal(nb_onnx_run(a, &x, 1, &y, 1), 0);
                expect_same(y, want_a);
                nb_release(y);
            }
            /* model b beside a, then a freed and loaded again, and b once more */
            buf = conv_model(1, &size);
            nb_onnx_model *b = nb_onnx_load_memory(buf, size, o);
            free(buf);
            assert_non_null(b);
            for (int run = 0; run < 2; run++) {
                nb_tensor *ya = NULL, *yb = NULL;
                assert_int_equal(nb_onnx_run(b, &x, 1, &yb, 1), 0);
                assert_int_equal(nb_onnx_run(a, &x, 1, &ya, 1), 0);
                expect_same(yb, want_b);
                expect_same(ya, want_a);
                nb_release(ya), nb_release(yb);
            }
            nb_onnx_free(a);
            buf = conv_model(0, &size);
            a = nb_onnx_load_memory(buf, size, o);
            free(buf);
            assert_non_null(a);
            nb_tensor *y = NULL;
            assert_int_equal(nb_onnx_run(b, &x, 1, &y, 1), 0);
            expect_same(y, want_b);
            nb_release(y);
            nb_onnx_free(b);
            y = NULL;
            assert_int_equal(nb_onnx_run(a, &x, 1, &y, 1), 0);
            expect_same(y, want_a);
            nb_release(y), nb_release(x), nb_release(want_a), nb_release(want_b);
        }
        nb_onnx_free(a);
    }
    assert_null(nb_error());
}

/* An output that is an initializer (y = Identity(b)), compiled: the caller gets a copy, so
   writing into it changes neither the model's constant nor the next run's answer. */
static void test_output_of_constant_is_a_copy(void **state) {
    (void)state;
    for (int compile = 0; compile <= 1; compile++) {
        mb b;
        mb_init(&b, 17);
        mb_input(&b, "x", 2, dims_b3);
        mb_init_f32(&b, "b", 1, dims3, bias, sizeof bias);
        mb_node(&b, "Identity", "id0", "b", NULL, NULL, "y");
        mb_output(&b, "y");
        size_t size;
        uint8_t *buf = mb_pack(&b, &size);
        nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ .compile = compile });
        free(buf);
        assert_non_null(m);
        nb_tensor *x = nb_zeros(NB_SHAPE(1, 3), NB_F32), *y = NULL;
        for (int run = 0; run < 2; run++) {
            assert_int_equal(nb_onnx_run(m, &x, 1, &y, 1), 0);
            float *p = nb_data_ptr(y);
            for (int i = 0; i < 3; i++) assert_float_equal(p[i], bias[i], 0);
            for (int i = 0; i < 3; i++) p[i] = 99; /* the caller's own copy */
            nb_release(y);
        }
        nb_release(x);
        nb_onnx_free(m);
    }
    assert_null(nb_error());
}

/* INT8 initializers, one as raw bytes and one in int32_data (ONNX's field for 8-bit types),
   dequantised by Cast: y = x * (Cast(q1) + Cast(q2)). */
static void test_int8(void **state) {
    (void)state;
    mb b;
    mb_init(&b, 17);
    mb_input(&b, "x", 2, dims_b3);
    static const int8_t q1[3] = { -128, 5, 127 };
    static int32_t q2[3] = { -1, 100, -3 };
    Onnx__TensorProto *t1 = mb_init_f32(&b, "q1", 1, dims3, q1, sizeof q1);
    Onnx__TensorProto *t2 = mb_init_f32(&b, "q2", 1, dims3, NULL, 0);
    t1->data_type = t2->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    t2->n_int32_data = 3;
    t2->int32_data = q2;
    mb_attr_int(&b, mb_node(&b, "Cast", "c1", "q1", NULL, NULL, "f1"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mb_attr_int(&b, mb_node(&b, "Cast", "c2", "q2", NULL, NULL, "f2"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mb_node(&b, "Add", "add", "f1", "f2", NULL, "s");
    mb_node(&b, "Mul", "mul", "x", "s", NULL, "y");
    mb_output(&b, "y");
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    free(buf);
    assert_non_null(m);
    float x[3] = { 1, 2, -1 }, got[3];
    nb_tensor *in = nb_from_data(x, NB_SHAPE(1, 3), NB_F32), *y = NULL;
    assert_int_equal(nb_onnx_run(m, &in, 1, &y, 1), 0);
    assert_int_equal(nb_copy_to(y, got, sizeof got), 0);
    assert_true(got[0] == -129 && got[1] == 210 && got[2] == -124);
    nb_release(in);
    nb_release(y);
    nb_onnx_free(m);
    assert_null(nb_error());
}

/* a model of Shape -> Gather -> Concat -> Reshape, compiled: the shapes are folded at trace time */
static void test_compiled_shapes(void **state) {
    (void)state;
    mb b;
    mb_init(&b, 13);
    int64_t dx[3] = { -1, 2, 3 };
    mb_input(&b, "x", 3, dx);
    static int64_t idx_v[1] = { 0 }, tail_v[1] = { 6 }, one[1] = { 1 };
    Onnx__TensorProto *idx = mb_init_f32(&b, "idx", 1, one, idx_v, sizeof idx_v);
    idx->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    Onnx__TensorProto *tail = mb_init_f32(&b, "tail", 1, one, tail_v, sizeof tail_v);
    tail->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    mb_node(&b, "Shape", "shape", "x", NULL, NULL, "s");
    mb_node(&b, "Gather", "gather", "s", "idx", NULL, "n");
    mb_node(&b, "Concat", "concat", "n", "tail", NULL, "ns");
    int64_t axis0 = 0;
    Onnx__AttributeProto *a = &b.attrs[b.nattr];
    onnx__attribute_proto__init(a);
    a->name = "axis";
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = true;
    a->i = axis0;
    b.attr_p[b.nattr] = a;
    b.nodes[2].attribute = &b.attr_p[b.nattr++];
    b.nodes[2].n_attribute = 1;
    mb_node(&b, "Reshape", "reshape", "x", "ns", NULL, "r");
    mb_node(&b, "Tanh", "tanh", "r", NULL, NULL, "y");
    mb_output(&b, "y");
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    nb_onnx_model *eager = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    nb_onnx_model *comp = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ .compile = true });
    free(buf);
    assert_non_null(eager);
    assert_non_null(comp);
    for (int batch = 1; batch <= 3; batch++) {
        nb_manual_seed((uint64_t)batch);
        nb_tensor *x = nb_randn(NB_SHAPE(batch, 2, 3), NB_F32), *y1 = NULL, *y2 = NULL;
        assert_int_equal(nb_onnx_run(eager, &x, 1, &y1, 1), 0);
        assert_int_equal(nb_onnx_run(comp, &x, 1, &y2, 1), 0);
        nb_shape s = nb_shape_of(y2);
        assert_int_equal(s.ndim, 2);
        assert_int_equal(s.dim[0], batch);
        assert_int_equal(s.dim[1], 6);
        float a1[18], a2[18];
        nb_copy_to(y1, a1, sizeof(float) * (size_t)(6 * batch));
        nb_copy_to(y2, a2, sizeof(float) * (size_t)(6 * batch));
        for (int i = 0; i < 6 * batch; i++) assert_float_equal(a1[i], a2[i], 1e-6);
        nb_release(x);
        nb_release(y1);
        nb_release(y2);
    }
    nb_onnx_free(eager);
    nb_onnx_free(comp);
    assert_null(nb_error());
}

static void test_truncated_and_corrupt(void **state) {
    (void)state;
    mb b;
    mb_add_relu(&b, 17);
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    char path[] = "/tmp/nabla_onnx_truncXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* every cut of the file is refused cleanly or loads a smaller valid model: never a crash */
    int refused = 0;
    for (size_t cut = 0; cut < size; cut++) {
        nb_onnx_model *m = nb_onnx_load_memory(buf, cut, (nb_onnx_load_opts){ 0 });
        if (!m) { assert_non_null(nb_error()); refused++; nb_error_clear(); }
        nb_onnx_free(m);
    }
    assert_true(refused > (int)size / 2);
    /* a file cut in the middle of the initializer: the error says so and names the file */
    assert_int_equal(write(fd, buf, size / 2), (ssize_t)(size / 2));
    close(fd);
    assert_null(nb_onnx_load(path, (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS(path);
    unlink(path);
    /* corrupt bytes */
    uint8_t junk[64];
    for (int i = 0; i < 64; i++) junk[i] = (uint8_t)(0xff - i * 7);
    assert_null(nb_onnx_load_memory(junk, sizeof junk, (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("corrupt or truncated");
    buf[size / 3] ^= 0xff;
    buf[size / 3 + 1] ^= 0x5a;
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    if (!m) assert_non_null(nb_error());
    nb_onnx_free(m);
    nb_error_clear();
    free(buf);
    assert_null(nb_onnx_load("/nonexistent/model.onnx", (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("/nonexistent/model.onnx");
}

static void expect_load_error(mb *b, const char *const *texts) {
    size_t size;
    uint8_t *buf = mb_pack(b, &size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    free(buf);
    assert_null(m);
    for (int i = 0; texts[i]; i++) {
        const char *e = nb_error();
        if (!e || !strstr(e, texts[i])) fail_msg("expected \"%s\" in \"%s\"", texts[i], e ? e : "(none)");
    }
    nb_error_clear();
}

static void test_cycle(void **state) {
    (void)state;
    mb b;
    mb_init(&b, 17);
    mb_input(&b, "x", 2, dims_b3);
    mb_node(&b, "Add", "a", "x", "t2", NULL, "t1");
    mb_node(&b, "Relu", "b", "t1", NULL, NULL, "t2");
    mb_output(&b, "t2");
    expect_load_error(&b, (const char *const[]){ "cycle", "Add node 'a'", NULL });
}

static void test_unknown_names(void **state) {
    (void)state;
    mb b;
    mb_add_relu(&b, 17);
    b.strs[1][0] = "nothere";
    expect_load_error(&b, (const char *const[]){ "Relu node 'relu0'", "input 'nothere'", NULL });
    mb_add_relu(&b, 17);
    b.out_p[0]->name = "missing";
    expect_load_error(&b, (const char *const[]){ "graph output 'missing'", NULL });
}

static void test_initializer_size(void **state) {
    (void)state;
    mb b;
    mb_add_relu(&b, 17);
    b.inits[0].raw_data.len = 8; /* 2 floats for a [3] tensor */
    expect_load_error(&b, (const char *const[]){ "initializer 'b'", "8 bytes", "needs 12", NULL });
    mb_add_relu(&b, 17);
    static int64_t huge[2] = { INT64_C(1) << 40, INT64_C(1) << 40 };
    b.inits[0].dims = huge;
    b.inits[0].n_dims = 2;
    expect_load_error(&b, (const char *const[]){ "initializer 'b'", NULL });
    mb_add_relu(&b, 17);
    static int64_t neg[1] = { -3 };
    b.inits[0].dims = neg;
    expect_load_error(&b, (const char *const[]){ "invalid dimension -3", NULL });
}

/* A model whose initializer b lives in external file loc; written to dir/model.onnx. */
static void write_external(const char *dir, const char *loc, char *path, size_t psize) {
    mb b;
    mb_add_relu(&b, 17);
    Onnx__TensorProto *t = &b.inits[0];
    t->has_raw_data = false;
    t->has_data_location = true;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    onnx__string_string_entry_proto__init(&b.ext[0]);
    onnx__string_string_entry_proto__init(&b.ext[1]);
    b.ext[0].key = "location";
    b.ext[0].value = (char *)loc;
    b.ext[1].key = "offset";
    b.ext[1].value = "4";
    b.ext_p[0] = &b.ext[0];
    b.ext_p[1] = &b.ext[1];
    t->n_external_data = 2;
    t->external_data = b.ext_p;
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    snprintf(path, psize, "%s/model.onnx", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(buf, 1, size, f);
    fclose(f);
    free(buf);
}

static void test_external_data(void **state) {
    (void)state;
    char dir[] = "/tmp/nabla_onnx_extXXXXXX", path[256], data[300];
    assert_non_null(mkdtemp(dir));
    /* the weights at offset 4 of weights.bin beside the model */
    snprintf(data, sizeof data, "%s/weights.bin", dir);
    FILE *f = fopen(data, "wb");
    float pad = 0;
    fwrite(&pad, 4, 1, f);
    fwrite(bias, sizeof bias, 1, f);
    fclose(f);
    write_external(dir, "weights.bin", path, sizeof path);
    nb_onnx_model *m = nb_onnx_load(path, (nb_onnx_load_opts){ 0 });
    assert_non_null(m);
    float x[3] = { 0, 3, 0 }, got[3];
    nb_tensor *in = nb_from_data(x, NB_SHAPE(1, 3), NB_F32), *y = NULL;
    assert_int_equal(nb_onnx_run(m, &in, 1, &y, 1), 0);
    nb_copy_to(y, got, sizeof got);
    assert_float_equal(got[0], 1, 0);
    assert_float_equal(got[1], 1, 0);
    assert_float_equal(got[2], 0.5, 0);
    nb_release(in);
    nb_release(y);
    nb_onnx_free(m);
    /* locations that leave the folder */
    const char *bad[] = { "../weights.bin", "sub/../../weights.bin", "/etc/passwd", "..", NULL };
    for (int i = 0; bad[i]; i++) {
        write_external(dir, bad[i], path, sizeof path);
        assert_null(nb_onnx_load(path, (nb_onnx_load_opts){ 0 }));
        ASSERT_ERROR_CONTAINS("leaves the model's folder");
    }
    /* symbolic links: one inside the folder is read; one to a file outside, or through a linked
       folder outside, leaves the folder as surely as ".." does (onnx 1.23 refuses both) */
    char outside[] = "/tmp/nabla_onnx_outXXXXXX", target[300], link[300], sublink[300];
    assert_non_null(mkdtemp(outside));
    snprintf(target, sizeof target, "%s/weights.bin", outside);
    f = fopen(target, "wb");
    fwrite(&pad, 4, 1, f);
    fwrite(bias, sizeof bias, 1, f);
    fclose(f);
    snprintf(link, sizeof link, "%s/alias.bin", dir);
    assert_int_equal(symlink("weights.bin", link), 0);
    write_external(dir, "alias.bin", path, sizeof path);
    m = nb_onnx_load(path, (nb_onnx_load_opts){ 0 });
    assert_non_null(m);
    nb_onnx_free(m);
    unlink(link);
    assert_int_equal(symlink(target, link), 0);
    write_external(dir, "alias.bin", path, sizeof path);
    assert_null(nb_onnx_load(path, (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("'alias.bin' leaves the model's folder through a symbolic link");
    snprintf(sublink, sizeof sublink, "%s/sub", dir);
    assert_int_equal(symlink(outside, sublink), 0);
    write_external(dir, "sub/weights.bin", path, sizeof path);
    assert_null(nb_onnx_load(path, (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("leaves the model's folder through a symbolic link");
    unlink(link);
    unlink(sublink);
    unlink(target);
    rmdir(outside);
    /* data past the file's end, and external data from memory */
    write_external(dir, "weights.bin", path, sizeof path);
    f = fopen(data, "wb");
    fwrite(bias, 8, 1, f);
    fclose(f);
    assert_null(nb_onnx_load(path, (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("past the end");
    size_t n;
    char *bytes = read_whole_file(path);
    f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    n = (size_t)ftell(f);
    fclose(f);
    assert_null(nb_onnx_load_memory(bytes, n, (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("loaded from memory");
    free(bytes);
    unlink(path);
    unlink(data);
    rmdir(dir);
}

static void test_unsupported(void **state) {
    (void)state;
    mb b;
    mb_add_relu(&b, 17);
    b.nodes[1].op_type = "FooBar";
    expect_load_error(&b, (const char *const[]){ "FooBar", "'relu0'", "#1", "opset 17", NULL });
    /* an attribute Relu does not have */
    mb_add_relu(&b, 17);
    static int64_t v[1] = { 1 };
    mb_attr_ints(&b, &b.nodes[1], "bogus", v, 1);
    expect_load_error(&b, (const char *const[]){ "attribute 'bogus'", "Relu node 'relu0'", NULL });
    /* an operator version nabla does not implement: Range at opset 27 is Range-27 */
    mb_add_relu(&b, 27);
    b.nodes[1].op_type = "Range";
    expect_load_error(&b, (const char *const[]){ "Range", "version 27", NULL });
    /* another domain */
    mb_add_relu(&b, 17);
    b.nodes[0].domain = "com.microsoft";
    expect_load_error(&b, (const char *const[]){ "domain 'com.microsoft'", NULL });
}

static void test_wrong_inputs(void **state) {
    (void)state;
    mb b;
    mb_add_relu(&b, 17);
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    free(buf);
    assert_non_null(m);
    nb_tensor *y = NULL;
    nb_tensor *bad_shape = nb_zeros(NB_SHAPE(2, 4), NB_F32);
    assert_int_equal(nb_onnx_run(m, &bad_shape, 1, &y, 1), -1);
    ASSERT_ERROR_CONTAINS("input 0 ('x') has shape [2, 4]; the model declares [?, 3]");
    nb_tensor *bad_rank = nb_zeros(NB_SHAPE(3), NB_F32);
    assert_int_equal(nb_onnx_run(m, &bad_rank, 1, &y, 1), -1);
    ASSERT_ERROR_CONTAINS("'x'");
    nb_tensor *bad_dtype = nb_zeros(NB_SHAPE(2, 3), NB_I64);
    assert_int_equal(nb_onnx_run(m, &bad_dtype, 1, &y, 1), -1);
    ASSERT_ERROR_CONTAINS("input 0 ('x') is i64; the model declares f32");
    nb_tensor *two[2] = { bad_shape, bad_shape };
    assert_int_equal(nb_onnx_run(m, two, 2, &y, 1), -1);
    ASSERT_ERROR_CONTAINS("takes 1 input, 2 given");
    nb_tensor *none = NULL;
    assert_int_equal(nb_onnx_run(m, &none, 1, &y, 1), -1);
    ASSERT_ERROR_CONTAINS("is NULL");
    assert_int_equal(nb_onnx_run(m, &bad_dtype, 1, &y, 2), -1);
    ASSERT_ERROR_CONTAINS("2 outputs asked for");
    assert_null(y);
    nb_release(bad_shape);
    nb_release(bad_rank);
    nb_release(bad_dtype);
    nb_onnx_free(m);
    nb_onnx_free(NULL);
    assert_int_equal(nb_onnx_num_inputs(NULL), 0);
}

/* a node failing at run names itself: Reshape to a shape of the wrong size */
static void test_run_error_names_node(void **state) {
    (void)state;
    mb b;
    mb_init(&b, 17);
    mb_input(&b, "x", 2, dims_b3);
    static int64_t sv[1] = { 4 }, one[1] = { 1 };
    Onnx__TensorProto *s = mb_init_f32(&b, "s", 1, one, sv, sizeof sv);
    s->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    mb_node(&b, "Reshape", "rs", "x", "s", NULL, "y");
    mb_output(&b, "y");
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    free(buf);
    assert_non_null(m);
    nb_tensor *x = nb_zeros(NB_SHAPE(2, 3), NB_F32), *y = NULL;
    assert_int_equal(nb_onnx_run(m, &x, 1, &y, 1), -1);
    ASSERT_ERROR_CONTAINS("Reshape node 'rs' (#0)");
    nb_release(x);
    nb_onnx_free(m);
}

/* ---------- attributes against the schema, declared shapes ---------- */
/* y = Concat(x, x) at opset 13 (its attribute set by the caller). */
static Onnx__NodeProto *mb_concat(mb *b) {
    mb_init(b, 13);
    mb_input(b, "x", 2, dims_b3);
    Onnx__NodeProto *n = mb_node(b, "Concat", "cat", "x", "x", NULL, "y");
    mb_output(b, "y");
    return n;
}

/* Each operator's attributes are checked against its schema (src/onnx/import_ops.c's table) at
   load: Concat without its required axis ran as axis 0, and axis "zero" (a string) too; a graph
   input declared with a size of -5 ran. */
static void test_attribute_schema(void **state) {
    (void)state;
    mb b;
    mb_concat(&b);
    expect_load_error(&b, (const char *const[]){ "Concat node 'cat'", "required attribute 'axis' (int) is missing", NULL });
    Onnx__NodeProto *n = mb_concat(&b);
    mb_attr_int(&b, n, "axis", 0);
    b.attrs[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    b.attrs[0].has_i = false;
    b.attrs[0].has_s = true;
    b.attrs[0].s.data = (uint8_t *)"zero";
    b.attrs[0].s.len = 4;
    expect_load_error(&b, (const char *const[]){ "Concat node 'cat'", "attribute 'axis' is of type string; Concat's 'axis' is of type int", NULL });
    n = mb_concat(&b);
    mb_attr_int(&b, n, "axis", 0);
    b.attrs[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    expect_load_error(&b, (const char *const[]){ "attribute 'axis' is of type float", NULL });
    /* no type field (older files): the field holding the value says it */
    n = mb_concat(&b);
    mb_attr_int(&b, n, "axis", 1);
    b.attrs[0].has_type = false;
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    free(buf);
    assert_non_null(m);
    nb_onnx_free(m);
    /* given twice */
    n = mb_concat(&b);
    mb_attr_int(&b, n, "axis", 0);
    mb_attr_int(&b, n, "axis", 1);
    n->attribute = b.attr_p;
    n->n_attribute = 2;
    expect_load_error(&b, (const char *const[]){ "attribute 'axis' is given twice", NULL });
    /* an attribute of another version: Squeeze's axes became an input at version 13 */
    mb_add_relu(&b, 13);
    b.nodes[1].op_type = "Squeeze";
    static int64_t ax[1] = { 0 };
    mb_attr_ints(&b, &b.nodes[1], "axes", ax, 1);
    expect_load_error(&b, (const char *const[]){ "attribute 'axes' is not one of Squeeze version 13's", "up to version 12", NULL });
    /* required before a version: Unsqueeze's axes up to 12 */
    mb_add_relu(&b, 11);
    b.nodes[1].op_type = "Unsqueeze";
    expect_load_error(&b, (const char *const[]){ "Unsqueeze node 'relu0'", "required attribute 'axes' (ints) is missing", NULL });
    /* Cast's to, MaxPool's kernel_shape */
    mb_add_relu(&b, 13);
    b.nodes[1].op_type = "Cast";
    expect_load_error(&b, (const char *const[]){ "required attribute 'to' (int) is missing (Cast version 13, opset 13)", NULL });
    mb_add_relu(&b, 13);
    b.nodes[1].op_type = "MaxPool";
    expect_load_error(&b, (const char *const[]){ "required attribute 'kernel_shape' (ints)", NULL });
    /* a graph input's declared size: -5 is no size; -1 stays "unknown", as some exporters write it */
    static int64_t neg5[2] = { 2, -5 };
    mb_add_relu(&b, 17);
    b.in_p[0] = mb_vi(&b, 0, "x", 2, neg5);
    b.dims[0][1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    b.dims[0][1].dim_value = -5;
    expect_load_error(&b, (const char *const[]){ "graph input 'x' declares dimension 1 as -5", NULL });
    mb_add_relu(&b, 17);
    b.dims[0][1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    b.dims[0][1].dim_value = 3;
    b.dims[0][0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    b.dims[0][0].dim_value = -1;
    buf = mb_pack(&b, &size);
    m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    free(buf);
    assert_non_null(m);
    nb_tensor *x = nb_zeros(NB_SHAPE(4, 3), NB_F32), *y = NULL;
    assert_int_equal(nb_onnx_run(m, &x, 1, &y, 1), 0);
    nb_release(x), nb_release(y);
    nb_onnx_free(m);
    assert_null(nb_error());
}

/* ---------- integer Div and Mod ---------- */
/* y = op(a, b) over two int graph inputs of shape [N] (fmod < 0: no attribute). */
static nb_onnx_model *int_binary_model(const char *op, int fmod, int onnx_type, bool compile) {
    static int64_t dn[1] = { -1 };
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "a", 1, dn);
    mb_input(&b, "b", 1, dn);
    b.ttypes[0].elem_type = b.ttypes[1].elem_type = onnx_type;
    Onnx__NodeProto *n = mb_node(&b, op, "op", "a", "b", NULL, "y");
    if (fmod >= 0) mb_attr_int(&b, n, "fmod", fmod);
    mb_output(&b, "y");
    size_t size;
    uint8_t *buf = mb_pack(&b, &size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ .compile = compile });
    free(buf);
    assert_non_null(m);
    return m;
}

/* Runs the model on a and b (n values of dtype d); the result's values as int64 into got. */
static int run_int_binary(nb_onnx_model *m, const void *a, const void *bv, int n, nb_dtype d, int64_t *got) {
    nb_tensor *in[2] = { nb_from_data(a, NB_SHAPE(n), d), nb_from_data(bv, NB_SHAPE(n), d) }, *y = NULL;
    int rc = nb_onnx_run(m, in, 2, &y, 1);
    if (rc == 0) {
        assert_int_equal(nb_dtype_of(y), d);
        nb_tensor *c = nb_cast(y, NB_I64);
        assert_int_equal(nb_copy_to(c, got, sizeof(int64_t) * (size_t)n), 0);
        nb_release(c);
    }
    nb_release(in[0]), nb_release(in[1]), nb_release(y);
    return rc;
}

/* Integer Div and Mod in integer arithmetic: through f64, 2^53 + 1 divided by 1 gave 2^53 and
   (2^53 + 1) mod 7 gave 4. The expected values are Python's exact integers, and ONNX Runtime
   1.31's but where it computes fmod 1 in double: Div truncates, Mod takes the divisor's sign (fmod 0) or the dividend's (fmod 1);
   INT_MIN / -1 wraps; a zero divisor is an error, eagerly and compiled. */
static void test_int_div_mod(void **state) {
    (void)state;
    const int64_t big = INT64_C(1) << 53;
    const int64_t a[10] = { big + 1, big + 3, -(big + 1), (INT64_C(1) << 62) + 5, -7, 7, -7, 7, INT64_MIN + 1, INT64_MIN };
    const int64_t b[10] = { 1, 7, 7, 3, 2, -2, -2, 2, -1, -1 };
    const int64_t want[3][10] = {
        { big + 1, 1286742750677285, -1286742750677284, 1537228672809129303, -3, -3, 3, 3, INT64_MAX, INT64_MIN },
        { 0, 0, 2, 0, 1, -1, -1, 1, 0, 0 },   /* Mod, fmod 0 */
        { 0, 0, -5, 0, -1, 1, -1, 1, 0, 0 },  /* Mod, fmod 1: exact (ONNX Runtime goes through double here:
                                                 1, -4, 1 for elements 1 to 3) */
    };
    const int32_t a32[5] = { -7, 7, INT32_MIN + 1, INT32_MAX, INT32_MIN }, b32[5] = { 2, -2, -1, -3, 3 };
    const int64_t want32[3][5] = { { -3, -3, INT32_MAX, -715827882, -715827882 }, { 1, -1, 0, -2, 1 }, { -1, 1, 0, 1, -2 } };
    const uint8_t a8[3] = { 200, 7, 255 }, b8[3] = { 7, 3, 16 };
    const int64_t want8[2][3] = { { 28, 2, 15 }, { 4, 1, 15 } };
    const char *ops[3] = { "Div", "Mod", "Mod" };
    const int fmods[3] = { -1, 0, 1 };
    for (int compile = 0; compile <= 1; compile++)
        for (int k = 0; k < 3; k++) {
            int64_t got[10];
            nb_onnx_model *m = int_binary_model(ops[k], fmods[k], ONNX__TENSOR_PROTO__DATA_TYPE__INT64, compile);
            assert_int_equal(run_int_binary(m, a, b, 10, NB_I64, got), 0);
            for (int i = 0; i < 10; i++)
                if (got[i] != want[k][i]) fail_msg("%s fmod %d compile %d: element %d is %lld, want %lld", ops[k], fmods[k], compile, i, (long long)got[i], (long long)want[k][i]);
            /* a zero divisor: an error naming the node, the element and the numerator */
            int64_t z[3] = { 5, 6, 7 }, zb[3] = { 1, 0, 2 };
            assert_int_equal(run_int_binary(m, z, zb, 3, NB_I64, got), -1);
            ASSERT_ERROR_CONTAINS(k == 0 ? "integer division by zero (element 1" : "integer modulo by zero (element 1");
            nb_onnx_free(m);
            m = int_binary_model(ops[k], fmods[k], ONNX__TENSOR_PROTO__DATA_TYPE__INT32, compile);
            assert_int_equal(run_int_binary(m, a32, b32, 5, NB_I32, got), 0);
            for (int i = 0; i < 5; i++) assert_int_equal(got[i], want32[k][i]);
            nb_onnx_free(m);
            if (k == 2) continue; /* u8: C's rules, one Mod suffices */
            m = int_binary_model(ops[k], fmods[k], ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, compile);
            assert_int_equal(run_int_binary(m, a8, b8, 3, NB_U8, got), 0);
            for (int i = 0; i < 3; i++) assert_int_equal(got[i], want8[k][i]);
            nb_onnx_free(m);
        }
    assert_null(nb_error());
}

/* ---------- nesting ---------- */
/* Wire-format writer that builds a message back to front, so each level's length is known
   when its header is written (hand-made bytes: protobuf-c's packer recurses just as its
   unpacker does). */
typedef struct {
    uint8_t *buf;
    size_t pos; /* the message is buf[pos, cap) */
    size_t cap;
} wr;

static void wr_bytes(wr *w, const void *p, size_t n) {
    assert_true(w->pos >= n);
    w->pos -= n;
    memcpy(w->buf + w->pos, p, n);
}
static void wr_varint(wr *w, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    do {
        b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    wr_bytes(w, b, (size_t)n);
}
/* Wraps what was written after mark bytes (counted from the end) as length-delimited field f. */
static void wr_wrap(wr *w, int f, size_t mark) {
    wr_varint(w, (uint64_t)(w->cap - mark - w->pos));
    wr_varint(w, (uint64_t)f << 3 | 2);
}
static void wr_field(wr *w, int f, const char *s) {
    size_t mark = w->cap - w->pos;
    wr_bytes(w, s, strlen(s));
    wr_wrap(w, f, mark);
}

/* A model whose graph holds `graphs` If nodes each holding the next graph as attribute 'body',
   or (graphs 0) whose input's type is a sequence of a sequence ... `types` deep. */
static uint8_t *nested_model(int graphs, int types, size_t *size) {
    wr w = { .cap = 64 + (size_t)graphs * 32 + (size_t)types * 8 };
    w.buf = malloc(w.cap);
    w.pos = w.cap;
    /* each level wraps all that is written so far (mark 0) */
    if (graphs) {
        wr_field(&w, 2, "g"); /* the innermost graph's name */
        for (int i = 0; i < graphs; i++) {
            wr_wrap(&w, 6, 0);   /* AttributeProto.g (6): the graph so far */
            wr_varint(&w, 5);    /* AttributeProto.type (20): GRAPH */
            wr_varint(&w, 20 << 3);
            wr_field(&w, 1, "body");
            wr_wrap(&w, 5, 0);   /* NodeProto.attribute (5) */
            wr_field(&w, 4, "If");
            wr_wrap(&w, 1, 0);   /* GraphProto.node (1) */
        }
    } else {
        wr_varint(&w, 1);        /* TypeProto { tensor_type (1) { elem_type (1): 1 } } */
        wr_varint(&w, 1 << 3);
        wr_wrap(&w, 1, 0);
        for (int i = 0; i < types; i++) {
            wr_wrap(&w, 1, 0);   /* Sequence.elem_type (1) */
            wr_wrap(&w, 4, 0);   /* TypeProto.sequence_type (4) */
        }
        wr_wrap(&w, 2, 0);       /* ValueInfoProto.type (2) */
        wr_field(&w, 1, "x");
        wr_wrap(&w, 11, 0);      /* GraphProto.input (11) */
    }
    wr_wrap(&w, 7, 0); /* ModelProto.graph (7) */
    size_t op = w.cap - w.pos;
    wr_varint(&w, 17);
    wr_varint(&w, 2 << 3);
    wr_wrap(&w, 8, op); /* opset_import { version 17 } */
    wr_varint(&w, 8);
    wr_varint(&w, 1 << 3); /* ir_version 8 */
    *size = w.cap - w.pos;
    memmove(w.buf, w.buf + w.pos, *size);
    return w.buf;
}

/* Subgraphs in attributes and types in types nest without bound in the schema, and protobuf-c
   unpacks them by recursion: 3,000 graphs deep (75 kB) overflowed the stack. The limit is
   protobuf's own (100 levels below the model), which onnx and ONNX Runtime apply too: a model
   at the limit gets past the check (and is refused for its If node), one level more is not. */
static void test_nesting(void **state) {
    (void)state;
    struct { int graphs, types; const char *want; } cases[] = {
        { 3000, 0, "101 levels deep" }, { 34, 0, "101 levels deep" }, { 33, 0, "operator If is not supported" },
        { 0, 20000, "101 levels deep" }, { 0, 49, "101 levels deep" }, { 0, 48, "'x' is not a tensor" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size;
        uint8_t *buf = nested_model(cases[i].graphs, cases[i].types, &size);
        nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
        free(buf);
        assert_null(m);
        const char *e = nb_error();
        if (!e || !strstr(e, cases[i].want)) fail_msg("case %zu: expected \"%s\" in \"%s\"", i, cases[i].want, e ? e : "(none)");
        if (strstr(cases[i].want, "deep")) ASSERT_ERROR_CONTAINS("the limit is 100");
        nb_error_clear();
    }
    /* the file loader too (nabla info), and the error says how deep the subgraphs were */
    size_t size;
    uint8_t *buf = nested_model(3000, 0, &size);
    char path[] = "/tmp/nabla_onnx_nestXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, size), (ssize_t)size);
    close(fd);
    free(buf);
    assert_null(nb_onnx_load(path, (nb_onnx_load_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("34 graphs");
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_runs, clear_error_setup),
        cmocka_unit_test_setup(test_int8, clear_error_setup),
        cmocka_unit_test_setup(test_constant_conv_weights, clear_error_setup),
        cmocka_unit_test_setup(test_output_of_constant_is_a_copy, clear_error_setup),
        cmocka_unit_test_setup(test_compiled_shapes, clear_error_setup),
        cmocka_unit_test_setup(test_truncated_and_corrupt, clear_error_setup),
        cmocka_unit_test_setup(test_cycle, clear_error_setup),
        cmocka_unit_test_setup(test_unknown_names, clear_error_setup),
        cmocka_unit_test_setup(test_initializer_size, clear_error_setup),
        cmocka_unit_test_setup(test_external_data, clear_error_setup),
        cmocka_unit_test_setup(test_unsupported, clear_error_setup),
        cmocka_unit_test_setup(test_wrong_inputs, clear_error_setup),
        cmocka_unit_test_setup(test_run_error_names_node, clear_error_setup),
        cmocka_unit_test_setup(test_nesting, clear_error_setup),
        cmocka_unit_test_setup(test_int_div_mod, clear_error_setup),
        cmocka_unit_test_setup(test_attribute_schema, clear_error_setup),
    };
    return RUN_TESTS(tests);
}
