/*
 * test_ops_shape_dm.c — the data-movement helpers of src/ops/dm.c against
 * plain references: the strided copy engine on random views (transposed,
 * reversed, broadcast, with unit dims; some large enough to be tiled) for
 * every element size, 16-bit float
 * conversion (every half round-trips; float→half rounding matches the
 * compiler's _Float16 where it has one), bfloat16 rounding, and saturating
 * stores.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/dm.h"
#include "testutil.h"

static int rnd(int n) { return (int)tu_below(n); }

/* One random view of a random source, copied by dm_strided and by the
 * per-element definition. */
static void strided_case(size_t es) {
  /* every fourth case is large enough for the tiled transpose path */
  bool big = rnd(4) == 0;
  int r = big ? 2 + rnd(2) : 1 + rnd(6);
  int64_t sdims[8], sst[8], n = 1;
  for (int i = 0; i < r; i++) {
    sdims[i] = big ? 1 + rnd(70) : 1 + rnd(4);
    n *= sdims[i];
  }
  dm_dense_strides(r, sdims, sst);
  uint8_t *src = malloc((size_t)n * es);
  for (int64_t i = 0; i < n * (int64_t)es; i++) src[i] = (uint8_t)tu_next();
  /* view: permute dims, reverse some, broadcast some extra dims in front */
  int perm[8];
  for (int i = 0; i < r; i++) perm[i] = i;
  for (int i = r - 1; i > 0; i--) {
    int j = rnd(i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  struct dm_copy p;
  int extra = rnd(3);
  p.rank = r + extra;
  int64_t base = 0;
  for (int i = 0; i < extra; i++) {
    p.dims[i] = 1 + rnd(3);
    p.src_st[i] = 0;
  }
  for (int i = 0; i < r; i++) {
    int d = perm[i];
    p.dims[extra + i] = sdims[d];
    p.src_st[extra + i] = sst[d];
    if (rnd(3) == 0) { /* reversed: start at the last element, negative stride */
      base += (sdims[d] - 1) * sst[d];
      p.src_st[extra + i] = -sst[d];
    }
  }
  int64_t total = 1;
  for (int i = 0; i < p.rank; i++) total *= p.dims[i];
  dm_dense_strides(p.rank, p.dims, p.dst_st);
  uint8_t *got = calloc((size_t)total, es), *want = calloc((size_t)total, es);
  dm_strided(NULL, &p, got, src + base * (int64_t)es, es);
  for (int64_t o = 0; o < total; o++) {
    int64_t rem = o, off = base;
    for (int i = p.rank - 1; i >= 0; i--) {
      off += (rem % p.dims[i]) * p.src_st[i];
      rem /= p.dims[i];
    }
    memcpy(want + o * (int64_t)es, src + off * (int64_t)es, es);
  }
  CHECK_MSG(memcmp(got, want, (size_t)total * es) == 0, "rank %d es %zu", p.rank, es);
  free(src);
  free(got);
  free(want);
}

static void test_strided(void) {
  static const size_t sizes[] = {1, 2, 3, 4, 8, 16};
  for (int t = 0; t < 400; t++) strided_case(sizes[t % 6]);
  /* a scalar, and an empty view that must write nothing */
  float a = 3.5f, b = 0;
  struct dm_copy p = {0};
  dm_strided(NULL, &p, &b, &a, 4);
  CHECK(b == 3.5f);
  p.rank = 2;
  p.dims[0] = 3;
  p.dims[1] = 0;
  b = 7;
  dm_strided(NULL, &p, &b, &a, 4);
  CHECK(b == 7);
}

static void test_half(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = dm_f16_to_f32((uint16_t)h);
    bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
    if (nan) {
      bad += !(f != f);
      bad += (dm_f32_to_f16(f) & 0x7fffu) <= 0x7c00u; /* stays a NaN */
    } else {
      bad += dm_f32_to_f16(f) != h;
    }
  }
  CHECK_MSG(bad == 0, "%d halves do not round-trip", bad);
  CHECK(dm_f16_to_f32(0x3c00) == 1.0f);
  CHECK(dm_f16_to_f32(0x0001) == 0x1p-24f);
  CHECK(dm_f32_to_f16(65520.0f) == 0x7c00); /* rounds to infinity */
  CHECK(dm_f32_to_f16(65519.0f) == 0x7bff);
  CHECK(dm_f32_to_f16(0x1p-25f) == 0);      /* ties to even: 0 */
  CHECK(dm_f32_to_f16(0x1.8p-25f) == 1);
#if defined(__FLT16_MAX__)
  bad = 0;
  for (int i = 0; i < 200000; i++) {
    uint32_t bits = (uint32_t)tu_next();
    float f;
    memcpy(&f, &bits, 4);
    if (f != f) continue;
    _Float16 ref = (_Float16)f;
    uint16_t rb;
    memcpy(&rb, &ref, 2);
    bad += dm_f32_to_f16(f) != rb;
  }
  CHECK_MSG(bad == 0, "%d float->half roundings differ from _Float16", bad);
#endif
  CHECK(dm_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(dm_bf16_to_f32(0x3f80) == 1.0f);
  CHECK(dm_f32_to_bf16(1.00390625f) == 0x3f80); /* tie to even */
  CHECK(dm_f32_to_bf16(1.01171875f) == 0x3f82); /* tie to even, upwards */
  CHECK(dm_bf16_to_f32(dm_f32_to_bf16(NAN)) != dm_bf16_to_f32(dm_f32_to_bf16(NAN)));
}

static void test_set(void) {
  int8_t i8 = 0;
  dm_set_f64(TOLK_INT8, &i8, 0, 1000.0);
  CHECK(i8 == 127);
  dm_set_f64(TOLK_INT8, &i8, 0, -1000.0);
  CHECK(i8 == -128);
  uint8_t u8 = 9;
  dm_set_f64(TOLK_UINT8, &u8, 0, -3.0);
  CHECK(u8 == 0);
  int64_t i64 = 0;
  dm_set_f64(TOLK_INT64, &i64, 0, 1e300);
  CHECK(i64 == INT64_MAX);
  dm_set_f64(TOLK_INT64, &i64, 0, NAN);
  CHECK(i64 == 0);
  uint16_t h = 0;
  dm_set_f64(TOLK_FLOAT16, &h, 0, 1.0);
  CHECK(h == 0x3c00);
  CHECK(dm_get_f64(TOLK_FLOAT16, &h, 0) == 1.0);
  uint8_t bl = 0;
  dm_set_f64(TOLK_BOOL, &bl, 0, -0.5);
  CHECK(bl == 1);
}

static void test_fill(void) {
  uint8_t buf[3 * 37];
  const uint8_t e[3] = {1, 2, 3};
  dm_fill(NULL, buf, e, 3, 37);
  int bad = 0;
  for (int i = 0; i < 37; i++) bad += memcmp(buf + 3 * i, e, 3) != 0;
  CHECK(bad == 0);
}

int main(void) {
  tu_seed(0x2545f4914f6cdd1dull);
  test_strided();
  test_half();
  test_set();
  test_fill();
  return tu_finish("test_ops_shape_dm");
}
