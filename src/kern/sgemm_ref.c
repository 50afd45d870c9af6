/*
 * sgemm_ref.c — the scalar reference GEMM every fast path is tested against.
 * Accumulates in double so that it is a stricter reference than any float
 * path and its own rounding does not hide their errors. The dispatched fast
 * paths live in sgemm.c.
 */
#include "kern.h"

void kern_sgemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++) {
        float av = trans_a ? a[p * lda + i] : a[i * lda + p];
        float bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        acc += (double)av * bv;
      }
      float prev = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
      c[i * ldc + j] = (float)(alpha * acc) + prev;
    }
  }
}
