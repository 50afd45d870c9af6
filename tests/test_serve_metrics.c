/*
 * test_serve_metrics.c — src/serve/metrics.c renders valid Prometheus text:
 * every sample line is `name{labels} value` of a family announced by # HELP
 * and # TYPE before it, histogram buckets are cumulative and end with +Inf
 * equal to _count, times are in seconds, label values are escaped, and
 * concurrent writers lose no observation.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/metrics.h"
#include "testutil.h"

#define HAS(text, s) CHECK_MSG(strstr((text), (s)) != NULL, "metrics lack '%s'", (s))

/* Each sample's family must have been typed before it. */
static void well_formed(const char *text) {
  char typed[256][96];
  size_t n_typed = 0;
  const char *p = text;
  int line = 0;
  while (*p) {
    const char *nl = strchr(p, '\n');
    CHECK(nl != NULL);
    if (!nl) break;
    line++;
    size_t len = (size_t)(nl - p);
    char l[1024];
    snprintf(l, sizeof l, "%.*s", (int)(len < sizeof l ? len : sizeof l - 1), p);
    if (!strncmp(l, "# TYPE ", 7)) {
      char name[96], type[32];
      CHECK(sscanf(l + 7, "%95s %31s", name, type) == 2);
      CHECK(!strcmp(type, "counter") || !strcmp(type, "gauge") || !strcmp(type, "histogram"));
      if (n_typed < 256) snprintf(typed[n_typed++], sizeof typed[0], "%s", name);
    } else if (strncmp(l, "# HELP ", 7)) {
      size_t k = 0;
      while (isalnum((unsigned char)l[k]) || l[k] == '_' || l[k] == ':') k++;
      CHECK_MSG(k > 0, "line %d: %s", line, l);
      char name[96];
      snprintf(name, sizeof name, "%.*s", (int)k, l);
      bool found = false;
      for (size_t t = 0; t < n_typed && !found; t++) {
        size_t tl = strlen(typed[t]);
        found = !strncmp(name, typed[t], tl) &&
                (!name[tl] || !strcmp(name + tl, "_bucket") || !strcmp(name + tl, "_sum") || !strcmp(name + tl, "_count"));
      }
      CHECK_MSG(found, "line %d: %s has no # TYPE", line, name);
      const char *v = l + k;
      if (*v == '{') {
        v = strstr(v, "} ");
        CHECK_MSG(v != NULL, "line %d: %s", line, l);
        if (!v) break;
        v++;
      }
      CHECK_MSG(*v == ' ', "line %d: %s", line, l);
      char *end;
      strtod(v + 1, &end);
      CHECK_MSG(*end == '\0' || !strcmp(v + 1, "+Inf"), "line %d: value of %s", line, l);
    }
    p = nl + 1;
  }
}

struct writer {
  struct metrics *m;
  int n;
};

static void *write_many(void *arg) {
  struct writer *w = arg;
  for (int i = 0; i < w->n; i++) {
    metrics_observe(w->m, METRIC_H_QUEUE_MS, 3);
    metrics_count(w->m, METRIC_C_SENTENCES, 1);
  }
  return NULL;
}

int main(void) {
  struct metrics *root = metrics_create();
  CHECK(root != NULL);
  struct metrics *m0 = metrics_model(root, 0);
  CHECK(metrics_model(root, METRICS_MAX_MODELS) == NULL);
  metrics_set_model(root, 0, "demo \"en-zh\"", "model=\"demo\",source=\"en\",int8=\"1\"");
  metrics_observe(m0, METRIC_H_QUEUE_MS, 0.5);
  metrics_observe(m0, METRIC_H_QUEUE_MS, 7);
  metrics_observe(m0, METRIC_H_QUEUE_MS, 1e9);
  metrics_observe(m0, METRIC_H_BATCH_ROWS, 4);
  metrics_count(m0, METRIC_C_TOKENS, 12);
  metrics_count(m0, METRIC_C_DEADLINE, 2);
  metrics_gauge(m0, METRIC_G_QUEUE_DEPTH, 5);
  metrics_request(root, EP_TRANSLATE, 200, 12);
  metrics_request(root, EP_TRANSLATE, 503, 1);
  metrics_request(root, EP_OTHER, 418, 1);
  metrics_reject(root, REJ_QUEUE);
  metrics_reject(root, REJ_RATE_LIMIT);
  metrics_inflight(root, 2);
  metrics_inflight(root, -1);
  metrics_reload(root, true, NULL);
  metrics_reload(root, false, "folder x: \"checksum\" mismatch\nline two");

  size_t len;
  char *t = metrics_render(root, &len);
  CHECK(t && len == strlen(t));
  if (t) {
    well_formed(t);
    HAS(t, "tolk_http_requests_total{endpoint=\"/translate\",code=\"200\"} 1\n");
    HAS(t, "tolk_http_requests_total{endpoint=\"/translate\",code=\"503\"} 1\n");
    HAS(t, "tolk_http_requests_total{endpoint=\"other\",code=\"other\"} 1\n");
    HAS(t, "tolk_http_request_duration_seconds_bucket{endpoint=\"/translate\",le=\"0.025\"} 2\n");
    HAS(t, "tolk_http_rejections_total{reason=\"queue\"} 1\n");
    HAS(t, "tolk_http_rejections_total{reason=\"rate_limit\"} 1\n");
    HAS(t, "tolk_http_rejections_total{reason=\"body_size\"} 0\n");
    HAS(t, "tolk_http_requests_in_flight 1\n");
    /* Cumulative buckets in seconds: 0.5 ms ≤ 1 ms, 7 ms ≤ 10 ms, 1e9 ms only in +Inf. */
    HAS(t, "tolk_queue_wait_seconds_bucket{slot=\"0\",model=\"demo \\\"en-zh\\\"\",le=\"0.001\"} 1\n");
    HAS(t, "tolk_queue_wait_seconds_bucket{slot=\"0\",model=\"demo \\\"en-zh\\\"\",le=\"0.01\"} 2\n");
    HAS(t, "tolk_queue_wait_seconds_bucket{slot=\"0\",model=\"demo \\\"en-zh\\\"\",le=\"60\"} 2\n");
    HAS(t, "tolk_queue_wait_seconds_bucket{slot=\"0\",model=\"demo \\\"en-zh\\\"\",le=\"+Inf\"} 3\n");
    HAS(t, "tolk_queue_wait_seconds_count{slot=\"0\",model=\"demo \\\"en-zh\\\"\"} 3\n");
    HAS(t, "tolk_tokens_generated_total{slot=\"0\",model=\"demo \\\"en-zh\\\"\"} 12\n");
    HAS(t, "tolk_sentences_dropped_total{slot=\"0\",model=\"demo \\\"en-zh\\\"\",reason=\"deadline\"} 2\n");
    HAS(t, "tolk_queue_depth{slot=\"0\",model=\"demo \\\"en-zh\\\"\"} 5\n");
    HAS(t, "tolk_model_info{slot=\"0\",model=\"demo\",source=\"en\",int8=\"1\"} 1\n");
    HAS(t, "tolk_model_reloads_total{result=\"ok\"} 1\n");
    HAS(t, "tolk_model_reloads_total{result=\"failed\"} 1\n");
    HAS(t, "tolk_model_reload_last_failure_info{reason=\"folder x: \\\"checksum\\\" mismatch\\nline two\"} 1\n");
    HAS(t, "process_resident_memory_bytes ");
    CHECK(!strstr(t, "slot=\"1\"")); /* unused slots stay out */
    char *rss = strstr(t, "\nprocess_resident_memory_bytes ");
    CHECK(rss && strtod(rss + 31, NULL) > 1e5);
  }
  free(t);

  /* Four writers, no lost updates. */
  pthread_t th[4];
  struct writer w = {m0, 20000};
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, write_many, &w);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  t = metrics_render(root, NULL);
  HAS(t, "tolk_queue_wait_seconds_count{slot=\"0\",model=\"demo \\\"en-zh\\\"\"} 80003\n");
  HAS(t, "tolk_sentences_total{slot=\"0\",model=\"demo \\\"en-zh\\\"\"} 80000\n");
  free(t);

  char esc[16];
  metrics_label_escape("a\"b\\c\nd", esc, sizeof esc);
  CHECK(!strcmp(esc, "a\\\"b\\\\c\\nd"));
  metrics_label_escape("\"\"\"\"\"\"\"\"\"\"", esc, 6); /* cut on a whole escape */
  CHECK(!strcmp(esc, "\\\"\\\""));
  metrics_free(root);
  return tu_finish("test_serve_metrics");
}
