/* libFuzzer target: PNG decoding (libpng behind nb_decode_png) on arbitrary bytes must return a
   tensor or an error, never crash, hang or leak. */
#include <nabla.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_tensor *t = nb_decode_png(data, size, "fuzz.png");
    nb_release(t);
    nb_error_clear();
    return 0;
}
