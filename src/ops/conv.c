/*
 * conv.c — Conv and ConvTranspose (1-D, 2-D, 3-D and beyond; groups,
 * dilations, strides, explicit pads and auto_pad; ConvTranspose's
 * output_padding and output_shape).
 *
 * float runs on im2col + kern_sgemm (conv_cpu.c); float16/bfloat16 are staged
 * through fp32; double uses the direct double-accumulating reference, which
 * is exact where the GEMM path would round to float.
 *
 * ConvTranspose padding follows the ONNX spec: with output_shape (or
 * SAME_* without it, where output_shape = input * stride) the total padding
 * s*(in-1) + output_padding + ek - out is split with the odd unit at the end
 * for SAME_UPPER and at the start otherwise; explicit pads are kept when
 * given with output_shape, and a negative total (output larger than the full
 * result) extends the output at the end.
 */
#include <string.h>

#include "nn_cpu.h"
#include "nn_util.h"

struct conv_shapes {
  int64_t n, c, m, group;
  struct nn_window w;
};

static tolk_status check_inputs(struct op_ctx *c, const struct tensor *x,
                                const struct tensor *wt, const struct tensor *b) {
  char b1[96], b2[96];
  if (!x || !wt) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "inputs X and W are required");
  if (!nn_is_float(x->dtype) || wt->dtype != x->dtype || (b && b->dtype != x->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "X, W and B must share one float dtype (X is %s, W %s)",
                   tolk_dtype_name((tolk_dtype)x->dtype),
                   tolk_dtype_name((tolk_dtype)wt->dtype));
  if (x->rank < 3 || wt->rank != x->rank)
    return op_fail(c, TOLK_ERR_SHAPE, "X %s and W %s must have one rank >= 3",
                   shape_str(x, b1, sizeof b1), shape_str(wt, b2, sizeof b2));
  return TOLK_OK;
}

/* kernel_shape, when given, must agree with W's trailing dims. */
static tolk_status check_kernel_shape(struct op_ctx *c, const struct tensor *wt, int nsp) {
  int64_t ks[NN_MAX_SPATIAL];
  int n = nn_attr_ints(c->node, "kernel_shape", ks, NN_MAX_SPATIAL, c->err);
  if (n == -2) return nn_status(c);
  if (n < 0) return TOLK_OK;
  if (n != nsp) return op_fail(c, TOLK_ERR_INVALID_MODEL, "kernel_shape has %d values for %d spatial dims", n, nsp);
  for (int d = 0; d < nsp; d++)
    if (ks[d] != wt->dims[d + 2])
      return op_fail(c, TOLK_ERR_SHAPE, "kernel_shape[%d] = %lld but W has %lld", d,
                     (long long)ks[d], (long long)wt->dims[d + 2]);
  return TOLK_OK;
}

/* Runs a float kernel on fp32 views of the inputs (staging other dtypes). */
typedef void (*conv_f32_fn)(const float *x, const float *wt, const float *bias, float *y,
                            const struct conv_shapes *s, float *scratch,
                            struct tolk_pool *pool);

static void conv_fast(const float *x, const float *wt, const float *bias, float *y,
                      const struct conv_shapes *s, float *scratch, struct tolk_pool *pool) {
  nn_conv_f32(x, wt, bias, y, s->n, s->c, s->m, s->group, &s->w, scratch, pool);
}

static void convt_fast(const float *x, const float *wt, const float *bias, float *y,
                       const struct conv_shapes *s, float *scratch, struct tolk_pool *pool) {
  nn_convt_f32(x, wt, bias, y, s->n, s->c, s->m, s->group, &s->w, scratch, pool);
}

static tolk_status run_common(struct op_ctx *c, bool transposed, const struct conv_shapes *s,
                              int rank, const int64_t *ydims) {
  const struct tensor *x = op_in(c, 0), *wt = op_in(c, 1), *b = op_in(c, 2);
  struct tensor *y = op_output(c, 0, x->dtype, rank, ydims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  if (x->dtype == TOLK_DOUBLE) {
    if (transposed)
      nn_convt_ref_f64(x->data, wt->data, b ? b->data : NULL, y->data, s->n, s->c, s->m,
                       s->group, &s->w);
    else
      nn_conv_ref_f64(x->data, wt->data, b ? b->data : NULL, y->data, s->n, s->c, s->m,
                      s->group, &s->w);
    return TOLK_OK;
  }
  const float *xf = nn_in_f32(c, x), *wf = xf ? nn_in_f32(c, wt) : NULL;
  const float *bf = b && wf ? nn_in_f32(c, b) : NULL;
  float *yf = wf ? nn_out_f32(c, y) : NULL;
  if (!yf || (b && !bf)) return nn_status(c);
  int64_t sc = transposed ? nn_convt_scratch(s->m, s->group, &s->w)
                          : nn_conv_scratch(s->c, s->group, &s->w);
  float *scratch = NULL;
  if (sc > 0 && !(scratch = op_scratch(c, (size_t)sc * sizeof(float)))) return nn_status(c);
  conv_f32_fn fn = transposed ? convt_fast : conv_fast;
  fn(xf, wf, bf, yf, s, scratch, c->pool);
  nn_out_f32_finish(y, yf);
  return TOLK_OK;
}

static tolk_status check_bias(struct op_ctx *c, const struct tensor *b, int64_t m) {
  if (b && b->numel != m)
    return op_fail(c, TOLK_ERR_SHAPE, "B has %lld elements; expected %lld output channels",
                   (long long)b->numel, (long long)m);
  return TOLK_OK;
}

static tolk_status run_conv(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *wt = op_in(c, 1), *b = op_in(c, 2);
  if (check_inputs(c, x, wt, b)) return nn_status(c);
  int nsp = x->rank - 2;
  char b1[96], b2[96];
  struct conv_shapes s = {.n = x->dims[0], .c = x->dims[1], .m = wt->dims[0]};
  s.group = ir_attr_int(c->node, "group", 1);
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0 ||
      wt->dims[1] * s.group != s.c)
    return op_fail(c, TOLK_ERR_SHAPE,
                   "X %s and W %s do not fit group %lld (need C = W[1] * group and M %% "
                   "group = 0)",
                   shape_str(x, b1, sizeof b1), shape_str(wt, b2, sizeof b2),
                   (long long)s.group);
  if (check_kernel_shape(c, wt, nsp) || check_bias(c, b, s.m)) return nn_status(c);
  enum nn_auto_pad ap;
  if (nn_window_attrs(c, nsp, x->dims + 2, wt->dims + 2, true, &s.w, &ap)) return nn_status(c);
  if (!nn_window_out(&s.w, ap, false))
    return op_fail(c, TOLK_ERR_SHAPE, "X %s is too small for kernel %s with these pads, "
                   "strides and dilations",
                   shape_str(x, b1, sizeof b1), shape_str(wt, b2, sizeof b2));
  int64_t ydims[IR_MAX_RANK] = {s.n, s.m};
  for (int d = 0; d < nsp; d++) ydims[d + 2] = s.w.out[d];
  return run_common(c, false, &s, x->rank, ydims);
}

static tolk_status run_convtranspose(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *wt = op_in(c, 1), *b = op_in(c, 2);
  if (check_inputs(c, x, wt, b)) return nn_status(c);
  int nsp = x->rank - 2;
  char b1[96], b2[96];
  struct conv_shapes s = {.n = x->dims[0], .c = x->dims[1]};
  s.group = ir_attr_int(c->node, "group", 1);
  if (s.group < 1 || wt->dims[0] != s.c || s.c % s.group != 0)
    return op_fail(c, TOLK_ERR_SHAPE, "X %s and W %s do not fit group %lld (need W[0] = C)",
                   shape_str(x, b1, sizeof b1), shape_str(wt, b2, sizeof b2),
                   (long long)s.group);
  s.m = wt->dims[1] * s.group;
  if (check_kernel_shape(c, wt, nsp) || check_bias(c, b, s.m)) return nn_status(c);
  enum nn_auto_pad ap;
  /* Parse as a window over X; the geometry is then turned around below. */
  struct nn_window w;
  if (nn_window_attrs(c, nsp, x->dims + 2, wt->dims + 2, true, &w, &ap)) return nn_status(c);
  int64_t opad[NN_MAX_SPATIAL] = {0}, oshape[IR_MAX_RANK];
  int n_op = nn_attr_ints(c->node, "output_padding", opad, NN_MAX_SPATIAL, c->err);
  int n_os = nn_attr_ints(c->node, "output_shape", oshape, IR_MAX_RANK, c->err);
  if (n_op == -2 || n_os == -2) return nn_status(c);
  if (n_op >= 0 && n_op != nsp)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "output_padding has %d values for %d spatial dims",
                   n_op, nsp);
  if (n_os >= 0 && n_os != nsp && n_os != nsp + 2)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "output_shape has %d values for %d spatial dims",
                   n_os, nsp);
  bool have_pads = ir_node_attr(c->node, "pads") != NULL;
  int64_t ydims[IR_MAX_RANK] = {s.n, s.m};
  for (int d = 0; d < nsp; d++) {
    int64_t in = x->dims[d + 2], k = w.k[d], st = w.stride[d], dl = w.dil[d];
    if (opad[d] < 0 || (opad[d] >= st && opad[d] >= dl))
      return op_fail(c, TOLK_ERR_INVALID_MODEL,
                     "output_padding[%d] = %lld must be smaller than the stride or dilation",
                     d, (long long)opad[d]);
    if (in < 1 || st > (INT64_MAX / 8) / in || k > ((int64_t)1 << 40) )
      return op_fail(c, TOLK_ERR_LIMIT, "spatial dim %d: input %lld with stride %lld is out of range",
                     d, (long long)in, (long long)st);
    int64_t full = nn_convt_out(in, k, st, dl, opad[d], 0, 0), out;
    bool same = ap == NN_PAD_SAME_UPPER || ap == NN_PAD_SAME_LOWER;
    if (n_os >= 0 || same) {
      out = n_os >= 0 ? oshape[n_os - nsp + d] : in * st;
      if (same || !have_pads) {
        int64_t total = full - out;
        if (total < 0 && !same) total = 0;
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        w.pad0[d] = ap == NN_PAD_SAME_UPPER ? half : total - half;
        w.pad1[d] = total - w.pad0[d];
      }
    } else {
      if (ap == NN_PAD_VALID) w.pad0[d] = w.pad1[d] = 0;
      out = full - w.pad0[d] - w.pad1[d];
    }
    if (out < 1)
      return op_fail(c, TOLK_ERR_SHAPE, "output extent %lld along spatial dim %d is not positive",
                     (long long)out, d);
    /* The forward conv from Y back to X: in = Y's extent, out = X's. */
    w.in[d] = out;
    w.out[d] = in;
    ydims[d + 2] = out;
  }
  s.w = w;
  return run_common(c, true, &s, x->rank, ydims);
}

const struct op_def tolk_ops_conv[] = {
    {"", "Conv", 1, 0, NULL, run_conv, NULL},
    {"", "ConvTranspose", 1, 0, NULL, run_convtranspose, NULL},
    {0},
};
