/*
 * batcher.c — continuous batching: one running batch that sentences join
 * and leave between decoder steps. Admitting sentences runs their encoder
 * and their first decoder step as a group of their own, then appends their
 * rows to the running batch (mt_state_append: the source side widened, the
 * self-attention caches ragged); every step then runs once for all rows,
 * and a sentence that finishes — or is dropped — leaves at once. Each
 * sentence has its own search (search.c) over its own rows, and the
 * kernels are batch-invariant, so its ids and scores are exactly those it
 * gets alone, whatever joins or leaves around it.
 *
 * A model whose decoder cannot take rows of different lengths (a merged
 * decoder, an export whose position lookup is not recognised) keeps each
 * admitted group as a batch of its own and steps them one after the other:
 * the same results, without the shared steps.
 *
 * Single-threaded: the caller (the service's scheduler thread) serialises
 * every call.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/pool.h"
#include "mt.h"

struct member {
  uint64_t id;
  struct mt_search *search;
};

/* Rows of a group's state belong to its members in order, each
 * mt_search_rows of them. */
struct group {
  struct mt_state *state;
  struct member *m;
  size_t n, cap;
};

struct mt_batcher {
  const struct mt_model *model;
  const struct mt_config *cfg;
  bool ragged;
  bool broken; /* a join failed part way: the running batch is unusable */
  struct group *g;
  size_t n_groups, cap_groups;
  struct mt_scratch *scratch;
  /* per-step buffers, grown as needed */
  int32_t *tokens, *keep, *parents;
  struct mt_search **stepping; /* a group's searches, in row order */
  size_t cap_rows;
  struct mt_done *done;
  size_t n_done, cap_done;
};

tolk_status mt_batcher_new(const tolk_translator *tr, struct mt_batcher **out, tolk_error *err) {
  *out = NULL;
  struct mt_batcher *b = calloc(1, sizeof *b);
  if (!b) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
  b->model = mt_translator_model(tr);
  b->cfg = mt_translator_config(tr);
  b->ragged = mt_model_ragged(b->model);
  b->scratch = mt_scratch_new((size_t)b->cfg->vocab_size, tolk_pool_threads(mt_model_pool(b->model)));
  if (!b->scratch) {
    free(b);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
  }
  *out = b;
  return TOLK_OK;
}

static void group_free(struct group *g) {
  mt_state_free(g->state);
  for (size_t i = 0; i < g->n; i++) mt_search_free(g->m[i].search);
  free(g->m);
}

void mt_batcher_free(struct mt_batcher *b) {
  if (!b) return;
  for (size_t i = 0; i < b->n_groups; i++) group_free(&b->g[i]);
  free(b->g);
  for (size_t i = 0; i < b->n_done; i++) mt_search_free(b->done[i].search);
  free(b->done);
  mt_scratch_free(b->scratch);
  free(b->tokens);
  free(b->keep);
  free(b->parents);
  free(b->stepping);
  free(b);
}

bool mt_batcher_ragged(const struct mt_batcher *b) { return b->ragged; }
bool mt_batcher_broken(const struct mt_batcher *b) { return b->broken; }

size_t mt_batcher_rows(const struct mt_batcher *b) {
  size_t rows = 0;
  for (size_t i = 0; i < b->n_groups; i++) rows += mt_state_rows(b->g[i].state);
  return rows;
}

size_t mt_batcher_sentences(const struct mt_batcher *b) {
  size_t n = 0;
  for (size_t i = 0; i < b->n_groups; i++) n += b->g[i].n;
  return n;
}

size_t mt_batcher_source_len(const struct mt_batcher *b) {
  size_t len = 0;
  for (size_t i = 0; i < b->n_groups; i++) {
    size_t l = mt_state_source_len(b->g[i].state);
    len = l > len ? l : len;
  }
  return len;
}

static bool reserve_rows(struct mt_batcher *b, size_t rows) {
  if (rows <= b->cap_rows) return true;
  size_t cap = rows > 2 * b->cap_rows ? rows : 2 * b->cap_rows;
  int32_t **bufs[3] = {&b->tokens, &b->keep, &b->parents};
  for (int i = 0; i < 3; i++) {
    int32_t *x = realloc(*bufs[i], cap * sizeof *x);
    if (!x) return false;
    *bufs[i] = x;
  }
  /* A member has at least one row, so a group has no more members than rows. */
  struct mt_search **x = realloc(b->stepping, cap * sizeof *x);
  if (!x) return false;
  b->stepping = x;
  b->cap_rows = cap;
  return true;
}

/* Room for `more` finished sentences, so that recording them cannot fail. */
static bool reserve_done(struct mt_batcher *b, size_t more) {
  if (b->n_done + more <= b->cap_done) return true;
  size_t cap = b->n_done + more > 2 * b->cap_done ? b->n_done + more : 2 * b->cap_done;
  struct mt_done *d = realloc(b->done, cap * sizeof *d);
  if (!d) return false;
  b->done = d;
  b->cap_done = cap;
  return true;
}

/* One decoder step of group g: every member's search consumes its rows'
 * logits; finished members leave (reported), the others' rows follow their
 * parents. The first step (`first`: the state has one row per member, as
 * encode_group left it): every row of a member (its beams) starts from the
 * decoder start token alone, so the step runs once per member — the step
 * that computes the cross-attention keys and values of its source — and its
 * logits are copied to each of the member's rows (bit for bit what each
 * would compute: rows are batch-invariant); the chosen rows are then all made
 * from that one row. */
static tolk_status group_step(struct mt_batcher *b, struct group *g, bool first, tolk_error *err) {
  size_t rows = 0, vocab = (size_t)b->cfg->vocab_size;
  for (size_t i = 0; i < g->n; i++) rows += (size_t)mt_search_rows(g->m[i].search);
  if (!reserve_rows(b, rows)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
  size_t t = 0;
  for (size_t i = 0; i < g->n; i++) {
    size_t k = first ? 1 : (size_t)mt_search_rows(g->m[i].search);
    memcpy(b->tokens + t, mt_search_tokens(g->m[i].search), k * sizeof *b->tokens);
    t += k;
  }
  if (!reserve_done(b, g->n)) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
  float *logits;
  tolk_status st = mt_state_step(g->state, b->tokens, &logits, err);
  float *wide = NULL;
  if (!st && first && rows > g->n) {
    for (size_t i = 0, r = 0; i < g->n; i++)
      for (int j = 0; j < mt_search_rows(g->m[i].search); j++) b->keep[r++] = (int32_t)i;
    wide = mt_logits_spread(logits, b->keep, rows, vocab);
    if (!wide) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
  }
  size_t keep = 0, live = 0, row = 0;
  for (size_t i = 0; i < g->n; i++) b->stepping[i] = g->m[i].search;
  /* A failure leaves the group as it was: the caller fails the whole batch. */
  if (!st)
    st = mt_search_step_many(b->stepping, g->n, b->scratch, wide ? wide : logits, b->parents,
                             mt_state_pool(g->state), err);
  free(wide);
  if (st) return st;
  for (size_t i = 0; i < g->n; i++) {
    struct member *m = &g->m[i];
    size_t k = (size_t)mt_search_rows(m->search);
    if (mt_search_done(m->search)) {
      b->done[b->n_done++] = (struct mt_done){m->id, m->search};
    } else {
      for (size_t j = 0; j < k; j++)
        b->keep[keep++] = (int32_t)(first ? i : row + (size_t)b->parents[row + j]);
      g->m[live++] = *m;
    }
    row += k;
  }
  g->n = live;
  return mt_state_select(g->state, b->keep, keep, err);
}

static void drop_empty_groups(struct mt_batcher *b) {
  size_t w = 0;
  for (size_t i = 0; i < b->n_groups; i++) {
    if (b->g[i].n)
      b->g[w++] = b->g[i];
    else
      group_free(&b->g[i]);
  }
  b->n_groups = w;
}

tolk_status mt_batcher_step(struct mt_batcher *b, tolk_error *err) {
  tolk_status st = TOLK_OK;
  for (size_t i = 0; i < b->n_groups && !st; i++) st = group_step(b, &b->g[i], false, err);
  drop_empty_groups(b);
  return st;
}

/* The new group's state: its sources encoded, padded to the longest, and
 * each source row made one row per beam. */
static tolk_status encode_group(struct mt_batcher *b, const tolk_ids *src, size_t n, struct group *g,
                                tolk_error *err) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len = src[i].n > len ? src[i].n : len;
  size_t cells = n * len;
  int32_t *ids = malloc((cells ? cells : 1) * sizeof *ids), *lens = malloc(n * sizeof *lens);
  tolk_status st = ids && lens ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
  for (size_t i = 0; i < n && !st; i++) {
    for (size_t c = 0; c < len; c++) ids[i * len + c] = c < src[i].n ? src[i].ids[c] : b->cfg->pad;
    lens[i] = (int32_t)src[i].n;
  }
  if (!st) st = mt_state_begin(b->model, ids, lens, n, len, &g->state, err);
  free(ids);
  free(lens);
  /* One row per member until its first step (group_step) makes its beams. */
  return st;
}

tolk_status mt_batcher_add(struct mt_batcher *b, const tolk_ids *src, const tolk_generate_params *const *params,
                           const uint64_t *ids, size_t n, tolk_error *err) {
  if (!n) return TOLK_OK;
  struct group g = {NULL, calloc(n, sizeof *g.m), 0, n};
  tolk_status st = g.m ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
  for (size_t i = 0; i < n && !st; i++) {
    if (params[i]->num_beams > MT_MAX_BEAMS)
      st = tolk_fail(err, TOLK_ERR_LIMIT, "generate: num_beams %d is over the %d this engine takes",
                     params[i]->num_beams, MT_MAX_BEAMS);
    else if (params[i]->do_sample && params[i]->num_return_sequences > 1)
      st = tolk_fail(err, TOLK_ERR_UNSUPPORTED, "batcher: sampling several sequences per sentence");
    if (!st) st = mt_search_new(b->cfg, params[i], &g.m[i].search, err);
    if (!st) g.m[g.n++].id = ids[i];
  }
  if (!st) st = encode_group(b, src, n, &g, err);
  /* The first step runs on the group alone (the decoder without a cache),
   * then its rows join the running batch. */
  if (!st) st = group_step(b, &g, true, err);
  if (!st && g.n && b->ragged && b->n_groups) {
    struct group *run = &b->g[0];
    if (run->n + g.n > run->cap) {
      size_t cap = run->n + g.n > 2 * run->cap ? run->n + g.n : 2 * run->cap;
      struct member *m = realloc(run->m, cap * sizeof *m);
      if (!m) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
      else run->m = m, run->cap = cap;
    }
    if (!st && (st = mt_state_append(run->state, g.state, err))) b->broken = true;
    if (!st) {
      memcpy(run->m + run->n, g.m, g.n * sizeof *g.m);
      run->n += g.n;
      g.n = 0;
    }
  } else if (!st && g.n) {
    if (b->n_groups == b->cap_groups) {
      size_t cap = b->cap_groups ? 2 * b->cap_groups : 4;
      struct group *ng = realloc(b->g, cap * sizeof *ng);
      if (!ng) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
      else b->g = ng, b->cap_groups = cap;
    }
    if (!st) {
      b->g[b->n_groups++] = g;
      return TOLK_OK;
    }
  }
  group_free(&g);
  return st;
}

bool mt_batcher_drop(struct mt_batcher *b, uint64_t id, tolk_status *st, tolk_error *err) {
  *st = TOLK_OK;
  for (size_t gi = 0; gi < b->n_groups; gi++) {
    struct group *g = &b->g[gi];
    size_t at = 0;
    while (at < g->n && g->m[at].id != id) at++;
    if (at == g->n) continue;
    if (!reserve_rows(b, mt_state_rows(g->state))) {
      *st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "batcher: out of memory");
      return true;
    }
    size_t row = 0, keep = 0;
    for (size_t i = 0; i < g->n; i++) {
      size_t k = (size_t)mt_search_rows(g->m[i].search);
      for (size_t j = 0; i != at && j < k; j++) b->keep[keep++] = (int32_t)(row + j);
      row += k;
    }
    if ((*st = mt_state_select(g->state, b->keep, keep, err))) return true;
    mt_search_free(g->m[at].search);
    memmove(g->m + at, g->m + at + 1, (g->n - at - 1) * sizeof *g->m);
    g->n--;
    drop_empty_groups(b);
    return true;
  }
  return false;
}

void mt_batcher_reset(struct mt_batcher *b) {
  for (size_t i = 0; i < b->n_groups; i++) group_free(&b->g[i]);
  b->n_groups = 0;
  b->broken = false;
  mt_batcher_clear_finished(b);
}

struct mt_done *mt_batcher_finished(struct mt_batcher *b, size_t *n) {
  *n = b->n_done;
  return b->done;
}

void mt_batcher_clear_finished(struct mt_batcher *b) {
  for (size_t i = 0; i < b->n_done; i++) mt_search_free(b->done[i].search);
  b->n_done = 0;
}

size_t mt_batcher_ids(const struct mt_batcher *b, uint64_t *out, size_t max) {
  size_t n = 0;
  for (size_t gi = 0; gi < b->n_groups; gi++)
    for (size_t i = 0; i < b->g[gi].n; i++) {
      if (n < max) out[n] = b->g[gi].m[i].id;
      n++;
    }
  return n;
}
