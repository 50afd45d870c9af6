/*
 * match.c — what the session's graph rewrites (kv.c: the in-place cache,
 * quant_rows.c: per-row quantization) ask of a compiled graph to recognise
 * the patterns exporters write: who reads and who writes a value, what op a
 * node is, whether a value is a constant (and the fusions fuse_mmi.c and
 * fuse_bias.c).
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

bool *exec_node_marks(tolk_session *s, const struct xgraph *xg) {
  bool *m = tolk_arena_alloc(&s->arena, (xg->n_nodes ? xg->n_nodes : 1) * sizeof *m);
  if (m) memset(m, 0, xg->n_nodes * sizeof *m);
  return m;
}

void exec_drop_nodes(struct xgraph *xg, const bool *drop) {
  uint32_t w = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++)
    if (!drop[k]) xg->nodes[w++] = xg->nodes[k];
  xg->n_nodes = w;
}

int64_t exec_sole_reader(const struct xgraph *xg, int32_t slot, const struct ir_value *v, uint32_t *input) {
  struct exec_reader r[2];
  if (slot < 0 || exec_is_graph_output(v) || exec_readers(xg, slot, r, 2) != 1) return -1;
  *input = r[0].input;
  return r[0].node;
}

/* Exporters share equal initializers through Identity: every bias of a
 * model whose biases are all zeros (random-weight fixtures, the benchmark
 * model) is one. */
const struct ir_tensor *exec_const_tensor(const struct ir_value *v) {
  for (int depth = 0; v && depth < 8; depth++) {
    if (v->init) return (v->flags & IR_VALUE_GRAPH_INPUT) ? NULL : v->init;
    const struct ir_node *p = v->producer;
    if (!p || (p->domain && p->domain[0])) return NULL;
    if (!strcmp(p->op_type, "Constant")) {
      const struct ir_attr *a = ir_node_attr(p, "value");
      return a && a->type == IR_ATTR_TENSOR ? a->t : NULL;
    }
    if (strcmp(p->op_type, "Identity") || p->n_inputs != 1) return NULL;
    v = p->inputs[0];
  }
  return NULL;
}
