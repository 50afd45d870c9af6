/*
 * fuse_kv_attention.c — at session creation (any opt level but none), after
 * kv.c rewired a decoder's cached attention, each attention's four nodes
 *
 *   p = Softmax(Add(KvScores(q, past_k, new_k), mask), axis = last)
 *   y = KvContext(p, past_v, new_v)
 *
 * (and the shared form, KvSharedScores(q, keys) … KvSharedContext(p, values))
 * run as one node, KvAttention / KvSharedAttention (src/ops/kv_cache.c),
 * which takes each (row, head) block through all three steps in one task.
 * Bit for bit the four nodes (tests/test_exec_kv.c compares with the graph
 * as written).
 *
 * Taken only when the scores, their sum with the mask and the
 * probabilities each have that one reader and are no graph output, and the
 * Softmax is over the last axis (-1, or 3: the scores are [rows, heads, m,
 * len]); the fused node keeps the context node's place, its node (the name
 * in errors) and its output.
 */
#include <string.h>

#include "exec.h"

/* The context def matching a scores def, or NULL. */
static const struct op_def *context_for(const struct op_def *d) {
  if (d == &tolk_kv_scores_def) return &tolk_kv_context_def;
  if (d == &tolk_kv_shared_scores_def) return &tolk_kv_shared_context_def;
  return NULL;
}

/* The sole reader of node k's one output, when it is `op` with one output. */
static int64_t next_op(const struct xgraph *xg, uint32_t k, const char *op, uint32_t *input) {
  const struct xnode *x = &xg->nodes[k];
  if (x->n_out != 1 || x->out[0] < 0) return -1;
  int64_t r = exec_sole_reader(xg, x->out[0], x->node->outputs[0], input);
  if (r < 0 || (op && (!exec_is_op(&xg->nodes[r], op) || xg->nodes[r].n_out != 1))) return -1;
  return r;
}

/* Softmax over the last axis of a rank-4 input, whatever its opset. */
static bool last_axis_softmax(const struct xnode *x) {
  if (x->n_in != 1) return false;
  int64_t axis = ir_attr_int(x->node, "axis", x->opset < 13 ? 1 : -1);
  return axis == -1 || axis == 3;
}

/* The nodes of the attention whose scores node k is: add, softmax and
 * context, and the mask input; false when the pattern does not hold. */
static bool attention_at(const struct xgraph *xg, uint32_t k, uint32_t nodes[3], struct xref *mask) {
  const struct op_def *ctx = context_for(xg->nodes[k].def);
  uint32_t in;
  int64_t add = ctx ? next_op(xg, k, "Add", &in) : -1;
  if (add < 0 || xg->nodes[add].n_in != 2) return false;
  *mask = xg->nodes[add].in[1 - in];
  int64_t sm = next_op(xg, (uint32_t)add, "Softmax", &in);
  if (sm < 0 || !last_axis_softmax(&xg->nodes[sm])) return false;
  int64_t cx = next_op(xg, (uint32_t)sm, NULL, &in);
  if (cx < 0 || in != 0 || xg->nodes[cx].def != ctx) return false;
  nodes[0] = (uint32_t)add, nodes[1] = (uint32_t)sm, nodes[2] = (uint32_t)cx;
  return true;
}

int exec_fuse_kv_attention(tolk_session *s, struct xgraph *xg) {
  bool *drop = NULL;
  int n = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    uint32_t at[3];
    struct xref mask;
    if (!attention_at(xg, k, at, &mask)) continue;
    if (!drop && !(drop = exec_node_marks(s, xg))) return -1;
    const struct xnode *sc = &xg->nodes[k];
    struct xnode x = xg->nodes[at[2]];
    bool shared = sc->def == &tolk_kv_shared_scores_def;
    uint32_t n_in = sc->n_in + x.n_in;
    struct xref *in = tolk_arena_alloc(&s->arena, n_in * sizeof *in);
    struct op_kv_attention *st = tolk_arena_alloc(&s->arena, sizeof *st);
    if (!in || !st) return -1;
    /* q, the keys, the mask, the values: (q, past_k, new_k, mask, past_v,
     * new_v), or (q, keys, mask, values). */
    uint32_t i = 0;
    for (uint32_t j = 0; j < sc->n_in; j++) in[i++] = sc->in[j];
    in[i++] = mask;
    for (uint32_t j = 1; j < x.n_in; j++) in[i++] = x.in[j];
    st->keys = *(const struct op_kv_node *)sc->state;
    st->values = *(const struct op_kv_node *)x.state;
    x.in = in, x.n_in = n_in, x.state = st;
    x.def = shared ? &tolk_kv_shared_attention_def : &tolk_kv_attention_def;
    if (x.n_in > xg->max_in) xg->max_in = x.n_in;
    drop[k] = drop[at[0]] = drop[at[1]] = true;
    xg->nodes[at[2]] = x;
    n++;
  }
  if (n) exec_drop_nodes(xg, drop);
  return n;
}
