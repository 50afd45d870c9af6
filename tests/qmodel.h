/*
 * qmodel.h — builds a one-node ONNX model in memory and runs it through the
 * public session API, for the quantization and com.microsoft operator tests
 * (test_ops_quant*.c, test_ops_contrib*.c). Beyond graph inputs it does
 * initializers (so kernels that pack constant weights at session creation
 * are exercised), node domains with their opset imports, and omitted
 * optional inputs and outputs.
 *
 *   struct qm m;
 *   qm_begin(&m, "com.microsoft", "MatMulIntegerToFloat", 1);
 *   qm_in(&m, TOLK_UINT8, 2, (int64_t[]){2, 3}, a);      // fed at run time
 *   qm_init(&m, TOLK_INT8, 2, (int64_t[]){3, 4}, b);     // an initializer
 *   qm_none(&m);                                          // omitted input
 *   qm_attr_int(&m, "num_heads", 2);
 *   qm_outs(&m, "1001");     // outputs 0 and 3 wanted, 1 and 2 omitted
 *   tolk_status st = qm_run(&m, 1, &err);  // m.out[i] for wanted outputs
 *   qm_end(&m);
 *
 * Test code: allocation failure aborts.
 */
#ifndef TOLK_TESTS_QMODEL_H
#define TOLK_TESTS_QMODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_pbw.h"
#include "tolk.h"

#define QM_MAX 16

struct qm {
  const char *domain, *op;
  int opset;
  struct pbw node, graph;
  int n_in;
  char names[QM_MAX][16];
  tolk_tensor *in[QM_MAX];
  const char *in_names[QM_MAX];
  int n_fed;
  char outs[QM_MAX + 1]; /* '1' wanted, '0' omitted */
  tolk_tensor *out[QM_MAX];
};

static inline void qm_begin(struct qm *m, const char *domain, const char *op, int opset) {
  memset(m, 0, sizeof *m);
  m->domain = domain;
  m->op = op;
  m->opset = opset;
  m->outs[0] = '1';
}

static inline int64_t qm_numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= dims[k];
  return n;
}

static inline const char *qm_next_name(struct qm *m) {
  int i = m->n_in++;
  snprintf(m->names[i], sizeof m->names[i], "i%d", i);
  pbw_str(&m->node, 1, m->names[i]);
  return m->names[i];
}

/* A graph input of the given dtype and shape, fed with `data` at run time. */
static inline void qm_in(struct qm *m, tolk_dtype dt, int rank, const int64_t *dims, const void *data) {
  const char *name = qm_next_name(m);
  tolk_error err = {0};
  size_t bytes = (size_t)qm_numel(rank, dims) * tolk_dtype_size(dt);
  if (tolk_tensor_create(dt, rank, dims, data, bytes, &m->in[m->n_fed], &err) != TOLK_OK) abort();
  m->in_names[m->n_fed++] = name;
  pbw_value_info(&m->graph, 11, name, dt, rank, dims); /* graph input */
}

/* An initializer: a constant the session sees at creation. */
static inline void qm_init(struct qm *m, tolk_dtype dt, int rank, const int64_t *dims,
                    const void *data) {
  const char *name = qm_next_name(m);
  size_t bytes = (size_t)qm_numel(rank, dims) * tolk_dtype_size(dt);
  pbw_tensor(&m->graph, 5, name, dt, rank, dims, NULL, data, bytes);
}

/* An omitted optional input. */
static inline void qm_none(struct qm *m) {
  pbw_str(&m->node, 1, "");
  m->n_in++;
}

static inline void qm_attr_begin(struct pbw *a, const char *name, int type) {
  memset(a, 0, sizeof *a);
  pbw_str(a, 1, name);
  pbw_int(a, 20, type);
}

static inline void qm_attr_int(struct qm *m, const char *name, int64_t v) {
  struct pbw a;
  qm_attr_begin(&a, name, 2);
  pbw_int(&a, 3, v);
  pbw_msg(&m->node, 5, &a);
}

static inline void qm_attr_float(struct qm *m, const char *name, float v) {
  struct pbw a;
  qm_attr_begin(&a, name, 1);
  pbw_key(&a, 2, 5);
  pbw_raw(&a, &v, 4);
  pbw_msg(&m->node, 5, &a);
}

static inline void qm_attr_str(struct qm *m, const char *name, const char *s) {
  struct pbw a;
  qm_attr_begin(&a, name, 3);
  pbw_str(&a, 4, s);
  pbw_msg(&m->node, 5, &a);
}

static inline void qm_attr_ints(struct qm *m, const char *name, int n, const int64_t *v) {
  struct pbw a, packed = {0};
  qm_attr_begin(&a, name, 7);
  for (int k = 0; k < n; k++) pbw_varint(&packed, (uint64_t)v[k]);
  pbw_msg(&a, 8, &packed);
  pbw_msg(&m->node, 5, &a);
}

/* Which outputs the node has: one character per output, '1' wanted. */
static inline void qm_outs(struct qm *m, const char *mask) {
  snprintf(m->outs, sizeof m->outs, "%s", mask);
}

/* Builds the model, runs it with `threads` intra-op threads and leaves the
 * wanted outputs in m->out[i] (i = the output's index on the node). */
static inline tolk_status qm_run(struct qm *m, int threads, tolk_error *err) {
  struct pbw node = {0}, graph = {0}, model = {0};
  char onames[QM_MAX][16];
  const char *want[QM_MAX];
  int idx[QM_MAX], n_want = 0, n_out = (int)strlen(m->outs);
  pbw_raw(&node, m->node.p, m->node.n);
  pbw_raw(&graph, m->graph.p, m->graph.n);
  for (int i = 0; i < n_out; i++) {
    snprintf(onames[i], sizeof onames[i], "o%d", i);
    bool w = m->outs[i] == '1';
    pbw_str(&node, 2, w ? onames[i] : "");
    if (w) want[n_want] = onames[i], idx[n_want++] = i;
  }
  pbw_str(&node, 4, m->op);
  if (m->domain[0]) pbw_str(&node, 7, m->domain);
  pbw_msg(&graph, 1, &node);
  pbw_str(&graph, 2, "g");
  for (int i = 0; i < n_want; i++) {
    struct pbw vi = {0};
    pbw_str(&vi, 1, want[i]);
    pbw_msg(&graph, 12, &vi);
  }
  pbw_int(&model, 1, 8);
  struct pbw op1 = {0};
  pbw_str(&op1, 1, "");
  pbw_int(&op1, 2, m->domain[0] ? 17 : m->opset);
  pbw_msg(&model, 8, &op1);
  if (m->domain[0]) {
    struct pbw op2 = {0};
    pbw_str(&op2, 1, m->domain);
    pbw_int(&op2, 2, m->opset);
    pbw_msg(&model, 8, &op2);
  }
  pbw_msg(&model, 7, &graph);
  tolk_session *s = NULL;
  tolk_session_params p = tolk_session_default_params();
  p.threads = threads;
  tolk_tensor *outs[QM_MAX] = {0};
  tolk_status st = tolk_session_create_from_buffer(model.p, model.n, NULL, p, &s, err);
  if (st == TOLK_OK) {
    st = tolk_session_run(s, (size_t)m->n_fed, m->in_names, (const tolk_tensor *const *)m->in,
                          (size_t)n_want, want, outs, NULL, err);
    tolk_session_free(s);
  }
  for (int i = 0; i < n_want; i++) {
    tolk_tensor_free(m->out[idx[i]]);
    m->out[idx[i]] = outs[i];
  }
  free(model.p);
  return st;
}

static inline void qm_end(struct qm *m) {
  for (int i = 0; i < QM_MAX; i++) {
    tolk_tensor_free(m->in[i]);
    tolk_tensor_free(m->out[i]);
  }
  free(m->node.p);
  free(m->graph.p);
  memset(m, 0, sizeof *m);
}

#endif /* TOLK_TESTS_QMODEL_H */
