/*
 * info.c — the public read-only view of a loaded model (tolk.h, "model
 * introspection"): the IR's graphs, nodes and values handed out as opaque
 * handles, and small descriptions filled from them.
 *
 * A handle is the IR struct's own address under a public incomplete type, so
 * handing one out costs nothing and needs no storage in the (immutable,
 * shared) model; the casts below are the only place the two names meet.
 * Descriptions are returned by value for the same reason.
 */
#include <string.h>

#include "onnx.h"

static const struct ir_graph *graph_of(const tolk_graph *g) {
  return (const struct ir_graph *)(const void *)g;
}
static const struct ir_node *node_of(const tolk_node *n) {
  return (const struct ir_node *)(const void *)n;
}
static const struct ir_value *value_of(const tolk_value *v) {
  return (const struct ir_value *)(const void *)v;
}
static const tolk_graph *graph_handle(const struct ir_graph *g) {
  return (const tolk_graph *)(const void *)g;
}
static const tolk_node *node_handle(const struct ir_node *n) {
  return (const tolk_node *)(const void *)n;
}
static const tolk_value *value_handle(const struct ir_value *v) {
  return (const tolk_value *)(const void *)v;
}

/* ------------------------------------------------------------ model */

tolk_model_info tolk_model_describe(const tolk_model *model) {
  tolk_model_info info = {0};
  if (!model) return info;
  const struct ir_model *m = &model->ir;
  info.ir_version = m->ir_version;
  info.producer_name = m->producer_name;
  info.producer_version = m->producer_version;
  info.domain = m->domain;
  info.model_version = m->model_version;
  info.file_bytes = m->file_size;
  info.graph = graph_handle(m->graph);
  info.max_depth = m->max_depth_seen;
  info.n_opsets = m->n_opsets;
  info.n_metadata = m->n_metadata;
  info.n_functions = m->n_functions;
  return info;
}

const char *tolk_model_opset(const tolk_model *model, size_t i, int64_t *version) {
  if (!model || i >= model->ir.n_opsets) return NULL;
  if (version) *version = model->ir.opsets[i].version;
  return model->ir.opsets[i].domain;
}

const char *tolk_model_metadata(const tolk_model *model, size_t i, const char **value) {
  if (!model || i >= model->ir.n_metadata) return NULL;
  if (value) *value = model->ir.metadata[i].value;
  return model->ir.metadata[i].key;
}

tolk_function_info tolk_model_function(const tolk_model *model, size_t i) {
  tolk_function_info info = {0};
  if (!model || i >= model->ir.n_functions) return info;
  const struct ir_function *f = &model->ir.functions[i];
  info.domain = f->domain;
  info.name = f->name;
  info.body = graph_handle(f->body);
  return info;
}

/* ------------------------------------------------------------ graphs */

tolk_graph_info tolk_graph_describe(const tolk_graph *graph) {
  tolk_graph_info info = {0};
  const struct ir_graph *g = graph_of(graph);
  if (!g) return info;
  info.name = g->name;
  info.depth = g->depth;
  info.owner = node_handle(g->owner);
  info.n_inputs = g->n_inputs;
  info.n_outputs = g->n_outputs;
  info.n_initializers = g->n_initializers;
  info.n_nodes = g->n_nodes;
  info.n_values = g->n_values;
  info.n_outer_refs = g->n_outer_refs;
  return info;
}

const tolk_value *tolk_graph_input(const tolk_graph *graph, size_t i) {
  const struct ir_graph *g = graph_of(graph);
  return g && i < g->n_inputs ? value_handle(g->inputs[i]) : NULL;
}

const tolk_value *tolk_graph_output(const tolk_graph *graph, size_t i) {
  const struct ir_graph *g = graph_of(graph);
  return g && i < g->n_outputs ? value_handle(g->outputs[i]) : NULL;
}

const tolk_value *tolk_graph_initializer(const tolk_graph *graph, size_t i) {
  const struct ir_graph *g = graph_of(graph);
  return g && i < g->n_initializers ? value_handle(g->initializers[i]) : NULL;
}

const tolk_value *tolk_graph_value(const tolk_graph *graph, size_t i) {
  const struct ir_graph *g = graph_of(graph);
  return g && i < g->n_values ? value_handle(g->values[i]) : NULL;
}

const tolk_node *tolk_graph_node(const tolk_graph *graph, size_t i) {
  const struct ir_graph *g = graph_of(graph);
  return g && i < g->n_nodes ? node_handle(g->nodes[i]) : NULL;
}

/* ------------------------------------------------------------ nodes */

static size_t n_subgraphs(const struct ir_node *n) {
  size_t count = 0;
  for (size_t a = 0; a < n->n_attrs; a++)
    for (size_t j = 0; j < ir_attr_n_graphs(&n->attrs[a]); j++) count += ir_attr_graph(&n->attrs[a], j) != NULL;
  return count;
}

tolk_node_info tolk_node_describe(const tolk_node *node) {
  tolk_node_info info = {0};
  const struct ir_node *n = node_of(node);
  if (!n) return info;
  info.name = n->name;
  info.op_type = n->op_type;
  info.domain = n->domain;
  info.graph = graph_handle(n->graph);
  info.index = (size_t)n->index;
  info.n_inputs = n->n_inputs;
  info.n_outputs = n->n_outputs;
  info.n_subgraphs = n_subgraphs(n);
  return info;
}

const tolk_value *tolk_node_input(const tolk_node *node, size_t i) {
  const struct ir_node *n = node_of(node);
  return n && i < n->n_inputs ? value_handle(n->inputs[i]) : NULL;
}

const tolk_value *tolk_node_output(const tolk_node *node, size_t i) {
  const struct ir_node *n = node_of(node);
  return n && i < n->n_outputs ? value_handle(n->outputs[i]) : NULL;
}

/* A GRAPH attribute may hold no graph; such holes are not counted, so the
 * i-th subgraph is found by walking the attributes. */
const tolk_graph *tolk_node_subgraph(const tolk_node *node, size_t i, const char **attr) {
  const struct ir_node *n = node_of(node);
  for (size_t a = 0; n && a < n->n_attrs; a++)
    for (size_t j = 0; j < ir_attr_n_graphs(&n->attrs[a]); j++) {
      const struct ir_graph *g = ir_attr_graph(&n->attrs[a], j);
      if (!g || i--) continue;
      if (attr) *attr = n->attrs[a].name;
      return graph_handle(g);
    }
  return NULL;
}

/* ------------------------------------------------------------ values */

/* tolk_type_kind is numbered as the IR's kinds, so describing is a cast. */
_Static_assert((int)TOLK_TYPE_NONE == IR_TYPE_NONE && (int)TOLK_TYPE_TENSOR == IR_TYPE_TENSOR &&
                   (int)TOLK_TYPE_SPARSE_TENSOR == IR_TYPE_SPARSE_TENSOR &&
                   (int)TOLK_TYPE_SEQUENCE == IR_TYPE_SEQUENCE && (int)TOLK_TYPE_MAP == IR_TYPE_MAP &&
                   (int)TOLK_TYPE_OPTIONAL == IR_TYPE_OPTIONAL,
               "tolk_type_kind and enum ir_type_kind differ");

tolk_value_desc tolk_value_describe(const tolk_value *value) {
  tolk_value_desc d = {0};
  const struct ir_value *v = value_of(value);
  d.rank = -1;
  if (!v) return d;
  d.name = v->name;
  d.kind = (tolk_type_kind)v->type.kind;
  d.dtype = (tolk_dtype)v->type.dtype;
  d.rank = v->type.rank;
  d.flags = (v->flags & IR_VALUE_GRAPH_INPUT ? TOLK_VALUE_GRAPH_INPUT : 0u) |
            (v->flags & IR_VALUE_GRAPH_OUTPUT ? TOLK_VALUE_GRAPH_OUTPUT : 0u) |
            (v->flags & IR_VALUE_INITIALIZER ? TOLK_VALUE_INITIALIZER : 0u) |
            (v->flags & IR_VALUE_UNDEFINED ? TOLK_VALUE_UNDEFINED : 0u);
  d.graph = graph_handle(v->graph);
  d.index = (size_t)v->index;
  d.producer = node_handle(v->producer);
  return d;
}

int64_t tolk_value_dim(const tolk_value *value, int i, const char **symbol) {
  const struct ir_value *v = value_of(value);
  if (symbol) *symbol = NULL;
  if (!v || i < 0 || i >= v->type.rank) return -1;
  const struct ir_dim *d = &v->type.dims[i];
  if (symbol && d->param && d->param[0]) *symbol = d->param;
  return d->value >= 0 ? d->value : -1;
}

tolk_initializer_info tolk_value_initializer(const tolk_value *value) {
  tolk_initializer_info info = {0};
  const struct ir_value *v = value_of(value);
  info.rank = -1;
  if (!v || !(v->flags & IR_VALUE_INITIALIZER) || !v->init) return info;
  const struct ir_tensor *t = v->init;
  info.dtype = (tolk_dtype)t->dtype;
  info.rank = t->rank;
  info.dims = t->dims;
  info.numel = t->numel;
  info.nbytes = t->nbytes;
  info.external_file = t->location == IR_DATA_EXTERNAL ? t->ext_location : NULL;
  return info;
}
