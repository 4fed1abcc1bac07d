/* Under ASan the caching allocator's freed blocks must be poisoned: this program reads a released tensor's data through a kept pointer and must be stopped with a use-after-poison report (the test expects it to fail). */
#include <nabla.h>
#include <stdio.h>

int main(void) {
    nb_tensor *t = nb_full(NB_SHAPE(1000), 3.0, NB_F32);
    if (!t) {
        fprintf(stderr, "nb_full failed: %s\n", nb_error() ? nb_error() : "?");
        return 0; /* exit 0: the test wants ASan's report, not this */
    }
    volatile float *p = nb_data_ptr(t);
    nb_release(t); /* the storage goes back to the cache's free list */
    float v = p[10];
    /* Reaching here means the read went unseen: exit 0, which the test counts as a failure. */
    printf("read %g from a freed tensor without a report\n", (double)v);
    return 0;
}
