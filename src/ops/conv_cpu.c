/*
 * conv_cpu.c — sliding-window geometry, and the Conv / ConvTranspose kernels
 * (see nn_cpu.h).
 *
 * Conv lowers to GEMM: im2col gathers, for a tile of output positions, every
 * (input channel, kernel tap) into a column matrix, and kern_sgemm multiplies
 * the group's weights (mg × cg·K) by it. The column matrix is built a tile of
 * positions at a time so scratch stays bounded (NN_COL_FLOATS) however large
 * the image. 1×1 convolutions with unit stride and no padding skip im2col:
 * the image already is the column matrix. ConvTranspose is the adjoint: one
 * GEMM with the weights transposed gives the columns, and col2im scatters
 * them into the output.
 *
 * The references compute each output element directly (a gather, also for
 * ConvTranspose), accumulating in double.
 */
#include <string.h>

#include "../kern/kern.h"
#include "nn_cpu.h"

/* Scratch bound for one im2col / col2im tile, in floats (4 MiB). */
#define NN_COL_FLOATS ((int64_t)1 << 20)

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

bool nn_window_out(struct nn_window *w, enum nn_auto_pad auto_pad, bool ceil_mode) {
  for (int d = 0; d < w->nsp; d++) {
    int64_t in = w->in[d], k = w->k[d], s = w->stride[d], dil = w->dil[d], ek, out;
    if (in < 0 || k < 1 || s < 1 || dil < 1) return false;
    if (__builtin_mul_overflow(k - 1, dil, &ek) || ek > INT64_MAX / 4) return false;
    ek += 1;
    switch (auto_pad) {
    case NN_PAD_SAME_UPPER:
    case NN_PAD_SAME_LOWER: {
      out = ceil_div(in, s);
      int64_t total = (out - 1) * s + ek - in;
      if (total < 0) total = 0;
      w->pad0[d] = auto_pad == NN_PAD_SAME_UPPER ? total / 2 : total - total / 2;
      w->pad1[d] = total - w->pad0[d];
      break;
    }
    case NN_PAD_VALID:
      w->pad0[d] = w->pad1[d] = 0;
      if (in < ek) return false;
      out = (in - ek) / s + 1;
      break;
    default: {
      if (w->pad0[d] < 0 || w->pad1[d] < 0 || w->pad0[d] > INT64_MAX / 4 ||
          w->pad1[d] > INT64_MAX / 4 || in > INT64_MAX / 4)
        return false;
      int64_t span = in + w->pad0[d] + w->pad1[d] - ek;
      if (span < 0) return false;
      if (ceil_mode) {
        out = ceil_div(span, s) + 1;
        /* The last window must start inside the input or the front padding. */
        if ((out - 1) * s >= in + w->pad0[d]) out--;
      } else {
        out = span / s + 1;
      }
    }
    }
    if (out < 1) return false;
    w->out[d] = out;
  }
  return true;
}

int64_t nn_convt_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t out_pad,
                     int64_t pad0, int64_t pad1) {
  return s * (in - 1) + out_pad + (k - 1) * d + 1 - pad0 - pad1;
}

/* ---------------------------------------------------------------- im2col */

/* The runs of one kernel tap over output positions [p0, p1): each run lies
 * along the last spatial dim, one output row (or the part of it inside the
 * range). For each run, `base` is the input offset of the tapped input row
 * (-1 when that row lies in the padding), [ox0, ox1) the run's last-dim
 * output indices, [lo, hi) the part of them whose tap falls inside the input
 * (input index ox * s + off), and `col` the column of ox0. The iterator does
 * one division when it starts and none per run; im2col and col2im share it. */
struct tap_iter {
  const struct nn_window *w;
  const int64_t *kidx;
  int64_t oidx[NN_MAX_SPATIAL];
  int64_t p, p1, lo_all, hi_all;
  /* the current run */
  int64_t base, ox0, ox1, lo, hi, off, col;
};

static void tap_begin(struct tap_iter *t, const struct nn_window *w, const int64_t *kidx,
                      int64_t p0, int64_t p1) {
  int last = w->nsp - 1;
  t->w = w;
  t->kidx = kidx;
  t->p = p0;
  t->p1 = p1;
  t->col = 0;
  int64_t rem = p0;
  for (int d = last; d >= 0; d--) {
    t->oidx[d] = rem % w->out[d];
    rem /= w->out[d];
  }
  int64_t s = w->stride[last];
  t->off = -w->pad0[last] + kidx[last] * w->dil[last];
  /* ox * s + off in [0, in)  <=>  ox in [ceil(-off / s), floor((in - 1 - off) / s)] */
  int64_t lo = ceil_div(-t->off, s), hi = floor_div(w->in[last] - 1 - t->off, s) + 1;
  t->lo_all = lo < 0 ? 0 : lo;
  t->hi_all = hi;
}

/* Sets up the run at t->p; false when the range is done. */
static bool tap_run(struct tap_iter *t) {
  if (t->p >= t->p1) return false;
  const struct nn_window *w = t->w;
  int last = w->nsp - 1;
  int64_t base = 0;
  bool inside = true;
  for (int d = 0; d < last; d++) {
    int64_t ix = t->oidx[d] * w->stride[d] - w->pad0[d] + t->kidx[d] * w->dil[d];
    if (ix < 0 || ix >= w->in[d]) inside = false;
    base = base * w->in[d] + ix;
  }
  t->base = inside ? base * w->in[last] : -1;
  t->ox0 = t->oidx[last];
  t->ox1 = t->ox0 + (t->p1 - t->p);
  if (t->ox1 > w->out[last]) t->ox1 = w->out[last];
  t->lo = t->lo_all < t->ox0 ? t->ox0 : t->lo_all > t->ox1 ? t->ox1 : t->lo_all;
  t->hi = t->hi_all > t->ox1 ? t->ox1 : t->hi_all < t->lo ? t->lo : t->hi_all;
  return true;
}

/* Moves past the current run to the start of the next output row. */
static void tap_next(struct tap_iter *t) {
  const struct nn_window *w = t->w;
  int64_t len = t->ox1 - t->ox0;
  t->p += len;
  t->col += len;
  t->oidx[w->nsp - 1] = 0;
  for (int d = w->nsp - 2; d >= 0; d--) {
    if (++t->oidx[d] < w->out[d]) break;
    t->oidx[d] = 0;
  }
}

/* im2col of whole 2-D images: per (channel, tap) one pass over the output
 * rows, the in-bounds columns found once per tap. */
static void im2col_2d(const float *x, int64_t channels, const struct nn_window *w, float *col,
                      int64_t ldc) {
  int64_t H = w->in[0], W = w->in[1], OH = w->out[0], OW = w->out[1];
  int64_t sh = w->stride[0], sw = w->stride[1];
  for (int64_t ch = 0; ch < channels; ch++)
    for (int64_t kh = 0; kh < w->k[0]; kh++)
      for (int64_t kw = 0; kw < w->k[1]; kw++) {
        float *d = col + ((ch * w->k[0] + kh) * w->k[1] + kw) * ldc;
        int64_t off = kw * w->dil[1] - w->pad0[1]; /* input column of ow = 0 */
        int64_t lo = ceil_div(-off, sw), hi = floor_div(W - 1 - off, sw) + 1;
        lo = lo < 0 ? 0 : lo > OW ? OW : lo;
        hi = hi > OW ? OW : hi < lo ? lo : hi;
        for (int64_t oh = 0; oh < OH; oh++, d += OW) {
          int64_t ih = oh * sh - w->pad0[0] + kh * w->dil[0];
          if (ih < 0 || ih >= H) {
            for (int64_t q = 0; q < OW; q++) d[q] = 0;
            continue;
          }
          const float *src = x + (ch * H + ih) * W + off;
          for (int64_t q = 0; q < lo; q++) d[q] = 0;
          if (sw == 1)
            for (int64_t q = lo; q < hi; q++) d[q] = src[q];
          else
            for (int64_t q = lo; q < hi; q++) d[q] = src[q * sw];
          for (int64_t q = hi; q < OW; q++) d[q] = 0;
        }
      }
}

void nn_im2col_f32(const float *x, int64_t channels, const struct nn_window *w, int64_t p0,
                   int64_t p1, float *col, int64_t ldc) {
  int nsp = w->nsp;
  if (nsp == 2 && p0 == 0 && p1 == w->out[0] * w->out[1] && ldc == p1) {
    im2col_2d(x, channels, w, col, ldc);
    return;
  }
  int64_t kn = nn_window_numel(w->k, nsp), inn = nn_window_numel(w->in, nsp);
  int64_t s = w->stride[nsp - 1];
  for (int64_t ch = 0; ch < channels; ch++) {
    const float *xc = x + ch * inn;
    int64_t kidx[NN_MAX_SPATIAL] = {0};
    for (int64_t kk = 0; kk < kn; kk++) {
      float *dst = col + (ch * kn + kk) * ldc;
      struct tap_iter r;
      for (tap_begin(&r, w, kidx, p0, p1); tap_run(&r); tap_next(&r)) {
        float *dr = dst + r.col - r.ox0;
        if (r.base < 0) {
          for (int64_t ox = r.ox0; ox < r.ox1; ox++) dr[ox] = 0;
          continue;
        }
        const float *src = xc + r.base + r.off;
        for (int64_t ox = r.ox0; ox < r.lo; ox++) dr[ox] = 0;
        if (s == 1)
          for (int64_t ox = r.lo; ox < r.hi; ox++) dr[ox] = src[ox];
        else
          for (int64_t ox = r.lo; ox < r.hi; ox++) dr[ox] = src[ox * s];
        for (int64_t ox = r.hi; ox < r.ox1; ox++) dr[ox] = 0;
      }
      for (int d = nsp - 1; d >= 0; d--) {
        if (++kidx[d] < w->k[d]) break;
        kidx[d] = 0;
      }
    }
  }
}

/* col2im over column range [p0, p1) of a tile (row stride ldc). */
static void col2im_tile(const float *col, int64_t channels, const struct nn_window *w,
                        int64_t p0, int64_t p1, int64_t ldc, float *y) {
  int nsp = w->nsp;
  int64_t kn = nn_window_numel(w->k, nsp), inn = nn_window_numel(w->in, nsp);
  int64_t s = w->stride[nsp - 1];
  for (int64_t ch = 0; ch < channels; ch++) {
    float *yc = y + ch * inn;
    int64_t kidx[NN_MAX_SPATIAL] = {0};
    for (int64_t kk = 0; kk < kn; kk++) {
      const float *src = col + (ch * kn + kk) * ldc;
      struct tap_iter r;
      for (tap_begin(&r, w, kidx, p0, p1); tap_run(&r); tap_next(&r)) {
        if (r.base < 0) continue;
        const float *sr = src + r.col - r.ox0;
        float *dst = yc + r.base + r.off;
        if (s == 1)
          for (int64_t ox = r.lo; ox < r.hi; ox++) dst[ox] += sr[ox];
        else
          for (int64_t ox = r.lo; ox < r.hi; ox++) dst[ox * s] += sr[ox];
      }
      for (int d = nsp - 1; d >= 0; d--) {
        if (++kidx[d] < w->k[d]) break;
        kidx[d] = 0;
      }
    }
  }
}

void nn_col2im_f32(const float *col, int64_t channels, const struct nn_window *w, float *y) {
  int64_t pn = nn_window_numel(w->out, w->nsp);
  col2im_tile(col, channels, w, 0, pn, pn, y);
}

/* ---------------------------------------------------------------- Conv */

static bool pointwise(const struct nn_window *w) {
  for (int d = 0; d < w->nsp; d++)
    if (w->k[d] != 1 || w->stride[d] != 1 || w->pad0[d] != 0 || w->pad1[d] != 0) return false;
  return true;
}

static int64_t tile_cols(int64_t rows, int64_t cols) {
  int64_t t = NN_COL_FLOATS / (rows ? rows : 1);
  if (t < 64) t = 64;
  return t < cols ? t : cols;
}

int64_t nn_conv_scratch(int64_t c, int64_t group, const struct nn_window *w) {
  if (pointwise(w)) return 0;
  int64_t kg = c / group * nn_window_numel(w->k, w->nsp);
  return kg * tile_cols(kg, nn_window_numel(w->out, w->nsp));
}

void nn_conv_f32(const float *x, const float *wt, const float *bias, float *y, int64_t n,
                 int64_t c, int64_t m, int64_t group, const struct nn_window *w,
                 float *scratch, struct tolk_pool *pool) {
  int64_t cg = c / group, mg = m / group;
  int64_t kg = cg * nn_window_numel(w->k, w->nsp);
  int64_t pn = nn_window_numel(w->out, w->nsp), inn = nn_window_numel(w->in, w->nsp);
  bool pw = pointwise(w);
  int64_t tile = tile_cols(kg, pn);
  for (int64_t i = 0; i < n; i++)
    for (int64_t g = 0; g < group; g++) {
      const float *xg = x + (i * c + g * cg) * inn;
      const float *wg = wt + g * mg * kg;
      float *yg = y + (i * m + g * mg) * pn;
      if (pw) {
        kern_sgemm(false, false, mg, pn, cg, 1.0f, wg, kg, xg, pn, 0.0f, yg, pn, pool);
      } else {
        for (int64_t p0 = 0; p0 < pn; p0 += tile) {
          int64_t p1 = p0 + tile < pn ? p0 + tile : pn;
          nn_im2col_f32(xg, cg, w, p0, p1, scratch, p1 - p0);
          kern_sgemm(false, false, mg, p1 - p0, kg, 1.0f, wg, kg, scratch, p1 - p0, 0.0f,
                     yg + p0, pn, pool);
        }
      }
      if (bias)
        for (int64_t mm = 0; mm < mg; mm++) {
          float b = bias[g * mg + mm];
          float *row = yg + mm * pn;
          for (int64_t p = 0; p < pn; p++) row[p] += b;
        }
    }
}

int64_t nn_convt_scratch(int64_t m, int64_t group, const struct nn_window *w) {
  int64_t rows = m / group * nn_window_numel(w->k, w->nsp);
  return rows * tile_cols(rows, nn_window_numel(w->out, w->nsp));
}

void nn_convt_f32(const float *x, const float *wt, const float *bias, float *y, int64_t n,
                  int64_t c, int64_t m, int64_t group, const struct nn_window *w,
                  float *scratch, struct tolk_pool *pool) {
  int64_t cg = c / group, mg = m / group, kn = nn_window_numel(w->k, w->nsp);
  int64_t rows = mg * kn;
  int64_t xn = nn_window_numel(w->out, w->nsp), yn = nn_window_numel(w->in, w->nsp);
  int64_t tile = tile_cols(rows, xn);
  for (int64_t i = 0; i < n; i++)
    for (int64_t g = 0; g < group; g++) {
      const float *xg = x + (i * c + g * cg) * xn;
      const float *wg = wt + g * cg * rows;
      float *yg = y + (i * m + g * mg) * yn;
      for (int64_t mm = 0; mm < mg; mm++) {
        float b = bias ? bias[g * mg + mm] : 0.0f;
        for (int64_t p = 0; p < yn; p++) yg[mm * yn + p] = b;
      }
      for (int64_t p0 = 0; p0 < xn; p0 += tile) {
        int64_t p1 = p0 + tile < xn ? p0 + tile : xn;
        kern_sgemm(true, false, rows, p1 - p0, cg, 1.0f, wg, rows, xg + p0, xn, 0.0f, scratch,
                   p1 - p0, pool);
        col2im_tile(scratch, mg, w, p0, p1, p1 - p0, yg);
      }
    }
}

/* ---------------------------------------------------------------- references */

/* Input offset of output position `oidx` at kernel tap `kidx`, or -1 when the
 * tap falls outside the input. */
static int64_t conv_tap(const struct nn_window *w, const int64_t *oidx, const int64_t *kidx) {
  int64_t off = 0;
  for (int d = 0; d < w->nsp; d++) {
    int64_t ix = oidx[d] * w->stride[d] - w->pad0[d] + kidx[d] * w->dil[d];
    if (ix < 0 || ix >= w->in[d]) return -1;
    off = off * w->in[d] + ix;
  }
  return off;
}

/* The conv-output position a ConvTranspose output position `yidx` reads at
 * tap `kidx` (the inverse of conv_tap), or -1. */
static int64_t convt_tap(const struct nn_window *w, const int64_t *yidx, const int64_t *kidx) {
  int64_t off = 0;
  for (int d = 0; d < w->nsp; d++) {
    int64_t t = yidx[d] + w->pad0[d] - kidx[d] * w->dil[d];
    if (t < 0 || t % w->stride[d] != 0) return -1;
    t /= w->stride[d];
    if (t >= w->out[d]) return -1;
    off = off * w->out[d] + t;
  }
  return off;
}

static void unflat(int64_t p, const int64_t *ext, int nsp, int64_t *idx) {
  for (int d = nsp - 1; d >= 0; d--) {
    idx[d] = p % ext[d];
    p /= ext[d];
  }
}

#define CONV_REF(NAME, T)                                                                \
  void NAME(const T *x, const T *wt, const T *bias, T *y, int64_t n, int64_t c, int64_t m, \
            int64_t group, const struct nn_window *w) {                                  \
    int64_t cg = c / group, mg = m / group, kn = nn_window_numel(w->k, w->nsp);          \
    int64_t pn = nn_window_numel(w->out, w->nsp), inn = nn_window_numel(w->in, w->nsp);  \
    int64_t oidx[NN_MAX_SPATIAL], kidx[NN_MAX_SPATIAL];                                  \
    for (int64_t i = 0; i < n; i++)                                                      \
      for (int64_t mm = 0; mm < m; mm++) {                                               \
        int64_t g = mm / mg;                                                             \
        for (int64_t p = 0; p < pn; p++) {                                               \
          unflat(p, w->out, w->nsp, oidx);                                               \
          double acc = bias ? (double)bias[mm] : 0.0;                                    \
          for (int64_t ci = 0; ci < cg; ci++)                                            \
            for (int64_t kk = 0; kk < kn; kk++) {                                        \
              unflat(kk, w->k, w->nsp, kidx);                                            \
              int64_t off = conv_tap(w, oidx, kidx);                                     \
              if (off < 0) continue;                                                     \
              acc += (double)x[(i * c + g * cg + ci) * inn + off] *                      \
                     (double)wt[(mm * cg + ci) * kn + kk];                               \
            }                                                                            \
          y[(i * m + mm) * pn + p] = (T)acc;                                             \
        }                                                                                \
      }                                                                                  \
  }

CONV_REF(nn_conv_ref_f32, float)
CONV_REF(nn_conv_ref_f64, double)

#define CONVT_REF(NAME, T)                                                               \
  void NAME(const T *x, const T *wt, const T *bias, T *y, int64_t n, int64_t c, int64_t m, \
            int64_t group, const struct nn_window *w) {                                  \
    int64_t cg = c / group, mg = m / group, kn = nn_window_numel(w->k, w->nsp);          \
    int64_t yn = nn_window_numel(w->in, w->nsp), xn = nn_window_numel(w->out, w->nsp);   \
    int64_t yidx[NN_MAX_SPATIAL], kidx[NN_MAX_SPATIAL];                                  \
    for (int64_t i = 0; i < n; i++)                                                      \
      for (int64_t mm = 0; mm < m; mm++) {                                               \
        int64_t g = mm / mg, mo = mm % mg;                                               \
        for (int64_t p = 0; p < yn; p++) {                                               \
          unflat(p, w->in, w->nsp, yidx);                                                \
          double acc = bias ? (double)bias[mm] : 0.0;                                    \
          for (int64_t ci = 0; ci < cg; ci++)                                            \
            for (int64_t kk = 0; kk < kn; kk++) {                                        \
              unflat(kk, w->k, w->nsp, kidx);                                            \
              int64_t off = convt_tap(w, yidx, kidx);                                    \
              if (off < 0) continue;                                                     \
              acc += (double)x[(i * c + g * cg + ci) * xn + off] *                       \
                     (double)wt[((g * cg + ci) * mg + mo) * kn + kk];                    \
            }                                                                            \
          y[(i * m + mm) * yn + p] = (T)acc;                                             \
        }                                                                                \
      }                                                                                  \
  }

CONVT_REF(nn_convt_ref_f32, float)
CONVT_REF(nn_convt_ref_f64, double)
