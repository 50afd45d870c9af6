/*
 * igemm.c — the 8-bit integer GEMM: the scalar reference, operand packing,
 * the portable micro-kernels (pairs, and the VNNI tiers' quads), the choice
 * of implementation, and the driver that splits C into (row block, 16-column
 * panel) tasks for the thread pool. The x86 micro-kernels are in
 * igemm_avx2.c, igemm_avxvnni.c and igemm_avx512vnni.c. See igemm.h for the
 * layouts.
 */
#include "igemm.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <asm/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/core.h"
#include "core/pool.h"

/* Element k of row/column data as int32, for either signedness. */
static inline int32_t load_q(const void *base, int64_t idx, bool is_signed) {
  return is_signed ? (int32_t)((const int8_t *)base)[idx]
                   : (int32_t)((const uint8_t *)base)[idx];
}

/* p->f32's formula for one element, as igemm.h states it. */
static float scaled_ref(const struct kern_igemm_f32 *f, int64_t i, int64_t j, int32_t v) {
  float rs = f->row_scale[i * f->row_scale_stride], cs = f->col_scale[j * f->col_scale_stride];
  float y = f->chained ? (float)v * rs * cs : (float)v * (rs * cs);
  return f->bias ? y + f->bias[j] : y;
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
      if (p->f32)
        p->f32->c[i * p->f32->ldc + j] = scaled_ref(p->f32, i, j, (int32_t)acc);
      else
        p->c[i * p->ldc + j] = (int32_t)acc;
    }
  }
}

/* ------------------------------------------------------------------ packing */

/* Bytes of the panels alone (0 on overflow). */
static size_t panels_size(int64_t n, int64_t k) {
  size_t panels = (size_t)((n + KERN_IGEMM_NR - 1) / KERN_IGEMM_NR), bytes;
  if (!tolk_mul_size(panels, (size_t)kern_igemm_pairs(k), &bytes) ||
      !tolk_mul_size(bytes, 2 * KERN_IGEMM_NR, &bytes))
    return 0;
  return bytes;
}

size_t kern_igemm_pack_b_size(int64_t n, int64_t k) {
  if (n < 0 || k < 0) return 0;
  size_t bytes = panels_size(n, k), sums;
  if ((!bytes && n > 0 && k > 0) || !tolk_mul_size((size_t)n, sizeof(int32_t), &sums) ||
      bytes + sums < bytes)
    return 0;
  return bytes + sums ? bytes + sums : 1;
}

void kern_igemm_pack_b(int64_t n, int64_t k, const void *b, int64_t ldb, bool trans_b,
                       bool is_signed, struct kern_igemm_b *out) {
  const uint8_t *src = b;
  int64_t kp = kern_igemm_pairs(k);
  int64_t panels = (n + KERN_IGEMM_NR - 1) / KERN_IGEMM_NR;
  /* The panel bytes are a multiple of 32, so the sums are aligned. */
  int32_t *colsum = (int32_t *)(void *)(out->data + panels_size(n, k));
  out->n = n;
  out->k = k;
  out->is_signed = is_signed;
  out->colsum = colsum;
  for (int64_t pn = 0; pn < panels; pn++) {
    uint8_t *dst = out->data + pn * kp * 2 * KERN_IGEMM_NR;
    if (trans_b && (pn + 1) * KERN_IGEMM_NR <= n && 2 * kp == k) {
      /* A whole panel of Bᵀ's rows (an LM head's vocabulary entries): each
       * column's pairs are two bytes in a row of it, copied without the
       * tests the edges need (33 million weights: 0.1 s a byte at a time). */
      for (int j = 0; j < KERN_IGEMM_NR; j++) {
        const uint8_t *s = src + (pn * KERN_IGEMM_NR + j) * ldb;
        for (int64_t q = 0; q < kp; q++) memcpy(dst + (q * KERN_IGEMM_NR + j) * 2, s + 2 * q, 2);
      }
      continue;
    }
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
  for (int64_t j = 0; j < n; j++) {
    uint32_t sum = 0;
    for (int64_t row = 0; row < k; row++) {
      uint8_t v = trans_b ? src[j * ldb + row] : src[row * ldb + j];
      sum += (uint32_t)(is_signed ? (int32_t)(int8_t)v : (int32_t)v - 128);
    }
    colsum[j] = (int32_t)sum;
  }
}

/* Packed A: m rows of kp int32 (two int16 A - za; the VNNI tiers: kp / 2
 * words of four uint8), then m int32 row sums of A - za, then m zero points
 * (VNNI). */
size_t kern_igemm_work_size(int64_t m, int64_t k) {
  if (m < 0 || k < 0) return 0;
  size_t per_row = (size_t)kern_igemm_pairs(k) + 2, words, bytes;
  if (!tolk_mul_size((size_t)m, per_row, &words) || !tolk_mul_size(words, 4, &bytes)) return 0;
  return bytes ? bytes : 4;
}

/* Row i's pairs from k even elements of type T (int8_t or uint8_t): the
 * common case, in a loop the compiler vectorizes (the encoder's A is
 * hundreds of rows a GEMM, packed on one thread). */
#define PACK_PAIRS(T)                                                              \
  do {                                                                             \
    const T *src = (const T *)p->a + i * p->lda;                                   \
    for (int64_t q = 0; q < half; q++) {                                           \
      int32_t lo = (int32_t)src[2 * q] - za, hi = (int32_t)src[2 * q + 1] - za;     \
      sum += (uint32_t)lo + (uint32_t)hi;                                          \
      dst[q] = (int32_t)(((uint32_t)hi << 16) | ((uint32_t)lo & 0xffffu));         \
    }                                                                              \
  } while (0)

static void pack_a(const struct kern_igemm *p, int32_t *pa, int32_t *rowsum) {
  int64_t kp = kern_igemm_pairs(p->k), half = p->k / 2;
  for (int64_t i = 0; i < p->m; i++) {
    int32_t za = p->a_zp ? p->a_zp[i * p->a_zp_stride] : 0;
    uint32_t sum = 0;
    int32_t *dst = pa + i * kp;
    if (p->a_signed)
      PACK_PAIRS(int8_t);
    else
      PACK_PAIRS(uint8_t);
    for (int64_t q = half; q < kp; q++) {
      int32_t lo = 2 * q < p->k ? load_q(p->a, i * p->lda + 2 * q, p->a_signed) - za : 0;
      int32_t hi = 2 * q + 1 < p->k ? load_q(p->a, i * p->lda + 2 * q + 1, p->a_signed) - za : 0;
      sum += (uint32_t)lo + (uint32_t)hi;
      dst[q] = (int32_t)(((uint32_t)hi << 16) | ((uint32_t)lo & 0xffffu));
    }
    rowsum[i] = (int32_t)sum;
  }
}

/* Row i into dst, and Σ A over it (wrapping), from k elements of type T
 * (int8_t or uint8_t), in a loop the compiler vectorises: a decoder step
 * packs A for every MatMul on the calling thread, and a loop with a
 * branch per byte took 7 % of that thread in a beam search at 64 rows. */
#define PACK_QUADS(T)                                          \
  do {                                                         \
    const T *restrict src = (const T *)p->a + i * p->lda;      \
    uint8_t *restrict out = dst;                               \
    const int64_t k = p->k;                                    \
    for (int64_t q = 0; q < k; q++) {                          \
      out[q] = (uint8_t)((uint8_t)src[q] ^ flip);              \
      sum += (uint32_t)(int32_t)src[q];                        \
    }                                                          \
  } while (0)

/* A for the VNNI tiers: raw uint8 (int8 A plus 128, by flipping the sign
 * bit) in words of 4 k, zero past k so that padding adds 0 * b; the row sums
 * of A - za as pack_a makes them, and za' (za + 128 for int8 A). */
static void pack_a_u8(const struct kern_igemm *p, uint32_t *pa, int32_t *rowsum, int32_t *za_u8) {
  int64_t kq = kern_igemm_pairs(p->k) / 2;
  const uint8_t flip = p->a_signed ? 0x80 : 0;
  for (int64_t i = 0; i < p->m; i++) {
    int32_t za = p->a_zp ? p->a_zp[i * p->a_zp_stride] : 0;
    uint8_t *dst = (uint8_t *)(pa + i * kq);
    uint32_t sum = 0;
    if (p->a_signed)
      PACK_QUADS(int8_t);
    else
      PACK_QUADS(uint8_t);
    memset(dst + p->k, 0, (size_t)(4 * kq - p->k));
    /* Σ (A - za) = Σ A - k·za, modulo 2^32 as the sums wrap */
    rowsum[i] = (int32_t)(sum - (uint32_t)za * (uint32_t)p->k);
    za_u8[i] = za + (p->a_signed ? 128 : 0);
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

/* The VNNI tiers' arithmetic in portable C ("vnni-ref"): what vpdpbusd
 * does, four uint8 × int8 products per column and quad, added wrapping. */
static void qtile_portable(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
                           const uint8_t *panel, bool b_flip, int32_t *tile) {
  uint32_t acc[KERN_IGEMM_MR][KERN_IGEMM_NR];
  memset(acc, 0, sizeof acc);
  const uint8_t flip = b_flip ? 0x80 : 0;
  for (int64_t t = 0; t < kq; t++) {
    const uint8_t *r0 = panel + 2 * t * 2 * KERN_IGEMM_NR, *r1 = r0 + 2 * KERN_IGEMM_NR;
    for (int i = 0; i < mr; i++) {
      const uint8_t *a = (const uint8_t *)(pa + i * pa_ld + t);
      for (int j = 0; j < KERN_IGEMM_NR; j++) {
        const uint8_t b[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
        int32_t dot = 0;
        for (int h = 0; h < 4; h++) dot += (int32_t)a[h] * (int8_t)(uint8_t)(b[h] ^ flip);
        acc[i][j] += (uint32_t)dot;
      }
    }
  }
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < KERN_IGEMM_NR; j++) tile[i * KERN_IGEMM_NR + j] = (int32_t)acc[i][j];
}

#define IGF_NAME kern_igemm_finish_scalar
#include "igemm_finish.h"

/* ----------------------------------------------------------------- dispatch */

/* One tier: a pair tile (A widened to int16) or a quad tile (VNNI), the
 * few-rows kernel over several panels where the tier has one and the most
 * rows it takes, the last pass at the tier's width, and AMX's kernel for
 * whole row blocks. */
struct isa_impl {
  const char *name;
  kern_igemm_tile_fn tile;
  kern_igemm_qtile_fn qtile;
  kern_igemm_row_fn row;
  kern_igemm_qrow_fn qrow;
  int few_rows;
  kern_igemm_finish_fn finish;
  kern_igemm_qblock_fn qblock;
};

static const struct isa_impl impl_portable = {"scalar", tile_portable, NULL, NULL, NULL, 0, kern_igemm_finish_scalar,
                                              NULL};
static const struct isa_impl impl_vnni_ref = {"vnni-ref", NULL, qtile_portable, NULL, NULL, 0,
                                              kern_igemm_finish_scalar, NULL};
#if defined(__x86_64__) || defined(__i386__)
static const struct isa_impl impl_avx2 = {"avx2", kern_igemm_tile_avx2, NULL, kern_igemm_row_avx2, NULL, 3,
                                          kern_igemm_finish_avx2, NULL};
static const struct isa_impl impl_avxvnni = {"avxvnni", NULL, kern_igemm_qtile_avxvnni, NULL,
                                             kern_igemm_qrow_avxvnni, 3, kern_igemm_finish_avxvnni, NULL};
/* Three rows go to the tile: a decoder step of three sentences, int8 with
 * the int8 head, batch 3, 24 sentences, Zen 4, 2 threads: 24.4-26.2 sent/s
 * over two panels at a time, 27.6 one panel at a time with the tile's
 * prefetch; two rows alike, one row 67 against 70-72 ms a sentence. */
static const struct isa_impl impl_avx512vnni = {"avx512vnni", NULL, kern_igemm_qtile_avx512vnni, NULL,
                                                kern_igemm_qrow_avx512vnni, 2, kern_igemm_finish_avx512vnni, NULL};
/* AVX-512 VNNI's tier with AMX for the row blocks of 16 rows or more. */
static const struct isa_impl impl_amx = {"amx", NULL, kern_igemm_qtile_avx512vnni, NULL, kern_igemm_qrow_avx512vnni,
                                         2, kern_igemm_finish_avx512vnni, kern_igemm_qblock_amx};

/* CPUID leaf 7: sub-leaf 0 ECX bit 11 is AVX512_VNNI, sub-leaf 1 EAX bit 4
 * AVX-VNNI. GCC 12's __builtin_cpu_supports knows the first, not the second. */
static bool cpu_avx512vnni(void) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 11 & 1);
}

static bool cpu_avxvnni(void) {
#ifdef KERN_EMULATE_AVXVNNI /* the test build whose avxvnni tier needs AVX2 only */
  return true;
#else
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
#endif
}

/* AMX-TILE and AMX-INT8 (CPUID leaf 7 EDX bits 24, 25), tile state enabled
 * by the OS (XCR0 bits 17, 18), and Linux's leave for this process to use
 * it (5.16 and later; granted once, to every thread): without that the
 * first tile instruction kills the process. Linux refuses it where a
 * thread's signal stack is too small for the larger signal frame; then
 * the AVX-512 VNNI tier runs. */
static bool cpu_amx(void) {
#ifdef KERN_EMULATE_AMX /* the test build whose tile instructions are C */
  return true;
#elif defined(__linux__) && defined(__x86_64__)
  unsigned a, b, c, d, lo, hi;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d >> 24 & 3) != 3) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return false; /* OSXSAVE: xgetbv works */
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
  (void)hi;
  if ((lo >> 17 & 3) != 3) return false;
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
  return false;
#endif
}
#endif

static bool have(const char *tier) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  /* __builtin_cpu_supports checks that the OS saves the registers too
   * (XCR0), so an "avx2" or "avx512bw" answer covers that for VNNI. */
  if (!strcmp(tier, "avx2")) return __builtin_cpu_supports("avx2");
  if (!strcmp(tier, "avx512vnni"))
    return kern_igemm_avx512vnni_built() && __builtin_cpu_supports("avx512bw") && cpu_avx512vnni();
  if (!strcmp(tier, "amx")) return kern_igemm_amx_built() && have("avx512vnni") && cpu_amx();
  if (!strcmp(tier, "avxvnni"))
    return kern_igemm_avxvnni_built() && __builtin_cpu_supports("avx2") && cpu_avxvnni();
#endif
  (void)tier;
  return false;
}

static const struct isa_impl *impl_by_name(const char *name) {
  if (!strcmp(name, "scalar")) return &impl_portable;
  if (!strcmp(name, "vnni-ref")) return &impl_vnni_ref;
#if defined(__x86_64__) || defined(__i386__)
  if (!strcmp(name, "amx") && have("amx")) return &impl_amx;
  if (!strcmp(name, "avx512vnni") && have("avx512vnni")) return &impl_avx512vnni;
  if (!strcmp(name, "avxvnni") && have("avxvnni")) return &impl_avxvnni;
  if (!strcmp(name, "avx2") && have("avx2")) return &impl_avx2;
  /* avx512, the kernels' name for "the widest there is": the best tier. */
  if (!strcmp(name, "avx512")) {
    const struct isa_impl *i = impl_by_name("amx");
    if (!i) i = impl_by_name("avx512vnni");
    if (!i) i = impl_by_name("avxvnni");
    return i ? i : impl_by_name("avx2");
  }
#endif
  return NULL;
}

static const struct isa_impl *detect(void) {
  const char *env = getenv("TOLK_ISA");
  if (env && *env) {
    const struct isa_impl *i = impl_by_name(env);
    if (i) return i;
  }
  const struct isa_impl *best = impl_by_name("avx512");
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
_Static_assert(ROW_BLOCK <= 6 * 16, "AMX's kernel holds a row block in six tiles");

struct igemm_job {
  struct kern_igemm_rows rows; /* the problem, A's row sums, and VNNI's za' per row */
  const struct kern_igemm_b *b;
  const int32_t *pa;
  int64_t kp, panels;
  /* A task: a row block and `group` panels (one; STAGE_PANELS where C is
   * staged; the few-rows kernel's group), `units` of them per row block. */
  int64_t group, units;
  bool staged, few;
  const struct isa_impl *impl;
  /* A VNNI tier (quads of uint8 A), and with it an unsigned B flipped to int8. */
  bool vnni, flip;
};

/* zb' of a B without zero point that is not flipped. */
static const uint32_t zb_none[KERN_IGEMM_SPAN_COLS];

/* What a span of columns brings to the sums' corrections and scaling:
 * columns col0 .. col0 + ncols (ncols ≤ KERN_IGEMM_SPAN_COLS, within n). */
static void col_terms(const struct igemm_job *job, int64_t col0, int ncols, struct kern_igemm_cols *ct) {
  const struct kern_igemm *p = job->rows.p;
  ct->col0 = col0;
  ct->ncols = ncols;
  ct->exact = !job->vnni;
  /* Read in place: copied a column at a time, with zb', they took 5 % of
   * the int8 LM head's time at one row (perf, Zen 4). The pair tiers' za is
   * 0, so what they read here does not count. */
  ct->cs = (const uint32_t *)job->b->colsum + col0;
  ct->zb = zb_none;
  /* zb' = zb - 128 where an unsigned B was flipped to int8. */
  if (p->b_zp || job->flip) {
    for (int j = 0; j < ncols; j++) {
      int64_t col = col0 + j;
      ct->zb_copy[j] = (uint32_t)(p->b_zp ? p->b_zp[col * p->b_zp_stride] : 0) - (job->flip ? 128u : 0u);
      ct->exact &= ct->zb_copy[j] == 0;
    }
    ct->zb = ct->zb_copy;
  }
  ct->fcs = NULL;
  if (p->f32 && p->f32->col_scale_stride == 1) {
    ct->fcs = p->f32->col_scale + col0;
  } else if (p->f32) {
    for (int j = 0; j < ncols; j++) ct->fcs_copy[j] = p->f32->col_scale[(col0 + j) * p->f32->col_scale_stride];
    ct->fcs = ct->fcs_copy;
  }
}

static int span_cols(const struct kern_igemm *p, int64_t col0, int want) {
  return p->n - col0 < want ? (int)(p->n - col0) : want;
}

/* C's row stride in elements, and where row i, column col of it lies
 * (int32 or float: 4 bytes either way). */
static int64_t c_ld(const struct kern_igemm *p) { return p->f32 ? p->f32->ldc : p->ldc; }

static void *c_at(const struct kern_igemm *p, int64_t i, int64_t col) {
  if (p->f32) return p->f32->c + i * c_ld(p) + col;
  return p->c + i * c_ld(p) + col;
}

/* One row block × panel: the tiles' raw sums, then finished into out (the
 * block's first row at the panel's first column, rows ldo apart). */
static void block_panel(const struct igemm_job *job, int64_t mb, int64_t pn, char *out, int64_t ldo) {
  const struct kern_igemm *p = job->rows.p;
  int32_t tile[KERN_IGEMM_MR * KERN_IGEMM_NR];
  int64_t row_end = (mb + 1) * ROW_BLOCK < p->m ? (mb + 1) * ROW_BLOCK : p->m;
  const uint8_t *panel = job->b->data + pn * job->kp * 2 * KERN_IGEMM_NR;
  struct kern_igemm_cols ct;
  col_terms(job, pn * KERN_IGEMM_NR, span_cols(p, pn * KERN_IGEMM_NR, KERN_IGEMM_NR), &ct);
  const int64_t row0 = mb * ROW_BLOCK;
  if (job->impl->qblock && row_end - row0 >= KERN_IGEMM_AMX_MIN_ROWS) {
    int32_t sums[ROW_BLOCK * KERN_IGEMM_NR];
    job->impl->qblock((int)(row_end - row0), job->kp / 2, (const uint32_t *)job->pa + row0 * (job->kp / 2),
                      job->kp / 2, panel, job->flip, sums);
    job->impl->finish(&job->rows, &ct, row0, (int)(row_end - row0), sums, KERN_IGEMM_NR, out, ldo);
    return;
  }
  for (int64_t i0 = row0; i0 < row_end; i0 += KERN_IGEMM_MR) {
    int mr = row_end - i0 < KERN_IGEMM_MR ? (int)(row_end - i0) : KERN_IGEMM_MR;
    if (job->vnni)
      job->impl->qtile(mr, job->kp / 2, (const uint32_t *)job->pa + i0 * (job->kp / 2),
                       job->kp / 2, panel, job->flip, tile);
    else
      job->impl->tile(mr, job->kp, job->pa + i0 * job->kp, job->kp, panel, job->b->is_signed,
                      tile);
    job->impl->finish(&job->rows, &ct, i0, mr, tile, KERN_IGEMM_NR, out + (i0 - mb * ROW_BLOCK) * ldo * 4, ldo);
  }
}

/* Panels a staged task finishes into its buffer, and the width of C from
 * which tasks are staged. A task of one panel writes a line or two in each
 * of its rows, which lie a row of C apart: at the LM head's 65,001 columns
 * the misses of those stores cost a third of the GEMM at 64 rows (Zen 4,
 * 20 ms against 14 with C's rows on one another). Finished into a buffer
 * in cache and copied out a row at a time, the same bytes go out in runs
 * of 512 that the hardware sees coming. */
#define STAGE_PANELS 8
#define STAGE_COLS (STAGE_PANELS * KERN_IGEMM_NR)
#define STAGE_MIN_N 4096
/* Below this many rows the stores of a panel were no trouble, and the
 * buffer cost (4 rows: 160 -> 135 GOP/s; 16 rows: 150 -> 175). */
#define STAGE_MIN_M 16

static bool staged(const struct kern_igemm *p) { return p->n >= STAGE_MIN_N && p->m >= STAGE_MIN_M; }

/* One row block × the STAGE_PANELS panels from pn0 through the buffer. */
static void igemm_staged_task(const struct igemm_job *job, int64_t mb, int64_t pn0) {
  const struct kern_igemm *p = job->rows.p;
  _Alignas(64) int32_t stage[ROW_BLOCK * STAGE_COLS];
  const int64_t pn_end = pn0 + STAGE_PANELS < job->panels ? pn0 + STAGE_PANELS : job->panels;
  for (int64_t pn = pn0; pn < pn_end; pn++)
    block_panel(job, mb, pn, (char *)(stage + (pn - pn0) * KERN_IGEMM_NR), STAGE_COLS);
  const int64_t row0 = mb * ROW_BLOCK, row_end = row0 + ROW_BLOCK < p->m ? row0 + ROW_BLOCK : p->m;
  const int ncols = span_cols(p, pn0 * KERN_IGEMM_NR, STAGE_COLS);
  for (int64_t i = row0; i < row_end; i++)
    memcpy(c_at(p, i, pn0 * KERN_IGEMM_NR), stage + (i - row0) * STAGE_COLS, (size_t)ncols * 4);
}

/* One row block × panel, straight into C. */
static void igemm_task(const struct igemm_job *job, int64_t mb, int64_t pn) {
  const struct kern_igemm *p = job->rows.p;
  block_panel(job, mb, pn, c_at(p, mb * ROW_BLOCK, pn * KERN_IGEMM_NR), c_ld(p));
}

/* The m ≤ KERN_IGEMM_FEW_ROWS rows of A against panels pn .. pn +
 * kern_igemm_few_panels(m). A row's sums for the group's panels lie side
 * by side, so its columns are finished in one pass rather than a panel
 * at a time (at one row that pass was a tenth of the LM head's time). */
static void igemm_few_task(const struct igemm_job *job, int64_t pn) {
  int32_t tiles[KERN_IGEMM_FEW_ROWS * 4 * KERN_IGEMM_NR];
  const int rows = (int)job->rows.p->m, panels = kern_igemm_few_panels(rows);
  const int64_t stride = job->kp * 2 * KERN_IGEMM_NR;
  const uint8_t *panel = job->b->data + pn * stride;
  if (job->vnni)
    job->impl->qrow(rows, job->kp / 2, (const uint32_t *)job->pa, job->kp / 2, panel, stride, job->flip, tiles);
  else
    job->impl->row(rows, job->kp, job->pa, job->kp, panel, stride, job->b->is_signed, tiles);
  struct kern_igemm_cols ct;
  int64_t col0 = pn * KERN_IGEMM_NR;
  col_terms(job, col0, span_cols(job->rows.p, col0, panels * KERN_IGEMM_NR), &ct);
  job->impl->finish(&job->rows, &ct, 0, rows, tiles, panels * KERN_IGEMM_NR, c_at(job->rows.p, 0, col0),
                    c_ld(job->rows.p));
}

/* Whether the few-rows kernel takes p. */
static bool few_rows(const struct kern_igemm *p, const struct isa_impl *im) {
  return p->m <= im->few_rows && (im->row || im->qrow);
}

/* Tasks [begin, end): (row block, panel), (row block, panel group) where
 * C is staged, or for a few rows (a decoder step of one to three
 * sentences) the few-rows kernel's group of panels, a last short group a
 * panel at a time. */
static void igemm_range(void *arg, int64_t begin, int64_t end) {
  const struct igemm_job *job = arg;
  for (int64_t t = begin; t < end; t++) {
    const int64_t mb = t / job->units, pn = t % job->units * job->group;
    if (job->staged) {
      igemm_staged_task(job, mb, pn);
    } else if (job->few && pn + job->group <= job->panels) {
      igemm_few_task(job, pn);
    } else {
      const int64_t pn_end = pn + job->group < job->panels ? pn + job->group : job->panels;
      for (int64_t q = pn; q < pn_end; q++) igemm_task(job, mb, q);
    }
  }
}

void kern_igemm_packed(const struct kern_igemm *p, const struct kern_igemm_b *b, void *work,
                       struct tolk_pool *pool) {
  if (p->m <= 0 || p->n <= 0) return;
  const struct isa_impl *im = impl();
  int64_t kp = kern_igemm_pairs(p->k);
  int32_t *pa = work;
  int32_t *rowsum = pa + p->m * kp, *za = rowsum + p->m;
  const bool vnni = im->qtile != NULL;
  if (vnni)
    pack_a_u8(p, (uint32_t *)(void *)pa, rowsum, za);
  else
    pack_a(p, pa, rowsum);
  const int64_t panels = (p->n + KERN_IGEMM_NR - 1) / KERN_IGEMM_NR;
  const bool few = few_rows(p, im), stage = staged(p) && !few;
  /* A few rows' tasks are whole groups: chunks of the pool that cut a group
   * ran its panels one at a time (two rows, 512 columns: a quarter of them). */
  const int64_t group = few ? kern_igemm_few_panels((int)p->m) : stage ? STAGE_PANELS : 1;
  struct igemm_job job = {{p, rowsum, vnni ? za : NULL}, b, pa, kp, panels, group, (panels + group - 1) / group,
                          stage, few, im, vnni, vnni && !b->is_signed};
  int64_t mblocks = (p->m + ROW_BLOCK - 1) / ROW_BLOCK;
  /* Aim for chunks of at least ~64K multiply-adds so that handing a chunk to
   * a thread costs little against its work. */
  int64_t rows = p->m < ROW_BLOCK ? p->m : ROW_BLOCK;
  int64_t per_task = rows * KERN_IGEMM_NR * group * (p->k > 0 ? p->k : 1);
  int64_t grain = per_task >= 65536 ? 1 : 65536 / per_task;
  tolk_pool_for(pool, mblocks * job.units, grain, igemm_range, &job);
}
