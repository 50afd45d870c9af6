/*
 * quantize_write.c — the byte half of tolk_model_quantize: walks the
 * ModelProto as stored and writes it again with the plan (quantize.h)
 * applied. Every field is copied as read except the ones the plan changes:
 * a quantized node is replaced by ORT's node pattern in its place, a
 * dropped initializer (and the graph input or value_info naming it) is
 * left out, the new initializers go at the end of the graph that held the
 * weight, and a node holding subgraphs is rewritten around them. A graph
 * the plan leaves alone therefore comes out byte for byte, and so do the
 * fields tolk does not know.
 *
 * A DynamicQuantizeLinear goes right after the node producing its
 * activation, in that node's graph (first in the graph for a graph input),
 * so an activation of an enclosing graph read in a branch is quantized once
 * there, as ORT does.
 *
 * Names follow ORT's quantize_dynamic, so that tools and people who know
 * its output recognise this one: for MatMul NAME reading A, writing Y with
 * weight W —
 *   DynamicQuantizeLinear  A_QuantizeLinear: A -> A_quantized, A_scale, A_zero_point
 *   Mul                    NAME_quant_scales_mul: A_scale, W_scale -> NAME_quant_scales_mul:0
 *   MatMulInteger          NAME_quant: A_quantized, W_quantized, A_zero_point, W_zero_point
 *                          -> Y_output_quantized
 *   Cast (to float)        Y_output_quantized_cast -> Y_output_quantized_cast_output
 *   Mul                    NAME_quant_output_scale_mul -> Y
 * and for Gather NAME reading data W (and a Transpose of a quantized W): the
 * node reads W_quantized and writes Y_quantized, then DequantizeLinear
 * Y_DequantizeLinear(Y_quantized, W_scale, W_zero_point) -> Y.
 *
 * The static QDQ form follows ORT's quantize_static (QuantFormat.QDQ): for
 * an activation X,
 *   QuantizeLinear    X_QuantizeLinear: X, X_scale, X_zero_point -> X_QuantizeLinear_Output
 *   DequantizeLinear  X_DequantizeLinear: X_QuantizeLinear_Output, X_scale, X_zero_point
 *                     -> X_DequantizeLinear_Output
 * right after X's producer, every reader of X then reading the last — but
 * when X is a graph output, its producer writes X_QuantizeLinear_Input, the
 * QuantizeLinear reads that and the DequantizeLinear writes X itself, which
 * its readers go on reading (ORT's form: the graph's outputs keep their
 * names). For a weight W, at the top of its graph,
 *   DequantizeLinear  W_DequantizeLinear: W_quantized, W_scale, W_zero_point
 *                     -> W_DequantizeLinear_Output   (axis 1 when per channel)
 * which the quantized MatMul reads instead of W.
 *
 * Its QOperator form (ORT's QuantFormat.QOperator) renames nothing: MatMul
 * NAME (A, B -> Y) becomes
 *   QLinearMatMul     NAME_quant: A_quantized, A_scale, A_zero_point,
 *                     B_quantized, B_scale, B_zero_point, Y_scale, Y_zero_point -> Y_quantized
 * (a weight W as W_quantized, W_scale, W_zero_point); an activation X no
 * QLinearMatMul produced gets QuantizeLinear X_QuantizeLinear -> X_quantized
 * after its producer, and Y gets DequantizeLinear Y_DequantizeLinear ->
 * Y after the QLinearMatMul when anything else reads it.
 */
#include "quantize.h"

#include <string.h>

/* ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto fields. */
enum {
  MODEL_GRAPH = 7,
  GRAPH_NODE = 1, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_VALUE_INFO = 13,
  NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5,
  ATTR_NAME = 1, ATTR_I = 3, ATTR_G = 6, ATTR_GRAPHS = 11, ATTR_TYPE = 20,
  TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW_DATA = 9,
  ATTR_TYPE_INT = 2
};

struct wctx {
  struct pbw *b;
  const struct qplan *plan;
};

static void rewrite_graph(struct wctx *w, uint32_t field, const uint8_t *p, size_t len, const struct ir_graph *g);

/* A stored message read field by field to be written again: after
 * walk_next, f is the field and [start, r.p) its bytes, key included, for
 * walk_copy. */
struct walk {
  struct pb r;
  struct pb_field f;
  const uint8_t *start;
};

static struct walk walk_init(const uint8_t *p, size_t len) {
  return (struct walk){.r = pb_init(p, len)};
}

/* The next field; false at the end. The loader has read these bytes, so a
 * field that does not decode cannot happen; it would end the walk. */
static bool walk_next(struct walk *k) {
  const char *why;
  k->start = k->r.p;
  return !pb_eof(&k->r) && pb_next(&k->r, &k->f, &why);
}

/* Writes the current field as read. */
static void walk_copy(struct pbw *b, const struct walk *k) { pbw_copy(b, k->start, k->r.p); }

/* A string field made of a name and a suffix. */
static void name2(struct pbw *b, uint32_t field, const char *name, const char *suffix) {
  size_t a = strlen(name), s = strlen(suffix);
  pbw_key(b, field, PB_LEN);
  pbw_varint(b, a + s);
  pbw_raw(b, name, a);
  pbw_raw(b, suffix, s);
}

/* The name field (number `field`, a string) of the message [p, p+len);
 * sets *len_out and returns its bytes, or NULL when absent. */
static const uint8_t *message_name(const uint8_t *p, size_t len, uint32_t field, size_t *len_out) {
  struct walk k = walk_init(p, len);
  while (walk_next(&k))
    if (k.f.number == field && k.f.wire == PB_LEN) {
      *len_out = k.f.len;
      return k.f.data;
    }
  return NULL;
}

/* Whether the message [p, p+len) is named after an initializer of g the
 * plan drops. */
static bool names_dropped(const struct wctx *w, const struct ir_graph *g, const uint8_t *p, size_t len,
                          uint32_t name_field) {
  size_t n;
  const uint8_t *name = message_name(p, len, name_field, &n);
  const struct qgraph *q = qplan_graph(w->plan, g);
  if (!name || !q) return false;
  for (size_t i = 0; i < g->n_initializers; i++) {
    const struct ir_value *v = g->initializers[i];
    if (q->drop[v->index] && strlen(v->name) == n && !memcmp(v->name, name, n)) return true;
  }
  return false;
}

/* ------------------------------------------------------------ new messages */

static void new_initializer(struct pbw *b, const char *name, const char *suffix, int32_t dtype,
                            const int64_t *dims, int rank, const void *data, size_t nbytes) {
  size_t m = pbw_begin(b, GRAPH_INITIALIZER);
  for (int i = 0; i < rank; i++) pbw_int(b, TENSOR_DIMS, dims[i]);
  pbw_int(b, TENSOR_DATA_TYPE, dtype);
  name2(b, TENSOR_NAME, name, suffix);
  pbw_bytes(b, TENSOR_RAW_DATA, data, nbytes);
  pbw_end(b, m);
}

static void weight_initializers(struct pbw *b, const struct qweight *q) {
  const struct ir_tensor *t = q->w->init;
  bool matmul = q->kind != Q_GATHER;
  int32_t qtype = matmul ? TOLK_INT8 : TOLK_UINT8;
  int64_t n = (int64_t)q->n_scale;
  int rank = q->per_column ? 1 : 0;
  new_initializer(b, q->w->name, "_quantized", qtype, t->dims, t->rank, q->q, (size_t)t->numel);
  new_initializer(b, q->w->name, "_scale", TOLK_FLOAT, &n, rank, q->scale, q->n_scale * sizeof(float));
  new_initializer(b, q->w->name, "_zero_point", qtype, &n, rank, q->zp, q->n_scale);
}

/* One node: op type, name (name + suffix), inputs and outputs as pairs of
 * (name, suffix), and one int attribute `attr` (a Cast's `to`, a
 * DequantizeLinear's `axis`) unless it is NULL. */
struct part {
  const char *name, *suffix;
};

static void new_node(struct pbw *b, const char *op, struct part name, const struct part *in, size_t n_in,
                     const struct part *out, size_t n_out, const char *attr, int64_t value) {
  size_t m = pbw_begin(b, GRAPH_NODE);
  for (size_t i = 0; i < n_in; i++) name2(b, NODE_INPUT, in[i].name, in[i].suffix);
  for (size_t i = 0; i < n_out; i++) name2(b, NODE_OUTPUT, out[i].name, out[i].suffix);
  name2(b, NODE_NAME, name.name, name.suffix);
  pbw_string(b, NODE_OP_TYPE, op);
  if (attr) {
    size_t a = pbw_begin(b, NODE_ATTRIBUTE);
    pbw_string(b, ATTR_NAME, attr);
    pbw_int(b, ATTR_I, value);
    pbw_int(b, ATTR_TYPE, ATTR_TYPE_INT);
    pbw_end(b, a);
  }
  pbw_end(b, m);
}

/* The DynamicQuantizeLinear nodes of graph q placed after node `after`
 * (-1: before the first node). */
static void dql_nodes(struct pbw *b, const struct qgraph *q, int after) {
  for (size_t i = 0; i < q->n_dql; i++) {
    const struct ir_value *v = q->dql[i];
    if ((v->producer ? v->producer->index : -1) != after) continue;
    const char *x = v->name;
    struct part in[] = {{x, ""}}, out[] = {{x, "_quantized"}, {x, "_scale"}, {x, "_zero_point"}};
    new_node(b, "DynamicQuantizeLinear", (struct part){x, "_QuantizeLinear"}, in, 1, out, 3, NULL, 0);
  }
}

static void matmul_pattern(struct pbw *b, const struct ir_node *n, const struct qweight *q) {
  const char *x = n->inputs[0]->name, *y = n->outputs[0]->name, *w = q->w->name, *nm = n->name;
  struct part s_in[] = {{x, "_scale"}, {w, "_scale"}}, s_out[] = {{nm, "_quant_scales_mul:0"}};
  new_node(b, "Mul", (struct part){nm, "_quant_scales_mul"}, s_in, 2, s_out, 1, NULL, 0);
  struct part m_in[] = {{x, "_quantized"}, {w, "_quantized"}, {x, "_zero_point"}, {w, "_zero_point"}};
  struct part m_out[] = {{y, "_output_quantized"}};
  new_node(b, "MatMulInteger", (struct part){nm, "_quant"}, m_in, 4, m_out, 1, NULL, 0);
  struct part c_in[] = {{y, "_output_quantized"}}, c_out[] = {{y, "_output_quantized_cast_output"}};
  new_node(b, "Cast", (struct part){y, "_output_quantized_cast"}, c_in, 1, c_out, 1, "to", TOLK_FLOAT);
  struct part o_in[] = {{y, "_output_quantized_cast_output"}, {nm, "_quant_scales_mul:0"}}, o_out[] = {{y, ""}};
  new_node(b, "Mul", (struct part){nm, "_quant_output_scale_mul"}, o_in, 2, o_out, 1, NULL, 0);
}

/* A Gather or Transpose as stored with its data input and its output
 * renamed to the quantized forms, then the DequantizeLinear back to its
 * output. */
static void direct_pattern(struct pbw *b, const uint8_t *p, size_t len, const struct ir_node *n,
                           const struct qweight *q) {
  const char *y = n->outputs[0]->name, *w = q->w->name;
  struct walk k = walk_init(p, len);
  int n_in = 0;
  size_t m = pbw_begin(b, GRAPH_NODE);
  while (walk_next(&k)) {
    const struct pb_field *f = &k.f;
    if (f->number == NODE_INPUT && f->wire == PB_LEN && n_in++ == 0)
      name2(b, NODE_INPUT, w, "_quantized");
    else if (f->number == NODE_OUTPUT && f->wire == PB_LEN) name2(b, NODE_OUTPUT, y, "_quantized");
    else walk_copy(b, &k);
  }
  pbw_end(b, m);
  struct part in[] = {{y, "_quantized"}, {w, "_scale"}, {w, "_zero_point"}}, out[] = {{y, ""}};
  new_node(b, "DequantizeLinear", (struct part){y, "_DequantizeLinear"}, in, 3, out, 1, NULL, 0);
}

/* QOperator: the QuantizeLinear and DequantizeLinear of activation a. */
static void qop_nodes(struct pbw *b, const struct qact *a) {
  const char *x = a->v->name;
  if (a->need_q) {
    struct part in[] = {{x, ""}, {x, "_scale"}, {x, "_zero_point"}}, out[] = {{x, "_quantized"}};
    new_node(b, "QuantizeLinear", (struct part){x, "_QuantizeLinear"}, in, 3, out, 1, NULL, 0);
  }
  if (a->need_dq) {
    struct part in[] = {{x, "_quantized"}, {x, "_scale"}, {x, "_zero_point"}}, out[] = {{x, ""}};
    new_node(b, "DequantizeLinear", (struct part){x, "_DequantizeLinear"}, in, 3, out, 1, NULL, 0);
  }
}

static void qlinear_matmul(struct pbw *b, const struct ir_node *n, const struct qweight *qw) {
  const char *a = n->inputs[0]->name, *bn = qw ? qw->w->name : n->inputs[1]->name, *y = n->outputs[0]->name;
  struct part in[] = {{a, "_quantized"}, {a, "_scale"}, {a, "_zero_point"}, {bn, "_quantized"}, {bn, "_scale"},
                      {bn, "_zero_point"}, {y, "_scale"}, {y, "_zero_point"}};
  struct part out[] = {{y, "_quantized"}};
  new_node(b, "QLinearMatMul", (struct part){n->name, "_quant"}, in, 8, out, 1, NULL, 0);
}

/* The Q/DQ nodes of graph q's activations produced by node `after` (-1:
 * the graph's inputs, before the first node). */
static void qdq_nodes(struct pbw *b, const struct qgraph *q, int after, bool qoperator) {
  for (size_t i = 0; i < q->n_acts; i++) {
    const struct ir_value *v = q->acts[i]->v;
    if ((v->producer ? v->producer->index : -1) != after) continue;
    if (qoperator) {
      qop_nodes(b, q->acts[i]);
      continue;
    }
    const char *x = v->name;
    bool out = v->flags & IR_VALUE_GRAPH_OUTPUT;
    struct part q_in[] = {{x, out ? "_QuantizeLinear_Input" : ""}, {x, "_scale"}, {x, "_zero_point"}};
    struct part q_out[] = {{x, "_QuantizeLinear_Output"}};
    new_node(b, "QuantizeLinear", (struct part){x, "_QuantizeLinear"}, q_in, 3, q_out, 1, NULL, 0);
    struct part d_in[] = {{x, "_QuantizeLinear_Output"}, {x, "_scale"}, {x, "_zero_point"}};
    struct part d_out[] = {{x, out ? "" : "_DequantizeLinear_Output"}};
    new_node(b, "DequantizeLinear", (struct part){x, "_DequantizeLinear"}, d_in, 3, d_out, 1, NULL, 0);
  }
}

/* The DequantizeLinear of each statically quantized weight of graph q. */
static void weight_dq_nodes(struct pbw *b, const struct qgraph *q) {
  for (size_t i = 0; i < q->n_home; i++) {
    const struct qweight *qw = q->home[i];
    if (qw->kind != Q_QDQ) continue;
    const char *w = qw->w->name;
    struct part in[] = {{w, "_quantized"}, {w, "_scale"}, {w, "_zero_point"}};
    struct part out[] = {{w, "_DequantizeLinear_Output"}};
    new_node(b, "DequantizeLinear", (struct part){w, "_DequantizeLinear"}, in, 3, out, 1,
             qw->per_column ? "axis" : NULL, 1);
  }
}

static void act_initializers(struct pbw *b, const struct qact *a) {
  int8_t zp = a->zp;
  new_initializer(b, a->v->name, "_scale", TOLK_FLOAT, NULL, 0, &a->scale, sizeof a->scale);
  new_initializer(b, a->v->name, "_zero_point", TOLK_INT8, NULL, 0, &zp, 1);
}

/* ------------------------------------------------------------ rewriting */

/* Whether v has a Q/DQ pair readers are renamed to (QDQ form only). */
static bool has_act(const struct wctx *w, const struct ir_value *v) {
  const struct qgraph *home = v && v->graph && !w->plan->qoperator ? qplan_graph(w->plan, v->graph) : NULL;
  return home && home->act[v->index];
}

/* The suffix node n's input v is read with instead of v itself: a Q/DQ'd
 * activation's or its own quantized weight's DequantizeLinear output; NULL
 * when v is read as it is (a graph output's DequantizeLinear writes v). */
static const char *renamed(const struct wctx *w, const struct ir_value *v, const struct qweight *own) {
  if (own && own->w == v) return "_DequantizeLinear_Output";
  return has_act(w, v) && !(v->flags & IR_VALUE_GRAPH_OUTPUT) ? "_DequantizeLinear_Output" : NULL;
}

/* The suffix node n's output v is written with: a Q/DQ'd graph output's
 * QuantizeLinear input; NULL for v itself. */
static const char *renamed_output(const struct wctx *w, const struct ir_value *v) {
  return has_act(w, v) && v->flags & IR_VALUE_GRAPH_OUTPUT ? "_QuantizeLinear_Input" : NULL;
}

static bool renames(const struct wctx *w, const struct ir_node *n, const struct qweight *own) {
  for (size_t i = 0; i < n->n_inputs; i++)
    if (renamed(w, n->inputs[i], own)) return true;
  for (size_t i = 0; i < n->n_outputs; i++)
    if (renamed_output(w, n->outputs[i])) return true;
  return false;
}

/* An AttributeProto of node n, its subgraphs rewritten. */
static void rewrite_attribute(struct wctx *w, const uint8_t *p, size_t len, const struct ir_node *n) {
  size_t name_len;
  const uint8_t *name = message_name(p, len, ATTR_NAME, &name_len);
  const struct ir_attr *a = NULL;
  for (size_t i = 0; name && i < n->n_attrs; i++)
    if (strlen(n->attrs[i].name) == name_len && !memcmp(n->attrs[i].name, name, name_len)) a = &n->attrs[i];
  struct walk k = walk_init(p, len);
  size_t j = 0;
  size_t m = pbw_begin(w->b, NODE_ATTRIBUTE);
  while (walk_next(&k)) {
    const struct pb_field *f = &k.f;
    const struct ir_graph *g = NULL;
    if (a && f->wire == PB_LEN && f->number == ATTR_G) g = ir_attr_graph(a, 0);
    if (a && f->wire == PB_LEN && f->number == ATTR_GRAPHS) g = ir_attr_graph(a, j++);
    if (g) rewrite_graph(w, f->number, f->data, f->len, g);
    else walk_copy(w->b, &k);
  }
  pbw_end(w->b, m);
}

static bool has_subgraphs(const struct ir_node *n) {
  for (size_t i = 0; i < n->n_attrs; i++)
    if (ir_attr_n_graphs(&n->attrs[i])) return true;
  return false;
}

/* Node n as stored, its subgraphs rewritten and the inputs and outputs
 * `renamed` and `renamed_output` say under their new names (`own`: its
 * quantized weight, or NULL). */
static void rewrite_node(struct wctx *w, const uint8_t *p, size_t len, const struct ir_node *n,
                         const struct qweight *own) {
  struct walk k = walk_init(p, len);
  const char *suffix;
  size_t m = pbw_begin(w->b, GRAPH_NODE), j = 0, o = 0;
  while (walk_next(&k)) {
    const struct pb_field *f = &k.f;
    bool is_len = f->wire == PB_LEN;
    if (is_len && f->number == NODE_ATTRIBUTE) rewrite_attribute(w, f->data, f->len, n);
    else if (is_len && f->number == NODE_INPUT && j < n->n_inputs && (suffix = renamed(w, n->inputs[j++], own)))
      name2(w->b, NODE_INPUT, n->inputs[j - 1]->name, suffix);
    else if (is_len && f->number == NODE_OUTPUT && o < n->n_outputs &&
             (suffix = renamed_output(w, n->outputs[o++])))
      name2(w->b, NODE_OUTPUT, n->outputs[o - 1]->name, suffix);
    else walk_copy(w->b, &k);
  }
  pbw_end(w->b, m);
}

static void rewrite_graph(struct wctx *w, uint32_t field, const uint8_t *p, size_t len, const struct ir_graph *g) {
  const struct qgraph *q = qplan_graph(w->plan, g);
  struct walk k = walk_init(p, len);
  size_t next = 0;
  size_t m = pbw_begin(w->b, field);
  while (walk_next(&k)) {
    const struct pb_field *f = &k.f;
    bool is_len = f->wire == PB_LEN;
    if (is_len && f->number == GRAPH_NODE && next < g->n_nodes) {
      size_t i = next++;
      const struct ir_node *n = g->nodes[i];
      const struct qweight *own = q->action[i] == Q_QDQ ? q->weight[i] : NULL;
      if (i == 0) {
        weight_dq_nodes(w->b, q);
        dql_nodes(w->b, q, -1);
        qdq_nodes(w->b, q, -1, w->plan->qoperator);
      }
      if (q->action[i] == Q_MATMUL) matmul_pattern(w->b, n, q->weight[i]);
      else if (q->action[i] == Q_QOP) qlinear_matmul(w->b, n, q->weight[i]);
      else if (q->action[i] && q->action[i] != Q_QDQ) direct_pattern(w->b, f->data, f->len, n, q->weight[i]);
      else if (has_subgraphs(n) || renames(w, n, own)) rewrite_node(w, f->data, f->len, n, own);
      else walk_copy(w->b, &k);
      dql_nodes(w->b, q, (int)i);
      qdq_nodes(w->b, q, (int)i, w->plan->qoperator);
    } else if (is_len && f->number == GRAPH_INITIALIZER &&
               names_dropped(w, g, f->data, f->len, TENSOR_NAME)) {
      continue;
    } else if (is_len && (f->number == GRAPH_INPUT || f->number == GRAPH_VALUE_INFO) &&
               names_dropped(w, g, f->data, f->len, 1)) {
      continue;
    } else {
      walk_copy(w->b, &k);
    }
  }
  for (size_t i = 0; i < q->n_home; i++) weight_initializers(w->b, q->home[i]);
  for (size_t i = 0; i < q->n_acts; i++) act_initializers(w->b, q->acts[i]);
  pbw_end(w->b, m);
}

void quantize_write(struct pbw *b, const tolk_model *m, const struct qplan *p) {
  struct wctx w = {b, p};
  struct walk k = walk_init(m->map, m->map_size);
  while (walk_next(&k)) {
    if (k.f.number == MODEL_GRAPH && k.f.wire == PB_LEN)
      rewrite_graph(&w, MODEL_GRAPH, k.f.data, k.f.len, m->ir.graph);
    else walk_copy(b, &k);
  }
}
