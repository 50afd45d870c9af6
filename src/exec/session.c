/*
 * session.c — turns a model's IR into a session: every graph (the main one
 * and each If/Loop/Scan body) becomes an xgraph whose nodes are in
 * topological order, carry their resolved kernel, read their inputs from
 * (frame, slot) references, and list the values that die after them. All
 * nodes of all graphs are resolved before any is prepared, so a model with
 * unsupported operators is rejected with the whole list, at creation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "../kern/kern.h"

/* Compilation state shared across the recursion. */
struct compiler {
  tolk_session *s;
  const struct op_def *extra;
  tolk_error *err;
  int n_unsupported;
  char first[TOLK_ERROR_MESSAGE_MAX]; /* the first unsupported node */
  char ops[512];                      /* distinct unsupported op names */
  size_t ops_len;
};

/* "node 'name' (#3 Op)" or "node #3 (com.microsoft.Op)" into buf. */
static const char *node_desc(const struct ir_node *n, char *buf, size_t size) {
  const char *dom = n->domain && n->domain[0] ? n->domain : NULL;
  if (n->name && n->name[0])
    snprintf(buf, size, "node '%s' (#%d %s%s%s)", n->name, n->index, dom ? dom : "",
             dom ? "." : "", n->op_type);
  else
    snprintf(buf, size, "node #%d (%s%s%s)", n->index, dom ? dom : "", dom ? "." : "",
             n->op_type);
  return buf;
}

void exec_node_prefix(tolk_error *err, const struct ir_node *n) {
  char d[256];
  tolk_error_prefix(err, "%s", node_desc(n, d, sizeof d));
}

static const struct op_def *find_def(const struct compiler *cp, const char *domain,
                                     const char *op, int64_t opset) {
  if (cp->extra) {
    const char *dom = strcmp(domain, "ai.onnx") == 0 ? "" : domain;
    for (const struct op_def *d = cp->extra; d->op_type; d++)
      if (!strcmp(d->op_type, op) && !strcmp(d->domain, dom) && opset >= d->since &&
          (d->until == 0 || opset <= d->until))
        return d;
  }
  return op_find(domain, op, opset);
}

static void note_unsupported(struct compiler *cp, const struct ir_node *n) {
  cp->n_unsupported++;
  const char *dom = n->domain ? n->domain : "";
  /* Say whether another version of the op exists, which tells the user
   * whether re-exporting at another opset would help. */
  int lo = 0, hi = 0;
  for (int v = 1; v <= 40; v++)
    if (find_def(cp, dom, n->op_type, v)) {
      if (!lo) lo = v;
      hi = v;
    }
  if (cp->n_unsupported == 1) {
    char d[256];
    node_desc(n, d, sizeof d);
    if (lo && hi == 40)
      snprintf(cp->first, sizeof cp->first,
               "%s: operator %s of domain '%s' is supported from opset %d on, not opset %d",
               d, n->op_type, dom[0] ? dom : "ai.onnx", lo, n->opset);
    else if (lo)
      snprintf(cp->first, sizeof cp->first,
               "%s: operator %s of domain '%s' is supported for opsets %d..%d, "
               "not opset %d",
               d, n->op_type, dom[0] ? dom : "ai.onnx", lo, hi, n->opset);
    else
      snprintf(cp->first, sizeof cp->first,
               "%s: unsupported operator %s (domain '%s', opset %d)", d, n->op_type,
               dom[0] ? dom : "ai.onnx", n->opset);
  }
  /* Collect distinct names for the summary. */
  char name[160];
  snprintf(name, sizeof name, "%s%s%s", dom, dom[0] ? "." : "", n->op_type);
  size_t nl = strlen(name);
  const char *p = cp->ops;
  while (p && *p) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == nl && !memcmp(p, name, nl)) return;
    p = e ? e + 1 : NULL;
  }
  if (cp->ops_len + nl + 2 < sizeof cp->ops) {
    if (cp->ops_len) cp->ops[cp->ops_len++] = ',';
    memcpy(cp->ops + cp->ops_len, name, nl + 1);
    cp->ops_len += nl;
  }
}

static void *zalloc(struct compiler *cp, size_t count, size_t elem) {
  if (!count) count = 1;
  return tolk_arena_array(&cp->s->arena, count, elem);
}

static bool value_ok(const struct ir_value *v) {
  const struct ir_graph *g = v->graph;
  return g && v->index >= 0 && (size_t)v->index < g->n_values && g->values[v->index] == v;
}

/* The xgraph (xg or an ancestor) defining v, or NULL. */
static struct xgraph *owner_of(struct xgraph *xg, const struct ir_value *v) {
  for (; xg; xg = xg->parent)
    if (xg->g == v->graph) return xg;
  return NULL;
}

static tolk_status resolve(struct compiler *cp, struct xgraph *xg, const struct ir_value *v,
                           const struct ir_node *user, struct xref *out) {
  char d[256];
  if (!v) {
    out->frame = -1;
    out->slot = -1;
    return TOLK_OK;
  }
  if ((v->flags & IR_VALUE_UNDEFINED) || !value_ok(v)) {
    if (user)
      return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL, "%s: input '%s' is not defined",
                       node_desc(user, d, sizeof d), v->name ? v->name : "");
    return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL, "graph '%s': output '%s' is not defined",
                     xg->g->name ? xg->g->name : "", v->name ? v->name : "");
  }
  struct xgraph *o = owner_of(xg, v);
  if (!o)
    return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL,
                     "value '%s' is read outside the graph defining it", v->name);
  out->frame = (int32_t)o->id;
  out->slot = v->index;
  return TOLK_OK;
}

/* A graph being compiled: its xgraph, and what its steps share. */
struct gbuild {
  struct xgraph *xg;
  uint32_t outer_cap; /* room in xg->outer */
  int32_t *last;      /* per own slot: index of the last node reading it, -1 none */
  bool *is_out;       /* per own slot: a declared output of the graph */
};

/* Adds v, a value of an enclosing graph, to xg->outer (once). */
static tolk_status add_outer(struct compiler *cp, struct gbuild *b, const struct ir_value *v) {
  struct xgraph *xg = b->xg;
  for (uint32_t i = 0; i < xg->n_outer; i++)
    if (xg->outer[i] == v) return TOLK_OK;
  if (xg->n_outer == b->outer_cap) {
    uint32_t nc = b->outer_cap ? b->outer_cap * 2 : 8;
    const struct ir_value **na = zalloc(cp, nc, sizeof *na);
    if (!na) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
    if (xg->n_outer) memcpy(na, xg->outer, xg->n_outer * sizeof *na);
    xg->outer = na;
    b->outer_cap = nc;
  }
  xg->outer[xg->n_outer++] = v;
  return TOLK_OK;
}

static tolk_status compile_graph(struct compiler *cp, const struct ir_graph *g,
                                 struct xgraph *parent, struct xgraph **out);

/* Per-node dependencies while sorting: own-graph values a node reads. */
struct node_info {
  struct xgraph **subs;
  uint32_t n_subs;
};

static tolk_status compile_subgraphs(struct compiler *cp, struct xgraph *xg,
                                     const struct ir_node *n, struct node_info *ni) {
  uint32_t count = 0;
  for (size_t a = 0; a < n->n_attrs; a++) {
    const struct ir_attr *at = &n->attrs[a];
    if (at->type == IR_ATTR_GRAPH && at->g) count++;
    if (at->type == IR_ATTR_GRAPHS) count += (uint32_t)at->n;
  }
  ni->n_subs = 0;
  ni->subs = NULL;
  if (!count) return TOLK_OK;
  ni->subs = zalloc(cp, count, sizeof *ni->subs);
  if (!ni->subs) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
  for (size_t a = 0; a < n->n_attrs; a++) {
    const struct ir_attr *at = &n->attrs[a];
    for (size_t j = 0; j < ir_attr_n_graphs(at); j++) {
      const struct ir_graph *sg = ir_attr_graph(at, j);
      if (!sg) continue;
      tolk_status st = compile_graph(cp, sg, xg, &ni->subs[ni->n_subs]);
      if (st) {
        char d[256];
        tolk_error_prefix(cp->err, "%s: attribute '%s'", node_desc(n, d, sizeof d), at->name);
        return st;
      }
      ni->n_subs++;
    }
  }
  return TOLK_OK;
}

/* Calls fn for every own-graph value node n depends on (inputs and values
 * its subgraphs read from this graph). */
#define FOR_EACH_DEP(n, ni, g, v, body)                                        \
  do {                                                                         \
    for (size_t i_ = 0; i_ < (n)->n_inputs; i_++) {                            \
      const struct ir_value *v = (n)->inputs[i_];                              \
      if (v && v->graph == (g) && value_ok(v)) { body; }                       \
    }                                                                          \
    for (uint32_t s_ = 0; s_ < (ni)->n_subs; s_++)                             \
      for (uint32_t o_ = 0; o_ < (ni)->subs[s_]->n_outer; o_++) {              \
        const struct ir_value *v = (ni)->subs[s_]->outer[o_];                  \
        if (v->graph == (g) && value_ok(v)) { body; }                          \
      }                                                                        \
  } while (0)

/* Orders g's nodes so that producers come first, keeping file order where
 * it already is one. */
static tolk_status topo_order(struct compiler *cp, const struct ir_graph *g,
                              struct node_info *ni, uint32_t *order) {
  size_t n = g->n_nodes;
  bool sorted = true;
  for (size_t k = 0; k < n && sorted; k++) {
    const struct ir_node *nd = g->nodes[k];
    FOR_EACH_DEP(nd, &ni[k], g, v, {
      if (v->producer && v->producer->graph == g && v->producer->index >= nd->index)
        sorted = false;
    });
  }
  if (sorted) {
    for (size_t k = 0; k < n; k++) order[k] = (uint32_t)k;
    return TOLK_OK;
  }
  /* Kahn's algorithm, picking the lowest file index that is ready. */
  uint32_t *missing = calloc(n ? n : 1, sizeof *missing);
  bool *done = calloc(n ? n : 1, sizeof *done);
  if (!missing || !done) {
    free(missing);
    free(done);
    return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "sorting graph");
  }
  for (size_t k = 0; k < n; k++) {
    const struct ir_node *nd = g->nodes[k];
    FOR_EACH_DEP(nd, &ni[k], g, v, {
      if (v->producer && v->producer->graph == g) missing[k]++;
    });
  }
  size_t placed = 0;
  while (placed < n) {
    size_t pick = n;
    for (size_t k = 0; k < n; k++)
      if (!done[k] && missing[k] == 0) {
        pick = k;
        break;
      }
    if (pick == n) break;
    done[pick] = true;
    order[placed++] = (uint32_t)pick;
    const struct ir_node *p = g->nodes[pick];
    /* Decrement consumers of p's outputs (counted once per reference). */
    for (size_t k = 0; k < n; k++) {
      if (done[k]) continue;
      const struct ir_node *nd = g->nodes[k];
      FOR_EACH_DEP(nd, &ni[k], g, v, {
        if (v->producer == p) missing[k]--;
      });
    }
  }
  free(missing);
  free(done);
  if (placed < n)
    return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL,
                     "graph '%s' has a cycle (or a node reads an output of itself)",
                     g->name ? g->name : "");
  return TOLK_OK;
}

/* last[slot]: the last node reading an own-frame slot, itself or through a
 * subgraph; again after exec_kv_rewrite moved the readers. */
static void last_reads(const struct xgraph *xg, int32_t *last) {
  for (uint32_t i = 0; i < xg->n_slots; i++) last[i] = -1;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    const struct xnode *xn = &xg->nodes[k];
    for (uint32_t i = 0; i < xn->n_in; i++)
      if (xn->in[i].frame == (int32_t)xg->id) last[xn->in[i].slot] = (int32_t)k;
    for (uint32_t j = 0; j < xn->n_subs; j++)
      for (uint32_t o = 0; o < xn->subs[j]->n_outer; o++)
        if (xn->subs[j]->outer[o]->graph == xg->g) last[xn->subs[j]->outer[o]->index] = (int32_t)k;
  }
}

/* A new, empty xgraph for g, registered in the session (its id is its index
 * in s->graphs). */
static tolk_status new_xgraph(struct compiler *cp, const struct ir_graph *g, struct xgraph *parent,
                              struct xgraph **out) {
  tolk_session *s = cp->s;
  struct xgraph *xg = zalloc(cp, 1, sizeof *xg);
  if (!xg) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
  if (s->n_graphs == s->cap_graphs) {
    uint32_t nc = s->cap_graphs ? s->cap_graphs * 2 : 8;
    struct xgraph **ng = realloc(s->graphs, nc * sizeof *ng);
    if (!ng) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
    s->graphs = ng;
    s->cap_graphs = nc;
  }
  xg->id = s->n_graphs;
  s->graphs[s->n_graphs++] = xg;
  xg->g = g;
  xg->parent = parent;
  xg->n_slots = (uint32_t)g->n_values;
  *out = xg;
  return TOLK_OK;
}

/* The kernel for nd into xn->def; an unsupported node is noted (cp) and
 * left with def NULL, so that all of them are reported together. */
static tolk_status resolve_def(struct compiler *cp, const struct ir_node *nd, struct xnode *xn) {
  if (!nd->op_type) return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL, "node without op_type");
  const char *dom = nd->domain ? nd->domain : "";
  if (nd->opset <= 0) {
    char d[256];
    return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL,
                     "%s: the model imports no opset for domain '%s'",
                     node_desc(nd, d, sizeof d), dom[0] ? dom : "ai.onnx");
  }
  xn->def = find_def(cp, dom, nd->op_type, nd->opset);
  if (!xn->def || !xn->def->run) {
    xn->def = NULL;
    note_unsupported(cp, nd);
  }
  return TOLK_OK;
}

/* Resolves node nd, k-th in execution order, into xn: its kernel, its input
 * references and output slots; records it as the last reader so far of
 * every own-graph value it or its subgraphs read, and the enclosing graphs'
 * values among them in xg->outer. */
static tolk_status compile_node(struct compiler *cp, struct gbuild *b, const struct ir_node *nd,
                                const struct node_info *nfo, uint32_t k, struct xnode *xn) {
  struct xgraph *xg = b->xg;
  tolk_status st;
  xn->node = nd;
  xn->uid = cp->s->n_uids++;
  xn->opset = nd->opset;
  xn->subs = nfo->subs;
  xn->n_subs = nfo->n_subs;
  xn->n_in = (uint32_t)nd->n_inputs;
  xn->n_out = (uint32_t)nd->n_outputs;
  if (xn->n_in > xg->max_in) xg->max_in = xn->n_in;
  if (xn->n_out > xg->max_out) xg->max_out = xn->n_out;
  if ((st = resolve_def(cp, nd, xn))) return st;
  xn->in = zalloc(cp, xn->n_in, sizeof *xn->in);
  xn->out = zalloc(cp, xn->n_out, sizeof *xn->out);
  if (!xn->in || !xn->out) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
  for (uint32_t i = 0; i < xn->n_in; i++) {
    const struct ir_value *v = nd->inputs[i];
    if ((st = resolve(cp, xg, v, nd, &xn->in[i]))) return st;
    if (!v) continue;
    if (xn->in[i].frame == (int32_t)xg->id)
      b->last[v->index] = (int32_t)k;
    else if ((st = add_outer(cp, b, v)))
      return st;
  }
  for (uint32_t sidx = 0; sidx < xn->n_subs; sidx++) {
    const struct xgraph *sg = xn->subs[sidx];
    for (uint32_t o = 0; o < sg->n_outer; o++) {
      const struct ir_value *v = sg->outer[o];
      if (v->graph == xg->g)
        b->last[v->index] = (int32_t)k;
      else if ((st = add_outer(cp, b, v)))
        return st;
    }
  }
  for (uint32_t i = 0; i < xn->n_out; i++) {
    const struct ir_value *v = nd->outputs[i];
    if (!v) {
      xn->out[i] = -1;
      continue;
    }
    if (v->graph != xg->g || !value_ok(v))
      return tolk_fail(cp->err, TOLK_ERR_INTERNAL, "output '%s' is not a value of its graph",
                       v->name ? v->name : "");
    xn->out[i] = v->index;
  }
  return TOLK_OK;
}

/* The graph's declared inputs (own slots) and outputs (references, possibly
 * to enclosing graphs' values); marks own-slot outputs in b->is_out. */
static tolk_status bind_graph_io(struct compiler *cp, struct gbuild *b) {
  struct xgraph *xg = b->xg;
  const struct ir_graph *g = xg->g;
  xg->n_in = (uint32_t)g->n_inputs;
  xg->in_slots = zalloc(cp, xg->n_in, sizeof *xg->in_slots);
  xg->n_out = (uint32_t)g->n_outputs;
  xg->out_refs = zalloc(cp, xg->n_out, sizeof *xg->out_refs);
  b->is_out = zalloc(cp, xg->n_slots, sizeof *b->is_out);
  if (!xg->in_slots || !xg->out_refs || !b->is_out)
    return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
  for (uint32_t i = 0; i < xg->n_in; i++) {
    const struct ir_value *v = g->inputs[i];
    if (!v || v->graph != g || !value_ok(v))
      return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL, "graph '%s': bad input %u",
                       g->name ? g->name : "", i);
    xg->in_slots[i] = v->index;
  }
  for (uint32_t i = 0; i < xg->n_out; i++) {
    const struct ir_value *v = g->outputs[i];
    if (!v)
      return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL, "graph '%s': output %u has no name",
                       g->name ? g->name : "", i);
    tolk_status st = resolve(cp, xg, v, NULL, &xg->out_refs[i]);
    if (st) return st;
    if (xg->out_refs[i].frame == (int32_t)xg->id)
      b->is_out[v->index] = true;
    else if ((st = add_outer(cp, b, v)))
      return st;
  }
  return TOLK_OK;
}

/* Release lists: a node-produced value dies after its last reader (or
 * right after its producer when nothing reads it); outputs never do. The
 * first pass counts each node's list, the second fills it. */
static tolk_status build_release_lists(struct compiler *cp, struct gbuild *b) {
  struct xgraph *xg = b->xg;
  const size_t n = xg->n_nodes;
  uint32_t *n_rel = zalloc(cp, n, sizeof *n_rel);
  if (!n_rel) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
  for (int pass = 0; pass < 2; pass++) {
    for (size_t k = 0; k < n; k++) {
      struct xnode *xn = &xg->nodes[k];
      for (uint32_t i = 0; i < xn->n_out; i++) {
        int32_t sl = xn->out[i];
        if (sl < 0 || b->is_out[sl]) continue;
        bool dup = false;
        for (uint32_t j = 0; j < i; j++) dup |= xn->out[j] == sl;
        if (dup) continue;
        size_t at = b->last[sl] >= (int32_t)k ? (size_t)b->last[sl] : k;
        if (pass == 0)
          n_rel[at]++;
        else
          xg->nodes[at].release[xg->nodes[at].n_release++] = sl;
      }
    }
    if (pass == 0)
      for (size_t k = 0; k < n; k++) {
        xg->nodes[k].release = zalloc(cp, n_rel[k], sizeof(int32_t));
        if (!xg->nodes[k].release)
          return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
      }
  }
  return TOLK_OK;
}

/* Every initializer of g has its data, and none is a string tensor. */
static tolk_status check_initializers(struct compiler *cp, const struct ir_graph *g) {
  for (size_t i = 0; i < g->n_initializers; i++) {
    const struct ir_value *v = g->initializers[i];
    if (!v || !v->init || !value_ok(v))
      return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL, "graph '%s': bad initializer %zu",
                       g->name ? g->name : "", i);
    if (v->init->numel > 0 && !v->init->data)
      return tolk_fail(cp->err, TOLK_ERR_INVALID_MODEL,
                       "initializer '%s': its external data is not loaded", v->name);
    if (v->init->dtype == TOLK_STRING)
      return tolk_fail(cp->err, TOLK_ERR_UNSUPPORTED,
                       "initializer '%s': string tensors are not supported", v->name);
  }
  return TOLK_OK;
}

/* Compiles g (and, first, the subgraphs of its nodes) into *out: nodes in
 * execution order with kernels and references resolved, the graph's inputs
 * and outputs, the cache rewiring (main graph only), then the release
 * lists, which must see the nodes as they will run. */
static tolk_status compile_graph(struct compiler *cp, const struct ir_graph *g,
                                 struct xgraph *parent, struct xgraph **out) {
  tolk_session *s = cp->s;
  struct gbuild b = {0};
  tolk_status st = new_xgraph(cp, g, parent, &b.xg);
  if (st) return st;
  struct xgraph *xg = b.xg;
  size_t n = g->n_nodes;
  struct node_info *ni = zalloc(cp, n, sizeof *ni);
  uint32_t *order = zalloc(cp, n, sizeof *order);
  if (!ni || !order) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
  for (size_t k = 0; k < n; k++)
    if ((st = compile_subgraphs(cp, xg, g->nodes[k], &ni[k]))) return st;
  if ((st = topo_order(cp, g, ni, order))) return st;

  xg->nodes = zalloc(cp, n, sizeof *xg->nodes);
  b.last = zalloc(cp, xg->n_slots, sizeof *b.last);
  if (!xg->nodes || !b.last) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "compiling graph");
  xg->n_nodes = (uint32_t)n;
  for (uint32_t i = 0; i < xg->n_slots; i++) b.last[i] = -1;
  for (size_t k = 0; k < n; k++)
    if ((st = compile_node(cp, &b, g->nodes[order[k]], &ni[order[k]], (uint32_t)k, &xg->nodes[k])))
      return st;
  if ((st = bind_graph_io(cp, &b))) return st;

  if (s->params.quant_rows) exec_quant_rows_rewrite(xg);
  if (s->params.int8_lm_head) exec_int8_head_rewrite(xg);
  if (s->params.bf16_weights) exec_bf16_rewrite(xg, s->params.bf16_weights == TOLK_BF16_PRODUCTS);
  if (!parent && s->params.kv_cache) {
    if ((st = exec_kv_rewrite(s, xg, cp->err))) return st;
    if (s->n_kv) last_reads(xg, b.last);
  }
  if (s->params.opt_level != TOLK_OPT_NONE) {
    int fused = exec_fuse_mmi(s, xg);
    if (fused < 0) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "fusing MatMulInteger chains");
    if (fused) last_reads(xg, b.last);
    s->n_fused += (uint32_t)fused;
    int biased = exec_fuse_bias(s, xg);
    if (biased < 0) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "fusing MatMul and bias Add pairs");
    if (biased) last_reads(xg, b.last);
    int attentions = s->n_kv ? exec_fuse_kv_attention(s, xg) : 0;
    if (attentions < 0) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "fusing cached attention");
    if (attentions) last_reads(xg, b.last);
  }
  if ((st = build_release_lists(cp, &b))) return st;
  if ((st = check_initializers(cp, g))) return st;
  *out = xg;
  return TOLK_OK;
}

static tolk_status prepare_all(struct compiler *cp) {
  tolk_session *s = cp->s;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      struct xnode *xn = &xg->nodes[k];
      if (!xn->def->prepare) continue;
      tolk_status st = xn->def->prepare(xn->node, xn->opset, &xn->state, cp->err);
      if (st) {
        exec_node_prefix(cp->err, xn->node);
        return st;
      }
      exec_release_packed_now(s, xn);
    }
  }
  return TOLK_OK;
}

/* A Gather of rows of a constant table that a MatMul or Gemm packed whole
 * as its transposed B — a tied embedding, packed as the LM head — takes its
 * rows from that copy (tolk_gather_packed_def). Read from the model file,
 * the table's pages came back one token's row at a time after packing gave
 * them back: 78 MB of them after 200 sentences in beam 4, half the table,
 * beside its packed copy. After prepare_all, when every B is packed. */
static void gather_from_packed(tolk_session *s) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      struct xnode *xn = &xg->nodes[k];
      const struct ir_value *table = xn->n_in == 2 ? xn->node->inputs[0] : NULL;
      if (!exec_is_op(xn, "Gather") || xn->state || !table || !table->init ||
          (table->flags & IR_VALUE_GRAPH_INPUT) || ir_attr_int(xn->node, "axis", 0) != 0)
        continue;
      void *st = op_gather_packed_state(table);
      if (!st) continue;
      xn->def = &tolk_gather_packed_def;
      xn->state = st;
    }
  }
}

static tolk_status build_info(struct compiler *cp) {
  tolk_session *s = cp->s;
  struct xgraph *xg = s->graphs[0];
  const struct ir_graph *g = xg->g;
  size_t n_req = 0;
  for (size_t i = 0; i < g->n_inputs; i++)
    if (!g->inputs[i]->init) n_req++;
  s->inputs = zalloc(cp, n_req, sizeof *s->inputs);
  s->input_slot = zalloc(cp, n_req, sizeof *s->input_slot);
  s->outputs = zalloc(cp, g->n_outputs, sizeof *s->outputs);
  s->out_pos = zalloc(cp, xg->n_slots, sizeof *s->out_pos);
  if (!s->inputs || !s->outputs || !s->out_pos || !s->input_slot)
    return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "session info");
  for (uint32_t i = 0; i < xg->n_slots; i++) s->out_pos[i] = -1;
  for (size_t pass = 0; pass < 2; pass++) {
    size_t n_items = pass == 0 ? g->n_inputs : g->n_outputs;
    for (size_t i = 0; i < n_items; i++) {
      const struct ir_value *v = pass == 0 ? g->inputs[i] : g->outputs[i];
      tolk_value_info *vi;
      if (pass == 0) {
        if (v->init) continue;
        s->input_slot[s->n_inputs] = v->index;
        vi = &s->inputs[s->n_inputs++];
      } else {
        vi = &s->outputs[s->n_outputs++];
        if (v->graph == g && s->out_pos[v->index] < 0) s->out_pos[v->index] = (int32_t)i;
      }
      if (v->type.kind != IR_TYPE_TENSOR && v->type.kind != IR_TYPE_NONE) {
        static const char *const kinds[] = {"", "tensor", "sparse tensor", "sequence", "map",
                                            "optional"};
        return tolk_fail(cp->err, TOLK_ERR_UNSUPPORTED,
                         "graph %s '%s' is a%s %s; only tensors are supported",
                         pass == 0 ? "input" : "output", v->name,
                         v->type.kind == IR_TYPE_OPTIONAL ? "n" : "",
                         (unsigned)v->type.kind < 6 ? kinds[v->type.kind] : "?");
      }
      if (v->type.dtype == TOLK_STRING || v->type.dtype > TOLK_BFLOAT16)
        return tolk_fail(cp->err, TOLK_ERR_UNSUPPORTED,
                         "graph %s '%s' has ONNX dtype %d (%s); tolk does not compute with it",
                         pass == 0 ? "input" : "output", v->name, (int)v->type.dtype,
                         v->type.dtype == TOLK_STRING ? "string" : "float8/int4/float4");
      vi->name = v->name;
      vi->dtype = (tolk_dtype)v->type.dtype;
      vi->rank = v->type.kind == IR_TYPE_TENSOR ? v->type.rank : -1;
      if (vi->rank > 0) {
        int64_t *dims = zalloc(cp, (size_t)vi->rank, sizeof *dims);
        const char **names = zalloc(cp, (size_t)vi->rank, sizeof *names);
        if (!dims || !names) return tolk_fail(cp->err, TOLK_ERR_NO_MEMORY, "session info");
        for (int d = 0; d < vi->rank; d++) {
          dims[d] = v->type.dims[d].value;
          names[d] = v->type.dims[d].param;
        }
        vi->dims = dims;
        vi->dim_names = names;
      }
    }
  }
  size_t sig = 0;
  for (size_t i = 0; i < g->n_inputs; i++) sig += 2 + IR_MAX_RANK;
  s->max_sig = sig;
  return TOLK_OK;
}

tolk_session_params tolk_session_default_params(void) {
  tolk_session_params p;
  memset(&p, 0, sizeof p);
  p.threads = 0;
  p.opt_level = TOLK_OPT_BASIC;
  p.memory_limit = 0;
  p.plan_cache_size = 64;
  return p;
}

tolk_status exec_session_create_ir(const struct ir_model *m, const tolk_session_params *p,
                                   const struct op_def *extra, tolk_session **out,
                                   tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!m || !m->graph) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "model is NULL");
  if (p && (p->bf16_weights < 0 || p->bf16_weights > TOLK_BF16_PRODUCTS))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "bf16_weights is %d: 0, 1 (weights) or 2 (products)",
                     p->bf16_weights);
  /* Elsewhere the products would run in portable C, many times slower
   * than the fp32 path the user meant to speed up. */
  if (p && p->bf16_weights == TOLK_BF16_PRODUCTS && !kern_bf16dot_fast())
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED,
                     "bfloat16 products need AVX512-BF16, which this CPU lacks (or TOLK_ISA turned AVX-512 off)");
  tolk_session *s = calloc(1, sizeof *s);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "session");
  s->m = m;
  s->params = p ? *p : tolk_session_default_params();
  if (s->params.plan_cache_size <= 0) s->params.plan_cache_size = 64;
  tolk_arena_init(&s->arena, 0);
  pthread_mutex_init(&s->mu, NULL);
  struct compiler cp;
  memset(&cp, 0, sizeof cp);
  cp.s = s;
  cp.extra = extra;
  cp.err = err;
  struct xgraph *main_graph = NULL;
  tolk_status st = compile_graph(&cp, m->graph, NULL, &main_graph);
  if (!st && cp.n_unsupported) {
    if (cp.n_unsupported == 1)
      st = tolk_fail(err, TOLK_ERR_UNSUPPORTED, "%s", cp.first);
    else
      st = tolk_fail(err, TOLK_ERR_UNSUPPORTED, "%s; %d unsupported nodes in all (%s)",
                     cp.first, cp.n_unsupported, cp.ops);
  }
  if (!st) st = prepare_all(&cp);
  if (!st) gather_from_packed(s);
  if (!st) st = build_info(&cp);
  if (!st) st = tolk_pool_create(s->params.threads, &s->pool, err);
  if (!st) exec_fold_plan(s);
  if (!st) st = exec_align_bind(s, err);
  if (!st) st = exec_fold(s, err);
  if (!st) st = exec_align_trim(s, err);
  if (st) {
    tolk_session_free(s);
    return st;
  }
  *out = s;
  return TOLK_OK;
}

void tolk_session_free(tolk_session *s) {
  if (!s) return;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      struct xnode *xn = &xg->nodes[k];
      if (xn->state && xn->def && xn->def->release) xn->def->release(xn->state);
    }
  }
  while (s->free_runs) {
    struct exec_run *r = s->free_runs;
    s->free_runs = r->next_free;
    exec_run_free(r);
  }
  while (s->plans) {
    struct plan *pl = s->plans;
    s->plans = pl->next;
    exec_plan_free(pl);
  }
  tolk_pool_free(s->pool);
  for (size_t i = 0; i < s->n_folded; i++) free(s->folded[i]);
  free(s->folded);
  exec_align_free(s);
  free(s->graphs);
  tolk_arena_release(&s->arena);
  pthread_mutex_destroy(&s->mu);
  if (s->owned_model && s->free_model) s->free_model(s->owned_model);
  free(s);
}

size_t tolk_session_input_count(const tolk_session *s) { return s ? s->n_inputs : 0; }
size_t tolk_session_output_count(const tolk_session *s) { return s ? s->n_outputs : 0; }
const tolk_value_info *tolk_session_input(const tolk_session *s, size_t i) {
  return s && i < s->n_inputs ? &s->inputs[i] : NULL;
}
const tolk_value_info *tolk_session_output(const tolk_session *s, size_t i) {
  return s && i < s->n_outputs ? &s->outputs[i] : NULL;
}
