/*
 * igemm.c — the 8-bit integer GEMM: the scalar reference, operand packing,
 * the portable micro-kernel, the choice of implementation, and the driver
 * that splits C into (row block, 16-column panel) tasks for the thread pool.
 * The AVX2 micro-kernel is in igemm_avx2.c. See igemm.h for the layouts.
 */
#include "igemm.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/pool.h"

/* Element k of row/column data as int32, for either signedness. */
static inline int32_t load_q(const void *base, int64_t idx, bool is_signed) {
  return is_signed ? (int32_t)((const int8_t *)base)[idx]
                   : (int32_t)((const uint8_t *)base)[idx];
}

void kern_igemm_ref(const struct kern_igemm *p) {
  for (int64_t i = 0; i < p->m; i++) {
    int32_t za = p->a_zp ? p->a_zp[i * p->a_zp_stride] : 0;
    for (int64_t j = 0; j < p->n; j++) {
      int32_t zb = p->b_zp ? p->b_zp[j * p->b_zp_stride] : 0;
      /* Unsigned so that the wrap-around ORT's int32 accumulators show on
       * huge k is defined behaviour here too. */
      uint32_t acc = 0;
      for (int64_t q = 0; q < p->k; q++) {
        int32_t av = load_q(p->a, i * p->lda + q, p->a_signed) - za;
        int32_t bv = load_q(p->b, q * p->ldb + j, p->b_signed) - zb;
        acc += (uint32_t)(av * bv);
      }
      p->c[i * p->ldc + j] = (int32_t)acc;
    }
  }
}

/* ------------------------------------------------------------------ packing */

size_t kern_igemm_pack_b_size(int64_t n, int64_t k) {
  if (n < 0 || k < 0) return 0;
  size_t panels = (size_t)((n + KERN_IGEMM_NR - 1) / KERN_IGEMM_NR);
  size_t pairs = (size_t)((k + 1) / 2);
  size_t bytes;
  if (!tolk_mul_size(panels, pairs, &bytes) || !tolk_mul_size(bytes, 2 * KERN_IGEMM_NR, &bytes))
    return 0;
  return bytes ? bytes : 1;
}

void kern_igemm_pack_b(int64_t n, int64_t k, const void *b, int64_t ldb, bool trans_b,
                       bool is_signed, struct kern_igemm_b *out) {
  const uint8_t *src = b;
  int64_t kp = (k + 1) / 2;
  int64_t panels = (n + KERN_IGEMM_NR - 1) / KERN_IGEMM_NR;
  out->n = n;
  out->k = k;
  out->is_signed = is_signed;
  for (int64_t pn = 0; pn < panels; pn++) {
    uint8_t *dst = out->data + pn * kp * 2 * KERN_IGEMM_NR;
    for (int64_t q = 0; q < kp; q++) {
      for (int j = 0; j < KERN_IGEMM_NR; j++) {
        int64_t col = pn * KERN_IGEMM_NR + j;
        for (int h = 0; h < 2; h++) {
          int64_t row = 2 * q + h;
          uint8_t v = 0;
          if (col < n && row < k) v = trans_b ? src[col * ldb + row] : src[row * ldb + col];
          dst[(q * KERN_IGEMM_NR + j) * 2 + h] = v;
        }
      }
    }
  }
}

/* Packed A: m rows of kp int32 (two int16 A - za), then m int32 row sums. */
size_t kern_igemm_work_size(int64_t m, int64_t k) {
  if (m < 0 || k < 0) return 0;
  size_t per_row = (size_t)((k + 1) / 2) + 1, words, bytes;
  if (!tolk_mul_size((size_t)m, per_row, &words) || !tolk_mul_size(words, 4, &bytes)) return 0;
  return bytes ? bytes : 4;
}

static void pack_a(const struct kern_igemm *p, int32_t *pa, int32_t *rowsum) {
  int64_t kp = (p->k + 1) / 2;
  for (int64_t i = 0; i < p->m; i++) {
    int32_t za = p->a_zp ? p->a_zp[i * p->a_zp_stride] : 0;
    uint32_t sum = 0;
    int32_t *dst = pa + i * kp;
    for (int64_t q = 0; q < kp; q++) {
      int32_t lo = load_q(p->a, i * p->lda + 2 * q, p->a_signed) - za;
      int32_t hi = 2 * q + 1 < p->k ? load_q(p->a, i * p->lda + 2 * q + 1, p->a_signed) - za : 0;
      sum += (uint32_t)lo + (uint32_t)hi;
      dst[q] = (int32_t)(((uint32_t)hi << 16) | ((uint32_t)lo & 0xffffu));
    }
    rowsum[i] = (int32_t)sum;
  }
}

/* ------------------------------------------------------------ micro-kernels */

static void tile_portable(int mr, int64_t kp, const int32_t *pa, int64_t pa_ld,
                          const uint8_t *panel, bool b_signed, int32_t *tile) {
  uint32_t acc[KERN_IGEMM_MR][KERN_IGEMM_NR];
  memset(acc, 0, sizeof acc);
  for (int64_t q = 0; q < kp; q++) {
    const uint8_t *bq = panel + q * 2 * KERN_IGEMM_NR;
    int32_t b0[KERN_IGEMM_NR], b1[KERN_IGEMM_NR];
    for (int j = 0; j < KERN_IGEMM_NR; j++) {
      b0[j] = b_signed ? (int8_t)bq[2 * j] : bq[2 * j];
      b1[j] = b_signed ? (int8_t)bq[2 * j + 1] : bq[2 * j + 1];
    }
    for (int i = 0; i < mr; i++) {
      uint32_t w = (uint32_t)pa[i * pa_ld + q];
      int32_t lo = (int16_t)(w & 0xffffu), hi = (int16_t)(w >> 16);
      for (int j = 0; j < KERN_IGEMM_NR; j++) acc[i][j] += (uint32_t)(lo * b0[j] + hi * b1[j]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < KERN_IGEMM_NR; j++) tile[i * KERN_IGEMM_NR + j] = (int32_t)acc[i][j];
}

/* ----------------------------------------------------------------- dispatch */

struct isa_impl {
  const char *name;
  kern_igemm_tile_fn tile;
};

static const struct isa_impl impl_portable = {"scalar", tile_portable};
#if defined(__x86_64__) || defined(__i386__)
static const struct isa_impl impl_avx2 = {"avx2", kern_igemm_tile_avx2};
#endif

static bool have_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

static const struct isa_impl *impl_by_name(const char *name) {
  if (!strcmp(name, "scalar")) return &impl_portable;
#if defined(__x86_64__) || defined(__i386__)
  /* avx512 is accepted as a request and served by AVX2, the widest path
   * this GEMM has. */
  if ((!strcmp(name, "avx2") || !strcmp(name, "avx512")) && have_avx2()) return &impl_avx2;
#endif
  return NULL;
}

static const struct isa_impl *detect(void) {
  const char *env = getenv("TOLK_ISA");
  if (env && *env) {
    const struct isa_impl *i = impl_by_name(env);
    if (i) return i;
  }
  const struct isa_impl *best = impl_by_name("avx2");
  return best ? best : &impl_portable;
}

/* Written once before any GEMM runs (the race of two threads detecting at
 * the same time stores the same pointer), then only read. */
static const struct isa_impl *_Atomic cur_impl;

static const struct isa_impl *impl(void) {
  const struct isa_impl *i = cur_impl;
  if (!i) {
    i = detect();
    cur_impl = i;
  }
  return i;
}

const char *kern_igemm_isa(void) { return impl()->name; }

bool kern_igemm_force_isa(const char *name) {
  if (!name) {
    cur_impl = detect();
    return true;
  }
  const struct isa_impl *i = impl_by_name(name);
  if (!i) return false;
  cur_impl = i;
  return true;
}

/* ------------------------------------------------------------------- driver */

#define ROW_BLOCK (KERN_IGEMM_MR * 16)

struct igemm_job {
  const struct kern_igemm *p;
  const struct kern_igemm_b *b;
  const int32_t *pa, *rowsum;
  int64_t kp, panels;
  kern_igemm_tile_fn tile;
};

static void igemm_range(void *arg, int64_t begin, int64_t end) {
  const struct igemm_job *job = arg;
  const struct kern_igemm *p = job->p;
  int32_t tile[KERN_IGEMM_MR * KERN_IGEMM_NR];
  for (int64_t t = begin; t < end; t++) {
    int64_t mb = t / job->panels, pn = t % job->panels;
    int64_t row_end = (mb + 1) * ROW_BLOCK < p->m ? (mb + 1) * ROW_BLOCK : p->m;
    int64_t col0 = pn * KERN_IGEMM_NR;
    int ncols = p->n - col0 < KERN_IGEMM_NR ? (int)(p->n - col0) : KERN_IGEMM_NR;
    const uint8_t *panel = job->b->data + pn * job->kp * 2 * KERN_IGEMM_NR;
    int32_t zb[KERN_IGEMM_NR];
    for (int j = 0; j < ncols; j++)
      zb[j] = p->b_zp ? p->b_zp[(col0 + j) * p->b_zp_stride] : 0;
    for (int64_t i0 = mb * ROW_BLOCK; i0 < row_end; i0 += KERN_IGEMM_MR) {
      int mr = row_end - i0 < KERN_IGEMM_MR ? (int)(row_end - i0) : KERN_IGEMM_MR;
      job->tile(mr, job->kp, job->pa + i0 * job->kp, job->kp, panel, job->b->is_signed, tile);
      for (int i = 0; i < mr; i++) {
        uint32_t rs = (uint32_t)job->rowsum[i0 + i];
        int32_t *crow = p->c + (i0 + i) * p->ldc + col0;
        const int32_t *trow = tile + i * KERN_IGEMM_NR;
        for (int j = 0; j < ncols; j++)
          crow[j] = (int32_t)((uint32_t)trow[j] - (uint32_t)zb[j] * rs);
      }
    }
  }
}

void kern_igemm_packed(const struct kern_igemm *p, const struct kern_igemm_b *b, void *work,
                       struct tolk_pool *pool) {
  if (p->m <= 0 || p->n <= 0) return;
  int64_t kp = (p->k + 1) / 2;
  int32_t *pa = work;
  int32_t *rowsum = pa + p->m * kp;
  pack_a(p, pa, rowsum);
  struct igemm_job job = {p, b, pa, rowsum, kp, (p->n + KERN_IGEMM_NR - 1) / KERN_IGEMM_NR,
                          impl()->tile};
  int64_t mblocks = (p->m + ROW_BLOCK - 1) / ROW_BLOCK;
  /* Aim for chunks of at least ~64K multiply-adds so that handing a chunk to
   * a thread costs little against its work. */
  int64_t rows = p->m < ROW_BLOCK ? p->m : ROW_BLOCK;
  int64_t per_task = rows * KERN_IGEMM_NR * (p->k > 0 ? p->k : 1);
  int64_t grain = per_task >= 65536 ? 1 : 65536 / per_task;
  tolk_pool_for(pool, mblocks * job.panels, grain, igemm_range, &job);
}
