/*
 * sgemm.c — the GEMM driver: ISA dispatch, packing of B, cache blocking and
 * threading around the per-ISA register-tile micro-kernels (sgemm_impl.h).
 *
 * Layout: op(B) is cut into panels of NR columns (the tile width); a packed
 * panel holds its k rows contiguously (k × NR floats, zero-padded past n), so
 * one panel is one sequential stream. B not packed in advance is packed
 * KC × NC at a time into a per-thread buffer. A is packed per MC × KC block
 * into MR-row tiles when it spans more than one tile height; a single tile
 * height reads it in place through (row, column) strides (which also covers
 * trans_a).
 *
 * Blocking (GotoBLAS order): for each k block of KC, for each block of MC
 * rows, for each panel, for each MR-row tile. A KC × NR piece of B then sits
 * in L1 while every tile of the row block uses it, and the MC × KC block of A
 * sits in L2 while the panels go by. When m ≤ MR (a decoder step) with B
 * prepacked, each panel is instead run down the whole k, block after block,
 * so B streams once. With B as it lies and m ≤ MR, B streams by rows in
 * place (the `rows` kernel). All paths sum k in the same KC blocks with the
 * same chains, so results are the same whatever m and whichever path: a
 * row of C never depends on the other rows.
 *
 * A packed B may also hold 8-bit codes instead of floats (kern_sgemm_pack_b_q8),
 * or bfloat16 (kern_sgemm_pack_b_bf16): each KC × NR piece of a panel is then
 * widened into a stack buffer just before the tiles read it, to the very
 * floats a float panel of the dequantized (rounded) matrix holds, so the
 * tiles and their sums are the same.
 *
 * Threads take disjoint ranges of panels (and of row blocks when n is too
 * narrow to feed them), so they never write the same C element and results
 * do not depend on the thread count.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "../core/pool.h"
#include "sgemm_impl.h"

/* ------------------------------------------------------------ dispatch */

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static enum kern_isa isa_current = KERN_ISA_SCALAR;

bool kern_isa_supported(enum kern_isa isa) {
  switch (isa) {
  case KERN_ISA_SCALAR: return true;
#if defined(__x86_64__) || defined(__i386__)
  case KERN_ISA_AVX2:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case KERN_ISA_AVX512:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  case KERN_ISA_AVX2:
  case KERN_ISA_AVX512: return false;
#endif
  }
  return false;
}

const char *kern_isa_name(enum kern_isa isa) {
  switch (isa) {
  case KERN_ISA_SCALAR: return "scalar";
  case KERN_ISA_AVX2: return "avx2";
  case KERN_ISA_AVX512: return "avx512";
  }
  return "unknown";
}

static void isa_init(void) {
  enum kern_isa best = KERN_ISA_SCALAR;
  if (kern_isa_supported(KERN_ISA_AVX512)) best = KERN_ISA_AVX512;
  else if (kern_isa_supported(KERN_ISA_AVX2)) best = KERN_ISA_AVX2;
  const char *env = getenv("TOLK_ISA");
  if (env) {
    for (int i = KERN_ISA_SCALAR; i <= KERN_ISA_AVX512; i++) {
      /* An ISA the CPU lacks would fault: fall back to the best instead. */
      if (strcmp(env, kern_isa_name((enum kern_isa)i)) == 0 &&
          kern_isa_supported((enum kern_isa)i))
        best = (enum kern_isa)i;
    }
  }
  isa_current = best;
}

enum kern_isa kern_isa_active(void) {
  pthread_once(&isa_once, isa_init);
  return isa_current;
}

bool kern_isa_force(enum kern_isa isa) {
  pthread_once(&isa_once, isa_init);
  if (!kern_isa_supported(isa)) return false;
  isa_current = isa;
  return true;
}

static const struct sgemm_ukr *ukr_for(enum kern_isa isa) {
  switch (isa) {
#if defined(__x86_64__) || defined(__i386__)
  case KERN_ISA_AVX512: return &kern_sgemm_ukr_avx512;
  case KERN_ISA_AVX2: return &kern_sgemm_ukr_avx2;
#else
  case KERN_ISA_AVX512:
  case KERN_ISA_AVX2:
#endif
  case KERN_ISA_SCALAR: break;
  }
  return &kern_sgemm_ukr_scalar;
}

/* -------------------------------------------------------------- driver */

struct gemm_job {
  const struct sgemm_ukr *u;
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const float *a;
  int64_t lda, rs_a, cs_a; /* op(A)(i, p) = a[i * rs_a + p * cs_a] */
  const float *b;          /* B in memory (when packed == NULL) */
  int64_t ldb;
  const float *packed; /* or: panel-major packed op(B) */
  const uint8_t *codes; /* or: the same as 8-bit codes (kern_sgemm_pack_b_q8) */
  const uint16_t *bf16; /* or: as bfloat16 (kern_sgemm_pack_b_bf16) */
  bool codes_signed;
  int32_t zp;
  float scale;
  float *c;
  int64_t ldc;
  const float *bias;       /* n floats added to each row once its sums are final, or NULL */
  struct gemm_grid g;
};

/* Each thread packs into its own buffer, made on its first GEMM and freed
 * when it exits, so a GEMM allocates nothing in the steady state. */
#define BUF_FLOATS (SGEMM_MAX_MC * SGEMM_MAX_KC + SGEMM_MAX_KC * SGEMM_NC)
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static bool buf_key_ok;

static void buf_key_init(void) { buf_key_ok = pthread_key_create(&buf_key, free) == 0; }

/* The block's first 64 bytes hold its capacity; the buffer follows. */
void *kern_thread_buf(size_t bytes) {
  pthread_once(&buf_once, buf_key_init);
  if (!buf_key_ok) return NULL;
  char *block = pthread_getspecific(buf_key);
  if (block && *(size_t *)block >= bytes) return block + 64;
  free(block);
  pthread_setspecific(buf_key, NULL);
  const size_t cap = (bytes + 63) / 64 * 64;
  if (cap < bytes || cap > SIZE_MAX - 64 || !(block = aligned_alloc(64, cap + 64))) return NULL;
  *(size_t *)block = cap;
  if (pthread_setspecific(buf_key, block) != 0) {
    free(block);
    return NULL;
  }
  return block + 64;
}

static float *thread_buf(void) { return kern_thread_buf(BUF_FLOATS * sizeof(float)); }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Packs rows [pc, pc + kc) of op(B)'s panels [jp0, jp1) into buf, one kc × NR
 * panel after the other, zero past column n. Rows of B are read as long
 * contiguous runs, not a panel's width at a time. */
static void pack_b_block(const struct gemm_job *j, float *buf, int64_t pc, int64_t kc,
                         int64_t jp0, int64_t jp1) {
  const int64_t nr = j->u->nr, c0 = jp0 * nr;
  const int64_t width = (j->n < jp1 * nr ? j->n : jp1 * nr) - c0;
  if (!j->trans_b) {
    for (int64_t p = 0; p < kc; p++) {
      const float *src = j->b + (pc + p) * j->ldb + c0;
      for (int64_t x0 = 0; x0 < width; x0 += nr) {
        float *dst = buf + x0 / nr * kc * nr + p * nr;
        const int64_t nv = width - x0 < nr ? width - x0 : nr;
        memcpy(dst, src + x0, (size_t)nv * sizeof(float));
        for (int64_t x = nv; x < nr; x++) dst[x] = 0.0f;
      }
    }
  } else {
    for (int64_t x = 0; x < width; x++) {
      const float *src = j->b + (c0 + x) * j->ldb + pc;
      float *dst = buf + x / nr * kc * nr + x % nr;
      for (int64_t p = 0; p < kc; p++) dst[p * nr] = src[p];
    }
    if (width % nr) {
      float *last = buf + width / nr * kc * nr;
      for (int64_t p = 0; p < kc; p++)
        for (int64_t x = width % nr; x < nr; x++) last[p * nr + x] = 0.0f;
    }
  }
}

/* Packs op(A) rows [i0, i1) × columns [pc, pc + kc) into buf as consecutive
 * kc × MR tiles (MR rows interleaved per k step). Reading A in place instead
 * would put rows whose stride is a multiple of 1 KiB into the same few L1
 * sets, which evict each other; packed, a tile is one sequential run. Rows
 * past i1 in the last tile are left unset: the tile is then run with fewer
 * rows and never reads them. */
static void pack_a_block(const struct gemm_job *j, float *buf, int64_t i0, int64_t i1,
                         int64_t pc, int64_t kc) {
  const int64_t mr = j->u->mr;
  for (int64_t ir = i0; ir < i1; ir += mr) {
    const int64_t rows = i1 - ir < mr ? i1 - ir : mr;
    float *dst = buf + (ir - i0) / mr * kc * mr;
    if (!j->trans_a) {
      for (int64_t r = 0; r < rows; r++) {
        const float *src = j->a + (ir + r) * j->lda + pc;
        for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = src[p];
      }
    } else {
      for (int64_t p = 0; p < kc; p++) {
        const float *src = j->a + (pc + p) * j->lda + ir;
        for (int64_t r = 0; r < rows; r++) dst[p * mr + r] = src[r];
      }
    }
  }
}

/* Rows [pc, pc + kc) of prepacked panel jp: in place, or for a panel of
 * codes or bfloat16 widened into scratch (kc × NR floats). */
static const float *packed_panel(const struct gemm_job *j, int64_t jp, int64_t pc, int64_t kc,
                                 float *scratch) {
  const int64_t nr = j->u->nr, at = jp * j->k * nr + pc * nr;
  if (j->bf16) {
    j->u->bf16(j->bf16 + at, kc * nr, scratch);
    return scratch;
  }
  if (!j->codes) return j->packed + at;
  j->u->dq(j->codes + at, kc * nr, j->codes_signed, j->zp, j->scale, scratch);
  return scratch;
}

/* C rows [i0, i1) × columns [c0, c1) += bias, once their last k block is
 * in: the product rounded, then the sum, as MatMul followed by Add. */
static void add_bias(const struct gemm_job *j, int64_t i0, int64_t i1, int64_t c0, int64_t c1) {
  if (!j->bias) return;
  for (int64_t i = i0; i < i1; i++) {
    float *row = j->c + i * j->ldc;
    for (int64_t x = c0; x < c1; x++) row[x] = row[x] + j->bias[x];
  }
}

/* Panels a bias pass covers at once where panels finish one by one: a pass
 * per 16-column panel cost as much as the separate Add it replaces (64
 * rows, each a short loop on its own line); 16 panels of 64 rows stay in
 * L2 until their pass. */
enum { BIAS_PANELS = 16 };

/* After panel jp of [jp0, jp1) is final: the bias over the panels since
 * *from when a span is complete or jp is the last. */
static void bias_span(const struct gemm_job *j, int64_t i0, int64_t i1, int64_t jp, int64_t jp1, int64_t *from) {
  if (!j->bias || (jp + 1 - *from < BIAS_PANELS && jp + 1 < jp1)) return;
  const int64_t nr = j->u->nr, c1 = (jp + 1) * nr < j->n ? (jp + 1) * nr : j->n;
  add_bias(j, i0, i1, *from * nr, c1);
  *from = jp + 1;
}

/* The most of A the packed-B path reads in place, once per panel. Against
 * the blocked path (A packed into L2-sized blocks), measured on Zen 2 with 2
 * threads: in place is 5-20 % faster up to 2 MiB (all of a decoder step:
 * 64 rows × 2048 is 512 KiB), mixed up to 8 MiB, and up to 35 % slower
 * beyond (an encoder batch of 4,096 tokens against 512 × 2048). */
#define IN_PLACE_A_BYTES ((size_t)2 << 20)

/* Whether B was packed ahead (floats, 8-bit codes or bfloat16): the paths
 * that run its panels, the few-rows kernel's among them. */
static bool b_packed(const struct gemm_job *j) { return j->packed || j->codes || j->bf16; }

/* C rows [i0, i1) × panels [jp0, jp1). */
static void gemm_block(const struct gemm_job *j, int64_t i0, int64_t i1, int64_t jp0,
                       int64_t jp1) {
  const struct sgemm_ukr *u = j->u;
  const int64_t nr = u->nr, mr = u->mr, KC = u->kc, MC = u->mc;
  const bool packed = b_packed(j);
  _Alignas(64) float scratch[SGEMM_MAX_KC * SGEMM_MAX_NR]; /* a dequantized piece of a panel */
  assert(KC <= SGEMM_MAX_KC && MC <= SGEMM_MAX_MC && nr <= SGEMM_MAX_NR &&
         SGEMM_NC % nr == 0 && SGEMM_ROWS_NC % nr == 0 && MC % mr == 0);
  /* Every path sums k in the same KC blocks, each block one FMA chain
   * added into C, so an element of C comes out the same whichever path and
   * tile computed it: a row does not depend on the other rows (see the tile
   * in sgemm_tmpl.h). */
  if (packed && i1 - i0 <= mr) {
    /* A decoder step: one tile height, each panel run down all of k block
     * by block, B read once from front to back. One to three rows go
     * several panels at a time (the same sums, with the FMA latency hidden);
     * the panels left over one by one. */
    int64_t jp = jp0;
    const int rows = (int)(i1 - i0);
    if (rows <= SGEMM_FEW_ROWS) {
      const int64_t stride = j->k * nr, group = sgemm_few_panels(rows);
      struct sgemm_panels pp = {NULL, stride, SGEMM_F32, j->zp, j->scale};
      if (j->bf16) pp.kind = SGEMM_BF16;
      else if (j->codes) pp.kind = sgemm_code_kind(j->codes_signed, j->zp);
      for (; jp + group <= jp1; jp += group) {
        const int64_t last = jp + group - 1;
        const int64_t nr_last = j->n - last * nr < nr ? j->n - last * nr : nr;
        for (int64_t pc = 0; pc < j->k; pc += KC) {
          const int64_t kc = j->k - pc < KC ? j->k - pc : KC, at = jp * stride + pc * nr;
          pp.b = j->bf16 ? (const void *)(j->bf16 + at) : j->codes ? (const void *)(j->codes + at)
                                                                   : (const void *)(j->packed + at);
          u->few_rows(rows, kc, j->a + i0 * j->rs_a + pc * j->cs_a, j->rs_a, j->cs_a, &pp,
                      j->c + i0 * j->ldc + jp * nr, j->ldc, nr_last, j->alpha, pc == 0 ? j->beta : 1.0f);
        }
        add_bias(j, i0, i1, jp * nr, last * nr + nr_last);
      }
    }
    for (int64_t from = jp; jp < jp1; jp++) {
      int64_t nv = j->n - jp * nr < nr ? j->n - jp * nr : nr;
      for (int64_t pc = 0; pc < j->k; pc += KC) {
        const int64_t kc = j->k - pc < KC ? j->k - pc : KC;
        u->tile(i1 - i0, nv, kc, j->a + i0 * j->rs_a + pc * j->cs_a, j->rs_a, j->cs_a,
                packed_panel(j, jp, pc, kc, scratch), nr, j->c + i0 * j->ldc + jp * nr, j->ldc,
                j->alpha, pc == 0 ? j->beta : 1.0f);
      }
      bias_span(j, i0, i1, jp, jp1, &from);
    }
    return;
  }
  if (!packed && !j->trans_b && i1 - i0 <= mr) {
    /* The same for B as it lies (row-major k × n): copying it first would
     * cost more than the few FMAs each element feeds, so it is streamed row
     * by row in place, a block of columns at a time. */
    const int64_t c0 = jp0 * nr, c1 = j->n < jp1 * nr ? j->n : jp1 * nr;
    for (int64_t x = c0; x < c1; x += SGEMM_ROWS_NC) {
      const int64_t w = c1 - x < SGEMM_ROWS_NC ? c1 - x : SGEMM_ROWS_NC;
      for (int64_t pc = 0; pc < j->k; pc += KC)
        u->rows(i1 - i0, w, j->k - pc < KC ? j->k - pc : KC, j->a + i0 * j->rs_a + pc * j->cs_a, j->rs_a,
                j->cs_a, j->b + pc * j->ldb + x, j->ldb, j->c + i0 * j->ldc + x, j->ldc,
                j->alpha, pc == 0 ? j->beta : 1.0f);
      add_bias(j, i0, i1, x, x + w);
    }
    return;
  }
  float *buf = thread_buf();
  if (!buf && !packed) {
    /* Out of memory for the pack buffer: still give the right answer. */
    const int64_t c0 = jp0 * nr, c1 = j->n < jp1 * nr ? j->n : jp1 * nr;
    kern_sgemm_ref(j->trans_a, j->trans_b, i1 - i0, c1 - c0, j->k, j->alpha,
                   j->trans_a ? j->a + i0 : j->a + i0 * j->lda, j->lda,
                   j->trans_b ? j->b + c0 * j->ldb : j->b + c0, j->ldb, j->beta,
                   j->c + i0 * j->ldc + c0, j->ldc);
    add_bias(j, i0, i1, c0, c1);
    return;
  }
  const int64_t a_floats = ceil_div(i1 - i0, mr) * mr * j->k;
  /* A's rows lie in memory as the tile reads them, and few enough that
   * sweeping all of them once per panel stays in cache. */
  const bool a_rows = j->cs_a == 1 && a_floats * sizeof(float) <= IN_PLACE_A_BYTES;
  if (packed && (a_rows || (buf && a_floats <= BUF_FLOATS))) {
    /* A few rows against a prepacked B (a decoder step of a batch, the LM
     * head above all): each panel run down all of k, so that B is read
     * once front to back and each C tile takes its k blocks while it is in
     * L1. A's rows are read in place: each is one stream, and packing them
     * (a strided store an element) cost 5 % of a 64-row beam step, each
     * task packing its own copy. A transposed is packed once for all of k. */
    const int64_t tiles_floats = ceil_div(i1 - i0, mr) * mr;
    if (!a_rows)
      for (int64_t pc = 0; pc < j->k; pc += KC)
        pack_a_block(j, buf + tiles_floats * pc, i0, i1, pc, j->k - pc < KC ? j->k - pc : KC);
    for (int64_t jp = jp0, from = jp0; jp < jp1; jp++) {
      const int64_t nv = j->n - jp * nr < nr ? j->n - jp * nr : nr;
      for (int64_t pc = 0; pc < j->k; pc += KC) {
        const int64_t kc = j->k - pc < KC ? j->k - pc : KC;
        const float *bp = packed_panel(j, jp, pc, kc, scratch);
        for (int64_t ir = i0; ir < i1; ir += mr) {
          const float *ap = a_rows ? j->a + ir * j->rs_a + pc : buf + tiles_floats * pc + (ir - i0) / mr * kc * mr;
          u->tile(i1 - ir < mr ? i1 - ir : mr, nv, kc, ap, a_rows ? j->rs_a : 1, a_rows ? 1 : mr, bp, nr,
                  j->c + ir * j->ldc + jp * nr, j->ldc, j->alpha, pc == 0 ? j->beta : 1.0f);
        }
      }
      bias_span(j, i0, i1, jp, jp1, &from);
    }
    return;
  }
  float *abuf = buf, *bbuf = buf ? buf + SGEMM_MAX_MC * SGEMM_MAX_KC : NULL;
  const bool pack_a = buf && i1 - i0 > mr; /* one tile height reads A in place */
  const int64_t ncp = packed ? jp1 - jp0 : SGEMM_NC / nr;
  for (int64_t jc = jp0; jc < jp1; jc += ncp) {
    const int64_t je = jp1 - jc < ncp ? jp1 : jc + ncp;
    for (int64_t pc = 0; pc < j->k; pc += KC) {
      const int64_t kc = j->k - pc < KC ? j->k - pc : KC;
      const float beta = pc == 0 ? j->beta : 1.0f; /* later k blocks accumulate */
      if (!packed) pack_b_block(j, bbuf, pc, kc, jc, je);
      for (int64_t ic = i0; ic < i1; ic += MC) {
        const int64_t ie = i1 - ic < MC ? i1 : ic + MC;
        if (pack_a) pack_a_block(j, abuf, ic, ie, pc, kc);
        for (int64_t jp = jc; jp < je; jp++) {
          const int64_t nv = j->n - jp * nr < nr ? j->n - jp * nr : nr;
          const float *bp = packed ? packed_panel(j, jp, pc, kc, scratch) : bbuf + (jp - jc) * kc * nr;
          for (int64_t ir = ic; ir < ie; ir += mr) {
            const int64_t rows = ie - ir < mr ? ie - ir : mr;
            float *ct = j->c + ir * j->ldc + jp * nr;
            if (pack_a)
              u->tile(rows, nv, kc, abuf + (ir - ic) / mr * kc * mr, 1, mr, bp, nr, ct,
                      j->ldc, j->alpha, beta);
            else
              u->tile(rows, nv, kc, j->a + ir * j->rs_a + pc * j->cs_a, j->rs_a, j->cs_a, bp,
                      nr, ct, j->ldc, j->alpha, beta);
          }
        }
        /* The row block's columns are final after the last k block. */
        if (pc + kc == j->k) add_bias(j, ic, ie, jc * nr, je * nr < j->n ? je * nr : j->n);
      }
    }
  }
}

static void gemm_tasks(void *arg, int64_t t0, int64_t t1) {
  const struct gemm_job *j = arg;
  for (int64_t t = t0; t < t1; t++) {
    int64_t rt = t % j->g.row_tasks, ct = t / j->g.row_tasks;
    int64_t i0 = rt * j->g.rows_per_task, i1 = i0 + j->g.rows_per_task;
    int64_t jp0 = ct * j->g.panels_per_task, jp1 = jp0 + j->g.panels_per_task;
    gemm_block(j, i0, i1 < j->m ? i1 : j->m, jp0, jp1 < j->g.panels ? jp1 : j->g.panels);
  }
}

/* C = beta * C, for k == 0. */
static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t x = 0; x < n; x++) c[i * ldc + x] = beta == 0.0f ? 0.0f : beta * c[i * ldc + x];
}

struct gemm_grid kern_gemm_grid(int64_t m, int64_t n, int64_t k, int64_t mr, int64_t nr, int64_t group,
                                int64_t threads) {
  const double flops = 2.0 * (double)m * (double)n * (double)k;
  /* Below ~64 kflop per task the hand-off costs more than it saves. More
   * tasks than threads even out a busy core, but above one tile height each
   * task packs its own copy of A, or against packed B sweeps it once per
   * panel: 2 per thread keeps that under ~5% (4 measured no faster). */
  int64_t max_tasks = (int64_t)(flops / 65536.0);
  const int64_t cap = (m > mr ? 2 : 4) * threads;
  if (max_tasks > cap) max_tasks = cap;
  struct gemm_grid g = {ceil_div(n, nr), 0, m, 1, 1};
  g.panels_per_task = g.panels;
  if (threads > 1 && max_tasks > 1) {
    if (g.panels < max_tasks && m > mr) {
      /* Too few panels to go round: split the rows as well, in whole tiles. */
      const int64_t want = ceil_div(max_tasks, g.panels), tiles = ceil_div(m, mr);
      g.rows_per_task = ceil_div(tiles, want < tiles ? want : tiles) * mr;
      g.row_tasks = ceil_div(m, g.rows_per_task);
    }
    int64_t col_tasks = max_tasks / g.row_tasks;
    if (col_tasks < 1) col_tasks = 1;
    if (col_tasks > g.panels) col_tasks = g.panels;
    g.panels_per_task = ceil_div(ceil_div(g.panels, col_tasks), group) * group;
    g.tasks = g.row_tasks * ceil_div(g.panels, g.panels_per_task);
  }
  return g;
}

/* Picks the task grid and runs it. */
static void gemm_run(struct gemm_job *j, struct tolk_pool *pool) {
  /* One to three rows against packed B go several panels at a time
   * (gemm_block); a task of fewer panels than that group ran them one by
   * one. A decoder step's 512 x 512 weights at one row made 8 tasks of 2
   * AVX-512 panels: 55.5 us a product, 37.1 in 4 tasks of 4 (2 threads,
   * Zen 4, cold weights, medians of 6; 2048 x 512 187.6 -> 134.9). */
  const int64_t group =
      b_packed(j) && j->m <= SGEMM_FEW_ROWS && j->m <= j->u->mr ? sgemm_few_panels((int)j->m) : 1;
  j->g = kern_gemm_grid(j->m, j->n, j->k, j->u->mr, j->u->nr, group, tolk_pool_threads(pool));
  if (j->g.tasks == 1) gemm_tasks(j, 0, 1);
  else tolk_pool_for(pool, j->g.tasks, 1, gemm_tasks, j);
}

void kern_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                float *c, int64_t ldc, struct tolk_pool *pool) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  struct gemm_job j = {
      .u = ukr_for(kern_isa_active()),
      .trans_a = trans_a, .trans_b = trans_b,
      .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
      .a = a, .lda = lda, .rs_a = trans_a ? 1 : lda, .cs_a = trans_a ? lda : 1,
      .b = b, .ldb = ldb,
      .c = c, .ldc = ldc,
  };
  gemm_run(&j, pool);
}

/* --------------------------------------------------------------- packed */

#define HUGE_PAGE ((size_t)2 << 20)

/* A packed matrix of ceil(n / NR) panels of k × NR elements of elem_size
 * bytes, with its memory (*mem, not filled; the caller stores it as data,
 * codes or bf16). */
static tolk_status packed_new(int64_t k, int64_t n, size_t elem_size, struct kern_packed_b **out,
                              void **mem, tolk_error *err) {
  *out = NULL;
  *mem = NULL;
  if (k < 0 || n < 0)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "sgemm pack: negative size %lld x %lld",
                     (long long)k, (long long)n);
  const struct sgemm_ukr *u = ukr_for(kern_isa_active());
  const int64_t nr = u->nr, panels = ceil_div(n, nr);
  size_t elems, bytes;
  if (!tolk_mul_size((size_t)panels * (size_t)nr, (size_t)k, &elems) ||
      !tolk_mul_size(elems, elem_size, &bytes) || bytes > SIZE_MAX - HUGE_PAGE)
    return tolk_fail(err, TOLK_ERR_LIMIT, "sgemm pack: %lld x %lld matrix is too large",
                     (long long)k, (long long)n);
  struct kern_packed_b *pb = calloc(1, sizeof *pb);
  if (!pb) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "sgemm pack: out of memory");
  pb->u = u;
  pb->k = k;
  pb->n = n;
  pb->bytes = bytes;
  if (bytes > 0) *mem = kern_alloc_weights(bytes);
  if (bytes > 0 && !*mem) {
    free(pb);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY,
                     "sgemm pack: out of memory for a %lld x %lld matrix (%zu bytes)",
                     (long long)k, (long long)n, bytes);
  }
  *out = pb;
  return TOLK_OK;
}

/* Code i's value as an integer, signed or not. */
static inline int32_t code_at(const uint8_t *q, size_t i, bool is_signed) {
  return is_signed ? (int32_t)(int8_t)q[i] : (int32_t)q[i];
}

/* Whether every q - zp of op(B) (k×n, or n×k when trans_b) is an int8:
 * then the codes are packed as those differences, with zp 0 (SGEMM_C8). */
static bool codes_centre(bool trans_b, int64_t k, int64_t n, const uint8_t *q, int64_t ldb, bool is_signed,
                         int32_t zp) {
  if (is_signed ? zp == 0 : zp == 128) return true;
  const int64_t rows = trans_b ? n : k, cols = trans_b ? k : n;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      int32_t d = code_at(q, (size_t)(r * ldb + c), is_signed) - zp;
      if (d < -128 || d > 127) return false;
    }
  return true;
}

tolk_status kern_sgemm_pack_b_q8(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb,
                                 bool is_signed, float scale, int32_t zp,
                                 struct kern_packed_b **out, tolk_error *err) {
  void *mem;
  struct kern_packed_b *pb;
  *out = NULL;
  if ((is_signed ? zp < -128 || zp > 127 : zp < 0 || zp > 255))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "sgemm pack: zero point %d is not a %s code",
                     (int)zp, is_signed ? "int8" : "uint8");
  tolk_status st = packed_new(k, n, 1, &pb, &mem, err);
  if (st) return st;
  const uint8_t *q = b;
  const bool centre = codes_centre(trans_b, k, n, q, ldb, is_signed, zp);
  pb->codes = mem;
  pb->is_signed = is_signed || centre;
  pb->zp = centre ? 0 : zp;
  pb->scale = scale;
  const int64_t nr = pb->u->nr, panels = ceil_div(n, nr);
  const uint8_t pad = (uint8_t)pb->zp; /* a padding column dequantizes to 0 */
  for (int64_t jp = 0; jp < panels; jp++) {
    uint8_t *dst = pb->codes + jp * k * nr;
    const int64_t j0 = jp * nr, nv = n - j0 < nr ? n - j0 : nr;
    for (int64_t p = 0; p < k; p++) {
      for (int64_t x = 0; x < nv; x++) {
        const size_t i = (size_t)(trans_b ? (j0 + x) * ldb + p : p * ldb + j0 + x);
        dst[p * nr + x] = centre ? (uint8_t)(int8_t)(code_at(q, i, is_signed) - zp) : q[i];
      }
      for (int64_t x = nv; x < nr; x++) dst[p * nr + x] = pad;
    }
  }
  *out = pb;
  return TOLK_OK;
}

/* One panel of op(B) as bfloat16 (nv of its nr columns from B). */
static void pack_panel_bf16(uint16_t *dst, bool trans_b, int64_t k, int64_t nr, int64_t j0, int64_t nv,
                            const unsigned char *bb, int64_t ldb) {
  for (int64_t p = 0; p < k; p++) {
    for (int64_t x = 0; x < nv; x++) {
      float f;
      memcpy(&f, bb + (size_t)(trans_b ? (j0 + x) * ldb + p : p * ldb + j0 + x) * sizeof f, sizeof f);
      dst[p * nr + x] = tolk_f32_to_bf16(f);
    }
    for (int64_t x = nv; x < nr; x++) dst[p * nr + x] = 0;
  }
}

/* One panel of op(B) as floats. Bytewise reads (memcpy compiles to plain
 * loads): b may be misaligned. */
static void pack_panel_f32(float *dst, bool trans_b, int64_t k, int64_t nr, int64_t j0, int64_t nv,
                           const unsigned char *bb, int64_t ldb) {
  const size_t fs = sizeof(float);
  if (!trans_b) {
    for (int64_t p = 0; p < k; p++) {
      memcpy(dst + p * nr, bb + (size_t)(p * ldb + j0) * fs, (size_t)nv * fs);
      for (int64_t x = nv; x < nr; x++) dst[p * nr + x] = 0.0f;
    }
    return;
  }
  for (int64_t x = 0; x < nv; x++) {
    const unsigned char *src = bb + (size_t)((j0 + x) * ldb) * fs;
    for (int64_t p = 0; p < k; p++) memcpy(&dst[p * nr + x], src + (size_t)p * fs, fs);
  }
  for (int64_t p = 0; p < k; p++)
    for (int64_t x = nv; x < nr; x++) dst[p * nr + x] = 0.0f;
}

tolk_status kern_sgemm_pack_b_read(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb, bool bf16,
                                   kern_read_fn read, struct kern_packed_b **out, tolk_error *err) {
  void *mem;
  struct kern_packed_b *pb;
  *out = NULL;
  tolk_status st = packed_new(k, n, bf16 ? sizeof(uint16_t) : sizeof(float), &pb, &mem, err);
  if (st) return st;
  if (bf16) pb->bf16 = mem;
  else pb->data = mem;
  const int64_t nr = pb->u->nr, panels = ceil_div(n, nr);
  const unsigned char *bb = b;
  struct b_reads reads = b_reads_start(read, b, trans_b, k, n, ldb);
  for (int64_t jp = 0; jp < panels; jp++) {
    const int64_t j0 = jp * nr, nv = n - j0 < nr ? n - j0 : nr;
    if (bf16) pack_panel_bf16(pb->bf16 + jp * k * nr, trans_b, k, nr, j0, nv, bb, ldb);
    else pack_panel_f32(pb->data + jp * k * nr, trans_b, k, nr, j0, nv, bb, ldb);
    b_reads_panel(&reads, j0 + nv);
  }
  b_reads_end(&reads);
  *out = pb;
  return TOLK_OK;
}

tolk_status kern_sgemm_pack_b_bf16(bool trans_b, int64_t k, int64_t n, const void *b, int64_t ldb,
                                   struct kern_packed_b **out, tolk_error *err) {
  return kern_sgemm_pack_b_read(trans_b, k, n, b, ldb, true, NULL, out, err);
}

tolk_status kern_sgemm_pack_b(bool trans_b, int64_t k, int64_t n, const void *b,
                              int64_t ldb, struct kern_packed_b **out, tolk_error *err) {
  return kern_sgemm_pack_b_read(trans_b, k, n, b, ldb, false, NULL, out, err);
}

void kern_packed_b_free(struct kern_packed_b *pb) {
  if (!pb) return;
  kern_free_weights(pb->data);
  kern_free_weights(pb->codes);
  kern_free_weights(pb->bf16);
  kern_free_weights(pb->pairs);
  free(pb);
}

size_t kern_packed_b_bytes(const struct kern_packed_b *pb) { return pb ? pb->bytes : 0; }

bool kern_packed_b_column(const struct kern_packed_b *pb, int64_t j, float *out) {
  if (!pb || !pb->data || j < 0 || j >= pb->n) return false;
  const int64_t nr = pb->u->nr;
  const float *col = pb->data + (j / nr) * pb->k * nr + j % nr;
  for (int64_t p = 0; p < pb->k; p++) out[p] = col[p * nr];
  return true;
}

static void packed_run(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const struct kern_packed_b *b, float beta, const float *bias, float *c,
                       int64_t ldc, struct tolk_pool *pool) {
  assert(b && b->n == n && b->k == k);
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_c(m, n, beta, c, ldc);
    struct gemm_job z = {.c = c, .ldc = ldc, .bias = bias};
    add_bias(&z, 0, m, 0, n);
    return;
  }
  if (b->pairs) {
    kern_bf16dot_run(trans_a, m, alpha, a, lda, b, beta, bias, c, ldc, pool);
    return;
  }
  struct gemm_job j = {
      .u = b->u,
      .trans_a = trans_a,
      .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
      .a = a, .lda = lda, .rs_a = trans_a ? 1 : lda, .cs_a = trans_a ? lda : 1,
      .packed = b->data,
      .codes = b->codes, .bf16 = b->bf16, .codes_signed = b->is_signed, .zp = b->zp, .scale = b->scale,
      .c = c, .ldc = ldc, .bias = bias,
  };
  gemm_run(&j, pool);
}

void kern_sgemm_packed(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const struct kern_packed_b *b,
                       float beta, float *c, int64_t ldc, struct tolk_pool *pool) {
  packed_run(trans_a, m, n, k, alpha, a, lda, b, beta, NULL, c, ldc, pool);
}

void kern_sgemm_packed_bias(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                            const struct kern_packed_b *b, const float *bias, float *c, int64_t ldc,
                            struct tolk_pool *pool) {
  packed_run(false, m, n, k, 1.0f, a, lda, b, 0.0f, bias, c, ldc, pool);
}
