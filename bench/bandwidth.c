/*
 * bandwidth.c — bench_bandwidth: the machine's memory read bandwidth, and
 * with a model, the batch-1 decoder step's roofline beside its measured time.
 *
 * A greedy step of one sentence multiplies one row by every decoder weight:
 * it reads each weight once and does 2 flops per weight, so it is bound by
 * memory, not arithmetic. Its floor is (weight bytes read per step) / (read
 * bandwidth). The bytes per step, from config.json: each decoder layer's
 * self-attention q, k, v, o (4 d²), cross-attention q and o (2 d²; its k and
 * v are computed once per sentence) and FFN (2 d·ffn), then the LM head
 * (vocab·d) — 4 bytes a weight in fp32 (2 with --bf16), 1 in the int8 graphs
 * (tolk packs them as int8; their LM head, DequantizeLinear of 8-bit codes,
 * stays codes, and --int8-lm-head requantizes it to int8). Biases,
 * layer norms, the one embedding row and the cache are left out (< 1 %).
 *
 * The measured step: tolk_translator_generate on one sentence with exactly
 * 8 and then exactly 40 new tokens, the median of --reps runs each;
 * (t40 - t8) / 32 cancels the encoder and the first step.
 *
 * Bandwidth: --threads threads (and 1) each summing its share of a --mb MiB
 * buffer on 2 MiB pages (64-bit loads the compiler vectorises), best of 5
 * passes; the buffer is far larger than the caches.
 *
 * --profile then times every node of the key/value-cache steps (the
 * executor's node timer, exec_set_node_timer) over --reps more 40-token
 * runs and prints where a step's time goes, by kernel (a product by its
 * weight's shape), beside the measured step: what the node total leaves out
 * is the executor's loop, the search and the translator between steps.
 *
 *   bench_bandwidth [--mb N] [--threads N] [-m DIR [--int8] [--int8-lm-head] [--bf16] [--rows N] [--reps N] [--profile]]
 */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "exec/exec.h"
#include "tolk.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct reader {
  const uint64_t *p;
  size_t n;
  uint64_t sum;
};

static void *read_share(void *arg) {
  struct reader *r = arg;
  /* Four quarters read side by side, as a one-row GEMM reads four panels:
   * four streams keep more lines in flight than one (Zen 2 here: 31 GB/s
   * with one stream a thread, 44-47 with four, the LM head's own speed);
   * four sums so the loads are not serialised on one add. */
  const size_t q = r->n / 4;
  const uint64_t *p0 = r->p, *p1 = p0 + q, *p2 = p1 + q, *p3 = p2 + q;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < q; i++) {
    s0 += p0[i];
    s1 += p1[i];
    s2 += p2[i];
    s3 += p3[i];
  }
  r->sum = s0 ^ s1 ^ s2 ^ s3;
  return NULL;
}

/* Best read bandwidth in GB/s over 5 passes with `threads` threads. */
static double bandwidth(const uint64_t *buf, size_t words, int threads) {
  pthread_t tid[64];
  struct reader r[64];
  double best = 0.0;
  uint64_t keep = 0;
  for (int pass = 0; pass < 5; pass++) {
    double t0 = now_s();
    for (int t = 0; t < threads; t++) {
      r[t] = (struct reader){buf + words / (size_t)threads * (size_t)t, words / (size_t)threads, 0};
      if (pthread_create(&tid[t], NULL, read_share, &r[t])) return 0.0;
    }
    for (int t = 0; t < threads; t++) {
      pthread_join(tid[t], NULL);
      keep ^= r[t].sum;
    }
    double gbs = (double)(words / (size_t)threads / 4 * 4 * (size_t)threads) * 8.0 / (now_s() - t0) * 1e-9;
    if (gbs > best) best = gbs;
  }
  if (keep == 42) printf("#\n"); /* the sums are used, so the loads stay */
  return best;
}

static int config_int(const cJSON *cfg, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  return cJSON_IsNumber(v) ? v->valueint : -1;
}

/* Decoder weights read per greedy step of one sentence, in bytes. */
static double step_bytes(const char *dir, int int8, int int8_head, int bf16, double *head_bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "rb");
  if (!f) return -1.0;
  char *text = calloc(1, 1 << 20);
  size_t len = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  cJSON *cfg = len ? cJSON_Parse(text) : NULL;
  free(text);
  if (!cfg) return -1.0;
  double d = config_int(cfg, "d_model"), ffn = config_int(cfg, "decoder_ffn_dim");
  double layers = config_int(cfg, "decoder_layers"), vocab = config_int(cfg, "vocab_size");
  cJSON_Delete(cfg);
  if (d <= 0 || ffn <= 0 || layers <= 0 || vocab <= 0) return -1.0;
  const double fbytes = bf16 ? 2.0 : 4.0;
  *head_bytes = vocab * d * (int8 || int8_head ? 1.0 : fbytes);
  return layers * (6.0 * d * d + 2.0 * d * ffn) * (int8 ? 1.0 : fbytes) + *head_bytes;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median seconds of generating exactly `tokens` new tokens for src[0..rows). */
static double generate_s(const tolk_translator *tr, const tolk_ids *src, int rows, int tokens, int reps) {
  tolk_generate_params p = tolk_generate_default_params(tr);
  p.num_beams = 1;
  p.max_new_tokens = p.min_new_tokens = tokens;
  p.output_scores = 0; /* a step as `tolk translate` runs it: tokens only */
  double t[64];
  for (int r = 0; r < reps; r++) {
    tolk_generation g[64];
    tolk_error e;
    double t0 = now_s();
    if (tolk_translator_generate(tr, src, (size_t)rows, &p, g, &e)) {
      fprintf(stderr, "bench_bandwidth: %s\n", e.message);
      exit(1);
    }
    t[r] = now_s() - t0;
    tolk_generation_free(g, (size_t)rows);
  }
  qsort(t, (size_t)reps, sizeof t[0], cmp_double);
  return t[reps / 2];
}

/* ------------------------------------------------------------ --profile */

enum { MAX_KINDS = 96 };
static struct kind {
  char key[96];
  uint64_t ns, calls;
} kinds[MAX_KINDS];
static int n_kinds;
static char first_node[256]; /* the first node of a step: counts the steps */
static uint64_t steps;

/* The node timer: kv steps only, a product keyed by its weight's shape. */
static void on_node(const struct exec_node_time *t) {
  if (!t->kv) return;
  if (!first_node[0]) snprintf(first_node, sizeof first_node, "%s", t->name);
  if (!strcmp(first_node, t->name)) steps++;
  char key[96];
  const struct tensor *b = t->n_in > 1 ? t->in[1] : NULL;
  if (b && b->rank == 2 && strstr(t->op_type, "MatMul"))
    snprintf(key, sizeof key, "%s %lldx%lld", t->op_type, (long long)b->dims[0], (long long)b->dims[1]);
  else
    snprintf(key, sizeof key, "%s", t->op_type);
  int i = 0;
  while (i < n_kinds && strcmp(kinds[i].key, key)) i++;
  if (i == n_kinds) {
    if (n_kinds == MAX_KINDS) i = MAX_KINDS - 1, snprintf(kinds[i].key, sizeof kinds[i].key, "(other)");
    else snprintf(kinds[n_kinds++].key, sizeof kinds[i].key, "%s", key);
  }
  kinds[i].ns += t->ns;
  kinds[i].calls++;
}

static int cmp_kind(const void *a, const void *b) {
  const struct kind *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void profile(const tolk_translator *tr, const tolk_ids *src, int rows, int reps, double step_s) {
  exec_set_node_timer(on_node);
  generate_s(tr, src, rows, 40, reps);
  exec_set_node_timer(NULL);
  if (!steps) return;
  qsort(kinds, (size_t)n_kinds, sizeof kinds[0], cmp_kind);
  double total = 0;
  for (int i = 0; i < n_kinds; i++) total += (double)kinds[i].ns;
  printf("  where a step goes (%llu steps timed node by node, us a step):\n", (unsigned long long)steps);
  printf("    %-44s %8s %8s %10s %6s\n", "kernel", "calls", "us/call", "us/step", "share");
  for (int i = 0; i < n_kinds; i++)
    printf("    %-44s %8.1f %8.2f %10.1f %5.1f%%\n", kinds[i].key, (double)kinds[i].calls / (double)steps,
           (double)kinds[i].ns / 1e3 / (double)kinds[i].calls, (double)kinds[i].ns / 1e3 / (double)steps,
           100.0 * (double)kinds[i].ns / 1e9 / (double)steps / step_s);
  printf("    %-44s %8s %8s %10.1f %5.1f%%\n", "all nodes", "", "", total / 1e3 / (double)steps,
         100.0 * total / 1e9 / (double)steps / step_s);
  printf("    %-44s %8s %8s %10.1f %5.1f%%\n", "the rest (executor loop, search, translator)", "", "",
         step_s * 1e6 - total / 1e3 / (double)steps, 100.0 - 100.0 * total / 1e9 / (double)steps / step_s);
}

static int roofline(const char *dir, int int8, int int8_head, int bf16, int threads, int rows, int reps, double bw,
                    int prof) {
  double head, bytes = step_bytes(dir, int8, int8_head, bf16, &head);
  if (bytes < 0) {
    fprintf(stderr, "bench_bandwidth: %s/config.json lacks d_model, decoder_ffn_dim, "
                    "decoder_layers or vocab_size\n", dir);
    return 1;
  }
  tolk_translator_params tp = tolk_translator_default_params();
  tp.threads = threads;
  tp.int8 = int8;
  tp.int8_lm_head = int8_head;
  tp.bf16 = bf16;
  tolk_translator *tr;
  tolk_error e;
  if (tolk_translator_create(dir, tp, &tr, &e)) {
    fprintf(stderr, "bench_bandwidth: %s\n", e.message);
    return 1;
  }
  /* --rows N: the same sentence N times, a step of N rows reading the same weights. */
  const char *texts[64];
  for (int i = 0; i < rows; i++) texts[i] = ">>cmn_Hans<< The file cannot be opened because another program is using it.";
  tolk_ids src[64];
  if (tolk_tokenizer_encode_batch(tolk_translator_tokenizer(tr), texts, NULL, (size_t)rows, 0, src, &e)) {
    fprintf(stderr, "bench_bandwidth: %s\n", e.message);
    return 1;
  }
  generate_s(tr, src, rows, 8, 1); /* warm-up: plans, pages */
  double t8 = generate_s(tr, src, rows, 8, reps), t40 = generate_s(tr, src, rows, 40, reps);
  double step = (t40 - t8) / 32.0, floor_s = bytes / (bw * 1e9);
  printf("decoder step, batch %d greedy (%s%s, %d threads):\n", rows, int8 ? "int8" : bf16 ? "bf16 weights" : "fp32",
         int8_head ? " + int8 LM head" : "", threads);
  printf("  weights read per step %.1f MB (LM head %.1f MB)\n", bytes / 1e6, head / 1e6);
  printf("  roofline at %.1f GB/s   %.2f ms\n", bw, floor_s * 1e3);
  printf("  measured step           %.2f ms  (%.0f%% of the bandwidth; 8 vs 40 tokens, median of %d)\n",
         step * 1e3, 100.0 * floor_s / step, reps);
  if (prof) profile(tr, src, rows, reps, step);
  tolk_ids_free(src, (size_t)rows);
  tolk_translator_free(tr);
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  int mb = 512, threads = 2, int8 = 0, int8_head = 0, bf16 = 0, reps = 5, prof = 0, rows = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--int8")) int8 = 1;
    else if (!strcmp(a, "--int8-lm-head")) int8_head = 1;
    else if (!strcmp(a, "--bf16")) bf16 = 1;
    else if (!strcmp(a, "--profile")) prof = 1;
    else if (v && !strcmp(a, "-m")) dir = v, i++;
    else if (v && !strcmp(a, "--mb")) mb = atoi(v), i++;
    else if (v && !strcmp(a, "--threads")) threads = atoi(v), i++;
    else if (v && !strcmp(a, "--reps")) reps = atoi(v), i++;
    else if (v && !strcmp(a, "--rows")) rows = atoi(v), i++;
    else {
      fprintf(stderr, "usage: bench_bandwidth [--mb N] [--threads N] "
                      "[-m DIR [--int8] [--int8-lm-head] [--bf16] [--rows N] [--reps N] [--profile]]\n");
      return 2;
    }
  }
  if (mb < 1 || threads < 1 || threads > 64 || reps < 1 || reps > 64 || rows < 1 || rows > 64) {
    fprintf(stderr, "bench_bandwidth: --mb >= 1, --threads 1..64, --rows 1..64, --reps 1..64\n");
    return 2;
  }
  size_t words = (size_t)mb << 17;
  /* On 2 MiB pages, as tolk holds weights of 4 MiB and more: on 4 KiB pages
   * the prefetchers stop at every page and this machine read 22-30 GB/s
   * where the LM head streams at 43-46 (the roofline would be too lax). */
  uint64_t *buf = aligned_alloc((size_t)2 << 20, words * sizeof *buf);
#ifdef MADV_HUGEPAGE
  if (buf) madvise(buf, words * sizeof *buf, MADV_HUGEPAGE);
#endif
  if (!buf) {
    fprintf(stderr, "bench_bandwidth: no memory for %d MiB\n", mb);
    return 1;
  }
  for (size_t i = 0; i < words; i++) buf[i] = i * 0x9E3779B97F4A7C15u;
  double bw1 = bandwidth(buf, words, 1), bwt = threads > 1 ? bandwidth(buf, words, threads) : bw1;
  free(buf);
  printf("read bandwidth (%d MiB buffer on 2 MiB pages, best of 5): 1 thread %.1f GB/s, %d threads %.1f GB/s\n",
         mb, bw1, threads, bwt);
  return dir ? roofline(dir, int8, int8_head, bf16, threads, rows, reps, bwt, prof) : 0;
}
