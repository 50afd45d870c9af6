/*
 * translate.c — tolk's side of bench/translate.sh: loads a Marian model folder
 * once and times tolk_translator_generate on pre-tokenized sentences with the
 * output length fixed (min_new_tokens = max_new_tokens), as the Python peers
 * in bench/translate_peers.py do on the same ids:
 *  - latency: each sentence alone (batch 1), in file order; P50/P95 in ms
 *    (--latency-n N: only N of them, evenly spaced through the file);
 *  - throughput: all sentences sorted by length (longest first, ties in file
 *    order) and cut into batches of --batch sentences, one generate call per
 *    batch; sentences per second over the whole pass.
 * Prints one JSON object on stdout. Peak RSS is measured by the caller
 * (/usr/bin/time), so every engine is measured the same way; the JSON adds
 * the RSS split at the end (anonymous vs memory-mapped model files), and the
 * process's CPU time over the throughput pass (throughput_cpu_ms).
 *
 *   bench_translate -m DIR --ids FILE [--int8] [--int8-lm-head] [--bf16 | --bf16-products] [--beam N] [--new-tokens N]
 *                   [--threads N] [--batch N] [--latency-n N] [--skip-latency]
 *                   [--skip-throughput] [--no-verify] [--engine NAME] [--mode NAME] [--vmap FILE]
 *                   [--opt basic|extended|all]
 * FILE: one sentence per line, its token ids (ending in </s>) separated by spaces.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tolk.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* CPU time of the whole process (every thread), for machines where other
 * work shares the cores and wall time says more about the neighbours. */
static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* numpy.percentile's default (linear interpolation) over sorted v[0..n). */
static double percentile(const double *v, size_t n, double q) {
  if (n == 0) return 0.0;
  double pos = q / 100.0 * (double)(n - 1);
  size_t lo = (size_t)pos;
  if (lo + 1 >= n) return v[n - 1];
  return v[lo] + (pos - (double)lo) * (v[lo + 1] - v[lo]);
}

static int parse_int(const char *s, const char *what, int lo, int hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < lo || v > hi) {
    fprintf(stderr, "bench_translate: %s must be an integer in [%d, %d], got '%s'\n", what, lo, hi, s);
    exit(2);
  }
  return (int)v;
}

/* Reads the ids file into *out (n entries, each freed by tolk_ids_free). */
static size_t read_ids(const char *path, tolk_ids **out) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    exit(2);
  }
  size_t cap = 256, n = 0;
  tolk_ids *v = calloc(cap, sizeof *v);
  char *line = NULL;
  size_t line_cap = 0;
  while (v && getline(&line, &line_cap, f) > 0) {
    if (n == cap) {
      tolk_ids *w = realloc(v, 2 * cap * sizeof *v);
      if (!w) break;
      v = w;
      cap *= 2;
    }
    size_t k = 0, k_cap = 16;
    int32_t *ids = malloc(k_cap * sizeof *ids);
    for (char *p = line, *end; ids;) {
      errno = 0;
      long id = strtol(p, &end, 10);
      if (end == p) break;
      if (errno || id < 0 || id > INT32_MAX) {
        fprintf(stderr, "%s:%zu: bad id\n", path, n + 1);
        exit(2);
      }
      if (k == k_cap) {
        int32_t *w = realloc(ids, 2 * k_cap * sizeof *ids);
        if (!w) {
          free(ids);
          ids = NULL;
          break;
        }
        ids = w;
        k_cap *= 2;
      }
      ids[k++] = (int32_t)id;
      p = end;
    }
    if (!ids) break;
    if (k == 0) {
      free(ids);
      continue;
    }
    v[n++] = (tolk_ids){ids, k, 0};
  }
  free(line);
  fclose(f);
  if (!v) {
    fprintf(stderr, "bench_translate: out of memory\n");
    exit(2);
  }
  *out = v;
  return n;
}

struct order {
  size_t len, index;
};

static int by_length_desc(const void *a, const void *b) {
  const struct order *x = a, *y = b;
  if (x->len != y->len) return x->len < y->len ? 1 : -1;
  return (x->index > y->index) - (x->index < y->index);
}

/* Current RSS split (MB) from /proc/self/status: anonymous memory (tensors,
 * packed weights, arenas) and file pages (the memory-mapped model files).
 * -1 where the file or field is missing (not Linux). */
static void rss_split(double *anon, double *file) {
  *anon = *file = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    char *end;
    if (!strncmp(line, "RssAnon:", 8)) *anon = strtod(line + 8, &end) / 1024;
    if (!strncmp(line, "RssFile:", 8)) *file = strtod(line + 8, &end) / 1024;
  }
  fclose(f);
}

static void die(const char *what, const tolk_error *e) {
  fprintf(stderr, "bench_translate: %s: %s\n", what, e->message);
  exit(1);
}

/* Generates for src[0..n) as one batch; adds the new-token counts to the
 * running min/max. Returns the wall time in ms. */
static double generate(const tolk_translator *tr, const tolk_ids *src, size_t n, const tolk_generate_params *p,
                       tolk_generation *gen, size_t *min_new, size_t *max_new) {
  tolk_error e;
  double t0 = now_ms();
  if (tolk_translator_generate(tr, src, n, p, gen, &e)) die("generate", &e);
  double t = now_ms() - t0;
  for (size_t i = 0; i < n; i++) {
    size_t k = gen[i].n ? gen[i].n - 1 : 0;
    if (k < *min_new) *min_new = k;
    if (k > *max_new) *max_new = k;
  }
  tolk_generation_free(gen, n);
  return t;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *ids_path = NULL, *engine = "tolk", *mode = NULL, *vmap = NULL;
  int int8 = 0, beam = 1, new_tokens = 32, threads = 2, batch = 16, latency_n = -1;
  int do_latency = 1, do_throughput = 1, verify = 1, int8_lm_head = 0, bf16 = 0, opt = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--int8")) int8 = 1;
    else if (!strcmp(a, "--int8-lm-head")) int8_lm_head = 1;
    else if (!strcmp(a, "--bf16")) bf16 = TOLK_BF16_WEIGHTS;
    else if (!strcmp(a, "--bf16-products")) bf16 = TOLK_BF16_PRODUCTS;
    else if (!strcmp(a, "--no-verify")) verify = 0;
    else if (!strcmp(a, "--skip-latency")) do_latency = 0;
    else if (!strcmp(a, "--skip-throughput")) do_throughput = 0;
    else if (!v) {
      fprintf(stderr, "usage: bench_translate -m DIR --ids FILE [--int8] [--int8-lm-head] [--bf16 | --bf16-products] [--beam N] [--new-tokens N] "
                      "[--threads N] [--batch N] [--latency-n N] [--skip-latency] [--skip-throughput] [--no-verify] "
                      "[--vmap FILE] [--opt basic|extended|all]\n");
      return 2;
    } else if (!strcmp(a, "-m")) dir = v, i++;
    else if (!strcmp(a, "--ids")) ids_path = v, i++;
    else if (!strcmp(a, "--engine")) engine = v, i++;
    else if (!strcmp(a, "--mode")) mode = v, i++;
    else if (!strcmp(a, "--vmap")) vmap = v, i++;
    else if (!strcmp(a, "--beam")) beam = parse_int(v, "--beam", 1, 64), i++;
    else if (!strcmp(a, "--new-tokens")) new_tokens = parse_int(v, "--new-tokens", 1, 4096), i++;
    else if (!strcmp(a, "--threads")) threads = parse_int(v, "--threads", 0, 1024), i++;
    else if (!strcmp(a, "--batch")) batch = parse_int(v, "--batch", 1, 1 << 20), i++;
    else if (!strcmp(a, "--latency-n")) latency_n = parse_int(v, "--latency-n", -1, INT_MAX), i++;
    else if (!strcmp(a, "--opt")) {
      /* The graphs' opt level (tolk_translator_params.opt_level); the
       * translator's default is BASIC. */
      opt = !strcmp(v, "basic") ? TOLK_OPT_BASIC : !strcmp(v, "extended") ? TOLK_OPT_EXTENDED
            : !strcmp(v, "all") ? TOLK_OPT_ALL : -1;
      if (opt < 0) {
        fprintf(stderr, "bench_translate: --opt wants basic, extended or all, not '%s'\n", v);
        return 2;
      }
      i++;
    }
    else {
      fprintf(stderr, "bench_translate: unknown option %s\n", a);
      return 2;
    }
  }
  if (!dir || !ids_path) {
    fprintf(stderr, "bench_translate: -m DIR and --ids FILE are required\n");
    return 2;
  }
  tolk_ids *src;
  size_t n = read_ids(ids_path, &src);
  if (n == 0) {
    fprintf(stderr, "bench_translate: %s holds no sentences\n", ids_path);
    return 2;
  }

  double t0 = now_ms();
  tolk_translator_params tp = tolk_translator_default_params();
  tp.threads = threads;
  tp.int8 = int8;
  tp.int8_lm_head = int8_lm_head;
  tp.bf16 = bf16;
  tp.verify = verify;
  tp.opt_level = opt;
  tp.vmap = vmap;
  tolk_translator *tr;
  tolk_error e;
  if (tolk_translator_create(dir, tp, &tr, &e)) die(dir, &e);
  double load_ms = now_ms() - t0;

  tolk_generate_params p = tolk_generate_default_params(tr);
  p.num_beams = beam;
  p.num_return_sequences = 1;
  p.do_sample = 0;
  p.max_new_tokens = new_tokens;
  p.min_new_tokens = new_tokens;
  p.batch_tokens = 0; /* the batches below are the ones every engine gets */
  /* The tokens only, as translate_peers.py asks the others for them:
   * CTranslate2 without return_scores, transformers without output_scores. */
  p.output_scores = 0;

  tolk_generation *gen = calloc(n, sizeof *gen);
  double *lat = calloc(n, sizeof *lat);
  struct order *ord = calloc(n, sizeof *ord);
  tolk_ids *sorted = calloc(n, sizeof *sorted);
  if (!gen || !lat || !ord || !sorted) {
    fprintf(stderr, "bench_translate: out of memory\n");
    return 1;
  }
  size_t min_new = SIZE_MAX, max_new = 0;
  /* Warm-up: one sentence alone and one full batch, untimed, so lazily built
   * plans and first-touch page faults stay out of both measurements. */
  size_t warm_batch = (size_t)batch < n ? (size_t)batch : n;
  generate(tr, src, 1, &p, gen, &min_new, &max_new);
  if (do_throughput) generate(tr, src, warm_batch, &p, gen, &min_new, &max_new);
  min_new = SIZE_MAX, max_new = 0;

  size_t n_lat = latency_n < 0 || (size_t)latency_n > n ? n : (size_t)latency_n;
  double p50 = 0, p95 = 0, mean = 0;
  if (do_latency && n_lat) {
    /* n_lat sentences evenly spaced through the file (all of them by default);
     * translate_peers.py picks the same ones. */
    for (size_t i = 0; i < n_lat; i++) lat[i] = generate(tr, &src[i * n / n_lat], 1, &p, gen, &min_new, &max_new);
    for (size_t i = 0; i < n_lat; i++) mean += lat[i] / (double)n_lat;
    qsort(lat, n_lat, sizeof *lat, cmp_double);
    p50 = percentile(lat, n_lat, 50), p95 = percentile(lat, n_lat, 95);
  }
  double total = 0, cpu0 = cpu_ms();
  if (do_throughput) {
    for (size_t i = 0; i < n; i++) ord[i] = (struct order){src[i].n, i};
    qsort(ord, n, sizeof *ord, by_length_desc);
    for (size_t i = 0; i < n; i++) sorted[i] = src[ord[i].index];
    for (size_t b = 0; b < n; b += (size_t)batch) {
      size_t m = n - b < (size_t)batch ? n - b : (size_t)batch;
      total += generate(tr, sorted + b, m, &p, gen, &min_new, &max_new);
    }
  }
  double cpu_total = cpu_ms() - cpu0;
  double anon, file;
  rss_split(&anon, &file);
  char mode_buf[32];
  if (!mode) {
    snprintf(mode_buf, sizeof mode_buf, beam > 1 ? "beam %d" : "greedy", beam);
    mode = mode_buf;
  }
  printf("{\"engine\": \"%s\", \"precision\": \"%s\", \"mode\": \"%s\", \"beam\": %d, \"threads\": %d, "
         "\"sentences\": %zu, \"latency_sentences\": %zu, \"batch\": %d, \"new_tokens\": %d, "
         "\"load_ms\": %.1f, \"sent_per_s\": %.4f, \"throughput_ms\": %.1f, \"p50_ms\": %.3f, "
         "\"p95_ms\": %.3f, \"mean_ms\": %.3f, \"new_tokens_min\": %zu, \"new_tokens_max\": %zu, "
         "\"rss_anon_mb_end\": %.1f, \"rss_file_mb_end\": %.1f, \"throughput_cpu_ms\": %.1f}\n",
         engine, int8 ? "int8" : bf16 ? "bf16" : "fp32", mode, beam, threads, do_throughput ? n : 0, do_latency ? n_lat : 0, batch,
         new_tokens, load_ms, do_throughput && total > 0 ? (double)n / (total / 1e3) : 0.0, total, p50, p95, mean,
         min_new == SIZE_MAX ? 0 : min_new, max_new, anon, file, do_throughput ? cpu_total : 0.0);
  tolk_translator_free(tr);
  tolk_ids_free(src, n);
  free(src);
  free(gen);
  free(lat);
  free(ord);
  free(sorted);
  return 0;
}
