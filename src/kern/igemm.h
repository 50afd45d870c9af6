/*
 * igemm.h — 8-bit integer GEMM with 32-bit results, for MatMulInteger,
 * ConvInteger, QLinearMatMul/QLinearConv and ORT's MatMulIntegerToFloat /
 * DynamicQuantizeMatMul.
 *
 *   C[i][j] = sum_p (A[i][p] - za_i) * (B[p][j] - zb_j)      (int32, wrapping)
 *
 * A and B are uint8 or int8 in any combination; zero points are per tensor,
 * per row of A or per column of B. Every path computes exactly this integer
 * sum (the products are exact and the sum wraps modulo 2^32 as ORT's int32
 * accumulators do), so the fast paths are bit-identical to kern_igemm_ref.
 *
 * The fast path works on packed operands:
 *  - B is packed once (weights: at session creation) into panels of 16
 *    columns; in each panel k runs in pairs, the two bytes of a pair adjacent,
 *    so a 16-byte load widened to int16 feeds one vpmaddwd for 8 columns.
 *    B's zero point is not folded into the packing: it is applied as
 *    C -= zb_j * rowsum_i(A - za) afterwards, so one packing serves any zb.
 *    The pairs are padded to an even count, so that two consecutive pair
 *    rows (64 bytes) hold 4 k of each column: the VNNI tiers below read
 *    them that way. The column sums of B follow the panels.
 *  - A is widened to int16 with its zero point subtracted (|A - za| <= 255,
 *    so each pair product sum fits vpmaddwd's int32 lanes exactly), pairs of
 *    k stored as one int32, plus the row sums above. This is the "exact
 *    widening" approach: no vpmaddubsw, whose int16 saturation would lose
 *    u8 x s8 sums above 32767.
 *
 * The VNNI tiers (AVX-512 VNNI, 512-bit, and AVX-VNNI, 256-bit) multiply
 * uint8 A by int8 B four k at a time with vpdpbusd, on the same packed B:
 * a vpermw (or two vpunpck) turns two pair rows into 4-byte groups per
 * column. A is stored as raw uint8 (int8 A flipped by +128, its zero point
 * too) and an unsigned B is flipped to int8 at load (zb - 128), so
 *   C = sum_p a'b' - za'_i * colsum'_j - zb'_j * rowsum_i(A - za),
 * every term exact modulo 2^32 (vpdpbusd wraps, it does not saturate), which
 * keeps them bit-identical to the reference. "vnni-ref" is that algorithm in
 * portable C, so any CPU tests the driver of the VNNI tiers.
 *
 * The AMX tier ("amx") is the AVX-512 VNNI tier with its row blocks of 16
 * rows or more done by tdpbusd on tiles (igemm_amx.c), the same sums.
 *
 * The implementation is picked once from the CPU (AMX, AVX-512 VNNI,
 * AVX-VNNI, AVX2, else portable C); TOLK_ISA in the environment caps it:
 * scalar, avx2 (no VNNI), avx512 (the best there is).
 */
#ifndef TOLK_IGEMM_H
#define TOLK_IGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tolk_pool;
struct kern_igemm_f32;

/* Columns per packed B panel. */
#define KERN_IGEMM_NR 16

/* B packed by kern_igemm_pack_b. `data` holds ceil(n/16) panels of
 * ceil(k/2) * 32 bytes; columns past n and the odd k's partner are zero. */
struct kern_igemm_b {
  int64_t n, k;
  bool is_signed; /* int8 (true) or uint8 elements */
  uint8_t *data;
  /* Into data, after the panels: per column, sum_p of B as int8 (an
   * unsigned B minus 128), for the VNNI tiers. Set by kern_igemm_pack_b. */
  const int32_t *colsum;
};

/* One problem. a is m×k with row stride lda, b is k×n with row stride ldb
 * (elements); c is m×n with row stride ldc. Zero points are int32 holding
 * values of the element type's range (uint8 0..255 or int8 -128..127): za_i =
 * a_zp[i * a_zp_stride] (stride 0: one per tensor; a_zp NULL: 0), likewise
 * zb_j = b_zp[j * b_zp_stride]. */
struct kern_igemm {
  int64_t m, n, k;
  const void *a;
  int64_t lda;
  bool a_signed;
  const void *b; /* unused by kern_igemm_packed */
  int64_t ldb;
  bool b_signed;
  const int32_t *a_zp;
  int64_t a_zp_stride;
  const int32_t *b_zp;
  int64_t b_zp_stride;
  int32_t *c;
  int64_t ldc;
  /* NULL, or C written as float there instead (c is then unused). */
  const struct kern_igemm_f32 *f32;
};

/* C as float, scaled and biased on the way out of the tile (the chain ORT's
 * quantize_dynamic writes after a MatMulInteger, Cast → Mul → Add, and
 * tolk's int8 LM head), while the sums are still in cache:
 *
 *   c[i*ldc + j] = float(C[i][j]) * (rs_i * cs_j) + bias[j]
 *
 * with rs_i = row_scale[i * row_scale_stride] and cs_j = col_scale[j *
 * col_scale_stride] (stride 0: one value), the scale product rounded to
 * float first, as the graph's Mul(a_scale, b_scale) does; bias NULL: no
 * addition. With `chained`, float(C[i][j]) * rs_i * cs_j left to right
 * instead. Every operation rounds to float on its own, so the result is bit
 * for bit that of the separate ops. */
struct kern_igemm_f32 {
  float *c;
  int64_t ldc;
  const float *row_scale, *col_scale, *bias;
  int64_t row_scale_stride, col_scale_stride;
  bool chained;
};

/* The reference: the formula above, one dot product per element (and
 * p->f32's float output when set). */
void kern_igemm_ref(const struct kern_igemm *p);

/* Bytes of packed B for an n×k problem; 0 when the size overflows. */
size_t kern_igemm_pack_b_size(int64_t n, int64_t k);

/* Packs b (k×n, row stride ldb, or n×k with row stride ldb when trans_b) into
 * out->data, which the caller allocated with kern_igemm_pack_b_size(n, k)
 * bytes; fills out's other fields. */
void kern_igemm_pack_b(int64_t n, int64_t k, const void *b, int64_t ldb, bool trans_b,
                       bool is_signed, struct kern_igemm_b *out);

/* Scratch bytes kern_igemm_packed needs for an m×k A; 0 on overflow. */
size_t kern_igemm_work_size(int64_t m, int64_t k);

/* C from p (p->b, p->ldb and p->b_signed are ignored) and packed B, which
 * must match p->n, p->k. `work` holds kern_igemm_work_size(m, k) bytes,
 * 64-byte aligned is best. pool may be NULL. */
void kern_igemm_packed(const struct kern_igemm *p, const struct kern_igemm_b *b, void *work,
                       struct tolk_pool *pool);

/* Name of the implementation in use ("amx", "avx512vnni", "avxvnni", "avx2",
 * "vnni-ref", "scalar"), for logs and tests. */
const char *kern_igemm_isa(void);

/* Forces an implementation by name for tests; false when it is not available
 * on this CPU (nothing changes then). NULL: back to the detected one. */
bool kern_igemm_force_isa(const char *name);

/* ---- internal: shared by igemm.c and the per-ISA files ---- */

/* Rows per micro-tile. */
#define KERN_IGEMM_MR 6

/* The 512-bit tiers' vpermw index over one quad row of a panel (two pair
 * rows, 64 bytes): word 2j of the result is word j of the first pair row
 * (k 4t, 4t+1 of column j), word 2j+1 word j of the second (k 4t+2, 4t+3),
 * so that each column's 4 bytes lie in its own 32-bit lane. */
static const int16_t kern_igemm_quad_perm[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/* Pairs of k per packed row of A and per panel of B: even, see above. */
static inline int64_t kern_igemm_pairs(int64_t k) { return (k + 3) / 4 * 2; }

/* Computes an mr×16 tile (1 <= mr <= KERN_IGEMM_MR) of raw sums
 * tile[i*16 + j] = sum_q pair_dot(pa[i*pa_ld + q], panel[q], column j) over
 * kp pairs, where pa holds packed A (two int16 per int32) and panel is one
 * packed B panel. Wrapping int32 arithmetic. */
typedef void (*kern_igemm_tile_fn)(int mr, int64_t kp, const int32_t *pa, int64_t pa_ld,
                                   const uint8_t *panel, bool b_signed, int32_t *tile);
void kern_igemm_tile_avx2(int mr, int64_t kp, const int32_t *pa, int64_t pa_ld,
                          const uint8_t *panel, bool b_signed, int32_t *tile);

/* The VNNI tiers' tile: raw sums tile[i*16 + j] = sum over kq quads of the
 * 4 uint8 of pa[i*pa_ld + t] times the 4 int8 of column j in pair rows 2t,
 * 2t+1 of the panel (each byte XOR 0x80 first when b_flip). */
typedef void (*kern_igemm_qtile_fn)(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
                                    const uint8_t *panel, bool b_flip, int32_t *tile);
void kern_igemm_qtile_avx512vnni(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
                                 const uint8_t *panel, bool b_flip, int32_t *tile);
void kern_igemm_qtile_avxvnni(int mr, int64_t kq, const uint32_t *pa, int64_t pa_ld,
                              const uint8_t *panel, bool b_flip, int32_t *tile);
/* Rows 1 ≤ rows ≤ KERN_IGEMM_FEW_ROWS of A (rows pa_ld apart) against
 * kern_igemm_few_panels(rows) consecutive panels (panel q at panel + q *
 * panel_stride): tiles[(r * panels + q) * 16 + j] row r's sums for panel q,
 * as the tiles give them (kern_igemm_row_fn: pairs; _qrow_: VNNI quads). */
#define KERN_IGEMM_FEW_ROWS 3
static inline int kern_igemm_few_panels(int rows) { return rows == 1 ? 4 : rows == 2 ? 3 : 2; }
typedef void (*kern_igemm_row_fn)(int rows, int64_t kp, const int32_t *pa, int64_t pa_ld, const uint8_t *panel,
                                  int64_t panel_stride, bool b_signed, int32_t *tiles);
typedef void (*kern_igemm_qrow_fn)(int rows, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
                                   int64_t panel_stride, bool b_flip, int32_t *tiles);
void kern_igemm_row_avx2(int rows, int64_t kp, const int32_t *pa, int64_t pa_ld, const uint8_t *panel,
                         int64_t panel_stride, bool b_signed, int32_t *tiles);
void kern_igemm_qrow_avx512vnni(int rows, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
                                int64_t panel_stride, bool b_flip, int32_t *tiles);
void kern_igemm_qrow_avxvnni(int rows, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
                             int64_t panel_stride, bool b_flip, int32_t *tiles);

/* The AMX tier's kernel (igemm_amx.c): rows ≤ 6 × 16 of A (rows pa_ld
 * apart, kq quads each) against one panel, the raw sums as the quad tile
 * gives them into sums[i*16 + j], which holds ceil(rows / 16) × 16 rows. */
typedef void (*kern_igemm_qblock_fn)(int rows, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
                                     bool b_flip, int32_t *sums);
void kern_igemm_qblock_amx(int rows, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
                           bool b_flip, int32_t *sums);
/* Fewer rows than a tile's 16 in a row block go to the AVX-512 VNNI tiles:
 * most of a tile would multiply zeros. */
#define KERN_IGEMM_AMX_MIN_ROWS 16

/* Columns one task finishes: a panel, or a few-rows group's panels. */
#define KERN_IGEMM_SPAN_COLS (4 * KERN_IGEMM_NR)

/* What a span of columns brings to the sums' corrections and scaling. */
struct kern_igemm_cols {
  int64_t col0;
  int ncols;
  /* The pair tiers' sums are final when B has no zero point (symmetric
   * weights, as ORT quantizes them): no correction pass then. */
  bool exact;
  const float *fcs; /* the columns' scales: the problem's own when contiguous, else fcs_copy */
  const uint32_t *cs; /* B's column sums as int8 (kern_igemm_b.colsum), read by the VNNI tiers */
  const uint32_t *zb; /* zb'_j: zeros where B has no zero point and is not flipped, else zb_copy */
  uint32_t zb_copy[KERN_IGEMM_SPAN_COLS];
  float fcs_copy[KERN_IGEMM_SPAN_COLS];
};

/* What the rows bring: their sums of A - za, and for the VNNI tiers za'
 * per row (NULL for the pair tiers). */
struct kern_igemm_rows {
  const struct kern_igemm *p;
  const int32_t *rowsum, *za;
};

/* Rows i0 .. i0 + mr of a span from their raw sums (row i at tile + i *
 * ld): the zero-point terms, then C or its float form, written to out,
 * the place of row i0, column ct->col0, rows ldo elements apart (C itself,
 * or a buffer). igemm_finish.h, one build per tier. */
#define KERN_IGEMM_FINISH_ARGS                                                                            \
  const struct kern_igemm_rows *r, const struct kern_igemm_cols *ct, int64_t i0, int mr, int32_t *tile, int ld, \
      void *out, int64_t ldo
typedef void (*kern_igemm_finish_fn)(KERN_IGEMM_FINISH_ARGS);
void kern_igemm_finish_scalar(KERN_IGEMM_FINISH_ARGS);
void kern_igemm_finish_avx2(KERN_IGEMM_FINISH_ARGS);
void kern_igemm_finish_avxvnni(KERN_IGEMM_FINISH_ARGS);
void kern_igemm_finish_avx512vnni(KERN_IGEMM_FINISH_ARGS);

/* Whether the compiler built those three (it knew the flags). */
bool kern_igemm_avx512vnni_built(void);
bool kern_igemm_avxvnni_built(void);
bool kern_igemm_amx_built(void);

#endif /* TOLK_IGEMM_H */
