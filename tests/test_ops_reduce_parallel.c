/*
 * test_ops_reduce_parallel.c — the intra-op splits of the reduce, softmax,
 * norm, conv and pool families: each op runs on inputs large enough to be
 * split over a 4-thread session and must give the same result as on one
 * thread (bit for bit: every output is computed by one thread in the same
 * order; Conv within 1e-5, as the GEMM may split differently).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "ops_model.h"

static uint64_t rng = 0x510e527fade682d1ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

struct input {
  int rank;
  int64_t dims[4];
  float *data;
};

static struct input mk(int rank, const int64_t *dims) {
  struct input in = {.rank = rank};
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= in.dims[d] = dims[d];
  in.data = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) in.data[i] = frand();
  return in;
}

/* Attributes are applied by `attrs` on each build. */
typedef void (*attr_fn)(struct tm *m);

static void run_twice(const char *op, int opset, const struct input *ins, int n_in,
                      const int64_t *axes, int n_axes, attr_fn attrs, double tol) {
  tolk_tensor *res[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    struct tm m;
    tolk_error err = {0};
    tm_begin(&m, op, opset);
    m.threads = k ? 4 : 1;
    for (int i = 0; i < n_in; i++) tm_in(&m, TOLK_FLOAT, ins[i].rank, ins[i].dims, ins[i].data);
    if (n_axes) tm_in_ints(&m, n_axes, axes);
    if (attrs) attrs(&m);
    tm_out(&m, 1);
    tolk_status st = tm_run(&m, &err);
    CHECK_MSG(st == TOLK_OK, "%s: %s", op, err.message);
    res[k] = m.out[0];
    m.out[0] = NULL;
    tm_end(&m);
  }
  if (res[0] && res[1]) {
    int64_t n = tolk_tensor_numel(res[0]);
    CHECK(n == tolk_tensor_numel(res[1]));
    const float *a = tolk_tensor_data(res[0]), *b = tolk_tensor_data(res[1]);
    double md = 0;
    for (int64_t i = 0; i < n; i++) md = fmax(md, fabs((double)a[i] - b[i]));
    CHECK_MSG(md <= tol, "%s: 1 vs 4 threads differ by %g", op, md);
  }
  tolk_tensor_free(res[0]);
  tolk_tensor_free(res[1]);
}

static void keep0(struct tm *m) { tm_attr_int(m, "keepdims", 0); }
static void pool_attrs(struct tm *m) {
  tm_attr_ints(m, "kernel_shape", 2, (int64_t[]){3, 3});
  tm_attr_ints(m, "strides", 2, (int64_t[]){2, 2});
  tm_attr_ints(m, "pads", 4, (int64_t[]){1, 1, 1, 1});
}
static void conv_attrs(struct tm *m) { tm_attr_ints(m, "pads", 4, (int64_t[]){1, 1, 1, 1}); }

int main(void) {
  struct input rows = mk(2, (int64_t[]){256, 2048});
  struct input cols = mk(3, (int64_t[]){8, 512, 300});
  struct input img = mk(4, (int64_t[]){4, 16, 64, 64});
  struct input wt = mk(4, (int64_t[]){32, 16, 3, 3});
  struct input sc = mk(1, (int64_t[]){2048});
  /* Reductions: contiguous rows, columns, and a general pattern. */
  run_twice("ReduceSum", 13, &rows, 1, (int64_t[]){1}, 1, NULL, 0);
  run_twice("ReduceMean", 13, &cols, 1, (int64_t[]){1}, 1, keep0, 0);
  run_twice("ReduceLogSumExp", 18, &cols, 1, (int64_t[]){0, 2}, 2, NULL, 0);
  run_twice("ReduceMax", 18, &rows, 1, (int64_t[]){0}, 1, NULL, 0);
  run_twice("ArgMax", 13, &rows, 1, NULL, 0, NULL, 0);
  run_twice("Softmax", 13, &rows, 1, NULL, 0, NULL, 0);
  run_twice("LogSoftmax", 11, &cols, 1, NULL, 0, NULL, 0);
  struct input ln[2] = {rows, sc};
  run_twice("LayerNormalization", 17, ln, 2, NULL, 0, NULL, 0);
  run_twice("MaxPool", 12, &img, 1, NULL, 0, pool_attrs, 0);
  run_twice("AveragePool", 11, &img, 1, NULL, 0, pool_attrs, 0);
  run_twice("GlobalAveragePool", 1, &img, 1, NULL, 0, NULL, 0);
  struct input cv[2] = {img, wt};
  run_twice("Conv", 11, cv, 2, NULL, 0, conv_attrs, 1e-5);
  free(rows.data), free(cols.data), free(img.data), free(wt.data), free(sc.data);
  return tu_finish("test_ops_reduce_parallel");
}
