/* The data pipeline's random draws, from keys alone (Philox): a sample's key, a uniform double,
   and a permutation. Datasets, transforms and the loader draw here, so a result depends on the key
   and never on the thread or the order that runs it. */
#include "data_impl.h"

uint64_t nb_data_key(uint64_t key, uint64_t a) {
    uint32_t w[4];
    nb__philox(key, a, w);
    return (uint64_t)w[0] | (uint64_t)w[1] << 32;
}

double nb_data_uniform(uint64_t key, uint64_t i) {
    uint32_t w[4];
    nb__philox(key, i, w);
    return (double)(((uint64_t)w[0] << 21) ^ (w[1] >> 11)) * (1.0 / 9007199254740992.0);
}

void nb__data_permutation(int64_t *order, int64_t n, uint64_t key) {
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(nb_data_key(key, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}
