/* The event-file reader behind the plotter: TFRecord framing checked by CRC, Event and Summary
   decoding of scalars (simple_value, and TF2-style scalar tensors), stopping cleanly at a
   truncated or corrupt record; a restart (SessionLog START) drops the points it supersedes, as
   TensorBoard does. */
#include "../core/core_impl.h"
#include "nabla.h"
#include "pb.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct series {
    char *tag;
    size_t tag_len;
    int64_t n, cap;
    int64_t *step;
    double *wall, *value;
} series;

struct nb_scalar_log {
    series *s;
    int n, cap;
    int *index;     /* open-addressed hash of the tags: slot -> series + 1, 0 empty */
    size_t slots;   /* a power of two, at least twice n */
    int64_t records;
    char *note;
    bool oom;
};

static uint64_t tag_hash(const char *tag, size_t len) { /* FNV-1a */
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)tag[i]) * 1099511628211u;
    return h;
}

/* The series of a tag, made when new; -1 when memory runs out. A hash index rather than a scan:
   a hostile (or huge) file with a million distinct tags must not take a million squared steps. */
static int find_or_add(nb_scalar_log *log, const char *tag, size_t len) {
    size_t slot = 0;
    if (log->slots) {
        for (slot = (size_t)tag_hash(tag, len) & (log->slots - 1); log->index[slot]; slot = (slot + 1) & (log->slots - 1)) {
            const series *t = &log->s[log->index[slot] - 1];
            if (t->tag_len == len && memcmp(t->tag, tag, len) == 0) return log->index[slot] - 1;
        }
    }
    if ((size_t)log->n + 1 > log->slots / 2) { /* grow the index and re-place every tag */
        size_t slots = log->slots ? 2 * log->slots : 16;
        int *index = calloc(slots, sizeof *index);
        if (!index) return -1;
        for (int i = 0; i < log->n; i++) {
            size_t k = (size_t)tag_hash(log->s[i].tag, log->s[i].tag_len) & (slots - 1);
            while (index[k]) k = (k + 1) & (slots - 1);
            index[k] = i + 1;
        }
        free(log->index);
        log->index = index;
        log->slots = slots;
        for (slot = (size_t)tag_hash(tag, len) & (slots - 1); index[slot]; slot = (slot + 1) & (slots - 1)) {}
    }
    if (log->n == log->cap) {
        int cap = log->cap ? 2 * log->cap : 8;
        series *s = realloc(log->s, sizeof *s * (size_t)cap);
        if (!s) return -1;
        log->s = s;
        log->cap = cap;
    }
    series *s = &log->s[log->n];
    memset(s, 0, sizeof *s);
    s->tag = malloc(len + 1);
    if (!s->tag) return -1;
    memcpy(s->tag, tag, len);
    s->tag[len] = 0;
    s->tag_len = len;
    log->index[slot] = log->n + 1;
    return log->n++;
}

static void add_point(nb_scalar_log *log, const unsigned char *tag, size_t len, int64_t step, double wall, double v) {
    int i = find_or_add(log, (const char *)tag, len);
    if (i < 0) {
        log->oom = true;
        return;
    }
    series *s = &log->s[i];
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 4; /* small at first: a file of many one-point tags stays small */
        int64_t *st = realloc(s->step, sizeof *st * (size_t)cap);
        if (st) s->step = st;
        double *wa = realloc(s->wall, sizeof *wa * (size_t)cap);
        if (wa) s->wall = wa;
        double *va = realloc(s->value, sizeof *va * (size_t)cap);
        if (va) s->value = va;
        if (!st || !wa || !va) {
            log->oom = true;
            return;
        }
        s->cap = cap;
    }
    s->step[s->n] = step;
    s->wall[s->n] = wall;
    s->value[s->n] = v;
    s->n++;
}

/* A TF2-style scalar: TensorProto with dtype DT_FLOAT (1) or DT_DOUBLE (2) and one value. */
static bool tensor_scalar(const unsigned char *p, size_t n, double *out) {
    nb_pb_reader r = { p, p + n, false };
    nb_pb_field f;
    int64_t dtype = 0;
    bool have = false;
    double v = 0;
    const unsigned char *content = NULL;
    size_t clen = 0;
    while (nb__pb_next(&r, &f)) {
        if (f.field == 1 && f.wire == 0) dtype = (int64_t)f.u;
        else if (f.field == 4 && f.wire == 2) content = f.bytes, clen = f.len;
        else if (f.field == 5 && f.wire == 5) v = nb__pb_as_float(&f), have = true;
        else if (f.field == 5 && f.wire == 2 && f.len >= 4) {
            nb_pb_field g = { .u = (uint32_t)f.bytes[0] | (uint32_t)f.bytes[1] << 8 | (uint32_t)f.bytes[2] << 16 | (uint32_t)f.bytes[3] << 24 };
            v = nb__pb_as_float(&g), have = true;
        } else if (f.field == 6 && f.wire == 1) v = nb__pb_as_double(&f), have = true;
        else if (f.field == 6 && f.wire == 2 && f.len >= 8) {
            nb_pb_field g = { 0 };
            for (int i = 0; i < 8; i++) g.u |= (uint64_t)f.bytes[i] << (8 * i);
            v = nb__pb_as_double(&g), have = true;
        }
    }
    if (r.bad) return false;
    if (!have && content && dtype == 1 && clen == 4) {
        nb_pb_field g = { .u = (uint32_t)content[0] | (uint32_t)content[1] << 8 | (uint32_t)content[2] << 16 | (uint32_t)content[3] << 24 };
        v = nb__pb_as_float(&g), have = true;
    } else if (!have && content && dtype == 2 && clen == 8) {
        nb_pb_field g = { 0 };
        for (int i = 0; i < 8; i++) g.u |= (uint64_t)content[i] << (8 * i);
        v = nb__pb_as_double(&g), have = true;
    }
    if (!have || (dtype != 1 && dtype != 2)) return false;
    *out = v;
    return true;
}

/* Whether SummaryMetadata names the "scalars" plugin. */
static bool is_scalars_plugin(const unsigned char *p, size_t n) {
    nb_pb_reader r = { p, p + n, false };
    nb_pb_field f;
    while (nb__pb_next(&r, &f))
        if (f.field == 1 && f.wire == 2) {
            nb_pb_reader q = { f.bytes, f.bytes + f.len, false };
            nb_pb_field g;
            while (nb__pb_next(&q, &g))
                if (g.field == 1 && g.wire == 2) return g.len == 7 && memcmp(g.bytes, "scalars", 7) == 0;
        }
    return false;
}

static void decode_value(nb_scalar_log *log, const unsigned char *p, size_t n, int64_t step, double wall) {
    nb_pb_reader r = { p, p + n, false };
    nb_pb_field f;
    const unsigned char *tag = NULL, *tensor = NULL;
    size_t tag_len = 0, tensor_len = 0;
    bool simple = false, scalars = false;
    double v = 0;
    while (nb__pb_next(&r, &f)) {
        if (f.field == 1 && f.wire == 2) tag = f.bytes, tag_len = f.len;
        else if (f.field == 2 && f.wire == 5) v = nb__pb_as_float(&f), simple = true;
        else if (f.field == 8 && f.wire == 2) tensor = f.bytes, tensor_len = f.len;
        else if (f.field == 9 && f.wire == 2) scalars = is_scalars_plugin(f.bytes, f.len);
    }
    /* a tag with a NUL byte has no C-string name: nb_scalar_log_tag could not tell it from its
       prefix, and it would never match itself, so the value is skipped */
    if (r.bad || !tag || memchr(tag, 0, tag_len)) return;
    if (!simple && !(scalars && tensor && tensor_scalar(tensor, tensor_len, &v))) return;
    add_point(log, tag, tag_len, step, wall, v);
}

/* A restart at step (SessionLog START): every point read so far at that step or later is
   dropped, for all tags, as TensorBoard's event accumulator does (_CheckForRestartAndMaybePurge),
   so a resumed run's points replace an interrupted run's instead of mixing with them. */
static void purge_from(nb_scalar_log *log, int64_t step) {
    for (int i = 0; i < log->n; i++) {
        series *s = &log->s[i];
        int64_t k = 0;
        for (int64_t j = 0; j < s->n; j++)
            if (s->step[j] < step) {
                s->step[k] = s->step[j];
                s->wall[k] = s->wall[j];
                s->value[k] = s->value[j];
                k++;
            }
        s->n = k;
    }
}

/* Whether a SessionLog message has status START (1). */
static bool is_session_start(const unsigned char *p, size_t n) {
    nb_pb_reader r = { p, p + n, false };
    nb_pb_field f;
    bool start = false;
    while (nb__pb_next(&r, &f))
        if (f.field == 1 && f.wire == 0) start = f.u == 1;
    return start && !r.bad;
}

static void decode_event(nb_scalar_log *log, const unsigned char *p, size_t n) {
    nb_pb_reader r = { p, p + n, false };
    nb_pb_field f;
    double wall = 0;
    int64_t step = 0;
    const unsigned char *summary = NULL;
    size_t summary_len = 0;
    bool start = false;
    while (nb__pb_next(&r, &f)) {
        if (f.field == 1 && f.wire == 1) wall = nb__pb_as_double(&f);
        else if (f.field == 2 && f.wire == 0) step = (int64_t)f.u;
        else if (f.field == 5 && f.wire == 2) summary = f.bytes, summary_len = f.len;
        else if (f.field == 7 && f.wire == 2) start = is_session_start(f.bytes, f.len);
    }
    if (!r.bad && start) purge_from(log, step);
    if (r.bad || !summary) return;
    nb_pb_reader s = { summary, summary + summary_len, false };
    while (nb__pb_next(&s, &f))
        if (f.field == 1 && f.wire == 2) decode_value(log, f.bytes, f.len, step, wall);
}

static void add_note(nb_scalar_log *log, const char *text) {
    size_t old = log->note ? strlen(log->note) : 0, add = strlen(text);
    char *n = realloc(log->note, old + add + 3);
    if (!n) {
        log->oom = true;
        return;
    }
    if (old) memcpy(n + old, "; ", 2), old += 2;
    memcpy(n + old, text, add + 1);
    log->note = n;
}

static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Reads one event file into log; 0, or -1 with an error when the file cannot be read. */
static int read_file(nb_scalar_log *log, const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        nb__error("nb_scalar_log_read: cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, size = 0;
    unsigned char *data = malloc(cap);
    while (data) {
        if (size == cap) {
            unsigned char *d = realloc(data, cap * 2);
            if (!d) {
                free(data);
                data = NULL;
                break;
            }
            data = d;
            cap *= 2;
        }
        size_t k = fread(data + size, 1, cap - size, fp);
        size += k;
        if (k == 0) break;
    }
    bool rerr = ferror(fp);
    fclose(fp);
    if (!data || rerr) {
        free(data);
        nb__error("nb_scalar_log_read: cannot read '%s': %s", path, data ? "read error" : "out of memory");
        return -1;
    }
    size_t pos = 0;
    int64_t records = 0;
    char note[1200] = "";
    while (pos < size) {
        size_t left = size - pos;
        if (left < 12) {
            snprintf(note, sizeof note, "%s: truncated record at byte %zu of %zu (header cut short); read %lld whole records",
                     path, pos, size, (long long)records);
            break;
        }
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)data[pos + i] << (8 * i);
        if (le32(data + pos + 8) != nb__crc_mask(nb__crc32c(0, data + pos, 8))) {
            snprintf(note, sizeof note, "%s: corrupt record at byte %zu of %zu (length CRC mismatch); read %lld whole records",
                     path, pos, size, (long long)records);
            break;
        }
        if (len > left - 12 || left - 12 - len < 4) {
            snprintf(note, sizeof note, "%s: truncated record at byte %zu of %zu (needs %llu bytes); read %lld whole records",
                     path, pos, size, (unsigned long long)(len + 16), (long long)records);
            break;
        }
        const unsigned char *body = data + pos + 12;
        if (le32(body + len) != nb__crc_mask(nb__crc32c(0, body, (size_t)len))) {
            snprintf(note, sizeof note, "%s: corrupt record at byte %zu of %zu (data CRC mismatch); read %lld whole records",
                     path, pos, size, (long long)records);
            break;
        }
        decode_event(log, body, (size_t)len);
        records++;
        pos += 16 + (size_t)len;
    }
    free(data);
    log->records += records;
    if (note[0]) add_note(log, note);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

nb_scalar_log *nb_scalar_log_read(const char *path) {
    if (!path) {
        nb__error("nb_scalar_log_read: path is NULL");
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        nb__error("nb_scalar_log_read: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    nb_scalar_log *log = calloc(1, sizeof *log);
    if (!log) {
        nb__error("nb_scalar_log_read: out of memory");
        return NULL;
    }
    int rc = 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            nb__error("nb_scalar_log_read: cannot open folder '%s': %s", path, strerror(errno));
            free(log);
            return NULL;
        }
        char **names = NULL;
        int n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d)) && rc == 0) {
            if (!strstr(e->d_name, "tfevents")) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                char **nn = realloc(names, sizeof *nn * (size_t)cap);
                if (!nn) {
                    rc = -1;
                    break;
                }
                names = nn;
            }
            size_t len = strlen(path) + strlen(e->d_name) + 2;
            names[n] = malloc(len);
            if (!names[n]) {
                rc = -1;
                break;
            }
            snprintf(names[n], len, "%s/%s", path, e->d_name);
            n++;
        }
        closedir(d);
        if (rc != 0) nb__error("nb_scalar_log_read: out of memory");
        else if (n == 0) {
            nb__error("nb_scalar_log_read: no event files (events.out.tfevents.*) in '%s'", path);
            rc = -1;
        }
        if (rc == 0) qsort(names, (size_t)n, sizeof *names, cmp_str);
        for (int i = 0; i < n && rc == 0; i++) rc = read_file(log, names[i]);
        for (int i = 0; i < n; i++) free(names[i]);
        free(names);
    } else {
        rc = read_file(log, path);
    }
    if (rc == 0 && log->oom) {
        nb__error("nb_scalar_log_read: out of memory reading '%s'", path);
        rc = -1;
    }
    if (rc != 0) {
        nb_scalar_log_free(log);
        return NULL;
    }
    return log;
}

int nb_scalar_log_num_tags(const nb_scalar_log *log) { return log ? log->n : 0; }

const char *nb_scalar_log_tag(const nb_scalar_log *log, int i) { return log && i >= 0 && i < log->n ? log->s[i].tag : NULL; }

int nb_scalar_log_find(const nb_scalar_log *log, const char *tag) {
    if (!log || !tag || !log->slots) return -1;
    size_t len = strlen(tag);
    for (size_t k = (size_t)tag_hash(tag, len) & (log->slots - 1); log->index[k]; k = (k + 1) & (log->slots - 1)) {
        const series *s = &log->s[log->index[k] - 1];
        if (s->tag_len == len && memcmp(s->tag, tag, len) == 0) return log->index[k] - 1;
    }
    return -1;
}

int64_t nb_scalar_log_points(const nb_scalar_log *log, int i, const int64_t **steps, const double **wall, const double **values) {
    if (!log || i < 0 || i >= log->n) {
        nb__error("nb_scalar_log_points: no tag %d (the log has %d)", i, log ? log->n : 0);
        return -1;
    }
    const series *s = &log->s[i];
    if (steps) *steps = s->step;
    if (wall) *wall = s->wall;
    if (values) *values = s->value;
    return s->n;
}

int64_t nb_scalar_log_records(const nb_scalar_log *log) { return log ? log->records : 0; }

const char *nb_scalar_log_note(const nb_scalar_log *log) { return log ? log->note : NULL; }

void nb_scalar_log_free(nb_scalar_log *log) {
    if (!log) return;
    for (int i = 0; i < log->n; i++) {
        free(log->s[i].tag);
        free(log->s[i].step);
        free(log->s[i].wall);
        free(log->s[i].value);
    }
    free(log->s);
    free(log->index);
    free(log->note);
    free(log);
}
