/* The backend registry (one backend per device type), device memory for storages, and the
   copies between devices that nb_to and nb_module_to stand on. */
#include "backend.h"
#include <string.h>

#define DEVICE_TYPES (NB_EXT + 1)

/* the cuda backend is registered when it is built: a pointer to its table, no CUDA call (the
   runtime starts when a cuda device is first asked for) */
static const nb_backend *_Atomic registry[DEVICE_TYPES] = {
    [NB_CPU] = &nb__cpu_backend,
#ifdef NABLA_HAVE_CUDA
    [NB_CUDA] = &nb__cuda_backend,
#endif
};

const nb_backend *nb__backend_get(nb_device_type type) {
    return (unsigned)type < DEVICE_TYPES ? atomic_load_explicit(&registry[type], memory_order_acquire) : NULL;
}

const nb_backend *nb__backend_register(const nb_backend *b) {
    if (!b || (unsigned)b->type >= DEVICE_TYPES || b->type == NB_CPU) return NULL;
    return atomic_exchange_explicit(&registry[b->type], b, memory_order_acq_rel);
}

void nb__backend_unregister(nb_device_type type) {
    if ((unsigned)type < DEVICE_TYPES && type != NB_CPU) atomic_store_explicit(&registry[type], NULL, memory_order_release);
}

const nb_backend *nb__backend_of(const nb_tensor *t) {
    nb_device_type type = t->storage->device.type;
    return type == NB_CPU ? &nb__cpu_backend : nb__backend_get(type);
}

static int count_of(const nb_backend *b) { return !b ? 0 : b->device_count ? b->device_count() : 1; }

const nb_backend *nb__backend_for(const char *fn, nb_device dev) {
    char dv[32];
    if (!nb__enum_ok(fn, "device type", (int)dev.type, DEVICE_TYPES, "nb_device_type", "NB_CPU, NB_CUDA, NB_EXT")) return NULL;
    const nb_backend *b = nb__backend_get(dev.type);
    if (dev.index < 0) {
        nb__error("%s: invalid device (index %d)", fn, dev.index);
        return NULL;
    }
    if (!b) {
        nb__error("%s: device %s is not available: this build of nabla has no %s backend", fn,
                  nb_device_str(dev, dv, sizeof dv), dev.type == NB_CUDA ? "cuda" : dev.type == NB_EXT ? "ext" : "such");
        return NULL;
    }
    int n = count_of(b);
    if (dev.index >= n) {
        const char *why = n == 0 && b->why_none ? b->why_none() : "";
        nb__error("%s: device %s is not available: the %s backend sees %d device%s%s%s%s", fn, nb_device_str(dev, dv, sizeof dv),
                  b->name, n, n == 1 ? "" : "s", *why ? " (" : "", why, *why ? ")" : "");
        return NULL;
    }
    return b;
}

int nb_device_count(nb_device_type type) { return count_of(nb__backend_get(type)); }

bool nb_device_available(nb_device dev) {
    const nb_backend *b = nb__backend_get(dev.type);
    return b && dev.index >= 0 && dev.index < count_of(b);
}

int nb_synchronize(nb_device dev) {
    const nb_backend *b = nb__backend_for("nb_synchronize", dev);
    if (!b) return -1;
    return b->sync ? b->sync(dev.index) : 0;
}

/* ---- storage on a device: core frees and reads it through these ---- */
static void device_release(nb_storage *st) {
    const nb_backend *b = nb__backend_get(st->device.type);
    if (b && st->data) b->free(st->data, st->nbytes ? st->nbytes : 1, st->device.index); /* as allocated */
}

static int device_read(const nb_storage *st, size_t off, void *dst, size_t n) {
    const nb_backend *b = nb__backend_get(st->device.type);
    if (!b) {
        nb__error("nb_copy_to: the backend of a device tensor is gone");
        return -1;
    }
    /* a host tensor and a device tensor over the bytes wanted, for the backend's copy */
    nb_storage host_st = { .device = { NB_CPU, 0 }, .nbytes = n, .data = dst };
    nb_storage dev_st = { .device = st->device, .nbytes = st->nbytes, .data = st->data, .ops = st->ops };
    nb_tensor h = { .dtype = NB_U8, .shape = { 1, { (int64_t)n } }, .stride = { 1 }, .numel = (int64_t)n, .storage = &host_st };
    nb_tensor d = h;
    d.storage = &dev_st;
    d.offset = (int64_t)off;
    return b->copy(&h, &d);
}

static const nb_storage_ops device_storage_ops = { device_release, device_read };

nb_tensor *nb__tensor_new_on(nb_shape shape, nb_dtype dtype, nb_device dev) {
    if (dev.type == NB_CPU) return nb__tensor_new(shape, dtype);
    const nb_backend *b = nb__backend_for("nb_empty", dev);
    int64_t numel;
    size_t nbytes;
    if (!b || !nb__tensor_size(shape, dtype, &numel, &nbytes)) return NULL;
    char sh[160], dv[32];
    void *data = b->alloc(nbytes ? nbytes : 1, dev.index);
    if (!data) { /* a backend's own message (a device's free and total bytes) comes first and stays */
        nb__error("nb_empty: out of memory on %s allocating %zu bytes for %s %s", nb_device_str(dev, dv, sizeof dv), nbytes,
                  nb_shape_str(shape, sh, sizeof sh), nb_dtype_name(dtype));
        return NULL;
    }
    nb_storage *st = nb__storage_header(dev, data, nbytes, &device_storage_ops);
    nb_tensor *t = st ? nb__tensor_on(st, shape, dtype, numel) : NULL;
    if (!t) {
        if (st) nb__free(st, st->block);
        b->free(data, nbytes ? nbytes : 1, dev.index);
        nb__error("nb_empty: out of memory");
    }
    return t;
}

int nb__copy_between(nb_tensor *dst, const nb_tensor *src) {
    if (dst->numel == 0) return 0;
    /* the backend that is not the host's runs the copy; host to host is the cpu's */
    const nb_backend *b = dst->storage->device.type != NB_CPU ? nb__backend_of(dst) : nb__backend_of(src);
    if (!b) {
        nb__error("nb_to: no backend for the device");
        return -1;
    }
    if (dst->storage->device.type != NB_CPU && src->storage->device.type != NB_CPU &&
        dst->storage->device.type != src->storage->device.type) {
        /* between two kinds of device: through the host */
        nb_tensor *h = nb__tensor_new(src->shape, src->dtype);
        if (!h) return -1;
        int rc = nb__copy_between(h, src);
        if (rc == 0) rc = nb__copy_between(dst, h);
        nb_release(h);
        return rc;
    }
    return b->copy(dst, src);
}

nb_tensor *nb__dense_on_device(const char *fn, nb_tensor *t) {
    if (nb_is_contiguous(t)) return nb_retain(t);
    const nb_backend *b = nb__backend_of(t);
    nb_kernel_fn copy = b ? b->kernels[NB_OP_COPY] : NULL;
    if (!copy) {
        nb__error("%s: the %s backend cannot make a strided tensor dense (no copy kernel)", fn, b ? b->name : "?");
        return NULL;
    }
    nb_tensor *d = nb__tensor_new_on(t->shape, t->dtype, t->storage->device);
    nb_op_args args = { .dtype = t->dtype, .device = t->storage->device };
    if (d && copy(d, &t, 1, &args) < 0) {
        nb_release(d);
        return NULL;
    }
    return d;
}

nb_tensor *nb__to_device(nb_tensor *t, nb_device dev) {
    nb_tensor *src = nb__dense_on_device("nb_to", t);
    nb_tensor *out = src ? nb__tensor_new_on(t->shape, t->dtype, dev) : NULL;
    if (out && nb__copy_between(out, src) < 0) {
        nb_release(out);
        out = NULL;
    }
    nb_release(src);
    return out;
}

int nb__tensor_move(nb_tensor *t, nb_device dev) {
    nb_device cur = t->storage->device;
    if (cur.type == dev.type && cur.index == dev.index) return t->grad ? nb__tensor_move(t->grad, dev) : 0;
    if (!nb__backend_for("nb_module_to", dev)) return -1;
    nb_tensor *moved = nb__to_device(t, dev);
    if (!moved) return -1;
    /* t takes the new storage; the old one goes when its last view does */
    nb_storage *old = t->storage;
    t->storage = moved->storage;
    moved->storage = old;
    t->offset = 0;
    nb__contiguous_strides(&t->shape, t->stride);
    nb_release(moved);
    if (t->grad && nb__tensor_move(t->grad, dev) < 0) return -1;
    return 0;
}
