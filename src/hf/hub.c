/* Model names in the Hugging Face cache: a name that is not a folder ("gpt2",
   "sentence-transformers/all-MiniLM-L6-v2") stands for the snapshot huggingface_hub downloaded
   into $HF_HUB_CACHE (else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
   ~/.cache/huggingface/hub) as models--ORG--NAME/snapshots/REVISION/. nabla reads that cache; it
   never downloads. Built with or without jansson (no JSON is read here). */
#include "../core/core_impl.h"
#include "hub.h"
#include "nabla/hf.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether name has the form of a Hub repository id: NAME or ORG/NAME, each part letters, digits,
   '-', '_' and '.', not starting with '.' (so no "..", no absolute or ./ path). */
static bool repo_id(const char *name) {
    int parts = 0;
    for (const char *p = name;; p++) {
        const char *start = p;
        while (*p && *p != '/') {
            char c = *p;
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
                return false;
            p++;
        }
        if (p == start || *start == '.' || ++parts > 2) return false;
        if (!*p) return true;
    }
}

/* The hub cache folder, as huggingface_hub finds it; false when no variable names a home. */
static bool cache_root(char *buf, size_t size) {
    const char *v;
    int n;
    if ((v = getenv("HF_HUB_CACHE")) && *v) n = snprintf(buf, size, "%s", v);
    else if ((v = getenv("HF_HOME")) && *v) n = snprintf(buf, size, "%s/hub", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) n = snprintf(buf, size, "%s/huggingface/hub", v);
    else if ((v = getenv("HOME")) && *v) n = snprintf(buf, size, "%s/.cache/huggingface/hub", v);
    else return false;
    return n > 0 && (size_t)n < size;
}

/* The revision refs/main names (a commit hash: no '/', no leading '.'), into rev; false if none. */
static bool main_ref(const char *repo_dir, char *rev, size_t size) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/refs/main", repo_dir) >= (int)sizeof path) return false;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(rev, 1, size - 1, f);
    fclose(f);
    rev[n] = 0;
    while (n > 0 && (rev[n - 1] == '\n' || rev[n - 1] == '\r' || rev[n - 1] == ' ')) rev[--n] = 0;
    return n > 0 && rev[0] != '.' && !strchr(rev, '/');
}

/* The snapshot modified last, when refs/main names none that is there; false if there is none. */
static bool newest_snapshot(const char *snaps, char *rev, size_t size) {
    DIR *d = opendir(snaps);
    if (!d) return false;
    struct dirent *e;
    time_t best = 0;
    bool found = false;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", snaps, e->d_name) >= (int)sizeof path || stat(path, &st) != 0 ||
            !S_ISDIR(st.st_mode) || strlen(e->d_name) >= size)
            continue;
        if (!found || st.st_mtime > best) {
            best = st.st_mtime;
            snprintf(rev, size, "%s", e->d_name);
            found = true;
        }
    }
    closedir(d);
    return found;
}

int nb__hf_resolve(const char *fn, const char *name, char *buf, size_t size) {
    if (!name || !buf || size == 0) {
        nb__error("%s: the model name or the buffer is NULL", fn);
        return -1;
    }
    struct stat st;
    if (stat(name, &st) == 0 || !repo_id(name)) {
        /* a file or folder that is there, or a path: the caller opens it and names what is wrong */
        if ((size_t)snprintf(buf, size, "%s", name) >= size) {
            nb__error("%s: the path \"%s\" is longer than %zu bytes", fn, name, size - 1);
            return -1;
        }
        return 0;
    }
    char root[PATH_MAX], repo[PATH_MAX], snaps[PATH_MAX + 16], rev[256];
    if (!cache_root(root, sizeof root)) {
        nb__error("%s: \"%s\" is not a folder, and no Hugging Face cache to look in ($HF_HUB_CACHE, $HF_HOME and $HOME "
                  "are unset); nabla does not download models",
                  fn, name);
        return -1;
    }
    int n = snprintf(repo, sizeof repo, "%s/models--", root);
    if (n < 0 || (size_t)n + 2 * strlen(name) >= sizeof repo) {
        nb__error("%s: a model name of %zu bytes (\"%.40s...\") makes a cache path under %s longer than %zu bytes", fn,
                  strlen(name), name, root, sizeof repo - 1);
        return -1;
    }
    for (const char *p = name; *p; p++) {
        if (*p == '/') {
            repo[n++] = '-';
            repo[n++] = '-';
        } else repo[n++] = *p;
    }
    repo[n] = 0;
    snprintf(snaps, sizeof snaps, "%s/snapshots", repo);
    bool have = main_ref(repo, rev, sizeof rev);
    if (have) {
        char path[sizeof snaps + sizeof rev + 1];
        snprintf(path, sizeof path, "%s/%s", snaps, rev);
        have = is_dir(path);
    }
    if (!have) have = newest_snapshot(snaps, rev, sizeof rev);
    if (!have) {
        nb__error("%s: \"%s\" is not a folder, and the Hugging Face cache has no snapshot of it (looked in %s); nabla does "
                  "not download models: fetch it with `huggingface-cli download %s` (or give a checkpoint folder)",
                  fn, name, snaps, name);
        return -1;
    }
    if ((size_t)snprintf(buf, size, "%s/%s", snaps, rev) >= size) {
        nb__error("%s: the cached snapshot's path %s/%s is longer than %zu bytes", fn, snaps, rev, size - 1);
        return -1;
    }
    return 0;
}

int nb_hf_resolve(const char *name, char *buf, size_t size) { return nb__hf_resolve("nb_hf_resolve", name, buf, size); }
