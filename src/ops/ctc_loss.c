/* The CTC loss: one op for the per-sequence losses and one for their gradient (the alpha and
   beta recursions are serial along time, so no composition of other ops runs them at a useful
   speed), with the reduction composed from ops as torch composes it. The kernels check the
   lengths and labels, which live in tensors that only a kernel may read; shapes and dtypes are
   checked here first, so a wrong call is named by its argument. */
#include "ops_impl.h"
#include "nabla/functional.h"
#include <math.h>
#include <string.h>

static bool is_index_dtype(nb_dtype d) { return d == NB_I64 || d == NB_I32; }

/* ctc_loss(log_probs [T, N, C], targets [N, S] or [M], input_lengths, target_lengths ([N], or
   0-d where N is 1)) -> [N]; ctc_loss_backward(the same, g [N]) -> [T, N, C]. i[0]: the blank. */
int nb__infer_ctc_loss(nb_op_id op, nb_tensor *const *in, int nin, nb_op_args *args, nb_meta *out) {
    const char *fn = nb__ops[op].name;
    nb_tensor *lp = in[0], *tg = in[1];
    char d[200], d2[200];
    if (lp->shape.ndim != 3) {
        nb__error("nb_%s: expected log_probs [T, N, C], got %s", fn, nb__describe(lp, d, sizeof d));
        return -1;
    }
    int64_t n = lp->shape.dim[1], c = lp->shape.dim[2];
    if (args->i[0] < 0 || args->i[0] >= c) {
        nb__error("nb_%s: blank %lld is outside the %lld classes of log_probs %s", fn, (long long)args->i[0], (long long)c,
                  nb__describe(lp, d, sizeof d));
        return -1;
    }
    if (!is_index_dtype(tg->dtype) || tg->shape.ndim < 1 || tg->shape.ndim > 2 || (tg->shape.ndim == 2 && tg->shape.dim[0] != n)) {
        nb__error("nb_%s: targets must be i64 or i32, [N, S] padded or 1-D concatenated, with N = %lld for log_probs %s; got %s", fn,
                  (long long)n, nb__describe(lp, d, sizeof d), nb__describe(tg, d2, sizeof d2));
        return -1;
    }
    static const char *const names[2] = { "input_lengths", "target_lengths" };
    for (int k = 0; k < 2; k++) {
        nb_tensor *len = in[2 + k];
        if (!is_index_dtype(len->dtype) || len->shape.ndim > 1 || len->numel != n) {
            nb__error("nb_%s: %s must hold one i64 or i32 length per sequence, [%lld] for log_probs %s; got %s", fn, names[k],
                      (long long)n, nb__describe(lp, d, sizeof d), nb__describe(len, d2, sizeof d2));
            return -1;
        }
    }
    out->dtype = lp->dtype;
    if (nin == 5) {
        nb_tensor *g = in[4];
        if (g->shape.ndim != 1 || g->shape.dim[0] != n || g->dtype != lp->dtype) {
            nb__error("nb_%s: the gradient %s does not match the [%lld] losses of log_probs %s", fn, nb__describe(g, d2, sizeof d2),
                      (long long)n, nb__describe(lp, d, sizeof d));
            return -1;
        }
        out->shape = lp->shape;
    } else out->shape = (nb_shape){ 1, { n } };
    return 0;
}

/* The kernel's gradient of the per-sequence losses; it is not written with ops, so it cannot be
   differentiated again (nor can torch's). */
int nb__bwd_ctc_loss(nb_node *node, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *lp = node->inputs[0];
    if (!lp->requires_grad) return 0;
    if (nb_is_grad_enabled() && (g->requires_grad || lp->requires_grad)) {
        nb__error("nb_ctc_loss: its gradient cannot be differentiated again (double backward through the CTC loss is not "
                  "supported)");
        return -1;
    }
    if (g->dtype != lp->dtype) g = nb_cast(g, lp->dtype);
    nb_tensor *in[5] = { lp, node->inputs[1], node->inputs[2], node->inputs[3], g };
    gin[0] = nb__call(NB_OP_CTC_LOSS_BACKWARD, in, 5, &node->args);
    return 0;
}

/* Whether t is there and an i64 or i32 tensor of at most one axis with n elements (unbatched: 0-d or [1]). */
static bool lengths_ok(const char *fn, const char *name, nb_tensor *t, int64_t n, nb_tensor *lp) {
    char d[200], dl[200];
    if (!is_index_dtype(nb_dtype_of(t)) || nb_ndim(t) > 1 || nb_numel(t) != n) {
        nb__error("%s: %s must hold one i64 or i32 length per sequence, %s for log_probs %s; got %s", fn, name,
                  nb_ndim(lp) == 2 ? "0-d or [1]" : n == 1 ? "[1]" : "[N]", nb__describe(lp, dl, sizeof dl), nb__describe(t, d, sizeof d));
        return false;
    }
    return true;
}

nb_tensor *nb_ctc_loss(nb_tensor *log_probs, nb_tensor *targets, nb_tensor *input_lengths, nb_tensor *target_lengths,
                       nb_ctc_opts opts) {
    const char *fn = "nb_ctc_loss";
    nb_tensor *args[4] = { log_probs, targets, input_lengths, target_lengths };
    static const char *const names[4] = { "log_probs", "targets", "input_lengths", "target_lengths" };
    for (int i = 0; i < 4; i++)
        if (!args[i]) {
            if (!nb__has_error()) nb__error("%s: %s is NULL", fn, names[i]);
            return NULL;
        }
    char d[200], d2[200];
    int nd = nb_ndim(log_probs);
    if (!nb__is_float(nb_dtype_of(log_probs)) || (nd != 3 && nd != 2)) {
        nb__error("%s: expected floating-point log_probs [T, N, C] or unbatched [T, C], got %s", fn,
                  nb__describe(log_probs, d, sizeof d));
        return NULL;
    }
    bool batched = nd == 3;
    int64_t n = batched ? nb_dim(log_probs, 1) : 1, c = nb_dim(log_probs, -1);
    int tnd = nb_ndim(targets);
    if (!is_index_dtype(nb_dtype_of(targets)) || (batched ? tnd < 1 || tnd > 2 || (tnd == 2 && nb_dim(targets, 0) != n) : tnd != 1)) {
        nb__error("%s: targets must be i64 or i32, %s, for log_probs %s; got %s", fn,
                  batched ? "padded [N, S] or the N targets concatenated (1-D)" : "[S] (unbatched)",
                  nb__describe(log_probs, d, sizeof d), nb__describe(targets, d2, sizeof d2));
        return NULL;
    }
    if (!lengths_ok(fn, "input_lengths", input_lengths, n, log_probs) || !lengths_ok(fn, "target_lengths", target_lengths, n, log_probs))
        return NULL;
    nb_reduction r = opts.reduction;
    if (!nb__reduction_ok(fn, r)) return NULL;
    if (r == NB_REDUCTION_BATCHMEAN) {
        nb__error("%s: invalid reduction %d (expected mean, sum or none)", fn, (int)r);
        return NULL;
    }
    if (opts.blank < 0 || opts.blank >= c) {
        nb__error("%s: blank %lld is outside the %lld classes of log_probs %s", fn, (long long)opts.blank, (long long)c,
                  nb__describe(log_probs, d, sizeof d));
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor *in[4] = { batched ? log_probs : nb_unsqueeze(log_probs, 1), targets,
                         batched ? input_lengths : nb_reshape(input_lengths, NB_SHAPE(1)),
                         batched ? target_lengths : nb_reshape(target_lengths, NB_SHAPE(1)) };
    nb_tensor *loss = nb__call(NB_OP_CTC_LOSS, in, 4, &(nb_op_args){ .i = { opts.blank, opts.zero_infinity } });
    if (r == NB_REDUCTION_SUM) result_ = nb_sum_all(loss);
    else if (r == NB_REDUCTION_NONE) result_ = batched ? loss : nb_reshape(loss, NB_SHAPE());
    else /* torch: (loss / target_lengths.clamp_min(1)).mean() */
        result_ = nb_mean_all(nb_div(loss, nb_clamp(nb_cast(in[3], nb_dtype_of(log_probs)), 1, INFINITY)));
    COMPOSITE_END
}
