/*
 * igemm_avx2.c — the AVX2 micro-kernel of the 8-bit GEMM (igemm.h). Compiled
 * with -mavx2 (CMake adds it for *_avx2.c) and only called after the CPU
 * check in igemm.c.
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

/* Named accumulators rather than an array: GCC keeps an array of vectors in
 * memory when the row loop is not fully unrolled, which costs half the
 * speed. MR is a constant in every instantiation, so the `MR > r` tests
 * fold away. */
#define ROW_STEP(r)                                                   \
  if (MR > r) {                                                      \
    __m256i a = _mm256_set1_epi32(pa[r * pa_ld + q]);                \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(a, b0));   \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(a, b1));   \
  }
#define ROW_STORE(r)                                                                   \
  if (MR > r) {                                                                       \
    _mm256_storeu_si256((__m256i *)(tile + r * KERN_IGEMM_NR), c##r##0);              \
    _mm256_storeu_si256((__m256i *)(tile + r * KERN_IGEMM_NR + 8), c##r##1);          \
  }

static inline __attribute__((always_inline)) void
tile_mr(const int MR, int64_t kp, const int32_t *pa, int64_t pa_ld, const uint8_t *panel,
        const bool b_signed, int32_t *tile) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t q = 0; q < kp; q++) {
    const __m128i *bq = (const __m128i *)(panel + q * 2 * KERN_IGEMM_NR);
    __m128i r0 = _mm_loadu_si128(bq), r1 = _mm_loadu_si128(bq + 1);
    __m256i b0 = b_signed ? _mm256_cvtepi8_epi16(r0) : _mm256_cvtepu8_epi16(r0);
    __m256i b1 = b_signed ? _mm256_cvtepi8_epi16(r1) : _mm256_cvtepu8_epi16(r1);
    ROW_STEP(0)
    ROW_STEP(1)
    ROW_STEP(2)
    ROW_STEP(3)
    ROW_STEP(4)
    ROW_STEP(5)
  }
  ROW_STORE(0)
  ROW_STORE(1)
  ROW_STORE(2)
  ROW_STORE(3)
  ROW_STORE(4)
  ROW_STORE(5)
}

#define TILE_CASE(MR)                                              \
  case MR:                                                         \
    if (b_signed)                                                  \
      tile_mr(MR, kp, pa, pa_ld, panel, true, tile);               \
    else                                                           \
      tile_mr(MR, kp, pa, pa_ld, panel, false, tile);              \
    break;

void kern_igemm_tile_avx2(int mr, int64_t kp, const int32_t *pa, int64_t pa_ld,
                          const uint8_t *panel, bool b_signed, int32_t *tile) {
  switch (mr) {
    TILE_CASE(1)
    TILE_CASE(2)
    TILE_CASE(3)
    TILE_CASE(4)
    TILE_CASE(5)
    TILE_CASE(6)
  default: break;
  }
}

#else
/* Not an x86 build: igemm.c never selects this. */
void kern_igemm_tile_avx2(int mr, int64_t kp, const int32_t *pa, int64_t pa_ld,
                          const uint8_t *panel, bool b_signed, int32_t *tile) {
  (void)mr, (void)kp, (void)pa, (void)pa_ld, (void)panel, (void)b_signed, (void)tile;
}
#endif
