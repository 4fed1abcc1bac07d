/* nabla's thread pool (threadpool.c): the one way kernels run a loop on several threads. */
#ifndef NB_THREADPOOL_H
#define NB_THREADPOOL_H
#include <stdint.h>

/* A loop body: runs iterations [begin, end) as participant `slot` (0 <= slot < the threads
   asked for; one participant runs one range at a time, so per-slot scratch is safe). */
typedef void (*nb_range_fn)(void *ctx, int64_t begin, int64_t end, int slot);

/* Runs fn over [0, n) on up to `threads` participants, the caller among them, and returns when
   every iteration has run. A loop started inside a loop, or while another thread's loop holds the
   pool, runs on its caller alone. Each iteration must not depend on which participant runs it. */
void nb__parallel_for(int threads, int64_t n, nb_range_fn fn, void *ctx);

/* Workers started so far (for tests and the stats). */
int nb__pool_workers(void);

#endif
