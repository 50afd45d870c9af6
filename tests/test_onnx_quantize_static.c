/*
 * test_onnx_quantize_static.c — static quantization (tolk_calibration and
 * tolk_model_quantize with TOLK_QUANTIZE_QDQ and TOLK_QUANTIZE_QOPERATOR)
 * against ONNX Runtime's quantize_static (QDQ and QOperator, MinMax,
 * MatMul, QInt8), recorded by tools/ort_quantize_static_reference.py in
 * tests/data/quantize/static/<graph>.<format>.<mode>.json, on marian-tiny's
 * encoder, decoder and decoder with past, per tensor and per channel, each
 * also with reduce_range (weights in [-64, 64], activations full range),
 * calibrated on the same golden input sets ORT was:
 *  - every node ORT added or rewired is in tolk's output (op, name, inputs,
 *    outputs; a DequantizeLinear's axis), and the op counts are ORT's;
 *  - every weight's int8 bytes, scale and zero point are ORT's exactly;
 *    every activation's zero point is ORT's and its scale within 1e-5 of it
 *    (relative): tolk's float graph computes the ranges, ORT's its own, and
 *    the two differ in the last bits of some intermediate values;
 *  - tolk's quantized graph, run in tolk (its QuantizeLinear,
 *    DequantizeLinear and QLinearMatMul kernels), is as far from the fp32
 *    golden outputs as ORT's quantized graph run in ORT (within 2 %), and for
 *    the encoder every token's hidden state within 1e-4 of ORT's int8 one but
 *    for at most one token a set: a value on a QuantizeLinear's rounding tie
 *    that tolk's float and ORT's fused int8 kernels put a step apart, which
 *    the token's LayerNorm spreads over its row (reduce_range per channel,
 *    set 1: one token of 48, off by 0.03; every other mode, none).
 * The histogram methods against the ranges ORT's own calibrator gives on one
 * golden set (<graph>.ranges.<method>.json: Entropy with 128 and 512 bins,
 * Percentile at 99.999 and 99.9): every tensor's range within one int8
 * quantization step of ORT's — the float values each side computes differ
 * in their last bits, which can move a value across a bin edge or reorder
 * two windows whose divergences tie — and nine in ten the same to 1e-5 of
 * the range.
 * Then the refusals: mismatched samples (a name that is no input, twice, one
 * missing, another dtype or shape, nothing but empty tensors), no samples, random
 * token ids, QDQ without a calibration — each with its status, a message
 * naming what, and no output file.
 */
#include <math.h>
#include <unistd.h>

#include "quantize_ref.h"

static const char *graphs[] = {"encoder_model", "decoder_model", "decoder_with_past_model"};
static const char *modes[] = {"default", "per_channel", "reduce_range", "per_channel_reduce_range"};
static const char *formats[] = {"qdq", "qoperator"};
static struct qtest_dirs dirs;

static tolk_calibration *calibrate(const char *graph) {
  char model[2048], set[2400];
  snprintf(model, sizeof model, "%s/marian-tiny/%s.onnx", dirs.fixtures, graph);
  tolk_calibration *cal = NULL;
  tolk_error err;
  CHECK_MSG(!tolk_calibration_create(model, tolk_calibration_default_params(), &cal, &err), "%s: %s", graph,
            err.message);
  for (int s = 0; cal; s++) {
    snprintf(set, sizeof set, "%s/%s/test_data_set_%d", dirs.golden, graph, s);
    if (access(set, R_OK)) break;
    CHECK_MSG(!add_set(cal, set, &err), "%s: %s", set, err.message);
  }
  CHECK(tolk_calibration_samples(cal) == 2);
  CHECK_MSG(!tolk_calibration_finish(cal, &err), "%s: %s", graph, err.message);
  return cal;
}

/* A DequantizeLinear's axis is ORT's (per-channel weights: 1). */
static void check_axes(const char *what, const struct ir_graph *g, const cJSON *nodes) {
  const cJSON *want;
  cJSON_ArrayForEach(want, nodes) {
    const cJSON *axis = cJSON_GetObjectItem(want, "axis");
    for (size_t i = 0; i < g->n_nodes; i++) {
      if (!node_matches(g->nodes[i], want)) continue;
      const struct ir_attr *a = ir_node_attr(g->nodes[i], "axis");
      CHECK_MSG(axis ? a && a->i == (int64_t)axis->valuedouble : !a, "%s: %s's axis", what, g->nodes[i]->name);
    }
  }
}

/* tolk's quantized graph on each golden set, in tolk, against the golden
 * fp32 output and ORT's quantized graph's. */
static void check_runs(const char *what, const char *path, const char *graph, const cJSON *runs) {
  tolk_session *s = NULL;
  tolk_error err;
  tolk_session_params sp = tolk_session_default_params();
  sp.threads = 1;
  CHECK_MSG(!tolk_session_create_from_file(path, sp, &s, &err), "%s: %s", what, err.message);
  for (int k = 0; s && k < cJSON_GetArraySize(runs); k++) {
    const cJSON *r = cJSON_GetArrayItem(runs, k), *values = cJSON_GetObjectItem(r, "values");
    char set[2400], p[2500];
    snprintf(set, sizeof set, "%s/%s/test_data_set_%d", dirs.golden, graph, k);
    tolk_tensor *in[16] = {0}, *out = NULL;
    const char *names[16], *out_name = cJSON_GetObjectItem(r, "output")->valuestring;
    size_t n = 0;
    for (; n < tolk_session_input_count(s) && n < 16; n++) {
      snprintf(p, sizeof p, "%s/input_%zu.pb", set, n);
      in[n] = load_pb(p);
      names[n] = tolk_session_input(s, n)->name;
    }
    snprintf(p, sizeof p, "%s/output_0.pb", set);
    tolk_tensor *want = load_pb(p);
    if (!tolk_session_run(s, n, names, (const tolk_tensor *const *)in, 1, &out_name, &out, NULL, &err) && want) {
      const float *x = tolk_tensor_data(out), *y = tolk_tensor_data(want);
      double vs_fp32 = 0, ort_err = cJSON_GetObjectItem(r, "max_abs_vs_fp32")->valuedouble;
      int64_t width = tolk_tensor_dims(out)[tolk_tensor_rank(out) - 1], off_row = -1, rows_off = 0;
      CHECK(tolk_tensor_numel(out) == tolk_tensor_numel(want));
      for (int64_t i = 0; i < tolk_tensor_numel(out) && i < tolk_tensor_numel(want); i++) {
        vs_fp32 = fmax(vs_fp32, fabs((double)x[i] - y[i]));
        bool off = values && fabs((double)x[i] - cJSON_GetArrayItem(values, (int)i)->valuedouble) > 1e-4;
        if (off && i / width != off_row) off_row = i / width, rows_off++;
      }
      CHECK_MSG(vs_fp32 <= 1.02 * ort_err, "%s set %d: max |int8 - fp32| %.4g, ORT's %.4g", what, k, vs_fp32, ort_err);
      CHECK_MSG(rows_off <= 1, "%s set %d: %lld tokens' hidden states differ from ORT's int8 ones by more than 1e-4",
                what, k, (long long)rows_off);
    } else {
      CHECK_MSG(0, "%s set %d: %s", what, k, err.message);
    }
    for (size_t i = 0; i < n; i++) tolk_tensor_free(in[i]);
    tolk_tensor_free(out);
    tolk_tensor_free(want);
  }
  tolk_session_free(s);
}

static void compare_with_ort(const char *graph, const char *fmt, const char *mode, const tolk_calibration *cal) {
  char in[2048], out[256], ref[2048], what[128];
  snprintf(in, sizeof in, "%s/marian-tiny/%s.onnx", dirs.fixtures, graph);
  snprintf(out, sizeof out, "%s/%s.%s.%s.onnx", dirs.tmp, graph, fmt, mode);
  snprintf(ref, sizeof ref, "%s/%s.%s.%s.json", dirs.data, graph, fmt, mode);
  snprintf(what, sizeof what, "%s %s %s", graph, fmt, mode);
  tolk_quantize_params p = tolk_quantize_default_params();
  p.format = !strcmp(fmt, "qdq") ? TOLK_QUANTIZE_QDQ : TOLK_QUANTIZE_QOPERATOR;
  p.calibration = cal;
  p.per_channel = strstr(mode, "per_channel") != NULL;
  p.reduce_range = strstr(mode, "reduce_range") != NULL;
  tolk_quantize_summary s = {0};
  tolk_model *m = quantize_load(what, in, out, p, &s);
  CHECK_MSG(s.quantized > 0 && !s.skipped, "%s: %zu quantized, %zu skipped", what, s.quantized, s.skipped);
  cJSON *j = m ? read_json(ref) : NULL;
  if (!j) {
    tolk_model_free(m);
    return;
  }
  const struct ir_graph *g = tolk_model_ir(m)->graph;
  const cJSON *pattern = cJSON_GetObjectItem(j, "pattern"), *inits = cJSON_GetObjectItem(j, "initializers"), *init;
  check_pattern(what, g, pattern, cJSON_GetObjectItem(j, "op_counts_after"));
  check_axes(what, g, pattern);
  size_t n_ours = 0;
  for (size_t i = 0; i < g->n_initializers; i++) {
    const char *nm = g->initializers[i]->name;
    size_t len = strlen(nm);
    n_ours += (len > 10 && !strcmp(nm + len - 10, "_quantized")) || (len > 6 && !strcmp(nm + len - 6, "_scale")) ||
              (len > 11 && !strcmp(nm + len - 11, "_zero_point"));
  }
  CHECK_MSG(n_ours == (size_t)cJSON_GetArraySize(inits), "%s: %zu quantization initializers, ORT has %d", what, n_ours,
            cJSON_GetArraySize(inits));
  cJSON_ArrayForEach(init, inits) {
    if (is_weight_part(inits, init->string)) check_initializer(what, g, init->string, init);
    else check_activation(what, g, init->string, init);
  }
  tolk_model_free(m);
  check_runs(what, out, graph, cJSON_GetObjectItem(j, "runs"));
  cJSON_Delete(j);
  unlink(out);
}

/* ------------------------------------------------------------ histogram methods */

static void check_ranges(const char *graph, const char *name, tolk_calibration_params cp) {
  char model[2048], set[2400], ref[2048], what[160];
  snprintf(model, sizeof model, "%s/marian-tiny/%s.onnx", dirs.fixtures, graph);
  snprintf(set, sizeof set, "%s/%s/test_data_set_1", dirs.golden, graph);
  snprintf(ref, sizeof ref, "%s/%s.ranges.%s.json", dirs.data, graph, name);
  snprintf(what, sizeof what, "%s %s", graph, name);
  tolk_calibration *cal = NULL;
  tolk_error err;
  cJSON *j = read_json(ref);
  CHECK_MSG(!tolk_calibration_create(model, cp, &cal, &err), "%s: %s", what, err.message);
  if (!cal || !j || add_set(cal, set, &err) || tolk_calibration_finish(cal, &err)) {
    CHECK_MSG(0, "%s: %s", what, err.message);
    tolk_calibration_free(cal);
    cJSON_Delete(j);
    return;
  }
  const cJSON *r;
  int n = 0, same = 0;
  cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges")) {
    double olo = cJSON_GetArrayItem(r, 0)->valuedouble, ohi = cJSON_GetArrayItem(r, 1)->valuedouble;
    double step = (fmax(ohi, 0) - fmin(olo, 0)) / 255;
    float lo, hi;
    n++;
    if (!tolk_calibration_range(cal, r->string, &lo, &hi)) {
      CHECK_MSG(0, "%s: no range for %s", what, r->string);
      continue;
    }
    /* The same bin edge, up to the last bits of the float values. */
    same += fabs(lo - olo) <= 1e-5 * step * 255 && fabs(hi - ohi) <= 1e-5 * step * 255;
    CHECK_MSG(fabs(lo - olo) <= step && fabs(hi - ohi) <= step, "%s: %s: [%.9g, %.9g], ORT [%.9g, %.9g]", what,
              r->string, lo, hi, olo, ohi);
  }
  CHECK_MSG(n > 0 && same * 10 >= n * 9, "%s: %d of %d ranges the same as ORT's", what, same, n);
  printf("%s: %d of %d ranges the same as ORT's (to 1e-5), all within one quantization step\n", what, same, n);
  tolk_calibration_free(cal);
  cJSON_Delete(j);
}

static void check_histogram_methods(void) {
  static const char *names[] = {"entropy", "entropy_512", "percentile", "percentile_99.9"};
  for (size_t g = 0; g < 3; g++)
    for (size_t k = 0; k < 4; k++) {
      tolk_calibration_params cp = tolk_calibration_default_params();
      cp.method = k < 2 ? TOLK_CALIBRATE_ENTROPY : TOLK_CALIBRATE_PERCENTILE;
      cp.num_bins = k == 1 ? 512 : 0;
      cp.percentile = k == 3 ? 99.9 : 0;
      check_ranges(graphs[g], names[k], cp);
    }
}

/* ------------------------------------------------------------ refusals */

static void expect_fail(tolk_status st, tolk_status want, const tolk_error *err, const char *needle) {
  CHECK_MSG(st == want, "status %d, wanted %d (%s)", st, want, err->message);
  CHECK_MSG(strstr(err->message, needle) != NULL, "message '%s' lacks '%s'", err->message, needle);
}

static void check_refusals(void) {
  char model[2048], set[2400], p[2500];
  snprintf(model, sizeof model, "%s/marian-tiny/encoder_model.onnx", dirs.fixtures);
  snprintf(set, sizeof set, "%s/encoder_model/test_data_set_0", dirs.golden);
  tolk_calibration *cal = NULL;
  tolk_error err;
  CHECK_MSG(!tolk_calibration_create(model, tolk_calibration_default_params(), &cal, &err), "%s", err.message);
  if (!cal) return;
  snprintf(p, sizeof p, "%s/input_0.pb", set);
  tolk_tensor *ids = load_pb(p), *mask;
  snprintf(p, sizeof p, "%s/input_1.pb", set);
  mask = load_pb(p);
  int64_t dims[2] = {1, 10}, dims3[3] = {1, 1, 10}, empty[2] = {1, 0};
  int32_t ids32[10] = {0};
  int64_t none = 0;
  tolk_tensor *as32 = NULL, *rank3 = NULL, *zero = NULL;
  tolk_tensor_create(TOLK_INT32, 2, dims, ids32, sizeof ids32, &as32, &err);
  tolk_tensor_create(TOLK_INT64, 3, dims3, tolk_tensor_data(ids), 80, &rank3, &err);
  tolk_tensor_create(TOLK_INT64, 2, empty, &none, 0, &zero, &err);

  /* Nothing added yet: finishing and quantizing are refused, nothing written. */
  expect_fail(tolk_calibration_finish(cal, &err), TOLK_ERR_INVALID_ARGUMENT, &err, "no samples");
  char out[256];
  snprintf(out, sizeof out, "%s/refused.onnx", dirs.tmp);
  tolk_quantize_params qp = tolk_quantize_default_params();
  qp.format = TOLK_QUANTIZE_QDQ;
  expect_fail(tolk_model_quantize(model, out, qp, NULL, NULL, NULL, &err), TOLK_ERR_INVALID_ARGUMENT, &err,
              "needs a calibration");
  qp.calibration = cal;
  expect_fail(tolk_model_quantize(model, out, qp, NULL, NULL, NULL, &err), TOLK_ERR_INVALID_ARGUMENT, &err,
              "no samples");
  CHECK(access(out, F_OK) != 0);

  const char *good[] = {"input_ids", "attention_mask"}, *typo[] = {"input_idz", "attention_mask"},
             *twice[] = {"input_ids", "input_ids"};
  const tolk_tensor *pair[] = {ids, mask}, *one[] = {ids}, *t32[] = {as32, mask}, *t3[] = {rank3, mask},
                    *t0[] = {zero, zero};
  expect_fail(tolk_calibration_add(cal, 2, typo, pair, &err), TOLK_ERR_INVALID_ARGUMENT, &err,
              "'input_idz' is not an input of the graph");
  expect_fail(tolk_calibration_add(cal, 2, twice, pair, &err), TOLK_ERR_INVALID_ARGUMENT, &err,
              "input 'input_ids' is given twice");
  expect_fail(tolk_calibration_add(cal, 1, good, one, &err), TOLK_ERR_INVALID_ARGUMENT, &err,
              "input 'attention_mask' is missing");
  expect_fail(tolk_calibration_add(cal, 2, good, t32, &err), TOLK_ERR_TYPE, &err,
              "input 'input_ids' is int32; the graph declares int64");
  expect_fail(tolk_calibration_add(cal, 2, good, t3, &err), TOLK_ERR_SHAPE, &err, "input 'input_ids' has shape 1x1x10");
  expect_fail(tolk_calibration_add(cal, 2, good, t0, &err), TOLK_ERR_INVALID_ARGUMENT, &err, "every input is empty");
  CHECK(tolk_calibration_samples(cal) == 0);
  float lo, hi;
  CHECK(!tolk_calibration_range(cal, "/Add_output_0", &lo, &hi));

  /* Real ids pass the rule however often they are repeated; random ids over
   * the vocabulary do not. */
  for (int i = 0; i < 7; i++) CHECK_MSG(!tolk_calibration_add(cal, 2, good, pair, &err), "%s", err.message);
  /* A sample that also returns the graph's output (asked for twice): the
   * golden hidden states, both times. */
  const char *twice_out[] = {"last_hidden_state", "last_hidden_state"};
  tolk_tensor *outs[2] = {NULL, NULL}, *want = NULL;
  snprintf(p, sizeof p, "%s/output_0.pb", set);
  want = load_pb(p);
  CHECK_MSG(!tolk_calibration_add_run(cal, 2, good, pair, 2, twice_out, outs, &err), "%s", err.message);
  for (int k = 0; k < 2 && outs[k] && want; k++) {
    double worst = 0;
    CHECK(tolk_tensor_numel(outs[k]) == tolk_tensor_numel(want));
    for (int64_t i = 0; i < tolk_tensor_numel(want) && i < tolk_tensor_numel(outs[k]); i++)
      worst = fmax(worst, fabs((double)((const float *)tolk_tensor_data(outs[k]))[i] -
                               ((const float *)tolk_tensor_data(want))[i]));
    CHECK_MSG(worst <= 1e-4, "add_run output %d: max abs difference %g from the golden output", k, worst);
  }
  CHECK(outs[0] && outs[1] && outs[0] != outs[1]);
  tolk_tensor_free(outs[0]);
  tolk_tensor_free(outs[1]);
  tolk_tensor_free(want);
  CHECK(tolk_calibration_samples(cal) == 8);
  expect_fail(tolk_calibration_check(cal, &err), TOLK_ERR_INVALID_ARGUMENT, &err, "not finished");
  CHECK(!tolk_calibration_range(cal, "/Add_output_0", &lo, &hi));
  CHECK_MSG(!tolk_calibration_finish(cal, &err), "%s", err.message);
  CHECK_MSG(!tolk_calibration_check(cal, &err), "%s", err.message);
  CHECK(tolk_calibration_range(cal, "/Add_output_0", &lo, &hi) && lo < 0 && hi > 0);
  expect_fail(tolk_calibration_add(cal, 2, good, pair, &err), TOLK_ERR_INVALID_ARGUMENT, &err, "is finished");
  tolk_calibration_free(cal);
  CHECK_MSG(!tolk_calibration_create(model, tolk_calibration_default_params(), &cal, &err), "%s", err.message);
  int64_t rdims[2] = {1, 32}, rids[32], ones[32];
  uint64_t x = 88172645463325252ull;
  for (int s = 0; cal && s < 4; s++) {
    for (int i = 0; i < 32; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64: uniform over the vocabulary */
      rids[i] = (int64_t)(x % 4269);
      ones[i] = 1;
    }
    tolk_tensor *r = NULL, *o = NULL;
    tolk_tensor_create(TOLK_INT64, 2, rdims, rids, sizeof rids, &r, &err);
    tolk_tensor_create(TOLK_INT64, 2, rdims, ones, sizeof ones, &o, &err);
    const tolk_tensor *rp[] = {r, o};
    CHECK_MSG(!tolk_calibration_add(cal, 2, good, rp, &err), "%s", err.message);
    tolk_tensor_free(r);
    tolk_tensor_free(o);
  }
  expect_fail(tolk_calibration_finish(cal, &err), TOLK_ERR_INVALID_ARGUMENT, &err,
              "looks random: input 'input_ids' took 128 values");
  qp.calibration = cal;
  expect_fail(tolk_model_quantize(model, out, qp, NULL, NULL, NULL, &err), TOLK_ERR_INVALID_ARGUMENT, &err,
              "looks random");
  CHECK(access(out, F_OK) != 0);
  tolk_calibration_free(cal);
  tolk_tensor_free(ids);
  tolk_tensor_free(mask);
  tolk_tensor_free(as32);
  tolk_tensor_free(rank3);
  tolk_tensor_free(zero);
}

int main(void) {
  qtest_dirs_init(&dirs, "static", "tolk-qstatic");
  for (size_t g = 0; g < 3; g++) {
    tolk_calibration *cal = calibrate(graphs[g]);
    for (size_t f = 0; cal && f < 2; f++)
      for (size_t m = 0; m < 4; m++) compare_with_ort(graphs[g], formats[f], modes[m], cal);
    tolk_calibration_free(cal);
  }
  check_histogram_methods();
  check_refusals();
  qtest_dirs_cleanup(&dirs);
  return tu_finish("test_onnx_quantize_static");
}
