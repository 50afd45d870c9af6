/*
 * fuse.c — the fusions of ONNX Runtime's extended level that tolk's graphs
 * meet, each matched as ORT's transformer does (onnxruntime/core/optimizer:
 * quick_gelu_fusion.cc, gelu_fusion.cc, bias_gelu_fusion.cc,
 * matmul_scale_fusion.cc, matmul_transpose_fusion.cc, layer_norm_fusion.cc)
 * and replaced by the com.microsoft op (src/ops/contrib.c) or the ai.onnx
 * LayerNormalization tolk and ORT both run.
 *
 * A pattern is fused only when every value inside it has its one reader
 * inside it and is no graph output nor read by a subgraph
 * (ir_rw_sole_reader), so nothing outside sees a difference. The fused
 * node writes the pattern's last value and takes its last node's place,
 * which keeps the node list in topological order: its inputs come before
 * the pattern's first node.
 *
 * MatMul + Add is deliberately not fused: FusedMatMul has no bias input,
 * and Gemm is 2-D only — ORT fuses MatMul + Add into Gemm only when A is
 * 2-D, and Marian's activations are [batch, sequence, d]; reshaping them
 * around a Gemm adds two nodes for a bias add tolk's broadcast Add already
 * does in one pass.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rewrite.h"

#define MS "com.microsoft"

static bool near(float a, float b, float tol) { return fabsf(a - b) <= tol * fabsf(b); }

/* ------------------------------------------------------------ QuickGelu */

static bool quick_gelu_at(struct ir_rw *rw, struct ir_node *mul) {
  if (!ir_is_op(mul, "Mul") || mul->n_inputs != 2 || mul->n_outputs != 1) return false;
  for (size_t s = 0; s < 2; s++) {
    struct ir_node *sig = ir_made_by(mul->inputs[s], "Sigmoid"), *scale = NULL;
    struct ir_value *x = mul->inputs[1 - s];
    if (!sig || !x || !ir_rw_only_into(rw, sig, mul)) continue;
    float alpha = 1.0f;
    if (sig->inputs[0] != x) {
      scale = ir_made_by(sig->inputs[0], "Mul");
      if (!scale || !ir_rw_only_into(rw, scale, sig)) continue;
      if (!(scale->inputs[0] == x && ir_scalar_in(scale, 1, &alpha)) &&
          !(scale->inputs[1] == x && ir_scalar_in(scale, 0, &alpha)))
        continue;
    }
    char name[512];
    ir_rw_kill(rw, mul);
    ir_rw_kill(rw, sig);
    if (scale) ir_rw_kill(rw, scale);
    const char *nm = ir_rw_node_name(rw, mul->name, "QuickGeluFusion", name, sizeof name);
    struct ir_node *q = ir_rw_node(rw, mul, "QuickGelu", MS, nm,
                                   &x, 1, mul->outputs, 1, 1);
    if (!q) return false;
    ir_rw_attr_float(q, 0, "alpha", alpha);
    return true;
  }
  return false;
}

int ir_pass_quick_gelu(struct ir_rw *rw) { return ir_rw_each(rw, quick_gelu_at); }

/* ------------------------------------------------------------ Gelu */

/* x / sqrt(2) or x * (1 / sqrt(2)) at node d, which must read x. */
static bool div_sqrt2(const struct ir_node *d, const struct ir_value *x) {
  float c;
  if (d->n_inputs != 2 || d->inputs[0] != x) return false;
  if (ir_is_op(d, "Div")) return ir_scalar_in(d, 1, &c) && near(c, 1.4142135f, 1e-4f);
  return ir_is_op(d, "Mul") && ir_scalar_in(d, 1, &c) && near(c, 0.70710678f, 1e-4f);
}

/* The other input of two-input n when one is a float scalar near `want`. */
static struct ir_value *with_const(const struct ir_node *n, float want) {
  float c;
  if (n->n_inputs != 2) return NULL;
  if (ir_scalar_in(n, 1, &c) && near(c, want, 1e-6f)) return n->inputs[0];
  if (ir_scalar_in(n, 0, &c) && near(c, want, 1e-6f)) return n->inputs[1];
  return NULL;
}

/* add = Add(Erf(x / sqrt 2), 1) feeding only `user`, each step feeding only
 * the next; *erf and *div receive the nodes. */
static bool erf_chain(const struct ir_rw *rw, const struct ir_node *add, const struct ir_node *user,
                      const struct ir_value *x, struct ir_node **erf, struct ir_node **div) {
  if (!add || !x || !ir_rw_only_into(rw, add, user)) return false;
  *erf = ir_made_by(with_const(add, 1.0f), "Erf");
  if (!*erf || !ir_rw_only_into(rw, *erf, add)) return false;
  *div = (*erf)->inputs[0] ? (*erf)->inputs[0]->producer : NULL;
  return *div && div_sqrt2(*div, x) && ir_rw_only_into(rw, *div, *erf);
}

/* Gelu ending at Mul `last`: Erf's chain from x, in ORT's two orders —
 * Mul(Mul(x, Add(Erf(x/√2), 1)), 0.5) and Mul(Mul(x, 0.5), Add(Erf(x/√2), 1)). */
static bool gelu_at(struct ir_rw *rw, struct ir_node *last) {
  if (!ir_is_op(last, "Mul") || last->n_inputs != 2 || last->n_outputs != 1) return false;
  struct ir_node *add = NULL, *half = NULL, *mul = NULL, *erf = NULL, *div = NULL;
  struct ir_value *x = NULL;
  bool found = false;
  for (size_t s = 0; s < 2 && !found; s++) {
    float c;
    mul = NULL;
    /* The 0.5 first: last = Mul(Mul(x, 0.5), add). */
    half = ir_made_by(last->inputs[1 - s], "Mul");
    add = ir_made_by(last->inputs[s], "Add");
    x = half ? with_const(half, 0.5f) : NULL;
    found = x && ir_rw_only_into(rw, half, last) && erf_chain(rw, add, last, x, &erf, &div);
    if (found) break;
    half = NULL;
    /* The 0.5 last: last = Mul(mul, 0.5), mul = Mul(x, add). */
    mul = ir_made_by(last->inputs[s], "Mul");
    if (!mul || !ir_scalar_in(last, 1 - s, &c) || !near(c, 0.5f, 1e-6f) || !ir_rw_only_into(rw, mul, last)) continue;
    for (size_t t = 0; t < 2 && !found; t++) {
      add = ir_made_by(mul->inputs[t], "Add");
      x = mul->inputs[1 - t];
      found = erf_chain(rw, add, mul, x, &erf, &div);
    }
  }
  if (!found) return false;
  /* x's readers are the pattern's two; a bias before it becomes BiasGelu (a
   * 1-D bias of more than one element broadcasts along the last axis, as
   * BiasGelu's must). */
  struct ir_node *bias_add = ir_made_by(x, "Add");
  struct ir_value *in[2] = {x, NULL};
  const struct ir_value *b = NULL;
  if (bias_add && !rw->pinned[x->index] && rw->uses[x->index] == 2 && bias_add->n_inputs == 2)
    for (size_t t = 0; t < 2 && !b; t++) {
      const struct ir_value *c = bias_add->inputs[t];
      if (ir_vector_const(c)) {
        b = c;
        in[0] = bias_add->inputs[1 - t];
        in[1] = bias_add->inputs[t];
      }
    }
  char name[512];
  struct ir_node *pattern[] = {last, half, mul, add, erf, div, b ? bias_add : NULL};
  for (size_t i = 0; i < sizeof pattern / sizeof pattern[0]; i++)
    if (pattern[i]) ir_rw_kill(rw, pattern[i]);
  const char *op = b ? "BiasGelu" : "Gelu";
  const char *nm = ir_rw_node_name(rw, last->name, b ? "BiasGeluFusion" : "GeluFusion", name, sizeof name);
  return ir_rw_node(rw, last, op, MS, nm,
                    in, b ? 2 : 1, last->outputs, 1, 0) != NULL;
}

int ir_pass_gelu(struct ir_rw *rw) { return ir_rw_each(rw, gelu_at); }

/* ------------------------------------------------------------ FusedMatMul */

/* A Transpose swapping exactly the last two axes. */
static bool swaps_last_two(const struct ir_node *t) {
  const struct ir_attr *p = ir_node_attr(t, "perm");
  if (!p || p->type != IR_ATTR_INTS || p->n < 2) return false;
  size_t r = p->n;
  for (size_t i = 0; i + 2 < r; i++)
    if (p->ints[i] != (int64_t)i) return false;
  return p->ints[r - 2] == (int64_t)r - 1 && p->ints[r - 1] == (int64_t)r - 2;
}

/* A scalar Mul (either side) or Div (divisor) of v at node n: its scale
 * and the other input. */
static struct ir_value *scaled(const struct ir_node *n, const struct ir_value *v, float *scale) {
  float c;
  if (n->n_inputs != 2 || (v && n->inputs[0] != v && n->inputs[1] != v)) return NULL;
  if (ir_is_op(n, "Div") && ir_scalar_in(n, 1, &c) && c != 0.0f && (!v || n->inputs[0] == v)) {
    *scale = 1.0f / c;
    return n->inputs[0];
  }
  if (!ir_is_op(n, "Mul")) return NULL;
  if (ir_scalar_in(n, 1, &c) && (!v || n->inputs[0] == v)) {
    *scale = c;
    return n->inputs[0];
  }
  if (ir_scalar_in(n, 0, &c) && (!v || n->inputs[1] == v)) {
    *scale = c;
    return n->inputs[1];
  }
  return NULL;
}

struct mm {
  struct ir_value *in[2];
  struct ir_node *gone[8]; /* nodes the fusion absorbs */
  size_t n_gone;
  float alpha;
  int trans[2];
};

/* Absorbs into input i of mm the scalar scales and one last-two-axes
 * Transpose that feed only it, as far as they go. */
static void absorb_input(struct ir_rw *rw, struct ir_node *mat, struct mm *f, size_t i) {
  const struct ir_node *reader = mat;
  for (bool more = true; more && f->n_gone < 6;) {
    struct ir_node *p = f->in[i] ? f->in[i]->producer : NULL;
    float s;
    struct ir_value *src;
    more = false;
    if (!p || !ir_rw_only_into(rw, p, reader)) break;
    if ((src = scaled(p, NULL, &s))) {
      f->alpha *= s;
    } else if (ir_is_op(p, "Transpose") && !f->trans[i] && swaps_last_two(p)) {
      src = p->inputs[0];
      f->trans[i] = 1;
    } else {
      break;
    }
    f->in[i] = src;
    f->gone[f->n_gone++] = p;
    reader = p;
    more = true;
  }
}

/* Whether input i of mat reads a cache (ir_rw_is_cache) through the
 * Transpose and scalar Mul kv.c expects before it. */
static bool reads_cache(const struct ir_rw *rw, const struct ir_node *mat, size_t i) {
  const struct ir_value *v = mat->inputs[i];
  float s;
  for (int step = 0; v && step < 3; step++) {
    if (ir_rw_is_cache(rw, v)) return true;
    const struct ir_node *p = v->producer;
    if (!p || p->n_inputs < 1) return false;
    if (ir_is_op(p, "Transpose")) v = p->inputs[0];
    else if (!(v = scaled(p, NULL, &s))) return false;
  }
  return false;
}

static bool fused_matmul_at(struct ir_rw *rw, struct ir_node *mat) {
  if (!ir_is_op(mat, "MatMul") || mat->n_inputs != 2 || mat->n_outputs != 1 || !mat->outputs[0]) return false;
  if (reads_cache(rw, mat, 0) || reads_cache(rw, mat, 1)) return false;
  struct mm f = {{mat->inputs[0], mat->inputs[1]}, {0}, 0, 1.0f, {0, 0}};
  absorb_input(rw, mat, &f, 0);
  absorb_input(rw, mat, &f, 1);
  struct ir_node *after = ir_rw_sole_reader(rw, mat->outputs[0]), *anchor = mat;
  float s;
  if (after && after->n_outputs == 1 && after->outputs[0] && scaled(after, mat->outputs[0], &s)) {
    f.alpha *= s;
    f.gone[f.n_gone++] = after;
    anchor = after;
  }
  if (!f.n_gone) return false;
  char name[512];
  for (size_t i = 0; i < f.n_gone; i++) ir_rw_kill(rw, f.gone[i]);
  ir_rw_kill(rw, mat);
  const char *fusion = f.alpha != 1.0f ? "MatMulScaleFusion" : "MatMulTransposeFusion";
  const char *nm = ir_rw_node_name(rw, mat->name, fusion, name, sizeof name);
  struct ir_node *n = ir_rw_node(rw, anchor, "FusedMatMul", MS, nm,
                                 f.in, 2, anchor->outputs, 1, 5);
  if (!n) return false;
  ir_rw_attr_float(n, 0, "alpha", f.alpha);
  ir_rw_attr_int(n, 1, "transA", f.trans[0]);
  ir_rw_attr_int(n, 2, "transB", f.trans[1]);
  ir_rw_attr_int(n, 3, "transBatchA", 0);
  ir_rw_attr_int(n, 4, "transBatchB", 0);
  return true;
}

int ir_pass_fused_matmul(struct ir_rw *rw) { return ir_rw_each(rw, fused_matmul_at); }

/* ------------------------------------------------------------ LayerNormalization */

/* A ReduceMean over the last axis keeping it (axes as the attribute, or
 * as the opset-18 input). */
static bool mean_last(const struct ir_node *r) {
  if (!r || ir_attr_int(r, "keepdims", 1) != 1) return false;
  const struct ir_attr *a = ir_node_attr(r, "axes");
  if (a) return a->type == IR_ATTR_INTS && a->n == 1 && a->ints[0] == -1;
  const struct ir_value *v = r->n_inputs > 1 ? r->inputs[1] : NULL;
  int64_t axis;
  if (!v || !v->init || v->init->dtype != TOLK_INT64 || v->init->numel != 1 || !v->init->data) return false;
  memcpy(&axis, v->init->data, sizeof axis);
  return axis == -1;
}

/* The other input of two-input n when one is a vector constant. */
static struct ir_value *with_vector(const struct ir_node *n, struct ir_value **vec) {
  for (size_t i = 0; n && n->n_inputs == 2 && i < 2; i++)
    if (ir_vector_const(n->inputs[i])) {
      *vec = n->inputs[i];
      return n->inputs[1 - i];
    }
  return NULL;
}

/* The decomposed LayerNormalization of opsets before 17 ending at node
 * `last` (ORT's layer_norm_fusion.cc): mean = ReduceMean(x), d = x - mean,
 * Div(d, Sqrt(ReduceMean(Pow(d, 2) | d·d) + eps)) · gamma [+ beta]. */
static bool layernorm_at(struct ir_rw *rw, struct ir_node *last) {
  struct ir_value *gamma = NULL, *beta = NULL, *y;
  struct ir_node *add_b = NULL, *mul_g;
  if (!ir_is_op(last, "Add") && !ir_is_op(last, "Mul")) return false;
  if (ir_is_op(last, "Add")) {
    add_b = last;
    y = with_vector(add_b, &beta);
    if (!(mul_g = ir_made_by(y, "Mul")) || !ir_rw_only_into(rw, mul_g, add_b)) return false;
  } else {
    /* A bias Add after it is part of the pattern: matched from there. */
    struct ir_node *next =
        last->n_outputs == 1 && last->outputs[0] ? ir_rw_sole_reader(rw, last->outputs[0]) : NULL;
    if (next && ir_is_op(next, "Add") && with_vector(next, &beta)) return false;
    mul_g = last;
  }
  struct ir_node *div = ir_made_by(with_vector(mul_g, &gamma), "Div"), *sqrt, *add_e, *var, *sq, *sub, *mean;
  float eps, two;
  if (!div || !ir_rw_only_into(rw, div, mul_g) || !(sqrt = ir_made_by(div->inputs[1], "Sqrt")) ||
      !ir_rw_only_into(rw, sqrt, div))
    return false;
  if (!(add_e = ir_made_by(sqrt->inputs[0], "Add")) || !ir_rw_only_into(rw, add_e, sqrt)) return false;
  var = ir_made_by(add_e->inputs[0], "ReduceMean");
  if (!var || !ir_scalar_in(add_e, 1, &eps)) {
    var = ir_made_by(add_e->inputs[1], "ReduceMean");
    if (!var || !ir_scalar_in(add_e, 0, &eps)) return false;
  }
  sq = var->inputs[0] ? var->inputs[0]->producer : NULL;
  if (!mean_last(var) || !ir_rw_only_into(rw, var, add_e) || !sq || !ir_rw_only_into(rw, sq, var))
    return false;
  struct ir_value *d = div->inputs[0];
  bool square = (ir_is_op(sq, "Pow") && sq->inputs[0] == d && ir_scalar_in(sq, 1, &two) && two == 2.0f) ||
                (ir_is_op(sq, "Mul") && sq->inputs[0] == d && sq->inputs[1] == d);
  if (!square || !(sub = ir_made_by(d, "Sub")) || rw->pinned[d->index] ||
      rw->uses[d->index] != (ir_is_op(sq, "Mul") ? 3u : 2u))
    return false;
  struct ir_value *x = sub->inputs[0];
  if (!(mean = ir_made_by(sub->inputs[1], "ReduceMean")) || mean->inputs[0] != x || !mean_last(mean) ||
      !ir_rw_only_into(rw, mean, sub))
    return false;
  char name[512];
  struct ir_node *pattern[] = {add_b, mul_g, div, sqrt, add_e, var, sq, sub, mean};
  for (size_t i = 0; i < sizeof pattern / sizeof pattern[0]; i++)
    if (pattern[i]) ir_rw_kill(rw, pattern[i]);
  struct ir_value *in[3] = {x, gamma, beta};
  const char *nm = ir_rw_node_name(rw, last->name, "LayerNormFusion", name, sizeof name);
  struct ir_node *n = ir_rw_node(rw, last, "LayerNormalization", "", nm, in, beta ? 3 : 2, last->outputs, 1, 2);
  if (!n) return false;
  ir_rw_attr_int(n, 0, "axis", -1);
  ir_rw_attr_float(n, 1, "epsilon", eps);
  return true;
}

int ir_pass_layernorm(struct ir_rw *rw) {
  /* LayerNormalization is an ai.onnx op from opset 17 on: an older model
   * keeps the decomposed form, which the checker (and its opset) expect. */
  if (ir_model_opset(rw->m, "") < 17) return 0;
  return ir_rw_each(rw, layernorm_at);
}
