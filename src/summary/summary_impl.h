/* Internal to src/summary: histogram building and tensor-to-values helpers shared by the writer
   and the run-health helpers (src/model/health.c). */
#ifndef NB_SUMMARY_IMPL_H
#define NB_SUMMARY_IMPL_H

#include "nabla/summary.h"

/* A histogram as TensorBoard's HistogramProto holds it: n (limit, count) buckets. */
typedef struct nb_histo {
    double min, max, num, sum, sum_squares;
    double *limit, *count;
    int n;
} nb_histo;

/* TensorFlow's default bucket limits (borrowed, built once); sets *n. */
const double *nb__summary_bucket_limits(int *n);
/* Builds the histogram of the finite values among n; 0, or -1 when memory runs out. */
int nb__summary_histo_build(const double *values, int64_t n, nb_histo *h);
/* Frees a histogram's arrays. */
void nb__summary_histo_free(nb_histo *h);
/* The elements of t as a malloc'd array of doubles (any dtype, any device); NULL with an error
   naming fn. */
double *nb__summary_values_of(nb_tensor *t, int64_t *n, const char *fn);

#endif
