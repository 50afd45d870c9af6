/*
 * shape.c — operators that produce or change shapes without reordering data:
 * Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (in
 * inference mode), Constant, ConstantOfShape, Range and EyeLike.
 *
 * Reshaping operators copy the input's bytes unchanged into their output;
 * the executor owns buffer placement (aliasing an input, if it ever does, is
 * its decision, not the kernel's). Opset differences are handled in run()
 * from ctx->opset: attributes that became inputs (Squeeze/Unsqueeze axes at
 * 13), new attributes (Shape start/end at 15, Reshape allowzero at 14).
 */
#include <math.h>
#include <string.h>

#include "dm.h"

/* ------------------------------------------------------------ Shape, Size */

static tolk_status shape_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  int64_t r = x->rank, start = 0, end = r;
  if (c->opset >= 15) {
    start = ir_attr_int(c->node, "start", 0);
    end = ir_attr_int(c->node, "end", r);
    /* negative counts from the back; both clamp to [0, rank] */
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    if (end < start) end = start;
  }
  int64_t n = end - start;
  struct tensor *o;
  tolk_status st = dm_output(c, 0, TOLK_INT64, 1, &n, &o);
  if (st) return st;
  for (int64_t i = 0; i < n; i++) ((int64_t *)o->data)[i] = x->dims[start + i];
  return TOLK_OK;
}

static tolk_status size_run(struct op_ctx *c) {
  struct tensor *o;
  tolk_status st = dm_output(c, 0, TOLK_INT64, 0, NULL, &o);
  if (st) return st;
  *(int64_t *)o->data = op_in(c, 0)->numel;
  return TOLK_OK;
}

/* ---------------------------------------------------------------- Reshape */

static tolk_status reshape_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *shape = op_in(c, 1);
  char sb[96];
  if (!shape) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 (shape) is required");
  int64_t dims[IR_MAX_RANK], n;
  tolk_status st = dm_read_ints(c, shape, "input 1 (shape)", dims, IR_MAX_RANK, &n);
  if (st) return st;
  bool allowzero = c->opset >= 14 && ir_attr_int(c->node, "allowzero", 0) != 0;
  int infer = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (int i = 0; i < (int)n; i++) {
    if (dims[i] == 0 && !allowzero) {
      if (i >= x->rank)
        return op_fail(c, TOLK_ERR_SHAPE,
                       "shape[%d] is 0 (copy the input dim) but input 0 %s has rank %d", i,
                       shape_str(x, sb, sizeof sb), x->rank);
      dims[i] = x->dims[i];
    } else if (dims[i] == -1) {
      if (infer >= 0)
        return op_fail(c, TOLK_ERR_SHAPE, "shape has more than one -1 (dims %d and %d)",
                       infer, i);
      infer = i;
      continue;
    } else if (dims[i] < 0) {
      return op_fail(c, TOLK_ERR_SHAPE, "shape[%d] = %lld is negative", i, (long long)dims[i]);
    }
    if (dims[i] == 0) has_zero = true;
    if (!tolk_mul_i64(known, dims[i], &known))
      return op_fail(c, TOLK_ERR_LIMIT, "shape's element count overflows");
  }
  if (infer >= 0) {
    if (allowzero && has_zero)
      return op_fail(c, TOLK_ERR_SHAPE, "allowzero shape holds both 0 and -1");
    if (known == 0 || x->numel % known != 0)
      return op_fail(c, TOLK_ERR_SHAPE,
                     "cannot infer the -1 dim: %lld elements of input 0 %s do not divide by %lld",
                     (long long)x->numel, shape_str(x, sb, sizeof sb), (long long)known);
    dims[infer] = x->numel / known;
  } else if (known != x->numel) {
    struct tensor tmp = {0};
    tmp.rank = (int)n;
    memcpy(tmp.dims, dims, sizeof(int64_t) * (size_t)n);
    char sb2[96];
    return op_fail(c, TOLK_ERR_SHAPE, "cannot reshape input 0 %s (%lld elements) to %s",
                   shape_str(x, sb, sizeof sb), (long long)x->numel,
                   shape_str(&tmp, sb2, sizeof sb2));
  }
  return dm_copy_reshaped(c, 0, x, (int)n, dims);
}

/* ---------------------------------------------------------------- Flatten */

static tolk_status flatten_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  int64_t axis = ir_attr_int(c->node, "axis", 1);
  if (axis < -x->rank || axis > x->rank)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d",
                   (long long)axis, x->rank);
  if (axis < 0) axis += x->rank;
  int64_t dims[2] = {1, 1};
  for (int i = 0; i < x->rank; i++) dims[i < axis ? 0 : 1] *= x->dims[i];
  return dm_copy_reshaped(c, 0, x, 2, dims);
}

/* ------------------------------------------------------ Squeeze, Unsqueeze */

/* The axes of (Un)Squeeze: the attribute before opset 13, input 1 from 13.
 * *n = -1 when none are given. */
static tolk_status read_axes(struct op_ctx *c, int64_t *axes, int64_t *n) {
  if (c->opset >= 13) {
    const struct tensor *a = op_in(c, 1);
    *n = -1;
    if (!a) return TOLK_OK;
    return dm_read_ints(c, a, "input 1 (axes)", axes, DM_MAX_RANK, n);
  }
  return dm_attr_ints(c->node, "axes", axes, DM_MAX_RANK, n, c->err);
}

static tolk_status squeeze_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  int64_t axes[DM_MAX_RANK], n;
  char sb[96];
  tolk_status st = read_axes(c, axes, &n);
  if (st) return st;
  bool drop[IR_MAX_RANK] = {false};
  if (n < 0) {
    for (int i = 0; i < x->rank; i++) drop[i] = x->dims[i] == 1;
  } else {
    for (int64_t k = 0; k < n; k++) {
      int a;
      st = dm_axis(c, axes[k], x->rank, "axes value", &a);
      if (st) return st;
      if (x->dims[a] != 1)
        return op_fail(c, TOLK_ERR_SHAPE, "cannot squeeze axis %d of input 0 %s: dim is not 1",
                       a, shape_str(x, sb, sizeof sb));
      drop[a] = true;
    }
  }
  int64_t dims[IR_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (!drop[i]) dims[r++] = x->dims[i];
  return dm_copy_reshaped(c, 0, x, r, dims);
}

static tolk_status unsqueeze_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  int64_t axes[DM_MAX_RANK], n;
  tolk_status st = read_axes(c, axes, &n);
  if (st) return st;
  if (n < 0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "axes are required");
  if (x->rank + n > IR_MAX_RANK)
    return op_fail(c, TOLK_ERR_LIMIT, "output rank %lld exceeds %d", (long long)(x->rank + n),
                   IR_MAX_RANK);
  int r = x->rank + (int)n;
  bool ins[IR_MAX_RANK] = {false};
  for (int64_t k = 0; k < n; k++) {
    int a;
    st = dm_axis(c, axes[k], r, "axes value", &a);
    if (st) return st;
    if (ins[a]) return op_fail(c, TOLK_ERR_INVALID_MODEL, "axis %d is repeated", a);
    ins[a] = true;
  }
  int64_t dims[IR_MAX_RANK];
  for (int i = 0, j = 0; i < r; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
  return dm_copy_reshaped(c, 0, x, r, dims);
}

/* ------------------------------------------------------ Identity, Dropout */

static tolk_status identity_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  return dm_copy_reshaped(c, 0, x, x->rank, x->dims);
}

/* Inference-mode dropout is the identity; the optional mask is all ones.
 * Training mode with a non-zero ratio is random and is refused. */
static tolk_status dropout_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  if (c->opset >= 12) {
    const struct tensor *ratio = op_in(c, 1), *train = op_in(c, 2);
    if (train && train->numel >= 1 && train->dtype == TOLK_BOOL && *(const uint8_t *)train->data) {
      double r = 0.5;
      if (ratio && ratio->numel >= 1 && dm_is_numeric(ratio->dtype))
        r = dm_get_f64(ratio->dtype, ratio->data, 0);
      if (r != 0)
        return op_fail(c, TOLK_ERR_UNSUPPORTED,
                       "training_mode is true with ratio %g: random dropout is not supported", r);
    }
  }
  tolk_status st = dm_copy_reshaped(c, 0, x, x->rank, x->dims);
  if (st || c->n_out < 2 || !c->node->outputs[1]) return st;
  /* before opset 10 the mask has the input's type; from 10 it is bool */
  int32_t mdt = c->opset >= 10 ? TOLK_BOOL : x->dtype;
  struct tensor *m;
  st = dm_output(c, 1, mdt, x->rank, x->dims, &m);
  if (st) return st;
  if (!dm_is_numeric(mdt))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "mask dtype %s", tolk_dtype_name((tolk_dtype)mdt));
  for (int64_t i = 0; i < m->numel; i++) dm_set_f64(mdt, m->data, i, 1.0);
  return TOLK_OK;
}

/* --------------------------------------------------------------- Constant */

static const char *const constant_attrs[] = {"value",       "sparse_value", "value_float",
                                             "value_floats", "value_int",    "value_ints",
                                             "value_string", "value_strings"};

/* The one value attribute a Constant must carry. */
static tolk_status constant_attr(const struct ir_node *node, const struct ir_attr **out,
                                 tolk_error *err) {
  *out = NULL;
  for (size_t i = 0; i < sizeof constant_attrs / sizeof constant_attrs[0]; i++) {
    const struct ir_attr *a = ir_node_attr(node, constant_attrs[i]);
    if (!a) continue;
    if (*out)
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Constant has both '%s' and '%s'",
                       (*out)->name, a->name);
    *out = a;
  }
  if (!*out) return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Constant has no value attribute");
  const struct ir_attr *a = *out;
  if (a->type == IR_ATTR_STRING || a->type == IR_ATTR_STRINGS)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "Constant: string values are not supported");
  if ((a->type == IR_ATTR_TENSOR || a->type == IR_ATTR_SPARSE_TENSOR)) {
    const struct ir_tensor *t = a->t;
    if (!t) return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Constant: '%s' holds no tensor", a->name);
    if (dm_esize(t->dtype) == 0)
      return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "Constant: dtype %s is not supported",
                       tolk_dtype_name((tolk_dtype)t->dtype));
    if (t->numel > 0 && !t->data)
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Constant: tensor data is not loaded");
    if (t->rank > IR_MAX_RANK)
      return tolk_fail(err, TOLK_ERR_LIMIT, "Constant: rank %d exceeds %d", t->rank,
                       IR_MAX_RANK);
    return TOLK_OK;
  }
  if (a->type != IR_ATTR_FLOAT && a->type != IR_ATTR_FLOATS && a->type != IR_ATTR_INT &&
      a->type != IR_ATTR_INTS)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Constant: '%s' has the wrong type", a->name);
  return TOLK_OK;
}

static tolk_status constant_prepare(const struct ir_node *node, int64_t opset, void **state,
                                    tolk_error *err) {
  const struct ir_attr *a;
  (void)opset;
  *state = NULL;
  return constant_attr(node, &a, err);
}

static tolk_status constant_run(struct op_ctx *c) {
  const struct ir_attr *a;
  tolk_status st = constant_attr(c->node, &a, c->err);
  if (st) return st;
  struct tensor *o;
  int64_t n;
  switch (a->type) {
  case IR_ATTR_FLOAT:
    if ((st = dm_output(c, 0, TOLK_FLOAT, 0, NULL, &o))) return st;
    *(float *)o->data = a->f;
    return TOLK_OK;
  case IR_ATTR_INT:
    if ((st = dm_output(c, 0, TOLK_INT64, 0, NULL, &o))) return st;
    *(int64_t *)o->data = a->i;
    return TOLK_OK;
  case IR_ATTR_FLOATS:
    n = (int64_t)a->n;
    if ((st = dm_output(c, 0, TOLK_FLOAT, 1, &n, &o))) return st;
    if (n) memcpy(o->data, a->floats, sizeof(float) * a->n);
    return TOLK_OK;
  case IR_ATTR_INTS:
    n = (int64_t)a->n;
    if ((st = dm_output(c, 0, TOLK_INT64, 1, &n, &o))) return st;
    if (n) memcpy(o->data, a->ints, sizeof(int64_t) * a->n);
    return TOLK_OK;
  default: {
    const struct ir_tensor *t = a->t;
    if ((st = dm_output(c, 0, t->dtype, t->rank, t->dims, &o))) return st;
    dm_memcpy(c, o->data, t->data, (size_t)o->numel * dm_esize(t->dtype));
    return TOLK_OK;
  }
  }
}

/* -------------------------------------------------------- ConstantOfShape */

static tolk_status cos_value(const struct ir_node *node, const struct ir_tensor **out,
                             tolk_error *err) {
  const struct ir_attr *a = ir_node_attr(node, "value");
  *out = NULL;
  if (!a) return TOLK_OK;
  if (a->type != IR_ATTR_TENSOR || !a->t)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "attribute 'value' must be a tensor");
  if (a->t->numel != 1 || !a->t->data)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "attribute 'value' must hold exactly one element, has %lld",
                     (long long)a->t->numel);
  if (dm_esize(a->t->dtype) == 0)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "attribute 'value': dtype %s",
                     tolk_dtype_name((tolk_dtype)a->t->dtype));
  *out = a->t;
  return TOLK_OK;
}

static tolk_status cos_prepare(const struct ir_node *node, int64_t opset, void **state,
                               tolk_error *err) {
  const struct ir_tensor *v;
  (void)opset;
  *state = NULL;
  return cos_value(node, &v, err);
}

static tolk_status cos_run(struct op_ctx *c) {
  const struct ir_tensor *v;
  tolk_status st = cos_value(c->node, &v, c->err);
  if (st) return st;
  int64_t dims[IR_MAX_RANK], n;
  st = dm_read_ints(c, op_in(c, 0), "input 0 (shape)", dims, IR_MAX_RANK, &n);
  if (st) return st;
  for (int64_t i = 0; i < n; i++)
    if (dims[i] < 0)
      return op_fail(c, TOLK_ERR_SHAPE, "shape[%lld] = %lld is negative", (long long)i,
                     (long long)dims[i]);
  static const float zero = 0.0f;
  int32_t dt = v ? v->dtype : TOLK_FLOAT;
  const void *elem = v ? v->data : &zero;
  struct tensor *o;
  if ((st = dm_output(c, 0, dt, (int)n, dims, &o))) return st;
  dm_fill(c, o->data, elem, dm_esize(dt), o->numel);
  return TOLK_OK;
}

/* ------------------------------------------------------------------ Range */

#define RANGE_FILL_FLOAT(T)                                  \
  do {                                                       \
    T *y = o->data;                                          \
    T v = *(const T *)start->data, d = *(const T *)delta->data; \
    for (int64_t i = 0; i < count; i++) {                    \
      y[i] = v;                                              \
      v += d;                                                \
    }                                                        \
  } while (0)

/* start + i * delta in wrapping arithmetic: every value written lies between
 * start and limit, so the wrap never shows. */
#define RANGE_FILL_INT(T)                                                  \
  do {                                                                     \
    T *y = o->data;                                                        \
    for (int64_t i = 0; i < count; i++)                                    \
      y[i] = (T)(int64_t)((uint64_t)is + (uint64_t)i * (uint64_t)id);      \
  } while (0)

static tolk_status range_run(struct op_ctx *c) {
  const struct tensor *start = op_in(c, 0), *limit = op_in(c, 1), *delta = op_in(c, 2);
  if (!start || !limit || !delta)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "start, limit and delta are required");
  int32_t dt = start->dtype;
  if (limit->dtype != dt || delta->dtype != dt)
    return op_fail(c, TOLK_ERR_TYPE, "start, limit and delta differ in dtype (%s, %s, %s)",
                   tolk_dtype_name((tolk_dtype)dt), tolk_dtype_name((tolk_dtype)limit->dtype),
                   tolk_dtype_name((tolk_dtype)delta->dtype));
  if (start->numel != 1 || limit->numel != 1 || delta->numel != 1)
    return op_fail(c, TOLK_ERR_SHAPE, "start, limit and delta must be scalars");
  int64_t count, is = 0, id = 0;
  if (dt == TOLK_FLOAT || dt == TOLK_DOUBLE) {
    double s = dm_get_f64(dt, start->data, 0), l = dm_get_f64(dt, limit->data, 0);
    double d = dm_get_f64(dt, delta->data, 0);
    if (d == 0) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "delta is zero");
    double n = ceil((l - s) / d);
    if (!(n > 0)) n = 0; /* also NaN */
    if (n > 0x1p62) return op_fail(c, TOLK_ERR_LIMIT, "range of %g elements", n);
    count = (int64_t)n;
  } else if (dt == TOLK_INT16 || dt == TOLK_INT32 || dt == TOLK_INT64) {
    int64_t s = (int64_t)dm_get_f64(dt, start->data, 0), l, d;
    if (dt == TOLK_INT64) {
      s = *(const int64_t *)start->data;
      l = *(const int64_t *)limit->data;
      d = *(const int64_t *)delta->data;
    } else {
      l = (int64_t)dm_get_f64(dt, limit->data, 0);
      d = (int64_t)dm_get_f64(dt, delta->data, 0);
    }
    if (d == 0) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "delta is zero");
    int64_t span;
    if (__builtin_sub_overflow(l, s, &span) || (span == INT64_MIN && d == -1))
      return op_fail(c, TOLK_ERR_LIMIT, "range span overflows int64");
    if ((span > 0) != (d > 0) || span == 0) {
      count = 0;
    } else {
      /* same signs: truncation is the floor, so add one for a remainder */
      count = span / d + (span % d != 0);
    }
    is = s;
    id = d;
  } else {
    return op_fail(c, TOLK_ERR_TYPE, "dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)dt));
  }
  struct tensor *o;
  tolk_status st = dm_output(c, 0, dt, 1, &count, &o);
  if (st) return st;
  switch (dt) {
  case TOLK_FLOAT: RANGE_FILL_FLOAT(float); break;
  case TOLK_DOUBLE: RANGE_FILL_FLOAT(double); break;
  case TOLK_INT16: RANGE_FILL_INT(int16_t); break;
  case TOLK_INT32: RANGE_FILL_INT(int32_t); break;
  default: RANGE_FILL_INT(int64_t); break;
  }
  return TOLK_OK;
}

/* ---------------------------------------------------------------- EyeLike */

static tolk_status eyelike_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  char sb[96];
  if (x->rank != 2)
    return op_fail(c, TOLK_ERR_SHAPE, "input 0 must be 2-D, got %s", shape_str(x, sb, sizeof sb));
  int32_t dt = (int32_t)ir_attr_int(c->node, "dtype", x->dtype);
  int64_t k = ir_attr_int(c->node, "k", 0);
  if (!dm_is_numeric(dt))
    return op_fail(c, TOLK_ERR_TYPE, "dtype %s is not supported", tolk_dtype_name((tolk_dtype)dt));
  struct tensor *o;
  tolk_status st = dm_output(c, 0, dt, 2, x->dims, &o);
  if (st) return st;
  if (o->numel == 0) return TOLK_OK;
  memset(o->data, 0, (size_t)o->numel * dm_esize(dt));
  int64_t rows = x->dims[0], cols = x->dims[1];
  if (k >= cols || k <= -rows) return TOLK_OK; /* the diagonal misses the matrix */
  for (int64_t i = 0; i < rows; i++) {
    int64_t j = i + k;
    if (j >= 0 && j < cols) dm_set_f64(dt, o->data, i * cols + j, 1.0);
  }
  return TOLK_OK;
}

const struct op_def tolk_ops_shape[] = {
    {"", "Shape", 1, 0, NULL, shape_run, NULL},
    {"", "Size", 1, 0, NULL, size_run, NULL},
    {"", "Reshape", 5, 0, NULL, reshape_run, NULL},
    {"", "Flatten", 1, 0, NULL, flatten_run, NULL},
    {"", "Squeeze", 1, 0, NULL, squeeze_run, NULL},
    {"", "Unsqueeze", 1, 0, NULL, unsqueeze_run, NULL},
    {"", "Identity", 1, 0, NULL, identity_run, NULL},
    {"", "Dropout", 7, 0, NULL, dropout_run, NULL},
    {"", "Constant", 1, 0, constant_prepare, constant_run, NULL},
    {"", "ConstantOfShape", 9, 0, cos_prepare, cos_run, NULL},
    {"", "Range", 11, 0, NULL, range_run, NULL},
    {"", "EyeLike", 9, 0, NULL, eyelike_run, NULL},
    {0},
};
