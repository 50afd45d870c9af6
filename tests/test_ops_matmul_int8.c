/*
 * test_ops_matmul_int8.c — the int8 LM head (tolk_session_params.int8_lm_head,
 * src/exec/lm_head.c, tolk_matmul_int8_def in src/ops/matmul.c), on the
 * graph a tied Marian head is: logits = MatMul(h, Transpose(E)) + bias, E the
 * [N, K] embedding, beside a hidden MatMul → Relu that must stay fp32. E comes
 * as an fp32 initializer, as ORT's int8 graphs store it —
 * DequantizeLinear(Transpose(int8 E)) with one scale — or as a graph input
 * (not constant: the head then runs as the fp32 MatMul, bit for bit).
 *
 * The error bound each logit is checked against, derived rather than tuned.
 * A row a of h is quantized with ORT's uint8 parameters (s_a = range/255 with
 * 0 in the range, a zero point, x/s rounded half to even and clamped to the
 * codes): |a_p - â_p| <= e_a = s_a (1/2 + 2^-16) — half a step from
 * rounding, and a clamped value is an integer within half a step of x/s; 2^-16
 * bounds the fp32 division's error on |x/s| <= 256. Column j of Eᵀ likewise
 * with s_j = max|E[j]|/127 symmetric: |b_p - b̂_p| <= e_j = s_j (1/2 + 2^-16).
 * Then a·b - â·b̂ = (a-â)·b + â·(b-b̂), so
 *   |a·b - â·b̂| <= e_a Σ|b_p| + e_j Σ(|a_p| + e_a).
 * The integer sum is exact; turning it into float and the two scale
 * multiplies, then the bias Add, each round once (2^-24 relative), and the
 * double reference is exact to far less: 2^-21 (Σ|a_p||b_p| + |bias_j|)
 * covers those with room. Every logit must lie within that bound of the
 * double product, and the test also prints how much of the bound was used.
 *
 * Also: the scalar igemm and the CPU's fast tier give bit-identical logits;
 * a row's logits do not depend on the other rows; the hidden MatMul → Relu
 * stays bit for bit fp32 with the option on. The option off is the fp32
 * path every other test and golden runs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "int8_graph.h"
#include "kern/igemm.h"

enum { K = 48, N = 300, R = 9 };

static float emb[N * K], bias[N], w_hidden[K * 8];
static int8_t emb_q[N * K];
static const float emb_q_scale = 0.0125f;

enum form { FP32_INIT, DEQUANTIZED, GRAPH_INPUT };

static struct ir_model *head_model(enum form form) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  static const char *const sym[] = {"rows", NULL};
  tb_input(m, g, "h", TOLK_FLOAT, 2, (int64_t[]){-1, K}, sym);
  if (form == FP32_INIT) {
    tb_init(m, g, "E", TOLK_FLOAT, 2, (int64_t[]){N, K}, emb, sizeof emb);
  } else if (form == GRAPH_INPUT) {
    tb_input(m, g, "E", TOLK_FLOAT, 2, (int64_t[]){N, K}, NULL);
  } else {
    i8_weight(m, g, "E", 2, (int64_t[]){N, K}, emb_q, 1, &emb_q_scale);
    tb_node(m, g, "DequantizeLinear", "", "dq", "E_quantized,E_scale,E_zero_point", "E");
  }
  tb_init(m, g, "bias", TOLK_FLOAT, 1, (int64_t[]){N}, bias, sizeof bias);
  tb_init(m, g, "W", TOLK_FLOAT, 2, (int64_t[]){K, 8}, w_hidden, sizeof w_hidden);
  tb_node(m, g, "Transpose", "", "tied", "E", "Et");
  tb_node(m, g, "MatMul", "", "head", "h,Et", "raw");
  tb_node(m, g, "Add", "", "bias_add", "raw,bias", "logits");
  tb_node(m, g, "MatMul", "", "hidden", "h,W", "hw");
  tb_node(m, g, "Relu", "", "relu", "hw", "act");
  tb_output(g, "logits");
  tb_output(g, "act");
  return m;
}

static tolk_session *session(const struct ir_model *m, int int8_head) {
  return i8_session(m, (struct i8_opts){.threads = 2, .int8_lm_head = int8_head});
}

/* Runs s on h (rows × K), and E when the model takes it as an input. */
static void run_form(tolk_session *s, enum form form, int64_t rows, const float *h,
                     tolk_tensor **out) {
  tolk_tensor *in[2] = {tb_tensor(2, (int64_t[]){rows, K}, h),
                        form == GRAPH_INPUT ? tb_tensor(2, (int64_t[]){N, K}, emb) : NULL};
  const char *names[2] = {"h", "E"};
  i8_run(s, form == GRAPH_INPUT ? 2 : 1, names, in, 2, out);
}

static void run(tolk_session *s, int64_t rows, const float *h, tolk_tensor **out) {
  run_form(s, FP32_INIT, rows, h, out);
}

/* ORT's uint8 scale of one row (quant_dynamic_params_u8's formula). */
static double row_scale(const float *a) {
  float lo = 0.0f, hi = 0.0f;
  for (int p = 0; p < K; p++) lo = fminf(lo, a[p]), hi = fmaxf(hi, a[p]);
  return (double)((hi - lo) / 255.0f);
}

/* Checks every logit against the bound of the header comment; returns the
 * largest share of its bound an error used. */
static double check_bound(const float *h, const float *logits) {
  const double slack = 0.5 + 1.0 / 65536.0;
  double worst = 0.0;
  int outside = 0;
  for (int i = 0; i < R; i++) {
    const float *a = h + i * K;
    double ea = row_scale(a) * slack;
    for (int j = 0; j < N; j++) {
      const float *b = emb + j * K;
      double amax = 0.0, ref = bias[j], sum_b = 0.0, sum_a = 0.0, sum_ab = 0.0;
      for (int p = 0; p < K; p++) amax = fmax(amax, fabs(b[p]));
      double ej = amax / 127.0 * slack;
      for (int p = 0; p < K; p++) {
        ref += (double)a[p] * b[p];
        sum_b += fabs(b[p]);
        sum_a += fabs(a[p]) + ea;
        sum_ab += fabs((double)a[p] * b[p]);
      }
      double bound = ea * sum_b + ej * sum_a + ldexp(sum_ab + fabs(bias[j]), -21);
      double err = fabs(logits[i * N + j] - ref);
      if (err > bound) outside++;
      if (err / bound > worst) worst = err / bound;
    }
  }
  CHECK_MSG(outside == 0, "%d of %d logits outside their quantization bound", outside, R * N);
  return worst;
}

static void fill(float *h) {
  for (int j = 0; j < N; j++) {
    /* Rows of very different norms, as an embedding has: per-row scales
     * matter, and a per-tensor scale would break the bound. */
    double norm = j % 17 == 0 ? 4.0 : 0.05 + 0.1 * (j % 5);
    for (int p = 0; p < K; p++) emb[j * K + p] = (float)(norm * tu_unit());
    bias[j] = (float)(0.5 * tu_unit());
  }
  for (int i = 0; i < K * 8; i++) w_hidden[i] = (float)tu_unit();
  for (int i = 0; i < N * K; i++) emb_q[i] = (int8_t)(tu_below(255) - 127);
  for (int i = 0; i < R; i++)
    for (int p = 0; p < K; p++) h[i * K + p] = (float)(tu_unit() * (1 + i % 3) + (i == 4 ? 2.0 : 0.0));
}

/* ORT's DequantizeLinear(int8 E) form: within the bound of the dequantized
 * values (per-tensor int8 requantized per row). E as a graph input: nothing
 * to quantize at creation, so the head is the fp32 MatMul, bit for bit. */
static void check_other_forms(const float *h) {
  for (int i = 0; i < N * K; i++) emb[i] = (float)emb_q[i] * emb_q_scale;
  struct ir_model *m = head_model(DEQUANTIZED);
  tolk_session *q = session(m, 1), *fp = session(m, 0);
  tolk_tensor *got[2] = {0}, *ref[2] = {0};
  run_form(q, DEQUANTIZED, R, h, got);
  run_form(fp, DEQUANTIZED, R, h, ref);
  double used = check_bound(h, tolk_tensor_data(got[0]));
  printf("DequantizeLinear(int8) head: largest error %.3f of its bound\n", used);
  CHECK_MSG(memcmp(tolk_tensor_data(got[0]), tolk_tensor_data(ref[0]), sizeof(float) * R * N) != 0,
            "DequantizeLinear form: the int8 head did not run");
  for (int i = 0; i < 2; i++) tolk_tensor_free(got[i]), tolk_tensor_free(ref[i]);
  tolk_session_free(q);
  tolk_session_free(fp);
  tb_free(m);

  memset(got, 0, sizeof got); /* non-NULL entries would be caller-bound outputs */
  memset(ref, 0, sizeof ref);
  m = head_model(GRAPH_INPUT);
  q = session(m, 1), fp = session(m, 0);
  run_form(q, GRAPH_INPUT, R, h, got);
  run_form(fp, GRAPH_INPUT, R, h, ref);
  CHECK_MSG(!memcmp(tolk_tensor_data(got[0]), tolk_tensor_data(ref[0]), sizeof(float) * R * N),
            "a head whose E is a graph input must run as the fp32 MatMul");
  for (int i = 0; i < 2; i++) tolk_tensor_free(got[i]), tolk_tensor_free(ref[i]);
  tolk_session_free(q);
  tolk_session_free(fp);
  tb_free(m);
}

int main(void) {
  tu_seed(0x1a8e5d0c3ull);
  float h[R * K];
  fill(h);
  struct ir_model *m = head_model(FP32_INIT);
  tolk_session *fp = session(m, 0), *q = session(m, 1);
  tolk_tensor *ref[2] = {0}, *got[2] = {0}, *scalar[2] = {0};
  run(fp, R, h, ref);
  run(q, R, h, got);
  const float *lq = tolk_tensor_data(got[0]), *lf = tolk_tensor_data(ref[0]);
  double used = check_bound(h, lq);
  printf("int8 head: largest error %.3f of its bound (igemm tier %s)\n", used, kern_igemm_isa());
  CHECK_MSG(memcmp(lq, lf, sizeof(float) * R * N) != 0,
            "int8 and fp32 logits are identical: the int8 head did not run");
  CHECK_MSG(!memcmp(tolk_tensor_data(got[1]), tolk_tensor_data(ref[1]), sizeof(float) * R * 8),
            "the hidden MatMul → Relu (not a head) must stay fp32");

  /* Each row alone gives the same logits as in the batch. */
  int same = 0;
  for (int i = 0; i < R; i++) {
    tolk_tensor *one[2] = {0};
    run(q, 1, h + i * K, one);
    same += !memcmp(tolk_tensor_data(one[0]), lq + i * N, sizeof(float) * N);
    tolk_tensor_free(one[0]);
    tolk_tensor_free(one[1]);
  }
  CHECK_MSG(same == R, "%d of %d rows alone match the batch", same, R);

  /* The portable igemm is the oracle: bit-identical logits. */
  const char *fast = kern_igemm_isa();
  CHECK(kern_igemm_force_isa("scalar"));
  run(q, R, h, scalar);
  CHECK_MSG(!memcmp(tolk_tensor_data(scalar[0]), lq, sizeof(float) * R * N),
            "scalar and %s igemm logits differ", fast);
  kern_igemm_force_isa(NULL);

  for (int i = 0; i < 2; i++) {
    tolk_tensor_free(ref[i]);
    tolk_tensor_free(got[i]);
    tolk_tensor_free(scalar[i]);
  }
  tolk_session_free(fp);
  tolk_session_free(q);
  tb_free(m);
  check_other_forms(h);
  return tu_finish("test_ops_matmul_int8");
}
