/*
 * igemm_tmpl.h — the register tile of the 8-bit GEMM (igemm.h), written once
 * and instantiated per ISA, as sgemm_tmpl.h does for fp32. The including file
 * (compiled with its tier's flags) defines the vector type and the tier's
 * inner product as a few inline functions, then includes this; the loop over
 * k, the accumulators and the dispatch on mr are the same for every tier.
 *
 * Each of the mr rows keeps two accumulators (c0, c1), each step of the k
 * loop loads two B vectors (b0, b1) from the panel and, for every row,
 * multiplies them into that row's accumulators with the row's packed A.
 * 6 rows × 2 = 12 accumulators. They are named variables rather than an
 * array: GCC keeps an array of vectors in memory when the row loop is not
 * fully unrolled, which costs half the speed. MR is a constant in every
 * instantiation, so the `MR > r` tests fold away, and so does `flag`
 * (igt_tile_mr is instantiated for true and false).
 *
 * One to three rows against several panels (IGT_ROW_NAME: 4, 3 or 2) keep
 * the same two accumulators per row and panel and read the panels side by
 * side: a decoder step of a few rows streams its weights, and several
 * streams keep more lines in flight than one (integer sums: any order is
 * exact).
 *
 * The includer defines before including:
 *   IGT_NAME     the tile function to define, of igemm.h's tile signature
 *   IGT_ROW_NAME the few-rows function to define, of igemm.h's row signature
 *   IGT_A        the element type of packed A (int32_t pairs, uint32_t quads)
 *   IGT_BUILT    1 when the compiler knows the tier's instructions, else 0:
 *                then IGT_NAME is an empty stand-in that igemm.c never
 *                selects, and nothing below is needed
 *   IGT_BUILT_FN optional: the name of a `bool f(void)` to define, telling
 *                igemm.c whether the tier was built
 * and, with IGT_BUILT 1:
 *   IGT_V        the vector type
 *   IGT_T_BYTES  bytes of the panel per A index t (igt_load reads there;
 *                the tile prefetches by it)
 *   IGT_STEP     A elements one k step consumes: 1, or 2 where c0 and c1
 *                take alternate elements (and their B) to hide the
 *                multiply-add's latency; then an odd count ends with one
 *                step into c0 alone
 *   igt_zero()                           a zero vector
 *   igt_load(panel, t, flag, &b0, &b1)   the B vectors of step t (A index t)
 *   igt_madd(&c0, &c1, a, b0, b1)        c0, c1 += row's A at a · b0, b1
 *   igt_store(row, c0, c1)               the row's 16 int32 sums to row[0..15]
 *   with IGT_STEP 2 also
 *   igt_load_last(panel, t, flag)        b0 of the last, odd step
 *   igt_madd_last(c0, a, b0)             c0 + A at a · b0
 * `flag` is the tile's bool: B signed (AVX2) or B to flip (VNNI).
 */
#include "igemm.h"

#ifdef IGT_BUILT_FN
bool IGT_BUILT_FN(void) { return IGT_BUILT; }
#endif

#if !IGT_BUILT
void IGT_NAME(int mr, int64_t n, const IGT_A *pa, int64_t pa_ld, const uint8_t *panel, bool flag,
              int32_t *tile) {
  (void)mr, (void)n, (void)pa, (void)pa_ld, (void)panel, (void)flag, (void)tile;
}
void IGT_ROW_NAME(int rows, int64_t n, const IGT_A *pa, int64_t pa_ld, const uint8_t *panel, int64_t panel_stride,
                  bool flag, int32_t *tiles) {
  (void)rows, (void)n, (void)pa, (void)pa_ld, (void)panel, (void)panel_stride, (void)flag, (void)tiles;
}
#else

#define IGT_AI static inline __attribute__((always_inline))
/* The tile asks for its panel 1 KiB ahead, as sgemm_tmpl.h does: at 4 to 64
 * rows the LM head's 33 MB of panels stream from memory at 4-16 bytes a
 * cycle, and the hardware prefetcher leaves the first lines of each panel
 * late (Zen 2, one thread, 512 x 65,001: 4 rows 58 -> 79 GOP/s, 16 rows 82
 * -> 91; in-cache shapes unchanged). The few-rows function has none: with
 * its panels read side by side it was no faster at two or three rows and a
 * tenth slower at one. A prefetch changes no number. */
#define IGT_PREFETCH_BYTES 1024

#define IGT_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define IGT_ROW_MADD(r) \
  if (MR > r) igt_madd(&c##r##0, &c##r##1, pa + r * pa_ld + t, b0, b1);
#define IGT_ROW_MADD_LAST(r) \
  if (MR > r) c##r##0 = igt_madd_last(c##r##0, pa + r * pa_ld + t, b0);
#define IGT_ROW_STORE(r) \
  if (MR > r) igt_store(tile + r * KERN_IGEMM_NR, c##r##0, c##r##1);

IGT_AI void igt_tile_mr(const int MR, int64_t n, const IGT_A *pa, int64_t pa_ld,
                        const uint8_t *panel, const bool flag, int32_t *tile) {
  IGT_V c00 = igt_zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
        c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  int64_t t = 0;
  for (; t + IGT_STEP <= n; t += IGT_STEP) {
    IGT_V b0, b1;
    igt_load(panel, t, flag, &b0, &b1);
    __builtin_prefetch(panel + t * IGT_T_BYTES + IGT_PREFETCH_BYTES, 0, 3);
    IGT_ROWS(IGT_ROW_MADD)
  }
#if IGT_STEP == 2
  if (t < n) {
    IGT_V b0 = igt_load_last(panel, t, flag);
    IGT_ROWS(IGT_ROW_MADD_LAST)
  }
#elif IGT_STEP != 1
#error "igemm_tmpl.h: IGT_STEP is 1 or 2"
#endif
  IGT_ROWS(IGT_ROW_STORE)
}

#if KERN_IGEMM_MR != 6
#error "igemm_tmpl.h: the rows above assume KERN_IGEMM_MR == 6"
#endif

#define IGT_CASE(MR)                                       \
  case MR:                                                 \
    if (flag)                                              \
      igt_tile_mr(MR, n, pa, pa_ld, panel, true, tile);    \
    else                                                   \
      igt_tile_mr(MR, n, pa, pa_ld, panel, false, tile);   \
    break;

void IGT_NAME(int mr, int64_t n, const IGT_A *pa, int64_t pa_ld, const uint8_t *panel, bool flag,
              int32_t *tile) {
  switch (mr) {
    IGT_CASE(1)
    IGT_CASE(2)
    IGT_CASE(3)
    IGT_CASE(4)
    IGT_CASE(5)
    IGT_CASE(6)
  default: break;
  }
}

/* (row, panel) pairs of the few-rows function: rows × panels of
 * kern_igemm_few_panels(rows), 1 × 4, 2 × 3 or 3 × 2. */
#define IGT_RQ(X) X(0, 0) X(0, 1) X(0, 2) X(0, 3) X(1, 0) X(1, 1) X(1, 2) X(2, 0) X(2, 1)
#define IGT_RQ_DECL(r, q) IGT_V c##r##q##0 = igt_zero(), c##r##q##1 = c##r##q##0;
#define IGT_RQ_MADD(r, q) \
  if (R > r && Q > q) igt_madd(&c##r##q##0, &c##r##q##1, pa + r * pa_ld + t, b##q##0, b##q##1);
#define IGT_RQ_MADD_LAST(r, q) \
  if (R > r && Q > q) c##r##q##0 = igt_madd_last(c##r##q##0, pa + r * pa_ld + t, b##q##0);
#define IGT_RQ_STORE(r, q) \
  if (R > r && Q > q) igt_store(tiles + (r * Q + q) * KERN_IGEMM_NR, c##r##q##0, c##r##q##1);
#define IGT_Q(X) X(0) X(1) X(2) X(3)
#define IGT_Q_LOAD(q) \
  IGT_V b##q##0, b##q##1;                                                 \
  if (Q > q) igt_load(panel + q * panel_stride, t, flag, &b##q##0, &b##q##1);
#define IGT_Q_LOAD_LAST(q) \
  IGT_V b##q##0;                                                          \
  if (Q > q) b##q##0 = igt_load_last(panel + q * panel_stride, t, flag);

#if KERN_IGEMM_FEW_ROWS != 3
#error "igemm_tmpl.h: the pairs above assume KERN_IGEMM_FEW_ROWS == 3"
#endif

IGT_AI void igt_few(const int R, const int Q, int64_t n, const IGT_A *pa, int64_t pa_ld, const uint8_t *panel,
                    int64_t panel_stride, const bool flag, int32_t *tiles) {
  IGT_RQ(IGT_RQ_DECL)
  int64_t t = 0;
  for (; t + IGT_STEP <= n; t += IGT_STEP) {
    IGT_Q(IGT_Q_LOAD)
    IGT_RQ(IGT_RQ_MADD)
  }
#if IGT_STEP == 2
  if (t < n) {
    IGT_Q(IGT_Q_LOAD_LAST)
    IGT_RQ(IGT_RQ_MADD_LAST)
  }
#endif
  IGT_RQ(IGT_RQ_STORE)
}

#define IGT_FEW_CASE(R)                                                                            \
  case R:                                                                                          \
    if (flag)                                                                                      \
      igt_few(R, kern_igemm_few_panels(R), n, pa, pa_ld, panel, panel_stride, true, tiles);       \
    else                                                                                           \
      igt_few(R, kern_igemm_few_panels(R), n, pa, pa_ld, panel, panel_stride, false, tiles);      \
    break;

void IGT_ROW_NAME(int rows, int64_t n, const IGT_A *pa, int64_t pa_ld, const uint8_t *panel, int64_t panel_stride,
                  bool flag, int32_t *tiles) {
  switch (rows) {
    IGT_FEW_CASE(1)
    IGT_FEW_CASE(2)
    IGT_FEW_CASE(3)
  default: break;
  }
}

#undef IGT_FEW_CASE
#undef IGT_Q_LOAD_LAST
#undef IGT_Q_LOAD
#undef IGT_Q
#undef IGT_RQ_STORE
#undef IGT_RQ_MADD_LAST
#undef IGT_RQ_MADD
#undef IGT_RQ_DECL
#undef IGT_RQ
#undef IGT_CASE
#undef IGT_ROW_STORE
#undef IGT_ROW_MADD_LAST
#undef IGT_ROW_MADD
#undef IGT_ROWS
#undef IGT_AI

#endif /* IGT_BUILT */
