/*
 * int8_graph.h — what the int8 MatMul tests (test_ops_matmul_int8,
 * test_exec_quant_rows) build and run alike, on exec_graph.h: an int8
 * weight stored as ORT's quantize_dynamic stores one (NAME_quantized,
 * NAME_scale, NAME_zero_point), a session over the graph with the options
 * the tests vary, and a run whose failure fails the test.
 */
#ifndef TOLK_TEST_INT8_GRAPH_H
#define TOLK_TEST_INT8_GRAPH_H

#include <stdio.h>

#include "exec_graph.h"
#include "testutil.h"

/* The initializers NAME_quantized (int8, rank × dims, data), NAME_scale
 * (n_scale floats: a scalar when 1, per tensor; else a vector, one per
 * column) and NAME_zero_point (an int8 scalar 0: symmetric, as ORT
 * quantizes weights). */
static inline void i8_weight(struct ir_model *m, struct ir_graph *g, const char *name, int rank,
                             const int64_t *dims, const int8_t *data, int64_t n_scale,
                             const float *scale) {
  char full[128];
  size_t numel = 1;
  for (int d = 0; d < rank; d++) numel *= (size_t)dims[d];
  snprintf(full, sizeof full, "%s_quantized", name);
  tb_init(m, g, full, TOLK_INT8, rank, dims, data, numel);
  snprintf(full, sizeof full, "%s_scale", name);
  tb_init(m, g, full, TOLK_FLOAT, n_scale == 1 ? 0 : 1, &n_scale, scale, (size_t)n_scale * sizeof *scale);
  const int8_t zp = 0;
  snprintf(full, sizeof full, "%s_zero_point", name);
  tb_init(m, g, full, TOLK_INT8, 0, NULL, &zp, 1);
}

/* A model with one graph, "main", whose input "x" is float activations of
 * width k: [b, s, k] (rank 3) or [b, k] (rank 2), b and s symbolic. */
static inline struct ir_model *i8_model_x(int rank, int64_t k, struct ir_graph **g) {
  struct ir_model *m = tb_model();
  *g = tb_graph(m, NULL, "main");
  static const char *const sym[] = {"b", "s", NULL};
  int64_t dims[3] = {-1, -1, k};
  if (rank == 2) dims[1] = k;
  tb_input(m, *g, "x", TOLK_FLOAT, rank, dims, sym);
  return m;
}

/* The session options the int8 tests set; the others are the defaults. */
struct i8_opts {
  int threads, int8_lm_head, quant_rows;
};

/* A session over m (exec_session_create_ir, no test kernels), or NULL
 * after a failed check. Freed with tolk_session_free. */
static inline tolk_session *i8_session(const struct ir_model *m, struct i8_opts o) {
  tolk_session_params p = tolk_session_default_params();
  p.threads = o.threads;
  p.int8_lm_head = o.int8_lm_head;
  p.quant_rows = o.quant_rows;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK_MSG(exec_session_create_ir(m, &p, NULL, &s, &err) == TOLK_OK, "%s", err.message);
  return s;
}

/* Runs s on n_in named inputs, which it frees, into out[0 .. n_out-1]
 * (NULL entries: the session allocates them). */
static inline void i8_run(tolk_session *s, size_t n_in, const char *const *names, tolk_tensor **in,
                          size_t n_out, tolk_tensor **out) {
  tolk_error err;
  CHECK_MSG(tolk_session_run(s, n_in, names, (const tolk_tensor *const *)in, n_out, NULL, out, NULL,
                             &err) == TOLK_OK,
            "%s", err.message);
  for (size_t i = 0; i < n_in; i++) tolk_tensor_free(in[i]);
}

#endif /* TOLK_TEST_INT8_GRAPH_H */
