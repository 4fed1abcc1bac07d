/* Shape and layout ops composed from the primitives: flip, roll, repeat, tile, split, chunk,
   pad (constant, reflect, replicate, circular), tril, triu and diagonal; and the creation ops
   eye and linspace. Each is differentiable through the primitives it is made of (index_select,
   cat, slice, expand, where). */
#include "ops_impl.h"
#include "nabla/ops.h"
#include <math.h>
#include <stdlib.h>

/* t's entries at host indices idx[0..n) along axis (index_select, so the gradient scatters back). */
static nb_tensor *pick(nb_tensor *t, int axis, const int64_t *idx, int64_t n) {
    nb_tensor *ix = nb_to(nb_from_data(idx, NB_SHAPE(n), NB_I64), t->storage->device);
    return nb_index_select(t, axis, ix);
}

nb_tensor *nb_flip(nb_tensor *t, const int *axes, int n) {
    if (!nb__check_input("flip", t)) return NULL;
    if (n < 0 || (n > 0 && !axes)) {
        nb__error("nb_flip: %d axes given%s", n, n > 0 ? " but axes is NULL" : "");
        return NULL;
    }
    int a[NB_MAX_DIMS];
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        if ((a[i] = nb__axis_of("flip", t, axes[i])) < 0) return NULL;
        if (i >= NB_MAX_DIMS || (seen & (1u << a[i]))) {
            nb__error("nb_flip: axis %d appears twice", axes[i]);
            return NULL;
        }
        seen |= 1u << a[i];
    }
    COMPOSITE_BEGIN
    nb_tensor *r = t;
    for (int i = 0; i < n && r && t->shape.ndim; i++) {
        int64_t len = t->shape.dim[a[i]];
        r = nb_index_select(r, a[i], nb__arange_on((double)len - 1, -1, -1, NB_I64, t->storage->device));
    }
    result_ = r == t ? nb_clone(t) : r;
    COMPOSITE_END
}

nb_tensor *nb_roll(nb_tensor *t, int64_t shift, int axis) {
    if (!nb__check_input("roll", t)) return NULL;
    int a = nb__axis_of("roll", t, axis);
    if (a < 0) return NULL;
    int64_t n = t->shape.ndim ? t->shape.dim[a] : 1;
    int64_t s = n ? ((shift % n) + n) % n : 0;
    COMPOSITE_BEGIN
    if (s == 0 || t->shape.ndim == 0) result_ = nb_clone(t);
    else {
        nb_tensor *parts[2] = { nb_slice(t, a, n - s, n, 1), nb_slice(t, a, 0, n - s, 1) };
        result_ = parts[0] && parts[1] ? nb_cat(parts, 2, a) : NULL;
    }
    COMPOSITE_END
}

/* t viewed with a size-1 axis before each of its axes (and n - ndim more in front), expanded to
   the repetitions and merged pairwise: torch.repeat's layout, through views and one copy. */
nb_tensor *nb_repeat(nb_tensor *t, const int64_t *reps, int n) {
    if (!nb__check_input("repeat", t)) return NULL;
    int nd = t->shape.ndim;
    if (n < nd || n > NB_MAX_DIMS / 2 || (n > 0 && !reps)) {
        char d[200];
        nb__error("nb_repeat: %d repetitions for %s (need between its %d dimensions and %d)", n,
                  nb__describe(t, d, sizeof d), nd, NB_MAX_DIMS / 2);
        return NULL;
    }
    nb_shape split = { 2 * n, { 0 } }, big = { 2 * n, { 0 } }, out = { n, { 0 } };
    for (int i = 0; i < n; i++) {
        if (reps[i] < 0) {
            nb__error("nb_repeat: repetition %d is negative (%lld)", i, (long long)reps[i]);
            return NULL;
        }
        int64_t size = i < n - nd ? 1 : t->shape.dim[i - (n - nd)];
        split.dim[2 * i] = 1;
        split.dim[2 * i + 1] = size;
        big.dim[2 * i] = reps[i];
        big.dim[2 * i + 1] = size;
        if (nb__mul_overflows(reps[i], size, &out.dim[i])) {
            nb__error("nb_repeat: %lld repetitions of %lld elements overflow", (long long)reps[i], (long long)size);
            return NULL;
        }
    }
    COMPOSITE_BEGIN
    result_ = nb_reshape(nb_expand(nb_reshape(t, split), big), out);
    COMPOSITE_END
}

nb_tensor *nb_tile(nb_tensor *t, const int64_t *reps, int n) {
    if (!nb__check_input("tile", t)) return NULL;
    int nd = t->shape.ndim;
    if (n < 0 || n > NB_MAX_DIMS / 2 || (n > 0 && !reps)) {
        nb__error("nb_tile: %d repetitions (0 to %d)", n, NB_MAX_DIMS / 2);
        return NULL;
    }
    int64_t full[NB_MAX_DIMS];
    int m = n > nd ? n : nd;
    for (int i = 0; i < m; i++) full[i] = i < m - n ? 1 : reps[i - (m - n)]; /* missing ones lead */
    return nb_repeat(t, full, m);
}

/* ---- splitting: views of t, owned by the caller's scope ---- */
static int split_at(const char *fn, nb_tensor *t, int axis, int64_t size, nb_tensor **out, int cap) {
    if (!nb__check_input(fn, t)) return -1;
    int a = nb__axis_of(fn, t, axis);
    if (a < 0) return -1;
    if (t->shape.ndim == 0) {
        nb__error("nb_%s: cannot split a 0-d tensor", fn);
        return -1;
    }
    int64_t n = t->shape.dim[a];
    int64_t pieces = n == 0 ? 1 : (n + size - 1) / size;
    if (pieces > cap || !out) {
        char d[200];
        nb__error("nb_%s: %s splits into %lld pieces along axis %d, room for %d", fn, nb__describe(t, d, sizeof d),
                  (long long)pieces, axis, out ? cap : 0);
        return -1;
    }
    for (int64_t p = 0; p < pieces; p++) {
        out[p] = nb_slice(t, a, p * size, p * size + size, 1);
        if (!out[p]) return -1;
    }
    return (int)pieces;
}

int nb_split(nb_tensor *t, int64_t size, int axis, nb_tensor **out, int cap) {
    if (size <= 0) {
        nb__error("nb_split: the piece size must be positive, got %lld", (long long)size);
        return -1;
    }
    return split_at("split", t, axis, size, out, cap);
}

int nb_chunk(nb_tensor *t, int chunks, int axis, nb_tensor **out, int cap) {
    if (chunks <= 0) {
        nb__error("nb_chunk: the number of chunks must be positive, got %d", chunks);
        return -1;
    }
    if (!nb__check_input("chunk", t)) return -1;
    int a = nb__axis_of("chunk", t, axis);
    if (a < 0) return -1;
    int64_t n = t->shape.ndim ? t->shape.dim[a] : 0;
    int64_t size = (n + chunks - 1) / chunks; /* torch.chunk: ceil(n / chunks) each, maybe fewer pieces */
    return split_at("chunk", t, axis, size ? size : 1, out, cap);
}

/* ---- padding ---- */
/* The index of padded position j (in -left .. n + right) in the source, by mode. */
static int64_t pad_source(nb_pad_mode mode, int64_t j, int64_t n) {
    switch (mode) {
    case NB_PAD_REFLECT:
        if (j < 0) return -j;
        if (j >= n) return 2 * (n - 1) - j;
        return j;
    case NB_PAD_REPLICATE: return j < 0 ? 0 : j >= n ? n - 1 : j;
    default: return ((j % n) + n) % n; /* circular */
    }
}

static const char *const pad_names[] = { "constant", "reflect", "replicate", "circular" };

/* One axis padded by lo before and hi after (a negative amount crops, constant mode only). */
static nb_tensor *pad_axis(nb_tensor *t, int axis, int64_t lo, int64_t hi, nb_pad_mode mode, double value) {
    int64_t n = t->shape.dim[axis];
    if (mode == NB_PAD_CONSTANT) {
        nb_tensor *mid = nb_slice(t, axis, lo < 0 ? -lo : 0, hi < 0 ? n + hi : n, 1);
        nb_tensor *parts[3];
        int k = 0;
        nb_shape s = t->shape;
        if (lo > 0) { s.dim[axis] = lo; parts[k++] = nb__full_on(s, value, t->dtype, t->storage->device); }
        parts[k++] = mid;
        if (hi > 0) { s.dim[axis] = hi; parts[k++] = nb__full_on(s, value, t->dtype, t->storage->device); }
        return k == 1 ? mid : nb_cat(parts, k, axis);
    }
    int64_t len = n + lo + hi;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(len > 0 ? len : 1));
    if (!idx) {
        nb__error("nb_pad: out of memory");
        return NULL;
    }
    for (int64_t j = 0; j < len; j++) idx[j] = pad_source(mode, j - lo, n);
    nb_tensor *r = pick(t, axis, idx, len);
    free(idx);
    return r;
}

nb_tensor *nb_pad(nb_tensor *t, const int64_t *pads, int npads, nb_pad_mode mode, double value) {
    if (!nb__check_input("pad", t)) return NULL;
    int nd = t->shape.ndim;
    char d[200];
    if (!nb__enum_ok("nb_pad", "mode", (int)mode, NB_PAD_CIRCULAR + 1, "nb_pad_mode", "constant, reflect, replicate, circular"))
        return NULL;
    if (npads < 0 || npads % 2 || npads > 2 * nd || (npads > 0 && !pads)) {
        nb__error("nb_pad: %d pad amounts for %s (pairs, at most two per dimension)", npads, nb__describe(t, d, sizeof d));
        return NULL;
    }
    for (int k = 0; k < npads / 2; k++) {
        int axis = nd - 1 - k;
        int64_t n = t->shape.dim[axis], lo = pads[2 * k], hi = pads[2 * k + 1];
        bool bad = false;
        if (mode == NB_PAD_CONSTANT) bad = n + lo + hi < 0 || (lo < 0 && hi < 0 && -lo - hi > n);
        else if (lo < 0 || hi < 0) bad = true;
        else if (mode == NB_PAD_REFLECT) bad = lo >= n || hi >= n;
        else if (mode == NB_PAD_REPLICATE) bad = n == 0 && lo + hi > 0;
        else bad = lo > n || hi > n;
        if (bad) {
            nb__error("nb_pad: %s padding (%lld, %lld) does not fit axis %d of %s%s", pad_names[mode], (long long)lo,
                      (long long)hi, axis, nb__describe(t, d, sizeof d),
                      mode == NB_PAD_REFLECT ? " (reflect needs each amount below the size)"
                      : mode == NB_PAD_CIRCULAR ? " (circular needs each amount at most the size)" : "");
            return NULL;
        }
    }
    COMPOSITE_BEGIN
    nb_tensor *r = t;
    for (int k = 0; k < npads / 2 && r; k++)
        if (pads[2 * k] || pads[2 * k + 1]) r = pad_axis(r, nd - 1 - k, pads[2 * k], pads[2 * k + 1], mode, value);
    result_ = r == t ? nb_clone(t) : r;
    COMPOSITE_END
}

/* ---- triangles and diagonals ---- */
/* Keeps the elements with column - row <= k (lower) or >= k (upper) of the last two axes. */
static nb_tensor *triangle(const char *fn, nb_tensor *t, int64_t k, bool lower) {
    if (!nb__check_input(fn, t)) return NULL;
    int nd = t->shape.ndim;
    if (nd < 2) {
        char d[200];
        nb__error("nb_%s: expected at least 2 dimensions, got %s", fn, nb__describe(t, d, sizeof d));
        return NULL;
    }
    COMPOSITE_BEGIN
    int64_t rows = t->shape.dim[nd - 2], cols = t->shape.dim[nd - 1];
    nb_device dev = t->storage->device;
    nb_tensor *r = nb_reshape(nb__arange_on(0, (double)rows, 1, NB_I64, dev), NB_SHAPE(rows, 1));
    nb_tensor *c = nb__arange_on(0, (double)cols, 1, NB_I64, dev);
    nb_tensor *diff = nb_sub(c, r), *kk = nb__full_on((nb_shape){ 0, { 0 } }, (double)k, NB_I64, dev);
    nb_tensor *keep = lower ? nb_le(diff, kk) : nb_ge(diff, kk);
    result_ = nb_where(keep, t, nb__full_on((nb_shape){ 0, { 0 } }, 0, t->dtype, dev));
    COMPOSITE_END
}
nb_tensor *nb_tril(nb_tensor *t, int64_t k) { return triangle("tril", t, k, true); }
nb_tensor *nb_triu(nb_tensor *t, int64_t k) { return triangle("triu", t, k, false); }

/* The two axes moved last and merged, then every (cols + 1)-th element from the diagonal's start:
   a view where t is contiguous that way, a copy otherwise. */
nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int axis1, int axis2) {
    if (!nb__check_input("diagonal", t)) return NULL;
    int nd = t->shape.ndim;
    char d[200];
    if (nd < 2) {
        nb__error("nb_diagonal: expected at least 2 dimensions, got %s", nb__describe(t, d, sizeof d));
        return NULL;
    }
    int a1 = nb__axis_of("diagonal", t, axis1), a2 = a1 < 0 ? -1 : nb__axis_of("diagonal", t, axis2);
    if (a1 < 0 || a2 < 0) return NULL;
    if (a1 == a2) {
        nb__error("nb_diagonal: both axes are %d", a1);
        return NULL;
    }
    int perm[NB_MAX_DIMS], k = 0;
    for (int i = 0; i < nd; i++)
        if (i != a1 && i != a2) perm[k++] = i;
    perm[k++] = a1;
    perm[k++] = a2;
    int64_t rows = t->shape.dim[a1], cols = t->shape.dim[a2];
    int64_t len = offset >= 0 ? (rows < cols - offset ? rows : cols - offset) : (rows + offset < cols ? rows + offset : cols);
    if (len < 0) len = 0;
    int64_t start = offset >= 0 ? offset : -offset * cols;
    COMPOSITE_BEGIN
    nb_tensor *p = nb_permute(t, perm);
    nb_shape s = p ? p->shape : t->shape;
    s.ndim = nd - 1;
    s.dim[nd - 2] = rows * cols;
    nb_tensor *flat = nb_reshape(p, s);
    result_ = len ? nb_slice(flat, nd - 2, start, start + (len - 1) * (cols + 1) + 1, cols + 1) : nb_slice(flat, nd - 2, 0, 0, 1);
    COMPOSITE_END
}

/* ---- creation ---- */
nb_tensor *nb_eye(int64_t n, int64_t m, nb_dtype dtype) {
    if (!nb__dtype_ok("nb_eye", dtype)) return NULL;
    if (n < 0 || m < 0) {
        nb__error("nb_eye: sizes must be non-negative, got %lld x %lld", (long long)n, (long long)m);
        return NULL;
    }
    COMPOSITE_BEGIN
    nb_tensor *r = nb_reshape(nb_arange(0, (double)n, 1, NB_I64), NB_SHAPE(n, 1));
    result_ = nb_cast(nb_eq(r, nb_arange(0, (double)m, 1, NB_I64)), dtype);
    COMPOSITE_END
}

/* torch's formula: the first half counted up from start, the rest down from end, by
   (end - start) / (steps - 1), in the dtype's own arithmetic (double for integers, then
   truncated), so both ends are exact. */
nb_tensor *nb_linspace(double start, double end, int64_t steps, nb_dtype dtype) {
    if (!nb__dtype_ok("nb_linspace", dtype)) return NULL;
    if (steps < 0 || steps > ((int64_t)1 << 40)) {
        nb__error("nb_linspace: steps must be between 0 and 2^40, got %lld", (long long)steps);
        return NULL;
    }
    if (!isfinite(start) || !isfinite(end)) {
        nb__error("nb_linspace: start %g and end %g must be finite", start, end);
        return NULL;
    }
    nb_dtype hd = dtype == NB_F32 ? NB_F32 : nb__is_float(dtype) && dtype != NB_F64 ? NB_F32 : nb__is_float(dtype) ? NB_F64 : NB_I64;
    if (hd == NB_I64 && !(fabs(start) < 0x1p63 && fabs(end) < 0x1p63)) { /* torch refuses these too */
        nb__error("nb_linspace: start %g or end %g does not fit in %s", start, end, nb_dtype_name(dtype));
        return NULL;
    }
    size_t es = nb_dtype_size(hd);
    void *buf = malloc(es * (size_t)(steps ? steps : 1));
    if (!buf) {
        nb__error("nb_linspace: out of memory for %lld values", (long long)steps);
        return NULL;
    }
    int64_t half = steps == 1 ? 1 : steps / 2; /* one step is start, as torch and NumPy */
    if (hd == NB_F32) {
        float s0 = (float)start, s1 = (float)end, step = steps > 1 ? (s1 - s0) / (float)(steps - 1) : 0;
        for (int64_t i = 0; i < steps; i++) ((float *)buf)[i] = i < half ? s0 + step * (float)i : s1 - step * (float)(steps - i - 1);
    } else {
        if (hd == NB_I64) { /* torch converts the ends to the integer type first */
            start = trunc(start);
            end = trunc(end);
        }
        double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
        for (int64_t i = 0; i < steps; i++) {
            double v = i < half ? start + step * (double)i : end - step * (double)(steps - i - 1);
            if (hd == NB_F64) ((double *)buf)[i] = v;
            else ((int64_t *)buf)[i] = (int64_t)v;
        }
    }
    COMPOSITE_BEGIN
    result_ = nb_cast(nb_from_data(buf, NB_SHAPE(steps), hd), dtype);
    free(buf);
    COMPOSITE_END
}
