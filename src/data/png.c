/* PNG images decoded by libpng (its simplified png_image API), images of either kind (PNG or
   JPEG, told by their first bytes; JPEG in jpeg.c) and the image-folder dataset: one sub-folder
   of images per class, decoded when a sample is read. */
#include "data_impl.h"
#include <dirent.h>
#ifdef NABLA_HAVE_PNG
#include <png.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Images larger than this many pixels are refused (a corrupt header could promise terabytes). */
#define MAX_PIXELS ((uint64_t)1 << 28)

static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

static nb_tensor *decode_png(const char *who, const void *data, size_t size, const char *name) {
    if (size < 8 || memcmp(data, png_sig, 8) != 0) {
        size_t k = size < 8 ? size : 8;
        char got[40] = "";
        for (size_t i = 0; i < k; i++) snprintf(got + 3 * i, sizeof got - 3 * i, "%02x ", ((const uint8_t *)data)[i]);
        nb__error("%s: %s: not a PNG file: the signature at offset 0 is %s(%zu bytes; a PNG starts 89 50 4e 47 0d 0a 1a 0a)",
                  who, name, k ? got : "empty ", size);
        return NULL;
    }
#ifndef NABLA_HAVE_PNG
    nb__error("%s: %s: a PNG image, and nabla was built without libpng (NABLA_WITH_PNG=OFF)", who, name);
    return NULL;
#else
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, data, size)) {
        nb__error("%s: %s: bad PNG header (IHDR, from offset 8): %s", who, name, img.message);
        png_image_free(&img);
        return NULL;
    }
    int ch;
    if (img.format & PNG_FORMAT_FLAG_COLOR) {
        ch = img.format & PNG_FORMAT_FLAG_ALPHA ? 4 : 3;
        img.format = ch == 4 ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    } else {
        ch = img.format & PNG_FORMAT_FLAG_ALPHA ? 2 : 1;
        img.format = ch == 2 ? PNG_FORMAT_GA : PNG_FORMAT_GRAY;
    }
    int64_t h = img.height, w = img.width, pixels = 0, bytes = 0;
    if (h == 0 || w == 0 || nb__mul_overflows(h, w, &pixels) || pixels > (int64_t)MAX_PIXELS ||
        nb__mul_overflows(pixels, ch, &bytes)) {
        nb__error("%s: %s: image size %llux%llu (IHDR at offset 8) is out of range", who, name, (unsigned long long)w,
                  (unsigned long long)h);
        png_image_free(&img);
        return NULL;
    }
    uint8_t *hwc = malloc((size_t)bytes);
    if (!hwc) { png_image_free(&img); nb__error("%s: %s: out of memory", who, name); return NULL; }
    if (!png_image_finish_read(&img, NULL, hwc, 0, NULL)) {
        nb__error("%s: %s: corrupt PNG data: %s", who, name, img.message);
        png_image_free(&img);
        free(hwc);
        return NULL;
    }
    png_image_free(&img);
    nb_tensor *t = nb__tensor_new(NB_SHAPE(ch, h, w), NB_U8);
    if (t) {
        uint8_t *o = nb__data(t);
        size_t plane = (size_t)pixels;
        if (ch == 1) memcpy(o, hwc, (size_t)bytes);
        else
            for (size_t i = 0; i < plane; i++)
                for (int c = 0; c < ch; c++) o[(size_t)c * plane + i] = hwc[i * (size_t)ch + (size_t)c];
    }
    free(hwc);
    return t;
#endif
}

nb_tensor *nb_decode_png(const void *data, size_t size, const char *name) {
    if (!data && size) { nb__error("nb_decode_png: data is NULL"); return NULL; }
    return nb__own(decode_png("nb_decode_png", data ? data : "", size, name ? name : "(memory)"));
}

static nb_tensor *read_png(const char *who, const char *path) {
    size_t size;
    void *data = nb__read_file(who, path, &size);
    if (!data) return NULL;
    nb_tensor *t = decode_png(who, data, size, path);
    free(data);
    return t;
}

nb_tensor *nb_read_png(const char *path) { return nb__own(read_png("nb_read_png", path)); }

/* A PNG or a JPEG, told by its first bytes; an error naming them otherwise. */
static nb_tensor *decode_image(const char *who, const void *data, size_t size, const char *name) {
    if (nb__is_jpeg(data, size)) return nb__decode_jpeg(who, data, size, name);
    if (size >= 8 && memcmp(data, png_sig, 8) == 0) return decode_png(who, data, size, name);
    size_t k = size < 8 ? size : 8;
    char got[40] = "";
    for (size_t i = 0; i < k; i++) snprintf(got + 3 * i, sizeof got - 3 * i, "%02x ", ((const uint8_t *)data)[i]);
    nb__error("%s: %s: neither a PNG nor a JPEG image: it starts %s(%zu bytes; a PNG starts 89 50 4e 47, a JPEG ff d8 ff)",
              who, name, k ? got : "empty ", size);
    return NULL;
}

nb_tensor *nb_decode_image(const void *data, size_t size, const char *name) {
    if (!data && size) { nb__error("nb_decode_image: data is NULL"); return NULL; }
    return nb__own(decode_image("nb_decode_image", data ? data : "", size, name ? name : "(memory)"));
}

static nb_tensor *read_image(const char *who, const char *path) {
    size_t size;
    void *data = nb__read_file(who, path, &size);
    if (!data) return NULL;
    nb_tensor *t = decode_image(who, data, size, path);
    free(data);
    return t;
}

nb_tensor *nb_read_image(const char *path) { return nb__own(read_image("nb_read_image", path)); }

/* Whether the file at path starts as a PNG or a JPEG does; -1 when it cannot be read. */
static int looks_like_image(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    uint8_t head[8];
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    return nb__is_jpeg(head, n) || (n == 8 && memcmp(head, png_sig, 8) == 0);
}

/* ---- image folder ---- */
typedef struct {
    char **files;   /* full paths */
    int64_t *label;
    int64_t n;
    char **classes;
    int64_t nclasses;
} folder_ds;

static int64_t folder_len(void *self) { return ((folder_ds *)self)->n; }

static int folder_get(void *self, int64_t index, uint64_t key, nb_batch *out) {
    folder_ds *f = self;
    nb_tensor *img = read_image("nb_data_image_folder", f->files[index]);
    if (!img) return -1;
    nb_tensor *x = nb_empty(img->shape, NB_F32);
    if (x) {
        const uint8_t *p = nb__data(img);
        float *o = nb__data(x);
        for (int64_t i = 0; i < img->numel; i++) o[i] = (float)p[i] * (1.0f / 255.0f);
    }
    nb_release(img);
    out->x = x;
    out->y = nb_from_data(&f->label[index], NB_SHAPE(), NB_I64);
    return x && out->y ? 0 : -1;
}

static void folder_free(void *self) {
    folder_ds *f = self;
    for (int64_t i = 0; i < f->n; i++) free(f->files[i]);
    for (int64_t i = 0; i < f->nclasses; i++) free(f->classes[i]);
    free(f->files);
    free(f->label);
    free(f->classes);
    free(f);
}

static const nb_dataset_class FOLDER = { .name = "nb_data_image_folder", .len = folder_len, .get = folder_get, .free = folder_free };

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in dir (sorted, hidden ones skipped) that are folders (want_dirs) or regular files;
   NULL with *oom set when memory ran out or a path is too long (a partial list would drop
   samples in silence). */
static char **list_dir(const char *dir, bool want_dirs, int64_t *count, bool *oom) {
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    int64_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4400];
        if (snprintf(path, sizeof path, "%.4000s/%.255s", dir, e->d_name) >= (int)sizeof path) { *oom = true; break; }
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (want_dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **g = realloc(names, sizeof *g * (size_t)cap);
            if (!g) { *oom = true; break; }
            names = g;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) { *oom = true; break; }
        n++;
    }
    closedir(d);
    if (*oom) {
        for (int64_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return NULL;
    }
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    if (!names) names = calloc(1, sizeof *names);
    return names;
}

nb_dataset *nb_data_image_folder(const char *root) {
    const char *who = "nb_data_image_folder";
    if (!root) { nb__error("%s: root is NULL", who); return NULL; }
    folder_ds *f = calloc(1, sizeof *f);
    if (!f) { nb__error("%s: out of memory", who); return NULL; }
    bool oom = false;
    f->classes = list_dir(root, true, &f->nclasses, &oom);
    if (!f->classes) {
        if (oom) nb__error("%s: out of memory (or a path too long) listing the folder %s", who, root);
        else nb__error("%s: cannot open the folder %s", who, root);
        free(f);
        return NULL;
    }
    int64_t cap = 0;
    for (int64_t c = 0; c < f->nclasses && !oom; c++) {
        char dir[4000];
        if (snprintf(dir, sizeof dir, "%.3700s/%.255s", root, f->classes[c]) >= (int)sizeof dir) {
            nb__error("%s: the path of class folder %s in %s is too long", who, f->classes[c], root);
            folder_free(f);
            return NULL;
        }
        int64_t k;
        char **files = list_dir(dir, false, &k, &oom);
        if (!files) {
            if (oom) break;
            nb__error("%s: cannot open the class folder %s", who, dir);
            folder_free(f);
            return NULL;
        }
        for (int64_t i = 0; i < k && !oom; i++) {
            if (f->n == cap) {
                cap = cap ? cap * 2 : 256;
                char **g = realloc(f->files, sizeof *g * (size_t)cap);
                if (g) f->files = g;
                int64_t *gl = g ? realloc(f->label, sizeof *gl * (size_t)cap) : NULL;
                if (gl) f->label = gl;
                if (!g || !gl) { oom = true; break; }
            }
            size_t len = strlen(dir) + strlen(files[i]) + 2;
            f->files[f->n] = malloc(len);
            if (!f->files[f->n]) { oom = true; break; }
            snprintf(f->files[f->n], len, "%s/%s", dir, files[i]);
            /* every file of a class folder is a sample: one that is not an image is named, never
               skipped (a folder of JPEGs once trained on its one PNG) */
            int image = looks_like_image(f->files[f->n]);
            if (image != 1) {
                nb__error("%s: %s %s; a class folder may hold PNG and JPEG images only", who, f->files[f->n],
                          image < 0 ? "cannot be read" : "is neither a PNG nor a JPEG image (told by its first bytes)");
                free(f->files[f->n]);
                for (int64_t j = 0; j < k; j++) free(files[j]);
                free(files);
                folder_free(f);
                return NULL;
            }
            f->label[f->n++] = c;
        }
        for (int64_t i = 0; i < k; i++) free(files[i]);
        free(files);
    }
    if (oom) { /* a partial list would drop samples without a word */
        nb__error("%s: out of memory (or a path too long) listing the images of %s", who, root);
        folder_free(f);
        return NULL;
    }
    if (f->n == 0) {
        nb__error("%s: %s holds no class folders with images (%lld class folders)", who, root, (long long)f->nclasses);
        folder_free(f);
        return NULL;
    }
    nb_dataset *ds = nb_dataset_new(&FOLDER, f);
    if (!ds) folder_free(f);
    return ds;
}

int64_t nb_data_image_folder_count(nb_dataset *ds, int64_t i) {
    if (!ds || ds->cls != &FOLDER) { nb__error("nb_data_image_folder_count: not an image folder dataset"); return -1; }
    folder_ds *f = ds->self;
    if (i < 0 || i >= f->nclasses) { nb__error("nb_data_image_folder_count: class %lld of %lld", (long long)i, (long long)f->nclasses); return -1; }
    int64_t n = 0;
    for (int64_t k = 0; k < f->n; k++) n += f->label[k] == i;
    return n;
}

const char *nb_data_image_folder_class(nb_dataset *ds, int64_t i) {
    if (!ds || ds->cls != &FOLDER) { nb__error("nb_data_image_folder_class: not an image folder dataset"); return NULL; }
    folder_ds *f = ds->self;
    return i >= 0 && i < f->nclasses ? f->classes[i] : NULL;
}
