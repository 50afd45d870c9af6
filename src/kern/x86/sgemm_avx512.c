/*
 * sgemm_avx512.c — the SGEMM micro-kernel for AVX-512F: a 6 × 32 tile (12 zmm
 * accumulators; the broadcasts fold into the FMAs as {1to16} operands).
 * CMake compiles this file with the AVX-512 flags; the driver calls it only
 * after checking the CPU. The tile logic is sgemm_tmpl.h's, the same the
 * AVX2 and scalar instantiations run.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <stdint.h>

typedef __m512 V;
#define VL 16

static inline __mmask16 v_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); }
static inline V v_zero(void) { return _mm512_setzero_ps(); }
static inline V v_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline V v_bcast(const float *p) { return _mm512_set1_ps(*p); }
static inline V v_set1(float x) { return _mm512_set1_ps(x); }
static inline V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V v_add(V a, V b) { return _mm512_add_ps(a, b); }
static inline V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V v_from_u8(const uint8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
static inline V v_from_s8(const uint8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
static inline V v_from_bf16(const uint16_t *p) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
static inline V v_load_n(const float *p, int64_t n) { return _mm512_maskz_loadu_ps(v_mask(n), p); }
static inline void v_store(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline void v_store_n(float *p, V v, int64_t n) { _mm512_mask_storeu_ps(p, v_mask(n), v); }

#define TMPL_MR 6
#define TMPL_KC 192 /* 192 × 32 floats = 24 KiB of B in L1 */
#define TMPL_MC 96
#define TMPL_ISA KERN_ISA_AVX512
#define TMPL_NAME kern_sgemm_ukr_avx512
#include "../sgemm_tmpl.h"

#endif
