/* A caching allocator: freed blocks go to per-size-class free lists and are handed out again,
   so a warm training loop makes no system allocation. Classes step by 64 bytes up to 1 KiB,
   then by quarter powers of two. Small blocks (tensor headers, graph nodes, tiny tensors) go
   through a per-thread cache first, so the hot path of a small op takes no lock. */
#include "core_impl.h"
#include <pthread.h>
#include <stdlib.h>

/* Under ASan a block on a free list is poisoned, so a use after free (a tensor read through a
   kept pointer, an optimizer stepping a freed module) is reported instead of reading a block
   that the cache may already have handed to someone else. A block handed out is unpoisoned only
   up to the bytes asked for, so an overrun into the size class's slack is reported too. The
   list link then lives in the block's last 8 bytes and stays unpoisoned while listed: LeakSanitizer
   does not follow pointers stored in poisoned memory, so a link there would make every listed
   block past a list's head look leaked; the last bytes are the ones a use after free least often
   reads (they are slack in most blocks). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NB_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(NB_ASAN)
#define NB_ASAN 1
#endif
#ifdef NB_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define NB_CLASSES 200 /* up to blocks of 2^57 bytes */
#define NB_ALIGN 64
#define SMALL_CLASSES 16 /* classes 0..15: blocks of at most 1 KiB */
#define THREAD_CACHE_MAX 256

typedef struct free_block { struct free_block *next; } free_block;

/* Bytes in use are not counted on the hot path (an atomic per call costs more than the rest
   of it): they are what is held minus what sits in the shared lists and the thread caches. */
static free_block *free_lists[NB_CLASSES];
static int64_t free_counts[NB_CLASSES];
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t held_bytes;
static uint64_t system_allocs;

typedef struct thread_cache {
    free_block *head[SMALL_CLASSES];
    int count[SMALL_CLASSES];
    bool registered;
    struct thread_cache *next, *prev; /* the registry of live thread caches */
} thread_cache;

static thread_cache *registry;

/* Where a listed block keeps its link. */
static free_block *link_of(free_block *b, size_t class_bytes) {
#ifdef NB_ASAN
    return (free_block *)((char *)b + class_bytes - sizeof *b);
#else
    (void)class_bytes;
    return b;
#endif
}

/* The link of a listed block. */
static free_block *next_of(free_block *b, size_t class_bytes) { return link_of(b, class_bytes)->next; }

/* Links b in front of next; under ASan all of b but its link is then poisoned. */
static void link_block(free_block *b, free_block *next, size_t class_bytes) {
    free_block *l = link_of(b, class_bytes);
    UNPOISON(l, sizeof *l);
    l->next = next;
    POISON(b, class_bytes - sizeof *l);
}

/* A block leaving the cache for a caller of nb__alloc(bytes). */
static void *hand_out(free_block *b, size_t bytes, size_t class_bytes) {
    POISON(b, class_bytes);
    UNPOISON(b, bytes);
    return b;
}

static NB_TLS thread_cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

/* Size class of a request and the class's block size. */
static int size_class(size_t bytes, size_t *class_bytes) {
    if (bytes <= 1024) {
        size_t units = (bytes + NB_ALIGN - 1) / NB_ALIGN;
        if (units == 0) units = 1;
        *class_bytes = units * NB_ALIGN;
        return (int)units - 1;
    }
    int log2 = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^log2 < bytes <= 2^(log2+1) */
    size_t base = (size_t)1 << log2, quarter = base / 4;
    size_t step = (bytes - base + quarter - 1) / quarter; /* 1..4 */
    *class_bytes = base + step * quarter;
    int cls = 16 + (log2 - 10) * 4 + (int)step - 1;
    return cls < NB_CLASSES ? cls : -1;
}

static size_t class_size(int c) {
    if (c < 16) return (size_t)(c + 1) * NB_ALIGN;
    int log2 = 10 + (c - 16) / 4, step = (c - 16) % 4 + 1;
    size_t base = (size_t)1 << log2;
    return base + (size_t)step * (base / 4);
}

/* Hands a thread's cached blocks back to the shared lists (at thread exit, and on demand). */
static void flush_cache(thread_cache *tc) {
    pthread_mutex_lock(&alloc_lock);
    for (int c = 0; c < SMALL_CLASSES; c++) {
        while (tc->head[c]) {
            free_block *b = tc->head[c];
            tc->head[c] = next_of(b, class_size(c));
            link_block(b, free_lists[c], class_size(c));
            free_lists[c] = b;
            free_counts[c]++;
        }
        tc->count[c] = 0;
    }
    pthread_mutex_unlock(&alloc_lock);
}

static void thread_exit(void *arg) {
    thread_cache *tc = arg;
    flush_cache(tc);
    pthread_mutex_lock(&alloc_lock);
    if (tc->prev) tc->prev->next = tc->next;
    else registry = tc->next;
    if (tc->next) tc->next->prev = tc->prev;
    tc->registered = false;
    pthread_mutex_unlock(&alloc_lock);
}

static bool key_made;
static void make_key(void) { key_made = pthread_key_create(&cache_key, thread_exit) == 0; }

static void *system_alloc(size_t class_bytes) {
    void *p = aligned_alloc(NB_ALIGN, class_bytes);
    if (!p) return NULL;
    pthread_mutex_lock(&alloc_lock);
    system_allocs++;
    held_bytes += class_bytes;
    pthread_mutex_unlock(&alloc_lock);
    return p;
}

void *nb__alloc(size_t bytes) {
    size_t class_bytes;
    int cls = size_class(bytes, &class_bytes);
    if (cls < 0) return NULL;
    if (cls < SMALL_CLASSES && cache.head[cls]) {
        free_block *b = cache.head[cls];
        cache.head[cls] = next_of(b, class_bytes);
        cache.count[cls]--;
        return hand_out(b, bytes, class_bytes);
    }
    pthread_mutex_lock(&alloc_lock);
    free_block *b = free_lists[cls];
    if (b) {
        free_lists[cls] = next_of(b, class_bytes);
        free_counts[cls]--;
    }
    pthread_mutex_unlock(&alloc_lock);
    if (!b) b = system_alloc(class_bytes);
    return b ? hand_out(b, bytes, class_bytes) : NULL;
}

void nb__free(void *p, size_t bytes) {
    if (!p) return;
    size_t class_bytes;
    int cls = size_class(bytes, &class_bytes);
    free_block *b = p;
#ifdef NB_ASAN
    /* a block freed twice is already poisoned: touching it makes ASan report the double free */
    if (bytes) (void)*(volatile unsigned char *)p;
#endif
    if (cls < SMALL_CLASSES && cache.count[cls] < THREAD_CACHE_MAX) {
        if (!cache.registered) { /* first small free on this thread: flush the cache when it exits */
            pthread_once(&cache_key_once, make_key);
            pthread_setspecific(cache_key, &cache);
            pthread_mutex_lock(&alloc_lock);
            cache.next = registry;
            cache.prev = NULL;
            if (registry) registry->prev = &cache;
            registry = &cache;
            cache.registered = true;
            pthread_mutex_unlock(&alloc_lock);
        }
        link_block(b, cache.head[cls], class_bytes);
        cache.head[cls] = b;
        cache.count[cls]++;
        return;
    }
    pthread_mutex_lock(&alloc_lock);
    link_block(b, free_lists[cls], class_bytes);
    free_lists[cls] = b;
    free_counts[cls]++;
    pthread_mutex_unlock(&alloc_lock);
}

void nb_empty_cache(void) {
    flush_cache(&cache);
    pthread_mutex_lock(&alloc_lock);
    for (int c = 0; c < NB_CLASSES; c++) {
        size_t bytes = class_size(c);
        while (free_lists[c]) {
            free_block *next = next_of(free_lists[c], bytes);
            UNPOISON(free_lists[c], bytes); /* back to the system allocator, which tracks it itself */
            free(free_lists[c]);
            held_bytes -= bytes;
            free_lists[c] = next;
        }
        free_counts[c] = 0;
    }
    pthread_mutex_unlock(&alloc_lock);
}

void nb_memory_stats(size_t *held, size_t *used, uint64_t *allocs) {
    pthread_mutex_lock(&alloc_lock);
    if (held) *held = held_bytes;
    if (used) { /* other threads' caches are read as they are: exact when they are quiet */
        size_t idle = 0;
        for (int c = 0; c < NB_CLASSES; c++) idle += (size_t)free_counts[c] * class_size(c);
        for (thread_cache *tc = registry; tc; tc = tc->next)
            for (int c = 0; c < SMALL_CLASSES; c++) idle += (size_t)tc->count[c] * class_size(c);
        *used = held_bytes - idle;
    }
    if (allocs) *allocs = system_allocs;
    pthread_mutex_unlock(&alloc_lock);
}

/* When the library is unloaded (dlclose) or the process exits: the cached blocks go back to the
   system (after dlclose nothing could reach them), and the thread-exit hook is removed, which
   would otherwise run in unmapped code when a thread that used nabla ends. Runs after the
   thread pool's destructor (a lower priority runs later), so the joined workers' caches are
   already in the shared lists. Caches of other threads still running are left alone: their
   owners touch them without the lock. */
__attribute__((destructor(101))) static void release_at_unload(void) {
    if (key_made) {
        pthread_key_delete(cache_key);
        key_made = false;
    }
    if (cache.registered) {
        pthread_mutex_lock(&alloc_lock);
        if (cache.prev) cache.prev->next = cache.next;
        else registry = cache.next;
        if (cache.next) cache.next->prev = cache.prev;
        cache.registered = false;
        pthread_mutex_unlock(&alloc_lock);
    }
    nb_empty_cache();
}
