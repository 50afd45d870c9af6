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
  unsigned char buf[8];
  et_set(dt, buf, 0, v);
  return et_get(dt, buf, 0);
}

static inline bool et_is_float(tolk_dtype dt) {
  return dt == TOLK_FLOAT || dt == TOLK_DOUBLE || dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16;
}

/* tm_run (ops_model.h) with `threads` intra-op threads. */
static inline tolk_status et_run(struct tm *m, int threads, tolk_error *err) {
  struct pbw node = m->node, graph = m->graph, model = {0}, opset = {0};
  char onames[TM_MAX][16];
  memset(&m->node, 0, sizeof m->node);
  memset(&m->graph, 0, sizeof m->graph);
  for (int i = 0; i < m->n_out; i++) {
    snprintf(onames[i], sizeof onames[i], "o%d", i);
    pbw_str(&node, 2, onames[i]);
  }
  pbw_str(&node, 4, m->op);
  pbw_sub(&graph, 1, &node);
  pbw_str(&graph, 2, "g");
  for (int i = 0; i < m->n_out; i++) {
    struct pbw vi = {0};
    pbw_str(&vi, 1, onames[i]);
    pbw_sub(&graph, 12, &vi);
  }
  pbw_int(&model, 1, 8);
  pbw_str(&opset, 1, "");
  pbw_int(&opset, 2, m->opset);
  pbw_sub(&model, 8, &opset);
  pbw_sub(&model, 7, &graph);
  tolk_session *s = NULL;
  tolk_session_params p = tolk_session_default_params();
  p.threads = threads;
  tolk_status st = tolk_session_create_from_buffer(model.p, model.n, NULL, p, &s, err);
  if (st == TOLK_OK) {
    st = tolk_session_run(s, (size_t)m->n_fed, m->in_names, (const tolk_tensor *const *)m->in,
                          (size_t)m->n_out, NULL, m->out, NULL, err);
    tolk_session_free(s);
  }
  free(model.p);
  return st;
}

#endif /* TOLK_TEST_OPS_ELEMENTWISE_H */
