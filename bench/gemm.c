/*
 * gemm.c — SGEMM micro-benchmark on the MarianMT shapes: m ∈ {1, 4, 16, 30,
 * 64} rows (a decoder step, a beam of 4, 16 sentences greedy, an encoder
 * sentence, 16 sentences × 4 beams) times the model's weight
 * matrices k × n ∈ {512×512, 512×2048, 2048×512, 512×65001 (LM head)}.
 * Prints GFLOP/s and the rate B is streamed at (GB/s: what bounds m = 1) for
 * kern_sgemm (B unpacked), kern_sgemm_packed (B prepacked, as sessions run
 * constant weights) and, when built with OpenBLAS, cblas_sgemm.
 *
 * --pack bf16 packs B as bfloat16 (tolk_session_params.bf16_weights 1),
 * --pack bf16dot as bfloat16 pairs for AVX512-BF16's dot products (2),
 * --pack q8 as int8 codes dequantized on the way (an int8 model's float LM
 * head: B's floats × 127 rounded, scale 1/127);
 * GB/s(B) then counts the packed bytes.
 *
 * Weights are "cold" as in a real decoder step, which walks ~230 MB of
 * weights and so never finds them in the cache: the benchmark rotates
 * through enough copies of B to exceed 384 MB (this 32 MB-L3 VM still reads
 * 96 MB sets at twice its DRAM rate; --hot: one copy, warm).
 *
 *   bench_gemm [--threads N] [--isa avx2|avx512|scalar] [--pack f32|bf16|bf16dot|q8] [--hot] [--ms MS]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pool.h"
#include "kern/kern.h"

#ifdef TOLK_BENCH_OPENBLAS
#include <cblas.h>
void openblas_set_num_threads(int num_threads);
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum impl { IMPL_PLAIN, IMPL_PACKED, IMPL_OPENBLAS };
static const char *impl_name[] = {"tolk", "tolk-packed", "openblas"};

struct shape {
  int64_t k, n;
  const char *what;
};

static int threads = 1;
static double min_ms = 300;
static bool hot;
static const char *pack = "f32";

/* Median seconds per call of `impl` on m × k × n, rotating over `copies`
 * B matrices. */
static double time_one(enum impl impl, int64_t m, int64_t k, int64_t n, float *a, float **b,
                       struct kern_packed_b **pb, int copies, float *c,
                       struct tolk_pool *pool) {
  double samples[64];
  int ns = 0;
  double t_end = now() + min_ms / 1000.0;
  int it = 0;
  do {
    double t0 = now();
    int x = it++ % copies;
    switch (impl) {
    case IMPL_PLAIN:
      kern_sgemm(false, false, m, n, k, 1.0f, a, k, b[x], n, 0.0f, c, n, pool);
      break;
    case IMPL_PACKED: kern_sgemm_packed(false, m, n, k, 1.0f, a, k, pb[x], 0.0f, c, n, pool); break;
    case IMPL_OPENBLAS:
#ifdef TOLK_BENCH_OPENBLAS
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                  (int)k, b[x], (int)n, 0.0f, c, (int)n);
#endif
      break;
    }
    double t = now() - t0;
    if (ns < 64) samples[ns++] = t;
    else samples[it % 64] = t;
  } while (now() < t_end || it < 5);
  /* median */
  for (int i = 1; i < ns; i++)
    for (int j = i; j > 0 && samples[j] < samples[j - 1]; j--) {
      double tmp = samples[j];
      samples[j] = samples[j - 1];
      samples[j - 1] = tmp;
    }
  return samples[ns / 2];
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = (int)strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) min_ms = strtod(argv[++i], NULL);
    else if (strcmp(argv[i], "--hot") == 0) hot = true;
    else if (strcmp(argv[i], "--pack") == 0 && i + 1 < argc) pack = argv[++i];
    else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      const char *want = argv[++i];
      bool ok = false;
      for (int x = KERN_ISA_SCALAR; x <= KERN_ISA_AVX512; x++)
        if (strcmp(want, kern_isa_name((enum kern_isa)x)) == 0) ok = kern_isa_force((enum kern_isa)x);
      if (!ok) {
        fprintf(stderr, "bench_gemm: ISA %s not available here\n", want);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: bench_gemm [--threads N] [--isa avx2|avx512|scalar] [--pack f32|bf16|bf16dot|q8] "
                      "[--hot] [--ms MS]\n");
      return 2;
    }
  }
  if (strcmp(pack, "f32") && strcmp(pack, "bf16") && strcmp(pack, "bf16dot") && strcmp(pack, "q8")) {
    fprintf(stderr, "bench_gemm: --pack takes f32, bf16, bf16dot or q8, not %s\n", pack);
    return 2;
  }
  if (!strcmp(pack, "bf16dot") && !kern_bf16dot_fast())
    fprintf(stderr, "bench_gemm: no AVX512-BF16 here: bf16dot runs its portable tier\n");
  struct tolk_pool *pool = NULL;
  tolk_error err = {0};
  if (tolk_pool_create(threads, &pool, &err) != TOLK_OK) {
    fprintf(stderr, "bench_gemm: %s\n", err.message);
    return 1;
  }
#ifdef TOLK_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  printf("isa %s, threads %d (pool runs %d), B %s, packed as %s\n", kern_isa_name(kern_isa_active()), threads,
         tolk_pool_threads(pool), hot ? "hot (one copy)" : "cold (rotating copies > 384 MB)", pack);
  printf("%4s %6s %6s  %-12s %10s %9s %8s\n", "m", "k", "n", "impl", "us/call", "GFLOP/s", "GB/s(B)");
  static const struct shape shapes[] = {
      {512, 512, "attention q/k/v/o"},
      {512, 2048, "ffn fc1"},
      {2048, 512, "ffn fc2"},
      {512, 65001, "LM head"},
  };
  static const int64_t ms[] = {1, 4, 16, 30, 64};
  const int64_t max_m = 64;
  const size_t cold_bytes = (size_t)384 << 20;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    const int64_t k = shapes[s].k, n = shapes[s].n;
    size_t bbytes = (size_t)(k * n) * sizeof(float);
    int copies = hot ? 1 : (int)((cold_bytes + bbytes - 1) / bbytes);
    float **b = calloc((size_t)copies, sizeof *b);
    struct kern_packed_b **pb = calloc((size_t)copies, sizeof *pb);
    float *a = malloc((size_t)(max_m * k) * sizeof *a), *c = malloc((size_t)(max_m * n) * sizeof *c);
    if (!b || !pb || !a || !c) return 1;
    for (int64_t i = 0; i < max_m * k; i++) a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (int x = 0; x < copies; x++) {
      b[x] = malloc(bbytes);
      if (!b[x]) return 1;
      for (int64_t i = 0; i < k * n; i++) b[x][i] = (float)((i * 104729 + x) % 1000) / 1000.0f - 0.5f;
      tolk_status st;
      if (!strcmp(pack, "q8")) {
        int8_t *q = malloc((size_t)(k * n));
        if (!q) return 1;
        for (int64_t i = 0; i < k * n; i++) q[i] = (int8_t)lrintf(b[x][i] * 127.0f);
        st = kern_sgemm_pack_b_q8(false, k, n, q, n, true, 1.0f / 127.0f, 0, &pb[x], &err);
        free(q);
      } else if (!strcmp(pack, "bf16dot")) {
        st = kern_sgemm_pack_b_bf16dot(false, k, n, b[x], n, NULL, &pb[x], &err);
      } else {
        st = kern_sgemm_pack_b_read(false, k, n, b[x], n, !strcmp(pack, "bf16"), NULL, &pb[x], &err);
      }
      if (st != TOLK_OK) {
        fprintf(stderr, "bench_gemm: %s\n", err.message);
        return 1;
      }
    }
    printf("# %s\n", shapes[s].what);
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
      const int64_t m = ms[mi];
      for (int impl = IMPL_PLAIN; impl <= IMPL_OPENBLAS; impl++) {
#ifndef TOLK_BENCH_OPENBLAS
        if (impl == IMPL_OPENBLAS) continue;
#endif
        double t = time_one((enum impl)impl, m, k, n, a, b, pb, copies, c, pool);
        const size_t read = impl == IMPL_PACKED ? kern_packed_b_bytes(pb[0]) : bbytes;
        printf("%4lld %6lld %6lld  %-12s %10.1f %9.2f %8.2f\n", (long long)m, (long long)k,
               (long long)n, impl_name[impl], t * 1e6, 2.0 * (double)(m * k * n) / t * 1e-9,
               (double)read / t * 1e-9);
        fflush(stdout);
      }
    }
    for (int x = 0; x < copies; x++) {
      free(b[x]);
      kern_packed_b_free(pb[x]);
    }
    free(b);
    free(pb);
    free(a);
    free(c);
  }
  tolk_pool_free(pool);
  return 0;
}
