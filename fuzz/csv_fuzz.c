/* libFuzzer target: the CSV parser on arbitrary text (with and without a header) must return a
   dataset or an error, never crash, hang or leak. */
#include <nabla.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_csv_opts opts = { 0 };
    if (size > 0) {
        opts.no_header = data[0] & 1;
        opts.label_index = (data[0] >> 1 & 3) - 1;
        opts.delimiter = (data[0] & 8) ? ';' : 0;
    }
    nb_dataset *ds = nb_data_csv_parse((const char *)data, size, "fuzz.csv", opts);
    if (ds && nb_dataset_len(ds) > 0) {
        nb_batch b;
        if (nb_dataset_get(ds, 0, &b) == 0) { nb_release(b.x); nb_release(b.y); }
    }
    nb_dataset_free(ds);
    nb_error_clear();
    return 0;
}
