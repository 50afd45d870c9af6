/*
 * test_ops_elementwise_bcast.c — src/ops/broadcast.c against a naive
 * reference: for random compatible shapes (2 and 3 inputs, multi- and
 * unidirectional), every run the iterator hands out, started at random split
 * points, must list exactly the offsets the per-element index arithmetic
 * gives. Also checks the collapse on the cases the header promises and the
 * rejection of incompatible shapes.
 */
#include <stdint.h>
#include <string.h>

#include "ops/broadcast.h"
#include "testutil.h"

static int rnd(int n) { return (int)tu_below(n); }

/* Offset into an input of shape (r, d) for the output multi-index idx of rank R. */
static int64_t ref_offset(int R, const int64_t *idx, int r, const int64_t *d) {
  int64_t off = 0;
  for (int j = 0; j < r; j++) {
    int64_t i = d[j] == 1 ? 0 : idx[R - r + j];
    off = off * d[j] + i;
  }
  return off;
}

static void check_iteration(const struct bcast *b, int n, const struct bcast_shape *s) {
  /* Split [0, numel) at a few random points and walk each piece. */
  int64_t cuts[6] = {0};
  int nc = 1 + rnd(4);
  for (int i = 1; i < nc; i++) cuts[i] = b->numel ? (int64_t)(tu_next() % (uint64_t)b->numel) : 0;
  cuts[nc] = b->numel;
  for (int i = 1; i <= nc; i++)
    for (int j = i; j > 0 && cuts[j] < cuts[j - 1]; j--) {
      int64_t t = cuts[j];
      cuts[j] = cuts[j - 1];
      cuts[j - 1] = t;
    }
  int64_t covered = 0;
  int bad = 0;
  for (int c = 0; c < nc; c++) {
    struct bcast_iter it;
    int64_t off[BCAST_MAX_IN], len;
    bcast_iter_seek(b, &it, cuts[c]);
    int64_t expect_pos = cuts[c];
    while ((len = bcast_iter_next(b, &it, cuts[c + 1], off)) > 0) {
      if (it.run_start != expect_pos) bad++;
      for (int64_t e = 0; e < len; e++) {
        int64_t pos = it.run_start + e, idx[IR_MAX_RANK], p = pos;
        for (int d = b->rank - 1; d >= 0; d--) {
          idx[d] = p % b->dims[d];
          p /= b->dims[d];
        }
        for (int k = 0; k < n; k++) {
          int64_t want = ref_offset(b->rank, idx, s[k].rank, s[k].dims);
          if (off[k] + e * b->inner[k] != want) bad++;
          if (bcast_offset(b, k, pos) != want) bad++;
        }
      }
      expect_pos += len;
      covered += len;
    }
    if (expect_pos != cuts[c + 1]) bad++;
  }
  CHECK_MSG(bad == 0 && covered == b->numel, "%d bad offsets, covered %lld of %lld", bad,
            (long long)covered, (long long)b->numel);
  for (int k = 0; k < n; k++) CHECK(b->inner[k] == 0 || b->inner[k] == 1);
}

static void random_case(int n, bool uni) {
  int R = rnd(6);
  int64_t out[IR_MAX_RANK];
  for (int i = 0; i < R; i++) out[i] = rnd(8) == 0 ? 1 : 1 + rnd(5);
  if (rnd(20) == 0 && R) out[rnd(R)] = 0;
  int64_t dims[BCAST_MAX_IN][IR_MAX_RANK];
  struct bcast_shape s[BCAST_MAX_IN];
  for (int k = 0; k < n; k++) {
    int r = uni && k == 0 ? R : rnd(R + 1);
    for (int j = 0; j < r; j++) dims[k][j] = rnd(3) == 0 ? 1 : out[R - r + j];
    if (uni && k == 0) memcpy(dims[k], out, sizeof(int64_t) * (size_t)R);
    s[k] = (struct bcast_shape){r, dims[k]};
  }
  struct bcast b;
  bool ok = uni ? bcast_init_to(&b, R, out, n, s) : bcast_init(&b, n, s);
  CHECK(ok);
  if (!ok) return;
  if (!uni) {
    /* The output shape is the broadcast of the inputs (size-1 output dims
     * may stay 1 where no input has anything bigger). */
    int r2;
    int64_t d2[IR_MAX_RANK];
    CHECK(bcast_shape(n, s, &r2, d2) && r2 == b.rank &&
          memcmp(d2, b.dims, sizeof(int64_t) * (size_t)r2) == 0);
  }
  check_iteration(&b, n, s);
}

static struct bcast_shape sh(int r, const int64_t *d) { return (struct bcast_shape){r, d}; }

int main(void) {
  tu_seed(0x9e3779b97f4a7c15ull);
  for (int i = 0; i < 3000; i++) random_case(2 + rnd(2), false);
  for (int i = 0; i < 1000; i++) random_case(1 + rnd(3), true);

  /* The collapse cases broadcast.h promises. */
  struct bcast b;
  int64_t nchw[4] = {2, 3, 4, 5}, c11[3] = {3, 1, 1}, btd[3] = {2, 7, 16}, d[1] = {16};
  struct bcast_shape s2[2] = {sh(4, nchw), sh(4, nchw)};
  CHECK(bcast_init(&b, 2, s2) && b.nd == 1 && b.it_dims[0] == 120 && b.inner[0] == 1 &&
        b.inner[1] == 1);
  s2[1] = sh(0, NULL);
  CHECK(bcast_init(&b, 2, s2) && b.nd == 1 && b.it_dims[0] == 120 && b.inner[1] == 0);
  s2[1] = sh(3, c11);
  CHECK(bcast_init(&b, 2, s2) && b.nd == 3 && b.it_dims[2] == 20 && b.inner[1] == 0);
  struct bcast_shape s3[2] = {sh(3, btd), sh(1, d)};
  CHECK(bcast_init(&b, 2, s3) && b.nd == 2 && b.it_dims[0] == 14 && b.it_dims[1] == 16 &&
        b.it_strides[1][0] == 0);
  /* Scalar output. */
  struct bcast_shape s0[2] = {sh(0, NULL), sh(0, NULL)};
  CHECK(bcast_init(&b, 2, s0) && b.rank == 0 && b.numel == 1);
  struct bcast_iter it;
  int64_t off[BCAST_MAX_IN];
  bcast_iter_seek(&b, &it, 0);
  CHECK(bcast_iter_next(&b, &it, 1, off) == 1 && off[0] == 0 && off[1] == 0);
  CHECK(bcast_iter_next(&b, &it, 1, off) == 0);

  /* Incompatible shapes. */
  int64_t a23[2] = {2, 3}, a4[1] = {4}, a03[2] = {0, 3}, a13[2] = {1, 3}, a20[2] = {2, 0};
  struct bcast_shape bad[2] = {sh(2, a23), sh(1, a4)};
  CHECK(!bcast_init(&b, 2, bad));
  bad[1] = sh(2, a20);
  CHECK(!bcast_init(&b, 2, bad));
  struct bcast_shape zero[2] = {sh(2, a03), sh(2, a13)};
  CHECK(bcast_init(&b, 2, zero) && b.numel == 0 && b.dims[0] == 0);
  struct bcast_shape up[1] = {sh(2, a23)};
  CHECK(!bcast_init_to(&b, 1, a4, 1, up));   /* rank too high */
  CHECK(!bcast_init_to(&b, 2, a13, 1, up));  /* 2 cannot become 1 */
  CHECK(!bcast_init(&b, 0, up) && !bcast_init(&b, BCAST_MAX_IN + 1, up));

  /* Error text. */
  struct tensor t1 = {.rank = 2, .dims = {2, 3}}, t2 = {.rank = 1, .dims = {4}}, t0 = {.rank = 0};
  const struct tensor *ts[3] = {&t1, &t2, &t0};
  char buf[64];
  CHECK(strcmp(bcast_shapes_str(2, ts, buf, sizeof buf), "[2, 3] and [4]") == 0);
  CHECK(strcmp(bcast_shapes_str(3, ts, buf, sizeof buf), "[2, 3], [4] and []") == 0);
  CHECK(strlen(bcast_shapes_str(3, ts, buf, 8)) == 7);
  return tu_finish("test_ops_elementwise_bcast");
}
