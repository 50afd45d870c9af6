/*
 * rewrite.c — in-place editing of a model's graphs (rewrite.h) and the
 * passes that need no kernels: dead-node removal, common-subexpression
 * elimination, Constant nodes and static Shape replacement, as ONNX Runtime's basic level
 * has them (onnxruntime/core/optimizer: the graph's dead-node removal,
 * common_subexpression_elimination.cc, constant_folding.cc's Shape case).
 */
#include "rewrite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_subgraphs(const struct ir_node *n) {
  for (size_t i = 0; i < n->n_attrs; i++)
    if (ir_attr_n_graphs(&n->attrs[i])) return true;
  return false;
}

static bool grow_tables(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  if (g->n_values > rw->cap_values || !rw->uses) {
    size_t cap = g->n_values * 2 + 16;
    uint32_t *u = realloc(rw->uses, cap * sizeof *u);
    if (u) rw->uses = u;
    uint8_t *p = realloc(rw->pinned, cap);
    if (p) rw->pinned = p;
    if (!u || !p) return false;
    struct ir_value **vals = tolk_arena_array(&rw->m->arena, cap, sizeof *vals);
    if (!vals) return false;
    if (g->n_values) memcpy(vals, g->values, g->n_values * sizeof *vals);
    g->values = vals;
    rw->cap_values = cap;
  }
  if (g->n_nodes > rw->cap_nodes || !rw->dead) {
    size_t cap = g->n_nodes + 16;
    free(rw->dead);
    free(rw->placed);
    rw->dead = calloc(cap, sizeof *rw->dead);
    rw->placed = calloc(cap, sizeof *rw->placed);
    if (!rw->dead || !rw->placed) return false;
    rw->cap_nodes = cap;
  }
  return true;
}

bool ir_rw_count(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  if (!grow_tables(rw)) return !(rw->oom = true);
  memset(rw->uses, 0, rw->cap_values * sizeof *rw->uses);
  memset(rw->pinned, 0, rw->cap_values);
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i]->graph == g) rw->pinned[g->outputs[i]->index] = 1;
  for (size_t k = 0; k < g->n_nodes; k++) {
    const struct ir_node *n = g->nodes[k];
    if (rw->dead[k]) continue;
    for (size_t i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] && n->inputs[i]->graph == g) rw->uses[n->inputs[i]->index]++;
    for (size_t a = 0; a < n->n_attrs; a++)
      for (size_t j = 0; j < ir_attr_n_graphs(&n->attrs[a]); j++) {
        const struct ir_graph *s = ir_attr_graph(&n->attrs[a], j);
        for (size_t o = 0; s && o < s->n_outer_refs; o++)
          if (s->outer_refs[o]->graph == g) {
            rw->uses[s->outer_refs[o]->index]++;
            rw->pinned[s->outer_refs[o]->index] = 1;
          }
      }
  }
  return true;
}

bool ir_rw_begin(struct ir_rw *rw, struct ir_model *m, struct ir_graph *g) {
  memset(rw, 0, sizeof *rw);
  rw->m = m;
  rw->g = g;
  rw->cap_inits = g->n_initializers;
  return ir_rw_count(rw);
}

void ir_rw_end(struct ir_rw *rw) {
  free(rw->uses);
  free(rw->pinned);
  free(rw->dead);
  free(rw->placed);
  memset(rw, 0, sizeof *rw);
}

size_t ir_rw_live_nodes(const struct ir_rw *rw) {
  size_t n = 0;
  for (size_t k = 0; k < rw->g->n_nodes; k++) n += !rw->dead[k];
  return n;
}

struct ir_node *ir_rw_sole_reader(const struct ir_rw *rw, const struct ir_value *v) {
  const struct ir_graph *g = rw->g;
  if (v->graph != g || rw->pinned[v->index] || rw->uses[v->index] != 1) return NULL;
  for (size_t k = 0; k < g->n_nodes; k++) {
    if (rw->dead[k]) continue;
    for (size_t i = 0; i < g->nodes[k]->n_inputs; i++)
      if (g->nodes[k]->inputs[i] == v) return g->nodes[k];
  }
  return NULL;
}

void ir_rw_kill(struct ir_rw *rw, struct ir_node *n) {
  rw->dead[n->index] = true;
  for (size_t i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && n->inputs[i]->graph == rw->g && rw->uses[n->inputs[i]->index])
      rw->uses[n->inputs[i]->index]--;
  for (size_t i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] && n->outputs[i]->producer == n) n->outputs[i]->producer = NULL;
}

struct ir_value *ir_rw_value(struct ir_rw *rw, const char *base, const char *suffix) {
  struct ir_graph *g = rw->g;
  char name[512];
  snprintf(name, sizeof name, "%s%s", base, suffix);
  while (ir_lookup(g, name)) snprintf(name, sizeof name, "%s%s_%d", base, suffix, ++rw->serial);
  struct ir_value *v = tolk_arena_alloc(&rw->m->arena, sizeof *v);
  char *nm = v ? tolk_arena_strndup(&rw->m->arena, name, strlen(name)) : NULL;
  bool ok = nm != NULL;
  if (ok && g->n_values + 1 > rw->cap_values) {
    g->n_values++; /* grow_tables sizes the tables for one more */
    ok = grow_tables(rw);
    g->n_values--;
  }
  if (!ok) {
    rw->oom = true;
    return NULL;
  }
  v->name = nm;
  v->type.rank = -1;
  v->graph = g;
  v->index = (int)g->n_values;
  if (!ir_name_map_put(g->names, nm, v, NULL)) {
    rw->oom = true;
    return NULL;
  }
  g->values[g->n_values++] = v;
  rw->uses[v->index] = 0;
  rw->pinned[v->index] = 0;
  return v;
}

struct ir_node *ir_rw_node(struct ir_rw *rw, struct ir_node *where, const char *op_type,
                           const char *domain, const char *name, struct ir_value *const *in,
                           size_t n_in, struct ir_value *const *out, size_t n_out, size_t n_attrs) {
  struct tolk_arena *a = &rw->m->arena;
  struct ir_node *n = tolk_arena_alloc(a, sizeof *n);
  n->inputs = n ? tolk_arena_array(a, n_in ? n_in : 1, sizeof *n->inputs) : NULL;
  n->outputs = n ? tolk_arena_array(a, n_out ? n_out : 1, sizeof *n->outputs) : NULL;
  n->attrs = n ? tolk_arena_array(a, n_attrs ? n_attrs : 1, sizeof *n->attrs) : NULL;
  n->name = n ? tolk_arena_strndup(a, name, strlen(name)) : NULL;
  if (!n || !n->inputs || !n->outputs || !n->attrs || !n->name) {
    rw->oom = true;
    return NULL;
  }
  n->op_type = op_type;
  n->domain = domain;
  n->opset = (int)ir_model_opset(rw->m, domain);
  if (!n->opset && *domain) n->opset = 1;
  memcpy(n->inputs, in, n_in * sizeof *in);
  memcpy(n->outputs, out, n_out * sizeof *out);
  n->n_inputs = n_in;
  n->n_outputs = n_out;
  n->n_attrs = n_attrs;
  n->graph = rw->g;
  n->index = where->index;
  n->src_index = -1;
  n->doc = "";
  for (size_t i = 0; i < n_in; i++)
    if (in[i] && in[i]->graph == rw->g) rw->uses[in[i]->index]++;
  for (size_t i = 0; i < n_out; i++) {
    if (!out[i]) continue;
    out[i]->producer = n;
    out[i]->producer_output = (int)i;
  }
  rw->placed[where->index] = n;
  return n;
}

const char *ir_rw_node_name(struct ir_rw *rw, const char *anchor, const char *fusion, char *buf, size_t n) {
  const struct ir_graph *g = rw->g;
  if (*anchor) snprintf(buf, n, "%s/%s/", anchor, fusion);
  else snprintf(buf, n, "%s_%d", fusion, ++rw->serial);
  for (size_t k = 0; k < g->n_nodes; k++) {
    if (strcmp(g->nodes[k]->name, buf) && (!rw->placed[k] || strcmp(rw->placed[k]->name, buf))) continue;
    snprintf(buf, n, "%s/%s_%d/", anchor, fusion, ++rw->serial);
    k = (size_t)-1; /* check the new name from the start */
  }
  return buf;
}

void ir_rw_attr_int(struct ir_node *n, size_t k, const char *name, int64_t v) {
  n->attrs[k].name = name;
  n->attrs[k].type = IR_ATTR_INT;
  n->attrs[k].i = v;
}

void ir_rw_attr_float(struct ir_node *n, size_t k, const char *name, float v) {
  n->attrs[k].name = name;
  n->attrs[k].type = IR_ATTR_FLOAT;
  n->attrs[k].f = v;
}

bool ir_rw_attr_ints(struct ir_rw *rw, struct ir_node *n, size_t k, const char *name, const int64_t *v, size_t len) {
  int64_t *copy = tolk_arena_array(&rw->m->arena, len ? len : 1, sizeof *copy);
  if (!copy) return !(rw->oom = true);
  if (len) memcpy(copy, v, len * sizeof *v);
  n->attrs[k].name = name;
  n->attrs[k].type = IR_ATTR_INTS;
  n->attrs[k].ints = copy;
  n->attrs[k].n = len;
  return true;
}

void ir_rw_replace_uses(struct ir_rw *rw, struct ir_value *from, struct ir_value *to) {
  struct ir_graph *g = rw->g;
  for (size_t k = 0; k < g->n_nodes; k++) {
    if (rw->dead[k]) continue;
    struct ir_node *n = g->nodes[k];
    for (size_t i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] == from) {
        n->inputs[i] = to;
        rw->uses[from->index]--;
        rw->uses[to->index]++;
      }
  }
}

struct ir_tensor *ir_rw_tensor(struct ir_rw *rw, int32_t dtype, const int64_t *dims, int rank,
                               const void *data, size_t nbytes) {
  struct tolk_arena *a = &rw->m->arena;
  struct ir_tensor *t = tolk_arena_alloc(a, sizeof *t);
  if (t) t->dims = tolk_arena_array(a, rank ? (size_t)rank : 1, sizeof *t->dims);
  void *d = t && t->dims && nbytes ? tolk_arena_alloc(a, nbytes) : NULL;
  if (!t || !t->dims || (nbytes && !d)) {
    rw->oom = true;
    return NULL;
  }
  t->dtype = dtype;
  t->rank = rank;
  t->numel = 1;
  for (int i = 0; i < rank; i++) {
    t->dims[i] = dims[i];
    t->numel *= dims[i];
  }
  if (nbytes) memcpy(d, data, nbytes);
  t->data = d;
  t->nbytes = nbytes;
  t->ext_offset = t->ext_length = -1;
  return t;
}

bool ir_rw_make_initializer(struct ir_rw *rw, struct ir_value *v, struct ir_tensor *t) {
  struct ir_graph *g = rw->g;
  if (g->n_initializers + 1 > rw->cap_inits) {
    size_t cap = rw->cap_inits * 2 + 16;
    struct ir_value **ni = tolk_arena_array(&rw->m->arena, cap, sizeof *ni);
    if (!ni) return !(rw->oom = true);
    if (g->n_initializers) memcpy(ni, g->initializers, g->n_initializers * sizeof *ni);
    g->initializers = ni;
    rw->cap_inits = cap;
  }
  t->name = v->name;
  v->init = t;
  v->flags |= IR_VALUE_INITIALIZER;
  v->producer = NULL;
  g->initializers[g->n_initializers++] = v;
  return true;
}

bool ir_rw_commit(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  size_t n = 0;
  for (size_t k = 0; k < g->n_nodes; k++) n += (rw->placed[k] != NULL) + !rw->dead[k];
  struct ir_node **nodes = tolk_arena_array(&rw->m->arena, n ? n : 1, sizeof *nodes);
  if (!nodes) return !(rw->oom = true);
  size_t j = 0;
  for (size_t k = 0; k < g->n_nodes; k++) {
    if (rw->placed[k]) nodes[j++] = rw->placed[k];
    if (!rw->dead[k]) nodes[j++] = g->nodes[k];
  }
  for (size_t k = 0; k < n; k++) nodes[k]->index = (int)k;
  g->nodes = nodes;
  g->n_nodes = n;
  memset(rw->dead, 0, rw->cap_nodes * sizeof *rw->dead);
  memset(rw->placed, 0, rw->cap_nodes * sizeof *rw->placed);
  if (!ir_rw_count(rw)) return false;
  size_t keep = 0;
  for (size_t i = 0; i < g->n_initializers; i++) {
    struct ir_value *v = g->initializers[i];
    if (rw->uses[v->index] || rw->pinned[v->index] || (v->flags & IR_VALUE_GRAPH_INPUT))
      g->initializers[keep++] = v;
    else
      v->flags &= ~(uint32_t)IR_VALUE_INITIALIZER;
  }
  g->n_initializers = keep;
  return true;
}

bool ir_rw_scalar(const struct ir_value *v, float *out) {
  const struct ir_tensor *t = v->init;
  if (!t || t->dtype != TOLK_FLOAT || t->numel != 1 || !t->data || (v->flags & IR_VALUE_GRAPH_INPUT))
    return false;
  memcpy(out, t->data, sizeof *out);
  return true;
}

/* ------------------------------------------------------------ matchers */

struct ir_node *ir_made_by(const struct ir_value *v, const char *op) {
  if (!v || !v->producer || *v->producer->domain || strcmp(v->producer->op_type, op)) return NULL;
  return v->producer;
}

bool ir_is_op(const struct ir_node *n, const char *op) { return !*n->domain && !strcmp(n->op_type, op); }

bool ir_scalar_in(const struct ir_node *n, size_t i, float *out) {
  return i < n->n_inputs && n->inputs[i] && ir_rw_scalar(n->inputs[i], out);
}

bool ir_vector_const(const struct ir_value *v) {
  return v && v->init && v->init->rank == 1 && v->init->dtype == TOLK_FLOAT && v->init->numel > 1 &&
         !(v->flags & IR_VALUE_GRAPH_INPUT);
}

bool ir_rw_only_into(const struct ir_rw *rw, const struct ir_node *n, const struct ir_node *into) {
  return n->n_outputs == 1 && n->outputs[0] && ir_rw_sole_reader(rw, n->outputs[0]) == into;
}

bool ir_int_const(const struct ir_value *v, int64_t *out) {
  const struct ir_tensor *t = v ? v->init : NULL;
  if (!t || t->dtype != TOLK_INT64 || t->numel != 1 || !t->data || (v->flags & IR_VALUE_GRAPH_INPUT))
    return false;
  memcpy(out, t->data, sizeof *out);
  return true;
}

bool ir_dim_of(const struct ir_value *v, const struct ir_value *t, int64_t axis) {
  const struct ir_node *u = ir_made_by(v, "Unsqueeze"), *g = NULL, *s = NULL;
  int64_t k;
  if (!u || u->n_inputs != 2 || !ir_int_const(u->inputs[1], &k) || k != 0) return false;
  if (!(g = ir_made_by(u->inputs[0], "Gather")) || ir_attr_int(g, "axis", 0) != 0) return false;
  if (!ir_int_const(g->inputs[1], &k) || k != axis) return false;
  s = ir_made_by(g->inputs[0], "Shape");
  return s && s->inputs[0] == t && !ir_node_attr(s, "start") && !ir_node_attr(s, "end");
}

bool ir_rw_is_cache(const struct ir_rw *rw, const struct ir_value *v) {
  const struct ir_node *c = rw->keep_cache ? ir_made_by(v, "Concat") : NULL;
  const struct ir_value *past = c && c->n_inputs == 2 ? c->inputs[0] : NULL;
  return past && (past->flags & IR_VALUE_GRAPH_INPUT) && !past->init && (v->flags & IR_VALUE_GRAPH_OUTPUT);
}

int ir_rw_each(struct ir_rw *rw, bool (*at)(struct ir_rw *rw, struct ir_node *n)) {
  int n = 0;
  for (size_t k = 0; k < rw->g->n_nodes; k++)
    if (!rw->dead[k] && at(rw, rw->g->nodes[k])) n++;
  if (rw->oom) return -1;
  return ir_rw_commit(rw) ? n : -1;
}

/* ------------------------------------------------------------ dead nodes */

int ir_pass_dce(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  int n = 0;
  for (size_t k = g->n_nodes; k-- > 0;) {
    struct ir_node *nd = g->nodes[k];
    if (rw->dead[k] || has_subgraphs(nd) || !nd->n_outputs) continue;
    bool used = false;
    for (size_t i = 0; i < nd->n_outputs && !used; i++) {
      const struct ir_value *v = nd->outputs[i];
      used = v && (rw->uses[v->index] || rw->pinned[v->index]);
    }
    if (used) continue;
    ir_rw_kill(rw, nd);
    n++;
  }
  return ir_rw_commit(rw) ? n : -1;
}

/* ------------------------------------------------------------ CSE */

static bool same_tensor(const struct ir_tensor *a, const struct ir_tensor *b) {
  if (!a || !b || a->dtype != b->dtype || a->rank != b->rank || a->nbytes != b->nbytes ||
      a->dtype == TOLK_STRING || !a->data || !b->data)
    return false;
  /* A scalar has no dims array: memcmp may not be given NULL even for 0 bytes. */
  return (!a->rank || !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof *a->dims)) &&
         !memcmp(a->data, b->data, a->nbytes);
}

static bool same_attr(const struct ir_attr *a, const struct ir_attr *b) {
  if (strcmp(a->name, b->name) || a->type != b->type || a->ref_attr_name || b->ref_attr_name) return false;
  switch (a->type) {
  case IR_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
  case IR_ATTR_INT: return a->i == b->i;
  case IR_ATTR_STRING: return a->s.len == b->s.len && (!a->s.len || !memcmp(a->s.data, b->s.data, a->s.len));
  case IR_ATTR_TENSOR: return same_tensor(a->t, b->t);
  case IR_ATTR_FLOATS: return a->n == b->n && (!a->n || !memcmp(a->floats, b->floats, a->n * sizeof *a->floats));
  case IR_ATTR_INTS: return a->n == b->n && (!a->n || !memcmp(a->ints, b->ints, a->n * sizeof *a->ints));
  default: return false; /* graphs, type protos, lists of them: never merged */
  }
}

/* The same input: one value, or two initializers holding the same tensor
 * (ORT shares such constants first, ConstantSharing, so its elimination
 * sees one value: an Unsqueeze of one Gather by two axes initializers both
 * [0] is one node). */
static bool same_input(const struct ir_value *a, const struct ir_value *b) {
  if (a == b) return true;
  if (!a || !b || !a->init || !b->init || a->producer || b->producer ||
      ((a->flags | b->flags) & IR_VALUE_GRAPH_INPUT))
    return false;
  return same_tensor(a->init, b->init);
}

static bool same_node(const struct ir_node *a, const struct ir_node *b) {
  if (strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain) || a->n_inputs != b->n_inputs ||
      a->n_outputs != b->n_outputs || a->n_attrs != b->n_attrs)
    return false;
  for (size_t i = 0; i < a->n_inputs; i++)
    if (!same_input(a->inputs[i], b->inputs[i])) return false;
  for (size_t i = 0; i < a->n_outputs; i++)
    if (!a->outputs[i] != !b->outputs[i]) return false;
  for (size_t i = 0; i < a->n_attrs; i++) {
    const struct ir_attr *o = ir_node_attr(b, a->attrs[i].name);
    if (!o || !same_attr(&a->attrs[i], o)) return false;
  }
  return true;
}

/* Ops whose every run may differ: never merged (ORT's list). */
static bool nondeterministic(const struct ir_node *n) {
  static const char *const ops[] = {"RandomNormal", "RandomNormalLike", "RandomUniform",
                                    "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(n->op_type, ops[i])) return true;
  return false;
}

static bool mergeable(const struct ir_rw *rw, const struct ir_node *n) {
  if (!n->n_inputs || !n->n_outputs || has_subgraphs(n) || nondeterministic(n)) return false;
  for (size_t i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] && rw->pinned[n->outputs[i]->index]) return false;
  return true;
}

int ir_pass_cse(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  int n = 0;
  for (size_t k = 0; k < g->n_nodes; k++) {
    struct ir_node *b = g->nodes[k];
    if (rw->dead[k] || !mergeable(rw, b)) continue;
    for (size_t j = 0; j < k; j++) {
      struct ir_node *a = g->nodes[j];
      if (rw->dead[j] || has_subgraphs(a) || !same_node(a, b)) continue;
      for (size_t i = 0; i < b->n_outputs; i++)
        if (b->outputs[i]) ir_rw_replace_uses(rw, b->outputs[i], a->outputs[i]);
      ir_rw_kill(rw, b);
      n++;
      break;
    }
  }
  return ir_rw_commit(rw) ? n : -1;
}

/* ------------------------------------------------------------ Constant nodes */

/* The tensor a Constant's one value attribute holds (the forms tolk's
 * kernels compute with: tensor, float(s), int(s)), or NULL. */
static struct ir_tensor *constant_value(struct ir_rw *rw, const struct ir_node *n) {
  if (n->n_attrs != 1) return NULL;
  const struct ir_attr *a = &n->attrs[0];
  int64_t len = (int64_t)a->n;
  if (!strcmp(a->name, "value") && a->type == IR_ATTR_TENSOR && a->t && a->t->dtype != TOLK_STRING &&
      (a->t->data || !a->t->nbytes) && a->t->location == IR_DATA_INLINE)
    return ir_rw_tensor(rw, a->t->dtype, a->t->dims, a->t->rank, a->t->data, a->t->nbytes);
  if (!strcmp(a->name, "value_float") && a->type == IR_ATTR_FLOAT)
    return ir_rw_tensor(rw, TOLK_FLOAT, NULL, 0, &a->f, sizeof a->f);
  if (!strcmp(a->name, "value_int") && a->type == IR_ATTR_INT)
    return ir_rw_tensor(rw, TOLK_INT64, NULL, 0, &a->i, sizeof a->i);
  if (!strcmp(a->name, "value_floats") && a->type == IR_ATTR_FLOATS)
    return ir_rw_tensor(rw, TOLK_FLOAT, &len, 1, a->floats, a->n * sizeof *a->floats);
  if (!strcmp(a->name, "value_ints") && a->type == IR_ATTR_INTS)
    return ir_rw_tensor(rw, TOLK_INT64, &len, 1, a->ints, a->n * sizeof *a->ints);
  return NULL;
}

int ir_pass_constants(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  int n = 0;
  for (size_t k = 0; k < g->n_nodes; k++) {
    struct ir_node *nd = g->nodes[k];
    if (strcmp(nd->op_type, "Constant") || *nd->domain || nd->n_outputs != 1 || !nd->outputs[0]) continue;
    struct ir_tensor *t = constant_value(rw, nd);
    if (rw->oom) return -1;
    if (!t || !ir_rw_make_initializer(rw, nd->outputs[0], t)) continue;
    ir_rw_kill(rw, nd);
    n++;
  }
  return !rw->oom && ir_rw_commit(rw) ? n : -1;
}

/* ------------------------------------------------------------ Identity of a constant */

int ir_pass_identity(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  int n = 0;
  for (size_t k = 0; k < g->n_nodes; k++) {
    struct ir_node *nd = g->nodes[k];
    if (strcmp(nd->op_type, "Identity") || *nd->domain || nd->n_inputs != 1 || nd->n_outputs != 1) continue;
    struct ir_value *in = nd->inputs[0], *out = nd->outputs[0];
    if (!in || !out || !in->init || (in->flags & IR_VALUE_GRAPH_INPUT) || in->graph != g || rw->pinned[out->index])
      continue;
    ir_rw_replace_uses(rw, out, in);
    ir_rw_kill(rw, nd);
    n++;
  }
  return !rw->oom && ir_rw_commit(rw) ? n : -1;
}

/* ------------------------------------------------------------ static shapes */

int ir_pass_static_shape(struct ir_rw *rw) {
  struct ir_graph *g = rw->g;
  int n = 0;
  for (size_t k = 0; k < g->n_nodes; k++) {
    struct ir_node *nd = g->nodes[k];
    if (strcmp(nd->op_type, "Shape") || *nd->domain || nd->n_inputs != 1 || nd->n_outputs != 1 ||
        !nd->inputs[0] || !nd->outputs[0])
      continue;
    const struct ir_type *t = &nd->inputs[0]->type;
    if (t->kind != IR_TYPE_TENSOR || t->rank < 0 || ir_type_numel(t) < 0) continue;
    /* start/end (opset 15) clamp like Slice's. */
    int64_t r = t->rank, s = ir_attr_int(nd, "start", 0), e = ir_attr_int(nd, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    int64_t dims[IR_MAX_RANK], len = e > s ? e - s : 0;
    for (int64_t i = 0; i < len; i++) dims[i] = t->dims[s + i].value;
    struct ir_tensor *c = ir_rw_tensor(rw, TOLK_INT64, &len, 1, dims, (size_t)len * sizeof *dims);
    if (!c || !ir_rw_make_initializer(rw, nd->outputs[0], c)) return -1;
    ir_rw_kill(rw, nd);
    n++;
  }
  return ir_rw_commit(rw) ? n : -1;
}
