/*
 * igemm.c — 8-bit GEMM micro-benchmark: kern_igemm_packed with B prepacked
 * (as sessions pack constant weights), uint8 A with a per-tensor zero point
 * times int8 B, on the MarianMT shapes: m ∈ {1, 30, 128} rows (a decoder
 * step, an encoder sentence, a batch) times k × n weights (512×2048 ffn fc1,
 * 2048×512 fc2, 512×512 attention), and the LM head at 1 to 64 rows. One
 * thread. Prints microseconds per
 * call and GOP/s (2·m·n·k) for each implementation this CPU has, or the one
 * --isa names.
 *
 * --f32 writes the float form (sums times row and column scales), as the
 * quantized MatMuls and the int8 LM head do; --shape runs one shape.
 *
 *   bench_igemm [--isa scalar|avx2|avxvnni|avx512vnni|amx] [--ms MS] [--f32] [--shape MxNxK]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern/igemm.h"

static double min_ms = 300;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Times m × n × k on the implementation in force; the data is a fixed
 * pattern, since the integer path's speed does not depend on the values. */
static int bench(int64_t m, int64_t n, int64_t k, const char *isa, bool f32) {
  uint8_t *a = malloc((size_t)(m * k)), *b = malloc((size_t)(k * n));
  int32_t *c = malloc((size_t)(m * n) * 4);
  struct kern_igemm_b pb;
  pb.data = malloc(kern_igemm_pack_b_size(n, k));
  void *work = malloc(kern_igemm_work_size(m, k));
  if (!a || !b || !c || !pb.data || !work) return 1;
  for (int64_t i = 0; i < m * k; i++) a[i] = (uint8_t)(i * 7919 + 13);
  for (int64_t i = 0; i < k * n; i++) b[i] = (uint8_t)(i * 104729 + 7);
  kern_igemm_pack_b(n, k, b, n, false, true, &pb);
  int32_t za = 3, zb = 0;
  struct kern_igemm p = {.m = m, .n = n, .k = k, .a = a, .lda = k, .b = b, .ldb = n,
                         .b_signed = true, .a_zp = &za, .b_zp = &zb, .c = c, .ldc = n};
  /* float out: the sums times a row scale and a column scale, as the
   * quantized MatMuls and the int8 LM head write them */
  float *rs = malloc((size_t)m * sizeof *rs), *cs = malloc((size_t)n * sizeof *cs);
  if (!rs || !cs) return 1;
  for (int64_t i = 0; i < m; i++) rs[i] = 1.0f / (float)(i + 3);
  for (int64_t j = 0; j < n; j++) cs[j] = 1.0f / (float)(j % 97 + 5);
  struct kern_igemm_f32 f = {.c = (float *)c, .ldc = n, .row_scale = rs, .col_scale = cs,
                             .row_scale_stride = 1, .col_scale_stride = 1};
  if (f32) p.f32 = &f;
  int reps = 0;
  double t0 = now(), t;
  do {
    kern_igemm_packed(&p, &pb, work, NULL);
    reps++;
  } while ((t = now() - t0) < min_ms / 1000.0);
  double per = t / reps;
  printf("%-10s %4lld %5lld %5lld %-5s %10.1f %8.2f\n", isa, (long long)m, (long long)n, (long long)k,
         f32 ? "f32" : "int32", per * 1e6, 2.0 * (double)(m * n * k) / per * 1e-9);
  fflush(stdout);
  free(a), free(b), free(c), free(pb.data), free(work), free(rs), free(cs);
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_igemm [--isa scalar|avx2|avxvnni|avx512vnni|amx] [--ms MS] [--f32] [--shape MxNxK]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *isas[] = {"scalar", "avx2", "avxvnni", "avx512vnni", "amx"};
  const char *only = NULL;
  bool f32 = false;
  long long one[3] = {0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) only = argv[++i];
    else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) min_ms = strtod(argv[++i], NULL);
    else if (strcmp(argv[i], "--f32") == 0) f32 = true;
    else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      char tail;
      if (sscanf(argv[++i], "%lldx%lldx%lld%c", &one[0], &one[1], &one[2], &tail) != 3 || one[0] < 1 ||
          one[1] < 1 || one[2] < 1)
        return usage();
    } else return usage();
  }
  if (only) {
    size_t s = 0;
    while (s < sizeof isas / sizeof isas[0] && strcmp(only, isas[s]) != 0) s++;
    if (s == sizeof isas / sizeof isas[0]) return usage();
  }
  printf("detected %s\n%-10s %4s %5s %5s %-5s %10s %8s\n", kern_igemm_isa(), "isa", "m", "n", "k", "out",
         "us/call", "GOP/s");
  static const int64_t shapes[][3] = {
      {1, 2048, 512}, {1, 512, 2048}, {30, 2048, 512}, {30, 512, 512}, {128, 512, 512},
      /* the LM head of the OPUS models, streamed from memory: one to three
       * rows (the few-rows kernel), a beam of 4, 16 sentences greedy, and
       * 16 sentences x 4 beams */
      {1, 65001, 512}, {2, 65001, 512}, {3, 65001, 512}, {4, 65001, 512}, {16, 65001, 512},
      {64, 65001, 512}};
  for (size_t s = 0; s < sizeof isas / sizeof isas[0]; s++) {
    if (only && strcmp(only, isas[s]) != 0) continue;
    if (!kern_igemm_force_isa(isas[s])) {
      printf("# %s not available here\n", isas[s]);
      continue;
    }
    if (one[0]) {
      if (bench(one[0], one[1], one[2], isas[s], f32)) return 1;
      continue;
    }
    for (size_t d = 0; d < sizeof shapes / sizeof shapes[0]; d++)
      if (bench(shapes[d][0], shapes[d][1], shapes[d][2], isas[s], f32)) return 1;
  }
  kern_igemm_force_isa(NULL);
  return 0;
}
