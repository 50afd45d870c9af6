/*
 * test_onnx_tensor.c — every TensorProto storage form and dtype decodes to
 * the native layout the executor expects (raw_data in place when aligned,
 * typed fields packed and unpacked, strings, complex, 4-bit, sparse, empty,
 * scalar), and the rest of the IR: all attribute kinds, subgraph outer-scope
 * references, local functions, metadata, opset resolution, test-data
 * sequences.
 */
#include "onnx/onnx.h"
#include "onnx_pbw.h"
#include "testutil.h"

static struct tolk_arena arena;

/* Decodes the TensorProto in t (freed) through onnx_tensor_decode. */
static struct ir_tensor *decode(struct pbw *t) {
  struct ir_tensor *out = NULL;
  tolk_error e = {0};
  tolk_status st = onnx_tensor_decode(t->p, t->n, &arena, &out, &e);
  CHECK_MSG(st == TOLK_OK, "decode: %s", e.message);
  if (out && out->data) /* copied: must not point into the message */
    CHECK((const uint8_t *)out->data < t->p || (const uint8_t *)out->data >= t->p + t->n);
  pbw_free(t);
  return out;
}

static void header(struct pbw *t, int dtype, int rank, const int64_t *dims) {
  for (int i = 0; i < rank; i++) pbw_int(t, 1, dims[i]);
  pbw_int(t, 2, dtype);
  pbw_str(t, 8, "t");
}

static void test_typed_fields(void) {
  struct pbw t = {0}, packed = {0};
  int64_t d3[1] = {3}, d2[1] = {2}, d4[1] = {4};
  /* float_data: one packed run then one unpacked value */
  header(&t, TOLK_FLOAT, 1, d3);
  float fv[2] = {1.5f, -2.25f};
  pbw_bytes(&t, 4, fv, sizeof fv);
  pbw_float(&t, 4, 8.0f);
  struct ir_tensor *x = decode(&t);
  CHECK(x && x->numel == 3 && x->nbytes == 12);
  if (x) CHECK(((const float *)x->data)[0] == 1.5f && ((const float *)x->data)[2] == 8.0f);

  /* int32_data carrying narrower types, packed */
  static const struct {
    int dtype;
    int64_t in[4];
    uint64_t want[4];
    size_t width;
  } cases[] = {
      {TOLK_INT8, {-1, 127, -128, 5}, {0xff, 0x7f, 0x80, 5}, 1},
      {TOLK_UINT8, {255, 0, 1, 200}, {255, 0, 1, 200}, 1},
      {TOLK_INT16, {-2, 32767, -32768, 7}, {0xfffe, 0x7fff, 0x8000, 7}, 2},
      {TOLK_UINT16, {65535, 1, 2, 3}, {65535, 1, 2, 3}, 2},
      {TOLK_BOOL, {0, 1, 5, 0}, {0, 1, 1, 0}, 1},
      {TOLK_FLOAT16, {0x3c00, 0xc000, 0x7bff, 0}, {0x3c00, 0xc000, 0x7bff, 0}, 2},
      {TOLK_BFLOAT16, {0x3f80, 0xbf80, 0x4049, 1}, {0x3f80, 0xbf80, 0x4049, 1}, 2},
      {TOLK_INT32, {-7, 2147483647, -2147483647 - 1, 0}, {0xfffffff9, 0x7fffffff, 0x80000000, 0}, 4},
      {ONNX_FLOAT8E4M3FN, {0x38, 0x7f, 0, 1}, {0x38, 0x7f, 0, 1}, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    header(&t, cases[c].dtype, 1, d4);
    for (int i = 0; i < 4; i++) pbw_varint(&packed, (uint64_t)cases[c].in[i]);
    pbw_msg(&t, 5, &packed);
    x = decode(&t);
    CHECK_MSG(x && x->nbytes == 4 * cases[c].width, "dtype %d", cases[c].dtype);
    for (int i = 0; x && i < 4; i++) {
      uint64_t v = 0;
      memcpy(&v, (const uint8_t *)x->data + i * cases[c].width, cases[c].width);
      CHECK_MSG(v == cases[c].want[i], "dtype %d element %d: %llx", cases[c].dtype, i, (unsigned long long)v);
    }
  }
  /* int64_data unpacked, double_data packed, uint64_data for uint32/uint64 */
  header(&t, TOLK_INT64, 1, d2);
  pbw_int(&t, 7, -5);
  pbw_int(&t, 7, INT64_MAX);
  x = decode(&t);
  CHECK(x && ((const int64_t *)x->data)[0] == -5 && ((const int64_t *)x->data)[1] == INT64_MAX);
  header(&t, TOLK_DOUBLE, 1, d2);
  double dv[2] = {3.25, -1e300};
  pbw_bytes(&t, 10, dv, sizeof dv);
  x = decode(&t);
  CHECK(x && ((const double *)x->data)[1] == -1e300);
  header(&t, TOLK_UINT64, 1, d2);
  pbw_int(&t, 11, (int64_t)UINT64_MAX);
  pbw_int(&t, 11, 9);
  x = decode(&t);
  CHECK(x && ((const uint64_t *)x->data)[0] == UINT64_MAX);
  header(&t, TOLK_UINT32, 1, d2);
  pbw_int(&t, 11, 4294967295);
  pbw_int(&t, 11, 1);
  x = decode(&t);
  CHECK(x && x->nbytes == 8 && ((const uint32_t *)x->data)[0] == 4294967295u);
  /* complex64: two floats per element */
  header(&t, TOLK_COMPLEX64, 1, d2);
  float cv[4] = {1, 2, 3, 4};
  pbw_bytes(&t, 4, cv, sizeof cv);
  x = decode(&t);
  CHECK(x && x->nbytes == 16 && ((const float *)x->data)[3] == 4.0f);
  /* int4: three elements packed in two int32_data values */
  header(&t, ONNX_INT4, 1, d3);
  pbw_int(&t, 5, 0x21);
  pbw_int(&t, 5, 0x0f);
  x = decode(&t);
  CHECK(x && x->nbytes == 2 && ((const uint8_t *)x->data)[0] == 0x21 && ((const uint8_t *)x->data)[1] == 0x0f);
  /* uint4 raw: ceil(3/2) bytes */
  header(&t, ONNX_UINT4, 1, d3);
  pbw_bytes(&t, 9, "\x21\x03", 2);
  x = decode(&t);
  CHECK(x && x->nbytes == 2);
  /* strings, with an empty one */
  header(&t, TOLK_STRING, 1, d3);
  pbw_str(&t, 6, "hello");
  pbw_str(&t, 6, "");
  pbw_bytes(&t, 6, "a\0b", 3);
  x = decode(&t);
  if (x) {
    const struct ir_bytes *s = x->data;
    CHECK(s[0].len == 5 && !memcmp(s[0].data, "hello", 5));
    CHECK(s[1].len == 0);
    CHECK(s[2].len == 3 && s[2].data[1] == 0);
  }
  /* empty tensor: no data at all */
  int64_t d0[2] = {0, 5};
  header(&t, TOLK_FLOAT, 2, d0);
  x = decode(&t);
  CHECK(x && x->numel == 0 && x->data == NULL && x->nbytes == 0);
  /* scalar */
  header(&t, TOLK_FLOAT, 0, NULL);
  float one = 1.0f;
  pbw_bytes(&t, 9, &one, 4);
  x = decode(&t);
  CHECK(x && x->rank == 0 && x->numel == 1 && *(const float *)x->data == 1.0f);
}

/* Initializer raw_data is used in place at every offset; misaligned is
 * flagged (the executor aligns what kernels read typed: test_onnx_unaligned). */
static void test_zero_copy(void) {
  int in_place = 0, copied = 0;
  for (int pad = 0; pad < 8; pad++) {
    struct pbw g = {0}, t = {0}, m = {0};
    int64_t d[1] = {4};
    float w[4] = {1, 2, 3, 4};
    char name[16] = "w";
    for (int i = 0; i < pad; i++) name[i + 1] = 'x';
    name[pad + 1] = '\0';
    pbw_int(&t, 1, d[0]);
    pbw_int(&t, 2, TOLK_FLOAT);
    pbw_str(&t, 8, name);
    pbw_bytes(&t, 9, w, sizeof w);
    pbw_msg(&g, 5, &t);
    pbw_model(&m, 8, 13, &g);
    /* 16-aligned copy of the model so the payload's alignment is decided by
     * its offset alone. */
    uint8_t *buf = aligned_alloc(16, (m.n + 15) & ~(size_t)15);
    memcpy(buf, m.p, m.n);
    tolk_model *model;
    tolk_error e = {0};
    CHECK(tolk_model_load_buffer(buf, m.n, NULL, tolk_model_default_params(), &model, &e) == TOLK_OK);
    const struct ir_tensor *x = tolk_model_ir(model)->graph->initializers[0]->init;
    bool in_buf = (const uint8_t *)x->data >= buf && (const uint8_t *)x->data < buf + m.n;
    bool aligned = (uintptr_t)x->data % 4 == 0;
    CHECK(in_buf && x->zero_copy);
    CHECK(x->misaligned == !aligned);
    CHECK(!memcmp(x->data, w, sizeof w));
    in_place += aligned;
    copied += !aligned;
    tolk_model_free(model);
    free(buf);
    pbw_free(&m);
  }
  printf("  zero-copy: 8 of 8 payload offsets used in place, %d aligned, %d flagged misaligned\n", in_place, copied);
  CHECK(in_place == 2 && copied == 6);
}

static void test_sparse_and_values(void) {
  /* sparse initializer: dims [2, 3], values at linear 1 and 5 */
  struct pbw g = {0}, sp = {0}, idx = {0}, m = {0};
  int64_t d2[1] = {2};
  float v[2] = {7, 9};
  pbw_float_tensor(&sp, 1, "s", 1, d2, v, 2);
  pbw_int(&idx, 1, 2);
  pbw_int(&idx, 2, TOLK_INT64);
  pbw_int(&idx, 7, 1);
  pbw_int(&idx, 7, 5);
  pbw_msg(&sp, 2, &idx);
  pbw_int(&sp, 3, 2);
  pbw_int(&sp, 3, 3);
  pbw_msg(&g, 15, &sp);
  pbw_model(&m, 8, 13, &g);
  tolk_model *model;
  tolk_error e = {0};
  CHECK_MSG(tolk_model_load_buffer(m.p, m.n, NULL, tolk_model_default_params(), &model, &e) == TOLK_OK, "%s",
            e.message);
  if (!e.status) {
    const struct ir_tensor *x = tolk_model_ir(model)->graph->initializers[0]->init;
    const float *f = x->data;
    CHECK(x->numel == 6 && f[0] == 0 && f[1] == 7 && f[5] == 9 && !strcmp(x->name, "s"));
    tolk_model_free(model);
  }
  pbw_free(&m);
  /* SequenceProto of two tensors */
  struct pbw seq = {0}, t = {0};
  pbw_str(&seq, 1, "seq");
  pbw_int(&seq, 2, 1);
  pbw_float_tensor(&seq, 3, "a", 1, d2, v, 2);
  int64_t d0[1] = {0};
  pbw_int(&t, 1, d0[0]);
  pbw_int(&t, 2, TOLK_INT64);
  pbw_msg(&seq, 3, &t);
  struct onnx_value *val;
  CHECK(onnx_value_decode(seq.p, seq.n, ONNX_VALUE_SEQUENCE, &arena, &val, &e) == TOLK_OK);
  CHECK(val && val->n_items == 2 && val->items[0]->tensor->numel == 2 && val->items[1]->tensor->numel == 0);
  pbw_free(&seq);
}

/* ---------------------------------------------------------------- IR shape */

static void attr_graph(struct pbw *attrs, const char *name, const char *in, const char *out) {
  struct pbw a = {0}, g = {0};
  pbw_node(&g, "Identity", NULL, (const char *const[]){in, NULL}, (const char *const[]){out, NULL}, NULL);
  pbw_str(&g, 2, name);
  pbw_value_info(&g, 12, out, TOLK_FLOAT, -1, NULL);
  pbw_str(&a, 1, name);
  pbw_int(&a, 20, IR_ATTR_GRAPH);
  pbw_msg(&a, 6, &g);
  pbw_msg(attrs, 5, &a);
}

static void test_attributes_and_scopes(void) {
  struct pbw g = {0}, attrs = {0}, a = {0}, m = {0};
  int64_t d1[1] = {1};
  pbw_value_info(&g, 11, "x", TOLK_FLOAT, 1, d1);
  pbw_value_info(&g, 11, "c", TOLK_BOOL, 0, NULL);
  /* every attribute kind on one custom-domain node */
  pbw_str(&a, 1, "f"); pbw_int(&a, 20, 1); pbw_float(&a, 2, 0.5f); pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "i"); pbw_int(&a, 20, 2); pbw_int(&a, 3, -3); pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "s"); pbw_int(&a, 20, 3); pbw_str(&a, 4, "abc"); pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "t"); pbw_int(&a, 20, 4);
  pbw_float_tensor(&a, 5, "tv", 1, d1, (const float[]){4.0f}, 1);
  pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "fs"); pbw_int(&a, 20, 6);
  pbw_bytes(&a, 7, (const float[]){1, 2}, 8); pbw_float(&a, 7, 3.0f); pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "is"); pbw_int(&a, 20, 7);
  pbw_int(&a, 8, 1); pbw_int(&a, 8, -2);
  struct pbw pk = {0};
  pbw_varint(&pk, 3);
  pbw_varint(&pk, (uint64_t)-4);
  pbw_msg(&a, 8, &pk);
  pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "ss"); pbw_int(&a, 20, 8); pbw_str(&a, 9, "p"); pbw_str(&a, 9, "q"); pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "ts"); pbw_int(&a, 20, 9);
  pbw_float_tensor(&a, 10, "t0", 1, d1, (const float[]){1.0f}, 1);
  pbw_float_tensor(&a, 10, "t1", 1, d1, (const float[]){2.0f}, 1);
  pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "tp"); pbw_int(&a, 20, 13);
  pbw_tensor_type(&a, 14, TOLK_INT64, 2, (const int64_t[]){-1, 4}, "B");
  pbw_msg(&attrs, 5, &a);
  pbw_str(&a, 1, "tps"); pbw_int(&a, 20, 14);
  pbw_tensor_type(&a, 15, TOLK_FLOAT, -1, NULL, NULL);
  pbw_msg(&attrs, 5, &a);
  /* untyped (IR v1 style) INT attribute: type inferred */
  pbw_str(&a, 1, "old"); pbw_int(&a, 3, 11); pbw_msg(&attrs, 5, &a);
  struct pbw n = {0};
  pbw_str(&n, 1, "x");
  pbw_str(&n, 2, "k");
  pbw_str(&n, 3, "custom");
  pbw_str(&n, 4, "Thing");
  pbw_str(&n, 7, "com.example");
  pbw_raw(&n, attrs.p, attrs.n);
  pbw_free(&attrs);
  pbw_msg(&g, 1, &n);
  /* If whose branches read the outer 'x'; then_branch nests a Loop-like
   * GRAPHS attribute reading 'x' two levels down. */
  attr_graph(&attrs, "then_branch", "x", "tb");
  {
    struct pbw inner = {0}, ia = {0}, mid = {0};
    pbw_node(&inner, "Neg", NULL, (const char *const[]){"x", NULL}, (const char *const[]){"deep", NULL}, NULL);
    pbw_value_info(&inner, 12, "deep", TOLK_FLOAT, -1, NULL);
    pbw_str(&ia, 1, "bodies");
    pbw_int(&ia, 20, IR_ATTR_GRAPHS);
    pbw_msg(&ia, 11, &inner);
    struct pbw ias = {0};
    pbw_msg(&ias, 5, &ia);
    pbw_node(&mid, "Custom", NULL, NULL, (const char *const[]){"eb", NULL}, &ias);
    pbw_value_info(&mid, 12, "eb", TOLK_FLOAT, -1, NULL);
    struct pbw ea = {0};
    pbw_str(&ea, 1, "else_branch");
    pbw_int(&ea, 20, IR_ATTR_GRAPH);
    pbw_msg(&ea, 6, &mid);
    pbw_msg(&attrs, 5, &ea);
  }
  pbw_node(&g, "If", "if0", (const char *const[]){"c", NULL}, (const char *const[]){"y", NULL}, &attrs);
  pbw_value_info(&g, 12, "y", TOLK_FLOAT, 1, d1);
  pbw_int(&m, 1, 8);
  struct pbw o1 = {0}, o2 = {0}, md = {0};
  pbw_str(&o1, 1, "ai.onnx");
  pbw_int(&o1, 2, 17);
  pbw_msg(&m, 8, &o1);
  pbw_str(&o2, 1, "com.example");
  pbw_int(&o2, 2, 2);
  pbw_msg(&m, 8, &o2);
  pbw_str(&md, 1, "author");
  pbw_str(&md, 2, "tests");
  pbw_msg(&m, 14, &md);
  /* a local function com.example::Twice(a) -> b, imports ai.onnx 18 */
  {
    struct pbw f = {0}, fo = {0};
    pbw_str(&f, 1, "Twice");
    pbw_str(&f, 4, "a");
    pbw_str(&f, 5, "b");
    pbw_str(&f, 6, "scale");
    pbw_node_f(&f, 7, "Add", NULL, (const char *const[]){"a", "a", NULL}, (const char *const[]){"b", NULL},
               NULL);
    pbw_str(&fo, 1, "");
    pbw_int(&fo, 2, 18);
    pbw_msg(&f, 9, &fo);
    pbw_str(&f, 10, "com.example");
    pbw_msg(&m, 25, &f);
  }
  pbw_msg(&m, 7, &g);

  tolk_model *model;
  tolk_error e = {0};
  CHECK_MSG(tolk_model_load_buffer(m.p, m.n, NULL, tolk_model_default_params(), &model, &e) == TOLK_OK, "%s",
            e.message);
  pbw_free(&m);
  if (e.status) return;
  struct ir_model *im = tolk_model_ir(model);
  CHECK(im->n_opsets == 2 && !strcmp(im->opsets[0].domain, ""));
  CHECK(im->n_metadata == 1 && !strcmp(im->metadata[0].value, "tests"));
  const struct ir_node *thing = im->graph->nodes[0];
  CHECK(thing->opset == 2 && !strcmp(thing->domain, "com.example"));
  CHECK(ir_attr_float(thing, "f", 0) == 0.5f);
  CHECK(ir_attr_int(thing, "i", 0) == -3);
  CHECK(!strcmp(ir_attr_string(thing, "s", ""), "abc"));
  CHECK(ir_attr_int(thing, "old", 0) == 11 && ir_node_attr(thing, "old")->type == IR_ATTR_INT);
  CHECK(!strcmp(ir_attr_string(thing, "missing", "dflt"), "dflt"));
  const struct ir_attr *at = ir_node_attr(thing, "t");
  CHECK(at && at->t && *(const float *)at->t->data == 4.0f);
  at = ir_node_attr(thing, "fs");
  CHECK(at && at->n == 3 && at->floats[2] == 3.0f);
  at = ir_node_attr(thing, "is");
  CHECK(at && at->n == 4 && at->ints[1] == -2 && at->ints[3] == -4);
  at = ir_node_attr(thing, "ss");
  CHECK(at && at->n == 2 && at->strings[1].data[0] == 'q');
  at = ir_node_attr(thing, "ts");
  CHECK(at && at->n == 2 && *(const float *)at->tensors[1]->data == 2.0f);
  at = ir_node_attr(thing, "tp");
  CHECK(at && at->tp && at->tp->dtype == TOLK_INT64 && at->tp->rank == 2 && !strcmp(at->tp->dims[0].param, "B") &&
        at->tp->dims[1].value == 4);
  at = ir_node_attr(thing, "tps");
  CHECK(at && at->n == 1 && at->tps[0].rank == -1);

  const struct ir_node *ifn = im->graph->nodes[1];
  const struct ir_value *x = im->graph->inputs[0];
  const struct ir_graph *tb = ir_node_attr(ifn, "then_branch")->g;
  const struct ir_graph *eb = ir_node_attr(ifn, "else_branch")->g;
  CHECK(tb->parent == im->graph && tb->owner == ifn && tb->depth == 1);
  CHECK(tb->nodes[0]->inputs[0] == x && tb->n_outer_refs == 1 && tb->outer_refs[0] == x);
  const struct ir_graph *inner = ir_node_attr(eb->nodes[0], "bodies")->graphs[0];
  CHECK(inner->depth == 2 && inner->nodes[0]->inputs[0] == x);
  CHECK(eb->n_outer_refs == 1 && eb->outer_refs[0] == x); /* the middle graph passes it on */
  CHECK(ir_lookup(inner, "x") == x && ir_lookup(inner, "nope") == NULL);
  CHECK(im->max_depth_seen == 2);
  for (size_t i = 0; i < im->graph->n_values; i++) CHECK(im->graph->values[i]->index == (int)i);

  CHECK(im->n_functions == 1);
  if (im->n_functions) {
    const struct ir_function *f = &im->functions[0];
    CHECK(!strcmp(f->name, "Twice") && !strcmp(f->domain, "com.example") && f->n_attr_names == 1);
    CHECK(f->body->n_inputs == 1 && f->body->n_outputs == 1);
  }
  tolk_model_free(model);
}

int main(void) {
  tolk_arena_init(&arena, 0);
  test_typed_fields();
  test_zero_copy();
  test_sparse_and_values();
  test_attributes_and_scopes();
  tolk_arena_release(&arena);
  return tu_finish("test_onnx_tensor");
}
