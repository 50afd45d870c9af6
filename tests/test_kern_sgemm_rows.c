/*
 * test_kern_sgemm_rows.c — SGEMM results do not depend on the batch: on
 * every ISA this CPU has, for both forms (B as it lies, B prepacked), with
 * and without threads, a row of C computed among m rows is bit for bit the
 * row computed alone (m = 1), and zero columns appended to A (with random
 * rows appended to B) change nothing. The translator relies on both: a
 * sentence must translate to the same ids alone, in a batch, and in a
 * padded batch (src/kern/kern.h; the service promises it).
 *
 * Sizes cross the register tile (MR = 6: m up to 20 mixes full and partial
 * tiles) and the k blocks (KC = 192 on AVX-512, 256 otherwise).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "kern/kern.h"
#include "testutil.h"

static struct tolk_pool *pool2;

static float *random_floats(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)tu_unit();
  return x;
}

/* C (m × n, row stride n) = op(A) · op(B), A m × k (k × m when ta) with row
 * stride lda, B k × n (n × k when tb), by form 0 (plain) or 1 (packed). */
static void gemm(int form, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                 int64_t lda, const float *b, int64_t ldb, float *c, struct tolk_pool *pool) {
  if (form == 0) {
    kern_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n, pool);
    return;
  }
  struct kern_packed_b *pb = NULL;
  tolk_error err = {0};
  CHECK(kern_sgemm_pack_b(tb, k, n, b, ldb, &pb, &err) == TOLK_OK);
  kern_sgemm_packed(ta, m, n, k, 1.0f, a, lda, pb, 0.0f, c, n, pool);
  kern_packed_b_free(pb);
}

/* Every row of an m-row product against the same row alone. */
static int rows_alone(int form, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      struct tolk_pool *pool) {
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  float *a = random_floats((size_t)(m * k)), *b = random_floats((size_t)(k * n));
  float *c = malloc((size_t)(m * n) * sizeof *c), *row = malloc((size_t)n * sizeof *row);
  gemm(form, ta, tb, m, n, k, a, lda, b, ldb, c, pool);
  int bad = 0;
  for (int64_t i = 0; i < m; i++) {
    gemm(form, ta, tb, 1, n, k, ta ? a + i : a + i * lda, lda, b, ldb, row, pool);
    bad += memcmp(row, c + i * n, (size_t)n * sizeof *row) != 0;
  }
  free(a), free(b), free(c), free(row);
  return bad;
}

/* op(A) padded from k to kp columns with zeros, op(B) with kp - k random
 * rows: the product is unchanged. */
static int zero_padded(int form, int64_t m, int64_t n, int64_t k, int64_t kp,
                       struct tolk_pool *pool) {
  float *a = random_floats((size_t)(m * k)), *b = random_floats((size_t)(k * n));
  float *ap = calloc((size_t)(m * kp), sizeof *ap), *bp = random_floats((size_t)(kp * n));
  for (int64_t i = 0; i < m; i++) memcpy(ap + i * kp, a + i * k, (size_t)k * sizeof *a);
  memcpy(bp, b, (size_t)(k * n) * sizeof *b);
  float *c = malloc((size_t)(m * n) * sizeof *c), *cp = malloc((size_t)(m * n) * sizeof *cp);
  gemm(form, false, false, m, n, k, a, k, b, n, c, pool);
  gemm(form, false, false, m, n, kp, ap, kp, bp, n, cp, pool);
  int bad = memcmp(c, cp, (size_t)(m * n) * sizeof *c) != 0;
  free(a), free(b), free(ap), free(bp), free(c), free(cp);
  return bad;
}

static void test_isa(enum kern_isa isa) {
  CHECK(kern_isa_force(isa));
  static const int64_t ms[] = {2, 3, 6, 7, 12, 13, 20};
  static const int64_t ks[] = {1, 5, 191, 192, 193, 256, 257, 600};
  static const int64_t ns[] = {1, 17, 70};
  int cases = 0;
  for (int form = 0; form < 2; form++)
    for (int t = 0; t < 4; t++)
      for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
          int64_t m = ms[mi], k = ks[ki], n = ns[(mi + ki) % 3];
          struct tolk_pool *pool = (mi + ki + (size_t)t) % 2 ? pool2 : NULL;
          int bad = rows_alone(form, t & 1, t >> 1, m, n, k, pool);
          CHECK_MSG(bad == 0, "%s form %d ta %d tb %d m %lld n %lld k %lld: %d rows differ alone",
                    kern_isa_name(isa), form, t & 1, t >> 1, (long long)m, (long long)n,
                    (long long)k, bad);
          cases++;
        }
  /* The Marian shapes: a beam of rows over the LM head and the FFN. */
  CHECK(rows_alone(1, false, false, 8, 2000, 512, pool2) == 0);
  CHECK(rows_alone(1, false, false, 16, 512, 2048, pool2) == 0);
  static const int64_t pads[][2] = {{3, 7}, {40, 41}, {100, 192}, {150, 300}, {190, 600}};
  for (int form = 0; form < 2; form++)
    for (size_t i = 0; i < sizeof pads / sizeof *pads; i++)
      for (int64_t m = 1; m <= 13; m += 6) {
        CHECK_MSG(zero_padded(form, m, 33, pads[i][0], pads[i][1], i % 2 ? pool2 : NULL) == 0,
                  "%s form %d m %lld: k %lld padded to %lld changes C", kern_isa_name(isa), form,
                  (long long)m, (long long)pads[i][0], (long long)pads[i][1]);
        cases++;
      }
  printf("isa %s: %d cases\n", kern_isa_name(isa), cases);
}

int main(void) {
  tolk_error err = {0};
  tu_seed(20261203);
  CHECK(tolk_pool_create(2, &pool2, &err) == TOLK_OK);
  for (int i = KERN_ISA_SCALAR; i <= KERN_ISA_AVX512; i++) {
    if (kern_isa_supported((enum kern_isa)i)) test_isa((enum kern_isa)i);
    else printf("isa %s: not on this CPU, skipped\n", kern_isa_name((enum kern_isa)i));
  }
  tolk_pool_free(pool2);
  return tu_finish("test_kern_sgemm_rows");
}
