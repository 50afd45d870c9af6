/*
 * matmul.c — MatMul and Gemm (Einsum, in einsum.c, shares the batched GEMM).
 *
 * MatMul follows numpy.matmul: 1-D operands are promoted (A to a row, B to a
 * column) and the promoted dim dropped from the result; leading dims
 * broadcast. Gemm computes alpha·op(A)·op(B) + beta·C with C broadcast
 * unidirectionally to the result (required before opset 11).
 *
 * float runs on kern_sgemm. When B is an initializer (and not a graph input a
 * caller could override), prepare() packs it once for kern_sgemm_packed
 * (matmul_pack.c), so a decoder step streams each weight matrix once in the
 * layout the micro-kernel reads; a run over a vocabulary shortlist multiplies
 * by that matrix's columns alone (matmul_subset.c). A MatMul whose B has no
 * batch dims folds A's batch into the rows:
 * [batch, seq, d] × [d, n] is one GEMM of batch·seq rows. float16/bfloat16
 * are staged through fp32 (packed weights are widened once, at prepare);
 * double accumulates in double; integer types wrap like numpy's.
 */
#include <string.h>

#include "../core/pool.h"
#include "matmul_impl.h"
#include "nn_util.h"
#include "quant_util.h"

bool mm_dtype_ok(int32_t dt) {
  return dt == TOLK_FLOAT || dt == TOLK_DOUBLE || dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16 ||
         dt == TOLK_INT32 || dt == TOLK_INT64 || dt == TOLK_UINT32 || dt == TOLK_UINT64;
}

/* ------------------------------------------------ references: double, int */

static uint64_t get_u64(int32_t dt, const void *p, int64_t i) {
  switch (dt) {
  case TOLK_INT32: return (uint64_t)(int64_t)((const int32_t *)p)[i];
  case TOLK_UINT32: return ((const uint32_t *)p)[i];
  case TOLK_INT64: return (uint64_t)((const int64_t *)p)[i];
  default: return ((const uint64_t *)p)[i];
  }
}

static void set_u64(int32_t dt, void *p, int64_t i, uint64_t v) {
  switch (dt) {
  case TOLK_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)v; break;
  case TOLK_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case TOLK_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
  default: ((uint64_t *)p)[i] = v; break;
  }
}

static bool is_signed(int32_t dt) { return dt == TOLK_INT32 || dt == TOLK_INT64; }

/* C = alpha·op(A)·op(B) + beta·C for double and the integer types (beta == 0:
 * C write-only). Integers accumulate modulo 2^64 and wrap into their width;
 * alpha and beta other than 0 and 1 go through double, as ONNX's reference
 * does. */
static void gemm_ref_any(int32_t dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                         double beta, void *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      const int64_t ci = i * ldc + j;
      if (dt == TOLK_DOUBLE) {
        const double *ad = a, *bd = b;
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += ad[ta ? p * lda + i : i * lda + p] * bd[tb ? j * ldb + p : p * ldb + j];
        double *cd = c;
        cd[ci] = alpha * acc + (beta == 0 ? 0.0 : beta * cd[ci]);
        continue;
      }
      uint64_t acc = 0;
      for (int64_t p = 0; p < k; p++)
        acc += get_u64(dt, a, ta ? p * lda + i : i * lda + p) *
               get_u64(dt, b, tb ? j * ldb + p : p * ldb + j);
      if (alpha == 1 && (beta == 0 || beta == 1)) {
        set_u64(dt, c, ci, acc + (beta == 0 ? 0 : get_u64(dt, c, ci)));
      } else {
        double av = is_signed(dt) ? (double)(int64_t)acc : (double)acc;
        double cv = beta == 0 ? 0.0
                    : is_signed(dt) ? (double)(int64_t)get_u64(dt, c, ci)
                                    : (double)get_u64(dt, c, ci);
        double v = alpha * av + beta * cv;
        set_u64(dt, c, ci, is_signed(dt) ? (uint64_t)(int64_t)v : (uint64_t)v);
      }
    }
  }
}

/* ----------------------------------------------------------- batched GEMM */

struct bjob {
  int32_t dt;
  const struct mm_batch *bt;
  int64_t m, n, k;
  const char *a, *b;
  char *c;
  size_t es;
  struct tolk_pool *inner; /* pool for each product; NULL when split by batch */
};

bool mm_broadcast(const struct tensor *a, const struct tensor *b, int64_t m, int64_t n, int64_t k,
                  struct mm_batch *bt, int64_t *ydims, int *yrank) {
  const int ra = a->rank, rb = b->rank;
  const int na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0, nbt = na > nb ? na : nb;
  int64_t ast = m * k, bst = k * n; /* element strides of the batch dims, innermost first */
  bt->rank = nbt;
  for (int d = nbt - 1; d >= 0; d--) {
    int ia = d - (nbt - na), ib = d - (nbt - nb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    bt->dims[d] = da == 1 ? db : da;
    bt->a_st[d] = da == 1 ? 0 : ast;
    bt->b_st[d] = db == 1 ? 0 : bst;
    ast *= da;
    bst *= db;
    ydims[d] = bt->dims[d];
  }
  int yr = nbt;
  if (ra > 1) ydims[yr++] = m;
  if (rb > 1) ydims[yr++] = n;
  *yrank = yr;
  return true;
}

void mm_batch_offsets(const struct mm_batch *bt, int64_t t, int64_t *ao, int64_t *bo) {
  *ao = *bo = 0;
  for (int d = bt->rank - 1; d >= 0; d--) {
    int64_t idx = t % bt->dims[d];
    t /= bt->dims[d];
    *ao += idx * bt->a_st[d];
    *bo += idx * bt->b_st[d];
  }
}

static void bjob_range(void *arg, int64_t t0, int64_t t1) {
  const struct bjob *j = arg;
  for (int64_t t = t0; t < t1; t++) {
    int64_t ao, bo;
    mm_batch_offsets(j->bt, t, &ao, &bo);
    const void *a = j->a + (size_t)ao * j->es, *b = j->b + (size_t)bo * j->es;
    void *c = j->c + (size_t)(t * j->m * j->n) * j->es;
    if (j->dt == TOLK_FLOAT)
      kern_sgemm(false, false, j->m, j->n, j->k, 1.0f, a, j->k, b, j->n, 0.0f, c, j->n,
                 j->inner);
    else
      gemm_ref_any(j->dt, false, false, j->m, j->n, j->k, 1.0, a, j->k, b, j->n, 0.0, c, j->n);
  }
}

void mm_batched(struct op_ctx *c, int32_t dtype, const struct mm_batch *bt, int64_t m,
                int64_t n, int64_t k, const void *a, const void *b, void *out) {
  int64_t batch = 1;
  for (int d = 0; d < bt->rank; d++) batch *= bt->dims[d];
  struct bjob j = {dtype, bt, m, n, k, a, b, out, op_dtype_size(dtype), c->pool};
  if (batch <= 0 || m <= 0 || n <= 0) return;
  mm_split(c, batch, 2.0 * (double)m * (double)n * (double)k, bjob_range, &j, &j.inner);
}

void mm_split(struct op_ctx *c, int64_t batch, double flops, op_range_fn fn, void *arg,
              struct tolk_pool **inner) {
  /* Many small products (attention heads): one per task, each serial. One
   * large one: let the GEMM split itself. */
  if (batch > 1 && tolk_pool_threads(c->pool) > 1 && flops < 4e6) {
    *inner = NULL;
    int64_t grain = (int64_t)(262144.0 / (flops + 1.0));
    op_parallel_for(c, batch, grain < 1 ? 1 : grain, fn, arg);
  } else {
    fn(arg, 0, batch);
  }
}

/* ------------------------------------------------------------------ MatMul */

static tolk_status matmul_prepare(const struct ir_node *node, int64_t opset, void **state,
                                  tolk_error *err) {
  return mm_pack_b(node, false, MM_F32, state, err);
}

static tolk_status matmul_bf16_prepare(const struct ir_node *node, int64_t opset, void **state,
                                       tolk_error *err) {
  return mm_pack_b(node, false, MM_BF16, state, err);
}

static tolk_status matmul_bf16dot_prepare(const struct ir_node *node, int64_t opset, void **state,
                                          tolk_error *err) {
  return mm_pack_b(node, false, MM_BF16DOT, state, err);
}

static tolk_status check_pair(struct op_ctx *c, const struct tensor *a, const struct tensor *b) {
  if (!a || !b) return op_fail(c, TOLK_ERR_INVALID_ARGUMENT, "inputs A and B are required");
  if (a->dtype != b->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "A is %s but B is %s",
                   tolk_dtype_name((tolk_dtype)a->dtype), tolk_dtype_name((tolk_dtype)b->dtype));
  if (!mm_dtype_ok(a->dtype))
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "dtype %s is not supported",
                   tolk_dtype_name((tolk_dtype)a->dtype));
  return TOLK_OK;
}

int mm_widen_rank(int64_t *dims, int rank, int min_rank) {
  if (min_rank <= rank || min_rank > IR_MAX_RANK) return rank;
  memmove(dims + (min_rank - rank), dims, (size_t)rank * sizeof *dims);
  for (int d = 0; d < min_rank - rank; d++) dims[d] = 1;
  return min_rank;
}

/* y[.., j] += bias[j], the n floats of bias over the last dim, as Add. */
static void add_bias_rows(float *y, int64_t numel, const float *bias, int64_t n) {
  for (int64_t i = 0; i < numel; i += n)
    for (int64_t j = 0; j < n; j++) y[i + j] = y[i + j] + bias[j];
}

/* The fused bias (input 2 of the MatMul + Add pairs src/exec/fuse_bias.c
 * joins): n floats, as [n] or [1, .., 1, n] (a model's final_logits_bias
 * is [1, n]). */
static tolk_status bias_input(struct op_ctx *c, int64_t n, const struct tensor **out) {
  const struct tensor *t = op_in(c, 2);
  char s1[128];
  if (!t || t->dtype != TOLK_FLOAT || t->rank < 1 || t->numel != n || t->dims[t->rank - 1] != n)
    return op_fail(c, TOLK_ERR_SHAPE, "the bias %s does not broadcast to the product's %lld columns",
                   t ? shape_str(t, s1, sizeof s1) : "(missing)", (long long)n);
  *out = t;
  return TOLK_OK;
}

/* The head of a run restricted to a shortlist, with its bias when fused
 * (the gathered entries, src/exec/head.c). */
static tolk_status head_cols_biased(struct op_ctx *c, const struct op_head_subset *hs, bool biased) {
  if (biased && !hs->bias) return op_fail(c, TOLK_ERR_INTERNAL, "LM head subset: the fused bias was not gathered");
  const struct tensor *t = biased ? op_in(c, 2) : NULL;
  return mm_head_cols_run(c, hs, biased ? hs->bias : NULL, t ? t->rank : 0);
}

/* MatMul, and with `biased` MatMul + Add of a bias vector (input 2) as one
 * node: the packed product adds it per tile (kern_sgemm_packed_bias), the
 * other paths after the product — the same bits as the two nodes. */
static tolk_status matmul_common(struct op_ctx *c, bool biased) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  const struct op_head_subset *hs = op_head_subset(c);
  if (c->state && hs && hs->head_state == c->state) return head_cols_biased(c, hs, biased);
  tolk_status st = check_pair(c, a, b);
  if (st) return st;
  char s1[128], s2[128];
  if (a->rank < 1 || b->rank < 1)
    return op_fail(c, TOLK_ERR_SHAPE, "A %s and B %s must have rank >= 1",
                   shape_str(a, s1, sizeof s1), shape_str(b, s2, sizeof s2));
  const int ra = a->rank, rb = b->rank;
  const int64_t m = ra == 1 ? 1 : a->dims[ra - 2], k = a->dims[ra - 1];
  const int64_t kb = rb == 1 ? b->dims[0] : b->dims[rb - 2], n = rb == 1 ? 1 : b->dims[rb - 1];
  if (k != kb)
    return op_fail(c, TOLK_ERR_SHAPE, "A %s and B %s: inner dims %lld and %lld differ",
                   shape_str(a, s1, sizeof s1), shape_str(b, s2, sizeof s2), (long long)k,
                   (long long)kb);
  struct mm_batch bt;
  int64_t ydims[IR_MAX_RANK];
  int yr;
  if (!mm_broadcast(a, b, m, n, k, &bt, ydims, &yr))
    return op_fail(c, TOLK_ERR_SHAPE, "A %s and B %s: batch dims do not broadcast",
                   shape_str(a, s1, sizeof s1), shape_str(b, s2, sizeof s2));
  const struct tensor *bias = NULL;
  if (biased && a->dtype != TOLK_FLOAT) return op_fail(c, TOLK_ERR_UNSUPPORTED, "a fused bias needs float operands");
  if (biased && (st = bias_input(c, n, &bias))) return st;
  if (bias) yr = mm_widen_rank(ydims, yr, bias->rank);
  struct tensor *y = op_output(c, 0, a->dtype, yr, ydims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;

  int64_t batch = 1;
  bool b_shared = true; /* B is the same matrix for every batch index */
  for (int d = 0; d < bt.rank; d++) {
    batch *= bt.dims[d];
    if (bt.b_st[d] != 0) b_shared = false;
  }
  int32_t dt = a->dtype;
  const void *ad = a->data, *bd = b->data;
  void *yd = y->data;
  const struct kern_packed_b *pb = NULL;
  if (dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16) {
    pb = mm_packed_for(c, b);
    if (!(ad = nn_in_f32(c, a)) || (!pb && !(bd = nn_in_f32(c, b))) || !(yd = nn_out_f32(c, y)))
      return nn_status(c);
    dt = TOLK_FLOAT;
  } else if (dt == TOLK_FLOAT) {
    pb = mm_packed_for(c, b);
  }
  if (b_shared && dt == TOLK_FLOAT) {
    /* A's batch is then dense (nothing to broadcast it against), so its rows
     * continue from one batch index into the next: one GEMM of batch·m rows. */
    if (pb && bias) {
      kern_sgemm_packed_bias(batch * m, n, k, ad, k, pb, bias->data, yd, n, c->pool);
      bias = NULL;
    } else if (pb) {
      kern_sgemm_packed(false, batch * m, n, k, 1.0f, ad, k, pb, 0.0f, yd, n, c->pool);
    } else {
      kern_sgemm(false, false, batch * m, n, k, 1.0f, ad, k, bd, n, 0.0f, yd, n, c->pool);
    }
  } else {
    mm_batched(c, dt, &bt, m, n, k, ad, bd, yd);
  }
  if (bias) add_bias_rows(yd, y->numel, bias->data, n);
  if (yd != y->data) nn_out_f32_finish(y, yd);
  return TOLK_OK;
}

static tolk_status matmul_run(struct op_ctx *c) { return matmul_common(c, false); }
static tolk_status matmul_bias_run(struct op_ctx *c) { return matmul_common(c, true); }

/* -------------------------------------------------------------------- Gemm */

static tolk_status gemm_prepare(const struct ir_node *node, int64_t opset, void **state,
                                tolk_error *err) {
  return mm_pack_b(node, ir_attr_int(node, "transB", 0) != 0, MM_F32, state, err);
}

static tolk_status gemm_bf16_prepare(const struct ir_node *node, int64_t opset, void **state,
                                     tolk_error *err) {
  return mm_pack_b(node, ir_attr_int(node, "transB", 0) != 0, MM_BF16, state, err);
}

static tolk_status gemm_bf16dot_prepare(const struct ir_node *node, int64_t opset, void **state,
                                        tolk_error *err) {
  return mm_pack_b(node, ir_attr_int(node, "transB", 0) != 0, MM_BF16DOT, state, err);
}

/* C's broadcast to the m×n result: its rows *c0 (1 or m) and columns *c1
 * (1 or n). False when C's shape does not broadcast unidirectionally
 * (rank ≤ 2, each dim 1 or equal). */
static bool c_shape(const struct tensor *ct, int64_t m, int64_t n, int64_t *c0, int64_t *c1) {
  *c0 = *c1 = 1;
  if (ct->rank == 2) *c0 = ct->dims[0], *c1 = ct->dims[1];
  if (ct->rank == 1) *c1 = ct->dims[0];
  return ct->rank <= 2 && (*c0 == 1 || *c0 == m) && (*c1 == 1 || *c1 == n);
}

/* Writes C (c0 × c1) broadcast to m×n into y, es bytes per element. */
static void fill_c(const void *cdata, int64_t c0, int64_t c1, size_t es, int64_t m, int64_t n, void *y) {
  for (int64_t i = 0; i < m; i++) {
    char *row = (char *)y + (size_t)(i * n) * es;
    const char *src = (const char *)cdata + (size_t)((c0 == 1 ? 0 : i) * c1) * es;
    if (c1 == n) {
      memcpy(row, src, (size_t)n * es);
    } else {
      for (int64_t j = 0; j < n; j++) memcpy(row + (size_t)j * es, src, es);
    }
  }
}

/* y += beta·C (c0 × c1) broadcast to the n columns of y, rows [begin,
 * end), once the product is in y. With beta 1 this is Add's y + C: MatMul
 * then Add, which tolk optimize fuses into Gemm (src/ir/fuse.c), gives
 * these very bits. Adding C at the kernel's first k block instead (C
 * prefilled, kernel beta 1) would round differently once k spans more
 * than one block. */
struct add_c_job {
  const float *cd;
  int64_t c0, c1, n;
  float beta;
  float *y;
};

static void add_c_rows(void *arg, int64_t begin, int64_t end) {
  const struct add_c_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    float *row = j->y + i * j->n;
    const float *src = j->cd + (j->c0 == 1 ? 0 : i) * j->c1;
    if (j->c1 == j->n) {
      for (int64_t x = 0; x < j->n; x++) row[x] += j->beta * src[x];
    } else {
      for (int64_t x = 0; x < j->n; x++) row[x] += j->beta * src[0];
    }
  }
}

static tolk_status gemm_run(struct op_ctx *c) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1), *ct = op_in(c, 2);
  tolk_status st = check_pair(c, a, b);
  if (st) return st;
  char s1[128], s2[128];
  if (a->rank != 2 || b->rank != 2)
    return op_fail(c, TOLK_ERR_SHAPE, "A %s and B %s must be matrices",
                   shape_str(a, s1, sizeof s1), shape_str(b, s2, sizeof s2));
  if (ct && ct->dtype != a->dtype)
    return op_fail(c, TOLK_ERR_TYPE, "C is %s but A is %s",
                   tolk_dtype_name((tolk_dtype)ct->dtype), tolk_dtype_name((tolk_dtype)a->dtype));
  const bool ta = ir_attr_int(c->node, "transA", 0) != 0;
  const bool tb = ir_attr_int(c->node, "transB", 0) != 0;
  const float alpha = ir_attr_float(c->node, "alpha", 1.0f);
  const float beta = ir_attr_float(c->node, "beta", 1.0f);
  const int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
  const int64_t kb = tb ? b->dims[1] : b->dims[0], n = tb ? b->dims[0] : b->dims[1];
  if (k != kb)
    return op_fail(c, TOLK_ERR_SHAPE, "A %s (transA=%d) and B %s (transB=%d): inner dims differ",
                   shape_str(a, s1, sizeof s1), ta, shape_str(b, s2, sizeof s2), tb);
  struct tensor *y = op_output(c, 0, a->dtype, 2, (int64_t[]){m, n});
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;

  int32_t dt = a->dtype;
  const void *ad = a->data, *bd = b->data, *cd = ct ? ct->data : NULL;
  void *yd = y->data;
  const struct kern_packed_b *pb = NULL;
  if (dt == TOLK_FLOAT16 || dt == TOLK_BFLOAT16) {
    pb = mm_packed_for(c, b);
    if (!(ad = nn_in_f32(c, a)) || (!pb && !(bd = nn_in_f32(c, b))) ||
        (ct && !(cd = nn_in_f32(c, ct))) || !(yd = nn_out_f32(c, y)))
      return nn_status(c);
    dt = TOLK_FLOAT;
  } else if (dt == TOLK_FLOAT) {
    pb = mm_packed_for(c, b);
  }
  const bool use_c = ct && beta != 0.0f;
  int64_t c0, c1;
  if (use_c && !c_shape(ct, m, n, &c0, &c1))
    return op_fail(c, TOLK_ERR_SHAPE, "C %s does not broadcast to the result [%lld, %lld]",
                   shape_str(ct, s1, sizeof s1), (long long)m, (long long)n);
  const int64_t lda = a->dims[1], ldb = b->dims[1];
  if (dt == TOLK_FLOAT) {
    if (pb)
      kern_sgemm_packed(ta, m, n, k, alpha, ad, lda, pb, 0.0f, yd, n, c->pool);
    else
      kern_sgemm(ta, tb, m, n, k, alpha, ad, lda, bd, ldb, 0.0f, yd, n, c->pool);
    if (use_c) {
      struct add_c_job j = {cd, c0, c1, n, beta, yd};
      op_parallel_for(c, m, n >= 4096 ? 1 : 4096 / n, add_c_rows, &j);
    }
  } else {
    /* The reference sums each element in one go: C prefilled is added once. */
    if (use_c) fill_c(cd, c0, c1, op_dtype_size(dt), m, n, yd);
    gemm_ref_any(dt, ta, tb, m, n, k, alpha, ad, lda, bd, ldb, use_c ? beta : 0.0, yd, n);
  }
  if (yd != y->data) nn_out_f32_finish(y, yd);
  return TOLK_OK;
}

/* ------------------------------------------------------------ int8 MatMul */

/* tolk_matmul_int8_def (op.h; a session's int8_lm_head, src/exec/lm_head.c).
 * Each row i of A gets its own uint8 scale and zero point (ORT's
 * DynamicQuantizeLinear, applied to the row alone), kern_igemm_packed forms
 * the exact sums C[i][j] = sum_p (qa[i][p] - za_i) * qb[p][j], and
 * y[i][j] = C[i][j] * sa_i * s_j, on the way out of the GEMM's tiles
 * (kern_igemm_f32, chained). */
static tolk_status matmul_int8_prepare(const struct ir_node *node, int64_t opset, void **state,
                                       tolk_error *err) {
  return mm_pack_b(node, false, MM_INT8, state, err);
}

/* y = A · op(B) for a B quantized to int8 per column (qb, col_scale): each
 * row of A quantized on its own, as the comment above says. */
tolk_status mm_int8_product(struct op_ctx *c, const struct tensor *a, const struct kern_igemm_b *qb,
                                const float *col_scale, int64_t n, const float *bias, int min_rank) {
  const int64_t k = qb->k;
  int64_t ydims[IR_MAX_RANK];
  memcpy(ydims, a->dims, sizeof ydims);
  ydims[a->rank - 1] = n;
  int yr = mm_widen_rank(ydims, a->rank, min_rank);
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, yr, ydims);
  if (!y) return nn_status(c);
  const int64_t m = k ? a->numel / k : 0;
  if (y->numel == 0) return TOLK_OK;
  size_t qbytes, wbytes = kern_igemm_work_size(m, k);
  uint8_t *qa = NULL;
  int32_t *za = NULL;
  float *sa = NULL;
  void *work = NULL;
  if (!tolk_mul_size((size_t)m, (size_t)k, &qbytes) || !wbytes || !(qa = op_scratch(c, qbytes + 1)) ||
      !(za = op_scratch(c, (size_t)m * sizeof *za)) || !(sa = op_scratch(c, (size_t)m * sizeof *sa)) ||
      !(work = op_scratch(c, wbytes)))
    return nn_status(c);
  const float *ad = a->data;
  for (int64_t i = 0; i < m; i++) {
    quant_dynamic_params_u8(ad + i * k, k, &sa[i], &za[i]);
    quant_linear_u8(ad + i * k, qa + i * k, k, sa[i], za[i]);
  }
  struct kern_igemm_f32 f = {.c = y->data, .ldc = n, .row_scale = sa, .row_scale_stride = 1,
                             .col_scale = col_scale, .col_scale_stride = 1, .chained = true, .bias = bias};
  struct kern_igemm p = {.m = m, .n = n, .k = k, .a = qa, .lda = k, .a_signed = false,
                         .a_zp = za, .a_zp_stride = 1, .f32 = &f};
  kern_igemm_packed(&p, qb, work, c->pool);
  return TOLK_OK;
}

static tolk_status int8_common(struct op_ctx *c, bool biased) {
  const struct tensor *a = op_in(c, 0), *b = op_in(c, 1);
  const struct mm_state *s = c->state;
  const struct op_head_subset *hs = op_head_subset(c);
  if (s && hs && hs->head_state == s) return head_cols_biased(c, hs, biased);
  /* A B that was not constant (no state), or not the one packed: MatMul. */
  if (!s || !a || !b || b->dtype != s->dtype || b->rank != 2 || b->dims[0] != s->d0 ||
      b->dims[1] != s->d1 || a->dtype != TOLK_FLOAT || a->rank < 1)
    return matmul_common(c, biased);
  char s1[128], s2[128];
  if (a->dims[a->rank - 1] != s->d0)
    return op_fail(c, TOLK_ERR_SHAPE, "A %s and B %s: inner dims %lld and %lld differ",
                   shape_str(a, s1, sizeof s1), shape_str(b, s2, sizeof s2),
                   (long long)a->dims[a->rank - 1], (long long)s->d0);
  const struct tensor *bias = NULL;
  tolk_status st = biased ? bias_input(c, s->d1, &bias) : TOLK_OK;
  if (st) return st;
  return mm_int8_product(c, a, &s->e->qb, s->e->col_scale, s->d1, bias ? bias->data : NULL,
                         bias ? bias->rank : 0);
}

static tolk_status matmul_int8_run(struct op_ctx *c) { return int8_common(c, false); }
static tolk_status matmul_int8_bias_run(struct op_ctx *c) { return int8_common(c, true); }

const struct op_def tolk_matmul_int8_def = {
    "tolk.internal", "MatMulInt8", 1, 0, matmul_int8_prepare, matmul_int8_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};

/* tolk_session_params.bf16_weights (src/exec/bf16.c): MatMul and Gemm with
 * a constant float B held as bfloat16; run() is theirs, the packed product
 * widening B as it goes (kern_sgemm_pack_b_bf16). */
const struct op_def tolk_matmul_bf16_def = {
    "tolk.internal", "MatMulBf16", 1, 0, matmul_bf16_prepare, matmul_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};

/* bf16_weights TOLK_BF16_PRODUCTS: the same with B as bfloat16 pairs
 * (kern_sgemm_pack_b_bf16dot), A rounded as the product reads it. */
const struct op_def tolk_matmul_bf16dot_def = {
    "tolk.internal", "MatMulBf16Dot", 1, 0, matmul_bf16dot_prepare, matmul_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};

/* src/exec/fuse_bias.c: MatMul (float, bfloat16 or int8 weights) and the
 * Add of a constant bias vector after it, as one node. */
const struct op_def tolk_matmul_bias_def = {
    "tolk.internal", "MatMulBias", 1, 0, matmul_prepare, matmul_bias_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};
const struct op_def tolk_matmul_bf16_bias_def = {
    "tolk.internal", "MatMulBf16Bias", 1, 0, matmul_bf16_prepare, matmul_bias_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};
const struct op_def tolk_matmul_bf16dot_bias_def = {
    "tolk.internal", "MatMulBf16DotBias", 1, 0, matmul_bf16dot_prepare, matmul_bias_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};
const struct op_def tolk_matmul_int8_bias_def = {
    "tolk.internal", "MatMulInt8Bias", 1, 0, matmul_int8_prepare, matmul_int8_bias_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};
const struct op_def tolk_gemm_bf16_def = {
    "tolk.internal", "GemmBf16", 1, 0, gemm_bf16_prepare, gemm_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};

const struct op_def tolk_gemm_bf16dot_def = {
    "tolk.internal", "GemmBf16Dot", 1, 0, gemm_bf16dot_prepare, gemm_run, mm_release,
    .packed_input = mm_packed_input, .packed_src_dropped = mm_packed_src_dropped};

const struct op_def tolk_ops_matmul[] = {
    {"", "MatMul", 1, 0, matmul_prepare, matmul_run, mm_release, .packed_input = mm_packed_input,
     .packed_src_dropped = mm_packed_src_dropped},
    {"", "Gemm", 1, 0, gemm_prepare, gemm_run, mm_release, .packed_input = mm_packed_input,
     .packed_src_dropped = mm_packed_src_dropped},
    {"", "Einsum", 12, 0, einsum_prepare, einsum_run, einsum_release},
    {0},
};
