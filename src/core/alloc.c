/* A caching allocator: freed blocks go to per-size-class free lists and are handed out again,
   so a warm training loop makes no system allocation. Classes step by quarter powers of two. */
#include "core_impl.h"
#include <pthread.h>
#include <stdlib.h>

#define NB_CLASSES 256
#define NB_ALIGN 64

typedef struct free_block { struct free_block *next; } free_block;

static free_block *free_lists[NB_CLASSES];
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t held_bytes, used_bytes;
static uint64_t system_allocs;

/* Size class of a request and the class's block size: 64-byte steps up to 1 KiB, then
   four classes per power of two. */
static int size_class(size_t bytes, size_t *class_bytes) {
    if (bytes <= 1024) {
        size_t units = (bytes + NB_ALIGN - 1) / NB_ALIGN;
        if (units == 0) units = 1;
        *class_bytes = units * NB_ALIGN;
        return (int)units - 1; /* 0..15 */
    }
    int log2 = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^log2 < bytes <= 2^(log2+1) */
    size_t base = (size_t)1 << log2, quarter = base / 4;
    size_t step = (bytes - base + quarter - 1) / quarter; /* 1..4 */
    *class_bytes = base + step * quarter;
    int cls = 16 + (log2 - 10) * 4 + (int)step - 1;
    return cls < NB_CLASSES ? cls : -1;
}

void *nb__alloc(size_t bytes) {
    size_t class_bytes;
    int cls = size_class(bytes, &class_bytes);
    if (cls < 0) return NULL;
    pthread_mutex_lock(&alloc_lock);
    free_block *b = free_lists[cls];
    if (b) {
        free_lists[cls] = b->next;
        used_bytes += class_bytes;
        pthread_mutex_unlock(&alloc_lock);
        return b;
    }
    pthread_mutex_unlock(&alloc_lock);
    void *p = aligned_alloc(NB_ALIGN, class_bytes);
    if (!p) return NULL;
    pthread_mutex_lock(&alloc_lock);
    system_allocs++;
    held_bytes += class_bytes;
    used_bytes += class_bytes;
    pthread_mutex_unlock(&alloc_lock);
    return p;
}

void nb__free(void *p, size_t bytes) {
    if (!p) return;
    size_t class_bytes;
    int cls = size_class(bytes, &class_bytes);
    pthread_mutex_lock(&alloc_lock);
    free_block *b = p;
    b->next = free_lists[cls];
    free_lists[cls] = b;
    used_bytes -= class_bytes;
    pthread_mutex_unlock(&alloc_lock);
}

void nb_empty_cache(void) {
    pthread_mutex_lock(&alloc_lock);
    for (int c = 0; c < NB_CLASSES; c++) {
        free_block *b = free_lists[c];
        size_t class_bytes = 0;
        /* recover the class's size from a representative request */
        if (c < 16) class_bytes = (size_t)(c + 1) * NB_ALIGN;
        else {
            int log2 = 10 + (c - 16) / 4, step = (c - 16) % 4 + 1;
            size_t base = (size_t)1 << log2;
            class_bytes = base + (size_t)step * (base / 4);
        }
        while (b) {
            free_block *next = b->next;
            free(b);
            held_bytes -= class_bytes;
            b = next;
        }
        free_lists[c] = NULL;
    }
    pthread_mutex_unlock(&alloc_lock);
}

void nb_memory_stats(size_t *held, size_t *used, uint64_t *allocs) {
    pthread_mutex_lock(&alloc_lock);
    if (held) *held = held_bytes;
    if (used) *used = used_bytes;
    if (allocs) *allocs = system_allocs;
    pthread_mutex_unlock(&alloc_lock);
}
