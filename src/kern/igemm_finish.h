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
#include <string.h>

#include "igemm.h"

#define IGF_AI static inline __attribute__((always_inline))

/* A row's columns of the float output, from their sums, the row's scale
 * rs, and the columns' scales cs and bias (contiguous, so that the loops
 * vectorise). */
IGF_AI void igf_scale_row(const struct kern_igemm_f32 *f, float rs, const float *bias, int ncols, const float *cs,
                          const int32_t *sums, float *out) {
  /* One pass, the bias added after the product is rounded (as the graph's
   * Add does): a second pass over the output cost more than the scaling at
   * 16 rows of the LM head, its lines no longer in the cache. */
  if (f->chained && bias)
    for (int j = 0; j < ncols; j++) out[j] = (float)sums[j] * rs * cs[j] + bias[j];
  else if (f->chained)
    for (int j = 0; j < ncols; j++) out[j] = (float)sums[j] * rs * cs[j];
  else if (bias)
    for (int j = 0; j < ncols; j++) out[j] = (float)sums[j] * (rs * cs[j]) + bias[j];
  else
    for (int j = 0; j < ncols; j++) out[j] = (float)sums[j] * (rs * cs[j]);
}

void IGF_NAME(KERN_IGEMM_FINISH_ARGS) {
  const struct kern_igemm *p = r->p;
  const int ncols = ct->ncols;
  for (int i = 0; i < mr; i++) {
    uint32_t rs = (uint32_t)r->rowsum[i0 + i], za = r->za ? (uint32_t)r->za[i0 + i] : 0;
    int32_t *trow = tile + i * ld;
    if (p->f32) {
      const struct kern_igemm_f32 *f = p->f32;
      if (!ct->exact)
        for (int j = 0; j < ncols; j++) trow[j] = (int32_t)((uint32_t)trow[j] - za * ct->cs[j] - ct->zb[j] * rs);
      igf_scale_row(f, f->row_scale[(i0 + i) * f->row_scale_stride], f->bias ? f->bias + ct->col0 : NULL, ncols,
                    ct->fcs, trow, (float *)out + i * ldo);
    } else {
      int32_t *crow = (int32_t *)out + i * ldo;
      if (ct->exact)
        memcpy(crow, trow, (size_t)ncols * sizeof *crow);
      else
        for (int j = 0; j < ncols; j++) crow[j] = (int32_t)((uint32_t)trow[j] - za * ct->cs[j] - ct->zb[j] * rs);
    }
  }
}

#undef IGF_AI
