/* dtype.c — dtype facts (names, sizes, classes), host conversions of bf16/f16, and the
 * element load/store helpers the interpreter and host transfers use. */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

typedef struct dtype_info {
  const char *name;
  uint8_t size, bits;
  bool is_float, is_signed;
} dtype_info;

static const dtype_info dtypes[] = {
    [LJ_F32] = {"f32", 4, 32, true, true},
    [LJ_F64] = {"f64", 8, 64, true, true},
    [LJ_BF16] = {"bf16", 2, 16, true, true},
    [LJ_F16] = {"f16", 2, 16, true, true},
    [LJ_I8] = {"i8", 1, 8, false, true},
    [LJ_U8] = {"u8", 1, 8, false, false},
    [LJ_I32] = {"i32", 4, 32, false, true},
    [LJ_I64] = {"i64", 8, 64, false, true},
    [LJ_BOOL] = {"bool", 1, 1, false, false},
    [LJ_I16] = {"i16", 2, 16, false, true},
};
_Static_assert(LJ_COUNT_OF(dtypes) == LJ_NUM_DTYPES, "dtype table out of date");

bool ljg_dtype_valid(int dt) { return dt >= 0 && dt < LJ_NUM_DTYPES; }
bool ljg_dtype_is_float(lj_dtype dt) { return dtypes[dt].is_float; }
bool ljg_dtype_is_signed(lj_dtype dt) { return dtypes[dt].is_signed; }
bool ljg_dtype_is_index(lj_dtype dt) { return dt == LJ_I64 || dt == LJ_I32 || dt == LJ_I8; }
int ljg_dtype_bits(lj_dtype dt) { return dtypes[dt].bits; }

const char *lj_dtype_name(lj_dtype dt) { return ljg_dtype_valid((int)dt) ? dtypes[dt].name : "?"; }
size_t lj_dtype_size(lj_dtype dt) { return ljg_dtype_valid((int)dt) ? dtypes[dt].size : 0; }

int ljg_dtype_by_name(const char *name) {
  for (int i = 0; i < LJ_NUM_DTYPES; i++)
    if (strcmp(dtypes[i].name, name) == 0) return i;
  return -1;
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float ljg_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

uint16_t ljg_f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float ljg_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return f32_from_bits(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t ljg_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  uint32_t h;
  if (x >= 0x47800000u) {
    h = x > 0x7f800000u ? 0x7e00u : 0x7c00u; /* NaN, or inf / overflow */
  } else if (x < 0x38800000u) {
    /* Below the smallest normal half: adding 0.5 leaves round(x / 2^-24) in the low bits,
     * rounded to nearest even by the FPU. */
    h = f32_bits(f32_from_bits(x) + 0.5f) - 0x3f000000u;
  } else {
    uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000000u + 0xfffu + odd; /* rebias the exponent 127 -> 15, round to even */
    h = x >> 13;
  }
  return (uint16_t)(sign | h);
}

double ljg_load_f64(lj_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case LJ_F32: return ((const float *)p)[i];
  case LJ_F64: return ((const double *)p)[i];
  case LJ_BF16: return ljg_bf16_to_f32(((const uint16_t *)p)[i]);
  case LJ_F16: return ljg_f16_to_f32(((const uint16_t *)p)[i]);
  default: return (double)ljg_load_i64(dt, p, i);
  }
}

int64_t ljg_load_i64(lj_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case LJ_I8: return ((const int8_t *)p)[i];
  case LJ_U8: return ((const uint8_t *)p)[i];
  case LJ_I16: return ((const int16_t *)p)[i];
  case LJ_I32: return ((const int32_t *)p)[i];
  case LJ_I64: return ((const int64_t *)p)[i];
  case LJ_BOOL: return ((const uint8_t *)p)[i] != 0;
  default: return ljg_float_to_int(LJ_I64, ljg_load_f64(dt, p, i));
  }
}

void ljg_store_f64(lj_dtype dt, void *p, int64_t i, double v) {
  switch (dt) {
  case LJ_F32: ((float *)p)[i] = (float)v; break;
  case LJ_F64: ((double *)p)[i] = v; break;
  case LJ_BF16: ((uint16_t *)p)[i] = ljg_f32_to_bf16((float)v); break;
  case LJ_F16: ((uint16_t *)p)[i] = ljg_f32_to_f16((float)v); break;
  default: ljg_store_i64(dt, p, i, ljg_float_to_int(dt, v)); break;
  }
}

void ljg_store_i64(lj_dtype dt, void *p, int64_t i, int64_t v) {
  switch (dt) {
  case LJ_I8: ((int8_t *)p)[i] = (int8_t)v; break;
  case LJ_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  case LJ_I16: ((int16_t *)p)[i] = (int16_t)v; break;
  case LJ_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case LJ_I64: ((int64_t *)p)[i] = v; break;
  case LJ_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  case LJ_F32: ((float *)p)[i] = (float)v; break;
  default: ljg_store_f64(dt, p, i, (double)v); break;
  }
}

int64_t ljg_float_to_int(lj_dtype to, double v) {
  if (to == LJ_BOOL) return v != 0 || isnan(v);
  if (to == LJ_I64) {
    if (!(v >= -0x1p63 && v < 0x1p63)) return INT64_MIN;
    return (int64_t)v;
  }
  int32_t w = (v >= -0x1p31 && v < 0x1p31) ? (int32_t)v : INT32_MIN;
  switch (to) {
  case LJ_I8: return (int8_t)w;
  case LJ_U8: return (uint8_t)w;
  case LJ_I16: return (int16_t)w;
  default: return w;
  }
}
