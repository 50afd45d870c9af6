/*
 * test_onnx_quantize_merged.c — static quantization of Optimum's merged
 * decoder (marian-tiny's decoder_model_merged.onnx: one If on
 * use_cache_branch, decoder_model in its else branch, decoder_with_past_model
 * in its then branch, the weights shared in the main graph).
 *
 * ONNX Runtime 1.23.2's quantize_static cannot be the reference here: its
 * calibrator watches the main graph's nodes only, so on this graph QDQ (with
 * or without EnableSubgraph) and QOperator without it leave all 54 MatMuls
 * float, and QOperator with EnableSubgraph stops with "AttributeError:
 * 'NoneType' object has no attribute 'extend'" (operators/matmul.py: the
 * branch's weight has no quantization parameters). But the branches are the
 * two graphs ORT does quantize, and the merged golden sets are their golden
 * sets (sets 0 and 2 are decoder_model's 0 and 1, sets 1 and 3
 * decoder_with_past_model's, input for input). So, calibrated on the four
 * merged sets:
 *  - every tensor of each branch has exactly the range the separate graph's
 *    calibration gives it on the same sets;
 *  - quantized (QDQ and QOperator, per tensor and per channel, with and
 *    without reduce_range), all 54
 *    MatMuls are, and each branch holds ORT's activation scales (to 1e-5) and
 *    zero points of the separate graph (tests/data/quantize/static/, as in
 *    test_onnx_quantize_static.c), and ORT's QuantizeLinear nodes by name;
 *  - run in tolk, the logits are as far from fp32 as ORT's own quantized
 *    separate graph's on that set (within 2 %, the tolerance of
 *    test_onnx_quantize_static.c).
 * Calibrated on the first-step sets only, the cache branch has no ranges:
 * its 25 MatMuls stay float and the report says no sample ran it.
 * (tests/quantize_ort.py runs the written graph in ONNX Runtime.)
 */
#include <unistd.h>

#include "quantize_ref.h"

#define IF_PATH "optimum::if"
static struct qtest_dirs dirs;

/* Branch b's separate graph, and which merged sets took that branch. */
static const struct branch {
  const char *attr, *graph;
  int sets[2];
} branches[] = {{"else_branch", "decoder_model", {0, 2}}, {"then_branch", "decoder_with_past_model", {1, 3}}};

static tolk_calibration *calibrate(const char *graph, const int *sets, size_t n_sets) {
  char model[2048], set[2400];
  snprintf(model, sizeof model, "%s/marian-tiny/%s.onnx", dirs.fixtures, graph);
  tolk_calibration *cal = NULL;
  tolk_error err;
  CHECK_MSG(!tolk_calibration_create(model, tolk_calibration_default_params(), &cal, &err), "%s: %s", graph,
            err.message);
  for (size_t i = 0; cal && i < n_sets; i++) {
    snprintf(set, sizeof set, "%s/%s/test_data_set_%d", dirs.golden, graph, sets[i]);
    CHECK_MSG(!add_set(cal, set, &err), "%s: %s", set, err.message);
  }
  CHECK_MSG(cal && !tolk_calibration_finish(cal, &err), "%s: %s", graph, cal ? err.message : "no calibration");
  return cal;
}

/* ORT's quantize_static reference for the separate graph, format, mode. */
static cJSON *reference(const char *graph, const char *fmt, const char *mode) {
  char ref[2048];
  snprintf(ref, sizeof ref, "%s/%s.%s.%s.json", dirs.data, graph, fmt, mode);
  return read_json(ref);
}

/* Each branch tensor's range equals the separate graph's on the same sets. */
static void check_ranges(const tolk_calibration *merged) {
  for (size_t b = 0; b < 2; b++) {
    const int all[] = {0, 1};
    tolk_calibration *sep = calibrate(branches[b].graph, all, 2);
    cJSON *j = reference(branches[b].graph, "qdq", "default");
    const cJSON *inits = cJSON_GetObjectItem(j, "initializers"), *init;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", IF_PATH, branches[b].attr);
    int n = 0;
    cJSON_ArrayForEach(init, inits) {
      const char *name = init->string, *end = strstr(name, "_scale");
      if (!end || end[6] || is_weight_part(inits, name)) continue;
      char x[512];
      snprintf(x, sizeof x, "%.*s", (int)(end - name), name);
      float lo, hi, mlo, mhi;
      CHECK_MSG(tolk_calibration_range(sep, x, &lo, &hi), "%s: no range for %s", branches[b].graph, x);
      /* A main-graph input read in the branch has its range in the main graph. */
      int in_branch = tolk_calibration_range_in(merged, path, x, &mlo, &mhi);
      CHECK_MSG(in_branch || tolk_calibration_range_in(merged, NULL, x, &mlo, &mhi), "merged: no range for %s", x);
      CHECK_MSG(mlo == lo && mhi == hi, "%s %s: [%.9g, %.9g], %s alone [%.9g, %.9g]", path, x, mlo, mhi,
                branches[b].graph, lo, hi);
      n++;
    }
    CHECK_MSG(n >= 20, "%s: %d activations compared", branches[b].graph, n);
    cJSON_Delete(j);
    tolk_calibration_free(sep);
  }
}

static const struct ir_graph *branch_graph(const struct ir_graph *main_graph, const char *attr) {
  for (size_t i = 0; i < main_graph->n_nodes; i++)
    if (!strcmp(main_graph->nodes[i]->op_type, "If")) {
      const struct ir_attr *a = ir_node_attr(main_graph->nodes[i], attr);
      return a ? a->g : NULL;
    }
  return NULL;
}

static bool has_node(const struct ir_graph *g, const cJSON *want) {
  for (size_t i = 0; g && i < g->n_nodes; i++)
    if (node_matches(g->nodes[i], want)) return true;
  return false;
}

/* Branch b of the quantized merged graph against ORT's quantization of its
 * separate graph: activation scales and zero points, QuantizeLinear nodes. */
static void check_branch(const char *what, const struct ir_graph *main_graph, size_t b, const cJSON *j) {
  const struct ir_graph *g = branch_graph(main_graph, branches[b].attr);
  const cJSON *inits = cJSON_GetObjectItem(j, "initializers"), *init, *node;
  CHECK_MSG(g != NULL, "%s: no %s", what, branches[b].attr);
  if (!g) return;
  cJSON_ArrayForEach(init, inits) {
    if (is_weight_part(inits, init->string)) continue;
    bool here = ir_name_map_get(g->names, init->string) != NULL;
    check_activation(what, here ? g : main_graph, init->string, init);
  }
  cJSON_ArrayForEach(node, cJSON_GetObjectItem(j, "pattern")) {
    const char *op = cJSON_GetObjectItem(node, "op")->valuestring;
    if (strcmp(op, "QuantizeLinear")) continue;
    CHECK_MSG(has_node(g, node) || has_node(main_graph, node), "%s %s: no QuantizeLinear '%s'", what,
              branches[b].attr, cJSON_GetObjectItem(node, "name")->valuestring);
  }
}

/* The logits on merged set k against the fp32 golden ones, as far as ORT's
 * quantized separate graph's on the same inputs (its recorded error). */
static void check_run(const char *what, tolk_session *s, int k, const cJSON *ort_runs) {
  char set[1200], p[1300];
  snprintf(set, sizeof set, "%s/decoder_model_merged/test_data_set_%d", dirs.golden, k);
  tolk_tensor *in[16] = {0}, *out = NULL, *want;
  const char *names[16], *logits = "logits";
  size_t n = 0;
  tolk_error err;
  for (; n < tolk_session_input_count(s) && n < 16; n++) {
    snprintf(p, sizeof p, "%s/input_%zu.pb", set, n);
    in[n] = load_pb(p);
    names[n] = tolk_session_input(s, n)->name;
  }
  snprintf(p, sizeof p, "%s/output_0.pb", set);
  want = load_pb(p);
  double ort = cJSON_GetObjectItem(cJSON_GetArrayItem(ort_runs, k / 2), "max_abs_vs_fp32")->valuedouble, worst = 0;
  if (!tolk_session_run(s, n, names, (const tolk_tensor *const *)in, 1, &logits, &out, NULL, &err) && want) {
    const float *x = tolk_tensor_data(out), *y = tolk_tensor_data(want);
    CHECK(tolk_tensor_numel(out) == tolk_tensor_numel(want));
    for (int64_t i = 0; i < tolk_tensor_numel(out) && i < tolk_tensor_numel(want); i++)
      worst = fmax(worst, fabs((double)x[i] - y[i]));
    CHECK_MSG(worst <= 1.02 * ort, "%s set %d: max |int8 - fp32| %.4g, ORT's separate graph %.4g", what, k, worst, ort);
  } else {
    CHECK_MSG(0, "%s set %d: %s", what, k, err.message);
  }
  for (size_t i = 0; i < n; i++) tolk_tensor_free(in[i]);
  tolk_tensor_free(out);
  tolk_tensor_free(want);
}

static void check_quantized(const tolk_calibration *cal, const char *fmt, const char *mode) {
  char in[2048], out[256], what[128];
  snprintf(in, sizeof in, "%s/marian-tiny/decoder_model_merged.onnx", dirs.fixtures);
  snprintf(out, sizeof out, "%s/merged.%s.%s.onnx", dirs.tmp, fmt, mode);
  snprintf(what, sizeof what, "merged %s %s", fmt, mode);
  tolk_quantize_params p = tolk_quantize_default_params();
  p.format = !strcmp(fmt, "qdq") ? TOLK_QUANTIZE_QDQ : TOLK_QUANTIZE_QOPERATOR;
  p.per_channel = strstr(mode, "per_channel") != NULL;
  p.reduce_range = strstr(mode, "reduce_range") != NULL;
  p.calibration = cal;
  tolk_quantize_summary s = {0};
  tolk_model *m = quantize_load(what, in, out, p, &s);
  CHECK_MSG(s.quantized == 54 && !s.skipped, "%s: %zu quantized, %zu skipped", what, s.quantized, s.skipped);
  cJSON *refs[2] = {reference(branches[0].graph, fmt, mode), reference(branches[1].graph, fmt, mode)};
  for (size_t b = 0; m && b < 2; b++)
    if (refs[b]) check_branch(what, tolk_model_ir(m)->graph, b, refs[b]);
  tolk_model_free(m);
  tolk_session *sess = NULL;
  tolk_error err;
  tolk_session_params sp = tolk_session_default_params();
  sp.threads = 1;
  CHECK_MSG(!tolk_session_create_from_file(out, sp, &sess, &err), "%s: %s", what, err.message);
  for (int k = 0; sess && k < 4; k++)
    if (refs[k % 2]) check_run(what, sess, k, cJSON_GetObjectItem(refs[k % 2], "runs"));
  tolk_session_free(sess);
  cJSON_Delete(refs[0]);
  cJSON_Delete(refs[1]);
  unlink(out);
}

struct report {
  int untaken; /* lines saying no sample ran the cache branch */
};

static void on_line(void *user, const char *line) {
  struct report *r = user;
  r->untaken += strstr(line, "skipped MatMul") && strstr(line, "no sample ran " IF_PATH "/then_branch");
}

/* First steps only: the cache branch never ran, so it stays float. */
static void check_untaken_branch(void) {
  const int first[] = {0, 2};
  tolk_calibration *cal = calibrate("decoder_model_merged", first, 2);
  char in[2048], out[256];
  snprintf(in, sizeof in, "%s/marian-tiny/decoder_model_merged.onnx", dirs.fixtures);
  snprintf(out, sizeof out, "%s/merged.first.onnx", dirs.tmp);
  tolk_quantize_params p = tolk_quantize_default_params();
  p.format = TOLK_QUANTIZE_QDQ;
  p.calibration = cal;
  tolk_quantize_summary s = {0};
  struct report r = {0};
  tolk_error err;
  CHECK_MSG(!tolk_model_quantize(in, out, p, on_line, &r, &s, &err), "%s", err.message);
  CHECK_MSG(s.quantized == 29 && s.skipped == 25 && r.untaken == 25, "%zu quantized, %zu skipped, %d said why",
            s.quantized, s.skipped, r.untaken);
  unlink(out);
  tolk_calibration_free(cal);
}

int main(void) {
  qtest_dirs_init(&dirs, "static", "tolk-qmerged");
  const int all[] = {0, 1, 2, 3};
  tolk_calibration *cal = calibrate("decoder_model_merged", all, 4);
  CHECK(tolk_calibration_samples(cal) == 4);
  check_ranges(cal);
  static const char *formats[] = {"qdq", "qoperator"},
                    *modes[] = {"default", "per_channel", "reduce_range", "per_channel_reduce_range"};
  for (size_t f = 0; cal && f < 2; f++)
    for (size_t m = 0; m < 4; m++) check_quantized(cal, formats[f], modes[m]);
  tolk_calibration_free(cal);
  check_untaken_branch();
  qtest_dirs_cleanup(&dirs);
  return tu_finish("test_onnx_quantize_merged");
}
