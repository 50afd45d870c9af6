/*
 * vmath.c — the float functions of src/kern/vmath.h on each ISA tier this
 * CPU has, side by side: microseconds for one row of n floats (default
 * 65,001, opus-mt's vocabulary: a beam row's log-softmax) of each function
 * and of the log-softmax's two constants. One thread, the row in cache; the
 * tiers take turns round after round, and each cell is the median of the
 * rounds, so a slow spell of a shared machine lands on every tier alike.
 *
 *   bench_vmath [--n N] [--rounds R]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern/kern.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { N_FN = 7, MAX_ROUNDS = 99 };
static const char *const names[N_FN] = {"exp", "sigmoid", "tanh", "erf", "gelu", "gelu_tanh", "lse"};

/* Microseconds a call of function f (N_FN - 1: the log-softmax terms) over ~20 ms. */
static double time_fn(int f, int64_t n, float *y, const float *x) {
  int reps = 0;
  float mx, sink = 0;
  const double t0 = now();
  double t;
  do {
    if (f == N_FN - 1) sink += kern_log_softmax_terms_f32(n, x, &mx);
    else kern_vm_f32((enum kern_vm_fn)f, n, y, x);
    reps++;
  } while ((t = now() - t0) < 0.02);
  if (sink != sink) y[0] = sink; /* keep the sum alive */
  return t / reps * 1e6;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int64_t n = 65001;
  int rounds = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_vmath [--n N] [--rounds R]\n");
      return 2;
    }
  }
  if (n < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "bench_vmath: --n must be ≥ 1 and --rounds 1 to %d\n", MAX_ROUNDS);
    return 2;
  }
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  if (!x || !y) return 1;
  uint32_t r = 12345; /* logits-like: uniform in [-15, 15) */
  for (int64_t i = 0; i < n; i++) {
    r = r * 1664525u + 1013904223u;
    x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 30.0f;
  }
  const enum kern_isa first = kern_isa_active();
  enum kern_isa tiers[3];
  int n_tiers = 0;
  for (int i = KERN_ISA_SCALAR; i <= KERN_ISA_AVX512; i++)
    if (kern_isa_supported((enum kern_isa)i)) tiers[n_tiers++] = (enum kern_isa)i;
  static double us[3][N_FN][MAX_ROUNDS];
  for (int rd = 0; rd < rounds; rd++)
    for (int t = 0; t < n_tiers; t++) {
      kern_isa_force(tiers[t]);
      for (int f = 0; f < N_FN; f++) us[t][f][rd] = time_fn(f, n, y, x);
    }
  kern_isa_force(first);
  printf("# n = %lld, one thread, median of %d rounds, µs a row; (×) each tier against the one before it\n%-10s", (long long)n,
         rounds, "function");
  for (int t = 0; t < n_tiers; t++) printf(" %10s", kern_isa_name(tiers[t]));
  printf("\n");
  for (int f = 0; f < N_FN; f++) {
    printf("%-10s", names[f]);
    double before = 0;
    for (int t = 0; t < n_tiers; t++) {
      qsort(us[t][f], (size_t)rounds, sizeof us[t][f][0], cmp);
      const double m = us[t][f][rounds / 2];
      printf(" %10.1f", m);
      if (t > 0) printf(" (x%.2f)", before / m);
      before = m;
    }
    printf("\n");
  }
  free(x);
  free(y);
  return 0;
}
