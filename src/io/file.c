/* Atomic file writes (an unnamed or named temporary file, fsync, link or rename), read-only
   mappings, the write-limit test hook, dtype conversion and the nb_metadata string map. */
#define _GNU_SOURCE /* O_TMPFILE */
#include "io_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------- the write-limit hook ---------- */
static _Atomic int64_t write_limit = -1;

void nb_io_set_write_limit(int64_t bytes) { atomic_store(&write_limit, bytes < 0 ? -1 : bytes); }

/* ---------- atomic files ---------- */
static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void afile_reset(nb__afile *f) {
    free(f->path);
    free(f->tmp);
    f->path = f->tmp = NULL;
    f->fd = -1;
    f->unnamed = f->tmp_exists = false;
}

/* The folder holding path (malloc'ed): "." for a bare name, "/" for a file at the root. */
static char *folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return dup_str(".");
    if (slash == path) return dup_str("/");
    char *d = malloc((size_t)(slash - path) + 1);
    if (d) {
        memcpy(d, path, (size_t)(slash - path));
        d[slash - path] = 0;
    }
    return d;
}

/* Sets f->tmp to a fresh name beside the destination, unique per process and attempt. */
static void next_tmp_name(nb__afile *f, size_t n) {
    static atomic_uint counter;
    unsigned c = atomic_fetch_add(&counter, 1);
    snprintf(f->tmp, n, "%s.tmp.%ld.%u", f->path, (long)getpid(), c);
}

int nb__afile_open(nb__afile *f, const char *fn, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->fn = fn;
    if (!path || !*path) {
        nb__error("%s: path is %s", fn, path ? "empty" : "NULL");
        return -1;
    }
    f->path = dup_str(path);
    size_t n = strlen(path) + 64;
    f->tmp = malloc(n);
    char *dir = f->path ? folder_of(path) : NULL;
    if (!f->path || !f->tmp || !dir) {
        free(dir);
        nb__error("%s: out of memory for '%s'", fn, path);
        afile_reset(f);
        return -1;
    }
#ifdef O_TMPFILE
    /* An unnamed file in the destination's folder (so linking it in stays on one file system):
       until commit names it, a writer that dies leaves nothing on disk. Naming it goes through
       /proc/self/fd, so that must be there. The mode is 0666 less the umask, as for any new file. */
    if (access("/proc/self/fd", X_OK) == 0) {
        f->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (f->fd >= 0) {
            f->unnamed = true;
            free(dir);
            return 0;
        }
    }
#endif
    free(dir);
    /* The file system has no O_TMPFILE (or the folder is not there: the error comes below): a
       named temporary; O_EXCL never reuses a file that is there already. */
    for (int attempt = 0; attempt < 100; attempt++) {
        next_tmp_name(f, n);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0 || errno != EEXIST) break;
    }
    if (f->fd < 0) {
        nb__error("%s: cannot write '%s': cannot create a temporary file in its folder: %s", fn, path,
                  strerror(errno));
        afile_reset(f);
        return -1;
    }
    f->tmp_exists = true;
    return 0;
}

void nb__afile_abort(nb__afile *f) {
    if (f->fd >= 0) close(f->fd);
    if (f->tmp && f->tmp_exists) unlink(f->tmp);
    afile_reset(f);
}

int nb__afile_write(nb__afile *f, const void *p, size_t n) {
    if (f->fd < 0) return -1;
    const char *c = p;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        int64_t lim = atomic_load(&write_limit);
        ssize_t w;
        if (lim >= 0 && f->written + chunk > (uint64_t)lim) {
            /* the test hook: write up to the limit, then fail as a full disk would */
            size_t room = f->written < (uint64_t)lim ? (size_t)((uint64_t)lim - f->written) : 0;
            w = room ? write(f->fd, c, room) : 0;
            if (w >= 0 && (size_t)w == room) {
                f->written += (uint64_t)w;
                errno = ENOSPC;
                w = -1;
            }
        } else {
            w = write(f->fd, c, chunk);
        }
        if (w < 0) {
            if (errno == EINTR) continue;
            nb__error("%s: cannot write '%s': %s (after %llu bytes)", f->fn, f->path, strerror(errno),
                      (unsigned long long)f->written);
            nb__afile_abort(f);
            return -1;
        }
        if (w == 0) {
            nb__error("%s: cannot write '%s': no progress (after %llu bytes)", f->fn, f->path,
                      (unsigned long long)f->written);
            nb__afile_abort(f);
            return -1;
        }
        f->written += (uint64_t)w;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Gives the unnamed file its name: linked in at path directly when nothing is there, else
   linked in under a temporary name and renamed over path (between the two, a writer killed
   would leave the named temporary: two system calls after all the data is written and synced). */
static int link_unnamed(nb__afile *f) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, f->path, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != EEXIST) {
        nb__error("%s: cannot write '%s': cannot link the file in: %s", f->fn, f->path, strerror(errno));
        return -1;
    }
    size_t n = strlen(f->path) + 64;
    int rc = -1;
    for (int attempt = 0; attempt < 100 && rc < 0; attempt++) {
        next_tmp_name(f, n);
        rc = linkat(AT_FDCWD, proc, AT_FDCWD, f->tmp, AT_SYMLINK_FOLLOW);
        if (rc < 0 && errno != EEXIST) break;
    }
    if (rc < 0) {
        nb__error("%s: cannot write '%s': cannot link the file in under a temporary name: %s", f->fn, f->path,
                  strerror(errno));
        return -1;
    }
    f->tmp_exists = true;
    if (rename(f->tmp, f->path) != 0) {
        nb__error("%s: cannot write '%s': rename failed: %s", f->fn, f->path, strerror(errno));
        return -1;
    }
    f->tmp_exists = false;
    return 0;
}

int nb__afile_commit(nb__afile *f) {
    if (f->fd < 0) return -1;
    if (fsync(f->fd) != 0) {
        nb__error("%s: cannot write '%s': fsync failed: %s", f->fn, f->path, strerror(errno));
        nb__afile_abort(f);
        return -1;
    }
    if (f->unnamed) {
        if (link_unnamed(f) < 0) {
            nb__afile_abort(f);
            return -1;
        }
        int rc = close(f->fd);
        f->fd = -1;
        if (rc != 0) { /* the data was synced above; a local file system does not fail here */
            nb__error("%s: cannot write '%s': close failed: %s", f->fn, f->path, strerror(errno));
            nb__afile_abort(f);
            return -1;
        }
    } else {
        int rc = close(f->fd);
        f->fd = -1;
        if (rc != 0) {
            nb__error("%s: cannot write '%s': close failed: %s", f->fn, f->path, strerror(errno));
            nb__afile_abort(f);
            return -1;
        }
        if (rename(f->tmp, f->path) != 0) {
            nb__error("%s: cannot write '%s': rename failed: %s", f->fn, f->path, strerror(errno));
            nb__afile_abort(f);
            return -1;
        }
        f->tmp_exists = false;
    }
    /* make the new name itself durable: fsync the folder (best effort; some file systems refuse) */
    char *dir = folder_of(f->path);
    if (dir) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    afile_reset(f);
    return 0;
}

/* ---------- read-only mappings ---------- */
static int map_open(nb__map *m, const char *fn, const char *path, int prot);

int nb__map_open(nb__map *m, const char *fn, const char *path) { return map_open(m, fn, path, PROT_READ); }

int nb__map_open_cow(nb__map *m, const char *fn, const char *path) {
    return map_open(m, fn, path, PROT_READ | PROT_WRITE);
}

static int map_open(nb__map *m, const char *fn, const char *path, int prot) {
    memset(m, 0, sizeof *m);
    if (!path) {
        nb__error("%s: path is NULL", fn);
        return -1;
    }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        nb__error("%s: cannot open '%s': %s", fn, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        nb__error("%s: cannot stat '%s': %s", fn, path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        mode_t md = st.st_mode;
        nb__error("%s: '%s' is not a regular file (it is %s)", fn, path,
                  S_ISDIR(md) ? "a folder" : S_ISFIFO(md) ? "a FIFO" : S_ISSOCK(md) ? "a socket"
                  : S_ISCHR(md) ? "a character device" : S_ISBLK(md) ? "a block device" : "something else");
        close(fd);
        return -1;
    }
    m->size = (size_t)st.st_size;
    if (m->size == 0) {
        static const unsigned char empty[1];
        m->data = empty;
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, m->size, prot, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        nb__error("%s: cannot map '%s': %s", fn, path, strerror(err));
        m->size = 0;
        return -1;
    }
    m->data = p;
    m->mapped = true;
    return 0;
}

void nb__map_close(nb__map *m) {
    if (m->mapped) munmap((void *)m->data, m->size);
    memset(m, 0, sizeof *m);
}

/* ---------- dtype conversion ---------- */
void nb__convert(void *dst, nb_dtype dd, const void *src, nb_dtype sd, int64_t n) {
    if (dd == sd) {
        memcpy(dst, src, (size_t)n * nb__esize(dd));
        return;
    }
    if (dd == NB_F32) {
        float *o = dst;
        if (sd == NB_F16) {
            const uint16_t *s = src;
            for (int64_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, s + i, 2);
                o[i] = nb__f16_to_f32(h);
            }
            return;
        }
        if (sd == NB_BF16) {
            const uint16_t *s = src;
            for (int64_t i = 0; i < n; i++) {
                uint32_t u;
                uint16_t h;
                memcpy(&h, s + i, 2);
                u = (uint32_t)h << 16;
                memcpy(o + i, &u, 4);
            }
            return;
        }
        if (sd == NB_F64) {
            const double *s = src;
            for (int64_t i = 0; i < n; i++) {
                double v;
                memcpy(&v, s + i, 8);
                o[i] = (float)v;
            }
            return;
        }
    }
    /* everything else through double, element by element (the source may be unaligned) */
    size_t es = nb__esize(sd);
    for (int64_t i = 0; i < n; i++) {
        unsigned char tmp[8];
        memcpy(tmp, (const char *)src + (size_t)i * es, es);
        nb__store(dst, dd, i, nb__load(tmp, sd, 0));
    }
}

/* ---------- metadata ---------- */
nb_metadata *nb_metadata_new(void) {
    nb_metadata *md = calloc(1, sizeof *md);
    if (!md) nb__error("nb_metadata_new: out of memory");
    return md;
}

void nb_metadata_free(nb_metadata *md) {
    if (!md) return;
    for (int i = 0; i < md->n; i++) {
        free(md->keys[i]);
        free(md->values[i]);
    }
    free(md->keys);
    free(md->values);
    free(md);
}

static int find_key(const nb_metadata *md, const char *key) {
    for (int i = 0; i < md->n; i++)
        if (strcmp(md->keys[i], key) == 0) return i;
    return -1;
}

int nb_metadata_set(nb_metadata *md, const char *key, const char *value) {
    if (!md || !key || !value) {
        nb__error("nb_metadata_set: %s is NULL", !md ? "the map" : !key ? "key" : "value");
        return -1;
    }
    char *v = dup_str(value);
    if (!v) {
        nb__error("nb_metadata_set: out of memory");
        return -1;
    }
    int i = find_key(md, key);
    if (i >= 0) {
        free(md->values[i]);
        md->values[i] = v;
        return 0;
    }
    if (md->n == md->cap) {
        int cap = md->cap ? md->cap * 2 : 8;
        char **k = realloc(md->keys, (size_t)cap * sizeof *k);
        if (k) md->keys = k;
        char **vs = k ? realloc(md->values, (size_t)cap * sizeof *vs) : NULL;
        if (vs) md->values = vs;
        if (!k || !vs) {
            free(v);
            nb__error("nb_metadata_set: out of memory");
            return -1;
        }
        md->cap = cap;
    }
    char *k = dup_str(key);
    if (!k) {
        free(v);
        nb__error("nb_metadata_set: out of memory");
        return -1;
    }
    md->keys[md->n] = k;
    md->values[md->n] = v;
    md->n++;
    return 0;
}

int nb_metadata_set_int(nb_metadata *md, const char *key, int64_t value) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)value);
    return nb_metadata_set(md, key, buf);
}

const char *nb_metadata_get(const nb_metadata *md, const char *key) {
    if (!md || !key) return NULL;
    int i = find_key(md, key);
    return i >= 0 ? md->values[i] : NULL;
}

int nb_metadata_get_int(const nb_metadata *md, const char *key, int64_t *value) {
    const char *s = nb_metadata_get(md, key);
    if (!s) {
        nb__error("nb_metadata_get_int: no key '%s'", key ? key : "(null)");
        return -1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) {
        nb__error("nb_metadata_get_int: '%s' is '%s', not an integer", key, s);
        return -1;
    }
    if (value) *value = v;
    return 0;
}

int nb_metadata_count(const nb_metadata *md) { return md ? md->n : 0; }

const char *nb_metadata_key(const nb_metadata *md, int i) {
    return md && i >= 0 && i < md->n ? md->keys[i] : NULL;
}

const char *nb_metadata_value(const nb_metadata *md, int i) {
    return md && i >= 0 && i < md->n ? md->values[i] : NULL;
}
