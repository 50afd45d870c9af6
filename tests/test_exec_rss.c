/*
 * test_exec_rss.c — steady memory: after a warm-up of 100 runs of a small
 * model (an If whose branch holds a chain of kernels, so subgraph frames are
 * planned too), 10,000 more runs leave the resident set size where it was,
 * within 1%. Leaks of a few hundred bytes per run would show as megabytes.
 *
 * Then runs whose intermediates change size from run to run (a decoder's
 * step follows the sequence length): the small buffers a run keeps for the
 * next are bounded by what a run needs, not by every size ever seen.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "exec_graph.h"
#include "testutil.h"

static tolk_status op_add(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  float *tmp = op_scratch(c, 1024);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, a->rank, a->dims);
  if (!y || !tmp) return c->err->status;
  const float *pa = a->data, *pb = b->data;
  float *py = y->data;
  for (int64_t i = 0; i < a->numel; i++) py[i] = pa[i] + pb[i % b->numel];
  return TOLK_OK;
}

static const struct op_def test_ops[] = {
    {"test", "Add", 1, 0, NULL, op_add, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL},
};

/* t1 = x + x, t2 = t1 + x, t3 = t2 + t1 (5x) in g: three values of x's
 * size, t1 alive until t3 is made. */
static void add_chain(struct ir_model *m, struct ir_graph *g) {
  tb_node(m, g, "Add", "test", "", "x,x", "t1");
  tb_node(m, g, "Add", "test", "", "t1,x", "t2");
  tb_node(m, g, "Add", "test", "", "t2,t1", "t3");
}

/* Bytes malloc has handed out and not had back. */
static long heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return (long)(mi.uordblks + mi.hblkhd);
#else
  return -1;
#endif
}

/* x [n] through three intermediates of n floats, for n = 272 .. 1024: every
 * 16 floats a new size class of the kept lists (from 1088 bytes up, beyond
 * glibc's per-thread cache, which counts as in use). Without a plan (each
 * length is new), each run allocates from the heap; kept for every size,
 * the lists held ~370 kB more at the last run than at the 16th. */
static void lengths_vary(void) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[1] = {-1};
  const char *names[1] = {"n"};
  tb_input(m, g, "x", TOLK_FLOAT, 1, d, names);
  add_chain(m, g);
  tb_node(m, g, "Add", "test", "", "t3,x", "z");
  tb_output(g, "z");
  tolk_session *s = NULL;
  tolk_error err = {0};
  tolk_session_params p = tolk_session_default_params();
  p.threads = 1;
  p.plan_on_repeat = 1; /* no length repeats: every run from the heap */
  CHECK_MSG(exec_session_create_ir(m, &p, test_ops, &s, &err) == TOLK_OK, "%s", err.message);
  static float x[1024];
  for (int i = 0; i < 1024; i++) x[i] = (float)i;
  long at288 = 0;
  int fails = 0;
  for (int64_t n = 272; s && n <= 1024; n++) {
    tolk_tensor *tx = tb_tensor(1, &n, x), *y = NULL;
    const char *nm[] = {"x"};
    const tolk_tensor *in[] = {tx};
    if (tolk_session_run(s, 1, nm, in, 1, NULL, &y, NULL, &err) != TOLK_OK ||
        ((float *)tolk_tensor_data(y))[n - 1] != 6 * (float)(n - 1))
      fails++;
    tolk_tensor_free(y);
    tolk_tensor_free(tx);
    if (n == 288) at288 = heap_in_use();
  }
  long at1024 = heap_in_use();
  printf("heap in use after lengths 272-288: %ld B, after 272-1024: %ld B\n", at288, at1024);
  CHECK(fails == 0);
  CHECK_MSG(at1024 - at288 < 64 * 1024, "the heap grew by %ld B over lengths it no longer runs", at1024 - at288);
  tolk_session_free(s);
  tb_free(m);
}

int main(void) {
  lengths_vary();
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  int64_t d[2] = {64, 64};
  tb_input(m, g, "c", TOLK_BOOL, 0, NULL, NULL);
  tb_input(m, g, "x", TOLK_FLOAT, 2, d, NULL);
  struct ir_node *n = tb_node(m, g, "If", "", "if", "c", "y");
  struct ir_graph *th = tb_graph(m, g, "then");
  add_chain(m, th);
  tb_output(th, "t3");
  struct ir_graph *el = tb_graph(m, g, "else");
  tb_node(m, el, "Add", "test", "", "x,x", "e1");
  tb_output(el, "e1");
  tb_attr_graph(n, "then_branch", th);
  tb_attr_graph(n, "else_branch", el);
  tb_node(m, g, "Add", "test", "", "y,x", "z");
  tb_output(g, "z");
  tolk_session *s = NULL;
  tolk_error err = {0};
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  CHECK_MSG(exec_session_create_ir(m, &p, test_ops, &s, &err) == TOLK_OK, "%s", err.message);
  if (!s) return tu_finish("test_exec_rss");
  static float x[64 * 64];
  for (int i = 0; i < 64 * 64; i++) x[i] = (float)i;
  tolk_tensor *tx = tb_tensor(2, d, x), *tc = NULL;
  bool yes = true;
  tolk_tensor_create(TOLK_BOOL, 0, NULL, &yes, 1, &tc, NULL);
  const char *nm[] = {"c", "x"};
  const tolk_tensor *in[] = {tc, tx};
  /* The first fopen/printf allocate stdio buffers: do them before measuring. */
  long at100 = tu_rss_kb();
  printf("RSS before the first run: %ld kB\n", at100);
  int fails = 0;
  for (int run = 1; run <= 10000; run++) {
    tolk_tensor *y = NULL;
    if (tolk_session_run(s, 2, nm, in, 1, NULL, &y, NULL, &err) != TOLK_OK ||
        ((float *)tolk_tensor_data(y))[5] != 30)
      fails++;
    tolk_tensor_free(y);
    if (run == 100) at100 = tu_rss_kb();
    if ((run < 1000 ? run % 50 == 0 : run % 1000 == 0) && getenv("TOLK_RSS_TRACE")) printf("run %d: %ld kB\n", run, tu_rss_kb());
  }
  long at10000 = tu_rss_kb();
  printf("RSS after 100 runs: %ld kB, after 10000: %ld kB\n", at100, at10000);
  CHECK(fails == 0);
  CHECK_MSG(at10000 <= at100 + at100 / 100, "RSS grew from %ld to %ld kB", at100, at10000);
  tolk_tensor_free(tx);
  tolk_tensor_free(tc);
  tolk_session_free(s);
  tb_free(m);
  return tu_finish("test_exec_rss");
}
