/*
 * test_ops_shape_big.c — the data-movement kernels on tensors large enough
 * (over 1 MiB) to take their parallel paths, run on a 4-thread session and
 * compared element by element with a plain per-element reference computed
 * here: Transpose, Slice with a negative step, Concat, Gather, Pad (reflect)
 * and Tile. Also Resize cases the backend data lacks: integer rounding
 * (half to even, as the reference's saturate_cast) and the input errors.
 */
#include <stdint.h>
#include <string.h>

#include "ops_model.h"
#include "testutil.h"

#define THREADS 4

static float *iota_f(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) p[i] = (float)i;
  return p;
}

/* Compares a float output with want[0..n) and its shape with dims. */
static void expect_f(const char *what, struct tmodel *m, int rank, const int64_t *dims, const float *want) {
  tolk_error err = {0};
  tolk_status st = tm_run(m, &err);
  CHECK_MSG(st == TOLK_OK, "%s: %s", what, err.message);
  if (st) return;
  const tolk_tensor *t = m->out[0];
  bool same = tolk_tensor_rank(t) == rank;
  int64_t n = 1;
  for (int i = 0; same && i < rank; i++) {
    same = tolk_tensor_dims(t)[i] == dims[i];
    n *= dims[i];
  }
  CHECK_MSG(same, "%s: shape differs", what);
  if (!same) return;
  const float *g = tolk_tensor_data(t);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (g[i] != want[i]) {
      if (first < 0) first = i;
      bad++;
    }
  CHECK_MSG(bad == 0, "%s: %lld of %lld differ (first at %lld)", what, (long long)bad, (long long)n,
            (long long)first);
}

static void test_transpose(void) {
  int64_t d[3] = {64, 96, 80}, n = 64 * 96 * 80;
  float *x = iota_f(n), *want = malloc(sizeof(float) * (size_t)n);
  /* perm (2, 0, 1): out[k][i][j] = x[i][j][k] */
  for (int64_t i = 0; i < d[0]; i++)
    for (int64_t j = 0; j < d[1]; j++)
      for (int64_t k = 0; k < d[2]; k++) want[(k * d[0] + i) * d[1] + j] = x[(i * d[1] + j) * d[2] + k];
  struct tmodel m;
  tm_begin(&m, "Transpose", 13);
  m.threads = THREADS;
  tm_in(&m, TOLK_FLOAT, 3, d, x);
  tm_attr_ints(&m, "perm", 3, (int64_t[]){2, 0, 1});
  tm_out(&m, 1);
  expect_f("transpose big", &m, 3, (int64_t[]){80, 64, 96}, want);
  tm_end(&m);
  free(x);
  free(want);
}

static void test_slice_concat(void) {
  int64_t d[2] = {700, 600}, n = 700 * 600;
  float *x = iota_f(n), *want = malloc(sizeof(float) * (size_t)n * 2);
  /* rows reversed with step -2, columns 550 down to 0 with step -1 ... */
  int64_t rows = 350, cols = 551;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) want[i * cols + j] = x[(699 - 2 * i) * 600 + (550 - j)];
  struct tmodel m;
  tm_begin(&m, "Slice", 13);
  m.threads = THREADS;
  tm_in(&m, TOLK_FLOAT, 2, d, x);
  tm_in_ints(&m, 2, (int64_t[]){-1, 550});
  tm_in_ints(&m, 2, (int64_t[]){INT64_MIN, -1000});
  tm_in_ints(&m, 2, (int64_t[]){0, 1});
  tm_in_ints(&m, 2, (int64_t[]){-2, -1});
  tm_out(&m, 1);
  expect_f("slice big", &m, 2, (int64_t[]){rows, cols}, want);
  tm_end(&m);

  /* concat along axis 1 of x and x */
  for (int64_t i = 0; i < 700; i++) {
    memcpy(want + i * 1200, x + i * 600, 600 * sizeof(float));
    memcpy(want + i * 1200 + 600, x + i * 600, 600 * sizeof(float));
  }
  tm_begin(&m, "Concat", 13);
  m.threads = THREADS;
  tm_in(&m, TOLK_FLOAT, 2, d, x);
  tm_in(&m, TOLK_FLOAT, 2, d, x);
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  expect_f("concat big", &m, 2, (int64_t[]){700, 1200}, want);
  tm_end(&m);
  free(x);
  free(want);
}

static void test_gather_tile_pad(void) {
  int64_t d[2] = {1000, 512}, n = 1000 * 512, ni = 900;
  float *x = iota_f(n), *want = malloc(sizeof(float) * (size_t)n * 4);
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)ni);
  for (int64_t t = 0; t < ni; t++) idx[t] = (t * 7919) % 2000 - 1000; /* negative half wraps */
  for (int64_t t = 0; t < ni; t++) {
    int64_t r = idx[t] < 0 ? idx[t] + 1000 : idx[t];
    memcpy(want + t * 512, x + r * 512, 512 * sizeof(float));
  }
  struct tmodel m;
  tm_begin(&m, "Gather", 13);
  m.threads = THREADS;
  tm_in(&m, TOLK_FLOAT, 2, d, x);
  tm_in_ints(&m, ni, idx);
  tm_out(&m, 1);
  expect_f("gather big", &m, 2, (int64_t[]){ni, 512}, want);
  tm_end(&m);

  /* tile (2, 2) */
  for (int64_t i = 0; i < 2000; i++)
    for (int64_t j = 0; j < 1024; j++) want[i * 1024 + j] = x[(i % 1000) * 512 + j % 512];
  tm_begin(&m, "Tile", 13);
  m.threads = THREADS;
  tm_in(&m, TOLK_FLOAT, 2, d, x);
  tm_in_ints(&m, 2, (int64_t[]){2, 2});
  tm_out(&m, 1);
  expect_f("tile big", &m, 2, (int64_t[]){2000, 1024}, want);
  tm_end(&m);

  /* reflect pad (3, 5) before and (4, 2) after */
  int64_t oh = 1007, ow = 519;
  for (int64_t i = 0; i < oh; i++)
    for (int64_t j = 0; j < ow; j++) {
      int64_t si = i - 3, sj = j - 5;
      si = si < 0 ? -si : si >= 1000 ? 2 * 999 - si : si;
      sj = sj < 0 ? -sj : sj >= 512 ? 2 * 511 - sj : sj;
      want[i * ow + j] = x[si * 512 + sj];
    }
  tm_begin(&m, "Pad", 13);
  m.threads = THREADS;
  tm_in(&m, TOLK_FLOAT, 2, d, x);
  tm_in_ints(&m, 4, (int64_t[]){3, 5, 4, 2});
  tm_attr_str(&m, "mode", "reflect");
  tm_out(&m, 1);
  expect_f("pad big", &m, 2, (int64_t[]){oh, ow}, want);
  tm_end(&m);
  free(idx);
  free(x);
  free(want);
}

static void test_resize(void) {
  /* linear, uint8: 0.5 and 1.5 round to even */
  struct tmodel m;
  tolk_error err = {0};
  tm_begin(&m, "Resize", 13);
  tm_in(&m, TOLK_UINT8, 4, (int64_t[]){1, 1, 1, 2}, (uint8_t[]){0, 2});
  tm_none(&m);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){4}, (float[]){1, 1, 1, 2});
  tm_attr_str(&m, "mode", "linear");
  tm_out(&m, 1);
  tolk_status st = tm_run(&m, &err);
  CHECK_MSG(st == TOLK_OK, "resize uint8: %s", err.message);
  if (!st) {
    const uint8_t *y = tolk_tensor_data(m.out[0]);
    CHECK(tolk_tensor_numel(m.out[0]) == 4);
    CHECK_MSG(y[0] == 0 && y[1] == 0 && y[2] == 2 && y[3] == 2, "%d %d %d %d", y[0], y[1], y[2], y[3]);
  }
  tm_end(&m);

  /* nearest on int64 is an exact gather */
  tm_begin(&m, "Resize", 13);
  tm_in(&m, TOLK_INT64, 2, (int64_t[]){1, 2}, (int64_t[]){INT64_MAX, INT64_MIN});
  tm_none(&m);
  tm_none(&m);
  tm_in_ints(&m, 2, (int64_t[]){1, 4});
  tm_out(&m, 1);
  st = tm_run(&m, &err);
  CHECK_MSG(st == TOLK_OK, "resize int64 nearest: %s", err.message);
  if (!st) {
    const int64_t *y = tolk_tensor_data(m.out[0]);
    CHECK(y[0] == INT64_MAX && y[1] == INT64_MAX && y[2] == INT64_MIN && y[3] == INT64_MIN);
  }
  tm_end(&m);

  tm_begin(&m, "Resize", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 2}, (float[]){1, 2});
  tm_none(&m);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, (float[]){1, 2});
  tm_in_ints(&m, 2, (int64_t[]){1, 4});
  tm_out(&m, 1);
  st = tm_run(&m, &err);
  CHECK_MSG(st == TOLK_ERR_INVALID_MODEL, "resize scales and sizes: %d %s", st, err.message);
  tm_end(&m);

  tm_begin(&m, "Resize", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 2}, (float[]){1, 2});
  tm_none(&m);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, (float[]){1, -2});
  tm_out(&m, 1);
  st = tm_run(&m, &err);
  CHECK_MSG(st == TOLK_ERR_INVALID_ARGUMENT, "resize negative scale: %d %s", st, err.message);
  tm_end(&m);

  tm_begin(&m, "Resize", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 2}, (float[]){1, 2});
  tm_none(&m);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, (float[]){1, 2});
  tm_attr_str(&m, "mode", "bicubic");
  tm_out(&m, 1);
  st = tm_run(&m, &err);
  CHECK_MSG(st == TOLK_ERR_INVALID_MODEL, "resize bad mode: %d %s", st, err.message);
  tm_end(&m);
}

int main(void) {
  test_transpose();
  test_slice_concat();
  test_gather_tile_pad();
  test_resize();
  return tu_finish("test_ops_shape_big");
}
