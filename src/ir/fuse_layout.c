/*
 * fuse_layout.c — layout ops that cancel, at the basic level (rewrite.h:
 * ir_pass_transpose, ir_pass_reshape), as ORT's TransposeOptimizer and
 * Reshape elimination do for the simple cases: two Transposes in a row
 * compose into one (none when the composition is the identity), two
 * Reshapes in a row into the outer one, and a Reshape to the shape its
 * input is declared with goes. They move no number, so the outputs are
 * bit-identical; they run before the fusions, so a Transpose pair that
 * composes into a swap of the last two axes is then taken into
 * FusedMatMul's transA/transB (fuse.c).
 *
 * A value that is a graph output or read by a subgraph keeps its name, so
 * a rewrite that would make its readers read another value is not made for
 * it; an inner node read by others stays for them.
 */
#include <string.h>

#include "rewrite.h"

/* The perm of Transpose t as n ints, when written out and a permutation. */
static bool perm_of(const struct ir_node *t, const int64_t **p, size_t *n) {
  const struct ir_attr *a = ir_node_attr(t, "perm");
  if (!a || a->type != IR_ATTR_INTS || !a->n || a->n > IR_MAX_RANK) return false;
  bool seen[IR_MAX_RANK] = {0};
  for (size_t i = 0; i < a->n; i++) {
    if (a->ints[i] < 0 || a->ints[i] >= (int64_t)a->n || seen[a->ints[i]]) return false;
    seen[a->ints[i]] = true;
  }
  *p = a->ints;
  *n = a->n;
  return true;
}

/* The inner node of a pair: made by `op`, live and not itself just made
 * by this pass (a placed node shares its slot with a killed one). */
static struct ir_node *inner(const struct ir_rw *rw, const struct ir_value *v, const char *op) {
  struct ir_node *n = ir_made_by(v, op);
  return n && !rw->dead[n->index] && n->src_index >= 0 ? n : NULL;
}

/* Readers of outer's output read x instead; outer (and inner, when only
 * outer read it) die. */
static bool bypass(struct ir_rw *rw, struct ir_node *outer, struct ir_node *in, struct ir_value *x) {
  struct ir_value *y = outer->outputs[0];
  if (rw->pinned[y->index]) return false;
  bool inner_too = ir_rw_only_into(rw, in, outer);
  ir_rw_replace_uses(rw, y, x);
  ir_rw_kill(rw, outer);
  if (inner_too) ir_rw_kill(rw, in);
  return true;
}

static bool transpose_at(struct ir_rw *rw, struct ir_node *t2) {
  const int64_t *p1, *p2;
  size_t n1, n2;
  if (!ir_is_op(t2, "Transpose") || t2->n_inputs != 1 || t2->n_outputs != 1 || !t2->outputs[0]) return false;
  struct ir_node *t1 = inner(rw, t2->inputs[0], "Transpose");
  if (!t1 || t1->n_inputs != 1 || !t1->inputs[0] || !perm_of(t1, &p1, &n1) || !perm_of(t2, &p2, &n2) || n1 != n2)
    return false;
  /* out[i] = mid[p2[i]] = x[p1[p2[i]]]. */
  int64_t q[IR_MAX_RANK];
  bool identity = true;
  for (size_t i = 0; i < n2; i++) {
    q[i] = p1[p2[i]];
    identity = identity && q[i] == (int64_t)i;
  }
  struct ir_value *x = t1->inputs[0];
  if (identity) return bypass(rw, t2, t1, x);
  char name[512];
  bool inner_too = ir_rw_only_into(rw, t1, t2);
  ir_rw_kill(rw, t2);
  if (inner_too) ir_rw_kill(rw, t1);
  const char *nm = ir_rw_node_name(rw, t2->name, "TransposeElimination", name, sizeof name);
  struct ir_node *t = ir_rw_node(rw, t2, "Transpose", "", nm, &x, 1, t2->outputs, 1, 1);
  return t && ir_rw_attr_ints(rw, t, 0, "perm", q, n2);
}

int ir_pass_transpose(struct ir_rw *rw) { return ir_rw_each(rw, transpose_at); }

/* A constant 1-D int64 shape: its entries (copied: an initializer's data
 * may sit unaligned in the file) and count. */
static bool shape_const(const struct ir_value *v, int64_t *s, int64_t *n) {
  const struct ir_tensor *t = v ? v->init : NULL;
  if (!t || t->dtype != TOLK_INT64 || t->rank != 1 || (v->flags & IR_VALUE_GRAPH_INPUT) || (t->numel && !t->data) ||
      t->numel > IR_MAX_RANK)
    return false;
  if (t->numel) memcpy(s, t->data, (size_t)t->numel * sizeof *s);
  *n = t->numel;
  return true;
}

/* Whether Reshape r of x to s[0..n) gives x's own declared static shape. */
static bool same_shape(const struct ir_node *r, const struct ir_value *x, const int64_t *s, int64_t n) {
  const struct ir_type *t = &x->type;
  if (t->kind != IR_TYPE_TENSOR || t->rank != n || ir_type_numel(t) <= 0) return false;
  bool allowzero = ir_attr_int(r, "allowzero", 0) != 0;
  int minus = -1;
  for (int64_t i = 0; i < n; i++) {
    if (s[i] == -1 && minus < 0) {
      minus = (int)i;
      continue;
    }
    int64_t want = s[i] == 0 && !allowzero ? t->dims[i].value : s[i];
    if (want != t->dims[i].value) return false;
  }
  /* -1 takes what is left: x's own dim there, all others being equal. */
  return true;
}

static bool reshape_at(struct ir_rw *rw, struct ir_node *r2) {
  int64_t s2[IR_MAX_RANK], n2;
  if (!ir_is_op(r2, "Reshape") || r2->n_inputs != 2 || r2->n_outputs != 1 || !r2->outputs[0] || !r2->inputs[0] ||
      !shape_const(r2->inputs[1], s2, &n2))
    return false;
  struct ir_value *x = r2->inputs[0];
  if (same_shape(r2, x, s2, n2)) {
    struct ir_value *y = r2->outputs[0];
    if (rw->pinned[y->index]) return false;
    ir_rw_replace_uses(rw, y, x);
    ir_rw_kill(rw, r2);
    return true;
  }
  struct ir_node *r1 = inner(rw, x, "Reshape");
  if (!r1 || r1->n_inputs != 2 || !r1->inputs[0]) return false;
  /* A 0 copies a dim of the inner result, which the outer one no longer
   * sees (and under allowzero is a real 0: kept as it is). */
  for (int64_t i = 0; i < n2; i++)
    if (!s2[i]) return false;
  struct ir_value *in[2] = {r1->inputs[0], r2->inputs[1]};
  char name[512];
  bool inner_too = ir_rw_only_into(rw, r1, r2);
  ir_rw_kill(rw, r2);
  if (inner_too) ir_rw_kill(rw, r1);
  const char *nm = ir_rw_node_name(rw, r2->name, "ReshapeFusion", name, sizeof name);
  return ir_rw_node(rw, r2, "Reshape", "", nm, in, 2, r2->outputs, 1, 0) != NULL;
}

int ir_pass_reshape(struct ir_rw *rw) { return ir_rw_each(rw, reshape_at); }
