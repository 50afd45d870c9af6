/*
 * cpu.c — tolk_cpu_describe(): what the kernel dispatcher (sgemm.c for the
 * float kernels, igemm.c for the int8 GEMM) picked on this machine, read
 * from the dispatchers themselves so that a report can never disagree with
 * what runs. The brand string comes from CPUID, the only place the
 * dispatcher does not look, because an operator comparing machines wants it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "igemm.h"
#include "kern.h"

static char brand[64];
static char features[160];
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* CPUID leaves 0x80000002..4 hold the brand string, 16 bytes each. */
static void read_brand(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned r[12], max = __get_cpuid_max(0x80000000u, NULL);
  if (max < 0x80000004u) return;
  for (unsigned i = 0; i < 3; i++)
    __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
  memcpy(brand, r, sizeof r);
  brand[sizeof r] = '\0';
  /* Intel pads the string on the left. */
  size_t lead = strspn(brand, " ");
  memmove(brand, brand + lead, strlen(brand + lead) + 1);
  for (size_t n = strlen(brand); n && brand[n - 1] == ' ';) brand[--n] = '\0';
#endif
}

static void add_feature(size_t *used, const char *name) {
  int n = snprintf(features + *used, sizeof features - *used, "%s%s", *used ? " " : "", name);
  if (n > 0 && (size_t)n < sizeof features - *used) *used += (size_t)n;
}

/* The features the dispatchers test (sgemm.c, igemm.c, bf16dot.c, the F16C
 * conversions), and VNNI and AMX, which say what an int8 kernel could gain
 * (amx-int8 is the CPU's: igemm.c also needs the OS's leave). */
static void read_features(void) {
  size_t used = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  /* __builtin_cpu_supports wants a literal, hence one line each. */
  const struct {
    const char *name;
    int has;
  } f[] = {{"sse4.2", __builtin_cpu_supports("sse4.2")},
           {"avx", __builtin_cpu_supports("avx")},
           {"avx2", __builtin_cpu_supports("avx2")},
           {"fma", __builtin_cpu_supports("fma")},
           {"avx512f", __builtin_cpu_supports("avx512f")},
           {"avx512bw", __builtin_cpu_supports("avx512bw")},
           {"avx512dq", __builtin_cpu_supports("avx512dq")},
           {"avx512vl", __builtin_cpu_supports("avx512vl")}};
  for (size_t i = 0; i < sizeof f / sizeof *f; i++)
    if (f[i].has) add_feature(&used, f[i].name);
  /* F16C, VNNI and BF16 from CPUID itself, as vmath.c's, igemm.c's and
   * bf16dot.c's dispatchers read them: clang 14 (the fuzz build's) knows no feature
   * string for them. */
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1)) add_feature(&used, "f16c");
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 11 & 1)) add_feature(&used, "avx512vnni");
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1)) add_feature(&used, "avxvnni");
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1)) add_feature(&used, "avx512bf16");
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 25 & 1)) add_feature(&used, "amx-int8");
#endif
  if (!used) add_feature(&used, "baseline");
}

static void cpu_init(void) {
  read_brand();
  read_features();
}

tolk_cpu_info tolk_cpu_describe(void) {
  pthread_once(&cpu_once, cpu_init);
  enum kern_isa best = KERN_ISA_SCALAR;
  if (kern_isa_supported(KERN_ISA_AVX512)) best = KERN_ISA_AVX512;
  else if (kern_isa_supported(KERN_ISA_AVX2)) best = KERN_ISA_AVX2;
  const char *env = getenv("TOLK_ISA");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  tolk_cpu_info in = {
      .model = brand,
      .features = features,
      .float_isa = kern_isa_name(kern_isa_active()),
      .int8_isa = kern_igemm_isa(),
      .best_isa = kern_isa_name(best),
      .forced = env && *env ? env : NULL,
      .cores = cores > 0 ? (int)cores : 1,
  };
  return in;
}
