/*
 * test_half.c — float16/bfloat16 conversions in src/core/half.h against
 * independent references: the compiler's _Float16 (gcc's soft-float or F16C
 * conversions) where available, and an exact nearest-value search in double
 * otherwise. Widening is checked on every 16-bit pattern; narrowing on every
 * midpoint between neighbouring 16-bit values (the ties), their float
 * neighbours, and a sweep over the float bit space.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "testutil.h"

/* The float16 value of bits h, computed independently of half.h. */
static double ref_f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexp(m, -24);
  return s * ldexp(1024 + m, e - 25);
}

static double ref_bf16_value(uint16_t b) {
  int e = (b >> 7) & 0xff, m = b & 0x7f;
  double s = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 0xff) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexp(m, -133);
  return s * ldexp(128 + m, e - 134);
}

/* Round-to-nearest-even of finite x into a format given by its value
 * function, by bisection over the ordered positive bit patterns. `max_bits`
 * is the largest finite pattern; `inf_bits` the Inf pattern; `max_finite`
 * and `ulp_at_max` decide overflow (x ≥ max + ulp/2 → Inf, ties at the
 * boundary go to Inf as they round to the "even" next power). */
static uint16_t ref_round(double x, double (*val)(uint16_t), uint16_t max_bits,
                          uint16_t inf_bits) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  double maxv = val(max_bits), ulp = maxv - val((uint16_t)(max_bits - 1));
  if (a >= maxv + ulp / 2) return (uint16_t)(sign | inf_bits);
  uint16_t lo = 0, hi = max_bits; /* val(lo) <= a < val(hi) or a == val(max) */
  if (a >= maxv) return (uint16_t)(sign | max_bits);
  while (hi - lo > 1) {
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (val(mid) <= a) lo = mid;
    else hi = mid;
  }
  double dl = a - val(lo), dh = val(hi) - a;
  uint16_t r = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
  return (uint16_t)(sign | r);
}

static uint16_t ref_f16(double x) { return ref_round(x, ref_f16_value, 0x7bff, 0x7c00); }
static uint16_t ref_bf16(double x) { return ref_round(x, ref_bf16_value, 0x7f7f, 0x7f80); }

static int fails_shown;

static void check_f32_narrow(float f) {
  if (isnan(f)) {
    uint16_t h = tolk_f32_to_f16(f), b = tolk_f32_to_bf16(f);
    CHECK(isnan(tolk_f16_to_f32(h)) && isnan(tolk_bf16_to_f32(b)));
    CHECK((h & 0x8000) == (signbit(f) ? 0x8000 : 0));
    return;
  }
  uint16_t got = tolk_f32_to_f16(f), want = ref_f16(f);
  uint16_t gotb = tolk_f32_to_bf16(f), wantb = ref_bf16(f);
#if defined(__FLT16_MAX__)
  _Float16 cf = (_Float16)f;
  uint16_t cbits;
  memcpy(&cbits, &cf, 2);
  if (cbits != want && fails_shown < 5) {
    fails_shown++;
    CHECK_MSG(0, "reference disagreement at %a", f);
  }
#endif
  if ((got != want || gotb != wantb) && fails_shown < 20) {
    fails_shown++;
    CHECK_MSG(0, "f32 %a: f16 %04x want %04x, bf16 %04x want %04x", f, got, want, gotb, wantb);
  }
  tu_checks++;
}

static void check_f64_narrow(double d) {
  uint16_t got = tolk_f64_to_f16(d), want = ref_f16(d);
  uint16_t gotb = tolk_f64_to_bf16(d), wantb = ref_bf16(d);
  if ((got != want || gotb != wantb) && fails_shown < 20) {
    fails_shown++;
    CHECK_MSG(0, "f64 %a: f16 %04x want %04x, bf16 %04x want %04x", d, got, want, gotb, wantb);
  }
  tu_checks++;
}

int main(void) {
  /* Widening: every pattern. */
  for (uint32_t i = 0; i < 65536; i++) {
    uint16_t h = (uint16_t)i;
    double want = ref_f16_value(h), wantb = ref_bf16_value(h);
    float got = tolk_f16_to_f32(h), gotb = tolk_bf16_to_f32(h);
    if (isnan(want)) {
      CHECK(isnan(got));
      CHECK(tolk_f32_to_f16(got) == (h | 0x0200)); /* quiet, payload kept */
    } else {
      CHECK((double)got == want && !signbit(got) == !signbit(want));
      CHECK(tolk_f32_to_f16(got) == h);
      CHECK(tolk_f64_to_f16(want) == h);
    }
    if (isnan(wantb)) {
      CHECK(isnan(gotb));
      CHECK(tolk_f32_to_bf16(gotb) == (h | 0x0040));
    } else {
      CHECK((double)gotb == wantb && !signbit(gotb) == !signbit(wantb));
      CHECK(tolk_f32_to_bf16(gotb) == h);
      CHECK(tolk_f64_to_bf16(wantb) == h);
    }
  }

  /* Narrowing at the ties between neighbours and just either side of them. */
  for (uint32_t i = 0; i < 0x7c00; i++) {
    double lo = ref_f16_value((uint16_t)i), hi = ref_f16_value((uint16_t)(i + 1));
    double mid = (lo + hi) / 2; /* exact in double and in float */
    float mf = (float)mid;
    for (int s = 0; s < 2; s++) {
      float sf = s ? -mf : mf;
      check_f32_narrow(sf);
      check_f32_narrow(nextafterf(sf, INFINITY));
      check_f32_narrow(nextafterf(sf, -INFINITY));
      double sd = s ? -mid : mid;
      check_f64_narrow(sd);
      check_f64_narrow(nextafter(sd, INFINITY));
      check_f64_narrow(nextafter(sd, -INFINITY));
    }
  }
  for (uint32_t i = 0; i < 0x7f80; i++) {
    double lo = ref_bf16_value((uint16_t)i), hi = ref_bf16_value((uint16_t)(i + 1));
    double mid = (lo + hi) / 2;
    check_f32_narrow((float)mid);
    check_f32_narrow(nextafterf((float)mid, INFINITY));
    check_f32_narrow(nextafterf((float)mid, 0));
    check_f64_narrow(mid);
    check_f64_narrow(nextafter(mid, INFINITY));
    check_f64_narrow(nextafter(mid, 0));
    check_f64_narrow(-mid);
  }

  /* A sweep over float bit patterns (a prime stride hits every exponent). */
  for (uint64_t u = 0; u < 0x100000000ull; u += 65537) {
    float f = tolk_bits_f32((uint32_t)u);
    check_f32_narrow(f);
    if (!isnan(f)) check_f64_narrow((double)f + (double)f * 0x1p-40);
  }

  /* Special values. */
  CHECK(tolk_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(tolk_f32_to_f16(65519.996f) == 0x7bff);
  CHECK(tolk_f32_to_f16(65520.0f) == 0x7c00);
  CHECK(tolk_f32_to_f16(-INFINITY) == 0xfc00);
  CHECK(tolk_f32_to_f16(0x1p-25f) == 0x0000);               /* tie → even (0) */
  CHECK(tolk_f32_to_f16(nextafterf(0x1p-25f, 1)) == 0x0001);
  CHECK(tolk_f32_to_f16(0x1.8p-24f) == 0x0002);             /* 1.5 units → 2 */
  CHECK(tolk_f32_to_f16(-0.0f) == 0x8000);
  CHECK(tolk_f64_to_f16(1e300) == 0x7c00);
  CHECK(tolk_f64_to_f16(1e-300) == 0x0000);
  CHECK(tolk_f32_to_bf16(3.4028235e38f) == 0x7f80);         /* rounds up to Inf */
  CHECK(tolk_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(tolk_f64_to_bf16(1e39) == 0x7f80);
  CHECK(isnan(tolk_bf16_to_f32(tolk_f64_to_bf16(NAN))));

  /* Bulk forms agree with the scalar ones. */
  uint16_t h[7] = {0x0000, 0x0001, 0x3c00, 0x7bff, 0x7c00, 0xfe00, 0x8400}, h2[7];
  float f[7];
  tolk_f16_to_f32_n(h, f, 7);
  tolk_f32_to_f16_n(f, h2, 7);
  CHECK(memcmp(h, h2, sizeof h) == 0);
  tolk_bf16_to_f32_n(h, f, 7);
  tolk_f32_to_bf16_n(f, h2, 7);
  CHECK(memcmp(h, h2, sizeof h) == 0);
  return tu_finish("test_half");
}
