/*
 * test_exec_optimize.c — the session option of tolk optimize: a session
 * created at opt level ALL (or EXTENDED) on marian-tiny's encoder and
 * decoders compiles the fused graph (QuickGelu, SkipLayerNormalization,
 * MultiHeadAttention with and without a past, fewer
 * kernels run), the Q/K/V projection biases in MultiHeadAttention's bias
 * input with no bias Add left before it, every present.* output of the
 * decoders written by a MultiHeadAttention (present_key/present_value:
 * with a past, the cache; without, the new keys and values), gives the
 * outputs of the BASIC session within 1e-5 on the fixture's inputs, and
 * leaves the borrowed model as it was (the rewrite works on a private
 * copy), so a BASIC session on it afterwards still runs
 * the graph as written.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec/exec.h"
#include "onnx/onnx.h"
#include "testutil.h"
#include "tolk.h"

static size_t count_op(const tolk_session *s, const char *op) {
  size_t n = 0;
  const struct xgraph *xg = s->graphs[0];
  for (uint32_t k = 0; k < xg->n_nodes; k++) n += !strcmp(xg->nodes[k].node->op_type, op);
  return n;
}

/* MultiHeadAttention nodes with a bias input, and Adds feeding their
 * query, key or value (a projection bias left outside) into *adds. */
static size_t mha_with_bias(const tolk_session *s, size_t *adds) {
  size_t n = 0;
  const struct xgraph *xg = s->graphs[0];
  *adds = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    const struct ir_node *nd = xg->nodes[k].node;
    if (strcmp(nd->op_type, "MultiHeadAttention")) continue;
    n += nd->n_inputs > 3 && nd->inputs[3];
    for (size_t i = 0; i < 3 && i < nd->n_inputs; i++) {
      const struct ir_node *p = nd->inputs[i] ? nd->inputs[i]->producer : NULL;
      *adds += p && !strcmp(p->op_type, "Add");
    }
  }
  return n;
}

static bool is_present(const struct ir_value *v) {
  return v && !strncmp(v->name, "present.", 8);
}

/* The session's present.* outputs; *by_mha receives how many of them a
 * MultiHeadAttention writes. */
static size_t presents(const tolk_session *s, size_t *by_mha) {
  size_t n = 0;
  const struct xgraph *xg = s->graphs[0];
  for (size_t i = 0; i < tolk_session_output_count(s); i++)
    n += !strncmp(tolk_session_output(s, i)->name, "present.", 8);
  *by_mha = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    const struct ir_node *nd = xg->nodes[k].node;
    for (size_t i = 1; !strcmp(nd->op_type, "MultiHeadAttention") && i < 3 && i < nd->n_outputs; i++)
      *by_mha += is_present(nd->outputs[i]) && (nd->outputs[i]->flags & IR_VALUE_GRAPH_OUTPUT);
  }
  return n;
}

static size_t model_domain_nodes(const tolk_model *m, const char *domain) {
  const struct ir_graph *g = tolk_model_ir((tolk_model *)m)->graph;
  size_t n = 0;
  for (size_t k = 0; k < g->n_nodes; k++) n += !strcmp(g->nodes[k]->domain, domain);
  return n;
}

/* Runs s on DIR/input_N.pb; *out[0..n) receive its outputs. */
static bool run(tolk_session *s, const char *dir, tolk_tensor **out, size_t n_out, uint32_t *nodes) {
  size_t n_in = tolk_session_input_count(s);
  const char *names[16];
  tolk_tensor *in[16] = {0};
  tolk_error err;
  bool ok = n_in <= 16;
  for (size_t i = 0; ok && i < n_in; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
    names[i] = tolk_session_input(s, i)->name;
    ok = tolk_tensor_load_pb(path, &in[i], &err) == TOLK_OK;
    CHECK_MSG(ok, "%s", err.message);
  }
  tolk_run_stats st;
  if (ok) {
    ok = tolk_session_run(s, n_in, names, (const tolk_tensor *const *)in, n_out, NULL, out, &st, &err) == TOLK_OK;
    CHECK_MSG(ok, "%s", err.message);
    *nodes = st.nodes_run;
  }
  for (size_t i = 0; i < n_in && i < 16; i++) tolk_tensor_free(in[i]);
  return ok;
}

static double max_diff(const tolk_tensor *a, const tolk_tensor *b) {
  if (tolk_tensor_dtype(a) != TOLK_FLOAT || tolk_tensor_numel(a) != tolk_tensor_numel(b)) return INFINITY;
  const float *x = tolk_tensor_data(a), *y = tolk_tensor_data(b);
  double d = 0;
  for (int64_t i = 0; i < tolk_tensor_numel(a); i++) d = fmax(d, fabs((double)x[i] - y[i]));
  return d;
}

static void graph(const char *name, tolk_opt_level level, size_t want_mha, size_t want_skip, size_t want_adds) {
  char path[4096], data[4096];
  snprintf(path, sizeof path, "%s/marian-tiny/%s.onnx", tu_fixtures(), name);
  snprintf(data, sizeof data, "%s/golden/marian-tiny/%s/test_data_set_0", tu_fixtures(), name);
  tolk_model *m = NULL;
  tolk_error err;
  CHECK_MSG(tolk_model_load(path, tolk_model_default_params(), &m, &err) == TOLK_OK, "%s", err.message);
  if (!m) return;
  tolk_session_params p = tolk_session_default_params();
  p.opt_level = level;
  tolk_session *fused = NULL, *plain = NULL;
  CHECK_MSG(tolk_session_create(m, p, &fused, &err) == TOLK_OK, "%s: %s", name, err.message);
  /* The borrowed model is untouched: no fused node in it. */
  CHECK(model_domain_nodes(m, "com.microsoft") == 0);
  p.opt_level = TOLK_OPT_BASIC;
  CHECK_MSG(tolk_session_create(m, p, &plain, &err) == TOLK_OK, "%s: %s", name, err.message);
  if (fused && plain) {
    CHECK(count_op(fused, "QuickGelu") == 2 && count_op(plain, "QuickGelu") == 0);
    CHECK_MSG(count_op(fused, "MultiHeadAttention") == want_mha, "%s: %zu MultiHeadAttention, wanted %zu", name,
              count_op(fused, "MultiHeadAttention"), want_mha);
    CHECK_MSG(count_op(fused, "SkipLayerNormalization") == want_skip && count_op(fused, "LayerNormalization") == 0,
              "%s: %zu SkipLayerNormalization, wanted %zu", name, count_op(fused, "SkipLayerNormalization"),
              want_skip);
    size_t adds, biased = mha_with_bias(fused, &adds);
    CHECK_MSG(biased == want_mha && adds == want_adds,
              "%s: %zu MultiHeadAttention with a bias input of %zu, %zu bias Adds before them, wanted %zu", name,
              biased, want_mha, adds, want_adds);
    size_t by_mha, n_present = presents(fused, &by_mha);
    CHECK_MSG(by_mha == (level == TOLK_OPT_ALL ? n_present : 0),
              "%s: %zu of %zu present outputs from MultiHeadAttention", name, by_mha, n_present);
    tolk_tensor *a[16] = {0}, *b[16] = {0};
    size_t n_out = tolk_session_output_count(plain);
    uint32_t na = 0, nb = 0;
    CHECK(n_out <= 16);
    if (n_out <= 16 && run(fused, data, a, n_out, &na) && run(plain, data, b, n_out, &nb)) {
      CHECK_MSG(na < nb, "%s: %u kernels run fused, %u plain", name, na, nb);
      for (size_t i = 0; i < n_out; i++) {
        double d = max_diff(a[i], b[i]);
        CHECK_MSG(d <= 1e-5, "%s output %zu: max abs difference %g", name, i, d);
      }
    }
    for (size_t i = 0; i < 16; i++) {
      tolk_tensor_free(a[i]);
      tolk_tensor_free(b[i]);
    }
  }
  tolk_session_free(fused);
  tolk_session_free(plain);
  tolk_model_free(m);
}

/* A session keeping its key/value cache in place at ALL: the cache's
 * Concat and its readers stay as exported for kv.c (4 pairs in place, as
 * at BASIC), while the cross-attention (the encoder's keys) still fuses. */
static void kv_in_place(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/marian-tiny/decoder_with_past_model.onnx", tu_fixtures());
  tolk_session_params p = tolk_session_default_params();
  p.opt_level = TOLK_OPT_ALL;
  p.kv_cache = 1;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK_MSG(tolk_session_create_from_file(path, p, &s, &err) == TOLK_OK, "%s", err.message);
  if (!s) return;
  CHECK_MSG(tolk_session_kv_count(s) == 4, "%zu cache pairs in place", tolk_session_kv_count(s));
  CHECK_MSG(count_op(s, "MultiHeadAttention") == 2 && count_op(s, "SkipLayerNormalization") == 6,
            "%zu MultiHeadAttention, %zu SkipLayerNormalization", count_op(s, "MultiHeadAttention"),
            count_op(s, "SkipLayerNormalization"));
  tolk_session_free(s);
}

int main(void) {
  kv_in_place();
  graph("encoder_model", TOLK_OPT_ALL, 2, 4, 0);
  /* Self- and cross-attention; with a past, the self-attention takes
   * past_key/past_value (its new K and V biased inside) and the
   * cross-attention the encoder's 4-D keys and values (Q's bias only).
   * Without a past, each takes the 3-D K and V and all three biases and
   * writes the present outputs. */
  graph("decoder_model", TOLK_OPT_ALL, 4, 6, 0);
  graph("decoder_with_past_model", TOLK_OPT_ALL, 4, 6, 0);
  graph("encoder_model", TOLK_OPT_EXTENDED, 0, 4, 0);
  /* From a file: the session owns the model and rewrites it in place. */
  char path[4096];
  snprintf(path, sizeof path, "%s/marian-tiny/encoder_model.onnx", tu_fixtures());
  tolk_session_params p = tolk_session_default_params();
  p.opt_level = TOLK_OPT_ALL;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK_MSG(tolk_session_create_from_file(path, p, &s, &err) == TOLK_OK, "%s", err.message);
  CHECK(s && count_op(s, "MultiHeadAttention") == 2);
  tolk_session_free(s);
  return tu_finish("test_exec_optimize");
}
