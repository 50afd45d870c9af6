/*
 * quantize_ref.h — what the tests holding tolk_model_quantize to ONNX
 * Runtime's references (tests/data/quantize/, written by
 * tools/ort_quantize_reference.py and tools/ort_quantize_static_reference.py)
 * share: a graph's node pattern and op counts against the reference's, an
 * initializer against its recorded dtype, dims, values and sha256, and the
 * JSON reader.
 */
#ifndef TOLK_TESTS_QUANTIZE_REF_H
#define TOLK_TESTS_QUANTIZE_REF_H

#include <cjson/cJSON.h>
#include <string.h>

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

#endif /* TOLK_TESTS_QUANTIZE_REF_H */
