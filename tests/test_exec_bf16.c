/*
 * test_exec_bf16.c — tolk_session_params.bf16_weights: MatMul and Gemm by
 * constant float matrices hold them as bfloat16. A session with the option
 * gives bit for bit what a session without it gives on the model whose
 * weights were rounded to bfloat16 beforehand (one row, which takes the
 * several-panels path, and many); a MatMul whose B is an input is
 * untouched; the packed weights take half the bytes; and the option does
 * change the numbers on weights that do not round to themselves.
 *
 * With TOLK_BF16_PRODUCTS, where the CPU has AVX512-BF16, the two products
 * come out bit for bit as kern_bf16dot_ref gives them (the Gemm's C added
 * after, as without the option); where it has not (or the test makes the
 * kernel portable), creation fails with TOLK_ERR_UNSUPPORTED. A value past
 * TOLK_BF16_PRODUCTS is refused.
 */
#include <stdbool.h>
#include <string.h>

#include "core/half.h"
#include "exec/exec.h"
#include "kern/kern.h"
#include "exec_graph.h"
#include "ops/matmul.h" /* op_packed_stats */
#include "testutil.h"

enum { K = 40, N = 70, N2 = 33 };

/* y1 = MatMul(x, W1); y2 = Gemm(x, W2, C, transB = 1); y3 = MatMul(x, B3)
 * with B3 an input. `round` rounds W1 and W2 to bfloat16 first. */
static struct ir_model *model(bool round, const float *w1, const float *w2) {
  struct ir_model *m = tb_model();
  struct ir_graph *g = tb_graph(m, NULL, "main");
  static float r1[K * N], r2[N2 * K], c[N2];
  for (int i = 0; i < K * N; i++) r1[i] = round ? tolk_bf16_to_f32(tolk_f32_to_bf16(w1[i])) : w1[i];
  for (int i = 0; i < N2 * K; i++) r2[i] = round ? tolk_bf16_to_f32(tolk_f32_to_bf16(w2[i])) : w2[i];
  for (int i = 0; i < N2; i++) c[i] = (float)i * 0.125f - 2.0f;
  tb_input(m, g, "x", TOLK_FLOAT, 2, (int64_t[]){-1, K}, (const char *[]){"rows", NULL});
  tb_input(m, g, "b3", TOLK_FLOAT, 2, (int64_t[]){K, N2}, NULL);
  tb_init(m, g, "w1", TOLK_FLOAT, 2, (int64_t[]){K, N}, r1, sizeof r1);
  tb_init(m, g, "w2", TOLK_FLOAT, 2, (int64_t[]){N2, K}, r2, sizeof r2);
  tb_init(m, g, "c", TOLK_FLOAT, 1, (int64_t[]){N2}, c, sizeof c);
  tb_node(m, g, "MatMul", "", "mm", "x,w1", "y1");
  struct ir_node *gemm = tb_node(m, g, "Gemm", "", "gemm", "x,w2,c", "y2");
  tb_attr_int(gemm, "transB", 1);
  tb_node(m, g, "MatMul", "", "mm3", "x,b3", "y3");
  tb_output(g, "y1");
  tb_output(g, "y2");
  tb_output(g, "y3");
  return m;
}

static tolk_session *session(const struct ir_model *m, int bf16) {
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  p.bf16_weights = bf16;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK_MSG(exec_session_create_ir(m, &p, NULL, &s, &err) == TOLK_OK, "%s", err.message);
  return s;
}

/* The three outputs for `rows` rows of x, concatenated into out. */
static void run(tolk_session *s, int64_t rows, const float *x, const float *b3, float *out) {
  tolk_tensor *in[2] = {tb_tensor(2, (int64_t[]){rows, K}, x), tb_tensor(2, (int64_t[]){K, N2}, b3)};
  const char *in_names[2] = {"x", "b3"}, *out_names[3] = {"y1", "y2", "y3"};
  tolk_tensor *y[3] = {NULL, NULL, NULL};
  tolk_error err;
  CHECK_MSG(tolk_session_run(s, 2, in_names, (const tolk_tensor *const *)in, 3, out_names, y, NULL, &err) ==
                TOLK_OK,
            "%s", err.message);
  size_t at = 0;
  for (int i = 0; i < 3; i++) {
    if (y[i]) memcpy(out + at, tolk_tensor_data(y[i]), tolk_tensor_nbytes(y[i]));
    at += (size_t)rows * (size_t)(i == 0 ? N : N2);
    tolk_tensor_free(y[i]);
  }
  tolk_tensor_free(in[0]);
  tolk_tensor_free(in[1]);
}

/* TOLK_BF16_PRODUCTS against the reference, or refused. */
static void products(const struct ir_model *m, const float *w1, const float *w2, const float *x,
                     const float *b3) {
  tolk_session_params p = tolk_session_default_params();
  p.bf16_weights = TOLK_BF16_PRODUCTS + 1;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK(exec_session_create_ir(m, &p, NULL, &s, &err) == TOLK_ERR_INVALID_ARGUMENT && !s);
  p.bf16_weights = TOLK_BF16_PRODUCTS;
  kern_bf16dot_force_portable(true);
  CHECK(exec_session_create_ir(m, &p, NULL, &s, &err) == TOLK_ERR_UNSUPPORTED && !s);
  CHECK_MSG(strstr(err.message, "AVX512-BF16") != NULL, "%s", err.message);
  kern_bf16dot_force_portable(false);
  if (!kern_bf16dot_fast()) {
    printf("bfloat16 products: no AVX512-BF16 here, only the refusal tested\n");
    return;
  }
  s = session(m, TOLK_BF16_PRODUCTS);
  enum { R = 13, OUT = R * (N + 2 * N2) };
  static float y[OUT], want[R * N], want2[R * N2], w2t[K * N2];
  for (int j = 0; j < N2; j++)
    for (int p2 = 0; p2 < K; p2++) w2t[p2 * N2 + j] = w2[j * K + p2];
  static const int64_t rows[] = {1, 2, 9, 13};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const int64_t r = rows[i];
    run(s, r, x, b3, y);
    kern_bf16dot_ref(r, N, K, 1.0f, x, K, w1, N, 0.0f, NULL, want, N);
    kern_bf16dot_ref(r, N2, K, 1.0f, x, K, w2t, N2, 0.0f, NULL, want2, N2);
    for (int64_t e = 0; e < r * N2; e++) want2[e] = want2[e] + ((float)(e % N2) * 0.125f - 2.0f);
    CHECK_MSG(!memcmp(y, want, (size_t)(r * N) * sizeof *y), "%lld rows: MatMul off kern_bf16dot_ref", (long long)r);
    CHECK_MSG(!memcmp(y + r * N, want2, (size_t)(r * N2) * sizeof *y), "%lld rows: Gemm off kern_bf16dot_ref",
              (long long)r);
  }
  tolk_session_free(s);
  printf("bfloat16 products: AVX512-BF16, as the reference\n");
}

static size_t packed_bytes(void) {
  size_t bytes = 0;
  op_packed_stats(NULL, &bytes);
  return bytes;
}

int main(void) {
  tu_seed(0xbf16);
  static float w1[K * N], w2[N2 * K], x[13 * K], b3[K * N2];
  for (int i = 0; i < K * N; i++) w1[i] = (float)tu_unit();
  for (int i = 0; i < N2 * K; i++) w2[i] = (float)tu_unit() * 3.0f;
  for (int i = 0; i < 13 * K; i++) x[i] = (float)tu_unit();
  for (int i = 0; i < K * N2; i++) b3[i] = (float)tu_unit();
  struct ir_model *exact = model(false, w1, w2), *rounded = model(true, w1, w2);

  size_t before = packed_bytes();
  tolk_session *bf = session(exact, true);
  size_t bf_bytes = packed_bytes() - before;
  tolk_session *ref = session(rounded, false);
  size_t f32_bytes = packed_bytes() - before - bf_bytes;
  tolk_session *plain = session(exact, false);
  CHECK_MSG(bf_bytes > 0 && bf_bytes * 2 == f32_bytes, "packed weights: %zu bytes as bfloat16, %zu as floats",
            bf_bytes, f32_bytes);

  enum { OUT = 13 * (N + 2 * N2) };
  static float a[OUT], b[OUT], c[OUT];
  static const int64_t rows[] = {1, 2, 13};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    size_t n = (size_t)rows[i] * (N + 2 * N2);
    run(bf, rows[i], x, b3, a);
    run(ref, rows[i], x, b3, b);
    run(plain, rows[i], x, b3, c);
    CHECK_MSG(!memcmp(a, b, n * sizeof *a), "%lld rows: bf16_weights differs from the rounded model",
              (long long)rows[i]);
    /* y3's B is an input: as without the option. */
    size_t y3 = (size_t)rows[i] * (N + N2);
    CHECK(!memcmp(a + y3, c + y3, (size_t)rows[i] * N2 * sizeof *a));
    /* The weights do not round to themselves: y1 and y2 change. */
    CHECK(memcmp(a, c, y3 * sizeof *a) != 0);
  }
  products(exact, w1, w2, x, b3);
  tolk_session_free(bf);
  tolk_session_free(ref);
  tolk_session_free(plain);
  tb_free(exact);
  tb_free(rounded);
  return tu_finish("test_exec_bf16");
}
