/*
 * sgemm_avx2.c — the SGEMM micro-kernel for AVX2 + FMA: a 6 × 16 tile (12 ymm
 * accumulators). CMake compiles this file with -mavx2 -mfma; the driver calls
 * it only after checking the CPU. The tile logic is sgemm_tmpl.h's.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <stdint.h>

typedef __m256 V;
#define VL 8

static inline __m256i v_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline V v_zero(void) { return _mm256_setzero_ps(); }
static inline V v_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline V v_bcast(const float *p) { return _mm256_broadcast_ss(p); }
static inline V v_set1(float x) { return _mm256_set1_ps(x); }
static inline V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V v_add(V a, V b) { return _mm256_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V v_from_u8(const uint8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
static inline V v_from_s8(const uint8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
static inline V v_from_bf16(const uint16_t *p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline V v_load_n(const float *p, int64_t n) { return _mm256_maskload_ps(p, v_mask(n)); }
static inline void v_store(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline void v_store_n(float *p, V v, int64_t n) { _mm256_maskstore_ps(p, v_mask(n), v); }

#define TMPL_MR 6
#define TMPL_KC 256 /* 256 × 16 floats = 16 KiB of B in L1 */
#define TMPL_MC 96  /* 96 × 256 floats = 96 KiB of A in L2 */
#define TMPL_ISA KERN_ISA_AVX2
#define TMPL_NAME kern_sgemm_ukr_avx2
#include "../sgemm_tmpl.h"

#endif
