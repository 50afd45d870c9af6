/*
 * test_kern_vmath.c — the vectorised float functions of
 * src/kern/vmath.h against libm in double over a dense sweep (every 1/1024
 * on [-40, 40], log-spaced magnitudes from 1e-38 to 1e4, the exp range
 * edges, ±0, ±Inf, NaN), holding them to the error bounds the header states;
 * every tier's build (AVX2, AVX-512) against the portable one, bit for bit,
 * on each the CPU has; and the
 * F16C float16 conversions against half.h on every pattern and a sweep.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kern/kern.h"
#include "testutil.h"

static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
/* References written so that the negative tails do not cancel:
 * 1 + erf(z) = erfc(-z), and 1 + tanh(u) = 2e / (1 + e) with e = exp(2u). */
static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ref_gelu_tanh(double x) {
  double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return u < 0 ? 0.5 * x * 2 * exp(2 * u) / (1 + exp(2 * u)) : 0.5 * x * (1 + tanh(u));
}

struct fn {
  enum kern_vm_fn f;
  const char *name;
  double (*ref)(double);
  double max_rel; /* bound on |y - ref| / |ref| where |ref| >= rel_floor … */
  double rel_x2;  /* … plus rel_x2·x² (an exp of a rounded -x² loses that much) */
  double rel_floor;
  double max_abs; /* bound on |y - ref| everywhere (finite ref) */
};

static const struct fn fns[] = {
    {KERN_VM_EXP, "exp", exp, 3e-7, 0, 1.2e-38, 0},
    {KERN_VM_SIGMOID, "sigmoid", ref_sigmoid, 3e-7, 0, 1e-30, 2e-7},
    {KERN_VM_TANH, "tanh", tanh, 5e-7, 0, 0, 2e-7},
    {KERN_VM_ERF, "erf", erf, 5e-7, 0, 0, 2e-7},
    {KERN_VM_GELU, "gelu", ref_gelu, 5e-7, 1.5e-7, 1e-30, 0},
    {KERN_VM_GELU_TANH, "gelu_tanh", ref_gelu_tanh, 5e-7, 1.5e-7, 1e-30, 0},
};

/* The log-softmax as search.c wrote it before it moved here: the same
 * bits are wanted from the kernel, on every ISA. */
static void old_log_softmax(float *x, size_t n) {
  enum { BLOCK = 256, LANES = 8 };
  float mx = -INFINITY;
  for (size_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  if (mx == -INFINITY) return;
  double lane[LANES] = {0};
  float d[BLOCK], e[BLOCK];
  for (size_t i = 0; i < n; i += BLOCK) {
    size_t m = n - i < BLOCK ? n - i : BLOCK;
    for (size_t j = 0; j < m; j++) d[j] = x[i + j] - mx;
    kern_vm_f32(KERN_VM_EXP, (int64_t)m, e, d);
    for (size_t j = m; j < BLOCK; j++) e[j] = 0.0f;
    for (size_t j = 0; j < BLOCK; j += LANES)
      for (size_t l = 0; l < LANES; l++) lane[l] += e[j + l];
  }
  double sum = 0;
  for (size_t l = 0; l < LANES; l++) sum += lane[l];
  float lse = (float)log(sum);
  for (size_t i = 0; i < n; i++) x[i] = x[i] - mx - lse;
}

/* kern_log_softmax_f32 on rows of every length around its blocks, with
 * -Inf (masked tokens), a NaN, a row of -Inf only and a row of one: bit
 * for bit the old code and the portable build, in place and not, and
 * within 1e-6 (relative to the row's log-sum-exp) of a double reference. */
static void check_log_softmax(void) {
  const int64_t lens[] = {1, 2, 7, 8, 9, 255, 256, 257, 263, 1000, 65001};
  const size_t cap = 65001;
  float *x = malloc(cap * sizeof *x), *y = malloc(cap * sizeof *y), *yp = malloc(cap * sizeof *yp),
        *old = malloc(cap * sizeof *old), *in = malloc(cap * sizeof *in);
  uint32_t r = 12345;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    for (int form = 0; form < 4; form++) {
      int64_t n = lens[li];
      for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * (form == 1 ? 200.0f : 30.0f);
      }
      if (form == 1 && n > 3) x[n / 3] = -INFINITY, x[n - 1] = -INFINITY;
      if (form == 2) x[n / 2] = NAN;
      if (form == 3)
        for (int64_t i = 0; i < n; i++) x[i] = -INFINITY;
      memcpy(old, x, (size_t)n * sizeof *x);
      memcpy(in, x, (size_t)n * sizeof *x);
      old_log_softmax(old, (size_t)n);
      kern_log_softmax_f32(n, y, x);
      kern_log_softmax_f32_portable(n, yp, x);
      CHECK_MSG(memcmp(y, old, (size_t)n * sizeof *y) == 0, "log_softmax n=%lld form %d: not the old bits",
                (long long)n, form);
      CHECK_MSG(memcmp(y, yp, (size_t)n * sizeof *y) == 0,
                "log_softmax n=%lld form %d: dispatched and portable builds differ", (long long)n, form);
      kern_log_softmax_f32(n, x, x);
      CHECK_MSG(memcmp(x, y, (size_t)n * sizeof *y) == 0, "log_softmax n=%lld form %d: in place differs",
                (long long)n, form);
      /* Its two constants alone give the same bits, on both builds. */
      float tmx, tmxp;
      const float lse = kern_log_softmax_terms_f32(n, in, &tmx);
      const float lsep = kern_log_softmax_terms_f32_portable(n, in, &tmxp);
      CHECK_MSG(memcmp(&tmx, &tmxp, sizeof tmx) == 0 && memcmp(&lse, &lsep, sizeof lse) == 0,
                "log_softmax_terms n=%lld form %d: dispatched and portable builds differ", (long long)n, form);
      for (int64_t i = 0; i < n; i++) x[i] = (in[i] - tmx) - lse;
      CHECK_MSG(memcmp(x, y, (size_t)n * sizeof *y) == 0, "log_softmax_terms n=%lld form %d: not the kernel's bits",
                (long long)n, form);
      if (form == 2 || form == 3) continue;
      double mx = -INFINITY, z = 0;
      for (int64_t i = 0; i < n; i++) mx = in[i] > mx ? in[i] : mx;
      for (int64_t i = 0; i < n; i++) z += exp((double)in[i] - mx);
      double worst = 0;
      for (int64_t i = 0; i < n; i++) {
        double want = (double)in[i] - mx - log(z);
        if (isinf(want)) {
          CHECK_MSG(y[i] == -INFINITY, "log_softmax n=%lld: -Inf in, %g out", (long long)n, y[i]);
          continue;
        }
        double e = fabs((double)y[i] - want) / (fabs((double)in[i] - mx) + log(z) + 1.0);
        worst = e > worst ? e : worst;
      }
      CHECK_MSG(worst <= 1e-6, "log_softmax n=%lld form %d: error %.3g", (long long)n, form, worst);
    }
  }
  free(x);
  free(y);
  free(yp);
  free(old);
  free(in);
}

/* The scan search.c took the greedy token with before kern_argmax_f32. */
/* What the beam search's scan tested before it moved to the kernel: the
 * group's best score, NaN passed over, above thr. */
static int64_t ref_next_group_above(int64_t n, const float *x, int64_t from, float mx, float lse, float add,
                                    float thr) {
  int64_t g = from;
  for (; g + 8 <= n; g += 8) {
    float best = -INFINITY;
    for (int l = 0; l < 8; l++) {
      const float y = ((x[g + l] - mx) - lse) + add;
      best = y > best ? y : best;
    }
    if (best > thr) return g;
  }
  return g;
}

/* kern_next_group_above_f32 against that scan from every group start, with
 * thresholds taken from the row's own scores (an equal score is not above),
 * ±Inf, rows with NaN and -Inf, and lengths around the groups. */
static void check_next_group_above(void) {
  const int64_t lens[] = {1, 7, 8, 9, 16, 17, 63, 64, 65, 203};
  float x[203];
  uint32_t r = 777;
  int checks = 0, found = 0;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    const int64_t n = lens[li];
    for (int form = 0; form < 3; form++) {
      for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 20.0f;
      }
      if (form == 1)
        for (int64_t i = 0; i < n; i += 3) x[i] = NAN;
      if (form == 2)
        for (int64_t i = 1; i < n; i += 2) x[i] = -INFINITY;
      float mx;
      const float lse = kern_log_softmax_terms_f32(n, x, &mx), add = -3.25f;
      for (int t = 0; t < 6; t++) {
        const int64_t at = (int64_t)(r >> 8) % n;
        float thr = t == 0 ? -INFINITY : t == 1 ? INFINITY : ((x[(at * (t + 1)) % n] - mx) - lse) + add;
        if (thr != thr) thr = 0.0f;
        for (int64_t from = 0; from + 8 <= n + 7; from += 8) {
          const int64_t want = ref_next_group_above(n, x, from, mx, lse, add, thr);
          const int64_t got = kern_next_group_above_f32(n, x, from, mx, lse, add, thr);
          const int64_t got_p = kern_next_group_above_f32_portable(n, x, from, mx, lse, add, thr);
          CHECK_MSG(got == want && got_p == want,
                    "next_group_above n=%lld form %d thr %g from %lld: %lld (portable %lld), want %lld",
                    (long long)n, form, thr, (long long)from, (long long)got, (long long)got_p, (long long)want);
          checks++;
          found += want + 8 <= n;
        }
      }
    }
  }
  printf("next_group_above: %d scans, %d found a group\n", checks, found);
}

static int64_t scan_argmax(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* kern_argmax_f32, dispatched and portable, against the scan on rows of
 * every length around the lanes, drawn from few values (ties in and across
 * lanes), with ±0, -Inf, NaN (first, inside, everywhere) and rows of -Inf. */
static void check_argmax(void) {
  const int64_t lens[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 65001};
  const float pool[] = {-INFINITY, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f, 2.0f, NAN};
  float *x = malloc(65001 * sizeof *x);
  uint32_t r = 777;
  int rows = 0;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (int form = 0; form < 40; form++) {
      const int64_t n = lens[li];
      /* form % 8: how many of the pool's values may appear (ties grow as it
       * shrinks); forms 8-15 add NaNs, 16-23 start with NaN, 24-31 are
       * wide random floats, 32-39 -Inf but for a few. */
      for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        int k = form % 8 + 1;
        x[i] = form >= 24 && form < 32 ? ((float)(r >> 8) / 16777216.0f - 0.5f) * 1e3f
               : form >= 32            ? -INFINITY
                                       : pool[(r >> 16) % (unsigned)(k < 7 ? k : 7)];
        if (form >= 8 && form < 16 && (r >> 5) % 5 == 0) x[i] = NAN;
        if (form >= 32 && (r >> 7) % 97 == 0) x[i] = pool[(r >> 20) % 7];
      }
      if (form >= 16 && form < 24 && n) x[0] = NAN;
      int64_t want = scan_argmax(x, n), got = kern_argmax_f32(n, x), gotp = kern_argmax_f32_portable(n, x);
      CHECK_MSG(got == want, "argmax n=%lld form %d: %lld, the scan %lld", (long long)n, form, (long long)got,
                (long long)want);
      CHECK_MSG(gotp == want, "argmax n=%lld form %d: portable %lld, the scan %lld", (long long)n, form,
                (long long)gotp, (long long)want);
      rows++;
    }
  CHECK_MSG(rows == 14 * 40, "argmax: %d rows", rows);
  free(x);
}

/* kern_argmax_near_f32 with search.c's margin (2^-20) on rows whose top
 * is a cluster of values a few ulps to a few margins apart, before and after
 * the largest: the index is the scan's, both builds agree, and wherever it
 * says clear, the scan over the row's log-softmax gives the same index —
 * the greedy search's shortcut. Some rows must tie after the log-softmax
 * (else the check could not fail) and every one of those must be unclear. */
static void check_argmax_near(void) {
  const float margin = 0x1p-20f;
  const int64_t lens[] = {1, 2, 9, 17, 64, 257, 1000, 65001};
  float *x = malloc(65001 * sizeof *x), *y = malloc(65001 * sizeof *y);
  uint32_t r = 4242;
  int clear_rows = 0, unclear_rows = 0, flipped = 0;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (int form = 0; form < 60; form++) {
      const int64_t n = lens[li];
      r = r * 1664525u + 1013904223u;
      const float top = ((float)(r >> 8) / 16777216.0f - 0.5f) * 40.0f;
      for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = top - 5.0f - (float)(r >> 8) / 16777216.0f * 20.0f;
      }
      /* The cluster: the largest at a random place, and up to 6 others, each
       * below it by a few ulps of it, or by about the margin. */
      r = r * 1664525u + 1013904223u;
      int64_t at = (int64_t)(r % (uint32_t)n);
      x[at] = top;
      for (int k = 0; k < 6 && n > 1; k++) {
        r = r * 1664525u + 1013904223u;
        int64_t j = (int64_t)((r >> 3) % (uint32_t)n);
        if (j == at) continue;
        float gap = (r >> 29) & 1 ? (float)(1 + (r >> 24) % 16) * (fabsf(top) + 1e-3f) * 0x1p-24f
                                  : margin * (0.25f + (float)((r >> 20) % 8) * 0.25f);
        x[j] = top - gap;
      }
      if (form % 10 == 9 && n > 2) x[n / 2] = -INFINITY;
      int c = -1, cp = -1;
      int64_t got = kern_argmax_near_f32(n, x, margin, &c), gotp = kern_argmax_near_f32_portable(n, x, margin, &cp);
      const int64_t want = scan_argmax(x, n);
      CHECK_MSG(got == want && gotp == want, "argmax_near n=%lld form %d: %lld / %lld, the scan %lld",
                (long long)n, form, (long long)got, (long long)gotp, (long long)want);
      CHECK_MSG(c == cp, "argmax_near n=%lld form %d: clear %d, portable %d", (long long)n, form, c, cp);
      kern_log_softmax_f32(n, y, x);
      const int64_t after = scan_argmax(y, n);
      flipped += after != want;
      if (c) {
        clear_rows++;
        CHECK_MSG(after == got, "argmax_near n=%lld form %d: clear, but the log-softmax's argmax is %lld, not %lld",
                  (long long)n, form, (long long)after, (long long)got);
      } else {
        unclear_rows++;
      }
    }
  CHECK_MSG(flipped > 0 && clear_rows > 0 && unclear_rows > 0,
            "argmax_near: %d rows tied after the log-softmax, %d clear, %d not: the rows test nothing", flipped,
            clear_rows, unclear_rows);
  /* The margin itself: an earlier element exactly at it is near, at twice it not. */
  const float edge[][3] = {{1.0f - margin, 0.5f, 1.0f}, {1.0f - 2 * margin, 0.5f, 1.0f}};
  for (int e = 0; e < 2; e++) {
    int c = -1;
    int64_t i = kern_argmax_near_f32(3, edge[e], margin, &c);
    CHECK_MSG(i == 2 && c == (e == 1), "argmax_near edge %d: index %lld clear %d", e, (long long)i, c);
  }
  /* NaN anywhere, or a largest of +Inf: never clear, the scan's index still. */
  float odd[17];
  for (int k = 0; k < 17; k++) odd[k] = (float)k;
  odd[11] = NAN;
  int c = -1;
  CHECK_MSG(kern_argmax_near_f32(17, odd, margin, &c) == 16 && c == 0, "argmax_near: NaN row clear %d", c);
  odd[11] = INFINITY;
  CHECK_MSG(kern_argmax_near_f32(17, odd, margin, &c) == 11 && c == 0, "argmax_near: +Inf row clear %d", c);
  printf("argmax_near: %d rows clear, %d not, %d tied after the log-softmax\n", clear_rows, unclear_rows, flipped);
  free(x);
  free(y);
}

/* The scan quant.c made: the first smallest and largest, NaN passed over. */
static void scan_minmax(const float *x, int64_t n, float *mn, float *mx) {
  *mn = FLT_MAX, *mx = -FLT_MAX;
  for (int64_t i = 0; i < n; i++) {
    *mn = x[i] < *mn ? x[i] : *mn;
    *mx = x[i] > *mx ? x[i] : *mx;
  }
}

/* kern_minmax_f32, dispatched and portable, against the scan on rows of
 * every length around the lanes: random floats, with NaNs, all NaN, ±Inf,
 * and rows of ±0 only (where which zero comes back is free, so zeros are
 * compared by value and anything else bit for bit). */
static void check_minmax(void) {
  const int64_t lens[] = {0, 1, 2, 15, 16, 17, 31, 33, 64, 1000, 2048};
  const float pool[] = {-0.0f, 0.0f, INFINITY, -INFINITY, NAN};
  float *x = malloc(2048 * sizeof *x);
  uint32_t r = 4242;
  int rows = 0;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (int form = 0; form < 6; form++) {
      const int64_t n = lens[li];
      for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        const float v = ((float)(r >> 8) / 16777216.0f - 0.5f) * 1e3f;
        x[i] = form == 0 ? v
               : form == 1 ? ((r >> 5) % 3 ? v : NAN)
               : form == 2 ? NAN
               : form == 3 ? ((r >> 5) % 7 ? v : pool[(r >> 12) % 5])
               : form == 4 ? pool[(r >> 12) % 2]
                           : -v; /* form 5: the extremes' places swapped */
      }
      float wn, wx, gn, gx, pn, px;
      scan_minmax(x, n, &wn, &wx);
      kern_minmax_f32(n, x, &gn, &gx);
      kern_minmax_f32_portable(n, x, &pn, &px);
      const bool zero = wn == 0.0f || wx == 0.0f;
      CHECK_MSG(zero ? gn == wn && gx == wx && pn == wn && px == wx
                     : !memcmp(&gn, &wn, 4) && !memcmp(&gx, &wx, 4) && !memcmp(&pn, &wn, 4) && !memcmp(&px, &wx, 4),
                "minmax n=%lld form %d: %g %g, portable %g %g, the scan %g %g", (long long)n, form, gn, gx, pn, px,
                wn, wx);
      rows++;
    }
  CHECK_MSG(rows == 11 * 6, "minmax: %d rows", rows);
  free(x);
}

int main(void) {
  /* The sweep. */
  size_t cap = 200000, n = 0;
  float *x = malloc(cap * sizeof *x);
  for (int i = -40 * 1024; i <= 40 * 1024; i++) x[n++] = (float)i / 1024.0f;
  for (double m = 1e-38; m < 1e4; m *= 1.01) {
    x[n++] = (float)m;
    x[n++] = (float)-m;
  }
  for (float v = -110.0f; v <= -80.0f; v += 0.0625f) x[n++] = v;
  for (float v = 80.0f; v <= 92.0f; v += 0.0625f) x[n++] = v;
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283f, 88.72284f,
                            -87.33654f, -103.9f, 0.5f, -0.5f, 0.49999997f, 10.0f, -10.0f};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) x[n++] = specials[i];
  float *y = malloc(n * sizeof *y), *yp = malloc(n * sizeof *yp);

  /* Every tier this CPU has gives the portable build's bits. */
  const enum kern_isa first = kern_isa_active();
  for (int i = KERN_ISA_SCALAR; i <= KERN_ISA_AVX512; i++) {
    const enum kern_isa isa = (enum kern_isa)i;
    if (!kern_isa_force(isa)) {
      printf("isa %s: not on this CPU\n", kern_isa_name(isa));
      continue;
    }
    printf("isa %s:\n", kern_isa_name(isa));
    check_log_softmax();
    check_next_group_above();
    check_argmax();
    check_argmax_near();
    check_minmax();
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
      kern_vm_f32(fns[k].f, (int64_t)n, y, x);
      kern_vm_f32_portable(fns[k].f, (int64_t)n, yp, x);
      CHECK_MSG(memcmp(y, yp, n * sizeof *y) == 0, "isa %s %s: dispatched and portable builds differ",
                kern_isa_name(isa), fns[k].name);
    }
  }
  CHECK(kern_isa_force(first));

  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
    const struct fn *f = &fns[k];
    kern_vm_f32(f->f, (int64_t)n, y, x);
    double worst_rel = 0, worst_abs = 0;
    float at_rel = 0, at_abs = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
      double want = f->ref(x[i]), got = y[i];
      if (isnan(want) || isnan(got)) {
        if (isnan(want) != isnan(got) && bad++ < 5)
          CHECK_MSG(0, "%s(%a) = %a, want %a", f->name, x[i], got, want);
        continue;
      }
      if (isinf(want) || want > 3.4028234663852886e38) {
        /* Exp near its overflow edge may round either way to FLT_MAX or Inf. */
        if (!(got > 3.4e38) && bad++ < 5) CHECK_MSG(0, "%s(%a) = %a, want Inf", f->name, x[i], got);
        continue;
      }
      double err = fabs(got - want);
      if (err > worst_abs && f->max_abs > 0) worst_abs = err, at_abs = x[i];
      if (fabs(want) >= f->rel_floor && want != 0) {
        /* Scaled so that the bound is max_rel wherever it holds. */
        double rel = err / fabs(want) * f->max_rel / (f->max_rel + f->rel_x2 * x[i] * x[i]);
        if (rel > worst_rel) worst_rel = rel, at_rel = x[i];
      } else if (want == 0 && got != 0 && fabs(got) > 1e-37 && bad++ < 5) {
        CHECK_MSG(0, "%s(%a) = %a, want 0", f->name, x[i], got);
      }
    }
    printf("%-10s worst (scaled) rel %.3g at %a, worst abs %.3g at %a\n", f->name, worst_rel,
           (double)at_rel, worst_abs, (double)at_abs);
    CHECK_MSG(worst_rel <= f->max_rel, "%s: rel error %.3g at %a", f->name, worst_rel, (double)at_rel);
    CHECK_MSG(f->max_abs == 0 || worst_abs <= f->max_abs, "%s: abs error %.3g at %a", f->name,
              worst_abs, (double)at_abs);
    CHECK(bad == 0);
  }
  /* Limits that must be exact. */
  float lim[6] = {-INFINITY, INFINITY, 200.0f, -200.0f, 0.0f, -0.0f}, out[6];
  kern_vm_f32(KERN_VM_EXP, 6, out, lim);
  CHECK(out[0] == 0 && isinf(out[1]) && isinf(out[2]) && out[3] == 0 && out[4] == 1 && out[5] == 1);
  kern_vm_f32(KERN_VM_SIGMOID, 6, out, lim);
  CHECK(out[0] == 0 && out[1] == 1 && out[2] == 1 && out[3] == 0 && out[4] == 0.5f);
  kern_vm_f32(KERN_VM_TANH, 6, out, lim);
  CHECK(out[0] == -1 && out[1] == 1 && out[2] == 1 && out[3] == -1 && out[4] == 0 &&
        signbit(out[5]));
  kern_vm_f32(KERN_VM_ERF, 6, out, lim);
  CHECK(out[0] == -1 && out[1] == 1 && out[2] == 1 && out[3] == -1 && out[4] == 0);
  kern_vm_f32(KERN_VM_GELU, 6, out, lim);
  CHECK(out[1] == INFINITY && out[2] == 200.0f && out[3] == 0 && out[4] == 0);

  /* F16C conversions against half.h. */
  uint16_t *h = malloc(65536 * sizeof *h), *h2 = malloc(65536 * sizeof *h2);
  float *f = malloc(65536 * sizeof *f), *f2 = malloc(65536 * sizeof *f2);
  for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  kern_f16_to_f32(h, f, 65536);
  int diff = 0;
  for (uint32_t i = 0; i < 65536; i++) {
    float w = tolk_f16_to_f32(h[i]);
    /* F16C quiets signalling NaNs; half.h keeps the payload as it is. */
    if (memcmp(&w, &f[i], 4) != 0 && !(isnan(w) && isnan(f[i]))) diff++;
  }
  CHECK_MSG(diff == 0, "%d float16 → float differences", diff);
  diff = 0;
  for (uint32_t rep = 0; rep < 200; rep++) {
    for (uint32_t i = 0; i < 65536; i++)
      f2[i] = tolk_bits_f32((uint32_t)(i * 65537u + rep * 2654435761u));
    kern_f32_to_f16(f2, h2, 65536);
    for (uint32_t i = 0; i < 65536; i++)
      if (h2[i] != tolk_f32_to_f16(f2[i])) diff++;
  }
  CHECK_MSG(diff == 0, "%d float → float16 differences", diff);
  free(h);
  free(h2);
  free(f);
  free(f2);
  free(x);
  free(y);
  free(yp);
  return tu_finish("test_kern_vmath");
}
