/*
 * match.c — what the session's graph rewrites (kv.c: the in-place cache,
 * quant_rows.c: per-row quantization) ask of a compiled graph to recognise
 * the patterns exporters write: who reads and who writes a value, what op a
 * node is, whether a value is a constant.
 */
#include <string.h>

#include "exec.h"

int exec_readers(const struct xgraph *xg, int32_t slot, struct exec_reader *out, int max) {
  int n = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    const struct xnode *xn = &xg->nodes[k];
    for (uint32_t i = 0; i < xn->n_in; i++)
      if (xn->in[i].frame == (int32_t)xg->id && xn->in[i].slot == slot) {
        if (n == max) return -1;
        out[n].node = k;
        out[n++].input = i;
      }
    for (uint32_t j = 0; j < xn->n_subs; j++)
      for (uint32_t o = 0; o < xn->subs[j]->n_outer; o++) {
        const struct ir_value *v = xn->subs[j]->outer[o];
        if (v->graph == xg->g && v->index == slot) return -1;
      }
  }
  return n;
}

bool exec_is_op(const struct xnode *xn, const char *op) {
  const char *dom = xn->node->domain ? xn->node->domain : "";
  return xn->def && !dom[0] && !strcmp(xn->node->op_type, op);
}

bool exec_is_graph_output(const struct ir_value *v) {
  const struct ir_graph *g = v->graph;
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return true;
  return false;
}

int64_t exec_producer(const struct xgraph *xg, int32_t slot) {
  for (uint32_t k = 0; k < xg->n_nodes; k++)
    for (uint32_t o = 0; o < xg->nodes[k].n_out; o++)
      if (xg->nodes[k].out[o] == slot) return k;
  return -1;
}

int exec_const_rank(const struct ir_value *v) {
  if (!v) return -1;
  if (v->init) return v->init->rank;
  if (v->producer && !strcmp(v->producer->op_type, "Constant")) {
    const struct ir_attr *a = ir_node_attr(v->producer, "value");
    if (a && a->type == IR_ATTR_TENSOR) return a->t->rank;
    if (ir_node_attr(v->producer, "value_float")) return 0;
  }
  return -1;
}
