/* Element conversions: f16 and bf16 to and from f32, and generic element load/store. */
#include "core_impl.h"
#include <math.h>
#include <string.h>

float nb__f16_to_f32(uint16_t h) { return nb__half_to_float(h); }

uint16_t nb__f32_to_f16(float f) { return nb__float_to_half(f); }

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
