/*
 * int8_forms.c — why tolk's AVX2 int8 GEMM widens to int16 and uses
 * vpmaddwd rather than vpmaddubsw: the throughput of three inner products
 * of a 6-row × 16-column int8 tile, one thread, operands in L1 (what the
 * tile does at batch 16 and up, where the int8 GEMM is compute-bound):
 *
 *   pmaddwd   tolk's (igemm_avx2.c): B widened to int16 (vpmovsxbw), A's
 *             (a - za) pairs broadcast, vpmaddwd into int32. Exact.
 *   sign      vpmaddubsw(|b|, sign(b) · (a - 128)) — the u8 · s8 pair sum
 *             kept under 2^15 — then widened to int32 without a multiply
 *             (bit 15 flipped and added, the high half shifted and added).
 *             Exact but where a = 0 meets a negative b (128 · |b| is not
 *             an s8 · u8 product), which a correction pass would fix.
 *   saturate  vpmaddubsw(a, b) then vpmaddwd by ones: what oneDNN and
 *             CTranslate2 do on AVX2; the int16 pair sum saturates when
 *             |a0·b0 + a1·b1| > 32767. Not exact.
 *
 * Prints GMAC/s for each and the ratio to pmaddwd. On Zen 2 every integer
 * multiply issues on one pipe, so the forms tie or lose: the numbers are
 * why the 8-bit tile is what it is on such a CPU. Where the CPU has no
 * AVX2 it says so and exits 0.
 *
 *   bench_int8_forms [--ms MS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

enum { ROWS = 6, K_PAIRS = 256 };

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if HAVE_X86
#define AVX2 __attribute__((target("avx2"), noinline))

/* Each form: ROWS rows × 16 columns × 2·K_PAIRS k; 12 accumulators. */
AVX2 static void pmaddwd(const uint8_t *panel, const int32_t *a, int32_t *out) {
  __m256i c[2 * ROWS];
  for (int i = 0; i < 2 * ROWS; i++) c[i] = _mm256_setzero_si256();
  for (int t = 0; t < K_PAIRS; t++) {
    const __m128i *bq = (const __m128i *)(panel + t * 32);
    __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bq)), b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bq + 1));
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; r++) {
      __m256i av = _mm256_set1_epi32(a[r * K_PAIRS + t]);
      c[2 * r] = _mm256_add_epi32(c[2 * r], _mm256_madd_epi16(av, b0));
      c[2 * r + 1] = _mm256_add_epi32(c[2 * r + 1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int i = 0; i < 2 * ROWS; i++) _mm256_storeu_si256((__m256i *)(out + 8 * i), c[i]);
}

AVX2 static void sign(const uint8_t *panel, const int32_t *a, int32_t *out) {
  __m256i c[2 * ROWS];
  for (int i = 0; i < 2 * ROWS; i++) c[i] = _mm256_setzero_si256();
  const __m256i flip = _mm256_set1_epi32(0x8000);
  for (int t = 0; t < K_PAIRS; t++) {
    __m256i b = _mm256_loadu_si256((const __m256i *)(panel + t * 32)), babs = _mm256_abs_epi8(b);
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; r++) {
      __m256i av = _mm256_set1_epi16((int16_t)a[r * K_PAIRS + t]);
      __m256i x = _mm256_maddubs_epi16(babs, _mm256_sign_epi8(av, b));
      c[2 * r] = _mm256_add_epi32(c[2 * r], _mm256_xor_si256(x, flip));
      c[2 * r + 1] = _mm256_add_epi32(c[2 * r + 1], _mm256_srai_epi32(x, 16));
    }
  }
  for (int i = 0; i < 2 * ROWS; i++) _mm256_storeu_si256((__m256i *)(out + 8 * i), c[i]);
}

AVX2 static void saturate(const uint8_t *panel, const int32_t *a, int32_t *out) {
  __m256i c[ROWS];
  for (int i = 0; i < ROWS; i++) c[i] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int t = 0; t < K_PAIRS; t++) {
    __m256i b = _mm256_loadu_si256((const __m256i *)(panel + t * 32));
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; r++) {
      __m256i av = _mm256_set1_epi16((int16_t)a[r * K_PAIRS + t]);
      c[r] = _mm256_add_epi32(c[r], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b), ones));
    }
  }
  for (int i = 0; i < ROWS; i++) _mm256_storeu_si256((__m256i *)(out + 8 * i), c[i]);
}

typedef void (*form_fn)(const uint8_t *, const int32_t *, int32_t *);

/* GMAC/s of f over repeated calls for min_ms. */
static double rate(form_fn f, const uint8_t *panel, const int32_t *a, int32_t *out, double min_ms) {
  const double macs = (double)ROWS * 16 * 2 * K_PAIRS;
  long calls = 0;
  double t0 = now(), t;
  do {
    for (int i = 0; i < 1000; i++) f(panel, a, out);
    calls += 1000;
  } while ((t = now() - t0) < min_ms * 1e-3);
  return macs * (double)calls / t * 1e-9;
}
#endif

int main(int argc, char **argv) {
  double min_ms = 500;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
      min_ms = strtod(argv[++i], NULL);
    } else {
      fprintf(stderr, "usage: bench_int8_forms [--ms MS]\n");
      return 2;
    }
  }
#if HAVE_X86
  if (!__builtin_cpu_supports("avx2")) {
    printf("no AVX2 on this CPU: nothing to compare\n");
    return 0;
  }
  static uint8_t panel[K_PAIRS * 32];
  static int32_t a[ROWS * K_PAIRS], out[2 * ROWS * 8];
  for (size_t i = 0; i < sizeof panel; i++) panel[i] = (uint8_t)(i * 37 + 1);
  for (int i = 0; i < ROWS * K_PAIRS; i++) a[i] = (i * 7) & 0x7f7f;
  static const struct {
    const char *name;
    form_fn f;
  } forms[] = {{"pmaddwd", pmaddwd}, {"sign", sign}, {"saturate", saturate}};
  double base = 0;
  printf("%-10s %8s %8s\n", "form", "GMAC/s", "ratio");
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    double r = rate(forms[i].f, panel, a, out, min_ms);
    if (i == 0) base = r;
    printf("%-10s %8.2f %8.2f\n", forms[i].name, r, r / base);
  }
  volatile int32_t sink = out[0]; /* keeps the sums live */
  (void)sink;
  return 0;
#else
  (void)min_ms;
  printf("not an x86 CPU: nothing to compare\n");
  return 0;
#endif
}
