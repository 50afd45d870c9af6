/*
 * contrib_norm.c — the normalisations ONNX Runtime writes into fused
 * transformer graphs: SkipLayerNormalization and
 * SkipSimplifiedLayerNormalization (com.microsoft: residual add + layer/RMS
 * norm, optionally returning the sum for the next residual), and ORT's own
 * LayerNormalization / SimplifiedLayerNormalization in the default domain,
 * which its LayerNorm fusion emits for models of opset < 17 (where ONNX has
 * no LayerNormalization yet; from 17 the norm family's op takes over).
 */
#include <string.h>

#include "contrib_cpu.h"
#include "nn_cpu.h"
#include "quant_util.h"

/* A [n] parameter vector (gamma, beta, bias); absent is fine unless
 * required. */
static tolk_status need_vec(struct op_ctx *c, const struct tensor *t, int64_t n, bool required,
                            const char *what) {
  char b1[128];
  if (!t) return required ? op_fail(c, TOLK_ERR_INVALID_MODEL, "%s is required", what) : TOLK_OK;
  tolk_status st = op_need_float(c, t, what);
  if (st) return st;
  if (t->numel != n)
    return op_fail(c, TOLK_ERR_SHAPE, "%s %s: expected %lld values", what,
                   shape_str(t, b1, sizeof b1), (long long)n);
  return TOLK_OK;
}

static bool wants(const struct op_ctx *c, size_t i) {
  return i < c->n_out && c->node->outputs[i] != NULL;
}

static void norm_range(void *arg, int64_t begin, int64_t end) {
  cx_norm_rows(arg, begin, end);
}

static int64_t norm_grain(int64_t n) { return n >= 8192 ? 1 : 8192 / (n > 0 ? n : 1); }

/* Optional statistics output i: input dims with the normalised ones set to
 * 1; NULL when the node does not ask for it. */
static tolk_status stat_out(struct op_ctx *c, size_t i, const struct tensor *x, int axis,
                            float **out) {
  *out = NULL;
  if (!wants(c, i)) return TOLK_OK;
  int64_t dims[IR_MAX_RANK];
  for (int d = 0; d < x->rank; d++) dims[d] = d < axis ? x->dims[d] : 1;
  struct tensor *t = op_output(c, i, TOLK_FLOAT, x->rank, dims);
  if (!t) return quant_err(c);
  *out = t->data;
  return TOLK_OK;
}

/* -------------------------------------------- Skip(Simplified)LayerNorm */

/* SkipLayerNormalization's rows: the sum x + (skip + bias) — the order of
 * the residual Add of a projection's biased output that tolk's fusion
 * (src/ir/fuse_skip.c) replaces — then ai.onnx LayerNormalization's own
 * row kernel, in place, so the fused node gives the unfused graph's
 * numbers bit for bit. */
static void skip_ln_range(void *arg, int64_t begin, int64_t end) {
  const struct cx_norm *p = arg;
  int64_t n = p->n;
  for (int64_t r = begin; r < end; r++) {
    const float *x = p->x + r * n, *skip = p->skip + (r * n) % p->skip_numel;
    float *s = (p->sum ? p->sum : p->y) + r * n;
    if (p->bias)
      for (int64_t i = 0; i < n; i++) s[i] = x[i] + (skip[i] + p->bias[i]);
    else
      for (int64_t i = 0; i < n; i++) s[i] = x[i] + skip[i];
    nn_layernorm_f32(s, p->y + r * n, 1, n, p->gamma, p->beta, p->eps, p->mean ? p->mean + r : NULL,
                     p->inv_std ? p->inv_std + r : NULL);
  }
}


static tolk_status run_skip_norm(struct op_ctx *c, bool simplified) {
  const struct tensor *x = op_in(c, 0), *skip = op_in(c, 1), *gamma = op_in(c, 2);
  const struct tensor *beta = simplified ? NULL : op_in(c, 3);
  const struct tensor *bias = op_in(c, simplified ? 3 : 4);
  char b1[128], b2[128];
  tolk_status st;
  if ((st = op_need_float(c, x, "input")) || (st = op_need_float(c, skip, "skip"))) return st;
  if (x->rank != 2 && x->rank != 3)
    return op_fail(c, TOLK_ERR_SHAPE, "input %s: expected rank 2 or 3",
                   shape_str(x, b1, sizeof b1));
  int64_t n = x->dims[x->rank - 1];
  /* skip: the input's shape, or its trailing dims ((1, S, D), (S, D)). */
  int lead = 0;
  while (lead < skip->rank && skip->dims[lead] == 1 && skip->rank - lead > 1) lead++;
  bool ok = skip->rank - lead <= x->rank && skip->numel > 0;
  for (int d = lead; ok && d < skip->rank; d++)
    ok = skip->dims[d] == x->dims[x->rank - (skip->rank - d)];
  if (!ok && !(x->numel == 0 && skip->numel == 0))
    return op_fail(c, TOLK_ERR_SHAPE, "skip %s does not match input %s",
                   shape_str(skip, b1, sizeof b1), shape_str(x, b2, sizeof b2));
  if ((st = need_vec(c, gamma, n, true, "gamma")) || (st = need_vec(c, beta, n, false, "beta")) ||
      (st = need_vec(c, bias, n, false, "bias")))
    return st;
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, x->rank, x->dims);
  if (!y) return quant_err(c);
  struct cx_norm p = {.x = x->data, .skip = skip->data, .bias = bias ? bias->data : NULL,
                      .gamma = gamma->data, .beta = beta ? beta->data : NULL,
                      .skip_numel = skip->numel, .n = n,
                      .eps = ir_attr_float(c->node, "epsilon", 1e-12f),
                      .simplified = simplified, .y = y->data};
  if ((st = stat_out(c, 1, x, x->rank - 1, &p.mean)) ||
      (st = stat_out(c, 2, x, x->rank - 1, &p.inv_std)))
    return st;
  if (wants(c, 3)) {
    struct tensor *s = op_output(c, 3, TOLK_FLOAT, x->rank, x->dims);
    if (!s) return quant_err(c);
    p.sum = s->data;
  }
  if (x->numel == 0) return TOLK_OK;
  op_parallel_for(c, x->numel / n, norm_grain(n), simplified ? norm_range : skip_ln_range, &p);
  return TOLK_OK;
}

static tolk_status run_skip_layernorm(struct op_ctx *c) { return run_skip_norm(c, false); }
static tolk_status run_skip_simplified(struct op_ctx *c) { return run_skip_norm(c, true); }

/* -------------------------------- ORT's (Simplified)LayerNormalization */

static tolk_status run_ort_norm(struct op_ctx *c, bool simplified) {
  const struct tensor *x = op_in(c, 0), *scale = op_in(c, 1);
  const struct tensor *bias = simplified ? NULL : op_in(c, 2);
  char b1[128];
  tolk_status st = op_need_float(c, x, "input X");
  if (st) return st;
  int64_t axis = ir_attr_int(c->node, "axis", -1);
  if (axis < -x->rank || axis >= x->rank)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "axis %lld out of range for input %s",
                   (long long)axis, shape_str(x, b1, sizeof b1));
  int ax = (int)(axis < 0 ? axis + x->rank : axis);
  int64_t n = 1;
  for (int d = ax; d < x->rank; d++) n *= x->dims[d];
  if ((st = need_vec(c, scale, n, true, "Scale")) || (st = need_vec(c, bias, n, false, "B")))
    return st;
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, x->rank, x->dims);
  if (!y) return quant_err(c);
  struct cx_norm p = {.x = x->data, .gamma = scale->data, .beta = bias ? bias->data : NULL,
                      .n = n, .eps = ir_attr_float(c->node, "epsilon", 1e-5f),
                      .simplified = simplified, .y = y->data};
  /* Layer norm: outputs Mean (1) and InvStdDev (2); simplified: only
   * inv_std_var (1). */
  if (simplified) {
    if ((st = stat_out(c, 1, x, ax, &p.inv_std))) return st;
  } else if ((st = stat_out(c, 1, x, ax, &p.mean)) || (st = stat_out(c, 2, x, ax, &p.inv_std))) {
    return st;
  }
  if (x->numel == 0 || n == 0) return TOLK_OK;
  op_parallel_for(c, x->numel / n, norm_grain(n), norm_range, &p);
  return TOLK_OK;
}

static tolk_status run_ort_layernorm(struct op_ctx *c) { return run_ort_norm(c, false); }
static tolk_status run_ort_simplified(struct op_ctx *c) { return run_ort_norm(c, true); }

const struct op_def tolk_ops_contrib_norm[] = {
    {"com.microsoft", "SkipLayerNormalization", 1, 0, NULL, run_skip_layernorm, NULL},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 1, 0, NULL, run_skip_simplified, NULL},
    {"", "LayerNormalization", 1, 16, NULL, run_ort_layernorm, NULL},
    {"", "SimplifiedLayerNormalization", 1, 0, NULL, run_ort_simplified, NULL},
    {0},
};
