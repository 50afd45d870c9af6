/*
 * elementwise.c — the elementwise family's drivers (declared in ew.h) and
 * its broadcasting arithmetic: Add Sub Mul Div Pow Mod, the variadic Sum
 * Mean Min Max, and the family's op table, which also lists the unary math
 * ops of elementwise_math.c and the comparison/logic/bitwise ops of logic.c.
 *
 * Semantics where ONNX leaves room (chosen to be defined behaviour, never a
 * crash): integer Add/Sub/Mul wrap; integer Div truncates toward zero (as C
 * and ONNX Runtime do), x / 0 gives 0 and INT_MIN / -1 wraps to INT_MIN;
 * Mod by 0 gives 0; integer Pow is exact repeated squaring with wrapping, and
 * a negative exponent gives 1, ±1 or 0 as the real result truncates; Min and
 * Max propagate NaN (numpy's maximum/minimum). Opset 1–6 ops with the legacy
 * `broadcast`/`axis` attributes are mapped onto numpy broadcasting.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/half.h"
#include "ew.h"

/* Block of 16-bit floats widened at a time (on the stack). */
#define EW_BLK 512

static bool is_half(int32_t dt) { return dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16; }

static void widen(int32_t dt, const void *src, float *dst, int64_t n) {
  if (dt == TOLK_FLOAT16) kern_f16_to_f32(src, dst, n);
  else tolk_bf16_to_f32_n(src, dst, n);
}

static void narrow(int32_t dt, const float *src, void *dst, int64_t n) {
  if (dt == TOLK_FLOAT16) kern_f32_to_f16(src, dst, n);
  else tolk_f32_to_bf16_n(src, dst, n);
}

void ew_par(struct op_ctx *c, int64_t n, int64_t grain, op_range_fn fn, void *arg) {
  if (n <= 0) return;
  if (c && c->pool && n >= 2 * grain) op_parallel_for(c, n, grain, fn, arg);
  else fn(arg, 0, n);
}

tolk_status ew_fail(struct op_ctx *c, tolk_status status, const char *fmt, ...) {
  if (!c) return status;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return op_fail(c, status, "%s", msg);
}

tolk_status ew_inputs(struct op_ctx *c, size_t n, const struct tensor **t) {
  for (size_t i = 0; i < n; i++) {
    t[i] = op_in(c, i);
    if (!t[i]) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input %zu is missing", i);
  }
  return TOLK_OK;
}

static const char *dt_name(int32_t dt) { return tolk_dtype_name((tolk_dtype)dt); }

static int32_t out_dtype(int32_t fixed, int32_t in) { return fixed ? fixed : in; }

bool ew_unary_has(const struct ew_unary_def *d, int32_t dt) {
  if (dt <= 0 || dt >= EW_NDT) return false;
  return d->fn[dt] || (is_half(dt) && d->fn[TOLK_FLOAT]);
}

bool ew_binary_has(const struct ew_binary_def *d, int32_t dt) {
  if (dt <= 0 || dt >= EW_NDT) return false;
  return d->fn[dt] || (is_half(dt) && d->fn[TOLK_FLOAT]);
}

/* ------------------------------------------------------------- unary */

struct un_job {
  ew_un_fn fn;
  const unsigned char *x;
  unsigned char *y;
  size_t xs, ys;
  int32_t xdt, ydt;
  bool widen;
  const struct ew_params *p;
};

static void un_chunk(void *arg, int64_t begin, int64_t end) {
  const struct un_job *j = arg;
  if (!j->widen) {
    j->fn(end - begin, j->y + (size_t)begin * j->ys, j->x + (size_t)begin * j->xs, j->p);
    return;
  }
  float xf[EW_BLK], yf[EW_BLK];
  for (int64_t i = begin; i < end; i += EW_BLK) {
    int64_t n = end - i < EW_BLK ? end - i : EW_BLK;
    widen(j->xdt, j->x + (size_t)i * j->xs, xf, n);
    if (is_half(j->ydt)) {
      j->fn(n, yf, xf, j->p);
      narrow(j->ydt, yf, j->y + (size_t)i * j->ys, n);
    } else {
      j->fn(n, j->y + (size_t)i * j->ys, xf, j->p);
    }
  }
}

tolk_status ew_unary(struct op_ctx *c, const struct ew_unary_def *d, const struct tensor *x,
                     struct tensor *y, const struct ew_params *p) {
  if (!ew_unary_has(d, x->dtype))
    return ew_fail(c, TOLK_ERR_UNSUPPORTED, "%s does not support %s input", d->name,
                   dt_name(x->dtype));
  struct un_job j = {
      .fn = d->fn[x->dtype],
      .x = x->data,
      .y = y->data,
      .xs = op_dtype_size(x->dtype),
      .ys = op_dtype_size(y->dtype),
      .xdt = x->dtype,
      .ydt = y->dtype,
      .p = p,
  };
  if (!j.fn) {
    j.fn = d->fn[TOLK_FLOAT];
    j.widen = true;
  }
  ew_par(c, x->numel, d->grain ? d->grain : EW_GRAIN, un_chunk, &j);
  return TOLK_OK;
}

tolk_status ew_run_unary(struct op_ctx *c, const struct ew_unary_def *d,
                         const struct ew_params *p) {
  const struct tensor *x;
  tolk_status st = ew_inputs(c, 1, &x);
  if (st) return st;
  if (!ew_unary_has(d, x->dtype))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "%s does not support %s input", d->name,
                   dt_name(x->dtype));
  struct tensor *y = op_output(c, 0, out_dtype(d->out_dtype, x->dtype), x->rank, x->dims);
  if (!y) return c->err->status;
  return ew_unary(c, d, x, y, p);
}

/* ------------------------------------------------------------- binary */

struct bin_job {
  ew_bin_fn fn;
  const struct bcast *bc;
  const unsigned char *a, *b;
  unsigned char *y;
  size_t as, bs, ys;
  int32_t xdt, ydt;
  bool widen;
  const struct ew_params *p;
};

/* One run of `len` outputs from `pos`, 16-bit floats widened per block. */
static void bin_run(const struct bin_job *j, int64_t pos, int64_t len, const int64_t *off) {
  int64_t sa = j->bc->inner[0], sb = j->bc->inner[1];
  const unsigned char *a = j->a + (size_t)off[0] * j->as, *b = j->b + (size_t)off[1] * j->bs;
  unsigned char *y = j->y + (size_t)pos * j->ys;
  if (!j->widen) {
    j->fn(len, y, a, sa, b, sb, j->p);
    return;
  }
  float af[EW_BLK], bf[EW_BLK], yf[EW_BLK];
  if (!sa) widen(j->xdt, a, af, 1);
  if (!sb) widen(j->xdt, b, bf, 1);
  for (int64_t i = 0; i < len; i += EW_BLK) {
    int64_t n = len - i < EW_BLK ? len - i : EW_BLK;
    if (sa) widen(j->xdt, a + (size_t)i * j->as, af, n);
    if (sb) widen(j->xdt, b + (size_t)i * j->bs, bf, n);
    if (is_half(j->ydt)) {
      j->fn(n, yf, af, sa, bf, sb, j->p);
      narrow(j->ydt, yf, y + (size_t)i * j->ys, n);
    } else {
      j->fn(n, y + (size_t)i * j->ys, af, sa, bf, sb, j->p);
    }
  }
}

static void bin_chunk(void *arg, int64_t begin, int64_t end) {
  const struct bin_job *j = arg;
  struct bcast_iter it;
  int64_t off[BCAST_MAX_IN], len;
  bcast_iter_seek(j->bc, &it, begin);
  while ((len = bcast_iter_next(j->bc, &it, end, off)) > 0) bin_run(j, it.run_start, len, off);
}

static tolk_status bin_job_init(struct op_ctx *c, struct bin_job *j,
                                const struct ew_binary_def *d, const struct bcast *bc,
                                const struct tensor *a, const struct tensor *b,
                                struct tensor *y, const struct ew_params *p) {
  if (!ew_binary_has(d, a->dtype))
    return ew_fail(c, TOLK_ERR_UNSUPPORTED, "%s does not support %s inputs", d->name,
                   dt_name(a->dtype));
  *j = (struct bin_job){
      .fn = d->fn[a->dtype],
      .bc = bc,
      .a = a->data,
      .b = b->data,
      .y = y->data,
      .as = op_dtype_size(a->dtype),
      .bs = op_dtype_size(b->dtype),
      .ys = op_dtype_size(y->dtype),
      .xdt = a->dtype,
      .ydt = y->dtype,
      .p = p,
  };
  if (!j->fn) {
    j->fn = d->fn[TOLK_FLOAT];
    j->widen = true;
  }
  return TOLK_OK;
}

tolk_status ew_binary(struct op_ctx *c, const struct ew_binary_def *d, const struct bcast *bc,
                      const struct tensor *a, const struct tensor *b, struct tensor *y,
                      const struct ew_params *p) {
  struct bin_job j = {0};
  tolk_status st = bin_job_init(c, &j, d, bc, a, b, y, p);
  if (st) return st;
  ew_par(c, bc->numel, d->grain ? d->grain : EW_GRAIN, bin_chunk, &j);
  return TOLK_OK;
}

/* Opset 1–6 arithmetic: with broadcast=1, B is aligned with A at `axis`
 * (default: at the end, as numpy); pad B's shape with trailing 1s so numpy
 * rules give the same result. */
static tolk_status legacy_shape(struct op_ctx *c, const struct tensor *a, const struct tensor *b,
                                struct bcast_shape *bs, int64_t *dims) {
  *bs = (struct bcast_shape){b->rank, b->dims};
  if (c->opset >= 7 || ir_attr_int(c->node, "broadcast", 0) == 0) return TOLK_OK;
  int64_t axis = ir_attr_int(c->node, "axis", a->rank - b->rank);
  if (axis < 0) axis += a->rank;
  if (axis < 0 || axis + b->rank > a->rank)
    return op_fail(c, TOLK_ERR_SHAPE, "legacy broadcast: axis %lld does not fit B (rank %d) in A (rank %d)",
                   (long long)axis, b->rank, a->rank);
  int r = (int)(a->rank - axis);
  for (int i = 0; i < r; i++) dims[i] = i < b->rank ? b->dims[i] : 1;
  *bs = (struct bcast_shape){r, dims};
  return TOLK_OK;
}

tolk_status ew_run_binary(struct op_ctx *c, const struct ew_binary_def *d,
                          const struct ew_params *p) {
  const struct tensor *in[2];
  tolk_status st = ew_inputs(c, 2, in);
  if (st) return st;
  if (in[0]->dtype != in[1]->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "%s inputs differ in dtype: %s and %s", d->name,
                   dt_name(in[0]->dtype), dt_name(in[1]->dtype));
  if (!ew_binary_has(d, in[0]->dtype))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "%s does not support %s inputs", d->name,
                   dt_name(in[0]->dtype));
  struct bcast_shape s[2] = {{in[0]->rank, in[0]->dims}};
  int64_t bdims[IR_MAX_RANK];
  if ((st = legacy_shape(c, in[0], in[1], &s[1], bdims))) return st;
  struct bcast bc;
  if (!bcast_init(&bc, 2, s)) {
    char buf[160];
    return op_fail(c, TOLK_ERR_SHAPE, "%s cannot broadcast %s", d->name,
                   bcast_shapes_str(2, in, buf, sizeof buf));
  }
  struct tensor *y = op_output(c, 0, out_dtype(d->out_dtype, in[0]->dtype), bc.rank, bc.dims);
  if (!y) return c->err->status;
  return ew_binary(c, d, &bc, in[0], in[1], y, p);
}

/* ------------------------------------------------------- arithmetic */

#define T_ADD(s, T, W, DT, n) EW_BIN_SAME(s, T, W, DT, n, (WW)x + (WW)y)
#define T_SUB(s, T, W, DT, n) EW_BIN_SAME(s, T, W, DT, n, (WW)x - (WW)y)
#define T_MUL(s, T, W, DT, n) EW_BIN_SAME(s, T, W, DT, n, (WW)x * (WW)y)
EW_NUM(T_ADD, add)
EW_NUM(T_SUB, sub)
EW_NUM(T_MUL, mul)
EW_FLT(EW_BIN_SAME, div, x / y)
/* Signed: x / 0 → 0, MIN / -1 → MIN (the wrapped negation). */
EW_SINT(EW_BIN_SAME, div, y == 0 ? (TT)0 : y == -1 ? (TT)(0 - (WW)x) : (TT)(x / y))
EW_UINT(EW_BIN_SAME, div, y == 0 ? (TT)0 : (TT)(x / y))

#define T_MIN(s, T, W, DT, n) EW_BIN_SAME(s, T, W, DT, n, x != x ? x : y != y ? y : x < y ? x : y)
#define T_MAX(s, T, W, DT, n) EW_BIN_SAME(s, T, W, DT, n, x != x ? x : y != y ? y : x > y ? x : y)
EW_FLT(T_MIN, vmin)
EW_FLT(T_MAX, vmax)
EW_INT(EW_BIN_SAME, vmin, x < y ? x : y)
EW_INT(EW_BIN_SAME, vmax, x > y ? x : y)

/* Mod. fmod=1: the sign of the dividend (C's % and fmod). fmod=0 (integers
 * only): the sign of the divisor, as Python. */
EW_FLT(EW_BIN_SAME, fmod1, fmod(x, y))
EW_SINT(EW_BIN_SAME, fmod1, y == 0 || y == -1 ? (TT)0 : (TT)(x % y))
EW_UINT(EW_BIN_SAME, fmod1, y == 0 ? (TT)0 : (TT)(x % y))
#define PYMOD(x, y) ((x % y != 0 && ((x % y < 0) != (y < 0))) ? (TT)(x % y + y) : (TT)(x % y))
EW_SINT(EW_BIN_SAME, pymod, y == 0 || y == -1 ? (TT)0 : PYMOD(x, y))

static const struct ew_binary_def add_def = {"Add", 0, 0, {EW_NUM(EW_ENT, add)}};
static const struct ew_binary_def sub_def = {"Sub", 0, 0, {EW_NUM(EW_ENT, sub)}};
static const struct ew_binary_def mul_def = {"Mul", 0, 0, {EW_NUM(EW_ENT, mul)}};
static const struct ew_binary_def div_def = {"Div", 0, 0, {EW_NUM(EW_ENT, div)}};
static const struct ew_binary_def min_def = {"Min", 0, 0, {EW_NUM(EW_ENT, vmin)}};
static const struct ew_binary_def max_def = {"Max", 0, 0, {EW_NUM(EW_ENT, vmax)}};
static const struct ew_binary_def fmod1_def = {"Mod", 0, 0, {EW_NUM(EW_ENT, fmod1)}};
static const struct ew_binary_def pymod_def = {"Mod", 0, 0, {EW_SINT(EW_ENT, pymod)
                                                             EW_UINT(EW_ENT, fmod1)}};

/* The LM head's bias Add in a run restricted to a shortlist (op.h,
 * op_head_subset): the head's output is [.., n] and the bias its n
 * gathered entries, which the graph's bias input no longer matches. */
static tolk_status head_bias_add(struct op_ctx *c, const struct op_head_subset *hs) {
  const struct tensor *x = op_in(c, hs->x_input);
  if (!x || x->dtype != TOLK_FLOAT || x->rank < 1 || x->dims[x->rank - 1] != hs->n)
    return op_fail(c, TOLK_ERR_SHAPE, "LM head subset: the bias Add expects float [.., %lld]", (long long)hs->n);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, x->rank, x->dims);
  if (!y) return c->err->status;
  const float *xd = x->data;
  float *yd = y->data;
  for (int64_t i = 0; i < x->numel; i += hs->n)
    for (int64_t j = 0; j < hs->n; j++) yd[i + j] = xd[i + j] + hs->bias[j];
  return TOLK_OK;
}

static tolk_status run_add(struct op_ctx *c) {
  const struct op_head_subset *hs = op_head_subset(c);
  if (hs && hs->add == c->node) return head_bias_add(c, hs);
  return ew_run_binary(c, &add_def, NULL);
}
static tolk_status run_sub(struct op_ctx *c) { return ew_run_binary(c, &sub_def, NULL); }
static tolk_status run_mul(struct op_ctx *c) { return ew_run_binary(c, &mul_def, NULL); }
static tolk_status run_div(struct op_ctx *c) { return ew_run_binary(c, &div_def, NULL); }

static tolk_status run_mod(struct op_ctx *c) {
  int64_t fm = ir_attr_int(c->node, "fmod", 0);
  const struct tensor *x = op_in(c, 0);
  if (!fm && x && (x->dtype == TOLK_FLOAT || x->dtype == TOLK_DOUBLE || is_half(x->dtype)))
    return op_fail(c, TOLK_ERR_INVALID_MODEL,
                   "Mod on %s inputs requires fmod=1 (the ONNX spec defines no integer-style "
                   "modulus for floats)", dt_name(x->dtype));
  return ew_run_binary(c, fm ? &fmod1_def : &pymod_def, NULL);
}

/* ------------------------------------------------------- variadic */

static void divn_f32(int64_t n, void *o_, const void *a_, const struct ew_params *p) {
  float *o = o_, d = (float)p->d[0];
  const float *a = a_;
  for (int64_t i = 0; i < n; i++) o[i] = a[i] / d;
}
static void divn_f64(int64_t n, void *o_, const void *a_, const struct ew_params *p) {
  double *o = o_;
  const double *a = a_;
  for (int64_t i = 0; i < n; i++) o[i] = a[i] / p->d[0];
}
static const struct ew_unary_def divn_def = {"Mean", 0, 0, {EW_FLT(EW_ENT, divn)}};

/* Sum, Mean, Min, Max: fold the inputs into the output in place, each step a
 * broadcast of (output so far, next input) onto the final shape. */
static tolk_status run_variadic(struct op_ctx *c, const struct ew_binary_def *d, bool mean) {
  size_t n = c->n_in;
  if (n == 0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "%s needs at least one input", d->name);
  struct bcast_shape s[64];
  const struct tensor *in[64];
  if (n > 64) return op_fail(c, TOLK_ERR_LIMIT, "%s with %zu inputs (at most 64)", d->name, n);
  tolk_status st = ew_inputs(c, n, in);
  if (st) return st;
  for (size_t k = 0; k < n; k++) {
    if (in[k]->dtype != in[0]->dtype)
      return op_fail(c, TOLK_ERR_TYPE, "%s input %zu is %s, input 0 is %s", d->name, k,
                     dt_name(in[k]->dtype), dt_name(in[0]->dtype));
    s[k] = (struct bcast_shape){in[k]->rank, in[k]->dims};
  }
  if (!ew_binary_has(d, in[0]->dtype) || (mean && !ew_unary_has(&divn_def, in[0]->dtype)))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "%s does not support %s inputs", d->name,
                   dt_name(in[0]->dtype));
  int rank;
  int64_t dims[IR_MAX_RANK];
  if (!bcast_shape((int)n, s, &rank, dims)) {
    char buf[200];
    return op_fail(c, TOLK_ERR_SHAPE, "%s cannot broadcast %s", d->name,
                   bcast_shapes_str((int)n, in, buf, sizeof buf));
  }
  struct tensor *y = op_output(c, 0, in[0]->dtype, rank, dims);
  if (!y) return c->err->status;
  if (y->numel == 0) return TOLK_OK;
  if (n == 1) {
    memcpy(y->data, in[0]->data, y->nbytes);
    return TOLK_OK;
  }
  for (size_t k = 1; k < n; k++) {
    const struct tensor *a = k == 1 ? in[0] : y;
    struct bcast_shape pair[2] = {{a->rank, a->dims}, s[k]};
    struct bcast bc;
    if (!bcast_init_to(&bc, rank, dims, 2, pair))
      return op_fail(c, TOLK_ERR_INTERNAL, "%s: broadcast of input %zu failed", d->name, k);
    if ((st = ew_binary(c, d, &bc, a, in[k], y, NULL))) return st;
  }
  if (mean) {
    struct ew_params p = {.d = {(double)n}};
    return ew_unary(c, &divn_def, y, y, &p);
  }
  return TOLK_OK;
}

static tolk_status run_sum(struct op_ctx *c) { return run_variadic(c, &add_def, false); }
static tolk_status run_mean(struct op_ctx *c) { return run_variadic(c, &add_def, true); }
static tolk_status run_min(struct op_ctx *c) { return run_variadic(c, &min_def, false); }
static tolk_status run_max(struct op_ctx *c) { return run_variadic(c, &max_def, false); }

/* ------------------------------------------------------------- Pow */

static int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)b;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return (int64_t)r;
}

EW_BIN_KERNEL(pow, f32, float, float, float, powf(x, y))
EW_BIN_KERNEL(pow, f64, double, double, double, pow(x, y))
EW_BIN_KERNEL(pow, i64, int64_t, uint64_t, int64_t, ipow(x, y))
static const struct ew_binary_def pow_def = {"Pow", 0, EW_GRAIN_HEAVY,
                                             {[TOLK_FLOAT] = pow_f32, [TOLK_DOUBLE] = pow_f64,
                                              [TOLK_INT64] = pow_i64}};

/* Scalar exponents that have exact cheaper forms (x*x for 2 is what powf
 * returns too: both are the correctly rounded square). */
#define POWC(s, T, W, DT, n)                                                            \
  EW_UN_SAME(s, T, W, DT, sq, x * x)                                                    \
  EW_UN_SAME(s, T, W, DT, cube, x * x * x)                                              \
  EW_UN_SAME(s, T, W, DT, psqrt, sqrt(x))                                               \
  EW_UN_SAME(s, T, W, DT, ident, x)                                                     \
  EW_UN_SAME(s, T, W, DT, powc, pow(x, (TT)p->d[0]))
EW_FLT(POWC, 0)
static const struct ew_unary_def sq_def = {"Pow", 0, 0, {EW_FLT(EW_ENT, sq)}};
static const struct ew_unary_def cube_def = {"Pow", 0, 0, {EW_FLT(EW_ENT, cube)}};
static const struct ew_unary_def psqrt_def = {"Pow", 0, 0, {EW_FLT(EW_ENT, psqrt)}};
static const struct ew_unary_def ident_def = {"Pow", 0, 0, {EW_FLT(EW_ENT, ident)}};
static const struct ew_unary_def powc_def = {"Pow", 0, EW_GRAIN_HEAVY, {EW_FLT(EW_ENT, powc)}};

static bool is_float(int32_t dt) { return dt == TOLK_FLOAT || dt == TOLK_DOUBLE || is_half(dt); }

/* A converted copy of t in scratch memory (t itself when already `dt`). */
static const struct tensor *as_dtype(struct op_ctx *c, const struct tensor *t, int32_t dt,
                                     struct tensor *tmp) {
  if (t->dtype == dt) return t;
  *tmp = *t;
  tmp->dtype = dt;
  tmp->nbytes = (size_t)t->numel * op_dtype_size(dt);
  tmp->data = op_scratch(c, tmp->nbytes ? tmp->nbytes : 1);
  if (!tmp->data) return NULL;
  if (!ew_convert(dt, tmp->data, t->dtype, t->data, t->numel)) {
    op_fail(c, TOLK_ERR_UNSUPPORTED, "Pow: cannot convert %s to %s", dt_name(t->dtype),
            dt_name(dt));
    return NULL;
  }
  return tmp;
}

static tolk_status run_pow(struct op_ctx *c) {
  const struct tensor *in[2];
  tolk_status st = ew_inputs(c, 2, in);
  if (st) return st;
  const struct tensor *x = in[0], *e = in[1];
  if (!ew_converter(TOLK_DOUBLE, x->dtype) || x->dtype == TOLK_BOOL ||
      !ew_converter(TOLK_DOUBLE, e->dtype) || e->dtype == TOLK_BOOL)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "Pow does not support %s base with %s exponent",
                   dt_name(x->dtype), dt_name(e->dtype));
  struct bcast_shape s[2] = {{x->rank, x->dims}};
  int64_t bdims[IR_MAX_RANK];
  if ((st = legacy_shape(c, x, e, &s[1], bdims))) return st;
  struct bcast bc;
  if (!bcast_init(&bc, 2, s)) {
    char buf[160];
    return op_fail(c, TOLK_ERR_SHAPE, "Pow cannot broadcast %s", bcast_shapes_str(2, in, buf, sizeof buf));
  }
  struct tensor *y = op_output(c, 0, x->dtype, bc.rank, bc.dims);
  if (!y) return c->err->status;
  if (y->numel == 0) return TOLK_OK;

  /* Float base, one exponent: the common x^2, x^3, x^0.5 of exported graphs. */
  if (is_float(x->dtype) && e->numel == 1 && bc.numel == x->numel) {
    double ev;
    ew_convert(TOLK_DOUBLE, &ev, e->dtype, e->data, 1);
    struct ew_params p = {.d = {ev}};
    const struct ew_unary_def *d = ev == 2.0   ? &sq_def
                                   : ev == 3.0 ? &cube_def
                                   : ev == 0.5 ? &psqrt_def
                                   : ev == 1.0 ? &ident_def
                                               : &powc_def;
    return ew_unary(c, d, x, y, &p);
  }
  /* Otherwise compute in a wide type and convert the result: float for
   * float/float16/bfloat16 bases (double for double), int64 for integer
   * bases with integer exponents (exact), double for integer bases with
   * float exponents (truncated back, as a C cast would). */
  int32_t wt = x->dtype == TOLK_DOUBLE ? TOLK_DOUBLE
               : is_float(x->dtype)    ? TOLK_FLOAT
               : is_float(e->dtype)    ? TOLK_DOUBLE
                                       : TOLK_INT64;
  struct tensor xt, et, yt;
  const struct tensor *xw = as_dtype(c, x, wt, &xt), *ew = xw ? as_dtype(c, e, wt, &et) : NULL;
  if (!xw || !ew) return c->err->status;
  struct tensor *yw = y;
  if (y->dtype != wt) {
    yt = *y;
    yt.dtype = wt;
    yt.nbytes = (size_t)y->numel * op_dtype_size(wt);
    yt.data = op_scratch(c, yt.nbytes);
    if (!yt.data) return c->err->status;
    yw = &yt;
  }
  if ((st = ew_binary(c, &pow_def, &bc, xw, ew, yw, NULL))) return st;
  if (yw != y) ew_convert(y->dtype, y->data, wt, yw->data, y->numel);
  return TOLK_OK;
}

/* ------------------------------------------------------------- table */

const struct op_def tolk_ops_elementwise[] = {
    {"", "Add", 1, 0, NULL, run_add, NULL},
    {"", "Sub", 1, 0, NULL, run_sub, NULL},
    {"", "Mul", 1, 0, NULL, run_mul, NULL},
    {"", "Div", 1, 0, NULL, run_div, NULL},
    {"", "Pow", 1, 0, NULL, run_pow, NULL},
    {"", "Mod", 10, 0, NULL, run_mod, NULL},
    {"", "Sum", 1, 0, NULL, run_sum, NULL},
    {"", "Mean", 1, 0, NULL, run_mean, NULL},
    {"", "Min", 1, 0, NULL, run_min, NULL},
    {"", "Max", 1, 0, NULL, run_max, NULL},
    /* elementwise_math.c */
    {"", "Abs", 1, 0, NULL, ew_op_abs, NULL},
    {"", "Neg", 1, 0, NULL, ew_op_neg, NULL},
    {"", "Sqrt", 1, 0, NULL, ew_op_sqrt, NULL},
    {"", "Exp", 1, 0, NULL, ew_op_exp, NULL},
    {"", "Log", 1, 0, NULL, ew_op_log, NULL},
    {"", "Reciprocal", 1, 0, NULL, ew_op_reciprocal, NULL},
    {"", "Floor", 1, 0, NULL, ew_op_floor, NULL},
    {"", "Ceil", 1, 0, NULL, ew_op_ceil, NULL},
    {"", "Round", 11, 0, NULL, ew_op_round, NULL},
    {"", "Sign", 9, 0, NULL, ew_op_sign, NULL},
    {"", "Sin", 7, 0, NULL, ew_op_sin, NULL},
    {"", "Cos", 7, 0, NULL, ew_op_cos, NULL},
    {"", "Tan", 7, 0, NULL, ew_op_tan, NULL},
    {"", "Asin", 7, 0, NULL, ew_op_asin, NULL},
    {"", "Acos", 7, 0, NULL, ew_op_acos, NULL},
    {"", "Atan", 7, 0, NULL, ew_op_atan, NULL},
    {"", "Sinh", 9, 0, NULL, ew_op_sinh, NULL},
    {"", "Cosh", 9, 0, NULL, ew_op_cosh, NULL},
    {"", "Asinh", 9, 0, NULL, ew_op_asinh, NULL},
    {"", "Acosh", 9, 0, NULL, ew_op_acosh, NULL},
    {"", "Atanh", 9, 0, NULL, ew_op_atanh, NULL},
    {"", "Erf", 9, 0, NULL, ew_op_erf, NULL},
    /* logic.c */
    {"", "Equal", 1, 0, NULL, ew_op_equal, NULL},
    {"", "Greater", 1, 0, NULL, ew_op_greater, NULL},
    {"", "Less", 1, 0, NULL, ew_op_less, NULL},
    {"", "GreaterOrEqual", 12, 0, NULL, ew_op_greater_equal, NULL},
    {"", "LessOrEqual", 12, 0, NULL, ew_op_less_equal, NULL},
    {"", "And", 1, 0, NULL, ew_op_and, NULL},
    {"", "Or", 1, 0, NULL, ew_op_or, NULL},
    {"", "Xor", 1, 0, NULL, ew_op_xor, NULL},
    {"", "Not", 1, 0, NULL, ew_op_not, NULL},
    {"", "Where", 9, 0, NULL, ew_op_where, NULL},
    {"", "IsNaN", 9, 0, NULL, ew_op_isnan, NULL},
    {"", "IsInf", 10, 0, NULL, ew_op_isinf, NULL},
    {"", "BitShift", 11, 0, NULL, ew_op_bitshift, NULL},
    {"", "BitwiseAnd", 18, 0, NULL, ew_op_bitwise_and, NULL},
    {"", "BitwiseOr", 18, 0, NULL, ew_op_bitwise_or, NULL},
    {"", "BitwiseXor", 18, 0, NULL, ew_op_bitwise_xor, NULL},
    {"", "BitwiseNot", 18, 0, NULL, ew_op_bitwise_not, NULL},
    {0},
};
