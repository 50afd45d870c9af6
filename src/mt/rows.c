/*
 * rows.c — a batch tensor [rows, …] that rows leave and join in place: the
 * decoder state's source side (encoder mask, cross-attention keys/values)
 * and the caches of decoders run as written. A continuous batch changes its
 * rows every step; copying every tensor whole each time (as making a new
 * tensor of the kept rows did) cost a fifth of the service's time. Here
 * rows that stay where they are are not touched, a shrinking batch moves
 * its rows forward in place, joining rows go into room kept at the end, and
 * only a longer source (a wider source axis) re-lays the tensor out. A
 * tensor a run returned is taken over without a copy.
 */
#include <stdlib.h>
#include <string.h>

#include "mt.h"

static size_t row_bytes(const struct mt_rows *r) {
  const int64_t *d = tolk_tensor_dims(r->t);
  size_t b = tolk_dtype_size(tolk_tensor_dtype(r->t));
  for (int i = 1; i < tolk_tensor_rank(r->t); i++) b *= (size_t)d[i];
  return b;
}

/* r->t made anew over r->mem with `rows` rows and dims[1..] as given. */
static tolk_status rewrap(struct mt_rows *r, tolk_dtype dt, int rank, int64_t *dims, int64_t rows,
                          tolk_error *err) {
  dims[0] = rows;
  size_t bytes = tolk_dtype_size(dt);
  for (int i = 0; i < rank; i++) bytes *= (size_t)dims[i];
  tolk_tensor *t;
  tolk_status st = tolk_tensor_wrap(dt, rank, dims, r->mem, bytes, &t, err);
  if (st) return st;
  tolk_tensor_free(r->t);
  r->t = t;
  return TOLK_OK;
}

tolk_status mt_rows_adopt(struct mt_rows *r, tolk_tensor *t, tolk_error *err) {
  mt_rows_free(r);
  /* t's own buffer is used as it is (a decoder's new cache every step
   * costs no copy) until rows must be added. */
  r->own = t;
  r->mem = tolk_tensor_data(t);
  r->cap = tolk_tensor_dims(t)[0];
  int rank = tolk_tensor_rank(t);
  int64_t dims[TOLK_MAX_RANK];
  memcpy(dims, tolk_tensor_dims(t), (size_t)rank * sizeof *dims);
  tolk_status st = rewrap(r, tolk_tensor_dtype(t), rank, dims, dims[0], err);
  if (st) mt_rows_free(r);
  return st;
}

void mt_rows_free(struct mt_rows *r) {
  tolk_tensor_free(r->t);
  if (r->own) tolk_tensor_free(r->own);
  else free(r->mem);
  memset(r, 0, sizeof *r);
}

/* r->mem replaced by `m` (malloc'd), the adopted tensor let go. */
static void set_mem(struct mt_rows *r, void *m) {
  if (r->own) tolk_tensor_free(r->own);
  else free(r->mem);
  r->own = NULL;
  r->mem = m;
}

/* Room for `rows` rows (of row_bytes each), the held ones kept. */
static tolk_status reserve(struct mt_rows *r, int64_t rows, size_t rb, tolk_error *err) {
  if (rows <= r->cap) return TOLK_OK;
  int64_t cap = 2 * r->cap > rows ? 2 * r->cap : rows;
  size_t bytes;
  if (!tolk_mul_size((size_t)cap, rb, &bytes)) return tolk_fail(err, TOLK_ERR_LIMIT, "translator: batch too large");
  void *m;
  if (r->own) { /* the adopted tensor's buffer cannot grow: move out of it */
    if ((m = malloc(bytes ? bytes : 1))) memcpy(m, r->mem, (size_t)r->cap * rb);
    if (m) set_mem(r, m);
  } else if ((m = realloc(r->mem, bytes ? bytes : 1))) {
    r->mem = m;
  }
  if (!m) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  r->cap = cap;
  return TOLK_OK;
}

tolk_status mt_rows_select(struct mt_rows *r, const int32_t *keep, size_t n, tolk_error *err) {
  if (!r->t) return TOLK_OK;
  int rank = tolk_tensor_rank(r->t);
  int64_t dims[TOLK_MAX_RANK];
  memcpy(dims, tolk_tensor_dims(r->t), (size_t)rank * sizeof *dims);
  size_t rb = row_bytes(r), moving = 0;
  bool forward = true;
  for (size_t i = 0; i < n; i++) {
    forward &= keep[i] >= (int32_t)i && (i == 0 || keep[i] > keep[i - 1]);
    moving += keep[i] != (int32_t)i;
  }
  tolk_status st = reserve(r, (int64_t)n, rb, err);
  if (st) return st;
  char *m = r->mem;
  if (forward) {
    for (size_t i = 0; i < n; i++)
      if (keep[i] != (int32_t)i) memcpy(m + i * rb, m + (size_t)keep[i] * rb, rb);
  } else if (moving) {
    /* Rows may come from anywhere, repeated: stage the moving ones first. */
    char *tmp = malloc(moving * rb);
    if (!tmp) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (keep[i] != (int32_t)i) memcpy(tmp + k++ * rb, m + (size_t)keep[i] * rb, rb);
    k = 0;
    for (size_t i = 0; i < n; i++)
      if (keep[i] != (int32_t)i) memcpy(m + i * rb, tmp + k++ * rb, rb);
    free(tmp);
  }
  return rewrap(r, tolk_tensor_dtype(r->t), rank, dims, (int64_t)n, err);
}

/* Copies `rows` rows of x (source axis length have) to dst at source axis
 * length S (≥ have), zeros after each row's own. */
static void copy_widened(char *dst, const char *x, int64_t rows, const int64_t *dims, int rank, int axis,
                         int64_t have, int64_t S, size_t es) {
  int64_t outer = rows, inner = 1;
  for (int d = 1; d < axis; d++) outer *= dims[d];
  for (int d = axis + 1; d < rank; d++) inner *= dims[d];
  size_t run = (size_t)(have * inner) * es, pad = (size_t)((S - have) * inner) * es;
  for (int64_t o = 0; o < outer; o++) {
    memcpy(dst + (size_t)o * (run + pad), x + (size_t)o * run, run);
    memset(dst + (size_t)o * (run + pad) + run, 0, pad);
  }
}

tolk_status mt_rows_append(struct mt_rows *r, const tolk_tensor *x, int axis, tolk_error *err) {
  int rank = tolk_tensor_rank(r->t);
  int64_t dims[TOLK_MAX_RANK];
  memcpy(dims, tolk_tensor_dims(r->t), (size_t)rank * sizeof *dims);
  const int64_t *xd = tolk_tensor_dims(x);
  int64_t rows = dims[0], more = xd[0], S = dims[axis] > xd[axis] ? dims[axis] : xd[axis];
  size_t es = tolk_dtype_size(tolk_tensor_dtype(r->t));
  tolk_dtype dt = tolk_tensor_dtype(r->t);
  if (S > dims[axis]) {
    /* A longer source: every row widened into a new layout. */
    int64_t wd[TOLK_MAX_RANK];
    memcpy(wd, dims, (size_t)rank * sizeof *wd);
    wd[axis] = S;
    size_t rb = es, bytes;
    for (int d = 1; d < rank; d++) rb *= (size_t)wd[d];
    int64_t cap = r->cap > rows + more ? r->cap : rows + more;
    if (!tolk_mul_size((size_t)cap, rb, &bytes)) return tolk_fail(err, TOLK_ERR_LIMIT, "translator: batch too large");
    char *m = malloc(bytes ? bytes : 1);
    if (!m) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
    copy_widened(m, r->mem, rows, dims, rank, axis, dims[axis], S, es);
    set_mem(r, m);
    r->cap = cap;
    dims[axis] = S;
  }
  size_t rb = es; /* a row as laid out now */
  for (int d = 1; d < rank; d++) rb *= (size_t)dims[d];
  tolk_status st = reserve(r, rows + more, rb, err);
  if (st) return st;
  copy_widened((char *)r->mem + (size_t)rows * rb, tolk_tensor_data(x), more, xd, rank, axis, xd[axis], S, es);
  return rewrap(r, dt, rank, dims, rows + more, err);
}
