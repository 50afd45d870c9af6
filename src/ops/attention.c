/*
 * attention.c — com.microsoft Attention and MultiHeadAttention, the fused
 * attention ONNX Runtime's transformer optimizer writes into BART/Marian
 * graphs (Attention for the encoder's self-attention with its packed QKV
 * weights; MultiHeadAttention for the decoder's self-attention with past /
 * present key-value and for cross-attention).
 *
 * Both bring Q, K and V into [batch, heads, seq, head] layout (adding the
 * projection bias on the way and putting the past in front of K and V,
 * directly into the present outputs when they are wanted), build ORT's
 * additive mask, and run the per-head core of contrib_cpu.c over the pool.
 * Not supported (reported at run time with the reason): rotary embedding,
 * past/present buffer sharing, 4-D Megatron masks, the (3B+2) mask index,
 * cache indirection and the qk output.
 */
#include <math.h>
#include <string.h>

#include "contrib_cpu.h"
#include "kern/kern.h"
#include "quant_util.h"

static bool wants(const struct op_ctx *c, size_t i) {
  return i < c->n_out && c->node->outputs[i] != NULL;
}

static float *scratch_f32(struct op_ctx *c, int64_t n) {
  size_t bytes;
  if (n < 0 || !tolk_mul_size((size_t)n, sizeof(float), &bytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "attention buffers too large");
    return NULL;
  }
  return op_scratch(c, bytes ? bytes : sizeof(float));
}

/* A [B, S, N, H] view of some tensor: element (b, s, n, h) at
 * base[b*bs + s*ss + n*ns + h]. */
struct view {
  const float *base;
  int64_t bs, ss, ns;
};

/* dst[b][n][off + s][h] = v(b, s, n, h) + bias[n*H + h] for s < S, where dst
 * holds dst_s positions per head. */
static void to_bnsh(const struct view *v, const float *bias, int64_t B, int64_t N, int64_t S,
                    int64_t H, float *dst, int64_t dst_s, int64_t off) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        const float *src = v->base + b * v->bs + s * v->ss + n * v->ns;
        float *d = dst + ((b * N + n) * dst_s + off + s) * H;
        if (bias) {
          for (int64_t h = 0; h < H; h++) d[h] = src[h] + bias[n * H + h];
        } else {
          memcpy(d, src, (size_t)H * sizeof(float));
        }
      }
}

/* Puts past [B, N, P, H] in front of each head of dst (dst_s positions). */
static void put_past(const float *past, int64_t B, int64_t N, int64_t P, int64_t H, float *dst,
                     int64_t dst_s) {
  for (int64_t i = 0; i < B * N; i++)
    memcpy(dst + i * dst_s * H, past + i * P * H, (size_t)(P * H) * sizeof(float));
}

/* The int32 mask input as a cx_mask_kind for B, S, T. */
static tolk_status mask_kind(struct op_ctx *c, const struct tensor *m, int64_t B, int64_t S,
                             int64_t T, enum cx_mask_kind *kind) {
  char b1[128];
  *kind = CX_MASK_NONE;
  if (!m) return TOLK_OK;
  if (m->dtype != TOLK_INT32)
    return op_fail(c, TOLK_ERR_TYPE, "mask: dtype %s, expected int32",
                   tolk_dtype_name((tolk_dtype)m->dtype));
  if (m->rank == 1 && m->dims[0] == B) *kind = CX_MASK_LEN;
  else if (m->rank == 1 && m->dims[0] == 2 * B) *kind = CX_MASK_LEN_START;
  else if (m->rank == 2 && m->dims[0] == B && m->dims[1] == T) *kind = CX_MASK_2D;
  else if (m->rank == 3 && m->dims[0] == B && m->dims[1] == S && m->dims[2] == T)
    *kind = CX_MASK_3D;
  else
    return op_fail(c, TOLK_ERR_UNSUPPORTED,
                   "mask %s is not supported here (batch %lld, sequence %lld, total %lld): "
                   "expected [B], [2B], [B, T] or [B, S, T]",
                   shape_str(m, b1, sizeof b1), (long long)B, (long long)S, (long long)T);
  return TOLK_OK;
}

static void heads_range(void *arg, int64_t begin, int64_t end) {
  cx_attn_heads(arg, begin, end);
}

/* Mask, attention_bias checks and the core, writing [B, S, N*Hv] into out. */
static tolk_status attend(struct op_ctx *c, struct cx_attn *a, const struct tensor *mask,
                          const struct tensor *attn_bias, int64_t past, float *out) {
  char b1[128];
  enum cx_mask_kind kind;
  tolk_status st = mask_kind(c, mask, a->B, a->S, a->T, &kind);
  if (st) return st;
  bool causal = ir_attr_int(c->node, "unidirectional", 0) && a->S > 1;
  float filter = ir_attr_float(c->node, "mask_filter_value", -10000.0f);
  float *mbuf = NULL;
  if (kind != CX_MASK_NONE || causal) {
    if (!(mbuf = scratch_f32(c, a->B * a->S * a->T))) return quant_err(c);
    cx_attn_mask(kind, mask ? mask->data : NULL, a->B, a->S, a->T, causal, past, filter, mbuf);
  }
  if (attn_bias) {
    if ((st = op_need_float(c, attn_bias, "attention_bias"))) return st;
    const int64_t *d = attn_bias->dims;
    if (attn_bias->rank != 4 || (d[0] != 1 && d[0] != a->B) || (d[1] != 1 && d[1] != a->N) ||
        d[2] != a->S || d[3] != a->T)
      return op_fail(c, TOLK_ERR_SHAPE, "attention_bias %s: expected [%lld or 1, %lld or 1, "
                     "%lld, %lld]", shape_str(attn_bias, b1, sizeof b1), (long long)a->B,
                     (long long)a->N, (long long)a->S, (long long)a->T);
    a->attn_bias = attn_bias->data;
    a->bias_b = d[0] != 1;
    a->bias_n = d[1] != 1;
  }
  float scale = ir_attr_float(c->node, "scale", 0.0f);
  a->scale = scale == 0.0f ? 1.0f / sqrtf((float)a->H) : scale;
  a->mask = mbuf;
  a->out = out;
  if (!(a->scores = scratch_f32(c, a->B * a->N * a->S * a->T))) return quant_err(c);
  if (a->B * a->N * a->S == 0) return TOLK_OK;
  if (a->T == 0) {
    /* Nothing to attend to: ORT's softmax over no element leaves 0s. */
    memset(out, 0, (size_t)(a->B * a->S * a->N * a->Hv) * sizeof(float));
    return TOLK_OK;
  }
  op_parallel_for(c, a->B * a->N, 1, heads_range, a);
  return TOLK_OK;
}

/* ------------------------------------------------------------- Attention */

static tolk_status run_attention(struct op_ctx *c) {
  const struct tensor *x = op_in(c, 0), *w = op_in(c, 1), *bias = op_in(c, 2);
  const struct tensor *mask = op_in(c, 3), *past = op_in(c, 4), *attn_bias = op_in(c, 5);
  char b1[128], b2[128];
  tolk_status st;
  if ((st = op_need_float(c, x, "input")) || (st = op_need_float(c, w, "weights"))) return st;
  if (ir_attr_int(c->node, "do_rotary", 0) || ir_attr_int(c->node, "past_present_share_buffer", 0) ||
      op_in(c, 6))
    return op_fail(c, TOLK_ERR_UNSUPPORTED,
                   "rotary embedding and past/present buffer sharing are not supported");
  int64_t N = ir_attr_int(c->node, "num_heads", 0);
  if (x->rank != 3 || w->rank != 2 || w->dims[0] != x->dims[2])
    return op_fail(c, TOLK_ERR_SHAPE, "input %s and weights %s: expected [B, S, D] and [D, 3H]",
                   shape_str(x, b1, sizeof b1), shape_str(w, b2, sizeof b2));
  int64_t B = x->dims[0], S = x->dims[1], Din = x->dims[2], Dall = w->dims[1];
  int64_t Dq = Dall / 3, Dk = Dall / 3, Dv = Dall / 3;
  const struct ir_attr *qkv = ir_node_attr(c->node, "qkv_hidden_sizes");
  if (qkv) {
    if (qkv->type != IR_ATTR_INTS || qkv->n != 3)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "qkv_hidden_sizes must have 3 values");
    Dq = qkv->ints[0], Dk = qkv->ints[1], Dv = qkv->ints[2];
  }
  if (N <= 0 || Dq + Dk + Dv != Dall || Dq != Dk || Dq <= 0 || Dv <= 0 || Dq % N || Dv % N)
    return op_fail(c, TOLK_ERR_SHAPE, "weights %s do not split into Q, K, V of %lld heads",
                   shape_str(w, b1, sizeof b1), (long long)N);
  if (bias && ((st = op_need_float(c, bias, "bias")) || bias->numel != Dall))
    return st ? st : op_fail(c, TOLK_ERR_SHAPE, "bias %s: expected %lld values",
                             shape_str(bias, b1, sizeof b1), (long long)Dall);
  int64_t H = Dq / N, Hv = Dv / N, P = 0;
  if (past) {
    if ((st = op_need_float(c, past, "past"))) return st;
    if (past->rank != 5 || past->dims[0] != 2 || past->dims[1] != B || past->dims[2] != N ||
        past->dims[4] != H || H != Hv)
      return op_fail(c, TOLK_ERR_SHAPE, "past %s: expected [2, %lld, %lld, P, %lld]",
                     shape_str(past, b1, sizeof b1), (long long)B, (long long)N, (long long)H);
    P = past->dims[3];
  }
  int64_t T = P + S;
  int64_t odims[3] = {B, S, Dv};
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, 3, odims);
  if (!y) return quant_err(c);
  float *kbuf, *vbuf;
  if (wants(c, 1)) {
    if (H != Hv)
      return op_fail(c, TOLK_ERR_SHAPE, "present needs equal Q/K and V head sizes");
    int64_t pd[5] = {2, B, N, T, H};
    struct tensor *pr = op_output(c, 1, TOLK_FLOAT, 5, pd);
    if (!pr) return quant_err(c);
    kbuf = pr->data;
    vbuf = kbuf + B * N * T * H;
  } else {
    if (!(kbuf = scratch_f32(c, B * N * T * H)) || !(vbuf = scratch_f32(c, B * N * T * Hv)))
      return quant_err(c);
  }
  float *qkvbuf = scratch_f32(c, B * S * Dall), *qbuf = scratch_f32(c, B * N * S * H);
  if (!qkvbuf || !qbuf) return quant_err(c);
  /* The input projection, all three at once: [B*S, Din] x [Din, Dall]. */
  kern_sgemm(false, false, B * S, Dall, Din, 1.0f, x->data, Din, w->data, Dall, 0.0f, qkvbuf,
             Dall, c->pool);
  const float *bd = bias ? bias->data : NULL;
  struct view vq = {qkvbuf, S * Dall, Dall, H}, vk = {qkvbuf + Dq, S * Dall, Dall, H},
              vv = {qkvbuf + Dq + Dk, S * Dall, Dall, Hv};
  to_bnsh(&vq, bd, B, N, S, H, qbuf, S, 0);
  to_bnsh(&vk, bd ? bd + Dq : NULL, B, N, S, H, kbuf, T, P);
  to_bnsh(&vv, bd ? bd + Dq + Dk : NULL, B, N, S, Hv, vbuf, T, P);
  if (past) {
    put_past(past->data, B, N, P, H, kbuf, T);
    put_past((const float *)past->data + B * N * P * H, B, N, P, H, vbuf, T);
  }
  struct cx_attn a = {.B = B, .N = N, .S = S, .T = T, .H = H, .Hv = Hv, .q = qbuf, .k = kbuf,
                      .v = vbuf};
  return attend(c, &a, mask, attn_bias, P, y->data);
}

/* ---------------------------------------------------- MultiHeadAttention */

static tolk_status run_mha(struct op_ctx *c) {
  const struct tensor *q = op_in(c, 0), *k = op_in(c, 1), *v = op_in(c, 2), *bias = op_in(c, 3);
  const struct tensor *mask = op_in(c, 4), *attn_bias = op_in(c, 5);
  const struct tensor *pk = op_in(c, 6), *pv = op_in(c, 7);
  char b1[128], b2[128], b3[128];
  tolk_status st;
  if ((st = op_need_float(c, q, "query"))) return st;
  if ((k && (st = op_need_float(c, k, "key"))) || (v && (st = op_need_float(c, v, "value")))) return st;
  if (op_in(c, 8) || op_in(c, 9) || wants(c, 3))
    return op_fail(c, TOLK_ERR_UNSUPPORTED,
                   "past_sequence_length, cache_indirection and the qk output are not supported");
  int64_t N = ir_attr_int(c->node, "num_heads", 0);
  if (N <= 0) return op_fail(c, TOLK_ERR_INVALID_MODEL, "num_heads must be positive");
  int64_t B = q->dims[0], S = q->rank >= 2 ? q->dims[1] : 0, L, H, Hv, Dq;
  struct view vq, vk, vv;
  bool kv_bnsh = false;
  if (q->rank == 5) { /* packed QKV [B, S, N, 3, H] */
    if (k || v || q->dims[2] != N || q->dims[3] != 3)
      return op_fail(c, TOLK_ERR_SHAPE, "packed query %s: expected [B, S, %lld, 3, H] and no "
                     "key/value", shape_str(q, b1, sizeof b1), (long long)N);
    H = Hv = q->dims[4], L = S, Dq = N * H;
    const float *base = q->data;
    int64_t ss = N * 3 * H;
    vq = (struct view){base, S * ss, ss, 3 * H};
    vk = (struct view){base + H, S * ss, ss, 3 * H};
    vv = (struct view){base + 2 * H, S * ss, ss, 3 * H};
  } else if (q->rank == 3 && k) {
    Dq = q->dims[2];
    if (Dq % N) return op_fail(c, TOLK_ERR_SHAPE, "query %s: hidden size not divisible by %lld "
                               "heads", shape_str(q, b1, sizeof b1), (long long)N);
    H = Dq / N;
    vq = (struct view){q->data, S * Dq, Dq, H};
    if (k->rank == 3 && v && v->rank == 3 && k->dims[0] == B && v->dims[0] == B &&
        k->dims[2] == Dq && v->dims[1] == k->dims[1] && v->dims[2] % N == 0) {
      L = k->dims[1], Hv = v->dims[2] / N;
      vk = (struct view){k->data, L * Dq, Dq, H};
      vv = (struct view){v->data, L * v->dims[2], v->dims[2], Hv};
    } else if (k->rank == 5 && !v && k->dims[0] == B && k->dims[2] == N && k->dims[3] == 2 &&
               k->dims[4] == H) { /* packed KV [B, L, N, 2, H] */
      L = k->dims[1], Hv = H;
      int64_t ss = N * 2 * H;
      vk = (struct view){k->data, L * ss, ss, 2 * H};
      vv = (struct view){(const float *)k->data + H, L * ss, ss, 2 * H};
    } else if (k->rank == 4 && v && v->rank == 4 && k->dims[0] == B && k->dims[1] == N &&
               k->dims[3] == H && v->dims[0] == B && v->dims[1] == N &&
               v->dims[2] == k->dims[2]) { /* projected K, V [B, N, L, H] */
      L = k->dims[2], Hv = v->dims[3];
      kv_bnsh = true;
      vk = (struct view){k->data, N * L * H, H, L * H};
      vv = (struct view){v->data, N * L * Hv, Hv, L * Hv};
    } else {
      return op_fail(c, TOLK_ERR_SHAPE, "query %s, key %s, value %s: unsupported layout",
                     shape_str(q, b1, sizeof b1), shape_str(k, b2, sizeof b2),
                     v ? shape_str(v, b3, sizeof b3) : "(none)");
    }
  } else {
    return op_fail(c, TOLK_ERR_SHAPE, "query %s: expected [B, S, D] with key, or packed "
                   "[B, S, N, 3, H]", shape_str(q, b1, sizeof b1));
  }
  int64_t Dv = N * Hv;
  const float *bq = NULL, *bk = NULL, *bv = NULL;
  if (bias) {
    if ((st = op_need_float(c, bias, "bias"))) return st;
    if (bias->numel != 2 * Dq + Dv)
      return op_fail(c, TOLK_ERR_SHAPE, "bias %s: expected %lld values",
                     shape_str(bias, b1, sizeof b1), (long long)(2 * Dq + Dv));
    bq = bias->data;
    if (!kv_bnsh) bk = bq + Dq, bv = bq + 2 * Dq;
  }
  int64_t P = 0;
  if (pk || pv) {
    if (!pk || !pv || (st = op_need_float(c, pk, "past_key")) || (st = op_need_float(c, pv, "past_value")))
      return st ? st : op_fail(c, TOLK_ERR_INVALID_MODEL, "past_key and past_value go together");
    P = pk->rank == 4 ? pk->dims[2] : -1;
    if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != B || pk->dims[1] != N ||
        pk->dims[3] != H || pv->dims[0] != B || pv->dims[1] != N || pv->dims[2] != P ||
        pv->dims[3] != Hv)
      return op_fail(c, TOLK_ERR_SHAPE, "past_key %s / past_value %s: expected [%lld, %lld, P, "
                     "%lld] and [.., %lld]", shape_str(pk, b1, sizeof b1),
                     shape_str(pv, b2, sizeof b2), (long long)B, (long long)N, (long long)H,
                     (long long)Hv);
  }
  int64_t T = P + L;
  int64_t odims[3] = {B, S, Dv};
  struct tensor *y = op_output(c, 0, TOLK_FLOAT, 3, odims);
  if (!y) return quant_err(c);
  float *kbuf = NULL, *vbuf = NULL;
  int64_t kd[4] = {B, N, T, H}, vd[4] = {B, N, T, Hv};
  if (wants(c, 1)) {
    struct tensor *t = op_output(c, 1, TOLK_FLOAT, 4, kd);
    if (!t) return quant_err(c);
    kbuf = t->data;
  }
  if (wants(c, 2)) {
    struct tensor *t = op_output(c, 2, TOLK_FLOAT, 4, vd);
    if (!t) return quant_err(c);
    vbuf = t->data;
  }
  float *qbuf = scratch_f32(c, B * N * S * H);
  if (!kbuf) kbuf = scratch_f32(c, B * N * T * H);
  if (!vbuf) vbuf = scratch_f32(c, B * N * T * Hv);
  if (!qbuf || !kbuf || !vbuf) return quant_err(c);
  to_bnsh(&vq, bq, B, N, S, H, qbuf, S, 0);
  to_bnsh(&vk, bk, B, N, L, H, kbuf, T, P);
  to_bnsh(&vv, bv, B, N, L, Hv, vbuf, T, P);
  if (P) {
    put_past(pk->data, B, N, P, H, kbuf, T);
    put_past(pv->data, B, N, P, Hv, vbuf, T);
  }
  struct cx_attn a = {.B = B, .N = N, .S = S, .T = T, .H = H, .Hv = Hv, .q = qbuf, .k = kbuf,
                      .v = vbuf};
  return attend(c, &a, mask, attn_bias, P, y->data);
}

const struct op_def tolk_ops_attention[] = {
    {"com.microsoft", "Attention", 1, 0, NULL, run_attention, NULL},
    {"com.microsoft", "MultiHeadAttention", 1, 0, NULL, run_mha, NULL},
    {0},
};
