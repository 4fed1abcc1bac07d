/* Checkpoints: model, optimizer state, schedule, epoch, global step, RNG state and the caller's
   metadata in one safetensors file, restored all or nothing.

   Layout: tensors "model.<state_dict key>" and "optim.<i>.<state>" (nb_optim_named_state's
   names); metadata "nabla.format" = "checkpoint", "nabla.epoch", "nabla.global_step",
   "nabla.rng.seed", "nabla.rng.offset", "nabla.optim.groups", "nabla.optim.lr.<g>" (as %.17g,
   exact), "nabla.sched.last_epoch", plus every key of the caller's metadata. */
#include "io_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int meta_u64(const nb_metadata *md, const char *key, uint64_t *v, const char *path) {
    const char *s = nb_metadata_get(md, key);
    char *end;
    errno = 0;
    unsigned long long x = s ? strtoull(s, &end, 10) : 0;
    if (!s || errno || end == s || *end) {
        nb__error("nb_checkpoint_load: '%s' lacks a valid '%s' entry", path, key);
        return -1;
    }
    *v = x;
    return 0;
}

static int meta_i64(const nb_metadata *md, const char *key, int64_t *v, const char *path) {
    const char *s = nb_metadata_get(md, key);
    char *end;
    errno = 0;
    long long x = s ? strtoll(s, &end, 10) : 0;
    if (!s || errno || end == s || *end) {
        nb__error("nb_checkpoint_load: '%s' lacks a valid '%s' entry", path, key);
        return -1;
    }
    *v = x;
    return 0;
}

/* The checkpoint's tensors: "model.<key>" from the module, then "optim.<i>.<state>" from the
   optimizer, whose state is made first (zeros and step 0 where no step was taken, which is
   what the first step would start from) so the file is complete. *es receives the module's
   entries; free both with free_checkpoint_entries. NULL with an error on failure. */
static nb_named_tensor *checkpoint_entries(const char *fn, const nb_checkpoint *ck, nb_named_tensor **es, int *nm, int *no) {
    *nm = *no = 0;
    *es = nb__module_entries(fn, ck->model, "model.", nm);
    if (!*es) return NULL;
    if (ck->optimizer) {
        if (nb_optim_init_state(ck->optimizer) < 0 || (*no = nb_optim_named_state(ck->optimizer, NULL, 0)) < 0) {
            *no = 0;
            return NULL;
        }
    }
    nb_named_tensor *all = calloc((size_t)(*nm + *no + 1), sizeof *all);
    if (!all) {
        nb__error("%s: out of memory", fn);
        return NULL;
    }
    memcpy(all, *es, (size_t)*nm * sizeof *all);
    if (*no) nb_optim_named_state(ck->optimizer, all + *nm, *no);
    for (int i = *nm; i < *nm + *no; i++) {
        size_t len = strlen(all[i].name) + 7;
        char *name = malloc(len);
        if (!name) {
            for (int k = *nm; k < i; k++) free((char *)all[k].name);
            free(all);
            *no = 0;
            nb__error("%s: out of memory", fn);
            return NULL;
        }
        snprintf(name, len, "optim.%s", all[i].name);
        all[i].name = name;
    }
    return all;
}

static void free_checkpoint_entries(nb_named_tensor *all, nb_named_tensor *es, int nm, int no) {
    if (all)
        for (int i = nm; i < nm + no; i++) free((char *)all[i].name);
    free(all);
    nb__free_entries(es, nm, true);
}

int nb_checkpoint_save(const nb_checkpoint *ck, const char *path) {
    const char *fn = "nb_checkpoint_save";
    if (!ck || !ck->model) {
        if (!nb__has_error()) nb__error("%s: %s is NULL (saving '%s')", fn, ck ? "model" : "checkpoint", path ? path : "(null)");
        return -1;
    }
    int rc = -1, nm = 0, no = 0;
    uint64_t errors0 = nb__error_count(); /* failures of this save, not an older uncleared error */
    nb_named_tensor *all = NULL;
    nb_metadata *md = nb_metadata_new();
    nb_named_tensor *es = NULL;
    all = md ? checkpoint_entries(fn, ck, &es, &nm, &no) : NULL;
    if (!all) goto done;
    for (int i = 0; i < nb_metadata_count(ck->metadata); i++)
        if (nb_metadata_set(md, nb_metadata_key(ck->metadata, i), nb_metadata_value(ck->metadata, i)) < 0) goto done;
    uint64_t seed, offset;
    nb_rng_get_state(&seed, &offset);
    char buf[64];
    nb_metadata_set(md, "nabla.format", "checkpoint");
    nb_metadata_set(md, "nabla.version", nb_version());
    nb_metadata_set_int(md, "nabla.epoch", ck->epoch);
    nb_metadata_set_int(md, "nabla.global_step", ck->global_step);
    snprintf(buf, sizeof buf, "%" PRIu64, seed);
    nb_metadata_set(md, "nabla.rng.seed", buf);
    snprintf(buf, sizeof buf, "%" PRIu64, offset);
    nb_metadata_set(md, "nabla.rng.offset", buf);
    if (ck->optimizer) {
        int groups = nb_optim_num_groups(ck->optimizer);
        nb_metadata_set_int(md, "nabla.optim.groups", groups);
        for (int g = 0; g < groups; g++) {
            char key[64];
            snprintf(key, sizeof key, "nabla.optim.lr.%d", g);
            snprintf(buf, sizeof buf, "%.17g", nb_optim_get_lr(ck->optimizer, g));
            nb_metadata_set(md, key, buf);
        }
    }
    if (ck->scheduler) nb_metadata_set_int(md, "nabla.sched.last_epoch", nb_sched_last_epoch(ck->scheduler));
    if (nb__error_count() != errors0) goto done;
    rc = nb__save_named(fn, path, all, nm + no, md);
done:
    free_checkpoint_entries(all, es, nm, no);
    nb_metadata_free(md);
    return rc;
}

int nb_checkpoint_load(nb_checkpoint *ck, const char *path) {
    const char *fn = "nb_checkpoint_load";
    if (!ck || !ck->model) {
        if (!nb__has_error()) nb__error("%s: %s is NULL (loading '%s')", fn, ck ? "model" : "checkpoint", path ? path : "(null)");
        return -1;
    }
    nb__error_ctx ec; /* the reader's errors are told as this function's */
    nb__error_push(&ec, "nb_safetensors_open", "%s", fn);
    nb_safetensors *f = nb_safetensors_open(path);
    nb__error_pop(&ec);
    if (!f) return -1;
    int rc = -1, nm = 0, no = 0, groups = 0;
    nb_named_tensor *all = NULL, *es = NULL;
    double *lrs = NULL;
    const nb_metadata *md = nb_safetensors_metadata(f);
    const char *format = nb_metadata_get(md, "nabla.format");
    if (!format || strcmp(format, "checkpoint") != 0) {
        nb__error("%s: '%s' is a safetensors file but not a nabla checkpoint (no nabla.format = checkpoint)", fn, path);
        goto done;
    }
    /* read and check every metadata field before changing anything */
    int64_t epoch, step, last_epoch = 0;
    uint64_t seed, offset;
    if (meta_i64(md, "nabla.epoch", &epoch, path) < 0 || meta_i64(md, "nabla.global_step", &step, path) < 0 ||
        meta_u64(md, "nabla.rng.seed", &seed, path) < 0 || meta_u64(md, "nabla.rng.offset", &offset, path) < 0)
        goto done;
    if (ck->scheduler && meta_i64(md, "nabla.sched.last_epoch", &last_epoch, path) < 0) goto done;
    if (ck->scheduler && (last_epoch < 0 || last_epoch > INT32_MAX)) {
        nb__error("%s: '%s' has schedule step %lld out of range", fn, path, (long long)last_epoch);
        goto done;
    }
    if (ck->optimizer) {
        int64_t g64;
        if (meta_i64(md, "nabla.optim.groups", &g64, path) < 0) goto done;
        groups = nb_optim_num_groups(ck->optimizer);
        if (g64 != groups) {
            nb__error("%s: '%s' holds %lld parameter groups, the optimizer has %d; nothing was loaded", fn, path,
                      (long long)g64, groups);
            goto done;
        }
        lrs = calloc((size_t)(groups ? groups : 1), sizeof *lrs);
        if (!lrs) {
            nb__error("%s: out of memory", fn);
            goto done;
        }
        for (int g = 0; g < groups; g++) {
            char key[64];
            snprintf(key, sizeof key, "nabla.optim.lr.%d", g);
            const char *s = nb_metadata_get(md, key);
            char *end;
            lrs[g] = s ? strtod(s, &end) : 0;
            if (!s || end == s || *end) {
                nb__error("%s: '%s' lacks a valid '%s' entry", fn, path, key);
                goto done;
            }
        }
    }
    all = checkpoint_entries(fn, ck, &es, &nm, &no);
    if (!all) goto done;
    /* with no optimizer given, its tensors in the file are ignored rather than unexpected */
    const char *prefixes[2] = { "model.", "optim." };
    if (nb__load_named(fn, path, f, all, nm + no, prefixes, ck->optimizer ? 2 : 1, true, NULL) < 0) goto done;
    if (ck->scheduler && nb_sched_set_last_epoch(ck->scheduler, (int)last_epoch) < 0) goto done;
    for (int g = 0; g < groups; g++) nb_optim_set_group_lr(ck->optimizer, g, lrs[g]);
    nb_rng_set_state(seed, offset);
    ck->epoch = epoch;
    ck->global_step = step;
    if (ck->metadata)
        for (int i = 0; i < nb_metadata_count(md); i++)
            if (nb_metadata_set(ck->metadata, nb_metadata_key(md, i), nb_metadata_value(md, i)) < 0) goto done;
    rc = 0;
done:
    free_checkpoint_entries(all, es, nm, no);
    free(lrs);
    nb_safetensors_close(f);
    return rc;
}
