/*
 * metrics.c — the service's figures and their Prometheus text exposition
 * (metrics.h). Counters and histogram buckets are relaxed atomics: writers
 * never wait; only the model labels, changed at load and reload, take a
 * mutex. Times are observed in milliseconds and exposed in seconds, the
 * Prometheus base unit.
 */
#include "metrics.h"
#include "tolk_serve.h"

#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tolk.h"

#define MAX_BOUNDS 16

static const double ms_bounds[] = {1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000};
static const double rows_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
static const double tokens_bounds[] = {16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536};

struct hist {
  const double *bounds;
  size_t nb;
  _Atomic uint64_t counts[MAX_BOUNDS + 1]; /* per bucket, the last is +Inf */
  _Atomic uint64_t count;
  _Atomic uint64_t sum_bits;               /* a double, updated by CAS */
};

/* HTTP status codes the service answers; anything else counts as "other". */
static const int codes[] = {200, 204, 304, 400, 401, 403, 404, 405, 413, 415, 429, 500, 503, 504};
#define N_CODES (sizeof codes / sizeof codes[0])

struct metrics {
  /* the scheduler's part (children; unused in the root) */
  struct hist hists[METRIC_H_BATCH_TOKENS + 1];
  _Atomic uint64_t counters[METRIC_C_REJECTED_QUEUE + 1];
  _Atomic uint64_t gauges[METRIC_G_ROW_BOUND + 1]; /* double bits */
  /* the root's part */
  _Atomic uint64_t requests[EP_COUNT][N_CODES + 1];
  struct hist *latency; /* [EP_COUNT] */
  _Atomic uint64_t rejects[REJ_COUNT];
  _Atomic uint64_t conn_cuts[CONN_CUT_COUNT];
  _Atomic int64_t inflight;
  _Atomic uint64_t reloads_ok, reloads_failed;
  double start_time;
  pthread_mutex_t mu; /* guards the strings below */
  char *names[METRICS_MAX_MODELS], *infos[METRICS_MAX_MODELS], *last_failure;
  struct metrics *models[METRICS_MAX_MODELS];
};

static uint64_t d2u(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double u2d(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static void hist_init(struct hist *h, const double *bounds, size_t nb) {
  h->bounds = bounds;
  h->nb = nb;
}

static void hist_observe(struct hist *h, double v) {
  size_t i = 0;
  while (i < h->nb && v > h->bounds[i]) i++;
  atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
  uint64_t old = atomic_load_explicit(&h->sum_bits, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&h->sum_bits, &old, d2u(u2d(old) + v),
                                                memory_order_relaxed, memory_order_relaxed)) {}
}

static void sched_part_init(struct metrics *m) {
  hist_init(&m->hists[METRIC_H_QUEUE_MS], ms_bounds, sizeof ms_bounds / sizeof *ms_bounds);
  hist_init(&m->hists[METRIC_H_ENCODE_MS], ms_bounds, sizeof ms_bounds / sizeof *ms_bounds);
  hist_init(&m->hists[METRIC_H_DECODE_MS], ms_bounds, sizeof ms_bounds / sizeof *ms_bounds);
  hist_init(&m->hists[METRIC_H_BATCH_ROWS], rows_bounds, sizeof rows_bounds / sizeof *rows_bounds);
  hist_init(&m->hists[METRIC_H_BATCH_TOKENS], tokens_bounds, sizeof tokens_bounds / sizeof *tokens_bounds);
}

void metrics_observe(struct metrics *m, enum metric_hist h, double value) {
  if (m && (unsigned)h <= METRIC_H_BATCH_TOKENS) hist_observe(&m->hists[h], value);
}

void metrics_count(struct metrics *m, enum metric_counter c, uint64_t n) {
  if (m && (unsigned)c <= METRIC_C_REJECTED_QUEUE)
    atomic_fetch_add_explicit(&m->counters[c], n, memory_order_relaxed);
}

void metrics_gauge(struct metrics *m, enum metric_gauge g, double value) {
  if (m && (unsigned)g <= METRIC_G_ROW_BOUND)
    atomic_store_explicit(&m->gauges[g], d2u(value), memory_order_relaxed);
}

/* ------------------------------------------------------------------ root */

const char *metrics_endpoint_name(enum metric_endpoint ep) {
  static const char *const names[EP_COUNT] = {
      "/translate", "/detect", "/languages", "/frontend/settings", "/v2/translate", "/v2/languages",
      "/v2/usage", "/v1/translate", "/health", "/ready", "/metrics", "/openapi.json", "/", "other"};
  return (unsigned)ep < EP_COUNT ? names[ep] : "other";
}

static const char *reject_name(enum metric_reject r) {
  static const char *const names[REJ_COUNT] = {"queue", "rate_limit", "body_size", "auth",
                                               "text_limit", "bad_request", "deadline", "unavailable"};
  return names[r];
}

struct metrics *metrics_create(void) {
  struct metrics *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->latency = calloc(EP_COUNT, sizeof *m->latency);
  if (!m->latency) goto fail;
  for (size_t i = 0; i < EP_COUNT; i++) hist_init(&m->latency[i], ms_bounds, sizeof ms_bounds / sizeof *ms_bounds);
  for (size_t i = 0; i < METRICS_MAX_MODELS; i++) {
    if (!(m->models[i] = calloc(1, sizeof *m->models[i]))) goto fail;
    sched_part_init(m->models[i]);
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  m->start_time = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
  pthread_mutex_init(&m->mu, NULL);
  return m;
fail:
  for (size_t i = 0; i < METRICS_MAX_MODELS; i++) free(m->models[i]);
  free(m->latency);
  free(m);
  return NULL;
}

void metrics_free(struct metrics *m) {
  if (!m) return;
  for (size_t i = 0; i < METRICS_MAX_MODELS; i++) {
    free(m->models[i]);
    free(m->names[i]);
    free(m->infos[i]);
  }
  free(m->last_failure);
  free(m->latency);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

struct metrics *metrics_model(struct metrics *root, size_t slot) {
  return root && slot < METRICS_MAX_MODELS ? root->models[slot] : NULL;
}

static void replace(char **dst, const char *src) {
  free(*dst);
  *dst = src ? strdup(src) : NULL;
}

void metrics_set_model(struct metrics *root, size_t slot, const char *name, const char *info) {
  if (!root || slot >= METRICS_MAX_MODELS) return;
  pthread_mutex_lock(&root->mu);
  replace(&root->names[slot], name);
  replace(&root->infos[slot], info);
  pthread_mutex_unlock(&root->mu);
}

void metrics_reload(struct metrics *root, bool ok, const char *reason) {
  if (!root) return;
  atomic_fetch_add_explicit(ok ? &root->reloads_ok : &root->reloads_failed, 1, memory_order_relaxed);
  if (!ok) {
    pthread_mutex_lock(&root->mu);
    replace(&root->last_failure, reason ? reason : "");
    pthread_mutex_unlock(&root->mu);
  }
}

void metrics_request(struct metrics *root, enum metric_endpoint ep, int status, double total_ms) {
  if (!root || (unsigned)ep >= EP_COUNT) return;
  size_t c = 0;
  while (c < N_CODES && codes[c] != status) c++;
  atomic_fetch_add_explicit(&root->requests[ep][c], 1, memory_order_relaxed);
  hist_observe(&root->latency[ep], total_ms);
}

void metrics_reject(struct metrics *root, enum metric_reject r) {
  if (root && (unsigned)r < REJ_COUNT) atomic_fetch_add_explicit(&root->rejects[r], 1, memory_order_relaxed);
}

void metrics_inflight(struct metrics *root, int delta) {
  if (root) atomic_fetch_add_explicit(&root->inflight, delta, memory_order_relaxed);
}

void metrics_conn_cut(struct metrics *root, enum metric_conn_cut why) {
  if (root && (unsigned)why < CONN_CUT_COUNT) atomic_fetch_add_explicit(&root->conn_cuts[why], 1, memory_order_relaxed);
}

void metrics_label_escape(const char *in, char *out, size_t cap) {
  size_t w = 0;
  if (!cap) return;
  for (; in && *in; in++) {
    const char *rep = *in == '\\' ? "\\\\" : *in == '"' ? "\\\"" : *in == '\n' ? "\\n" : NULL;
    size_t l = rep ? 2 : 1;
    if (w + l >= cap) break;
    if (rep) memcpy(out + w, rep, 2);
    else out[w] = *in;
    w += l;
  }
  out[w] = '\0';
}

/* ------------------------------------------------------------------ rendering */

struct out {
  char *p;
  size_t n, cap;
  bool oom;
};

static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct out *o, const char *fmt, ...) {
  if (o->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->p + o->n, o->cap - o->n, fmt, ap);
    va_end(ap);
    if (k < 0) {
      o->oom = true;
      return;
    }
    if ((size_t)k < o->cap - o->n) {
      o->n += (size_t)k;
      return;
    }
    size_t cap = o->cap * 2 + (size_t)k;
    char *p = realloc(o->p, cap);
    if (!p) {
      o->oom = true;
      return;
    }
    o->p = p;
    o->cap = cap;
  }
}

static void head(struct out *o, const char *name, const char *type, const char *help) {
  emit(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's series; `labels` ("" or `a="b"`) go before le; scale
 * converts observations to the exposed unit. */
static void hist_emit(struct out *o, const char *name, const char *labels, const struct hist *h,
                      double scale) {
  uint64_t cum = 0;
  const char *sep = *labels ? "," : "";
  for (size_t i = 0; i <= h->nb; i++) {
    cum += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
    if (i < h->nb) emit(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, h->bounds[i] * scale, (unsigned long long)cum);
    else emit(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
  }
  const char *lb = *labels ? "{" : "", *rb = *labels ? "}" : "";
  emit(o, "%s_sum%s%s%s %.9g\n", name, lb, labels, rb, u2d(atomic_load_explicit(&h->sum_bits, memory_order_relaxed)) * scale);
  emit(o, "%s_count%s%s%s %llu\n", name, lb, labels, rb, (unsigned long long)cum);
}

static void render_http(struct out *o, struct metrics *m) {
  head(o, "tolk_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (size_t e = 0; e < EP_COUNT; e++)
    for (size_t c = 0; c <= N_CODES; c++) {
      uint64_t v = atomic_load_explicit(&m->requests[e][c], memory_order_relaxed);
      if (!v) continue;
      if (c < N_CODES) emit(o, "tolk_http_requests_total{endpoint=\"%s\",code=\"%d\"} %llu\n", metrics_endpoint_name((enum metric_endpoint)e), codes[c], (unsigned long long)v);
      else emit(o, "tolk_http_requests_total{endpoint=\"%s\",code=\"other\"} %llu\n", metrics_endpoint_name((enum metric_endpoint)e), (unsigned long long)v);
    }
  head(o, "tolk_http_request_duration_seconds", "histogram", "Time from a request's headers to its answer, by endpoint.");
  for (size_t e = 0; e < EP_COUNT; e++) {
    if (!atomic_load_explicit(&m->latency[e].count, memory_order_relaxed) && e != EP_TRANSLATE) continue;
    char labels[64];
    snprintf(labels, sizeof labels, "endpoint=\"%s\"", metrics_endpoint_name((enum metric_endpoint)e));
    hist_emit(o, "tolk_http_request_duration_seconds", labels, &m->latency[e], 1e-3);
  }
  head(o, "tolk_http_requests_in_flight", "gauge", "Requests being read, queued, translated or answered.");
  emit(o, "tolk_http_requests_in_flight %lld\n", (long long)atomic_load_explicit(&m->inflight, memory_order_relaxed));
  head(o, "tolk_http_rejections_total", "counter", "Requests refused before or instead of translation, by reason.");
  for (size_t r = 0; r < REJ_COUNT; r++)
    emit(o, "tolk_http_rejections_total{reason=\"%s\"} %llu\n", reject_name((enum metric_reject)r),
         (unsigned long long)atomic_load_explicit(&m->rejects[r], memory_order_relaxed));
  head(o, "tolk_connections_cut_total", "counter",
       "Connections shut by the service: slow (no whole request within --conn-timeout), shed (waiting while slots ran short).");
  static const char *const cut_names[CONN_CUT_COUNT] = {"slow", "shed"};
  for (size_t c = 0; c < CONN_CUT_COUNT; c++)
    emit(o, "tolk_connections_cut_total{reason=\"%s\"} %llu\n", cut_names[c],
         (unsigned long long)atomic_load_explicit(&m->conn_cuts[c], memory_order_relaxed));
}

static const struct {
  const char *name, *help;
  double scale;
} hist_meta[] = {
    {"tolk_queue_wait_seconds", "Time a sentence waited from submission to admission.", 1e-3},
    {"tolk_encode_seconds", "A sentence's admission: encoder run and first decoder step.", 1e-3},
    {"tolk_decode_seconds", "Time from a sentence's admission to its last token.", 1e-3},
    {"tolk_batch_rows", "Rows (beams count) in one decoder step.", 1},
    {"tolk_batch_tokens", "Rows times padded source length of one decoder step.", 1},
};

static const struct {
  const char *name, *help, *extra;
} counter_meta[] = {
    {"tolk_sentences_total", "Sentences translated.", ""},
    {"tolk_tokens_generated_total", "Tokens generated (best hypothesis, EOS excluded).", ""},
    {"tolk_decoder_steps_total", "Decoder steps run.", ""},
    {"tolk_sentences_dropped_total", "Sentences dropped before they were done, by reason.", "reason=\"cancelled\""},
    {"tolk_sentences_dropped_total", NULL, "reason=\"deadline\""},
    {"tolk_queue_rejected_texts_total", "Texts refused because the queue was full.", ""},
};

static void render_models(struct out *o, struct metrics *m, char labels[][160], const bool *live) {
  for (size_t h = 0; h <= METRIC_H_BATCH_TOKENS; h++) {
    head(o, hist_meta[h].name, "histogram", hist_meta[h].help);
    for (size_t s = 0; s < METRICS_MAX_MODELS; s++)
      if (live[s]) hist_emit(o, hist_meta[h].name, labels[s], &m->models[s]->hists[h], hist_meta[h].scale);
  }
  for (size_t c = 0; c <= METRIC_C_REJECTED_QUEUE; c++) {
    if (counter_meta[c].help) head(o, counter_meta[c].name, "counter", counter_meta[c].help);
    for (size_t s = 0; s < METRICS_MAX_MODELS; s++) {
      if (!live[s]) continue;
      const char *x = counter_meta[c].extra;
      emit(o, "%s{%s%s%s} %llu\n", counter_meta[c].name, labels[s], *x ? "," : "", x,
           (unsigned long long)atomic_load_explicit(&m->models[s]->counters[c], memory_order_relaxed));
    }
  }
  static const char *const gnames[] = {"tolk_queue_depth", "tolk_live_rows", "tolk_batch_row_bound"};
  static const char *const ghelp[] = {"Sentences waiting for admission.", "Rows in the running batch.",
                                      "Rows (beams count) a request's first sentence may join the batch up to "
                                      "(--max-batch-rows, or as measured with --max-step-growth; 0: no bound)."};
  for (size_t g = 0; g <= METRIC_G_ROW_BOUND; g++) {
    head(o, gnames[g], "gauge", ghelp[g]);
    for (size_t s = 0; s < METRICS_MAX_MODELS; s++)
      if (live[s]) emit(o, "%s{%s} %g\n", gnames[g], labels[s], u2d(atomic_load_explicit(&m->models[s]->gauges[g], memory_order_relaxed)));
  }
}

/* The allocator's view of the heap (glibc's mallinfo2): memory in use by the
 * program against memory it holds free. RSS that grows while in-use stays
 * flat is fragmentation, not a leak; Redis reports the same pair. Read before
 * the scrape allocates its own buffers, so a scrape does not count itself. */
struct heap {
  bool known;
  size_t in_use, held_free;
};

static struct heap heap_read(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return (struct heap){true, mi.uordblks + mi.hblkhd, mi.fordblks};
#else
  return (struct heap){false, 0, 0};
#endif
}

bool tolk_serve_heap_in_use(size_t *bytes) {
  const struct heap h = heap_read();
  *bytes = h.in_use;
  return h.known;
}

static void heap_emit(struct out *o, const struct heap *h) {
  if (!h->known) return;
  head(o, "tolk_heap_in_use_bytes", "gauge", "Heap bytes allocated and not freed (malloc's arenas and its mmapped blocks).");
  emit(o, "tolk_heap_in_use_bytes %zu\n", h->in_use);
  head(o, "tolk_heap_free_bytes", "gauge", "Heap bytes malloc holds free in its arenas (not returned to the system).");
  emit(o, "tolk_heap_free_bytes %zu\n", h->held_free);
}

static void render_process(struct out *o, struct metrics *m, const struct heap *h) {
  head(o, "tolk_model_info", "gauge", "The model each slot serves (1), with what it was loaded from.");
  for (size_t s = 0; s < METRICS_MAX_MODELS; s++)
    if (m->infos[s]) emit(o, "tolk_model_info{slot=\"%zu\",%s} 1\n", s, m->infos[s]);
  head(o, "tolk_model_reloads_total", "counter", "SIGHUP reloads, by result (a failed one leaves the old models serving).");
  emit(o, "tolk_model_reloads_total{result=\"ok\"} %llu\n", (unsigned long long)atomic_load(&m->reloads_ok));
  emit(o, "tolk_model_reloads_total{result=\"failed\"} %llu\n", (unsigned long long)atomic_load(&m->reloads_failed));
  if (m->last_failure) {
    char r[400];
    metrics_label_escape(m->last_failure, r, sizeof r);
    head(o, "tolk_model_reload_last_failure_info", "gauge", "Why the last failed reload failed.");
    emit(o, "tolk_model_reload_last_failure_info{reason=\"%s\"} 1\n", r);
  }
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  head(o, "process_resident_memory_bytes", "gauge", "Resident set size, from /proc/self/statm at this scrape.");
  emit(o, "process_resident_memory_bytes %lld\n", (long long)rss * (long long)sysconf(_SC_PAGESIZE));
  heap_emit(o, h);
  head(o, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch.");
  emit(o, "process_start_time_seconds %.3f\n", m->start_time);
  head(o, "tolk_build_info", "gauge", "The tolk version serving.");
  emit(o, "tolk_build_info{version=\"%s\"} 1\n", tolk_version());
}

char *metrics_render(struct metrics *m, size_t *len) {
  struct heap h = heap_read();
  struct out o = {malloc(16384), 0, 16384, false};
  if (!o.p) return NULL;
  o.p[0] = '\0';
  render_http(&o, m);
  char(*labels)[160] = calloc(METRICS_MAX_MODELS, sizeof *labels);
  bool live[METRICS_MAX_MODELS] = {0};
  if (!labels) o.oom = true;
  pthread_mutex_lock(&m->mu);
  for (size_t s = 0; labels && s < METRICS_MAX_MODELS; s++) {
    if (!m->names[s]) continue;
    char n[128];
    metrics_label_escape(m->names[s], n, sizeof n);
    snprintf(labels[s], sizeof labels[s], "slot=\"%zu\",model=\"%s\"", s, n);
    live[s] = true;
  }
  if (labels) render_models(&o, m, labels, live);
  render_process(&o, m, &h);
  pthread_mutex_unlock(&m->mu);
  free(labels);
  if (o.oom) {
    free(o.p);
    return NULL;
  }
  if (len) *len = o.n;
  return o.p;
}
