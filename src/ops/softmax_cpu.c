/*
 * softmax_cpu.c — Softmax / LogSoftmax / Hardmax kernels (see nn_cpu.h):
 * softmax_tmpl.h instantiated for float and double, the branch-free float
 * exp that lets the float loops vectorise, and the all-double reference.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn_cpu.h"

/* exp for x <= ~88 in plain arithmetic so that loops over it vectorise:
 * x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), a degree-6
 * polynomial for exp(r) (Cephes' expf coefficients, relative error about
 * 1e-7), and 2^n built in the exponent bits. Inputs below -87.3 give about
 * 1e-38 instead of a denormal; softmax adds them to a sum >= 1, so that is
 * immaterial. */
static inline float vexpf(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

#define T float
#define SFX f32
#define EXP vexpf
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
