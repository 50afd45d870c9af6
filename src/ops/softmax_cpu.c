/*
 * softmax_cpu.c — Softmax / LogSoftmax / Hardmax kernels (see nn_cpu.h):
 * softmax_tmpl.h instantiated for float and double, with contiguous float
 * rows handed to the AVX2 kernel (nn_avx2.c) when the CPU has it, and the
 * all-double reference.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn_avx2.h"
#include "nn_cpu.h"

/* The AVX2 row kernel, when the CPU has it, for float Softmax/LogSoftmax. */
static inline bool row_fast_f32(enum nn_softmax op, const float *x, float *y, int64_t n) {
#if NN_HAVE_AVX2
  if (op != NN_HARDMAX && nn_use_avx2()) {
    nn_softmax_row_f32_avx2(op == NN_LOGSOFTMAX, x, y, n);
    return true;
  }
#endif
  (void)op, (void)x, (void)y, (void)n;
  return false;
}
static inline bool row_fast_f64(enum nn_softmax op, const double *x, double *y, int64_t n) {
  (void)op, (void)x, (void)y, (void)n;
  return false;
}

#define T float
#define SFX f32
#define EXP expf
#include "softmax_tmpl.h"
#undef T
#undef SFX
#undef EXP

#define T double
#define SFX f64
#define EXP exp
#include "softmax_tmpl.h"
#undef T
#undef SFX
#undef EXP

void nn_softmax_f32_ref(enum nn_softmax op, const float *x, float *y, int64_t o, int64_t a,
                        int64_t i) {
  for (int64_t oo = 0; oo < o; oo++)
    for (int64_t ii = 0; ii < i; ii++) {
      const float *p = x + oo * a * i + ii;
      float *q = y + oo * a * i + ii;
      double m = p[0];
      int64_t am = 0;
      for (int64_t r = 1; r < a; r++)
        if (p[r * i] > m) {
          m = p[r * i];
          am = r;
        }
      double s = 0;
      for (int64_t r = 0; r < a; r++) s += exp((double)p[r * i] - m);
      for (int64_t r = 0; r < a; r++) {
        double v = (double)p[r * i] - m;
        if (op == NN_SOFTMAX)
          q[r * i] = (float)(exp(v) / s);
        else if (op == NN_LOGSOFTMAX)
          q[r * i] = (float)(v - log(s));
        else
          q[r * i] = r == am ? 1.0f : 0.0f;
      }
    }
}
