/*
 * test_kern_bf16dot.c — the bfloat16 dot-product GEMM (kern.h, bf16dot.h):
 * its AVX512-BF16 tier where this CPU has one, and its portable tier on
 * every CPU, bit for bit against kern_bf16dot_ref, over sizes around the
 * tile's 8 rows and 32 columns, odd k, both transposes, padded strides,
 * alpha, beta and a bias, serial and pooled.
 *
 * The reference itself is checked against the double product within the
 * rounding of both operands to bfloat16, and on hand-made cases that pin
 * the arithmetic down: the order within a pair (element 2p + 1 first, as
 * VDPBF16PS adds it), each addition rounded once, denormals flushed, the
 * rounding of A as VCVTNEPS2BF16 does it. Where the hardware runs, those
 * cases also say whether it does what the reference says.
 * (Its packer's reports to a read callback are test_kern_sgemm.c's.)
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/pool.h"
#include "kern/kern.h"
#include "testutil.h"

static struct tolk_pool *pool2;

static bool same(float x, float y) { return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0; }

struct bcase {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  bool bias;
  int pad;
};

/* C through kern_sgemm_packed(_bias) of B packed by
 * kern_sgemm_pack_b_bf16dot, bit for bit against the reference; returns
 * the mismatches. */
static int run_case(const struct bcase *g, struct tolk_pool *pool, const float *a, const float *b,
                    const float *bias) {
  const int64_t m = g->m, n = g->n, k = g->k;
  const int64_t lda = (g->ta ? m : k) + g->pad, ldb = (g->tb ? k : n) + g->pad, ldc = n + g->pad;
  /* Row-major copies for the reference. */
  float *ar = malloc((size_t)(m * k + 1) * sizeof *ar), *br = malloc((size_t)(k * n + 1) * sizeof *br);
  float *c = malloc((size_t)(m * ldc) * sizeof *c), *cr = malloc((size_t)(m * ldc) * sizeof *cr);
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++) ar[i * k + p] = g->ta ? a[p * lda + i] : a[i * lda + p];
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++) br[p * n + j] = g->tb ? b[j * ldb + p] : b[p * ldb + j];
  for (int64_t x = 0; x < m * ldc; x++) c[x] = cr[x] = x % ldc < n ? (float)tu_unit() : 12345.0f;
  struct kern_packed_b *pb = NULL;
  tolk_error err = {0};
  CHECK(kern_sgemm_pack_b_bf16dot(g->tb, k, n, b, ldb, NULL, &pb, &err) == TOLK_OK);
  int bad = 0;
  if (pb) {
    if (g->bias) kern_sgemm_packed_bias(m, n, k, a, lda, pb, bias, c, ldc, pool);
    else kern_sgemm_packed(g->ta, m, n, k, g->alpha, a, lda, pb, g->beta, c, ldc, pool);
    kern_bf16dot_ref(m, n, k, g->bias ? 1.0f : g->alpha, ar, k, br, n, g->bias ? 0.0f : g->beta,
                     g->bias ? bias : NULL, cr, ldc);
    for (int64_t x = 0; x < m * ldc; x++)
      if (!same(c[x], cr[x]) && bad++ < 3)
        fprintf(stderr, "  %lldx%lldx%lld ta=%d tb=%d: C[%lld][%lld] = %.9g, reference %.9g\n", (long long)m,
                (long long)n, (long long)k, g->ta, g->tb, (long long)(x / ldc), (long long)(x % ldc),
                (double)c[x], (double)cr[x]);
    kern_packed_b_free(pb);
  }
  free(ar);
  free(br);
  free(c);
  free(cr);
  return bad;
}

static void random_cases(const char *tier) {
  static const int64_t ms[] = {1, 2, 3, 7, 8, 9, 17, 64};
  static const int64_t ns[] = {1, 31, 32, 33, 100};
  static const int64_t ks[] = {1, 2, 3, 16, 17, 33, 512};
  int cases = 0, bad = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        const int form = (int)((mi + ni + ki) % 4);
        struct bcase g = {ms[mi], ns[ni], ks[ki], form == 1, form == 2, 1.0f, 0.0f, form == 3, (int)(ki % 3)};
        if (form == 1) g.alpha = 0.5f, g.beta = -1.25f;
        const int64_t lda = (g.ta ? g.m : g.k) + g.pad, ldb = (g.tb ? g.k : g.n) + g.pad;
        float *a = malloc((size_t)((g.ta ? g.k : g.m) * lda) * sizeof *a);
        float *b = malloc((size_t)((g.tb ? g.n : g.k) * ldb) * sizeof *b), *bias = malloc((size_t)g.n * sizeof *bias);
        for (int64_t x = 0; x < (g.ta ? g.k : g.m) * lda; x++) a[x] = (float)tu_unit() * 3.0f;
        for (int64_t x = 0; x < (g.tb ? g.n : g.k) * ldb; x++) b[x] = (float)tu_unit() * 0.1f;
        for (int64_t x = 0; x < g.n; x++) bias[x] = (float)tu_unit();
        bad += run_case(&g, NULL, a, b, bias);
        bad += run_case(&g, pool2, a, b, bias);
        cases += 2;
        free(a);
        free(b);
        free(bias);
      }
  CHECK_MSG(bad == 0, "%s: %d elements differ from the reference", tier, bad);
  printf("  %s: %d products, %d elements off the reference\n", tier, cases, bad);
}

/* C = A·B through the packed path, one row. */
static float one(const float *a, const float *b, int64_t k) {
  struct kern_packed_b *pb = NULL;
  float c = NAN;
  if (kern_sgemm_pack_b_bf16dot(false, k, 1, b, 1, NULL, &pb, NULL) == TOLK_OK)
    kern_sgemm_packed(false, 1, 1, k, 1.0f, a, k, pb, 0.0f, &c, 1, NULL);
  kern_packed_b_free(pb);
  return c;
}

static float ref1(const float *a, const float *b, int64_t k) {
  float c;
  kern_bf16dot_ref(1, 1, k, 1.0f, a, k, b, 1, 0.0f, NULL, &c, 1);
  return c;
}

/* The cases that say what the arithmetic is, through the reference and the
 * packed path. */
static void hand_cases(const char *tier) {
  const float t = 0x1p-24f, ones[4] = {1, 1, 1, 1};
  /* Element 1 before element 0 in each pair, each addition rounded: t,
   * then t + t = 2t, then 1 + 2t, exact. Element 2 first would leave 1. */
  const float order[4] = {t, 0, 1, t};
  CHECK(ref1(order, ones, 4) == 1.0f + 2 * t);
  CHECK_MSG(one(order, ones, 4) == 1.0f + 2 * t, "%s: %.9g", tier, (double)one(order, ones, 4));
  /* A rounded to nearest even: 1 + 2^-8 is halfway, to 1; 1 + 3·2^-8 up. */
  const float ties[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, b2[2] = {1, 0};
  const float b3[2] = {0, 1};
  CHECK(ref1(ties, b2, 2) == 1.0f && one(ties, b2, 2) == 1.0f);
  CHECK(ref1(ties, b3, 2) == 1.0f + 0x1p-6f && one(ties, b3, 2) == 1.0f + 0x1p-6f);
  /* A denormal operand counts as zero; so does a float that would round up
   * to the smallest normal. */
  const float den[2] = {0x1p-130f, 2.0f}, bd[2] = {0x1p100f, 0.0f};
  CHECK(ref1(den, bd, 2) == 0.0f && one(den, bd, 2) == 0.0f);
  const float near[2] = {nextafterf(FLT_MIN, 0.0f), 0}, bn[2] = {1, 0};
  CHECK(ref1(near, bn, 2) == 0.0f && one(near, bn, 2) == 0.0f);
  /* A denormal sum is flushed: 2^-100 · 2^-30 is below the normal range. */
  const float small[2] = {0x1p-100f, 0}, bs[2] = {0x1p-30f, 0};
  CHECK(ref1(small, bs, 2) == 0.0f && one(small, bs, 2) == 0.0f);
  /* Not flushed just above it. */
  const float low[2] = {0x1p-100f, 0}, bl[2] = {0x1p-26f, 0};
  CHECK(ref1(low, bl, 2) == 0x1p-126f && one(low, bl, 2) == 0x1p-126f);
  /* Infinity and NaN go through. */
  const float inf[2] = {INFINITY, 1}, bi[2] = {1, 1}, nan_[2] = {NAN, 1};
  CHECK(ref1(inf, bi, 2) == INFINITY && one(inf, bi, 2) == INFINITY);
  CHECK(isnan(ref1(nan_, bi, 2)) && isnan(one(nan_, bi, 2)));
  /* Against the double product: within both operands' rounding. */
  enum { M = 5, N = 40, K = 300 };
  float *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b), c[M * N];
  for (int x = 0; x < M * K; x++) a[x] = (float)tu_unit();
  for (int x = 0; x < K * N; x++) b[x] = (float)tu_unit();
  kern_bf16dot_ref(M, N, K, 1.0f, a, K, b, N, 0.0f, NULL, c, N);
  int far = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double exact = 0, mag = 0;
      for (int p = 0; p < K; p++) exact += (double)a[i * K + p] * b[p * N + j], mag += fabs((double)a[i * K + p] * b[p * N + j]);
      /* Each operand off by 2^-9 relative at most; the fp32 sums by K·2^-24. */
      far += fabs((double)c[i * N + j] - exact) > mag * (2 * 0x1p-9 + 0x1p-18) + K * 0x1p-24 * mag;
    }
  CHECK_MSG(far == 0, "%d reference sums outside the rounding bound", far);
  free(a);
  free(b);
}

int main(void) {
  tu_seed(20261207);
  tolk_error err = {0};
  if (tolk_pool_create(2, &pool2, &err) != TOLK_OK) return 1;
  const bool fast = kern_bf16dot_fast();
  printf("AVX512-BF16 tier: %s\n", fast ? "runs" : "not on this CPU or build (the portable tier only)");
  if (fast) {
    hand_cases("avx512bf16");
    random_cases("avx512bf16");
  }
  kern_bf16dot_force_portable(true);
  CHECK(!kern_bf16dot_fast());
  hand_cases("portable");
  random_cases("portable");
  kern_bf16dot_force_portable(false);
  tolk_pool_free(pool2);
  return tu_finish("test_kern_bf16dot");
}
