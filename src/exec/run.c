/*
 * run.c — executes compiled graphs: the run loop, the executor's half of the
 * kernel contract in src/ops/op.h (op_output, op_scratch, op_parallel_for,
 * op_run_subgraph) and tolk_session_run.
 *
 * A run owns an exec_run: one frame (value table) per graph, the memory
 * arena, and the scratch stack. exec_runs are pooled by the session, so a
 * steady stream of runs allocates nothing beyond the outputs it returns. The
 * loop itself does no allocation per node: input pointer arrays, omitted
 * output tensors and subgraph result tables are sized at creation.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec.h"

#define XCTX(c) ((struct xctx *)((char *)(c) - offsetof(struct xctx, c)))

/* ------------------------------------------------------------ run state */

static void tensor_from_init(struct tensor *t, const struct xgraph *xg, const struct ir_value *v) {
  const struct ir_tensor *it = v->init;
  const void *data = exec_init_data(xg, v);
  memset(t, 0, sizeof *t);
  t->dtype = it->dtype;
  t->rank = it->rank;
  for (int d = 0; d < it->rank && d < IR_MAX_RANK; d++) t->dims[d] = it->dims[d];
  t->numel = it->numel;
  t->nbytes = it->nbytes;
  t->data = data ? (void *)(uintptr_t)data : exec_zero_area();
}

void exec_frame_bind_constants(struct exec_run *r, struct xgraph *xg, struct xframe *fr) {
  (void)r;
  const struct ir_graph *g = xg->g;
  for (size_t i = 0; i < g->n_initializers; i++) {
    const struct ir_value *v = g->initializers[i];
    tensor_from_init(&fr->slots[v->index].t, xg, v);
  }
  for (uint32_t i = 0; i < xg->n_consts; i++) fr->slots[xg->consts[i].slot].t = xg->consts[i].t;
  fr->bound = true;
}

void exec_run_free(struct exec_run *r) {
  if (!r) return;
  if (r->frames)
    for (uint32_t gi = 0; gi < r->s->n_graphs; gi++) {
      struct xframe *fr = &r->frames[gi];
      free(fr->slots);
      free(fr->inbuf);
      free(fr->omitted);
      free(fr->outs);
      free(fr->pend);
      free(fr->pend_new);
    }
  free(r->frames);
  exec_small_release(r);
  free(r->arena);
  free(r->events);
  free(r->recs);
  free(r->scratch);
  free(r->sig);
  free(r->bound);
  free(r->pinned);
  free(r->sym_name);
  free(r->sym_val);
  free(r->sym_from);
  free(r);
}

struct exec_run *exec_run_new(tolk_session *s) {
  struct exec_run *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->s = s;
  r->frames = calloc(s->n_graphs, sizeof *r->frames);
  r->sig = calloc(s->max_sig + 1, sizeof *r->sig);
  r->bound = calloc(s->graphs[0]->n_slots + 1, sizeof *r->bound);
  r->pinned = calloc(s->graphs[0]->n_slots + 1, sizeof *r->pinned);
  r->sym_name = calloc(s->max_sig + 1, sizeof *r->sym_name);
  r->sym_val = calloc(s->max_sig + 1, sizeof *r->sym_val);
  r->sym_from = calloc(s->max_sig + 1, sizeof *r->sym_from);
  if (!r->frames || !r->sig || !r->bound || !r->pinned || !r->sym_name || !r->sym_val || !r->sym_from) {
    exec_run_free(r);
    return NULL;
  }
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    struct xframe *fr = &r->frames[gi];
    fr->slots = calloc(xg->n_slots + 1, sizeof *fr->slots);
    fr->inbuf = calloc(xg->max_in + 1, sizeof *fr->inbuf);
    fr->omitted = calloc(xg->max_out + 1, sizeof *fr->omitted);
    fr->outs = calloc(xg->n_out + 1, sizeof *fr->outs);
    fr->pend = calloc(xg->n_out + 1, sizeof *fr->pend);
    fr->pend_new = calloc(xg->n_out + 1, sizeof *fr->pend_new);
    if (!fr->slots || !fr->inbuf || !fr->omitted || !fr->outs || !fr->pend || !fr->pend_new) {
      exec_run_free(r);
      return NULL;
    }
    exec_frame_bind_constants(r, xg, fr);
  }
  return r;
}

/* Frees every buffer still held after a failed run. */
static void sweep_all(struct exec_run *r) {
  tolk_session *s = r->s;
  while (r->n_scratch) exec_free(r, &r->scratch[--r->n_scratch]);
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    struct xframe *fr = &r->frames[gi];
    for (uint32_t i = 0; i < xg->n_slots; i++) {
      struct xslot *sl = &fr->slots[i];
      if (sl->buf.data) exec_free(r, &sl->buf);
      if (sl->res) {
        tolk_tensor_free(sl->res);
        sl->res = NULL;
      }
    }
    for (uint32_t i = 0; i < fr->n_pend; i++) exec_free(r, &fr->pend[i]);
    fr->n_pend = 0;
  }
}

void exec_frame_sweep(struct exec_run *r, struct xgraph *xg, struct xframe *fr) {
  for (uint32_t i = 0; i < fr->n_pend; i++) exec_free(r, &fr->pend[i]);
  fr->n_pend = 0;
  (void)xg;
}

/* ------------------------------------------------------------ the loop */

static exec_node_timer_fn node_timer;

void exec_set_node_timer(exec_node_timer_fn fn) { node_timer = fn; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void time_node(exec_node_timer_fn timer, const struct exec_run *r, const struct xnode *xn,
                      const struct xframe *fr, uint64_t t0) {
  struct exec_node_time t = {xn->def->domain, xn->def->op_type, xn->node->name,
                             (const struct tensor *const *)fr->inbuf, xn->n_in, r->kv != NULL, now_ns() - t0};
  timer(&t);
}

tolk_status exec_node(struct exec_run *r, struct xgraph *xg, struct xframe *fr,
                      struct xnode *xn) {
  exec_event_node(r, xn->uid);
  for (uint32_t i = 0; i < xn->n_in; i++) {
    struct xref ref = xn->in[i];
    fr->inbuf[i] = ref.frame < 0 ? NULL : &r->frames[ref.frame].slots[ref.slot].t;
  }
  struct xctx xc;
  xc.c.node = xn->node;
  xc.c.opset = xn->opset;
  xc.c.in = fr->inbuf;
  xc.c.n_in = xn->n_in;
  xc.c.n_out = xn->n_out;
  xc.c.state = xn->state;
  xc.c.pool = r->s->pool;
  xc.c.run = r;
  xc.c.err = r->err;
  xc.xn = xn;
  xc.xg = xg;
  xc.fr = fr;
  size_t mark = r->n_scratch;
  const exec_node_timer_fn timer = node_timer;
  const uint64_t t0 = TOLK_UNLIKELY(timer != NULL) ? now_ns() : 0;
  tolk_status st = xn->def->run(&xc.c);
  if (TOLK_UNLIKELY(timer != NULL)) time_node(timer, r, xn, fr, t0);
  r->nodes_run++;
  while (r->n_scratch > mark) exec_free(r, &r->scratch[--r->n_scratch]);
  for (uint32_t j = 0; j < xn->n_subs; j++)
    exec_frame_sweep(r, xn->subs[j], &r->frames[xn->subs[j]->id]);
  if (st == TOLK_OK)
    for (uint32_t i = 0; i < xn->n_out; i++) {
      int32_t sl = xn->out[i];
      if (sl >= 0 && fr->slots[sl].epoch != fr->epoch) {
        st = tolk_fail(r->err, TOLK_ERR_INTERNAL, "the kernel did not produce output %u ('%s')",
                       i, xn->node->outputs[i]->name);
        break;
      }
    }
  if (st) {
    if (r->err && r->err->status == TOLK_OK) r->err->status = st;
    exec_node_prefix(r->err, xn->node);
  }
  for (uint32_t i = 0; !st && r->observe && i < xn->n_out; i++)
    if (xn->out[i] >= 0) r->observe(r->observe_user, xn->node->outputs[i], &fr->slots[xn->out[i]].t);
  return st;
}

tolk_status exec_graph(struct exec_run *r, struct xgraph *xg, struct xframe *fr) {
  fr->epoch = ++r->epoch_clock;
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    struct xnode *xn = &xg->nodes[k];
    tolk_status st = exec_node(r, xg, fr, xn);
    if (st) return st;
    for (uint32_t j = 0; j < xn->n_release; j++) {
      int32_t sl = xn->release[j];
      if (TOLK_UNLIKELY(r->n_pinned) && fr == r->frames && r->pinned[sl]) continue;
      exec_free(r, &fr->slots[sl].buf);
    }
  }
  return TOLK_OK;
}

/* ------------------------------------------------------------ kernel API */

static bool push_scratch(struct exec_run *r, size_t bytes, struct xbuf **out) {
  if (r->n_scratch == r->cap_scratch) {
    size_t nc = r->cap_scratch ? r->cap_scratch * 2 : 16;
    struct xbuf *ns = realloc(r->scratch, nc * sizeof *ns);
    if (!ns) {
      tolk_fail(r->err, TOLK_ERR_NO_MEMORY, "scratch table");
      return false;
    }
    r->scratch = ns;
    r->cap_scratch = nc;
  }
  struct xbuf *b = &r->scratch[r->n_scratch];
  if (!exec_alloc(r, bytes, b)) return false;
  r->n_scratch++;
  *out = b;
  return true;
}

void *op_scratch(struct op_ctx *c, size_t bytes) {
  struct xbuf *b;
  return push_scratch(c->run, bytes, &b) ? b->data : NULL;
}

struct tensor *op_output(struct op_ctx *c, size_t i, int32_t dtype, int rank,
                         const int64_t *dims) {
  struct xctx *xc = XCTX(c);
  struct exec_run *r = c->run;
  tolk_session *s = r->s;
  if (i >= c->n_out) {
    op_fail(c, TOLK_ERR_INTERNAL, "output %zu requested of a node with %zu outputs", i, c->n_out);
    return NULL;
  }
  struct tensor shape;
  memset(&shape, 0, sizeof shape);
  shape.dtype = dtype;
  size_t es = op_dtype_size(dtype);
  if (!es) {
    op_fail(c, dtype == TOLK_STRING ? TOLK_ERR_UNSUPPORTED : TOLK_ERR_INTERNAL,
            "output %zu: %s tensors are not supported", i, tolk_dtype_name((tolk_dtype)dtype));
    return NULL;
  }
  if (rank < 0 || rank > IR_MAX_RANK || !tensor_set_shape(&shape, rank, dims)) {
    op_fail(c, TOLK_ERR_SHAPE, "output %zu: invalid shape (rank %d, negative dim or overflow)",
            i, rank);
    return NULL;
  }
  if ((uint64_t)shape.numel > SIZE_MAX || !tolk_mul_size((size_t)shape.numel, es, &shape.nbytes)) {
    op_fail(c, TOLK_ERR_LIMIT, "output %zu: %lld elements overflow memory", i,
            (long long)shape.numel);
    return NULL;
  }
  int32_t slot = xc->xn->out[i];
  if (slot < 0) {
    struct tensor *t = &xc->fr->omitted[i];
    struct xbuf *b;
    if (!push_scratch(r, shape.nbytes, &b)) return NULL;
    *t = shape;
    t->data = b->data;
    return t;
  }
  struct xslot *sl = &xc->fr->slots[slot];
  if (sl->buf.data) exec_free(r, &sl->buf);
  if (sl->res) {
    r->output_bytes -= sl->res->t.nbytes;
    tolk_tensor_free(sl->res);
    sl->res = NULL;
  }
  sl->t = shape;
  if (xc->xg->id == 0 && s->out_pos[slot] >= 0) {
    struct tolk_tensor *bt = r->bound[slot];
    if (bt) {
      char a[160], b[160];
      if (bt->t.dtype != dtype || bt->t.rank != rank ||
          memcmp(bt->t.dims, shape.dims, (size_t)rank * sizeof *dims) != 0) {
        op_fail(c, bt->t.dtype != dtype ? TOLK_ERR_TYPE : TOLK_ERR_SHAPE,
                "output '%s' is %s %s but the caller's buffer is %s %s",
                xc->xn->node->outputs[i]->name, tolk_dtype_name((tolk_dtype)dtype),
                shape_str(&shape, a, sizeof a), tolk_dtype_name((tolk_dtype)bt->t.dtype),
                shape_str(&bt->t, b, sizeof b));
        return NULL;
      }
      sl->t.data = bt->t.data;
    } else {
      struct tolk_tensor *x = exec_tensor_new(&shape);
      if (!x) {
        op_fail(c, TOLK_ERR_NO_MEMORY, "output %zu: %zu bytes", i, shape.nbytes);
        return NULL;
      }
      sl->res = x;
      sl->t.data = x->t.data;
      r->output_bytes += shape.nbytes;
    }
  } else {
    if (!exec_alloc(r, shape.nbytes, &sl->buf)) return NULL;
    sl->t.data = sl->buf.data;
  }
  sl->epoch = xc->fr->epoch;
  return &sl->t;
}

void op_parallel_for(struct op_ctx *c, int64_t n, int64_t grain, op_range_fn fn, void *arg) {
  tolk_pool_for(c->pool, n, grain, fn, arg);
}

tolk_status op_run_subgraph(struct op_ctx *c, const struct ir_graph *g,
                            const struct tensor *const *inputs, size_t n_inputs,
                            struct tensor **outputs, size_t n_outputs) {
  struct xctx *xc = XCTX(c);
  struct exec_run *r = c->run;
  struct xgraph *sub = NULL;
  for (uint32_t j = 0; j < xc->xn->n_subs; j++)
    if (xc->xn->subs[j]->g == g) sub = xc->xn->subs[j];
  if (!sub)
    return op_fail(c, TOLK_ERR_INTERNAL, "subgraph '%s' does not belong to this node",
                   g && g->name ? g->name : "");
  if (n_inputs != sub->n_in || n_outputs != sub->n_out)
    return op_fail(c, TOLK_ERR_INVALID_MODEL,
                   "subgraph '%s' declares %u inputs and %u outputs; %zu and %zu given",
                   g->name ? g->name : "", sub->n_in, sub->n_out, n_inputs, n_outputs);
  struct xframe *fr = &r->frames[sub->id];
  for (uint32_t i = 0; i < sub->n_in; i++) {
    if (!inputs[i])
      return op_fail(c, TOLK_ERR_INVALID_MODEL, "subgraph '%s': input %u not given",
                     g->name ? g->name : "", i);
    fr->slots[sub->in_slots[i]].t = *inputs[i];
    if (r->observe) r->observe(r->observe_user, g->inputs[i], inputs[i]);
  }
  tolk_status st = exec_graph(r, sub, fr);
  if (st) return st;
  uint32_t n_new = 0;
  for (uint32_t i = 0; i < sub->n_out; i++) {
    struct xref ref = sub->out_refs[i];
    struct xslot *sl = &r->frames[ref.frame].slots[ref.slot];
    fr->outs[i] = sl->t;
    if (ref.frame == (int32_t)sub->id && sl->buf.data) {
      fr->pend_new[n_new++] = sl->buf;
      memset(&sl->buf, 0, sizeof sl->buf);
    }
    outputs[i] = &fr->outs[i];
  }
  /* Buffers of the previous call stay alive while an output still points
   * into them (a body passing a carried value straight through). */
  for (uint32_t j = 0; j < fr->n_pend; j++) {
    bool keep = false;
    for (uint32_t i = 0; i < sub->n_out && !keep; i++)
      keep = fr->outs[i].data == fr->pend[j].data;
    if (keep && n_new <= sub->n_out)
      fr->pend_new[n_new++] = fr->pend[j];
    else
      exec_free(r, &fr->pend[j]);
  }
  struct xbuf *tmp = fr->pend;
  fr->pend = fr->pend_new;
  fr->pend_new = tmp;
  fr->n_pend = n_new;
  return TOLK_OK;
}

/* ------------------------------------------------------------ session run */

static const char *declared_str(const struct ir_type *ty, char *buf, size_t size) {
  size_t n = 0;
  if (ty->rank < 0) {
    snprintf(buf, size, "(any shape)");
    return buf;
  }
  int w = snprintf(buf, size, "[");
  if (w > 0) n = (size_t)w;
  for (int d = 0; d < ty->rank && n < size; d++) {
    const struct ir_dim *dm = &ty->dims[d];
    if (dm->param && dm->param[0])
      w = snprintf(buf + n, size - n, "%s%s", d ? ", " : "", dm->param);
    else if (dm->value >= 0)
      w = snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)dm->value);
    else
      w = snprintf(buf + n, size - n, "%s?", d ? ", " : "");
    if (w < 0) break;
    n += (size_t)w;
  }
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

/* Checks one input against its declaration, binding symbolic dims. */
static tolk_status check_input(struct exec_run *r, const struct ir_value *v, int idx,
                               const struct tensor *t, size_t *n_sym, tolk_error *err) {
  const struct ir_type *ty = &v->type;
  char want[256], got[256];
  if (ty->kind != IR_TYPE_TENSOR) return TOLK_OK;
  if (ty->dtype != TOLK_UNDEFINED && ty->dtype != t->dtype)
    return tolk_fail(err, TOLK_ERR_TYPE, "input '%s': expected %s %s, given %s %s", v->name,
                     tolk_dtype_name((tolk_dtype)ty->dtype), declared_str(ty, want, sizeof want),
                     tolk_dtype_name((tolk_dtype)t->dtype), shape_str(t, got, sizeof got));
  if (ty->rank < 0) return TOLK_OK;
  if (ty->rank != t->rank)
    return tolk_fail(err, TOLK_ERR_SHAPE, "input '%s': expected rank %d %s, given rank %d %s",
                     v->name, ty->rank, declared_str(ty, want, sizeof want), t->rank,
                     shape_str(t, got, sizeof got));
  for (int d = 0; d < ty->rank; d++) {
    const struct ir_dim *dm = &ty->dims[d];
    /* An empty tensor binds no symbols: exporters feed empty placeholders
     * whose other dims do not follow the symbols (Optimum's merged decoder
     * takes past_key_values of [batch, heads, 0, head_dim] on its first step,
     * declared [batch, heads, encoder_sequence_length, head_dim]). */
    if (dm->param && dm->param[0] && t->numel == 0) continue;
    if (dm->param && dm->param[0]) {
      size_t j = 0;
      while (j < *n_sym && strcmp(r->sym_name[j], dm->param) != 0) j++;
      if (j == *n_sym) {
        r->sym_name[j] = dm->param;
        r->sym_val[j] = t->dims[d];
        r->sym_from[j] = idx;
        (*n_sym)++;
      } else if (r->sym_val[j] != t->dims[d]) {
        const struct ir_value *o = r->s->m->graph->inputs[r->sym_from[j]];
        return tolk_fail(err, TOLK_ERR_SHAPE,
                         "input '%s': expected %s with %s=%lld (bound by input '%s'), "
                         "given %s",
                         v->name, declared_str(ty, want, sizeof want), dm->param,
                         (long long)r->sym_val[j], o->name, shape_str(t, got, sizeof got));
      }
    } else if (dm->value >= 0 && dm->value != t->dims[d]) {
      return tolk_fail(err, TOLK_ERR_SHAPE, "input '%s': expected %s, given %s (dim %d)",
                       v->name, declared_str(ty, want, sizeof want),
                       shape_str(t, got, sizeof got), d);
    }
  }
  return TOLK_OK;
}

/* Binds the caller's inputs into the main frame and writes the signature. */
static tolk_status bind_inputs(struct exec_run *r, size_t n_inputs,
                               const char *const *names, const tolk_tensor *const *inputs,
                               tolk_error *err) {
  tolk_session *s = r->s;
  const struct ir_graph *g = s->m->graph;
  struct xframe *fr = &r->frames[0];
  size_t n_sym = 0, n_sig = 0;
  /* sig doubles as "given" markers: first pass records which were given. */
  for (size_t i = 0; i < g->n_inputs; i++) r->sig[i] = -1;
  for (size_t k = 0; k < n_inputs; k++) {
    if (!names[k] || !inputs[k])
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "input %zu: NULL name or tensor", k);
    size_t i = 0;
    while (i < g->n_inputs && strcmp(g->inputs[i]->name, names[k]) != 0) i++;
    if (i == g->n_inputs) {
      char list[512];
      size_t n = 0;
      list[0] = '\0';
      for (size_t j = 0; j < s->n_inputs && n < sizeof list; j++) {
        int w = snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "", s->inputs[j].name);
        if (w < 0) break;
        n += (size_t)w;
      }
      return tolk_fail(err, TOLK_ERR_NOT_FOUND, "the model has no input named '%s' (inputs: %s)",
                       names[k], list);
    }
    if (r->sig[i] >= 0)
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "input '%s' given twice", names[k]);
    if (r->kv && exec_kv_pair_of_input(s, i) >= 0)
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                       "input '%s' is kept in the key/value cache: do not pass it", names[k]);
    r->sig[i] = (int64_t)k;
  }
  for (size_t i = 0; i < g->n_inputs; i++) {
    const struct ir_value *v = g->inputs[i];
    struct tensor *slot = &fr->slots[v->index].t;
    int pair = r->kv && r->sig[i] < 0 ? exec_kv_pair_of_input(s, i) : -1;
    if (pair >= 0) {
      exec_kv_placeholder(r->kv, (uint32_t)pair, slot);
      tolk_status st = check_input(r, v, (int)i, slot, &n_sym, err);
      if (st) return st;
      continue;
    }
    if (r->sig[i] < 0) {
      if (!v->init)
        return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "input '%s' is missing", v->name);
      tensor_from_init(slot, s->graphs[0], v);
      continue;
    }
    const struct tensor *t = &inputs[r->sig[i]]->t;
    int64_t shared = r->kv ? exec_kv_shared_rows(s, r->kv, i) : -1;
    tolk_status st = TOLK_OK;
    if (shared >= 0) {
      /* One row per source: checked as the rows it stands for. */
      char got[256];
      if (t->rank < 1 || t->dims[0] != shared)
        return tolk_fail(err, TOLK_ERR_SHAPE,
                         "input '%s' is shared by the cache's rows (tolk_kv_cache_share): expected %lld rows, given %s",
                         v->name, (long long)shared, shape_str(t, got, sizeof got));
      struct tensor as_rows = *t;
      as_rows.dims[0] = tolk_kv_cache_rows(r->kv);
      st = check_input(r, v, (int)i, &as_rows, &n_sym, err);
    } else {
      st = check_input(r, v, (int)i, t, &n_sym, err);
    }
    if (st) return st;
    *slot = *t;
  }
  /* The signature, over the markers: per declared input dtype, rank, dims
   * (an initializer's when the input was not given). */
  for (size_t i = 0; i < g->n_inputs; i++) {
    const struct ir_value *v = g->inputs[i];
    const struct tensor *t = &fr->slots[v->index].t;
    r->sig[n_sig++] = t->dtype;
    r->sig[n_sig++] = t->rank;
    for (int d = 0; d < t->rank; d++) r->sig[n_sig++] = t->dims[d];
  }
  r->n_sig = n_sig;
  return TOLK_OK;
}

static tolk_status copy_out(const struct tensor *src, struct tolk_tensor *bound,
                            struct tolk_tensor **out, const char *name, tolk_error *err) {
  char a[160], b[160];
  if (bound) {
    if (bound->t.dtype != src->dtype || bound->t.rank != src->rank ||
        memcmp(bound->t.dims, src->dims, (size_t)src->rank * sizeof src->dims[0]) != 0)
      return tolk_fail(err, bound->t.dtype != src->dtype ? TOLK_ERR_TYPE : TOLK_ERR_SHAPE,
                       "output '%s' is %s %s but the caller's buffer is %s %s", name,
                       tolk_dtype_name((tolk_dtype)src->dtype), shape_str(src, a, sizeof a),
                       tolk_dtype_name((tolk_dtype)bound->t.dtype),
                       shape_str(&bound->t, b, sizeof b));
    if (src->nbytes && bound->t.data != src->data) memcpy(bound->t.data, src->data, src->nbytes);
    return TOLK_OK;
  }
  struct tolk_tensor *x = exec_tensor_new(src);
  if (!x) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "output '%s': %zu bytes", name, src->nbytes);
  if (src->nbytes) memcpy(x->t.data, src->data, src->nbytes);
  *out = x;
  return TOLK_OK;
}

/* In a session keeping its cache in place, the present outputs stay in the
 * cache and the values rewiring removed (the Transpose and Mul in front of
 * the keys' MatMul) are never computed; nor are those inside a fused
 * MatMulInteger chain (fuse_mmi.c). `pos` as in run_impl. */
static tolk_status check_computed(const tolk_session *s, int32_t pos, tolk_error *err) {
  const struct ir_graph *g = s->m->graph;
  const struct xgraph *xg = s->graphs[0];
  if (!s->n_kv && !s->n_fused) return TOLK_OK;
  if (pos >= 0) {
    for (uint32_t p = 0; p < s->n_kv; p++)
      if (xg->out_refs[pos].frame == 0 && xg->out_refs[pos].slot == s->kv[p].present_slot)
        return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                         "output '%s' is kept in the key/value cache (tolk_kv_cache_get reads it)",
                         g->outputs[pos]->name);
    return TOLK_OK;
  }
  const struct ir_value *v = g->values[-1 - pos];
  if (!v->producer || (xg->is_const && xg->is_const[v->index])) return TOLK_OK;
  /* Computed when its producer is still in the graph and still writes it:
   * KvAppend, which replaced the Concat, leaves the present in the cache. */
  for (uint32_t k = 0; k < xg->n_nodes; k++) {
    const struct xnode *xn = &xg->nodes[k];
    if (xn->node != v->producer) continue;
    for (uint32_t i = 0; i < xn->n_out; i++)
      if (xn->out[i] == v->index) return TOLK_OK;
  }
  return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "value '%s' is not computed: %s", v->name,
                   !s->n_fused ? "the key/value cache replaced its node"
                   : !s->n_kv  ? "its node runs fused into the MatMulInteger before it (opt level "
                                 "none runs every node as written)"
                               : "the key/value cache or a fused MatMulInteger replaced its node");
}

/* The caller's arguments, checked before any name is looked up. */
static tolk_status check_args(const tolk_session *s, const struct tolk_kv_cache *kv, size_t n_inputs,
                              const char *const *input_names, const tolk_tensor *const *inputs,
                              size_t n_outputs, const char *const *output_names,
                              tolk_tensor **outputs, tolk_error *err) {
  if (!s) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "session is NULL");
  if (s->n_kv && !kv)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "this session keeps its key/value cache in place: run it with tolk_session_run_kv");
  if (n_inputs && (!input_names || !inputs))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "input names or tensors are NULL");
  if (n_outputs && !outputs) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "outputs is NULL");
  if (!output_names && n_outputs != s->n_outputs)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "%zu outputs requested by position; the model has %zu", n_outputs,
                     s->n_outputs);
  return TOLK_OK;
}

/* Finds `name` among the main graph's outputs, then among its values (pos
 * as in run_impl); false if it names neither. */
static bool find_output(const struct ir_graph *g, const char *name, int32_t *pos) {
  size_t i = 0;
  while (i < g->n_outputs && (!name || strcmp(g->outputs[i]->name, name))) i++;
  *pos = (int32_t)i;
  if (i < g->n_outputs) return true;
  /* Not an output: an intermediate value of the main graph, kept alive
   * for this run (debugging and parity checks). */
  for (i = 0; name && i < g->n_values; i++)
    if (g->values[i]->name && !strcmp(g->values[i]->name, name) &&
        !(g->values[i]->flags & IR_VALUE_UNDEFINED))
      break;
  *pos = -1 - (int32_t)i;
  return name && i < g->n_values;
}

/* Resolves the requested outputs into pos before any work, so that a bad
 * name, or a value this session never computes, fails first. */
static tolk_status resolve_outputs(const tolk_session *s, size_t n_outputs, const char *const *output_names,
                                   int32_t *pos, tolk_error *err) {
  tolk_status st = TOLK_OK;
  for (size_t k = 0; k < n_outputs && !st; k++) {
    if (!output_names) pos[k] = (int32_t)k;
    else if (!find_output(s->m->graph, output_names[k], &pos[k]))
      st = tolk_fail(err, TOLK_ERR_NOT_FOUND, "the model has no output or value named '%s'",
                     output_names[k] ? output_names[k] : "(null)");
  }
  for (size_t k = 0; k < n_outputs && !st; k++) st = check_computed(s, pos[k], err);
  for (size_t k = 0; k < n_outputs && !st; k++)
    if (pos[k] < 0) st = exec_fold_check_value(s, -1 - pos[k], err);
  return st;
}

/* A run state from the session's pool, or a new one, reset for this run;
 * NULL when out of memory. Without err the run reports into *local. */
static struct exec_run *take_run(tolk_session *s, struct tolk_kv_cache *kv,
                                 const struct op_head_subset *head, tolk_error *err, tolk_error *local) {
  pthread_mutex_lock(&s->mu);
  struct exec_run *r = s->free_runs;
  if (r) s->free_runs = r->next_free;
  pthread_mutex_unlock(&s->mu);
  if (!r) r = exec_run_new(s);
  if (!r) return NULL;
  r->next_free = NULL;
  r->kv = kv;
  r->head = head;
  r->err = err ? err : local;
  r->err->status = TOLK_OK;
  r->err->message[0] = '\0';
  r->live = r->peak = r->heap_bytes = r->output_bytes = 0;
  r->nodes_run = 0;
  r->diverged = false;
  r->plan = NULL;
  return r;
}

/* Pins the requested intermediate values, so the run keeps them, and binds
 * the caller's own output buffers to their slots. */
static void bind_outputs(struct exec_run *r, const int32_t *pos, size_t n_outputs, tolk_tensor **outputs) {
  const struct ir_graph *g = r->s->m->graph;
  r->n_pinned = 0;
  for (size_t k = 0; k < n_outputs; k++) {
    if (pos[k] < 0) {
      r->pinned[-1 - pos[k]] = 1;
      r->n_pinned++;
      continue;
    }
    if (!outputs[k]) continue;
    const struct ir_value *v = g->outputs[pos[k]];
    if (v->graph == g) r->bound[v->index] = outputs[k];
  }
}

/* Hands the requested outputs over: into the caller's buffers, or as
 * tensors in res (a slot's own result where the run made one). outputs[]
 * is set only when every one succeeded; res starts all NULL. */
static tolk_status collect_outputs(struct exec_run *r, const int32_t *pos, size_t n_outputs,
                                   tolk_tensor **outputs, struct tolk_tensor **res) {
  const struct ir_graph *g = r->s->m->graph;
  const struct xgraph *xg = r->s->graphs[0];
  tolk_status st = TOLK_OK;
  for (size_t k = 0; k < n_outputs && !st; k++) {
    const struct ir_value *v = pos[k] < 0 ? g->values[-1 - pos[k]] : g->outputs[pos[k]];
    struct xref ref = {0, v->index};
    if (pos[k] >= 0) ref = xg->out_refs[pos[k]];
    struct xslot *sl = &r->frames[ref.frame].slots[ref.slot];
    if (outputs[k]) {
      st = copy_out(&sl->t, outputs[k], NULL, v->name, r->err);
    } else if (sl->res) {
      res[k] = sl->res;
      sl->res = NULL;
    } else {
      st = copy_out(&sl->t, NULL, &res[k], v->name, r->err);
      if (!st) r->output_bytes += sl->t.nbytes;
    }
  }
  for (size_t k = 0; k < n_outputs; k++) {
    if (st)
      tolk_tensor_free(res[k]);
    else if (res[k])
      outputs[k] = res[k];
  }
  return st;
}

/* Frees the outputs nobody asked for (and everything after a failure),
 * unbinds the caller's buffers and unpins the kept values. */
static void release_outputs(struct exec_run *r) {
  const struct xgraph *xg = r->s->graphs[0];
  for (uint32_t i = 0; i < r->s->m->graph->n_outputs; i++) {
    struct xref ref = xg->out_refs[i];
    if (ref.frame != 0) continue;
    struct xslot *sl = &r->frames[0].slots[ref.slot];
    if (sl->res) {
      tolk_tensor_free(sl->res);
      sl->res = NULL;
    }
    r->bound[ref.slot] = NULL;
  }
  if (r->n_pinned) {
    for (uint32_t i = 0; i < xg->n_slots; i++)
      if (r->pinned[i]) {
        exec_free(r, &r->frames[0].slots[i].buf);
        r->pinned[i] = 0;
      }
    r->n_pinned = 0;
  }
}

/* Ends a run that status st closes: what it still holds is freed, the
 * cache keeps or drops the step, stats are filled and r goes back to the
 * session's pool. */
static void finish_run(struct exec_run *r, tolk_status st, tolk_run_stats *stats) {
  tolk_session *s = r->s;
  release_outputs(r);
  if (st) sweep_all(r);
  if (r->kv) exec_kv_commit(r->kv, st == TOLK_OK);
  r->kv = NULL;
  r->head = NULL;
  exec_plan_end(r, st == TOLK_OK);
  if (stats) {
    memset(stats, 0, sizeof *stats);
    stats->peak_bytes = r->peak;
    stats->heap_bytes = r->heap_bytes;
    stats->output_bytes = r->output_bytes;
    stats->nodes_run = r->nodes_run;
    stats->arena_bytes = r->planned_arena;
    stats->plan_reused = r->plan_reused;
    stats->arena_held = r->arena_cap;
  }
  r->err = NULL;
  pthread_mutex_lock(&s->mu);
  r->next_free = s->free_runs;
  s->free_runs = r;
  pthread_mutex_unlock(&s->mu);
}

static tolk_status run_impl(tolk_session *s, struct tolk_kv_cache *kv,
                            const struct op_head_subset *head, size_t n_inputs,
                            const char *const *input_names, const tolk_tensor *const *inputs,
                            size_t n_outputs, const char *const *output_names,
                            tolk_tensor **outputs, tolk_run_stats *stats, exec_observe_fn observe,
                            void *user, tolk_error *err) {
  tolk_status st = check_args(s, kv, n_inputs, input_names, inputs, n_outputs, output_names, outputs, err);
  if (st) return st;
  /* pos[k]: requested output k is graph output pos[k], or for -1 - i the
   * main graph's value g->values[i]. */
  enum { SMALL = 16 };
  int32_t pos_small[SMALL];
  int32_t *pos = n_outputs <= SMALL ? pos_small : malloc(n_outputs * sizeof *pos);
  if (!pos) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "output table");
  tolk_error local;
  struct exec_run *r = NULL;
  st = resolve_outputs(s, n_outputs, output_names, pos, err);
  if (!st && !(r = take_run(s, kv, head, err, &local))) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "run state");
  if (st) {
    if (pos != pos_small) free(pos);
    return st;
  }

  struct tolk_tensor *res_small[SMALL] = {NULL};
  struct tolk_tensor **res = n_outputs <= SMALL ? res_small : calloc(n_outputs, sizeof *res);
  if (!res) st = tolk_fail(r->err, TOLK_ERR_NO_MEMORY, "output table");
  if (!st) st = bind_inputs(r, n_inputs, input_names, inputs, r->err);
  r->observe = observe;
  r->observe_user = user;
  if (!st) {
    bind_outputs(r, pos, n_outputs, outputs);
    exec_plan_begin(r);
    if (r->n_pinned) r->mode = RUN_HEAP; /* lifetimes differ from the plan's */
    st = exec_graph(r, s->graphs[0], &r->frames[0]);
  }
  if (!st) st = collect_outputs(r, pos, n_outputs, outputs, res);
  r->observe = NULL;
  finish_run(r, st, stats);
  if (pos != pos_small) free(pos);
  if (res && res != res_small) free(res);
  return st;
}

tolk_status tolk_session_run(tolk_session *s, size_t n_inputs, const char *const *input_names,
                             const tolk_tensor *const *inputs, size_t n_outputs,
                             const char *const *output_names, tolk_tensor **outputs,
                             tolk_run_stats *stats, tolk_error *err) {
  return run_impl(s, NULL, NULL, n_inputs, input_names, inputs, n_outputs, output_names, outputs, stats,
                  NULL, NULL, err);
}

tolk_status exec_run_observed(tolk_session *s, size_t n_inputs, const char *const *input_names,
                              const tolk_tensor *const *inputs, size_t n_outputs, const char *const *output_names,
                              tolk_tensor **outputs, exec_observe_fn observe, void *user, tolk_error *err) {
  return run_impl(s, NULL, NULL, n_inputs, input_names, inputs, n_outputs, output_names, outputs, NULL, observe,
                  user, err);
}

tolk_status tolk_session_run_kv(tolk_session *s, tolk_kv_cache *kv, size_t n_inputs,
                                const char *const *input_names, const tolk_tensor *const *inputs,
                                size_t n_outputs, const char *const *output_names,
                                tolk_tensor **outputs, tolk_run_stats *stats, tolk_error *err) {
  tolk_status st = exec_kv_check(s, kv, err);
  if (st) return st;
  return run_impl(s, kv, NULL, n_inputs, input_names, inputs, n_outputs, output_names, outputs, stats,
                  NULL, NULL, err);
}

tolk_status exec_run_with_head(tolk_session *s, struct tolk_kv_cache *kv, const struct op_head_subset *hs,
                               size_t n_inputs, const char *const *input_names,
                               const tolk_tensor *const *inputs, size_t n_outputs,
                               const char *const *output_names, tolk_tensor **outputs, tolk_error *err) {
  tolk_status st = kv ? exec_kv_check(s, kv, err) : TOLK_OK;
  if (st) return st;
  return run_impl(s, kv, hs, n_inputs, input_names, inputs, n_outputs, output_names, outputs, NULL, NULL, NULL,
                  err);
}

const struct op_head_subset *op_head_subset(const struct op_ctx *c) { return c->run ? c->run->head : NULL; }
