/* The bit-exact pieces that the library's C and the CUDA backend's device code (src/backend/cuda)
   both compile, in one copy: the f16 and bf16 conversions and the Philox rounds of the random
   generator, and the bytes of each dtype. Plain C that nvcc also reads: NB_PORTABLE gives each function its host and device
   forms there. Includes nothing of nabla's. */
#ifndef NB_CORE_PORTABLE_H
#define NB_CORE_PORTABLE_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define NB_PORTABLE static inline __host__ __device__
#else
#define NB_PORTABLE static inline
#endif

/* Bytes per element of dtype d (nb_dtype's order: f32, f64, f16, bf16, i64, i32, u8, bool, i8);
   the one table of them. 0 for a value out of range, which callers check first. */
NB_PORTABLE unsigned nb__dtype_bytes(int d) {
    switch (d) {
    case 0: case 5: return 4;
    case 1: case 4: return 8;
    case 2: case 3: return 2;
    case 6: case 7: case 8: return 1;
    default: return 0;
    }
}

/* f16 bits to f32, exactly (subnormals normalised). */
NB_PORTABLE float nb__half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* f32 to the nearest f16 bits, ties to even; NaN stays a NaN, overflow is infinity. */
NB_PORTABLE uint16_t nb__float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return (uint16_t)half;
}

/* bf16 is the top half of an f32: widening is a shift */
NB_PORTABLE float nb__bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Rounds to the nearest bf16, ties to even (as torch and oneDNN do); NaN stays a quiet NaN.
   Inline: autocast converts every operand of a product with it. */
NB_PORTABLE uint16_t nb__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16, nan = (x >> 16) | 0x40; /* NaN: quieted */
    /* a select, not a branch, so that loops over it vectorise */
    return (uint16_t)((x & 0x7fffffff) > 0x7f800000 ? nan : rounded);
}

/* Philox4x32-10: four 32-bit words for (seed, counter). */
NB_PORTABLE void nb__philox_block(uint64_t seed, uint64_t counter, uint32_t out[4]) {
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

#endif
