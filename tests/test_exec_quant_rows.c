/*
 * test_exec_quant_rows.c — per-row dynamic quantization
 * (tolk_session_params.quant_rows, src/exec/quant_rows.c). On the chain
 * ONNX Runtime's quantize_dynamic writes,
 *
 *   y, ys, yz = DynamicQuantizeLinear(x);  q = MatMulInteger(y, W, yz, Wz)
 *   out = Mul(Cast(q), Mul(ys, Wscale))
 *
 * a session with quant_rows gives every row of x exactly (bit for bit) the
 * output a one-row x gets as written — per row, whatever the other rows
 * hold — for 2-D and 3-D x; without it the graph runs as written (per
 * tensor), which differs on a batch whose rows have different ranges. A
 * DynamicQuantizeLinear whose outputs feed anything else (here a
 * DequantizeLinear) stays per tensor.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "int8_graph.h"

enum { K = 24, N = 20 };

static struct ir_model *chain_model(int rank) {
  struct ir_graph *g;
  struct ir_model *m = i8_model_x(rank, K, &g);
  int8_t w[K * N];
  float ws[N];
  for (int i = 0; i < K * N; i++) w[i] = (int8_t)(tu_below(255) - 127);
  for (int i = 0; i < N; i++) ws[i] = (float)(0.001 + 0.01 * (tu_unit() + 1));
  i8_weight(m, g, "W", 2, (int64_t[]){K, N}, w, N, ws);
  tb_node(m, g, "DynamicQuantizeLinear", "", "dql", "x", "y,ys,yz");
  tb_node(m, g, "MatMulInteger", "", "mmi", "y,W_quantized,yz,W_zero_point", "q");
  struct ir_node *cast = tb_node(m, g, "Cast", "", "cast", "q", "qf");
  tb_attr_int(cast, "to", TOLK_FLOAT);
  tb_node(m, g, "Mul", "", "scales", "ys,W_scale", "s");
  tb_node(m, g, "Mul", "", "dequant", "qf,s", "out");
  /* The same x quantized again for a DequantizeLinear: not the chain. */
  tb_node(m, g, "DynamicQuantizeLinear", "", "dql2", "x", "y2,ys2,yz2");
  tb_node(m, g, "DequantizeLinear", "", "dq", "y2,ys2,yz2", "back");
  tb_output(g, "out");
  tb_output(g, "back");
  return m;
}

static tolk_session *session(const struct ir_model *m, int quant_rows) {
  return i8_session(m, (struct i8_opts){.threads = 1, .quant_rows = quant_rows});
}

/* Runs s on x (rank 2: rows × K; rank 3: 1 × rows × K or rows × 1 × K). */
static void run(tolk_session *s, int rank, int64_t rows, const float *x, tolk_tensor **out) {
  int64_t dims[3] = {rows, K, 0};
  if (rank == 3) dims[0] = 1, dims[1] = rows, dims[2] = K;
  tolk_tensor *in = tb_tensor(rank, dims, x);
  const char *names[1] = {"x"};
  i8_run(s, 1, names, &in, 2, out);
}

static void check_rank(int rank) {
  struct ir_model *m = chain_model(rank);
  tolk_session *as_written = session(m, 0), *rows = session(m, 1);
  enum { R = 7 };
  float x[R * K];
  for (int r = 0; r < R; r++)
    for (int i = 0; i < K; i++) x[r * K + i] = (float)(tu_unit() * (r + 1) * (r % 2 ? 3 : 0.2) + (r == 3 ? 5 : 0));
  tolk_tensor *batch[2] = {0}, *plain[2] = {0};
  run(rows, rank, R, x, batch);
  run(as_written, rank, R, x, plain);
  const float *b = tolk_tensor_data(batch[0]);
  int same_rows = 0;
  for (int r = 0; r < R; r++) {
    tolk_tensor *one[2] = {0};
    run(as_written, rank, 1, x + r * K, one);
    same_rows += !memcmp(tolk_tensor_data(one[0]), b + r * N, N * sizeof(float));
    tolk_tensor_free(one[0]);
    tolk_tensor_free(one[1]);
  }
  CHECK_MSG(same_rows == R, "rank %d: %d of %d rows match the row quantized alone", rank, same_rows, R);
  CHECK_MSG(memcmp(tolk_tensor_data(plain[0]), b, R * N * sizeof(float)) != 0,
            "rank %d: per tensor and per row gave the same batch (the test would prove nothing)", rank);
  CHECK_MSG(tolk_tensor_nbytes(batch[1]) == tolk_tensor_nbytes(plain[1]) &&
                !memcmp(tolk_tensor_data(batch[1]), tolk_tensor_data(plain[1]), tolk_tensor_nbytes(plain[1])),
            "rank %d: the DequantizeLinear path must stay per tensor", rank);
  for (int i = 0; i < 2; i++) tolk_tensor_free(batch[i]), tolk_tensor_free(plain[i]);
  tolk_session_free(as_written);
  tolk_session_free(rows);
  tb_free(m);
}

int main(void) {
  tu_seed(0x51d3a7c01ull);
  check_rank(2);
  check_rank(3);
  return tu_finish("test_exec_quant_rows");
}
