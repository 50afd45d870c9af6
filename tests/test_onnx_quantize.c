/*
 * test_onnx_quantize.c — tolk_model_quantize against ONNX Runtime's
 * quantize_dynamic, recorded by tools/ort_quantize_reference.py in
 * tests/data/quantize/<graph>.<mode>.json, on marian-tiny's four fp32 graphs
 * in four modes: every node ORT added (op, name, inputs, outputs) is in the
 * same graph of tolk's output (If branches included), the op counts of every
 * graph are ORT's, and every quantized initializer has ORT's dtype, dims and
 * bytes (sha256) — scales and zero points compared value by value, so a
 * difference says by how much. Then the graphs run: tolk's
 * per-channel/reduce-range output against the committed ORT-quantized
 * fixture on the golden inputs, output for output.
 */
#include <cjson/cJSON.h>
#include <string.h>
#include <unistd.h>

#include "onnx/onnx.h"
#include "quantize_ref.h"
#include "testutil.h"

static const char *graphs[] = {"encoder_model", "decoder_model", "decoder_with_past_model", "decoder_model_merged"};
static const char *modes[] = {"default", "per_channel", "reduce_range", "per_channel_reduce_range"};
static struct qtest_dirs dirs;

static tolk_quantize_params mode_params(const char *mode) {
  tolk_quantize_params p = tolk_quantize_default_params();
  p.per_channel = strstr(mode, "per_channel") != NULL;
  p.reduce_range = strstr(mode, "reduce_range") != NULL;
  return p;
}

/* The graph of `main` at a reference path: "main" or "main/NODE/ATTR/...". */
static const struct ir_graph *graph_at(const struct ir_graph *g, const char *path) {
  const char *p = strchr(path, '/');
  while (p && g) {
    /* Node names hold no '/' in marian-tiny's branches ("optimum::if"). */
    const char *node = p + 1, *attr = strchr(node, '/');
    if (!attr) return NULL;
    const char *next = strchr(attr + 1, '/');
    size_t nl = (size_t)(attr - node), al = next ? (size_t)(next - attr - 1) : strlen(attr + 1);
    const struct ir_graph *found = NULL;
    for (size_t i = 0; i < g->n_nodes && !found; i++) {
      const struct ir_node *n = g->nodes[i];
      if (strlen(n->name) != nl || strncmp(n->name, node, nl)) continue;
      for (size_t a = 0; a < n->n_attrs; a++)
        if (strlen(n->attrs[a].name) == al && !strncmp(n->attrs[a].name, attr + 1, al)) found = n->attrs[a].g;
    }
    g = found;
    p = next;
  }
  return g;
}

static void compare_with_ort(const char *graph, const char *mode) {
  char in[2048], out[256], ref[2048], what[128];
  snprintf(in, sizeof in, "%s/marian-tiny/%s.onnx", dirs.fixtures, graph);
  snprintf(out, sizeof out, "%s/%s.%s.onnx", dirs.tmp, graph, mode);
  snprintf(ref, sizeof ref, "%s/%s.%s.json", dirs.data, graph, mode);
  snprintf(what, sizeof what, "%s %s", graph, mode);
  tolk_quantize_summary s = {0};
  tolk_model *m = quantize_load(what, in, out, mode_params(mode), &s);
  CHECK_MSG(s.quantized > 0 && s.bytes_after < s.bytes_before / 2, "%s: %zu quantized, %llu -> %llu bytes", what,
            s.quantized, (unsigned long long)s.bytes_before, (unsigned long long)s.bytes_after);
  cJSON *j = m ? read_json(ref) : NULL;
  if (!j) {
    tolk_model_free(m);
    return;
  }
  const struct ir_graph *main_graph = tolk_model_ir(m)->graph;
  const cJSON *counts = cJSON_GetObjectItem(j, "op_counts_after"), *c;
  cJSON_ArrayForEach(c, counts) {
    const struct ir_graph *g = graph_at(main_graph, c->string);
    CHECK_MSG(g != NULL, "%s: no graph %s", what, c->string);
    char w[300];
    snprintf(w, sizeof w, "%s %s", what, c->string);
    if (g) check_pattern(w, g, cJSON_GetObjectItem(cJSON_GetObjectItem(j, "pattern"), c->string), c);
  }
  const cJSON *init;
  cJSON_ArrayForEach(init, cJSON_GetObjectItem(j, "initializers")) {
    char path[512];
    snprintf(path, sizeof path, "%s", init->string);
    char *colon = strrchr(path, ':');
    /* Names hold ':' too ("onnx::MatMul_288"): the path is before the first. */
    colon = strchr(path, ':');
    *colon = '\0';
    const struct ir_graph *g = graph_at(main_graph, path);
    if (g) check_initializer(what, g, colon + 1, init);
  }
  tolk_model_free(m);
  cJSON_Delete(j);
}

/* ------------------------------------------------------------ running */

static size_t count_inputs(const char *set) {
  size_t n = 0;
  char p[2400];
  for (;; n++) {
    snprintf(p, sizeof p, "%s/input_%zu.pb", set, n);
    if (access(p, R_OK)) return n;
  }
}

/* Runs both models on one test-data set; every output must agree. */
static void run_pair(const char *a_path, const char *b_path, const char *set) {
  tolk_session *a = NULL, *b = NULL;
  tolk_error err;
  tolk_session_params sp = tolk_session_default_params();
  sp.threads = 1;
  CHECK_MSG(!tolk_session_create_from_file(a_path, sp, &a, &err), "%s", err.message);
  CHECK_MSG(!tolk_session_create_from_file(b_path, sp, &b, &err), "%s", err.message);
  size_t n = count_inputs(set), n_out = a ? tolk_session_output_count(a) : 0;
  tolk_tensor *in[32] = {0}, *oa[32] = {0}, *ob[32] = {0};
  const char *names[32];
  for (size_t i = 0; a && b && i < n && i < 32; i++) {
    char p[2400];
    snprintf(p, sizeof p, "%s/input_%zu.pb", set, i);
    CHECK_MSG(!tolk_tensor_load_pb(p, &in[i], &err), "%s", err.message);
    /* input_K.pb is the K-th declared input, initializer-free. */
    names[i] = tolk_session_input(a, i)->name;
  }
  if (a && b && n_out <= 32 && !tolk_session_run(a, n, names, (const tolk_tensor *const *)in, n_out, NULL, oa, NULL, &err) &&
      !tolk_session_run(b, n, names, (const tolk_tensor *const *)in, n_out, NULL, ob, NULL, &err)) {
    for (size_t i = 0; i < n_out; i++) {
      double worst = 0;
      const float *x = tolk_tensor_data(oa[i]), *y = tolk_tensor_data(ob[i]);
      CHECK(tolk_tensor_numel(oa[i]) == tolk_tensor_numel(ob[i]));
      for (int64_t k = 0; k < tolk_tensor_numel(oa[i]) && k < tolk_tensor_numel(ob[i]); k++)
        worst = fmax(worst, fabs((double)x[k] - (double)y[k]));
      CHECK_MSG(worst <= 1e-5, "%s output %zu: max abs difference %g", set, i, worst);
    }
  } else {
    CHECK_MSG(0, "%s: %s", set, err.message);
  }
  for (size_t i = 0; i < 32; i++) tolk_tensor_free(in[i]), tolk_tensor_free(oa[i]), tolk_tensor_free(ob[i]);
  tolk_session_free(a);
  tolk_session_free(b);
}

static void run_against_fixture(const char *graph) {
  char ours[256], ort[2048], golden[2048];
  snprintf(ours, sizeof ours, "%s/%s.per_channel_reduce_range.onnx", dirs.tmp, graph);
  snprintf(ort, sizeof ort, "%s/marian-tiny/%s_quantized.onnx", dirs.fixtures, graph);
  for (int s = 0;; s++) {
    snprintf(golden, sizeof golden, "%s/golden/marian-tiny/%s/test_data_set_%d", dirs.fixtures, graph, s);
    if (access(golden, R_OK)) {
      CHECK_MSG(s > 0, "no golden inputs for %s", graph);
      break;
    }
    run_pair(ours, ort, golden);
  }
}

int main(void) {
  qtest_dirs_init(&dirs, "", "tolk-quantize");
  for (size_t g = 0; g < 4; g++)
    for (size_t m = 0; m < 4; m++) compare_with_ort(graphs[g], modes[m]);
  for (size_t g = 0; g < 4; g++) run_against_fixture(graphs[g]);
  qtest_dirs_cleanup(&dirs);
  return tu_finish("test_onnx_quantize");
}
