/*
 * test_ops_elementwise.h — helpers shared by the elementwise operator tests
 * (tests/test_ops_elementwise*.c): reading and writing any numeric dtype as
 * double, rounding a double reference into a dtype the way a correct kernel
 * must, and running a one-node model (tests/ops_model.h) on a pool of a
 * chosen size, so that the kernels' thread splitting is exercised.
 */
#ifndef TOLK_TEST_OPS_ELEMENTWISE_H
#define TOLK_TEST_OPS_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "ops_model.h"

/* Element i of a buffer of dtype dt, as double. */
static inline double et_get(tolk_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case TOLK_FLOAT: return ((const float *)p)[i];
  case TOLK_DOUBLE: return ((const double *)p)[i];
  case TOLK_FLOAT16: return tolk_f16_to_f32(((const uint16_t *)p)[i]);
  case TOLK_BFLOAT16: return tolk_bf16_to_f32(((const uint16_t *)p)[i]);
  case TOLK_INT8: return ((const int8_t *)p)[i];
  case TOLK_INT16: return ((const int16_t *)p)[i];
  case TOLK_INT32: return ((const int32_t *)p)[i];
  case TOLK_INT64: return (double)((const int64_t *)p)[i];
  case TOLK_UINT8:
  case TOLK_BOOL: return ((const uint8_t *)p)[i];
  case TOLK_UINT16: return ((const uint16_t *)p)[i];
  case TOLK_UINT32: return ((const uint32_t *)p)[i];
  case TOLK_UINT64: return (double)((const uint64_t *)p)[i];
  default: return NAN;
  }
}

/* Stores v (already representable, or rounded to nearest for floats;
 * truncated for integers) as element i. */
static inline void et_set(tolk_dtype dt, void *p, int64_t i, double v) {
  switch (dt) {
  case TOLK_FLOAT: ((float *)p)[i] = (float)v; break;
  case TOLK_DOUBLE: ((double *)p)[i] = v; break;
  case TOLK_FLOAT16: ((uint16_t *)p)[i] = tolk_f64_to_f16(v); break;
  case TOLK_BFLOAT16: ((uint16_t *)p)[i] = tolk_f64_to_bf16(v); break;
  case TOLK_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
  case TOLK_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
  case TOLK_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
  case TOLK_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
  case TOLK_UINT8:
  case TOLK_BOOL: ((uint8_t *)p)[i] = (uint8_t)v; break;
  case TOLK_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
  case TOLK_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case TOLK_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  default: break;
  }
}

/* v rounded into dtype dt and read back. */
static inline double et_round(tolk_dtype dt, double v) {
  unsigned char buf[8] = {0};
  et_set(dt, buf, 0, v);
  return et_get(dt, buf, 0);
}

static inline bool et_is_float(tolk_dtype dt) {
  return dt == TOLK_FLOAT || dt == TOLK_DOUBLE || dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16;
}

/* tm_run (ops_model.h) with `threads` intra-op threads. */
static inline tolk_status et_run(struct tmodel *m, int threads, tolk_error *err) {
  m->threads = threads;
  return tm_run(m, err);
}

#endif /* TOLK_TEST_OPS_ELEMENTWISE_H */
