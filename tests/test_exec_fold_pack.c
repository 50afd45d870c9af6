/*
 * test_exec_fold_pack.c — constant folding holds no folded value that only
 * packed copies are made from. A tied LM head, MatMul(h, Transpose(E)),
 * packs E itself at prepare; the folded Transpose(E) would be a second copy
 * of the weights that nothing reads (133 MB in a Marian decoder).
 *
 * The model covers the ways a value ends up unread:
 *   y1 = MatMul(x, Transpose(W1))            Transpose never computed
 *   y2 = MatMul(x, Transpose(Cast(Wh)))      Cast computed, then freed (only
 *                                            the folded Transpose read it)
 *   y3 = MatMul(x, Transpose(W3)), z = Relu(Transpose(W3))
 *                                            Transpose computed for Relu, freed
 *                                            once Relu is folded; z is held
 *   y4 = Gemm(x, Transpose(W4), transB=1)    Gemm's packed B
 *   y5 = MatMul(x, DequantizeLinear(Transpose(Wq), sq, zq))
 *                                            ORT's int8 LM head: packed from the
 *                                            int8 Wq dequantized, neither the
 *                                            Transpose nor the float copy held
 * Checks: after creation no unread value is held (xconst.unread, data NULL,
 * the session's byte counts); outputs are bit-identical to the same model
 * with folding off, over repeated and concurrent runs; requesting an unread
 * value by name fails naming it (and opt level none), while the session
 * without folding returns it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "onnx/onnx.h"
#include "onnx_pbw.h"
#include "testutil.h"

#include "../src/core/half.h"

enum { M = 3, K = 4, N = 5, N_OUT = 6 };

static float w1[N * K], w3[K * K], w4[K * N], x[M * K];
static uint16_t wh[N * K];
static int8_t wq[N * K];
static const float sq = 0.0625f;
static const int8_t zq = -3;
static const char *const out_names[N_OUT] = {"y1", "y2", "y3", "y4", "z", "y5"};

/* A rank-2 (d0 x d1) or, with d0 < 0, scalar initializer. */
static void init(struct pbw *g, const char *name, int dtype, int64_t d0, int64_t d1,
                 const void *data, size_t nbytes) {
  int64_t dims[2] = {d0, d1};
  pbw_tensor(g, 5, name, dtype, d0 < 0 ? 0 : 2, dims, NULL, data, nbytes);
}

static void node1(struct pbw *g, const char *op, const char *in0, const char *in1,
                  const char *out, struct pbw *attrs) {
  const char *ins[3] = {in0, in1, NULL};
  pbw_node(g, op, out, ins, (const char *const[]){out, NULL}, attrs);
}

static void build(struct pbw *m) {
  struct pbw g = {0}, a;
  node1(&g, "Transpose", "W1", NULL, "t1", NULL);
  node1(&g, "MatMul", "x", "t1", "y1", NULL);
  a = (struct pbw){0};
  pbw_attr_int(&a, "to", TOLK_FLOAT);
  node1(&g, "Cast", "Wh", NULL, "c2", &a);
  node1(&g, "Transpose", "c2", NULL, "t2", NULL);
  node1(&g, "MatMul", "x", "t2", "y2", NULL);
  node1(&g, "Transpose", "W3", NULL, "t3", NULL);
  node1(&g, "MatMul", "x", "t3", "y3", NULL);
  node1(&g, "Relu", "t3", NULL, "z", NULL);
  node1(&g, "Transpose", "W4", NULL, "t4", NULL);
  a = (struct pbw){0};
  pbw_attr_int(&a, "transB", 1);
  node1(&g, "Gemm", "x", "t4", "y4", &a);
  node1(&g, "Transpose", "Wq", NULL, "t5", NULL);
  pbw_node(&g, "DequantizeLinear", "d5", (const char *const[]){"t5", "sq", "zq", NULL},
           (const char *const[]){"d5", NULL}, NULL);
  node1(&g, "MatMul", "x", "d5", "y5", NULL);
  pbw_str(&g, 2, "fold_pack");
  init(&g, "Wq", TOLK_INT8, N, K, wq, sizeof wq);
  init(&g, "sq", TOLK_FLOAT, -1, 0, &sq, sizeof sq);
  init(&g, "zq", TOLK_INT8, -1, 0, &zq, sizeof zq);
  init(&g, "W1", TOLK_FLOAT, N, K, w1, sizeof w1);
  init(&g, "Wh", TOLK_FLOAT16, N, K, wh, sizeof wh);
  init(&g, "W3", TOLK_FLOAT, K, K, w3, sizeof w3);
  init(&g, "W4", TOLK_FLOAT, K, N, w4, sizeof w4);
  pbw_value_info(&g, 11, "x", TOLK_FLOAT, 2, (int64_t[]){M, K});
  for (int i = 0; i < N_OUT; i++) pbw_value_info(&g, 12, out_names[i], TOLK_FLOAT, -1, NULL);
  pbw_model(m, 8, 13, &g);
}

static void fill(void) {
  for (int i = 0; i < N * K; i++) {
    w1[i] = (float)(i % 7) * 0.37f - 1.1f;
    w4[i] = (float)(i % 5) * -0.29f + 0.61f;
    wh[i] = tolk_f32_to_f16((float)(i % 9) * 0.125f - 0.5f);
    wq[i] = (int8_t)((i * 37) % 255 - 127);
  }
  for (int i = 0; i < K * K; i++) w3[i] = (float)(i % 6) * 0.21f - 0.55f;
  for (int i = 0; i < M * K; i++) x[i] = (float)(i % 11) * 0.173f - 0.9f;
}

/* Runs s for `names` (n of them) into outs; returns the status. */
static tolk_status run(tolk_session *s, size_t n, const char *const *names, tolk_tensor **outs,
                       tolk_error *e) {
  tolk_tensor *in = NULL;
  tolk_status st = tolk_tensor_create(TOLK_FLOAT, 2, (int64_t[]){M, K}, x, sizeof x, &in, e);
  if (st) return st;
  static const char *const in_names[] = {"x"};
  for (size_t i = 0; i < n; i++) outs[i] = NULL;
  st = tolk_session_run(s, 1, in_names, (const tolk_tensor *const *)&in, n, names, outs, NULL, e);
  tolk_tensor_free(in);
  return st;
}

static bool same(const tolk_tensor *a, const tolk_tensor *b) {
  return a && b && tolk_tensor_nbytes(a) == tolk_tensor_nbytes(b) && tolk_tensor_nbytes(a) &&
         !memcmp(tolk_tensor_data(a), tolk_tensor_data(b), tolk_tensor_nbytes(a));
}

static const struct xconst *find_const(const tolk_session *s, const char *name) {
  const struct xgraph *xg = s->graphs[0];
  for (uint32_t c = 0; c < xg->n_consts; c++)
    if (!strcmp(xg->g->values[xg->consts[c].slot]->name, name)) return &xg->consts[c];
  return NULL;
}

struct worker {
  tolk_session *s;
  tolk_tensor *const *ref;
  int bad;
};

static void *work(void *arg) {
  struct worker *w = arg;
  for (int rep = 0; rep < 50; rep++) {
    tolk_tensor *o[N_OUT];
    tolk_error e = {0};
    if (run(w->s, N_OUT, out_names, o, &e) != TOLK_OK) w->bad++;
    for (int i = 0; i < N_OUT; i++) {
      if (!same(o[i], w->ref[i])) w->bad++;
      tolk_tensor_free(o[i]);
    }
  }
  return NULL;
}

static void test_fold_pack(void) {
  fill();
  struct pbw mb = {0};
  build(&mb);
  tolk_model *m = NULL;
  tolk_error e = {0};
  CHECK_MSG(tolk_model_load_buffer(mb.p, mb.n, NULL, tolk_model_default_params(), &m, &e) ==
                TOLK_OK,
            "load: %s", e.message);
  if (!m) goto done;
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  tolk_session *sf = NULL, *sn = NULL; /* folding on, off */
  CHECK_MSG(tolk_session_create(m, p, &sf, &e) == TOLK_OK, "session: %s", e.message);
  p.opt_level = TOLK_OPT_NONE;
  CHECK_MSG(tolk_session_create(m, p, &sn, &e) == TOLK_OK, "session: %s", e.message);
  if (!sf || !sn) goto free_sessions;

  /* Every Transpose and the Cast are folded; of their results only z is held. */
  CHECK(sf->n_nodes_folded == 8);
  static const struct {
    const char *name;
    size_t bytes;
  } unread[] = {{"t1", K * N * 4}, {"c2", N * K * 4}, {"t2", K * N * 4}, {"t3", K * K * 4},
                {"t4", K * N * 4}, {"t5", K * N}, {"d5", K * N * 4}};
  size_t unread_bytes = 0;
  for (size_t i = 0; i < sizeof unread / sizeof unread[0]; i++) {
    const struct xconst *c = find_const(sf, unread[i].name);
    CHECK_MSG(c && c->unread && !c->t.data && c->t.nbytes == unread[i].bytes,
              "'%s' should be folded and not held", unread[i].name);
    unread_bytes += unread[i].bytes;
  }
  const struct xconst *cz = find_const(sf, "z");
  CHECK(cz && !cz->unread && cz->t.data);
  CHECK_MSG(sf->folded_unread_bytes == unread_bytes && sf->folded_bytes == K * K * 4,
            "held %zu bytes, not held %zu", sf->folded_bytes, sf->folded_unread_bytes);
  CHECK(sf->n_folded == 1); /* z's buffer */
  CHECK(!find_const(sn, "t1") && sn->folded_bytes == 0 && sn->folded_unread_bytes == 0);

  /* Bit-identical to the unfolded session, on recorded and replayed runs. */
  tolk_tensor *of[N_OUT], *on[N_OUT];
  CHECK_MSG(run(sn, N_OUT, out_names, on, &e) == TOLK_OK, "run, no folding: %s", e.message);
  for (int rep = 0; rep < 3; rep++) {
    CHECK_MSG(run(sf, N_OUT, out_names, of, &e) == TOLK_OK, "run, folding: %s", e.message);
    for (int i = 0; i < N_OUT; i++) {
      CHECK_MSG(same(of[i], on[i]), "run %d: output '%s' differs from the unfolded session", rep,
                out_names[i]);
      tolk_tensor_free(of[i]);
    }
  }
  /* y1 against its definition, as a guard that both sessions are right. */
  if (on[0]) {
    const float *y = tolk_tensor_data(on[0]);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        float acc = 0;
        for (int k = 0; k < K; k++) acc += x[i * K + k] * w1[j * K + k];
        CHECK_NEAR(y[i * N + j], acc, 1e-5);
      }
  }
  /* y5 against DequantizeLinear's definition, (q - zero point) · scale. */
  if (on[5]) {
    const float *y = tolk_tensor_data(on[5]);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        float acc = 0;
        for (int k = 0; k < K; k++) acc += x[i * K + k] * ((float)(wq[j * K + k] - zq) * sq);
        CHECK_NEAR(y[i * N + j], acc, 1e-5);
      }
  }

  /* Several runs at once on the folded session. */
  struct worker w[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    w[i] = (struct worker){sf, on, 0};
    CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(w[i].bad == 0, "concurrent worker %d: %d mismatches", i, w[i].bad);
  }

  /* An unread value requested by name: a clear error naming it, no
   * outputs; the unfolded session gives the value itself. */
  for (size_t i = 0; i < sizeof unread / sizeof unread[0]; i++) {
    const char *names[2] = {"y1", unread[i].name};
    tolk_tensor *o[2];
    tolk_error ee = {0};
    tolk_status st = run(sf, 2, names, o, &ee);
    CHECK_MSG(st == TOLK_ERR_INVALID_ARGUMENT && strstr(ee.message, unread[i].name) &&
                  strstr(ee.message, "opt level none") && !o[0] && !o[1],
              "requesting '%s': status %d, '%s'", unread[i].name, (int)st, ee.message);
    CHECK_MSG(run(sn, 2, names, o, &ee) == TOLK_OK, "'%s' without folding: %s", unread[i].name,
              ee.message);
    CHECK(o[0] && o[1] && tolk_tensor_nbytes(o[1]) == unread[i].bytes);
    if (!strcmp(unread[i].name, "t1") && o[1]) {
      const float *t = tolk_tensor_data(o[1]);
      for (int r = 0; r < K; r++)
        for (int c = 0; c < N; c++) CHECK(t[r * N + c] == w1[c * K + r]);
    }
    tolk_tensor_free(o[0]);
    tolk_tensor_free(o[1]);
  }
  /* A held folded value still comes back by name; so do the outputs after
   * a refused request. */
  {
    const char *names[1] = {"z"};
    tolk_tensor *o[1];
    CHECK_MSG(run(sf, 1, names, o, &e) == TOLK_OK, "z by name: %s", e.message);
    CHECK(same(o[0], on[4]));
    tolk_tensor_free(o[0]);
    CHECK_MSG(run(sf, N_OUT, out_names, of, &e) == TOLK_OK, "run after refusal: %s", e.message);
    for (int i = 0; i < N_OUT; i++) {
      CHECK(same(of[i], on[i]));
      tolk_tensor_free(of[i]);
    }
  }
  for (int i = 0; i < N_OUT; i++) tolk_tensor_free(on[i]);
free_sessions:
  tolk_session_free(sf);
  tolk_session_free(sn);
done:
  tolk_model_free(m);
  pbw_free(&mb);
}

int main(void) {
  test_fold_pack();
  return tu_finish("exec_fold_pack");
}
