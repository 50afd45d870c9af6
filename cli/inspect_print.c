/*
 * inspect_print.c — what `tolk inspect` prints: a model's producer, IR
 * version and opsets, inputs and outputs with dtypes and symbolic shapes, node
 * counts by op type, parameter counts and bytes by dtype, external data files,
 * subgraphs and local functions — as aligned text or as JSON — and the graph
 * as Graphviz dot. It reads the model through tolk.h's introspection API
 * only, as any other tool could.
 *
 * JSON is written by hand (output only, no parser): every string goes through
 * json_str, which escapes quotes, backslashes and control characters and
 * replaces bytes that are not valid UTF-8, since names come from the file.
 */
#include "inspect_print.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The highest dtype number tolk names: initializer statistics are kept per
 * dtype up to it. */
#define DTYPE_MAX TOLK_FLOAT8E8M0

/* ------------------------------------------------------------ statistics */

struct op_count {
  const char *domain, *op;
  size_t count;
};

struct dtype_stat {
  int64_t tensors, elements;
  uint64_t bytes;
};

struct sub_info {
  const tolk_graph *g;
  const tolk_node *owner;
  const char *attr;
  size_t nodes; /* including nested subgraphs */
};

struct stats {
  struct op_count *ops;
  size_t n_ops, cap_ops;
  size_t nodes_main, nodes_total;
  struct dtype_stat by_dtype[DTYPE_MAX + 1];
  int64_t params, n_init;
  uint64_t param_bytes;
  struct sub_info *subs;
  size_t n_subs, cap_subs;
  /* External files as declared (also when not loaded). */
  struct ext_stat {
    const char *location;
    int64_t tensors;
    uint64_t bytes;
  } *ext;
  size_t n_ext, cap_ext;
  bool oom;
};

static void *grow(void *p, size_t *cap, size_t n, size_t elem, bool *oom) {
  if (n < *cap) return p;
  size_t nc = *cap ? *cap * 2 : 16;
  void *q = realloc(p, nc * elem);
  if (!q) {
    *oom = true;
    return p;
  }
  *cap = nc;
  return q;
}

static void count_op(struct stats *s, const tolk_node_info *n) {
  for (size_t i = 0; i < s->n_ops; i++)
    if (!strcmp(s->ops[i].op, n->op_type) && !strcmp(s->ops[i].domain, n->domain)) {
      s->ops[i].count++;
      return;
    }
  s->ops = grow(s->ops, &s->cap_ops, s->n_ops, sizeof *s->ops, &s->oom);
  if (s->n_ops >= s->cap_ops) return;
  s->ops[s->n_ops++] = (struct op_count){n->domain, n->op_type, 1};
}

static void count_ext(struct stats *s, const tolk_initializer_info *t) {
  for (size_t i = 0; i < s->n_ext; i++)
    if (!strcmp(s->ext[i].location, t->external_file)) {
      s->ext[i].tensors++;
      s->ext[i].bytes += t->nbytes;
      return;
    }
  s->ext = grow(s->ext, &s->cap_ext, s->n_ext, sizeof *s->ext, &s->oom);
  if (s->n_ext >= s->cap_ext) return;
  s->ext[s->n_ext++] = (struct ext_stat){t->external_file, 1, t->nbytes};
}

static void count_initializers(struct stats *s, const tolk_graph *g, size_t n) {
  for (size_t i = 0; i < n; i++) {
    tolk_initializer_info t = tolk_value_initializer(tolk_graph_initializer(g, i));
    if (t.rank < 0) continue;
    s->n_init++;
    s->params += t.numel;
    s->param_bytes += t.nbytes;
    if (t.dtype >= 0 && t.dtype <= DTYPE_MAX) {
      s->by_dtype[t.dtype].tensors++;
      s->by_dtype[t.dtype].elements += t.numel;
      s->by_dtype[t.dtype].bytes += t.nbytes;
    }
    if (t.external_file) count_ext(s, &t);
  }
}

/* Counts g and the subgraphs inside it; returns its node count, nested
 * subgraphs' nodes included. */
static size_t walk(struct stats *s, const tolk_graph *g) {
  tolk_graph_info gi = tolk_graph_describe(g);
  size_t nodes = gi.n_nodes;
  count_initializers(s, g, gi.n_initializers);
  for (size_t i = 0; i < gi.n_nodes; i++) {
    const tolk_node *n = tolk_graph_node(g, i);
    tolk_node_info ni = tolk_node_describe(n);
    count_op(s, &ni);
    for (size_t j = 0; j < ni.n_subgraphs; j++) {
      const char *attr = NULL;
      const tolk_graph *sub = tolk_node_subgraph(n, j, &attr);
      s->subs = grow(s->subs, &s->cap_subs, s->n_subs, sizeof *s->subs, &s->oom);
      if (s->n_subs >= s->cap_subs) continue;
      size_t k = s->n_subs++;
      s->subs[k] = (struct sub_info){sub, n, attr, 0};
      size_t inner = walk(s, sub);
      s->subs[k].nodes = inner;
      nodes += inner;
    }
  }
  return nodes;
}

static int op_cmp(const void *a, const void *b) {
  const struct op_count *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  int c = strcmp(x->domain, y->domain);
  return c ? c : strcmp(x->op, y->op);
}

static void stats_collect(struct stats *s, const tolk_graph *main_graph) {
  memset(s, 0, sizeof *s);
  s->nodes_main = tolk_graph_describe(main_graph).n_nodes;
  s->nodes_total = walk(s, main_graph);
  if (s->n_ops) qsort(s->ops, s->n_ops, sizeof *s->ops, op_cmp);
}

static void stats_free(struct stats *s) {
  free(s->ops);
  free(s->subs);
  free(s->ext);
}

/* ------------------------------------------------------------ text */

/* "[batch_size, sequence_length]", "[?, 3]", "?" (no shape), "[]" (scalar). */
static void shape_text(const tolk_value *v, int rank, char *buf, size_t size) {
  if (rank < 0) {
    snprintf(buf, size, "?");
    return;
  }
  size_t o = 0;
  int n = snprintf(buf, size, "[");
  o = n > 0 ? (size_t)n : 0;
  for (int i = 0; i < rank && o + 1 < size; i++) {
    const char *sym;
    int64_t d = tolk_value_dim(v, i, &sym);
    if (sym) n = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", sym);
    else if (d >= 0) n = snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)d);
    else n = snprintf(buf + o, size - o, "%s?", i ? ", " : "");
    if (n < 0) break;
    o += (size_t)n;
  }
  if (o + 1 < size) snprintf(buf + o, size - o, "]");
}

static void type_text(const tolk_value_desc *d, char *buf, size_t size) {
  const char *dt = tolk_dtype_name(d->dtype);
  switch (d->kind) {
  case TOLK_TYPE_TENSOR: snprintf(buf, size, "%s", dt); break;
  case TOLK_TYPE_SPARSE_TENSOR: snprintf(buf, size, "sparse(%s)", dt); break;
  case TOLK_TYPE_SEQUENCE: snprintf(buf, size, "seq(%s)", dt); break;
  case TOLK_TYPE_MAP: snprintf(buf, size, "map(%s)", dt); break;
  case TOLK_TYPE_OPTIONAL: snprintf(buf, size, "optional(%s)", dt); break;
  default: snprintf(buf, size, "?"); break;
  }
}

static void human_bytes(uint64_t b, char *buf, size_t size) {
  if (b < 1024) snprintf(buf, size, "%llu B", (unsigned long long)b);
  else if (b < 1024 * 1024) snprintf(buf, size, "%.1f KiB", (double)b / 1024);
  else if (b < 1024ull * 1024 * 1024) snprintf(buf, size, "%.1f MiB", (double)b / (1024.0 * 1024));
  else snprintf(buf, size, "%.2f GiB", (double)b / (1024.0 * 1024 * 1024));
}

/* A graph's inputs or outputs: which list, and how long it is. */
struct value_list {
  const tolk_graph *g;
  size_t n;
  const tolk_value *(*at)(const tolk_graph *, size_t);
};

/* Inputs leave out initializers, which some exporters also list as inputs. */
static bool listed(const struct value_list *l, size_t i, bool skip_inits) {
  return !(skip_inits && (tolk_value_describe(l->at(l->g, i)).flags & TOLK_VALUE_INITIALIZER));
}

static void values_text(FILE *out, const char *title, const struct value_list *l, bool skip_inits) {
  int w = 4;
  for (size_t i = 0; i < l->n; i++) {
    int len = (int)strlen(tolk_value_describe(l->at(l->g, i)).name);
    if (len > w && len < 60) w = len;
  }
  size_t shown = 0;
  for (size_t i = 0; i < l->n; i++) shown += listed(l, i, skip_inits);
  fprintf(out, "%s (%zu)\n", title, shown);
  for (size_t i = 0; i < l->n; i++) {
    if (!listed(l, i, skip_inits)) continue;
    const tolk_value *v = l->at(l->g, i);
    tolk_value_desc d = tolk_value_describe(v);
    char ty[64], sh[512];
    type_text(&d, ty, sizeof ty);
    shape_text(v, d.rank, sh, sizeof sh);
    fprintf(out, "  %-*s  %-8s %s\n", w, d.name, ty, sh);
  }
}

static struct value_list inputs_of(const tolk_graph *g) {
  return (struct value_list){g, tolk_graph_describe(g).n_inputs, tolk_graph_input};
}

static struct value_list outputs_of(const tolk_graph *g) {
  return (struct value_list){g, tolk_graph_describe(g).n_outputs, tolk_graph_output};
}

static void opset_list(FILE *out, const tolk_model *m, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int64_t version = 0;
    const char *domain = tolk_model_opset(m, i, &version);
    fprintf(out, "%s%s %lld", i ? ", " : "", domain[0] ? domain : "ai.onnx", (long long)version);
  }
  if (!n) fprintf(out, "(none)");
}

static void op_name(const struct op_count *c, char *buf, size_t size) {
  snprintf(buf, size, "%s%s%s", c->domain, c->domain[0] ? "::" : "", c->op);
}

static void header_text(const tolk_model *model, const char *path, FILE *out) {
  tolk_model_info m = tolk_model_describe(model);
  char b[64];
  human_bytes(m.file_bytes, b, sizeof b);
  fprintf(out, "%s  (%s)\n", path ? path : "model", b);
  fprintf(out, "  producer      %s%s%s\n", m.producer_name[0] ? m.producer_name : "(none)",
          m.producer_version[0] ? " " : "", m.producer_version);
  fprintf(out, "  ir_version    %lld\n", (long long)m.ir_version);
  fprintf(out, "  opsets        ");
  opset_list(out, model, m.n_opsets);
  fprintf(out, "\n");
  if (m.domain[0]) fprintf(out, "  domain        %s\n", m.domain);
  if (m.model_version) fprintf(out, "  model_version %lld\n", (long long)m.model_version);
  const char *graph_name = tolk_graph_describe(m.graph).name;
  if (graph_name[0]) fprintf(out, "  graph         %s\n", graph_name);
  for (size_t i = 0; i < m.n_metadata; i++) {
    const char *value;
    const char *key = tolk_model_metadata(model, i, &value);
    fprintf(out, "  metadata      %s = %.200s\n", key, value);
  }
  fprintf(out, "\n");
}

static void counts_text(const struct stats *s, FILE *out) {
  char b[64];
  fprintf(out, "\nnodes (%zu in the main graph, %zu with subgraphs; %zu op types)\n", s->nodes_main,
          s->nodes_total, s->n_ops);
  for (size_t i = 0; i < s->n_ops; i++) {
    char name[256];
    op_name(&s->ops[i], name, sizeof name);
    fprintf(out, "  %-28s %zu\n", name, s->ops[i].count);
  }
  human_bytes(s->param_bytes, b, sizeof b);
  fprintf(out, "\nparameters (%lld in %lld initializers, %s)\n", (long long)s->params, (long long)s->n_init, b);
  for (int d = 0; d <= DTYPE_MAX; d++) {
    const struct dtype_stat *ds = &s->by_dtype[d];
    if (!ds->tensors) continue;
    human_bytes(ds->bytes, b, sizeof b);
    fprintf(out, "  %-10s %14lld elements  %12s  in %lld tensors\n", tolk_dtype_name((tolk_dtype)d),
            (long long)ds->elements, b, (long long)ds->tensors);
  }
}

static void external_text(const struct stats *s, bool external_opened, FILE *out) {
  if (!s->n_ext) return;
  fprintf(out, "\nexternal data (%zu file%s%s)\n", s->n_ext, s->n_ext == 1 ? "" : "s",
          external_opened ? "" : ", not opened");
  for (size_t i = 0; i < s->n_ext; i++) {
    char b[64];
    human_bytes(s->ext[i].bytes, b, sizeof b);
    fprintf(out, "  %-40s %s in %lld tensors\n", s->ext[i].location, b, (long long)s->ext[i].tensors);
  }
}

static void subgraphs_text(const struct stats *s, int max_depth, FILE *out) {
  if (!s->n_subs) return;
  fprintf(out, "\nsubgraphs (%zu, deepest nesting %d)\n", s->n_subs, max_depth);
  for (size_t i = 0; i < s->n_subs; i++) {
    const struct sub_info *si = &s->subs[i];
    tolk_graph_info g = tolk_graph_describe(si->g);
    tolk_node_info owner = tolk_node_describe(si->owner);
    fprintf(out, "  %*s%s.%s  (node %zu '%s'): %zu nodes, %zu inputs, %zu outputs, %zu outer refs\n",
            2 * (g.depth - 1), "", owner.op_type, si->attr, owner.index, owner.name, si->nodes,
            g.n_inputs, g.n_outputs, g.n_outer_refs);
  }
}

static void functions_text(const tolk_model *model, size_t n, FILE *out) {
  if (!n) return;
  fprintf(out, "\nfunctions (%zu)\n", n);
  for (size_t i = 0; i < n; i++) {
    tolk_function_info f = tolk_model_function(model, i);
    tolk_graph_info body = tolk_graph_describe(f.body);
    fprintf(out, "  %s%s%s: %zu nodes, %zu inputs, %zu outputs\n", f.domain, f.domain[0] ? "::" : "",
            f.name, body.n_nodes, body.n_inputs, body.n_outputs);
  }
}

static void inspect_text(const tolk_model *model, const char *path, bool external_opened,
                         const struct stats *s, FILE *out) {
  tolk_model_info m = tolk_model_describe(model);
  header_text(model, path, out);
  struct value_list ins = inputs_of(m.graph), outs = outputs_of(m.graph);
  values_text(out, "inputs", &ins, true);
  values_text(out, "outputs", &outs, false);
  counts_text(s, out);
  external_text(s, external_opened, out);
  subgraphs_text(s, m.max_depth, out);
  functions_text(model, m.n_functions, out);
}

/* ------------------------------------------------------------ JSON */

static void json_str(FILE *out, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  fputc('"', out);
  while (*p) {
    unsigned char c = *p;
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
      p++;
    } else if (c < 0x20) {
      fprintf(out, "\\u%04x", c);
      p++;
    } else if (c < 0x80) {
      fputc(c, out);
      p++;
    } else {
      /* Pass a well-formed UTF-8 sequence through, else U+FFFD. */
      int n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
      int ok = n > 0;
      for (int i = 1; i < n && ok; i++) ok = (p[i] & 0xc0) == 0x80;
      if (ok && n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))) ok = 0;
      if (ok && n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))) ok = 0;
      if (ok) {
        fwrite(p, 1, (size_t)n, out);
        p += n;
      } else {
        fputs("\\ufffd", out);
        p++;
      }
    }
  }
  fputc('"', out);
}

static void json_shape(FILE *out, const tolk_value *v, int rank) {
  if (rank < 0) {
    fprintf(out, "null");
    return;
  }
  fputc('[', out);
  for (int i = 0; i < rank; i++) {
    const char *sym;
    int64_t d = tolk_value_dim(v, i, &sym);
    if (i) fputs(", ", out);
    if (sym) json_str(out, sym);
    else if (d >= 0) fprintf(out, "%lld", (long long)d);
    else fputs("null", out);
  }
  fputc(']', out);
}

static void json_values(FILE *out, const struct value_list *l, bool skip_inits) {
  fputc('[', out);
  bool first = true;
  for (size_t i = 0; i < l->n; i++) {
    if (!listed(l, i, skip_inits)) continue;
    const tolk_value *v = l->at(l->g, i);
    tolk_value_desc d = tolk_value_describe(v);
    char ty[64];
    type_text(&d, ty, sizeof ty);
    fprintf(out, "%s{\"name\": ", first ? "" : ", ");
    first = false;
    json_str(out, d.name);
    fprintf(out, ", \"type\": ");
    json_str(out, ty);
    fprintf(out, ", \"shape\": ");
    json_shape(out, v, d.rank);
    fputc('}', out);
  }
  fputc(']', out);
}

static void json_opsets(FILE *out, const tolk_model *m, size_t n) {
  fputc('{', out);
  for (size_t i = 0; i < n; i++) {
    int64_t version = 0;
    const char *domain = tolk_model_opset(m, i, &version);
    if (i) fputs(", ", out);
    json_str(out, domain[0] ? domain : "ai.onnx");
    fprintf(out, ": %lld", (long long)version);
  }
  fputc('}', out);
}

static void json_header(const tolk_model *model, const char *path, FILE *out) {
  tolk_model_info m = tolk_model_describe(model);
  fprintf(out, "{\n  \"path\": ");
  json_str(out, path);
  fprintf(out, ",\n  \"file_bytes\": %llu,\n  \"producer_name\": ", (unsigned long long)m.file_bytes);
  json_str(out, m.producer_name);
  fprintf(out, ",\n  \"producer_version\": ");
  json_str(out, m.producer_version);
  fprintf(out, ",\n  \"domain\": ");
  json_str(out, m.domain);
  fprintf(out, ",\n  \"model_version\": %lld,\n  \"ir_version\": %lld,\n  \"opsets\": ",
          (long long)m.model_version, (long long)m.ir_version);
  json_opsets(out, model, m.n_opsets);
  fprintf(out, ",\n  \"metadata\": {");
  for (size_t i = 0; i < m.n_metadata; i++) {
    const char *value;
    const char *key = tolk_model_metadata(model, i, &value);
    fputs(i ? ", " : "", out);
    json_str(out, key);
    fputs(": ", out);
    json_str(out, value);
  }
  fprintf(out, "},\n  \"graph_name\": ");
  json_str(out, tolk_graph_describe(m.graph).name);
  struct value_list ins = inputs_of(m.graph), outs = outputs_of(m.graph);
  fprintf(out, ",\n  \"inputs\": ");
  json_values(out, &ins, true);
  fprintf(out, ",\n  \"outputs\": ");
  json_values(out, &outs, false);
}

static void json_counts(const struct stats *s, FILE *out) {
  fprintf(out, ",\n  \"nodes\": {\"main_graph\": %zu, \"total\": %zu, \"by_op\": {", s->nodes_main, s->nodes_total);
  for (size_t i = 0; i < s->n_ops; i++) {
    char name[256];
    op_name(&s->ops[i], name, sizeof name);
    fputs(i ? ", " : "", out);
    json_str(out, name);
    fprintf(out, ": %zu", s->ops[i].count);
  }
  fprintf(out, "}},\n  \"parameters\": {\"count\": %lld, \"initializers\": %lld, \"bytes\": %llu, \"by_dtype\": {",
          (long long)s->params, (long long)s->n_init, (unsigned long long)s->param_bytes);
  bool first = true;
  for (int d = 0; d <= DTYPE_MAX; d++) {
    const struct dtype_stat *ds = &s->by_dtype[d];
    if (!ds->tensors) continue;
    fputs(first ? "" : ", ", out);
    first = false;
    json_str(out, tolk_dtype_name((tolk_dtype)d));
    fprintf(out, ": {\"tensors\": %lld, \"elements\": %lld, \"bytes\": %llu}", (long long)ds->tensors,
            (long long)ds->elements, (unsigned long long)ds->bytes);
  }
  fprintf(out, "}},\n  \"external_data\": [");
  for (size_t i = 0; i < s->n_ext; i++) {
    fputs(i ? ", " : "", out);
    fprintf(out, "{\"location\": ");
    json_str(out, s->ext[i].location);
    fprintf(out, ", \"tensors\": %lld, \"bytes\": %llu}", (long long)s->ext[i].tensors,
            (unsigned long long)s->ext[i].bytes);
  }
}

static void json_subgraphs(const struct stats *s, FILE *out) {
  fprintf(out, "],\n  \"subgraphs\": [");
  for (size_t i = 0; i < s->n_subs; i++) {
    const struct sub_info *si = &s->subs[i];
    tolk_graph_info g = tolk_graph_describe(si->g);
    tolk_node_info owner = tolk_node_describe(si->owner);
    fputs(i ? ",\n    " : "\n    ", out);
    fprintf(out, "{\"node\": %zu, \"node_name\": ", owner.index);
    json_str(out, owner.name);
    fprintf(out, ", \"op_type\": ");
    json_str(out, owner.op_type);
    fprintf(out, ", \"attribute\": ");
    json_str(out, si->attr);
    fprintf(out, ", \"depth\": %d, \"nodes\": %zu, \"inputs\": %zu, \"outputs\": %zu, \"outer_refs\": %zu}",
            g.depth, si->nodes, g.n_inputs, g.n_outputs, g.n_outer_refs);
  }
  fprintf(out, "%s]", s->n_subs ? "\n  " : "");
}

static void json_functions(const tolk_model *model, size_t n, FILE *out) {
  fprintf(out, ",\n  \"functions\": [");
  for (size_t i = 0; i < n; i++) {
    tolk_function_info f = tolk_model_function(model, i);
    fputs(i ? ", " : "", out);
    fprintf(out, "{\"domain\": ");
    json_str(out, f.domain);
    fprintf(out, ", \"name\": ");
    json_str(out, f.name);
    fprintf(out, ", \"nodes\": %zu}", tolk_graph_describe(f.body).n_nodes);
  }
  fprintf(out, "]\n}\n");
}

static void inspect_json(const tolk_model *model, const char *path, const struct stats *s, FILE *out) {
  json_header(model, path, out);
  json_counts(s, out);
  json_subgraphs(s, out);
  json_functions(model, tolk_model_describe(model).n_functions, out);
}

void inspect_print(const tolk_model *m, const char *path, bool external_opened,
                   enum inspect_format fmt, FILE *out) {
  struct stats s;
  stats_collect(&s, tolk_model_describe(m).graph);
  if (fmt == INSPECT_JSON) inspect_json(m, path, &s, out);
  else inspect_text(m, path, external_opened, &s, out);
  stats_free(&s);
}

/* ------------------------------------------------------------ dot */

static void dot_str(FILE *out, const char *s) {
  fputc('"', out);
  for (const char *p = s ? s : ""; *p; p++) {
    if (*p == '"' || *p == '\\') fputc('\\', out);
    if ((unsigned char)*p < 0x20) continue;
    fputc(*p, out);
  }
  fputc('"', out);
}

/* Graph ids are assigned in walk order so node ids stay unique across
 * subgraphs: n<graph>_<index>. The stack maps the graphs being emitted to
 * their ids, for edges from outer-scope values. Nesting is bounded by the
 * loader (max_graph_depth), so a fixed stack suffices; deeper frames would
 * only lose their edge ids. */
#define DOT_MAX_DEPTH 64
struct dot_state {
  FILE *out;
  int next_graph;
  struct {
    const tolk_graph *g;
    int gid;
  } stack[DOT_MAX_DEPTH];
  int depth;
};

static int gid_for(const struct dot_state *d, const tolk_graph *g) {
  for (int i = d->depth - 1; i >= 0; i--)
    if (d->stack[i].g == g) return d->stack[i].gid;
  return 0;
}

/* Whether an edge is drawn from v: it must come from a node or be a graph
 * input; constants and undefined names have no box to start from. */
static bool drawn(const tolk_value_desc *v) {
  if (v->flags & (TOLK_VALUE_INITIALIZER | TOLK_VALUE_UNDEFINED)) return false;
  return v->producer || (v->flags & TOLK_VALUE_GRAPH_INPUT);
}

/* The dot id of the box an edge from v starts at. */
static void value_src(const struct dot_state *d, const tolk_value_desc *v, char *buf, size_t size) {
  int gid = gid_for(d, v->graph);
  if (v->producer) snprintf(buf, size, "n%d_%zu", gid, tolk_node_describe(v->producer).index);
  else snprintf(buf, size, "v%d_%zu", gid, v->index);
}

static void dot_graph(struct dot_state *d, const tolk_graph *g, int gid, int indent);

static void dot_inputs(struct dot_state *d, const tolk_graph *g, int gid, int indent) {
  size_t n = tolk_graph_describe(g).n_inputs;
  for (size_t i = 0; i < n; i++) {
    tolk_value_desc v = tolk_value_describe(tolk_graph_input(g, i));
    if (v.flags & TOLK_VALUE_INITIALIZER) continue;
    fprintf(d->out, "%*sv%d_%zu [shape=ellipse, style=filled, fillcolor=\"#dde8f7\", label=", indent, "", gid,
            v.index);
    dot_str(d->out, v.name);
    fprintf(d->out, "];\n");
  }
}

/* Node i of g: its box, the edges into it, and its subgraphs as clusters. */
static void dot_node(struct dot_state *d, const tolk_graph *g, size_t i, int gid, int indent) {
  FILE *out = d->out;
  const tolk_node *node = tolk_graph_node(g, i);
  tolk_node_info n = tolk_node_describe(node);
  fprintf(out, "%*sn%d_%zu [shape=box, style=rounded, label=", indent, "", gid, i);
  dot_str(out, n.op_type);
  if (n.name[0]) {
    fprintf(out, ", tooltip=");
    dot_str(out, n.name);
  }
  fprintf(out, "];\n");
  for (size_t k = 0; k < n.n_inputs; k++) {
    const tolk_value *in = tolk_node_input(node, k);
    if (!in) continue;
    tolk_value_desc v = tolk_value_describe(in);
    if (!drawn(&v)) continue;
    char src[64];
    value_src(d, &v, src, sizeof src);
    fprintf(out, "%*s%s -> n%d_%zu [label=", indent, "", src, gid, i);
    dot_str(out, v.name);
    fprintf(out, "%s];\n", v.graph != g ? ", style=dashed" : "");
  }
  for (size_t j = 0; j < n.n_subgraphs; j++) {
    const char *attr = NULL;
    const tolk_graph *sub = tolk_node_subgraph(node, j, &attr);
    int sid = ++d->next_graph;
    fprintf(out, "%*ssubgraph cluster_%d {\n%*slabel=", indent, "", sid, indent + 2, "");
    char cl[512];
    snprintf(cl, sizeof cl, "%s.%s", n.op_type, attr);
    dot_str(out, cl);
    fprintf(out, ";\n%*sstyle=dashed;\n", indent + 2, "");
    dot_graph(d, sub, sid, indent + 2);
    fprintf(out, "%*s}\n", indent, "");
  }
}

static void dot_outputs(struct dot_state *d, const tolk_graph *g, int gid, int indent) {
  size_t n = tolk_graph_describe(g).n_outputs;
  for (size_t i = 0; i < n; i++) {
    tolk_value_desc v = tolk_value_describe(tolk_graph_output(g, i));
    fprintf(d->out, "%*so%d_%zu [shape=ellipse, style=filled, fillcolor=\"#e3f2e1\", label=", indent, "", gid, i);
    dot_str(d->out, v.name);
    fprintf(d->out, "];\n");
    if (!drawn(&v)) continue;
    char src[64];
    value_src(d, &v, src, sizeof src);
    fprintf(d->out, "%*s%s -> o%d_%zu;\n", indent, "", src, gid, i);
  }
}

static void dot_graph(struct dot_state *d, const tolk_graph *g, int gid, int indent) {
  bool pushed = d->depth < DOT_MAX_DEPTH;
  if (pushed) {
    d->stack[d->depth].g = g;
    d->stack[d->depth++].gid = gid;
  }
  dot_inputs(d, g, gid, indent);
  size_t n = tolk_graph_describe(g).n_nodes;
  for (size_t i = 0; i < n; i++) dot_node(d, g, i, gid, indent);
  dot_outputs(d, g, gid, indent);
  if (pushed) d->depth--;
}

void inspect_print_dot(const tolk_model *m, FILE *out) {
  struct dot_state d;
  memset(&d, 0, sizeof d);
  d.out = out;
  fprintf(out, "digraph model {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=8];\n");
  dot_graph(&d, tolk_model_describe(m).graph, 0, 2);
  fprintf(out, "}\n");
}
