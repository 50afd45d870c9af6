/*
 * resize.c — Resize (opsets 10-19+) and the older Upsample (7-9): nearest,
 * linear and cubic interpolation over any axes, every coordinate
 * transformation mode, antialiasing, exclude_outside, tf_crop_and_resize
 * with extrapolation, and keep_aspect_ratio_policy.
 *
 * Semantics follow the ONNX reference implementation, which produced the
 * backend test data: for each axis an output position x maps to a source
 * coordinate x_ori; the taps are the n integers nearest x_ori (ties to the
 * smaller), edge-clamped, weighted by the mode's coefficients. Interpolation
 * is separable, so each axis is applied as its own pass:
 *   - nearest: one tap per position, so the whole op is an index gather of
 *     elements, done on the element size (every dtype, bit-exact);
 *   - linear/cubic: passes in double over a scratch buffer, then one
 *     conversion to the output dtype (integers round half to even and
 *     saturate, as the reference's saturate_cast does).
 */
#include <math.h>
#include <string.h>

#include "dm.h"

enum ctm { CTM_HALF_PIXEL, CTM_HALF_PIXEL_SYM, CTM_PYTORCH, CTM_ALIGN, CTM_ASYM, CTM_TF_NN, CTM_TF_CROP };
enum rmode { RM_NEAREST, RM_LINEAR, RM_CUBIC };
enum nmode { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL };
enum aspect { AR_STRETCH, AR_NOT_LARGER, AR_NOT_SMALLER };

struct resize_attrs {
  enum rmode mode;
  enum ctm ctm;
  enum nmode nearest;
  enum aspect aspect;
  double cubic_a, extrapolation;
  bool exclude_outside, antialias;
  int64_t axes[IR_MAX_RANK], n_axes; /* -1: all */
  bool upsample;                     /* Upsample or Resize-10 */
};

static tolk_status pick(const char *what, const char *s, const char *const *names, int n, int *out,
                        tolk_error *err) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = i;
      return TOLK_OK;
    }
  return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "unknown %s '%s'", what, s);
}

static tolk_status resize_attrs(const struct ir_node *node, int64_t opset, bool upsample,
                                struct resize_attrs *a, tolk_error *err) {
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const ctms[] = {"half_pixel",  "half_pixel_symmetric", "pytorch_half_pixel",
                                     "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                                     "tf_crop_and_resize"};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  static const char *const ars[] = {"stretch", "not_larger", "not_smaller"};
  int v = 0;
  tolk_status st;
  memset(a, 0, sizeof *a);
  a->upsample = upsample || opset < 11;
  if ((st = pick("mode", ir_attr_string(node, "mode", "nearest"), modes, 3, &v, err))) return st;
  a->mode = (enum rmode)v;
  if (a->upsample) {
    /* Upsample and Resize-10 map x to x / scale and take the floor */
    if (a->mode == RM_CUBIC)
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "cubic mode needs Resize-11 or later");
    a->ctm = CTM_ASYM;
    a->nearest = NM_FLOOR;
    a->n_axes = -1;
    return TOLK_OK;
  }
  if ((st = pick("coordinate_transformation_mode",
                 ir_attr_string(node, "coordinate_transformation_mode", "half_pixel"), ctms, 7,
                 &v, err)))
    return st;
  a->ctm = (enum ctm)v;
  if ((a->ctm == CTM_HALF_PIXEL_SYM && opset < 19) || (a->ctm == CTM_TF_NN && opset >= 13))
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "coordinate_transformation_mode is not defined at opset %lld", (long long)opset);
  if ((st = pick("nearest_mode", ir_attr_string(node, "nearest_mode", "round_prefer_floor"), nms, 4,
                 &v, err)))
    return st;
  a->nearest = (enum nmode)v;
  a->cubic_a = ir_attr_float(node, "cubic_coeff_a", -0.75f);
  a->extrapolation = ir_attr_float(node, "extrapolation_value", 0.0f);
  a->exclude_outside = ir_attr_int(node, "exclude_outside", 0) != 0;
  a->n_axes = -1;
  a->aspect = AR_STRETCH;
  if (opset >= 18) {
    a->antialias = ir_attr_int(node, "antialias", 0) != 0;
    if ((st = pick("keep_aspect_ratio_policy", ir_attr_string(node, "keep_aspect_ratio_policy", "stretch"),
                   ars, 3, &v, err)))
      return st;
    a->aspect = (enum aspect)v;
    if ((st = dm_attr_ints(node, "axes", a->axes, IR_MAX_RANK, &a->n_axes, err))) return st;
  }
  if (a->antialias && a->mode == RM_NEAREST)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "antialias is not defined for nearest mode");
  return TOLK_OK;
}

static tolk_status resize_prepare(const struct ir_node *node, int64_t opset, void **state,
                                  tolk_error *err) {
  struct resize_attrs a;
  *state = NULL;
  return resize_attrs(node, opset, false, &a, err);
}

static tolk_status upsample_prepare(const struct ir_node *node, int64_t opset, void **state,
                                    tolk_error *err) {
  struct resize_attrs a;
  *state = NULL;
  return resize_attrs(node, opset, true, &a, err);
}

/* --------------------------------------------------------------- one axis */

/* The taps of one axis: for output position j, n (index, weight) pairs. */
struct axis_taps {
  int64_t in, out;
  int n;
  int64_t *idx;   /* out * n */
  double *w;      /* out * n */
  uint8_t *extra; /* out: 1 where tf_crop_and_resize extrapolates */
  bool identity;
};

static double source_coord(const struct resize_attrs *a, double x, double scale, int64_t in,
                           int64_t out, double out_w, double rs, double re, bool *extra) {
  *extra = false;
  switch (a->ctm) {
  case CTM_HALF_PIXEL: return (x + 0.5) / scale - 0.5;
  case CTM_HALF_PIXEL_SYM: {
    double adjust = (double)out / out_w, center = (double)in / 2;
    return center * (1 - adjust) + (x + 0.5) / scale - 0.5;
  }
  case CTM_PYTORCH: return out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  case CTM_ALIGN: return out_w == 1 ? 0 : x * (double)(in - 1) / (out_w - 1);
  case CTM_ASYM: return x / scale;
  case CTM_TF_NN: return (x + 0.5) / scale;
  case CTM_TF_CROP: {
    double v = out_w == 1 ? (re - rs) * (double)(in - 1) / 2
                          : x * (re - rs) * (double)(in - 1) / (out_w - 1);
    v += rs * (double)(in - 1);
    *extra = v < 0 || v > (double)(in - 1);
    return v;
  }
  }
  return x;
}

static double cubic_kernel(double x, double A) {
  x = fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}

/* Number of taps per position for this mode and scale. */
static int tap_count(const struct resize_attrs *a, double scale) {
  if (a->mode == RM_NEAREST) return 2;
  double s = a->antialias && scale < 1 ? scale : 1;
  int64_t start = (int64_t)floor((a->mode == RM_LINEAR ? -1 : -2) / s) + 1;
  return (int)(2 - 2 * start);
}

/* Coefficients for a position whose source coordinate lies `ratio` (in
 * (0, 1]) past tap n/2 - 1. */
static void coefficients(const struct resize_attrs *a, double ratio, double scale, int n,
                         double *c) {
  if (a->mode == RM_NEAREST) {
    bool up;
    if (ratio == 1) up = true;
    else if (a->nearest == NM_ROUND_FLOOR) up = ratio > 0.5;
    else if (a->nearest == NM_ROUND_CEIL) up = ratio >= 0.5;
    else up = a->nearest == NM_CEIL;
    c[0] = up ? 0 : 1;
    c[1] = up ? 1 : 0;
    return;
  }
  double s = a->antialias && scale < 1 ? scale : 1;
  int start = 1 - n / 2;
  double sum = 0;
  for (int t = 0; t < n; t++) {
    double arg = s * ((double)(start + t) - ratio);
    if (a->mode == RM_LINEAR) {
      double v = 1 - fabs(arg);
      c[t] = v < 0 ? 0 : v > 1 ? 1 : v;
    } else {
      c[t] = cubic_kernel(arg, a->cubic_a);
    }
    sum += c[t];
  }
  /* the antialiased kernels are normalised; the plain ones sum to 1 */
  if (a->antialias && sum != 0)
    for (int t = 0; t < n; t++) c[t] /= sum;
}

static tolk_status axis_taps(struct op_ctx *c, const struct resize_attrs *a, struct axis_taps *ax,
                             double scale, double out_w, double rs, double re) {
  int n = tap_count(a, scale);
  if (n < 1 || n > 2 * ax->in + 8)
    return op_fail(c, TOLK_ERR_LIMIT, "resize: %d taps per output for an axis of %lld", n,
                   (long long)ax->in);
  ax->n = n;
  size_t cnt = (size_t)ax->out * (size_t)n;
  ax->idx = op_scratch(c, cnt * sizeof(int64_t) + 1);
  ax->w = op_scratch(c, cnt * sizeof(double) + 1);
  ax->extra = op_scratch(c, (size_t)ax->out + 1);
  if (!ax->idx || !ax->w || !ax->extra) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  ax->identity = ax->in == ax->out && a->ctm != CTM_TF_CROP;
  double coef[64], *cf = n <= 64 ? coef : op_scratch(c, sizeof(double) * (size_t)n);
  if (!cf) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  for (int64_t j = 0; j < ax->out; j++) {
    bool extra;
    double x = source_coord(a, (double)j, scale, ax->in, ax->out, out_w, rs, re, &extra);
    ax->extra[j] = extra;
    /* a coordinate on an integer counts as ratio 1 past the one before it */
    double fl = floor(x);
    double ratio = x == fl ? 1 : x - fl;
    int64_t x0 = (int64_t)(x == fl ? fl - 1 : fl);
    coefficients(a, ratio, scale, n, cf);
    double sum = 0;
    for (int t = 0; t < n; t++) {
      int64_t i = x0 - n / 2 + 1 + t;
      if (a->exclude_outside && (i < 0 || i >= ax->in)) cf[t] = 0;
      sum += cf[t];
      ax->idx[j * n + t] = i < 0 ? 0 : i >= ax->in ? ax->in - 1 : i;
    }
    for (int t = 0; t < n; t++) {
      ax->w[j * n + t] = a->exclude_outside && sum != 0 ? cf[t] / sum : cf[t];
      /* identity unless position j reads exactly element j */
      if (ax->w[j * n + t] != 0 && (ax->idx[j * n + t] != j || ax->w[j * n + t] != 1))
        ax->identity = false;
    }
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------ the passes */

struct nearest_job {
  int rank;
  int64_t out_dims[IR_MAX_RANK], in_st[IR_MAX_RANK];
  const int64_t *map[IR_MAX_RANK]; /* output position -> input index */
  const char *src;
  char *dst;
  size_t es;
};

static void nearest_rows(void *arg, int64_t begin, int64_t end) {
  const struct nearest_job *j = arg;
  int last = j->rank - 1;
  int64_t w = j->out_dims[last];
  size_t es = j->es;
  const int64_t *m = j->map[last];
  for (int64_t row = begin; row < end; row++) {
    int64_t r = row, off = 0;
    for (int k = last - 1; k >= 0; k--) {
      off += j->map[k][r % j->out_dims[k]] * j->in_st[k];
      r /= j->out_dims[k];
    }
    const char *s = j->src + (size_t)off * es;
    char *d = j->dst + (size_t)(row * w) * es;
    for (int64_t i = 0; i < w; i++) memcpy(d + (size_t)i * es, s + (size_t)m[i] * es, es);
  }
}

/* One separable pass along `axis` of a double buffer with dims `dims`. */
static void linear_pass(const double *src, double *dst, const int64_t *dims, int rank, int axis,
                        const struct axis_taps *ax) {
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; k++) outer *= dims[k];
  for (int k = axis + 1; k < rank; k++) inner *= dims[k];
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t jx = 0; jx < ax->out; jx++) {
      double *d = dst + (o * ax->out + jx) * inner;
      for (int64_t i = 0; i < inner; i++) d[i] = 0;
      for (int t = 0; t < ax->n; t++) {
        double w = ax->w[jx * ax->n + t];
        if (w == 0) continue;
        const double *s = src + (o * ax->in + ax->idx[jx * ax->n + t]) * inner;
        for (int64_t i = 0; i < inner; i++) d[i] += w * s[i];
      }
    }
  }
}

static bool is_int_dtype(int32_t dt) {
  return dt != TOLK_FLOAT && dt != TOLK_DOUBLE && dt != TOLK_FLOAT16 && dt != TOLK_BFLOAT16;
}

/* Reads a float-typed 1-D tensor (roi, scales) into doubles. */
static tolk_status read_floats(struct op_ctx *c, const struct tensor *t, const char *what,
                               double *out, int64_t cap, int64_t *n) {
  if (t->dtype != TOLK_FLOAT && t->dtype != TOLK_DOUBLE && t->dtype != TOLK_FLOAT16 &&
      t->dtype != TOLK_BFLOAT16)
    return op_fail(c, TOLK_ERR_TYPE, "%s must be a float tensor", what);
  if (t->rank > 1 || t->numel > cap)
    return op_fail(c, TOLK_ERR_SHAPE, "%s must be 1-D with at most %lld values", what, (long long)cap);
  for (int64_t i = 0; i < t->numel; i++) out[i] = dm_get_f64(t->dtype, t->data, i);
  *n = t->numel;
  return TOLK_OK;
}

static tolk_status resize_common(struct op_ctx *c, bool upsample) {
  const struct tensor *x = op_in(c, 0);
  char sb[96];
  size_t es;
  struct resize_attrs a;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = resize_attrs(c->node, c->opset, upsample, &a, c->err);
  if (st) return st;
  int r = x->rank;
  if (a.mode != RM_NEAREST && !dm_is_numeric(x->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "dtype %s cannot be interpolated", tolk_dtype_name((tolk_dtype)x->dtype));
  /* gather scales / sizes / roi for the axes named (default: all) */
  int axes[IR_MAX_RANK], na = r;
  bool seen[IR_MAX_RANK] = {false};
  if (a.n_axes >= 0) {
    na = (int)a.n_axes;
    for (int k = 0; k < na; k++) {
      if ((st = dm_axis(c, a.axes[k], r, "axes value", &axes[k]))) return st;
      if (seen[axes[k]]) return op_fail(c, TOLK_ERR_INVALID_MODEL, "axis %d is repeated", axes[k]);
      seen[axes[k]] = true;
    }
  } else {
    for (int k = 0; k < r; k++) axes[k] = k;
  }
  double scales[IR_MAX_RANK], roi[2 * IR_MAX_RANK], given[IR_MAX_RANK];
  int64_t sizes[IR_MAX_RANK], n_sc = 0, n_sz = 0, n_roi = 0, outd[IR_MAX_RANK];
  const struct tensor *t_roi = NULL, *t_sc = NULL, *t_sz = NULL;
  if (upsample && c->opset < 9) {
    const struct ir_attr *sa = ir_node_attr(c->node, "scales");
    if (!sa || sa->type != IR_ATTR_FLOATS || (int64_t)sa->n > IR_MAX_RANK)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "attribute 'scales' is required");
    for (size_t i = 0; i < sa->n; i++) given[i] = sa->floats[i];
    n_sc = (int64_t)sa->n;
  } else if (upsample || c->opset < 11) {
    t_sc = op_in(c, 1);
  } else {
    t_roi = op_in(c, 1);
    t_sc = op_in(c, 2);
    t_sz = op_in(c, 3);
  }
  if (t_sc && t_sc->numel > 0 && (st = read_floats(c, t_sc, "scales", given, IR_MAX_RANK, &n_sc)))
    return st;
  if (t_sz && t_sz->numel > 0 && (st = dm_read_ints(c, t_sz, "sizes", sizes, IR_MAX_RANK, &n_sz)))
    return st;
  if (t_roi && t_roi->numel > 0 && (st = read_floats(c, t_roi, "roi", roi, 2 * IR_MAX_RANK, &n_roi)))
    return st;
  if ((n_sc > 0) == (n_sz > 0))
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "exactly one of scales and sizes must be given");
  if ((n_sc > 0 && n_sc != na) || (n_sz > 0 && n_sz != na))
    return op_fail(c, TOLK_ERR_SHAPE, "scales/sizes have %lld values for %d axes of input %s",
                   (long long)(n_sc ? n_sc : n_sz), na, shape_str(x, sb, sizeof sb));
  double rs[IR_MAX_RANK], re[IR_MAX_RANK];
  for (int k = 0; k < r; k++) {
    scales[k] = 1;
    outd[k] = x->dims[k];
    rs[k] = 0;
    re[k] = 1;
  }
  if (a.ctm == CTM_TF_CROP) {
    if (n_roi != 2 * na)
      return op_fail(c, TOLK_ERR_SHAPE, "roi has %lld values; %d expected", (long long)n_roi, 2 * na);
    for (int k = 0; k < na; k++) {
      rs[axes[k]] = roi[k];
      re[axes[k]] = roi[na + k];
    }
  }
  if (n_sc > 0) {
    for (int k = 0; k < na; k++) {
      double s = given[k];
      if (!(s > 0) || s > 1e9)
        return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "scale %g must be positive", s);
      scales[axes[k]] = s;
      double o = floor(s * (double)x->dims[axes[k]]);
      if (a.ctm == CTM_TF_CROP) /* the crop window shrinks the output */
        o = floor(s * (double)x->dims[axes[k]] * (re[axes[k]] - rs[axes[k]]));
      if (!(o >= 0) || o > 0x1p40) return op_fail(c, TOLK_ERR_LIMIT, "output dim %g", o);
      outd[axes[k]] = (int64_t)o;
    }
  } else {
    for (int k = 0; k < na; k++) {
      if (sizes[k] < 0) return op_fail(c, TOLK_ERR_SHAPE, "sizes[%d] is negative", k);
      int64_t in = x->dims[axes[k]];
      if (in == 0 && sizes[k] > 0)
        return op_fail(c, TOLK_ERR_SHAPE, "cannot resize empty axis %d to %lld", axes[k], (long long)sizes[k]);
      outd[axes[k]] = sizes[k];
      scales[axes[k]] = in ? (double)sizes[k] / (double)in : 1;
    }
    if (a.aspect != AR_STRETCH) {
      double s = scales[axes[0]];
      for (int k = 1; k < na; k++) {
        double v = scales[axes[k]];
        s = a.aspect == AR_NOT_LARGER ? (v < s ? v : s) : (v > s ? v : s);
      }
      for (int k = 0; k < na; k++) {
        scales[axes[k]] = s;
        outd[axes[k]] = (int64_t)(s * (double)x->dims[axes[k]] + 0.5);
      }
    }
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, r, outd, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  if (r == 0) {
    memcpy(o->data, x->data, es);
    return TOLK_OK;
  }
  struct axis_taps ax[IR_MAX_RANK];
  for (int k = 0; k < r; k++) {
    memset(&ax[k], 0, sizeof ax[k]);
    ax[k].in = x->dims[k];
    ax[k].out = outd[k];
    /* the reference measures the output as scale * in, not its integer size */
    double out_w = n_sz > 0 && a.aspect == AR_STRETCH ? (double)outd[k] : scales[k] * (double)ax[k].in;
    if ((st = axis_taps(c, &a, &ax[k], scales[k], out_w, rs[k], re[k]))) return st;
  }
  if (a.mode == RM_NEAREST) {
    struct nearest_job j;
    j.rank = r;
    j.es = es;
    j.src = x->data;
    j.dst = o->data;
    memcpy(j.out_dims, outd, sizeof outd);
    dm_dense_strides(r, x->dims, j.in_st);
    for (int k = 0; k < r; k++) {
      /* the one tap with weight: store it in place of the pair */
      int64_t *m = ax[k].idx;
      for (int64_t p = 0; p < ax[k].out; p++) m[p] = ax[k].w[p * 2] != 0 ? m[p * 2] : m[p * 2 + 1];
      j.map[k] = m;
    }
    int64_t rows = o->numel / outd[r - 1];
    if ((size_t)o->numel * es >= ((size_t)1 << 20))
      op_parallel_for(c, rows, (int64_t)(((size_t)64 << 10) / ((size_t)outd[r - 1] * es)) + 1,
                      nearest_rows, &j);
    else
      nearest_rows(&j, 0, rows);
  } else {
    /* separable passes in double, innermost axis first as the reference */
    int64_t dims[IR_MAX_RANK], biggest = x->numel;
    memcpy(dims, x->dims, sizeof dims);
    for (int k = r - 1; k >= 0; k--) {
      if (ax[k].identity) continue;
      dims[k] = outd[k];
      int64_t n = 1;
      for (int q = 0; q < r; q++) n *= dims[q];
      if (n > biggest) biggest = n;
    }
    double *b0 = op_scratch(c, sizeof(double) * (size_t)biggest);
    double *b1 = op_scratch(c, sizeof(double) * (size_t)biggest);
    if (!b0 || !b1) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
    for (int64_t i = 0; i < x->numel; i++) b0[i] = dm_get_f64(x->dtype, x->data, i);
    memcpy(dims, x->dims, sizeof dims);
    for (int k = r - 1; k >= 0; k--) {
      if (ax[k].identity) continue;
      linear_pass(b0, b1, dims, r, k, &ax[k]);
      dims[k] = outd[k];
      double *t = b0;
      b0 = b1;
      b1 = t;
    }
    bool rnd = is_int_dtype(x->dtype);
    for (int64_t i = 0; i < o->numel; i++)
      dm_set_f64(x->dtype, o->data, i, rnd ? nearbyint(b0[i]) : b0[i]);
  }
  if (a.ctm == CTM_TF_CROP) {
    /* any axis out of the crop window: the whole element extrapolates */
    unsigned char val[16];
    if (es > sizeof val || !dm_is_numeric(x->dtype)) return TOLK_OK;
    dm_set_f64(x->dtype, val, 0, a.extrapolation);
    int64_t ctr[IR_MAX_RANK] = {0};
    for (int64_t i = 0; i < o->numel; i++) {
      bool e = false;
      for (int k = 0; k < r && !e; k++) e = ax[k].extra[ctr[k]];
      if (e) memcpy((char *)o->data + (size_t)i * es, val, es);
      for (int k = r - 1; k >= 0; k--) {
        if (++ctr[k] < outd[k]) break;
        ctr[k] = 0;
      }
    }
  }
  return TOLK_OK;
}

static tolk_status resize_run(struct op_ctx *c) { return resize_common(c, false); }
static tolk_status upsample_run(struct op_ctx *c) { return resize_common(c, true); }

const struct op_def tolk_ops_resize[] = {
    {"", "Resize", 10, 0, resize_prepare, resize_run, NULL},
    {"", "Upsample", 7, 9, upsample_prepare, upsample_run, NULL},
    {0},
};
