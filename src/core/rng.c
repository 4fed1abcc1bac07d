/* The one random generator: Philox4x32-10, counter-based, so a value depends only on the seed
   and its counter, never on which thread draws it or when. */
#include "core_impl.h"
#include <pthread.h>

static uint64_t rng_seed = 0;
static uint64_t rng_offset = 0;
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;

void nb__philox(uint64_t seed, uint64_t counter, uint32_t out[4]) { nb__philox_block(seed, counter, out); }

void nb__rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset) {
    pthread_mutex_lock(&rng_lock);
    *seed = rng_seed;
    *offset = rng_offset;
    rng_offset += (n + 3) / 4; /* each counter gives four 32-bit words */
    pthread_mutex_unlock(&rng_lock);
}

void nb_manual_seed(uint64_t seed) { nb_rng_set_state(seed, 0); }

void nb_rng_get_state(uint64_t *seed, uint64_t *offset) {
    pthread_mutex_lock(&rng_lock);
    if (seed) *seed = rng_seed;
    if (offset) *offset = rng_offset;
    pthread_mutex_unlock(&rng_lock);
}

void nb_rng_set_state(uint64_t seed, uint64_t offset) {
    pthread_mutex_lock(&rng_lock);
    rng_seed = seed;
    rng_offset = offset;
    pthread_mutex_unlock(&rng_lock);
}
