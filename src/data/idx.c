/* IDX files (the MNIST format), plain or gzip (zlib, inflated straight into the tensor), the
   two-file images+labels dataset, and Fashion-MNIST found at root, $NABLA_DATA or Debian's path. */
#include "data_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef NABLA_HAVE_ZLIB
#include <zlib.h>
#endif

/* A byte source over a memory buffer: plain, or a gzip stream inflated on demand. */
typedef struct {
    const char *who, *name;
    const uint8_t *data;
    size_t size, pos; /* plain: read position */
    bool gz, ended;
#ifdef NABLA_HAVE_ZLIB
    z_stream z;
#endif
    uint64_t out; /* bytes delivered so far */
} source;

static int src_open(source *s, const void *data, size_t size) {
    s->data = data;
    s->size = size;
    s->pos = 0;
    s->out = 0;
    s->ended = false;
    s->gz = size >= 2 && s->data[0] == 0x1f && s->data[1] == 0x8b;
    if (!s->gz) return 0;
#ifndef NABLA_HAVE_ZLIB
    nb__error("%s: %s: a gzip file, and nabla was built without zlib (NABLA_WITH_ZLIB=OFF); gunzip it first", s->who, s->name);
    s->gz = false;
    return -1;
#else
    memset(&s->z, 0, sizeof s->z);
    if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) {
        nb__error("%s: %s: cannot start zlib", s->who, s->name);
        return -1;
    }
    s->z.next_in = (Bytef *)s->data;
    s->z.avail_in = size > UINT32_MAX ? UINT32_MAX : (uInt)size;
    return 0;
#endif
}

static void src_close(source *s) {
#ifdef NABLA_HAVE_ZLIB
    if (s->gz) inflateEnd(&s->z);
#else
    (void)s;
#endif
}

/* Reads up to n bytes into dst; returns how many (fewer only at the end), or -1 on corrupt data. */
static int64_t src_read(source *s, void *dst, size_t n) {
    if (!s->gz) {
        size_t k = s->size - s->pos < n ? s->size - s->pos : n;
        memcpy(dst, s->data + s->pos, k);
        s->pos += k;
        s->out += k;
        return (int64_t)k;
    }
#ifndef NABLA_HAVE_ZLIB
    return -1; /* src_open refused gzip data */
#else
    size_t done = 0;
    while (done < n && !s->ended) {
        size_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
        s->z.next_out = (Bytef *)dst + done;
        s->z.avail_out = (uInt)want;
        if (s->z.avail_in == 0) {
            size_t used = (size_t)(s->z.next_in - s->data);
            size_t left = s->size - used;
            s->z.avail_in = left > UINT32_MAX ? UINT32_MAX : (uInt)left;
        }
        int rc = inflate(&s->z, Z_NO_FLUSH);
        size_t got = want - s->z.avail_out;
        done += got;
        s->out += got;
        size_t in_pos = (size_t)(s->z.next_in - s->data);
        if (rc == Z_STREAM_END) {
            /* Another gzip member may follow (as `cat a.gz b.gz` makes). */
            if (in_pos < s->size && s->size - in_pos >= 2 && s->data[in_pos] == 0x1f && s->data[in_pos + 1] == 0x8b) {
                inflateReset(&s->z);
            } else if (in_pos < s->size) {
                nb__error("%s: %s: unexpected bytes after the gzip stream at compressed offset %zu", s->who, s->name, in_pos);
                return -1;
            } else {
                s->ended = true;
            }
        } else if (rc == Z_BUF_ERROR && s->z.avail_in == 0 && in_pos >= s->size) {
            nb__error("%s: %s: truncated gzip data: the file ends at compressed offset %zu after %llu bytes of data", s->who,
                      s->name, s->size, (unsigned long long)s->out);
            return -1;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            nb__error("%s: %s: corrupt gzip data near compressed offset %zu (data offset %llu): %s", s->who, s->name, in_pos,
                      (unsigned long long)s->out, s->z.msg ? s->z.msg : zError(rc));
            return -1;
        }
    }
    return (int64_t)done;
#endif
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static nb_tensor *parse_idx(const char *who, const void *data, size_t size, const char *name) {
    source s = { .who = who, .name = name ? name : "(memory)" };
    if (src_open(&s, data, size) < 0) return NULL;
    nb_tensor *t = NULL;
    uint8_t head[4 + 4 * 255];
    int64_t got = src_read(&s, head, 4);
    if (got < 0) goto done;
    if (got < 4) {
        nb__error("%s: %s: truncated: %lld bytes, but an IDX header needs at least 4", who, s.name, (long long)got);
        goto done;
    }
    int code = head[2], nd = head[3];
    nb_dtype dt;
    int esize;
    switch (code) {
    case 0x08: dt = NB_U8; esize = 1; break;
    case 0x09: dt = NB_I32; esize = 1; break; /* i8, widened */
    case 0x0B: dt = NB_I32; esize = 2; break; /* i16, widened */
    case 0x0C: dt = NB_I32; esize = 4; break;
    case 0x0D: dt = NB_F32; esize = 4; break;
    case 0x0E: dt = NB_F64; esize = 8; break;
    default: dt = NB_U8; esize = 0; break;
    }
    if (head[0] != 0 || head[1] != 0 || !esize || nd < 1 || nd > NB_MAX_DIMS) {
        nb__error("%s: %s: not an IDX file: magic 0x%08x at offset 0 (expected 00 00, a type code 08/09/0B/0C/0D/0E and "
                  "1..%d dimensions, e.g. 0x00000803 for images, 0x00000801 for labels)",
                  who, s.name, be32(head), NB_MAX_DIMS);
        goto done;
    }
    got = src_read(&s, head + 4, (size_t)nd * 4);
    if (got < 0) goto done;
    if (got < nd * 4) {
        nb__error("%s: %s: truncated header: %d dimensions need %d bytes at offset 4, found %lld", who, s.name, nd, nd * 4,
                  (long long)got);
        goto done;
    }
    nb_shape sh = { .ndim = nd };
    for (int i = 0; i < nd; i++) sh.dim[i] = be32(head + 4 + 4 * i);
    char where[1200], sb[200];
    snprintf(where, sizeof where, "%s: %s: the header at offset 4", who, s.name);
    int64_t numel, bytes, header = 4 + 4 * (int64_t)nd, total, bound;
    if (!nb__shape_check(where, &sh, (size_t)esize, &numel)) goto done;
    /* A plain file must hold the data; a gzip one can promise at most ~1032x its size. */
    if (nb__mul_overflows(numel, esize, &bytes) || nb__add_overflows(header, bytes, &total) ||
        (s.gz ? nb__mul_overflows((int64_t)size, 1040, &bound) || nb__add_overflows(bound, 1024, &bound)
              : (bound = (int64_t)size, false)) ||
        total > bound) {
        nb__error("%s: %s: truncated: the header at offset 0 promises shape %s, %lld bytes of data after offset %lld, but "
                  "the file holds %llu%s", who, s.name, nb_shape_str(sh, sb, sizeof sb), (long long)bytes,
                  (long long)header, (unsigned long long)(s.gz ? (uint64_t)size : (uint64_t)size - (uint64_t)header),
                  s.gz ? " compressed bytes" : "");
        goto done;
    }
    t = nb__tensor_new(sh, dt);
    if (!t) goto done;
    void *dst = esize == (int)nb__esize(dt) ? nb__data(t) : malloc(bytes ? (size_t)bytes : 1);
    if (!dst) { nb__error("%s: %s: out of memory", who, s.name); nb_release(t); t = NULL; goto done; }
    got = src_read(&s, dst, (size_t)bytes);
    if (got >= 0 && got < bytes)
        nb__error("%s: %s: truncated: data ends at offset %llu, %llu bytes short of the %llu the header promises", who,
                  s.name, (unsigned long long)(header + got), (unsigned long long)(bytes - got), (unsigned long long)bytes);
    uint8_t extra;
    if (got >= 0 && got == bytes) {
        int64_t more = src_read(&s, &extra, 1); /* also checks the gzip trailer (CRC, length) */
        if (more > 0)
            nb__error("%s: %s: unexpected bytes after the data at offset %llu", who, s.name,
                      (unsigned long long)(header + bytes));
        if (more != 0) got = -1;
    }
    if (got < 0 || got < bytes) {
        if (dst != nb__data(t)) free(dst);
        nb_release(t);
        t = NULL;
        goto done;
    }
    /* Big-endian to host order, widening i8/i16. */
    if (dst != nb__data(t)) {
        int32_t *o = nb__data(t);
        for (int64_t i = 0; i < numel; i++)
            o[i] = esize == 1 ? (int32_t)(int8_t)((uint8_t *)dst)[i]
                              : (int32_t)(int16_t)((uint16_t)((uint8_t *)dst)[2 * i] << 8 | ((uint8_t *)dst)[2 * i + 1]);
        free(dst);
    } else if (esize > 1) {
        uint8_t *p = dst;
        for (int64_t i = 0; i < numel; i++, p += esize)
            for (int a = 0, b = esize - 1; a < b; a++, b--) { uint8_t c = p[a]; p[a] = p[b]; p[b] = c; }
    }
done:
    src_close(&s);
    return t;
}

nb_tensor *nb_parse_idx(const void *data, size_t size, const char *name) {
    if (!data && size) { nb__error("nb_parse_idx: data is NULL"); return NULL; }
    return nb__own(parse_idx("nb_parse_idx", data ? data : "", size, name));
}

static nb_tensor *read_idx(const char *who, const char *path) {
    size_t size;
    void *data = nb__read_file(who, path, &size);
    if (!data) return NULL;
    nb_tensor *t = parse_idx(who, data, size, path);
    free(data);
    return t;
}

nb_tensor *nb_read_idx(const char *path) { return nb__own(read_idx("nb_read_idx", path)); }

typedef struct {
    const char *path;
    nb_tensor *t;
    char err[2048];
} read_job;

#include <pthread.h>
static void *read_job_main(void *arg) {
    read_job *j = arg;
    nb__error_ctx quiet; /* the caller tells the error (the handler fires there, once) */
    nb__error_quiet(&quiet);
    j->t = read_idx("nb_data_idx", j->path);
    if (!j->t && nb_error()) snprintf(j->err, sizeof j->err, "%s", nb_error());
    nb_error_clear();
    nb__error_pop(&quiet);
    return NULL;
}

nb_dataset *nb_data_idx(const char *images_path, const char *labels_path) {
    if (!images_path || !labels_path) { nb__error("nb_data_idx: a path is NULL"); return NULL; }
    /* The labels are read beside the images, on a second thread. */
    read_job lab = { .path = labels_path };
    pthread_t th;
    bool threaded = pthread_create(&th, NULL, read_job_main, &lab) == 0;
    nb_tensor *x = read_idx("nb_data_idx", images_path);
    if (threaded) pthread_join(th, NULL);
    else read_job_main(&lab);
    nb_tensor *y = lab.t;
    nb_dataset *ds = NULL;
    if (!x || !y) {
        if (x && lab.err[0]) nb__error("%s", lab.err);
        goto done;
    }
    if (x->shape.ndim < 2 || x->shape.ndim > 3) {
        nb__error("nb_data_idx: %s: expected images [n, rows, cols] (or [n, features]), got %d dimensions", images_path,
                  x->shape.ndim);
        goto done;
    }
    if (y->shape.ndim != 1) {
        nb__error("nb_data_idx: %s: expected labels [n], got %d dimensions", labels_path, y->shape.ndim);
        goto done;
    }
    if (x->shape.dim[0] != y->shape.dim[0]) {
        nb__error("nb_data_idx: %s holds %lld images but %s holds %lld labels (counts at offset 4 differ)", images_path,
                  (long long)x->shape.dim[0], labels_path, (long long)y->shape.dim[0]);
        goto done;
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *xs = x;
    if (x->shape.ndim == 3) xs = nb_view(x, NB_SHAPE(x->shape.dim[0], 1, x->shape.dim[1], x->shape.dim[2]));
    if (x->dtype != NB_U8) xs = nb_cast(xs, NB_F32);
    nb_tensor *ys = nb_cast(y, NB_I64);
    ds = nb__data_tensors_scaled(xs, ys, x->dtype == NB_U8 ? 1.0 / 255.0 : 0);
    nb_scope_end(s);
done:
    nb_release(x);
    nb_release(y);
    return ds;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Finds name (or name without .gz) in dir; writes the path found into out. */
static bool find_in(const char *dir, const char *name, char *out, size_t size) {
    if (snprintf(out, size, "%.1024s/%.64s.gz", dir, name) < (int)size && file_exists(out)) return true;
    return snprintf(out, size, "%.1024s/%.64s", dir, name) < (int)size && file_exists(out);
}

nb_dataset *nb_data_fashion_mnist(const char *root, bool train) {
    const char *img = train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte";
    const char *lab = train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte";
    char ip[1200], lp[1200];
    if (root) {
        /* a folder that was named is the only place looked in */
        if (find_in(root, img, ip, sizeof ip) && find_in(root, lab, lp, sizeof lp)) return nb_data_idx(ip, lp);
        struct stat st;
        nb__error("nb_data_fashion_mnist: %s %s: looked there for %s(.gz) and %s(.gz)", root,
                  stat(root, &st) != 0 ? "does not exist" : !S_ISDIR(st.st_mode) ? "is not a folder" : "holds no Fashion-MNIST",
                  img, lab);
        return NULL;
    }
    const char *env = getenv("NABLA_DATA");
    char places[3][1024];
    const char *what[3];
    int n = 0;
    if (env && *env) {
        snprintf(places[n], sizeof places[n], "%s", env); what[n++] = "$NABLA_DATA";
        snprintf(places[n], sizeof places[n], "%s/fashion-mnist", env); what[n++] = "$NABLA_DATA";
    }
    snprintf(places[n], sizeof places[n], "/usr/share/datasets/fashion-mnist"); what[n++] = "Debian's dataset-fashion-mnist";
    for (int i = 0; i < n; i++)
        if (find_in(places[i], img, ip, sizeof ip) && find_in(places[i], lab, lp, sizeof lp)) return nb_data_idx(ip, lp);
    char msg[1800];
    int len = snprintf(msg, sizeof msg, "nb_data_fashion_mnist: %s(.gz) and %s(.gz) not found; looked in", img, lab);
    for (int i = 0; i < n && len < (int)sizeof msg; i++)
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s %s (%s)", i ? "," : "", places[i], what[i]);
    nb__error("%s; install Debian's dataset-fashion-mnist or set NABLA_DATA", msg);
    return NULL;
}
