/*
 * broadcast.c — numpy broadcasting: output shapes, per-input strides, and the
 * collapsed run iteration described in broadcast.h.
 */
#include "broadcast.h"

#include <stdio.h>
#include <string.h>

bool bcast_shape(int n, const struct bcast_shape *shapes, int *rank, int64_t *dims) {
  int r = 0;
  for (int k = 0; k < n; k++) {
    if (shapes[k].rank < 0 || shapes[k].rank > IR_MAX_RANK) return false;
    if (shapes[k].rank > r) r = shapes[k].rank;
  }
  for (int i = 0; i < r; i++) dims[i] = 1;
  for (int k = 0; k < n; k++) {
    int off = r - shapes[k].rank;
    for (int j = 0; j < shapes[k].rank; j++) {
      int64_t d = shapes[k].dims[j], *o = &dims[off + j];
      if (d < 0) return false;
      if (d == *o || d == 1) continue;
      if (*o != 1) return false;
      *o = d;
    }
  }
  *rank = r;
  return true;
}

/* Strides of every input against the output shape in b, then the collapse. */
static bool build(struct bcast *b, int n, const struct bcast_shape *shapes) {
  int64_t str[BCAST_MAX_IN][IR_MAX_RANK];
  b->n_in = n;
  b->numel = 1;
  for (int i = 0; i < b->rank; i++) {
    if (b->dims[i] < 0 || !tolk_mul_i64(b->numel, b->dims[i], &b->numel)) return false;
  }
  for (int k = 0; k < n; k++) {
    int r = shapes[k].rank;
    if (r < 0 || r > b->rank) return false;
    int off = b->rank - r;
    int64_t s = 1;
    for (int i = b->rank - 1; i >= 0; i--) {
      if (i < off) {
        str[k][i] = 0;
        continue;
      }
      int64_t d = shapes[k].dims[i - off];
      if (d == b->dims[i]) str[k][i] = d == 1 ? 0 : s;
      else if (d == 1) str[k][i] = 0;
      else return false;
      s *= d; /* no overflow: bounded by the output's numel, or d is 0 */
    }
  }
  /* Collapse from the innermost dim outwards: drop size-1 dims; merge a dim
   * into the one inside it when every input's stride continues across. */
  int64_t cd[IR_MAX_RANK], cs[BCAST_MAX_IN][IR_MAX_RANK];
  int nd = 0;
  for (int i = b->rank - 1; i >= 0; i--) {
    if (b->dims[i] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < n && merge; k++)
      merge = str[k][i] == cs[k][nd - 1] * cd[nd - 1];
    if (merge) {
      cd[nd - 1] *= b->dims[i];
      continue;
    }
    cd[nd] = b->dims[i];
    for (int k = 0; k < n; k++) cs[k][nd] = str[k][i];
    nd++;
  }
  if (nd == 0) { /* scalar output */
    cd[0] = 1;
    for (int k = 0; k < n; k++) cs[k][0] = 0;
    nd = 1;
  }
  /* Reverse into outermost-first order. */
  b->nd = nd;
  for (int d = 0; d < nd; d++) {
    b->it_dims[d] = cd[nd - 1 - d];
    for (int k = 0; k < n; k++) b->it_strides[k][d] = cs[k][nd - 1 - d];
  }
  for (int k = 0; k < n; k++) b->inner[k] = b->it_strides[k][nd - 1];
  return true;
}

bool bcast_init(struct bcast *b, int n, const struct bcast_shape *shapes) {
  if (n < 1 || n > BCAST_MAX_IN) return false;
  if (!bcast_shape(n, shapes, &b->rank, b->dims)) return false;
  return build(b, n, shapes);
}

bool bcast_init_tensors(struct bcast *b, int n, const struct tensor *const *in) {
  struct bcast_shape s[BCAST_MAX_IN];
  if (n < 1 || n > BCAST_MAX_IN) return false;
  for (int k = 0; k < n; k++) s[k] = (struct bcast_shape){in[k]->rank, in[k]->dims};
  return bcast_init(b, n, s);
}

bool bcast_init_to(struct bcast *b, int rank, const int64_t *dims, int n,
                   const struct bcast_shape *shapes) {
  if (n < 1 || n > BCAST_MAX_IN || rank < 0 || rank > IR_MAX_RANK) return false;
  b->rank = rank;
  if (rank) memcpy(b->dims, dims, (size_t)rank * sizeof *dims);
  return build(b, n, shapes);
}

/* Appends "<sep><v>" (v < 0: just sep) to buf at *used, keeping it
 * NUL-terminated and truncating. */
static void append(char *buf, size_t size, size_t *used, const char *sep, long long v) {
  if (*used + 1 >= size) return;
  int w = v < 0 ? snprintf(buf + *used, size - *used, "%s", sep)
                : snprintf(buf + *used, size - *used, "%s%lld", sep, v);
  if (w < 0) return;
  *used += (size_t)w < size - *used ? (size_t)w : size - *used - 1;
}

const char *bcast_shapes_str(int n, const struct tensor *const *in, char *buf, size_t size) {
  size_t used = 0;
  if (!size) return buf;
  buf[0] = '\0';
  for (int k = 0; k < n; k++) {
    append(buf, size, &used, k == 0 ? "[" : k == n - 1 ? " and [" : ", [", -1);
    for (int i = 0; in[k] && i < in[k]->rank; i++)
      append(buf, size, &used, i ? ", " : "", (long long)in[k]->dims[i]);
    append(buf, size, &used, "]", -1);
  }
  return buf;
}

void bcast_iter_seek(const struct bcast *b, struct bcast_iter *it, int64_t pos) {
  it->pos = it->run_start = pos;
  for (int k = 0; k < b->n_in; k++) it->off[k] = 0;
  int64_t p = pos;
  for (int d = b->nd - 1; d >= 0; d--) {
    int64_t n = b->it_dims[d];
    it->idx[d] = n ? p % n : 0;
    p = n ? p / n : 0;
    for (int k = 0; k < b->n_in; k++) it->off[k] += it->idx[d] * b->it_strides[k][d];
  }
  /* pos == numel wraps to all-zero coordinates; next() then returns 0. */
}

int64_t bcast_iter_next(const struct bcast *b, struct bcast_iter *it, int64_t end,
                        int64_t *off) {
  if (it->pos >= end) return 0;
  int last = b->nd - 1, n = b->n_in;
  int64_t len = b->it_dims[last] - it->idx[last];
  if (len > end - it->pos) len = end - it->pos;
  for (int k = 0; k < n; k++) off[k] = it->off[k];
  it->run_start = it->pos;
  it->pos += len;
  it->idx[last] += len;
  if (it->idx[last] < b->it_dims[last]) {
    for (int k = 0; k < n; k++) it->off[k] += len * b->inner[k];
    return len;
  }
  /* The inner dim is done: back to its start, carry into the outer dims. */
  for (int k = 0; k < n; k++) it->off[k] -= (it->idx[last] - len) * b->inner[k];
  it->idx[last] = 0;
  for (int d = last - 1; d >= 0; d--) {
    it->idx[d]++;
    for (int k = 0; k < n; k++) it->off[k] += b->it_strides[k][d];
    if (it->idx[d] < b->it_dims[d]) break;
    for (int k = 0; k < n; k++) it->off[k] -= b->it_dims[d] * b->it_strides[k][d];
    it->idx[d] = 0;
  }
  return len;
}

int64_t bcast_offset(const struct bcast *b, int k, int64_t pos) {
  int64_t off = 0;
  for (int d = b->nd - 1; d >= 0; d--) {
    int64_t n = b->it_dims[d];
    if (!n) return 0;
    off += (pos % n) * b->it_strides[k][d];
    pos /= n;
  }
  return off;
}
