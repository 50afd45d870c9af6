/*
 * fuse_shape.c — what a fusion may assume about shapes in a graph tolk has
 * no shape inference for (rewrite.h, struct ir_rows). SkipLayerNormalization
 * adds its skip to its input without broadcasting the input, so fusing
 * Add(x, y) into it needs x and y of one shape — which a transformer's
 * residual adds have, but which only the way y is computed from x proves.
 *
 * One walk over the nodes (they are in topological order) carries, for
 * each value, a `root` whose dims all but the last are the value's, the
 * last dim (`width`) and the rank, through the ops a transformer block is
 * made of: elementwise ops with a scalar or a 1-D constant (only the last
 * dim can change) or a dequantization scale, MatMul and MatMulInteger by a
 * 2-D weight (the last dim becomes its columns; Gemm's output is 2-D with
 * them), the normalisations, activations and DynamicQuantizeLinear (shape
 * kept), and the
 * attention output's Reshape to [dim 0 of T, dim 1 of T, c] with T of rank
 * 3. Any other op starts a new root; a value's width and rank then come
 * from its declared type, or from what the op is known to make.
 */
#include <stdlib.h>
#include <string.h>

#include "rewrite.h"

/* Ops whose output has their first input's shape. */
static bool shape_kept(const struct ir_node *n) {
  static const char *const onnx_ops[] = {"Relu", "Sigmoid", "Tanh", "Erf", "Neg", "Abs", "Exp", "Sqrt",
                                         "Reciprocal", "Cast", "Softmax", "LogSoftmax", "Identity",
                                         "DynamicQuantizeLinear"};
  static const char *const ms_ops[] = {"QuickGelu", "Gelu", "FastGelu"};
  if (!*n->domain) {
    for (size_t i = 0; i < sizeof onnx_ops / sizeof onnx_ops[0]; i++)
      if (!strcmp(n->op_type, onnx_ops[i])) return true;
    return false;
  }
  if (strcmp(n->domain, "com.microsoft")) return false;
  for (size_t i = 0; i < sizeof ms_ops / sizeof ms_ops[0]; i++)
    if (!strcmp(n->op_type, ms_ops[i])) return true;
  return false;
}

/* The facts of v as declared (a constant's real dims, else its type). */
static struct ir_rows declared(const struct ir_value *v) {
  struct ir_rows r = {v->index, -1, -1};
  if (v->init) {
    r.rank = v->init->rank;
    if (r.rank > 0) r.width = v->init->dims[r.rank - 1];
  } else if (v->type.kind == IR_TYPE_TENSOR && v->type.rank >= 0) {
    r.rank = v->type.rank;
    if (r.rank > 0 && v->type.dims[r.rank - 1].value >= 0) r.width = v->type.dims[r.rank - 1].value;
  }
  return r;
}

/* A constant of rank <= 1 broadcast against a value (a scalar, or a bias
 * along the last axis): its element count, else 0. */
static int64_t const_len(const struct ir_value *v) {
  if (!v || !v->init || (v->flags & IR_VALUE_GRAPH_INPUT) || v->init->rank > 1) return 0;
  return v->init->numel;
}

/* The element count of a value of rank <= 1 broadcast against another: a
 * constant's (const_len), 1 for DynamicQuantizeLinear's scale (a scalar by
 * the op's definition), and for a Mul of two such — quantize_dynamic's
 * dequantization scale, the activation's times the weight's — the larger;
 * else 0. */
static int64_t small_len(const struct ir_value *v, int depth) {
  int64_t len = const_len(v);
  if (len || !v || depth > 2) return len;
  const struct ir_node *q = ir_made_by(v, "DynamicQuantizeLinear"), *m = ir_made_by(v, "Mul");
  if (q) return q->n_outputs > 1 && q->outputs[1] == v ? 1 : 0;
  if (!m || m->n_inputs != 2) return 0;
  int64_t a = small_len(m->inputs[0], depth + 1), b = small_len(m->inputs[1], depth + 1);
  if (!a || !b || (a != b && a != 1 && b != 1)) return 0;
  return a > b ? a : b;
}

/* The last dim two broadcast last dims give, -1 when unknown. */
static int64_t joined(int64_t a, int64_t b) {
  if (a == b || b == 1) return a;
  return a == 1 ? b : -1;
}

static const struct ir_rows *fact(const struct ir_rw *rw, const struct ir_rows *rows, const struct ir_value *v) {
  return v && v->graph == rw->g ? &rows[v->index] : NULL;
}

/* The facts of a binary elementwise op's output. */
static struct ir_rows binary(const struct ir_rw *rw, const struct ir_rows *rows, const struct ir_node *n,
                             struct ir_rows self) {
  for (size_t i = 0; i < 2; i++) {
    const struct ir_rows *x = fact(rw, rows, n->inputs[1 - i]);
    int64_t len = small_len(n->inputs[i], 0);
    if (!x || !len || x->rank < 1 || small_len(n->inputs[1 - i], 0)) continue;
    struct ir_rows r = *x;
    if (len > 1) r.width = len;
    return r;
  }
  const struct ir_rows *a = fact(rw, rows, n->inputs[0]), *b = fact(rw, rows, n->inputs[1]);
  if (!a || !b) return self;
  if (a->root == b->root) {
    struct ir_rows r = *a;
    r.width = a->width >= 0 && b->width >= 0 ? joined(a->width, b->width) : -1;
    return r;
  }
  if (a->rank >= 0 && b->rank >= 0) self.rank = a->rank > b->rank ? a->rank : b->rank;
  if (self.width < 0 && a->width >= 0 && b->width >= 0) self.width = joined(a->width, b->width);
  return self;
}

/* Reshape(x, Concat(dim 0 of t, dim 1 of t, c)) with t of rank 3: t's
 * root, width c (-1: left unknown). */
static struct ir_rows reshape(const struct ir_rw *rw, const struct ir_rows *rows, const struct ir_node *n,
                              struct ir_rows self) {
  const struct ir_node *c = n->n_inputs == 2 ? ir_made_by(n->inputs[1], "Concat") : NULL;
  const struct ir_node *u = c && c->n_inputs == 3 ? ir_made_by(c->inputs[0], "Unsqueeze") : NULL;
  const struct ir_node *gather = u ? ir_made_by(u->inputs[0], "Gather") : NULL;
  const struct ir_node *shape = gather ? ir_made_by(gather->inputs[0], "Shape") : NULL;
  const struct ir_value *t = shape ? shape->inputs[0] : NULL;
  const struct ir_rows *tf = fact(rw, rows, t);
  int64_t w;
  if (!tf || tf->rank != 3 || !ir_dim_of(c->inputs[0], t, 0) || !ir_dim_of(c->inputs[1], t, 1) ||
      !ir_int_const(c->inputs[2], &w))
    return self;
  struct ir_rows r = {tf->root, 3, w > 0 ? w : -1};
  return r;
}

/* Elements of a 1-D shape tensor built as exporters build them: a 1-D
 * constant, or a Concat of those and of Unsqueeze(Gather(_, scalar), [0])
 * (one element each); -1 otherwise. */
static int64_t shape_len(const struct ir_value *v) {
  const struct ir_node *c = ir_made_by(v, "Concat"), *u, *g;
  int64_t axis;
  if (v && v->init && v->init->rank == 1 && !(v->flags & IR_VALUE_GRAPH_INPUT)) return v->init->numel;
  if (!c || ir_attr_int(c, "axis", 0) != 0) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < c->n_inputs; i++) {
    const struct ir_value *x = c->inputs[i];
    if (x && x->init && x->init->rank == 1 && !(x->flags & IR_VALUE_GRAPH_INPUT)) {
      n += x->init->numel;
      continue;
    }
    u = ir_made_by(x, "Unsqueeze");
    g = u && u->n_inputs == 2 && ir_int_const(u->inputs[1], &axis) && axis == 0 ? ir_made_by(u->inputs[0], "Gather")
                                                                             : NULL;
    if (!g || g->n_inputs != 2 || !g->inputs[1] || !g->inputs[1]->init || g->inputs[1]->init->rank != 0) return -1;
    n++;
  }
  return n;
}

/* The facts of node n's first output (self: as declared). */
static struct ir_rows node_rows(const struct ir_rw *rw, const struct ir_rows *rows, const struct ir_node *n,
                                struct ir_rows self) {
  const struct ir_rows *x = n->n_inputs ? fact(rw, rows, n->inputs[0]) : NULL;
  if (x && shape_kept(n)) return *x;
  if (!strcmp(n->domain, "com.microsoft") && !strcmp(n->op_type, "BiasGelu") && x && n->n_inputs == 2) {
    struct ir_rows r = *x;
    if (ir_vector_const(n->inputs[1])) r.width = n->inputs[1]->init->numel;
    return r;
  }
  if (*n->domain) return self;
  if (x && ir_is_op(n, "LayerNormalization") && ir_attr_int(n, "axis", -1) == -1) {
    struct ir_rows r = *x;
    if (n->n_inputs > 1 && ir_vector_const(n->inputs[1])) r.width = n->inputs[1]->init->numel;
    return r;
  }
  if (n->n_inputs == 2 && (ir_is_op(n, "Add") || ir_is_op(n, "Sub") || ir_is_op(n, "Mul") || ir_is_op(n, "Div")))
    return binary(rw, rows, n, self);
  /* B is the second input of both (MatMulInteger's zero points follow). */
  const struct ir_value *w = n->n_inputs >= 2 ? n->inputs[1] : NULL;
  if (x && (ir_is_op(n, "MatMul") || ir_is_op(n, "MatMulInteger")) && w && w->init && w->init->rank == 2 &&
      !(w->flags & IR_VALUE_GRAPH_INPUT)) {
    struct ir_rows r = *x;
    r.width = w->init->dims[1];
    return r;
  }
  const struct ir_value *gb = ir_is_op(n, "Gemm") && n->n_inputs >= 2 ? n->inputs[1] : NULL;
  if (gb) self.rank = 2;
  if (gb && gb->init && gb->init->rank == 2 && !(gb->flags & IR_VALUE_GRAPH_INPUT))
    self.width = gb->init->dims[ir_attr_int(n, "transB", 0) ? 0 : 1];
  if (ir_is_op(n, "Reshape")) {
    struct ir_rows r = reshape(rw, rows, n, self);
    if (r.root == self.root && r.rank < 0 && n->n_inputs == 2) r.rank = (int32_t)shape_len(n->inputs[1]);
    return r;
  }
  const struct ir_value *data = n->n_inputs == 2 ? n->inputs[0] : NULL;
  /* The indices may come from an enclosing graph (a merged decoder's
   * branch reads input_ids): their declared rank is all that is needed. */
  const struct ir_value *iv = n->n_inputs == 2 ? n->inputs[1] : NULL;
  const struct ir_rows *idx = fact(rw, rows, iv);
  int32_t idx_rank = idx ? idx->rank : iv ? declared(iv).rank : -1;
  if (ir_is_op(n, "Gather") && ir_attr_int(n, "axis", 0) == 0 && data && data->init && data->init->rank >= 2 &&
      idx_rank >= 0) {
    self.rank = data->init->rank - 1 + idx_rank;
    self.width = data->init->dims[data->init->rank - 1];
  }
  if (ir_is_op(n, "Range")) self.rank = 1;
  return self;
}

struct ir_rows *ir_rows_of(struct ir_rw *rw) {
  const struct ir_graph *g = rw->g;
  struct ir_rows *rows = malloc((g->n_values ? g->n_values : 1) * sizeof *rows);
  if (!rows) {
    rw->oom = true;
    return NULL;
  }
  for (size_t i = 0; i < g->n_values; i++) rows[i] = declared(g->values[i]);
  for (size_t k = 0; k < g->n_nodes; k++) {
    const struct ir_node *n = g->nodes[k];
    if (rw->dead[k] || !n->n_outputs || !n->outputs[0] || n->outputs[0]->graph != g) continue;
    struct ir_value *y = n->outputs[0];
    rows[y->index] = node_rows(rw, rows, n, rows[y->index]);
  }
  return rows;
}

int ir_rw_each_rows(struct ir_rw *rw, bool (*at)(struct ir_rw *rw, const struct ir_rows *rows, struct ir_node *n)) {
  struct ir_rows *rows = ir_rows_of(rw);
  if (!rows) return -1;
  int n = 0;
  for (size_t k = 0; k < rw->g->n_nodes; k++)
    if (!rw->dead[k] && at(rw, rows, rw->g->nodes[k])) n++;
  free(rows);
  if (rw->oom) return -1;
  return ir_rw_commit(rw) ? n : -1;
}

/* Both declared with the same fully static shape. */
static bool same_static(const struct ir_value *a, const struct ir_value *b) {
  const struct ir_type *x = &a->type, *y = &b->type;
  if (x->kind != IR_TYPE_TENSOR || y->kind != IR_TYPE_TENSOR || x->rank < 0 || x->rank != y->rank ||
      ir_type_numel(x) < 0 || ir_type_numel(y) < 0)
    return false;
  for (int d = 0; d < x->rank; d++)
    if (x->dims[d].value != y->dims[d].value) return false;
  return true;
}

bool ir_rows_same(const struct ir_rw *rw, const struct ir_rows *rows, const struct ir_value *a,
                  const struct ir_value *b) {
  const struct ir_rows *x = fact(rw, rows, a), *y = fact(rw, rows, b);
  if (a && b && !a->init && !b->init && same_static(a, b)) return true;
  return x && y && x->root == y->root && x->width >= 0 && x->width == y->width;
}
