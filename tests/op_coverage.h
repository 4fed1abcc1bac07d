/* Which ops of the table a PyTorch reference test reached: the tests that compare nabla with
   torch record every primitive op dispatched while their compared results are made, and write
   the op names to the file NABLA_OP_COVERAGE names; test_torch_coverage then requires every op
   of the table in the union (tests/torch_coverage.c). Needs the library linked statically. */
#ifndef NABLA_TEST_OP_COVERAGE_H
#define NABLA_TEST_OP_COVERAGE_H

#include "../src/ops/ops_impl.h"
#include <stdio.h>
#include <stdlib.h>

static bool op_coverage_hit[NB_OP_COUNT];

static void op_coverage_record(void *ctx, nb_op_id op, nb_tensor *const *in, int nin, const nb_op_args *args,
                               nb_tensor *out) {
    (void)ctx, (void)in, (void)nin, (void)args, (void)out;
    op_coverage_hit[op] = true;
}

/* Records the ops dispatched on this thread from here until op_coverage_end. */
static inline void op_coverage_begin(void) { nb__trace_set(op_coverage_record, NULL); }
/* Stops recording. */
static inline void op_coverage_end(void) { nb__trace_set(NULL, NULL); }

/* Writes the names of the ops recorded, one a line, to $NABLA_OP_COVERAGE (nothing when unset);
   0, or -1 when the file cannot be written. */
static inline int op_coverage_write(void) {
    const char *path = getenv("NABLA_OP_COVERAGE");
    if (!path) return 0;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write the op coverage to %s\n", path);
        return -1;
    }
    for (int op = 0; op < NB_OP_COUNT; op++)
        if (op_coverage_hit[op]) fprintf(f, "%s\n", nb__ops[op].name);
    return fclose(f) == 0 ? 0 : -1;
}

#endif
