/*
 * fuse_mmi.c — at session creation (any opt level but none), the chain ONNX
 * Runtime's quantize_dynamic writes after each integer product,
 *
 *   q = MatMulInteger(y, W, y_zp, W_zp)
 *   out = Mul(Cast(q, to=float), Mul(y_scale, W_scale))   (or × y_scale)
 *   [out = Add(out, bias)]                                 (either order)
 *
 * with y_scale from a DynamicQuantizeLinear (per tensor, or per row where
 * quant_rows.c gave it the per-row kernel), W_scale and bias constants, runs
 * as one node, tolk_mmi_scaled_def: the GEMM writes float(q) · (y_scale ·
 * W_scale) + bias from its tiles (kern_igemm_f32) instead of an int32 matrix
 * that three more nodes read and write again. Every operation rounds as the
 * nodes' do, so the outputs are bit for bit the graph's as written (ORT's
 * MatMulIntegerToFloat fusion makes the same node at its extended level).
 *
 * A chain is taken only when each value inside it has its one reader inside
 * it and is no graph output; the fused node keeps the MatMulInteger's node
 * (its name in errors, its packed W) and runs where the chain's last node
 * did, after every value it reads.
 */
#include "exec.h"

/* Whether input `i` of node k is output 1 (the scale) of a
 * DynamicQuantizeLinear. */
static bool dql_scale(const struct xgraph *xg, const struct xnode *x, uint32_t i) {
  if (x->in[i].frame != (int32_t)xg->id) return false;
  int64_t d = exec_producer(xg, x->in[i].slot);
  return d >= 0 && exec_is_op(&xg->nodes[d], "DynamicQuantizeLinear") && xg->nodes[d].n_out >= 2 &&
         xg->nodes[d].out[1] == x->in[i].slot;
}

/* What a chain from one MatMulInteger found: the nodes it replaces and the
 * fused node's extra inputs. */
struct chain {
  uint32_t mmi, cast, mul, scale_mul, add; /* scale_mul, add: UINT32_MAX when none */
  struct xref a_scale, b_scale, bias;      /* frame -1: absent */
  int32_t out;
};

static const struct xref absent = {-1, -1};

/* The scale the dequantizing Mul multiplies by, input `si` of node mul:
 * y_scale itself, or Mul(y_scale, W_scale) with W_scale a float constant of
 * rank ≤ 1 (dropped with the chain when the Mul reads nothing else). */
static bool scale_of(const struct xgraph *xg, const struct xnode *mul, uint32_t si, struct chain *ch) {
  if (dql_scale(xg, mul, si)) {
    ch->a_scale = mul->in[si];
    ch->b_scale = absent;
    return true;
  }
  if (mul->in[si].frame != (int32_t)xg->id) return false;
  int64_t sm = exec_producer(xg, mul->in[si].slot);
  if (sm < 0) return false;
  const struct xnode *s = &xg->nodes[sm];
  if (!exec_is_op(s, "Mul") || s->n_in != 2 || s->n_out != 1) return false;
  for (uint32_t w = 0; w < 2; w++) {
    const struct ir_tensor *t = exec_const_tensor(s->node->inputs[w]);
    if (!t || t->dtype != TOLK_FLOAT || t->rank > 1 || !dql_scale(xg, s, 1 - w)) continue;
    ch->a_scale = s->in[1 - w];
    ch->b_scale = s->in[w];
    uint32_t in;
    ch->scale_mul = exec_sole_reader(xg, s->out[0], s->node->outputs[0], &in) >= 0 ? (uint32_t)sm : UINT32_MAX;
    return true;
  }
  return false;
}

/* The optional bias Add after the dequantizing Mul (whose output is `slot`):
 * a float constant of n values. */
static void bias_of(const struct xgraph *xg, int32_t slot, const struct ir_value *v, int64_t n,
                    struct chain *ch) {
  uint32_t in;
  int64_t k = exec_sole_reader(xg, slot, v, &in);
  if (k < 0) return;
  const struct xnode *add = &xg->nodes[k];
  if (!exec_is_op(add, "Add") || add->n_in != 2 || add->n_out != 1 || add->out[0] < 0) return;
  const struct ir_tensor *t = exec_const_tensor(add->node->inputs[1 - in]);
  if (!t || t->dtype != TOLK_FLOAT || t->rank != 1 || t->dims[0] != n) return;
  ch->add = (uint32_t)k;
  ch->bias = add->in[1 - in];
  ch->out = add->out[0];
}

/* Whether node k starts a chain; fills ch. */
static bool chain_at(const struct xgraph *xg, uint32_t k, struct chain *ch) {
  const struct xnode *q = &xg->nodes[k];
  if (!exec_is_op(q, "MatMulInteger") || q->n_in < 2 || q->n_out != 1 || q->def == &tolk_mmi_scaled_def)
    return false;
  /* W constant and 2-D: its columns are the bias's length. */
  const struct ir_tensor *w = exec_const_tensor(q->node->inputs[1]);
  if (!w || w->rank != 2) return false;
  *ch = (struct chain){.mmi = k, .scale_mul = UINT32_MAX, .add = UINT32_MAX, .bias = absent};
  uint32_t in;
  int64_t c = exec_sole_reader(xg, q->out[0], q->node->outputs[0], &in);
  if (c < 0) return false;
  const struct xnode *cast = &xg->nodes[c];
  if (!exec_is_op(cast, "Cast") || cast->n_out != 1 || ir_attr_int(cast->node, "to", 0) != TOLK_FLOAT)
    return false;
  int64_t m = exec_sole_reader(xg, cast->out[0], cast->node->outputs[0], &in);
  if (m < 0) return false;
  const struct xnode *mul = &xg->nodes[m];
  if (!exec_is_op(mul, "Mul") || mul->n_in != 2 || mul->n_out != 1 || mul->out[0] < 0 ||
      !scale_of(xg, mul, 1 - in, ch))
    return false;
  ch->cast = (uint32_t)c;
  ch->mul = (uint32_t)m;
  ch->out = mul->out[0];
  bias_of(xg, mul->out[0], mul->node->outputs[0], w->dims[1], ch);
  return true;
}

/* Rewrites the chain: the MatMulInteger's node, with the fused kernel and
 * the chain's inputs and output, moves to the last node's place; the others
 * are marked in drop. */
static bool fuse(tolk_session *s, struct xgraph *xg, const struct chain *ch, bool *drop) {
  struct xnode x = xg->nodes[ch->mmi];
  struct xref *in = tolk_arena_alloc(&s->arena, 7 * sizeof *in);
  int32_t *out = tolk_arena_alloc(&s->arena, sizeof *out);
  if (!in || !out) return false;
  for (uint32_t i = 0; i < 4; i++) in[i] = i < x.n_in ? x.in[i] : absent;
  in[4] = ch->a_scale, in[5] = ch->b_scale, in[6] = ch->bias;
  *out = ch->out;
  x.in = in, x.n_in = 7, x.out = out, x.n_out = 1, x.def = &tolk_mmi_scaled_def;
  if (x.n_in > xg->max_in) xg->max_in = x.n_in;
  uint32_t last = ch->add != UINT32_MAX ? ch->add : ch->mul;
  drop[ch->mmi] = drop[ch->cast] = drop[ch->mul] = true;
  if (ch->scale_mul != UINT32_MAX) drop[ch->scale_mul] = true;
  drop[last] = false;
  xg->nodes[last] = x;
  return true;
}

int exec_fuse_mmi(tolk_session *s, struct xgraph *xg) {
  bool *drop = NULL;
  int n = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    struct chain ch;
    if (!chain_at(xg, k, &ch)) continue;
    if (!drop && !(drop = exec_node_marks(s, xg))) return -1;
    if (!fuse(s, xg, &ch, drop)) return -1;
    n++;
  }
  if (n) exec_drop_nodes(xg, drop);
  return n;
}
