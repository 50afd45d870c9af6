/*
 * reduce_cpu.c — reduction and ArgMax/ArgMin kernels (see nn_cpu.h): the
 * shape canonicalisation, and reduce_tmpl.h instantiated for float (double
 * accumulators), double and int64 (every integer dtype is staged to int64 by
 * the family file).
 */
#include <math.h>
#include <stdint.h>

#include "nn_cpu.h"

void nn_rshape_init(struct nn_rshape *s, int rank, const int64_t *dims, const bool *red) {
  s->rank = 0;
  s->n_out = 1;
  s->n_red = 1;
  for (int d = 0; d < rank; d++) {
    if (red[d])
      s->n_red *= dims[d];
    else
      s->n_out *= dims[d];
    if (dims[d] == 1) continue;
    if (s->rank > 0 && s->red[s->rank - 1] == red[d]) {
      s->dims[s->rank - 1] *= dims[d];
    } else {
      s->dims[s->rank] = dims[d];
      s->red[s->rank] = red[d];
      s->rank++;
    }
  }
  int nred_runs = 0, first_red = -1;
  for (int d = 0; d < s->rank; d++)
    if (s->red[d]) {
      nred_runs++;
      first_red = d;
    }
  s->general = nred_runs > 1;
  s->o = s->n_out;
  s->r = 1;
  s->i = 1;
  if (nred_runs == 1) {
    s->r = s->dims[first_red];
    s->o = first_red > 0 ? s->dims[first_red - 1] : 1;
    s->i = first_red + 1 < s->rank ? s->dims[first_red + 1] : 1;
  }
}

#define T float
#define A double
#define SFX f32
#define IS_INT 0
#define LOWEST (-INFINITY)
#define HIGHEST INFINITY
#include "reduce_tmpl.h"
#undef T
#undef A
#undef SFX
#undef IS_INT
#undef LOWEST
#undef HIGHEST

#define T double
#define A double
#define SFX f64
#define IS_INT 0
#define LOWEST (-INFINITY)
#define HIGHEST INFINITY
#include "reduce_tmpl.h"
#undef T
#undef A
#undef SFX
#undef IS_INT
#undef LOWEST
#undef HIGHEST

#define T int64_t
#define A int64_t
#define SFX i64
#define IS_INT 1
#define LOWEST INT64_MIN
#define HIGHEST INT64_MAX
#include "reduce_tmpl.h"
#undef T
#undef A
#undef SFX
#undef IS_INT
#undef LOWEST
#undef HIGHEST
