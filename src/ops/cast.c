/*
 * cast.c — Cast and CastLike, and the dtype converters other kernels use
 * (ew_converter in ew.h): every pair among float, double, float16, bfloat16,
 * the eight integer types and bool, each a typed loop stamped out by macros.
 *
 * Where ONNX leaves a conversion open, tolk does what numpy does on x86-64,
 * but without undefined behaviour: float → integer truncates toward zero, NaN
 * gives 0, values beyond the int64 range saturate to it (uint64: to its own
 * range), and narrower integer targets wrap the truncated int64 (so -1.0 →
 * uint8 is 255). Integer → float rounds to nearest even; double → float16 or
 * bfloat16 rounds once, directly (half.h). Integers beyond ±2^53 going to
 * bfloat16 pass through double, so they may round twice. String and float8
 * types are not supported (the executor has no string tensors); Cast reports
 * them at session creation.
 */
#include <stdint.h>
#include <string.h>

#include "../core/half.h"
#include "ew.h"

static int64_t f2i64(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static uint64_t f2u64(double v) {
  if (v != v) return 0;
  if (v >= 18446744073709551616.0) return UINT64_MAX;
  if (v >= 9223372036854775808.0) return (uint64_t)v;
  return (uint64_t)f2i64(v);
}

static int64_t keep_i64(int64_t v) { return v; }
static uint64_t keep_u64(uint64_t v) { return v; }

/* Loading a source element as a C arithmetic value. */
#define LD_f32(v) (v)
#define LD_f64(v) (v)
#define LD_f16(v) tolk_f16_to_f32(v)
#define LD_bf16(v) tolk_bf16_to_f32(v)
#define LD_b8(v) ((v) != 0)
#define LD_i8(v) (v)
#define LD_i16(v) (v)
#define LD_i32(v) (v)
#define LD_i64(v) (v)
#define LD_u8(v) (v)
#define LD_u16(v) (v)
#define LD_u32(v) (v)
#define LD_u64(v) (v)

/* Storing a C arithmetic value into a destination element. */
#define ST_f32(v) ((float)(v))
#define ST_f64(v) ((double)(v))
#define ST_f16(v) _Generic((v), float: tolk_f32_to_f16, default: tolk_f64_to_f16)(v)
#define ST_bf16(v) _Generic((v), float: tolk_f32_to_bf16, default: tolk_f64_to_bf16)(v)
#define ST_b8(v) ((uint8_t)((v) != 0))
#define TO_I64(v) _Generic((v), float: f2i64, double: f2i64, uint64_t: keep_u64, default: keep_i64)(v)
#define ST_i8(v) ((int8_t)TO_I64(v))
#define ST_i16(v) ((int16_t)TO_I64(v))
#define ST_i32(v) ((int32_t)TO_I64(v))
#define ST_i64(v) ((int64_t)TO_I64(v))
#define ST_u8(v) ((uint8_t)TO_I64(v))
#define ST_u16(v) ((uint16_t)TO_I64(v))
#define ST_u32(v) ((uint32_t)TO_I64(v))
#define ST_u64(v) ((uint64_t)_Generic((v), float: f2u64, double: f2u64, default: keep_u64)(v))

/* X(suffix, storage type, dtype code, extra...): two copies so the lists can
 * nest (a macro does not expand inside itself). */
#define CT_A(X, ...)                                                                     \
  X(f32, float, TOLK_FLOAT, __VA_ARGS__) X(f64, double, TOLK_DOUBLE, __VA_ARGS__)        \
  X(f16, uint16_t, TOLK_FLOAT16, __VA_ARGS__) X(bf16, uint16_t, TOLK_BFLOAT16, __VA_ARGS__) \
  X(b8, uint8_t, TOLK_BOOL, __VA_ARGS__) X(i8, int8_t, TOLK_INT8, __VA_ARGS__)           \
  X(i16, int16_t, TOLK_INT16, __VA_ARGS__) X(i32, int32_t, TOLK_INT32, __VA_ARGS__)      \
  X(i64, int64_t, TOLK_INT64, __VA_ARGS__) X(u8, uint8_t, TOLK_UINT8, __VA_ARGS__)       \
  X(u16, uint16_t, TOLK_UINT16, __VA_ARGS__) X(u32, uint32_t, TOLK_UINT32, __VA_ARGS__)  \
  X(u64, uint64_t, TOLK_UINT64, __VA_ARGS__)
#define CT_B(X, ...)                                                                     \
  X(f32, float, TOLK_FLOAT, __VA_ARGS__) X(f64, double, TOLK_DOUBLE, __VA_ARGS__)        \
  X(f16, uint16_t, TOLK_FLOAT16, __VA_ARGS__) X(bf16, uint16_t, TOLK_BFLOAT16, __VA_ARGS__) \
  X(b8, uint8_t, TOLK_BOOL, __VA_ARGS__) X(i8, int8_t, TOLK_INT8, __VA_ARGS__)           \
  X(i16, int16_t, TOLK_INT16, __VA_ARGS__) X(i32, int32_t, TOLK_INT32, __VA_ARGS__)      \
  X(i64, int64_t, TOLK_INT64, __VA_ARGS__) X(u8, uint8_t, TOLK_UINT8, __VA_ARGS__)       \
  X(u16, uint16_t, TOLK_UINT16, __VA_ARGS__) X(u32, uint32_t, TOLK_UINT32, __VA_ARGS__)  \
  X(u64, uint64_t, TOLK_UINT64, __VA_ARGS__)

#define CVT_ONE(d, D, DDT, s, S)                                            \
  static void cvt_##s##_##d(int64_t n, void *dst, const void *src) {        \
    D *o = dst;                                                             \
    const S *a = src;                                                       \
    for (int64_t i = 0; i < n; i++) o[i] = ST_##d(LD_##s(a[i]));            \
  }
#define CVT_ROW(s, S, SDT, unused) CT_B(CVT_ONE, s, S)
CT_A(CVT_ROW, 0)

#define TBL_ONE(d, D, DDT, s, SDT) [DDT][SDT] = cvt_##s##_##d,
#define TBL_ROW(s, S, SDT, unused) CT_B(TBL_ONE, s, SDT)
static const ew_cvt_fn cvt_table[EW_NDT][EW_NDT] = {CT_A(TBL_ROW, 0)};

ew_cvt_fn ew_converter(int32_t dst, int32_t src) {
  if (dst <= 0 || dst >= EW_NDT || src <= 0 || src >= EW_NDT) return NULL;
  return cvt_table[dst][src];
}

bool ew_convert(int32_t dst_dtype, void *dst, int32_t src_dtype, const void *src, int64_t n) {
  ew_cvt_fn f = ew_converter(dst_dtype, src_dtype);
  if (!f) return false;
  if (n > 0) f(n, dst, src);
  return true;
}

tolk_status ew_scalar_f64(struct op_ctx *c, size_t i, double *out) {
  const struct tensor *t = op_in(c, i);
  if (!t) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input %zu is missing", i);
  if (t->numel != 1) {
    char buf[96];
    return op_fail(c, TOLK_ERR_SHAPE, "input %zu must hold one value, its shape is %s", i,
                   shape_str(t, buf, sizeof buf));
  }
  if (!ew_convert(TOLK_DOUBLE, out, t->dtype, t->data, 1))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "input %zu has unsupported dtype %s", i,
                   tolk_dtype_name((tolk_dtype)t->dtype));
  return TOLK_OK;
}

/* ------------------------------------------------------------- Cast */

struct cast_job {
  ew_cvt_fn f;
  const unsigned char *x;
  unsigned char *y;
  size_t xs, ys;
};

static void cast_chunk(void *arg, int64_t begin, int64_t end) {
  const struct cast_job *j = arg;
  j->f(end - begin, j->y + (size_t)begin * j->ys, j->x + (size_t)begin * j->xs);
}

/* Casts input 0 to `to` into output 0. */
static tolk_status cast_to(struct op_ctx *c, int64_t to) {
  const struct tensor *x = op_in(c, 0);
  if (!x) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 0 is missing");
  ew_cvt_fn f = ew_converter((int32_t)to, x->dtype);
  if (!f)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "Cast from %s to %s is not supported",
                   tolk_dtype_name((tolk_dtype)x->dtype), tolk_dtype_name((tolk_dtype)to));
  struct tensor *y = op_output(c, 0, (int32_t)to, x->rank, x->dims);
  if (!y) return c->err->status;
  if (y->numel == 0) return TOLK_OK;
  if (to == x->dtype) {
    memcpy(y->data, x->data, y->nbytes);
    return TOLK_OK;
  }
  struct cast_job j = {f, x->data, y->data, op_dtype_size(x->dtype), op_dtype_size(y->dtype)};
  ew_par(c, x->numel, EW_GRAIN, cast_chunk, &j);
  return TOLK_OK;
}

static bool castable(int64_t dt) { return dt > 0 && dt < EW_NDT && ew_converter((int32_t)dt, TOLK_FLOAT); }

static tolk_status cast_prepare(const struct ir_node *node, int64_t opset, void **state,
                                tolk_error *err) {
  const struct ir_attr *a = ir_node_attr(node, "to");
  if (!a || a->type != IR_ATTR_INT)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Cast needs an integer attribute 'to'");
  if (!castable(a->i))
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "Cast to %s (dtype %lld) is not supported",
                     tolk_dtype_name((tolk_dtype)a->i), (long long)a->i);
  return TOLK_OK;
}

static tolk_status run_cast(struct op_ctx *c) {
  return cast_to(c, ir_attr_int(c->node, "to", 0));
}

static tolk_status castlike_prepare(const struct ir_node *node, int64_t opset, void **state,
                                    tolk_error *err) {
  if (node->n_inputs < 2 || !node->inputs[1])
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "CastLike needs two inputs");
  int32_t dt = node->inputs[1]->type.dtype;
  if (dt != TOLK_UNDEFINED && !castable(dt))
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "CastLike to %s (dtype %d) is not supported",
                     tolk_dtype_name((tolk_dtype)dt), (int)dt);
  return TOLK_OK;
}

static tolk_status run_castlike(struct op_ctx *c) {
  const struct tensor *like = op_in(c, 1);
  if (!like) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 is missing");
  return cast_to(c, like->dtype);
}

const struct op_def tolk_ops_cast[] = {
    {"", "Cast", 6, 0, cast_prepare, run_cast, NULL},
    {"", "CastLike", 15, 0, castlike_prepare, run_castlike, NULL},
    {0},
};
