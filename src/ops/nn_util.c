/*
 * nn_util.c — attribute, axis and fp16 staging helpers for the reduce,
 * softmax, norm, conv and pool families (see nn_util.h).
 */
#include "nn_util.h"

#include <math.h>
#include <string.h>

int nn_attr_ints(const struct ir_node *node, const char *name, int64_t *out, int max,
                 tolk_error *err) {
  const struct ir_attr *a = ir_node_attr(node, name);
  if (!a) return -1;
  if (a->type != IR_ATTR_INTS && !(a->type == IR_ATTR_INT && max >= 1)) {
    tolk_fail(err, TOLK_ERR_INVALID_MODEL, "attribute '%s' must be a list of ints", name);
    return -2;
  }
  if (a->type == IR_ATTR_INT) {
    out[0] = a->i;
    return 1;
  }
  if (a->n > (size_t)max) {
    tolk_fail(err, TOLK_ERR_UNSUPPORTED, "attribute '%s' has %zu entries (at most %d)",
              name, a->n, max);
    return -2;
  }
  if (a->n) memcpy(out, a->ints, a->n * sizeof *out);
  return (int)a->n;
}

bool nn_axis(int64_t axis, int rank, int *out) {
  if (axis < -(int64_t)rank || axis >= rank) return false;
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

bool nn_is_float(int32_t dtype) {
  return dtype == TOLK_FLOAT || dtype == TOLK_DOUBLE || dtype == TOLK_FLOAT16 ||
         dtype == TOLK_BFLOAT16;
}

const float *nn_in_f32(struct op_ctx *c, const struct tensor *t) {
  if (t->dtype == TOLK_FLOAT) return (const float *)t->data;
  if (t->dtype != TOLK_FLOAT16 && t->dtype != TOLK_BFLOAT16 && t->dtype != TOLK_DOUBLE) {
    op_fail(c, TOLK_ERR_TYPE, "dtype %s has no fp32 path",
            tolk_dtype_name((tolk_dtype)t->dtype));
    return NULL;
  }
  size_t bytes;
  if (!tolk_mul_size((size_t)t->numel, sizeof(float), &bytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "tensor of %lld elements is too large", (long long)t->numel);
    return NULL;
  }
  float *buf = op_scratch(c, bytes ? bytes : sizeof(float));
  if (!buf) return NULL;
  if (t->dtype == TOLK_DOUBLE) {
    const double *s = t->data;
    for (int64_t i = 0; i < t->numel; i++) buf[i] = (float)s[i];
  } else {
    const uint16_t *s = t->data;
    if (t->dtype == TOLK_FLOAT16)
      tolk_f16_to_f32_n(s, buf, t->numel);
    else
      tolk_bf16_to_f32_n(s, buf, t->numel);
  }
  return buf;
}

float *nn_out_f32(struct op_ctx *c, struct tensor *out) {
  if (out->dtype == TOLK_FLOAT) return (float *)out->data;
  size_t bytes;
  if (!tolk_mul_size((size_t)out->numel, sizeof(float), &bytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "tensor of %lld elements is too large",
            (long long)out->numel);
    return NULL;
  }
  return op_scratch(c, bytes ? bytes : sizeof(float));
}

void nn_out_f32_finish(struct tensor *out, const float *buf) {
  if (out->dtype == TOLK_FLOAT) return;
  if (out->dtype == TOLK_DOUBLE) {
    double *d = out->data;
    for (int64_t i = 0; i < out->numel; i++) d[i] = buf[i];
  } else if (out->dtype == TOLK_FLOAT16) {
    tolk_f32_to_f16_n(buf, out->data, out->numel);
  } else if (out->dtype == TOLK_BFLOAT16) {
    tolk_f32_to_bf16_n(buf, out->data, out->numel);
  }
}

const double *nn_in_f64(struct op_ctx *c, const struct tensor *t) {
  if (t->dtype == TOLK_DOUBLE) return (const double *)t->data;
  if (!nn_is_float(t->dtype)) {
    op_fail(c, TOLK_ERR_TYPE, "dtype %s has no floating-point path",
            tolk_dtype_name((tolk_dtype)t->dtype));
    return NULL;
  }
  size_t bytes;
  if (!tolk_mul_size((size_t)t->numel, sizeof(double), &bytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "tensor of %lld elements is too large", (long long)t->numel);
    return NULL;
  }
  double *buf = op_scratch(c, bytes ? bytes : sizeof(double));
  if (!buf) return NULL;
  for (int64_t i = 0; i < t->numel; i++) buf[i] = nn_get_f64(t, i);
  return buf;
}

double *nn_out_f64(struct op_ctx *c, struct tensor *out) {
  if (out->dtype == TOLK_DOUBLE) return (double *)out->data;
  size_t bytes;
  if (!tolk_mul_size((size_t)out->numel, sizeof(double), &bytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "tensor of %lld elements is too large",
            (long long)out->numel);
    return NULL;
  }
  return op_scratch(c, bytes ? bytes : sizeof(double));
}

void nn_out_f64_finish(struct tensor *out, const double *buf) {
  switch (out->dtype) {
  case TOLK_FLOAT:
    for (int64_t i = 0; i < out->numel; i++) ((float *)out->data)[i] = (float)buf[i];
    break;
  case TOLK_FLOAT16:
    for (int64_t i = 0; i < out->numel; i++) ((uint16_t *)out->data)[i] = tolk_f64_to_f16(buf[i]);
    break;
  case TOLK_BFLOAT16:
    for (int64_t i = 0; i < out->numel; i++)
      ((uint16_t *)out->data)[i] = tolk_f64_to_bf16(buf[i]);
    break;
  default: break;
  }
}

double nn_get_f64(const struct tensor *t, int64_t i) {
  switch (t->dtype) {
  case TOLK_FLOAT: return ((const float *)t->data)[i];
  case TOLK_DOUBLE: return ((const double *)t->data)[i];
  case TOLK_FLOAT16: return nn_h2f(((const uint16_t *)t->data)[i]);
  case TOLK_BFLOAT16: return nn_bf2f(((const uint16_t *)t->data)[i]);
  default: return (double)nn_get_i64(t, i);
  }
}

int64_t nn_get_i64(const struct tensor *t, int64_t i) {
  switch (t->dtype) {
  case TOLK_INT64: return ((const int64_t *)t->data)[i];
  case TOLK_INT32: return ((const int32_t *)t->data)[i];
  case TOLK_INT16: return ((const int16_t *)t->data)[i];
  case TOLK_INT8: return ((const int8_t *)t->data)[i];
  case TOLK_UINT64: return (int64_t)((const uint64_t *)t->data)[i];
  case TOLK_UINT32: return ((const uint32_t *)t->data)[i];
  case TOLK_UINT16: return ((const uint16_t *)t->data)[i];
  case TOLK_UINT8:
  case TOLK_BOOL: return ((const uint8_t *)t->data)[i];
  case TOLK_FLOAT:
  case TOLK_DOUBLE:
  case TOLK_FLOAT16:
  case TOLK_BFLOAT16: return (int64_t)nn_get_f64(t, i);
  default: return 0;
  }
}

int nn_axes_from_tensor(struct op_ctx *c, const struct tensor *t, int rank, int *out) {
  if (!t || t->numel == 0) return 0;
  if (t->dtype != TOLK_INT64 && t->dtype != TOLK_INT32) {
    op_fail(c, TOLK_ERR_TYPE, "axes must be int64, got %s",
            tolk_dtype_name((tolk_dtype)t->dtype));
    return -1;
  }
  if (t->numel > IR_MAX_RANK || t->numel > (rank ? rank : 1)) {
    op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "%lld axes for a tensor of rank %d",
            (long long)t->numel, rank);
    return -1;
  }
  int n = (int)t->numel;
  for (int i = 0; i < n; i++) {
    int64_t a = nn_get_i64(t, i);
    if (!nn_axis(a, rank, &out[i])) {
      op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
              (long long)a, rank);
      return -1;
    }
    for (int j = 0; j < i; j++)
      if (out[j] == out[i]) {
        op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "axis %lld is repeated", (long long)a);
        return -1;
      }
  }
  return n;
}

tolk_status nn_window_attrs(struct op_ctx *c, int nsp, const int64_t *in, const int64_t *k,
                            bool dilations_allowed, struct nn_window *w,
                            enum nn_auto_pad *auto_pad) {
  if (nsp < 1 || nsp > NN_MAX_SPATIAL)
    return op_fail(c, TOLK_ERR_SHAPE, "%d spatial dims are not supported", nsp);
  memset(w, 0, sizeof *w);
  w->nsp = nsp;
  const char *ap = ir_attr_string(c->node, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") == 0 || ap[0] == '\0')
    *auto_pad = NN_PAD_NOTSET;
  else if (strcmp(ap, "SAME_UPPER") == 0)
    *auto_pad = NN_PAD_SAME_UPPER;
  else if (strcmp(ap, "SAME_LOWER") == 0)
    *auto_pad = NN_PAD_SAME_LOWER;
  else if (strcmp(ap, "VALID") == 0)
    *auto_pad = NN_PAD_VALID;
  else
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "auto_pad '%s' is not one of NOTSET, "
                   "SAME_UPPER, SAME_LOWER, VALID", ap);
  int64_t v[2 * NN_MAX_SPATIAL];
  static const char *const names[3] = {"strides", "dilations", "pads"};
  for (int a = 0; a < 3; a++) {
    int want = a == 2 ? 2 * nsp : nsp;
    int n = a == 1 && !dilations_allowed ? -1 : nn_attr_ints(c->node, names[a], v, want, c->err);
    if (n == -2) return nn_status(c);
    if (n >= 0 && n != want)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "'%s' has %d values; %d spatial dims need %d",
                     names[a], n, nsp, want);
    for (int d = 0; d < want; d++) {
      int64_t val = n < 0 ? (a == 2 ? 0 : 1) : v[d];
      if (a < 2 ? val < 1 : val < 0)
        return op_fail(c, TOLK_ERR_INVALID_MODEL, "'%s' has the invalid value %lld", names[a],
                       (long long)val);
      if (val > ((int64_t)1 << 40))
        return op_fail(c, TOLK_ERR_LIMIT, "'%s' value %lld is too large", names[a],
                       (long long)val);
      if (a == 0) w->stride[d] = val;
      if (a == 1) w->dil[d] = val;
      if (a == 2) (d < nsp ? w->pad0 : w->pad1)[d % nsp] = val;
    }
  }
  for (int d = 0; d < nsp; d++) {
    w->in[d] = in[d];
    w->k[d] = k[d];
  }
  return TOLK_OK;
}
