/*
 * igemm_finish.h — the last pass of the 8-bit GEMM over a tile of sums (igemm.h):
 * the zero-point terms, then C or its float form. Written once in plain C and
 * compiled at each tier's width: igemm.c at the baseline, the tier files with
 * their flags, where the loops become the tier's vectors. The operations and
 * their order are the same in every build, so every build gives the same bits.
 *
 * At the baseline's four lanes this pass took a quarter of the int8 LM
 * head's time at 64 rows (perf, Zen 4); at AVX-512's sixteen it is one
 * vector op a term per row of a panel. A trip count fixed at 16 made GCC
 * unroll the loops into scalar code, so the count stays a variable.
 *
 * The includer defines IGF_NAME, the kern_igemm_finish_fn to define.
 */
#include <stdbool.h>

#include "igemm.h"

#define IGF_AI static inline __attribute__((always_inline))

/* The sum of column j corrected: as the tile gave it where the sums are
 * exact, else less za'·colsum'_j and zb'_j·rowsum (igemm.h). */
#define IGF_SUM(j) (exact ? sums[j] : (int32_t)((uint32_t)sums[j] - za * cs[j] - zb[j] * rsum))

/* A row's columns of the float output from their sums, in one pass with
 * the corrections: the row's scale rs, the columns' scales cs and bias
 * (contiguous, so that the loops vectorise). The bias is added after the
 * product is rounded, as the graph's Add does. `exact` is a constant where
 * this is inlined. */
IGF_AI void igf_scale_row(const struct kern_igemm_cols *ct, const struct kern_igemm_f32 *f, const bool exact,
                          uint32_t za, uint32_t rsum, float rs, const float *bias, const int32_t *sums, float *out) {
  const int ncols = ct->ncols;
  const float *fcs = ct->fcs;
  const uint32_t *cs = ct->cs, *zb = ct->zb;
  if (f->chained && bias)
    for (int j = 0; j < ncols; j++) out[j] = (float)IGF_SUM(j) * rs * fcs[j] + bias[j];
  else if (f->chained)
    for (int j = 0; j < ncols; j++) out[j] = (float)IGF_SUM(j) * rs * fcs[j];
  else if (bias)
    for (int j = 0; j < ncols; j++) out[j] = (float)IGF_SUM(j) * (rs * fcs[j]) + bias[j];
  else
    for (int j = 0; j < ncols; j++) out[j] = (float)IGF_SUM(j) * (rs * fcs[j]);
}

/* A row of C itself. */
IGF_AI void igf_int_row(const struct kern_igemm_cols *ct, const bool exact, uint32_t za, uint32_t rsum,
                        const int32_t *sums, int32_t *out) {
  const uint32_t *cs = ct->cs, *zb = ct->zb;
  for (int j = 0; j < ct->ncols; j++) out[j] = IGF_SUM(j);
}

void IGF_NAME(KERN_IGEMM_FINISH_ARGS) {
  const struct kern_igemm *p = r->p;
  const struct kern_igemm_f32 *f = p->f32;
  const float *bias = f && f->bias ? f->bias + ct->col0 : NULL;
  for (int i = 0; i < mr; i++) {
    const uint32_t rsum = (uint32_t)r->rowsum[i0 + i], za = r->za ? (uint32_t)r->za[i0 + i] : 0;
    const int32_t *sums = tile + i * ld;
    if (f) {
      const float rs = f->row_scale[(i0 + i) * f->row_scale_stride];
      float *o = (float *)out + i * ldo;
      if (ct->exact)
        igf_scale_row(ct, f, true, za, rsum, rs, bias, sums, o);
      else
        igf_scale_row(ct, f, false, za, rsum, rs, bias, sums, o);
    } else if (ct->exact) {
      igf_int_row(ct, true, za, rsum, sums, (int32_t *)out + i * ldo);
    } else {
      igf_int_row(ct, false, za, rsum, sums, (int32_t *)out + i * ldo);
    }
  }
}

#undef IGF_SUM
#undef IGF_AI
