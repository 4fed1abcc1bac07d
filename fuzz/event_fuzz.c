/* libFuzzer target: the TensorBoard event-file reader (nb_scalar_log_read) and the plotters fed by it must never crash, hang, leak or read out of bounds on any file. */
/* Why the CRC repair: every TFRecord carries CRC-32C checks that random mutations almost never
   satisfy, so raw inputs would only exercise the framing. Each input is read twice: once as it
   is, then with every record's length and data CRCs recomputed, which lets mutations reach the
   Event / Summary / TensorProto decoding behind them. The reader takes a path only, so the
   bytes go through a per-process temporary file (in /dev/shm when there is one). */
#include "../src/summary/pb.h"
#include <nabla.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char file_path[256], svg_path[300], csv_path[300];

static void make_paths(void) {
    if (file_path[0]) return;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(file_path, sizeof file_path, "%s/nabla_event_fuzz.%d.tfevents", dir, (int)getpid());
    snprintf(svg_path, sizeof svg_path, "%s.svg", file_path);
    snprintf(csv_path, sizeof csv_path, "%s.csv", file_path);
}

static void cleanup(void) {
    if (!file_path[0]) return;
    unlink(file_path), unlink(svg_path), unlink(csv_path);
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes the CRCs of every record that fits; true when a byte changed. */
static int repair_crcs(uint8_t *d, size_t size) {
    int changed = 0;
    size_t pos = 0;
    while (size - pos >= 12) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)d[pos + i] << (8 * i);
        uint8_t c[4];
        put32(c, nb__crc_mask(nb__crc32c(0, d + pos, 8)));
        if (memcmp(d + pos + 8, c, 4)) memcpy(d + pos + 8, c, 4), changed = 1;
        if (len > size - pos - 12 || size - pos - 12 - len < 4) break;
        put32(c, nb__crc_mask(nb__crc32c(0, d + pos + 12, (size_t)len)));
        if (memcmp(d + pos + 12 + len, c, 4)) memcpy(d + pos + 12 + len, c, 4), changed = 1;
        pos += 16 + (size_t)len;
    }
    return changed;
}

static void read_and_use(const uint8_t *d, size_t size) {
    FILE *f = fopen(file_path, "wb");
    if (!f) return;
    if (size) fwrite(d, 1, size, f);
    fclose(f);
    nb_scalar_log *log = nb_scalar_log_read(file_path);
    if (!log) {
        if (!nb_error()) abort(); /* a NULL without a message breaks the error contract */
        nb_error_clear();
        return;
    }
    /* touch everything the log hands out, so a bad count or a short array is seen by ASan */
    volatile double sink = 0;
    int tags = nb_scalar_log_num_tags(log);
    for (int i = 0; i < tags; i++) {
        const char *tag = nb_scalar_log_tag(log, i);
        sink += (double)strlen(tag);
        if (nb_scalar_log_find(log, tag) < 0) abort();
        const int64_t *steps;
        const double *walls, *values;
        int64_t n = nb_scalar_log_points(log, i, &steps, &walls, &values);
        for (int64_t k = 0; k < n; k++) sink += (double)steps[k] + walls[k] + values[k];
        if (n > 0) {
            char spark[256];
            nb_sparkline(values, n, 40, spark, sizeof spark);
        }
    }
    const char *note = nb_scalar_log_note(log);
    if (note) sink += (double)strlen(note);
    (void)nb_scalar_log_records(log);
    (void)sink;
    /* the plotters take whatever the reader produced: NaN, infinities, huge steps, odd tags */
    if (tags > 0 && tags <= 16) {
        const nb_scalar_log *runs[1] = { log };
        const char *names[1] = { "fuzz" };
        nb_plot_svg(runs, names, 1, svg_path, (nb_plot_opts){ .smooth = 0.6 });
        nb_plot_csv(runs, names, 1, csv_path);
    }
    nb_error_clear();
    nb_scalar_log_free(log);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!file_path[0]) {
        make_paths();
        atexit(cleanup);
    }
    read_and_use(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    if (repair_crcs(copy, size)) read_and_use(copy, size);
    free(copy);
    return 0;
}
