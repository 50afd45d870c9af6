/*
 * metrics.h — the service's figures, written by the scheduler and the HTTP
 * handlers from many threads and read by GET /metrics in Prometheus text
 * format. Updates are lock-free (relaxed atomics): a scrape may see one
 * histogram a few observations ahead of another, never a torn value.
 *
 * The first part is what the scheduler uses; the HTTP layer's request
 * counters, latency histograms, rejections and model info follow.
 */
#ifndef TOLK_SERVE_METRICS_H
#define TOLK_SERVE_METRICS_H

#include <stdbool.h>
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
  METRIC_G_LIVE_ROWS,   /* rows in the running batch */
  METRIC_G_ROW_BOUND    /* rows a request's first sentence may join (0: none) */
};

void metrics_observe(struct metrics *m, enum metric_hist h, double value);
void metrics_count(struct metrics *m, enum metric_counter c, uint64_t n);
void metrics_gauge(struct metrics *m, enum metric_gauge g, double value);

/* ------------------------------------------------------------------ the service's side
 * One root `struct metrics` per service holds the HTTP figures; each loaded
 * model slot (the i-th -m folder) has its own child for the scheduler part,
 * kept across reloads so that its counters keep counting. GET /metrics
 * renders them all, the children's series labelled slot="i",model="name". */

#define METRICS_MAX_MODELS 16

enum metric_endpoint {
  EP_TRANSLATE,        /* POST /translate (LibreTranslate) */
  EP_DETECT,           /* POST /detect */
  EP_LANGUAGES,        /* GET /languages */
  EP_FRONTEND_SETTINGS,/* GET /frontend/settings */
  EP_DEEPL_TRANSLATE,  /* POST /v2/translate */
  EP_DEEPL_LANGUAGES,  /* /v2/languages */
  EP_DEEPL_USAGE,      /* /v2/usage */
  EP_NATIVE_TRANSLATE, /* POST /v1/translate */
  EP_HEALTH,
  EP_READY,
  EP_METRICS,
  EP_OPENAPI,
  EP_WEB,              /* GET / and the page's files */
  EP_OTHER,            /* unknown paths (404) */
  EP_COUNT
};

enum metric_reject {
  REJ_QUEUE,       /* scheduler queue full (503) */
  REJ_RATE_LIMIT,  /* token bucket empty (429) */
  REJ_BODY_SIZE,   /* over --max-body (413) */
  REJ_AUTH,        /* missing or unknown API key (400/401/403) */
  REJ_TEXT_LIMIT,  /* over --max-chars / --max-texts / a key's chars (400) */
  REJ_BAD_REQUEST, /* malformed body or fields (400), wrong media type (415) */
  REJ_DEADLINE,    /* past --timeout (504) */
  REJ_UNAVAILABLE, /* loading or draining (503) */
  REJ_COUNT
};

/* Connections the service cut (src/serve/watch.h). */
enum metric_conn_cut {
  CONN_CUT_SLOW,   /* no whole request within --conn-timeout */
  CONN_CUT_SHED,   /* waiting for a request while slots ran short */
  CONN_CUT_COUNT
};

/* The endpoint's path as the metrics label it ("/translate"). */
const char *metrics_endpoint_name(enum metric_endpoint ep);

struct metrics *metrics_create(void);
void metrics_free(struct metrics *root);

/* The scheduler figures of model slot `slot` (< METRICS_MAX_MODELS). */
struct metrics *metrics_model(struct metrics *root, size_t slot);

/* Names slot's series (`name`: the folder's base name) and sets its info
 * gauge's labels, `info`: pre-escaped label pairs (key="value",…), or NULL
 * to drop it. Called at load and at each successful reload. */
void metrics_set_model(struct metrics *root, size_t slot, const char *name, const char *info);

/* A reload's outcome; `reason` (failures) is kept for the last-failure gauge. */
void metrics_reload(struct metrics *root, bool ok, const char *reason);

void metrics_request(struct metrics *root, enum metric_endpoint ep, int status, double total_ms);
void metrics_reject(struct metrics *root, enum metric_reject r);
void metrics_inflight(struct metrics *root, int delta);
void metrics_conn_cut(struct metrics *root, enum metric_conn_cut why);

/* The whole Prometheus text exposition (format 0.0.4), RSS read from
 * /proc/self/statm now. A new string the caller frees; NULL when out of
 * memory. */
char *metrics_render(struct metrics *root, size_t *len);

/* Escapes a label value (\\, \", \n) into out[cap], cut to fit. */
void metrics_label_escape(const char *in, char *out, size_t cap);

#endif /* TOLK_SERVE_METRICS_H */
