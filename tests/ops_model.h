/*
 * ops_model.h — builds a one-node ONNX model in memory and runs it through
 * the public session API, for operator tests that need exact control over
 * inputs, attributes and opset (tests/test_ops_shape*.c). Every input is a
 * graph input fed at run time, so kernels see run-time tensors, never folded
 * constants.
 *
 *   struct tmodel m;
 *   tm_begin(&m, "Slice", 13);
 *   tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, data);
 *   tm_in_i64(&m, 1, (int64_t[]){1}, (int64_t[]){-1});
 *   tm_attr_int(&m, "axis", 0);
 *   tm_out(&m, 1);                     // number of outputs
 *   tolk_status st = tm_run(&m, &err); // m.out[i] hold the results
 *   tm_end(&m);
 *
 * The protobuf bytes come from onnx_pbw.h, the one writer the tests share;
 * only the fields the loader needs are emitted.
 * The builder is `struct tmodel`. `struct tm` still works through a macro
 * for the tests written against its first name; that alias clashes with
 * <time.h>'s struct tm, so new code should say tmodel.
 */
#ifndef TOLK_TESTS_OPS_MODEL_H
#define TOLK_TESTS_OPS_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_pbw.h"
#include "testutil.h"
#include "tolk.h"

#define TM_MAX 16

struct tmodel {
  const char *op;
  int opset;
  int threads; /* intra-op threads for the session; 0: one */
  struct pbw node, graph;
  int n_in, n_out;
  char names[TM_MAX][16];
  tolk_tensor *in[TM_MAX];
  const char *in_names[TM_MAX];
  int n_fed;
  tolk_tensor *out[TM_MAX];
};

/* The builder's first name, kept for existing tests (see the top). */
#define tm tmodel

static inline void tm_begin(struct tmodel *m, const char *op, int opset) {
  memset(m, 0, sizeof *m);
  m->op = op;
  m->opset = opset;
}

/* A graph input of the given dtype and shape, fed with `data` (NULL: zeros). */
static inline void tm_in(struct tmodel *m, tolk_dtype dt, int rank, const int64_t *dims, const void *data) {
  int i = m->n_in++;
  snprintf(m->names[i], sizeof m->names[i], "i%d", i);
  pbw_str(&m->node, 1, m->names[i]);
  int64_t numel = 1;
  for (int k = 0; k < rank; k++) numel *= dims[k];
  tolk_error err = {0};
  tolk_tensor_create(dt, rank, dims, data, (size_t)numel * tolk_dtype_size(dt),
                     &m->in[m->n_fed], &err);
  m->in_names[m->n_fed++] = m->names[i];
  pbw_value_info(&m->graph, 11, m->names[i], dt, rank, dims); /* graph input */
}

static inline void tm_in_i64(struct tmodel *m, int rank, const int64_t *dims, const int64_t *data) {
  tm_in(m, TOLK_INT64, rank, dims, data);
}

/* A 1-D int64 input holding n values. */
static inline void tm_in_ints(struct tmodel *m, int64_t n, const int64_t *v) { tm_in_i64(m, 1, &n, v); }

/* An omitted optional input (empty name). */
static inline void tm_none(struct tmodel *m) {
  pbw_str(&m->node, 1, "");
  m->n_in++;
}

static inline void tm_attr_begin(struct pbw *a, const char *name, int type) {
  memset(a, 0, sizeof *a);
  pbw_str(a, 1, name);
  pbw_int(a, 20, type);
}

static inline void tm_attr_int(struct tmodel *m, const char *name, int64_t v) {
  struct pbw a;
  tm_attr_begin(&a, name, 2);
  pbw_int(&a, 3, v);
  pbw_msg(&m->node, 5, &a);
}

static inline void tm_attr_float(struct tmodel *m, const char *name, float v) {
  struct pbw a;
  tm_attr_begin(&a, name, 1);
  pbw_key(&a, 2, 5);
  pbw_raw(&a, &v, 4);
  pbw_msg(&m->node, 5, &a);
}

static inline void tm_attr_str(struct tmodel *m, const char *name, const char *s) {
  struct pbw a;
  tm_attr_begin(&a, name, 3);
  pbw_str(&a, 4, s);
  pbw_msg(&m->node, 5, &a);
}

static inline void tm_attr_ints(struct tmodel *m, const char *name, int n, const int64_t *v) {
  struct pbw a, packed = {0};
  tm_attr_begin(&a, name, 7);
  for (int k = 0; k < n; k++) pbw_varint(&packed, (uint64_t)v[k]);
  pbw_msg(&a, 8, &packed);
  pbw_msg(&m->node, 5, &a);
}

/* A TENSOR attribute: TensorProto{dims, data_type, raw_data}. */
static inline void tm_attr_tensor(struct tmodel *m, const char *name, tolk_dtype dt, int rank,
                           const int64_t *dims, const void *data) {
  struct pbw a, t = {0};
  int64_t numel = 1;
  tm_attr_begin(&a, name, 4);
  for (int k = 0; k < rank; k++) {
    pbw_int(&t, 1, dims[k]);
    numel *= dims[k];
  }
  pbw_int(&t, 2, dt);
  pbw_bytes(&t, 9, data, (size_t)numel * tolk_dtype_size(dt));
  pbw_msg(&a, 5, &t);
  pbw_msg(&m->node, 5, &a);
}

static inline void tm_out(struct tmodel *m, int n) { m->n_out = n; }

/* Builds the model, runs it and leaves the outputs in m->out. */
static inline tolk_status tm_run(struct tmodel *m, tolk_error *err) {
  struct pbw node = m->node, graph = m->graph, model = {0}, opset = {0};
  char onames[TM_MAX][16];
  memset(&m->node, 0, sizeof m->node);
  memset(&m->graph, 0, sizeof m->graph);
  for (int i = 0; i < m->n_out; i++) {
    snprintf(onames[i], sizeof onames[i], "o%d", i);
    pbw_str(&node, 2, onames[i]);
  }
  pbw_str(&node, 4, m->op);
  pbw_msg(&graph, 1, &node);
  pbw_str(&graph, 2, "g");
  for (int i = 0; i < m->n_out; i++) {
    struct pbw vi = {0};
    pbw_str(&vi, 1, onames[i]);
    pbw_msg(&graph, 12, &vi);
  }
  pbw_int(&model, 1, 8);
  pbw_str(&opset, 1, "");
  pbw_int(&opset, 2, m->opset);
  pbw_msg(&model, 8, &opset);
  pbw_msg(&model, 7, &graph);
  tolk_session *s = NULL;
  tolk_session_params p = tolk_session_default_params();
  p.threads = m->threads > 0 ? m->threads : 1;
  tolk_status st = tolk_session_create_from_buffer(model.p, model.n, NULL, p, &s, err);
  if (st == TOLK_OK) {
    st = tolk_session_run(s, (size_t)m->n_fed, m->in_names, (const tolk_tensor *const *)m->in,
                          (size_t)m->n_out, NULL, m->out, NULL, err);
    tolk_session_free(s);
  }
  free(model.p);
  return st;
}

static inline void tm_end(struct tmodel *m) {
  for (int i = 0; i < TM_MAX; i++) {
    tolk_tensor_free(m->in[i]);
    tolk_tensor_free(m->out[i]);
  }
  free(m->node.p);
  free(m->graph.p);
  memset(m, 0, sizeof *m);
}

/* Checks output t against dtype, shape and exact bytes, printing float and
 * int64 values when they differ. */
static inline void tm_expect(const char *what, const tolk_tensor *t, tolk_dtype dt, int rank,
                             const int64_t *dims, const void *data) {
  CHECK_MSG(t != NULL, "%s: no output", what);
  if (!t) return;
  CHECK_MSG(tolk_tensor_dtype(t) == dt, "%s: dtype %d", what, tolk_tensor_dtype(t));
  CHECK_MSG(tolk_tensor_rank(t) == rank, "%s: rank %d vs %d", what, tolk_tensor_rank(t), rank);
  if (tolk_tensor_rank(t) != rank) return;
  bool same = true;
  for (int i = 0; i < rank; i++) same = same && tolk_tensor_dims(t)[i] == dims[i];
  CHECK_MSG(same, "%s: dims differ", what);
  if (!same) return;
  size_t n = tolk_tensor_nbytes(t);
  bool eq = n == 0 || memcmp(tolk_tensor_data(t), data, n) == 0;
  CHECK_MSG(eq, "%s: values differ", what);
  if (!eq && dt == TOLK_FLOAT) {
    const float *g = tolk_tensor_data(t);
    for (size_t i = 0; i < n / 4; i++) fprintf(stderr, "  [%zu] %g vs %g\n", i, g[i], ((const float *)data)[i]);
  }
  if (!eq && dt == TOLK_INT64) {
    const int64_t *g = tolk_tensor_data(t);
    for (size_t i = 0; i < n / 8; i++)
      fprintf(stderr, "  [%zu] %lld vs %lld\n", i, (long long)g[i], (long long)((const int64_t *)data)[i]);
  }
}

/* Runs and expects success. */
static inline bool tm_run_ok(struct tmodel *m, const char *what) {
  tolk_error err = {0};
  tolk_status st = tm_run(m, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", what, err.message);
  return st == TOLK_OK;
}

/* Runs and expects a failure with status `want` (not a crash). */
static inline void tm_run_fail(struct tmodel *m, tolk_status want, const char *what) {
  tolk_error err = {0};
  tolk_status st = tm_run(m, &err);
  CHECK_MSG(st == want, "%s: status %d (%s), want %d", what, st, err.message, want);
}

#endif /* TOLK_TESTS_OPS_MODEL_H */
