/*
 * test_ops_shape.c — the shape and copy operators (src/ops/shape.c,
 * src/ops/copy.c) on the cases the ONNX node tests do not reach: Slice's
 * clamping with INT64 extremes and negative steps, Reshape's 0/-1/allowzero,
 * Pad's reflect beyond one period, negative pads and wrap, Split's uneven
 * num_outputs, Trilu with extreme k, integer Range near overflow, and the
 * errors a bad shape or axis must give. Each case is a one-node model run
 * through the public session API (tests/ops_model.h).
 */
#include <stdint.h>
#include <string.h>

#include "ops_model.h"
#include "testutil.h"

/* Checks an output's dtype, shape and bytes. */
static const float x23[6] = {0, 1, 2, 3, 4, 5};
static const int64_t d23[2] = {2, 3};

/* Slice over x23 with the given inputs (axes/steps may be NULL). */
static void slice_case(const char *what, int64_t n, const int64_t *starts, const int64_t *ends,
                       const int64_t *axes, const int64_t *steps, int rank, const int64_t *dims,
                       const float *want) {
  struct tmodel m;
  tm_begin(&m, "Slice", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, n, starts);
  tm_in_ints(&m, n, ends);
  if (axes) tm_in_ints(&m, n, axes);
  else tm_none(&m);
  if (steps) tm_in_ints(&m, n, steps);
  tm_out(&m, 1);
  if (tm_run_ok(&m, what)) tm_expect(what, m.out[0], TOLK_FLOAT, rank, dims, want);
  tm_end(&m);
}

static void test_slice(void) {
  slice_case("reverse rows", 1, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){1},
             (int64_t[]){-1}, 2, (int64_t[]){2, 3}, (float[]){2, 1, 0, 5, 4, 3});
  slice_case("INT64_MAX end", 2, (int64_t[]){1, 1}, (int64_t[]){INT64_MAX, INT64_MAX}, NULL,
             NULL, 2, (int64_t[]){1, 2}, (float[]){4, 5});
  slice_case("huge step", 1, (int64_t[]){0}, (int64_t[]){3}, (int64_t[]){-1},
             (int64_t[]){INT64_MAX}, 2, (int64_t[]){2, 1}, (float[]){0, 3});
  slice_case("INT64_MIN step", 1, (int64_t[]){2}, (int64_t[]){INT64_MIN}, (int64_t[]){1},
             (int64_t[]){INT64_MIN}, 2, (int64_t[]){2, 1}, (float[]){2, 5});
  slice_case("start past end", 1, (int64_t[]){5}, (int64_t[]){7}, (int64_t[]){1}, NULL, 2,
             (int64_t[]){2, 0}, NULL);
  slice_case("negative step from past end", 1, (int64_t[]){100}, (int64_t[]){0},
             (int64_t[]){1}, (int64_t[]){-2}, 2, (int64_t[]){2, 1}, (float[]){2, 5});
  slice_case("both axes, step 2", 2, (int64_t[]){-1, 0}, (int64_t[]){-3, 3}, (int64_t[]){0, 1},
             (int64_t[]){-1, 2}, 2, (int64_t[]){2, 2}, (float[]){3, 5, 0, 2});

  struct tmodel m;
  tm_begin(&m, "Slice", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, 1, (int64_t[]){0});
  tm_in_ints(&m, 1, (int64_t[]){2});
  tm_in_ints(&m, 1, (int64_t[]){1});
  tm_in_ints(&m, 1, (int64_t[]){0});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_MODEL, "step 0");
  tm_end(&m);

  tm_begin(&m, "Slice", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, 2, (int64_t[]){0, 0});
  tm_in_ints(&m, 2, (int64_t[]){2, 2});
  tm_in_ints(&m, 2, (int64_t[]){1, -1});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_MODEL, "repeated axis");
  tm_end(&m);

  tm_begin(&m, "Slice", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, 1, (int64_t[]){0});
  tm_in_ints(&m, 1, (int64_t[]){2});
  tm_in_ints(&m, 1, (int64_t[]){2});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_MODEL, "axis out of range");
  tm_end(&m);

  /* opset 9: attributes */
  tm_begin(&m, "Slice", 9);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_attr_ints(&m, "starts", 1, (int64_t[]){-2});
  tm_attr_ints(&m, "ends", 1, (int64_t[]){1000});
  tm_attr_ints(&m, "axes", 1, (int64_t[]){1});
  tm_out(&m, 1);
  if (tm_run_ok(&m, "slice-9"))
    tm_expect("slice-9", m.out[0], TOLK_FLOAT, 2, (int64_t[]){2, 2}, (float[]){1, 2, 4, 5});
  tm_end(&m);
}

static void reshape_case(const char *what, int opset, int allowzero, const int64_t *x_dims,
                         int x_rank, int64_t n, const int64_t *shape, tolk_status want_st,
                         int rank, const int64_t *dims) {
  struct tmodel m;
  float buf[64] = {0};
  tm_begin(&m, "Reshape", opset);
  tm_in(&m, TOLK_FLOAT, x_rank, x_dims, buf);
  tm_in_ints(&m, n, shape);
  if (allowzero >= 0) tm_attr_int(&m, "allowzero", allowzero);
  tm_out(&m, 1);
  if (want_st != TOLK_OK) {
    tm_run_fail(&m, want_st, what);
  } else if (tm_run_ok(&m, what)) {
    tm_expect(what, m.out[0], TOLK_FLOAT, rank, dims, buf);
  }
  tm_end(&m);
}

static void test_reshape(void) {
  reshape_case("0 and -1", 13, -1, (int64_t[]){2, 3, 4}, 3, 3, (int64_t[]){0, -1, 2}, TOLK_OK, 3,
               (int64_t[]){2, 6, 2});
  reshape_case("allowzero empty", 14, 1, (int64_t[]){0, 3}, 2, 3, (int64_t[]){3, 0, 5}, TOLK_OK,
               3, (int64_t[]){3, 0, 5});
  reshape_case("no allowzero copies", 14, 0, (int64_t[]){2, 3}, 2, 2, (int64_t[]){0, 3}, TOLK_OK,
               2, (int64_t[]){2, 3});
  reshape_case("allowzero 0 with -1", 14, 1, (int64_t[]){2, 3}, 2, 2, (int64_t[]){0, -1},
               TOLK_ERR_SHAPE, 0, NULL);
  reshape_case("two -1", 13, -1, (int64_t[]){2, 3}, 2, 2, (int64_t[]){-1, -1}, TOLK_ERR_SHAPE, 0,
               NULL);
  reshape_case("count mismatch", 13, -1, (int64_t[]){2, 3}, 2, 2, (int64_t[]){4, 2},
               TOLK_ERR_SHAPE, 0, NULL);
  reshape_case("-1 does not divide", 13, -1, (int64_t[]){2, 3}, 2, 2, (int64_t[]){4, -1},
               TOLK_ERR_SHAPE, 0, NULL);
  reshape_case("0 past input rank", 13, -1, (int64_t[]){6}, 1, 2, (int64_t[]){6, 0},
               TOLK_ERR_SHAPE, 0, NULL);
  reshape_case("-2", 13, -1, (int64_t[]){6}, 1, 2, (int64_t[]){-2, -3}, TOLK_ERR_SHAPE, 0, NULL);
  reshape_case("to scalar", 13, -1, (int64_t[]){1, 1}, 2, 0, NULL, TOLK_OK, 0, NULL);
}

static void pad_case(const char *what, int opset, const char *mode, int64_t n, const float *x,
                     int64_t np, const int64_t *pads, const float *value, int64_t nout,
                     const float *want) {
  struct tmodel m;
  tm_begin(&m, "Pad", opset);
  tm_in(&m, TOLK_FLOAT, 1, &n, x);
  tm_in_ints(&m, np, pads);
  if (value) tm_in(&m, TOLK_FLOAT, 0, NULL, value);
  tm_attr_str(&m, "mode", mode);
  tm_out(&m, 1);
  if (tm_run_ok(&m, what)) tm_expect(what, m.out[0], TOLK_FLOAT, 1, &nout, want);
  tm_end(&m);
}

static void test_pad(void) {
  const float x[3] = {1, 2, 3};
  pad_case("constant", 13, "constant", 3, x, 2, (int64_t[]){2, 1}, (float[]){9}, 6,
           (float[]){9, 9, 1, 2, 3, 9});
  pad_case("reflect", 13, "reflect", 3, x, 2, (int64_t[]){2, 2}, NULL, 7,
           (float[]){3, 2, 1, 2, 3, 2, 1});
  /* beyond one period: numpy's periodic reflection */
  pad_case("reflect wide", 13, "reflect", 3, x, 2, (int64_t[]){5, 0}, NULL, 8,
           (float[]){2, 1, 2, 3, 2, 1, 2, 3});
  pad_case("edge", 13, "edge", 3, x, 2, (int64_t[]){2, 1}, NULL, 6, (float[]){1, 1, 1, 2, 3, 3});
  pad_case("wrap", 19, "wrap", 3, x, 2, (int64_t[]){4, 2}, NULL, 9,
           (float[]){3, 1, 2, 3, 1, 2, 3, 1, 2});
  pad_case("negative (crop)", 13, "constant", 3, x, 2, (int64_t[]){-1, 2}, NULL, 4,
           (float[]){2, 3, 0, 0});
  pad_case("reflect of one", 13, "reflect", 1, x, 2, (int64_t[]){2, 1}, NULL, 4,
           (float[]){1, 1, 1, 1});

  /* 2-D, opset 2 attributes with a value */
  struct tmodel m;
  tm_begin(&m, "Pad", 2);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_attr_ints(&m, "pads", 4, (int64_t[]){1, 0, 0, 1});
  tm_attr_float(&m, "value", 7);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "pad-2"))
    tm_expect("pad-2", m.out[0], TOLK_FLOAT, 2, (int64_t[]){3, 4},
           (float[]){7, 7, 7, 7, 0, 1, 2, 7, 3, 4, 5, 7});
  tm_end(&m);

  /* opset 18 axes */
  tm_begin(&m, "Pad", 18);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, 2, (int64_t[]){1, 1});
  tm_none(&m);
  tm_in_ints(&m, 1, (int64_t[]){-1});
  tm_attr_str(&m, "mode", "edge");
  tm_out(&m, 1);
  if (tm_run_ok(&m, "pad axes"))
    tm_expect("pad axes", m.out[0], TOLK_FLOAT, 2, (int64_t[]){2, 5},
           (float[]){0, 0, 1, 2, 2, 3, 3, 4, 5, 5});
  tm_end(&m);

  tm_begin(&m, "Pad", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, 4, (int64_t[]){0, -4, 0, 0});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "pad crops below zero");
  tm_end(&m);

  tm_begin(&m, "Pad", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, 4, (int64_t[]){0, 0, 0, 0});
  tm_attr_str(&m, "mode", "mirror");
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_MODEL, "pad unknown mode");
  tm_end(&m);
}

static void test_split(void) {
  const float x[5] = {0, 1, 2, 3, 4};
  int64_t n = 5;
  struct tmodel m;
  tm_begin(&m, "Split", 18);
  tm_in(&m, TOLK_FLOAT, 1, &n, x);
  tm_attr_int(&m, "num_outputs", 3);
  tm_out(&m, 3);
  if (tm_run_ok(&m, "split uneven")) {
    tm_expect("split 0", m.out[0], TOLK_FLOAT, 1, (int64_t[]){2}, (float[]){0, 1});
    tm_expect("split 1", m.out[1], TOLK_FLOAT, 1, (int64_t[]){2}, (float[]){2, 3});
    tm_expect("split 2", m.out[2], TOLK_FLOAT, 1, (int64_t[]){1}, (float[]){4});
  }
  tm_end(&m);

  tm_begin(&m, "Split", 13);
  tm_in(&m, TOLK_FLOAT, 1, &n, x);
  tm_out(&m, 3);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "split-13 unequal");
  tm_end(&m);

  tm_begin(&m, "Split", 13);
  tm_in(&m, TOLK_FLOAT, 1, &n, x);
  tm_in_ints(&m, 2, (int64_t[]){4, 2});
  tm_out(&m, 2);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "split sum");
  tm_end(&m);

  tm_begin(&m, "Split", 11);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_attr_int(&m, "axis", -1);
  tm_attr_ints(&m, "split", 2, (int64_t[]){1, 2});
  tm_out(&m, 2);
  if (tm_run_ok(&m, "split-11")) {
    tm_expect("split-11 0", m.out[0], TOLK_FLOAT, 2, (int64_t[]){2, 1}, (float[]){0, 3});
    tm_expect("split-11 1", m.out[1], TOLK_FLOAT, 2, (int64_t[]){2, 2}, (float[]){1, 2, 4, 5});
  }
  tm_end(&m);
}

static void trilu_case(const char *what, int upper, int64_t k, const float *want) {
  struct tmodel m;
  tm_begin(&m, "Trilu", 14);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 0, NULL, &k);
  tm_attr_int(&m, "upper", upper);
  tm_out(&m, 1);
  if (tm_run_ok(&m, what)) tm_expect(what, m.out[0], TOLK_FLOAT, 2, d23, want);
  tm_end(&m);
}

static void test_trilu(void) {
  trilu_case("upper 0", 1, 0, (float[]){0, 1, 2, 0, 4, 5});
  trilu_case("lower -1", 0, -1, (float[]){0, 0, 0, 3, 0, 0});
  trilu_case("upper INT64_MAX", 1, INT64_MAX, (float[]){0, 0, 0, 0, 0, 0});
  trilu_case("upper INT64_MIN", 1, INT64_MIN, x23);
  trilu_case("lower INT64_MAX", 0, INT64_MAX, x23);
  trilu_case("lower INT64_MIN", 0, INT64_MIN, (float[]){0, 0, 0, 0, 0, 0});
}

static void test_range(void) {
  struct tmodel m;
  int32_t s = INT32_MAX - 3, l = INT32_MAX, d = 2;
  tm_begin(&m, "Range", 11);
  tm_in(&m, TOLK_INT32, 0, NULL, &s);
  tm_in(&m, TOLK_INT32, 0, NULL, &l);
  tm_in(&m, TOLK_INT32, 0, NULL, &d);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "range near INT32_MAX"))
    tm_expect("range near INT32_MAX", m.out[0], TOLK_INT32, 1, (int64_t[]){2},
           (int32_t[]){INT32_MAX - 3, INT32_MAX - 1});
  tm_end(&m);

  int64_t s64 = 10, l64 = -3, d64 = -4;
  tm_begin(&m, "Range", 11);
  tm_in_i64(&m, 0, NULL, &s64);
  tm_in_i64(&m, 0, NULL, &l64);
  tm_in_i64(&m, 0, NULL, &d64);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "range negative"))
    tm_expect("range negative", m.out[0], TOLK_INT64, 1, (int64_t[]){4}, (int64_t[]){10, 6, 2, -2});
  tm_end(&m);

  s64 = INT64_MIN;
  l64 = INT64_MAX;
  d64 = 1;
  tm_begin(&m, "Range", 11);
  tm_in_i64(&m, 0, NULL, &s64);
  tm_in_i64(&m, 0, NULL, &l64);
  tm_in_i64(&m, 0, NULL, &d64);
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_LIMIT, "range span overflow");
  tm_end(&m);

  float fs = 0, fl = 1, fd = 0;
  tm_begin(&m, "Range", 11);
  tm_in(&m, TOLK_FLOAT, 0, NULL, &fs);
  tm_in(&m, TOLK_FLOAT, 0, NULL, &fl);
  tm_in(&m, TOLK_FLOAT, 0, NULL, &fd);
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_ARGUMENT, "range delta 0");
  tm_end(&m);
}

static void test_shape_ops(void) {
  struct tmodel m;
  float buf[24] = {0};
  int64_t d234[3] = {2, 3, 4};
  tm_begin(&m, "Shape", 15);
  tm_in(&m, TOLK_FLOAT, 3, d234, buf);
  tm_attr_int(&m, "start", -2);
  tm_attr_int(&m, "end", 100);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "shape start/end"))
    tm_expect("shape start/end", m.out[0], TOLK_INT64, 1, (int64_t[]){2}, (int64_t[]){3, 4});
  tm_end(&m);

  tm_begin(&m, "Squeeze", 13);
  tm_in(&m, TOLK_FLOAT, 3, d234, buf);
  tm_in_ints(&m, 1, (int64_t[]){1});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "squeeze non-1 dim");
  tm_end(&m);

  tm_begin(&m, "Unsqueeze", 13);
  tm_in(&m, TOLK_FLOAT, 3, d234, buf);
  tm_in_ints(&m, 2, (int64_t[]){-1, 0});
  tm_out(&m, 1);
  if (tm_run_ok(&m, "unsqueeze"))
    tm_expect("unsqueeze", m.out[0], TOLK_FLOAT, 5, (int64_t[]){1, 2, 3, 4, 1}, buf);
  tm_end(&m);

  tm_begin(&m, "Unsqueeze", 11);
  tm_in(&m, TOLK_FLOAT, 3, d234, buf);
  tm_attr_ints(&m, "axes", 2, (int64_t[]){1, -4});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_MODEL, "unsqueeze repeated axis");
  tm_end(&m);

  tm_begin(&m, "Expand", 13);
  tm_in(&m, TOLK_FLOAT, 3, d234, buf);
  tm_in_ints(&m, 2, (int64_t[]){2, 4});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "expand incompatible");
  tm_end(&m);

  float col[2] = {1, 2};
  tm_begin(&m, "Expand", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 1}, col);
  tm_in_ints(&m, 3, (int64_t[]){2, 1, 3});
  tm_out(&m, 1);
  if (tm_run_ok(&m, "expand"))
    tm_expect("expand", m.out[0], TOLK_FLOAT, 3, (int64_t[]){2, 2, 3},
           (float[]){1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  tm_end(&m);

  tm_begin(&m, "Tile", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, 2, (int64_t[]){2, 2});
  tm_out(&m, 1);
  if (tm_run_ok(&m, "tile"))
    tm_expect("tile", m.out[0], TOLK_FLOAT, 2, (int64_t[]){4, 6},
           (float[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  tm_end(&m);

  tm_begin(&m, "Transpose", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "transpose"))
    tm_expect("transpose", m.out[0], TOLK_FLOAT, 2, (int64_t[]){3, 2}, (float[]){0, 3, 1, 4, 2, 5});
  tm_end(&m);

  tm_begin(&m, "Transpose", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_attr_ints(&m, "perm", 2, (int64_t[]){0, 0});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_MODEL, "transpose bad perm");
  tm_end(&m);

  tm_begin(&m, "Concat", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 0}, NULL);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 1}, col);
  tm_attr_int(&m, "axis", -1);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "concat"))
    tm_expect("concat", m.out[0], TOLK_FLOAT, 2, (int64_t[]){2, 4}, (float[]){0, 1, 2, 1, 3, 4, 5, 2});
  tm_end(&m);

  tm_begin(&m, "Concat", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 2}, col);
  tm_attr_int(&m, "axis", 0);
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "concat mismatch");
  tm_end(&m);

  int64_t k = 3;
  tm_begin(&m, "EyeLike", 9);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_attr_int(&m, "k", k);
  tm_attr_int(&m, "dtype", TOLK_INT32);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "eyelike off"))
    tm_expect("eyelike off", m.out[0], TOLK_INT32, 2, d23, (int32_t[]){0, 0, 0, 0, 0, 0});
  tm_end(&m);

  tm_begin(&m, "EyeLike", 9);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_attr_int(&m, "k", -1);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "eyelike -1"))
    tm_expect("eyelike -1", m.out[0], TOLK_FLOAT, 2, d23, (float[]){0, 0, 0, 1, 0, 0});
  tm_end(&m);

  /* DepthToSpace CRD against its definition */
  float dx[16];
  for (int i = 0; i < 16; i++) dx[i] = (float)i;
  tm_begin(&m, "DepthToSpace", 13);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 4, 2, 2}, dx);
  tm_attr_int(&m, "blocksize", 2);
  tm_attr_str(&m, "mode", "CRD");
  tm_out(&m, 1);
  if (tm_run_ok(&m, "depthtospace crd")) {
    float want[16];
    for (int h = 0; h < 4; h++)
      for (int w = 0; w < 4; w++) /* channel (h%2)*2 + w%2 of the one output channel */
        want[h * 4 + w] = dx[((h % 2) * 2 + w % 2) * 4 + (h / 2) * 2 + w / 2];
    tm_expect("depthtospace crd", m.out[0], TOLK_FLOAT, 4, (int64_t[]){1, 1, 4, 4}, want);
  }
  tm_end(&m);

  /* SpaceToDepth inverts DepthToSpace DCR */
  tm_begin(&m, "SpaceToDepth", 13);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 1, 4, 4}, dx);
  tm_attr_int(&m, "blocksize", 2);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "spacetodepth")) {
    float want[16];
    for (int c = 0; c < 4; c++)
      for (int h = 0; h < 2; h++)
        for (int w = 0; w < 2; w++) want[c * 4 + h * 2 + w] = dx[(h * 2 + c / 2) * 4 + w * 2 + c % 2];
    tm_expect("spacetodepth", m.out[0], TOLK_FLOAT, 4, (int64_t[]){1, 4, 2, 2}, want);
  }
  tm_end(&m);

  float z = 2.5f;
  tm_begin(&m, "ConstantOfShape", 9);
  tm_in_ints(&m, 2, (int64_t[]){2, 2});
  tm_attr_tensor(&m, "value", TOLK_FLOAT, 1, (int64_t[]){1}, &z);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "constantofshape"))
    tm_expect("constantofshape", m.out[0], TOLK_FLOAT, 2, (int64_t[]){2, 2}, (float[]){z, z, z, z});
  tm_end(&m);

  tm_begin(&m, "Dropout", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_out(&m, 2);
  if (tm_run_ok(&m, "dropout")) {
    tm_expect("dropout", m.out[0], TOLK_FLOAT, 2, d23, x23);
    tm_expect("dropout mask", m.out[1], TOLK_BOOL, 2, d23, (uint8_t[]){1, 1, 1, 1, 1, 1});
  }
  tm_end(&m);
}

int main(void) {
  test_slice();
  test_reshape();
  test_pad();
  test_split();
  test_trilu();
  test_range();
  test_shape_ops();
  return tu_finish("test_ops_shape");
}
