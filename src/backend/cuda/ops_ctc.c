/* The CUDA backend's entry points of the CTC loss and its gradient (k_ctc.cu). The host reads
   the lengths and labels (small; a wait for the device) and checks them with the cpu's own
   nb__ctc_prepare, recording its errors; the device runs the recursions on log_probs where
   they lie. */
#include "ops_cuda.h"
#include "ops_util.h"
#include "../prep.h"
#include <stdlib.h>

/* in: log_probs [T, N, C], targets, input_lengths, target_lengths (the gradient [N] for the
   backward); args.i[0] the blank, i[1] zero_infinity */
static int ctc(const char *fn, bool backward, nb_tensor *out, nb_tensor *const *in, const nb_op_args *args) {
    nb_ctc_job j = nb__ctc_job(out, in, args, backward); /* log_probs, out, gradient: on the device */
    if (j.N == 0) return 0;
    nb_tensor *host[4] = { in[0], NULL, NULL, NULL }; /* the checks read inputs 1 to 3 */
    size_t meta_bytes = (size_t)j.N * (3 * sizeof(int64_t) + 1), work_slot = 0, labels_slot = 0;
    size_t work_bytes = 0, labels_bytes = 0, targets_bytes = 0;
    int64_t *meta = malloc(meta_bytes);
    void *meta_dev = NULL, *targets_dev = NULL, *work = NULL, *labels = NULL;
    int rc = -1;
    if (!meta) {
        nb__error("nb_%s: out of memory for the lengths of %lld sequences", fn, (long long)j.N);
        return -1;
    }
    int k = 1;
    for (; k < 4; k++)
        if (!(host[k] = nb__cu_to_host(fn, in[k]))) break;
    if (k < 4 || nb__ctc_prepare(host, &j, meta, &work_slot, &labels_slot) < 0) goto done;
    /* the device reads the targets as the checks read them: the dense copy (j's offsets and stride) */
    targets_bytes = (size_t)host[1]->numel * nb_dtype_size(host[1]->dtype);
    if (!(targets_dev = nb__cu_upload(fn, nb__data(host[1]), targets_bytes)) ||
        !(meta_dev = nb__cu_upload(fn, meta, meta_bytes)))
        goto done;
    j.tg = targets_dev;
    j.il = meta_dev;
    j.tl = j.il + j.N;
    j.off = j.il + 2 * j.N;
    j.feasible = (const unsigned char *)(j.il + 3 * j.N);
    j.work_slot = work_slot ? work_slot : 1;
    j.labels_slot = labels_slot ? labels_slot : 1;
    if (__builtin_mul_overflow(j.work_slot, (size_t)j.N * sizeof(double), &work_bytes) ||
        __builtin_mul_overflow(j.labels_slot, (size_t)j.N * sizeof(int64_t), &labels_bytes) ||
        !(work = nb__k_scratch_alloc(work_bytes)) || !(labels = nb__k_scratch_alloc(labels_bytes))) {
        nb__error("nb_%s: cuda: out of device memory for the alignment tables (%lld x %zu values)", fn, (long long)j.N,
                  j.work_slot);
        goto done;
    }
    j.work = work;
    j.labels = labels;
    rc = nb__cu_check(fn, nb__k_ctc(&j));
done: /* scratch goes back in stream order, behind the kernel that uses it */
    if (work) nb__k_scratch_free(work, work_bytes);
    if (labels) nb__k_scratch_free(labels, labels_bytes);
    nb__cu_scratch_free(meta_dev, meta_bytes);
    nb__cu_scratch_free(targets_dev, targets_bytes);
    for (int h = 1; h < k && h < 4; h++) nb_release(host[h]);
    free(meta);
    return rc;
}

int nb__cuda_ctc_loss(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return ctc("ctc_loss", false, out, in, args);
}

int nb__cuda_ctc_loss_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    (void)nin;
    return ctc("ctc_loss_backward", true, out, in, args);
}
