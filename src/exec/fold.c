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
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* Folded values are kept for the session's life. Large ones are worth it
 * too: a transposed or dequantised LM head (65001 x 512 floats, 133 MB)
 * recomputed on every decoder step costs more than any kernel after it.
 * The bound only stops a pathological graph from exhausting memory. */
#define FOLD_MAX_TOTAL ((size_t)4 << 30)

static bool nondeterministic(const struct ir_node *n) {
  static const char *const ops[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                    "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(n->op_type, ops[i])) return true;
  return false;
}

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
  if (!r) return TOLK_OK; /* folding is an optimisation */
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
      if (!xn->n_subs && xn->n_out && !nondeterministic(xn->node) && all_inputs_const(s, xn)) {
        local.status = TOLK_OK;
        if (exec_node(r, xg, fr, xn) == TOLK_OK) {
          folded = true;
          size_t bytes = 0;
          for (uint32_t i = 0; i < xn->n_out; i++)
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
            void *owned = slot->res ? (void *)slot->res : slot->buf.heap ? slot->buf.data : NULL;
            if (owned) {
              /* The session owns it now. */
              s->folded[s->n_folded++] = owned;
              slot->res = NULL;
              memset(&slot->buf, 0, sizeof slot->buf);
            }
            consts[n_const].slot = sl;
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
      else
        xg->nodes[out++] = *xn;
    }
    xg->n_nodes = out;
    xg->consts = consts;
    xg->n_consts = n_const;
  }
  exec_run_free(r);
  return TOLK_OK;
}
