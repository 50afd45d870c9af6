/*
 * fuse_skip.c — ORT's SkipLayerNormFusion (onnxruntime/core/optimizer/
 * skip_layer_norm_fusion.cc) at the extended level: the residual Add of a
 * transformer block and the LayerNormalization after it,
 *
 *   y = LayerNormalization(Add(x, Add(skip, bias)) | Add(x, skip), gamma [, beta])
 * →
 *   y = com.microsoft SkipLayerNormalization(x, skip, gamma, beta, bias)
 *
 * the bias a 1-D constant of the hidden size (a projection's, Marian's
 * out_proj and fc2), taken in only when its Add feeds nothing else.
 * SkipLayerNormalization adds skip to x without broadcasting x, so x and
 * skip must have one shape: fuse_shape.c proves it from how skip is
 * computed from x (ORT reads it from its shape inference), and 3-D, the
 * op's layout. LayerNormalization's Mean and InvStdDev outputs become the
 * op's mean and inv_std_var when read, and a sum other nodes read too (a
 * pre-LN block's next residual) its input_skip_bias_sum output. The fused
 * node stands where the residual Add stood: everything it reads comes
 * before, everything reading what it writes after.
 *
 * The fused kernel (src/ops/contrib_norm.c) adds x + (skip + bias), the
 * graph's order, and normalises with LayerNormalization's own row kernel:
 * tolk's fused output is the unfused graph's bit for bit.
 */
#include <string.h>

#include "rewrite.h"

struct skip {
  struct ir_node *ln, *add, *bias_add;
  struct ir_value *x, *skip, *bias;
};

/* The residual Add `add` read as x + (skip + bias) or x + skip, x and skip
 * of one 3-D shape, the bias `width` long. */
static bool match_residual(const struct ir_rw *rw, const struct ir_rows *rows, struct skip *f, int64_t width) {
  for (size_t t = 0; t < 2; t++) {
    struct ir_value *x = f->add->inputs[t], *other = f->add->inputs[1 - t];
    struct ir_node *b = ir_made_by(other, "Add");
    if (!x || !other || x->graph != rw->g || rows[x->index].rank != 3) continue;
    for (size_t i = 0; b && b->n_inputs == 2 && i < 2; i++) {
      struct ir_value *bias = b->inputs[i], *skip = b->inputs[1 - i];
      if (!ir_vector_const(bias) || bias->init->numel != width || !ir_rw_only_into(rw, b, f->add) ||
          !ir_rows_same(rw, rows, x, skip))
        continue;
      f->x = x, f->skip = skip, f->bias = bias, f->bias_add = b;
      return true;
    }
    if (ir_rows_same(rw, rows, x, other)) {
      f->x = x, f->skip = other;
      return true;
    }
  }
  return false;
}

static bool skip_layernorm_at(struct ir_rw *rw, const struct ir_rows *rows, struct ir_node *ln) {
  struct skip f = {.ln = ln};
  if (!ir_is_op(ln, "LayerNormalization") || ln->n_inputs < 2 || ln->n_inputs > 3 || !ln->n_outputs ||
      ln->n_outputs > 3 || !ln->outputs[0] || ir_attr_int(ln, "axis", -1) != -1 ||
      ir_attr_int(ln, "stash_type", 1) != 1)
    return false;
  struct ir_value *gamma = ln->inputs[1], *beta = ln->n_inputs > 2 ? ln->inputs[2] : NULL;
  if (!ir_vector_const(gamma) || (beta && (!ir_vector_const(beta) || beta->init->numel != gamma->init->numel)))
    return false;
  struct ir_value *sum = ln->inputs[0];
  if (!(f.add = ir_made_by(sum, "Add")) || rw->dead[f.add->index] || f.add->n_inputs != 2 || f.add->n_outputs != 1 ||
      !match_residual(rw, rows, &f, gamma->init->numel))
    return false;
  /* The sum read elsewhere too becomes the fused node's fourth output. */
  bool keep_sum = ir_rw_sole_reader(rw, sum) != ln;
  struct ir_value *in[5] = {f.x, f.skip, gamma, beta, f.bias};
  struct ir_value *out[4] = {ln->outputs[0], ln->n_outputs > 1 ? ln->outputs[1] : NULL,
                             ln->n_outputs > 2 ? ln->outputs[2] : NULL, keep_sum ? sum : NULL};
  size_t n_in = f.bias ? 5 : beta ? 4 : 3, n_out = 4;
  while (!out[n_out - 1]) n_out--;
  char name[512];
  ir_rw_kill(rw, ln);
  ir_rw_kill(rw, f.add);
  if (f.bias_add) ir_rw_kill(rw, f.bias_add);
  const char *nm = ir_rw_node_name(rw, ln->name, "SkipLayerNormFusion", name, sizeof name);
  struct ir_node *n = ir_rw_node(rw, f.add, "SkipLayerNormalization", "com.microsoft", nm, in, n_in, out, n_out, 1);
  if (!n) return false;
  /* Always written: the two ops' defaults differ (1e-5 and 1e-12). */
  ir_rw_attr_float(n, 0, "epsilon", ir_attr_float(ln, "epsilon", 1e-5f));
  return true;
}

int ir_pass_skip_layernorm(struct ir_rw *rw) { return ir_rw_each_rows(rw, skip_layernorm_at); }
