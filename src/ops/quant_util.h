/*
 * quant_util.h — what the quantization operator files (quant.c,
 * quant_matmul.c, quant_conv.c) share: integer ranges of the quantized
 * dtypes, ONNX Runtime's rounding and saturation, reading scales and zero
 * points, fp32 views of float inputs, and ORT's dynamic quantization
 * parameters.
 *
 * Rounding follows ORT's MLAS (and the ONNX reference): v = x / scale in
 * fp32 (a division, not a multiplication by 1/scale, which rounds
 * differently), clamped to [qmin - zp, qmax - zp], rounded half to even,
 * plus zp. NaN lands on qmin, as MLAS's max/min sequence leaves it.
 */
#ifndef TOLK_QUANT_UTIL_H
#define TOLK_QUANT_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "op.h"

/* The integer range of a quantized dtype (uint8, int8, uint16, int16).
 * False for any other dtype. */
bool quant_range(int32_t dtype, int32_t *lo, int32_t *hi);

/* True for uint8 and int8. */
static inline bool quant_is_8bit(int32_t dtype) {
  return dtype == TOLK_UINT8 || dtype == TOLK_INT8;
}

/* Element i of an integer tensor buffer (uint8, int8, uint16, int16, int32)
 * as int32. */
static inline int32_t quant_get(int32_t dtype, const void *data, int64_t i) {
  switch (dtype) {
  case TOLK_UINT8: return ((const uint8_t *)data)[i];
  case TOLK_INT8: return ((const int8_t *)data)[i];
  case TOLK_UINT16: return ((const uint16_t *)data)[i];
  case TOLK_INT16: return ((const int16_t *)data)[i];
  case TOLK_INT32: return ((const int32_t *)data)[i];
  default: return 0;
  }
}

/* Stores v (already in range) as element i of a uint8/int8/uint16/int16
 * buffer. */
static inline void quant_set(int32_t dtype, void *data, int64_t i, int32_t v) {
  switch (dtype) {
  case TOLK_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
  case TOLK_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
  case TOLK_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; break;
  case TOLK_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
  default: break;
  }
}

/* round-half-even(clamp(v, lo_f, hi_f)) as int32, where lo_f/hi_f are the
 * range already shifted by the zero point. NaN gives lo_f. Uses the default
 * FP rounding mode, which the library never changes. */
static inline int32_t quant_round_clamp(float v, float lo_f, float hi_f) {
  v = v > lo_f ? v : lo_f; /* NaN compares false: takes lo_f */
  v = v < hi_f ? v : hi_f;
  return (int32_t)nearbyintf(v);
}

/* ORT's GetQuantizationParameter for uint8 over n floats: the range is
 * widened to include 0, scale = (max - min) / 255 (1 when the range is
 * empty), zero point = round-half-even(clamp(0 - min / scale, 0, 255)). */
void quant_dynamic_params_u8(const float *x, int64_t n, float *scale, int32_t *zp);

/* y[i] = saturate(round(x[i] / scale) + zp) into uint8, as MLAS computes it. */
void quant_linear_u8(const float *x, uint8_t *y, int64_t n, float scale, int32_t zp);

/* t's elements as fp32 (float, float16, bfloat16, double; int32 when
 * allow_int): t->data itself for float tensors, else a converted copy in run
 * scratch. NULL with c->err set on another dtype or when scratch runs out;
 * `what` names the input in the message. */
const float *quant_f32(struct op_ctx *c, const struct tensor *t, bool allow_int,
                       const char *what);

/* The status recorded on c by a helper that returned NULL. */
static inline tolk_status quant_err(const struct op_ctx *c) {
  return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
}

/* True when t holds exactly one element (rank 0, or any rank of 1s). */
static inline bool quant_is_scalar(const struct tensor *t) { return t->numel == 1; }

/* Fails the op naming input `idx`/`what` when t is absent or its dtype is
 * not uint8/int8. */
tolk_status quant_need_8bit(struct op_ctx *c, const struct tensor *t, const char *what);

#endif /* TOLK_QUANT_UTIL_H */
