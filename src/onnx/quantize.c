/*
 * quantize.c — tolk_model_quantize (tolk.h): dynamic int8 quantization in
 * the form of ONNX Runtime's quantize_dynamic. This half decides, on the IR
 * of the loaded model, which nodes change and computes the quantized
 * weights with ORT's arithmetic (onnxruntime/python/tools/quantization:
 * compute_scale_zp and quantize_nparray — range widened to hold 0, the scale
 * in double then stored as float, values divided in float, rounded half to
 * even, clipped); quantize_write.c then rewrites the file's bytes. The
 * result is loaded back and checked before anything is written, so a file
 * tolk would reject never reaches the disk.
 */
#include "quantize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest model accepted and written: protobuf's own 2 GiB bound. */
#define QUANTIZE_MAX_BYTES ((size_t)2 << 30)

tolk_quantize_params tolk_quantize_default_params(void) {
  tolk_quantize_params p = {0};
  return p;
}

struct qctx {
  const tolk_quantize_params *params;
  struct qplan plan;
  uint32_t **uses; /* per graph, per value index: nodes reading it */
  tolk_report_fn report;
  void *user;
  tolk_quantize_summary *sum;
};

/* ------------------------------------------------------------ graphs */

static size_t count_graphs(const struct ir_graph *g) {
  size_t n = 1;
  for (size_t i = 0; i < g->n_nodes; i++)
    for (size_t a = 0; a < g->nodes[i]->n_attrs; a++)
      for (size_t j = 0; j < ir_attr_n_graphs(&g->nodes[i]->attrs[a]); j++) {
        const struct ir_graph *s = ir_attr_graph(&g->nodes[i]->attrs[a], j);
        if (s) n += count_graphs(s);
      }
  return n;
}

static bool add_graphs(struct qctx *c, const struct ir_graph *g, size_t *k) {
  struct tolk_arena *a = c->plan.arena;
  struct qgraph *q = &c->plan.graphs[(*k)++];
  size_t nn = g->n_nodes ? g->n_nodes : 1, nv = g->n_values ? g->n_values : 1;
  q->g = g;
  q->action = tolk_arena_array(a, nn, sizeof *q->action);
  q->weight = tolk_arena_array(a, nn, sizeof *q->weight);
  q->dql = tolk_arena_array(a, nv, sizeof *q->dql);
  q->drop = tolk_arena_array(a, nv, sizeof *q->drop);
  q->home = tolk_arena_array(a, nv, sizeof *q->home);
  q->act = tolk_arena_array(a, nv, sizeof *q->act);
  q->acts = tolk_arena_array(a, nv, sizeof *q->acts);
  c->uses[*k - 1] = tolk_arena_array(a, nv, sizeof **c->uses);
  if (!q->action || !q->weight || !q->dql || !q->drop || !q->home || !q->act || !q->acts || !c->uses[*k - 1])
    return false;
  /* Arena memory comes zeroed: no action, no drops, no uses yet. */
  for (size_t i = 0; i < g->n_nodes; i++)
    for (size_t at = 0; at < g->nodes[i]->n_attrs; at++)
      for (size_t j = 0; j < ir_attr_n_graphs(&g->nodes[i]->attrs[at]); j++) {
        const struct ir_graph *s = ir_attr_graph(&g->nodes[i]->attrs[at], j);
        if (s && !add_graphs(c, s, k)) return false;
      }
  return true;
}

struct qgraph *qplan_graph(const struct qplan *p, const struct ir_graph *g) {
  for (size_t i = 0; i < p->n_graphs; i++)
    if (p->graphs[i].g == g) return &p->graphs[i];
  return NULL;
}

static uint32_t *uses_of(const struct qctx *c, const struct ir_value *v) {
  for (size_t i = 0; i < c->plan.n_graphs; i++)
    if (c->plan.graphs[i].g == v->graph) return &c->uses[i][v->index];
  return NULL;
}

/* Counts every reader of every value: node inputs in any graph (outer
 * references included) and graph outputs. */
static void count_uses(struct qctx *c) {
  for (size_t i = 0; i < c->plan.n_graphs; i++) {
    const struct ir_graph *g = c->plan.graphs[i].g;
    for (size_t k = 0; k < g->n_nodes; k++)
      for (size_t j = 0; j < g->nodes[k]->n_inputs; j++) {
        uint32_t *u = g->nodes[k]->inputs[j] ? uses_of(c, g->nodes[k]->inputs[j]) : NULL;
        if (u) (*u)++;
      }
    for (size_t k = 0; k < g->n_outputs; k++) {
      uint32_t *u = uses_of(c, g->outputs[k]);
      if (u) (*u)++;
    }
  }
}

/* ------------------------------------------------------------ arithmetic */

/* ORT's compute_scale_zp over [rmin, rmax] for the integer range
 * [qmin, qmax]; symmetric ranges center on 0. */
static void scale_zp(float rmin, float rmax, int qmin, int qmax, bool symmetric, float *scale, int *zp) {
  rmin = fminf(rmin, 0.0f);
  rmax = fmaxf(rmax, 0.0f);
  if (symmetric) {
    float absmax = fmaxf(fabsf(rmin), fabsf(rmax));
    rmin = -absmax;
    rmax = absmax;
  }
  double s = (double)(rmax - rmin) / ((double)qmax - (double)qmin);
  if (s < 1.17549435e-38) {
    *scale = 1.0f;
    *zp = 0;
    return;
  }
  *zp = symmetric ? (int)nearbyint((qmax + qmin) / 2.0) : (int)nearbyint(qmin - (double)rmin / s);
  *scale = (float)s;
}

/* ORT's quantize_nparray for one value. */
static int quantize_value(float w, float scale, int zp, int qmin, int qmax) {
  float q = nearbyintf(w / scale) + (float)zp;
  return q < (float)qmin ? qmin : q > (float)qmax ? qmax : (int)q;
}

static float elem(const struct ir_tensor *t, int64_t i) {
  float v;
  memcpy(&v, (const uint8_t *)t->data + i * 4, 4); /* may be misaligned in the mapping */
  return v;
}

/* Quantizes w into qw. MatMul weights: int8, symmetric in [-127, 127] (or
 * [-64, 64] with reduce_range), per tensor or per column of B; Gather data:
 * uint8 in [0, 255] from the tensor's range. */
static bool quantize_weight(struct qctx *c, struct qweight *qw) {
  const struct ir_tensor *t = qw->w->init;
  bool matmul = qw->kind != Q_GATHER, per_col = matmul && c->params->per_channel;
  int64_t cols = t->rank == 2 ? t->dims[1] : 1, n = t->numel;
  int qmin = matmul ? (c->params->reduce_range ? -64 : -127) : 0;
  int qmax = matmul ? (c->params->reduce_range ? 64 : 127) : 255;
  qw->per_column = per_col;
  qw->n_scale = per_col ? (size_t)cols : 1;
  qw->q = tolk_arena_alloc(c->plan.arena, (size_t)n);
  qw->scale = tolk_arena_array(c->plan.arena, qw->n_scale, sizeof *qw->scale);
  qw->zp = tolk_arena_alloc(c->plan.arena, qw->n_scale);
  if (!qw->q || !qw->scale || !qw->zp) return false;
  for (size_t s = 0; s < qw->n_scale; s++) {
    float lo = INFINITY, hi = -INFINITY;
    int64_t step = per_col ? cols : 1;
    for (int64_t i = per_col ? (int64_t)s : 0; i < n; i += step) {
      lo = fminf(lo, elem(t, i));
      hi = fmaxf(hi, elem(t, i));
    }
    int zp;
    scale_zp(lo, hi, qmin, qmax, matmul, &qw->scale[s], &zp);
    qw->zp[s] = (uint8_t)zp;
    for (int64_t i = per_col ? (int64_t)s : 0; i < n; i += step)
      ((uint8_t *)qw->q)[i] = (uint8_t)quantize_value(elem(t, i), qw->scale[s], zp, qmin, qmax);
  }
  return true;
}

/* ------------------------------------------------------------ decisions */

static bool listed(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (list[i] && !strcmp(list[i], s)) return true;
  return false;
}

/* Whether MatMul n is the output projection: its result, directly or
 * through the one Add reading it, is a graph output. */
static bool is_lm_head(const struct ir_node *n) {
  const struct ir_value *y = n->outputs[0];
  if (y->flags & IR_VALUE_GRAPH_OUTPUT) return true;
  const struct ir_graph *g = y->graph;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const struct ir_node *r = g->nodes[i];
    bool reads = false;
    for (size_t j = 0; j < r->n_inputs; j++) reads |= r->inputs[j] == y;
    if (reads && !strcmp(r->op_type, "Add") && r->n_outputs == 1 && r->outputs[0] &&
        r->outputs[0]->flags & IR_VALUE_GRAPH_OUTPUT)
      return true;
  }
  return false;
}

/* Why node n (of a kind to quantize) stays as it is, or NULL when it can be
 * quantized with `w` as its weight. */
static const char *why_not(const struct qctx *c, const struct ir_node *n, enum q_kind kind,
                           const struct ir_value **w) {
  if (n->n_inputs != 2 || !n->inputs[0] || !n->inputs[1] || n->n_outputs != 1 || !n->outputs[0])
    return "not two inputs and one output";
  *w = n->inputs[kind == Q_MATMUL ? 1 : 0];
  if (listed(n->name, c->params->exclude, c->params->n_exclude)) return "excluded (--exclude)";
  if (kind == Q_MATMUL && c->params->float_lm_head && is_lm_head(n)) return "the output projection (--lm-head no)";
  const struct ir_tensor *t = (*w)->init;
  if (!((*w)->flags & IR_VALUE_INITIALIZER) || !t) return kind == Q_MATMUL ? "B is not an initializer" : "its data is not an initializer";
  if ((*w)->flags & IR_VALUE_GRAPH_INPUT) return "the weight is also a graph input (it may be overridden)";
  if (t->dtype != TOLK_FLOAT) return "the weight is not float";
  if (kind == Q_MATMUL && t->rank != 2) return "B is not a matrix";
  if (!t->numel) return "the weight is empty";
  if (!t->data) return "the weight's data is not loaded";
  return NULL;
}

/* The quantized form of w for `kind`, made on first use. */
static struct qweight *weight_for(struct qctx *c, const struct ir_value *w, enum q_kind kind,
                                  const char **clash) {
  struct qgraph *home = qplan_graph(&c->plan, w->graph);
  for (size_t i = 0; i < home->n_home; i++) {
    if (home->home[i]->w != w) continue;
    /* ORT names both forms W_quantized: one weight read by a MatMul and a
     * Gather cannot have both. */
    if (home->home[i]->kind != kind) *clash = "its weight is quantized for another op type";
    return home->home[i]->kind == kind ? home->home[i] : NULL;
  }
  struct qweight *qw = tolk_arena_alloc(c->plan.arena, sizeof *qw);
  if (!qw) return NULL;
  qw->w = w;
  qw->kind = kind;
  if (!quantize_weight(c, qw)) return NULL;
  home->home[home->n_home++] = qw;
  return qw;
}

/* One DynamicQuantizeLinear per activation, in the graph defining it. */
static void need_dql(struct qctx *c, const struct ir_value *a) {
  struct qgraph *home = qplan_graph(&c->plan, a->graph);
  for (size_t i = 0; i < home->n_dql; i++)
    if (home->dql[i] == a) return;
  home->dql[home->n_dql++] = a;
}

static void shape_text(const struct ir_tensor *t, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < t->rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "x" : "", (long long)t->dims[i]);
}

/* Decides for one graph; false on out of memory. */
static bool plan_graph(struct qctx *c, struct qgraph *q) {
  const struct ir_graph *g = q->g;
  const char *const *ops = c->params->op_types;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const struct ir_node *n = g->nodes[i];
    enum q_kind kind = !strcmp(n->op_type, "MatMul") ? Q_MATMUL : !strcmp(n->op_type, "Gather") ? Q_GATHER : Q_NONE;
    if (!kind || *n->domain || (ops && !listed(n->op_type, ops, c->params->n_op_types))) continue;
    const struct ir_value *w = NULL;
    const char *why = why_not(c, n, kind, &w);
    struct qweight *qw = NULL;
    if (!why && !(qw = weight_for(c, w, kind, &why)) && !why) return false;
    if (why) {
      /* Gathers of shapes and indices are everywhere; only a weight's is news. */
      if (kind == Q_MATMUL || (w && w->flags & IR_VALUE_INITIALIZER)) {
        c->sum->skipped++;
        tolk_report_line(c->report, c->user, "skipped %s '%s': %s", n->op_type, n->name, why);
      }
      continue;
    }
    q->action[i] = kind;
    q->weight[i] = qw;
    if (kind == Q_MATMUL) need_dql(c, n->inputs[0]);
    c->sum->quantized++;
    char dims[64];
    shape_text(w->init, dims, sizeof dims);
    tolk_report_line(c->report, c->user, "quantized %s '%s' (%s '%s' %s)", n->op_type, n->name,
                     kind == Q_MATMUL ? "B" : "data", w->name, dims);
  }
  return true;
}

/* ------------------------------------------------------------ static */

/* ORT's QDQ activations: int8, asymmetric over the whole [-128, 127]. */
enum { ACT_QMIN = -128, ACT_QMAX = 127 };

/* The calibrated range of activation v, found by its graph's path (the
 * calibration loaded the model apart); false when there is none. */
static bool act_range(const struct qctx *c, const struct ir_value *v, float *lo, float *hi) {
  char path[TOLK_ERROR_MESSAGE_MAX];
  ir_graph_path(v->graph, path, sizeof path);
  return tolk_calibration_range_in(c->params->calibration, path, v->name, lo, hi);
}

/* Why activation v of a MatMul cannot get a Q/DQ pair, or NULL. */
static const char *why_not_act(const struct qctx *c, const struct ir_value *v, const char *role, char *why,
                               size_t size) {
  float lo, hi;
  if (v->flags & IR_VALUE_INITIALIZER) {
    snprintf(why, size, "%s '%s' is an initializer", role, v->name);
    return why;
  }
  if (v->flags & IR_VALUE_GRAPH_OUTPUT && !v->producer) {
    snprintf(why, size, "%s '%s' is a graph input passed through as an output", role, v->name);
    return why;
  }
  if (!act_range(c, v, &lo, &hi)) {
    /* Every float activation of a graph that ran was seen: an If branch no
     * sample took has none. */
    char path[TOLK_ERROR_MESSAGE_MAX / 2];
    ir_graph_path(v->graph, path, sizeof path);
    if (*path) snprintf(why, size, "the calibration has no range for %s '%s': no sample ran %s", role, v->name, path);
    else snprintf(why, size, "the calibration has no range for %s '%s'", role, v->name);
    return why;
  }
  return NULL;
}

/* The Q/DQ pair of activation v, made on first use. */
static bool need_act(struct qctx *c, const struct ir_value *v) {
  struct qgraph *home = qplan_graph(&c->plan, v->graph);
  if (home->act[v->index]) return true;
  struct qact *a = tolk_arena_alloc(c->plan.arena, sizeof *a);
  if (!a) return false;
  float lo = 0, hi = 0;
  int zp;
  act_range(c, v, &lo, &hi);
  a->v = v;
  /* In QOperator form a QLinearMatMul's output is already quantized. */
  const struct ir_node *p = v->producer;
  a->need_q = !p || qplan_graph(&c->plan, p->graph)->action[p->index] != Q_QOP;
  a->need_dq = !c->plan.qoperator; /* QOperator: plan_dequantize decides */
  scale_zp(lo, hi, ACT_QMIN, ACT_QMAX, false, &a->scale, &zp);
  a->zp = (int8_t)zp;
  home->act[v->index] = a;
  home->acts[home->n_acts++] = a;
  return true;
}

/* Why MatMul n stays float in a static graph, or NULL when it can be
 * quantized; *w is its weight (B as a float matrix initializer) or NULL
 * when B is an activation too. */
static const char *why_not_static(const struct qctx *c, const struct ir_node *n, const struct ir_value **w,
                                  char *buf, size_t size) {
  *w = NULL;
  if (n->n_inputs != 2 || !n->inputs[0] || !n->inputs[1] || n->n_outputs != 1 || !n->outputs[0])
    return "not two inputs and one output";
  if (listed(n->name, c->params->exclude, c->params->n_exclude)) return "excluded (--exclude)";
  if (c->params->float_lm_head && is_lm_head(n)) return "the output projection (--lm-head no)";
  const struct ir_value *b = n->inputs[1];
  const char *why = why_not_act(c, n->inputs[0], "A", buf, size);
  if (!why && b->flags & IR_VALUE_INITIALIZER) {
    why = why_not(c, n, Q_MATMUL, w);
    if (why) *w = NULL;
  } else if (!why) {
    why = why_not_act(c, b, "B", buf, size);
  }
  return why ? why : why_not_act(c, n->outputs[0], "the output", buf, size);
}

/* Decides one graph's MatMuls for static quantization; false on out of
 * memory. Nodes come in topological order, so a QLinearMatMul producing an
 * activation is decided before its readers. */
static bool plan_graph_static(struct qctx *c, struct qgraph *q) {
  const struct ir_graph *g = q->g;
  enum q_kind kind = c->params->format == TOLK_QUANTIZE_QOPERATOR ? Q_QOP : Q_QDQ;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const struct ir_node *n = g->nodes[i];
    if (strcmp(n->op_type, "MatMul") || *n->domain) continue;
    const struct ir_value *w;
    char buf[TOLK_ERROR_MESSAGE_MAX];
    const char *why = why_not_static(c, n, &w, buf, sizeof buf);
    struct qweight *qw = NULL;
    if (!why && w && !(qw = weight_for(c, w, kind, &why)) && !why) return false;
    if (why) {
      c->sum->skipped++;
      tolk_report_line(c->report, c->user, "skipped MatMul '%s': %s", n->name, why);
      continue;
    }
    /* The action first: the output's QuantizeLinear depends on it. */
    q->action[i] = kind;
    if (!need_act(c, n->inputs[0]) || (!w && !need_act(c, n->inputs[1])) || !need_act(c, n->outputs[0]))
      return false;
    q->weight[i] = qw;
    c->sum->quantized++;
    if (w) {
      char dims[64];
      shape_text(w->init, dims, sizeof dims);
      tolk_report_line(c->report, c->user, "quantized MatMul '%s' (B '%s' %s)", n->name, w->name, dims);
    } else {
      tolk_report_line(c->report, c->user, "quantized MatMul '%s' (activations '%s' and '%s')", n->name,
                       n->inputs[0]->name, n->inputs[1]->name);
    }
  }
  return true;
}

/* QOperator: a QLinearMatMul's output needs its DequantizeLinear when
 * anything but QLinearMatMuls reads it (as ORT adds one for each float
 * reader or graph output). */
static void plan_dequantize(struct qctx *c) {
  for (size_t i = 0; i < c->plan.n_graphs; i++) {
    struct qgraph *q = &c->plan.graphs[i];
    for (size_t k = 0; k < q->n_acts; k++) q->acts[k]->need_dq = !q->acts[k]->need_q;
  }
  /* Each QLinearMatMul reading an activation is one reader fewer wanting
   * it in float. */
  for (size_t i = 0; i < c->plan.n_graphs; i++) {
    const struct qgraph *q = &c->plan.graphs[i];
    for (size_t k = 0; k < q->g->n_nodes; k++) {
      if (q->action[k] != Q_QOP) continue;
      for (size_t j = 0; j < 2; j++) {
        const struct ir_value *v = q->g->nodes[k]->inputs[j];
        uint32_t *u = uses_of(c, v);
        struct qact *a = qplan_graph(&c->plan, v->graph)->act[v->index];
        if (a && u && --*u == 0) a->need_dq = false;
      }
    }
  }
}

/* ORT's Direct8BitOp for Transpose: a Transpose of a weight quantized (per
 * tensor) for another node reads the quantized form; found after every
 * MatMul and Gather has been decided, wherever they are. */
static void plan_transposes(struct qctx *c) {
  const char *const *ops = c->params->op_types;
  if (ops && !listed("Transpose", ops, c->params->n_op_types)) return;
  for (size_t i = 0; i < c->plan.n_graphs; i++) {
    struct qgraph *q = &c->plan.graphs[i];
    for (size_t k = 0; k < q->g->n_nodes; k++) {
      const struct ir_node *n = q->g->nodes[k];
      if (strcmp(n->op_type, "Transpose") || *n->domain || n->n_inputs != 1 || !n->inputs[0] ||
          n->n_outputs != 1 || !n->outputs[0] || listed(n->name, c->params->exclude, c->params->n_exclude))
        continue;
      const struct qgraph *home = qplan_graph(&c->plan, n->inputs[0]->graph);
      for (size_t h = 0; home && h < home->n_home; h++) {
        if (home->home[h]->w != n->inputs[0] || home->home[h]->per_column) continue;
        q->action[k] = Q_TRANSPOSE;
        q->weight[k] = home->home[h];
        c->sum->quantized++;
        tolk_report_line(c->report, c->user, "quantized Transpose '%s' (of the quantized '%s')", n->name,
                         n->inputs[0]->name);
        break;
      }
    }
  }
}

/* An initializer is dropped when every reader of it was quantized. */
static void plan_drops(struct qctx *c) {
  for (size_t i = 0; i < c->plan.n_graphs; i++) {
    const struct qgraph *q = &c->plan.graphs[i];
    for (size_t k = 0; k < q->g->n_nodes; k++) {
      if (!q->action[k] || !q->weight[k]) continue;
      const struct ir_value *w = q->weight[k]->w;
      uint32_t *u = uses_of(c, w);
      if (u && --*u == 0) qplan_graph(&c->plan, w->graph)->drop[w->index] = true;
    }
  }
}

static tolk_status make_plan(struct qctx *c, const tolk_model *m, tolk_error *err) {
  const struct ir_graph *main_graph = m->ir.graph;
  c->plan.n_graphs = count_graphs(main_graph);
  c->plan.graphs = tolk_arena_array(c->plan.arena, c->plan.n_graphs, sizeof *c->plan.graphs);
  c->uses = tolk_arena_array(c->plan.arena, c->plan.n_graphs, sizeof *c->uses);
  size_t k = 0;
  bool ok = c->plan.graphs && c->uses && add_graphs(c, main_graph, &k);
  if (ok) count_uses(c);
  bool is_static = c->params->format != TOLK_QUANTIZE_DYNAMIC;
  c->plan.qoperator = c->params->format == TOLK_QUANTIZE_QOPERATOR;
  for (size_t i = 0; ok && i < c->plan.n_graphs; i++)
    ok = is_static ? plan_graph_static(c, &c->plan.graphs[i]) : plan_graph(c, &c->plan.graphs[i]);
  if (!ok) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory while planning the quantization");
  if (!is_static) plan_transposes(c);
  if (c->plan.qoperator) plan_dequantize(c);
  plan_drops(c);
  return TOLK_OK;
}

/* ------------------------------------------------------------ entry */

/* The static form's own requirements. */
static tolk_status check_static(const tolk_model *m, const tolk_quantize_params *p, const char *path,
                                tolk_error *err) {
  if (!p->calibration)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "%s: static quantization needs a calibration", path);
  tolk_status st = tolk_calibration_check(p->calibration, err);
  if (st) {
    tolk_error_prefix(err, "%s", path);
    return st;
  }
  for (size_t i = 0; p->op_types && i < p->n_op_types; i++)
    if (strcmp(p->op_types[i], "MatMul"))
      return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "%s: static quantization quantizes MatMul only, not %s", path,
                       p->op_types[i]);
  int64_t opset = ir_model_opset(&m->ir, "");
  int64_t need = p->per_channel && p->format == TOLK_QUANTIZE_QDQ ? 13 : 10;
  if (opset < need)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED,
                     "%s: imports ai.onnx opset %lld; %s needs %lld or later", path, (long long)opset,
                     need == 13 ? "DequantizeLinear per channel" : "QuantizeLinear", (long long)need);
  return TOLK_OK;
}

static tolk_status check_input(const tolk_model *m, const tolk_quantize_params *p, const char *path,
                               tolk_error *err) {
  if (m->ir.n_ext_files)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "%s: models with external data are not quantized (yet)", path);
  if (p->format == TOLK_QUANTIZE_QDQ || p->format == TOLK_QUANTIZE_QOPERATOR) return check_static(m, p, path, err);
  if (p->format != TOLK_QUANTIZE_DYNAMIC)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "%s: unknown quantization format %d", path, (int)p->format);
  int64_t opset = ir_model_opset(&m->ir, "");
  if (opset < 11)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED,
                     "%s: imports ai.onnx opset %lld; DynamicQuantizeLinear needs 11 or later", path,
                     (long long)opset);
  return TOLK_OK;
}

/* Loads the written bytes back and runs the checker on them: a bug here
 * must not become a file. */
static tolk_status verify_output(const struct pbw *b, const char *out_path, tolk_error *err) {
  tolk_model *q;
  tolk_status st = tolk_model_load_buffer(b->p, b->n, NULL, tolk_model_default_params(), &q, err);
  if (!st) st = tolk_model_check(q, NULL, NULL, err);
  tolk_model_free(q);
  if (st) tolk_error_prefix(err, "%s: the quantized model does not pass the checker (a bug in tolk): ", out_path);
  return st ? TOLK_ERR_INTERNAL : TOLK_OK;
}

tolk_status tolk_model_quantize(const char *in_path, const char *out_path, tolk_quantize_params params,
                                tolk_report_fn report, void *user, tolk_quantize_summary *out,
                                tolk_error *err) {
  tolk_quantize_summary sum = {0};
  if (out) *out = sum;
  if (!in_path || !out_path)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_model_quantize: NULL path");
  tolk_model_params mp = tolk_model_default_params();
  mp.max_file_bytes = QUANTIZE_MAX_BYTES;
  tolk_model *m = NULL;
  struct tolk_arena arena;
  tolk_arena_init(&arena, 0);
  struct qctx c = {&params, {.arena = &arena}, NULL, report, user, &sum};
  struct pbw b;
  pbw_init(&b, QUANTIZE_MAX_BYTES);
  tolk_status st = tolk_model_load(in_path, mp, &m, err);
  if (!st) st = check_input(m, &params, in_path, err);
  if (!st) st = make_plan(&c, m, err);
  if (!st && !sum.quantized)
    st = tolk_fail(err, TOLK_ERR_NOT_FOUND,
 params.format != TOLK_QUANTIZE_DYNAMIC
                       ? "%s: nothing to quantize (no MatMul with calibrated activations); nothing written"
                       : "%s: nothing to quantize (no MatMul or Gather with a float initializer as its weight); "
                         "nothing written",
                   in_path);
  if (!st) {
    quantize_write(&b, m, &c.plan);
    st = pbw_status(&b, out_path, err);
  }
  if (!st) st = verify_output(&b, out_path, err);
  if (!st) st = tolk_write_file_atomic(out_path, b.p, b.n, err);
  if (!st) {
    sum.bytes_before = m->ir.file_size;
    sum.bytes_after = b.n;
    if (out) *out = sum;
  }
  pbw_release(&b);
  tolk_model_free(m);
  tolk_arena_release(&arena);
  return st;
}
