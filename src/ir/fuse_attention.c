/*
 * fuse_attention.c — the `all` level's attention fusion: the multi-head
 * attention exporters spell out op by op becomes one com.microsoft
 * MultiHeadAttention, as ORT's transformer optimizer does for BART/Marian
 * (onnxruntime/python/tools/transformers/fusion_bart_attention.py):
 *
 *   Q3, K3, V3 = projections of T (MatMul by a 2-D weight, bias Add optional)
 *   Qt = Transpose(Reshape(Q3, [B, S, -1|N, H]), 0 2 1 3)
 *   Kt = Transpose(Reshape(K3, …), 0 2 3 1)        (or 0 2 1 3 with transB)
 *   Vt = Transpose(Reshape(V3, …), 0 2 1 3)
 *   P  = Softmax(MatMul|FusedMatMul(Qt, Kt, alpha) [+ M], last axis)
 *   Y  = Reshape(Transpose(MatMul(P, Vt), 0 2 1 3), [B, S, -1|N·H])
 * →
 *   Y = MultiHeadAttention(Q3, K3, V3, attention_bias = M; num_heads N, scale alpha)
 *
 * and a projection's bias Add that dies with the attention moves into the
 * op's bias input, concat(bq, bk, bv), the op then reading MatMul(T, W)
 * (fold_biases). No earlier pass takes these Adds: tolk fuses no MatMul +
 * Add (fuse.c says why), and BiasGelu and SkipLayerNormalization take
 * only an Add before a Gelu or a residual Add.
 *
 * With no shape inference in tolk, the reshapes are proved to split the
 * last axis into (N, H) from what builds their shapes: a Concat of
 * Unsqueeze(Gather(Shape(T), 0 or 1)) — T being the projection's input, so
 * its batch and sequence are the projection's — and constants. N comes from
 * the constant or from the projection weight's width over H. The mask M is
 * taken only when a Slice on axis 3 makes it (so its rank is 4, as
 * attention_bias must be; Optimum's Marian masks are sliced so). The nodes
 * the fused node replaces die here; the reshapes, transposes and shape
 * arithmetic no one reads any more go in the dead-node pass after.
 *
 * Cross-attention: K3 and V3 project another tensor, their reshapes take
 * the query's batch. Without a past (Optimum's decoder_model), Kt and Vt
 * in [B, N, T, H] (Transpose 0 2 1 3 of the same reshapes) are also the
 * graph's present outputs: MultiHeadAttention writes them as its
 * present_key/present_value (present_form). With a past, K and V come
 * 4-D, [B, N, T, H]:
 *  - the encoder's keys and values as graph inputs (cross-attention of a
 *    decoder with past) go in as MultiHeadAttention's 4-D key and value;
 *  - the self-attention cache, Kc = Concat(past_k, Kt) on the sequence
 *    axis, becomes past_key/past_value in and present_key/present_value
 *    out (past_form); where that cannot be (below opset 15, another reader
 *    of the cache), Kc and Vc stay and go in as the 4-D key and value;
 *  - a session keeping its cache in place (ir_rw_is_cache) keeps Kc, Vc
 *    and the attention around them as exported, for src/exec/kv.c.
 */
#include <stdlib.h>
#include <string.h>

#include "rewrite.h"

static bool perm_is(const struct ir_node *t, const int64_t *p, size_t n) {
  const struct ir_attr *a = t ? ir_node_attr(t, "perm") : NULL;
  return a && a->type == IR_ATTR_INTS && a->n == n && !memcmp(a->ints, p, n * sizeof *p);
}

/* The input T of a projection x = [Add(bias,)] MatMul(T, W), W a 2-D
 * constant; *width receives W's columns. */
static struct ir_value *projected(const struct ir_value *x, int64_t *width) {
  const struct ir_node *add = ir_made_by(x, "Add"), *mm;
  if (add && add->n_inputs == 2) {
    for (size_t i = 0; i < 2; i++) {
      const struct ir_value *b = add->inputs[i];
      if (b && b->init && b->init->rank == 1 && (mm = ir_made_by(add->inputs[1 - i], "MatMul"))) {
        x = add->inputs[1 - i];
        break;
      }
    }
  }
  mm = ir_made_by(x, "MatMul");
  const struct ir_value *w = mm ? mm->inputs[1] : NULL;
  if (!w || !w->init || w->init->rank != 2 || (w->flags & IR_VALUE_GRAPH_INPUT)) return NULL;
  *width = w->init->dims[1];
  return mm->inputs[0];
}

/* x4 = Reshape(x3, [B, S|-1, N|-1, H]) splitting x3's last axis into N
 * heads of H: sets *x3, *heads, *head. B is dim 0 of the projection's
 * input T or of `batch` (cross-attention takes the query's batch: the
 * reshape then succeeds only when the two are equal). */
static bool split_heads(const struct ir_value *x4, const struct ir_value *batch, struct ir_value **x3,
                        int64_t *heads, int64_t *head) {
  const struct ir_node *r = ir_made_by(x4, "Reshape"), *c;
  int64_t width, n2, n1;
  if (!r || r->n_inputs != 2 || !(c = ir_made_by(r->inputs[1], "Concat")) || c->n_inputs != 4) return false;
  const struct ir_value *t = projected(r->inputs[0], &width);
  if (!t || !(ir_dim_of(c->inputs[0], t, 0) || (batch && ir_dim_of(c->inputs[0], batch, 0))) ||
      !ir_int_const(c->inputs[3], head) || *head <= 0 || !ir_int_const(c->inputs[2], &n2) || (n2 != -1 && n2 <= 0))
    return false;
  if (!ir_dim_of(c->inputs[1], t, 1) && !(ir_int_const(c->inputs[1], &n1) && n1 == -1 && n2 > 0)) return false;
  *heads = n2 > 0 ? n2 : width / *head;
  if (*heads <= 0 || *heads * *head != width) return false;
  *x3 = r->inputs[0];
  return true;
}

/* y = Reshape(ctx, [B, S, -1|N·H]) with B and S those of t. */
static bool merge_heads(const struct ir_node *r, const struct ir_value *t, int64_t width) {
  const struct ir_node *c = r->n_inputs == 2 ? ir_made_by(r->inputs[1], "Concat") : NULL;
  int64_t last;
  return c && c->n_inputs == 3 && ir_dim_of(c->inputs[0], t, 0) && ir_dim_of(c->inputs[1], t, 1) &&
         ir_int_const(c->inputs[2], &last) && (last == -1 || last == width);
}

/* The 4-D mask a Slice on axis 3 makes (see the file's comment). */
static bool sliced_4d(const struct ir_value *m) {
  const struct ir_node *s = ir_made_by(m, "Slice");
  int64_t axis;
  return s && s->n_inputs >= 4 && ir_int_const(s->inputs[3], &axis) && (axis == 3 || axis == -1);
}

struct attn {
  struct ir_node *qk, *add, *softmax, *pv, *tr, *out;
  struct ir_value *q3, *k3, *v3, *mask;
  /* The projection biases folded into the op's bias input (fold_biases):
   * bias[i] NULL where input i keeps its own (or has none); mm[i] the
   * MatMul output read in place of the Add's. */
  const struct ir_value *bias[3];
  struct ir_value *mm[3];
  const struct ir_rw *rw;
  struct ir_value *t; /* the query projection's input */
  float scale;
  int64_t heads, head, head_v;
  bool kv4; /* k3 and v3 are [B, N, T, H] (a past's), not [B, T, N·H] */
  /* The past form (past_form): MultiHeadAttention reads the new keys and
   * values and the past, and writes the present the cache Concats wrote. */
  struct ir_node *ck, *cv;
  struct ir_value *past_k, *past_v, *kn, *vn;
  struct ir_node *len[4][3]; /* Unsqueeze(Gather(Shape(present key), 2)): the mask's length */
  size_t n_len;
  /* The present form (present_form): the heads-split K and V transposes
   * whose outputs, the graph's present key and value, MultiHeadAttention
   * writes; tk the keys' projection input. */
  struct ir_node *kt, *vt;
  struct ir_value *tk;
};

static const int64_t bnsh[] = {0, 2, 1, 3};

/* A declared dim: its value, -1 when not static. */
static int64_t dim(const struct ir_value *v, int d) {
  const struct ir_type *t = &v->type;
  return t->kind == IR_TYPE_TENSOR && t->rank == 4 ? t->dims[d].value : -1;
}

/* The self-attention cache Concat(past, Transpose(Reshape(x3, [B, S, N,
 * H]), 0 2 1 3)) on the sequence axis, x3 a projection of the query's own
 * input T: its past, x3 and head size; *s_of_t (may be NULL) tells whether
 * the reshape's S is dim 1 of T. */
static bool cache_concat(const struct ir_value *v, const struct attn *a, struct ir_value **past, struct ir_value **x3,
                         int64_t *head, bool *s_of_t) {
  const struct ir_node *c = ir_made_by(v, "Concat"), *tr, *r, *dims;
  int64_t n, width, axis = c ? ir_attr_int(c, "axis", 0) : 0;
  if (!c || c->n_inputs != 2 || (axis != 2 && axis != -2) || !(tr = ir_made_by(c->inputs[1], "Transpose")) ||
      !perm_is(tr, bnsh, 4) || !split_heads(tr->inputs[0], NULL, x3, &n, head) || n != a->heads ||
      projected(*x3, &width) != a->t)
    return false;
  *past = c->inputs[0];
  r = ir_made_by(tr->inputs[0], "Reshape");
  dims = ir_made_by(r->inputs[1], "Concat");
  if (s_of_t) *s_of_t = ir_dim_of(dims->inputs[1], a->t, 1);
  return true;
}

/* v as a 4-D key or value [B, N, T, H] of the query's batch, heads and
 * head size `head` (0: any, returned in *h): a graph input so declared (the
 * encoder's keys of a decoder with past; its batch is the model's), or the
 * self-attention cache (cache_concat) — not when a session keeps that
 * cache in place (ir_rw_is_cache). */
static bool kv_4d(const struct ir_value *v, const struct attn *a, int64_t head, int64_t *h) {
  struct ir_value *past, *x3;
  if (v && !v->producer && !v->init && (v->flags & IR_VALUE_GRAPH_INPUT)) {
    *h = dim(v, 3);
    return dim(v, 1) == a->heads && *h > 0 && (!head || *h == head);
  }
  return !ir_rw_is_cache(a->rw, v) && cache_concat(v, a, &past, &x3, h, NULL) && (!head || *h == head);
}

/* Q·K^T with its scale, from the MatMul or FusedMatMul a->qk: K as
 * Transpose(split heads) or as a 4-D past (kv_4d). */
static bool match_qk(struct attn *a) {
  static const int64_t bnhs[] = {0, 2, 3, 1}, swap[] = {0, 1, 3, 2};
  const struct ir_node *qk = a->qk;
  int trans_b = 0;
  int64_t width;
  a->scale = 1.0f;
  if (!strcmp(qk->domain, "com.microsoft") && !strcmp(qk->op_type, "FusedMatMul")) {
    if (ir_attr_int(qk, "transA", 0) || ir_attr_int(qk, "transBatchA", 0) || ir_attr_int(qk, "transBatchB", 0))
      return false;
    trans_b = (int)ir_attr_int(qk, "transB", 0);
    a->scale = ir_attr_float(qk, "alpha", 1.0f);
  } else if (*qk->domain || strcmp(qk->op_type, "MatMul")) {
    return false;
  }
  const struct ir_node *tq = ir_made_by(qk->inputs[0], "Transpose"), *tk = ir_made_by(qk->inputs[1], "Transpose");
  if (!perm_is(tq, bnsh, 4) || !split_heads(tq->inputs[0], NULL, &a->q3, &a->heads, &a->head) ||
      !(a->t = projected(a->q3, &width)))
    return false;
  int64_t hk, sk;
  if (perm_is(tk, trans_b ? bnsh : bnhs, 4) && split_heads(tk->inputs[0], a->t, &a->k3, &hk, &sk))
    return hk == a->heads && sk == a->head;
  /* K^T of a 4-D K: FusedMatMul's transB, or a Transpose of its last two axes. */
  struct ir_value *k4 = trans_b ? qk->inputs[1] : perm_is(tk, swap, 4) ? tk->inputs[0] : NULL;
  a->kv4 = k4 && kv_4d(k4, a, a->head, &hk);
  a->k3 = k4;
  return a->kv4;
}

static bool match_attention(struct ir_rw *rw, struct ir_node *out, struct attn *a) {
  memset(a, 0, sizeof *a);
  a->rw = rw;
  a->out = out;
  if (strcmp(out->op_type, "Reshape") || *out->domain || !out->outputs[0]) return false;
  if (!(a->tr = ir_made_by(out->inputs[0], "Transpose")) || !perm_is(a->tr, bnsh, 4) ||
      !ir_rw_only_into(rw, a->tr, out))
    return false;
  if (!(a->pv = ir_made_by(a->tr->inputs[0], "MatMul")) || !ir_rw_only_into(rw, a->pv, a->tr)) return false;
  if (!(a->softmax = ir_made_by(a->pv->inputs[0], "Softmax")) || !ir_rw_only_into(rw, a->softmax, a->pv)) return false;
  int64_t axis = ir_attr_int(a->softmax, "axis", a->softmax->opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) return false;
  struct ir_value *scores = a->softmax->inputs[0];
  if ((a->add = ir_made_by(scores, "Add"))) {
    if (!ir_rw_only_into(rw, a->add, a->softmax)) return false;
    for (size_t i = 0; i < 2 && !a->qk; i++) {
      struct ir_node *p = a->add->inputs[i] ? a->add->inputs[i]->producer : NULL;
      if (p && sliced_4d(a->add->inputs[1 - i]) && ir_rw_only_into(rw, p, a->add)) {
        a->qk = p;
        a->mask = a->add->inputs[1 - i];
      }
    }
  } else {
    a->qk = scores ? scores->producer : NULL;
    if (a->qk && !ir_rw_only_into(rw, a->qk, a->softmax)) return false;
  }
  if (!a->qk || !match_qk(a)) return false;
  int64_t hv;
  if (a->kv4) {
    a->v3 = a->pv->inputs[1];
    if (!kv_4d(a->v3, a, 0, &a->head_v)) return false;
  } else {
    const struct ir_node *tv = ir_made_by(a->pv->inputs[1], "Transpose");
    if (!perm_is(tv, bnsh, 4) || !split_heads(tv->inputs[0], a->t, &a->v3, &hv, &a->head_v) || hv != a->heads)
      return false;
  }
  return merge_heads(out, a->t, a->heads * a->head_v);
}

/* Whether `shape`, a reader of the present key, starts the length chain
 * Unsqueeze(Gather(Shape(present key), 2), [0]) the mask's Slice reads;
 * a->len receives its three nodes. */
static bool length_chain(const struct ir_rw *rw, struct ir_node *shape, struct attn *a) {
  int64_t k;
  if (!ir_is_op(shape, "Shape") || shape->n_inputs != 1 || ir_node_attr(shape, "start") || ir_node_attr(shape, "end") ||
      a->n_len == sizeof a->len / sizeof a->len[0])
    return false;
  struct ir_node *g = ir_rw_sole_reader(rw, shape->outputs[0]), *u;
  if (!g || !ir_is_op(g, "Gather") || g->inputs[0] != shape->outputs[0] || ir_attr_int(g, "axis", 0) != 0 ||
      !ir_int_const(g->inputs[1], &k) || (k != 2 && k != -2) || g->inputs[1]->init->rank != 0 ||
      !(u = ir_rw_sole_reader(rw, g->outputs[0])) || !ir_is_op(u, "Unsqueeze") || u->n_inputs != 2 ||
      !ir_int_const(u->inputs[1], &k) || k != 0 || u->inputs[1]->init->rank != 1)
    return false;
  a->len[a->n_len][0] = shape, a->len[a->n_len][1] = g, a->len[a->n_len][2] = u;
  a->n_len++;
  return true;
}

/* Whether every live reader of the present key k4 is a->qk or a length
 * chain (into a->len). */
static bool only_lengths(const struct ir_rw *rw, struct attn *a, const struct ir_value *k4) {
  uint32_t seen = 0;
  a->n_len = 0;
  for (size_t k = 0; k < rw->g->n_nodes; k++) {
    struct ir_node *n = rw->g->nodes[k];
    for (size_t i = 0; !rw->dead[k] && i < n->n_inputs; i++)
      if (n->inputs[i] == k4) {
        if (n != a->qk && !length_chain(rw, n, a)) return false;
        seen++;
      }
  }
  return seen == rw->uses[k4->index];
}

/* The self-attention with a past as MultiHeadAttention takes it: past_key
 * and past_value in, present_key and present_value out (ORT's BART
 * fusion), instead of the cache Concats feeding it 4-D keys. The present
 * key's length, which the mask's Slice reads through Shape(present key),
 * must then come from elsewhere — the node would otherwise read its own
 * output — and is rebuilt as Shape(past, 2..3) + Shape(T, 1..2), T the
 * projections' input (the keys' reshape takes its dim 1): Shape's start
 * and end need opset 15. Anything else reading the caches keeps the 4-D
 * form. */
static bool past_form(const struct ir_rw *rw, struct attn *a) {
  int64_t h;
  bool s_of_t;
  struct ir_value *k4 = a->k3, *v4 = a->v3;
  if (!a->kv4 || ir_model_opset(rw->m, "") < 15 || !cache_concat(k4, a, &a->past_k, &a->kn, &h, &s_of_t) ||
      !s_of_t || !cache_concat(v4, a, &a->past_v, &a->vn, &h, NULL) || k4->graph != rw->g || v4->graph != rw->g ||
      rw->uses[v4->index] != 1 || !only_lengths(rw, a, k4))
    return false;
  a->ck = k4->producer;
  a->cv = v4->producer;
  return true;
}

/* The Transpose(Reshape(x3)) that `into` reads: x3's heads split. */
static struct ir_node *split_of(const struct ir_node *into, const struct ir_value *x3) {
  for (size_t i = 0; i < into->n_inputs; i++) {
    struct ir_node *t = ir_made_by(into->inputs[i], "Transpose");
    const struct ir_node *r = t ? ir_made_by(t->inputs[0], "Reshape") : NULL;
    if (r && r->inputs[0] == x3) return t;
  }
  return NULL;
}

/* The live Transpose(x, 0 2 1 3), or NULL. */
static struct ir_node *bnsh_of(const struct ir_rw *rw, const struct ir_value *x) {
  for (size_t k = 0; k < rw->g->n_nodes; k++) {
    struct ir_node *n = rw->g->nodes[k];
    if (!rw->dead[k] && ir_is_op(n, "Transpose") && n->n_inputs == 1 && n->inputs[0] == x && perm_is(n, bnsh, 4))
      return n;
  }
  return NULL;
}

/* The decoder without a past (Optimum's decoder_model) as ORT's BART
 * fusion takes it: the heads-split K and V, [B, N, T, H], are the graph's
 * present key and value as well as the attention's. MultiHeadAttention
 * reads the 3-D keys and values and writes those outputs as its
 * present_key/present_value, which without a past_key are the new keys
 * and values with their bias, in the same layout; the transposes die with
 * the attention, and so can the K and V bias Adds (fold_biases). The
 * present key's only other readers must be the mask's length chains, which
 * become Shape(Tk, 1..2) — Tk the keys' projection input, whose dim 1 the
 * keys' reshape takes — so that the node does not read its own output
 * (Shape's start and end need opset 15). */
static bool present_form(const struct ir_rw *rw, struct attn *a) {
  if (a->kv4) return false;
  /* match_qk and match_attention proved these the heads-split K and V. */
  const struct ir_node *sk = ir_made_by(a->qk->inputs[1], "Transpose");
  struct ir_node *kt = bnsh_of(rw, sk->inputs[0]), *vt = ir_made_by(a->pv->inputs[1], "Transpose");
  int64_t width;
  if (!kt || kt == vt || !(a->tk = projected(a->k3, &width))) return false;
  const struct ir_value *k4 = kt->outputs[0], *v4 = vt->outputs[0];
  if (!k4 || !v4 || k4->graph != rw->g || v4->graph != rw->g || !rw->pinned[k4->index] ||
      !rw->pinned[v4->index] || rw->uses[v4->index] != 1 || !only_lengths(rw, a, k4))
    return false;
  const struct ir_node *dims = ir_made_by(sk->inputs[0]->producer->inputs[1], "Concat");
  if (a->n_len && (ir_model_opset(rw->m, "") < 15 || !ir_dim_of(dims->inputs[1], a->tk, 1))) return false;
  a->kt = kt;
  a->vt = vt;
  return true;
}

/* Shape(x) from dim `start` to `start` + 1 into `out` (NULL: a new value),
 * placed where `where` stood. */
static struct ir_value *dim_shape(struct ir_rw *rw, struct ir_node *where, struct ir_value *x, int64_t start,
                                  struct ir_value *out) {
  char name[512];
  struct ir_value *v = out;
  if (!v) v = ir_rw_value(rw, where->outputs[0]->name, start == 2 ? "_past_length" : "_new_length");
  const char *nm = v ? ir_rw_node_name(rw, where->name, "AttentionFusion", name, sizeof name) : NULL;
  struct ir_node *s = nm ? ir_rw_node(rw, where, "Shape", "", nm, &x, 1, &v, 1, 2) : NULL;
  if (!s) return NULL;
  ir_rw_attr_int(s, 0, "start", start);
  ir_rw_attr_int(s, 1, "end", start + 1);
  return v;
}

/* The length chains' rewrite: the present key's length is Shape(past,
 * 2..3) + Shape(T, 1..2) with a past, Shape(Tk, 1..2) without. */
static bool rewrite_lengths(struct ir_rw *rw, struct attn *a) {
  for (size_t i = 0; i < a->n_len; i++) {
    struct ir_node *shape = a->len[i][0], *g = a->len[i][1], *u = a->len[i][2];
    ir_rw_kill(rw, shape);
    ir_rw_kill(rw, g);
    ir_rw_kill(rw, u);
    if (!a->past_k) {
      if (!dim_shape(rw, u, a->tk, 1, u->outputs[0])) return false;
      continue;
    }
    struct ir_value *in[2] = {dim_shape(rw, shape, a->past_k, 2, NULL), dim_shape(rw, g, a->t, 1, NULL)};
    char name[512];
    if (!in[0] || !in[1] ||
        !ir_rw_node(rw, u, "Add", "", ir_rw_node_name(rw, u->name, "AttentionFusion", name, sizeof name), in, 2,
                    u->outputs, 1, 0))
      return false;
  }
  return true;
}

/* Whether every reader of v but `except` and `also` reads only its shape:
 * a Shape, or (depth 1) a Transpose only Shapes read — Marian's encoder
 * takes its mask's length from Shape(Transpose(K)). */
static bool shape_readers(const struct ir_rw *rw, const struct ir_value *v, const struct ir_node *except,
                          const struct ir_node *also, int depth) {
  if (v->graph != rw->g || rw->pinned[v->index]) return false;
  for (size_t k = 0; k < rw->g->n_nodes; k++) {
    const struct ir_node *n = rw->g->nodes[k];
    for (size_t i = 0; !rw->dead[k] && n != except && n != also && i < n->n_inputs; i++)
      if (n->inputs[i] == v && !ir_is_op(n, "Shape") &&
          (!depth || !ir_is_op(n, "Transpose") || n->n_outputs != 1 || !n->outputs[0] ||
           !shape_readers(rw, n->outputs[0], NULL, NULL, depth - 1)))
        return false;
  }
  return true;
}

/* The bias b of x3 = Add(MatMul(T, W), b) (either order), a 1-D float
 * constant as wide as W, when the Add can die with the attention: its one
 * reader is the split-heads Reshape, whose Transpose feeds only `into`, a
 * node the fusion replaces (or is `present`, the transpose whose output
 * the fused node writes, present_form), and whose other readers, but
 * `present`, take only its shape (fold_biases then gives it the MatMul's
 * output, of the same shape). Folding a bias whose Add other nodes still
 * read would add it twice. *mm receives the MatMul's output. */
static const struct ir_value *dying_bias(const struct ir_rw *rw, const struct ir_value *x3, const struct ir_node *into,
                                         const struct ir_node *present, struct ir_value **mm) {
  const struct ir_node *add = ir_made_by(x3, "Add"), *t = split_of(into, x3);
  const struct ir_node *r = t ? t->inputs[0]->producer : NULL;
  int64_t width;
  if (!add || add->n_inputs != 2 || !r || ir_rw_sole_reader(rw, x3) != r ||
      (t != present && !ir_rw_only_into(rw, t, into)) || !shape_readers(rw, r->outputs[0], t, present, 1) ||
      !projected(x3, &width))
    return NULL;
  for (size_t i = 0; i < 2; i++) {
    struct ir_value *b = add->inputs[i], *m = add->inputs[1 - i];
    if (ir_vector_const(b) && b->init->data && b->init->numel == width && ir_made_by(m, "MatMul") &&
        m->graph == rw->g) {
      *mm = m;
      return b;
    }
  }
  return NULL;
}

/* Which projection biases move into MultiHeadAttention's bias input, as
 * ORT's BART fusion moves them (fusion_attention.py,
 * create_combined_qkv_bias). With a past, K and V are the new 3-D keys and
 * values: the op adds their bias before putting the past in front, as the
 * graph did before its cache Concat; in the present form, before writing
 * the present key and value, as the graph did before its Reshape. A 4-D
 * key and value (the encoder's past keys, or a cache Concat that stays)
 * keep theirs: ORT's CPU kernel takes them as projected already and adds
 * no K or V bias (multihead_attention.cc), so only Q's moves, and only
 * when V's heads are Q's size (the D == D_v that form requires), which
 * also keeps a declared head size out of the bias length. A moved bias's
 * split-heads Reshape then reads the MatMul's output: what still reads it
 * after the fusion reads only its shape, and its Add dies. */
static void fold_biases(struct ir_rw *rw, struct attn *a, bool past) {
  struct ir_value *x3[3] = {a->q3, past ? a->kn : a->k3, past ? a->vn : a->v3};
  const struct ir_node *into[3] = {a->qk, past ? a->ck : a->qk, past ? a->cv : a->pv};
  const struct ir_node *present[3] = {NULL, a->kt, a->vt};
  size_t n = !a->kv4 || past ? 3 : a->head_v == a->head ? 1 : 0;
  for (size_t i = 0; i < 3; i++) {
    a->mm[i] = x3[i];
    a->bias[i] = i < n ? dying_bias(rw, x3[i], into[i], present[i], &a->mm[i]) : NULL;
  }
  for (size_t i = 0; i < 3; i++)
    if (a->bias[i]) ir_rw_replace_uses(rw, x3[i], a->mm[i]);
}

/* The bias input: concat(bq, bk, bv) as a new initializer named after the
 * node `name`, zeros where a projection keeps its own bias (ORT's fusion
 * does the same); NULL when none moves, or out of memory (rw->oom). */
static struct ir_value *qkv_bias(struct ir_rw *rw, const struct attn *a, const char *name) {
  const int64_t width[3] = {a->heads * a->head, a->heads * a->head, a->heads * a->head_v};
  int64_t total = width[0] + width[1] + width[2];
  if (!a->bias[0] && !a->bias[1] && !a->bias[2]) return NULL;
  float *data = calloc((size_t)total, sizeof *data);
  struct ir_value *v = data ? ir_rw_value(rw, name, "qkv_bias") : NULL;
  size_t off = 0;
  for (size_t i = 0; v && i < 3; off += (size_t)width[i++])
    if (a->bias[i]) memcpy(data + off, a->bias[i]->init->data, (size_t)width[i] * sizeof *data);
  struct ir_tensor *t = v ? ir_rw_tensor(rw, TOLK_FLOAT, &total, 1, data, (size_t)total * sizeof *data) : NULL;
  free(data);
  if (!t || !ir_rw_make_initializer(rw, v, t)) {
    rw->oom = true;
    return NULL;
  }
  return v;
}

int ir_pass_attention(struct ir_rw *rw) {
  int n = 0;
  for (size_t k = 0; k < rw->g->n_nodes; k++) {
    struct attn a;
    if (rw->dead[k] || !match_attention(rw, rw->g->nodes[k], &a)) continue;
    bool past = past_form(rw, &a), present = !past && present_form(rw, &a);
    /* Before the kills below: they change the readers dying_bias counts. */
    fold_biases(rw, &a, past);
    /* The cache Concats (past) or the heads-split transposes (present)
     * whose outputs the fused node writes. */
    struct ir_node *gone[] = {a.out, a.tr, a.pv, a.softmax, a.add, a.qk, a.ck, a.cv, a.kt, a.vt};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
      if (gone[i]) ir_rw_kill(rw, gone[i]);
    if ((past || present) && !rewrite_lengths(rw, &a)) return -1;
    char name[512];
    const char *nm = ir_rw_node_name(rw, a.out->name, "AttentionFusion", name, sizeof name);
    struct ir_value *bias = qkv_bias(rw, &a, nm);
    if (rw->oom) return -1;
    struct ir_value *in[8] = {a.mm[0], a.mm[1], a.mm[2], bias, NULL, a.mask, a.past_k, a.past_v};
    struct ir_value *out[3] = {a.out->outputs[0], past ? a.k3 : present ? a.kt->outputs[0] : NULL,
                               past ? a.v3 : present ? a.vt->outputs[0] : NULL};
    struct ir_node *m = ir_rw_node(rw, a.out, "MultiHeadAttention", "com.microsoft", nm, in,
                                   past ? 8 : a.mask ? 6 : bias ? 4 : 3, out, past || present ? 3 : 1, 2);
    if (!m) return -1;
    ir_rw_attr_int(m, 0, "num_heads", a.heads);
    ir_rw_attr_float(m, 1, "scale", a.scale);
    n++;
  }
  if (rw->oom) return -1;
  return ir_rw_commit(rw) ? n : -1;
}
