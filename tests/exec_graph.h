/*
 * exec_graph.h — builds small IR models by hand for the executor's tests, so
 * they exercise sessions, planning and threads without the ONNX loader, with
 * kernels of their own (passed to exec_session_create_ir as `extra`).
 * Capacities are fixed and generous; tests are small.
 */
#ifndef TOLK_TEST_EXEC_GRAPH_H
#define TOLK_TEST_EXEC_GRAPH_H

#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "ir/ir.h"

enum { TB_CAP = 128 };

static inline struct ir_model *tb_model(void) {
  struct ir_model *m = calloc(1, sizeof *m);
  tolk_arena_init(&m->arena, 0);
  m->ir_version = 8;
  m->opsets = tolk_arena_array(&m->arena, 3, sizeof *m->opsets);
  m->opsets[0].domain = "";
  m->opsets[0].version = 17;
  m->opsets[1].domain = "test";
  m->opsets[1].version = 1;
  m->n_opsets = 2;
  return m;
}

static inline void tb_free(struct ir_model *m) {
  if (!m) return;
  tolk_arena_release(&m->arena);
  free(m);
}

static inline struct ir_graph *tb_graph(struct ir_model *m, struct ir_graph *parent, const char *name) {
  struct ir_graph *g = tolk_arena_alloc(&m->arena, sizeof *g);
  g->name = name;
  g->parent = parent;
  g->depth = parent ? parent->depth + 1 : 0;
  g->nodes = tolk_arena_array(&m->arena, TB_CAP, sizeof(void *));
  g->inputs = tolk_arena_array(&m->arena, TB_CAP, sizeof(void *));
  g->outputs = tolk_arena_array(&m->arena, TB_CAP, sizeof(void *));
  g->initializers = tolk_arena_array(&m->arena, TB_CAP, sizeof(void *));
  g->values = tolk_arena_array(&m->arena, TB_CAP, sizeof(void *));
  if (!parent) m->graph = g;
  return g;
}

static inline struct ir_value *tb_find(struct ir_graph *g, const char *name) {
  for (; g; g = g->parent)
    for (size_t i = 0; i < g->n_values; i++)
      if (!strcmp(g->values[i]->name, name)) return g->values[i];
  return NULL;
}

static inline struct ir_value *tb_new_value(struct ir_model *m, struct ir_graph *g, const char *name) {
  struct ir_value *v = tolk_arena_alloc(&m->arena, sizeof *v);
  v->name = tolk_arena_strndup(&m->arena, name, strlen(name));
  v->graph = g;
  v->index = (int)g->n_values;
  v->type.rank = -1;
  g->values[g->n_values++] = v;
  return v;
}

/* dims: -1 with names[d] != NULL is symbolic, -1 without a name unknown. */
static inline struct ir_value *tb_input(struct ir_model *m, struct ir_graph *g, const char *name,
                                 int dtype, int rank, const int64_t *dims,
                                 const char *const *names) {
  struct ir_value *v = tb_new_value(m, g, name);
  v->flags |= IR_VALUE_GRAPH_INPUT;
  v->type.kind = IR_TYPE_TENSOR;
  v->type.dtype = dtype;
  v->type.rank = rank;
  if (rank > 0) {
    v->type.dims = tolk_arena_array(&m->arena, (size_t)rank, sizeof *v->type.dims);
    for (int d = 0; d < rank; d++) {
      v->type.dims[d].value = dims[d];
      v->type.dims[d].param = names ? names[d] : NULL;
    }
  }
  g->inputs[g->n_inputs++] = v;
  return v;
}

static inline struct ir_value *tb_init(struct ir_model *m, struct ir_graph *g, const char *name,
                                int dtype, int rank, const int64_t *dims, const void *data,
                                size_t nbytes) {
  struct ir_value *v = tb_new_value(m, g, name);
  v->flags |= IR_VALUE_INITIALIZER;
  struct ir_tensor *t = tolk_arena_alloc(&m->arena, sizeof *t);
  t->name = v->name;
  t->dtype = dtype;
  t->rank = rank;
  t->dims = tolk_arena_array(&m->arena, rank ? (size_t)rank : 1, sizeof *t->dims);
  t->numel = 1;
  for (int d = 0; d < rank; d++) {
    t->dims[d] = dims[d];
    t->numel *= dims[d];
  }
  void *copy = tolk_arena_alloc(&m->arena, nbytes ? nbytes : 1);
  if (nbytes) memcpy(copy, data, nbytes);
  t->data = nbytes ? copy : NULL;
  t->nbytes = nbytes;
  v->init = t;
  v->type.kind = IR_TYPE_TENSOR;
  v->type.dtype = dtype;
  g->initializers[g->n_initializers++] = v;
  return v;
}

static inline void tb_output(struct ir_graph *g, const char *name) {
  struct ir_value *v = tb_find(g, name);
  if (v->graph == g) v->flags |= IR_VALUE_GRAPH_OUTPUT;
  g->outputs[g->n_outputs++] = v;
}

/* Splits "a,b,,c" (empty = omitted) into values: inputs are looked up in
 * scope; outputs are created in g. */
static inline size_t tb_names(struct ir_model *m, struct ir_graph *g, const char *list, bool out,
                       struct ir_value ***arr) {
  *arr = tolk_arena_array(&m->arena, 16, sizeof(void *));
  size_t n = 0;
  if (!list || !*list) return 0;
  const char *p = list;
  for (;;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char name[64];
    memcpy(name, p, len);
    name[len] = '\0';
    struct ir_value *v = NULL;
    if (len) {
      if (out) {
        v = tb_new_value(m, g, name);
      } else {
        v = tb_find(g, name);
        if (!v) { /* dangling: an undefined value, as the loader makes */
          v = tb_new_value(m, g, name);
          v->flags |= IR_VALUE_UNDEFINED;
        } else if (v->graph != g) {
          v->flags |= 0;
        }
      }
    }
    (*arr)[n++] = v;
    if (!e) break;
    p = e + 1;
  }
  return n;
}

static inline struct ir_node *tb_node(struct ir_model *m, struct ir_graph *g, const char *op,
                               const char *domain, const char *name, const char *ins,
                               const char *outs) {
  struct ir_node *n = tolk_arena_alloc(&m->arena, sizeof *n);
  n->op_type = op;
  n->domain = domain;
  n->name = name;
  n->graph = g;
  n->index = (int)g->n_nodes;
  n->opset = !strcmp(domain, "test") ? 1 : 17;
  n->n_inputs = tb_names(m, g, ins, false, &n->inputs);
  n->n_outputs = tb_names(m, g, outs, true, &n->outputs);
  for (size_t i = 0; i < n->n_outputs; i++)
    if (n->outputs[i]) {
      n->outputs[i]->producer = n;
      n->outputs[i]->producer_output = (int)i;
    }
  n->attrs = tolk_arena_array(&m->arena, 8, sizeof *n->attrs);
  g->nodes[g->n_nodes++] = n;
  return n;
}

static inline void tb_attr_int(struct ir_node *n, const char *name, int64_t v) {
  struct ir_attr *a = &n->attrs[n->n_attrs++];
  a->name = name;
  a->type = IR_ATTR_INT;
  a->i = v;
}

static inline void tb_attr_float(struct ir_node *n, const char *name, float v) {
  struct ir_attr *a = &n->attrs[n->n_attrs++];
  a->name = name;
  a->type = IR_ATTR_FLOAT;
  a->f = v;
}

static inline void tb_attr_graph(struct ir_node *n, const char *name, struct ir_graph *sub) {
  struct ir_attr *a = &n->attrs[n->n_attrs++];
  a->name = name;
  a->type = IR_ATTR_GRAPH;
  a->g = sub;
  sub->owner = n;
}

/* A float tensor of shape dims holding `data` (copied). */
static inline tolk_tensor *tb_tensor(int rank, const int64_t *dims, const float *data) {
  tolk_tensor *t = NULL;
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  tolk_tensor_create(TOLK_FLOAT, rank, dims, data, (size_t)n * sizeof(float), &t, NULL);
  return t;
}

#endif /* TOLK_TEST_EXEC_GRAPH_H */
