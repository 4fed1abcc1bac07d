/* CPU connectionist temporal classification loss (Graves et al. 2006) with torch's CPU recursions:
   per sequence, the forward variables alpha over the target's labels with blanks around and
   between them (2 S + 1 states) in log space give the loss -log p; the backward recomputes alpha
   (so the forward keeps nothing), runs beta the other way and sums alpha * beta per label. Its
   gradient is the loss's own, d loss / d log_probs = -exp(log sum alpha beta + nll - log_prob):
   torch's kernel adds exp(log_probs), the softmax's share, which vanishes behind a log_softmax
   but makes torch's gradient fail a finite-difference check. Each sequence is one piece of work
   done serially in double, so results never depend on the thread count. The lengths and labels
   are checked here, where they are read, so a call that reaches the kernel by any path never
   reads outside its tensors. Inputs may have any strides; outputs are contiguous. */
#include "../../core/threadpool.h"
#include "../kernel.h"
#include "../ctc_recursion.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef nb_ctc_job ctc_job;

static void sequence(const ctc_job *j, int64_t b, int slot) {
    nb__ctc_sequence(j, b, j->work + (size_t)slot * j->work_slot, j->labels + (size_t)slot * j->labels_slot);
}

static void sequence_range(void *ctx, int64_t lo, int64_t hi, int slot) {
    for (int64_t b = lo; b < hi; b++) sequence(ctx, b, slot);
}

static int64_t length_at(const nb_tensor *t, int64_t b) {
    return ctc_int_at(nb__data(t), t->dtype, t->shape.ndim ? b * t->stride[0] : 0);
}

/* Reads and checks the lengths and labels (inference checked shapes and dtypes) into meta
   (4 N values: il, tl, off, then N feasibility bytes); sizes the scratch. */
int nb__cpu_ctc_prepare(nb_tensor *const *in, ctc_job *j, int64_t *meta, size_t *work_slot, size_t *labels_slot) {
    const nb_tensor *tg = in[1];
    int64_t *il = meta, *tl = meta + j->N, *off = meta + 2 * j->N;
    unsigned char *feasible = (unsigned char *)(meta + 3 * j->N);
    bool padded = tg->shape.ndim == 2;
    int64_t S = padded ? tg->shape.dim[1] : tg->shape.dim[0], pos = 0;
    j->tst = padded ? tg->stride[1] : tg->stride[0];
    int64_t max_cells = 0, max_L = 0;
    for (int64_t b = 0; b < j->N; b++) {
        il[b] = length_at(in[2], b);
        tl[b] = length_at(in[3], b);
        if (il[b] < 0 || il[b] > j->T) {
            nb__error("nb_ctc_loss: input_lengths[%lld] is %lld, outside [0, %lld] (log_probs has %lld steps)", (long long)b,
                      (long long)il[b], (long long)j->T, (long long)j->T);
            return -1;
        }
        if (tl[b] < 0 || (padded && tl[b] > S) || (!padded && tl[b] > S - pos)) {
            if (tl[b] < 0) nb__error("nb_ctc_loss: target_lengths[%lld] is %lld, a negative length", (long long)b, (long long)tl[b]);
            else if (padded)
                nb__error("nb_ctc_loss: target_lengths[%lld] is %lld, longer than the %lld labels of each row of targets [%lld, %lld]",
                          (long long)b, (long long)tl[b], (long long)S, (long long)j->N, (long long)S);
            else
                nb__error("nb_ctc_loss: target_lengths[%lld] is %lld, but the concatenated targets [%lld] have %lld left after the "
                          "sequences before it", (long long)b, (long long)tl[b], (long long)S, (long long)(S - pos));
            return -1;
        }
        off[b] = padded ? b * tg->stride[0] : pos * tg->stride[0];
        int64_t need = tl[b];
        for (int64_t k = 0; k < tl[b]; k++) {
            int64_t v = ctc_int_at(nb__data(tg), tg->dtype, off[b] + k * j->tst);
            if (v < 0 || v >= j->C || v == j->blank) {
                char where[128];
                if (padded) snprintf(where, sizeof where, "targets[%lld, %lld]", (long long)b, (long long)k);
                else snprintf(where, sizeof where, "targets[%lld] (sequence %lld's label %lld)", (long long)(pos + k), (long long)b, (long long)k);
                if (v == j->blank) nb__error("nb_ctc_loss: %s is the blank (%lld): targets hold labels only", where, (long long)v);
                else nb__error("nb_ctc_loss: %s is %lld, outside the %lld classes of log_probs", where, (long long)v, (long long)j->C);
                return -1;
            }
            if (k > 0 && v == ctc_int_at(nb__data(tg), tg->dtype, off[b] + (k - 1) * j->tst)) need++;
        }
        if (!padded) pos += tl[b];
        /* too few steps for the labels and the blanks that must separate repeats: p = 0 without a
           table (tl <= il from here on, so the table's size below is bounded by T (2 T + 1)) */
        feasible[b] = il[b] >= need;
        if (!feasible[b] || il[b] == 0) continue;
        int64_t L = 2 * tl[b] + 1, cells;
        if (__builtin_mul_overflow(il[b], L, &cells)) {
            nb__error("nb_ctc_loss: sequence %lld needs a %lld x %lld alignment table, more than memory can hold", (long long)b,
                      (long long)il[b], (long long)L);
            return -1;
        }
        if (L > max_L) max_L = L;
        if (cells > max_cells) max_cells = cells;
    }
    j->il = il;
    j->tl = tl;
    j->off = off;
    j->feasible = feasible;
    /* per thread: alpha (two rows, or the table), beta's two rows and a gradient row */
    int64_t need_work;
    bool over = j->backward ? __builtin_add_overflow(max_cells, 2 * max_L + j->C, &need_work) : (need_work = 2 * max_L, false);
    if (over || (uint64_t)need_work > SIZE_MAX / sizeof(double)) {
        nb__error("nb_ctc_loss: the alignment tables (%lld values) are more than memory can hold", (long long)max_cells);
        return -1;
    }
    *work_slot = (size_t)need_work;
    *labels_slot = (size_t)max_L;
    return 0;
}

/* in: log_probs [T, N, C], targets, input_lengths, target_lengths (and the gradient [N] for the
   backward); i[0] the blank, i[1] zero_infinity. */
nb_ctc_job nb__cpu_ctc_job(nb_tensor *out, nb_tensor *const *in, const nb_op_args *args, bool backward) {
    const nb_tensor *lp = in[0];
    ctc_job j = { .lp = nb__data(lp), .dt = lp->dtype, .tg = nb__data(in[1]), .tdt = in[1]->dtype, .out = nb__data(out),
                  .T = lp->shape.dim[0], .N = lp->shape.dim[1], .C = lp->shape.dim[2], .blank = args->i[0],
                  .zero_inf = args->i[1] != 0, .backward = backward };
    for (int d = 0; d < 3; d++) j.lst[d] = lp->stride[d];
    if (backward) {
        j.g = nb__data(in[4]);
        j.gst = in[4]->stride[0];
    }
    return j;
}

static int run(bool backward, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    ctc_job j = nb__cpu_ctc_job(out, in, args, backward);
    if (j.N == 0) return 0;
    int64_t *meta = malloc((size_t)j.N * (3 * sizeof(int64_t) + 1));
    if (!meta) {
        nb__error("nb_ctc_loss: out of memory for the lengths of %lld sequences", (long long)j.N);
        return -1;
    }
    size_t work_slot, labels_slot;
    if (nb__cpu_ctc_prepare(in, &j, meta, &work_slot, &labels_slot) < 0) {
        free(meta);
        return -1;
    }
    /* one sequence is a serial recursion over its steps and states: threads take whole sequences */
    double work_estimate = (double)j.T * (double)j.N * (double)(j.C + (int64_t)labels_slot);
    int threads = work_estimate >= NB_PARALLEL_GRAIN && j.N > 1 ? nb__threads() : 1;
    if (threads < 1) threads = 1;
    if (threads > j.N) threads = (int)j.N;
    j.work_slot = work_slot ? work_slot : 1;
    j.labels_slot = labels_slot ? labels_slot : 1;
    int rc = 0;
    if (j.work_slot > SIZE_MAX / sizeof(double) / (size_t)threads) j.work = NULL;
    else {
        j.work = malloc(j.work_slot * sizeof(double) * (size_t)threads);
        j.labels = malloc(j.labels_slot * sizeof(int64_t) * (size_t)threads);
    }
    if (!j.work || !j.labels) {
        nb__error("nb_ctc_loss: out of memory for the alignment tables (%d x %zu values)", threads, j.work_slot);
        rc = -1;
    } else nb__parallel_for(threads, j.N, sequence_range, &j);
    free(j.work);
    free(j.labels);
    free(meta);
    return rc;
}

int nb__cpu_ctc_loss(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run(false, out, in, args);
}

int nb__cpu_ctc_loss_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return run(true, out, in, args);
}
