/* The nabla command's side of a job of several ranks: the options the ranks must share are
   compared at the start, and a failed group ends the job (MPI_Abort) rather than finalizing with
   a peer that will never answer. */
#include "cli_dist.h"
#include "train_args.h"
#include <nabla.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each rank's options travel as "name=value\n" lines in a block of this size; a value longer
   than LONG_VALUE travels as its length and hash. */
enum { BLOCK = 16384, LONG_VALUE = 240 };

int cli_dist_end(int rc, const char *cmd) {
    const char *why = nb_dist_failure();
    if (!why) {
        nb_dist_finalize();
        return rc;
    }
    /* the checkpoint of the last whole epoch is left as it was: the run resumes from it */
    (void)why; /* the error that marked it was reported where it happened */
    fprintf(stderr, "nabla %s: rank %d: the process group failed; ending every rank of the job (MPI_Abort)\n", cmd,
            nb_dist_rank());
    fflush(stdout);
    fflush(stderr);
    nb_dist_abort(rc ? rc : 1);
    return rc ? rc : 1; /* not reached */
}

/* value as it travels: itself, or for a long one its length and FNV-1a hash. */
static void encode_value(const char *v, char *out, size_t size) {
    size_t len = strlen(v);
    if (len <= LONG_VALUE) {
        snprintf(out, size, "%s", v);
        return;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)v[i]) * 0x100000001b3ull;
    snprintf(out, size, "(%zu characters, hash %016llx)", len, (unsigned long long)h);
}

/* The value of option name in a rank's block (a pointer into it, up to '\n'), or NULL. */
static const char *find_value(const char *block, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (const char *p = block; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        if ((size_t)(nl - p) > n && !strncmp(p, name, n) && p[n] == '=') {
            *len = (size_t)(nl - p - (ptrdiff_t)n - 1);
            return p + n + 1;
        }
        p = nl + 1;
    }
    return NULL;
}

int cli_dist_agree(const char *cmd, const char *const *names, const char *const *values, int n) {
    int world = nb_dist_world_size();
    if (world < 2) return 0;
    char *mine = calloc(1, BLOCK);
    if (!mine) {
        fprintf(stderr, "nabla %s: out of memory\n", cmd);
        return -1; /* not reached in practice; the peers then time out in the gather */
    }
    size_t at = 0;
    for (int i = 0; i < n && at < BLOCK; i++) {
        char v[LONG_VALUE + 64];
        encode_value(values[i] ? values[i] : "(none)", v, sizeof v);
        at += (size_t)snprintf(mine + at, BLOCK - at, "%s=%s\n", names[i], v);
    }
    mine[BLOCK - 1] = 0; /* a list too long for the block is cut alike on every rank */
    nb_scope *sc = nb_scope_begin();
    nb_tensor *t = nb_from_data(mine, NB_SHAPE(BLOCK), NB_U8);
    nb_tensor *all = t ? nb_dist_all_gather(t) : NULL;
    const char *blocks = all ? nb_data_ptr(all) : NULL;
    free(mine);
    if (!blocks) {
        fprintf(stderr, "nabla %s: rank %d: comparing the ranks' options: %s\n", cmd, nb_dist_rank(), nb_error());
        nb_scope_end(sc);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        /* every rank's value of names[i], grouped: "A on ranks 0, 2, B on rank 1" */
        const char *v0;
        size_t l0 = 0;
        bool differs = false;
        v0 = find_value(blocks, names[i], &l0);
        for (int r = 1; r < world && !differs; r++) {
            size_t l = 0;
            const char *v = find_value(blocks + (size_t)r * BLOCK, names[i], &l);
            differs = !v != !v0 || (v && (l != l0 || memcmp(v, v0, l)));
        }
        if (!differs) continue;
        rc = -1;
        char msg[4096];
        size_t m = (size_t)snprintf(msg, sizeof msg, "option %s differs across ranks:", names[i]);
        bool *shown = calloc((size_t)world, 1);
        for (int r = 0; shown && r < world && m < sizeof msg; r++) {
            if (shown[r]) continue;
            size_t l = 0;
            const char *v = find_value(blocks + (size_t)r * BLOCK, names[i], &l);
            int cnt = 0;
            char ranks[512];
            size_t k = 0;
            for (int q = r; q < world; q++) {
                size_t lq = 0;
                const char *vq = find_value(blocks + (size_t)q * BLOCK, names[i], &lq);
                if (shown[q] || !vq != !v || (v && (lq != l || memcmp(vq, v, l)))) continue;
                shown[q] = true;
                if (k < sizeof ranks) k += (size_t)snprintf(ranks + k, sizeof ranks - k, "%s%d", cnt ? ", " : "", q);
                cnt++;
            }
            /* "A on rank 0, B on rank 1"; with groups of several ranks, "; " between groups */
            m += (size_t)snprintf(msg + m, sizeof msg - m, "%s %.*s on rank%s %s", r ? (world > 2 ? ";" : ",") : "",
                                  v ? (int)l : 9,
                                  v ? v : "(missing)", cnt > 1 ? "s" : "", ranks);
        }
        free(shown);
        fprintf(stderr, "nabla %s: rank %d: %s\n", cmd, nb_dist_rank(), msg);
    }
    nb_scope_end(sc);
    return rc;
}

/* A number as the shortest text that reads back as the same double. */
static void real_text(double x, char *buf, size_t size) {
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) return;
    }
}

int cli_train_agree(const train_opts *o) {
    char epochs[32], batch[32], limit[32], seed[32], lr[40], val[40], augment[8], image[48], channels[24], early[32],
        clip[40], smooth[40], decay[40];
    snprintf(epochs, sizeof epochs, "%d", o->epochs);
    snprintf(batch, sizeof batch, "%lld", (long long)o->batch);
    snprintf(limit, sizeof limit, "%lld", (long long)o->limit);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    real_text(o->lr, lr, sizeof lr);
    real_text(o->val_split, val, sizeof val);
    snprintf(augment, sizeof augment, "%s", o->augment < 0 ? "default" : o->augment ? "on" : "off");
    snprintf(image, sizeof image, "%lldx%lld", (long long)o->height, (long long)o->width);
    snprintf(channels, sizeof channels, "%lld", (long long)o->channels);
    snprintf(early, sizeof early, "%d", o->early_stopping);
    real_text(o->clip_grad_norm, clip, sizeof clip);
    real_text(o->label_smoothing, smooth, sizeof smooth);
    real_text(o->weight_decay, decay, sizeof decay);
    const char *names[] = { "--model", "--data", "--labels", "--label", "--test", "--test-labels", "--optimizer",
                            "--lr", "--schedule", "--epochs", "--batch-size", "--limit", "--val-split", "--seed",
                            "--augment", "--autocast", "--channels", "--image-size", "--device", "--resume",
                            "--early-stopping", "--clip-grad-norm", "--label-smoothing", "--weight-decay" };
    const char *values[] = { o->model, o->data, o->labels, o->label, o->test, o->test_labels, o->optimizer,
                             lr, o->schedule, epochs, batch, limit, val, seed,
                             augment, o->autocast_bf16 ? "bf16" : "off", channels, image, o->device, o->resume,
                             early, clip, smooth, decay };
    return cli_dist_agree("train", names, values, (int)(sizeof names / sizeof *names));
}
