/*
 * x86/vmath_avx2.c — vmath.h's loops compiled with AVX2 + FMA (CMake gives
 * *_avx2.c files those flags), and float16 ⇄ float conversion with F16C.
 * Called only through the dispatch in vmath.c, after the CPU check.
 */
/* The selects in vmath.h become blends only when GCC may evaluate both
 * sides regardless of FP exceptions, which tolk never inspects; values do
 * not change (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "../kern.h"
#include "../vmath.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include "../../core/half.h"

VM_LOOPS(avx2)

void kern_f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++) dst[i] = tolk_f16_to_f32(src[i]);
}

void kern_f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = tolk_f32_to_f16(src[i]);
}
#endif
