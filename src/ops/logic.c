/*
 * logic.c — comparison, logic and selection operators: Equal Greater Less
 * GreaterOrEqual LessOrEqual, And Or Xor Not, Where (three-way broadcasting),
 * IsNaN IsInf, BitShift and the opset-18 Bitwise ops. Registered in
 * elementwise.c's table.
 *
 * Bool tensors hold one byte per element; kernels read any non-zero byte as
 * true and write 0 or 1. Comparisons of float16/bfloat16 widen to float,
 * which is exact. BitShift by the type's width or more gives 0 (C leaves it
 * undefined).
 */
#include <math.h>
#include <string.h>

#include "ew.h"

#define BIN_DEF(var, opname, out, ...) \
  static const struct ew_binary_def var = {opname, out, 0, {__VA_ARGS__}};
#define BIN_RUN(fn, def) \
  EW_RUN(fn) { return ew_run_binary(c, &def, NULL); }

/* ------------------------------------------------------- comparisons */

#define CMP(name, opname, op)                                                    \
  EW_NUM(EW_BIN_BOOL, name, x op y)                                              \
  BIN_DEF(name##_def, opname, TOLK_BOOL, EW_NUM(EW_ENT, name) EW_BOOL(EW_ENT, name)) \
  BIN_RUN(ew_op_##name, name##_def)

/* Bool operands compare as 0/1. */
#define b8_bool(v) ((v) != 0)
EW_BIN_KERNEL(equal, b8, uint8_t, uint32_t, uint8_t, b8_bool(x) == b8_bool(y))
EW_BIN_KERNEL(greater, b8, uint8_t, uint32_t, uint8_t, b8_bool(x) > b8_bool(y))
EW_BIN_KERNEL(less, b8, uint8_t, uint32_t, uint8_t, b8_bool(x) < b8_bool(y))
EW_BIN_KERNEL(greater_equal, b8, uint8_t, uint32_t, uint8_t, b8_bool(x) >= b8_bool(y))
EW_BIN_KERNEL(less_equal, b8, uint8_t, uint32_t, uint8_t, b8_bool(x) <= b8_bool(y))
CMP(equal, "Equal", ==)
CMP(greater, "Greater", >)
CMP(less, "Less", <)
CMP(greater_equal, "GreaterOrEqual", >=)
CMP(less_equal, "LessOrEqual", <=)

/* ------------------------------------------------------------ logic */

EW_BIN_KERNEL(land, b8, uint8_t, uint32_t, uint8_t, (x != 0) & (y != 0))
EW_BIN_KERNEL(lor, b8, uint8_t, uint32_t, uint8_t, (x != 0) | (y != 0))
EW_BIN_KERNEL(lxor, b8, uint8_t, uint32_t, uint8_t, (x != 0) ^ (y != 0))
EW_UN_KERNEL(lnot, b8, uint8_t, uint32_t, uint8_t, x == 0)
BIN_DEF(and_def, "And", 0, [TOLK_BOOL] = land_b8)
BIN_DEF(or_def, "Or", 0, [TOLK_BOOL] = lor_b8)
BIN_DEF(xor_def, "Xor", 0, [TOLK_BOOL] = lxor_b8)
static const struct ew_unary_def not_def = {"Not", 0, 0, {[TOLK_BOOL] = lnot_b8}};
BIN_RUN(ew_op_and, and_def)
BIN_RUN(ew_op_or, or_def)
BIN_RUN(ew_op_xor, xor_def)
EW_RUN(ew_op_not) { return ew_run_unary(c, &not_def, NULL); }

/* ------------------------------------------------------------ bitwise */

EW_INT(EW_BIN_SAME, band, x & y)
EW_INT(EW_BIN_SAME, bor, x | y)
EW_INT(EW_BIN_SAME, bxor, x ^ y)
EW_INT(EW_UN_SAME, bnot, ~x)
BIN_DEF(band_def, "BitwiseAnd", 0, EW_INT(EW_ENT, band))
BIN_DEF(bor_def, "BitwiseOr", 0, EW_INT(EW_ENT, bor))
BIN_DEF(bxor_def, "BitwiseXor", 0, EW_INT(EW_ENT, bxor))
static const struct ew_unary_def bnot_def = {"BitwiseNot", 0, 0, {EW_INT(EW_ENT, bnot)}};
BIN_RUN(ew_op_bitwise_and, band_def)
BIN_RUN(ew_op_bitwise_or, bor_def)
BIN_RUN(ew_op_bitwise_xor, bxor_def)
EW_RUN(ew_op_bitwise_not) { return ew_run_unary(c, &bnot_def, NULL); }

EW_UINT(EW_BIN_SAME, shl, y >= sizeof(TT) * 8 ? (TT)0 : (TT)((WW)x << y))
EW_UINT(EW_BIN_SAME, shr, y >= sizeof(TT) * 8 ? (TT)0 : (TT)(x >> y))
BIN_DEF(shl_def, "BitShift", 0, EW_UINT(EW_ENT, shl))
BIN_DEF(shr_def, "BitShift", 0, EW_UINT(EW_ENT, shr))

EW_RUN(ew_op_bitshift) {
  const char *dir = ir_attr_string(c->node, "direction", "");
  if (strcmp(dir, "LEFT") == 0) return ew_run_binary(c, &shl_def, NULL);
  if (strcmp(dir, "RIGHT") == 0) return ew_run_binary(c, &shr_def, NULL);
  return op_fail(c, TOLK_ERR_INVALID_MODEL, "BitShift direction \"%s\" (LEFT or RIGHT expected)",
                 dir);
}

/* ----------------------------------------------------- classification */

EW_FLT(EW_UN_BOOL, isnan, isnan(x))
static const struct ew_unary_def isnan_def = {"IsNaN", TOLK_BOOL, 0, {EW_FLT(EW_ENT, isnan)}};
EW_RUN(ew_op_isnan) { return ew_run_unary(c, &isnan_def, NULL); }

/* p->i[0]: detect_negative, p->i[1]: detect_positive. */
EW_FLT(EW_UN_BOOL, isinf, isinf(x) && (x > 0 ? p->i[1] : p->i[0]))
static const struct ew_unary_def isinf_def = {"IsInf", TOLK_BOOL, 0, {EW_FLT(EW_ENT, isinf)}};
EW_RUN(ew_op_isinf) {
  struct ew_params p = {.i = {ir_attr_int(c->node, "detect_negative", 1) != 0,
                              ir_attr_int(c->node, "detect_positive", 1) != 0}};
  return ew_run_unary(c, &isinf_def, &p);
}

/* ------------------------------------------------------------- Where */

struct where_job {
  const struct bcast *bc;
  const uint8_t *cond;
  const unsigned char *x, *y;
  unsigned char *out;
  size_t es;
};

/* One loop per element size; the switch on the three run strides (each 0
 * or 1) hands the loop constants, so each combination compiles to its own
 * straight vectorisable loop (a mask over a full tensor with a scalar
 * fill is 1,1,0). */
#define WHERE_LOOP(T)                                                                  \
  static inline __attribute__((always_inline)) void where_k_##T(                       \
      int64_t n, T *o, const uint8_t *c, int64_t sc, const T *x, int64_t sx, const T *y, \
      int64_t sy) {                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                  \
      T m = (T)0 - (T)(c[i * sc] != 0); /* a bit mask, so both loads happen */         \
      o[i] = (T)((x[i * sx] & m) | (y[i * sy] & (T)~m));                               \
    }                                                                                  \
  }                                                                                    \
  static void where_##T(int64_t n, T *o, const uint8_t *c, int64_t sc, const T *x,     \
                        int64_t sx, const T *y, int64_t sy) {                          \
    switch (sc << 2 | sx << 1 | sy) {                                                  \
    case 7: where_k_##T(n, o, c, 1, x, 1, y, 1); break;                                \
    case 6: where_k_##T(n, o, c, 1, x, 1, y, 0); break;                                \
    case 5: where_k_##T(n, o, c, 1, x, 0, y, 1); break;                                \
    case 4: where_k_##T(n, o, c, 1, x, 0, y, 0); break;                                \
    case 3: where_k_##T(n, o, c, 0, x, 1, y, 1); break;                                \
    case 2: where_k_##T(n, o, c, 0, x, 1, y, 0); break;                                \
    case 1: where_k_##T(n, o, c, 0, x, 0, y, 1); break;                                \
    default: where_k_##T(n, o, c, 0, x, 0, y, 0); break;                               \
    }                                                                                  \
  }
WHERE_LOOP(uint8_t)
WHERE_LOOP(uint16_t)
WHERE_LOOP(uint32_t)
WHERE_LOOP(uint64_t)

static void where_chunk(void *arg, int64_t begin, int64_t end) {
  const struct where_job *j = arg;
  struct bcast_iter it;
  int64_t off[BCAST_MAX_IN], len;
  const int64_t *s = j->bc->inner;
  bcast_iter_seek(j->bc, &it, begin);
  while ((len = bcast_iter_next(j->bc, &it, end, off)) > 0) {
    const uint8_t *c = j->cond + off[0];
    const void *x = j->x + (size_t)off[1] * j->es, *y = j->y + (size_t)off[2] * j->es;
    void *o = j->out + (size_t)it.run_start * j->es;
    switch (j->es) {
    case 1: where_uint8_t(len, o, c, s[0], x, s[1], y, s[2]); break;
    case 2: where_uint16_t(len, o, c, s[0], x, s[1], y, s[2]); break;
    case 4: where_uint32_t(len, o, c, s[0], x, s[1], y, s[2]); break;
    default: where_uint64_t(len, o, c, s[0], x, s[1], y, s[2]); break;
    }
  }
}

EW_RUN(ew_op_where) {
  const struct tensor *in[3];
  tolk_status st = ew_inputs(c, 3, in);
  if (st) return st;
  if (in[0]->dtype != TOLK_BOOL)
    return op_fail(c, TOLK_ERR_TYPE, "Where condition is %s, bool expected",
                   tolk_dtype_name((tolk_dtype)in[0]->dtype));
  if (in[1]->dtype != in[2]->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "Where X is %s but Y is %s",
                   tolk_dtype_name((tolk_dtype)in[1]->dtype),
                   tolk_dtype_name((tolk_dtype)in[2]->dtype));
  size_t es = op_dtype_size(in[1]->dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "Where does not support %s values",
                   tolk_dtype_name((tolk_dtype)in[1]->dtype));
  struct bcast bc;
  if (!bcast_init_tensors(&bc, 3, in)) {
    char buf[200];
    return op_fail(c, TOLK_ERR_SHAPE, "Where cannot broadcast %s",
                   bcast_shapes_str(3, in, buf, sizeof buf));
  }
  struct tensor *out = op_output(c, 0, in[1]->dtype, bc.rank, bc.dims);
  if (!out) return c->err->status;
  struct where_job j = {&bc, in[0]->data, in[1]->data, in[2]->data, out->data, es};
  ew_par(c, bc.numel, EW_GRAIN, where_chunk, &j);
  return TOLK_OK;
}
