/*
 * align.c — aligned copies of initializers the loader left misaligned.
 *
 * Exporters write raw_data with no padding, so in a model with inline
 * weights most float tensors start at addresses not divisible by 4. The
 * loader keeps them in the file mapping anyway (ir_tensor.misaligned), so
 * loading copies nothing. Kernels, though, read their inputs as typed
 * arrays, which needs alignment; only a few read an input bytewise or not at
 * all at run time, and their op_defs say so (unaligned_inputs: Gather's
 * table; packed_input: a B that MatMul/Gemm packed at prepare). So the
 * session decides per initializer, from its readers: when every reader
 * tolerates misalignment it binds the mapping as it is; otherwise it binds
 * an aligned copy of its own.
 *
 * Copies are made once, at session creation (after prepare, before folding,
 * which runs kernels too), never during a run: runs stay lock-free, and
 * sessions created concurrently on one model share nothing here. After
 * folding, a copy whose typed readers were all folded away is freed again,
 * unless a folded constant points into it. Readers folding will not even run
 * (xnode.fold_skip, from exec_fold_plan: a Transpose(embedding) feeding a
 * packed LM head) do not count at all, so the 133 MB embedding of a Marian
 * decoder is never copied, not even for the moment between bind and trim,
 * where it would set the process's peak memory. Should folding keep such a
 * node after all (out of memory), exec_align_trim makes its copy then. For
 * a Marian decoder only the small biases and norm weights are copied; the
 * MatMul weights and the embedding are read from the mapping.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* The misaligned initializer behind slot `slot` of graph xg, or NULL. */
static const struct ir_value *misaligned_init(const struct xgraph *xg, int32_t slot) {
  if (slot < 0 || (uint32_t)slot >= xg->n_slots || (size_t)slot >= xg->g->n_values) return NULL;
  const struct ir_value *v = xg->g->values[slot];
  if (!v || !(v->flags & IR_VALUE_INITIALIZER) || !v->init || !v->init->misaligned ||
      !v->init->data || !v->init->nbytes)
    return NULL;
  return v;
}

/* Whether xn's run() may be given misaligned initializer t as input i: its
 * def reads that input only bytewise, or only through the copy it packed at
 * prepare from a tensor of t's dtype and shape. */
static bool unaligned_ok(const struct xnode *xn, uint32_t i, const struct ir_tensor *t) {
  const struct op_def *d = xn->def;
  if (i < 32 && (d->unaligned_inputs >> i & 1u)) return true;
  struct tensor sh;
  return d->packed_input && d->packed_input(xn->state, i, &sh) && sh.dtype == t->dtype &&
         sh.rank == t->rank && !memcmp(sh.dims, t->dims, (size_t)t->rank * sizeof t->dims[0]);
}

/* Marks in need[graph][slot] every misaligned initializer some remaining
 * reader needs aligned. Returns whether any is marked. */
static bool mark_needed(tolk_session *s, uint8_t **need) {
  bool any = false;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    const struct xgraph *xg = s->graphs[gi];
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      const struct xnode *xn = &xg->nodes[k];
      if (xn->fold_skip) continue; /* folding binds its outputs, never runs it */
      for (uint32_t i = 0; i < xn->n_in; i++) {
        struct xref ref = xn->in[i];
        if (ref.frame < 0 || (uint32_t)ref.frame >= s->n_graphs || !need[ref.frame]) continue;
        const struct ir_value *v = misaligned_init(s->graphs[ref.frame], ref.slot);
        if (!v || unaligned_ok(xn, i, v->init)) continue;
        need[ref.frame][ref.slot] = 1;
        any = true;
      }
    }
    /* Graph outputs are handed on (to the caller, or to the node running
     * the subgraph) as typed tensors. */
    for (uint32_t i = 0; i < xg->n_out; i++) {
      struct xref ref = xg->out_refs[i];
      if (ref.frame < 0 || (uint32_t)ref.frame >= s->n_graphs || !need[ref.frame]) continue;
      if (!misaligned_init(s->graphs[ref.frame], ref.slot)) continue;
      need[ref.frame][ref.slot] = 1;
      any = true;
    }
  }
  return any;
}

/* need[gi]: a zeroed n_slots array for each graph holding a misaligned
 * initializer, NULL for the others. False when out of memory. */
static bool need_tables(tolk_session *s, uint8_t ***out, bool *any_misaligned) {
  *any_misaligned = false;
  uint8_t **need = calloc(s->n_graphs ? s->n_graphs : 1, sizeof *need);
  if (!need) return false;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    const struct xgraph *xg = s->graphs[gi];
    bool has = false;
    for (size_t i = 0; i < xg->g->n_initializers && !has; i++)
      has = misaligned_init(xg, xg->g->initializers[i]->index) != NULL;
    if (!has) continue;
    *any_misaligned = true;
    if (!(need[gi] = calloc(xg->n_slots + 1, 1))) {
      for (uint32_t j = 0; j < gi; j++) free(need[j]);
      free(need);
      return false;
    }
  }
  *out = need;
  return true;
}

static void free_tables(tolk_session *s, uint8_t **need) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) free(need[gi]);
  free(need);
}

/* Gives each slot marked in need an aligned copy, unless it has one. */
static tolk_status make_copies(tolk_session *s, uint8_t **need, tolk_error *err) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    if (!need[gi]) continue;
    for (uint32_t sl = 0; sl < xg->n_slots; sl++) {
      if (!need[gi][sl] || (xg->aligned && xg->aligned[sl])) continue;
      if (!xg->aligned && !(xg->aligned = calloc(xg->n_slots, sizeof *xg->aligned)))
        return tolk_fail(err, TOLK_ERR_NO_MEMORY, "aligning initializers");
      const struct ir_tensor *t = xg->g->values[sl]->init;
      /* malloc's alignment covers every dtype (at most 8 bytes). */
      void *copy = malloc(t->nbytes);
      if (!copy)
        return tolk_fail(err, TOLK_ERR_NO_MEMORY,
                         "no memory for an aligned copy of initializer '%s' (%zu bytes)",
                         xg->g->values[sl]->name, t->nbytes);
      memcpy(copy, t->data, t->nbytes);
      xg->aligned[sl] = copy;
      s->aligned_bytes += t->nbytes;
      s->aligned_bytes_total += t->nbytes;
    }
  }
  return TOLK_OK;
}

tolk_status exec_align_bind(tolk_session *s, tolk_error *err) {
  uint8_t **need;
  bool any;
  if (!need_tables(s, &need, &any)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "aligning initializers");
  tolk_status st = any && mark_needed(s, need) ? make_copies(s, need, err) : TOLK_OK;
  free_tables(s, need);
  return st;
}

/* Whether a folded constant of any graph points into [p, p + n). */
static bool const_points_into(const tolk_session *s, const void *p, size_t n) {
  const char *b = p;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    const struct xgraph *xg = s->graphs[gi];
    for (uint32_t i = 0; i < xg->n_consts; i++) {
      const char *d = xg->consts[i].t.data;
      if (d && d >= b && d < b + n) return true;
    }
  }
  return false;
}

tolk_status exec_align_trim(tolk_session *s, tolk_error *err) {
  uint8_t **need;
  bool any;
  /* Without the tables we cannot tell whether a node folding kept still
   * lacks its copy. */
  if (!need_tables(s, &need, &any)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "aligning initializers");
  if (any) mark_needed(s, need);
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    if (!xg->aligned || !need[gi]) continue;
    for (uint32_t sl = 0; sl < xg->n_slots; sl++) {
      void *copy = xg->aligned[sl];
      if (!copy || need[gi][sl]) continue;
      size_t n = xg->g->values[sl]->init->nbytes;
      if (const_points_into(s, copy, n)) continue;
      free(copy);
      xg->aligned[sl] = NULL;
      s->aligned_bytes -= n;
    }
  }
  /* Readers folding was to skip but kept (exec_fold clears their
   * fold_skip) are counted now; they get their copies here. */
  tolk_status st = any ? make_copies(s, need, err) : TOLK_OK;
  free_tables(s, need);
  return st;
}

void exec_align_free(tolk_session *s) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    if (!xg || !xg->aligned) continue;
    for (uint32_t sl = 0; sl < xg->n_slots; sl++) free(xg->aligned[sl]);
    free(xg->aligned);
    xg->aligned = NULL;
  }
  s->aligned_bytes = 0;
}

const void *exec_init_data(const struct xgraph *xg, const struct ir_value *v) {
  if (xg->aligned && v->index >= 0 && (uint32_t)v->index < xg->n_slots && xg->aligned[v->index])
    return xg->aligned[v->index];
  return v->init->data;
}
