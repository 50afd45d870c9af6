/*
 * norm_cpu.c — normalisation kernels (see nn_cpu.h): row moments and
 * LayerNormalization, whose rows of 512 are on the translation model's hot
 * path. Statistics are exact to double precision (two passes, double
 * accumulators); the affine step is plain float arithmetic that vectorises.
 * With AVX2 the row kernels of nn_avx2.c take over.
 */
#include <math.h>

#include "nn_avx2.h"
#include "nn_cpu.h"

/* Sum of x[0..n) in double. Eight independent accumulators: the compiler
 * turns the fixed-width inner loop into packed float->double conversions and
 * adds, and the sum stays exact to double rounding. */
static double sum_f32(const float *x, int64_t n) {
  double acc[8] = {0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++) acc[l] += (double)x[j + l];
  double s = 0;
  for (; j < n; j++) s += (double)x[j];
  return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Sum of (x - m)^2 in double. */
static double sqdev_f32(const float *x, int64_t n, double m) {
  double acc[8] = {0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; l++) {
      double d = (double)x[j + l] - m;
      acc[l] += d * d;
    }
  double s = 0;
  for (; j < n; j++) {
    double d = (double)x[j] - m;
    s += d * d;
  }
  return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void nn_moments_f32(const float *x, int64_t n, double *mean, double *var) {
  if (n <= 0) {
    *mean = NAN;
    *var = NAN;
    return;
  }
  double m = sum_f32(x, n) / (double)n;
  *mean = m;
  *var = sqdev_f32(x, n, m) / (double)n;
}

void nn_moments_f64(const double *x, int64_t n, double *mean, double *var) {
  if (n <= 0) {
    *mean = NAN;
    *var = NAN;
    return;
  }
  double s = 0;
  for (int64_t j = 0; j < n; j++) s += x[j];
  double m = s / (double)n, q = 0;
  for (int64_t j = 0; j < n; j++) q += (x[j] - m) * (x[j] - m);
  *mean = m;
  *var = q / (double)n;
}

void nn_layernorm_f32(const float *x, float *y, int64_t rows, int64_t n, const float *scale,
                      const float *bias, float eps, float *mean, float *inv_std) {
#if NN_HAVE_AVX2
  if (nn_use_avx2()) {
    nn_layernorm_f32_avx2(x, y, rows, n, scale, bias, eps, mean, inv_std);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    double m, v;
    nn_moments_f32(xr, n, &m, &v);
    double inv = 1.0 / sqrt(v + (double)eps);
    if (mean) mean[r] = (float)m;
    if (inv_std) inv_std[r] = (float)inv;
    /* The mean as float plus its float remainder: x - hi is exact when x is
     * near the mean (Sterbenz), so a large common offset cancels exactly
     * instead of leaving the mean's rounding error in every output. */
    float mf = (float)m, ml = (float)(m - (double)mf), invf = (float)inv;
    if (bias)
      for (int64_t j = 0; j < n; j++) yr[j] = ((xr[j] - mf) - ml) * invf * scale[j] + bias[j];
    else
      for (int64_t j = 0; j < n; j++) yr[j] = ((xr[j] - mf) - ml) * invf * scale[j];
  }
}

void nn_layernorm_f32_ref(const float *x, float *y, int64_t rows, int64_t n,
                          const float *scale, const float *bias, float eps, float *mean,
                          float *inv_std) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += xr[j];
    double m = s / (double)n, q = 0;
    for (int64_t j = 0; j < n; j++) q += ((double)xr[j] - m) * ((double)xr[j] - m);
    double inv = 1.0 / sqrt(q / (double)n + (double)eps);
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = (float)(((double)xr[j] - m) * inv * scale[j] + (bias ? bias[j] : 0.0));
    if (mean) mean[r] = (float)m;
    if (inv_std) inv_std[r] = (float)inv;
  }
}

void nn_layernorm_f64(const double *x, double *y, int64_t rows, int64_t n,
                      const double *scale, const double *bias, double eps, double *mean,
                      double *inv_std) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * n;
    double m, v;
    nn_moments_f64(xr, n, &m, &v);
    double inv = 1.0 / sqrt(v + eps);
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = (xr[j] - m) * inv * scale[j] + (bias ? bias[j] : 0.0);
    if (mean) mean[r] = m;
    if (inv_std) inv_std[r] = inv;
  }
}

void nn_rmsnorm_f32(const float *x, float *y, int64_t rows, int64_t n, const float *scale,
                    float eps) {
#if NN_HAVE_AVX2
  if (nn_use_avx2()) {
    nn_rmsnorm_f32_avx2(x, y, rows, n, scale, eps);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    double inv = 1.0 / sqrt(sqdev_f32(xr, n, 0.0) / (double)(n ? n : 1) + (double)eps);
    float invf = (float)inv;
    for (int64_t j = 0; j < n; j++) yr[j] = xr[j] * invf * scale[j];
  }
}
