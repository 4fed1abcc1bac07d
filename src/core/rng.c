/* The one random generator: Philox4x32-10, counter-based, so a value depends only on the seed
   and its counter, never on which thread draws it or when. */
#include "core_impl.h"
#include <pthread.h>

static uint64_t rng_seed = 0;
static uint64_t rng_offset = 0;
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;

void nb__philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

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
