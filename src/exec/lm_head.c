/*
 * lm_head.c — the int8 output projection (tolk_session_params.int8_lm_head,
 * tolk.h): at session creation, a MatMul whose result is a graph output,
 * directly or through one Add (a translation model's logits: hidden · Eᵀ +
 * final_logits_bias), runs tolk_matmul_int8_def instead. That kernel
 * quantizes a constant B at prepare and multiplies in int8; for a B that is
 * not constant it runs as MatMul, so the match needs no more than the
 * graph's shape here. Any other MatMul keeps fp32: the heads are where the
 * arithmetic is (4.3 of the 7 GFLOP of a 64-row step of the OPUS models),
 * and a hidden layer's error would compound through the layers above it.
 */
#include "exec.h"

bool exec_head_output(const struct xgraph *xg, int32_t slot, const struct ir_value *v,
                      const struct xnode **add) {
  *add = NULL;
  if (exec_is_graph_output(v)) return true;
  struct exec_reader r[2];
  if (exec_readers(xg, slot, r, 2) != 1) return false;
  const struct xnode *a = &xg->nodes[r[0].node];
  if (!exec_is_op(a, "Add") || a->n_out != 1 || !a->node->outputs[0] ||
      !exec_is_graph_output(a->node->outputs[0]))
    return false;
  *add = a;
  return true;
}

void exec_int8_head_rewrite(struct xgraph *xg) {
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    struct xnode *x = &xg->nodes[k];
    const struct xnode *add;
    if (exec_is_op(x, "MatMul") && x->n_out == 1 && x->out[0] >= 0 &&
        exec_head_output(xg, x->out[0], x->node->outputs[0], &add))
      x->def = &tolk_matmul_int8_def;
  }
}
