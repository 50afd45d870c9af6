/*
 * pool_tmpl.h — MaxPool / AveragePool / LpPool over planes, instantiated by
 * pool_cpu.c for float, double and int64 (a template header: included several
 * times, no include guard). The includer defines T, SFX and LOWEST, and
 * provides struct pool_tab and pool_tabs() (the per-dim tap ranges).
 */

#define P_CAT_(a, b) a##b
#define P_CAT(a, b) P_CAT_(a, b)
#define FN(name) P_CAT(name, SFX)

/* One output's value from the taps in [lo, hi) of each dim (t[d]). `off`
 * walks the row-major input offset; `ioff` the offset in the index order
 * (row- or column-major) for MaxPool's Indices. */
static inline T FN(pool_one)(const struct nn_pool_args *a, const struct nn_window *w,
                             const T *xp, const int64_t *rst, const int64_t *ist,
                             const struct pool_tab *const *t, int64_t *best_idx) {
  int nsp = w->nsp, last = nsp - 1;
  int64_t taps = 1, incl = 1;
  for (int d = 0; d < nsp; d++) {
    taps *= t[d]->hi - t[d]->lo;
    incl *= t[d]->incl;
  }
  if (taps <= 0) {
    *best_idx = -1;
    return a->kind == NN_POOL_MAX ? (T)LOWEST : (T)0;
  }
  int64_t j[NN_MAX_SPATIAL];
  for (int d = 0; d < nsp; d++) j[d] = t[d]->lo;
  int64_t dl = w->dil[last] * rst[last], il = w->dil[last] * ist[last];
  int64_t jl0 = t[last]->lo, jl1 = t[last]->hi;
  T best = LOWEST;
  int64_t bi = -1;
  double acc = 0;
  for (;;) {
    int64_t off = 0, ioff = 0;
    for (int d = 0; d < nsp; d++) {
      int64_t pos = t[d]->start + (d == last ? jl0 : j[d]) * w->dil[d];
      off += pos * rst[d];
      ioff += pos * ist[d];
    }
    const T *p = xp + off;
    int64_t n = jl1 - jl0;
    switch (a->kind) {
    case NN_POOL_MAX:
      /* NaN inputs never win (ORT and the ONNX reference skip them too);
       * the index is the first maximum's, or the first tap's. */
      for (int64_t q = 0; q < n; q++) {
        T v = p[q * dl];
        if (v > best) {
          best = v;
          bi = ioff + q * il;
        } else if (bi < 0) {
          bi = ioff + q * il;
        }
      }
      break;
    case NN_POOL_AVG:
      for (int64_t q = 0; q < n; q++) acc += (double)p[q * dl];
      break;
    default:
      for (int64_t q = 0; q < n; q++) {
        double v = fabs((double)p[q * dl]);
        acc += a->p == 2 ? v * v : a->p == 1 ? v : pow(v, a->p);
      }
    }
    int d = last - 1;
    while (d >= 0 && ++j[d] == t[d]->hi) {
      j[d] = t[d]->lo;
      d--;
    }
    if (d < 0) break;
  }
  *best_idx = bi;
  if (a->kind == NN_POOL_MAX) return best;
  if (a->kind == NN_POOL_AVG) {
    int64_t div = a->count_include_pad ? incl : taps;
    return (T)(acc / (double)div);
  }
  return (T)(a->p == 2 ? sqrt(acc) : a->p == 1 ? acc : pow(acc, 1.0 / a->p));
}

/* 2-D max pooling without indices, the common CNN case: straight loops. */
static void FN(max2d)(const struct nn_window *w, const struct pool_tab *th,
                      const struct pool_tab *tw, const T *xp, T *yp) {
  int64_t W = w->in[1], dh = w->dil[0], dw = w->dil[1];
  for (int64_t oh = 0; oh < w->out[0]; oh++, th++) {
    const struct pool_tab *c = tw;
    for (int64_t ow = 0; ow < w->out[1]; ow++, c++) {
      T best = LOWEST;
      for (int64_t jh = th->lo; jh < th->hi; jh++) {
        const T *r = xp + (th->start + jh * dh) * W + c->start;
        for (int64_t jw = c->lo; jw < c->hi; jw++) {
          T v = r[jw * dw];
          best = v > best ? v : best;
        }
      }
      *yp++ = best;
    }
  }
}

void FN(nn_pool_)(const struct nn_pool_args *a, const struct nn_window *w, const T *x,
                  T *y, int64_t p_begin, int64_t p_end) {
  int nsp = w->nsp, last = nsp - 1;
  int64_t inn = nn_window_numel(w->in, nsp), outn = nn_window_numel(w->out, nsp);
  int64_t rst[NN_MAX_SPATIAL], cst[NN_MAX_SPATIAL]; /* row- and column-major strides */
  int64_t st = 1;
  for (int d = last; d >= 0; d--) {
    rst[d] = st;
    st *= w->in[d];
  }
  st = 1;
  for (int d = 0; d < nsp; d++) {
    cst[d] = st;
    st *= w->in[d];
  }
  const int64_t *ist = a->storage_order == 1 ? cst : rst;
  struct pool_tab buf[POOL_TAB_MAX];
  const struct pool_tab *tab[NN_MAX_SPATIAL];
  bool tabled = pool_tabs(w, buf, tab);
  /* 2-D max pooling without indices takes the straight loops. */
  bool fast2d = tabled && nsp == 2 && a->kind == NN_POOL_MAX && !a->indices;
  for (int64_t plane = p_begin; plane < p_end; plane++) {
    const T *xp = x + plane * inn;
    T *yp = y + plane * outn;
    if (fast2d) {
      FN(max2d)(w, tab[0], tab[1], xp, yp);
      continue;
    }
    int64_t *ip = a->indices ? a->indices + plane * outn : NULL;
    int64_t oidx[NN_MAX_SPATIAL] = {0};
    struct pool_tab local[NN_MAX_SPATIAL];
    const struct pool_tab *t[NN_MAX_SPATIAL];
    for (int64_t p = 0; p < outn; p++) {
      for (int d = 0; d < nsp; d++) {
        if (tabled) {
          t[d] = &tab[d][oidx[d]];
        } else {
          pool_tab_at(w, d, oidx[d], &local[d]);
          t[d] = &local[d];
        }
      }
      int64_t bi;
      yp[p] = FN(pool_one)(a, w, xp, rst, ist, t, &bi);
      if (ip) ip[p] = bi < 0 ? -1 : plane * inn + bi;
      for (int d = last; d >= 0; d--) {
        if (++oidx[d] < w->out[d]) break;
        oidx[d] = 0;
      }
    }
  }
}

#undef FN
#undef P_CAT
#undef P_CAT_
