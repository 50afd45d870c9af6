/*
 * einsum.c — Einsum (opset 12+), numpy semantics: explicit ("ij,jk->ik") and
 * implicit ("ij,jk": the labels seen once, in ASCII order, after any
 * ellipsis) outputs, "..." broadcast across operands, repeated labels within
 * an operand (diagonals), labels summed away.
 *
 * The equation is parsed at prepare, so a malformed one fails at session
 * creation. At run time every label gets a size and, per operand, a stride
 * (summed over repeats: that walks the diagonal; 0 where a size-1 dim
 * broadcasts). Two float operands whose labels each split cleanly into
 * batch (both + output), row (A + output), column (B + output) and
 * contracted (both, not output) are transposed into [batch, m, k] and
 * [batch, k, n], multiplied with the matmul family's batched GEMM, and the
 * [batch, m, n] result is transposed into the output — "bhqd,bhkd->bhqk" is
 * one batched GEMM. Everything else runs the reference loop, which visits
 * every combination of label values and accumulates in double (integers,
 * 8- to 64-bit, in wrapping 64-bit).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dm.h"
#include "matmul.h"
#include "nn_util.h"

#define EIN_MAX_TERMS 16
#define EIN_LETTERS 52       /* a-z, A-Z */
#define EIN_ELL EIN_LETTERS  /* label ids from here on: ellipsis dims */
#define EIN_MAX_LABELS (EIN_LETTERS + IR_MAX_RANK)

/* The parsed equation. A term is a string of letters with '.' standing for
 * the (single) ellipsis. */
struct ein_eq {
  int n_terms;
  char terms[EIN_MAX_TERMS][IR_MAX_RANK + 2];
  bool explicit_out;
  char out[IR_MAX_RANK + 2];
};

static int letter_id(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
  return -1;
}

/* Reads one term from s (whitespace already removed) up to a ',' '-' or the
 * end, into dst. Returns the characters consumed, -1 on a bad term. */
static int parse_term(const char *s, char *dst, char *why, size_t why_n) {
  int i = 0, n = 0;
  bool ell = false;
  while (s[i] && s[i] != ',' && s[i] != '-') {
    if (s[i] == '.') {
      if (ell || strncmp(s + i, "...", 3) != 0) {
        snprintf(why, why_n, "a malformed or second ellipsis");
        return -1;
      }
      ell = true;
      dst[n++] = '.';
      i += 3;
    } else if (letter_id(s[i]) >= 0) {
      if (n >= IR_MAX_RANK + 1) {
        snprintf(why, why_n, "a term with more than %d labels", IR_MAX_RANK);
        return -1;
      }
      dst[n++] = s[i++];
    } else {
      snprintf(why, why_n, "the character '%c'", s[i]);
      return -1;
    }
    if (n > IR_MAX_RANK + 1) {
      snprintf(why, why_n, "a term with more than %d labels", IR_MAX_RANK);
      return -1;
    }
  }
  dst[n] = '\0';
  return i;
}

static tolk_status parse_eq(const char *eqn, struct ein_eq *eq, tolk_error *err) {
  char s[512], why[96] = "";
  size_t n = 0;
  memset(eq, 0, sizeof *eq);
  for (const char *p = eqn; *p; p++) {
    if (isspace((unsigned char)*p)) continue;
    if (n + 1 >= sizeof s)
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "equation '%.64s…' is too long", eqn);
    s[n++] = *p;
  }
  s[n] = '\0';
  const char *p = s;
  for (;;) {
    if (eq->n_terms == EIN_MAX_TERMS) {
      snprintf(why, sizeof why, "more than %d operands", EIN_MAX_TERMS);
      goto bad;
    }
    int used = parse_term(p, eq->terms[eq->n_terms++], why, sizeof why);
    if (used < 0) goto bad;
    p += used;
    if (*p == ',') {
      p++;
      continue;
    }
    break;
  }
  if (*p == '-') {
    if (p[1] != '>') {
      snprintf(why, sizeof why, "'-' not followed by '>'");
      goto bad;
    }
    eq->explicit_out = true;
    int used = parse_term(p + 2, eq->out, why, sizeof why);
    if (used < 0) goto bad;
    p += 2 + used;
    if (*p) {
      snprintf(why, sizeof why, "text after the output term");
      goto bad;
    }
    bool seen[EIN_LETTERS] = {0};
    for (const char *q = eq->out; *q; q++) {
      int id = letter_id(*q);
      if (id < 0) continue;
      if (seen[id]) {
        snprintf(why, sizeof why, "output label '%c' repeated", *q);
        goto bad;
      }
      seen[id] = true;
      bool found = false;
      for (int t = 0; t < eq->n_terms && !found; t++) found = strchr(eq->terms[t], *q) != NULL;
      if (!found) {
        snprintf(why, sizeof why, "output label '%c' is in no operand", *q);
        goto bad;
      }
    }
  } else if (*p) {
    snprintf(why, sizeof why, "unexpected '%c'", *p);
    goto bad;
  }
  return TOLK_OK;
bad:
  return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "equation '%s': %s", eqn, why);
}

tolk_status einsum_prepare(const struct ir_node *node, int64_t opset, void **state,
                           tolk_error *err) {
  *state = NULL;
  const char *eqn = ir_attr_string(node, "equation", NULL);
  if (!eqn) return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "attribute 'equation' is required");
  struct ein_eq *eq = malloc(sizeof *eq);
  if (!eq) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  tolk_status st = parse_eq(eqn, eq, err);
  if (st) {
    free(eq);
    return st;
  }
  if ((size_t)eq->n_terms != node->n_inputs) {
    int nt = eq->n_terms;
    free(eq);
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "equation '%s' has %d operands, the node %zu",
                     eqn, nt, node->n_inputs);
  }
  *state = eq;
  return TOLK_OK;
}

void einsum_release(void *state) { free(state); }

/* ------------------------------------------------------------ run */

/* The equation bound to this run's input shapes. */
struct ein_bound {
  int n_in;
  int ell_rank;                  /* dims the ellipsis stands for (broadcast) */
  int64_t size[EIN_MAX_LABELS];  /* per label id; -1 if unused */
  int64_t stride[EIN_MAX_TERMS][EIN_MAX_LABELS]; /* per operand, per label */
  bool in_term[EIN_MAX_TERMS][EIN_MAX_LABELS];
  int repeats[EIN_MAX_TERMS]; /* labels repeated within the operand */
  bool bcast;                 /* some size-1 dim broadcasts */
  int out_rank;
  int out_labels[IR_MAX_RANK];
  int n_sum;
  int sum_labels[EIN_MAX_LABELS];
};

/* Label ids of term t for an operand of rank `rank`. */
static bool expand_term(const char *term, int rank, int ell_rank, int *ids, int *n_ids) {
  int letters = 0;
  bool ell = false;
  for (const char *q = term; *q; q++) {
    if (*q == '.') ell = true;
    else letters++;
  }
  int e = rank - letters;
  if (e < 0 || (!ell && e != 0) || e > ell_rank) return false;
  int n = 0;
  for (const char *q = term; *q; q++) {
    if (*q == '.') {
      for (int d = 0; d < e; d++) ids[n++] = EIN_ELL + (ell_rank - e) + d;
    } else {
      ids[n++] = letter_id(*q);
    }
  }
  *n_ids = n;
  return true;
}

static tolk_status bind(struct op_ctx *c, const struct ein_eq *eq, struct ein_bound *b) {
  char s1[128];
  memset(b, 0, sizeof *b);
  b->n_in = eq->n_terms;
  for (int l = 0; l < EIN_MAX_LABELS; l++) b->size[l] = -1;
  /* The ellipsis spans as many dims as the largest operand gives it. */
  for (int t = 0; t < b->n_in; t++) {
    int letters = 0;
    for (const char *q = eq->terms[t]; *q; q++) letters += *q != '.';
    int e = op_in(c, (size_t)t)->rank - letters;
    if (e > b->ell_rank) b->ell_rank = e;
  }
  for (int t = 0; t < b->n_in; t++) {
    const struct tensor *x = op_in(c, (size_t)t);
    int ids[IR_MAX_RANK + 1], n;
    if (!expand_term(eq->terms[t], x->rank, b->ell_rank, ids, &n))
      return op_fail(c, TOLK_ERR_SHAPE, "operand %d %s does not fit term '%s'", t,
                     shape_str(x, s1, sizeof s1), eq->terms[t]);
    int64_t st = 1;
    for (int d = n - 1; d >= 0; d--) {
      int l = ids[d];
      int64_t sz = x->dims[d];
      if (b->in_term[t][l]) {
        b->repeats[t]++;
        /* A repeated label (diagonal) must have one size within the operand. */
        int64_t prev = -1;
        for (int d2 = d + 1; d2 < n; d2++)
          if (ids[d2] == l) prev = x->dims[d2];
        if (prev != sz)
          return op_fail(c, TOLK_ERR_SHAPE, "operand %d %s: repeated label dims differ", t,
                         shape_str(x, s1, sizeof s1));
      }
      b->in_term[t][l] = true;
      if (sz != 1) {
        if (b->size[l] > 1 && b->size[l] != sz)
          return op_fail(c, TOLK_ERR_SHAPE,
                         "operand %d %s: a label's dim %lld disagrees with %lld elsewhere", t,
                         shape_str(x, s1, sizeof s1), (long long)sz, (long long)b->size[l]);
        if (b->size[l] == 1) b->bcast = true;
        b->size[l] = sz;
        b->stride[t][l] += st;
      } else {
        if (b->size[l] > 1) b->bcast = true;
        if (b->size[l] < 0) b->size[l] = 1;
      }
      st *= sz;
    }
  }
  /* Output labels: explicit, or "..." then the labels used once, sorted. */
  bool in_out[EIN_MAX_LABELS] = {0};
  int n = 0;
  if (eq->explicit_out) {
    /* Ellipsis dims the output leaves out are summed like any other label. */
    for (const char *q = eq->out; *q; q++) {
      if (*q == '.') {
        for (int d = 0; d < b->ell_rank; d++) b->out_labels[n++] = EIN_ELL + d;
      } else {
        b->out_labels[n++] = letter_id(*q);
      }
    }
  } else {
    for (int d = 0; d < b->ell_rank; d++) b->out_labels[n++] = EIN_ELL + d;
    const char *order = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    for (const char *q = order; *q; q++) {
      int l = letter_id(*q), uses = 0;
      for (int t = 0; t < b->n_in; t++)
        for (const char *r = eq->terms[t]; *r; r++) uses += *r == *q;
      if (uses == 1) b->out_labels[n++] = l;
    }
  }
  if (n > IR_MAX_RANK)
    return op_fail(c, TOLK_ERR_SHAPE, "the output would have rank %d (max %d)", n, IR_MAX_RANK);
  b->out_rank = n;
  for (int i = 0; i < n; i++) in_out[b->out_labels[i]] = true;
  for (int l = 0; l < EIN_MAX_LABELS; l++)
    if (b->size[l] >= 0 && !in_out[l]) b->sum_labels[b->n_sum++] = l;
  return TOLK_OK;
}

/* ------------------------------------------------------------ reference */

struct ref_job {
  const struct ein_bound *b;
  int32_t dt; /* the output's dtype; float16/bfloat16 read through double */
  const struct tensor *const *in;
  void *out;
  int64_t sum_count;
};

static double rd(const struct tensor *x, int64_t i) { return nn_get_f64(x, i); }

static bool is_int(int32_t dt) {
  return dt == TOLK_INT8 || dt == TOLK_INT16 || dt == TOLK_INT32 || dt == TOLK_INT64 ||
         dt == TOLK_UINT8 || dt == TOLK_UINT16 || dt == TOLK_UINT32 || dt == TOLK_UINT64;
}

static void ref_range(void *arg, int64_t o0, int64_t o1) {
  const struct ref_job *j = arg;
  const struct ein_bound *b = j->b;
  for (int64_t o = o0; o < o1; o++) {
    int64_t base[EIN_MAX_TERMS] = {0}, rest = o;
    for (int d = b->out_rank - 1; d >= 0; d--) {
      int l = b->out_labels[d];
      int64_t idx = rest % b->size[l];
      rest /= b->size[l];
      for (int t = 0; t < b->n_in; t++) base[t] += idx * b->stride[t][l];
    }
    double acc = 0;
    uint64_t iacc = 0;
    for (int64_t s = 0; s < j->sum_count; s++) {
      int64_t off[EIN_MAX_TERMS];
      memcpy(off, base, sizeof off);
      int64_t r = s;
      for (int d = b->n_sum - 1; d >= 0; d--) {
        int l = b->sum_labels[d];
        int64_t idx = r % b->size[l];
        r /= b->size[l];
        for (int t = 0; t < b->n_in; t++) off[t] += idx * b->stride[t][l];
      }
      if (is_int(j->dt)) {
        uint64_t prod = 1;
        for (int t = 0; t < b->n_in; t++) prod *= (uint64_t)nn_get_i64(j->in[t], off[t]);
        iacc += prod;
      } else {
        double prod = 1;
        for (int t = 0; t < b->n_in; t++) prod *= rd(j->in[t], off[t]);
        acc += prod;
      }
    }
    switch (j->dt) {
    case TOLK_INT8: ((int8_t *)j->out)[o] = (int8_t)(uint8_t)iacc; break;
    case TOLK_UINT8: ((uint8_t *)j->out)[o] = (uint8_t)iacc; break;
    case TOLK_INT16: ((int16_t *)j->out)[o] = (int16_t)(uint16_t)iacc; break;
    case TOLK_UINT16: ((uint16_t *)j->out)[o] = (uint16_t)iacc; break;
    case TOLK_INT32: ((int32_t *)j->out)[o] = (int32_t)(uint32_t)iacc; break;
    case TOLK_UINT32: ((uint32_t *)j->out)[o] = (uint32_t)iacc; break;
    case TOLK_INT64: ((int64_t *)j->out)[o] = (int64_t)iacc; break;
    case TOLK_UINT64: ((uint64_t *)j->out)[o] = iacc; break;
    case TOLK_DOUBLE: ((double *)j->out)[o] = acc; break;
    default: ((float *)j->out)[o] = (float)acc; break; /* float, and fp32 staging */
    }
  }
}

/* ------------------------------------------------------------ GEMM path */

/* Permutes x (labels `ids`, strides from b for operand t) into dense `dst`
 * in label order `ids`. */
static void gather(struct op_ctx *c, const struct ein_bound *b, int t, const int *ids, int n,
                   const float *src, float *dst) {
  struct dm_copy p;
  int64_t dims[DM_MAX_RANK], st[DM_MAX_RANK];
  for (int i = 0; i < n; i++) {
    dims[i] = b->size[ids[i]];
    st[i] = b->stride[t][ids[i]];
  }
  if (n == 0) {
    dst[0] = src[0];
    return;
  }
  dm_plan_dense_dst(&p, n, dims, st);
  dm_strided(c, &p, dst, src, sizeof(float));
}

/* Two float operands, no diagonal, no broadcast, no label of one operand
 * alone: C[batch, m, n] = A[batch, m, k] · B[batch, k, n]. Returns false when
 * the equation is not of that form (nothing done), true with *st set else. */
static bool try_gemm(struct op_ctx *c, const struct ein_bound *b, const float *a,
                     const float *bb, float *y, tolk_status *st) {
  if (b->n_in != 2 || b->bcast || b->repeats[0] || b->repeats[1]) return false;
  bool in_out[EIN_MAX_LABELS] = {0};
  for (int i = 0; i < b->out_rank; i++) in_out[b->out_labels[i]] = true;
  int bl[EIN_MAX_LABELS], ml[EIN_MAX_LABELS], nl[EIN_MAX_LABELS], kl[EIN_MAX_LABELS];
  int nb = 0, nm = 0, nn = 0, nk = 0;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  for (int l = 0; l < EIN_MAX_LABELS; l++) {
    if (b->size[l] < 0) continue;
    bool ia = b->in_term[0][l], ib = b->in_term[1][l], io = in_out[l];
    if (ia && ib && io) bl[nb++] = l, batch *= b->size[l];
    else if (ia && io) ml[nm++] = l, m *= b->size[l];
    else if (ib && io) nl[nn++] = l, n *= b->size[l];
    else if (ia && ib) kl[nk++] = l, k *= b->size[l];
    else return false; /* summed within one operand: the reference does it */
  }
  int ida[DM_MAX_RANK], idb[DM_MAX_RANK], idy[DM_MAX_RANK];
  int na = 0, nbb = 0, ny = 0;
  for (int i = 0; i < nb; i++) ida[na++] = idb[nbb++] = idy[ny++] = bl[i];
  for (int i = 0; i < nm; i++) ida[na++] = idy[ny++] = ml[i];
  for (int i = 0; i < nk; i++) ida[na++] = idb[nbb++] = kl[i];
  for (int i = 0; i < nn; i++) idb[nbb++] = idy[ny++] = nl[i];
  size_t ea = (size_t)(batch * m * k), eb = (size_t)(batch * k * n), ey = (size_t)(batch * m * n);
  float *pa = op_scratch(c, (ea ? ea : 1) * sizeof(float));
  float *pb = pa ? op_scratch(c, (eb ? eb : 1) * sizeof(float)) : NULL;
  float *py = pb ? op_scratch(c, (ey ? ey : 1) * sizeof(float)) : NULL;
  if (!py) {
    *st = nn_status(c);
    return true;
  }
  if (ea) gather(c, b, 0, ida, na, a, pa);
  if (eb) gather(c, b, 1, idb, nbb, bb, pb);
  struct mm_batch bt = {.rank = 1, .dims = {batch}, .a_st = {m * k}, .b_st = {k * n}};
  if (ey) mm_batched(c, TOLK_FLOAT, &bt, m, n, k, pa, pb, py);
  /* [batch, m, n] into the output's label order. */
  if (ey) {
    struct dm_copy p;
    int64_t dims[DM_MAX_RANK], sst[DM_MAX_RANK], pos[EIN_MAX_LABELS], s = 1;
    for (int i = ny - 1; i >= 0; i--) {
      pos[idy[i]] = s;
      s *= b->size[idy[i]];
    }
    for (int i = 0; i < b->out_rank; i++) {
      dims[i] = b->size[b->out_labels[i]];
      sst[i] = pos[b->out_labels[i]];
    }
    if (b->out_rank == 0) {
      y[0] = py[0];
    } else {
      dm_plan_dense_dst(&p, b->out_rank, dims, sst);
      dm_strided(c, &p, y, py, sizeof(float));
    }
  }
  *st = TOLK_OK;
  return true;
}

tolk_status einsum_run(struct op_ctx *c) {
  const struct ein_eq *eq = c->state;
  char s1[128];
  if (!eq) return op_fail(c, TOLK_ERR_INTERNAL, "Einsum was not prepared");
  if ((int)c->n_in != eq->n_terms)
    return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "%zu inputs for %d terms", c->n_in, eq->n_terms);
  const struct tensor *x0 = op_in(c, 0);
  for (int t = 0; t < eq->n_terms; t++) {
    const struct tensor *x = op_in(c, (size_t)t);
    if (!x) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "input %d is missing", t);
    if (x->dtype != x0->dtype)
      return op_fail(c, TOLK_ERR_TYPE, "input %d is %s but input 0 is %s", t,
                     tolk_dtype_name((tolk_dtype)x->dtype), tolk_dtype_name((tolk_dtype)x0->dtype));
    if (!mm_dtype_ok(x->dtype) && !is_int(x->dtype))
      return op_fail(c, TOLK_ERR_UNSUPPORTED, "input %d %s: dtype %s is not supported", t,
                     shape_str(x, s1, sizeof s1), tolk_dtype_name((tolk_dtype)x->dtype));
  }
  struct ein_bound *b = op_scratch(c, sizeof *b);
  if (!b) return nn_status(c);
  tolk_status st = bind(c, eq, b);
  if (st) return st;
  int64_t ydims[IR_MAX_RANK];
  for (int i = 0; i < b->out_rank; i++) ydims[i] = b->size[b->out_labels[i]];
  struct tensor *y = op_output(c, 0, x0->dtype, b->out_rank, ydims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  int64_t sum_count = 1;
  for (int i = 0; i < b->n_sum; i++) {
    if (!tolk_mul_i64(sum_count, b->size[b->sum_labels[i]], &sum_count))
      return op_fail(c, TOLK_ERR_LIMIT, "the summed labels span too many values");
  }
  const int32_t dt = x0->dtype;
  struct ref_job j = {b, dt, c->in, y->data, sum_count};
  float *yf = NULL;
  if (dt == TOLK_FLOAT || dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16) {
    if (!(yf = nn_out_f32(c, y))) return nn_status(c);
    j.dt = TOLK_FLOAT;
    j.out = yf;
    if (b->n_in == 2) {
      const float *a = nn_in_f32(c, op_in(c, 0)), *bb = a ? nn_in_f32(c, op_in(c, 1)) : NULL;
      if (!bb) return nn_status(c);
      if (try_gemm(c, b, a, bb, yf, &st)) {
        if (st) return st;
        if (yf != y->data) nn_out_f32_finish(y, yf);
        return TOLK_OK;
      }
    }
  }
  int64_t grain = sum_count > 65536 ? 1 : 65536 / (sum_count ? sum_count : 1);
  op_parallel_for(c, y->numel, grain, ref_range, &j);
  if (yf && yf != y->data) nn_out_f32_finish(y, yf);
  return TOLK_OK;
}
