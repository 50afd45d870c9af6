/*
 * metrics.h — the service's figures, written by the scheduler and the HTTP
 * handlers from many threads and read by GET /metrics in Prometheus text
 * format. Updates are lock-free (relaxed atomics): a scrape may see one
 * histogram a few observations ahead of another, never a torn value.
 *
 * This is the part the scheduler uses; the HTTP layer adds its own request
 * counters and latency histograms below.
 */
#ifndef TOLK_SERVE_METRICS_H
#define TOLK_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct metrics;

/* Histograms the scheduler observes: per sentence (times in ms) and per
 * decoder step (the batch it ran). */
enum metric_hist {
  METRIC_H_QUEUE_MS,    /* submitted → admitted into the batch */
  METRIC_H_ENCODE_MS,   /* the admission's encoder run and first decoder step */
  METRIC_H_DECODE_MS,   /* admitted → finished */
  METRIC_H_BATCH_ROWS,  /* rows (beams count) in one decoder step */
  METRIC_H_BATCH_TOKENS /* rows × padded source length of that step */
};

enum metric_counter {
  METRIC_C_SENTENCES,   /* sentences translated */
  METRIC_C_TOKENS,      /* tokens generated (best hypothesis, EOS excluded) */
  METRIC_C_STEPS,       /* decoder steps run */
  METRIC_C_CANCELLED,   /* sentences dropped: client gone or cancelled */
  METRIC_C_DEADLINE,    /* sentences dropped past their deadline */
  METRIC_C_REJECTED_QUEUE /* texts refused because the queue was full */
};

enum metric_gauge {
  METRIC_G_QUEUE_DEPTH, /* sentences waiting for admission */
  METRIC_G_LIVE_ROWS    /* rows in the running batch */
};

void metrics_observe(struct metrics *m, enum metric_hist h, double value);
void metrics_count(struct metrics *m, enum metric_counter c, uint64_t n);
void metrics_gauge(struct metrics *m, enum metric_gauge g, double value);

#endif /* TOLK_SERVE_METRICS_H */
