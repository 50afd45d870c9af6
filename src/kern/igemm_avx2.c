/*
 * igemm_avx2.c — the AVX2 micro-kernel of the 8-bit GEMM (igemm.h). Compiled
 * with -mavx2 (CMake adds it for *_avx2.c) and only called after the CPU
 * check in igemm.c. The tile's loop is igemm_tmpl.h's; this file gives its
 * inner product.
 *
 * Per pair of k: 32 bytes of the B panel are widened to int16 (zero- or
 * sign-extended) into two registers of 8 columns each; each row's packed A
 * pair (two int16 already minus the zero point) is broadcast and vpmaddwd
 * forms a0*b0 + a1*b1 per column, exact in int32. 6 rows x 2 registers = 12
 * accumulators, plus 2 for B and 1 for A: 15 of the 16 ymm registers.
 */
#include "igemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define IGT_BUILT 1
#define IGT_V __m256i
#define IGT_STEP 1
#define IGT_T_BYTES (2 * KERN_IGEMM_NR)

static inline __m256i igt_zero(void) { return _mm256_setzero_si256(); }

/* Pair row t of the panel: columns 0-7 to *b0, 8-15 to *b1, as int16. */
static inline void igt_load(const uint8_t *panel, int64_t t, bool b_signed, __m256i *b0,
                            __m256i *b1) {
  const __m128i *bq = (const __m128i *)(panel + t * IGT_T_BYTES);
  __m128i r0 = _mm_loadu_si128(bq), r1 = _mm_loadu_si128(bq + 1);
  *b0 = b_signed ? _mm256_cvtepi8_epi16(r0) : _mm256_cvtepu8_epi16(r0);
  *b1 = b_signed ? _mm256_cvtepi8_epi16(r1) : _mm256_cvtepu8_epi16(r1);
}

static inline void igt_madd(__m256i *c0, __m256i *c1, const int32_t *a, __m256i b0, __m256i b1) {
  __m256i av = _mm256_set1_epi32(*a);
  *c0 = _mm256_add_epi32(*c0, _mm256_madd_epi16(av, b0));
  *c1 = _mm256_add_epi32(*c1, _mm256_madd_epi16(av, b1));
}

static inline void igt_store(int32_t *row, __m256i c0, __m256i c1) {
  _mm256_storeu_si256((__m256i *)row, c0);
  _mm256_storeu_si256((__m256i *)(row + 8), c1);
}

#else /* not x86: the template's stand-in, never selected */
#define IGT_BUILT 0
#endif

#define IGT_NAME kern_igemm_tile_avx2
#define IGT_ROW_NAME kern_igemm_row_avx2
#define IGT_A int32_t
#include "igemm_tmpl.h"

#define IGF_NAME kern_igemm_finish_avx2
#include "igemm_finish.h"
