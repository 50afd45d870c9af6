/*
 * vmath.h — branch-free float approximations of exp, sigmoid, tanh, erf
 * and GELU, written as plain C so that the compiler vectorises the loops
 * that call them. vmath.c includes this at the baseline ISA (SSE2 on
 * x86-64) and x86/vmath_avx2.c again with AVX2 + FMA; ISO C mode (-std=c11)
 * forbids contracting a*b+c into an FMA, so both builds give bit-identical
 * results and the tests can hold one against the other.
 *
 * Accuracy against the exact functions (checked in
 * tests/test_ops_elementwise_vmath.c over a dense sweep):
 *   exp      relative error < 3e-7 on [-87, 88]; correct Inf, gradual
 *            underflow to subnormals and 0, NaN in → NaN out;
 *   sigmoid  absolute error < 2e-7 (relative < 3e-7 where it is ≥ 1e-30);
 *   tanh     relative error < 5e-7 (odd Taylor series below |x| 0.5, then
 *            (1 - e^-2|x|) / (1 + e^-2|x|), which never loses to cancellation);
 *   erf      absolute error < 2e-7, relative < 5e-7 (odd Taylor series below
 *            |x| 0.5, then 1 - erfc from the Chebyshev fit of Numerical
 *            Recipes' erfcc, fractional error 1.2e-7);
 *   gelu     relative error < 5e-7 + 1.5e-7·x² (on the negative side through
 *            erfc, so the tail does not cancel; the x² part is the rounding
 *            of the -x²/2 fed to exp, which matters only where |gelu| is
 *            below 1e-4); gelu_tanh likewise through 2e/(1+e).
 */
#ifndef TOLK_KERN_VMATH_H
#define TOLK_KERN_VMATH_H

#include <math.h>
#include <stdint.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kern.h"

/* Clang contracts a*b+c into FMA by default even in ISO mode; keep the two
 * builds identical there too (GCC does not contract under -std=c11). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* 2^k for k in [-126, 127], by building the exponent field. */
static inline float vm_pow2i(int32_t k) {
  union {
    uint32_t u;
    float f;
  } b = {(uint32_t)(k + 127) << 23};
  return b.f;
}

static inline float vm_exp(float x) {
  /* Clamp so that 2^n stays in [-150, 128]; NaN becomes -104 here and is
   * put back at the end. Beyond the clamps the result is 0 or Inf anyway. */
  float xc = x > -104.0f ? x : -104.0f;
  xc = xc < 89.0f ? xc : 89.0f;
  /* x = n ln2 + r, |r| ≤ ln2 / 2; n rounded to nearest by the 1.5·2^23 trick. */
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f; /* ln2 in two parts (Cody–Waite) */
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  /* 2^n in two normal halves, so subnormal results and overflow to Inf come
   * out of ordinary multiplication. */
  int32_t k = (int32_t)n, k1 = k / 2, k2 = k - k1;
  y = y * vm_pow2i(k1) * vm_pow2i(k2);
  return x == x ? y : x;
}

/* 1 or 0: for blending two computed values arithmetically (w·a + (1-w)·b).
 * GCC turns `c ? f(x) : g(x)` into masked evaluation whose idle lanes can
 * run into subnormal slow paths (measured: 3 → 25 ns per element); the
 * blend keeps every lane on ordinary numbers, as long as both sides are
 * finite, which the callers ensure by clamping each side's input. */
static inline float vm_w(int c) { return c ? 1.0f : 0.0f; }

/* The exp argument is kept ≥ -87 so that no lane meets a subnormal: from
 * x = 87 on, 1 / (1 + e^-x) is 1.0f anyway. */
static inline float vm_sigmoid(float x) {
  float m = -x > -87.0f ? -x : -87.0f;
  float r = 1.0f / (1.0f + vm_exp(m));
  return x == x ? r : x;
}

/* a - a³/3 + 2a⁵/15 - 17a⁷/315 + 62a⁹/2835 - 1382a¹¹/155925 + 21844a¹³/6081075;
 * the first omitted term is below 5e-8 for a < 0.5. */
static inline float vm_tanh_small(float a) {
  float a2 = a * a;
  float ps = -0.0088632355299021966f + a2 * 0.0035921280365724810f;
  ps = 0.021869488536155203f + a2 * ps;
  ps = -0.053968253968253968f + a2 * ps;
  ps = 0.13333333333333333f + a2 * ps;
  ps = -0.33333333333333333f + a2 * ps;
  return a + a * a2 * ps;
}

static inline float vm_tanh(float x) {
  float a = fabsf(x), w = vm_w(a < 0.5f);
  float as = a < 0.5f ? a : 0.5f;
  /* From a = 9 on, tanh is 1.0f in float; the clamp keeps e normal. */
  float e = vm_exp(-2.0f * (a < 9.0f ? a : 9.0f));
  float tl = (1.0f - e) / (1.0f + e);
  float r = copysignf(w * vm_tanh_small(as) + (1.0f - w) * tl, x); /* tanh(-0) = -0 */
  return x == x ? r : x;
}

/* erfc(a) for a ≥ 0.5: t·exp(-a² + P(t)), t = 1 / (1 + a/2), P the
 * Chebyshev fit of Numerical Recipes' erfcc (fractional error 1.2e-7). 0
 * from a = 9 on (erfc(9) = 4e-37), where exp would go subnormal. */
static inline float vm_erfc_big(float a) {
  float ac = a < 9.0f ? a : 9.0f; /* NaN → 9; callers put NaN back */
  float t = 1.0f / (1.0f + 0.5f * ac);
  float q = 0.17087277f;
  q = -0.82215223f + t * q;
  q = 1.48851587f + t * q;
  q = -1.13520398f + t * q;
  q = 0.27886807f + t * q;
  q = -0.18628806f + t * q;
  q = 0.09678418f + t * q;
  q = 0.37409196f + t * q;
  q = 1.00002368f + t * q;
  q = -1.26551223f + t * q;
  return t * vm_exp(q - ac * ac) * vm_w(a < 9.0f);
}

/* erf(a) for 0 ≤ a ≤ 0.5: (2/√π)(a - a³/3 + a⁵/10 - a⁷/42 + a⁹/216 -
 * a¹¹/1320); the first omitted term is below 1.5e-8. */
static inline float vm_erf_small(float a) {
  float a2 = a * a;
  float ps = 0.0052239776254421878f + a2 * -0.00085483270234508327f;
  ps = -0.026866170645131252f + a2 * ps;
  ps = 0.11283791670955126f + a2 * ps;
  ps = -0.37612638903183753f + a2 * ps;
  return a * (1.1283791670955126f + a2 * ps);
}

static inline float vm_erf(float x) {
  float a = fabsf(x), w = vm_w(a < 0.5f), as = a < 0.5f ? a : 0.5f;
  float r = w * vm_erf_small(as) + (1.0f - w) * (1.0f - vm_erfc_big(a));
  r = copysignf(r, x);
  return x == x ? r : x;
}

/* 0.5·x·(1 + erf(x/√2)); for x/√2 ≤ -0.5 as 0.5·x·erfc(|x|/√2), which does
 * not cancel. -Inf gives NaN, as the formula's -Inf · 0 does. */
static inline float vm_gelu(float x) {
  float z = x * 0.70710678118654752f, a = fabsf(z);
  float w = vm_w(a < 0.5f), as = a < 0.5f ? a : 0.5f, neg = vm_w(x < 0);
  float big = vm_erfc_big(a); /* erfc(|z|) */
  float s = w * (1.0f + copysignf(vm_erf_small(as), z)) +
            (1.0f - w) * (neg * big + (1.0f - neg) * (2.0f - big));
  float r = 0.5f * x * s;
  return x == x && x != -INFINITY ? r : x * 0.0f;
}

/* 0.5·x·(1 + tanh(u)), u = √(2/π)(x + 0.044715x³); for u ≤ -0.5,
 * 1 + tanh(u) = 2e / (1 + e) with e = e^-2|u|, which does not cancel; 0
 * from |u| = 43 on, where e would go subnormal. -Inf gives NaN as vm_gelu. */
static inline float vm_gelu_tanh(float x) {
  float u = 0.79788456080286536f * (x + 0.044715f * x * x * x), au = fabsf(u);
  float e = vm_exp(-2.0f * (au < 43.0f ? au : 43.0f));
  float neg = vm_w(u <= -0.5f);
  float s = neg * (2.0f * e / (1.0f + e)) * vm_w(au < 43.0f) + (1.0f - neg) * (1.0f + vm_tanh(u));
  float r = 0.5f * x * s;
  return x == x && x != -INFINITY ? r : x * 0.0f;
}

/* y[i] = fn(x[i]) for n floats; y may equal x. A loop of its own per
 * function, so that the compiler vectorises each one. */
#define VM_LOOP(fn, suffix)                                                              \
  static void fn##_##suffix(int64_t n, float *y, const float *x) {                       \
    for (int64_t i = 0; i < n; i++) y[i] = fn(x[i]);                                     \
  }

/* The largest of x[0..n), NaN passed over, and *nan whether there was
 * one: element i to lane i mod 8, the lanes then in order, then the tail —
 * one fixed order for every ISA, so ±0 come out the same everywhere. GCC
 * leaves the reduction scalar; vmaxps(v, m) is v > m ? v : m, NaN and
 * signed zeros included. */
static inline float vm_row_max(int64_t n, const float *x, int *nan) {
  enum { LANES = 8 };
  const int64_t whole = n / LANES * LANES;
  float lmax[LANES];
  *nan = 0;
#if defined(__AVX2__)
  __m256 vm = _mm256_set1_ps(-INFINITY), vn = _mm256_setzero_ps();
  for (int64_t i = 0; i < whole; i += LANES) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vm = _mm256_max_ps(v, vm);
    vn = _mm256_or_ps(vn, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  _mm256_storeu_ps(lmax, vm);
  *nan = _mm256_movemask_ps(vn) != 0;
#else
  for (int l = 0; l < LANES; l++) lmax[l] = -INFINITY;
  for (int64_t i = 0; i < whole; i += LANES)
    for (int l = 0; l < LANES; l++) {
      lmax[l] = x[i + l] > lmax[l] ? x[i + l] : lmax[l];
      *nan |= x[i + l] != x[i + l];
    }
#endif
  float m = -INFINITY;
  for (int l = 0; l < LANES; l++) m = lmax[l] > m ? lmax[l] : m;
  for (int64_t i = whole; i < n; i++) {
    m = x[i] > m ? x[i] : m;
    *nan |= x[i] != x[i];
  }
  return m;
}

/* The smallest and largest of x[0..n), NaN passed over (FLT_MAX and
 * -FLT_MAX when nothing else is there), in sixteen lanes: one running
 * minimum is a chain as long as the row (4 cycles an element in
 * DynamicQuantizeLinear, 2 % of an int8 beam search). The order changes no
 * extreme but for the sign of a zero, which is either here. */
static inline void vm_minmax(int64_t n, const float *x, float *mn_out, float *mx_out) {
  enum { LANES = 16 };
  float lmn[LANES], lmx[LANES];
  for (int l = 0; l < LANES; l++) lmn[l] = 3.40282347e+38f, lmx[l] = -3.40282347e+38f;
  const int64_t whole = n / LANES * LANES;
#if defined(__AVX2__)
  /* vminps(v, m) is v < m ? v : m, NaN included: the loop below, which GCC
   * leaves scalar. */
  __m256 n0 = _mm256_loadu_ps(lmn), n1 = n0, x0 = _mm256_loadu_ps(lmx), x1 = x0;
  for (int64_t i = 0; i < whole; i += LANES) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    n0 = _mm256_min_ps(v0, n0), n1 = _mm256_min_ps(v1, n1);
    x0 = _mm256_max_ps(v0, x0), x1 = _mm256_max_ps(v1, x1);
  }
  _mm256_storeu_ps(lmn, n0), _mm256_storeu_ps(lmn + 8, n1);
  _mm256_storeu_ps(lmx, x0), _mm256_storeu_ps(lmx + 8, x1);
#else
  for (int64_t i = 0; i < whole; i += LANES)
    for (int l = 0; l < LANES; l++) {
      lmn[l] = x[i + l] < lmn[l] ? x[i + l] : lmn[l];
      lmx[l] = x[i + l] > lmx[l] ? x[i + l] : lmx[l];
    }
#endif
  float mn = 3.40282347e+38f, mx = -3.40282347e+38f;
  for (int l = 0; l < LANES; l++) {
    mn = lmn[l] < mn ? lmn[l] : mn;
    mx = lmx[l] > mx ? lmx[l] : mx;
  }
  for (int64_t i = whole; i < n; i++) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  *mn_out = mn;
  *mx_out = mx;
}

/* The two constants of a row's log-softmax, y = (x - mx) - lse with mx
 * the row's largest and lse = log Σ exp(x - mx): a beam search needs them
 * for every row of logits, 65,001 a row for opus-mt, so every pass is a
 * vectorised loop. The sum goes to eight double lanes, element i to lane
 * i mod 8 in index order, then lane 0 to 7: a fixed order, so every ISA's
 * build gives the same bits. The exps are made a block at a time into a
 * buffer, which keeps each loop simple enough to vectorise. A row with
 * nothing above -Inf gets mx = lse = 0, which leaves it as it is. */
static inline float vm_log_softmax_terms(int64_t n, const float *x, float *mx_out) {
  enum { BLOCK = 256, LANES = 8 };
  const int64_t whole = n / LANES * LANES;
  int nan;
  const float mx = vm_row_max(n, x, &nan);
  *mx_out = 0.0f;
  if (mx == -INFINITY) return 0.0f;
  double lane[LANES] = {0};
  float e[BLOCK];
  for (int64_t i = 0; i < whole; i += BLOCK) {
    const int64_t m = whole - i < BLOCK ? whole - i : BLOCK;
    for (int64_t j = 0; j < m; j++) e[j] = vm_exp(x[i + j] - mx);
    for (int64_t j = 0; j < m; j += LANES)
      for (int l = 0; l < LANES; l++) lane[l] += (double)e[j + l];
  }
  for (int64_t i = whole; i < n; i++) lane[i - whole] += (double)vm_exp(x[i] - mx);
  double sum = 0;
  for (int l = 0; l < LANES; l++) sum += lane[l];
  *mx_out = mx;
  return (float)log(sum);
}

/* y = x - max - log Σ exp(x - max) over a row of n (y may be x). */
static inline void vm_log_softmax(int64_t n, float *y, const float *x) {
  float mx;
  const float lse = vm_log_softmax_terms(n, x, &mx);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] - mx - lse;
}

/* The first group x[g .. g + 8), g = from, from + 8, … while g + 8 ≤ n,
 * with an element whose ((x - mx) - lse) + add — a candidate's score in a
 * beam search: its log-prob plus its beam's running score — is above thr;
 * the first g past the whole groups when none is. NaN is never above. */
static inline int64_t vm_next_group_above(int64_t n, const float *x, int64_t from, float mx, float lse,
                                          float add, float thr) {
  int64_t g = from;
#if defined(__AVX2__)
  const __m256 vmx = _mm256_set1_ps(mx), vlse = _mm256_set1_ps(lse), vadd = _mm256_set1_ps(add),
               vthr = _mm256_set1_ps(thr);
  for (; g + 8 <= n; g += 8) {
    const __m256 y = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + g), vmx), vlse), vadd);
    if (_mm256_movemask_ps(_mm256_cmp_ps(y, vthr, _CMP_GT_OQ))) return g;
  }
#else
  for (; g + 8 <= n; g += 8)
    for (int l = 0; l < 8; l++)
      if (((x[g + l] - mx) - lse) + add > thr) return g;
#endif
  return g;
}

/* The first i ≥ from with x[i] - m ≥ lo (lo = 0: x[i] == m, for a finite
 * m that is the row's largest); one must exist. */
static inline int64_t vm_first_near(int64_t n, const float *x, int64_t from, float m, float lo) {
  int64_t i = from;
#if defined(__AVX2__)
  const __m256 vmx = _mm256_set1_ps(m), vlo = _mm256_set1_ps(lo);
  for (; i + 8 <= n; i += 8) {
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx), vlo, _CMP_GE_OQ));
    if (hit) return i + __builtin_ctz((unsigned)hit);
  }
#endif
  while (!(x[i] - m >= lo)) i++;
  return i;
}

/* The index a scan keeping the first strictly greater value gives (best =
 * 0; best = i where x[i] > x[best]): the first index of the largest, NaN
 * never taken, x[0] kept when it is NaN or nothing is above -Inf. Two
 * passes: the largest m (vm_row_max), then the first element within
 * `margin` below m, which is the scan's index when it equals m (±0 compare
 * equal, as the scan treats them); if it does not, the first equal one
 * after it. A greedy step takes it of every 65,001-wide row, where the
 * scan's compare-and-move chain cost ~60 µs (Zen 2); these passes cost ~4.
 *
 * *clear: no NaN in the row, m finite (or the row all -Inf), and no element
 * before the returned index within `margin` below m (x - m ≥ -margin, the
 * difference as float) — what search.c needs to know that a log-softmax,
 * which subtracts one constant from every element, cannot round an earlier
 * element up to a tie with the largest. */
static inline int64_t vm_argmax_near(int64_t n, const float *x, float margin, int *clear) {
  *clear = 0;
  if (n <= 0) return *clear = 1, 0;
  if (x[0] != x[0]) return 0;
  int nan;
  const float m = vm_row_max(n, x, &nan);
  if (m == -INFINITY) return *clear = !nan, 0;
  if (m == INFINITY) { /* x - m is NaN even at x = m: never clear */
    int64_t i = 0;
    while (x[i] != m) i++;
    return i;
  }
  const int64_t i = vm_first_near(n, x, 0, m, -margin);
  if (x[i] != m) return vm_first_near(n, x, i, m, 0.0f);
  *clear = !nan;
  return i;
}

static inline int64_t vm_argmax(int64_t n, const float *x) {
  int clear;
  return vm_argmax_near(n, x, 0.0f, &clear);
}

/* The loops and kern_vm_f32_<suffix> (kern.h), which picks one by f: the
 * same code in every ISA's build; kern_log_softmax_f32_<suffix>. */
#define VM_LOOPS(suffix)                                                                 \
  VM_LOOP(vm_exp, suffix)                                                                \
  VM_LOOP(vm_sigmoid, suffix)                                                            \
  VM_LOOP(vm_tanh, suffix)                                                               \
  VM_LOOP(vm_erf, suffix)                                                                \
  VM_LOOP(vm_gelu, suffix)                                                               \
  VM_LOOP(vm_gelu_tanh, suffix)                                                          \
  void kern_vm_f32_##suffix(enum kern_vm_fn f, int64_t n, float *y, const float *x) {    \
    switch (f) {                                                                         \
    case KERN_VM_EXP: vm_exp_##suffix(n, y, x); break;                                   \
    case KERN_VM_SIGMOID: vm_sigmoid_##suffix(n, y, x); break;                           \
    case KERN_VM_TANH: vm_tanh_##suffix(n, y, x); break;                                 \
    case KERN_VM_ERF: vm_erf_##suffix(n, y, x); break;                                   \
    case KERN_VM_GELU: vm_gelu_##suffix(n, y, x); break;                                 \
    case KERN_VM_GELU_TANH: vm_gelu_tanh_##suffix(n, y, x); break;                       \
    }                                                                                    \
  }                                                                                      \
  void kern_log_softmax_f32_##suffix(int64_t n, float *y, const float *x) {              \
    vm_log_softmax(n, y, x);                                                             \
  }                                                                                      \
  float kern_log_softmax_terms_f32_##suffix(int64_t n, const float *x, float *mx) {      \
    return vm_log_softmax_terms(n, x, mx);                                               \
  }                                                                                      \
  int64_t kern_next_group_above_f32_##suffix(int64_t n, const float *x, int64_t from, float mx, \
                                             float lse, float add, float thr) {          \
    return vm_next_group_above(n, x, from, mx, lse, add, thr);                           \
  }                                                                                      \
  int64_t kern_argmax_f32_##suffix(int64_t n, const float *x) { return vm_argmax(n, x); }          \
  void kern_minmax_f32_##suffix(int64_t n, const float *x, float *mn, float *mx) { vm_minmax(n, x, mn, mx); } \
  int64_t kern_argmax_near_f32_##suffix(int64_t n, const float *x, float margin, int *clear) {    \
    return vm_argmax_near(n, x, margin, clear);                                                  \
  }

#endif /* TOLK_KERN_VMATH_H */
