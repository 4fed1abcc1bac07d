/* Element conversions: f16 and bf16 to and from f32, and generic element load/store. */
#include "core_impl.h"
#include <math.h>
#include <string.h>

float nb__f16_to_f32(uint16_t h) {
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

uint16_t nb__f32_to_f16(float f) { /* round to nearest even */
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

double nb__load(const void *p, nb_dtype d, int64_t i) {
    switch (d) {
    case NB_F32: return ((const float *)p)[i];
    case NB_F64: return ((const double *)p)[i];
    case NB_F16: return nb__f16_to_f32(((const uint16_t *)p)[i]);
    case NB_BF16: return nb__bf16_to_f32(((const uint16_t *)p)[i]);
    case NB_I64: return (double)((const int64_t *)p)[i];
    case NB_I32: return ((const int32_t *)p)[i];
    case NB_U8: return ((const uint8_t *)p)[i];
    case NB_BOOL: return ((const uint8_t *)p)[i] != 0;
    case NB_I8: return ((const int8_t *)p)[i];
    default: return NAN;
    }
}

void nb__store(void *p, nb_dtype d, int64_t i, double v) {
    switch (d) {
    case NB_F32: ((float *)p)[i] = (float)v; break;
    case NB_F64: ((double *)p)[i] = v; break;
    case NB_F16: ((uint16_t *)p)[i] = nb__f32_to_f16((float)v); break;
    case NB_BF16: ((uint16_t *)p)[i] = nb__f32_to_bf16((float)v); break;
    case NB_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case NB_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case NB_U8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
    case NB_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case NB_I8: ((int8_t *)p)[i] = nb__to_i8(v); break;
    default: break;
    }
}
