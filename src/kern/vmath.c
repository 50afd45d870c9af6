/*
 * vmath.c — the baseline-ISA build of vmath.h's loops and the run-time
 * choice between it and the AVX2 and AVX-512 builds (x86/vmath_avx2.c,
 * x86/vmath_avx512.c), plus the same choice for float16 conversion (F16C).
 * The choice follows kern_isa_active(), so TOLK_ISA=scalar forces the
 * portable code.
 */
/* The selects in vmath.h become blends only when GCC may evaluate both
 * sides regardless of FP exceptions, which tolk never inspects; values do
 * not change (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "../core/half.h"
#include "kern.h"
#include "vmath.h"

VM_LOOPS(portable)

/* One ISA's build of the functions below. */
struct vm_impl {
  void (*vm_f32)(enum kern_vm_fn f, int64_t n, float *y, const float *x);
  void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
  void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
  void (*log_softmax)(int64_t n, float *y, const float *x);
  float (*log_softmax_terms)(int64_t n, const float *x, float *mx);
  int64_t (*next_group_above)(int64_t n, const float *x, int64_t from, float mx, float lse, float add,
                              float thr);
  int64_t (*argmax)(int64_t n, const float *x);
  int64_t (*argmax_near)(int64_t n, const float *x, float margin, int *clear);
  void (*minmax)(int64_t n, const float *x, float *mn, float *mx);
};

/* One ISA's build: its loops' prototypes (vmath.h, VM_LOOPS) and its row
 * of function pointers, with the float16 conversions given. */
#define VM_TIER(suffix, f16_to_f32, f32_to_f16)                                                              \
  void kern_vm_f32_##suffix(enum kern_vm_fn f, int64_t n, float *y, const float *x);                         \
  void kern_log_softmax_f32_##suffix(int64_t n, float *y, const float *x);                                   \
  float kern_log_softmax_terms_f32_##suffix(int64_t n, const float *x, float *mx);                           \
  int64_t kern_next_group_above_f32_##suffix(int64_t n, const float *x, int64_t from, float mx, float lse,   \
                                             float add, float thr);                                          \
  int64_t kern_argmax_f32_##suffix(int64_t n, const float *x);                                               \
  int64_t kern_argmax_near_f32_##suffix(int64_t n, const float *x, float margin, int *clear);                 \
  void kern_minmax_f32_##suffix(int64_t n, const float *x, float *mn, float *mx);                            \
  static const struct vm_impl impl_##suffix = {                                                              \
      kern_vm_f32_##suffix,           f16_to_f32,                          f32_to_f16,                       \
      kern_log_softmax_f32_##suffix,  kern_log_softmax_terms_f32_##suffix, kern_next_group_above_f32_##suffix, \
      kern_argmax_f32_##suffix,       kern_argmax_near_f32_##suffix,       kern_minmax_f32_##suffix};

VM_TIER(portable, tolk_f16_to_f32_n, tolk_f32_to_f16_n)

#if defined(__x86_64__)
#include <cpuid.h>
void kern_f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n);
void kern_f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n);
VM_TIER(avx2, kern_f16_to_f32_avx2, kern_f32_to_f16_avx2)
/* float16 conversion stays F16C's 256-bit code: it is not what a step waits on. */
VM_TIER(avx512, kern_f16_to_f32_avx2, kern_f32_to_f16_avx2)

/* F16C: CPUID leaf 1, ECX bit 29 (every AVX2 CPU has it, but it is a bit
 * of its own; read directly as not every compiler knows the feature name). */
static bool have_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

/* The ISA the dispatcher decides (TOLK_ISA, kern_isa_force), given F16C. */
static const struct vm_impl *impl(void) {
  static int f16c = -1; /* benign race: every thread stores the same value */
  int h = __atomic_load_n(&f16c, __ATOMIC_RELAXED);
  if (h < 0) {
    h = have_f16c();
    __atomic_store_n(&f16c, h, __ATOMIC_RELAXED);
  }
  if (!h) return &impl_portable;
  switch (kern_isa_active()) {
  case KERN_ISA_AVX512: return &impl_avx512;
  case KERN_ISA_AVX2: return &impl_avx2;
  default: return &impl_portable;
  }
}
#else
static const struct vm_impl *impl(void) { return &impl_portable; }
#endif

void kern_vm_f32(enum kern_vm_fn f, int64_t n, float *y, const float *x) {
  impl()->vm_f32(f, n, y, x);
}

void kern_f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
  impl()->f16_to_f32(src, dst, n);
}

void kern_f32_to_f16(const float *src, uint16_t *dst, int64_t n) {
  impl()->f32_to_f16(src, dst, n);
}

void kern_log_softmax_f32(int64_t n, float *y, const float *x) { impl()->log_softmax(n, y, x); }

float kern_log_softmax_terms_f32(int64_t n, const float *x, float *mx) {
  return impl()->log_softmax_terms(n, x, mx);
}

int64_t kern_next_group_above_f32(int64_t n, const float *x, int64_t from, float mx, float lse, float add,
                                  float thr) {
  return impl()->next_group_above(n, x, from, mx, lse, add, thr);
}

int64_t kern_argmax_f32(int64_t n, const float *x) { return impl()->argmax(n, x); }

int64_t kern_argmax_near_f32(int64_t n, const float *x, float margin, int *clear) {
  return impl()->argmax_near(n, x, margin, clear);
}

void kern_minmax_f32(int64_t n, const float *x, float *mn, float *mx) { impl()->minmax(n, x, mn, mx); }
