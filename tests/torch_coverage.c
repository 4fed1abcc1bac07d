/* Every op of the table has a PyTorch reference: the union of the ops that test_ops_torch,
   test_conv_torch and test_nn_torch dispatched while making results they compared with torch
   (the files named on the command line, written through tests/op_coverage.h) must hold every
   op, except the few listed below whose values torch cannot give, each with the test that
   checks it instead.

   Usage: torch_coverage FILE... */
#include "../src/ops/ops_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *op, *instead;
} exempt[] = {
    { "empty", "uninitialised by definition; its shape and dtype: test_core" },
    { "rand", "Philox streams, not torch's generator: moments and determinism in test_core" },
    { "randn", "Philox streams, not torch's generator: moments and determinism in test_core" },
    { "to", "a copy between devices: test_backend and test_backend_ops" },
    { "max_pool2d_indices", "runs only in max pooling's double backward: finite differences in test_backend_ops" },
    { "host_call", "runs the program's own function: test_backend_ops, test_compile and test_dist_ddp (graph-mode DDP)" },
};

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n", argv[0]);
        return 2;
    }
    bool hit[NB_OP_COUNT] = { false };
    for (int a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "r");
        if (!f) {
            fprintf(stderr, "torch_coverage: cannot read %s (the PyTorch test that writes it did not run)\n", argv[a]);
            return 1;
        }
        char line[128];
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            for (int op = 0; op < NB_OP_COUNT; op++)
                if (strcmp(nb__ops[op].name, line) == 0) hit[op] = true;
        }
        fclose(f);
    }
    int missing = 0, covered = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        bool ex = false;
        for (size_t k = 0; k < sizeof exempt / sizeof exempt[0]; k++) ex = ex || strcmp(exempt[k].op, nb__ops[op].name) == 0;
        if (hit[op]) covered++;
        else if (!ex) {
            printf("op %s: no PyTorch reference case reaches it (add one to tests/torch_ref.py, conv_ref.py or nn_ref.py)\n",
                   nb__ops[op].name);
            missing++;
        }
    }
    printf("%d of %d ops reached by PyTorch reference cases, %zu checked elsewhere, %d missing\n", covered, NB_OP_COUNT,
           sizeof exempt / sizeof exempt[0], missing);
    return missing ? 1 : 0;
}
