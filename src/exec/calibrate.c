/*
 * calibrate.c — tolk_calibration (tolk.h): the activation ranges static
 * quantization needs, observed by running the float model in a tolk
 * session on calibration samples. As ONNX Runtime's calibrators for op
 * types MatMul, it watches every float input and output of a MatMul that is
 * not an initializer, and keeps, per tensor, the least and greatest value
 * any sample produced (MinMax) — in every graph, If branches included, which
 * ORT's calibrator does not look into: a merged decoder's two branches each
 * get the ranges of the runs that took them. The executor shows each value
 * as it is produced (exec_run_observed), so no augmented copy of the graph is
 * built and nothing is kept alive for it; the session runs without
 * optimizations, so that no fusion or folding hides a MatMul's tensors. A
 * tensor is known by its graph's path (ir_graph_path) and its name: both
 * branches of Optimum's merged decoder use the same names. Checks each
 * sample against the graph's declared inputs first, so that a mismatch is
 * reported as the caller's, naming the input.
 *
 * The histogram methods (Entropy, Percentile) bin all values of all samples
 * in one histogram per tensor, as ORT's HistogramCollector does with the
 * samples it collected; its bins span the whole range, which is known only
 * once every sample has run. So the samples' inputs are kept (inputs are
 * small beside the activations they make) and tolk_calibration_finish runs
 * them a second time to fill the histograms (calibrate_hist.c).
 *
 * It also keeps the values of the integer inputs (token ids), up to a cap,
 * for the rule against random data (tolk_calibration_check).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_hist.h"
#include "exec.h"
#include "onnx/onnx.h"

/* Integer input values kept for the randomness rule: enough to judge, a
 * bounded cost for any calibration set. */
#define KEEP_MAX ((size_t)1 << 20)
#define RANDOM_MIN_VALUES 64
#define RANDOM_DISTINCT_PERCENT 90

struct ints {
  int64_t *v;
  size_t n, cap;
};

/* One sample's inputs, kept for the second pass of the histogram methods. */
struct kept {
  const char **names; /* borrowed from the session */
  tolk_tensor **t;
  size_t n;
};

/* A graph of the model and, per value index, its watched tensor or -1. */
struct graph_watch {
  const struct ir_graph *g;
  char *path; /* ir_graph_path */
  int32_t *idx;
};

struct tolk_calibration {
  tolk_calibration_params params;
  tolk_model *model;
  tolk_session *session;
  size_t n_inputs;
  struct graph_watch *graphs;
  size_t n_graphs;
  const struct ir_value **vals; /* watched tensors, borrowed from the model's IR */
  const char **paths;           /* n_names: the path of each one's graph (graphs[].path) */
  struct cal_hist *hist;        /* the histograms of the second pass, else NULL */
  float *lo, *hi;     /* n_names each: observed min and max */
  float *amin;        /* n_names: least absolute value (Percentile's histogram starts there) */
  float *rlo, *rhi;   /* n_names: the ranges, once finished */
  size_t n_names;
  size_t samples;
  struct ints *ints; /* per session input: its values when integer */
  struct kept *kept; /* histogram methods: every sample */
  size_t n_kept;
  bool finished;
};

tolk_calibration_params tolk_calibration_default_params(void) {
  tolk_calibration_params p = {TOLK_CALIBRATE_MINMAX, 0, 0, 0};
  return p;
}

static void kept_free(struct kept *k) {
  for (size_t i = 0; i < k->n; i++) tolk_tensor_free(k->t[i]);
  free(k->t);
  free(k->names);
}

void tolk_calibration_free(tolk_calibration *cal) {
  if (!cal) return;
  tolk_session_free(cal->session);
  tolk_model_free(cal->model);
  for (size_t i = 0; cal->graphs && i < cal->n_graphs; i++) {
    free(cal->graphs[i].path);
    free(cal->graphs[i].idx);
  }
  free(cal->graphs);
  free(cal->vals);
  free(cal->paths);
  free(cal->lo);
  free(cal->hi);
  free(cal->amin);
  free(cal->rlo);
  free(cal->rhi);
  for (size_t i = 0; cal->ints && i < cal->n_inputs; i++) free(cal->ints[i].v);
  free(cal->ints);
  for (size_t i = 0; i < cal->n_kept; i++) kept_free(&cal->kept[i]);
  free(cal->kept);
  free(cal);
}

/* Whether v is an activation a static MatMul quantizes: computed or fed at
 * run time, and float (declared or inferred; an undeclared type is run and
 * checked on the tensor). */
static bool activation(const struct ir_value *v) {
  if (!v || v->flags & (IR_VALUE_INITIALIZER | IR_VALUE_UNDEFINED)) return false;
  return v->type.kind == IR_TYPE_NONE ||
         (v->type.kind == IR_TYPE_TENSOR && (v->type.dtype == TOLK_FLOAT || v->type.dtype == TOLK_UNDEFINED));
}

static size_t count_graphs(const struct ir_graph *g) {
  size_t n = 1;
  for (size_t i = 0; i < g->n_nodes; i++)
    for (size_t a = 0; a < g->nodes[i]->n_attrs; a++)
      for (size_t j = 0; j < ir_attr_n_graphs(&g->nodes[i]->attrs[a]); j++)
        if (ir_attr_graph(&g->nodes[i]->attrs[a], j)) n += count_graphs(ir_attr_graph(&g->nodes[i]->attrs[a], j));
  return n;
}

/* Lists g and its subgraphs, depth first, each with its path and an empty
 * index; false on out of memory. */
static bool list_graphs(tolk_calibration *cal, const struct ir_graph *g) {
  struct graph_watch *w = &cal->graphs[cal->n_graphs++];
  char path[TOLK_ERROR_MESSAGE_MAX];
  ir_graph_path(g, path, sizeof path);
  w->g = g;
  w->path = strdup(path);
  w->idx = malloc((g->n_values + 1) * sizeof *w->idx);
  if (!w->path || !w->idx) return false;
  for (size_t i = 0; i < g->n_values; i++) w->idx[i] = -1;
  for (size_t i = 0; i < g->n_nodes; i++)
    for (size_t a = 0; a < g->nodes[i]->n_attrs; a++)
      for (size_t j = 0; j < ir_attr_n_graphs(&g->nodes[i]->attrs[a]); j++) {
        const struct ir_graph *s = ir_attr_graph(&g->nodes[i]->attrs[a], j);
        if (s && !list_graphs(cal, s)) return false;
      }
  return true;
}

/* The watched index of v, or -1. */
static int32_t watch_of(const tolk_calibration *cal, const struct ir_value *v) {
  for (size_t i = 0; v && i < cal->n_graphs; i++)
    if (cal->graphs[i].g == v->graph) return (size_t)v->index < v->graph->n_values ? cal->graphs[i].idx[v->index] : -1;
  return -1;
}

static void watch(tolk_calibration *cal, const struct ir_value *v) {
  for (size_t i = 0; i < cal->n_graphs; i++)
    if (cal->graphs[i].g == v->graph && cal->graphs[i].idx[v->index] < 0) {
      cal->graphs[i].idx[v->index] = (int32_t)cal->n_names;
      cal->paths[cal->n_names] = cal->graphs[i].path;
      cal->vals[cal->n_names++] = v;
    }
}

static tolk_status pick_tensors(tolk_calibration *cal, tolk_error *err) {
  const struct ir_graph *main_graph = cal->model->ir.graph;
  size_t n_nodes = 0, n_graphs = count_graphs(main_graph);
  cal->graphs = calloc(n_graphs, sizeof *cal->graphs);
  if (!cal->graphs || !list_graphs(cal, main_graph))
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the calibration");
  for (size_t k = 0; k < cal->n_graphs; k++) n_nodes += cal->graphs[k].g->n_nodes;
  cal->vals = calloc(3 * n_nodes + 1, sizeof *cal->vals);
  cal->paths = calloc(3 * n_nodes + 1, sizeof *cal->paths);
  if (!cal->vals || !cal->paths) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the calibration");
  for (size_t k = 0; k < cal->n_graphs; k++) {
    const struct ir_graph *g = cal->graphs[k].g;
    for (size_t i = 0; i < g->n_nodes; i++) {
      const struct ir_node *n = g->nodes[i];
      if (strcmp(n->op_type, "MatMul") || *n->domain || n->n_inputs != 2 || n->n_outputs != 1) continue;
      const struct ir_value *vs[] = {n->inputs[0], n->inputs[1], n->outputs[0]};
      for (size_t j = 0; j < 3; j++)
        if (activation(vs[j])) watch(cal, vs[j]);
    }
  }
  size_t n = cal->n_names ? cal->n_names : 1;
  cal->lo = malloc(n * sizeof *cal->lo);
  cal->hi = malloc(n * sizeof *cal->hi);
  cal->amin = malloc(n * sizeof *cal->amin);
  cal->rlo = malloc(n * sizeof *cal->rlo);
  cal->rhi = malloc(n * sizeof *cal->rhi);
  if (!cal->lo || !cal->hi || !cal->amin || !cal->rlo || !cal->rhi)
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the calibration");
  for (size_t i = 0; i < cal->n_names; i++) {
    cal->lo[i] = cal->amin[i] = INFINITY;
    cal->hi[i] = -INFINITY;
  }
  return TOLK_OK;
}

/* Fills in ORT's defaults (its create_calibrator) and checks the rest. */
static tolk_status settle_params(tolk_calibration_params *p, tolk_error *err) {
  if (p->method < TOLK_CALIBRATE_MINMAX || p->method > TOLK_CALIBRATE_PERCENTILE)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "unknown calibration method %d", (int)p->method);
  if (!p->num_bins) p->num_bins = p->method == TOLK_CALIBRATE_PERCENTILE ? 2048 : 128;
  if (!p->num_quantized_bins) p->num_quantized_bins = 128;
  if (p->percentile == 0) p->percentile = 99.999;
  if (p->num_bins < 1 || p->num_bins > (1 << 20))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "num_bins %d is not in [1, 1048576]", p->num_bins);
  if (p->method == TOLK_CALIBRATE_ENTROPY && (p->num_quantized_bins < 1 || p->num_quantized_bins > p->num_bins))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "num_quantized_bins %d is not in [1, num_bins %d]",
                     p->num_quantized_bins, p->num_bins);
  if (!(p->percentile > 0 && p->percentile <= 100))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "percentile %g is not in (0, 100]", p->percentile);
  return TOLK_OK;
}

tolk_status tolk_calibration_create(const char *path, tolk_calibration_params params, tolk_calibration **out,
                                    tolk_error *err) {
  if (out) *out = NULL;
  if (!path || !out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_calibration_create: NULL argument");
  tolk_status st = settle_params(&params, err);
  if (st) return st;
  tolk_calibration *cal = calloc(1, sizeof *cal);
  if (!cal) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the calibration");
  cal->params = params;
  tolk_session_params sp = tolk_session_default_params();
  sp.opt_level = TOLK_OPT_NONE;
  st = tolk_model_load(path, tolk_model_default_params(), &cal->model, err);
  if (!st) st = pick_tensors(cal, err);
  if (!st) st = tolk_session_create(cal->model, sp, &cal->session, err);
  if (!st) cal->n_inputs = tolk_session_input_count(cal->session);
  if (!st && !(cal->ints = calloc(cal->n_inputs + 1, sizeof *cal->ints)))
    st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the calibration");
  if (st) {
    tolk_calibration_free(cal);
    return st;
  }
  *out = cal;
  return TOLK_OK;
}

static void dims_text(int rank, const int64_t *dims, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  if (rank == 0) snprintf(buf, size, "a scalar");
  for (int i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, dims[i] < 0 ? "%s?" : "%s%lld", i ? "x" : "",
                             (long long)dims[i]);
}

/* Checks one given input against the graph's declaration of it. */
static tolk_status check_one(const tolk_value_info *d, const tolk_tensor *t, tolk_error *err) {
  char want[160], got[160];
  int rank = tolk_tensor_rank(t);
  const int64_t *dims = tolk_tensor_dims(t);
  if (d->dtype != TOLK_UNDEFINED && tolk_tensor_dtype(t) != d->dtype)
    return tolk_fail(err, TOLK_ERR_TYPE, "input '%s' is %s; the graph declares %s", d->name,
                     tolk_dtype_name(tolk_tensor_dtype(t)), tolk_dtype_name(d->dtype));
  bool bad = d->rank >= 0 && rank != d->rank;
  for (int i = 0; !bad && d->rank >= 0 && i < rank; i++) bad = d->dims[i] >= 0 && d->dims[i] != dims[i];
  if (bad) {
    dims_text(rank, dims, got, sizeof got);
    dims_text(d->rank, d->dims, want, sizeof want);
    return tolk_fail(err, TOLK_ERR_SHAPE, "input '%s' has shape %s; the graph declares %s", d->name, got, want);
  }
  return TOLK_OK;
}

/* Every given name is an input, once, and every input is given. */
static tolk_status check_sample(const tolk_calibration *cal, size_t n, const char *const *names,
                                const tolk_tensor *const *inputs, tolk_error *err) {
  size_t n_decl = tolk_session_input_count(cal->session);
  for (size_t i = 0; i < n; i++) {
    const tolk_value_info *d = NULL;
    for (size_t k = 0; k < n_decl && !d; k++)
      if (!strcmp(tolk_session_input(cal->session, k)->name, names[i])) d = tolk_session_input(cal->session, k);
    if (!d) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "'%s' is not an input of the graph", names[i]);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(names[j], names[i]))
        return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "input '%s' is given twice", names[i]);
    tolk_status st = check_one(d, inputs[i], err);
    if (st) return st;
  }
  bool empty = true;
  for (size_t i = 0; i < n; i++) empty &= !tolk_tensor_numel(inputs[i]);
  if (empty)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "every input is empty: an empty sample calibrates nothing");
  for (size_t k = 0; k < n_decl; k++) {
    const char *want = tolk_session_input(cal->session, k)->name;
    bool given = false;
    for (size_t i = 0; i < n && !given; i++) given = !strcmp(names[i], want);
    if (!given) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "input '%s' is missing", want);
  }
  return TOLK_OK;
}

static void widen(tolk_calibration *cal, size_t i, const struct tensor *t) {
  if (t->dtype != TOLK_FLOAT) return;
  const float *x = t->data;
  int64_t n = t->numel;
  float lo = cal->lo[i], hi = cal->hi[i], amin = cal->amin[i];
  for (int64_t k = 0; k < n; k++) {
    lo = fminf(lo, x[k]);
    hi = fmaxf(hi, x[k]);
    amin = fminf(amin, fabsf(x[k]));
  }
  cal->lo[i] = lo;
  cal->hi[i] = hi;
  cal->amin[i] = amin;
}

/* The executor's observer: a watched tensor widens its range (first pass)
 * or fills its histogram (the histogram methods' second pass). */
static void observe(void *user, const struct ir_value *v, const struct tensor *t) {
  tolk_calibration *cal = user;
  int32_t i = watch_of(cal, v);
  if (i < 0) return;
  if (!cal->hist) widen(cal, (size_t)i, t);
  else if (cal->hist[i].counts && t->dtype == TOLK_FLOAT)
    cal_hist_add(&cal->hist[i], t->data, t->numel, cal->params.method == TOLK_CALIBRATE_PERCENTILE);
}

/* One run of the sample through the observer: the main graph's inputs,
 * which no node produces, first. */
static tolk_status observed_run(tolk_calibration *cal, size_t n_inputs, const char *const *names,
                                const tolk_tensor *const *inputs, size_t n_outputs, const char *const *output_names,
                                tolk_tensor **outputs, tolk_error *err) {
  const struct ir_graph *g = cal->model->ir.graph;
  for (size_t i = 0; i < n_inputs; i++) observe(cal, ir_name_map_get(g->names, names[i]), &inputs[i]->t);
  return exec_run_observed(cal->session, n_inputs, names, inputs, n_outputs, output_names, outputs, observe, cal,
                           err);
}

static int64_t int_at(const tolk_tensor *t, int64_t i) {
  const void *p = tolk_tensor_data(t);
  switch (tolk_tensor_dtype(t)) {
  case TOLK_INT64: return ((const int64_t *)p)[i];
  case TOLK_INT32: return ((const int32_t *)p)[i];
  case TOLK_INT16: return ((const int16_t *)p)[i];
  case TOLK_INT8: return ((const int8_t *)p)[i];
  case TOLK_UINT8: return ((const uint8_t *)p)[i];
  case TOLK_UINT16: return ((const uint16_t *)p)[i];
  case TOLK_UINT32: return ((const uint32_t *)p)[i];
  default: return 0;
  }
}

static bool is_int(tolk_dtype t) {
  return t == TOLK_INT64 || t == TOLK_INT32 || t == TOLK_INT16 || t == TOLK_INT8 || t == TOLK_UINT8 ||
         t == TOLK_UINT16 || t == TOLK_UINT32;
}

/* Keeps the integer inputs' values of a sample (up to KEEP_MAX each). */
static tolk_status keep_ints(tolk_calibration *cal, size_t n, const char *const *names,
                             const tolk_tensor *const *inputs, tolk_error *err) {
  for (size_t k = 0; k < cal->n_inputs; k++) {
    const char *want = tolk_session_input(cal->session, k)->name;
    for (size_t i = 0; i < n; i++) {
      if (strcmp(names[i], want) || !is_int(tolk_tensor_dtype(inputs[i]))) continue;
      struct ints *s = &cal->ints[k];
      size_t add = (size_t)tolk_tensor_numel(inputs[i]);
      if (add > KEEP_MAX - s->n) add = KEEP_MAX - s->n;
      if (s->n + add > s->cap) {
        size_t cap = s->n + add > 2 * s->cap ? s->n + add : 2 * s->cap;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the calibration");
        s->v = v;
        s->cap = cap;
      }
      for (size_t j = 0; j < add; j++) s->v[s->n++] = int_at(inputs[i], (int64_t)j);
    }
  }
  return TOLK_OK;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The samples exist and do not look random. */
static tolk_status check_data(const tolk_calibration *cal, tolk_error *err) {
  if (!cal || !cal->samples)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "the calibration has no samples: ranges from no data would quantize blindly");
  for (size_t k = 0; k < cal->n_inputs; k++) {
    const struct ints *s = &cal->ints[k];
    if (s->n < RANDOM_MIN_VALUES) continue;
    int64_t *v = malloc(s->n * sizeof *v);
    if (!v) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the calibration check");
    memcpy(v, s->v, s->n * sizeof *v);
    qsort(v, s->n, sizeof *v, cmp_i64);
    size_t distinct = 1;
    for (size_t i = 1; i < s->n; i++) distinct += v[i] != v[i - 1];
    free(v);
    if (distinct * 100 >= s->n * RANDOM_DISTINCT_PERCENT)
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                       "the calibration data looks random: input '%s' took %zu values, %zu of them distinct "
                       "(real token ids repeat); ranges from random data destroy quality",
                       tolk_session_input(cal->session, k)->name, s->n, distinct);
  }
  return TOLK_OK;
}

tolk_status tolk_calibration_check(const tolk_calibration *cal, tolk_error *err) {
  tolk_status st = check_data(cal, err);
  if (!st && !cal->finished)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "the calibration is not finished (tolk_calibration_finish)");
  return st;
}

size_t tolk_calibration_input_count(const tolk_calibration *cal) {
  return cal ? tolk_session_input_count(cal->session) : 0;
}

const tolk_value_info *tolk_calibration_input(const tolk_calibration *cal, size_t i) {
  return cal ? tolk_session_input(cal->session, i) : NULL;
}

size_t tolk_calibration_output_count(const tolk_calibration *cal) {
  return cal ? tolk_session_output_count(cal->session) : 0;
}

const tolk_value_info *tolk_calibration_output(const tolk_calibration *cal, size_t i) {
  return cal ? tolk_session_output(cal->session, i) : NULL;
}

/* Copies a sample's inputs for the second pass, named as the session
 * names them (the caller's names need not outlive the call). */
static tolk_status keep_sample(tolk_calibration *cal, size_t n, const char *const *names,
                               const tolk_tensor *const *inputs, tolk_error *err) {
  struct kept *grown = realloc(cal->kept, (cal->n_kept + 1) * sizeof *grown);
  if (!grown) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory keeping a calibration sample");
  cal->kept = grown;
  struct kept *k = &cal->kept[cal->n_kept++];
  k->n = 0;
  k->names = calloc(n + 1, sizeof *k->names);
  k->t = calloc(n + 1, sizeof *k->t);
  tolk_status st = k->names && k->t ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory keeping a sample");
  for (size_t i = 0; !st && i < n; i++) {
    const tolk_tensor *t = inputs[i];
    st = tolk_tensor_create(tolk_tensor_dtype(t), tolk_tensor_rank(t), tolk_tensor_dims(t), tolk_tensor_data(t),
                            tolk_tensor_nbytes(t), &k->t[i], err);
    for (size_t j = 0; !st && j < cal->n_inputs; j++) {
      const char *decl = tolk_session_input(cal->session, j)->name;
      if (!strcmp(decl, names[i])) k->names[i] = decl;
    }
    k->n += !st;
  }
  if (st) kept_free(&cal->kept[--cal->n_kept]);
  return st;
}

tolk_status tolk_calibration_add(tolk_calibration *cal, size_t n_inputs, const char *const *names,
                                 const tolk_tensor *const *inputs, tolk_error *err) {
  return tolk_calibration_add_run(cal, n_inputs, names, inputs, 0, NULL, NULL, err);
}

tolk_status tolk_calibration_add_run(tolk_calibration *cal, size_t n_inputs, const char *const *names,
                                     const tolk_tensor *const *inputs, size_t n_outputs,
                                     const char *const *output_names, tolk_tensor **outputs, tolk_error *err) {
  if (!cal || (n_inputs && (!names || !inputs)) || (n_outputs && !outputs))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_calibration_add: NULL argument");
  if (!output_names && n_outputs > tolk_calibration_output_count(cal))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "%zu outputs asked for; the graph has %zu", n_outputs,
                     tolk_calibration_output_count(cal));
  for (size_t k = 0; k < n_outputs; k++) outputs[k] = NULL;
  if (cal->finished)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "the calibration is finished: no more samples");
  tolk_status st = check_sample(cal, n_inputs, names, inputs, err);
  if (st) return st;
  bool kept = cal->params.method != TOLK_CALIBRATE_MINMAX && cal->n_names;
  if (kept && (st = keep_sample(cal, n_inputs, names, inputs, err))) return st;
  /* A failed run leaves the ranges as they were: widen copies first. */
  size_t bytes = (cal->n_names ? cal->n_names : 1) * sizeof(float);
  float *saved = malloc(3 * bytes);
  const char **want = calloc(n_outputs + 1, sizeof *want);
  if (!saved || !want) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for a calibration run");
  for (size_t k = 0; !st && k < n_outputs; k++)
    want[k] = output_names ? output_names[k] : tolk_calibration_output(cal, k)->name;
  if (!st) {
    memcpy(saved, cal->lo, bytes);
    memcpy((char *)saved + bytes, cal->hi, bytes);
    memcpy((char *)saved + 2 * bytes, cal->amin, bytes);
    st = observed_run(cal, n_inputs, names, inputs, n_outputs, want, outputs, err);
    if (st) {
      memcpy(cal->lo, saved, bytes);
      memcpy(cal->hi, (char *)saved + bytes, bytes);
      memcpy(cal->amin, (char *)saved + 2 * bytes, bytes);
    }
  }
  if (!st) st = keep_ints(cal, n_inputs, names, inputs, err);
  for (size_t k = 0; st && k < n_outputs; k++) tolk_tensor_free(outputs[k]), outputs[k] = NULL;
  free(saved);
  free(want);
  if (!st) cal->samples++;
  else if (kept) kept_free(&cal->kept[--cal->n_kept]);
  return st;
}

/* The second pass: every kept sample again, each watched tensor's values
 * into its histogram, then the method's range. */
static tolk_status histogram_ranges(tolk_calibration *cal, tolk_error *err) {
  bool pct = cal->params.method == TOLK_CALIBRATE_PERCENTILE;
  struct cal_hist *h = calloc(cal->n_names + 1, sizeof *h);
  tolk_status st = h ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the histograms");
  for (size_t i = 0; !st && i < cal->n_names; i++) {
    if (cal->lo[i] > cal->hi[i]) continue; /* not float: never observed */
    float t = fmaxf(fabsf(cal->lo[i]), fabsf(cal->hi[i]));
    bool ok = pct ? cal_hist_init(&h[i], cal->amin[i], t, cal->params.num_bins)
                  : cal_hist_init(&h[i], -t, t, cal->params.num_bins);
    if (!ok) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the histograms");
  }
  cal->hist = h;
  for (size_t s = 0; !st && s < cal->n_kept; s++) {
    const struct kept *k = &cal->kept[s];
    st = observed_run(cal, k->n, k->names, (const tolk_tensor *const *)k->t, 0, k->names, NULL, err);
  }
  cal->hist = NULL;
  for (size_t i = 0; !st && i < cal->n_names; i++) {
    if (!h[i].counts) continue;
    float mn = cal->lo[i], mx = cal->hi[i];
    if (pct) cal_percentile_range(&h[i], cal->params.percentile, mn, mx, &cal->rlo[i], &cal->rhi[i]);
    else if (!cal_entropy_range(&h[i], cal->params.num_quantized_bins, mn, mx, &cal->rlo[i], &cal->rhi[i]))
      st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory for the entropy search");
  }
  for (size_t i = 0; h && i < cal->n_names; i++) cal_hist_free(&h[i]);
  free(h);
  return st;
}

tolk_status tolk_calibration_finish(tolk_calibration *cal, tolk_error *err) {
  if (!cal) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_calibration_finish: NULL calibration");
  if (cal->finished) return TOLK_OK;
  tolk_status st = check_data(cal, err);
  if (st) return st;
  if (cal->params.method == TOLK_CALIBRATE_MINMAX) {
    memcpy(cal->rlo, cal->lo, cal->n_names * sizeof *cal->rlo);
    memcpy(cal->rhi, cal->hi, cal->n_names * sizeof *cal->rhi);
  } else if ((st = histogram_ranges(cal, err))) {
    return st;
  }
  for (size_t i = 0; i < cal->n_kept; i++) kept_free(&cal->kept[i]);
  cal->n_kept = 0;
  cal->finished = true;
  return TOLK_OK;
}

size_t tolk_calibration_samples(const tolk_calibration *cal) {
  return cal ? cal->samples : 0;
}

int tolk_calibration_range_in(const tolk_calibration *cal, const char *graph, const char *name, float *lo,
                              float *hi) {
  for (size_t i = 0; cal && cal->finished && name && i < cal->n_names; i++)
    if (!strcmp(cal->vals[i]->name, name) && !strcmp(cal->paths[i], graph ? graph : "") && cal->lo[i] <= cal->hi[i]) {
      *lo = cal->rlo[i];
      *hi = cal->rhi[i];
      return 1;
    }
  return 0;
}

int tolk_calibration_range(const tolk_calibration *cal, const char *name, float *lo, float *hi) {
  return tolk_calibration_range_in(cal, NULL, name, lo, hi);
}
