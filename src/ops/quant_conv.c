/*
 * quant_conv.c — the integer convolutions ConvInteger and QLinearConv, any
 * number of spatial dimensions, groups, strides, dilations, explicit or
 * automatic padding.
 *
 * Each (image, group) is one int8 GEMM (src/kern/igemm.h): the weights of the
 * group (M/group rows of C/group * kernel-volume) times the im2col matrix of
 * the input (kernel-volume rows, one column per output position). The
 * weight's zero point is per row (per output channel), the input's is the B
 * zero point; padding cells are filled with the input zero point, so they
 * contribute exactly 0, as in the ONNX definition (x - x_zero_point padded
 * with zeros).
 */
#include <string.h>

#include "kern/igemm.h"
#include "quant_util.h"

#define QC_MAX_SP (IR_MAX_RANK - 2)

struct qc_geom {
  int nsp;                      /* spatial dims */
  int64_t n, c, m, group;       /* batch, in channels, out channels */
  int64_t in[QC_MAX_SP], ker[QC_MAX_SP], out[QC_MAX_SP];
  int64_t stride[QC_MAX_SP], dil[QC_MAX_SP], pad0[QC_MAX_SP];
  int64_t in_vol, ker_vol, out_vol;
};

static tolk_status read_ints_attr(struct op_ctx *c, const char *name, int64_t *out, int n,
                                  int64_t dflt) {
  for (int i = 0; i < n; i++) out[i] = dflt;
  const struct ir_attr *a = ir_node_attr(c->node, name);
  if (!a) return TOLK_OK;
  if (a->type != IR_ATTR_INTS || (int64_t)a->n != n)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "attribute %s: expected %d integers", name, n);
  for (int i = 0; i < n; i++) out[i] = a->ints[i];
  return TOLK_OK;
}

static tolk_status qc_geom_init(struct op_ctx *c, const struct tensor *x, const struct tensor *w,
                                struct qc_geom *g) {
  char b1[128], b2[128];
  memset(g, 0, sizeof *g);
  if (x->rank < 3 || w->rank != x->rank)
    return op_fail(c, TOLK_ERR_SHAPE, "conv input %s and weight %s: expected equal ranks >= 3",
                   shape_str(x, b1, sizeof b1), shape_str(w, b2, sizeof b2));
  g->nsp = x->rank - 2;
  g->n = x->dims[0], g->c = x->dims[1], g->m = w->dims[0];
  g->group = ir_attr_int(c->node, "group", 1);
  if (g->group < 1 || g->c % g->group || g->m % g->group || w->dims[1] != g->c / g->group)
    return op_fail(c, TOLK_ERR_SHAPE, "conv input %s, weight %s and group %lld do not agree",
                   shape_str(x, b1, sizeof b1), shape_str(w, b2, sizeof b2),
                   (long long)g->group);
  int64_t ks[QC_MAX_SP], pads[2 * QC_MAX_SP];
  tolk_status st;
  if ((st = read_ints_attr(c, "strides", g->stride, g->nsp, 1)) ||
      (st = read_ints_attr(c, "dilations", g->dil, g->nsp, 1)) ||
      (st = read_ints_attr(c, "pads", pads, 2 * g->nsp, 0)) ||
      (st = read_ints_attr(c, "kernel_shape", ks, g->nsp, -1)))
    return st;
  const char *auto_pad = ir_attr_string(c->node, "auto_pad", "NOTSET");
  g->in_vol = g->ker_vol = g->out_vol = 1;
  for (int d = 0; d < g->nsp; d++) {
    g->in[d] = x->dims[d + 2];
    g->ker[d] = w->dims[d + 2];
    if (ks[d] != -1 && ks[d] != g->ker[d])
      return op_fail(c, TOLK_ERR_SHAPE, "kernel_shape does not match weight %s",
                     shape_str(w, b1, sizeof b1));
    if (g->stride[d] < 1 || g->dil[d] < 1 || pads[d] < 0 || pads[d + g->nsp] < 0)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "bad strides, dilations or pads");
    int64_t span = (g->ker[d] - 1) * g->dil[d] + 1;
    if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
      g->out[d] = (g->in[d] + g->stride[d] - 1) / g->stride[d];
      int64_t total = (g->out[d] - 1) * g->stride[d] + span - g->in[d];
      if (total < 0) total = 0;
      g->pad0[d] = !strcmp(auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
    } else {
      int64_t p0 = 0, p1 = 0;
      if (!strcmp(auto_pad, "NOTSET")) {
        p0 = pads[d], p1 = pads[d + g->nsp];
      } else if (strcmp(auto_pad, "VALID")) {
        return op_fail(c, TOLK_ERR_INVALID_MODEL, "auto_pad %s is not valid", auto_pad);
      }
      int64_t room = g->in[d] + p0 + p1 - span;
      if (room < 0)
        return op_fail(c, TOLK_ERR_SHAPE, "kernel larger than padded input %s",
                       shape_str(x, b1, sizeof b1));
      g->out[d] = room / g->stride[d] + 1;
      g->pad0[d] = p0;
    }
    g->in_vol *= g->in[d];
    g->ker_vol *= g->ker[d];
    g->out_vol *= g->out[d];
  }
  return TOLK_OK;
}

/* col[r][p] for r over (channel, kernel offsets) of one group and p over
 * output positions; cells in the padding get `pad`. */
static void im2col_u8(const struct qc_geom *g, const uint8_t *x, int64_t channels, uint8_t pad,
                      uint8_t *col) {
  int64_t kidx[QC_MAX_SP], oidx[QC_MAX_SP];
  for (int64_t ch = 0; ch < channels; ch++) {
    const uint8_t *xc = x + ch * g->in_vol;
    memset(kidx, 0, sizeof kidx);
    for (int64_t kr = 0; kr < g->ker_vol; kr++) {
      uint8_t *row = col + (ch * g->ker_vol + kr) * g->out_vol;
      memset(oidx, 0, sizeof oidx);
      for (int64_t p = 0; p < g->out_vol; p++) {
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < g->nsp; d++) {
          int64_t pos = oidx[d] * g->stride[d] - g->pad0[d] + kidx[d] * g->dil[d];
          if (pos < 0 || pos >= g->in[d]) {
            inside = false;
            break;
          }
          off = off * g->in[d] + pos;
        }
        row[p] = inside ? xc[off] : pad;
        for (int d = g->nsp - 1; d >= 0; d--) {
          if (++oidx[d] < g->out[d]) break;
          oidx[d] = 0;
        }
      }
      for (int d = g->nsp - 1; d >= 0; d--) {
        if (++kidx[d] < g->ker[d]) break;
        kidx[d] = 0;
      }
    }
  }
}

/* acc (n × m × out_vol int32) = conv(x - x_zp, w - w_zp). */
static tolk_status qconv_compute(struct op_ctx *c, const struct tensor *x,
                                 const struct tensor *x_zp, const struct tensor *w,
                                 const struct tensor *w_zp, const struct qc_geom *g,
                                 int32_t *acc) {
  tolk_status st;
  if ((st = quant_need_8bit(c, x, "input x")) || (st = quant_need_8bit(c, w, "input w")))
    return st;
  char b1[128];
  if (x_zp && (x_zp->dtype != x->dtype || x_zp->numel != 1))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "x_zero_point %s %s: expected one %s value",
                   tolk_dtype_name((tolk_dtype)x_zp->dtype), shape_str(x_zp, b1, sizeof b1),
                   tolk_dtype_name((tolk_dtype)x->dtype));
  if (w_zp && (w_zp->dtype != w->dtype || (w_zp->numel != 1 && w_zp->numel != g->m)))
    return op_fail(c, TOLK_ERR_SHAPE, "w_zero_point %s %s: expected one value or %lld",
                   tolk_dtype_name((tolk_dtype)w_zp->dtype), shape_str(w_zp, b1, sizeof b1),
                   (long long)g->m);
  int64_t mg = g->m / g->group, cg = g->c / g->group, kk = cg * g->ker_vol;
  if (g->n == 0 || g->m == 0 || g->out_vol == 0) return TOLK_OK;
  int32_t xz = x_zp ? quant_get(x_zp->dtype, x_zp->data, 0) : 0;
  int32_t *wz = NULL;
  if (w_zp) {
    wz = op_scratch(c, (size_t)w_zp->numel * sizeof(int32_t));
    if (!wz) return quant_err(c);
    for (int64_t i = 0; i < w_zp->numel; i++) wz[i] = quant_get(w_zp->dtype, w_zp->data, i);
  }
  size_t col_bytes, pack_bytes = kern_igemm_pack_b_size(g->out_vol, kk);
  size_t work_bytes = kern_igemm_work_size(mg, kk);
  if (!tolk_mul_size((size_t)kk, (size_t)g->out_vol, &col_bytes) || !pack_bytes || !work_bytes)
    return op_fail(c, TOLK_ERR_LIMIT, "convolution too large");
  uint8_t *col = op_scratch(c, col_bytes ? col_bytes : 1);
  struct kern_igemm_b pb = {.data = op_scratch(c, pack_bytes)};
  void *work = op_scratch(c, work_bytes);
  if (!col || !pb.data || !work) return quant_err(c);
  for (int64_t img = 0; img < g->n; img++) {
    for (int64_t gr = 0; gr < g->group; gr++) {
      const uint8_t *xg = (const uint8_t *)x->data + (img * g->c + gr * cg) * g->in_vol;
      im2col_u8(g, xg, cg, (uint8_t)xz, col);
      kern_igemm_pack_b(g->out_vol, kk, col, g->out_vol, false, x->dtype == TOLK_INT8, &pb);
      struct kern_igemm p = {
          .m = mg, .n = g->out_vol, .k = kk,
          .a = (const uint8_t *)w->data + gr * mg * kk, .lda = kk,
          .a_signed = w->dtype == TOLK_INT8,
          .a_zp = wz ? wz + (w_zp->numel == 1 ? 0 : gr * mg) : NULL,
          .a_zp_stride = wz && w_zp->numel != 1 ? 1 : 0,
          .b_zp = &xz, .b_zp_stride = 0,
          .c = acc + (img * g->m + gr * mg) * g->out_vol, .ldc = g->out_vol};
      kern_igemm_packed(&p, &pb, work, c->pool);
    }
  }
  return TOLK_OK;
}

static void out_dims(const struct qc_geom *g, int64_t *dims) {
  dims[0] = g->n, dims[1] = g->m;
  for (int d = 0; d < g->nsp; d++) dims[d + 2] = g->out[d];
}

static tolk_status run_conv_integer(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *w = op_in(c, 1);
  if (!x || !w) return op_fail(c, TOLK_ERR_INVALID_MODEL, "inputs x and w are required");
  struct qc_geom g;
  tolk_status st = qc_geom_init(c, x, w, &g);
  if (st) return st;
  int64_t dims[IR_MAX_RANK];
  out_dims(&g, dims);
  struct tensor *y = op_output(c, 0, TOLK_INT32, x->rank, dims);
  if (!y) return quant_err(c);
  return qconv_compute(c, x, op_in(c, 2), w, op_in(c, 3), &g, y->data);
}

static tolk_status run_qlinear_conv(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *xs = op_in(c, 1), *w = op_in(c, 3),
                      *ws = op_in(c, 4), *ys = op_in(c, 6), *yzp = op_in(c, 7),
                      *bias = op_in(c, 8);
  if (!x || !xs || !w || !ws || !ys)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "x, x_scale, w, w_scale and y_scale are required");
  struct qc_geom g;
  tolk_status st = qc_geom_init(c, x, w, &g);
  if (st) return st;
  if (xs->numel != 1 || ys->numel != 1 || (ws->numel != 1 && ws->numel != g.m))
    return op_fail(c, TOLK_ERR_SHAPE, "x_scale and y_scale must be scalars and w_scale a "
                   "scalar or %lld values", (long long)g.m);
  int32_t y_dtype = yzp ? yzp->dtype : x->dtype, lo, hi;
  if (!quant_is_8bit(y_dtype) || !quant_range(y_dtype, &lo, &hi))
    return op_fail(c, TOLK_ERR_TYPE, "output dtype %s, expected uint8 or int8",
                   tolk_dtype_name((tolk_dtype)y_dtype));
  if (yzp && yzp->numel != 1)
    return op_fail(c, TOLK_ERR_SHAPE, "y_zero_point must be a scalar");
  if (bias && (bias->dtype != TOLK_INT32 || bias->numel != g.m))
    return op_fail(c, TOLK_ERR_SHAPE, "bias B: expected %lld int32 values", (long long)g.m);
  const float *xsf = quant_f32(c, xs, false, "x_scale"), *wsf = quant_f32(c, ws, false, "w_scale"),
              *ysf = quant_f32(c, ys, false, "y_scale");
  if (!xsf || !wsf || !ysf) return quant_err(c);
  int64_t dims[IR_MAX_RANK];
  out_dims(&g, dims);
  struct tensor *y = op_output(c, 0, y_dtype, x->rank, dims);
  if (!y) return quant_err(c);
  size_t bytes;
  if (!tolk_mul_size((size_t)y->numel, sizeof(int32_t), &bytes))
    return op_fail(c, TOLK_ERR_LIMIT, "output too large");
  int32_t *acc = op_scratch(c, bytes ? bytes : 4);
  if (!acc) return quant_err(c);
  if ((st = qconv_compute(c, x, op_in(c, 2), w, op_in(c, 5), &g, acc))) return st;
  int32_t zp = yzp ? quant_get(yzp->dtype, yzp->data, 0) : 0;
  float flo = (float)(lo - zp), fhi = (float)(hi - zp);
  for (int64_t img = 0; img < g.n; img++) {
    for (int64_t oc = 0; oc < g.m; oc++) {
      /* ORT's per-channel output scale, in fp32 in this order. */
      float mul = xsf[0] * wsf[ws->numel == 1 ? 0 : oc] / ysf[0];
      int32_t b = bias ? ((const int32_t *)bias->data)[oc] : 0;
      int64_t base = (img * g.m + oc) * g.out_vol;
      for (int64_t p = 0; p < g.out_vol; p++) {
        int32_t v = (int32_t)((uint32_t)acc[base + p] + (uint32_t)b);
        quant_set(y_dtype, y->data, base + p, quant_round_clamp((float)v * mul, flo, fhi) + zp);
      }
    }
  }
  return TOLK_OK;
}

const struct op_def tolk_ops_quant_conv[] = {
    {"", "ConvInteger", 10, 0, NULL, run_conv_integer, NULL},
    {"", "QLinearConv", 10, 0, NULL, run_qlinear_conv, NULL},
    {0},
};
