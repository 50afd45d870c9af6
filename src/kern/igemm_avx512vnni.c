/*
 * igemm_avx512vnni.c — the AVX-512 VNNI micro-kernel of the 8-bit GEMM
 * (igemm.h). Compiled with -mavx512f -mavx512bw -mavx512vnni (CMake adds
 * them for *_avx512vnni.c) and only called after the CPU check in igemm.c.
 * The tile's loop is igemm_tmpl.h's; this file gives its inner product.
 *
 * Per quad of k (two pair rows of the panel, 64 contiguous bytes): one vpermw
 * puts each column's 4 bytes in its own 32-bit lane, 16 columns to the zmm;
 * each row's 4 uint8 of A are broadcast and vpdpbusd adds the 4 products
 * into that row's accumulator — 64 multiply-adds an instruction, against
 * AVX2's 16 per vpmaddwd. vpdpbusd has a latency of several cycles, so even
 * and odd quads go to separate accumulators (12 of the 32 zmm: the
 * template's IGT_STEP 2) and are added at the end: wrapping int32
 * addition, so the order does not matter.
 */
#include <stdbool.h>

#include "igemm.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>

#define IGT_BUILT 1
#define IGT_V __m512i
#define IGT_STEP 2
#define IGT_T_BYTES 64

static inline __m512i igt_zero(void) { return _mm512_setzero_si512(); }

/* Quad t of the panel, each column's 4 bytes in its lane. The index vector
 * is loop-invariant: the compiler keeps it in a register. */
static inline __m512i igt_load_last(const uint8_t *panel, int64_t t, bool flip) {
  const __m512i perm = _mm512_loadu_si512((const void *)kern_igemm_quad_perm);
  __m512i b = _mm512_permutexvar_epi16(perm, _mm512_loadu_si512((const void *)(panel + t * IGT_T_BYTES)));
  return flip ? _mm512_xor_si512(b, _mm512_set1_epi8((char)0x80)) : b;
}

static inline void igt_load(const uint8_t *panel, int64_t t, bool flip, __m512i *b0, __m512i *b1) {
  *b0 = igt_load_last(panel, t, flip);
  *b1 = igt_load_last(panel, t + 1, flip);
}

static inline __m512i igt_madd_last(__m512i c, const uint32_t *a, __m512i b) {
  return _mm512_dpbusd_epi32(c, _mm512_set1_epi32((int)*a), b);
}

/* Quads t and t+1: a[0] with b0 into c0, a[1] with b1 into c1. */
static inline void igt_madd(__m512i *c0, __m512i *c1, const uint32_t *a, __m512i b0, __m512i b1) {
  *c0 = igt_madd_last(*c0, a, b0);
  *c1 = igt_madd_last(*c1, a + 1, b1);
}

static inline void igt_store(int32_t *row, __m512i c0, __m512i c1) {
  _mm512_storeu_si512((void *)row, _mm512_add_epi32(c0, c1));
}

#else /* a compiler without the flags, or not x86: the template's stand-in, never selected */
#define IGT_BUILT 0
#endif

#define IGT_NAME kern_igemm_qtile_avx512vnni
#define IGT_ROW_NAME kern_igemm_qrow_avx512vnni
#define IGT_A uint32_t
#define IGT_BUILT_FN kern_igemm_avx512vnni_built
#include "igemm_tmpl.h"

#define IGF_NAME kern_igemm_finish_avx512vnni
#include "igemm_finish.h"
