/*
 * load.c — ModelProto → IR: graphs, nodes, attributes, value infos, opset
 * imports, metadata and local functions.
 *
 * A graph is decoded in phases so that every name a node can refer to is
 * known before inputs are resolved: initializers and graph inputs first, then
 * every node's outputs, then graph outputs and value_info annotations, and
 * last each node's attributes (subgraphs) and inputs. Inputs are therefore
 * resolved even when nodes are out of order (the checker reports that, and
 * cycles), and a subgraph sees all names of the graphs around it. A name that
 * resolves to nothing becomes an IR_VALUE_UNDEFINED value for the checker.
 *
 * Subgraph nesting is bounded by params.max_graph_depth, checked before
 * descending, so a crafted 10,000-deep nesting ends at the bound instead of
 * exhausting the stack. Every repeated field is counted before the array for
 * it is allocated; counts are bounded by the bytes present.
 */
#include "onnx.h"

#include <string.h>

/* Error messages name the graph path down to this nesting depth. */
enum { CONTEXT_DEPTH = 3 };

/* Field numbers of GraphProto, and of FunctionProto seen as a graph. */
struct graph_fields {
  uint32_t node, input, output, value_info, initializer, sparse_init, name, doc;
  bool names_only; /* inputs/outputs are bare names (FunctionProto) */
};
static const struct graph_fields graph_proto = {1, 11, 12, 13, 5, 15, 2, 10, false};
static const struct graph_fields function_proto = {7, 4, 5, 12, 0, 0, 1, 8, true};

/* Decoding state of one graph; linked to the graphs enclosing it. */
struct gctx {
  struct ir_graph *g;
  struct gctx *parent;
  size_t values_cap, outer_cap;
  struct ir_name_map *outer_set; /* names already in g->outer_refs */
  const struct ir_opset *opsets;  /* imports that resolve node->opset */
  size_t n_opsets;
  int depth;
  const uint8_t *p;               /* the message itself, read once per phase */
  size_t len;
  const struct graph_fields *gf;
  struct ir_node *node_mem;       /* the nodes, and their windows for pass B */
  struct pb_field *node_f;
};

static tolk_status oom(struct onnx_loader *l) {
  return tolk_fail(l->err, TOLK_ERR_NO_MEMORY, "out of memory while decoding the model");
}

static struct pb reader(const struct onnx_loader *l, const uint8_t *p, size_t len) {
  struct pb r = {p, p + len, l->base};
  return r;
}

/* Appends to an arena array that doubles when full. */
static bool push_ptr(struct tolk_arena *a, void ***arr, size_t *n, size_t *cap, void *p) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 8;
    void **na = tolk_arena_array(a, nc, sizeof *na);
    if (!na) return false;
    if (*n) memcpy(na, *arr, *n * sizeof *na);
    *arr = na;
    *cap = nc;
  }
  (*arr)[(*n)++] = p;
  return true;
}

static struct ir_value *new_value(struct onnx_loader *l, struct gctx *c, const char *name) {
  struct ir_value *v = tolk_arena_alloc(l->arena, sizeof *v);
  if (!v) return NULL;
  v->name = name;
  v->graph = c->g;
  v->type.rank = -1;
  v->index = (int)c->g->n_values;
  if (c->g->n_values >= INT32_MAX ||
      !push_ptr(l->arena, (void ***)&c->g->values, &c->g->n_values, &c->values_cap, v))
    return NULL;
  return v;
}

/* Registers v under its name unless the name is taken (duplicates stay in
 * values[] for the checker to report). */
static bool define(struct gctx *c, struct ir_value *v) {
  if (!v->name[0]) return true;
  return ir_name_map_put(c->g->names, v->name, v, NULL);
}

/* Resolves `name` as seen from graph c: local first, then enclosing graphs.
 * A value from an enclosing graph is recorded in outer_refs of every graph
 * between the use and the definition. Unknown names yield an UNDEFINED
 * value defined in c. */
static struct ir_value *resolve(struct onnx_loader *l, struct gctx *c, const char *name) {
  struct ir_value *v = ir_name_map_get(c->g->names, name);
  if (v) return v;
  struct gctx *def = c->parent;
  for (; def; def = def->parent)
    if ((v = ir_name_map_get(def->g->names, name))) break;
  if (!v) {
    v = new_value(l, c, name);
    if (!v) return NULL;
    v->flags |= IR_VALUE_UNDEFINED;
    return define(c, v) ? v : NULL;
  }
  for (struct gctx *u = c; u != def; u = u->parent) {
    if (!u->outer_set && !(u->outer_set = ir_name_map_new(l->arena, 8))) return NULL;
    struct ir_value *had;
    if (!ir_name_map_put(u->outer_set, v->name, v, &had)) return NULL;
    if (had) continue;
    if (!push_ptr(l->arena, (void ***)&u->g->outer_refs, &u->g->n_outer_refs, &u->outer_cap, v))
      return NULL;
  }
  return v;
}

/* ------------------------------------------------------------ value info */

static tolk_status value_info(struct onnx_loader *l, const uint8_t *p, size_t len, const char **name,
                              struct ir_type *type, const char **doc) {
  struct pb r = reader(l, p, len);
  struct pb_field f;
  const char *why;
  *name = "";
  memset(type, 0, sizeof *type);
  type->rank = -1;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "ValueInfoProto", f.offset, why);
    if (f.number < 1 || f.number > 3) continue;
    if (f.wire != PB_LEN) return onnx_malformed(l, "ValueInfoProto", f.offset, "expected a length-delimited field");
    if (f.number == 1) {
      if (!(*name = onnx_str(l, &f))) return oom(l);
    } else if (f.number == 2) {
      tolk_status st = onnx_type_proto(l, f.data, f.len, type);
      if (st) return st;
    } else if (doc && !(*doc = onnx_str(l, &f))) {
      return oom(l);
    }
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------ attributes */

static tolk_status decode_graph(struct onnx_loader *l, const uint8_t *p, size_t len,
                                const struct graph_fields *fields, struct gctx *parent,
                                struct ir_node *owner, const struct ir_opset *opsets, size_t n_opsets,
                                int depth, struct ir_graph **out);

static tolk_status subgraph(struct onnx_loader *l, struct gctx *c, struct ir_node *node,
                            const struct pb_field *f, struct ir_graph **out) {
  /* c is NULL for a function's attribute defaults: no enclosing graph. */
  int depth = c ? c->depth + 1 : 1;
  if (depth > l->params.max_graph_depth)
    return tolk_fail(l->err, TOLK_ERR_LIMIT, "subgraphs nested deeper than %d levels",
                     l->params.max_graph_depth);
  return decode_graph(l, f->data, f->len, &graph_proto, c, node, c ? c->opsets : l->m->opsets,
                      c ? c->n_opsets : l->m->n_opsets, depth, out);
}

enum {
  AF_NAME = 1, AF_F = 2, AF_I = 3, AF_S = 4, AF_T = 5, AF_G = 6, AF_FLOATS = 7, AF_INTS = 8,
  AF_STRINGS = 9, AF_TENSORS = 10, AF_GRAPHS = 11, AF_DOC = 13, AF_TP = 14, AF_TPS = 15,
  AF_TYPE = 20, AF_REF = 21, AF_SPARSE = 22, AF_SPARSES = 23
};

static const char *attr_what(int type) {
  static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH",
                                      "FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS",
                                      "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  return type >= 0 && type <= 14 ? names[type] : "unknown";
}

/* What the first pass over an AttributeProto learns: which fields are there,
 * how many elements each list field holds, and the declared type. */
struct attr_scan {
  size_t counts[24];
  bool seen[24];
  int64_t type;
};

/* Counts the elements of one floats or ints field, packed or not. */
static tolk_status count_numbers(struct onnx_loader *l, const struct pb_field *f, struct attr_scan *s) {
  if (f->number == AF_FLOATS) {
    if (f->wire == PB_LEN) {
      if (f->len % 4) return onnx_malformed(l, "AttributeProto.floats", f->offset, "packed floats not a multiple of 4");
      s->counts[AF_FLOATS] += f->len / 4;
    } else if (f->wire == PB_FIXED32) {
      s->counts[AF_FLOATS]++;
    } else {
      return onnx_malformed(l, "AttributeProto.floats", f->offset, "wrong wire type");
    }
    return TOLK_OK;
  }
  if (f->wire == PB_LEN) {
    size_t n;
    if (!pb_count_varints(f->data, f->len, &n))
      return onnx_malformed(l, "AttributeProto.ints", f->offset, "packed varints end mid-value");
    s->counts[AF_INTS] += n;
  } else if (f->wire == PB_VARINT) {
    s->counts[AF_INTS]++;
  } else {
    return onnx_malformed(l, "AttributeProto.ints", f->offset, "wrong wire type");
  }
  return TOLK_OK;
}

/* Pass 1: the scalars and names, and the counts the lists are sized by. */
static tolk_status scan_attr(struct onnx_loader *l, const uint8_t *p, size_t len, struct ir_attr *a,
                             struct attr_scan *s) {
  struct pb r = reader(l, p, len);
  struct pb_field f;
  const char *why;
  tolk_status st;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "AttributeProto", f.offset, why);
    if (f.number >= 24) continue;
    s->seen[f.number] = true;
    switch (f.number) {
    case AF_F:
      if (f.wire != PB_FIXED32) return onnx_malformed(l, "AttributeProto.f", f.offset, "not a fixed32");
      a->f = pb_f32(f.u64);
      break;
    case AF_I:
    case AF_TYPE:
      if (f.wire != PB_VARINT) return onnx_malformed(l, "AttributeProto", f.offset, "i/type is not a varint");
      if (f.number == AF_I) a->i = pb_i64(f.u64);
      else s->type = pb_i64(f.u64);
      break;
    case AF_FLOATS:
    case AF_INTS:
      if ((st = count_numbers(l, &f, s))) return st;
      break;
    case AF_NAME: case AF_S: case AF_T: case AF_G: case AF_STRINGS: case AF_TENSORS: case AF_GRAPHS:
    case AF_DOC: case AF_TP: case AF_TPS: case AF_REF: case AF_SPARSE: case AF_SPARSES:
      if (f.wire != PB_LEN)
        return onnx_malformed(l, "AttributeProto", f.offset, "expected a length-delimited field");
      s->counts[f.number]++;
      if (f.number == AF_NAME && !(a->name = onnx_str(l, &f))) return oom(l);
      if (f.number == AF_DOC && !(a->doc = onnx_str(l, &f))) return oom(l);
      if (f.number == AF_REF && !(a->ref_attr_name = onnx_str(l, &f))) return oom(l);
      break;
    default:
      break;
    }
  }
  return TOLK_OK;
}

/* Sets a->type from the scan; IR version 1 files carry no type, so it is
 * inferred from the field that is set. */
static tolk_status attr_type(struct onnx_loader *l, const struct attr_scan *s, struct ir_attr *a) {
  int64_t type = s->type;
  if (!type) {
    static const struct { int field, type; } infer[] = {
        {AF_F, IR_ATTR_FLOAT}, {AF_I, IR_ATTR_INT}, {AF_S, IR_ATTR_STRING}, {AF_T, IR_ATTR_TENSOR},
        {AF_G, IR_ATTR_GRAPH}, {AF_SPARSE, IR_ATTR_SPARSE_TENSOR}, {AF_TP, IR_ATTR_TYPE_PROTO},
        {AF_FLOATS, IR_ATTR_FLOATS}, {AF_INTS, IR_ATTR_INTS}, {AF_STRINGS, IR_ATTR_STRINGS},
        {AF_TENSORS, IR_ATTR_TENSORS}, {AF_GRAPHS, IR_ATTR_GRAPHS}, {AF_SPARSES, IR_ATTR_SPARSE_TENSORS},
        {AF_TPS, IR_ATTR_TYPE_PROTOS}};
    for (size_t i = 0; i < sizeof infer / sizeof infer[0] && !type; i++)
      if (s->seen[infer[i].field]) type = infer[i].type;
  }
  if (type < 0 || type > IR_ATTR_TYPE_PROTOS) {
    a->type = IR_ATTR_UNDEFINED;
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "attribute '%s' has unknown type %lld", a->name,
                     (long long)type);
  }
  a->type = (enum ir_attr_type)type;
  return TOLK_OK;
}

/* The field that holds the elements of a list type; 0 for a singular type. */
static int list_field(enum ir_attr_type type) {
  switch (type) {
  case IR_ATTR_FLOATS: return AF_FLOATS;
  case IR_ATTR_INTS: return AF_INTS;
  case IR_ATTR_STRINGS: return AF_STRINGS;
  case IR_ATTR_TENSORS: return AF_TENSORS;
  case IR_ATTR_GRAPHS: return AF_GRAPHS;
  case IR_ATTR_SPARSE_TENSORS: return AF_SPARSES;
  case IR_ATTR_TYPE_PROTOS: return AF_TPS;
  default: return 0;
  }
}

/* Sizes the array of list field `list` for its n elements. */
static tolk_status alloc_list(struct onnx_loader *l, struct ir_attr *a, int list, size_t n) {
  a->n = n;
  if (!n) return TOLK_OK;
  void *arr = NULL;
  switch (list) {
  case AF_FLOATS: arr = a->floats = tolk_arena_array(l->arena, n, sizeof *a->floats); break;
  case AF_INTS: arr = a->ints = tolk_arena_array(l->arena, n, sizeof *a->ints); break;
  case AF_STRINGS: arr = a->strings = tolk_arena_array(l->arena, n, sizeof *a->strings); break;
  case AF_TENSORS:
  case AF_SPARSES: arr = a->tensors = tolk_arena_array(l->arena, n, sizeof *a->tensors); break;
  case AF_GRAPHS: arr = a->graphs = tolk_arena_array(l->arena, n, sizeof *a->graphs); break;
  case AF_TPS: arr = a->tps = tolk_arena_array(l->arena, n, sizeof *a->tps); break;
  }
  return arr ? TOLK_OK : oom(l);
}

/* Stores the floats or ints of one field from *k on; a packed field holds
 * several. */
static tolk_status read_numbers(struct onnx_loader *l, const struct pb_field *f, struct ir_attr *a,
                                size_t *k) {
  if (f->number == AF_FLOATS) {
    if (f->wire != PB_LEN) {
      a->floats[(*k)++] = pb_f32(f->u64);
      return TOLK_OK;
    }
    for (size_t o = 0; o < f->len; o += 4)
      a->floats[(*k)++] = pb_f32((uint64_t)f->data[o] | (uint64_t)f->data[o + 1] << 8 |
                                 (uint64_t)f->data[o + 2] << 16 | (uint64_t)f->data[o + 3] << 24);
    return TOLK_OK;
  }
  if (f->wire != PB_LEN) {
    a->ints[(*k)++] = pb_i64(f->u64);
    return TOLK_OK;
  }
  struct pb in = reader(l, f->data, f->len);
  uint64_t v;
  while (!pb_eof(&in)) {
    if (!pb_varint(&in, &v)) return onnx_malformed(l, "AttributeProto.ints", pb_offset(&in), "bad varint");
    a->ints[(*k)++] = pb_i64(v);
  }
  return TOLK_OK;
}

/* Stores element *k (and on) of list field f->number. */
static tolk_status read_list_item(struct onnx_loader *l, struct gctx *c, struct ir_node *node,
                                  const struct pb_field *f, struct ir_attr *a, size_t *k) {
  switch (f->number) {
  case AF_FLOATS:
  case AF_INTS: return read_numbers(l, f, a, k);
  case AF_STRINGS: {
    char *s = tolk_arena_strndup(l->arena, (const char *)f->data, f->len);
    if (!s) return oom(l);
    a->strings[*k].data = (const uint8_t *)s;
    a->strings[(*k)++].len = f->len;
    return TOLK_OK;
  }
  case AF_TENSORS: return onnx_tensor_proto(l, f->data, f->len, &a->tensors[(*k)++]);
  case AF_SPARSES: return onnx_sparse_tensor_proto(l, f->data, f->len, &a->tensors[(*k)++]);
  case AF_GRAPHS: return subgraph(l, c, node, f, &a->graphs[(*k)++]);
  case AF_TPS: return onnx_type_proto(l, f->data, f->len, &a->tps[(*k)++]);
  default: return TOLK_OK;
  }
}

/* Stores the value of a singular type from its field f, which is not
 * a->type's field when the file sets others as well. */
static tolk_status read_single(struct onnx_loader *l, struct gctx *c, struct ir_node *node,
                               const struct pb_field *f, struct ir_attr *a) {
  if (f->number == AF_S && a->type == IR_ATTR_STRING) {
    /* Kept NUL-terminated so ir_attr_string can hand it out as a C string. */
    char *s = tolk_arena_strndup(l->arena, (const char *)f->data, f->len);
    if (!s) return oom(l);
    a->s.data = (const uint8_t *)s;
    a->s.len = f->len;
  } else if (f->number == AF_T && a->type == IR_ATTR_TENSOR) {
    return onnx_tensor_proto(l, f->data, f->len, &a->t);
  } else if (f->number == AF_SPARSE && a->type == IR_ATTR_SPARSE_TENSOR) {
    return onnx_sparse_tensor_proto(l, f->data, f->len, &a->t);
  } else if (f->number == AF_TP && a->type == IR_ATTR_TYPE_PROTO) {
    if (!(a->tp = tolk_arena_alloc(l->arena, sizeof *a->tp))) return oom(l);
    return onnx_type_proto(l, f->data, f->len, a->tp);
  } else if (f->number == AF_G && a->type == IR_ATTR_GRAPH) {
    return subgraph(l, c, node, f, &a->g);
  }
  return TOLK_OK;
}

/* Pass 2: the value itself, into the arrays alloc_list sized. */
static tolk_status read_attr_values(struct onnx_loader *l, struct gctx *c, struct ir_node *node,
                                    const uint8_t *p, size_t len, struct ir_attr *a, int list) {
  struct pb r = reader(l, p, len);
  struct pb_field f;
  const char *why;
  tolk_status st;
  size_t k = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "AttributeProto", f.offset, why);
    st = list && (int)f.number == list ? read_list_item(l, c, node, &f, a, &k)
                                       : read_single(l, c, node, &f, a);
    if (st) return st;
  }
  return TOLK_OK;
}

static tolk_status decode_attr(struct onnx_loader *l, struct gctx *c, struct ir_node *node,
                               const uint8_t *p, size_t len, struct ir_attr *a) {
  struct attr_scan s = {{0}, {false}, 0};
  a->name = "";
  tolk_status st = scan_attr(l, p, len, a, &s);
  if (!st) st = attr_type(l, &s, a);
  if (st) return st;
  /* A reference to a function's attribute carries no value of its own. */
  if (a->ref_attr_name) return TOLK_OK;
  int list = list_field(a->type);
  if ((st = alloc_list(l, a, list, list ? s.counts[list] : 0))) return st;
  if ((st = read_attr_values(l, c, node, p, len, a, list))) return st;
  /* The value field for a singular type must be there. */
  static const int single[] = {[IR_ATTR_TENSOR] = AF_T, [IR_ATTR_GRAPH] = AF_G,
                               [IR_ATTR_SPARSE_TENSOR] = AF_SPARSE, [IR_ATTR_TYPE_PROTO] = AF_TP};
  if ((size_t)a->type < sizeof single / sizeof single[0] && single[a->type] && !s.seen[single[a->type]])
    return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "attribute '%s' of type %s has no value", a->name,
                     attr_what(a->type));
  return TOLK_OK;
}

/* ------------------------------------------------------------ nodes */

enum { NF_INPUT = 1, NF_OUTPUT = 2, NF_NAME = 3, NF_OP = 4, NF_ATTR = 5, NF_DOC = 6, NF_DOMAIN = 7 };

static int64_t scope_opset(const struct gctx *c, const char *domain) {
  for (size_t i = 0; i < c->n_opsets; i++)
    if (!strcmp(c->opsets[i].domain, domain)) return c->opsets[i].version;
  return 0;
}

/* Pass A: identity, outputs (defining their values), counts. */
static tolk_status node_head(struct onnx_loader *l, struct gctx *c, const uint8_t *p, size_t len,
                             struct ir_node *n) {
  struct pb r = reader(l, p, len);
  struct pb_field f;
  const char *why;
  n->name = n->op_type = n->domain = "";
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "NodeProto", f.offset, why);
    if (f.number < 1 || f.number > 7) continue;
    if (f.wire != PB_LEN) return onnx_malformed(l, "NodeProto", f.offset, "expected a length-delimited field");
    switch (f.number) {
    case NF_INPUT: n->n_inputs++; break;
    case NF_OUTPUT: n->n_outputs++; break;
    case NF_ATTR: n->n_attrs++; break;
    case NF_NAME: if (!(n->name = onnx_str(l, &f))) return oom(l); break;
    case NF_OP: if (!(n->op_type = onnx_str(l, &f))) return oom(l); break;
    case NF_DOC: if (!(n->doc = onnx_str(l, &f))) return oom(l); break;
    case NF_DOMAIN:
      if (f.len == 7 && !memcmp(f.data, "ai.onnx", 7)) n->domain = "";
      else if (!(n->domain = onnx_str(l, &f))) return oom(l);
      break;
    }
  }
  n->opset = (int)scope_opset(c, n->domain);
  n->inputs = n->n_inputs ? tolk_arena_array(l->arena, n->n_inputs, sizeof *n->inputs) : NULL;
  n->outputs = n->n_outputs ? tolk_arena_array(l->arena, n->n_outputs, sizeof *n->outputs) : NULL;
  n->attrs = n->n_attrs ? tolk_arena_array(l->arena, n->n_attrs, sizeof *n->attrs) : NULL;
  if ((n->n_inputs && !n->inputs) || (n->n_outputs && !n->outputs) || (n->n_attrs && !n->attrs))
    return oom(l);
  size_t k = 0;
  r = reader(l, p, len);
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "NodeProto", f.offset, why);
    if (f.number != NF_OUTPUT) continue;
    size_t i = k++;
    if (!f.len) continue; /* omitted optional output */
    const char *name = onnx_str(l, &f);
    struct ir_value *v = name ? new_value(l, c, name) : NULL;
    if (!v) return oom(l);
    v->producer = n;
    v->producer_output = (int)i;
    n->outputs[i] = v;
    if (!define(c, v)) return oom(l);
  }
  return TOLK_OK;
}

/* Pass B: attributes (with subgraphs) and inputs. */
static tolk_status node_body(struct onnx_loader *l, struct gctx *c, const uint8_t *p, size_t len,
                             struct ir_node *n) {
  struct pb r = reader(l, p, len);
  struct pb_field f;
  const char *why;
  size_t ki = 0, ka = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "NodeProto", f.offset, why);
    if (f.number == NF_INPUT) {
      size_t i = ki++;
      if (!f.len) continue;
      const char *name = onnx_str(l, &f);
      if (!name || !(n->inputs[i] = resolve(l, c, name))) return oom(l);
    } else if (f.number == NF_ATTR) {
      tolk_status st = decode_attr(l, c, n, f.data, f.len, &n->attrs[ka]);
      if (st) {
        if (c->depth < CONTEXT_DEPTH)
          tolk_error_prefix(l->err, "attribute %zu '%s'", ka, n->attrs[ka].name ? n->attrs[ka].name : "");
        return st;
      }
      ka++;
    }
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------ graphs */

struct graph_counts {
  size_t nodes, inputs, outputs, value_info, inits, sparse;
};

/* Prefixes a failure in part `idx` (a node, an input, ...) of graph c with
 * where it happened; each enclosing graph adds its own, outermost last. Past
 * a few levels of nesting the path is elided so the reason itself stays
 * within the message. */
static tolk_status part_failed(struct onnx_loader *l, const struct gctx *c, const char *what, size_t idx,
                               tolk_status st) {
  const struct ir_graph *g = c->g;
  if (c->depth > CONTEXT_DEPTH) return st;
  if (c->depth == CONTEXT_DEPTH) {
    tolk_error_prefix(l->err, "...");
    return st;
  }
  char gname[160];
  if (g->name[0]) snprintf(gname, sizeof gname, "graph '%.120s': ", g->name);
  else gname[0] = '\0';
  if (!strcmp(what, "node")) {
    const struct ir_node *nd = g->nodes[idx];
    tolk_error_prefix(l->err, "%snode %zu '%s' (%s)", gname, idx, nd->name ? nd->name : "",
                      nd->op_type && nd->op_type[0] ? nd->op_type : "?");
  } else {
    tolk_error_prefix(l->err, "%s%s %zu", gname, what, idx);
  }
  return st;
}

/* One phase's work on one field of the graph. */
typedef tolk_status (*graph_field_fn)(struct onnx_loader *l, struct gctx *c, const struct pb_field *f);

/* A phase: fn on each of graph c's fields numbered a or b (0 matches
 * nothing), in file order, stopping at the first failure. */
static tolk_status each_graph_field(struct onnx_loader *l, struct gctx *c, uint32_t a, uint32_t b,
                                    graph_field_fn fn) {
  struct pb r = reader(l, c->p, c->len);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "GraphProto", f.offset, why);
    if (!((a && f.number == a) || (b && f.number == b))) continue;
    tolk_status st = fn(l, c, &f);
    if (st) return st;
  }
  return TOLK_OK;
}

/* The name, type and doc of a graph input or output: a ValueInfoProto, or
 * in a FunctionProto (bare) only a name. A NULL *name is out of memory,
 * reported apart from a broken ValueInfoProto, which returns its status. */
static tolk_status declared(struct onnx_loader *l, bool bare, const struct pb_field *f, const char **name,
                            struct ir_type *type, const char **doc) {
  *name = "";
  *type = (struct ir_type){.rank = -1};
  *doc = NULL;
  if (!bare) return value_info(l, f->data, f->len, name, type, doc);
  *name = onnx_str(l, f);
  return TOLK_OK;
}

/* Counts every repeated field of the graph and reads its name and doc. */
static tolk_status count_graph(struct onnx_loader *l, const struct gctx *c, struct graph_counts *n) {
  const struct graph_fields *gf = c->gf;
  struct ir_graph *g = c->g;
  struct pb r = reader(l, c->p, c->len);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "GraphProto", f.offset, why);
    uint32_t k = f.number;
    bool known = k == gf->node || k == gf->input || k == gf->output || k == gf->value_info ||
                 (gf->initializer && (k == gf->initializer || k == gf->sparse_init)) || k == gf->name ||
                 k == gf->doc;
    if (!known) continue;
    if (f.wire != PB_LEN) return onnx_malformed(l, "GraphProto", f.offset, "expected a length-delimited field");
    if (k == gf->node) n->nodes++;
    else if (k == gf->input) n->inputs++;
    else if (k == gf->output) n->outputs++;
    else if (k == gf->value_info) n->value_info++;
    else if (k == gf->initializer) n->inits++;
    else if (k == gf->sparse_init) n->sparse++;
    else if (k == gf->name) { if (!(g->name = onnx_str(l, &f))) return oom(l); }
    else if (!(g->doc = onnx_str(l, &f))) return oom(l);
  }
  return TOLK_OK;
}

/* Sizes the graph's arrays and name map, and the nodes with their windows. */
static tolk_status alloc_graph(struct onnx_loader *l, struct gctx *c, const struct graph_counts *n) {
  struct ir_graph *g = c->g;
  size_t expect = n->inits + n->sparse + n->inputs + n->nodes;
  if (!(g->names = ir_name_map_new(l->arena, expect))) return oom(l);
  g->nodes = n->nodes ? tolk_arena_array(l->arena, n->nodes, sizeof *g->nodes) : NULL;
  c->node_mem = n->nodes ? tolk_arena_array(l->arena, n->nodes, sizeof *c->node_mem) : NULL;
  g->inputs = n->inputs ? tolk_arena_array(l->arena, n->inputs, sizeof *g->inputs) : NULL;
  g->outputs = n->outputs ? tolk_arena_array(l->arena, n->outputs, sizeof *g->outputs) : NULL;
  g->value_info = n->value_info ? tolk_arena_array(l->arena, n->value_info, sizeof *g->value_info) : NULL;
  size_t n_inits = n->inits + n->sparse;
  g->initializers = n_inits ? tolk_arena_array(l->arena, n_inits, sizeof *g->initializers) : NULL;
  if ((n->nodes && (!g->nodes || !c->node_mem)) || (n->inputs && !g->inputs) || (n->outputs && !g->outputs) ||
      (n->value_info && !g->value_info) || (n_inits && !g->initializers))
    return oom(l);
  c->node_f = n->nodes ? tolk_arena_array(l->arena, n->nodes, sizeof *c->node_f) : NULL;
  if (n->nodes && !c->node_f) return oom(l);
  return TOLK_OK;
}

/* Defines the value of initializer t, typed by the tensor itself. */
static bool add_initializer(struct onnx_loader *l, struct gctx *c, struct ir_tensor *t) {
  struct ir_value *v = new_value(l, c, t->name);
  if (!v) return false;
  v->init = t;
  v->flags |= IR_VALUE_INITIALIZER;
  v->type.kind = IR_TYPE_TENSOR;
  v->type.dtype = t->dtype;
  v->type.rank = t->rank;
  if (t->rank) {
    v->type.dims = tolk_arena_array(l->arena, (size_t)t->rank, sizeof *v->type.dims);
    if (!v->type.dims) return false;
    for (int i = 0; i < t->rank; i++) v->type.dims[i].value = t->dims[i];
  }
  c->g->initializers[c->g->n_initializers++] = v;
  return define(c, v);
}

/* Decodes an initializer or sparse initializer and defines its value. */
static tolk_status read_initializer(struct onnx_loader *l, struct gctx *c, const struct pb_field *f) {
  bool plain = f->number == c->gf->initializer;
  struct ir_tensor *t;
  /* Only plain initializers may stay misaligned: the executor aligns them
   * where needed, while the densifier and other readers of attribute and
   * sparse tensors read typed data. */
  l->borrow_misaligned = plain;
  tolk_status st = plain ? onnx_tensor_proto(l, f->data, f->len, &t)
                         : onnx_sparse_tensor_proto(l, f->data, f->len, &t);
  l->borrow_misaligned = false;
  if (st) return part_failed(l, c, "initializer", c->g->n_initializers, st);
  return add_initializer(l, c, t) ? TOLK_OK : oom(l);
}

/* A graph input; in IR < 4 the inputs also list the initializers, whose
 * values they then share. */
static tolk_status read_input(struct onnx_loader *l, struct gctx *c, const struct pb_field *f) {
  struct ir_graph *g = c->g;
  const char *name, *doc;
  struct ir_type type;
  tolk_status st = declared(l, c->gf->names_only, f, &name, &type, &doc);
  if (st) return part_failed(l, c, "input", g->n_inputs, st);
  if (!name) return oom(l);
  struct ir_value *v = ir_name_map_get(g->names, name);
  if (!(v && (v->flags & IR_VALUE_INITIALIZER) && !(v->flags & IR_VALUE_GRAPH_INPUT))) {
    if (!(v = new_value(l, c, name))) return oom(l);
    v->type = type;
    if (!define(c, v)) return oom(l);
  }
  v->flags |= IR_VALUE_GRAPH_INPUT;
  if (doc) v->doc = doc;
  g->inputs[g->n_inputs++] = v;
  return TOLK_OK;
}

/* Nodes, pass A: a node's identity and outputs; its window is kept for
 * pass B. */
static tolk_status read_node_head(struct onnx_loader *l, struct gctx *c, const struct pb_field *f) {
  struct ir_graph *g = c->g;
  size_t idx = g->n_nodes;
  struct ir_node *nd = &c->node_mem[idx];
  nd->graph = g;
  nd->index = (int)idx;
  nd->src_index = (int)idx;
  g->nodes[idx] = nd;
  c->node_f[idx] = *f;
  tolk_status st = node_head(l, c, f->data, f->len, nd);
  if (st) return part_failed(l, c, "node", idx, st);
  g->n_nodes = idx + 1;
  return TOLK_OK;
}

/* Marks the value a graph output names, which may be a value of an
 * enclosing graph or an undefined one. */
static bool add_output(struct onnx_loader *l, struct gctx *c, const char *name, const struct ir_type *type,
                       const char *doc) {
  struct ir_value *v = resolve(l, c, name);
  if (!v) return false;
  if (v->graph == c->g) {
    v->flags |= IR_VALUE_GRAPH_OUTPUT;
    if (v->type.kind == IR_TYPE_NONE) v->type = *type;
    if (doc && !v->doc) v->doc = doc;
  }
  c->g->outputs[c->g->n_outputs++] = v;
  return true;
}

/* A graph output or a value_info annotation. A failure is named output 0
 * or value_info 0 whatever its place: the loader has always named it so. */
static tolk_status read_output(struct onnx_loader *l, struct gctx *c, const struct pb_field *f) {
  struct ir_graph *g = c->g;
  bool is_out = f->number == c->gf->output;
  const char *name, *doc;
  struct ir_type type;
  tolk_status st = declared(l, c->gf->names_only && is_out, f, &name, &type, &doc);
  if (st) return part_failed(l, c, is_out ? "output" : "value_info", 0, st);
  if (!name) return oom(l);
  if (is_out) return add_output(l, c, name, &type, doc) ? TOLK_OK : oom(l);
  struct ir_value *v = ir_name_map_get(g->names, name);
  if (!v) return TOLK_OK; /* annotates nothing in this graph */
  if (v->type.kind == IR_TYPE_NONE) v->type = type;
  g->value_info[g->n_value_info++] = v;
  return TOLK_OK;
}

/* Decodes a GraphProto, or a FunctionProto's body (gf says which), in the
 * phases this file's opening comment lists. */
static tolk_status decode_graph(struct onnx_loader *l, const uint8_t *p, size_t len,
                                const struct graph_fields *gf, struct gctx *parent,
                                struct ir_node *owner, const struct ir_opset *opsets, size_t n_opsets,
                                int depth, struct ir_graph **out) {
  struct ir_graph *g = tolk_arena_alloc(l->arena, sizeof *g);
  if (!g) return oom(l);
  g->name = "";
  g->parent = parent ? parent->g : NULL;
  g->owner = owner;
  g->depth = depth;
  if (depth > l->m->max_depth_seen) l->m->max_depth_seen = depth;
  struct gctx c = {.g = g, .parent = parent, .opsets = opsets, .n_opsets = n_opsets, .depth = depth,
                   .p = p, .len = len, .gf = gf};
  *out = g;

  struct graph_counts n = {0};
  tolk_status st = count_graph(l, &c, &n);
  if (!st) st = alloc_graph(l, &c, &n);
  if (!st) st = each_graph_field(l, &c, gf->initializer, gf->sparse_init, read_initializer);
  if (!st) st = each_graph_field(l, &c, gf->input, 0, read_input);
  if (!st) st = each_graph_field(l, &c, gf->node, 0, read_node_head);
  if (!st) st = each_graph_field(l, &c, gf->output, gf->value_info, read_output);
  /* Nodes, pass B: attributes (subgraphs see every name above) and inputs. */
  for (size_t i = 0; !st && i < g->n_nodes; i++) {
    const struct pb_field *f = &c.node_f[i];
    if ((st = node_body(l, &c, f->data, f->len, g->nodes[i]))) st = part_failed(l, &c, "node", i, st);
  }
  return st;
}

/* ------------------------------------------------------------ model */

static tolk_status opset_import(struct onnx_loader *l, const struct pb_field *f, struct ir_opset *o) {
  struct pb r = reader(l, f->data, f->len);
  struct pb_field g;
  const char *why;
  o->domain = "";
  o->version = 0;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &g, &why)) return onnx_malformed(l, "OperatorSetIdProto", g.offset, why);
    if (g.number == 1 && g.wire == PB_LEN) {
      if (g.len == 7 && !memcmp(g.data, "ai.onnx", 7)) o->domain = "";
      else if (!(o->domain = onnx_str(l, &g))) return oom(l);
    } else if (g.number == 2 && g.wire == PB_VARINT) {
      o->version = pb_i64(g.u64);
    } else if (g.number == 1 || g.number == 2) {
      return onnx_malformed(l, "OperatorSetIdProto", g.offset, "wrong wire type");
    }
  }
  return TOLK_OK;
}

static tolk_status string_entry(struct onnx_loader *l, const struct pb_field *f, struct ir_kv *kv) {
  struct pb r = reader(l, f->data, f->len);
  struct pb_field g;
  const char *why;
  kv->key = kv->value = "";
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &g, &why)) return onnx_malformed(l, "StringStringEntryProto", g.offset, why);
    if ((g.number == 1 || g.number == 2) && g.wire != PB_LEN)
      return onnx_malformed(l, "StringStringEntryProto", g.offset, "expected a string");
    if (g.number == 1 && !(kv->key = onnx_str(l, &g))) return oom(l);
    if (g.number == 2 && !(kv->value = onnx_str(l, &g))) return oom(l);
  }
  return TOLK_OK;
}

/* Counts one repeated message field and allocates its array. */
static void *alloc_repeated(struct onnx_loader *l, const uint8_t *p, size_t len, uint32_t number,
                            size_t elem, size_t *count, tolk_status *st) {
  struct pb r = reader(l, p, len);
  struct pb_field f;
  const char *why;
  size_t n = 0;
  *st = TOLK_OK;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) {
      *st = onnx_malformed(l, "message", f.offset, why);
      return NULL;
    }
    if (f.number != number) continue;
    if (f.wire != PB_LEN) {
      *st = onnx_malformed(l, "message", f.offset, "expected a length-delimited field");
      return NULL;
    }
    n++;
  }
  *count = 0;
  if (!n) return NULL;
  void *a = tolk_arena_array(l->arena, n, elem);
  if (!a) *st = oom(l);
  return a;
}

static tolk_status decode_function(struct onnx_loader *l, const uint8_t *p, size_t len,
                                   struct ir_function *fn) {
  tolk_status st;
  fn->name = fn->domain = fn->overload = "";
  fn->opsets = alloc_repeated(l, p, len, 9, sizeof *fn->opsets, &fn->n_opsets, &st);
  if (st) return st;
  fn->attr_names = alloc_repeated(l, p, len, 6, sizeof *fn->attr_names, &fn->n_attr_names, &st);
  if (st) return st;
  fn->attr_defaults = alloc_repeated(l, p, len, 11, sizeof *fn->attr_defaults, &fn->n_attr_defaults, &st);
  if (st) return st;
  struct pb r = reader(l, p, len);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "FunctionProto", f.offset, why);
    if (f.wire != PB_LEN) continue;
    switch (f.number) {
    case 1: if (!(fn->name = onnx_str(l, &f))) return oom(l); break;
    case 8: if (!(fn->doc = onnx_str(l, &f))) return oom(l); break;
    case 10:
      if (f.len == 7 && !memcmp(f.data, "ai.onnx", 7)) fn->domain = "";
      else if (!(fn->domain = onnx_str(l, &f))) return oom(l);
      break;
    case 13: if (!(fn->overload = onnx_str(l, &f))) return oom(l); break;
    case 9:
      if ((st = opset_import(l, &f, &fn->opsets[fn->n_opsets++]))) return st;
      break;
    case 6:
      if (!(fn->attr_names[fn->n_attr_names++] = onnx_str(l, &f))) return oom(l);
      break;
    case 11:
      if ((st = decode_attr(l, NULL, NULL, f.data, f.len, &fn->attr_defaults[fn->n_attr_defaults++])))
        return st;
      break;
    }
  }
  /* The body's nodes resolve opsets through the function's own imports,
   * falling back to the model's for domains the function does not list. */
  size_t n_all;
  if (!tolk_add_size(fn->n_opsets, l->m->n_opsets, &n_all)) return oom(l);
  struct ir_opset *all = n_all ? tolk_arena_array(l->arena, n_all, sizeof *all) : NULL;
  if (n_all && !all) return oom(l);
  if (fn->n_opsets) memcpy(all, fn->opsets, fn->n_opsets * sizeof *all);
  if (l->m->n_opsets) memcpy(all + fn->n_opsets, l->m->opsets, l->m->n_opsets * sizeof *all);
  st = decode_graph(l, p, len, &function_proto, NULL, NULL, all, n_all, 0, &fn->body);
  if (st) return st;
  fn->body->name = fn->name;
  return TOLK_OK;
}

tolk_status onnx_decode_model(struct onnx_loader *l);

/* Decodes l->base as a ModelProto into l->m (called by model.c). */
tolk_status onnx_decode_model(struct onnx_loader *l) {
  struct ir_model *m = l->m;
  tolk_status st;
  m->producer_name = m->producer_version = m->domain = "";
  m->opsets = alloc_repeated(l, l->base, l->size, 8, sizeof *m->opsets, &m->n_opsets, &st);
  if (st) return st;
  m->metadata = alloc_repeated(l, l->base, l->size, 14, sizeof *m->metadata, &m->n_metadata, &st);
  if (st) return st;
  size_t n_fn = 0;
  m->functions = alloc_repeated(l, l->base, l->size, 25, sizeof *m->functions, &n_fn, &st);
  if (st) return st;
  struct pb r = reader(l, l->base, l->size);
  struct pb_field f, graph = {0};
  const char *why;
  bool have_graph = false;
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "ModelProto", f.offset, why);
    switch (f.number) {
    case 1: case 5:
      if (f.wire != PB_VARINT) return onnx_malformed(l, "ModelProto", f.offset, "ir_version/model_version is not a varint");
      if (f.number == 1) m->ir_version = pb_i64(f.u64);
      else m->model_version = pb_i64(f.u64);
      break;
    case 2: case 3: case 4: case 6: case 7: {
      if (f.wire != PB_LEN) return onnx_malformed(l, "ModelProto", f.offset, "expected a length-delimited field");
      const char **dst = f.number == 2 ? &m->producer_name : f.number == 3 ? &m->producer_version
                         : f.number == 4 ? &m->domain : f.number == 6 ? &m->doc : NULL;
      if (dst && !(*dst = onnx_str(l, &f))) return oom(l);
      if (f.number == 7) {
        graph = f;
        have_graph = true;
      }
      break;
    }
    case 8:
      if ((st = opset_import(l, &f, &m->opsets[m->n_opsets++]))) return st;
      break;
    case 14:
      if ((st = string_entry(l, &f, &m->metadata[m->n_metadata++]))) return st;
      break;
    default:
      break; /* training_info, configuration, future fields */
    }
  }
  if (!have_graph) return tolk_fail(l->err, TOLK_ERR_INVALID_MODEL, "the model has no graph");
  if ((st = decode_graph(l, graph.data, graph.len, &graph_proto, NULL, NULL, m->opsets, m->n_opsets, 0,
                         &m->graph)))
    return st;
  r = reader(l, l->base, l->size);
  while (!pb_eof(&r)) {
    if (!pb_next(&r, &f, &why)) return onnx_malformed(l, "ModelProto", f.offset, why);
    if (f.number != 25) continue;
    struct ir_function *fn = &m->functions[m->n_functions];
    if ((st = decode_function(l, f.data, f.len, fn))) {
      tolk_error_prefix(l->err, "function %zu '%s'", m->n_functions, fn->name ? fn->name : "");
      return st;
    }
    m->n_functions++;
  }
  return TOLK_OK;
}
