/*
 * bf16dot.c — the bfloat16 dot-product GEMM (kern.h, "bfloat16 dot
 * products"; bf16dot.h gives its arithmetic): B packed as pairs of k, and
 * tasks of whole panels and row tiles on the pool. A task rounds a block of
 * its rows to pairs (L2-sized: all of a decoder step's rows) and runs each
 * of its panels down them, so a panel is read once a block, from memory
 * once. The AVX512-BF16 tier runs where the CPU has it; elsewhere, and for
 * the tests, the same chains run in portable C straight from A's floats.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "../core/half.h"
#include "../core/pool.h"
#include "bf16dot.h"
#include "sgemm_impl.h"

/* ------------------------------------------------------------ arithmetic */

/* float → bfloat16 as VCVTNEPS2BF16 rounds. */
static uint16_t round_bf16(float f) {
  const uint32_t x = tolk_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  if (!(x & 0x7f800000u)) return (uint16_t)((x >> 16) & 0x8000u); /* zero or denormal */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* A denormal as a zero of its sign. */
static float flush(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

/* acc + x·y, one accumulation of VDPBF16PS. */
static float dot_step(float acc, uint16_t x, uint16_t y) {
  return flush(fmaf(flush(tolk_bf16_to_f32(x)), flush(tolk_bf16_to_f32(y)), acc));
}

/* What C's element becomes from the chain's sum. */
static float finish(float sum, float alpha, float beta, const float *c, const float *bias) {
  float v = alpha == 1.0f ? sum : alpha * sum;
  if (beta != 0.0f) v = fmaf(beta, *c, v);
  return bias ? v + *bias : v;
}

void kern_bf16dot_ref(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float beta, const float *bias, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; p += 2) {
        const bool odd = p + 1 < k;
        acc = dot_step(acc, odd ? round_bf16(a[i * lda + p + 1]) : 0, odd ? round_bf16(b[(p + 1) * ldb + j]) : 0);
        acc = dot_step(acc, round_bf16(a[i * lda + p]), round_bf16(b[p * ldb + j]));
      }
      c[i * ldc + j] = finish(acc, alpha, beta, &c[i * ldc + j], bias ? &bias[j] : NULL);
    }
}

/* ------------------------------------------------------------- dispatch */

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static bool cpu_bf16;
static bool portable_only;

/* CPUID leaf 7 sub-leaf 1, EAX bit 5: AVX512_BF16. */
static void cpu_init(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  cpu_bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
#endif
}

bool kern_bf16dot_fast(void) {
  pthread_once(&cpu_once, cpu_init);
  return !portable_only && cpu_bf16 && kern_bf16dot_avx512bf16_built() && kern_isa_active() == KERN_ISA_AVX512;
}

void kern_bf16dot_force_portable(bool on) { portable_only = on; }

/* -------------------------------------------------------------- packing */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

tolk_status kern_sgemm_pack_b_bf16dot(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb,
                                      kern_read_fn read, struct kern_packed_b **out, tolk_error *err) {
  *out = NULL;
  if (k < 0 || n < 0)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "bf16 pack: negative size %lld x %lld", (long long)k,
                     (long long)n);
  const int64_t kp = ceil_div(k, 2), panels = ceil_div(n, BF16DOT_NR);
  size_t pairs;
  if (!tolk_mul_size((size_t)panels * BF16DOT_NR, (size_t)kp, &pairs) || pairs > SIZE_MAX / 8)
    return tolk_fail(err, TOLK_ERR_LIMIT, "bf16 pack: %lld x %lld matrix is too large", (long long)k,
                     (long long)n);
  struct kern_packed_b *pb = calloc(1, sizeof *pb);
  if (!pb) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "bf16 pack: out of memory");
  pb->k = k;
  pb->n = n;
  pb->bytes = pairs * sizeof(uint32_t);
  if (pb->bytes && !(pb->pairs = kern_alloc_weights(pb->bytes))) {
    free(pb);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "bf16 pack: out of memory for a %lld x %lld matrix (%zu bytes)",
                     (long long)k, (long long)n, pairs * sizeof(uint32_t));
  }
  const unsigned char *bb = b;
  /* A tied LM head is 133 MB of file pages: they go back as the panels are done. */
  struct b_reads reads = b_reads_start(read, b, trans_b, k, n, ldb);
  for (int64_t jp = 0; jp < panels; jp++) {
    uint32_t *dst = pb->pairs + jp * kp * BF16DOT_NR;
    const int64_t j0 = jp * BF16DOT_NR, nv = n - j0 < BF16DOT_NR ? n - j0 : BF16DOT_NR;
    for (int64_t p = 0; p < kp; p++)
      for (int64_t x = 0; x < BF16DOT_NR; x++) {
        uint16_t h[2] = {0, 0};
        for (int e = 0; e < 2 && x < nv && 2 * p + e < k; e++) {
          const int64_t q = 2 * p + e, j = j0 + x;
          float f;
          memcpy(&f, bb + (size_t)(trans_b ? j * ldb + q : q * ldb + j) * sizeof f, sizeof f);
          h[e] = round_bf16(f);
        }
        dst[p * BF16DOT_NR + x] = (uint32_t)h[0] | (uint32_t)h[1] << 16;
      }
    b_reads_panel(&reads, j0 + nv);
  }
  b_reads_end(&reads);
  *out = pb;
  return TOLK_OK;
}

/* --------------------------------------------------------------- driver */

struct dot_job {
  bool fast; /* the AVX512-BF16 tier; else the portable chains read a */
  const float *a;
  int64_t rs_a, cs_a;
  const uint32_t *b;
  int64_t m, n, k, kp;
  float alpha, beta;
  const float *bias;
  float *c;
  int64_t ldc;
  struct gemm_grid g;
};

/* C rows [i0, i1) × panels [jp0, jp1) in portable C. */
static void dot_portable(const struct dot_job *j, int64_t i0, int64_t i1, int64_t jp0, int64_t jp1) {
  for (int64_t i = i0; i < i1; i++)
    for (int64_t x = jp0 * BF16DOT_NR; x < j->n && x < jp1 * BF16DOT_NR; x++) {
      const uint32_t *col = j->b + x / BF16DOT_NR * j->kp * BF16DOT_NR + x % BF16DOT_NR;
      const float *row = j->a + i * j->rs_a;
      float acc = 0.0f;
      for (int64_t p = 0; p < j->kp; p++) {
        const uint32_t y = col[p * BF16DOT_NR];
        const uint16_t hi = 2 * p + 1 < j->k ? round_bf16(row[(2 * p + 1) * j->cs_a]) : 0;
        acc = dot_step(acc, hi, (uint16_t)(y >> 16));
        acc = dot_step(acc, round_bf16(row[2 * p * j->cs_a]), (uint16_t)y);
      }
      float *cx = j->c + i * j->ldc + x;
      *cx = finish(acc, j->alpha, j->beta, cx, j->bias ? &j->bias[x] : NULL);
    }
}

/* Rows a task rounds at a time: 256 KiB of pairs, all of a decoder step's
 * rows, so that its panels stream from memory once; a whole tile at least. */
static int64_t block_rows(int64_t kp) {
  const int64_t rows = ((int64_t)256 << 10) / (kp * (int64_t)sizeof(uint32_t)) / BF16DOT_MR * BF16DOT_MR;
  return rows > BF16DOT_MR ? rows : BF16DOT_MR;
}

/* Rows [i0, i1) of A as pairs into ap, kp a row. */
static void round_rows(const struct dot_job *j, int64_t i0, int64_t i1, uint32_t *ap) {
  for (int64_t i = i0; i < i1; i++) {
    uint32_t *row = ap + (i - i0) * j->kp;
    if (j->cs_a == 1) {
      kern_bf16dot_round_avx512bf16(j->a + i * j->rs_a, j->k, row);
      continue;
    }
    for (int64_t p = 0; p < j->kp; p++)
      row[p] = round_bf16(j->a[i * j->rs_a + 2 * p * j->cs_a]) |
               (uint32_t)(2 * p + 1 < j->k ? round_bf16(j->a[i * j->rs_a + (2 * p + 1) * j->cs_a]) : 0) << 16;
  }
}

static void dot_block(const struct dot_job *j, int64_t i0, int64_t i1, int64_t jp0, int64_t jp1) {
  const int64_t mc = block_rows(j->kp) < i1 - i0 ? block_rows(j->kp) : i1 - i0;
  uint32_t *ap = j->fast ? kern_thread_buf((size_t)mc * (size_t)j->kp * sizeof(uint32_t)) : NULL;
  if (!ap) {
    dot_portable(j, i0, i1, jp0, jp1);
    return;
  }
  for (int64_t ib = i0; ib < i1; ib += mc) {
    const int64_t ie = i1 - ib < mc ? i1 : ib + mc;
    round_rows(j, ib, ie, ap);
    /* With two row tiles or more, each prefetches its share of the next
     * panel: the first tile alone, reading the panel from memory, ran at half
     * speed. A single tile streams the panels at memory speed anyway, and
     * there the prefetches halved it (1 x 512 x 65001: 1.4 -> 2.5 ms). */
    const int64_t tiles = (ie - ib + BF16DOT_MR - 1) / BF16DOT_MR, share = tiles > 1 ? (j->kp + tiles - 1) / tiles : 0;
    for (int64_t jp = jp0; jp < jp1; jp++) {
      const int nv = (int)(j->n - jp * BF16DOT_NR < BF16DOT_NR ? j->n - jp * BF16DOT_NR : BF16DOT_NR);
      const uint32_t *bp = j->b + jp * j->kp * BF16DOT_NR, *next = bp + j->kp * BF16DOT_NR;
      for (int64_t ir = ib, t = 0; ir < ie; ir += BF16DOT_MR, t++) {
        const int64_t from = t * share, rows = jp + 1 < jp1 ? (j->kp - from < share ? j->kp - from : share) : 0;
        kern_bf16dot_tile_avx512bf16((int)(ie - ir < BF16DOT_MR ? ie - ir : BF16DOT_MR), j->kp,
                                     ap + (ir - ib) * j->kp, j->kp, bp, j->c + ir * j->ldc + jp * BF16DOT_NR,
                                     j->ldc, nv, j->alpha, j->beta, j->bias ? j->bias + jp * BF16DOT_NR : NULL,
                                     next + from * BF16DOT_NR, rows > 0 ? rows : 0);
      }
    }
  }
}

static void dot_tasks(void *arg, int64_t t0, int64_t t1) {
  const struct dot_job *j = arg;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t i0 = t % j->g.row_tasks * j->g.rows_per_task, jp0 = t / j->g.row_tasks * j->g.panels_per_task;
    dot_block(j, i0, i0 + j->g.rows_per_task < j->m ? i0 + j->g.rows_per_task : j->m, jp0,
              jp0 + j->g.panels_per_task < j->g.panels ? jp0 + j->g.panels_per_task : j->g.panels);
  }
}

void kern_bf16dot_run(bool trans_a, int64_t m, float alpha, const float *a, int64_t lda,
                      const struct kern_packed_b *b, float beta, const float *bias, float *c, int64_t ldc,
                      struct tolk_pool *pool) {
  struct dot_job j = {.a = a, .rs_a = trans_a ? 1 : lda, .cs_a = trans_a ? lda : 1, .b = b->pairs,
                      .m = m, .n = b->n, .k = b->k, .kp = ceil_div(b->k, 2), .alpha = alpha, .beta = beta,
                      .bias = bias, .c = c, .ldc = ldc};
  j.fast = kern_bf16dot_fast();
  j.g = kern_gemm_grid(m, j.n, j.k, BF16DOT_MR, BF16DOT_NR, 1, tolk_pool_threads(pool));
  if (j.g.tasks == 1) dot_tasks(&j, 0, 1);
  else tolk_pool_for(pool, j.g.tasks, 1, dot_tasks, &j);
}
