/*
 * test_ops_norm.c — LayerNormalization's row kernel against its double
 * reference (rows of 512 as in the translation model, odd lengths, rows with
 * a large common offset where a one-pass variance would cancel), the RMS
 * kernel, and the normalisation ops through one-node models: LayerNorm's
 * Mean / InvStdDev outputs and broadcast scale, BatchNorm inference,
 * GroupNorm's per-group (18) vs per-channel (21) parameters,
 * InstanceNorm and MeanVarianceNormalization.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kern/kern.h"
#include "ops/nn_cpu.h"
#include "testutil.h"

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "ops_model.h"


static void layernorm_kernel(void) {
  static const int64_t lens[] = {512, 512, 1, 7, 100, 2048};
  for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
    int64_t n = lens[t], rows = 1 + tu_below(30);
    double off = t == 1 ? 1000.0 : 0.0; /* large mean, small spread */
    float *x = malloc((size_t)(rows * n) * sizeof *x), *y = malloc((size_t)(rows * n) * sizeof *y);
    float *r = malloc((size_t)(rows * n) * sizeof *r), *sc = malloc((size_t)n * sizeof *sc);
    float *bi = malloc((size_t)n * sizeof *bi);
    float m1[32], m2[32], i1[32], i2[32];
    for (int64_t k = 0; k < rows * n; k++) x[k] = (float)(off + tu_unit() * 2);
    for (int64_t k = 0; k < n; k++) {
      sc[k] = (float)(1 + tu_unit() * 0.5);
      bi[k] = (float)tu_unit();
    }
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      nn_layernorm_f32(x, y, rows, n, sc, with_bias ? bi : NULL, 1e-5f, m1, i1);
      nn_layernorm_f32_ref(x, r, rows, n, sc, with_bias ? bi : NULL, 1e-5f, m2, i2);
      double d = 0, dm = 0;
      for (int64_t k = 0; k < rows * n; k++) d = fmax(d, fabs((double)y[k] - r[k]));
      for (int64_t k = 0; k < rows; k++)
        dm = fmax(dm, fabs((double)m1[k] - m2[k]) + fabs((double)i1[k] - i2[k]) / (1 + i2[k]));
      CHECK_MSG(d <= 1e-5 && dm <= 1e-6, "layernorm n %lld offset %g: y %g stats %g",
                (long long)n, off, d, dm);
    }
    /* RMS: y = x / sqrt(mean(x^2) + eps) * scale. */
    nn_rmsnorm_f32(x, y, rows, n, sc, 1e-5f);
    double d = 0;
    for (int64_t rr = 0; rr < rows; rr++) {
      double q = 0;
      for (int64_t k = 0; k < n; k++) q += (double)x[rr * n + k] * x[rr * n + k];
      double inv = 1 / sqrt(q / (double)n + 1e-5);
      for (int64_t k = 0; k < n; k++)
        d = fmax(d, fabs(y[rr * n + k] - x[rr * n + k] * inv * sc[k]));
    }
    CHECK_MSG(d <= 1e-5, "rmsnorm n %lld: %g", (long long)n, d);
    free(x), free(y), free(r), free(sc), free(bi);
  }
}

static void layernorm_model(void) {
  struct tm m;
  tolk_error err = {0};
  float x[24], sc[4], b[4];
  for (int k = 0; k < 24; k++) x[k] = (float)(k % 7) - 2.0f;
  for (int k = 0; k < 4; k++) {
    sc[k] = 0.5f + (float)k;
    b[k] = (float)k - 1.0f;
  }
  /* [2,3,4], axis -1, with Mean and InvStdDev outputs of shape [2,3,1]. */
  tm_begin(&m, "LayerNormalization", 17);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 3, 4}, x);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){4}, sc);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){4}, b);
  tm_attr_float(&m, "epsilon", 1e-3f);
  tm_out(&m, 3);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[2]) {
    const float *y = tolk_tensor_data(m.out[0]), *mean = tolk_tensor_data(m.out[1]);
    const float *inv = tolk_tensor_data(m.out[2]);
    const int64_t *md = tolk_tensor_dims(m.out[1]);
    CHECK(tolk_tensor_rank(m.out[1]) == 3 && md[0] == 2 && md[1] == 3 && md[2] == 1);
    for (int r = 0; r < 6; r++) {
      double s = 0, q = 0;
      for (int k = 0; k < 4; k++) s += x[r * 4 + k];
      s /= 4;
      for (int k = 0; k < 4; k++) q += (x[r * 4 + k] - s) * (x[r * 4 + k] - s);
      double iv = 1 / sqrt(q / 4 + 1e-3);
      CHECK_NEAR(mean[r], s, 1e-6);
      CHECK_NEAR(inv[r], iv, 1e-5);
      for (int k = 0; k < 4; k++) CHECK_NEAR(y[r * 4 + k], (x[r * 4 + k] - s) * iv * sc[k] + b[k], 1e-5);
    }
  }
  tm_end(&m);
  /* axis 1 normalises [3,4] rows; a scale of shape [4] broadcasts over them. */
  tm_begin(&m, "LayerNormalization", 17);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 3, 4}, x);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){4}, sc);
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    double s = 0, q = 0;
    for (int k = 0; k < 12; k++) s += x[k];
    s /= 12;
    for (int k = 0; k < 12; k++) q += (x[k] - s) * (x[k] - s);
    double iv = 1 / sqrt(q / 12 + 1e-5);
    for (int k = 0; k < 12; k++) CHECK_NEAR(y[k], (x[k] - s) * iv * sc[k % 4], 1e-5);
  }
  tm_end(&m);
  /* A scale that does not broadcast is refused with the shapes. */
  tm_begin(&m, "LayerNormalization", 17);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 3, 4}, x);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){3}, sc);
  tm_out(&m, 1);
  CHECK(tm_run(&m, &err) == TOLK_ERR_SHAPE);
  tm_end(&m);
}

static void other_models(void) {
  struct tm m;
  tolk_error err = {0};
  float x[16];
  for (int k = 0; k < 16; k++) x[k] = (float)((k * 5) % 16) * 0.5f;
  /* BatchNorm inference on [1,2,2,4]. */
  float sc[2] = {2, 0.5f}, b[2] = {1, -1}, mean[2] = {3, 1}, var[2] = {4, 0.25f};
  tm_begin(&m, "BatchNormalization", 15);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 2, 2, 4}, x);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, sc);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, b);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, mean);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, var);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    for (int k = 0; k < 16; k++) {
      int c = k / 8;
      CHECK_NEAR(y[k], (x[k] - mean[c]) / sqrt(var[c] + 1e-5) * sc[c] + b[c], 1e-5);
    }
  }
  tm_end(&m);
  /* GroupNorm: 4 channels in 2 groups; parameters per group at 18, per
   * channel at 21. */
  float gs[4] = {1, 2, 3, 4}, gb[4] = {0, 1, 0, -1};
  for (int v = 0; v < 2; v++) {
    tm_begin(&m, "GroupNormalization", v ? 21 : 18);
    tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 4, 2, 2}, x);
    tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){v ? 4 : 2}, gs);
    tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){v ? 4 : 2}, gb);
    tm_attr_int(&m, "num_groups", 2);
    tm_out(&m, 1);
    CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
    if (m.out[0]) {
      const float *y = tolk_tensor_data(m.out[0]);
      for (int g = 0; g < 2; g++) {
        double s = 0, q = 0;
        for (int k = 0; k < 8; k++) s += x[g * 8 + k];
        s /= 8;
        for (int k = 0; k < 8; k++) q += (x[g * 8 + k] - s) * (x[g * 8 + k] - s);
        double iv = 1 / sqrt(q / 8 + 1e-5);
        for (int k = 0; k < 8; k++) {
          int p = v ? g * 2 + k / 4 : g;
          CHECK_NEAR(y[g * 8 + k], (x[g * 8 + k] - s) * iv * gs[p] + gb[p], 1e-5);
        }
      }
    }
    tm_end(&m);
  }
  /* InstanceNorm: each (n, c) plane to zero mean, unit variance. */
  float one[4] = {1, 1, 1, 1}, zero[4] = {0, 0, 0, 0};
  tm_begin(&m, "InstanceNormalization", 6);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){1, 4, 4}, x);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){4}, one);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){4}, zero);
  tm_attr_float(&m, "epsilon", 0);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    for (int c = 0; c < 4; c++) {
      double s = 0, q = 0;
      for (int k = 0; k < 4; k++) s += y[c * 4 + k];
      for (int k = 0; k < 4; k++) q += y[c * 4 + k] * y[c * 4 + k];
      CHECK_NEAR(s, 0, 1e-5);
      CHECK_NEAR(q / 4, 1, 1e-4);
    }
  }
  tm_end(&m);
  /* MVN over axes [0, 2, 3] (the default) of [2,2,2,2]. */
  tm_begin(&m, "MeanVarianceNormalization", 13);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){2, 2, 2, 2}, x);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    for (int c = 0; c < 2; c++) {
      double s = 0;
      for (int nn = 0; nn < 2; nn++)
        for (int k = 0; k < 4; k++) s += y[nn * 8 + c * 4 + k];
      CHECK_NEAR(s, 0, 1e-5);
    }
  }
  tm_end(&m);
}

int main(void) {
  tu_seed(0x6a09e667f3bcc909ull);
  /* Every ISA this machine has: the portable kernels and the AVX2 ones. */
  enum kern_isa best = kern_isa_active();
  for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_AVX512; isa++) {
    if (!kern_isa_force((enum kern_isa)isa)) continue;
    layernorm_kernel();
  }
  kern_isa_force(best);
  layernorm_model();
  other_models();
  return tu_finish("test_ops_norm");
}
