/*
 * index.c — operators that read or write elements at positions given by an
 * index tensor: Gather, GatherElements, GatherND, ScatterElements (and the
 * older Scatter), ScatterND, OneHot, Compress, NonZero and ReverseSequence.
 *
 * Every index is checked against its axis before anything is read or
 * written through it: negative indices wrap once (-n .. n-1), anything else
 * is an error naming the position and the value. Indices are validated in a
 * serial pass so that the (possibly parallel) copy loops cannot fail.
 */
#include <string.h>

#include "../kern/kern.h"
#include "dm.h"
#include "matmul.h"

/* Checks index value v against an axis of size n and wraps it. */
static inline bool wrap_index(int64_t v, int64_t n, int64_t *out) {
  if (v < -n || v >= n) return false;
  *out = v < 0 ? v + n : v;
  return true;
}

static tolk_status bad_index(struct op_ctx *c, const char *what, int64_t pos, int64_t v,
                             int64_t n) {
  return op_fail(c, TOLK_ERR_INVALID_ARGUMENT,
                 "%s: index %lld at flat position %lld is out of range [-%lld, %lld)", what,
                 (long long)v, (long long)pos, (long long)n, (long long)n);
}

static tolk_status need_index_tensor(struct op_ctx *c, const struct tensor *t, const char *what) {
  if (!t) return op_fail(c, TOLK_ERR_INVALID_MODEL, "%s is required", what);
  if (!dm_is_index_dtype(t->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "%s must be int32 or int64, got %s", what,
                   tolk_dtype_name((tolk_dtype)t->dtype));
  return TOLK_OK;
}

/* ----------------------------------------------------------------- Gather */

struct gather_job {
  const char *src;
  char *dst;
  const int64_t *idx; /* wrapped */
  int64_t nidx, n_axis;
  size_t row; /* bytes per gathered slice */
};

static void gather_rows(void *arg, int64_t begin, int64_t end) {
  const struct gather_job *j = arg;
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / j->nidx, t = r % j->nidx;
    memcpy(j->dst + (size_t)r * j->row, j->src + (size_t)(o * j->n_axis + j->idx[t]) * j->row,
           j->row);
  }
}

static tolk_status gather_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *ind = op_in(c, 1);
  size_t es;
  int axis;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = need_index_tensor(c, ind, "input 1 (indices)");
  if (!st) st = dm_axis(c, ir_attr_int(c->node, "axis", 0), x->rank, "axis", &axis);
  if (st) return st;
  int r = x->rank - 1 + ind->rank;
  if (r > IR_MAX_RANK) return op_fail(c, TOLK_ERR_LIMIT, "output rank %d exceeds %d", r, IR_MAX_RANK);
  int64_t dims[IR_MAX_RANK], outer = 1, inner = 1, n_axis = x->dims[axis];
  int k = 0;
  for (int i = 0; i < axis; i++) outer *= (dims[k++] = x->dims[i]);
  for (int i = 0; i < ind->rank; i++) dims[k++] = ind->dims[i];
  for (int i = axis + 1; i < x->rank; i++) inner *= (dims[k++] = x->dims[i]);
  int64_t *idx = op_scratch(c, sizeof(int64_t) * (size_t)(ind->numel ? ind->numel : 1));
  if (!idx) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  for (int64_t t = 0; t < ind->numel; t++) {
    int64_t v = dm_index_at(ind, t);
    if (!wrap_index(v, n_axis, &idx[t])) return bad_index(c, "input 1 (indices)", t, v, n_axis);
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, r, dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  struct gather_job j = {x->data, o->data, idx, ind->numel, n_axis, (size_t)inner * es};
  int64_t rows = outer * ind->numel;
  if ((size_t)o->numel * es >= ((size_t)1 << 20))
    op_parallel_for(c, rows, (int64_t)(((size_t)64 << 10) / j.row) + 1, gather_rows, &j);
  else
    gather_rows(&j, 0, rows);
  return TOLK_OK;
}

/* Gather on axis 0 of a table whose packed copy the state holds
 * (tolk_gather_packed_def): the table's data is never read. */
static tolk_status gather_packed_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *ind = op_in(c, 1);
  const struct kern_packed_b *pb = mm_state_packed(c->state);
  tolk_status st = need_index_tensor(c, ind, "input 1 (indices)");
  if (st) return st;
  if (!pb || !x || x->rank != 2)
    return op_fail(c, TOLK_ERR_INTERNAL, "a packed table's Gather without its packed table");
  int r = 1 + ind->rank;
  if (r > IR_MAX_RANK) return op_fail(c, TOLK_ERR_LIMIT, "output rank %d exceeds %d", r, IR_MAX_RANK);
  int64_t dims[IR_MAX_RANK], n_axis = x->dims[0], width = x->dims[1];
  for (int i = 0; i < ind->rank; i++) dims[i] = ind->dims[i];
  dims[ind->rank] = width;
  struct tensor *o;
  if ((st = dm_output(c, 0, TOLK_FLOAT, r, dims, &o))) return st;
  float *out = o->data;
  for (int64_t t = 0; t < ind->numel; t++) {
    int64_t v = dm_index_at(ind, t), row;
    if (!wrap_index(v, n_axis, &row)) return bad_index(c, "input 1 (indices)", t, v, n_axis);
    if (!kern_packed_b_column(pb, row, out + t * width))
      return op_fail(c, TOLK_ERR_INTERNAL, "row %lld of the packed table", (long long)row);
  }
  return TOLK_OK;
}

void *op_gather_packed_state(const struct ir_value *table) { return mm_rows_acquire(table); }

/* Its table: read only as the packed copy, so folding keeps none of it and
 * its pages stay given back. */
const struct op_def tolk_gather_packed_def = {"tolk.internal", "GatherPackedRows", 1, 0, NULL, gather_packed_run,
                                              mm_release, .unaligned_inputs = 1u << 0,
                                              .packed_input = mm_packed_input,
                                              .packed_src_dropped = mm_packed_src_dropped};

/* --------------------------------------------------------- GatherElements */

static tolk_status gather_elements_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *ind = op_in(c, 1);
  char sb[96], sb2[96];
  size_t es;
  int axis;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = need_index_tensor(c, ind, "input 1 (indices)");
  if (!st) st = dm_axis(c, ir_attr_int(c->node, "axis", 0), x->rank, "axis", &axis);
  if (st) return st;
  bool ok = ind->rank == x->rank;
  for (int i = 0; ok && i < x->rank; i++) ok = i == axis || ind->dims[i] <= x->dims[i];
  if (!ok)
    return op_fail(c, TOLK_ERR_SHAPE, "indices %s do not fit data %s", shape_str(ind, sb, sizeof sb),
                   shape_str(x, sb2, sizeof sb2));
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, ind->rank, ind->dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  int64_t xst[IR_MAX_RANK], ctr[IR_MAX_RANK] = {0}, base = 0, n_axis = x->dims[axis];
  dm_dense_strides(x->rank, x->dims, xst);
  const char *src = x->data;
  char *dst = o->data;
  /* odometer over the indices' positions; base is the data offset of the
   * position with the axis coordinate left out */
  for (int64_t p = 0; p < ind->numel; p++) {
    int64_t v = dm_index_at(ind, p), w;
    if (!wrap_index(v, n_axis, &w)) return bad_index(c, "input 1 (indices)", p, v, n_axis);
    memcpy(dst + (size_t)p * es, src + (size_t)(base + w * xst[axis]) * es, es);
    for (int k = ind->rank - 1; k >= 0; k--) {
      if (k != axis) base += xst[k];
      if (++ctr[k] < ind->dims[k]) break;
      if (k != axis) base -= ctr[k] * xst[k];
      ctr[k] = 0;
    }
  }
  return TOLK_OK;
}

/* --------------------------------------------------------------- GatherND */

/* Flat element offsets of GatherND/ScatterND index tuples. Tuple t (of
 * `ntup`, each `m` values, lying in batch t / per_batch) selects data offset
 * batch * batch_size + sum_j idx_j * stride(b + j). */
static tolk_status nd_offsets(struct op_ctx *c, const struct tensor *x, const struct tensor *ind,
                              int b, int64_t m, int64_t ntup, int64_t per_batch,
                              int64_t batch_size, int64_t *off) {
  int64_t st[IR_MAX_RANK];
  dm_dense_strides(x->rank, x->dims, st);
  for (int64_t t = 0; t < ntup; t++) {
    int64_t o = (t / per_batch) * batch_size;
    for (int64_t jx = 0; jx < m; jx++) {
      int64_t v = dm_index_at(ind, t * m + jx), w, n = x->dims[b + jx];
      if (!wrap_index(v, n, &w)) return bad_index(c, "input 1 (indices)", t * m + jx, v, n);
      o += w * st[b + jx];
    }
    off[t] = o;
  }
  return TOLK_OK;
}

static tolk_status gather_nd_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *ind = op_in(c, 1);
  char sb[96], sb2[96];
  size_t es;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = need_index_tensor(c, ind, "input 1 (indices)");
  if (st) return st;
  int64_t b = c->opset >= 12 ? ir_attr_int(c->node, "batch_dims", 0) : 0;
  if (ind->rank < 1 || b < 0 || b >= ind->rank || b >= x->rank)
    return op_fail(c, TOLK_ERR_SHAPE, "batch_dims %lld does not fit indices %s and data %s",
                   (long long)b, shape_str(ind, sb, sizeof sb), shape_str(x, sb2, sizeof sb2));
  int64_t m = ind->dims[ind->rank - 1];
  bool ok = m <= x->rank - b;
  for (int i = 0; ok && i < b; i++) ok = ind->dims[i] == x->dims[i];
  if (!ok)
    return op_fail(c, TOLK_ERR_SHAPE, "indices %s do not fit data %s (batch_dims %lld)",
                   shape_str(ind, sb, sizeof sb), shape_str(x, sb2, sizeof sb2), (long long)b);
  int r = ind->rank - 1 + x->rank - (int)b - (int)m;
  if (r > IR_MAX_RANK) return op_fail(c, TOLK_ERR_LIMIT, "output rank %d exceeds %d", r, IR_MAX_RANK);
  int64_t dims[IR_MAX_RANK], slice = 1, batch_size = 1, per_batch = 1, ntup = 1;
  int k = 0;
  for (int i = 0; i < ind->rank - 1; i++) {
    dims[k++] = ind->dims[i];
    ntup *= ind->dims[i];
    if (i >= b) per_batch *= ind->dims[i];
  }
  for (int i = (int)(b + m); i < x->rank; i++) slice *= (dims[k++] = x->dims[i]);
  for (int i = (int)b; i < x->rank; i++) batch_size *= x->dims[i];
  int64_t *off = op_scratch(c, sizeof(int64_t) * (size_t)(ntup ? ntup : 1));
  if (!off) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  if (ntup > 0 && (st = nd_offsets(c, x, ind, (int)b, m, ntup, per_batch, batch_size, off)))
    return st;
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, r, dims, &o))) return st;
  size_t row = (size_t)slice * es;
  for (int64_t t = 0; t < ntup && row > 0; t++)
    memcpy((char *)o->data + (size_t)t * row, (const char *)x->data + (size_t)off[t] * es, row);
  return TOLK_OK;
}

/* ------------------------------------------------------ scatter reductions */

enum reduction { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static tolk_status parse_reduction(const struct ir_node *node, int64_t opset, enum reduction *r,
                                   tolk_error *err) {
  const char *s = opset >= 16 ? ir_attr_string(node, "reduction", "none") : "none";
  if (strcmp(s, "none") == 0) *r = RED_NONE;
  else if (strcmp(s, "add") == 0) *r = RED_ADD;
  else if (strcmp(s, "mul") == 0) *r = RED_MUL;
  else if (strcmp(s, "max") == 0 && opset >= 18) *r = RED_MAX;
  else if (strcmp(s, "min") == 0 && opset >= 18) *r = RED_MIN;
  else return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "unknown reduction '%s'", s);
  return TOLK_OK;
}

static tolk_status scatter_prepare(const struct ir_node *node, int64_t opset, void **state,
                                   tolk_error *err) {
  enum reduction r;
  *state = NULL;
  return parse_reduction(node, opset, &r, err);
}

/* Integer arithmetic wraps (through the unsigned type) instead of
 * overflowing. */
#define COMBINE_INT(T, UT)                                                   \
  do {                                                                       \
    T a, s;                                                                  \
    memcpy(&a, dst, sizeof a);                                               \
    memcpy(&s, src, sizeof s);                                               \
    switch (red) {                                                           \
    case RED_ADD: a = (T)((UT)a + (UT)s); break;                             \
    case RED_MUL: a = (T)((UT)a * (UT)s); break;                             \
    case RED_MAX: a = s > a ? s : a; break;                                  \
    case RED_MIN: a = s < a ? s : a; break;                                  \
    default: a = s; break;                                                   \
    }                                                                        \
    memcpy(dst, &a, sizeof a);                                               \
  } while (0)

static float combine_f(float a, float s, enum reduction red) {
  switch (red) {
  case RED_ADD: return a + s;
  case RED_MUL: return a * s;
  case RED_MAX: return s > a ? s : a;
  case RED_MIN: return s < a ? s : a;
  default: return s;
  }
}

/* dst = dst (red) src for one element. */
static void combine(int32_t dtype, void *dst, const void *src, enum reduction red) {
  switch (dtype) {
  case TOLK_FLOAT: {
    float a, s;
    memcpy(&a, dst, 4);
    memcpy(&s, src, 4);
    a = combine_f(a, s, red);
    memcpy(dst, &a, 4);
    break;
  }
  case TOLK_DOUBLE: {
    double a, s;
    memcpy(&a, dst, 8);
    memcpy(&s, src, 8);
    switch (red) {
    case RED_ADD: a += s; break;
    case RED_MUL: a *= s; break;
    case RED_MAX: a = s > a ? s : a; break;
    case RED_MIN: a = s < a ? s : a; break;
    default: a = s; break;
    }
    memcpy(dst, &a, 8);
    break;
  }
  case TOLK_FLOAT16:
  case TOLK_BFLOAT16: {
    bool h = dtype == TOLK_FLOAT16;
    uint16_t a, s;
    memcpy(&a, dst, 2);
    memcpy(&s, src, 2);
    float r = combine_f(h ? dm_f16_to_f32(a) : dm_bf16_to_f32(a),
                        h ? dm_f16_to_f32(s) : dm_bf16_to_f32(s), red);
    a = h ? dm_f32_to_f16(r) : dm_f32_to_bf16(r);
    memcpy(dst, &a, 2);
    break;
  }
  case TOLK_INT8: COMBINE_INT(int8_t, uint8_t); break;
  case TOLK_INT16: COMBINE_INT(int16_t, uint16_t); break;
  case TOLK_INT32: COMBINE_INT(int32_t, uint32_t); break;
  case TOLK_INT64: COMBINE_INT(int64_t, uint64_t); break;
  case TOLK_UINT8: COMBINE_INT(uint8_t, unsigned); break;
  case TOLK_UINT16: COMBINE_INT(uint16_t, unsigned); break;
  case TOLK_UINT32: COMBINE_INT(uint32_t, uint32_t); break;
  case TOLK_UINT64: COMBINE_INT(uint64_t, uint64_t); break;
  case TOLK_BOOL: {
    uint8_t a = *(uint8_t *)dst != 0, s = *(const uint8_t *)src != 0;
    /* add and max are "or", mul and min are "and" */
    *(uint8_t *)dst = red == RED_ADD || red == RED_MAX ? (a | s) : red == RED_NONE ? s : (a & s);
    break;
  }
  default: break;
  }
}

static tolk_status check_reducible(struct op_ctx *c, int32_t dtype, enum reduction red) {
  if (red != RED_NONE && !dm_is_numeric(dtype))
    return op_fail(c, TOLK_ERR_TYPE, "reduction is not defined for dtype %s",
                   tolk_dtype_name((tolk_dtype)dtype));
  return TOLK_OK;
}

/* ------------------------------------------------------- ScatterElements */

static tolk_status scatter_elements_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *ind = op_in(c, 1), *upd = op_in(c, 2);
  char sb[96], sb2[96];
  size_t es;
  int axis;
  enum reduction red;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = need_index_tensor(c, ind, "input 1 (indices)");
  if (!st && !upd) st = op_fail(c, TOLK_ERR_INVALID_MODEL, "input 2 (updates) is required");
  if (!st) st = dm_axis(c, ir_attr_int(c->node, "axis", 0), x->rank, "axis", &axis);
  if (!st) st = parse_reduction(c->node, c->opset, &red, c->err);
  if (!st) st = check_reducible(c, x->dtype, red);
  if (st) return st;
  if (upd->dtype != x->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "updates are %s, data is %s",
                   tolk_dtype_name((tolk_dtype)upd->dtype), tolk_dtype_name((tolk_dtype)x->dtype));
  bool ok = ind->rank == x->rank && upd->rank == ind->rank;
  for (int i = 0; ok && i < x->rank; i++)
    ok = upd->dims[i] == ind->dims[i] && (i == axis || ind->dims[i] <= x->dims[i]);
  if (!ok)
    return op_fail(c, TOLK_ERR_SHAPE, "indices %s / updates do not fit data %s",
                   shape_str(ind, sb, sizeof sb), shape_str(x, sb2, sizeof sb2));
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, x->dims, &o))) return st;
  dm_memcpy(c, o->data, x->data, (size_t)x->numel * es);
  int64_t xst[IR_MAX_RANK], ctr[IR_MAX_RANK] = {0}, base = 0, n_axis = x->dims[axis];
  dm_dense_strides(x->rank, x->dims, xst);
  char *dst = o->data;
  const char *src = upd->data;
  for (int64_t p = 0; p < ind->numel; p++) {
    int64_t v = dm_index_at(ind, p), w;
    if (!wrap_index(v, n_axis, &w)) return bad_index(c, "input 1 (indices)", p, v, n_axis);
    char *d = dst + (size_t)(base + w * xst[axis]) * es;
    if (red == RED_NONE) memcpy(d, src + (size_t)p * es, es);
    else combine(x->dtype, d, src + (size_t)p * es, red);
    for (int k = ind->rank - 1; k >= 0; k--) {
      if (k != axis) base += xst[k];
      if (++ctr[k] < ind->dims[k]) break;
      if (k != axis) base -= ctr[k] * xst[k];
      ctr[k] = 0;
    }
  }
  return TOLK_OK;
}

/* -------------------------------------------------------------- ScatterND */

static tolk_status scatter_nd_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *ind = op_in(c, 1), *upd = op_in(c, 2);
  char sb[96], sb2[96], sb3[96];
  size_t es;
  enum reduction red;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = need_index_tensor(c, ind, "input 1 (indices)");
  if (!st && !upd) st = op_fail(c, TOLK_ERR_INVALID_MODEL, "input 2 (updates) is required");
  if (!st) st = parse_reduction(c->node, c->opset, &red, c->err);
  if (!st) st = check_reducible(c, x->dtype, red);
  if (st) return st;
  if (upd->dtype != x->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "updates are %s, data is %s",
                   tolk_dtype_name((tolk_dtype)upd->dtype), tolk_dtype_name((tolk_dtype)x->dtype));
  /* updates must be indices.shape[:-1] + data.shape[m:] */
  int64_t m = ind->rank >= 1 ? ind->dims[ind->rank - 1] : -1;
  bool ok = ind->rank >= 1 && m <= x->rank && upd->rank == ind->rank - 1 + x->rank - (int)m;
  for (int i = 0; ok && i < ind->rank - 1; i++) ok = upd->dims[i] == ind->dims[i];
  for (int i = (int)m; ok && i < x->rank; i++)
    ok = upd->dims[ind->rank - 1 + i - (int)m] == x->dims[i];
  if (!ok)
    return op_fail(c, TOLK_ERR_SHAPE, "indices %s and updates %s do not fit data %s",
                   shape_str(ind, sb, sizeof sb), shape_str(upd, sb2, sizeof sb2),
                   shape_str(x, sb3, sizeof sb3));
  int64_t ntup = 1, slice = 1;
  for (int i = 0; i < ind->rank - 1; i++) ntup *= ind->dims[i];
  for (int i = (int)m; i < x->rank; i++) slice *= x->dims[i];
  int64_t *off = op_scratch(c, sizeof(int64_t) * (size_t)(ntup ? ntup : 1));
  if (!off) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  if (ntup > 0 && (st = nd_offsets(c, x, ind, 0, m, ntup, ntup, 0, off))) return st;
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, x->dims, &o))) return st;
  dm_memcpy(c, o->data, x->data, (size_t)x->numel * es);
  char *dst = o->data;
  const char *src = upd->data;
  for (int64_t t = 0; t < ntup && slice > 0; t++) {
    char *d = dst + (size_t)off[t] * es;
    const char *s = src + (size_t)(t * slice) * es;
    if (red == RED_NONE) {
      memcpy(d, s, (size_t)slice * es);
      continue;
    }
    for (int64_t e = 0; e < slice; e++) combine(x->dtype, d + (size_t)e * es, s + (size_t)e * es, red);
  }
  return TOLK_OK;
}

/* ----------------------------------------------------------------- OneHot */

static tolk_status onehot_run(struct op_ctx *c) {
  const struct tensor *ind = op_in(c, 0), *dep = op_in(c, 1), *val = op_in(c, 2);
  if (!ind || !dep || !val)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "indices, depth and values are required");
  size_t es;
  tolk_status st = dm_need_esize(c, val, "input 2 (values)", &es);
  if (st) return st;
  if (!dm_is_numeric(ind->dtype) || !dm_is_numeric(dep->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "indices and depth must be numeric");
  if (dep->numel != 1 || dep->rank > 1)
    return op_fail(c, TOLK_ERR_SHAPE, "depth must hold one value");
  if (val->numel != 2 || val->rank > 1)
    return op_fail(c, TOLK_ERR_SHAPE, "values must hold two values [off, on]");
  double dd = dm_get_f64(dep->dtype, dep->data, 0);
  if (!(dd >= 1) || dd > 0x1p40)
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "depth %g must be a positive count", dd);
  int64_t depth = (int64_t)dd;
  int r = ind->rank + 1;
  if (r > IR_MAX_RANK) return op_fail(c, TOLK_ERR_LIMIT, "output rank %d exceeds %d", r, IR_MAX_RANK);
  int axis;
  if ((st = dm_axis(c, ir_attr_int(c->node, "axis", -1), r, "axis", &axis))) return st;
  int64_t dims[IR_MAX_RANK], outer = 1, inner = 1;
  for (int i = 0, k = 0; i < r; i++) {
    if (i == axis) {
      dims[i] = depth;
      continue;
    }
    dims[i] = ind->dims[k];
    if (i < axis) outer *= ind->dims[k];
    else inner *= ind->dims[k];
    k++;
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, val->dtype, r, dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  const char *off_v = val->data, *on_v = (const char *)val->data + es;
  dm_fill(c, o->data, off_v, es, o->numel);
  char *y = o->data;
  for (int64_t a = 0; a < outer; a++) {
    for (int64_t i = 0; i < inner; i++) {
      double v = dm_get_f64(ind->dtype, ind->data, a * inner + i);
      /* non-integral indices truncate; out-of-range ones leave the row off */
      if (!(v > -(double)depth - 1 && v < (double)depth)) continue;
      int64_t h = (int64_t)v;
      if (h < -depth || h >= depth) continue;
      if (h < 0) h += depth;
      memcpy(y + (size_t)((a * depth + h) * inner + i) * es, on_v, es);
    }
  }
  return TOLK_OK;
}

/* --------------------------------------------------------------- Compress */

static tolk_status compress_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *cond = op_in(c, 1);
  char sb[96];
  size_t es;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (st) return st;
  if (!cond || cond->dtype != TOLK_BOOL || cond->rank != 1)
    return op_fail(c, TOLK_ERR_TYPE, "input 1 (condition) must be a 1-D bool tensor");
  const struct ir_attr *aa = ir_node_attr(c->node, "axis");
  int axis = -1;
  int64_t outer = 1, n, inner = 1;
  if (aa) {
    if ((st = dm_axis(c, aa->i, x->rank, "axis", &axis))) return st;
    n = x->dims[axis];
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  } else {
    n = x->numel; /* flattened */
  }
  const uint8_t *cd = cond->data;
  int64_t kept = 0;
  for (int64_t i = 0; i < cond->numel; i++) {
    if (!cd[i]) continue;
    if (i >= n)
      return op_fail(c, TOLK_ERR_SHAPE, "condition selects position %lld past the %lld of input 0 %s",
                     (long long)i, (long long)n, shape_str(x, sb, sizeof sb));
    kept++;
  }
  int64_t dims[IR_MAX_RANK];
  int r = 1;
  if (aa) {
    r = x->rank;
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = kept;
  } else {
    dims[0] = kept;
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, r, dims, &o))) return st;
  size_t row = (size_t)inner * es;
  char *y = o->data;
  for (int64_t a = 0; a < outer && kept > 0; a++) {
    const char *s = (const char *)x->data + (size_t)(a * n) * row;
    for (int64_t i = 0; i < cond->numel && i < n; i++) {
      if (!cd[i]) continue;
      memcpy(y, s + (size_t)i * row, row);
      y += row;
    }
  }
  return TOLK_OK;
}

/* ---------------------------------------------------------------- NonZero */

static bool elem_nonzero(int32_t dtype, const char *p, size_t es) {
  switch (dtype) {
  case TOLK_FLOAT: { float f; memcpy(&f, p, 4); return f != 0; }
  case TOLK_DOUBLE: { double f; memcpy(&f, p, 8); return f != 0; }
  case TOLK_FLOAT16:
  case TOLK_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return (h & 0x7fffu) != 0; }
  default:
    for (size_t b = 0; b < es; b++)
      if (p[b]) return true;
    return false;
  }
}

static tolk_status nonzero_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  size_t es;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (st) return st;
  if (x->dtype == TOLK_COMPLEX64 || x->dtype == TOLK_COMPLEX128)
    return op_fail(c, TOLK_ERR_TYPE, "complex input");
  const char *p = x->data;
  int64_t nnz = 0;
  for (int64_t i = 0; i < x->numel; i++) nnz += elem_nonzero(x->dtype, p + (size_t)i * es, es);
  /* a scalar is treated as a 1-element vector, as numpy does */
  int r = x->rank ? x->rank : 1;
  int64_t dims[2] = {r, nnz}, xd[IR_MAX_RANK];
  memcpy(xd, x->dims, sizeof xd);
  if (x->rank == 0) xd[0] = 1;
  struct tensor *o;
  if ((st = dm_output(c, 0, TOLK_INT64, 2, dims, &o))) return st;
  int64_t *y = o->data, ctr[IR_MAX_RANK] = {0}, col = 0;
  for (int64_t i = 0; i < x->numel; i++) {
    if (elem_nonzero(x->dtype, p + (size_t)i * es, es)) {
      for (int k = 0; k < r; k++) y[k * nnz + col] = ctr[k];
      col++;
    }
    for (int k = r - 1; k >= 0; k--) {
      if (++ctr[k] < xd[k]) break;
      ctr[k] = 0;
    }
  }
  return TOLK_OK;
}

/* -------------------------------------------------------- ReverseSequence */

static tolk_status reverse_sequence_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *lens = op_in(c, 1);
  char sb[96];
  size_t es;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = need_index_tensor(c, lens, "input 1 (sequence_lens)");
  if (st) return st;
  int64_t ta = ir_attr_int(c->node, "time_axis", 0), ba = ir_attr_int(c->node, "batch_axis", 1);
  if (x->rank < 2 || ta == ba || ta < 0 || ta > 1 || ba < 0 || ba > 1)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "time_axis %lld / batch_axis %lld invalid for input %s",
                   (long long)ta, (long long)ba, shape_str(x, sb, sizeof sb));
  int64_t nt = x->dims[ta], nb = x->dims[ba];
  if (lens->rank != 1 || lens->numel != nb)
    return op_fail(c, TOLK_ERR_SHAPE, "sequence_lens must have %lld entries", (long long)nb);
  for (int64_t b = 0; b < nb; b++) {
    int64_t l = dm_index_at(lens, b);
    if (l < 0 || l > nt)
      return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "sequence_lens[%lld] = %lld is not in [0, %lld]",
                     (long long)b, (long long)l, (long long)nt);
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, x->dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  int64_t inner = x->numel / (nt * nb);
  size_t row = (size_t)inner * es;
  /* element (t, b) of the first two dims starts at (t*sb_t + b*sb_b) rows */
  int64_t st_t = ta == 0 ? nb : 1, st_b = ba == 0 ? nt : 1;
  for (int64_t b = 0; b < nb; b++) {
    int64_t l = dm_index_at(lens, b);
    for (int64_t t = 0; t < nt; t++) {
      int64_t from = t < l ? l - 1 - t : t;
      memcpy((char *)o->data + (size_t)(t * st_t + b * st_b) * row,
             (const char *)x->data + (size_t)(from * st_t + b * st_b) * row, row);
    }
  }
  return TOLK_OK;
}

const struct op_def tolk_ops_index[] = {
    /* gather_rows copies whole slices with memcpy. */
    {"", "Gather", 1, 0, NULL, gather_run, NULL, .unaligned_inputs = 1u << 0},
    {"", "GatherElements", 11, 0, NULL, gather_elements_run, NULL},
    {"", "GatherND", 11, 0, NULL, gather_nd_run, NULL},
    {"", "Scatter", 9, 10, NULL, scatter_elements_run, NULL},
    {"", "ScatterElements", 11, 0, scatter_prepare, scatter_elements_run, NULL},
    {"", "ScatterND", 11, 0, scatter_prepare, scatter_nd_run, NULL},
    {"", "OneHot", 9, 0, NULL, onehot_run, NULL},
    {"", "Compress", 9, 0, NULL, compress_run, NULL},
    {"", "NonZero", 9, 0, NULL, nonzero_run, NULL},
    {"", "ReverseSequence", 10, 0, NULL, reverse_sequence_run, NULL},
    {0},
};
