/*
 * half.h — IEEE float16 (binary16) and bfloat16 conversions to and from float
 * and double, for kernels that store 16-bit floats and compute in fp32.
 *
 * Narrowing rounds to nearest, ties to even, in one step from the source
 * (double → float16 does not pass through float, which could round twice).
 * Overflow gives ±Inf, tiny values become subnormals or ±0, NaN stays NaN
 * (made quiet; the sign and the top payload bits are kept). Widening is exact.
 * Everything is integer bit manipulation, so results do not depend on the
 * FPU's rounding mode or on compiler flags.
 */
#ifndef TOLK_HALF_H
#define TOLK_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tolk_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float tolk_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint64_t tolk_f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* float16 bits → float (exact). */
static inline float tolk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return tolk_bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    /* Zero or subnormal: man × 2^-24, exact in float. */
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
  }
  return tolk_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* float → float16 bits, round to nearest even. */
static inline uint16_t tolk_f32_to_f16(float f) {
  uint32_t x = tolk_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  uint32_t e = ax >> 23, man = ax & 0x7fffffu;
  if (e == 0xff) return (uint16_t)(sign | (man ? 0x7e00u | (man >> 13) : 0x7c00u));
  if (e >= 143) return (uint16_t)(sign | 0x7c00u); /* ≥ 2^16: Inf */
  if (e >= 113) {
    /* Normal in float16; a carry out of the mantissa bumps the exponent,
     * up to Inf, which is the right answer. */
    uint32_t h = ((e - 112) << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  /* Subnormal (or zero) in float16: count units of 2^-24. */
  uint32_t shift = 126 - e; /* ≥ 14 */
  if (shift > 24) return sign;
  uint32_t m = man | 0x800000u;
  uint32_t q = m >> shift, r = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (r > half || (r == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

/* double → float16 bits, round to nearest even, in one rounding. */
static inline uint16_t tolk_f64_to_f16(double d) {
  uint64_t x = tolk_f64_bits(d);
  uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
  uint64_t ax = x & 0x7fffffffffffffffull;
  uint64_t e = ax >> 52, man = ax & 0xfffffffffffffull;
  if (e == 0x7ff) return (uint16_t)(sign | (man ? 0x7e00u | (uint32_t)(man >> 42) : 0x7c00u));
  if (e >= 1039) return (uint16_t)(sign | 0x7c00u);
  if (e >= 1009) {
    uint64_t h = ((e - 1008) << 10) | (man >> 42), rem = man & ((1ull << 42) - 1);
    uint64_t half = 1ull << 41;
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint64_t shift = 1051 - e; /* ≥ 43 */
  if (shift > 53) return sign;
  uint64_t m = man | (1ull << 52);
  uint64_t q = m >> shift, r = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (r > half || (r == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

/* bfloat16 bits → float (exact). */
static inline float tolk_bf16_to_f32(uint16_t b) { return tolk_bits_f32((uint32_t)b << 16); }

/* float → bfloat16 bits, round to nearest even. */
static inline uint16_t tolk_f32_to_bf16(float f) {
  uint32_t x = tolk_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* double → bfloat16 bits, round to nearest even, in one rounding. */
static inline uint16_t tolk_f64_to_bf16(double d) {
  uint64_t x = tolk_f64_bits(d);
  uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
  uint64_t ax = x & 0x7fffffffffffffffull;
  uint64_t e = ax >> 52, man = ax & 0xfffffffffffffull;
  if (e == 0x7ff) return (uint16_t)(sign | (man ? 0x7fc0u | (uint32_t)(man >> 45) : 0x7f80u));
  if (e >= 1151) return (uint16_t)(sign | 0x7f80u); /* ≥ 2^128 */
  if (e >= 897) {
    uint64_t h = ((e - 896) << 7) | (man >> 45), rem = man & ((1ull << 45) - 1);
    uint64_t half = 1ull << 44;
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  /* Subnormal in bfloat16: units of 2^-133. */
  uint64_t shift = 942 - e; /* ≥ 46 */
  if (shift > 53) return sign;
  uint64_t m = man | (1ull << 52);
  uint64_t q = m >> shift, r = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (r > half || (r == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

/* Bulk forms: n elements, no aliasing between src and dst. */
static inline void tolk_f16_to_f32_n(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = tolk_f16_to_f32(src[i]);
}
static inline void tolk_f32_to_f16_n(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = tolk_f32_to_f16(src[i]);
}
static inline void tolk_bf16_to_f32_n(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = tolk_bf16_to_f32(src[i]);
}
static inline void tolk_f32_to_bf16_n(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = tolk_f32_to_bf16(src[i]);
}

#endif /* TOLK_HALF_H */
