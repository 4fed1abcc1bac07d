/* The protobuf wire-format encoder/decoder, CRC-32C and TFRecord framing declared in pb.h. */
#include "pb.h"
#include <stdlib.h>
#include <string.h>

bool nb__pb_reserve(nb_pb_buf *b, size_t n) {
    if (b->failed) return false;
    if (b->len + n <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    unsigned char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void nb__pb_free(nb_pb_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void nb__pb_bytes(nb_pb_buf *b, const void *p, size_t n) {
    if (!n || !nb__pb_reserve(b, n)) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void nb__pb_varint(nb_pb_buf *b, uint64_t v) {
    if (!nb__pb_reserve(b, 10)) return;
    unsigned char *o = b->data + b->len;
    size_t i = 0;
    while (v >= 0x80) {
        o[i++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    o[i++] = (unsigned char)v;
    b->len += i;
}

void nb__pb_key(nb_pb_buf *b, uint32_t field, uint32_t wire) { nb__pb_varint(b, ((uint64_t)field << 3) | wire); }

static void put_le(nb_pb_buf *b, uint64_t v, int n) {
    if (!nb__pb_reserve(b, (size_t)n)) return;
    for (int i = 0; i < n; i++) b->data[b->len++] = (unsigned char)(v >> (8 * i));
}

void nb__pb_double(nb_pb_buf *b, uint32_t field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    nb__pb_key(b, field, 1);
    put_le(b, u, 8);
}

void nb__pb_float(nb_pb_buf *b, uint32_t field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    nb__pb_key(b, field, 5);
    put_le(b, u, 4);
}

void nb__pb_int(nb_pb_buf *b, uint32_t field, int64_t v) {
    nb__pb_key(b, field, 0);
    nb__pb_varint(b, (uint64_t)v); /* negative int64/int32 take ten bytes, as protobuf does */
}

void nb__pb_string(nb_pb_buf *b, uint32_t field, const void *s, size_t n) {
    nb__pb_key(b, field, 2);
    nb__pb_varint(b, n);
    nb__pb_bytes(b, s, n);
}

void nb__pb_packed_doubles(nb_pb_buf *b, uint32_t field, const double *v, size_t n) {
    nb__pb_key(b, field, 2);
    nb__pb_varint(b, n * 8);
    if (!nb__pb_reserve(b, n * 8)) return;
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], 8);
        put_le(b, u, 8);
    }
}

size_t nb__pb_begin(nb_pb_buf *b, uint32_t field) {
    nb__pb_key(b, field, 2);
    size_t mark = b->len;
    if (nb__pb_reserve(b, 5)) b->len += 5;
    return mark;
}

void nb__pb_end(nb_pb_buf *b, size_t mark) {
    if (b->failed) return;
    uint64_t n = b->len - mark - 5;
    unsigned char *o = b->data + mark;
    for (int i = 0; i < 4; i++) o[i] = (unsigned char)(((n >> (7 * i)) & 0x7f) | 0x80);
    o[4] = (unsigned char)((n >> 28) & 0x7f);
}

/* Slicing-by-8 tables for the reflected Castagnoli polynomial 0x82f63b78, built once. */
static uint32_t crc_table[8][256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

#include <pthread.h>
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

uint32_t nb__crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
              crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

void nb__tfrecord(nb_pb_buf *out, const void *data, size_t n) {
    if (!nb__pb_reserve(out, n + 16)) return;
    unsigned char hdr[8];
    for (int i = 0; i < 8; i++) hdr[i] = (unsigned char)((uint64_t)n >> (8 * i));
    nb__pb_bytes(out, hdr, 8);
    put_le(out, nb__crc_mask(nb__crc32c(0, hdr, 8)), 4);
    nb__pb_bytes(out, data, n);
    put_le(out, nb__crc_mask(nb__crc32c(0, data, n)), 4);
}

static bool read_varint(nb_pb_reader *r, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) return false;
        unsigned char c = *r->p++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

bool nb__pb_next(nb_pb_reader *r, nb_pb_field *f) {
    if (r->bad || r->p >= r->end) return false;
    uint64_t key;
    if (!read_varint(r, &key) || (key >> 3) == 0) goto bad;
    f->field = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    f->u = 0;
    f->bytes = NULL;
    f->len = 0;
    switch (f->wire) {
    case 0:
        if (!read_varint(r, &f->u)) goto bad;
        return true;
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n) goto bad;
        for (size_t i = 0; i < n; i++) f->u |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        return true;
    }
    case 2: {
        uint64_t n;
        if (!read_varint(r, &n) || n > (uint64_t)(r->end - r->p)) goto bad;
        f->bytes = r->p;
        f->len = (size_t)n;
        r->p += n;
        return true;
    }
    default:
        goto bad;
    }
bad:
    r->bad = true;
    return false;
}

double nb__pb_as_double(const nb_pb_field *f) {
    double d;
    memcpy(&d, &f->u, 8);
    return d;
}

float nb__pb_as_float(const nb_pb_field *f) {
    uint32_t u = (uint32_t)f->u;
    float x;
    memcpy(&x, &u, 4);
    return x;
}
