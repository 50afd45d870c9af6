/*
 * ew.h — shared machinery of the elementwise operator files (elementwise.c,
 * elementwise_math.c, logic.c, activation.c, cast.c): typed-kernel
 * generators, the unary and broadcasting binary drivers, and dtype
 * conversion.
 *
 * A kernel is a plain typed loop over n contiguous elements (binary kernels
 * take per-input strides 0 or 1, as handed out by broadcast.h), one per
 * (operator, dtype), kept in a table indexed by dtype. The drivers split the
 * output over the thread pool, walk the broadcast runs and call the kernel
 * once per run. float16/bfloat16 inputs are widened block by block to float,
 * computed with the float kernel and narrowed back (round to nearest even),
 * so an op with a float kernel supports both for free. The X-macro type
 * lists below stamp out the per-dtype kernels so no loop is written by hand
 * per type.
 *
 * Integer arithmetic wraps (two's complement) instead of overflowing: it is
 * done in the unsigned "wrap type" W listed for each type, which also keeps
 * uint16 × uint16 out of signed int overflow after promotion.
 */
#ifndef TOLK_OPS_EW_H
#define TOLK_OPS_EW_H

#include <stdbool.h>
#include <stdint.h>

#include "broadcast.h"
#include "../kern/kern.h"
#include "op.h"

/* Dtype codes index kernel tables: 0 .. TOLK_BFLOAT16. */
#define EW_NDT 17

/* Below this many elements a kernel runs on the calling thread. */
#define EW_GRAIN 32768
/* For ops costing tens of cycles per element (exp, tanh, erf, pow). */
#define EW_GRAIN_HEAVY 4096

/* Per-call parameters of a kernel: attributes and scalar operands, read as
 * each op documents. */
struct ew_params {
  double d[4];
  float f[4];
  int64_t i[4];
  uint64_t u[4];
};

typedef void (*ew_un_fn)(int64_t n, void *out, const void *in, const struct ew_params *p);
typedef void (*ew_bin_fn)(int64_t n, void *out, const void *a, int64_t sa, const void *b,
                          int64_t sb, const struct ew_params *p);

struct ew_unary_def {
  const char *name;
  int32_t out_dtype; /* 0: same as the input */
  int64_t grain;     /* 0: EW_GRAIN */
  ew_un_fn fn[EW_NDT];
};

struct ew_binary_def {
  const char *name;
  int32_t out_dtype; /* 0: same as the inputs */
  int64_t grain;
  ew_bin_fn fn[EW_NDT];
};

/* ------------------------------------------------------------ type lists */

/* X(suffix, C type, wrap type, dtype code, extra...) */
#define EW_SINT(X, ...)                                                                 \
  X(i8, int8_t, uint32_t, TOLK_INT8, __VA_ARGS__)                                      \
  X(i16, int16_t, uint32_t, TOLK_INT16, __VA_ARGS__)                                   \
  X(i32, int32_t, uint32_t, TOLK_INT32, __VA_ARGS__)                                   \
  X(i64, int64_t, uint64_t, TOLK_INT64, __VA_ARGS__)
#define EW_UINT(X, ...)                                                                 \
  X(u8, uint8_t, uint32_t, TOLK_UINT8, __VA_ARGS__)                                    \
  X(u16, uint16_t, uint32_t, TOLK_UINT16, __VA_ARGS__)                                 \
  X(u32, uint32_t, uint32_t, TOLK_UINT32, __VA_ARGS__)                                 \
  X(u64, uint64_t, uint64_t, TOLK_UINT64, __VA_ARGS__)
#define EW_FLT(X, ...)                                                                  \
  X(f32, float, float, TOLK_FLOAT, __VA_ARGS__)                                        \
  X(f64, double, double, TOLK_DOUBLE, __VA_ARGS__)
#define EW_BOOL(X, ...) X(b8, uint8_t, uint32_t, TOLK_BOOL, __VA_ARGS__)
#define EW_INT(X, ...) EW_SINT(X, __VA_ARGS__) EW_UINT(X, __VA_ARGS__)
#define EW_NUM(X, ...) EW_FLT(X, __VA_ARGS__) EW_INT(X, __VA_ARGS__)

/* A table entry: [dtype] = name_suffix, */
#define EW_ENT(s, T, W, DT, name) [DT] = name##_##s,

/* ------------------------------------------------------- kernel makers */

/* Binary kernel `name_s` computing out = (TO)(expr) from T x, T y; p holds
 * the params. Expressions name the element type TT and the wrap type WW. Four loops so that each is a clean vectorisable shape. */
#define EW_BIN_KERNEL(name, s, T, W, TO, ...)                                           \
  static void name##_##s(int64_t n, void *o_, const void *a_, int64_t sa,               \
                         const void *b_, int64_t sb, const struct ew_params *p) {      \
    typedef T TT; /* the element type and wrap type, for expressions */                \
    typedef W WW;                                                                       \
    (void)p, (void)sizeof(TT), (void)sizeof(WW);                                        \
    TO *o = o_;                                                                         \
    const T *A = a_, *B = b_;                                                           \
    if (sa && sb) {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                                 \
        T x = A[i], y = B[i];                                                           \
        o[i] = (TO)(__VA_ARGS__);                                                       \
      }                                                                                 \
    } else if (sa) {                                                                    \
      T y = B[0];                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                 \
        T x = A[i];                                                                     \
        o[i] = (TO)(__VA_ARGS__);                                                       \
      }                                                                                 \
    } else if (sb) {                                                                    \
      T x = A[0];                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                 \
        T y = B[i];                                                                     \
        o[i] = (TO)(__VA_ARGS__);                                                       \
      }                                                                                 \
    } else {                                                                            \
      T x = A[0], y = B[0];                                                             \
      TO r = (TO)(__VA_ARGS__);                                                         \
      for (int64_t i = 0; i < n; i++) o[i] = r;                                         \
    }                                                                                   \
  }
/* For use with the type lists: EW_NUM(EW_BIN_SAME, add, x + y) */
#define EW_BIN_SAME(s, T, W, DT, name, ...) EW_BIN_KERNEL(name, s, T, W, T, __VA_ARGS__)
#define EW_BIN_BOOL(s, T, W, DT, name, ...) EW_BIN_KERNEL(name, s, T, W, uint8_t, __VA_ARGS__)

/* Unary kernel `name_s`: out = (TO)(expr) from T x (types TT, WW). */
#define EW_UN_KERNEL(name, s, T, W, TO, ...)                                            \
  static void name##_##s(int64_t n, void *o_, const void *a_, const struct ew_params *p) { \
    typedef T TT;                                                                       \
    typedef W WW;                                                                       \
    (void)p, (void)sizeof(TT), (void)sizeof(WW);                                        \
    TO *o = o_;                                                                         \
    const T *A = a_;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T x = A[i];                                                                       \
      o[i] = (TO)(__VA_ARGS__);                                                         \
    }                                                                                   \
  }
#define EW_UN_SAME(s, T, W, DT, name, ...) EW_UN_KERNEL(name, s, T, W, T, __VA_ARGS__)
#define EW_UN_BOOL(s, T, W, DT, name, ...) EW_UN_KERNEL(name, s, T, W, uint8_t, __VA_ARGS__)

/* ------------------------------------------------------------- drivers */

/* Runs fn over [0, n) on the context's pool, or inline when c is NULL (unit
 * tests) or n is small. */
void ew_par(struct op_ctx *c, int64_t n, int64_t grain, op_range_fn fn, void *arg);

/* Records an error on c when there is one; returns status either way. */
tolk_status ew_fail(struct op_ctx *c, tolk_status status, const char *fmt, ...)
    TOLK_PRINTF(3, 4);

/* True when d has a kernel for dtype (directly or via float for 16-bit
 * floats). */
bool ew_unary_has(const struct ew_unary_def *d, int32_t dtype);
bool ew_binary_has(const struct ew_binary_def *d, int32_t dtype);

/* Compute layer: y = d(x), y already shaped like x with d's output dtype.
 * c may be NULL (serial, no error text). */
tolk_status ew_unary(struct op_ctx *c, const struct ew_unary_def *d, const struct tensor *x,
                     struct tensor *y, const struct ew_params *p);

/* Compute layer: y = d(a, b) over the broadcast bc (inputs a, b in that
 * order; y shaped like bc's output). y may alias a when a has y's shape (the
 * in-place fold of variadic ops). */
tolk_status ew_binary(struct op_ctx *c, const struct ew_binary_def *d, const struct bcast *bc,
                      const struct tensor *a, const struct tensor *b, struct tensor *y,
                      const struct ew_params *p);

/* Op layer: input 0 → output 0 (dtype checked, output allocated). */
tolk_status ew_run_unary(struct op_ctx *c, const struct ew_unary_def *d,
                         const struct ew_params *p);
/* Op layer: inputs 0 and 1 (same dtype) broadcast → output 0. */
tolk_status ew_run_binary(struct op_ctx *c, const struct ew_binary_def *d,
                          const struct ew_params *p);

/* Fetches the first n inputs into t[], failing with a message naming the
 * first one that is absent. */
tolk_status ew_inputs(struct op_ctx *c, size_t n, const struct tensor **t);

/* ------------------------------------------------------------- cast.c */

typedef void (*ew_cvt_fn)(int64_t n, void *dst, const void *src);

/* The converter from src to dst dtype (numeric types and bool), or NULL.
 * Semantics (as numpy on x86-64 where ONNX leaves it open): float → float
 * rounds to nearest even; float → int truncates toward zero, NaN gives 0,
 * values beyond int64 saturate, narrower targets wrap the truncated int64;
 * int → int wraps; anything → bool is x != 0; bool → number is 0 or 1. */
ew_cvt_fn ew_converter(int32_t dst, int32_t src);

/* Converts n elements; false when the pair is unsupported. */
bool ew_convert(int32_t dst_dtype, void *dst, int32_t src_dtype, const void *src, int64_t n);

/* Scalar input i (numel 1) as double / int64, after checking it is one.
 * Used for Clip bounds and similar scalar operands. */
tolk_status ew_scalar_f64(struct op_ctx *c, size_t i, double *out);

/* ------------------------------------------------- run functions by file */

#define EW_RUN(name) tolk_status name(struct op_ctx *c)

/* elementwise_math.c: unary math */
EW_RUN(ew_op_abs); EW_RUN(ew_op_neg); EW_RUN(ew_op_sqrt); EW_RUN(ew_op_exp);
EW_RUN(ew_op_log); EW_RUN(ew_op_reciprocal); EW_RUN(ew_op_floor); EW_RUN(ew_op_ceil);
EW_RUN(ew_op_round); EW_RUN(ew_op_sign); EW_RUN(ew_op_sin); EW_RUN(ew_op_cos);
EW_RUN(ew_op_tan); EW_RUN(ew_op_asin); EW_RUN(ew_op_acos); EW_RUN(ew_op_atan);
EW_RUN(ew_op_sinh); EW_RUN(ew_op_cosh); EW_RUN(ew_op_asinh); EW_RUN(ew_op_acosh);
EW_RUN(ew_op_atanh); EW_RUN(ew_op_erf);

/* logic.c: comparison, logic, selection, classification */
EW_RUN(ew_op_equal); EW_RUN(ew_op_greater); EW_RUN(ew_op_less);
EW_RUN(ew_op_greater_equal); EW_RUN(ew_op_less_equal);
EW_RUN(ew_op_and); EW_RUN(ew_op_or); EW_RUN(ew_op_xor); EW_RUN(ew_op_not);
EW_RUN(ew_op_where); EW_RUN(ew_op_isnan); EW_RUN(ew_op_isinf);
EW_RUN(ew_op_bitwise_and); EW_RUN(ew_op_bitwise_or); EW_RUN(ew_op_bitwise_xor);
EW_RUN(ew_op_bitwise_not); EW_RUN(ew_op_bitshift);

#endif /* TOLK_OPS_EW_H */
