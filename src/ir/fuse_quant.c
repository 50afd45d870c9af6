/*
 * fuse_quant.c — ORT's MatMulIntegerToFloatFusion (onnxruntime/core/
 * optimizer/matmul_integer_to_float.cc) at the extended level: the chain
 * quantize_dynamic writes after each integer product,
 *
 *   q = MatMulInteger(y, W [, y_zp [, W_zp]])      y_scale from a DynamicQuantizeLinear
 *   out = Mul(Cast(q, to=float), Mul(y_scale, W_scale))     (either operand order)
 *   [out = Add(out, bias)]
 * →
 *   out = com.microsoft MatMulIntegerToFloat(y, W, y_scale, W_scale, y_zp, W_zp [, bias])
 *
 * W a 2-D constant, W_scale a float constant of one value or one per
 * column, the bias a 1-D float constant of W's columns. Each value inside
 * the chain must feed only the next node of it and be no graph output;
 * the scale Mul goes too when the chain's Mul was its only reader. The
 * fused node stands where the chain's last node stood.
 *
 * tolk runs the fused node as it runs the chain at session creation
 * (src/exec/fuse_mmi.c): float(q) · (y_scale · W_scale) + bias, each
 * operation rounded as the nodes' are, so tolk's outputs of the written
 * graph are the original's bit for bit.
 */
#include "rewrite.h"

struct mmif {
  struct ir_node *cast, *mul, *scale_mul, *add;
  struct ir_value *a_scale, *b_scale, *bias;
};

/* Whether v is a float constant of one value, or of n (one per column). */
static bool col_scale(const struct ir_value *v, int64_t n) {
  const struct ir_tensor *t = v ? v->init : NULL;
  return t && t->dtype == TOLK_FLOAT && t->rank <= 1 && (t->numel == 1 || t->numel == n) &&
         !(v->flags & IR_VALUE_GRAPH_INPUT);
}

/* Whether v is output 1 (the scale) of a DynamicQuantizeLinear: one value,
 * as MatMulIntegerToFloat's a_scale must be in tolk. */
static bool dql_scale(const struct ir_value *v) {
  const struct ir_node *d = ir_made_by(v, "DynamicQuantizeLinear");
  return d && d->n_outputs > 1 && d->outputs[1] == v;
}

/* The scale the dequantizing Mul multiplies by: Mul(y_scale, W_scale). */
static bool scales_of(const struct ir_rw *rw, struct mmif *f, struct ir_value *s, int64_t n) {
  struct ir_node *sm = ir_made_by(s, "Mul");
  if (!sm || sm->n_inputs != 2 || sm->n_outputs != 1) return false;
  for (size_t w = 0; w < 2; w++) {
    if (!col_scale(sm->inputs[w], n) || !dql_scale(sm->inputs[1 - w])) continue;
    f->a_scale = sm->inputs[1 - w];
    f->b_scale = sm->inputs[w];
    f->scale_mul = ir_rw_sole_reader(rw, s) == f->mul ? sm : NULL;
    return true;
  }
  return false;
}

/* The optional bias Add reading the Mul's output alone. */
static void bias_of(const struct ir_rw *rw, struct mmif *f, int64_t n) {
  struct ir_node *add = ir_rw_sole_reader(rw, f->mul->outputs[0]);
  if (!add || !ir_is_op(add, "Add") || add->n_inputs != 2 || add->n_outputs != 1 || !add->outputs[0]) return;
  struct ir_value *b = add->inputs[add->inputs[0] == f->mul->outputs[0]];
  if (!ir_vector_const(b) || b->init->numel != n) return;
  f->add = add;
  f->bias = b;
}

static bool mmi_float_at(struct ir_rw *rw, struct ir_node *q) {
  struct mmif f = {0};
  if (!ir_is_op(q, "MatMulInteger") || q->n_inputs < 2 || q->n_inputs > 4 || !q->inputs[0] || q->n_outputs != 1 ||
      !q->outputs[0])
    return false;
  const struct ir_value *w = q->inputs[1];
  if (!w || !w->init || w->init->rank != 2 || (w->flags & IR_VALUE_GRAPH_INPUT)) return false;
  int64_t n = w->init->dims[1];
  f.cast = ir_rw_sole_reader(rw, q->outputs[0]);
  if (!f.cast || !ir_is_op(f.cast, "Cast") || f.cast->n_outputs != 1 || ir_attr_int(f.cast, "to", 0) != TOLK_FLOAT)
    return false;
  f.mul = ir_rw_sole_reader(rw, f.cast->outputs[0]);
  if (!f.mul || !ir_is_op(f.mul, "Mul") || f.mul->n_inputs != 2 || f.mul->n_outputs != 1 || !f.mul->outputs[0])
    return false;
  struct ir_value *s = f.mul->inputs[f.mul->inputs[0] == f.cast->outputs[0]];
  if (!scales_of(rw, &f, s, n)) return false;
  bias_of(rw, &f, n);
  struct ir_node *last = f.add ? f.add : f.mul;
  struct ir_value *in[7] = {q->inputs[0], q->inputs[1], f.a_scale, f.b_scale,
                            q->n_inputs > 2 ? q->inputs[2] : NULL, q->n_inputs > 3 ? q->inputs[3] : NULL, f.bias};
  size_t n_in = 7;
  while (!in[n_in - 1]) n_in--;
  struct ir_value *out = last->outputs[0];
  char name[512];
  const char *nm = ir_rw_node_name(rw, q->name, "MatMulIntegerToFloatFusion", name, sizeof name);
  ir_rw_kill(rw, q);
  ir_rw_kill(rw, f.cast);
  ir_rw_kill(rw, f.mul);
  if (f.add) ir_rw_kill(rw, f.add);
  if (f.scale_mul) ir_rw_kill(rw, f.scale_mul);
  return ir_rw_node(rw, last, "MatMulIntegerToFloat", "com.microsoft", nm, in, n_in, &out, 1, 0) != NULL;
}

int ir_pass_matmul_integer_to_float(struct ir_rw *rw) { return ir_rw_each(rw, mmi_float_at); }
