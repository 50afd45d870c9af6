/*
 * quant_rows.c — per-row dynamic quantization (tolk_session_params.quant_rows,
 * tolk.h): at session creation, the DynamicQuantizeLinear nodes whose outputs
 * feed only the chains ONNX Runtime's quantize_dynamic writes,
 *
 *   y, y_scale, y_zp = DynamicQuantizeLinear(x)
 *   q = MatMulInteger(y, W, y_zp, W_zp)          (one or more)
 *   out = Mul(Cast(q), Mul(y_scale, W_scale))    (or Mul(Cast(q), y_scale))
 *
 * run tolk_dql_rows_def instead: a scale and zero point per row of x, shaped
 * [..., 1]. That is a valid per-row zero point for MatMulInteger, and the
 * Muls broadcast the per-row scale exactly where they broadcast the scalar,
 * so every other node runs as written and each row's output is what it
 * would be if that row were quantized alone. The check is strict — every
 * reader of every output must be part of such a chain, with W_scale a
 * constant of rank ≤ 1 — because a per-row scale anywhere else would change
 * shapes the graph relies on; nodes that do not fit stay per tensor.
 */
#include <string.h>

#include "exec.h"

enum { MAX_READERS = 16 };

/* Whether node k is in mm[0..n). */
static bool among(uint32_t k, const uint32_t *mm, int n) {
  for (int i = 0; i < n; i++)
    if (mm[i] == k) return true;
  return false;
}

/* Whether input `i` of node k is Cast(output 0 of one of mm). */
static bool cast_of_product(const struct xgraph *xg, uint32_t k, uint32_t i, const uint32_t *mm,
                            int n) {
  const struct xnode *x = &xg->nodes[k];
  if (x->in[i].frame != (int32_t)xg->id) return false;
  int64_t c = exec_producer(xg, x->in[i].slot);
  if (c < 0 || !exec_is_op(&xg->nodes[c], "Cast") || xg->nodes[c].n_in != 1) return false;
  int64_t q = exec_producer(xg, xg->nodes[c].in[0].slot);
  return q >= 0 && among((uint32_t)q, mm, n) && xg->nodes[q].out[0] == xg->nodes[c].in[0].slot;
}

/* Every reader of `slot` is Mul(Cast(q), slot) with q among mm. */
static bool read_by_output_muls(const struct xgraph *xg, int32_t slot, const uint32_t *mm, int n) {
  struct exec_reader r[MAX_READERS];
  int nr = exec_readers(xg, slot, r, MAX_READERS);
  if (nr < 1) return false;
  for (int i = 0; i < nr; i++) {
    const struct xnode *x = &xg->nodes[r[i].node];
    if (!exec_is_op(x, "Mul") || x->n_in != 2 || !cast_of_product(xg, r[i].node, 1 - r[i].input, mm, n))
      return false;
  }
  return true;
}

/* The scale's readers: output Muls, or Mul(y_scale, W_scale) whose result
 * only output Muls read. */
static bool scale_fits(const struct xgraph *xg, int32_t slot, const uint32_t *mm, int n) {
  struct exec_reader r[MAX_READERS];
  int nr = exec_readers(xg, slot, r, MAX_READERS);
  if (nr < 1) return false;
  for (int i = 0; i < nr; i++) {
    const struct xnode *x = &xg->nodes[r[i].node];
    if (!exec_is_op(x, "Mul") || x->n_in != 2) return false;
    uint32_t other = 1 - r[i].input;
    int rank = exec_const_rank(x->node->inputs[other]);
    if (rank >= 0 && rank <= 1) {
      if (x->out[0] < 0 || exec_is_graph_output(x->node->outputs[0]) ||
          !read_by_output_muls(xg, x->out[0], mm, n))
        return false;
    } else if (!cast_of_product(xg, r[i].node, other, mm, n)) {
      return false;
    }
  }
  return true;
}

/* Node k (a DynamicQuantizeLinear) fits when its codes and zero point go
 * only to MatMulInteger's A and a_zero_point, and its scale only into those
 * products' dequantizing Muls. */
static bool fits(const struct xgraph *xg, uint32_t k) {
  const struct xnode *d = &xg->nodes[k];
  if (d->n_out != 3 || d->out[0] < 0 || d->out[1] < 0 || d->out[2] < 0) return false;
  for (int o = 0; o < 3; o++)
    if (exec_is_graph_output(d->node->outputs[o])) return false;
  struct exec_reader r[MAX_READERS];
  uint32_t mm[MAX_READERS];
  int n = exec_readers(xg, d->out[0], r, MAX_READERS);
  if (n < 1) return false;
  for (int i = 0; i < n; i++) {
    const struct xnode *q = &xg->nodes[r[i].node];
    if (!exec_is_op(q, "MatMulInteger") || r[i].input != 0 || q->n_in < 3 ||
        q->in[2].frame != (int32_t)xg->id || q->in[2].slot != d->out[2])
      return false;
    mm[i] = r[i].node;
  }
  int nz = exec_readers(xg, d->out[2], r, MAX_READERS);
  if (nz < 1) return false;
  for (int i = 0; i < nz; i++)
    if (r[i].input != 2 || !among(r[i].node, mm, n)) return false;
  return scale_fits(xg, d->out[1], mm, n);
}

void exec_quant_rows_rewrite(struct xgraph *xg) {
  for (uint32_t k = 0; k < xg->n_nodes; k++)
    if (exec_is_op(&xg->nodes[k], "DynamicQuantizeLinear") && fits(xg, k))
      xg->nodes[k].def = &tolk_dql_rows_def;
}
