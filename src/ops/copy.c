/*
 * copy.c — operators that reorder or replicate elements without computing on
 * them: Transpose, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace,
 * SpaceToDepth and Trilu.
 *
 * Most reduce to one dm_strided() copy: the kernel describes its output as a
 * walk over the input with per-dim strides (a transposed, reversed, repeated
 * or broadcast view) and the engine merges contiguous dims into memcpy rows
 * and splits large copies over the pool. Everything works on the element
 * size, so all fixed-size dtypes share the code.
 */
#include <string.h>

#include "dm.h"

/* -------------------------------------------------------------- Transpose */

/* perm attribute (default: reversed dims), checked to be a permutation. */
static tolk_status transpose_perm(struct op_ctx *c, int rank, int *perm) {
  int64_t p[DM_MAX_RANK], n;
  tolk_status st = dm_attr_ints(c->node, "perm", p, DM_MAX_RANK, &n, c->err);
  if (st) return st;
  if (n < 0) {
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    return TOLK_OK;
  }
  if (n != rank)
    return op_fail(c, TOLK_ERR_SHAPE, "perm has %lld entries for input rank %d", (long long)n,
                   rank);
  bool seen[IR_MAX_RANK] = {false};
  for (int i = 0; i < rank; i++) {
    if (p[i] < 0 || p[i] >= rank || seen[p[i]])
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "perm is not a permutation of 0..%d", rank - 1);
    seen[p[i]] = true;
    perm[i] = (int)p[i];
  }
  return TOLK_OK;
}

static tolk_status transpose_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  size_t es;
  int perm[IR_MAX_RANK];
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = transpose_perm(c, x->rank, perm);
  if (st) return st;
  int64_t in_st[IR_MAX_RANK], dims[IR_MAX_RANK], src_st[IR_MAX_RANK];
  dm_dense_strides(x->rank, x->dims, in_st);
  for (int i = 0; i < x->rank; i++) {
    dims[i] = x->dims[perm[i]];
    src_st[i] = in_st[perm[i]];
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, dims, &o))) return st;
  struct dm_copy p;
  dm_plan_dense_dst(&p, x->rank, dims, src_st);
  dm_strided(c, &p, o->data, x->data, es);
  return TOLK_OK;
}

/* ----------------------------------------------------------------- Concat */

static tolk_status concat_run(struct op_ctx *c) {
  const struct tensor *x0 = op_in(c, 0);
  char sb[96], sb2[96];
  if (!x0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 0 is required");
  const struct ir_attr *aa = ir_node_attr(c->node, "axis");
  if (!aa) return op_fail(c, TOLK_ERR_INVALID_MODEL, "attribute 'axis' is required");
  size_t es;
  int axis;
  tolk_status st = dm_need_esize(c, x0, "input 0", &es);
  if (!st) st = dm_axis(c, aa->i, x0->rank, "axis", &axis);
  if (st) return st;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, x0->dims, sizeof dims);
  dims[axis] = 0;
  for (size_t i = 0; i < c->n_in; i++) {
    const struct tensor *x = op_in(c, i);
    if (!x) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input %zu is missing", i);
    if (x->dtype != x0->dtype)
      return op_fail(c, TOLK_ERR_TYPE, "input %zu is %s, input 0 is %s", i,
                     tolk_dtype_name((tolk_dtype)x->dtype),
                     tolk_dtype_name((tolk_dtype)x0->dtype));
    bool ok = x->rank == x0->rank;
    for (int k = 0; ok && k < x->rank; k++) ok = k == axis || x->dims[k] == x0->dims[k];
    if (!ok)
      return op_fail(c, TOLK_ERR_SHAPE, "input %zu %s does not match input 0 %s off axis %d", i,
                     shape_str(x, sb, sizeof sb), shape_str(x0, sb2, sizeof sb2), axis);
    dims[axis] += x->dims[axis];
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x0->dtype, x0->rank, dims, &o))) return st;
  int64_t out_st[IR_MAX_RANK], off = 0;
  dm_dense_strides(o->rank, o->dims, out_st);
  for (size_t i = 0; i < c->n_in; i++) {
    const struct tensor *x = op_in(c, i);
    if (x->numel > 0) {
      struct dm_copy p;
      p.rank = x->rank;
      memcpy(p.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
      memcpy(p.dst_st, out_st, sizeof(int64_t) * (size_t)x->rank);
      dm_dense_strides(x->rank, x->dims, p.src_st);
      dm_strided(c, &p, (char *)o->data + (size_t)(off * out_st[axis]) * es, x->data, es);
    }
    off += x->dims[axis];
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------------ Split */

static tolk_status split_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  size_t es;
  int axis;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = dm_axis(c, ir_attr_int(c->node, "axis", 0), x->rank, "axis", &axis);
  if (st) return st;
  int64_t n_out = (int64_t)c->n_out, dim = x->dims[axis], nsplit = -1;
  int64_t *split = op_scratch(c, sizeof(int64_t) * (size_t)(n_out > 0 ? n_out : 1));
  if (!split) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  if (c->opset >= 13) {
    const struct tensor *s = op_in(c, 1);
    if (s) st = dm_read_ints(c, s, "input 1 (split)", split, n_out, &nsplit);
  } else {
    st = dm_attr_ints(c->node, "split", split, n_out, &nsplit, c->err);
  }
  if (st) return st;
  if (nsplit >= 0) {
    if (nsplit != n_out)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "split has %lld entries for %lld outputs",
                     (long long)nsplit, (long long)n_out);
    int64_t sum = 0;
    for (int64_t i = 0; i < n_out; i++) {
      if (split[i] < 0 || split[i] > dim)
        return op_fail(c, TOLK_ERR_SHAPE, "split[%lld] = %lld is out of range", (long long)i,
                       (long long)split[i]);
      sum += split[i];
    }
    if (sum != dim)
      return op_fail(c, TOLK_ERR_SHAPE, "splits sum to %lld but axis %d has %lld", (long long)sum,
                     axis, (long long)dim);
  } else {
    int64_t num = ir_attr_int(c->node, "num_outputs", n_out);
    if (num != n_out)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "num_outputs %lld but the node has %lld outputs",
                     (long long)num, (long long)n_out);
    if (n_out < 1) return op_fail(c, TOLK_ERR_INVALID_MODEL, "no outputs");
    /* opset 18's num_outputs allows a smaller last chunk; before, parts are equal */
    bool uneven_ok = c->opset >= 18 && ir_node_attr(c->node, "num_outputs");
    if (dim % n_out != 0 && !uneven_ok)
      return op_fail(c, TOLK_ERR_SHAPE, "axis %d of size %lld does not split into %lld equal parts",
                     axis, (long long)dim, (long long)n_out);
    int64_t chunk = (dim + n_out - 1) / n_out, left = dim;
    for (int64_t i = 0; i < n_out; i++) {
      split[i] = chunk < left ? chunk : left;
      left -= split[i];
    }
  }
  int64_t in_st[IR_MAX_RANK], off = 0;
  dm_dense_strides(x->rank, x->dims, in_st);
  for (int64_t i = 0; i < n_out; i++) {
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = split[i];
    struct tensor *o;
    if ((st = dm_output(c, (size_t)i, x->dtype, x->rank, dims, &o))) return st;
    if (o->numel > 0) {
      struct dm_copy p;
      dm_plan_dense_dst(&p, x->rank, dims, in_st);
      dm_strided(c, &p, o->data, (const char *)x->data + (size_t)(off * in_st[axis]) * es, es);
    }
    off += split[i];
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------------ Slice */

/* Element count of a slice from `start` towards `end` (exclusive) by `step`,
 * in unsigned arithmetic so no step (INT64_MIN included) overflows. */
static int64_t slice_count(int64_t start, int64_t end, int64_t step) {
  if (step > 0)
    return end > start ? (int64_t)(((uint64_t)end - (uint64_t)start - 1) / (uint64_t)step) + 1 : 0;
  uint64_t mag = (uint64_t)(-(step + 1)) + 1;
  return start > end ? (int64_t)(((uint64_t)start - (uint64_t)end - 1) / mag) + 1 : 0;
}

static tolk_status slice_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  size_t es;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (st) return st;
  int64_t starts[DM_MAX_RANK], ends[DM_MAX_RANK], axes[DM_MAX_RANK], steps[DM_MAX_RANK];
  int64_t ns, ne, na = -1, nst = -1;
  if (c->opset >= 10) {
    const struct tensor *ts = op_in(c, 1), *te = op_in(c, 2), *ta = op_in(c, 3),
                        *tp = op_in(c, 4);
    if (!ts || !te) return op_fail(c, TOLK_ERR_INVALID_MODEL, "starts and ends are required");
    if ((st = dm_read_ints(c, ts, "input 1 (starts)", starts, DM_MAX_RANK, &ns))) return st;
    if ((st = dm_read_ints(c, te, "input 2 (ends)", ends, DM_MAX_RANK, &ne))) return st;
    if (ta && (st = dm_read_ints(c, ta, "input 3 (axes)", axes, DM_MAX_RANK, &na))) return st;
    if (tp && (st = dm_read_ints(c, tp, "input 4 (steps)", steps, DM_MAX_RANK, &nst))) return st;
  } else {
    if ((st = dm_attr_ints(c->node, "starts", starts, DM_MAX_RANK, &ns, c->err))) return st;
    if ((st = dm_attr_ints(c->node, "ends", ends, DM_MAX_RANK, &ne, c->err))) return st;
    if ((st = dm_attr_ints(c->node, "axes", axes, DM_MAX_RANK, &na, c->err))) return st;
    if (ns < 0 || ne < 0)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "attributes starts and ends are required");
  }
  if (ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
    return op_fail(c, TOLK_ERR_INVALID_MODEL,
                   "starts, ends, axes and steps differ in length (%lld, %lld, %lld, %lld)",
                   (long long)ns, (long long)ne, (long long)na, (long long)nst);
  int64_t lo[IR_MAX_RANK], step[IR_MAX_RANK], dims[IR_MAX_RANK];
  bool seen[IR_MAX_RANK] = {false};
  for (int i = 0; i < x->rank; i++) {
    lo[i] = 0;
    step[i] = 1;
    dims[i] = x->dims[i];
  }
  for (int64_t k = 0; k < ns; k++) {
    int a;
    if ((st = dm_axis(c, na >= 0 ? axes[k] : k, x->rank, "axes value", &a))) return st;
    if (seen[a]) return op_fail(c, TOLK_ERR_INVALID_MODEL, "axis %d is repeated", a);
    seen[a] = true;
    int64_t d = x->dims[a], s = nst >= 0 ? steps[k] : 1, b = starts[k], e = ends[k];
    if (s == 0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "steps[%lld] is 0", (long long)k);
    /* negative positions count from the end; INT64_MIN + d cannot overflow */
    if (b < 0) b += d;
    if (e < 0) e += d;
    if (s > 0) {
      b = b < 0 ? 0 : b > d ? d : b;
      e = e < 0 ? 0 : e > d ? d : e;
    } else {
      b = b < 0 ? 0 : b > d - 1 ? d - 1 : b;
      e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
    }
    dims[a] = d == 0 ? 0 : slice_count(b, e, s);
    lo[a] = b;
    /* a step only matters between two elements, and then |step| < d, so
     * step * stride below cannot overflow */
    step[a] = dims[a] > 1 ? s : 1;
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  int64_t in_st[IR_MAX_RANK], src_st[IR_MAX_RANK], base = 0;
  dm_dense_strides(x->rank, x->dims, in_st);
  for (int i = 0; i < x->rank; i++) {
    base += lo[i] * in_st[i];
    src_st[i] = step[i] * in_st[i];
  }
  struct dm_copy p;
  dm_plan_dense_dst(&p, x->rank, dims, src_st);
  dm_strided(c, &p, o->data, (const char *)x->data + (size_t)base * es, es);
  return TOLK_OK;
}

/* ----------------------------------------------------------------- Expand */

static tolk_status expand_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *shape = op_in(c, 1);
  char sb[96];
  size_t es;
  int64_t want[IR_MAX_RANK], n;
  if (!shape) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 (shape) is required");
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = dm_read_ints(c, shape, "input 1 (shape)", want, IR_MAX_RANK, &n);
  if (st) return st;
  int r = x->rank > (int)n ? x->rank : (int)n;
  int64_t dims[IR_MAX_RANK], in_st[IR_MAX_RANK], src_st[IR_MAX_RANK];
  dm_dense_strides(x->rank, x->dims, in_st);
  for (int i = 0; i < r; i++) {
    int xi = i - (r - x->rank), si = i - (r - (int)n);
    int64_t a = xi >= 0 ? x->dims[xi] : 1, b = si >= 0 ? want[si] : 1;
    if (b < 0)
      return op_fail(c, TOLK_ERR_SHAPE, "shape[%d] = %lld is negative", si, (long long)b);
    if (a != b && a != 1 && b != 1)
      return op_fail(c, TOLK_ERR_SHAPE, "input 0 %s cannot be expanded to the shape given: dim %d is %lld vs %lld",
                     shape_str(x, sb, sizeof sb), i, (long long)a, (long long)b);
    dims[i] = a == 1 ? b : a;
    src_st[i] = (xi >= 0 && a != 1) ? in_st[xi] : 0;
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, r, dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  struct dm_copy p;
  dm_plan_dense_dst(&p, r, dims, src_st);
  dm_strided(c, &p, o->data, x->data, es);
  return TOLK_OK;
}

/* ------------------------------------------------------------------- Tile */

static tolk_status tile_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *rep = op_in(c, 1);
  size_t es;
  int64_t reps[IR_MAX_RANK], n;
  if (!rep) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 (repeats) is required");
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = dm_read_ints(c, rep, "input 1 (repeats)", reps, IR_MAX_RANK, &n);
  if (st) return st;
  if (n != x->rank)
    return op_fail(c, TOLK_ERR_SHAPE, "repeats has %lld entries for input rank %d", (long long)n,
                   x->rank);
  int64_t dims[IR_MAX_RANK], in_st[IR_MAX_RANK];
  dm_dense_strides(x->rank, x->dims, in_st);
  /* Output dim i, viewed as (repeat, dim), walks the input with stride
   * (0, in_st): the dense layout of those 2r dims is the output's own. */
  struct dm_copy p;
  p.rank = 2 * x->rank;
  for (int i = 0; i < x->rank; i++) {
    if (reps[i] < 0)
      return op_fail(c, TOLK_ERR_SHAPE, "repeats[%d] = %lld is negative", i, (long long)reps[i]);
    if (!tolk_mul_i64(reps[i], x->dims[i], &dims[i]))
      return op_fail(c, TOLK_ERR_LIMIT, "output dim %d overflows", i);
    p.dims[2 * i] = reps[i];
    p.dims[2 * i + 1] = x->dims[i];
    p.src_st[2 * i] = 0;
    p.src_st[2 * i + 1] = in_st[i];
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  dm_dense_strides(p.rank, p.dims, p.dst_st);
  dm_strided(c, &p, o->data, x->data, es);
  return TOLK_OK;
}

/* -------------------------------------------------- DepthToSpace, SpaceToDepth */

static tolk_status blocksize(struct op_ctx *c, const struct tensor *x, int64_t *b) {
  char sb[96];
  if (x->rank != 4)
    return op_fail(c, TOLK_ERR_SHAPE, "input 0 must be 4-D (NCHW), got %s",
                   shape_str(x, sb, sizeof sb));
  *b = ir_attr_int(c->node, "blocksize", 0);
  if (*b <= 0 || *b > (1 << 20))
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "blocksize %lld must be positive", (long long)*b);
  return TOLK_OK;
}

/* Writes output 0, shaped od[4], as x viewed densely as v6[6] and walked in
 * the order perm: the one copy behind DepthToSpace and SpaceToDepth. */
static tolk_status block_permute(struct op_ctx *c, const struct tensor *x, size_t es,
                                 const int64_t v6[6], const int perm[6], const int64_t od[4]) {
  int64_t s6[6], dims[6], src_st[6];
  dm_dense_strides(6, v6, s6);
  for (int i = 0; i < 6; i++) {
    dims[i] = v6[perm[i]];
    src_st[i] = s6[perm[i]];
  }
  struct dm_copy p;
  dm_plan_dense_dst(&p, 6, dims, src_st);
  struct tensor *o;
  tolk_status st = dm_output(c, 0, x->dtype, 4, od, &o);
  if (!st && o->numel) dm_strided(c, &p, o->data, x->data, es);
  return st;
}

static tolk_status depth_to_space_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  char sb[96];
  size_t es;
  int64_t b = 0;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = blocksize(c, x, &b);
  if (st) return st;
  const char *mode = c->opset >= 11 ? ir_attr_string(c->node, "mode", "DCR") : "DCR";
  bool crd = strcmp(mode, "CRD") == 0;
  if (!crd && strcmp(mode, "DCR") != 0)
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "mode '%s' is not DCR or CRD", mode);
  int64_t n = x->dims[0], ch = x->dims[1], h = x->dims[2], w = x->dims[3];
  if (ch % (b * b) != 0)
    return op_fail(c, TOLK_ERR_SHAPE, "channels of input 0 %s do not divide by blocksize² %lld",
                   shape_str(x, sb, sizeof sb), (long long)(b * b));
  int64_t co = ch / (b * b);
  /* the input viewed as 6-D: DCR [n, b, b, co, h, w], CRD [n, co, b, b, h, w] */
  int64_t v6[6];
  if (crd) {
    int64_t d[6] = {n, co, b, b, h, w};
    memcpy(v6, d, sizeof v6);
  } else {
    int64_t d[6] = {n, b, b, co, h, w};
    memcpy(v6, d, sizeof v6);
  }
  /* output walked as [n, co, h, b1, w, b2] */
  static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crdp[6] = {0, 1, 4, 2, 5, 3};
  int64_t od[4] = {n, co, h * b, w * b};
  return block_permute(c, x, es, v6, crd ? crdp : dcr, od);
}

static tolk_status space_to_depth_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  char sb[96];
  size_t es;
  int64_t b = 0;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = blocksize(c, x, &b);
  if (st) return st;
  int64_t n = x->dims[0], ch = x->dims[1], h = x->dims[2], w = x->dims[3];
  if (h % b != 0 || w % b != 0)
    return op_fail(c, TOLK_ERR_SHAPE, "height and width of input 0 %s do not divide by blocksize %lld",
                   shape_str(x, sb, sizeof sb), (long long)b);
  /* input viewed as [n, ch, h/b, b, w/b, b], written as [n, b, b, ch, h/b, w/b] */
  int64_t v6[6] = {n, ch, h / b, b, w / b, b};
  static const int perm[6] = {0, 3, 5, 1, 2, 4};
  int64_t od[4] = {n, ch * b * b, h / b, w / b};
  return block_permute(c, x, es, v6, perm, od);
}

/* ------------------------------------------------------------------ Trilu */

static tolk_status trilu_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *kt = op_in(c, 1);
  char sb[96];
  size_t es;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (st) return st;
  if (x->rank < 2)
    return op_fail(c, TOLK_ERR_SHAPE, "input 0 must have rank >= 2, got %s",
                   shape_str(x, sb, sizeof sb));
  int64_t k = 0;
  if (kt && (st = dm_read_int_scalar(c, kt, "input 1 (k)", &k))) return st;
  bool upper = ir_attr_int(c->node, "upper", 1) != 0;
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, x->rank, x->dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  dm_memcpy(c, o->data, x->data, (size_t)x->numel * es);
  int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  int64_t mats = x->numel / (rows * cols);
  /* clamp k so that i + k (+ 1) stays in range whatever k was */
  if (k > cols) k = cols;
  if (k < -rows - 1) k = -rows - 1;
  char *base = o->data;
  for (int64_t m = 0; m < mats; m++) {
    for (int64_t i = 0; i < rows; i++) {
      char *row = base + (size_t)((m * rows + i) * cols) * es;
      /* upper keeps j >= i + k, lower keeps j <= i + k */
      int64_t edge = upper ? i + k : i + k + 1;
      edge = edge < 0 ? 0 : edge > cols ? cols : edge;
      if (upper)
        memset(row, 0, (size_t)edge * es);
      else
        memset(row + (size_t)edge * es, 0, (size_t)(cols - edge) * es);
    }
  }
  return TOLK_OK;
}

/* -------------------------------------------------------------------- Pad */

enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

static tolk_status pad_mode(const struct ir_node *node, int64_t opset, enum pad_mode *m,
                            tolk_error *err) {
  const char *s = ir_attr_string(node, "mode", "constant");
  if (strcmp(s, "constant") == 0) *m = PAD_CONSTANT;
  else if (strcmp(s, "reflect") == 0) *m = PAD_REFLECT;
  else if (strcmp(s, "edge") == 0) *m = PAD_EDGE;
  else if (strcmp(s, "wrap") == 0 && opset >= 19) *m = PAD_WRAP;
  else return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "unknown pad mode '%s'", s);
  return TOLK_OK;
}

static tolk_status pad_prepare(const struct ir_node *node, int64_t opset, void **state,
                               tolk_error *err) {
  enum pad_mode m = PAD_CONSTANT;
  *state = NULL;
  return pad_mode(node, opset, &m, err);
}

/* Source index along one dim for output position i, or -1 for the constant. */
static int64_t pad_source(enum pad_mode m, int64_t i, int64_t pre, int64_t d) {
  int64_t j = i - pre;
  if (j >= 0 && j < d) return j;
  switch (m) {
  case PAD_CONSTANT: return -1;
  case PAD_EDGE: return j < 0 ? 0 : d - 1;
  case PAD_WRAP: return ((j % d) + d) % d;
  case PAD_REFLECT: {
    if (d == 1) return 0;
    int64_t period = 2 * (d - 1), r = ((j % period) + period) % period;
    return r < d ? r : period - r;
  }
  }
  return -1;
}

struct pad_job {
  int rank;
  int64_t out_dims[IR_MAX_RANK], in_st[IR_MAX_RANK];
  const int64_t *map[IR_MAX_RANK]; /* per dim: out index -> source index or -1 */
  int64_t lo, hi, pre_last;        /* last dim: [lo, hi) copies contiguously */
  const char *src;
  char *dst;
  size_t es;
  unsigned char value[16]; /* the constant, as one element */
};

static void pad_rows(void *arg, int64_t begin, int64_t end) {
  const struct pad_job *j = arg;
  int last = j->rank - 1;
  int64_t w = j->out_dims[last];
  size_t es = j->es;
  for (int64_t row = begin; row < end; row++) {
    char *d = j->dst + (size_t)(row * w) * es;
    int64_t r = row, off = 0;
    bool constant = false;
    for (int k = last - 1; k >= 0; k--) {
      int64_t s = j->map[k][r % j->out_dims[k]];
      r /= j->out_dims[k];
      if (s < 0) constant = true;
      else off += s * j->in_st[k];
    }
    if (constant) {
      dm_fill(NULL, d, j->value, es, w);
      continue;
    }
    const char *s = j->src + (size_t)off * es;
    const int64_t *m = j->map[last];
    for (int64_t i = 0; i < j->lo; i++) {
      if (m[i] < 0) memcpy(d + (size_t)i * es, j->value, es);
      else memcpy(d + (size_t)i * es, s + (size_t)m[i] * es, es);
    }
    if (j->hi > j->lo)
      memcpy(d + (size_t)j->lo * es, s + (size_t)(j->lo - j->pre_last) * es,
             (size_t)(j->hi - j->lo) * es);
    for (int64_t i = j->hi > j->lo ? j->hi : j->lo; i < w; i++) {
      if (m[i] < 0) memcpy(d + (size_t)i * es, j->value, es);
      else memcpy(d + (size_t)i * es, s + (size_t)m[i] * es, es);
    }
  }
}

static tolk_status pad_run(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0);
  size_t es;
  enum pad_mode mode = PAD_CONSTANT;
  tolk_status st = dm_need_esize(c, x, "input 0", &es);
  if (!st) st = pad_mode(c->node, c->opset, &mode, c->err);
  if (st) return st;
  if (es > 16) return op_fail(c, TOLK_ERR_UNSUPPORTED, "element size %zu", es);
  int r = x->rank;
  int64_t pads[2 * IR_MAX_RANK], np, axes[IR_MAX_RANK], na = -1;
  struct pad_job j;
  memset(&j, 0, sizeof j);
  if (c->opset >= 11) {
    const struct tensor *tp = op_in(c, 1), *tv = op_in(c, 2), *ta = op_in(c, 3);
    if (!tp) return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 (pads) is required");
    if ((st = dm_read_ints(c, tp, "input 1 (pads)", pads, 2 * IR_MAX_RANK, &np))) return st;
    if (c->opset >= 18 && ta &&
        (st = dm_read_ints(c, ta, "input 3 (axes)", axes, IR_MAX_RANK, &na)))
      return st;
    if (tv && tv->numel > 0) {
      if (tv->dtype != x->dtype)
        return op_fail(c, TOLK_ERR_TYPE, "constant_value is %s, input 0 is %s",
                       tolk_dtype_name((tolk_dtype)tv->dtype), tolk_dtype_name((tolk_dtype)x->dtype));
      memcpy(j.value, tv->data, es);
    }
  } else {
    if ((st = dm_attr_ints(c->node, "pads", pads, 2 * IR_MAX_RANK, &np, c->err))) return st;
    if (np < 0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "attribute 'pads' is required");
    double v = ir_attr_float(c->node, "value", 0.0f);
    if (dm_is_numeric(x->dtype)) dm_set_f64(x->dtype, j.value, 0, v);
  }
  /* per-dim (before, after) pads */
  int64_t pre[IR_MAX_RANK] = {0}, post[IR_MAX_RANK] = {0};
  if (na >= 0) {
    if (np != 2 * na)
      return op_fail(c, TOLK_ERR_SHAPE, "pads has %lld values for %lld axes", (long long)np,
                     (long long)na);
    bool seen[IR_MAX_RANK] = {false};
    for (int64_t k = 0; k < na; k++) {
      int a;
      if ((st = dm_axis(c, axes[k], r, "axes value", &a))) return st;
      if (seen[a]) return op_fail(c, TOLK_ERR_INVALID_MODEL, "axis %d is repeated", a);
      seen[a] = true;
      pre[a] = pads[k];
      post[a] = pads[k + na];
    }
  } else {
    if (np != 2 * r)
      return op_fail(c, TOLK_ERR_SHAPE, "pads has %lld values for input rank %d", (long long)np, r);
    for (int k = 0; k < r; k++) {
      pre[k] = pads[k];
      post[k] = pads[k + r];
    }
  }
  int64_t dims[IR_MAX_RANK], total = 0;
  for (int k = 0; k < r; k++) {
    int64_t d = x->dims[k];
    /* pads beyond ±2^40 cannot describe a tensor that fits in memory */
    if (pre[k] < -d || post[k] < -d || pre[k] > ((int64_t)1 << 40) ||
        post[k] > ((int64_t)1 << 40) || d + pre[k] + post[k] < 0)
      return op_fail(c, TOLK_ERR_SHAPE, "pads (%lld, %lld) are out of range for axis %d of size %lld",
                     (long long)pre[k], (long long)post[k], k, (long long)d);
    dims[k] = d + pre[k] + post[k];
    if (mode != PAD_CONSTANT && d == 0 && dims[k] > 0)
      return op_fail(c, TOLK_ERR_SHAPE, "cannot pad empty axis %d in a non-constant mode", k);
    total += dims[k];
  }
  struct tensor *o;
  if ((st = dm_output(c, 0, x->dtype, r, dims, &o))) return st;
  if (o->numel == 0) return TOLK_OK;
  if (r == 0) {
    memcpy(o->data, x->data, es);
    return TOLK_OK;
  }
  int64_t *maps = op_scratch(c, sizeof(int64_t) * (size_t)total);
  if (!maps) return c->err && c->err->status ? c->err->status : TOLK_ERR_NO_MEMORY;
  j.rank = r;
  j.es = es;
  j.src = x->data;
  j.dst = o->data;
  memcpy(j.out_dims, dims, sizeof dims);
  dm_dense_strides(r, x->dims, j.in_st);
  int64_t *m = maps;
  for (int k = 0; k < r; k++) {
    for (int64_t i = 0; i < dims[k]; i++) m[i] = pad_source(mode, i, pre[k], x->dims[k]);
    j.map[k] = m;
    m += dims[k];
  }
  int64_t w = dims[r - 1];
  j.pre_last = pre[r - 1];
  j.lo = pre[r - 1] < 0 ? 0 : pre[r - 1];
  j.hi = pre[r - 1] + x->dims[r - 1];
  if (j.hi > w) j.hi = w;
  if (j.lo > w) j.lo = w;
  int64_t rows = o->numel / w;
  int64_t grain = (int64_t)(((size_t)64 << 10) / ((size_t)w * es + 1)) + 1;
  if ((size_t)o->numel * es >= ((size_t)1 << 20))
    op_parallel_for(c, rows, grain, pad_rows, &j);
  else
    pad_rows(&j, 0, rows);
  return TOLK_OK;
}

/* ------------------------------------------------ session-time attribute checks */

/* perm must be a permutation of 0..n-1 (the rank is checked at run time). */
static tolk_status transpose_prepare(const struct ir_node *node, int64_t opset, void **state,
                                     tolk_error *err) {
  int64_t p[DM_MAX_RANK], n;
  bool seen[DM_MAX_RANK] = {false};
  (void)opset;
  *state = NULL;
  tolk_status st = dm_attr_ints(node, "perm", p, IR_MAX_RANK, &n, err);
  if (st) return st;
  for (int64_t i = 0; i < n; i++) {
    if (p[i] < 0 || p[i] >= n || seen[p[i]])
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "perm is not a permutation of 0..%lld",
                       (long long)(n - 1));
    seen[p[i]] = true;
  }
  return TOLK_OK;
}

static tolk_status concat_prepare(const struct ir_node *node, int64_t opset, void **state,
                                  tolk_error *err) {
  (void)opset;
  *state = NULL;
  const struct ir_attr *a = ir_node_attr(node, "axis");
  if (!a || a->type != IR_ATTR_INT)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "attribute 'axis' (an int) is required");
  return TOLK_OK;
}

static tolk_status blocks_prepare(const struct ir_node *node, int64_t opset, void **state,
                                  tolk_error *err) {
  *state = NULL;
  int64_t b = ir_attr_int(node, "blocksize", 0);
  if (b <= 0 || b > (1 << 20))
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "blocksize %lld must be positive", (long long)b);
  if (strcmp(node->op_type, "DepthToSpace") == 0 && opset >= 11) {
    const char *m = ir_attr_string(node, "mode", "DCR");
    if (strcmp(m, "DCR") != 0 && strcmp(m, "CRD") != 0)
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "mode '%s' is not DCR or CRD", m);
  }
  return TOLK_OK;
}

const struct op_def tolk_ops_copy[] = {
    {"", "Transpose", 1, 0, transpose_prepare, transpose_run, NULL},
    {"", "Concat", 4, 0, concat_prepare, concat_run, NULL},
    {"", "Split", 2, 0, NULL, split_run, NULL},
    {"", "Slice", 1, 0, NULL, slice_run, NULL},
    {"", "Expand", 8, 0, NULL, expand_run, NULL},
    {"", "Tile", 6, 0, NULL, tile_run, NULL},
    {"", "Pad", 2, 0, pad_prepare, pad_run, NULL},
    {"", "DepthToSpace", 1, 0, blocks_prepare, depth_to_space_run, NULL},
    {"", "SpaceToDepth", 1, 0, blocks_prepare, space_to_depth_run, NULL},
    {"", "Trilu", 14, 0, NULL, trilu_run, NULL},
    {0},
};
