/*
 * ports.c — how many 8-bit and float multiply-adds a core can issue per
 * cycle, the ceiling the batched int8 rows of bench/translate.sh run into
 * (issue 15). Independent chains of one instruction each, enough of them to
 * cover its latency, timed one thread at a time:
 *
 *   vfmadd231ps  8 float multiply-adds;   2 a cycle on every AVX2 core
 *                since Haswell and Zen 1 — the clock reference below
 *   vpmaddwd     16 int16 products summed in pairs (the AVX2 int8 tier's
 *                instruction, exact)
 *   vpmaddubsw   32 u8 × s8 products summed in pairs to int16, saturating
 *                (not exact for tolk's operands, listed for comparison)
 *   vpmaddwd + vfmadd231ps side by side: whether an integer and a float
 *                multiply issue in the same cycle
 *
 * Clock: the FMA rate / 2, so every figure is per cycle of the clock the
 * core ran at. A CPU where vpmaddwd issues once a cycle has an int8 peak of
 * 16 multiply-adds a cycle, the fp32 one's (2 × 8): int8 then saves bytes,
 * not arithmetic.
 *
 *   bench_ports [--ms MS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>

static double min_ms = 300;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 12 chains of 4 instructions an iteration: 48 in flight covers a latency of
 * up to 6 cycles at 2 a cycle. The asm keeps the compiler from folding them. */
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define KEEP(i) __asm__ volatile("" : "+x"(v##i));

#define LOOP(name, T, init, step)                                                  \
  __attribute__((target("avx2,fma"), noinline)) static double name(long iters) {   \
    T v0 = init, v1 = v0, v2 = v0, v3 = v0, v4 = v0, v5 = v0, v6 = v0, v7 = v0,   \
      v8 = v0, v9 = v0, v10 = v0, v11 = v0;                                        \
    double t = now();                                                              \
    for (long n = 0; n < iters; n++) {                                             \
      for (int r = 0; r < 4; r++) {                                                \
        CHAINS(step)                                                               \
      }                                                                            \
      CHAINS(KEEP)                                                                 \
    }                                                                              \
    return (now() - t) / ((double)iters * 48);                                     \
  }

#define FMA(i) v##i = _mm256_fmadd_ps(v##i, fb, fc);
#define MADDWD(i) v##i = _mm256_madd_epi16(v##i, ib);
#define MADDUBS(i) v##i = _mm256_maddubs_epi16(v##i, ib);

/* Constants the steps read: set once, outside the timed loops. */
static __m256 fb, fc;
static __m256i ib;

__attribute__((target("avx2,fma"))) static void set_constants(void) {
  fb = _mm256_set1_ps(1.0f);
  fc = _mm256_set1_ps(0.0f);
  ib = _mm256_set1_epi16(1);
}

LOOP(t_fma, __m256, _mm256_set1_ps(1.0f), FMA)
LOOP(t_maddwd, __m256i, _mm256_set1_epi16(1), MADDWD)
LOOP(t_maddubs, __m256i, _mm256_set1_epi8(1), MADDUBS)

/* 6 integer and 6 float chains, one of each per pair: seconds per pair. */
__attribute__((target("avx2,fma"), noinline)) static double t_mixed(long iters) {
  __m256i a0 = _mm256_set1_epi16(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 f0 = _mm256_set1_ps(1.0f), f1 = f0, f2 = f0, f3 = f0, f4 = f0, f5 = f0;
  double t = now();
  for (long n = 0; n < iters; n++) {
    for (int r = 0; r < 4; r++) {
#define PAIR(i) a##i = _mm256_madd_epi16(a##i, ib), f##i = _mm256_fmadd_ps(f##i, fb, fc);
      PAIR(0) PAIR(1) PAIR(2) PAIR(3) PAIR(4) PAIR(5)
    }
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
    __asm__ volatile("" : "+x"(f0), "+x"(f1), "+x"(f2), "+x"(f3), "+x"(f4), "+x"(f5));
  }
  return (now() - t) / ((double)iters * 24);
}

/* Seconds per instruction (per pair for t_mixed): the best of repeats of
 * at least min_ms each, since a shared machine only ever adds time. */
static double best(double (*fn)(long)) {
  long iters = 1 << 16;
  while (fn(iters) * (double)iters * 48 < 0.05) iters *= 2;
  double b = 1e9, t0 = now();
  do {
    double s = fn(iters);
    b = s < b ? s : b;
  } while ((now() - t0) * 1e3 < min_ms);
  return b;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
      min_ms = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: bench_ports [--ms MS]\n");
      return 2;
    }
  }
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    printf("bench_ports: this CPU lacks AVX2 or FMA; nothing to measure\n");
    return 0;
  }
  set_constants();
  double fma = best(t_fma), wd = best(t_maddwd), ubs = best(t_maddubs), mix = best(t_mixed);
  double cycle = fma * 2; /* two FMAs a cycle */
  printf("clock (from the FMA rate)   %.2f GHz\n", 1e-9 / cycle);
  printf("vfmadd231ps                 %.2f a cycle = %4.1f fp32 multiply-adds\n", cycle / fma, 8 * cycle / fma);
  printf("vpmaddwd                    %.2f a cycle = %4.1f int8 multiply-adds (the avx2 tier)\n", cycle / wd,
         16 * cycle / wd);
  printf("vpmaddubsw                  %.2f a cycle (+ a vpmaddwd each to widen: %4.1f)\n", cycle / ubs,
         32 / (wd / cycle + ubs / cycle));
  printf("vpmaddwd + vfmadd231ps      %.2f pairs a cycle = %4.1f multiply-adds\n", cycle / mix,
         24 * cycle / mix);
  return 0;
}
#else
int main(void) {
  printf("bench_ports: x86-64 only\n");
  return 0;
}
#endif
