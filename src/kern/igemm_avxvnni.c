/*
 * igemm_avxvnni.c — the AVX-VNNI (VEX, 256-bit) micro-kernel of the 8-bit
 * GEMM (igemm.h), for the CPUs that have vpdpbusd without AVX-512 (Alder
 * Lake and later client cores, Zen 5). Compiled with -mavx2 -mavxvnni (CMake
 * adds them for *_avxvnni.c) and only called after the CPU check in igemm.c.
 *
 * Per quad of k: the two pair rows (32 bytes each) are interleaved by 16-bit
 * units, vpunpcklwd giving columns 0-3 and 8-11 and vpunpckhwd 4-7 and 12-15
 * with each column's 4 bytes in one 32-bit lane; vpdpbusd adds each row's 4
 * uint8 × 4 int8 products. 6 rows × 2 = 12 accumulators, 2 for B, 1 for A.
 * The lane order is undone when the tile is stored.
 */
#include <stdbool.h>

#include "igemm.h"

#if defined(__AVXVNNI__) && defined(__AVX2__)
#include <immintrin.h>

bool kern_igemm_avxvnni_built(void) { return true; }

#define ROW_STEP(r)                                                 \
  if (MR > r) {                                                    \
    __m256i a = _mm256_set1_epi32((int)pa[r * pa_ld + t]);         \
    c##r##0 = _mm256_dpbusd_avx_epi32(c##r##0, a, lo);             \
    c##r##1 = _mm256_dpbusd_avx_epi32(c##r##1, a, hi);             \
  }
#define ROW_STORE(r)                                                                     \
  if (MR > r) {                                                                         \
    _mm256_storeu_si256((__m256i *)(tile + r * KERN_IGEMM_NR),                          \
                        _mm256_permute2x128_si256(c##r##0, c##r##1, 0x20));             \
    _mm256_storeu_si256((__m256i *)(tile + r * KERN_IGEMM_NR + 8),                      \
                        _mm256_permute2x128_si256(c##r##0, c##r##1, 0x31));             \
  }

static inline __attribute__((always_inline)) void
tile_mr(const int MR, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
        const bool flip, int32_t *tile) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t t = 0; t < kq; t++) {
    const __m256i *bq = (const __m256i *)(panel + t * 64);
    __m256i r0 = _mm256_loadu_si256(bq), r1 = _mm256_loadu_si256(bq + 1);
    if (flip) {
      const __m256i f = _mm256_set1_epi8((char)0x80);
      r0 = _mm256_xor_si256(r0, f);
      r1 = _mm256_xor_si256(r1, f);
    }
    __m256i lo = _mm256_unpacklo_epi16(r0, r1), hi = _mm256_unpackhi_epi16(r0, r1);
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

#define TILE_CASE(MR)                                   \
  case MR:                                              \
    if (b_flip)                                         \
      tile_mr(MR, kq, pa, pa_ld, panel, true, tile);    \
    else                                                \
      tile_mr(MR, kq, pa, pa_ld, panel, false, tile);   \
    break;

void kern_igemm_qtile_avxvnni(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
                              const uint8_t *panel, bool b_flip, int32_t *tile) {
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
/* A compiler without -mavxvnni (or not x86): igemm.c never selects this. */
bool kern_igemm_avxvnni_built(void) { return false; }
void kern_igemm_qtile_avxvnni(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
                              const uint8_t *panel, bool b_flip, int32_t *tile) {
  (void)mr, (void)kq, (void)pa, (void)pa_ld, (void)panel, (void)b_flip, (void)tile;
}
#endif
