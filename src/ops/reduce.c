/*
 * reduce.c — the reduction family: ReduceSum, ReduceMean, ReduceMax,
 * ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
 * ReduceSumSquare, ArgMax and ArgMin.
 *
 * Version changes handled here: the axes become an optional input at opset
 * 13 for ReduceSum and at 18 for the others (an attribute before), along with
 * noop_with_empty_axes; ArgMax/ArgMin gain select_last_index at 12. Later
 * versions (20: bool for ReduceMax/Min) only widen the dtypes, so the defs
 * are open-ended.
 *
 * Data flows as float (double accumulators), double, or int64: every integer
 * and bool input is staged to int64 (uint64 with its sign bit flipped for
 * MAX/MIN so that signed order is unsigned order) and narrowed back, and
 * float16/bfloat16 go through fp32. The kernels are in reduce_cpu.c.
 */
#include <math.h>
#include <string.h>

#include "nn_cpu.h"
#include "nn_util.h"

/* ------------------------------------------------------------- int staging */

static bool is_int_dtype(int32_t dt) {
  switch (dt) {
  case TOLK_INT8:
  case TOLK_INT16:
  case TOLK_INT32:
  case TOLK_INT64:
  case TOLK_UINT8:
  case TOLK_UINT16:
  case TOLK_UINT32:
  case TOLK_UINT64:
  case TOLK_BOOL: return true;
  default: return false;
  }
}

/* Copies t's integers into int64 scratch. `flip` xors uint64 values with the
 * sign bit so that signed comparison orders them as unsigned. */
static int64_t *stage_i64(struct op_ctx *c, const struct tensor *t, bool flip) {
  size_t bytes;
  if (!tolk_mul_size((size_t)t->numel, sizeof(int64_t), &bytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "input of %lld elements is too large", (long long)t->numel);
    return NULL;
  }
  int64_t *buf = op_scratch(c, bytes ? bytes : sizeof(int64_t));
  if (!buf) return NULL;
  for (int64_t i = 0; i < t->numel; i++) buf[i] = nn_get_i64(t, i);
  if (flip && t->dtype == TOLK_UINT64)
    for (int64_t i = 0; i < t->numel; i++) buf[i] = (int64_t)((uint64_t)buf[i] ^ (1ull << 63));
  return buf;
}

/* Narrows int64 results into out (wrapping, as a C cast does). */
static void store_i64(struct tensor *out, const int64_t *v, bool flip) {
  void *d = out->data;
  for (int64_t i = 0; i < out->numel; i++) {
    uint64_t u = (uint64_t)v[i];
    if (flip && out->dtype == TOLK_UINT64) u ^= 1ull << 63;
    switch (out->dtype) {
    case TOLK_INT8: ((int8_t *)d)[i] = (int8_t)u; break;
    case TOLK_INT16: ((int16_t *)d)[i] = (int16_t)u; break;
    case TOLK_INT32: ((int32_t *)d)[i] = (int32_t)u; break;
    case TOLK_INT64: ((int64_t *)d)[i] = (int64_t)u; break;
    case TOLK_UINT8: ((uint8_t *)d)[i] = (uint8_t)u; break;
    case TOLK_UINT16: ((uint16_t *)d)[i] = (uint16_t)u; break;
    case TOLK_UINT32: ((uint32_t *)d)[i] = (uint32_t)u; break;
    case TOLK_UINT64: ((uint64_t *)d)[i] = u; break;
    case TOLK_BOOL: ((uint8_t *)d)[i] = u != 0; break;
    default: break;
    }
  }
}

/* ------------------------------------------------------------- reductions */

struct red_job {
  enum nn_reduce op;
  const struct nn_rshape *s;
  int kind; /* 0 f32, 1 f64, 2 i64 */
  const void *x;
  void *y;
};

static void red_range(void *arg, int64_t b, int64_t e) {
  const struct red_job *j = arg;
  if (j->kind == 0)
    nn_reduce_f32(j->op, j->s, j->x, j->y, b, e, false);
  else if (j->kind == 1)
    nn_reduce_f64(j->op, j->s, j->x, j->y, b, e, false);
  else
    nn_reduce_i64(j->op, j->s, j->x, j->y, b, e, false);
}

/* The value of a reduction over no elements. */
static double empty_value(enum nn_reduce op) {
  switch (op) {
  case NN_R_PROD: return 1;
  case NN_R_MAX:
  case NN_R_LOGSUM:
  case NN_R_LOGSUMEXP: return -INFINITY;
  case NN_R_MIN: return INFINITY;
  case NN_R_MEAN: return NAN;
  default: return 0;
  }
}

static void fill_empty(struct tensor *out, enum nn_reduce op) {
  double v = empty_value(op);
  for (int64_t i = 0; i < out->numel; i++) {
    switch (out->dtype) {
    case TOLK_FLOAT: ((float *)out->data)[i] = (float)v; break;
    case TOLK_DOUBLE: ((double *)out->data)[i] = v; break;
    case TOLK_FLOAT16: ((uint16_t *)out->data)[i] = nn_f2h((float)v); break;
    case TOLK_BFLOAT16: ((uint16_t *)out->data)[i] = nn_f2bf((float)v); break;
    default: {
      /* Integers: the dtype's own extremes for MAX/MIN, else 0 or 1. */
      int64_t iv = op == NN_R_PROD ? 1 : 0;
      if (op == NN_R_MAX || op == NN_R_MIN) {
        bool mx = op == NN_R_MAX;
        switch (out->dtype) {
        case TOLK_INT8: iv = mx ? INT8_MIN : INT8_MAX; break;
        case TOLK_INT16: iv = mx ? INT16_MIN : INT16_MAX; break;
        case TOLK_INT32: iv = mx ? INT32_MIN : INT32_MAX; break;
        case TOLK_INT64: iv = mx ? INT64_MIN : INT64_MAX; break;
        case TOLK_UINT8: iv = mx ? 0 : UINT8_MAX; break;
        case TOLK_UINT16: iv = mx ? 0 : UINT16_MAX; break;
        case TOLK_UINT32: iv = mx ? 0 : (int64_t)UINT32_MAX; break;
        case TOLK_UINT64: iv = mx ? 0 : -1; break;
        case TOLK_BOOL: iv = mx ? 0 : 1; break;
        default: break;
        }
      }
      struct tensor one_el = *out;
      one_el.numel = 1;
      one_el.data = (char *)out->data + (size_t)i * op_dtype_size(out->dtype);
      store_i64(&one_el, &iv, false);
    }
    }
  }
}

static tolk_status reduce_run(struct op_ctx *c, enum nn_reduce op, int axes_input_since) {
  const struct tensor *x = op_in(c, 0);
  if (!x) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "input 'data' is missing");
  int rank = x->rank;
  int axes[IR_MAX_RANK];
  int n_axes;
  bool noop = false;
  if (c->opset >= axes_input_since) {
    n_axes = nn_axes_from_tensor(c, op_in(c, 1), rank, axes);
    if (n_axes < 0) return nn_status(c);
    noop = ir_attr_int(c->node, "noop_with_empty_axes", 0) != 0;
  } else {
    int64_t raw[IR_MAX_RANK];
    int n = nn_attr_ints(c->node, "axes", raw, IR_MAX_RANK, c->err);
    if (n == -2) return nn_status(c);
    n_axes = n < 0 ? 0 : n;
    for (int i = 0; i < n_axes; i++) {
      if (!nn_axis(raw[i], rank, &axes[i]))
        return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                       (long long)raw[i], rank);
      for (int j = 0; j < i; j++)
        if (axes[j] == axes[i])
          return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is repeated",
                         (long long)raw[i]);
    }
  }
  bool keep = ir_attr_int(c->node, "keepdims", 1) != 0;
  int32_t dt = x->dtype;
  if (!nn_is_float(dt) && !is_int_dtype(dt))
    return op_fail(c, TOLK_ERR_TYPE, "input dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)dt));

  if (n_axes == 0 && noop) {
    struct tensor *y = op_output(c, 0, dt, rank, x->dims);
    if (!y) return nn_status(c);
    if (x->nbytes) memcpy(y->data, x->data, x->nbytes);
    return TOLK_OK;
  }

  bool red[IR_MAX_RANK] = {false};
  if (n_axes == 0)
    for (int d = 0; d < rank; d++) red[d] = true;
  for (int i = 0; i < n_axes; i++) red[axes[i]] = true;
  int64_t odims[IR_MAX_RANK];
  int orank = 0;
  for (int d = 0; d < rank; d++) {
    if (!red[d])
      odims[orank++] = x->dims[d];
    else if (keep)
      odims[orank++] = 1;
  }
  struct tensor *y = op_output(c, 0, dt, orank, odims);
  if (!y) return nn_status(c);
  struct nn_rshape s;
  nn_rshape_init(&s, rank, x->dims, red);
  if (y->numel == 0) return TOLK_OK;
  if (s.n_red == 0) {
    fill_empty(y, op);
    return TOLK_OK;
  }

  struct red_job job = {.op = op, .s = &s};
  bool flip = false;
  void *ybuf = y->data;
  if (dt == TOLK_FLOAT || dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16) {
    job.kind = 0;
    job.x = nn_in_f32(c, x);
    ybuf = nn_out_f32(c, y);
  } else if (dt == TOLK_DOUBLE) {
    job.kind = 1;
    job.x = x->data;
  } else {
    job.kind = 2;
    flip = (op == NN_R_MAX || op == NN_R_MIN) && dt == TOLK_UINT64;
    if (dt == TOLK_INT64) {
      job.x = x->data;
    } else {
      job.x = stage_i64(c, x, flip);
      ybuf = op_scratch(c, (size_t)y->numel * sizeof(int64_t));
    }
  }
  if (!job.x || !ybuf) return nn_status(c);
  job.y = ybuf;
  int64_t grain = s.n_red >= 16384 ? 1 : 16384 / s.n_red;
  op_parallel_for(c, s.n_out, grain, red_range, &job);
  if (job.kind == 0)
    nn_out_f32_finish(y, ybuf);
  else if (job.kind == 2 && ybuf != y->data)
    store_i64(y, ybuf, flip);
  return TOLK_OK;
}

static tolk_status run_sum(struct op_ctx *c) { return reduce_run(c, NN_R_SUM, 13); }
static tolk_status run_mean(struct op_ctx *c) { return reduce_run(c, NN_R_MEAN, 18); }
static tolk_status run_max(struct op_ctx *c) { return reduce_run(c, NN_R_MAX, 18); }
static tolk_status run_min(struct op_ctx *c) { return reduce_run(c, NN_R_MIN, 18); }
static tolk_status run_prod(struct op_ctx *c) { return reduce_run(c, NN_R_PROD, 18); }
static tolk_status run_l1(struct op_ctx *c) { return reduce_run(c, NN_R_L1, 18); }
static tolk_status run_l2(struct op_ctx *c) { return reduce_run(c, NN_R_L2, 18); }
static tolk_status run_logsum(struct op_ctx *c) { return reduce_run(c, NN_R_LOGSUM, 18); }
static tolk_status run_lse(struct op_ctx *c) { return reduce_run(c, NN_R_LOGSUMEXP, 18); }
static tolk_status run_sumsq(struct op_ctx *c) { return reduce_run(c, NN_R_SUMSQ, 18); }

/* ------------------------------------------------------------- arg max/min */

struct arg_job {
  bool is_max, last;
  int kind;
  const void *x;
  int64_t o, a, i;
  int64_t *y;
};

static void arg_range(void *arg, int64_t b, int64_t e) {
  const struct arg_job *j = arg;
  if (j->kind == 0)
    nn_argext_f32(j->is_max, j->last, j->x, j->o, j->a, j->i, j->y, b, e);
  else if (j->kind == 1)
    nn_argext_f64(j->is_max, j->last, j->x, j->o, j->a, j->i, j->y, b, e);
  else
    nn_argext_i64(j->is_max, j->last, j->x, j->o, j->a, j->i, j->y, b, e);
}

static tolk_status argext_run(struct op_ctx *c, bool is_max) {
  const struct tensor *x = op_in(c, 0);
  if (!x) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "input 'data' is missing");
  int rank = x->rank, axis;
  int64_t a_attr = ir_attr_int(c->node, "axis", 0);
  if (!nn_axis(a_attr, rank ? rank : 1, &axis) || rank == 0)
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                   (long long)a_attr, rank);
  bool keep = ir_attr_int(c->node, "keepdims", 1) != 0;
  bool last = c->opset >= 12 && ir_attr_int(c->node, "select_last_index", 0) != 0;
  int32_t dt = x->dtype;
  if (!nn_is_float(dt) && !is_int_dtype(dt))
    return op_fail(c, TOLK_ERR_TYPE, "input dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)dt));
  if (x->dims[axis] == 0 && x->numel == 0) {
    /* numpy refuses an arg-extremum of an empty axis; so do we, unless the
     * output is empty anyway. */
    int64_t rest = 1;
    for (int d = 0; d < rank; d++)
      if (d != axis) rest *= x->dims[d];
    if (rest != 0)
      return op_fail(c, TOLK_ERR_SHAPE, "axis %d of the input has size 0", axis);
  }
  int64_t odims[IR_MAX_RANK];
  int orank = 0;
  struct arg_job job = {.is_max = is_max, .last = last, .o = 1, .a = x->dims[axis], .i = 1};
  for (int d = 0; d < rank; d++) {
    if (d < axis) job.o *= x->dims[d];
    if (d > axis) job.i *= x->dims[d];
    if (d != axis)
      odims[orank++] = x->dims[d];
    else if (keep)
      odims[orank++] = 1;
  }
  struct tensor *y = op_output(c, 0, TOLK_INT64, orank, odims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  job.y = y->data;
  if (dt == TOLK_FLOAT || dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16) {
    job.kind = 0;
    job.x = nn_in_f32(c, x);
  } else if (dt == TOLK_DOUBLE) {
    job.kind = 1;
    job.x = x->data;
  } else {
    job.kind = 2;
    job.x = dt == TOLK_INT64 ? x->data : stage_i64(c, x, true);
  }
  if (!job.x) return nn_status(c);
  int64_t grain = job.a >= 16384 ? 1 : 16384 / job.a;
  op_parallel_for(c, y->numel, grain, arg_range, &job);
  return TOLK_OK;
}

static tolk_status run_argmax(struct op_ctx *c) { return argext_run(c, true); }
static tolk_status run_argmin(struct op_ctx *c) { return argext_run(c, false); }

/* Defs are open-ended: versions after 18 changed only the dtype lists. */
const struct op_def tolk_ops_reduce[] = {
    {"", "ReduceSum", 1, 0, NULL, run_sum, NULL},
    {"", "ReduceMean", 1, 0, NULL, run_mean, NULL},
    {"", "ReduceMax", 1, 0, NULL, run_max, NULL},
    {"", "ReduceMin", 1, 0, NULL, run_min, NULL},
    {"", "ReduceProd", 1, 0, NULL, run_prod, NULL},
    {"", "ReduceL1", 1, 0, NULL, run_l1, NULL},
    {"", "ReduceL2", 1, 0, NULL, run_l2, NULL},
    {"", "ReduceLogSum", 1, 0, NULL, run_logsum, NULL},
    {"", "ReduceLogSumExp", 1, 0, NULL, run_lse, NULL},
    {"", "ReduceSumSquare", 1, 0, NULL, run_sumsq, NULL},
    {"", "ArgMax", 1, 0, NULL, run_argmax, NULL},
    {"", "ArgMin", 1, 0, NULL, run_argmin, NULL},
    {0},
};
