/*
 * test_ops_elementwise_sem.c — the semantics of the elementwise, math, logic,
 * activation and cast operators where they are easy to get wrong: integer
 * division and modulus signs, by zero and at INT_MIN; exact integer Pow and
 * the scalar-exponent fast paths; shifts by the full width; Clip across its
 * opset change (attributes → inputs) and with min > max; Cast's NaN,
 * saturation, wrapping and one-step rounding; half-to-even Round; activations
 * at extreme inputs (no NaN or Inf where the function is finite); legacy
 * (opset < 7) broadcasting; variadic ops; three-way Where; and the errors.
 * Expected values are worked out by hand or by a double-precision formula
 * here, never taken from the code under test.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "test_ops_elementwise.h"
#include "testutil.h"

static tolk_error err;

/* Runs m (1 thread) and checks output 0 has dtype dt and the n values in
 * want (as doubles, compared within tol; NaN must be NaN). */
static void expect(struct tmodel *m, tolk_dtype dt, int n, const double *want, double tol,
                   const char *what) {
  tm_out(m, 1);
  memset(&err, 0, sizeof err);
  tolk_status st = et_run(m, 1, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", what, err.message);
  if (st == TOLK_OK) {
    const tolk_tensor *y = m->out[0];
    CHECK_MSG(tolk_tensor_dtype(y) == dt && tolk_tensor_numel(y) == n, "%s: dtype %d numel %lld",
              what, (int)tolk_tensor_dtype(y), (long long)tolk_tensor_numel(y));
    for (int i = 0; i < n && tolk_tensor_numel(y) == n; i++) {
      double g = et_get(dt, tolk_tensor_data(y), i), w = want[i];
      bool ok = isnan(w) ? isnan(g) : (g == w || fabs(g - w) <= tol * fmax(1.0, fabs(w)));
      CHECK_MSG(ok, "%s[%d]: got %.17g want %.17g", what, i, g, w);
    }
  }
  tm_end(m);
}

/* Expects the run (or session creation) to fail with `status`. */
static void expect_fail(struct tmodel *m, tolk_status status, const char *what) {
  tm_out(m, 1);
  memset(&err, 0, sizeof err);
  tolk_status st = et_run(m, 1, &err);
  CHECK_MSG(st == status, "%s: status %d (%s), want %d", what, (int)st, err.message, (int)status);
  tm_end(m);
}

static const int64_t d6[1] = {6}, d5[1] = {5}, d4[1] = {4}, d3[1] = {3}, d2[1] = {2}, d1[1] = {1};

static void integer_arith(void) {
  struct tmodel m;
  int32_t a[6] = {7, -7, 7, -7, 5, INT32_MIN}, b[6] = {2, 2, -2, -2, 0, -1};
  tm_begin(&m, "Div", 14);
  tm_in(&m, TOLK_INT32, 1, d6, a);
  tm_in(&m, TOLK_INT32, 1, d6, b);
  expect(&m, TOLK_INT32, 6, (double[]){3, -3, -3, 3, 0, INT32_MIN}, 0, "Div int32 truncates");

  int32_t x[7] = {-4, 7, 5, 4, -7, 8, 9}, y[7] = {2, -3, 8, -2, 3, 5, 0};
  tm_begin(&m, "Mod", 13);
  tm_in(&m, TOLK_INT32, 1, (int64_t[]){7}, x);
  tm_in(&m, TOLK_INT32, 1, (int64_t[]){7}, y);
  expect(&m, TOLK_INT32, 7, (double[]){0, -2, 5, 0, 2, 3, 0}, 0, "Mod fmod=0 (sign of divisor)");
  tm_begin(&m, "Mod", 13);
  tm_in(&m, TOLK_INT32, 1, (int64_t[]){7}, x);
  tm_in(&m, TOLK_INT32, 1, (int64_t[]){7}, y);
  tm_attr_int(&m, "fmod", 1);
  expect(&m, TOLK_INT32, 7, (double[]){0, 1, 5, 0, -1, 3, 0}, 0, "Mod fmod=1 (sign of dividend)");
  int64_t mn[2] = {INT64_MIN, INT64_MIN}, m1[2] = {-1, 3};
  tm_begin(&m, "Mod", 13);
  tm_in(&m, TOLK_INT64, 1, d2, mn);
  tm_in(&m, TOLK_INT64, 1, d2, m1);
  expect(&m, TOLK_INT64, 2, (double[]){0, 1}, 0, "Mod INT64_MIN");
  float fx[3] = {-4.3f, 7.2f, 5.0f}, fy[3] = {2.1f, -3.4f, 8.0f};
  tm_begin(&m, "Mod", 13);
  tm_in(&m, TOLK_FLOAT, 1, d3, fx);
  tm_in(&m, TOLK_FLOAT, 1, d3, fy);
  tm_attr_int(&m, "fmod", 1);
  expect(&m, TOLK_FLOAT, 3,
         (double[]){fmodf(-4.3f, 2.1f), fmodf(7.2f, -3.4f), 5.0}, 0, "Mod float fmod=1");
  tm_begin(&m, "Mod", 13);
  tm_in(&m, TOLK_FLOAT, 1, d3, fx);
  tm_in(&m, TOLK_FLOAT, 1, d3, fy);
  expect_fail(&m, TOLK_ERR_INVALID_MODEL, "Mod float fmod=0");

  /* Wrapping, not undefined behaviour. */
  int32_t big[2] = {INT32_MAX, INT32_MIN}, one[2] = {1, -1};
  tm_begin(&m, "Add", 14);
  tm_in(&m, TOLK_INT32, 1, d2, big);
  tm_in(&m, TOLK_INT32, 1, d2, one);
  expect(&m, TOLK_INT32, 2, (double[]){INT32_MIN, INT32_MAX}, 0, "Add int32 wraps");
  uint16_t u[1] = {65535};
  tm_begin(&m, "Mul", 14);
  tm_in(&m, TOLK_UINT16, 1, d1, u);
  tm_in(&m, TOLK_UINT16, 1, d1, u);
  expect(&m, TOLK_UINT16, 1, (double[]){1}, 0, "Mul uint16 wraps");

  uint8_t s8[4] = {1, 2, 255, 3}, sh8[4] = {1, 8, 1, 7};
  tm_begin(&m, "BitShift", 11);
  tm_in(&m, TOLK_UINT8, 1, d4, s8);
  tm_in(&m, TOLK_UINT8, 1, d4, sh8);
  tm_attr_str(&m, "direction", "LEFT");
  expect(&m, TOLK_UINT8, 4, (double[]){2, 0, 254, 128}, 0, "BitShift LEFT uint8");
  uint64_t s64[3] = {16, 1ull << 63, 5}, sh64[3] = {2, 64, 200};
  tm_begin(&m, "BitShift", 11);
  tm_in(&m, TOLK_UINT64, 1, d3, s64);
  tm_in(&m, TOLK_UINT64, 1, d3, sh64);
  tm_attr_str(&m, "direction", "RIGHT");
  expect(&m, TOLK_UINT64, 3, (double[]){4, 0, 0}, 0, "BitShift RIGHT uint64");
  int8_t bn[2] = {0, -128};
  tm_begin(&m, "BitwiseNot", 18);
  tm_in(&m, TOLK_INT8, 1, d2, bn);
  expect(&m, TOLK_INT8, 2, (double[]){-1, 127}, 0, "BitwiseNot int8");
}

static void pow_cases(void) {
  struct tmodel m;
  int64_t base[5] = {3, 2, -1, 1, -2}, ex[5] = {39, -1, -3, -5, 63};
  tm_begin(&m, "Pow", 15);
  tm_in(&m, TOLK_INT64, 1, d5, base);
  tm_in(&m, TOLK_INT64, 1, d5, ex);
  /* 3^39 = 4052555153018976267 needs all 63 bits; compare as int64 below. */
  tm_out(&m, 1);
  CHECK(et_run(&m, 1, &err) == TOLK_OK);
  if (m.out[0]) {
    const int64_t *r = tolk_tensor_data(m.out[0]);
    CHECK(r[0] == 4052555153018976267ll && r[1] == 0 && r[2] == -1 && r[3] == 1 &&
          r[4] == INT64_MIN);
  }
  tm_end(&m);
  int32_t ib[3] = {4, 2, 9};
  float fe[3] = {0.5f, 3.0f, 1.5f};
  tm_begin(&m, "Pow", 15);
  tm_in(&m, TOLK_INT32, 1, d3, ib);
  tm_in(&m, TOLK_FLOAT, 1, d3, fe);
  expect(&m, TOLK_INT32, 3, (double[]){2, 8, 27}, 0, "Pow int32 ^ float");
  /* Scalar exponents through the fast forms, against pow() in double. */
  float xs[5] = {-1.5f, 0.25f, 3.0f, 7.75f, 1e-3f};
  double exps[6] = {2, 3, 0.5, 1, -1, 2.5};
  for (int e = 0; e < 6; e++) {
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = (double)(float)pow(xs[i], exps[e]);
    float ev = (float)exps[e];
    tm_begin(&m, "Pow", 15);
    tm_in(&m, TOLK_FLOAT, 1, d5, xs);
    tm_in(&m, TOLK_FLOAT, 0, NULL, &ev);
    expect(&m, TOLK_FLOAT, 5, want, 2e-7, "Pow float ^ scalar");
  }
  /* float16 base, int64 exponents: computed in fp32, rounded once. */
  uint16_t hb[3] = {tolk_f32_to_f16(1.5f), tolk_f32_to_f16(-2.0f), tolk_f32_to_f16(10.0f)};
  int64_t he[3] = {3, 5, 4};
  tm_begin(&m, "Pow", 15);
  tm_in(&m, TOLK_FLOAT16, 1, d3, hb);
  tm_in(&m, TOLK_INT64, 1, d3, he);
  expect(&m, TOLK_FLOAT16, 3, (double[]){3.375, -32, 10000}, 0, "Pow float16 ^ int64");
}

static void clip_cases(void) {
  struct tmodel m;
  float x[5] = {-2.0f, -0.5f, 0.5f, 2.0f, NAN};
  tm_begin(&m, "Clip", 6);
  tm_in(&m, TOLK_FLOAT, 1, d5, x);
  tm_attr_float(&m, "min", -1.0f);
  tm_attr_float(&m, "max", 1.0f);
  expect(&m, TOLK_FLOAT, 5, (double[]){-1, -0.5, 0.5, 1, NAN}, 0, "Clip-6 attributes");
  tm_begin(&m, "Clip", 6);
  tm_in(&m, TOLK_FLOAT, 1, d5, x);
  tm_attr_float(&m, "max", 0.0f);
  expect(&m, TOLK_FLOAT, 5, (double[]){-2, -0.5, 0, 0, NAN}, 0, "Clip-6 max only");
  float lo = 0.0f, hi = -1.0f;
  tm_begin(&m, "Clip", 13);
  tm_in(&m, TOLK_FLOAT, 1, d5, x);
  tm_in(&m, TOLK_FLOAT, 0, NULL, &lo);
  expect(&m, TOLK_FLOAT, 5, (double[]){0, 0, 0.5, 2, NAN}, 0, "Clip-13 min only");
  tm_begin(&m, "Clip", 13);
  tm_in(&m, TOLK_FLOAT, 1, d5, x);
  tm_none(&m);
  tm_in(&m, TOLK_FLOAT, 0, NULL, &hi);
  expect(&m, TOLK_FLOAT, 5, (double[]){-2, -1, -1, -1, NAN}, 0, "Clip-13 max only");
  tm_begin(&m, "Clip", 13);
  tm_in(&m, TOLK_FLOAT, 1, d5, x);
  tm_in(&m, TOLK_FLOAT, 0, NULL, &lo);
  tm_in(&m, TOLK_FLOAT, 0, NULL, &hi);
  expect(&m, TOLK_FLOAT, 5, (double[]){-1, -1, -1, -1, NAN}, 0, "Clip min > max gives max");
  int8_t xi[4] = {-128, -5, 5, 127}, li = -10, hi8 = 10;
  tm_begin(&m, "Clip", 13);
  tm_in(&m, TOLK_INT8, 1, d4, xi);
  tm_in(&m, TOLK_INT8, 0, NULL, &li);
  tm_in(&m, TOLK_INT8, 0, NULL, &hi8);
  expect(&m, TOLK_INT8, 4, (double[]){-10, -5, 5, 10}, 0, "Clip int8");
  uint64_t xu[2] = {1, UINT64_MAX}, hu = UINT64_MAX - 1;
  tm_begin(&m, "Clip", 13);
  tm_in(&m, TOLK_UINT64, 1, d2, xu);
  tm_none(&m);
  tm_in(&m, TOLK_UINT64, 0, NULL, &hu);
  tm_out(&m, 1);
  CHECK(et_run(&m, 1, &err) == TOLK_OK);
  if (m.out[0]) {
    const uint64_t *r = tolk_tensor_data(m.out[0]);
    CHECK(r[0] == 1 && r[1] == UINT64_MAX - 1);
  }
  tm_end(&m);
  float two[2] = {0, 1};
  tm_begin(&m, "Clip", 13);
  tm_in(&m, TOLK_FLOAT, 1, d5, x);
  tm_in(&m, TOLK_FLOAT, 1, d2, two);
  expect_fail(&m, TOLK_ERR_SHAPE, "Clip with a non-scalar min");
}

static void cast_cases(void) {
  struct tmodel m;
  float f[6] = {NAN, 1e20f, -1e20f, 2.9f, -2.9f, -0.0f};
  tm_begin(&m, "Cast", 13);
  tm_in(&m, TOLK_FLOAT, 1, d6, f);
  tm_attr_int(&m, "to", TOLK_INT64);
  tm_out(&m, 1);
  CHECK(et_run(&m, 1, &err) == TOLK_OK);
  if (m.out[0]) {
    const int64_t *r = tolk_tensor_data(m.out[0]);
    CHECK(r[0] == 0 && r[1] == INT64_MAX && r[2] == INT64_MIN && r[3] == 2 && r[4] == -2 &&
          r[5] == 0);
  }
  tm_end(&m);
  float g[4] = {-1.0f, 300.0f, 2.5f, 255.9f};
  tm_begin(&m, "Cast", 13);
  tm_in(&m, TOLK_FLOAT, 1, d4, g);
  tm_attr_int(&m, "to", TOLK_UINT8);
  expect(&m, TOLK_UINT8, 4, (double[]){255, 44, 2, 255}, 0, "Cast float→uint8 wraps like numpy");
  tm_begin(&m, "Cast", 13);
  tm_in(&m, TOLK_FLOAT, 1, d6, f);
  tm_attr_int(&m, "to", TOLK_BOOL);
  expect(&m, TOLK_BOOL, 6, (double[]){1, 1, 1, 1, 1, 0}, 0, "Cast float→bool");
  /* double → float16 rounds once: through float this would hit a tie and
   * round down to 1.0. */
  double d[3] = {1.0 + 0x1p-11 + 0x1p-40, 65520.0, 0x1p-25};
  tm_begin(&m, "Cast", 13);
  tm_in(&m, TOLK_DOUBLE, 1, d3, d);
  tm_attr_int(&m, "to", TOLK_FLOAT16);
  expect(&m, TOLK_FLOAT16, 3, (double[]){1.0 + 0x1p-10, INFINITY, 0}, 0, "Cast double→float16");
  int64_t i[2] = {(1ll << 53) + 1, -(1ll << 24) - 1};
  tm_begin(&m, "Cast", 13);
  tm_in(&m, TOLK_INT64, 1, d2, i);
  tm_attr_int(&m, "to", TOLK_FLOAT);
  expect(&m, TOLK_FLOAT, 2, (double[]){0x1p53, -16777216.0}, 0, "Cast int64→float rounds to even");
  uint16_t h[3] = {0x3c00, 0x7c00, 0x0001};
  tm_begin(&m, "Cast", 13);
  tm_in(&m, TOLK_FLOAT16, 1, d3, h);
  tm_attr_int(&m, "to", TOLK_BFLOAT16);
  expect(&m, TOLK_BFLOAT16, 3, (double[]){1, INFINITY, 0x1p-24}, 0, "Cast float16→bfloat16");
  uint8_t b[3] = {0, 1, 1};
  tm_begin(&m, "CastLike", 15);
  tm_in(&m, TOLK_BOOL, 1, d3, b);
  tm_in(&m, TOLK_DOUBLE, 1, d1, d);
  expect(&m, TOLK_DOUBLE, 3, (double[]){0, 1, 1}, 0, "CastLike bool→double");
  tm_begin(&m, "Cast", 13);
  tm_in(&m, TOLK_FLOAT, 1, d6, f);
  tm_attr_int(&m, "to", 8 /* string */);
  expect_fail(&m, TOLK_ERR_UNSUPPORTED, "Cast to string");
}

static void math_cases(void) {
  struct tmodel m;
  float r[7] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4f, -3.6f};
  tm_begin(&m, "Round", 11);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){7}, r);
  expect(&m, TOLK_FLOAT, 7, (double[]){0, 2, 2, -0.0, -2, 2, -4}, 0, "Round half to even");
  int8_t a8[3] = {-128, -3, 4};
  tm_begin(&m, "Abs", 13);
  tm_in(&m, TOLK_INT8, 1, d3, a8);
  expect(&m, TOLK_INT8, 3, (double[]){-128, 3, 4}, 0, "Abs int8 (MIN wraps)");
  tm_begin(&m, "Neg", 13);
  tm_in(&m, TOLK_INT8, 1, d3, a8);
  expect(&m, TOLK_INT8, 3, (double[]){-128, 3, -4}, 0, "Neg int8");
  float s[4] = {-2.0f, 0.0f, 3.0f, NAN};
  tm_begin(&m, "Sign", 13);
  tm_in(&m, TOLK_FLOAT, 1, d4, s);
  expect(&m, TOLK_FLOAT, 4, (double[]){-1, 0, 1, NAN}, 0, "Sign float");
  uint32_t su[2] = {0, 7};
  tm_begin(&m, "Sign", 13);
  tm_in(&m, TOLK_UINT32, 1, d2, su);
  expect(&m, TOLK_UINT32, 2, (double[]){0, 1}, 0, "Sign uint32");
  float inf[4] = {INFINITY, -INFINITY, NAN, 1.0f};
  tm_begin(&m, "IsInf", 10);
  tm_in(&m, TOLK_FLOAT, 1, d4, inf);
  tm_attr_int(&m, "detect_negative", 0);
  expect(&m, TOLK_BOOL, 4, (double[]){1, 0, 0, 0}, 0, "IsInf positive only");
  tm_begin(&m, "IsNaN", 13);
  tm_in(&m, TOLK_FLOAT, 1, d4, inf);
  expect(&m, TOLK_BOOL, 4, (double[]){0, 0, 1, 0}, 0, "IsNaN");
  /* Unary functions against libm in double, float16 through fp32. */
  struct {
    const char *op;
    double (*f)(double);
  } fns[] = {{"Sqrt", sqrt}, {"Exp", exp},   {"Log", log},     {"Sin", sin},   {"Cos", cos},
             {"Tan", tan},   {"Atan", atan}, {"Sinh", sinh},   {"Cosh", cosh}, {"Asinh", asinh},
             {"Erf", erf},   {"Floor", floor}, {"Ceil", ceil}};
  float xs[5] = {0.125f, 0.5f, 0.75f, 1.5f, 3.25f};
  uint16_t hs[5];
  for (int i = 0; i < 5; i++) hs[i] = tolk_f32_to_f16(xs[i]);
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
    double w[5], wh[5];
    for (int i = 0; i < 5; i++) {
      w[i] = fns[k].f(xs[i]);
      wh[i] = et_round(TOLK_FLOAT16, w[i]);
    }
    tm_begin(&m, fns[k].op, 13);
    tm_in(&m, TOLK_FLOAT, 1, d5, xs);
    expect(&m, TOLK_FLOAT, 5, w, 3e-7, fns[k].op);
    tm_begin(&m, fns[k].op, 13);
    tm_in(&m, TOLK_FLOAT16, 1, d5, hs);
    expect(&m, TOLK_FLOAT16, 5, wh, 1e-3, fns[k].op);
  }
}

static double sigm(double x) { return 1 / (1 + exp(-x)); }
static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static void activation_cases(void) {
  struct tmodel m;
  float x[8] = {-100.0f, -3.0f, -0.5f, 0.0f, 0.5f, 3.0f, 100.0f, -1e-3f};
  struct {
    const char *op;
    int opset;
    const char *attr;
    float a;
  } acts[] = {{"Relu", 14, NULL, 0},        {"LeakyRelu", 16, "alpha", 0.1f},
              {"Elu", 6, "alpha", 0.7f},    {"Selu", 6, NULL, 0},
              {"Celu", 12, "alpha", 2.0f},  {"Sigmoid", 13, NULL, 0},
              {"HardSigmoid", 6, NULL, 0},  {"HardSwish", 14, NULL, 0},
              {"Tanh", 13, NULL, 0},        {"Softplus", 1, NULL, 0},
              {"Softsign", 1, NULL, 0},     {"Gelu", 20, NULL, 0},
              {"Mish", 18, NULL, 0},        {"ThresholdedRelu", 10, "alpha", 0.4f},
              {"Shrink", 9, "lambd", 0.6f}};
  const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
  for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
    double w[8];
    for (int i = 0; i < 8; i++) {
      double v = x[i], a = acts[k].a;
      const char *op = acts[k].op;
      if (!strcmp(op, "Relu")) w[i] = v > 0 ? v : 0;
      else if (!strcmp(op, "LeakyRelu")) w[i] = v < 0 ? (double)(float)(a * (float)v) : v;
      else if (!strcmp(op, "Elu")) w[i] = v < 0 ? a * (exp(v) - 1) : v;
      else if (!strcmp(op, "Selu")) w[i] = v <= 0 ? selu_g * (selu_a * exp(v) - selu_a) : selu_g * v;
      else if (!strcmp(op, "Celu")) w[i] = fmax(0, v) + fmin(0, a * (exp(v / a) - 1));
      else if (!strcmp(op, "Sigmoid")) w[i] = sigm(v);
      else if (!strcmp(op, "HardSigmoid")) w[i] = fmax(0, fmin(1, 0.2 * v + 0.5));
      else if (!strcmp(op, "HardSwish")) w[i] = v * fmax(0, fmin(1, v / 6 + 0.5));
      else if (!strcmp(op, "Tanh")) w[i] = tanh(v);
      else if (!strcmp(op, "Softplus")) w[i] = softplus(v);
      else if (!strcmp(op, "Softsign")) w[i] = v / (1 + fabs(v));
      else if (!strcmp(op, "Gelu")) w[i] = 0.5 * v * (1 + erf(v / sqrt(2.0)));
      else if (!strcmp(op, "Mish")) w[i] = v * tanh(softplus(v));
      else if (!strcmp(op, "ThresholdedRelu")) w[i] = v > a ? v : 0;
      else w[i] = v < -a ? v : v > a ? v : 0; /* Shrink, bias 0 */
    }
    tm_begin(&m, acts[k].op, acts[k].opset);
    tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){8}, x);
    if (acts[k].attr) tm_attr_float(&m, acts[k].attr, acts[k].a);
    expect(&m, TOLK_FLOAT, 8, w, 1e-6, acts[k].op);
    tm_begin(&m, acts[k].op, acts[k].opset);
    double wd[8];
    double xd[8];
    for (int i = 0; i < 8; i++) xd[i] = x[i], wd[i] = w[i];
    tm_in(&m, TOLK_DOUBLE, 1, (int64_t[]){8}, xd);
    if (acts[k].attr) tm_attr_float(&m, acts[k].attr, acts[k].a);
    expect(&m, TOLK_DOUBLE, 8, wd, 1e-6, acts[k].op);
  }
  /* Gelu tanh approximation. */
  double wg[8];
  for (int i = 0; i < 8; i++) {
    double v = x[i];
    wg[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  tm_begin(&m, "Gelu", 20);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){8}, x);
  tm_attr_str(&m, "approximate", "tanh");
  expect(&m, TOLK_FLOAT, 8, wg, 1e-6, "Gelu tanh");
  tm_begin(&m, "Gelu", 20);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){8}, x);
  tm_attr_str(&m, "approximate", "erf");
  expect_fail(&m, TOLK_ERR_INVALID_MODEL, "Gelu approximate=erf");
  /* Shrink on int8 with bias. */
  int8_t xi[5] = {-100, -2, 0, 2, 100};
  tm_begin(&m, "Shrink", 9);
  tm_in(&m, TOLK_INT8, 1, d5, xi);
  tm_attr_float(&m, "lambd", 1.5f);
  tm_attr_float(&m, "bias", 1.5f);
  expect(&m, TOLK_INT8, 5, (double[]){-98, 0, 0, 0, 98}, 0, "Shrink int8");
  /* PRelu: per-channel slope [C,1,1] onto [N,C,H,W]. */
  float px[2 * 3 * 2 * 2], ps[3] = {0.1f, 0.2f, 0.3f};
  double pw[24];
  for (int i = 0; i < 24; i++) {
    px[i] = (float)(i % 5) - 2.0f;
    int ch = (i / 4) % 3;
    pw[i] = px[i] < 0 ? (double)(ps[ch] * px[i]) : px[i];
  }
  tm_begin(&m, "PRelu", 16);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){2, 3, 2, 2}, px);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){3, 1, 1}, ps);
  expect(&m, TOLK_FLOAT, 24, pw, 0, "PRelu per-channel");
  tm_begin(&m, "PRelu", 16);
  tm_in(&m, TOLK_FLOAT, 1, d3, ps);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, pw);
  expect_fail(&m, TOLK_ERR_SHAPE, "PRelu slope bigger than X");
}

static void structure_cases(void) {
  struct tmodel m;
  /* Variadic with broadcasting. */
  float a[2] = {1, 2}, b[3] = {10, 20, 30}, c[6] = {100, 200, 300, 400, 500, 600};
  tm_begin(&m, "Sum", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 1}, a);
  tm_in(&m, TOLK_FLOAT, 1, d3, b);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, c);
  expect(&m, TOLK_FLOAT, 6, (double[]){111, 221, 331, 412, 522, 632}, 0, "Sum of 3");
  tm_begin(&m, "Mean", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 1}, a);
  tm_in(&m, TOLK_FLOAT, 1, d3, b);
  expect(&m, TOLK_FLOAT, 6, (double[]){5.5, 10.5, 15.5, 6, 11, 16}, 0, "Mean of 2");
  tm_begin(&m, "Max", 13);
  tm_in(&m, TOLK_FLOAT, 1, d3, b);
  expect(&m, TOLK_FLOAT, 3, (double[]){10, 20, 30}, 0, "Max of 1");
  float n1[3] = {NAN, 1, 5}, n2[3] = {0, NAN, 4};
  tm_begin(&m, "Min", 13);
  tm_in(&m, TOLK_FLOAT, 1, d3, n1);
  tm_in(&m, TOLK_FLOAT, 1, d3, n2);
  expect(&m, TOLK_FLOAT, 3, (double[]){NAN, NAN, 4}, 0, "Min propagates NaN");
  /* Where: three-way broadcast. */
  uint8_t cond[2] = {1, 0};
  int64_t wx[3] = {1, 2, 3}, wy = -7;
  tm_begin(&m, "Where", 16);
  tm_in(&m, TOLK_BOOL, 2, (int64_t[]){2, 1}, cond);
  tm_in(&m, TOLK_INT64, 2, (int64_t[]){1, 3}, wx);
  tm_in(&m, TOLK_INT64, 0, NULL, &wy);
  expect(&m, TOLK_INT64, 6, (double[]){1, 2, 3, -7, -7, -7}, 0, "Where 3-way");
  tm_begin(&m, "Where", 16);
  tm_in(&m, TOLK_INT64, 1, d1, &wy);
  tm_in(&m, TOLK_INT64, 1, d3, wx);
  tm_in(&m, TOLK_INT64, 1, d3, wx);
  expect_fail(&m, TOLK_ERR_TYPE, "Where with a non-bool condition");
  /* Opset 6 broadcast=1 with axis: B [3] aligned at axis 1 of A [2,3,2]. */
  float la[12], lb[3] = {100, 200, 300};
  double lw[12];
  for (int i = 0; i < 12; i++) la[i] = (float)i, lw[i] = i + lb[(i / 2) % 3];
  tm_begin(&m, "Add", 6);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 3, 2}, la);
  tm_in(&m, TOLK_FLOAT, 1, d3, lb);
  tm_attr_int(&m, "broadcast", 1);
  tm_attr_int(&m, "axis", 1);
  expect(&m, TOLK_FLOAT, 12, lw, 0, "Add-6 broadcast axis=1");
  /* Empty tensors broadcast to empty outputs. */
  tm_begin(&m, "Mul", 14);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){0, 3}, NULL);
  tm_in(&m, TOLK_FLOAT, 1, d3, b);
  expect(&m, TOLK_FLOAT, 0, NULL, 0, "Mul empty");
}

int main(void) {
  integer_arith();
  pow_cases();
  clip_cases();
  cast_cases();
  math_cases();
  activation_cases();
  structure_cases();
  return tu_finish("test_ops_elementwise_sem");
}
