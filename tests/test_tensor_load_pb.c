/*
 * test_tensor_load_pb.c — tolk_tensor_load_pb, the public reader of ONNX
 * TensorProto files: the simple-cnn fixture's test data, and each failure
 * (missing file, bytes that are not a TensorProto, a string tensor, NULL
 * arguments) with its status and a message naming the file once.
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "onnx_pbw.h"
#include "testutil.h"
#include "tolk.h"

static char tmp_path[] = "/tmp/test_tensor_load_pb_XXXXXX";

/* Writes len bytes to the scratch file and returns its path. */
static const char *scratch(const void *data, size_t len) {
  FILE *f = fopen(tmp_path, "wb");
  CHECK(f != NULL);
  if (!f) return tmp_path;
  CHECK(fwrite(data, 1, len, f) == len);
  fclose(f);
  return tmp_path;
}

static size_t count(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void test_fixture(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/simple-cnn/test_data_set_0/input_0.pb", tu_fixtures());
  tolk_tensor *t = NULL;
  tolk_error e = {0};
  tolk_status st = tolk_tensor_load_pb(path, &t, &e);
  CHECK_MSG(st == TOLK_OK, "%s", e.message);
  if (!t) return;
  const int64_t want[4] = {1, 3, 32, 32};
  CHECK(tolk_tensor_dtype(t) == TOLK_FLOAT && tolk_tensor_rank(t) == 4);
  CHECK(!memcmp(tolk_tensor_dims(t), want, sizeof want) && tolk_tensor_nbytes(t) == 3 * 32 * 32 * 4);
  tolk_tensor_free(t);
}

static void expect_fail(const char *path, tolk_status want, const char *text) {
  tolk_tensor *t = (tolk_tensor *)&t; /* must come back NULL */
  tolk_error e = {0};
  CHECK(tolk_tensor_load_pb(path, &t, &e) == want && t == NULL && e.status == want);
  CHECK_MSG(strstr(e.message, text) && count(e.message, path) == 1, "%s", e.message);
}

static void test_failures(void) {
  int fd = mkstemp(tmp_path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  expect_fail("/nonexistent/input_0.pb", TOLK_ERR_IO, "No such file");
  static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
  expect_fail(scratch(junk, sizeof junk), TOLK_ERR_MALFORMED, tmp_path);
  struct pbw t = {0};
  pbw_int(&t, 1, 1);
  pbw_int(&t, 2, TOLK_STRING);
  pbw_bytes(&t, 6, "abc", 3);
  expect_fail(scratch(t.p, t.n), TOLK_ERR_UNSUPPORTED, "string tensors are not supported");
  pbw_free(&t);
  unlink(tmp_path);

  tolk_error e = {0};
  tolk_tensor *out = NULL;
  CHECK(tolk_tensor_load_pb(NULL, &out, &e) == TOLK_ERR_INVALID_ARGUMENT && out == NULL);
  CHECK(tolk_tensor_load_pb("x.pb", NULL, &e) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK(tolk_tensor_load_pb("/nonexistent.pb", &out, NULL) == TOLK_ERR_IO);
}

int main(void) {
  test_fixture();
  test_failures();
  return tu_finish("test_tensor_load_pb");
}
