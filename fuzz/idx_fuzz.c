/* libFuzzer target: the IDX parser (plain and gzip) on arbitrary bytes must return a tensor or an
   error, never crash, hang or leak. */
#include <nabla.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_tensor *t = nb_parse_idx(data, size, "fuzz.idx");
    nb_release(t);
    nb_error_clear();
    return 0;
}
