/*
 * load_bench.c — times tolk_model_load on one model and measures the memory
 * it costs: resident anonymous memory (heap, arena) and resident file pages
 * gained across the load, from /proc/self/status. Prints "key value" lines
 * for bench/load.sh.
 *
 *   load_bench MODEL [RUNS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "onnx/onnx.h"

/* RssAnon and RssFile in KiB. */
static void rss(long *anon, long *file) {
  *anon = *file = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "RssAnon:", 8)) *anon = strtol(line + 8, NULL, 10);
    if (!strncmp(line, "RssFile:", 8)) *file = strtol(line + 8, NULL, 10);
  }
  fclose(f);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: load_bench MODEL [RUNS]\n");
    return 2;
  }
  int runs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 10;
  if (runs < 1 || runs > 1000) runs = 10;
  double *ms = calloc((size_t)runs, sizeof *ms);
  long anon_delta = 0, file_delta = 0;
  size_t arena = 0, n_init = 0, zero_copy = 0;
  for (int r = 0; r < runs; r++) {
    long a0, f0, a1, f1;
    rss(&a0, &f0);
    double t0 = now_ms();
    tolk_model *m;
    tolk_error err;
    if (tolk_model_load(argv[1], tolk_model_default_params(), &m, &err)) {
      fprintf(stderr, "load_bench: %s\n", err.message);
      return 1;
    }
    ms[r] = now_ms() - t0;
    rss(&a1, &f1);
    /* The first run is the one that shows what a load costs a fresh
     * process; later runs reuse freed heap. */
    if (r == 0) {
      anon_delta = a1 - a0;
      file_delta = f1 - f0;
      const struct ir_model *im = tolk_model_ir(m);
      arena = im->arena.used_total;
      for (size_t i = 0; i < im->graph->n_initializers; i++) {
        n_init++;
        zero_copy += im->graph->initializers[i]->init->zero_copy;
      }
    }
    tolk_model_free(m);
  }
  qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
  printf("runs %d\n", runs);
  printf("load_ms_median %.3f\n", ms[runs / 2]);
  printf("load_ms_min %.3f\n", ms[0]);
  printf("load_ms_first_sorted_max %.3f\n", ms[runs - 1]);
  printf("rss_anon_kib %ld\n", anon_delta);
  printf("rss_file_kib %ld\n", file_delta);
  printf("arena_bytes %zu\n", arena);
  printf("initializers %zu\n", n_init);
  printf("zero_copy %zu\n", zero_copy);
  free(ms);
  return 0;
}
