/* CUDA kernel of the CTC loss and its gradient: one thread per sequence runs the cpu's own
   recursions (src/backend/ctc_recursion.h) in double, over scratch memory of its own, so a
   sequence's result is the cpu's up to the last bits of the device's exp and log. */
#include "k_common.cuh"
#include "../ctc_recursion.h"

static __global__ void ctc_kernel(nb_ctc_job j) {
    NBC_GRID_LOOP(b, j.N) nb__ctc_sequence(&j, b, j.work + b * (int64_t)j.work_slot, j.labels + b * (int64_t)j.labels_slot);
}

extern "C" int nb__k_ctc(const struct nb_ctc_job *j) {
    if (j->N == 0) return 0;
    /* a sequence's recursion is long and serial: small blocks spread the sequences over the SMs */
    unsigned blocks = (unsigned)((j->N + 31) / 32);
    ctc_kernel<<<blocks, 32, 0, nb__k_queue()>>>(*j);
    return nb__k_launched();
}
