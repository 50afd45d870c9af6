/*
 * test_onnx_quantize_edge.c — tolk_model_quantize on small models built
 * here (tests/onnx_pbw.h): fields tolk does not know survive in the model,
 * the graph and an untouched node; the header fields come out byte for byte;
 * two MatMuls reading one activation share one DynamicQuantizeLinear; a
 * weight that a non-quantized node also reads is kept beside its quantized
 * form; the quantized graph computes close to the float one. And every way
 * to fail — opset 10, nothing to quantize (none there, excluded, other op
 * types), not a model, an output folder that does not exist — fails with
 * its own status and message and leaves no output (an existing output file
 * keeps its content).
 */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core/pb.h"
#include "onnx_pbw.h"
#include "testutil.h"
#include "tolk.h"

static char dir[64], in_path[128], out_path[128];

static const float w_data[12] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, 0.125f, -2.0f, 1.0f, 0.0f, 0.3f, -0.6f};

/* y = MatMul(x, w), z = MatMul(x, w2) (one activation, two MatMuls),
 * r = Relu(y) carrying unknown field 99, and with `shared_weight`
 * ww = Add(w, w), a reader of w that is not quantized. The model carries
 * unknown field 97 and the graph 98. */
static void build(int64_t opset, bool shared_weight) {
  struct pbw g = {0}, m = {0};
  int64_t wd[2] = {4, 3}, xd[2] = {2, 4}, yd[2] = {2, 3};
  pbw_node(&g, "MatMul", "mm", (const char *const[]){"x", "w", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_node(&g, "MatMul", "mm2", (const char *const[]){"x", "w2", NULL}, (const char *const[]){"z", NULL}, NULL);
  struct pbw relu = {0};
  pbw_str(&relu, 1, "y");
  pbw_str(&relu, 2, "r");
  pbw_str(&relu, 3, "relu");
  pbw_str(&relu, 4, "Relu");
  pbw_int(&relu, 99, 12345);
  pbw_msg(&g, 1, &relu);
  /* A second reader of w that is not quantized: w must stay. */
  if (shared_weight)
    pbw_node(&g, "Add", "add", (const char *const[]){"w", "w", NULL}, (const char *const[]){"ww", NULL}, NULL);
  pbw_str(&g, 2, "edge");
  pbw_float_tensor(&g, 5, "w", 2, wd, w_data, 12);
  pbw_float_tensor(&g, 5, "w2", 2, wd, w_data, 12);
  pbw_value_info(&g, 11, "x", TOLK_FLOAT, 2, xd);
  pbw_value_info(&g, 12, "r", TOLK_FLOAT, 2, yd);
  pbw_value_info(&g, 12, "z", TOLK_FLOAT, 2, yd);
  if (shared_weight) pbw_value_info(&g, 12, "ww", TOLK_FLOAT, 2, wd);
  pbw_int(&g, 98, 7);
  pbw_model(&m, 8, opset, &g);
  pbw_int(&m, 97, 4242);
  FILE *f = fopen(in_path, "wb");
  CHECK(f && fwrite(m.p, 1, m.n, f) == m.n);
  if (f) fclose(f);
  pbw_free(&m);
}

struct lines {
  char text[4096];
};

static void collect(void *user, const char *line) {
  struct lines *l = user;
  size_t n = strlen(l->text);
  snprintf(l->text + n, sizeof l->text - n, "%s\n", line);
}

/* Whether the message [p, p+n) has a field `number` holding varint v. */
static bool has_field(const uint8_t *p, size_t n, uint32_t number, uint64_t v, const uint8_t **sub, size_t *sub_len) {
  struct pb r = pb_init(p, n);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r) && pb_next(&r, &f, &why)) {
    if (f.number == number && f.wire == PB_VARINT && f.u64 == v) return true;
    if (sub && f.number == number && f.wire == PB_LEN) {
      *sub = f.data;
      *sub_len = f.len;
      return true;
    }
  }
  return false;
}

static void test_rewrite(void) {
  build(13, false);
  struct lines l = {""};
  tolk_quantize_summary s;
  tolk_error err;
  CHECK_MSG(tolk_model_quantize(in_path, out_path, tolk_quantize_default_params(), collect, &l, &s, &err) == TOLK_OK,
            "%s", err.message);
  CHECK(s.quantized == 2 && s.skipped == 0);
  CHECK(strstr(l.text, "quantized MatMul 'mm' (B 'w' 4x3)\n") != NULL);
  char *in, *out;
  size_t in_n, out_n;
  CHECK(tolk_read_file(in_path, 1 << 20, &in, &in_n, &err) == TOLK_OK);
  CHECK(tolk_read_file(out_path, 1 << 20, &out, &out_n, &err) == TOLK_OK);
  /* ir_version, producer and opsets come first in both: byte for byte. */
  size_t head = 0;
  while (head < in_n && (uint8_t)in[head] != 0x3a) head += 1; /* the graph's key, field 7 LEN */
  CHECK(head > 0 && head < out_n && !memcmp(in, out, head));
  const uint8_t *g = NULL, *node = NULL;
  size_t g_n = 0, node_n = 0;
  CHECK(has_field((const uint8_t *)out, out_n, 97, 4242, NULL, NULL));
  CHECK(has_field((const uint8_t *)out, out_n, 7, 0, &g, &g_n));
  CHECK(g && has_field(g, g_n, 98, 7, NULL, NULL));
  /* The Relu is untouched, its unknown field included. */
  struct pb r = pb_init(g, g_n);
  struct pb_field f;
  const char *why;
  size_t dql = 0;
  while (g && !pb_eof(&r) && pb_next(&r, &f, &why)) {
    if (f.number != 1) continue;
    if (memmem(f.data, f.len, "Relu", 4)) node = f.data, node_n = f.len;
    dql += memmem(f.data, f.len, "DynamicQuantizeLinear", 21) != NULL;
  }
  CHECK(node && has_field(node, node_n, 99, 12345, NULL, NULL));
  CHECK_MSG(dql == 1, "%zu DynamicQuantizeLinear nodes for one activation", dql);
  /* The float weights are gone: nothing else read them. */
  CHECK(!memmem(out, out_n, w_data, sizeof w_data));
  free(in);
  free(out);
}

/* The quantized graph computes close to the float one. */
static void test_runs(void) {
  tolk_session *a = NULL, *b = NULL;
  tolk_error err;
  CHECK(!tolk_session_create_from_file(in_path, tolk_session_default_params(), &a, &err));
  CHECK_MSG(!tolk_session_create_from_file(out_path, tolk_session_default_params(), &b, &err), "%s", err.message);
  static const float x[8] = {1.0f, -0.5f, 0.25f, 2.0f, -1.5f, 0.75f, 0.0f, 1.0f};
  int64_t xd[2] = {2, 4};
  tolk_tensor *in = NULL, *ya[2] = {0}, *yb[2] = {0};
  CHECK(!tolk_tensor_create(TOLK_FLOAT, 2, xd, x, sizeof x, &in, &err));
  const char *names[] = {"x"}, *outs[] = {"r", "z"};
  const tolk_tensor *ins[] = {in};
  if (a && b && in && !tolk_session_run(a, 1, names, ins, 2, outs, ya, NULL, &err) &&
      !tolk_session_run(b, 1, names, ins, 2, outs, yb, NULL, &err)) {
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < 6; i++) {
        float p = ((const float *)tolk_tensor_data(ya[k]))[i], q = ((const float *)tolk_tensor_data(yb[k]))[i];
        /* Two 8-bit quantizations over |x| <= 2, |w| <= 2, k = 4. */
        CHECK_MSG(fabsf(p - q) < 0.06f, "output %d[%d]: %g float, %g int8", k, i, p, q);
      }
  } else {
    CHECK_MSG(0, "%s", err.message);
  }
  for (int k = 0; k < 2; k++) tolk_tensor_free(ya[k]), tolk_tensor_free(yb[k]);
  tolk_tensor_free(in);
  tolk_session_free(a);
  tolk_session_free(b);
}

static void test_shared_weight_kept(void) {
  build(13, true);
  tolk_error err;
  tolk_quantize_summary s;
  CHECK_MSG(tolk_model_quantize(in_path, out_path, tolk_quantize_default_params(), NULL, NULL, &s, &err) == TOLK_OK,
            "%s", err.message);
  tolk_model *m = NULL;
  CHECK(!tolk_model_load(out_path, tolk_model_default_params(), &m, &err));
  size_t inits = m ? tolk_graph_describe(tolk_model_describe(m).graph).n_initializers : 0;
  /* w kept for the Add, w2 dropped; three new ones for each. */
  CHECK_MSG(inits == 1 + 6, "%zu initializers", inits);
  tolk_model_free(m);
}

static bool dir_has_only(const char *keep) {
  DIR *d = opendir(dir);
  bool only = true;
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.' && strcmp(e->d_name, "in.onnx") && (!keep || strcmp(e->d_name, keep))) only = false;
  if (d) closedir(d);
  return only;
}

/* A failure with `status` and `needle` in the message, nothing written. */
static void expect_failure(const char *what, tolk_quantize_params p, const char *out, tolk_status status,
                           const char *needle) {
  tolk_error err = {0};
  tolk_quantize_summary s;
  tolk_status st = tolk_model_quantize(in_path, out, p, NULL, NULL, &s, &err);
  CHECK_MSG(st == status, "%s: status %d (%s), wanted %d", what, st, err.message, status);
  CHECK_MSG(strstr(err.message, needle) != NULL, "%s: message '%s' lacks '%s'", what, err.message, needle);
}

static void test_failures(void) {
  unlink(out_path);
  build(10, false);
  expect_failure("opset 10", tolk_quantize_default_params(), out_path, TOLK_ERR_UNSUPPORTED,
                 "imports ai.onnx opset 10; DynamicQuantizeLinear needs 11 or later");
  CHECK(dir_has_only(NULL));
  build(13, false);
  tolk_quantize_params p = tolk_quantize_default_params();
  const char *both[] = {"mm", "mm2"}, *gather[] = {"Gather"};
  p.exclude = both;
  p.n_exclude = 2;
  /* An existing output keeps its content when a run fails. */
  FILE *f = fopen(out_path, "w");
  if (f) fputs("old", f), fclose(f);
  expect_failure("all excluded", p, out_path, TOLK_ERR_NOT_FOUND, "nothing to quantize");
  char *old;
  size_t n;
  tolk_error err;
  CHECK(tolk_read_file(out_path, 100, &old, &n, &err) == TOLK_OK && n == 3 && !memcmp(old, "old", 3));
  free(old);
  unlink(out_path);
  p = tolk_quantize_default_params();
  p.op_types = gather;
  p.n_op_types = 1;
  expect_failure("Gather only", p, out_path, TOLK_ERR_NOT_FOUND, "nothing to quantize");
  char missing[256];
  snprintf(missing, sizeof missing, "%s/no/such/folder/out.onnx", dir);
  expect_failure("missing folder", tolk_quantize_default_params(), missing, TOLK_ERR_IO, missing);
  f = fopen(in_path, "w");
  if (f) fputs("this is not an ONNX model\n", f), fclose(f);
  tolk_error e2 = {0};
  tolk_quantize_summary s;
  CHECK(tolk_model_quantize(in_path, out_path, tolk_quantize_default_params(), NULL, NULL, &s, &e2) != TOLK_OK);
  CHECK_MSG(strstr(e2.message, in_path) != NULL, "'%s' does not name the file", e2.message);
  CHECK(dir_has_only(NULL));
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/tolk-qedge-XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  snprintf(in_path, sizeof in_path, "%s/in.onnx", dir);
  snprintf(out_path, sizeof out_path, "%s/out.onnx", dir);
  test_rewrite();
  test_runs();
  test_shared_weight_kept();
  test_failures();
  unlink(in_path);
  unlink(out_path);
  rmdir(dir);
  return tu_finish("test_onnx_quantize_edge");
}
