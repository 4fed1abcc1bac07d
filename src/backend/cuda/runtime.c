/* The CUDA runtime of the backend: devices (counted once, quietly), one stream per device, the
   caching device allocator (size classes, blocks reused on their stream, statistics, a clear
   out-of-memory error after the cache is given back), copies between host and devices, and
   synchronisation. Nothing here calls CUDA before a cuda device is first asked for. */
#include "cuda_impl.h"
#include "nabla/cuda.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64

typedef struct block {
    void *p;
    size_t size;           /* its class */
    cudaStream_t stream;   /* the stream it was last used on: it is reused on that stream only */
    struct block *next;
} block;

typedef struct dev_state {
    cudaStream_t stream;   /* made at the device's first use */
    block *free_list[NB_CUDA_BUCKETS];
    size_t allocated, reserved, peak, cached;
    int64_t mallocs, reuses;
} dev_state;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* the allocator's lists and counters, stream creation */
static dev_state devs[MAX_DEVICES];
static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int device_total;
static char why_none[256];
static _Thread_local int current = -1;

static void count_devices(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); /* loaded by the runtime when it is there */
        if (!driver && (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice))
            snprintf(why_none, sizeof why_none, "no CUDA driver: libcuda.so.1 is not installed (%s)", cudaGetErrorName(e));
        else
            snprintf(why_none, sizeof why_none, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
        if (driver) dlclose(driver);
        (void)cudaGetLastError();
        n = 0;
    } else if (n == 0) {
        snprintf(why_none, sizeof why_none, "the CUDA driver sees no GPU");
    }
    device_total = n < MAX_DEVICES ? n : MAX_DEVICES;
}

int nb__curt_count(void) {
    pthread_once(&count_once, count_devices);
    return device_total;
}

const char *nb__curt_why_none(void) {
    nb__curt_count();
    return why_none;
}

int nb__curt_fail(const char *fn, const char *what, cudaError_t e) {
    (void)cudaGetLastError(); /* a sticky error stays; a plain one is cleared for the next call */
    nb__error("%s: cuda:%d: %s: %s (%s)", fn, current < 0 ? 0 : current, what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

int nb__curt_use(const char *fn, int index) {
    if (index < 0 || index >= nb__curt_count()) {
        nb__error("%s: device cuda:%d is not available: %d CUDA device%s%s%s", fn, index, nb__curt_count(),
                  nb__curt_count() == 1 ? "" : "s", why_none[0] ? ", " : "", why_none);
        return -1;
    }
    if (current != index) {
        cudaError_t e = cudaSetDevice(index);
        if (e != cudaSuccess) return nb__curt_fail(fn, "cudaSetDevice", e);
        current = index;
    }
    dev_state *d = &devs[index];
    pthread_mutex_lock(&mu);
    cudaError_t e = cudaSuccess;
    if (!d->stream) e = cudaStreamCreate(&d->stream);
    pthread_mutex_unlock(&mu);
    return e == cudaSuccess ? 0 : nb__curt_fail(fn, "cudaStreamCreate", e);
}

int nb__curt_current(void) { return current; }

cudaStream_t nb__curt_stream_of(int index) {
    if (nb__curt_use("nb_cuda", index) < 0) return NULL;
    return devs[index].stream;
}

void *nb__k_stream(void) {
    if (current < 0 && nb__curt_use("nb__k_stream", 0) < 0) return NULL;
    return devs[current].stream;
}

/* ---- the caching allocator ---- */
/* Takes a cached block of class cls made on stream s, or NULL. Under mu. */
static void *take_cached(dev_state *d, size_t cls, cudaStream_t s) {
    block **pp = &d->free_list[nb__cuda_bucket(cls)];
    for (; *pp; pp = &(*pp)->next) {
        block *b = *pp;
        if (b->size != cls || b->stream != s) continue;
        *pp = b->next;
        void *p = b->p;
        free(b);
        d->cached -= cls;
        return p;
    }
    return NULL;
}

/* Gives every cached block of device index back to the driver (cudaFree waits for the device). */
static void release_cache(int index) {
    dev_state *d = &devs[index];
    block *all = NULL;
    pthread_mutex_lock(&mu);
    for (int k = 0; k < NB_CUDA_BUCKETS; k++) {
        while (d->free_list[k]) {
            block *b = d->free_list[k];
            d->free_list[k] = b->next;
            b->next = all;
            all = b;
        }
    }
    pthread_mutex_unlock(&mu);
    while (all) {
        block *b = all;
        all = b->next;
        cudaFree(b->p);
        pthread_mutex_lock(&mu);
        d->cached -= b->size;
        d->reserved -= b->size;
        pthread_mutex_unlock(&mu);
        free(b);
    }
    (void)cudaGetLastError();
}

static void count_alloc(dev_state *d, size_t cls) {
    d->allocated += cls;
    if (d->allocated > d->peak) d->peak = d->allocated;
}

void *nb__curt_alloc(size_t bytes, int index) {
    size_t cls = nb__cuda_size_class(bytes);
    if (!cls) {
        nb__error("cuda:%d: cannot allocate %zu bytes (the size overflows)", index, bytes);
        return NULL;
    }
    if (nb__curt_use("nb_empty", index) < 0) return NULL;
    dev_state *d = &devs[index];
    pthread_mutex_lock(&mu);
    void *p = take_cached(d, cls, d->stream);
    if (p) {
        d->reuses++;
        count_alloc(d, cls);
    }
    pthread_mutex_unlock(&mu);
    if (p) return p;
    cudaError_t e = cudaMalloc(&p, cls);
    if (e == cudaErrorMemoryAllocation) { /* the cache given back, then once more */
        (void)cudaGetLastError();
        release_cache(index);
        e = cudaMalloc(&p, cls);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t fr = 0, total = 0;
        cudaMemGetInfo(&fr, &total);
        (void)cudaGetLastError();
        pthread_mutex_lock(&mu);
        size_t reserved = d->reserved;
        pthread_mutex_unlock(&mu);
        if (e == cudaErrorMemoryAllocation)
            nb__error("cuda:%d: out of memory allocating %zu bytes (%zu bytes free of %zu; %zu reserved by nabla)", index, bytes,
                      fr, total, reserved);
        else
            nb__error("cuda:%d: allocating %zu bytes: %s (%s)", index, bytes, cudaGetErrorString(e), cudaGetErrorName(e));
        return NULL;
    }
    pthread_mutex_lock(&mu);
    d->mallocs++;
    d->reserved += cls;
    count_alloc(d, cls);
    pthread_mutex_unlock(&mu);
    return p;
}

void nb__curt_free(void *p, size_t bytes, int index) {
    if (!p || index < 0 || index >= MAX_DEVICES) return;
    size_t cls = nb__cuda_size_class(bytes);
    dev_state *d = &devs[index];
    block *b = malloc(sizeof *b);
    pthread_mutex_lock(&mu);
    d->allocated -= cls;
    if (b) { /* cached for the next request of its class on its stream (stream order makes it safe) */
        *b = (block){ p, cls, d->stream, d->free_list[nb__cuda_bucket(cls)] };
        d->free_list[nb__cuda_bucket(cls)] = b;
        d->cached += cls;
    } else {
        d->reserved -= cls;
    }
    pthread_mutex_unlock(&mu);
    if (!b) { /* no room to remember it: back to the driver */
        int prev = current;
        if (prev != index) cudaSetDevice(index);
        cudaFree(p);
        if (prev != index && prev >= 0) cudaSetDevice(prev);
        (void)cudaGetLastError();
    }
}

void *nb__k_scratch_alloc(size_t bytes) {
    if (current < 0 && nb__curt_use("nb__k_scratch_alloc", 0) < 0) return NULL;
    return nb__curt_alloc(bytes, current);
}

void nb__k_scratch_free(void *p, size_t bytes) {
    if (current >= 0) nb__curt_free(p, bytes, current);
}

/* ---- copies and synchronisation ---- */
int nb__curt_copy(nb_tensor *dst, const nb_tensor *src) {
    size_t n = (size_t)dst->numel * nb__esize(dst->dtype);
    if (n == 0) return 0;
    bool dcuda = dst->storage->device.type == NB_CUDA, scuda = src->storage->device.type == NB_CUDA;
    int di = dcuda ? nb__curt_device_of(dst) : -1, si = scuda ? nb__curt_device_of(src) : -1;
    void *to = nb__data(dst);
    const void *from = nb__data(src);
    cudaError_t e;
    if (dcuda && !scuda) {
        /* host to device, in stream order: from pageable memory (nabla's host memory is never
           pinned) the call returns once the bytes are staged, so the host buffer may change or go */
        if (nb__curt_use("nb_to", di) < 0) return -1;
        e = cudaMemcpyAsync(to, from, n, cudaMemcpyHostToDevice, devs[di].stream);
        return e == cudaSuccess ? 0 : nb__curt_fail("nb_to", "copy to the device", e);
    }
    if (!dcuda && scuda) { /* device to host: waits, since the host reads it next */
        if (nb__curt_use("nb_to", si) < 0) return -1;
        e = cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToHost, devs[si].stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(devs[si].stream);
        return e == cudaSuccess ? 0 : nb__curt_fail("nb_to", "copy to the host", e);
    }
    if (!dcuda && !scuda) {
        memcpy(to, from, n);
        return 0;
    }
    if (di == si) { /* on one device: in stream order */
        if (nb__curt_use("nb_to", di) < 0) return -1;
        e = cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, devs[di].stream);
        return e == cudaSuccess ? 0 : nb__curt_fail("nb_to", "copy on the device", e);
    }
    /* between two devices: the source's queued work first, then on the destination's stream */
    if (nb__curt_sync(si) < 0 || nb__curt_use("nb_to", di) < 0) return -1;
    e = cudaMemcpyPeerAsync(to, di, from, si, n, devs[di].stream);
    return e == cudaSuccess ? 0 : nb__curt_fail("nb_to", "copy between devices", e);
}

int nb__curt_sync(int index) {
    if (nb__curt_use("nb_synchronize", index) < 0) return -1;
    cudaError_t e = cudaStreamSynchronize(devs[index].stream);
    return e == cudaSuccess ? 0 : nb__curt_fail("nb_synchronize", "cudaStreamSynchronize", e);
}

/* ---- the public API of nabla/cuda.h ---- */
int nb_cuda_device_count(void) { return nb__curt_count(); }

bool nb_cuda_is_available(void) { return nb__curt_count() > 0; }

const char *nb_cuda_why_unavailable(void) { return nb__curt_why_none(); }

int nb_cuda_memory_stats(int device, nb_cuda_memory *out) {
    if (!out) {
        nb__error("nb_cuda_memory_stats: out is NULL");
        return -1;
    }
    memset(out, 0, sizeof *out);
    if (device < 0 || device >= nb__curt_count()) {
        nb__error("nb_cuda_memory_stats: device cuda:%d is not available (%d CUDA devices%s%s)", device, nb__curt_count(),
                  why_none[0] ? ": " : "", why_none);
        return -1;
    }
    dev_state *d = &devs[device];
    pthread_mutex_lock(&mu);
    *out = (nb_cuda_memory){ .allocated = d->allocated, .reserved = d->reserved, .peak = d->peak, .cached = d->cached,
                             .device_mallocs = d->mallocs, .reuses = d->reuses };
    pthread_mutex_unlock(&mu);
    return 0;
}

int nb_cuda_reset_peak(int device) {
    nb_cuda_memory m;
    if (nb_cuda_memory_stats(device, &m) < 0) return -1;
    pthread_mutex_lock(&mu);
    devs[device].peak = devs[device].allocated;
    pthread_mutex_unlock(&mu);
    return 0;
}

int nb_cuda_empty_cache(int device) {
    nb_cuda_memory m;
    if (nb_cuda_memory_stats(device, &m) < 0 || nb__curt_use("nb_cuda_empty_cache", device) < 0) return -1;
    release_cache(device);
    return 0;
}
