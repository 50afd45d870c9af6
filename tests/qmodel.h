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

#include "tolk.h"

struct qm_buf {
  uint8_t *p;
  size_t n, cap;
};

static inline void qm_put(struct qm_buf *w, const void *d, size_t n) {
  if (w->n + n > w->cap) {
    size_t nc = w->cap ? w->cap * 2 : 256;
    while (nc < w->n + n) nc *= 2;
    uint8_t *np = realloc(w->p, nc);
    if (!np) abort();
    w->p = np;
    w->cap = nc;
  }
  if (n) memcpy(w->p + w->n, d, n);
  w->n += n;
}

static inline void qm_varint(struct qm_buf *w, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) b[n] |= 0x80;
    n++;
  } while (v);
  qm_put(w, b, n);
}

static inline void qm_tag(struct qm_buf *w, int field, int wt) {
  qm_varint(w, (uint64_t)(field << 3 | wt));
}
static inline void qm_bytes(struct qm_buf *w, int field, const void *d, size_t n) {
  qm_tag(w, field, 2);
  qm_varint(w, n);
  qm_put(w, d, n);
}
static inline void qm_str(struct qm_buf *w, int field, const char *s) { qm_bytes(w, field, s, strlen(s)); }
static inline void qm_sub(struct qm_buf *w, int field, struct qm_buf *sub) {
  qm_bytes(w, field, sub->p, sub->n);
  free(sub->p);
  memset(sub, 0, sizeof *sub);
}
static inline void qm_int(struct qm_buf *w, int field, int64_t v) {
  qm_tag(w, field, 0);
  qm_varint(w, (uint64_t)v);
}

#define QM_MAX 16

struct qm {
  const char *domain, *op;
  int opset;
  struct qm_buf node, graph;
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

/* TensorProto{dims, data_type, name, raw_data}. */
static inline void qm_tensor_proto(struct qm_buf *t, const char *name, tolk_dtype dt, int rank,
                            const int64_t *dims, const void *data) {
  for (int k = 0; k < rank; k++) qm_int(t, 1, dims[k]);
  qm_int(t, 2, dt);
  if (name) qm_str(t, 8, name);
  size_t bytes = (size_t)qm_numel(rank, dims) * tolk_dtype_size(dt);
  qm_bytes(t, 9, data, bytes);
}

static inline const char *qm_next_name(struct qm *m) {
  int i = m->n_in++;
  snprintf(m->names[i], sizeof m->names[i], "i%d", i);
  qm_str(&m->node, 1, m->names[i]);
  return m->names[i];
}

/* A graph input of the given dtype and shape, fed with `data` at run time. */
static inline void qm_in(struct qm *m, tolk_dtype dt, int rank, const int64_t *dims, const void *data) {
  const char *name = qm_next_name(m);
  tolk_error err = {0};
  size_t bytes = (size_t)qm_numel(rank, dims) * tolk_dtype_size(dt);
  if (tolk_tensor_create(dt, rank, dims, data, bytes, &m->in[m->n_fed], &err) != TOLK_OK) abort();
  m->in_names[m->n_fed++] = name;
  struct qm_buf shape = {0}, tt = {0}, type = {0}, vi = {0};
  for (int k = 0; k < rank; k++) {
    struct qm_buf dim = {0};
    qm_int(&dim, 1, dims[k]);
    qm_sub(&shape, 1, &dim);
  }
  qm_int(&tt, 1, dt);
  qm_sub(&tt, 2, &shape);
  qm_sub(&type, 1, &tt);
  qm_str(&vi, 1, name);
  qm_sub(&vi, 2, &type);
  qm_sub(&m->graph, 11, &vi);
}

/* An initializer: a constant the session sees at creation. */
static inline void qm_init(struct qm *m, tolk_dtype dt, int rank, const int64_t *dims,
                    const void *data) {
  const char *name = qm_next_name(m);
  struct qm_buf t = {0};
  qm_tensor_proto(&t, name, dt, rank, dims, data);
  qm_sub(&m->graph, 5, &t);
}

/* An omitted optional input. */
static inline void qm_none(struct qm *m) {
  qm_str(&m->node, 1, "");
  m->n_in++;
}

static inline void qm_attr_begin(struct qm_buf *a, const char *name, int type) {
  memset(a, 0, sizeof *a);
  qm_str(a, 1, name);
  qm_int(a, 20, type);
}

static inline void qm_attr_int(struct qm *m, const char *name, int64_t v) {
  struct qm_buf a;
  qm_attr_begin(&a, name, 2);
  qm_int(&a, 3, v);
  qm_sub(&m->node, 5, &a);
}

static inline void qm_attr_float(struct qm *m, const char *name, float v) {
  struct qm_buf a;
  qm_attr_begin(&a, name, 1);
  qm_tag(&a, 2, 5);
  qm_put(&a, &v, 4);
  qm_sub(&m->node, 5, &a);
}

static inline void qm_attr_str(struct qm *m, const char *name, const char *s) {
  struct qm_buf a;
  qm_attr_begin(&a, name, 3);
  qm_str(&a, 4, s);
  qm_sub(&m->node, 5, &a);
}

static inline void qm_attr_ints(struct qm *m, const char *name, int n, const int64_t *v) {
  struct qm_buf a, packed = {0};
  qm_attr_begin(&a, name, 7);
  for (int k = 0; k < n; k++) qm_varint(&packed, (uint64_t)v[k]);
  qm_sub(&a, 8, &packed);
  qm_sub(&m->node, 5, &a);
}

/* Which outputs the node has: one character per output, '1' wanted. */
static inline void qm_outs(struct qm *m, const char *mask) {
  snprintf(m->outs, sizeof m->outs, "%s", mask);
}

/* Builds the model, runs it with `threads` intra-op threads and leaves the
 * wanted outputs in m->out[i] (i = the output's index on the node). */
static inline tolk_status qm_run(struct qm *m, int threads, tolk_error *err) {
  struct qm_buf node = {0}, graph = {0}, model = {0};
  char onames[QM_MAX][16];
  const char *want[QM_MAX];
  int idx[QM_MAX], n_want = 0, n_out = (int)strlen(m->outs);
  qm_put(&node, m->node.p, m->node.n);
  qm_put(&graph, m->graph.p, m->graph.n);
  for (int i = 0; i < n_out; i++) {
    snprintf(onames[i], sizeof onames[i], "o%d", i);
    bool w = m->outs[i] == '1';
    qm_str(&node, 2, w ? onames[i] : "");
    if (w) want[n_want] = onames[i], idx[n_want++] = i;
  }
  qm_str(&node, 4, m->op);
  if (m->domain[0]) qm_str(&node, 7, m->domain);
  qm_sub(&graph, 1, &node);
  qm_str(&graph, 2, "g");
  for (int i = 0; i < n_want; i++) {
    struct qm_buf vi = {0};
    qm_str(&vi, 1, want[i]);
    qm_sub(&graph, 12, &vi);
  }
  qm_int(&model, 1, 8);
  struct qm_buf op1 = {0};
  qm_str(&op1, 1, "");
  qm_int(&op1, 2, m->domain[0] ? 17 : m->opset);
  qm_sub(&model, 8, &op1);
  if (m->domain[0]) {
    struct qm_buf op2 = {0};
    qm_str(&op2, 1, m->domain);
    qm_int(&op2, 2, m->opset);
    qm_sub(&model, 8, &op2);
  }
  qm_sub(&model, 7, &graph);
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
