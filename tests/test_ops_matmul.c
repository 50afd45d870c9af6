/*
 * test_ops_matmul.c — MatMul, Gemm and Einsum through the public session API
 * (one-node models from ops_model.h) against plain double references written
 * here: numpy.matmul's 1-D promotion and batch broadcasting, Gemm's
 * transposes, alpha/beta and C broadcasting, Einsum equations of every kind
 * (GEMM-shaped, diagonals, sums, implicit output, ellipsis), each with B fed
 * at run time and as an initializer (the prepacked path), on 1 and 2 threads,
 * in float, double, float16 and the integer types; and the errors.
 *
 * Tolerances: float outputs within 1e-5 · sqrt(k) (inputs in [-1, 1], so
 * |a||b| ≤ 1; the fp32 kernels round, the reference does not); float16
 * outputs additionally within one half-ulp of fp16 (2^-11 relative); double
 * within 1e-12; integers exact, wraparound included.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "ops_model.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double drand(void) { /* uniform in [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static int64_t numel_of(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  return n;
}

/* Random values of dtype dt (and their exact double values in `ref`). */
static void *make_data(tolk_dtype dt, int64_t n, double *ref) {
  void *p = malloc((size_t)(n ? n : 1) * 8);
  for (int64_t i = 0; i < n; i++) {
    double v = drand();
    switch (dt) {
    case TOLK_FLOAT: ((float *)p)[i] = (float)v, ref[i] = ((float *)p)[i]; break;
    case TOLK_DOUBLE: ((double *)p)[i] = v, ref[i] = v; break;
    case TOLK_FLOAT16:
      ((uint16_t *)p)[i] = tolk_f32_to_f16((float)v);
      ref[i] = tolk_f16_to_f32(((uint16_t *)p)[i]);
      break;
    case TOLK_INT32: ((int32_t *)p)[i] = (int32_t)(v * 1e9), ref[i] = ((int32_t *)p)[i]; break;
    case TOLK_INT64: ((int64_t *)p)[i] = (int64_t)(v * 1e12), ref[i] = (double)((int64_t *)p)[i]; break;
    default: ((uint32_t *)p)[i] = (uint32_t)((v + 1) * 2e9), ref[i] = ((uint32_t *)p)[i]; break;
    }
  }
  return p;
}

static double get(tolk_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case TOLK_FLOAT: return ((const float *)p)[i];
  case TOLK_DOUBLE: return ((const double *)p)[i];
  case TOLK_FLOAT16: return tolk_f16_to_f32(((const uint16_t *)p)[i]);
  default: return 0;
  }
}

/* An initializer input: GraphProto.initializer = TensorProto{dims, data_type,
 * name, raw_data}. */
static void tm_init(struct tm *m, tolk_dtype dt, int rank, const int64_t *dims, const void *data) {
  int i = m->n_in++;
  snprintf(m->names[i], sizeof m->names[i], "w%d", i);
  pbw_str(&m->node, 1, m->names[i]);
  struct pbw t = {0};
  for (int k = 0; k < rank; k++) pbw_int(&t, 1, dims[k]);
  pbw_int(&t, 2, dt);
  pbw_str(&t, 8, m->names[i]);
  pbw_bytes(&t, 9, data, (size_t)numel_of(rank, dims) * tolk_dtype_size(dt));
  pbw_msg(&m->graph, 5, &t);
}

/* Compares output 0 with ref (double), float-like dtypes. */
static void compare(const char *what, const tolk_tensor *y, tolk_dtype dt, int rank,
                    const int64_t *dims, const double *ref, int64_t k) {
  CHECK_MSG(y && tolk_tensor_rank(y) == rank, "%s: rank", what);
  if (!y || tolk_tensor_rank(y) != rank) return;
  for (int i = 0; i < rank; i++) CHECK_MSG(tolk_tensor_dims(y)[i] == dims[i], "%s: dim %d", what, i);
  int64_t n = numel_of(rank, dims);
  CHECK_MSG(tolk_tensor_numel(y) == n && tolk_tensor_dtype(y) == dt, "%s: numel/dtype", what);
  const double atol = dt == TOLK_DOUBLE ? 1e-12 : 1e-5 * sqrt((double)(k > 1 ? k : 1));
  const double rtol = dt == TOLK_FLOAT16 ? 1.0 / 2048 : 0;
  double worst = 0;
  int64_t wi = -1;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(get(dt, tolk_tensor_data(y), i) - ref[i]) - rtol * fabs(ref[i]);
    if (!(d <= worst)) worst = isnan(d) ? INFINITY : d, wi = i;
  }
  CHECK_MSG(worst <= atol, "%s: error %g > %g at %lld", what, worst, atol, (long long)wi);
}

/* ------------------------------------------------------------ MatMul */

/* numpy.matmul in double, written independently of the kernel. */
static int ref_matmul(int ra, const int64_t *da, const double *a, int rb, const int64_t *db,
                      const double *b, int64_t *dy, double *y) {
  int64_t A[TOLK_MAX_RANK + 1], B[TOLK_MAX_RANK + 1];
  int na = ra, nb = rb;
  memcpy(A, da, sizeof(int64_t) * (size_t)ra);
  memcpy(B, db, sizeof(int64_t) * (size_t)rb);
  if (ra == 1) A[1] = A[0], A[0] = 1, na = 2;
  if (rb == 1) B[1] = 1, nb = 2;
  int bt = (na > nb ? na : nb) - 2;
  int64_t m = A[na - 2], k = A[na - 1], n = B[nb - 1];
  int64_t bd[TOLK_MAX_RANK], ba[TOLK_MAX_RANK], bb[TOLK_MAX_RANK], nbatch = 1;
  for (int d = 0; d < bt; d++) {
    int ia = d - (bt - (na - 2)), ib = d - (bt - (nb - 2));
    ba[d] = ia >= 0 ? A[ia] : 1;
    bb[d] = ib >= 0 ? B[ib] : 1;
    bd[d] = ba[d] == 1 ? bb[d] : ba[d];
    nbatch *= bd[d];
  }
  for (int64_t t = 0; t < nbatch; t++) {
    int64_t rest = t, oa = 0, ob = 0, sa = 1, sb = 1;
    for (int d = bt - 1; d >= 0; d--) {
      int64_t idx = rest % bd[d];
      rest /= bd[d];
      oa += (ba[d] == 1 ? 0 : idx) * sa;
      ob += (bb[d] == 1 ? 0 : idx) * sb;
      sa *= ba[d];
      sb *= bb[d];
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += a[oa * m * k + i * k + p] * b[ob * k * n + p * n + j];
        y[(t * m + i) * n + j] = acc;
      }
  }
  int ry = 0;
  for (int d = 0; d < bt; d++) dy[ry++] = bd[d];
  if (ra > 1) dy[ry++] = m;
  if (rb > 1) dy[ry++] = n;
  return ry;
}

static void matmul_case(tolk_dtype dt, int ra, const int64_t *da, int rb, const int64_t *db,
                        bool b_init, int threads) {
  int64_t na = numel_of(ra, da), nb = numel_of(rb, db);
  double *ra_ = malloc(sizeof(double) * (size_t)(na + 1)), *rb_ = malloc(sizeof(double) * (size_t)(nb + 1));
  void *a = make_data(dt, na, ra_), *b = make_data(dt, nb, rb_);
  int64_t dy[TOLK_MAX_RANK + 2];
  int64_t cap = 1;
  for (int i = 0; i < ra; i++) cap *= da[i] + 1;
  for (int i = 0; i < rb; i++) cap *= db[i] + 1;
  double *ref = malloc(sizeof(double) * (size_t)cap);
  int ry = ref_matmul(ra, da, ra_, rb, db, rb_, dy, ref);
  struct tm m;
  tm_begin(&m, "MatMul", 13);
  m.threads = threads;
  tm_in(&m, dt, ra, da, a);
  if (b_init) tm_init(&m, dt, rb, db, b);
  else tm_in(&m, dt, rb, db, b);
  tm_out(&m, 1);
  tolk_error err = {0};
  char what[160];
  snprintf(what, sizeof what, "MatMul %s rank %d x rank %d (a0=%lld b_last=%lld) init=%d threads=%d",
           tolk_dtype_name(dt), ra, rb, (long long)da[0], (long long)db[rb - 1], b_init, threads);
  tolk_status st = tm_run(&m, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", what, err.message);
  if (st == TOLK_OK) {
    if (dt == TOLK_FLOAT || dt == TOLK_DOUBLE || dt == TOLK_FLOAT16) {
      compare(what, m.out[0], dt, ry, dy, ref, ra == 1 ? da[0] : da[ra - 1]);
    } else {
      /* Integers: exact, modulo the type's width (recomputed in wrapping
       * uint64 from the raw values, as the double reference rounds). */
      int64_t n = numel_of(ry, dy);
      int bad = 0;
      const void *yd = tolk_tensor_data(m.out[0]);
      int64_t kk = ra == 1 ? da[0] : da[ra - 1];
      int64_t mm = ra == 1 ? 1 : da[ra - 2], nn = rb == 1 ? 1 : db[rb - 1];
      /* Only rank ≤ 2 integer cases are generated, so no batch here. */
      for (int64_t i = 0; i < mm; i++)
        for (int64_t j = 0; j < nn; j++) {
          uint64_t acc = 0;
          for (int64_t p = 0; p < kk; p++) {
            uint64_t x, w;
            if (dt == TOLK_INT32) x = (uint64_t)(int64_t)((int32_t *)a)[i * kk + p], w = (uint64_t)(int64_t)((int32_t *)b)[p * nn + j];
            else if (dt == TOLK_INT64) x = (uint64_t)((int64_t *)a)[i * kk + p], w = (uint64_t)((int64_t *)b)[p * nn + j];
            else x = ((uint32_t *)a)[i * kk + p], w = ((uint32_t *)b)[p * nn + j];
            acc += x * w;
          }
          int64_t o = i * nn + j;
          bool ok = dt == TOLK_INT32   ? ((int32_t *)yd)[o] == (int32_t)(uint32_t)acc
                    : dt == TOLK_INT64 ? ((int64_t *)yd)[o] == (int64_t)acc
                                       : ((uint32_t *)yd)[o] == (uint32_t)acc;
          bad += !ok;
        }
      CHECK_MSG(bad == 0 && n == mm * nn, "%s: %d wrong", what, bad);
    }
  }
  tm_end(&m);
  free(a), free(b), free(ra_), free(rb_), free(ref);
}

static void test_matmul(void) {
  static const struct {
    int ra;
    int64_t da[4];
    int rb;
    int64_t db[4];
  } cases[] = {
      {1, {5}, 1, {5}},                         /* dot: rank-0 result */
      {1, {7}, 2, {7, 3}},                      /* vector · matrix */
      {2, {4, 7}, 1, {7}},                      /* matrix · vector */
      {3, {3, 30, 64}, 2, {64, 40}},            /* batch folded into rows */
      {2, {1, 512}, 2, {512, 1000}},            /* a decoder step (m = 1) */
      {3, {2, 5, 300}, 2, {300, 70}},           /* k across blocks */
      {2, {9, 8}, 3, {3, 8, 5}},                /* A broadcast over B's batch */
      {4, {2, 1, 4, 8}, 3, {3, 8, 5}},          /* both broadcast */
      {4, {1, 8, 30, 64}, 4, {1, 8, 64, 30}},   /* attention scores */
      {1, {6}, 3, {2, 6, 3}},                   /* 1-D A with batched B */
      {3, {2, 4, 6}, 1, {6}},                   /* batched A, 1-D B */
      {3, {0, 4, 5}, 2, {5, 3}},                /* empty batch */
      {2, {4, 0}, 2, {0, 3}},                   /* k = 0: zeros */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int init = 0; init < 2; init++)
      for (int th = 1; th <= 2; th++)
        matmul_case(TOLK_FLOAT, cases[i].ra, cases[i].da, cases[i].rb, cases[i].db, init, th);
  matmul_case(TOLK_DOUBLE, 3, (int64_t[]){2, 3, 4}, 2, (int64_t[]){4, 5}, false, 1);
  matmul_case(TOLK_DOUBLE, 4, (int64_t[]){2, 1, 3, 4}, 3, (int64_t[]){3, 4, 5}, true, 2);
  for (int init = 0; init < 2; init++) {
    matmul_case(TOLK_FLOAT16, 3, (int64_t[]){2, 3, 40}, 2, (int64_t[]){40, 17}, init, 1);
    matmul_case(TOLK_FLOAT16, 2, (int64_t[]){1, 64}, 2, (int64_t[]){64, 33}, init, 2);
  }
  matmul_case(TOLK_INT32, 2, (int64_t[]){3, 5}, 2, (int64_t[]){5, 4}, false, 1);
  matmul_case(TOLK_INT64, 2, (int64_t[]){3, 5}, 2, (int64_t[]){5, 4}, true, 1);
  matmul_case(TOLK_UINT32, 1, (int64_t[]){5}, 2, (int64_t[]){5, 4}, false, 1);
}

/* -------------------------------------------------------------- Gemm */

static void gemm_case(tolk_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                      float alpha, float beta, int crank, const int64_t *cdims, bool b_init,
                      int threads, int opset) {
  int64_t da[2] = {ta ? k : m, ta ? m : k}, db[2] = {tb ? n : k, tb ? k : n};
  double *ra = malloc(sizeof(double) * (size_t)(m * k + 1)), *rb = malloc(sizeof(double) * (size_t)(k * n + 1));
  double *rc = malloc(sizeof(double) * (size_t)(m * n + 1)), *ref = malloc(sizeof(double) * (size_t)(m * n + 1));
  void *a = make_data(dt, m * k, ra), *b = make_data(dt, k * n, rb);
  int64_t nc = crank >= 0 ? numel_of(crank, cdims) : 0;
  void *cv = make_data(dt, nc, rc);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++)
        acc += ra[ta ? p * m + i : i * k + p] * rb[tb ? j * k + p : p * n + j];
      double cval = 0;
      if (crank >= 0) {
        int64_t c0 = crank == 2 ? cdims[0] : 1, c1 = crank >= 1 ? cdims[crank - 1] : 1;
        cval = rc[(c0 == 1 ? 0 : i) * c1 + (c1 == 1 ? 0 : j)];
      }
      ref[i * n + j] = alpha * acc + beta * cval;
    }
  struct tm t;
  tm_begin(&t, "Gemm", opset);
  t.threads = threads;
  tm_in(&t, dt, 2, da, a);
  if (b_init) tm_init(&t, dt, 2, db, b);
  else tm_in(&t, dt, 2, db, b);
  if (crank >= 0) tm_in(&t, dt, crank, cdims, cv);
  if (ta) tm_attr_int(&t, "transA", 1);
  if (tb) tm_attr_int(&t, "transB", 1);
  if (alpha != 1.0f) tm_attr_float(&t, "alpha", alpha);
  if (beta != 1.0f) tm_attr_float(&t, "beta", beta);
  tm_out(&t, 1);
  tolk_error err = {0};
  char what[160];
  snprintf(what, sizeof what, "Gemm %s %lldx%lldx%lld ta=%d tb=%d alpha=%g beta=%g crank=%d init=%d th=%d",
           tolk_dtype_name(dt), (long long)m, (long long)n, (long long)k, ta, tb, alpha, beta,
           crank, b_init, threads);
  tolk_status st = tm_run(&t, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", what, err.message);
  if (st == TOLK_OK) compare(what, t.out[0], dt, 2, (int64_t[]){m, n}, ref, k * 4);
  tm_end(&t);
  free(a), free(b), free(cv), free(ra), free(rb), free(rc), free(ref);
}

static void test_gemm(void) {
  const int64_t m = 7, n = 19, k = 33;
  struct {
    int rank;
    int64_t dims[2];
  } cs[] = {{-1, {0}}, {0, {0}}, {1, {n}}, {1, {1}}, {2, {m, 1}}, {2, {1, n}}, {2, {m, n}}};
  int idx = 0;
  for (int t = 0; t < 4; t++)
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++, idx++) {
      float alpha = idx % 3 == 0 ? 1.0f : 0.5f, beta = idx % 4 == 1 ? 1.0f : -2.0f;
      gemm_case(TOLK_FLOAT, m, n, k, t & 1, t >> 1, alpha, beta, cs[ci].rank, cs[ci].dims,
                idx % 2, 1 + idx % 2, 13);
    }
  /* Marian-like: a decoder-step Linear with transB weights, and an encoder one. */
  gemm_case(TOLK_FLOAT, 1, 512, 512, false, true, 1, 1, 1, (int64_t[]){512}, true, 2, 13);
  gemm_case(TOLK_FLOAT, 30, 2048, 512, false, true, 1, 1, 1, (int64_t[]){2048}, true, 2, 13);
  gemm_case(TOLK_FLOAT, 30, 100, 64, false, false, 1, 0, 2, (int64_t[]){30, 100}, false, 1, 13);
  /* Old opsets: C required (opset 6, 9) and still broadcast from opset 7. */
  gemm_case(TOLK_FLOAT, 4, 5, 6, false, false, 1, 1, 1, (int64_t[]){5}, false, 1, 9);
  gemm_case(TOLK_FLOAT, 4, 5, 6, true, true, 2, 3, 2, (int64_t[]){4, 5}, false, 1, 6);
  gemm_case(TOLK_DOUBLE, 5, 6, 7, true, false, 0.25f, 2, 1, (int64_t[]){6}, false, 1, 13);
  gemm_case(TOLK_FLOAT16, 5, 20, 40, false, true, 1, 1, 1, (int64_t[]){20}, true, 1, 13);
  gemm_case(TOLK_FLOAT16, 5, 20, 40, true, false, 1, 1, -1, NULL, false, 2, 13);
}

/* ------------------------------------------------------------ Einsum */

/* A reference for letter-only equations with an explicit output: every
 * combination of label values, in double. */
static int ref_einsum(const char *eq, int n_in, const int *ranks, const int64_t *const *dims,
                      const double *const *in, int64_t *ydims, double *y) {
  char terms[4][16], out[16];
  int nt = 0;
  const char *p = eq;
  for (;;) {
    int l = 0;
    while (*p && *p != ',' && *p != '-') terms[nt][l++] = *p++;
    terms[nt++][l] = 0;
    if (*p == ',') p++;
    else break;
  }
  snprintf(out, sizeof out, "%s", p + 2);
  int64_t size[128] = {0};
  for (int t = 0; t < n_in; t++)
    for (int d = 0; d < ranks[t]; d++) size[(int)terms[t][d]] = dims[t][d];
  char all[64];
  int na = 0;
  for (int ch = 'A'; ch <= 'z'; ch++)
    if (size[ch] && !strchr(out, ch)) all[na++] = (char)ch;
  int ro = (int)strlen(out);
  int64_t no = 1, ns = 1;
  for (int d = 0; d < ro; d++) ydims[d] = size[(int)out[d]], no *= ydims[d];
  for (int d = 0; d < na; d++) ns *= size[(int)all[d]];
  for (int64_t o = 0; o < no; o++) {
    int64_t val[128] = {0}, r = o;
    for (int d = ro - 1; d >= 0; d--) val[(int)out[d]] = r % ydims[d], r /= ydims[d];
    double acc = 0;
    for (int64_t s = 0; s < ns; s++) {
      int64_t q = s;
      for (int d = na - 1; d >= 0; d--) val[(int)all[d]] = q % size[(int)all[d]], q /= size[(int)all[d]];
      double prod = 1;
      for (int t = 0; t < n_in; t++) {
        int64_t off = 0;
        for (int d = 0; d < ranks[t]; d++) off = off * dims[t][d] + val[(int)terms[t][d]];
        prod *= in[t][off];
      }
      acc += prod;
    }
    y[o] = acc;
  }
  return ro;
}

/* Runs `eq` (which may use '...' or an implicit output) and compares with
 * ref_einsum on `ref_eq`, an equivalent letters-only equation. */
static void einsum_case(tolk_dtype dt, const char *eq, const char *ref_eq, int n_in,
                        const int *ranks, const int64_t *const *dims, int threads) {
  double *refs[4];
  void *data[4];
  int64_t k = 1;
  for (int t = 0; t < n_in; t++) {
    int64_t n = numel_of(ranks[t], dims[t]);
    refs[t] = malloc(sizeof(double) * (size_t)(n + 1));
    data[t] = make_data(dt, n, refs[t]);
    k *= n + 1;
  }
  int64_t ydims[TOLK_MAX_RANK];
  double *ref = malloc(sizeof(double) * (size_t)k);
  int ry = ref_einsum(ref_eq, n_in, ranks, dims, (const double *const *)refs, ydims, ref);
  struct tm t;
  tm_begin(&t, "Einsum", 12);
  t.threads = threads;
  for (int i = 0; i < n_in; i++) tm_in(&t, dt, ranks[i], dims[i], data[i]);
  tm_attr_str(&t, "equation", eq);
  tm_out(&t, 1);
  tolk_error err = {0};
  char what[128];
  snprintf(what, sizeof what, "Einsum '%s' %s threads=%d", eq, tolk_dtype_name(dt), threads);
  tolk_status st = tm_run(&t, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", what, err.message);
  if (st == TOLK_OK) compare(what, t.out[0], dt, ry, ydims, ref, 64);
  tm_end(&t);
  for (int i = 0; i < n_in; i++) free(refs[i]), free(data[i]);
  free(ref);
}

static void test_einsum(void) {
  const int64_t d34[] = {3, 4}, d45[] = {4, 5}, d44[] = {4, 4}, d4[] = {4}, d5[] = {5};
  const int64_t d234[] = {2, 3, 4}, d245[] = {2, 4, 5}, d254[] = {2, 5, 4};
  const int64_t q[] = {1, 2, 6, 8}, kk[] = {1, 2, 7, 8};
  for (int th = 1; th <= 2; th++) {
    for (int dti = 0; dti < 3; dti++) {
      tolk_dtype dt = dti == 0 ? TOLK_FLOAT : dti == 1 ? TOLK_DOUBLE : TOLK_FLOAT16;
      einsum_case(dt, "ij,jk->ik", "ij,jk->ik", 2, (int[]){2, 2}, (const int64_t *[]){d34, d45}, th);
      einsum_case(dt, "bij, bjk -> bik", "bij,bjk->bik", 2, (int[]){3, 3},
                  (const int64_t *[]){d234, d245}, th);
      einsum_case(dt, "bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", 2, (int[]){4, 4},
                  (const int64_t *[]){q, kk}, th);
    }
    einsum_case(TOLK_FLOAT, "ij,jk", "ij,jk->ik", 2, (int[]){2, 2}, (const int64_t *[]){d34, d45}, th);
    einsum_case(TOLK_FLOAT, "bij,bkj->bki", "bij,bkj->bki", 2, (int[]){3, 3},
                (const int64_t *[]){d234, d254}, th);
    einsum_case(TOLK_FLOAT, "...ij,...jk->...ik", "bij,bjk->bik", 2, (int[]){3, 3},
                (const int64_t *[]){d234, d245}, th);
    einsum_case(TOLK_FLOAT, "...ij,jk", "bij,jk->bik", 2, (int[]){3, 2},
                (const int64_t *[]){d234, d45}, th);
    einsum_case(TOLK_FLOAT, "ij,ij->ij", "ij,ij->ij", 2, (int[]){2, 2}, (const int64_t *[]){d34, d34}, th);
    einsum_case(TOLK_FLOAT, "i,j->ij", "i,j->ij", 2, (int[]){1, 1}, (const int64_t *[]){d4, d5}, th);
    einsum_case(TOLK_FLOAT, "i,i", "i,i->", 2, (int[]){1, 1}, (const int64_t *[]){d4, d4}, th);
    einsum_case(TOLK_FLOAT, "ij->ji", "ij->ji", 1, (int[]){2}, (const int64_t *[]){d34}, th);
    einsum_case(TOLK_FLOAT, "ij->", "ij->", 1, (int[]){2}, (const int64_t *[]){d34}, th);
    einsum_case(TOLK_FLOAT, "ij,jk,kl->il", "ij,jk,kl->il", 3, (int[]){2, 2, 2},
                (const int64_t *[]){d34, d44, d45}, th);
    einsum_case(TOLK_FLOAT, "bij,bjk->ik", "bij,bjk->ik", 2, (int[]){3, 3},
                (const int64_t *[]){d234, d245}, th);
    einsum_case(TOLK_DOUBLE, "aij,ajk->ak", "aij,ajk->ak", 2, (int[]){3, 3},
                (const int64_t *[]){d234, d245}, th);
  }
}

/* Small integer types run the reference loop and wrap like numpy's. */
static void test_einsum_int8(void) {
  int8_t a[6] = {100, -100, 3, 4, 5, 6}, b[6] = {2, 1, 1, 1, 1, 1};
  struct tm t;
  tm_begin(&t, "Einsum", 12);
  tm_in(&t, TOLK_INT8, 2, (int64_t[]){2, 3}, a);
  tm_in(&t, TOLK_INT8, 2, (int64_t[]){3, 2}, b);
  tm_attr_str(&t, "equation", "ij,jk->ik");
  tm_out(&t, 1);
  tolk_error err = {0};
  CHECK_MSG(tm_run(&t, &err) == TOLK_OK, "%s", err.message);
  if (t.out[0]) {
    const int8_t *y = tolk_tensor_data(t.out[0]);
    /* row 0: 200 - 100 + 3 = 103, 100 - 100 + 3 = 3; row 1: 8 + 5 + 6 = 19, 4 + 5 + 6 = 15 */
    CHECK(tolk_tensor_dtype(t.out[0]) == TOLK_INT8);
    CHECK(y[0] == 103 && y[1] == 3 && y[2] == 19 && y[3] == 15);
  }
  tm_end(&t);
  tm_begin(&t, "Einsum", 12);
  tm_in(&t, TOLK_INT8, 1, (int64_t[]){2}, (int8_t[]){100, 100});
  tm_in(&t, TOLK_INT8, 1, (int64_t[]){2}, (int8_t[]){1, 1});
  tm_attr_str(&t, "equation", "i,i");
  tm_out(&t, 1);
  CHECK_MSG(tm_run(&t, &err) == TOLK_OK, "%s", err.message);
  if (t.out[0]) CHECK(((int8_t *)tolk_tensor_data(t.out[0]))[0] == -56); /* 200 wraps */
  tm_end(&t);
}

/* Diagonals (which ref_einsum does not model), checked by hand. */
static void test_einsum_diagonal(void) {
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  struct tm t;
  tm_begin(&t, "Einsum", 12);
  tm_in(&t, TOLK_FLOAT, 3, (int64_t[]){1, 4, 4}, x);
  tm_attr_str(&t, "equation", "...ii ->...i");
  tm_out(&t, 1);
  tolk_error err = {0};
  CHECK_MSG(tm_run(&t, &err) == TOLK_OK, "%s", err.message);
  if (t.out[0]) {
    const float *y = tolk_tensor_data(t.out[0]);
    CHECK(tolk_tensor_rank(t.out[0]) == 2 && tolk_tensor_numel(t.out[0]) == 4);
    CHECK(y[0] == 0 && y[1] == 5 && y[2] == 10 && y[3] == 15);
  }
  tm_end(&t);
  /* Trace: ii-> sums the diagonal. */
  tm_begin(&t, "Einsum", 12);
  tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){4, 4}, x);
  tm_attr_str(&t, "equation", "ii");
  tm_out(&t, 1);
  CHECK_MSG(tm_run(&t, &err) == TOLK_OK, "%s", err.message);
  if (t.out[0]) CHECK(tolk_tensor_rank(t.out[0]) == 0 && ((float *)tolk_tensor_data(t.out[0]))[0] == 30);
  tm_end(&t);
}

/* ------------------------------------------------------------ errors */

static void test_errors(void) {
  float z[64] = {0};
  tolk_error err = {0};
  struct tm t;
  tm_begin(&t, "MatMul", 13);
  tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){2, 3}, z);
  tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){4, 5}, z);
  tm_out(&t, 1);
  CHECK(tm_run(&t, &err) == TOLK_ERR_SHAPE);
  CHECK_MSG(strstr(err.message, "[2, 3]") && strstr(err.message, "[4, 5]"), "%s", err.message);
  tm_end(&t);

  tm_begin(&t, "MatMul", 13);
  tm_in(&t, TOLK_FLOAT, 3, (int64_t[]){2, 2, 3}, z);
  tm_in(&t, TOLK_FLOAT, 3, (int64_t[]){3, 3, 2}, z);
  tm_out(&t, 1);
  CHECK(tm_run(&t, &err) == TOLK_ERR_SHAPE);
  tm_end(&t);

  tm_begin(&t, "Gemm", 13);
  tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){2, 3}, z);
  tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){3, 4}, z);
  tm_in(&t, TOLK_FLOAT, 1, (int64_t[]){3}, z);
  tm_out(&t, 1);
  CHECK(tm_run(&t, &err) == TOLK_ERR_SHAPE);
  CHECK_MSG(strstr(err.message, "C [3]"), "%s", err.message);
  tm_end(&t);

  static const char *bad[] = {"ij,jk->il", "ij,jk->iki", "i..j..,j", "ij->i-", "i$j->i", "ij,jk,kl->il"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tm_begin(&t, "Einsum", 12);
    tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){2, 2}, z);
    tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){2, 2}, z);
    tm_attr_str(&t, "equation", bad[i]);
    tm_out(&t, 1);
    tolk_status st = tm_run(&t, &err);
    CHECK_MSG(st == TOLK_ERR_INVALID_MODEL, "'%s': %d %s", bad[i], st, err.message);
    tm_end(&t);
  }
  tm_begin(&t, "Einsum", 12);
  tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){2, 3}, z);
  tm_in(&t, TOLK_FLOAT, 2, (int64_t[]){4, 2}, z);
  tm_attr_str(&t, "equation", "ij,jk->ik");
  tm_out(&t, 1);
  CHECK(tm_run(&t, &err) == TOLK_ERR_SHAPE);
  tm_end(&t);
}

/* Two MatMuls and a Gemm reading one initializer share one packed copy;
 * two sessions on one buffer too. Each must still compute its own product,
 * and freeing one session must leave the other's working. */
static void test_shared_weights(void) {
  enum { M = 3, K = 40, N = 21 };
  float x[M * K], w[K * N];
  double rx[M * K], rw[K * N], ref[M * N];
  for (int i = 0; i < M * K; i++) rx[i] = x[i] = (float)drand();
  for (int i = 0; i < K * N; i++) rw[i] = w[i] = (float)drand();
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int p = 0; p < K; p++) acc += rx[i * K + p] * rw[p * N + j];
      ref[i * N + j] = acc;
    }
  struct pbw graph = {0}, model = {0}, opset = {0};
  static const char *outs[] = {"y1", "y2", "y3"};
  for (int i = 0; i < 3; i++) {
    struct pbw node = {0};
    pbw_str(&node, 1, "x");
    pbw_str(&node, 1, "w");
    pbw_str(&node, 2, outs[i]);
    pbw_str(&node, 4, i == 2 ? "Gemm" : "MatMul");
    pbw_msg(&graph, 1, &node);
  }
  pbw_str(&graph, 2, "g");
  struct pbw t = {0};
  pbw_int(&t, 1, K);
  pbw_int(&t, 1, N);
  pbw_int(&t, 2, TOLK_FLOAT);
  pbw_str(&t, 8, "w");
  pbw_bytes(&t, 9, w, sizeof w);
  pbw_msg(&graph, 5, &t);
  struct pbw vi = {0}, type = {0}, tt = {0}, shape = {0}, d0 = {0}, d1 = {0};
  pbw_int(&d0, 1, M);
  pbw_int(&d1, 1, K);
  pbw_msg(&shape, 1, &d0);
  pbw_msg(&shape, 1, &d1);
  pbw_int(&tt, 1, TOLK_FLOAT);
  pbw_msg(&tt, 2, &shape);
  pbw_msg(&type, 1, &tt);
  pbw_str(&vi, 1, "x");
  pbw_msg(&vi, 2, &type);
  pbw_msg(&graph, 11, &vi);
  for (int i = 0; i < 3; i++) {
    struct pbw o = {0};
    pbw_str(&o, 1, outs[i]);
    pbw_msg(&graph, 12, &o);
  }
  pbw_int(&model, 1, 8);
  pbw_str(&opset, 1, "");
  pbw_int(&opset, 2, 13);
  pbw_msg(&model, 8, &opset);
  pbw_msg(&model, 7, &graph);

  tolk_session *s[2] = {NULL, NULL};
  tolk_error err = {0};
  tolk_session_params prm = tolk_session_default_params();
  for (int i = 0; i < 2; i++)
    CHECK_MSG(tolk_session_create_from_buffer(model.p, model.n, NULL, prm, &s[i], &err) == TOLK_OK,
              "%s", err.message);
  tolk_tensor *xt = NULL;
  tolk_tensor_create(TOLK_FLOAT, 2, (int64_t[]){M, K}, x, sizeof x, &xt, &err);
  const char *names[] = {"x"};
  for (int round = 0; round < 2; round++) {
    for (int si = round; si < 2; si++) {
      tolk_tensor *y[3] = {NULL, NULL, NULL};
      tolk_status st = s[si] ? tolk_session_run(s[si], 1, names, (const tolk_tensor *const *)&xt,
                                                3, NULL, y, NULL, &err)
                             : TOLK_ERR_INTERNAL;
      CHECK_MSG(st == TOLK_OK, "shared weights, session %d round %d: %s", si, round, err.message);
      for (int i = 0; i < 3 && st == TOLK_OK; i++)
        compare("shared weights", y[i], TOLK_FLOAT, 2, (int64_t[]){M, N}, ref, K);
      for (int i = 0; i < 3; i++) tolk_tensor_free(y[i]);
    }
    if (round == 0) {
      tolk_session_free(s[0]);
      s[0] = NULL;
    }
  }
  tolk_session_free(s[1]);
  tolk_tensor_free(xt);
  free(model.p);
}

/* One node of a hand-built graph: op(in...) -> out, with an optional INT
 * attribute and an optional perm = [1, 0]. */
static void add_node(struct pbw *graph, const char *op, const char *in0, const char *in1,
                     const char *out, const char *int_attr, int64_t int_val, bool perm10) {
  struct pbw node = {0};
  pbw_str(&node, 1, in0);
  if (in1) pbw_str(&node, 1, in1);
  pbw_str(&node, 2, out);
  pbw_str(&node, 4, op);
  if (int_attr) {
    struct pbw a;
    tm_attr_begin(&a, int_attr, 2);
    pbw_int(&a, 3, int_val);
    pbw_msg(&node, 5, &a);
  }
  if (perm10) {
    struct pbw a, packed = {0};
    tm_attr_begin(&a, "perm", 7);
    pbw_varint(&packed, 1);
    pbw_varint(&packed, 0);
    pbw_msg(&a, 8, &packed);
    pbw_msg(&node, 5, &a);
  }
  pbw_msg(graph, 1, &node);
}

/* MatMul(X, B) where B is computed from an initializer W by Transpose and/or
 * Cast — the tied LM head is Transpose(embedding), float16 exports Cast their
 * weights — packs W at prepare. With folding on and off, with and without an
 * explicit perm, the product must be X · B. */
static void test_weight_chains(void) {
  enum { M = 2, K = 24, N = 37 };
  float x[M * K], w[N * K];
  uint16_t wh[N * K];
  double rx[M * K], rw[N * K], rwh[N * K], ref[M * N], refh[M * N], reft[M * N];
  for (int i = 0; i < M * K; i++) rx[i] = x[i] = (float)drand();
  for (int i = 0; i < N * K; i++) {
    rw[i] = w[i] = (float)drand();
    wh[i] = tolk_f32_to_f16(w[i]);
    rwh[i] = tolk_f16_to_f32(wh[i]);
  }
  /* ref: X · W^T with W [N, K]; refh: the same with W rounded to float16;
   * reft: X · W' with the same bytes read as W' [K, N] in float16. */
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0, acch = 0, acct = 0;
      for (int p = 0; p < K; p++) {
        acc += rx[i * K + p] * rw[j * K + p];
        acch += rx[i * K + p] * rwh[j * K + p];
        acct += rx[i * K + p] * rwh[p * N + j];
      }
      ref[i * N + j] = acc, refh[i * N + j] = acch, reft[i * N + j] = acct;
    }
  for (int variant = 0; variant < 8; variant++) {
    /* 0-3: Transpose(W) with/without perm, folding on/off; 4-5: Transpose(Cast(W16));
     * 6: Cast(Transpose(W16)); 7: Cast(W16) read as [K, N]. */
    const bool half = variant >= 4;
    struct pbw graph = {0}, model = {0}, opset = {0};
    const char *b = "b";
    switch (variant) {
    case 4:
    case 5:
      add_node(&graph, "Cast", "w", NULL, "wc", "to", TOLK_FLOAT, false);
      add_node(&graph, "Transpose", "wc", NULL, "b", NULL, 0, variant == 5);
      break;
    case 6:
      add_node(&graph, "Transpose", "w", NULL, "wt", NULL, 0, false);
      add_node(&graph, "Cast", "wt", NULL, "b", "to", TOLK_FLOAT, false);
      break;
    case 7: add_node(&graph, "Cast", "w", NULL, "b", "to", TOLK_FLOAT, false); break;
    default: add_node(&graph, "Transpose", "w", NULL, "b", NULL, 0, variant >= 2); break;
    }
    add_node(&graph, "MatMul", "x", b, "y", NULL, 0, false);
    pbw_str(&graph, 2, "g");
    struct pbw t = {0};
    pbw_int(&t, 1, variant == 7 ? K : N);
    pbw_int(&t, 1, variant == 7 ? N : K);
    pbw_int(&t, 2, half ? TOLK_FLOAT16 : TOLK_FLOAT);
    pbw_str(&t, 8, "w");
    if (half) pbw_bytes(&t, 9, wh, sizeof wh);
    else pbw_bytes(&t, 9, w, sizeof w);
    pbw_msg(&graph, 5, &t);
    struct pbw vi = {0}, type = {0}, tt = {0}, shape = {0}, d0 = {0}, d1 = {0}, o = {0};
    pbw_int(&d0, 1, M);
    pbw_int(&d1, 1, K);
    pbw_msg(&shape, 1, &d0);
    pbw_msg(&shape, 1, &d1);
    pbw_int(&tt, 1, TOLK_FLOAT);
    pbw_msg(&tt, 2, &shape);
    pbw_msg(&type, 1, &tt);
    pbw_str(&vi, 1, "x");
    pbw_msg(&vi, 2, &type);
    pbw_msg(&graph, 11, &vi);
    pbw_str(&o, 1, "y");
    pbw_msg(&graph, 12, &o);
    pbw_int(&model, 1, 8);
    pbw_str(&opset, 1, "");
    pbw_int(&opset, 2, 13);
    pbw_msg(&model, 8, &opset);
    pbw_msg(&model, 7, &graph);
    tolk_session *s = NULL;
    tolk_error err = {0};
    tolk_session_params prm = tolk_session_default_params();
    prm.opt_level = variant % 2 ? TOLK_OPT_NONE : TOLK_OPT_BASIC;
    tolk_status st = tolk_session_create_from_buffer(model.p, model.n, NULL, prm, &s, &err);
    CHECK_MSG(st == TOLK_OK, "weight chain %d: %s", variant, err.message);
    tolk_tensor *xt = NULL, *y = NULL;
    tolk_tensor_create(TOLK_FLOAT, 2, (int64_t[]){M, K}, x, sizeof x, &xt, &err);
    const char *names[] = {"x"};
    if (st == TOLK_OK)
      st = tolk_session_run(s, 1, names, (const tolk_tensor *const *)&xt, 1, NULL, &y, NULL, &err);
    CHECK_MSG(st == TOLK_OK, "weight chain %d: %s", variant, err.message);
    char what[48];
    snprintf(what, sizeof what, "weight chain %d", variant);
    if (st == TOLK_OK)
      compare(what, y, TOLK_FLOAT, 2, (int64_t[]){M, N}, variant == 7 ? reft : half ? refh : ref, K);
    tolk_tensor_free(y);
    tolk_tensor_free(xt);
    tolk_session_free(s);
    free(model.p);
  }
}

int main(void) {
  test_matmul();
  test_gemm();
  test_einsum();
  test_einsum_diagonal();
  test_einsum_int8();
  test_errors();
  test_shared_weights();
  test_weight_chains();
  return tu_finish("test_ops_matmul");
}
