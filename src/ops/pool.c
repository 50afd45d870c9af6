/*
 * pool.c — MaxPool (with the Indices output, ceil_mode, dilations,
 * storage_order), AveragePool (count_include_pad, ceil_mode, dilations from
 * opset 19), LpPool, the global pools, and MaxUnpool.
 *
 * Kernels are in pool_cpu.c (float, double; integer MaxPool inputs staged to
 * int64; float16/bfloat16 through fp32). The global average and max pools are
 * plain reductions over each plane and reuse the reduce kernels.
 */
#include <string.h>

#include "nn_cpu.h"
#include "nn_util.h"

static bool int_pool_dtype(int32_t dt) {
  return dt == TOLK_INT8 || dt == TOLK_UINT8 || dt == TOLK_INT16 || dt == TOLK_UINT16 ||
         dt == TOLK_INT32 || dt == TOLK_INT64 || dt == TOLK_UINT32;
}

struct pool_job {
  const struct nn_pool_args *a;
  const struct nn_window *w;
  int kind; /* 0 f32, 1 f64, 2 i64 */
  const void *x;
  void *y;
};

static void pool_range(void *arg, int64_t b, int64_t e) {
  const struct pool_job *j = arg;
  if (j->kind == 0)
    nn_pool_f32(j->a, j->w, j->x, j->y, b, e);
  else if (j->kind == 1)
    nn_pool_f64(j->a, j->w, j->x, j->y, b, e);
  else
    nn_pool_i64(j->a, j->w, j->x, j->y, b, e);
}

/* Runs pool `a` over x with geometry w into output 0 (and output 1, the
 * indices, for MAX when requested). */
static tolk_status pool_exec(struct op_ctx *c, struct nn_pool_args *a,
                             const struct nn_window *w) {
  const struct tensor *x = op_in(c, 0);
  int64_t ydims[IR_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int d = 0; d < w->nsp; d++) ydims[d + 2] = w->out[d];
  struct tensor *y = op_output(c, 0, x->dtype, x->rank, ydims);
  if (!y) return nn_status(c);
  struct tensor *idx = NULL;
  if (a->kind == NN_POOL_MAX && c->n_out > 1 && c->node->outputs[1]) {
    idx = op_output(c, 1, TOLK_INT64, x->rank, ydims);
    if (!idx) return nn_status(c);
    a->indices = idx->data;
  }
  if (y->numel == 0) return TOLK_OK;
  int64_t planes = x->dims[0] * x->dims[1];
  struct pool_job job = {.a = a, .w = w};
  void *ybuf = y->data;
  if (x->dtype == TOLK_DOUBLE) {
    job.kind = 1;
    job.x = x->data;
  } else if (nn_is_float(x->dtype)) {
    job.kind = 0;
    job.x = nn_in_f32(c, x);
    ybuf = nn_out_f32(c, y);
  } else {
    job.kind = 2;
    int64_t *xs = op_scratch(c, (size_t)(x->numel ? x->numel : 1) * sizeof(int64_t));
    ybuf = op_scratch(c, (size_t)y->numel * sizeof(int64_t));
    if (xs)
      for (int64_t i = 0; i < x->numel; i++) xs[i] = nn_get_i64(x, i);
    job.x = xs;
  }
  if (!job.x || !ybuf) return nn_status(c);
  job.y = ybuf;
  int64_t work = nn_window_numel(w->out, w->nsp) * nn_window_numel(w->k, w->nsp);
  int64_t grain = work >= 16384 ? 1 : 16384 / (work ? work : 1);
  op_parallel_for(c, planes, grain, pool_range, &job);
  if (job.kind == 0) {
    nn_out_f32_finish(y, ybuf);
  } else if (job.kind == 2) {
    const int64_t *v = ybuf;
    for (int64_t i = 0; i < y->numel; i++) {
      switch (y->dtype) {
      case TOLK_INT8: ((int8_t *)y->data)[i] = (int8_t)v[i]; break;
      case TOLK_UINT8: ((uint8_t *)y->data)[i] = (uint8_t)v[i]; break;
      case TOLK_INT16: ((int16_t *)y->data)[i] = (int16_t)v[i]; break;
      case TOLK_UINT16: ((uint16_t *)y->data)[i] = (uint16_t)v[i]; break;
      case TOLK_INT32: ((int32_t *)y->data)[i] = (int32_t)v[i]; break;
      case TOLK_UINT32: ((uint32_t *)y->data)[i] = (uint32_t)v[i]; break;
      case TOLK_INT64: ((int64_t *)y->data)[i] = v[i]; break;
      default: break;
      }
    }
  }
  return TOLK_OK;
}

/* Validates X and reads the window attributes of a (non-global) pool. */
static tolk_status pool_setup(struct op_ctx *c, bool ints_ok, bool dilations_allowed,
                              struct nn_window *w) {
  const struct tensor *x = op_in(c, 0);
  char b1[96];
  if (!x) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "input X is missing");
  if (!nn_is_float(x->dtype) && !(ints_ok && int_pool_dtype(x->dtype)))
    return op_fail(c, TOLK_ERR_TYPE, "input dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)x->dtype));
  if (x->rank < 3)
    return op_fail(c, TOLK_ERR_SHAPE, "X %s must be N x C x D1 x ...",
                   shape_str(x, b1, sizeof b1));
  int nsp = x->rank - 2;
  int64_t k[NN_MAX_SPATIAL];
  int nk = nn_attr_ints(c->node, "kernel_shape", k, NN_MAX_SPATIAL, c->err);
  if (nk == -2) return nn_status(c);
  if (nk != nsp)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "kernel_shape has %d values; X %s needs %d", nk,
                   shape_str(x, b1, sizeof b1), nsp);
  for (int d = 0; d < nsp; d++)
    if (k[d] < 1 || k[d] > ((int64_t)1 << 40))
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "kernel_shape[%d] = %lld is invalid", d,
                     (long long)k[d]);
  enum nn_auto_pad ap;
  if (nn_window_attrs(c, nsp, x->dims + 2, k, dilations_allowed, w, &ap)) return nn_status(c);
  bool ceil_mode = c->opset >= 10 && ir_attr_int(c->node, "ceil_mode", 0) != 0;
  if (!nn_window_out(w, ap, ceil_mode))
    return op_fail(c, TOLK_ERR_SHAPE,
                   "X %s is too small for the kernel with these pads, strides and dilations",
                   shape_str(x, b1, sizeof b1));
  return TOLK_OK;
}

static tolk_status run_maxpool(struct op_ctx *c) {
  struct nn_window w;
  if (pool_setup(c, c->opset >= 12, c->opset >= 10, &w)) return nn_status(c);
  struct nn_pool_args a = {.kind = NN_POOL_MAX};
  a.storage_order = (int)ir_attr_int(c->node, "storage_order", 0);
  if (a.storage_order != 0 && a.storage_order != 1)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "storage_order must be 0 or 1");
  return pool_exec(c, &a, &w);
}

static tolk_status run_avgpool(struct op_ctx *c) {
  struct nn_window w;
  if (pool_setup(c, false, c->opset >= 19, &w)) return nn_status(c);
  struct nn_pool_args a = {.kind = NN_POOL_AVG};
  a.count_include_pad = c->opset >= 7 && ir_attr_int(c->node, "count_include_pad", 0) != 0;
  return pool_exec(c, &a, &w);
}

/* LpPool's p: a float attribute in opset 1, an int from 2. */
static double lp_p(const struct op_ctx *c) {
  const struct ir_attr *at = ir_node_attr(c->node, "p");
  if (!at) return 2;
  return at->type == IR_ATTR_FLOAT ? (double)at->f : (double)at->i;
}

static tolk_status run_lppool(struct op_ctx *c) {
  struct nn_window w;
  if (pool_setup(c, false, c->opset >= 18, &w)) return nn_status(c);
  struct nn_pool_args a = {.kind = NN_POOL_LP, .p = lp_p(c)};
  if (!(a.p > 0)) return op_fail(c, TOLK_ERR_INVALID_MODEL, "p must be positive");
  return pool_exec(c, &a, &w);
}

/* ------------------------------------------------------------- global pools */

struct gred_job {
  enum nn_reduce op;
  struct nn_rshape s;
  bool f64;
  const void *x;
  void *y;
};

static void gred_range(void *arg, int64_t b, int64_t e) {
  const struct gred_job *j = arg;
  if (j->f64)
    nn_reduce_f64(j->op, &j->s, j->x, j->y, b, e, false);
  else
    nn_reduce_f32(j->op, &j->s, j->x, j->y, b, e, false);
}

static tolk_status global_pool(struct op_ctx *c, enum nn_pool kind) {
  const struct tensor *x = op_in(c, 0);
  char b1[96];
  if (!x) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "input X is missing");
  if (!nn_is_float(x->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "input dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)x->dtype));
  if (x->rank < 2)
    return op_fail(c, TOLK_ERR_SHAPE, "X %s must be N x C x ...", shape_str(x, b1, sizeof b1));
  int64_t ydims[IR_MAX_RANK];
  int64_t sp = 1;
  for (int d = 0; d < x->rank; d++) {
    ydims[d] = d < 2 ? x->dims[d] : 1;
    if (d >= 2) sp *= x->dims[d];
  }
  struct tensor *y = op_output(c, 0, x->dtype, x->rank, ydims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  double p = kind == NN_POOL_LP ? lp_p(c) : 0;
  if (sp == 0 || (kind == NN_POOL_LP && p != 1 && p != 2)) {
    /* Empty planes, or a general p: the window kernel with one window. */
    if (sp == 0 || x->rank < 3)
      return op_fail(c, TOLK_ERR_SHAPE, "X %s has no or empty spatial dims",
                     shape_str(x, b1, sizeof b1));
    struct nn_window w = {.nsp = x->rank - 2};
    for (int d = 0; d < w.nsp; d++) {
      w.in[d] = w.k[d] = x->dims[d + 2];
      w.out[d] = w.stride[d] = w.dil[d] = 1;
    }
    struct nn_pool_args a = {.kind = kind, .p = p};
    return pool_exec(c, &a, &w);
  }
  struct gred_job job = {.f64 = x->dtype == TOLK_DOUBLE};
  job.op = kind == NN_POOL_MAX ? NN_R_MAX
           : kind == NN_POOL_AVG ? NN_R_MEAN
           : p == 1 ? NN_R_L1 : NN_R_L2;
  int64_t dims2[2] = {x->dims[0] * x->dims[1], sp};
  bool red[2] = {false, true};
  nn_rshape_init(&job.s, 2, dims2, red);
  void *ybuf = y->data;
  if (job.f64) {
    job.x = x->data;
  } else {
    job.x = nn_in_f32(c, x);
    ybuf = nn_out_f32(c, y);
  }
  if (!job.x || !ybuf) return nn_status(c);
  job.y = ybuf;
  int64_t grain = sp >= 16384 ? 1 : 16384 / sp;
  op_parallel_for(c, dims2[0], grain, gred_range, &job);
  if (!job.f64) nn_out_f32_finish(y, ybuf);
  return TOLK_OK;
}

static tolk_status run_gavg(struct op_ctx *c) { return global_pool(c, NN_POOL_AVG); }
static tolk_status run_gmax(struct op_ctx *c) { return global_pool(c, NN_POOL_MAX); }
static tolk_status run_glp(struct op_ctx *c) { return global_pool(c, NN_POOL_LP); }

/* ------------------------------------------------------------- MaxUnpool */

static tolk_status run_maxunpool(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *ind = op_in(c, 1), *osh = op_in(c, 2);
  char b1[96], b2[96];
  if (!x || !ind) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "inputs X and I are required");
  if (ind->dtype != TOLK_INT64)
    return op_fail(c, TOLK_ERR_TYPE, "I must be int64");
  if (ind->rank != x->rank || memcmp(ind->dims, x->dims, sizeof(int64_t) * (size_t)x->rank))
    return op_fail(c, TOLK_ERR_SHAPE, "I %s must have X's shape %s",
                   shape_str(ind, b1, sizeof b1), shape_str(x, b2, sizeof b2));
  if (x->rank < 3)
    return op_fail(c, TOLK_ERR_SHAPE, "X %s must be N x C x D1 x ...",
                   shape_str(x, b1, sizeof b1));
  size_t es = op_dtype_size(x->dtype);
  if (es == 0) return op_fail(c, TOLK_ERR_TYPE, "unsupported dtype");
  int nsp = x->rank - 2;
  int64_t k[NN_MAX_SPATIAL];
  if (nn_attr_ints(c->node, "kernel_shape", k, NN_MAX_SPATIAL, c->err) != nsp)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "kernel_shape must have %d values", nsp);
  struct nn_window w;
  enum nn_auto_pad ap;
  if (nn_window_attrs(c, nsp, x->dims + 2, k, false, &w, &ap)) return nn_status(c);
  /* Indices address the shape the pool's input had (inferred from X and
   * the window); an output_shape places that at the front of a larger or
   * smaller output, as the ONNX reference does. */
  int64_t idims[IR_MAX_RANK] = {x->dims[0], x->dims[1]}, ydims[IR_MAX_RANK];
  for (int d = 0; d < nsp; d++)
    idims[d + 2] = (x->dims[d + 2] - 1) * w.stride[d] + k[d] - w.pad0[d] - w.pad1[d];
  memcpy(ydims, idims, sizeof ydims);
  if (osh) {
    if (osh->numel != x->rank)
      return op_fail(c, TOLK_ERR_SHAPE, "output_shape has %lld values for rank %d",
                     (long long)osh->numel, x->rank);
    for (int d = 0; d < x->rank; d++) ydims[d] = nn_get_i64(osh, d);
  }
  int64_t inumel = 1;
  for (int d = 0; d < x->rank; d++) {
    if (idims[d] < 0) return op_fail(c, TOLK_ERR_SHAPE, "the unpooled shape is negative");
    inumel *= idims[d];
  }
  struct tensor *y = op_output(c, 0, x->dtype, x->rank, ydims);
  if (!y) return nn_status(c);
  if (y->nbytes) memset(y->data, 0, y->nbytes);
  const int64_t *iv = ind->data;
  for (int64_t i = 0; i < x->numel; i++) {
    if (iv[i] < 0 || iv[i] >= inumel)
      return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "index %lld is outside the unpooled "
                     "tensor of %lld elements", (long long)iv[i], (long long)inumel);
    int64_t rem = iv[i], off = 0, st = 1;
    bool inside = true;
    for (int d = x->rank - 1; d >= 0; d--) {
      int64_t q = rem % idims[d];
      rem /= idims[d];
      if (q >= ydims[d]) inside = false;
      off += q * st;
      st *= ydims[d];
    }
    if (inside)
      memcpy((char *)y->data + (size_t)off * es, (const char *)x->data + (size_t)i * es, es);
  }
  return TOLK_OK;
}

const struct op_def tolk_ops_pool[] = {
    {"", "MaxPool", 1, 0, NULL, run_maxpool, NULL},
    {"", "AveragePool", 1, 0, NULL, run_avgpool, NULL},
    {"", "LpPool", 1, 0, NULL, run_lppool, NULL},
    {"", "GlobalAveragePool", 1, 0, NULL, run_gavg, NULL},
    {"", "GlobalMaxPool", 1, 0, NULL, run_gmax, NULL},
    {"", "GlobalLpPool", 1, 0, NULL, run_glp, NULL},
    {"", "MaxUnpool", 9, 0, NULL, run_maxunpool, NULL},
    {0},
};
