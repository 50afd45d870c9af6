/*
 * doctor_run.c — the items of `tolk doctor` that translate (see
 * cmd_doctor.c): cold start, tail latency, memory growth and rollback.
 *
 * Every sentence is translated alone, as a request to a service would be,
 * so latency is per request. Memory is measured after the latency pass by
 * cycling through the same sentences again until the heap settles, then
 * fitting whole passes: growth then means memory kept per translation (a
 * leak, a cache without bound), not a first use.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "doctor.h"
#include "tolk_serve.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Resident set size in bytes, from /proc/self/statm; 0 when unknown. */
static double rss_bytes(void) {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
  fclose(f);
  return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

/* Anonymous resident memory in bytes (RssAnon in /proc/self/status): the
 * heap, arenas and stacks, what a leak grows. File-backed pages — the
 * weights of a memory-mapped model, paged in as new tokens' embedding rows
 * are first read — are left out: they are bounded by the files and given
 * back under pressure. 0 when unknown. */
static double rss_anon_bytes(void) {
  char line[256];
  double kb = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "RssAnon: %lf kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024.0;
}

/* The target tag: opus-mt-en-zh's simplified Chinese when the vocabulary has
 * it, else the model's first tag, else none (a single-target model). */
static const char *pick_tag(const tolk_translator *tr) {
  const tolk_tokenizer *tok = tolk_translator_tokenizer(tr);
  size_t n;
  const char *const *tags = tolk_tokenizer_language_tags(tok, &n);
  if (tolk_tokenizer_piece_to_id(tok, ">>cmn_Hans<<") >= 0) return ">>cmn_Hans<<";
  return n ? tags[0] : NULL;
}

struct run {
  const tolk_translator *tr;
  const char *tag;
  tolk_generate_params gp;
};

/* Translates one sentence; returns its seconds and sets *tokens to the
 * tokens generated, or returns -1 after putting the error into *err. An
 * empty translation of a non-empty sentence counts as a failure: a broken
 * model often "works" that way. */
static double translate_one(const struct run *r, const char *text, size_t *tokens, tolk_error *err) {
  tolk_text_translation t;
  double t0 = now_s();
  if (tolk_translator_translate_text(r->tr, text, strlen(text), r->tag, &r->gp, &t, err)) return -1;
  double dt = now_s() - t0;
  bool empty = !t.text || !*t.text;
  *tokens = 0;
  for (size_t i = 0; i < t.n_sentences; i++) *tokens += t.sentences[i].n_ids - 1;
  tolk_text_translation_free(&t);
  if (empty && *text) {
    err->status = TOLK_ERR_INVALID_MODEL;
    snprintf(err->message, sizeof err->message, "'%.900s' translated to nothing", text);
    return -1;
  }
  return dt;
}

static tolk_status open_model(const struct doctor_opts *o, const char *dir, tolk_translator **tr,
                              struct run *r, tolk_error *err) {
  tolk_translator_params p = tolk_translator_default_params();
  p.int8 = o->int8;
  p.threads = o->threads;
  tolk_status st = tolk_translator_create(dir, p, tr, err);
  if (st) return st;
  r->tr = *tr;
  r->tag = pick_tag(*tr);
  r->gp = tolk_generate_default_params(*tr);
  if (o->beam) r->gp.num_beams = o->beam;
  return TOLK_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The nearest-rank percentile q (0..1] of n sorted values. */
static double percentile(const double *sorted, size_t n, double q) {
  size_t k = (size_t)ceil(q * (double)n);
  return sorted[k ? k - 1 : 0];
}

struct percentiles {
  double p50, p95, p99;
};

/* Sorts v and takes its percentiles. */
static struct percentiles percentiles(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  struct percentiles p = {percentile(v, n, 0.50), percentile(v, n, 0.95), percentile(v, n, 0.99)};
  return p;
}

/* Least-squares slope of y over x. */
static double slope(const double *x, const double *y, size_t n) {
  double mx = 0, my = 0, sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
  mx /= (double)n;
  my /= (double)n;
  for (size_t i = 0; i < n; i++) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  return sxx > 0 ? sxy / sxx : 0;
}

/* A tail measured on a machine running more than it has cores for is the
 * neighbours' as much as tolk's: say so next to the figure. */
static void busy_note(struct doctor_item *it) {
  double load[1];
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (getloadavg(load, 1) != 1 || cores <= 0) return;
  doctor_number(it, "load_average", load[0]);
  if (load[0] <= (double)cores) return;
  char line[DOCTOR_DETAIL_MAX];
  snprintf(line, sizeof line, "load average %.1f on %ld cores: other processes took time from these runs",
           load[0], cores);
  doctor_detail(it, line);
}

/* Latency depends on a sentence's length, and a mix of lengths spreads it
 * whatever the engine does (P99 is several times P50 on any model), so the
 * tail is judged on each run of a sentence over that sentence's quicker
 * run: every sentence is translated in two rounds, all sentences in each.
 * A stall — a lock, an allocation, a page fault, a plan rebuilt, another
 * process taking the core — shows as a ratio well above 1; a long sentence
 * does not. P50/P95/P99 of the latencies themselves are the figure. */
static void latency_verdict(struct doctor_item *it, double *t, size_t n) {
  double *ratio = malloc(2 * n * sizeof *ratio);
  if (!ratio) {
    doctor_item(it, DOCTOR_FAIL, "out of memory");
    return;
  }
  for (size_t i = 0; i < n; i++) {
    double best = t[i] < t[n + i] ? t[i] : t[n + i];
    ratio[i] = best > 0 ? t[i] / best : 1;
    ratio[n + i] = best > 0 ? t[n + i] / best : 1;
  }
  struct percentiles s = percentiles(t, 2 * n), r = percentiles(ratio, 2 * n);
  double tail = r.p99 / r.p50;
  free(ratio);
  doctor_number(it, "sentences", (double)n);
  doctor_number(it, "p50_ms", s.p50 * 1e3);
  doctor_number(it, "p95_ms", s.p95 * 1e3);
  doctor_number(it, "p99_ms", s.p99 * 1e3);
  doctor_number(it, "p99_over_p50", tail);
  char line[DOCTOR_DETAIL_MAX];
  snprintf(line, sizeof line, "a run over its sentence's quicker run: P50 %.2f, P95 %.2f, P99 %.2f; "
           "plain P99 %.2f x P50 (lengths differ)", r.p50, r.p95, r.p99, s.p99 / s.p50);
  doctor_detail(it, line);
  busy_note(it);
  doctor_item(it, tail <= 1.5 ? DOCTOR_PASS : DOCTOR_FAIL,
              "P50 %.1f ms, P95 %.1f ms, P99 %.1f ms: %zu sentences twice, one at a time; "
              "for the same sentence P99 %.2f x P50 (%s 1.5)",
              s.p50 * 1e3, s.p95 * 1e3, s.p99 * 1e3, n, tail, tail <= 1.5 ? "<=" : ">");
}

static void latency(const struct doctor_opts *o, const struct run *r, struct doctor_item *it) {
  size_t n = o->n_texts, tokens;
  double *t = malloc(2 * n * sizeof *t);
  tolk_error err;
  bool ok = t != NULL;
  if (!ok) doctor_item(it, DOCTOR_FAIL, "out of memory");
  for (size_t i = 0; ok && i < 2 * n; i++) {
    if ((t[i] = translate_one(r, o->texts[i % n], &tokens, &err)) < 0) {
      doctor_detail(it, err.message);
      doctor_item(it, DOCTOR_FAIL, "sentence %zu of %zu failed", i % n + 1, n);
      ok = false;
    }
  }
  if (ok) latency_verdict(it, t, n);
  free(t);
}

/* The memory item measures the process as tolk serve runs it, under its
 * allocator policy (tolk_serve.h: large blocks mapped on their own, free
 * pages given back every TOLK_SERVE_HEAP_TRIM_S seconds), and judges the
 * heap in use: what a leak or an unbounded cache grows, to the byte. RSS
 * moves by pages, and a check that must resolve 5 % of RSS a day cannot
 * read it over a minute: on the bundled model 5 % a day is 22 bytes a
 * second, and one page more in a 3-second window read as +300 % a day (the
 * item judged RSS until 2026-12-07). RSS is fitted and printed beside it;
 * over hours it is bench/serve_soak.py's. */
/* Settled: MEMORY_QUIET_PASSES passes in a row each moved the heap in use by
 * at most MEMORY_SETTLE_BYTES (one quiet pass was not enough: a cache's
 * content shifts in bursts); at most MEMORY_SETTLE_PASSES passes. */
enum { MEMORY_SETTLE_BYTES = 1024, MEMORY_QUIET_PASSES = 3, MEMORY_SETTLE_PASSES = 20 };

/* The fit's samples: one at its start and one at each pass's end. */
struct memory_series {
  size_t n, cap;
  double *x, *heap, *rss; /* seconds since the fit began; bytes */
  double t0;
};

static bool series_add(struct memory_series *m, double t, double heap, double rss) {
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    double *x = realloc(m->x, cap * sizeof *x);
    if (x) m->x = x;
    double *h = x ? realloc(m->heap, cap * sizeof *h) : NULL;
    if (h) m->heap = h;
    double *r = h ? realloc(m->rss, cap * sizeof *r) : NULL;
    if (!r) return false;
    m->rss = r;
    m->cap = cap;
  }
  m->x[m->n] = t - m->t0, m->heap[m->n] = heap, m->rss[m->n++] = rss;
  return true;
}

static double heap_bytes(void) {
  size_t b = 0;
  return tolk_serve_heap_in_use(&b) ? (double)b : -1;
}

/* Adds a sample taken now; false (reported) when out of memory. */
static bool memory_sample(struct memory_series *m, struct doctor_item *it) {
  if (series_add(m, now_s(), heap_bytes(), rss_anon_bytes())) return true;
  doctor_item(it, DOCTOR_FAIL, "out of memory");
  return false;
}

/* Judges the fit: the heap's growth (RSS's where the allocator does not
 * say) extrapolated to 24 hours against 5 % of RSS. */
static void memory_verdict(const struct memory_series *m, size_t fitted, size_t settle,
                           bool settled, struct doctor_item *it) {
  const size_t n = m->n;
  const bool heap_known = m->heap[0] >= 0;
  const double heap_s = heap_known ? slope(m->x, m->heap, n) : 0, rss_s = slope(m->x, m->rss, n);
  const double rss = rss_bytes(), secs = m->x[n - 1];
  const double judged = heap_known ? heap_s : rss_s;
  const double day_pct = rss > 0 ? judged * 86400.0 / rss * 100.0 : INFINITY;
  doctor_number(it, "translations", (double)fitted);
  doctor_number(it, "passes", (double)(n - 1));
  doctor_number(it, "settle_translations", (double)settle);
  doctor_number(it, "seconds_fitted", secs);
  doctor_number(it, "rss_bytes", rss);
  doctor_number(it, "anon_first_bytes", m->rss[0]);
  doctor_number(it, "anon_last_bytes", m->rss[n - 1]);
  doctor_number(it, "anon_growth_bytes_per_hour", rss_s * 3600.0);
  if (heap_known) {
    doctor_number(it, "heap_first_bytes", m->heap[0]);
    doctor_number(it, "heap_last_bytes", m->heap[n - 1]);
    doctor_number(it, "heap_growth_bytes_per_hour", heap_s * 3600.0);
  }
  doctor_number(it, "growth_bytes_per_hour", judged * 3600.0);
  doctor_number(it, "growth_24h_percent", day_pct);
  char line[DOCTOR_DETAIL_MAX];
  snprintf(line, sizeof line,
           "anonymous RSS %.2f -> %.2f MB, fitted %+.3f MB/h (%+.2f %% in 24 h; read by pages); %s after %zu "
           "translations; allocator as tolk serve's (large blocks mapped, free pages given back every %d s)",
           m->rss[0] / 1e6, m->rss[n - 1] / 1e6, rss_s * 3600.0 / 1e6,
           rss > 0 ? rss_s * 86400.0 / rss * 100.0 : INFINITY, settled ? "heap settled" : "heap still growing",
           settle, TOLK_SERVE_HEAP_TRIM_S);
  doctor_detail(it, line);
  doctor_item(it, day_pct < 5.0 ? DOCTOR_PASS : DOCTOR_FAIL,
              "RSS %.1f MB; %s %.2f -> %.2f MB over %zu translations (%.1f s), fitted %+.3f MB/h: %+.2f %% of "
              "RSS in 24 h (%s 5 %%)",
              rss / 1e6, heap_known ? "heap in use" : "anonymous RSS", (heap_known ? m->heap[0] : m->rss[0]) / 1e6,
              (heap_known ? m->heap[n - 1] : m->rss[n - 1]) / 1e6, fitted, secs, judged * 3600.0 / 1e6, day_pct,
              day_pct < 5.0 ? "<" : ">=");
}

/* One pass over the memory item's sentences (the first `cycle`), giving
 * the free pages back as the service would. False after a failure
 * (reported). */
static bool memory_pass(const struct doctor_opts *o, const struct run *r, size_t cycle, double *trimmed,
                        struct doctor_item *it) {
  tolk_error err;
  size_t tokens;
  for (size_t i = 0; i < cycle; i++) {
    if (translate_one(r, o->texts[i], &tokens, &err) < 0) {
      doctor_detail(it, err.message);
      doctor_item(it, DOCTOR_FAIL, "translation %zu of a memory pass failed", i + 1);
      return false;
    }
    const double t = now_s();
    if (t - *trimmed >= TOLK_SERVE_HEAP_TRIM_S) {
      tolk_serve_heap_give_back();
      *trimmed = t;
    }
  }
  return true;
}

/* Passes over the first `cycle` sentences until the heap in use settles
 * (plans and buffers of every shape made), then whole passes for
 * o->memory_n / 2 translations and o->memory_seconds at least, sampled at
 * each pass's end: what is live after a translation depends on that
 * sentence (buffers kept at its size), and samples after every one of them
 * made a rise within each pass that a fit over whole passes still read as
 * growth (+1,400 % a day on the bundled model, flat from pass to pass). */
static void memory(const struct doctor_opts *o, const struct run *r, struct doctor_item *it) {
  const size_t half = o->memory_n / 2, cycle = half < o->n_texts ? half : o->n_texts;
  struct memory_series m = {0};
  const double begun = now_s();
  double trimmed = begun, before = heap_bytes();
  size_t settle = 0, quiet = 0;
  bool ok = true;
  /* A slow model's pass is minutes: the settling then takes what the fit
   * takes, twice, and says whether the heap had settled. */
  while (ok && quiet < MEMORY_QUIET_PASSES && settle < MEMORY_SETTLE_PASSES &&
         (!settle || now_s() - begun < 2 * o->memory_seconds)) {
    ok = memory_pass(o, r, cycle, &trimmed, it);
    const double after = heap_bytes();
    quiet = fabs(after - before) <= MEMORY_SETTLE_BYTES ? quiet + 1 : 0;
    before = after;
    settle++;
  }
  const bool settled = quiet == MEMORY_QUIET_PASSES;
  m.t0 = now_s();
  ok = ok && memory_sample(&m, it);
  size_t fitted = 0;
  while (ok && (fitted < half || now_s() - m.t0 < o->memory_seconds)) {
    ok = memory_pass(o, r, cycle, &trimmed, it) && memory_sample(&m, it);
    fitted += cycle;
  }
  if (ok) memory_verdict(&m, fitted, settle * cycle, settled, it);
  free(m.x);
  free(m.heap);
  free(m.rss);
}

void doctor_measure(const struct doctor_opts *o, struct doctor_item *cold, struct doctor_item *lat,
                    struct doctor_item *mem) {
  tolk_translator *tr = NULL;
  struct run r;
  tolk_error err;
  double t0 = now_s(), t1 = 0, first = -1;
  tolk_status st = open_model(o, o->model, &tr, &r, &err);
  if (!st) {
    t1 = now_s();
    size_t tokens;
    first = translate_one(&r, o->texts[0], &tokens, &err);
  }
  if (st || first < 0) {
    doctor_detail(cold, err.message);
    doctor_item(cold, DOCTOR_FAIL, "the model did not %s", st ? "load" : "translate");
    doctor_item(lat, DOCTOR_FAIL, "not measured: the model did not %s", st ? "load" : "translate");
    doctor_item(mem, DOCTOR_FAIL, "not measured: the model did not %s", st ? "load" : "translate");
    tolk_translator_free(tr);
    return;
  }
  double total = t1 - t0 + first;
  doctor_number(cold, "seconds", total);
  doctor_number(cold, "load_seconds", t1 - t0);
  doctor_number(cold, "first_translation_seconds", first);
  doctor_item(cold, total <= o->max_cold_start ? DOCTOR_PASS : DOCTOR_FAIL,
              "%.2f s to the first translation (load %.2f s, translate %.2f s; %s %g s)", total,
              t1 - t0, first, total <= o->max_cold_start ? "<=" : ">", o->max_cold_start);
  latency(o, &r, lat);
  memory(o, &r, mem);
  tolk_translator_free(tr);
}

void doctor_rollback(const struct doctor_opts *o, struct doctor_item *it) {
  if (!o->previous) {
    doctor_item(it, DOCTOR_SKIP, "no --previous DIR given");
    return;
  }
  tolk_translator *tr = NULL;
  struct run r;
  tolk_error err;
  double t0 = now_s(), dt = -1;
  tolk_status st = open_model(o, o->previous, &tr, &r, &err);
  size_t tokens;
  if (!st) dt = translate_one(&r, o->texts[0], &tokens, &err);
  double total = now_s() - t0;
  tolk_translator_free(tr);
  if (st || dt < 0) {
    doctor_detail(it, err.message);
    doctor_item(it, DOCTOR_FAIL, "%s does not %s: switching back would fail", o->previous,
                st ? "load" : "translate");
    return;
  }
  doctor_number(it, "seconds", total);
  doctor_item(it, DOCTOR_PASS, "%s loads and translates (%.2f s): switching back is possible", o->previous, total);
}
