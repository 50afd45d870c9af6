/*
 * test_exec_fuse_bias.c — a MatMul by a constant W whose one reader is the
 * Add of a constant bias vector runs as one node (src/exec/fuse_bias.c):
 *
 *   out = Add(MatMul(x, W), bias)   or   Add(bias, MatMul(x, W))
 *
 * Each form gives bit for bit the outputs of the graph as written (opt
 * level none) — with W as floats, as bfloat16 (bf16_weights), as bfloat16
 * pairs for AVX512-BF16's products where the CPU has them, and as the
 * int8 head (int8_lm_head); on 1, 3, 13 and 64 rows (the few-rows, one-tile
 * and blocked paths of the GEMM) of 2-D and 3-D x; k over more than one
 * block; a bias [N], [1, N] (as final_logits_bias) or [1, 1, N], the output
 * of the Add's shape — and runs one node fewer. A product that is also a graph output,
 * and a bias of one value, stay as written; a bias shared through an
 * Identity is fused (the Identity folded).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "int8_graph.h"
#include "kern/kern.h"

enum { K = 300, N = 133 };

struct form {
  bool swap;           /* Add(bias, product) */
  bool product_output; /* the MatMul's result is a graph output too: not fused */
  bool scalar_bias;    /* a bias of one value: not fused */
  bool shared_bias;    /* the bias through an Identity */
  int bias_rank;       /* 0 or 1: [N]; 2: [1, N] (a final_logits_bias); 3: [1, 1, N] */
};

static struct ir_model *pair_model(const struct form *f, int rank) {
  struct ir_graph *g;
  struct ir_model *m = i8_model_x(rank, K, &g);
  static float w[K * N], bias[N];
  for (int i = 0; i < K * N; i++) w[i] = (float)(tu_unit() - 0.5);
  for (int i = 0; i < N; i++) bias[i] = (float)(3 * tu_unit() - 1.5);
  tb_init(m, g, "W", TOLK_FLOAT, 2, (int64_t[]){K, N}, w, sizeof w);
  int64_t nb = f->scalar_bias ? 1 : N, bdims[3] = {1, 1, 1};
  int br = f->bias_rank > 1 ? f->bias_rank : 1;
  bdims[br - 1] = nb;
  tb_init(m, g, "bias", TOLK_FLOAT, br, bdims, bias, (size_t)nb * sizeof *bias);
  tb_node(m, g, "MatMul", "", "head", "x,W", "prod");
  if (f->shared_bias) tb_node(m, g, "Identity", "", "share", "bias", "bias_shared");
  const char *b = f->shared_bias ? "bias_shared" : "bias";
  char add_in[32];
  snprintf(add_in, sizeof add_in, f->swap ? "%s,prod" : "prod,%s", b);
  tb_node(m, g, "Add", "", "bias_add", add_in, "out");
  tb_output(g, "out");
  if (f->product_output) tb_output(g, "prod");
  return m;
}

/* kind: 0 float W, 1 bf16_weights, 2 int8_lm_head, 3 bf16_weights products. */
static tolk_session *session(const struct ir_model *m, bool as_written, int kind) {
  tolk_session_params p = tolk_session_default_params();
  p.threads = 2;
  p.bf16_weights = kind == 1 ? TOLK_BF16_WEIGHTS : kind == 3 ? TOLK_BF16_PRODUCTS : TOLK_BF16_OFF;
  p.int8_lm_head = kind == 2;
  if (as_written) p.opt_level = TOLK_OPT_NONE;
  tolk_session *s = NULL;
  tolk_error err;
  CHECK_MSG(exec_session_create_ir(m, &p, NULL, &s, &err) == TOLK_OK, "%s", err.message);
  return s;
}

static tolk_tensor *run(tolk_session *s, int rank, int64_t rows, const float *x, uint32_t *nodes) {
  int64_t dims[3] = {rows, K, 0};
  if (rank == 3) dims[0] = 1, dims[1] = rows, dims[2] = K;
  tolk_tensor *in = tb_tensor(rank, dims, x), *out = NULL;
  const char *in_names[1] = {"x"}, *out_names[1] = {"out"};
  tolk_run_stats st;
  tolk_error err;
  CHECK_MSG(tolk_session_run(s, 1, in_names, (const tolk_tensor *const *)&in, 1, out_names, &out, &st, &err) ==
                TOLK_OK,
            "%s", err.message);
  *nodes = st.nodes_run;
  tolk_tensor_free(in);
  return out;
}

static void check_form(const struct form *f, int rank, int kind) {
  struct ir_model *m = pair_model(f, rank);
  tolk_session *ref = session(m, true, kind), *fused = session(m, false, kind);
  static const int64_t rows[] = {1, 3, 13, 64};
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
    const int64_t R = rows[r];
    float *x = malloc((size_t)(R * K) * sizeof *x);
    for (int64_t i = 0; i < R * K; i++) x[i] = (float)((tu_unit() - 0.3) * (i % 7 + 1));
    uint32_t na = 0, nb = 0;
    tolk_tensor *a = run(ref, rank, R, x, &na), *b = run(fused, rank, R, x, &nb);
    CHECK(a && b && tolk_tensor_nbytes(a) == (size_t)(R * N) * sizeof(float) &&
          tolk_tensor_nbytes(b) == tolk_tensor_nbytes(a));
    /* The Add's broadcast shape: a [1, 1, N] bias makes a 2-D product 3-D. */
    CHECK_MSG(a && b && tolk_tensor_rank(a) == tolk_tensor_rank(b) &&
                  !memcmp(tolk_tensor_dims(a), tolk_tensor_dims(b), (size_t)tolk_tensor_rank(a) * sizeof(int64_t)),
              "bias rank %d, rank %d: the shapes differ", f->bias_rank, rank);
    CHECK_MSG(a && b && !memcmp(tolk_tensor_data(a), tolk_tensor_data(b), tolk_tensor_nbytes(a)),
              "swap=%d product_output=%d scalar_bias=%d shared_bias=%d, rank %d, %lld rows, W kind %d: "
              "outputs differ",
              f->swap, f->product_output, f->scalar_bias, f->shared_bias, rank, (long long)R, kind);
    /* MatMul + Add become one node; a shared bias's Identity is folded. */
    uint32_t want = f->product_output || f->scalar_bias ? na : na - 1 - f->shared_bias;
    CHECK_MSG(nb == want, "swap=%d product_output=%d scalar_bias=%d shared_bias=%d: %u nodes run, expected %u "
              "(as written: %u)",
              f->swap, f->product_output, f->scalar_bias, f->shared_bias, nb, want, na);
    tolk_tensor_free(a), tolk_tensor_free(b);
    free(x);
  }
  tolk_session_free(ref);
  tolk_session_free(fused);
  tb_free(m);
}

int main(void) {
  tu_seed(0xb1a5f05eull);
  static const struct form forms[] = {
      {0},
      {.swap = true},
      {.product_output = true},
      {.scalar_bias = true},
      {.shared_bias = true, .swap = true},
      {.bias_rank = 2},
      {.bias_rank = 3, .swap = true},
  };
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
    for (int rank = 2; rank <= 3; rank++)
      for (int kind = 0; kind < 4; kind++)
        if (kind < 3 || kern_bf16dot_fast()) check_form(&forms[i], rank, kind);
  return tu_finish("test_exec_fuse_bias");
}
