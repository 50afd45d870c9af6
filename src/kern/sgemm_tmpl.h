/*
 * sgemm_tmpl.h — the SGEMM register-tile micro-kernel, written once and
 * instantiated per ISA. The including file defines the vector type and a
 * handful of inline vector helpers, then includes this; the ISA-specific code
 * is thus a dozen one-line wrappers, and the tile logic every ISA runs is the
 * logic the tests exercise on whichever ISA the test machine has.
 *
 * The includer defines before including:
 *   V, VL                 vector type and its float lane count
 *   TMPL_MR, TMPL_KC, TMPL_MC, TMPL_ISA, TMPL_NAME   tile geometry, the
 *                         enum kern_isa value, and the name of the
 *                         struct sgemm_ukr to define
 *   v_zero() v_loadu(p) v_bcast(p) v_set1(x) v_fma(a, b, c) v_mul(a, b)
 *   v_add(a, b) v_sub(a, b) v_load_n(p, n) v_store(p, v) v_store_n(p, v, n)
 *   v_from_u8(p) v_from_s8(p) v_from_bf16(p)
 *   (v_loadu/v_store: unaligned; *_n: the first n lanes only, 1 ≤ n ≤ VL,
 *   touching no memory past them; v_fma = a*b + c; v_from_*8: VL bytes at p,
 *   unsigned or signed, as floats; v_from_bf16: VL bfloat16 at p as floats)
 * The tile is TMPL_MR rows × 2 vectors: 12 accumulators at MR = 6, which
 * keeps both FMA ports busy through the FMA latency on AVX2 and AVX-512.
 */
#include "sgemm_impl.h"

#define TMPL_NR (2 * VL)
#define TMPL_AI static inline __attribute__((always_inline))

/* One row of the finished tile: C = alpha * acc + beta * C over nr columns. */
TMPL_AI void tmpl_row_store(float *c, V x0, V x1, int64_t nr, float alpha, float beta) {
  V va = v_set1(alpha);
  x0 = v_mul(x0, va);
  x1 = v_mul(x1, va);
  if (nr == TMPL_NR) {
    if (beta != 0.0f) {
      V vb = v_set1(beta);
      x0 = v_fma(vb, v_loadu(c), x0);
      x1 = v_fma(vb, v_loadu(c + VL), x1);
    }
    v_store(c, x0);
    v_store(c + VL, x1);
    return;
  }
  int64_t n0 = nr < VL ? nr : VL, n1 = nr - n0;
  if (beta != 0.0f) {
    V vb = v_set1(beta);
    x0 = v_fma(vb, v_load_n(c, n0), x0);
    if (n1 > 0) x1 = v_fma(vb, v_load_n(c + VL, n1), x1);
  }
  v_store_n(c, x0, n0);
  if (n1 > 0) v_store_n(c + VL, x1, n1);
}

/* Writes the R × NR sums in `out` into C. Kept out of line so that none of
 * its values compete for registers with the k loop's accumulators. */
static __attribute__((noinline)) void tmpl_store(int R, V (*out)[2], float *c, int64_t ldc,
                                                 int64_t nr, float alpha, float beta) {
  for (int r = 0; r < R; r++) tmpl_row_store(c + r * ldc, out[r][0], out[r][1], nr, alpha, beta);
}

/* How far ahead of the k step the tile asks for B (16 steps: 1 KiB of
 * an AVX2 panel). A 16-row LM head streams 133 MB of panels with too
 * little work per byte for the hardware prefetcher to keep ahead of the
 * first tile of each panel (Zen 2, 2 threads: 125 → 137 GFLOP/s; a 64-row
 * one 167 → 175; the 512-wide decoder shapes, whose panels are in cache,
 * unchanged). A prefetch changes no number. */
#define TMPL_PREFETCH_STEPS 16

/* R rows (a compile-time constant after inlining). Every element of C is
 * one FMA chain over k, whatever R is: a row's result must not depend on how
 * many rows share its tile, or a sentence would translate differently alone
 * and in a batch (the translator and the service promise the same ids).
 * Splitting the chain over several accumulator sets for small R would hide
 * the FMA latency by changing the sums; a decoder step of one to three rows
 * takes tmpl_few_body instead, which hides it across panels. */
TMPL_AI void tmpl_tile_body(const int R, int64_t nr, int64_t kc, const float *a, int64_t rs_a,
                            int64_t cs_a, const float *b, int64_t rs_b, float *c, int64_t ldc,
                            float alpha, float beta) {
  V acc[TMPL_MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = v_zero();
  for (int64_t p = 0; p < kc; p++) {
    V b0 = v_loadu(b), b1 = v_loadu(b + VL);
    __builtin_prefetch(b + TMPL_PREFETCH_STEPS * rs_b, 0, 3);
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      V av = v_bcast(a + r * rs_a);
      acc[r][0] = v_fma(av, b0, acc[r][0]);
      acc[r][1] = v_fma(av, b1, acc[r][1]);
    }
    b += rs_b;
    a += cs_a;
  }
  /* Park the sums in memory before the C update: with the update's values
   * live at the same time as 12 accumulators the compiler spilled one inside
   * the k loop, which cost a quarter of the throughput. */
  V out[TMPL_MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++) {
    out[r][0] = acc[r][0];
    out[r][1] = acc[r][1];
  }
  tmpl_store(R, out, c, ldc, nr, alpha, beta);
}

#define TMPL_TILE(R)                                                                    \
  static void tmpl_tile_##R(int64_t nr, int64_t kc, const float *a, int64_t rs_a,       \
                            int64_t cs_a, const float *b, int64_t rs_b, float *c,       \
                            int64_t ldc, float alpha, float beta) {                     \
    tmpl_tile_body(R, nr, kc, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta);             \
  }
TMPL_TILE(1)
TMPL_TILE(2)
TMPL_TILE(3)
TMPL_TILE(4)
TMPL_TILE(5)
TMPL_TILE(6)
#undef TMPL_TILE

#if TMPL_MR != 6
#error "sgemm_tmpl.h: the tile table below assumes TMPL_MR == 6"
#endif

static void tmpl_tile(int64_t mr, int64_t nr, int64_t kc, const float *a, int64_t rs_a,
                      int64_t cs_a, const float *b, int64_t rs_b, float *c, int64_t ldc,
                      float alpha, float beta) {
  switch (mr) {
  case 1: tmpl_tile_1(nr, kc, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta); break;
  case 2: tmpl_tile_2(nr, kc, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta); break;
  case 3: tmpl_tile_3(nr, kc, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta); break;
  case 4: tmpl_tile_4(nr, kc, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta); break;
  case 5: tmpl_tile_5(nr, kc, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta); break;
  default: tmpl_tile_6(nr, kc, a, rs_a, cs_a, b, rs_b, c, ldc, alpha, beta); break;
  }
}

/* VL floats from VL 8-bit codes of a panel of kind SGEMM_S8, SGEMM_U8 or
 * SGEMM_C8 (a compile-time constant after inlining): (q - zp) * scale. q - zp
 * is an integer of at most 9 bits, exact as a float difference, so the one
 * rounding is the multiply's, as in DequantizeLinear; C8's codes are that
 * difference already. */
TMPL_AI V tmpl_code(const int kind, const uint8_t *q, V z, V s) {
  if (kind == SGEMM_C8) return v_mul(v_from_s8(q), s);
  return v_mul(v_sub(kind == SGEMM_S8 ? v_from_s8(q) : v_from_u8(q), z), s);
}

/* How far ahead in its panel tmpl_few_body asks for 8-bit codes. Widening
 * a code costs more than its FMA, a 64-byte line is 64 of them, and at that
 * pace the hardware prefetcher kept too few lines in flight for the four
 * panels' streams: a one-row 512 x 65,001 product (an int8 model's float LM
 * head) drew 21 GB/s on one Zen 5 thread, 1.5x faster with this, 1.25x on
 * two. Floats and bfloat16 are left to the hardware: there it was slower
 * (floats, one thread) or within the noise. A prefetch changes no number. */
#define TMPL_FEW_PREFETCH_BYTES 2048

/* Asks for the line TMPL_FEW_PREFETCH_BYTES past row p of a panel of codes:
 * once a line, the rows being TMPL_NR bytes, a divisor of 64. */
TMPL_AI void tmpl_few_prefetch(const uint8_t *row, int64_t p) {
  if ((p * TMPL_NR) % 64 == 0) __builtin_prefetch(row + TMPL_FEW_PREFETCH_BYTES, 0, 3);
}

/* A few rows of C (R ≤ SGEMM_FEW_ROWS) against Q consecutive packed panels
 * (sgemm_few_panels(R)), each of kc rows (row p of panel q at b + q * stride
 * + p * NR), as floats, bfloat16 or 8-bit codes, widened (dequantized as
 * tmpl_dq does: the same floats) in registers. Every element is the same FMA
 * chain over k as tmpl_tile gives it, and stored the same way, so the results
 * are bit for bit the same; the Q panels' chains interleave, which hides the
 * FMA latency that R rows' 2R chains leave exposed (and reads Q weight
 * streams side by side): a decoder step of one to three rows, where the
 * weights' bytes, not the arithmetic, should be the limit. */
TMPL_AI void tmpl_few_body(const int kind, const int R, const int Q, int64_t kc, const float *a, int64_t rs_a,
                           int64_t cs_a, const struct sgemm_panels *pp, float *c, int64_t ldc, int64_t nr_last,
                           float alpha, float beta) {
  V acc[SGEMM_FEW_ROWS][4][2];
  const V z = v_set1((float)pp->zp), s = v_set1(pp->scale);
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int q = 0; q < Q; q++) acc[r][q][0] = acc[r][q][1] = v_zero();
  for (int64_t p = 0; p < kc; p++) {
#pragma GCC unroll 8
    for (int q = 0; q < Q; q++) {
      V b0, b1;
      const int64_t at = q * pp->stride + p * TMPL_NR;
      if (kind == SGEMM_BF16) {
        const uint16_t *bq = (const uint16_t *)pp->b + at;
        b0 = v_from_bf16(bq);
        b1 = v_from_bf16(bq + VL);
      } else if (kind == SGEMM_S8 || kind == SGEMM_U8 || kind == SGEMM_C8) {
        const uint8_t *bq = (const uint8_t *)pp->b + at;
        tmpl_few_prefetch(bq, p);
        b0 = tmpl_code(kind, bq, z, s);
        b1 = tmpl_code(kind, bq + VL, z, s);
      } else {
        const float *bq = (const float *)pp->b + at;
        b0 = v_loadu(bq);
        b1 = v_loadu(bq + VL);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        V av = v_bcast(a + r * rs_a + p * cs_a);
        acc[r][q][0] = v_fma(av, b0, acc[r][q][0]);
        acc[r][q][1] = v_fma(av, b1, acc[r][q][1]);
      }
    }
  }
  V out[SGEMM_FEW_ROWS][4][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int q = 0; q < Q; q++) {
      out[r][q][0] = acc[r][q][0];
      out[r][q][1] = acc[r][q][1];
    }
  for (int r = 0; r < R; r++)
    for (int q = 0; q < Q; q++)
      tmpl_row_store(c + r * ldc + q * TMPL_NR, out[r][q][0], out[r][q][1], q == Q - 1 ? nr_last : TMPL_NR,
                     alpha, beta);
}

#define TMPL_FEW(kind, R) \
  tmpl_few_body(kind, R, sgemm_few_panels(R), kc, a, rs_a, cs_a, pp, c, ldc, nr_last, alpha, beta)
#define TMPL_FEW_KIND(kind) \
  (rows == 1 ? TMPL_FEW(kind, 1) : rows == 2 ? TMPL_FEW(kind, 2) : TMPL_FEW(kind, 3))

static void tmpl_few_rows(int rows, int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
                          const struct sgemm_panels *pp, float *c, int64_t ldc, int64_t nr_last, float alpha,
                          float beta) {
  switch (pp->kind) {
  case SGEMM_BF16: TMPL_FEW_KIND(SGEMM_BF16); break;
  case SGEMM_S8: TMPL_FEW_KIND(SGEMM_S8); break;
  case SGEMM_U8: TMPL_FEW_KIND(SGEMM_U8); break;
  case SGEMM_C8: TMPL_FEW_KIND(SGEMM_C8); break;
  default: TMPL_FEW_KIND(SGEMM_F32); break;
  }
}

#undef TMPL_FEW_KIND
#undef TMPL_FEW

/* C[0:mr, 0:nc] = alpha * A · B + beta * C for a B read in place, row-major
 * with row stride rs_b, nc ≤ SGEMM_ROWS_NC, mr ≤ MR. Row p of B is used as a
 * whole: sums for the mr × nc block live in an L1 buffer, and each step adds
 * four rows of B (four contiguous runs) into them. Walking B by rows streams
 * it; walking it by NR-wide panels would touch a new cache line per k step.
 * This is the small-m path for a B that was not packed. */
static void tmpl_rows(int64_t mr, int64_t nc, int64_t k, const float *a, int64_t rs_a,
                      int64_t cs_a, const float *b, int64_t rs_b, float *c, int64_t ldc,
                      float alpha, float beta) {
  _Alignas(64) float acc[TMPL_MR][SGEMM_ROWS_NC];
  const int64_t nv = nc / VL, tail = nc % VL;
  /* Zero through the last whole vector: the tail's idle lanes are summed
   * too (and never stored), so they must hold numbers. */
  for (int64_t r = 0; r < mr; r++)
    for (int64_t x = 0; x < (nv + (tail > 0)) * VL; x++) acc[r][x] = 0.0f;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4) {
    const float *b0 = b + p * rs_b, *b1 = b0 + rs_b, *b2 = b1 + rs_b, *b3 = b2 + rs_b;
    for (int64_t r = 0; r < mr; r++) {
      const float *ar = a + r * rs_a + p * cs_a;
      const V a0 = v_bcast(ar), a1 = v_bcast(ar + cs_a), a2 = v_bcast(ar + 2 * cs_a),
              a3 = v_bcast(ar + 3 * cs_a);
      float *y = acc[r];
      for (int64_t v = 0; v < nv; v++) {
        const int64_t o = v * VL;
        V t = v_loadu(y + o);
        t = v_fma(a0, v_loadu(b0 + o), t);
        t = v_fma(a1, v_loadu(b1 + o), t);
        t = v_fma(a2, v_loadu(b2 + o), t);
        t = v_fma(a3, v_loadu(b3 + o), t);
        v_store(y + o, t);
      }
      if (tail) {
        const int64_t o = nv * VL;
        V t = v_loadu(y + o); /* acc has room for whole vectors */
        t = v_fma(a0, v_load_n(b0 + o, tail), t);
        t = v_fma(a1, v_load_n(b1 + o, tail), t);
        t = v_fma(a2, v_load_n(b2 + o, tail), t);
        t = v_fma(a3, v_load_n(b3 + o, tail), t);
        v_store(y + o, t);
      }
    }
  }
  for (; p < k; p++) {
    const float *b0 = b + p * rs_b;
    for (int64_t r = 0; r < mr; r++) {
      const V a0 = v_bcast(a + r * rs_a + p * cs_a);
      float *y = acc[r];
      for (int64_t v = 0; v < nv; v++)
        v_store(y + v * VL, v_fma(a0, v_loadu(b0 + v * VL), v_loadu(y + v * VL)));
      if (tail) {
        const int64_t o = nv * VL;
        v_store(y + o, v_fma(a0, v_load_n(b0 + o, tail), v_loadu(y + o)));
      }
    }
  }
  const V va = v_set1(alpha), vb = v_set1(beta);
  for (int64_t r = 0; r < mr; r++) {
    float *cr = c + r * ldc;
    for (int64_t v = 0; v < nv; v++) {
      V x = v_mul(v_loadu(acc[r] + v * VL), va);
      if (beta != 0.0f) x = v_fma(vb, v_loadu(cr + v * VL), x);
      v_store(cr + v * VL, x);
    }
    if (tail) {
      const int64_t o = nv * VL;
      V x = v_mul(v_loadu(acc[r] + o), va);
      if (beta != 0.0f) x = v_fma(vb, v_load_n(cr + o, tail), x);
      v_store_n(cr + o, x, tail);
    }
  }
}

/* n floats (a multiple of VL) from n 8-bit codes: (q - zp) * scale, as
 * tmpl_code makes them. */
#define TMPL_DQ(kind) \
  for (int64_t i = 0; i < n; i += VL) v_store(out + i, tmpl_code(kind, q + i, z, s))
static void tmpl_dq(const uint8_t *q, int64_t n, bool is_signed, int32_t zp, float scale, float *out) {
  const V z = v_set1((float)zp), s = v_set1(scale);
  switch (sgemm_code_kind(is_signed, zp)) {
  case SGEMM_C8: TMPL_DQ(SGEMM_C8); break;
  case SGEMM_S8: TMPL_DQ(SGEMM_S8); break;
  default: TMPL_DQ(SGEMM_U8); break;
  }
}
#undef TMPL_DQ

/* n floats (a multiple of VL) from n bfloat16 values, exactly. */
static void tmpl_bf16(const uint16_t *q, int64_t n, float *out) {
  for (int64_t i = 0; i < n; i += VL) v_store(out + i, v_from_bf16(q + i));
}

const struct sgemm_ukr TMPL_NAME = {
    .isa = TMPL_ISA,
    .mr = TMPL_MR,
    .nr = TMPL_NR,
    .kc = TMPL_KC,
    .mc = TMPL_MC,
    .tile = tmpl_tile,
    .rows = tmpl_rows,
    .dq = tmpl_dq,
    .bf16 = tmpl_bf16,
    .few_rows = tmpl_few_rows,
};

#undef TMPL_NR
#undef TMPL_AI
