/*
 * fuse.c — the fusions of ONNX Runtime's extended level that tolk's graphs
 * meet, each matched as ORT's transformer does (onnxruntime/core/optimizer:
 * quick_gelu_fusion.cc, gelu_fusion.cc, fast_gelu_fusion.cc,
 * bias_gelu_fusion.cc, matmul_scale_fusion.cc, matmul_transpose_fusion.cc,
 * layer_norm_fusion.cc) and replaced by the com.microsoft op
 * (src/ops/contrib.c) or the ai.onnx LayerNormalization tolk and ORT both
 * run; and one of its basic level, MatMul + Add → Gemm
 * (matmul_add_fusion.cc), which writes an ai.onnx op.
 *
 * A pattern is fused only when every value inside it has its one reader
 * inside it and is no graph output nor read by a subgraph
 * (ir_rw_sole_reader), so nothing outside sees a difference. The fused
 * node writes the pattern's last value and takes its last node's place,
 * which keeps the node list in topological order: its inputs, read by the
 * pattern's nodes, come before that.
 *
 * MatMul + Add becomes Gemm only where A is 2-D. ORT also reshapes an N-D A
 * of static shape to 2-D around a Gemm; tolk does not: Marian's activations
 * are [batch, sequence, d] with symbolic dims, FusedMatMul has no bias
 * input, and two Reshapes around a Gemm cost more nodes than the bias add
 * they save — tolk's broadcast Add does it in one pass.
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

/* ------------------------------------------------------------ Gelu, FastGelu */

/* The nodes a GELU pattern matched, for the fused node to replace. */
struct chain {
  struct ir_node *n[12];
  size_t len;
};

/* Appends n to ch; false when n is NULL. */
static bool take(struct chain *ch, struct ir_node *n) {
  if (!n || ch->len == sizeof ch->n / sizeof ch->n[0]) return false;
  ch->n[ch->len++] = n;
  return true;
}

/* v's producer when it is the ai.onnx `op` and feeds only `into`. */
static struct ir_node *only(const struct ir_rw *rw, const struct ir_value *v, const char *op,
                            const struct ir_node *into) {
  struct ir_node *p = ir_made_by(v, op);
  return p && ir_rw_only_into(rw, p, into) ? p : NULL;
}

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

/* Erf's side of Gelu: add = Add(Erf(x / √2), 1). */
static bool erf_side(const struct ir_rw *rw, const struct ir_node *add, const struct ir_value *x, struct chain *ch) {
  struct ir_node *erf = only(rw, with_const(add, 1.0f), "Erf", add);
  struct ir_node *div = erf && erf->inputs[0] ? erf->inputs[0]->producer : NULL;
  return take(ch, erf) && div && div_sqrt2(div, x) && ir_rw_only_into(rw, div, erf) && take(ch, div);
}

/* FastGelu's constants, as ORT's fast_gelu_fusion.cc expects them. */
#define SQRT_2_PI 0.7978845834732056f /* √(2/π) */
#define KAPPA 0.044715f

/* Whether ORT's IsInitializerWithExpectedValue takes c for `want`: within
 * 1e-8 + 1e-5·|want|. */
static bool ort_equal(float c, float want) { return fabsf(c - want) <= 1e-8f + 1e-5f * fabsf(want); }

/* The other input of two-input n when one is a float scalar ort_equal to
 * `want`. */
static struct ir_value *with_ort_const(const struct ir_node *n, float want) {
  float c;
  for (size_t i = 0; n && n->n_inputs == 2 && i < 2; i++)
    if (ir_scalar_in(n, i, &c) && ort_equal(c, want)) return n->inputs[1 - i];
  return NULL;
}

/* The input of two-input n that is not x, when the other is. */
static struct ir_value *besides(const struct ir_node *n, const struct ir_value *x) {
  if (!n || n->n_inputs != 2) return NULL;
  if (n->inputs[0] == x) return n->inputs[1];
  return n->inputs[1] == x ? n->inputs[0] : NULL;
}

/* x³ feeding only `into`: Pow(x, 3) (ORT's form) or x·(x·x) in either
 * order (torch.onnx's export of gelu(approximate='tanh')). */
static bool cube(const struct ir_rw *rw, const struct ir_value *v, const struct ir_node *into,
                 const struct ir_value *x, struct chain *ch) {
  struct ir_node *pow = only(rw, v, "Pow", into), *m = only(rw, v, "Mul", into), *sq;
  float e;
  if (pow)
    return pow->n_inputs == 2 && pow->inputs[0] == x && ir_scalar_in(pow, 1, &e) && ort_equal(e, 3.0f) &&
           take(ch, pow);
  sq = m ? only(rw, besides(m, x), "Mul", m) : NULL;
  return sq && sq->n_inputs == 2 && sq->inputs[0] == x && sq->inputs[1] == x && take(ch, m) && take(ch, sq);
}

/* √(2/π)·(x + 0.044715·x³) at Mul u (ORT's second formula). */
static bool tanh_arg_sum(const struct ir_rw *rw, const struct ir_node *u, const struct ir_value *x, struct chain *ch) {
  struct ir_node *sum = only(rw, with_ort_const(u, SQRT_2_PI), "Add", u);
  struct ir_node *k = sum ? only(rw, besides(sum, x), "Mul", sum) : NULL;
  struct ir_value *c = k ? with_ort_const(k, KAPPA) : NULL;
  return c && take(ch, sum) && take(ch, k) && cube(rw, c, k, x, ch);
}

/* (√(2/π)·x)·(1 + (0.044715·x)·x) at Mul u, the factors in either order
 * (ORT's first formula, Megatron's bias_gelu). */
static bool tanh_arg_product(const struct ir_rw *rw, const struct ir_node *u, const struct ir_value *x,
                             struct chain *ch) {
  for (size_t s = 0; s < 2 && u->n_inputs == 2; s++) {
    struct ir_node *lin = only(rw, u->inputs[s], "Mul", u), *one = only(rw, u->inputs[1 - s], "Add", u);
    if (!lin || !one || with_ort_const(lin, SQRT_2_PI) != x) continue;
    struct ir_node *sq = only(rw, with_ort_const(one, 1.0f), "Mul", one);
    struct ir_node *k = sq ? only(rw, besides(sq, x), "Mul", sq) : NULL;
    return k && with_ort_const(k, KAPPA) == x && take(ch, lin) && take(ch, one) && take(ch, sq) && take(ch, k);
  }
  return false;
}

/* Tanh's side of FastGelu: add = Add(Tanh(u), 1), u either form of
 * √(2/π)·(x + 0.044715·x³). */
static bool tanh_side(const struct ir_rw *rw, const struct ir_node *add, const struct ir_value *x, struct chain *ch) {
  struct ir_node *tanh = only(rw, with_ort_const(add, 1.0f), "Tanh", add);
  struct ir_node *u = tanh ? only(rw, tanh->inputs[0], "Mul", tanh) : NULL;
  return take(ch, tanh) && take(ch, u) && (tanh_arg_sum(rw, u, x, ch) || tanh_arg_product(rw, u, x, ch));
}

/* What tells the two GELUs apart: the side the outer Mul reads
 * (add = Add(Erf(…) | Tanh(…), 1)), the op each becomes without and with
 * a bias, and ORT's names for the fusions. */
struct gelu_form {
  bool (*side)(const struct ir_rw *rw, const struct ir_node *add, const struct ir_value *x, struct chain *ch);
  const char *op, *bias_op, *fusion;
};

/* 0.5·x·add ending at Mul `last`, in ORT's two orders — Mul(Mul(x, add),
 * 0.5) and Mul(Mul(x, 0.5), add) — with f's side for add; ch receives the
 * nodes, *x the GELU's input. */
static bool gelu_outer(const struct ir_rw *rw, struct ir_node *last, const struct gelu_form *f, struct chain *ch,
                       struct ir_value **x) {
  for (size_t s = 0; s < 2; s++) {
    float c;
    /* The 0.5 first: last = Mul(Mul(x, 0.5), add). */
    struct ir_node *half = only(rw, last->inputs[1 - s], "Mul", last), *add = only(rw, last->inputs[s], "Add", last);
    ch->len = 0;
    *x = half ? with_const(half, 0.5f) : NULL;
    if (*x && take(ch, half) && take(ch, add) && f->side(rw, add, *x, ch)) return true;
    /* The 0.5 last: last = Mul(mul, 0.5), mul = Mul(x, add). */
    struct ir_node *mul = only(rw, last->inputs[s], "Mul", last);
    if (!mul || mul->n_inputs != 2 || !ir_scalar_in(last, 1 - s, &c) || !near(c, 0.5f, 1e-6f)) continue;
    for (size_t t = 0; t < 2; t++) {
      ch->len = 0;
      *x = mul->inputs[1 - t];
      add = only(rw, mul->inputs[t], "Add", mul);
      if (*x && take(ch, mul) && take(ch, add) && f->side(rw, add, *x, ch)) return true;
    }
  }
  return false;
}

/* The GELU of form f ending at Mul `last`; a bias Add before it is taken
 * in (a 1-D bias of more than one element broadcasts along the last axis,
 * as BiasGelu's and FastGelu's must) when x has no reader outside. */
static bool gelu_at(struct ir_rw *rw, struct ir_node *last, const struct gelu_form *f) {
  struct chain ch;
  struct ir_value *x;
  if (!ir_is_op(last, "Mul") || last->n_inputs != 2 || last->n_outputs != 1 || !gelu_outer(rw, last, f, &ch, &x) ||
      !take(&ch, last))
    return false;
  uint32_t reads = 0;
  for (size_t i = 0; i < ch.len; i++)
    for (size_t k = 0; k < ch.n[i]->n_inputs; k++) reads += ch.n[i]->inputs[k] == x;
  struct ir_node *bias_add = ir_made_by(x, "Add");
  struct ir_value *in[2] = {x, NULL};
  if (bias_add && x->graph == rw->g && !rw->pinned[x->index] && rw->uses[x->index] == reads && bias_add->n_inputs == 2)
    for (size_t t = 0; t < 2 && !in[1]; t++)
      if (ir_vector_const(bias_add->inputs[t])) {
        in[0] = bias_add->inputs[1 - t];
        in[1] = bias_add->inputs[t];
      }
  if (in[1]) take(&ch, bias_add);
  char name[512];
  for (size_t i = 0; i < ch.len; i++) ir_rw_kill(rw, ch.n[i]);
  const char *nm = ir_rw_node_name(rw, last->name, in[1] ? "BiasGeluFusion" : f->fusion, name, sizeof name);
  return ir_rw_node(rw, last, in[1] ? f->bias_op : f->op, MS, nm, in, in[1] ? 2 : 1, last->outputs, 1, 0) != NULL;
}

static const struct gelu_form erf_gelu = {erf_side, "Gelu", "BiasGelu", "GeluFusion"};
static const struct gelu_form tanh_gelu = {tanh_side, "FastGelu", "FastGelu", "FastGeluFusion"};

static bool erf_gelu_at(struct ir_rw *rw, struct ir_node *last) { return gelu_at(rw, last, &erf_gelu); }
static bool tanh_gelu_at(struct ir_rw *rw, struct ir_node *last) { return gelu_at(rw, last, &tanh_gelu); }

int ir_pass_gelu(struct ir_rw *rw) { return ir_rw_each(rw, erf_gelu_at); }
int ir_pass_fast_gelu(struct ir_rw *rw) { return ir_rw_each(rw, tanh_gelu_at); }

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

/* ------------------------------------------------------------ Gemm */

/* Two dims ONNX's shape inference would call equal: the same size, or the
 * same symbolic name. */
static bool same_dim(struct ir_dim a, struct ir_dim b) {
  return a.value >= 0 ? a.value == b.value : b.value < 0 && a.param && b.param && !strcmp(a.param, b.param);
}

/* v's rank and its first two dims as far as they are known: a constant's
 * own, else its declared shape; -1 when unknown. */
static int known_dims(const struct ir_value *v, struct ir_dim d[2]) {
  const struct ir_tensor *t = v->flags & IR_VALUE_GRAPH_INPUT ? NULL : v->init;
  if (t) {
    for (int i = 0; i < t->rank && i < 2; i++) d[i] = (struct ir_dim){t->dims[i], NULL};
    return t->rank;
  }
  if (v->type.kind != IR_TYPE_TENSOR) return -1;
  for (int i = 0; i < v->type.rank && i < 2; i++) d[i] = v->type.dims[i];
  return v->type.rank;
}

/* The element type of the first of v[0..n) whose type is known. */
static int32_t known_dtype(const struct ir_value *const *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (v[i]->init) return v[i]->init->dtype;
    if (v[i]->type.kind == IR_TYPE_TENSOR && v[i]->type.dtype != TOLK_UNDEFINED) return v[i]->type.dtype;
  }
  return TOLK_UNDEFINED;
}

/* Whether c, added to MatMul(a, b) of known rank 2 and n columns, is a C
 * Gemm broadcasts the same way: [n], [1, n], [m, 1] or [m, n] (ORT's test). */
static bool gemm_bias(const struct ir_value *a, const struct ir_value *c, int64_t n) {
  struct ir_dim ad[2] = {{-1, NULL}, {-1, NULL}}, cd[2];
  int cr = known_dims(c, cd);
  if (cr == 1) return cd[0].value == n;
  if (cr != 2) return false;
  if (cd[0].value == 1 && cd[1].value == n) return true;
  return known_dims(a, ad) == 2 && same_dim(cd[0], ad[0]) && (cd[1].value == 1 || cd[1].value == n);
}

/* Add(MatMul(a, b), c) → Gemm(a, b, c) as ORT's MatMulAddFusion
 * (matmul_add_fusion.cc) makes it at its basic level, for 2-D a: b of
 * rank 2, c broadcasting as Gemm's C does, a float type, the product read
 * by the Add alone. */
static bool gemm_at(struct ir_rw *rw, const struct ir_rows *rows, struct ir_node *mat) {
  if (!ir_is_op(mat, "MatMul") || mat->n_inputs != 2 || mat->n_outputs != 1 || !mat->outputs[0]) return false;
  struct ir_value *a = mat->inputs[0], *b = mat->inputs[1], *ab = mat->outputs[0];
  struct ir_node *add = ir_rw_sole_reader(rw, ab);
  if (!a || !b || a->graph != rw->g || b->graph != rw->g || !add || !ir_is_op(add, "Add") || add->n_inputs != 2 ||
      add->n_outputs != 1 || !add->outputs[0] || rows[a->index].rank != 2 || rows[b->index].rank != 2 ||
      rows[b->index].width < 0)
    return false;
  struct ir_value *c = add->inputs[add->inputs[0] == ab];
  if (!c || !gemm_bias(a, c, rows[b->index].width)) return false;
  const struct ir_value *typed[] = {b, a, c, ab, add->outputs[0]};
  int32_t dt = known_dtype(typed, sizeof typed / sizeof typed[0]);
  if (dt != TOLK_FLOAT && dt != TOLK_FLOAT16 && dt != TOLK_BFLOAT16) return false;
  char name[512];
  ir_rw_kill(rw, mat);
  ir_rw_kill(rw, add);
  struct ir_value *in[3] = {a, b, c};
  const char *nm = ir_rw_node_name(rw, mat->name, "MatMulAddFusion", name, sizeof name);
  return ir_rw_node(rw, add, "Gemm", "", nm, in, 3, add->outputs, 1, 0) != NULL;
}

int ir_pass_gemm(struct ir_rw *rw) {
  /* Add broadcasts, and Gemm's C with it, from opset 7. */
  if (ir_model_opset(rw->m, "") < 7) return 0;
  return ir_rw_each_rows(rw, gemm_at);
}
