/*
 * test_ops_elementwise.c — the broadcasting operators end to end (one-node
 * models through the session API) against a plain reference written here:
 * per output element, numpy index arithmetic picks the inputs and a scalar
 * formula in double gives the value, rounded into the output dtype. Random
 * shapes cover same-shape, scalar, row, per-channel and general broadcasts;
 * every dtype each op allows; and tensors big enough to be split over a
 * 4-thread pool, so the fast run loops and the thread split are both checked
 * against the reference. Arithmetic on float16/bfloat16 must be exactly the
 * correctly rounded result (fp32 compute is exact enough for + - × ÷).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_ops_elementwise.h"
#include "testutil.h"

static int rnd(int n) { return (int)tu_below(n); }

enum kind { K_ARITH, K_CMP, K_LOGIC, K_BITS };

struct binop {
  const char *op;
  int opset;
  enum kind kind;
  double (*f)(double a, double b, tolk_dtype dt);
};

static double f_add(double a, double b, tolk_dtype dt) { (void)dt; return a + b; }
static double f_sub(double a, double b, tolk_dtype dt) { (void)dt; return a - b; }
static double f_mul(double a, double b, tolk_dtype dt) { (void)dt; return a * b; }
static double f_div(double a, double b, tolk_dtype dt) {
  if (et_is_float(dt)) return a / b;
  return b == 0 ? 0 : trunc(a / b);
}
static double f_min(double a, double b, tolk_dtype dt) { (void)dt; return a < b ? a : b; }
static double f_max(double a, double b, tolk_dtype dt) { (void)dt; return a > b ? a : b; }
static double f_eq(double a, double b, tolk_dtype dt) { (void)dt; return a == b; }
static double f_gt(double a, double b, tolk_dtype dt) { (void)dt; return a > b; }
static double f_lt(double a, double b, tolk_dtype dt) { (void)dt; return a < b; }
static double f_ge(double a, double b, tolk_dtype dt) { (void)dt; return a >= b; }
static double f_le(double a, double b, tolk_dtype dt) { (void)dt; return a <= b; }
static double f_and(double a, double b, tolk_dtype dt) { (void)dt; return a != 0 && b != 0; }
static double f_or(double a, double b, tolk_dtype dt) { (void)dt; return a != 0 || b != 0; }
static double f_xor(double a, double b, tolk_dtype dt) { (void)dt; return (a != 0) != (b != 0); }
static double f_band(double a, double b, tolk_dtype dt) { (void)dt; return (double)((int64_t)a & (int64_t)b); }
static double f_bor(double a, double b, tolk_dtype dt) { (void)dt; return (double)((int64_t)a | (int64_t)b); }
static double f_bxor(double a, double b, tolk_dtype dt) { (void)dt; return (double)((int64_t)a ^ (int64_t)b); }
/* Python-style modulus (fmod=0), integers. */
static double f_pymod(double a, double b, tolk_dtype dt) {
  (void)dt;
  if (b == 0) return 0;
  double r = fmod(a, b);
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

static const struct binop ops[] = {
    {"Add", 14, K_ARITH, f_add},          {"Sub", 14, K_ARITH, f_sub},
    {"Mul", 14, K_ARITH, f_mul},          {"Div", 14, K_ARITH, f_div},
    {"Min", 13, K_ARITH, f_min},          {"Max", 13, K_ARITH, f_max},
    {"Equal", 13, K_CMP, f_eq},           {"Greater", 13, K_CMP, f_gt},
    {"Less", 13, K_CMP, f_lt},            {"GreaterOrEqual", 16, K_CMP, f_ge},
    {"LessOrEqual", 16, K_CMP, f_le},     {"And", 7, K_LOGIC, f_and},
    {"Or", 7, K_LOGIC, f_or},             {"Xor", 7, K_LOGIC, f_xor},
    {"BitwiseAnd", 18, K_BITS, f_band},   {"BitwiseOr", 18, K_BITS, f_bor},
    {"BitwiseXor", 18, K_BITS, f_bxor},   {"Mod", 13, K_BITS, f_pymod},
};

static const tolk_dtype num_types[] = {TOLK_FLOAT, TOLK_DOUBLE, TOLK_FLOAT16, TOLK_BFLOAT16,
                                       TOLK_INT8,  TOLK_INT16,  TOLK_INT32,   TOLK_INT64,
                                       TOLK_UINT8, TOLK_UINT16, TOLK_UINT32,  TOLK_UINT64};

static bool is_unsigned(tolk_dtype dt) {
  return dt == TOLK_UINT8 || dt == TOLK_UINT16 || dt == TOLK_UINT32 || dt == TOLK_UINT64;
}

/* A random value that the dtype holds exactly, small enough that products
 * and sums stay in range for every integer type. */
static double rand_value(tolk_dtype dt, bool nonzero) {
  double v;
  do {
    if (dt == TOLK_BOOL) v = rnd(2);
    else if (et_is_float(dt)) v = et_round(dt, (rnd(2001) - 1000) / 125.0);
    else if (is_unsigned(dt)) v = rnd(12);
    else v = rnd(23) - 11;
  } while (nonzero && v == 0);
  return v;
}

struct shape {
  int rank;
  int64_t dims[6];
  int64_t numel;
};

static void fill(struct shape *s) {
  s->numel = 1;
  for (int i = 0; i < s->rank; i++) s->numel *= s->dims[i];
}

/* Two random shapes that broadcast together. */
static void random_pair(struct shape *a, struct shape *b) {
  int R = rnd(5);
  int64_t out[6];
  for (int i = 0; i < R; i++) out[i] = 1 + rnd(4);
  struct shape *s[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    s[k]->rank = rnd(R + 1);
    if (k == 0 && rnd(2)) s[k]->rank = R;
    for (int j = 0; j < s[k]->rank; j++)
      s[k]->dims[j] = rnd(3) == 0 ? 1 : out[R - s[k]->rank + j];
    fill(s[k]);
  }
}

/* Broadcast output shape (the inputs are known compatible). */
static void out_shape(const struct shape *a, const struct shape *b, struct shape *o) {
  o->rank = a->rank > b->rank ? a->rank : b->rank;
  for (int i = 0; i < o->rank; i++) {
    int ia = i - (o->rank - a->rank), ib = i - (o->rank - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    o->dims[i] = da > db ? da : db;
  }
  fill(o);
}

/* Offset into input s for the output position pos (numpy rules). */
static int64_t offset_of(const struct shape *s, const struct shape *o, int64_t pos) {
  int64_t off = 0, mul = 1;
  for (int i = o->rank - 1; i >= 0; i--) {
    int64_t idx = pos % o->dims[i];
    pos /= o->dims[i];
    int j = i - (o->rank - s->rank);
    if (j < 0) continue;
    if (s->dims[j] != 1) off += idx * mul;
    mul *= s->dims[j];
  }
  return off;
}

static int cases_run;

/* Runs op on (a, b) of dtype dt with `threads` and checks every element. */
static void check_case(const struct binop *op, tolk_dtype dt, const struct shape *sa,
                       const struct shape *sb, int threads) {
  size_t es = tolk_dtype_size(dt);
  void *a = malloc((size_t)(sa->numel ? sa->numel : 1) * es);
  void *b = malloc((size_t)(sb->numel ? sb->numel : 1) * es);
  bool nz = !strcmp(op->op, "Div") || !strcmp(op->op, "Mod");
  for (int64_t i = 0; i < sa->numel; i++) et_set(dt, a, i, rand_value(dt, false));
  for (int64_t i = 0; i < sb->numel; i++) et_set(dt, b, i, rand_value(dt, nz));
  struct tmodel m;
  tm_begin(&m, op->op, op->opset);
  tm_in(&m, dt, sa->rank, sa->dims, a);
  tm_in(&m, dt, sb->rank, sb->dims, b);
  tm_out(&m, 1);
  tolk_error err = {0};
  tolk_status st = et_run(&m, threads, &err);
  CHECK_MSG(st == TOLK_OK, "%s %s: %s", op->op, tolk_dtype_name(dt), err.message);
  if (st == TOLK_OK) {
    struct shape so;
    out_shape(sa, sb, &so);
    tolk_dtype odt = op->kind == K_CMP ? TOLK_BOOL : dt;
    const tolk_tensor *y = m.out[0];
    CHECK(tolk_tensor_dtype(y) == odt && tolk_tensor_rank(y) == so.rank &&
          tolk_tensor_numel(y) == so.numel);
    int bad = 0;
    for (int64_t i = 0; i < so.numel && tolk_tensor_numel(y) == so.numel; i++) {
      double x1 = et_get(dt, a, offset_of(sa, &so, i)), x2 = et_get(dt, b, offset_of(sb, &so, i));
      double want = et_round(odt, op->f(x1, x2, dt)), got = et_get(odt, tolk_tensor_data(y), i);
      if (got != want && bad++ < 3)
        CHECK_MSG(0, "%s %s elem %lld: %g op %g = %g, want %g", op->op, tolk_dtype_name(dt),
                  (long long)i, x1, x2, got, want);
    }
    tu_checks++;
    if (bad) tu_failures++;
  }
  tm_end(&m);
  free(a);
  free(b);
  cases_run++;
}

static bool op_takes(const struct binop *op, tolk_dtype dt) {
  switch (op->kind) {
  case K_LOGIC: return dt == TOLK_BOOL;
  case K_BITS: return !et_is_float(dt) && dt != TOLK_BOOL;
  default: return dt != TOLK_BOOL;
  }
}

int main(void) {
  tu_seed(0x853c49e6748fea9bull);
  /* Random small broadcasts: every op, every dtype it takes. */
  tolk_dtype all[13];
  memcpy(all, num_types, sizeof num_types);
  all[12] = TOLK_BOOL;
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (size_t t = 0; t < 13; t++) {
      if (!op_takes(&ops[o], all[t])) continue;
      for (int r = 0; r < 6; r++) {
        struct shape a, b;
        random_pair(&a, &b);
        check_case(&ops[o], all[t], &a, &b, 1);
      }
    }

  /* Big tensors on 4 threads: same shape, scalar, row, per-channel and a
   * general broadcast, so chunks start mid-run. */
  struct shape big[][2] = {
      {{1, {70001}, 0}, {1, {70001}, 0}},
      {{2, {300, 301}, 0}, {0, {0}, 0}},
      {{3, {5, 97, 211}, 0}, {1, {211}, 0}},
      {{4, {2, 7, 97, 61}, 0}, {3, {7, 1, 1}, 0}},
      {{3, {61, 1, 1301}, 0}, {2, {7, 1}, 0}},
  };
  const struct binop *big_ops[] = {&ops[0], &ops[3], &ops[5], &ops[7]};
  const tolk_dtype big_types[] = {TOLK_FLOAT, TOLK_FLOAT16, TOLK_INT32, TOLK_UINT8};
  for (size_t s = 0; s < sizeof big / sizeof big[0]; s++) {
    fill(&big[s][0]);
    fill(&big[s][1]);
    for (size_t o = 0; o < 4; o++) check_case(big_ops[o], big_types[(s + o) % 4], &big[s][0], &big[s][1], 4);
  }

  /* Incompatible shapes and mixed dtypes are errors, not crashes. */
  struct tmodel m;
  tolk_error err = {0};
  float f[6] = {0};
  tm_begin(&m, "Add", 14);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, f);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, f);
  tm_out(&m, 1);
  CHECK(et_run(&m, 1, &err) == TOLK_ERR_SHAPE && strstr(err.message, "[2, 3] and [2]"));
  tm_end(&m);
  int64_t iv[2] = {0};
  tm_begin(&m, "Mul", 14);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, f);
  tm_in(&m, TOLK_INT64, 1, (int64_t[]){2}, iv);
  tm_out(&m, 1);
  CHECK(et_run(&m, 1, &err) != TOLK_OK);
  tm_end(&m);
  printf("%d cases\n", cases_run);
  return tu_finish("test_ops_elementwise");
}
