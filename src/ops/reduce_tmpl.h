/*
 * reduce_tmpl.h — the reduction and arg-extremum kernels, written once and
 * instantiated by reduce_cpu.c for float, double and int64 (a template
 * header: included several times, no include guard). The includer defines
 *   T       element type          A        accumulator type
 *   SFX     name suffix           IS_INT   1 for integer T
 *   LOWEST / HIGHEST  identities of MAX / MIN in A
 */

#define R_CAT_(a, b) a##b
#define R_CAT(a, b) R_CAT_(a, b)
#define FN(name) R_CAT(name, SFX)
#if IS_INT
#define R_NAN(v) 0
#else
#define R_NAN(v) isnan(v)
#endif

/* double -> T for the ops computed in double (L2, LOGSUM, LOGSUMEXP, MEAN of
 * floats). Integer targets saturate and map NaN to 0 rather than invoking
 * undefined behaviour on a non-finite value. */
static inline T FN(r_from_d)(double v) {
#if IS_INT
  if (isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (T)v;
#else
  return (T)v;
#endif
}

static inline A FN(r_init)(enum nn_reduce op) {
  switch (op) {
  case NN_R_PROD: return 1;
  case NN_R_MAX: return LOWEST;
  case NN_R_MIN: return HIGHEST;
  default: return 0;
  }
}

static inline A FN(r_combine)(enum nn_reduce op, A a, A b) {
  switch (op) {
  case NN_R_PROD: return a * b;
  case NN_R_MAX: return (b > a || R_NAN(b)) && !R_NAN(a) ? b : a;
  case NN_R_MIN: return (b < a || R_NAN(b)) && !R_NAN(a) ? b : a;
  default: return a + b;
  }
}

/* Reduces x[0], x[st], …, x[(n-1)*st] (n >= 1) without the final step
 * (sqrt, log, division). Sums use four accumulators, which shortens the
 * dependency chain and, in double, loses nothing against one. */
static A FN(r_row)(enum nn_reduce op, const T *x, int64_t n, int64_t st) {
  int64_t j = 0;
  switch (op) {
  case NN_R_SUM:
  case NN_R_MEAN:
  case NN_R_LOGSUM:
  case NN_R_L1:
  case NN_R_L2:
  case NN_R_SUMSQ: {
    A a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    if (op == NN_R_SUM || op == NN_R_MEAN || op == NN_R_LOGSUM) {
      for (; j + 4 <= n; j += 4) {
        a0 += (A)x[j * st];
        a1 += (A)x[(j + 1) * st];
        a2 += (A)x[(j + 2) * st];
        a3 += (A)x[(j + 3) * st];
      }
      for (; j < n; j++) a0 += (A)x[j * st];
    } else if (op == NN_R_L1) {
      for (; j < n; j++) {
        A v = (A)x[j * st];
        a0 += v < 0 ? -v : v;
      }
    } else {
      for (; j + 4 <= n; j += 4) {
        A v0 = (A)x[j * st], v1 = (A)x[(j + 1) * st];
        A v2 = (A)x[(j + 2) * st], v3 = (A)x[(j + 3) * st];
        a0 += v0 * v0;
        a1 += v1 * v1;
        a2 += v2 * v2;
        a3 += v3 * v3;
      }
      for (; j < n; j++) {
        A v = (A)x[j * st];
        a0 += v * v;
      }
    }
    return (a0 + a1) + (a2 + a3);
  }
  case NN_R_PROD: {
    A a = 1;
    for (; j < n; j++) a *= (A)x[j * st];
    return a;
  }
  case NN_R_MAX:
  case NN_R_MIN:
  case NN_R_LOGSUMEXP: {
    bool mx = op != NN_R_MIN;
    A a = (A)x[0];
    for (j = 1; j < n; j++) {
      A v = (A)x[j * st];
      if (R_NAN(a)) break; /* NaN propagates */
      if (R_NAN(v) || (mx ? v > a : v < a)) a = v;
    }
    return a;
  }
  }
  return 0;
}

/* sum of exp(x - m) over a strided row, in double. */
static double FN(r_row_sexp)(const T *x, int64_t n, int64_t st, double m) {
  double s = 0;
  for (int64_t j = 0; j < n; j++) s += exp((double)x[j * st] - m);
  return s;
}

/* Final step of a reduction over n elements. */
static inline T FN(r_fin)(enum nn_reduce op, A acc, int64_t n) {
  switch (op) {
  case NN_R_MEAN:
#if IS_INT
    return (T)(acc / (A)n);
#else
    return (T)((double)acc / (double)n);
#endif
  case NN_R_L2: return FN(r_from_d)(sqrt((double)acc));
  case NN_R_LOGSUM: return FN(r_from_d)(log((double)acc));
  default: return (T)acc;
  }
}

static inline T FN(r_lse_fin)(double m, double s) {
  if (isinf(m)) return FN(r_from_d)(m);
  return FN(r_from_d)(m + log(s));
}

/* ---------------------------------------------------------------- walks */

/* [o, r, i] with i == 1: one contiguous row per output. */
static void FN(r_rows)(enum nn_reduce op, const T *x, T *y, int64_t r, int64_t b,
                       int64_t e) {
  for (int64_t k = b; k < e; k++) {
    const T *row = x + k * r;
    A acc = FN(r_row)(op, row, r, 1);
    if (op == NN_R_LOGSUMEXP)
      y[k] = FN(r_lse_fin)((double)acc, FN(r_row_sexp)(row, r, 1, (double)acc));
    else
      y[k] = FN(r_fin)(op, acc, r);
  }
}

#define R_BLK 256

/* [o, r, i] with i > 1: accumulate whole rows of i into a block of
 * accumulators, so the input streams through once in memory order. */
static void FN(r_cols)(enum nn_reduce op, const T *x, T *y, int64_t r, int64_t ni,
                       int64_t b, int64_t e) {
  A acc[R_BLK];
  double mx[R_BLK];
  int64_t k = b;
  while (k < e) {
    int64_t oo = k / ni, i0 = k % ni;
    int64_t len = ni - i0;
    if (len > e - k) len = e - k;
    if (len > R_BLK) len = R_BLK;
    const T *base = x + oo * r * ni + i0;
    A init = FN(r_init)(op == NN_R_LOGSUMEXP ? NN_R_MAX : op);
    for (int64_t j = 0; j < len; j++) acc[j] = init;
    for (int64_t rr = 0; rr < r; rr++) {
      const T *row = base + rr * ni;
      switch (op) {
      case NN_R_SUM:
      case NN_R_MEAN:
      case NN_R_LOGSUM:
        for (int64_t j = 0; j < len; j++) acc[j] += (A)row[j];
        break;
      case NN_R_L1:
        for (int64_t j = 0; j < len; j++) {
          A v = (A)row[j];
          acc[j] += v < 0 ? -v : v;
        }
        break;
      case NN_R_L2:
      case NN_R_SUMSQ:
        for (int64_t j = 0; j < len; j++) acc[j] += (A)row[j] * (A)row[j];
        break;
      case NN_R_PROD:
        for (int64_t j = 0; j < len; j++) acc[j] *= (A)row[j];
        break;
      case NN_R_MAX:
      case NN_R_LOGSUMEXP:
        for (int64_t j = 0; j < len; j++) acc[j] = FN(r_combine)(NN_R_MAX, acc[j], (A)row[j]);
        break;
      case NN_R_MIN:
        for (int64_t j = 0; j < len; j++) acc[j] = FN(r_combine)(NN_R_MIN, acc[j], (A)row[j]);
        break;
      }
    }
    if (op == NN_R_LOGSUMEXP) {
      for (int64_t j = 0; j < len; j++) mx[j] = 0;
      for (int64_t rr = 0; rr < r; rr++) {
        const T *row = base + rr * ni;
        for (int64_t j = 0; j < len; j++)
          if (!isinf((double)acc[j])) mx[j] += exp((double)row[j] - (double)acc[j]);
      }
      for (int64_t j = 0; j < len; j++) y[k + j] = FN(r_lse_fin)((double)acc[j], mx[j]);
    } else {
      for (int64_t j = 0; j < len; j++) y[k + j] = FN(r_fin)(op, acc[j], r);
    }
    k += len;
  }
}

/* Any pattern: walk the merged dims. The last reduced dim is reduced as a
 * strided row; the other reduced dims are walked with an odometer. */
static void FN(r_general)(enum nn_reduce op, const struct nn_rshape *s, const T *x, T *y,
                          int64_t b, int64_t e) {
  int64_t stride[IR_MAX_RANK];
  int64_t kd[IR_MAX_RANK], ks[IR_MAX_RANK], rd[IR_MAX_RANK], rs[IR_MAX_RANK];
  int nk = 0, nr = 0;
  int64_t st = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    stride[d] = st;
    st *= s->dims[d];
  }
  for (int d = 0; d < s->rank; d++) {
    if (s->red[d]) {
      rd[nr] = s->dims[d];
      rs[nr++] = stride[d];
    } else {
      kd[nk] = s->dims[d];
      ks[nk++] = stride[d];
    }
  }
  int64_t row_n = nr ? rd[nr - 1] : 1, row_st = nr ? rs[nr - 1] : 1;
  for (int64_t k = b; k < e; k++) {
    int64_t base = 0, rem = k;
    for (int d = nk - 1; d >= 0; d--) {
      base += (rem % kd[d]) * ks[d];
      rem /= kd[d];
    }
    /* Odometer over the reduced dims except the last. */
    int64_t idx[IR_MAX_RANK] = {0};
    enum nn_reduce first = op == NN_R_LOGSUMEXP ? NN_R_MAX : op;
    A acc = FN(r_init)(first);
    double sexp = 0;
    for (int pass = 0; pass < (op == NN_R_LOGSUMEXP ? 2 : 1); pass++) {
      for (int d = 0; d < nr; d++) idx[d] = 0;
      for (;;) {
        int64_t off = base;
        for (int d = 0; d + 1 < nr; d++) off += idx[d] * rs[d];
        if (pass == 0)
          acc = FN(r_combine)(first, acc, FN(r_row)(first, x + off, row_n, row_st));
        else if (!isinf((double)acc))
          sexp += FN(r_row_sexp)(x + off, row_n, row_st, (double)acc);
        int d = nr - 2;
        while (d >= 0 && ++idx[d] == rd[d]) idx[d--] = 0;
        if (d < 0) break;
      }
    }
    if (op == NN_R_LOGSUMEXP)
      y[k] = FN(r_lse_fin)((double)acc, sexp);
    else
      y[k] = FN(r_fin)(op, acc, s->n_red);
  }
}

void FN(nn_reduce_)(enum nn_reduce op, const struct nn_rshape *s, const T *x, T *y,
                    int64_t begin, int64_t end, bool ref) {
  if (begin >= end) return;
  if (ref || s->general)
    FN(r_general)(op, s, x, y, begin, end);
  else if (s->i == 1)
    FN(r_rows)(op, x, y, s->r, begin, end);
  else
    FN(r_cols)(op, x, y, s->r, s->i, begin, end);
}

void FN(nn_argext_)(bool is_max, bool last, const T *x, int64_t o, int64_t a, int64_t i,
                    int64_t *y, int64_t begin, int64_t end) {
  (void)o;
  for (int64_t k = begin; k < end; k++) {
    int64_t oo = k / i, ii = k % i;
    const T *p = x + oo * a * i + ii;
    T best = p[0];
    int64_t bi = 0;
    for (int64_t j = 1; j < a; j++) {
      T v = p[j * i];
      bool take = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
      if (take) {
        best = v;
        bi = j;
      }
    }
    y[k] = bi;
  }
}

#undef FN
#undef R_NAN
#undef R_CAT
#undef R_CAT_
#undef R_BLK
