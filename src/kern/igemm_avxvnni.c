/*
 * igemm_avxvnni.c — the AVX-VNNI (VEX, 256-bit) micro-kernel of the 8-bit
 * GEMM (igemm.h), for the CPUs that have vpdpbusd without AVX-512 (Alder
 * Lake and later client cores, Zen 5). Compiled with -mavx2 -mavxvnni (CMake
 * adds them for *_avxvnni.c) and only called after the CPU check in igemm.c.
 * The tile's loop is igemm_tmpl.h's; this file gives its inner product.
 *
 * Per quad of k: the two pair rows (32 bytes each) are interleaved by 16-bit
 * units, vpunpcklwd giving columns 0-3 and 8-11 and vpunpckhwd 4-7 and 12-15
 * with each column's 4 bytes in one 32-bit lane; vpdpbusd adds each row's 4
 * uint8 × 4 int8 products. 6 rows × 2 = 12 accumulators, 2 for B, 1 for A.
 * The lane order is undone when the tile is stored.
 */
#include <stdbool.h>

#include "igemm.h"

#if (defined(__AVXVNNI__) || defined(KERN_EMULATE_AVXVNNI)) && defined(__AVX2__)
#include <immintrin.h>

#ifdef KERN_EMULATE_AVXVNNI
/* vpdpbusd done exactly in AVX2, for tests/kern_igemm_avxvnni_emu.c: the
 * machines CI runs on have lacked AVX-VNNI (and QEMU's TCG lacks it), so a
 * test build runs the rest of this tier's code with this stand-in on any
 * AVX2 CPU. Each 32-bit lane adds its four uint8 x int8 products: the even
 * and the odd bytes widened to 16 bits, vpmaddwd summing pairs (at most
 * 2 x 255 x 128, no saturation) and the two sums added, wrapping as
 * vpdpbusd does. */
static inline __m256i igt_dpbusd(__m256i c, __m256i a, __m256i b) {
  __m256i a_even = _mm256_and_si256(a, _mm256_set1_epi16(0x00ff)), a_odd = _mm256_srli_epi16(a, 8);
  __m256i b_even = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), b_odd = _mm256_srai_epi16(b, 8);
  __m256i s = _mm256_add_epi32(_mm256_madd_epi16(a_even, b_even), _mm256_madd_epi16(a_odd, b_odd));
  return _mm256_add_epi32(c, s);
}
#else
#define igt_dpbusd _mm256_dpbusd_avx_epi32
#endif

#define IGT_BUILT 1
#define IGT_V __m256i
#define IGT_STEP 1
#define IGT_T_BYTES 64

static inline __m256i igt_zero(void) { return _mm256_setzero_si256(); }

static inline void igt_load(const uint8_t *panel, int64_t t, bool flip, __m256i *lo, __m256i *hi) {
  const __m256i *bq = (const __m256i *)(panel + t * IGT_T_BYTES);
  __m256i r0 = _mm256_loadu_si256(bq), r1 = _mm256_loadu_si256(bq + 1);
  if (flip) {
    const __m256i f = _mm256_set1_epi8((char)0x80);
    r0 = _mm256_xor_si256(r0, f);
    r1 = _mm256_xor_si256(r1, f);
  }
  *lo = _mm256_unpacklo_epi16(r0, r1);
  *hi = _mm256_unpackhi_epi16(r0, r1);
}

static inline void igt_madd(__m256i *c0, __m256i *c1, const uint32_t *a, __m256i lo, __m256i hi) {
  __m256i av = _mm256_set1_epi32((int)*a);
  *c0 = igt_dpbusd(*c0, av, lo);
  *c1 = igt_dpbusd(*c1, av, hi);
}

/* c0 holds columns 0-3 | 8-11, c1 4-7 | 12-15. */
static inline void igt_store(int32_t *row, __m256i c0, __m256i c1) {
  _mm256_storeu_si256((__m256i *)row, _mm256_permute2x128_si256(c0, c1, 0x20));
  _mm256_storeu_si256((__m256i *)(row + 8), _mm256_permute2x128_si256(c0, c1, 0x31));
}

#else /* a compiler without -mavxvnni, or not x86: the template's stand-in, never selected */
#define IGT_BUILT 0
#endif

#define IGT_NAME kern_igemm_qtile_avxvnni
#define IGT_ROW_NAME kern_igemm_qrow_avxvnni
#define IGT_A uint32_t
#define IGT_BUILT_FN kern_igemm_avxvnni_built
#include "igemm_tmpl.h"

#define IGF_NAME kern_igemm_finish_avxvnni
#include "igemm_finish.h"
