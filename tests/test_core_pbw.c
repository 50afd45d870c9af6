/*
 * test_core_pbw.c — the protobuf writer (src/core/pbw.c) against the reader
 * (pb.c): every field kind read back as written, varints at their edges,
 * the hard limit, and a real model (marian-tiny's encoder) rebuilt field by
 * field — the graph as a nested message, its nodes and initializers
 * re-nested, every other field copied — coming out byte for byte. Then the
 * atomic file write: the content lands whole, and a folder that cannot be
 * written leaves no file behind.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pbw.h"
#include "testutil.h"

static void test_fields(void) {
  struct pbw b;
  pbw_init(&b, 1 << 20);
  pbw_uint(&b, 1, 0);
  pbw_uint(&b, 2, 127);
  pbw_uint(&b, 3, 128);
  pbw_uint(&b, 4, UINT64_MAX);
  pbw_int(&b, 5, -1);
  pbw_float(&b, 6, 1.5f);
  pbw_fixed64(&b, 7, 0x0123456789abcdefull);
  pbw_string(&b, 8, "MatMul");
  size_t m = pbw_begin(&b, 9);
  pbw_uint(&b, 1, 300);
  size_t inner = pbw_begin(&b, 2);
  pbw_string(&b, 1, "deep");
  pbw_end(&b, inner);
  pbw_end(&b, m);
  CHECK(pbw_status(&b, "fields", NULL) == TOLK_OK);

  static const uint64_t want[] = {0, 127, 128, UINT64_MAX, UINT64_MAX};
  struct pb r = pb_init(b.p, b.n);
  struct pb_field f;
  const char *why;
  for (uint32_t i = 1; i <= 5; i++) {
    CHECK(pb_next(&r, &f, &why) && f.number == i && f.wire == PB_VARINT && f.u64 == want[i - 1]);
  }
  CHECK(pb_next(&r, &f, &why) && f.wire == PB_FIXED32 && pb_f32(f.u64) == 1.5f);
  CHECK(pb_next(&r, &f, &why) && f.wire == PB_FIXED64 && f.u64 == 0x0123456789abcdefull);
  CHECK(pb_next(&r, &f, &why) && f.len == 6 && !memcmp(f.data, "MatMul", 6));
  CHECK(pb_next(&r, &f, &why) && f.number == 9 && f.wire == PB_LEN);
  struct pb s = pb_sub(&r, &f);
  CHECK(pb_next(&s, &f, &why) && f.number == 1 && f.u64 == 300);
  CHECK(pb_next(&s, &f, &why) && f.number == 2 && f.wire == PB_LEN);
  struct pb d = pb_sub(&s, &f);
  CHECK(pb_next(&d, &f, &why) && f.len == 4 && !memcmp(f.data, "deep", 4) && pb_eof(&d));
  CHECK(pb_eof(&s) && pb_eof(&r));
  pbw_release(&b);
}

/* A nested message longer than 127 bytes needs a 2-byte length: the
 * writer moves the message to make room. */
static void test_long_nested(void) {
  struct pbw b;
  pbw_init(&b, 1 << 20);
  uint8_t blob[300];
  for (size_t i = 0; i < sizeof blob; i++) blob[i] = (uint8_t)i;
  size_t m = pbw_begin(&b, 1);
  pbw_bytes(&b, 2, blob, sizeof blob);
  pbw_end(&b, m);
  struct pb r = pb_init(b.p, b.n);
  struct pb_field f;
  const char *why;
  CHECK(pb_next(&r, &f, &why) && f.len == 303 && pb_eof(&r));
  struct pb s = pb_sub(&r, &f);
  CHECK(pb_next(&s, &f, &why) && f.len == 300 && !memcmp(f.data, blob, 300));
  pbw_release(&b);
}

static void test_limit(void) {
  struct pbw b;
  tolk_error err;
  pbw_init(&b, 16);
  pbw_string(&b, 1, "0123456789");
  CHECK(pbw_status(&b, "small", NULL) == TOLK_OK);
  pbw_string(&b, 2, "0123456789");
  pbw_uint(&b, 3, 1); /* ignored after the failure */
  CHECK(pbw_status(&b, "the model", &err) == TOLK_ERR_LIMIT);
  CHECK(strstr(err.message, "the model: would be larger than 16 bytes") != NULL);
  CHECK(b.n <= 16); /* what was written is never more than the limit */
  pbw_release(&b);
}

/* The fields rebuilt as nested messages at each level of a ModelProto:
 * graph (7); in the graph node (1), initializer (5), input (11), output (12). */
static const uint32_t levels[][4] = {{7, 0, 0, 0}, {1, 5, 11, 12}};

/* Re-emits the message [p, p+len) at `level`: the fields levels[level]
 * names rebuilt as nested messages (one level down), the rest copied. */
static void rebuild(struct pbw *b, const uint8_t *p, size_t len, size_t level) {
  struct pb r = pb_init(p, len);
  struct pb_field f;
  const char *why;
  while (!pb_eof(&r)) {
    const uint8_t *start = r.p;
    if (!pb_next(&r, &f, &why)) {
      CHECK_MSG(0, "%s", why);
      return;
    }
    bool nest = false;
    for (size_t i = 0; level < 2 && i < 4; i++) nest |= f.wire == PB_LEN && f.number == levels[level][i];
    if (!nest) {
      pbw_copy(b, start, r.p);
      continue;
    }
    size_t m = pbw_begin(b, f.number);
    rebuild(b, f.data, f.len, level + 1);
    pbw_end(b, m);
  }
}

static void test_model_roundtrip(void) {
  const char *fix = getenv("TOLK_FIXTURES");
  char path[4096];
  snprintf(path, sizeof path, "%s/marian-tiny/encoder_model.onnx", fix ? fix : "tests/fixtures");
  char *data;
  size_t len;
  tolk_error err;
  CHECK_MSG(tolk_read_file(path, 64 << 20, &data, &len, &err) == TOLK_OK, "%s", err.message);
  if (!data) return;
  struct pbw b;
  pbw_init(&b, 64 << 20);
  rebuild(&b, (const uint8_t *)data, len, 0);
  CHECK(pbw_status(&b, path, NULL) == TOLK_OK);
  CHECK_MSG(b.n == len && !memcmp(b.p, data, len), "%zu bytes written, %zu read", b.n, len);
  pbw_release(&b);
  free(data);
}

static bool dir_is_empty(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  bool empty = true;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
  if (d) closedir(d);
  return empty;
}

static void test_atomic_write(void) {
  char dir[] = "/tmp/tolk-pbw-XXXXXX", path[256];
  tolk_error err;
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/out.onnx", dir);
  CHECK(tolk_write_file_atomic(path, "first", 5, &err) == TOLK_OK);
  CHECK(tolk_write_file_atomic(path, "second!", 7, &err) == TOLK_OK);
  char *data;
  size_t len;
  CHECK(tolk_read_file(path, 100, &data, &len, &err) == TOLK_OK && len == 7 && !memcmp(data, "second!", 7));
  free(data);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
  unlink(path);
  /* A folder without write permission (root ignores it, so a missing
   * folder stands in as well): an error naming the path, nothing left. */
  char sub[300], target[400];
  snprintf(sub, sizeof sub, "%s/ro", dir);
  CHECK(mkdir(sub, 0555) == 0);
  snprintf(target, sizeof target, "%s/nowhere/out.onnx", dir);
  CHECK(tolk_write_file_atomic(target, "x", 1, &err) == TOLK_ERR_IO);
  CHECK(strstr(err.message, target) != NULL);
  if (geteuid() != 0) {
    snprintf(target, sizeof target, "%s/out.onnx", sub);
    CHECK(tolk_write_file_atomic(target, "x", 1, &err) == TOLK_ERR_IO);
  }
  CHECK(dir_is_empty(sub));
  rmdir(sub);
  CHECK(dir_is_empty(dir));
  rmdir(dir);
}

int main(void) {
  test_fields();
  test_long_nested();
  test_limit();
  test_model_roundtrip();
  test_atomic_write();
  return tu_finish("test_core_pbw");
}
