/*
 * translator.c — the public translator: a model folder opened once
 * (configuration, checksums, tokenizer, encoder and decoder sessions), then
 * generate() over id sequences and translate() over texts. Sources are
 * sorted by length and cut into batches under a token budget (padding
 * counted), so similar lengths share a run and little is wasted on padding;
 * results come back in the caller's order.
 */
#include <stdlib.h>
#include <string.h>

#include "mt.h"

struct tolk_translator {
  struct mt_files files;
  struct mt_config cfg;
  bool verified;
  struct mt_model *model;
  tolk_tokenizer *tok;
};

tolk_translator_params tolk_translator_default_params(void) {
  tolk_translator_params p = {0, 0, 1, 0, 0, 0, NULL};
  return p;
}

/* The shortlist, with the ids CTranslate2 always includes (</s>, <unk>, the
 * pad) and those the search needs whatever the sources (the decoder start,
 * the forced EOS). */
static tolk_status load_vmap(const tolk_translator *t, const char *path, struct mt_vmap **out, tolk_error *err) {
  tolk_special_ids sp = tolk_tokenizer_special_ids(t->tok);
  int32_t always[] = {sp.eos, sp.unk, sp.pad, t->cfg.eos, t->cfg.pad, t->cfg.decoder_start, t->cfg.forced_eos};
  return mt_vmap_load(path, t->tok, (size_t)t->cfg.vocab_size, always, sizeof always / sizeof *always, out, err);
}

int tolk_translator_vmap_info(const tolk_translator *t, tolk_vmap_info *out) {
  const struct mt_vmap *v = mt_model_vmap(t->model);
  if (!v) return 0;
  struct mt_vmap_stats s = mt_vmap_stats(v);
  *out = (tolk_vmap_info){s.lines, s.rules, s.always, s.unknown_sources, s.unknown_targets, s.duplicate_keys};
  return 1;
}

tolk_status tolk_translator_create(const char *model_dir, tolk_translator_params params,
                                   tolk_translator **out, tolk_error *err) {
  *out = NULL;
  if (!model_dir) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "translator: no model folder");
  tolk_translator *t = calloc(1, sizeof *t);
  if (!t) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  tolk_status st = mt_files_find(model_dir, params.int8 != 0, &t->files, err);
  if (!st && params.verify) st = mt_manifest_verify(&t->files, &t->verified, err);
  if (!st) st = mt_config_load(t->files.root, &t->cfg, err);
  if (!st) st = tolk_tokenizer_create(t->files.root, tolk_tokenizer_default_params(), &t->tok, err);
  if (!st && tolk_tokenizer_vocab_size(t->tok) > (size_t)t->cfg.vocab_size)
    st = tolk_fail(err, TOLK_ERR_INVALID_MODEL, "%s: vocab.json has %zu entries but config.json's vocab_size is %d",
                   model_dir, tolk_tokenizer_vocab_size(t->tok), t->cfg.vocab_size);
  struct mt_vmap *vmap = NULL;
  if (!st && params.vmap) st = load_vmap(t, params.vmap, &vmap, err);
  if (!st) st = mt_model_open(&t->files, &t->cfg, &params, vmap, &t->model, err);
  if (st) {
    tolk_translator_free(t);
    return st;
  }
  *out = t;
  return TOLK_OK;
}

void tolk_translator_free(tolk_translator *t) {
  if (!t) return;
  mt_model_close(t->model);
  tolk_tokenizer_free(t->tok);
  mt_config_release(&t->cfg);
  free(t);
}

const tolk_tokenizer *tolk_translator_tokenizer(const tolk_translator *t) { return t->tok; }

int mt_max_positions(const tolk_translator *t) { return t->cfg.max_positions; }
const struct mt_model *mt_translator_model(const tolk_translator *t) { return t->model; }
const struct mt_config *mt_translator_config(const tolk_translator *t) { return &t->cfg; }

void mt_params_fit(const tolk_translator *t, tolk_generate_params *p) {
  if ((p->max_new_tokens > 0 ? 1 + p->max_new_tokens : p->max_length) > t->cfg.max_positions)
    p->max_length = t->cfg.max_positions, p->max_new_tokens = 0;
}

tolk_translator_info tolk_translator_describe(const tolk_translator *t) {
  const struct mt_files *f = &t->files;
  const struct mt_config *c = &t->cfg;
  tolk_translator_info i = {f->root, f->encoder, f->has_separate ? f->decoder : "",
                            f->has_separate ? f->decoder_past : "", f->has_separate ? "" : f->merged,
                            c->vocab_size, c->d_model, c->decoder_layers, c->decoder_heads, c->max_positions,
                            c->decoder_start, c->eos, c->pad, t->verified, f->int8};
  return i;
}

tolk_generate_params tolk_generate_default_params(const tolk_translator *t) {
  tolk_generate_params p = t->cfg.gen;
  p.batch_tokens = 4096;
  p.output_scores = 1;
  return p;
}

void tolk_generation_free(tolk_generation *g, size_t n) {
  if (!g) return;
  for (size_t i = 0; i < n; i++) {
    free(g[i].ids);
    free(g[i].token_scores);
    g[i].ids = NULL;
    g[i].token_scores = NULL;
    g[i].n = 0;
  }
}

/* Sources sorted by length, longest first (ties keep input order). */
struct order {
  const tolk_ids *src;
  size_t index;
};

static int by_length(const void *a, const void *b) {
  const struct order *x = a, *y = b;
  if (x->src->n != y->src->n) return x->src->n < y->src->n ? 1 : -1;
  return x->index < y->index ? -1 : 1;
}

/* Encodes and generates one batch: order[0..n), all padded to order[0]'s
 * length. */
static tolk_status run_batch(const tolk_translator *t, const struct order *order, size_t n,
                             const tolk_generate_params *p, tolk_generation *out, tolk_error *err) {
  size_t len = order[0].src->n, R = (size_t)p->num_return_sequences;
  int32_t *ids = malloc(n * len * sizeof *ids), *lens = malloc(n * sizeof *lens);
  tolk_generation *res = calloc(n * R, sizeof *res);
  tolk_status st = ids && lens && res ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  for (size_t i = 0; i < n && !st; i++) {
    const tolk_ids *s = order[i].src;
    for (size_t c = 0; c < len; c++) ids[i * len + c] = c < s->n ? s->ids[c] : t->cfg.pad;
    lens[i] = (int32_t)s->n;
  }
  struct mt_state *state = NULL;
  if (!st) st = mt_state_begin(t->model, ids, lens, n, len, &state, err);
  if (!st) st = mt_generate(&t->cfg, p, state, n, res, err);
  mt_state_free(state);
  for (size_t i = 0; i < n && !st; i++)
    for (size_t r = 0; r < R; r++) out[order[i].index * R + r] = res[i * R + r];
  if (st) tolk_generation_free(res, n * R);
  free(res);
  free(ids);
  free(lens);
  return st;
}

tolk_status tolk_translator_generate(const tolk_translator *t, const tolk_ids *sources, size_t n,
                                     const tolk_generate_params *params, tolk_generation *out,
                                     tolk_error *err) {
  tolk_generate_params p = params ? *params : tolk_generate_default_params(t);
  if (n == 0) return TOLK_OK;
  if (!sources || !out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "generate: null argument");
  for (size_t i = 0; i < n; i++) {
    if (sources[i].n == 0 || (sources[i].n > (size_t)t->cfg.max_positions))
      return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                       "generate: source %zu has %zu ids; the model takes 1 to %d (split longer texts)", i,
                       sources[i].n, t->cfg.max_positions);
    for (size_t k = 0; k < sources[i].n; k++)
      if (sources[i].ids[k] < 0 || sources[i].ids[k] >= t->cfg.vocab_size)
        return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "generate: source %zu: id %d at %zu is outside the vocabulary",
                         i, sources[i].ids[k], k);
  }
  mt_params_fit(t, &p);
  struct order *order = malloc(n * sizeof *order);
  if (!order) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  for (size_t i = 0; i < n; i++) order[i] = (struct order){&sources[i], i};
  qsort(order, n, sizeof *order, by_length);
  memset(out, 0, n * (size_t)p.num_return_sequences * sizeof *out);
  tolk_status st = TOLK_OK;
  for (size_t start = 0; start < n && !st;) {
    /* Padded cost of a batch: rows × longest (the first) × beams. */
    size_t end = start + 1, per = order[start].src->n * (size_t)p.num_beams;
    while (end < n && (p.batch_tokens <= 0 || (end - start + 1) * per <= (size_t)p.batch_tokens)) end++;
    st = run_batch(t, order + start, end - start, &p, out, err);
    start = end;
  }
  if (st) tolk_generation_free(out, n * (size_t)p.num_return_sequences);
  free(order);
  return st;
}

/* A copy of text with `tag` and a space in front, unless it has a tag. */
static char *tagged(const char *text, const char *tag) {
  size_t tl = tag && strncmp(text, ">>", 2) != 0 ? strlen(tag) : 0, l = strlen(text);
  char *s = malloc(tl + 1 + l + 1);
  if (!s) return NULL;
  if (tl) {
    memcpy(s, tag, tl);
    s[tl++] = ' ';
  }
  memcpy(s + tl, text, l + 1);
  return s;
}

tolk_status tolk_translator_translate(const tolk_translator *t, const char *const *texts, size_t n,
                                      const char *tag, const tolk_generate_params *params, char **out,
                                      tolk_error *err) {
  if (!t || (n && (!texts || !out))) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "translate: null argument");
  for (size_t i = 0; i < n; i++)
    if (!texts[i]) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "translate: text %zu is null", i);
  tolk_generate_params p = params ? *params : tolk_generate_default_params(t);
  p.output_scores = 0; /* strings out: no score is returned */
  size_t R = (size_t)p.num_return_sequences;
  char **src = calloc(n ? n : 1, sizeof *src);
  tolk_ids *ids = calloc(n ? n : 1, sizeof *ids);
  size_t n_gen = n * R;
  tolk_generation *gen = calloc(n_gen ? n_gen : 1, sizeof *gen);
  tolk_status st = src && ids && gen ? TOLK_OK : tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  for (size_t i = 0; i < n && !st; i++)
    if (!(src[i] = tagged(texts[i], tag))) st = tolk_fail(err, TOLK_ERR_NO_MEMORY, "translator: out of memory");
  if (!st) st = tolk_tokenizer_encode_batch(t->tok, (const char *const *)src, NULL, n, 0, ids, err);
  bool encoded = !st;
  if (!st) st = tolk_translator_generate(t, ids, n, &p, gen, err);
  for (size_t i = 0; i < n && !st; i++) {
    tolk_ids best = {gen[i * R].ids, gen[i * R].n, 0};
    st = tolk_tokenizer_decode_batch(t->tok, &best, 1, TOLK_DECODE_SKIP_SPECIAL, &out[i], err);
    if (st) tolk_strings_free(out, i);
  }
  if (gen) tolk_generation_free(gen, n_gen);
  for (size_t i = 0; src && i < n; i++) free(src[i]);
  if (encoded) tolk_ids_free(ids, n);
  free(src);
  free(ids);
  free(gen);
  return st;
}
