/* nabla/onnx.h in a build without ONNX (NABLA_WITH_ONNX=OFF): each function says so. */
#include "../core/core_impl.h"
#include "nabla/onnx.h"

#define OFF(fn) nb__error(fn ": built without ONNX (NABLA_WITH_ONNX=OFF; it needs protobuf-c and libonnx-dev)")

int nb_onnx_export(nb_module *m, nb_tensor *const *example_inputs, int n, const char *path, nb_onnx_export_opts opts) {
    (void)m; (void)example_inputs; (void)n; (void)path; (void)opts;
    OFF("nb_onnx_export");
    return -1;
}

int nb_onnx_export_fn(nb_graph_fn fn, void *ctx, nb_tensor *const *example_inputs, int n, const char *path,
                      nb_onnx_export_opts opts) {
    (void)fn; (void)ctx; (void)example_inputs; (void)n; (void)path; (void)opts;
    OFF("nb_onnx_export_fn");
    return -1;
}

nb_onnx_model *nb_onnx_load(const char *path, nb_onnx_load_opts opts) {
    (void)path; (void)opts;
    OFF("nb_onnx_load");
    return NULL;
}

nb_onnx_model *nb_onnx_load_memory(const void *data, size_t size, nb_onnx_load_opts opts) {
    (void)data; (void)size; (void)opts;
    OFF("nb_onnx_load_memory");
    return NULL;
}

int nb_onnx_num_inputs(const nb_onnx_model *m) { (void)m; return 0; }
int nb_onnx_num_outputs(const nb_onnx_model *m) { (void)m; return 0; }
const char *nb_onnx_input_name(const nb_onnx_model *m, int i) { (void)m; (void)i; return NULL; }
const char *nb_onnx_output_name(const nb_onnx_model *m, int i) { (void)m; (void)i; return NULL; }
int nb_onnx_opset(const nb_onnx_model *m) { (void)m; return 0; }
int nb_onnx_input_info(const nb_onnx_model *m, int i, nb_dtype *dtype, int *ndim, int64_t *dims) {
    (void)m; (void)i; (void)dtype; (void)ndim; (void)dims;
    return -1;
}
int nb_onnx_output_info(const nb_onnx_model *m, int i, nb_dtype *dtype, int *ndim, int64_t *dims) {
    (void)m; (void)i; (void)dtype; (void)ndim; (void)dims;
    return -1;
}

int nb_onnx_run(nb_onnx_model *m, nb_tensor *const *inputs, int n, nb_tensor **out, int nout) {
    (void)m; (void)inputs; (void)n; (void)out; (void)nout;
    OFF("nb_onnx_run");
    return -1;
}

char *nb_onnx_summary(const nb_onnx_model *m) {
    (void)m;
    OFF("nb_onnx_summary");
    return NULL;
}

void nb_onnx_free(nb_onnx_model *m) { (void)m; }
