/*
 * test_exec_gather_packed.c — a Gather of rows of a constant table that a
 * MatMul packed whole as its transposed B (a tied embedding and its LM head)
 * reads the rows from the packed copy (tolk_gather_packed_def,
 * src/exec/session.c):
 *
 *   emb = Gather(W, ids)        logits = MatMul(x, Transpose(W))   (or Gemm transB)
 *
 * Every row of W comes out bit for bit, negative indices wrap, an index out
 * of range is refused naming it; the products are unchanged. Where the head
 * is not held as floats (bf16_weights, int8_lm_head), where no product packs
 * the table, or where the Gather is on another axis, the Gather stays as
 * written and still gives the table's rows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec_graph.h"
#include "testutil.h"
#include "tolk.h"

enum { V = 133, D = 37, M = 3 }; /* V not a multiple of any panel width */

static float w[V * D];

/* form: 0 MatMul(x, Transpose(W)), 1 Gemm(x, W, transB = 1), 2 no product,
 * 3 the Gather on axis 1 (of W's transpose as a second initializer). */
static struct ir_model *model(int form) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  static const char *const sym[] = {"n", NULL};
  tb_input(m, g, "ids", TOLK_INT64, 1, (int64_t[]){-1}, sym);
  tb_input(m, g, "x", TOLK_FLOAT, 2, (int64_t[]){M, D}, NULL);
  tb_init(m, g, "W", TOLK_FLOAT, 2, (int64_t[]){V, D}, w, sizeof w);
  if (form == 3) {
    static float wt[D * V];
    for (int i = 0; i < V; i++)
      for (int j = 0; j < D; j++) wt[j * V + i] = w[i * D + j];
    tb_init(m, g, "Wt0", TOLK_FLOAT, 2, (int64_t[]){D, V}, wt, sizeof wt);
    tb_attr_int(tb_node(m, g, "Gather", "", "embed", "Wt0,ids", "emb"), "axis", 1);
  } else {
    tb_node(m, g, "Gather", "", "embed", "W,ids", "emb");
  }
  if (form == 0) {
    tb_node(m, g, "Transpose", "", "tie", "W", "Wt");
    tb_node(m, g, "MatMul", "", "head", "x,Wt", "logits");
  } else if (form == 1) {
    tb_attr_int(tb_node(m, g, "Gemm", "", "head", "x,W", "logits"), "transB", 1);
  } else {
    tb_node(m, g, "Identity", "", "keep", "x", "logits");
  }
  tb_output(g, "emb");
  tb_output(g, "logits");
  return m;
}

/* kind: 0 float, 1 bf16_weights, 2 int8_lm_head. */
static tolk_session *session(const struct ir_model *m, int kind) {
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  p.bf16_weights = kind == 1;
  p.int8_lm_head = kind == 2;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK_MSG(exec_session_create_ir(m, &p, NULL, &s, &err) == TOLK_OK, "%s", err.message);
  return s;
}

static int rewired(const tolk_session *s) {
  int n = 0;
  for (uint32_t k = 0; k < s->graphs[0]->n_nodes; k++) n += s->graphs[0]->nodes[k].def == &tolk_gather_packed_def;
  return n;
}

/* Runs ids[0..n); the two outputs, or the status with err. */
static tolk_status run(tolk_session *s, const int64_t *ids, int64_t n, const float *x, tolk_tensor **emb,
                       tolk_tensor **logits, tolk_error *err) {
  tolk_tensor *ti = NULL, *tx = tb_tensor(2, (int64_t[]){M, D}, x);
  tolk_tensor_create(TOLK_INT64, 1, (int64_t[]){n}, ids, (size_t)n * sizeof *ids, &ti, NULL);
  const char *in_names[2] = {"ids", "x"}, *out_names[2] = {"emb", "logits"};
  const tolk_tensor *in[2] = {ti, tx};
  tolk_tensor *out[2] = {NULL, NULL};
  tolk_status st = tolk_session_run(s, 2, in_names, in, 2, out_names, out, NULL, err);
  tolk_tensor_free(ti);
  tolk_tensor_free(tx);
  *emb = out[0];
  *logits = out[1];
  return st;
}

static void check_form(int form, int kind) {
  struct ir_model *m = model(form);
  tolk_session *s = session(m, kind);
  if (!s) {
    tb_free(m);
    return;
  }
  /* int8_lm_head takes MatMuls only: the Gemm keeps its float copy. */
  int want = (form == 0 && kind == 0) || (form == 1 && kind != 1);
  CHECK_MSG(rewired(s) == want, "form %d, kind %d: %d Gathers read the packed copy, want %d", form, kind,
            rewired(s), want);
  /* Every row, the last first, and two negative indices that wrap. */
  int64_t ids[V + 2];
  for (int i = 0; i < V; i++) ids[i] = V - 1 - i;
  ids[V] = -1, ids[V + 1] = -V;
  float x[M * D];
  for (int i = 0; i < M * D; i++) x[i] = (float)(tu_unit() - 0.5);
  tolk_tensor *emb = NULL, *logits = NULL;
  tolk_error err;
  CHECK_MSG(run(s, ids, V + 2, x, &emb, &logits, &err) == TOLK_OK, "%s", err.message);
  if (emb) {
    const float *e = tolk_tensor_data(emb);
    int bad = 0;
    const int64_t rows = form == 3 ? D : V + 2, cols = form == 3 ? V + 2 : D; /* axis 1: [D, n] */
    for (int i = 0; i < V + 2; i++) {
      int64_t r = ids[i] < 0 ? ids[i] + V : ids[i];
      for (int j = 0; j < D; j++) {
        float got = form == 3 ? e[j * (V + 2) + i] : e[i * D + j];
        bad += memcmp(&got, &w[r * D + j], sizeof got) != 0;
      }
    }
    CHECK_MSG(tolk_tensor_rank(emb) == 2 && tolk_tensor_dims(emb)[0] == rows && tolk_tensor_dims(emb)[1] == cols && !bad,
              "form %d, kind %d: %d elements differ from the table", form, kind, bad);
  }
  if (logits && (form == 0 || form == 1) && kind == 0) { /* the product, as an fp32 GEMM gives it */
    const float *l = tolk_tensor_data(logits);
    double worst = 0;
    for (int i = 0; i < M; i++)
      for (int j = 0; j < V; j++) {
        double ref = 0;
        for (int k = 0; k < D; k++) ref += (double)x[i * D + k] * w[j * D + k];
        double d = l[i * V + j] - ref;
        worst = d < 0 ? -d > worst ? -d : worst : d > worst ? d : worst;
      }
    CHECK_MSG(worst < 1e-5, "form %d: logits off by %g", form, worst);
  }
  tolk_tensor_free(emb);
  tolk_tensor_free(logits);
  /* Out of range: refused, the index and its position named. */
  int64_t far[2] = {3, V};
  CHECK(run(s, far, 2, x, &emb, &logits, &err) == TOLK_ERR_INVALID_ARGUMENT && !emb);
  CHECK_MSG(strstr(err.message, "index 133 at flat position 1"), "%s", err.message);
  tolk_tensor_free(emb);
  tolk_tensor_free(logits);
  tolk_session_free(s);
  tb_free(m);
}

int main(void) {
  for (int i = 0; i < V * D; i++) w[i] = (float)(tu_unit() - 0.5) * (i % 7 == 3 ? 1e-30f : 1.0f);
  for (int form = 0; form < 4; form++)
    for (int kind = 0; kind < 3; kind++) check_form(form, kind);
  return tu_finish("exec_gather_packed");
}
