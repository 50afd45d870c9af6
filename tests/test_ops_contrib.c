/*
 * test_ops_contrib.c — the com.microsoft operators through a session against
 * plain references written here (double precision, one loop per formula):
 * Gelu / BiasGelu / FastGelu / QuickGelu, FusedMatMul, SkipLayerNormalization
 * (all outputs, broadcast skip), SkipSimplifiedLayerNormalization, ORT's
 * LayerNormalization below opset 17, Attention (every mask form, causal,
 * past/present, attention_bias) and MultiHeadAttention (separate, packed QKV,
 * packed KV and BNSH key/value layouts, past/present, masks). The same ops
 * are compared with ONNX Runtime itself by tests/data/ort_ops (ort_ops.cmake).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qmodel.h"
#include "testutil.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(float lo, float hi) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 11) % 1000003) / 1000002.0f;
}
static float *frandv(int64_t n, float lo, float hi) {
  float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) v[i] = frand(lo, hi);
  return v;
}

#define TOL 1e-5

static void check_close(const tolk_tensor *t, const double *ref, int64_t n, const char *what) {
  CHECK_MSG(t != NULL, "%s: no output", what);
  if (!t) return;
  CHECK_MSG(tolk_tensor_numel(t) == n, "%s: %lld elements, expected %lld", what,
            (long long)tolk_tensor_numel(t), (long long)n);
  if (tolk_tensor_numel(t) != n) return;
  const float *y = tolk_tensor_data(t);
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)y[i] - ref[i]);
    if (!(e <= worst)) worst = e, at = i;
  }
  CHECK_MSG(worst <= TOL, "%s: max abs error %g at %lld (%g vs %g)", what, worst, (long long)at,
            at >= 0 ? (double)y[at] : 0.0, at >= 0 ? ref[at] : 0.0);
}

/* ---------------------------------------------------------- activations */

static void test_activations(void) {
  int64_t dims[2] = {7, 33}, n = 7 * 33;
  float *x = frandv(n, -6, 6), *b = frandv(33, -1, 1);
  double *ref = malloc((size_t)n * sizeof(double));
  const char *ops[] = {"Gelu", "BiasGelu", "FastGelu", "FastGelu", "QuickGelu", "QuickGelu"};
  for (int v = 0; v < 6; v++) {
    struct qm m;
    tolk_error err = {0};
    qm_begin(&m, "com.microsoft", ops[v], 1);
    qm_in(&m, TOLK_FLOAT, 2, dims, x);
    bool bias = v == 1 || v == 3;
    if (bias) qm_in(&m, TOLK_FLOAT, 1, &dims[1], b);
    double alpha = v == 5 ? 1.0 : 1.702;
    if (v == 5) qm_attr_float(&m, "alpha", 1.0f);
    CHECK_MSG(qm_run(&m, 2, &err) == TOLK_OK, "%s: %s", ops[v], err.message);
    for (int64_t i = 0; i < n; i++) {
      double t = x[i] + (bias ? b[i % 33] : 0.0);
      if (v <= 1) ref[i] = 0.5 * t * (1 + erf(t / sqrt(2.0)));
      else if (v <= 3) ref[i] = 0.5 * t * (1 + tanh(sqrt(2 / M_PI) * (t + 0.044715 * t * t * t)));
      else ref[i] = t / (1 + exp(-alpha * t));
    }
    check_close(m.out[0], ref, n, ops[v]);
    qm_end(&m);
  }
  free(x), free(b), free(ref);
}

/* ----------------------------------------------------------- FusedMatMul */

static void test_fused_matmul(void) {
  /* A [2, 1, 6, 5] (transA: 5x6 per batch), B [3, 7, 6] (transB: 6x7). */
  int64_t ad[4] = {2, 1, 6, 5}, bd[3] = {3, 7, 6};
  float *a = frandv(60, -1, 1), *b = frandv(126, -1, 1);
  double ref[2 * 3 * 5 * 7];
  struct qm m;
  tolk_error err = {0};
  qm_begin(&m, "com.microsoft", "FusedMatMul", 1);
  qm_in(&m, TOLK_FLOAT, 4, ad, a);
  qm_in(&m, TOLK_FLOAT, 3, bd, b);
  qm_attr_int(&m, "transA", 1);
  qm_attr_int(&m, "transB", 1);
  qm_attr_float(&m, "alpha", 0.5f);
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "FusedMatMul: %s", err.message);
  for (int i0 = 0; i0 < 2; i0++)
    for (int i1 = 0; i1 < 3; i1++)
      for (int r = 0; r < 5; r++)
        for (int c = 0; c < 7; c++) {
          double s = 0;
          for (int k = 0; k < 6; k++) s += (double)a[(i0 * 6 + k) * 5 + r] * b[(i1 * 7 + c) * 6 + k];
          ref[((i0 * 3 + i1) * 5 + r) * 7 + c] = 0.5 * s;
        }
  check_close(m.out[0], ref, 2 * 3 * 5 * 7, "FusedMatMul");
  if (m.out[0]) {
    const int64_t *d = tolk_tensor_dims(m.out[0]);
    CHECK(tolk_tensor_rank(m.out[0]) == 4 && d[0] == 2 && d[1] == 3 && d[2] == 5 && d[3] == 7);
  }
  qm_end(&m);
  free(a), free(b);
}

/* --------------------------------------------------------- normalisation */

/* rows x n reference of (skip) layer norm / RMS norm. */
static void ref_norm(const float *x, const float *skip, int64_t skip_n, const float *bias,
                     const float *g, const float *beta, int64_t rows, int64_t n, double eps,
                     bool rms, double *y, double *sum, double *mean, double *inv) {
  for (int64_t r = 0; r < rows; r++) {
    double s[256], mu = 0, var = 0;
    for (int64_t i = 0; i < n; i++) {
      s[i] = (double)x[r * n + i] + (skip ? skip[(r * n + i) % skip_n] : 0) + (bias ? bias[i] : 0);
      if (sum) sum[r * n + i] = (float)s[i];
      mu += s[i];
    }
    mu = rms ? 0 : mu / (double)n;
    for (int64_t i = 0; i < n; i++) var += (s[i] - mu) * (s[i] - mu);
    double iv = 1 / sqrt(var / (double)n + eps);
    if (mean) mean[r] = mu;
    if (inv) inv[r] = iv;
    for (int64_t i = 0; i < n; i++) y[r * n + i] = (s[i] - mu) * iv * g[i] + (beta ? beta[i] : 0);
  }
}

static void test_norms(void) {
  enum { B = 3, S = 4, D = 40 };
  int64_t xd[3] = {B, S, D}, n = B * S * D, dvec = D;
  float *x = frandv(n, -4, 4), *skip = frandv(n, -1, 1), *g = frandv(D, 0.5f, 1.5f),
        *beta = frandv(D, -1, 1), *bias = frandv(D, -0.5f, 0.5f);
  double *y = malloc((size_t)n * sizeof(double)), *sum = malloc((size_t)n * sizeof(double));
  double mean[B * S], inv[B * S];
  tolk_error err = {0};
  struct qm m;

  /* All four outputs, with bias and beta. */
  qm_begin(&m, "com.microsoft", "SkipLayerNormalization", 1);
  qm_in(&m, TOLK_FLOAT, 3, xd, x);
  qm_in(&m, TOLK_FLOAT, 3, xd, skip);
  qm_init(&m, TOLK_FLOAT, 1, &dvec, g);
  qm_init(&m, TOLK_FLOAT, 1, &dvec, beta);
  qm_init(&m, TOLK_FLOAT, 1, &dvec, bias);
  qm_attr_float(&m, "epsilon", 1e-5f);
  qm_outs(&m, "1111");
  CHECK_MSG(qm_run(&m, 2, &err) == TOLK_OK, "SkipLayerNormalization: %s", err.message);
  ref_norm(x, skip, n, bias, g, beta, B * S, D, 1e-5f, false, y, sum, mean, inv);
  check_close(m.out[0], y, n, "SkipLayerNormalization output");
  check_close(m.out[1], mean, B * S, "SkipLayerNormalization mean");
  check_close(m.out[2], inv, B * S, "SkipLayerNormalization inv_std_var");
  check_close(m.out[3], sum, n, "SkipLayerNormalization input_skip_bias_sum");
  if (m.out[1]) {
    const int64_t *d = tolk_tensor_dims(m.out[1]);
    CHECK(tolk_tensor_rank(m.out[1]) == 3 && d[0] == B && d[1] == S && d[2] == 1);
  }
  qm_end(&m);

  /* Skip broadcast over the batch ([S, D]), no beta, no bias, sum only. */
  qm_begin(&m, "com.microsoft", "SkipLayerNormalization", 1);
  qm_in(&m, TOLK_FLOAT, 3, xd, x);
  qm_in(&m, TOLK_FLOAT, 2, (int64_t[]){S, D}, skip);
  qm_in(&m, TOLK_FLOAT, 1, &dvec, g);
  qm_outs(&m, "1001");
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "SkipLayerNormalization bcast: %s", err.message);
  ref_norm(x, skip, S * D, NULL, g, NULL, B * S, D, 1e-12, false, y, sum, NULL, NULL);
  check_close(m.out[0], y, n, "SkipLayerNormalization bcast output");
  check_close(m.out[3], sum, n, "SkipLayerNormalization bcast sum");
  qm_end(&m);

  /* RMS variant. */
  qm_begin(&m, "com.microsoft", "SkipSimplifiedLayerNormalization", 1);
  qm_in(&m, TOLK_FLOAT, 3, xd, x);
  qm_in(&m, TOLK_FLOAT, 3, xd, skip);
  qm_in(&m, TOLK_FLOAT, 1, &dvec, g);
  qm_in(&m, TOLK_FLOAT, 1, &dvec, bias);
  qm_attr_float(&m, "epsilon", 1e-6f);
  qm_outs(&m, "1001");
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "SkipSimplifiedLayerNormalization: %s", err.message);
  ref_norm(x, skip, n, bias, g, NULL, B * S, D, 1e-6f, true, y, sum, NULL, NULL);
  check_close(m.out[0], y, n, "SkipSimplifiedLayerNormalization");
  check_close(m.out[3], sum, n, "SkipSimplifiedLayerNormalization sum");
  qm_end(&m);

  /* ORT's LayerNormalization in the default domain at opset 13, axis -2
   * (normalising S*D together). */
  float *g2 = frandv(S * D, 0.5f, 1.5f), *b2 = frandv(S * D, -1, 1);
  qm_begin(&m, "", "LayerNormalization", 13);
  qm_in(&m, TOLK_FLOAT, 3, xd, x);
  qm_in(&m, TOLK_FLOAT, 2, (int64_t[]){S, D}, g2);
  qm_in(&m, TOLK_FLOAT, 2, (int64_t[]){S, D}, b2);
  qm_attr_int(&m, "axis", -2);
  qm_outs(&m, "111");
  CHECK_MSG(qm_run(&m, 1, &err) == TOLK_OK, "LayerNormalization-13: %s", err.message);
  ref_norm(x, NULL, 1, NULL, g2, b2, B, S * D, 1e-5f, false, y, NULL, mean, inv);
  check_close(m.out[0], y, n, "LayerNormalization-13");
  check_close(m.out[1], mean, B, "LayerNormalization-13 mean");
  check_close(m.out[2], inv, B, "LayerNormalization-13 inv_std");
  qm_end(&m);

  /* A skip that fits nothing is a shape error. */
  qm_begin(&m, "com.microsoft", "SkipLayerNormalization", 1);
  qm_in(&m, TOLK_FLOAT, 3, xd, x);
  qm_in(&m, TOLK_FLOAT, 2, (int64_t[]){S + 1, D}, skip);
  qm_in(&m, TOLK_FLOAT, 1, &dvec, g);
  CHECK(qm_run(&m, 1, &err) == TOLK_ERR_SHAPE);
  qm_end(&m);
  free(x), free(skip), free(g), free(beta), free(bias), free(y), free(sum), free(g2), free(b2);
}

/* -------------------------------------------------------------- attention */

/* Reference attention on Q [B,N,S,H], K [B,N,T,H], V [B,N,T,Hv] with an
 * additive mask [B,S,T] (or NULL) and attention bias [B,N,S,T] (or NULL);
 * out [B, S, N*Hv]. */
static void ref_attend(int B, int N, int S, int T, int H, int Hv, const double *q,
                       const double *k, const double *v, const double *mask, const double *ab,
                       double scale, double *out) {
  for (int b = 0; b < B; b++)
    for (int n = 0; n < N; n++)
      for (int s = 0; s < S; s++) {
        double sc[64], mx = -INFINITY, sum = 0;
        for (int t = 0; t < T; t++) {
          double d = 0;
          for (int h = 0; h < H; h++)
            d += q[((b * N + n) * S + s) * H + h] * k[((b * N + n) * T + t) * H + h];
          sc[t] = scale * d + (mask ? mask[(b * S + s) * T + t] : 0) +
                  (ab ? ab[((b * N + n) * S + s) * T + t] : 0);
          if (sc[t] > mx) mx = sc[t];
        }
        for (int t = 0; t < T; t++) sum += (sc[t] = exp(sc[t] - mx));
        for (int h = 0; h < Hv; h++) {
          double o = 0;
          for (int t = 0; t < T; t++) o += sc[t] / sum * v[((b * N + n) * T + t) * Hv + h];
          out[(b * S + s) * N * Hv + n * Hv + h] = o;
        }
      }
}

enum { AB = 2, AS = 4, AN = 3, AH = 5, AD = AN * AH, AP = 3 };

/* mask kinds: 0 none, 1 lengths [B], 2 [2B], 3 [B,T], 4 [B,S,T] */
static void make_mask(int kind, int S, int T, int past, bool causal, int32_t *m, int64_t *md,
                      int *mrank, double *add) {
  int32_t lens[AB] = {T - 1, T}, starts[AB] = {1, 0};
  for (int b = 0; b < AB; b++)
    for (int s = 0; s < S; s++)
      for (int t = 0; t < T; t++) {
        bool keep = true;
        if (kind == 1) keep = t < lens[b];
        if (kind == 2) keep = t < lens[b] && t >= starts[b];
        if (kind == 3) keep = !(b == 0 && t == 1);
        if (kind == 4) keep = (t + s + b) % 3 != 1 || t == 0;
        add[(b * S + s) * T + t] = (keep ? 0 : -10000.0) + (causal && t > past + s ? -10000.0 : 0);
      }
  *mrank = kind == 0 ? -1 : kind <= 2 ? 1 : kind == 3 ? 2 : 3;
  if (kind == 1) md[0] = AB, m[0] = lens[0], m[1] = lens[1];
  if (kind == 2) md[0] = 2 * AB, m[0] = lens[0], m[1] = lens[1], m[2] = starts[0], m[3] = starts[1];
  if (kind == 3) {
    md[0] = AB, md[1] = T;
    for (int b = 0; b < AB; b++)
      for (int t = 0; t < T; t++) m[b * T + t] = !(b == 0 && t == 1);
  }
  if (kind == 4) {
    md[0] = AB, md[1] = S, md[2] = T;
    for (int b = 0; b < AB; b++)
      for (int s = 0; s < S; s++)
        for (int t = 0; t < T; t++) m[(b * S + s) * T + t] = (t + s + b) % 3 != 1 || t == 0;
  }
}

static void test_attention(void) {
  enum { DIN = 8 };
  float *x = frandv(AB * AS * DIN, -1, 1), *w = frandv(DIN * 3 * AD, -0.7f, 0.7f),
        *bias = frandv(3 * AD, -0.3f, 0.3f), *past = frandv(2 * AB * AN * AP * AH, -1, 1),
        *ab = frandv(AN * AS * (AS + AP), -1, 1);
  for (int variant = 0; variant < 8; variant++) {
    int mkind = variant <= 4 ? variant : variant == 5 ? 3 : 0;
    bool causal = variant == 5 || variant == 6, with_past = variant >= 6, with_ab = variant == 7;
    int P = with_past ? AP : 0, S = AS, T = P + S;
    /* Projections in double. */
    double q[AB * AN * AS * AH], k[AB * AN * (AS + AP) * AH], v[AB * AN * (AS + AP) * AH];
    for (int b = 0; b < AB; b++)
      for (int s = 0; s < S; s++)
        for (int j = 0; j < 3 * AD; j++) {
          double acc = bias[j];
          for (int i = 0; i < DIN; i++) acc += (double)x[(b * S + s) * DIN + i] * w[i * 3 * AD + j];
          int part = j / AD, n = (j % AD) / AH, h = j % AH;
          if (part == 0) q[((b * AN + n) * S + s) * AH + h] = acc;
          if (part == 1) k[((b * AN + n) * T + P + s) * AH + h] = acc;
          if (part == 2) v[((b * AN + n) * T + P + s) * AH + h] = acc;
        }
    for (int b = 0; b < AB; b++)
      for (int n = 0; n < AN; n++)
        for (int t = 0; t < P; t++)
          for (int h = 0; h < AH; h++) {
            k[((b * AN + n) * T + t) * AH + h] = past[((0 * AB + b) * AN + n) * P * AH + t * AH + h];
            v[((b * AN + n) * T + t) * AH + h] = past[((1 * AB + b) * AN + n) * P * AH + t * AH + h];
          }
    int32_t mask[AB * AS * (AS + AP)];
    int64_t md[3];
    int mrank;
    double madd[AB * AS * (AS + AP)], abd[AB * AN * AS * (AS + AP)], out[AB * AS * AD];
    make_mask(mkind, S, T, P, causal, mask, md, &mrank, madd);
    for (int b = 0; b < AB; b++)
      for (int i = 0; i < AN * S * T; i++) abd[b * AN * S * T + i] = ab[i];
    ref_attend(AB, AN, S, T, AH, AH, q, k, v, (mkind || causal) ? madd : NULL,
               with_ab ? abd : NULL, 1 / sqrt((double)AH), out);

    struct qm m;
    tolk_error err = {0};
    qm_begin(&m, "com.microsoft", "Attention", 1);
    qm_in(&m, TOLK_FLOAT, 3, (int64_t[]){AB, S, DIN}, x);
    qm_init(&m, TOLK_FLOAT, 2, (int64_t[]){DIN, 3 * AD}, w);
    qm_init(&m, TOLK_FLOAT, 1, (int64_t[]){3 * AD}, bias);
    if (mkind) qm_in(&m, TOLK_INT32, mrank, md, mask);
    else qm_none(&m);
    if (with_past) qm_in(&m, TOLK_FLOAT, 5, (int64_t[]){2, AB, AN, AP, AH}, past);
    else qm_none(&m);
    if (with_ab) qm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, AN, S, T}, ab);
    qm_attr_int(&m, "num_heads", AN);
    if (causal) qm_attr_int(&m, "unidirectional", 1);
    qm_outs(&m, with_past ? "11" : "1");
    CHECK_MSG(qm_run(&m, variant % 2 + 1, &err) == TOLK_OK, "Attention %d: %s", variant,
              err.message);
    char what[64];
    snprintf(what, sizeof what, "Attention variant %d", variant);
    check_close(m.out[0], out, AB * S * AD, what);
    if (with_past) {
      double pres[2 * AB * AN * (AS + AP) * AH];
      memcpy(pres, k, sizeof k);
      memcpy(pres + AB * AN * T * AH, v, sizeof v);
      check_close(m.out[1], pres, 2 * AB * AN * T * AH, "Attention present");
    }
    qm_end(&m);
  }
  free(x), free(w), free(bias), free(past), free(ab);
}

static void test_mha(void) {
  enum { L = 6 };
  float *qin = frandv(AB * AS * AD, -1, 1), *kin = frandv(2 * AB * L * AD, -1, 1),
        *vin = frandv(AB * L * AD, -1, 1), *bias = frandv(3 * AD, -0.3f, 0.3f),
        *pk = frandv(AB * AN * AP * AH, -1, 1), *pv = frandv(AB * AN * AP * AH, -1, 1),
        *packed = frandv(AB * AS * AN * 3 * AH, -1, 1);
  /* 0: q/k/v + bias + 2-D mask (cross)   1: packed QKV   2: packed KV
   * 3: BNSH key/value + bias (q only)    4: self with past + causal-free S=1
   * 5: self, unidirectional, lengths mask */
  for (int variant = 0; variant < 6; variant++) {
    int S = variant == 4 ? 1 : AS, Lk = variant == 1 || variant >= 4 ? S : L;
    int P = variant == 4 ? AP : 0, T = P + Lk, mkind = variant == 0 ? 3 : variant == 5 ? 1 : 0;
    bool causal = variant == 5, use_bias = variant == 0 || variant == 3 || variant == 4;
    double q[AB * AN * AS * AH], k[AB * AN * (L + AP) * AH], v[AB * AN * (L + AP) * AH];
    for (int b = 0; b < AB; b++)
      for (int n = 0; n < AN; n++)
        for (int h = 0; h < AH; h++) {
          for (int s = 0; s < S; s++) {
            double qv;
            if (variant == 1) qv = packed[(((b * S + s) * AN + n) * 3 + 0) * AH + h];
            else qv = qin[(b * S + s) * AD + n * AH + h];
            q[((b * AN + n) * S + s) * AH + h] = qv + (use_bias ? bias[n * AH + h] : 0);
          }
          for (int t = 0; t < Lk; t++) {
            double kv, vv;
            if (variant == 1) {
              kv = packed[(((b * S + t) * AN + n) * 3 + 1) * AH + h];
              vv = packed[(((b * S + t) * AN + n) * 3 + 2) * AH + h];
            } else if (variant == 2) {
              kv = kin[(((b * Lk + t) * AN + n) * 2 + 0) * AH + h];
              vv = kin[(((b * Lk + t) * AN + n) * 2 + 1) * AH + h];
            } else if (variant == 3) {
              kv = kin[((b * AN + n) * Lk + t) * AH + h];
              vv = vin[((b * AN + n) * Lk + t) * AH + h];
            } else {
              kv = kin[(b * Lk + t) * AD + n * AH + h];
              vv = vin[(b * Lk + t) * AD + n * AH + h];
              if (use_bias) kv += bias[AD + n * AH + h], vv += bias[2 * AD + n * AH + h];
            }
            k[((b * AN + n) * T + P + t) * AH + h] = kv;
            v[((b * AN + n) * T + P + t) * AH + h] = vv;
          }
          for (int t = 0; t < P; t++) {
            k[((b * AN + n) * T + t) * AH + h] = pk[((b * AN + n) * P + t) * AH + h];
            v[((b * AN + n) * T + t) * AH + h] = pv[((b * AN + n) * P + t) * AH + h];
          }
        }
    int32_t mask[AB * AS * (L + AP)];
    int64_t md[3];
    int mrank;
    double madd[AB * AS * (L + AP)], out[AB * AS * AD];
    make_mask(mkind, S, T, P, causal, mask, md, &mrank, madd);
    ref_attend(AB, AN, S, T, AH, AH, q, k, v, (mkind || causal) ? madd : NULL, NULL,
               1 / sqrt((double)AH), out);

    struct qm m;
    tolk_error err = {0};
    qm_begin(&m, "com.microsoft", "MultiHeadAttention", 1);
    if (variant == 1) {
      qm_in(&m, TOLK_FLOAT, 5, (int64_t[]){AB, S, AN, 3, AH}, packed);
      qm_none(&m), qm_none(&m);
    } else {
      qm_in(&m, TOLK_FLOAT, 3, (int64_t[]){AB, S, AD}, qin);
      if (variant == 2) {
        qm_in(&m, TOLK_FLOAT, 5, (int64_t[]){AB, Lk, AN, 2, AH}, kin);
        qm_none(&m);
      } else if (variant == 3) {
        qm_in(&m, TOLK_FLOAT, 4, (int64_t[]){AB, AN, Lk, AH}, kin);
        qm_in(&m, TOLK_FLOAT, 4, (int64_t[]){AB, AN, Lk, AH}, vin);
      } else {
        qm_in(&m, TOLK_FLOAT, 3, (int64_t[]){AB, Lk, AD}, kin);
        qm_in(&m, TOLK_FLOAT, 3, (int64_t[]){AB, Lk, AD}, vin);
      }
    }
    if (use_bias) qm_init(&m, TOLK_FLOAT, 1, (int64_t[]){3 * AD}, bias);
    else qm_none(&m);
    if (mkind) qm_in(&m, TOLK_INT32, mrank, md, mask);
    else qm_none(&m);
    qm_none(&m); /* attention_bias */
    if (P) {
      qm_in(&m, TOLK_FLOAT, 4, (int64_t[]){AB, AN, AP, AH}, pk);
      qm_in(&m, TOLK_FLOAT, 4, (int64_t[]){AB, AN, AP, AH}, pv);
    }
    qm_attr_int(&m, "num_heads", AN);
    if (causal) qm_attr_int(&m, "unidirectional", 1);
    qm_outs(&m, P ? "111" : "1");
    CHECK_MSG(qm_run(&m, variant % 2 + 1, &err) == TOLK_OK, "MHA %d: %s", variant, err.message);
    char what[64];
    snprintf(what, sizeof what, "MultiHeadAttention variant %d", variant);
    check_close(m.out[0], out, AB * S * AD, what);
    if (P) {
      check_close(m.out[1], k, AB * AN * T * AH, "MultiHeadAttention present_key");
      check_close(m.out[2], v, AB * AN * T * AH, "MultiHeadAttention present_value");
    }
    qm_end(&m);
  }
  free(qin), free(kin), free(vin), free(bias), free(pk), free(pv), free(packed);
}

int main(void) {
  test_activations();
  test_fused_matmul();
  test_norms();
  test_attention();
  test_mha();
  return tu_finish("test_ops_contrib");
}
