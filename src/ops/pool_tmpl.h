/*
 * pool_tmpl.h — MaxPool / AveragePool / LpPool over planes, instantiated by
 * pool_cpu.c for float, double and int64 (a template header: included several
 * times, no include guard). The includer defines T, SFX and LOWEST.
 */

#define P_CAT_(a, b) a##b
#define P_CAT(a, b) P_CAT_(a, b)
#define FN(name) P_CAT(name, SFX)

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
  for (int64_t plane = p_begin; plane < p_end; plane++) {
    const T *xp = x + plane * inn;
    T *yp = y + plane * outn;
    int64_t *ip = a->indices ? a->indices + plane * outn : NULL;
    int64_t oidx[NN_MAX_SPATIAL] = {0};
    for (int64_t p = 0; p < outn; p++) {
      int64_t lo[NN_MAX_SPATIAL], hi[NN_MAX_SPATIAL], start[NN_MAX_SPATIAL];
      int64_t taps = 1, incl = 1;
      for (int d = 0; d < nsp; d++) {
        tap_range(w, d, oidx[d], &start[d], &lo[d], &hi[d], &incl);
        taps *= hi[d] - lo[d];
      }
      double acc = 0;
      T best = LOWEST;
      int64_t best_off = -1;
      if (taps > 0) {
        int64_t j[NN_MAX_SPATIAL];
        for (int d = 0; d < nsp; d++) j[d] = lo[d];
        for (;;) {
          int64_t off = 0, ioff = 0;
          for (int d = 0; d < last; d++) {
            int64_t pos = start[d] + j[d] * w->dil[d];
            off += pos * rst[d];
            ioff += pos * ist[d];
          }
          int64_t dl = w->dil[last];
          for (int64_t jl = lo[last]; jl < hi[last]; jl++) {
            int64_t pos = start[last] + jl * dl;
            T v = xp[off + pos];
            if (a->kind == NN_POOL_MAX) {
              if (best_off < 0 || v > best) {
                best = v;
                best_off = ioff + pos * ist[last];
              }
            } else if (a->kind == NN_POOL_AVG) {
              acc += (double)v;
            } else {
              double av = (double)v < 0 ? -(double)v : (double)v;
              acc += a->p == 2 ? av * av : a->p == 1 ? av : pow(av, a->p);
            }
          }
          int d = last - 1;
          while (d >= 0 && ++j[d] == hi[d]) {
            j[d] = lo[d];
            d--;
          }
          if (d < 0) break;
        }
      }
      if (a->kind == NN_POOL_MAX) {
        yp[p] = best;
        if (ip) ip[p] = best_off < 0 ? -1 : plane * inn + best_off;
      } else if (a->kind == NN_POOL_AVG) {
        int64_t div = a->count_include_pad ? incl : taps;
        yp[p] = (T)(div > 0 ? acc / (double)div : 0.0);
      } else {
        yp[p] = (T)(a->p == 2 ? sqrt(acc) : a->p == 1 ? acc : pow(acc, 1.0 / a->p));
      }
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
