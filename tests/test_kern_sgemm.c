/*
 * test_kern_sgemm.c — every SGEMM fast path (each ISA this CPU supports;
 * unpacked and prepacked B; serial and pooled) against kern_sgemm_ref, over
 * odd sizes around the tile and block edges, all four transposes, padded
 * row strides, alpha/beta and m = 1.
 *
 * Tolerance: the reference accumulates in double, so the fast path's error is
 * its own fp32 rounding. For random data in [-1, 1] we allow
 *   |fast - ref| ≤ 1e-5 · (sqrt(k) · |alpha| · max|A| · max|B| + |beta| · max|C|)
 * (1e-5 per unit of the typical magnitude of a k-term sum; a wrong index or a
 * dropped term is off by ~1). With small integers every product and sum is
 * exact in fp32, so there the result must match bit for bit, which catches
 * errors a tolerance could hide. Padding between rows of C must stay untouched
 * (the edge tiles use masked stores), and beta = 0 must ignore NaNs in C.
 *
 * B packed as 8-bit codes (kern_sgemm_pack_b_q8) must give C bit for bit as
 * B packed from the dequantized floats does, on every path; B packed as
 * bfloat16 (kern_sgemm_pack_b_bf16) as B packed from the rounded floats.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/pool.h"
#include "kern/kern.h"
#include "testutil.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float irand(void) { return (float)((int)((frand() + 1.0f) * 4.5f) - 4); } /* -4..4 */

#define SENTINEL 12345.0f

struct gcase {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int pad; /* extra elements at the end of each row of A, B and C */
  bool ints;
};

static struct tolk_pool *pool2;
static int n_cases;

/* Runs one case through `form` (0 kern_sgemm, 1 kern_sgemm_packed) with
 * `pool` and compares with the reference. */
static void run_case(const struct gcase *g, int form, struct tolk_pool *pool) {
  const int64_t m = g->m, n = g->n, k = g->k;
  const int64_t arows = g->ta ? k : m, acols = g->ta ? m : k;
  const int64_t brows = g->tb ? n : k, bcols = g->tb ? k : n;
  const int64_t lda = acols + g->pad, ldb = bcols + g->pad, ldc = n + g->pad;
  size_t asz = (size_t)(arows * lda), bsz = (size_t)(brows * ldb), csz = (size_t)(m * ldc);
  float *a = malloc((asz + 1) * sizeof *a), *b = malloc((bsz + 1) * sizeof *b);
  float *c = malloc((csz + 1) * sizeof *c), *r = malloc((csz + 1) * sizeof *r);
  float amax = 0, bmax = 0, cmax = 0;
  for (size_t i = 0; i < asz; i++) {
    a[i] = g->ints ? irand() : frand();
    amax = fmaxf(amax, fabsf(a[i]));
  }
  for (size_t i = 0; i < bsz; i++) {
    b[i] = g->ints ? irand() : frand();
    bmax = fmaxf(bmax, fabsf(b[i]));
  }
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < ldc; j++) {
      float v = j >= n ? SENTINEL : g->beta == 0.0f ? NAN : g->ints ? irand() : frand();
      c[i * ldc + j] = r[i * ldc + j] = v;
      if (j < n && g->beta != 0.0f) cmax = fmaxf(cmax, fabsf(v));
    }
  }
  kern_sgemm_ref(g->ta, g->tb, m, n, k, g->alpha, a, lda, b, ldb, g->beta, r, ldc);
  if (form == 0) {
    kern_sgemm(g->ta, g->tb, m, n, k, g->alpha, a, lda, b, ldb, g->beta, c, ldc, pool);
  } else {
    struct kern_packed_b *pb = NULL;
    tolk_error err = {0};
    CHECK(kern_sgemm_pack_b(g->tb, k, n, b, ldb, &pb, &err) == TOLK_OK);
    /* The packed copy must not depend on B afterwards. */
    for (size_t i = 0; i < bsz; i++) b[i] = NAN;
    if (pb) kern_sgemm_packed(g->ta, m, n, k, g->alpha, a, lda, pb, g->beta, c, ldc, pool);
    kern_packed_b_free(pb);
  }
  const double tol = g->ints ? 0.0
                             : 1e-5 * (sqrt((double)k) * fabs(g->alpha) * amax * bmax +
                                       fabs(g->beta) * cmax);
  double worst = 0;
  int64_t wi = -1, wj = -1;
  bool pad_ok = true, finite = true;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < ldc; j++) {
      float x = c[i * ldc + j], y = r[i * ldc + j];
      if (j >= n) {
        pad_ok &= x == SENTINEL;
        continue;
      }
      finite &= isfinite(x);
      double d = fabs((double)x - (double)y);
      if (!(d <= worst)) {
        worst = isnan(d) ? INFINITY : d;
        wi = i, wj = j;
      }
    }
  }
  CHECK_MSG(worst <= tol && finite && pad_ok,
            "isa %s form %s m=%lld n=%lld k=%lld ta=%d tb=%d alpha=%g beta=%g pad=%d "
            "ints=%d: max err %g at (%lld,%lld), tol %g, pad %s, finite %d",
            kern_isa_name(kern_isa_active()), form ? "packed" : "plain", (long long)m,
            (long long)n, (long long)k, g->ta, g->tb, g->alpha, g->beta, g->pad, g->ints,
            worst, (long long)wi, (long long)wj, tol, pad_ok ? "ok" : "overwritten",
            finite);
  n_cases++;
  free(a);
  free(b);
  free(c);
  free(r);
}

static void run_all_forms(const struct gcase *g) {
  for (int form = 0; form < 2; form++) {
    run_case(g, form, NULL);
    run_case(g, form, pool2);
  }
}

/* One q8 case: codes (signed or not) with a zero point and scale, against
 * kern_sgemm_pack_b of their dequantization (q - zp) * scale; C (with its
 * padding) must be the same bytes. The cases take turns: any zero point
 * over codes of the whole range (q - zp not always an int8), the zero
 * point that centres any codes (0 for int8, 128 for uint8), and any zero
 * point with the codes within 100 of it (all q - zp int8): the last two
 * are packed centred (SGEMM_C8). */
static void q8_case(int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool is_signed, float beta,
                    struct tolk_pool *pool) {
  const int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 1;
  const size_t asz = (size_t)((ta ? k : m) * lda), bsz = (size_t)((tb ? n : k) * ldb), csz = (size_t)(m * ldc);
  float *a = malloc(asz * sizeof *a), *f = malloc(bsz * sizeof *f);
  float *c1 = malloc(csz * sizeof *c1), *c2 = malloc(csz * sizeof *c2);
  uint8_t *q = malloc(bsz);
  const int turn = n_cases % 3;
  const int32_t zp = turn == 1 ? (is_signed ? 0 : 128)
                     : is_signed ? (int32_t)(frand() * 20) : 128 + (int32_t)(frand() * 40);
  const float scale = 0.01f + 0.02f * (frand() + 1.0f);
  for (size_t i = 0; i < asz; i++) a[i] = frand();
  for (size_t i = 0; i < bsz; i++) {
    q[i] = (uint8_t)(rng >> 24);
    if (turn == 2) {
      const int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
      const int32_t v = zp + (int32_t)((rng >> 24) % 201) - 100;
      q[i] = (uint8_t)(v < lo ? lo : v > hi ? hi : v);
    }
    frand();
    f[i] = (float)((is_signed ? (int32_t)(int8_t)q[i] : (int32_t)q[i]) - zp) * scale;
  }
  for (size_t i = 0; i < csz; i++) c1[i] = c2[i] = frand();
  struct kern_packed_b *pf = NULL, *pq = NULL;
  tolk_error err = {0};
  CHECK(kern_sgemm_pack_b(tb, k, n, f, ldb, &pf, &err) == TOLK_OK);
  CHECK(kern_sgemm_pack_b_q8(tb, k, n, q, ldb, is_signed, scale, zp, &pq, &err) == TOLK_OK);
  CHECK(kern_packed_b_bytes(pq) * 4 == kern_packed_b_bytes(pf));
  kern_sgemm_packed(ta, m, n, k, 1.0f, a, lda, pf, beta, c1, ldc, pool);
  kern_sgemm_packed(ta, m, n, k, 1.0f, a, lda, pq, beta, c2, ldc, pool);
  CHECK_MSG(memcmp(c1, c2, csz * sizeof *c1) == 0,
            "isa %s q8 m=%lld n=%lld k=%lld ta=%d tb=%d signed=%d beta=%g: not the floats' result",
            kern_isa_name(kern_isa_active()), (long long)m, (long long)n, (long long)k, ta, tb, is_signed,
            beta);
  n_cases++;
  kern_packed_b_free(pf);
  kern_packed_b_free(pq);
  free(a);
  free(f);
  free(c1);
  free(c2);
  free(q);
}

static void test_q8(void) {
  static const int64_t ms[] = {1, 2, 6, 7, 13, 100, 200};
  static const int64_t ns[] = {1, 17, 33, 65};
  static const int64_t ks[] = {1, 17, 257, 600};
  int idx = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int t = 0; t < 8; t++, idx++)
          q8_case(ms[mi], ns[ni], ks[ki], t & 1, t & 2, t & 4, idx % 3 ? 0.0f : 1.0f, idx % 2 ? pool2 : NULL);
  /* A decoder step's LM head: one row and a few, k = 512, n across many panels. */
  for (int s = 0; s < 2; s++) {
    q8_case(1, 1001, 512, false, false, s, 0.0f, pool2);
    q8_case(4, 1001, 512, false, true, s, 0.0f, pool2);
  }
}

/* One bf16 case: B packed as bfloat16 against kern_sgemm_pack_b of B
 * rounded to bfloat16 (to nearest even) and back; C (with its padding) must
 * be the same bytes. B has values whose rounding ties, and infinities, NaN
 * stay out (NaN in B makes C NaN either way). */
static void bf16_case(int64_t m, int64_t n, int64_t k, bool ta, bool tb, float alpha, float beta,
                      struct tolk_pool *pool) {
  const int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 1;
  const size_t asz = (size_t)((ta ? k : m) * lda), bsz = (size_t)((tb ? n : k) * ldb), csz = (size_t)(m * ldc);
  float *a = malloc(asz * sizeof *a), *f = malloc(bsz * sizeof *f), *fr = malloc(bsz * sizeof *fr);
  float *c1 = malloc(csz * sizeof *c1), *c2 = malloc(csz * sizeof *c2);
  for (size_t i = 0; i < asz; i++) a[i] = frand();
  for (size_t i = 0; i < bsz; i++) {
    f[i] = frand() * 3.0f;
    if (i % 11 == 3) f[i] = 1.0f + 1.0f / 256.0f; /* halfway between two bf16: to even, down */
    if (i % 13 == 5) f[i] = -(1.0f + 3.0f / 256.0f); /* halfway: to even, up */
    fr[i] = tolk_bf16_to_f32(tolk_f32_to_bf16(f[i]));
  }
  for (size_t i = 0; i < csz; i++) c1[i] = c2[i] = frand();
  struct kern_packed_b *pf = NULL, *ph = NULL;
  tolk_error err = {0};
  CHECK(kern_sgemm_pack_b(tb, k, n, fr, ldb, &pf, &err) == TOLK_OK);
  CHECK(kern_sgemm_pack_b_bf16(tb, k, n, f, ldb, &ph, &err) == TOLK_OK);
  CHECK(kern_packed_b_bytes(ph) * 2 == kern_packed_b_bytes(pf));
  kern_sgemm_packed(ta, m, n, k, alpha, a, lda, pf, beta, c1, ldc, pool);
  kern_sgemm_packed(ta, m, n, k, alpha, a, lda, ph, beta, c2, ldc, pool);
  CHECK_MSG(memcmp(c1, c2, csz * sizeof *c1) == 0,
            "isa %s bf16 m=%lld n=%lld k=%lld ta=%d tb=%d beta=%g: not the rounded floats' result",
            kern_isa_name(kern_isa_active()), (long long)m, (long long)n, (long long)k, ta, tb, beta);
  n_cases++;
  kern_packed_b_free(pf);
  kern_packed_b_free(ph);
  free(a), free(f), free(fr), free(c1), free(c2);
}

/* A row gives the same bytes alone (m = 1: four panels at a time), among
 * two or three (several panels at a time) and among seven (the tiles, panel
 * by panel), for a packed B of floats or bfloat16: the translator's promise
 * that a sentence translates the same alone and in a batch rests on it. */
static void rows_alone_case(int64_t n, int64_t k, bool bf16, float beta, struct tolk_pool *pool) {
  enum { M = 7 };
  const int64_t ldc = n + 3;
  float *a = malloc((size_t)(M * k) * sizeof *a), *b = malloc((size_t)(k * n) * sizeof *b);
  float *c0 = malloc((size_t)(M * ldc) * sizeof *c0), *c_one = malloc((size_t)(M * ldc) * sizeof *c_one);
  float *c_many = malloc((size_t)(M * ldc) * sizeof *c_many);
  for (int64_t i = 0; i < M * k; i++) a[i] = frand();
  for (int64_t i = 0; i < k * n; i++) b[i] = frand();
  for (int64_t i = 0; i < M * ldc; i++) c0[i] = frand();
  struct kern_packed_b *pb = NULL;
  tolk_error err = {0};
  CHECK((bf16 ? kern_sgemm_pack_b_bf16 : kern_sgemm_pack_b)(false, k, n, b, n, &pb, &err) == TOLK_OK);
  memcpy(c_one, c0, (size_t)(M * ldc) * sizeof *c_one);
  for (int r = 0; r < M; r++)
    kern_sgemm_packed(false, 1, n, k, 1.0f, a + r * k, k, pb, beta, c_one + r * ldc, ldc, pool);
  static const int groups[] = {2, 3, M};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) {
    memcpy(c_many, c0, (size_t)(M * ldc) * sizeof *c_many);
    for (int r = 0; r < M; r += groups[g]) {
      int m = M - r < groups[g] ? M - r : groups[g];
      kern_sgemm_packed(false, m, n, k, 1.0f, a + r * k, k, pb, beta, c_many + r * ldc, ldc, pool);
    }
    int differ = 0;
    for (int r = 0; r < M; r++) differ += memcmp(c_one + r * ldc, c_many + r * ldc, (size_t)ldc * sizeof *c_one) != 0;
    CHECK_MSG(differ == 0, "isa %s %s n=%lld k=%lld beta=%g: %d of %d rows differ alone and %d at a time",
              kern_isa_name(kern_isa_active()), bf16 ? "bf16" : "fp32", (long long)n, (long long)k, beta, differ,
              M, groups[g]);
  }
  n_cases++;
  kern_packed_b_free(pb);
  free(a), free(b), free(c0), free(c_one), free(c_many);
}

static void test_rows_alone(void) {
  static const int64_t ns[] = {16, 63, 64, 65, 129, 1001};
  static const int64_t ks[] = {1, 7, 256, 600};
  for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
      for (int f = 0; f < 4; f++) rows_alone_case(ns[ni], ks[ki], f & 1, f & 2 ? 0.5f : 0.0f, f & 1 ? pool2 : NULL);
}

static void test_bf16(void) {
  static const int64_t ms[] = {1, 2, 6, 7, 13, 100};
  static const int64_t ns[] = {1, 17, 33, 65};
  static const int64_t ks[] = {1, 17, 257, 600};
  int idx = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int t = 0; t < 4; t++, idx++)
          bf16_case(ms[mi], ns[ni], ks[ki], t & 1, t & 2, idx % 4 ? 1.0f : 0.5f, idx % 3 ? 0.0f : 1.0f,
                    idx % 2 ? pool2 : NULL);
  /* A decoder step's projections and LM head. */
  bf16_case(1, 1001, 512, false, false, 1.0f, 0.0f, pool2);
  bf16_case(16, 1001, 512, false, true, 1.0f, 0.0f, pool2);
}

/* kern_sgemm_packed_bias against kern_sgemm_packed then a separate Add, bit
 * for bit, on every path (few rows, one tile, packed A, the general blocks;
 * k over several blocks and k = 0), for B as floats, codes and bfloat16,
 * serial and pooled; C's row padding untouched. */
static void bias_case(int64_t m, int64_t n, int64_t k, int kind, struct tolk_pool *pool) {
  const int64_t ldc = n + 3;
  float *a = malloc((size_t)(m * k + 1) * sizeof *a), *b = malloc((size_t)(k * n + 1) * sizeof *b);
  float *bias = malloc((size_t)n * sizeof *bias);
  float *want = malloc((size_t)(m * ldc) * sizeof *want), *got = malloc((size_t)(m * ldc) * sizeof *got);
  uint8_t *q = malloc((size_t)(k * n + 1));
  for (int64_t i = 0; i < m * k; i++) a[i] = frand();
  for (int64_t i = 0; i < k * n; i++) b[i] = frand(), q[i] = (uint8_t)(frand() * 127.0f);
  for (int64_t x = 0; x < n; x++) bias[x] = frand() * 3.0f;
  for (int64_t i = 0; i < m * ldc; i++) want[i] = got[i] = SENTINEL;
  struct kern_packed_b *pb = NULL;
  tolk_error err = {0};
  tolk_status st = kind == 0   ? kern_sgemm_pack_b(false, k, n, b, n, &pb, &err)
                   : kind == 1 ? kern_sgemm_pack_b_q8(false, k, n, q, n, true, 0.03f, 2, &pb, &err)
                               : kern_sgemm_pack_b_bf16(false, k, n, b, n, &pb, &err);
  CHECK(st == TOLK_OK);
  if (st == TOLK_OK) {
    kern_sgemm_packed(false, m, n, k, 1.0f, a, k, pb, 0.0f, want, ldc, pool);
    for (int64_t i = 0; i < m; i++)
      for (int64_t x = 0; x < n; x++) want[i * ldc + x] = want[i * ldc + x] + bias[x];
    kern_sgemm_packed_bias(m, n, k, a, k, pb, bias, got, ldc, pool);
    CHECK_MSG(memcmp(want, got, (size_t)(m * ldc) * sizeof *got) == 0,
              "packed_bias %lld x %lld x %lld, B kind %d, %s: differs from MatMul then Add", (long long)m,
              (long long)n, (long long)k, kind, pool ? "pooled" : "serial");
    n_cases++;
  }
  kern_packed_b_free(pb);
  free(a), free(b), free(bias), free(want), free(got), free(q);
}

static void test_bias(void) {
  static const int64_t ms[] = {1, 2, 3, 4, 6, 7, 13, 64, 100};
  static const int64_t ns[] = {1, 17, 33, 1001};
  static const int64_t ks[] = {0, 1, 257, 600};
  for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int kind = 0; kind < 3; kind++) {
          bias_case(ms[mi], ns[ni], ks[ki], kind, NULL);
          bias_case(ms[mi], ns[ni], ks[ki], kind, pool2);
        }
}

static const float alphas[] = {1.0f, 0.5f, 1.0f, -1.5f};
static const float betas[] = {0.0f, 0.0f, 1.0f, 0.25f};

static void test_isa(enum kern_isa isa) {
  CHECK(kern_isa_force(isa));
  CHECK(kern_isa_active() == isa);
  int start = n_cases;
  static const int64_t ms[] = {1, 2, 3, 5, 6, 7, 13};
  static const int64_t ns[] = {1, 5, 8, 16, 17, 33};
  static const int64_t ks[] = {1, 3, 17, 256, 257};
  int idx = 0;
  for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int t = 0; t < 4; t++, idx++) {
          struct gcase g = {ms[mi], ns[ni], ks[ki], t & 1, t >> 1,
                            alphas[idx % 4], betas[(idx / 4) % 4], idx % 3 * 3, idx % 5 == 0};
          run_all_forms(&g);
        }
  /* Marian-like and block-crossing shapes. */
  static const struct gcase big[] = {
      {1, 512, 512, false, false, 1, 0, 0, false},
      {1, 2048, 512, false, false, 1, 0, 0, false},
      {1, 512, 2048, false, false, 1, 1, 0, false},
      {1, 1001, 512, false, true, 1, 0, 0, false},
      {4, 515, 300, false, false, 1, 0, 1, false},
      {30, 512, 512, false, false, 1, 0, 0, false},
      {30, 2048, 512, false, false, 1, 0.5f, 0, false},
      {30, 64, 30, false, true, 0.125f, 0, 0, false},
      {97, 70, 600, true, false, 1, 0, 2, false},
      {200, 37, 513, false, false, -1, 1, 0, false},
      {101, 49, 300, true, true, 2, 0, 5, false},
      {200, 200, 600, false, false, 1, 0, 0, true},
      /* A over the 2 MiB the packed-B path reads in place: the blocked path. */
      {1000, 33, 600, false, false, 1, 0.5f, 1, false},
      {1000, 40, 600, false, false, 1, 0, 0, true},
  };
  for (size_t i = 0; i < sizeof big / sizeof *big; i++) run_all_forms(&big[i]);
  test_q8();
  test_bf16();
  test_rows_alone();
  test_bias();
  printf("isa %s: %d cases\n", kern_isa_name(isa), n_cases - start);
}

/* k = 0: C = beta * C; m = 0 or n = 0: nothing touched. */
static void test_degenerate(void) {
  float c[6] = {1, 2, 3, 4, 5, 6};
  float a[1] = {7}, b[1] = {8};
  kern_sgemm(false, false, 2, 3, 0, 1.0f, a, 1, b, 3, 0.5f, c, 3, NULL);
  CHECK(c[0] == 0.5f && c[5] == 3.0f);
  kern_sgemm(false, false, 2, 3, 0, 1.0f, a, 1, b, 3, 0.0f, c, 3, NULL);
  CHECK(c[0] == 0.0f && c[5] == 0.0f);
  c[0] = 9;
  kern_sgemm(false, false, 0, 3, 4, 1.0f, a, 1, b, 3, 0.0f, c, 3, NULL);
  kern_sgemm(false, false, 2, 0, 4, 1.0f, a, 1, b, 3, 0.0f, c, 3, NULL);
  CHECK(c[0] == 9);
  struct kern_packed_b *pb = NULL;
  tolk_error err = {0};
  CHECK(kern_sgemm_pack_b(false, 0, 3, b, 3, &pb, &err) == TOLK_OK);
  c[0] = 9;
  kern_sgemm_packed(false, 2, 3, 0, 1.0f, a, 1, pb, 2.0f, c, 3, NULL);
  CHECK(c[0] == 18);
  kern_packed_b_free(pb);
  kern_packed_b_free(NULL);
  CHECK(kern_sgemm_pack_b(false, INT64_MAX / 2, INT64_MAX / 2, b, 1, &pb, &err) ==
        TOLK_ERR_LIMIT);
  CHECK(pb == NULL);
  const uint8_t q[1] = {3};
  CHECK(kern_sgemm_pack_b_q8(false, 1, 1, q, 1, false, 1.0f, 256, &pb, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK(kern_sgemm_pack_b_q8(false, 1, 1, q, 1, true, 1.0f, -129, &pb, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK(pb == NULL);
}

/* kern_sgemm_pack_b_read and kern_sgemm_pack_b_bf16dot report B's bytes in
 * order, each once, a panel's rows at a time when B is read by rows (so a
 * caller can give back a file mapping's pages as the packing goes), and pack
 * what kern_sgemm_pack_b, kern_sgemm_pack_b_bf16 and the pair packer without
 * a callback pack. */
static const unsigned char *read_next; /* where the next report must start */
static int read_calls;
static bool read_in_order = true;
static void on_read(const void *p, size_t n) {
  read_in_order &= (const unsigned char *)p == read_next;
  read_next = (const unsigned char *)p + n;
  read_calls++;
}

static void test_read_order(void) {
  const int64_t k = 37, n = 70, m = 3;
  for (int tb = 0; tb < 2; tb++)
    for (int bf16 = 0; bf16 < 3; bf16++) { /* 2: bfloat16 pairs */
      const int64_t ldb = (tb ? k : n) + 2, rows = tb ? n : k;
      float *b = malloc((size_t)(rows * ldb) * sizeof *b), *a = malloc((size_t)(m * k) * sizeof *a);
      float *c1 = calloc((size_t)(m * n), sizeof *c1), *c2 = calloc((size_t)(m * n), sizeof *c2);
      for (int64_t i = 0; i < rows * ldb; i++) b[i] = frand();
      for (int64_t i = 0; i < m * k; i++) a[i] = frand();
      struct kern_packed_b *p1 = NULL, *p2 = NULL;
      tolk_error err = {0};
      read_next = (const unsigned char *)b, read_calls = 0, read_in_order = true;
      if (bf16 == 2) {
        CHECK(kern_sgemm_pack_b_bf16dot(tb, k, n, b, ldb, on_read, &p1, &err) == TOLK_OK);
        CHECK(kern_sgemm_pack_b_bf16dot(tb, k, n, b, ldb, NULL, &p2, &err) == TOLK_OK);
      } else {
        CHECK(kern_sgemm_pack_b_read(tb, k, n, b, ldb, bf16, on_read, &p1, &err) == TOLK_OK);
        CHECK((bf16 ? kern_sgemm_pack_b_bf16 : kern_sgemm_pack_b)(tb, k, n, b, ldb, &p2, &err) == TOLK_OK);
      }
      const unsigned char *end = (const unsigned char *)(b + (rows - 1) * ldb + (tb ? k : n));
      CHECK_MSG(read_in_order && read_next == end, "tb=%d bf16=%d: reports out of order or short", tb, bf16);
      CHECK_MSG(tb ? read_calls > 1 : read_calls == 1, "tb=%d: %d reports", tb, read_calls);
      if (p1 && p2) {
        kern_sgemm_packed(false, m, n, k, 1.0f, a, k, p1, 0.0f, c1, n, NULL);
        kern_sgemm_packed(false, m, n, k, 1.0f, a, k, p2, 0.0f, c2, n, NULL);
        CHECK(memcmp(c1, c2, (size_t)(m * n) * sizeof *c1) == 0);
      }
      kern_packed_b_free(p1);
      kern_packed_b_free(p2);
      free(b), free(a), free(c1), free(c2);
    }
}

int main(void) {
  tolk_error err = {0};
  CHECK(tolk_pool_create(2, &pool2, &err) == TOLK_OK);
  /* TOLK_ISA, when set to an ISA this CPU has, decides the initial choice. */
  const char *env = getenv("TOLK_ISA");
  enum kern_isa first = kern_isa_active();
  printf("active ISA at start: %s (TOLK_ISA=%s)\n", kern_isa_name(first), env ? env : "");
  for (int i = KERN_ISA_SCALAR; i <= KERN_ISA_AVX512; i++) {
    enum kern_isa isa = (enum kern_isa)i;
    if (env && strcmp(env, kern_isa_name(isa)) == 0 && kern_isa_supported(isa))
      CHECK(first == isa);
  }
  CHECK(kern_isa_supported(first));
  for (int i = KERN_ISA_SCALAR; i <= KERN_ISA_AVX512; i++) {
    if (kern_isa_supported((enum kern_isa)i)) test_isa((enum kern_isa)i);
    else CHECK(!kern_isa_force((enum kern_isa)i));
  }
  test_degenerate();
  test_read_order();
  tolk_pool_free(pool2);
  return tu_finish("test_kern_sgemm");
}
