/*
 * igemm_avx512vnni.c — the AVX-512 VNNI micro-kernel of the 8-bit GEMM
 * (igemm.h). Compiled with -mavx512f -mavx512bw -mavx512vnni (CMake adds
 * them for *_avx512vnni.c) and only called after the CPU check in igemm.c.
 *
 * Per quad of k (two pair rows of the panel, 64 contiguous bytes): one vpermw
 * puts each column's 4 bytes in its own 32-bit lane, 16 columns to the zmm;
 * each row's 4 uint8 of A are broadcast and vpdpbusd adds the 4 products
 * into that row's accumulator — 64 multiply-adds an instruction, against
 * AVX2's 16 per vpmaddwd. vpdpbusd has a latency of several cycles, so even
 * and odd quads go to separate accumulators (12 of the 32 zmm) and are added
 * at the end: wrapping int32 addition, so the order does not matter.
 */
#include <stdbool.h>

#include "igemm.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>

bool kern_igemm_avx512vnni_built(void) { return true; }

#define ROW_STEP(r, acc, b)                                                    \
  if (MR > r) acc##r = _mm512_dpbusd_epi32(acc##r, _mm512_set1_epi32((int)pa[r * pa_ld + t]), b);
#define ROW_STEP1(r, acc, b)                                                   \
  if (MR > r) acc##r = _mm512_dpbusd_epi32(acc##r, _mm512_set1_epi32((int)pa[r * pa_ld + t + 1]), b);
#define ROW_STORE(r)                                                                          \
  if (MR > r) _mm512_storeu_si512((void *)(tile + r * KERN_IGEMM_NR), _mm512_add_epi32(c##r, d##r));

/* Word 2j of the result is word j of the first pair row (k 4t, 4t+1 of
 * column j), word 2j+1 word j of the second (k 4t+2, 4t+3). */
static const int16_t quad_perm[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

static inline __attribute__((always_inline)) __m512i quad(const uint8_t *panel, int64_t t,
                                                          __m512i perm, const bool flip) {
  __m512i b = _mm512_permutexvar_epi16(perm, _mm512_loadu_si512((const void *)(panel + t * 64)));
  return flip ? _mm512_xor_si512(b, _mm512_set1_epi8((char)0x80)) : b;
}

static inline __attribute__((always_inline)) void
tile_mr(const int MR, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
        const bool flip, int32_t *tile) {
  const __m512i perm = _mm512_loadu_si512((const void *)quad_perm);
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  __m512i d0 = c0, d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0;
  int64_t t = 0;
  for (; t + 2 <= kq; t += 2) {
    __m512i b = quad(panel, t, perm, flip), b1 = quad(panel, t + 1, perm, flip);
    ROW_STEP(0, c, b) ROW_STEP(1, c, b) ROW_STEP(2, c, b)
    ROW_STEP(3, c, b) ROW_STEP(4, c, b) ROW_STEP(5, c, b)
    ROW_STEP1(0, d, b1) ROW_STEP1(1, d, b1) ROW_STEP1(2, d, b1)
    ROW_STEP1(3, d, b1) ROW_STEP1(4, d, b1) ROW_STEP1(5, d, b1)
  }
  if (t < kq) {
    __m512i b = quad(panel, t, perm, flip);
    ROW_STEP(0, c, b) ROW_STEP(1, c, b) ROW_STEP(2, c, b)
    ROW_STEP(3, c, b) ROW_STEP(4, c, b) ROW_STEP(5, c, b)
  }
  ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
}

#define TILE_CASE(MR)                                   \
  case MR:                                              \
    if (b_flip)                                         \
      tile_mr(MR, kq, pa, pa_ld, panel, true, tile);    \
    else                                                \
      tile_mr(MR, kq, pa, pa_ld, panel, false, tile);   \
    break;

void kern_igemm_qtile_avx512vnni(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
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
/* A compiler without the flags (or not x86): igemm.c never selects this. */
bool kern_igemm_avx512vnni_built(void) { return false; }
void kern_igemm_qtile_avx512vnni(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
                                 const uint8_t *panel, bool b_flip, int32_t *tile) {
  (void)mr, (void)kq, (void)pa, (void)pa_ld, (void)panel, (void)b_flip, (void)tile;
}
#endif
