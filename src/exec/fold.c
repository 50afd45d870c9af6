/*
 * fold.c — constant folding, the "basic" optimisation: a node whose inputs
 * are all constants (initializers the caller cannot override, Constant
 * outputs, earlier folded values — outer-scope ones too) is run once at
 * session creation with its own kernel, its outputs become constants of the
 * graph, and the node leaves the run list. Exporters leave many such nodes
 * (Constant, Shape arithmetic on constant shapes, Unsqueeze of constants,
 * dequantised weights), and every one of them costs a kernel call and an
 * output buffer per run otherwise.
 *
 * Using the real kernels keeps folding exact by construction. A node whose
 * kernel fails, or whose outputs would be too large to keep, is left to run
 * as usual.
 *
 * A folded value is not held when no remaining node reads its data: every
 * reader multiplies by a copy it packed at prepare (op_def.packed_input —
 * the MatMul/Gemm B behind a Transpose or Cast of an initializer), or no node
 * reads it at all any more (its readers were folded too). Optimum's Marian
 * decoders compute logits as MatMul(h, Transpose(shared.weight)); MatMul
 * packs the embedding itself, so keeping the transposed copy would hold a
 * second 133 MB LM head per decoder session. A node all of whose outputs
 * only packers read is not even run: its outputs are bound by shape alone
 * (data NULL, xconst.unread). Which nodes those are is decided before the
 * session makes aligned copies of misaligned initializers (exec_fold_plan),
 * so none is made for the embedding such a Transpose alone reads. Other
 * unread values are freed after folding.
 * Requesting such a value by name fails with a message saying so
 * (exec_fold_check_value): it is not part of any run any more, like the
 * values the key/value cache rewiring removes.
 *
 * The same reader table finally gives back the resident file pages of
 * initializers packed at prepare (release_packed_pages): packing faulted
 * every page of them in, and run() reads the packed copy (a Marian decoder's
 * weights, ~220 MB of file-backed RSS per decoder file).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exec.h"

/* Folded values some kernel reads are kept for the session's life. Large
 * ones are worth it too: a dequantised LM head (65001 x 512 floats, 133 MB)
 * recomputed on every decoder step costs more than any kernel after it.
 * The bound only stops a pathological graph from exhausting memory. */
#define FOLD_MAX_TOTAL ((size_t)4 << 30)

/* Drops what a folded attempt produced (outputs too big, or no memory). */
static void discard(struct exec_run *r, struct xframe *fr, const struct xnode *xn) {
  for (uint32_t i = 0; i < xn->n_out; i++) {
    int32_t sl = xn->out[i];
    if (sl < 0) continue;
    exec_free(r, &fr->slots[sl].buf);
    if (fr->slots[sl].res) {
      tolk_tensor_free(fr->slots[sl].res);
      fr->slots[sl].res = NULL;
    }
  }
}

static bool all_inputs_const(tolk_session *s, const struct xnode *xn) {
  for (uint32_t i = 0; i < xn->n_in; i++) {
    struct xref ref = xn->in[i];
    if (ref.frame < 0) continue;
    if (!s->graphs[ref.frame]->is_const[ref.slot]) return false;
  }
  return true;
}

/* Who reads a slot: readers in all, of which `packed` read only their
 * packed copy of it, all of one dtype and shape (`shape`); `output` when
 * some graph hands it on as an output. */
struct readers {
  uint32_t all, packed;
  bool output;
  struct tensor shape;
};

static void count_one(struct readers *r, const struct xnode *xn, uint32_t input) {
  struct tensor sh;
  r->all++;
  if (!xn->def->packed_input || !xn->def->packed_input(xn->state, input, &sh)) return;
  if (r->packed &&
      (sh.dtype != r->shape.dtype || sh.rank != r->shape.rank ||
       memcmp(sh.dims, r->shape.dims, (size_t)sh.rank * sizeof sh.dims[0]) != 0))
    return;
  r->shape = sh;
  r->packed++;
}

/* tab[gi][slot] for the nodes now in the graphs; false when out of memory. */
static bool count_readers(tolk_session *s, struct readers **tab) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    free(tab[gi]);
    if (!(tab[gi] = calloc(s->graphs[gi]->n_slots + 1, sizeof *tab[gi]))) return false;
  }
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    const struct xgraph *xg = s->graphs[gi];
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      const struct xnode *xn = &xg->nodes[k];
      for (uint32_t i = 0; i < xn->n_in; i++)
        if (xn->in[i].frame >= 0) count_one(&tab[xn->in[i].frame][xn->in[i].slot], xn, i);
    }
    for (uint32_t i = 0; i < xg->n_out; i++)
      if (xg->out_refs[i].frame >= 0) tab[xg->out_refs[i].frame][xg->out_refs[i].slot].output = true;
  }
  return true;
}

static void free_readers(tolk_session *s, struct readers **tab) {
  if (!tab) return;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) free(tab[gi]);
  free(tab);
}

/* Whether every reader of a value with readers r takes only its packed
 * copy (none at all counts), so the value's data need not be held. */
static bool unread(const struct readers *r) { return !r->output && r->all == r->packed; }

/* Whether xn's outputs need not be computed at all: each one is read, and
 * only by packers. */
static bool outputs_unread(const struct readers *tab, const struct xnode *xn) {
  bool any = false;
  for (uint32_t i = 0; i < xn->n_out; i++) {
    int32_t sl = xn->out[i];
    if (sl < 0) continue;
    if (!tab[sl].packed || !unread(&tab[sl])) return false;
    any = true;
  }
  return any;
}

static bool same_shape(const struct tensor *a, const struct tensor *b) {
  return a->dtype == b->dtype && a->rank == b->rank &&
         !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]);
}

/* After folding: frees the data of each folded value no remaining node
 * reads (unread()), unless another held value points into it. */
static void drop_unread(tolk_session *s, struct readers **tab) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    for (uint32_t c = 0; c < xg->n_consts; c++) {
      struct xconst *xc = &xg->consts[c];
      const struct readers *r = &tab[gi][xc->slot];
      if (xc->unread || !xc->t.nbytes || !unread(r)) continue;
      if (r->packed && !same_shape(&xc->t, &r->shape)) continue;
      size_t f = 0;
      while (f < s->n_folded && s->folded[f] != xc->t.data) f++;
      if (f == s->n_folded) continue; /* not a buffer of its own */
      const char *b = xc->t.data;
      bool aliased = false;
      for (uint32_t gj = 0; gj < s->n_graphs && !aliased; gj++) {
        const struct xgraph *o = s->graphs[gj];
        for (uint32_t j = 0; j < o->n_consts && !aliased; j++) {
          const char *d = o->consts[j].t.data;
          aliased = &o->consts[j] != xc && d && d >= b && d < b + xc->t.nbytes;
        }
      }
      if (aliased) continue;
      free(s->folded[f]);
      s->folded[f] = s->folded[--s->n_folded];
      xc->t.data = NULL;
      xc->unread = true;
      s->folded_bytes -= xc->t.nbytes;
      s->folded_unread_bytes += xc->t.nbytes;
    }
  }
}

/* Whether v is an initializer whose pages may be given back: its data lies
 * in a read-only private file mapping (ir_tensor.file_pages, set by the
 * loader), and no caller may feed v in its place (a graph input's default). */
static bool droppable(const struct ir_value *v) {
  const struct ir_tensor *t = v->init;
  return t && t->file_pages && t->data && t->nbytes && !(v->flags & IR_VALUE_GRAPH_INPUT);
}

/* Whether some node of s packed its copy from all of the initializer data
 * at `data` (op_def.packed_src_dropped, which also records that its pages
 * are given back). */
static bool packed_from(const tolk_session *s, const void *data) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    const struct xgraph *xg = s->graphs[gi];
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      const struct xnode *xn = &xg->nodes[k];
      if (xn->def->packed_src_dropped && xn->def->packed_src_dropped(xn->state, data))
        return true;
    }
  }
  return false;
}

void exec_release_packed_now(const tolk_session *s, const struct xnode *xn) {
  if (!xn->def->packed_src_dropped || !xn->state) return;
  for (size_t i = 0; i < xn->node->n_inputs; i++) {
    const struct ir_value *v = xn->node->inputs[i];
    if (!v || !droppable(v)) continue;
    if (xn->def->packed_src_dropped(xn->state, v->init->data)) tolk_drop_mapped_pages(v->init->data, v->init->nbytes);
  }
}

/* Drops the resident pages inside every zero-copy initializer no graph hands
 * on that a packer read whole at prepare (packed_from), or that no
 * remaining node reads except as its packed copy (unread(): also none at
 * all). A packed weight with other readers is included: the tied embedding
 * is packed as the LM head, but Gather reads only the rows of the tokens
 * seen, so the few pages it needs come back and the rest (133 MB per Marian
 * decoder file) stay out. Only pages wholly inside the tensor's bytes, and
 * only in a PROT_READ MAP_PRIVATE file mapping: such a page was never
 * written, so MADV_DONTNEED just unmaps it and any later read — Gather,
 * another session packing the same model, tolk check — faults the file's
 * bytes back in. The reader test only decides what is worth dropping;
 * correctness does not rest on it. */
static void release_packed_pages(tolk_session *s, struct readers **tab) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    const struct xgraph *xg = s->graphs[gi];
    for (size_t i = 0; i < xg->g->n_initializers; i++) {
      const struct ir_value *v = xg->g->initializers[i];
      const struct ir_tensor *t = v->init;
      if (!droppable(v) || tab[gi][v->index].output) continue;
      if (!packed_from(s, t->data) && !unread(&tab[gi][v->index])) continue;
      tolk_drop_mapped_pages(t->data, t->nbytes);
    }
  }
}

/* Whether folding may evaluate xn at all (its inputs aside). */
static bool foldable(const struct xnode *xn) {
  return !xn->n_subs && xn->n_out && !xn->def->nondeterministic;
}

static void clear_plan(tolk_session *s) {
  for (uint32_t gi = 0; gi < s->n_graphs; gi++)
    for (uint32_t k = 0; k < s->graphs[gi]->n_nodes; k++) s->graphs[gi]->nodes[k].fold_skip = false;
}

/* The skip decision exec_fold makes, taken before aligned copies are made
 * (exec_align_bind), so a misaligned initializer only a skipped node reads
 * (the tied embedding behind Transpose -> packed LM head, 133 MB) is never
 * copied just to be freed after folding. exec_fold skips a node when it is
 * foldable, its inputs are constant when it comes up, and every output is
 * read, and only by packers. The readers are the same here (nothing changes
 * the graphs in between); constness is taken optimistically, as if every
 * foldable node folded, so the plan covers every node exec_fold can skip.
 * A planned node exec_fold keeps after all (an earlier one did not fold,
 * out of memory) has its flag cleared, and exec_align_trim copies for it. */
void exec_fold_plan(tolk_session *s) {
  if (s->params.opt_level == TOLK_OPT_NONE) return;
  struct readers **tab = calloc(s->n_graphs, sizeof *tab);
  uint8_t **cst = calloc(s->n_graphs ? s->n_graphs : 1, sizeof *cst);
  bool ok = tab && cst && count_readers(s, tab);
  for (uint32_t gi = 0; gi < s->n_graphs && ok; gi++) {
    const struct xgraph *xg = s->graphs[gi];
    if (!(cst[gi] = calloc(xg->n_slots + 1, 1))) ok = false;
    for (size_t i = 0; ok && i < xg->g->n_initializers; i++) {
      const struct ir_value *v = xg->g->initializers[i];
      if (!(v->flags & IR_VALUE_GRAPH_INPUT)) cst[gi][v->index] = 1;
    }
  }
  for (uint32_t gi = 0; gi < s->n_graphs && ok; gi++) {
    struct xgraph *xg = s->graphs[gi];
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      struct xnode *xn = &xg->nodes[k];
      bool c = foldable(xn);
      for (uint32_t i = 0; c && i < xn->n_in; i++)
        c = xn->in[i].frame < 0 || cst[xn->in[i].frame][xn->in[i].slot];
      if (!c) continue;
      for (uint32_t i = 0; i < xn->n_out; i++)
        if (xn->out[i] >= 0) cst[gi][xn->out[i]] = 1;
      xn->fold_skip = outputs_unread(tab[gi], xn);
    }
  }
  /* Without the whole plan, plan nothing: exec_fold then skips nothing. */
  if (!ok) clear_plan(s);
  if (cst)
    for (uint32_t gi = 0; gi < s->n_graphs; gi++) free(cst[gi]);
  free(cst);
  free_readers(s, tab);
}

tolk_status exec_fold(tolk_session *s, tolk_error *err) {
  (void)err;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    xg->is_const = tolk_arena_array(&s->arena, xg->n_slots + 1, 1);
    if (!xg->is_const) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "constant folding");
    for (size_t i = 0; i < xg->g->n_initializers; i++) {
      const struct ir_value *v = xg->g->initializers[i];
      if (!(v->flags & IR_VALUE_GRAPH_INPUT)) xg->is_const[v->index] = 1;
    }
  }
  if (s->params.opt_level == TOLK_OPT_NONE) return TOLK_OK;
  struct exec_run *r = exec_run_new(s);
  if (!r) { /* folding is an optimisation */
    clear_plan(s);
    return TOLK_OK;
  }
  /* Readers as the graphs stand before folding; without memory for the
   * table everything folded is simply held. */
  struct readers **tab = calloc(s->n_graphs, sizeof *tab);
  if (tab && !count_readers(s, tab)) {
    free_readers(s, tab);
    tab = NULL;
  }
  tolk_error local;
  r->err = &local;
  r->mode = RUN_HEAP;
  size_t kept = 0;
  for (uint32_t gi = 0; gi < s->n_graphs; gi++) {
    struct xgraph *xg = s->graphs[gi];
    struct xframe *fr = &r->frames[xg->id];
    fr->epoch = ++r->epoch_clock;
    uint32_t n_const = 0, cap_const = 0;
    struct xconst *consts = NULL;
    uint32_t out = 0;
    for (uint32_t k = 0; k < xg->n_nodes; k++) {
      struct xnode *xn = &xg->nodes[k];
      bool folded = false;
      /* Outputs only packers read (exec_fold_plan): bound by shape, never
       * computed. Such a node is never run here either: its misaligned
       * inputs may have no aligned copy. Without the reader table (out of
       * memory) it is left to run, and exec_align_trim copies for it. */
      const bool skip = xn->fold_skip && tab;
      if (foldable(xn) && all_inputs_const(s, xn) && (skip || !xn->fold_skip)) {
        local.status = TOLK_OK;
        if (skip || exec_node(r, xg, fr, xn) == TOLK_OK) {
          folded = true;
          size_t bytes = 0;
          for (uint32_t i = 0; i < xn->n_out && !skip; i++)
            if (xn->out[i] >= 0) bytes += fr->slots[xn->out[i]].t.nbytes;
          if (kept + bytes > FOLD_MAX_TOTAL) folded = false;
          /* Room for every output up front, so adoption cannot fail halfway. */
          while (folded && s->cap_folded - s->n_folded < xn->n_out) {
            size_t nc = s->cap_folded ? s->cap_folded * 2 : 64;
            void **nf = realloc(s->folded, nc * sizeof *nf);
            if (!nf) folded = false;
            else {
              s->folded = nf;
              s->cap_folded = nc;
            }
          }
          if (folded && n_const + xn->n_out > cap_const) {
            uint32_t nc = (n_const + xn->n_out) * 2;
            struct xconst *ncs = tolk_arena_array(&s->arena, nc, sizeof *ncs);
            if (!ncs) {
              folded = false;
            } else {
              if (n_const) memcpy(ncs, consts, n_const * sizeof *ncs);
              consts = ncs;
              cap_const = nc;
            }
          }
          for (uint32_t i = 0; folded && i < xn->n_out; i++) {
            int32_t sl = xn->out[i];
            if (sl < 0) continue;
            struct xslot *slot = &fr->slots[sl];
            consts[n_const].slot = sl;
            consts[n_const].unread = skip;
            if (skip) {
              /* A packer folded later still sees the shape it checks. */
              slot->t = tab[gi][sl].shape;
              consts[n_const].t = slot->t;
              s->folded_unread_bytes += tab[gi][sl].shape.nbytes;
              n_const++;
              xg->is_const[sl] = 1;
              continue;
            }
            void *owned = slot->res ? (void *)slot->res : slot->buf.heap ? slot->buf.data : NULL;
            if (owned) {
              /* The session owns it now. */
              s->folded[s->n_folded++] = owned;
              slot->res = NULL;
              memset(&slot->buf, 0, sizeof slot->buf);
            }
            consts[n_const].t = slot->t;
            n_const++;
            xg->is_const[sl] = 1;
          }
          if (folded) kept += bytes;
          else discard(r, fr, xn);
        }
      }
      if (folded) {
        s->n_nodes_folded++;
        if (xn->state && xn->def->release) xn->def->release(xn->state);
        xn->state = NULL;
      }
      else {
        xn->fold_skip = false; /* it runs: its inputs need what runs need */
        xg->nodes[out++] = *xn;
      }
    }
    xg->n_nodes = out;
    xg->consts = consts;
    xg->n_consts = n_const;
  }
  exec_run_free(r);
  s->folded_bytes = kept;
  /* Readers again, of the nodes left: values only folded nodes read are
   * unread now too. */
  if (tab && count_readers(s, tab)) {
    drop_unread(s, tab);
    release_packed_pages(s, tab);
  }
  free_readers(s, tab);
  return TOLK_OK;
}

tolk_status exec_fold_check_value(const tolk_session *s, int32_t index, tolk_error *err) {
  const struct xgraph *xg = s->graphs[0];
  if (index < 0 || (uint32_t)index >= xg->n_slots || !xg->is_const || !xg->is_const[index])
    return TOLK_OK;
  for (uint32_t c = 0; c < xg->n_consts; c++)
    if (xg->consts[c].slot == index && xg->consts[c].unread)
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                       "value '%s' is not kept: constant folding found that no node reads it "
                       "(each reader multiplies by its own packed copy); create the session "
                       "with opt level none to read it",
                       s->m->graph->values[index]->name);
  return TOLK_OK;
}
