/* Internal to src/summary: a minimal protobuf wire-format encoder and decoder, CRC-32C and the
   TFRecord framing shared by the event writer and the event-file reader.

   Why hand-written rather than protobuf-c: the writer needs five message types (Event, Summary,
   Value, HistogramProto and a few plugin messages) and only the varint, 64-bit, 32-bit and
   length-delimited wire types. That is about a hundred lines with no generated code, no .proto
   compiler at build time and no run-time dependency; it writes into one reusable buffer without
   allocating per event (protobuf-c packs from heap-allocated message structs), which keeps a
   buffered scalar well under a microsecond. tests/test_summary.c checks the encoder byte for byte
   and tests/tb_reader.py decodes the files with an independent reader. */
#ifndef NB_SUMMARY_PB_H
#define NB_SUMMARY_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer. On allocation failure `failed` is set and further writes are dropped. */
typedef struct nb_pb_buf {
    unsigned char *data;
    size_t len, cap;
    bool failed;
} nb_pb_buf;

/* Makes room for n more bytes; false (and failed set) when memory runs out. */
bool nb__pb_reserve(nb_pb_buf *b, size_t n);
/* Frees the buffer's memory. */
void nb__pb_free(nb_pb_buf *b);
/* Appends raw bytes. */
void nb__pb_bytes(nb_pb_buf *b, const void *p, size_t n);
/* Appends a base-128 varint. */
void nb__pb_varint(nb_pb_buf *b, uint64_t v);
/* Field key (field << 3 | wire type). */
void nb__pb_key(nb_pb_buf *b, uint32_t field, uint32_t wire);
/* Field encoders: double (wire 1), float (wire 5), int64/int32/enum/bool (wire 0), string/bytes (wire 2). */
void nb__pb_double(nb_pb_buf *b, uint32_t field, double v);
void nb__pb_float(nb_pb_buf *b, uint32_t field, float v);
void nb__pb_int(nb_pb_buf *b, uint32_t field, int64_t v);
void nb__pb_string(nb_pb_buf *b, uint32_t field, const void *s, size_t n);
/* Packed repeated double field. */
void nb__pb_packed_doubles(nb_pb_buf *b, uint32_t field, const double *v, size_t n);
/* Starts a length-delimited sub-message of field; returns a mark for nb__pb_end. The length is
   reserved as a 5-byte padded varint (valid protobuf) so the body need not be copied. */
size_t nb__pb_begin(nb_pb_buf *b, uint32_t field);
/* Ends the sub-message begun at mark, writing its length. */
void nb__pb_end(nb_pb_buf *b, size_t mark);

/* CRC-32C (Castagnoli) of n bytes, continuing from crc (start with 0). */
uint32_t nb__crc32c(uint32_t crc, const void *p, size_t n);
/* TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
static inline uint32_t nb__crc_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
/* Appends one TFRecord: u64 length, masked CRC of the length, data, masked CRC of the data. */
void nb__tfrecord(nb_pb_buf *out, const void *data, size_t n);

/* ---- decoding ---- */
/* A cursor over a protobuf message. */
typedef struct nb_pb_reader { const unsigned char *p, *end; bool bad; } nb_pb_reader;
/* One decoded field: its number and wire type, and its value (varint/fixed in u, or the bytes). */
typedef struct nb_pb_field {
    uint32_t field, wire;
    uint64_t u;
    const unsigned char *bytes;
    size_t len;
} nb_pb_field;
/* Reads the next field; false at the end or on malformed input (then r->bad is set). */
bool nb__pb_next(nb_pb_reader *r, nb_pb_field *f);
/* The field's 64-bit value as a double / its 32-bit value as a float. */
double nb__pb_as_double(const nb_pb_field *f);
float nb__pb_as_float(const nb_pb_field *f);

#endif
