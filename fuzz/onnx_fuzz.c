/* libFuzzer target: nb_onnx_load_memory must never crash or read out of bounds on any input, and
   a model it accepts must run (on zero inputs of the declared shapes) or fail cleanly. */
#include <nabla.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private copy, so reads past the input's end are caught by ASan */
    uint8_t *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    nb_onnx_model *m = nb_onnx_load_memory(buf, size, (nb_onnx_load_opts){ 0 });
    if (m) {
        char *s = nb_onnx_summary(m);
        free(s);
        /* run on small inputs: one 2x2 f32 tensor per input (wrong shapes fail cleanly too) */
        int n = nb_onnx_num_inputs(m);
        if (n <= 8 && nb_onnx_num_outputs(m) >= 1) {
            nb_tensor *in[8], *out = NULL;
            for (int i = 0; i < n; i++) in[i] = nb_zeros(NB_SHAPE(2, 2), NB_F32);
            if (nb_onnx_run(m, in, n, &out, 1) == 0) nb_release(out);
            for (int i = 0; i < n; i++) nb_release(in[i]);
        }
        nb_onnx_free(m);
    }
    nb_error_clear();
    free(buf);
    return 0;
}
