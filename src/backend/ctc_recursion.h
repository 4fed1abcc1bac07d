/* The CTC loss's recursions per sequence (Graves et al. 2006, torch's CPU kernel), in one copy
   for the cpu's kernel (src/backend/cpu/ctc.c, which reads and checks the lengths and labels)
   and the CUDA backend's, which runs them one sequence a thread. Plain C that nvcc also reads. */
#ifndef NB_CTC_RECURSION_H
#define NB_CTC_RECURSION_H

#include "nabla/core.h"
#include "../core/portable.h"
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* One call of the loss or its gradient: pointers into log_probs (T, N, C), the upstream gradient
   [N] (backward), the targets and the dense output, with the per-sequence lengths, label offsets
   and feasibility the host read and checked, and the scratch sizes. */
typedef struct nb_ctc_job {
    const char *lp, *g, *tg;
    nb_dtype dt, tdt;
    int64_t lst[3], gst, tst; /* element strides: log_probs (T, N, C), the gradient [N], within a target */
    char *out;
    int64_t T, N, C, blank;
    bool zero_inf, backward;
    const int64_t *il, *tl, *off; /* per sequence: the lengths and the element offset of its first label */
    const unsigned char *feasible; /* il >= tl + the repeats that need a blank between them */
    double *work;
    int64_t *labels;
    size_t work_slot, labels_slot; /* per thread (per sequence on the device) */
} nb_ctc_job;

/* log_probs[t, b, c] as a double. */
NB_PORTABLE double ctc_lp_at(const nb_ctc_job *j, int64_t t, int64_t b, int64_t c) {
    int64_t i = t * j->lst[0] + b * j->lst[1] + c * j->lst[2];
    return j->dt == NB_F32 ? (double)((const float *)j->lp)[i] : ((const double *)j->lp)[i];
}

/* Element i of an i64 or i32 array (read as integers: a label near 2^63 is not rounded through a double). */
NB_PORTABLE int64_t ctc_int_at(const void *p, nb_dtype dt, int64_t i) {
    return dt == NB_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

/* Output element i (dense, log_probs' dtype) set to v. */
NB_PORTABLE void ctc_store(const nb_ctc_job *j, int64_t i, double v) {
    if (j->dt == NB_F32) ((float *)j->out)[i] = (float)v;
    else ((double *)j->out)[i] = v;
}

/* log(e^a + e^b + e^c) as torch writes it (a max of -inf taken as 0, so -inf - -inf never occurs). */
NB_PORTABLE double ctc_log_add3(double a, double b, double c) {
    double m = a;
    if (b > m) m = b;
    if (c > m) m = c;
    if (m == -INFINITY) m = 0;
    return log(exp(a - m) + exp(b - m) + exp(c - m)) + m;
}

/* The negative log likelihood of sequence b, whose L = 2 tl + 1 states carry labels lab, over its
   first il > 0 steps. With table, alpha keeps every step's row (il x L, for the backward); else
   two rows alternate. */
NB_PORTABLE double ctc_sequence_nll(const nb_ctc_job *j, int64_t b, const int64_t *lab, int64_t L, int64_t il, double *alpha, bool table) {
    double *prev = alpha;
    for (int64_t s = 0; s < L; s++) prev[s] = -INFINITY;
    prev[0] = ctc_lp_at(j, 0, b, j->blank);
    if (L > 1) prev[1] = ctc_lp_at(j, 0, b, lab[1]);
    for (int64_t t = 1; t < il; t++) {
        double *cur = alpha + (table ? t : t & 1) * L;
        for (int64_t s = 0; s < L; s++) {
            double a2 = s > 0 ? prev[s - 1] : -INFINITY;
            double a3 = s > 1 && lab[s - 2] != lab[s] ? prev[s - 2] : -INFINITY; /* skip a blank between two labels */
            cur[s] = ctc_log_add3(prev[s], a2, a3) + ctc_lp_at(j, t, b, lab[s]);
        }
        prev = cur;
    }
    if (L == 1) return -prev[0]; /* an empty target: blanks only */
    return -ctc_log_add3(prev[L - 1], prev[L - 2], -INFINITY);
}

/* d loss / d log_probs of step t: row[c] holds log sum alpha beta over the states labelled c. */
NB_PORTABLE void ctc_gradient_row(const nb_ctc_job *j, int64_t t, int64_t b, const double *row, double nll, double gr) {
    for (int64_t c = 0; c < j->C; c++) {
        double v = row[c] == -INFINITY ? 0 : -exp(row[c] + nll - ctc_lp_at(j, t, b, c));
        ctc_store(j, (t * j->N + b) * j->C + c, v * gr);
    }
}

/* Sequence b's gradient rows: alpha recomputed into work as a table, then beta backwards. */
NB_PORTABLE void ctc_sequence_backward(const nb_ctc_job *j, int64_t b, const int64_t *lab, int64_t L, int64_t il, double *work) {
    double gr = j->dt == NB_F32 ? (double)((const float *)j->g)[b * j->gst] : ((const double *)j->g)[b * j->gst];
    for (int64_t t = il; t < j->T; t++) /* steps past the input's length take no part */
        for (int64_t c = 0; c < j->C; c++) ctc_store(j, (t * j->N + b) * j->C + c, 0);
    if (il == 0) return;
    double nll = j->feasible[b] ? ctc_sequence_nll(j, b, lab, L, il, work, true) : INFINITY;
    if (nll == INFINITY) { /* no alignment: torch's NaN, or 0 where zero_infinity dropped the loss */
        for (int64_t t = 0; t < il; t++)
            for (int64_t c = 0; c < j->C; c++) ctc_store(j, (t * j->N + b) * j->C + c, j->zero_inf ? 0 : NAN);
        return;
    }
    const double *alpha = work;
    double *next = work + il * L, *cur = next + L, *row = cur + L;
    /* the last step: beta starts in the final blank and the final label */
    int64_t t = il - 1;
    for (int64_t s = 0; s < L; s++) cur[s] = -INFINITY;
    for (int64_t c = 0; c < j->C; c++) row[c] = -INFINITY;
    cur[L - 1] = ctc_lp_at(j, t, b, j->blank);
    row[j->blank] = alpha[t * L + L - 1] + cur[L - 1];
    if (L > 1) {
        cur[L - 2] = ctc_lp_at(j, t, b, lab[L - 2]);
        row[lab[L - 2]] = alpha[t * L + L - 2] + cur[L - 2]; /* a label, never the blank: no sum needed */
    }
    ctc_gradient_row(j, t, b, row, nll, gr);
    for (t = il - 2; t >= 0; t--) {
        double *swap = next;
        next = cur;
        cur = swap;
        for (int64_t c = 0; c < j->C; c++) row[c] = -INFINITY;
        for (int64_t s = L - 1; s >= 0; s--) {
            double b2 = s < L - 1 ? next[s + 1] : -INFINITY;
            double b3 = s < L - 2 && lab[s + 2] != lab[s] ? next[s + 2] : -INFINITY;
            cur[s] = ctc_log_add3(next[s], b2, b3) + ctc_lp_at(j, t, b, lab[s]);
            double ab = alpha[t * L + s] + cur[s], *r = &row[lab[s]];
            if (*r == -INFINITY) *r = ab;
            else {
                double m = *r > ab ? *r : ab;
                *r = log(exp(*r - m) + exp(ab - m)) + m;
            }
        }
        ctc_gradient_row(j, t, b, row, nll, gr);
    }
}

/* Sequence b's loss (or, for the backward, its gradient rows), with the scratch work
   (work_slot values) and lab (labels_slot labels) of the thread that runs it. */
NB_PORTABLE void nb__ctc_sequence(const nb_ctc_job *j, int64_t b, double *work, int64_t *lab) {
    int64_t il = j->il[b], L = 2 * j->tl[b] + 1;
    if (j->feasible[b] && il > 0)
        for (int64_t s = 0; s < L; s++)
            lab[s] = s & 1 ? ctc_int_at(j->tg, j->tdt, j->off[b] + (s / 2) * j->tst) : j->blank;
    if (j->backward) {
        ctc_sequence_backward(j, b, lab, L, il, work);
        return;
    }
    double nll = il == 0 ? (j->tl[b] == 0 ? 0 : INFINITY) : j->feasible[b] ? ctc_sequence_nll(j, b, lab, L, il, work, false) : INFINITY;
    ctc_store(j, b, j->zero_inf && nll == INFINITY ? 0 : nll);
}

#endif
