/*
 * norm.c — the normalisation family: LayerNormalization (opset 17, and any
 * later version), BatchNormalization (inference, plus training_mode's
 * batch statistics and running-stat outputs; `spatial` = 0 of opsets < 9),
 * InstanceNormalization, GroupNormalization (18: per-group scale and bias;
 * 21: per-channel), RMSNormalization (23), LpNormalization and
 * MeanVarianceNormalization.
 *
 * LayerNormalization on float (the translation model's hot path) and
 * BatchNormalization on float run on float data directly; every other case
 * is staged through double, which is exact for all the float dtypes and
 * keeps one code path for the ops that are not on a hot path. Statistics are
 * always computed in double.
 */
#include <math.h>
#include <string.h>

#include "nn_cpu.h"
#include "nn_util.h"

/* ------------------------------------------------------------- helpers */

static tolk_status need_float(struct op_ctx *c, const struct tensor *t, const char *what) {
  if (!t) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "input '%s' is missing", what);
  if (!nn_is_float(t->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "input '%s' has dtype %s; a float type is required",
                   what, tolk_dtype_name((tolk_dtype)t->dtype));
  return TOLK_OK;
}

/* Expands parameter p, numpy-broadcast against the trailing dims nd[0..nr)
 * (of product n), into n doubles; NULL with c->err set when p does not
 * broadcast to them. */
static double *expand_param(struct op_ctx *c, const struct tensor *p, const int64_t *nd,
                            int nr, int64_t n, const char *what) {
  char b1[96];
  int lead = p->rank - nr;
  for (int d = 0; d < p->rank; d++) {
    int nd_i = d - lead;
    bool ok = nd_i < 0 ? p->dims[d] == 1 : (p->dims[d] == 1 || p->dims[d] == nd[nd_i]);
    if (!ok) {
      op_fail(c, TOLK_ERR_SHAPE, "'%s' of shape %s does not broadcast to the normalised dims",
              what, shape_str(p, b1, sizeof b1));
      return NULL;
    }
  }
  double *out = op_scratch(c, (size_t)(n ? n : 1) * sizeof(double));
  if (!out) return NULL;
  /* Strides of p seen through the trailing dims (0 where broadcast). */
  int64_t pst[IR_MAX_RANK] = {0};
  int64_t st = 1;
  for (int d = p->rank - 1; d >= 0; d--) {
    int nd_i = d - lead;
    if (nd_i >= 0 && p->dims[d] != 1) pst[nd_i] = st;
    st *= p->dims[d];
  }
  for (int64_t j = 0; j < n; j++) {
    int64_t rem = j, off = 0;
    for (int d = nr - 1; d >= 0; d--) {
      off += (rem % nd[d]) * pst[d];
      rem /= nd[d];
    }
    out[j] = nn_get_f64(p, off);
  }
  return out;
}

/* The dtype of optional statistics output i: as declared when the model says,
 * else double for double inputs and float otherwise. */
static int32_t stat_dtype(const struct op_ctx *c, size_t i, int32_t xdt) {
  const struct ir_value *v = i < c->node->n_outputs ? c->node->outputs[i] : NULL;
  if (v && v->type.kind == IR_TYPE_TENSOR && nn_is_float(v->type.dtype)) return v->type.dtype;
  return xdt == TOLK_DOUBLE ? TOLK_DOUBLE : TOLK_FLOAT;
}

static void store_f64(struct tensor *t, int64_t i, double v) {
  switch (t->dtype) {
  case TOLK_FLOAT: ((float *)t->data)[i] = (float)v; break;
  case TOLK_DOUBLE: ((double *)t->data)[i] = v; break;
  case TOLK_FLOAT16: ((uint16_t *)t->data)[i] = tolk_f64_to_f16(v); break;
  case TOLK_BFLOAT16: ((uint16_t *)t->data)[i] = tolk_f64_to_bf16(v); break;
  default: break;
  }
}

/* ------------------------------------------------------------- LayerNormalization */

struct ln_job {
  const float *x, *scale, *bias;
  float *y, *mean, *inv;
  const double *xd, *scaled, *biasd;
  double *yd, *meand, *invd;
  int64_t n;
  float eps;
};

static void ln_range(void *arg, int64_t b, int64_t e) {
  const struct ln_job *j = arg;
  if (j->x)
    nn_layernorm_f32(j->x + b * j->n, j->y + b * j->n, e - b, j->n, j->scale, j->bias,
                     j->eps, j->mean ? j->mean + b : NULL, j->inv ? j->inv + b : NULL);
  else
    nn_layernorm_f64(j->xd + b * j->n, j->yd + b * j->n, e - b, j->n, j->scaled, j->biasd,
                     (double)j->eps, j->meand + b, j->invd + b);
}

/* A float parameter that already has exactly the normalised shape (leading
 * 1s aside) is used in place. */
static bool param_direct(const struct tensor *p, const int64_t *nd, int nr, int64_t n) {
  if (p->dtype != TOLK_FLOAT || p->numel != n) return false;
  int lead = p->rank - nr;
  for (int d = 0; d < p->rank; d++) {
    int64_t want = d < lead ? 1 : nd[d - lead];
    if (p->dims[d] != want) return false;
  }
  return true;
}

static float *to_f32(struct op_ctx *c, const double *v, int64_t n) {
  float *o = op_scratch(c, (size_t)(n ? n : 1) * sizeof(float));
  if (o)
    for (int64_t i = 0; i < n; i++) o[i] = (float)v[i];
  return o;
}

/* LayerNormalization's and RMSNormalization's `axis`: x viewed as rows × n,
 * normalised over the dims from axis on. */
static tolk_status norm_axis(struct op_ctx *c, const struct tensor *x, int *axis, int64_t *rows,
                             int64_t *n) {
  int64_t a_attr = ir_attr_int(c->node, "axis", -1);
  if (!nn_axis(a_attr, x->rank, axis))
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                   (long long)a_attr, x->rank);
  *rows = *n = 1;
  for (int d = 0; d < x->rank; d++) {
    if (d < *axis)
      *rows *= x->dims[d];
    else
      *n *= x->dims[d];
  }
  return TOLK_OK;
}

static tolk_status run_layernorm(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *sc = op_in(c, 1), *bi = op_in(c, 2);
  if (need_float(c, x, "X") || need_float(c, sc, "Scale") || (bi && need_float(c, bi, "B")))
    return nn_status(c);
  int rank = x->rank, axis;
  int64_t rows = 1, n = 1;
  tolk_status st = norm_axis(c, x, &axis, &rows, &n);
  if (st) return st;
  float eps = ir_attr_float(c->node, "epsilon", 1e-5f);
  const int64_t *nd = x->dims + axis;
  int nr = rank - axis;
  struct tensor *y = op_output(c, 0, x->dtype, rank, x->dims);
  if (!y) return nn_status(c);
  int64_t sdims[IR_MAX_RANK];
  for (int d = 0; d < rank; d++) sdims[d] = d < axis ? x->dims[d] : 1;
  struct tensor *mo = NULL, *io = NULL;
  if (c->n_out > 1 && c->node->outputs[1]) {
    mo = op_output(c, 1, stat_dtype(c, 1, x->dtype), rank, sdims);
    if (!mo) return nn_status(c);
  }
  if (c->n_out > 2 && c->node->outputs[2]) {
    io = op_output(c, 2, stat_dtype(c, 2, x->dtype), rank, sdims);
    if (!io) return nn_status(c);
  }
  if (y->numel == 0) return TOLK_OK;

  struct ln_job job = {.n = n, .eps = eps};
  int64_t grain = n >= 4096 ? 1 : 4096 / (n ? n : 1);
  if (x->dtype != TOLK_DOUBLE) {
    /* fp32 compute: float data in place, float16/bfloat16 staged. */
    job.x = nn_in_f32(c, x);
    job.y = nn_out_f32(c, y);
    if (!job.x || !job.y) return nn_status(c);
    if (param_direct(sc, nd, nr, n)) {
      job.scale = sc->data;
    } else {
      double *s = expand_param(c, sc, nd, nr, n, "Scale");
      if (!s || !(job.scale = to_f32(c, s, n))) return nn_status(c);
    }
    if (bi && param_direct(bi, nd, nr, n)) {
      job.bias = bi->data;
    } else if (bi) {
      double *s = expand_param(c, bi, nd, nr, n, "B");
      if (!s || !(job.bias = to_f32(c, s, n))) return nn_status(c);
    }
    if (mo) job.mean = mo->dtype == TOLK_FLOAT ? mo->data : op_scratch(c, (size_t)rows * 4);
    if (io) job.inv = io->dtype == TOLK_FLOAT ? io->data : op_scratch(c, (size_t)rows * 4);
    if ((mo && !job.mean) || (io && !job.inv)) return nn_status(c);
    op_parallel_for(c, rows, grain, ln_range, &job);
    nn_out_f32_finish(y, job.y);
    for (int64_t r = 0; mo && mo->dtype != TOLK_FLOAT && r < rows; r++)
      store_f64(mo, r, job.mean[r]);
    for (int64_t r = 0; io && io->dtype != TOLK_FLOAT && r < rows; r++)
      store_f64(io, r, job.inv[r]);
    return TOLK_OK;
  }
  job.xd = x->data;
  job.yd = y->data;
  job.scaled = expand_param(c, sc, nd, nr, n, "Scale");
  if (!job.scaled) return nn_status(c);
  if (bi && !(job.biasd = expand_param(c, bi, nd, nr, n, "B"))) return nn_status(c);
  job.meand = op_scratch(c, (size_t)(rows ? rows : 1) * sizeof(double));
  job.invd = op_scratch(c, (size_t)(rows ? rows : 1) * sizeof(double));
  if (!job.meand || !job.invd) return nn_status(c);
  op_parallel_for(c, rows, grain, ln_range, &job);
  for (int64_t r = 0; r < rows; r++) {
    if (mo) store_f64(mo, r, job.meand[r]);
    if (io) store_f64(io, r, job.invd[r]);
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------- RMSNormalization */

struct rms_job {
  const float *x, *scale;
  float *y;
  int64_t n;
  float eps;
};

static void rms_range(void *arg, int64_t b, int64_t e) {
  const struct rms_job *j = arg;
  nn_rmsnorm_f32(j->x + b * j->n, j->y + b * j->n, e - b, j->n, j->scale, j->eps);
}

static tolk_status run_rmsnorm(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *sc = op_in(c, 1);
  if (need_float(c, x, "X") || need_float(c, sc, "scale")) return nn_status(c);
  int rank = x->rank, axis;
  int64_t rows = 1, n = 1;
  tolk_status st = norm_axis(c, x, &axis, &rows, &n);
  if (st) return st;
  float eps = ir_attr_float(c->node, "epsilon", 1e-5f);
  const int64_t *nd = x->dims + axis;
  int nr = rank - axis;
  struct tensor *y = op_output(c, 0, x->dtype, rank, x->dims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  double *sd = expand_param(c, sc, nd, nr, n, "scale");
  if (!sd) return nn_status(c);
  if (x->dtype != TOLK_DOUBLE) {
    struct rms_job job = {.x = nn_in_f32(c, x), .y = nn_out_f32(c, y), .n = n, .eps = eps};
    job.scale = to_f32(c, sd, n);
    if (!job.x || !job.y || !job.scale) return nn_status(c);
    op_parallel_for(c, rows, n >= 4096 ? 1 : 4096 / n, rms_range, &job);
    nn_out_f32_finish(y, job.y);
    return TOLK_OK;
  }
  const double *xd = x->data;
  double *yd = y->data;
  for (int64_t r = 0; r < rows; r++) {
    double q = 0;
    for (int64_t j = 0; j < n; j++) q += xd[r * n + j] * xd[r * n + j];
    double inv = 1.0 / sqrt(q / (double)n + (double)eps);
    for (int64_t j = 0; j < n; j++) yd[r * n + j] = xd[r * n + j] * inv * sd[j];
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------- BatchNormalization */

static tolk_status run_batchnorm(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  const struct tensor *p[4] = {op_in(c, 1), op_in(c, 2), op_in(c, 3), op_in(c, 4)};
  static const char *const names[4] = {"scale", "B", "input_mean", "input_var"};
  if (need_float(c, x, "X")) return nn_status(c);
  for (int i = 0; i < 4; i++)
    if (need_float(c, p[i], names[i])) return nn_status(c);
  if (x->rank < 2)
    return op_fail(c, TOLK_ERR_SHAPE, "X must have rank >= 2 (N x C x ...), got rank %d",
                   x->rank);
  int64_t nb = x->dims[0], ch = x->dims[1], sp = 1;
  for (int d = 2; d < x->rank; d++) sp *= x->dims[d];
  /* Parameters are per channel, or with spatial = 0 (opsets < 9) per
   * (channel, position). */
  bool per_elem = c->opset < 9 && ir_attr_int(c->node, "spatial", 1) == 0 && sp > 1;
  int64_t np = per_elem ? ch * sp : ch;
  for (int i = 0; i < 4; i++)
    if (p[i]->numel != np)
      return op_fail(c, TOLK_ERR_SHAPE, "'%s' has %lld elements; expected %lld", names[i],
                     (long long)p[i]->numel, (long long)np);
  double eps = ir_attr_float(c->node, "epsilon", 1e-5f);
  double mom = ir_attr_float(c->node, "momentum", 0.9f);
  bool training = c->opset >= 14 && ir_attr_int(c->node, "training_mode", 0) != 0;
  if (training && per_elem)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "training mode with spatial = 0");
  struct tensor *y = op_output(c, 0, x->dtype, x->rank, x->dims);
  if (!y) return nn_status(c);

  /* Statistics and the affine coefficients, in double. */
  double *mean = op_scratch(c, (size_t)(np ? np : 1) * sizeof(double) * 4);
  if (!mean) return nn_status(c);
  double *var = mean + np, *a = var + np, *b = a + np;
  for (int64_t k = 0; k < np; k++) {
    mean[k] = nn_get_f64(p[2], k);
    var[k] = nn_get_f64(p[3], k);
  }
  const float *xf = x->dtype == TOLK_FLOAT ? x->data : NULL;
  const double *xd = NULL;
  if (!xf && !(xd = nn_in_f64(c, x))) return nn_status(c);
  if (training) {
    /* Running statistics are outputs 1 and 2. */
    struct tensor *run_out[3] = {NULL, NULL, NULL};
    for (size_t o = 1; o < 3 && o < c->n_out; o++) {
      if (!c->node->outputs[o]) continue;
      run_out[o] = op_output(c, o, p[o + 1]->dtype, p[o + 1]->rank, p[o + 1]->dims);
      if (!run_out[o]) return nn_status(c);
    }
    int64_t cnt = nb * sp;
    for (int64_t k = 0; k < ch; k++) {
      double s = 0, q = 0;
      for (int64_t i = 0; i < nb; i++) {
        int64_t off = (i * ch + k) * sp;
        for (int64_t j = 0; j < sp; j++) s += xf ? xf[off + j] : xd[off + j];
      }
      double m = cnt ? s / (double)cnt : 0;
      for (int64_t i = 0; i < nb; i++) {
        int64_t off = (i * ch + k) * sp;
        for (int64_t j = 0; j < sp; j++) {
          double dv = (xf ? xf[off + j] : xd[off + j]) - m;
          q += dv * dv;
        }
      }
      double v = cnt ? q / (double)cnt : 0;
      if (run_out[1]) store_f64(run_out[1], k, mean[k] * mom + m * (1 - mom));
      if (run_out[2]) store_f64(run_out[2], k, var[k] * mom + v * (1 - mom));
      mean[k] = m;
      var[k] = v;
    }
  } else {
    /* Inference: the optional outputs of old opsets pass the running
     * statistics through unchanged. */
    for (size_t o = 1; o < c->n_out && o < 5; o++) {
      if (!c->node->outputs[o]) continue;
      const struct tensor *src = p[o == 1 || o == 3 ? 2 : 3];
      struct tensor *t = op_output(c, o, src->dtype, src->rank, src->dims);
      if (!t) return nn_status(c);
      if (src->nbytes) memcpy(t->data, src->data, src->nbytes);
    }
  }
  for (int64_t k = 0; k < np; k++) {
    a[k] = nn_get_f64(p[0], k) / sqrt(var[k] + eps);
    b[k] = nn_get_f64(p[1], k);
  }
  if (y->numel == 0) return TOLK_OK;
  if (xf) {
    float *yf = y->data;
    for (int64_t i = 0; i < nb; i++)
      for (int64_t k = 0; k < ch; k++) {
        int64_t off = (i * ch + k) * sp;
        if (per_elem) {
          for (int64_t j = 0; j < sp; j++) {
            int64_t q = k * sp + j;
            yf[off + j] = (xf[off + j] - (float)mean[q]) * (float)a[q] + (float)b[q];
          }
        } else {
          float mf = (float)mean[k], af = (float)a[k], bf = (float)b[k];
          for (int64_t j = 0; j < sp; j++) yf[off + j] = (xf[off + j] - mf) * af + bf;
        }
      }
    return TOLK_OK;
  }
  double *yd = nn_out_f64(c, y);
  if (!yd) return nn_status(c);
  for (int64_t i = 0; i < nb; i++)
    for (int64_t k = 0; k < ch; k++) {
      int64_t off = (i * ch + k) * sp;
      for (int64_t j = 0; j < sp; j++) {
        int64_t q = per_elem ? k * sp + j : k;
        yd[off + j] = (xd[off + j] - mean[q]) * a[q] + b[q];
      }
    }
  nn_out_f64_finish(y, yd);
  return TOLK_OK;
}

/* ------------------------------------------------------------- Instance / Group */

/* Normalises groups of `glen` contiguous elements of x (a double copy) and
 * applies per-channel scale and bias, channel k of group g being elements
 * [k * clen, (k + 1) * clen) of it and channel index g_ch0 + k. */
static tolk_status group_norm_core(struct op_ctx *c, const struct tensor *x,
                                   const double *scale, const double *bias, int64_t nb,
                                   int64_t ch, int64_t groups, int64_t sp, double eps) {
  struct tensor *y = op_output(c, 0, x->dtype, x->rank, x->dims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  const double *xd = nn_in_f64(c, x);
  double *yd = xd ? nn_out_f64(c, y) : NULL;
  if (!yd) return nn_status(c);
  int64_t cpg = ch / groups, glen = cpg * sp;
  for (int64_t i = 0; i < nb; i++)
    for (int64_t g = 0; g < groups; g++) {
      int64_t off = (i * groups + g) * glen;
      double m, v;
      nn_moments_f64(xd + off, glen, &m, &v);
      double inv = 1.0 / sqrt(v + eps);
      for (int64_t k = 0; k < cpg; k++) {
        int64_t chn = g * cpg + k;
        double a = scale[chn] * inv, b = bias[chn];
        for (int64_t j = 0; j < sp; j++) {
          int64_t e = off + k * sp + j;
          yd[e] = (xd[e] - m) * a + b;
        }
      }
    }
  nn_out_f64_finish(y, yd);
  return TOLK_OK;
}

static double *param_vec(struct op_ctx *c, const struct tensor *t, int64_t n) {
  double *v = op_scratch(c, (size_t)(n ? n : 1) * sizeof(double));
  if (v)
    for (int64_t i = 0; i < n; i++) v[i] = nn_get_f64(t, i);
  return v;
}

static tolk_status run_instancenorm(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *sc = op_in(c, 1), *bi = op_in(c, 2);
  if (need_float(c, x, "input") || need_float(c, sc, "scale") || need_float(c, bi, "B"))
    return nn_status(c);
  if (x->rank < 2)
    return op_fail(c, TOLK_ERR_SHAPE, "input must have rank >= 2, got rank %d", x->rank);
  int64_t ch = x->dims[1], sp = 1;
  for (int d = 2; d < x->rank; d++) sp *= x->dims[d];
  if (sc->numel != ch || bi->numel != ch)
    return op_fail(c, TOLK_ERR_SHAPE, "scale and B need %lld elements (got %lld, %lld)",
                   (long long)ch, (long long)sc->numel, (long long)bi->numel);
  double *s = param_vec(c, sc, ch), *b = param_vec(c, bi, ch);
  if (!s || !b) return nn_status(c);
  return group_norm_core(c, x, s, b, x->dims[0], ch, ch, sp,
                         ir_attr_float(c->node, "epsilon", 1e-5f));
}

static tolk_status run_groupnorm(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *sc = op_in(c, 1), *bi = op_in(c, 2);
  if (need_float(c, x, "X") || need_float(c, sc, "scale") || need_float(c, bi, "bias"))
    return nn_status(c);
  if (x->rank < 2)
    return op_fail(c, TOLK_ERR_SHAPE, "X must have rank >= 2, got rank %d", x->rank);
  int64_t groups = ir_attr_int(c->node, "num_groups", 0);
  int64_t ch = x->dims[1], sp = 1;
  for (int d = 2; d < x->rank; d++) sp *= x->dims[d];
  if (groups <= 0 || ch % groups != 0)
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT,
                   "num_groups %lld must be positive and divide the %lld channels",
                   (long long)groups, (long long)ch);
  /* Opset 18 gives scale and bias per group, 21 per channel. */
  int64_t want = c->opset >= 21 ? ch : groups;
  if (sc->numel != want || bi->numel != want)
    return op_fail(c, TOLK_ERR_SHAPE, "scale and bias need %lld elements (got %lld, %lld)",
                   (long long)want, (long long)sc->numel, (long long)bi->numel);
  double *s = op_scratch(c, (size_t)(ch ? ch : 1) * 2 * sizeof(double));
  if (!s) return nn_status(c);
  double *b = s + ch;
  for (int64_t k = 0; k < ch; k++) {
    int64_t src = want == ch ? k : k / (ch / groups);
    s[k] = nn_get_f64(sc, src);
    b[k] = nn_get_f64(bi, src);
  }
  return group_norm_core(c, x, s, b, x->dims[0], ch, groups, sp,
                         ir_attr_float(c->node, "epsilon", 1e-5f));
}

/* ------------------------------------------------------------- LpNormalization */

static tolk_status run_lpnorm(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  if (need_float(c, x, "input")) return nn_status(c);
  int rank = x->rank, axis;
  int64_t a_attr = ir_attr_int(c->node, "axis", -1);
  int64_t p = ir_attr_int(c->node, "p", 2);
  if (!nn_axis(a_attr, rank, &axis))
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                   (long long)a_attr, rank);
  if (p != 1 && p != 2)
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "p must be 1 or 2, got %lld", (long long)p);
  struct tensor *y = op_output(c, 0, x->dtype, rank, x->dims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  const double *xd = nn_in_f64(c, x);
  double *yd = xd ? nn_out_f64(c, y) : NULL;
  if (!yd) return nn_status(c);
  int64_t o = 1, a = x->dims[axis], in = 1;
  for (int d = 0; d < rank; d++) {
    if (d < axis) o *= x->dims[d];
    if (d > axis) in *= x->dims[d];
  }
  for (int64_t oo = 0; oo < o; oo++)
    for (int64_t ii = 0; ii < in; ii++) {
      const double *px = xd + oo * a * in + ii;
      double *py = yd + oo * a * in + ii;
      double s = 0;
      for (int64_t r = 0; r < a; r++) s += p == 1 ? fabs(px[r * in]) : px[r * in] * px[r * in];
      double norm = p == 1 ? s : sqrt(s);
      /* As the spec's reference: a zero vector gives 0/0 = NaN. */
      for (int64_t r = 0; r < a; r++) py[r * in] = px[r * in] / norm;
    }
  nn_out_f64_finish(y, yd);
  return TOLK_OK;
}

/* ------------------------------------------------------------- MeanVarianceNormalization */

static tolk_status run_mvn(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  if (need_float(c, x, "X")) return nn_status(c);
  int rank = x->rank;
  int64_t raw[IR_MAX_RANK] = {0, 2, 3};
  int n = nn_attr_ints(c->node, "axes", raw, IR_MAX_RANK, c->err);
  if (n == -2) return nn_status(c);
  if (n < 0) n = 3;
  bool red[IR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int ax;
    if (!nn_axis(raw[i], rank, &ax))
      return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                     (long long)raw[i], rank);
    red[ax] = true;
  }
  struct tensor *y = op_output(c, 0, x->dtype, rank, x->dims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  const double *xd = nn_in_f64(c, x);
  double *yd = xd ? nn_out_f64(c, y) : NULL;
  if (!yd) return nn_status(c);
  /* kept-index stride of each dim (0 for reduced dims). */
  int64_t kst[IR_MAX_RANK], nk = 1, nr = 1;
  for (int d = rank - 1; d >= 0; d--) {
    kst[d] = red[d] ? 0 : nk;
    if (red[d])
      nr *= x->dims[d];
    else
      nk *= x->dims[d];
  }
  double *sum = op_scratch(c, (size_t)nk * 2 * sizeof(double));
  if (!sum) return nn_status(c);
  double *sq = sum + nk;
  for (int64_t k = 0; k < 2 * nk; k++) sum[k] = 0;
  for (int pass = 0; pass < 3; pass++) {
    int64_t idx[IR_MAX_RANK] = {0}, kidx = 0;
    for (int64_t e = 0; e < x->numel; e++) {
      if (pass == 0)
        sum[kidx] += xd[e];
      else if (pass == 1)
        sq[kidx] += (xd[e] - sum[kidx]) * (xd[e] - sum[kidx]);
      else
        yd[e] = (xd[e] - sum[kidx]) / (sqrt(sq[kidx]) + 1e-9);
      for (int d = rank - 1; d >= 0; d--) {
        kidx += kst[d];
        if (++idx[d] < x->dims[d]) break;
        kidx -= kst[d] * idx[d];
        idx[d] = 0;
      }
    }
    if (pass == 0)
      for (int64_t k = 0; k < nk; k++) sum[k] /= (double)nr;
    if (pass == 1)
      for (int64_t k = 0; k < nk; k++) sq[k] /= (double)nr;
  }
  nn_out_f64_finish(y, yd);
  return TOLK_OK;
}

const struct op_def tolk_ops_norm[] = {
    {"", "LayerNormalization", 17, 0, NULL, run_layernorm, NULL},
    {"", "RMSNormalization", 23, 0, NULL, run_rmsnorm, NULL},
    {"", "BatchNormalization", 1, 0, NULL, run_batchnorm, NULL},
    {"", "InstanceNormalization", 1, 0, NULL, run_instancenorm, NULL},
    {"", "GroupNormalization", 18, 0, NULL, run_groupnorm, NULL},
    {"", "LpNormalization", 1, 0, NULL, run_lpnorm, NULL},
    {"", "MeanVarianceNormalization", 1, 0, NULL, run_mvn, NULL},
    {0},
};
