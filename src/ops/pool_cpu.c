/*
 * pool_cpu.c — pooling kernels (see nn_cpu.h): pool_tmpl.h instantiated for
 * float, double and int64 (integer MaxPool inputs are staged to int64 by the
 * family file). Each output walks only the taps of its window that fall
 * inside the input, found per dim by arithmetic (once per call, in tables)
 * rather than by testing every tap, so padding and dilation cost nothing in
 * the inner loop; 2-D max pooling without indices has straight loops.
 */
#include <math.h>
#include <stdint.h>

#include "nn_cpu.h"

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* The taps of output index o along one dim: start = o*s - pad0 is the input
 * position of tap 0; [lo, hi) the taps j with start + j*dil inside [0, in);
 * incl the count of taps inside the explicitly padded extent [-pad0,
 * in + pad1), the divisor factor of count_include_pad. */
struct pool_tab {
  int64_t start, lo, hi, incl;
};

static void pool_tab_at(const struct nn_window *w, int d, int64_t o, struct pool_tab *t) {
  int64_t s0 = o * w->stride[d] - w->pad0[d], dil = w->dil[d], k = w->k[d];
  int64_t l = s0 >= 0 ? 0 : ceil_div(-s0, dil);
  int64_t h = ceil_div(w->in[d] - s0, dil);
  if (h > k) h = k;
  if (l > k) l = k;
  if (h < l) h = l;
  int64_t c = ceil_div(w->in[d] + w->pad1[d] - s0, dil);
  if (c > k) c = k;
  if (c < 0) c = 0;
  t->start = s0;
  t->lo = l;
  t->hi = h;
  t->incl = c;
}

/* Tables of every output index's taps, per dim, in buf (kept on the stack:
 * kernels allocate nothing). False when the output extents add up to more
 * than POOL_TAB_MAX; callers then compute each entry as they go. */
#define POOL_TAB_MAX 512

static bool pool_tabs(const struct nn_window *w, struct pool_tab *buf,
                      const struct pool_tab **tab) {
  int64_t total = 0;
  for (int d = 0; d < w->nsp; d++) total += w->out[d];
  if (total > POOL_TAB_MAX) return false;
  for (int d = 0; d < w->nsp; d++) {
    tab[d] = buf;
    for (int64_t o = 0; o < w->out[d]; o++) pool_tab_at(w, d, o, buf++);
  }
  return true;
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
