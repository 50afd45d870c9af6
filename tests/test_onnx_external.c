/*
 * test_onnx_external.c — external data: valid layouts load (in place, one
 * mapping per file, also past 2 GiB), and every way out of the model folder
 * is refused with a clear error: absolute paths, "..", "a/../../x",
 * symlinked files and folders leading out, hard links, bad or out-of-file
 * offsets and lengths, unknown keys. Builds its folder under /tmp.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx.h"
#include "onnx_pbw.h"
#include "testutil.h"

static char root[64], dir[128];

/* A key/value StringStringEntryProto list; NULL-terminated pairs. */
static void ext_tensor(struct pbw *g, const char *name, int dtype, int64_t n, const char *const *kv) {
  struct pbw t = {0};
  pbw_int(&t, 1, n);
  pbw_int(&t, 2, dtype);
  pbw_str(&t, 8, name);
  for (; kv && kv[0]; kv += 2) {
    struct pbw e = {0};
    pbw_str(&e, 1, kv[0]);
    pbw_str(&e, 2, kv[1]);
    pbw_msg(&t, 13, &e);
  }
  pbw_int(&t, 14, 1);
  pbw_msg(g, 5, &t);
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK_MSG(f != NULL, "cannot write %s", path);
  if (!f) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

/* Writes a model whose graph is g into dir/name and loads it. */
static tolk_status load_graph(struct pbw *g, int load_ext, tolk_model **m, tolk_error *e) {
  struct pbw b = {0};
  pbw_model(&b, 8, 13, g);
  char path[256];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  write_file(path, b.p, b.n);
  pbw_free(&b);
  tolk_model_params p = tolk_model_default_params();
  p.load_external_data = load_ext;
  memset(e, 0, sizeof *e);
  return tolk_model_load(path, p, m, e);
}

static void expect_refused(const char *what, const char *const *kv, const char *needle) {
  struct pbw g = {0};
  ext_tensor(&g, "w", TOLK_FLOAT, 4, kv);
  tolk_model *m = NULL;
  tolk_error e;
  tolk_status st = load_graph(&g, 1, &m, &e);
  CHECK_MSG(st != TOLK_OK, "%s: loaded", what);
  CHECK_MSG(!needle || strstr(e.message, needle), "%s: '%s' lacks '%s'", what, e.message, needle);
  printf("  %-30s -> %s: %s\n", what, tolk_status_str(st), e.message);
  if (!st) tolk_model_free(m);
}

static void setup(void) {
  snprintf(root, sizeof root, "/tmp/tolk-ext-XXXXXX");
  CHECK(mkdtemp(root) != NULL);
  snprintf(dir, sizeof dir, "%s/model", root);
  CHECK(mkdir(dir, 0755) == 0);
  char p[256], q[256];
  float w[2048];
  for (int i = 0; i < 2048; i++) w[i] = (float)i;
  snprintf(p, sizeof p, "%s/w.bin", dir);
  write_file(p, w, sizeof w);
  snprintf(p, sizeof p, "%s/sub", dir);
  CHECK(mkdir(p, 0755) == 0);
  snprintf(p, sizeof p, "%s/sub/w2.bin", dir);
  write_file(p, w, 64);
  snprintf(p, sizeof p, "%s/outside.bin", root);
  write_file(p, w, 64);
  snprintf(p, sizeof p, "%s/link_in.bin", dir);
  CHECK(symlink("w.bin", p) == 0);
  snprintf(p, sizeof p, "%s/link_out.bin", dir);
  CHECK(symlink("../outside.bin", p) == 0);
  snprintf(p, sizeof p, "%s/abs_link.bin", dir);
  snprintf(q, sizeof q, "%s/outside.bin", root);
  CHECK(symlink(q, p) == 0);
  snprintf(p, sizeof p, "%s/up", dir);
  CHECK(symlink("..", p) == 0);
  snprintf(p, sizeof p, "%s/hard.bin", dir);
  CHECK(link(q, p) == 0);
}

static void teardown(void) {
  static const char *const files[] = {"model/w.bin", "model/sub/w2.bin", "model/link_in.bin",
                                      "model/link_out.bin", "model/abs_link.bin", "model/up",
                                      "model/hard.bin", "model/model.onnx", "model/big.bin",
                                      "outside.bin"};
  char p[256];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", root, files[i]);
    unlink(p);
  }
  snprintf(p, sizeof p, "%s/model/sub", root);
  rmdir(p);
  rmdir(dir);
  rmdir(root);
}

static void test_valid(void) {
  struct pbw g = {0};
  ext_tensor(&g, "a", TOLK_FLOAT, 4, (const char *const[]){"location", "w.bin", NULL});
  ext_tensor(&g, "b", TOLK_FLOAT, 4, (const char *const[]){"location", "w.bin", "offset", "4096", "length", "16", NULL});
  ext_tensor(&g, "c", TOLK_FLOAT, 2, (const char *const[]){"location", "sub/w2.bin", "offset", "8", NULL});
  ext_tensor(&g, "d", TOLK_FLOAT, 2, (const char *const[]){"location", "link_in.bin", "offset", "6", NULL});
  ext_tensor(&g, "e", TOLK_FLOAT, 1, (const char *const[]){"location", "./w.bin", "checksum", "abc", NULL});
  tolk_model *m;
  tolk_error e;
  CHECK_MSG(load_graph(&g, 1, &m, &e) == TOLK_OK, "%s", e.message);
  if (e.status) return;
  struct ir_model *im = tolk_model_ir(m);
  struct ir_value **in = im->graph->initializers;
  CHECK(((const float *)in[0]->init->data)[3] == 3.0f && in[0]->init->zero_copy);
  CHECK(((const float *)in[1]->init->data)[0] == 1024.0f);
  CHECK(((const float *)in[2]->init->data)[0] == 2.0f);
  /* offset 6: not 4-aligned, so copied into the arena, still right */
  float wf[4] = {0, 1, 2, 3}, want[2];
  memcpy(want, (const uint8_t *)wf + 6, sizeof want);
  CHECK(!in[3]->init->zero_copy && (uintptr_t)in[3]->init->data % 4 == 0);
  CHECK(!memcmp(in[3]->init->data, want, sizeof want));
  /* ./w.bin and w.bin and link_in.bin are one file: mapped once */
  CHECK_MSG(im->n_ext_files == 2, "%zu files mapped", im->n_ext_files);
  CHECK(tolk_model_check(m, NULL, NULL, &e) == TOLK_OK);
  tolk_model_free(m);

  /* Not loading external data: recorded, and the checker checks ranges. */
  ext_tensor(&g, "a", TOLK_FLOAT, 4, (const char *const[]){"location", "w.bin", NULL});
  ext_tensor(&g, "z", TOLK_FLOAT, 4, (const char *const[]){"location", "w.bin", "offset", "8190", NULL});
  CHECK_MSG(load_graph(&g, 0, &m, &e) == TOLK_OK, "%s", e.message);
  if (e.status) return;
  im = tolk_model_ir(m);
  CHECK(im->graph->initializers[0]->init->data == NULL && im->n_ext_files == 0);
  CHECK(!strcmp(im->graph->initializers[1]->init->ext_location, "w.bin") &&
        im->graph->initializers[1]->init->ext_offset == 8190);
  tolk_status st = tolk_model_check(m, NULL, NULL, &e);
  CHECK_MSG(st == TOLK_ERR_INVALID_MODEL && strstr(e.message, "outside"), "%s", e.message);
  printf("  unloaded, checked               -> %s\n", e.message);
  tolk_model_free(m);
}

static void test_escapes(void) {
  char abs_path[256];
  snprintf(abs_path, sizeof abs_path, "%s/outside.bin", root);
  expect_refused("absolute path", (const char *const[]){"location", abs_path, NULL}, "absolute");
  expect_refused("../x", (const char *const[]){"location", "../outside.bin", NULL}, "'..'");
  expect_refused("a/../../x", (const char *const[]){"location", "sub/../../outside.bin", NULL}, "'..'");
  expect_refused("trailing ..", (const char *const[]){"location", "sub/..", NULL}, "'..'");
  expect_refused("backslash", (const char *const[]){"location", "..\\outside.bin", NULL}, "backslash");
  expect_refused("symlink out (relative)", (const char *const[]){"location", "link_out.bin", NULL}, "outside the model folder");
  expect_refused("symlink out (absolute)", (const char *const[]){"location", "abs_link.bin", NULL}, "outside the model folder");
  expect_refused("symlinked folder out", (const char *const[]){"location", "up/outside.bin", NULL}, "outside the model folder");
  expect_refused("hard link", (const char *const[]){"location", "hard.bin", NULL}, "hard link");
  expect_refused("folder, not a file", (const char *const[]){"location", "sub", NULL}, "not a regular file");
  expect_refused("missing file", (const char *const[]){"location", "nope.bin", NULL}, "nope.bin");
  expect_refused("empty location", (const char *const[]){"location", "", NULL}, "location");
  expect_refused("no location", (const char *const[]){"offset", "0", NULL}, "without a location");
  expect_refused("negative offset", (const char *const[]){"location", "w.bin", "offset", "-1", NULL}, "offset");
  expect_refused("offset not a number", (const char *const[]){"location", "w.bin", "offset", "12abc", NULL}, "offset");
  expect_refused("offset 2^64", (const char *const[]){"location", "w.bin", "offset", "18446744073709551616", NULL}, "offset");
  expect_refused("offset past the end", (const char *const[]){"location", "w.bin", "offset", "8192", NULL}, "outside");
  expect_refused("range past the end", (const char *const[]){"location", "w.bin", "offset", "8180", NULL}, "outside");
  expect_refused("negative length", (const char *const[]){"location", "w.bin", "length", "-16", NULL}, "length");
  expect_refused("length != dims", (const char *const[]){"location", "w.bin", "length", "12", NULL}, "length 12");
  expect_refused("unknown key", (const char *const[]){"location", "w.bin", "basepath", "/etc", NULL}, "unknown external_data key");
  expect_refused("location twice", (const char *const[]){"location", "w.bin", "location", "/etc/passwd", NULL}, "twice");
  /* A buffer load has no folder: external data is refused. */
  struct pbw g = {0}, b = {0};
  ext_tensor(&g, "w", TOLK_FLOAT, 4, (const char *const[]){"location", "w.bin", NULL});
  pbw_model(&b, 8, 13, &g);
  tolk_model *m;
  tolk_error e = {0};
  CHECK(tolk_model_load_buffer(b.p, b.n, NULL, tolk_model_default_params(), &m, &e) == TOLK_ERR_INVALID_ARGUMENT);
  printf("  %-30s -> %s\n", "buffer without a folder", e.message);
  pbw_free(&b);
}

/* A model whose external data passes 2 GiB: a sparse 3 GiB file holding a
 * 2.25 GiB tensor and a small one past the 2.5 GiB mark. */
static void test_over_2gib(void) {
  char p[256];
  snprintf(p, sizeof p, "%s/big.bin", dir);
  int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0);
  if (fd < 0) return;
  const off_t size = (off_t)3 << 30, off = (off_t)5 << 29;
  float marker[4] = {1, 2, 3, 4};
  bool ok = ftruncate(fd, size) == 0 && pwrite(fd, marker, sizeof marker, off) == (ssize_t)sizeof marker;
  close(fd);
  if (!ok) {
    printf("  over 2 GiB: cannot create a sparse 3 GiB file here, skipped\n");
    return;
  }
  char offs[32], big[32];
  snprintf(offs, sizeof offs, "%lld", (long long)off);
  snprintf(big, sizeof big, "%lld", (long long)((int64_t)9 << 28));
  struct pbw g = {0};
  ext_tensor(&g, "huge", TOLK_UINT8, (int64_t)9 << 28, (const char *const[]){"location", "big.bin", "length", big, NULL});
  ext_tensor(&g, "far", TOLK_FLOAT, 4, (const char *const[]){"location", "big.bin", "offset", offs, NULL});
  tolk_model *m;
  tolk_error e;
  CHECK_MSG(load_graph(&g, 1, &m, &e) == TOLK_OK, "%s", e.message);
  if (!e.status) {
    struct ir_model *im = tolk_model_ir(m);
    const struct ir_tensor *h = im->graph->initializers[0]->init, *f = im->graph->initializers[1]->init;
    CHECK(h->nbytes == (size_t)9 << 28 && h->zero_copy);
    CHECK(((const float *)f->data)[3] == 4.0f);
    CHECK(im->n_ext_files == 1 && im->ext_files[0].size == (size_t)size);
    printf("  over 2 GiB: 3 GiB file mapped once, 2.25 GiB tensor in place, data at 2.5 GiB reads back\n");
    tolk_model_free(m);
  }
  unlink(p);
}

int main(void) {
  setup();
  test_valid();
  test_escapes();
  test_over_2gib();
  teardown();
  return tu_finish("test_onnx_external");
}
