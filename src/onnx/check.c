/*
 * check.c — tolk_model_check: the rules onnx.checker enforces, over the IR.
 *
 * What the loader already guarantees (well-formed wire format, tensor byte
 * sizes matching dims and dtype, external ranges inside confined files when
 * external data is loaded) is not repeated here. The checker adds: IR version
 * and opset imports present and known; every node's domain imported; ops
 * known to the ai.onnx / ai.onnx.ml schemas at the imported version (or
 * defined as model-local functions); input/output counts and attribute names,
 * types and presence against the schema; single assignment of names (also
 * across nested scopes); every input defined before use; graph outputs
 * produced; no cycles; external data of models loaded without it. Every
 * problem is one line naming the graph path and the node (index, name, op).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.h"
#include "schema.h"

struct checker {
  const tolk_model *model;
  const struct ir_model *m;
  tolk_report_fn report;
  void *user;
  size_t problems;
  char first[TOLK_ERROR_MESSAGE_MAX];
  struct tolk_arena scratch;
};

/* Scope a graph's nodes resolve opsets and functions in. */
struct scope {
  const struct ir_opset *opsets;
  size_t n_opsets;
};

static void problem(struct checker *k, const char *where, const char *fmt, ...) TOLK_PRINTF(3, 4);

static void problem(struct checker *k, const char *where, const char *fmt, ...) {
  char line[TOLK_ERROR_MESSAGE_MAX];
  size_t o = 0;
  if (where && where[0]) {
    int n = snprintf(line, sizeof line, "%s: ", where);
    o = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + o, sizeof line - o, fmt, ap);
  va_end(ap);
  if (!k->problems) memcpy(k->first, line, sizeof line);
  k->problems++;
  if (k->report) k->report(k->user, line);
}

/* "path / node 3 'conv1' (Conv)" */
static void node_where(char *buf, size_t size, const char *path, const struct ir_node *n) {
  snprintf(buf, size, "%s%snode %d '%s' (%s%s%s)", path, path[0] ? " / " : "", n->index, n->name,
           n->domain, n->domain[0] ? "::" : "", n->op_type);
}

static const char *definer(const struct ir_value *v, char *buf, size_t size) {
  if (v->producer)
    snprintf(buf, size, "output %d of node %d '%s' (%s)", v->producer_output, v->producer->index,
             v->producer->name, v->producer->op_type);
  else if (v->flags & IR_VALUE_INITIALIZER)
    snprintf(buf, size, "an initializer");
  else if (v->flags & IR_VALUE_GRAPH_INPUT)
    snprintf(buf, size, "a graph input");
  else
    snprintf(buf, size, "nothing");
  return buf;
}

/* ------------------------------------------------------------ schemas */

static const struct onnx_schema *find_schema(const char *domain, const char *op, int64_t opset,
                                             bool *op_known) {
  size_t lo = 0, hi = onnx_n_schemas;
  while (lo < hi) { /* first entry >= (domain, op) */
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(onnx_schemas[mid].domain, domain);
    if (!c) c = strcmp(onnx_schemas[mid].op_type, op);
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  const struct onnx_schema *best = NULL;
  *op_known = false;
  for (size_t i = lo; i < onnx_n_schemas && !strcmp(onnx_schemas[i].domain, domain) &&
                      !strcmp(onnx_schemas[i].op_type, op);
       i++) {
    *op_known = true;
    if (onnx_schemas[i].since <= opset) best = &onnx_schemas[i];
  }
  return best;
}

static bool schema_domain(const char *d) {
  return !strcmp(d, "") || !strcmp(d, "ai.onnx.ml") || !strcmp(d, "ai.onnx.preview.training");
}

/* Calls fn for each "name=TYPE[!]" entry of a schema's attribute list. */
struct sattr {
  const char *name;
  size_t len;
  int type;
  bool required;
};

static bool next_sattr(const char **p, struct sattr *a) {
  const char *s = *p;
  while (*s == ' ') s++;
  if (!*s) return false;
  const char *eq = strchr(s, '=');
  a->name = s;
  a->len = (size_t)(eq - s);
  a->type = 0;
  const char *q = eq + 1;
  while (*q >= '0' && *q <= '9') a->type = a->type * 10 + (*q++ - '0');
  a->required = *q == '!';
  if (*q == '!') q++;
  *p = q;
  return true;
}

static const char *attr_type_name(int t) {
  static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH",
                                      "FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS",
                                      "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  return t >= 0 && t <= 14 ? names[t] : "unknown";
}

static bool is_local_function(const struct ir_model *m, const char *domain, const char *op) {
  for (size_t i = 0; i < m->n_functions; i++)
    if (!strcmp(m->functions[i].domain, domain) && !strcmp(m->functions[i].name, op)) return true;
  return false;
}

static void check_schema(struct checker *k, const char *where, const struct ir_node *n) {
  if (!schema_domain(n->domain) || !n->opset) return;
  bool known;
  const struct onnx_schema *s = find_schema(n->domain, n->op_type, n->opset, &known);
  if (!s) {
    if (is_local_function(k->m, n->domain, n->op_type)) return;
    if (known)
      problem(k, where, "op %s is not defined at opset %d of domain '%s' (it appears later)", n->op_type,
              n->opset, n->domain[0] ? n->domain : "ai.onnx");
    else
      problem(k, where, "unknown op %s in domain '%s'", n->op_type, n->domain[0] ? n->domain : "ai.onnx");
    return;
  }
  if (n->n_inputs < (size_t)s->min_inputs || n->n_inputs > (size_t)s->max_inputs)
    problem(k, where, "has %zu inputs; %s-%d takes %d to %d", n->n_inputs, n->op_type, s->since,
            s->min_inputs, s->max_inputs);
  if (n->n_outputs < (size_t)s->min_outputs || n->n_outputs > (size_t)s->max_outputs)
    problem(k, where, "has %zu outputs; %s-%d gives %d to %d", n->n_outputs, n->op_type, s->since,
            s->min_outputs, s->max_outputs);
  for (size_t i = 0; i < n->n_attrs; i++) {
    const struct ir_attr *a = &n->attrs[i];
    const char *p = s->attrs;
    struct sattr sa;
    bool found = false;
    while (next_sattr(&p, &sa)) {
      if (sa.len == strlen(a->name) && !memcmp(sa.name, a->name, sa.len)) {
        found = true;
        if ((int)a->type != sa.type)
          problem(k, where, "attribute '%s' is %s; %s-%d expects %s", a->name, attr_type_name(a->type),
                  n->op_type, s->since, attr_type_name(sa.type));
        break;
      }
    }
    if (!found)
      problem(k, where, "unknown attribute '%s' for %s-%d", a->name, n->op_type, s->since);
  }
  const char *p = s->attrs;
  struct sattr sa;
  while (next_sattr(&p, &sa)) {
    if (!sa.required) continue;
    bool have = false;
    for (size_t i = 0; i < n->n_attrs && !have; i++)
      have = strlen(n->attrs[i].name) == sa.len && !memcmp(n->attrs[i].name, sa.name, sa.len);
    if (!have) problem(k, where, "required attribute '%.*s' is missing", (int)sa.len, sa.name);
  }
}

/* ------------------------------------------------------------ graphs */

static void check_graph(struct checker *k, const struct ir_graph *g, const char *path,
                        const struct scope *sc, bool is_main);

/* The node of `v->graph` that (through nesting) contains graph g. */
static const struct ir_node *ancestor_in(const struct ir_graph *g, const struct ir_graph *target) {
  while (g && g->parent != target) g = g->parent;
  return g ? g->owner : NULL;
}

/* Reports a cycle if the graph's nodes cannot be ordered (Kahn's algorithm
 * over the edges inside this graph, kept as compressed adjacency lists). */
static void find_cycle(struct checker *k, const struct ir_graph *g, const char *path) {
  size_t n = g->n_nodes, n_edges = 0;
  for (size_t i = 0; i < n; i++) n_edges += g->nodes[i]->n_inputs;
  size_t *start = tolk_arena_array(&k->scratch, n + 1, sizeof *start);
  size_t *fill = tolk_arena_array(&k->scratch, n + 1, sizeof *fill);
  size_t *indeg = tolk_arena_array(&k->scratch, n + 1, sizeof *indeg);
  size_t *queue = tolk_arena_array(&k->scratch, n + 1, sizeof *queue);
  size_t *to = tolk_arena_array(&k->scratch, n_edges + 1, sizeof *to);
  if (!start || !fill || !indeg || !queue || !to) return;
  for (size_t i = 0; i < n; i++) {
    const struct ir_node *nd = g->nodes[i];
    for (size_t j = 0; j < nd->n_inputs; j++) {
      const struct ir_value *v = nd->inputs[j];
      if (v && v->producer && v->graph == g) start[v->producer->index + 1]++;
    }
  }
  for (size_t i = 0; i < n; i++) start[i + 1] += start[i];
  memcpy(fill, start, (n + 1) * sizeof *fill);
  for (size_t i = 0; i < n; i++) {
    const struct ir_node *nd = g->nodes[i];
    for (size_t j = 0; j < nd->n_inputs; j++) {
      const struct ir_value *v = nd->inputs[j];
      if (v && v->producer && v->graph == g) {
        to[fill[v->producer->index]++] = i;
        indeg[i]++;
      }
    }
  }
  size_t head = 0, tail = 0;
  for (size_t i = 0; i < n; i++)
    if (!indeg[i]) queue[tail++] = i;
  while (head < tail) {
    size_t u = queue[head++];
    for (size_t x = start[u]; x < start[u + 1]; x++)
      if (--indeg[to[x]] == 0) queue[tail++] = to[x];
  }
  if (tail == n) return;
  for (size_t i = 0; i < n; i++)
    if (indeg[i]) {
      char w[512];
      node_where(w, sizeof w, path, g->nodes[i]);
      problem(k, w, "is on a cycle: the graph is not a DAG (%zu nodes cannot be ordered)", n - tail);
      return;
    }
}

static void check_node(struct checker *k, const struct ir_graph *g, const struct ir_node *n,
                       const char *path, const struct scope *sc, bool *unsorted) {
  char w[512], d[256];
  node_where(w, sizeof w, path, n);
  if (!n->op_type[0]) problem(k, w, "has no op_type");
  if (!n->opset) {
    bool imported = false;
    for (size_t i = 0; i < sc->n_opsets; i++) imported |= !strcmp(sc->opsets[i].domain, n->domain);
    if (!imported)
      problem(k, w, "domain '%s' is not in the opset imports", n->domain[0] ? n->domain : "ai.onnx");
  }
  for (size_t i = 0; i < n->n_inputs; i++) {
    const struct ir_value *v = n->inputs[i];
    if (!v) continue;
    if (v->flags & IR_VALUE_UNDEFINED) {
      problem(k, w, "input %zu '%s' is not defined (no graph input, initializer or node output has that name)",
              i, v->name);
      continue;
    }
    if (!v->producer) continue;
    if (v->graph == g) {
      if (v->producer->index >= n->index) {
        *unsorted = true;
        problem(k, w, "input %zu '%s' is %s, which does not come before it (nodes must be topologically sorted)",
                i, v->name, definer(v, d, sizeof d));
      }
    } else {
      const struct ir_node *owner = ancestor_in(g, v->graph);
      if (owner && v->producer->index >= owner->index)
        problem(k, w, "input %zu '%s' of the enclosing graph is %s, which does not come before node %d '%s' (%s)",
                i, v->name, definer(v, d, sizeof d), owner->index, owner->name, owner->op_type);
    }
  }
  for (size_t i = 0; i < n->n_attrs; i++) {
    const struct ir_attr *a = &n->attrs[i];
    if (!a->name[0]) problem(k, w, "attribute %zu has no name", i);
    if (a->type == IR_ATTR_UNDEFINED) problem(k, w, "attribute '%s' has no type", a->name);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(n->attrs[j].name, a->name)) {
        problem(k, w, "attribute '%s' is given twice", a->name);
        break;
      }
  }
  check_schema(k, w, n);
  for (size_t i = 0; i < n->n_attrs; i++) {
    const struct ir_attr *a = &n->attrs[i];
    for (size_t j = 0; j < ir_attr_n_graphs(a); j++) {
      const struct ir_graph *sub = ir_attr_graph(a, j);
      if (!sub) continue;
      char sp[768];
      snprintf(sp, sizeof sp, "%s / attribute '%s'%s", w, a->name, a->type == IR_ATTR_GRAPHS ? "[]" : "");
      check_graph(k, sub, sp, sc, false);
    }
  }
}

/* Whether `outer`, a value of a graph enclosing g, is in scope where g is
 * defined. onnx.checker adds a node's outputs to the scope after checking
 * the node's subgraphs, so only inputs, initializers and outputs of the
 * nodes before the one holding g (at that graph's level) are: a branch may
 * name its outputs as its If names its own, as Optimum's merged decoders do. */
static bool in_scope_at(const struct ir_graph *g, const struct ir_value *outer) {
  const struct ir_node *owner = g->owner;
  while (owner && owner->graph != outer->graph) owner = owner->graph->owner;
  return !owner || !outer->producer || outer->producer->index < owner->index;
}

static void check_graph(struct checker *k, const struct ir_graph *g, const char *path,
                        const struct scope *sc, bool is_main) {
  char d1[256], d2[256], w[512];
  const char *gpath = path[0] ? path : "graph";
  /* Single assignment: within the graph, and no shadowing of outer names. */
  struct ir_name_map *seen = ir_name_map_new(&k->scratch, g->n_values);
  for (size_t i = 0; i < g->n_values && seen; i++) {
    struct ir_value *v = g->values[i], *had = NULL;
    if ((v->flags & IR_VALUE_UNDEFINED) || !v->name[0]) continue;
    if (!ir_name_map_put(seen, v->name, v, &had)) break;
    if (had) {
      problem(k, gpath, "name '%s' is assigned twice: by %s and by %s", v->name,
              definer(had, d1, sizeof d1), definer(v, d2, sizeof d2));
      continue;
    }
    const struct ir_value *outer = g->parent ? ir_lookup(g->parent, v->name) : NULL;
    if (outer && !(outer->flags & IR_VALUE_UNDEFINED) && in_scope_at(g, outer))
      problem(k, gpath, "name '%s' (%s) shadows a value of an enclosing graph", v->name,
              definer(v, d1, sizeof d1));
  }
  for (size_t i = 0; i < g->n_inputs; i++) {
    const struct ir_value *v = g->inputs[i];
    if (!v->name[0]) problem(k, gpath, "graph input %zu has no name", i);
    else if (is_main && v->type.kind == IR_TYPE_NONE) problem(k, gpath, "graph input '%s' has no type", v->name);
  }
  for (size_t i = 0; i < g->n_initializers; i++) {
    const struct ir_value *v = g->initializers[i];
    if (!v->name[0]) problem(k, gpath, "initializer %zu has no name", i);
    const struct ir_tensor *t = v->init;
    if (t && t->location == IR_DATA_EXTERNAL && !t->data && t->nbytes) {
      tolk_error e;
      if (onnx_external_verify(k->model->dir, t, &e)) problem(k, gpath, "initializer '%s': %s", v->name, e.message);
    }
  }
  bool unsorted = false;
  for (size_t i = 0; i < g->n_nodes; i++) check_node(k, g, g->nodes[i], path, sc, &unsorted);
  if (unsorted) find_cycle(k, g, path);
  for (size_t i = 0; i < g->n_outputs; i++) {
    const struct ir_value *v = g->outputs[i];
    if (!v->name[0]) {
      problem(k, gpath, "graph output %zu has no name", i);
    } else if (v->flags & IR_VALUE_UNDEFINED) {
      problem(k, gpath, "graph output '%s' is not produced by any node, input or initializer", v->name);
    } else if (is_main && v->type.kind == IR_TYPE_NONE && !(v->flags & IR_VALUE_INITIALIZER)) {
      problem(k, gpath, "graph output '%s' has no type", v->name);
    }
  }
  (void)w;
}

/* ------------------------------------------------------------ model */

static void check_opsets(struct checker *k, const char *where, const struct ir_opset *o, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *dn = o[i].domain[0] ? o[i].domain : "ai.onnx";
    for (size_t j = 0; j < i; j++)
      if (!strcmp(o[j].domain, o[i].domain)) problem(k, where, "domain '%s' is imported twice", dn);
    if (o[i].version < 1)
      problem(k, where, "opset import of '%s' has version %lld", dn, (long long)o[i].version);
    else if (!o[i].domain[0] && o[i].version > onnx_max_opset)
      problem(k, where, "ai.onnx opset %lld is newer than tolk knows (%d)", (long long)o[i].version,
              onnx_max_opset);
  }
}

tolk_status tolk_model_check(const tolk_model *model, tolk_report_fn report, void *user,
                             tolk_error *err) {
  if (!model) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_model_check: NULL model");
  struct checker k = {0};
  k.model = model;
  k.m = &model->ir;
  k.report = report;
  k.user = user;
  tolk_arena_init(&k.scratch, 0);
  const struct ir_model *m = k.m;
  if (m->ir_version < 1)
    problem(&k, "model", "ir_version is missing");
  else if (m->ir_version > onnx_max_ir_version)
    problem(&k, "model", "ir_version %lld is newer than tolk knows (%d)", (long long)m->ir_version,
            onnx_max_ir_version);
  if (!m->n_opsets && m->ir_version >= 3) problem(&k, "model", "there are no opset imports");
  check_opsets(&k, "model", m->opsets, m->n_opsets);
  struct scope sc = {m->opsets, m->n_opsets};
  check_graph(&k, m->graph, "", &sc, true);
  for (size_t i = 0; i < m->n_functions; i++) {
    const struct ir_function *f = &m->functions[i];
    char where[512];
    snprintf(where, sizeof where, "function '%s%s%s'", f->domain, f->domain[0] ? "::" : "", f->name);
    if (!f->name[0]) problem(&k, where, "has no name");
    for (size_t j = 0; j < i; j++)
      if (!strcmp(m->functions[j].name, f->name) && !strcmp(m->functions[j].domain, f->domain) &&
          !strcmp(m->functions[j].overload, f->overload))
        problem(&k, where, "is defined twice");
    check_opsets(&k, where, f->opsets, f->n_opsets);
    /* Body nodes resolved their opsets through the function's imports
     * followed by the model's (see load.c); check against the same. */
    size_t n_all = f->n_opsets + m->n_opsets;
    struct ir_opset *all = n_all ? tolk_arena_array(&k.scratch, n_all, sizeof *all) : NULL;
    if (all) {
      if (f->n_opsets) memcpy(all, f->opsets, f->n_opsets * sizeof *all);
      if (m->n_opsets) memcpy(all + f->n_opsets, m->opsets, m->n_opsets * sizeof *all);
    }
    struct scope fs = {all, all ? n_all : 0};
    check_graph(&k, f->body, where, &fs, false);
  }
  tolk_arena_release(&k.scratch);
  if (!k.problems) return TOLK_OK;
  return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "%zu problem%s; the first: %s", k.problems,
                   k.problems == 1 ? "" : "s", k.first);
}
