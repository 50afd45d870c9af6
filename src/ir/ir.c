/*
 * ir.c — small helpers over the IR (see ir.h): scoped name lookup through a
 * per-graph hash map, attribute readers, opset lookup.
 *
 * The name map is open addressing with linear probing, kept at most half
 * full. It lives in the model's arena, so growing leaves the old table behind
 * until the model is freed; the loader sizes it from the counts it already
 * knows, so growth is rare.
 */
#include "ir.h"

#include <stdio.h>
#include <string.h>

struct ir_name_slot {
  const char *name;
  struct ir_value *value;
  uint64_t hash;
};

struct ir_name_map {
  struct tolk_arena *arena;
  struct ir_name_slot *slots;
  size_t cap; /* power of two */
  size_t count;
};

static uint64_t name_hash(const char *s) {
  /* FNV-1a: names are short and this is not exposed to collisions chosen to
   * hurt a server (a crafted model only slows its own load). */
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

struct ir_name_map *ir_name_map_new(struct tolk_arena *a, size_t expected) {
  struct ir_name_map *m = tolk_arena_alloc(a, sizeof *m);
  if (!m) return NULL;
  size_t cap = 16;
  while (cap / 2 < expected) {
    if (cap > SIZE_MAX / 4) return NULL;
    cap *= 2;
  }
  m->arena = a;
  m->cap = cap;
  m->slots = tolk_arena_array(a, cap, sizeof *m->slots);
  return m->slots ? m : NULL;
}

static struct ir_name_slot *find_slot(struct ir_name_slot *slots, size_t cap, const char *name,
                                      uint64_t h) {
  size_t i = (size_t)h & (cap - 1);
  for (;;) {
    struct ir_name_slot *s = &slots[i];
    if (!s->name || (s->hash == h && !strcmp(s->name, name))) return s;
    i = (i + 1) & (cap - 1);
  }
}

struct ir_value *ir_name_map_get(const struct ir_name_map *m, const char *name) {
  if (!m || !name) return NULL;
  struct ir_name_slot *s = find_slot(m->slots, m->cap, name, name_hash(name));
  return s->name ? s->value : NULL;
}

static bool grow(struct ir_name_map *m) {
  if (m->cap > SIZE_MAX / (2 * sizeof(struct ir_name_slot))) return false;
  size_t cap = m->cap * 2;
  struct ir_name_slot *slots = tolk_arena_array(m->arena, cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < m->cap; i++) {
    struct ir_name_slot *o = &m->slots[i];
    if (o->name) *find_slot(slots, cap, o->name, o->hash) = *o;
  }
  m->slots = slots;
  m->cap = cap;
  return true;
}

bool ir_name_map_put(struct ir_name_map *m, const char *name, struct ir_value *v,
                     struct ir_value **existing) {
  uint64_t h = name_hash(name);
  struct ir_name_slot *s = find_slot(m->slots, m->cap, name, h);
  if (s->name) {
    if (existing) *existing = s->value;
    return true;
  }
  if (existing) *existing = NULL;
  if ((m->count + 1) * 2 > m->cap) {
    if (!grow(m)) return false;
    s = find_slot(m->slots, m->cap, name, h);
  }
  s->name = name;
  s->value = v;
  s->hash = h;
  m->count++;
  return true;
}

struct ir_value *ir_lookup(const struct ir_graph *g, const char *name) {
  for (; g; g = g->parent) {
    struct ir_value *v = ir_name_map_get(g->names, name);
    if (v) return v;
  }
  return NULL;
}

const struct ir_attr *ir_node_attr(const struct ir_node *n, const char *name) {
  for (size_t i = 0; i < n->n_attrs; i++)
    if (n->attrs[i].name && !strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

size_t ir_attr_n_graphs(const struct ir_attr *a) {
  return a->type == IR_ATTR_GRAPH ? 1 : a->type == IR_ATTR_GRAPHS ? a->n : 0;
}

const struct ir_graph *ir_attr_graph(const struct ir_attr *a, size_t j) {
  return a->type == IR_ATTR_GRAPH ? a->g : a->graphs[j];
}

/* Appends g's own step ("NODE/ATTR" or "NODE/ATTR[j]") at buf + *used. */
static void graph_step(const struct ir_graph *g, char *buf, size_t size, size_t *used) {
  const struct ir_node *n = g->owner;
  for (size_t a = 0; n && a < n->n_attrs; a++)
    for (size_t j = 0; j < ir_attr_n_graphs(&n->attrs[a]); j++) {
      if (ir_attr_graph(&n->attrs[a], j) != g) continue;
      int k = n->attrs[a].type == IR_ATTR_GRAPHS
                  ? snprintf(buf + *used, size - *used, "%s%s/%s[%zu]", *used ? "/" : "", n->name, n->attrs[a].name, j)
                  : snprintf(buf + *used, size - *used, "%s%s/%s", *used ? "/" : "", n->name, n->attrs[a].name);
      *used += k > 0 ? (size_t)k : 0;
      if (*used >= size) *used = size - 1;
      return;
    }
}

/* The enclosing graphs' steps first; nesting is bounded by the loader's
 * max_graph_depth. */
static void path_into(const struct ir_graph *g, char *buf, size_t size, size_t *used) {
  if (!g || !g->parent) return;
  path_into(g->parent, buf, size, used);
  graph_step(g, buf, size, used);
}

void ir_graph_path(const struct ir_graph *g, char *buf, size_t size) {
  size_t used = 0;
  if (!size) return;
  buf[0] = '\0';
  path_into(g, buf, size, &used);
}

int64_t ir_attr_int(const struct ir_node *n, const char *name, int64_t dflt) {
  const struct ir_attr *a = ir_node_attr(n, name);
  return a ? a->i : dflt;
}

float ir_attr_float(const struct ir_node *n, const char *name, float dflt) {
  const struct ir_attr *a = ir_node_attr(n, name);
  return a ? a->f : dflt;
}

const char *ir_attr_string(const struct ir_node *n, const char *name, const char *dflt) {
  const struct ir_attr *a = ir_node_attr(n, name);
  /* The loader stores every attribute string NUL-terminated in the arena. */
  return a && a->s.data ? (const char *)a->s.data : dflt;
}

int64_t ir_model_opset(const struct ir_model *m, const char *domain) {
  if (!strcmp(domain, "ai.onnx")) domain = "";
  for (size_t i = 0; i < m->n_opsets; i++)
    if (!strcmp(m->opsets[i].domain, domain)) return m->opsets[i].version;
  return 0;
}

int64_t ir_type_numel(const struct ir_type *t) {
  if (t->rank < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i].value < 0 || !tolk_mul_i64(n, t->dims[i].value, &n)) return -1;
  }
  return n;
}
