/*
 * sort.c — operators that order or accumulate along an axis: TopK, Unique
 * and CumSum.
 *
 * Orderings follow ONNX Runtime: ties keep the smaller index first (TopK's
 * indices, Unique's first occurrences), NaN compares greater than every
 * number and equal to itself, and -0.0 equals 0.0. Comparisons go through one
 * typed comparator per dtype so 64-bit integers compare exactly.
 */
#include <string.h>

#include "dm.h"

/* ------------------------------------------------------------ comparators */

typedef int (*elem_cmp)(const void *a, const void *b);

#define CMP_INT(name, T)                         \
  static int name(const void *a, const void *b) { \
    T x, y;                                      \
    memcpy(&x, a, sizeof x);                     \
    memcpy(&y, b, sizeof y);                     \
    return (x > y) - (x < y);                    \
  }
CMP_INT(cmp_i8, int8_t)
CMP_INT(cmp_i16, int16_t)
CMP_INT(cmp_i32, int32_t)
CMP_INT(cmp_i64, int64_t)
CMP_INT(cmp_u8, uint8_t)
CMP_INT(cmp_u16, uint16_t)
CMP_INT(cmp_u32, uint32_t)
CMP_INT(cmp_u64, uint64_t)

static int cmp_double(double x, double y) {
  bool nx = x != x, ny = y != y;
  if (nx || ny) return (int)nx - (int)ny;
  return (x > y) - (x < y);
}

static int cmp_f32(const void *a, const void *b) {
  float x, y;
  memcpy(&x, a, 4);
  memcpy(&y, b, 4);
  return cmp_double(x, y);
}

static int cmp_f64(const void *a, const void *b) {
  double x, y;
  memcpy(&x, a, 8);
  memcpy(&y, b, 8);
  return cmp_double(x, y);
}

static int cmp_f16(const void *a, const void *b) {
  uint16_t x, y;
  memcpy(&x, a, 2);
  memcpy(&y, b, 2);
  return cmp_double(dm_f16_to_f32(x), dm_f16_to_f32(y));
}

static int cmp_bf16(const void *a, const void *b) {
  uint16_t x, y;
  memcpy(&x, a, 2);
  memcpy(&y, b, 2);
  return cmp_double(dm_bf16_to_f32(x), dm_bf16_to_f32(y));
}

static elem_cmp comparator(int32_t dtype) {
  switch (dtype) {
  case TOLK_FLOAT: return cmp_f32;
  case TOLK_DOUBLE: return cmp_f64;
  case TOLK_FLOAT16: return cmp_f16;
  case TOLK_BFLOAT16: return cmp_bf16;
  case TOLK_INT8: return cmp_i8;
  case TOLK_INT16: return cmp_i16;
  case TOLK_INT32: return cmp_i32;
  case TOLK_INT64: return cmp_i64;
  case TOLK_UINT8: case TOLK_BOOL: return cmp_u8;
  case TOLK_UINT16: return cmp_u16;
  case TOLK_UINT32: return cmp_u32;
  case TOLK_UINT64: return cmp_u64;
  default: return NULL;
  }
}

/* ------------------------------------------------------ index merge sort */

/* Orders item indices: before(ctx, a, b) says whether a sorts before b. */
struct order {
  bool (*before)(const struct order *o, int64_t a, int64_t b);
  const char *vals; /* TopK: the axis gathered contiguously */
  size_t es;
  elem_cmp cmp;
  bool largest;
  /* Unique: items are slices of outer x inner elements, n apart */
  int64_t outer, inner, n;
};

/* Stable bottom-up merge sort of idx[0..n) using tmp[0..n). */
static void merge_sort(const struct order *o, int64_t *idx, int64_t *tmp, int64_t n) {
  int64_t *a = idx, *b = tmp;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      /* take from the right run only when strictly before: stability */
      while (i < mid && j < hi) b[k++] = o->before(o, a[j], a[i]) ? a[j++] : a[i++];
      while (i < mid) b[k++] = a[i++];
      while (j < hi) b[k++] = a[j++];
    }
    int64_t *t = a;
    a = b;
    b = t;
  }
  if (a != idx) memcpy(idx, a, sizeof(int64_t) * (size_t)n);
}

/* ------------------------------------------------------------------- TopK */

static bool topk_before(const struct order *o, int64_t a, int64_t b) {
  int r = o->cmp(o->vals + (size_t)a * o->es, o->vals + (size_t)b * o->es);
  if (r != 0) return o->largest ? r > 0 : r < 0;
  return a < b;
}

/* Keeps the k best of n in a heap whose root is the worst kept, then sorts
 * them: O(n log k) for the common small k. */
static void topk_heap(const struct order *o, int64_t n, int64_t k, int64_t *h, int64_t *tmp) {
  int64_t size = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t pos;
    if (size < k) { /* sift up */
      pos = size++;
      while (pos > 0) {
        int64_t parent = (pos - 1) / 2;
        if (!o->before(o, h[parent], i)) break;
        h[pos] = h[parent];
        pos = parent;
      }
      h[pos] = i;
      continue;
    }
    if (!o->before(o, i, h[0])) continue;
    pos = 0; /* replace the root, sift down */
    for (;;) {
      int64_t l = 2 * pos + 1, r = l + 1, worst = l;
      if (l >= size) break;
      if (r < size && o->before(o, h[l], h[r])) worst = r;
      if (!o->before(o, i, h[worst])) break;
      h[pos] = h[worst];
      pos = worst;
    }
    h[pos] = i;
  }
  merge_sort(o, h, tmp, size);
}

static tolk_status topk_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  char sb[96];
  size_t es;
  int axis;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = dm_axis(c, ir_attr_int(c->node, "axis", -1), x->rank, "axis", &axis);
  if (st) return st;
  elem_cmp cmp = comparator(x->dtype);
  if (!cmp || x->dtype == TOLK_BOOL)
    return op_fail(c, TOLK_ERR_TYPE, "dtype %s is not supported", tolk_dtype_name((tolk_dtype)x->dtype));
  int64_t k;
  if (c->opset >= 10) {
    const struct tensor *kt = op_in(c, 1);
    if (!kt) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 (K) is required");
    if ((st = dm_read_int_scalar(c, kt, "input 1 (K)", &k))) return st;
  } else {
    k = ir_attr_int(c->node, "k", -1);
  }
  int64_t n = x->dims[axis];
  if (k < 0 || k > n)
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "k = %lld is out of range for axis %d of input 0 %s",
                   (long long)k, axis, shape_str(x, sb, sizeof sb));
  bool largest = c->opset < 11 || ir_attr_int(c->node, "largest", 1) != 0;
  int64_t dims[IR_MAX_RANK], outer = 1, inner = 1;
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = k;
  for (int i = 0; i < axis; i++) outer *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  struct tensor *ov, *oi;
  if ((st = dm_output(c, 0, x->dtype, x->rank, dims, &ov))) return st;
  if ((st = dm_output(c, 1, TOLK_INT64, x->rank, dims, &oi))) return st;
  if (ov->numel == 0) return TOLK_OK;
  char *vals = op_scratch(c, (size_t)n * es);
  int64_t *idx = op_scratch(c, sizeof(int64_t) * (size_t)n * 2);
  if (!vals || !idx) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  struct order o = {topk_before, vals, es, cmp, largest, 0, 0, 0};
  const char *src = x->data;
  char *yv = ov->data;
  int64_t *yi = oi->data;
  bool heap = k * 8 < n;
  for (int64_t a = 0; a < outer; a++) {
    for (int64_t i = 0; i < inner; i++) {
      /* gather the axis contiguously so comparisons read sequential memory */
      for (int64_t t = 0; t < n; t++)
        memcpy(vals + (size_t)t * es, src + (size_t)((a * n + t) * inner + i) * es, es);
      if (heap) {
        topk_heap(&o, n, k, idx, idx + n);
      } else {
        for (int64_t t = 0; t < n; t++) idx[t] = t;
        merge_sort(&o, idx, idx + n, n);
      }
      for (int64_t t = 0; t < k; t++) {
        size_t p = (size_t)((a * k + t) * inner + i);
        memcpy(yv + p * es, vals + (size_t)idx[t] * es, es);
        yi[p] = idx[t];
      }
    }
  }
  return TOLK_OK;
}

/* ----------------------------------------------------------------- Unique */

/* Item a vs item b, lexicographically over their elements in row-major
 * order. */
static int unique_cmp(const struct order *o, int64_t a, int64_t b) {
  for (int64_t p = 0; p < o->outer; p++) {
    const char *ra = o->vals + (size_t)((p * o->n + a) * o->inner) * o->es;
    const char *rb = o->vals + (size_t)((p * o->n + b) * o->inner) * o->es;
    for (int64_t q = 0; q < o->inner; q++) {
      int r = o->cmp(ra + (size_t)q * o->es, rb + (size_t)q * o->es);
      if (r) return r;
    }
  }
  return 0;
}

static bool unique_before(const struct order *o, int64_t a, int64_t b) {
  return unique_cmp(o, a, b) < 0;
}

static bool by_value(const struct order *o, int64_t a, int64_t b) {
  (void)o;
  return a < b;
}

static tolk_status unique_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  size_t es;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (st) return st;
  elem_cmp cmp = comparator(x->dtype);
  if (!cmp)
    return op_fail(c, TOLK_ERR_TYPE, "dtype %s is not supported", tolk_dtype_name((tolk_dtype)x->dtype));
  bool sorted = ir_attr_int(c->node, "sorted", 1) != 0;
  const struct ir_attr *aa = ir_node_attr(c->node, "axis");
  int axis = -1;
  int64_t outer = 1, n = x->numel, inner = 1;
  if (aa) {
    if ((st = dm_axis(c, aa->i, x->rank, "axis", &axis))) return st;
    n = x->dims[axis];
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  }
  size_t nn = (size_t)(n > 0 ? n : 1);
  int64_t *perm = op_scratch(c, sizeof(int64_t) * nn * 4);
  if (!perm) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  int64_t *tmp = perm + nn, *first = tmp + nn, *group = first + nn;
  struct order o = {unique_before, x->data, es, cmp, false, outer, inner, n};
  if (outer * inner == 0) n = n > 0 ? 1 : 0; /* empty items are all equal */
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  merge_sort(&o, perm, tmp, n);
  /* group[item] = its group in sorted order; first[g] = smallest index */
  int64_t u = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || unique_cmp(&o, perm[i - 1], perm[i]) != 0) first[u++] = perm[i];
    group[perm[i]] = u - 1;
  }
  /* rank[g]: output position of group g (sorted: g itself; else by first
   * occurrence). tmp is free again and holds it. */
  int64_t *rank = tmp;
  if (sorted) {
    for (int64_t g = 0; g < u; g++) rank[g] = g;
  } else {
    struct order byv = {by_value, NULL, 0, NULL, false, 0, 0, 0};
    int64_t *ord = perm; /* perm is no longer needed */
    for (int64_t g = 0; g < u; g++) ord[g] = first[g];
    merge_sort(&byv, ord, rank, u);
    /* map a first-occurrence index back to its group */
    for (int64_t p = 0; p < u; p++) rank[group[ord[p]]] = p;
  }
  int64_t ydims[IR_MAX_RANK];
  int yr = 1;
  if (aa) {
    yr = x->rank;
    memcpy(ydims, x->dims, sizeof ydims);
    ydims[axis] = u;
  } else {
    ydims[0] = u;
  }
  int64_t nitems = aa ? x->dims[axis] : x->numel;
  struct tensor *y, *yi, *yinv, *yc;
  if ((st = dm_output(c, 0, x->dtype, yr, ydims, &y))) return st;
  if ((st = dm_output(c, 1, TOLK_INT64, 1, &u, &yi))) return st;
  if ((st = dm_output(c, 2, TOLK_INT64, 1, &nitems, &yinv))) return st;
  if ((st = dm_output(c, 3, TOLK_INT64, 1, &u, &yc))) return st;
  int64_t *pi = yi->data, *pinv = yinv->data, *pc = yc->data;
  for (int64_t g = 0; g < u; g++) {
    pi[rank[g]] = first[g];
    pc[rank[g]] = 0;
  }
  for (int64_t i = 0; i < nitems; i++) {
    int64_t g = i < n ? group[i] : group[0];
    pinv[i] = rank[g];
    pc[rank[g]]++;
  }
  size_t row = (size_t)inner * es;
  for (int64_t p = 0; p < outer && row > 0; p++)
    for (int64_t g = 0; g < u; g++)
      memcpy((char *)y->data + (size_t)(p * u + rank[g]) * row,
             (const char *)x->data + (size_t)(p * n + first[g]) * row, row);
  return TOLK_OK;
}

/* ----------------------------------------------------------------- CumSum */

/* y along the axis: running sums of rows of `inner` elements. Signed
 * integers wrap through their unsigned type instead of overflowing. */
#define CUMSUM(T, UT)                                                          \
  do {                                                                         \
    const T *xs = xp;                                                          \
    T *ys = yp;                                                                \
    for (int64_t a = 0; a < outer; a++) {                                      \
      for (int64_t t = 0; t < n; t++) {                                        \
        int64_t tt = reverse ? n - 1 - t : t;                                 \
        int64_t prev = t == 0 ? tt : reverse ? tt + 1 : tt - 1;                \
        T *yr = ys + (a * n + tt) * inner;                                     \
        const T *xr = xs + (a * n + (exclusive ? prev : tt)) * inner;          \
        const T *yprev = ys + (a * n + prev) * inner;                          \
        bool has_x = !exclusive || t > 0;                                      \
        for (int64_t i = 0; i < inner; i++) {                                  \
          T acc = t > 0 ? yprev[i] : (T)0;                                     \
          yr[i] = has_x ? (T)((UT)acc + (UT)xr[i]) : acc;                      \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  } while (0)

static tolk_status cumsum_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *at = op_in(c, 1);
  if (!at) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 (axis) is required");
  int64_t av;
  int axis;
  tolk_status st = dm_read_int_scalar(c, at, "input 1 (axis)", &av);
  if (!st) st = dm_axis(c, av, x->rank, "axis", &axis);
  if (st) return st;
  bool exclusive = ir_attr_int(c->node, "exclusive", 0) != 0;
  bool reverse = ir_attr_int(c->node, "reverse", 0) != 0;
  int64_t outer = 1, n = x->dims[axis], inner = 1;
  for (int i = 0; i < axis; i++) outer *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, x->dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  const void *xp = x->data;
  void *yp = o->data;
  float *fx = NULL, *fy = NULL;
  bool half = x->dtype == TOLK_FLOAT16 || x->dtype == TOLK_BFLOAT16;
  if (half) { /* accumulate in float, round once at the end */
    fx = op_scratch(c, sizeof(float) * (size_t)x->numel * 2);
    if (!fx) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
    fy = fx + x->numel;
    for (int64_t i = 0; i < x->numel; i++) fx[i] = (float)dm_get_f64(x->dtype, x->data, i);
    xp = fx;
    yp = fy;
  }
  switch (half ? TOLK_FLOAT : x->dtype) {
  case TOLK_FLOAT: CUMSUM(float, float); break;
  case TOLK_DOUBLE: CUMSUM(double, double); break;
  case TOLK_INT32: CUMSUM(int32_t, uint32_t); break;
  case TOLK_INT64: CUMSUM(int64_t, uint64_t); break;
  case TOLK_UINT32: CUMSUM(uint32_t, uint32_t); break;
  case TOLK_UINT64: CUMSUM(uint64_t, uint64_t); break;
  default:
    return op_fail(c, TOLK_ERR_TYPE, "dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)x->dtype));
  }
  if (half)
    for (int64_t i = 0; i < x->numel; i++) dm_set_f64(x->dtype, o->data, i, fy[i]);
  return TOLK_OK;
}

const struct op_def tolk_ops_sort[] = {
    {"", "TopK", 1, 0, NULL, topk_run, NULL},
    {"", "Unique", 11, 0, NULL, unique_run, NULL},
    {"", "CumSum", 11, 0, NULL, cumsum_run, NULL},
    {0},
};
