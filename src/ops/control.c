/*
 * control.c — the control-flow operators: If, Loop and Scan. They run their
 * body graphs through op_run_subgraph (the executor binds the body's inputs,
 * gives it access to outer-scope values, and keeps each call's outputs alive
 * until the next call on that body returns) and copy what must outlive the
 * node into op_output buffers.
 *
 * Only tensor values are supported (Loop's sequence- and optional-typed
 * carried values of opsets 13/16 are refused by the session as graph values
 * of those kinds never reach here as tensors).
 */
#include <stdlib.h>
#include <string.h>

#include "op.h"

static const struct ir_graph *graph_attr(const struct ir_node *n, const char *name) {
  const struct ir_attr *a = ir_node_attr(n, name);
  return a && a->type == IR_ATTR_GRAPH ? a->g : NULL;
}

/* Copies t into output i (shape, dtype and bytes). */
static tolk_status emit(struct op_ctx *c, size_t i, const struct tensor *t) {
  struct tensor *y = op_output(c, i, t->dtype, t->rank, t->dims);
  if (!y) return c->err->status;
  if (t->nbytes) memcpy(y->data, t->data, t->nbytes);
  return TOLK_OK;
}

static bool read_bool(const struct tensor *t, bool *out) {
  if (!t || t->numel != 1) return false;
  switch (t->dtype) {
  case TOLK_BOOL:
  case TOLK_UINT8:
  case TOLK_INT8: *out = *(const uint8_t *)t->data != 0; return true;
  case TOLK_INT32: *out = *(const int32_t *)t->data != 0; return true;
  case TOLK_INT64: *out = *(const int64_t *)t->data != 0; return true;
  case TOLK_FLOAT: *out = *(const float *)t->data != 0; return true;
  default: return false;
  }
}

/* ------------------------------------------------------------ If */

static tolk_status if_prepare(const struct ir_node *n, int64_t opset, void **state,
                              tolk_error *err) {
  const struct ir_graph *t = graph_attr(n, "then_branch"), *e = graph_attr(n, "else_branch");
  if (!t || !e)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "If needs graph attributes 'then_branch' and 'else_branch'");
  if (t->n_outputs != n->n_outputs || e->n_outputs != n->n_outputs)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "If has %zu outputs but its branches have %zu (then) and %zu (else)",
                     n->n_outputs, t->n_outputs, e->n_outputs);
  if (t->n_inputs || e->n_inputs)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "If branches must not declare inputs");
  return TOLK_OK;
}

static tolk_status if_run(struct op_ctx *c) {
  bool cond;
  if (!read_bool(op_in(c, 0), &cond))
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 0 (cond) must hold one boolean");
  const struct ir_graph *g = graph_attr(c->node, cond ? "then_branch" : "else_branch");
  struct tensor *outs_small[8];
  struct tensor **outs = c->n_out <= 8 ? outs_small : op_scratch(c, c->n_out * sizeof *outs);
  if (!outs) return c->err->status;
  tolk_status st = op_run_subgraph(c, g, NULL, 0, outs, c->n_out);
  if (st) {
    tolk_error_prefix(c->err, "%s branch", cond ? "then" : "else");
    return st;
  }
  for (size_t i = 0; i < c->n_out; i++)
    if ((st = emit(c, i, outs[i]))) return st;
  return TOLK_OK;
}

/* ------------------------------------------------------------ scan buffers */

/* Per-iteration outputs stacked along a new axis, growing as iterations
 * come (Loop does not know its trip count up front). */
struct stack {
  int32_t dtype;
  int rank;
  int64_t dims[IR_MAX_RANK];
  size_t slice_bytes;
  int64_t count;
  unsigned char *data; /* heap */
  size_t cap;
};

static tolk_status stack_push(struct op_ctx *c, struct stack *s, const struct tensor *t,
                              size_t k) {
  char a[128], b[128];
  if (s->count == 0) {
    s->dtype = t->dtype;
    s->rank = t->rank;
    memcpy(s->dims, t->dims, sizeof s->dims);
    s->slice_bytes = t->nbytes;
  } else if (t->dtype != s->dtype || t->rank != s->rank ||
             memcmp(t->dims, s->dims, (size_t)t->rank * sizeof t->dims[0])) {
    struct tensor first;
    memset(&first, 0, sizeof first);
    first.rank = s->rank;
    memcpy(first.dims, s->dims, sizeof first.dims);
    return op_fail(c, TOLK_ERR_SHAPE,
                   "scan output %zu changes shape between iterations: %s, then %s", k,
                   shape_str(&first, a, sizeof a), shape_str(t, b, sizeof b));
  }
  if (s->rank + 1 > IR_MAX_RANK)
    return op_fail(c, TOLK_ERR_UNSUPPORTED, "scan output %zu would exceed rank %d", k,
                   IR_MAX_RANK);
  size_t need;
  if (!tolk_mul_size((size_t)s->count + 1, s->slice_bytes, &need))
    return op_fail(c, TOLK_ERR_LIMIT, "scan output %zu overflows", k);
  if (need > s->cap) {
    size_t nc = s->cap ? s->cap : 256;
    while (nc < need) {
      if (!tolk_mul_size(nc, 2, &nc)) return op_fail(c, TOLK_ERR_LIMIT, "scan output overflows");
    }
    unsigned char *nd = realloc(s->data, nc);
    if (!nd) return op_fail(c, TOLK_ERR_NO_MEMORY, "scan output %zu: %zu bytes", k, nc);
    s->data = nd;
    s->cap = nc;
  }
  if (s->slice_bytes) memcpy(s->data + (size_t)s->count * s->slice_bytes, t->data, s->slice_bytes);
  s->count++;
  return TOLK_OK;
}

/* Emits a finished stack; with no iterations, the shape comes from the
 * body's declared output (unknown dims as 0). */
static tolk_status stack_emit(struct op_ctx *c, size_t i, struct stack *s,
                              const struct ir_value *decl) {
  int64_t dims[IR_MAX_RANK];
  int rank = s->rank + 1;
  int32_t dtype = s->dtype;
  if (s->count == 0) {
    dtype = decl && decl->type.dtype ? decl->type.dtype : TOLK_FLOAT;
    rank = decl && decl->type.rank >= 0 && decl->type.rank < IR_MAX_RANK ? decl->type.rank + 1 : 1;
    for (int d = 1; d < rank; d++)
      dims[d] = decl->type.dims[d - 1].value > 0 ? decl->type.dims[d - 1].value : 0;
  } else {
    memcpy(dims + 1, s->dims, (size_t)s->rank * sizeof dims[0]);
  }
  dims[0] = s->count;
  struct tensor *y = op_output(c, i, dtype, rank, dims);
  if (!y) return c->err->status;
  if (y->nbytes) memcpy(y->data, s->data, y->nbytes);
  return TOLK_OK;
}

/* ------------------------------------------------------------ Loop */

static tolk_status loop_prepare(const struct ir_node *n, int64_t opset, void **state,
                                tolk_error *err) {
  const struct ir_graph *b = graph_attr(n, "body");
  if (!b) return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Loop needs a graph attribute 'body'");
  if (n->n_inputs < 2)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Loop needs inputs M and cond (may be empty)");
  size_t n_carried = n->n_inputs - 2;
  if (b->n_inputs != n_carried + 2)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "Loop body declares %zu inputs; it needs 2 + %zu carried", b->n_inputs,
                     n_carried);
  if (b->n_outputs < n_carried + 1 || n->n_outputs != b->n_outputs - 1)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "Loop body has %zu outputs and the node %zu; with %zu carried values "
                     "the body needs 1 + carried + scans and the node carried + scans",
                     b->n_outputs, n->n_outputs, n_carried);
  return TOLK_OK;
}

static tolk_status loop_run(struct op_ctx *c) {
  const struct ir_graph *body = graph_attr(c->node, "body");
  size_t n_carried = c->n_in - 2, n_scan = c->n_out - n_carried;
  const struct tensor *tm = op_in(c, 0), *tc = op_in(c, 1);
  int64_t max_iter = -1;
  if (tm && tm->numel) {
    if (tm->numel != 1 || (tm->dtype != TOLK_INT64 && tm->dtype != TOLK_INT32))
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 0 (M) must be one int64");
    max_iter = tm->dtype == TOLK_INT64 ? *(const int64_t *)tm->data : *(const int32_t *)tm->data;
  }
  bool cond = true;
  if (tc && tc->numel && !read_bool(tc, &cond))
    return op_fail(c, TOLK_ERR_INVALID_MODEL, "input 1 (cond) must hold one boolean");
  for (size_t k = 0; k < n_carried; k++)
    if (!op_in(c, 2 + k))
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "carried input %zu is missing", k);

  size_t n_bin = n_carried + 2, n_bout = body->n_outputs;
  const struct tensor **bin = op_scratch(c, n_bin * sizeof *bin);
  struct tensor **bout = op_scratch(c, n_bout * sizeof *bout);
  struct stack *stacks = op_scratch(c, (n_scan ? n_scan : 1) * sizeof *stacks);
  if (!bin || !bout || !stacks) return c->err->status;
  memset(stacks, 0, (n_scan ? n_scan : 1) * sizeof *stacks);

  int64_t iter = 0;
  uint8_t cond_byte = 1;
  struct tensor t_iter, t_cond;
  memset(&t_iter, 0, sizeof t_iter);
  memset(&t_cond, 0, sizeof t_cond);
  t_iter.dtype = TOLK_INT64;
  t_iter.numel = 1;
  t_iter.nbytes = 8;
  t_iter.data = &iter;
  t_cond.dtype = TOLK_BOOL;
  t_cond.numel = 1;
  t_cond.nbytes = 1;
  t_cond.data = &cond_byte;
  for (size_t k = 0; k < n_carried; k++) bin[2 + k] = op_in(c, 2 + k);
  bin[0] = &t_iter;
  bin[1] = &t_cond;
  tolk_status st = TOLK_OK;
  while ((max_iter < 0 || iter < max_iter) && cond) {
    cond_byte = 1;
    st = op_run_subgraph(c, body, bin, n_bin, bout, n_bout);
    if (st) {
      tolk_error_prefix(c->err, "iteration %lld", (long long)iter);
      break;
    }
    if (!read_bool(bout[0], &cond)) {
      st = op_fail(c, TOLK_ERR_INVALID_MODEL, "body output 0 (cond) must hold one boolean");
      break;
    }
    for (size_t k = 0; k < n_carried; k++) bin[2 + k] = bout[1 + k];
    for (size_t k = 0; k < n_scan && !st; k++)
      st = stack_push(c, &stacks[k], bout[1 + n_carried + k], k);
    if (st) break;
    iter++;
  }
  for (size_t k = 0; k < n_carried && !st; k++) st = emit(c, k, bin[2 + k]);
  for (size_t k = 0; k < n_scan && !st; k++)
    st = stack_emit(c, n_carried + k, &stacks[k], body->outputs[1 + n_carried + k]);
  for (size_t k = 0; k < n_scan; k++) free(stacks[k].data);
  return st;
}

/* ------------------------------------------------------------ Scan (opset 9+) */

struct scan_cfg {
  int64_t n_scan_in;
  int64_t *in_axes, *in_dirs, *out_axes, *out_dirs; /* NULL: all 0 */
};

static void scan_release(void *p) {
  struct scan_cfg *s = p;
  if (!s) return;
  free(s->in_axes);
  free(s->in_dirs);
  free(s->out_axes);
  free(s->out_dirs);
  free(s);
}

static tolk_status ints_attr(const struct ir_node *n, const char *name, size_t want,
                             int64_t **out, tolk_error *err) {
  const struct ir_attr *a = ir_node_attr(n, name);
  *out = NULL;
  if (!a) return TOLK_OK;
  if (a->type != IR_ATTR_INTS || a->n != want)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "attribute '%s' must list %zu ints", name, want);
  *out = malloc((want ? want : 1) * sizeof **out);
  if (!*out) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "attribute '%s'", name);
  if (want) memcpy(*out, a->ints, want * sizeof **out);
  return TOLK_OK;
}

static tolk_status scan_prepare(const struct ir_node *n, int64_t opset, void **state,
                                tolk_error *err) {
  const struct ir_graph *b = graph_attr(n, "body");
  if (!b) return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "Scan needs a graph attribute 'body'");
  const struct ir_attr *a = ir_node_attr(n, "num_scan_inputs");
  if (!a || a->type != IR_ATTR_INT || a->i < 1 || (size_t)a->i > n->n_inputs)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "attribute 'num_scan_inputs' must be in [1, inputs]");
  size_t m = (size_t)a->i, n_state = n->n_inputs - m;
  if (b->n_inputs != n->n_inputs || b->n_outputs != n->n_outputs || n->n_outputs < n_state)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "Scan body declares %zu inputs and %zu outputs; the node has %zu and %zu",
                     b->n_inputs, b->n_outputs, n->n_inputs, n->n_outputs);
  struct scan_cfg *s = calloc(1, sizeof *s);
  if (!s) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "Scan");
  s->n_scan_in = (int64_t)m;
  size_t k = n->n_outputs - n_state;
  tolk_status st;
  if ((st = ints_attr(n, "scan_input_axes", m, &s->in_axes, err)) ||
      (st = ints_attr(n, "scan_input_directions", m, &s->in_dirs, err)) ||
      (st = ints_attr(n, "scan_output_axes", k, &s->out_axes, err)) ||
      (st = ints_attr(n, "scan_output_directions", k, &s->out_dirs, err))) {
    scan_release(s);
    return st;
  }
  *state = s;
  return TOLK_OK;
}

static tolk_status scan_run(struct op_ctx *c) {
  const struct scan_cfg *cfg = c->state;
  const struct ir_graph *body = graph_attr(c->node, "body");
  size_t m = (size_t)cfg->n_scan_in, n_state = c->n_in - m, k_out = c->n_out - n_state;
  char a[128];
  /* Sequence length and per-input slicing geometry. */
  int64_t len = -1;
  const struct tensor **bin = op_scratch(c, c->n_in * sizeof *bin);
  struct tensor **bout = op_scratch(c, c->n_out * sizeof *bout);
  struct tensor *slices = op_scratch(c, (m ? m : 1) * sizeof *slices);
  int *axes = op_scratch(c, (m + k_out + 1) * sizeof *axes);
  if (!bin || !bout || !slices || !axes) return c->err->status;
  for (size_t j = 0; j < m; j++) {
    const struct tensor *x = op_in(c, n_state + j);
    if (!x) return op_fail(c, TOLK_ERR_INVALID_MODEL, "scan input %zu is missing", j);
    int64_t ax = cfg->in_axes ? cfg->in_axes[j] : 0;
    if (ax < 0) ax += x->rank;
    if (ax < 0 || ax >= x->rank)
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "scan input %zu: axis out of range for %s", j,
                     shape_str(x, a, sizeof a));
    if (len >= 0 && x->dims[ax] != len)
      return op_fail(c, TOLK_ERR_SHAPE, "scan input %zu has %lld steps, others %lld", j,
                     (long long)x->dims[ax], (long long)len);
    len = x->dims[ax];
    axes[j] = (int)ax;
    struct tensor *s = &slices[j];
    memset(s, 0, sizeof *s);
    s->dtype = x->dtype;
    s->rank = x->rank - 1;
    for (int d = 0, o = 0; d < x->rank; d++)
      if (d != ax) s->dims[o++] = x->dims[d];
    tensor_set_shape(s, s->rank, s->dims);
    s->nbytes = x->numel && len ? x->nbytes / (size_t)len : 0;
    s->data = op_scratch(c, s->nbytes);
    if (!s->data) return c->err->status;
  }
  if (len < 0) len = 0;
  for (size_t i = 0; i < n_state; i++) {
    bin[i] = op_in(c, i);
    if (!bin[i]) return op_fail(c, TOLK_ERR_INVALID_MODEL, "state input %zu is missing", i);
  }
  for (size_t j = 0; j < m; j++) bin[n_state + j] = &slices[j];
  struct tensor **ys = op_scratch(c, (k_out ? k_out : 1) * sizeof *ys);
  if (!ys) return c->err->status;
  tolk_status st = TOLK_OK;
  for (int64_t t = 0; t < len; t++) {
    for (size_t j = 0; j < m; j++) {
      const struct tensor *x = op_in(c, n_state + j);
      int64_t step = cfg->in_dirs && cfg->in_dirs[j] ? len - 1 - t : t;
      size_t es = op_dtype_size(x->dtype);
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < axes[j]; d++) outer *= x->dims[d];
      for (int d = axes[j] + 1; d < x->rank; d++) inner *= x->dims[d];
      size_t ib = (size_t)inner * es;
      for (int64_t o = 0; o < outer; o++)
        memcpy((char *)slices[j].data + (size_t)o * ib,
               (const char *)x->data + ((size_t)(o * len + step)) * ib, ib);
    }
    st = op_run_subgraph(c, body, bin, c->n_in, bout, c->n_out);
    if (st) {
      tolk_error_prefix(c->err, "step %lld", (long long)t);
      return st;
    }
    for (size_t i = 0; i < n_state; i++) bin[i] = bout[i];
    for (size_t k = 0; k < k_out; k++) {
      const struct tensor *s = bout[n_state + k];
      int64_t ax = cfg->out_axes ? cfg->out_axes[k] : 0;
      if (ax < 0) ax += s->rank + 1;
      if (ax < 0 || ax > s->rank || s->rank + 1 > IR_MAX_RANK)
        return op_fail(c, TOLK_ERR_INVALID_MODEL, "scan output %zu: axis out of range", k);
      if (t == 0) {
        int64_t dims[IR_MAX_RANK];
        for (int d = 0, o = 0; d <= s->rank; d++) dims[d] = d == ax ? len : s->dims[o++];
        ys[k] = op_output(c, n_state + k, s->dtype, s->rank + 1, dims);
        if (!ys[k]) return c->err->status;
      } else if (s->dtype != ys[k]->dtype || s->numel * len != ys[k]->numel) {
        return op_fail(c, TOLK_ERR_SHAPE, "scan output %zu changes shape at step %lld", k,
                       (long long)t);
      }
      int64_t step = cfg->out_dirs && cfg->out_dirs[k] ? len - 1 - t : t;
      size_t es = op_dtype_size(s->dtype);
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < ax; d++) outer *= s->dims[d];
      for (int d = (int)ax; d < s->rank; d++) inner *= s->dims[d];
      size_t ib = (size_t)inner * es;
      for (int64_t o = 0; o < outer; o++)
        memcpy((char *)ys[k]->data + ((size_t)(o * len + step)) * ib,
               (const char *)s->data + (size_t)o * ib, ib);
    }
  }
  for (size_t i = 0; i < n_state && !st; i++) st = emit(c, i, bin[i]);
  if (len == 0)
    for (size_t k = 0; k < k_out && !st; k++) {
      struct stack empty;
      memset(&empty, 0, sizeof empty);
      st = stack_emit(c, n_state + k, &empty, body->outputs[n_state + k]);
    }
  return st;
}

const struct op_def tolk_ops_control[] = {
    {"", "If", 1, 0, if_prepare, if_run, NULL},
    {"", "Loop", 1, 0, loop_prepare, loop_run, NULL},
    {"", "Scan", 9, 0, scan_prepare, scan_run, scan_release},
    {0},
};
