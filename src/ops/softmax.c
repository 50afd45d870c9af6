/*
 * softmax.c — Softmax, LogSoftmax and Hardmax.
 *
 * Before opset 13 the input is coerced to 2-D at `axis` (default 1) and each
 * row of prod(dims[axis:]) is normalised; from 13 only the one axis `axis`
 * (default -1) is. Both are the middle axis of an [o, a, i] view, with i = 1
 * — contiguous rows, the fast path — for the old semantics and for the last
 * axis. float16/bfloat16 are computed in fp32; kernels in softmax_cpu.c.
 */
#include "nn_cpu.h"
#include "nn_util.h"

struct sm_job {
  enum nn_softmax op;
  bool f64;
  const void *x;
  void *y;
  int64_t a, i;
};

static void sm_range(void *arg, int64_t b, int64_t e) {
  const struct sm_job *j = arg;
  if (j->f64)
    nn_softmax_f64(j->op, j->x, j->y, j->a, j->i, b, e);
  else
    nn_softmax_f32(j->op, j->x, j->y, j->a, j->i, b, e);
}

static tolk_status softmax_run(struct op_ctx *c, enum nn_softmax op) {
  const struct tensor *x = op_in(c, 0);
  if (!x) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "input is missing");
  if (!nn_is_float(x->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "input dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)x->dtype));
  bool old = c->opset < 13;
  int rank = x->rank, axis;
  int64_t a_attr = ir_attr_int(c->node, "axis", old ? 1 : -1);
  /* The 2-D coercion allows axis == rank (rows of one element). */
  if (old && a_attr == rank) {
    axis = rank;
  } else if (!nn_axis(a_attr, rank, &axis)) {
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                   (long long)a_attr, rank);
  }
  struct sm_job job = {.op = op, .f64 = x->dtype == TOLK_DOUBLE, .a = 1, .i = 1};
  int64_t o = 1;
  for (int d = 0; d < rank; d++) {
    if (d < axis)
      o *= x->dims[d];
    else if (old || d == axis)
      job.a *= x->dims[d];
    else
      job.i *= x->dims[d];
  }
  struct tensor *y = op_output(c, 0, x->dtype, rank, x->dims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  float *ybuf = NULL;
  if (job.f64) {
    job.x = x->data;
    job.y = y->data;
  } else {
    job.x = nn_in_f32(c, x);
    job.y = ybuf = nn_out_f32(c, y);
    if (!job.x || !ybuf) return nn_status(c);
  }
  int64_t per = job.a * job.i;
  int64_t grain = per >= 8192 ? 1 : 8192 / per;
  op_parallel_for(c, o, grain, sm_range, &job);
  if (ybuf) nn_out_f32_finish(y, ybuf);
  return TOLK_OK;
}

static tolk_status run_softmax(struct op_ctx *c) { return softmax_run(c, NN_SOFTMAX); }
static tolk_status run_logsoftmax(struct op_ctx *c) { return softmax_run(c, NN_LOGSOFTMAX); }
static tolk_status run_hardmax(struct op_ctx *c) { return softmax_run(c, NN_HARDMAX); }

const struct op_def tolk_ops_softmax[] = {
    {"", "Softmax", 1, 0, NULL, run_softmax, NULL},
    {"", "LogSoftmax", 1, 0, NULL, run_logsoftmax, NULL},
    {"", "Hardmax", 1, 0, NULL, run_hardmax, NULL},
    {0},
};
