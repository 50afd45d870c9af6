/*
 * test_onnx_unaligned.c — initializers whose raw_data sits at addresses not
 * aligned for their dtype (as exporters write them: no padding) load without
 * a copy and run exactly like aligned ones.
 *
 * One model is written twice, its initializers' payloads placed at odd
 * offsets in one and at 8-aligned offsets in the other, by padding the
 * tensors' doc_string. The test checks that loading left every payload in place (flagged
 * misaligned), that a session bound aligned copies only where a kernel reads
 * typed data (not for a packed MatMul B nor a Gather table, and not for
 * inputs only folded nodes read: none is made at any point, by the session's
 * count of bytes ever copied), and that every output is bit-identical to
 * the aligned model's, with constant folding on and off. Run under UBSan
 * (TOLK_SANITIZE) this is what catches a misaligned typed load.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "onnx/onnx.h"
#include "onnx_pbw.h"
#include "testutil.h"

#include "../src/core/half.h"

enum { N_INIT = 7 };

/* The initializers, in file order. */
struct init_spec {
  const char *name;
  int dtype;
  int rank;
  int64_t dims[2];
  const void *data;
  size_t nbytes;
  size_t align;
};

static float w[4 * 5], w2[5 * 4], bias[5], emb[6 * 4];
static uint16_t wh[4 * 5];
static double dv[5];
static int64_t shp[2] = {4, 3};

static struct init_spec specs[N_INIT] = {
    {"W", TOLK_FLOAT, 2, {4, 5}, w, sizeof w, 4},
    {"bias", TOLK_FLOAT, 1, {5, 0}, bias, sizeof bias, 4},
    {"W2", TOLK_FLOAT, 2, {5, 4}, w2, sizeof w2, 4},
    {"Wh", TOLK_FLOAT16, 2, {4, 5}, wh, sizeof wh, 2},
    {"E", TOLK_FLOAT, 2, {6, 4}, emb, sizeof emb, 4},
    {"D", TOLK_DOUBLE, 1, {5, 0}, dv, sizeof dv, 8},
    {"shp", TOLK_INT64, 1, {2, 0}, shp, sizeof shp, 8},
};

static void fill_data(void) {
  for (int i = 0; i < 20; i++) {
    w[i] = (float)(i % 7) * 0.25f - 0.7f;
    w2[i] = (float)(i % 5) * -0.3f + 0.45f;
    wh[i] = tolk_f32_to_f16((float)(i % 9) * 0.125f - 0.5f);
  }
  for (int i = 0; i < 5; i++) {
    bias[i] = 0.1f * (float)i - 0.2f;
    dv[i] = 1.0 / (double)(i + 3);
  }
  for (int i = 0; i < 24; i++) emb[i] = (float)i * 0.0625f - 0.75f;
}

/* The model, initializer i carrying a doc_string of pad[i] bytes:
 *   h2 = MatMul(x, W) + bias            (W packed at prepare; bias read typed)
 *   h3 = MatMul(x, Transpose(W2))       (Transpose folded, the result packed)
 *   h4 = MatMul(x, Cast(Wh, float))     (float16 through a Cast: staged pack)
 *   e  = Gather(E, ids)                 (rows copied bytewise)
 *   yd = Cast(h2, double) + D           (double, typed)
 *   r  = Reshape(e, shp)                (int64 shape, typed) */
static void build(struct pbw *m, const int *pad) {
  struct pbw g = {0}, a;
  int64_t xd[2] = {2, 4}, idd[1] = {3};
  pbw_node(&g, "MatMul", "mm", (const char *const[]){"x", "W", NULL},
           (const char *const[]){"h", NULL}, NULL);
  pbw_node(&g, "Add", "add", (const char *const[]){"h", "bias", NULL},
           (const char *const[]){"h2", NULL}, NULL);
  pbw_node(&g, "Transpose", "tr", (const char *const[]){"W2", NULL},
           (const char *const[]){"W2t", NULL}, NULL);
  pbw_node(&g, "MatMul", "mm2", (const char *const[]){"x", "W2t", NULL},
           (const char *const[]){"h3", NULL}, NULL);
  a = (struct pbw){0};
  pbw_attr_int(&a, "to", TOLK_FLOAT);
  pbw_node(&g, "Cast", "cast_w", (const char *const[]){"Wh", NULL},
           (const char *const[]){"Whf", NULL}, &a);
  pbw_node(&g, "MatMul", "mm3", (const char *const[]){"x", "Whf", NULL},
           (const char *const[]){"h4", NULL}, NULL);
  pbw_node(&g, "Gather", "gather", (const char *const[]){"E", "ids", NULL},
           (const char *const[]){"e", NULL}, NULL);
  a = (struct pbw){0};
  pbw_attr_int(&a, "to", TOLK_DOUBLE);
  pbw_node(&g, "Cast", "cast_d", (const char *const[]){"h2", NULL},
           (const char *const[]){"hd", NULL}, &a);
  pbw_node(&g, "Add", "add_d", (const char *const[]){"hd", "D", NULL},
           (const char *const[]){"yd", NULL}, NULL);
  pbw_node(&g, "Reshape", "reshape", (const char *const[]){"e", "shp", NULL},
           (const char *const[]){"r", NULL}, NULL);
  pbw_str(&g, 2, "unaligned");
  for (int i = 0; i < N_INIT; i++) {
    const struct init_spec *sp = &specs[i];
    /* Padding goes into doc_string: it shifts the payload and leaves the
     * name alone. */
    char doc[16];
    memset(doc, 'p', (size_t)pad[i]);
    doc[pad[i]] = '\0';
    pbw_tensor(&g, 5, sp->name, sp->dtype, sp->rank, sp->dims, pad[i] ? doc : NULL, sp->data,
               sp->nbytes);
  }
  pbw_value_info(&g, 11, "x", TOLK_FLOAT, 2, xd);
  pbw_value_info(&g, 11, "ids", TOLK_INT64, 1, idd);
  static const char *const outs[] = {"h2", "h3", "h4", "e", "yd", "r"};
  static const int out_dt[] = {TOLK_FLOAT, TOLK_FLOAT, TOLK_FLOAT, TOLK_FLOAT, TOLK_DOUBLE,
                               TOLK_FLOAT};
  for (int i = 0; i < 6; i++) pbw_value_info(&g, 12, outs[i], out_dt[i], -1, NULL);
  pbw_model(m, 8, 13, &g);
}

/* Offset of initializer i's payload in the model bytes. */
static size_t payload_offset(const struct pbw *m, int i) {
  const struct init_spec *sp = &specs[i];
  for (size_t o = 0; o + sp->nbytes <= m->n; o++)
    if (!memcmp(m->p + o, sp->data, sp->nbytes)) return o;
  return SIZE_MAX;
}

/* Model bytes (in a 64-aligned buffer, so offsets decide alignment) whose
 * payloads are all misaligned (want_misaligned) or all 8-aligned. */
static uint8_t *make_model(bool want_misaligned, size_t *size) {
  int pad[N_INIT] = {0};
  struct pbw m = {0};
  /* Padding one tensor shifts the ones after it (and may lengthen the
   * graph's length prefix), so settle them in order and repeat. */
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < N_INIT; i++) {
      for (int p = 0; p < 16; p++) {
        pad[i] = p;
        pbw_free(&m);
        m = (struct pbw){0};
        build(&m, pad);
        size_t o = payload_offset(&m, i);
        if (o != SIZE_MAX && (want_misaligned ? o % 2 == 1 : o % 8 == 0)) break;
      }
    }
  }
  uint8_t *buf = aligned_alloc(64, (m.n + 63) & ~(size_t)63);
  memcpy(buf, m.p, m.n);
  *size = m.n;
  for (int i = 0; i < N_INIT; i++) {
    size_t o = payload_offset(&m, i);
    CHECK_MSG(o != SIZE_MAX && (want_misaligned ? o % specs[i].align != 0 : o % 8 == 0),
              "%s: payload of '%s' at offset %zu", want_misaligned ? "misaligned" : "aligned",
              specs[i].name, o);
  }
  pbw_free(&m);
  return buf;
}

static const struct ir_value *find_init(const struct ir_graph *g, const char *name) {
  for (size_t i = 0; i < g->n_initializers; i++)
    if (!strcmp(g->initializers[i]->name, name)) return g->initializers[i];
  return NULL;
}

static void run_model(tolk_session *s, tolk_tensor **outs) {
  static const float x[8] = {0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f, -2.0f, 0.25f};
  static const int64_t ids[3] = {5, 0, -2};
  tolk_tensor *in[2] = {NULL, NULL};
  tolk_error e = {0};
  CHECK(tolk_tensor_create(TOLK_FLOAT, 2, (int64_t[]){2, 4}, x, sizeof x, &in[0], &e) == TOLK_OK);
  CHECK(tolk_tensor_create(TOLK_INT64, 1, (int64_t[]){3}, ids, sizeof ids, &in[1], &e) == TOLK_OK);
  static const char *const in_names[] = {"x", "ids"};
  static const char *const out_names[] = {"h2", "h3", "h4", "e", "yd", "r"};
  for (int i = 0; i < 6; i++) outs[i] = NULL;
  tolk_status st = tolk_session_run(s, 2, in_names, (const tolk_tensor *const *)in, 6, out_names,
                                    outs, NULL, &e);
  CHECK_MSG(st == TOLK_OK, "run: %s", e.message);
  tolk_tensor_free(in[0]);
  tolk_tensor_free(in[1]);
}

static void test_unaligned(void) {
  fill_data();
  size_t n_mis, n_al;
  uint8_t *mis = make_model(true, &n_mis), *al = make_model(false, &n_al);
  tolk_model *mm = NULL, *ma = NULL;
  tolk_error e = {0};
  CHECK_MSG(tolk_model_load_buffer(mis, n_mis, NULL, tolk_model_default_params(), &mm, &e) == TOLK_OK,
            "load misaligned: %s", e.message);
  CHECK_MSG(tolk_model_load_buffer(al, n_al, NULL, tolk_model_default_params(), &ma, &e) == TOLK_OK,
            "load aligned: %s", e.message);
  if (!mm || !ma) goto done;

  /* Loading copied nothing: every payload is read in place, flagged. */
  const struct ir_graph *gm = tolk_model_ir(mm)->graph, *ga = tolk_model_ir(ma)->graph;
  for (int i = 0; i < N_INIT; i++) {
    const struct ir_value *vm = find_init(gm, specs[i].name), *va = find_init(ga, specs[i].name);
    CHECK(vm && va);
    if (!vm || !va) continue;
    const uint8_t *d = vm->init->data;
    CHECK_MSG(d >= mis && d < mis + n_mis && vm->init->zero_copy && vm->init->misaligned,
              "'%s' was copied at load", specs[i].name);
    CHECK((uintptr_t)d % specs[i].align != 0);
    CHECK(!memcmp(d, specs[i].data, specs[i].nbytes));
    CHECK(va->init->zero_copy && !va->init->misaligned);
  }

  for (int opt = TOLK_OPT_NONE; opt <= TOLK_OPT_BASIC; opt++) {
    tolk_session_params p = tolk_session_default_params();
    p.threads = 1;
    p.opt_level = (tolk_opt_level)opt;
    tolk_session *sm = NULL, *sa = NULL;
    CHECK_MSG(tolk_session_create(mm, p, &sm, &e) == TOLK_OK, "session: %s", e.message);
    CHECK_MSG(tolk_session_create(ma, p, &sa, &e) == TOLK_OK, "session: %s", e.message);
    if (!sm || !sa) {
      tolk_session_free(sm);
      tolk_session_free(sa);
      continue;
    }
    /* Aligned copies exactly where a remaining reader needs typed data. */
    const struct xgraph *xg = sm->graphs[0];
    static const struct {
      const char *name;
      bool copied_nofold, copied_fold;
    } want[] = {
        {"W", false, false},   /* packed by MatMul at prepare */
        {"bias", true, true},  /* Add reads floats */
        {"W2", true, false},   /* Transpose reads it; folding never runs it (only MatMul's packed B reads W2t) */
        {"Wh", true, false},   /* Cast reads halves; likewise never run when folding */
        {"E", false, false},   /* Gather copies rows bytewise */
        {"D", true, true},     /* Add reads doubles */
        {"shp", true, true},   /* Reshape reads int64 (Reshape is not folded: e is not constant) */
    };
    size_t held = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
      const struct ir_value *v = find_init(gm, want[i].name);
      if (!v) continue;
      bool copied = xg->aligned && xg->aligned[v->index];
      if (copied) held += v->init->nbytes;
      bool expect = opt == TOLK_OPT_NONE ? want[i].copied_nofold : want[i].copied_fold;
      CHECK_MSG(copied == expect, "opt %d: '%s' %s an aligned copy", opt, want[i].name,
                copied ? "got" : "did not get");
      if (copied) {
        CHECK((uintptr_t)xg->aligned[v->index] % 8 == 0);
        CHECK(exec_init_data(xg, v) == xg->aligned[v->index]);
      } else {
        CHECK(exec_init_data(xg, v) == v->init->data);
      }
    }
    /* No copy was made at any point beyond those held: W2 and Wh, read only
     * by nodes folding binds by shape, were never copied, not even for the
     * time between making copies and folding. */
    CHECK_MSG(sm->aligned_bytes == held && sm->aligned_bytes_total == held,
              "opt %d: aligned copies held %zu bytes (expected %zu), %zu ever made", opt,
              sm->aligned_bytes, held, sm->aligned_bytes_total);
    CHECK(held == (opt == TOLK_OPT_NONE ? 196u : 76u)); /* bias+W2+Wh+D+shp; bias+D+shp */
    CHECK(!sa->graphs[0]->aligned && sa->aligned_bytes_total == 0);

    tolk_tensor *om[6], *oa[6];
    for (int rep = 0; rep < 2; rep++) { /* a second run replays the memory plan */
      run_model(sm, om);
      run_model(sa, oa);
      for (int i = 0; i < 6; i++) {
        CHECK(om[i] && oa[i]);
        if (!om[i] || !oa[i]) continue;
        CHECK(tolk_tensor_dtype(om[i]) == tolk_tensor_dtype(oa[i]));
        CHECK(tolk_tensor_nbytes(om[i]) == tolk_tensor_nbytes(oa[i]) && tolk_tensor_nbytes(om[i]));
        CHECK_MSG(!memcmp(tolk_tensor_data(om[i]), tolk_tensor_data(oa[i]), tolk_tensor_nbytes(oa[i])),
                  "opt %d: output %d differs between the misaligned and the aligned model", opt, i);
      }
      if (rep == 0 && om[3]) {
        /* Spot check against the definition: e = E[ids] with ids {5, 0, -2}. */
        const float *ev = tolk_tensor_data(om[3]);
        CHECK(!memcmp(ev, emb + 20, 16) && !memcmp(ev + 4, emb, 16) && !memcmp(ev + 8, emb + 16, 16));
      }
      for (int i = 0; i < 6; i++) {
        tolk_tensor_free(om[i]);
        tolk_tensor_free(oa[i]);
      }
    }
    tolk_session_free(sm);
    tolk_session_free(sa);
  }
done:
  tolk_model_free(mm);
  tolk_model_free(ma);
  free(mis);
  free(al);
}

int main(void) {
  test_unaligned();
  return tu_finish("onnx_unaligned");
}
