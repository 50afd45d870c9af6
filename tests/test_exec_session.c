/*
 * test_exec_session.c — the executor on hand-built graphs with test kernels:
 * running, input validation, error reporting, the memory plan (reuse,
 * liveness, divergence), caller-provided outputs, and concurrent runs on one
 * session.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "exec_graph.h"

#include "testutil.h"

/* ------------------------------------------------------------ test ops */

static const struct ir_attr *attr(const struct ir_node *n, const char *name) {
  for (size_t i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

/* Add: b's elements repeat along a (same shape, a scalar, or a last-dim row). */
static tolk_status op_add(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  if (!a || !b) return op_fail(c, TOLK_ERR_INVALID_MODEL, "Add needs two inputs");
  if (b->numel == 0 || a->numel % b->numel != 0) {
    char x[64], y[64];
    return op_fail(c, TOLK_ERR_SHAPE, "shapes %s and %s differ", shape_str(a, x, sizeof x),
                   shape_str(b, y, sizeof y));
  }
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, a->rank, a->dims);
  if (!y) return c->err->status;
  const float *pa = a->data, *pb = b->data;
  float *py = y->data;
  for (int64_t i = 0; i < a->numel; i++) py[i] = pa[i] + pb[i % b->numel];
  return TOLK_OK;
}

static tolk_status op_relu(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, a->rank, a->dims);
  if (!y) return c->err->status;
  const float *pa = a->data;
  float *py = y->data;
  for (int64_t i = 0; i < a->numel; i++) py[i] = pa[i] > 0 ? pa[i] : 0;
  return TOLK_OK;
}

/* Keep: the elements > 0, so the output size depends on the data. */
static tolk_status op_keep(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0);
  const float *pa = a->data;
  int64_t n = 0;
  for (int64_t i = 0; i < a->numel; i++) n += pa[i] > 0;
  float *tmp = op_scratch(c, (size_t)a->numel * sizeof(float));
  if (!tmp) return c->err->status;
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, 1, &n);
  if (!y) return c->err->status;
  float *py = y->data;
  n = 0;
  for (int64_t i = 0; i < a->numel; i++)
    if (pa[i] > 0) py[n++] = pa[i];
  return TOLK_OK;
}

/* Sum: reduces to a scalar. */
static tolk_status op_sum(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, 0, NULL);
  if (!y) return c->err->status;
  const float *pa = a->data;
  double s = 0;
  for (int64_t i = 0; i < a->numel; i++) s += pa[i];
  *(float *)y->data = (float)s;
  return TOLK_OK;
}

static tolk_status op_failing(struct op_ctx *c) {
  return op_fail(c, TOLK_ERR_SHAPE, "input 0 has shape [7] but wants [8]");
}

static tolk_status op_lazy(struct op_ctx *c) { return TOLK_OK; } /* produces nothing */

static tolk_status prep_scale(const struct ir_node *n, int64_t opset, void **state,
                              tolk_error *err) {
  const struct ir_attr *a = attr(n, "alpha");
  if (!a || a->type != IR_ATTR_FLOAT)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "attribute 'alpha' (float) is required");
  float *s = malloc(sizeof *s);
  *s = a->f;
  *state = s;
  return TOLK_OK;
}

static tolk_status op_scale(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, a->rank, a->dims);
  if (!y) return c->err->status;
  float s = *(float *)c->state;
  const float *pa = a->data;
  float *py = y->data;
  for (int64_t i = 0; i < a->numel; i++) py[i] = pa[i] * s;
  return TOLK_OK;
}

static int const_calls;

/* Const: a float vector [1, 2, 3] (counts its calls). */
static tolk_status op_const(struct op_ctx *c) {
  const_calls++;
  int64_t n = 3;
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, 1, &n);
  if (!y) return c->err->status;
  float *p = y->data;
  for (int i = 0; i < 3; i++) p[i] = (float)(i + 1);
  return TOLK_OK;
}

static const struct op_def test_ops[] = {
    {"test", "Const", 1, 0, NULL, op_const, NULL},
    {"test", "Add", 1, 0, NULL, op_add, NULL},
    {"test", "Relu", 1, 0, NULL, op_relu, NULL},
    {"test", "Keep", 1, 0, NULL, op_keep, NULL},
    {"test", "Sum", 1, 0, NULL, op_sum, NULL},
    {"test", "Fail", 1, 0, NULL, op_failing, NULL},
    {"test", "Lazy", 1, 0, NULL, op_lazy, NULL},
    {"test", "Scale", 1, 0, prep_scale, op_scale, free},
    {"test", "Old", 1, 1, NULL, op_relu, NULL},
    /* Const as if it sampled: declared nondeterministic, so never folded. */
    {"test", "Draw", 1, 0, NULL, op_const, NULL, .nondeterministic = true},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};

/* ------------------------------------------------------------ helpers */

static tolk_session *make(struct ir_model *m, tolk_error *err) {
  tolk_session *s = NULL;
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  exec_session_create_ir(m, &p, test_ops, &s, err);
  return s;
}

static tolk_status run1(tolk_session *s, const char *in, tolk_tensor *x, tolk_tensor **y,
                        tolk_run_stats *st, tolk_error *err) {
  const char *names[] = {in};
  const tolk_tensor *ins[] = {x};
  *y = NULL;
  return tolk_session_run(s, 1, names, ins, 1, NULL, y, st, err);
}

/* y = Relu(x + w) * 2 */
static struct ir_model *model_basic(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[2] = {-1, 3};
  const char *names[2] = {"batch", NULL};
  tb_input(m, g, "x", TOLK_FLOAT, 2, d, names);
  float w[3] = {1, -2, 3};
  int64_t wd[1] = {3};
  tb_init(m, g, "w", TOLK_FLOAT, 1, wd, w, sizeof w);
  tb_node(m, g, "Add", "test", "add0", "x,w", "s");
  tb_node(m, g, "Relu", "test", "relu0", "s", "r");
  struct ir_node *n = tb_node(m, g, "Scale", "test", "scale0", "r", "y");
  tb_attr_float(n, "alpha", 2.0f);
  tb_output(g, "y");
  return m;
}

static void test_basic(void) {
  struct ir_model *m = model_basic();
  tolk_error err = {0};
  tolk_session *s = make(m, &err);
  CHECK_MSG(s != NULL, "%s", err.message);
  if (!s) return;
  CHECK(tolk_session_input_count(s) == 1);
  const tolk_value_info *vi = tolk_session_input(s, 0);
  CHECK(vi && !strcmp(vi->name, "x") && vi->rank == 2 && vi->dims[0] == -1 &&
        !strcmp(vi->dim_names[0], "batch") && vi->dims[1] == 3);
  CHECK(tolk_session_output_count(s) == 1 && !strcmp(tolk_session_output(s, 0)->name, "y"));
  float x[6] = {0, 1, -5, 1, 2, 3};
  int64_t xd[2] = {2, 3};
  tolk_tensor *tx = tb_tensor(2, xd, x), *ty = NULL;
  tolk_run_stats st;
  CHECK_MSG(run1(s, "x", tx, &ty, &st, &err) == TOLK_OK, "%s", err.message);
  if (ty) {
    const float want[6] = {2, 0, 0, 4, 0, 12};
    CHECK(tolk_tensor_rank(ty) == 2 && tolk_tensor_dims(ty)[0] == 2);
    const float *py = tolk_tensor_data(ty);
    for (int i = 0; i < 6; i++) CHECK_NEAR(py[i], want[i], 0);
    CHECK(st.plan_reused == 0 && st.nodes_run == 3);
  }
  tolk_tensor_free(ty);
  /* Second run: same signature, served by the plan, nothing from the heap. */
  CHECK(run1(s, "x", tx, &ty, &st, &err) == TOLK_OK);
  CHECK(st.plan_reused == 1 && st.heap_bytes == 0 && st.arena_bytes > 0);
  tolk_tensor_free(ty);
  /* Another batch size: a new signature. */
  int64_t xd1[2] = {1, 3};
  tolk_tensor *tx1 = tb_tensor(2, xd1, x);
  CHECK(run1(s, "x", tx1, &ty, &st, &err) == TOLK_OK);
  CHECK(st.plan_reused == 0);
  if (ty) CHECK(((float *)tolk_tensor_data(ty))[0] == 2);
  tolk_tensor_free(ty);
  tolk_tensor_free(tx1);

  /* IO binding: a caller buffer of the right shape is filled in place. */
  float out[6] = {0};
  tolk_tensor *bound = NULL;
  CHECK(tolk_tensor_wrap(TOLK_FLOAT, 2, xd, out, sizeof out, &bound, NULL) == TOLK_OK);
  ty = bound;
  const char *in_names[] = {"x"};
  const tolk_tensor *ins[] = {tx};
  const char *out_names[] = {"y"};
  CHECK_MSG(tolk_session_run(s, 1, in_names, ins, 1, out_names, &ty, &st, &err) == TOLK_OK, "%s",
            err.message);
  CHECK(ty == bound && out[5] == 12 && out[3] == 4 && st.output_bytes == 0);
  tolk_tensor_free(bound);
  /* ... and one of the wrong shape is refused. */
  int64_t bd[2] = {3, 2};
  CHECK(tolk_tensor_wrap(TOLK_FLOAT, 2, bd, out, sizeof out, &bound, NULL) == TOLK_OK);
  ty = bound;
  tolk_status rc = tolk_session_run(s, 1, in_names, ins, 1, out_names, &ty, NULL, &err);
  CHECK_MSG(rc == TOLK_ERR_SHAPE && strstr(err.message, "caller's buffer"), "%s", err.message);
  tolk_tensor_free(bound);

  /* A run whose output is neither bound nor requested by a bad name. */
  const char *bad_out[] = {"nope"};
  ty = NULL;
  rc = tolk_session_run(s, 1, in_names, ins, 1, bad_out, &ty, NULL, &err);
  CHECK(rc == TOLK_ERR_NOT_FOUND && ty == NULL && strstr(err.message, "nope"));

  tolk_tensor_free(tx);
  tolk_session_free(s);
  tb_free(m);
}

/* plan_on_repeat: a signature's plan is made at its second run, so the
 * third is the first served by it; outputs are the same every time. */
static void test_plan_on_repeat(void) {
  struct ir_model *m = model_basic();
  tolk_error err = {0};
  tolk_session *s = NULL;
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  p.plan_on_repeat = 1;
  exec_session_create_ir(m, &p, test_ops, &s, &err);
  CHECK_MSG(s != NULL, "%s", err.message);
  if (!s) {
    tb_free(m);
    return;
  }
  float x[6] = {0, 1, -5, 1, 2, 3};
  int64_t two[2] = {2, 3}, one[2] = {1, 3};
  tolk_tensor *ta = tb_tensor(2, two, x), *tb = tb_tensor(2, one, x);
  /* a a b a b b a: reused only from each signature's third run on */
  const int order[] = {0, 0, 1, 0, 1, 1, 0};
  const int want_reused[] = {0, 0, 0, 1, 0, 1, 1};
  for (int i = 0; i < 7; i++) {
    tolk_tensor *ty = NULL;
    tolk_run_stats st;
    CHECK_MSG(run1(s, "x", order[i] ? tb : ta, &ty, &st, &err) == TOLK_OK, "%s", err.message);
    CHECK_MSG(st.plan_reused == want_reused[i], "run %d: plan_reused %d", i, st.plan_reused);
    CHECK(want_reused[i] ? st.heap_bytes == 0 : st.heap_bytes > 0);
    if (ty) CHECK(((float *)tolk_tensor_data(ty))[0] == 2 && tolk_tensor_dims(ty)[0] == (order[i] ? 1 : 2));
    tolk_tensor_free(ty);
  }
  tolk_tensor_free(ta);
  tolk_tensor_free(tb);
  tolk_session_free(s);
  tb_free(m);
}

static void test_input_errors(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[2] = {-1, 4};
  const char *names[2] = {"batch", NULL};
  tb_input(m, g, "a", TOLK_FLOAT, 2, d, names);
  tb_input(m, g, "b", TOLK_FLOAT, 2, d, names);
  tb_node(m, g, "Add", "test", "add", "a,b", "y");
  tb_output(g, "y");
  tolk_error err = {0};
  tolk_session *s = make(m, &err);
  CHECK_MSG(s != NULL, "%s", err.message);
  if (!s) return;
  float buf[16] = {0};
  int64_t d24[2] = {2, 4}, d34[2] = {3, 4}, d23[2] = {2, 3}, d8[1] = {8};
  tolk_tensor *a = tb_tensor(2, d24, buf), *b3 = tb_tensor(2, d34, buf),
              *b23 = tb_tensor(2, d23, buf), *r1 = tb_tensor(1, d8, buf), *i64 = NULL;
  tolk_tensor_create(TOLK_INT64, 2, d24, NULL, 0, &i64, NULL);
  const char *nm[] = {"a", "b"};
  tolk_tensor *y = NULL;
  const tolk_tensor *in1[] = {a, b3};
  CHECK(tolk_session_run(s, 2, nm, in1, 1, NULL, &y, NULL, &err) == TOLK_ERR_SHAPE);
  CHECK_MSG(strstr(err.message, "input 'b'") && strstr(err.message, "batch=2") &&
                strstr(err.message, "input 'a'") && strstr(err.message, "[3, 4]"),
            "%s", err.message);
  const tolk_tensor *in2[] = {a, b23};
  CHECK(tolk_session_run(s, 2, nm, in2, 1, NULL, &y, NULL, &err) == TOLK_ERR_SHAPE);
  CHECK_MSG(strstr(err.message, "[batch, 4]") && strstr(err.message, "[2, 3]"), "%s",
            err.message);
  const tolk_tensor *in3[] = {a, r1};
  CHECK(tolk_session_run(s, 2, nm, in3, 1, NULL, &y, NULL, &err) == TOLK_ERR_SHAPE);
  CHECK_MSG(strstr(err.message, "rank 2"), "%s", err.message);
  const tolk_tensor *in4[] = {a, i64};
  CHECK(tolk_session_run(s, 2, nm, in4, 1, NULL, &y, NULL, &err) == TOLK_ERR_TYPE);
  CHECK_MSG(strstr(err.message, "expected float") && strstr(err.message, "given int64"), "%s",
            err.message);
  CHECK(tolk_session_run(s, 1, nm, in1, 1, NULL, &y, NULL, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "'b' is missing"), "%s", err.message);
  const char *nm2[] = {"a", "c"};
  CHECK(tolk_session_run(s, 2, nm2, in1, 1, NULL, &y, NULL, &err) == TOLK_ERR_NOT_FOUND);
  CHECK_MSG(strstr(err.message, "'c'") && strstr(err.message, "a, b"), "%s", err.message);
  const char *nm3[] = {"a", "a"};
  CHECK(tolk_session_run(s, 2, nm3, in1, 1, NULL, &y, NULL, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK(y == NULL);
  /* After all those failures the session still runs. */
  const tolk_tensor *ok[] = {a, a};
  CHECK(tolk_session_run(s, 2, nm, ok, 1, NULL, &y, NULL, &err) == TOLK_OK);
  tolk_tensor_free(y);
  tolk_tensor_free(a);
  tolk_tensor_free(b3);
  tolk_tensor_free(b23);
  tolk_tensor_free(r1);
  tolk_tensor_free(i64);
  tolk_session_free(s);
  tb_free(m);
}

static void test_creation_errors(void) {
  tolk_error err = {0};
  /* Unsupported ops: reported at creation, naming node, op, domain, opset. */
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[1] = {4};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  tb_node(m, g, "Relu", "test", "fine", "x", "a");
  tb_node(m, g, "Frobnicate", "test", "frob", "a", "b");
  tb_node(m, g, "Warp", "com.example", "warp", "b", "c");
  tb_output(g, "c");
  m->opsets[2].domain = "com.example";
  m->opsets[2].version = 3;
  m->n_opsets = 3;
  g->nodes[2]->opset = 3;
  tolk_session *s = make(m, &err);
  CHECK(s == NULL && err.status == TOLK_ERR_UNSUPPORTED);
  CHECK_MSG(strstr(err.message, "node 'frob' (#1 test.Frobnicate)") &&
                strstr(err.message, "opset 1") && strstr(err.message, "2 unsupported") &&
                strstr(err.message, "com.example.Warp"),
            "%s", err.message);
  tb_free(m);

  /* A version outside the def's range says which versions exist. */
  m = tb_model();
  g = tb_graph(m, NULL, "main");
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  struct ir_node *n = tb_node(m, g, "Old", "test", "", "x", "y");
  n->opset = 5;
  tb_output(g, "y");
  s = make(m, &err);
  CHECK(s == NULL && err.status == TOLK_ERR_UNSUPPORTED);
  CHECK_MSG(strstr(err.message, "node #0 (test.Old)") && strstr(err.message, "opsets 1..1") &&
                strstr(err.message, "not opset 5"),
            "%s", err.message);
  tb_free(m);

  /* prepare() failures carry the node's identity. */
  m = tb_model();
  g = tb_graph(m, NULL, "main");
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  tb_node(m, g, "Scale", "test", "sc", "x", "y");
  tb_output(g, "y");
  s = make(m, &err);
  CHECK(s == NULL && err.status == TOLK_ERR_INVALID_MODEL);
  CHECK_MSG(strstr(err.message, "node 'sc' (#0 test.Scale): attribute 'alpha'"), "%s",
            err.message);
  tb_free(m);

  /* An undefined input. */
  m = tb_model();
  g = tb_graph(m, NULL, "main");
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  tb_node(m, g, "Add", "test", "add", "x,ghost", "y");
  tb_output(g, "y");
  s = make(m, &err);
  CHECK(s == NULL && err.status == TOLK_ERR_INVALID_MODEL);
  CHECK_MSG(strstr(err.message, "'ghost' is not defined"), "%s", err.message);
  tb_free(m);
}

static void test_run_errors(void) {
  tolk_error err = {0};
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[1] = {4};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  tb_node(m, g, "Relu", "test", "r", "x", "a");
  tb_node(m, g, "Fail", "test", "boom", "a", "b");
  tb_output(g, "b");
  tolk_session *s = make(m, &err);
  CHECK(s != NULL);
  float x[4] = {1, 2, 3, 4};
  tolk_tensor *tx = tb_tensor(1, d, x), *ty = NULL;
  CHECK(run1(s, "x", tx, &ty, NULL, &err) == TOLK_ERR_SHAPE && ty == NULL);
  CHECK_MSG(!strcmp(err.message, "node 'boom' (#1 test.Fail): input 0 has shape [7] but wants [8]"),
            "%s", err.message);
  tolk_session_free(s);
  tb_free(m);

  m = tb_model();
  g = tb_graph(m, NULL, "main");
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  tb_node(m, g, "Lazy", "test", "lazy", "x", "y");
  tb_output(g, "y");
  s = make(m, &err);
  CHECK(run1(s, "x", tx, &ty, NULL, &err) == TOLK_ERR_INTERNAL);
  CHECK_MSG(strstr(err.message, "node 'lazy'") && strstr(err.message, "did not produce output 0"),
            "%s", err.message);
  tolk_session_free(s);
  tb_free(m);
  tolk_tensor_free(tx);
}

/* A chain of 12 Adds on a 64 KB tensor: with liveness reuse the arena holds
 * a few buffers, not 12. Nodes are listed out of order to test sorting. */
static void test_liveness(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[1] = {16384};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  float one = 1;
  tb_init(m, g, "one", TOLK_FLOAT, 0, NULL, &one, sizeof one);
  tb_node(m, g, "Add", "test", "a0", "x,one", "v0");
  char in[16], out[16];
  for (int i = 1; i < 12; i++) {
    snprintf(in, sizeof in, "v%d", i - 1);
    snprintf(out, sizeof out, "v%d", i);
    char ins[40];
    snprintf(ins, sizeof ins, "%s,one", in);
    tb_node(m, g, "Add", "test", "", ins, out);
  }
  tb_node(m, g, "Sum", "test", "sum", "v11", "y");
  /* reverse the node list: the executor must sort it */
  for (size_t i = 0; i < g->n_nodes / 2; i++) {
    struct ir_node *t = g->nodes[i];
    g->nodes[i] = g->nodes[g->n_nodes - 1 - i];
    g->nodes[g->n_nodes - 1 - i] = t;
  }
  for (size_t i = 0; i < g->n_nodes; i++) g->nodes[i]->index = (int)i;
  tb_output(g, "y");
  tolk_error err = {0};
  tolk_session *s = make(m, &err);
  CHECK_MSG(s != NULL, "%s", err.message);
  if (!s) return;
  float *x = calloc(16384, sizeof *x);
  tolk_tensor *tx = tb_tensor(1, d, x), *ty = NULL;
  tolk_run_stats st;
  for (int rep = 0; rep < 3; rep++) {
    CHECK_MSG(run1(s, "x", tx, &ty, &st, &err) == TOLK_OK, "%s", err.message);
    if (ty) CHECK_NEAR(*(float *)tolk_tensor_data(ty), 12.0 * 16384, 0);
    tolk_tensor_free(ty);
  }
  CHECK(st.plan_reused && st.heap_bytes == 0);
  CHECK_MSG(st.arena_bytes == 2 * 65536, "arena %llu", (unsigned long long)st.arena_bytes);
  CHECK_MSG(st.peak_bytes == 2 * 65536, "peak %llu", (unsigned long long)st.peak_bytes);
  free(x);
  tolk_tensor_free(tx);
  tolk_session_free(s);
  tb_free(m);
}

/* The arena follows the need down: the arena two wide runs grew it to is kept
 * through the rest of their window of 256 runs and the whole next one (a
 * batch that narrows for a while comes back), and released at the end of the
 * first window of narrow runs only, leaving what those need. */
static void test_arena_shrinks(void) {
  struct ir_model *m = model_basic();
  tolk_error err = {0};
  tolk_session *s = make(m, &err);
  CHECK_MSG(s != NULL, "%s", err.message);
  if (!s) return;
  float *x = calloc(3 * 4096, sizeof *x);
  int64_t wide[2] = {4096, 3}, narrow[2] = {2, 3};
  tolk_tensor *tw = tb_tensor(2, wide, x), *tn = tb_tensor(2, narrow, x), *ty = NULL;
  tolk_run_stats st;
  for (int rep = 0; rep < 2; rep++) { /* record, then replay from the arena */
    CHECK_MSG(run1(s, "x", tw, &ty, &st, &err) == TOLK_OK, "%s", err.message);
    tolk_tensor_free(ty);
  }
  uint64_t wide_arena = st.arena_held;
  CHECK_MSG(wide_arena >= 4096 * 3 * sizeof(float), "wide arena %llu", (unsigned long long)wide_arena);
  uint64_t held[600];
  for (int rep = 0; rep < 600; rep++) {
    CHECK_MSG(run1(s, "x", tn, &ty, &st, &err) == TOLK_OK, "%s", err.message);
    tolk_tensor_free(ty);
    held[rep] = st.arena_held;
  }
  /* runs 1-2 were wide; narrow run k is run k + 3; the second window ends at run 512 */
  CHECK_MSG(held[253] == wide_arena && held[508] == wide_arena, "kept %llu", (unsigned long long)held[508]);
  CHECK_MSG(held[509] < wide_arena / 2, "released: %llu", (unsigned long long)held[509]);
  CHECK_MSG(held[599] == held[510] && held[599] > 0, "narrow arena %llu then %llu", (unsigned long long)held[510],
            (unsigned long long)held[599]);
  free(x);
  tolk_tensor_free(tw);
  tolk_tensor_free(tn);
  tolk_session_free(s);
  tb_free(m);
}

/* Data-dependent sizes: the second run leaves the plan at Keep and must
 * still compute correctly from the heap. */
static void test_divergence(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[1] = {64};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  tb_node(m, g, "Relu", "test", "", "x", "a");
  tb_node(m, g, "Keep", "test", "", "a", "k");
  tb_node(m, g, "Relu", "test", "", "k", "b");
  tb_node(m, g, "Sum", "test", "", "b", "y");
  tb_node(m, g, "Sum", "test", "", "a", "z");
  tb_output(g, "y");
  tb_output(g, "z");
  tolk_error err = {0};
  tolk_session *s = make(m, &err);
  CHECK(s != NULL);
  if (!s) return;
  /* 64 positives, then 32: buffer sizes differ after rounding to 64 bytes. */
  float x1[64], x2[64];
  for (int i = 0; i < 64; i++) {
    x1[i] = 1;
    x2[i] = i % 2 ? -1.0f : 1.0f;
  }
  for (int rep = 0; rep < 4; rep++) {
    tolk_tensor *tx = tb_tensor(1, d, rep % 2 ? x2 : x1), *ty[2] = {NULL, NULL};
    const char *nm[] = {"x"};
    const tolk_tensor *ins[] = {tx};
    tolk_run_stats st;
    CHECK_MSG(tolk_session_run(s, 1, nm, ins, 2, NULL, ty, &st, &err) == TOLK_OK, "%s",
              err.message);
    float want = rep % 2 ? 32 : 64;
    if (ty[0]) CHECK_NEAR(*(float *)tolk_tensor_data(ty[0]), want, 0);
    if (ty[1]) CHECK_NEAR(*(float *)tolk_tensor_data(ty[1]), want, 0);
    if (rep == 1) CHECK(st.plan_reused && st.heap_bytes > 0);
    if (rep == 2) CHECK(st.plan_reused && st.heap_bytes == 0);
    tolk_tensor_free(ty[0]);
    tolk_tensor_free(ty[1]);
    tolk_tensor_free(tx);
  }
  tolk_session_free(s);
  tb_free(m);
}

/* Concurrent runs on one session, each thread with its own data. */
struct worker {
  tolk_session *s;
  int id;
  int failures;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  int64_t d[2] = {1 + w->id % 3, 3};
  float x[9];
  for (int rep = 0; rep < 300; rep++) {
    for (int i = 0; i < 9; i++) x[i] = (float)(w->id * 100 + rep + i);
    tolk_tensor *tx = tb_tensor(2, d, x), *ty = NULL;
    tolk_error err;
    if (run1(w->s, "x", tx, &ty, NULL, &err) != TOLK_OK) {
      w->failures++;
    } else {
      const float wv[3] = {1, -2, 3};
      const float *py = tolk_tensor_data(ty);
      for (int i = 0; i < d[0] * 3; i++) {
        float v = x[i] + wv[i % 3];
        if (py[i] != (v > 0 ? v : 0) * 2) w->failures++;
      }
    }
    tolk_tensor_free(ty);
    tolk_tensor_free(tx);
  }
  return NULL;
}

static void test_concurrent(void) {
  struct ir_model *m = model_basic();
  tolk_error err = {0};
  tolk_session *s = make(m, &err);
  CHECK(s != NULL);
  if (!s) return;
  enum { N = 6 };
  pthread_t th[N];
  struct worker w[N];
  for (int i = 0; i < N; i++) {
    w[i].s = s;
    w[i].id = i;
    w[i].failures = 0;
    pthread_create(&th[i], NULL, worker_main, &w[i]);
  }
  int fails = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    fails += w[i].failures;
  }
  CHECK_MSG(fails == 0, "%d wrong results", fails);
  tolk_session_free(s);
  tb_free(m);
}

/* Folding: Const and Add(Const, w) run once at creation with opt level
 * basic, on every run with none; the results agree. */
/* A node whose def says its outputs vary from run to run is run every time,
 * constant inputs or not. */
static void test_no_fold_nondeterministic(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[1] = {3};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  tb_node(m, g, "Draw", "test", "r", "", "k");
  tb_node(m, g, "Add", "test", "y", "x,k", "y");
  tb_output(g, "y");
  float x[3] = {100, 200, 300};
  tolk_tensor *tx = tb_tensor(1, d, x);
  tolk_session *s = NULL;
  tolk_error err = {0};
  tolk_session_params p = tolk_session_default_params();
  p.opt_level = TOLK_OPT_BASIC;
  const_calls = 0;
  CHECK_MSG(exec_session_create_ir(m, &p, test_ops, &s, &err) == TOLK_OK, "%s", err.message);
  CHECK(const_calls == 0);
  for (int rep = 0; s && rep < 2; rep++) {
    tolk_tensor *out = NULL;
    const char *nm[] = {"x"};
    const tolk_tensor *in[] = {tx};
    tolk_run_stats st;
    CHECK(tolk_session_run(s, 1, nm, in, 1, NULL, &out, &st, &err) == TOLK_OK);
    CHECK(st.nodes_run == 2u);
    if (out) CHECK(((const float *)tolk_tensor_data(out))[2] == 303);
    tolk_tensor_free(out);
  }
  CHECK(const_calls == 2);
  tolk_session_free(s);
  tolk_tensor_free(tx);
  tb_free(m);
}

static void test_folding(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[1] = {3};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, NULL);
  float w[3] = {10, 20, 30};
  tb_init(m, g, "w", TOLK_FLOAT, 1, d, w, sizeof w);
  tb_node(m, g, "Const", "test", "c", "", "k");
  tb_node(m, g, "Add", "test", "kw", "k,w", "kw");
  tb_node(m, g, "Add", "test", "y", "x,kw", "y");
  tb_output(g, "y");
  tb_output(g, "kw"); /* a folded value as a graph output */
  float x[3] = {100, 200, 300};
  tolk_tensor *tx = tb_tensor(1, d, x);
  for (int level = 0; level < 2; level++) {
    tolk_session *s = NULL;
    tolk_error err = {0};
    tolk_session_params p = tolk_session_default_params();
    p.opt_level = level ? TOLK_OPT_BASIC : TOLK_OPT_NONE;
    const_calls = 0;
    CHECK_MSG(exec_session_create_ir(m, &p, test_ops, &s, &err) == TOLK_OK, "%s", err.message);
    if (!s) continue;
    CHECK(const_calls == level);
    for (int rep = 0; rep < 3; rep++) {
      tolk_tensor *out[2] = {NULL, NULL};
      const char *nm[] = {"x"};
      const tolk_tensor *in[] = {tx};
      tolk_run_stats st;
      CHECK(tolk_session_run(s, 1, nm, in, 2, NULL, out, &st, &err) == TOLK_OK);
      CHECK(st.nodes_run == (level ? 1u : 3u));
      if (out[0] && out[1]) {
        const float *py = tolk_tensor_data(out[0]), *pk = tolk_tensor_data(out[1]);
        CHECK(py[0] == 111 && py[1] == 222 && py[2] == 333);
        CHECK(pk[0] == 11 && pk[2] == 33);
      }
      tolk_tensor_free(out[0]);
      tolk_tensor_free(out[1]);
    }
    CHECK(const_calls == (level ? 1 : 3));
    tolk_session_free(s);
  }
  tolk_tensor_free(tx);
  tb_free(m);
}

int main(void) {
  test_folding();
  test_no_fold_nondeterministic();
  test_basic();
  test_plan_on_repeat();
  test_input_errors();
  test_creation_errors();
  test_run_errors();
  test_liveness();
  test_divergence();
  test_arena_shrinks();
  test_concurrent();
  return tu_finish("test_exec_session");
}
