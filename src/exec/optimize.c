/*
 * optimize.c — tolk_model_optimize (tolk.h): the graph rewrites, run on the
 * IR of a privately loaded model — its main graph and every If/Loop/Scan
 * body in it — and written back (src/onnx/write.c).
 *
 * The passes that need no kernels live in src/ir/ (rewrite.c, fuse.c).
 * Constant folding is here because it runs the real kernels, as fold.c does
 * at session creation — in fact through fold.c: a session is created on
 * the graph as it stands and the values it folded become initializers,
 * so the file holds exactly what tolk would compute at creation. A value
 * fold.c does not keep (read only as a MatMul's packed weight: the
 * transposed tied embedding of a Marian decoder) stays a node.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "core/pbw.h"
#include "ir/rewrite.h"
#include "onnx/onnx.h"

/* The largest model accepted and written: protobuf's own 2 GiB bound. */
#define OPTIMIZE_MAX_BYTES ((size_t)2 << 30)

struct octx {
  struct ir_rw *rws; /* one per graph: the main graph first, then the bodies in it */
  size_t n_rws;
  tolk_report_fn report; /* a line per pass, or (each) the pass itself */
  tolk_optimize_pass_fn each;
  void *user;
  const tolk_model *model; /* what `each` is shown: the model whose IR this is */
  char skipped[TOLK_ERROR_MESSAGE_MAX + 32];
  size_t rewrites;
  bool kv_only; /* only the passes marked kv */
  tolk_error *err;
};

/* The folded tensor of main-graph slot `slot`, when fold.c kept its data. */
static const struct tensor *folded(const struct xgraph *xg, int32_t slot) {
  for (uint32_t c = 0; c < xg->n_consts; c++)
    if (xg->consts[c].slot == slot)
      return xg->consts[c].unread || xg->consts[c].t.dtype == TOLK_STRING ? NULL : &xg->consts[c].t;
  return NULL;
}

/* Whether every output of n was folded with its data kept. */
static bool node_folded(const struct xgraph *xg, const struct ir_node *n) {
  size_t outs = 0;
  for (size_t i = 0; i < n->n_outputs; i++) {
    if (!n->outputs[i]) continue;
    if (!folded(xg, n->outputs[i]->index)) return false;
    outs++;
  }
  return outs > 0;
}

/* Makes the values fold.c kept for xgraph xg initializers of its graph
 * and kills their nodes. */
static int fold_graph(struct ir_rw *rw, const struct xgraph *xg) {
  int n = 0;
  for (size_t k = 0; k < rw->g->n_nodes && !rw->oom; k++) {
    struct ir_node *nd = rw->g->nodes[k];
    if (!node_folded(xg, nd)) continue;
    for (size_t i = 0; i < nd->n_outputs && !rw->oom; i++) {
      struct ir_value *v = nd->outputs[i];
      const struct tensor *t = v ? folded(xg, v->index) : NULL;
      struct ir_tensor *it = t ? ir_rw_tensor(rw, t->dtype, t->dims, t->rank, t->data, t->nbytes) : NULL;
      if (it) ir_rw_make_initializer(rw, v, it);
    }
    if (rw->oom) break;
    ir_rw_kill(rw, nd);
    n++;
  }
  return !rw->oom && ir_rw_commit(rw) ? n : -1;
}

/* A graph with nodes tolk has no kernel for gets no folding (the other
 * passes need none); c->skipped says why. */
static int fold_pass(struct octx *c, tolk_status *st) {
  tolk_session_params p = tolk_session_default_params();
  p.threads = 1;
  p.opt_level = TOLK_OPT_BASIC;
  tolk_session *s = NULL;
  tolk_error local;
  *st = exec_session_create_ir(c->rws[0].m, &p, NULL, &s, &local);
  if (*st == TOLK_ERR_UNSUPPORTED) {
    snprintf(c->skipped, sizeof c->skipped, "it runs tolk's kernels: %s", local.message);
    *st = TOLK_OK;
    return 0;
  }
  if (*st) {
    if (c->err) *c->err = local;
    tolk_error_prefix(c->err, "constant folding runs tolk's kernels: ");
    return -1;
  }
  int n = 0;
  for (uint32_t gi = 0; gi < s->n_graphs && n >= 0; gi++)
    for (size_t r = 0; r < c->n_rws; r++) {
      if (c->rws[r].g != s->graphs[gi]->g) continue;
      int k = fold_graph(&c->rws[r], s->graphs[gi]);
      n = k < 0 ? -1 : n + k;
      break;
    }
  tolk_session_free(s);
  return n;
}

typedef int (*pass_fn)(struct ir_rw *rw);

struct pass {
  const char *name;
  pass_fn fn;          /* NULL: constant folding (fold_pass) */
  tolk_opt_level from; /* the lowest level running it */
  /* Only for a written model, as constant folding: a session runs the
   * chain fused its own way (src/exec/fuse_mmi.c), per row too
   * (quant_rows.c), which this fusion would hide from it. */
  bool written;
  /* Also in a key/value-cache session at BASIC (exec_optimize_kv_ir): the
   * fusions whose nodes compute the graph's numbers bit for bit and stand
   * outside what the cache rewrite (kv.c) matches — a decoder step's
   * residual Adds and LayerNorms, and Marian's x * Sigmoid(x) — and the
   * passes that let them match. */
  bool kv;
};

static const struct pass passes[] = {
    {"Constant nodes", ir_pass_constants, TOLK_OPT_BASIC, .kv = true},
    {"Identity of constants", ir_pass_identity, TOLK_OPT_BASIC, .kv = true},
    {"static shapes", ir_pass_static_shape, TOLK_OPT_BASIC, .kv = true},
    {"constant folding", NULL, TOLK_OPT_BASIC},
    {"common subexpressions", ir_pass_cse, TOLK_OPT_BASIC, .kv = true},
    {"Transpose elimination", ir_pass_transpose, TOLK_OPT_BASIC},
    {"Reshape elimination", ir_pass_reshape, TOLK_OPT_BASIC},
    /* ORT's basic level too: Gemm is an ai.onnx op. */
    {"MatMul + Add fusion", ir_pass_gemm, TOLK_OPT_BASIC},
    {"dead nodes", ir_pass_dce, TOLK_OPT_BASIC},
    {"LayerNormalization fusion", ir_pass_layernorm, TOLK_OPT_EXTENDED},
    {"QuickGelu fusion", ir_pass_quick_gelu, TOLK_OPT_EXTENDED, .kv = true},
    {"Gelu fusion", ir_pass_gelu, TOLK_OPT_EXTENDED},
    {"FastGelu fusion", ir_pass_fast_gelu, TOLK_OPT_EXTENDED},
    {"FusedMatMul fusion", ir_pass_fused_matmul, TOLK_OPT_EXTENDED},
    {"SkipLayerNormalization fusion", ir_pass_skip_layernorm, TOLK_OPT_EXTENDED, .kv = true},
    {"MatMulIntegerToFloat fusion", ir_pass_matmul_integer_to_float, TOLK_OPT_EXTENDED, true},
    {"dead nodes", ir_pass_dce, TOLK_OPT_EXTENDED, .kv = true},
    {"attention fusion", ir_pass_attention, TOLK_OPT_ALL},
    /* The attention fusion's lengths without a past, Shape(keys' input,
     * 1..2), repeat where layers attend to one tensor (the encoder's
     * output), and so do the mask Slices reading them. */
    {"common subexpressions", ir_pass_cse, TOLK_OPT_ALL},
    {"dead nodes", ir_pass_dce, TOLK_OPT_ALL},
};

/* Levels in the order they include each other (the enum's values are not:
 * EXTENDED came after ALL). */
static int rank_of(tolk_opt_level l) {
  switch (l) {
  case TOLK_OPT_BASIC: return 1;
  case TOLK_OPT_EXTENDED: return 2;
  case TOLK_OPT_ALL: return 3;
  default: return 0;
  }
}


static size_t live_nodes(const struct octx *c) {
  size_t n = 0;
  for (size_t r = 0; r < c->n_rws; r++) n += ir_rw_live_nodes(&c->rws[r]);
  return n;
}

/* Tells the report or `each` how pass `name` ended. */
static void tell(const struct octx *c, const char *name, size_t before, int n) {
  tolk_optimize_pass p = {name, c->skipped[0] ? c->skipped : NULL, before, live_nodes(c), (size_t)n, c->model};
  if (c->each) c->each(c->user, &p);
  else if (p.skipped) tolk_report_line(c->report, c->user, "%s: skipped, %s", name, p.skipped);
  else tolk_report_line(c->report, c->user, "%s: %zu -> %zu nodes (%d rewrite%s)", name, before, p.nodes_after, n,
                        n == 1 ? "" : "s");
}

/* Runs the passes of `level` over every graph, in place; constant folding
 * and the passes for written models only when `fold`. */
static tolk_status run_passes(struct octx *c, tolk_opt_level level, bool fold) {
  for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
    const struct pass *p = &passes[i];
    bool skip = c->kv_only ? !p->kv : rank_of(p->from) > rank_of(level) || ((!p->fn || p->written) && !fold);
    if (skip) continue;
    size_t before = live_nodes(c);
    tolk_status st = TOLK_OK;
    int n = 0;
    c->skipped[0] = '\0';
    if (!p->fn) n = fold_pass(c, &st);
    for (size_t r = 0; p->fn && r < c->n_rws && n >= 0; r++) {
      int k = p->fn(&c->rws[r]);
      n = k < 0 ? -1 : n + k;
    }
    if (st) return st;
    if (n < 0) return tolk_fail(c->err, TOLK_ERR_NO_MEMORY, "out of memory in the %s pass", p->name);
    c->rewrites += (size_t)n;
    tell(c, p->name, before, n);
  }
  return TOLK_OK;
}

/* The graphs under (and with) g, depth first; *n counts them, and they go
 * into out when it is not NULL. Passes never remove a node holding graphs,
 * so the set stays as collected. */
static void graphs_of(struct ir_graph *g, struct ir_graph **out, size_t *n) {
  if (out) out[*n] = g;
  (*n)++;
  for (size_t k = 0; k < g->n_nodes; k++)
    for (size_t a = 0; a < g->nodes[k]->n_attrs; a++)
      for (size_t j = 0; j < ir_attr_n_graphs(&g->nodes[k]->attrs[a]); j++) {
        /* The IR is the caller's to edit: its graphs are not const. */
        struct ir_graph *s = (struct ir_graph *)(uintptr_t)ir_attr_graph(&g->nodes[k]->attrs[a], j);
        if (s) graphs_of(s, out, n);
      }
}

/* Runs the passes over every graph of m, in place, telling c's report or
 * `each` of each pass. */
static tolk_status optimize_ir(struct octx *c, struct ir_model *m, tolk_opt_level level, bool fold,
                               bool keep_cache) {
  size_t n = 0;
  graphs_of(m->graph, NULL, &n);
  struct ir_graph **gs = calloc(n, sizeof *gs);
  c->rws = calloc(n, sizeof *c->rws);
  bool ok = gs && c->rws;
  if (ok) {
    n = 0;
    graphs_of(m->graph, gs, &n);
    c->n_rws = n;
  }
  for (size_t r = 0; ok && r < c->n_rws; r++) {
    ok = ir_rw_begin(&c->rws[r], m, gs[r]);
    c->rws[r].keep_cache = keep_cache;
  }
  tolk_status st = ok ? run_passes(c, level, fold)
                      : tolk_fail(c->err, TOLK_ERR_NO_MEMORY, "out of memory before optimizing the graph");
  for (size_t r = 0; r < c->n_rws; r++) ir_rw_end(&c->rws[r]);
  free(c->rws);
  free(gs);
  return st;
}

tolk_status exec_optimize_ir(struct ir_model *m, tolk_opt_level level, bool fold, bool keep_cache,
                             tolk_report_fn report, void *user, size_t *rewrites, tolk_error *err) {
  struct octx c = {.report = report, .user = user, .err = err};
  tolk_status st = optimize_ir(&c, m, level, fold, keep_cache);
  if (rewrites) *rewrites = c.rewrites;
  return st;
}

tolk_status exec_optimize_kv_ir(struct ir_model *m, tolk_error *err) {
  struct octx c = {.kv_only = true, .err = err};
  return optimize_ir(&c, m, TOLK_OPT_BASIC, false, true);
}

static tolk_status check_input(const tolk_model *m, const char *in, const char *out, tolk_opt_level level,
                               tolk_error *err) {
  if (!rank_of(level))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "optimization level %d is not basic, extended or all",
                     (int)level);
  if (!strcmp(in, out))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "%s: the output may not overwrite the input", out);
  if (m->ir.n_ext_files)
    return tolk_fail(err, TOLK_ERR_UNSUPPORTED, "%s: models with external data are not optimized (yet)", in);
  return TOLK_OK;
}

/* Nodes in g and the graphs nested in it. */
static size_t count_nodes(const struct ir_graph *g) {
  size_t n = g->n_nodes;
  for (size_t k = 0; k < g->n_nodes; k++)
    for (size_t a = 0; a < g->nodes[k]->n_attrs; a++)
      for (size_t j = 0; j < ir_attr_n_graphs(&g->nodes[k]->attrs[a]); j++) {
        const struct ir_graph *s = ir_attr_graph(&g->nodes[k]->attrs[a], j);
        if (s) n += count_nodes(s);
      }
  return n;
}

/* Loads the written bytes back and runs the checker on them: a bug here
 * must not become a file. */
static tolk_status verify_output(const struct pbw *b, const char *out_path, tolk_error *err) {
  tolk_model *q;
  tolk_status st = tolk_model_load_buffer(b->p, b->n, NULL, tolk_model_default_params(), &q, err);
  if (!st) st = tolk_model_check(q, NULL, NULL, err);
  tolk_model_free(q);
  if (st) tolk_error_prefix(err, "%s: the optimized model does not pass the checker (a bug in tolk): ", out_path);
  return st ? TOLK_ERR_INTERNAL : TOLK_OK;
}

/* tolk_model_optimize and tolk_model_optimize_each, c telling of the passes. */
static tolk_status optimize_file(struct octx *c, const char *in_path, const char *out_path, tolk_opt_level level,
                                 tolk_optimize_summary *out) {
  tolk_error *err = c->err;
  tolk_optimize_summary sum = {0};
  if (out) *out = sum;
  if (!in_path || !out_path) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_model_optimize: NULL path");
  tolk_model_params mp = tolk_model_default_params();
  mp.max_file_bytes = OPTIMIZE_MAX_BYTES;
  tolk_model *m = NULL;
  struct pbw b;
  pbw_init(&b, OPTIMIZE_MAX_BYTES);
  tolk_status st = tolk_model_load(in_path, mp, &m, err);
  if (st == TOLK_ERR_MALFORMED) tolk_error_prefix(err, "not an ONNX model: ");
  if (!st) st = check_input(m, in_path, out_path, level, err);
  if (!st) {
    sum.nodes_before = count_nodes(m->ir.graph);
    c->model = m;
    st = optimize_ir(c, &m->ir, level, true, false);
    sum.rewrites = c->rewrites;
  }
  if (!st) st = onnx_write_model(&b, m, err);
  if (!st) st = verify_output(&b, out_path, err);
  if (!st) st = tolk_write_file_atomic(out_path, b.p, b.n, err);
  if (!st) {
    sum.nodes_after = count_nodes(m->ir.graph);
    sum.bytes_before = m->ir.file_size;
    sum.bytes_after = b.n;
    if (out) *out = sum;
  }
  pbw_release(&b);
  tolk_model_free(m);
  return st;
}

tolk_status tolk_model_optimize(const char *in_path, const char *out_path, tolk_opt_level level,
                                tolk_report_fn report, void *user, tolk_optimize_summary *out,
                                tolk_error *err) {
  struct octx c = {.report = report, .user = user, .err = err};
  return optimize_file(&c, in_path, out_path, level, out);
}

tolk_status tolk_model_optimize_each(const char *in_path, const char *out_path, tolk_opt_level level,
                                     tolk_optimize_pass_fn each, void *user, tolk_optimize_summary *out,
                                     tolk_error *err) {
  struct octx c = {.each = each, .user = user, .err = err};
  return optimize_file(&c, in_path, out_path, level, out);
}
