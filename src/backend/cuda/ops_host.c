/* The CUDA backend's ops that run on the host for now, through the cpu's kernels on host copies
   (nb__cu_on_host: two waits for the device and two copies): the CTC loss and its gradient
   (dynamic programmes over time, with the cpu's checks of lengths and labels). A device kernel
   for them is still to be written; their results are the cpu's exactly meanwhile. */
#include "ops_cuda.h"
#include "ops_util.h"

int nb__cuda_ctc_loss(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    return nb__cu_on_host("ctc_loss", NB_OP_CTC_LOSS, out, in, nin, args);
}

int nb__cuda_ctc_loss_backward(nb_tensor *out, nb_tensor *const *in, int nin, const nb_op_args *args) {
    return nb__cu_on_host("ctc_loss_backward", NB_OP_CTC_LOSS_BACKWARD, out, in, nin, args);
}
