/*
 * fuse_bias.c — at session creation (any opt level but none), a MatMul whose
 * one reader is the Add of a constant bias vector,
 *
 *   y = Add(MatMul(x, W), bias)      (either order of the Add's inputs)
 *
 * — every Linear layer of an exported fp32 transformer, and the LM head
 * with its final_logits_bias — runs as one node (tolk_matmul_bias_def, or
 * its bfloat16 and int8-head kin when the session gave the MatMul those
 * kernels): the GEMM adds the bias to each tile of C once its last k block
 * is in (kern_sgemm_packed_bias, the int8 epilogue), instead of a second
 * node reading and writing the whole product again — for the head of a
 * 64-row beam step, 16.6 MB each way. The product is rounded first and the
 * bias added after, as the two nodes do, so outputs are bit for bit the
 * graph's (tests/test_exec_fuse_bias.c).
 *
 * Taken only when the MatMul's result is no graph output and has that one
 * reader, and the bias is a float constant [n] or [1, .., 1, n] with n > 1
 * (a scalar bias is left to the Add; the output takes the rank the Add
 * would give it); the fused node keeps the
 * MatMul's node (its name in errors, its packed W) and runs where the Add
 * did.
 */
#include <string.h>

#include "exec.h"

/* The fused def for the MatMul kernel the session chose, or NULL. */
static const struct op_def *fused_def(const struct op_def *d) {
  if (d == &tolk_matmul_bf16_def) return &tolk_matmul_bf16_bias_def;
  if (d == &tolk_matmul_bf16dot_def) return &tolk_matmul_bf16dot_bias_def;
  if (d == &tolk_matmul_int8_def) return &tolk_matmul_int8_bias_def;
  if (d && d->domain && !d->domain[0] && !strcmp(d->op_type, "MatMul")) return &tolk_matmul_bias_def;
  return NULL;
}

/* Node k's MatMul and its bias Add: the Add's index and the bias input. */
static int64_t bias_add(const struct xgraph *xg, uint32_t k, struct xref *bias) {
  const struct xnode *x = &xg->nodes[k];
  if (!exec_is_op(x, "MatMul") || x->n_in != 2 || x->n_out != 1 || !fused_def(x->def)) return -1;
  uint32_t in;
  int64_t a = exec_sole_reader(xg, x->out[0], x->node->outputs[0], &in);
  if (a < 0) return -1;
  const struct xnode *add = &xg->nodes[a];
  if (!exec_is_op(add, "Add") || add->n_in != 2 || add->n_out != 1 || add->out[0] < 0) return -1;
  const struct ir_tensor *t = exec_const_tensor(add->node->inputs[1 - in]);
  if (!t || t->dtype != TOLK_FLOAT || t->rank < 1 || t->rank > IR_MAX_RANK || t->dims[t->rank - 1] < 2 ||
      t->numel != t->dims[t->rank - 1])
    return -1;
  *bias = add->in[1 - in];
  return a;
}

int exec_fuse_bias(tolk_session *s, struct xgraph *xg) {
  bool *drop = NULL;
  int n = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    struct xref bias;
    int64_t a = bias_add(xg, k, &bias);
    if (a < 0) continue;
    if (!drop && !(drop = exec_node_marks(s, xg))) return -1;
    struct xnode x = xg->nodes[k];
    struct xref *in = tolk_arena_alloc(&s->arena, 3 * sizeof *in);
    int32_t *out = tolk_arena_alloc(&s->arena, sizeof *out);
    if (!in || !out) return -1;
    in[0] = x.in[0], in[1] = x.in[1], in[2] = bias;
    *out = xg->nodes[a].out[0];
    x.in = in, x.n_in = 3, x.out = out, x.def = fused_def(x.def);
    if (x.n_in > xg->max_in) xg->max_in = x.n_in;
    drop[k] = true;
    xg->nodes[a] = x;
    n++;
  }
  if (n) exec_drop_nodes(xg, drop);
  return n;
}
