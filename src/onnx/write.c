/*
 * write.c — writes a loaded model back as a ModelProto after passes edited
 * its main graph in place (src/ir/rewrite.h): the other half of `tolk
 * optimize`, as quantize_write.c is of `tolk quantize`.
 *
 * The file's bytes stay the source: every field is copied as read (the
 * ones tolk does not know included) except
 *  - each graph's nodes, written in the IR's order: a node the file
 *    had (src_index >= 0) is its stored NodeProto with its input and output
 *    names taken from the IR (passes rewire them); a node a pass made is
 *    encoded from the IR;
 *  - initializers: a stored one is copied while the IR still holds it, and
 *    the ones passes made (folded constants) follow, encoded as raw_data;
 *  - value_info of a value no node writes any more is left out;
 *  - opset_import gains com.microsoft when a node of that domain appears.
 * and the same again, recursively, for every graph in a node's attributes
 * (If/Loop/Scan bodies), which passes edit as graphs of their own.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx.h"
#include "../core/pbw.h"

enum {
  MODEL_GRAPH = 7, MODEL_OPSET = 8, OPSET_DOMAIN = 1, OPSET_VERSION = 2,
  GRAPH_NODE = 1, GRAPH_INITIALIZER = 5, GRAPH_VALUE_INFO = 13, GRAPH_SPARSE_INITIALIZER = 15,
  SPARSE_VALUES = 1,
  NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5, NODE_DOMAIN = 7,
  ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_G = 6, ATTR_FLOATS = 7, ATTR_INTS = 8,
  ATTR_GRAPHS = 11, ATTR_TYPE = 20,
  TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW_DATA = 9,
  VALUE_INFO_NAME = 1
};

struct span {
  const uint8_t *p;
  size_t len;
};

/* The name field of message [p, p+len) as a span; len 0 when absent. */
static struct span name_of(const uint8_t *p, size_t len, uint32_t field) {
  struct pb r = pb_init(p, len);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r) && pb_next(&r, &f, &why))
    if (f.number == field && f.wire == PB_LEN) return (struct span){f.data, f.len};
  return (struct span){NULL, 0};
}

/* The value of graph g a stored message names, or NULL. */
static struct ir_value *named(const struct ir_graph *g, struct span s) {
  char buf[1024];
  if (!s.p || s.len >= sizeof buf) return NULL;
  memcpy(buf, s.p, s.len);
  buf[s.len] = 0;
  return ir_name_map_get(g->names, buf);
}

static void names(struct pbw *b, uint32_t field, struct ir_value *const *v, size_t n) {
  for (size_t i = 0; i < n; i++) pbw_string(b, field, v[i] ? v[i]->name : "");
}

static bool write_graph(struct pbw *b, uint32_t field, const uint8_t *p, size_t len, const struct ir_graph *g);

/* A stored AttributeProto of node n, the graphs in it written as the IR
 * now has them. */
static bool stored_attribute(struct pbw *b, struct span src, const struct ir_node *n) {
  struct span name = name_of(src.p, src.len, ATTR_NAME);
  const struct ir_attr *a = NULL;
  for (size_t i = 0; name.p && i < n->n_attrs; i++)
    if (strlen(n->attrs[i].name) == name.len && !memcmp(n->attrs[i].name, name.p, name.len)) a = &n->attrs[i];
  struct pb r = pb_init(src.p, src.len);
  struct pb_field f;
  const char *why;
  size_t j = 0;
  bool ok = true;
  size_t m = pbw_begin(b, NODE_ATTRIBUTE);
  while (!pb_eof(&r) && ok) {
    const uint8_t *start = r.p;
    if (!pb_next(&r, &f, &why)) break;
    const struct ir_graph *g = NULL;
    if (a && f.wire == PB_LEN && f.number == ATTR_G) g = ir_attr_graph(a, 0);
    if (a && f.wire == PB_LEN && f.number == ATTR_GRAPHS && j < ir_attr_n_graphs(a)) g = ir_attr_graph(a, j++);
    if (g) ok = write_graph(b, f.number, f.data, f.len, g);
    else pbw_copy(b, start, r.p);
  }
  pbw_end(b, m);
  return ok;
}

/* A stored node, its input and output names from the IR. */
static bool stored_node(struct pbw *b, struct span src, const struct ir_node *n) {
  struct pb r = pb_init(src.p, src.len);
  struct pb_field f;
  const char *why;
  bool in_done = false, out_done = false, ok = true;
  size_t m = pbw_begin(b, GRAPH_NODE);
  while (!pb_eof(&r) && ok) {
    const uint8_t *start = r.p;
    if (!pb_next(&r, &f, &why)) break; /* the loader read it: cannot happen */
    if (f.number == NODE_INPUT && f.wire == PB_LEN) {
      if (!in_done) names(b, NODE_INPUT, n->inputs, n->n_inputs);
      in_done = true;
    } else if (f.number == NODE_OUTPUT && f.wire == PB_LEN) {
      if (!out_done) names(b, NODE_OUTPUT, n->outputs, n->n_outputs);
      out_done = true;
    } else if (f.number == NODE_ATTRIBUTE && f.wire == PB_LEN) {
      ok = stored_attribute(b, (struct span){f.data, f.len}, n);
    } else {
      pbw_copy(b, start, r.p);
    }
  }
  pbw_end(b, m);
  return ok;
}

static void new_attr(struct pbw *b, const struct ir_attr *a) {
  size_t m = pbw_begin(b, NODE_ATTRIBUTE);
  pbw_string(b, ATTR_NAME, a->name);
  switch (a->type) {
  case IR_ATTR_FLOAT: pbw_float(b, ATTR_F, a->f); break;
  case IR_ATTR_INT: pbw_int(b, ATTR_I, a->i); break;
  case IR_ATTR_STRING: pbw_bytes(b, ATTR_S, a->s.data, a->s.len); break;
  case IR_ATTR_FLOATS:
    for (size_t i = 0; i < a->n; i++) pbw_float(b, ATTR_FLOATS, a->floats[i]);
    break;
  case IR_ATTR_INTS:
    for (size_t i = 0; i < a->n; i++) pbw_int(b, ATTR_INTS, a->ints[i]);
    break;
  default: break; /* passes make only the kinds above */
  }
  pbw_int(b, ATTR_TYPE, a->type);
  pbw_end(b, m);
}

static void new_node(struct pbw *b, const struct ir_node *n) {
  size_t m = pbw_begin(b, GRAPH_NODE);
  names(b, NODE_INPUT, n->inputs, n->n_inputs);
  names(b, NODE_OUTPUT, n->outputs, n->n_outputs);
  pbw_string(b, NODE_NAME, n->name);
  pbw_string(b, NODE_OP_TYPE, n->op_type);
  for (size_t i = 0; i < n->n_attrs; i++) new_attr(b, &n->attrs[i]);
  if (*n->domain) pbw_string(b, NODE_DOMAIN, n->domain);
  pbw_end(b, m);
}

static void new_initializer(struct pbw *b, const struct ir_value *v) {
  const struct ir_tensor *t = v->init;
  size_t m = pbw_begin(b, GRAPH_INITIALIZER);
  for (int i = 0; i < t->rank; i++) pbw_int(b, TENSOR_DIMS, t->dims[i]);
  pbw_int(b, TENSOR_DATA_TYPE, t->dtype);
  pbw_string(b, TENSOR_NAME, v->name);
  pbw_bytes(b, TENSOR_RAW_DATA, t->data, t->nbytes);
  pbw_end(b, m);
}

/* The stored NodeProtos of the main graph, in file order. */
static struct span *stored_nodes(const uint8_t *p, size_t len, size_t *n_out) {
  struct pb r = pb_init(p, len);
  struct pb_field f;
  const char *why;
  size_t n = 0, k = 0;
  while (!pb_eof(&r) && pb_next(&r, &f, &why)) n += f.number == GRAPH_NODE && f.wire == PB_LEN;
  struct span *s = calloc(n ? n : 1, sizeof *s);
  if (!s) return NULL;
  r = pb_init(p, len);
  while (!pb_eof(&r) && pb_next(&r, &f, &why))
    if (f.number == GRAPH_NODE && f.wire == PB_LEN) s[k++] = (struct span){f.data, f.len};
  *n_out = n;
  return s;
}

static bool all_nodes(struct pbw *b, const struct ir_graph *g, const struct span *src, size_t n_src) {
  bool ok = true;
  for (size_t k = 0; k < g->n_nodes && ok; k++) {
    const struct ir_node *n = g->nodes[k];
    if (n->src_index >= 0 && (size_t)n->src_index < n_src) ok = stored_node(b, src[n->src_index], n);
    else new_node(b, n);
  }
  return ok;
}

/* Whether a value a stored value_info names still exists. */
static bool alive(const struct ir_value *v) {
  return v && (v->producer || (v->flags & (IR_VALUE_INITIALIZER | IR_VALUE_GRAPH_INPUT)));
}

static bool write_graph(struct pbw *b, uint32_t field, const uint8_t *p, size_t len, const struct ir_graph *g) {
  size_t n_src = 0;
  struct span *src = stored_nodes(p, len, &n_src);
  bool *written = calloc(g->n_values ? g->n_values : 1, sizeof *written);
  if (!src || !written) {
    free(src);
    free(written);
    return false;
  }
  struct pb r = pb_init(p, len);
  struct pb_field f;
  const char *why;
  bool nodes_done = false, ok = true;
  size_t m = pbw_begin(b, field);
  while (!pb_eof(&r) && ok) {
    const uint8_t *start = r.p;
    if (!pb_next(&r, &f, &why)) break;
    bool is_len = f.wire == PB_LEN;
    if (is_len && f.number == GRAPH_NODE) {
      if (!nodes_done) ok = all_nodes(b, g, src, n_src);
      nodes_done = true;
    } else if (is_len && (f.number == GRAPH_INITIALIZER || f.number == GRAPH_SPARSE_INITIALIZER)) {
      /* A sparse one is named by its values tensor; the IR holds it dense,
       * so it is copied sparse (or dropped), never written again. */
      struct span t = f.number == GRAPH_INITIALIZER ? (struct span){f.data, f.len}
                                                    : name_of(f.data, f.len, SPARSE_VALUES);
      struct ir_value *v = t.p ? named(g, name_of(t.p, t.len, TENSOR_NAME)) : NULL;
      if (v && (v->flags & IR_VALUE_INITIALIZER) && !v->producer && !written[v->index]) {
        written[v->index] = true;
        pbw_copy(b, start, r.p);
      }
    } else if (is_len && f.number == GRAPH_VALUE_INFO) {
      if (alive(named(g, name_of(f.data, f.len, VALUE_INFO_NAME)))) pbw_copy(b, start, r.p);
    } else {
      pbw_copy(b, start, r.p);
    }
  }
  if (!nodes_done && ok) ok = all_nodes(b, g, src, n_src);
  for (size_t i = 0; i < g->n_initializers; i++)
    if (!written[g->initializers[i]->index]) new_initializer(b, g->initializers[i]);
  pbw_end(b, m);
  free(src);
  free(written);
  return ok;
}

static bool uses_domain(const struct ir_graph *g, const char *domain) {
  for (size_t k = 0; k < g->n_nodes; k++) {
    const struct ir_node *n = g->nodes[k];
    if (!strcmp(n->domain, domain)) return true;
    for (size_t a = 0; a < n->n_attrs; a++)
      for (size_t j = 0; j < ir_attr_n_graphs(&n->attrs[a]); j++) {
        const struct ir_graph *s = ir_attr_graph(&n->attrs[a], j);
        if (s && uses_domain(s, domain)) return true;
      }
  }
  return false;
}

tolk_status onnx_write_model(struct pbw *b, const tolk_model *m, tolk_error *err) {
  const struct ir_model *ir = &m->ir;
  struct pb r = pb_init(m->map, m->map_size);
  struct pb_field f;
  const char *why;
  bool ok = true;
  while (!pb_eof(&r)) {
    const uint8_t *start = r.p;
    if (!pb_next(&r, &f, &why)) break;
    if (f.number == MODEL_GRAPH && f.wire == PB_LEN)
      ok = ok && write_graph(b, MODEL_GRAPH, f.data, f.len, ir->graph);
    else pbw_copy(b, start, r.p);
  }
  if (uses_domain(ir->graph, "com.microsoft") && !ir_model_opset(ir, "com.microsoft")) {
    size_t o = pbw_begin(b, MODEL_OPSET);
    pbw_string(b, OPSET_DOMAIN, "com.microsoft");
    pbw_int(b, OPSET_VERSION, 1);
    pbw_end(b, o);
  }
  if (!ok) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory while writing the model");
  return pbw_status(b, "the optimized model", err);
}
