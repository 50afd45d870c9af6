/*
 * test_ops_softmax.c — Softmax, LogSoftmax and Hardmax kernels (contiguous
 * rows and strided columns, float with the vectorisable exp, and double)
 * against the all-double reference, including rows with large offsets and
 * single-element rows; then the axis semantics before and from opset 13
 * (2-D coercion vs a single axis) through one-node models.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "ops/nn_cpu.h"
#include "testutil.h"

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "ops_model.h"


static void kernel_cases(void) {
  for (int it = 0; it < 200; it++) {
    int64_t o = 1 + tu_below(4), a = 1 + tu_below(it % 10 == 0 ? 3000 : 40), i = tu_below(2) ? 1 : 1 + tu_below(300);
    if (a > 40) i = 1 + tu_below(3); /* long rows: keep the double reference quick */
    int64_t n = o * a * i;
    double scale = it % 4 == 0 ? 30 : 3, off = it % 5 == 0 ? 1e4 : 0;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    float *r = malloc((size_t)n * sizeof *r);
    double *xd = malloc((size_t)n * sizeof *xd), *yd = malloc((size_t)n * sizeof *yd);
    for (int64_t k = 0; k < n; k++) {
      x[k] = (float)(tu_unit() * scale + off);
      xd[k] = x[k];
    }
    for (int op = 0; op < 3; op++) {
      nn_softmax_f32((enum nn_softmax)op, x, y, a, i, 0, o);
      nn_softmax_f32_ref((enum nn_softmax)op, x, r, o, a, i);
      nn_softmax_f64((enum nn_softmax)op, xd, yd, a, i, 0, o);
      double d = 0, dd = 0;
      for (int64_t k = 0; k < n; k++) {
        d = fmax(d, fabs((double)y[k] - r[k]));
        dd = fmax(dd, fabs(yd[k] - r[k]));
      }
      /* Softmax outputs are <= 1; LogSoftmax is compared in absolute terms
       * too, its values being moderate here. */
      CHECK_MSG(d <= 1e-5 && dd <= 1e-5, "op %d o %lld a %lld i %lld: f32 %g f64 %g", op,
                (long long)o, (long long)a, (long long)i, d, dd);
    }
    free(x), free(y), free(r), free(xd), free(yd);
  }
  /* Rows sum to one. */
  float x[1000], y[1000];
  for (int k = 0; k < 1000; k++) x[k] = (float)(tu_unit() * 20);
  nn_softmax_f32(NN_SOFTMAX, x, y, 1000, 1, 0, 1);
  double s = 0;
  for (int k = 0; k < 1000; k++) s += y[k];
  CHECK_NEAR(s, 1.0, 1e-6);
}

/* A row followed by masked positions (-inf, or the large negative Marian's
 * masks add) gives, bit for bit, the softmax of the row alone, and exact
 * zeros at the masked positions: a padded batch translates as each sentence
 * alone. */
static void padded_rows(void) {
  static const float masks[] = {-INFINITY, -3.4028234663852886e38f, -1.0e9f};
  for (int it = 0; it < 300; it++) {
    int64_t n = 1 + tu_below(70), pad = 1 + tu_below(40);
    float mask = masks[it % 3];
    float *x = malloc((size_t)(n + pad) * sizeof *x), *y = malloc((size_t)(n + pad) * sizeof *y);
    float *alone = malloc((size_t)n * sizeof *alone);
    for (int64_t k = 0; k < n; k++) x[k] = (float)(tu_unit() * 8);
    for (int64_t k = n; k < n + pad; k++) x[k] = mask;
    for (int op = 0; op < 2; op++) {
      nn_softmax_f32((enum nn_softmax)op, x, alone, n, 1, 0, 1);
      nn_softmax_f32((enum nn_softmax)op, x, y, n + pad, 1, 0, 1);
      bool same = memcmp(alone, y, (size_t)n * sizeof *y) == 0, zeros = true;
      for (int64_t k = n; op == NN_SOFTMAX && k < n + pad; k++) zeros &= y[k] == 0.0f;
      CHECK_MSG(same && zeros, "%s op %d: %lld values + %lld masked (%g): prefix %s, masked %s",
                kern_isa_name(kern_isa_active()), op, (long long)n, (long long)pad, (double)mask,
                same ? "same" : "differs", zeros ? "0" : "not 0");
    }
    free(x), free(y), free(alone);
  }
}

static void axis_models(void) {
  struct tm m;
  tolk_error err = {0};
  float x[12];
  for (int k = 0; k < 12; k++) x[k] = (float)k * 0.25f;
  /* Opset 11, axis 1 on [2,3,2]: each row of 6 is one distribution. */
  tm_begin(&m, "Softmax", 11);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 3, 2}, x);
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    double s = 0;
    for (int k = 0; k < 6; k++) s += y[k];
    CHECK_NEAR(s, 1.0, 1e-6);
  }
  tm_end(&m);
  /* Opset 13, axis 1: each column of 3 is one distribution. */
  tm_begin(&m, "Softmax", 13);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 3, 2}, x);
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    CHECK_NEAR(y[0] + y[2] + y[4], 1.0, 1e-6);
    CHECK_NEAR(y[1] + y[3] + y[5], 1.0, 1e-6);
  }
  tm_end(&m);
  /* Opset 13 default axis is -1; Hardmax takes the first maximum. */
  float h[6] = {1, 3, 3, 0, -1, -1};
  tm_begin(&m, "Hardmax", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, h);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    CHECK(y[0] == 0 && y[1] == 1 && y[2] == 0 && y[3] == 1 && y[4] == 0 && y[5] == 0);
  }
  tm_end(&m);
  /* float16 runs through fp32. */
  uint16_t hx[3] = {0x3c00, 0x4000, 0x4200}; /* 1, 2, 3 */
  tm_begin(&m, "LogSoftmax", 13);
  tm_in(&m, TOLK_FLOAT16, 1, (int64_t[]){3}, hx);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) CHECK(tolk_tensor_dtype(m.out[0]) == TOLK_FLOAT16);
  tm_end(&m);
  /* An out-of-range axis is an error. */
  tm_begin(&m, "Softmax", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, x);
  tm_attr_int(&m, "axis", 2);
  tm_out(&m, 1);
  CHECK(tm_run(&m, &err) == TOLK_ERR_INVALID_ARGUMENT);
  tm_end(&m);
}

int main(void) {
  tu_seed(0xda3e39cb94b95bdbull);
  /* Every ISA this machine has: the portable kernels and the AVX2 ones. */
  enum kern_isa best = kern_isa_active();
  for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_AVX512; isa++) {
    if (!kern_isa_force((enum kern_isa)isa)) continue;
    kernel_cases();
    padded_rows();
  }
  kern_isa_force(best);
  axis_models();
  return tu_finish("test_ops_softmax");
}
