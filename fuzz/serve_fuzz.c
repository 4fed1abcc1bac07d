/* libFuzzer target: the model server's request decoders (src/serve/codec.c) must never crash,
   leak or read out of bounds on any body: the NaN/Infinity rewrite, jansson's parse, the nested
   and the flat-with-shape tensor decoders in every dtype, and the writer on what they made. The
   body's "inputs" is decoded as a nested tensor, its "data" against its "shape". */
#include "../src/serve/serve_impl.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1); /* a private copy, so reads past the end are caught */
    if (size) memcpy(buf, data, size);
    size_t n = 0;
    char err[512];
    char *text = nb__sv_json_prepare(buf, size, &n);
    json_t *root = text ? nb__sv_json_parse(text, n, err, sizeof err) : NULL;
    if (root) {
        nb_scope *sc = nb_scope_begin();
        json_t *shape = json_object_get(root, "shape");
        nb_shape s = { 0 };
        bool shape_ok = json_is_array(shape) && json_array_size(shape) <= NB_MAX_DIMS;
        for (size_t k = 0; shape_ok && k < json_array_size(shape); k++) {
            json_int_t d = json_integer_value(json_array_get(shape, k));
            shape_ok = d >= 0 && d < 4096; /* the decoder checks the product; keep allocations small */
            s.dim[s.ndim++] = d;
        }
        for (int d = 0; d < NB_DTYPE_COUNT; d++) {
            nb_tensor *t = nb__sv_tensor_from_json(json_object_get(root, "inputs"), (nb_dtype)d, "inputs", err, sizeof err);
            sv_buf b = { 0 };
            if (t) nb__sv_write_tensor(&b, t, -1, false);
            if (t && nb_shape_of(t).ndim > 0 && nb_shape_of(t).dim[0] > 0) nb__sv_write_tensor(&b, t, 0, false);
            if (shape_ok && (t = nb__sv_tensor_from_data(json_object_get(root, "data"), (nb_dtype)d, s, "data", err, sizeof err)))
                nb__sv_write_tensor(&b, t, -1, true);
            free(b.p);
        }
        nb_scope_end(sc);
    }
    json_decref(root);
    free(text);
    free(buf);
    nb_error_clear();
    return 0;
}
