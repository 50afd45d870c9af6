/*
 * head.c — the LM head restricted to a vocabulary shortlist (head.h): finds
 * the head and its bias in a session's main graph, gathers the shortlist's
 * columns (src/ops/matmul_subset.c packs them as the head's own B was
 * packed) and bias entries, and hands them to a run, where the head's
 * MatMul and its bias Add read them through op_head_subset (src/ops/op.h).
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "head.h"

struct exec_head_subset {
  const tolk_session *s;
  struct op_head_subset hs;
  struct op_head_cols *cols;
  float *bias;
};

/* The constant data of main-graph value v: an initializer or a folded value
 * (NULL when neither, or folding kept only its shape). */
static const struct tensor *folded(const struct xgraph *xg, int32_t slot) {
  for (uint32_t i = 0; i < xg->n_consts; i++)
    if (xg->consts[i].slot == slot && !xg->consts[i].unread && xg->consts[i].t.data) return &xg->consts[i].t;
  return NULL;
}

/* Copies bias entries cols[0..n) of the constant at input `in` (value v)
 * into h->bias. */
static tolk_status gather_bias(const struct xgraph *xg, struct xref in, const struct ir_value *v, int64_t width,
                               const int32_t *cols, size_t n, struct exec_head_subset *h, tolk_error *err) {
  const struct tensor *t = folded(xg, in.slot);
  const void *data = t ? t->data : v && v->init ? v->init->data : NULL;
  int32_t dtype = t ? t->dtype : v && v->init ? v->init->dtype : -1;
  int64_t numel = t ? t->numel : v && v->init ? v->init->numel : -1;
  if (!data || dtype != TOLK_FLOAT || numel != width)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "the LM head's bias is not a constant float vector of %lld",
                     (long long)width);
  if (!(h->bias = malloc(n * sizeof *h->bias))) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "LM head bias");
  for (size_t j = 0; j < n; j++) memcpy(&h->bias[j], (const float *)data + cols[j], sizeof(float));
  h->hs.bias = h->bias;
  return TOLK_OK;
}

/* The head's bias: input 2 of the head itself when fuse_bias.c joined the
 * Add to it, else the Add's input that is not the head's output. */
static tolk_status head_bias(const struct xgraph *xg, const struct xnode *head, const struct xnode *add,
                             int64_t width, const int32_t *cols, size_t n, struct exec_head_subset *h,
                             tolk_error *err) {
  if (head->n_in == 3)
    return gather_bias(xg, head->in[2], xg->g->values[head->in[2].slot], width, cols, n, h, err);
  if (!add) return TOLK_OK;
  int xi = add->in[0].slot == head->out[0] && add->in[0].frame == (int32_t)xg->id ? 0 : 1;
  h->hs.add = add->node;
  h->hs.x_input = xi;
  return gather_bias(xg, add->in[1 - xi], add->node->inputs[1 - xi], width, cols, n, h, err);
}

tolk_status exec_head_subset_create(const tolk_session *s, const int32_t *cols, size_t n,
                                    struct exec_head_subset **out, tolk_error *err) {
  *out = NULL;
  const struct xgraph *xg = s->graphs[0];
  const struct xnode *head = NULL, *add = NULL;
  for (uint32_t k = 0; k < xg->n_nodes && !head; k++) {
    const struct xnode *x = &xg->nodes[k];
    /* The value in the node's output slot: a fused head writes its Add's. */
    if (exec_is_op(x, "MatMul") && x->n_out == 1 && x->out[0] >= 0 &&
        exec_head_output(xg, x->out[0], xg->g->values[x->out[0]], &add))
      head = x;
  }
  int64_t k_dim, width;
  if (!head || !op_head_cols_dims(head->state, &k_dim, &width))
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED,
                     "no LM head to restrict: no MatMul by a constant matrix gives a graph output");
  struct exec_head_subset *h = calloc(1, sizeof *h);
  if (!h) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "LM head subset");
  h->s = s;
  tolk_status st = op_head_cols_new(head->state, cols, n, &h->cols, err);
  if (!st) st = head_bias(xg, head, add, width, cols, n, h, err);
  if (st) {
    exec_head_subset_free(h);
    return st;
  }
  h->hs.cols = h->cols;
  h->hs.head_state = head->state;
  h->hs.n = (int64_t)n;
  *out = h;
  return TOLK_OK;
}

void exec_head_subset_free(struct exec_head_subset *h) {
  if (!h) return;
  op_head_cols_free(h->cols);
  free(h->bias);
  free(h);
}

tolk_status exec_session_run_head(tolk_session *s, tolk_kv_cache *kv, const struct exec_head_subset *h,
                                  size_t n_inputs, const char *const *input_names,
                                  const tolk_tensor *const *inputs, size_t n_outputs,
                                  const char *const *output_names, tolk_tensor **outputs,
                                  tolk_error *err) {
  if (h && h->s != s)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "LM head subset made for another session");
  return exec_run_with_head(s, kv, h ? &h->hs : NULL, n_inputs, input_names, inputs, n_outputs, output_names,
                            outputs, err);
}

struct tolk_pool *exec_session_pool(const tolk_session *s) { return s->pool; }
