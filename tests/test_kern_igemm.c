/*
 * test_kern_igemm.c — the 8-bit GEMM's fast paths against its reference:
 * every signedness combination, per-tensor/per-row/per-column zero points,
 * ragged m, n, k (odd k, n not a multiple of 16, m across row blocks),
 * strides, transposed packing, and sums that wrap int32. Results must be
 * bit-identical, for every tier this build and CPU have: the pair tiers
 * (scalar, avx2) and the VNNI ones (vnni-ref, the portable form of their
 * algorithm that runs anywhere; avxvnni; avx512vnni; amx, which takes row
 * blocks of 16 rows or more). The float output
 * (kern_igemm_f32: scale per tensor, row or column, bias or none, the
 * product and the chained forms) must equal, bit for bit, the int32 result
 * converted, scaled and biased by separate float operations, as the graph's
 * Cast, Mul and Add nodes do. It prints which tiers ran and which this CPU
 * lacks. Its timings are bench/igemm.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "kern/igemm.h"
#include "testutil.h"

/* Bits 11 to 18 of testutil's generator: with this file's seed, the bytes
 * the cases have always been made of. */
static uint8_t rnd_byte(void) { return (uint8_t)(tu_next() >> 11); }

struct prob {
  int64_t m, n, k;
  bool as, bs;     /* signedness */
  int zpa, zpb;    /* 0 none, 1 per tensor, 2 per row / column */
  bool trans_b;
  bool extreme;    /* all elements at the far end of the range */
};

static int run_case(const struct prob *pr, const char *isa, struct tolk_pool *pool) {
  int64_t m = pr->m, n = pr->n, k = pr->k;
  int64_t lda = k + 3, ldb = (pr->trans_b ? k : n) + 5, ldc = n + 2;
  int64_t brows = pr->trans_b ? n : k;
  uint8_t *a = malloc((size_t)(m * lda + 1));
  uint8_t *b = malloc((size_t)(brows * ldb + 1));
  uint8_t *bt = malloc((size_t)(k * n + 1)); /* B as k×n for the reference */
  int32_t *za = malloc((size_t)(m + 1) * 4), *zb = malloc((size_t)(n + 1) * 4);
  int32_t *c_ref = malloc((size_t)(m * ldc + 1) * 4), *c = malloc((size_t)(m * ldc + 1) * 4);
  for (int64_t i = 0; i < m * lda; i++)
    a[i] = pr->extreme ? (pr->as ? 0x80 : 0xff) : rnd_byte();
  for (int64_t i = 0; i < brows * ldb; i++)
    b[i] = pr->extreme ? (pr->bs ? 0x80 : 0xff) : rnd_byte();
  for (int64_t q = 0; q < k; q++)
    for (int64_t j = 0; j < n; j++) bt[q * n + j] = pr->trans_b ? b[j * ldb + q] : b[q * ldb + j];
  for (int64_t i = 0; i < m; i++) {
    int v = pr->extreme ? (pr->as ? 127 : 0) : rnd_byte();
    za[i] = pr->as ? (int8_t)(uint8_t)v : v;
  }
  for (int64_t j = 0; j < n; j++) {
    int v = pr->extreme ? (pr->bs ? 127 : 0) : rnd_byte();
    zb[j] = pr->bs ? (int8_t)(uint8_t)v : v;
  }
  struct kern_igemm p = {
      .m = m, .n = n, .k = k, .a = a, .lda = lda, .a_signed = pr->as, .b = bt, .ldb = n,
      .b_signed = pr->bs, .a_zp = pr->zpa ? za : NULL, .a_zp_stride = pr->zpa == 2,
      .b_zp = pr->zpb ? zb : NULL, .b_zp_stride = pr->zpb == 2, .c = c_ref, .ldc = ldc};
  memset(c_ref, 0x5a, (size_t)(m * ldc + 1) * 4);
  memset(c, 0x5a, (size_t)(m * ldc + 1) * 4);
  kern_igemm_ref(&p);

  struct kern_igemm_b pb;
  pb.data = malloc(kern_igemm_pack_b_size(n, k));
  kern_igemm_pack_b(n, k, b, ldb, pr->trans_b, pr->bs, &pb);
  void *work = malloc(kern_igemm_work_size(m, k));
  CHECK(kern_igemm_force_isa(isa));
  p.c = c;
  kern_igemm_packed(&p, &pb, work, pool);
  kern_igemm_force_isa(NULL);
  int bad = 0;
  for (int64_t i = 0; i < m * ldc; i++) {
    if (c[i] != c_ref[i]) {
      if (!bad)
        fprintf(stderr, "[%s] m=%lld n=%lld k=%lld as=%d bs=%d zpa=%d zpb=%d tb=%d: "
                        "c[%lld]=%d ref %d\n",
                isa, (long long)m, (long long)n, (long long)k, pr->as, pr->bs, pr->zpa, pr->zpb,
                pr->trans_b, (long long)i, c[i], c_ref[i]);
      bad++;
    }
  }
  CHECK(bad == 0);
  free(a), free(b), free(bt), free(za), free(zb), free(c_ref), free(c), free(pb.data), free(work);
  return bad;
}

static float rnd_scale(void) { return (float)(0.0005 + 0.01 * tu_unit()); }

/* The float output of an m×n×k problem (signed B, per-row zero points of A)
 * against the int32 result put through separate float operations. */
static void run_f32_case(int64_t m, int64_t n, int64_t k, int form, const char *isa,
                         struct tolk_pool *pool) {
  bool chained = form & 1, bias = form & 2, per_row = form & 4, per_col = form & 8;
  uint8_t *a = malloc((size_t)(m * k + 1)), *b = malloc((size_t)(k * n + 1));
  int32_t *za = malloc((size_t)(m + 1) * 4), *c = malloc((size_t)(m * n + 1) * 4);
  float *rs = malloc((size_t)(m + 1) * 4), *cs = malloc((size_t)(n + 1) * 4);
  float *bv = malloc((size_t)(n + 1) * 4), *want = malloc((size_t)(m * n + 1) * 4);
  float *got = malloc((size_t)(m * n + 1) * 4), *got_ref = malloc((size_t)(m * n + 1) * 4);
  for (int64_t i = 0; i < m * k; i++) a[i] = rnd_byte();
  for (int64_t i = 0; i < k * n; i++) b[i] = rnd_byte();
  for (int64_t i = 0; i < m; i++) za[i] = rnd_byte(), rs[i] = rnd_scale();
  for (int64_t j = 0; j < n; j++) cs[j] = rnd_scale(), bv[j] = (float)(tu_unit() - 0.5);
  struct kern_igemm p = {.m = m, .n = n, .k = k, .a = a, .lda = k, .b = b, .ldb = n,
                         .b_signed = true, .a_zp = za, .a_zp_stride = 1, .c = c, .ldc = n};
  kern_igemm_ref(&p);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      volatile float x = (float)c[i * n + j], r = rs[per_row ? i : 0], s = cs[per_col ? j : 0];
      volatile float y;
      if (chained) {
        volatile float t = x * r;
        y = t * s;
      } else {
        volatile float rsc = r * s;
        y = x * rsc;
      }
      want[i * n + j] = bias ? y + bv[j] : y;
    }
  struct kern_igemm_f32 f = {.c = got_ref, .ldc = n, .row_scale = rs, .col_scale = cs,
                             .bias = bias ? bv : NULL, .row_scale_stride = per_row,
                             .col_scale_stride = per_col, .chained = chained};
  p.f32 = &f;
  kern_igemm_ref(&p);
  struct kern_igemm_b pb;
  pb.data = malloc(kern_igemm_pack_b_size(n, k));
  kern_igemm_pack_b(n, k, b, n, false, true, &pb);
  void *work = malloc(kern_igemm_work_size(m, k));
  f.c = got;
  CHECK(kern_igemm_force_isa(isa));
  kern_igemm_packed(&p, &pb, work, pool);
  kern_igemm_force_isa(NULL);
  CHECK_MSG(!memcmp(got_ref, want, (size_t)(m * n) * 4), "[ref] float form %d, %lldx%lldx%lld", form,
            (long long)m, (long long)n, (long long)k);
  CHECK_MSG(!memcmp(got, want, (size_t)(m * n) * 4), "[%s] float form %d, %lldx%lldx%lld", isa, form,
            (long long)m, (long long)n, (long long)k);
  free(a), free(b), free(za), free(c), free(rs), free(cs), free(bv), free(want), free(got);
  free(got_ref), free(pb.data), free(work);
}

/* Every tier by default; the tiers named as arguments instead (the builds
 * with avxvnni's instruction or amx's emulated run that tier alone). */
int main(int argc, char **argv) {
  static const char *all[] = {"scalar", "vnni-ref", "avx2", "avxvnni", "avx512vnni", "amx"};
  const char *const *isas = argc > 1 ? (const char *const *)argv + 1 : all;
  size_t n_isas = argc > 1 ? (size_t)argc - 1 : sizeof all / sizeof all[0];
  char ran[128] = "", lacked[128] = "";
  struct tolk_pool *pool = NULL;
  tolk_error err;
  tu_seed(88172645463325252ull);
  CHECK(tolk_pool_create(2, &pool, &err) == TOLK_OK);
  printf("igemm: detected implementation %s\n", kern_igemm_isa());
#ifdef KERN_EMULATE_AVXVNNI
  printf("igemm: this build's avxvnni does vpdpbusd in AVX2\n");
#endif
#ifdef KERN_EMULATE_AMX
  printf("igemm: this build's amx does its tile instructions in C\n");
#endif
  for (size_t s = 0; s < n_isas; s++) {
    if (!kern_igemm_force_isa(isas[s])) {
      printf("igemm: %s not available here, skipped\n", isas[s]);
      snprintf(lacked + strlen(lacked), sizeof lacked - strlen(lacked), " %s", isas[s]);
      continue;
    }
    snprintf(ran + strlen(ran), sizeof ran - strlen(ran), " %s", isas[s]);
    kern_igemm_force_isa(NULL);
    static const int64_t dims[][3] = {{1, 1, 1},   {1, 16, 2},  {1, 17, 3},   {2, 5, 7},
                                      {6, 16, 16}, {7, 33, 9},  {13, 31, 64}, {30, 48, 65},
                                      {97, 20, 5}, {200, 3, 33}, {5, 4, 0},   {0, 4, 3},
                                      {1, 512, 128}, {3, 100, 1}, {1, 70, 9}, {1, 100, 70},
                                      {2, 100, 70}, {2, 49, 5},   {3, 70, 33},
                                      /* C finished through a buffer: a second row block
                                       * of 4, a last group of one panel of 4 columns */
                                      {100, 4100, 7}, {16, 4096, 5}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
      for (int combo = 0; combo < 4; combo++)
        for (int zp = 0; zp < 9; zp++) {
          struct prob pr = {dims[d][0], dims[d][1], dims[d][2], combo & 1, (combo >> 1) & 1,
                            zp % 3, zp / 3, (d + (size_t)zp) % 2 == 1, false};
          run_case(&pr, isas[s], d % 2 ? pool : NULL);
        }
    /* Extremes: |A - za| = 255 and B at the end of its range, so that
     * vpmaddubsw-style int16 pair sums would saturate, and k large enough
     * that the int32 sum wraps (255 * 255 * 70000 > 2^31). */
    for (int combo = 0; combo < 4; combo++) {
      struct prob pr = {3, 20, 70001, combo & 1, (combo >> 1) & 1, 1, 1, false, true};
      run_case(&pr, isas[s], pool);
      pr.zpb = 0;
      run_case(&pr, isas[s], NULL);
      /* A whole tile of rows and one row more (AMX: a staged tile of one row). */
      struct prob many = {17, 20, 70001, combo & 1, (combo >> 1) & 1, 2, 2, combo == 3, true};
      run_case(&many, isas[s], pool);
      /* One to three rows: several panels at a time (a decoder step of a few sentences). */
      for (int64_t m = 1; m <= 3; m++) {
        struct prob few = {m, 70, 70001, combo & 1, (combo >> 1) & 1, 1, combo & 1, false, true};
        run_case(&few, isas[s], pool);
      }
    }
    static const int64_t fdims[][3] = {{1, 1, 1},    {7, 33, 9},     {64, 100, 512}, {97, 20, 5},  {1, 100, 70},
                                       {2, 100, 70}, {3, 100, 70}, {100, 4100, 9}, {16, 4097, 70}};
    for (size_t d = 0; d < sizeof fdims / sizeof fdims[0]; d++)
      for (int form = 0; form < 16; form++)
        run_f32_case(fdims[d][0], fdims[d][1], fdims[d][2], form, isas[s], d % 2 ? pool : NULL);
  }
  printf("igemm tiers run:%s; lacking here:%s\n", ran, lacked[0] ? lacked : " none");
  CHECK(!kern_igemm_force_isa("nonsense"));
  tolk_pool_free(pool);
  return tu_finish("test_kern_igemm");
}
