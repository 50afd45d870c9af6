/*
 * matmul_subset.c — the LM head run over a vocabulary shortlist's columns
 * (op.h's op_head_cols; the translator's --vmap, through src/exec/head.c):
 * the shortlist's columns of the B a MatMul or MatMulInt8 node packed are
 * gathered from the initializer it packed, packed the same way (fp32, or
 * int8 with a scale per column), and multiplied by instead of the whole B,
 * so that column j of the result is column cols[j] of the full product,
 * bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "matmul_impl.h"
#include "nn_util.h"

struct op_head_cols {
  const void *state; /* the node state it was gathered for */
  int64_t k, n;
  struct kern_packed_b *pb; /* fp32 and bf16 heads */
  struct kern_igemm_b qb;   /* int8 heads, with col_scale */
  float *col_scale;
};

bool op_head_cols_dims(const void *state, int64_t *k, int64_t *n) {
  const struct mm_state *s = state;
  if (!s) return false;
  *k = s->d0;
  *n = s->d1;
  return true;
}

/* Element i of the initializer the entry was packed from, as the packing
 * widened it (new_entry in matmul_pack.c). */
static float source_at(const struct packed_entry *e, const void *src, int64_t i) {
  const unsigned char *p = src;
  switch (e->dtype) {
  case TOLK_FLOAT16:
  case TOLK_BFLOAT16: {
    uint16_t h;
    float f;
    memcpy(&h, p + 2 * (size_t)i, sizeof h);
    if (e->dtype == TOLK_FLOAT16) tolk_f16_to_f32_n(&h, &f, 1);
    else tolk_bf16_to_f32_n(&h, &f, 1);
    return f;
  }
  case TOLK_INT8: return (float)((int8_t)p[i] - e->dq.zp) * e->dq.scale;
  case TOLK_UINT8: return (float)(p[i] - e->dq.zp) * e->dq.scale;
  default: {
    float f;
    memcpy(&f, p + 4 * (size_t)i, sizeof f);
    return f;
  }
  }
}

tolk_status op_head_cols_new(const void *state, const int32_t *cols, size_t n,
                             struct op_head_cols **out, tolk_error *err) {
  *out = NULL;
  const struct mm_state *s = state;
  if (!s) return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "the LM head's weights are not a constant matrix");
  const struct packed_entry *e = s->e;
  const int64_t k = s->d0, width = s->d1;
  size_t elems;
  struct op_head_cols *hc = calloc(1, sizeof *hc);
  float *g = NULL;
  /* The gathered columns as rows of a [n, k] matrix: op(B) transposed. */
  if (!hc || !n || !tolk_mul_size(n, (size_t)k, &elems) || !(g = malloc(elems * sizeof *g))) {
    free(hc);
    return tolk_fail(err, n ? TOLK_ERR_NO_MEMORY : TOLK_ERR_INVALID_ARGUMENT,
                     n ? "no memory for %zu LM head columns" : "an LM head subset needs a column (%zu)", n);
  }
  tolk_status st = TOLK_OK;
  for (size_t j = 0; j < n && !st; j++) {
    if (cols[j] < 0 || cols[j] >= width) {
      st = tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "LM head column %d out of %lld", cols[j], (long long)width);
      break;
    }
    for (int64_t p = 0; p < k; p++)
      g[j * (size_t)k + (size_t)p] =
          source_at(e, s->src, e->trans ? (int64_t)cols[j] * k + p : p * width + cols[j]);
  }
  hc->state = state;
  hc->k = k;
  hc->n = (int64_t)n;
  if (!st && e->form == MM_BF16DOT) {
    st = kern_sgemm_pack_b_bf16dot(true, k, (int64_t)n, g, k, NULL, &hc->pb, err);
  } else if (!st && e->form == MM_BF16) {
    st = kern_sgemm_pack_b_bf16(true, k, (int64_t)n, g, k, &hc->pb, err);
  } else if (!st && e->form != MM_INT8) {
    st = kern_sgemm_pack_b(true, k, (int64_t)n, g, k, &hc->pb, err);
  } else if (!st) {
    struct packed_entry q = {0};
    if (mm_quantize_cols(g, NULL, false, true, k, (int64_t)n, k, NULL, &q)) {
      hc->qb = q.qb;
      hc->col_scale = q.col_scale;
    } else {
      kern_free_weights(q.qb.data);
      free(q.col_scale);
      st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "no memory to quantize %zu LM head columns", n);
    }
  }
  free(g);
  if (st) {
    op_head_cols_free(hc);
    return st;
  }
  *out = hc;
  return TOLK_OK;
}

void op_head_cols_free(struct op_head_cols *hc) {
  if (!hc) return;
  kern_packed_b_free(hc->pb);
  kern_free_weights(hc->qb.data);
  free(hc->col_scale);
  free(hc);
}

/* The head node of a run restricted to a shortlist: A · (B's columns in
 * hs), [.., n] — the GEMM the whole head runs, on fewer columns — plus
 * bias (n floats) when the head's bias Add is fused into it. */
tolk_status mm_head_cols_run(struct op_ctx *c, const struct op_head_subset *hs, const float *bias, int min_rank) {
  const struct tensor *a = op_in(c, 0);
  const struct op_head_cols *hc = hs->cols;
  char s1[128];
  if (!a || a->dtype != TOLK_FLOAT || a->rank < 1 || a->dims[a->rank - 1] != hc->k)
    return op_fail(c, TOLK_ERR_SHAPE, "LM head subset: A %s must be float [.., %lld]",
                   a ? shape_str(a, s1, sizeof s1) : "(missing)", (long long)hc->k);
  if (hc->col_scale) return mm_int8_product(c, a, &hc->qb, hc->col_scale, hc->n, bias, min_rank);
  int64_t ydims[IR_MAX_RANK];
  memcpy(ydims, a->dims, sizeof ydims);
  ydims[a->rank - 1] = hc->n;
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, mm_widen_rank(ydims, a->rank, min_rank), ydims);
  if (!y) return nn_status(c);
  if (y->numel == 0) return TOLK_OK;
  if (bias)
    kern_sgemm_packed_bias(a->numel / hc->k, hc->n, hc->k, a->data, hc->k, hc->pb, bias, y->data, hc->n, c->pool);
  else
    kern_sgemm_packed(false, a->numel / hc->k, hc->n, hc->k, 1.0f, a->data, hc->k, hc->pb, 0.0f, y->data,
                      hc->n, c->pool);
  return TOLK_OK;
}
