/*
 * inspect.c — what `tolk inspect` prints: a model's producer, IR version and
 * opsets, inputs and outputs with dtypes and symbolic shapes, node counts by
 * op type, parameter counts and bytes by dtype, external data files,
 * subgraphs and local functions — as aligned text or as JSON — and the graph
 * as Graphviz dot.
 *
 * JSON is written by hand (output only, no parser): every string goes through
 * json_str, which escapes quotes, backslashes and control characters and
 * replaces bytes that are not valid UTF-8, since names come from the file.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx.h"

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
  const struct ir_graph *g;
  const struct ir_node *owner;
  const char *attr;
  size_t nodes; /* including nested subgraphs */
};

struct stats {
  struct op_count *ops;
  size_t n_ops, cap_ops;
  size_t nodes_main, nodes_total;
  struct dtype_stat by_dtype[ONNX_DTYPE_MAX + 1];
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

static void count_op(struct stats *s, const struct ir_node *n) {
  for (size_t i = 0; i < s->n_ops; i++)
    if (!strcmp(s->ops[i].op, n->op_type) && !strcmp(s->ops[i].domain, n->domain)) {
      s->ops[i].count++;
      return;
    }
  s->ops = grow(s->ops, &s->cap_ops, s->n_ops, sizeof *s->ops, &s->oom);
  if (s->n_ops >= s->cap_ops) return;
  s->ops[s->n_ops++] = (struct op_count){n->domain, n->op_type, 1};
}

static void count_ext(struct stats *s, const struct ir_tensor *t) {
  for (size_t i = 0; i < s->n_ext; i++)
    if (!strcmp(s->ext[i].location, t->ext_location)) {
      s->ext[i].tensors++;
      s->ext[i].bytes += t->nbytes;
      return;
    }
  s->ext = grow(s->ext, &s->cap_ext, s->n_ext, sizeof *s->ext, &s->oom);
  if (s->n_ext >= s->cap_ext) return;
  s->ext[s->n_ext++] = (struct ext_stat){t->ext_location, 1, t->nbytes};
}

static size_t walk(struct stats *s, const struct ir_graph *g) {
  size_t nodes = g->n_nodes;
  for (size_t i = 0; i < g->n_initializers; i++) {
    const struct ir_tensor *t = g->initializers[i]->init;
    if (!t) continue;
    s->n_init++;
    s->params += t->numel;
    s->param_bytes += t->nbytes;
    if (t->dtype >= 0 && t->dtype <= ONNX_DTYPE_MAX) {
      s->by_dtype[t->dtype].tensors++;
      s->by_dtype[t->dtype].elements += t->numel;
      s->by_dtype[t->dtype].bytes += t->nbytes;
    }
    if (t->location == IR_DATA_EXTERNAL && t->ext_location) count_ext(s, t);
  }
  for (size_t i = 0; i < g->n_nodes; i++) {
    const struct ir_node *n = g->nodes[i];
    count_op(s, n);
    for (size_t a = 0; a < n->n_attrs; a++) {
      const struct ir_attr *at = &n->attrs[a];
      for (size_t j = 0; j < ir_attr_n_graphs(at); j++) {
        const struct ir_graph *sub = ir_attr_graph(at, j);
        if (!sub) continue;
        s->subs = grow(s->subs, &s->cap_subs, s->n_subs, sizeof *s->subs, &s->oom);
        if (s->n_subs >= s->cap_subs) continue;
        size_t k = s->n_subs++;
        s->subs[k] = (struct sub_info){sub, n, at->name, 0};
        size_t inner = walk(s, sub);
        s->subs[k].nodes = inner;
        nodes += inner;
      }
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

static void stats_collect(struct stats *s, const struct ir_model *m) {
  memset(s, 0, sizeof *s);
  s->nodes_main = m->graph->n_nodes;
  s->nodes_total = walk(s, m->graph);
  if (s->n_ops) qsort(s->ops, s->n_ops, sizeof *s->ops, op_cmp);
}

static void stats_free(struct stats *s) {
  free(s->ops);
  free(s->subs);
  free(s->ext);
}

/* ------------------------------------------------------------ text */

/* "[batch_size, sequence_length]", "[?, 3]", "?" (no shape), "[]" (scalar). */
static void shape_text(const struct ir_type *t, char *buf, size_t size) {
  if (t->rank < 0) {
    snprintf(buf, size, "?");
    return;
  }
  size_t o = 0;
  int n = snprintf(buf, size, "[");
  o = n > 0 ? (size_t)n : 0;
  for (int i = 0; i < t->rank && o + 1 < size; i++) {
    const struct ir_dim *d = &t->dims[i];
    if (d->param && d->param[0]) n = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", d->param);
    else if (d->value >= 0) n = snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)d->value);
    else n = snprintf(buf + o, size - o, "%s?", i ? ", " : "");
    if (n < 0) break;
    o += (size_t)n;
  }
  if (o + 1 < size) snprintf(buf + o, size - o, "]");
}

static void type_text(const struct ir_type *t, char *buf, size_t size) {
  const char *dt = tolk_dtype_name((tolk_dtype)t->dtype);
  switch (t->kind) {
  case IR_TYPE_TENSOR: snprintf(buf, size, "%s", dt); break;
  case IR_TYPE_SPARSE_TENSOR: snprintf(buf, size, "sparse(%s)", dt); break;
  case IR_TYPE_SEQUENCE: snprintf(buf, size, "seq(%s)", dt); break;
  case IR_TYPE_MAP: snprintf(buf, size, "map(%s)", dt); break;
  case IR_TYPE_OPTIONAL: snprintf(buf, size, "optional(%s)", dt); break;
  default: snprintf(buf, size, "?"); break;
  }
}

static void human_bytes(uint64_t b, char *buf, size_t size) {
  if (b < 1024) snprintf(buf, size, "%llu B", (unsigned long long)b);
  else if (b < 1024 * 1024) snprintf(buf, size, "%.1f KiB", (double)b / 1024);
  else if (b < 1024ull * 1024 * 1024) snprintf(buf, size, "%.1f MiB", (double)b / (1024.0 * 1024));
  else snprintf(buf, size, "%.2f GiB", (double)b / (1024.0 * 1024 * 1024));
}

static void values_text(FILE *out, const char *title, struct ir_value *const *vs, size_t n, bool skip_inits) {
  int w = 4;
  for (size_t i = 0; i < n; i++) {
    int l = (int)strlen(vs[i]->name);
    if (l > w && l < 60) w = l;
  }
  size_t shown = 0;
  for (size_t i = 0; i < n; i++) shown += !(skip_inits && (vs[i]->flags & IR_VALUE_INITIALIZER));
  fprintf(out, "%s (%zu)\n", title, shown);
  for (size_t i = 0; i < n; i++) {
    if (skip_inits && (vs[i]->flags & IR_VALUE_INITIALIZER)) continue;
    char ty[64], sh[512];
    type_text(&vs[i]->type, ty, sizeof ty);
    shape_text(&vs[i]->type, sh, sizeof sh);
    fprintf(out, "  %-*s  %-8s %s\n", w, vs[i]->name, ty, sh);
  }
}

static void opset_list(FILE *out, const struct ir_opset *o, size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(out, "%s%s %lld", i ? ", " : "", o[i].domain[0] ? o[i].domain : "ai.onnx", (long long)o[i].version);
  if (!n) fprintf(out, "(none)");
}

static void inspect_text(const tolk_model *model, const char *path, const struct stats *s, FILE *out) {
  const struct ir_model *m = &model->ir;
  char b1[64], b2[64];
  human_bytes(m->file_size, b1, sizeof b1);
  fprintf(out, "%s  (%s)\n", path ? path : "model", b1);
  fprintf(out, "  producer      %s%s%s\n", m->producer_name[0] ? m->producer_name : "(none)",
          m->producer_version[0] ? " " : "", m->producer_version);
  fprintf(out, "  ir_version    %lld\n", (long long)m->ir_version);
  fprintf(out, "  opsets        ");
  opset_list(out, m->opsets, m->n_opsets);
  fprintf(out, "\n");
  if (m->domain[0]) fprintf(out, "  domain        %s\n", m->domain);
  if (m->model_version) fprintf(out, "  model_version %lld\n", (long long)m->model_version);
  if (m->graph->name[0]) fprintf(out, "  graph         %s\n", m->graph->name);
  for (size_t i = 0; i < m->n_metadata; i++)
    fprintf(out, "  metadata      %s = %.200s\n", m->metadata[i].key, m->metadata[i].value);
  fprintf(out, "\n");
  values_text(out, "inputs", m->graph->inputs, m->graph->n_inputs, true);
  values_text(out, "outputs", m->graph->outputs, m->graph->n_outputs, false);
  fprintf(out, "\nnodes (%zu in the main graph, %zu with subgraphs; %zu op types)\n", s->nodes_main,
          s->nodes_total, s->n_ops);
  for (size_t i = 0; i < s->n_ops; i++) {
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", s->ops[i].domain, s->ops[i].domain[0] ? "::" : "", s->ops[i].op);
    fprintf(out, "  %-28s %zu\n", name, s->ops[i].count);
  }
  human_bytes(s->param_bytes, b1, sizeof b1);
  fprintf(out, "\nparameters (%lld in %lld initializers, %s)\n", (long long)s->params, (long long)s->n_init, b1);
  for (int d = 0; d <= ONNX_DTYPE_MAX; d++) {
    const struct dtype_stat *ds = &s->by_dtype[d];
    if (!ds->tensors) continue;
    human_bytes(ds->bytes, b2, sizeof b2);
    fprintf(out, "  %-10s %14lld elements  %12s  in %lld tensors\n", tolk_dtype_name((tolk_dtype)d), (long long)ds->elements,
            b2, (long long)ds->tensors);
  }
  if (s->n_ext) {
    fprintf(out, "\nexternal data (%zu file%s%s)\n", s->n_ext, s->n_ext == 1 ? "" : "s",
            model->params.load_external_data ? "" : ", not opened");
    for (size_t i = 0; i < s->n_ext; i++) {
      human_bytes(s->ext[i].bytes, b1, sizeof b1);
      fprintf(out, "  %-40s %s in %lld tensors\n", s->ext[i].location, b1, (long long)s->ext[i].tensors);
    }
  }
  if (s->n_subs) {
    fprintf(out, "\nsubgraphs (%zu, deepest nesting %d)\n", s->n_subs, m->max_depth_seen);
    for (size_t i = 0; i < s->n_subs; i++) {
      const struct sub_info *si = &s->subs[i];
      fprintf(out, "  %*s%s.%s  (node %d '%s'): %zu nodes, %zu inputs, %zu outputs, %zu outer refs\n",
              2 * (si->g->depth - 1), "", si->owner->op_type, si->attr, si->owner->index, si->owner->name,
              si->nodes, si->g->n_inputs, si->g->n_outputs, si->g->n_outer_refs);
    }
  }
  if (m->n_functions) {
    fprintf(out, "\nfunctions (%zu)\n", m->n_functions);
    for (size_t i = 0; i < m->n_functions; i++) {
      const struct ir_function *f = &m->functions[i];
      fprintf(out, "  %s%s%s: %zu nodes, %zu inputs, %zu outputs\n", f->domain, f->domain[0] ? "::" : "", f->name,
              f->body->n_nodes, f->body->n_inputs, f->body->n_outputs);
    }
  }
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

static void json_values(FILE *out, struct ir_value *const *vs, size_t n, bool skip_inits) {
  fputc('[', out);
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    const struct ir_value *v = vs[i];
    if (skip_inits && (v->flags & IR_VALUE_INITIALIZER)) continue;
    char ty[64];
    type_text(&v->type, ty, sizeof ty);
    fprintf(out, "%s{\"name\": ", first ? "" : ", ");
    first = false;
    json_str(out, v->name);
    fprintf(out, ", \"type\": ");
    json_str(out, ty);
    fprintf(out, ", \"shape\": ");
    if (v->type.rank < 0) {
      fprintf(out, "null");
    } else {
      fputc('[', out);
      for (int d = 0; d < v->type.rank; d++) {
        if (d) fputs(", ", out);
        if (v->type.dims[d].param && v->type.dims[d].param[0]) json_str(out, v->type.dims[d].param);
        else if (v->type.dims[d].value >= 0) fprintf(out, "%lld", (long long)v->type.dims[d].value);
        else fputs("null", out);
      }
      fputc(']', out);
    }
    fputc('}', out);
  }
  fputc(']', out);
}

static void json_opsets(FILE *out, const struct ir_opset *o, size_t n) {
  fputc('{', out);
  for (size_t i = 0; i < n; i++) {
    if (i) fputs(", ", out);
    json_str(out, o[i].domain[0] ? o[i].domain : "ai.onnx");
    fprintf(out, ": %lld", (long long)o[i].version);
  }
  fputc('}', out);
}

static void inspect_json(const tolk_model *model, const char *path, const struct stats *s, FILE *out) {
  const struct ir_model *m = &model->ir;
  fprintf(out, "{\n  \"path\": ");
  json_str(out, path);
  fprintf(out, ",\n  \"file_bytes\": %zu,\n  \"producer_name\": ", m->file_size);
  json_str(out, m->producer_name);
  fprintf(out, ",\n  \"producer_version\": ");
  json_str(out, m->producer_version);
  fprintf(out, ",\n  \"domain\": ");
  json_str(out, m->domain);
  fprintf(out, ",\n  \"model_version\": %lld,\n  \"ir_version\": %lld,\n  \"opsets\": ",
          (long long)m->model_version, (long long)m->ir_version);
  json_opsets(out, m->opsets, m->n_opsets);
  fprintf(out, ",\n  \"metadata\": {");
  for (size_t i = 0; i < m->n_metadata; i++) {
    fputs(i ? ", " : "", out);
    json_str(out, m->metadata[i].key);
    fputs(": ", out);
    json_str(out, m->metadata[i].value);
  }
  fprintf(out, "},\n  \"graph_name\": ");
  json_str(out, m->graph->name);
  fprintf(out, ",\n  \"inputs\": ");
  json_values(out, m->graph->inputs, m->graph->n_inputs, true);
  fprintf(out, ",\n  \"outputs\": ");
  json_values(out, m->graph->outputs, m->graph->n_outputs, false);
  fprintf(out, ",\n  \"nodes\": {\"main_graph\": %zu, \"total\": %zu, \"by_op\": {", s->nodes_main, s->nodes_total);
  for (size_t i = 0; i < s->n_ops; i++) {
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", s->ops[i].domain, s->ops[i].domain[0] ? "::" : "", s->ops[i].op);
    fputs(i ? ", " : "", out);
    json_str(out, name);
    fprintf(out, ": %zu", s->ops[i].count);
  }
  fprintf(out, "}},\n  \"parameters\": {\"count\": %lld, \"initializers\": %lld, \"bytes\": %llu, \"by_dtype\": {",
          (long long)s->params, (long long)s->n_init, (unsigned long long)s->param_bytes);
  bool first = true;
  for (int d = 0; d <= ONNX_DTYPE_MAX; d++) {
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
  fprintf(out, "],\n  \"subgraphs\": [");
  for (size_t i = 0; i < s->n_subs; i++) {
    const struct sub_info *si = &s->subs[i];
    fputs(i ? ",\n    " : "\n    ", out);
    fprintf(out, "{\"node\": %d, \"node_name\": ", si->owner->index);
    json_str(out, si->owner->name);
    fprintf(out, ", \"op_type\": ");
    json_str(out, si->owner->op_type);
    fprintf(out, ", \"attribute\": ");
    json_str(out, si->attr);
    fprintf(out, ", \"depth\": %d, \"nodes\": %zu, \"inputs\": %zu, \"outputs\": %zu, \"outer_refs\": %zu}",
            si->g->depth, si->nodes, si->g->n_inputs, si->g->n_outputs, si->g->n_outer_refs);
  }
  fprintf(out, "%s],\n  \"functions\": [", s->n_subs ? "\n  " : "");
  for (size_t i = 0; i < m->n_functions; i++) {
    const struct ir_function *f = &m->functions[i];
    fputs(i ? ", " : "", out);
    fprintf(out, "{\"domain\": ");
    json_str(out, f->domain);
    fprintf(out, ", \"name\": ");
    json_str(out, f->name);
    fprintf(out, ", \"nodes\": %zu}", f->body->n_nodes);
  }
  fprintf(out, "]\n}\n");
}

void onnx_inspect(const tolk_model *m, const char *path, enum onnx_inspect_format fmt, FILE *out) {
  struct stats s;
  stats_collect(&s, &m->ir);
  if (fmt == ONNX_INSPECT_JSON) inspect_json(m, path, &s, out);
  else inspect_text(m, path, &s, out);
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
    const struct ir_graph *g;
    int gid;
  } stack[DOT_MAX_DEPTH];
  int depth;
};

static int gid_for(const struct dot_state *d, const struct ir_graph *g) {
  for (int i = d->depth - 1; i >= 0; i--)
    if (d->stack[i].g == g) return d->stack[i].gid;
  return 0;
}

static void value_src(const struct ir_value *v, int gid, char *buf, size_t size) {
  if (v->producer) snprintf(buf, size, "n%d_%d", gid, v->producer->index);
  else snprintf(buf, size, "v%d_%d", gid, v->index);
}

static void dot_graph(struct dot_state *d, const struct ir_graph *g, int gid, int indent) {
  FILE *out = d->out;
  bool pushed = d->depth < DOT_MAX_DEPTH;
  if (pushed) {
    d->stack[d->depth].g = g;
    d->stack[d->depth++].gid = gid;
  }
  char src[64];
  for (size_t i = 0; i < g->n_inputs; i++) {
    const struct ir_value *v = g->inputs[i];
    if (v->flags & IR_VALUE_INITIALIZER) continue;
    fprintf(out, "%*sv%d_%d [shape=ellipse, style=filled, fillcolor=\"#dde8f7\", label=", indent, "", gid, v->index);
    dot_str(out, v->name);
    fprintf(out, "];\n");
  }
  for (size_t i = 0; i < g->n_nodes; i++) {
    const struct ir_node *n = g->nodes[i];
    fprintf(out, "%*sn%d_%zu [shape=box, style=rounded, label=", indent, "", gid, i);
    dot_str(out, n->op_type);
    if (n->name[0]) {
      fprintf(out, ", tooltip=");
      dot_str(out, n->name);
    }
    fprintf(out, "];\n");
    for (size_t k = 0; k < n->n_inputs; k++) {
      const struct ir_value *v = n->inputs[k];
      if (!v || (v->flags & IR_VALUE_INITIALIZER) || (v->flags & IR_VALUE_UNDEFINED)) continue;
      if (!v->producer && !(v->flags & IR_VALUE_GRAPH_INPUT)) continue;
      value_src(v, gid_for(d, v->graph), src, sizeof src);
      fprintf(out, "%*s%s -> n%d_%zu [label=", indent, "", src, gid, i);
      dot_str(out, v->name);
      fprintf(out, "%s];\n", v->graph != g ? ", style=dashed" : "");
    }
    for (size_t a = 0; a < n->n_attrs; a++) {
      const struct ir_attr *at = &n->attrs[a];
      for (size_t j = 0; j < ir_attr_n_graphs(at); j++) {
        const struct ir_graph *sub = ir_attr_graph(at, j);
        if (!sub) continue;
        int sid = ++d->next_graph;
        fprintf(out, "%*ssubgraph cluster_%d {\n%*slabel=", indent, "", sid, indent + 2, "");
        char cl[512];
        snprintf(cl, sizeof cl, "%s.%s", n->op_type, at->name);
        dot_str(out, cl);
        fprintf(out, ";\n%*sstyle=dashed;\n", indent + 2, "");
        dot_graph(d, sub, sid, indent + 2);
        fprintf(out, "%*s}\n", indent, "");
      }
    }
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    const struct ir_value *v = g->outputs[i];
    fprintf(out, "%*so%d_%zu [shape=ellipse, style=filled, fillcolor=\"#e3f2e1\", label=", indent, "", gid, i);
    dot_str(out, v->name);
    fprintf(out, "];\n");
    if (v->flags & IR_VALUE_UNDEFINED) continue;
    if (!v->producer && !(v->flags & (IR_VALUE_GRAPH_INPUT))) continue;
    if (v->flags & IR_VALUE_INITIALIZER) continue;
    value_src(v, gid_for(d, v->graph), src, sizeof src);
    fprintf(out, "%*s%s -> o%d_%zu;\n", indent, "", src, gid, i);
  }
  if (pushed) d->depth--;
}

void onnx_inspect_dot(const tolk_model *m, FILE *out) {
  struct dot_state d;
  memset(&d, 0, sizeof d);
  d.out = out;
  fprintf(out, "digraph model {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=8];\n");
  dot_graph(&d, m->ir.graph, 0, 2);
  fprintf(out, "}\n");
}
