/*
 * test_ops_conv.c — sliding-window geometry (output extents and pads for
 * explicit padding, ceil_mode and auto_pad, as Conv and the pools share it)
 * against worked examples, the im2col + GEMM Conv and the col2im
 * ConvTranspose against their direct double references on random problems
 * (1-D to 3-D, groups, depthwise, dilations, strides, asymmetric and
 * negative pads, pointwise, tiles), and the ConvTranspose output_shape /
 * auto_pad rules through a one-node model.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_cpu.h"
#include "testutil.h"

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "ops_model.h"

static float frand(void) { return (float)tu_unit(); }

/* One dim of nn_window_out: returns out (or -1 when refused) and the pads. */
static int64_t win1(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1,
                    enum nn_auto_pad ap, bool ceil_mode, int64_t *q0, int64_t *q1) {
  struct nn_window w = {.nsp = 1, .in = {in}, .k = {k}, .stride = {s}, .dil = {d},
                        .pad0 = {p0}, .pad1 = {p1}};
  if (!nn_window_out(&w, ap, ceil_mode)) return -1;
  *q0 = w.pad0[0];
  *q1 = w.pad1[0];
  return w.out[0];
}

static void test_geometry(void) {
  int64_t a, b;
  CHECK(win1(5, 3, 1, 1, 0, 0, NN_PAD_NOTSET, false, &a, &b) == 3);
  CHECK(win1(5, 3, 2, 1, 1, 1, NN_PAD_NOTSET, false, &a, &b) == 3);
  CHECK(win1(7, 3, 2, 1, 1, 0, NN_PAD_NOTSET, false, &a, &b) == 3);  /* asymmetric */
  CHECK(win1(32, 5, 3, 2, 0, 0, NN_PAD_NOTSET, false, &a, &b) == 8); /* ek = 9 */
  CHECK(win1(32, 5, 3, 2, 0, 0, NN_PAD_NOTSET, true, &a, &b) == 9);
  /* ceil_mode: (4 - 3) / 2 rounds up to a second window. */
  CHECK(win1(4, 3, 2, 1, 0, 0, NN_PAD_NOTSET, true, &a, &b) == 2);
  CHECK(win1(4, 3, 2, 1, 0, 0, NN_PAD_NOTSET, false, &a, &b) == 1);
  /* ceil_mode, but that window would start in the end padding: dropped. */
  CHECK(win1(2, 1, 2, 1, 0, 0, NN_PAD_NOTSET, true, &a, &b) == 1);
  CHECK(win1(4, 1, 2, 1, 0, 1, NN_PAD_NOTSET, true, &a, &b) == 2);
  /* SAME: ceil(in / s), the odd pad at the end (UPPER) or start (LOWER). */
  CHECK(win1(4, 3, 2, 1, 0, 0, NN_PAD_SAME_UPPER, false, &a, &b) == 2 && a == 0 && b == 1);
  CHECK(win1(4, 3, 2, 1, 0, 0, NN_PAD_SAME_LOWER, false, &a, &b) == 2 && a == 1 && b == 0);
  CHECK(win1(5, 3, 1, 1, 9, 9, NN_PAD_SAME_UPPER, false, &a, &b) == 5 && a == 1 && b == 1);
  CHECK(win1(5, 3, 1, 2, 0, 0, NN_PAD_SAME_LOWER, false, &a, &b) == 5 && a == 2 && b == 2);
  CHECK(win1(5, 1, 3, 1, 0, 0, NN_PAD_SAME_UPPER, false, &a, &b) == 2 && a == 0 && b == 0);
  /* VALID ignores pads. */
  CHECK(win1(5, 3, 2, 1, 7, 7, NN_PAD_VALID, false, &a, &b) == 2 && a == 0 && b == 0);
  /* Too small, or invalid attributes: refused, never a zero or negative extent. */
  CHECK(win1(2, 3, 1, 1, 0, 0, NN_PAD_NOTSET, false, &a, &b) == -1);
  CHECK(win1(2, 3, 1, 1, 0, 0, NN_PAD_VALID, false, &a, &b) == -1);
  CHECK(win1(5, 3, 0, 1, 0, 0, NN_PAD_NOTSET, false, &a, &b) == -1);
  CHECK(win1(5, 3, 1, 1, -1, 0, NN_PAD_NOTSET, false, &a, &b) == -1);
  CHECK(win1(5, 3, 1, INT64_MAX / 2, 0, 0, NN_PAD_NOTSET, false, &a, &b) == -1);
  CHECK(nn_convt_out(3, 3, 2, 1, 1, 0, 0) == 8);
  CHECK(nn_convt_out(3, 3, 3, 1, 0, 1, 1) == 7);
}

static float *frand_n(int64_t n) {
  float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

/* A random window of nsp dims; pads may be negative for ConvTranspose. */
static void rand_window(struct nn_window *w, int nsp, int64_t max_in) {
  memset(w, 0, sizeof *w);
  w->nsp = nsp;
  for (int d = 0; d < nsp; d++) {
    w->k[d] = 1 + tu_below(3);
    w->stride[d] = 1 + tu_below(3);
    w->dil[d] = 1 + tu_below(2);
    w->pad0[d] = tu_below(3);
    w->pad1[d] = tu_below(3);
    int64_t ek = (w->k[d] - 1) * w->dil[d] + 1;
    w->in[d] = ek + tu_below(max_in);
  }
}

static void conv_case(int nsp, int64_t max_in, bool pointwise_only) {
  struct nn_window w;
  rand_window(&w, nsp, max_in);
  if (pointwise_only)
    for (int d = 0; d < nsp; d++) {
      w.k[d] = w.stride[d] = 1;
      w.pad0[d] = w.pad1[d] = 0;
    }
  enum nn_auto_pad ap = (enum nn_auto_pad)tu_below(4);
  if (pointwise_only) ap = NN_PAD_NOTSET;
  if (!nn_window_out(&w, ap, false)) {
    CHECK_MSG(false, "window refused");
    return;
  }
  int64_t group = 1 + tu_below(3), n = 1 + tu_below(2);
  int64_t cg = 1 + tu_below(4), mg = 1 + tu_below(4);
  if (tu_below(4) == 0) cg = mg = 1; /* depthwise */
  int64_t c = cg * group, m = mg * group;
  int64_t kn = nn_window_numel(w.k, nsp), inn = nn_window_numel(w.in, nsp);
  int64_t pn = nn_window_numel(w.out, nsp);
  float *x = frand_n(n * c * inn), *wt = frand_n(m * cg * kn), *b = frand_n(m);
  float *y = malloc((size_t)(n * m * pn) * sizeof *y), *r = malloc((size_t)(n * m * pn) * sizeof *r);
  int64_t sc = nn_conv_scratch(c, group, &w);
  float *scratch = sc ? malloc((size_t)sc * sizeof *scratch) : NULL;
  bool with_bias = tu_below(2);
  nn_conv_f32(x, wt, with_bias ? b : NULL, y, n, c, m, group, &w, scratch, NULL);
  nn_conv_ref_f32(x, wt, with_bias ? b : NULL, r, n, c, m, group, &w);
  double d = max_diff(y, r, n * m * pn);
  CHECK_MSG(d <= 1e-5, "conv nsp %d group %lld c %lld m %lld: max diff %g", nsp,
            (long long)group, (long long)c, (long long)m, d);
  free(x), free(wt), free(b), free(y), free(r), free(scratch);
}

/* ConvTranspose: a random forward window, read backwards. */
static void convt_case(int nsp) {
  struct nn_window w;
  rand_window(&w, nsp, 6);
  if (!nn_window_out(&w, NN_PAD_NOTSET, false)) return;
  /* Sometimes shift the output window (negative pads: a larger output). */
  if (tu_below(4) == 0)
    for (int d = 0; d < nsp; d++) w.pad0[d] -= 1;
  int64_t group = 1 + tu_below(2), n = 1 + tu_below(2), cg = 1 + tu_below(3), mg = 1 + tu_below(3);
  int64_t c = cg * group, m = mg * group;
  int64_t kn = nn_window_numel(w.k, nsp), yn = nn_window_numel(w.in, nsp);
  int64_t xn = nn_window_numel(w.out, nsp);
  float *x = frand_n(n * c * xn), *wt = frand_n(c * mg * kn), *b = frand_n(m);
  float *y = malloc((size_t)(n * m * yn) * sizeof *y), *r = malloc((size_t)(n * m * yn) * sizeof *r);
  float *scratch = malloc((size_t)nn_convt_scratch(m, group, &w) * sizeof *scratch);
  nn_convt_f32(x, wt, b, y, n, c, m, group, &w, scratch, NULL);
  nn_convt_ref_f32(x, wt, b, r, n, c, m, group, &w);
  double d = max_diff(y, r, n * m * yn);
  CHECK_MSG(d <= 1e-5, "convtranspose nsp %d group %lld: max diff %g", nsp,
            (long long)group, d);
  free(x), free(wt), free(b), free(y), free(r), free(scratch);
}

/* A 3×3 conv on a 256×256 image: the column matrix (27 × 65536 floats)
 * exceeds one scratch tile, so the GEMM runs tile by tile. */
static void conv_tiled(void) {
  struct nn_window w = {.nsp = 2, .in = {256, 256}, .k = {3, 3}, .stride = {1, 1},
                        .dil = {1, 1}, .pad0 = {1, 1}, .pad1 = {1, 1}};
  CHECK(nn_window_out(&w, NN_PAD_NOTSET, false));
  int64_t c = 3, m = 2, pn = 256 * 256;
  int64_t sc = nn_conv_scratch(c, 1, &w);
  CHECK(sc < 27 * pn);
  float *x = frand_n(c * pn), *wt = frand_n(m * c * 9), *b = frand_n(m);
  float *y = malloc((size_t)(m * pn) * sizeof *y), *r = malloc((size_t)(m * pn) * sizeof *r);
  float *scratch = malloc((size_t)sc * sizeof *scratch);
  nn_conv_f32(x, wt, b, y, 1, c, m, 1, &w, scratch, NULL);
  nn_conv_ref_f32(x, wt, b, r, 1, c, m, 1, &w);
  CHECK_NEAR(max_diff(y, r, m * pn), 0, 1e-5);
  free(x), free(wt), free(b), free(y), free(r), free(scratch);
}

/* ConvTranspose through a session: output_shape and SAME_UPPER rules. */
static void convt_model(void) {
  float x[9], wt[18];
  for (int i = 0; i < 9; i++) x[i] = (float)i;
  for (int i = 0; i < 18; i++) wt[i] = 1.0f;
  struct tm m;
  tolk_error err = {0};
  /* output_shape larger than the full result: extended at the end. */
  tm_begin(&m, "ConvTranspose", 17);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 1, 3, 3}, x);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 2, 3, 3}, wt);
  tm_attr_ints(&m, "strides", 2, (int64_t[]){3, 2});
  tm_attr_ints(&m, "output_shape", 2, (int64_t[]){10, 8});
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const int64_t *d = tolk_tensor_dims(m.out[0]);
    CHECK(d[0] == 1 && d[1] == 2 && d[2] == 10 && d[3] == 8);
    const float *y = tolk_tensor_data(m.out[0]);
    CHECK(y[9 * 8 + 7] == 0.0f); /* beyond the full 9×7 result */
    CHECK(y[0] == 0.0f && y[1] == 0.0f && y[2] == 1.0f);
  }
  tm_end(&m);
  /* SAME_UPPER: output = input * stride. */
  tm_begin(&m, "ConvTranspose", 17);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 1, 3, 3}, x);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 2, 3, 3}, wt);
  tm_attr_ints(&m, "strides", 2, (int64_t[]){2, 2});
  tm_attr_str(&m, "auto_pad", "SAME_UPPER");
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const int64_t *d = tolk_tensor_dims(m.out[0]);
    CHECK(d[2] == 6 && d[3] == 6);
  }
  tm_end(&m);
  /* Conv refuses channels that do not match the weights, naming them. */
  tm_begin(&m, "Conv", 13);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 2, 3, 3}, NULL);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 3, 3, 3}, NULL);
  tm_out(&m, 1);
  err.message[0] = '\0';
  CHECK(tm_run(&m, &err) == TOLK_ERR_SHAPE);
  CHECK_MSG(strstr(err.message, "[1, 3, 3, 3]") != NULL, "%s", err.message);
  tm_end(&m);
}

int main(void) {
  tu_seed(0x9e3779b97f4a7c15ull);
  test_geometry();
  for (int i = 0; i < 60; i++) conv_case(1 + (int)tu_below(3), 6, false);
  for (int i = 0; i < 10; i++) conv_case(2, 8, true);
  for (int i = 0; i < 60; i++) convt_case(1 + (int)tu_below(3));
  conv_tiled();
  convt_model();
  return tu_finish("test_ops_conv");
}
