/*
 * contrib.c — com.microsoft element-wise and matmul operators that ONNX
 * Runtime's optimizers write into transformer graphs: Gelu, BiasGelu,
 * FastGelu, QuickGelu (ORT fuses Marian's x * Sigmoid(x) into QuickGelu with
 * alpha 1) and FusedMatMul (MatMul with transposes and a scale folded in).
 * The normalisations are in contrib_norm.c, attention in attention.c, the
 * integer matmuls in quant_matmul.c; kernels in contrib_cpu.c.
 */
#include "contrib_cpu.h"
#include "kern/kern.h"
#include "matmul.h"
#include "quant_util.h"

/* ------------------------------------------------------------ GELU family */

struct act_job {
  enum cx_act act;
  const float *x, *bias;
  int64_t bias_n;
  float alpha;
  float *y;
};

static void act_range(void *arg, int64_t begin, int64_t end) {
  const struct act_job *j = arg;
  cx_act_f32(j->act, j->x, j->bias, j->bias_n, j->alpha, j->y, begin, end);
}

static tolk_status run_act(struct op_ctx *c, enum cx_act act, size_t bias_idx, float alpha) {
  const struct tensor *x = op_in(c, 0), *bias = bias_idx ? op_in(c, bias_idx) : NULL;
  char b1[128], b2[128];
  tolk_status st = op_need_float(c, x, "input 0");
  if (st) return st;
  if (bias) {
    if ((st = op_need_float(c, bias, "bias"))) return st;
    int64_t last = x->rank ? x->dims[x->rank - 1] : 1;
    if (bias->rank != 1 || bias->dims[0] != last || last == 0)
      return op_fail(c, TOLK_ERR_SHAPE, "bias %s must be 1-D with the last dimension of %s",
                     shape_str(bias, b1, sizeof b1), shape_str(x, b2, sizeof b2));
  }
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, x->rank, x->dims);
  if (!y) return quant_err(c);
  struct act_job j = {act, x->data, bias ? bias->data : NULL, bias ? bias->dims[0] : 0, alpha,
                      y->data};
  op_parallel_for(c, x->numel, 8192, act_range, &j);
  return TOLK_OK;
}

static tolk_status run_gelu(struct op_ctx *c) { return run_act(c, CX_GELU, 0, 0); }
static tolk_status run_bias_gelu(struct op_ctx *c) {
  if (!op_in(c, 1)) return op_fail(c, TOLK_ERR_INVALID_MODEL, "bias input B is required");
  return run_act(c, CX_GELU, 1, 0);
}
static tolk_status run_fast_gelu(struct op_ctx *c) { return run_act(c, CX_FAST_GELU, 1, 0); }
static tolk_status run_quick_gelu(struct op_ctx *c) {
  return run_act(c, CX_QUICK_GELU, 0, ir_attr_float(c->node, "alpha", 1.702f));
}

/* ----------------------------------------------------------- FusedMatMul */

struct fmm_job {
  bool ta, tb;
  int64_t m, n, k;
  float alpha;
  const float *a, *b;
  float *y;
  const struct mm_batch *bt;
  struct tolk_pool *inner; /* each product's GEMM's pool (mm_split) */
};

/* Products [begin, end) of the batch. */
static void fmm_range(void *arg, int64_t begin, int64_t end) {
  const struct fmm_job *j = arg;
  int64_t m = j->m, n = j->n, k = j->k;
  for (int64_t bi = begin; bi < end; bi++) {
    int64_t ao, bo;
    mm_batch_offsets(j->bt, bi, &ao, &bo);
    kern_sgemm(j->ta, j->tb, m, n, k, j->alpha, j->a + ao, j->ta ? m : k, j->b + bo, j->tb ? k : n,
               0.0f, j->y + bi * m * n, n, j->inner);
  }
}

/* Y = alpha * op(A) @ op(B) with numpy-matmul batch broadcasting; op()
 * transposes the last two dims when transA / transB is set (rank-1 inputs
 * are never transposed). */
static tolk_status run_fused_matmul(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  char b1[128], b2[128];
  tolk_status st;
  if ((st = op_need_float(c, a, "input A")) || (st = op_need_float(c, b, "input B"))) return st;
  if (ir_attr_int(c->node, "transBatchA", 0) || ir_attr_int(c->node, "transBatchB", 0))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "transBatchA/transBatchB are not supported");
  bool ta = ir_attr_int(c->node, "transA", 0) && a->rank >= 2;
  bool tb = ir_attr_int(c->node, "transB", 0) && b->rank >= 2;
  float alpha = ir_attr_float(c->node, "alpha", 1.0f);
  if (a->rank < 1 || b->rank < 1)
    return op_fail(c, TOLK_ERR_SHAPE, "inputs must have rank >= 1");
  int ar = a->rank, br = b->rank;
  int64_t m = ar >= 2 ? a->dims[ar - (ta ? 1 : 2)] : 1;
  int64_t k = ar >= 2 ? a->dims[ar - (ta ? 2 : 1)] : a->dims[0];
  int64_t bk = br >= 2 ? b->dims[br - (tb ? 1 : 2)] : b->dims[0];
  int64_t n = br >= 2 ? b->dims[br - (tb ? 2 : 1)] : 1;
  if (k != bk)
    return op_fail(c, TOLK_ERR_SHAPE, "inner dimensions differ: %s x %s (transA %d, transB %d)",
                   shape_str(a, b1, sizeof b1), shape_str(b, b2, sizeof b2), ta, tb);
  struct mm_batch bt;
  int64_t odims[IR_MAX_RANK], nbatch = 1;
  int orank;
  if (!mm_broadcast(a, b, m, n, k, &bt, odims, &orank))
    return op_fail(c, TOLK_ERR_SHAPE, "batch dimensions do not broadcast: %s x %s",
                   shape_str(a, b1, sizeof b1), shape_str(b, b2, sizeof b2));
  for (int d = 0; d < bt.rank; d++) nbatch *= bt.dims[d];
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, orank, odims);
  if (!y) return quant_err(c);
  if (y->numel == 0) return TOLK_OK;
  struct fmm_job j = {ta, tb, m, n, k, alpha, a->data, b->data, y->data, &bt, c->pool};
  /* As MatMul does: many small products (attention heads) one per task. */
  mm_split(c, nbatch, 2.0 * (double)m * (double)n * (double)k, fmm_range, &j, &j.inner);
  return TOLK_OK;
}

const struct op_def tolk_ops_contrib[] = {
    {"com.microsoft", "Gelu", 1, 0, NULL, run_gelu, NULL},
    {"com.microsoft", "BiasGelu", 1, 0, NULL, run_bias_gelu, NULL},
    {"com.microsoft", "FastGelu", 1, 0, NULL, run_fast_gelu, NULL},
    {"com.microsoft", "QuickGelu", 1, 0, NULL, run_quick_gelu, NULL},
    {"com.microsoft", "FusedMatMul", 1, 0, NULL, run_fused_matmul, NULL},
    {0},
};
