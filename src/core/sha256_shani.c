/*
 * sha256_shani.c — SHA-256 blocks with the x86 SHA extensions (sha256rnds2,
 * sha256msg1/2: Goldmont, Zen and Ice Lake on), chosen at run time by
 * sha256.c. A model folder's graphs are verified against their manifest at
 * every load, and the portable rounds hash ~0.25 GB/s: most of a full-size
 * model's start. The state is kept as the instructions want it, ABEF and
 * CDGH; the message schedule four words at a time.
 */
#include "sha256.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

bool sha256_shani_supported(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  bool sha = b & (1u << 29);
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return sha && (c & (1u << 19)) && (c & (1u << 9)); /* with SSE4.1 and SSSE3 */
}

__attribute__((target("sha,sse4.1,ssse3"))) void sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t n) {
  const uint32_t *k = sha256_k;
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* b a d c */
  __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* h g f e */
  __m128i abef = _mm_alignr_epi8(t, cdgh, 8);
  cdgh = _mm_blend_epi16(cdgh, t, 0xF0);
  for (; n; n--, p += 64) {
    __m128i abef0 = abef, cdgh0 = cdgh, w[4];
    for (int i = 0; i < 16; i++) {
      /* w[i % 4] holds words 4(i-4)..4(i-4)+3 until it is replaced by
       * words 4i..4i+3: σ0 of the group after it, the group three later,
       * σ1 of the newest two (msg2 chains them). */
      __m128i *x = &w[i % 4];
      if (i < 4) {
        *x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
      } else {
        __m128i y = _mm_sha256msg1_epu32(*x, w[(i + 1) % 4]);
        y = _mm_add_epi32(y, _mm_alignr_epi8(w[(i + 3) % 4], w[(i + 2) % 4], 4));
        *x = _mm_sha256msg2_epu32(y, w[(i + 3) % 4]);
      }
      __m128i m = _mm_add_epi32(*x, _mm_loadu_si128((const __m128i *)&k[4 * i]));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(m, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef0);
    cdgh = _mm_add_epi32(cdgh, cdgh0);
  }
  t = _mm_shuffle_epi32(abef, 0x1B);    /* a b e f */
  cdgh = _mm_shuffle_epi32(cdgh, 0xB1); /* g h c d */
  _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, cdgh, 0xF0));
  _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(cdgh, t, 8));
}
#else
bool sha256_shani_supported(void) { return false; }

void sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t n) { (void)h, (void)p, (void)n; }
#endif
