/*
 * generate.c — generation for a batch of sentences encoded together: every
 * sentence runs its own search (search.c) over its own rows of the batch,
 * one decoder step for all of them at a time; a finished sentence leaves
 * the batch at once and beams follow their parents. Each search sees only
 * its rows' logits and the kernels are batch-invariant, so a sentence
 * generates the same here as alone — the scheduler of `tolk serve` runs
 * the same searches over a batch whose sentences come and go.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/pool.h"
#include "mt.h"

struct batch {
  struct mt_search **search; /* n_search: one per sentence (per sample copy) */
  size_t n_search;
  int32_t *live;   /* searches still running, in row order */
  size_t n_live;
  int32_t *rows;   /* rows to keep after a step */
  int32_t *tokens; /* the step's inputs */
  int32_t *parents;  /* per row, as mt_search_step_many */
  struct mt_search **stepping; /* the live searches, in row order */
};

static void batch_free(struct batch *b) {
  for (size_t i = 0; b->search && i < b->n_search; i++) mt_search_free(b->search[i]);
  free(b->search);
  free(b->live);
  free(b->rows);
  free(b->tokens);
  free(b->parents);
  free(b->stepping);
}

/* One search per sentence, or per sample copy when sampling returns
 * several sequences (each copy its own row and seed, as transformers
 * expands the inputs). */
static tolk_status batch_init(const struct mt_config *cfg, const tolk_generate_params *p, size_t n,
                              struct batch *b, size_t *copies, tolk_error *err) {
  tolk_generate_params one = *p;
  *copies = p->num_beams == 1 && p->do_sample ? (size_t)p->num_return_sequences : 1;
  if (*copies > 1) one.num_return_sequences = 1;
  size_t K = p->num_beams > 1 ? (size_t)p->num_beams : 1;
  b->n_search = n * *copies;
  b->search = calloc(b->n_search, sizeof *b->search);
  b->live = malloc(b->n_search * sizeof *b->live);
  b->rows = malloc(b->n_search * K * sizeof *b->rows);
  b->tokens = malloc(b->n_search * K * sizeof *b->tokens);
  b->parents = malloc(b->n_search * K * sizeof *b->parents);
  b->stepping = malloc(b->n_search * sizeof *b->stepping);
  if (!b->search || !b->live || !b->rows || !b->tokens || !b->parents || !b->stepping)
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
  for (size_t i = 0; i < b->n_search; i++) {
    one.seed = p->seed + (uint64_t)(i % *copies);
    tolk_status st = mt_search_new(cfg, &one, &b->search[i], err);
    if (st) return st;
    b->live[i] = (int32_t)i;
  }
  b->n_live = b->n_search;
  return TOLK_OK;
}

/* Runs the step loop until every search is done. Row r of the state
 * belongs to search live[r / K] throughout, but for the first step: every
 * row of a source (its beams or sample copies, `per` of them) starts from
 * the decoder start token alone, so they are all the same row, and the
 * state keeps one per source until the first step's rows are chosen. That
 * step, the one that computes the cross-attention keys and values of the
 * whole source, then runs on a batch `per` times smaller; its logits are
 * copied to every row (bit for bit what each would have computed: a row's
 * result does not depend on the others). */
static tolk_status step_loop(struct batch *b, struct mt_state *s, struct mt_scratch *sc, size_t per,
                             size_t vocab, tolk_error *err) {
  tolk_status st = TOLK_OK;
  for (bool first = true; !st && b->n_live; first = false) {
    size_t t = 0;
    for (size_t a = 0; a < b->n_live; a++) {
      struct mt_search *x = b->search[b->live[a]];
      b->stepping[a] = x;
      memcpy(b->tokens + t, mt_search_tokens(x), (size_t)mt_search_rows(x) * sizeof *b->tokens);
      t += (size_t)mt_search_rows(x);
    }
    const size_t fold = first ? per : 1; /* search rows per state row */
    for (size_t r = 0; fold > 1 && r < t / fold; r++) b->tokens[r] = b->tokens[r * fold];
    float *logits;
    if ((st = mt_state_step(s, b->tokens, &logits, err))) break;
    for (size_t r = 0; fold > 1 && r < t; r++) b->rows[r] = (int32_t)(r / fold);
    float *wide = fold > 1 ? mt_logits_spread(logits, b->rows, t, vocab) : NULL;
    if (fold > 1 && !wide) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
    if (!st)
      st = mt_search_step_many(b->stepping, b->n_live, sc, wide ? wide : logits, b->parents,
                               mt_state_pool(s), err);
    free(wide);
    if (st) break;
    size_t keep = 0, live = 0, row = 0;
    for (size_t a = 0; a < b->n_live; a++) {
      struct mt_search *x = b->stepping[a];
      size_t k_rows = (size_t)mt_search_rows(x);
      if (!mt_search_done(x)) {
        for (size_t k = 0; k < k_rows; k++)
          b->rows[keep++] = (int32_t)((row + (size_t)b->parents[row + k]) / fold);
        b->live[live++] = b->live[a];
      }
      row += k_rows;
    }
    b->n_live = live;
    if (!st && live) st = mt_state_select(s, b->rows, keep, err);
  }
  return st;
}

tolk_status mt_generate(const struct mt_config *cfg, const tolk_generate_params *p, struct mt_state *s,
                        size_t n, tolk_generation *out, tolk_error *err) {
  struct batch b;
  memset(&b, 0, sizeof b);
  size_t copies = 1;
  tolk_status st = batch_init(cfg, p, n, &b, &copies, err);
  struct mt_scratch *sc =
      st ? NULL : mt_scratch_new((size_t)cfg->vocab_size, tolk_pool_threads(mt_state_pool(s)));
  if (!st && !sc) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "generate: out of memory");
  /* Every source row becomes one row per beam (or sample copy), after the
   * first step (step_loop). */
  size_t per = st ? 0 : copies * (size_t)mt_search_rows(b.search[0]);
  if (!st) st = step_loop(&b, s, sc, per, (size_t)cfg->vocab_size, err);
  size_t R = (size_t)p->num_return_sequences, per_result = copies > 1 ? 1 : R;
  for (size_t i = 0; !st && i < b.n_search; i++) st = mt_search_result(b.search[i], &out[i * per_result], err);
  if (st) tolk_generation_free(out, n * R);
  mt_scratch_free(sc);
  batch_free(&b);
  return st;
}
