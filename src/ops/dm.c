/*
 * dm.c — helpers shared by the data-movement operator families: integer
 * tensor readers, axis checks, numeric element access for the few operators
 * that compute (Range, OneHot, EyeLike, scatter reductions), 16-bit float
 * conversion, and the strided copy engine (see dm.h).
 */
#include "dm.h"

#include <math.h>
#include <string.h>

#include "../core/half.h"

size_t dm_esize(int32_t dtype) {
  if (dtype == TOLK_STRING) return 0;
  return op_dtype_size(dtype);
}

tolk_status dm_need_esize(struct op_ctx *c, const struct tensor *t, const char *what,
                          size_t *esize) {
  size_t es = dm_esize(t->dtype);
  if (es == 0)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "%s: dtype %s is not supported by this operator",
                   what, tolk_dtype_name((tolk_dtype)t->dtype));
  *esize = es;
  return TOLK_OK;
}

bool dm_is_index_dtype(int32_t dtype) { return dtype == TOLK_INT32 || dtype == TOLK_INT64; }

tolk_status dm_read_ints(struct op_ctx *c, const struct tensor *t, const char *what,
                         int64_t *out, int64_t cap, int64_t *n) {
  char sb[96];
  if (!dm_is_index_dtype(t->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "%s: expected int32 or int64, got %s", what,
                   tolk_dtype_name((tolk_dtype)t->dtype));
  if (t->rank > 1)
    return op_fail(c, TOLK_ERR_SHAPE, "%s: expected a 1-D tensor, got shape %s", what,
                   shape_str(t, sb, sizeof sb));
  if (t->numel > cap)
    return op_fail(c, TOLK_ERR_LIMIT, "%s: %lld values, at most %lld allowed", what,
                   (long long)t->numel, (long long)cap);
  for (int64_t i = 0; i < t->numel; i++) out[i] = dm_index_at(t, i);
  *n = t->numel;
  return TOLK_OK;
}

tolk_status dm_read_int_scalar(struct op_ctx *c, const struct tensor *t, const char *what,
                               int64_t *out) {
  char sb[96];
  if (!dm_is_index_dtype(t->dtype))
    return op_fail(c, TOLK_ERR_TYPE, "%s: expected int32 or int64, got %s", what,
                   tolk_dtype_name((tolk_dtype)t->dtype));
  if (t->numel != 1 || t->rank > 1)
    return op_fail(c, TOLK_ERR_SHAPE, "%s: expected a single value, got shape %s", what,
                   shape_str(t, sb, sizeof sb));
  *out = dm_index_at(t, 0);
  return TOLK_OK;
}

tolk_status dm_attr_ints(const struct ir_node *node, const char *name, int64_t *out,
                         int64_t cap, int64_t *n, tolk_error *err) {
  const struct ir_attr *a = ir_node_attr(node, name);
  *n = -1;
  if (!a) return TOLK_OK;
  if (a->type != IR_ATTR_INTS)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "attribute '%s' must be a list of ints",
                     name);
  if ((int64_t)a->n > cap)
    return tolk_fail(err, TOLK_ERR_LIMIT, "attribute '%s' has %zu values, at most %lld allowed",
                     name, a->n, (long long)cap);
  for (size_t i = 0; i < a->n; i++) out[i] = a->ints[i];
  *n = (int64_t)a->n;
  return TOLK_OK;
}

tolk_status dm_axis(struct op_ctx *c, int64_t axis, int rank, const char *what, int *out) {
  if (axis < -rank || axis >= rank)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "%s %lld is out of range for rank %d", what,
                   (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return TOLK_OK;
}

void dm_dense_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

/* ------------------------------------------------------------ 16-bit floats */

/* Thin wrappers over core/half.h, kept so the dm API is self-contained. */
float dm_f16_to_f32(uint16_t h) { return tolk_f16_to_f32(h); }
uint16_t dm_f32_to_f16(float f) { return tolk_f32_to_f16(f); }
float dm_bf16_to_f32(uint16_t h) { return tolk_bf16_to_f32(h); }
uint16_t dm_f32_to_bf16(float f) { return tolk_f32_to_bf16(f); }

/* ------------------------------------------------------- numeric elements */

bool dm_is_numeric(int32_t dtype) {
  switch (dtype) {
  case TOLK_FLOAT: case TOLK_DOUBLE: case TOLK_FLOAT16: case TOLK_BFLOAT16:
  case TOLK_INT8: case TOLK_INT16: case TOLK_INT32: case TOLK_INT64:
  case TOLK_UINT8: case TOLK_UINT16: case TOLK_UINT32: case TOLK_UINT64:
  case TOLK_BOOL:
    return true;
  default:
    return false;
  }
}

double dm_get_f64(int32_t dtype, const void *data, int64_t i) {
  switch (dtype) {
  case TOLK_FLOAT: return ((const float *)data)[i];
  case TOLK_DOUBLE: return ((const double *)data)[i];
  case TOLK_FLOAT16: return dm_f16_to_f32(((const uint16_t *)data)[i]);
  case TOLK_BFLOAT16: return dm_bf16_to_f32(((const uint16_t *)data)[i]);
  case TOLK_INT8: return ((const int8_t *)data)[i];
  case TOLK_INT16: return ((const int16_t *)data)[i];
  case TOLK_INT32: return ((const int32_t *)data)[i];
  case TOLK_INT64: return (double)((const int64_t *)data)[i];
  case TOLK_UINT8: return ((const uint8_t *)data)[i];
  case TOLK_UINT16: return ((const uint16_t *)data)[i];
  case TOLK_UINT32: return ((const uint32_t *)data)[i];
  case TOLK_UINT64: return (double)((const uint64_t *)data)[i];
  case TOLK_BOOL: return ((const uint8_t *)data)[i] ? 1.0 : 0.0;
  default: return 0.0;
  }
}

/* A C cast of an out-of-range double to an integer type is undefined; the
 * conversions below saturate instead (NaN becomes 0). */
static int64_t sat_i64(double v, double lo, double hi) {
  if (!(v == v)) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return (int64_t)hi;
  return (int64_t)v;
}

static uint64_t sat_u64(double v, double hi) {
  if (!(v == v) || v <= 0) return 0;
  if (v >= hi) return (uint64_t)hi;
  return (uint64_t)v;
}

void dm_set_f64(int32_t dtype, void *data, int64_t i, double v) {
  switch (dtype) {
  case TOLK_FLOAT: ((float *)data)[i] = (float)v; break;
  case TOLK_DOUBLE: ((double *)data)[i] = v; break;
  case TOLK_FLOAT16: ((uint16_t *)data)[i] = tolk_f64_to_f16(v); break;
  case TOLK_BFLOAT16: ((uint16_t *)data)[i] = tolk_f64_to_bf16(v); break;
  case TOLK_INT8: ((int8_t *)data)[i] = (int8_t)sat_i64(v, INT8_MIN, INT8_MAX); break;
  case TOLK_INT16: ((int16_t *)data)[i] = (int16_t)sat_i64(v, INT16_MIN, INT16_MAX); break;
  case TOLK_INT32: ((int32_t *)data)[i] = (int32_t)sat_i64(v, INT32_MIN, INT32_MAX); break;
  case TOLK_INT64:
    /* 2^63 is the first double past INT64_MAX */
    ((int64_t *)data)[i] = !(v == v) ? 0
                           : v >= 0x1p63 ? INT64_MAX
                           : v < -0x1p63 ? INT64_MIN
                                         : (int64_t)v;
    break;
  case TOLK_UINT8: ((uint8_t *)data)[i] = (uint8_t)sat_u64(v, UINT8_MAX); break;
  case TOLK_UINT16: ((uint16_t *)data)[i] = (uint16_t)sat_u64(v, UINT16_MAX); break;
  case TOLK_UINT32: ((uint32_t *)data)[i] = (uint32_t)sat_u64(v, UINT32_MAX); break;
  case TOLK_UINT64:
    ((uint64_t *)data)[i] = (!(v == v) || v <= 0) ? 0 : v >= 0x1p64 ? UINT64_MAX : (uint64_t)v;
    break;
  case TOLK_BOOL: ((uint8_t *)data)[i] = v != 0; break;
  default: break;
  }
}

/* ------------------------------------------------------------ bulk copies */

/* Below this many bytes a copy runs inline: a pool round trip costs more. */
#define DM_PAR_BYTES ((size_t)1 << 20)
#define DM_CHUNK_BYTES ((size_t)256 << 10)

struct memcpy_job {
  char *dst;
  const char *src;
  size_t n;
};

static void memcpy_range(void *arg, int64_t begin, int64_t end) {
  const struct memcpy_job *j = arg;
  size_t lo = (size_t)begin * DM_CHUNK_BYTES;
  size_t hi = (size_t)end * DM_CHUNK_BYTES;
  if (hi > j->n) hi = j->n;
  memcpy(j->dst + lo, j->src + lo, hi - lo);
}

void dm_memcpy(struct op_ctx *c, void *dst, const void *src, size_t n) {
  if (n == 0 || dst == src) return;
  if (n < DM_PAR_BYTES || !c) {
    memcpy(dst, src, n);
    return;
  }
  struct memcpy_job j = {dst, src, n};
  op_parallel_for(c, (int64_t)((n + DM_CHUNK_BYTES - 1) / DM_CHUNK_BYTES), 1, memcpy_range,
                  &j);
}

void dm_fill(struct op_ctx *c, void *dst, const void *elem, size_t esize, int64_t count) {
  (void)c;
  if (count <= 0) return;
  size_t total = (size_t)count * esize;
  bool zero = true;
  for (size_t b = 0; b < esize; b++) zero = zero && ((const uint8_t *)elem)[b] == 0;
  if (zero) {
    memset(dst, 0, total);
    return;
  }
  /* doubling copies: log2(count) memcpy calls */
  char *d = dst;
  memcpy(d, elem, esize);
  size_t done = esize;
  while (done < total) {
    size_t n = done < total - done ? done : total - done;
    memcpy(d + done, d, n);
    done += n;
  }
}

tolk_status dm_copy_reshaped(struct op_ctx *c, size_t out_i, const struct tensor *t,
                             int rank, const int64_t *dims) {
  size_t es;
  tolk_status st = dm_need_esize(c, t, "input 0", &es);
  if (st) return st;
  struct tensor *o;
  st = dm_output(c, out_i, t->dtype, rank, dims, &o);
  if (st) return st;
  if (o->numel != t->numel)
    return op_fail(c, TOLK_ERR_INTERNAL, "reshape copy: %lld elements into %lld",
                   (long long)t->numel, (long long)o->numel);
  dm_memcpy(c, o->data, t->data, (size_t)t->numel * es);
  return TOLK_OK;
}

/* ------------------------------------------------------ strided copy engine */

struct strided_job {
  int rank; /* >= 1; the last dim is the row */
  int64_t dims[DM_MAX_RANK];
  int64_t dst_st[DM_MAX_RANK], src_st[DM_MAX_RANK]; /* in bytes */
  char *dst;
  const char *src;
  size_t esize;
};

static inline void copy_elem(char *d, const char *s, size_t esize) {
  switch (esize) {
  case 1: *d = *s; break;
  case 2: memcpy(d, s, 2); break;
  case 4: memcpy(d, s, 4); break;
  case 8: memcpy(d, s, 8); break;
  case 16: memcpy(d, s, 16); break;
  default: memcpy(d, s, esize); break;
  }
}

static void copy_row(const struct strided_job *j, char *d, const char *s) {
  int last = j->rank - 1;
  int64_t n = j->dims[last];
  int64_t ds = j->dst_st[last], ss = j->src_st[last];
  size_t es = j->esize;
  if (ds == (int64_t)es && ss == (int64_t)es) {
    memcpy(d, s, (size_t)n * es);
    return;
  }
  if (ds == (int64_t)es && ss == 0) { /* broadcast one element along the row */
    dm_fill(NULL, d, s, es, n);
    return;
  }
  switch (es) {
  case 1:
    for (int64_t i = 0; i < n; i++) d[i * ds] = s[i * ss];
    break;
  case 2:
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 2);
    break;
  case 4:
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 4);
    break;
  case 8:
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, 8);
    break;
  default:
    for (int64_t i = 0; i < n; i++) copy_elem(d + i * ds, s + i * ss, es);
    break;
  }
}

static void strided_range(void *arg, int64_t begin, int64_t end) {
  const struct strided_job *j = arg;
  int outer = j->rank - 1;
  int64_t ctr[DM_MAX_RANK];
  int64_t doff = 0, soff = 0, r = begin;
  for (int k = outer - 1; k >= 0; k--) {
    ctr[k] = r % j->dims[k];
    r /= j->dims[k];
    doff += ctr[k] * j->dst_st[k];
    soff += ctr[k] * j->src_st[k];
  }
  for (int64_t row = begin; row < end; row++) {
    copy_row(j, j->dst + doff, j->src + soff);
    for (int k = outer - 1; k >= 0; k--) { /* odometer step */
      doff += j->dst_st[k];
      soff += j->src_st[k];
      if (++ctr[k] < j->dims[k]) break;
      doff -= ctr[k] * j->dst_st[k];
      soff -= ctr[k] * j->src_st[k];
      ctr[k] = 0;
    }
  }
}

/* A transposing copy: the output's row runs across the source (large source
 * stride) while another dim, k, is contiguous in the source. Walking rows
 * would touch a new source cache line per element; copying T x T tiles of
 * (k, last) reuses each line T times. 16 measured best of 8..64 on a
 * 2048x2048 float transpose (power-of-two strides: larger tiles thrash L1
 * sets). */
#define DM_TILE 16

struct tile_job {
  const struct strided_job *j;
  int k;                      /* the source-contiguous dim */
  int n_other;                /* dims other than k and the last */
  int other[DM_MAX_RANK];
  int64_t tiles_k;            /* tile rows per plane */
};

#define TILE_COPY(T)                                                             \
  for (int64_t a = a0; a < a1; a++)                                              \
    for (int64_t b = b0; b < b1; b++)                                            \
      memcpy(d + a * dk + b * (int64_t)sizeof(T), s + a * (int64_t)sizeof(T) + b * sl, sizeof(T))

static void tile_range(void *arg, int64_t begin, int64_t end) {
  const struct tile_job *t = arg;
  const struct strided_job *j = t->j;
  int last = j->rank - 1;
  int64_t nk = j->dims[t->k], nl = j->dims[last];
  int64_t dk = j->dst_st[t->k], sl = j->src_st[last];
  size_t es = j->esize;
  for (int64_t w = begin; w < end; w++) {
    int64_t plane = w / t->tiles_k, a0 = (w % t->tiles_k) * DM_TILE;
    int64_t a1 = a0 + DM_TILE < nk ? a0 + DM_TILE : nk;
    int64_t doff = 0, soff = 0;
    for (int q = t->n_other - 1; q >= 0; q--) {
      int k = t->other[q];
      int64_t i = plane % j->dims[k];
      plane /= j->dims[k];
      doff += i * j->dst_st[k];
      soff += i * j->src_st[k];
    }
    char *d = j->dst + doff;
    const char *s = j->src + soff;
    for (int64_t b0 = 0; b0 < nl; b0 += DM_TILE) {
      int64_t b1 = b0 + DM_TILE < nl ? b0 + DM_TILE : nl;
      switch (es) {
      case 1: TILE_COPY(uint8_t); break;
      case 2: TILE_COPY(uint16_t); break;
      case 4: TILE_COPY(uint32_t); break;
      case 8: TILE_COPY(uint64_t); break;
      default:
        for (int64_t a = a0; a < a1; a++)
          for (int64_t b = b0; b < b1; b++)
            copy_elem(d + a * dk + b * (int64_t)es, s + a * (int64_t)es + b * sl, es);
        break;
      }
    }
  }
}

/* Runs the copy as tiles when its shape calls for it; false otherwise. */
static bool tiled_transpose(struct op_ctx *c, const struct strided_job *j) {
  int last = j->rank - 1;
  int64_t es = (int64_t)j->esize;
  if (j->rank < 2 || j->dst_st[last] != es || j->src_st[last] == es || j->dims[last] < 8)
    return false;
  struct tile_job t;
  t.j = j;
  t.k = -1;
  for (int k = 0; k < last; k++)
    if (j->src_st[k] == es && j->dims[k] >= 8) t.k = k;
  if (t.k < 0) return false;
  t.n_other = 0;
  int64_t planes = 1;
  for (int k = 0; k < last; k++)
    if (k != t.k) {
      t.other[t.n_other++] = k;
      planes *= j->dims[k];
    }
  t.tiles_k = (j->dims[t.k] + DM_TILE - 1) / DM_TILE;
  int64_t work = planes * t.tiles_k;
  int64_t bytes = planes * j->dims[t.k] * j->dims[last] * es;
  if (c && bytes >= (int64_t)DM_PAR_BYTES && work > 1) {
    int64_t per = DM_TILE * j->dims[last] * es; /* bytes per work item */
    op_parallel_for(c, work, (int64_t)DM_CHUNK_BYTES / per + 1, tile_range, &t);
  } else {
    tile_range(&t, 0, work);
  }
  return true;
}

void dm_strided(struct op_ctx *c, const struct dm_copy *p, void *dst, const void *src,
                size_t esize) {
  struct strided_job j;
  j.rank = 0;
  j.dst = dst;
  j.src = src;
  j.esize = esize;
  /* Drop unit dims, then merge a dim into the one inside it whenever both
   * strides say the pair walks memory as one longer dim. Built outermost
   * first. */
  for (int k = 0; k < p->rank; k++) {
    if (p->dims[k] == 0) return;
    if (p->dims[k] == 1) continue;
    j.dims[j.rank] = p->dims[k];
    j.dst_st[j.rank] = p->dst_st[k] * (int64_t)esize;
    j.src_st[j.rank] = p->src_st[k] * (int64_t)esize;
    j.rank++;
  }
  int m = 0;
  for (int k = 0; k < j.rank; k++) {
    if (m > 0 && j.dst_st[m - 1] == j.dst_st[k] * j.dims[k] &&
        j.src_st[m - 1] == j.src_st[k] * j.dims[k]) {
      j.dims[m - 1] *= j.dims[k];
      j.dst_st[m - 1] = j.dst_st[k];
      j.src_st[m - 1] = j.src_st[k];
      continue;
    }
    j.dims[m] = j.dims[k];
    j.dst_st[m] = j.dst_st[k];
    j.src_st[m] = j.src_st[k];
    m++;
  }
  j.rank = m;
  if (j.rank == 0) { /* a single element */
    copy_elem(dst, src, esize);
    return;
  }
  if (tiled_transpose(c, &j)) return;
  int64_t rows = 1;
  for (int k = 0; k < j.rank - 1; k++) rows *= j.dims[k];
  int64_t row_bytes = j.dims[j.rank - 1] * (int64_t)esize;
  int64_t total = rows * row_bytes;
  if (c && total >= (int64_t)DM_PAR_BYTES && rows > 1) {
    int64_t grain = (int64_t)DM_CHUNK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    op_parallel_for(c, rows, grain > 0 ? grain : 1, strided_range, &j);
  } else {
    strided_range(&j, 0, rows);
  }
}

void dm_plan_dense_dst(struct dm_copy *p, int rank, const int64_t *dims,
                       const int64_t *src_st) {
  p->rank = rank;
  for (int k = 0; k < rank; k++) {
    p->dims[k] = dims[k];
    p->src_st[k] = src_st[k];
  }
  dm_dense_strides(rank, dims, p->dst_st);
}
