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
#include "../prep.h"
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

static int run(bool backward, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    ctc_job j = nb__ctc_job(out, in, args, backward);
    if (j.N == 0) return 0;
    int64_t *meta = malloc((size_t)j.N * (3 * sizeof(int64_t) + 1));
    if (!meta) {
        nb__error("nb_ctc_loss: out of memory for the lengths of %lld sequences", (long long)j.N);
        return -1;
    }
    size_t work_slot, labels_slot;
    if (nb__ctc_prepare(in, &j, meta, &work_slot, &labels_slot) < 0) {
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
