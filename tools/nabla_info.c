/* nabla-info: prints a safetensors or .npy file's tensors, dtypes, shapes, parameter count and
   metadata, or an ONNX model's inputs, outputs, opset and operators (the `nabla info`
   subcommand reuses nabla_info_main). Usage: nabla-info FILE... */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether a state-dict key names a buffer rather than a parameter (PyTorch's batch-norm buffers). */
static int is_buffer(const char *name) {
    static const char *const suffixes[] = { "running_mean", "running_var", "num_batches_tracked" };
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t k = strlen(suffixes[i]);
        if (n >= k && strcmp(name + n - k, suffixes[i]) == 0 && (n == k || name[n - k - 1] == '.')) return 1;
    }
    return 0;
}

static int info_npy(const char *path, FILE *out) {
    nb_tensor *t = nb_load_npy(path);
    if (!t) return -1;
    char sb[200];
    fprintf(out, "%s: NumPy array\n  %-6s %s\n  elements: %lld\n", path, nb_dtype_name(nb_dtype_of(t)),
            nb_shape_str(nb_shape_of(t), sb, sizeof sb), (long long)nb_numel(t));
    nb_release(t);
    return 0;
}

static int info_safetensors(const char *path, FILE *out) {
    nb_safetensors *f = nb_safetensors_open(path);
    if (!f) return -1;
    int n = nb_safetensors_count(f);
    size_t width = 4;
    for (int i = 0; i < n; i++)
        if (strlen(nb_safetensors_name(f, i)) > width) width = strlen(nb_safetensors_name(f, i));
    if (width > 60) width = 60;
    fprintf(out, "%s: safetensors, %d tensor%s\n", path, n, n == 1 ? "" : "s");
    long long params = 0, elements = 0;
    unsigned long long bytes = 0;
    for (int i = 0; i < n; i++) {
        nb_shape shape = { 0 };
        nb_safetensors_info(f, i, NULL, &shape); /* the shape is filled even for a foreign dtype */
        nb_error_clear();
        long long numel = 1;
        for (int k = 0; k < shape.ndim; k++) numel *= shape.dim[k];
        char sb[200];
        fprintf(out, "  %-*s %-5s %s\n", (int)width, nb_safetensors_name(f, i), nb_safetensors_dtype_name(f, i),
                nb_shape_str(shape, sb, sizeof sb));
        elements += numel;
        if (!is_buffer(nb_safetensors_name(f, i))) params += numel;
        bytes += nb_safetensors_nbytes(f, i);
    }
    fprintf(out, "parameters: %lld (elements %lld, %llu bytes of data)\n", params, elements, bytes);
    const nb_metadata *md = nb_safetensors_metadata(f);
    if (nb_metadata_count(md)) {
        fprintf(out, "metadata:\n");
        for (int i = 0; i < nb_metadata_count(md); i++)
            fprintf(out, "  %s = %s\n", nb_metadata_key(md, i), nb_metadata_value(md, i));
    }
    nb_safetensors_close(f);
    return 0;
}

static int info_onnx(const char *path, FILE *out) {
    nb_onnx_model *m = nb_onnx_load(path, (nb_onnx_load_opts){ 0 });
    char *text = m ? nb_onnx_summary(m) : NULL;
    nb_onnx_free(m);
    if (!text) return -1;
    fprintf(out, "%s:\n%s", path, text);
    free(text);
    return 0;
}

/* The name the user typed: built into the nabla command this is its info subcommand. */
#ifdef NABLA_INFO_NO_MAIN
#define INFO_NAME "nabla info"
#else
#define INFO_NAME "nabla-info"
#endif

/* Whether path ends in suffix. */
static bool ends_with(const char *path, const char *suffix) {
    size_t n = strlen(path), k = strlen(suffix);
    return n > k && strcmp(path + n - k, suffix) == 0;
}

/* Prints each file's summary to out; 0, or 1 when a file could not be read (its error on err). */
int nabla_info_main(int argc, char **argv, FILE *out, FILE *err) {
    bool help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (argc < 2 || help) {
        fprintf(help ? out : err, "usage: %s FILE...   (a .safetensors state dict or checkpoint, a .npy array or a .onnx model)\n",
                INFO_NAME);
        return help ? 0 : 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        int r = ends_with(argv[i], ".npy")    ? info_npy(argv[i], out)
              : ends_with(argv[i], ".onnx") ? info_onnx(argv[i], out)
                                            : info_safetensors(argv[i], out);
        if (r < 0) {
            fprintf(err, "%s\n", nb_error() ? nb_error() : "unknown error");
            nb_error_clear();
            rc = 1;
        }
    }
    return rc;
}

#ifndef NABLA_INFO_NO_MAIN
int main(int argc, char **argv) { return nabla_info_main(argc, argv, stdout, stderr); }
#endif
