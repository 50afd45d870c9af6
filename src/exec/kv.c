/*
 * kv.c — a decoder's key/value cache kept in place (tolk.h, "key/value
 * cache"): finding the Concat(past, new) → present pattern at session
 * creation and rewiring it to the kernels of src/ops/kv_cache.c, and the
 * tolk_kv_cache those kernels read and write during tolk_session_run_kv.
 *
 * The rewrite works on the compiled graph (xnodes), not on the IR, so the
 * model stays as loaded and other sessions on it are unaffected. It is all
 * or nothing: if one Concat joining a past input to a present output has a
 * reader that does something else, the whole graph runs as written and
 * tolk_session_kv_count says 0.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

struct tolk_kv_cache {
  const tolk_session *s;
  int64_t rows, cap, len; /* len: the longest row, what the graph sees as the past length */
  int64_t cap_rows;       /* rows the buffers have room for (≥ rows) */
  float *spare;           /* select's staging of one row, spare_floats of room */
  float **stage;          /* 2 × pairs pointers into spare */
  size_t spare_floats;
  int64_t *row_len;       /* rows entries when rows differ (a ragged session), else NULL */
  int64_t pending;        /* length after the run in progress, -1: none */
  float **buf;            /* per pair kept plain: [rows, heads, cap, head_dim]; else NULL */
  float **tbuf;           /* pairs with keys_t: keys × scale as [rows, heads, head_dim, cap]; else NULL */
  int32_t *source;        /* rows entries: the row of the shared inputs each reads; NULL: its own */
  int64_t sources;        /* rows the shared inputs have when source is set */
  /* Shared keys transposed and scaled (op_kv_shared_keys_t), one entry per
   * shared input at most, valid while gen is the cache's: share, append
   * and set start a new generation. */
  struct shared_keys_t {
    const float *src; /* the input's data they were made from */
    int64_t numel, heads, len;
    float scale;
    uint64_t gen;
    float *t;
    size_t cap; /* floats t has room for */
  } *kt;
  uint64_t gen; /* from 1: entries of generation 0 are unused */
  uint32_t kt_next; /* the entry to reuse when none is free */
};

/* ------------------------------------------------------------ rewrite */

static bool is_input(const struct ir_value *v, uint32_t *index) {
  const struct ir_graph *g = v->graph;
  for (size_t i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == v) {
      *index = (uint32_t)i;
      return !v->init;
    }
  return false;
}

/* The float value of a scalar constant: an initializer or a Constant. */
static bool scalar_const(const struct ir_value *v, float *out) {
  const struct ir_tensor *t = v->init;
  if (!t && v->producer && !strcmp(v->producer->op_type, "Constant")) {
    const struct ir_attr *a = ir_node_attr(v->producer, "value");
    if (a && a->type == IR_ATTR_TENSOR) t = a->t;
    a = ir_node_attr(v->producer, "value_float");
    if (!t && a && a->type == IR_ATTR_FLOAT) {
      *out = a->f;
      return true;
    }
  }
  if (!t || t->dtype != TOLK_FLOAT || t->numel != 1 || !t->data) return false;
  memcpy(out, t->data, sizeof *out); /* may be misaligned in the mapping */
  return true;
}

/* The value of an int64 scalar constant: an initializer or a Constant. */
static bool int_const(const struct ir_value *v, int64_t *out) {
  const struct ir_tensor *t = v ? v->init : NULL;
  if (!t && v && v->producer && !strcmp(v->producer->op_type, "Constant")) {
    const struct ir_attr *a = ir_node_attr(v->producer, "value");
    t = a && a->type == IR_ATTR_TENSOR ? a->t : NULL;
  }
  if (!t || t->numel != 1 || !t->data || t->dtype != TOLK_INT64) return false;
  memcpy(out, t->data, sizeof *out);
  return true;
}

/* A node to rewire: its new def, inputs and state. */
struct edit {
  uint32_t node;
  const struct op_def *def;
  struct xref in[3];
  uint32_t n_in;
  struct op_kv_node st;
};

struct plan_kv {
  struct edit *edits;
  size_t n_edits, cap_edits;
  bool *drop; /* nodes that disappear */
  struct exec_kv_pair *pairs;
  size_t n_pairs, cap_pairs;
  uint32_t *shared; /* inputs read once per source (shared_at) */
  size_t n_shared;
};

static struct edit *add_edit(struct plan_kv *p) {
  if (p->n_edits == p->cap_edits) {
    size_t nc = p->cap_edits ? 2 * p->cap_edits : 32;
    struct edit *e = realloc(p->edits, nc * sizeof *e);
    if (!e) return NULL;
    p->edits = e;
    p->cap_edits = nc;
  }
  struct edit *e = &p->edits[p->n_edits++];
  memset(e, 0, sizeof *e);
  return e;
}

/* The keys' way to attention from Transpose node t: Transpose(0,1,3,2)
 * [→ Mul by a scalar constant] → MatMul as B, each the sole reader of the
 * one before and no graph output. The MatMul's index, else -1; *scale: the
 * Mul's constant (1 without one); *mul: the Mul's index, else UINT32_MAX. */
static int64_t keys_matmul(const struct xgraph *xg, uint32_t t, float *scale, uint32_t *mul) {
  const struct xnode *x = &xg->nodes[t];
  const struct ir_attr *perm = ir_node_attr(x->node, "perm");
  static const int64_t want[4] = {0, 1, 3, 2};
  *scale = 1.0f;
  *mul = UINT32_MAX;
  if (!exec_is_op(x, "Transpose") || !perm || perm->n != 4 || memcmp(perm->ints, want, sizeof want) ||
      x->out[0] < 0 || exec_is_graph_output(x->node->outputs[0]))
    return -1;
  struct exec_reader r[2];
  if (exec_readers(xg, x->out[0], r, 1) != 1) return -1;
  x = &xg->nodes[r[0].node];
  if (exec_is_op(x, "Mul") && x->n_in == 2) {
    const struct ir_value *other = x->node->inputs[1 - r[0].input];
    if (!other || !scalar_const(other, scale) || x->out[0] < 0 || exec_is_graph_output(x->node->outputs[0]))
      return -1;
    *mul = r[0].node;
    if (exec_readers(xg, x->out[0], r, 1) != 1) return -1;
    x = &xg->nodes[r[0].node];
  }
  return exec_is_op(x, "MatMul") && x->n_in == 2 && r[0].input == 1 ? (int64_t)r[0].node : -1;
}

/* The readers of the keys through keys_matmul: the MatMul becomes
 * KvScores, the rest goes. */
static bool keys_chain(const struct xgraph *xg, uint32_t tnode, struct plan_kv *p, struct xref past,
                       struct xref nw, uint32_t pair, struct exec_kv_pair *kp, bool *seen) {
  float scale;
  uint32_t mul;
  int64_t mm = keys_matmul(xg, tnode, &scale, &mul);
  if (mm < 0) return false;
  /* One cache per pair: every key chain of it must scale alike. */
  if (*seen && kp->scale != scale) return false;
  *seen = true;
  kp->keys_t = true;
  kp->scale = scale;
  p->drop[tnode] = true;
  if (mul != UINT32_MAX) p->drop[mul] = true;
  struct edit *e = add_edit(p);
  if (!e) return false;
  *e = (struct edit){(uint32_t)mm, &tolk_kv_scores_def, {xg->nodes[mm].in[0], past, nw}, 3, {pair}};
  return true;
}

/* Concat node k: when it joins a past input to a present output, records
 * the edits that make it a cache pair; false when something reading either
 * does not fit (true for any other node). */
static bool pair_at(const struct xgraph *xg, uint32_t k, struct plan_kv *p) {
  const struct xnode *c = &xg->nodes[k];
  if (!exec_is_op(c, "Concat") || c->n_in != 2 || c->n_out != 1 || c->out[0] < 0) return true;
  const struct ir_value *past = c->node->inputs[0], *present = c->node->outputs[0];
  uint32_t input;
  if (!past || !c->node->inputs[1] || !is_input(past, &input) || !exec_is_graph_output(present)) return true;
  int64_t axis = ir_attr_int(c->node, "axis", 0);
  const struct ir_type *ty = &past->type;
  if ((axis != 2 && axis != -2) || ty->kind != IR_TYPE_TENSOR || ty->dtype != TOLK_FLOAT ||
      ty->rank != 4 || ty->dims[1].value <= 0 || ty->dims[3].value <= 0 ||
      (ty->dims[1].param && ty->dims[1].param[0]) || (ty->dims[3].param && ty->dims[3].param[0]))
    return false;
  uint32_t pair = (uint32_t)p->n_pairs;
  struct xref pref = c->in[0], nref = c->in[1];
  struct exec_kv_pair kp = {input, pref.slot, c->out[0], ty->dims[1].value, ty->dims[3].value, false, 1.0f, false};
  bool seen = false;
  enum { MAXR = 16 };
  struct exec_reader r[MAXR];
  /* The past input: read for its shape only (positions), or by this Concat. */
  int n = exec_readers(xg, c->in[0].slot, r, MAXR);
  if (n < 0) return false;
  for (int i = 0; i < n; i++)
    if (r[i].node != k && !(exec_is_op(&xg->nodes[r[i].node], "Shape") &&
                            !ir_node_attr(xg->nodes[r[i].node].node, "start") &&
                            !ir_node_attr(xg->nodes[r[i].node].node, "end")))
      return false;
  n = exec_readers(xg, c->out[0], r, MAXR);
  if (n < 0) return false;
  for (int i = 0; i < n; i++) {
    const struct xnode *x = &xg->nodes[r[i].node];
    struct op_kv_node st = {pair};
    struct edit *e;
    if (exec_is_op(x, "Shape") && !ir_node_attr(x->node, "start") && !ir_node_attr(x->node, "end")) {
      if (!(e = add_edit(p))) return false;
      *e = (struct edit){r[i].node, &tolk_kv_shape_def, {pref, nref}, 2, st};
    } else if (exec_is_op(x, "Transpose")) {
      if (!keys_chain(xg, r[i].node, p, pref, nref, pair, &kp, &seen)) return false;
    } else if (exec_is_op(x, "MatMul") && x->n_in == 2 && r[i].input == 1) {
      if (!(e = add_edit(p))) return false;
      *e = (struct edit){r[i].node, &tolk_kv_context_def, {x->in[0], pref, nref}, 3, st};
      kp.plain = true;
    } else {
      return false;
    }
  }
  struct edit *e = add_edit(p);
  if (!e) return false;
  *e = (struct edit){k, &tolk_kv_append_def, {pref, nref}, 2, {pair}};
  if (p->n_pairs == p->cap_pairs) {
    size_t nc = p->cap_pairs ? 2 * p->cap_pairs : 16;
    struct exec_kv_pair *np = realloc(p->pairs, nc * sizeof *np);
    if (!np) return false;
    p->pairs = np;
    p->cap_pairs = nc;
  }
  if (!kp.keys_t) kp.plain = true;
  p->pairs[p->n_pairs++] = kp;
  return true;
}

/* ------------------------------------------------------------ positions
 * A decoder's position embedding is looked up from the past length —
 * Gather(table, Range(past_len, past_len + n)) with past_len =
 * Gather(Shape(past), 2) — so every row of a batch gets the same position.
 * Rows of different lengths can share a cache only if each gets its own:
 * that lookup becomes KvPositions, which offsets each row's positions by
 * its own length. Found, the session is ragged (tolk_session_kv_ragged);
 * not found, rows must keep one length. (The causal mask built from the
 * same length masks nothing for one new token: KvScores hides a shorter
 * row's unused positions itself.) */

/* Whether `slot` holds the past length: Gather(Shape(past), 2) (or -2) of
 * a pair's past input, through at most one Cast. */
static bool past_length(const struct xgraph *xg, int32_t slot, const struct plan_kv *p) {
  int64_t k = exec_producer(xg, slot);
  if (k >= 0 && exec_is_op(&xg->nodes[k], "Cast")) k = exec_producer(xg, xg->nodes[k].in[0].slot);
  if (k < 0 || !exec_is_op(&xg->nodes[k], "Gather") || xg->nodes[k].n_in != 2) return false;
  const struct xnode *g = &xg->nodes[k];
  int64_t axis = 0;
  if (!int_const(g->node->inputs[1], &axis) || (axis != 2 && axis != -2)) return false;
  int64_t sh = exec_producer(xg, g->in[0].slot);
  if (sh < 0 || !exec_is_op(&xg->nodes[sh], "Shape")) return false;
  for (size_t i = 0; i < p->n_pairs; i++)
    if (xg->nodes[sh].in[0].slot == p->pairs[i].past_slot) return true;
  return false;
}

/* Rewires every Gather(constant table, Range(past length, …)) on axis 0
 * into KvPositions; true when there was one. */
static bool positions(const struct xgraph *xg, struct plan_kv *p) {
  bool found = false;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    const struct xnode *r = &xg->nodes[k];
    if (!exec_is_op(r, "Range") || r->n_in != 3 || r->out[0] < 0 || !past_length(xg, r->in[0].slot, p))
      continue;
    struct exec_reader rd[16];
    int n = exec_readers(xg, r->out[0], rd, 16);
    for (int i = 0; i < n; i++) {
      const struct xnode *g = &xg->nodes[rd[i].node];
      if (!exec_is_op(g, "Gather") || rd[i].input != 1 || exec_const_rank(g->node->inputs[0]) != 2 ||
          ir_attr_int(g->node, "axis", 0) != 0)
        continue;
      struct edit *e = add_edit(p);
      if (!e) return false;
      *e = (struct edit){rd[i].node, &tolk_kv_positions_def, {g->in[0], g->in[1]}, 2, {0}};
      found = true;
    }
  }
  return found;
}

/* ------------------------------------------------------------ shared inputs
 * A decoder's cross-attention keys and values are the same for every row
 * of one source, its beams included: given per row, a beam search holds
 * and transposes them beam-width times each step. An input that only
 * attention reads — keys through Transpose(0,1,3,2) [→ Mul by a scalar] →
 * MatMul as B, values as a MatMul's B, its Shape for the other dims only —
 * is shared: given with one row per source, each row of the cache reading
 * its source's (tolk_kv_cache_share; KvSharedScores, KvSharedContext). */

/* Whether Shape node k is read only for dims other than the first:
 * Gather(shape, constant index) on axis 0. */
static bool shape_not_rows(const struct xgraph *xg, uint32_t k) {
  const struct xnode *x = &xg->nodes[k];
  if (ir_node_attr(x->node, "start") || ir_node_attr(x->node, "end") || x->out[0] < 0 ||
      exec_is_graph_output(x->node->outputs[0]))
    return false;
  struct exec_reader r[16];
  int n = exec_readers(xg, x->out[0], r, 16);
  for (int i = 0; i < n; i++) {
    const struct xnode *g = &xg->nodes[r[i].node];
    int64_t at;
    if (!exec_is_op(g, "Gather") || r[i].input != 0 || ir_attr_int(g->node, "axis", 0) != 0 ||
        !int_const(g->node->inputs[1], &at) || at == 0 || at == -4)
      return false;
  }
  return n >= 0;
}

/* One reader r of shared input `in`: the edit it needs (*e; def NULL: none,
 * a Shape) and up to two nodes to drop (UINT32_MAX: none); false when it
 * does not fit. */
static bool shared_reader(const struct xgraph *xg, struct exec_reader r, struct xref in, struct edit *e,
                          uint32_t drop[2]) {
  const struct xnode *x = &xg->nodes[r.node];
  memset(e, 0, sizeof *e);
  drop[0] = drop[1] = UINT32_MAX;
  if (exec_is_op(x, "Shape")) return shape_not_rows(xg, r.node);
  if (exec_is_op(x, "MatMul") && x->n_in == 2 && r.input == 1) {
    *e = (struct edit){r.node, &tolk_kv_shared_context_def, {x->in[0], in}, 2, {0, 1.0f}};
    return true;
  }
  float scale;
  int64_t mm = keys_matmul(xg, r.node, &scale, &drop[1]);
  if (mm < 0) return false;
  drop[0] = r.node;
  *e = (struct edit){(uint32_t)mm, &tolk_kv_shared_scores_def, {xg->nodes[mm].in[0], in}, 2, {0, scale}};
  return true;
}

/* Graph input i: shared when all its readers fit and one is attention;
 * records its edits then (false only when memory runs out). */
static bool shared_at(const struct xgraph *xg, uint32_t i, struct plan_kv *p) {
  const struct ir_value *v = xg->g->inputs[i];
  const struct ir_type *ty = &v->type;
  if (v->init || ty->kind != IR_TYPE_TENSOR || ty->dtype != TOLK_FLOAT || ty->rank != 4) return true;
  for (size_t k = 0; k < p->n_pairs; k++)
    if (p->pairs[k].input == i) return true;
  enum { MAXR = 16 };
  struct exec_reader r[MAXR];
  struct edit e[MAXR];
  uint32_t drop[MAXR][2];
  struct xref in = {(int32_t)xg->id, (int32_t)v->index};
  int n = exec_readers(xg, in.slot, r, MAXR), attention = 0;
  for (int k = 0; k < n; k++) {
    if (!shared_reader(xg, r[k], in, &e[k], drop[k])) return true;
    attention += e[k].def != NULL;
  }
  if (n <= 0 || !attention) return true;
  uint32_t *sh = realloc(p->shared, (p->n_shared + 1) * sizeof *sh);
  if (!sh) return false;
  p->shared = sh;
  p->shared[p->n_shared++] = i;
  for (int k = 0; k < n; k++) {
    for (int d = 0; d < 2; d++)
      if (drop[k][d] != UINT32_MAX) p->drop[drop[k][d]] = true;
    struct edit *ne = e[k].def ? add_edit(p) : NULL;
    if (e[k].def && !ne) return false;
    if (ne) *ne = e[k];
  }
  return true;
}

/* Applies the edits: new defs, inputs and state; dropped nodes go. */
static tolk_status apply(tolk_session *s, struct xgraph *xg, const struct plan_kv *p,
                         tolk_error *err) {
  for (size_t i = 0; i < p->n_edits; i++) {
    const struct edit *e = &p->edits[i];
    struct xnode *xn = &xg->nodes[e->node];
    struct xref *in = tolk_arena_alloc(&s->arena, e->n_in * sizeof *in);
    struct op_kv_node *st = tolk_arena_alloc(&s->arena, sizeof *st);
    if (!in || !st) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "rewiring the key/value cache");
    memcpy(in, e->in, e->n_in * sizeof *in);
    *st = e->st;
    xn->in = in;
    xn->n_in = e->n_in;
    xn->def = e->def;
    xn->state = st;
    if (e->def == &tolk_kv_append_def) xn->out[0] = -1; /* the present stays in the cache */
    if (xn->n_in > xg->max_in) xg->max_in = xn->n_in;
  }
  uint32_t w = 0;
  for (uint32_t k = 0; k < xg->n_nodes; k++)
    if (!p->drop[k]) xg->nodes[w++] = xg->nodes[k];
  xg->n_nodes = w;
  s->kv = tolk_arena_alloc(&s->arena, p->n_pairs * sizeof *s->kv);
  s->kv_shared = tolk_arena_alloc(&s->arena, (p->n_shared ? p->n_shared : 1) * sizeof *s->kv_shared);
  if (!s->kv || !s->kv_shared) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "rewiring the key/value cache");
  memcpy(s->kv, p->pairs, p->n_pairs * sizeof *s->kv);
  s->n_kv = (uint32_t)p->n_pairs;
  for (uint32_t k = 0; k < s->n_kv; k++) s->kv[k].plain |= !s->params.kv_keys_transposed_only;
  if (p->n_shared) memcpy(s->kv_shared, p->shared, p->n_shared * sizeof *s->kv_shared);
  s->n_kv_shared = (uint32_t)p->n_shared;
  return TOLK_OK;
}

tolk_status exec_kv_rewrite(tolk_session *s, struct xgraph *xg, tolk_error *err) {
  struct plan_kv p;
  memset(&p, 0, sizeof p);
  p.drop = calloc(xg->n_nodes ? xg->n_nodes : 1, sizeof *p.drop);
  if (!p.drop) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "rewiring the key/value cache");
  bool ok = true;
  for (uint32_t k = 0; k < xg->n_nodes && ok; k++) ok = pair_at(xg, k, &p);
  tolk_status st = TOLK_OK;
  if (ok && p.n_pairs) {
    s->kv_ragged = positions(xg, &p);
    for (uint32_t i = 0; i < xg->g->n_inputs && ok; i++) ok = shared_at(xg, i, &p);
    st = ok ? apply(s, xg, &p, err) : tolk_fail(err, TOLK_ERR_NO_MEMORY, "rewiring the key/value cache");
  }
  free(p.edits);
  free(p.drop);
  free(p.pairs);
  free(p.shared);
  return st;
}

int exec_kv_pair_of_input(const tolk_session *s, size_t i) {
  for (uint32_t p = 0; p < s->n_kv; p++)
    if (s->kv[p].input == i) return (int)p;
  return -1;
}

/* ------------------------------------------------------------ the cache */

size_t tolk_session_kv_count(const tolk_session *s) { return s ? s->n_kv : 0; }

const char *tolk_session_kv_input(const tolk_session *s, size_t i) {
  if (!s || i >= s->n_kv) return NULL;
  return s->m->graph->inputs[s->kv[i].input]->name;
}

static size_t block(const struct exec_kv_pair *p, int64_t cap) {
  return (size_t)(p->heads * cap * p->head_dim);
}

/* Pair p's buffer of form t (0: as written, 1: keys transposed), or NULL
 * when the cache does not keep the pair that way. */
static float **form(const tolk_kv_cache *c, uint32_t p, int t) {
  const struct exec_kv_pair *kp = &c->s->kv[p];
  return t ? (kp->keys_t ? &c->tbuf[p] : NULL) : (kp->plain ? &c->buf[p] : NULL);
}

tolk_status tolk_kv_cache_create(const tolk_session *s, int64_t rows, tolk_kv_cache **out,
                                 tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!s || rows < 0) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "NULL session or negative rows");
  if (!s->n_kv)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "the session keeps no cache (created without kv_cache, or no past/present pattern)");
  tolk_kv_cache *c = calloc(1, sizeof *c);
  if (c) c->buf = calloc(s->n_kv, sizeof *c->buf);
  if (c) c->tbuf = calloc(s->n_kv, sizeof *c->tbuf);
  if (c) c->stage = calloc(2 * (size_t)s->n_kv, sizeof *c->stage);
  if (c) c->kt = calloc(s->n_kv_shared ? s->n_kv_shared : 1, sizeof *c->kt);
  if (!c || !c->buf || !c->tbuf || !c->stage || !c->kt) {
    if (c) free(c->buf), free(c->tbuf), free(c->stage), free(c->kt);
    free(c);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache");
  }
  c->s = s;
  c->rows = rows;
  c->pending = -1;
  c->gen = 1;
  *out = c;
  return TOLK_OK;
}

void tolk_kv_cache_free(tolk_kv_cache *c) {
  if (!c) return;
  for (uint32_t p = 0; p < c->s->n_kv; p++) {
    free(c->buf[p]);
    free(c->tbuf[p]);
  }
  for (uint32_t i = 0; i < c->s->n_kv_shared; i++) free(c->kt[i].t);
  free(c->kt);
  free(c->buf);
  free(c->tbuf);
  free(c->row_len);
  free(c->spare);
  free(c->stage);
  free(c->source);
  free(c);
}

size_t tolk_session_kv_shared_count(const tolk_session *s) { return s ? s->n_kv_shared : 0; }

const char *tolk_session_kv_shared_input(const tolk_session *s, size_t i) {
  if (!s || i >= s->n_kv_shared) return NULL;
  return s->m->graph->inputs[s->kv_shared[i]]->name;
}

tolk_status tolk_kv_cache_share(tolk_kv_cache *c, const int32_t *source, int64_t sources, tolk_error *err) {
  if (!c) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "cache is NULL");
  if (c->pending >= 0) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "the cache is in use by a run");
  int32_t *m = NULL;
  if (source) {
    for (int64_t r = 0; r < c->rows; r++)
      if (source[r] < 0 || source[r] >= sources)
        return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "row %lld reads source %d, outside the %lld given",
                         (long long)r, source[r], (long long)sources);
    if (!(m = malloc((size_t)(c->rows ? c->rows : 1) * sizeof *m)))
      return tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache");
    memcpy(m, source, (size_t)c->rows * sizeof *m);
  }
  free(c->source);
  c->source = m;
  c->sources = source ? sources : 0;
  c->gen++;
  return TOLK_OK;
}

/* The rows the shared inputs have. */
static int64_t shared_rows(const tolk_kv_cache *c) { return c->source ? c->sources : c->rows; }

int64_t exec_kv_shared_rows(const tolk_session *s, const struct tolk_kv_cache *c, size_t i) {
  for (uint32_t k = 0; k < s->n_kv_shared; k++)
    if (s->kv_shared[k] == i) return shared_rows(c);
  return -1;
}

tolk_status op_kv_sources(struct op_ctx *ctx, int64_t *rows, const int32_t **source) {
  struct tolk_kv_cache *c = ctx->run->kv;
  if (!c)
    return op_fail(ctx, TOLK_ERR_INVALID_ARGUMENT,
                   "this session keeps its key/value cache in place: run it with tolk_session_run_kv");
  *rows = c->rows;
  *source = c->source;
  return TOLK_OK;
}

int tolk_session_kv_ragged(const tolk_session *s) { return s && s->n_kv && s->kv_ragged; }

int64_t tolk_kv_cache_length(const tolk_kv_cache *c) { return c ? c->len : 0; }
int64_t tolk_kv_cache_rows(const tolk_kv_cache *c) { return c ? c->rows : 0; }

int64_t tolk_kv_cache_row_length(const tolk_kv_cache *c, int64_t row) {
  if (!c || row < 0 || row >= c->rows) return -1;
  return c->row_len ? c->row_len[row] : c->len;
}

/* After rows changed: the longest row is the cache's length, and rows that
 * all have it need no per-row lengths. */
static void settle_lengths(tolk_kv_cache *c) {
  if (!c->row_len) return;
  int64_t mx = 0, mn = INT64_MAX;
  for (int64_t r = 0; r < c->rows; r++) {
    mx = c->row_len[r] > mx ? c->row_len[r] : mx;
    mn = c->row_len[r] < mn ? c->row_len[r] : mn;
  }
  c->len = mx;
  if (c->rows == 0 || mn == mx) {
    free(c->row_len);
    c->row_len = NULL;
  }
}

/* Copies the first `keep` positions of n rows of src (capacity src_cap;
 * row i is src_row[i], NULL: row i) into rows [at, at + n) of dst
 * (capacity dst_cap). `trans`: blocks are [head_dim, cap] instead of
 * [cap, head_dim]. */
static void copy_rows(const struct exec_kv_pair *kp, float *dst, int64_t dst_cap, int64_t at,
                      const float *src, int64_t src_cap, const int32_t *src_row, int64_t n,
                      int64_t keep, bool trans) {
  /* Per block: `lines` runs of `run` floats, one every cap. */
  int64_t lines = trans ? kp->head_dim : 1;
  size_t run = (size_t)(trans ? keep : keep * kp->head_dim) * sizeof(float);
  for (int64_t r = 0; r < n && run; r++) {
    int64_t from = src_row ? src_row[r] : r;
    for (int64_t h = 0; h < kp->heads; h++) {
      float *d = dst + ((size_t)(at + r) * (size_t)kp->heads + (size_t)h) * (size_t)(dst_cap * kp->head_dim);
      const float *x = src + ((size_t)from * (size_t)kp->heads + (size_t)h) * (size_t)(src_cap * kp->head_dim);
      for (int64_t l = 0; l < lines; l++) memcpy(d + l * dst_cap, x + l * src_cap, run);
    }
  }
}

/* Re-lays every buffer out for cap_rows rows × cap positions (neither
 * smaller than now), keeping the rows held and their first `keep_len`
 * positions; all or nothing. Room for rows and positions both double when
 * they run out, so a cache that grows (longer rows, sentences joining) is
 * re-laid O(log n) times, not each step. Each buffer grows where it is
 * (realloc: the old and new whole cache never coexist, which at 64 rows of
 * beams was the peak of a batch), then its blocks spread to the wider
 * stride, last first, as each moves to an offset no smaller than its own. */
static tolk_status relayout(tolk_kv_cache *c, int64_t cap_rows, int64_t cap, int64_t keep_len, tolk_error *err) {
  const tolk_session *s = c->s;
  for (uint32_t p = 0; p < s->n_kv; p++) {
    const struct exec_kv_pair *kp = &s->kv[p];
    for (int t = 0; t < 2; t++) {
      float **b = form(c, p, t);
      size_t n;
      if (!b) continue;
      float *nb = tolk_mul_size(block(kp, cap), (size_t)cap_rows, &n) && tolk_mul_size(n, sizeof(float), &n)
                      ? realloc(*b, n ? n : 1)
                      : NULL;
      /* Grown buffers still hold the old layout: failing here leaves the
       * cache as it was. */
      if (!nb)
        return tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache of %lld rows × %lld positions",
                         (long long)cap_rows, (long long)cap);
      *b = nb;
    }
  }
  for (uint32_t p = 0; c->cap && cap != c->cap && p < s->n_kv; p++) {
    const struct exec_kv_pair *kp = &s->kv[p];
    for (int t = 0; t < 2; t++) {
      float **bp = form(c, p, t);
      if (!bp) continue;
      float *b = *bp;
      /* Runs of `run` floats, one per line: a block's positions, or one
       * dim of a transposed block's. */
      int64_t lines = c->rows * kp->heads * (t ? kp->head_dim : 1);
      size_t run = (size_t)(t ? keep_len : keep_len * kp->head_dim) * sizeof(float);
      int64_t from = t ? c->cap : c->cap * kp->head_dim, to = t ? cap : cap * kp->head_dim;
      for (int64_t l = lines - 1; l > 0 && run; l--) memmove(b + l * to, b + l * from, run);
    }
  }
  c->cap_rows = cap_rows;
  c->cap = cap;
  return TOLK_OK;
}

static int64_t grown(int64_t have, int64_t need, int64_t least) {
  int64_t n = have ? 2 * have : least;
  return n < need ? need : n;
}

/* Positions held by the run in progress, else by the cache. */
static int64_t held(const tolk_kv_cache *c) { return c->pending > c->len ? c->pending : c->len; }

/* Makes room for `need` positions, keeping those written. */
static tolk_status reserve(tolk_kv_cache *c, int64_t need, tolk_error *err) {
  if (need <= c->cap) return TOLK_OK;
  return relayout(c, c->cap_rows > c->rows ? c->cap_rows : c->rows, grown(c->cap, need, 16), held(c), err);
}

/* Makes room for `rows` rows, keeping those held. */
static tolk_status reserve_rows(tolk_kv_cache *c, int64_t rows, tolk_error *err) {
  if (rows <= c->cap_rows) return TOLK_OK;
  return relayout(c, grown(c->cap_rows, rows, 4), c->cap ? c->cap : 16, held(c), err);
}

/* Row `from` to row `to` of every buffer, the first len positions. */
static void move_row(tolk_kv_cache *c, int64_t to, const float *const *from_buf, const float *const *from_tbuf,
                     int64_t from_cap, int64_t from, int64_t len) {
  const tolk_session *s = c->s;
  int32_t f = (int32_t)from;
  for (uint32_t p = 0; p < s->n_kv; p++) {
    const struct exec_kv_pair *kp = &s->kv[p];
    if (kp->plain) copy_rows(kp, c->buf[p], c->cap, to, from_buf[p], from_cap, &f, 1, len, false);
    if (kp->keys_t) copy_rows(kp, c->tbuf[p], c->cap, to, from_tbuf[p], from_cap, &f, 1, len, true);
  }
}

tolk_status tolk_kv_cache_set(tolk_kv_cache *c, size_t n, const char *const *names,
                              const tolk_tensor *const *values, tolk_error *err) {
  if (!c || (n && (!names || !values))) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "NULL argument");
  const tolk_session *s = c->s;
  if (n != s->n_kv)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "%zu tensors given for a cache of %u pairs", n, s->n_kv);
  int64_t len = -1;
  const struct tensor **by_pair = calloc(s->n_kv, sizeof *by_pair);
  if (!by_pair) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache");
  tolk_status st = TOLK_OK;
  for (size_t i = 0; i < n && !st; i++) {
    uint32_t p = 0;
    while (p < s->n_kv && (!names[i] || strcmp(names[i], tolk_session_kv_input(s, p)))) p++;
    const struct tensor *t = values[i] ? &values[i]->t : NULL;
    const struct exec_kv_pair *kp = p < s->n_kv ? &s->kv[p] : NULL;
    char buf[96];
    if (!kp || by_pair[p])
      st = tolk_fail(err, TOLK_ERR_NOT_FOUND, "'%s' is not a past input of the cache, or given twice",
                     names[i] ? names[i] : "(null)");
    else if (!t || t->dtype != TOLK_FLOAT || t->rank != 4 || t->dims[0] != c->rows ||
             t->dims[1] != kp->heads || t->dims[3] != kp->head_dim || (len >= 0 && t->dims[2] != len))
      st = tolk_fail(err, TOLK_ERR_SHAPE, "'%s': given %s, the cache needs float [%lld, %lld, len, %lld]%s",
                     names[i], t ? shape_str(t, buf, sizeof buf) : "NULL", (long long)c->rows,
                     (long long)kp->heads, (long long)kp->head_dim, len >= 0 ? " with one len" : "");
    else {
      by_pair[p] = t;
      len = t->dims[2];
    }
  }
  if (!st) {
    c->len = 0;
    st = reserve_rows(c, c->rows, err);
  }
  if (!st) st = reserve(c, len, err);
  for (uint32_t p = 0; !st && p < s->n_kv; p++) {
    const struct exec_kv_pair *kp = &s->kv[p];
    size_t run = (size_t)(len * kp->head_dim);
    for (int64_t bh = 0; bh < c->rows * kp->heads; bh++) {
      const float *src = (const float *)by_pair[p]->data + (size_t)bh * run;
      size_t at = (size_t)bh * (size_t)(c->cap * kp->head_dim);
      if (kp->plain) memcpy(c->buf[p] + at, src, run * sizeof(float));
      for (int64_t t = 0; kp->keys_t && t < len; t++)
        for (int64_t d = 0; d < kp->head_dim; d++)
          c->tbuf[p][at + (size_t)(d * c->cap + t)] = src[t * kp->head_dim + d] * kp->scale;
    }
  }
  if (!st) {
    c->len = len;
    free(c->row_len);
    c->row_len = NULL;
  }
  free(by_pair);
  c->gen++;
  return st;
}

/* Row `from` of c, its first len positions, into the spare as a cache of
 * one row (room made by the caller). */
static void stage_row(tolk_kv_cache *c, int32_t from, int64_t len) {
  const tolk_session *s = c->s;
  float *at = c->spare;
  for (uint32_t p = 0; p < s->n_kv; p++) {
    const struct exec_kv_pair *kp = &s->kv[p];
    size_t row = (size_t)(kp->heads * len * kp->head_dim);
    c->stage[p] = kp->plain ? at : NULL, at += kp->plain ? row : 0;
    if (kp->plain) copy_rows(kp, c->stage[p], len, 0, c->buf[p], c->cap, &from, 1, len, false);
    c->stage[s->n_kv + p] = kp->keys_t ? at : NULL, at += kp->keys_t ? row : 0;
    if (kp->keys_t) copy_rows(kp, c->stage[s->n_kv + p], len, 0, c->tbuf[p], c->cap, &from, 1, len, true);
  }
}

/* Rows keep[0..n) moved into place, each row that changes place copied
 * once: a row is written when no row still to be written reads it, and
 * what is then left are cycles (beams swapping), each broken by staging
 * one row — one row of spare room, however many rows move. */
static tolk_status permute(tolk_kv_cache *c, const int32_t *keep, size_t n, tolk_error *err) {
  const tolk_session *s = c->s;
  int64_t len = c->len;
  /* Pending reads of each row: rows past the old ones (a batch growing into
   * beams) have none. */
  size_t slots = (size_t)c->rows > n ? (size_t)c->rows : n;
  int32_t *reads = calloc(slots ? slots : 1, sizeof *reads);
  int32_t *ready = malloc((n ? n : 1) * sizeof *ready);
  bool *done = calloc(n ? n : 1, sizeof *done);
  if (!reads || !ready || !done) {
    free(reads), free(ready), free(done);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache");
  }
  size_t top = 0, left = 0;
  for (size_t i = 0; i < n; i++)
    if (keep[i] != (int32_t)i) reads[keep[i]]++, left++;
  /* Room for a cycle's staged row before any row moves: all or nothing. */
  size_t per_row = 0; /* floats of every buffer's first len positions of one row */
  for (uint32_t p = 0; left && p < s->n_kv; p++)
    per_row += (size_t)(s->kv[p].plain + s->kv[p].keys_t) * (size_t)(s->kv[p].heads * len * s->kv[p].head_dim);
  if (per_row > c->spare_floats) {
    float *sp = realloc(c->spare, per_row * sizeof *sp);
    if (!sp) {
      free(reads), free(ready), free(done);
      return tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache");
    }
    c->spare = sp;
    c->spare_floats = per_row;
  }
  for (size_t i = 0; i < n; i++)
    if (keep[i] != (int32_t)i && !reads[i]) ready[top++] = (int32_t)i;
  const float *const *buf = (const float *const *)c->buf, *const *tbuf = (const float *const *)c->tbuf;
  while (top) {
    int32_t i = ready[--top], j = keep[i];
    move_row(c, i, buf, tbuf, c->cap, j, len);
    done[i] = true, left--;
    if (!--reads[j] && (size_t)j < n && keep[j] != j) ready[top++] = j;
  }
  for (size_t i = 0; left && i < n; i++) {
    if (keep[i] == (int32_t)i || done[i]) continue;
    stage_row(c, (int32_t)i, len);
    int32_t at = (int32_t)i;
    for (; keep[at] != (int32_t)i; at = keep[at]) {
      move_row(c, at, buf, tbuf, c->cap, keep[at], len);
      done[at] = true;
    }
    move_row(c, at, (const float *const *)c->stage, (const float *const *)c->stage + s->n_kv, len, 0, len);
    done[at] = true;
  }
  free(reads), free(ready), free(done);
  return TOLK_OK;
}

tolk_status tolk_kv_cache_select(tolk_kv_cache *c, const int32_t *keep, size_t n, tolk_error *err) {
  if (!c || (n && !keep)) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "NULL argument");
  for (size_t i = 0; i < n; i++)
    if (keep[i] < 0 || keep[i] >= c->rows)
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "row %d of a cache of %lld rows", keep[i],
                       (long long)c->rows);
  int64_t *rl = c->row_len ? malloc((n ? n : 1) * sizeof *rl) : NULL;
  int32_t *src = c->source ? malloc((n ? n : 1) * sizeof *src) : NULL;
  tolk_status st = (c->row_len && !rl) || (c->source && !src) ? tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache")
                                                              : TOLK_OK;
  for (size_t i = 0; rl && i < n; i++) rl[i] = c->row_len[keep[i]];
  for (size_t i = 0; src && i < n; i++) src[i] = c->source[keep[i]];
  if (!st) st = reserve_rows(c, (int64_t)n, err);
  if (!st) st = permute(c, keep, n, err);
  if (st) {
    free(rl);
    free(src);
    return st;
  }
  c->rows = (int64_t)n;
  free(c->row_len);
  c->row_len = rl;
  free(c->source);
  c->source = src;
  settle_lengths(c);
  return TOLK_OK;
}

/* The length of row r of c. */
static int64_t row_length(const tolk_kv_cache *c, int64_t r) { return c->row_len ? c->row_len[r] : c->len; }

tolk_status tolk_kv_cache_append(tolk_kv_cache *dst, tolk_kv_cache *src, tolk_error *err) {
  if (!dst || !src || dst == src) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "NULL or identical caches");
  if (dst->s != src->s) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "the caches belong to different sessions");
  if (dst->pending >= 0 || src->pending >= 0)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "a cache is in use by a run");
  if (!src->rows) return TOLK_OK;
  int64_t rows = dst->rows + src->rows, first = src->rows ? row_length(src, 0) : 0;
  bool differ = false;
  for (int64_t r = 0; r < rows && !differ; r++)
    differ = (r < dst->rows ? row_length(dst, r) : row_length(src, r - dst->rows)) != first;
  if (differ && !dst->s->kv_ragged)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED,
                     "rows of %lld and %lld positions cannot share this cache: the graph's position "
                     "lookup was not recognised (tolk_session_kv_ragged is 0)",
                     (long long)dst->len, (long long)src->len);
  int64_t *rl = differ ? malloc((size_t)rows * sizeof *rl) : NULL;
  /* The joined batch's shared inputs are dst's rows, then src's. */
  int32_t *source = dst->source || src->source ? malloc((size_t)rows * sizeof *source) : NULL;
  if ((differ && !rl) || ((dst->source || src->source) && !source)) {
    free(rl);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "key/value cache");
  }
  for (int64_t r = 0; rl && r < rows; r++)
    rl[r] = r < dst->rows ? row_length(dst, r) : row_length(src, r - dst->rows);
  for (int64_t r = 0; source && r < rows; r++) {
    int64_t q = r - dst->rows;
    source[r] = r < dst->rows ? (dst->source ? dst->source[r] : (int32_t)r)
                              : (int32_t)shared_rows(dst) + (src->source ? src->source[q] : (int32_t)q);
  }
  int64_t len = dst->len > src->len ? dst->len : src->len;
  tolk_status st = reserve_rows(dst, rows, err);
  if (!st) st = reserve(dst, len, err);
  if (st) {
    free(rl);
    free(source);
    return st;
  }
  if (source) {
    dst->sources = shared_rows(dst) + shared_rows(src);
    free(dst->source);
    dst->source = source;
  }
  for (int64_t r = 0; r < src->rows; r++)
    move_row(dst, dst->rows + r, (const float *const *)src->buf, (const float *const *)src->tbuf, src->cap, r, src->len);
  dst->rows = rows;
  free(dst->row_len);
  dst->row_len = rl;
  dst->len = len;
  settle_lengths(dst);
  src->rows = 0;
  free(src->row_len);
  src->row_len = NULL;
  src->len = 0;
  free(src->source);
  src->source = NULL;
  dst->gen++;
  src->gen++;
  return TOLK_OK;
}

tolk_status tolk_kv_cache_get(const tolk_kv_cache *c, const char *name, tolk_tensor **out,
                              tolk_error *err) {
  if (!out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!c || !name) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "NULL argument");
  uint32_t p = 0;
  while (p < c->s->n_kv && strcmp(name, tolk_session_kv_input(c->s, p))) p++;
  if (p == c->s->n_kv) return tolk_fail(err, TOLK_ERR_NOT_FOUND, "'%s' is not a past input of the cache", name);
  if (!c->s->kv[p].plain)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED,
                     "'%s': the session keeps these keys only transposed and scaled (kv_keys_transposed_only)", name);
  struct tensor t;
  exec_kv_placeholder(c, p, &t);
  struct tolk_tensor *x = exec_tensor_new(&t);
  if (!x) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "%zu bytes", t.nbytes);
  const struct exec_kv_pair *kp = &c->s->kv[p];
  size_t run = (size_t)(c->len * kp->head_dim);
  for (int64_t bh = 0; bh < c->rows * kp->heads && run; bh++) {
    float *d = (float *)x->t.data + (size_t)bh * run;
    size_t own = (size_t)(row_length(c, bh / kp->heads) * kp->head_dim); /* a shorter row: zeros after it */
    memcpy(d, c->buf[p] + (size_t)bh * (size_t)(c->cap * kp->head_dim), own * sizeof(float));
    memset(d + own, 0, (run - own) * sizeof(float));
  }
  *out = x;
  return TOLK_OK;
}

/* ------------------------------------------------------------ runs */

void exec_kv_placeholder(const struct tolk_kv_cache *c, uint32_t p, struct tensor *t) {
  const struct exec_kv_pair *kp = &c->s->kv[p];
  memset(t, 0, sizeof *t);
  t->dtype = TOLK_FLOAT;
  int64_t dims[4] = {c->rows, kp->heads, c->len, kp->head_dim};
  tensor_set_shape(t, 4, dims);
  t->nbytes = (size_t)t->numel * sizeof(float);
  /* Only the dims are read (the rewrite made sure); the transposed keys of
   * a pair not kept plain have room for as many floats. */
  float *data = kp->plain ? c->buf[p] : c->tbuf[p];
  t->data = t->numel && data ? (void *)data : exec_zero_area();
}

tolk_status exec_kv_check(const tolk_session *s, const struct tolk_kv_cache *c, tolk_error *err) {
  if (!c) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "cache is NULL");
  if (c->s != s) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "the cache was made for another session");
  return TOLK_OK;
}

void exec_kv_commit(struct tolk_kv_cache *c, bool ok) {
  if (ok && c->pending >= 0) {
    for (int64_t r = 0; c->row_len && r < c->rows; r++) c->row_len[r] += c->pending - c->len;
    c->len = c->pending;
  }
  c->pending = -1;
}

tolk_status op_kv_rows(struct op_ctx *ctx, int64_t *rows, int64_t *len, const int64_t **row_len) {
  struct tolk_kv_cache *c = ctx->run->kv;
  if (!c)
    return op_fail(ctx, TOLK_ERR_INVALID_ARGUMENT,
                   "this session keeps its key/value cache in place: run it with tolk_session_run_kv");
  *rows = c->rows;
  *len = c->len;
  *row_len = c->row_len;
  return TOLK_OK;
}

tolk_status op_kv_write(struct op_ctx *ctx, uint32_t pair, int64_t need, float **plain, int64_t *cap) {
  struct tolk_kv_cache *c = ctx->run->kv;
  *plain = NULL;
  if (!c)
    return op_fail(ctx, TOLK_ERR_INVALID_ARGUMENT,
                   "this session keeps its key/value cache in place: run it with tolk_session_run_kv");
  if (c->pending >= 0 && c->pending != need)
    return op_fail(ctx, TOLK_ERR_SHAPE, "cache pairs grow to different lengths (%lld and %lld)",
                   (long long)c->pending, (long long)need);
  tolk_status st = reserve(c, need, ctx->err);
  if (st) return st;
  c->pending = need;
  *cap = c->cap;
  *plain = c->s->kv[pair].plain ? c->buf[pair] : NULL;
  return TOLK_OK;
}

tolk_status op_kv_shared_keys_t(struct op_ctx *ctx, const struct tensor *kv, float scale, float **t, bool *fill) {
  struct tolk_kv_cache *c = ctx->run->kv;
  *t = NULL;
  *fill = true;
  /* Only while the rows read shared inputs: given per row, they may be new
   * at every run (tolk.h, tolk_kv_cache_share). */
  if (!c || !c->source || !c->s->n_kv_shared) return TOLK_OK;
  const uint32_t n = c->s->n_kv_shared;
  struct shared_keys_t *e = NULL;
  for (uint32_t i = 0; i < n && !e; i++)
    if (c->kt[i].src == kv->data && c->kt[i].numel == kv->numel && c->kt[i].heads == kv->dims[1] &&
        c->kt[i].len == kv->dims[2] && c->kt[i].scale == scale)
      e = &c->kt[i];
  if (e && e->gen == c->gen) {
    *t = e->t;
    *fill = false;
    return TOLK_OK;
  }
  for (uint32_t i = 0; i < n && !e; i++)
    if (c->kt[i].gen != c->gen) e = &c->kt[i];
  if (!e) e = &c->kt[c->kt_next++ % n];
  if (e->cap < (size_t)kv->numel) {
    float *nt = realloc(e->t, (size_t)kv->numel * sizeof *nt);
    if (!nt) return op_fail(ctx, TOLK_ERR_NO_MEMORY, "transposed shared keys of %lld floats", (long long)kv->numel);
    e->t = nt;
    e->cap = (size_t)kv->numel;
  }
  *e = (struct shared_keys_t){kv->data, kv->numel, kv->dims[1], kv->dims[2], scale, c->gen, e->t, e->cap};
  *t = e->t;
  return TOLK_OK;
}

float *op_kv_keys_t(struct op_ctx *ctx, uint32_t pair, float *scale) {
  struct tolk_kv_cache *c = ctx->run->kv;
  if (!c || !c->s->kv[pair].keys_t) return NULL;
  *scale = c->s->kv[pair].scale;
  return c->tbuf[pair];
}

const float *op_kv_read(struct op_ctx *ctx, uint32_t pair, bool keys_t, int64_t need, int64_t *cap) {
  struct tolk_kv_cache *c = ctx->run->kv;
  if (!c) {
    op_fail(ctx, TOLK_ERR_INVALID_ARGUMENT,
            "this session keeps its key/value cache in place: run it with tolk_session_run_kv");
    return NULL;
  }
  int64_t held = c->pending >= 0 ? c->pending : c->len;
  if (need > held) {
    op_fail(ctx, TOLK_ERR_INTERNAL, "cache read of %lld positions, %lld written", (long long)need,
            (long long)held);
    return NULL;
  }
  *cap = c->cap;
  if (keys_t ? !c->s->kv[pair].keys_t : !c->s->kv[pair].plain) {
    op_fail(ctx, TOLK_ERR_INTERNAL, "cache pair %u keeps no %s", pair, keys_t ? "transposed keys" : "plain form");
    return NULL;
  }
  return keys_t ? c->tbuf[pair] : c->buf[pair];
}
