/*
 * test_exec_fuse_mmi.c — the MatMulInteger chains a session runs as one
 * node (src/exec/fuse_mmi.c, tolk_mmi_scaled_def):
 *
 *   y, ys, yz = DynamicQuantizeLinear(x);  q = MatMulInteger(y, W, yz, Wz)
 *   out = Mul(Cast(q), Mul(ys, Wscale)) or Mul(Cast(q), ys);  [Add bias]
 *
 * Each form (W_scale per tensor or per column, the scale Mul's and the bias
 * Add's inputs in either order, no bias, no W_scale) gives bit for bit the
 * outputs of the graph as written (opt level none), per tensor and with
 * quant_rows, on 2-D and 3-D x, and runs fewer nodes: the chain's count
 * less one. A chain whose Cast is also a graph output stays as written. In
 * a fused session an intermediate of the chain is refused by name, with a
 * message; at opt level none it is returned.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "int8_graph.h"

enum { K = 40, N = 36 };

/* How the chain is written. */
struct form {
  bool per_col;     /* W_scale one per column (else one value) */
  bool no_wscale;   /* Mul(Cast(q), ys): no scale Mul */
  bool swap;        /* the scale Mul as Mul(Wscale, ys), the output Mul as Mul(s, qf) */
  int bias;         /* 0 none, 1 Add(bias, out), 2 Add(out, bias) */
  bool cast_output; /* the Cast's result is a graph output too: not fused */
  bool shared_bias; /* the bias through an Identity, as exporters share equal initializers */
};

static struct ir_model *chain_model(const struct form *f, int rank) {
  struct ir_graph *g;
  struct ir_model *m = i8_model_x(rank, K, &g);
  int8_t w[K * N];
  float ws[N], bias[N];
  for (int i = 0; i < K * N; i++) w[i] = (int8_t)(tu_below(255) - 127);
  for (int i = 0; i < N; i++) ws[i] = (float)(0.001 + 0.01 * (tu_unit() + 1)), bias[i] = (float)(tu_unit() - 0.5);
  i8_weight(m, g, "W", 2, (int64_t[]){K, N}, w, f->per_col ? N : 1, ws);
  tb_init(m, g, "bias", TOLK_FLOAT, 1, (int64_t[]){N}, bias, sizeof bias);
  tb_node(m, g, "DynamicQuantizeLinear", "", "dql", "x", "y,ys,yz");
  tb_node(m, g, "MatMulInteger", "", "mmi", "y,W_quantized,yz,W_zero_point", "q");
  struct ir_node *cast = tb_node(m, g, "Cast", "", "cast", "q", "qf");
  tb_attr_int(cast, "to", TOLK_FLOAT);
  const char *deq_out = f->bias ? "deq" : "out";
  if (f->no_wscale)
    tb_node(m, g, "Mul", "", "dequant", f->swap ? "ys,qf" : "qf,ys", deq_out);
  else {
    tb_node(m, g, "Mul", "", "scales", f->swap ? "W_scale,ys" : "ys,W_scale", "s");
    tb_node(m, g, "Mul", "", "dequant", f->swap ? "s,qf" : "qf,s", deq_out);
  }
  if (f->shared_bias) tb_node(m, g, "Identity", "", "share", "bias", "bias_shared");
  const char *b = f->shared_bias ? "bias_shared" : "bias";
  char add_in[32];
  snprintf(add_in, sizeof add_in, f->bias == 1 ? "%s,deq" : "deq,%s", b);
  if (f->bias) tb_node(m, g, "Add", "", "bias_add", add_in, "out");
  tb_output(g, "out");
  if (f->cast_output) tb_output(g, "qf");
  return m;
}

static tolk_session *session(const struct ir_model *m, bool as_written, bool rows) {
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  p.quant_rows = rows;
  if (as_written) p.opt_level = TOLK_OPT_NONE;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK_MSG(exec_session_create_ir(m, &p, NULL, &s, &err) == TOLK_OK, "%s", err.message);
  return s;
}

/* Runs s on x (rows × K, or 1 × rows × K for rank 3) into *out (output
 * "out"); the status, with the message in err. */
static tolk_status run(tolk_session *s, int rank, int64_t rows, const float *x, const char *name,
                       tolk_tensor **out, uint32_t *nodes, tolk_error *err) {
  int64_t dims[3] = {rows, K, 0};
  if (rank == 3) dims[0] = 1, dims[1] = rows, dims[2] = K;
  tolk_tensor *in = tb_tensor(rank, dims, x);
  const char *in_names[1] = {"x"}, *out_names[1] = {name};
  tolk_run_stats st;
  *out = NULL;
  tolk_status rc = tolk_session_run(s, 1, in_names, (const tolk_tensor *const *)&in, 1, out_names, out,
                                    &st, err);
  if (nodes) *nodes = st.nodes_run;
  tolk_tensor_free(in);
  return rc;
}

static void check_form(const struct form *f, int rank, bool rows) {
  struct ir_model *m = chain_model(f, rank);
  tolk_session *ref = session(m, true, rows), *fused = session(m, false, rows);
  enum { R = 13 };
  float x[R * K];
  for (int r = 0; r < R; r++)
    for (int i = 0; i < K; i++) x[r * K + i] = (float)((tu_unit() - 0.3) * (r + 1) * (r % 2 ? 3 : 0.2));
  tolk_tensor *a, *b;
  uint32_t na = 0, nb = 0;
  tolk_error err;
  CHECK_MSG(run(ref, rank, R, x, "out", &a, &na, &err) == TOLK_OK, "%s", err.message);
  CHECK_MSG(run(fused, rank, R, x, "out", &b, &nb, &err) == TOLK_OK, "%s", err.message);
  CHECK(a && b && tolk_tensor_nbytes(a) == R * N * sizeof(float) && tolk_tensor_nbytes(b) == tolk_tensor_nbytes(a));
  CHECK_MSG(a && b && !memcmp(tolk_tensor_data(a), tolk_tensor_data(b), tolk_tensor_nbytes(a)),
            "form per_col=%d no_wscale=%d swap=%d bias=%d cast_output=%d, rank %d, rows %d: outputs differ",
            f->per_col, f->no_wscale, f->swap, f->bias, f->cast_output, rank, rows);
  /* The chain MatMulInteger, Cast, [scale Mul,] Mul, [Add] becomes one node;
   * a shared bias's Identity is folded. */
  uint32_t chain = 3 + !f->no_wscale + (f->bias != 0);
  uint32_t want = (f->cast_output ? na : na - (chain - 1)) - f->shared_bias;
  CHECK_MSG(nb == want, "form bias=%d cast_output=%d: %u nodes run, expected %u (as written: %u)", f->bias,
            f->cast_output, nb, want, na);
  tolk_tensor_free(a), tolk_tensor_free(b);
  if (!f->cast_output) {
    /* "qf" lives inside the fused node: refused by name, computed as written. */
    CHECK(run(fused, rank, R, x, "qf", &b, NULL, &err) == TOLK_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.message, "'qf' is not computed") && strstr(err.message, "MatMulInteger"), "%s",
              err.message);
    CHECK_MSG(run(ref, rank, R, x, "qf", &a, NULL, &err) == TOLK_OK, "%s", err.message);
    tolk_tensor_free(a);
  }
  tolk_session_free(ref);
  tolk_session_free(fused);
  tb_free(m);
}

int main(void) {
  tu_seed(0xf05ed3317ull);
  static const struct form forms[] = {
      {.bias = 1},
      {.per_col = true, .bias = 2},
      {.per_col = true, .swap = true, .bias = 1},
      {.per_col = true},
      {.no_wscale = true, .bias = 2},
      {.no_wscale = true, .swap = true},
      {.per_col = true, .bias = 1, .cast_output = true},
      {.per_col = true, .bias = 2, .shared_bias = true},
  };
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
    for (int rank = 2; rank <= 3; rank++)
      for (int rows = 0; rows < 2; rows++) check_form(&forms[i], rank, rows);
  return tu_finish("test_exec_fuse_mmi");
}
