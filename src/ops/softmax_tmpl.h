/*
 * softmax_tmpl.h — Softmax / LogSoftmax / Hardmax over the middle axis of an
 * [o, a, i] view, instantiated by softmax_cpu.c for float and double (a
 * template header: included several times, no include guard). The includer
 * defines T, SFX, EXP (exp for T) and provides row_fast_<SFX>(op, x, y, n),
 * which may compute a contiguous row itself (returning true).
 */

#define S_CAT_(a, b) a##b
#define S_CAT(a, b) S_CAT_(a, b)
#define FN(name) S_CAT(name, SFX)

/* One contiguous row of n. The exps are written to y first, then scaled, so
 * each pass is a simple loop over memory. */
static void FN(sm_row)(enum nn_softmax op, const T *x, T *y, int64_t n) {
  if (FN(row_fast_)(op, x, y, n)) return;
  T m = x[0];
  int64_t am = 0;
  for (int64_t j = 1; j < n; j++)
    if (x[j] > m) {
      m = x[j];
      am = j;
    }
  if (op == NN_HARDMAX) {
    for (int64_t j = 0; j < n; j++) y[j] = 0;
    y[am] = 1;
    return;
  }
  for (int64_t j = 0; j < n; j++) y[j] = EXP(x[j] - m);
  /* Element j is summed into lane j % 4, the tail too, so zeros appended
   * (masked padding) leave the sum unchanged: a padded row comes out the
   * same as the row alone. */
  double lane[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    lane[0] += y[j];
    lane[1] += y[j + 1];
    lane[2] += y[j + 2];
    lane[3] += y[j + 3];
  }
  for (; j < n; j++) lane[j % 4] += y[j];
  double s = (lane[0] + lane[1]) + (lane[2] + lane[3]);
  if (op == NN_SOFTMAX) {
    T inv = (T)(1.0 / s);
    for (j = 0; j < n; j++) y[j] *= inv;
  } else {
    T ls = (T)log(s);
    for (j = 0; j < n; j++) y[j] = (x[j] - m) - ls;
  }
}

#define S_BLK 256

/* Columns: for each outer index, a block of up to S_BLK columns at a time,
 * reading rows of the block in memory order. */
static void FN(sm_cols)(enum nn_softmax op, const T *x, T *y, int64_t a, int64_t ni,
                        int64_t oo) {
  T m[S_BLK];
  int64_t am[S_BLK];
  double s[S_BLK];
  const T *xo = x + oo * a * ni;
  T *yo = y + oo * a * ni;
  for (int64_t i0 = 0; i0 < ni; i0 += S_BLK) {
    int64_t len = ni - i0 < S_BLK ? ni - i0 : S_BLK;
    for (int64_t j = 0; j < len; j++) {
      m[j] = xo[i0 + j];
      am[j] = 0;
      s[j] = 0;
    }
    for (int64_t r = 1; r < a; r++) {
      const T *row = xo + r * ni + i0;
      for (int64_t j = 0; j < len; j++)
        if (row[j] > m[j]) {
          m[j] = row[j];
          am[j] = r;
        }
    }
    if (op == NN_HARDMAX) {
      for (int64_t r = 0; r < a; r++) {
        T *yr = yo + r * ni + i0;
        for (int64_t j = 0; j < len; j++) yr[j] = am[j] == r ? 1 : 0;
      }
      continue;
    }
    for (int64_t r = 0; r < a; r++) {
      const T *row = xo + r * ni + i0;
      T *yr = yo + r * ni + i0;
      for (int64_t j = 0; j < len; j++) yr[j] = EXP(row[j] - m[j]);
      for (int64_t j = 0; j < len; j++) s[j] += yr[j];
    }
    if (op == NN_SOFTMAX) {
      for (int64_t j = 0; j < len; j++) s[j] = 1.0 / s[j];
      for (int64_t r = 0; r < a; r++) {
        T *yr = yo + r * ni + i0;
        for (int64_t j = 0; j < len; j++) yr[j] = (T)(yr[j] * s[j]);
      }
    } else {
      for (int64_t j = 0; j < len; j++) s[j] = log(s[j]);
      for (int64_t r = 0; r < a; r++) {
        const T *row = xo + r * ni + i0;
        T *yr = yo + r * ni + i0;
        for (int64_t j = 0; j < len; j++) yr[j] = (T)((row[j] - m[j]) - s[j]);
      }
    }
  }
}

void FN(nn_softmax_)(enum nn_softmax op, const T *x, T *y, int64_t a, int64_t i,
                     int64_t o_begin, int64_t o_end) {
  if (a <= 0 || i <= 0) return;
  for (int64_t oo = o_begin; oo < o_end; oo++) {
    if (i == 1)
      FN(sm_row)(op, x + oo * a, y + oo * a, a);
    else
      FN(sm_cols)(op, x, y, a, i, oo);
  }
}

#undef FN
#undef S_CAT
#undef S_CAT_
#undef S_BLK
