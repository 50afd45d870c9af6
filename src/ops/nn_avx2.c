/*
 * nn_avx2.c — AVX2 + FMA versions of the row kernels on the translation
 * model's path: LayerNormalization / RMS rows and Softmax / LogSoftmax rows.
 * CMake compiles this file with -mavx2 -mfma; norm_cpu.c and softmax_cpu.c
 * call it only when kern_isa_active() says the CPU has AVX2 (TOLK_ISA=scalar
 * forces the portable path), and tests compare both with the references.
 *
 * Statistics stay in double (floats are widened four at a time), so the
 * results match the scalar kernels to float rounding; the affine step uses
 * FMA. Softmax takes exp from kern_vm_f32 (vmath.h: |rel. error| < 3e-7).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "nn_avx2.h"

static inline double hsum_pd(__m256d v) {
  __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
  lo = _mm_add_pd(lo, hi);
  return _mm_cvtsd_f64(_mm_add_sd(lo, _mm_unpackhi_pd(lo, lo)));
}

/* Sum of x in double. */
static double sum_pd(const float *x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 u = _mm256_loadu_ps(x + j), v = _mm256_loadu_ps(x + j + 8);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(u)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1)));
    a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double s = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
  for (; j < n; j++) s += (double)x[j];
  return s;
}

/* Sum of (x - m)^2 in double. */
static double sqdev_pd(const float *x, int64_t n, double m) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, mv = _mm256_set1_pd(m);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 u = _mm256_loadu_ps(x + j), v = _mm256_loadu_ps(x + j + 8);
    __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(u)), mv);
    __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(u, 1)), mv);
    __m256d d2 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), mv);
    __m256d d3 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), mv);
    a0 = _mm256_fmadd_pd(d0, d0, a0);
    a1 = _mm256_fmadd_pd(d1, d1, a1);
    a2 = _mm256_fmadd_pd(d2, d2, a2);
    a3 = _mm256_fmadd_pd(d3, d3, a3);
  }
  double s = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
  for (; j < n; j++) {
    double d = (double)x[j] - m;
    s += d * d;
  }
  return s;
}

void nn_layernorm_f32_avx2(const float *x, float *y, int64_t rows, int64_t n,
                           const float *scale, const float *bias, float eps, float *mean,
                           float *inv_std) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    double m = sum_pd(xr, n) / (double)n;
    double inv = 1.0 / sqrt(sqdev_pd(xr, n, m) / (double)n + (double)eps);
    if (mean) mean[r] = (float)m;
    if (inv_std) inv_std[r] = (float)inv;
    /* Mean as float + float remainder, as in norm_cpu.c. */
    float mf = (float)m, ml = (float)(m - (double)mf), invf = (float)inv;
    __m256 mv = _mm256_set1_ps(mf), lv = _mm256_set1_ps(ml), iv = _mm256_set1_ps(invf);
    int64_t j = 0;
    if (bias) {
      for (; j + 8 <= n; j += 8) {
        __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), lv);
        __m256 t = _mm256_mul_ps(d, iv);
        _mm256_storeu_ps(yr + j, _mm256_fmadd_ps(t, _mm256_loadu_ps(scale + j),
                                                 _mm256_loadu_ps(bias + j)));
      }
      for (; j < n; j++) yr[j] = fmaf(((xr[j] - mf) - ml) * invf, scale[j], bias[j]);
    } else {
      for (; j + 8 <= n; j += 8) {
        __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), lv);
        _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_mul_ps(d, iv), _mm256_loadu_ps(scale + j)));
      }
      for (; j < n; j++) yr[j] = ((xr[j] - mf) - ml) * invf * scale[j];
    }
  }
}

void nn_rmsnorm_f32_avx2(const float *x, float *y, int64_t rows, int64_t n,
                         const float *scale, float eps) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    float invf = (float)(1.0 / sqrt(sqdev_pd(xr, n, 0.0) / (double)n + (double)eps));
    __m256 iv = _mm256_set1_ps(invf);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
      _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + j), iv),
                                             _mm256_loadu_ps(scale + j)));
    for (; j < n; j++) yr[j] = xr[j] * invf * scale[j];
  }
}

/* Softmax of one row. A row must come out the same whatever padding
 * follows it (a padded batch: masked positions, whose exp is 0): every
 * element gets the same exp (kern_vm_f32, which underflows to exactly 0
 * rather than stopping at FLT_MIN) and element j is always summed into lane
 * j % 8, the tail through a masked load, so appended zeros leave every lane
 * and the fixed reduction order unchanged. */
void nn_softmax_row_f32_avx2(bool log_softmax, const float *x, float *y, int64_t n) {
  int64_t j = 0;
  float m = x[0];
  if (n >= 8) {
    __m256 mv = _mm256_loadu_ps(x);
    for (j = 8; j + 8 <= n; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + j));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    m = _mm_cvtss_f32(h);
  }
  for (; j < n; j++)
    if (x[j] > m) m = x[j];
  __m256 mv = _mm256_set1_ps(m);
  for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, _mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
  for (; j < n; j++) y[j] = x[j] - m;
  kern_vm_f32(KERN_VM_EXP, n, y, y);
  __m256d s0 = _mm256_setzero_pd(), s1 = s0;
  for (j = 0; j + 8 <= n; j += 8) {
    __m256 e = _mm256_loadu_ps(y + j);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  if (j < n) {
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - j)), lane);
    __m256 e = _mm256_maskload_ps(y + j, live); /* zeros past n */
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  double s = hsum_pd(_mm256_add_pd(s0, s1));
  if (!log_softmax) {
    __m256 iv = _mm256_set1_ps((float)(1.0 / s));
    for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), iv));
    for (; j < n; j++) y[j] *= (float)(1.0 / s);
  } else {
    float ls = (float)log(s);
    __m256 lv = _mm256_set1_ps(ls);
    for (j = 0; j + 8 <= n; j += 8)
      _mm256_storeu_ps(y + j, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv), lv));
    for (; j < n; j++) y[j] = (x[j] - m) - ls;
  }
}
#endif
