/*
 * test_exec_pack_share.c — packed MatMul/Gemm weights are shared by content
 * across sessions on separate models, and the file pages of weights read only
 * as packed copies are released after session creation.
 *
 * Sharing: models in separate buffers holding equal weights share one packed
 * entry per weight (op_packed_stats); a model differing in one weight shares
 * the others only. Outputs are bit-identical across the sharing sessions and
 * match a plain reference; freeing sessions (and their models and buffers) in
 * either order keeps the survivors right, and a later model still finds the
 * entry through a source that is still alive (ASan checks no freed source is
 * read).
 *
 * Pages: a model written to a temp file and loaded mapped has, after session
 * creation, none of the whole pages inside its packed weights mapped
 * (/proc/self/pagemap), also one another node reads too, while a weight only
 * unpacked readers read keeps its pages;
 * outputs stay right; a second model from the same bytes shares the packed
 * copies by content and leaves neither model's pages mapped; a second session
 * on the same model (which packs again from the file) is right too.
 *
 * int8: MatMulInteger's B packed for the int8 GEMM is shared the same way —
 * marian-tiny's decoder_with_past_model_quantized adds no entry beside
 * decoder_model_quantized's, whose weights it holds — and the file pages of
 * such a weight (a 64 KiB one in a file written here) are given back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/exec.h"
#include "onnx/onnx.h"
#include "onnx_pbw.h"
#include "ops/matmul.h" /* op_packed_stats */
#include "testutil.h"

/* A weight of 8.1 MiB: the content checks read 8 MiB at a time
 * (matmul_pack.c, CHECK_PIECE), so sharing is decided over two pieces. */
enum { M = 3, K = 2048, N = 1040 };

static float wa[K * N], wb[K * N], wb2[K * N], x[M * K];

static void init(struct pbw *g, const char *name, int64_t d0, int64_t d1, const float *data) {
  struct pbw t = {0};
  pbw_int(&t, 1, d0);
  pbw_int(&t, 1, d1);
  pbw_int(&t, 2, TOLK_FLOAT);
  pbw_str(&t, 8, name);
  pbw_bytes(&t, 9, data, (size_t)(d0 * d1) * sizeof(float));
  pbw_msg(g, 5, &t);
}

static void node(struct pbw *g, const char *op, const char *in0, const char *in1,
                 const char *out) {
  const char *ins[3] = {in0, in1, NULL};
  pbw_node(g, op, out, ins, (const char *const[]){out, NULL}, NULL);
}

/* ya = x·Wa, yb = x·Wb; with `plain_b` also z = Wb·s for an input s (Wb has a
 * reader besides its packer), zc = Relu(Wc) (folded, so Wc's pages are read
 * at creation) and zd = Wc·s (Wc, never packed, is read at run time). */
static void build(struct pbw *m, const float *a, const float *b, bool plain_b) {
  struct pbw g = {0};
  node(&g, "MatMul", "x", "Wa", "ya");
  node(&g, "MatMul", "x", "Wb", "yb");
  if (plain_b) node(&g, "Mul", "Wb", "s", "z");
  if (plain_b) node(&g, "Relu", "Wc", NULL, "zc");
  if (plain_b) node(&g, "Mul", "Wc", "s", "zd");
  pbw_str(&g, 2, "pack_share");
  init(&g, "Wa", K, N, a);
  init(&g, "Wb", K, N, b);
  if (plain_b) init(&g, "Wc", K, N, a);
  pbw_value_info(&g, 11, "x", TOLK_FLOAT, 2, (int64_t[]){M, K});
  if (plain_b) pbw_value_info(&g, 11, "s", TOLK_FLOAT, 1, (int64_t[]){1});
  pbw_value_info(&g, 12, "ya", TOLK_FLOAT, -1, NULL);
  pbw_value_info(&g, 12, "yb", TOLK_FLOAT, -1, NULL);
  if (plain_b) pbw_value_info(&g, 12, "z", TOLK_FLOAT, -1, NULL);
  if (plain_b) pbw_value_info(&g, 12, "zc", TOLK_FLOAT, -1, NULL);
  if (plain_b) pbw_value_info(&g, 12, "zd", TOLK_FLOAT, -1, NULL);
  pbw_model(m, 8, 13, &g);
}

static void fill(void) {
  for (int i = 0; i < K * N; i++) {
    wa[i] = (float)(i % 7) * 0.37f - 1.1f;
    wb[i] = (float)(i % 13) * -0.029f + 0.161f;
  }
  memcpy(wb2, wb, sizeof wb);
  wb2[K * N - 1] += 1.0f; /* in the second piece */
  for (int i = 0; i < M * K; i++) x[i] = (float)(i % 11) * 0.173f - 0.9f;
}

static size_t live_entries(void) {
  size_t n = 0;
  op_packed_stats(&n, NULL);
  return n;
}

/* Runs s into out[0..1] = ya, yb; returns whether it ran. */
static bool run(tolk_session *s, tolk_tensor **out) {
  tolk_error e = {0};
  tolk_tensor *in[2] = {NULL, NULL};
  out[0] = out[1] = NULL;
  const float one = 1.0f;
  const size_t n_in = tolk_session_input_count(s);
  if (tolk_tensor_create(TOLK_FLOAT, 2, (int64_t[]){M, K}, x, sizeof x, &in[0], &e) ||
      (n_in > 1 && tolk_tensor_create(TOLK_FLOAT, 1, (int64_t[]){1}, &one, sizeof one, &in[1], &e))) {
    tolk_tensor_free(in[0]);
    return false;
  }
  static const char *const in_names[] = {"x", "s"}, *const names[] = {"ya", "yb"};
  tolk_status st = tolk_session_run(s, n_in, in_names, (const tolk_tensor *const *)in, 2, names,
                                    out, NULL, &e);
  tolk_tensor_free(in[0]);
  tolk_tensor_free(in[1]);
  CHECK_MSG(st == TOLK_OK, "run: %s", e.message);
  return st == TOLK_OK;
}

/* Whether t is x·w within 1e-5 (a plain double reference). */
static bool near_ref(const tolk_tensor *t, const float *w) {
  if (!t || tolk_tensor_nbytes(t) != M * N * sizeof(float)) return false;
  const float *y = tolk_tensor_data(t);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)x[i * K + k] * w[k * N + j];
      double d = acc - y[i * N + j];
      if (d > 1e-4 || d < -1e-4) return false;
    }
  return true;
}

static bool same(const tolk_tensor *a, const tolk_tensor *b) {
  return a && b && tolk_tensor_nbytes(a) == tolk_tensor_nbytes(b) &&
         !memcmp(tolk_tensor_data(a), tolk_tensor_data(b), tolk_tensor_nbytes(a));
}

/* One model in its own malloc'd buffer with its session. */
struct inst {
  struct pbw buf;
  tolk_model *m;
  tolk_session *s;
  tolk_tensor *y[2];
};

static bool open_inst(struct inst *in, const float *b) {
  memset(in, 0, sizeof *in);
  build(&in->buf, wa, b, false);
  tolk_error e = {0};
  CHECK_MSG(tolk_model_load_buffer(in->buf.p, in->buf.n, NULL, tolk_model_default_params(),
                                   &in->m, &e) == TOLK_OK,
            "load: %s", e.message);
  if (!in->m) return false;
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  CHECK_MSG(tolk_session_create(in->m, p, &in->s, &e) == TOLK_OK, "session: %s", e.message);
  return in->s && run(in->s, in->y);
}

/* Frees the session, the model and the buffer, scribbling over the buffer
 * first so a packed entry still reading it would see other bytes. */
static void close_inst(struct inst *in) {
  tolk_tensor_free(in->y[0]);
  tolk_tensor_free(in->y[1]);
  tolk_session_free(in->s);
  tolk_model_free(in->m);
  if (in->buf.p) memset(in->buf.p, 0x5a, in->buf.n);
  pbw_free(&in->buf);
  memset(in, 0, sizeof *in);
}

static void test_share(int order) {
  const size_t base = live_entries();
  struct inst i1, i2, i3, i4;
  CHECK(open_inst(&i1, wb));
  CHECK(live_entries() == base + 2);
  CHECK(open_inst(&i2, wb)); /* same bytes, another buffer: shares both */
  CHECK_MSG(live_entries() == base + 2, "equal weights packed twice: %zu entries",
            live_entries() - base);
  CHECK(open_inst(&i3, wb2)); /* one weight differs: only Wa is shared */
  CHECK(live_entries() == base + 3);
  CHECK(near_ref(i1.y[0], wa) && near_ref(i1.y[1], wb));
  CHECK(same(i1.y[0], i2.y[0]) && same(i1.y[1], i2.y[1]) && same(i1.y[0], i3.y[0]));
  CHECK(near_ref(i3.y[1], wb2));

  /* Free one of the sharing pair, then open another equal model: it must
   * find the entry through the survivor's source, the freed one is gone. */
  struct inst *gone = order ? &i2 : &i1, *kept = order ? &i1 : &i2;
  close_inst(gone);
  CHECK(live_entries() == base + 3);
  tolk_tensor *y[2];
  CHECK(run(kept->s, y) && same(y[0], i3.y[0]) && near_ref(y[1], wb));
  tolk_tensor_free(y[0]);
  tolk_tensor_free(y[1]);
  CHECK(open_inst(&i4, wb));
  CHECK(live_entries() == base + 3);
  CHECK(near_ref(i4.y[0], wa) && near_ref(i4.y[1], wb) && same(i4.y[1], kept->y[1]));

  close_inst(order ? &i4 : &i3);
  close_inst(kept);
  CHECK(live_entries() == base + (order ? 2 : 2));
  struct inst *last = order ? &i3 : &i4;
  CHECK(run(last->s, y) && near_ref(y[0], wa) && near_ref(y[1], order ? wb2 : wb));
  tolk_tensor_free(y[0]);
  tolk_tensor_free(y[1]);
  close_inst(last);
  CHECK(live_entries() == base);
}

/* Pages mapped into this process among the whole pages inside [p, p+n),
 * from /proc/self/pagemap's present bit. (mincore would not do: for a file
 * mapping it reports the page cache, which MADV_DONTNEED leaves alone; what
 * counts towards RSS is whether the page is mapped here.) */
static size_t resident(const void *p, size_t n) {
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t b = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
  uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
  if (e <= b) return 0;
  FILE *f = fopen("/proc/self/pagemap", "rb");
  if (!f) return (size_t)-1;
  size_t r = 0;
  if (fseek(f, (long)(b / (uintptr_t)ps * 8), SEEK_SET) == 0) {
    for (uintptr_t a = b; a < e; a += (uintptr_t)ps) {
      uint64_t ent;
      if (fread(&ent, 8, 1, f) != 1) {
        r = (size_t)-1;
        break;
      }
      r += (size_t)(ent >> 63);
    }
  } else {
    r = (size_t)-1;
  }
  fclose(f);
  return r;
}

static void test_pages(void) {
  char path[] = "/tmp/tolk_pack_share_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  struct pbw mb = {0};
  build(&mb, wa, wb, true);
  CHECK(write(fd, mb.p, mb.n) == (ssize_t)mb.n);
  close(fd);
  pbw_free(&mb);
  tolk_model *m = NULL;
  tolk_error e = {0};
  CHECK_MSG(tolk_model_load(path, tolk_model_default_params(), &m, &e) == TOLK_OK, "load: %s",
            e.message);
  if (!m) goto done;
  const struct ir_graph *g = tolk_model_ir(m)->graph;
  const struct ir_tensor *ta = ir_lookup(g, "Wa")->init, *tb = ir_lookup(g, "Wb")->init;
  CHECK(ta->zero_copy && tb->zero_copy);
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  tolk_session *s1 = NULL, *s2 = NULL;
  CHECK_MSG(tolk_session_create(m, p, &s1, &e) == TOLK_OK, "session: %s", e.message);
  if (!s1) goto free_model;
  /* Packing read Wa and Wb whole: their pages are given back. Wb's other
   * reader (Mul) faults back what it reads. */
  CHECK_MSG(resident(ta->data, ta->nbytes) == 0, "%zu pages of Wa resident",
            resident(ta->data, ta->nbytes));
  CHECK(resident(tb->data, tb->nbytes) == 0);
  /* Wc was never packed and Mul reads it every run: folding Relu read it,
   * and its pages stay. */
  const struct ir_tensor *tc = ir_lookup(g, "Wc")->init;
  CHECK(tc->zero_copy && resident(tc->data, tc->nbytes) > 0);
  tolk_tensor *y[2];
  CHECK(run(s1, y) && near_ref(y[0], wa) && near_ref(y[1], wb));
  tolk_tensor_free(y[0]);
  tolk_tensor_free(y[1]);
  {
    /* The same file loaded again (a second mapping) shares s1's entries by content; the
     * memcmp reads s1's Wa again, and gives its pages back afterwards. */
    size_t before = live_entries();
    tolk_model *m2 = NULL;
    tolk_session *s3 = NULL;
    CHECK_MSG(tolk_model_load(path, tolk_model_default_params(), &m2, &e) == TOLK_OK,
              "load: %s", e.message);
    if (m2) {
      CHECK_MSG(tolk_session_create(m2, p, &s3, &e) == TOLK_OK, "session: %s", e.message);
      const struct ir_tensor *ta2 = ir_lookup(tolk_model_ir(m2)->graph, "Wa")->init;
      CHECK(ta2->data != ta->data && live_entries() == before);
      CHECK_MSG(resident(ta->data, ta->nbytes) == 0 && resident(ta2->data, ta2->nbytes) == 0,
                "Wa pages resident after sharing: %zu, %zu", resident(ta->data, ta->nbytes),
                resident(ta2->data, ta2->nbytes));
      if (s3 && run(s3, y)) {
        CHECK(near_ref(y[0], wa) && near_ref(y[1], wb));
        tolk_tensor_free(y[0]);
        tolk_tensor_free(y[1]);
      }
      tolk_session_free(s3);
      tolk_model_free(m2);
    }
  }
  /* A second session on the same model shares s1's entries by pointer; one
   * opened with s1 gone packs again, faulting the pages back from the file. */
  CHECK_MSG(tolk_session_create(m, p, &s2, &e) == TOLK_OK, "session: %s", e.message);
  if (s2 && run(s2, y)) {
    CHECK(near_ref(y[0], wa) && near_ref(y[1], wb));
    tolk_tensor_free(y[0]);
    tolk_tensor_free(y[1]);
  }
  tolk_session_free(s2);
  tolk_session_free(s1);
  s2 = NULL;
  CHECK_MSG(tolk_session_create(m, p, &s2, &e) == TOLK_OK, "session: %s", e.message);
  if (s2 && run(s2, y)) {
    CHECK(near_ref(y[0], wa) && near_ref(y[1], wb));
    tolk_tensor_free(y[0]);
    tolk_tensor_free(y[1]);
  }
  CHECK(resident(ta->data, ta->nbytes) == 0);
  tolk_session_free(s2);
free_model:
  tolk_model_free(m);
done:
  unlink(path);
}

static void test_int8_share(void) {
  const char *fx = getenv("TOLK_FIXTURES");
  char p1[4096], p2[4096];
  snprintf(p1, sizeof p1, "%s/marian-tiny/decoder_model_quantized.onnx", fx ? fx : "tests/fixtures");
  snprintf(p2, sizeof p2, "%s/marian-tiny/decoder_with_past_model_quantized.onnx", fx ? fx : "tests/fixtures");
  const size_t base = live_entries();
  tolk_model *m1 = NULL, *m2 = NULL;
  tolk_session *s1 = NULL, *s2 = NULL;
  tolk_error e = {0};
  tolk_session_params p = tolk_session_default_params();
  CHECK_MSG(tolk_model_load(p1, tolk_model_default_params(), &m1, &e) == TOLK_OK, "load: %s", e.message);
  if (m1) CHECK_MSG(tolk_session_create(m1, p, &s1, &e) == TOLK_OK, "session: %s", e.message);
  const size_t one = live_entries();
  CHECK_MSG(one > base, "decoder_model_quantized packed nothing");
  CHECK_MSG(tolk_model_load(p2, tolk_model_default_params(), &m2, &e) == TOLK_OK, "load: %s", e.message);
  if (m2) CHECK_MSG(tolk_session_create(m2, p, &s2, &e) == TOLK_OK, "session: %s", e.message);
  CHECK_MSG(live_entries() == one, "decoder_with_past packed %zu weights again", live_entries() - one);
  tolk_session_free(s1);
  tolk_model_free(m1);
  CHECK(live_entries() <= one && live_entries() > base); /* s2 still holds its own */
  tolk_session_free(s2);
  tolk_model_free(m2);
  CHECK(live_entries() == base);

  /* y = MatMulInteger(x, W) with W int8 [256, 256] in a mapped file. */
  static int8_t w8[256 * 256];
  for (int i = 0; i < 256 * 256; i++) w8[i] = (int8_t)(i * 7 % 251 - 125);
  struct pbw g = {0}, t = {0}, mb = {0};
  node(&g, "MatMulInteger", "x", "W", "y");
  pbw_str(&g, 2, "int8_pages");
  pbw_int(&t, 1, 256);
  pbw_int(&t, 1, 256);
  pbw_int(&t, 2, TOLK_INT8);
  pbw_str(&t, 8, "W");
  pbw_bytes(&t, 9, w8, sizeof w8);
  pbw_msg(&g, 5, &t);
  pbw_value_info(&g, 11, "x", TOLK_UINT8, 2, (int64_t[]){2, 256});
  pbw_value_info(&g, 12, "y", TOLK_INT32, -1, NULL);
  pbw_model(&mb, 8, 13, &g);
  char path[] = "/tmp/tolk_pack_share8_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, mb.p, mb.n) == (ssize_t)mb.n);
  if (fd >= 0) close(fd);
  pbw_free(&mb);
  tolk_model *m3 = NULL;
  tolk_session *s3 = NULL;
  CHECK_MSG(tolk_model_load(path, tolk_model_default_params(), &m3, &e) == TOLK_OK, "load: %s", e.message);
  if (m3) CHECK_MSG(tolk_session_create(m3, p, &s3, &e) == TOLK_OK, "session: %s", e.message);
  const struct ir_tensor *tw = m3 ? ir_lookup(tolk_model_ir(m3)->graph, "W")->init : NULL;
  CHECK(tw && tw->zero_copy && s3);
  if (tw && s3) {
    CHECK_MSG(resident(tw->data, tw->nbytes) == 0, "%zu pages of the int8 weight resident",
              resident(tw->data, tw->nbytes));
    static uint8_t xv[2 * 256];
    for (int i = 0; i < 2 * 256; i++) xv[i] = (uint8_t)(i * 13 % 256);
    tolk_tensor *in = NULL, *y = NULL;
    CHECK(tolk_tensor_create(TOLK_UINT8, 2, (int64_t[]){2, 256}, xv, sizeof xv, &in, &e) == TOLK_OK);
    static const char *const in_names[] = {"x"}, *const out_names[] = {"y"};
    CHECK_MSG(tolk_session_run(s3, 1, in_names, (const tolk_tensor *const *)&in, 1, out_names, &y, NULL, &e) ==
                  TOLK_OK,
              "run: %s", e.message);
    const int32_t *yd = y ? tolk_tensor_data(y) : NULL;
    bool right = yd != NULL;
    for (int i = 0; right && i < 2; i++)
      for (int j = 0; right && j < 256; j++) {
        int32_t acc = 0;
        for (int k = 0; k < 256; k++) acc += (int32_t)xv[i * 256 + k] * w8[k * 256 + j];
        right = yd[i * 256 + j] == acc;
      }
    CHECK_MSG(right, "MatMulInteger on the packed weight is not x·W");
    tolk_tensor_free(in);
    tolk_tensor_free(y);
  }
  tolk_session_free(s3);
  tolk_model_free(m3);
  unlink(path);
}

int main(void) {
  fill();
  test_share(0);
  test_share(1);
  test_pages();
  test_int8_share();
  return tu_finish("exec_pack_share");
}
