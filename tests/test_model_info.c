/*
 * test_model_info.c — the public model introspection API (tolk.h, "model
 * introspection"): a small valid model read back field by field; a model
 * with an If node whose branches read outer values, a local function,
 * metadata, an external and a 4-bit initializer, an omitted and an undefined
 * input; and NULL handles and indexes out of range on every accessor. Uses
 * only tolk.h, as a program outside tolk would.
 */
#include <stdbool.h>
#include <string.h>

#include "onnx_pbw.h"
#include "testutil.h"
#include "tolk.h"

static tolk_model *load(struct pbw *m) {
  tolk_model_params p = tolk_model_default_params();
  p.load_external_data = 0; /* the external initializer is described, not read */
  tolk_model *model = NULL;
  tolk_error e = {0};
  tolk_status st = tolk_model_load_buffer(m->p, m->n, ".", p, &model, &e);
  CHECK_MSG(st == TOLK_OK, "load: %s", e.message);
  return model;
}

static bool str_is(const char *s, const char *want) { return s && !strcmp(s, want); }

/* y = Relu(Add(x, w)), x: float [N, 3], w: float [3] (pbw_small_model). */
static void test_small_model(void) {
  struct pbw m = {0};
  pbw_small_model(&m);
  tolk_model *model = load(&m);
  if (!model) return;
  tolk_model_info mi = tolk_model_describe(model);
  CHECK(mi.ir_version == 8 && str_is(mi.producer_name, "tolk-test") && str_is(mi.producer_version, ""));
  CHECK(str_is(mi.domain, "") && mi.model_version == 0 && mi.file_bytes == m.n);
  CHECK(mi.graph && mi.max_depth == 0 && mi.n_opsets == 1 && mi.n_metadata == 0 && mi.n_functions == 0);
  int64_t version = -7;
  CHECK(str_is(tolk_model_opset(model, 0, &version), "") && version == 13);
  CHECK(tolk_model_opset(model, 0, NULL) != NULL);

  const tolk_graph *g = mi.graph;
  tolk_graph_info gi = tolk_graph_describe(g);
  CHECK(str_is(gi.name, "small") && gi.depth == 0 && gi.owner == NULL);
  CHECK(gi.n_inputs == 1 && gi.n_outputs == 1 && gi.n_initializers == 1 && gi.n_nodes == 2);
  CHECK(gi.n_values == 4 && gi.n_outer_refs == 0); /* w, x, s, y */

  const tolk_value *x = tolk_graph_input(g, 0);
  tolk_value_desc xd = tolk_value_describe(x);
  CHECK(str_is(xd.name, "x") && xd.kind == TOLK_TYPE_TENSOR && xd.dtype == TOLK_FLOAT && xd.rank == 2);
  CHECK(xd.flags == TOLK_VALUE_GRAPH_INPUT && xd.graph == g && xd.producer == NULL);
  CHECK(tolk_graph_value(g, xd.index) == x);
  const char *sym = "unset";
  CHECK(tolk_value_dim(x, 0, &sym) == -1 && str_is(sym, "N"));
  CHECK(tolk_value_dim(x, 1, &sym) == 3 && sym == NULL);
  CHECK(tolk_value_dim(x, 1, NULL) == 3);
  tolk_initializer_info none = tolk_value_initializer(x);
  CHECK(none.dtype == TOLK_UNDEFINED && none.rank == -1 && !none.dims && !none.external_file && !none.nbytes);

  const tolk_value *w = tolk_graph_initializer(g, 0);
  CHECK(tolk_value_describe(w).flags == TOLK_VALUE_INITIALIZER);
  tolk_initializer_info wi = tolk_value_initializer(w);
  CHECK(wi.dtype == TOLK_FLOAT && wi.rank == 1 && wi.dims && wi.dims[0] == 3);
  CHECK(wi.numel == 3 && wi.nbytes == 12 && wi.external_file == NULL);

  const tolk_node *add = tolk_graph_node(g, 0), *relu = tolk_graph_node(g, 1);
  tolk_node_info ni = tolk_node_describe(add);
  CHECK(str_is(ni.name, "add0") && str_is(ni.op_type, "Add") && str_is(ni.domain, ""));
  CHECK(ni.graph == g && ni.index == 0 && ni.n_inputs == 2 && ni.n_outputs == 1 && ni.n_subgraphs == 0);
  CHECK(tolk_node_input(add, 0) == x && tolk_node_input(add, 1) == w);
  const tolk_value *s = tolk_node_output(add, 0);
  CHECK(tolk_value_describe(s).producer == add && tolk_node_input(relu, 0) == s);
  const tolk_value *y = tolk_graph_output(g, 0);
  tolk_value_desc yd = tolk_value_describe(y);
  CHECK(yd.producer == relu && yd.flags == TOLK_VALUE_GRAPH_OUTPUT && tolk_node_output(relu, 0) == y);
  CHECK(tolk_node_describe(relu).index == 1);

  /* Indexes out of range: NULL, and out-parameters left alone. */
  const char *attr = "unset", *val = "unset";
  version = -7;
  CHECK(tolk_model_opset(model, 1, &version) == NULL && version == -7);
  CHECK(tolk_model_metadata(model, 0, &val) == NULL && str_is(val, "unset"));
  tolk_function_info fi = tolk_model_function(model, 0);
  CHECK(!fi.name && !fi.domain && !fi.body);
  CHECK(!tolk_graph_input(g, 1) && !tolk_graph_output(g, 1) && !tolk_graph_initializer(g, 1));
  CHECK(!tolk_graph_node(g, 2) && !tolk_graph_value(g, gi.n_values) && !tolk_graph_value(g, (size_t)-1));
  CHECK(!tolk_node_input(add, 2) && !tolk_node_output(add, 1));
  CHECK(tolk_node_subgraph(add, 0, &attr) == NULL && str_is(attr, "unset"));
  sym = "unset";
  CHECK(tolk_value_dim(x, 2, &sym) == -1 && sym == NULL);
  CHECK(tolk_value_dim(x, -1, &sym) == -1 && sym == NULL);
  CHECK(tolk_value_dim(w, 1, NULL) == -1);
  tolk_model_free(model);
  pbw_free(&m);
}

/* then: t = Add(x, ext_w); else: e = Identity(x) — both read main-graph values. */
static void branches(struct pbw *attrs) {
  struct pbw then_g = {0}, else_g = {0}, a = {0};
  pbw_node(&then_g, "Add", "add_in", (const char *const[]){"x", "ext_w", NULL}, (const char *const[]){"t", NULL}, NULL);
  pbw_str(&then_g, 2, "then");
  pbw_value_info(&then_g, 12, "t", TOLK_FLOAT, 1, (const int64_t[]){2});
  pbw_node(&else_g, "Identity", NULL, (const char *const[]){"x", NULL}, (const char *const[]){"e", NULL}, NULL);
  pbw_str(&else_g, 2, "else");
  pbw_value_info(&else_g, 12, "e", TOLK_FLOAT, 1, (const int64_t[]){2});
  pbw_str(&a, 1, "then_branch");
  pbw_msg(&a, 6, &then_g);
  pbw_int(&a, 20, 5); /* GRAPH */
  pbw_msg(attrs, 5, &a);
  pbw_str(&a, 1, "else_branch");
  pbw_msg(&a, 6, &else_g);
  pbw_int(&a, 20, 5);
  pbw_msg(attrs, 5, &a);
}

/* ext_w: float [2] in "w.bin"; q4: int4 [3] inline. */
static void initializers(struct pbw *g) {
  struct pbw t = {0}, kv = {0};
  pbw_int(&t, 1, 2);
  pbw_int(&t, 2, TOLK_FLOAT);
  pbw_str(&t, 8, "ext_w");
  pbw_str(&kv, 1, "location");
  pbw_str(&kv, 2, "w.bin");
  pbw_msg(&t, 13, &kv);
  pbw_int(&t, 14, 1); /* EXTERNAL */
  pbw_msg(g, 5, &t);
  static const uint8_t q4[2] = {0x21, 0x03};
  pbw_tensor(g, 5, "q4", TOLK_INT4, 1, (const int64_t[]){3}, NULL, q4, sizeof q4);
}

static void model_with_scopes(struct pbw *m) {
  struct pbw g = {0}, attrs = {0}, f = {0}, o = {0}, kv = {0}, node = {0};
  branches(&attrs);
  pbw_node(&g, "If", "if0", (const char *const[]){"c", NULL}, (const char *const[]){"y", NULL}, &attrs);
  pbw_str(&node, 1, "y");
  pbw_str(&node, 2, "z");
  pbw_str(&node, 3, "f0");
  pbw_str(&node, 4, "MyFn");
  pbw_str(&node, 7, "my.dom");
  pbw_msg(&g, 1, &node);
  pbw_node(&g, "Clip", "clip", (const char *const[]){"z", "", "hi_missing", NULL}, (const char *const[]){"q", NULL}, NULL);
  pbw_str(&g, 2, "main");
  initializers(&g);
  pbw_value_info(&g, 11, "c", TOLK_BOOL, 0, NULL);
  pbw_value_info(&g, 11, "x", TOLK_FLOAT, 1, (const int64_t[]){2});
  pbw_value_info(&g, 12, "q", TOLK_FLOAT, 1, (const int64_t[]){2});
  pbw_model(m, 8, 13, &g);
  pbw_str(&o, 1, "my.dom");
  pbw_int(&o, 2, 1);
  pbw_msg(m, 8, &o);
  pbw_str(&kv, 1, "k");
  pbw_str(&kv, 2, "v");
  pbw_msg(m, 14, &kv);
  pbw_str(&f, 1, "MyFn");
  pbw_str(&f, 4, "a");
  pbw_str(&f, 5, "b");
  pbw_node_f(&f, 7, "Neg", NULL, (const char *const[]){"a", NULL}, (const char *const[]){"b", NULL}, NULL);
  pbw_int(&o, 2, 13);
  pbw_msg(&f, 9, &o);
  pbw_str(&f, 10, "my.dom");
  pbw_msg(m, 25, &f);
}

static void test_scopes(void) {
  struct pbw m = {0};
  model_with_scopes(&m);
  tolk_model *model = load(&m);
  if (!model) return;
  tolk_model_info mi = tolk_model_describe(model);
  CHECK(mi.max_depth == 1 && mi.n_opsets == 2 && mi.n_metadata == 1 && mi.n_functions == 1);
  int64_t version = 0;
  CHECK(str_is(tolk_model_opset(model, 1, &version), "my.dom") && version == 1);
  const char *val = NULL;
  CHECK(str_is(tolk_model_metadata(model, 0, &val), "k") && str_is(val, "v"));
  CHECK(str_is(tolk_model_metadata(model, 0, NULL), "k"));

  const tolk_graph *g = mi.graph;
  const tolk_node *if0 = tolk_graph_node(g, 0);
  tolk_node_info ni = tolk_node_describe(if0);
  CHECK(str_is(ni.op_type, "If") && ni.n_subgraphs == 2);
  const char *attr = NULL;
  const tolk_graph *then_g = tolk_node_subgraph(if0, 0, &attr);
  CHECK(then_g && str_is(attr, "then_branch"));
  CHECK(tolk_node_subgraph(if0, 1, &attr) && str_is(attr, "else_branch"));
  CHECK(tolk_node_subgraph(if0, 1, NULL) != NULL && tolk_node_subgraph(if0, 2, NULL) == NULL);
  tolk_graph_info ti = tolk_graph_describe(then_g);
  CHECK(str_is(ti.name, "then") && ti.depth == 1 && ti.owner == if0);
  CHECK(ti.n_nodes == 1 && ti.n_inputs == 0 && ti.n_outputs == 1 && ti.n_outer_refs == 2);
  /* The branch reads the main graph's x: the same handle, defined there. */
  const tolk_node *add_in = tolk_graph_node(then_g, 0);
  const tolk_value *x = tolk_graph_input(g, 1);
  CHECK(tolk_node_input(add_in, 0) == x && tolk_value_describe(x).graph == g);
  CHECK(tolk_node_describe(add_in).graph == then_g);
  const tolk_value *ext_w = tolk_node_input(add_in, 1);
  CHECK(ext_w == tolk_graph_initializer(g, 0));

  tolk_initializer_info ei = tolk_value_initializer(ext_w);
  CHECK(ei.dtype == TOLK_FLOAT && ei.numel == 2 && ei.nbytes == 8 && str_is(ei.external_file, "w.bin"));
  tolk_initializer_info qi = tolk_value_initializer(tolk_graph_initializer(g, 1));
  CHECK(qi.dtype == TOLK_INT4 && qi.numel == 3 && qi.nbytes == 2 && !qi.external_file);
  CHECK(str_is(tolk_dtype_name(qi.dtype), "int4") && tolk_dtype_size(qi.dtype) == 0);

  const tolk_node *f0 = tolk_graph_node(g, 1);
  CHECK(str_is(tolk_node_describe(f0).domain, "my.dom") && str_is(tolk_node_describe(f0).name, "f0"));
  const tolk_node *clip = tolk_graph_node(g, 2);
  CHECK(tolk_node_describe(clip).n_inputs == 3 && tolk_node_input(clip, 1) == NULL);
  const tolk_value *missing = tolk_node_input(clip, 2);
  tolk_value_desc md = tolk_value_describe(missing);
  CHECK(str_is(md.name, "hi_missing") && md.flags == TOLK_VALUE_UNDEFINED && md.producer == NULL);
  CHECK(md.kind == TOLK_TYPE_NONE && md.rank == -1 && tolk_graph_value(g, md.index) == missing);

  tolk_function_info fi = tolk_model_function(model, 0);
  CHECK(str_is(fi.domain, "my.dom") && str_is(fi.name, "MyFn") && fi.body);
  tolk_graph_info bi = tolk_graph_describe(fi.body);
  CHECK(bi.depth == 0 && bi.owner == NULL && bi.n_nodes == 1 && bi.n_inputs == 1 && bi.n_outputs == 1);
  CHECK(str_is(tolk_node_describe(tolk_graph_node(fi.body, 0)).op_type, "Neg"));
  CHECK(tolk_value_describe(tolk_graph_input(fi.body, 0)).kind == TOLK_TYPE_NONE);
  tolk_model_free(model);
  pbw_free(&m);
}

static void test_null_handles(void) {
  tolk_model_info mi = tolk_model_describe(NULL);
  CHECK(!mi.graph && !mi.producer_name && mi.file_bytes == 0 && mi.n_opsets == 0);
  int64_t version = -7;
  const char *s = "unset";
  CHECK(tolk_model_opset(NULL, 0, &version) == NULL && version == -7);
  CHECK(tolk_model_metadata(NULL, 0, &s) == NULL && str_is(s, "unset"));
  CHECK(tolk_model_function(NULL, 0).body == NULL);
  tolk_graph_info gi = tolk_graph_describe(NULL);
  CHECK(!gi.name && gi.n_nodes == 0 && gi.n_values == 0 && !gi.owner);
  CHECK(!tolk_graph_input(NULL, 0) && !tolk_graph_output(NULL, 0) && !tolk_graph_initializer(NULL, 0));
  CHECK(!tolk_graph_value(NULL, 0) && !tolk_graph_node(NULL, 0));
  tolk_node_info ni = tolk_node_describe(NULL);
  CHECK(!ni.op_type && !ni.graph && ni.n_inputs == 0 && ni.n_subgraphs == 0);
  CHECK(!tolk_node_input(NULL, 0) && !tolk_node_output(NULL, 0) && !tolk_node_subgraph(NULL, 0, &s));
  CHECK(str_is(s, "unset"));
  tolk_value_desc vd = tolk_value_describe(NULL);
  CHECK(!vd.name && vd.rank == -1 && vd.kind == TOLK_TYPE_NONE && !vd.graph && !vd.producer);
  CHECK(tolk_value_dim(NULL, 0, &s) == -1 && s == NULL);
  tolk_initializer_info ii = tolk_value_initializer(NULL);
  CHECK(ii.dtype == TOLK_UNDEFINED && ii.rank == -1 && !ii.dims);
}

int main(void) {
  test_small_model();
  test_scopes();
  test_null_handles();
  return tu_finish("test_model_info");
}
