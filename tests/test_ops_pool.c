/*
 * test_ops_pool.c — the pooling kernels (max with row- and column-major
 * indices, average with and without count_include_pad, Lp) against a
 * tap-by-tap reference on random windows with pads, strides, dilations and
 * ceil_mode; then MaxPool / AveragePool / global pools through one-node
 * models (Indices output, integer MaxPool, output shapes).
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

static float frand(void) { return (float)tu_unit(); }

/* Every tap of every window, checked one by one. */
static void pool_ref(const struct nn_pool_args *a, const struct nn_window *w, const float *x,
                     int64_t planes, float *y, int64_t *ind) {
  int nsp = w->nsp;
  int64_t inn = nn_window_numel(w->in, nsp), outn = nn_window_numel(w->out, nsp);
  int64_t kn = nn_window_numel(w->k, nsp);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t p = 0; p < outn; p++) {
      int64_t o[NN_MAX_SPATIAL], rem = p;
      for (int d = nsp - 1; d >= 0; d--) {
        o[d] = rem % w->out[d];
        rem /= w->out[d];
      }
      double acc = 0, best = -INFINITY;
      int64_t taps = 0, incl = 0, bi = -1;
      for (int64_t t = 0; t < kn; t++) {
        int64_t j[NN_MAX_SPATIAL], r2 = t;
        for (int d = nsp - 1; d >= 0; d--) {
          j[d] = r2 % w->k[d];
          r2 /= w->k[d];
        }
        bool inside = true, in_pad = true;
        int64_t off = 0, coff = 0, cst = 1;
        for (int d = 0; d < nsp; d++) {
          int64_t pos = o[d] * w->stride[d] - w->pad0[d] + j[d] * w->dil[d];
          if (pos < 0 || pos >= w->in[d]) inside = false;
          if (pos < -w->pad0[d] || pos >= w->in[d] + w->pad1[d]) in_pad = false;
          off = off * w->in[d] + pos;
        }
        for (int d = 0; d < nsp; d++) {
          coff += (o[d] * w->stride[d] - w->pad0[d] + j[d] * w->dil[d]) * cst;
          cst *= w->in[d];
        }
        if (in_pad) incl++;
        if (!inside) continue;
        taps++;
        double v = x[pl * inn + off];
        if (a->kind == NN_POOL_MAX && (bi < 0 || v > best)) {
          best = v;
          bi = pl * inn + (a->storage_order ? coff : off);
        }
        acc += a->kind == NN_POOL_LP ? pow(fabs(v), a->p) : v;
      }
      float r;
      if (a->kind == NN_POOL_MAX)
        r = (float)best;
      else if (a->kind == NN_POOL_AVG)
        r = (float)(acc / (double)(a->count_include_pad ? incl : taps));
      else
        r = (float)pow(acc, 1.0 / a->p);
      y[pl * outn + p] = r;
      if (ind) ind[pl * outn + p] = bi;
    }
}

static void pool_case(int nsp) {
  struct nn_window w = {.nsp = nsp};
  for (int d = 0; d < nsp; d++) {
    w.k[d] = 1 + tu_below(3);
    w.stride[d] = 1 + tu_below(3);
    w.dil[d] = 1 + tu_below(2);
    int64_t ek = (w.k[d] - 1) * w.dil[d] + 1;
    /* Pads smaller than the kernel, as the spec requires. */
    w.pad0[d] = tu_below(w.k[d]);
    w.pad1[d] = tu_below(w.k[d]);
    w.in[d] = ek + tu_below(6);
  }
  bool ceil_mode = tu_below(2);
  if (!nn_window_out(&w, NN_PAD_NOTSET, ceil_mode)) {
    CHECK_MSG(false, "window refused");
    return;
  }
  int64_t planes = 1 + tu_below(4);
  int64_t inn = nn_window_numel(w.in, nsp), outn = nn_window_numel(w.out, nsp);
  float *x = malloc((size_t)(planes * inn) * sizeof *x);
  for (int64_t i = 0; i < planes * inn; i++) x[i] = frand();
  /* Some ties, to check which index wins. */
  for (int64_t i = 0; i < planes * inn; i += 3) x[i] = 0.5f;
  float *y = malloc((size_t)(planes * outn) * sizeof *y), *r = malloc((size_t)(planes * outn) * sizeof *r);
  int64_t *iy = malloc((size_t)(planes * outn) * sizeof *iy), *ir = malloc((size_t)(planes * outn) * sizeof *ir);
  for (int kind = 0; kind < 3; kind++) {
    struct nn_pool_args a = {.kind = (enum nn_pool)kind, .count_include_pad = tu_below(2),
                             .p = kind == 2 ? (double)(1 + tu_below(3)) : 0};
    if (kind == NN_POOL_MAX) {
      a.storage_order = nsp == 2 ? (int)tu_below(2) : 0;
      a.indices = iy;
    }
    nn_pool_f32(&a, &w, x, y, 0, planes);
    pool_ref(&a, &w, x, planes, r, kind == NN_POOL_MAX ? ir : NULL);
    double md = 0;
    for (int64_t i = 0; i < planes * outn; i++) {
      /* A window wholly in the padding has no taps: both give a non-finite
       * or zero value, compare only finite ones. */
      if (!isfinite(r[i])) continue;
      double dd = fabs((double)y[i] - (double)r[i]);
      if (!(dd <= md)) md = dd;
    }
    CHECK_MSG(md <= 1e-5, "pool kind %d nsp %d ceil %d: max diff %g", kind, nsp, ceil_mode, md);
    if (kind == NN_POOL_MAX) {
      bool same = true;
      for (int64_t i = 0; i < planes * outn; i++) same &= iy[i] == ir[i];
      CHECK_MSG(same, "max indices differ (nsp %d, storage_order %d)", nsp, a.storage_order);
      /* Without indices 2-D max pooling takes its own loops. */
      a.indices = NULL;
      nn_pool_f32(&a, &w, x, y, 0, planes);
      same = true;
      for (int64_t i = 0; i < planes * outn; i++) same &= y[i] == r[i] || !isfinite(r[i]);
      CHECK_MSG(same, "max without indices differs (nsp %d)", nsp);
    }
  }
  free(x), free(y), free(r), free(iy), free(ir);
}

static void pool_models(void) {
  struct tm m;
  tolk_error err = {0};
  float x[25];
  for (int i = 0; i < 25; i++) x[i] = (float)((i * 7) % 25);
  /* MaxPool with Indices, column-major. */
  tm_begin(&m, "MaxPool", 12);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 1, 5, 5}, x);
  tm_attr_ints(&m, "kernel_shape", 2, (int64_t[]){2, 2});
  tm_attr_ints(&m, "strides", 2, (int64_t[]){2, 2});
  tm_attr_int(&m, "storage_order", 1);
  tm_out(&m, 2);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[1]) {
    const float *y = tolk_tensor_data(m.out[0]);
    const int64_t *ix = tolk_tensor_data(m.out[1]);
    CHECK(tolk_tensor_dims(m.out[0])[2] == 2 && tolk_tensor_dtype(m.out[1]) == TOLK_INT64);
    /* window (0,0): x[0]=0 x[1]=7 x[5]=10 x[6]=17 -> 17 at h=1,w=1 -> 1 + 1*5 */
    CHECK(y[0] == 17.0f && ix[0] == 6);
    /* window (0,1): x[2]=14 x[3]=21 x[7]=24 x[8]=6 -> 24 at h=1,w=2 -> 1 + 2*5 */
    CHECK(y[1] == 24.0f && ix[1] == 11);
  }
  tm_end(&m);
  /* ceil_mode adds the partial window. */
  tm_begin(&m, "MaxPool", 12);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 1, 5, 5}, x);
  tm_attr_ints(&m, "kernel_shape", 2, (int64_t[]){2, 2});
  tm_attr_ints(&m, "strides", 2, (int64_t[]){2, 2});
  tm_attr_int(&m, "ceil_mode", 1);
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) CHECK(tolk_tensor_dims(m.out[0])[2] == 3 && tolk_tensor_dims(m.out[0])[3] == 3);
  tm_end(&m);
  /* Integer MaxPool (opset 12). */
  int8_t xi[8] = {-5, 3, -1, 7, 100, -128, 0, 1};
  tm_begin(&m, "MaxPool", 12);
  tm_in(&m, TOLK_INT8, 3, (int64_t[]){1, 2, 4}, xi);
  tm_attr_ints(&m, "kernel_shape", 1, (int64_t[]){2});
  tm_attr_ints(&m, "strides", 1, (int64_t[]){2});
  tm_out(&m, 1);
  CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
  if (m.out[0]) {
    const int8_t *y = tolk_tensor_data(m.out[0]);
    CHECK(y[0] == 3 && y[1] == 7 && y[2] == 100 && y[3] == 1);
  }
  tm_end(&m);
  /* AveragePool count_include_pad: a 1-D corner window of 2 taps + 1 pad. */
  float x1[4] = {1, 2, 3, 4};
  for (int inc = 0; inc < 2; inc++) {
    tm_begin(&m, "AveragePool", 11);
    tm_in(&m, TOLK_FLOAT, 3, (int64_t[]){1, 1, 4}, x1);
    tm_attr_ints(&m, "kernel_shape", 1, (int64_t[]){3});
    tm_attr_ints(&m, "pads", 2, (int64_t[]){1, 1});
    tm_attr_int(&m, "count_include_pad", inc);
    tm_out(&m, 1);
    CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
    if (m.out[0]) {
      const float *y = tolk_tensor_data(m.out[0]);
      CHECK(tolk_tensor_dims(m.out[0])[2] == 4);
      CHECK_NEAR(y[0], inc ? 1.0 : 1.5, 1e-6);
      CHECK_NEAR(y[1], 2.0, 1e-6);
      CHECK_NEAR(y[3], inc ? 7.0 / 3 : 3.5, 1e-6);
    }
    tm_end(&m);
  }
  /* GlobalAveragePool / GlobalMaxPool keep rank, with 1s. */
  const char *ops[2] = {"GlobalAveragePool", "GlobalMaxPool"};
  for (int k = 0; k < 2; k++) {
    tm_begin(&m, ops[k], 1);
    tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 1, 5, 5}, x);
    tm_out(&m, 1);
    CHECK_MSG(tm_run(&m, &err) == TOLK_OK, "%s", err.message);
    if (m.out[0]) {
      CHECK(tolk_tensor_rank(m.out[0]) == 4 && tolk_tensor_numel(m.out[0]) == 1);
      CHECK_NEAR(*(const float *)tolk_tensor_data(m.out[0]), k ? 24.0 : 12.0, 1e-6);
    }
    tm_end(&m);
  }
  /* A kernel larger than the padded input is an error, not a crash. */
  tm_begin(&m, "MaxPool", 12);
  tm_in(&m, TOLK_FLOAT, 4, (int64_t[]){1, 1, 5, 5}, x);
  tm_attr_ints(&m, "kernel_shape", 2, (int64_t[]){6, 6});
  tm_out(&m, 1);
  CHECK(tm_run(&m, &err) == TOLK_ERR_SHAPE);
  tm_end(&m);
}

int main(void) {
  tu_seed(0x2545f4914f6cdd1dull);
  for (int i = 0; i < 150; i++) pool_case(1 + (int)tu_below(3));
  pool_models();
  return tu_finish("test_ops_pool");
}
