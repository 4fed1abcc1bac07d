/* Tests of src/io: NPY and safetensors round trips for every dtype, state dicts loaded into
   rebuilt networks (strict and non-strict, dtype conversion), bit-identical checkpoint resume,
   atomic writes under injected failures, hostile files; and, given a folder written by
   tests/io_ref.py, interop with PyTorch and NumPy (this program then writes nabla's files there
   for io_ref.py to check). Usage: test_io [INTEROP_DIR] */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nabla.h>
#include "test_util.h"

static char tmpdir[256];
static const char *interop_dir;

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *b = buf[k++ & 7];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Whether the error mentions every given substring (NULL-terminated list). */
static void assert_error_has(const char *first, ...) {
    const char *e = nb_error();
    if (!e) fail_msg("expected an error mentioning '%s', got none", first);
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        if (!strstr(e, s)) fail_msg("error lacks '%s':\n%s", s, e);
    va_end(ap);
}

/* Counts files in tmpdir whose names contain ".tmp." (left-over temporaries). */
static int count_temps(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static nb_tensor *arange_of(nb_shape shape, nb_dtype dt) {
    int64_t n = 1;
    for (int i = 0; i < shape.ndim; i++) n *= shape.dim[i];
    nb_tensor *a = nb_arange(0, (double)n, 1, NB_F64);
    if (dt == NB_BOOL) a = nb_gt(nb_sub(a, nb_mul_scalar(nb_cast(nb_cast(nb_mul_scalar(a, 0.5), NB_I64), NB_F64), 2)), nb_scalar(0.5));
    else a = nb_cast(nb_sub(a, nb_scalar(dt == NB_U8 ? 0 : 3)), dt);
    return nb_reshape(a, shape);
}

static bool same_bytes(nb_tensor *a, nb_tensor *b) {
    if (nb_dtype_of(a) != nb_dtype_of(b) || nb_numel(a) != nb_numel(b) || nb_ndim(a) != nb_ndim(b)) return false;
    for (int i = 0; i < nb_ndim(a); i++)
        if (nb_dim(a, i) != nb_dim(b, i)) return false;
    size_t n = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    void *x = malloc(n + 1), *y = malloc(n + 1);
    nb_copy_to(a, x, n);
    nb_copy_to(b, y, n);
    bool same = memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

static int setup(void **state) {
    nb_error_clear();
    nb_io_set_write_limit(-1);
    return 0;
}

static int teardown(void **state) {
    nb_io_set_write_limit(-1);
    if (nb_error()) fail_msg("error left over: %s", nb_error());
    return 0;
}

/* ---------------- NPY ---------------- */
static void test_npy_round_trip(void **state) {
    nb_dtype dts[] = { NB_F32, NB_F64, NB_F16, NB_I64, NB_I32, NB_U8, NB_BOOL, NB_I8 };
    nb_shape shapes[] = { NB_SHAPE(2, 3, 4), NB_SHAPE(5), NB_SHAPE(), NB_SHAPE(0, 3) };
    nb_scope *s = nb_scope_begin();
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t k = 0; k < 4; k++) {
            nb_tensor *a = arange_of(shapes[k], dts[d]);
            assert_int_equal(nb_save_npy(a, tpath("a.npy")), 0);
            nb_tensor *b = nb_load_npy(tpath("a.npy"));
            assert_non_null(b);
            assert_true(same_bytes(a, b));
        }
    /* a non-contiguous view is written in logical order */
    nb_tensor *t = nb_transpose(arange_of(NB_SHAPE(3, 4), NB_F32), 0, 1);
    assert_int_equal(nb_save_npy(t, tpath("t.npy")), 0);
    assert_true(same_bytes(nb_contiguous(t), nb_load_npy(tpath("t.npy"))));
    /* bf16 has no NumPy dtype: refused with a clear error, nothing written */
    assert_true(nb_save_npy(nb_cast(t, NB_BF16), tpath("bf.npy")) < 0);
    assert_error_has("bf16", "bf.npy", NULL);
    nb_error_clear();
    assert_int_equal(access(tpath("bf.npy"), F_OK), -1);
    nb_scope_end(s);
}

static size_t npy_bytes(unsigned char *out, const char *header, const void *data, size_t n) {
    size_t hl = strlen(header);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (unsigned char)(hl & 0xff);
    out[9] = (unsigned char)(hl >> 8);
    memcpy(out + 10, header, hl);
    memcpy(out + 10 + hl, data, n);
    return 10 + hl + n;
}

static void test_npy_layouts(void **state) {
    nb_scope *s = nb_scope_begin();
    unsigned char buf[512];
    /* Fortran order: the file holds the columns one after another */
    float colmajor[6] = { 0, 3, 1, 4, 2, 5 }; /* the 2x3 matrix [[0,1,2],[3,4,5]] */
    size_t n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", colmajor, sizeof colmajor);
    nb_tensor *t = nb_npy_parse(buf, n);
    assert_non_null(t);
    assert_true(same_bytes(t, nb_reshape(nb_arange(0, 6, 1, NB_F32), NB_SHAPE(2, 3))));
    /* big endian i4, and i2 widened to i32 */
    unsigned char be[8] = { 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe };
    n = npy_bytes(buf, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n", be, 8);
    t = nb_npy_parse(buf, n);
    assert_non_null(t);
    int32_t v[2];
    nb_copy_to(t, v, sizeof v);
    assert_int_equal(v[0], 1);
    assert_int_equal(v[1], -2);
    int16_t sh[2] = { -7, 300 };
    n = npy_bytes(buf, "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }\n", sh, 4);
    t = nb_npy_parse(buf, n);
    assert_int_equal(nb_dtype_of(t), NB_I32);
    nb_copy_to(t, v, sizeof v);
    assert_int_equal(v[0], -7);
    assert_int_equal(v[1], 300);
    nb_scope_end(s);
}

static void test_npy_hostile(void **state) {
    unsigned char buf[512];
    float d[4] = { 1, 2, 3, 4 };
    struct { const char *header; size_t data; const char *why; } cases[] = {
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 16, "needs 20 bytes" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", 16, "too large" },
        { "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, "unsupported descr" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7999999999999999944, 6), }", 16, "too large" },
        { "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 16, "structured" },
        { "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 16, "fortran_order" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 16, "non-negative" },
        { "{'descr': '<f4', 'fortran_order': False, }", 16, "lacks 'shape'" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 16, "dimensions" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 16, "unexpected" },
        { "['descr']", 16, "not a dict" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 16, "shape" },
        { "{'descr': '<f4", 16, "descr" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = npy_bytes(buf, cases[i].header, d, cases[i].data);
        nb_error_clear();
        assert_null(nb_npy_parse(buf, n));
        assert_error_has("nb_npy_parse", cases[i].why, NULL);
        /* every truncation fails cleanly too */
        for (size_t k = 0; k < n; k++) {
            nb_error_clear();
            nb_tensor *t = nb_npy_parse(buf, k);
            assert_null(t);
        }
    }
    /* header length past the end, bad magic, bad version */
    size_t n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", d, 8);
    buf[9] = 0x7f;
    nb_error_clear();
    assert_null(nb_npy_parse(buf, n));
    assert_error_has("runs past the end", NULL);
    buf[9] = 0;
    buf[6] = 9;
    nb_error_clear();
    assert_null(nb_npy_parse(buf, n));
    assert_error_has("version", NULL);
    buf[1] = 'X';
    nb_error_clear();
    assert_null(nb_npy_parse(buf, n));
    assert_error_has("magic", NULL);
    /* a missing file names its path */
    nb_error_clear();
    assert_null(nb_load_npy(tpath("nope.npy")));
    assert_error_has("nb_load_npy", "nope.npy", NULL);
    nb_error_clear();
    write_bytes(tpath("bad.npy"), buf, n);
    assert_null(nb_load_npy(tpath("bad.npy")));
    assert_error_has("nb_load_npy", "bad.npy", "magic", NULL);
    nb_error_clear();
}

/* ---------------- safetensors ---------------- */
static void test_safetensors_round_trip(void **state) {
    SKIP_WITHOUT_JSON();
    nb_scope *s = nb_scope_begin();
    nb_dtype dts[] = { NB_F32, NB_F64, NB_F16, NB_BF16, NB_I64, NB_I32, NB_U8, NB_BOOL, NB_I8 };
    const char *names[] = { "F32", "F64", "F16", "BF16", "I64", "I32", "U8", "BOOL", "I8" };
    enum { ND = sizeof dts / sizeof dts[0] };
    nb_named_tensor ts[ND + 2];
    for (int i = 0; i < ND; i++) ts[i] = (nb_named_tensor){ names[i], arange_of(NB_SHAPE(3, 5), dts[i]) };
    ts[ND] = (nb_named_tensor){ "scalar", nb_full(NB_SHAPE(), 2.5, NB_F32) };
    ts[ND + 1] = (nb_named_tensor){ "empty", nb_zeros(NB_SHAPE(0, 4), NB_F32) };
    nb_metadata *md = nb_metadata_new();
    nb_metadata_set(md, "format", "pt");
    nb_metadata_set(md, "note", "caf\xc3\xa9 \"quoted\"\n");
    assert_int_equal(nb_save_safetensors(tpath("all.safetensors"), ts, ND + 2, md), 0);
    nb_metadata_free(md);
    nb_safetensors *f = nb_safetensors_open(tpath("all.safetensors"));
    assert_non_null(f);
    assert_int_equal(nb_safetensors_count(f), ND + 2);
    for (int i = 0; i < ND + 2; i++) {
        int k = nb_safetensors_find(f, ts[i].name);
        assert_true(k >= 0);
        if (i < ND) assert_string_equal(nb_safetensors_dtype_name(f, k), names[i]);
        assert_true(same_bytes(ts[i].tensor, nb_safetensors_get(f, ts[i].name)));
    }
    assert_string_equal(nb_safetensors_name(f, 0), "F32"); /* written in the order given */
    assert_string_equal(nb_metadata_get(nb_safetensors_metadata(f), "format"), "pt");
    assert_string_equal(nb_metadata_get(nb_safetensors_metadata(f), "note"), "caf\xc3\xa9 \"quoted\"\n");
    assert_int_equal(nb_safetensors_find(f, "nope"), -1);
    assert_null(nb_safetensors_get(f, "nope"));
    assert_error_has("nope", NULL);
    nb_error_clear();
    nb_safetensors_close(f);
    /* the header is padded so the data starts 8-byte aligned */
    size_t n;
    unsigned char *b = read_bytes(tpath("all.safetensors"), &n);
    uint64_t hl;
    memcpy(&hl, b, 8);
    assert_int_equal((8 + hl) % 8, 0);
    free(b);
    /* duplicate names are refused */
    nb_named_tensor dup[2] = { { "a", ts[0].tensor }, { "a", ts[1].tensor } };
    assert_true(nb_save_safetensors(tpath("dup.safetensors"), dup, 2, NULL) < 0);
    assert_error_has("appears twice", NULL);
    nb_error_clear();
    nb_scope_end(s);
}

/* A small network with a batch norm: fc1, bn, relu, fc2 as a sequential ("0.weight", ...). */
static nb_module *mlp(int64_t in, int64_t hidden, int64_t out) {
    return nb_nn_sequential(nb_nn_linear(in, hidden), nb_nn_batch_norm1d(hidden), nb_nn_relu(),
                            nb_nn_linear(hidden, out), NULL);
}

typedef struct {
    nb_module base;
    nb_module *fc1, *fc2;
} Net;
static nb_tensor *net_forward(nb_module *self, nb_tensor *x) {
    Net *n = (Net *)self;
    return nb_forward(n->fc2, nb_relu(nb_forward(n->fc1, x)));
}
static const nb_module_class NET = { .name = "Net", .forward = net_forward };
static nb_module *net_new(int64_t in, int64_t hidden, int64_t out, bool fc3) {
    Net *n = (Net *)nb_module_new(&NET, sizeof(Net));
    n->fc1 = nb_module_child(&n->base, "fc1", nb_nn_linear(in, hidden));
    n->fc2 = nb_module_child(&n->base, "fc2", nb_nn_linear(hidden, out));
    if (fc3) nb_module_child(&n->base, "fc3", nb_nn_linear(out, out));
    return &n->base;
}

/* Copies every state entry of m (for comparing before/after). */
static void *snapshot(nb_module *m, size_t *bytes) {
    nb_named_tensor es[64];
    int n = nb_module_state_entries(m, es, 64);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)nb_numel(es[i].tensor) * nb_dtype_size(nb_dtype_of(es[i].tensor));
    char *p = malloc(total + 1), *q = p;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)nb_numel(es[i].tensor) * nb_dtype_size(nb_dtype_of(es[i].tensor));
        nb_copy_to(es[i].tensor, q, b);
        q += b;
    }
    *bytes = total;
    return p;
}

static void test_state_dict_round_trip(void **state) {
    SKIP_WITHOUT_JSON();
    nb_manual_seed(1);
    nb_module *a = mlp(6, 16, 3);
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(8, 6), NB_F32);
    nb_forward(a, x); /* training mode: the batch norm's running statistics move */
    nb_module_train(a, false);
    nb_tensor *ya = nb_forward(a, x);
    assert_int_equal(nb_save_state_dict(a, tpath("mlp.safetensors")), 0);
    nb_manual_seed(2);
    nb_module *b = mlp(6, 16, 3);
    nb_module_train(b, false);
    assert_false(same_bytes(ya, nb_forward(b, x)));
    assert_int_equal(nb_load_state_dict(b, tpath("mlp.safetensors"), (nb_load_opts){ 0 }), 0);
    assert_true(same_bytes(ya, nb_forward(b, x)));
    size_t na, nbb;
    void *sa = snapshot(a, &na), *sb = snapshot(b, &nbb);
    assert_int_equal(na, nbb);
    assert_memory_equal(sa, sb, na);
    free(sa);
    free(sb);
    /* keys in PyTorch's naming and order, the i64 counter included */
    nb_safetensors *f = nb_safetensors_open(tpath("mlp.safetensors"));
    const char *keys[] = { "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                           "1.num_batches_tracked", "3.weight", "3.bias" };
    assert_int_equal(nb_safetensors_count(f), 9);
    for (int i = 0; i < 9; i++) assert_string_equal(nb_safetensors_name(f, i), keys[i]);
    assert_string_equal(nb_safetensors_dtype_name(f, 6), "I64");
    nb_safetensors_close(f);
    nb_scope_end(s);
    nb_module_free(a);
    nb_module_free(b);
}

/* A module holding quantised i8 weights as a buffer: its state dict and a checkpoint carry them as
   safetensors I8 and bring them back exactly; a float tensor is not loaded into them. */
static void test_i8_state(void **state) {
    SKIP_WITHOUT_JSON();
    nb_scope *s = nb_scope_begin();
    nb_module *m[2];
    for (int k = 0; k < 2; k++) {
        m[k] = nb_nn_linear(4, 3);
        nb_tensor *q = k ? nb_zeros(NB_SHAPE(3, 4), NB_I8) : nb_cast(nb_add_scalar(nb_mul_scalar(arange_of(NB_SHAPE(3, 4), NB_F32), 23), -100), NB_I8);
        nb_module_buffer(m[k], "weight_q", q);
    }
    nb_tensor *want = nb_module_get(m[0], "weight_q");
    int8_t v[12];
    nb_copy_to(want, v, sizeof v);
    assert_true(v[0] == 87 && v[11] == 84); /* (0 - 3) * 23 - 100 = -169 wraps to 87; (11 - 3) * 23 - 100 = 84 */
    assert_int_equal(nb_save_state_dict(m[0], tpath("q.safetensors")), 0);
    nb_safetensors *f = nb_safetensors_open(tpath("q.safetensors"));
    int k = nb_safetensors_find(f, "weight_q");
    assert_true(k >= 0);
    assert_string_equal(nb_safetensors_dtype_name(f, k), "I8");
    nb_safetensors_close(f);
    assert_int_equal(nb_load_state_dict(m[1], tpath("q.safetensors"), (nb_load_opts){ 0 }), 0);
    assert_true(same_bytes(want, nb_module_get(m[1], "weight_q")));
    assert_int_equal(nb_assign(nb_module_get(m[1], "weight_q"), nb_zeros(NB_SHAPE(3, 4), NB_I8)), 0);
    nb_checkpoint ck = { .model = m[0], .epoch = 3 };
    assert_int_equal(nb_checkpoint_save(&ck, tpath("q.ckpt")), 0);
    nb_checkpoint back = { .model = m[1] };
    assert_int_equal(nb_checkpoint_load(&back, tpath("q.ckpt")), 0);
    assert_true(same_bytes(want, nb_module_get(m[1], "weight_q")) && back.epoch == 3);
    /* an f32 file entry does not load into the i8 buffer: it names both */
    nb_named_tensor wrong[] = { { "weight", nb_module_get(m[0], "weight") }, { "bias", nb_module_get(m[0], "bias") },
                                { "weight_q", nb_cast(want, NB_F32) } };
    assert_int_equal(nb_save_safetensors(tpath("qf.safetensors"), wrong, 3, NULL), 0);
    assert_true(nb_load_state_dict(m[1], tpath("qf.safetensors"), (nb_load_opts){ 0 }) < 0);
    assert_error_has("weight_q", "F32", "i8", NULL);
    nb_error_clear();
    nb_module_free(m[0]);
    nb_module_free(m[1]);
    nb_scope_end(s);
}

static void test_strict_mismatch(void **state) {
    SKIP_WITHOUT_JSON();
    nb_module *a = net_new(784, 128, 10, false);
    assert_int_equal(nb_save_state_dict(a, tpath("net.safetensors")), 0);
    nb_module *b = net_new(784, 256, 10, true); /* fc1 wider, fc2's input wider, fc3 new */
    size_t n0, n1;
    void *before = snapshot(b, &n0);
    nb_load_report rep = { 0 };
    assert_true(nb_load_state_dict(b, tpath("net.safetensors"), (nb_load_opts){ .report = &rep }) < 0);
    assert_error_has("nb_load_state_dict", "net.safetensors", "fc1.weight: file has [128, 784], model has [256, 784]",
                     "fc1.bias: file has [128], model has [256]", "fc2.weight: file has [10, 128], model has [10, 256]",
                     "missing key: fc3.weight", "missing key: fc3.bias", "nothing was loaded", NULL);
    nb_error_clear();
    void *after = snapshot(b, &n1);
    assert_memory_equal(before, after, n0); /* nothing changed */
    free(after);
    assert_int_equal(rep.missing, 2);
    assert_int_equal(rep.mismatched, 3);
    assert_int_equal(rep.loaded, 0);
    /* unexpected keys: the smaller model loading the bigger one's file */
    assert_int_equal(nb_save_state_dict(b, tpath("big.safetensors")), 0);
    assert_true(nb_load_state_dict(a, tpath("big.safetensors"), (nb_load_opts){ 0 }) < 0);
    assert_error_has("unexpected key: fc3.weight", "unexpected key: fc3.bias", NULL);
    nb_error_clear();
    /* non-strict: loads what matches (fc2.bias) and reports the rest */
    assert_int_equal(nb_load_state_dict(b, tpath("net.safetensors"), (nb_load_opts){ .non_strict = true, .report = &rep }), 0);
    assert_int_equal(rep.loaded, 1);
    assert_int_equal(rep.missing, 2);
    assert_int_equal(rep.mismatched, 3);
    assert_non_null(strstr(rep.text, "fc1.weight: file has [128, 784], model has [256, 784]"));
    nb_load_report_free(&rep);
    nb_scope *s = nb_scope_begin();
    nb_safetensors *f = nb_safetensors_open(tpath("net.safetensors"));
    assert_true(same_bytes(nb_module_get(b, "fc2.bias"), nb_safetensors_get(f, "fc2.bias")));
    nb_safetensors_close(f);
    nb_scope_end(s);
    /* a missing file names the path */
    assert_true(nb_load_state_dict(a, tpath("none.safetensors"), (nb_load_opts){ 0 }) < 0);
    assert_error_has("nb_load_state_dict", "none.safetensors", NULL);
    nb_error_clear();
    free(before);
    nb_module_free(a);
    nb_module_free(b);
}

static void test_dtype_conversion(void **state) {
    SKIP_WITHOUT_JSON();
    nb_manual_seed(3);
    nb_module *a = mlp(5, 7, 2);
    nb_named_tensor es[16];
    int n = nb_module_state_entries(a, es, 16);
    nb_dtype dts[] = { NB_F16, NB_BF16, NB_F64 };
    for (int d = 0; d < 3; d++) {
        nb_scope *s = nb_scope_begin();
        nb_named_tensor cs[16];
        for (int i = 0; i < n; i++)
            cs[i] = (nb_named_tensor){ es[i].name, nb_dtype_of(es[i].tensor) == NB_F32 ? nb_cast(es[i].tensor, dts[d]) : es[i].tensor };
        assert_int_equal(nb_save_safetensors(tpath("half.safetensors"), cs, n, NULL), 0);
        nb_module *b = mlp(5, 7, 2);
        assert_int_equal(nb_load_state_dict(b, tpath("half.safetensors"), (nb_load_opts){ 0 }), 0);
        for (int i = 0; i < n; i++) {
            nb_tensor *t = nb_module_get(b, es[i].name);
            assert_int_equal(nb_dtype_of(t), nb_dtype_of(es[i].tensor));
            assert_true(same_bytes(t, nb_cast(cs[i].tensor, nb_dtype_of(es[i].tensor))));
        }
        nb_module_free(b);
        nb_scope_end(s);
    }
    /* an integer file tensor does not go into a float parameter */
    nb_scope *s = nb_scope_begin();
    nb_named_tensor bad[16];
    for (int i = 0; i < n; i++) bad[i] = (nb_named_tensor){ es[i].name, i == 0 ? nb_cast(es[i].tensor, NB_I32) : es[i].tensor };
    assert_int_equal(nb_save_safetensors(tpath("int.safetensors"), bad, n, NULL), 0);
    assert_true(nb_load_state_dict(a, tpath("int.safetensors"), (nb_load_opts){ 0 }) < 0);
    assert_error_has("0.weight: file has dtype I32, model has f32", NULL);
    nb_error_clear();
    nb_scope_end(s);
    nb_module_free(a);
}

/* ---------------- checkpoints ---------------- */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Batch number pos of a deterministic stream: x [16, 8], y = a class in [0, 4). */
static void make_batch(int64_t pos, nb_tensor **x, nb_tensor **y) {
    float xs[16 * 8];
    int64_t ys[16];
    uint64_t st = 1000 + (uint64_t)pos;
    for (int i = 0; i < 16 * 8; i++) xs[i] = (float)((double)(splitmix(&st) >> 11) / 9007199254740992.0 * 2 - 1);
    for (int i = 0; i < 16; i++) ys[i] = (int64_t)(splitmix(&st) % 4);
    *x = nb_from_data(xs, NB_SHAPE(16, 8), NB_F32);
    *y = nb_from_data(ys, NB_SHAPE(16), NB_I64);
}

typedef struct {
    nb_module *model;
    nb_optimizer *opt;
    nb_scheduler *sched;
} trainer;

static trainer trainer_new(void) {
    trainer t;
    t.model = nb_nn_sequential(nb_nn_linear(8, 32), nb_nn_relu(), nb_nn_dropout(0.2), nb_nn_linear(32, 4), NULL);
    t.opt = nb_optim_adamw(t.model, (nb_adamw_opts){ .lr = 1e-2 });
    t.sched = nb_sched_cosine(t.opt, 4, 1e-4);
    return t;
}

static void trainer_free(trainer *t) {
    nb_sched_free(t->sched);
    nb_optim_free(t->opt);
    nb_module_free(t->model);
}

static void run_epoch(trainer *t, int64_t *pos) {
    for (int b = 0; b < 6; b++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *x, *y;
        make_batch((*pos)++, &x, &y);
        nb_tensor *loss = nb_cross_entropy(nb_forward(t->model, x), y, (nb_ce_opts){ 0 });
        nb_optim_zero_grad(t->opt);
        assert_int_equal(nb_backward(loss), 0);
        assert_int_equal(nb_optim_step(t->opt), 0);
        nb_scope_end(s);
    }
    assert_int_equal(nb_sched_step(t->sched), 0);
}

static char self_path[PATH_MAX]; /* this program, for the resume test's second process */

static void test_checkpoint_resume(void **state) {
    SKIP_WITHOUT_JSON();
    /* straight: two epochs */
    nb_manual_seed(42);
    trainer a = trainer_new();
    int64_t pos = 0;
    run_epoch(&a, &pos);
    run_epoch(&a, &pos);
    size_t na;
    void *straight = snapshot(a.model, &na);
    double lr_a = nb_optim_get_lr(a.opt, 0);
    trainer_free(&a);

    /* one epoch, save, then everything fresh (another seed, the RNG moved on), load, one epoch */
    nb_manual_seed(42);
    trainer b = trainer_new();
    pos = 0;
    run_epoch(&b, &pos);
    nb_metadata *md = nb_metadata_new();
    nb_metadata_set_int(md, "data.position", pos);
    nb_checkpoint ck = { .model = b.model, .optimizer = b.opt, .scheduler = b.sched, .epoch = 1, .global_step = pos,
                         .metadata = md };
    assert_int_equal(nb_checkpoint_save(&ck, tpath("ck.safetensors")), 0);
    nb_metadata_free(md);
    trainer_free(&b);

    /* resumed in a fresh process */
    char cmd[3 * PATH_MAX];
    /* under an emulator (qemu-user for the aarch64 build), /proc/PID/exe is the emulator */
    const char *emu = getenv("NABLA_TEST_EMULATOR");
    if (emu && *emu && self_path[0])
        snprintf(cmd, sizeof cmd, "%s '%s' --resume '%s' '%s'", emu, self_path, tpath("ck.safetensors"), tpath("child.bin"));
    else
        snprintf(cmd, sizeof cmd, "/proc/%ld/exe --resume '%s' '%s'", (long)getpid(), tpath("ck.safetensors"),
                 tpath("child.bin"));
    assert_int_equal(system(cmd), 0);
    size_t nchild;
    unsigned char *child = read_bytes(tpath("child.bin"), &nchild);
    assert_non_null(child);
    assert_int_equal(nchild, na);
    assert_memory_equal(straight, child, na);
    free(child);

    nb_manual_seed(7);
    trainer c = trainer_new();
    nb_scope *s = nb_scope_begin();
    nb_randn(NB_SHAPE(100), NB_F32);
    nb_scope_end(s);
    nb_metadata *got = nb_metadata_new();
    nb_checkpoint ck2 = { .model = c.model, .optimizer = c.opt, .scheduler = c.sched, .metadata = got };
    assert_int_equal(nb_checkpoint_load(&ck2, tpath("ck.safetensors")), 0);
    assert_int_equal(ck2.epoch, 1);
    assert_int_equal(ck2.global_step, 6);
    assert_int_equal(nb_sched_last_epoch(c.sched), 1);
    int64_t p2 = -1;
    assert_int_equal(nb_metadata_get_int(got, "data.position", &p2), 0);
    assert_int_equal(p2, 6);
    nb_metadata_free(got);
    run_epoch(&c, &p2);
    size_t nc;
    void *resumed = snapshot(c.model, &nc);
    assert_int_equal(na, nc);
    assert_memory_equal(straight, resumed, na); /* bit for bit */
    assert_true(nb_optim_get_lr(c.opt, 0) == lr_a);
    free(straight);
    free(resumed);

    /* a checkpoint of another architecture fails and changes nothing */
    trainer d = trainer_new();
    nb_module *other = nb_nn_sequential(nb_nn_linear(8, 16), nb_nn_relu(), nb_nn_dropout(0.2), nb_nn_linear(16, 4), NULL);
    nb_optimizer *oo = nb_optim_adamw(other, (nb_adamw_opts){ 0 });
    size_t n0, n1;
    void *before = snapshot(other, &n0);
    nb_checkpoint bad = { .model = other, .optimizer = oo };
    assert_true(nb_checkpoint_load(&bad, tpath("ck.safetensors")) < 0);
    assert_error_has("nb_checkpoint_load", "model.0.weight: file has [32, 8], model has [16, 8]",
                     "optim.0.exp_avg: file has [32, 8], model has [16, 8]", NULL);
    nb_error_clear();
    void *after = snapshot(other, &n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    /* a plain state dict is not a checkpoint */
    assert_int_equal(nb_save_state_dict(d.model, tpath("plain.safetensors")), 0);
    nb_checkpoint ck3 = { .model = d.model };
    assert_true(nb_checkpoint_load(&ck3, tpath("plain.safetensors")) < 0);
    assert_error_has("not a nabla checkpoint", NULL);
    nb_error_clear();
    /* a checkpoint's model part loads as a state dict with its prefix */
    assert_int_equal(nb_load_state_dict(d.model, tpath("ck.safetensors"), (nb_load_opts){ .prefix = "model." }), 0);
    /* the model alone loads from a checkpoint (optimizer tensors are then ignored) */
    ck3.model = c.model;
    assert_int_equal(nb_checkpoint_load(&ck3, tpath("ck.safetensors")), 0);
    nb_optim_free(oo);
    nb_module_free(other);
    trainer_free(&d);
    trainer_free(&c);
}

/* ---------------- atomic writes ---------------- */
static void test_atomic_writes(void **state) {
    SKIP_WITHOUT_JSON();
    nb_manual_seed(5);
    nb_module *a = net_new(64, 32, 8, false), *b = net_new(64, 32, 8, false);
    const char *path = tpath("atomic.safetensors");
    assert_int_equal(nb_save_state_dict(a, path), 0);
    size_t n0;
    unsigned char *old = read_bytes(path, &n0);
    /* a failure at every stage of the save: the prefix, the header, the data, the last byte */
    int64_t limits[] = { 0, 4, 8, 100, (int64_t)n0 / 2, (int64_t)n0 - 1 };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        nb_io_set_write_limit(limits[i]);
        assert_true(nb_save_state_dict(b, path) < 0);
        assert_error_has("nb_save_state_dict", path, "No space left on device", NULL);
        nb_error_clear();
        size_t n1;
        unsigned char *now = read_bytes(path, &n1);
        assert_int_equal(n0, n1);
        assert_memory_equal(old, now, n0);
        free(now);
        assert_int_equal(count_temps(tmpdir), 0);
    }
    nb_io_set_write_limit((int64_t)n0); /* exactly enough */
    assert_int_equal(nb_save_state_dict(b, path), 0);
    nb_io_set_write_limit(-1);
    /* the same for NPY and checkpoints */
    nb_scope *s = nb_scope_begin();
    assert_int_equal(nb_save_npy(nb_ones(NB_SHAPE(100), NB_F32), tpath("a.npy")), 0);
    nb_io_set_write_limit(200);
    assert_true(nb_save_npy(nb_zeros(NB_SHAPE(100), NB_F32), tpath("a.npy")) < 0);
    assert_error_has("nb_save_npy", "a.npy", NULL);
    nb_error_clear();
    nb_io_set_write_limit(-1);
    assert_true(nb_item(nb_sum_all(nb_load_npy(tpath("a.npy")))) == 100);
    nb_scope_end(s);
    nb_io_set_write_limit(300);
    nb_checkpoint ck = { .model = a };
    assert_true(nb_checkpoint_save(&ck, path) < 0);
    assert_error_has("nb_checkpoint_save", path, NULL);
    nb_error_clear();
    nb_io_set_write_limit(-1);
    assert_int_equal(count_temps(tmpdir), 0);

    /* a real file-size limit from the system (EFBIG), not the hook */
    struct rlimit old_lim, lim;
    getrlimit(RLIMIT_FSIZE, &old_lim);
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old_lim;
    lim.rlim_cur = 1000;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = nb_save_state_dict(a, path);
    setrlimit(RLIMIT_FSIZE, &old_lim);
    signal(SIGXFSZ, old_sig);
    assert_true(rc < 0);
    assert_error_has("nb_save_state_dict", path, "File too large", NULL);
    nb_error_clear();
    assert_int_equal(count_temps(tmpdir), 0);

    /* a read-only folder (as root, permissions do not bind: use /sys, which refuses new files) */
    char ro[300];
    snprintf(ro, sizeof ro, "%s/ro", tmpdir);
    mkdir(ro, 0755);
    chmod(ro, 0555);
    char rop[400];
    snprintf(rop, sizeof rop, "%s/model.safetensors", access(ro, W_OK) == 0 ? "/sys" : ro);
    assert_true(nb_save_state_dict(a, rop) < 0);
    assert_error_has("nb_save_state_dict", rop, NULL);
    nb_error_clear();
    chmod(ro, 0755);
    rmdir(ro);
    /* a folder that does not exist */
    assert_true(nb_save_state_dict(a, tpath("no/such/dir/x.safetensors")) < 0);
    assert_error_has("no/such/dir/x.safetensors", "No such file", NULL);
    nb_error_clear();
    free(old);
    nb_module_free(a);
    nb_module_free(b);
}

/* ---------------- special files, killed writers ---------------- */
/* Reads path with reader `which`: nb_load_npy, nb_safetensors_open, nb_load_state_dict,
   nb_checkpoint_load; 0 or <0. */
static int open_special(int which, const char *path, nb_module *m) {
    nb_checkpoint ck = { .model = m };
    switch (which) {
    case 0: return nb_load_npy(path) ? 0 : -1;
    case 1: {
        nb_safetensors *f = nb_safetensors_open(path);
        nb_safetensors_close(f);
        return f ? 0 : -1;
    }
    case 2: return nb_load_state_dict(m, path, (nb_load_opts){ 0 });
    default: return nb_checkpoint_load(&ck, path);
    }
}

/* Runs reader `which` on the FIFO at path in a child process, with no writer there: a reader that
   does not refuse FIFOs waits forever for one. True when the child came back (failing) within 10 s. */
static bool returns_in_time(int which, const char *path, nb_module *m) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        _exit(open_special(which, path, m) < 0 ? 0 : 1);
    }
    for (int i = 0; i < 1000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) && WEXITSTATUS(st) == 0;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return false;
}

/* Every reader refuses what is not a regular file, naming the path: a FIFO (which blocked
   nb_load_state_dict forever), a folder, a device. */
static void test_special_files_refused(void **state) {
    const char *fifo = tpath("fifo");
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    nb_module *m = net_new(4, 3, 2, false);
    for (int which = 0; which < 4; which++) {
        if (!returns_in_time(which, fifo, m)) fail_msg("reader %d blocked on the FIFO %s", which, fifo);
        nb_error_clear();
        assert_true(open_special(which, fifo, m) < 0); /* it returns: now in this process, for the message */
        assert_error_has(fifo, "not a regular file (it is a FIFO)", NULL);
        nb_error_clear();
    }
    unlink(fifo);
    assert_true(nb_load_state_dict(m, tmpdir, (nb_load_opts){ 0 }) < 0);
    assert_error_has("nb_load_state_dict", tmpdir, "it is a folder", NULL);
    nb_error_clear();
    assert_null(nb_load_npy("/dev/zero"));
    assert_error_has("nb_load_npy", "/dev/zero", "it is a character device", NULL);
    nb_error_clear();
    nb_module_free(m);
}

/* Whether process pid holds a file descriptor open on something in folder dir. */
static bool child_has_file_in(pid_t pid, const char *dir) {
    char fds[64], link[600], target[1200];
    snprintf(fds, sizeof fds, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(fds);
    if (!d) return false;
    bool found = false;
    size_t dl = strlen(dir);
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        found = strncmp(target, dir, dl) == 0 && target[dl] == '/';
    }
    closedir(d);
    return found;
}

/* The names in dir, but . and .. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* A writer killed (SIGKILL) in the middle of a save leaves nothing behind: the folder holds the
   old file, intact, and no temporary (the data goes to an O_TMPFILE file, named only at commit). */
static void test_killed_writer_leaves_nothing(void **state) {
    SKIP_WITHOUT_JSON();
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/killed", tmpdir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    nb_manual_seed(3);
    nb_module *small = net_new(4, 3, 2, false);
    assert_int_equal(nb_save_state_dict(small, path), 0);
    size_t n0;
    unsigned char *old = read_bytes(path, &n0);
    nb_module *big = nb_nn_linear(4096, 4096); /* 64 MiB of weights: a save long enough to catch */
    bool caught = false;
    for (int attempt = 0; attempt < 10 && !caught; attempt++) {
        int done[2];
        assert_int_equal(pipe(done), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(done[0]);
            alarm(60);
            int rc = nb_save_state_dict(big, path);
            if (write(done[1], rc == 0 ? "y" : "n", 1) != 1) _exit(2);
            pause();
            _exit(0);
        }
        close(done[1]);
        /* wait until the child has its temporary file open, then kill it */
        bool seen = false, finished = false;
        while (!seen && !finished) {
            seen = child_has_file_in(pid, dir);
            struct pollfd pfd = { .fd = done[0], .events = POLLIN };
            finished = !seen && poll(&pfd, 1, 0) > 0;
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(done[0]);
        size_t n1;
        unsigned char *now = read_bytes(path, &n1);
        assert_non_null(now);
        bool same = n1 == n0 && memcmp(old, now, n0) == 0;
        free(now);
        if (seen && same) {
            caught = true;
            assert_int_equal(count_entries(dir), 1); /* the old file and nothing else */
        } else {
            /* the save finished before the kill: start again from the old file */
            assert_int_equal(count_entries(dir), 1);
            write_bytes(path, old, n0);
        }
    }
    assert_true(caught);
    /* and the old file still loads */
    nb_module *again = net_new(4, 3, 2, false);
    assert_int_equal(nb_load_state_dict(again, path, (nb_load_opts){ 0 }), 0);
    nb_module_free(again);
    free(old);
    nb_module_free(small);
    nb_module_free(big);
}

/* ---------------- hostile safetensors ---------------- */
static size_t st_bytes(unsigned char *out, const char *json, size_t data) {
    size_t hl = strlen(json);
    uint64_t h = hl;
    memcpy(out, &h, 8);
    memcpy(out + 8, json, hl);
    memset(out + 8 + hl, 0x5a, data);
    return 8 + hl + data;
}

static void test_safetensors_hostile(void **state) {
    SKIP_WITHOUT_JSON();
    static unsigned char buf[1 << 16];
    struct { const char *json; size_t data; const char *why; } cases[] = {
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "beyond the 4 bytes" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 12, "needs" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "bad data_offsets" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "overlap" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, "too many" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, "too many" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dimensions" },
        { "{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "duplicate" },
        { "{\"a\":[1,2]}", 0, "not an object" },
        { "{\"__metadata__\":{\"k\":1}}", 0, "not a string" },
        { "{\"__metadata__\":[]}", 0, "not an object" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8, "bad JSON" },
        { "[1,2,3]", 0, "not a JSON object" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,10]}}", 10, "non-negative integers" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8, "bad JSON" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = st_bytes(buf, cases[i].json, cases[i].data);
        nb_error_clear();
        nb_safetensors *f = nb_safetensors_open_memory(buf, n);
        if (f) fail_msg("case %zu accepted: %s", i, cases[i].json);
        assert_error_has(cases[i].why, NULL);
    }
    /* deeply nested JSON */
    size_t depth = 30000;
    char *deep = malloc(2 * depth + 16);
    size_t k = 0;
    deep[k++] = '{';
    memcpy(deep + k, "\"a\":", 4);
    k += 4;
    for (size_t i = 0; i < depth; i++) deep[k++] = '[';
    for (size_t i = 0; i < depth; i++) deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = 0;
    unsigned char *big = malloc(k + 16);
    size_t n = st_bytes(big, deep, 0);
    nb_error_clear();
    assert_null(nb_safetensors_open_memory(big, n));
    assert_error_has("bad JSON", NULL);
    free(deep);
    free(big);
    /* header length larger than the file */
    n = st_bytes(buf, "{}", 0);
    buf[0] = 0xff;
    buf[5] = 0x01;
    nb_error_clear();
    assert_null(nb_safetensors_open_memory(buf, n));
    assert_error_has("runs past the end", NULL);
    /* every truncation of a valid file fails cleanly, through the file path too */
    nb_scope *s = nb_scope_begin();
    nb_module *m = mlp(3, 4, 2);
    assert_int_equal(nb_save_state_dict(m, tpath("ok.safetensors")), 0);
    size_t len;
    unsigned char *ok = read_bytes(tpath("ok.safetensors"), &len);
    for (size_t cut = 0; cut < len; cut++) {
        nb_error_clear();
        nb_safetensors *f = nb_safetensors_open_memory(ok, cut);
        assert_null(f);
        assert_non_null(nb_error());
    }
    write_bytes(tpath("cut.safetensors"), ok, len - 3);
    size_t n0, n1;
    void *before = snapshot(m, &n0);
    nb_error_clear();
    assert_true(nb_load_state_dict(m, tpath("cut.safetensors"), (nb_load_opts){ 0 }) < 0);
    assert_error_has("nb_load_state_dict", "cut.safetensors", NULL);
    void *after = snapshot(m, &n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    /* an empty file and a folder */
    write_bytes(tpath("empty.safetensors"), "", 0);
    nb_error_clear();
    assert_null(nb_safetensors_open(tpath("empty.safetensors")));
    assert_error_has("empty.safetensors", "too short", NULL);
    nb_error_clear();
    assert_null(nb_safetensors_open(tmpdir));
    assert_error_has("not a regular file", NULL);
    nb_error_clear();
    /* a foreign dtype is listed but not loaded */
    n = st_bytes(buf, "{\"q\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    nb_safetensors *f = nb_safetensors_open_memory(buf, n);
    assert_non_null(f);
    assert_string_equal(nb_safetensors_dtype_name(f, 0), "I16");
    assert_null(nb_safetensors_get(f, "q"));
    assert_error_has("I16", NULL);
    nb_error_clear();
    nb_safetensors_close(f);
    /* I8, nabla's i8 now, loads (its bytes as they are: -1, 0, 127, -128) */
    n = st_bytes(buf, "{\"q\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4);
    memcpy(buf + n - 4, "\xff\x00\x7f\x80", 4);
    f = nb_safetensors_open_memory(buf, n);
    assert_non_null(f);
    nb_tensor *q = nb_safetensors_get(f, "q");
    int8_t qv[4];
    assert_true(q && nb_dtype_of(q) == NB_I8 && nb_copy_to(q, qv, 4) == 0);
    assert_true(qv[0] == -1 && qv[1] == 0 && qv[2] == 127 && qv[3] == -128);
    nb_safetensors_close(f);
    free(ok);
    nb_module_free(m);
    nb_scope_end(s);
}

/* ---------------- interop with PyTorch and NumPy (files from tests/io_ref.py) ---------------- */
static const char *ipath(const char *name) {
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 512, "%s/%s", interop_dir, name);
    return b;
}

static double max_abs_diff(nb_tensor *a, nb_tensor *b) {
    return nb_item(nb_max(nb_flatten(nb_abs(nb_sub(nb_cast(a, NB_F64), nb_cast(b, NB_F64))), 0, -1), 0, false));
}

static void test_interop_torch(void **state) {
    SKIP_WITHOUT_JSON();
    if (!interop_dir) skip();
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_load_npy(ipath("x.npy"));
    assert_non_null(x);
    /* PyTorch's file, f32 and bf16, into the same architecture: PyTorch's outputs */
    const char *files[] = { "torch_mlp.safetensors", "torch_mlp_bf16.safetensors" };
    const char *outs[] = { "torch_out.npy", "torch_out_bf16.npy" };
    for (int i = 0; i < 2; i++) {
        nb_module *m = mlp(6, 16, 3);
        assert_int_equal(nb_load_state_dict(m, ipath(files[i]), (nb_load_opts){ 0 }), 0);
        nb_module_train(m, false);
        nb_tensor *y = nb_forward(m, x), *ref = nb_load_npy(ipath(outs[i]));
        assert_non_null(ref);
        double d = max_abs_diff(y, ref);
        if (!(d < 1e-5)) fail_msg("%s: outputs differ from PyTorch's by %g", files[i], d);
        nb_module_free(m);
    }
    /* nabla's file for PyTorch: a model with moved batch-norm statistics, and its outputs */
    nb_manual_seed(11);
    nb_module *m = mlp(6, 16, 3);
    for (int i = 0; i < 3; i++) nb_forward(m, nb_add_scalar(nb_mul_scalar(nb_randn(NB_SHAPE(10, 6), NB_F32), 2), 0.5));
    nb_module_train(m, false);
    assert_int_equal(nb_save_state_dict(m, ipath("nabla_mlp.safetensors")), 0);
    assert_int_equal(nb_save_npy(nb_forward(m, x), ipath("nabla_out.npy")), 0);
    nb_module_free(m);
    nb_scope_end(s);
}

static void test_interop_numpy(void **state) {
    if (!interop_dir) skip();
    nb_scope *s = nb_scope_begin();
    /* NumPy's files: arange(24) reshaped (2, 3, 4) in each dtype, C and Fortran order, both
       byte orders; io_ref.py wrote them */
    const char *names[] = { "f4", "f8", "f2", "i8", "i4", "u1", "i2", "u2", "u4", "i1", "f4_fortran", "f8_big",
                            "i4_big_fortran", "b1" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "np_%s.npy", names[i]);
        nb_tensor *t = nb_load_npy(ipath(file));
        if (!t) fail_msg("%s: %s", file, nb_error());
        if (strcmp(names[i], "i1") == 0 && nb_dtype_of(t) != NB_I8) fail_msg("%s: read as %s, not i8", file, nb_dtype_name(nb_dtype_of(t)));
        assert_int_equal(nb_ndim(t), 3);
        assert_int_equal(nb_dim(t, 0), 2);
        assert_int_equal(nb_dim(t, 2), 4);
        nb_tensor *want = nb_arange(0, 24, 1, NB_F64);
        if (strcmp(names[i], "b1") == 0) want = nb_cast(nb_gt(nb_sub(want, nb_mul_scalar(nb_cast(nb_cast(nb_mul_scalar(want, 1.0 / 3), NB_I64), NB_F64), 3)), nb_scalar(0.5)), NB_F64);
        double d = max_abs_diff(nb_reshape(want, NB_SHAPE(2, 3, 4)), t);
        if (d != 0) fail_msg("%s differs from NumPy's by %g", file, d);
    }
    /* nabla's files for NumPy */
    nb_dtype dts[] = { NB_F32, NB_F64, NB_F16, NB_I64, NB_I32, NB_U8, NB_BOOL, NB_I8 };
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "nabla_%s.npy", nb_dtype_name(dts[i]));
        assert_int_equal(nb_save_npy(arange_of(NB_SHAPE(2, 3, 4), dts[i]), ipath(file)), 0);
    }
    nb_scope_end(s);
}

/* The second half of the resume test in a fresh process: `test_io --resume CKPT OUT` builds the
   trainer anew (another seed), loads the checkpoint, trains one epoch and writes the weights to OUT. */
static int resume_child(const char *ckpt, const char *out) {
    nb_manual_seed(99);
    trainer c = trainer_new();
    nb_checkpoint ck = { .model = c.model, .optimizer = c.opt, .scheduler = c.sched, .metadata = nb_metadata_new() };
    int64_t pos;
    if (nb_checkpoint_load(&ck, ckpt) < 0 || nb_metadata_get_int(ck.metadata, "data.position", &pos) < 0) {
        fprintf(stderr, "%s\n", nb_error());
        return 1;
    }
    nb_metadata_free(ck.metadata);
    run_epoch(&c, &pos);
    size_t n;
    void *w = snapshot(c.model, &n);
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(w, 1, n, f) != n) return 1;
    fclose(f);
    free(w);
    trainer_free(&c);
    return nb_error() ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--resume") == 0) return resume_child(argv[2], argv[3]);
    if (!realpath(argv[0], self_path)) self_path[0] = 0;
    if (argc > 1) interop_dir = argv[1];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nabla_test_io.XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_npy_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_npy_layouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_npy_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_dict_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strict_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dtype_conversion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_i8_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_atomic_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interop_torch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interop_numpy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_special_files_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_writer_leaves_nothing, setup, teardown),
    };
    if (getenv("NABLA_TEST_FILTER")) cmocka_set_test_filter(getenv("NABLA_TEST_FILTER"));
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) return 1;
    return rc;
}
