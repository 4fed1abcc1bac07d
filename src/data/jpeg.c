/* JPEG images decoded by libjpeg (Debian's libjpeg-turbo, libjpeg62-turbo-dev): baseline and
   progressive, gray or colour (YCbCr converted to RGB), as u8 [channels, height, width]. A build
   without it (NABLA_WITH_JPEG=OFF, or AUTO without the library) says so for a JPEG file. */
#include "data_impl.h"
#include <stdio.h>
#include <string.h>
#ifdef NABLA_HAVE_JPEG
#include <jpeglib.h>
#include <setjmp.h>
#endif

/* Images larger than this many pixels are refused (a corrupt header could promise terabytes). */
#define MAX_PIXELS ((uint64_t)1 << 28)

bool nb__is_jpeg(const void *data, size_t size) {
    const uint8_t *p = data;
    return size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
}

#ifdef NABLA_HAVE_JPEG
/* libjpeg's errors, and its warnings about damaged data, come back here instead of exiting or
   printing: the message is kept and decoding jumps out. */
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_fail(j_common_ptr c) {
    jpeg_err *e = (jpeg_err *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jump, 1);
}

static void jpeg_message(j_common_ptr c, int level) {
    if (level < 0) jpeg_fail(c); /* a warning: corrupt or truncated data, which would decode as gray */
}
#endif

nb_tensor *nb__decode_jpeg(const char *who, const void *data, size_t size, const char *name) {
    if (!nb__is_jpeg(data, size)) {
        nb__error("%s: %s: not a JPEG file (a JPEG starts ff d8 ff)", who, name);
        return NULL;
    }
#ifndef NABLA_HAVE_JPEG
    (void)size;
    nb__error("%s: %s: a JPEG image, and nabla was built without libjpeg (NABLA_WITH_JPEG; Debian: "
              "libjpeg62-turbo-dev)", who, name);
    return NULL;
#else
    struct jpeg_decompress_struct c;
    jpeg_err err;
    uint8_t *volatile hwc = NULL;
    nb_tensor *volatile t = NULL;
    c.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_fail;
    err.pub.emit_message = jpeg_message;
    if (setjmp(err.jump)) {
        nb__error("%s: %s: corrupt JPEG data: %s", who, name, err.msg);
        jpeg_destroy_decompress(&c);
        free(hwc);
        nb_release(t);
        return NULL;
    }
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, (const unsigned char *)data, (unsigned long)size);
    jpeg_read_header(&c, TRUE);
    if (c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK) {
        nb__error("%s: %s: a CMYK JPEG; convert it to RGB (nabla reads gray and RGB JPEGs)", who, name);
        jpeg_destroy_decompress(&c);
        return NULL;
    }
    c.out_color_space = c.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&c);
    int64_t ch = c.output_components, h = c.output_height, w = c.output_width, pixels = 0, bytes = 0, row = 0;
    if (h == 0 || w == 0 || nb__mul_overflows(h, w, &pixels) || pixels > (int64_t)MAX_PIXELS ||
        nb__mul_overflows(pixels, ch, &bytes) || nb__mul_overflows(w, ch, &row)) {
        nb__error("%s: %s: image size %lldx%lld is out of range", who, name, (long long)w, (long long)h);
        jpeg_destroy_decompress(&c);
        return NULL;
    }
    hwc = malloc((size_t)bytes);
    if (!hwc) {
        nb__error("%s: %s: out of memory", who, name);
        jpeg_destroy_decompress(&c);
        return NULL;
    }
    while (c.output_scanline < c.output_height) {
        JSAMPROW r = hwc + (size_t)c.output_scanline * (size_t)row;
        jpeg_read_scanlines(&c, &r, 1);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    t = nb__tensor_new(NB_SHAPE(ch, h, w), NB_U8);
    if (t) { /* interleaved rows to channel planes */
        uint8_t *o = nb__data(t);
        size_t plane = (size_t)pixels;
        for (size_t i = 0; i < plane; i++)
            for (int64_t k = 0; k < ch; k++) o[(size_t)k * plane + i] = hwc[i * (size_t)ch + (size_t)k];
    }
    free(hwc);
    return t;
#endif
}
