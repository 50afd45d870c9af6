/*
 * quant.c — the linear quantization operators: QuantizeLinear,
 * DequantizeLinear (opset 10 per tensor, 13 per axis, 19 float16 scales, 21
 * blocked and 16-bit types) and DynamicQuantizeLinear, plus the helpers of
 * quant_util.h. The integer GEMM operators are in quant_matmul.c, the integer
 * convolutions in quant_conv.c.
 *
 * Every result matches ONNX Runtime's CPU kernels bit for bit: ORT's dynamic
 * int8 Marian graphs (DynamicQuantizeLinear -> MatMulInteger) must produce
 * the same integers here as there, so the formulas below follow MLAS rather
 * than any algebraically equal rewrite.
 */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kern/kern.h"
#include "quant_util.h"

/* ------------------------------------------------------------------ helpers */

bool quant_range(int32_t dtype, int32_t *lo, int32_t *hi) {
  switch (dtype) {
  case TOLK_UINT8: *lo = 0, *hi = 255; return true;
  case TOLK_INT8: *lo = -128, *hi = 127; return true;
  case TOLK_UINT16: *lo = 0, *hi = 65535; return true;
  case TOLK_INT16: *lo = -32768, *hi = 32767; return true;
  default: return false;
  }
}

void quant_dynamic_params_u8(const float *x, int64_t n, float *scale, int32_t *zp) {
  /* A zero extreme becomes +0 below, so which zero the kernel gives does
   * not matter. */
  float mn, mx;
  kern_minmax_f32(n, x, &mn, &mx);
  mn = mn < 0.0f ? mn : 0.0f;
  mx = mx > 0.0f ? mx : 0.0f;
  float s = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  float z = 0.0f - mn / s;
  z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
  *scale = s;
  *zp = (int32_t)nearbyintf(z);
}

/* nearbyintf(v) for |v| <= 2^22 in the default rounding mode (round half
 * to even, which tolk never changes): adding 1.5 · 2^23 leaves no fraction
 * bits, so the sum is rounded there exactly as nearbyintf rounds, and taking
 * it away again is exact. Inline arithmetic, where nearbyintf is a library
 * call per element that keeps the loop from vectorising. */
static inline float round_small(float v) { return (v + 12582912.0f) - 12582912.0f; }

void quant_linear_u8(const float *x, uint8_t *y, int64_t n, float scale, int32_t zp) {
  float lo = (float)(0 - zp), hi = (float)(255 - zp);
  for (int64_t i = 0; i < n; i++) {
    float v = x[i] / scale;
    v = v > lo ? v : lo; /* NaN compares false: takes lo */
    v = v < hi ? v : hi;
    y[i] = (uint8_t)((int32_t)round_small(v) + zp);
  }
}

const float *quant_f32(struct op_ctx *c, const struct tensor *t, bool allow_int,
                       const char *what) {
  if (t->dtype == TOLK_FLOAT) return t->data;
  if (t->dtype != TOLK_FLOAT16 && t->dtype != TOLK_BFLOAT16 && t->dtype != TOLK_DOUBLE &&
      !(allow_int && t->dtype == TOLK_INT32)) {
    op_fail(c, TOLK_ERR_TYPE, "%s: dtype %s is not supported here", what,
            tolk_dtype_name((tolk_dtype)t->dtype));
    return NULL;
  }
  size_t bytes;
  if (!tolk_mul_size((size_t)t->numel, sizeof(float), &bytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "%s: too many elements", what);
    return NULL;
  }
  float *f = op_scratch(c, bytes ? bytes : sizeof(float));
  if (!f) return NULL;
  for (int64_t i = 0; i < t->numel; i++) {
    switch (t->dtype) {
    case TOLK_FLOAT16: f[i] = tolk_f16_to_f32(((const uint16_t *)t->data)[i]); break;
    case TOLK_BFLOAT16: f[i] = tolk_bf16_to_f32(((const uint16_t *)t->data)[i]); break;
    case TOLK_DOUBLE: f[i] = (float)((const double *)t->data)[i]; break;
    default: f[i] = (float)((const int32_t *)t->data)[i]; break;
    }
  }
  return f;
}

tolk_status quant_need_8bit(struct op_ctx *c, const struct tensor *t, const char *what) {
  if (!t) return op_fail(c, TOLK_ERR_INVALID_MODEL, "%s is required", what);
  if (!quant_is_8bit(t->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "%s: dtype %s, expected uint8 or int8", what,
                   tolk_dtype_name((tolk_dtype)t->dtype));
  return TOLK_OK;
}

/* ---------------------------------------------------- scale / zp layout */

enum qmode { Q_TENSOR, Q_AXIS, Q_BLOCK };

/* x seen as [outer, dim, inner] around the quantization axis; the scale for
 * element (o, a, i) is qidx(). */
struct qlayout {
  enum qmode mode;
  int64_t outer, dim, inner, block, nblocks;
};

static inline int64_t qidx(const struct qlayout *L, int64_t o, int64_t a, int64_t i) {
  switch (L->mode) {
  case Q_TENSOR: return 0;
  case Q_AXIS: return a;
  default: return (o * L->nblocks + a / L->block) * L->inner + i;
  }
}

static tolk_status qlayout_init(struct op_ctx *c, const struct tensor *x,
                                const struct tensor *scale, const struct tensor *zp,
                                struct qlayout *L) {
  char b1[128], b2[128];
  int64_t axis = ir_attr_int(c->node, "axis", 1);
  int64_t block = c->opset >= 21 ? ir_attr_int(c->node, "block_size", 0) : 0;
  memset(L, 0, sizeof *L);
  L->outer = 1, L->dim = x->numel, L->inner = 1;
  if (zp && zp->numel != scale->numel)
    return op_fail(c, TOLK_ERR_SHAPE, "zero point %s does not match scale %s",
                   shape_str(zp, b1, sizeof b1), shape_str(scale, b2, sizeof b2));
  if (block < 0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "block_size %lld < 0", (long long)block);
  if (scale->numel == 1 && block == 0) {
    L->mode = Q_TENSOR;
    return TOLK_OK;
  }
  if (axis < -x->rank || axis >= x->rank || x->rank == 0)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "axis %lld out of range for input %s",
                   (long long)axis, shape_str(x, b1, sizeof b1));
  int ax = (int)(axis < 0 ? axis + x->rank : axis);
  L->dim = x->dims[ax];
  L->outer = 1;
  for (int d = 0; d < ax; d++) L->outer *= x->dims[d];
  for (int d = ax + 1; d < x->rank; d++) L->inner *= x->dims[d];
  if (block == 0) {
    if (scale->rank != 1 || scale->dims[0] != L->dim)
      return op_fail(c, TOLK_ERR_SHAPE, "per-axis scale %s does not match axis %d of input %s",
                     shape_str(scale, b1, sizeof b1), ax, shape_str(x, b2, sizeof b2));
    L->mode = Q_AXIS;
    return TOLK_OK;
  }
  L->mode = Q_BLOCK;
  L->block = block;
  L->nblocks = (L->dim + block - 1) / block;
  bool ok = scale->rank == x->rank;
  for (int d = 0; ok && d < x->rank; d++)
    ok = scale->dims[d] == (d == ax ? L->nblocks : x->dims[d]);
  if (!ok)
    return op_fail(c, TOLK_ERR_SHAPE,
                   "blocked scale %s does not match input %s with block_size %lld on axis %d",
                   shape_str(scale, b1, sizeof b1), shape_str(x, b2, sizeof b2),
                   (long long)block, ax);
  return TOLK_OK;
}

/* -------------------------------------------------------- QuantizeLinear */

struct qjob {
  const struct qlayout *L;
  const float *x, *scale;
  const void *zp;
  int32_t zp_dtype;
  void *y;
  int32_t y_dtype, lo, hi;
};

static void quantize_rows(void *arg, int64_t begin, int64_t end) {
  const struct qjob *j = arg;
  const struct qlayout *L = j->L;
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / L->dim, a = r % L->dim;
    const float *x = j->x + r * L->inner;
    int64_t base = r * L->inner;
    if (L->mode != Q_BLOCK) {
      int64_t s = qidx(L, o, a, 0);
      float sc = j->scale[s];
      int32_t zp = j->zp ? quant_get(j->zp_dtype, j->zp, s) : 0;
      float lo = (float)(j->lo - zp), hi = (float)(j->hi - zp);
      if (j->y_dtype == TOLK_UINT8) {
        uint8_t *y = (uint8_t *)j->y + base;
        for (int64_t i = 0; i < L->inner; i++)
          y[i] = (uint8_t)(quant_round_clamp(x[i] / sc, lo, hi) + zp);
      } else if (j->y_dtype == TOLK_INT8) {
        int8_t *y = (int8_t *)j->y + base;
        for (int64_t i = 0; i < L->inner; i++)
          y[i] = (int8_t)(quant_round_clamp(x[i] / sc, lo, hi) + zp);
      } else {
        for (int64_t i = 0; i < L->inner; i++)
          quant_set(j->y_dtype, j->y, base + i, quant_round_clamp(x[i] / sc, lo, hi) + zp);
      }
      continue;
    }
    for (int64_t i = 0; i < L->inner; i++) {
      int64_t s = qidx(L, o, a, i);
      int32_t zp = j->zp ? quant_get(j->zp_dtype, j->zp, s) : 0;
      float v = x[i] / j->scale[s];
      quant_set(j->y_dtype, j->y, base + i,
                quant_round_clamp(v, (float)(j->lo - zp), (float)(j->hi - zp)) + zp);
    }
  }
}

static int64_t rows_grain(int64_t inner) {
  return inner >= 16384 ? 1 : 16384 / (inner > 0 ? inner : 1);
}

static tolk_status run_quantize(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *scale = op_in(c, 1), *zp = op_in(c, 2);
  if (!x || !scale) return op_fail(c, TOLK_ERR_INVALID_MODEL, "x and y_scale are required");
  int32_t y_dtype = TOLK_UINT8;
  int64_t out_attr = c->opset >= 21 ? ir_attr_int(c->node, "output_dtype", 0) : 0;
  if (zp) {
    y_dtype = zp->dtype;
    if (out_attr && out_attr != zp->dtype)
      return op_fail(c, TOLK_ERR_TYPE, "output_dtype %lld differs from y_zero_point's %s",
                     (long long)out_attr, tolk_dtype_name((tolk_dtype)zp->dtype));
  } else if (out_attr) {
    y_dtype = (int32_t)out_attr;
  }
  int32_t lo, hi;
  if (!quant_range(y_dtype, &lo, &hi))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "output dtype %s is not supported (uint8, int8, "
                   "uint16, int16 are)", tolk_dtype_name((tolk_dtype)y_dtype));
  struct qlayout L;
  tolk_status st = qlayout_init(c, x, scale, zp, &L);
  if (st) return st;
  const float *xf = quant_f32(c, x, true, "input x");
  if (!xf) return quant_err(c);
  const float *sf = quant_f32(c, scale, false, "y_scale");
  if (!sf) return quant_err(c);
  struct tensor *y = op_output(c, 0, y_dtype, x->rank, x->dims);
  if (!y) return quant_err(c);
  struct qjob j = {&L, xf, sf, zp ? zp->data : NULL, zp ? zp->dtype : 0, y->data, y_dtype, lo, hi};
  if (L.mode == Q_TENSOR) {
    /* One long row: split it into fixed pieces for the pool. */
    L.inner = 4096;
    int64_t full = x->numel / L.inner;
    L.dim = 1, L.outer = full;
    op_parallel_for(c, full, 4, quantize_rows, &j);
    int64_t done = full * L.inner;
    if (done < x->numel) {
      struct qlayout tail = {Q_TENSOR, 1, 1, x->numel - done, 0, 0};
      struct qjob jt = j;
      jt.L = &tail;
      jt.x = xf + done;
      jt.y = (char *)y->data + (size_t)done * op_dtype_size(y_dtype);
      quantize_rows(&jt, 0, 1);
    }
    return TOLK_OK;
  }
  op_parallel_for(c, L.outer * L.dim, rows_grain(L.inner), quantize_rows, &j);
  return TOLK_OK;
}

/* ------------------------------------------------------ DequantizeLinear */

struct dqjob {
  const struct qlayout *L;
  const void *x;
  int32_t x_dtype;
  const float *scale;
  const void *zp;
  float *y;
};

static void dequantize_rows(void *arg, int64_t begin, int64_t end) {
  const struct dqjob *j = arg;
  const struct qlayout *L = j->L;
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / L->dim, a = r % L->dim, base = r * L->inner;
    float *y = j->y + base;
    if (L->mode != Q_BLOCK) {
      int64_t s = qidx(L, o, a, 0);
      float sc = j->scale[s];
      int32_t zp = j->zp ? quant_get(j->x_dtype, j->zp, s) : 0;
      if (j->x_dtype == TOLK_INT8) {
        const int8_t *x = (const int8_t *)j->x + base;
        for (int64_t i = 0; i < L->inner; i++) y[i] = (float)(x[i] - zp) * sc;
      } else if (j->x_dtype == TOLK_UINT8) {
        const uint8_t *x = (const uint8_t *)j->x + base;
        for (int64_t i = 0; i < L->inner; i++) y[i] = (float)(x[i] - zp) * sc;
      } else if (j->x_dtype == TOLK_INT32) {
        /* int32 has no zero point (the spec requires 0); converting before
         * subtracting avoids overflow for any value. */
        const int32_t *x = (const int32_t *)j->x + base;
        for (int64_t i = 0; i < L->inner; i++) y[i] = ((float)x[i] - (float)zp) * sc;
      } else {
        for (int64_t i = 0; i < L->inner; i++)
          y[i] = (float)(quant_get(j->x_dtype, j->x, base + i) - zp) * sc;
      }
      continue;
    }
    for (int64_t i = 0; i < L->inner; i++) {
      int64_t s = qidx(L, o, a, i);
      int32_t zp = j->zp ? quant_get(j->x_dtype, j->zp, s) : 0;
      y[i] = (float)(quant_get(j->x_dtype, j->x, base + i) - zp) * j->scale[s];
    }
  }
}

static tolk_status run_dequantize(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *scale = op_in(c, 1), *zp = op_in(c, 2);
  if (!x || !scale) return op_fail(c, TOLK_ERR_INVALID_MODEL, "x and x_scale are required");
  int32_t lo, hi;
  if (!quant_range(x->dtype, &lo, &hi) && x->dtype != TOLK_INT32)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "input dtype %s is not supported (uint8, int8, "
                   "uint16, int16, int32 are)", tolk_dtype_name((tolk_dtype)x->dtype));
  if (zp && zp->dtype != x->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "x_zero_point dtype %s differs from x's %s",
                   tolk_dtype_name((tolk_dtype)zp->dtype), tolk_dtype_name((tolk_dtype)x->dtype));
  if (scale->dtype != TOLK_FLOAT && scale->dtype != TOLK_FLOAT16 &&
      scale->dtype != TOLK_BFLOAT16)
    return op_fail(c, TOLK_ERR_TYPE, "x_scale dtype %s, expected a float type",
                   tolk_dtype_name((tolk_dtype)scale->dtype));
  struct qlayout L;
  tolk_status st = qlayout_init(c, x, scale, zp, &L);
  if (st) return st;
  const float *sf = quant_f32(c, scale, false, "x_scale");
  if (!sf) return quant_err(c);
  struct tensor *y = op_output(c, 0, scale->dtype, x->rank, x->dims);
  if (!y) return quant_err(c);
  float *yf = y->data;
  if (scale->dtype != TOLK_FLOAT) {
    size_t bytes;
    if (!tolk_mul_size((size_t)x->numel, sizeof(float), &bytes))
      return op_fail(c, TOLK_ERR_LIMIT, "too many elements");
    yf = op_scratch(c, bytes ? bytes : 4);
    if (!yf) return quant_err(c);
  }
  struct dqjob j = {&L, x->data, x->dtype, sf, zp ? zp->data : NULL, yf};
  if (L.mode == Q_TENSOR) {
    L.dim = 1, L.outer = 1, L.inner = x->numel;
    dequantize_rows(&j, 0, 1);
  } else {
    op_parallel_for(c, L.outer * L.dim, rows_grain(L.inner), dequantize_rows, &j);
  }
  if (scale->dtype == TOLK_FLOAT16)
    tolk_f32_to_f16_n(yf, y->data, x->numel);
  else if (scale->dtype == TOLK_BFLOAT16)
    tolk_f32_to_bf16_n(yf, y->data, x->numel);
  return TOLK_OK;
}

/* -------------------------------------------------- DynamicQuantizeLinear */

static tolk_status run_dynamic_quantize(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  if (!x) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input x is required");
  if (x->dtype != TOLK_FLOAT)
    return op_fail(c, TOLK_ERR_TYPE, "input x: dtype %s, expected float",
                   tolk_dtype_name((tolk_dtype)x->dtype));
  float scale;
  int32_t zp;
  quant_dynamic_params_u8(x->data, x->numel, &scale, &zp);
  struct tensor *y = op_output(c, 0, TOLK_UINT8, x->rank, x->dims);
  if (!y) return quant_err(c);
  struct tensor *ys = op_output(c, 1, TOLK_FLOAT, 0, NULL);
  if (!ys) return quant_err(c);
  struct tensor *yz = op_output(c, 2, TOLK_UINT8, 0, NULL);
  if (!yz) return quant_err(c);
  *(float *)ys->data = scale;
  *(uint8_t *)yz->data = (uint8_t)zp;
  quant_linear_u8(x->data, y->data, x->numel, scale, zp);
  return TOLK_OK;
}

/* The per-row form a session made with quant_rows gives the
 * DynamicQuantizeLinear nodes that feed only MatMulInteger chains
 * (src/exec/quant_rows.c): each row of x (its last axis) gets its own
 * scale and zero point, as if it were quantized alone, and they come out
 * shaped [..., 1] — the per-row zero point MatMulInteger takes, and a scale
 * the chain's Muls broadcast. A row's codes then do not depend on the other
 * rows of the batch. A rank-0 or rank-1 x is one row: per tensor. */
struct dql_rows_job {
  const float *x;
  uint8_t *y, *zp;
  float *scale;
  int64_t k;
};

static void dql_rows(void *arg, int64_t begin, int64_t end) {
  const struct dql_rows_job *j = arg;
  for (int64_t r = begin; r < end; r++) {
    int32_t zp;
    quant_dynamic_params_u8(j->x + r * j->k, j->k, &j->scale[r], &zp);
    j->zp[r] = (uint8_t)zp;
    quant_linear_u8(j->x + r * j->k, j->y + r * j->k, j->k, j->scale[r], zp);
  }
}

static tolk_status run_dynamic_quantize_rows(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  if (x && x->dtype == TOLK_FLOAT && x->rank < 2) return run_dynamic_quantize(c);
  if (!x) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input x is required");
  if (x->dtype != TOLK_FLOAT)
    return op_fail(c, TOLK_ERR_TYPE, "input x: dtype %s, expected float",
                   tolk_dtype_name((tolk_dtype)x->dtype));
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
  dims[x->rank - 1] = 1;
  struct tensor *y = op_output(c, 0, TOLK_UINT8, x->rank, x->dims);
  if (!y) return quant_err(c);
  struct tensor *ys = op_output(c, 1, TOLK_FLOAT, x->rank, dims);
  if (!ys) return quant_err(c);
  struct tensor *yz = op_output(c, 2, TOLK_UINT8, x->rank, dims);
  if (!yz) return quant_err(c);
  int64_t k = x->dims[x->rank - 1];
  struct dql_rows_job j = {x->data, y->data, yz->data, ys->data, k};
  op_parallel_for(c, ys->numel, rows_grain(k), dql_rows, &j);
  return TOLK_OK;
}

const struct op_def tolk_dql_rows_def = {"tolk.internal", "DynamicQuantizeLinearRows", 1, 0, NULL,
                                         run_dynamic_quantize_rows, NULL};

const struct op_def tolk_ops_quant[] = {
    {"", "QuantizeLinear", 10, 0, NULL, run_quantize, NULL},
    {"", "DequantizeLinear", 10, 0, NULL, run_dequantize, NULL},
    {"", "DynamicQuantizeLinear", 11, 0, NULL, run_dynamic_quantize, NULL},
    /* ORT's contrib versions (QDQ models with use_qdq_contrib_ops): the same
     * per-tensor / per-axis semantics, axis defaulting to 1. */
    {"com.microsoft", "QuantizeLinear", 1, 0, NULL, run_quantize, NULL},
    {"com.microsoft", "DequantizeLinear", 1, 0, NULL, run_dequantize, NULL},
    {0},
};
