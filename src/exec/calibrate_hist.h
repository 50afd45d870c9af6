/*
 * calibrate_hist.h — the histogram methods of tolk_calibration
 * (calibrate_hist.c): a tensor's values binned as numpy.histogram bins them,
 * and the Percentile and Entropy (KL divergence) ranges ONNX Runtime's
 * calibrate.py derives from such a histogram.
 */
#ifndef TOLK_EXEC_CALIBRATE_HIST_H
#define TOLK_EXEC_CALIBRATE_HIST_H

#include <stdbool.h>
#include <stdint.h>

struct cal_hist {
  int n;           /* bins */
  float *edges;    /* n + 1, as numpy.linspace makes them in float32 */
  int64_t *counts; /* n */
};

/* n equal bins over [lo, hi] (a zero-width range widened by 0.5 each side,
 * as numpy does); false on out of memory. */
bool cal_hist_init(struct cal_hist *h, float lo, float hi, int n);

/* Counts x[0..count) (their absolute values when `absolute`): a value falls
 * in bin i when edges[i] <= v < edges[i + 1], the last bin also holding the
 * last edge; values outside the edges are not counted. */
void cal_hist_add(struct cal_hist *h, const float *x, int64_t count, bool absolute);

void cal_hist_free(struct cal_hist *h);

/* ORT's symmetric Percentile on a histogram of absolute values: the first
 * edge where the cumulative share reaches pct/100 gives [-t, t], each end
 * clipped to the observed [min, max]. */
void cal_percentile_range(const struct cal_hist *h, double pct, float min, float max, float *lo, float *hi);

/* ORT's Entropy on a histogram of values over [-t, t]: of the windows
 * centred on zero from n_quant bins wide to all bins, the one whose
 * quantization into n_quant bins loses the least (KL divergence of the
 * smoothed distributions), clipped to the observed [min, max]. False on
 * out of memory. */
bool cal_entropy_range(const struct cal_hist *h, int n_quant, float min, float max, float *lo, float *hi);

#endif /* TOLK_EXEC_CALIBRATE_HIST_H */
