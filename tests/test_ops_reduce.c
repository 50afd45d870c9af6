/*
 * test_ops_reduce.c — the reduction kernels: the canonical [o, r, i] form,
 * each fast path (contiguous rows, accumulated columns) and the general
 * strided walk against a per-element double reference for every reduction,
 * in float, double and int64, on random shapes and axis sets; ArgMax/ArgMin
 * with first/last tie-breaking; then the version rules through one-node
 * models (axes attribute vs input, noop_with_empty_axes, keepdims, empty
 * reductions, unsigned max).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_cpu.h"
#include "testutil.h"

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "ops_model.h"


static const char *const op_names[] = {"sum", "mean", "max", "min", "prod",
                                       "l1", "l2", "logsum", "logsumexp", "sumsq"};

/* The reduction over one output, element by element in double. */
static double ref_one(enum nn_reduce op, const double *v, int64_t n) {
  double acc = op == NN_R_PROD ? 1 : op == NN_R_MAX ? -INFINITY : op == NN_R_MIN ? INFINITY : 0;
  double m = -INFINITY;
  for (int64_t j = 0; j < n; j++) m = v[j] > m ? v[j] : m;
  for (int64_t j = 0; j < n; j++) {
    switch (op) {
    case NN_R_PROD: acc *= v[j]; break;
    case NN_R_MAX: acc = v[j] > acc ? v[j] : acc; break;
    case NN_R_MIN: acc = v[j] < acc ? v[j] : acc; break;
    case NN_R_L1: acc += fabs(v[j]); break;
    case NN_R_L2:
    case NN_R_SUMSQ: acc += v[j] * v[j]; break;
    case NN_R_LOGSUMEXP: acc += exp(v[j] - m); break;
    default: acc += v[j];
    }
  }
  switch (op) {
  case NN_R_MEAN: return acc / (double)n;
  case NN_R_L2: return sqrt(acc);
  case NN_R_LOGSUM: return log(acc);
  case NN_R_LOGSUMEXP: return m + log(acc);
  default: return acc;
  }
}

/* Gathers, for each output (kept dims in order), its reduced elements. */
static void ref_reduce(enum nn_reduce op, int rank, const int64_t *dims, const bool *red,
                       const double *x, double *y) {
  int64_t numel = 1, nout = 1, nred = 1;
  for (int d = 0; d < rank; d++) {
    numel *= dims[d];
    if (red[d])
      nred *= dims[d];
    else
      nout *= dims[d];
  }
  double *buf = malloc((size_t)(nout * nred) * sizeof *buf);
  int64_t *fill = calloc((size_t)nout, sizeof *fill);
  for (int64_t e = 0; e < numel; e++) {
    int64_t rem = e, k = 0, kst = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t q = rem % dims[d];
      rem /= dims[d];
      if (!red[d]) {
        k += q * kst;
        kst *= dims[d];
      }
    }
    buf[k * nred + fill[k]++] = x[e];
  }
  for (int64_t k = 0; k < nout; k++) y[k] = ref_one(op, buf + k * nred, nred);
  free(buf);
  free(fill);
}

static void random_problem(int *rank, int64_t *dims, bool *red, int64_t *numel) {
  *rank = 1 + (int)tu_below(5);
  *numel = 1;
  bool any = false;
  for (int d = 0; d < *rank; d++) {
    dims[d] = 1 + tu_below(5);
    if (tu_below(5) == 0) dims[d] = 1;
    red[d] = tu_below(2);
    any |= red[d];
    *numel *= dims[d];
  }
  if (!any) red[tu_below(*rank)] = true;
}

static void float_cases(void) {
  for (int it = 0; it < 300; it++) {
    int rank;
    int64_t dims[8], numel;
    bool red[8];
    random_problem(&rank, dims, red, &numel);
    struct nn_rshape s;
    nn_rshape_init(&s, rank, dims, red);
    double *xd = malloc((size_t)numel * sizeof *xd);
    float *xf = malloc((size_t)numel * sizeof *xf);
    for (int64_t i = 0; i < numel; i++) {
      xf[i] = (float)(tu_unit() * 2 + (it % 3 == 0 ? 1.5 : 0)); /* positive for logs */
      if (it % 3 == 0 && xf[i] <= 0) xf[i] = 0.25f;
      xd[i] = xf[i];
    }
    double *r = malloc((size_t)s.n_out * sizeof *r), *yd = malloc((size_t)s.n_out * sizeof *yd);
    float *yf = malloc((size_t)s.n_out * sizeof *yf), *yg = malloc((size_t)s.n_out * sizeof *yg);
    for (int op = 0; op <= NN_R_SUMSQ; op++) {
      if ((op == NN_R_LOGSUM) && it % 3 != 0) continue;
      ref_reduce((enum nn_reduce)op, rank, dims, red, xd, r);
      /* Split the outputs in two ranges to exercise partial blocks. */
      int64_t mid = s.n_out / 2;
      nn_reduce_f32((enum nn_reduce)op, &s, xf, yf, 0, mid, false);
      nn_reduce_f32((enum nn_reduce)op, &s, xf, yf, mid, s.n_out, false);
      nn_reduce_f32((enum nn_reduce)op, &s, xf, yg, 0, s.n_out, true);
      nn_reduce_f64((enum nn_reduce)op, &s, xd, yd, 0, s.n_out, false);
      double df = 0, dg = 0, dd = 0;
      for (int64_t k = 0; k < s.n_out; k++) {
        double tol = 1.0 + fabs(r[k]);
        df = fmax(df, fabs(yf[k] - r[k]) / tol);
        dg = fmax(dg, fabs(yg[k] - r[k]) / tol);
        dd = fmax(dd, fabs(yd[k] - r[k]) / tol);
      }
      CHECK_MSG(df <= 1e-6 && dg <= 1e-6 && dd <= 1e-12,
                "%s rank %d (%s path): f32 %g general %g f64 %g", op_names[op], rank,
                s.general ? "general" : s.i == 1 ? "rows" : "cols", df, dg, dd);
    }
    /* int64: exact for the integer reductions. */
    int64_t *xi = malloc((size_t)numel * sizeof *xi), *yi = malloc((size_t)s.n_out * sizeof *yi);
    for (int64_t i = 0; i < numel; i++) {
      xi[i] = tu_below(7) - 3;
      xd[i] = (double)xi[i];
    }
    static const enum nn_reduce iops[] = {NN_R_SUM, NN_R_MAX, NN_R_MIN, NN_R_PROD, NN_R_L1,
                                          NN_R_SUMSQ};
    for (size_t q = 0; q < sizeof iops / sizeof iops[0]; q++) {
      ref_reduce(iops[q], rank, dims, red, xd, r);
      nn_reduce_i64(iops[q], &s, xi, yi, 0, s.n_out, false);
      bool same = true;
      for (int64_t k = 0; k < s.n_out; k++) same &= (double)yi[k] == r[k];
      CHECK_MSG(same, "int64 %s rank %d differs", op_names[iops[q]], rank);
    }
    free(xd), free(xf), free(r), free(yd), free(yf), free(yg), free(xi), free(yi);
  }
}

static void shape_forms(void) {
  struct nn_rshape s;
  nn_rshape_init(&s, 4, (int64_t[]){2, 3, 4, 5}, (bool[]){false, false, true, true});
  CHECK(!s.general && s.o == 6 && s.r == 20 && s.i == 1);
  nn_rshape_init(&s, 4, (int64_t[]){2, 1, 4, 5}, (bool[]){false, true, true, false});
  CHECK(!s.general && s.o == 2 && s.r == 4 && s.i == 5 && s.n_out == 10);
  nn_rshape_init(&s, 4, (int64_t[]){2, 3, 4, 5}, (bool[]){true, false, true, false});
  CHECK(s.general && s.n_out == 15 && s.n_red == 8);
  /* Reduced dims of size 1 vanish: this is a copy. */
  nn_rshape_init(&s, 2, (int64_t[]){3, 1}, (bool[]){false, true});
  CHECK(!s.general && s.r == 1 && s.n_out == 3);
}

static void argext_cases(void) {
  float x[12] = {1, 5, 5, 0, 2, 2, -1, 2, 7, 7, 7, 3}; /* [2][3][2] */
  int64_t y[4];
  nn_argext_f32(true, false, x, 2, 3, 2, y, 0, 4);
  CHECK(y[0] == 1 && y[1] == 0 && y[2] == 1 && y[3] == 1);
  nn_argext_f32(true, true, x, 2, 3, 2, y, 0, 4);
  CHECK(y[0] == 1 && y[1] == 0 && y[2] == 2 && y[3] == 1);
  nn_argext_f32(false, false, x, 2, 3, 2, y, 0, 4);
  CHECK(y[0] == 0 && y[1] == 1 && y[2] == 0 && y[3] == 0);
  int64_t xi[6] = {3, 3, 1, 1, 9, 9};
  nn_argext_i64(false, true, xi, 1, 6, 1, y, 0, 1);
  CHECK(y[0] == 3);
}

static void model_cases(void) {
  struct tm m;
  tolk_error err = {0};
  float x[6] = {1, 2, 3, 4, 5, 6}; /* [2, 3] */
  /* Opset 11: axes is an attribute. */
  tm_begin(&m, "ReduceSum", 11);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, x);
  tm_attr_ints(&m, "axes", 1, (int64_t[]){-1});
  tm_attr_int(&m, "keepdims", 0);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const float *y = tolk_tensor_data(m.out[0]);
    CHECK(tolk_tensor_rank(m.out[0]) == 1 && y[0] == 6 && y[1] == 15);
  }
  tm_end(&m);
  /* Opset 13: an input; empty axes with noop returns the data. */
  tm_begin(&m, "ReduceSum", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, x);
  tm_in_i64(&m, 1, (int64_t[]){0}, NULL);
  tm_attr_int(&m, "noop_with_empty_axes", 1);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) CHECK(tolk_tensor_numel(m.out[0]) == 6 && ((float *)tolk_tensor_data(m.out[0]))[5] == 6);
  tm_end(&m);
  /* ReduceMean at 18 takes axes as input; without it, all axes, keepdims. */
  tm_begin(&m, "ReduceMean", 18);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, x);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    CHECK(tolk_tensor_rank(m.out[0]) == 2 && tolk_tensor_numel(m.out[0]) == 1);
    CHECK_NEAR(*(float *)tolk_tensor_data(m.out[0]), 3.5, 1e-6);
  }
  tm_end(&m);
  /* Empty reduction: the identity (-inf for max), one per output. */
  tm_begin(&m, "ReduceMax", 18);
  tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){2, 0, 4}, NULL);
  tm_in_ints(&m, 1, (int64_t[]){1});
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    CHECK(tolk_tensor_numel(m.out[0]) == 8);
    CHECK(isinf(((float *)tolk_tensor_data(m.out[0]))[7]));
  }
  tm_end(&m);
  /* uint64 max orders as unsigned. */
  uint64_t u[3] = {1, UINT64_MAX, 5};
  tm_begin(&m, "ReduceMax", 13);
  tm_in(&m, TOLK_UINT64, 1, (int64_t[]){3}, u);
  tm_attr_int(&m, "keepdims", 0);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) CHECK(*(uint64_t *)tolk_tensor_data(m.out[0]) == UINT64_MAX);
  tm_end(&m);
  /* A repeated or out-of-range axis is an error naming it. */
  tm_begin(&m, "ReduceSum", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, x);
  tm_in_ints(&m, 2, (int64_t[]){1, -1});
  tm_out(&m, 1);
  CHECK(tm_run(&m, &err) == TOLK_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "repeated") != NULL, "%s", err.message);
  tm_end(&m);
  /* ArgMax with select_last_index and keepdims = 0. */
  float t[6] = {4, 1, 4, 2, 9, 9};
  tm_begin(&m, "ArgMax", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, t);
  tm_attr_int(&m, "axis", 1);
  tm_attr_int(&m, "keepdims", 0);
  tm_attr_int(&m, "select_last_index", 1);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const int64_t *y = tolk_tensor_data(m.out[0]);
    CHECK(tolk_tensor_rank(m.out[0]) == 1 && y[0] == 2 && y[1] == 2);
  }
  tm_end(&m);
}

int main(void) {
  tu_seed(0x853c49e6748fea9bull);
  shape_forms();
  float_cases();
  argext_cases();
  model_cases();
  return tu_finish("test_ops_reduce");
}
