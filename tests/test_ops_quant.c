/*
 * test_ops_quant.c — the quantization operators through a session, against
 * references written out plainly here: QuantizeLinear / DequantizeLinear
 * (per tensor, per axis, blocked, 8/16-bit, float16), DynamicQuantizeLinear
 * (ORT's parameters, half-to-even ties), MatMulInteger (batch broadcasting,
 * per-row / per-column zero points, every signedness, constant weights that
 * are packed at session creation, 1 and 2 threads), QLinearMatMul,
 * ConvInteger / QLinearConv (groups, strides, dilations, pads, auto_pad,
 * per-channel weights), ORT's MatMulIntegerToFloat and DynamicQuantizeMatMul,
 * and shape errors reported as errors. The uint8 quantizer's rounding alone:
 * every quarter step over the range and past it, ties both ways, ±0, NaN
 * and infinities, for zero points 0, 1, 128 and 255, against rintf.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "ops/quant_util.h"
#include "qmodel.h"
#include "testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() % 100000) / 99999.0f; }
static void fill_q(void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)rnd();
}
static int32_t qv(bool s, const void *p, int64_t i) {
  return s ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

static int32_t sat(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---------------------------------------------------- DynamicQuantizeLinear */

static void ref_dql(const float *x, int64_t n, uint8_t *y, float *scale, uint8_t *zp) {
  float mn = 0, mx = 0;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
  }
  float s = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  float z = -mn / s;
  z = z < 0 ? 0 : z > 255 ? 255 : z;
  int32_t zi = (int32_t)rintf(z);
  for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)sat((int32_t)rintf(x[i] / s) + zi, 0, 255);
  *scale = s, *zp = (uint8_t)zi;
}

static void check_dql(const float *x, int64_t n, const uint8_t *expect_y, float expect_scale,
                      int expect_zp) {
  struct qm m;
  tolk_error err = {0};
  qm_begin(&m, "", "DynamicQuantizeLinear", 11);
  qm_in(&m, TOLK_FLOAT, 1, &n, x);
  qm_outs(&m, "111");
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "%s", err.message);
  uint8_t ry[64];
  float rs;
  uint8_t rz;
  ref_dql(x, n, ry, &rs, &rz);
  if (m.out[0] && m.out[1] && m.out[2]) {
    const uint8_t *y = tolk_tensor_data(m.out[0]);
    float s = *(const float *)tolk_tensor_data(m.out[1]);
    uint8_t z = *(const uint8_t *)tolk_tensor_data(m.out[2]);
    CHECK(s == rs && z == rz && !memcmp(y, ry, (size_t)n));
    if (expect_y) {
      CHECK_MSG(s == expect_scale, "scale %.9g vs %.9g", s, expect_scale);
      CHECK_MSG(z == expect_zp, "zp %d vs %d", z, expect_zp);
      for (int64_t i = 0; i < n; i++) CHECK_MSG(y[i] == expect_y[i], "y[%lld] %d vs %d",
                                                (long long)i, y[i], expect_y[i]);
    }
  }
  qm_end(&m);
}

static void test_linear_u8_rounding(void) {
  enum { N = 4 * 700 + 5 };
  float x[N];
  uint8_t y[N];
  int n = 0;
  for (int q = -4 * 350; q < 4 * 350; q++) x[n++] = (float)q / 4.0f; /* ties at .5 */
  x[n++] = -0.0f, x[n++] = NAN, x[n++] = INFINITY, x[n++] = -INFINITY, x[n++] = 1e30f;
  static const int32_t zps[] = {0, 1, 128, 255};
  static const float scales[] = {1.0f, 0.5f, 3.0f};
  for (size_t zi = 0; zi < sizeof zps / sizeof zps[0]; zi++)
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
      quant_linear_u8(x, y, n, scales[si], zps[zi]);
      int bad = 0;
      for (int i = 0; i < n; i++) {
        float v = x[i] / scales[si];
        int32_t want = isnan(v) ? 0 : sat((int32_t)rintf(fmaxf(fminf(v, 512.0f), -512.0f)) + zps[zi], 0, 255);
        bad += y[i] != want;
        if (y[i] != want && bad == 1)
          fprintf(stderr, "quant_linear_u8(%g / %g, zp %d) = %d, want %d\n", x[i], scales[si], zps[zi], y[i], want);
      }
      CHECK(bad == 0);
    }
}

static void test_dynamic_quantize(void) {
  /* Range [0, 255]: scale exactly 1, so x / scale ties round to even. */
  float x1[] = {0, 255, 2.5f, 3.5f, -0.0f, 254.5f, 0.5f, 1.5f};
  uint8_t y1[] = {0, 255, 2, 4, 0, 254, 0, 2};
  check_dql(x1, 8, y1, 1.0f, 0);
  /* All zero: scale 1, zero point 0. */
  float x2[] = {0, 0, 0};
  uint8_t y2[] = {0, 0, 0};
  check_dql(x2, 3, y2, 1.0f, 0);
  /* Negative only: zero point 255. */
  float x3[] = {-2.0f, -1.0f};
  float s3 = 2.0f / 255.0f;
  uint8_t y3[] = {0, (uint8_t)(rintf(-1.0f / s3) + 255)};
  check_dql(x3, 2, y3, s3, 255);
  /* Random ranges against the reference. */
  for (int t = 0; t < 20; t++) {
    float x[64];
    float lo = frand(-10, 2), hi = frand(-1, 10);
    for (int i = 0; i < 64; i++) x[i] = frand(lo, hi);
    check_dql(x, 64, NULL, 0, 0);
  }
}

/* ------------------------------------------------ Quantize/DequantizeLinear */

static void test_quantize_linear(void) {
  tolk_error err = {0};
  struct qm m;
  /* Per axis, int8, ties and saturation. x [2,3,2], axis 1. */
  float x[12] = {0.25f, -0.25f, 1.5f, 2.5f, 3.0f, -3.0f, 100.0f, -100.0f, 0.5f, -0.5f, 5.0f, 7.0f};
  float sc[3] = {0.5f, 1.0f, 2.0f};
  int8_t zp[3] = {0, -3, 5};
  qm_begin(&m, "", "QuantizeLinear", 13);
  qm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 3, 2}, x);
  qm_in(&m, TOLK_FLOAT, 1, (int64_t[]){3}, sc);
  qm_in(&m, TOLK_INT8, 1, (int64_t[]){3}, zp);
  qm_attr_int(&m, "axis", 1);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const int8_t *y = tolk_tensor_data(m.out[0]);
    for (int i = 0; i < 12; i++) {
      int a = (i / 2) % 3;
      int32_t e = sat((int32_t)rintf(x[i] / sc[a]) + zp[a], -128, 127);
      CHECK_MSG(y[i] == e, "quantize per-axis y[%d] %d vs %d", i, y[i], e);
    }
  }
  qm_end(&m);

  /* Blocked (opset 21): x [2, 6], axis 1, block 4 -> scale [2, 2]. uint16 out. */
  float xb[12];
  for (int i = 0; i < 12; i++) xb[i] = frand(-50, 900);
  float sb[4] = {0.3f, 1.7f, 0.01f, 2.0f};
  uint16_t zb[4] = {100, 0, 30000, 7};
  qm_begin(&m, "", "QuantizeLinear", 21);
  qm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 6}, xb);
  qm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 2}, sb);
  qm_in(&m, TOLK_UINT16, 2, (int64_t[]){2, 2}, zb);
  qm_attr_int(&m, "axis", 1);
  qm_attr_int(&m, "block_size", 4);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const uint16_t *y = tolk_tensor_data(m.out[0]);
    for (int r = 0; r < 2; r++)
      for (int j = 0; j < 6; j++) {
        int s = r * 2 + j / 4;
        int32_t e = sat((int32_t)rintf(xb[r * 6 + j] / sb[s]) + zb[s], 0, 65535);
        CHECK_MSG(y[r * 6 + j] == e, "blocked y[%d] %d vs %d", r * 6 + j, y[r * 6 + j], e);
      }
  }
  qm_end(&m);

  /* float16 input and scale, per tensor, default uint8 output (no zp). */
  uint16_t xh[5], sh = tolk_f32_to_f16(0.25f);
  float xs[5] = {0.125f, 0.375f, -1.0f, 63.0f, 80.0f};
  for (int i = 0; i < 5; i++) xh[i] = tolk_f32_to_f16(xs[i]);
  qm_begin(&m, "", "QuantizeLinear", 19);
  qm_in(&m, TOLK_FLOAT16, 1, (int64_t[]){5}, xh);
  qm_in(&m, TOLK_FLOAT16, 0, NULL, &sh);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const uint8_t *y = tolk_tensor_data(m.out[0]);
    uint8_t e[5] = {0, 2, 0, 252, 255};
    CHECK(tolk_tensor_dtype(m.out[0]) == TOLK_UINT8 && !memcmp(y, e, 5));
  }
  qm_end(&m);

  /* DequantizeLinear per axis (axis 0), int8 with zero points. */
  int8_t q[6] = {-128, 127, 0, 5, -7, 100};
  float ds[2] = {0.1f, 3.0f};
  int8_t dz[2] = {-1, 4};
  qm_begin(&m, "", "DequantizeLinear", 13);
  qm_in(&m, TOLK_INT8, 2, (int64_t[]){2, 3}, q);
  qm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, ds);
  qm_in(&m, TOLK_INT8, 1, (int64_t[]){2}, dz);
  qm_attr_int(&m, "axis", 0);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    for (int i = 0; i < 6; i++) CHECK(y[i] == (float)(q[i] - dz[i / 3]) * ds[i / 3]);
  }
  qm_end(&m);

  /* DequantizeLinear of int32 (the int8 Gather + Dequantize pattern feeds
   * int8; int32 appears for biases). */
  int32_t qi[3] = {-2000000000, 7, 123456};
  float s1 = 0.5f;
  qm_begin(&m, "", "DequantizeLinear", 13);
  qm_in(&m, TOLK_INT32, 1, (int64_t[]){3}, qi);
  qm_in(&m, TOLK_FLOAT, 0, NULL, &s1);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    for (int i = 0; i < 3; i++) CHECK(y[i] == (float)qi[i] * 0.5f);
  }
  qm_end(&m);

  /* A per-axis scale of the wrong length is an error, not a crash. */
  float bad[4] = {1, 2, 3, 4};
  qm_begin(&m, "", "DequantizeLinear", 13);
  qm_in(&m, TOLK_INT8, 2, (int64_t[]){2, 3}, q);
  qm_in(&m, TOLK_FLOAT, 1, (int64_t[]){4}, bad);
  CHECK(qm_run(&m, 1, &err) == TOLK_ERR_SHAPE);
  qm_end(&m);
}

/* ------------------------------------------------------------ MatMulInteger */

struct mmi_case {
  int ra, rb;
  int64_t ad[4], bd[4];
  bool as, bs;
  int zpa, zpb;   /* 0 none, 1 scalar, 2 per row / per column (1-D) */
  bool b_const;   /* B as an initializer (packed at session creation) */
  int threads;
};

/* numpy-matmul reference with zero points. Returns the output numel. */
static int64_t ref_mmi(const struct mmi_case *c, const void *a, const void *b, const void *za,
                       const void *zb, int32_t *out, int64_t *odims, int *orank) {
  int64_t A[4], Bd[4];
  int ra = c->ra, rb = c->rb;
  memcpy(A, c->ad, sizeof A);
  memcpy(Bd, c->bd, sizeof Bd);
  bool a1 = ra == 1, b1 = rb == 1;
  if (a1) A[1] = A[0], A[0] = 1, ra = 2;
  if (b1) Bd[1] = 1, rb = 2;
  int64_t M = A[ra - 2], K = A[ra - 1], N = Bd[rb - 1];
  int br = (ra > rb ? ra : rb) - 2;
  int64_t ab[4] = {1, 1, 1, 1}, bb[4] = {1, 1, 1, 1}, ob[4];
  for (int d = 0; d < ra - 2; d++) ab[br - (ra - 2) + d] = A[d];
  for (int d = 0; d < rb - 2; d++) bb[br - (rb - 2) + d] = Bd[d];
  int64_t nb = 1;
  *orank = 0;
  for (int d = 0; d < br; d++) {
    ob[d] = ab[d] > bb[d] ? ab[d] : bb[d];
    nb *= ob[d];
    odims[(*orank)++] = ob[d];
  }
  if (!a1) odims[(*orank)++] = M;
  if (!b1) odims[(*orank)++] = N;
  for (int64_t bi = 0; bi < nb; bi++) {
    int64_t rem = bi, ai = 0, bj = 0, am = 1, bm = 1;
    for (int d = br - 1; d >= 0; d--) {
      int64_t idx = rem % ob[d];
      rem /= ob[d];
      ai += (ab[d] == 1 ? 0 : idx) * am;
      bj += (bb[d] == 1 ? 0 : idx) * bm;
      am *= ab[d], bm *= bb[d];
    }
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        int32_t zai = c->zpa == 0 ? 0 : qv(c->as, za, c->zpa == 2 ? i : 0);
        int32_t zbj = c->zpb == 0 ? 0 : qv(c->bs, zb, c->zpb == 2 ? j : 0);
        int64_t acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += (int64_t)(qv(c->as, a, (ai * M + i) * K + k) - zai) *
                 (qv(c->bs, b, (bj * K + k) * N + j) - zbj);
        out[(bi * M + i) * N + j] = (int32_t)acc;
      }
  }
  return nb * M * N;
}

static void run_mmi(const struct mmi_case *c) {
  int64_t na = 1, nb = 1;
  for (int d = 0; d < c->ra; d++) na *= c->ad[d];
  for (int d = 0; d < c->rb; d++) nb *= c->bd[d];
  uint8_t *a = malloc((size_t)na), *b = malloc((size_t)nb), za[512], zb[512];
  fill_q(a, na), fill_q(b, nb), fill_q(za, 512), fill_q(zb, 512);
  int64_t M = c->ra >= 2 ? c->ad[c->ra - 2] : 1, N = c->rb >= 2 ? c->bd[c->rb - 1] : 1;
  tolk_dtype adt = c->as ? TOLK_INT8 : TOLK_UINT8, bdt = c->bs ? TOLK_INT8 : TOLK_UINT8;
  struct qm m;
  tolk_error err = {0};
  qm_begin(&m, "", "MatMulInteger", 10);
  qm_in(&m, adt, c->ra, c->ad, a);
  if (c->b_const) qm_init(&m, bdt, c->rb, c->bd, b);
  else qm_in(&m, bdt, c->rb, c->bd, b);
  if (c->zpa) qm_in(&m, adt, c->zpa == 2 ? 1 : 0, &M, za);
  else if (c->zpb) qm_none(&m);
  if (c->zpb) qm_init(&m, bdt, c->zpb == 2 ? 1 : 0, &N, zb);
  tolk_status st = qm_run(&m, c->threads, &err);
  CHECK_MSG(st == TOLK_OK, "MatMulInteger: %s", err.message);
  int64_t odims[4];
  int orank;
  int32_t *ref = malloc(64 * 1024 * sizeof(int32_t));
  int64_t n = ref_mmi(c, a, b, za, zb, ref, odims, &orank);
  if (st == TOLK_OK && m.out[0]) {
    CHECK(tolk_tensor_rank(m.out[0]) == orank &&
          !memcmp(tolk_tensor_dims(m.out[0]), odims, (size_t)orank * sizeof(int64_t)));
    CHECK(tolk_tensor_numel(m.out[0]) == n);
    const int32_t *y = tolk_tensor_data(m.out[0]);
    int64_t bad = 0;
    for (int64_t i = 0; i < n && tolk_tensor_numel(m.out[0]) == n; i++) bad += y[i] != ref[i];
    CHECK_MSG(bad == 0, "MatMulInteger ra=%d rb=%d as=%d bs=%d zpa=%d zpb=%d const=%d: %lld "
              "differ", c->ra, c->rb, c->as, c->bs, c->zpa, c->zpb, c->b_const, (long long)bad);
  }
  qm_end(&m);
  free(a), free(b), free(ref);
}

static void test_matmul_integer(void) {
  struct mmi_case cases[] = {
      {4, 2, {2, 3, 5, 7}, {7, 4}, false, true, 1, 1, true, 1},
      {4, 2, {2, 3, 5, 7}, {7, 4}, false, true, 1, 1, false, 1},
      {4, 3, {2, 1, 5, 9}, {3, 9, 6}, true, false, 2, 2, false, 1},
      {3, 2, {2, 5, 9}, {9, 6}, true, true, 2, 2, true, 2},
      {1, 2, {7}, {7, 20}, false, false, 1, 0, true, 1},
      {2, 1, {4, 300}, {300}, false, false, 0, 1, false, 1},
      {3, 2, {3, 40, 257}, {257, 70}, false, true, 1, 2, true, 2},
      {2, 2, {33, 64}, {64, 129}, true, true, 0, 0, true, 2},
      {3, 3, {2, 0, 5}, {2, 5, 3}, false, false, 0, 0, false, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_mmi(&cases[i]);

  /* Inner dimensions that differ are a shape error. */
  uint8_t z[64] = {0};
  struct qm m;
  tolk_error err = {0};
  qm_begin(&m, "", "MatMulInteger", 10);
  qm_in(&m, TOLK_UINT8, 2, (int64_t[]){2, 3}, z);
  qm_in(&m, TOLK_UINT8, 2, (int64_t[]){4, 2}, z);
  CHECK(qm_run(&m, 1, &err) == TOLK_ERR_SHAPE);
  qm_end(&m);
}

/* ------------------------------------------------------------ QLinearMatMul */

static void test_qlinear_matmul(void) {
  enum { M = 3, K = 11, N = 5 };
  uint8_t a[M * K], b[K * N], az = 7, bz[N], yz = 120;
  float as = 0.02f, bs[N], ys = 0.9f;
  fill_q(a, M * K), fill_q(b, K * N), fill_q(bz, N);
  for (int j = 0; j < N; j++) bs[j] = frand(0.001f, 0.05f);
  struct qm m;
  tolk_error err = {0};
  qm_begin(&m, "", "QLinearMatMul", 10);
  qm_in(&m, TOLK_UINT8, 2, (int64_t[]){M, K}, a);
  qm_in(&m, TOLK_FLOAT, 0, NULL, &as);
  qm_in(&m, TOLK_UINT8, 0, NULL, &az);
  qm_init(&m, TOLK_UINT8, 2, (int64_t[]){K, N}, b);
  qm_in(&m, TOLK_FLOAT, 1, (int64_t[]){N}, bs);
  qm_in(&m, TOLK_UINT8, 1, (int64_t[]){N}, bz);
  qm_in(&m, TOLK_FLOAT, 0, NULL, &ys);
  qm_in(&m, TOLK_UINT8, 0, NULL, &yz);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const uint8_t *y = tolk_tensor_data(m.out[0]);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        int32_t acc = 0;
        for (int k = 0; k < K; k++) acc += (a[i * K + k] - az) * (b[k * N + j] - bz[j]);
        float mul = as * bs[j] / ys;
        int32_t e = sat((int32_t)rintf((float)acc * mul) + yz, 0, 255);
        CHECK_MSG(y[i * N + j] == e, "QLinearMatMul y[%d][%d] %d vs %d", i, j, y[i * N + j], e);
      }
  }
  qm_end(&m);
}

/* ----------------------------------------------------- integer convolutions */

struct conv_case {
  int nsp;
  int64_t n, c, m, group, in[2], ker[2], stride[2], dil[2], pads[4];
  const char *auto_pad;
  bool xs, ws, per_channel, qlinear;
};

static int64_t conv_out(const struct conv_case *c, int d, int64_t *pad0) {
  int64_t span = (c->ker[d] - 1) * c->dil[d] + 1;
  if (c->auto_pad && strncmp(c->auto_pad, "SAME", 4) == 0) {
    int64_t o = (c->in[d] + c->stride[d] - 1) / c->stride[d];
    int64_t tot = (o - 1) * c->stride[d] + span - c->in[d];
    if (tot < 0) tot = 0;
    *pad0 = !strcmp(c->auto_pad, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
    return o;
  }
  *pad0 = c->pads[d];
  return (c->in[d] + c->pads[d] + c->pads[d + c->nsp] - span) / c->stride[d] + 1;
}

static void run_conv(const struct conv_case *c) {
  int64_t in1 = c->nsp == 2 ? c->in[1] : 1, k1 = c->nsp == 2 ? c->ker[1] : 1;
  int64_t p0[2] = {0, 0}, o[2] = {1, 1};
  for (int d = 0; d < c->nsp; d++) o[d] = conv_out(c, d, &p0[d]);
  int64_t cg = c->c / c->group, mg = c->m / c->group;
  int64_t nx = c->n * c->c * c->in[0] * in1, nw = c->m * cg * c->ker[0] * k1;
  int64_t ny = c->n * c->m * o[0] * o[1];
  uint8_t *x = malloc((size_t)nx), *w = malloc((size_t)nw), xz, wz[16];
  int32_t bias[16];
  float wsc[16], xsc = 0.05f, ysc = 0.7f;
  uint8_t yz = c->xs ? 3 : 100;
  fill_q(x, nx), fill_q(w, nw), fill_q(&xz, 1), fill_q(wz, 16);
  for (int i = 0; i < 16; i++) bias[i] = (int32_t)(rnd() % 2001) - 1000, wsc[i] = frand(0.01f, 0.1f);
  tolk_dtype xdt = c->xs ? TOLK_INT8 : TOLK_UINT8, wdt = c->ws ? TOLK_INT8 : TOLK_UINT8;
  int64_t xd[4] = {c->n, c->c, c->in[0], c->in[1]}, wd[4] = {c->m, cg, c->ker[0], c->ker[1]};
  struct qm m;
  tolk_error err = {0};
  int64_t mm = c->m;
  if (c->qlinear) {
    qm_begin(&m, "", "QLinearConv", 10);
    qm_in(&m, xdt, c->nsp + 2, xd, x);
    qm_in(&m, TOLK_FLOAT, 0, NULL, &xsc);
    qm_in(&m, xdt, 0, NULL, &xz);
    qm_init(&m, wdt, c->nsp + 2, wd, w);
    qm_in(&m, TOLK_FLOAT, c->per_channel ? 1 : 0, &mm, wsc);
    qm_in(&m, wdt, c->per_channel ? 1 : 0, &mm, wz);
    qm_in(&m, TOLK_FLOAT, 0, NULL, &ysc);
    qm_in(&m, xdt, 0, NULL, &yz);
    qm_in(&m, TOLK_INT32, 1, &mm, bias);
  } else {
    qm_begin(&m, "", "ConvInteger", 10);
    qm_in(&m, xdt, c->nsp + 2, xd, x);
    qm_in(&m, wdt, c->nsp + 2, wd, w);
    qm_in(&m, xdt, 0, NULL, &xz);
    qm_in(&m, wdt, c->per_channel ? 1 : 0, &mm, wz);
  }
  qm_attr_int(&m, "group", c->group);
  qm_attr_ints(&m, "strides", c->nsp, c->stride);
  qm_attr_ints(&m, "dilations", c->nsp, c->dil);
  if (c->auto_pad) qm_attr_str(&m, "auto_pad", c->auto_pad);
  else qm_attr_ints(&m, "pads", 2 * c->nsp, c->pads);
  tolk_status st = qm_run(&m, 2, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", c->qlinear ? "QLinearConv" : "ConvInteger", err.message);
  if (st == TOLK_OK && m.out[0]) {
    CHECK(tolk_tensor_numel(m.out[0]) == ny);
    int64_t bad = 0;
    for (int64_t b = 0; b < c->n && tolk_tensor_numel(m.out[0]) == ny; b++)
      for (int64_t oc = 0; oc < c->m; oc++)
        for (int64_t y0 = 0; y0 < o[0]; y0++)
          for (int64_t y1 = 0; y1 < o[1]; y1++) {
            int64_t g = oc / mg, acc = 0;
            int32_t wzc = qv(c->ws, wz, c->per_channel ? oc : 0), xzv = qv(c->xs, &xz, 0);
            for (int64_t ic = 0; ic < cg; ic++)
              for (int64_t k0 = 0; k0 < c->ker[0]; k0++)
                for (int64_t kk1 = 0; kk1 < k1; kk1++) {
                  int64_t i0 = y0 * c->stride[0] - p0[0] + k0 * c->dil[0];
                  int64_t i1 = c->nsp == 2 ? y1 * c->stride[1] - p0[1] + kk1 * c->dil[1] : 0;
                  if (i0 < 0 || i0 >= c->in[0] || i1 < 0 || i1 >= in1) continue;
                  int32_t xv = qv(c->xs, x, ((b * c->c + g * cg + ic) * c->in[0] + i0) * in1 + i1);
                  int32_t wv = qv(c->ws, w, ((oc * cg + ic) * c->ker[0] + k0) * k1 + kk1);
                  acc += (int64_t)(xv - xzv) * (wv - wzc);
                }
            int64_t idx = ((b * c->m + oc) * o[0] + y0) * o[1] + y1;
            if (c->qlinear) {
              float mul = xsc * wsc[c->per_channel ? oc : 0] / ysc;
              int32_t e = (int32_t)rintf((float)(acc + bias[oc]) * mul) + qv(c->xs, &yz, 0);
              e = c->xs ? sat(e, -128, 127) : sat(e, 0, 255);
              bad += qv(c->xs, tolk_tensor_data(m.out[0]), idx) != e;
            } else {
              bad += ((const int32_t *)tolk_tensor_data(m.out[0]))[idx] != (int32_t)acc;
            }
          }
    CHECK_MSG(bad == 0, "%s nsp=%d group=%lld auto_pad=%s: %lld differ",
              c->qlinear ? "QLinearConv" : "ConvInteger", c->nsp, (long long)c->group,
              c->auto_pad ? c->auto_pad : "-", (long long)bad);
  }
  qm_end(&m);
  free(x), free(w);
}

static void test_conv(void) {
  struct conv_case cases[] = {
      {2, 1, 4, 6, 2, {5, 6}, {3, 2}, {2, 1}, {1, 2}, {1, 0, 1, 1}, NULL, false, false, true, false},
      {2, 2, 3, 4, 1, {7, 5}, {3, 3}, {1, 2}, {1, 1}, {0}, "SAME_LOWER", true, true, false, false},
      {1, 2, 2, 3, 1, {9, 0}, {4, 0}, {2, 0}, {2, 0}, {3, 1}, NULL, false, true, true, false},
      {2, 1, 4, 4, 4, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {0}, "SAME_UPPER", true, true, true, true},
      {2, 2, 3, 5, 1, {5, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1, 0, 0}, NULL, false, false, false, true},
      {2, 1, 2, 2, 1, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {0}, "VALID", false, true, true, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_conv(&cases[i]);
}

/* -------------------------------------- MatMulIntegerToFloat, DynamicQuantizeMatMul */

static void test_to_float(void) {
  enum { B = 2, S = 3, K = 8, N = 5 };
  uint8_t a[B * S * K], az = 130, bzu[N];
  int8_t b[K * N], bz[N];
  float as = 0.03f, bs[N], bias[N], af[B * S * K];
  fill_q(a, sizeof a), fill_q(b, sizeof b), fill_q(bz, sizeof bz), fill_q(bzu, sizeof bzu);
  for (int j = 0; j < N; j++) bs[j] = frand(0.001f, 0.02f), bias[j] = frand(-1, 1);
  for (int i = 0; i < B * S * K; i++) af[i] = frand(-3, 5);
  struct qm m;
  tolk_error err = {0};
  qm_begin(&m, "com.microsoft", "MatMulIntegerToFloat", 1);
  qm_in(&m, TOLK_UINT8, 3, (int64_t[]){B, S, K}, a);
  qm_init(&m, TOLK_INT8, 2, (int64_t[]){K, N}, b);
  qm_in(&m, TOLK_FLOAT, 0, NULL, &as);
  qm_init(&m, TOLK_FLOAT, 1, (int64_t[]){N}, bs);
  qm_in(&m, TOLK_UINT8, 0, NULL, &az);
  qm_init(&m, TOLK_INT8, 1, (int64_t[]){N}, bz);
  qm_init(&m, TOLK_FLOAT, 1, (int64_t[]){N}, bias);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "MatMulIntegerToFloat: %s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    for (int r = 0; r < B * S; r++)
      for (int j = 0; j < N; j++) {
        int32_t acc = 0;
        for (int k = 0; k < K; k++) acc += (a[r * K + k] - az) * (b[k * N + j] - bz[j]);
        float e = (float)acc * (as * bs[j]) + bias[j];
        CHECK_NEAR(y[r * N + j], e, 1e-5 * (1 + fabs(e)));
      }
  }
  qm_end(&m);

  /* DynamicQuantizeMatMul: A quantized with ORT's parameters as a whole. */
  float bs1 = 0.011f;
  qm_begin(&m, "com.microsoft", "DynamicQuantizeMatMul", 1);
  qm_in(&m, TOLK_FLOAT, 3, (int64_t[]){B, S, K}, af);
  qm_init(&m, TOLK_UINT8, 2, (int64_t[]){K, N}, (uint8_t *)b);
  qm_in(&m, TOLK_FLOAT, 0, NULL, &bs1);
  qm_in(&m, TOLK_UINT8, 1, (int64_t[]){N}, bzu);
  qm_in(&m, TOLK_FLOAT, 1, (int64_t[]){N}, bias);
  CHECK_MSG(qm_run(&m, 2, &err) == TOLK_OK, "DynamicQuantizeMatMul: %s", err.message);
  if (m.out[0]) {
    uint8_t qa[B * S * K], qz;
    float qs;
    ref_dql(af, B * S * K, qa, &qs, &qz);
    const float *y = tolk_tensor_data(m.out[0]);
    for (int r = 0; r < B * S; r++)
      for (int j = 0; j < N; j++) {
        int32_t acc = 0;
        for (int k = 0; k < K; k++) acc += (qa[r * K + k] - qz) * ((uint8_t)b[k * N + j] - bzu[j]);
        float e = (float)acc * (qs * bs1) + bias[j];
        CHECK_NEAR(y[r * N + j], e, 1e-5 * (1 + fabs(e)));
      }
  }
  qm_end(&m);
}

int main(void) {
  test_linear_u8_rounding();
  test_dynamic_quantize();
  test_quantize_linear();
  test_matmul_integer();
  test_qlinear_matmul();
  test_conv();
  test_to_float();
  return tu_finish("test_ops_quant");
}
