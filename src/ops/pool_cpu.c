/*
 * pool_cpu.c — pooling kernels (see nn_cpu.h): pool_tmpl.h instantiated for
 * float, double and int64 (integer MaxPool inputs are staged to int64 by the
 * family file). Each output walks only the taps of its window that fall
 * inside the input, found per dim by arithmetic rather than by testing every
 * tap, so padding and dilation cost nothing in the inner loop.
 */
#include <math.h>
#include <stdint.h>

#include "nn_cpu.h"

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* For output index o along dim d: start = o*s - pad0 (input position of tap
 * 0); [lo, hi) the taps j with start + j*dil inside [0, in); and *incl is
 * multiplied by the count of taps inside the explicitly padded extent
 * [-pad0, in + pad1), the divisor of count_include_pad. */
static void tap_range(const struct nn_window *w, int d, int64_t o, int64_t *start,
                      int64_t *lo, int64_t *hi, int64_t *incl) {
  int64_t s0 = o * w->stride[d] - w->pad0[d], dil = w->dil[d], k = w->k[d];
  int64_t l = s0 >= 0 ? 0 : ceil_div(-s0, dil);
  int64_t h = ceil_div(w->in[d] - s0, dil);
  if (h > k) h = k;
  if (l > k) l = k;
  if (h < l) h = l;
  int64_t c = ceil_div(w->in[d] + w->pad1[d] - s0, dil);
  if (c > k) c = k;
  if (c < 0) c = 0;
  *start = s0;
  *lo = l;
  *hi = h;
  *incl *= c;
}

#define T float
#define SFX f32
#define LOWEST (-INFINITY)
#include "pool_tmpl.h"
#undef T
#undef SFX
#undef LOWEST

#define T double
#define SFX f64
#define LOWEST (-INFINITY)
#include "pool_tmpl.h"
#undef T
#undef SFX
#undef LOWEST

#define T int64_t
#define SFX i64
#define LOWEST INT64_MIN
#include "pool_tmpl.h"
#undef T
#undef SFX
#undef LOWEST
