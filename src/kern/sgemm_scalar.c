/*
 * sgemm_scalar.c — the portable SGEMM micro-kernel (TOLK_ISA=scalar, and any
 * CPU without AVX2): a 6 × 8 tile on GCC vector extensions of 4 floats, which
 * the compiler maps to the baseline ISA (SSE2 on x86-64, NEON on arm64) or to
 * scalar code. The tile logic is sgemm_tmpl.h's.
 */
#include <stdint.h>
#include <string.h>

typedef float V __attribute__((vector_size(16)));
#define VL 4

static inline V v_zero(void) { return (V){0, 0, 0, 0}; }
static inline V v_loadu(const float *p) {
  V v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline V v_set1(float x) { return (V){x, x, x, x}; }
static inline V v_bcast(const float *p) { return v_set1(*p); }
static inline V v_fma(V a, V b, V c) { return a * b + c; }
static inline V v_mul(V a, V b) { return a * b; }
static inline V v_add(V a, V b) { return a + b; }
static inline V v_sub(V a, V b) { return a - b; }
static inline V v_from_u8(const uint8_t *p) { return (V){p[0], p[1], p[2], p[3]}; }
static inline V v_from_s8(const uint8_t *p) {
  return (V){(int8_t)p[0], (int8_t)p[1], (int8_t)p[2], (int8_t)p[3]};
}
static inline V v_from_bf16(const uint16_t *p) {
  V v;
  for (int i = 0; i < 4; i++) {
    uint32_t bits = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    v[i] = f;
  }
  return v;
}
static inline V v_load_n(const float *p, int64_t n) {
  V v = v_zero();
  for (int64_t i = 0; i < n; i++) v[i] = p[i];
  return v;
}
static inline void v_store(float *p, V v) { memcpy(p, &v, sizeof v); }
static inline void v_store_n(float *p, V v, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = v[i];
}

#define TMPL_MR 6
#define TMPL_KC 256
#define TMPL_MC 96
#define TMPL_ISA KERN_ISA_SCALAR
#define TMPL_NAME kern_sgemm_ukr_scalar
#include "sgemm_tmpl.h"
