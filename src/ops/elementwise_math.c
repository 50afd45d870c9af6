/*
 * elementwise_math.c — unary math operators: Abs Neg Sqrt Exp Log Reciprocal
 * Floor Ceil Round Sign, the trigonometric and hyperbolic functions, Erf.
 * Registered in elementwise.c's table.
 *
 * Float kernels are written once with <tgmath.h>, so `exp(x)` is expf for
 * float and exp for double; float16/bfloat16 go through the float kernel (see
 * ew.h). Round is half-to-even (rint under the default rounding mode). Abs
 * and Neg of the most negative integer wrap to itself, as in two's
 * complement hardware.
 */
#include <tgmath.h>

#include "ew.h"

#define UN_DEF(var, opname, grain, ...) \
  static const struct ew_unary_def var = {opname, 0, grain, {__VA_ARGS__}};
#define UN_RUN(fn, def) \
  EW_RUN(fn) { return ew_run_unary(c, &def, NULL); }

/* Abs, Neg, Sign: every numeric type the spec allows. */
EW_FLT(EW_UN_SAME, abs, fabs(x))
EW_SINT(EW_UN_SAME, abs, x < 0 ? (TT)(0 - (WW)x) : x)
EW_UINT(EW_UN_SAME, abs, x)
EW_FLT(EW_UN_SAME, neg, -x)
EW_SINT(EW_UN_SAME, neg, (TT)(0 - (WW)x))
/* Sign keeps NaN and signed zeros as they are. */
EW_FLT(EW_UN_SAME, sign, x > 0 ? (TT)1 : x < 0 ? (TT)-1 : x)
EW_SINT(EW_UN_SAME, sign, (x > 0) - (x < 0))
EW_UINT(EW_UN_SAME, sign, x > 0)
UN_DEF(abs_def, "Abs", 0, EW_NUM(EW_ENT, abs))
UN_DEF(neg_def, "Neg", 0, EW_FLT(EW_ENT, neg) EW_SINT(EW_ENT, neg))
UN_DEF(sign_def, "Sign", 0, EW_NUM(EW_ENT, sign))
UN_RUN(ew_op_abs, abs_def)
UN_RUN(ew_op_neg, neg_def)
UN_RUN(ew_op_sign, sign_def)

/* Float-only functions: kernel, table and run function in one line each. */
#define FLOAT_OP(name, opname, grain, ...)        \
  EW_FLT(EW_UN_SAME, name, __VA_ARGS__)           \
  UN_DEF(name##_def, opname, grain, EW_FLT(EW_ENT, name)) \
  UN_RUN(ew_op_##name, name##_def)

FLOAT_OP(sqrt, "Sqrt", 0, sqrt(x))
/* exp and erf on floats use the vectorised approximations of
 * vmath.h (relative error < 5e-7); doubles use libm. */
#define VM_OP(name, opname, vmfn, ...)                                                  \
  EW_UN_SAME(f64, double, double, TOLK_DOUBLE, name, __VA_ARGS__)                       \
  static void name##_f32(int64_t n, void *o, const void *a, const struct ew_params *p) { \
    (void)p;                                                                            \
    kern_vm_f32(vmfn, n, o, a);                                                           \
  }                                                                                     \
  UN_DEF(name##_def, opname, EW_GRAIN_HEAVY, EW_FLT(EW_ENT, name))                      \
  UN_RUN(ew_op_##name, name##_def)

VM_OP(exp, "Exp", KERN_VM_EXP, exp(x))
FLOAT_OP(log, "Log", EW_GRAIN_HEAVY, log(x))
FLOAT_OP(reciprocal, "Reciprocal", 0, (TT)1 / x)
FLOAT_OP(floor, "Floor", 0, floor(x))
FLOAT_OP(ceil, "Ceil", 0, ceil(x))
FLOAT_OP(round, "Round", 0, rint(x))
FLOAT_OP(sin, "Sin", EW_GRAIN_HEAVY, sin(x))
FLOAT_OP(cos, "Cos", EW_GRAIN_HEAVY, cos(x))
FLOAT_OP(tan, "Tan", EW_GRAIN_HEAVY, tan(x))
FLOAT_OP(asin, "Asin", EW_GRAIN_HEAVY, asin(x))
FLOAT_OP(acos, "Acos", EW_GRAIN_HEAVY, acos(x))
FLOAT_OP(atan, "Atan", EW_GRAIN_HEAVY, atan(x))
FLOAT_OP(sinh, "Sinh", EW_GRAIN_HEAVY, sinh(x))
FLOAT_OP(cosh, "Cosh", EW_GRAIN_HEAVY, cosh(x))
FLOAT_OP(asinh, "Asinh", EW_GRAIN_HEAVY, asinh(x))
FLOAT_OP(acosh, "Acosh", EW_GRAIN_HEAVY, acosh(x))
FLOAT_OP(atanh, "Atanh", EW_GRAIN_HEAVY, atanh(x))
VM_OP(erf, "Erf", KERN_VM_ERF, erf(x))
