/*
 * test_onnx_malformed.c — hostile model bytes: every one must give a clear
 * error (a status and a non-empty message), never a crash or a sanitizer
 * report. Truncation at every byte offset, wrong wire types, 2^62 lengths,
 * overflowing and negative dims, absurd element counts (timed and measured),
 * 10,000-deep subgraph and type nesting, a cycle, undefined names.
 */
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "onnx/onnx.h"
#include "onnx_pbw.h"
#include "testutil.h"

static tolk_status load(const struct pbw *b, tolk_error *e, tolk_model **out) {
  memset(e, 0, sizeof *e);
  return tolk_model_load_buffer(b->p, b->n, NULL, tolk_model_default_params(), out, e);
}

/* Loads b expecting failure with `want` (0: any error) and a message
 * containing `needle` (NULL: any non-empty message). */
static void expect_fail(const char *what, const struct pbw *b, tolk_status want, const char *needle) {
  tolk_model *m = NULL;
  tolk_error e = {0};
  tolk_status st = load(b, &e, &m);
  CHECK_MSG(st != TOLK_OK, "%s: loaded, expected an error", what);
  CHECK_MSG(m == NULL, "%s: model handed out on failure", what);
  if (st == TOLK_OK) {
    tolk_model_free(m);
    return;
  }
  CHECK_MSG(!want || st == want, "%s: status %s, expected %s (%s)", what, tolk_status_str(st),
            tolk_status_str(want), e.message);
  CHECK_MSG(e.message[0] != '\0', "%s: empty message", what);
  CHECK_MSG(!needle || strstr(e.message, needle), "%s: message '%s' lacks '%s'", what, e.message, needle);
  printf("  %-34s -> %s: %s\n", what, tolk_status_str(st), e.message);
}

static size_t n_lines;
static char last_line[TOLK_ERROR_MESSAGE_MAX];
static void collect(void *user, const char *line) {
  (void)user;
  n_lines++;
  snprintf(last_line, sizeof last_line, "%s", line);
}

/* Loads b (must succeed) and checks it expecting a problem containing needle. */
static void expect_invalid(const char *what, const struct pbw *b, const char *needle) {
  tolk_model *m = NULL;
  tolk_error e = {0};
  tolk_status st = load(b, &e, &m);
  CHECK_MSG(st == TOLK_OK, "%s: load failed: %s", what, e.message);
  if (st) return;
  n_lines = 0;
  last_line[0] = '\0';
  st = tolk_model_check(m, collect, NULL, &e);
  CHECK_MSG(st == TOLK_ERR_INVALID_MODEL, "%s: check gave %s", what, tolk_status_str(st));
  CHECK_MSG(n_lines > 0, "%s: no problem lines", what);
  CHECK_MSG(strstr(e.message, needle) != NULL, "%s: '%s' lacks '%s'", what, e.message, needle);
  printf("  %-34s -> check: %s\n", what, e.message);
  tolk_model_free(m);
}

static void test_small_valid(void) {
  struct pbw b = {0};
  pbw_small_model(&b);
  tolk_model *m;
  tolk_error e = {0};
  CHECK(load(&b, &e, &m) == TOLK_OK);
  struct ir_model *im = tolk_model_ir(m);
  CHECK(im->graph->n_nodes == 2);
  CHECK(!strcmp(im->graph->nodes[0]->op_type, "Add") && im->graph->nodes[0]->opset == 13);
  CHECK(im->graph->nodes[1]->inputs[0] == im->graph->nodes[0]->outputs[0]);
  const struct ir_value *w = im->graph->nodes[0]->inputs[1];
  CHECK(w->init && w->init->numel == 3 && ((const float *)w->init->data)[1] == -2.0f);
  CHECK(im->graph->inputs[0]->type.dims[0].param && !strcmp(im->graph->inputs[0]->type.dims[0].param, "N"));
  CHECK(tolk_model_check(m, NULL, NULL, &e) == TOLK_OK);
  tolk_model_free(m);
  pbw_free(&b);
}

/* Every prefix of a valid model either loads (a prefix that ends at a field
 * boundary is itself a message) or fails with a message; a loaded prefix
 * must also go through the checker. */
static void test_truncation(void) {
  struct pbw b = {0};
  pbw_small_model(&b);
  size_t failed = 0, loaded = 0;
  for (size_t n = 0; n < b.n; n++) {
    tolk_model *m = NULL;
    tolk_error e = {0};
    /* A copy of exactly n bytes, so ASan sees any read past the end. */
    uint8_t *cut = malloc(n ? n : 1);
    memcpy(cut, b.p, n);
    tolk_status st = tolk_model_load_buffer(cut, n, NULL, tolk_model_default_params(), &m, &e);
    if (st) {
      failed++;
      CHECK_MSG(e.message[0], "truncated at %zu: empty message", n);
      CHECK(m == NULL);
    } else {
      loaded++;
      tolk_model_check(m, NULL, NULL, &e);
      tolk_model_free(m);
    }
    free(cut);
  }
  printf("  truncation: %zu prefixes, %zu rejected, %zu loaded\n", b.n, failed, loaded);
  CHECK(failed > b.n / 2);
  pbw_free(&b);

  /* The same inside: the graph's payload cut at every offset, its length
   * field fixed up, so the inner decoders (nodes, tensors, value infos,
   * types) meet the cut rather than the outer reader. */
  struct pbw whole = {0};
  pbw_small_model(&whole);
  /* pbw_small_model writes the graph last: find its payload by decoding
   * the outer message. */
  struct pb r = pb_init(whole.p, whole.n);
  struct pb_field f = {0};
  const char *why;
  while (!pb_eof(&r) && pb_next(&r, &f, &why))
    if (f.number == 7) break;
  CHECK(f.number == 7);
  size_t inner_failed = 0, inner_loaded = 0;
  for (size_t k = 0; k <= f.len; k++) {
    struct pbw m = {0}, o = {0};
    pbw_int(&m, 1, 8);
    pbw_int(&o, 2, 13);
    pbw_msg(&m, 8, &o);
    pbw_bytes(&m, 7, f.data, k);
    tolk_model *mod = NULL;
    tolk_error e = {0};
    uint8_t *copy = malloc(m.n);
    memcpy(copy, m.p, m.n);
    tolk_status st = tolk_model_load_buffer(copy, m.n, NULL, tolk_model_default_params(), &mod, &e);
    if (st) {
      inner_failed++;
      CHECK_MSG(e.message[0], "graph cut at %zu: empty message", k);
    } else {
      inner_loaded++;
      tolk_model_check(mod, NULL, NULL, &e);
      tolk_model_free(mod);
    }
    free(copy);
    pbw_free(&m);
  }
  printf("  graph payload cut: %zu cuts, %zu rejected, %zu loaded (cut at a field boundary)\n",
         f.len + 1, inner_failed, inner_loaded);
  CHECK(inner_failed > 0 && inner_loaded > 0);
  pbw_free(&whole);
}

static void test_wire_types(void) {
  struct pbw b = {0}, g = {0};
  /* graph as a varint */
  pbw_int(&b, 1, 8);
  pbw_int(&b, 7, 5);
  expect_fail("graph field as a varint", &b, TOLK_ERR_MALFORMED, NULL);
  pbw_free(&b);
  /* op_type as a varint */
  struct pbw n = {0};
  pbw_int(&n, 4, 3);
  pbw_msg(&g, 1, &n);
  pbw_model(&b, 8, 13, &g);
  expect_fail("op_type as a varint", &b, TOLK_ERR_MALFORMED, NULL);
  pbw_free(&b);
  /* tensor dims as fixed64 */
  struct pbw t = {0};
  pbw_fixed64(&t, 1, 3);
  pbw_int(&t, 2, 1);
  pbw_msg(&g, 5, &t);
  pbw_model(&b, 8, 13, &g);
  expect_fail("tensor dims as fixed64", &b, TOLK_ERR_MALFORMED, NULL);
  pbw_free(&b);
  /* attribute f as a varint */
  struct pbw a = {0}, attrs = {0};
  pbw_str(&a, 1, "alpha");
  pbw_int(&a, 2, 1);
  pbw_msg(&attrs, 5, &a);
  pbw_node(&g, "LeakyRelu", NULL, (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, &attrs);
  pbw_model(&b, 8, 13, &g);
  expect_fail("attribute f as a varint", &b, TOLK_ERR_MALFORMED, NULL);
  pbw_free(&b);
  /* group wire types and wire type 7 */
  uint8_t grp[] = {0x3b, 0x3c};
  pbw_raw(&b, grp, sizeof grp);
  expect_fail("group wire type", &b, TOLK_ERR_MALFORMED, "group");
  pbw_free(&b);
  uint8_t w7[] = {0x3f, 0x00};
  pbw_raw(&b, w7, sizeof w7);
  expect_fail("wire type 7", &b, TOLK_ERR_MALFORMED, "wire type");
  pbw_free(&b);
  /* field number 0 */
  uint8_t f0[] = {0x02, 0x00};
  pbw_raw(&b, f0, sizeof f0);
  expect_fail("field number 0", &b, TOLK_ERR_MALFORMED, NULL);
  pbw_free(&b);
  /* 11-byte varint */
  uint8_t longv[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  pbw_raw(&b, longv, sizeof longv);
  expect_fail("overlong varint", &b, TOLK_ERR_MALFORMED, NULL);
  pbw_free(&b);
}

static void test_huge_lengths(void) {
  struct pbw b = {0};
  /* graph: LEN 2^62 with 3 bytes behind it */
  pbw_int(&b, 1, 8);
  pbw_key(&b, 7, 2);
  pbw_varint(&b, (uint64_t)1 << 62);
  pbw_raw(&b, "abc", 3);
  expect_fail("graph length 2^62", &b, TOLK_ERR_MALFORMED, "length");
  pbw_free(&b);
  /* a nested tensor's raw_data declaring 2^62 bytes */
  struct pbw g = {0}, t = {0};
  pbw_int(&t, 1, 4);
  pbw_int(&t, 2, 1);
  pbw_key(&t, 9, 2);
  pbw_varint(&t, (uint64_t)1 << 62);
  pbw_msg(&g, 5, &t);
  pbw_model(&b, 8, 13, &g);
  expect_fail("raw_data length 2^62", &b, TOLK_ERR_MALFORMED, "length");
  pbw_free(&b);
  /* packed float_data whose length is not a multiple of 4 */
  pbw_int(&t, 1, 2);
  pbw_int(&t, 2, 1);
  pbw_bytes(&t, 4, "abcdefg", 7);
  pbw_msg(&g, 5, &t);
  pbw_model(&b, 8, 13, &g);
  expect_fail("packed float_data of 7 bytes", &b, TOLK_ERR_MALFORMED, "whole number");
  pbw_free(&b);
}

static void tensor_model(struct pbw *b, const int64_t *dims, int rank, int dtype, const void *raw,
                         size_t raw_len) {
  struct pbw g = {0}, t = {0};
  for (int i = 0; i < rank; i++) pbw_int(&t, 1, dims[i]);
  pbw_int(&t, 2, dtype);
  pbw_str(&t, 8, "t");
  if (raw) pbw_bytes(&t, 9, raw, raw_len);
  pbw_msg(&g, 5, &t);
  pbw_model(b, 8, 13, &g);
}

static void test_dims(void) {
  struct pbw b = {0};
  float four = 4.0f;
  int64_t over[3] = {(int64_t)1 << 32, (int64_t)1 << 32, 4};
  tensor_model(&b, over, 3, 1, &four, 4);
  expect_fail("dims product overflows int64", &b, TOLK_ERR_LIMIT, "overflow");
  pbw_free(&b);
  int64_t bytes_over[2] = {(int64_t)1 << 31, (int64_t)1 << 31}; /* 2^62 floats: 2^64 bytes */
  tensor_model(&b, bytes_over, 2, 1, &four, 4);
  expect_fail("2^62 floats overflow bytes", &b, TOLK_ERR_LIMIT, "overflow");
  pbw_free(&b);
  int64_t neg[2] = {2, -3};
  tensor_model(&b, neg, 2, 1, &four, 4);
  expect_fail("negative dim", &b, TOLK_ERR_INVALID_MODEL, "negative");
  pbw_free(&b);
  int64_t two[1] = {2};
  tensor_model(&b, two, 1, 1, &four, 4);
  expect_fail("raw_data too short", &b, TOLK_ERR_INVALID_MODEL, "raw_data has 4 bytes");
  pbw_free(&b);
  tensor_model(&b, two, 1, 99, &four, 4);
  expect_fail("unknown dtype", &b, TOLK_ERR_UNSUPPORTED, "data_type");
  pbw_free(&b);
  tensor_model(&b, two, 1, 8, "ab", 2);
  expect_fail("string tensor in raw_data", &b, TOLK_ERR_INVALID_MODEL, "string");
  pbw_free(&b);
  int64_t deep[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  tensor_model(&b, deep, 17, 1, &four, 4);
  expect_fail("rank 17", &b, TOLK_ERR_UNSUPPORTED, "rank");
  pbw_free(&b);
  /* Typed field count disagreeing with dims. */
  struct pbw g = {0}, t = {0};
  pbw_int(&t, 1, 3);
  pbw_int(&t, 2, 1);
  pbw_float(&t, 4, 1.0f);
  pbw_float(&t, 4, 2.0f);
  pbw_msg(&g, 5, &t);
  pbw_model(&b, 8, 13, &g);
  expect_fail("float_data of 2 for dims [3]", &b, TOLK_ERR_INVALID_MODEL, "float_data has 2 values");
  pbw_free(&b);
  /* Two storage forms at once. */
  pbw_int(&t, 1, 1);
  pbw_int(&t, 2, 1);
  pbw_float(&t, 4, 1.0f);
  pbw_bytes(&t, 9, &four, 4);
  pbw_msg(&g, 5, &t);
  pbw_model(&b, 8, 13, &g);
  expect_fail("raw_data and float_data", &b, TOLK_ERR_INVALID_MODEL, "more than one form");
  pbw_free(&b);
}

static long max_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A file declaring 2^62 elements (int8, so the byte count itself fits) is
 * rejected fast and small, whichever storage it claims. */
static void test_2p62_elements(void) {
  int64_t dims[2] = {(int64_t)1 << 31, (int64_t)1 << 31};
  struct pbw forms[3] = {{0}, {0}, {0}};
  tensor_model(&forms[0], dims, 2, 3, "x", 1); /* raw_data of 1 byte */
  {
    struct pbw g = {0}, t = {0};
    pbw_int(&t, 1, dims[0]);
    pbw_int(&t, 1, dims[1]);
    pbw_int(&t, 2, 3);
    pbw_int(&t, 5, 7); /* one int32_data value */
    pbw_msg(&g, 5, &t);
    pbw_model(&forms[1], 8, 13, &g);
  }
  {
    struct pbw g = {0}, t = {0}, kv = {0};
    pbw_int(&t, 1, dims[0]);
    pbw_int(&t, 1, dims[1]);
    pbw_int(&t, 2, 3);
    pbw_str(&kv, 1, "location");
    pbw_str(&kv, 2, "weights.bin");
    pbw_msg(&t, 13, &kv);
    pbw_int(&t, 14, 1);
    pbw_msg(&g, 5, &t);
    pbw_model(&forms[2], 8, 13, &g);
  }
  const char *names[3] = {"2^62 int8 in raw_data", "2^62 int8 in int32_data", "2^62 int8 external"};
  char dir[] = "/tmp/tolk-2p62-XXXXXX", file[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(file, sizeof file, "%s/weights.bin", dir);
  FILE *wf = fopen(file, "wb");
  CHECK(wf != NULL);
  if (wf) {
    fwrite("0123456789abcdef", 1, 16, wf);
    fclose(wf);
  }
  for (int i = 0; i < 3; i++) {
    /* The best of five runs, so a shared machine descheduling the test
     * does not count as the loader's time. */
    long rss0 = max_rss_kb();
    double ms = 1e9;
    tolk_model *m = NULL;
    tolk_error e = {0};
    tolk_status st = TOLK_OK;
    for (int run = 0; run < 5; run++) {
      double t0 = now_ms();
      st = tolk_model_load_buffer(forms[i].p, forms[i].n, dir, tolk_model_default_params(), &m, &e);
      double t = now_ms() - t0;
      if (t < ms) ms = t;
      if (!st) tolk_model_free(m);
    }
    long grew = max_rss_kb() - rss0;
    CHECK_MSG(st != TOLK_OK, "%s loaded", names[i]);
    CHECK_MSG(ms < 10.0, "%s took %.3f ms", names[i], ms);
    CHECK_MSG(grew < 50 * 1024, "%s grew RSS by %ld KiB", names[i], grew);
    printf("  %-34s -> %s in %.3f ms, RSS +%ld KiB: %s\n", names[i], tolk_status_str(st), ms, grew, e.message);
    pbw_free(&forms[i]);
  }
  remove(file);
  rmdir(dir);
}

/* Deep nesting is built back to front in one buffer (each level prepends
 * its headers to the bytes of the level inside), so 10,000 levels cost
 * linear time rather than a copy per level. */
struct rbuf {
  uint8_t *buf;
  size_t cap, start;
};

static void rb_raw(struct rbuf *r, const void *p, size_t n) {
  if (n > r->start) {
    fprintf(stderr, "rbuf overflow\n");
    exit(2);
  }
  r->start -= n;
  memcpy(r->buf + r->start, p, n);
}

static void rb_varint(struct rbuf *r, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do {
    t[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) t[n] |= 0x80;
    n++;
  } while (v);
  rb_raw(r, t, n);
}

/* Wraps everything from `from` to the end as field `field` (LEN). */
static size_t rb_wrap(struct rbuf *r, uint32_t field, size_t end_of_payload) {
  rb_varint(r, end_of_payload - r->start);
  rb_varint(r, ((uint64_t)field << 3) | 2);
  return r->start;
}

static void rb_str(struct rbuf *r, uint32_t field, const char *s) {
  rb_raw(r, s, strlen(s));
  rb_varint(r, strlen(s));
  rb_varint(r, ((uint64_t)field << 3) | 2);
}

static void rb_int(struct rbuf *r, uint32_t field, uint64_t v) {
  rb_varint(r, v);
  rb_varint(r, (uint64_t)field << 3);
}

/* Graph nesting: an If whose then_branch holds an If whose then_branch … */
static void nested_ifs(struct pbw *out, int depth) {
  struct rbuf r = {malloc((size_t)depth * 64 + 256), (size_t)depth * 64 + 256, 0};
  r.start = r.cap;
  size_t end = r.cap;
  rb_str(&r, 2, "leaf"); /* innermost graph's contents */
  for (int d = 0; d < depth; d++) {
    size_t graph_end = end;
    /* attribute {name, type GRAPH, g = graph} */
    rb_wrap(&r, 6, graph_end);
    rb_int(&r, 20, 5);
    rb_str(&r, 1, "then_branch");
    rb_wrap(&r, 5, graph_end);
    rb_str(&r, 4, "If");
    rb_str(&r, 1, "c");
    rb_wrap(&r, 1, graph_end); /* node field of the enclosing graph */
  }
  struct pbw g = {0};
  pbw_raw(&g, r.buf + r.start, r.cap - r.start);
  free(r.buf);
  pbw_model(out, 8, 13, &g);
}

static void test_nesting(void) {
  struct pbw b = {0};
  double t0 = now_ms();
  nested_ifs(&b, 10000);
  expect_fail("10,000-deep subgraphs", &b, TOLK_ERR_LIMIT, "nested deeper than 32");
  printf("  (built and rejected in %.1f ms)\n", now_ms() - t0);
  pbw_free(&b);
  nested_ifs(&b, 32);
  tolk_model *m;
  tolk_error e = {0};
  CHECK_MSG(load(&b, &e, &m) == TOLK_OK, "32-deep: %s", e.message);
  if (!e.status) {
    CHECK(tolk_model_ir(m)->max_depth_seen == 32);
    CHECK(tolk_model_check(m, NULL, NULL, &e) == TOLK_ERR_INVALID_MODEL); /* "c" is undefined */
    tolk_model_free(m);
  }
  pbw_free(&b);
  nested_ifs(&b, 33);
  expect_fail("33-deep subgraphs", &b, TOLK_ERR_LIMIT, "nested");
  pbw_free(&b);
  /* A TypeProto nesting sequence types 10,000 deep. */
  size_t cap = 10000 * 16 + 64;
  struct rbuf r = {malloc(cap), cap, cap};
  rb_int(&r, 1, 1);
  rb_wrap(&r, 1, cap); /* tensor_type {elem_type float} */
  for (int d = 0; d < 10000; d++) {
    size_t inner_end = cap;
    rb_wrap(&r, 1, inner_end); /* Sequence.elem_type = TypeProto */
    rb_wrap(&r, 4, inner_end); /* TypeProto.sequence_type */
  }
  struct pbw tp = {0}, vi = {0}, g = {0};
  pbw_raw(&tp, r.buf + r.start, r.cap - r.start);
  free(r.buf);
  pbw_str(&vi, 1, "x");
  pbw_msg(&vi, 2, &tp);
  pbw_msg(&g, 11, &vi);
  pbw_model(&b, 8, 13, &g);
  expect_fail("10,000-deep sequence type", &b, TOLK_ERR_LIMIT, "type nested");
  pbw_free(&b);
}

static void test_graph_rules(void) {
  struct pbw b = {0}, g = {0};
  int64_t d1[1] = {1};
  /* a -> b -> a */
  pbw_node(&g, "Relu", "r0", (const char *const[]){"b", NULL}, (const char *const[]){"a", NULL}, NULL);
  pbw_node(&g, "Relu", "r1", (const char *const[]){"a", NULL}, (const char *const[]){"b", NULL}, NULL);
  pbw_value_info(&g, 12, "b", 1, 1, d1);
  pbw_model(&b, 8, 13, &g);
  expect_invalid("cycle", &b, "topologically");
  {
    tolk_model *m;
    tolk_error e = {0};
    load(&b, &e, &m);
    n_lines = 0;
    tolk_model_check(m, collect, NULL, &e);
    CHECK_MSG(strstr(last_line, "cycle") != NULL, "last line: %s", last_line);
    tolk_model_free(m);
  }
  pbw_free(&b);
  /* undefined input */
  pbw_node(&g, "Relu", "r0", (const char *const[]){"nope", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_value_info(&g, 12, "y", 1, 1, d1);
  pbw_model(&b, 8, 13, &g);
  expect_invalid("undefined input", &b, "node 0 'r0' (Relu): input 0 'nope' is not defined");
  pbw_free(&b);
  /* name assigned twice */
  pbw_value_info(&g, 11, "x", 1, 1, d1);
  pbw_node(&g, "Relu", "r0", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_node(&g, "Neg", "n0", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_value_info(&g, 12, "y", 1, 1, d1);
  pbw_model(&b, 8, 13, &g);
  expect_invalid("duplicate output name", &b, "assigned twice");
  pbw_free(&b);
  /* unknown op, wrong attribute type, missing required attribute */
  struct pbw a = {0}, attrs = {0};
  pbw_str(&a, 1, "axis");
  pbw_int(&a, 20, 1); /* FLOAT */
  pbw_float(&a, 2, 1.0f);
  pbw_msg(&attrs, 5, &a);
  pbw_value_info(&g, 11, "x", 1, 1, d1);
  pbw_node(&g, "Softmax", "sm", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, &attrs);
  pbw_value_info(&g, 12, "y", 1, 1, d1);
  pbw_model(&b, 8, 13, &g);
  expect_invalid("attribute of the wrong type", &b, "attribute 'axis' is FLOAT; Softmax-13 expects INT");
  pbw_free(&b);
  pbw_value_info(&g, 11, "x", 1, 1, d1);
  pbw_node(&g, "Frobnicate", "f", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_value_info(&g, 12, "y", 1, 1, d1);
  pbw_model(&b, 8, 13, &g);
  expect_invalid("unknown op", &b, "unknown op Frobnicate");
  pbw_free(&b);
  pbw_value_info(&g, 11, "x", 1, 1, d1);
  pbw_node(&g, "Cast", "c", (const char *const[]){"x", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_value_info(&g, 12, "y", 1, 1, d1);
  pbw_model(&b, 8, 13, &g);
  expect_invalid("missing required attribute", &b, "required attribute 'to'");
  pbw_free(&b);
  /* no opset import for a domain, ir_version missing */
  struct pbw n = {0};
  pbw_value_info(&g, 11, "x", 1, 1, d1);
  pbw_str(&n, 1, "x");
  pbw_str(&n, 2, "y");
  pbw_str(&n, 4, "Gelu");
  pbw_str(&n, 7, "com.example");
  pbw_msg(&g, 1, &n);
  pbw_value_info(&g, 12, "y", 1, 1, d1);
  pbw_model(&b, 8, 13, &g);
  expect_invalid("domain not imported", &b, "'com.example' is not in the opset imports");
  pbw_free(&b);
}

int main(void) {
  test_small_valid();
  test_truncation();
  test_wire_types();
  test_huge_lengths();
  test_dims();
  test_2p62_elements();
  test_nesting();
  test_graph_rules();
  return tu_finish("test_onnx_malformed");
}
