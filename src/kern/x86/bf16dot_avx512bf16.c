/*
 * bf16dot_avx512bf16.c — the AVX512-BF16 tier of the bfloat16 dot-product
 * GEMM (bf16dot.h). Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 (CMake
 * adds them for *_avx512bf16.c) and only called after bf16dot.c's CPU check.
 *
 * Per pair of k: the panel's two vectors of 16 columns, and each row's pair
 * of A broadcast into vdpbf16ps, two products per lane an instruction — twice
 * an FMA's — into 2 accumulators per row, 16 in all: enough chains to cover
 * the instruction's latency at 8 rows.
 */
#include "../bf16dot.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include <immintrin.h>

bool kern_bf16dot_avx512bf16_built(void) { return true; }

void kern_bf16dot_round_avx512bf16(const float *x, int64_t k, uint32_t *pairs) {
  uint16_t *out = (uint16_t *)pairs;
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    _mm256_storeu_si256((__m256i *)(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
  if (i < k) {
    const __mmask16 m = (__mmask16)((1u << (k - i)) - 1);
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
  if (k & 1) out[k] = 0;
}

static inline __attribute__((always_inline)) void tile(const int mr, int64_t kp, const uint32_t *a, int64_t rs_a,
                                                       const uint32_t *b, float *c, int64_t ldc, int nv,
                                                       float alpha, float beta, const float *bias,
                                                       const uint32_t *pf, int64_t pf_rows) {
  __m512 acc[BF16DOT_MR][2];
  for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; p++) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)(b + p * BF16DOT_NR));
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512((const void *)(b + p * BF16DOT_NR + 16));
    if (p < pf_rows) {
      _mm_prefetch((const char *)(pf + p * BF16DOT_NR), _MM_HINT_T1);
      _mm_prefetch((const char *)(pf + p * BF16DOT_NR + 16), _MM_HINT_T1);
    }
    for (int r = 0; r < mr; r++) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[r * rs_a + p]);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], b0, ar);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], b1, ar);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int h = 0; h < 2; h++) {
    const int cols = nv - 16 * h;
    if (cols <= 0) break;
    const __mmask16 m = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + 16 * h) : _mm512_setzero_ps();
    for (int r = 0; r < mr; r++) {
      float *cr = c + r * ldc + 16 * h;
      __m512 v = alpha == 1.0f ? acc[r][h] : _mm512_mul_ps(va, acc[r][h]);
      if (beta != 0.0f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, cr), v);
      if (bias) v = _mm512_add_ps(v, bv);
      _mm512_mask_storeu_ps(cr, m, v);
    }
  }
}

void kern_bf16dot_tile_avx512bf16(int mr, int64_t kp, const uint32_t *a, int64_t rs_a, const uint32_t *b,
                                  float *c, int64_t ldc, int nv, float alpha, float beta, const float *bias,
                                  const uint32_t *pf, int64_t pf_rows) {
  switch (mr) {
  case 1: tile(1, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  case 2: tile(2, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  case 3: tile(3, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  case 4: tile(4, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  case 5: tile(5, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  case 6: tile(6, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  case 7: tile(7, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  default: tile(8, kp, a, rs_a, b, c, ldc, nv, alpha, beta, bias, pf, pf_rows); break;
  }
}

#else

bool kern_bf16dot_avx512bf16_built(void) { return false; }
void kern_bf16dot_round_avx512bf16(const float *x, int64_t k, uint32_t *pairs) {
  (void)x, (void)k, (void)pairs;
}
void kern_bf16dot_tile_avx512bf16(int mr, int64_t kp, const uint32_t *a, int64_t rs_a, const uint32_t *b,
                                  float *c, int64_t ldc, int nv, float alpha, float beta, const float *bias,
                                  const uint32_t *pf, int64_t pf_rows) {
  (void)mr, (void)kp, (void)a, (void)rs_a, (void)b, (void)c, (void)ldc, (void)nv, (void)alpha, (void)beta,
      (void)bias;
}

#endif
