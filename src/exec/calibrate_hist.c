/*
 * calibrate_hist.c — histograms and the ranges ONNX Runtime's calibrate.py
 * (HistogramCollector) derives from them, for tolk_calibration's Percentile
 * and Entropy methods. The arithmetic follows numpy's where it decides a
 * bin or a threshold: bin edges as numpy.linspace computes them in float32,
 * a value's bin found against those edges (numpy.histogram's correction of
 * its first estimate), cumulative shares in double, the KL divergence of
 * distributions smoothed with numpy's float32 steps. Sums of the divergence
 * are taken in double where numpy sums float32 pairwise, so two windows
 * whose divergences tie to the last bit may be ranked differently — a
 * threshold one histogram bin away, well inside a quantization step.
 */
#include "calibrate_hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool cal_hist_init(struct cal_hist *h, float lo, float hi, int n) {
  if (lo == hi) {
    lo -= 0.5f;
    hi += 0.5f;
  }
  h->n = n;
  h->edges = malloc(((size_t)n + 1) * sizeof *h->edges);
  h->counts = calloc((size_t)n, sizeof *h->counts);
  if (!h->edges || !h->counts) return false;
  float delta = hi - lo, step = delta / (float)n;
  for (int k = 0; k <= n; k++) h->edges[k] = (step == 0.0f ? (float)k / (float)n * delta : (float)k * step) + lo;
  h->edges[n] = hi;
  return true;
}

void cal_hist_free(struct cal_hist *h) {
  free(h->edges);
  free(h->counts);
  h->edges = NULL;
  h->counts = NULL;
}

void cal_hist_add(struct cal_hist *h, const float *x, int64_t count, bool absolute) {
  float lo = h->edges[0], hi = h->edges[h->n], denom = hi - lo;
  int n = h->n;
  for (int64_t k = 0; k < count; k++) {
    float v = absolute ? fabsf(x[k]) : x[k];
    if (!(v >= lo && v <= hi)) continue; /* NaN too */
    int i = (int)((v - lo) / denom * (float)n);
    if (i >= n) i = n - 1;
    if (i > 0 && v < h->edges[i]) i--;
    if (i < n - 1 && v >= h->edges[i + 1]) i++;
    h->counts[i]++;
  }
}

void cal_percentile_range(const struct cal_hist *h, double pct, float min, float max, float *lo, float *hi) {
  int64_t total = 0;
  for (int i = 0; i < h->n; i++) total += h->counts[i];
  double cdf = 0, want = pct / 100.0;
  int idx = h->n;
  for (int i = 0; total && i < h->n; i++) {
    cdf += (double)h->counts[i] / (double)total;
    if (cdf >= want) {
      idx = i;
      break;
    }
  }
  float t = h->edges[idx];
  *lo = -t < min ? min : -t;
  *hi = t > max ? max : t;
}

/* numpy's smooth_distribution in float32: zeros become eps, the mass taken
 * off the others; false when every entry is zero. */
static bool smooth(const int64_t *p, int n, float *out) {
  int zeros = 0;
  for (int i = 0; i < n; i++) zeros += p[i] == 0;
  if (zeros == n) return false;
  double eps1 = 0.0001 * (double)zeros / (double)(n - zeros);
  if (eps1 >= 1.0) return false;
  for (int i = 0; i < n; i++) out[i] = (float)p[i] + (p[i] ? -(float)eps1 : (float)0.0001);
  return true;
}

/* numpy's float32 sum: pairwise, eight accumulators per block of up to
 * 128, so that the divergences rank as ORT ranks them. */
static float sum_f32(const float *x, int n) {
  if (n < 8) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
  }
  if (n <= 128) {
    float r[8];
    int i;
    for (int k = 0; k < 8; k++) r[k] = x[k];
    for (i = 8; i < n - n % 8; i += 8)
      for (int k = 0; k < 8; k++) r[k] += x[i + k];
    float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) s += x[i];
    return s;
  }
  int half = n / 2;
  half -= half % 8;
  return sum_f32(x, half) + sum_f32(x + half, n - half);
}

/* ORT's entropy(p, q): sum of p log(p / q) over the normalized vectors, in
 * float32 as numpy computes it; p is overwritten. */
static double kl(float *p, float *q, int n) {
  float sp = sum_f32(p, n), sq = sum_f32(q, n);
  for (int i = 0; i < n; i++) {
    float a = p[i] / sp, b = q[i] / sq;
    if (!(a > 0 && b > 0)) return INFINITY;
    p[i] = a * logf(a / b);
  }
  return sum_f32(p, n);
}

/* The divergence of the window [start, end) of h quantized into n_quant
 * bins; the scratch arrays hold end - start entries each. */
static double window_kl(const struct cal_hist *h, int start, int end, int n_quant, int64_t *p, int64_t *q,
                        int64_t *quant, float *ps, float *qs) {
  int len = end - start, m = len / n_quant;
  const int64_t *slice = h->counts + start;
  memcpy(p, slice, (size_t)len * sizeof *p);
  for (int i = 0; i < start; i++) p[0] += h->counts[i];
  for (int i = end; i < h->n; i++) p[len - 1] += h->counts[i];
  for (int j = 0; j < n_quant; j++) {
    quant[j] = 0;
    for (int k = j * m; k < j * m + m; k++) quant[j] += slice[k];
  }
  for (int k = n_quant * m; k < len; k++) quant[n_quant - 1] += slice[k];
  memset(q, 0, (size_t)len * sizeof *q);
  for (int j = 0; j < n_quant; j++) {
    int64_t norm = 0;
    for (int k = j * m; k < j * m + m; k++) norm += p[k] != 0;
    /* numpy stores the float quotient into an int64 array: truncated. */
    for (int k = j * m; norm && k < j * m + m; k++) q[k] = (int64_t)((double)quant[j] / (double)norm);
  }
  if (!smooth(p, len, ps) || !smooth(q, len, qs)) return INFINITY;
  return kl(ps, qs, len);
}

bool cal_entropy_range(const struct cal_hist *h, int n_quant, float min, float max, float *lo, float *hi) {
  int zero = h->n / 2, half = n_quant / 2, n = h->n;
  int64_t *p = malloc((size_t)n * sizeof *p), *q = malloc((size_t)n * sizeof *q),
          *quant = malloc((size_t)n_quant * sizeof *quant);
  float *ps = malloc((size_t)n * sizeof *ps), *qs = malloc((size_t)n * sizeof *qs);
  bool ok = p && q && quant && ps && qs;
  /* The first least divergence wins (numpy's argmin); when all are
   * infinite, the first window. */
  double best = INFINITY;
  int best_start = zero - half, best_end = zero + half + 1 < n ? zero + half + 1 : n;
  for (int i = half; ok && i <= zero; i++) {
    int start = zero - i, end = zero + i + 1 < n ? zero + i + 1 : n;
    double d = window_kl(h, start, end, n_quant, p, q, quant, ps, qs);
    if (d < best) best = d, best_start = start, best_end = end;
  }
  free(p);
  free(q);
  free(quant);
  free(ps);
  free(qs);
  float a = h->edges[best_start], b = h->edges[best_end];
  *lo = a < min ? min : a;
  *hi = b > max ? max : b;
  return ok;
}
