/*
 * quantize_ref.h — what the tests holding tolk_model_quantize to ONNX
 * Runtime's references (tests/data/quantize/, written by
 * tools/ort_quantize_reference.py and tools/ort_quantize_static_reference.py)
 * share: a graph's node pattern and op counts against the reference's, an
 * initializer against its recorded dtype, dims, values and sha256, an
 * activation's scale and zero point, the JSON reader, quantizing a graph
 * and loading the result, and the golden input sets as calibration samples.
 */
#ifndef TOLK_TESTS_QUANTIZE_REF_H
#define TOLK_TESTS_QUANTIZE_REF_H

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/sha256.h"
#include "onnx/onnx.h"
#include "testutil.h"

static inline bool node_matches(const struct ir_node *n, const cJSON *want) {
  const cJSON *in = cJSON_GetObjectItem(want, "inputs"), *out = cJSON_GetObjectItem(want, "outputs");
  if (strcmp(n->op_type, cJSON_GetObjectItem(want, "op")->valuestring) ||
      strcmp(n->name, cJSON_GetObjectItem(want, "name")->valuestring) ||
      (size_t)cJSON_GetArraySize(in) != n->n_inputs || (size_t)cJSON_GetArraySize(out) != n->n_outputs)
    return false;
  for (size_t i = 0; i < n->n_inputs; i++)
    if (!n->inputs[i] || strcmp(n->inputs[i]->name, cJSON_GetArrayItem(in, (int)i)->valuestring)) return false;
  for (size_t i = 0; i < n->n_outputs; i++)
    if (!n->outputs[i] || strcmp(n->outputs[i]->name, cJSON_GetArrayItem(out, (int)i)->valuestring)) return false;
  return true;
}

static inline void check_pattern(const char *what, const struct ir_graph *g, const cJSON *nodes, const cJSON *counts) {
  const cJSON *want;
  cJSON_ArrayForEach(want, nodes) {
    bool found = false;
    for (size_t i = 0; i < g->n_nodes && !found; i++) found = node_matches(g->nodes[i], want);
    /* The If itself changes only inside (its branches are checked). */
    CHECK_MSG(found || !strcmp(cJSON_GetObjectItem(want, "op")->valuestring, "If"), "%s: no node %s '%s'", what,
              cJSON_GetObjectItem(want, "op")->valuestring, cJSON_GetObjectItem(want, "name")->valuestring);
  }
  const cJSON *c;
  size_t total = 0;
  cJSON_ArrayForEach(c, counts) {
    size_t n = 0;
    for (size_t i = 0; i < g->n_nodes; i++) n += !strcmp(g->nodes[i]->op_type, c->string);
    CHECK_MSG(n == (size_t)c->valuedouble, "%s: %zu %s nodes, ORT has %g", what, n, c->string, c->valuedouble);
    total += (size_t)c->valuedouble;
  }
  CHECK_MSG(total == g->n_nodes, "%s: %zu nodes, ORT has %zu", what, g->n_nodes, total);
}

static inline void hex_sha256(const void *p, size_t n, char hex[65]) {
  struct sha256 s;
  uint8_t d[32];
  sha256_init(&s);
  sha256_update(&s, p, n);
  sha256_final(&s, d);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static inline void check_initializer(const char *what, const struct ir_graph *g, const char *name, const cJSON *want) {
  const struct ir_value *v = ir_name_map_get(g->names, name);
  const struct ir_tensor *t = v ? v->init : NULL;
  CHECK_MSG(t != NULL, "%s: no initializer %s", what, name);
  if (!t) return;
  const cJSON *dims = cJSON_GetObjectItem(want, "dims"), *values = cJSON_GetObjectItem(want, "values");
  const char *dtype = cJSON_GetObjectItem(want, "dtype")->valuestring;
  int32_t want_dtype = !strcmp(dtype, "FLOAT") ? TOLK_FLOAT : !strcmp(dtype, "INT8") ? TOLK_INT8 : TOLK_UINT8;
  CHECK_MSG(t->dtype == want_dtype && t->rank == cJSON_GetArraySize(dims), "%s: %s: dtype %d rank %d", what, name,
            t->dtype, t->rank);
  for (int i = 0; i < t->rank && i < cJSON_GetArraySize(dims); i++)
    CHECK_MSG(t->dims[i] == (int64_t)cJSON_GetArrayItem(dims, i)->valuedouble, "%s: %s: dim %d", what, name, i);
  for (int i = 0; values && i < cJSON_GetArraySize(values) && i < t->numel; i++) {
    /* Initializers may lie misaligned in the mapping (ir_tensor.misaligned). */
    float fv;
    if (t->dtype == TOLK_FLOAT) memcpy(&fv, (const uint8_t *)t->data + 4 * i, 4);
    double got = t->dtype == TOLK_FLOAT ? fv
                 : t->dtype == TOLK_INT8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
    CHECK_MSG(got == cJSON_GetArrayItem(values, i)->valuedouble, "%s: %s[%d] = %.9g, ORT %.9g", what, name, i, got,
              cJSON_GetArrayItem(values, i)->valuedouble);
  }
  char hex[65];
  hex_sha256(t->data, t->nbytes, hex);
  CHECK_MSG(!strcmp(hex, cJSON_GetObjectItem(want, "sha256")->valuestring), "%s: %s: the bytes differ from ORT's",
            what, name);
}

static inline cJSON *read_json(const char *path) {
  char *buf;
  size_t len;
  tolk_error err;
  if (tolk_read_file(path, 16 << 20, &buf, &len, &err)) {
    CHECK_MSG(0, "%s", err.message);
    return NULL;
  }
  cJSON *j = cJSON_ParseWithLength(buf, len);
  free(buf);
  CHECK_MSG(j != NULL, "%s: not JSON", path);
  return j;
}

/* Quantizes `in` into `out` with p and loads the result; NULL (the failure
 * reported under `what`) when either fails. *s receives the summary. */
static inline tolk_model *quantize_load(const char *what, const char *in, const char *out, tolk_quantize_params p,
                                        tolk_quantize_summary *s) {
  tolk_error err;
  tolk_model *m = NULL;
  if (tolk_model_quantize(in, out, p, NULL, NULL, s, &err) || tolk_model_load(out, tolk_model_default_params(), &m, &err)) {
    CHECK_MSG(0, "%s: %s", what, err.message);
    return NULL;
  }
  return m;
}

static inline tolk_tensor *load_pb(const char *path) {
  tolk_tensor *t = NULL;
  tolk_error err;
  CHECK_MSG(!tolk_tensor_load_pb(path, &t, &err), "%s", err.message);
  return t;
}

/* Adds the golden set `set` (input_K.pb: the K-th graph input) as a sample. */
static inline tolk_status add_set(tolk_calibration *cal, const char *set, tolk_error *err) {
  tolk_tensor *in[16] = {0};
  const char *names[16];
  size_t n = 0;
  for (; n < tolk_calibration_input_count(cal) && n < 16; n++) {
    char p[2600];
    snprintf(p, sizeof p, "%s/input_%zu.pb", set, n);
    in[n] = load_pb(p);
    names[n] = tolk_calibration_input(cal, n)->name;
  }
  tolk_status st = tolk_calibration_add(cal, n, names, (const tolk_tensor *const *)in, err);
  for (size_t i = 0; i < n; i++) tolk_tensor_free(in[i]);
  return st;
}

/* An activation's scale (within 1e-5 of ORT's, relative: tolk's float graph
 * computes the ranges, ORT's its own, and the two differ in the last bits
 * of some intermediate values) and zero point (equal). */
static inline void check_activation(const char *what, const struct ir_graph *g, const char *name, const cJSON *want) {
  const struct ir_value *v = ir_name_map_get(g->names, name);
  const struct ir_tensor *t = v ? v->init : NULL;
  CHECK_MSG(t && t->numel == 1, "%s: no scalar initializer %s", what, name);
  if (!t || t->numel != 1) return;
  double ort = cJSON_GetArrayItem(cJSON_GetObjectItem(want, "values"), 0)->valuedouble, got;
  if (t->dtype == TOLK_FLOAT) {
    float f;
    memcpy(&f, t->data, 4);
    got = f;
    CHECK_MSG(fabs(got - ort) <= 1e-5 * ort, "%s: %s = %.9g, ORT %.9g", what, name, got, ort);
  } else {
    got = ((const int8_t *)t->data)[0];
    CHECK_MSG(t->dtype == TOLK_INT8 && got == ort, "%s: %s = %g, ORT %g", what, name, got, ort);
  }
}

/* Whether the reference's initializer `name` belongs to a weight (W_quantized,
 * W_scale, W_zero_point) rather than to an activation. */
static inline bool is_weight_part(const cJSON *inits, const char *name) {
  char base[512];
  const char *end = strstr(name, "_scale") ? strstr(name, "_scale") : strstr(name, "_zero_point");
  if (!end) return true; /* W_quantized */
  snprintf(base, sizeof base, "%.*s_quantized", (int)(end - name), name);
  return cJSON_GetObjectItem(inits, base) != NULL;
}

/* Where a quantize test reads and writes: the fixtures ($TOLK_FIXTURES, else
 * tests/fixtures), marian-tiny's golden sets, the references under
 * tests/data/quantize/ (data), and a fresh temporary folder (tmp). */
struct qtest_dirs {
  char fixtures[1024], golden[1100], data[1100], tmp[64];
};

/* data_sub: the references' folder under tests/data/quantize ("" for it). */
static inline void qtest_dirs_init(struct qtest_dirs *d, const char *data_sub, const char *tmp_name) {
  const char *fix = getenv("TOLK_FIXTURES");
  snprintf(d->fixtures, sizeof d->fixtures, "%s", fix ? fix : "tests/fixtures");
  snprintf(d->golden, sizeof d->golden, "%s/golden/marian-tiny", d->fixtures);
  snprintf(d->data, sizeof d->data, "%s/../data/quantize%s%s", d->fixtures, *data_sub ? "/" : "", data_sub);
  snprintf(d->tmp, sizeof d->tmp, "/tmp/%s-XXXXXX", tmp_name);
  CHECK(mkdtemp(d->tmp) != NULL);
}

/* Removes the temporary folder with the files a test left in it. */
static inline void qtest_dirs_cleanup(const struct qtest_dirs *d) {
  DIR *dir = opendir(d->tmp);
  for (struct dirent *e; dir && (e = readdir(dir));) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d->tmp, e->d_name);
    if (e->d_name[0] != '.') unlink(p);
  }
  if (dir) closedir(dir);
  CHECK_MSG(rmdir(d->tmp) == 0, "%s stays", d->tmp);
}

#endif /* TOLK_TESTS_QUANTIZE_REF_H */
