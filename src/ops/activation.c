/*
 * activation.c — activation operators: Relu LeakyRelu Elu Selu Celu Sigmoid
 * HardSigmoid HardSwish Tanh Softplus Softsign Gelu Mish ThresholdedRelu
 * Shrink Clip PRelu.
 *
 * Float kernels are written once with <tgmath.h> (float and double);
 * float16/bfloat16 run through the float kernel (ew.h). Attributes arrive in
 * ew_params: d[0] is alpha (or Shrink's lambd, Clip's min), d[1] beta / gamma
 * / bias / max. Formulas use the numerically safe forms: expm1 for the
 * exponential-linear family, a split Softplus that never overflows, and
 * Sigmoid as 1 / (1 + e^-x), which saturates cleanly to 0 and 1.
 */
#include <float.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "ew.h"

#define UN_DEF(var, opname, grain, ...) \
  static const struct ew_unary_def var = {opname, 0, grain, {__VA_ARGS__}};

/* --------------------------------------------------------------- kernels */

/* Relu keeps NaN (numpy's maximum(x, 0) does). */
EW_FLT(EW_UN_SAME, relu, x < 0 ? (TT)0 : x)
EW_SINT(EW_UN_SAME, relu, x < 0 ? (TT)0 : x)
EW_FLT(EW_UN_SAME, leaky, x < 0 ? (TT)p->d[0] * x : x)
EW_FLT(EW_UN_SAME, elu, x < 0 ? (TT)p->d[0] * expm1(x) : x)
EW_FLT(EW_UN_SAME, selu, x <= 0 ? (TT)(p->d[1] * p->d[0]) * expm1(x) : (TT)p->d[1] * x)
EW_FLT(EW_UN_SAME, celu, x > 0 ? x : (TT)p->d[0] * expm1(x / (TT)p->d[0]))
/* Sigmoid, Tanh and Gelu on floats use vmath.h's vectorised forms (error
 * bounds there); doubles use libm. */
#define VM_KERNEL(name, vmfn, ...)                                                      \
  EW_UN_SAME(f64, double, double, TOLK_DOUBLE, name, __VA_ARGS__)                       \
  static void name##_f32(int64_t n, void *o, const void *a, const struct ew_params *p) { \
    (void)p;                                                                            \
    kern_vm_f32(vmfn, n, o, a);                                                           \
  }
VM_KERNEL(sigmoid, KERN_VM_SIGMOID, (TT)1 / ((TT)1 + exp(-x)))
/* Clamp of a·x + b to [0, 1], written so NaN passes through. */
#define UNIT_CLAMP(v) ((v) < 0 ? (TT)0 : (v) > 1 ? (TT)1 : (v))
EW_FLT(EW_UN_SAME, hsigmoid, UNIT_CLAMP((TT)p->d[0] * x + (TT)p->d[1]))
EW_FLT(EW_UN_SAME, hswish, x * UNIT_CLAMP(x * (TT)(1.0 / 6.0) + (TT)0.5))
VM_KERNEL(tanh, KERN_VM_TANH, tanh(x))
#define SOFTPLUS(x) ((x) > 0 ? (x) + log1p(exp(-(x))) : log1p(exp(x)))
EW_FLT(EW_UN_SAME, softplus, SOFTPLUS(x))
EW_FLT(EW_UN_SAME, softsign, x / ((TT)1 + fabs(x)))
VM_KERNEL(gelu, KERN_VM_GELU, (TT)0.5 * x * ((TT)1 + erf(x * (TT)0.70710678118654752440)))
/* 0.7978845608… = sqrt(2 / pi) */
VM_KERNEL(gelu_tanh, KERN_VM_GELU_TANH,
          (TT)0.5 * x * ((TT)1 + tanh((TT)0.79788456080286535588 * (x + (TT)0.044715 * x * x * x))))
EW_FLT(EW_UN_SAME, mish, x * tanh(SOFTPLUS(x)))
EW_FLT(EW_UN_SAME, trelu, x > (TT)p->d[0] ? x : (TT)0)

/* double → int64 without undefined behaviour (NaN → 0, saturating). */
static int64_t d2i(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

/* Shrink: every numeric type; integers compute in double and truncate back
 * (wrapping, as Cast does). */
EW_FLT(EW_UN_SAME, shrink,
       x < -(TT)p->d[0] ? x + (TT)p->d[1] : x > (TT)p->d[0] ? x - (TT)p->d[1] : (TT)0)
#define SHRINK_INT(s, T, W, DT, n)                                                     \
  EW_UN_SAME(s, T, W, DT, n,                                                           \
             d2i((double)x < -p->d[0]  ? (double)x + p->d[1]                           \
                 : (double)x > p->d[0] ? (double)x - p->d[1]                           \
                                       : 0.0))
EW_INT(SHRINK_INT, shrink)

/* Clip: bounds in p->d (floats), p->i (signed), p->u (unsigned); when
 * min > max every value becomes max, as the spec says. */
#define CLIP2(v, lo, hi) ((v) < (lo) ? (lo) : (v)) > (hi) ? (hi) : ((v) < (lo) ? (lo) : (v))
EW_FLT(EW_UN_SAME, clip, CLIP2(x, (TT)p->d[0], (TT)p->d[1]))
EW_SINT(EW_UN_SAME, clip, CLIP2((int64_t)x, p->i[0], p->i[1]))
EW_UINT(EW_UN_SAME, clip, CLIP2((uint64_t)x, p->u[0], p->u[1]))

UN_DEF(relu_def, "Relu", 0, EW_FLT(EW_ENT, relu) EW_SINT(EW_ENT, relu))
UN_DEF(leaky_def, "LeakyRelu", 0, EW_FLT(EW_ENT, leaky))
UN_DEF(elu_def, "Elu", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, elu))
UN_DEF(selu_def, "Selu", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, selu))
UN_DEF(celu_def, "Celu", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, celu))
UN_DEF(sigmoid_def, "Sigmoid", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, sigmoid))
UN_DEF(hsigmoid_def, "HardSigmoid", 0, EW_FLT(EW_ENT, hsigmoid))
UN_DEF(hswish_def, "HardSwish", 0, EW_FLT(EW_ENT, hswish))
UN_DEF(tanh_def, "Tanh", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, tanh))
UN_DEF(softplus_def, "Softplus", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, softplus))
UN_DEF(softsign_def, "Softsign", 0, EW_FLT(EW_ENT, softsign))
UN_DEF(gelu_def, "Gelu", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, gelu))
UN_DEF(gelu_tanh_def, "Gelu", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, gelu_tanh))
UN_DEF(mish_def, "Mish", EW_GRAIN_HEAVY, EW_FLT(EW_ENT, mish))
UN_DEF(trelu_def, "ThresholdedRelu", 0, EW_FLT(EW_ENT, trelu))
UN_DEF(shrink_def, "Shrink", 0, EW_FLT(EW_ENT, shrink) EW_INT(EW_ENT, shrink))
UN_DEF(clip_def, "Clip", 0, EW_NUM(EW_ENT, clip))

/* ----------------------------------------------------------- run functions */

static double attr_f(struct op_ctx *c, const char *name, double dflt) {
  return ir_attr_float(c->node, name, (float)dflt);
}

static tolk_status run_relu(struct op_ctx *c) { return ew_run_unary(c, &relu_def, NULL); }
static tolk_status run_sigmoid(struct op_ctx *c) { return ew_run_unary(c, &sigmoid_def, NULL); }
static tolk_status run_tanh(struct op_ctx *c) { return ew_run_unary(c, &tanh_def, NULL); }
static tolk_status run_softplus(struct op_ctx *c) { return ew_run_unary(c, &softplus_def, NULL); }
static tolk_status run_softsign(struct op_ctx *c) { return ew_run_unary(c, &softsign_def, NULL); }
static tolk_status run_mish(struct op_ctx *c) { return ew_run_unary(c, &mish_def, NULL); }
static tolk_status run_hswish(struct op_ctx *c) { return ew_run_unary(c, &hswish_def, NULL); }

static tolk_status run_leaky(struct op_ctx *c) {
  struct ew_params p = {.d = {attr_f(c, "alpha", 0.01)}};
  return ew_run_unary(c, &leaky_def, &p);
}

static tolk_status run_elu(struct op_ctx *c) {
  struct ew_params p = {.d = {attr_f(c, "alpha", 1.0)}};
  return ew_run_unary(c, &elu_def, &p);
}

static tolk_status run_selu(struct op_ctx *c) {
  struct ew_params p = {.d = {attr_f(c, "alpha", 1.67326319217681884765625),
                              attr_f(c, "gamma", 1.05070102214813232421875)}};
  return ew_run_unary(c, &selu_def, &p);
}

static tolk_status run_celu(struct op_ctx *c) {
  struct ew_params p = {.d = {attr_f(c, "alpha", 1.0)}};
  if (p.d[0] == 0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "Celu alpha must not be 0");
  return ew_run_unary(c, &celu_def, &p);
}

static tolk_status run_hsigmoid(struct op_ctx *c) {
  struct ew_params p = {.d = {attr_f(c, "alpha", 0.2), attr_f(c, "beta", 0.5)}};
  return ew_run_unary(c, &hsigmoid_def, &p);
}

static tolk_status run_trelu(struct op_ctx *c) {
  struct ew_params p = {.d = {attr_f(c, "alpha", 1.0)}};
  return ew_run_unary(c, &trelu_def, &p);
}

static tolk_status run_shrink(struct op_ctx *c) {
  struct ew_params p = {.d = {attr_f(c, "lambd", 0.5), attr_f(c, "bias", 0.0)}};
  return ew_run_unary(c, &shrink_def, &p);
}

static tolk_status gelu_prepare(const struct ir_node *node, int64_t opset, void **state,
                                tolk_error *err) {
  const char *a = ir_attr_string(node, "approximate", "none");
  if (strcmp(a, "none") != 0 && strcmp(a, "tanh") != 0)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "Gelu approximate=\"%s\" (\"none\" or \"tanh\" expected)", a);
  return TOLK_OK;
}

static tolk_status run_gelu(struct op_ctx *c) {
  bool t = strcmp(ir_attr_string(c->node, "approximate", "none"), "tanh") == 0;
  return ew_run_unary(c, t ? &gelu_tanh_def : &gelu_def, NULL);
}

/* Clip bound: input `i` (opset ≥ 11) of x's dtype, stored into p's slot
 * `k` for x's type family; absent leaves the default. */
static tolk_status clip_bound(struct op_ctx *c, size_t i, int32_t dt, struct ew_params *p,
                              int k) {
  const struct tensor *b = op_in(c, i);
  if (!b) return TOLK_OK;
  if (b->dtype != dt)
    return op_fail(c, TOLK_ERR_TYPE, "Clip %s is %s but the input is %s", i == 1 ? "min" : "max",
                   tolk_dtype_name((tolk_dtype)b->dtype), tolk_dtype_name((tolk_dtype)dt));
  if (b->numel != 1) {
    char buf[96];
    return op_fail(c, TOLK_ERR_SHAPE, "Clip %s must be a scalar, its shape is %s",
                   i == 1 ? "min" : "max", shape_str(b, buf, sizeof buf));
  }
  bool ok;
  if (dt == TOLK_UINT8 || dt == TOLK_UINT16 || dt == TOLK_UINT32 || dt == TOLK_UINT64)
    ok = ew_convert(TOLK_UINT64, &p->u[k], dt, b->data, 1);
  else if (dt == TOLK_INT8 || dt == TOLK_INT16 || dt == TOLK_INT32 || dt == TOLK_INT64)
    ok = ew_convert(TOLK_INT64, &p->i[k], dt, b->data, 1);
  else
    ok = ew_convert(TOLK_DOUBLE, &p->d[k], dt, b->data, 1);
  if (!ok)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "Clip does not support %s",
                   tolk_dtype_name((tolk_dtype)dt));
  return TOLK_OK;
}

static tolk_status run_clip(struct op_ctx *c) {
  struct ew_params p = {.d = {-INFINITY, INFINITY},
                        .i = {INT64_MIN, INT64_MAX},
                        .u = {0, UINT64_MAX}};
  if (c->opset < 11) {
    /* Bounds were attributes (float), the defaults the float range. */
    p.d[0] = attr_f(c, "min", -FLT_MAX);
    p.d[1] = attr_f(c, "max", FLT_MAX);
    return ew_run_unary(c, &clip_def, &p);
  }
  const struct tensor *x = op_in(c, 0);
  if (!x) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 0 is missing");
  tolk_status st = clip_bound(c, 1, x->dtype, &p, 0);
  if (!st) st = clip_bound(c, 2, x->dtype, &p, 1);
  if (st) return st;
  return ew_run_unary(c, &clip_def, &p);
}

/* PRelu: slope broadcasts to X's shape (unidirectional). */
EW_FLT(EW_BIN_SAME, prelu, x < 0 ? y * x : x)
EW_SINT(EW_BIN_SAME, prelu, x < 0 ? (TT)((WW)y * (WW)x) : x)
EW_UINT(EW_BIN_SAME, prelu, ((void)y, x))
static const struct ew_binary_def prelu_def = {"PRelu", 0, 0, {EW_NUM(EW_ENT, prelu)}};

static tolk_status run_prelu(struct op_ctx *c) {
  const struct tensor *in[2];
  tolk_status st = ew_inputs(c, 2, in);
  if (st) return st;
  if (in[0]->dtype != in[1]->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "PRelu X is %s but slope is %s",
                   tolk_dtype_name((tolk_dtype)in[0]->dtype),
                   tolk_dtype_name((tolk_dtype)in[1]->dtype));
  if (!ew_binary_has(&prelu_def, in[0]->dtype))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "PRelu does not support %s",
                   tolk_dtype_name((tolk_dtype)in[0]->dtype));
  struct bcast_shape s[2] = {{in[0]->rank, in[0]->dims}, {in[1]->rank, in[1]->dims}};
  /* Before opset 7 a 1-D slope is per channel (axis 1), not numpy-aligned
   * to the last axis: view it as [C, 1, …, 1]. */
  int64_t per_channel[IR_MAX_RANK];
  if (c->opset < 7 && in[1]->rank == 1 && in[0]->rank >= 2 && in[1]->dims[0] == in[0]->dims[1]) {
    per_channel[0] = in[1]->dims[0];
    for (int d = 1; d < in[0]->rank - 1; d++) per_channel[d] = 1;
    s[1] = (struct bcast_shape){in[0]->rank - 1, per_channel};
  }
  struct bcast bc;
  if (!bcast_init_to(&bc, in[0]->rank, in[0]->dims, 2, s)) {
    char buf[160];
    return op_fail(c, TOLK_ERR_SHAPE, "PRelu slope does not broadcast to X: %s",
                   bcast_shapes_str(2, in, buf, sizeof buf));
  }
  struct tensor *y = op_output(c, 0, in[0]->dtype, in[0]->rank, in[0]->dims);
  if (!y) return c->err->status;
  return ew_binary(c, &prelu_def, &bc, in[0], in[1], y, NULL);
}

const struct op_def tolk_ops_activation[] = {
    {"", "Relu", 1, 0, NULL, run_relu, NULL},
    {"", "LeakyRelu", 1, 0, NULL, run_leaky, NULL},
    {"", "Elu", 1, 0, NULL, run_elu, NULL},
    {"", "Selu", 1, 0, NULL, run_selu, NULL},
    {"", "Celu", 12, 0, NULL, run_celu, NULL},
    {"", "Sigmoid", 1, 0, NULL, run_sigmoid, NULL},
    {"", "HardSigmoid", 1, 0, NULL, run_hsigmoid, NULL},
    {"", "HardSwish", 14, 0, NULL, run_hswish, NULL},
    {"", "Tanh", 1, 0, NULL, run_tanh, NULL},
    {"", "Softplus", 1, 0, NULL, run_softplus, NULL},
    {"", "Softsign", 1, 0, NULL, run_softsign, NULL},
    {"", "Gelu", 20, 0, gelu_prepare, run_gelu, NULL},
    {"", "Mish", 18, 0, NULL, run_mish, NULL},
    {"", "ThresholdedRelu", 10, 0, NULL, run_trelu, NULL},
    {"", "Shrink", 9, 0, NULL, run_shrink, NULL},
    {"", "Clip", 1, 0, NULL, run_clip, NULL},
    {"", "PRelu", 1, 0, NULL, run_prelu, NULL},
    {0},
};
