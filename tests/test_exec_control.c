/*
 * test_exec_control.c — If, Loop and Scan through the executor, on
 * hand-built graphs: branches reading outer-scope values and producing empty
 * tensors, loops with carried values (including values passed straight
 * through from the previous iteration) and scan outputs, and the memory
 * plan across subgraphs.
 */
#include <stdio.h>
#include <string.h>

#include "exec_graph.h"
#include "testutil.h"

static tolk_status op_add(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, a->rank, a->dims);
  if (!y) return c->err->status;
  const float *pa = a->data, *pb = b->data;
  float *py = y->data;
  for (int64_t i = 0; i < a->numel; i++) py[i] = pa[i] + pb[i % b->numel];
  return TOLK_OK;
}

static tolk_status op_keep(struct op_ctx *c) { /* elements > 0 */
  const struct tensor *a = op_in(c, 0);
  const float *pa = a->data;
  int64_t n = 0;
  for (int64_t i = 0; i < a->numel; i++) n += pa[i] > 0;
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, 1, &n);
  if (!y) return c->err->status;
  float *py = y->data;
  n = 0;
  for (int64_t i = 0; i < a->numel; i++)
    if (pa[i] > 0) py[n++] = pa[i];
  return TOLK_OK;
}

static tolk_status op_copy(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0);
  struct tensor *y = op_output(c, 0, a->dtype, a->rank, a->dims);
  if (!y) return c->err->status;
  if (a->nbytes) memcpy(y->data, a->data, a->nbytes);
  return TOLK_OK;
}

static const struct op_def test_ops[] = {
    {"test", "Add", 1, 0, NULL, op_add, NULL},
    {"test", "Keep", 1, 0, NULL, op_keep, NULL},
    {"test", "Copy", 1, 0, NULL, op_copy, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};

static tolk_session *make(struct ir_model *m) {
  tolk_session *s = NULL;
  tolk_error err = {0};
  tolk_session_params p = tolk_session_default_params();
  p.threads = 1;
  if (exec_session_create_ir(m, &p, test_ops, &s, &err)) fprintf(stderr, "%s\n", err.message);
  return s;
}

static void test_if(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d3[1] = {3};
  tb_input(m, g, "c", TOLK_BOOL, 0, NULL, NULL);
  tb_input(m, g, "x", TOLK_FLOAT, 1, d3, NULL);
  float neg[3] = {-1, -2, -3};
  tb_init(m, g, "neg", TOLK_FLOAT, 1, d3, neg, sizeof neg);
  tb_node(m, g, "Add", "test", "pre", "x,x", "x2");
  struct ir_node *n = tb_node(m, g, "If", "", "if", "c", "y");
  /* then: x2 + x (outer values); else: an empty tensor */
  struct ir_graph *th = tb_graph(m, g, "then");
  tb_node(m, th, "Add", "test", "then_add", "x2,x", "t");
  tb_output(th, "t");
  struct ir_graph *el = tb_graph(m, g, "else");
  tb_node(m, el, "Keep", "test", "else_keep", "neg", "e");
  tb_output(el, "e");
  tb_attr_graph(n, "then_branch", th);
  tb_attr_graph(n, "else_branch", el);
  tb_node(m, g, "Copy", "test", "post", "y", "z");
  tb_output(g, "z");
  tolk_session *s = make(m);
  CHECK(s != NULL);
  if (!s) return;
  float x[3] = {1, 2, 3};
  for (int rep = 0; rep < 4; rep++) {
    bool cv = rep % 2 == 0;
    tolk_tensor *tc = NULL, *tx = tb_tensor(1, d3, x), *ty = NULL;
    tolk_tensor_create(TOLK_BOOL, 0, NULL, &cv, 1, &tc, NULL);
    const char *nm[] = {"c", "x"};
    const tolk_tensor *in[] = {tc, tx};
    tolk_error err = {0};
    tolk_run_stats st;
    CHECK_MSG(tolk_session_run(s, 2, nm, in, 1, NULL, &ty, &st, &err) == TOLK_OK, "%s",
              err.message);
    if (ty && cv) {
      CHECK(tolk_tensor_numel(ty) == 3);
      const float *p = tolk_tensor_data(ty);
      CHECK(p[0] == 3 && p[1] == 6 && p[2] == 9);
    } else if (ty) {
      CHECK(tolk_tensor_rank(ty) == 1 && tolk_tensor_numel(ty) == 0);
    }
    tolk_tensor_free(ty);
    tolk_tensor_free(tx);
    tolk_tensor_free(tc);
  }
  tolk_session_free(s);
  tb_free(m);
}

/* Loop with M = 5: carried (a, b) -> (b, a + 1) exercises a value handed
 * straight from one iteration to the next; acc += x with a scan output of
 * every acc. */
static void test_loop(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d2[1] = {2}, d1[1] = {1};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d2, NULL);
  int64_t five = 5;
  tb_init(m, g, "M", TOLK_INT64, 0, NULL, &five, sizeof five);
  uint8_t yes = 1;
  tb_init(m, g, "cond", TOLK_BOOL, 0, NULL, &yes, 1);
  float zero2[2] = {0, 0}, a0 = 0, b0 = 10, one = 1;
  tb_init(m, g, "acc0", TOLK_FLOAT, 1, d2, zero2, sizeof zero2);
  tb_init(m, g, "a0", TOLK_FLOAT, 1, d1, &a0, sizeof a0);
  tb_init(m, g, "b0", TOLK_FLOAT, 1, d1, &b0, sizeof b0);
  tb_init(m, g, "one", TOLK_FLOAT, 1, d1, &one, sizeof one);
  struct ir_node *n = tb_node(m, g, "Loop", "", "loop", "M,cond,acc0,a0,b0", "acc,a,b,accs");
  struct ir_graph *body = tb_graph(m, g, "body");
  tb_input(m, body, "i", TOLK_INT64, 0, NULL, NULL);
  tb_input(m, body, "cin", TOLK_BOOL, 0, NULL, NULL);
  tb_input(m, body, "acc_in", TOLK_FLOAT, 1, d2, NULL);
  tb_input(m, body, "a_in", TOLK_FLOAT, 1, d1, NULL);
  tb_input(m, body, "b_in", TOLK_FLOAT, 1, d1, NULL);
  tb_node(m, body, "Add", "test", "acc_add", "acc_in,x", "acc_out");
  tb_node(m, body, "Add", "test", "a_inc", "a_in,one", "b_out");
  tb_node(m, body, "Copy", "test", "scan_copy", "acc_out", "acc_scan");
  tb_output(body, "cin");
  tb_output(body, "acc_out");
  tb_output(body, "b_in"); /* a_out: straight through */
  tb_output(body, "b_out");
  tb_output(body, "acc_scan");
  tb_attr_graph(n, "body", body);
  tb_output(g, "acc");
  tb_output(g, "a");
  tb_output(g, "b");
  tb_output(g, "accs");
  tolk_session *s = make(m);
  CHECK(s != NULL);
  if (!s) return;
  float x[2] = {1, 2};
  tolk_tensor *tx = tb_tensor(1, d2, x);
  for (int rep = 0; rep < 3; rep++) {
    tolk_tensor *out[4] = {NULL, NULL, NULL, NULL};
    const char *nm[] = {"x"};
    const tolk_tensor *in[] = {tx};
    tolk_error err = {0};
    tolk_run_stats st;
    CHECK_MSG(tolk_session_run(s, 1, nm, in, 4, NULL, out, &st, &err) == TOLK_OK, "%s",
              err.message);
    if (!out[0]) continue;
    const float *acc = tolk_tensor_data(out[0]), *a = tolk_tensor_data(out[1]),
                *b = tolk_tensor_data(out[2]), *accs = tolk_tensor_data(out[3]);
    CHECK(acc[0] == 5 && acc[1] == 10);
    CHECK_MSG(a[0] == 12 && b[0] == 3, "a %g b %g", a[0], b[0]);
    CHECK(tolk_tensor_rank(out[3]) == 2 && tolk_tensor_dims(out[3])[0] == 5 &&
          tolk_tensor_dims(out[3])[1] == 2);
    for (int i = 0; i < 5; i++) CHECK(accs[2 * i] == i + 1 && accs[2 * i + 1] == 2 * (i + 1));
    if (rep > 0) CHECK(st.plan_reused && st.heap_bytes == 0);
    for (int i = 0; i < 4; i++) tolk_tensor_free(out[i]);
  }
  tolk_tensor_free(tx);
  tolk_session_free(s);
  tb_free(m);
}

int main(void) {
  test_if();
  test_loop();
  return tu_finish("test_exec_control");
}
