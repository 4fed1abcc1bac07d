/* Writes docs/ops.md from the op table itself: each op, its dtypes, the backends that run
   it and whether it has a backward, so coverage is visible before a kernel is missed. */
#include "../src/ops/ops_impl.h"
#include <stdio.h>

/* The composite public functions of the breadth issue: what each is built from, and so where it
   runs and how its gradient flows. Kept here beside the generator so the page stays one page. */
static const struct { const char *fn, *from, *backward; } composites[] = {
    { "nb_logical_and/or/xor/not", "ne, mul (and), add (or), eq", "not differentiable" },
    { "nb_isnan, nb_isinf, nb_isfinite", "ne(x, x); eq(abs(x), inf); eq(x - x, 0)", "not differentiable" },
    { "nb_nan_to_num", "where", "yes: passes where x is finite" },
    { "nb_masked_fill", "where", "yes" },
    { "nb_masked_select", "the mask read on the host, index_select", "yes (index_add)" },
    { "nb_index, nb_index_put", "the index / index_put primitives; a bool mask read on the host into i64 indices", "yes (each other)" },
    { "nb_masked_scatter", "expand, the mask read on the host, reshape, slice, index_put", "yes" },
    { "nb_any, nb_all", "ne/eq, sum, gt/eq", "not differentiable" },
    { "nb_cumsum, nb_cumprod", "the cumsum / cumprod primitives", "yes (cumprod's exact where x has zeros)" },
    { "nb_prod", "cumprod, slice", "yes, exact where x has zeros" },
    { "nb_amax, nb_amin", "max/min, eq, where, sum", "yes: shared evenly among ties" },
    { "nb_std", "var, sqrt", "yes" },
    { "nb_norm, nb_norm_all", "abs, pow_scalar, sum, amax/amin, where", "yes: 0 where the norm is 0" },
    { "nb_argsort", "the argsort primitive (stable)", "not differentiable" },
    { "nb_sort, nb_topk", "argsort, slice, gather", "yes (scatter_add)" },
    { "nb_flip", "index_select", "yes" },
    { "nb_roll", "slice, cat", "yes" },
    { "nb_repeat, nb_tile", "view, expand, copy", "yes (sum)" },
    { "nb_split, nb_chunk", "slice (views)", "yes" },
    { "nb_pad", "constant: cat, full, slice; reflect, replicate, circular: index_select", "yes" },
    { "nb_tril, nb_triu", "arange, sub, le/ge, where", "yes" },
    { "nb_diagonal", "permute, reshape, slice", "yes" },
    { "nb_einsum", "diagonal, squeeze, sum, permute, reshape, matmul (mul when nothing is contracted); 3+ operands pairwise, the smallest result first (greedy)", "yes" },
    { "nb_one_hot", "arange, eq, cast", "not differentiable" },
    { "nb_eye, nb_linspace", "arange, eq, cast; host values", "not differentiable" },
    { "nb_randint, nb_randperm, nb_bernoulli, nb_multinomial", "rand, floor, argsort, lt, cumsum, le", "not differentiable" },
    { "nb_ctc_loss", "the ctc_loss primitive (one loss per sequence), then sum, or mean of the losses over their target lengths (cast, clamp, div)", "yes: ctc_loss_backward, not twice" },
};

/* Where a public function knowingly gives something other than PyTorch 1.13 (tests/torch_ref.py
   compares everything else): what torch does, what nabla does, and why. */
static const struct { const char *fn, *torch, *nabla; } deviations[] = {
    { "nb_pow, nb_pow_scalar on i64", "i64 result, wrapping on overflow (3^40 gives -6289078614652622815)",
      "f32 result (3^40 gives 1.2157665e19): the power is computed in floats" },
    { "nb_clamp with lo > hi", "every element is hi", "an error naming both bounds" },
    { "nb_mean (and nb_var, nb_std) of i64", "an error (mean needs a float input)", "the f32 mean" },
    { "nb_cast of NaN, +-inf or out-of-range floats to i64", "INT64_MIN for all of them (x86)",
      "NaN gives 0; the others saturate to INT64_MIN or INT64_MAX" },
    { "nb_roll by INT64_MIN", "shifts by +2^63, not -2^63 (the shift's negation overflows): roll(arange(5), -2^63) is [2, 3, 4, 0, 1]",
      "shifts by INT64_MIN modulo the axis: [3, 4, 0, 1, 2]" },
};

int main(void) {
    printf("# nabla ops\n\n");
    printf("Generated from the op table (`src/ops/ops.def`) by `tools/gen_ops_doc`; do not edit by hand.\n");
    printf("Run `cmake --build build --target ops_doc` after changing the table. Public functions built\n");
    printf("from these primitives (nb_mean, nb_var, nb_logsumexp, nb_linear, nb_stack, nb_embedding, ...)\n");
    printf("run wherever their primitives run. f16/bf16 inputs of computing ops are computed in f32.\n\n");
    /* one column per backend built into every configuration: the page must not depend on the
       build (the cuda backend, in builds with CUDA, is described in docs/cuda.md) */
    const nb_backend *backends[NB_EXT + 1];
    int nb = 0;
    for (int t = NB_CPU; t <= NB_EXT; t++)
        if (t != NB_CUDA && nb__backend_get((nb_device_type)t)) backends[nb++] = nb__backend_get((nb_device_type)t);
    printf("| op | inputs | dtypes |");
    for (int b = 0; b < nb; b++) printf(" %s |", backends[b]->name);
    printf(" backward | kind |\n|---|---|---|");
    for (int b = 0; b < nb; b++) printf("---|");
    printf("---|---|\n");
    for (int op = 0; op < NB_OP_COUNT; op++) {
        const nb_op_def *d = &nb__ops[op];
        char dtypes[128] = "";
        size_t n = 0;
        for (int t = 0; t < NB_DTYPE_COUNT; t++)
            if (d->dtypes & NB_T(t)) n += (size_t)snprintf(dtypes + n, sizeof dtypes - n, n ? ", %s" : "%s", nb_dtype_name((nb_dtype)t));
        const char *kind = d->flags & NB_F_VIEW ? "view" : d->flags & NB_F_DEVICE ? "copy between devices"
                         : d->flags & NB_F_CREATE ? "creation" : d->flags & NB_F_INPLACE ? "in place" : "compute";
        const char *bwd = d->backward ? "yes" : (d->flags & (NB_F_NONDIFF | NB_F_CREATE)) ? "not differentiable" : "no";
        char inputs[16];
        if (d->nin < 0) snprintf(inputs, sizeof inputs, "any");
        else snprintf(inputs, sizeof inputs, "%d", d->nin);
        printf("| `%s` | %s | %s |", d->name, inputs, dtypes);
        /* views and copies need no kernel: every backend runs them */
        for (int b = 0; b < nb; b++)
            printf(" %s |", d->flags & (NB_F_VIEW | NB_F_DEVICE) ? "(no kernel)" : backends[b]->kernels[op] ? "yes" : "no");
        printf(" %s | %s |\n", bwd, kind);
    }
    printf("\nBackends built: ");
    for (int b = 0; b < nb; b++) printf(b ? ", %s" : "%s", backends[b]->name);
    printf(". The CUDA backend, in a build with CUDA, is described in docs/cuda.md.\n");
    printf("\n## Composite ops\n\nPublic functions made of the primitives above: they run on every backend that runs\n"
           "those, and differentiate through them.\n\n| function | built from | backward |\n|---|---|---|\n");
    for (size_t i = 0; i < sizeof composites / sizeof composites[0]; i++)
        printf("| `%s` | %s | %s |\n", composites[i].fn, composites[i].from, composites[i].backward);
    printf("\n## Where nabla differs from PyTorch\n\nEverything else is held to PyTorch 1.13's results (tests/torch_ref.py):"
           " a NaN clamp bound gives NaN,\nlinspace with one step gives its start, logsumexp over an empty axis gives -inf, integers wrap.\n\n"
           "| function | PyTorch 1.13 | nabla |\n|---|---|---|\n");
    for (size_t i = 0; i < sizeof deviations / sizeof deviations[0]; i++)
        printf("| `%s` | %s | %s |\n", deviations[i].fn, deviations[i].torch, deviations[i].nabla);
    return 0;
}
